/*
 * measure_noise.c — how repeatable tird's CPU measurements are, for the
 * two ways its CPU runner can measure a batch, side by side in one run.
 *
 *   bench/measure_noise [--repeats N] RECORDS NAME...
 *
 * For each workload NAME (a suite name, or the start of a workload key) of
 * the records file RECORDS (`tirctl export`), its candidates measured "ok"
 * there are built once, then measured twice (A, B) each way, in the order
 * one-A, batch-A, one-B, batch-B:
 *   one    one guarded child per candidate (the CPU runner's run()): N
 *          repeats in a row, their median (what tird did before);
 *   batch  the runner's run_batch (what tir_measure_local, the search and
 *          tird-worker use): a checking pass, then N rounds interleaved
 *          across the batch, each candidate's best round.
 * N is 10 unless --repeats says otherwise (tird's defaults are 5 repeats
 * for a run and 10 rounds for a batch).
 * Printed per workload and way: the share of candidate pairs that A and B
 * order alike (the ceiling for any cost model's pairwise accuracy on
 * labels measured that way), the mean |A/B - 1|, the agreement of A with
 * the records' own figures, and the seconds a measurement of the batch
 * took (runs only; the builds are shared).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tir.h"
#include "measure/measure.h"
#include "tests/testutil.h"

#define MAXC 256

static double mean_dev(int n, const double *a, const double *b)
{
	double s = 0;
	int m = 0;
	for (int i = 0; i < n; i++)
		if (a[i] > 0 && b[i] > 0) {
			s += fabs(a[i] / b[i] - 1);
			m++;
		}
	return m ? s / m : NAN;
}

/* The index in r of the workload NAME names, or -1. */
static int find_workload(const tir_records *r, const char *name)
{
	char *json = tu_suite_workload(name);
	const char *key = NULL;
	tir_workload *w = NULL;
	if (json) {
		tir_error err;
		w = tir_workload_parse(json, strlen(json), NULL, &err);
		key = w ? tir_workload_key(w) : NULL;
	}
	int found = -1;
	for (int i = 0; i < tir_records_workloads(r) && found < 0; i++) {
		const char *k = tir_workload_key(tir_records_workload(r, i));
		if (key ? !strcmp(k, key) : !strncmp(k, name, strlen(name)))
			found = i;
	}
	tir_workload_free(w);
	free(json);
	return found;
}

/* One measurement of the n built candidates, the latencies into us (-1
 * for a candidate not ok); returns the seconds it took. */
static int repeats = 10;

static double measure(bool batch, int n, const tir_artifact *const *a,
		      const tir_code *const *c, const double *ref, int64_t ref_n,
		      double *us)
{
	tir_measure_opts o = { .seed = 1, .repeats = repeats, .rounds = repeats };
	tir_measure_result *r = calloc((size_t)n, sizeof *r);
	double t0 = tir_now_s();
	if (batch) {
		tir_runner_cpu.run_batch(n, a, c, &o, ref, ref_n, r);
		for (int i = 0; i < n; i++)
			us[i] = r[i].status == TIR_MEASURE_OK ? r[i].latency_us : -1;
	} else {
		for (int i = 0; i < n; i++) {
			tir_runner_cpu.run(a[i], c[i], &o, &r[i]);
			us[i] = r[i].status == TIR_MEASURE_OK ? r[i].latency_us : -1;
			tir_measure_result_clear(&r[i]);
		}
	}
	double s = tir_now_s() - t0;
	free(r);
	return s;
}

int main(int argc, char **argv)
{
	if (argc > 2 && !strcmp(argv[1], "--repeats")) {
		repeats = atoi(argv[2]);
		if (repeats < 1 || repeats > TIR_MEASURE_MAX_REPEATS) {
			fprintf(stderr, "measure_noise: --repeats takes 1 to %d\n",
				TIR_MEASURE_MAX_REPEATS);
			return 2;
		}
		argv += 2;
		argc -= 2;
	}
	if (argc < 3) {
		fprintf(stderr, "usage: measure_noise [--repeats N] RECORDS NAME...\n");
		return 2;
	}
	tir_error err;
	tir_records_fault fault;
	tir_records *rs = tir_records_read(argv[1], NULL, &fault, &err);
	if (!rs) {
		fprintf(stderr, "measure_noise: %s\n", err.msg);
		return 1;
	}
	printf("# bench/measure_noise --repeats %d %s, each workload's \"ok\" records measured "
	       "twice (A, B) each way\n", repeats, argv[1]);
	printf("%-10s %4s  %-6s %8s %10s %10s %8s\n", "workload", "n", "way", "A~B",
	       "|A/B-1|", "rec~A", "s");
	int status = 0;
	for (int q = 2; q < argc; q++) {
		int wi = find_workload(rs, argv[q]);
		if (wi < 0) {
			fprintf(stderr, "measure_noise: no workload %s in %s\n", argv[q], argv[1]);
			status = 1;
			continue;
		}
		const tir_workload *w = tir_records_workload(rs, wi);
		const tir_code *c[MAXC];
		const tir_artifact *a[MAXC];
		double rec[MAXC];
		int n = 0;
		tir_target t;
		for (int i = 0; i < tir_records_count(rs) && n < MAXC; i++) {
			const tir_record *x = tir_records_at(rs, i);
			if (x->workload != wi || strcmp(x->status, "ok"))
				continue;
			if (tir_target_parse(x->target, &t, &err) || t.kind != TIR_TARGET_CPU)
				continue;
			tir_sched *s = tir_sched_new(w, 1, &err);
			if (!s || tir_sched_replay(s, x->trace, &err)) {
				tir_sched_free(s);
				continue;
			}
			tir_code *code = tir_codegen(tir_sched_program(s), &t, &err);
			tir_sched_free(s);
			tir_artifact *art = code ? tir_runner_cpu.build(code, &t, &err) : NULL;
			if (!art) {
				tir_code_free(code);
				continue;
			}
			c[n] = code;
			a[n] = art;
			rec[n++] = x->latency_us;
		}
		if (n < 2) {
			fprintf(stderr, "measure_noise: %s: fewer than 2 CPU candidates built\n",
				argv[q]);
			status = 1;
			continue;
		}
		double *ref = NULL;
		int64_t ref_n = 0;
		if (tir_measure_reference(w, c[0], 1, &ref, &ref_n, &err)) {
			fprintf(stderr, "measure_noise: %s: %s\n", argv[q], err.msg);
			return 1;
		}
		static double us[2][2][MAXC];   /* [way][A/B][candidate] */
		double secs[2][2];
		for (int rep = 0; rep < 2; rep++)
			for (int way = 0; way < 2; way++)
				secs[way][rep] = measure(way == 1, n, a, c, ref, ref_n, us[way][rep]);
		for (int way = 0; way < 2; way++)
			printf("%-10s %4d  %-6s %8.3f %10.3f %10.3f %8.1f\n", argv[q], n,
			       way ? "batch" : "one", tu_pairs_alike(n, us[way][0], us[way][1]),
			       mean_dev(n, us[way][0], us[way][1]), tu_pairs_alike(n, rec, us[way][0]),
			       0.5 * (secs[way][0] + secs[way][1]));
		fflush(stdout);
		free(ref);
		for (int i = 0; i < n; i++) {
			tir_runner_cpu.free((tir_artifact *)a[i]);
			tir_code_free((tir_code *)c[i]);
		}
	}
	tir_records_free(rs);
	return status;
}
