/*
 * jobs.c — tuning jobs: the state machine, the team-cache rules of
 * submission, and the tuning threads that call tir_tune.
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
 * Submission (jobs_submit), in this order:
 *   1. a job of the same (workload key, full target) queued or running:
 *      join it (200, "joined": true);
 *   2. a best record whose (workload, target) has at least `trials` stored
 *      records: a job born done (200, "cached": true) — no measurement;
 *   3. else a new queued job (201).
 * A running job measures trials − (records already stored) more candidates,
 * with the stored records passed to tir_tune as prior: asking for more trials
 * continues the search, and a job resumed after a crash loses only the batch
 * that was in flight.
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
#include "tird.h"

typedef struct job {
	int64_t id;
	tir_workload *w;
	char key[65];
	char *canonical;
	tir_target target;
	int trials, batch;
	char cost_model[16];       /* "xgboost" or "random" */
	bool has_seed;             /* false: the seed is derived at every run */
	int64_t seed;
	store_job_state state;
	int trials_done, errors;   /* in all for (workload, target), this run's errors */
	double best_us;
	volatile int cancel;       /* set by a user or at shutdown; tir_tune reads it */
	long version;              /* bumped on every change, for long polls */
	char message[512];
	double created, started;
	struct job *next;
} job;

struct jobs {
	tird *d;
	pthread_mutex_t mu;
	pthread_cond_t work;       /* a job was queued, or stopping */
	pthread_cond_t changed;    /* some job changed */
	job *active;               /* queued and running jobs, oldest first */
	bool stopping;
	int nthreads;
	pthread_t *threads;
};

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

/* Moves j to `to` (js->mu held): checks, persists, logs, then changes the job
 * in memory and wakes the waiters.  Returns 0, or -1 when the transition is
 * not allowed or the store refused it (the job is then unchanged). */
static int do_set_state(jobs *js, job *j, store_job_state to, const char *msg)
{
	store_job_state from = j->state;
	if (!allowed(from, to)) {
		log_error("job %lld: refused transition %s -> %s", (long long)j->id,
			  store_job_state_name(from), store_job_state_name(to));
		return -1;
	}
	store_error err;
	int rc = store_job_transition(js->d->db, j->id, from, to, msg, &err);
	if (rc != 0) {
		log_error("job %lld: %s -> %s not stored: %s", (long long)j->id,
			  store_job_state_name(from), store_job_state_name(to),
			  rc > 0 ? "the stored state differs" : err.msg);
		return -1;
	}
	log_info("job %lld: %s -> %s%s%s", (long long)j->id, store_job_state_name(from),
		 store_job_state_name(to), msg ? ": " : "", msg ? msg : "");
	j->state = to;
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
		if (!strcmp(j->key, key) && !strcmp(j->target.key, target))
			return j;
	return NULL;
}

static void do_append(jobs *js, job *j)
{
	job **p = &js->active;
	while (*p)
		p = &(*p)->next;
	j->next = NULL;
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

/* ---- JSON ------------------------------------------------------------------------------ */

cJSON *best_json(const store_best *b, bool with_trace)
{
	if (!b->record_id[0])
		return NULL;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "workload_key", b->workload_key);
	cJSON *w = b->canonical ? cJSON_Parse(b->canonical) : NULL;
	cJSON_AddItemToObject(o, "workload", w ? w : cJSON_CreateNull());
	cJSON_AddStringToObject(o, "op", b->op ? b->op : "");
	cJSON_AddStringToObject(o, "target", b->target);
	cJSON_AddNumberToObject(o, "latency_us", b->latency_us);
	cJSON_AddNumberToObject(o, "gflops",
				b->latency_us > 0 ? b->flops / (b->latency_us * 1e3) : 0);
	cJSON_AddNumberToObject(o, "trials", b->trials);
	cJSON_AddStringToObject(o, "record_id", b->record_id);
	if (with_trace) {
		cJSON *t = b->trace ? cJSON_Parse(b->trace) : NULL;
		cJSON_AddItemToObject(o, "trace", t ? t : cJSON_CreateNull());
	}
	return o;
}

static void add_time(cJSON *o, const char *name, double t)
{
	if (t > 0)
		cJSON_AddNumberToObject(o, name, t);
	else
		cJSON_AddNullToObject(o, name);
}

/* The job document every route answers; canonical may be NULL (looked up). */
static cJSON *job_json(tird *d, const store_job *sj, const char *canonical, long version)
{
	cJSON *o = cJSON_CreateObject();
	char *canon = NULL;
	double flops = 0;
	store_error err;
	if (store_workload_get(d->db, sj->workload_key, &canon, NULL, &flops, &err) < 0)
		log_warn("job %lld: %s", (long long)sj->id, err.msg);
	cJSON_AddNumberToObject(o, "job_id", (double)sj->id);
	cJSON_AddStringToObject(o, "state", store_job_state_name(sj->state));
	cJSON_AddStringToObject(o, "workload_key", sj->workload_key);
	cJSON *w = cJSON_Parse(canonical ? canonical : canon ? canon : "null");
	cJSON_AddItemToObject(o, "workload", w ? w : cJSON_CreateNull());
	cJSON_AddStringToObject(o, "target", sj->target);
	cJSON_AddNumberToObject(o, "trials", sj->trials);
	cJSON_AddNumberToObject(o, "batch", sj->batch);
	cJSON *so = cJSON_AddObjectToObject(o, "search");
	cJSON_AddStringToObject(so, "cost_model", sj->cost_model[0] ? sj->cost_model : "xgboost");
	if (sj->has_seed)
		cJSON_AddNumberToObject(so, "seed", (double)sj->seed);
	else
		cJSON_AddNullToObject(so, "seed");
	cJSON_AddNumberToObject(o, "trials_done", sj->trials_done);
	cJSON_AddNumberToObject(o, "errors", sj->errors);
	if (sj->best_us > 0) {
		cJSON_AddNumberToObject(o, "best_us", sj->best_us);
		cJSON_AddNumberToObject(o, "best_gflops", flops / (sj->best_us * 1e3));
	} else {
		cJSON_AddNullToObject(o, "best_us");
		cJSON_AddNullToObject(o, "best_gflops");
	}
	cJSON_AddBoolToObject(o, "cached", sj->cached);
	if (sj->message && sj->message[0])
		cJSON_AddStringToObject(o, "message", sj->message);
	add_time(o, "created", sj->created);
	add_time(o, "started", sj->started);
	add_time(o, "finished", sj->finished);
	cJSON_AddNumberToObject(o, "version", (double)version);
	store_best b;
	if (store_best_get(d->db, sj->workload_key, sj->target, &b, &err) == 1) {
		cJSON *r = best_json(&b, false);
		if (r)
			cJSON_AddItemToObject(o, "result", r);
		store_best_clear(&b);
	}
	free(canon);
	return o;
}

