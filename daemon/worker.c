/*
 * worker.c — tird-worker: measures candidates for a tird.
 *
 *   tird-worker --server URL --target TARGET [--token TOKEN] [--name NAME] [--cc CC]
 *   tird-worker --target cpu --print-target
 *
 * The loop, top to bottom: resolve the target on this machine (a bare "cuda"
 * asks the driver in a child process: this process never initialises CUDA,
 * so the runner's forked children can); register; then, in each slot (a
 * thread; --slots, 2 on a GPU, 1 on a CPU), lease a batch (a long poll),
 * measure each candidate (replay its trace, validate, generate code, build,
 * run in a child process, check against the reference, time), post the
 * results, and again.  Two slots on a GPU: one batch's builders compile
 * while the slowest compiles of the other finish, and the runs take turns
 * on the device (cuda_device_turn).  A heartbeat thread keeps the leases
 * while batches are measured; the main thread registers.  When tird forgets the worker (404: it restarted, or thought the
 * worker dead) the worker registers again.  SIGTERM / SIGINT: leave (tird
 * re-queues a batch in flight) and exit 0.
 *
 * A bare "cpu" is this machine's CPU as its hardware says (target.c: on
 * AArch64 the kernel's hwcaps, "cpu:aarch64+neon+dotprod+..."); under an
 * emulator (qemu-user) the key ends in "+emulated" and the registration
 * names the emulator, so that tird keeps what it measures apart from the
 * real hardware's.  Candidates are compiled by --cc (else $CC, else the
 * compiler tird-worker was configured with: cc for a cross build); under
 * qemu that is the host's cross compiler, an x86 program the emulated
 * worker starts natively (qemu-user passes execve to the host kernel).
 *
 * Exit status: 0 after a signal (or --print-target), 2 on a bad command line
 * or target.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>
#include <curl/curl.h>
#include <cJSON.h>
#include "tir.h"
#include "client/request.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "unknown"
#endif
#ifndef TIR_SYSTEM_CC
#define TIR_SYSTEM_CC "cc"
#endif

/* The only global: what the signal handler sets.  Atomic, not volatile
 * sig_atomic_t: the heartbeat thread reads it too (volatile orders nothing
 * between threads: ThreadSanitizer reported the handler's write racing with
 * its read); a lock-free atomic_int is async-signal-safe. */
static atomic_int stop_requested;
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "the signal handler sets an atomic_int");

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

typedef struct wk {
	const char *server, *token, *target_arg;
	char name[128];
	tir_target target;
	pthread_mutex_t mu;        /* guards id, need_register, heartbeat_s */
	char id[64];
	bool need_register;
	double heartbeat_s;
	int slots;                 /* batches measured at once (--slots) */
	/* the main thread's: when it last registered; how long it waits
	 * before registering again after tird forgot it soon (register_loop;
	 * reset under mu by a slot's lease poll answered) */
	double registered_at, forgot_wait_s;
} wk;

#define MAX_SLOTS 8

/* A slot: a thread that leases a batch, measures it and posts the results,
 * and again.  Its cache (tir_measure_cache_new) is its own. */
typedef struct slot {
	wk *w;
	int k;
	void *cache;
	pthread_t th;
} slot;

static void wlog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void wlog(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	fprintf(stderr, "tird-worker[%d]: %s\n", (int)getpid(), line);
}

/* ---- HTTP ------------------------------------------------------------------------ */

static int stop_now(void)
{
	return stop_requested;     /* abort a long poll at once on SIGTERM */
}

/* One request; returns the HTTP status (0 when tird could not be reached)
 * and the body in *resp (malloc'd, may be NULL). */
static long request(const wk *w, const char *method, const char *path, const char *body,
		    double timeout_s, bool abortable, char **resp)
{
	client_req rq = { w->server, w->token, method, path, body, timeout_s,
			  abortable ? stop_now : NULL };
	char err[512];
	return client_request(&rq, resp, NULL, err, sizeof err);
}

static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void nap(double s)
{
	for (double t = 0; t < s && !stop_requested; t += 0.1) {
		struct timespec ts = { 0, 100000000L };
		nanosleep(&ts, NULL);
	}
}

/* ---- registration and heartbeats ---------------------------------------------------- */

