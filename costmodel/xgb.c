/*
 * xgb.c — the XGBoost ranker behind costmodel.h.
 *
 * The model keeps every row it was given (features, workload, GFLOP/s) and
 * retrains the shared booster from scratch, on all of them up to
 * CM_MAX_TRAIN_ROWS and on a fair share of each workload beyond (train_rows),
 * once the rows it has not learned reach 1/CM_RETRAIN_DIV of those it was
 * trained from (stale): tuning adds tens of rows a round, a training's time
 * grows with its rows, and a batch of one workload among thousands of rows
 * barely moves the shared booster (below) while its own booster, remade
 * from its rows after every batch, learns it at once.
 * Labels are throughputs normalized by the best of the same workload, and
 * the objective is XGBoost's pairwise ranking with one group per workload:
 * the search only ever compares candidates of one workload, and workloads
 * of very different sizes then share one model without their scales
 * mixing (bench/costmodel_eval measures how well it ranks).  Training is
 * seedless and single-threaded (CM_XGB_THREADS), so the same rows give the
 * same booster on every machine.
 *
 * The search scores candidates of one workload (cm_model_predict_group):
 * the shared booster's scores, mixed with those of a booster trained on
 * that workload's rows alone once it has a batch of them.  What other
 * workloads taught can be wrong for this one, and its own rows, a few
 * among thousands, barely move the shared booster: a conv2d outside the
 * CPU suite (X-C2D, bench/results/2026-12-01-costmodel-eval-s19.txt) had
 * its ten best candidates ranked 102nd-333rd of 768 by the shared model,
 * whose warm search never reached them while a cold search, its own rows
 * alone, did in 2 of 3 runs.  Each booster's weight follows how well it
 * ranked the workload's new rows before it learned them (judge,
 * own_weight); each one's scores are scaled by their spread over the
 * workload's rows, so the mix does not depend on
 * which candidates are scored together (the search compares scores made
 * in different calls).  The own booster is remade when the workload's rows
 * or the shared booster change, and is not saved: it is a function of the
 * rows.
 *
 * Threads: every job of a target shares its model, and a search may learn
 * a batch on one thread while it scores on another (tir_tune_opts
 * async_update).  The model's mutex guards its rows and boosters, but a
 * training of the shared booster (a second or two on the CPU seed's 15,000
 * rows) holds it only to copy its rows out and to install the booster it
 * made (train_begin / train_fit / train_end): scoring meanwhile uses the
 * booster installed before, whole.  The model owns every booster it holds
 * and frees one when it installs the next; a booster being fitted belongs
 * to its training until installed.  The own booster (make_local, tens to
 * hundreds of rows) is made under the lock.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xgboost/c_api.h>
#include "costmodel.h"
#include "ir/ir.h"

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

#define CM_RECENT_BATCHES 8

/* The shared booster is retrained when the rows added since its rows were
 * chosen reach 1/CM_RETRAIN_DIV of them.  A model of a few hundred rows
 * then retrains after every batch, as before; the CPU seed's 14,816 rows
 * after some 1,850 new ones (14 jobs of 128 trials), where retraining after
 * each batch of 16 took 2.6 s of this VM's 2 cores per round, beside a
 * round of 4.5 s: the builds and timed runs of the job waited for the cores
 * (bench/results/2026-12-07-cpu-tuning-loop.txt). */
#define CM_RETRAIN_DIV 8

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
	int booster_data;       /* the model's row count when they were chosen */
	unsigned version;       /* counts the trainings: which booster it is */
	unsigned generation;    /* counts the replacements (cm_model_replace):
				 * which rows a training was taken from */
	/* the blend (predict_group): the last workload's own booster and what
	 * it was made from, and both boosters' scales on its rows */
	BoosterHandle local;
	int local_group, local_rows;
	unsigned local_version;
	double mean[2], sd[2];  /* shared, local */
	/* per group: the pairs of its rows each booster ranked before it
	 * learned them, and how many it ranked right (judge) */
	double (*judged)[4];    /* pairs, right (shared); pairs, right (own) */
	/* for people (cm_model_stats), in memory only: when the booster was
	 * last trained, and the shared booster's judgement of the newest batch
	 * of CM_RECENT_BATCHES (a ring: pairs, right) */
	double trained_at;
	double recent[CM_RECENT_BATCHES][2];
	int nrecent;
};

