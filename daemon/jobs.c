/*
 * jobs.c — tuning jobs: the state machine, the team-cache rules of
 * submission, and the tuning threads that call tir_tune.  It answers data
 * and tird_error values; api.c turns them into HTTP.
 *
 * A job asks for `trials` measured candidates of one workload on one full
 * target.  Its lifecycle (store.h, STORE_JOB_STATES):
 *
 *   queued ──▶ running ──▶ done        a best record exists
 *     │           ├──────▶ failed      tir_tune failed, or nothing ran ok
 *     │           ├──────▶ cancelled   DELETE /v1/jobs/{id}
 *     │           └──────▶ queued      tird stopped or died: resumes at start
 *     ├──────────────────▶ cancelled
 *     └──────────────────▶ failed      its workload or target no longer parse
 *
 * Every transition goes through set_state(), which checks it against the
 * table above, logs it and writes it to the store in one transaction before
 * the job in memory changes.  A job born from the cache is inserted as done.
 *
 * No job holds a tuning thread while no worker can measure it: a tuning
 * thread takes only a queued job whose full target a live worker serves.
 * The others wait in the queue (the cron duty, jobs_cron, starts the clock
 * of each and fails it after worker_wait_s), and start when a worker of
 * their target registers (jobs_wake).  A running job whose worker goes away
 * gives its thread back the same way: workers_measure gives up after 2
 * lease_s and the job goes back to queued, its measured records kept.
 *
 * A store error never orphans a job: a start the store refused leaves it
 * queued, tried again later; an end the store refused leaves it in memory,
 * its outcome in its message, and jobs_cron writes it again each second
 * until the store takes it (a tird stopped meanwhile resumes the job from
 * its row, finds its records and ends it then).  Before the end, the job's
 * progress is written, so trials_done is always the records counted for
 * (workload, target), also for a job that found its trials stored already.
 * Queued jobs are at most max_queued_jobs: a new one past that is refused
 * (QUEUE_FULL); joining a job or the cache still answers.
 *
 * Submission (jobs_submit), in this order:
 *   1. a job of the same (workload key, full target) queued or running:
 *      join it (JOB_JOINED);
 *   2. a best record whose (workload, target) has at least `trials` stored
 *      records: a job born done (JOB_CACHED) — no measurement;
 *   3. else a new queued job (JOB_NEW).
 * A running job measures trials − (records already stored) more candidates
 * (run.c: job_run, the other half of the manager; jobs_int.h holds the
 * types both halves share).
 *
 * Replicas (lease.c): a job runs under this replica's claim of it in the
 * store.  A tuning thread claims a queued job before it runs it
 * (store_job_claim: no other replica runs it meanwhile); the claim fails
 * when another replica has it, and the job then leaves this replica's
 * memory.  Every write of a running job's state and progress names its
 * owner (store_job_move), so a replica whose claim was taken over (it was
 * stopped past its lease) writes nothing over the new owner's work: its
 * tuning thread drops the job without a word to the store.  Submission
 * joins a job of another replica through the store (insert-or-join, in one
 * transaction); reading or cancelling a job another replica runs goes to the
 * store (its row; its cancel_requested, which the owner reads with each
 * renewal).  jobs_adopt, the lease duty, brings the store's claimable jobs
 * into memory.  On SQLite (one replica) the same paths run.
 *
 * Ownership: active jobs (queued, running) live in js->active, on the heap,
 * guarded by js->mu; the tuning thread that runs a job frees it when the job
 * ends.  Ended jobs live only in the store.  do_x() functions expect js->mu
 * held.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "jobs_int.h"

/* ---- the state machine -------------------------------------------------------- */

static bool allowed(store_job_state from, store_job_state to)
{
	switch (from) {
	case STORE_JOB_QUEUED:
		return to == STORE_JOB_RUNNING || to == STORE_JOB_CANCELLED ||
		       to == STORE_JOB_FAILED;
	case STORE_JOB_RUNNING:
		return to == STORE_JOB_DONE || to == STORE_JOB_FAILED ||
		       to == STORE_JOB_CANCELLED || to == STORE_JOB_QUEUED;
	default:
		return false;          /* done, failed and cancelled are final */
	}
}

/* Moves j to `to` (js->mu held): checks, persists (a running job's move in
 * the name of its claim's owner, this replica), logs, then changes the job
 * in memory and wakes the waiters.  Returns 0; 1 when the stored job is no
 * longer in j's state or no longer this replica's (another replica claimed,
 * cancelled or took it over: the caller drops it); -1 when the transition
 * is not allowed or the store refused it (the job is then unchanged). */
