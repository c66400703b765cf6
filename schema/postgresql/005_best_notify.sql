-- 005_best_notify.sql (PostgreSQL): every statement that changes the best
-- table tells the other replicas, which keep GET /v1/best answers in memory
-- (daemon/api.c): NOTIFY on channel tird_best, delivered to each replica's
-- listener (schema/postgres.c, pg_watch) when the transaction commits.
CREATE FUNCTION tird_best_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('tird_best', '');
	RETURN NULL;
END
$$;
CREATE TRIGGER best_notify AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON best
	FOR EACH STATEMENT EXECUTE FUNCTION tird_best_notify();
