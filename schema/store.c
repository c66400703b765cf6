/*
 * store.c — the tuning database on SQLite (see store.h for the contract).
 *
 * Every statement is declared once in STORE_STMTS and prepared at open; a
 * call binds, steps and resets under the store's mutex.  Functions that
 * change more than one row wrap them in BEGIN IMMEDIATE ... COMMIT, so each
 * state change is one transaction, and an import (store_import), however
 * many rows, is one too.  The database runs in WAL mode with
 * synchronous=NORMAL: a committed transaction survives a killed process
 * (kill -9), and one in flight is rolled back at the next open.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <nettle/sha2.h>
#include <sqlite3.h>
#include "store.h"

/* ---- migrations (embedded from schema/NNN_*.sql by embed.sh) ----------------- */

typedef struct migration {
	int version;
	const char *name;
	const char *sql;
} migration;

static const migration migrations[] = {
#include "migrations.inc"
};
#define NMIGRATIONS (sizeof migrations / sizeof migrations[0])

/* ---- statements ---------------------------------------------------------------- */

/* The columns of a job row, in job_from_row's order. */
#define JOB_COLS "id, workload_key, target, trials, batch, state, cached, trials_done, " \
	"errors, best_us, message, created, started, finished, cost_model, seed"

/* The columns of a record row, in record_from_row's order. */
#define REC_COLS "id, workload_key, target, trace, status, latency_us, max_rel_error, " \
	"message, worker, job_id, created, origin, trusted, source, token, host"

/* X(id, SQL) */
#define STORE_STMTS(X) \
	X(BEGIN,      "BEGIN IMMEDIATE") \
	X(COMMIT,     "COMMIT") \
	X(ROLLBACK,   "ROLLBACK") \
	X(WL_PUT,     "INSERT OR IGNORE INTO workloads(key, op, canonical, flops, created) " \
		      "VALUES (?1, ?2, ?3, ?4, ?5)") \
	X(WL_GET,     "SELECT canonical, op, flops FROM workloads WHERE key = ?1") \
	X(TGT_PUT,    "INSERT OR IGNORE INTO targets(key, kind, created) VALUES (?1, ?2, ?3)") \
	X(JOB_INSERT, "INSERT INTO jobs(workload_key, target, trials, batch, state, cached, " \
		      "trials_done, errors, best_us, message, created, started, finished, " \
		      "cost_model, seed) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, " \
		      "?12, ?13, coalesce(?14, 'xgboost'), ?15)") \
	X(JOB_STATE,  "SELECT state FROM jobs WHERE id = ?1") \
	X(JOB_MOVE,   "UPDATE jobs SET state = ?2, message = coalesce(?3, message), " \
		      "started = coalesce(?4, started), finished = ?5 WHERE id = ?1") \
	X(JOB_PROG,   "UPDATE jobs SET trials_done = ?2, errors = ?3, best_us = ?4 WHERE id = ?1") \
	X(JOB_GET,    "SELECT " JOB_COLS " FROM jobs WHERE id = ?1") \
	X(JOB_LIST,   "SELECT " JOB_COLS " FROM jobs WHERE (?1 IS NULL OR state = ?1) " \
		      "ORDER BY id DESC LIMIT ?2") \
	X(REC_INSERT, "INSERT OR IGNORE INTO records(id, workload_key, target, trace, status, " \
		      "latency_us, max_rel_error, message, worker, job_id, created, origin, " \
		      "trusted, source, token, host) " \
		      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)") \
	X(REC_ORIGIN, "SELECT origin, workload_key, target FROM records WHERE id = ?1") \
	X(REC_REPLACE, "UPDATE records SET status = ?5, latency_us = ?6, max_rel_error = ?7, " \
		      "message = ?8, worker = ?9, job_id = ?10, created = ?11, origin = ?12, " \
		      "trusted = ?13, source = ?14, token = ?15, host = ?16 " \
		      "WHERE id = ?1 AND workload_key = ?2 AND target = ?3 AND trace = ?4") \
	X(REC_DELETE, "DELETE FROM records WHERE id = ?1") \
	X(REC_EACH,   "SELECT " REC_COLS " FROM records " \
		      "WHERE (?1 IS NULL OR workload_key = ?1) AND (?2 IS NULL OR target = ?2) " \
		      "ORDER BY created, rowid") \
	X(REC_PAGE,   "SELECT " REC_COLS ", rowid FROM records " \
		      "WHERE (?1 IS NULL OR workload_key = ?1) AND (?2 IS NULL OR target = ?2) " \
		      "AND rowid > ?3 ORDER BY rowid LIMIT ?4") \
	X(REC_UNTRUSTED, "SELECT " REC_COLS " FROM records WHERE workload_key = ?1 AND " \
		      "target = ?2 AND trusted = 0 AND status = 'ok' AND latency_us > 0 " \
		      "ORDER BY latency_us, rowid LIMIT ?3") \
	X(REC_COUNT,  "SELECT count(*) FROM records WHERE workload_key = ?1 AND target = ?2 " \
		      "AND trusted") \
	X(BEST_ROW,   "SELECT latency_us, record_id FROM best WHERE workload_key = ?1 AND target = ?2") \
	X(BEST_NEW,   "INSERT INTO best(workload_key, target, op, record_id, latency_us, trials, " \
		      "updated) SELECT ?1, ?2, op, ?3, ?4, 1, ?5 FROM workloads WHERE key = ?1") \
	X(BEST_TRIAL, "UPDATE best SET trials = trials + 1, updated = ?3 " \
		      "WHERE workload_key = ?1 AND target = ?2") \
	X(BEST_SET,   "UPDATE best SET record_id = ?3, latency_us = ?4, updated = ?5 " \
		      "WHERE workload_key = ?1 AND target = ?2") \
	X(BEST_ENSURE, "INSERT OR IGNORE INTO best(workload_key, target, op, record_id, " \
		      "latency_us, trials, updated) SELECT ?1, ?2, op, NULL, NULL, 0, ?3 " \
		      "FROM workloads WHERE key = ?1") \
	X(BEST_UNSET, "UPDATE best SET record_id = NULL, latency_us = NULL WHERE record_id = ?1") \
	X(BEST_RECOMPUTE, "UPDATE best SET trials = (SELECT count(*) FROM records WHERE " \
		      "workload_key = ?1 AND target = ?2 AND trusted), (record_id, latency_us) = " \
		      "(SELECT id, latency_us FROM records WHERE workload_key = ?1 AND target = ?2 " \
		      "AND trusted AND status = 'ok' AND latency_us > 0 " \
		      "ORDER BY latency_us, rowid LIMIT 1), updated = ?3 " \
		      "WHERE workload_key = ?1 AND target = ?2") \
	X(BEST_GET,   "SELECT b.workload_key, b.target, b.op, w.canonical, w.flops, " \
		      "b.record_id, r.trace, b.latency_us, b.trials, b.updated " \
		      "FROM best b JOIN workloads w ON w.key = b.workload_key " \
		      "LEFT JOIN records r ON r.id = b.record_id " \
		      "WHERE b.workload_key = ?1 AND b.target = ?2") \
	X(BEST_EACH,  "SELECT b.workload_key, b.target, b.op, w.canonical, w.flops, " \
		      "b.record_id, r.trace, b.latency_us, b.trials, b.updated " \
		      "FROM best b JOIN workloads w ON w.key = b.workload_key " \
		      "JOIN records r ON r.id = b.record_id " \
		      "WHERE (?1 IS NULL OR b.op = ?1) AND (?2 IS NULL OR b.target = ?2 OR " \
		      "(?3 IS NOT NULL AND substr(b.target, 1, length(?3)) = ?3)) " \
		      "ORDER BY b.op, b.workload_key, b.target") \
	X(WRK_PUT,    "INSERT INTO workers(id, target, name, state, registered, last_seen) " \
		      "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(id) DO UPDATE SET " \
		      "state = excluded.state, last_seen = excluded.last_seen") \
	X(MODEL_PUT,  "INSERT OR REPLACE INTO cost_models(target_kind, name, model, updated) " \
		      "VALUES (?1, ?2, ?3, ?4)") \
	X(MODEL_GET,  "SELECT model FROM cost_models WHERE target_kind = ?1")

