/*
 * workers.c — the worker registry and the measurement dispatcher.  It
 * answers data and tird_error values; api.c's worker routes turn them into
 * HTTP.
 *
 * A tuning thread hands a batch of candidates to workers_measure(), which
 * queues it and waits; a tird-worker of the batch's full target leases it
 * (a long poll), measures it and posts the results, which wake the tuning
 * thread.  A batch's lifecycle:
 *
 *   pending ──lease──▶ leased ──results──▶ measured ──stored──▶ stored
 *      ▲                  │
 *      └──── lease lost ──┘   (the worker went silent past lease_s, or left)
 *   pending / leased ──▶ error   (job cancelled, tird stopping, or no live
 *                                 worker of the target for 2 lease_s, at most
 *                                 worker_wait_s: the job then goes back to
 *                                 the queue, giving its tuning thread back)
 *
 * Results are taken from the worker that holds the lease only (with the token
 * it registered with), and re-checked (trust.c) before the job sees them.
 * The worker is answered only once the tuning thread stored them
 * (measure_ctx.store): a 200 means the records are in the database, so a
 * tird killed or a disk full between the post and the store never loses a
 * result the worker was told was taken (it is told it was not, instead).
 * A worker is alive while it polls, heartbeats or posts; silent for lease_s
 * it is marked gone by the cron duty (workers_cron) and its batch goes back
 * to the queue to be finished by another worker.
 *
 * Ownership: a batch lives on the stack of the tuning thread waiting in
 * workers_measure and is in ws->queue only while it waits; HTTP threads touch
 * it only under ws->mu.  Workers live on the heap in ws->list until cron
 * frees them some time after they are gone.  do_x() expects ws->mu held.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "tird.h"

typedef enum { B_PENDING, B_LEASED, B_MEASURED, B_STORED, B_ERROR } batch_state;
static const char *const batch_state_names[] = { "pending", "leased", "measured", "stored",
						 "error" };

typedef struct batch {
	int64_t id, job_id;
	char target[128];
	const char *canonical, *workload_key;
	int n;
	const char *const *traces;
	tir_candidate *out;        /* out[i].msg malloc'd: tir_tune frees them */
	batch_state state;
	char worker[48];
	char token[64], host[200];     /* of the worker that posted the results */
	int not_stored;            /* B_STORED: results the store refused */
	int cache_hits;            /* compiles the worker's compile cache saved */
	bool answered;             /* the worker that posted them was answered */
	double deadline;
	struct batch *next;
} batch;

typedef struct worker {
	char id[48];
	char target[128];
	char name[128];
	char token[64];            /* its token's identity, "" when tird has none */
	char peer[64];
	char emulator[64];         /* "" on real hardware */
	double registered, last_seen;
	bool live;
	int polling;               /* lease requests waiting now */
	int64_t batch_id;          /* the batch it holds, 0: none */
	struct worker *next;
} worker;

struct workers {
	tird *d;
	pthread_mutex_t mu;
	pthread_cond_t avail;      /* a batch became pending */
	pthread_cond_t changed;    /* a batch was measured (tuning threads wait) */
	worker *list;
	batch *queue;
	int64_t next_batch;
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
	while (ws->list) {
		worker *w = ws->list;
		ws->list = w->next;
		free(w);
	}
	pthread_cond_destroy(&ws->avail);
	pthread_cond_destroy(&ws->changed);
	pthread_mutex_destroy(&ws->mu);
	free(ws);
}

static void set_batch_state(workers *ws, batch *b, batch_state to, const char *why)
{
	log_debug("batch %lld (job %lld): %s -> %s%s%s", (long long)b->id, (long long)b->job_id,
		  batch_state_names[b->state], batch_state_names[to], why ? ": " : "",
		  why ? why : "");
	b->state = to;
	if (to == B_PENDING) {
		b->worker[0] = '\0';
		pthread_cond_broadcast(&ws->avail);
	}
	pthread_cond_broadcast(&ws->changed);
}

static worker *do_find_worker(workers *ws, const char *id)
{
	for (worker *w = ws->list; w; w = w->next)
		if (!strcmp(w->id, id))
			return w;
	return NULL;
}

static batch *do_find_batch(workers *ws, int64_t id)
{
	for (batch *b = ws->queue; b; b = b->next)
		if (b->id == id)
			return b;
	return NULL;
}

