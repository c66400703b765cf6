-- 001_init.sql — the tuning database, first version (SQLite's text;
-- PostgreSQL's, in its types, is postgresql/001_init.sql).
--
-- Every measured candidate is a row of records, keyed by a unique id
-- (SHA-256 of workload key, full target key and trace) so that imports merge
-- idempotently.  Records and best rows are keyed by the FULL target key
-- ("cpu:x86_64+avx2+fma", "cuda:sm_90"): a schedule is never applied across
-- targets.  Times are seconds since the epoch (REAL).

CREATE TABLE targets (
	key      TEXT PRIMARY KEY,        -- full target key
	kind     TEXT NOT NULL,           -- "cpu" or "cuda"
	created  REAL NOT NULL
);

CREATE TABLE workloads (
	key       TEXT PRIMARY KEY,       -- SHA-256 of the canonical JSON
	op        TEXT NOT NULL,
	canonical TEXT NOT NULL,          -- canonical workload JSON
	flops     REAL NOT NULL,          -- per call, for GFLOP/s
	created   REAL NOT NULL
);
CREATE INDEX workloads_op ON workloads(op);

-- A job's lifecycle: queued -> running -> done | failed | cancelled
-- (running -> queued when a daemon stops or dies before the job ends).
CREATE TABLE jobs (
	id           INTEGER PRIMARY KEY,
	workload_key TEXT NOT NULL REFERENCES workloads(key),
	target       TEXT NOT NULL REFERENCES targets(key),
	trials       INTEGER NOT NULL,    -- wanted in all for (workload, target)
	batch        INTEGER NOT NULL,
	state        TEXT NOT NULL,
	cached       INTEGER NOT NULL DEFAULT 0,  -- born done from the cache
	trials_done  INTEGER NOT NULL DEFAULT 0,
	errors       INTEGER NOT NULL DEFAULT 0,
	best_us      REAL,
	message      TEXT,
	created      REAL NOT NULL,
	started      REAL,
	finished     REAL
);
CREATE INDEX jobs_state ON jobs(state);
CREATE INDEX jobs_wt ON jobs(workload_key, target);

CREATE TABLE records (
	id            TEXT PRIMARY KEY,   -- sha256(workload_key \n target \n trace)
	workload_key  TEXT NOT NULL REFERENCES workloads(key),
	target        TEXT NOT NULL REFERENCES targets(key),
	trace         TEXT NOT NULL,      -- JSON, replayable
	status        TEXT NOT NULL,      -- a measurement status: "ok", "build_error", ...
	latency_us    REAL,               -- median per call, when ok
	max_rel_error REAL,
	message       TEXT,
	worker        TEXT,
	job_id        INTEGER,
	created       REAL NOT NULL
);
CREATE INDEX records_wt ON records(workload_key, target);

-- The best ok record of each (workload, target), and how many candidates
-- were measured for it in all.
CREATE TABLE best (
	workload_key TEXT NOT NULL REFERENCES workloads(key),
	target       TEXT NOT NULL REFERENCES targets(key),
	op           TEXT NOT NULL,
	record_id    TEXT REFERENCES records(id),   -- NULL while nothing was ok
	latency_us   REAL,
	trials       INTEGER NOT NULL,
	updated      REAL NOT NULL,
	PRIMARY KEY (workload_key, target)
);
CREATE INDEX best_op ON best(op, target);

CREATE TABLE workers (
	id         TEXT PRIMARY KEY,
	target     TEXT NOT NULL,
	name       TEXT,
	state      TEXT NOT NULL,         -- "live" or "gone"
	registered REAL NOT NULL,
	last_seen  REAL NOT NULL
);

CREATE TABLE cost_models (
	target_kind TEXT PRIMARY KEY,     -- one model per target kind
	name        TEXT NOT NULL,
	model       BLOB NOT NULL,
	updated     REAL NOT NULL
);