enum {
#define STORE_STMT_ENUM(id, sql) ST_##id,
	STORE_STMTS(STORE_STMT_ENUM)
#undef STORE_STMT_ENUM
	ST_COUNT
};

static const char *const stmt_sql[ST_COUNT] = {
#define STORE_STMT_SQL(id, sql) sql,
	STORE_STMTS(STORE_STMT_SQL)
#undef STORE_STMT_SQL
};

struct store {
	sqlite3 *db;
	pthread_mutex_t mu;        /* serialises every call (do_x expects it held) */
	sqlite3_stmt *st[ST_COUNT];
	int version;
};

static const char *const job_state_names[] = {
#define STORE_JS_NAME(id, name) name,
	STORE_JOB_STATES(STORE_JS_NAME)
#undef STORE_JS_NAME
};

const char *store_job_state_name(store_job_state s)
{
	return (unsigned)s < STORE_JOB_NSTATES ? job_state_names[s] : "?";
}

int store_job_state_parse(const char *name)
{
	for (int i = 0; i < STORE_JOB_NSTATES; i++)
		if (name && !strcmp(name, job_state_names[i]))
			return i;
	return -1;
}

double store_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int fail(store_error *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int fail(store_error *err, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof err->msg, fmt, ap);
		va_end(ap);
	}
	return -1;
}

static int db_fail(store *s, store_error *err, const char *what)
{
	return fail(err, "%s: %s", what, sqlite3_errmsg(s->db));
}

