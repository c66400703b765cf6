-- 008_job_patience.sql — a job's patience (one text for both backends): the
-- rounds in a row that measure nothing faster than the best before its
-- search ends short of its trials ("search": {"patience": N} in POST
-- /v1/jobs; 0: never, the whole budget).  NULL when the job named none: the
-- daemon's setting default_patience applies each time the job runs.  Jobs
-- stored before this migration named none.

ALTER TABLE jobs ADD COLUMN patience INTEGER;
