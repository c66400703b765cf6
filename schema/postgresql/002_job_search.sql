-- postgresql/002_job_search.sql — schema/002_job_search.sql for PostgreSQL:
-- the seed is a BIGINT (SQLite's INTEGER holds 8 bytes, PostgreSQL's 4).

ALTER TABLE jobs ADD COLUMN cost_model TEXT NOT NULL DEFAULT 'xgboost';
ALTER TABLE jobs ADD COLUMN seed BIGINT;