static int do_set_state(jobs *js, job *j, store_job_state to, const char *msg)
{
	store_job_state from = j->state;
	if (!allowed(from, to)) {
		log_error("job %lld: refused transition %s -> %s", (long long)j->id,
			  store_job_state_name(from), store_job_state_name(to));
		return -1;
	}
	store_error err;
	int rc = j->lease ? store_job_move(js->d->db, j->id, js->d->replica, from, to, msg, &err)
			  : store_job_transition(js->d->db, j->id, from, to, msg, &err);
	if (rc > 0) {
		log_warn("job %lld: %s -> %s not stored: the stored job is no longer %s%s",
			 (long long)j->id, store_job_state_name(from), store_job_state_name(to),
			 store_job_state_name(from), j->lease ? " under this replica's claim" : "");
		return 1;
	}
	if (rc < 0) {
		log_error("job %lld: %s -> %s not stored: %s", (long long)j->id,
			  store_job_state_name(from), store_job_state_name(to), err.msg);
		return -1;
	}
	log_info("job %lld: %s -> %s%s%s", (long long)j->id, store_job_state_name(from),
		 store_job_state_name(to), msg ? ": " : "", msg ? msg : "");
	j->state = to;
	if (to == STORE_JOB_QUEUED)
		j->queued_since = store_now();
	if (msg)
		snprintf(j->message, sizeof j->message, "%s", msg);
	if (to == STORE_JOB_RUNNING)
		j->started = store_now();
	if (to >= STORE_JOB_DONE)
		atomic_fetch_add(&js->d->metrics.jobs_ended[to], 1);
	j->version++;
	pthread_cond_broadcast(&js->changed);
	return 0;
}

/* ---- jobs in memory ---------------------------------------------------------------- */

static job *do_find(jobs *js, int64_t id)
{
	for (job *j = js->active; j; j = j->next)
		if (j->id == id)
			return j;
	return NULL;
}

static job *do_find_same(jobs *js, const char *key, const char *target)
{
	for (job *j = js->active; j; j = j->next)
		if (!strcmp(j->key, key) && !strcmp(j->target.key, target) && !j->end_unstored)
			return j;
	return NULL;
}

static void do_append(jobs *js, job *j)
{
	job **p = &js->active;
	while (*p)
		p = &(*p)->next;
	j->next = NULL;
	j->queued_since = store_now();
	*p = j;
	pthread_cond_signal(&js->work);
}

static void do_remove(jobs *js, job *j)
{
	for (job **p = &js->active; *p; p = &(*p)->next)
		if (*p == j) {
			*p = j->next;
			return;
		}
}

static void job_free(job *j)
{
	if (!j)
		return;
	tir_workload_free(j->w);
	free(j->canonical);
	free(j);
}

/* The cost models a job may name (the first is the default). */
const char *const tird_cost_models[] = { "xgboost", "random", NULL };

/* ---- views: what callers get of a job --------------------------------------------- */

void job_view_clear(job_view *v)
{
	free(v->canonical);
	*v = (job_view){ 0 };
}

/* Fills v from a job in memory (js->mu held). */
static void do_view(const job *j, job_view *v)
{
	*v = (job_view){ 0 };
	store_job *sj = &v->job;
	sj->id = j->id;
	memcpy(sj->workload_key, j->key, sizeof sj->workload_key);
	snprintf(sj->target, sizeof sj->target, "%s", j->target.key);
	sj->trials = j->trials;
	sj->batch = j->batch;
	sj->search = j->search;
	sj->state = j->state;
	sj->trials_done = j->trials_done;
	sj->errors = j->errors;
	sj->best_us = j->best_us;
	sj->created = j->created;
	sj->started = j->started;
	snprintf(v->message, sizeof v->message, "%s", j->message);
	sj->message = v->message;
	v->canonical = tird_strdup(j->canonical);
	v->version = j->version;
	v->cancel_requested = atomic_load(&j->cancel) != 0;
}

/* do_view, and the owner of a job this replica runs. */
static void do_view_of(jobs *js, const job *j, job_view *v)
{
	do_view(j, v);
	if (j->lease)
		snprintf(v->job.owner, sizeof v->job.owner, "%s", js->d->replica);
}

/* The version of a job row not in memory, for long polls: an ended job
 * changes no more; an active one (another replica's) grows with its state,
 * its cancel request and its progress. */
static long row_version(const store_job *sj)
{
	if (sj->state >= STORE_JOB_DONE)
		return 1L << 40;
	return 1 + (((long)sj->trials_done << 3) | ((long)sj->state << 1) | sj->cancel_requested);
}

/* Fills v from a job row of the store (which v takes: sj is cleared). */
static void view_stored(store_job *sj, job_view *v)
{
	*v = (job_view){ 0 };
	v->job = *sj;
	snprintf(v->message, sizeof v->message, "%s", sj->message ? sj->message : "");
	free(sj->message);
	sj->message = NULL;
	v->job.message = v->message;
	v->version = row_version(&v->job);
	v->cancel_requested = sj->cancel_requested && sj->state < STORE_JOB_DONE;
}

/* A job no longer in memory, from the store: 0, or -1 with e (NOT_FOUND,
 * STORE). */
