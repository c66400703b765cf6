/*
 * sketch.c — the search space of a workload on a target: tir_sketches,
 * tir_sketch_apply and tir_sample_candidates (tir.h).
 *
 * Design.  Each target kind has a table of sketch definitions (cpu.c,
 * gpu.c); the sketches of a workload are the definitions whose applies()
 * accepts its initial program, numbered in table order.  Applying one
 * schedules a fresh tir_sched, drawing every open decision from the
 * schedule's generator, so a candidate is fully described by its trace.
 *
 * tir_sample_candidates draws candidates one at a time: a sketch picked at
 * random, applied to a fresh schedule whose seed is derived from the caller's
 * seed and the draw's index, validated with tir_verify.  Invalid and
 * duplicate draws (the same trace text as an earlier candidate) are dropped
 * and drawn again, up to a bound, so the result is deterministic for a seed
 * and may hold fewer than n candidates when the space is small.
 */
#include <stdlib.h>
#include <string.h>
#include "sketch.h"

/* The table of the target's kind. */
static const sketch_def *table_of(const tir_target *t, int *n)
{
	if (t->kind == TIR_TARGET_CUDA) {
		*n = sketch_gpu_ndefs;
		return sketch_gpu_defs;
	}
	*n = sketch_cpu_ndefs;
	return sketch_cpu_defs;
}

/* The definitions that apply to p, in table order; returns their count. */
static int applicable(const tir_program *p, const tir_target *t,
		      const sketch_def **out, int max)
{
	int n, k = 0;
	const sketch_def *defs = table_of(t, &n);
	for (int i = 0; i < n && k < max; i++)
		if (!defs[i].applies || defs[i].applies(p, t))
			out[k++] = &defs[i];
	return k;
}

int tir_sketches(const tir_workload *w, const tir_target *t, tir_sketch *out,
		 int max, tir_error *err)
{
	tir_program *p = tir_program_build(w, err);
	if (!p)
		return -1;
	const sketch_def *defs[TIR_MAX_SKETCHES];
	int n = applicable(p, t, defs, TIR_MAX_SKETCHES);
	tir_program_free(p);
	if (n == 0)
		return tir_fail(err, "no %s sketch applies to this %s workload",
				t->kind == TIR_TARGET_CUDA ? "cuda" : "cpu", tir_workload_op(w));
	for (int i = 0; i < n && i < max; i++) {
		memset(&out[i], 0, sizeof out[i]);
		strncpy(out[i].name, defs[i]->name, sizeof out[i].name - 1);
		out[i].id = i;
	}
	return n;
}

int tir_sketch_apply(const tir_workload *w, const tir_target *t, int id,
		     tir_sched *s, tir_error *err)
{
	(void)w;
	if (s->ninst)
		return tir_fail(err, "sketch %d: the schedule is not fresh (%d instructions applied)",
				id, s->ninst);
	const sketch_def *defs[TIR_MAX_SKETCHES];
	int n = applicable(s->p, t, defs, TIR_MAX_SKETCHES);
	if (id < 0 || id >= n)
		return tir_fail(err, "no sketch %d: this workload has %d on %s", id, n, t->key);
	tir_error e;
	if (defs[id]->apply(s, t, &e))
		return tir_fail(err, "sketch \"%s\": %s", defs[id]->name, e.msg);
	return 0;
}

/* Draws past this many per requested candidate are not made. */
#define DRAWS_PER_CANDIDATE 8

int tir_sample_candidates(const tir_workload *w, const tir_target *t, int n,
			  uint64_t seed, tir_sched **out, tir_error *err)
{
	tir_sketch sk[TIR_MAX_SKETCHES];
	int ns = tir_sketches(w, t, sk, TIR_MAX_SKETCHES, err);
	if (ns < 0)
		return -1;
	if (n <= 0)
		return 0;
	char **traces = xcalloc((size_t)n, sizeof *traces);
	int made = 0;
	int64_t budget = (int64_t)n * DRAWS_PER_CANDIDATE + 16;
	tir_error last = { "" };
	for (uint64_t draw = 0; made < n && (int64_t)draw < budget; draw++) {
		uint64_t ds = tir_derive(seed, draw, 0x5e7c4);
		int id = (int)(tir_derive(ds, 1, 2) % (uint64_t)ns);
		tir_sched *s = tir_sched_new(w, ds, err);
		if (!s) {
			for (int i = 0; i < made; i++)
				tir_sched_free(out[i]);
			for (int i = 0; i < made; i++)
				free(traces[i]);
			free(traces);
			return -1;
		}
		if (tir_sketch_apply(w, t, id, s, &last) ||
		    tir_verify(tir_sched_program(s), t, &last)) {
			tir_sched_free(s);
			continue;
		}
		char *tr = tir_sched_trace(s);
		bool dup = false;
		for (int i = 0; i < made && !dup; i++)
			dup = !strcmp(traces[i], tr);
		if (dup) {
			free(tr);
			tir_sched_free(s);
			continue;
		}
		traces[made] = tr;
		out[made++] = s;
	}
	for (int i = 0; i < made; i++)
		free(traces[i]);
	free(traces);
	if (made == 0)
		return tir_fail(err, "no valid candidate in %lld draws; the last failure: %s",
				(long long)budget, last.msg[0] ? last.msg : "duplicates only");
	return made;
}
