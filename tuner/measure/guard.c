/*
 * guard.c — the child-process guards: a candidate runs in a forked child, so
 * that one that crashes, hangs or corrupts memory costs one result and
 * never its caller.  tir_child_run watches one child; tir_child_stream (and
 * tir_child_batch, which puts every item at once) watches children that
 * measure many items.
 *
 * The guard forks; the child reports through a MAP_SHARED mapping
 * (tir_child_report) that outlives it, and the parent polls waitpid against
 * a deadline and SIGKILLs the child when it passes.  How the child ended —
 * normal exit, signal, watchdog — decides the status; the parent never runs
 * candidate code.
 *
 * The batch guard (tir_child_stream; tir_child_batch puts every item at
 * once) is the same watch over a child that measures many items as they
 * are put: the mapping holds one report per item, the order they were put
 * in and the position the child is on; a guard thread restarts the deadline
 * whenever the child starts an item or waits for one, and when a child dies
 * the item it was on takes the blame and a fresh child (forked once the
 * stream is closed) continues after it.  Every child finishes an item, has
 * one blamed, or fails its setup, which settles every item left; so n items
 * fork at most n children.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include "../ir/ir.h"
#include "measure.h"

/* ---- the child-process guard --------------------------------------------------------- */

tir_child_report *tir_child_report_new(size_t out_bytes)
{
	size_t size = sizeof(tir_child_report) + out_bytes;
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		       -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	tir_child_report *rep = p;
	memset(rep, 0, sizeof *rep);
	rep->out_bytes = out_bytes;
	return rep;
}

void tir_child_report_free(tir_child_report *rep)
{
	if (rep)
		munmap(rep, sizeof(tir_child_report) + rep->out_bytes);
}

static const char *signal_name(int sig)
{
	static const struct { int sig; const char *name; } names[] = {
		{ SIGSEGV, "SIGSEGV" }, { SIGBUS, "SIGBUS" }, { SIGFPE, "SIGFPE" },
		{ SIGILL, "SIGILL" }, { SIGABRT, "SIGABRT" }, { SIGKILL, "SIGKILL" },
		{ SIGTERM, "SIGTERM" }, { SIGTRAP, "SIGTRAP" }, { SIGSYS, "SIGSYS" },
		{ SIGPIPE, "SIGPIPE" }, { SIGXCPU, "SIGXCPU" }, { SIGINT, "SIGINT" },
	};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (names[i].sig == sig)
			return names[i].name;
	return NULL;
}

/* In the child, before any candidate code: die with the parent, no core
 * files, the default action for the signals a bad candidate raises (the
 * caller may have installed handlers: Check, a daemon). */
static void child_setup(pid_t parent)
{
#ifdef __linux__
	prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
	if (getppid() != parent)
		_exit(127);
	struct rlimit no_core = { 0, 0 };
	setrlimit(RLIMIT_CORE, &no_core);
	static const int sigs[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT,
				    SIGTERM, SIGINT, SIGPIPE };
	sigset_t set;
	sigemptyset(&set);
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		signal(sigs[i], SIG_DFL);
		sigaddset(&set, sigs[i]);
	}
	sigprocmask(SIG_UNBLOCK, &set, NULL);
}

/* How a child killed by sig is reported. */
static void signal_msg(int sig, char *msg, size_t size)
{
	const char *name = signal_name(sig);
	if (sig == SIGKILL)
		snprintf(msg, size, "candidate was killed by SIGKILL (out of memory?)");
	else if (name)
		snprintf(msg, size, "candidate crashed with %s", name);
	else
		snprintf(msg, size, "candidate crashed with signal %d (%s)", sig,
			 strsignal(sig));
}

/* Waits for child pid, polling waitpid against a deadline timeout_s after
 * the start, restarted whenever *progress (NULL: never) changes; past it
 * the child is SIGKILLed and reaped.  Fills *st; returns 0 when the child
 * ended, 1 when the watchdog killed it, -1 with errno when waitpid failed
 * (the child is killed). */