/* A job in memory as a store row (js->mu held); message points into j. */
static store_job view_of(const job *j)
{
	store_job sj = { 0 };
	sj.id = j->id;
	memcpy(sj.workload_key, j->key, sizeof sj.workload_key);
	snprintf(sj.target, sizeof sj.target, "%s", j->target.key);
	sj.trials = j->trials;
	sj.batch = j->batch;
	memcpy(sj.cost_model, j->cost_model, sizeof sj.cost_model);
	sj.has_seed = j->has_seed;
	sj.seed = j->seed;
	sj.state = j->state;
	sj.trials_done = j->trials_done;
	sj.errors = j->errors;
	sj.best_us = j->best_us;
	sj.message = (char *)j->message;
	sj.created = j->created;
	sj.started = j->started;
	return sj;
}

/* ---- targets ------------------------------------------------------------------------------ */

int tird_resolve_target(tird *d, const char *s, tir_target *t, tir_error *err)
{
	if (!strcmp(s, "cpu")) {
		*t = d->cpu;
		return 0;
	}
	if (!strcmp(s, "cuda")) {
		char key[128];
		if (workers_find_kind(d->workers, "cuda", key, sizeof key))
			return tir_target_parse(key, t, err);
	}
	return tir_target_parse(s, t, err);
}

/* ---- submission ------------------------------------------------------------------------------ */

static bool json_int(const cJSON *body, const char *name, long lo, long hi, long def,
		     long *v, http_resp *out)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(body, name);
	if (!x) {
		*v = def;
		return true;
	}
	if (!cJSON_IsNumber(x) || x->valuedouble != (double)(long)x->valuedouble ||
	    x->valuedouble < (double)lo || x->valuedouble > (double)hi) {
		http_error(out, 400, "bad_request", "%s: expected an integer in [%ld, %ld]",
			   name, lo, hi);
		return false;
	}
	*v = (long)x->valuedouble;
	return true;
}

/* The cost models a job may name in "search" (the first is the default). */
static const char *const cost_models[] = { "xgboost", "random" };
#define SEED_MAX 9007199254740991.0        /* 2^53 - 1: exact as a JSON number */

/* "search": {"cost_model": "xgboost" | "random", "seed": N}, both optional,
 * into sj's cost_model, has_seed and seed.  false after answering 400. */
static bool parse_search(const cJSON *body, store_job *sj, http_resp *out)
{
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(body, "search");
	snprintf(sj->cost_model, sizeof sj->cost_model, "%s", cost_models[0]);
	sj->has_seed = false;
	sj->seed = 0;
	if (!s)
		return true;
	if (!cJSON_IsObject(s)) {
		http_error(out, 400, "bad_request", "search: expected an object {\"cost_model\": "
			   "\"xgboost\" | \"random\", \"seed\": N}");
		return false;
	}
	for (const cJSON *k = s->child; k; k = k->next) {
		if (!strcmp(k->string, "cost_model")) {
			bool ok = false;
			for (size_t i = 0; cJSON_IsString(k) && i < sizeof cost_models /
			     sizeof cost_models[0]; i++)
				if (!strcmp(k->valuestring, cost_models[i])) {
					snprintf(sj->cost_model, sizeof sj->cost_model, "%s",
						 cost_models[i]);
					ok = true;
				}
			if (!ok) {
				http_error(out, 400, "bad_request", "search.cost_model: expected "
					   "\"xgboost\" or \"random\"%s%.40s%s",
					   cJSON_IsString(k) ? " (got \"" : "",
					   cJSON_IsString(k) ? k->valuestring : "",
					   cJSON_IsString(k) ? "\")" : "");
				return false;
			}
		} else if (!strcmp(k->string, "seed")) {
			if (!cJSON_IsNumber(k) || !(k->valuedouble >= 0) || k->valuedouble > SEED_MAX ||
			    (double)(int64_t)k->valuedouble != k->valuedouble) {
				http_error(out, 400, "bad_request", "search.seed: expected an integer "
					   "in [0, 2^53-1]");
				return false;
			}
			sj->seed = (int64_t)k->valuedouble;
			sj->has_seed = true;
		} else {
			http_error(out, 400, "bad_request", "search: unknown key \"%s\" (expected "
				   "cost_model, seed)", k->string);
			return false;
		}
	}
	return true;
}