static int stored_view(jobs *js, int64_t id, job_view *v, tird_error *e)
{
	store_job sj;
	store_error err;
	int rc = store_job_get(js->d->db, id, &sj, &err);
	if (rc < 0)
		return tird_store_fail(e, &err, "reading job %lld", (long long)id);
	if (rc == 0)
		return tird_fail(e, TIRD_E_NOT_FOUND, "no job %lld", (long long)id);
	view_stored(&sj, v);
	return 0;
}

/* ---- submission ------------------------------------------------------------------------------ */

int jobs_submit(jobs *js, job_request *rq, job_view *v, job_outcome *how, tird_error *e)
{
	tird *d = js->d;
	tir_workload *w = rq->w;
	rq->w = NULL;              /* ours from here on */
	const tir_target *t = &rq->target;
	const char *key = tir_workload_key(w);
	store_error err;
	if (store_workload_put(d->db, key, tir_workload_op(w), tir_workload_canonical(w),
			       tir_workload_flops(w), &err) ||
	    store_target_put(d->db, t->key, t->kind == TIR_TARGET_CUDA ? "cuda" : "cpu", &err)) {
		tir_workload_free(w);
		return tird_store_fail(e, &err, "storing the workload and target of a job");
	}

	pthread_mutex_lock(&js->mu);
	/* 1. join the same job */
	job *same = do_find_same(js, key, t->key);
	if (same) {
		do_view_of(js, same, v);
		pthread_mutex_unlock(&js->mu);
		*how = JOB_JOINED;
		atomic_fetch_add(&d->metrics.jobs_joined, 1);
		tir_workload_free(w);
		return 0;
	}
	/* 2. the cache */
	store_best b;
	int have = store_best_get(d->db, key, t->key, &b, &err);
	store_job sj = { 0 };
	memcpy(sj.workload_key, key, sizeof sj.workload_key);
	snprintf(sj.target, sizeof sj.target, "%s", t->key);
	sj.trials = rq->trials;
	sj.batch = rq->batch;
	sj.search = rq->search;
	if (have == 1 && b.record_id[0] && b.trials >= rq->trials) {
		sj.state = STORE_JOB_DONE;
		sj.cached = true;
		sj.trials_done = b.trials;
		sj.best_us = b.latency_us;
		sj.created = sj.started = sj.finished = store_now();
		store_best_clear(&b);
		int rc = store_job_insert(d->db, &sj, &err);
		pthread_mutex_unlock(&js->mu);
		tir_workload_free(w);
		if (rc)
			return tird_store_fail(e, &err, "storing a job answered from the cache");
		log_info("job %lld: born done from the cache (%s on %s)", (long long)sj.id,
			 sj.workload_key, t->key);
		atomic_fetch_add(&d->metrics.jobs_cached, 1);
		*how = JOB_CACHED;
		view_stored(&sj, v);
		v->version = 0;
		return 0;
	}
	if (have == 1) {
		sj.trials_done = b.trials;
		sj.best_us = b.latency_us;
		store_best_clear(&b);
	}
	/* 3. a new job, if the queue has room */
	int queued = 0;
	for (job *q = js->active; q; q = q->next)
		queued += q->state == STORE_JOB_QUEUED;
	if (queued >= d->cfg.max_queued_jobs) {
		pthread_mutex_unlock(&js->mu);
		tir_workload_free(w);
		return tird_fail(e, TIRD_E_QUEUE_FULL, "%d jobs are queued, the most this tird "
				 "takes (max_queued_jobs); submit again once some have run", queued);
	}
	sj.state = STORE_JOB_QUEUED;
	bool joined;
	if (store_job_insert_or_join(d->db, &sj, &joined, &err)) {
		pthread_mutex_unlock(&js->mu);
		tir_workload_free(w);
		return tird_store_fail(e, &err, "storing a new job");
	}
	if (joined) {              /* another replica's (or one not yet adopted) */
		pthread_mutex_unlock(&js->mu);
		tir_workload_free(w);
		log_info("job %lld: joined through the database (%s by %s)", (long long)sj.id,
			 store_job_state_name(sj.state), sj.owner[0] ? sj.owner : "nobody yet");
		atomic_fetch_add(&d->metrics.jobs_joined, 1);
		*how = JOB_JOINED;
		view_stored(&sj, v);
		return 0;
	}
	job *j = tird_xcalloc(1, sizeof *j);
	j->id = sj.id;
	j->w = w;
	memcpy(j->key, key, sizeof j->key);
	j->canonical = tird_strdup(tir_workload_canonical(w));
	j->target = *t;
	j->trials = rq->trials;
	j->batch = rq->batch;
	j->search = sj.search;
	j->state = STORE_JOB_QUEUED;
	j->trials_done = sj.trials_done;
	j->best_us = sj.best_us;
	j->created = sj.created;
	do_append(js, j);
	log_info("job %lld: queued (%s %s on %s, %d trials, %s model)", (long long)j->id,
		 tir_workload_op(w), key, t->key, j->trials, j->search.cost_model);
	atomic_fetch_add(&d->metrics.jobs_submitted, 1);
	do_view_of(js, j, v);
	pthread_mutex_unlock(&js->mu);
	*how = JOB_NEW;
	return 0;
}

