/*
 * store.h — the tuning database: the only code in tird that touches a
 * database.
 *
 * Design.  Two backends behind this one interface (backend.h): SQLite, one
 * file in WAL mode with a busy timeout (the default), and PostgreSQL through
 * libpq, chosen by a postgresql:// URL (built where configure found libpq).
 * The schema is brought up to date at open by the numbered migrations
 * (NNN_*.sql, embedded at build time; schema/postgresql/ holds PostgreSQL's
 * own text of those whose SQL is not portable), each in one transaction.
 * Every function below is one prepared statement or one transaction, the same
 * statements and transactions on both backends, so a kill -9 at any moment
 * leaves the database consistent and loses only what had not been committed.
 *
 * The store knows nothing of the IR: workloads, traces and targets are opaque
 * text (canonical JSON, trace JSON, full target keys) and numbers.
 *
 * Threads: a store may be used from any thread; calls are serialised by the
 * store's own mutex (one connection, not shared across statements).
 *
 * Errors: functions return 0 (or a count / id >= 0) on success and -1 on a
 * database error, with the message in *err when err is not NULL.  That
 * message may quote SQL and the database's own words: it is for the log, not
 * for a client.  Strings the caller receives in structs are malloc'd and
 * freed by the matching *_clear function.
 */
#ifndef TIRD_STORE_H
#define TIRD_STORE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct store store;

typedef struct store_error {
	char msg[256];
} store_error;

/* ---- store.c: opening, schema, time --------------------------------------- */

/* Opens the database `where` names and applies the migrations it lacks: a
 * postgresql:// (or postgres://) URL is a PostgreSQL database, which must
 * exist (libpq's URL: postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME[?...]);
 * anything else is the path of an SQLite file, created when missing.
 * Returns NULL with a message on failure (the password hidden). */
store *store_open(const char *where, store_error *err);
void store_close(store *s);
/* "sqlite" or "postgresql". */
const char *store_backend_name(store *s);
/* Whether the database may be shared by several tird replicas (PostgreSQL:
 * true; an SQLite file is one replica's).  Jobs are claimed under leases on
 * both; a shared store is also what tells a replica to leave the running
 * jobs of others alone at its start. */
bool store_shared(store *s);
/* How many times other processes have changed the best rows, as far as
 * this store has seen (*epoch, only ever growing), and whether it sees
 * them now: false while a shared store's watcher is not listening (a
 * reader must then not trust anything it kept of the best rows); on a
 * store no other process writes, always true with *epoch 0 (its own
 * changes are the caller's to count).  A change another replica commits is
 * counted within milliseconds (the NOTIFY of 005_best_notify.sql). */
bool store_best_epoch(store *s, uint64_t *epoch);
/* The location store_open was given, its password hidden: for logs. */
const char *store_location(store *s);
/* The schema version (the number of the last migration applied). */
int store_schema_version(store *s);
/* Seconds since the epoch, as the store records them. */
double store_now(void);

/* The unique id of a record: 64 hex digits of
 * SHA-256(workload_key "\n" target "\n" trace). */
void store_record_id(const char *workload_key, const char *target,
		     const char *trace, char out[65]);

/* ---- workloads and targets -------------------------------------------------- */

/* Inserts the workload if it is new (the key decides). */
int store_workload_put(store *s, const char *key, const char *op,
		       const char *canonical, double flops, store_error *err);
/* The canonical JSON and flops of a workload: 1 found (*canonical malloc'd),
 * 0 unknown, -1 error. op may be NULL; else *op is malloc'd. */
int store_workload_get(store *s, const char *key, char **canonical, char **op,
		       double *flops, store_error *err);
int store_target_put(store *s, const char *key, const char *kind, store_error *err);

/* ---- jobs -------------------------------------------------------------------- */