void jobs_submit(jobs *js, const cJSON *body, http_resp *out)
{
	tird *d = js->d;
	static const char *const known[] = { "workload", "target", "trials", "batch", "search" };
	for (const cJSON *k = body->child; k; k = k->next) {
		bool ok = false;
		for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
			ok |= !strcmp(k->string, known[i]);
		if (!ok) {
			http_error(out, 400, "bad_request", "unknown key \"%s\" (expected workload, "
				   "target, trials, batch, search)", k->string);
			return;
		}
	}
	const cJSON *wj = cJSON_GetObjectItemCaseSensitive(body, "workload");
	const cJSON *tj = cJSON_GetObjectItemCaseSensitive(body, "target");
	if (!cJSON_IsObject(wj)) {
		http_error(out, 400, "bad_request", "\"workload\" must be a workload object");
		return;
	}
	if (!cJSON_IsString(tj) || !tj->valuestring[0]) {
		http_error(out, 400, "bad_request", "\"target\" must be a string such as \"cpu\", "
			   "\"cuda\" or \"cuda:sm_90\"");
		return;
	}
	long trials, batch;
	if (!json_int(body, "trials", 1, d->cfg.max_trials, d->cfg.default_trials, &trials, out) ||
	    !json_int(body, "batch", 1, 4096, d->cfg.default_batch, &batch, out))
		return;
	store_job search;          /* only its search options */
	if (!parse_search(body, &search, out))
		return;

	tir_error terr = { "" };
	char *wtext = cJSON_PrintUnformatted(wj);
	tir_workload *w = tir_workload_parse(wtext, strlen(wtext), &d->cfg.limits, &terr);
	free(wtext);
	if (!w) {
		http_error(out, 400, "invalid_workload", "%s", terr.msg);
		return;
	}
	tir_target t;
	if (tird_resolve_target(d, tj->valuestring, &t, &terr)) {
		tir_workload_free(w);
		http_error(out, 400, "invalid_target", "%s", terr.msg);
		return;
	}
	const char *key = tir_workload_key(w);
	store_error err;
	if (store_workload_put(d->db, key, tir_workload_op(w), tir_workload_canonical(w),
			       tir_workload_flops(w), &err) ||
	    store_target_put(d->db, t.key, t.kind == TIR_TARGET_CUDA ? "cuda" : "cpu", &err)) {
		tir_workload_free(w);
		http_error(out, 500, "store", "%s", err.msg);
		return;
	}

	pthread_mutex_lock(&js->mu);
	/* 1. join the same job */
	job *same = do_find_same(js, key, t.key);
	if (same) {
		store_job sj = view_of(same);
		cJSON *o = job_json(d, &sj, same->canonical, same->version);
		pthread_mutex_unlock(&js->mu);
		cJSON_AddBoolToObject(o, "joined", true);
		atomic_fetch_add(&d->metrics.jobs_joined, 1);
		tir_workload_free(w);
		http_json(out, 200, o);
		return;
	}
	/* 2. the cache */
	store_best b;
	int have = store_best_get(d->db, key, t.key, &b, &err);
	store_job sj = { 0 };
	memcpy(sj.workload_key, key, sizeof sj.workload_key);
	snprintf(sj.target, sizeof sj.target, "%s", t.key);
	sj.trials = (int)trials;
	sj.batch = (int)batch;
	memcpy(sj.cost_model, search.cost_model, sizeof sj.cost_model);
	sj.has_seed = search.has_seed;
	sj.seed = search.seed;
	if (have == 1 && b.record_id[0] && b.trials >= trials) {
		sj.state = STORE_JOB_DONE;
		sj.cached = true;
		sj.trials_done = b.trials;
		sj.best_us = b.latency_us;
		sj.created = sj.started = sj.finished = store_now();
		store_best_clear(&b);
		int rc = store_job_insert(d->db, &sj, &err);
		pthread_mutex_unlock(&js->mu);
		tir_workload_free(w);
		if (rc) {
			http_error(out, 500, "store", "%s", err.msg);
			return;
		}
		log_info("job %lld: born done from the cache (%s on %s)", (long long)sj.id,
			 sj.workload_key, t.key);
		atomic_fetch_add(&d->metrics.jobs_cached, 1);
		http_json(out, 200, job_json(d, &sj, NULL, 0));
		return;
	}
	if (have == 1) {
		sj.trials_done = b.trials;
		sj.best_us = b.latency_us;
		store_best_clear(&b);
	}
	/* 3. a new job */
	sj.state = STORE_JOB_QUEUED;
	if (store_job_insert(d->db, &sj, &err)) {
		pthread_mutex_unlock(&js->mu);
		tir_workload_free(w);
		http_error(out, 500, "store", "%s", err.msg);
		return;
	}
	job *j = calloc(1, sizeof *j);
	if (!j)
		abort();
	j->id = sj.id;
	j->w = w;
	memcpy(j->key, key, sizeof j->key);
	j->canonical = strdup(tir_workload_canonical(w));
	j->target = t;
	j->trials = (int)trials;
	j->batch = (int)batch;
	memcpy(j->cost_model, sj.cost_model, sizeof j->cost_model);
	j->has_seed = sj.has_seed;
	j->seed = sj.seed;
	j->state = STORE_JOB_QUEUED;
	j->trials_done = sj.trials_done;
	j->best_us = sj.best_us;
	j->created = sj.created;
	do_append(js, j);
	log_info("job %lld: queued (%s %s on %s, %ld trials, %s model)", (long long)j->id,
		 tir_workload_op(w), key, t.key, trials, j->cost_model);
	atomic_fetch_add(&d->metrics.jobs_submitted, 1);
	store_job v = view_of(j);
	cJSON *o = job_json(d, &v, j->canonical, j->version);
	pthread_mutex_unlock(&js->mu);
	http_json(out, 201, o);
}

/* ---- queries ------------------------------------------------------------------------------------ */