/* ---- queries ------------------------------------------------------------------------------------ */

int jobs_get(jobs *js, int64_t id, double wait_s, long version, job_view *v, tird_error *e)
{
	tird *d = js->d;
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	if (!(wait_s > 0))         /* negative or NaN ("wait=nan"): no wait */
		wait_s = 0;
	if (wait_s > 60)
		wait_s = 60;
	long ns = until.tv_nsec + (long)((wait_s - (long)wait_s) * 1e9);
	until.tv_sec += (time_t)wait_s + ns / 1000000000L;
	until.tv_nsec = ns % 1000000000L;

	pthread_mutex_lock(&js->mu);
	job *j;
	while ((j = do_find(js, id)) && wait_s > 0 && j->version <= version &&
	       !atomic_load(&js->stopping) && !atomic_load(&d->stopping))
		if (pthread_cond_timedwait(&js->changed, &js->mu, &until) == ETIMEDOUT)
			break;
	if ((j = do_find(js, id))) {
		do_view_of(js, j, v);
		pthread_mutex_unlock(&js->mu);
		return 0;
	}
	pthread_mutex_unlock(&js->mu);
	if (stored_view(js, id, v, e))
		return -1;
	/* a row that says queued or running of a job not in memory: another
	 * replica's (or one a dead tird left, until a replica adopts it).  A
	 * long poll reads the row again every half second until it changes
	 * past version, the job comes into memory, or the wait is over */
	while (v->job.state < STORE_JOB_DONE && wait_s > 0 && v->version <= version) {
		struct timespec step;
		clock_gettime(CLOCK_REALTIME, &step);
		if (step.tv_sec > until.tv_sec ||
		    (step.tv_sec == until.tv_sec && step.tv_nsec >= until.tv_nsec))
			break;
		step.tv_nsec += 500000000L;
		step.tv_sec += step.tv_nsec / 1000000000L;
		step.tv_nsec %= 1000000000L;
		if (step.tv_sec > until.tv_sec ||
		    (step.tv_sec == until.tv_sec && step.tv_nsec > until.tv_nsec))
			step = until;
		pthread_mutex_lock(&js->mu);
		if (!atomic_load(&js->stopping) && !atomic_load(&d->stopping) && !do_find(js, id))
			pthread_cond_timedwait(&js->changed, &js->mu, &step);
		bool stop = atomic_load(&js->stopping) || atomic_load(&d->stopping);
		if ((j = do_find(js, id))) {
			job_view_clear(v);
			do_view_of(js, j, v);
			pthread_mutex_unlock(&js->mu);
			return 0;
		}
		pthread_mutex_unlock(&js->mu);
		if (stop)
			break;
		job_view_clear(v);
		if (stored_view(js, id, v, e))
			return -1;
	}
	return 0;
}

void job_list_clear(job_list *l)
{
	free(l->rows);
	*l = (job_list){ 0 };
}

/* Copies the store's rows (the store's callback must not take js->mu: the
 * lock order is js->mu, then the store's); their messages are left out. */
static void list_one(void *ctx, const store_job *sj)
{
	job_list *l = ctx;
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 64;
		l->rows = tird_xrealloc(l->rows, (size_t)l->cap * sizeof *l->rows);
	}
	l->rows[l->n] = *sj;
	l->rows[l->n++].message = NULL;
}

int jobs_list(jobs *js, int state, int limit, job_list *out, tird_error *e)
{
	*out = (job_list){ 0 };
	store_error err;
	if (store_jobs_list(js->d->db, state, limit, list_one, out, &err) < 0) {
		job_list_clear(out);
		return tird_store_fail(e, &err, "listing jobs");
	}
	/* the progress of active jobs, which the store's rows lag */
	pthread_mutex_lock(&js->mu);
	for (int i = 0; i < out->n; i++) {
		store_job *sj = &out->rows[i];
		job *j = do_find(js, sj->id);
		if (!j)
			continue;
		sj->state = j->state;
		sj->trials_done = j->trials_done;
		if (j->best_us > 0)
			sj->best_us = j->best_us;
	}
	pthread_mutex_unlock(&js->mu);
	return 0;
}

/* Cancels job id of the store, not in memory (another replica's): a queued
 * one at once, a running one through its cancel request, which its owner
 * reads with its next renewal. */
