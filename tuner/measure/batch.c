/*
 * batch.c — tir_measure_local: a batch of candidates measured on this
 * machine.
 *
 * Builds are fast because they run on every core, and runs are clean
 * because they run one at a time:
 *
 *   1. build, in builder processes, one per core (ctx->threads to limit):
 *      first each candidate's trace is replayed on a fresh schedule,
 *      validated and its code generated (tir_codegen: milliseconds), then
 *      each is compiled by the target's runner (NVRTC: a tenth of a second
 *      to seconds), the biggest first; a runner that builds groups (the
 *      CPU's build_group: one compiler run for several candidates) gets
 *      them dealt into one group per builder process (at most 8 in a
 *      group), and builds a group's members one by one only when the
 *      group fails;
 *   2. run, ONE AT A TIME.  Where the runner streams (CUDA), its measuring
 *      process is forked when the compiles start — its setup, the driver and
 *      a context, overlaps them — and takes each candidate as soon as it is
 *      built: it measures them one after another in one guarded child (a
 *      fresh one after a candidate that crashes or hangs, once the builds
 *      are over) and compares each output with the reference inside it,
 *      timing only the ones that matched; the batch then waits only for the
 *      runs still queued when the last compile ends.  Otherwise (CPU) each
 *      candidate runs after every build, timed in a child of its own
 *      (guard.c's guard), and its outputs are compared here.
 *
 * A candidate whose source was built already (in this batch, or kept in
 * the context's compile cache from an earlier one) is not compiled again
 * (below: the compile cache).
 *
 * The reference (the unscheduled program interpreted in double precision,
 * tir_measure_reference: seconds for the largest workloads) is computed
 * once per (workload, seed): with a measure_local context it is kept there
 * across batches, without one it is computed once per batch.
 *
 * Statuses: a trace that does not replay or validate, or code that does not
 * generate or compile, is build_error; the runner decides crash, timeout and
 * run_error; an output beyond tir_measure_tolerance is wrong_result.  Nothing
 * here aborts the batch: every candidate gets a status and, when not ok, a
 * message (malloc'd; the caller frees out[i].msg).
 *
 * Builds run in forked builder processes (below: threads of one process
 * overlap them poorly on the H200 machine), and no candidate code runs in the
 * calling process: the streaming runner forks its measuring child before
 * the compiles start and any later one after the builders have ended; the
 * CPU runs fork after the builds.  The reference is computed before any
 * fork, so the children inherit it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include "measure.h"
#include "../ir/ir.h"
#include "../sched/sched.h"
#include "../codegen/codegen.h"

typedef struct job {
	const char *trace;
	tir_code *code;
	tir_artifact *art;
	int status;                /* TIR_MEASURE_OK while it may run */
	char msg[512];
	unsigned char key[32];     /* build_key of its code */
	int same;                  /* the job of this batch whose build it shares; -1: none */
	bool borrowed;             /* art is the cache's or job `same`'s: not freed here */
} job;

typedef struct builders {
	const tir_workload *w;
	const tir_target *t;
	const tir_runner *r;
	job *jobs;
	int n;
	tir_run_stream *stream;    /* NULL: the runs wait for every build */
	int *order;                /* compile order: largest first */
	/* the groups built together (runner build_group): group g is the jobs
	 * member[start[g] .. start[g + 1]) */
	int ngroups;
	int *start, *member;
} builders;

/* ---- phase 1: in builder processes ------------------------------------------------
 *
 * Both steps of a build, generating code and compiling it, run in forked
 * builder processes, not in threads of this process.  Generating code is
 * allocation-heavy work, and on the H200 machine the threads of one process
 * share such work poorly (NVRTC in-process, 32 new sources each: one thread
 * 2.6 compiles/s, 16 threads 10.2, 16 processes 24.8; bench/nvrtc_parallel);
 * the worker end to end went from 24.2 to 27.5 candidates/s (geomean of 20
 * tasks; bench/results/2026-11-30-h200-build-processes.txt).  A crash in
 * replay or code generation now costs one candidate, not the worker.  A
 * builder runs NVRTC in itself (tir_nvrtc_in_process: it never uses CUDA),
 * not in a fresh child per compile that would start NVRTC and libcuda
 * afresh each time, and the parent kills one that spends over
 * TIR_NVRTC_TIMEOUT_S generating an item's code, or over the runner's
 * build_limit_s building it (a CPU build kills its own compiler sooner,
 * process group and all).  A builder
 * takes the next item from a counter they share, works on it and sends the
 * result up its pipe as bytes: a candidate's tir_code, or its artifact (both
 * plain data; an artifact's files, if any, pass to the parent with it), or
 * the message of its failure.  Only the work itself runs in a builder (no
 * stdio, no exit handlers): the parent may have other threads.  A builder
 * that dies costs the item it was on (build_error); the others take the
 * rest; what no builder took (none could start) is done in the parent. */

/* Reads n bytes at *at of b into p; -1 past the end. */
static int get(const char *b, size_t len, size_t *at, void *p, size_t n)
{
	if (n > len - *at)
		return -1;
	if (n)
		memcpy(p, b + *at, n);
	*at += n;
	return 0;
}

/* What a builder sends for one item, followed by len bytes. */
typedef struct item_msg {
	int i;
	int ok;
	size_t len;
} item_msg;

