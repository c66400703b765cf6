/*
 * store_workers.c — the workers of the tuning database and the batches
 * leased to them (store.h: "workers and the batches leased to them"), over
 * the statements and helpers of store_int.h.
 *
 * A batch moves in single statements that name the state they move from
 * (BAT_TAKE: pending, BAT_POST: leased to this worker, BAT_STORED:
 * measured), so that of two replicas racing for one move exactly one
 * changes the row and the other learns it lost from the change count; the
 * writes that also touch the batch's items (add, post) are one transaction.
 * Leasing reads the oldest candidate and then takes it, trying the next
 * when another replica took it in between, so that no write lock is held
 * while idle workers poll (on SQLite a write transaction locks the file).
 * Every function takes the store's mutex.
 */
#include "store_int.h"

/* ---- workers ----------------------------------------------------------------------------- */

/* A row of WRK_COLS, then the held batch's id and job. */
static void worker_from_row(db_stmt *q, store_worker *w)
{
	*w = (store_worker){ 0 };
	col_copy(q, 0, w->id, sizeof w->id);
	col_copy(q, 1, w->target, sizeof w->target);
	col_copy(q, 2, w->name, sizeof w->name);
	col_copy(q, 3, w->token, sizeof w->token);
	col_copy(q, 4, w->peer, sizeof w->peer);
	col_copy(q, 5, w->emulator, sizeof w->emulator);
	const char *st = col_text(q, 6);
	w->live = st && !strcmp(st, "live");
	w->registered = col_real(q, 7);
	w->last_seen = col_real(q, 8);
	w->batch_id = col_int64(q, 9);
	w->job_id = col_int64(q, 10);
}

