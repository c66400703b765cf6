/*
 * run.c — running one job (jobs_int.h: job_run), the half of the job manager
 * that calls tir_tune; jobs.c claims the job before and moves it to its end
 * after.
 *
 * A run measures trials − (records already stored) more candidates, the
 * stored records passed to tir_tune as prior: asking for more trials
 * continues the search, and a job resumed after a crash, or taken over from
 * a replica that died, loses only the batch that was in flight.  Before the
 * search, the untrusted imports of the (workload, target) are measured
 * again (a measurement replaces its import).
 *
 * Every measured candidate is stored at once: by store_batch, before its
 * worker is told the results were taken (workers_measure), else by
 * on_result.  store_batch first asks whether this replica's claim still
 * holds (lease_held): a replica that was stalled past its lease stores
 * nothing more of the run.  The progress is written once a round, in the
 * name of the claim's owner (store_job_progress), so a lost claim changes
 * nothing there either.
 *
 * Threads: job_run runs on the job's tuning thread without js->mu; the
 * callbacks take js->mu to change the job in memory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "jobs_int.h"

/* batches of a GPU job measured at once (tir_tune_opts.pipeline) with
 * pipeline = auto */
#define GPU_PIPELINE 2

/* A batch's results as store_batch stored them, until on_result saw each. */
typedef struct stored_batch {
	const tir_candidate *out;  /* NULL: a free slot */
	int n, seen;
	signed char *ins;
} stored_batch;

typedef struct run_ctx {
	jobs *js;
	job *j;
	measure_ctx mc;
	double flops;
	int measured;              /* candidates measured in this run */
	bool async;                /* the model learns beside the search */
	int cache_hits;            /* compiles the workers' caches saved, in this run (mu) */
	/* the batches workers_measure stored (store_batch) that on_result has
	 * not seen whole yet — up to the search's pipeline depth, stored on
	 * its measuring threads while it records the oldest on its own — each
	 * with what store_record_add said of each result (1 new, 0 held, -1
	 * not stored); guarded by mu */
	pthread_mutex_t mu;
	stored_batch held[TIR_TUNE_PIPELINE_MAX + 1];
} run_ctx;

/* Stores one measured candidate: 1 a new record, 0 one already held, -1 not
 * stored (logged). */
static int store_one(run_ctx *rc, const tir_candidate *c)
{
	job *j = rc->j;
	tird *d = rc->js->d;
	bool ok = c->status == TIR_MEASURE_OK && c->latency_us > 0;
	store_record r = { .workload_key = j->key, .target = j->target.key,
			   .trace = c->trace ? c->trace : "{}",
			   .status = tir_measure_status_name((tir_measure_status)c->status),
			   .latency_us = ok ? c->latency_us : 0,
			   .max_rel_error = c->max_rel_error, .message = c->msg,
			   .worker = rc->mc.worker[0] ? rc->mc.worker : NULL, .job_id = j->id,
			   .token = rc->mc.token[0] ? rc->mc.token : NULL,
			   .host = rc->mc.host[0] ? rc->mc.host : NULL };
	bool changed = false;
	store_error err;
	int ins = store_record_add(d->db, &r, &changed, &err);
	if (ins < 0)
		log_error("job %lld: record not stored: %s", (long long)j->id, err.msg);
	if (changed)
		atomic_fetch_add(&d->best_gen, 1);
	return ins;
}

/* measure_ctx.store: a batch's results stored before its worker is told they
 * were taken (workers_measure); on_result then counts them. */
static int store_batch(void *ctx, int n, const tir_candidate *out)
{
	run_ctx *rc = ctx;
	signed char *ins = tird_xcalloc((size_t)n + 1, 1);
	/* a claim taken over while this replica was stalled: the job is the
	 * other replica's now, and nothing more of this run is stored (each
	 * result marked not stored, so on_result does not store it either) */
	bool held = lease_held(rc->js->d->leases, rc->j->lease);
	if (!held)
		log_warn("job %lld: %d results not stored: this replica's claim of the job "
			 "is lost", (long long)rc->j->id, n);
	int failed = 0;
	for (int i = 0; i < n; i++) {
		ins[i] = held ? (signed char)store_one(rc, &out[i]) : -1;
		failed += ins[i] < 0;
	}
	pthread_mutex_lock(&rc->mu);
	/* a free slot; there is one unless the search measures more batches
	 * at once than TIR_TUNE_PIPELINE_MAX (then the last slot's batch is
	 * forgotten: on_result stores its results again, which
	 * store_record_add holds) */
	int k = 0;
	while (k < TIR_TUNE_PIPELINE_MAX && rc->held[k].out)
		k++;
	free(rc->held[k].ins);
	rc->held[k] = (stored_batch){ out, n, 0, ins };
	rc->cache_hits += rc->mc.compile_cache_hits;
	pthread_mutex_unlock(&rc->mu);
	return failed;
}