static int cancel_stored(jobs *js, int64_t id, job_view *v, tird_error *e)
{
	store_error err;
	for (int tries = 0; tries < 2; tries++) {
		if (stored_view(js, id, v, e))
			return -1;
		store_job_state st = v->job.state;
		if (st >= STORE_JOB_DONE)
			break;
		int rc = st == STORE_JOB_QUEUED
			 ? store_job_transition(js->d->db, id, st, STORE_JOB_CANCELLED,
						"cancelled by a user", &err)
			 : store_job_request_cancel(js->d->db, id, &err) == 1 ? 0 : 1;
		if (rc < 0) {
			job_view_clear(v);
			return tird_store_fail(e, &err, "cancelling job %lld", (long long)id);
		}
		if (rc > 0) {      /* it moved meanwhile: read it again */
			job_view_clear(v);
			continue;
		}
		log_info("job %lld: %s through the database (run by %s)", (long long)id,
			 st == STORE_JOB_QUEUED ? "cancelled" : "cancel requested",
			 v->job.owner[0] ? v->job.owner : "nobody");
		job_view_clear(v);
		return stored_view(js, id, v, e);
	}
	store_job_state st = v->job.state;
	job_view_clear(v);
	return tird_fail(e, TIRD_E_CONFLICT, "job %lld has ended (%s)", (long long)id,
			 store_job_state_name(st));
}

int jobs_cancel(jobs *js, int64_t id, job_view *v, tird_error *e)
{
	pthread_mutex_lock(&js->mu);
	job *j = do_find(js, id);
	if (j && j->state == STORE_JOB_QUEUED) {
		int rc = do_set_state(js, j, STORE_JOB_CANCELLED, "cancelled by a user");
		if (rc >= 0)       /* 1: another replica has it now */
			do_remove(js, j);
		pthread_mutex_unlock(&js->mu);
		if (rc < 0)
			return tird_fail(e, TIRD_E_STORE, "job %lld could not be cancelled",
					 (long long)id);
		job_free(j);
		return rc == 0 ? stored_view(js, id, v, e) : cancel_stored(js, id, v, e);
	}
	if (j) {                   /* running: it stops after the batch in flight */
		atomic_store(&j->cancel, 1);
		j->version++;
		pthread_cond_broadcast(&js->changed);
		do_view_of(js, j, v);
		pthread_mutex_unlock(&js->mu);
		log_info("job %lld: cancel requested", (long long)id);
		return 0;
	}
	pthread_mutex_unlock(&js->mu);
	return cancel_stored(js, id, v, e);
}

void jobs_counts(jobs *js, int counts[STORE_JOB_NSTATES])
{
	pthread_mutex_lock(&js->mu);
	for (job *j = js->active; j; j = j->next)
		counts[j->state]++;
	pthread_mutex_unlock(&js->mu);
}

void jobs_wake(jobs *js)
{
	pthread_mutex_lock(&js->mu);
	pthread_cond_broadcast(&js->work);
	pthread_mutex_unlock(&js->mu);
}

/* Stores j's progress, then moves it to its end (js->mu held), and gives
 * its claim up.  When the store refuses, j stays in memory with its end to
 * write (end_unstored), tried again by jobs_cron, its claim still renewed,
 * and its message says so: 0 when the end was stored, or when the job is no
 * longer this replica's (the caller removes j), -1 when it waits. */
static int do_finish(jobs *js, job *j, store_job_state end, const char *msg)
{
	store_error err;
	if (store_job_progress(js->d->db, j->id, j->lease ? js->d->replica : NULL,
			       j->trials_done, j->errors, j->best_us, &err))
		log_warn("job %lld: progress not stored: %s", (long long)j->id, err.msg);
	if (do_set_state(js, j, end, msg) >= 0) {
		j->end_unstored = false;
		lease_drop(js->d->leases, j->lease);
		j->lease = NULL;
		return 0;
	}
	if (!j->end_unstored)
		log_error("job %lld: its end (%s) is not stored; tried again every second",
			  (long long)j->id, store_job_state_name(end));
	j->end_unstored = true;
	j->end = end;
	if (msg != j->end_msg)
		snprintf(j->end_msg, sizeof j->end_msg, "%s", msg ? msg : "");
	snprintf(j->message, sizeof j->message, "ended %s (%.300s), but the database "
		 "failed storing it; tried again every second", store_job_state_name(end),
		 j->end_msg);
	j->version++;
	pthread_cond_broadcast(&js->changed);
	return -1;
}

