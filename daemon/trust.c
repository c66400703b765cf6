/*
 * trust.c — what tird believes of a measurement it did not make itself.
 *
 * A shared cache is only as good as its worst record: a best is served to
 * the whole team, so nothing forged may become one.  Two doors let numbers
 * in, and both are checked here, by the same bounds:
 *
 *   - a worker's results (workers_measure): an "ok" is stored as ok only
 *     with a finite latency at or above the floor below and a max_rel_error
 *     within the check's tolerance for the workload (tir_workload_tolerance);
 *     else it is stored as run_error / wrong_result with the reason;
 *   - an import (POST /v1/records, trust_check_import): every record's trace
 *     must replay on its workload and validate for its target (the trace is
 *     stored in its canonical form, tir_sched_trace, so a clone of a record
 *     with a space added is the same record, not a new one), and an ok
 *     record must keep to the same bounds; the first fault refuses the whole
 *     file, naming records[i].
 *
 * The floor: no result may be faster than the workload's flops
 * (tir_workload_flops) at the ceiling of its full target key for the
 * workload's dtype (tir_target_ceiling, tuner/target.c, where the table and
 * the reasons for each figure live).  It is made from the key alone, so an
 * importing tird with no such hardware makes the same floor as the one that
 * measured it.  The floor must never refuse a genuine measurement, so every
 * figure it rests on is an upper bound, not the nominal peak tir_target_peak
 * plots:
 *
 *   - the flops are a lower bound of the work of any program tird makes for
 *     the workload: schedule primitives tile, reorder, cache and inline but
 *     never drop an iteration of a reduction, and a padding stage inlined
 *     into one is a select still multiplied (a compiler that skipped the
 *     padded taps would do less: the margin of 2 on CUDA, and the generous
 *     factors on a CPU, cover up to half the taps padded, and the suite's
 *     worst is DIL-3's 25%); a transposed convolution runs as a direct one
 *     over its stride-dilated input, more multiply-adds than it counts;
 *   - CUDA: per sm architecture the highest dense data-sheet throughput of
 *     any part of that architecture for the dtype, tensor cores included
 *     (float32 as TF32, which tird may not use but a floor must not assume),
 *     times 2 for boost clocks and for structured sparsity;
 *   - CPU: the key's widest vector register, the widest multiply-add of any
 *     ISA for the dtype (AMX where an x86 key names avx512vnni), 3 (x86) or
 *     4 (AArch64) pipes, 6 GHz and 512 cores: a key names no core count and
 *     workers register none, so the per-worker bound (a tighter per-core
 *     figure times the worker's cores) has nothing to rest on; the floor is
 *     the same for a worker's results and for an import.
 *
 * The floor is a flops floor only.  A bytes floor (compulsory bytes over the
 * fastest memory that could hold the inputs) is not sound from a key:
 * latency is timed over repeated runs on the same buffers, so inputs that fit
 * in L2 or shared memory are read at cache bandwidth, which no key names and
 * which is within a small factor of the register file's; a floor from DRAM
 * bandwidth would refuse genuine measurements of every cache-resident
 * workload, and one from cache bandwidth sits below the flops floor for the
 * workloads that matter.
 *
 * Against the fastest records (tests/check_trust.c keeps them) the floor is
 * 2.6x under cuBLAS's 4096^3 float16 matmul on an H200 (181.69 us, 76% of the
 * data-sheet peak) and more under anything smaller; on a CPU key, which
 * names no core count, 630x or more under this 2-core VM's bests.  A 1e-9 us
 * "measurement" is refused everywhere.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tird.h"

/* A throughput, GFLOP/s, as a person reads it: "1,978 TFLOP/s" (unit:
 * "FLOP/s" or "OP/s"). */
static void print_rate(char *out, size_t n, double gflops, const char *unit)
{
	double v = gflops >= 1e3 ? gflops / 1e3 : gflops;
	const char *pre = gflops >= 1e3 ? "T" : "G";
	long long r = llround(v);
	if (r >= 1000)
		snprintf(out, n, "%lld,%03lld %s%s", r / 1000, r % 1000, pre, unit);
	else
		snprintf(out, n, "%.3g %s%s", v, pre, unit);
}

/* The floor of w's latency on t, microseconds, and how it was made. */
static double floor_of(const tir_workload *w, const tir_target *t, char *why, size_t n)
{
	int dt = tir_workload_dtype(w);
	tir_ceiling c;
	tir_target_ceiling(t, dt, &c);
	double flops = tir_workload_flops(w);
	char rate[48];
	print_rate(rate, sizeof rate, c.gflops, c.unit);
	snprintf(why, n, "%.2g flops at the ceiling of %s for %s, %s = %s", flops, t->key,
		 dt < 0 ? "any dtype" : tir_dtype_name(dt), rate, c.basis);
	return flops / (c.gflops * 1e9) * 1e6;
}

