/*
 * batch.c — tir_measure_local: a batch of candidates measured on this
 * machine.
 *
 * Two phases, so that timings are clean and builds are fast:
 *
 *   1. build, in parallel on every core (search_parallel_for; ctx->threads to limit):
 *      each candidate's trace is replayed on a fresh schedule and validated,
 *      its code generated (tir_codegen) and built by the target's runner;
 *   2. run, ONE AT A TIME: where the runner has run_batch (CUDA), every
 *      candidate that built goes to it in one call, which measures them one
 *      after another in one guarded child (a fresh one after a candidate
 *      that crashes or hangs) and compares each output with the reference
 *      inside it, timing only the ones that matched; otherwise (CPU) each
 *      candidate runs and is timed in a child of its own (runner.c's guard)
 *      and its output is compared here.
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
 * in it and the runs fork only after the builders have joined.  The
 * reference is computed before any fork, so the children inherit it.
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
} builders;

/* Phase 1 for one candidate. */
static void build_one(const builders *b, job *j)
{
	tir_error e = { "" };
	tir_sched *s = search_replay(b->w, b->t, j->trace, &e);
	if (s)
		j->code = tir_codegen(tir_sched_program(s), b->t, &e);
	if (j->code)
		j->art = b->r->build(j->code, b->t, &e);
	tir_sched_free(s);
	if (!j->art) {
		j->status = TIR_MEASURE_BUILD_ERROR;
		snprintf(j->msg, sizeof j->msg, "%s%s", !s ? "replay: " : "", e.msg);
	}
}

static void build_at(void *ctx, int i)
{
	builders *b = ctx;
	build_one(b, &b->jobs[i]);
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

/* Phase 2 through the runner's run_batch: every candidate that built, in
 * one call. */
static void run_batched(const builders *b, const tir_measure_opts *o, const double *ref,
			int64_t ref_n, tir_candidate *out, tir_measure_phases *ph)
{
	int *idx = xcalloc((size_t)b->n + 1, sizeof *idx);
	const tir_artifact **arts = xcalloc((size_t)b->n + 1, sizeof *arts);
	const tir_code **codes = xcalloc((size_t)b->n + 1, sizeof *codes);
	int m = 0;
	for (int i = 0; i < b->n; i++)
		if (b->jobs[i].status == TIR_MEASURE_OK) {
			idx[m] = i;
			arts[m] = b->jobs[i].art;
			codes[m++] = b->jobs[i].code;
		}
	tir_measure_result *res = xcalloc((size_t)m + 1, sizeof *res);
	ph->processes = b->r->run_batch(m, arts, codes, o, ref, ref_n, res);
	for (int k = 0; k < m; k++) {
		record(&res[k], &out[idx[k]]);
		ph->candidates_s += res[k].run_s;
		ph->timing_s += res[k].timing_s;
	}
	free(res);
	free(codes);
	free(arts);
	free(idx);
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
	tir_measure_phases ph = { 0 };
	double t0 = tir_now_s();
	/* 1. build everything, in parallel */
	search_parallel_for(n, l && l->threads > 0 ? l->threads : 0, build_at, &b);
	double t1 = tir_now_s();
	ph.build_s = t1 - t0;
	for (int i = 0; i < n; i++)
		ph.built += b.jobs[i].art != NULL;

	/* the reference, from the first candidate that built */
	const double *ref = NULL;
	int64_t ref_n = 0;
	bool owned = false;
	tir_error e = { "" };
	for (int i = 0; i < n && !ref; i++)
		if (b.jobs[i].art && !(ref = reference(l, w, b.jobs[i].code, o.seed, &ref_n,
						      &owned, &e)))
			break;
	double t2 = tir_now_s();
	ph.reference_s = t2 - t1;

	/* 2. run them one at a time: in one batch where the runner can */
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
		} else if (!b.r->run_batch) {
			run_one(b.r, j, &o, ref, ref_n, &out[i], &ph);
		}
	}
	if (ref && b.r->run_batch)
		run_batched(&b, &o, ref, ref_n, out, &ph);
	ph.run_s = tir_now_s() - t2;
	if (l)
		l->phases = ph;
	for (int i = 0; i < n; i++) {
		b.r->free(b.jobs[i].art);
		tir_code_free(b.jobs[i].code);
	}
	if (owned)
		free((double *)ref);
	free(b.jobs);
	return 0;
}