/* Job states, in the order of their lifecycle (jobs.c owns the transitions). */
#define STORE_JOB_STATES(X) \
	X(QUEUED,    "queued")     /* waiting for a tuning thread */ \
	X(RUNNING,   "running")    /* a tuning thread is measuring for it */ \
	X(DONE,      "done")       /* ended with a best record */ \
	X(FAILED,    "failed")     /* ended without one, or with an error */ \
	X(CANCELLED, "cancelled")  /* stopped by a user */

typedef enum {
#define STORE_JS_ENUM(id, name) STORE_JOB_##id,
	STORE_JOB_STATES(STORE_JS_ENUM)
#undef STORE_JS_ENUM
	STORE_JOB_NSTATES
} store_job_state;

const char *store_job_state_name(store_job_state s);
/* -1 for an unknown name. */
int store_job_state_parse(const char *name);

/* What a job asks of its search, as it was submitted ("search" in POST
 * /v1/jobs; 002_job_search.sql, 008_job_patience.sql): the cost model's
 * name ("" on insert: "xgboost", the column's default), the seed the user
 * gave (has_seed false: none, the daemon derives one per run), the flat
 * rounds that end the search, 0 none do (has_patience false: none named,
 * the daemon's default_patience applies).  The daemon's submission, its
 * job and the stored row carry this one struct. */
typedef struct store_search {
	char cost_model[16];
	bool has_seed;
	int64_t seed;
	bool has_patience;
	int patience;
} store_search;

typedef struct store_job {
	int64_t id;
	char workload_key[65];
	char target[128];
	int trials, batch;
	store_job_state state;
	bool cached;
	int trials_done, errors;
	double best_us;            /* 0: none yet */
	char *message;             /* malloc'd or NULL */
	double created, started, finished;   /* 0: not yet */
	store_search search;
	/* the claim (004_job_lease.sql), read back only: the replica that
	 * runs or last ran it ("" none), until when its lease holds (0: none),
	 * and whether a user asked it to stop */
	char owner[128];
	double lease_until;
	bool cancel_requested;
} store_job;

void store_job_clear(store_job *j);

/* Inserts a job (its id is assigned and written to j->id).  One transaction. */
int store_job_insert(store *s, store_job *j, store_error *err);
/* Moves job id from state `from` to `to`, with message (NULL keeps none) and
 * the time stamp the state implies (started / finished), in one transaction.
 * Returns 0, or 1 when the job was not in `from` (nothing changed), or -1. */
int store_job_transition(store *s, int64_t id, store_job_state from,
			 store_job_state to, const char *message, store_error *err);
/* Records a job's progress: only while `owner` holds its claim (owner
 * NULL: whoever runs it).  0 (also when the claim is another's: nothing
 * changed) or -1. */
int store_job_progress(store *s, int64_t id, const char *owner, int trials_done,
		       int errors, double best_us, store_error *err);

/* ---- jobs under leases: several replicas on one database ----------------------- */

/* A replica claims a job before it runs it, and holds the claim by renewing
 * its lease (lease_until, seconds since the epoch) more often than the lease
 * lasts.  A job is claimable when it is queued, or running under a lease
 * that has passed (its owner died or stalled: the claim takes it over).
 * Every call below is one transaction; on PostgreSQL the row is read with
 * FOR UPDATE SKIP LOCKED inside the store's write transaction, so two
 * replicas claiming at once never both win. */

/* Calls fn for each job claimable at `now`, oldest first.  Returns the count
 * or -1.  fn's job is cleared after the call. */
int store_jobs_claimable(store *s, double now,
			 void (*fn)(void *ctx, const store_job *j), void *ctx,
			 store_error *err);
/* Claims job id for `owner` until lease_until if it is claimable at `now`:
 * it becomes running, owned by owner, started now, its cancel request
 * cleared.  1 claimed, with *j (may be NULL; cleared by the caller) the row
 * as it was before the claim (state queued, or running under the lapsed
 * lease of j->owner: a takeover); 0 not claimable (another replica runs it,
 * it ended, or there is no such job); -1 error. */