void jobs_get(jobs *js, int64_t id, double wait_s, long version, http_resp *out)
{
	tird *d = js->d;
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	if (wait_s > 60)
		wait_s = 60;
	long ns = until.tv_nsec + (long)((wait_s - (long)wait_s) * 1e9);
	until.tv_sec += (time_t)wait_s + ns / 1000000000L;
	until.tv_nsec = ns % 1000000000L;

	pthread_mutex_lock(&js->mu);
	job *j;
	while ((j = do_find(js, id)) && wait_s > 0 && j->version <= version &&
	       !js->stopping && !atomic_load(&d->stopping))
		if (pthread_cond_timedwait(&js->changed, &js->mu, &until) == ETIMEDOUT)
			break;
	if ((j = do_find(js, id))) {
		store_job sj = view_of(j);
		cJSON *o = job_json(d, &sj, j->canonical, j->version);
		pthread_mutex_unlock(&js->mu);
		http_json(out, 200, o);
		return;
	}
	pthread_mutex_unlock(&js->mu);
	store_job sj;
	store_error err;
	int rc = store_job_get(d->db, id, &sj, &err);
	if (rc < 0)
		http_error(out, 500, "store", "%s", err.msg);
	else if (rc == 0)
		http_error(out, 404, "not_found", "no job %lld", (long long)id);
	else
		http_json(out, 200, job_json(d, &sj, NULL, 1L << 40));
	if (rc == 1)
		store_job_clear(&sj);
}

/* Builds the light rows of GET /v1/jobs from the store, then overlays the
 * progress of active jobs (the store's callback must not take js->mu: the
 * lock order is js->mu, then the store's). */
static void list_one(void *ctx, const store_job *sj)
{
	cJSON *arr = ctx, *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "job_id", (double)sj->id);
	cJSON_AddStringToObject(o, "state", store_job_state_name(sj->state));
	cJSON_AddStringToObject(o, "workload_key", sj->workload_key);
	cJSON_AddStringToObject(o, "target", sj->target);
	cJSON_AddNumberToObject(o, "trials", sj->trials);
	cJSON_AddNumberToObject(o, "trials_done", sj->trials_done);
	if (sj->best_us > 0)
		cJSON_AddNumberToObject(o, "best_us", sj->best_us);
	else
		cJSON_AddNullToObject(o, "best_us");
	cJSON_AddBoolToObject(o, "cached", sj->cached);
	add_time(o, "created", sj->created);
	cJSON_AddItemToArray(arr, o);
}

void jobs_list(jobs *js, int state, int limit, http_resp *out)
{
	cJSON *arr = cJSON_CreateArray();
	store_error err;
	if (store_jobs_list(js->d->db, state, limit, list_one, arr, &err) < 0) {
		cJSON_Delete(arr);
		http_error(out, 500, "store", "%s", err.msg);
		return;
	}
	pthread_mutex_lock(&js->mu);
	for (cJSON *o = arr->child; o; o = o->next) {
		job *j = do_find(js, (int64_t)cJSON_GetObjectItem(o, "job_id")->valuedouble);
		if (!j)
			continue;
		cJSON_ReplaceItemInObject(o, "state",
					  cJSON_CreateString(store_job_state_name(j->state)));
		cJSON_ReplaceItemInObject(o, "trials_done", cJSON_CreateNumber(j->trials_done));
		if (j->best_us > 0)
			cJSON_ReplaceItemInObject(o, "best_us", cJSON_CreateNumber(j->best_us));
	}
	pthread_mutex_unlock(&js->mu);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "jobs", arr);
	http_json(out, 200, o);
}

void jobs_cancel(jobs *js, int64_t id, http_resp *out)
{
	tird *d = js->d;
	pthread_mutex_lock(&js->mu);
	job *j = do_find(js, id);
	if (j && j->state == STORE_JOB_QUEUED) {
		int rc = do_set_state(js, j, STORE_JOB_CANCELLED, "cancelled by a user");
		if (rc == 0)
			do_remove(js, j);
		pthread_mutex_unlock(&js->mu);
		if (rc == 0)
			job_free(j);
		else {
			http_error(out, 500, "store", "job %lld could not be cancelled",
				   (long long)id);
			return;
		}
		jobs_get(js, id, 0, 0, out);
		return;
	}
	if (j) {                   /* running: it stops after the batch in flight */
		j->cancel = 1;
		j->version++;
		pthread_cond_broadcast(&js->changed);
		store_job sj = view_of(j);
		cJSON *o = job_json(d, &sj, j->canonical, j->version);
		pthread_mutex_unlock(&js->mu);
		cJSON_AddBoolToObject(o, "cancel_requested", true);
		log_info("job %lld: cancel requested", (long long)id);
		http_json(out, 202, o);
		return;
	}
	pthread_mutex_unlock(&js->mu);
	store_job sj;
	store_error err;
	int rc = store_job_get(d->db, id, &sj, &err);
	if (rc < 0)
		http_error(out, 500, "store", "%s", err.msg);
	else if (rc == 0)
		http_error(out, 404, "not_found", "no job %lld", (long long)id);
	else
		http_error(out, 409, "conflict", "job %lld has ended (%s)", (long long)id,
			   store_job_state_name(sj.state));
	if (rc == 1)
		store_job_clear(&sj);
}

void jobs_counts(jobs *js, int counts[STORE_JOB_NSTATES])
{
	pthread_mutex_lock(&js->mu);
	for (job *j = js->active; j; j = j->next)
		counts[j->state]++;
	pthread_mutex_unlock(&js->mu);
}

/* ---- running a job --------------------------------------------------------------------------------- */

typedef struct run_ctx {
	jobs *js;
	job *j;
	measure_ctx mc;
	double flops;
} run_ctx;