/* What store_batch said of c (1, 0, -1), or 2: it did not store c. */
static int stored_as(run_ctx *rc, const tir_candidate *c)
{
	int ins = 2;
	pthread_mutex_lock(&rc->mu);
	for (int k = 0; k <= TIR_TUNE_PIPELINE_MAX && ins == 2; k++) {
		stored_batch *b = &rc->held[k];
		if (!b->out || c < b->out || c >= b->out + b->n)
			continue;
		ins = b->ins[c - b->out];
		if (++b->seen == b->n) {
			free(b->ins);
			*b = (stored_batch){ 0 };
		}
	}
	pthread_mutex_unlock(&rc->mu);
	return ins;
}

/* rc for one pass of j's measuring: results stored by store_batch. */
static void run_ctx_init(run_ctx *rc, jobs *js, job *j)
{
	*rc = (run_ctx){ js, j, { .d = js->d, .job_id = j->id, .canonical = j->canonical,
				  .workload_key = j->key, .cancel = &j->cancel,
				  .store = store_batch, .store_ctx = rc },
			 tir_workload_flops(j->w), 0 };
	pthread_mutex_init(&rc->mu, NULL);
	pthread_mutex_init(&rc->mc.mu, NULL);
}

static void run_ctx_clear(run_ctx *rc)
{
	for (int k = 0; k <= TIR_TUNE_PIPELINE_MAX; k++)
		free(rc->held[k].ins);
	pthread_mutex_destroy(&rc->mu);
	pthread_mutex_destroy(&rc->mc.mu);
}

/* tir_tune's on_result: every measured candidate is stored at once (by
 * store_batch, before its worker was answered; else here) and counted. */
static void on_result(void *ctx, const tir_candidate *c)
{
	run_ctx *rc = ctx;
	job *j = rc->j;
	tird *d = rc->js->d;
	bool ok = c->status == TIR_MEASURE_OK && c->latency_us > 0;
	int ins = stored_as(rc, c);
	if (ins == 2) {            /* mc.mu: another batch's worker is not c's */
		pthread_mutex_lock(&rc->mc.mu);
		ins = store_one(rc, c);
		pthread_mutex_unlock(&rc->mc.mu);
	}
	atomic_fetch_add(&d->metrics.trials, 1);
	rc->measured++;
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
	pthread_mutex_lock(&rc->mu);
	int cache_hits = rc->cache_hits;
	pthread_mutex_unlock(&rc->mu);
	store_error err;
	if (store_job_progress(rc->js->d->db, j->id, rc->js->d->replica, done, errors, best, &err))
		log_warn("job %lld: progress not stored: %s", (long long)j->id, err.msg);
	if (p->round > 0 && p->drain) {
		log_info("job %lld: after round %d, the model learnt the last batches in %.2f s; "
			 "%.2f candidates/s, measurer busy %.0f%% of %.1f s, compile cache hits %d",
			 (long long)j->id, p->round, p->update_s,
			 p->elapsed_s > 0 ? rc->measured / p->elapsed_s : 0,
			 p->elapsed_s > 0 ? 100 * p->measure_total_s / p->elapsed_s : 0,
			 p->elapsed_s, cache_hits);
	} else if (p->round > 0) {  /* 0: the final store after tir_tune */
		log_info("job %lld: round %d, %d/%d trials, best %.3f us: search %.2f s, "
			 "measuring %.2f s, recording and model update %.2f s (model training "
			 "%.2f s%s, %d batch%s behind); %.2f candidates/s, measurer busy %.0f%%, "
			 "compile cache hits %d",
			 (long long)j->id, p->round, done, j->trials, best, p->search_s,
			 p->measure_s, p->update_s, p->train_s,
			 rc->async ? " beside" : " of it", p->model_lag,
			 p->model_lag == 1 ? "" : "es",
			 p->elapsed_s > 0 ? rc->measured / p->elapsed_s : 0,
			 p->elapsed_s > 0 ? 100 * p->measure_total_s / p->elapsed_s : 0,
			 cache_hits);
	}
}

typedef struct prior_set {
	tir_candidate *c;
	int n, cap;
} prior_set;

static void add_prior(void *ctx, const store_record *r)
{
	prior_set *p = ctx;
	if (!r->trusted)           /* an untrusted import is no measurement */
		return;
	if (p->n == p->cap) {
		p->cap = p->cap ? p->cap * 2 : 64;
		p->c = tird_xrealloc(p->c, (size_t)p->cap * sizeof *p->c);
	}
	tir_candidate *c = &p->c[p->n++];
	c->trace = tird_strdup(r->trace);
	int status = tir_measure_status_parse(r->status);
	c->status = status < 0 ? TIR_MEASURE_RUN_ERROR : status;
	c->latency_us = r->latency_us;
	c->max_rel_error = r->max_rel_error;
	c->msg = tird_strdup(r->message);
}

