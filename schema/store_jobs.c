/*
 * store_jobs.c — the jobs of the tuning database (store.h: "jobs" and "jobs
 * under leases"), over the statements and helpers of store_int.h.
 *
 * A job's row changes in one statement or one write transaction.  Its
 * state moves only from the state the caller read (store_job_transition):
 * a stale caller changes nothing.  Claims (004_job_lease.sql): a claim, a
 * renewal and an owner's move each test the owner and the lease in the
 * statement that changes the row, inside the write transaction, so a
 * replica that lost its claim changes nothing; the row a claim reads is
 * locked with the backend's lock_rows ({LOCK}).
 */
#include "store_int.h"

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

/* ---- jobs ------------------------------------------------------------------------------- */

void store_job_clear(store_job *j)
{
	free(j->message);
	j->message = NULL;
}

/* The mutex held. */
static int do_job_insert(store *s, store_job *j, store_error *err)
{
	if (!j->created)
		j->created = store_now();
	db_stmt *q = stmt(s, ST_JOB_INSERT);
	bind_text(q, 1, j->workload_key);
	bind_text(q, 2, j->target);
	bind_int64(q, 3, j->trials);
	bind_int64(q, 4, j->batch);
	bind_text(q, 5, store_job_state_name(j->state));
	bind_int64(q, 6, j->cached);
	bind_int64(q, 7, j->trials_done);
	bind_int64(q, 8, j->errors);
	bind_pos(q, 9, j->best_us);
	bind_text(q, 10, j->message);
	bind_double(q, 11, j->created);
	bind_pos(q, 12, j->started);
	bind_pos(q, 13, j->finished);
	bind_text(q, 14, j->search.cost_model[0] ? j->search.cost_model : NULL);
	if (j->search.has_seed)
		bind_int64(q, 15, j->search.seed);
	if (j->search.has_patience)
		bind_int64(q, 16, j->search.patience);
	int rc = step(q, err);
	if (rc == DB_ROW)
		j->id = col_int64(q, 0);
	else if (rc == DB_DONE)
		fail(err, "job insert: no id returned");
	finish(q);
	return rc == DB_ROW ? 0 : -1;
}

