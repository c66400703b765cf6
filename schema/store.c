/*
 * store.c — the tuning database (see store.h for the contract), written once
 * over the backends of backend.h: SQLite (sqlite.c) and PostgreSQL
 * (postgres.c).
 *
 * Every statement is declared once in STORE_STMTS (store_int.h), in SQL both
 * backends accept, and prepared at open; a call binds, steps and finishes under the
 * store's mutex.  Functions that change more than one row wrap them in the
 * backend's write transaction (begin ... commit), so each state change is one
 * transaction, and an import (store_import), however many rows, is one too.
 * The numbered migrations (schema/NNN_*.sql, and schema/postgresql/NNN_*.sql
 * where PostgreSQL needs its own text) are applied at open, each in one
 * transaction that also records it in schema_version.
 *
 * Portable SQL, as the statements below use it: ON CONFLICT rather than
 * INSERT OR IGNORE / OR REPLACE; RETURNING for a new job's id; `trusted <> 0`
 * for a flag; CAST on a parameter that nothing around it types; LIMIT with
 * INT64_MAX for "no limit"; rowid for the order records were stored in
 * (SQLite's implicit rowid; a column of that name on PostgreSQL).
 *
 * Files: the statements, struct store and the helpers are store_int.h's,
 * shared with store_jobs.c, which holds the jobs and their claims under
 * leases (004_job_lease.sql); this file opens the store and holds the rest.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <nettle/sha2.h>
#include "store_int.h"

static const char *const stmt_sql[ST_COUNT] = {
#define STORE_STMT_SQL(id, sql) sql,
	STORE_STMTS(STORE_STMT_SQL)
#undef STORE_STMT_SQL
};

double store_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
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

/* ---- open and migrate -------------------------------------------------------------- */

/* The schema version stored: 0 or more, -1 on error. */
static int stored_version(store *s, store_error *err)
{
	db_stmt *q = s->be->prepare(s->c, "SELECT coalesce(max(version), 0) FROM schema_version",
				    err);
	if (!q)
		return -1;
	q->be->start(q);
	int rc = step(q, err), v = rc == DB_ROW ? (int)col_int64(q, 0) : -1;
	if (rc == DB_DONE)
		fail(err, "schema_version: no row");
	s->be->finalize(q);
	return v;
}

/* Applies the backend's migrations the database lacks, each in one write
 * transaction that reads the version first (so that two processes opening
 * one database at once apply each migration once). */
static int migrate(store *s, store_error *err)
{
	store_error e = { "" };
	const migration *ms = s->be->migrations;
	int have = 0;
	if (begin(s, &e))
		goto sqlfail;
	if (s->be->exec(s->c, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER "
			"NOT NULL, name TEXT NOT NULL, applied DOUBLE PRECISION NOT NULL)", &e) ||
	    (have = stored_version(s, &e)) < 0 || commit(s, &e)) {
		rollback(s);
		goto sqlfail;
	}
	for (size_t i = 0; i < s->be->nmigrations; i++) {
		const migration *m = &ms[i];
		if (m->version <= have)
			continue;
		if (begin(s, &e))
			goto sqlfail;
		if ((have = stored_version(s, &e)) < 0) {
			rollback(s);
			goto sqlfail;
		}
		if (m->version <= have) {          /* another process applied it */
			rollback(s);
			continue;
		}
		if (s->be->exec(s->c, m->sql, &e)) {
			rollback(s);
			return fail(err, "migration %s: %s", m->name, e.msg);
		}
		char ins[200];
		snprintf(ins, sizeof ins,
			 "INSERT INTO schema_version VALUES (%d, '%s', %.3f)",
			 m->version, m->name, store_now());
		if (s->be->exec(s->c, ins, &e) || commit(s, &e)) {
			rollback(s);
			goto sqlfail;
		}
		have = m->version;
	}
	s->version = have;
	return 0;
sqlfail:
	return fail(err, "schema: %s", e.msg);
}

/* where with a password hidden: the userinfo's (postgresql://u:PW@h) and a
 * password=PW parameter's. */
static void hide_password(const char *where, char *out, size_t n)
{
	snprintf(out, n, "%s", where);
	const char *scheme = strstr(where, "://");
	if (scheme) {
		char *at = strchr(out + (scheme - where) + 3, '@');
		char *colon = strchr(out + (scheme - where) + 3, ':');
		if (at && colon && colon < at) {
			char rest[256];
			snprintf(rest, sizeof rest, "%s", at);
			snprintf(colon, n - (size_t)(colon - out), ":***%s", rest);
		}
	}
	char *pw = strstr(out, "password=");
	if (pw) {
		char rest[256];
		const char *end = pw + strcspn(pw, "& ");
		snprintf(rest, sizeof rest, "%s", end);
		snprintf(pw, n - (size_t)(pw - out), "password=***%s", rest);
	}
}