static const char *xgb_err(void) { return XGBGetLastError(); }

cm_model *cm_model_new(void)
{
	cm_model *m = xcalloc(1, sizeof *m);
	pthread_mutex_init(&m->mu, NULL);
	m->threads = 1;
	m->local_group = -1;
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
	if (m->local)
		XGBoosterFree(m->local);
	for (int i = 0; i < m->ngroups; i++)
		free(m->groups[i]);
	free(m->groups);
	free(m->judged);
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
	m->judged = xrealloc(m->judged, sizeof *m->judged * (size_t)(m->ngroups + 1));
	memset(m->judged[m->ngroups], 0, sizeof *m->judged);
	return m->ngroups++;
}

/* A row's label source: GFLOP/s, 0 for a failed candidate (or a value that
 * is not a positive number). */
static double clean_gflops(double v)
{
	return isfinite(v) && v > 0 ? v : 0;
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
		m->gflops[m->nrows + i] = clean_gflops(gflops[i]);
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

/* A booster fitted to k rows of features and labels in ng ranking groups
 * (group[] their sizes, in row order), or NULL with err set. */
static BoosterHandle fit(const float *feat, const float *label, int k, const unsigned *group,
			 int ng, tir_error *err)
{
	DMatrixHandle d = NULL;
	BoosterHandle bst = NULL;
	if (XGDMatrixCreateFromMat(feat, (bst_ulong)k, CM_NFEATURES, NAN, &d) ||
	    XGDMatrixSetFloatInfo(d, "label", label, (bst_ulong)k) ||
	    XGDMatrixSetUIntInfo(d, "group", group, (bst_ulong)ng) ||
	    XGBoosterCreate(&d, 1, &bst))
		goto fail;
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
		 * 0.720 (bench/results/archive/2026-11-29-costmodel-sweep-s5.txt); the
		 * shared model retrains on its target's rows after each batch.
		 * 64 bins instead of 256: the same ranking, 1.8x faster. */
		{ "tree_method", "hist" }, { "max_bin", "64" },
		{ "eta", small ? "0.2" : "0.1" }, { "max_depth", small ? "3" : "8" },
		{ "min_child_weight", small ? "1" : "5" },
	};
	for (size_t i = 0; i < sizeof params / sizeof *params; i++)
		if (XGBoosterSetParam(bst, params[i][0], params[i][1]))
			goto fail;
	for (int it = 0; it < (small ? CM_ROUNDS_FEW : CM_ROUNDS); it++)
		if (XGBoosterUpdateOneIter(bst, it, d))
			goto fail;
	XGDMatrixFree(d);
	return bst;
fail:
	tir_fail(err, "xgboost: %s", xgb_err());
	if (bst)
		XGBoosterFree(bst);
	if (d)
		XGDMatrixFree(d);
	return NULL;
}

/* The training rows of group `only` (-1: of every group) for which keep[i]
 * is set (keep NULL: all), in workload order, labelled with
 * their throughput over the best of their workload; group[] gets the sizes
 * of the non-empty groups.  Returns the row count; *ng the group count,
 * *varied whether the labels differ. */
static int gather(const cm_model *m, int only, const bool *keep, float *feat,
		  float *label, unsigned *group, int *ng, bool *varied)
{
	double *best = xcalloc((size_t)m->ngroups + 1, sizeof(double));
	for (int i = 0; i < m->nrows; i++)
		if (m->gflops[i] > best[m->group[i]])
			best[m->group[i]] = m->gflops[i];
	int k = 0;
	*ng = 0;
	*varied = false;
	for (int g = 0; g < m->ngroups; g++) {
		if (only >= 0 && g != only)
			continue;
		unsigned size = 0;
		for (int i = 0; i < m->nrows; i++) {
			if (m->group[i] != g || (keep && !keep[i]))
				continue;
			double b = best[g];
			label[k] = b > 0 ? (float)(m->gflops[i] / b) : 0;
			*varied = *varied || label[k] != label[0];
			memcpy(&feat[(size_t)k * CM_NFEATURES], &m->feat[(size_t)i * CM_NFEATURES],
			       sizeof(float) * CM_NFEATURES);
			size++;
			k++;
		}
		if (size)
			group[(*ng)++] = size;
	}
	free(best);
	return k;
}