int store_job_claim(store *s, int64_t id, const char *owner, double now,
		    double lease_until, store_job *j, store_error *err);
/* Extends owner's lease of running job id to lease_until.  1 held (and
 * *cancel_requested, may be NULL, says whether a user asked it to stop), 0
 * lost (another replica took it over, or it is no longer running), -1
 * error.  An owner whose lease passed but whom nobody displaced keeps it. */
int store_job_renew(store *s, int64_t id, const char *owner, double lease_until,
		    bool *cancel_requested, store_error *err);
/* store_job_transition for the owner of a claim: moves job id from `from`
 * to `to` only while owner holds it (state from, owner unchanged).  Leaving
 * running ends the lease (lease_until NULL; owner stays, as who ran it).
 * 0, or 1 when the state or the owner differ (nothing changed), or -1. */
int store_job_move(store *s, int64_t id, const char *owner, store_job_state from,
		   store_job_state to, const char *message, store_error *err);
/* Dedupe across replicas, in one transaction: a job of the same
 * (workload_key, target) queued or running is joined — *j becomes its row
 * (the caller's message pointer, if any, is replaced by a malloc'd one) and
 * *joined true — else j is inserted as store_job_insert does (*joined
 * false).  0 or -1. */
int store_job_insert_or_join(store *s, store_job *j, bool *joined, store_error *err);
/* Asks job id to stop: sets cancel_requested, which its owner reads with
 * its next renewal.  1 set, 0 the job is not queued or running (or unknown),
 * -1 error. */
int store_job_request_cancel(store *s, int64_t id, store_error *err);
/* 1 found, 0 unknown, -1 error. */
int store_job_get(store *s, int64_t id, store_job *j, store_error *err);
/* Calls fn for each job, newest first, at most limit (0: all); state < 0:
 * every state.  Returns the number of jobs or -1.  fn's job is cleared after
 * the call. */
int store_jobs_list(store *s, int state, int limit,
		    void (*fn)(void *ctx, const store_job *j), void *ctx,
		    store_error *err);

/* ---- records and best ----------------------------------------------------------- */

typedef struct store_record {
	char id[65];               /* "" on store_record_add: computed */
	const char *workload_key;
	const char *target;
	const char *trace;
	const char *status;        /* "ok", "build_error", ... */
	double latency_us;         /* when ok */
	double max_rel_error;      /* -1: not run */
	const char *message;       /* may be NULL */
	const char *worker;        /* may be NULL */
	int64_t job_id;            /* 0: none (an import) */
	double created;            /* 0: now */
	/* provenance (003_provenance.sql).  Zero: measured by a worker of this
	 * tird, trusted.  An import sets imported, and trusted only when the
	 * admin trusts it; an untrusted record is stored but counts for nothing
	 * (neither best.trials nor the best) until a measurement here of the
	 * same trace replaces it. */
	bool imported;
	bool trusted;              /* read back: counts; ignored on add unless imported */
	const char *source;        /* an import's origin; may be NULL */
	const char *token;         /* the identity of the measuring or importing token */
	const char *host;          /* the worker's name and address, or the importer's */
} store_record;

/* Adds one measured candidate and updates the best row of its (workload,
 * target) in the same transaction: trials + 1, and the record becomes the
 * best when it is ok and faster.  The best and trials count trusted records
 * only: an untrusted import is stored and changes neither.  An id already
 * stored changes nothing, except that a measurement here (r->imported
 * false) of an id stored as an import replaces the import (its numbers,
 * provenance and trust) and the best row is recomputed: a forged import
 * never outlives a genuine measurement of its trace.
 * Returns 1 when inserted or an import was replaced, 0 when the id was
 * already stored, -1 on error; *best_changed (may be NULL) says whether the
 * best row's record changed.  The workload and target must have been put
 * first.  The caller has checked the numbers: an "ok" record is stored as
 * ok only with a finite latency_us > 0. */
