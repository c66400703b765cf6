/*
 * store_int.h — what the store's files share (schema/ only): the statements,
 * the store itself and the small helpers that bind, step and read through
 * the backend.  store.c opens the store and holds workloads, records, bests
 * and cost models; store_jobs.c holds the jobs and their claims;
 * store_workers.c the workers and the batches leased to them.
 * Every function here expects the store's mutex held.
 */
#ifndef TIRD_STORE_INT_H
#define TIRD_STORE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend.h"
#include "store.h"

/* ---- statements ---------------------------------------------------------------- */

/* The columns of a job row, in job_from_row's order. */
#define JOB_COLS "id, workload_key, target, trials, batch, state, cached, trials_done, " \
	"errors, best_us, message, created, started, finished, cost_model, seed, " \
	"owner, lease_until, cancel_requested, patience"

/* The columns of a record row, in record_from_row's order. */
#define REC_COLS "id, workload_key, target, trace, status, latency_us, max_rel_error, " \
	"message, worker, job_id, created, origin, trusted, source, token, host"

/* The columns of a worker row, in worker_from_row's order. */
#define WRK_COLS "workers.id, workers.target, workers.name, workers.token, workers.peer, " \
	"workers.emulator, workers.state, workers.registered, workers.last_seen"

/* The columns of a batch row, in batch_from_row's order, and their count
 * (the index of a column a statement selects after them). */
#define BAT_COLS "id, job_id, replica, target, workload_key, n, state, worker, deadline, " \
	"token, host, not_stored, cache_hits"
#define BAT_NCOLS 13