typedef struct pool {
	int n;
	const int *order;          /* the items in the order they are taken; NULL: 0..n-1 */
	/* in a builder: the item's result (return 0) or the message of its
	 * failure (-1) into out; 1: nothing to send (nothing to do) */
	int (*work)(void *ctx, int i, tir_buf *out);
	/* in the parent: a result a builder sent */
	void (*take)(void *ctx, int i, bool ok, const char *data, size_t len);
	void *ctx;
	double limit_s;            /* a builder on one item longer is killed */
	struct pool_shared *sh;
} pool;

#define MAX_BUILDERS 256

/* What the parent and its builders share (MAP_SHARED). */
typedef struct pool_shared {
	int next;                  /* the next position in order */
	int cur[MAX_BUILDERS];     /* per builder: the item it is on; -1: none */
	double since[MAX_BUILDERS];   /* and since when (tir_now_s) */
	int taken[];               /* per item: a builder took it */
} pool_shared;

/* 1 when n bytes were read, 0 at end of file before them, -1 on error. */
static int read_full(int fd, void *p, size_t n)
{
	char *c = p;
	while (n) {
		ssize_t k = read(fd, c, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k == 0 ? 0 : -1;
		c += k;
		n -= (size_t)k;
	}
	return 1;
}

/* Builder k: NVRTC in itself (it never uses CUDA; the parent watches its
 * time), items until there are none left. */
static _Noreturn void builder(pool *pl, int k, int fd)
{
	tir_nvrtc_in_process(true);
	tir_buf out = { 0 };
	for (;;) {
		int pos = __atomic_fetch_add(&pl->sh->next, 1, __ATOMIC_SEQ_CST);
		if (pos >= pl->n)
			_exit(0);
		int i = pl->order ? pl->order[pos] : pos;
		pl->sh->since[k] = tir_now_s();
		__atomic_store_n(&pl->sh->cur[k], i, __ATOMIC_SEQ_CST);
		__atomic_store_n(&pl->sh->taken[i], 1, __ATOMIC_SEQ_CST);
		out.len = 0;
		int rc = pl->work(pl->ctx, i, &out);
		__atomic_store_n(&pl->sh->cur[k], -1, __ATOMIC_SEQ_CST);
		if (rc > 0)
			continue;
		item_msg m = { i, rc == 0, out.len };
		if (tir_write_all(fd, &m, sizeof m) || (out.len && tir_write_all(fd, out.s, out.len)))
			_exit(1);
	}
}

/* One result from a builder's pipe; -1 at its end or on a broken message. */
static int take_one(pool *pl, int fd)
{
	item_msg m;
	if (read_full(fd, &m, sizeof m) != 1 || m.i < 0 || m.i >= pl->n || m.len > ((size_t)1 << 30))
		return -1;
	char *data = xmalloc(m.len + 1);
	if (m.len && read_full(fd, data, m.len) != 1) {
		free(data);
		return -1;
	}
	data[m.len] = '\0';
	pl->take(pl->ctx, m.i, m.ok, data, m.len);
	free(data);
	return 0;
}

/* A builder takes its first item at once; one that has not after this
 * long never will. */
#define BUILDER_START_S 10.0

/* Runs pl's items in up to `procs` builder processes, taking each result
 * as it comes; a builder on one item for over pl->limit_s is
 * killed, and one that took no item BUILDER_START_S after the forks.
 * taken[i] says whether a builder took item i (whether or not it
 * sent a result: one that died did not), late[i] whether its builder was
 * killed for time.  Returns how many builders ran (0: none could start;
 * nothing was taken). */
static int in_processes(pool *pl, int procs, int *taken, int *late)
{
	memset(taken, 0, sizeof(int) * (size_t)pl->n);
	memset(late, 0, sizeof(int) * (size_t)pl->n);
	if (procs > pl->n)
		procs = pl->n;
	if (procs > MAX_BUILDERS)
		procs = MAX_BUILDERS;
	if (procs < 1)
		return 0;
	size_t shsize = sizeof(pool_shared) + sizeof(int) * (size_t)pl->n;
	pl->sh = mmap(NULL, shsize, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (pl->sh == MAP_FAILED)
		return 0;
	for (int k = 0; k < MAX_BUILDERS; k++)
		pl->sh->cur[k] = -1;
	pid_t *pid = xcalloc((size_t)procs, sizeof *pid);
	struct pollfd *pf = xcalloc((size_t)procs, sizeof *pf);
	int started = 0;
	const double t0 = tir_now_s();
	for (int k = 0; k < procs; k++) {
		int fd[2];
		if (pipe(fd))
			break;
		pid_t c = fork();
		if (c == 0) {
			close(fd[0]);
			for (int q = 0; q < started; q++)
				close(pf[q].fd);
			builder(pl, k, fd[1]);
		}
		close(fd[1]);
		if (c < 0) {
			close(fd[0]);
			break;
		}
		pid[started] = c;
		pf[started++] = (struct pollfd){ .fd = fd[0], .events = POLLIN };
	}
	for (int open = started; open > 0;) {
		int r = poll(pf, (nfds_t)started, 250);
		if (r < 0 && errno != EINTR)
			break;
		for (int k = 0; r > 0 && k < started; k++)
			if (pf[k].fd >= 0 && pf[k].revents && take_one(pl, pf[k].fd) < 0) {
				close(pf[k].fd);
				pf[k].fd = -1;
				open--;
			}
		/* the watchdog: a builder too long on one item is killed (its
		 * pipe then ends, above) */
		double now = tir_now_s();
		for (int k = 0; k < started; k++) {
			int i = __atomic_load_n(&pl->sh->cur[k], __ATOMIC_SEQ_CST);
			if (pf[k].fd >= 0 && i >= 0 && !late[i] &&
			    now - pl->sh->since[k] > pl->limit_s &&
			    __atomic_load_n(&pl->sh->cur[k], __ATOMIC_SEQ_CST) == i) {
				late[i] = 1;
				kill(pid[k], SIGKILL);
			}
			/* one that never took an item is stuck in its fork (seen
			 * under qemu-user: the child of a threaded worker waits
			 * forever on a lock another thread held); its share goes
			 * to the others or, taken by none, to this process */
			if (pf[k].fd >= 0 && pl->sh->since[k] == 0 && now - t0 > BUILDER_START_S)
				kill(pid[k], SIGKILL);
		}
	}
	for (int k = 0; k < started; k++) {
		if (pf[k].fd >= 0)
			close(pf[k].fd);
		while (waitpid(pid[k], NULL, 0) < 0 && errno == EINTR)
			;
	}
	memcpy(taken, pl->sh->taken, sizeof(int) * (size_t)pl->n);
	munmap(pl->sh, shsize);
	pl->sh = NULL;
	free(pid);
	free(pf);
	return started;
}

/* ---- the two steps ---------------------------------------------------------------- */

/* Step 1 for one candidate: replay, validate, generate code; NULL with the
 * message in msg. */
static tir_code *generate(const builders *b, int i, char *msg, size_t cap)
{
	tir_error e = { "" };
	tir_sched *s = sched_replay_valid(b->w, b->t, b->jobs[i].trace, &e);
	tir_code *c = s ? tir_codegen(tir_sched_program(s), b->t, &e) : NULL;
	tir_sched_free(s);
	if (!c)
		snprintf(msg, cap, "%s%s", !s ? "replay: " : "", e.msg);
	return c;
}

/* tir_code as bytes: the counts, the tables, the source. */
static void code_bytes(const tir_code *c, tir_buf *out)
{
	size_t len = strlen(c->source);
	buf_put(out, &c->nargs, sizeof c->nargs);
	buf_put(out, &c->nlaunches, sizeof c->nlaunches);
	buf_put(out, c->entry, sizeof c->entry);
	buf_put(out, &c->unrolled_blocks, sizeof c->unrolled_blocks);
	buf_put(out, c->args, sizeof *c->args * (size_t)c->nargs);
	buf_put(out, c->launches, sizeof *c->launches * (size_t)c->nlaunches);
	buf_put(out, &len, sizeof len);
	buf_put(out, c->source, len);
}

static tir_code *code_of_bytes(const char *d, size_t n)
{
	tir_code *c = xcalloc(1, sizeof *c);
	size_t at = 0, len;
	if (get(d, n, &at, &c->nargs, sizeof c->nargs) ||
	    get(d, n, &at, &c->nlaunches, sizeof c->nlaunches) ||
	    get(d, n, &at, c->entry, sizeof c->entry) ||
	    get(d, n, &at, &c->unrolled_blocks, sizeof c->unrolled_blocks) ||
	    c->nargs < 0 || c->nlaunches < 0 ||
	    (size_t)c->nargs > n / sizeof *c->args || (size_t)c->nlaunches > n / sizeof *c->launches)
		goto bad;
	c->args = xcalloc((size_t)c->nargs + 1, sizeof *c->args);
	c->launches = xcalloc((size_t)c->nlaunches + 1, sizeof *c->launches);
	if (get(d, n, &at, c->args, sizeof *c->args * (size_t)c->nargs) ||
	    get(d, n, &at, c->launches, sizeof *c->launches * (size_t)c->nlaunches) ||
	    get(d, n, &at, &len, sizeof len) || len != n - at)
		goto bad;
	c->source = xmalloc(len + 1);
	memcpy(c->source, d + at, len);
	c->source[len] = '\0';
	c->entry[sizeof c->entry - 1] = '\0';
	return c;
bad:
	tir_code_free(c);
	return NULL;
}

static int generate_work(void *ctx, int i, tir_buf *out)
{
	char msg[512];
	tir_code *c = generate(ctx, i, msg, sizeof msg);
	if (!c) {
		buf_puts(out, msg);
		return -1;
	}
	code_bytes(c, out);
	tir_code_free(c);
	return 0;
}

static void generate_take(void *ctx, int i, bool ok, const char *data, size_t len)
{
	job *j = &((builders *)ctx)->jobs[i];
	if (ok && !(j->code = code_of_bytes(data, len))) {
		ok = false;
		data = "a builder process sent broken code";
	}
	if (!ok) {
		j->status = TIR_MEASURE_BUILD_ERROR;
		snprintf(j->msg, sizeof j->msg, "%s", data);
	}
}

/* An artifact as bytes: it is plain data, its paths (its files then belong
 * to the parent) and its image; a is freed, not by runner->free: the files
 * stay for the parent. */
static void art_bytes(tir_artifact *a, tir_buf *out)
{
	buf_put(out, &a->sm, sizeof a->sm);
	buf_put(out, a->dir, sizeof a->dir);
	buf_put(out, a->path, sizeof a->path);
	buf_put(out, a->entry, sizeof a->entry);
	buf_put(out, a->image, a->image_size);
	free(a->image);
	free(a);
}

static tir_artifact *art_of_bytes(const tir_runner *r, const char *data, size_t len)
{
	tir_artifact *a = xcalloc(1, sizeof *a);
	size_t at = 0;
	a->runner = r;
	if (get(data, len, &at, &a->sm, sizeof a->sm) ||
	    get(data, len, &at, a->dir, sizeof a->dir) ||
	    get(data, len, &at, a->path, sizeof a->path) ||
	    get(data, len, &at, a->entry, sizeof a->entry)) {
		free(a);
		return NULL;
	}
	a->dir[sizeof a->dir - 1] = a->path[sizeof a->path - 1] = '\0';
	a->entry[sizeof a->entry - 1] = '\0';
	if ((a->image_size = len - at)) {
		a->image = xmalloc(a->image_size);
		memcpy(a->image, data + at, a->image_size);
	}
	return a;
}

/* Step 2 for one candidate: compile. */
static int build_work(void *ctx, int i, tir_buf *out)
{
	builders *b = ctx;
	if (!b->jobs[i].code || b->jobs[i].art || b->jobs[i].same >= 0)
		return 1;                /* none, or a build at hand (compile cache) */
	tir_error e = { "" };
	tir_artifact *a = b->r->build(b->jobs[i].code, b->t, &e);
	if (!a) {
		buf_puts(out, e.msg);
		return -1;
	}
	art_bytes(a, out);
	return 0;
}

/* Step 2 for group g (the runner's build_group): its candidates built
 * together, or, if that fails, each alone (only the faulty one fails, with
 * its compiler's message).  Sends per member: ok (int32), the length of
 * what follows (uint64), its artifact's bytes or its message. */
static int group_work(void *ctx, int g, tir_buf *out)
{
	builders *b = ctx;
	int k = b->start[g + 1] - b->start[g];
	const int *mem = b->member + b->start[g];
	const tir_code **c = xcalloc((size_t)k, sizeof *c);
	tir_artifact **a = xcalloc((size_t)k, sizeof *a);
	for (int q = 0; q < k; q++)
		c[q] = b->jobs[mem[q]].code;
	tir_error e = { "" };
	bool together = k > 1 && b->r->build_group(k, c, b->t, a, &e) == 0;
	for (int q = 0; q < k; q++) {
		tir_error e1 = { "" };
		if (!together)
			a[q] = b->r->build(c[q], b->t, &e1);
		tir_buf one = { 0 };
		if (a[q])
			art_bytes(a[q], &one);
		else
			buf_puts(&one, e1.msg);
		int32_t ok = a[q] != NULL;
		uint64_t len = one.len;
		buf_put(out, &ok, sizeof ok);
		buf_put(out, &len, sizeof len);
		buf_put(out, one.s, one.len);
		free(one.s);
	}
	free(c);
	free(a);
	return 0;
}

static void built(builders *b, int i, tir_artifact *a, const char *msg)
{
	job *j = &b->jobs[i];
	if (!a) {
		j->status = TIR_MEASURE_BUILD_ERROR;
		snprintf(j->msg, sizeof j->msg, "%s", msg);
	} else {
		j->art = a;
		if (b->stream)
			b->r->stream_put(b->stream, i, a, j->code);
	}
	/* the candidates of the same source: the same build, or its failure */
	for (int q = 0; q < b->n; q++) {
		job *d = &b->jobs[q];
		if (d->same != i || d->art || d->status != TIR_MEASURE_OK)
			continue;
		if (!a) {
			d->status = TIR_MEASURE_BUILD_ERROR;
			snprintf(d->msg, sizeof d->msg, "%s", j->msg);
			continue;
		}
		d->art = a;
		d->borrowed = true;
		if (b->stream)
			b->r->stream_put(b->stream, q, a, d->code);
	}
}

static void build_take(void *ctx, int i, bool ok, const char *data, size_t len)
{
	builders *b = ctx;
	if (!ok) {
		built(b, i, NULL, data);
		return;
	}
	tir_artifact *a = art_of_bytes(b->r, data, len);
	built(b, i, a, a ? NULL : "a builder process sent a broken artifact");
}

/* Group g's results (group_work). */
static void group_take(void *ctx, int g, bool ok, const char *data, size_t len)
{
	builders *b = ctx;
	size_t at = 0;
	for (int m = b->start[g]; m < b->start[g + 1]; m++) {
		int i = b->member[m];
		int32_t good;
		uint64_t n;
		if (!ok) {
			built(b, i, NULL, data);
			continue;
		}
		if (get(data, len, &at, &good, sizeof good) || get(data, len, &at, &n, sizeof n) ||
		    n > len - at) {
			built(b, i, NULL, "a builder process sent a broken group of builds");
			at = len;
			continue;
		}
		char *d = xmalloc((size_t)n + 1);
		memcpy(d, data + at, (size_t)n);
		d[n] = '\0';
		at += (size_t)n;
		tir_artifact *a = good ? art_of_bytes(b->r, d, (size_t)n) : NULL;
		built(b, i, a, good ? (a ? NULL : "a builder process sent a broken artifact") : d);
		free(d);
	}
}

/* Step 1 for every candidate, in builder processes. */
static void generate_all(builders *b, int procs)
{
	pool pl = { .n = b->n, .work = generate_work, .take = generate_take, .ctx = b,
		    .limit_s = TIR_NVRTC_TIMEOUT_S };
	int *taken = xcalloc((size_t)b->n + 1, sizeof *taken);
	int *late = xcalloc((size_t)b->n + 1, sizeof *late);
	int ran = in_processes(&pl, procs, taken, late);
	for (int i = 0; i < b->n; i++) {
		job *j = &b->jobs[i];
		if (j->code || j->status != TIR_MEASURE_OK)
			continue;
		if (ran && taken[i]) {
			j->status = TIR_MEASURE_BUILD_ERROR;
			if (late[i])
				snprintf(j->msg, sizeof j->msg, "code generation ran past %d s",
					 TIR_NVRTC_TIMEOUT_S);
			else
				snprintf(j->msg, sizeof j->msg,
					 "the builder process died generating its code");
		} else if (!(j->code = generate(b, i, j->msg, sizeof j->msg))) {
			j->status = TIR_MEASURE_BUILD_ERROR;
		}
	}
	free(taken);
	free(late);
}

/* A pass of single builds over some jobs: item q is job job[q]. */
typedef struct retry {
	builders *b;
	const int *job;
} retry;

static int retry_work(void *ctx, int q, tir_buf *out)
{
	retry *r = ctx;
	return build_work(r->b, r->job[q], out);
}

static void retry_take(void *ctx, int q, bool ok, const char *data, size_t len)
{
	retry *r = ctx;
	build_take(r->b, r->job[q], ok, data, len);
}

/* Groups per builder process, and the most candidates in one group.  One
 * group per process: the members are dealt round the groups largest first,
 * so the groups' compiles take alike, and a larger group pays the compiler's
 * start, headers, assembler and linker over more candidates.  A batch of 16
 * GMM-2 candidates on the 2-core VM built in 1.14 s as 2 groups of 8, 1.41 s
 * as 4 of 4, 1.79 s as 8 of 2 (32 batches each, interleaved with 4 of 4;
 * bench/results/2026-12-07-cpu-tuning-loop.txt, part 6).  Past GROUP_MAX a
 * process takes several groups: one failed group then costs at most 8
 * builds again. */
#define GROUPS_PER_PROCESS 1
#define GROUP_MAX 8

static bool to_build(const job *j)
{
	return j->code && !j->art && j->same < 0 && j->status == TIR_MEASURE_OK;
}

/* The groups of the runner's build_group, over what is to be built: dealt
 * in compile order like cards, so that each gets its share of the large
 * ones.  None (ngroups 0) without build_group or with fewer than two to
 * build. */
static void make_groups(builders *b, int procs)
{
	int m = 0;
	for (int i = 0; i < b->n; i++)
		m += to_build(&b->jobs[i]);
	b->ngroups = 0;
	if (!b->r->build_group || m < 2)
		return;
	int ng = GROUPS_PER_PROCESS * (procs > 0 ? procs : 1);
	if (ng < (m + GROUP_MAX - 1) / GROUP_MAX)
		ng = (m + GROUP_MAX - 1) / GROUP_MAX;
	if (ng > m)
		ng = m;
	b->ngroups = ng;
	b->start = xcalloc((size_t)ng + 1, sizeof *b->start);
	b->member = xcalloc((size_t)m, sizeof *b->member);
	int *fill = xcalloc((size_t)ng, sizeof *fill);
	for (int g = 0; g < ng; g++)          /* group g: positions g, g + ng, ... */
		b->start[g + 1] = b->start[g] + (m - g + ng - 1) / ng;
	for (int k = 0, pos = 0; k < b->n; k++) {
		int i = b->order[k];
		if (!to_build(&b->jobs[i]))
			continue;
		int g = pos++ % ng;
		b->member[b->start[g] + fill[g]++] = i;
	}
	free(fill);
}

/* Step 2 for every generated candidate, in compile order, in builder
 * processes (in groups where the runner builds groups); each result into
 * the stream, when there is one, as it comes. */
static void build_all(builders *b, int procs)
{
	make_groups(b, procs);
	double limit = b->r->build_limit_s ? b->r->build_limit_s() : TIR_NVRTC_TIMEOUT_S;
	pool pl = { .n = b->n, .order = b->order, .work = build_work, .take = build_take,
		    .ctx = b, .limit_s = limit };
	if (b->ngroups) {
		/* a group's build, then if it fails each member's alone */
		pl = (pool){ .n = b->ngroups, .work = group_work, .take = group_take, .ctx = b,
			     .limit_s = limit * (1 + GROUP_MAX) };
	}
	int *group = xcalloc((size_t)b->n + 1, sizeof *group);
	for (int i = 0; i < b->n; i++)
		group[i] = b->ngroups ? -1 : i;
	for (int g = 0; g < b->ngroups; g++)
		for (int m = b->start[g]; m < b->start[g + 1]; m++)
			group[b->member[m]] = g;
	int *taken = xcalloc((size_t)pl.n + 1, sizeof *taken);
	int *late = xcalloc((size_t)pl.n + 1, sizeof *late);
	int ran = in_processes(&pl, procs, taken, late);
	/* the members of a group whose builder died (not one killed for time),
	 * each built again on its own in builder processes: a builder that
	 * dies then costs the one candidate it was on, as without groups */
	int *again = xcalloc((size_t)b->n + 1, sizeof *again);
	int *slot = xcalloc((size_t)b->n + 1, sizeof *slot);
	int na = 0;
	for (int k = 0; k < b->n; k++) {
		int i = b->order[k], g = group[i];
		slot[i] = -1;
		if (to_build(&b->jobs[i]) && b->ngroups && ran && taken[g] && !late[g] &&
		    b->start[g + 1] - b->start[g] > 1) {
			slot[i] = na;
			again[na++] = i;
		}
	}
	int *taken2 = xcalloc((size_t)na + 1, sizeof *taken2);
	int *late2 = xcalloc((size_t)na + 1, sizeof *late2);
	int ran2 = 0;
	if (na) {
		retry rt = { b, again };
		pool p2 = { .n = na, .work = retry_work, .take = retry_take, .ctx = &rt,
			    .limit_s = limit };
		ran2 = in_processes(&p2, procs, taken2, late2);
	}
	for (int k = 0; k < b->n; k++) {
		int i = b->order[k];
		job *j = &b->jobs[i];
		if (!to_build(j))
			continue;
		int g = group[i], q = slot[i];
		bool lost = q >= 0 ? ran2 && taken2[q] : ran && g >= 0 && taken[g];
		if (lost) {
			char msg[96] = "the builder process died compiling it";
			if (q >= 0 ? late2[q] : late[g])
				snprintf(msg, sizeof msg, "the build ran past %g s",
					 q >= 0 ? limit : pl.limit_s);
			built(b, i, NULL, msg);
		} else {
			tir_error e = { "" };
			tir_artifact *a = b->r->build(j->code, b->t, &e);
			built(b, i, a, e.msg);
		}
	}
	free(again);
	free(slot);
	free(taken2);
	free(late2);
	free(group);
	free(taken);
	free(late);
	free(b->start);
	free(b->member);
	b->start = b->member = NULL;
	b->ngroups = 0;
}

/* ---- the compile cache ------------------------------------------------------------
 *
 * A build depends on the generated source, the target and the compiler with
 * its flags, nothing else: the arguments and launches a run uses come from
 * the candidate's own tir_code.  So a candidate whose source is one already
 * built is not compiled again: within a batch the first of the same source
 * is compiled and the others share its build (job.same); across batches a
 * measure_local keeps the builds of its last COMPILE_CACHE_MAX compiles
 * (a worker's context lives as long as the worker), oldest dropped first.
 * The key is the SHA-256 (tir_trace_hash, nettle) of the runner's name, the
 * target key, $CC, $TIRD_NVRTC_OPTIONS and the source.  The search already
 * measures a program once (search/evolve.c: program_hash), but different
 * programs can print the same code, a worker measures for many jobs, and a
 * job resumed or asked for more trials measures again what it measured
 * before a crash.
 * The cache owns its artifacts; a job that uses one borrows it for the
 * batch (job.borrowed), and only the end of a batch adds or drops entries. */
#define COMPILE_CACHE_MAX 512

typedef struct compile_cache {
	int n;                     /* entries, oldest first */
	unsigned char (*key)[32];
	tir_artifact **art;
	long hits;                 /* of the context's life */
} compile_cache;

static void build_key(const tir_runner *r, const tir_target *t, const char *source,
		      unsigned char out[32])
{
	const char *cc = getenv("CC"), *nv = getenv("TIRD_NVRTC_OPTIONS");
	tir_buf k = { 0 };
	buf_printf(&k, "%s\n%s\n%s\n%s\n", r->name, t->key, cc ? cc : "", nv ? nv : "");
	buf_puts(&k, source);
	tir_trace_hash(k.s, out);
	free(k.s);
}

static tir_artifact *cache_find(const compile_cache *c, const unsigned char *key)
{
	for (int i = 0; c && i < c->n; i++)
		if (!memcmp(c->key[i], key, 32))
			return c->art[i];
	return NULL;
}

/* Takes a over (a build of key, not in c), dropping the oldest entry when
 * full. */
static void cache_put(compile_cache *c, const unsigned char *key, tir_artifact *a)
{
	if (!c->key) {
		c->key = xcalloc(COMPILE_CACHE_MAX, 32);
		c->art = xcalloc(COMPILE_CACHE_MAX, sizeof *c->art);
	}
	if (c->n == COMPILE_CACHE_MAX) {
		c->art[0]->runner->free(c->art[0]);
		memmove(c->key, c->key + 1, 32 * (size_t)(c->n - 1));
		memmove(c->art, c->art + 1, sizeof *c->art * (size_t)(c->n - 1));
		c->n--;
	}
	memcpy(c->key[c->n], key, 32);
	c->art[c->n++] = a;
}

static void cache_free(compile_cache *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->n; i++)
		c->art[i]->runner->free(c->art[i]);
	free(c->key);
	free(c->art);
	free(c);
}

/* Before the compiles: every generated candidate's key; those whose build
 * is in the cache borrow it, those of a source an earlier candidate of the
 * batch has will share that one's (built).  Returns the compiles saved. */
static int cache_lookup(builders *b, const compile_cache *c)
{
	int hits = 0;
	for (int i = 0; i < b->n; i++) {
		job *j = &b->jobs[i];
		if (!j->code)
			continue;
		build_key(b->r, b->t, j->code->source, j->key);
		tir_artifact *a = cache_find(c, j->key);
		if (a) {
			j->art = a;
			j->borrowed = true;
			hits++;
			continue;
		}
		for (int q = 0; q < i && j->same < 0; q++)
			if (b->jobs[q].code && !b->jobs[q].art && b->jobs[q].same < 0 &&
			    !memcmp(b->jobs[q].key, j->key, 32))
				j->same = q;
		hits += j->same >= 0;
	}
	return hits;
}

/* After the batch: each build it made is kept in c (c NULL: freed); the
 * borrowed ones are left to their owners. */
static void cache_keep(builders *b, compile_cache *c)
{
	for (int i = 0; i < b->n; i++) {
		job *j = &b->jobs[i];
		if (!j->art || j->borrowed)
			continue;
		if (c)
			cache_put(c, j->key, j->art);
		else
			b->r->free(j->art);
		j->art = NULL;
	}
}

void *tir_measure_cache_new(void)
{
	return xcalloc(1, sizeof(measure_local));
}

void tir_measure_cache_phases(const void *cache, tir_measure_phases *out)
{
	const measure_local *l = cache;
	memset(out, 0, sizeof *out);
	if (l)
		*out = l->phases;
}

void tir_measure_cache_free(void *cache)
{
	measure_local_clear(cache);
	free(cache);
}

static void ref_drop(measure_local *l)
{
	free(l->ref);
	l->ref = NULL;
	l->ref_n = 0;
	l->ref_key[0] = '\0';
}

void measure_local_clear(measure_local *l)
{
	if (!l)
		return;
	ref_drop(l);
	cache_free(l->builds);
	l->builds = NULL;
}

/* The reference output for w and seed, computed with the argument list of
 * code (any candidate's); kept in l when there is one.  *owned says whether
 * the caller frees it. */
static const double *reference(measure_local *l, const tir_workload *w, const tir_code *code,
			       uint64_t seed, int64_t *n, bool *owned, tir_error *err)
{
	const char *key = tir_workload_key(w);
	*owned = false;
	if (l && l->ref && l->ref_seed == seed && !strcmp(l->ref_key, key)) {
		*n = l->ref_n;
		return l->ref;
	}
	double *ref;
	if (tir_measure_reference(w, code, seed, &ref, n, err))
		return NULL;
	if (!l) {
		*owned = true;
		return ref;
	}
	ref_drop(l);
	l->ref = ref;
	l->ref_n = *n;
	l->ref_seed = seed;
	snprintf(l->ref_key, sizeof l->ref_key, "%s", key);
	return ref;
}

/* A measurement as the candidate's record. */
static void record(const tir_measure_result *mr, tir_candidate *out)
{
	out->status = mr->status;
	out->latency_us = mr->status == TIR_MEASURE_OK ? mr->latency_us : 0;
	out->max_rel_error = mr->max_rel_error;
	out->msg = mr->status == TIR_MEASURE_OK ? NULL : xstrdup(mr->msg);
}

/* Phase 2 for one built candidate: run in a child, check, time. */
static void run_one(const tir_runner *r, job *j, const tir_measure_opts *o,
		    const double *ref, int64_t ref_n, tir_candidate *out,
		    tir_measure_phases *ph)
{
	tir_measure_result mr;
	memset(&mr, 0, sizeof mr);
	mr.max_rel_error = -1;
	double t0 = tir_now_s();
	int rc = r->run(j->art, j->code, o, &mr);
	ph->processes++;
	ph->candidates_s += tir_now_s() - t0;
	ph->timing_s += mr.timing_s;
	ph->by_profiler += mr.timer == TIR_TIMER_PROFILER;
	if (rc == 0)
		mr.status = tir_measure_judge(j->code, ref, ref_n, mr.output, mr.out_elems,
					      &mr.max_rel_error, mr.msg, sizeof mr.msg);
	record(&mr, out);
	tir_measure_result_clear(&mr);
}

/* The compile order: the biggest compiles (tir_code.unrolled_blocks) first,
 * so that the slowest of a batch start at once instead of last, on a core
 * that would otherwise sit idle while they end; ties in batch order. */
typedef struct sized {
	int64_t size;
	int i;
} sized;

static int by_size(const void *x, const void *y)
{
	const sized *a = x, *b = y;
	if (a->size != b->size)
		return a->size > b->size ? -1 : 1;
	return (a->i > b->i) - (a->i < b->i);
}

static void compile_order(builders *b)
{
	sized *k = xcalloc((size_t)b->n + 1, sizeof *k);
	for (int i = 0; i < b->n; i++)
		k[i] = (sized){ b->jobs[i].code ? b->jobs[i].code->unrolled_blocks : -1, i };
	qsort(k, (size_t)b->n, sizeof *k, by_size);
	b->order = xcalloc((size_t)b->n + 1, sizeof *b->order);
	for (int i = 0; i < b->n; i++)
		b->order[i] = k[i].i;
	free(k);
}

/* Phase 2 through the runner's run_batch: every candidate built, at once. */
static void batch_results(const builders *b, tir_candidate *out, const tir_measure_opts *o,
			  const double *ref, int64_t ref_n, tir_measure_phases *ph)
{
	const tir_artifact **a = xcalloc((size_t)b->n + 1, sizeof *a);
	const tir_code **c = xcalloc((size_t)b->n + 1, sizeof *c);
	int *idx = xcalloc((size_t)b->n + 1, sizeof *idx);
	int m = 0;
	for (int i = 0; i < b->n; i++)
		if (b->jobs[i].status == TIR_MEASURE_OK) {
			a[m] = b->jobs[i].art;
			c[m] = b->jobs[i].code;
			idx[m++] = i;
		}
	tir_measure_result *res = xcalloc((size_t)m + 1, sizeof *res);
	if (m > 0)
		ph->processes = b->r->run_batch(m, a, c, o, ref, ref_n, res);
	for (int j = 0; j < m; j++) {
		record(&res[j], &out[idx[j]]);
		ph->candidates_s += res[j].run_s;
		ph->timing_s += res[j].timing_s;
		ph->by_profiler += res[j].timer == TIR_TIMER_PROFILER;
	}
	free(res);
	free(idx);
	free(c);
	free(a);
}

/* Phase 2 through the runner's stream: collects what it measured. */
static void stream_results(const builders *b, tir_candidate *out, tir_measure_phases *ph)
{
	tir_measure_result *res = xcalloc((size_t)b->n + 1, sizeof *res);
	ph->processes = b->r->stream_finish(b->stream, res);
	for (int i = 0; i < b->n; i++)
		if (b->jobs[i].status == TIR_MEASURE_OK) {
			record(&res[i], &out[i]);
			ph->candidates_s += res[i].run_s;
			ph->timing_s += res[i].timing_s;
			ph->by_profiler += res[i].timer == TIR_TIMER_PROFILER;
		}
	free(res);
}

int tir_measure_local(void *ctx, const tir_workload *w, const tir_target *t, int n,
		      const char *const *traces, tir_candidate *out)
{
	measure_local *l = ctx;
	tir_measure_opts o = tir_measure_opts_default(l ? &l->opts : NULL);
	builders b = { .w = w, .t = t, .r = tir_runner_for(t), .n = n };
	b.jobs = xcalloc((size_t)n + 1, sizeof(job));
	for (int i = 0; i < n; i++) {
		b.jobs[i].trace = traces[i];
		b.jobs[i].status = TIR_MEASURE_OK;
		b.jobs[i].same = -1;
	}
	int threads = l && l->threads > 0 ? l->threads : 0;
	tir_measure_phases ph = { 0 };
	double t0 = tir_now_s();
	int procs = threads > 0 ? threads : tir_cores();
	/* 1a. every candidate's code (fast next to compiling) */
	generate_all(&b, procs);
	double t1 = tir_now_s();

	/* the reference, with the first candidate's arguments */
	const double *ref = NULL;
	int64_t ref_n = 0;
	bool owned = false;
	tir_error e = { "" };
	const tir_code *first = NULL;
	for (int i = 0; i < n && !first; i++)
		first = b.jobs[i].code;
	if (first)
		ref = reference(l, w, first, o.seed, &ref_n, &owned, &e);
	double t2 = tir_now_s();
	ph.reference_s = t2 - t1;

	/* 1b. compile, in parallel; where the runner streams, its measuring
	 * process starts now and takes each candidate as it is built */
	compile_order(&b);
	if (l && !l->builds)
		l->builds = xcalloc(1, sizeof *l->builds);
	ph.cache_hits = cache_lookup(&b, l ? l->builds : NULL);
	if (ref && b.r->stream_start)
		b.stream = b.r->stream_start(n, first, &o, ref, ref_n);
	for (int i = 0; b.stream && i < n; i++)    /* builds from the cache */
		if (b.jobs[i].art)
			b.r->stream_put(b.stream, i, b.jobs[i].art, b.jobs[i].code);
	build_all(&b, procs);
	double t3 = tir_now_s();
	ph.build_s = (t1 - t0) + (t3 - t2);
	ph.generate_s = t1 - t0;
	for (int i = 0; i < n; i++)
		ph.built += b.jobs[i].art != NULL;

	/* 2. what is left to run, one at a time */
	for (int i = 0; i < n; i++) {
		job *j = &b.jobs[i];
		memset(&out[i], 0, sizeof out[i]);
		out[i].trace = traces[i];
		out[i].max_rel_error = -1;
		if (j->status == TIR_MEASURE_OK && !ref) {
			j->status = TIR_MEASURE_RUN_ERROR;
			snprintf(j->msg, sizeof j->msg, "%s", e.msg[0] ? e.msg : "no reference");
		}
		if (j->status != TIR_MEASURE_OK) {
			out[i].status = j->status;
			out[i].msg = xstrdup(j->msg);
		} else if (!b.stream && !b.r->run_batch) {
			run_one(b.r, j, &o, ref, ref_n, &out[i], &ph);
		}
	}
	if (b.stream)
		stream_results(&b, out, &ph);
	else if (b.r->run_batch)
		batch_results(&b, out, &o, ref, ref_n, &ph);
	ph.run_s = tir_now_s() - t3;
	if (l) {
		l->builds->hits += ph.cache_hits;
		ph.cache_hits_total = l->builds->hits;
		l->phases = ph;
	}
	cache_keep(&b, l ? l->builds : NULL);
	for (int i = 0; i < n; i++)
		tir_code_free(b.jobs[i].code);
	if (owned)
		free((double *)ref);
	free(b.order);
	free(b.jobs);
	return 0;
}