int store_record_add(store *s, store_record *r, bool *best_changed, store_error *err);

typedef struct store_workload {
	const char *key, *op, *canonical;
	double flops;
} store_workload;

typedef struct store_target {
	const char *key, *kind;    /* kind: "cpu" or "cuda" */
} store_target;

/* What an import stored. */
typedef struct store_import_result {
	int added, present;        /* records inserted, records whose id was stored */
	bool best_changed;         /* some best row's record changed */
} store_import_result;

/* Imports in ONE transaction: the workloads and targets that are new, then
 * the records as store_record_add adds them (the best rows updated).  Either
 * all of it is stored or, on any error, none: a bad record, a full disk or a
 * killed process leaves the database as it was.  A record's workload and
 * target must be among those given or stored already.  0 with *res, or -1
 * with err naming the item at fault (records[i], workloads[i]). */
int store_import(store *s, const store_workload *w, int nw, const store_target *t, int nt,
		 store_record *r, int nr, store_import_result *res, store_error *err);

/* Removes record id and recomputes the best row of its (workload, target)
 * (trials, and the fastest trusted ok record) in one transaction.  1 removed
 * (*best_changed says whether the best's record changed), 0 no such record,
 * -1 error. */
int store_record_remove(store *s, const char *id, bool *best_changed, store_error *err);

/* Calls fn for each untrusted ok import of (workload_key, target), fastest
 * claim first, at most limit: the traces a job measures again before its
 * search (a measurement replaces the import).  The pointers are valid during
 * the call only.  Returns the count or -1. */
int store_untrusted_each(store *s, const char *workload_key, const char *target, int limit,
			 void (*fn)(void *ctx, const store_record *r), void *ctx,
			 store_error *err);

/* Calls fn for each record of (workload_key, target) — either may be NULL
 * for all — oldest first.  The pointers in fn's record are valid during the
 * call only.  Returns the count or -1. */
int store_records_each(store *s, const char *workload_key, const char *target,
		       void (*fn)(void *ctx, const store_record *r), void *ctx,
		       store_error *err);
/* A page of store_records_each, for answers streamed with bounded memory:
 * the records (of workload_key and target, either NULL for all) stored
 * after the one *cursor names (0: from the first), in the order they were
 * stored, at most limit; *cursor is moved past the last one given.  Records
 * stored meanwhile come in a later page.  Returns the count (0: no more) or
 * -1. */
int store_records_page(store *s, const char *workload_key, const char *target,
		       int64_t *cursor, int limit,
		       void (*fn)(void *ctx, const store_record *r), void *ctx,
		       store_error *err);
/* Trusted records stored for (workload_key, target): what best.trials counts. */
int store_record_count(store *s, const char *workload_key, const char *target,
		       store_error *err);

typedef struct store_best {
	char workload_key[65];
	char target[128];
	char *op;                  /* malloc'd */
	char *canonical;           /* malloc'd: the workload */
	double flops;
	char record_id[65];        /* "" while nothing was ok */
	char *trace;               /* malloc'd, NULL while nothing was ok */
	double latency_us;
	int trials;
	double updated;
} store_best;

void store_best_clear(store_best *b);
/* 1 found, 0 none, -1 error. */
int store_best_get(store *s, const char *workload_key, const char *target,
		   store_best *b, store_error *err);
/* Calls fn for each best row with an ok record: of op (NULL: every op),
 * whose target equals `target` or starts with `prefix` (either NULL: not
 * that test; both NULL: every target); ordered by op, workload, target.
 * Returns the count or -1. */
int store_best_each(store *s, const char *op, const char *target, const char *prefix,
		    void (*fn)(void *ctx, const store_best *b), void *ctx,
		    store_error *err);