/* tir_tune's on_result: every measured candidate is stored at once. */
static void on_result(void *ctx, const tir_candidate *c)
{
	run_ctx *rc = ctx;
	job *j = rc->j;
	tird *d = rc->js->d;
	bool ok = c->status == TIR_MEASURE_OK && c->latency_us > 0;
	store_record r = { .workload_key = j->key, .target = j->target.key,
			   .trace = c->trace ? c->trace : "{}",
			   .status = tir_measure_status_name((tir_measure_status)c->status),
			   .latency_us = ok ? c->latency_us : 0,
			   .max_rel_error = c->max_rel_error, .message = c->msg,
			   .worker = rc->mc.worker[0] ? rc->mc.worker : NULL, .job_id = j->id };
	bool changed = false;
	store_error err;
	int ins = store_record_add(d->db, &r, &changed, &err);
	if (ins < 0)
		log_error("job %lld: record not stored: %s", (long long)j->id, err.msg);
	if (changed)
		atomic_fetch_add(&d->best_gen, 1);
	atomic_fetch_add(&d->metrics.trials, 1);
	if (!ok && (unsigned)c->status < 8)
		atomic_fetch_add(&d->metrics.measure_errors[c->status], 1);
	pthread_mutex_lock(&rc->js->mu);
	if (ins == 1)
		j->trials_done++;
	if (!ok)
		j->errors++;
	if (ok && (j->best_us <= 0 || c->latency_us < j->best_us))
		j->best_us = c->latency_us;
	j->version++;
	pthread_cond_broadcast(&rc->js->changed);
	pthread_mutex_unlock(&rc->js->mu);
}

/* tir_tune's on_progress: the job's progress is persisted once a round. */
static void on_progress(void *ctx, const tir_tune_progress *p)
{
	run_ctx *rc = ctx;
	job *j = rc->j;
	(void)p;
	pthread_mutex_lock(&rc->js->mu);
	int done = j->trials_done, errors = j->errors;
	double best = j->best_us;
	pthread_mutex_unlock(&rc->js->mu);
	store_error err;
	if (store_job_progress(rc->js->d->db, j->id, done, errors, best, &err))
		log_warn("job %lld: progress not stored: %s", (long long)j->id, err.msg);
	if (p->round > 0)           /* 0: the final store after tir_tune */
		log_info("job %lld: round %d, %d/%d trials, best %.3f us: search %.2f s, "
			 "measuring %.2f s, recording and model update %.2f s",
			 (long long)j->id, p->round, done, j->trials, best, p->search_s,
			 p->measure_s, p->update_s);
}

typedef struct prior_set {
	tir_candidate *c;
	int n, cap;
} prior_set;

static int status_of(const char *name)
{
	for (int s = 0; s < TIR_MEASURE_NSTATUSES; s++)
		if (name && !strcmp(name, tir_measure_status_name((tir_measure_status)s)))
			return s;
	return TIR_MEASURE_RUN_ERROR;
}

static void add_prior(void *ctx, const store_record *r)
{
	prior_set *p = ctx;
	if (p->n == p->cap) {
		p->cap = p->cap ? p->cap * 2 : 64;
		p->c = realloc(p->c, (size_t)p->cap * sizeof *p->c);
		if (!p->c)
			abort();
	}
	tir_candidate *c = &p->c[p->n++];
	c->trace = strdup(r->trace);
	c->status = status_of(r->status);
	c->latency_us = r->latency_us;
	c->max_rel_error = r->max_rel_error;
	c->msg = r->message ? strdup(r->message) : NULL;
}

static void prior_free(prior_set *p)
{
	for (int i = 0; i < p->n; i++) {
		free((char *)p->c[i].trace);
		free((char *)p->c[i].msg);
	}
	free(p->c);
}

/* Runs j (running, not under js->mu) and returns the state it ends in, with
 * the message in msg. */
/* Threads for a search of this target kind and for its model's features:
 * every core, except for a CPU target, whose candidates other jobs may be
 * timing on this machine's cores meanwhile. */
static int search_threads(tir_target_kind kind)
{
	return kind == TIR_TARGET_CUDA ? 0 : 1;
}

static store_job_state run_job(jobs *js, job *j, char *msg, size_t n)
{
	tird *d = js->d;
	store_error err;
	prior_set prior = { 0 };
	if (store_records_each(d->db, j->key, j->target.key, add_prior, &prior, &err) < 0) {
		snprintf(msg, n, "cannot read stored records: %s", err.msg);
		prior_free(&prior);
		return STORE_JOB_FAILED;
	}
	/* the stored records are the truth: a tird killed between a round's
	 * records and its progress (stored after the model's update) left the
	 * job's count behind them */
	pthread_mutex_lock(&js->mu);
	if (j->trials_done != prior.n) {
		j->trials_done = prior.n;
		j->version++;
	}
	pthread_mutex_unlock(&js->mu);
	store_best b;
	bool have_best = store_best_get(d->db, j->key, j->target.key, &b, &err) == 1 &&
			 b.record_id[0];
	if (have_best)
		store_best_clear(&b);
	int want = j->trials - prior.n;
	if (want <= 0 && have_best) {
		snprintf(msg, n, "%d trials were stored already", prior.n);
		prior_free(&prior);
		return STORE_JOB_DONE;
	}
	if (want <= 0)             /* every stored candidate failed: try afresh */
		want = j->trials;

	run_ctx rc = { js, j, { .d = d, .job_id = j->id, .canonical = j->canonical,
				.workload_key = j->key, .cancel = &j->cancel },
		       tir_workload_flops(j->w) };
	tir_tune_opts o = { 0 };
	o.trials = want;
	o.batch = j->batch;
	/* a given seed makes the run deterministic given the same measurements;
	 * else one is derived from the job and what was stored before */
	o.seed = j->has_seed ? (uint64_t)j->seed
			     : (uint64_t)j->id * 0x9e3779b97f4a7c15ULL + (uint64_t)prior.n;
	o.nprior = prior.n;
	o.prior = prior.c;
	o.measure = workers_measure;
	o.measure_ctx = &rc.mc;
	o.threads = search_threads(j->target.kind);
	/* "xgboost": the model shared by every job of the target kind, so each
	 * workload teaches the next (tir_tune draws random scores while it is
	 * untrained); "random": tir_tune's own random model (o.model NULL),
	 * seeded by o.seed, which neither reads nor teaches the shared model */
	bool xgb = strcmp(j->cost_model, "random") != 0;
	if (xgb) {
		o.model = &cm_xgboost;
		o.model_self = d->models[j->target.kind == TIR_TARGET_CUDA];
	}
	o.on_result = on_result;
	o.on_progress = on_progress;
	o.cb_ctx = &rc;
	o.cancel = &j->cancel;
	tir_tune_result res = { 0 };
	tir_error terr = { "" };
	log_info("job %lld: tuning %d more trials (%d stored) in batches of %d, %s model, "
		 "seed %llu%s", (long long)j->id, want, prior.n, j->batch,
		 xgb ? "xgboost" : "random", (unsigned long long)o.seed,
		 j->has_seed ? "" : " (derived)");
	int trc = tir_tune(j->w, &j->target, &o, &res, &terr);
	tir_tune_result_clear(&res);
	prior_free(&prior);
	on_progress(&rc, &(tir_tune_progress){ 0 });
	if (xgb)
		jobs_model_save(d, j->target.kind);

	if (js->stopping || atomic_load(&d->stopping)) {
		snprintf(msg, n, "interrupted: tird stopped; the job resumes at the next start");
		return STORE_JOB_QUEUED;
	}
	if (j->cancel) {
		snprintf(msg, n, "cancelled by a user");
		return STORE_JOB_CANCELLED;
	}
	if (trc < 0) {
		snprintf(msg, n, "%s", rc.mc.why[0] ? rc.mc.why
				       : terr.msg[0] ? terr.msg : "the search failed");
		return STORE_JOB_FAILED;
	}
	if (store_best_get(d->db, j->key, j->target.key, &b, &err) == 1 && b.record_id[0]) {
		snprintf(msg, n, "best %.3f us after %d trials", b.latency_us, b.trials);
		store_best_clear(&b);
		return STORE_JOB_DONE;
	}
	snprintf(msg, n, "no candidate ran correctly (%d errors; see the records)", j->errors);
	return STORE_JOB_FAILED;
}