/* sql with its {LOCK} (at most one) replaced by lock_rows; malloc'd. */
static char *with_lock(const char *sql, const char *lock_rows)
{
	const char *at = strstr(sql, "{LOCK}");
	size_t n = strlen(sql) + strlen(lock_rows) + 1;
	char *out = malloc(n);
	if (!out)
		abort();
	if (at)
		snprintf(out, n, "%.*s%s%s", (int)(at - sql), sql, lock_rows, at + 6);
	else
		snprintf(out, n, "%s", sql);
	return out;
}

static bool is_postgres_url(const char *where)
{
	return !strncmp(where, "postgresql://", 13) || !strncmp(where, "postgres://", 11);
}

store *store_open(const char *where, store_error *err)
{
	store *s = calloc(1, sizeof *s);
	if (!s)
		abort();
	pthread_mutex_init(&s->mu, NULL);
	hide_password(where, s->location, sizeof s->location);
	store_error e = { "" };
	s->be = &store_sqlite;
	if (is_postgres_url(where)) {
#ifdef HAVE_LIBPQ
		s->be = &store_postgres;
#else
		fail(err, "%s: this tird was built without PostgreSQL (configure found no libpq)",
		     s->location);
		store_close(s);
		return NULL;
#endif
	}
	if (!(s->c = s->be->open(where, &e))) {
		if (s->be == &store_sqlite)
			fail(err, "%s", e.msg);     /* names the path already */
		else
			fail(err, "%s: %s", s->location, e.msg);
		store_close(s);
		return NULL;
	}
	if (migrate(s, err)) {
		store_close(s);
		return NULL;
	}
	for (int i = 0; i < ST_COUNT; i++) {
		char *sql = with_lock(stmt_sql[i], s->be->lock_rows);
		s->st[i] = s->be->prepare(s->c, sql, &e);
		free(sql);
		if (!s->st[i]) {
			fail(err, "%s: %s", s->location, e.msg);
			store_close(s);
			return NULL;
		}
	}
	if (s->be->watch && !(s->watch = s->be->watch(where, &s->best_changes, &s->best_live))) {
		fail(err, "%s: cannot start watching the best rows: %s", s->location,
		     strerror(errno));
		store_close(s);
		return NULL;
	}
	return s;
}