static void prior_free(prior_set *p)
{
	for (int i = 0; i < p->n; i++) {
		free((char *)p->c[i].trace);
		free((char *)p->c[i].msg);
	}
	free(p->c);
}

typedef struct trace_list {
	char **t;
	int n;
	int max;
} trace_list;

static void add_trace(void *ctx, const store_record *r)
{
	trace_list *l = ctx;
	if (l->n < l->max)
		l->t[l->n++] = tird_strdup(r->trace);
}

/* The untrusted imports of j's (workload, target), fastest claim first, a
 * batch at most, measured again by a worker of this tird before the search:
 * each measurement replaces its import (store_record_add), so an import is
 * served as a best only once measured here, and at the latency measured
 * here.  0, or -1 with rc->mc.why (cancelled, stopping, no worker). */
static int remeasure_imports(run_ctx *rc)
{
	job *j = rc->j;
	tird *d = rc->js->d;
	store_error err;
	trace_list l = { tird_xcalloc((size_t)j->batch, sizeof(char *)), 0, j->batch };
	if (store_untrusted_each(d->db, j->key, j->target.key, j->batch, add_trace, &l,
				 &err) < 0)
		log_warn("job %lld: cannot read the imports to measure again: %s",
			 (long long)j->id, err.msg);
	int ret = 0;
	if (l.n > 0) {
		log_info("job %lld: measuring %d imported records again before the search",
			 (long long)j->id, l.n);
		tir_candidate *out = tird_xcalloc((size_t)l.n, sizeof *out);
		ret = workers_measure(&rc->mc, j->w, &j->target, l.n,
				      (const char *const *)l.t, out);
		for (int i = 0; i < l.n; i++) {
			if (ret == 0)
				on_result(rc, &out[i]);
			free((char *)out[i].msg);
		}
		free(out);
	}
	for (int i = 0; i < l.n; i++)
		free(l.t[i]);
	free(l.t);
	return ret;
}

/* Whether measuring for j stopped short of its end, and the state it then
 * takes (-1: it did not): tird stopping (queued: it resumes at the next
 * start), a user's cancel, or — where failed, the measuring having failed —
 * no worker for its target (its thread given back, it waits in the queue
 * for one: jobs_cron). */
static int interrupted(jobs *js, job *j, const measure_ctx *mc, bool failed, char *msg,
		       size_t n)
{
	if (atomic_load(&js->stopping) || atomic_load(&js->d->stopping)) {
		snprintf(msg, n, "interrupted: tird stopped; the job resumes at the next start");
		return STORE_JOB_QUEUED;
	}
	if (atomic_load(&j->cancel)) {
		snprintf(msg, n, "cancelled by a user");
		return STORE_JOB_CANCELLED;
	}
	if (failed && mc->no_worker_since > 0) {
		pthread_mutex_lock(&js->mu);
		j->waiting_since = mc->no_worker_since;
		pthread_mutex_unlock(&js->mu);
		snprintf(msg, n, "%.400s; back in the queue until one comes", mc->why);
		return STORE_JOB_QUEUED;
	}
	return -1;
}