/* A training taken out of the model: the rows train_rows chose, copied
 * under the model's lock (train_begin), fitted without it (train_fit), the
 * booster installed under it again (train_end).  Readers (predictions,
 * judge, make_local, save) hold the lock while they use m->booster, so they
 * see the old booster or the new one, never one being trained; a fit never
 * blocks them.  data is the row count the copy was made of: of two
 * trainings of one model that overlap (two jobs of a target), the one made
 * of fewer rows is not installed over the other's. */
typedef struct training {
	int k, ng, data;
	unsigned generation;    /* the model's when the rows were copied */
	bool varied;
	float *feat, *label;
	unsigned *group;
	BoosterHandle bst;
} training;

/* Under m->mu.  Returns false when there is nothing to learn: too few rows,
 * or labels all equal (pairs are only ever compared within one workload,
 * its group). */
static bool train_begin(cm_model *m, int current, training *tr)
{
	memset(tr, 0, sizeof *tr);
	if (m->nrows < CM_MIN_ROWS)
		return false;
	bool *keep = xcalloc((size_t)m->nrows + 1, sizeof(bool));
	train_rows(m, current, keep);
	tr->label = xmalloc(sizeof(float) * (size_t)m->nrows);
	tr->feat = xmalloc(sizeof(float) * (size_t)m->nrows * CM_NFEATURES);
	tr->group = xcalloc((size_t)m->ngroups + 1, sizeof(unsigned));
	tr->k = gather(m, -1, keep, tr->feat, tr->label, tr->group, &tr->ng, &tr->varied);
	tr->data = m->nrows;
	tr->generation = m->generation;
	free(keep);
	if (!tr->varied) {
		free(tr->label);
		free(tr->feat);
		free(tr->group);
		memset(tr, 0, sizeof *tr);
	}
	return tr->varied;
}

/* Without the lock: the long part.  0, or -1 with err set. */
static int train_fit(training *tr, tir_error *err)
{
	tr->bst = fit(tr->feat, tr->label, tr->k, tr->group, tr->ng, err);
	free(tr->label);
	free(tr->feat);
	free(tr->group);
	tr->label = tr->feat = NULL;
	tr->group = NULL;
	return tr->bst ? 0 : -1;
}

/* Under m->mu: the fitted booster replaces the model's, unless a training
 * of more rows was installed meanwhile, or the model's rows were replaced
 * since they were copied (cm_model_replace: the booster fits rows the model
 * no longer has); the booster is then freed. */
static void train_end(cm_model *m, training *tr)
{
	if (!tr->bst)
		return;
	if (tr->generation != m->generation || (m->booster && m->booster_data > tr->data)) {
		XGBoosterFree(tr->bst);
		tr->bst = NULL;
		return;
	}
	if (m->booster)
		XGBoosterFree(m->booster);
	m->booster = tr->bst;
	tr->bst = NULL;
	m->booster_data = tr->data;
	m->trained_rows = tr->k;
	m->version++;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	m->trained_at = (double)now.tv_sec + now.tv_nsec * 1e-9;
}

/* Retrains the booster on the rows train_rows chooses, when there is
 * something to learn.  Called with m->mu held; the lock is released during
 * the fit and held again when it returns. */
static int train(cm_model *m, int current, tir_error *err)
{
	training tr;
	if (!train_begin(m, current, &tr))
		return 0;
	pthread_mutex_unlock(&m->mu);
	int rc = train_fit(&tr, err);
	pthread_mutex_lock(&m->mu);
	train_end(m, &tr);
	return rc;
}