void store_close(store *s)
{
	if (!s)
		return;
	if (s->watch)
		s->be->unwatch(s->watch);
	for (int i = 0; i < ST_COUNT; i++)
		if (s->st[i])
			s->be->finalize(s->st[i]);
	if (s->c)
		s->be->close(s->c);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

int store_schema_version(store *s)
{
	return s->version;
}

bool store_shared(store *s)
{
	return s->be->shared;
}

bool store_best_epoch(store *s, uint64_t *epoch)
{
	*epoch = atomic_load(&s->best_changes);
	return !s->watch || atomic_load(&s->best_live);
}

const char *store_backend_name(store *s)
{
	return s->be->name;
}

const char *store_location(store *s)
{
	return s->location;
}

/* ---- workloads, targets -------------------------------------------------------------- */

/* The mutex held. */
static int do_workload_put(store *s, const char *key, const char *op,
			   const char *canonical, double flops, store_error *err)
{
	db_stmt *q = stmt(s, ST_WL_PUT);
	bind_text(q, 1, key);
	bind_text(q, 2, op);
	bind_text(q, 3, canonical);
	bind_double(q, 4, flops);
	bind_double(q, 5, store_now());
	return exec(q, err);
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
	db_stmt *q = stmt(s, ST_WL_GET);
	bind_text(q, 1, key);
	int rc = step(q, err), ret;
	if (rc == DB_ROW) {
		if (canonical)
			*canonical = col_dup(q, 0);
		if (op)
			*op = col_dup(q, 1);
		if (flops)
			*flops = col_real(q, 2);
		ret = 1;
	} else {
		ret = rc == DB_DONE ? 0 : -1;
	}
	finish(q);
	pthread_mutex_unlock(&s->mu);
	return ret;
}

/* The mutex held. */
static int do_target_put(store *s, const char *key, const char *kind, store_error *err)
{
	db_stmt *q = stmt(s, ST_TGT_PUT);
	bind_text(q, 1, key);
	bind_text(q, 2, kind);
	bind_double(q, 3, store_now());
	return exec(q, err);
}

int store_target_put(store *s, const char *key, const char *kind, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	int rc = do_target_put(s, key, kind, err);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

/* ---- records and best --------------------------------------------------------------------- */

/* Binds r's columns ?1..?16 (REC_INSERT's and REC_REPLACE's order). */
static void bind_record(db_stmt *q, const store_record *r, bool ok, double now)
{
	bind_text(q, 1, r->id);
	bind_text(q, 2, r->workload_key);
	bind_text(q, 3, r->target);
	bind_text(q, 4, r->trace);
	bind_text(q, 5, r->status);
	bind_pos(q, 6, ok ? r->latency_us : 0);
	if (r->max_rel_error >= 0)
		bind_double(q, 7, r->max_rel_error > 1e300 ? 1e300 : r->max_rel_error);
	bind_text(q, 8, r->message);
	bind_text(q, 9, r->worker);
	if (r->job_id > 0)
		bind_int64(q, 10, r->job_id);
	bind_double(q, 11, r->created > 0 ? r->created : now);
	bind_text(q, 12, r->imported ? "imported" : "measured");
	bind_int64(q, 13, !r->imported || r->trusted);
	bind_text(q, 14, r->source);
	bind_text(q, 15, r->token);
	bind_text(q, 16, r->host);
}

/* The record id of the best row of (wk, target) into out ("" none); the
 * mutex held.  0 or -1. */
static int do_best_id(store *s, const char *wk, const char *target, char out[65],
		      store_error *err)
{
	db_stmt *q = stmt(s, ST_BEST_ROW);
	bind_text(q, 1, wk);
	bind_text(q, 2, target);
	int rc = step(q, err);
	out[0] = '\0';
	if (rc == DB_ROW)
		col_copy(q, 1, out, 65);
	finish(q);
	return rc == DB_ROW || rc == DB_DONE ? 0 : -1;
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
	db_stmt *q = stmt(s, ST_BEST_ENSURE);
	bind_text(q, 1, wk);
	bind_text(q, 2, target);
	bind_double(q, 3, now);
	if (exec(q, err))
		return -1;
	q = stmt(s, ST_BEST_RECOMPUTE);
	bind_text(q, 1, wk);
	bind_text(q, 2, target);
	bind_double(q, 3, now);
	if (exec(q, err) || do_best_id(s, wk, target, after, err))
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
	db_stmt *q = stmt(s, ST_REC_INSERT);
	bind_record(q, r, ok, now);
	if (exec(q, err))
		return -1;
	if (changes(q) == 0) {
		if (r->imported)
			return 0;
		/* a measurement here of a stored id: it replaces an import */
		q = stmt(s, ST_REC_ORIGIN);
		bind_text(q, 1, r->id);
		int rc = step(q, err);
		bool was_import = rc == DB_ROW && col_text(q, 0) &&
				  !strcmp(col_text(q, 0), "imported");
		finish(q);
		if (rc != DB_ROW && rc != DB_DONE)
			return -1;
		if (!was_import)
			return 0;
		q = stmt(s, ST_REC_REPLACE);
		bind_record(q, r, ok, now);
		if (exec(q, err))
			return -1;
		if (changes(q) == 0)
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
	int rc = step(q, err);
	if (rc == DB_DONE) {
		finish(q);
		q = stmt(s, ST_BEST_NEW);
		bind_text(q, 1, r->workload_key);
		bind_text(q, 2, r->target);
		bind_text(q, 3, ok ? r->id : NULL);
		bind_pos(q, 4, ok ? r->latency_us : 0);
		bind_double(q, 5, now);
		if (exec(q, err))
			return -1;
		if (changes(q) == 0)
			return fail(err, "record %s: workload %s is not stored", r->id,
				    r->workload_key);
		if (best_changed)
			*best_changed = ok;
		return 1;
	}
	if (rc != DB_ROW) {
		finish(q);
		return -1;
	}
	bool none = col_null(q, 1);
	double cur = col_real(q, 0);
	finish(q);
	q = stmt(s, ST_BEST_TRIAL);
	bind_text(q, 1, r->workload_key);
	bind_text(q, 2, r->target);
	bind_double(q, 3, now);
	if (exec(q, err))
		return -1;
	if (ok && (none || r->latency_us < cur)) {
		q = stmt(s, ST_BEST_SET);
		bind_text(q, 1, r->workload_key);
		bind_text(q, 2, r->target);
		bind_text(q, 3, r->id);
		bind_double(q, 4, r->latency_us);
		bind_double(q, 5, now);
		if (exec(q, err))
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
static void record_from_row(db_stmt *q, store_record *r)
{
	*r = (store_record){ .max_rel_error = -1 };
	col_copy(q, 0, r->id, sizeof r->id);
	r->workload_key = col_text(q, 1);
	r->target = col_text(q, 2);
	r->trace = col_text(q, 3);
	r->status = col_text(q, 4);
	r->latency_us = col_real(q, 5);
	if (!col_null(q, 6))
		r->max_rel_error = col_real(q, 6);
	r->message = col_text(q, 7);
	r->worker = col_text(q, 8);
	r->job_id = col_int64(q, 9);
	r->created = col_real(q, 10);
	const char *origin = col_text(q, 11);
	r->imported = origin && !strcmp(origin, "imported");
	r->trusted = col_int64(q, 12) != 0;
	r->source = col_text(q, 13);
	r->token = col_text(q, 14);
	r->host = col_text(q, 15);
}

/* Steps q (bound), calling fn for each row; where cursor is not NULL, the
 * row's rowid (the column after REC_COLS) is left there; the mutex held. */
static int each_record(store *s, db_stmt *q, void (*fn)(void *ctx, const store_record *r),
		       void *ctx, int64_t *cursor, store_error *err)
{
	int n = 0, rc;
	while ((rc = step(q, err)) == DB_ROW) {
		store_record r;
		record_from_row(q, &r);
		if (cursor)
			*cursor = col_int64(q, 16);
		fn(ctx, &r);
		n++;
	}
	if (rc != DB_DONE)
		n = -1;
	finish(q);
	return n;
}

int store_records_each(store *s, const char *workload_key, const char *target,
		       void (*fn)(void *ctx, const store_record *r), void *ctx,
		       store_error *err)
{
	pthread_mutex_lock(&s->mu);
	db_stmt *q = stmt(s, ST_REC_EACH);
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
	db_stmt *q = stmt(s, ST_REC_PAGE);
	bind_text(q, 1, workload_key);
	bind_text(q, 2, target);
	bind_int64(q, 3, *cursor);
	bind_int64(q, 4, limit);
	int n = each_record(s, q, fn, ctx, cursor, err);
	pthread_mutex_unlock(&s->mu);
	return n;
}

int store_untrusted_each(store *s, const char *workload_key, const char *target, int limit,
			 void (*fn)(void *ctx, const store_record *r), void *ctx,
			 store_error *err)
{
	pthread_mutex_lock(&s->mu);
	db_stmt *q = stmt(s, ST_REC_UNTRUSTED);
	bind_text(q, 1, workload_key);
	bind_text(q, 2, target);
	bind_int64(q, 3, limit > 0 ? limit : NO_LIMIT);
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
	db_stmt *q;
	int rc;
	if (begin(s, &e))
		goto fail;
	q = stmt(s, ST_REC_ORIGIN);
	bind_text(q, 1, id);
	rc = step(q, err);
	if (rc == DB_ROW) {
		col_copy(q, 1, wk, sizeof wk);
		col_copy(q, 2, target, sizeof target);
	}
	finish(q);
	if (rc != DB_ROW) {
		rollback(s);
		ret = rc == DB_DONE ? 0 : -1;
		goto out;
	}
	/* the best row lets go of it first (best.record_id references it) */
	what = "the best row";
	q = stmt(s, ST_BEST_UNSET);
	bind_text(q, 1, id);
	if (exec(q, &e))
		goto fail;
	was_best = changes(q) > 0;
	what = "the record";
	q = stmt(s, ST_REC_DELETE);
	bind_text(q, 1, id);
	if (exec(q, &e))
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
	db_stmt *q = stmt(s, ST_REC_COUNT);
	bind_text(q, 1, workload_key);
	bind_text(q, 2, target);
	int n = step(q, err) == DB_ROW ? (int)col_int64(q, 0) : -1;
	finish(q);
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

static void best_from_row(db_stmt *q, store_best *b)
{
	memset(b, 0, sizeof *b);
	col_copy(q, 0, b->workload_key, sizeof b->workload_key);
	col_copy(q, 1, b->target, sizeof b->target);
	b->op = col_dup(q, 2);
	b->canonical = col_dup(q, 3);
	b->flops = col_real(q, 4);
	col_copy(q, 5, b->record_id, sizeof b->record_id);
	b->trace = col_dup(q, 6);
	b->latency_us = col_real(q, 7);
	b->trials = col_int64(q, 8);
	b->updated = col_real(q, 9);
}

int store_best_get(store *s, const char *workload_key, const char *target,
		   store_best *b, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	db_stmt *q = stmt(s, ST_BEST_GET);
	bind_text(q, 1, workload_key);
	bind_text(q, 2, target);
	int rc = step(q, err), ret;
	if (rc == DB_ROW) {
		best_from_row(q, b);
		ret = 1;
	} else {
		ret = rc == DB_DONE ? 0 : -1;
	}
	finish(q);
	pthread_mutex_unlock(&s->mu);
	return ret;
}

int store_best_each(store *s, const char *op, const char *target, const char *prefix,
		    void (*fn)(void *ctx, const store_best *b), void *ctx,
		    store_error *err)
{
	int n = 0, rc;
	pthread_mutex_lock(&s->mu);
	db_stmt *q = stmt(s, ST_BEST_EACH);
	bind_text(q, 1, op);
	bind_text(q, 2, target);
	bind_text(q, 3, prefix && *prefix ? prefix : NULL);
	while ((rc = step(q, err)) == DB_ROW) {
		store_best b;
		best_from_row(q, &b);
		fn(ctx, &b);
		store_best_clear(&b);
		n++;
	}
	if (rc != DB_DONE)
		n = -1;
	finish(q);
	pthread_mutex_unlock(&s->mu);
	return n;
}

/* ---- cost models ------------------------------------------------------------------------- */

int store_model_put(store *s, const char *target_kind, const char *name,
		    const void *blob, size_t len, const char *writer, double now,
		    double writer_until, int64_t *version, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	db_stmt *q = stmt(s, ST_MODEL_PUT);
	bind_text(q, 1, target_kind);
	bind_text(q, 2, name);
	q->be->bind_blob(q, 3, blob, len);
	bind_double(q, 4, store_now());
	bind_text(q, 5, writer);
	if (writer)
		bind_double(q, 6, writer_until);
	bind_double(q, 7, now);
	/* a row back (RETURNING version): written; none: the lease is
	 * another's, the upsert's WHERE kept the row */
	int rc = step(q, err);
	if (rc == DB_ROW && version)
		*version = col_int64(q, 0);
	finish(q);
	pthread_mutex_unlock(&s->mu);
	return rc == DB_ERROR ? -1 : rc == DB_ROW;
}

int store_model_renew(store *s, const char *target_kind, const char *writer,
		      double writer_until, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	db_stmt *q = stmt(s, ST_MODEL_RENEW);
	bind_text(q, 1, target_kind);
	bind_text(q, 2, writer);
	bind_double(q, 3, writer_until);
	int rc = step(q, err);
	int64_t n = changes(q);
	finish(q);
	pthread_mutex_unlock(&s->mu);
	return rc == DB_ERROR ? -1 : n > 0;
}

int store_model_release(store *s, const char *target_kind, const char *writer,
			store_error *err)
{
	pthread_mutex_lock(&s->mu);
	db_stmt *q = stmt(s, ST_MODEL_RELEASE);
	bind_text(q, 1, target_kind);
	bind_text(q, 2, writer);
	int rc = exec(q, err);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

int store_model_get(store *s, const char *target_kind, void **blob, size_t *len,
		    int64_t *version, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	db_stmt *q = stmt(s, ST_MODEL_GET);
	bind_text(q, 1, target_kind);
	int rc = step(q, err), ret;
	if (rc == DB_ROW) {
		*blob = q->be->blob(q, 0, len);
		if (version)
			*version = col_int64(q, 1);
		ret = 1;
	} else {
		ret = rc == DB_DONE ? 0 : -1;
	}
	finish(q);
	pthread_mutex_unlock(&s->mu);
	return ret;
}

int store_model_version(store *s, const char *target_kind, int64_t *version,
			store_error *err)
{
	pthread_mutex_lock(&s->mu);
	db_stmt *q = stmt(s, ST_MODEL_VERSION);
	bind_text(q, 1, target_kind);
	int rc = step(q, err);
	if (rc == DB_ROW)
		*version = col_int64(q, 0);
	finish(q);
	pthread_mutex_unlock(&s->mu);
	return rc == DB_ROW ? 1 : rc == DB_DONE ? 0 : -1;
}
