/*
 * workers.c — the worker registry and the measurement dispatcher.  It
 * answers data and tird_error values; api.c's worker routes turn them into
 * HTTP.
 *
 * A tuning thread hands a batch of candidates to workers_measure(), which
 * queues it in the store and waits; a tird-worker of the batch's full target
 * leases it (a long poll), measures it and posts the results, which wake the
 * tuning thread.  The registry and the batches live in the store
 * (store_workers.c), not in this process: the replicas of one database
 * share them, so a worker registered with replica A may lease from replica
 * B a batch that replica C's tuning thread waits for, and post its results
 * to A.  A batch's lifecycle (its state column):
 *
 *   pending ──lease──▶ leased ──results──▶ measured ──stored──▶ stored ──▶ (deleted)
 *      ▲                  │
 *      └──── lease lost ──┘   (the worker went silent past lease_s, or left)
 *   pending / leased ──▶ (deleted)   (job cancelled, tird stopping, or no
 *                        live worker of the target for 2 lease_s, at most
 *                        worker_wait_s: the job then goes back to the
 *                        queue, giving its tuning thread back)
 *
 * Every move is one statement that names the state it moves from, so two
 * replicas never both make it.  Results are taken from the live worker
 * that holds the lease only (with the token it registered with), and
 * re-checked (trust.c) before the job sees them.  The worker is answered
 * only once the tuning thread stored them (measure_ctx.store) and moved the
 * batch to stored: a 200 means the records are in the database, so a tird
 * killed or a disk full between the post and the store never loses a
 * result the worker was told was taken (it is told it was not, instead).
 * A worker is alive while it polls, heartbeats or posts (last_seen); silent
 * for lease_s it is marked gone by the cron duty of any replica
 * (workers_cron), and its batch goes back to pending to be finished by
 * another worker.  A batch whose job is no longer run by the replica that
 * queued it (that replica died and another took the job over) is never
 * leased and is purged by the cron duty.
 *
 * Waiting: the tuning thread, a lease poll and a poster awaiting the store
 * each read the store again every POLL_S (LEASE_POLL_S for a lease poll),
 * or sooner when something in this process wakes them (ws->avail: a batch
 * was queued or went back; ws->changed: one was posted or stored), so that
 * one replica (SQLite) answers at once and replicas see each other's moves
 * within a poll.  ws holds nothing but those wake-ups.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "tird.h"

#define POLL_S 0.1
#define LEASE_POLL_S 0.25
/* how long a poster waits for its results to be stored: under its own
 * request's timeout (tird-worker's is 30 s) */
#define STORED_WAIT_S 20.0

struct workers {
	tird *d;
	pthread_mutex_t mu;
	pthread_cond_t avail;      /* a batch became pending here */
	pthread_cond_t changed;    /* a batch was posted or stored here */
};

workers *workers_new(tird *d)
{
	workers *ws = tird_xcalloc(1, sizeof *ws);
	ws->d = d;
	pthread_mutex_init(&ws->mu, NULL);
	pthread_cond_init(&ws->avail, NULL);
	pthread_cond_init(&ws->changed, NULL);
	return ws;
}

void workers_free(workers *ws)
{
	if (!ws)
		return;
	pthread_cond_destroy(&ws->avail);
	pthread_cond_destroy(&ws->changed);
	pthread_mutex_destroy(&ws->mu);
	free(ws);
}

static void wake(workers *ws, pthread_cond_t *c)
{
	pthread_mutex_lock(&ws->mu);
	pthread_cond_broadcast(c);
	pthread_mutex_unlock(&ws->mu);
}

/* Waits up to s seconds for c (a wake-up missed costs one poll). */
static void nap(workers *ws, pthread_cond_t *c, double s)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	long ns = until.tv_nsec + (long)(s * 1e9);
	until.tv_sec += ns / 1000000000L;
	until.tv_nsec = ns % 1000000000L;
	pthread_mutex_lock(&ws->mu);
	pthread_cond_timedwait(c, &ws->mu, &until);
	pthread_mutex_unlock(&ws->mu);
}

