-- 002_job_search.sql — the search options of a job ("search" in POST /v1/jobs;
-- SQLite's text, PostgreSQL's is postgresql/002_job_search.sql).
--
-- cost_model: the cost model the search ranks candidates with, "xgboost" (the
-- shared model of the target kind) or "random"; the jobs stored before this
-- migration ran under xgboost.  seed: the search's seed as the user gave it,
-- NULL when none was given (tird then derives one from the job id and the
-- records already stored, each time the job runs).

ALTER TABLE jobs ADD COLUMN cost_model TEXT NOT NULL DEFAULT 'xgboost';
ALTER TABLE jobs ADD COLUMN seed INTEGER;
