-- 004_job_lease.sql — several tird replicas on one database (one text for
-- both backends: DOUBLE PRECISION is SQLite's REAL and PostgreSQL's float8).
--
-- A job is run by one replica at a time, the one that claimed it: owner is
-- that replica's id (hostname, pid and start time), lease_until the time
-- (seconds since the epoch) until which the claim holds unless renewed.  A
-- running job whose lease_until has passed is claimable again: its owner
-- died or stalled, and another replica takes it over.  cancel_requested is
-- set by whichever replica a user asked to cancel the job; its owner polls
-- it with each renewal and stops the job.
--
-- The cost model of a target key is written only by the replica that holds
-- its writer lease (writer, writer_until), which its writer renews while it
-- lives; the other replicas read the model, and take the lease over once it
-- has lapsed; the first write of a model takes its lease.

ALTER TABLE jobs ADD COLUMN owner TEXT;
ALTER TABLE jobs ADD COLUMN lease_until DOUBLE PRECISION;
ALTER TABLE jobs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;
ALTER TABLE cost_models ADD COLUMN writer TEXT;
ALTER TABLE cost_models ADD COLUMN writer_until DOUBLE PRECISION;