static void *tuning_thread(void *arg)
{
	jobs *js = arg;
	pthread_mutex_lock(&js->mu);
	for (;;) {
		job *j = NULL;
		while (!js->stopping) {
			for (j = js->active; j && j->state != STORE_JOB_QUEUED; j = j->next)
				;
			if (j)
				break;
			pthread_cond_wait(&js->work, &js->mu);
		}
		if (js->stopping)
			break;
		if (do_set_state(js, j, STORE_JOB_RUNNING, NULL)) {
			/* the store refused: give up on it rather than loop */
			do_remove(js, j);
			job_free(j);
			continue;
		}
		j->errors = 0;
		pthread_mutex_unlock(&js->mu);
		char msg[512];
		store_job_state end = run_job(js, j, msg, sizeof msg);
		pthread_mutex_lock(&js->mu);
		if (do_set_state(js, j, end, msg) == 0 && end == STORE_JOB_QUEUED && !js->stopping)
			continue;          /* stays active, queued */
		do_remove(js, j);
		job_free(j);
	}
	pthread_mutex_unlock(&js->mu);
	return NULL;
}

/* ---- cost models --------------------------------------------------------------------------------- */

static const char *const kind_names[2] = { "cpu", "cuda" };

/* Records of one target kind, copied out of the store (its callback holds
 * the store's lock, so no other store call can run in it). */
typedef struct rec_copy {
	const char *wk, *target, *trace;   /* copy_record's: malloc'd */
	bool ok;
	double us;
} rec_copy;

typedef struct rec_list {
	const char *prefix;        /* "cpu:" / "cuda:" */
	rec_copy *r;
	int n, cap;
} rec_list;

static void *must(void *p)
{
	if (!p)
		abort();   /* out of memory at start-up */
	return p;
}

static void copy_record(void *ctx, const store_record *r)
{
	rec_list *l = ctx;
	if (!r->target || !r->trace || strncmp(r->target, l->prefix, strlen(l->prefix)))
		return;
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 256;
		l->r = must(realloc(l->r, sizeof *l->r * (size_t)l->cap));
	}
	l->r[l->n++] = (rec_copy){ must(strdup(r->workload_key)), must(strdup(r->target)),
				   must(strdup(r->trace)), r->status && !strcmp(r->status, "ok"),
				   r->latency_us };
}

static int by_workload(const void *a, const void *b)
{
	return strcmp(((const rec_copy *)a)->wk, ((const rec_copy *)b)->wk);
}

typedef struct row_job {
	const tir_workload *w;
	const rec_copy *r;
	float *f;
	double *g;
	bool *ok;
} row_job;

/* Row i of a row_job: record i replayed and its features computed by this
 * build, in slot i. */
static void row_of(void *ctx, int i)
{
	row_job *j = ctx;
	tir_target t;
	tir_sched *s = NULL;
	tir_error terr;
	const rec_copy *r = &j->r[i];
	j->ok[i] = tir_target_parse(r->target, &t, &terr) == 0 &&
		   (s = tir_sched_new(j->w, 1, &terr)) && tir_sched_replay(s, r->trace, &terr) == 0 &&
		   cm_features(tir_sched_program(s), &t, &j->f[(size_t)i * CM_NFEATURES], &terr) == 0;
	j->g[i] = r->ok && r->us > 0 ? tir_workload_flops(j->w) / (r->us * 1e3) : 0;
	tir_sched_free(s);
}

/* The rows of records r[0..n) of workload w: features recomputed by this
 * build on every core (a start-up's work, before any job runs), in the
 * records' order; records it cannot replay are skipped and counted. */