int store_job_insert(store *s, store_job *j, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	int rc = do_job_insert(s, j, err);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

/* store_job_transition, and with owner (not NULL) store_job_move: the mutex
 * held. */
static int do_transition(store *s, int64_t id, const char *owner, store_job_state from,
			 store_job_state to, const char *message, store_error *err)
{
	int ret = -1;
	if (begin(s, err))
		goto out;
	db_stmt *q = stmt(s, ST_JOB_STATE);
	bind_int64(q, 1, id);
	int rc = step(q, err);
	if (rc != DB_ROW) {
		finish(q);
		rollback(s);
		ret = rc == DB_DONE ? fail(err, "job %lld: no such job", (long long)id) : -1;
		goto out;
	}
	int cur = store_job_state_parse(col_text(q, 0));
	const char *own = col_text(q, 1);
	bool owned = !owner || (own && !strcmp(own, owner));
	finish(q);
	if (cur != (int)from || !owned) {
		rollback(s);
		ret = 1;
		goto out;
	}
	double now = store_now();
	q = stmt(s, ST_JOB_MOVE);
	bind_int64(q, 1, id);
	bind_text(q, 2, store_job_state_name(to));
	bind_text(q, 3, message);
	bind_pos(q, 4, to == STORE_JOB_RUNNING ? now : 0);
	bind_pos(q, 5, to >= STORE_JOB_DONE ? now : 0);
	if (exec(q, err) || commit(s, err)) {
		rollback(s);
		goto out;
	}
	ret = 0;
out:
	return ret;
}

int store_job_transition(store *s, int64_t id, store_job_state from,
			 store_job_state to, const char *message, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	int rc = do_transition(s, id, NULL, from, to, message, err);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

int store_job_move(store *s, int64_t id, const char *owner, store_job_state from,
		   store_job_state to, const char *message, store_error *err)
{
	if (!owner)
		return fail(err, "job %lld: a move needs its owner", (long long)id);
	pthread_mutex_lock(&s->mu);
	int rc = do_transition(s, id, owner, from, to, message, err);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

int store_job_progress(store *s, int64_t id, const char *owner, int trials_done,
		       int errors, double best_us, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	db_stmt *q = stmt(s, ST_JOB_PROG);
	bind_int64(q, 1, id);
	bind_int64(q, 2, trials_done);
	bind_int64(q, 3, errors);
	bind_pos(q, 4, best_us);
	bind_text(q, 5, owner);
	int rc = exec(q, err);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static void job_from_row(db_stmt *q, store_job *j)
{
	memset(j, 0, sizeof *j);
	j->id = col_int64(q, 0);
	col_copy(q, 1, j->workload_key, sizeof j->workload_key);
	col_copy(q, 2, j->target, sizeof j->target);
	j->trials = col_int64(q, 3);
	j->batch = col_int64(q, 4);
	int st = store_job_state_parse(col_text(q, 5));
	j->state = st < 0 ? STORE_JOB_FAILED : (store_job_state)st;
	j->cached = col_int64(q, 6) != 0;
	j->trials_done = col_int64(q, 7);
	j->errors = col_int64(q, 8);
	j->best_us = col_real(q, 9);
	j->message = col_dup(q, 10);
	j->created = col_real(q, 11);
	j->started = col_real(q, 12);
	j->finished = col_real(q, 13);
	col_copy(q, 14, j->search.cost_model, sizeof j->search.cost_model);
	j->search.has_seed = !col_null(q, 15);
	j->search.seed = j->search.has_seed ? col_int64(q, 15) : 0;
	col_copy(q, 16, j->owner, sizeof j->owner);
	j->lease_until = col_real(q, 17);
	j->cancel_requested = col_int64(q, 18) != 0;
	j->search.has_patience = !col_null(q, 19);
	j->search.patience = j->search.has_patience ? (int)col_int64(q, 19) : 0;
}

int store_job_get(store *s, int64_t id, store_job *j, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	db_stmt *q = stmt(s, ST_JOB_GET);
	bind_int64(q, 1, id);
	int rc = step(q, err), ret;
	if (rc == DB_ROW) {
		job_from_row(q, j);
		ret = 1;
	} else {
		ret = rc == DB_DONE ? 0 : -1;
	}
	finish(q);
	pthread_mutex_unlock(&s->mu);
	return ret;
}

/* Steps q, bound, the mutex held: fn with each job row, then q finished.
 * The rows counted, or -1 with the message in err. */
static int each_job(db_stmt *q, void (*fn)(void *ctx, const store_job *j), void *ctx,
		    store_error *err)
{
	int n = 0, rc;
	while ((rc = step(q, err)) == DB_ROW) {
		store_job j;
		job_from_row(q, &j);
		fn(ctx, &j);
		store_job_clear(&j);
		n++;
	}
	finish(q);
	return rc == DB_DONE ? n : -1;
}

int store_jobs_list(store *s, int state, int limit,
		    void (*fn)(void *ctx, const store_job *j), void *ctx,
		    store_error *err)
{
	pthread_mutex_lock(&s->mu);
	db_stmt *q = stmt(s, ST_JOB_LIST);
	bind_text(q, 1, state >= 0 ? store_job_state_name((store_job_state)state) : NULL);
	bind_int64(q, 2, limit > 0 ? limit : NO_LIMIT);
	int n = each_job(q, fn, ctx, err);
	pthread_mutex_unlock(&s->mu);
	return n;
}

/* ---- jobs under leases ------------------------------------------------------------------- */

int store_jobs_claimable(store *s, double now,
			 void (*fn)(void *ctx, const store_job *j), void *ctx,
			 store_error *err)
{
	pthread_mutex_lock(&s->mu);
	db_stmt *q = stmt(s, ST_JOB_CLAIMABLE);
	bind_double(q, 1, now);
	int n = each_job(q, fn, ctx, err);
	pthread_mutex_unlock(&s->mu);
	return n;
}

int store_job_claim(store *s, int64_t id, const char *owner, double now,
		    double lease_until, store_job *j, store_error *err)
{
	int ret = -1;
	if (!owner || !owner[0])
		return fail(err, "job %lld: a claim needs its owner", (long long)id);
	pthread_mutex_lock(&s->mu);
	if (begin(s, err))
		goto out;
	db_stmt *q = stmt(s, ST_JOB_CLAIM_ROW);
	bind_int64(q, 1, id);
	bind_double(q, 2, now);
	int rc = step(q, err);
	if (rc == DB_ROW && j)
		job_from_row(q, j);
	finish(q);
	if (rc != DB_ROW) {
		rollback(s);
		ret = rc == DB_DONE ? 0 : -1;
		goto out;
	}
	q = stmt(s, ST_JOB_CLAIM_SET);
	bind_int64(q, 1, id);
	bind_text(q, 2, owner);
	bind_double(q, 3, lease_until);
	bind_double(q, 4, now);
	if (exec(q, err) || commit(s, err)) {
		rollback(s);
		if (j)
			store_job_clear(j);
		goto out;
	}
	ret = 1;
out:
	pthread_mutex_unlock(&s->mu);
	return ret;
}

int store_job_renew(store *s, int64_t id, const char *owner, double lease_until,
		    bool *cancel_requested, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	db_stmt *q = stmt(s, ST_JOB_RENEW);
	bind_int64(q, 1, id);
	bind_text(q, 2, owner);
	bind_double(q, 3, lease_until);
	int rc = step(q, err), ret = rc == DB_ROW ? 1 : rc == DB_DONE ? 0 : -1;
	if (rc == DB_ROW && cancel_requested)
		*cancel_requested = col_int64(q, 0) != 0;
	finish(q);
	pthread_mutex_unlock(&s->mu);
	return ret;
}

int store_job_insert_or_join(store *s, store_job *j, bool *joined, store_error *err)
{
	int ret = -1;
	*joined = false;
	pthread_mutex_lock(&s->mu);
	if (begin(s, err))
		goto out;
	db_stmt *q = stmt(s, ST_JOB_SAME);
	bind_text(q, 1, j->workload_key);
	bind_text(q, 2, j->target);
	int rc = step(q, err);
	if (rc == DB_ROW) {
		job_from_row(q, j);
		*joined = true;
	}
	finish(q);
	if (rc == DB_ERROR || (rc == DB_DONE && do_job_insert(s, j, err)) || commit(s, err)) {
		rollback(s);
		if (*joined)
			store_job_clear(j);
		*joined = false;
		goto out;
	}
	ret = 0;
out:
	pthread_mutex_unlock(&s->mu);
	return ret;
}

int store_job_request_cancel(store *s, int64_t id, store_error *err)
{
	pthread_mutex_lock(&s->mu);
	db_stmt *q = stmt(s, ST_JOB_CANCEL_REQ);
	bind_int64(q, 1, id);
	int rc = step(q, err);
	int64_t n = changes(q);
	finish(q);
	pthread_mutex_unlock(&s->mu);
	return rc == DB_ERROR ? -1 : n > 0;
}