int store_worker_put(store *s, const store_worker *w, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	db_stmt *q = stmt(s, ST_WRK_PUT);
	bind_text(q, 1, w->id);
	bind_text(q, 2, w->target);
	bind_text(q, 3, w->name);
	bind_text(q, 4, w->live ? "live" : "gone");
	bind_double(q, 5, w->registered);
	bind_double(q, 6, w->last_seen);
	bind_text(q, 7, w->token);
	bind_text(q, 8, w->peer);
	bind_text(q, 9, w->emulator);
	int rc = exec(q, err);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

int store_worker_get(store *s, const char *id, store_worker *w, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	db_stmt *q = stmt(s, ST_WRK_GET);
	bind_text(q, 1, id);
	int rc = step(q, err);
	if (rc == DB_ROW)
		worker_from_row(q, w);
	finish(q);
	pthread_mutex_unlock(&s->mu);
	return rc == DB_ERROR ? -1 : rc == DB_ROW;
}

int store_worker_seen(store *s, const char *id, double now, double lease_until,
		      store_error *err)
{
	pthread_mutex_lock(&s->mu);
	db_stmt *q = stmt(s, ST_WRK_SEEN);
	bind_text(q, 1, id);
	bind_double(q, 2, now);
	int rc = step(q, err);
	int64_t n = changes(q);
	finish(q);
	if (rc != DB_ERROR && n > 0 && lease_until > 0) {
		q = stmt(s, ST_BAT_EXTEND);
		bind_text(q, 1, id);
		bind_double(q, 2, lease_until);
		rc = exec(q, err) ? DB_ERROR : DB_DONE;
	}
	pthread_mutex_unlock(&s->mu);
	return rc == DB_ERROR ? -1 : n > 0;
}

int store_worker_gone(store *s, const char *id, double now, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	int ret = -1;
	if (begin(s, err))
		goto out;
	db_stmt *q = stmt(s, ST_WRK_GONE);
	bind_text(q, 1, id);
	bind_double(q, 2, now);
	if (exec(q, err))
		goto fail;
	q = stmt(s, ST_BAT_BACK_OF);
	bind_text(q, 1, id);
	if (exec(q, err))
		goto fail;
	int64_t back = changes(q);
	if (commit(s, err))
		goto fail;
	ret = (int)back;
	goto out;
fail:
	rollback(s);
out:
	pthread_mutex_unlock(&s->mu);
	return ret;
}

int store_workers_expire(store *s, double silent_before, double now, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	db_stmt *q = stmt(s, ST_WRK_SILENT);
	bind_double(q, 1, silent_before);
	int ret = -1;
	if (!exec(q, err)) {
		q = stmt(s, ST_BAT_EXPIRE);
		bind_double(q, 1, now);
		if (!exec(q, err))
			ret = (int)changes(q);
	}
	pthread_mutex_unlock(&s->mu);
	return ret;
}

/* One row's first column of a statement with one text parameter (or
 * none): 1 with *v (and the text in out[n]), 0 no row, -1. */
static int one_value(store *s, int id, const char *param, int64_t *v, char *out, size_t n,
		     store_error *err)
{
	pthread_mutex_lock(&s->mu);
	db_stmt *q = stmt(s, id);
	if (param)
		bind_text(q, 1, param);
	int rc = step(q, err);
	if (rc == DB_ROW) {
		if (v)
			*v = col_int64(q, 0);
		if (out)
			col_copy(q, 0, out, n);
	}
	finish(q);
	pthread_mutex_unlock(&s->mu);
	return rc == DB_ERROR ? -1 : rc == DB_ROW;
}

int store_worker_serves(store *s, const char *target, store_error *err)
{
	return one_value(s, ST_WRK_SERVES, target, NULL, NULL, 0, err);
}

int store_worker_of_kind(store *s, const char *kind, char *key, size_t n, store_error *err)
{
	char prefix[64];
	snprintf(prefix, sizeof prefix, "%s:", kind);
	return one_value(s, ST_WRK_KIND, prefix, NULL, key, n, err);
}

int store_workers_live(store *s, store_error *err)
{
	int64_t v = 0;
	return one_value(s, ST_WRK_LIVE, NULL, &v, NULL, 0, err) < 0 ? -1 : (int)v;
}

int store_worker_each(store *s, double since, void (*fn)(void *ctx, const store_worker *w),
		      void *ctx, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	db_stmt *q = stmt(s, ST_WRK_EACH);
	bind_double(q, 1, since);
	int n = 0, rc;
	while ((rc = step(q, err)) == DB_ROW) {
		store_worker w;
		worker_from_row(q, &w);
		fn(ctx, &w);
		n++;
	}
	finish(q);
	pthread_mutex_unlock(&s->mu);
	return rc == DB_ERROR ? -1 : n;
}

/* ---- batches ----------------------------------------------------------------------------- */

void store_batch_clear(store_batch_row *b)
{
	free(b->canonical);
	b->canonical = NULL;
	if (b->traces)
		for (int i = 0; i < b->n; i++)
			free(b->traces[i]);
	free(b->traces);
	b->traces = NULL;
}

/* A row of BAT_COLS. */
static void batch_from_row(db_stmt *q, store_batch_row *b)
{
	*b = (store_batch_row){ 0 };
	b->id = col_int64(q, 0);
	b->job_id = col_int64(q, 1);
	col_copy(q, 2, b->replica, sizeof b->replica);
	col_copy(q, 3, b->target, sizeof b->target);
	col_copy(q, 4, b->workload_key, sizeof b->workload_key);
	b->n = (int)col_int64(q, 5);
	col_copy(q, 6, b->state, sizeof b->state);
	col_copy(q, 7, b->worker, sizeof b->worker);
	b->deadline = col_real(q, 8);
	col_copy(q, 9, b->token, sizeof b->token);
	col_copy(q, 10, b->host, sizeof b->host);
	b->not_stored = (int)col_int64(q, 11);
	b->cache_hits = (int)col_int64(q, 12);
}

int store_batch_add(store *s, store_batch_row *b, const char *canonical, const char *const *traces,
		    store_error *err)
{
	pthread_mutex_lock(&s->mu);
	int ret = -1;
	if (begin(s, err))
		goto out;
	db_stmt *q = stmt(s, ST_BAT_INSERT);
	bind_int64(q, 1, b->job_id);
	bind_text(q, 2, b->replica);
	bind_text(q, 3, b->target);
	bind_text(q, 4, b->workload_key);
	bind_text(q, 5, canonical);
	bind_int64(q, 6, b->n);
	bind_double(q, 7, store_now());
	int rc = step(q, err);
	if (rc == DB_ROW)
		b->id = col_int64(q, 0);
	else if (rc == DB_DONE)
		fail(err, "batch insert: no id returned");
	finish(q);
	if (rc != DB_ROW)
		goto fail;
	for (int i = 0; i < b->n; i++) {
		q = stmt(s, ST_BAT_ITEM);
		bind_int64(q, 1, b->id);
		bind_int64(q, 2, i);
		bind_text(q, 3, traces[i]);
		if (exec(q, err))
			goto fail;
	}
	if (commit(s, err))
		goto fail;
	snprintf(b->state, sizeof b->state, "pending");
	ret = 0;
	goto out;
fail:
	rollback(s);
out:
	pthread_mutex_unlock(&s->mu);
	return ret;
}

/* Batch id with its workload and traces into *b (the mutex held): 1, 0
 * none, -1. */
static int do_batch_full(store *s, int64_t id, store_batch_row *b, store_error *err)
{
	db_stmt *q = stmt(s, ST_BAT_FULL);
	bind_int64(q, 1, id);
	int rc = step(q, err);
	if (rc == DB_ROW) {
		batch_from_row(q, b);
		b->canonical = col_dup(q, BAT_NCOLS);  /* BAT_FULL: after BAT_COLS */
	}
	finish(q);
	if (rc != DB_ROW)
		return rc == DB_ERROR ? -1 : 0;
	b->traces = calloc((size_t)(b->n > 0 ? b->n : 1), sizeof *b->traces);
	if (!b->traces || !b->canonical) {
		store_batch_clear(b);
		return fail(err, "batch %lld: out of memory", (long long)id);
	}
	q = stmt(s, ST_BAT_TRACES);
	bind_int64(q, 1, id);
	int i = 0;
	while ((rc = step(q, err)) == DB_ROW && i < b->n)
		b->traces[i++] = col_dup(q, 0);
	finish(q);
	if (rc == DB_ERROR || i != b->n) {
		if (rc != DB_ERROR)
			fail(err, "batch %lld: %d of its %d traces stored", (long long)id, i, b->n);
		store_batch_clear(b);
		return -1;
	}
	return 1;
}

int store_batch_lease(store *s, const char *target, const char *worker, double now,
		      double deadline, store_batch_row *b, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	int ret = 0;
	/* another replica may take the one read first: then the next */
	for (int tries = 0; tries < 8 && ret == 0; tries++) {
		db_stmt *q = stmt(s, ST_BAT_NEXT);
		bind_text(q, 1, target);
		bind_double(q, 2, now);
		int rc = step(q, err);
		int64_t id = rc == DB_ROW ? col_int64(q, 0) : 0;
		finish(q);
		if (rc != DB_ROW) {
			ret = rc == DB_ERROR ? -1 : 0;
			break;
		}
		q = stmt(s, ST_BAT_TAKE);
		bind_int64(q, 1, id);
		bind_text(q, 2, worker);
		bind_double(q, 3, deadline);
		if (exec(q, err)) {
			ret = -1;
			break;
		}
		if (changes(q) == 1)
			ret = do_batch_full(s, id, b, err);
	}
	pthread_mutex_unlock(&s->mu);
	return ret;
}

int store_batch_get(store *s, int64_t id, store_batch_row *b, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	db_stmt *q = stmt(s, ST_BAT_GET);
	bind_int64(q, 1, id);
	int rc = step(q, err);
	if (rc == DB_ROW)
		batch_from_row(q, b);
	finish(q);
	pthread_mutex_unlock(&s->mu);
	return rc == DB_ERROR ? -1 : rc == DB_ROW;
}

int store_batch_post(store *s, int64_t id, const char *worker, int n, const store_result *res,
		     const char *token, const char *host, int cache_hits, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	int ret = -1;
	if (begin(s, err))
		goto out;
	db_stmt *q = stmt(s, ST_BAT_POST);
	bind_int64(q, 1, id);
	bind_text(q, 2, worker);
	bind_text(q, 3, token);
	bind_text(q, 4, host);
	bind_int64(q, 5, n);
	bind_int64(q, 6, cache_hits);
	if (exec(q, err))
		goto fail;
	if (changes(q) != 1) {
		rollback(s);
		ret = 0;
		goto out;
	}
	for (int i = 0; i < n; i++) {
		q = stmt(s, ST_BAT_RESULT);
		bind_int64(q, 1, id);
		bind_int64(q, 2, i);
		bind_text(q, 3, res[i].status[0] ? res[i].status : NULL);
		bind_pos(q, 4, res[i].latency_us);
		if (res[i].max_rel_error >= 0)
			bind_double(q, 5, res[i].max_rel_error);
		bind_text(q, 6, res[i].msg);
		if (exec(q, err))
			goto fail;
	}
	if (commit(s, err))
		goto fail;
	ret = 1;
	goto out;
fail:
	rollback(s);
out:
	pthread_mutex_unlock(&s->mu);
	return ret;
}

int store_batch_results(store *s, int64_t id, int n, store_result *res, store_error *err)
{
	for (int i = 0; i < n; i++)
		res[i] = (store_result){ "", 0, -1, NULL };
	pthread_mutex_lock(&s->mu);
	db_stmt *q = stmt(s, ST_BAT_RESULTS);
	bind_int64(q, 1, id);
	int rc, rows = 0;
	while ((rc = step(q, err)) == DB_ROW) {
		int64_t i = col_int64(q, 0);
		rows++;
		if (i < 0 || i >= n)
			continue;
		col_copy(q, 1, res[i].status, sizeof res[i].status);
		res[i].latency_us = col_null(q, 2) ? 0 : col_real(q, 2);
		res[i].max_rel_error = col_null(q, 3) ? -1 : col_real(q, 3);
		res[i].msg = col_dup(q, 4);
	}
	finish(q);
	pthread_mutex_unlock(&s->mu);
	return rc == DB_ERROR ? -1 : rows > 0;
}

int store_batch_stored(store *s, int64_t id, int not_stored, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	db_stmt *q = stmt(s, ST_BAT_STORED);
	bind_int64(q, 1, id);
	bind_int64(q, 2, not_stored);
	int rc = exec(q, err);
	int64_t n = changes(q);
	pthread_mutex_unlock(&s->mu);
	return rc ? -1 : n > 0;
}

int store_batch_delete(store *s, int64_t id, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	db_stmt *q = stmt(s, ST_BAT_DELETE);
	bind_int64(q, 1, id);
	int rc = exec(q, err);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

int store_batches_purge(store *s, double stored_before, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	db_stmt *q = stmt(s, ST_BAT_PURGE);
	bind_double(q, 1, stored_before);
	int rc = exec(q, err);
	int64_t n = changes(q);
	pthread_mutex_unlock(&s->mu);
	return rc ? -1 : (int)n;
}

int store_batches_pending(store *s, store_error *err)
{
	int64_t v = 0;
	return one_value(s, ST_BAT_PENDING, NULL, &v, NULL, 0, err) < 0 ? -1 : (int)v;
}