static int watch_child(pid_t pid, double timeout_s, atomic_int *progress, int *st)
{
	double start = tir_now_s();
	int seen = progress ? atomic_load(progress) : 0;
	double nap = 50e-6;
	for (;;) {
		pid_t w = waitpid(pid, st, WNOHANG);
		if (w == pid)
			return 0;
		if (w < 0 && errno != EINTR) {
			int e = errno;
			kill(pid, SIGKILL);
			errno = e;
			return -1;
		}
		if (progress && atomic_load(progress) != seen) {
			seen = atomic_load(progress);
			start = tir_now_s();
		}
		double left = start + timeout_s - tir_now_s();
		if (left <= 0) {
			kill(pid, SIGKILL);
			while (waitpid(pid, st, 0) < 0 && errno == EINTR)
				;
			return 1;
		}
		double d = nap < left ? nap : left;
		struct timespec ts = { (time_t)d, (long)((d - (double)(time_t)d) * 1e9) };
		nanosleep(&ts, NULL);
		if (nap < 2e-3)
			nap *= 2;
	}
}

int tir_child_run(double timeout_s, void (*fn)(void *ctx, tir_child_report *rep),
		  void *ctx, tir_child_report *rep, tir_measure_result *r)
{
	rep->status = TIR_MEASURE_RUN_ERROR;
	snprintf(rep->msg, sizeof rep->msg, "the measuring process ended without a report");
	fflush(stdout);
	fflush(stderr);
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		r->status = TIR_MEASURE_RUN_ERROR;
		snprintf(r->msg, sizeof r->msg, "fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		child_setup(parent);
		fn(ctx, rep);
		_exit(0);
	}

	int st = 0;
	int w = watch_child(pid, timeout_s, NULL, &st);
	if (w < 0) {
		r->status = TIR_MEASURE_RUN_ERROR;
		snprintf(r->msg, sizeof r->msg, "waitpid: %s", strerror(errno));
		return -1;
	}
	if (w == 1) {
		r->status = TIR_MEASURE_TIMEOUT;
		snprintf(r->msg, sizeof r->msg, "timed out after %g s", timeout_s);
		return -1;
	}
	if (WIFSIGNALED(st)) {
		r->status = TIR_MEASURE_CRASH;
		signal_msg(WTERMSIG(st), r->msg, sizeof r->msg);
		return -1;
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) != 0) {
		r->status = TIR_MEASURE_RUN_ERROR;
		snprintf(r->msg, sizeof r->msg, "the measuring process exited with "
			 "status %d", WEXITSTATUS(st));
		return -1;
	}
	r->status = (tir_measure_status)rep->status;
	if ((int)r->status < 0 || r->status >= TIR_MEASURE_NSTATUSES)
		r->status = TIR_MEASURE_RUN_ERROR;
	rep->msg[sizeof rep->msg - 1] = '\0';
	snprintf(r->msg, sizeof r->msg, "%s", r->status == TIR_MEASURE_OK ? "" : rep->msg);
	return r->status == TIR_MEASURE_OK ? 0 : -1;
}

int tir_child_measure(const tir_code *c, double timeout_s,
		      void (*fn)(void *ctx, tir_child_report *rep), void *ctx,
		      tir_measure_result *r)
{
	size_t out_bytes = tir_code_output_bytes(c);
	tir_child_report *rep = tir_child_report_new(out_bytes);
	if (!rep) {
		r->status = TIR_MEASURE_RUN_ERROR;
		snprintf(r->msg, sizeof r->msg, "cannot map %zu bytes for the outputs",
			 out_bytes);
		return -1;
	}
	int rc = tir_child_run(timeout_s, fn, ctx, rep, r);
	if (rc == 0)
		tir_child_collect(rep, c, r);
	tir_child_report_free(rep);
	return rc;
}