void workers_cron(workers *ws)
{
	tird *d = ws->d;
	double now = store_now();
	store_error err;
	int back = store_workers_expire(d->db, now - (double)d->cfg.lease_s, now, &err);
	if (back < 0) {
		log_warn("expiring silent workers' leases: %s", err.msg);
	} else if (back > 0) {
		log_warn("%d batch%s re-queued: %s lease expired or %s worker went silent", back,
			 back == 1 ? "" : "es", back == 1 ? "its" : "their",
			 back == 1 ? "its" : "their");
		atomic_fetch_add(&d->metrics.batches_requeued, (unsigned)back);
		wake(ws, &ws->avail);
	}
	int gone = store_batches_purge(d->db, now - 300, &err);
	if (gone < 0)
		log_warn("purging batches of jobs no longer run: %s", err.msg);
	else if (gone > 0)
		log_info("%d batch%s purged: %s job is no longer run by the replica that queued "
			 "%s", gone, gone == 1 ? "" : "es", gone == 1 ? "its" : "their",
			 gone == 1 ? "it" : "them");
}

void workers_wake(workers *ws)
{
	pthread_mutex_lock(&ws->mu);
	pthread_cond_broadcast(&ws->avail);
	pthread_cond_broadcast(&ws->changed);
	pthread_mutex_unlock(&ws->mu);
}

bool workers_serve(workers *ws, const char *target)
{
	store_error err;
	int r = store_worker_serves(ws->d->db, target, &err);
	if (r < 0)
		log_warn("looking up workers of %s: %s", target, err.msg);
	return r > 0;
}

bool workers_find_kind(workers *ws, const char *kind, char *key, size_t n)
{
	store_error err;
	int r = store_worker_of_kind(ws->d->db, kind, key, n, &err);
	if (r < 0)
		log_warn("looking up workers of kind %s: %s", kind, err.msg);
	return r > 0;
}

int workers_live(workers *ws)
{
	store_error err;
	int n = store_workers_live(ws->d->db, &err);
	if (n < 0)
		log_warn("counting live workers: %s", err.msg);
	return n > 0 ? n : 0;
}

int workers_queue_depth(workers *ws)
{
	store_error err;
	int n = store_batches_pending(ws->d->db, &err);
	if (n < 0)
		log_warn("counting pending batches: %s", err.msg);
	return n > 0 ? n : 0;
}

/* ---- the dispatcher (a tir_measure_batch_fn) ------------------------------------------ */

/* The worker's word is not taken: every "ok" is checked against the bounds
 * of w on t (trust.c) and stored as the error it is when beyond them. */
static void recheck(measure_ctx *mc, const tir_workload *w, const tir_target *t, int n,
		    tir_candidate *out)
{
	if (mc->bounds_state == 0) {
		tir_error err = { "" };
		mc->bounds_state = trust_bounds_of(w, t, &mc->bounds, &err) ? -1 : 1;
		if (mc->bounds_state < 0)   /* the search built it: this cannot be */
			log_error("job %lld: no bounds for its results: %s", (long long)mc->job_id,
				  err.msg);
	}
	for (int i = 0; i < n; i++) {
		char why[320];
		if (out[i].status != TIR_MEASURE_OK)
			continue;
		if (mc->bounds_state < 0) {
			snprintf(why, sizeof why, "reported ok, but the result cannot be checked");
			out[i].status = TIR_MEASURE_RUN_ERROR;
		} else if (trust_check_result(&mc->bounds, &out[i].status, out[i].latency_us,
					      out[i].max_rel_error, why, sizeof why)) {
			continue;
		}
		log_warn("job %lld: worker %s %s: stored as %s", (long long)mc->job_id, mc->worker,
			 why, tir_measure_status_name((tir_measure_status)out[i].status));
		char msg[400];
		snprintf(msg, sizeof msg, "worker %s %s", mc->worker, why);
		free((char *)out[i].msg);
		out[i].msg = tird_strdup(msg);
		out[i].latency_us = 0;
	}
}

/* The posted results of batch id into out[0..n): 0, or -1 with why. */
static int take_results(tird *d, int64_t id, int n, tir_candidate *out, char *why, size_t cap)
{
	store_result *res = tird_xcalloc((size_t)n, sizeof *res);
	store_error err;
	int r = store_batch_results(d->db, id, n, res, &err);
	if (r <= 0)
		snprintf(why, cap, "reading the results of batch %lld: %.200s",
			 (long long)id, r < 0 ? err.msg : "the batch is gone");
	for (int i = 0; i < n; i++) {
		int st = tir_measure_status_parse(res[i].status);
		if (r > 0) {
			out[i].status = st >= 0 ? st : TIR_MEASURE_RUN_ERROR;
			out[i].latency_us = res[i].latency_us;
			out[i].max_rel_error = res[i].max_rel_error;
			free((char *)out[i].msg);
			out[i].msg = st >= 0 ? res[i].msg : tird_strdup("no result stored for it");
			if (st >= 0)
				res[i].msg = NULL;
		}
		free(res[i].msg);
	}
	free(res);
	return r > 0 ? 0 : -1;
}