void jobs_cron(jobs *js)
{
	tird *d = js->d;
	double now = store_now();
	bool wake = false;
	pthread_mutex_lock(&js->mu);
	for (job **p = &js->active; *p;) {
		job *j = *p;
		if (j->end_unstored) {
			if (do_finish(js, j, j->end, j->end_msg) == 0 && j->end != STORE_JOB_QUEUED) {
				*p = j->next;
				job_free(j);
				continue;
			}
		} else if (j->state == STORE_JOB_QUEUED) {
			if (workers_serve(d->workers, j->target.key)) {
				if (j->waiting_since) {
					j->waiting_since = 0;
					j->message[0] = '\0';
					j->version++;
				}
				wake = true;
			} else if (!j->waiting_since) {
				j->waiting_since = now;
			}
			if (j->waiting_since && !j->message[0]) {
				snprintf(j->message, sizeof j->message, "waiting in the queue for a "
					 "worker of %s (none is live; it fails after %ld s)",
					 j->target.key, d->cfg.worker_wait_s);
				log_warn("job %lld: %s", (long long)j->id, j->message);
				j->version++;
				pthread_cond_broadcast(&js->changed);
			}
			if (j->waiting_since && now - j->waiting_since > (double)d->cfg.worker_wait_s) {
				char msg[512];
				snprintf(msg, sizeof msg, "no worker for target %.100s came within %ld s "
					 "(start one: tird-worker --server URL --target %.100s)",
					 j->target.key, d->cfg.worker_wait_s, j->target.key);
				if (do_set_state(js, j, STORE_JOB_FAILED, msg) >= 0) {
					*p = j->next;
					job_free(j);
					continue;
				}
			}
			if (j->retry_at && now >= j->retry_at)
				wake = true;
		}
		p = &j->next;
	}
	if (wake)
		pthread_cond_broadcast(&js->work);
	pthread_mutex_unlock(&js->mu);
}

/* Claims j, queued in memory, for this replica (js->mu held): 0 it runs
 * under the claim; 1 it is not claimable (another replica claimed it, or it
 * ended): the caller drops it; -1 the store failed. */
static int do_claim(jobs *js, job *j)
{
	store_job was;
	store_error err;
	int rc = lease_claim(js->d->leases, j->id, &j->cancel, &j->lease, &was, &err);
	if (rc < 0) {
		log_error("job %lld: queued -> running not stored: %s", (long long)j->id, err.msg);
		return -1;
	}
	if (rc == 0) {
		log_info("job %lld: not claimable (another replica runs it, or it ended): "
			 "no longer held here", (long long)j->id);
		return 1;
	}
	double now = store_now();
	if (was.state == STORE_JOB_RUNNING)
		log_warn("job %lld: taken over from replica %s, whose lease passed %.1f s ago",
			 (long long)j->id, was.owner[0] ? was.owner : "(none)",
			 now - was.lease_until);
	log_info("job %lld: queued -> running (replica %s)", (long long)j->id, js->d->replica);
	store_job_clear(&was);
	j->state = STORE_JOB_RUNNING;
	j->started = now;
	j->version++;
	pthread_cond_broadcast(&js->changed);
	return 0;
}

static void *tuning_thread(void *arg)
{
	jobs *js = arg;
	pthread_mutex_lock(&js->mu);
	for (;;) {
		job *j = NULL;
		while (!atomic_load(&js->stopping)) {
			/* the oldest queued job a live worker can measure, and
			 * whose start the store did not just refuse */
			double now = store_now();
			for (j = js->active; j; j = j->next)
				if (j->state == STORE_JOB_QUEUED && j->retry_at <= now &&
				    workers_serve(js->d->workers, j->target.key))
					break;
			if (j)
				break;
			pthread_cond_wait(&js->work, &js->mu);
		}
		if (atomic_load(&js->stopping))
			break;
		int crc = do_claim(js, j);
		if (crc > 0) {
			do_remove(js, j);
			job_free(j);
			continue;
		}
		if (crc < 0) {
			/* the store refused: it stays queued, tried again later */
			int k = j->store_failures < 5 ? j->store_failures : 5;
			j->store_failures++;
			j->retry_at = store_now() + (double)(1 << k);
			snprintf(j->message, sizeof j->message, "the database failed starting it "
				 "(%d times); tried again in %d s", j->store_failures, 1 << k);
			j->version++;
			continue;
		}
		j->store_failures = 0;
		j->retry_at = 0;
		j->waiting_since = 0;
		j->errors = 0;
		pthread_mutex_unlock(&js->mu);
		char msg[512];
		store_job_state end = job_run(js, j, msg, sizeof msg);
		pthread_mutex_lock(&js->mu);
		if (lease_lost(js->d->leases, j->lease)) {
			log_warn("job %lld: stopped here: another replica runs it now, and its "
				 "state here (%s) is not written", (long long)j->id,
				 store_job_state_name(end));
			lease_drop(js->d->leases, j->lease);
			do_remove(js, j);
			job_free(j);
			continue;
		}
		if (do_finish(js, j, end, msg))
			continue;          /* stays in memory until its end is stored */
		if (end == STORE_JOB_QUEUED && !atomic_load(&js->stopping))
			continue;          /* waits for a worker: stays active, queued */
		do_remove(js, j);
		job_free(j);
	}
	pthread_mutex_unlock(&js->mu);
	return NULL;
}

/* ---- start and stop -------------------------------------------------------------------------------- */

