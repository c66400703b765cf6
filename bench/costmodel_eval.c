/*
 * costmodel_eval.c — what the XGBoost cost model buys, measured on this
 * machine's CPU (or GPU, --target cuda) with tird's own measurements.
 *
 *   bench/costmodel_eval [--suite FILE] [--target T] [--dtype D] [--trials N]
 *                        [--seeds S] [--svg FILE] [--save FILE] [--prior FILE] NAME...
 *   bench/costmodel_eval --records FILE [--records FILE]... [--dump TSV]
 *   bench/costmodel_eval --records FILE [--records FILE]... [--trials N] [--seeds S]
 *                        [--save FILE] NAME...
 *
 * For each suite workload NAME and seed: tir_tune under the random model and
 * under a cold XGBoost model at the same trial budget; the best latency after
 * every batch is the tuning curve.  Then, from every candidate measured:
 *  - held out by workload: a model trained on the other workloads' records
 *    ranks this workload's records: pairwise accuracy and top-10 recall, and
 *    the same for the analytical roofline feature alone, for comparison;
 *  - warm: runs of each workload (every seed) under a model first trained on
 *    the other workloads' records, as tird's shared per-target model starts
 *    a new workload; transfer compares warm and cold after two batches.
 *    With --prior FILE, the warm model is trained on FILE's records of the
 *    other workloads instead (FILE: a records file, such as the seed a new
 *    tird's CPU model starts from, costmodel/seed/; the workload tuned is
 *    left out of it, as a workload the seed has never seen).
 * Prints one table per part; with --svg, writes the curves as an SVG plot;
 * with --save, every measured candidate as a records file in the format of
 * `tirctl export` (tird-records/1).
 *
 * --target T tunes for T (default cpu: this machine's CPU; cuda: its first
 * GPU, the prior's records of that target), --dtype D every workload in
 * element type D (float16: the tensor-core sketches).
 *
 * With --records, nothing is tuned: the held-out table is computed from
 * records measured by tird (`tirctl export FILE`) or saved by --save, the
 * features recomputed by this build from the traces; --dump writes them,
 * one row per record, as a table.  With --records and names, only the warm
 * runs: each named workload under a model trained on the records of every
 * other workload, batch by batch (to study the search under a given prior
 * without tuning the random and cold runs again).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tir.h"
#include "costmodel/costmodel.h"
#include <cJSON.h>
#include "tests/testutil.h"

#define MAXW 256
#define MAXS 8
#define MAXB 64

/* Measured candidates: features, GFLOP/s (0: failed), workload index, and
 * what --save writes. */
typedef struct rows {
	int n, cap;
	float *f;
	double *g;
	int *w;
	char **trace;
	double *us;
	int *status;
	double feat_s;         /* time spent in cm_features, for feat_n programs */
	int feat_n;
} rows;

typedef struct run {
	double curve[MAXB];    /* best latency after each batch (0: none yet) */
	int nb;
	double best;
	/* online: the model's pairwise accuracy on each batch it was given,
	 * scored before it learned that batch (-1: it could not rank yet) */
	double online[MAXB];
	int nonline;
} run;

typedef struct collect {
	const tir_workload *w;
	const tir_target *t;
	int wi;
	rows *r;
	run *run;
	double best;
} collect;

static void add_row(rows *r, int wi, const float *f, double g, const char *trace,
		    int status, double us)
{
	if (r->n == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 1024;
		r->f = realloc(r->f, sizeof(float) * (size_t)r->cap * CM_NFEATURES);
		r->g = realloc(r->g, sizeof(double) * (size_t)r->cap);
		r->w = realloc(r->w, sizeof(int) * (size_t)r->cap);
		r->trace = realloc(r->trace, sizeof(char *) * (size_t)r->cap);
		r->us = realloc(r->us, sizeof(double) * (size_t)r->cap);
		r->status = realloc(r->status, sizeof(int) * (size_t)r->cap);
	}
	memcpy(&r->f[(size_t)r->n * CM_NFEATURES], f, sizeof(float) * CM_NFEATURES);
	r->g[r->n] = g;
	r->trace[r->n] = strdup(trace);
	r->us[r->n] = us;
	r->status[r->n] = status;
	r->w[r->n++] = wi;
}