/* A batch of mc failed (why; no_worker: since when no worker was live, 0
 * when that was not why): -1, and mc says so unless another batch's
 * failure did first. */
static int failed(measure_ctx *mc, const char *why, double no_worker)
{
	pthread_mutex_lock(&mc->mu);
	if (!mc->why[0]) {
		snprintf(mc->why, sizeof mc->why, "%s", why);
		mc->no_worker_since = no_worker;
	}
	pthread_mutex_unlock(&mc->mu);
	return -1;
}

int workers_measure(void *ctx, const tir_workload *w, const tir_target *t, int n,
		    const char *const *traces, tir_candidate *out)
{
	measure_ctx *mc = ctx;
	tird *d = mc->d;
	workers *ws = d->workers;
	/* why this batch failed: into mc once it did (the first failure of
	 * the batches measured at once stays) */
	char why[sizeof mc->why] = "";
	double no_worker = 0;
	/* how long a pending batch waits with no live worker of its target
	 * before the job gives its tuning thread back (a worker restarting
	 * comes back well within it) */
	double give_up = 2.0 * (double)d->cfg.lease_s;
	if (give_up > (double)d->cfg.worker_wait_s)
		give_up = (double)d->cfg.worker_wait_s;
	for (int i = 0; i < n; i++)
		out[i] = (tir_candidate){ traces[i], TIR_MEASURE_RUN_ERROR, 0, -1, NULL };
	if (n <= 0)
		return 0;
	store_batch_row b = { .job_id = mc->job_id, .n = n };
	snprintf(b.replica, sizeof b.replica, "%s", d->replica);
	snprintf(b.target, sizeof b.target, "%s", t->key);
	snprintf(b.workload_key, sizeof b.workload_key, "%s", mc->workload_key);
	store_error err;
	if (store_batch_add(d->db, &b, mc->canonical, traces, &err)) {
		snprintf(why, sizeof why, "queueing a batch: %.200s", err.msg);
		return failed(mc, why, 0);
	}
	int64_t id = b.id;
	wake(ws, &ws->avail);
	log_debug("batch %lld of job %lld: %d candidates for %s", (long long)id,
		  (long long)b.job_id, n, b.target);
	double no_worker_since = 0;
	int rc = 0;
	for (;;) {
		if (atomic_load(mc->cancel) || atomic_load(&d->stopping)) {
			snprintf(why, sizeof why, "%s",
				 atomic_load(&d->stopping) ? "tird is stopping" : "cancelled");
			rc = -1;
			break;
		}
		int r = store_batch_get(d->db, id, &b, &err);
		if (r <= 0) {
			snprintf(why, sizeof why, "batch %lld: %.200s", (long long)id,
				 r < 0 ? err.msg : "purged (the job is no longer run by this "
				 "replica)");
			rc = -1;
			break;
		}
		if (!strcmp(b.state, "measured"))
			break;
		double now = store_now();
		if (!strcmp(b.state, "pending") && !workers_serve(ws, b.target)) {
			if (!no_worker_since) {
				no_worker_since = now;
				log_warn("job %lld: no live worker for %s; its batch waits %.0f s",
					 (long long)b.job_id, b.target, give_up);
			} else if (now - no_worker_since > give_up) {
				snprintf(why, sizeof why, "no live worker for target %.100s "
					 "for %.0f s", b.target, give_up);
				no_worker = no_worker_since;
				rc = -1;
				break;
			}
		} else {
			no_worker_since = 0;
		}
		nap(ws, &ws->changed, POLL_S);
	}
	if (!rc && take_results(d, id, n, out, why, sizeof why))
		rc = -1;
	if (rc) {
		/* a worker posting for it later is told its lease was lost */
		if (store_batch_delete(d->db, id, &err))
			log_warn("batch %lld: %s (the cron duty purges it)", (long long)id, err.msg);
		log_debug("batch %lld of job %lld given up: %s", (long long)id,
			  (long long)mc->job_id, why);
		wake(ws, &ws->changed);
		return failed(mc, why, no_worker);
	}
	pthread_mutex_lock(&mc->mu);
	snprintf(mc->worker, sizeof mc->worker, "%s", b.worker);
	snprintf(mc->token, sizeof mc->token, "%s", b.token);
	snprintf(mc->host, sizeof mc->host, "%s", b.host);
	mc->compile_cache_hits = b.cache_hits;
	/* re-checked and stored before the worker that posted them is answered
	 * (workers_results waits for the batch to be stored) */
	recheck(mc, w, t, n, out);
	int not_stored = mc->store ? mc->store(mc->store_ctx, n, out) : 0;
	if (store_batch_stored(d->db, id, not_stored, &err) < 0)
		log_warn("batch %lld: %s: its worker is told its results were not stored",
			 (long long)id, err.msg);
	pthread_mutex_unlock(&mc->mu);
	wake(ws, &ws->changed);
	return 0;
}