void store_record_id(const char *workload_key, const char *target,
		     const char *trace, char out[65])
{
	struct sha256_ctx c;
	uint8_t d[SHA256_DIGEST_SIZE];
	sha256_init(&c);
	sha256_update(&c, strlen(workload_key), (const uint8_t *)workload_key);
	sha256_update(&c, 1, (const uint8_t *)"\n");
	sha256_update(&c, strlen(target), (const uint8_t *)target);
	sha256_update(&c, 1, (const uint8_t *)"\n");
	sha256_update(&c, strlen(trace), (const uint8_t *)trace);
	sha256_digest(&c, sizeof d, d);
	for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* ---- small helpers: bind, step, columns (the mutex held) ------------------------ */

static sqlite3_stmt *stmt(store *s, int id)
{
	sqlite3_stmt *q = s->st[id];
	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	return q;
}

static void bind_text(sqlite3_stmt *q, int i, const char *v)
{
	if (v)
		sqlite3_bind_text(q, i, v, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(q, i);
}

/* A REAL that is NULL when v is not positive (no time / no latency). */
static void bind_pos(sqlite3_stmt *q, int i, double v)
{
	if (v > 0)
		sqlite3_bind_double(q, i, v);
	else
		sqlite3_bind_null(q, i);
}

/* Steps a statement that returns no rows; 0 or -1. */
static int exec(store *s, int id_, sqlite3_stmt *q, store_error *err)
{
	int rc = sqlite3_step(q);
	sqlite3_reset(q);
	if (rc != SQLITE_DONE)
		return fail(err, "%.40s...: %s", stmt_sql[id_], sqlite3_errmsg(s->db));
	return 0;
}

static int begin(store *s, store_error *err)
{
	return exec(s, ST_BEGIN, stmt(s, ST_BEGIN), err);
}

static int commit(store *s, store_error *err)
{
	return exec(s, ST_COMMIT, stmt(s, ST_COMMIT), err);
}

static void rollback(store *s)
{
	sqlite3_step(stmt(s, ST_ROLLBACK));
	sqlite3_reset(s->st[ST_ROLLBACK]);
}

static char *col_dup(sqlite3_stmt *q, int i)
{
	const unsigned char *t = sqlite3_column_text(q, i);
	return t ? strdup((const char *)t) : NULL;
}

static void col_copy(sqlite3_stmt *q, int i, char *dst, size_t n)
{
	const unsigned char *t = sqlite3_column_text(q, i);
	snprintf(dst, n, "%s", t ? (const char *)t : "");
}

/* ---- open and migrate -------------------------------------------------------------- */

static int migrate(store *s, store_error *err)
{
	char *msg = NULL;
	sqlite3_stmt *q;
	int have = 0;
	if (sqlite3_exec(s->db, "CREATE TABLE IF NOT EXISTS schema_version "
			 "(version INTEGER NOT NULL, name TEXT NOT NULL, applied REAL NOT NULL)",
			 NULL, NULL, &msg) != SQLITE_OK)
		goto sqlfail;
	if (sqlite3_prepare_v2(s->db, "SELECT coalesce(max(version), 0) FROM schema_version",
			       -1, &q, NULL) != SQLITE_OK)
		return db_fail(s, err, "schema_version");
	if (sqlite3_step(q) == SQLITE_ROW)
		have = sqlite3_column_int(q, 0);
	sqlite3_finalize(q);
	for (size_t i = 0; i < NMIGRATIONS; i++) {
		const migration *m = &migrations[i];
		if (m->version <= have)
			continue;
		/* one migration, one transaction */
		if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, &msg) != SQLITE_OK)
			goto sqlfail;
		if (sqlite3_exec(s->db, m->sql, NULL, NULL, &msg) != SQLITE_OK) {
			sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
			fail(err, "migration %s: %s", m->name, msg);
			sqlite3_free(msg);
			return -1;
		}
		char ins[200];
		snprintf(ins, sizeof ins,
			 "INSERT INTO schema_version VALUES (%d, '%s', %.3f)",
			 m->version, m->name, store_now());
		if (sqlite3_exec(s->db, ins, NULL, NULL, &msg) != SQLITE_OK ||
		    sqlite3_exec(s->db, "COMMIT", NULL, NULL, &msg) != SQLITE_OK) {
			sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
			goto sqlfail;
		}
		have = m->version;
	}
	s->version = have;
	return 0;
sqlfail:
	fail(err, "schema: %s", msg ? msg : sqlite3_errmsg(s->db));
	sqlite3_free(msg);
	return -1;
}

store *store_open(const char *path, store_error *err)
{
	store *s = calloc(1, sizeof *s);
	if (!s)
		abort();
	pthread_mutex_init(&s->mu, NULL);
	const char *what = "open";
	if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
			    SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
		goto fail;
	sqlite3_busy_timeout(s->db, 5000);
	what = "pragmas";
	if (sqlite3_exec(s->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
			 "PRAGMA foreign_keys=ON;", NULL, NULL, NULL) != SQLITE_OK)
		goto fail;
	if (migrate(s, err))
		goto fail_msg;
	what = "prepare";
	for (int i = 0; i < ST_COUNT; i++)
		if (sqlite3_prepare_v3(s->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
				       &s->st[i], NULL) != SQLITE_OK)
			goto fail;
	return s;
fail:
	fail(err, "%s: %s: %s", path, what, s->db ? sqlite3_errmsg(s->db) : "out of memory");
fail_msg:
	store_close(s);
	return NULL;
}