static int booster_predict(BoosterHandle b, int n, const float *features, double *scores);
static void make_local(cm_model *m, int g);

/* Before workload g learns n new rows: how each booster, the shared one and
 * g's own (make_local), ranks them — the pairs of rows whose throughputs
 * differ, and those it orders right (a tie half right) — added to g's tally
 * (m->judged), by which cm_model_predict_group weighs the two. */
static void judge(cm_model *m, int g, int n, const float *f, const double *gflops)
{
	if (!m->booster || n < 2)
		return;
	double *p[2] = { xmalloc(sizeof(double) * (size_t)n), xmalloc(sizeof(double) * (size_t)n) };
	bool have[2];
	have[0] = !booster_predict(m->booster, n, f, p[0]);
	make_local(m, g);
	have[1] = m->local && !booster_predict(m->local, n, f, p[1]);
	for (int b = 0; b < 2; b++) {
		double pairs = 0, right = 0;
		for (int i = 0; have[b] && i < n; i++)
			for (int j = i + 1; j < n; j++) {
				double gi = clean_gflops(gflops[i]), gj = clean_gflops(gflops[j]);
				if (gi == gj)
					continue;
				pairs++;
				if (p[b][i] == p[b][j])
					right += 0.5;
				else
					right += (p[b][i] > p[b][j]) == (gi > gj);
			}
		m->judged[g][2 * b] += pairs;
		m->judged[g][2 * b + 1] += right;
		if (b == 0 && have[0] && pairs > 0) {
			double *r = m->recent[m->nrecent++ % CM_RECENT_BATCHES];
			r[0] = pairs;
			r[1] = right;
		}
	}
	free(p[0]);
	free(p[1]);
}

/* Under m->mu: whether the shared booster is due a retraining (CM_RETRAIN_DIV). */
static bool stale(const cm_model *m)
{
	return !m->booster ||
	       (int64_t)(m->nrows - m->booster_data) * CM_RETRAIN_DIV >= m->booster_data;
}