/* The worker lost its lease: its batch goes back to the queue. */
static void do_requeue_of(workers *ws, worker *w, const char *why)
{
	for (batch *b = ws->queue; b; b = b->next)
		if (b->state == B_LEASED && !strcmp(b->worker, w->id)) {
			log_warn("batch %lld of job %lld re-queued: worker %s %s", (long long)b->id,
				 (long long)b->job_id, w->id, why);
			set_batch_state(ws, b, B_PENDING, why);
			atomic_fetch_add(&ws->d->metrics.batches_requeued, 1);
		}
	w->batch_id = 0;
}

static void do_worker_gone(workers *ws, worker *w, const char *why)
{
	w->live = false;
	log_warn("worker %s (%s, %s) %s", w->id, w->name, w->target, why);
	store_error err;
	if (store_worker_put(ws->d->db, w->id, w->target, w->name, "gone", w->registered,
			     w->last_seen, &err))
		log_warn("worker %s: %s", w->id, err.msg);
	do_requeue_of(ws, w, why);
}

void workers_cron(workers *ws)
{
	double now = store_now();
	long lease = ws->d->cfg.lease_s;
	pthread_mutex_lock(&ws->mu);
	for (worker **p = &ws->list; *p;) {
		worker *w = *p;
		if (w->live && !w->polling && now - w->last_seen > (double)lease)
			do_worker_gone(ws, w, "went silent");
		if (!w->live && !w->polling && now - w->last_seen > 600) {
			*p = w->next;
			free(w);
			continue;
		}
		p = &w->next;
	}
	/* a lease past its deadline without heartbeats from its worker */
	for (batch *b = ws->queue; b; b = b->next)
		if (b->state == B_LEASED && now > b->deadline) {
			worker *w = do_find_worker(ws, b->worker);
			log_warn("batch %lld of job %lld re-queued: its lease expired",
				 (long long)b->id, (long long)b->job_id);
			if (w)
				w->batch_id = 0;
			set_batch_state(ws, b, B_PENDING, "lease expired");
			atomic_fetch_add(&ws->d->metrics.batches_requeued, 1);
		}
	pthread_mutex_unlock(&ws->mu);
}

void workers_wake(workers *ws)
{
	pthread_mutex_lock(&ws->mu);
	pthread_cond_broadcast(&ws->avail);
	pthread_cond_broadcast(&ws->changed);
	pthread_mutex_unlock(&ws->mu);
}

static bool do_has_worker(workers *ws, const char *target)
{
	for (worker *w = ws->list; w; w = w->next)
		if (w->live && !strcmp(w->target, target))
			return true;
	return false;
}

bool workers_serve(workers *ws, const char *target)
{
	pthread_mutex_lock(&ws->mu);
	bool yes = do_has_worker(ws, target);
	pthread_mutex_unlock(&ws->mu);
	return yes;
}

bool workers_find_kind(workers *ws, const char *kind, char *key, size_t n)
{
	size_t kl = strlen(kind);
	bool found = false;
	pthread_mutex_lock(&ws->mu);
	for (worker *w = ws->list; w && !found; w = w->next)
		if (w->live && !strncmp(w->target, kind, kl) && w->target[kl] == ':') {
			snprintf(key, n, "%s", w->target);
			found = true;
		}
	pthread_mutex_unlock(&ws->mu);
	return found;
}

int workers_live(workers *ws)
{
	int n = 0;
	pthread_mutex_lock(&ws->mu);
	for (worker *w = ws->list; w; w = w->next)
		n += w->live;
	pthread_mutex_unlock(&ws->mu);
	return n;
}

int workers_queue_depth(workers *ws)
{
	int n = 0;
	pthread_mutex_lock(&ws->mu);
	for (batch *b = ws->queue; b; b = b->next)
		n += b->state == B_PENDING;
	pthread_mutex_unlock(&ws->mu);
	return n;
}

/* ---- the dispatcher (a tir_measure_batch_fn) ------------------------------------------ */

static void do_unlink(workers *ws, batch *b)
{
	for (batch **p = &ws->queue; *p; p = &(*p)->next)
		if (*p == b) {
			*p = b->next;
			return;
		}
}

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