void store_close(store *s)
{
	if (!s)
		return;
	for (int i = 0; i < ST_COUNT; i++)
		sqlite3_finalize(s->st[i]);
	sqlite3_close(s->db);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

int store_schema_version(store *s)
{
	return s->version;
}

/* ---- workloads, targets -------------------------------------------------------------- */

/* The mutex held. */
static int do_workload_put(store *s, const char *key, const char *op,
			   const char *canonical, double flops, store_error *err)
{
	sqlite3_stmt *q = stmt(s, ST_WL_PUT);
	bind_text(q, 1, key);
	bind_text(q, 2, op);
	bind_text(q, 3, canonical);
	sqlite3_bind_double(q, 4, flops);
	sqlite3_bind_double(q, 5, store_now());
	return exec(s, ST_WL_PUT, q, err);
}

int store_workload_put(store *s, const char *key, const char *op,
		       const char *canonical, double flops, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	int rc = do_workload_put(s, key, op, canonical, flops, err);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

int store_workload_get(store *s, const char *key, char **canonical, char **op,
		       double *flops, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	sqlite3_stmt *q = stmt(s, ST_WL_GET);
	bind_text(q, 1, key);
	int rc = sqlite3_step(q), ret;
	if (rc == SQLITE_ROW) {
		if (canonical)
			*canonical = col_dup(q, 0);
		if (op)
			*op = col_dup(q, 1);
		if (flops)
			*flops = sqlite3_column_double(q, 2);
		ret = 1;
	} else {
		ret = rc == SQLITE_DONE ? 0 : db_fail(s, err, "workload");
	}
	sqlite3_reset(q);
	pthread_mutex_unlock(&s->mu);
	return ret;
}

/* The mutex held. */
static int do_target_put(store *s, const char *key, const char *kind, store_error *err)
{
	sqlite3_stmt *q = stmt(s, ST_TGT_PUT);
	bind_text(q, 1, key);
	bind_text(q, 2, kind);
	sqlite3_bind_double(q, 3, store_now());
	return exec(s, ST_TGT_PUT, q, err);
}

int store_target_put(store *s, const char *key, const char *kind, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	int rc = do_target_put(s, key, kind, err);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

/* ---- jobs ------------------------------------------------------------------------------- */

void store_job_clear(store_job *j)
{
	free(j->message);
	j->message = NULL;
}

int store_job_insert(store *s, store_job *j, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	if (!j->created)
		j->created = store_now();
	sqlite3_stmt *q = stmt(s, ST_JOB_INSERT);
	bind_text(q, 1, j->workload_key);
	bind_text(q, 2, j->target);
	sqlite3_bind_int(q, 3, j->trials);
	sqlite3_bind_int(q, 4, j->batch);
	bind_text(q, 5, store_job_state_name(j->state));
	sqlite3_bind_int(q, 6, j->cached);
	sqlite3_bind_int(q, 7, j->trials_done);
	sqlite3_bind_int(q, 8, j->errors);
	bind_pos(q, 9, j->best_us);
	bind_text(q, 10, j->message);
	sqlite3_bind_double(q, 11, j->created);
	bind_pos(q, 12, j->started);
	bind_pos(q, 13, j->finished);
	bind_text(q, 14, j->cost_model[0] ? j->cost_model : NULL);
	if (j->has_seed)
		sqlite3_bind_int64(q, 15, j->seed);
	int rc = exec(s, ST_JOB_INSERT, q, err);
	if (rc == 0)
		j->id = sqlite3_last_insert_rowid(s->db);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

int store_job_transition(store *s, int64_t id, store_job_state from,
			 store_job_state to, const char *message, store_error *err)
{
	int ret = -1;
	pthread_mutex_lock(&s->mu);
	if (begin(s, err))
		goto out;
	sqlite3_stmt *q = stmt(s, ST_JOB_STATE);
	sqlite3_bind_int64(q, 1, id);
	int rc = sqlite3_step(q);
	if (rc != SQLITE_ROW) {
		sqlite3_reset(q);
		rollback(s);
		ret = rc == SQLITE_DONE ? fail(err, "job %lld: no such job", (long long)id)
					: db_fail(s, err, "job state");
		goto out;
	}
	int cur = store_job_state_parse((const char *)sqlite3_column_text(q, 0));
	sqlite3_reset(q);
	if (cur != (int)from) {
		rollback(s);
		ret = 1;
		goto out;
	}
	double now = store_now();
	q = stmt(s, ST_JOB_MOVE);
	sqlite3_bind_int64(q, 1, id);
	bind_text(q, 2, store_job_state_name(to));
	bind_text(q, 3, message);
	bind_pos(q, 4, to == STORE_JOB_RUNNING ? now : 0);
	bind_pos(q, 5, to >= STORE_JOB_DONE ? now : 0);
	if (exec(s, ST_JOB_MOVE, q, err) || commit(s, err)) {
		rollback(s);
		goto out;
	}
	ret = 0;
out:
	pthread_mutex_unlock(&s->mu);
	return ret;
}

int store_job_progress(store *s, int64_t id, int trials_done, int errors,
		       double best_us, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	sqlite3_stmt *q = stmt(s, ST_JOB_PROG);
	sqlite3_bind_int64(q, 1, id);
	sqlite3_bind_int(q, 2, trials_done);
	sqlite3_bind_int(q, 3, errors);
	bind_pos(q, 4, best_us);
	int rc = exec(s, ST_JOB_PROG, q, err);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static void job_from_row(sqlite3_stmt *q, store_job *j)
{
	memset(j, 0, sizeof *j);
	j->id = sqlite3_column_int64(q, 0);
	col_copy(q, 1, j->workload_key, sizeof j->workload_key);
	col_copy(q, 2, j->target, sizeof j->target);
	j->trials = sqlite3_column_int(q, 3);
	j->batch = sqlite3_column_int(q, 4);
	int st = store_job_state_parse((const char *)sqlite3_column_text(q, 5));
	j->state = st < 0 ? STORE_JOB_FAILED : (store_job_state)st;
	j->cached = sqlite3_column_int(q, 6) != 0;
	j->trials_done = sqlite3_column_int(q, 7);
	j->errors = sqlite3_column_int(q, 8);
	j->best_us = sqlite3_column_double(q, 9);
	j->message = col_dup(q, 10);
	j->created = sqlite3_column_double(q, 11);
	j->started = sqlite3_column_double(q, 12);
	j->finished = sqlite3_column_double(q, 13);
	col_copy(q, 14, j->cost_model, sizeof j->cost_model);
	j->has_seed = sqlite3_column_type(q, 15) != SQLITE_NULL;
	j->seed = j->has_seed ? sqlite3_column_int64(q, 15) : 0;
}

int store_job_get(store *s, int64_t id, store_job *j, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	sqlite3_stmt *q = stmt(s, ST_JOB_GET);
	sqlite3_bind_int64(q, 1, id);
	int rc = sqlite3_step(q), ret;
	if (rc == SQLITE_ROW) {
		job_from_row(q, j);
		ret = 1;
	} else {
		ret = rc == SQLITE_DONE ? 0 : db_fail(s, err, "job");
	}
	sqlite3_reset(q);
	pthread_mutex_unlock(&s->mu);
	return ret;
}

int store_jobs_list(store *s, int state, int limit,
		    void (*fn)(void *ctx, const store_job *j), void *ctx,
		    store_error *err)
{
	int n = 0, rc;
	pthread_mutex_lock(&s->mu);
	sqlite3_stmt *q = stmt(s, ST_JOB_LIST);
	bind_text(q, 1, state >= 0 ? store_job_state_name((store_job_state)state) : NULL);
	sqlite3_bind_int(q, 2, limit > 0 ? limit : -1);
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		store_job j;
		job_from_row(q, &j);
		fn(ctx, &j);
		store_job_clear(&j);
		n++;
	}
	if (rc != SQLITE_DONE)
		n = db_fail(s, err, "jobs");
	sqlite3_reset(q);
	pthread_mutex_unlock(&s->mu);
	return n;
}

/* ---- records and best --------------------------------------------------------------------- */

/* Binds r's columns ?1..?16 (REC_INSERT's and REC_REPLACE's order). */
static void bind_record(sqlite3_stmt *q, const store_record *r, bool ok, double now)
{
	bind_text(q, 1, r->id);
	bind_text(q, 2, r->workload_key);
	bind_text(q, 3, r->target);
	bind_text(q, 4, r->trace);
	bind_text(q, 5, r->status);
	bind_pos(q, 6, ok ? r->latency_us : 0);
	if (r->max_rel_error >= 0)
		sqlite3_bind_double(q, 7, r->max_rel_error > 1e300 ? 1e300 : r->max_rel_error);
	bind_text(q, 8, r->message);
	bind_text(q, 9, r->worker);
	if (r->job_id > 0)
		sqlite3_bind_int64(q, 10, r->job_id);
	sqlite3_bind_double(q, 11, r->created > 0 ? r->created : now);
	bind_text(q, 12, r->imported ? "imported" : "measured");
	sqlite3_bind_int(q, 13, !r->imported || r->trusted);
	bind_text(q, 14, r->source);
	bind_text(q, 15, r->token);
	bind_text(q, 16, r->host);
}

/* The record id of the best row of (wk, target) into out ("" none); the
 * mutex held.  0 or -1. */
static int do_best_id(store *s, const char *wk, const char *target, char out[65],
		      store_error *err)
{
	sqlite3_stmt *q = stmt(s, ST_BEST_ROW);
	bind_text(q, 1, wk);
	bind_text(q, 2, target);
	int rc = sqlite3_step(q);
	out[0] = '\0';
	if (rc == SQLITE_ROW)
		col_copy(q, 1, out, 65);
	sqlite3_reset(q);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : db_fail(s, err, "best");
}

/* Recomputes the best row of (wk, target) from its trusted records (made
 * when missing); the mutex held, inside a transaction.  *changed: whether
 * its record changed. */
static int do_best_recompute(store *s, const char *wk, const char *target, bool *changed,
			     store_error *err)
{
	char before[65], after[65];
	double now = store_now();
	if (do_best_id(s, wk, target, before, err))
		return -1;
	sqlite3_stmt *q = stmt(s, ST_BEST_ENSURE);
	bind_text(q, 1, wk);
	bind_text(q, 2, target);
	sqlite3_bind_double(q, 3, now);
	if (exec(s, ST_BEST_ENSURE, q, err))
		return -1;
	q = stmt(s, ST_BEST_RECOMPUTE);
	bind_text(q, 1, wk);
	bind_text(q, 2, target);
	sqlite3_bind_double(q, 3, now);
	if (exec(s, ST_BEST_RECOMPUTE, q, err) || do_best_id(s, wk, target, after, err))
		return -1;
	if (changed)
		*changed = strcmp(before, after) != 0;
	return 0;
}

/* Inserts r and updates the best row; the mutex held, inside a transaction. */
static int do_record_add(store *s, store_record *r, bool *best_changed, store_error *err)
{
	double now = store_now();
	if (!r->id[0])
		store_record_id(r->workload_key, r->target, r->trace, r->id);
	bool ok = r->status && !strcmp(r->status, "ok") && r->latency_us > 0 &&
		  r->latency_us < 1e300;
	bool trusted = !r->imported || r->trusted;
	sqlite3_stmt *q = stmt(s, ST_REC_INSERT);
	bind_record(q, r, ok, now);
	if (exec(s, ST_REC_INSERT, q, err))
		return -1;
	if (sqlite3_changes(s->db) == 0) {
		if (r->imported)
			return 0;
		/* a measurement here of a stored id: it replaces an import */
		q = stmt(s, ST_REC_ORIGIN);
		bind_text(q, 1, r->id);
		int rc = sqlite3_step(q);
		bool was_import = rc == SQLITE_ROW && sqlite3_column_text(q, 0) &&
				  !strcmp((const char *)sqlite3_column_text(q, 0), "imported");
		sqlite3_reset(q);
		if (rc != SQLITE_ROW && rc != SQLITE_DONE)
			return db_fail(s, err, "record origin");
		if (!was_import)
			return 0;
		q = stmt(s, ST_REC_REPLACE);
		bind_record(q, r, ok, now);
		if (exec(s, ST_REC_REPLACE, q, err))
			return -1;
		if (sqlite3_changes(s->db) == 0)
			return 0;          /* an id collision of other content: keep it */
		if (do_best_recompute(s, r->workload_key, r->target, best_changed, err))
			return -1;
		return 1;
	}
	if (!trusted)
		return 1;                  /* stored, counting for nothing yet */

	q = stmt(s, ST_BEST_ROW);
	bind_text(q, 1, r->workload_key);
	bind_text(q, 2, r->target);
	int rc = sqlite3_step(q);
	if (rc == SQLITE_DONE) {
		sqlite3_reset(q);
		q = stmt(s, ST_BEST_NEW);
		bind_text(q, 1, r->workload_key);
		bind_text(q, 2, r->target);
		bind_text(q, 3, ok ? r->id : NULL);
		bind_pos(q, 4, ok ? r->latency_us : 0);
		sqlite3_bind_double(q, 5, now);
		if (exec(s, ST_BEST_NEW, q, err))
			return -1;
		if (sqlite3_changes(s->db) == 0)
			return fail(err, "record %s: workload %s is not stored", r->id,
				    r->workload_key);
		if (best_changed)
			*best_changed = ok;
		return 1;
	}
	if (rc != SQLITE_ROW) {
		sqlite3_reset(q);
		return db_fail(s, err, "best");
	}
	bool none = sqlite3_column_type(q, 1) == SQLITE_NULL;
	double cur = sqlite3_column_double(q, 0);
	sqlite3_reset(q);
	q = stmt(s, ST_BEST_TRIAL);
	bind_text(q, 1, r->workload_key);
	bind_text(q, 2, r->target);
	sqlite3_bind_double(q, 3, now);
	if (exec(s, ST_BEST_TRIAL, q, err))
		return -1;
	if (ok && (none || r->latency_us < cur)) {
		q = stmt(s, ST_BEST_SET);
		bind_text(q, 1, r->workload_key);
		bind_text(q, 2, r->target);
		bind_text(q, 3, r->id);
		sqlite3_bind_double(q, 4, r->latency_us);
		sqlite3_bind_double(q, 5, now);
		if (exec(s, ST_BEST_SET, q, err))
			return -1;
		if (best_changed)
			*best_changed = true;
	}
	return 1;
}

int store_record_add(store *s, store_record *r, bool *best_changed, store_error *err)
{
	if (best_changed)
		*best_changed = false;
	if (!r->workload_key || !r->target || !r->trace || !r->status)
		return fail(err, "record: workload_key, target, trace and status are required");
	pthread_mutex_lock(&s->mu);
	int ret = begin(s, err);
	if (ret == 0) {
		ret = do_record_add(s, r, best_changed, err);
		if (ret < 0 || commit(s, err)) {
			rollback(s);
			ret = -1;
			if (best_changed)
				*best_changed = false;
		}
	}
	pthread_mutex_unlock(&s->mu);
	return ret;
}

int store_import(store *s, const store_workload *w, int nw, const store_target *t, int nt,
		 store_record *r, int nr, store_import_result *res, store_error *err)
{
	store_import_result got = { 0 };
	store_error e = { "" };
	int i = 0;
	const char *what = "begin";
	*res = got;
	pthread_mutex_lock(&s->mu);
	if (begin(s, &e))
		goto fail;
	for (what = "workloads"; i < nw; i++)
		if (do_workload_put(s, w[i].key, w[i].op, w[i].canonical, w[i].flops, &e))
			goto fail;
	for (i = 0, what = "targets"; i < nt; i++)
		if (do_target_put(s, t[i].key, t[i].kind, &e))
			goto fail;
	for (i = 0, what = "records"; i < nr; i++) {
		bool changed = false;
		int rc;
		if (!r[i].workload_key || !r[i].target || !r[i].trace || !r[i].status) {
			fail(&e, "workload_key, target, trace and status are required");
			goto fail;
		}
		if ((rc = do_record_add(s, &r[i], &changed, &e)) < 0)
			goto fail;
		got.added += rc == 1;
		got.present += rc == 0;
		got.best_changed |= changed;
	}
	what = "commit";
	if (commit(s, &e))
		goto fail;
	pthread_mutex_unlock(&s->mu);
	*res = got;
	return 0;
fail:
	rollback(s);
	pthread_mutex_unlock(&s->mu);
	if (!strcmp(what, "begin") || !strcmp(what, "commit"))
		return fail(err, "import: %s: %s (nothing stored)", what, e.msg);
	return fail(err, "import: %s[%d]: %s (nothing stored)", what, i, e.msg);
}

/* A record of a REC_COLS row; its pointers are the statement's. */
static void record_from_row(sqlite3_stmt *q, store_record *r)
{
	*r = (store_record){ .max_rel_error = -1 };
	col_copy(q, 0, r->id, sizeof r->id);
	r->workload_key = (const char *)sqlite3_column_text(q, 1);
	r->target = (const char *)sqlite3_column_text(q, 2);
	r->trace = (const char *)sqlite3_column_text(q, 3);
	r->status = (const char *)sqlite3_column_text(q, 4);
	r->latency_us = sqlite3_column_double(q, 5);
	if (sqlite3_column_type(q, 6) != SQLITE_NULL)
		r->max_rel_error = sqlite3_column_double(q, 6);
	r->message = (const char *)sqlite3_column_text(q, 7);
	r->worker = (const char *)sqlite3_column_text(q, 8);
	r->job_id = sqlite3_column_int64(q, 9);
	r->created = sqlite3_column_double(q, 10);
	const unsigned char *origin = sqlite3_column_text(q, 11);
	r->imported = origin && !strcmp((const char *)origin, "imported");
	r->trusted = sqlite3_column_int(q, 12) != 0;
	r->source = (const char *)sqlite3_column_text(q, 13);
	r->token = (const char *)sqlite3_column_text(q, 14);
	r->host = (const char *)sqlite3_column_text(q, 15);
}

/* Steps q (bound), calling fn for each row; where cursor is not NULL, the
 * row's rowid (the column after REC_COLS) is left there; the mutex held. */
static int each_record(store *s, sqlite3_stmt *q, void (*fn)(void *ctx, const store_record *r),
		       void *ctx, int64_t *cursor, store_error *err)
{
	int n = 0, rc;
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		store_record r;
		record_from_row(q, &r);
		if (cursor)
			*cursor = sqlite3_column_int64(q, 16);
		fn(ctx, &r);
		n++;
	}
	if (rc != SQLITE_DONE)
		n = db_fail(s, err, "records");
	sqlite3_reset(q);
	return n;
}

int store_records_each(store *s, const char *workload_key, const char *target,
		       void (*fn)(void *ctx, const store_record *r), void *ctx,
		       store_error *err)
{
	pthread_mutex_lock(&s->mu);
	sqlite3_stmt *q = stmt(s, ST_REC_EACH);
	bind_text(q, 1, workload_key);
	bind_text(q, 2, target);
	int n = each_record(s, q, fn, ctx, NULL, err);
	pthread_mutex_unlock(&s->mu);
	return n;
}

int store_records_page(store *s, const char *workload_key, const char *target,
		       int64_t *cursor, int limit,
		       void (*fn)(void *ctx, const store_record *r), void *ctx,
		       store_error *err)
{
	pthread_mutex_lock(&s->mu);
	sqlite3_stmt *q = stmt(s, ST_REC_PAGE);
	bind_text(q, 1, workload_key);
	bind_text(q, 2, target);
	sqlite3_bind_int64(q, 3, *cursor);
	sqlite3_bind_int(q, 4, limit);
	int n = each_record(s, q, fn, ctx, cursor, err);
	pthread_mutex_unlock(&s->mu);
	return n;
}

int store_untrusted_each(store *s, const char *workload_key, const char *target, int limit,
			 void (*fn)(void *ctx, const store_record *r), void *ctx,
			 store_error *err)
{
	pthread_mutex_lock(&s->mu);
	sqlite3_stmt *q = stmt(s, ST_REC_UNTRUSTED);
	bind_text(q, 1, workload_key);
	bind_text(q, 2, target);
	sqlite3_bind_int(q, 3, limit > 0 ? limit : -1);
	int n = each_record(s, q, fn, ctx, NULL, err);
	pthread_mutex_unlock(&s->mu);
	return n;
}

int store_record_remove(store *s, const char *id, bool *best_changed, store_error *err)
{
	char wk[65], target[128];
	const char *what = "begin";
	store_error e = { "" };
	int ret = -1;
	if (best_changed)
		*best_changed = false;
	pthread_mutex_lock(&s->mu);
	bool was_best = false, changed = false;
	sqlite3_stmt *q;
	int rc;
	if (begin(s, &e))
		goto fail;
	q = stmt(s, ST_REC_ORIGIN);
	bind_text(q, 1, id);
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		col_copy(q, 1, wk, sizeof wk);
		col_copy(q, 2, target, sizeof target);
	}
	sqlite3_reset(q);
	if (rc != SQLITE_ROW) {
		rollback(s);
		ret = rc == SQLITE_DONE ? 0 : db_fail(s, err, "record");
		goto out;
	}
	/* the best row lets go of it first (best.record_id references it) */
	what = "the best row";
	q = stmt(s, ST_BEST_UNSET);
	bind_text(q, 1, id);
	if (exec(s, ST_BEST_UNSET, q, &e))
		goto fail;
	was_best = sqlite3_changes(s->db) > 0;
	what = "the record";
	q = stmt(s, ST_REC_DELETE);
	bind_text(q, 1, id);
	if (exec(s, ST_REC_DELETE, q, &e))
		goto fail;
	what = "the best row";
	if (do_best_recompute(s, wk, target, &changed, &e))
		goto fail;
	what = "commit";
	if (commit(s, &e))
		goto fail;
	if (best_changed)
		*best_changed = changed || was_best;
	ret = 1;
	goto out;
fail:
	rollback(s);
	fail(err, "removing record %.16s: %s: %s", id, what, e.msg);
out:
	pthread_mutex_unlock(&s->mu);
	return ret;
}

int store_record_count(store *s, const char *workload_key, const char *target,
		       store_error *err)
{
	pthread_mutex_lock(&s->mu);
	sqlite3_stmt *q = stmt(s, ST_REC_COUNT);
	bind_text(q, 1, workload_key);
	bind_text(q, 2, target);
	int n = sqlite3_step(q) == SQLITE_ROW ? sqlite3_column_int(q, 0)
					      : db_fail(s, err, "record count");
	sqlite3_reset(q);
	pthread_mutex_unlock(&s->mu);
	return n;
}

void store_best_clear(store_best *b)
{
	free(b->op);
	free(b->canonical);
	free(b->trace);
	b->op = b->canonical = b->trace = NULL;
}

static void best_from_row(sqlite3_stmt *q, store_best *b)
{
	memset(b, 0, sizeof *b);
	col_copy(q, 0, b->workload_key, sizeof b->workload_key);
	col_copy(q, 1, b->target, sizeof b->target);
	b->op = col_dup(q, 2);
	b->canonical = col_dup(q, 3);
	b->flops = sqlite3_column_double(q, 4);
	col_copy(q, 5, b->record_id, sizeof b->record_id);
	b->trace = col_dup(q, 6);
	b->latency_us = sqlite3_column_double(q, 7);
	b->trials = sqlite3_column_int(q, 8);
	b->updated = sqlite3_column_double(q, 9);
}

int store_best_get(store *s, const char *workload_key, const char *target,
		   store_best *b, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	sqlite3_stmt *q = stmt(s, ST_BEST_GET);
	bind_text(q, 1, workload_key);
	bind_text(q, 2, target);
	int rc = sqlite3_step(q), ret;
	if (rc == SQLITE_ROW) {
		best_from_row(q, b);
		ret = 1;
	} else {
		ret = rc == SQLITE_DONE ? 0 : db_fail(s, err, "best");
	}
	sqlite3_reset(q);
	pthread_mutex_unlock(&s->mu);
	return ret;
}

int store_best_each(store *s, const char *op, const char *target,
		    void (*fn)(void *ctx, const store_best *b), void *ctx,
		    store_error *err)
{
	int n = 0, rc;
	bool prefix = target && *target && target[strlen(target) - 1] == ':';
	pthread_mutex_lock(&s->mu);
	sqlite3_stmt *q = stmt(s, ST_BEST_EACH);
	bind_text(q, 1, op);
	bind_text(q, 2, target);
	bind_text(q, 3, prefix ? target : NULL);
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		store_best b;
		best_from_row(q, &b);
		fn(ctx, &b);
		store_best_clear(&b);
		n++;
	}
	if (rc != SQLITE_DONE)
		n = db_fail(s, err, "best");
	sqlite3_reset(q);
	pthread_mutex_unlock(&s->mu);
	return n;
}

/* ---- workers, cost models ------------------------------------------------------------------ */

int store_worker_put(store *s, const char *id, const char *target, const char *name,
		     const char *state, double registered, double last_seen,
		     store_error *err)
{
	pthread_mutex_lock(&s->mu);
	sqlite3_stmt *q = stmt(s, ST_WRK_PUT);
	bind_text(q, 1, id);
	bind_text(q, 2, target);
	bind_text(q, 3, name);
	bind_text(q, 4, state);
	sqlite3_bind_double(q, 5, registered);
	sqlite3_bind_double(q, 6, last_seen);
	int rc = exec(s, ST_WRK_PUT, q, err);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

int store_model_put(store *s, const char *target_kind, const char *name,
		    const void *blob, size_t len, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	sqlite3_stmt *q = stmt(s, ST_MODEL_PUT);
	bind_text(q, 1, target_kind);
	bind_text(q, 2, name);
	sqlite3_bind_blob64(q, 3, blob, len, SQLITE_STATIC);
	sqlite3_bind_double(q, 4, store_now());
	int rc = exec(s, ST_MODEL_PUT, q, err);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

int store_model_get(store *s, const char *target_kind, void **blob, size_t *len,
		    store_error *err)
{
	pthread_mutex_lock(&s->mu);
	sqlite3_stmt *q = stmt(s, ST_MODEL_GET);
	bind_text(q, 1, target_kind);
	int rc = sqlite3_step(q), ret;
	if (rc == SQLITE_ROW) {
		int n = sqlite3_column_bytes(q, 0);
		*blob = malloc(n > 0 ? (size_t)n : 1);
		if (!*blob)
			abort();
		memcpy(*blob, sqlite3_column_blob(q, 0), (size_t)n);
		*len = (size_t)n;
		ret = 1;
	} else {
		ret = rc == SQLITE_DONE ? 0 : db_fail(s, err, "cost model");
	}
	sqlite3_reset(q);
	pthread_mutex_unlock(&s->mu);
	return ret;
}
