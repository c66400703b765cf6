/*
 * tird.h — the daemon's parts and what they share.  Internal to daemon/.
 *
 *   main.c     flags and config, start-up, the cron thread, local workers,
 *              graceful shutdown on SIGTERM / SIGINT
 *   config.c   the configuration: defaults, `key = value` files, --flags
 *   log.c      leveled logs to stderr; the parts' error values; allocation
 *   http.c     libmicrohttpd, the route table (TIRD_ROUTES), bodies, limits,
 *              authentication, JSON errors, request metrics
 *   api.c      every route's handler: parses the request, calls the part
 *              that answers it, maps its data and errors to HTTP
 *   views.c    the JSON documents the routes answer (jobs, bests, records,
 *              batches, workers)
 *   ui.c       the dashboard: its pages and script (built in), and the
 *              routes only it needed (GET /v1/roofline, GET /v1/models)
 *   jobs.c     the job state machine and the tuning threads; run.c runs
 *              one job (tir_tune); jobs_int.h holds the types the two share
 *   lease.c    replicas: this tird's id, its claims of jobs under leases,
 *              the lease thread that renews them and adopts claimable jobs
 *   models.c   the cost model of each full target key: loaded, made from the
 *              seed and the stored records, saved by its writer lease's holder
 *   workers.c  the worker registry, leases, the measurement dispatcher
 *   metrics.c  counters and the Prometheus text of GET /metrics
 *   trust.c    what tird believes: the bounds of a result, imports replayed
 *              and validated
 *
 * Calls go one way: http → {api, ui} → {jobs, workers, models, store, views};
 * jobs → {workers (to measure), models}; metrics reads jobs and workers.
 * Only http.c, api.c and ui.c know HTTP: jobs.c and workers.c return data and a
 * tird_error (a code and a message naming the fault), which api.c maps to
 * a status.
 *
 * Ownership: one `tird` struct, made by main(), owns everything (store, jobs,
 * workers, models, http, metrics); the parts get a pointer to it and keep no
 * global state of their own.  The only global is log.c's threshold, set
 * before any thread starts (main.c takes signals synchronously, with no
 * handler and no flag).
 */
#ifndef TIRD_H
#define TIRD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cJSON.h>
#include "tir.h"
#include "costmodel/costmodel.h"
#include "store.h"

typedef struct tird tird;

/* ---- log.c -------------------------------------------------------------------- */

typedef enum { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR } log_level;