int trust_bounds_of(const tir_workload *w, const tir_target *t, trust_bounds *b,
		    tir_error *err)
{
	double tol = tir_workload_tolerance(w, err);
	if (tol < 0)
		return -1;
	b->tolerance = tol;
	b->floor_us = floor_of(w, t, b->floor_why, sizeof b->floor_why);
	return 0;
}

bool trust_check_result(const trust_bounds *b, int *status, double latency_us,
			double max_rel_error, char *why, size_t n)
{
	if (*status != TIR_MEASURE_OK)
		return true;
	if (!isfinite(latency_us) || !(latency_us > 0)) {
		snprintf(why, n, "reported ok with latency_us %g, not a finite number > 0",
			 latency_us);
		*status = TIR_MEASURE_RUN_ERROR;
		return false;
	}
	if (latency_us < b->floor_us) {
		snprintf(why, n, "reported ok with latency_us %g, below the floor %.3g us: %s",
			 latency_us, b->floor_us, b->floor_why);
		*status = TIR_MEASURE_RUN_ERROR;
		return false;
	}
	if (!isfinite(max_rel_error) || max_rel_error < 0 || max_rel_error > b->tolerance) {
		if (max_rel_error < 0 && isfinite(max_rel_error))
			snprintf(why, n, "reported ok without max_rel_error (the check it passed)");
		else
			snprintf(why, n, "reported ok with max_rel_error %g, beyond the check's "
				 "tolerance %g", max_rel_error, b->tolerance);
		*status = TIR_MEASURE_WRONG_RESULT;
		return false;
	}
	return true;
}

int trust_canonical_trace(const tir_workload *w, const tir_target *t, const char *trace,
			  char **canon, tir_error *err)
{
	tir_error e = { "" };
	*canon = NULL;
	tir_sched *s = tir_sched_new(w, 0, &e);
	if (!s)
		return tir_fail(err, "the workload's program: %s", e.msg);
	int rc = -1;
	if (tir_sched_replay(s, trace, &e))
		tir_fail(err, "the trace does not replay: %s", e.msg);
	else if (tir_verify(tir_sched_program(s), t, &e))
		tir_fail(err, "the trace does not validate for %s: %s", t->key, e.msg);
	else if (!(*canon = tir_sched_trace(s)))
		tir_fail(err, "the trace cannot be printed again");
	else
		rc = 0;
	tir_sched_free(s);
	return rc;
}

/* ---- imports -------------------------------------------------------------------------- */

typedef struct import_check {
	const tir_records *recs;
	const double *tolerance;       /* per workload of the file; -1: no program */
	char **canon;                  /* per record: the canonical trace, malloc'd */
	char (*why)[512];              /* per record: the fault, "" none */
} import_check;

static void check_one(void *ctx, int i)
{
	import_check *c = ctx;
	const tir_record *x = tir_records_at(c->recs, i);
	const tir_workload *w = tir_records_workload(c->recs, x->workload);
	tir_target t;
	tir_error e = { "" };
	if (tir_target_parse(x->target, &t, &e)) {
		snprintf(c->why[i], sizeof c->why[i], "records[%d]: target: %s", i, e.msg);
		return;
	}
	if (c->tolerance[x->workload] < 0) {
		snprintf(c->why[i], sizeof c->why[i], "records[%d]: its workload's program cannot "
			 "be built", i);
		return;
	}
	int status = tir_measure_status_parse(x->status);
	char why[480];
	trust_bounds b = { .tolerance = c->tolerance[x->workload] };
	b.floor_us = floor_of(w, &t, b.floor_why, sizeof b.floor_why);
	if (!trust_check_result(&b, &status, x->latency_us, x->max_rel_error, why, sizeof why)) {
		snprintf(c->why[i], sizeof c->why[i], "records[%d]: %s", i, why);
		return;
	}
	if (trust_canonical_trace(w, &t, x->trace, &c->canon[i], &e))
		snprintf(c->why[i], sizeof c->why[i], "records[%d]: %.360s", i, e.msg);
}

char **trust_check_import(const tir_records *recs, tir_error *err)
{
	int nw = tir_records_workloads(recs), nr = tir_records_count(recs);
	double *tol = tird_xcalloc((size_t)nw + 1, sizeof *tol);
	for (int i = 0; i < nw; i++) {
		tir_error e = { "" };
		tol[i] = tir_workload_tolerance(tir_records_workload(recs, i), &e);
	}
	import_check c = { recs, tol, tird_xcalloc((size_t)nr + 1, sizeof(char *)),
			   tird_xcalloc((size_t)nr + 1, sizeof *c.why) };
	tir_parallel_for(nr, 0, check_one, &c);
	int bad = -1;
	for (int i = 0; i < nr && bad < 0; i++)
		if (c.why[i][0])
			bad = i;
	if (bad >= 0) {
		tir_fail(err, "%s", c.why[bad]);
		for (int i = 0; i < nr; i++)
			free(c.canon[i]);
		free(c.canon);
		c.canon = NULL;
	}
	free(c.why);
	free(tol);
	return c.canon;
}
