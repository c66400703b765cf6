/*
 * nvrtc_opts.c — what NVRTC options cost and give: the same candidates
 * built with tird's own options and with others ($TIRD_NVRTC_OPTIONS),
 * each set measured as tird-worker measures a batch, side by side in one run.
 *
 *   bench/nvrtc_opts [--n N] [--seed S] [--target T] [--rounds R] WORKLOAD_JSON OPTS...
 *
 * Draws N (32) random valid candidates of the workload (the document
 * itself, e.g. '{"op":"matmul","M":1024,"N":1024,"K":1024}') on target T
 * (cuda: this machine's first GPU), then R (2) rounds of: for each OPTS
 * (a string of NVRTC options; "" is tird's own), the whole batch built
 * afresh (a new measuring context: no compile cache across sets) and
 * measured by tir_measure_local.  Printed per set: the build's seconds
 * (the batch on every core), the candidates ok, and against the first set
 * (same candidate, same round): the geometric mean and the worst of the
 * per-candidate time ratios, the share of candidate pairs ordered alike,
 * the set's own best and what the first set's best candidate takes under it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tir.h"
#include "tests/testutil.h"

#define MAXC 256
#define MAXO 8

static int best_of(int n, const double *a)
{
	int b = -1;
	for (int i = 0; i < n; i++)
		if (a[i] > 0 && (b < 0 || a[i] < a[b]))
			b = i;
	return b;
}

static void usage(void)
{
	fprintf(stderr, "usage: bench/nvrtc_opts [--n N] [--seed S] [--target T] [--rounds R] "
		"WORKLOAD_JSON OPTS...\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int n = 32, rounds = 2;
	unsigned long long seed = 1;
	const char *target = "cuda";
	int a = 1;
	for (; a + 1 < argc && !strncmp(argv[a], "--", 2); a += 2) {
		if (!strcmp(argv[a], "--n"))
			n = atoi(argv[a + 1]);
		else if (!strcmp(argv[a], "--seed"))
			seed = strtoull(argv[a + 1], NULL, 10);
		else if (!strcmp(argv[a], "--target"))
			target = argv[a + 1];
		else if (!strcmp(argv[a], "--rounds"))
			rounds = atoi(argv[a + 1]);
		else
			usage();
	}
	if (argc - a < 2 || n < 2 || n > MAXC || rounds < 1 || argc - a - 1 > MAXO)
		usage();
	const char *doc = argv[a];
	int nopt = argc - a - 1;
	char **opts = argv + a + 1;

	tir_error err = { "" };
	tir_workload *w = tir_workload_parse(doc, strlen(doc), NULL, &err);
	tir_target t;
	if (!w || tir_target_parse(target, &t, &err) < 0) {
		fprintf(stderr, "nvrtc_opts: %s\n", err.msg);
		return 1;
	}
	tir_sched *c[MAXC];
	int m = tir_sample_candidates(w, &t, n, seed, c, &err);
	if (m < 2) {
		fprintf(stderr, "nvrtc_opts: sampling: %s\n", m < 0 ? err.msg : "too few candidates");
		return 1;
	}
	const char *traces[MAXC];
	for (int i = 0; i < m; i++)
		traces[i] = tir_sched_trace(c[i]);

	static double us[MAXO][MAXC];
	double build_s[MAXO] = { 0 }, bmin[MAXO], bmax[MAXO];
	int okc[MAXO] = { 0 };
	char why[MAXO][160] = { { 0 } };   /* the first failure of each set */
	printf("# %s on %s: %d candidates (seed %llu), %d rounds\n", tir_workload_key(w), t.key,
	       m, seed, rounds);
	for (int r = 0; r < rounds; r++) {
		for (int o = 0; o < nopt; o++) {
			setenv("TIRD_NVRTC_OPTIONS", opts[o], 1);
			void *ctx = tir_measure_cache_new();
			tir_candidate out[MAXC];
			if (tir_measure_local(ctx, w, &t, m, traces, out) < 0) {
				fprintf(stderr, "nvrtc_opts: measuring with \"%s\" failed\n", opts[o]);
				return 1;
			}
			tir_measure_phases ph;
			tir_measure_cache_phases(ctx, &ph);
			tir_measure_cache_free(ctx);
			printf("# round %d, %s: built %d in %.2f s (code %.2f s), runs after the builds %.2f s\n",
			       r + 1, opts[o][0] ? opts[o] : "(tird's own)", ph.built, ph.build_s,
			       ph.generate_s, ph.run_s);
			build_s[o] += ph.build_s;
			if (r == 0 || ph.build_s < bmin[o])
				bmin[o] = ph.build_s;
			if (r == 0 || ph.build_s > bmax[o])
				bmax[o] = ph.build_s;
			int ok = 0;
			for (int i = 0; i < m; i++) {
				double v = out[i].status == 0 ? out[i].latency_us : 0;
				/* the best of the rounds: each candidate's own floor */
				if (v > 0 && (us[o][i] <= 0 || v < us[o][i]))
					us[o][i] = v;
				ok += v > 0;
				if (v <= 0 && !why[o][0])
					snprintf(why[o], sizeof why[o], "%s", out[i].msg ? out[i].msg : "failed");
			}
			if (r == rounds - 1)
				okc[o] = ok;
		}
	}
	printf("%-28s %8s %13s %4s %9s %9s %8s %10s %12s\n", "options", "build_s", "build_min-max",
	       "ok", "geo_ratio", "max_ratio", "pairs", "best_us", "first's_best");
	int b0 = best_of(m, us[0]);
	for (int o = 0; o < nopt; o++) {
		double lg = 0, worst = 0;
		int k = 0;
		for (int i = 0; i < m; i++)
			if (us[o][i] > 0 && us[0][i] > 0) {
				double q = us[o][i] / us[0][i];
				lg += log(q);
				worst = q > worst ? q : worst;
				k++;
			}
		int bo = best_of(m, us[o]);
		char range[32];
		snprintf(range, sizeof range, "%.2f-%.2f", bmin[o], bmax[o]);
		printf("%-28s %8.2f %13s %4d %9.3f %9.3f %8.3f %10.2f %12.2f\n",
		       opts[o][0] ? opts[o] : "(tird's own)", build_s[o] / rounds, range, okc[o],
		       k ? exp(lg / k) : NAN, worst, tu_pairs_alike(m, us[0], us[o]),
		       bo >= 0 ? us[o][bo] : NAN, b0 >= 0 ? us[o][b0] : NAN);
	}
	for (int o = 0; o < nopt; o++)
		if (why[o][0])
			printf("# %s: first failure: %s\n", opts[o][0] ? opts[o] : "(tird's own)", why[o]);
	for (int i = 0; i < m; i++) {
		free((char *)traces[i]);
		tir_sched_free(c[i]);
	}
	tir_workload_free(w);
	return 0;
}