/* ---- workers and the batches leased to them (006_worker_leases.sql; store_workers.c) --
 *
 * The registry of measuring workers and the batches of candidates the jobs'
 * tuning threads wait to have measured, kept here so that every replica of
 * one database sees the same: a worker registered with one replica may
 * lease from and post to any other.  A batch's state moves only forward
 * along pending -> leased -> measured -> stored, each move one statement
 * that tests the state (and the lease's holder) it moves from, so that two
 * replicas never both win it; a lease lost (past its deadline, or its worker
 * gone) moves it back to pending.  Times are seconds since the epoch. */

typedef struct store_worker {
	char id[48];
	char target[128];          /* its full target key */
	char name[128];
	char token[64];            /* the identity of the token it registered with, "" */
	char peer[64];             /* the address it registered from */
	char emulator[64];         /* "" on real hardware */
	bool live;                 /* false: gone (left, or went silent) */
	double registered, last_seen;
	int64_t batch_id, job_id;  /* the batch it holds and its job (store_worker_each), 0 */
} store_worker;

/* Registers w (live, its id new) or, for an id stored, sets its state and
 * last_seen.  0 or -1. */
int store_worker_put(store *s, const store_worker *w, store_error *err);
/* The worker of this id, live or gone: 1 with *w, 0 none, -1 error. */
int store_worker_get(store *s, const char *id, store_worker *w, store_error *err);
/* A live worker was heard from at now: its last_seen moves, and with
 * lease_until > 0 the batches it holds are leased to it until then.  1
 * touched, 0 no live worker of that id, -1 error. */
int store_worker_seen(store *s, const char *id, double now, double lease_until,
		      store_error *err);
/* Worker id is gone (it left) at now: the batches it held go back to
 * pending.  Returns how many went back, or -1. */
int store_worker_gone(store *s, const char *id, double now, store_error *err);
/* Cron duty, any replica: the live workers silent since before
 * silent_before are gone, and every lease past its deadline at now or held
 * by a worker not live goes back to pending.  Returns the batches that went
 * back, or -1. */
int store_workers_expire(store *s, double silent_before, double now, store_error *err);
/* Whether a live worker of exactly this full target key is registered (1),
 * or not (0), or -1. */
int store_worker_serves(store *s, const char *target, store_error *err);
/* A live worker's full key whose kind is `kind` ("cuda"), copied to key:
 * 1, 0 none, -1 error. */
int store_worker_of_kind(store *s, const char *kind, char *key, size_t n, store_error *err);
/* The live workers' count, or -1. */
int store_workers_live(store *s, store_error *err);
/* Calls fn for each worker live, or gone but seen since `since`, newest
 * first, with the batch it holds.  Returns the count or -1. */
int store_worker_each(store *s, double since, void (*fn)(void *ctx, const store_worker *w),
		      void *ctx, store_error *err);

typedef struct store_batch_row {
	int64_t id, job_id;
	char replica[160];         /* the replica whose tuning thread waits for it */
	char target[128];
	char workload_key[65];
	char *canonical;           /* malloc'd: the workload (store_batch_lease only) */
	int n;
	char state[12];            /* "pending", "leased", "measured", "stored" */
	char worker[48];           /* leased and on: the lease's holder */
	double deadline;           /* leased: its end unless renewed */
	char token[64], host[200]; /* measured and on: the poster's token identity, name */
	int not_stored;            /* stored: results the store refused */
	int cache_hits;            /* measured and on: compiles the poster's cache saved */
	char **traces;             /* malloc'd, n of them (store_batch_lease only) */
} store_batch_row;

/* One candidate's result as its worker posted it. */
typedef struct store_result {
	char status[24];           /* a measurement status's name; "": none */
	double latency_us;         /* > 0 or none */
	double max_rel_error;      /* < 0: none */
	char *msg;                 /* may be NULL; malloc'd by store_batch_results */
} store_result;

void store_batch_clear(store_batch_row *b);
/* Queues a batch of b's job_id, replica, target, workload_key, the
 * workload's canonical text and n traces, pending, in one transaction; 0
 * with b->id, or -1. */