/* ---- what workers ask (api.c's worker routes) ------------------------------------------ */

static void random_id(char *out, size_t n)
{
	unsigned char r[6] = { 0 };
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, r, sizeof r) != (ssize_t)sizeof r) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		memcpy(r, &ts.tv_nsec, sizeof r < sizeof ts.tv_nsec ? sizeof r : sizeof ts.tv_nsec);
	}
	if (fd >= 0)
		close(fd);
	snprintf(out, n, "w-%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4], r[5]);
}

static void info_of(const workers *ws, const store_worker *w, worker_info *out)
{
	*out = (worker_info){ 0 };
	memcpy(out->id, w->id, sizeof out->id);
	memcpy(out->target, w->target, sizeof out->target);
	memcpy(out->name, w->name, sizeof out->name);
	out->live = w->live;
	out->registered = w->registered;
	out->last_seen = w->last_seen;
	out->batch_id = w->batch_id;
	out->job_id = w->job_id;
	memcpy(out->token, w->token, sizeof out->token);
	memcpy(out->peer, w->peer, sizeof out->peer);
	memcpy(out->emulator, w->emulator, sizeof out->emulator);
	long lease = ws->d->cfg.lease_s;
	out->lease_s = (double)lease;
	out->heartbeat_s = lease >= 3 ? (double)(lease / 3) : 0.5;
}

int workers_register(workers *ws, const tir_target *t, const char *name, const tird_token *tok,
		     const char *peer, worker_info *out, tird_error *e)
{
	tird *d = ws->d;
	store_worker w = { .live = true };
	random_id(w.id, sizeof w.id);
	snprintf(w.target, sizeof w.target, "%s", t->key);
	snprintf(w.name, sizeof w.name, "%s", name ? name : "unnamed");
	snprintf(w.token, sizeof w.token, "%s", tok ? tok->name : "");
	snprintf(w.peer, sizeof w.peer, "%s", peer ? peer : "");
	if (t->emulated)
		snprintf(w.emulator, sizeof w.emulator, "%s", t->emulator[0] ? t->emulator
									: "an unnamed emulator");
	w.registered = w.last_seen = store_now();
	store_error err;
	if (store_target_put(d->db, t->key, t->kind == TIR_TARGET_CUDA ? "cuda" : "cpu", &err) ||
	    store_worker_put(d->db, &w, &err))
		return tird_store_fail(e, &err, "registering a worker");
	info_of(ws, &w, out);
	wake(ws, &ws->changed);
	log_info("worker %s registered (%s, %s, token %s, from %s%s%s)", out->id, out->name,
		 out->target, out->token[0] ? out->token : "none", out->peer,
		 out->emulator[0] ? "; emulated by " : "", out->emulator);
	return 0;
}

/* Whether tok is the token worker w registered with; else fills e
 * (FORBIDDEN). */
static bool same_token(const store_worker *w, const tird_token *tok, tird_error *e)
{
	const char *name = tok ? tok->name : "";
	if (!strcmp(w->token, name))
		return true;
	tird_fail(e, TIRD_E_FORBIDDEN, "worker %s was registered with token %s, not %s: only "
		  "that token may act for it", w->id, w->token[0] ? w->token : "(none)",
		  name[0] ? name : "(none)");
	return false;
}

/* The live worker id into *w: 0, or -1 with e (UNKNOWN_WORKER, FORBIDDEN
 * for another token, STORE). */
static int live_worker(workers *ws, const char *id, const tird_token *tok, store_worker *w,
		       tird_error *e)
{
	store_error err;
	int r = store_worker_get(ws->d->db, id, w, &err);
	if (r < 0)
		return tird_store_fail(e, &err, "looking up a worker");
	if (!r || !w->live) {
		tird_fail(e, TIRD_E_UNKNOWN_WORKER, "no live worker %s; register again", id);
		return -1;
	}
	return same_token(w, tok, e) ? 0 : -1;
}

