/*
 * xgb.c — the XGBoost ranker behind costmodel.h.
 *
 * The model keeps every row it was given (features, workload, GFLOP/s) and
 * retrains the booster from scratch after each batch, on all of them up to
 * CM_MAX_TRAIN_ROWS and on a fair share of each workload beyond (train_rows):
 * tuning adds tens of rows a round, and the time of a training grows with
 * its rows.
 * Labels are throughputs normalized by the best of the same workload, and
 * the objective is XGBoost's pairwise ranking with one group per workload:
 * the search only ever compares candidates of one workload, and workloads
 * of very different sizes then share one model without their scales
 * mixing (bench/costmodel_eval measures how well it ranks).  Training is
 * seedless and single-threaded (CM_XGB_THREADS), so the same rows give the
 * same booster on every machine.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xgboost/c_api.h>
#include "costmodel.h"
#include "ir/ir.h"
#include "search/search.h"

/* boosting rounds of a training of at least CM_SMALL_ROWS rows, and of fewer */
#define CM_ROUNDS 200
#define CM_ROUNDS_FEW 60
#define CM_SMALL_ROWS 256
/* Rows one training takes at most (train_rows): the shared model retrains
 * after every batch of every job, and its time grows with the rows
 * while a team's database only grows.  (This VM, one thread, 200 rounds of
 * depth 8: 8,192 rows 1.4 s, 12,032 rows 1.5 s.  At 8,192 the CPU seed's
 * 188 workloads kept 43 of their 64 rows each, and held-out ranking fell
 * 0.803 -> 0.793.) */
#define CM_MAX_TRAIN_ROWS 16384
/* XGBoost's threads, for trainings and for a loaded booster's predictions.
 * More would be faster (a training on 8,064 H200 records: 0.41 s on 1
 * thread, 0.20 s on 4, 0.13 s on 16 of the H200 machine's cores) but must
 * not be: XGBoost's threads are libgomp's pool, which does not survive fork,
 * and the process that trains (tird) forks the children that run CPU
 * candidates, whose parallel loops are OpenMP regions — such a child waits
 * for its lost threads until the watchdog kills it (check_costmodel
 * measures_after_training).  With one thread the pool is never started.  (The
 * histogram method's booster also depends on the thread count.) */
#define CM_XGB_THREADS "1"

struct cm_model {
	pthread_mutex_t mu;
	int nrows, caprows;
	float *feat;            /* [nrows][CM_NFEATURES] */
	double *gflops;
	int *group;
	int ngroups;
	char **groups;
	BoosterHandle booster;  /* NULL until trained */
	int threads;            /* for features (cm_model_set_threads) */
	int trained_rows;       /* rows the booster was last trained on */
};

static const char *xgb_err(void) { return XGBGetLastError(); }

cm_model *cm_model_new(void)
{
	cm_model *m = xcalloc(1, sizeof *m);
	pthread_mutex_init(&m->mu, NULL);
	m->threads = 1;
	return m;
}

void cm_model_set_threads(cm_model *m, int threads)
{
	m->threads = threads;
}

void cm_model_free(cm_model *m)
{
	if (!m)
		return;
	if (m->booster)
		XGBoosterFree(m->booster);
	for (int i = 0; i < m->ngroups; i++)
		free(m->groups[i]);
	free(m->groups);
	free(m->feat);
	free(m->gflops);
	free(m->group);
	pthread_mutex_destroy(&m->mu);
	free(m);
}

static int group_id(cm_model *m, const char *g)
{
	for (int i = 0; i < m->ngroups; i++)
		if (!strcmp(m->groups[i], g))
			return i;
	m->groups = xrealloc(m->groups, sizeof(char *) * (size_t)(m->ngroups + 1));
	m->groups[m->ngroups] = xstrdup(g);
	return m->ngroups++;
}

static void add_rows(cm_model *m, int g, int n, const float *f, const double *gflops)
{
	if (m->nrows + n > m->caprows) {
		int cap = m->caprows ? m->caprows : 256;
		while (cap < m->nrows + n)
			cap *= 2;
		m->feat = xrealloc(m->feat, sizeof(float) * (size_t)cap * CM_NFEATURES);
		m->gflops = xrealloc(m->gflops, sizeof(double) * (size_t)cap);
		m->group = xrealloc(m->group, sizeof(int) * (size_t)cap);
		m->caprows = cap;
	}
	memcpy(&m->feat[(size_t)m->nrows * CM_NFEATURES], f, sizeof(float) * (size_t)n * CM_NFEATURES);
	for (int i = 0; i < n; i++) {
		double v = gflops[i];
		m->gflops[m->nrows + i] = isfinite(v) && v > 0 ? v : 0;
		m->group[m->nrows + i] = g;
	}
	m->nrows += n;
}