int workers_measure(void *ctx, const tir_workload *w, const tir_target *t, int n,
		    const char *const *traces, tir_candidate *out)
{
	measure_ctx *mc = ctx;
	tird *d = mc->d;
	workers *ws = d->workers;
	(void)w;
	mc->why[0] = '\0';
	mc->no_worker_since = 0;
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
	batch b = { .job_id = mc->job_id, .canonical = mc->canonical,
		    .workload_key = mc->workload_key, .n = n, .traces = traces, .out = out,
		    .state = B_PENDING };
	snprintf(b.target, sizeof b.target, "%s", t->key);

	pthread_mutex_lock(&ws->mu);
	b.id = ++ws->next_batch;
	b.next = ws->queue;
	ws->queue = &b;
	pthread_cond_broadcast(&ws->avail);
	log_debug("batch %lld of job %lld: %d candidates for %s", (long long)b.id,
		  (long long)b.job_id, n, b.target);
	double no_worker_since = 0;
	int rc = 0;
	while (b.state != B_MEASURED) {
		if (atomic_load(mc->cancel) || atomic_load(&d->stopping)) {
			snprintf(mc->why, sizeof mc->why, "%s",
				 atomic_load(&d->stopping) ? "tird is stopping" : "cancelled");
			rc = -1;
			break;
		}
		double now = store_now();
		if (b.state == B_PENDING && !do_has_worker(ws, b.target)) {
			if (!no_worker_since) {
				no_worker_since = now;
				log_warn("job %lld: no live worker for %s; its batch waits %.0f s",
					 (long long)b.job_id, b.target, give_up);
			} else if (now - no_worker_since > give_up) {
				snprintf(mc->why, sizeof mc->why, "no live worker for target %.100s "
					 "for %.0f s", b.target, give_up);
				mc->no_worker_since = no_worker_since;
				rc = -1;
				break;
			}
		} else {
			no_worker_since = 0;
		}
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += 250000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&ws->changed, &ws->mu, &until);
	}
	if (rc) {
		if (b.state == B_LEASED) {
			worker *wk = do_find_worker(ws, b.worker);
			if (wk)
				wk->batch_id = 0;
		}
		set_batch_state(ws, &b, B_ERROR, mc->why);
		do_unlink(ws, &b);
		pthread_mutex_unlock(&ws->mu);
		return rc;
	}
	snprintf(mc->worker, sizeof mc->worker, "%s", b.worker);
	snprintf(mc->token, sizeof mc->token, "%s", b.token);
	snprintf(mc->host, sizeof mc->host, "%s", b.host);
	mc->compile_cache_hits = b.cache_hits;
	/* re-checked and stored before the worker that posted them is answered
	 * (workers_results waits for B_STORED; b stays queued, and on this
	 * stack, until it was answered) */
	pthread_mutex_unlock(&ws->mu);
	recheck(mc, w, t, n, out);
	int not_stored = mc->store ? mc->store(mc->store_ctx, n, out) : 0;
	pthread_mutex_lock(&ws->mu);
	b.not_stored = not_stored;
	set_batch_state(ws, &b, B_STORED, not_stored ? "some not stored" : NULL);
	while (!b.answered)
		pthread_cond_wait(&ws->changed, &ws->mu);
	do_unlink(ws, &b);
	pthread_mutex_unlock(&ws->mu);
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