typedef struct id_list {
	int64_t *ids;
	int n, cap;
} id_list;

static void collect_id(void *ctx, const store_job *sj)
{
	id_list *l = ctx;
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 16;
		l->ids = tird_xrealloc(l->ids, (size_t)l->cap * sizeof *l->ids);
	}
	l->ids[l->n++] = sj->id;
}

/* A job in memory, queued, made from its row sj (js->mu held): 1 with *out
 * appended to the active jobs; 0 with *out (not appended: the caller fails
 * or frees it) and terr when its workload or target no longer parse; -1
 * with err when the store failed. */
static int do_load(jobs *js, const store_job *sj, job **out, tir_error *terr,
		   store_error *err)
{
	tird *d = js->d;
	job *j = tird_xcalloc(1, sizeof *j);
	j->id = sj->id;
	memcpy(j->key, sj->workload_key, sizeof j->key);
	snprintf(j->message, sizeof j->message, "%s", sj->message ? sj->message : "");
	j->trials = sj->trials;
	j->batch = sj->batch;
	j->search = sj->search;
	if (!j->search.cost_model[0])
		snprintf(j->search.cost_model, sizeof j->search.cost_model, "%s",
			 tird_cost_models[0]);
	j->state = STORE_JOB_QUEUED;
	j->trials_done = sj->trials_done;
	j->best_us = sj->best_us;
	j->created = sj->created;
	*out = j;
	char *canon = NULL;
	int rc = store_workload_get(d->db, j->key, &canon, NULL, NULL, err);
	if (rc < 0) {
		job_free(j);
		*out = NULL;
		return -1;
	}
	if (rc == 1)
		j->w = tir_workload_parse(canon, strlen(canon), NULL, terr);
	else
		snprintf(terr->msg, sizeof terr->msg, "workload %s is not stored", j->key);
	j->canonical = canon;
	if (!j->w || tir_target_parse(sj->target, &j->target, terr)) {
		snprintf(j->target.key, sizeof j->target.key, "%s", sj->target);
		return 0;
	}
	/* the stored records, not the job row, which can lag them (job_run
	 * counts them again when it starts) */
	int stored = store_record_count(d->db, j->key, j->target.key, err);
	if (stored >= 0)
		j->trials_done = stored;
	do_append(js, j);
	return 1;
}

/* Into memory, queued, oldest first (js->mu held): every job the store
 * holds as queued, after putting those it holds as running back to queued —
 * on a shared store only those whose lease passed (the others are live
 * replicas'; theirs, once passed, come with jobs_adopt). */
static int do_resume(jobs *js, char *msg, size_t n)
{
	tird *d = js->d;
	store_error err;
	id_list running = { 0 }, queued = { 0 };
	if (store_jobs_list(d->db, STORE_JOB_RUNNING, 0, collect_id, &running, &err) < 0)
		goto fail;
	double now = store_now();
	for (int i = 0; i < running.n; i++) {
		store_job sj;
		int got = store_job_get(d->db, running.ids[i], &sj, &err);
		if (got < 0)
			goto fail;
		bool live = got == 1 && store_shared(d->db) && sj.lease_until >= now;
		if (got == 1)
			store_job_clear(&sj);
		if (live)
			continue;
		if (store_job_transition(d->db, running.ids[i], STORE_JOB_RUNNING,
					 STORE_JOB_QUEUED, "resumed after a restart", &err) < 0)
			goto fail;
		log_info("job %lld: running -> queued: resumed after a restart",
			 (long long)running.ids[i]);
	}
	if (store_jobs_list(d->db, STORE_JOB_QUEUED, 0, collect_id, &queued, &err) < 0)
		goto fail;
	for (int i = queued.n - 1; i >= 0; i--) {      /* the list is newest first */
		store_job sj;
		int got = store_job_get(d->db, queued.ids[i], &sj, &err);
		if (got < 0)
			goto fail;
		if (got == 0 || sj.state != STORE_JOB_QUEUED) {   /* another replica's now */
			if (got == 1)
				store_job_clear(&sj);
			continue;
		}
		tir_error terr = { "" };
		job *j;
		int rc = do_load(js, &sj, &j, &terr, &err);
		store_job_clear(&sj);
		if (rc < 0)
			goto fail;
		if (rc == 1) {
			log_info("job %lld: resumed (%d/%d trials stored)", (long long)j->id,
				 j->trials_done, j->trials);
			continue;
		}
		do_set_state(js, j, STORE_JOB_FAILED, terr.msg);
		job_free(j);
	}
	free(running.ids);
	free(queued.ids);
	return 0;
fail:
	snprintf(msg, n, "resuming jobs: %s", err.msg);
	free(running.ids);
	free(queued.ids);
	return -1;
}

/* The claimable rows jobs_adopt reads, copied (their messages left out). */
typedef struct row_list {
	store_job *rows;
	int n, cap;
} row_list;