/* Sets the threshold (before any thread starts). */
void log_set_level(log_level l);
/* -1 for an unknown name ("debug", "info", "warn", "error"). */
int log_level_parse(const char *name);
void log_msg(log_level l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

/* What went wrong in a part, as a value: X(id, name).  api.c maps each to
 * an HTTP status; the name is the "code" of the error document. */
#define TIRD_ERRORS(X) \
	X(BAD_REQUEST,      "bad_request")      /* the request is malformed */ \
	X(INVALID_WORKLOAD, "invalid_workload") /* the workload does not parse */ \
	X(INVALID_TARGET,   "invalid_target")   /* nor the target */ \
	X(NOT_FOUND,        "not_found")        /* no such job or workload */ \
	X(CONFLICT,         "conflict")         /* the job has ended */ \
	X(UNKNOWN_WORKER,   "unknown_worker")   /* not registered, or gone */ \
	X(FORBIDDEN,        "forbidden")        /* not this caller's to do */ \
	X(LEASE_LOST,       "lease_lost")       /* the batch is no longer the worker's */ \
	X(QUEUE_FULL,       "queue_full")       /* max_queued_jobs are queued */ \
	X(STORE,            "store")            /* the database failed */

typedef enum {
	TIRD_E_NONE,
#define TIRD_E_ENUM(id, name) TIRD_E_##id,
	TIRD_ERRORS(TIRD_E_ENUM)
#undef TIRD_E_ENUM
	TIRD_E_COUNT
} tird_errcode;

typedef struct tird_error {
	tird_errcode code;
	char msg[512];
} tird_error;

/* Fills *e (may be NULL) and returns -1. */
int tird_fail(tird_error *e, tird_errcode code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A database failure: logs the store's message (it holds SQL and SQLite's
 * words, which are for the operator) and fills *e with TIRD_E_STORE and a
 * message for the client that names only the operation, `what` ("reading
 * job 3").  Returns -1. */
int tird_store_fail(tird_error *e, const store_error *err, const char *what, ...)
	__attribute__((format(printf, 3, 4)));
/* "bad_request", ...; "" for TIRD_E_NONE. */
const char *tird_errcode_name(tird_errcode code);

/* Allocation that never returns NULL: out of memory ends the daemon
 * (abort), as everywhere in tird.  tird_strdup(NULL) is NULL. */
void *tird_xcalloc(size_t n, size_t size);
void *tird_xrealloc(void *p, size_t size);
char *tird_strdup(const char *s);

/* ---- config.c ------------------------------------------------------------------ */

/* The most rounds a patience may name (default_patience, a job's
 * "search": {"patience"}). */
#define TIRD_PATIENCE_MAX 10000

/* Every setting once: X(name, type, field, default, help).  A config file
 * line is `name = value`; the flag is --name with '_' written as '-'. */
#define TIRD_CONFIG(X) \
	X(listen,          STR,  listen,          "127.0.0.1:8642", "address and port to listen on") \
	X(db,              STR,  db,              "./tird.db",      "SQLite database file, or postgresql://USER@HOST:PORT/DBNAME") \
	X(local_workers,   STR,  local_workers,   "auto",  "auto, none, cpu, cuda or cpu,cuda") \
	X(token_file,      STR,  token_file,      "",      "file of bearer tokens, one a line: TOKEN [SCOPES [NAME]]") \
	X(protect_reads,   BOOL, protect_reads,   "false", "reads need the token too") \
	X(log_level,       STR,  log_level,       "info",  "debug, info, warn or error") \
	X(tuning_threads,  INT,  tuning_threads,  "2",     "jobs tuned at once") \
	X(default_trials,  INT,  default_trials,  "64",    "trials of a job that names none") \
	X(max_trials,      INT,  max_trials,      "100000", "most trials one job may ask") \
	X(default_batch,   INT,  default_batch,   "16",    "candidates measured per round") \
	X(default_patience, INT, default_patience, "0",    "rounds in a row without a faster candidate that end a job naming no patience early (0: never)") \
	X(pipeline,        STR,  pipeline,        "auto",  "batches of a job measured while its next is searched, 0-4, or auto: 2 on a GPU, 0 on a CPU") \
	X(lease_s,         INT,  lease_s,         "15",    "a silent worker loses its lease after this") \
	X(job_lease_s,     INT,  job_lease_s,     "15",    "a replica's claim of a job lapses after this unless renewed; another replica then takes the job over") \
	X(job_lease_renew_s, INT, job_lease_renew_s, "5",  "a replica renews its claims this often (less than job_lease_s)") \
	X(worker_wait_s,   INT,  worker_wait_s,   "300",   "a job waiting in the queue fails when no worker for its target comes in this") \
	X(max_queued_jobs, INT,  max_queued_jobs, "1000",  "queued jobs at most; a new one past it is refused (429 queue_full)") \
	X(max_body,        INT,  max_body,        "65536", "largest request body, bytes (413 above)") \
	X(max_import_body, INT,  max_import_body, "67108864", "largest import / results body, bytes") \
	X(max_connections, INT,  max_connections, "1024",  "open connections at once") \
	X(max_connections_per_ip, INT, max_connections_per_ip, "64", "open connections at once from one address (0: no limit)") \
	X(idle_timeout_s,  INT,  idle_timeout_s,  "30",    "a connection silent this long between requests is closed (long polls are not idle)") \
	X(max_extent,      INT,  max_extent,      "0",     "workload limit: one dimension (0: libtir's default)") \
	X(max_elements,    INT,  max_elements,    "0",     "workload limit: one buffer, elements (0: default)") \
	X(max_gflop,       INT,  max_gflop,       "0",     "workload limit: GFLOP per call (0: default)") \
	X(worker_bin,      STR,  worker_bin,      "",      "tird-worker to start for local workers (default: beside tird)") \
	X(model_save_rows, INT,  model_save_rows, "512",   "a cost model is written to the database once it learnt this many rows since the last write") \
	X(model_save_s,    INT,  model_save_s,    "300",   "... or this many seconds after the first row it learnt since then (and at shutdown)") \
	X(model_seed,      STR,  model_seed,      "",      "records a new cost model starts from, each kind's (default: the seeds built or installed with tird; none: no seed)")

/* A token's scopes, X(id, name): what its bearer may do.  read: every read
 * route (with protect_reads; every token may read); submit: submit and cancel
 * jobs; worker: register as a worker, lease, post results; admin:
 * everything, imports and record removal among it. */
#define TIRD_SCOPES(X) \
	X(READ,   "read") \
	X(SUBMIT, "submit") \
	X(WORKER, "worker") \
	X(ADMIN,  "admin")

enum {
#define TIRD_SCOPE_BIT(id, name) TIRD_SCOPE_BIT_##id,
	TIRD_SCOPES(TIRD_SCOPE_BIT)
#undef TIRD_SCOPE_BIT
	TIRD_NSCOPES
};
#define TIRD_SCOPE(id) (1u << TIRD_SCOPE_BIT_##id)
#define TIRD_SCOPE_ALL ((1u << TIRD_NSCOPES) - 1)

/* One line of the token file. */
typedef struct tird_token {
	char *secret;
	char name[64];             /* its identity in logs and records: the NAME
				    * given, else "token-LINE" */
	unsigned scopes;           /* TIRD_SCOPE bits; a line without scopes: all */
} tird_token;

/* The scopes' names joined by ',' ("read,submit") into buf. */
const char *tird_scopes_name(unsigned scopes, char *buf, size_t n);

typedef struct tird_config {
#define TIRD_CFG_FIELD_STR(f)  char *f;
#define TIRD_CFG_FIELD_INT(f)  long f;
#define TIRD_CFG_FIELD_BOOL(f) bool f;
#define TIRD_CFG_FIELD(name, type, f, def, help) TIRD_CFG_FIELD_##type(f)
	TIRD_CONFIG(TIRD_CFG_FIELD)
#undef TIRD_CFG_FIELD
	tird_token *tokens;        /* read from token_file; ntokens 0: none, all open */
	int ntokens;
	char *token;               /* the secret local workers use (the first token
				    * with the worker scope); NULL: none */
	char host[64];             /* listen, split */
	int port;
	int pipeline_depth;        /* from pipeline: 0-4, -1 auto */
	tir_limits limits;         /* from the max_* settings */
} tird_config;

/* Fills the defaults. */
void config_defaults(tird_config *c);
/* Sets one setting by name (as in a file); -1 with a message on a bad name
 * or value. */
int config_set(tird_config *c, const char *name, const char *value, char *msg, size_t n);
/* Reads `name = value` lines ('#' starts a comment). */
int config_load(tird_config *c, const char *path, char *msg, size_t n);
/* Derives host/port, limits and the token; checks ranges. */
int config_finish(tird_config *c, char *msg, size_t n);
void config_usage(void);
void config_free(tird_config *c);

/* ---- metrics.c ----------------------------------------------------------------- */

#define TIRD_LAT_BUCKETS 12

typedef struct tird_metrics {
	atomic_ulong trials;                   /* measured candidates stored */
	atomic_ulong measure_errors[8];        /* by tir_measure_status */
	atomic_ulong jobs_submitted, jobs_cached, jobs_joined;
	atomic_ulong jobs_ended[8];            /* by store_job_state */
	atomic_ulong batches_requeued;
	atomic_ulong best_cache_hits;
	atomic_ulong compile_cache_hits;       /* compiles workers skipped (their reports) */
	atomic_ulong model_saves[2];           /* cost-model writes by kind (cpu, cuda) */
	/* HTTP: by route (index in the table) and status class (1xx..5xx) */
	atomic_ulong http_requests[64][6];
	atomic_ulong http_lat_bucket[64][TIRD_LAT_BUCKETS + 1];
	atomic_ulong http_lat_sum_us[64];
} tird_metrics;

/* Latency bucket bounds in seconds, for the histogram. */
extern const double tird_lat_bounds[TIRD_LAT_BUCKETS];
void metrics_observe_http(tird_metrics *m, int route, int status, double seconds);
/* The Prometheus text of every metric (malloc'd). */
char *metrics_render(tird *d);

/* ---- http.c ---------------------------------------------------------------------- */

typedef enum { HTTP_GET, HTTP_POST, HTTP_DELETE, HTTP_NMETHODS } http_method;

/* One request as a handler sees it. */
typedef struct http_req {
	tird *d;
	void *conn;                /* struct MHD_Connection */
	http_method method;
	const char *url;
	const char *arg;           /* the path segment matched by '*', or "" */
	const char *body;          /* NUL-terminated, may be "" */
	size_t len;
	const tird_token *token;   /* the bearer's token, NULL: none (or no tokens set) */
	char peer[64];             /* the client's address */
} http_req;

/* A streamed body (libmicrohttpd's callback responses): called for the next
 * bytes at offset pos, it writes at most max bytes into buf and returns how
 * many (more than 0), HTTP_STREAM_END after the last, or HTTP_STREAM_ERROR
 * (the connection is closed: the client sees a cut answer).  It runs on the
 * connection's thread, as the client reads: memory stays bounded by what
 * one call makes, however large the whole answer. */
#define HTTP_STREAM_END   ((long)-1)
#define HTTP_STREAM_ERROR ((long)-2)
typedef long (*http_stream_fn)(void *ctx, uint64_t pos, char *buf, size_t max);

/* What a handler answers; body malloc'd (http.c frees it).  With stream set
 * the body is streamed instead (chunked), stream_free(stream_ctx) called
 * once it is sent or the connection drops. */
typedef struct http_resp {
	int status;
	char *body;
	const char *content_type;  /* NULL: application/json */
	http_stream_fn stream;
	void *stream_ctx;
	void (*stream_free)(void *ctx);
} http_resp;

typedef void (*http_handler)(http_req *r, http_resp *out);

/* The routes: X(method, pattern, handler, access, body limit).  '*' in a
 * pattern matches one path segment (http_req.arg).  access: OPEN (never
 * needs a token), READ (needs one with protect_reads; any token may read),
 * SUBMIT, WORKER, ADMIN (need a token with that scope, or admin, when tokens
 * are set).  body: SMALL (max_body) or LARGE (max_import_body). */
#define TIRD_ROUTES(X) \
	X(GET,    "/healthz",                 api_healthz,        OPEN,  SMALL) \
	X(GET,    "/metrics",                 api_metrics,        READ,  SMALL) \
	X(POST,   "/v1/jobs",                 api_jobs_submit,    SUBMIT, SMALL) \
	X(GET,    "/v1/jobs",                 api_jobs_list,      READ,  SMALL) \
	X(GET,    "/v1/jobs/*",               api_job_get,        READ,  SMALL) \
	X(DELETE, "/v1/jobs/*",               api_job_cancel,     SUBMIT, SMALL) \
	X(GET,    "/v1/best",                 api_best,           READ,  SMALL) \
	X(GET,    "/v1/openapi.json",         api_openapi,        OPEN,  SMALL) \
	X(GET,    "/v1/workloads/*",          api_workload,       READ,  SMALL) \
	X(GET,    "/v1/records",              api_records_export, READ,  SMALL) \
	X(POST,   "/v1/records",              api_records_import, ADMIN, LARGE) \
	X(DELETE, "/v1/records/*",            api_record_remove,  ADMIN, SMALL) \
	X(POST,   "/v1/lower",                api_lower,          READ,  SMALL) \
	X(POST,   "/v1/fuse",                 api_fuse,           READ,  SMALL) \
	X(GET,    "/v1/roofline",             ui_roofline,        READ,  SMALL) \
	X(GET,    "/v1/models",               ui_models,          READ,  SMALL) \
	X(GET,    "/",                        ui_index,           OPEN,  SMALL) \
	X(GET,    "/ui/*",                    ui_asset_get,       OPEN,  SMALL) \
	X(GET,    "/v1/workers",              api_workers_list,   READ,  SMALL) \
	X(POST,   "/v1/workers",              api_worker_register, WORKER, SMALL) \
	X(POST,   "/v1/workers/*/lease",      api_worker_lease,   WORKER, SMALL) \
	X(POST,   "/v1/workers/*/results",    api_worker_results, WORKER, LARGE) \
	X(POST,   "/v1/workers/*/heartbeat",  api_worker_heartbeat, WORKER, SMALL) \
	X(DELETE, "/v1/workers/*",            api_worker_leave,   WORKER, SMALL)

#define TIRD_ROUTE_DECL(m, pat, fn, acc, lim) void fn(http_req *r, http_resp *out);
TIRD_ROUTES(TIRD_ROUTE_DECL)
#undef TIRD_ROUTE_DECL

/* The route's pattern by index, for metrics; NULL past the end. */
const char *http_route_name(int i);
/* Takes the port (cfg.port 0: any, set to the one taken) before anything
 * slow happens at start-up, so a port in use fails at once; connections
 * wait in the backlog until http_start serves them.  -1 with a message. */
int http_bind(tird *d, char *msg, size_t n);
/* Starts serving on the bound port; -1 with a message. */
int http_start(tird *d, char *msg, size_t n);
/* Stops serving and closes the port. */
void http_stop(tird *d);

/* A query parameter of the request, or NULL. */
const char *http_query(http_req *r, const char *name);
/* Calls fn for every value of a repeated query parameter. */
void http_query_each(http_req *r, const char *name,
		     void (*fn)(void *ctx, const char *value), void *ctx);
/* The query string rebuilt (sorted as received), for cache keys; malloc'd. */
char *http_query_string(http_req *r);

/* Answers JSON (takes ownership of j) / an error {"error":{code,message}}. */
void http_json(http_resp *out, int status, cJSON *j);
void http_error(http_resp *out, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Parses the body as a JSON object; on failure answers 400 and returns NULL. */
cJSON *http_body_object(http_req *r, http_resp *out);

/* ---- api.c -------------------------------------------------------------------------- */

/* The cache of GET /v1/best answers: made before serving, freed after. */
void api_init(tird *d);
void api_free(tird *d);

/* Resolves a target string of a request: "cpu" is this machine's CPU,
 * "cuda" the GPU of a registered worker, else this machine's; full keys
 * are parsed.  -1 with a message. */
int tird_resolve_target(tird *d, const char *s, tir_target *t, tir_error *err);

/* A target filter of a query (GET /v1/best?target=, /v1/workloads/KEY,
 * /v1/roofline) as store_best_each takes it: "cpu" and "cuda" every key of
 * that kind (prefix "cpu:", "cuda:"); a CUDA key without a part
 * ("cuda:sm_90") itself and each of its parts (prefix "cuda:sm_90+"); any
 * other key itself.  Fills f; f->exact and f->prefix point into it or are
 * NULL. */
typedef struct tird_target_filter {
	char buf[2][136];
	const char *exact, *prefix;
} tird_target_filter;
void tird_target_filter_of(const char *t, tird_target_filter *f);

/* ---- jobs.c ------------------------------------------------------------------------ */

typedef struct jobs jobs;

/* The cost models a job may name in "search", NULL-terminated; the first
 * is the default. */
extern const char *const tird_cost_models[];

/* Creates the manager and starts cfg.tuning_threads tuning threads after
 * resuming every job the store holds as queued or running. */
jobs *jobs_start(tird *d, char *msg, size_t n);
/* Stops the tuning threads: a running job goes back to queued (it resumes
 * at the next start), what was stored stays.  Requests may still read the
 * manager until jobs_free. */
void jobs_stop(jobs *js);
void jobs_free(jobs *js);

/* A submission, checked by the caller. */
typedef struct job_request {
	tir_workload *w;           /* taken by jobs_submit, whatever it returns */
	tir_target target;         /* full key */
	int trials, batch;
	store_search search;       /* cost_model one of tird_cost_models, patience
				    * 0 to TIRD_PATIENCE_MAX */
} job_request;

/* How a submission was answered (the team-cache rules, jobs.c). */
typedef enum { JOB_NEW, JOB_JOINED, JOB_CACHED } job_outcome;

/* A job as callers see it, a copy made under the manager's lock. */
typedef struct job_view {
	store_job job;             /* job.message points at message */
	char message[512];
	char *canonical;           /* the workload, malloc'd; NULL: not in memory
				    * (views.c looks it up in the store) */
	long version;              /* bumped on every change, for long polls */
	bool cancel_requested;     /* running, and asked to stop */
} job_view;

void job_view_clear(job_view *v);

/* Submits rq (rq->w is taken): joins the same job, answers from the cache
 * or queues a new one; *how says which, *v is the job.  0, or -1 with e
 * (STORE). */
int jobs_submit(jobs *js, job_request *rq, job_view *v, job_outcome *how, tird_error *e);
/* The job id, after waiting up to wait_s seconds (at most 60) for a change
 * past version.  0, or -1 with e (NOT_FOUND, STORE). */
int jobs_get(jobs *js, int64_t id, double wait_s, long version, job_view *v, tird_error *e);

/* Rows of the store (messages left out), the progress of active jobs
 * overlaid. */
typedef struct job_list {
	store_job *rows;
	int n, cap;
} job_list;
void job_list_clear(job_list *l);
/* Jobs newest first, of state (-1: any), at most limit.  0, or -1 with e. */
int jobs_list(jobs *js, int state, int limit, job_list *out, tird_error *e);
/* Cancels a queued job at once, or asks a running one to stop after the
 * batch in flight (v->cancel_requested).  0 with the job in *v, or -1 with e
 * (NOT_FOUND, CONFLICT when it has ended, STORE). */
int jobs_cancel(jobs *js, int64_t id, job_view *v, tird_error *e);
/* Counts of jobs in memory by state (queued, running). */
void jobs_counts(jobs *js, int counts[STORE_JOB_NSTATES]);
/* Wakes the tuning threads: a worker registered, so a job waiting in the
 * queue for its target may start. */
void jobs_wake(jobs *js);
/* Lease duty (lease.c, every job_lease_renew_s): takes into memory, queued,
 * each claimable job of the store (queued by another replica, or running
 * under a lease that passed: its owner died) that this replica does not hold
 * and whose target one of its live workers serves, and drops the queued jobs
 * it holds that the store no longer has claimable (claimed, cancelled or
 * failed by another replica). */
void jobs_adopt(jobs *js);
/* Cron duty: a queued job whose target no live worker serves starts its
 * wait (worker_wait_s) and fails at its end; a job whose start or end the
 * store refused is tried again. */
void jobs_cron(jobs *js);

/* ---- models.c ---------------------------------------------------------------------- */

/* The cost models, one per full target key (models.c). */
typedef struct tird_models tird_models;
/* Makes the models' table and the model of this machine's CPU (d->cpu):
 * loaded from the store, or, never saved or saved by a build with other
 * features, made from the seed (the model_seed setting) and the stored
 * records of its key.  -1 with msg when a seed the settings name cannot be
 * used. */
int models_load(tird *d, char *msg, size_t n);
/* The model of target t's full key, loaded or made the first time (a job
 * of another key does not wait for it), else read again first when
 * another replica wrote a newer version of it; NULL for an emulated key
 * (its timings train nothing) or one whose model could not be made: rank
 * at random.  The pointer stays valid until models_free: a newer version
 * is swapped into the same model (cm_model_replace). */
cm_model *models_of(tird *d, const tir_target *t);
/* A job taught the model of t's key `rows` more rows: it is written once
 * it learnt model_save_rows since the last write, or model_save_s after the
 * first of them (models_cron), not after every job. */
void models_learned(tird *d, const tir_target *t, int rows);
/* Cron duty: reads again each model another replica wrote a newer
 * version of (asked every few seconds; the start of a job asks too, in
 * models_of), and writes the models that are due (above); with `all`
 * (shutdown), every model that learnt anything since its last write, and
 * reads nothing. */
void models_cron(tird *d, bool all);
/* Lease duty: renews the writer lease of each model this replica writes
 * (the first write of a model takes it; store_model_put); a lease lost
 * means another replica writes that model now. */
void models_renew(tird *d);
/* Gives the writer leases up (shutdown, after the last models_cron). */
void models_release(tird *d);
void models_free(tird *d);
/* A model as GET /v1/models shows it. */
typedef struct model_info {
	char key[128];             /* the full target key */
	bool made;                 /* loaded or made (false: never needed yet, or failed) */
	bool failed;               /* making it failed: its jobs rank at random */
	bool making;               /* being loaded or made right now */
	int unsaved;               /* rows learnt since its last write */
	int64_t version;           /* the stored write it is of (0: none) */
	bool writer;               /* this replica holds its writer lease */
	cm_stats stats;            /* when made */
} model_info;
/* Every key's model tird holds, the one first needed last: returns the
 * count, *out malloc'd (the caller frees it; NULL before models_load). */
int models_list(tird *d, model_info **out);
/* Threads for a search of this target kind and for its model's features:
 * every core (0), except for a CPU target (1), whose candidates other jobs
 * may be timing on this machine's cores meanwhile. */
int tird_search_threads(tir_target_kind kind);

/* ---- lease.c: replicas, job claims under leases ---------------------------------------- */

typedef struct leases leases;
typedef struct job_lease job_lease;
/* This replica's id, unique among the replicas of one database:
 * "HOST:PID:START" (started: seconds since the epoch). */
void lease_replica_id(char *out, size_t n, double started);
/* The claims' table; its thread starts with leases_start (after the jobs:
 * it calls jobs_adopt and models_renew) and stops with leases_stop (before
 * the jobs and models are freed).  leases_free stops it too and frees the
 * claims left (jobs whose end the store refused: their leases lapse). */
leases *leases_new(tird *d);
int leases_start(leases *ls, char *msg, size_t n);
void leases_stop(leases *ls);
void leases_free(leases *ls);
/* Claims job id for this replica (store_job_claim, lease job_lease_s) and
 * keeps the claim renewed; cancel is the job's flag, set when the claim is
 * lost or a user asks the job to stop.  1 with *out (freed by lease_drop)
 * and *was (the row before the claim; cleared by the caller), 0 not
 * claimable, -1 with err. */
int lease_claim(leases *ls, int64_t id, atomic_int *cancel, job_lease **out,
		store_job *was, store_error *err);
/* Whether l still holds, before anything of its job is stored: trusted while
 * more than job_lease_renew_s of it is left, else renewed at once.  NULL
 * (no claim) holds. */
bool lease_held(leases *ls, job_lease *l);
/* Whether l was lost (the store holds the job for another replica). */
bool lease_lost(leases *ls, const job_lease *l);
/* Stops renewing l and frees it (its job left running, or was lost). */
void lease_drop(leases *ls, job_lease *l);

/* ---- views.c: the JSON documents of the routes ------------------------------------------- */

/* The result object of a (workload, target) best, as tune --wait and best
 * print it: workload_key, workload, op, target, latency_us, gflops, trials,
 * record_id (and trace when with_trace).  NULL while nothing was ok. */
cJSON *view_best(const store_best *b, bool with_trace);
/* The job document every job route answers: the job, its workload, search
 * options, progress, times, version and its best result. */
cJSON *view_job(tird *d, const job_view *v);
/* A light row of GET /v1/jobs. */
cJSON *view_job_row(const store_job *sj);
/* A measured record as GET /v1/records exports it. */
cJSON *view_record(const store_record *r);
/* A worker of GET /v1/workers; a batch as a worker leases it (both types
 * are workers.c's, below). */
struct worker_info;
struct worker_batch;
cJSON *view_worker(const struct worker_info *w);
cJSON *view_batch(const struct worker_batch *b);

/* ---- trust.c: what tird believes of results and imports ------------------------------------ */

/* The bounds a result of a workload on a target keeps to be stored as ok. */
typedef struct trust_bounds {
	double tolerance;          /* the largest max_rel_error (tir_workload_tolerance) */
	double floor_us;           /* the smallest latency: the flops at the
				    * target's ceiling (tir_target_ceiling) */
	char floor_why[448];       /* how floor_us was made, for the refusal */
} trust_bounds;

/* The bounds of w on t.  0, or -1 with a message when w's program cannot be
 * built. */
int trust_bounds_of(const tir_workload *w, const tir_target *t, trust_bounds *b,
		    tir_error *err);
/* Re-checks a result: an ok whose latency is not finite, not > 0 or under
 * the floor becomes run_error (the message names the floor and how it was
 * made: "below the floor 69.5 us: 1.4e+11 flops at the ceiling of
 * cuda:sm_90 for float16, 1,978 TFLOP/s = 2 x H200 SXM's ..."); one whose max_rel_error is missing (< 0),
 * not finite or over the tolerance becomes wrong_result.  true when it
 * stands as given, else false with *status changed and the reason in why. */
bool trust_check_result(const trust_bounds *b, int *status, double latency_us,
			double max_rel_error, char *why, size_t n);
/* Replays trace on w's program and validates it for t: 0 with *canon (the
 * canonical trace, tir_sched_trace; malloc'd), or -1 naming the fault. */
int trust_canonical_trace(const tir_workload *w, const tir_target *t, const char *trace,
			  char **canon, tir_error *err);
/* Checks every record of an import (on every core): its trace replays and
 * validates for its target, an ok one keeps to the bounds.  The canonical
 * trace of each record (an array of tir_records_count strings, malloc'd, as
 * each is), or NULL with err naming the first record at fault
 * ("records[3]: ..."). */
char **trust_check_import(const tir_records *recs, tir_error *err);

/* ---- workers.c ----------------------------------------------------------------------- */

typedef struct workers workers;

workers *workers_new(tird *d);
void workers_free(workers *ws);
/* Cron duty: expires silent workers and re-queues their leases. */
void workers_cron(workers *ws);
/* Wakes every long poll (shutdown). */
void workers_wake(workers *ws);
/* Whether a live worker of exactly this full target is registered. */
bool workers_serve(workers *ws, const char *target);
/* The full key of a live worker's target of this kind ("cuda"), if any. */
bool workers_find_kind(workers *ws, const char *kind, char *key, size_t n);
int workers_live(workers *ws);
int workers_queue_depth(workers *ws);

/* What a job's measurement callback carries. */
typedef struct measure_ctx {
	tird *d;
	int64_t job_id;
	const char *canonical;     /* the workload, as workers get it */
	const char *workload_key;
	const atomic_int *cancel;
	char worker[48];           /* who measured the last batch: its id, */
	char token[64];            /* its token's identity ("" none), */
	char host[200];            /* its name and address */
	char why[512];             /* why the last batch failed, if it did */
	double no_worker_since;    /* set when it failed for want of a worker:
				    * since when none was live */
	int compile_cache_hits;    /* compiles the last batch's worker skipped */
	trust_bounds bounds;       /* what its results keep to (workers_measure) */
	int bounds_state;          /* 0 not yet made, 1 made, -1 not to be made */
	/* stores a batch's re-checked results before the worker that posted
	 * them is answered; returns how many it could not store (NULL: none
	 * stored here) */
	int (*store)(void *store_ctx, int n, const tir_candidate *out);
	void *store_ctx;
	/* the search calls workers_measure for up to tir_tune_opts.pipeline
	 * batches at once: mu guards the fields above from worker on, and
	 * makes the re-check and store of one batch's results whole */
	pthread_mutex_t mu;
} measure_ctx;

/* A tir_measure_batch_fn: queues the batch for a worker of t and waits for
 * its results, which are re-checked (trust_check_result: an "ok" beyond the
 * bounds of w on t is stored as the error it is) and stored (ctx->store)
 * before the worker is answered.  ctx is a measure_ctx.
 * out[i].msg are malloc'd (tir_tune frees them).  -1 with ctx->why when the
 * job is cancelled, the daemon stops, or no worker of t is live for 2
 * lease_s (at most worker_wait_s): then ctx->no_worker_since is set and the
 * job goes back to the queue to wait there, without a tuning thread
 * (jobs.c). */
int workers_measure(void *ctx, const tir_workload *w, const tir_target *t, int n,
		    const char *const *traces, tir_candidate *out);

/* A worker as the registry knows it. */
typedef struct worker_info {
	char id[48];
	char target[128];
	char name[128];
	char token[64];            /* the identity of the token it registered with */
	char peer[64];             /* the address it registered from */
	char emulator[64];         /* the emulator it runs under (its key ends in
				    * +emulated), "" on real hardware */
	bool live;
	double registered, last_seen;
	int64_t batch_id;          /* the batch it holds, 0: none */
	int64_t job_id;            /* that batch's job (workers_list only), 0: none */
	double lease_s, heartbeat_s;   /* what it must keep to */
} worker_info;

/* A batch as a worker leases it; its pointers are valid during the lease
 * callback only. */
typedef struct worker_batch {
	int64_t id, job_id;
	const char *workload_key, *canonical, *target;
	int n;
	const char *const *traces;
} worker_batch;

/* Every worker route names its caller, tok: the bearer's token (NULL when
 * tird has no tokens).  A worker is bound to the token it registered with:
 * its other routes with any other token are FORBIDDEN. */

/* Registers a worker of full target t (name NULL: "unnamed") for tok from
 * address peer.  0 with *out, or -1 with e (STORE). */
int workers_register(workers *ws, const tir_target *t, const char *name, const tird_token *tok,
		     const char *peer, worker_info *out, tird_error *e);
/* Waits up to wait_s seconds (at most 30) for a pending batch of the
 * worker's target, queued by any replica, and leases it: 1 with fn(ctx,
 * batch) called (to copy what it needs: the batch is freed after it), 0
 * when none came, -1 with e (UNKNOWN_WORKER, FORBIDDEN, STORE). */
int workers_lease(workers *ws, const char *id, const tird_token *tok, double wait_s,
		  void (*fn)(void *ctx, const worker_batch *b), void *ctx, tird_error *e);
/* The results of batch batch_id from worker id: res[0..n) (status,
 * latency_us, max_rel_error, msg) are copied into the batch, which wakes its
 * job (workers_measure re-checks and stores them); it returns once they are
 * stored, STORE when some could not be (they count as not measured), so a 0
 * means every result is in the database.  Accepted only from the live worker
 * that holds the batch's lease, for the batch's target, with the token it
 * registered with: a worker id not registered (or gone) is FORBIDDEN, as is
 * another token; a registered worker that does not hold the lease (it was
 * lost, re-queued or given to another) is LEASE_LOST; BAD_REQUEST when n is
 * not the batch's size.  cache_hits: the compiles the worker says its
 * compile cache saved on the batch (counted in tird_compile_cache_hits_total
 * and passed to the job: measure_ctx.compile_cache_hits).  0, or -1 with e. */
int workers_results(workers *ws, const char *id, const tird_token *tok, int64_t batch_id,
		    int n, const tir_candidate *res, int cache_hits, tird_error *e);
/* A live worker says it is alive (its leases are extended) / leaves (its
 * batch goes back to the queue).  0, or -1 with e (UNKNOWN_WORKER,
 * FORBIDDEN). */
int workers_heartbeat(workers *ws, const char *id, const tird_token *tok, tird_error *e);
int workers_leave(workers *ws, const char *id, const tird_token *tok, tird_error *e);
/* Every worker known (live, or gone in the last ten minutes), newest first:
 * returns the count, *out malloc'd. */
int workers_list(workers *ws, worker_info **out);

/* ---- the daemon ------------------------------------------------------------------------- */

struct tird {
	tird_config cfg;
	store *db;
	jobs *jobs;
	workers *workers;
	void *http;                /* struct MHD_Daemon */
	int listen_fd;             /* the bound port until http_start; -1 after */
	tird_metrics metrics;
	tir_target cpu;            /* this machine's CPU */
	atomic_int stopping;       /* set once at shutdown */
	atomic_ulong best_gen;     /* bumped whenever a best row changes */
	struct best_cache *best_cache;   /* api.c */
	tird_models *models;       /* XGBoost cost model per full target key (models.c) */
	leases *leases;            /* this replica's claims of jobs (lease.c) */
	char replica[128];         /* this replica's id (lease_replica_id) */
	double started;
};

#endif