int workers_lease(workers *ws, const char *id, const tird_token *tok, double wait_s,
		  void (*fn)(void *ctx, const worker_batch *b), void *ctx, tird_error *e)
{
	tird *d = ws->d;
	if (!(wait_s >= 0))
		wait_s = 0;
	if (wait_s > 30)
		wait_s = 30;
	store_worker w;
	if (live_worker(ws, id, tok, &w, e))
		return -1;
	double until = store_now() + wait_s, seen = 0;
	store_batch_row b;
	store_error err;
	for (;;) {
		double now = store_now();
		/* a long poll keeps the worker alive (at most one write a second) */
		if (now - seen >= 1) {
			int r = store_worker_seen(d->db, id, now, 0, &err);
			if (r < 0)
				return tird_store_fail(e, &err, "a worker's lease poll");
			if (!r)            /* left, or expired by some replica meanwhile */
				return 0;
			seen = now;
		}
		int r = store_batch_lease(d->db, w.target, id, now, now + (double)d->cfg.lease_s,
					  &b, &err);
		if (r < 0)
			return tird_store_fail(e, &err, "leasing a batch");
		if (r)
			break;
		if (now >= until || atomic_load(&d->stopping))
			return 0;
		nap(ws, &ws->avail, LEASE_POLL_S);
	}
	log_info("batch %lld of job %lld (%d candidates) leased to %s", (long long)b.id,
		 (long long)b.job_id, b.n, id);
	worker_batch wb = { b.id, b.job_id, b.workload_key, b.canonical, b.target, b.n,
			    (const char *const *)b.traces };
	fn(ctx, &wb);
	store_batch_clear(&b);
	return 1;
}

/* Waits until batch id, posted, was stored by its tuning thread (on this
 * replica or another), then deletes it: 0 every result stored, or -1 with
 * e (LEASE_LOST: the batch was given up meanwhile, its job cancelled,
 * stopped or moved; STORE: some or all of them were not stored; either way
 * they count as not measured). */
static int await_stored(workers *ws, int64_t id, int n, tird_error *e)
{
	tird *d = ws->d;
	double until = store_now() + STORED_WAIT_S;
	store_batch_row b;
	store_error err;
	for (;;) {
		int r = store_batch_get(d->db, id, &b, &err);
		if (r < 0)
			return tird_store_fail(e, &err, "waiting for results to be stored");
		if (!r)            /* as if its lease were lost: nobody takes the results */
			return tird_fail(e, TIRD_E_LEASE_LOST, "batch %lld was given up before its "
					 "results were stored (its job was cancelled, stopped or "
					 "moved to another replica); they count as not measured",
					 (long long)id);
		if (!strcmp(b.state, "stored"))
			break;
		if (store_now() > until || atomic_load(&d->stopping))
			return tird_fail(e, TIRD_E_STORE, "batch %lld: its results were not "
					 "stored within %.0f s (is the replica running its job "
					 "alive?); they count as not measured", (long long)id,
					 STORED_WAIT_S);
		nap(ws, &ws->changed, POLL_S);
	}
	if (store_batch_delete(d->db, id, &err))
		log_warn("batch %lld: %s (the cron duty purges it)", (long long)id, err.msg);
	if (b.not_stored)
		return tird_fail(e, TIRD_E_STORE, "batch %lld: %d of its %d results could not be "
				 "stored (see tird's log); they count as not measured",
				 (long long)id, b.not_stored, n);
	return 0;
}