static int rows_of(const tir_workload *w, const rec_copy *r, int n, float *f, double *g,
		   int *skipped)
{
	int k = 0;
	if (w && n > 0) {
		row_job j = { w, r, f, g, must(calloc((size_t)n, sizeof(bool))) };
		tir_parallel_for(n, 0, row_of, &j);
		for (int i = 0; i < n; i++)
			if (j.ok[i]) {
				if (k != i) {
					memmove(&f[(size_t)k * CM_NFEATURES], &f[(size_t)i * CM_NFEATURES],
						sizeof(float) * CM_NFEATURES);
					g[k] = g[i];
				}
				k++;
			}
		free(j.ok);
	}
	*skipped += n - k;
	return k;
}

/* Appends records r[0..n) of workload w to m under group; returns the rows. */
static int append_rows(cm_model *m, const char *group, const tir_workload *w,
		       const rec_copy *r, int n, int *skipped)
{
	float *f = must(malloc(sizeof(float) * (size_t)(n ? n : 1) * CM_NFEATURES));
	double *g = must(malloc(sizeof(double) * (size_t)(n ? n : 1)));
	int k = rows_of(w, r, n, f, g, skipped);
	cm_model_append(m, group, k, f, g);
	free(f);
	free(g);
	return k;
}

static void rec_list_free(rec_list *l)
{
	for (int i = 0; i < l->n; i++) {
		free((char *)l->r[i].wk);
		free((char *)l->r[i].target);
		free((char *)l->r[i].trace);
	}
	free(l->r);
}

/* Appends to m every stored record of kind k, each workload's under its key:
 * the model is a summary of the records, which are the truth. */
static void append_stored(tird *d, cm_model *m, int k, int *rows, int *skipped)
{
	rec_list l = { k ? "cuda:" : "cpu:", NULL, 0, 0 };
	store_error err;
	if (store_records_each(d->db, NULL, NULL, copy_record, &l, &err) < 0)
		log_warn("cost model for %s: reading records: %s", kind_names[k], err.msg);
	if (l.n)
		qsort(l.r, (size_t)l.n, sizeof *l.r, by_workload);
	for (int i = 0, j; i < l.n; i = j) {
		for (j = i + 1; j < l.n && !strcmp(l.r[j].wk, l.r[i].wk); j++)
			;
		char *canon = NULL;
		tir_workload *w = NULL;
		if (store_workload_get(d->db, l.r[i].wk, &canon, NULL, NULL, &err) == 1)
			w = tir_workload_parse(canon, strlen(canon), NULL, NULL);
		free(canon);
		*rows += append_rows(m, l.r[i].wk, w, &l.r[i], j - i, skipped);
		tir_workload_free(w);
	}
	rec_list_free(&l);
}

/* ---- the seed of a new model --------------------------------------------------------- */

/* Appends the records of target kind k (prefix "cpu:" / "cuda:") of file
 * path (tirctl export's format) to m, each workload's under the group
 * "seed:KEY": never in one ranking group with this cache's own measurements
 * of the same workload, which another machine's latencies are not
 * comparable with.  Returns the rows added (*nw: of how many workloads), or
 * -1 with msg naming the fault. */
static int append_seed(cm_model *m, const char *path, int k, int *nw, int *skipped, char *msg,
		       size_t n)
{
	*nw = 0;
	tir_error terr = { "" };
	tir_records *recs = tir_records_read(path, NULL, NULL, &terr);
	if (!recs) {
		snprintf(msg, n, "%s", terr.msg);
		return -1;
	}
	char prefix[16];
	snprintf(prefix, sizeof prefix, "%s:", kind_names[k]);
	int rows = 0, nrec = tir_records_count(recs);
	rec_copy *r = must(calloc((size_t)(nrec ? nrec : 1), sizeof *r));
	for (int i = 0; i < tir_records_workloads(recs); i++) {
		const tir_workload *w = tir_records_workload(recs, i);
		int c = 0;
		for (int j = 0; j < nrec; j++) {
			const tir_record *x = tir_records_at(recs, j);
			if (x->workload == i && !strncmp(x->target, prefix, strlen(prefix)))
				r[c++] = (rec_copy){ tir_workload_key(w), x->target, x->trace,
						     !strcmp(x->status, "ok"), x->latency_us };
		}
		if (c == 0)
			continue;
		char group[96];
		snprintf(group, sizeof group, "seed:%s", tir_workload_key(w));
		int added = append_rows(m, group, w, r, c, skipped);
		rows += added;
		*nw += added > 0;
	}
	free(r);
	tir_records_free(recs);
	return rows;
}

/* The seed file a new model of kind k starts from: the setting model_seed
 * (one file for both kinds: each takes its own records), else KIND.records
 * built beside tird or installed with it; NULL: none. */
static const char *seed_path(const tird *d, int k, char *buf, size_t n)
{
	const char *s = d->cfg.model_seed;
	if (s && s[0])
		return strcmp(s, "none") ? s : NULL;
	static const char *const dirs[] = { TIRD_SEED_BUILD, TIRD_SEED_INSTALLED };
	for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
		snprintf(buf, n, "%s/%s.records", dirs[i], kind_names[k]);
		if (access(buf, R_OK) == 0)
			return buf;
	}
	return NULL;
}

/* A model of kind k made from the seed and the stored records of that
 * kind, trained once: when none was saved, or the saved one cannot
 * be loaded (why: its error; NULL: none was saved).  NULL with msg when a
 * seed the settings name cannot be used. */