void tir_child_collect(const tir_child_report *rep, const tir_code *c,
		       tir_measure_result *r)
{
	r->nrepeats = rep->nrepeats;
	if (r->nrepeats < 0 || r->nrepeats > TIR_MEASURE_MAX_REPEATS)
		r->nrepeats = 0;
	memcpy(r->repeat_us, rep->repeat_us, sizeof r->repeat_us);
	r->median_us = r->latency_us = rep->median_us;
	r->timing_s = rep->timing_s;
	r->launch_us = rep->launch_us;
	r->timer = (tir_timer)rep->timer;
	free(r->output);
	r->output = NULL;
	r->out_elems = 0;
	r->noutputs = 0;
	if (!rep->output_ready || tir_code_noutputs(c) == 0 ||
	    tir_code_output_bytes(c) > rep->out_bytes)
		return;
	r->out_elems = tir_code_output_elems(c);
	r->output = xmalloc((size_t)r->out_elems * sizeof(double) + 1);
	tir_code_outputs_unpack(c, rep->out, r->output);
	for (int i = 0; i < c->nargs; i++)
		if (c->args[i].is_output && r->noutputs < TIR_MEASURE_MAX_OUTPUTS)
			r->output_elems[r->noutputs++] = c->args[i].elems;
}

/* ---- the batch guard ------------------------------------------------------------------ */

/* One item's report; the parent reads it once the child is gone. */
typedef struct batch_item {
	int done;                  /* 1 once the rest is final */
	int status;
	char msg[512];
	int nrepeats;
	double median_us;
	double repeat_us[TIR_MEASURE_MAX_REPEATS];
	double max_rel_error;
	double run_s, timing_s;    /* wall seconds: the item, its timing */
	double launch_us;
	int timer;
} batch_item;

/* The mapping every child of one stream shares with the parent.  Items
 * are measured in the order they were put: position p is item order[p]. */
typedef struct batch_shared {
	atomic_int current;        /* the position the child is on; -1 while it sets up */
	atomic_int beat;           /* moves when the child starts an item and while it
				    * waits for one: the watchdog's progress */
	atomic_int count;          /* positions put: order[0..count-1] */
	atomic_int closed;         /* 1: nothing more will be put */
	int setup_done;            /* the child's setup succeeded */
	int setup_failed;          /* setup returned -1: setup_msg says why */
	char setup_msg[512];
	int *order;                /* [n], in this mapping after items */
	batch_item items[];
} batch_shared;

typedef struct batch_fns {
	int (*setup)(void *ctx, tir_child_report *rep);
	int (*item)(void *ctx, int i, tir_child_report *rep, double *max_rel_error);
	void *ctx;
	double timeout_s;
} batch_fns;

struct tir_child_stream {
	batch_shared *sh;
	size_t size;
	int n;
	batch_fns f;
	pthread_mutex_t put_lock;  /* order[] and count, among putting threads */
	pthread_mutex_t lock;      /* closed, below */
	pthread_cond_t closed_cv;
	bool closed;
	pthread_t guard;
	bool guard_started;
	pid_t first_pid;           /* forked by start; 0: fork failed */
	int children;
	/* why the items not measured were not: set by the guard when it gave up */
	int fail_status;
	char fail_msg[512];
};

static void report_reset(tir_child_report *rep, const char *msg)
{
	memset(rep, 0, sizeof *rep);
	rep->status = TIR_MEASURE_RUN_ERROR;
	snprintf(rep->msg, sizeof rep->msg, "%s", msg);
}

/* In the child: the item at position pos once it is put, or -1 when the
 * stream is closed without it.  Waiting moves `beat`, so the watchdog
 * does not count the time. */
static int stream_wait(batch_shared *sh, int pos)
{
	double nap = 20e-6;
	for (;;) {
		int closed = atomic_load(&sh->closed);
		if (pos < atomic_load(&sh->count))
			return sh->order[pos];
		if (closed)
			return -1;
		atomic_fetch_add(&sh->beat, 1);
		struct timespec ts = { 0, (long)(nap * 1e9) };
		nanosleep(&ts, NULL);
		if (nap < 1e-3)
			nap *= 2;
	}
}

