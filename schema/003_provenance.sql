-- 003_provenance.sql — who measured a record, and whether it may be a best
-- (one text for both backends).
--
-- origin: "measured" (by a worker of this tird, for one of its jobs) or
-- "imported" (POST /v1/records).  trusted: the record counts for its
-- (workload, target): in best.trials and as a candidate best.  A record
-- measured here is trusted; an import is trusted only when the admin said
-- so (POST /v1/records?trust=1), else it waits until a worker of this tird
-- measures its trace again, which replaces it.  source: where an import came
-- from (the token's identity and the address that posted it); token: the
-- identity of the token that measured (the worker's) or imported it; host:
-- the worker's name and address, or the importer's address.
--
-- Records stored before this migration: those without a job were imports
-- (the only way to store one); they keep the trust they had (they were
-- bests already), marked imported so that `tirctl records rm` can find them.

ALTER TABLE records ADD COLUMN origin TEXT NOT NULL DEFAULT 'measured';
ALTER TABLE records ADD COLUMN trusted INTEGER NOT NULL DEFAULT 1;
ALTER TABLE records ADD COLUMN source TEXT;
ALTER TABLE records ADD COLUMN token TEXT;
ALTER TABLE records ADD COLUMN host TEXT;
UPDATE records SET origin = 'imported', source = 'stored before provenance (schema 3)'
	WHERE job_id IS NULL;
CREATE INDEX records_best ON records(workload_key, target, trusted, latency_us);