/* Which rows train the booster: every row while there are at most
 * CM_MAX_TRAIN_ROWS; past that, the workload just added (`current`) keeps
 * up to half of them, its latest, and the rest are shared fairly among the
 * other workloads (one with fewer rows than its share keeps them all; the
 * others an evenly spaced subset).  Deterministic: the same rows give the
 * same choice.  keep[] has a flag per row. */
static void train_rows(const cm_model *m, int current, bool *keep)
{
	if (m->nrows <= CM_MAX_TRAIN_ROWS) {
		for (int i = 0; i < m->nrows; i++)
			keep[i] = true;
		return;
	}
	int *count = xcalloc((size_t)m->ngroups + 1, sizeof(int));
	int *quota = xcalloc((size_t)m->ngroups + 1, sizeof(int));
	for (int i = 0; i < m->nrows; i++)
		count[m->group[i]]++;
	int budget = CM_MAX_TRAIN_ROWS;
	if (current >= 0 && current < m->ngroups) {
		quota[current] = count[current] < budget / 2 ? count[current] : budget / 2;
		budget -= quota[current];
	}
	/* water-filling: the smallest groups first, each the fair share of
	 * what is left */
	int left = 0;
	for (int g = 0; g < m->ngroups; g++)
		left += g != current && count[g] > 0;
	bool *done = xcalloc((size_t)m->ngroups + 1, sizeof(bool));
	while (left > 0) {
		int share = budget / left, small = -1;
		for (int g = 0; g < m->ngroups; g++)
			if (g != current && count[g] > 0 && !done[g] && count[g] <= share &&
			    (small < 0 || count[g] < count[small]))
				small = g;
		if (small < 0) {                  /* every group left has more: share */
			for (int g = 0; g < m->ngroups; g++)
				if (g != current && count[g] > 0 && !done[g])
					quota[g] = share;
			break;
		}
		quota[small] = count[small];
		budget -= count[small];
		done[small] = true;
		left--;
	}
	/* within a group: the latest rows of the current one, an evenly spaced
	 * subset of the others */
	int *seen = xcalloc((size_t)m->ngroups + 1, sizeof(int));
	for (int i = 0; i < m->nrows; i++) {
		int g = m->group[i], j = seen[g]++, c = count[g], q = quota[g];
		if (g == current)
			keep[i] = j >= c - q;
		else
			keep[i] = q > 0 && (int64_t)(j + 1) * q / c != (int64_t)j * q / c;
	}
	free(seen);
	free(done);
	free(quota);
	free(count);
}

/* Retrains the booster on the rows train_rows chooses, when there is
 * something to learn: enough rows and labels that are not all equal. */