/* In the child: setup, then the items from position first on, as they
 * are put, until the stream is closed or one asks to end.  The item's
 * report is copied to the mapping only when it is complete, and `current`
 * moves only after that, so the parent never blames a finished item nor
 * reads a half-written one. */
static void batch_child(batch_shared *sh, int first, const batch_fns *f)
{
	tir_child_report rep;
	report_reset(&rep, "the measuring process's setup ended without a report");
	if (f->setup && f->setup(f->ctx, &rep)) {
		rep.msg[sizeof rep.msg - 1] = '\0';
		snprintf(sh->setup_msg, sizeof sh->setup_msg, "%s", rep.msg);
		sh->setup_failed = 1;
		return;
	}
	sh->setup_done = 1;
	for (int pos = first;; pos++) {
		int i = stream_wait(sh, pos);
		if (i < 0)
			return;
		atomic_store(&sh->current, pos);
		atomic_fetch_add(&sh->beat, 1);
		report_reset(&rep, "the candidate ended without a report");
		double err = -1, t0 = tir_now_s();
		int end = f->item(f->ctx, i, &rep, &err);
		batch_item *it = &sh->items[i];
		it->run_s = tir_now_s() - t0;
		it->timing_s = rep.timing_s;
		it->launch_us = rep.launch_us;
		it->timer = rep.timer;
		it->status = rep.status;
		rep.msg[sizeof rep.msg - 1] = '\0';
		snprintf(it->msg, sizeof it->msg, "%s", rep.msg);
		it->nrepeats = rep.nrepeats;
		it->median_us = rep.median_us;
		memcpy(it->repeat_us, rep.repeat_us, sizeof it->repeat_us);
		it->max_rel_error = err;
		it->done = 1;
		if (end)
			return;
	}
}

/* The guard gives up: every item not measured, put now or later, gets
 * this status and message (applied by tir_child_stream_finish). */
static void stream_fail(tir_child_stream *s, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void stream_fail(tir_child_stream *s, int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->fail_msg, sizeof s->fail_msg, fmt, ap);
	va_end(ap);
	s->fail_status = status;
}

/* A child died during item `it` (wait status st; watchdog: it was killed
 * for taking too long): the item takes the blame. */