static void rows_free(rows *r)
{
	for (int i = 0; i < r->n; i++)
		free(r->trace[i]);
	free(r->f); free(r->g); free(r->w); free(r->trace); free(r->us); free(r->status);
	memset(r, 0, sizeof *r);
}

/* Adds one measured candidate of workload wi; false if its trace does not
 * replay on this build. */
static bool add_measured(rows *r, int wi, const tir_workload *w, const tir_target *t,
			 const char *trace, int status, double us)
{
	tir_error err;
	tir_sched *s = tir_sched_new(w, 1, &err);
	bool ok = false;
	if (s && tir_sched_replay(s, trace, &err) == 0) {
		float f[CM_NFEATURES];
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		int rc = cm_features(tir_sched_program(s), t, f, &err);
		clock_gettime(CLOCK_MONOTONIC, &b);
		r->feat_s += (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
		r->feat_n++;
		if (rc == 0) {
			double g = status == 0 && us > 0 ? tir_workload_flops(w) / (us * 1e3) : 0;
			add_row(r, wi, f, g, trace, status, us);
			ok = true;
		}
	}
	tir_sched_free(s);
	return ok;
}

static void on_result(void *ctx, const tir_candidate *c)
{
	collect *k = ctx;
	add_measured(k->r, k->wi, k->w, k->t, c->trace, c->status, c->latency_us);
	if (c->status == 0 && (k->best == 0 || c->latency_us < k->best))
		k->best = c->latency_us;
}

static void on_progress(void *ctx, const tir_tune_progress *p)
{
	collect *k = ctx;
	if (k->run->nb < MAXB)
		k->run->curve[k->run->nb++] = k->best;
}

static void rank_quality(int n, const double *g, const double *p, double *pairwise,
			 double *recall, double *best16);

/* cm_xgboost as the search uses it, and each batch it learns scored first:
 * how well the model ranks candidates of this workload it has not seen,
 * where the search uses it. */
typedef struct watched {
	cm_model *m;
	run *out;
} watched;

static int watched_predict(void *self, const tir_workload *w, const tir_target *t, int n,
			   const tir_program *const *progs, double *scores)
{
	return cm_xgboost.predict(((watched *)self)->m, w, t, n, progs, scores);
}

static void watched_update(void *self, const tir_workload *w, const tir_target *t, int n,
			   const tir_program *const *progs, const double *gflops)
{
	watched *x = self;
	double *p = malloc(sizeof(double) * (size_t)(n + 1)), acc = -1;
	if (cm_xgboost.predict(x->m, w, t, n, progs, p) == 0)
		rank_quality(n, gflops, p, &acc, NULL, NULL);
	if (x->out->nonline < MAXB)
		x->out->online[x->out->nonline++] = acc;
	free(p);
	cm_xgboost.update(x->m, w, t, n, progs, gflops);
}

static const tir_cost_model watched_model = { "xgboost", watched_predict, watched_update };

static void tune(const tir_workload *w, const tir_target *t, int wi, int trials, uint64_t seed,
		 cm_model *m, rows *r, run *out)
{
	memset(out, 0, sizeof *out);
	collect k = { w, t, wi, r, out, 0 };
	watched x = { m, out };
	tir_tune_opts o = { .trials = trials, .batch = 16, .seed = seed,
			    .model = m ? &watched_model : NULL, .model_self = &x,
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

/* The online table: the models' pairwise accuracy on each batch before they
 * learned it, mean over seeds, for the first batches and over the rest. */
static void online(int nw, char names[][32], run rx[][MAXS], run rw[][MAXS], int ns)
{
	printf("\n# online: pairwise accuracy on each batch of the search, scored by the model\n"
	       "# before it learned that batch (mean over seeds; '-': could not rank yet)\n");
	printf("%-8s %5s %8s %8s %8s %8s\n", "name", "model", "batch1", "batch2", "batch3",
	       "later");
	for (int i = 0; i < nw; i++)
		for (int a = 0; a < 2; a++) {
			double sum[4] = { 0 };
			int cnt[4] = { 0 };
			for (int s = 0; s < ns; s++) {
				const run *r = a ? &rw[i][s] : &rx[i][s];
				for (int b = 0; b < r->nonline; b++)
					if (r->online[b] >= 0) {
						sum[b < 3 ? b : 3] += r->online[b];
						cnt[b < 3 ? b : 3]++;
					}
			}
			printf("%-8s %5s", names[i], a ? "warm" : "cold");
			for (int b = 0; b < 4; b++)
				if (cnt[b])
					printf(" %8.3f", sum[b] / cnt[b]);
				else
					printf(" %8s", "-");
			printf("\n");
		}
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

/* A model of every row except workload `skip`'s (half_of < 0) or except the
 * odd-numbered rows of workload half_of. */
static cm_model *train_except(const rows *r, int skip, int half_of, char names[][32])
{
	cm_model *m = cm_model_new();
	tir_error err;
	int n = 0, *keep = malloc(sizeof(int) * (size_t)(r->n + 1)), seen = 0;
	for (int i = 0; i < r->n; i++) {
		if (r->w[i] == skip)
			continue;
		if (r->w[i] == half_of && (seen++ % 2))
			continue;
		keep[n++] = i;
	}
	float *f = malloc(sizeof(float) * (size_t)(n + 1) * CM_NFEATURES);
	double *g = malloc(sizeof(double) * (size_t)(n + 1));
	/* runs of one workload's rows in one call: the model retrains per call */
	for (int a = 0, b; a < n; a = b) {
		int k = 0;
		for (b = a; b < n && r->w[keep[b]] == r->w[keep[a]]; b++, k++) {
			memcpy(&f[(size_t)k * CM_NFEATURES], &r->f[(size_t)keep[b] * CM_NFEATURES],
			       sizeof(float) * CM_NFEATURES);
			g[k] = r->g[keep[b]];
		}
		if (cm_model_add(m, names[r->w[keep[a]]], k, f, g, &err))
			fprintf(stderr, "train: %s\n", err.msg);
	}
	free(keep);
	free(f);
	free(g);
	return m;
}

static cm_model *train_without(const rows *r, int skip, char names[][32])
{
	return train_except(r, skip, -1, names);
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

/* Pairwise accuracy (over pairs of different throughput), top-10 recall
 * (the true ten best among the ten best scored) and best of 16 (the best
 * throughput among the 16 best scored, a batch, over the best of all) of
 * scores p for labels g.  Ties in p are broken by row order.  recall and
 * best16 may be NULL. */
static void rank_quality(int n, const double *g, const double *p, double *pairwise,
			 double *recall, double *best16)
{
	long ok = 0, tot = 0;
	for (int a = 0; a < n; a++)
		for (int b = a + 1; b < n; b++)
			if (g[a] != g[b]) {
				tot++;
				ok += (p[a] > p[b]) == (g[a] > g[b]);
			}
	*pairwise = tot ? (double)ok / tot : 1;
	int k10 = n < 10 ? n : 10, k16 = n < 16 ? n : 16, hit = 0;
	int *ti = malloc(sizeof(int) * (size_t)(n + 1)), *pi = malloc(sizeof(int) * (size_t)(n + 1));
	for (int a = 0; a < n; a++)
		ti[a] = pi[a] = a;
	for (int a = 0; a < k16; a++)
		for (int b = a + 1; b < n; b++) {
			if (g[ti[b]] > g[ti[a]]) { int x = ti[a]; ti[a] = ti[b]; ti[b] = x; }
			if (p[pi[b]] > p[pi[a]]) { int x = pi[a]; pi[a] = pi[b]; pi[b] = x; }
		}
	for (int a = 0; a < k10; a++)
		for (int b = 0; b < k10; b++)
			hit += ti[a] == pi[b];
	double top = 0;
	for (int a = 0; a < k16; a++)
		if (g[pi[a]] > top)
			top = g[pi[a]];
	if (recall)
		*recall = k10 ? (double)hit / k10 : 0;
	if (best16)
		*best16 = n && g[ti[0]] > 0 ? top / g[ti[0]] : 0;
	free(ti);
	free(pi);
}

static int feature_index(const char *name)
{
	for (int i = 0; i < CM_NFEATURES; i++)
		if (!strcmp(cm_feature_names[i], name))
			return i;
	return -1;
}

/* The held-out table: each workload's records ranked by a model trained on
 * every other workload's, and by the roofline feature alone. */
static void held_out(const rows *all, int nw, char names[][32])
{
	int roof = feature_index("roofline_cycles_per_op");
	printf("\n# held out by workload: a model of the other workloads' records ranks this one's\n");
	printf("# (roofline: the analytical estimate alone, lower predicted faster)\n");
	printf("# (within: trained on the other workloads and every other row of this one, ranks the rest)\n");
	printf("# (best_of_16: the best GFLOP/s among the 16 best scored over the best of all)\n");
	printf("%-8s %6s %10s %10s %11s %14s %14s %10s\n", "name", "rows", "pairwise", "top10_rec",
	       "best_of_16", "roof_pairwise", "roof_top10", "within");
	double sum = 0, sum16 = 0;
	int counted = 0;
	for (int i = 0; i < nw && nw > 1; i++) {
		cm_model *m = train_without(all, i, names);
		int n = 0;
		for (int k = 0; k < all->n; k++)
			n += all->w[k] == i;
		float *f = malloc(sizeof(float) * (size_t)(n + 1) * CM_NFEATURES);
		double *g = malloc(sizeof(double) * (size_t)(n + 1));
		double *p = malloc(sizeof(double) * (size_t)(n + 1));
		double *q = malloc(sizeof(double) * (size_t)(n + 1));
		int j = 0;
		for (int k = 0; k < all->n; k++)
			if (all->w[k] == i) {
				memcpy(&f[(size_t)j * CM_NFEATURES], &all->f[(size_t)k * CM_NFEATURES],
				       sizeof(float) * CM_NFEATURES);
				q[j] = roof >= 0 ? -all->f[(size_t)k * CM_NFEATURES + (size_t)roof] : 0;
				g[j++] = all->g[k];
			}
		double pw, rc, b16, qpw, qrc, wpw = -1;
		rank_quality(n, g, q, &qpw, &qrc, NULL);
		/* within: the odd rows, by a model that saw the even ones */
		cm_model *h = train_except(all, -1, i, names);
		int no = 0;
		for (int a = 1; a < n; a += 2) {
			memmove(&f[(size_t)no * CM_NFEATURES], &f[(size_t)a * CM_NFEATURES],
				sizeof(float) * CM_NFEATURES);
			q[no++] = g[a];
		}
		double *ph = malloc(sizeof(double) * (size_t)(no + 1));
		if (no && cm_model_predict(h, no, f, ph) == 0)
			rank_quality(no, q, ph, &wpw, NULL, NULL);
		free(ph);
		cm_model_free(h);
		/* f was compacted above: refill it for the held-out model */
		j = 0;
		for (int k = 0; k < all->n; k++)
			if (all->w[k] == i)
				memcpy(&f[(size_t)j++ * CM_NFEATURES], &all->f[(size_t)k * CM_NFEATURES],
				       sizeof(float) * CM_NFEATURES);
		if (n && cm_model_predict(m, n, f, p) == 0) {
			rank_quality(n, g, p, &pw, &rc, &b16);
			printf("%-8s %6d %10.3f %10.3f %11.3f %14.3f %14.3f %10.3f\n", names[i], n, pw,
			       rc, b16, qpw, qrc, wpw);
			sum += pw;
			sum16 += b16;
			counted++;
		} else {
			printf("%-8s %6d %10s %10s %11s %14.3f %14.3f\n", names[i], n, "untrained", "-",
			       "-", qpw, qrc);
		}
		free(f); free(g); free(p); free(q);
		cm_model_free(m);
	}
	if (counted)
		printf("%-8s %6s %10.3f %10s %11.3f   (mean)\n", "all", "", sum / counted, "",
		       sum16 / counted);
}

/* Every row as a table (workload, GFLOP/s, features by name), for study. */
static int dump_rows(const char *path, const rows *r, char names[][32])
{
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		return -1;
	}
	fprintf(f, "workload\tgflops");
	for (int j = 0; j < CM_NFEATURES; j++)
		fprintf(f, "\t%s", cm_feature_names[j]);
	fputc('\n', f);
	for (int i = 0; i < r->n; i++) {
		fprintf(f, "%s\t%g", names[r->w[i]], r->g[i]);
		for (int j = 0; j < CM_NFEATURES; j++)
			fprintf(f, "\t%g", r->f[(size_t)i * CM_NFEATURES + (size_t)j]);
		fputc('\n', f);
	}
	return fclose(f) ? -1 : 0;
}

/* Writes every row as a records file (tird-records/1, as tirctl export). */
static int save_records(const char *path, const rows *r, int nw, tir_workload **w,
			const tir_target *t)
{
	cJSON *o = cJSON_CreateObject(), *wl = cJSON_CreateObject(), *recs = cJSON_CreateArray();
	cJSON_AddStringToObject(o, "format", "tird-records/1");
	for (int i = 0; i < nw; i++)
		cJSON_AddItemToObject(wl, tir_workload_key(w[i]),
				      cJSON_Parse(tir_workload_canonical(w[i])));
	cJSON_AddItemToObject(o, "workloads", wl);
	for (int k = 0; k < r->n; k++) {
		cJSON *x = cJSON_CreateObject();
		cJSON_AddStringToObject(x, "workload_key", tir_workload_key(w[r->w[k]]));
		cJSON_AddStringToObject(x, "target", t->key);
		cJSON_AddStringToObject(x, "trace", r->trace[k]);
		cJSON_AddStringToObject(x, "status", r->status[k] == 0 ? "ok" : "error");
		if (r->status[k] == 0 && r->us[k] > 0)
			cJSON_AddNumberToObject(x, "latency_us", r->us[k]);
		cJSON_AddItemToArray(recs, x);
	}
	cJSON_AddItemToObject(o, "records", recs);
	char *text = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	FILE *f = fopen(path, "w");
	int rc = f && fputs(text, f) >= 0 ? 0 : -1;
	if (f && fclose(f))
		rc = -1;
	free(text);
	if (rc)
		perror(path);
	return rc;
}

/* The suite's name for a workload key, or the key's first 8 characters. */
static void name_of(const char *key, char out[32])
{
	snprintf(out, 32, "%.8s", key);
	int n = tu_suite_count();
	for (int i = 0; i < n; i++) {
		char *json = tu_suite_workload_at(i);
		tir_error err;
		tir_workload *w = json ? tir_workload_parse(json, strlen(json), NULL, &err) : NULL;
		if (w && !strcmp(tir_workload_key(w), key)) {
			char *name = tu_suite_name(i);
			snprintf(out, 32, "%s", name);
			free(name);
		}
		tir_workload_free(w);
		free(json);
	}
}

/* Adds the records of one file (tird-records/1) of one target (the first
 * record's, when t is not yet set) to all, their workloads to w[]. */
static int load_records(const char *path, rows *all, tir_workload **w, char names[][32],
			int *nw, tir_target *t)
{
	tir_error err;
	tir_records *recs = tir_records_read(path, NULL, NULL, &err);
	if (!recs) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	int skipped = 0, full = 0;
	for (int i = 0; i < tir_records_count(recs); i++) {
		const tir_record *x = tir_records_at(recs, i);
		const tir_workload *xw = tir_records_workload(recs, x->workload);
		if (!t->key[0] && tir_target_parse(x->target, t, &err)) {
			fprintf(stderr, "%s: target %s: %s\n", path, x->target, err.msg);
			tir_records_free(recs);
			return -1;
		}
		if (strcmp(x->target, t->key)) {
			skipped++;
			continue;
		}
		int wi = -1;
		for (int j = 0; j < *nw; j++)
			if (!strcmp(tir_workload_key(w[j]), tir_workload_key(xw)))
				wi = j;
		if (wi < 0 && *nw == MAXW) {
			full++;
			continue;
		}
		if (wi < 0) {
			const char *canon = tir_workload_canonical(xw);
			wi = (*nw)++;
			w[wi] = tir_workload_parse(canon, strlen(canon), NULL, NULL);
			name_of(tir_workload_key(w[wi]), names[wi]);
		}
		bool ok = !strcmp(x->status, "ok");
		if (!add_measured(all, wi, w[wi], t, x->trace, ok ? 0 : 1, ok ? x->latency_us : 0))
			skipped++;
	}
	fprintf(stderr, "%s: %d records of %d workloads so far%s", path, all->n, *nw,
		skipped ? "" : "\n");
	if (skipped)
		fprintf(stderr, ", %d skipped (other target, not replayable)\n", skipped);
	if (full)
		fprintf(stderr, "%s: %d records of workloads past the first %d left out\n", path, full,
			MAXW);
	tir_records_free(recs);
	return 0;
}

/* --dtype: the element type every suite workload is tuned in (NULL: its own) */
static const char *dtype_override;

/* The suite workload called name (in --dtype), or NULL with the reason printed. */
static tir_workload *suite_workload(const char *name)
{
	char *json = tu_suite_workload(name);
	if (json && dtype_override) {
		cJSON *o = cJSON_Parse(json);
		cJSON_DeleteItemFromObjectCaseSensitive(o, "dtype");
		cJSON_AddStringToObject(o, "dtype", dtype_override);
		free(json);
		json = cJSON_PrintUnformatted(o);
		cJSON_Delete(o);
	}
	tir_error err;
	tir_workload *w = json ? tir_workload_parse(json, strlen(json), NULL, &err) : NULL;
	if (!w)
		fprintf(stderr, "%s: %s\n", name, json ? err.msg : "not in the suite");
	free(json);
	return w;
}

/* --records FILE [--records FILE]... NAME...: the warm runs alone (see the top). */
static int warm_only(const char **recfiles, int nrecfiles, char want[][32], int nwant,
		     int trials, int ns, const char *savepath)
{
	rows measured = { 0 };
	tir_workload *ww[MAXW];
	static char names[MAXW][32];
	tir_workload *w[MAXW];
	tir_target t;
	memset(&t, 0, sizeof t);
	rows all = { 0 };
	int nw = 0;
	for (int i = 0; i < nrecfiles; i++)
		if (load_records(recfiles[i], &all, w, names, &nw, &t))
			return 1;
	printf("# warm runs on %s, %d trials, batch 16, %d seeds; the model trained on %d\n"
	       "# records of the other workloads\n", t.key, trials, ns, all.n);
	printf("%-8s %5s %10s   %s\n", "name", "seed", "best_us", "best after each batch; "
	       "online pairwise per batch");
	for (int k = 0; k < nwant; k++) {
		tir_workload *wk = suite_workload(want[k]);
		if (!wk)
			return 1;
		int skip = -1;
		for (int i = 0; i < nw; i++)
			if (!strcmp(tir_workload_key(w[i]), tir_workload_key(wk)))
				skip = i;
		double best[MAXS];
		ww[k] = wk;
		for (int s = 0; s < ns; s++) {
			cm_model *m = train_without(&all, skip, names);
			run r;
			tune(wk, &t, k, trials, (uint64_t)s + 1, m, &measured, &r);
			best[s] = r.best;
			printf("%-8s %5d %10.1f  ", want[k], s + 1, r.best);
			for (int b = 0; b < r.nb; b++)
				printf(" %.0f", r.curve[b]);
			printf(";");
			for (int b = 0; b < r.nonline; b++)
				printf(r.online[b] >= 0 ? " %.2f" : " -", r.online[b]);
			printf("\n");
			fflush(stdout);
			cm_model_free(m);
		}
		printf("%-8s %5s %10.1f   (median of seeds)\n", want[k], "med", median(best, ns));
	}
	if (savepath && save_records(savepath, &measured, nwant, ww, &t) == 0)
		printf("# records: %s\n", savepath);
	for (int k = 0; k < nwant; k++)
		tir_workload_free(ww[k]);
	for (int i = 0; i < nw; i++)
		tir_workload_free(w[i]);
	rows_free(&measured);
	rows_free(&all);
	return 0;
}

int main(int argc, char **argv)
{
	int trials = 96, ns = 3, nrecfiles = 0;
	const char *svgpath = NULL, *savepath = NULL, *dumppath = NULL, *recfiles[MAXW];
	const char *priorpath = NULL, *target = "cpu";
	char names[MAXW][32];
	int nw = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--trials") && i + 1 < argc) trials = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--seeds") && i + 1 < argc) ns = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--svg") && i + 1 < argc) svgpath = argv[++i];
		else if (!strcmp(argv[i], "--save") && i + 1 < argc) savepath = argv[++i];
		else if (!strcmp(argv[i], "--dump") && i + 1 < argc) dumppath = argv[++i];
		else if (!strcmp(argv[i], "--prior") && i + 1 < argc) priorpath = argv[++i];
		else if (!strcmp(argv[i], "--target") && i + 1 < argc) target = argv[++i];
		else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) dtype_override = argv[++i];
		else if (!strcmp(argv[i], "--records") && i + 1 < argc && nrecfiles < MAXW)
			recfiles[nrecfiles++] = argv[++i];
		else if (!strcmp(argv[i], "--suite") && i + 1 < argc) setenv("TIR_SUITE_JSON", argv[++i], 1);
		else if (nw < MAXW) snprintf(names[nw++], 32, "%s", argv[i]);
	}
	if (ns > MAXS) ns = MAXS;
	if (!nw && !nrecfiles) {
		fprintf(stderr, "usage: costmodel_eval [--suite FILE] [--target T] [--dtype D] [--trials N] [--seeds S] [--svg FILE] [--save FILE] [--prior FILE] NAME...\n"
				"       costmodel_eval [--suite FILE] --records FILE [--records FILE]... [--dump TSV] [NAME...]\n");
		return 2;
	}
	tir_target t;
	tir_error err;
	tir_workload *w[MAXW];
	rows all = { 0 };
	if (nrecfiles && nw)
		return warm_only(recfiles, nrecfiles, names, nw, trials, ns, savepath);
	if (nrecfiles) {
		memset(&t, 0, sizeof t);
		nw = 0;
		for (int i = 0; i < nrecfiles; i++)
			if (load_records(recfiles[i], &all, w, names, &nw, &t))
				return 1;
		printf("# records of %d workloads on %s: %d\n", nw, t.key, all.n);
		printf("# features: %d programs, %.1f us each (cm_features alone, replay excluded)\n",
		       all.feat_n, all.feat_n ? 1e6 * all.feat_s / all.feat_n : 0.0);
		if (dumppath && dump_rows(dumppath, &all, names))
			return 1;
		held_out(&all, nw, names);
		for (int i = 0; i < nw; i++)
			tir_workload_free(w[i]);
		rows_free(&all);
		return 0;
	}
	if (tir_target_parse(target, &t, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	for (int i = 0; i < nw; i++) {
		if (!(w[i] = suite_workload(names[i])))
			return 1;
	}
	/* --prior: the records the warm model starts from, by workload */
	rows prior = { 0 };
	static char pnames[MAXW][32];
	tir_workload *pw[MAXW];
	int pnw = 0;
	if (priorpath && load_records(priorpath, &prior, pw, pnames, &pnw, &t))
		return 1;
	static run rr[MAXW][MAXS], rx[MAXW][MAXS], rw[MAXW][MAXS];
	printf("# target %s, %d trials, batch 16, %d seeds\n", t.key, trials, ns);
	printf("# random: the random model; cold: XGBoost from nothing; warm: XGBoost first\n"
	       "# trained on the other workloads' records (%s%s), both\n"
	       "# retrained online\n", priorpath ? "of the prior " : "as tird's shared model",
	       priorpath ? priorpath : "");
	printf("%-8s %5s %12s %12s %12s %8s %8s\n", "name", "seed", "random_us", "cold_us",
	       "warm_us", "c/r", "w/r");
	fflush(stdout);
	for (int i = 0; i < nw; i++)
		for (int s = 0; s < ns; s++) {
			tune(w[i], &t, i, trials, (uint64_t)s + 1, NULL, &all, &rr[i][s]);
			cm_model *m = cm_model_new();
			tune(w[i], &t, i, trials, (uint64_t)s + 1, m, &all, &rx[i][s]);
			cm_model_free(m);
		}
	/* warm: the records of the other workloads' random and cold runs, or of
	 * the prior's other workloads */
	for (int i = 0; i < nw && (nw > 1 || priorpath); i++)
		for (int s = 0; s < ns; s++) {
			int skip = -1;
			for (int k = 0; k < pnw; k++)
				if (!strcmp(tir_workload_key(pw[k]), tir_workload_key(w[i])))
					skip = k;
			cm_model *m = priorpath ? train_without(&prior, skip, pnames)
						: train_without(&all, i, names);
			rows scratch = { 0 };
			tune(w[i], &t, i, trials, (uint64_t)s + 1, m, &scratch, &rw[i][s]);
			rows_free(&scratch);
			cm_model_free(m);
		}
	for (int i = 0; i < nw; i++) {
		double rs[MAXS], xs[MAXS], ws[MAXS];
		for (int s = 0; s < ns; s++) {
			rs[s] = rr[i][s].best;
			xs[s] = rx[i][s].best;
			ws[s] = nw > 1 || priorpath ? rw[i][s].best : 0;
			printf("%-8s %5d %12.1f %12.1f %12.1f %8.3f %8.3f\n", names[i], s + 1, rs[s], xs[s],
			       ws[s], xs[s] / rs[s], ws[s] / rs[s]);
		}
		double mr = median(rs, ns), mx = median(xs, ns), mw = median(ws, ns);
		printf("%-8s %5s %12.1f %12.1f %12.1f %8.3f %8.3f   (median of seeds)\n", names[i],
		       "med", mr, mx, mw, mx / mr, mw / mr);
	}
	fflush(stdout);
	if (savepath && save_records(savepath, &all, nw, w, &t) == 0)
		printf("\n# records: %s\n", savepath);
	held_out(&all, nw, names);
	printf("\n# transfer: best latency after the first two batches, cold vs warm (median of seeds)\n");
	printf("%-8s %12s %12s %8s\n", "name", "cold_us", "warm_us", "w/c");
	for (int i = 0; i < nw && (nw > 1 || priorpath); i++) {
		double c2[MAXS], w2[MAXS];
		for (int s = 0; s < ns; s++) {
			c2[s] = rx[i][s].nb >= 2 ? rx[i][s].curve[1] : rx[i][s].best;
			w2[s] = rw[i][s].nb >= 2 ? rw[i][s].curve[1] : rw[i][s].best;
		}
		double mc = median(c2, ns), mw = median(w2, ns);
		printf("%-8s %12.1f %12.1f %8.3f\n", names[i], mc, mw, mw / mc);
	}
	online(nw, names, rx, rw, ns);
	fflush(stdout);
	for (int i = 0; i < pnw; i++)
		tir_workload_free(pw[i]);
	rows_free(&prior);
	if (svgpath) {
		svg(svgpath, nw, names, rr, rx, ns);
		printf("\n# curves: %s\n", svgpath);
	}
	for (int i = 0; i < nw; i++)
		tir_workload_free(w[i]);
	rows_free(&all);
	return 0;
}
