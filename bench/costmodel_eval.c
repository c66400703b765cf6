/*
 * costmodel_eval.c — what the XGBoost cost model buys, measured on this
 * machine's CPU with tird's own measurements.
 *
 *   bench/costmodel_eval [--suite FILE] [--trials N] [--seeds S] [--svg FILE] NAME...
 *
 * For each suite workload NAME and seed: tir_tune under the random model and
 * under a cold XGBoost model at the same trial budget; the best latency after
 * every batch is the tuning curve.  Then, from every candidate measured:
 *  - held out by workload: a model trained on the other workloads' records
 *    ranks this workload's records: pairwise accuracy and top-10 recall;
 *  - transfer: a run of each workload starting from a model trained on the
 *    other workloads, against the cold runs, after the first two batches.
 * Prints one table per part; with --svg, writes the curves as an SVG plot.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tir.h"
#include "costmodel/costmodel.h"
#include "tests/testutil.h"

#define MAXW 16
#define MAXS 8
#define MAXB 64

typedef struct rows {
	int n, cap;
	float *f;
	double *g;
	int *w;
} rows;

typedef struct run {
	double curve[MAXB];    /* best latency after each batch (0: none yet) */
	int nb;
	double best;
} run;

typedef struct collect {
	const tir_workload *w;
	const tir_target *t;
	int wi;
	rows *r;
	run *run;
	double best;
} collect;

static void add_row(rows *r, int wi, const float *f, double g)
{
	if (r->n == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 1024;
		r->f = realloc(r->f, sizeof(float) * (size_t)r->cap * CM_NFEATURES);
		r->g = realloc(r->g, sizeof(double) * (size_t)r->cap);
		r->w = realloc(r->w, sizeof(int) * (size_t)r->cap);
	}
	memcpy(&r->f[(size_t)r->n * CM_NFEATURES], f, sizeof(float) * CM_NFEATURES);
	r->g[r->n] = g;
	r->w[r->n++] = wi;
}

static void on_result(void *ctx, const tir_candidate *c)
{
	collect *k = ctx;
	tir_error err;
	tir_sched *s = tir_sched_new(k->w, 1, &err);
	if (s && tir_sched_replay(s, c->trace, &err) == 0) {
		float f[CM_NFEATURES];
		if (cm_features(tir_sched_program(s), k->t, f, &err) == 0) {
			double g = c->status == 0 && c->latency_us > 0
				? tir_workload_flops(k->w) / (c->latency_us * 1e3) : 0;
			add_row(k->r, k->wi, f, g);
		}
	}
	tir_sched_free(s);
	if (c->status == 0 && (k->best == 0 || c->latency_us < k->best))
		k->best = c->latency_us;
}

static void on_progress(void *ctx, const tir_tune_progress *p)
{
	collect *k = ctx;
	if (k->run->nb < MAXB)
		k->run->curve[k->run->nb++] = k->best;
}

static void tune(const tir_workload *w, const tir_target *t, int wi, int trials, uint64_t seed,
		 cm_model *m, rows *r, run *out)
{
	memset(out, 0, sizeof *out);
	collect k = { w, t, wi, r, out, 0 };
	tir_tune_opts o = { .trials = trials, .batch = 16, .seed = seed,
			    .model = m ? &cm_xgboost : NULL, .model_self = m,
			    .on_result = on_result, .on_progress = on_progress, .cb_ctx = &k };
	tir_tune_result res;
	tir_error err;
	if (tir_tune(w, t, &o, &res, &err)) {
		fprintf(stderr, "tune: %s\n", err.msg);
		exit(1);
	}
	out->best = res.best_us;
	tir_tune_result_clear(&res);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_d);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* A model of every row except workload `skip`'s. */
static cm_model *train_without(const rows *r, int skip, char names[][32])
{
	cm_model *m = cm_model_new();
	tir_error err;
	for (int i = 0; i < r->n; i++)
		if (r->w[i] != skip)
			cm_model_add(m, names[r->w[i]], 1, &r->f[(size_t)i * CM_NFEATURES], &r->g[i], &err);
	return m;
}