/* X(id, SQL) */
#define STORE_STMTS(X) \
	X(WL_PUT,     "INSERT INTO workloads(key, op, canonical, flops, created) " \
		      "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING") \
	X(WL_GET,     "SELECT canonical, op, flops FROM workloads WHERE key = ?1") \
	X(TGT_PUT,    "INSERT INTO targets(key, kind, created) VALUES (?1, ?2, ?3) " \
		      "ON CONFLICT DO NOTHING") \
	X(JOB_INSERT, "INSERT INTO jobs(workload_key, target, trials, batch, state, cached, " \
		      "trials_done, errors, best_us, message, created, started, finished, " \
		      "cost_model, seed, patience) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, " \
		      "?10, ?11, ?12, ?13, coalesce(?14, 'xgboost'), ?15, ?16) RETURNING id") \
	X(JOB_STATE,  "SELECT state, owner FROM jobs WHERE id = ?1") \
	X(JOB_MOVE,   "UPDATE jobs SET state = ?2, message = coalesce(?3, message), " \
		      "started = coalesce(?4, started), finished = ?5, lease_until = " \
		      "CASE WHEN CAST(?2 AS TEXT) = 'running' THEN lease_until ELSE NULL END " \
		      "WHERE id = ?1") \
	X(JOB_PROG,   "UPDATE jobs SET trials_done = ?2, errors = ?3, best_us = ?4 " \
		      "WHERE id = ?1 AND (CAST(?5 AS TEXT) IS NULL OR owner = ?5)") \
	X(JOB_CLAIMABLE, "SELECT " JOB_COLS " FROM jobs WHERE state = 'queued' OR " \
		      "(state = 'running' AND coalesce(lease_until, 0) < ?1) ORDER BY id") \
	X(JOB_CLAIM_ROW, "SELECT " JOB_COLS " FROM jobs WHERE id = ?1 AND (state = 'queued' " \
		      "OR (state = 'running' AND coalesce(lease_until, 0) < ?2)){LOCK}") \
	X(JOB_CLAIM_SET, "UPDATE jobs SET state = 'running', owner = ?2, lease_until = ?3, " \
		      "started = ?4, finished = NULL, cancel_requested = 0 WHERE id = ?1") \
	X(JOB_RENEW,  "UPDATE jobs SET lease_until = ?3 WHERE id = ?1 AND owner = ?2 AND " \
		      "state = 'running' RETURNING cancel_requested") \
	X(JOB_SAME,   "SELECT " JOB_COLS " FROM jobs WHERE workload_key = ?1 AND target = ?2 " \
		      "AND state IN ('queued', 'running') ORDER BY id LIMIT 1{LOCK}") \
	X(JOB_CANCEL_REQ, "UPDATE jobs SET cancel_requested = 1 WHERE id = ?1 AND " \
		      "state IN ('queued', 'running')") \
	X(JOB_GET,    "SELECT " JOB_COLS " FROM jobs WHERE id = ?1") \
	X(JOB_LIST,   "SELECT " JOB_COLS " FROM jobs WHERE (CAST(?1 AS TEXT) IS NULL OR " \
		      "state = ?1) ORDER BY id DESC LIMIT ?2") \
	X(REC_INSERT, "INSERT INTO records(id, workload_key, target, trace, status, " \
		      "latency_us, max_rel_error, message, worker, job_id, created, origin, " \
		      "trusted, source, token, host) " \
		      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16) " \
		      "ON CONFLICT DO NOTHING") \
	X(REC_ORIGIN, "SELECT origin, workload_key, target FROM records WHERE id = ?1") \
	X(REC_REPLACE, "UPDATE records SET status = ?5, latency_us = ?6, max_rel_error = ?7, " \
		      "message = ?8, worker = ?9, job_id = ?10, created = ?11, origin = ?12, " \
		      "trusted = ?13, source = ?14, token = ?15, host = ?16 " \
		      "WHERE id = ?1 AND workload_key = ?2 AND target = ?3 AND trace = ?4") \
	X(REC_DELETE, "DELETE FROM records WHERE id = ?1") \
	X(REC_EACH,   "SELECT " REC_COLS " FROM records " \
		      "WHERE (CAST(?1 AS TEXT) IS NULL OR workload_key = ?1) AND " \
		      "(CAST(?2 AS TEXT) IS NULL OR target = ?2) ORDER BY created, rowid") \
	X(REC_PAGE,   "SELECT " REC_COLS ", rowid FROM records " \
		      "WHERE (CAST(?1 AS TEXT) IS NULL OR workload_key = ?1) AND " \
		      "(CAST(?2 AS TEXT) IS NULL OR target = ?2) " \
		      "AND rowid > ?3 ORDER BY rowid LIMIT ?4") \
	X(REC_UNTRUSTED, "SELECT " REC_COLS " FROM records WHERE workload_key = ?1 AND " \
		      "target = ?2 AND trusted = 0 AND status = 'ok' AND latency_us > 0 " \
		      "ORDER BY latency_us, rowid LIMIT ?3") \
	X(REC_COUNT,  "SELECT count(*) FROM records WHERE workload_key = ?1 AND target = ?2 " \
		      "AND trusted <> 0") \
	X(BEST_ROW,   "SELECT latency_us, record_id FROM best WHERE workload_key = ?1 AND target = ?2") \
	X(BEST_NEW,   "INSERT INTO best(workload_key, target, op, record_id, latency_us, trials, " \
		      "updated) SELECT ?1, CAST(?2 AS TEXT), op, CAST(?3 AS TEXT), " \
		      "CAST(?4 AS DOUBLE PRECISION), 1, CAST(?5 AS DOUBLE PRECISION) " \
		      "FROM workloads WHERE key = ?1") \
	X(BEST_TRIAL, "UPDATE best SET trials = trials + 1, updated = ?3 " \
		      "WHERE workload_key = ?1 AND target = ?2") \
	X(BEST_SET,   "UPDATE best SET record_id = ?3, latency_us = ?4, updated = ?5 " \
		      "WHERE workload_key = ?1 AND target = ?2") \
	X(BEST_ENSURE, "INSERT INTO best(workload_key, target, op, record_id, " \
		      "latency_us, trials, updated) SELECT ?1, CAST(?2 AS TEXT), op, " \
		      "CAST(NULL AS TEXT), CAST(NULL AS DOUBLE PRECISION), 0, " \
		      "CAST(?3 AS DOUBLE PRECISION) FROM workloads WHERE key = ?1 " \
		      "ON CONFLICT DO NOTHING") \
	X(BEST_UNSET, "UPDATE best SET record_id = NULL, latency_us = NULL WHERE record_id = ?1") \
	X(BEST_RECOMPUTE, "UPDATE best SET trials = (SELECT count(*) FROM records WHERE " \
		      "workload_key = ?1 AND target = ?2 AND trusted <> 0), " \
		      "(record_id, latency_us) = " \
		      "(SELECT id, latency_us FROM records WHERE workload_key = ?1 AND target = ?2 " \
		      "AND trusted <> 0 AND status = 'ok' AND latency_us > 0 " \
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
		      "WHERE (CAST(?1 AS TEXT) IS NULL OR b.op = ?1) AND " \
		      "((CAST(?2 AS TEXT) IS NULL AND CAST(?3 AS TEXT) IS NULL) OR b.target = ?2 OR " \
		      "(CAST(?3 AS TEXT) IS NOT NULL AND substr(b.target, 1, length(?3)) = ?3)) " \
		      "ORDER BY b.op, b.workload_key, b.target") \
	X(WRK_PUT,    "INSERT INTO workers(id, target, name, state, registered, last_seen, " \
		      "token, peer, emulator) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) " \
		      "ON CONFLICT(id) DO UPDATE SET " \
		      "state = excluded.state, last_seen = excluded.last_seen") \
	X(WRK_GET,    "SELECT " WRK_COLS ", 0, 0 FROM workers WHERE id = ?1") \
	X(WRK_SEEN,   "UPDATE workers SET last_seen = ?2 WHERE id = ?1 AND state = 'live'") \
	X(WRK_GONE,   "UPDATE workers SET state = 'gone', last_seen = ?2 WHERE id = ?1") \
	X(WRK_SILENT, "UPDATE workers SET state = 'gone' WHERE state = 'live' AND last_seen < ?1") \
	X(WRK_SERVES, "SELECT 1 FROM workers WHERE state = 'live' AND target = ?1 LIMIT 1") \
	X(WRK_KIND,   "SELECT target FROM workers WHERE state = 'live' AND " \
		      "substr(target, 1, length(?1)) = ?1 ORDER BY registered DESC LIMIT 1") \
	X(WRK_LIVE,   "SELECT count(*) FROM workers WHERE state = 'live'") \
	X(WRK_EACH,   "SELECT " WRK_COLS ", coalesce(b.id, 0), coalesce(b.job_id, 0) " \
		      "FROM workers LEFT JOIN batches b ON b.worker = workers.id AND " \
		      "b.state = 'leased' WHERE workers.state = 'live' OR workers.last_seen >= ?1 " \
		      "ORDER BY workers.registered DESC, workers.id") \
	X(BAT_INSERT, "INSERT INTO batches(job_id, replica, target, workload_key, canonical, n, " \
		      "state, created) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', ?7) RETURNING id") \
	X(BAT_ITEM,   "INSERT INTO batch_items(batch_id, i, trace) VALUES (?1, ?2, ?3)") \
	X(BAT_NEXT,   "SELECT b.id FROM batches b JOIN jobs j ON j.id = b.job_id " \
		      "WHERE b.state = 'pending' AND b.target = ?1 AND j.state = 'running' AND " \
		      "j.owner = b.replica AND coalesce(j.lease_until, 0) >= ?2 " \
		      "ORDER BY b.id LIMIT 1") \
	X(BAT_TAKE,   "UPDATE batches SET state = 'leased', worker = ?2, deadline = ?3 " \
		      "WHERE id = ?1 AND state = 'pending'") \
	X(BAT_GET,    "SELECT " BAT_COLS " FROM batches WHERE id = ?1") \
	X(BAT_FULL,   "SELECT " BAT_COLS ", canonical FROM batches WHERE id = ?1") \
	X(BAT_TRACES, "SELECT trace FROM batch_items WHERE batch_id = ?1 ORDER BY i") \
	X(BAT_POST,   "UPDATE batches SET state = 'measured', token = ?3, host = ?4, " \
		      "cache_hits = ?6 " \
		      "WHERE id = ?1 AND state = 'leased' AND worker = ?2 AND n = ?5") \
	X(BAT_RESULT, "UPDATE batch_items SET status = ?3, latency_us = ?4, " \
		      "max_rel_error = ?5, message = ?6 WHERE batch_id = ?1 AND i = ?2") \
	X(BAT_RESULTS, "SELECT i, status, latency_us, max_rel_error, message FROM batch_items " \
		      "WHERE batch_id = ?1 ORDER BY i") \
	X(BAT_STORED, "UPDATE batches SET state = 'stored', not_stored = ?2 " \
		      "WHERE id = ?1 AND state = 'measured'") \
	X(BAT_DELETE, "DELETE FROM batches WHERE id = ?1") \
	X(BAT_EXTEND, "UPDATE batches SET deadline = ?2 WHERE worker = ?1 AND state = 'leased'") \
	X(BAT_BACK_OF, "UPDATE batches SET state = 'pending', worker = NULL, deadline = NULL " \
		      "WHERE worker = ?1 AND state = 'leased'") \
	X(BAT_EXPIRE, "UPDATE batches SET state = 'pending', worker = NULL, deadline = NULL " \
		      "WHERE state = 'leased' AND (deadline < ?1 OR NOT EXISTS (SELECT 1 FROM " \
		      "workers w WHERE w.id = batches.worker AND w.state = 'live'))") \
	X(BAT_PURGE,  "DELETE FROM batches WHERE (state <> 'stored' AND NOT EXISTS (SELECT 1 " \
		      "FROM jobs j WHERE j.id = batches.job_id AND j.state = 'running' AND " \
		      "j.owner = batches.replica)) OR (state = 'stored' AND created < ?1)") \
	X(BAT_PENDING, "SELECT count(*) FROM batches WHERE state = 'pending'") \
	X(MODEL_PUT,  "INSERT INTO cost_models(target_kind, name, model, updated, writer, " \
		      "writer_until, version) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1) " \
		      "ON CONFLICT(target_kind) " \
		      "DO UPDATE SET name = excluded.name, model = excluded.model, " \
		      "updated = excluded.updated, version = cost_models.version + 1, " \
		      "writer = coalesce(excluded.writer, cost_models.writer), writer_until = " \
		      "CASE WHEN excluded.writer IS NULL THEN cost_models.writer_until " \
		      "ELSE excluded.writer_until END " \
		      "WHERE excluded.writer IS NULL OR cost_models.writer IS NULL OR " \
		      "cost_models.writer = excluded.writer OR " \
		      "coalesce(cost_models.writer_until, 0) < ?7 RETURNING version") \
	X(MODEL_RENEW, "UPDATE cost_models SET writer_until = ?3 WHERE target_kind = ?1 " \
		      "AND writer = ?2") \
	X(MODEL_RELEASE, "UPDATE cost_models SET writer = NULL, writer_until = NULL " \
		      "WHERE target_kind = ?1 AND writer = ?2") \
	X(MODEL_GET,  "SELECT model, version FROM cost_models WHERE target_kind = ?1") \
	X(MODEL_VERSION, "SELECT version FROM cost_models WHERE target_kind = ?1")

