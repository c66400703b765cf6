/*
 * search_speed.c — the time of the search itself (sketch samples, evolution
 * by mutation and replay, validation, XGBoost scoring), without measurement:
 * the part of tuning the daemon spends while the workers wait.  Tunes each
 * workload with a stand-in measurer (latencies from a hash of the trace, so
 * every run sees the same values) under the XGBoost model, once with one
 * thread and once with one per core, and prints the seconds per round side
 * by side, how those of the run on all cores split between the search and
 * the update after the measurements (replaying the measured traces for the
 * model's features, training the model), and whether both found the same
 * best (they must).
 *
 *   bench/search_speed [--target T] [--trials N] [--batch B] WORKLOAD.json...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tir.h"
#include "costmodel/costmodel.h"

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int stand_in(void *ctx, const tir_workload *w, const tir_target *t, int n,
		    const char *const *traces, tir_candidate *out)
{
	(void)ctx, (void)w, (void)t;
	for (int i = 0; i < n; i++) {
		unsigned h = 5381;
		for (const char *c = traces[i]; *c; c++)
			h = h * 33 + (unsigned char)*c;
		out[i].status = 0;
		out[i].latency_us = 10 + (h % 1000) / 10.0;
		out[i].max_rel_error = 0;
		out[i].msg = NULL;
	}
	return 0;
}

typedef struct phases {
	double search_s, update_s;
} phases;

static void on_progress(void *ctx, const tir_tune_progress *p)
{
	phases *ph = ctx;
	ph->search_s += p->search_s;
	ph->update_s += p->update_s;
}

static int run(const tir_workload *w, const tir_target *t, int trials, int batch, int threads,
	       double *secs, int *rounds, double *best, phases *ph)
{
	cm_model *m = cm_model_new();
	cm_model_set_threads(m, threads);
	tir_tune_opts o = { .trials = trials, .batch = batch, .seed = 3, .threads = threads,
			    .model = &cm_xgboost, .model_self = m, .measure = stand_in,
			    .on_progress = on_progress, .cb_ctx = ph };
	tir_tune_result r;
	tir_error err = { "" };
	double t0 = now();
	int rc = tir_tune(w, t, &o, &r, &err);
	*secs = now() - t0;
	cm_model_free(m);
	if (rc) {
		fprintf(stderr, "tune: %s\n", err.msg);
		return -1;
	}
	*rounds = r.rounds;
	*best = r.best_us;
	tir_tune_result_clear(&r);
	return 0;
}

int main(int argc, char **argv)
{
	const char *target = "cuda:sm_90";
	int trials = 256, batch = 64, i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--target") && i + 1 < argc)
			target = argv[++i];
		else if (!strcmp(argv[i], "--trials") && i + 1 < argc)
			trials = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
			batch = atoi(argv[++i]);
		else
			break;
	}
	if (i >= argc || trials < 1 || batch < 1) {
		fprintf(stderr, "usage: %s [--target T] [--trials N] [--batch B] WORKLOAD.json...\n",
			argv[0]);
		return 2;
	}
	tir_error err = { "" };
	tir_target t;
	if (tir_target_parse(target, &t, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 2;
	}
	printf("%-28s %6s %7s %12s %12s %8s %9s %9s %s\n", "workload", "rounds", "trials",
	       "1 thread s/r", "all cores s/r", "speedup", "search", "update", "same best");
	for (; i < argc; i++) {
		char *json = tir_read_file(argv[i], 0, NULL);
		tir_workload *w = json ? tir_workload_parse(json, strlen(json), NULL, &err) : NULL;
		free(json);
		if (!w) {
			fprintf(stderr, "%s: %s\n", argv[i], json ? err.msg : "cannot read");
			return 1;
		}
		double s1, sn, b1, bn;
		int r1, rn;
		phases p1 = { 0, 0 }, pn = { 0, 0 };
		if (run(w, &t, trials, batch, 1, &s1, &r1, &b1, &p1) ||
		    run(w, &t, trials, batch, 0, &sn, &rn, &bn, &pn))
			return 1;
		printf("%-28.28s %6d %7d %12.3f %12.3f %7.2fx %9.3f %9.3f %s\n", argv[i], r1, trials,
		       s1 / r1, sn / rn, s1 / sn, pn.search_s / rn, pn.update_s / rn,
		       b1 == bn && r1 == rn ? "yes" : "NO");
		tir_workload_free(w);
	}
	return 0;
}