static void svg(const char *path, int nw, char names[][32], run rr[][MAXS], run rx[][MAXS], int ns)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		return;
	}
	const int W = 720, H = 120 + 220 * ((nw + 1) / 2);
	fprintf(f, "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' font-family='sans-serif' font-size='12'>\n", W, H);
	fprintf(f, "<text x='10' y='20' font-size='15'>tird tuning curves: best latency after each batch, normalized to the final best (median of %d seeds); blue = XGBoost, grey = random</text>\n", ns);
	for (int w = 0; w < nw; w++) {
		int x0 = 40 + (w % 2) * 350, y0 = 50 + (w / 2) * 220, pw = 300, ph = 160;
		fprintf(f, "<rect x='%d' y='%d' width='%d' height='%d' fill='none' stroke='black'/>\n", x0, y0, pw, ph);
		fprintf(f, "<text x='%d' y='%d'>%s</text>\n", x0 + 4, y0 + 14, names[w]);
		run *sets[2] = { rr[w], rx[w] };
		const char *col[2] = { "#999999", "#1f5fbf" };
		double floor_v = 1e300;
		for (int k = 0; k < 2; k++)
			for (int s = 0; s < ns; s++)
				if (sets[k][s].best > 0 && sets[k][s].best < floor_v)
					floor_v = sets[k][s].best;
		for (int k = 0; k < 2; k++) {
			int nb = sets[k][0].nb;
			fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='2' points='", col[k]);
			for (int b = 0; b < nb; b++) {
				double v[MAXS];
				int n = 0;
				for (int s = 0; s < ns; s++)
					if (b < sets[k][s].nb && sets[k][s].curve[b] > 0)
						v[n++] = sets[k][s].curve[b];
				if (!n)
					continue;
				double y = floor_v / median(v, n);   /* 1 = the best seen */
				fprintf(f, "%.1f,%.1f ", x0 + (nb > 1 ? (double)b / (nb - 1) : 0) * pw,
					y0 + ph - y * (ph - 20));
			}
			fprintf(f, "'/>\n");
		}
	}
	fprintf(f, "</svg>\n");
	fclose(f);
}

