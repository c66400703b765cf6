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
 * The floor: no result may be faster than the workload's flops at a peak no
 * hardware of the target's kind reaches (1 PFLOP/s for a CPU, 100 PFLOP/s
 * for a GPU: both far above any made), so the floor never refuses a genuine
 * measurement and always refuses a latency of 1e-9 us.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tird.h"

#define PEAK_CPU_FLOPS  1e15
#define PEAK_CUDA_FLOPS 1e17

/* The floor of w's latency on a target of this kind, microseconds. */
static double floor_us(const tir_workload *w, tir_target_kind kind)
{
	return tir_workload_flops(w) / (kind == TIR_TARGET_CUDA ? PEAK_CUDA_FLOPS
								 : PEAK_CPU_FLOPS) * 1e6;
}

int trust_bounds_of(const tir_workload *w, const tir_target *t, trust_bounds *b,
		    tir_error *err)
{
	double tol = tir_workload_tolerance(w, err);
	if (tol < 0)
		return -1;
	b->tolerance = tol;
	b->floor_us = floor_us(w, t->kind);
	return 0;
}

bool trust_check_result(const trust_bounds *b, int *status, double latency_us,
			double max_rel_error, char *why, size_t n)
{
	if (*status != TIR_MEASURE_OK)
		return true;
	if (!isfinite(latency_us) || !(latency_us > 0) || latency_us < b->floor_us) {
		snprintf(why, n, "reported ok with latency_us %g, not a finite number at or above "
			 "the floor %g us (the workload's flops at a peak no hardware reaches)",
			 latency_us, b->floor_us);
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
	char (*why)[400];              /* per record: the fault, "" none */
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
	char why[300];
	trust_bounds b = { c->tolerance[x->workload], floor_us(w, t.kind) };
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