int workers_results(workers *ws, const char *id, const tird_token *tok, int64_t batch_id,
		    int n, const tir_candidate *res, int cache_hits, tird_error *e)
{
	tird *d = ws->d;
	store_worker w;
	store_batch_row b;
	store_error err;
	int r = store_worker_get(d->db, id, &w, &err);
	if (r < 0)
		return tird_store_fail(e, &err, "looking up a worker");
	if (!r || !w.live)
		return tird_fail(e, TIRD_E_FORBIDDEN, "worker %s is not registered (or is gone): "
				 "only the worker that holds batch %lld's lease may post its "
				 "results", id, (long long)batch_id);
	if (!same_token(&w, tok, e))
		return -1;
	if (store_worker_seen(d->db, id, store_now(), 0, &err) < 0)
		return tird_store_fail(e, &err, "a worker's results");
	/* the worker's own lease only: a batch re-queued or leased to another
	 * is no longer this worker's to answer */
	r = store_batch_get(d->db, batch_id, &b, &err);
	if (r < 0)
		return tird_store_fail(e, &err, "looking up a batch");
	if (!r || strcmp(b.state, "leased") != 0 || strcmp(b.worker, id) != 0)
		return tird_fail(e, TIRD_E_LEASE_LOST, "batch %lld is not leased to %s (any more)",
				 (long long)batch_id, id);
	if (strcmp(b.target, w.target) != 0)
		return tird_fail(e, TIRD_E_FORBIDDEN, "batch %lld is for %s, worker %s measures %s",
				 (long long)batch_id, b.target, id, w.target);
	if (n != b.n)
		return tird_fail(e, TIRD_E_BAD_REQUEST, "batch %lld has %d candidates, not %d",
				 (long long)b.id, b.n, n);
	store_result *sr = tird_xcalloc((size_t)n, sizeof *sr);
	for (int i = 0; i < n; i++) {
		int st = res[i].status;
		const char *msg = res[i].msg;
		if (st == TIR_MEASURE_OK && !(res[i].latency_us > 0)) {
			st = TIR_MEASURE_RUN_ERROR;
			msg = "worker reported ok without a latency";
		}
		snprintf(sr[i].status, sizeof sr[i].status, "%s",
			 tir_measure_status_name((tir_measure_status)st));
		sr[i].latency_us = st == TIR_MEASURE_OK ? res[i].latency_us : 0;
		sr[i].max_rel_error = res[i].max_rel_error;
		sr[i].msg = (char *)msg;   /* not freed: the caller's */
	}
	char host[200];
	snprintf(host, sizeof host, "%s (%s)", w.name, w.peer);
	r = store_batch_post(d->db, batch_id, id, n, sr, w.token, host, cache_hits, &err);
	free(sr);
	if (r < 0)
		return tird_store_fail(e, &err, "storing a worker's results");
	if (!r)                    /* lost between the read and the post */
		return tird_fail(e, TIRD_E_LEASE_LOST, "batch %lld is not leased to %s (any more)",
				 (long long)batch_id, id);
	atomic_fetch_add(&d->metrics.compile_cache_hits, (unsigned long)cache_hits);
	wake(ws, &ws->changed);
	/* answered once they are stored: the tuning thread re-checks and
	 * stores them (workers_measure) */
	return await_stored(ws, batch_id, n, e);
}

int workers_heartbeat(workers *ws, const char *id, const tird_token *tok, tird_error *e)
{
	store_worker w;
	if (live_worker(ws, id, tok, &w, e))
		return -1;
	double now = store_now();
	store_error err;
	int r = store_worker_seen(ws->d->db, id, now, now + (double)ws->d->cfg.lease_s, &err);
	if (r < 0)
		return tird_store_fail(e, &err, "a worker's heartbeat");
	if (!r)
		return tird_fail(e, TIRD_E_UNKNOWN_WORKER, "no live worker %s; register again", id);
	return 0;
}

int workers_leave(workers *ws, const char *id, const tird_token *tok, tird_error *e)
{
	store_worker w;
	if (live_worker(ws, id, tok, &w, e))
		return -1;
	store_error err;
	int back = store_worker_gone(ws->d->db, id, store_now(), &err);
	if (back < 0)
		return tird_store_fail(e, &err, "a worker leaving");
	log_warn("worker %s (%s, %s) left", w.id, w.name, w.target);
	if (back > 0) {
		log_warn("%d batch%s of worker %s re-queued: it left", back, back == 1 ? "" : "es",
			 id);
		atomic_fetch_add(&ws->d->metrics.batches_requeued, (unsigned)back);
		wake(ws, &ws->avail);
	}
	return 0;
}

typedef struct list_ctx {
	const workers *ws;
	worker_info *v;
	int n, cap;
} list_ctx;

static void list_one(void *ctx, const store_worker *w)
{
	list_ctx *l = ctx;
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 16;
		l->v = tird_xrealloc(l->v, (size_t)l->cap * sizeof *l->v);
	}
	info_of(l->ws, w, &l->v[l->n++]);
}

int workers_list(workers *ws, worker_info **out)
{
	list_ctx l = { ws, NULL, 0, 0 };
	store_error err;
	if (store_worker_each(ws->d->db, store_now() - 600, list_one, &l, &err) < 0)
		log_warn("listing workers: %s", err.msg);
	if (!l.v)
		l.v = tird_xcalloc(1, sizeof *l.v);
	*out = l.v;
	return l.n;
}