int store_batch_add(store *s, store_batch_row *b, const char *canonical, const char *const *traces,
		    store_error *err);
/* Leases the oldest pending batch of exactly target whose job is running
 * under its replica's claim at now to worker, until deadline: 1 with *b
 * (canonical and traces filled; store_batch_clear frees them), 0 none, -1
 * error.  Two replicas leasing at once never get the same batch. */
int store_batch_lease(store *s, const char *target, const char *worker, double now,
		      double deadline, store_batch_row *b, store_error *err);
/* The batch's row without its workload and traces: 1 with *b, 0 none (it
 * was finished, given up or purged), -1. */
int store_batch_get(store *s, int64_t id, store_batch_row *b, store_error *err);
/* Worker's results of batch id, res[0..n), with the poster's token identity,
 * host and compile-cache hits, in one transaction: 1 taken (the batch is measured), 0 the
 * batch is not leased to worker (any more) or has not n candidates:
 * nothing changed; -1 error. */
int store_batch_post(store *s, int64_t id, const char *worker, int n, const store_result *res,
		     const char *token, const char *host, int cache_hits, store_error *err);
/* The results of measured batch id into res[0..n) (msg malloc'd, the
 * caller frees; status "" where none was posted): 1, 0 no such batch,
 * -1. */
int store_batch_results(store *s, int64_t id, int n, store_result *res, store_error *err);
/* Batch id's results were stored but not_stored of them: measured ->
 * stored.  1, 0 it was not measured (nothing changed), -1. */
int store_batch_stored(store *s, int64_t id, int not_stored, store_error *err);
/* Deletes batch id (given up, or its poster answered); 0 or -1. */
int store_batch_delete(store *s, int64_t id, store_error *err);
/* Cron duty: deletes the batches whose job is no longer run by their
 * replica (it stopped, died and was taken over, or gave the batch up
 * without deleting it), except stored ones, which go once stored before
 * stored_before (their poster never came back for its answer).  Returns the
 * count or -1. */
int store_batches_purge(store *s, double stored_before, store_error *err);
/* Pending batches (the measuring queue's depth), or -1. */
int store_batches_pending(store *s, store_error *err);

/* ---- cost models ------------------------------------------------------------------------ */

/* Saves the cost model of a target key (replacing the last one), only by
 * the holder of the key's writer lease: writer takes (or keeps) the lease
 * until writer_until when nobody holds it, it is writer's already, or its
 * holder's has lapsed at `now`.  writer NULL: unconditional, the lease left
 * as it is.  1 written (*version, when not NULL, the row's new version: 1
 * for the key's first write, one more for each after it;
 * 007_model_version.sql), 0 another replica holds the lease (nothing
 * changed), -1 error. */
int store_model_put(store *s, const char *target_kind, const char *name,
		    const void *blob, size_t len, const char *writer, double now,
		    double writer_until, int64_t *version, store_error *err);
/* Extends writer's lease of the model of target_kind to writer_until: 1
 * held, 0 not writer's (never taken, or taken over), -1 error. */
int store_model_renew(store *s, const char *target_kind, const char *writer,
		      double writer_until, store_error *err);
/* Gives writer's lease up (at shutdown), so another replica may write the
 * model at once.  0 (also when it was not writer's) or -1. */
int store_model_release(store *s, const char *target_kind, const char *writer,
			store_error *err);
/* The saved model: 1 found (*blob malloc'd; *version, when not NULL, the
 * write it is, read in the same statement), 0 none, -1 error. */
int store_model_get(store *s, const char *target_kind, void **blob, size_t *len,
		    int64_t *version, store_error *err);
/* The version of the saved model, without its blob (megabytes): what a
 * replica that reads the model compares a few seconds apart.  1 found
 * (*version), 0 none saved, -1 error. */
int store_model_version(store *s, const char *target_kind, int64_t *version,
			store_error *err);

#endif