static cm_model *model_make(tird *d, int k, const char *why, char *msg, size_t n)
{
	double t0 = tir_now_s();
	cm_model *m = cm_model_new();
	int rows = 0, skipped = 0, nw = 0, seeded = 0;
	char buf[PATH_MAX];
	const char *seed = seed_path(d, k, buf, sizeof buf);
	if (seed && (seeded = append_seed(m, seed, k, &nw, &skipped, msg, n)) < 0) {
		cm_model_free(m);
		if (d->cfg.model_seed && d->cfg.model_seed[0])
			return NULL;
		log_warn("cost model for %s: the seed is not used: %s", kind_names[k], msg);
		m = cm_model_new();
		seeded = skipped = 0;
		seed = NULL;
	}
	append_stored(d, m, k, &rows, &skipped);
	tir_error terr = { "" };
	if (cm_model_train(m, &terr))
		log_warn("cost model for %s: %s", kind_names[k], terr.msg);
	char from_seed[PATH_MAX + 96] = "";
	if (seed)
		snprintf(from_seed, sizeof from_seed, ", and %d rows of %d workloads from the seed %s",
			 seeded, nw, seed);
	if (why)
		log_warn("cost model for %s not loaded (%s): rebuilt from %d stored records "
			 "(%d skipped)%s in %.1f s", kind_names[k], why, rows, skipped, from_seed,
			 tir_now_s() - t0);
	else
		log_info("cost model for %s: new, from %d stored records (%d skipped)%s in %.1f s",
			 kind_names[k], rows, skipped, from_seed, tir_now_s() - t0);
	return m;
}

int jobs_models_load(tird *d, char *msg, size_t n)
{
	for (int k = 0; k < 2; k++) {
		void *blob = NULL;
		size_t len = 0;
		store_error err;
		tir_error terr = { "" };
		int rc = store_model_get(d->db, kind_names[k], &blob, &len, &err);
		if (rc < 0)
			log_warn("cost model for %s: %s", kind_names[k], err.msg);
		if (rc == 1 && (d->models[k] = cm_model_load(blob, len, &terr))) {
			log_info("cost model for %s: %d rows", kind_names[k],
				 cm_model_rows(d->models[k]));
		} else {
			d->models[k] = model_make(d, k, rc == 1 ? terr.msg : NULL, msg, n);
			if (!d->models[k]) {
				free(blob);
				return -1;
			}
			/* saved at once, so a restart loads it instead of making it
			 * again from the seed and the records */
			if (cm_model_rows(d->models[k]) > 0)
				jobs_model_save(d, (tir_target_kind)(k ? TIR_TARGET_CUDA : TIR_TARGET_CPU));
		}
		free(blob);
		cm_model_set_threads(d->models[k],
				     search_threads(k ? TIR_TARGET_CUDA : TIR_TARGET_CPU));
	}
	return 0;
}

void jobs_model_save(tird *d, tir_target_kind kind)
{
	int k = kind == TIR_TARGET_CUDA;
	unsigned char *blob = NULL;
	size_t len = 0;
	tir_error terr = { "" };
	store_error err;
	if (cm_model_save(d->models[k], &blob, &len, &terr))
		log_warn("cost model for %s not saved: %s", kind_names[k], terr.msg);
	else if (store_model_put(d->db, kind_names[k], "xgboost", blob, len, &err))
		log_warn("cost model for %s not saved: %s", kind_names[k], err.msg);
	free(blob);
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
		l->ids = realloc(l->ids, (size_t)l->cap * sizeof *l->ids);
		if (!l->ids)
			abort();
	}
	l->ids[l->n++] = sj->id;
}

/* Puts every job the store holds as running back to queued, and every queued
 * job into memory, oldest first (js->mu held). */
static int do_resume(jobs *js, char *msg, size_t n)
{
	tird *d = js->d;
	store_error err;
	id_list running = { 0 }, queued = { 0 };
	if (store_jobs_list(d->db, STORE_JOB_RUNNING, 0, collect_id, &running, &err) < 0)
		goto fail;
	for (int i = 0; i < running.n; i++) {
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
		if (store_job_get(d->db, queued.ids[i], &sj, &err) != 1)
			goto fail;
		job *j = calloc(1, sizeof *j);
		if (!j)
			abort();
		j->id = sj.id;
		memcpy(j->key, sj.workload_key, sizeof j->key);
		snprintf(j->message, sizeof j->message, "%s", sj.message ? sj.message : "");
		j->trials = sj.trials;
		j->batch = sj.batch;
		snprintf(j->cost_model, sizeof j->cost_model, "%s",
			 sj.cost_model[0] ? sj.cost_model : cost_models[0]);
		j->has_seed = sj.has_seed;
		j->seed = sj.seed;
		j->state = STORE_JOB_QUEUED;
		j->trials_done = sj.trials_done;
		j->best_us = sj.best_us;
		j->created = sj.created;
		store_job_clear(&sj);
		tir_error terr = { "" };
		char *canon = NULL;
		if (store_workload_get(d->db, j->key, &canon, NULL, NULL, &err) == 1)
			j->w = tir_workload_parse(canon, strlen(canon), NULL, &terr);
		else
			snprintf(terr.msg, sizeof terr.msg, "workload %s is not stored", j->key);
		j->canonical = canon;
		if (j->w && tir_target_parse(sj.target, &j->target, &terr) == 0) {
			/* the stored records, not the job row, which can lag them
			 * (run_job counts them again when it starts) */
			int stored = store_record_count(d->db, j->key, j->target.key, &err);
			if (stored >= 0)
				j->trials_done = stored;
			do_append(js, j);
			log_info("job %lld: resumed (%d/%d trials stored)", (long long)j->id,
				 j->trials_done, j->trials);
			continue;
		}
		snprintf(j->target.key, sizeof j->target.key, "%s", sj.target);
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

jobs *jobs_start(tird *d, char *msg, size_t n)
{
	jobs *js = calloc(1, sizeof *js);
	if (!js)
		abort();
	js->d = d;
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
	js->threads = calloc((size_t)js->nthreads, sizeof *js->threads);
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
	js->stopping = true;
	for (job *j = js->active; j; j = j->next)
		j->cancel = 1;     /* tir_tune stops after the round; run_job sees stopping */
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