static bool register_once(wk *w)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "target", w->target.key);
	cJSON_AddStringToObject(o, "name", w->name);
	if (w->target.emulated) {
		cJSON_AddBoolToObject(o, "emulated", true);
		cJSON_AddStringToObject(o, "emulator", w->target.emulator);
	}
	char *body = cJSON_PrintUnformatted(o), *resp = NULL;
	cJSON_Delete(o);
	long st = request(w, "POST", "/v1/workers", body, 10, true, &resp);
	free(body);
	cJSON *r = resp ? cJSON_Parse(resp) : NULL;
	bool ok = false;
	if (st == 201 && r) {
		const cJSON *id = cJSON_GetObjectItem(r, "worker_id");
		const cJSON *hb = cJSON_GetObjectItem(r, "heartbeat_s");
		if (cJSON_IsString(id)) {
			pthread_mutex_lock(&w->mu);
			snprintf(w->id, sizeof w->id, "%s", id->valuestring);
			w->heartbeat_s = cJSON_IsNumber(hb) && hb->valuedouble > 0 ? hb->valuedouble : 3;
			w->need_register = false;
			pthread_mutex_unlock(&w->mu);
			wlog("registered with %s as %s (%s%s%s)", w->server, w->id, w->target.key,
			     w->target.emulated ? ", emulated by " : "", w->target.emulator);
			ok = true;
		}
	} else if (st) {
		wlog("registering with %s: HTTP %ld %s", w->server, st, resp ? resp : "");
		if (st == 400 || st == 401 || st == 403) {
			cJSON_Delete(r);
			free(resp);
			exit(2);           /* will not get better by retrying */
		}
	}
	cJSON_Delete(r);
	free(resp);
	return ok;
}

/* A registration forgotten sooner than this was not tird restarting or
 * thinking the worker dead: another tird answered that does not share its
 * database (replicas of one database share the worker registry). */
#define FORGOT_SOON_S 10.0
#define FORGOT_WAIT_MAX_S 30.0

/* Registers, retrying with a backoff while tird cannot be reached.  Called
 * by the main thread only.  When tird forgot the worker less than
 * FORGOT_SOON_S after it registered, it first waits forgot_wait_s, doubled
 * each time up to FORGOT_WAIT_MAX_S and reset by a lease poll answered
 * (slot_main), so that a worker behind such a balancer never registers in a
 * tight loop (it did: 34,000 registrations in 30 s). */
static void register_loop(wk *w)
{
	double since = mono_s() - w->registered_at;
	if (w->registered_at > 0 && since < FORGOT_SOON_S) {
		pthread_mutex_lock(&w->mu);
		if (w->forgot_wait_s <= 0)
			w->forgot_wait_s = 1;
		double wait_s = w->forgot_wait_s;
		w->forgot_wait_s = wait_s * 2 < FORGOT_WAIT_MAX_S ? wait_s * 2 : FORGOT_WAIT_MAX_S;
		pthread_mutex_unlock(&w->mu);
		wlog("tird forgot this worker %.1f s after it registered: is a load balancer "
		     "sending its requests to tirds that do not share one database? (point "
		     "the worker at one replica, or the replicas at one database); "
		     "registering again in %.0f s", since, wait_s);
		nap(wait_s);
	}
	double backoff = 0.2;
	while (!stop_requested && !register_once(w)) {
		nap(backoff);
		if (backoff < 5)
			backoff *= 2;
	}
	w->registered_at = mono_s();
}

static void *heartbeat_thread(void *arg)
{
	wk *w = arg;
	while (!stop_requested) {
		pthread_mutex_lock(&w->mu);
		double every = w->heartbeat_s > 0 ? w->heartbeat_s : 3;
		char path[128];
		snprintf(path, sizeof path, "/v1/workers/%s/heartbeat", w->id);
		bool skip = w->need_register || !w->id[0];
		pthread_mutex_unlock(&w->mu);
		if (!skip && request(w, "POST", path, NULL, 5, true, NULL) == 404) {
			pthread_mutex_lock(&w->mu);
			w->need_register = true;
			pthread_mutex_unlock(&w->mu);
		}
		nap(every);
	}
	return NULL;
}

/* ---- measuring one batch -------------------------------------------------------------- */

static void result(cJSON *arr, tir_measure_status st, double us, double err, const char *msg)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "status", tir_measure_status_name(st));
	if (st == TIR_MEASURE_OK)
		cJSON_AddNumberToObject(o, "latency_us", us);
	if (err >= 0)
		cJSON_AddNumberToObject(o, "max_rel_error", err > 1e300 ? 1e300 : err);
	if (msg && *msg)
		cJSON_AddStringToObject(o, "message", msg);
	cJSON_AddItemToArray(arr, o);
}

/* Measures every trace of the batch with tir_measure_local (builds in
 * parallel, runs one at a time in child processes; the reference of the
 * last workload kept in the slot's cache); returns the results, and in ph
 * where the time went. */