static void collect_row(void *ctx, const store_job *sj)
{
	row_list *l = ctx;
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 16;
		l->rows = tird_xrealloc(l->rows, (size_t)l->cap * sizeof *l->rows);
	}
	l->rows[l->n] = *sj;
	l->rows[l->n++].message = NULL;
}

void jobs_adopt(jobs *js)
{
	tird *d = js->d;
	store_error err;
	row_list l = { 0 };
	double now = store_now();
	if (store_jobs_claimable(d->db, now, collect_row, &l, &err) < 0) {
		log_warn("jobs: the claimable jobs could not be read: %s", err.msg);
		return;
	}
	bool wake = false;
	pthread_mutex_lock(&js->mu);
	for (int i = 0; i < l.n && !atomic_load(&js->stopping); i++) {
		const store_job *sj = &l.rows[i];
		if (do_find(js, sj->id) || !workers_serve(d->workers, sj->target))
			continue;
		tir_error terr = { "" };
		job *j;
		int rc = do_load(js, sj, &j, &terr, &err);
		if (rc < 0) {
			log_warn("job %lld: not adopted: %s", (long long)sj->id, err.msg);
			continue;
		}
		if (rc == 0) {
			log_warn("job %lld: not adopted: %s", (long long)sj->id, terr.msg);
			job_free(j);
			continue;
		}
		if (sj->state == STORE_JOB_RUNNING)
			log_warn("job %lld: adopted: its owner %s let its lease pass %.1f s ago "
				 "(%d/%d trials stored)", (long long)j->id,
				 sj->owner[0] ? sj->owner : "(none)", now - sj->lease_until,
				 j->trials_done, j->trials);
		else
			log_info("job %lld: adopted from the queue (%d/%d trials stored)",
				 (long long)j->id, j->trials_done, j->trials);
		wake = true;
	}
	/* queued jobs held here that the store no longer has claimable: another
	 * replica claimed, cancelled or failed them (a job queued in the last
	 * seconds, or back in the queue since, may not be in the rows read: it
	 * stays) */
	for (job **p = &js->active; *p;) {
		job *j = *p;
		bool listed = false;
		for (int i = 0; i < l.n && !listed; i++)
			listed = l.rows[i].id == j->id;
		if (j->state == STORE_JOB_QUEUED && !j->end_unstored && !listed &&
		    j->queued_since < now - 5) {
			log_info("job %lld: no longer queued in the database (another replica "
				 "has it): no longer held here", (long long)j->id);
			*p = j->next;
			job_free(j);
			j = NULL;
			pthread_cond_broadcast(&js->changed);
			continue;
		}
		p = &j->next;
	}
	if (wake)
		pthread_cond_broadcast(&js->work);
	pthread_mutex_unlock(&js->mu);
	free(l.rows);
}

jobs *jobs_start(tird *d, char *msg, size_t n)
{
	jobs *js = tird_xcalloc(1, sizeof *js);
	js->d = d;
	atomic_init(&js->stopping, false);
	pthread_mutex_init(&js->mu, NULL);
	pthread_cond_init(&js->work, NULL);
	pthread_cond_init(&js->changed, NULL);
	pthread_mutex_lock(&js->mu);
	int rc = do_resume(js, msg, n);
	pthread_mutex_unlock(&js->mu);
	if (rc) {
		jobs_stop(js);
		jobs_free(js);
		return NULL;
	}
	js->nthreads = (int)d->cfg.tuning_threads;
	js->threads = tird_xcalloc((size_t)js->nthreads, sizeof *js->threads);
	for (int i = 0; i < js->nthreads; i++)
		if (pthread_create(&js->threads[i], NULL, tuning_thread, js)) {
			snprintf(msg, n, "cannot start tuning threads");
			js->nthreads = i;
			jobs_stop(js);
			jobs_free(js);
			return NULL;
		}
	return js;
}

void jobs_stop(jobs *js)
{
	if (!js)
		return;
	pthread_mutex_lock(&js->mu);
	atomic_store(&js->stopping, true);
	for (job *j = js->active; j; j = j->next)
		atomic_store(&j->cancel, 1);   /* tir_tune stops after the round; job_run sees stopping */
	pthread_cond_broadcast(&js->work);
	pthread_cond_broadcast(&js->changed);
	pthread_mutex_unlock(&js->mu);
	for (int i = 0; i < js->nthreads; i++)
		pthread_join(js->threads[i], NULL);
	free(js->threads);
	js->threads = NULL;
	js->nthreads = 0;
}

void jobs_free(jobs *js)
{
	if (!js)
		return;
	while (js->active) {       /* queued jobs stay queued in the store */
		job *j = js->active;
		js->active = j->next;
		job_free(j);
	}
	pthread_cond_destroy(&js->work);
	pthread_cond_destroy(&js->changed);
	pthread_mutex_destroy(&js->mu);
	free(js);
}