int cm_model_add(cm_model *m, const char *group, int n, const float *features,
		 const double *gflops, tir_error *err)
{
	if (n <= 0)
		return 0;
	pthread_mutex_lock(&m->mu);
	int g = group_id(m, group ? group : "");
	judge(m, g, n, features, gflops);
	add_rows(m, g, n, features, gflops);
	int rc = stale(m) ? train(m, g, err) : 0;
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

/* n rows scored by booster b; 0, or -1 if XGBoost fails. */
static int booster_predict(BoosterHandle b, int n, const float *features, double *scores)
{
	DMatrixHandle d = NULL;
	bst_ulong len = 0;
	const float *out = NULL;
	int rc = -1;
	if (XGDMatrixCreateFromMat(features, (bst_ulong)n, CM_NFEATURES, NAN, &d) ||
	    XGBoosterPredict(b, d, 0, 0, 0, &len, &out) || len != (bst_ulong)n)
		goto out;
	for (int i = 0; i < n; i++)
		scores[i] = out[i];
	rc = 0;
out:
	if (d)
		XGDMatrixFree(d);
	return rc;
}

int cm_model_predict(cm_model *m, int n, const float *features, double *scores)
{
	pthread_mutex_lock(&m->mu);
	int rc = m->booster && n > 0 ? booster_predict(m->booster, n, features, scores) : -1;
	pthread_mutex_unlock(&m->mu);
	return rc;
}

static void mean_sd(const double *v, int n, double *mu, double *sd)
{
	double s = 0, q = 0;
	for (int i = 0; i < n; i++)
		s += v[i];
	*mu = s / n;
	for (int i = 0; i < n; i++)
		q += (v[i] - *mu) * (v[i] - *mu);
	*sd = sqrt(q / n);
}

/* Makes group g's own booster (m->local) and both boosters' scales on g's
 * rows, unless they were made from the same rows and shared booster.  No
 * own booster (NULL) while g has fewer than CM_MIN_ROWS rows, labels all
 * equal, nothing but g's rows (the shared booster is then the same), or
 * when it scores all of them alike. */
static void make_local(cm_model *m, int g)
{
	int count = 0;
	for (int i = 0; i < m->nrows; i++)
		count += m->group[i] == g;
	if (m->local_group == g && m->local_rows == count && m->local_version == m->version)
		return;
	m->local_group = g;
	m->local_rows = count;
	m->local_version = m->version;
	if (m->local)
		XGBoosterFree(m->local);
	m->local = NULL;
	if (count < CM_MIN_ROWS || count == m->nrows)
		return;
	float *label = xmalloc(sizeof(float) * (size_t)count);
	float *feat = xmalloc(sizeof(float) * (size_t)count * CM_NFEATURES);
	double *ps = xmalloc(sizeof(double) * (size_t)count);
	double *pl = xmalloc(sizeof(double) * (size_t)count);
	unsigned size;
	int ng;
	bool varied;
	tir_error e;
	int k = gather(m, g, NULL, feat, label, &size, &ng, &varied);
	bool usable = false;
	if (varied && (m->local = fit(feat, label, k, &size, ng, &e)) &&
	    !booster_predict(m->booster, k, feat, ps) && !booster_predict(m->local, k, feat, pl)) {
		mean_sd(ps, k, &m->mean[0], &m->sd[0]);
		mean_sd(pl, k, &m->mean[1], &m->sd[1]);
		usable = m->sd[1] > 0;
	}
	if (!usable && m->local) {        /* kept only when it can score */
		XGBoosterFree(m->local);
		m->local = NULL;
	}
	free(label);
	free(feat);
	free(ps);
	free(pl);
}

/* The own booster's share of the mix, from how well each booster ranked
 * the workload's rows before it learned them (judge): each one's accuracy,
 * counted from CM_JUDGE_PRIOR pairs at 0.6 (a booster not yet judged), its
 * skill the part above chance, weighed by its square (the better booster
 * leads).  A shared booster that keeps ordering this workload's new rows
 * wrong ends with none of the weight. */
static double own_weight(const double j[4])
{
	double w[2];
	for (int b = 0; b < 2; b++) {
		double acc = (j[2 * b + 1] + 0.6 * CM_JUDGE_PRIOR) / (j[2 * b] + CM_JUDGE_PRIOR);
		double skill = acc - 0.5 > 0.01 ? acc - 0.5 : 0.01;
		w[b] = skill * skill;
	}
	return w[1] / (w[0] + w[1]);
}

int cm_model_predict_group(cm_model *m, const char *group, int n, const float *features,
			   double *scores)
{
	pthread_mutex_lock(&m->mu);
	int rc = -1, g = -1;
	double *pl = NULL;
	if (!m->booster || n <= 0)
		goto out;
	for (int i = 0; i < m->ngroups && group; i++)
		if (!strcmp(m->groups[i], group))
			g = i;
	if (booster_predict(m->booster, n, features, scores))
		goto out;
	rc = 0;
	if (g < 0)
		goto out;
	make_local(m, g);
	if (!m->local)
		goto out;
	pl = xmalloc(sizeof(double) * (size_t)n);
	if (booster_predict(m->local, n, features, pl))
		goto out;
	double a = own_weight(m->judged[g]);
	for (int i = 0; i < n; i++) {
		double zs = m->sd[0] > 0 ? (scores[i] - m->mean[0]) / m->sd[0] : 0;
		scores[i] = (1 - a) * zs + a * (pl[i] - m->mean[1]) / m->sd[1];
	}
out:
	free(pl);
	pthread_mutex_unlock(&m->mu);
	return rc;
}

void cm_model_replace(cm_model *m, cm_model *from)
{
	pthread_mutex_lock(&m->mu);
	pthread_mutex_lock(&from->mu);
	/* what the blob holds moves to m, m's old rows and booster to from
	 * (old: m's fields as they were; its lock is not used) */
	const cm_model old = *m;
#define SWAP(f) (m->f = from->f, from->f = old.f)
	SWAP(nrows); SWAP(caprows); SWAP(feat); SWAP(gflops); SWAP(group);
	SWAP(ngroups); SWAP(groups); SWAP(judged);
	SWAP(booster); SWAP(trained_rows); SWAP(booster_data); SWAP(trained_at);
#undef SWAP
	/* the own booster and the recent tallies belonged to the old rows:
	 * the own booster is made again when asked, the tallies count from
	 * this load ("since the model was loaded") */
	if (m->local)
		XGBoosterFree(m->local);
	m->local = NULL;
	m->local_group = -1;
	m->local_rows = 0;
	m->nrecent = 0;
	m->version++;
	m->generation++;
	pthread_mutex_unlock(&from->mu);
	pthread_mutex_unlock(&m->mu);
	cm_model_free(from);    /* m's old contents, which no one uses now */
}

/* Read under the model's lock: another job's thread may be training the
 * same model (train writes these under it; ThreadSanitizer saw xgb_predict
 * read booster while a second tuning thread trained).  The lock is the
 * only part of the model a reader changes, hence the casts. */
int cm_model_rows(const cm_model *m)
{
	pthread_mutex_lock((pthread_mutex_t *)&m->mu);
	int n = m->nrows;
	pthread_mutex_unlock((pthread_mutex_t *)&m->mu);
	return n;
}

int cm_model_trained_rows(const cm_model *m)
{
	pthread_mutex_lock((pthread_mutex_t *)&m->mu);
	int n = m->trained_rows;
	pthread_mutex_unlock((pthread_mutex_t *)&m->mu);
	return n;
}

bool cm_model_trained(const cm_model *m)
{
	pthread_mutex_lock((pthread_mutex_t *)&m->mu);
	bool trained = m->booster != NULL;
	pthread_mutex_unlock((pthread_mutex_t *)&m->mu);
	return trained;
}

void cm_model_stats(const cm_model *m, cm_stats *out)
{
	pthread_mutex_lock((pthread_mutex_t *)&m->mu);
	*out = (cm_stats){ .rows = m->nrows, .trained_rows = m->trained_rows,
			   .trained = m->booster != NULL, .trained_at = m->trained_at,
			   .workloads = m->ngroups };
	for (int g = 0; g < m->ngroups; g++) {
		out->judged_pairs += m->judged[g][0];
		out->judged_right += m->judged[g][1];
	}
	int n = m->nrecent < CM_RECENT_BATCHES ? m->nrecent : CM_RECENT_BATCHES;
	for (int i = 0; i < n; i++) {
		out->recent_pairs += m->recent[i][0];
		out->recent_right += m->recent[i][1];
	}
	out->recent_batches = n;
	pthread_mutex_unlock((pthread_mutex_t *)&m->mu);
}

/* ---- the blob: "TIRCM3\n\0", then little-endian u32 / f64 / f32 fields ---- */

static const char magic[8] = "TIRCM3\n";
/* TIRCM2: before the workloads' tallies (m->judged) were kept */
static const char magic_v2[8] = "TIRCM2\n";
/* TIRCM1: before the feature table's identity was stored */
static const char magic_v1[8] = "TIRCM1\n";

/* The identity of the feature table: the first 4 bytes of the SHA-256
 * (tir_trace_hash) of CM_FEATURES_VERSION and the names in order, one a
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
	tir_trace_hash(b.s, d);
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
	for (int i = 0; i < m->ngroups; i++)
		put(&b, m->judged[i], sizeof *m->judged);
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
	bool v2 = !memcmp(mg, magic_v2, 8);
	if (memcmp(mg, magic, 8) && !v2) {
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
		m->booster_data = m->nrows;
		r.p += blen;
		r.left -= blen;
	}
	for (uint32_t i = 0; !v2 && i < ng; i++)
		if (!get(&r, m->judged[i], sizeof *m->judged))
			goto bad;
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
	tir_parallel_for(n, m->threads, feature_row, &j);
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
	int rc = cm_model_predict_group(m, tir_workload_key(w), n, f, scores);
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