static cJSON *measure_batch(slot *sl, const cJSON *batch, tir_measure_phases *ph)
{
	wk *w = sl->w;
	cJSON *out = cJSON_CreateArray();
	memset(ph, 0, sizeof *ph);
	const cJSON *wj = cJSON_GetObjectItem(batch, "workload");
	const cJSON *traces = cJSON_GetObjectItem(batch, "traces");
	int n = cJSON_GetArraySize(traces);
	char *text = cJSON_PrintUnformatted(wj);
	tir_error err = { "" };
	tir_workload *wl = text ? tir_workload_parse(text, strlen(text), NULL, &err) : NULL;
	free(text);
	if (!wl) {
		for (int i = 0; i < n; i++)
			result(out, TIR_MEASURE_BUILD_ERROR, 0, -1, err.msg);
		return out;
	}
	const char **tr = calloc((size_t)n + 1, sizeof *tr);
	tir_candidate *c = calloc((size_t)n + 1, sizeof *c);
	if (!tr || !c)
		abort();
	int i = 0;
	const cJSON *t;
	cJSON_ArrayForEach(t, traces)
		tr[i++] = cJSON_IsString(t) ? t->valuestring : "{}";
	for (i = 0; i < n; i++)
		c[i] = (tir_candidate){ tr[i], TIR_MEASURE_RUN_ERROR, 0, -1, NULL };
	if (!sl->cache)
		sl->cache = tir_measure_cache_new();
	tir_measure_local(sl->cache, wl, &w->target, n, tr, c);
	tir_measure_cache_phases(sl->cache, ph);
	for (i = 0; i < n; i++) {
		result(out, (tir_measure_status)c[i].status, c[i].latency_us,
		       c[i].max_rel_error, c[i].msg);
		free((char *)c[i].msg);
	}
	free(c);
	free(tr);
	tir_workload_free(wl);
	return out;
}

/* ---- the slots ------------------------------------------------------------------------ */

/* A slot's loop: lease a batch (a long poll), measure it, post the
 * results, until a signal.  Registering is the main thread's. */