static int train(cm_model *m, int current, tir_error *err)
{
	if (m->nrows < CM_MIN_ROWS)
		return 0;
	double *best = xcalloc((size_t)m->ngroups, sizeof(double));
	for (int i = 0; i < m->nrows; i++)
		if (m->gflops[i] > best[m->group[i]])
			best[m->group[i]] = m->gflops[i];
	/* rows in workload order, with the group sizes the ranking objective
	 * needs: pairs are only ever compared within one workload */
	bool *keep = xcalloc((size_t)m->nrows + 1, sizeof(bool));
	train_rows(m, current, keep);
	float *label = xmalloc(sizeof(float) * (size_t)m->nrows);
	float *feat = xmalloc(sizeof(float) * (size_t)m->nrows * CM_NFEATURES);
	unsigned *group = xcalloc((size_t)m->ngroups, sizeof(unsigned));
	bool varied = false;
	int k = 0;
	for (int g = 0; g < m->ngroups; g++)
		for (int i = 0; i < m->nrows; i++) {
			if (m->group[i] != g || !keep[i])
				continue;
			double b = best[g];
			label[k] = b > 0 ? (float)(m->gflops[i] / b) : 0;
			varied = varied || label[k] != label[0];
			memcpy(&feat[(size_t)k * CM_NFEATURES], &m->feat[(size_t)i * CM_NFEATURES],
			       sizeof(float) * CM_NFEATURES);
			group[g]++;
			k++;
		}
	free(best);
	free(keep);
	int rc = 0;
	DMatrixHandle d = NULL;
	BoosterHandle bst = NULL;
	if (!varied)
		goto out;
	/* groups without rows are left out of the group list */
	int ng = 0;
	for (int g = 0; g < m->ngroups; g++)
		if (group[g])
			group[ng++] = group[g];
	if (XGDMatrixCreateFromMat(feat, (bst_ulong)k, CM_NFEATURES, NAN, &d) ||
	    XGDMatrixSetFloatInfo(d, "label", label, (bst_ulong)k) ||
	    XGDMatrixSetUIntInfo(d, "group", group, (bst_ulong)ng) ||
	    XGBoosterCreate(&d, 1, &bst)) {
		rc = tir_fail(err, "xgboost: %s", xgb_err());
		goto out;
	}
	/* Shallow trees while the rows are few (a workload's first batches):
	 * deep ones fit the noise of a few dozen measurements.  Past that,
	 * deeper trees learnt more slowly: with the CPU seed's 188 workloads,
	 * each suite workload held out, 0.785 -> 0.803 (depth 6, eta 0.2, 60
	 * rounds, 256 bins -> this); the CUDA seed's 64, 0.839 -> 0.847.  A
	 * training of 12,032 rows on one thread of this VM: 0.53 -> 1.47 s
	 * (bench/results/2026-12-01-costmodel-settings-s18.txt). */
	bool small = k < CM_SMALL_ROWS;
	const char *const params[][2] = {
		{ "objective", "rank:pairwise" }, { "nthread", CM_XGB_THREADS },
		{ "verbosity", "0" }, { "seed", "0" },
		/* histogram splits: 3.3x faster than the exact method on 8,064 H200
		 * records of 53 workloads (1.36 -> 0.41 s), held-out ranking 0.716 ->
		 * 0.720 (bench/results/2026-11-29-costmodel-sweep-s5.txt); the
		 * shared model retrains on its target's rows after each batch.
		 * 64 bins instead of 256: the same ranking, 1.8x faster. */
		{ "tree_method", "hist" }, { "max_bin", "64" },
		{ "eta", small ? "0.2" : "0.1" }, { "max_depth", small ? "3" : "8" },
		{ "min_child_weight", small ? "1" : "5" },
	};
	for (size_t i = 0; i < sizeof params / sizeof *params; i++)
		if (XGBoosterSetParam(bst, params[i][0], params[i][1])) {
			rc = tir_fail(err, "xgboost: %s", xgb_err());
			goto out;
		}
	for (int it = 0; it < (small ? CM_ROUNDS_FEW : CM_ROUNDS); it++)
		if (XGBoosterUpdateOneIter(bst, it, d)) {
			rc = tir_fail(err, "xgboost: %s", xgb_err());
			goto out;
		}
	if (m->booster)
		XGBoosterFree(m->booster);
	m->booster = bst;
	m->trained_rows = k;
	bst = NULL;
out:
	if (bst)
		XGBoosterFree(bst);
	if (d)
		XGDMatrixFree(d);
	free(label);
	free(feat);
	free(group);
	return rc;
}

int cm_model_add(cm_model *m, const char *group, int n, const float *features,
		 const double *gflops, tir_error *err)
{
	if (n <= 0)
		return 0;
	pthread_mutex_lock(&m->mu);
	int g = group_id(m, group ? group : "");
	add_rows(m, g, n, features, gflops);
	int rc = train(m, g, err);
	pthread_mutex_unlock(&m->mu);
	return rc;
}

void cm_model_append(cm_model *m, const char *group, int n, const float *features,
		     const double *gflops)
{
	if (n <= 0)
		return;
	pthread_mutex_lock(&m->mu);
	add_rows(m, group_id(m, group ? group : ""), n, features, gflops);
	pthread_mutex_unlock(&m->mu);
}

int cm_model_train(cm_model *m, tir_error *err)
{
	pthread_mutex_lock(&m->mu);
	int rc = train(m, -1, err);
	pthread_mutex_unlock(&m->mu);
	return rc;
}

int cm_model_predict(cm_model *m, int n, const float *features, double *scores)
{
	pthread_mutex_lock(&m->mu);
	int rc = -1;
	DMatrixHandle d = NULL;
	bst_ulong len = 0;
	const float *out = NULL;
	if (!m->booster || n <= 0)
		goto out;
	if (XGDMatrixCreateFromMat(features, (bst_ulong)n, CM_NFEATURES, NAN, &d) ||
	    XGBoosterPredict(m->booster, d, 0, 0, 0, &len, &out) || len != (bst_ulong)n)
		goto out;
	for (int i = 0; i < n; i++)
		scores[i] = out[i];
	rc = 0;
out:
	if (d)
		XGDMatrixFree(d);
	pthread_mutex_unlock(&m->mu);
	return rc;
}

