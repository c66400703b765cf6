-- 005_best_notify.sql (SQLite): nothing.  On PostgreSQL this migration makes
-- every change of the best table notify the other replicas
-- (postgresql/005_best_notify.sql); an SQLite file has one tird, which
-- counts its own changes of the best rows.  Kept so that both backends have
-- the same schema versions.
SELECT 1;