static void info_of(const workers *ws, const worker *w, worker_info *out)
{
	*out = (worker_info){ 0 };
	memcpy(out->id, w->id, sizeof out->id);
	memcpy(out->target, w->target, sizeof out->target);
	memcpy(out->name, w->name, sizeof out->name);
	out->live = w->live;
	out->registered = w->registered;
	out->last_seen = w->last_seen;
	out->batch_id = w->batch_id;
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
	worker *w = tird_xcalloc(1, sizeof *w);
	random_id(w->id, sizeof w->id);
	snprintf(w->target, sizeof w->target, "%s", t->key);
	snprintf(w->name, sizeof w->name, "%s", name ? name : "unnamed");
	snprintf(w->token, sizeof w->token, "%s", tok ? tok->name : "");
	snprintf(w->peer, sizeof w->peer, "%s", peer ? peer : "");
	if (t->emulated)
		snprintf(w->emulator, sizeof w->emulator, "%s", t->emulator[0] ? t->emulator
										: "an unnamed emulator");
	w->registered = w->last_seen = store_now();
	w->live = true;
	store_error err;
	if (store_target_put(d->db, t->key, t->kind == TIR_TARGET_CUDA ? "cuda" : "cpu", &err) ||
	    store_worker_put(d->db, w->id, w->target, w->name, "live", w->registered,
			     w->last_seen, &err)) {
		free(w);
		return tird_store_fail(e, &err, "registering a worker");
	}
	pthread_mutex_lock(&ws->mu);
	w->next = ws->list;
	ws->list = w;
	info_of(ws, w, out);
	pthread_cond_broadcast(&ws->changed);
	pthread_mutex_unlock(&ws->mu);
	log_info("worker %s registered (%s, %s, token %s, from %s%s%s)", out->id, out->name,
		 out->target, out->token[0] ? out->token : "none", out->peer,
		 out->emulator[0] ? "; emulated by " : "", out->emulator);
	return 0;
}

/* Whether tok is the token worker w registered with (ws->mu held); else
 * fills e (FORBIDDEN). */
static bool do_same_token(const worker *w, const tird_token *tok, tird_error *e)
{
	const char *name = tok ? tok->name : "";
	if (!strcmp(w->token, name))
		return true;
	tird_fail(e, TIRD_E_FORBIDDEN, "worker %s was registered with token %s, not %s: only "
		  "that token may act for it", w->id, w->token[0] ? w->token : "(none)",
		  name[0] ? name : "(none)");
	return false;
}

/* The live worker id (ws->mu held), or NULL with e (UNKNOWN_WORKER, or
 * FORBIDDEN for another token). */
static worker *do_live_worker(workers *ws, const char *id, const tird_token *tok,
			      tird_error *e)
{
	worker *w = do_find_worker(ws, id);
	if (!w || !w->live) {
		tird_fail(e, TIRD_E_UNKNOWN_WORKER, "no live worker %s; register again", id);
		return NULL;
	}
	return do_same_token(w, tok, e) ? w : NULL;
}

int workers_lease(workers *ws, const char *id, const tird_token *tok, double wait_s,
		  void (*fn)(void *ctx, const worker_batch *b), void *ctx, tird_error *e)
{
	tird *d = ws->d;
	if (!(wait_s >= 0))
		wait_s = 0;
	if (wait_s > 30)
		wait_s = 30;
	double until = store_now() + wait_s;
	pthread_mutex_lock(&ws->mu);
	worker *w = do_live_worker(ws, id, tok, e);
	if (!w) {
		pthread_mutex_unlock(&ws->mu);
		return -1;
	}
	w->polling++;
	batch *found = NULL;
	for (;;) {
		double now = store_now();
		w->last_seen = now;
		for (batch *b = ws->queue; b && !found; b = b->next)
			if (b->state == B_PENDING && !strcmp(b->target, w->target))
				found = b;
		if (found || now >= until || atomic_load(&d->stopping) || !w->live)
			break;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 500000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&ws->avail, &ws->mu, &ts);
	}
	w->polling--;
	w->last_seen = store_now();
	if (!found) {
		pthread_mutex_unlock(&ws->mu);
		return 0;
	}
	snprintf(found->worker, sizeof found->worker, "%s", w->id);
	found->deadline = store_now() + (double)d->cfg.lease_s;
	w->batch_id = found->id;
	set_batch_state(ws, found, B_LEASED, w->id);
	log_info("batch %lld of job %lld (%d candidates) leased to %s", (long long)found->id,
		 (long long)found->job_id, found->n, w->id);
	worker_batch wb = { found->id, found->job_id, found->workload_key, found->canonical,
			    found->target, found->n, found->traces };
	fn(ctx, &wb);
	pthread_mutex_unlock(&ws->mu);
	return 1;
}