static void batch_blame(batch_item *it, int watchdog, int st, double timeout_s)
{
	memset(it, 0, sizeof *it);
	it->max_rel_error = -1;
	it->done = 1;
	if (watchdog) {
		it->status = TIR_MEASURE_TIMEOUT;
		snprintf(it->msg, sizeof it->msg, "timed out after %g s", timeout_s);
	} else if (WIFSIGNALED(st)) {
		it->status = TIR_MEASURE_CRASH;
		signal_msg(WTERMSIG(st), it->msg, sizeof it->msg);
	} else {
		it->status = TIR_MEASURE_RUN_ERROR;
		snprintf(it->msg, sizeof it->msg, "the measuring process exited with "
			 "status %d during this candidate",
			 WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	}
}

/* A child failed its setup: so would the next child's.  Every item left
 * gets the reason. */
static void batch_setup_failed(tir_child_stream *s, int watchdog, int st)
{
	const int err = TIR_MEASURE_RUN_ERROR;
	char sig[128];
	if (watchdog) {
		stream_fail(s, err, "setting up the measuring process timed out after %g s",
			    s->f.timeout_s);
	} else if (WIFSIGNALED(st)) {
		signal_msg(WTERMSIG(st), sig, sizeof sig);
		stream_fail(s, err, "setting up the measuring process: %s", sig);
	} else if (s->sh->setup_failed) {
		stream_fail(s, err, "%s", s->sh->setup_msg);
	} else {
		stream_fail(s, err, "the measuring process exited with status %d while "
			    "setting up", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	}
}

/* Forks one child for the positions from first on; its pid, or -1 with
 * the stream failed. */
static pid_t stream_fork(tir_child_stream *s, int first)
{
	batch_shared *sh = s->sh;
	atomic_store(&sh->current, -1);
	sh->setup_done = 0;
	sh->setup_failed = 0;
	fflush(stdout);
	fflush(stderr);
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		stream_fail(s, TIR_MEASURE_RUN_ERROR, "fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		child_setup(parent);
		batch_child(sh, first, &s->f);
		_exit(0);
	}
	s->children++;
	return pid;
}

/* Watches child pid and settles how it ended.  Returns the position the
 * next child starts from, or -1 when no child is to follow (the stream
 * failed, or a child's setup did). */
static int stream_watch(tir_child_stream *s, pid_t pid)
{
	batch_shared *sh = s->sh;
	int st = 0;
	int w = watch_child(pid, s->f.timeout_s, &sh->beat, &st);
	int cur = atomic_load(&sh->current);
	if (w < 0) {
		stream_fail(s, TIR_MEASURE_RUN_ERROR, "waitpid: %s", strerror(errno));
		return -1;
	}
	if (cur < 0) {
		if (w == 1 || !sh->setup_done) {
			batch_setup_failed(s, w == 1, st);
			return -1;
		}
		return 0;                     /* set up, then closed with nothing put */
	}
	/* order[cur] was written by tir_child_stream_put before its store of
	 * count.  The child read it after loading count, but that ordering is
	 * another process's: loading count here orders this thread's read after
	 * the write too (ThreadSanitizer saw the read unordered).  And the
	 * child ran candidate code that may have written anywhere, the shared
	 * reports among it: an index outside what was put is refused, never
	 * followed. */
	int put = atomic_load(&sh->count);
	if (cur >= put || cur >= s->n || sh->order[cur] < 0 || sh->order[cur] >= s->n) {
		stream_fail(s, TIR_MEASURE_RUN_ERROR, "the child's reports were overwritten "
			    "(it was at item %d of %d put)", cur, put);
		return -1;
	}
	batch_item *it = &sh->items[sh->order[cur]];
	if (!it->done)
		batch_blame(it, w == 1, st, s->f.timeout_s);
	return cur + 1;
}

/* The guard thread: watches the first child, and forks the next one after
 * a child ended with items left.  A fresh child is forked only once the
 * stream is closed: the callers put from threads that build (a compiler
 * in another thread may hold a lock the child would need), and by then
 * they have joined. */
static void *stream_guard(void *arg)
{
	tir_child_stream *s = arg;
	int next = s->first_pid > 0 ? stream_watch(s, s->first_pid) : -1;
	while (next >= 0) {
		pthread_mutex_lock(&s->lock);
		while (!s->closed)
			pthread_cond_wait(&s->closed_cv, &s->lock);
		pthread_mutex_unlock(&s->lock);
		if (next >= atomic_load(&s->sh->count))
			break;
		pid_t pid = stream_fork(s, next);
		if (pid < 0)
			break;
		next = stream_watch(s, pid);
	}
	return NULL;
}

tir_child_stream *tir_child_stream_start(int n, double timeout_s,
					 int (*setup)(void *ctx, tir_child_report *rep),
					 int (*item)(void *ctx, int i, tir_child_report *rep,
						     double *max_rel_error),
					 void *ctx)
{
	tir_child_stream *s = xcalloc(1, sizeof *s);
	s->n = n > 0 ? n : 0;
	s->f = (batch_fns){ setup, item, ctx, timeout_s };
	pthread_mutex_init(&s->put_lock, NULL);
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->closed_cv, NULL);
	s->size = sizeof(batch_shared) + (size_t)s->n * (sizeof(batch_item) + sizeof(int));
	void *p = mmap(NULL, s->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		       -1, 0);
	if (p == MAP_FAILED) {
		stream_fail(s, TIR_MEASURE_RUN_ERROR, "cannot map %zu bytes for the reports: %s",
			    s->size, strerror(errno));
		return s;
	}
	s->sh = p;                        /* zeroed: no item done, none put */
	s->sh->order = (int *)(void *)&s->sh->items[s->n];
	atomic_init(&s->sh->current, -1);
	if (s->n == 0)
		return s;
	pid_t pid = stream_fork(s, 0);
	s->first_pid = pid > 0 ? pid : 0;
	if (pthread_create(&s->guard, NULL, stream_guard, s) == 0) {
		s->guard_started = true;
	} else {
		stream_fail(s, TIR_MEASURE_RUN_ERROR, "cannot start the guard thread");
		if (pid > 0) {
			kill(pid, SIGKILL);
			while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
				;
		}
	}
	return s;
}

void tir_child_stream_put(tir_child_stream *s, int i)
{
	if (!s->sh || i < 0 || i >= s->n)
		return;
	pthread_mutex_lock(&s->put_lock);
	int c = atomic_load(&s->sh->count);
	if (c < s->n) {
		s->sh->order[c] = i;
		atomic_store(&s->sh->count, c + 1);
	}
	pthread_mutex_unlock(&s->put_lock);
}

int tir_child_stream_finish(tir_child_stream *s, tir_measure_result *r)
{
	for (int i = 0; i < s->n; i++) {
		memset(&r[i], 0, sizeof r[i]);
		r[i].max_rel_error = -1;
		r[i].status = TIR_MEASURE_RUN_ERROR;
		snprintf(r[i].msg, sizeof r[i].msg, "%s", !s->sh && s->fail_msg[0] ? s->fail_msg
			 : "not measured: never put in the stream");
	}
	if (s->sh)
		atomic_store(&s->sh->closed, 1);
	pthread_mutex_lock(&s->lock);
	s->closed = true;
	pthread_cond_broadcast(&s->closed_cv);
	pthread_mutex_unlock(&s->lock);
	if (s->guard_started)
		pthread_join(s->guard, NULL);
	int count = s->sh ? atomic_load(&s->sh->count) : 0;
	for (int p = 0; p < count; p++) {
		int i = s->sh->order[p];
		const batch_item *it = &s->sh->items[i];
		if (!it->done) {
			r[i].status = s->fail_status ? s->fail_status : TIR_MEASURE_RUN_ERROR;
			snprintf(r[i].msg, sizeof r[i].msg, "%s", s->fail_msg[0] ? s->fail_msg
				 : "the measuring process ended before this candidate");
			continue;
		}
		r[i].status = (tir_measure_status)it->status;
		if ((int)r[i].status < 0 || r[i].status >= TIR_MEASURE_NSTATUSES)
			r[i].status = TIR_MEASURE_RUN_ERROR;
		snprintf(r[i].msg, sizeof r[i].msg, "%s",
			 r[i].status == TIR_MEASURE_OK ? "" : it->msg);
		r[i].nrepeats = it->nrepeats;
		if (r[i].nrepeats < 0 || r[i].nrepeats > TIR_MEASURE_MAX_REPEATS)
			r[i].nrepeats = 0;
		memcpy(r[i].repeat_us, it->repeat_us, sizeof r[i].repeat_us);
		r[i].median_us = r[i].latency_us = it->median_us;
		r[i].max_rel_error = it->max_rel_error;
		r[i].run_s = it->run_s;
		r[i].timing_s = it->timing_s;
		r[i].launch_us = it->launch_us;
		r[i].timer = (tir_timer)it->timer;
	}
	int children = s->children;
	if (s->sh)
		munmap(s->sh, s->size);
	pthread_cond_destroy(&s->closed_cv);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->put_lock);
	free(s);
	return children;
}

int tir_child_batch(int n, double timeout_s,
		    int (*setup)(void *ctx, tir_child_report *rep),
		    int (*item)(void *ctx, int i, tir_child_report *rep,
				double *max_rel_error),
		    void *ctx, tir_measure_result *r)
{
	tir_child_stream *s = tir_child_stream_start(n, timeout_s, setup, item, ctx);
	for (int i = 0; i < n; i++)
		tir_child_stream_put(s, i);
	return tir_child_stream_finish(s, r);
}