static void *slot_main(void *arg)
{
	slot *sl = arg;
	wk *w = sl->w;
	double backoff = 0.2;
	while (!stop_requested) {
		pthread_mutex_lock(&w->mu);
		bool again = w->need_register || !w->id[0];
		char path[160];
		snprintf(path, sizeof path, "/v1/workers/%s/lease?wait=20", w->id);
		pthread_mutex_unlock(&w->mu);
		if (again) {               /* the main thread registers */
			nap(0.2);
			continue;
		}
		char *resp = NULL;
		long st = request(w, "POST", path, NULL, 40, true, &resp);
		if (st == 200 || st == 204) {   /* this tird knows the worker */
			pthread_mutex_lock(&w->mu);
			w->forgot_wait_s = 0;
			pthread_mutex_unlock(&w->mu);
		}
		if (st == 200) {
			backoff = 0.2;
			cJSON *batch = resp ? cJSON_Parse(resp) : NULL;
			const cJSON *bid = cJSON_GetObjectItem(batch, "batch_id");
			if (batch && cJSON_IsNumber(bid)) {
				int n = cJSON_GetArraySize(cJSON_GetObjectItem(batch, "traces"));
				struct timespec t0, t1;
				clock_gettime(CLOCK_MONOTONIC, &t0);
				tir_measure_phases ph;
				cJSON *res = measure_batch(sl, batch, &ph);
				clock_gettime(CLOCK_MONOTONIC, &t1);
				wlog("batch %.0f: %d candidates measured in %.2f s (slot %d): %d built in %.2f s "
				     "(code %.2f s), reference %.2f s, runs done %.2f s after the builds "
				     "(%d processes; candidates %.2f s, of which timing %.2f s%s); "
				     "compile cache: %d hits (%ld in all)",
				     bid->valuedouble, n,
				     (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9, sl->k,
				     ph.built, ph.build_s, ph.generate_s, ph.reference_s, ph.run_s,
				     ph.processes, ph.candidates_s, ph.timing_s,
				     ph.by_profiler ? ", by the profiler" : "", ph.cache_hits,
				     ph.cache_hits_total);
				if (!stop_requested) {
					cJSON *o = cJSON_CreateObject();
					cJSON_AddNumberToObject(o, "batch_id", bid->valuedouble);
					cJSON_AddItemToObject(o, "results", res);
					cJSON_AddNumberToObject(o, "compile_cache_hits", ph.cache_hits);
					char *body = cJSON_PrintUnformatted(o);
					char rpath[160];
					pthread_mutex_lock(&w->mu);
					snprintf(rpath, sizeof rpath, "/v1/workers/%s/results", w->id);
					pthread_mutex_unlock(&w->mu);
					long pst = request(w, "POST", rpath, body, 30, false, NULL);
					if (pst == 200)
						wlog("batch %.0f: %d results taken", bid->valuedouble, n);
					else
						wlog("batch %.0f: results not taken (HTTP %ld)",
						     bid->valuedouble, pst);
					free(body);
					cJSON_Delete(o);
				} else {
					cJSON_Delete(res);
				}
			}
			cJSON_Delete(batch);
		} else if (st == 404) {
			pthread_mutex_lock(&w->mu);
			w->need_register = true;
			pthread_mutex_unlock(&w->mu);
		} else if (st != 204 && !stop_requested) {
			if (st == 0)
				wlog("cannot reach %s; retrying", w->server);
			else
				wlog("lease: HTTP %ld %s", st, resp ? resp : "");
			nap(backoff);
			if (backoff < 5)
				backoff *= 2;
		}
		free(resp);
	}
	return NULL;
}

/* ---- main ---------------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f, "usage: tird-worker --server URL --target TARGET [--token TOKEN] "
		   "[--name NAME] [--cc CC] [--slots N]\n"
		   "       tird-worker --target TARGET --print-target\n"
		   "       tird-worker --help | --version\n"
		   "  --server   the tird to measure for (default $TIRD_URL, else "
		   "http://127.0.0.1:8642)\n"
		   "  --target   cpu (this machine's, detected: cpu:aarch64+neon+dotprod..., "
		   "+emulated under qemu), cuda (this machine's first GPU: "
		   "cuda:sm_90+h200...), or a full key (cpu:x86_64+avx2+fma, "
		   "cuda:sm_90, which must be this GPU's)\n"
		   "  --token    bearer token (default $TIRD_TOKEN)\n"
		   "  --name     shown by `tirctl workers` (default host:pid)\n"
		   "  --cc       the C compiler that builds CPU candidates (default $CC, "
		   "else %s)\n"
		   "  --slots    batches measured at once, 1-%d (default: 2 for cuda, whose "
		   "builders then compile the next batch while the slowest compiles of one "
		   "finish, the GPU runs taken in turns; 1 for cpu, whose cores also time)\n"
		   "  --print-target  print the full key TARGET resolves to, and exit\n"
		   "  --help     print this and exit\n"
		   "  --version  print the version and exit\n",
		TIR_SYSTEM_CC, MAX_SLOTS);
}

int main(int argc, char **argv)
{
	wk w = { .server = getenv("TIRD_URL"), .token = getenv("TIRD_TOKEN") };
	pthread_mutex_init(&w.mu, NULL);
	const char *name = NULL, *cc = NULL;
	bool print_target = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--version")) {
			printf("tird-worker %s\n", PACKAGE_VERSION);
			return 0;
		} else if (v && !strcmp(a, "--server")) {
			w.server = v, i++;
		} else if (v && !strcmp(a, "--target")) {
			w.target_arg = v, i++;
		} else if (v && !strcmp(a, "--token")) {
			w.token = v, i++;
		} else if (v && !strcmp(a, "--name")) {
			name = v, i++;
		} else if (v && !strcmp(a, "--cc")) {
			cc = v, i++;
		} else if (v && !strcmp(a, "--slots")) {
			char *end;
			long k = strtol(v, &end, 10);
			if (*end || end == v || k < 1 || k > MAX_SLOTS) {
				fprintf(stderr, "tird-worker: --slots: '%s' is not a number from 1 to %d\n",
					v, MAX_SLOTS);
				return 2;
			}
			w.slots = (int)k;
			i++;
		} else if (!strcmp(a, "--print-target")) {
			print_target = true;
		} else {
			fprintf(stderr, "tird-worker: bad argument '%s'\n", a);
			usage(stderr);
			return 2;
		}
	}
	if (!w.server || !*w.server)
		w.server = "http://127.0.0.1:8642";
	if (!w.target_arg) {
		fprintf(stderr, "tird-worker: --target is required\n");
		usage(stderr);
		return 2;
	}
	tir_error err = { "" };
	int rc = !strcmp(w.target_arg, "cuda") ? tir_cuda_device_props(0, &w.target, &err)
					      : tir_target_parse(w.target_arg, &w.target, &err);
	if (rc) {
		fprintf(stderr, "tird-worker: %s\n", err.msg);
		return 2;
	}
	/* a full CUDA key must be this GPU's: its architecture, and its part
	 * where it names one (else the GPU's part is added), so an H100 never
	 * measures for an H200's key */
	if (w.target.kind == TIR_TARGET_CUDA && strcmp(w.target_arg, "cuda")) {
		tir_target dev;
		if (tir_cuda_device_props(0, &dev, &err)) {
			fprintf(stderr, "tird-worker: %s: %s\n", w.target_arg, err.msg);
			return 2;
		}
		size_t arch = strcspn(w.target.key, "+");
		bool parted = w.target.key[arch] == '+';
		if (dev.sm != w.target.sm ||
		    (parted && strcmp(dev.key, w.target.key))) {
			fprintf(stderr, "tird-worker: --target %s: this machine's GPU is %s\n",
				w.target_arg, dev.key);
			return 2;
		}
		if (!parted && strcmp(dev.key, w.target.key))
			fprintf(stderr, "tird-worker: measuring for %s, the key of this GPU\n",
				dev.key);
		w.target = dev;
	}
	/* a full CPU key given under an emulator measures no more the hardware
	 * than a detected one */
	char emu[64];
	if (w.target.kind == TIR_TARGET_CPU && !w.target.emulated &&
	    tir_cpu_emulated(emu, sizeof emu)) {
		char key[sizeof w.target.key + 16];
		snprintf(key, sizeof key, "%s+emulated", w.target.key);
		rc = tir_target_parse(key, &w.target, &err);
		snprintf(w.target.emulator, sizeof w.target.emulator, "%s", emu);
		fprintf(stderr, "tird-worker: running under %s: measuring for %s\n", emu, key);
	}
	if (rc) {
		fprintf(stderr, "tird-worker: %s\n", err.msg);
		return 2;
	}
	/* a GPU's two slots: while the slowest compiles of one batch finish,
	 * the builders of the next use the idle cores (the GPU runs take
	 * turns, cuda_device_turn); a CPU's cores build and time both, and
	 * one batch's builds beside another's timings would disturb them */
	if (!w.slots)
		w.slots = w.target.kind == TIR_TARGET_CUDA ? 2 : 1;
	if (print_target) {
		printf("%s\n", w.target.key);
		if (w.target.emulated)
			fprintf(stderr, "tird-worker: emulated by %s\n", w.target.emulator);
		return 0;
	}
	/* the CPU builder (measure/cpu.c) runs $CC; set before any thread */
	if (cc && setenv("CC", cc, 1)) {
		fprintf(stderr, "tird-worker: --cc: cannot set CC\n");
		return 2;
	}
	char host[64] = "host";
	gethostname(host, sizeof host - 1);
	snprintf(w.name, sizeof w.name, "%s:%d%s%s", host, (int)getpid(), name ? " " : "",
		 name ? name : "");

	struct sigaction sa = { 0 };
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	curl_global_init(CURL_GLOBAL_DEFAULT);

	register_loop(&w);
	pthread_t hb;
	pthread_create(&hb, NULL, heartbeat_thread, &w);
	slot *sl = calloc((size_t)w.slots, sizeof *sl);
	if (!sl)
		abort();
	int started = 0;
	for (int k = 0; k < w.slots; k++) {
		sl[k] = (slot){ .w = &w, .k = k };
		if (pthread_create(&sl[k].th, NULL, slot_main, &sl[k])) {
			wlog("slot %d: no thread: measuring in %d slot%s", k, k, k == 1 ? "" : "s");
			break;
		}
		started++;
	}
	if (!started) {
		fprintf(stderr, "tird-worker: cannot start a measuring thread\n");
		stop_requested = 1;
	}
	while (!stop_requested) {
		pthread_mutex_lock(&w.mu);
		bool again = w.need_register;
		pthread_mutex_unlock(&w.mu);
		if (again)
			register_loop(&w);
		else
			nap(0.2);
	}
	for (int k = 0; k < started; k++)
		pthread_join(sl[k].th, NULL);
	/* leave, so that a batch in flight goes back to the queue at once */
	stop_requested = 0;        /* let this last request through */
	char path[160];
	pthread_mutex_lock(&w.mu);
	snprintf(path, sizeof path, "/v1/workers/%s", w.id);
	pthread_mutex_unlock(&w.mu);
	if (w.id[0])
		request(&w, "DELETE", path, NULL, 2, false, NULL);
	stop_requested = 1;
	pthread_join(hb, NULL);
	curl_global_cleanup();
	for (int k = 0; k < started; k++)
		tir_measure_cache_free(sl[k].cache);
	free(sl);
	wlog("stopped");
	return 0;
}