enum {
#define STORE_STMT_ENUM(id, sql) ST_##id,
	STORE_STMTS(STORE_STMT_ENUM)
#undef STORE_STMT_ENUM
	ST_COUNT
};

/* "no limit" for a LIMIT parameter, on both backends */
#define NO_LIMIT INT64_MAX

struct store {
	const store_backend *be;
	db *c;
	pthread_mutex_t mu;        /* serialises every call (do_x expects it held) */
	db_stmt *st[ST_COUNT];
	int version;
	char location[256];        /* where, its password hidden */
	/* changes of the best rows by other processes (store_best_epoch):
	 * counted by the backend's watcher, NULL where none is watched */
	db_watch *watch;
	_Atomic uint64_t best_changes;
	_Atomic bool best_live;
};

static inline int fail(store_error *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static inline int fail(store_error *err, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof err->msg, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* ---- small helpers: bind, step, columns ---------------------------------------------- */

static inline db_stmt *stmt(store *s, int id)
{
	db_stmt *q = s->st[id];
	q->be->start(q);
	return q;
}

static inline void bind_text(db_stmt *q, int i, const char *v)
{
	q->be->bind_text(q, i, v);
}

static inline void bind_double(db_stmt *q, int i, double v)
{
	q->be->bind_double(q, i, v);
}

static inline void bind_int64(db_stmt *q, int i, int64_t v)
{
	q->be->bind_int64(q, i, v);
}

/* A REAL that is NULL when v is not positive (no time / no latency). */
static inline void bind_pos(db_stmt *q, int i, double v)
{
	if (v > 0)
		q->be->bind_double(q, i, v);
	else
		q->be->bind_null(q, i);
}

static inline int step(db_stmt *q, store_error *err)
{
	return q->be->step(q, err);
}

static inline void finish(db_stmt *q)
{
	q->be->finish(q);
}

/* Steps a statement that returns no rows; 0 or -1. */
static inline int exec(db_stmt *q, store_error *err)
{
	int rc = step(q, err);
	finish(q);
	return rc == DB_ERROR ? -1 : 0;
}

static inline int64_t changes(db_stmt *q)
{
	return q->be->changes(q);
}

static inline bool col_null(db_stmt *q, int i)
{
	return q->be->is_null(q, i);
}

static const char *col_text(db_stmt *q, int i)
{
	return q->be->text(q, i);
}

static inline double col_real(db_stmt *q, int i)
{
	return q->be->real(q, i);
}

static inline int64_t col_int64(db_stmt *q, int i)
{
	return q->be->int64(q, i);
}

static inline char *col_dup(db_stmt *q, int i)
{
	const char *t = col_text(q, i);
	return t ? strdup(t) : NULL;
}

static inline void col_copy(db_stmt *q, int i, char *dst, size_t n)
{
	const char *t = col_text(q, i);
	snprintf(dst, n, "%s", t ? t : "");
}

static inline int begin(store *s, store_error *err)
{
	return s->be->begin(s->c, err);
}

static inline int commit(store *s, store_error *err)
{
	return s->be->commit(s->c, err);
}

static inline void rollback(store *s)
{
	s->be->rollback(s->c);
}

#endif