store_job_state job_run(jobs *js, job *j, char *msg, size_t n)
{
	tird *d = js->d;
	store_error err;
	prior_set prior = { 0 };
	run_ctx rm;
	run_ctx_init(&rm, js, j);
	int rmrc = remeasure_imports(&rm);
	run_ctx_clear(&rm);
	if (rmrc < 0) {
		int st = interrupted(js, j, &rm.mc, true, msg, n);
		if (st >= 0)
			return (store_job_state)st;
		snprintf(msg, n, "%s", rm.mc.why);
		return STORE_JOB_FAILED;
	}
	if (store_records_each(d->db, j->key, j->target.key, add_prior, &prior, &err) < 0) {
		/* the job's message is for clients: the database's words go to the log */
		log_error("job %lld: store: reading the stored records: %s", (long long)j->id,
			  err.msg);
		snprintf(msg, n, "the database failed reading the stored records "
			 "(tird's log has the details)");
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

	run_ctx rc;
	run_ctx_init(&rc, js, j);
	tir_tune_opts o = { 0 };
	o.trials = want;
	o.batch = j->batch;
	/* the job's patience, else the daemon's: rounds in a row measuring
	 * nothing faster that end the search short of its trials; 0 none do */
	int patience = j->search.has_patience ? j->search.patience : (int)d->cfg.default_patience;
	o.patience = patience;
	/* a given seed makes the run deterministic given the same measurements;
	 * else one is derived from the job and what was stored before */
	o.seed = j->search.has_seed ? (uint64_t)j->search.seed
			     : (uint64_t)j->id * 0x9e3779b97f4a7c15ULL + (uint64_t)prior.n;
	o.nprior = prior.n;
	o.prior = prior.c;
	o.measure = workers_measure;
	o.measure_ctx = &rc.mc;
	/* GPU: the next batch searched while a worker measures the GPU_PIPELINE
	 * before it (the callbacks stay on this thread: tir_tune records a
	 * batch after the next is picked; workers_measure and its store_batch
	 * run on the search's measuring threads, up to GPU_PIPELINE at once,
	 * store_batch's results kept apart per batch).  Two batches out keep
	 * a worker's builders busy while the slowest compiles of one finish
	 * (tird-worker measures batches in slots, --slots).  Not on a CPU: its
	 * cores build and time the candidates, and a search beside them
	 * slowed each batch's measuring more than it saved (this 2-core VM,
	 * GMM-2: measuring 3.8 -> 4.7 s a batch, the job 37.6 -> 42.1 s;
	 * bench/results/2026-12-03-cpu-tuning-loop.txt) */
	o.pipeline = d->cfg.pipeline_depth >= 0 ? d->cfg.pipeline_depth
		   : j->target.kind == TIR_TARGET_CUDA ? GPU_PIPELINE : 0;
	/* each batch learnt as it ends: one whose slowest compile takes
	 * seconds holds up only itself (the measurements make a daemon's
	 * search no more repeatable than that) */
	o.pipeline_any_order = true;
	o.threads = tird_search_threads(j->target.kind);
	/* "xgboost": the model shared by every job of the full target key, so
	 * each workload teaches the next (tir_tune draws random scores while it
	 * is untrained); "random": tir_tune's own random model (o.model NULL),
	 * seeded by o.seed, which neither reads nor teaches the shared model.
	 * An emulated key has no model (its timings train nothing): random. */
	cm_model *model = strcmp(j->search.cost_model, "random") ? models_of(d, &j->target) : NULL;
	bool xgb = model != NULL;
	if (j->target.emulated && strcmp(j->search.cost_model, "random"))
		log_info("job %lld: %s is emulated: no cost model learns from its timings, "
			 "candidates are ranked at random", (long long)j->id, j->target.key);
	if (xgb) {
		o.model = &cm_xgboost;
		o.model_self = model;
		/* the shared model learns each batch on its own thread while the
		 * next is searched and measured (half a GPU job's time went to
		 * the update between rounds, the GPU idle) */
		o.async_update = rc.async = true;
	}
	o.on_result = on_result;
	o.on_progress = on_progress;
	o.cb_ctx = &rc;
	o.cancel = &j->cancel;
	tir_tune_result res = { 0 };
	tir_error terr = { "" };
	char pat[48] = "no early stop";
	if (patience > 0)
		snprintf(pat, sizeof pat, "patience %d rounds", patience);
	log_info("job %lld: tuning %d more trials (%d stored) in batches of %d, %s model, "
		 "seed %llu%s, %s", (long long)j->id, want, prior.n, j->batch,
		 xgb ? "xgboost" : "random", (unsigned long long)o.seed,
		 j->search.has_seed ? "" : " (derived)", pat);
	int trc = tir_tune(j->w, &j->target, &o, &res, &terr);
	tir_tune_end end = res.end;
	tir_tune_result_clear(&res);
	prior_free(&prior);
	on_progress(&rc, &(tir_tune_progress){ 0 });
	run_ctx_clear(&rc);        /* its threads are over: rc is read alone below */
	if (xgb)               /* written when it learnt enough (models_cron) */
		models_learned(d, &j->target, rc.measured);

	int st = interrupted(js, j, &rc.mc, trc < 0, msg, n);
	if (st >= 0)
		return (store_job_state)st;
	if (trc < 0) {
		snprintf(msg, n, "%s", rc.mc.why[0] ? rc.mc.why
				       : terr.msg[0] ? terr.msg : "the search failed");
		return STORE_JOB_FAILED;
	}
	if (store_best_get(d->db, j->key, j->target.key, &b, &err) == 1 && b.record_id[0]) {
		/* a search that ended at a plateau says so: the job then holds
		 * fewer records than it asked for */
		char why[128] = "";
		if (end == TIR_TUNE_END_PLATEAU)
			snprintf(why, sizeof why, "; stopped early: %d rounds in a row measured "
				 "nothing faster", patience);
		else if (end == TIR_TUNE_END_EXHAUSTED)
			snprintf(why, sizeof why, "; stopped early: %d rounds in a row found no "
				 "candidate not measured already", TIR_TUNE_STALE_ROUNDS);
		snprintf(msg, n, "best %.3f us after %d trials%s", b.latency_us, b.trials, why);
		store_best_clear(&b);
		return STORE_JOB_DONE;
	}
	snprintf(msg, n, "no candidate ran correctly (%d errors; see the records)", j->errors);
	return STORE_JOB_FAILED;
}