int main(int argc, char **argv)
{
	int trials = 96, ns = 3;
	const char *svgpath = NULL;
	char names[MAXW][32];
	int nw = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--trials") && i + 1 < argc) trials = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--seeds") && i + 1 < argc) ns = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--svg") && i + 1 < argc) svgpath = argv[++i];
		else if (!strcmp(argv[i], "--suite") && i + 1 < argc) setenv("TIR_SUITE_JSON", argv[++i], 1);
		else if (nw < MAXW) snprintf(names[nw++], 32, "%s", argv[i]);
	}
	if (ns > MAXS) ns = MAXS;
	if (!nw) {
		fprintf(stderr, "usage: costmodel_eval [--suite FILE] [--trials N] [--seeds S] [--svg FILE] NAME...\n");
		return 2;
	}
	tir_target t;
	tir_error err;
	if (tir_target_parse("cpu", &t, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	tir_workload *w[MAXW];
	for (int i = 0; i < nw; i++) {
		char *json = tu_suite_workload(names[i]);
		if (!json || !(w[i] = tir_workload_parse(json, strlen(json), NULL, &err))) {
			fprintf(stderr, "%s: %s\n", names[i], json ? err.msg : "not in the suite");
			return 1;
		}
		free(json);
	}
	static run rr[MAXW][MAXS], rx[MAXW][MAXS];
	rows all = { 0 };
	printf("# target %s, %d trials, batch 16, %d seeds\n", t.key, trials, ns);
	printf("%-8s %5s %12s %12s %8s\n", "name", "seed", "random_us", "xgboost_us", "x/r");
	double ratios[MAXW];
	for (int i = 0; i < nw; i++) {
		double rs[MAXS], xs[MAXS];
		for (int s = 0; s < ns; s++) {
			tune(w[i], &t, i, trials, (uint64_t)s + 1, NULL, &all, &rr[i][s]);
			cm_model *m = cm_model_new();
			tune(w[i], &t, i, trials, (uint64_t)s + 1, m, &all, &rx[i][s]);
			cm_model_free(m);
			rs[s] = rr[i][s].best;
			xs[s] = rx[i][s].best;
			printf("%-8s %5d %12.1f %12.1f %8.3f\n", names[i], s + 1, rs[s], xs[s], xs[s] / rs[s]);
			fflush(stdout);
		}
		double mr = median(rs, ns), mx = median(xs, ns);
		ratios[i] = mx / mr;
		printf("%-8s %5s %12.1f %12.1f %8.3f   (median of seeds)\n", names[i], "med", mr, mx, ratios[i]);
	}
	printf("\n# held out by workload: a model of the other workloads' records ranks this one's\n");
	printf("%-8s %6s %10s %10s\n", "name", "rows", "pairwise", "top10_rec");
	for (int i = 0; i < nw && nw > 1; i++) {
		cm_model *m = train_without(&all, i, names);
		int n = 0;
		for (int k = 0; k < all.n; k++)
			n += all.w[k] == i;
		float *f = malloc(sizeof(float) * (size_t)n * CM_NFEATURES);
		double *g = malloc(sizeof(double) * (size_t)n), *p = malloc(sizeof(double) * (size_t)n);
		int j = 0;
		for (int k = 0; k < all.n; k++)
			if (all.w[k] == i) {
				memcpy(&f[(size_t)j * CM_NFEATURES], &all.f[(size_t)k * CM_NFEATURES], sizeof(float) * CM_NFEATURES);
				g[j++] = all.g[k];
			}
		if (cm_model_predict(m, n, f, p) == 0) {
			long ok = 0, tot = 0;
			for (int a = 0; a < n; a++)
				for (int b = a + 1; b < n; b++)
					if (g[a] != g[b]) {
						tot++;
						ok += (p[a] > p[b]) == (g[a] > g[b]);
					}
			/* top-10 recall: the true ten best among the predicted ten best */
			int k10 = n < 10 ? n : 10, hit = 0;
			int *ti = malloc(sizeof(int) * (size_t)n), *pi = malloc(sizeof(int) * (size_t)n);
			for (int a = 0; a < n; a++)
				ti[a] = pi[a] = a;
			for (int a = 0; a < k10; a++)
				for (int b = a + 1; b < n; b++) {
					if (g[ti[b]] > g[ti[a]]) { int x = ti[a]; ti[a] = ti[b]; ti[b] = x; }
					if (p[pi[b]] > p[pi[a]]) { int x = pi[a]; pi[a] = pi[b]; pi[b] = x; }
				}
			for (int a = 0; a < k10; a++)
				for (int b = 0; b < k10; b++)
					hit += ti[a] == pi[b];
			printf("%-8s %6d %10.3f %10.3f\n", names[i], n, tot ? (double)ok / tot : 1, k10 ? (double)hit / k10 : 0);
			free(ti);
			free(pi);
		} else {
			printf("%-8s %6d %10s %10s\n", names[i], n, "untrained", "-");
		}
		free(f); free(g); free(p);
		cm_model_free(m);
	}
	printf("\n# transfer: best latency after the first two batches, cold vs trained on the other workloads\n");
	printf("%-8s %12s %12s %8s\n", "name", "cold_us", "warm_us", "w/c");
	for (int i = 0; i < nw && nw > 1; i++) {
		cm_model *m = train_without(&all, i, names);
		rows scratch = { 0 };
		run warm;
		tune(w[i], &t, i, 32, 1, m, &scratch, &warm);
		double cold = rx[i][0].nb >= 2 ? rx[i][0].curve[1] : rx[i][0].best;
		double hot = warm.nb >= 2 ? warm.curve[1] : warm.best;
		printf("%-8s %12.1f %12.1f %8.3f\n", names[i], cold, hot, hot / cold);
		free(scratch.f); free(scratch.g); free(scratch.w);
		cm_model_free(m);
	}
	if (svgpath) {
		svg(svgpath, nw, names, rr, rx, ns);
		printf("\n# curves: %s\n", svgpath);
	}
	for (int i = 0; i < nw; i++)
		tir_workload_free(w[i]);
	free(all.f); free(all.g); free(all.w);
	return 0;
}