int cm_model_rows(const cm_model *m) { return m->nrows; }
int cm_model_trained_rows(const cm_model *m) { return m->trained_rows; }
bool cm_model_trained(const cm_model *m) { return m->booster != NULL; }

/* ---- the blob: "TIRCM2\n\0", then little-endian u32 / f64 / f32 fields ---- */

static const char magic[8] = "TIRCM2\n";
/* TIRCM1: before the feature table's identity was stored */
static const char magic_v1[8] = "TIRCM1\n";

/* The identity of the feature table: the first 4 bytes of the SHA-256
 * (search_trace_hash) of CM_FEATURES_VERSION and the names in order, one a
 * line.  A model saved by a build whose features differ (in number, names
 * or meaning) does not load; the daemon then rebuilds it from the stored
 * records. */
static uint32_t features_id(void)
{
	tir_buf b = { 0 };
	buf_printf(&b, "%d\n", CM_FEATURES_VERSION);
	for (int i = 0; i < CM_NFEATURES; i++)
		buf_printf(&b, "%s\n", cm_feature_names[i]);
	unsigned char d[32];
	search_trace_hash(b.s, d);
	free(b.s);
	return (uint32_t)d[0] | (uint32_t)d[1] << 8 | (uint32_t)d[2] << 16 | (uint32_t)d[3] << 24;
}

static void put(tir_buf *b, const void *p, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		while (cap < b->len + n + 1)
			cap *= 2;
		b->s = xrealloc(b->s, cap);
		b->cap = cap;
	}
	memcpy(b->s + b->len, p, n);
	b->len += n;
}

static void put_u32(tir_buf *b, uint32_t v) { put(b, &v, 4); }

int cm_model_save(cm_model *m, unsigned char **blob, size_t *len, tir_error *err)
{
	pthread_mutex_lock(&m->mu);
	tir_buf b = { 0 };
	put(&b, magic, sizeof magic);
	put_u32(&b, CM_NFEATURES);
	put_u32(&b, features_id());
	put_u32(&b, (uint32_t)m->ngroups);
	for (int i = 0; i < m->ngroups; i++) {
		uint32_t n = (uint32_t)strlen(m->groups[i]);
		put_u32(&b, n);
		put(&b, m->groups[i], n);
	}
	put_u32(&b, (uint32_t)m->nrows);
	for (int i = 0; i < m->nrows; i++) {
		put_u32(&b, (uint32_t)m->group[i]);
		put(&b, &m->gflops[i], sizeof(double));
		put(&b, &m->feat[(size_t)i * CM_NFEATURES], sizeof(float) * CM_NFEATURES);
	}
	int rc = 0;
	bst_ulong blen = 0;
	const char *bdata = NULL;
	if (m->booster && XGBoosterSaveModelToBuffer(m->booster, "{\"format\": \"ubj\"}", &blen, &bdata)) {
		rc = tir_fail(err, "xgboost: cannot save the booster: %s", xgb_err());
		blen = 0;
	}
	put_u32(&b, (uint32_t)blen);
	if (blen)
		put(&b, bdata, (size_t)blen);
	pthread_mutex_unlock(&m->mu);
	if (rc) {
		free(b.s);
		return rc;
	}
	*blob = (unsigned char *)b.s;
	*len = b.len;
	return 0;
}

typedef struct reader {
	const unsigned char *p;
	size_t left;
} reader;

static bool get(reader *r, void *dst, size_t n)
{
	if (r->left < n)
		return false;
	memcpy(dst, r->p, n);
	r->p += n;
	r->left -= n;
	return true;
}