int workers_results(workers *ws, const char *id, const tird_token *tok, int64_t batch_id,
		    int n, const tir_candidate *res, int cache_hits, tird_error *e)
{
	pthread_mutex_lock(&ws->mu);
	worker *w = do_find_worker(ws, id);
	batch *b = do_find_batch(ws, batch_id);
	int rc = -1;
	if (!w || !w->live) {
		tird_fail(e, TIRD_E_FORBIDDEN, "worker %s is not registered (or is gone): only the "
			  "worker that holds batch %lld's lease may post its results", id,
			  (long long)batch_id);
		goto out;
	}
	if (!do_same_token(w, tok, e))
		goto out;
	w->last_seen = store_now();
	/* the worker's own lease only: a batch re-queued or leased to another
	 * is no longer this worker's to answer */
	if (!b || b->state != B_LEASED || strcmp(b->worker, id) != 0) {
		tird_fail(e, TIRD_E_LEASE_LOST, "batch %lld is not leased to %s (any more)",
			  (long long)batch_id, id);
		goto out;
	}
	if (strcmp(b->target, w->target) != 0) {
		tird_fail(e, TIRD_E_FORBIDDEN, "batch %lld is for %s, worker %s measures %s",
			  (long long)batch_id, b->target, id, w->target);
		goto out;
	}
	if (n != b->n) {
		tird_fail(e, TIRD_E_BAD_REQUEST, "batch %lld has %d candidates, not %d",
			  (long long)b->id, b->n, n);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		tir_candidate *c = &b->out[i];
		c->status = res[i].status;
		c->latency_us = res[i].latency_us;
		c->max_rel_error = res[i].max_rel_error;
		free((char *)c->msg);
		c->msg = NULL;
		if (c->status == TIR_MEASURE_OK && !(c->latency_us > 0)) {
			c->status = TIR_MEASURE_RUN_ERROR;
			c->msg = tird_strdup("worker reported ok without a latency");
		} else {
			c->msg = tird_strdup(res[i].msg);
		}
	}
	snprintf(b->token, sizeof b->token, "%s", w->token);
	snprintf(b->host, sizeof b->host, "%s (%s)", w->name, w->peer);
	b->cache_hits = cache_hits;
	atomic_fetch_add(&ws->d->metrics.compile_cache_hits, (unsigned long)cache_hits);
	w->batch_id = 0;
	set_batch_state(ws, b, B_MEASURED, id);
	/* answered once they are stored: the tuning thread re-checks and
	 * stores them (workers_measure), and keeps b until b->answered */
	while (b->state == B_MEASURED)
		pthread_cond_wait(&ws->changed, &ws->mu);
	if (b->not_stored) {
		tird_fail(e, TIRD_E_STORE, "batch %lld: %d of its %d results could not be stored "
			  "(see tird's log); they count as not measured", (long long)b->id,
			  b->not_stored, n);
	} else {
		rc = 0;
	}
	b->answered = true;
	pthread_cond_broadcast(&ws->changed);
out:
	pthread_mutex_unlock(&ws->mu);
	return rc;
}

int workers_heartbeat(workers *ws, const char *id, const tird_token *tok, tird_error *e)
{
	pthread_mutex_lock(&ws->mu);
	worker *w = do_live_worker(ws, id, tok, e);
	if (w) {
		double now = store_now();
		w->last_seen = now;
		for (batch *b = ws->queue; b; b = b->next)
			if (b->state == B_LEASED && !strcmp(b->worker, w->id))
				b->deadline = now + (double)ws->d->cfg.lease_s;
	}
	pthread_mutex_unlock(&ws->mu);
	return w ? 0 : -1;
}

int workers_leave(workers *ws, const char *id, const tird_token *tok, tird_error *e)
{
	pthread_mutex_lock(&ws->mu);
	worker *w = do_live_worker(ws, id, tok, e);
	if (w)
		do_worker_gone(ws, w, "left");
	pthread_mutex_unlock(&ws->mu);
	return w ? 0 : -1;
}

int workers_list(workers *ws, worker_info **out)
{
	pthread_mutex_lock(&ws->mu);
	int n = 0;
	for (worker *w = ws->list; w; w = w->next)
		n++;
	*out = tird_xcalloc((size_t)(n ? n : 1), sizeof **out);
	int i = 0;
	for (worker *w = ws->list; w; w = w->next, i++) {
		info_of(ws, w, &(*out)[i]);
		batch *b = w->batch_id ? do_find_batch(ws, w->batch_id) : NULL;
		(*out)[i].job_id = b ? b->job_id : 0;
	}
	pthread_mutex_unlock(&ws->mu);
	return n;
}
