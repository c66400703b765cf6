-- 006_worker_leases.sql (SQLite) — the worker registry and the batches
-- leased to workers, in the database, so that a worker registered with one
-- replica may pull from and post results to any other.
--
-- A worker's row says whom it acts for (token: the identity of the token it
-- registered with), where it registered from (peer) and the emulator it
-- runs under ("" on real hardware).
--
-- A batch is the candidates a job's tuning thread, on replica `replica`,
-- waits to have measured (one batch_items row per candidate, i from 0).
-- Its state moves pending -> leased (worker, deadline) -> measured (the
-- items' results, posted by that worker) -> stored (the tuning thread
-- stored them; not_stored of them refused) and the row is deleted once the
-- worker was answered; a lease past its deadline, or of a worker gone, goes
-- back to pending.  A batch whose job is no longer run by its replica is
-- never leased and is purged.  (PostgreSQL: postgresql/006_worker_leases.sql,
-- the same tables with an identity column.)

ALTER TABLE workers ADD COLUMN token TEXT NOT NULL DEFAULT '';
ALTER TABLE workers ADD COLUMN peer TEXT NOT NULL DEFAULT '';
ALTER TABLE workers ADD COLUMN emulator TEXT NOT NULL DEFAULT '';
CREATE INDEX workers_state ON workers(state, target);

CREATE TABLE batches (
	id           INTEGER PRIMARY KEY,
	job_id       INTEGER NOT NULL,
	replica      TEXT NOT NULL,
	target       TEXT NOT NULL,
	workload_key TEXT NOT NULL,
	canonical    TEXT NOT NULL,
	n            INTEGER NOT NULL,
	state        TEXT NOT NULL,      -- pending, leased, measured, stored
	worker       TEXT,               -- the worker that holds (held) the lease
	deadline     DOUBLE PRECISION,   -- the lease's end, unless renewed
	token        TEXT,               -- measured: the poster's token identity,
	host         TEXT,               -- and its name and address
	not_stored   INTEGER NOT NULL DEFAULT 0,
	cache_hits   INTEGER NOT NULL DEFAULT 0,  -- measured: compiles the poster's cache saved
	created      DOUBLE PRECISION NOT NULL
);
CREATE INDEX batches_state ON batches(state, target);

CREATE TABLE batch_items (
	batch_id      INTEGER NOT NULL REFERENCES batches(id) ON DELETE CASCADE,
	i             INTEGER NOT NULL,
	trace         TEXT NOT NULL,
	status        TEXT,              -- measured: the worker's results
	latency_us    DOUBLE PRECISION,
	max_rel_error DOUBLE PRECISION,
	message       TEXT,
	PRIMARY KEY (batch_id, i)
);
