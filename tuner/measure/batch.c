/*
 * batch.c — tir_measure_local: a batch of candidates measured on this
 * machine.
 *
 * Builds are fast because they run on every core, and runs are clean
 * because they run one at a time:
 *
 *   1. build, in parallel on every core (search_parallel_for; ctx->threads to
 *      limit): first each candidate's trace is replayed on a fresh schedule,
 *      validated and its code generated (tir_codegen: milliseconds), then
 *      each is compiled by the target's runner (NVRTC: a tenth of a second
 *      to seconds);
 *   2. run, ONE AT A TIME.  Where the runner streams (CUDA), its measuring
 *      process is forked when the compiles start — its setup, the driver and
 *      a context, overlaps them — and takes each candidate as soon as it is
 *      built: it measures them one after another in one guarded child (a
 *      fresh one after a candidate that crashes or hangs, once the builds
 *      are over) and compares each output with the reference inside it,
 *      timing only the ones that matched; the batch then waits only for the
 *      runs still queued when the last compile ends.  Otherwise (CPU) each
 *      candidate runs after every build, timed in a child of its own
 *      (runner.c's guard), and its output is compared here.
 *
 * The reference (the slow double-precision computation, tir_measure_reference)
 * is computed once per (workload, seed): with a search_local context it is
 * kept there across batches, without one it is computed once per batch.
 *
 * Statuses: a trace that does not replay or validate, or code that does not
 * generate or compile, is build_error; the runner decides crash, timeout and
 * run_error; an output beyond tir_measure_tolerance is wrong_result.  Nothing
 * here aborts the batch: every candidate gets a status and, when not ok, a
 * message (malloc'd; the caller frees out[i].msg).
 *
 * Builds run in threads of the calling process, but no candidate code runs
 * in it: the streaming runner forks its first child before the builder
 * threads start and any later one after they have joined; the CPU runs fork
 * after the builds.  The reference is computed before any fork, so the
 * children inherit it.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "measure.h"
#include "../search/search.h"
#include "../ir/ir.h"

typedef struct job {
	const char *trace;
	tir_code *code;
	tir_artifact *art;
	int status;                /* TIR_MEASURE_OK while it may run */
	char msg[512];
} job;

typedef struct builders {
	const tir_workload *w;
	const tir_target *t;
	const tir_runner *r;
	job *jobs;
	int n;
	tir_run_stream *stream;    /* NULL: the runs wait for every build */
	int *order;                /* compile order: largest first */
} builders;

/* Phase 1a for one candidate: replay, validate, generate code. */
static void generate_at(void *ctx, int i)
{
	builders *b = ctx;
	job *j = &b->jobs[i];
	tir_error e = { "" };
	tir_sched *s = search_replay(b->w, b->t, j->trace, &e);
	if (s)
		j->code = tir_codegen(tir_sched_program(s), b->t, &e);
	tir_sched_free(s);
	if (!j->code) {
		j->status = TIR_MEASURE_BUILD_ERROR;
		snprintf(j->msg, sizeof j->msg, "%s%s", !s ? "replay: " : "", e.msg);
	}
}

/* Phase 1b for the k-th candidate in compile order: compile; into the
 * stream when there is one. */
static void build_at(void *ctx, int k)
{
	builders *b = ctx;
	int i = b->order[k];
	job *j = &b->jobs[i];
	if (!j->code)
		return;
	tir_error e = { "" };
	j->art = b->r->build(j->code, b->t, &e);
	if (!j->art) {
		j->status = TIR_MEASURE_BUILD_ERROR;
		snprintf(j->msg, sizeof j->msg, "%s", e.msg);
	} else if (b->stream) {
		b->r->stream_put(b->stream, i, j->art, j->code);
	}
}

void *tir_measure_cache_new(void)
{
	return xcalloc(1, sizeof(search_local));
}

void tir_measure_cache_phases(const void *cache, tir_measure_phases *out)
{
	const search_local *l = cache;
	memset(out, 0, sizeof *out);
	if (l)
		*out = l->phases;
}

void tir_measure_cache_free(void *cache)
{
	search_local_clear(cache);
	free(cache);
}

void search_local_clear(search_local *l)
{
	if (!l)
		return;
	free(l->ref);
	l->ref = NULL;
	l->ref_n = 0;
	l->ref_key[0] = '\0';
}

/* The reference output for w and seed, computed with the argument list of
 * code (any candidate's); kept in l when there is one.  *owned says whether
 * the caller frees it. */
static const double *reference(search_local *l, const tir_workload *w, const tir_code *code,
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
	search_local_clear(l);
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
	out->latency_us = mr->status == TIR_MEASURE_OK ? mr->median_us : 0;
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
		}
	free(res);
}

int tir_measure_local(void *ctx, const tir_workload *w, const tir_target *t, int n,
		      const char *const *traces, tir_candidate *out)
{
	search_local *l = ctx;
	tir_measure_opts o = tir_measure_opts_default(l ? &l->opts : NULL);
	builders b = { .w = w, .t = t, .r = tir_runner_for(t), .n = n };
	b.jobs = xcalloc((size_t)n + 1, sizeof(job));
	for (int i = 0; i < n; i++) {
		b.jobs[i].trace = traces[i];
		b.jobs[i].status = TIR_MEASURE_OK;
	}
	int threads = l && l->threads > 0 ? l->threads : 0;
	tir_measure_phases ph = { 0 };
	double t0 = tir_now_s();
	/* 1a. every candidate's code, in parallel (fast next to compiling) */
	search_parallel_for(n, threads, generate_at, &b);
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
	if (ref && b.r->stream_start)
		b.stream = b.r->stream_start(n, first, &o, ref, ref_n);
	search_parallel_for(n, threads, build_at, &b);
	double t3 = tir_now_s();
	ph.build_s = (t1 - t0) + (t3 - t2);
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
		} else if (!b.stream) {
			run_one(b.r, j, &o, ref, ref_n, &out[i], &ph);
		}
	}
	if (b.stream)
		stream_results(&b, out, &ph);
	ph.run_s = tir_now_s() - t3;
	if (l)
		l->phases = ph;
	for (int i = 0; i < n; i++) {
		b.r->free(b.jobs[i].art);
		tir_code_free(b.jobs[i].code);
	}
	if (owned)
		free((double *)ref);
	free(b.order);
	free(b.jobs);
	return 0;
}