cm_model *cm_model_load(const void *blob, size_t len, tir_error *err)
{
	reader r = { blob, len };
	char mg[8] = { 0 };
	uint32_t nf = 0, id = 0, ng = 0, nr = 0, blen = 0;
	if (get(&r, mg, 8) && !memcmp(mg, magic_v1, 8)) {
		tir_fail(err, "cost model: saved by an older build (format TIRCM1), "
			 "its features are not this build's");
		return NULL;
	}
	if (memcmp(mg, magic, 8)) {
		tir_fail(err, "cost model: not a saved model (bad magic)");
		return NULL;
	}
	if (!get(&r, &nf, 4) || nf != CM_NFEATURES) {
		tir_fail(err, "cost model: saved with %u features, this build has %d", nf, CM_NFEATURES);
		return NULL;
	}
	if (!get(&r, &id, 4) || id != features_id()) {
		tir_fail(err, "cost model: saved with other features (table %08x, this build's %08x)",
			 id, features_id());
		return NULL;
	}
	cm_model *m = cm_model_new();
	if (!get(&r, &ng, 4) || ng > (1u << 20))
		goto bad;
	for (uint32_t i = 0; i < ng; i++) {
		uint32_t n;
		if (!get(&r, &n, 4) || n > r.left)
			goto bad;
		char *s = xmalloc(n + 1);
		get(&r, s, n);
		s[n] = 0;
		group_id(m, s);
		free(s);
	}
	if (!get(&r, &nr, 4) || (uint64_t)nr * (4 + 8 + 4 * CM_NFEATURES) > r.left)
		goto bad;
	float *f = xmalloc(sizeof(float) * CM_NFEATURES);
	for (uint32_t i = 0; i < nr; i++) {
		uint32_t g;
		double gf;
		if (!get(&r, &g, 4) || g >= ng || !get(&r, &gf, 8) ||
		    !get(&r, f, sizeof(float) * CM_NFEATURES)) {
			free(f);
			goto bad;
		}
		add_rows(m, (int)g, 1, f, &gf);
	}
	free(f);
	if (!get(&r, &blen, 4) || blen > r.left)
		goto bad;
	if (blen) {
		if (XGBoosterCreate(NULL, 0, &m->booster) ||
		    XGBoosterLoadModelFromBuffer(m->booster, r.p, blen)) {
			tir_fail(err, "cost model: the saved booster does not load: %s", xgb_err());
			cm_model_free(m);
			return NULL;
		}
		XGBoosterSetParam(m->booster, "nthread", CM_XGB_THREADS);
	}
	return m;
bad:
	tir_fail(err, "cost model: the saved model is truncated or corrupt");
	cm_model_free(m);
	return NULL;
}

/* ---- the tir_cost_model table ------------------------------------------------ */

typedef struct feat_job {
	const tir_target *t;
	const tir_program *const *progs;
	float *f;
	bool *ok;
} feat_job;

static void feature_row(void *ctx, int i)
{
	feat_job *j = ctx;
	tir_error e;
	j->ok[i] = cm_features(j->progs[i], j->t, &j->f[(size_t)i * CM_NFEATURES], &e) == 0;
}

/* The feature rows of n programs, on m's threads (each row its own slot:
 * the result does not depend on the count). */
static float *features_of(const cm_model *m, const tir_target *t, int n,
			  const tir_program *const *progs, bool *ok)
{
	feat_job j = { t, progs, xcalloc((size_t)n * CM_NFEATURES + 1, sizeof(float)), ok };
	search_parallel_for(n, m->threads, feature_row, &j);
	return j.f;
}

static int xgb_predict(void *self, const tir_workload *w, const tir_target *t, int n,
		       const tir_program *const *progs, double *scores)
{
	cm_model *m = self;
	if (!cm_model_trained(m))
		return -1;
	bool *ok = xcalloc((size_t)n, sizeof(bool));
	float *f = features_of(m, t, n, progs, ok);
	int rc = cm_model_predict(m, n, f, scores);
	for (int i = 0; rc == 0 && i < n; i++)
		if (!ok[i])
			scores[i] = -1e30;
	free(f);
	free(ok);
	return rc;
}

static void xgb_update(void *self, const tir_workload *w, const tir_target *t, int n,
		       const tir_program *const *progs, const double *gflops)
{
	cm_model *m = self;
	bool *ok = xcalloc((size_t)n, sizeof(bool));
	float *f = features_of(m, t, n, progs, ok);
	/* rows whose features could not be computed are left out */
	int k = 0;
	double *g = xmalloc(sizeof(double) * (size_t)(n ? n : 1));
	for (int i = 0; i < n; i++)
		if (ok[i]) {
			memmove(&f[(size_t)k * CM_NFEATURES], &f[(size_t)i * CM_NFEATURES],
				sizeof(float) * CM_NFEATURES);
			g[k++] = gflops[i];
		}
	tir_error e;
	cm_model_add(m, tir_workload_key(w), k, f, g, &e);
	free(g);
	free(f);
	free(ok);
}

const tir_cost_model cm_xgboost = { "xgboost", xgb_predict, xgb_update };
