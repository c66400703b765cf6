/*
 * models.c — the cost model of each target kind (CPU, CUDA): loaded from the
 * store at start-up, or made from a seed and the stored records when none
 * was saved (or the saved one was made by a build with other features), and
 * written back when it learnt enough: model_save_rows rows since its last
 * write, or model_save_s after the first of them, and at shutdown (the
 * cron duty, models_cron).  A blob is megabytes (8 MB CPU, 3 MB CUDA with
 * the seeds), so writing it after every job, as tird did, cost more than
 * a small job; a tird killed loses at most what the model learnt since the
 * last write, which the stored records can teach a new one again.
 *
 * One XGBoost model per kind is shared by every job of that kind, so each
 * workload tuned teaches the next.  A new model starts from the seed of its
 * kind (costmodel/seed/KIND.records, built beside tird or installed with it;
 * the model_seed setting names another file, or none), so the first
 * workload tuned on a fresh tird is already ranked by what was learnt on
 * others.  The stored records are the truth; the model is a summary of them.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tird.h"

static const char *const kind_names[2] = { "cpu", "cuda" };

static int kind_index(tir_target_kind kind)
{
	return kind == TIR_TARGET_CUDA;
}

int tird_search_threads(tir_target_kind kind)
{
	return kind == TIR_TARGET_CUDA ? 0 : 1;
}

cm_model *models_of(tird *d, tir_target_kind kind)
{
	return d->models[kind_index(kind)];
}

/* ---- the stored records of a kind ------------------------------------------------ */

/* Records of one target kind, copied out of the store (its callback holds
 * the store's lock, so no other store call can run in it). */
typedef struct rec_copy {
	char *wk;                  /* the workload key, malloc'd */
	int seq;                   /* the store's order */
	cm_record r;               /* target and trace malloc'd */
} rec_copy;

typedef struct rec_list {
	const char *prefix;        /* "cpu:" / "cuda:" */
	rec_copy *c;
	int n, cap;
} rec_list;

static void copy_record(void *ctx, const store_record *r)
{
	rec_list *l = ctx;
	if (!r->target || !r->trace || strncmp(r->target, l->prefix, strlen(l->prefix)) ||
	    !r->trusted)           /* an untrusted import teaches the model nothing */
		return;
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 256;
		l->c = tird_xrealloc(l->c, sizeof *l->c * (size_t)l->cap);
	}
	l->c[l->n] = (rec_copy){ tird_strdup(r->workload_key), l->n,
				 { tird_strdup(r->target), tird_strdup(r->trace),
				   r->status && !strcmp(r->status, "ok"), r->latency_us } };
	l->n++;
}

/* By workload, then in the store's order (oldest first). */
static int by_workload(const void *a, const void *b)
{
	const rec_copy *x = a, *y = b;
	int c = strcmp(x->wk, y->wk);
	return c ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

static void rec_list_free(rec_list *l)
{
	for (int i = 0; i < l->n; i++) {
		free(l->c[i].wk);
		free((char *)l->c[i].r.target);
		free((char *)l->c[i].r.trace);
	}
	free(l->c);
}

/* Appends to m every stored record of kind k, each workload's under its key. */
static void append_stored(tird *d, cm_model *m, int k, int *rows, int *skipped)
{
	rec_list l = { k ? "cuda:" : "cpu:", NULL, 0, 0 };
	store_error err;
	if (store_records_each(d->db, NULL, NULL, copy_record, &l, &err) < 0)
		log_warn("cost model for %s: reading records: %s", kind_names[k], err.msg);
	if (l.n)
		qsort(l.c, (size_t)l.n, sizeof *l.c, by_workload);
	cm_record *r = tird_xcalloc((size_t)(l.n ? l.n : 1), sizeof *r);
	for (int i = 0; i < l.n; i++)
		r[i] = l.c[i].r;
	for (int i = 0, j; i < l.n; i = j) {
		for (j = i + 1; j < l.n && !strcmp(l.c[j].wk, l.c[i].wk); j++)
			;
		char *canon = NULL;
		tir_workload *w = NULL;
		if (store_workload_get(d->db, l.c[i].wk, &canon, NULL, NULL, &err) == 1)
			w = tir_workload_parse(canon, strlen(canon), NULL, NULL);
		free(canon);
		*rows += cm_model_append_records(m, l.c[i].wk, w, j - i, &r[i], skipped);
		tir_workload_free(w);
	}
	free(r);
	rec_list_free(&l);
}

/* ---- a new model ---------------------------------------------------------------------- */

/* The seed file a new model of kind k starts from: the setting model_seed
 * (one file for both kinds: each takes its own records), else KIND.records
 * built beside tird or installed with it; NULL: none. */
static const char *seed_path(const tird *d, int k, char *buf, size_t n)
{
	const char *s = d->cfg.model_seed;
	if (s && s[0])
		return strcmp(s, "none") ? s : NULL;
	static const char *const dirs[] = { TIRD_SEED_BUILD, TIRD_SEED_INSTALLED };
	for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
		snprintf(buf, n, "%s/%s.records", dirs[i], kind_names[k]);
		if (access(buf, R_OK) == 0)
			return buf;
	}
	return NULL;
}

/* A model of kind k made from the seed and the stored records of that
 * kind, trained once: when none was saved, or the saved one cannot
 * be loaded (why: its error; NULL: none was saved).  NULL with msg when a
 * seed the settings name cannot be used. */
static cm_model *model_make(tird *d, int k, const char *why, char *msg, size_t n)
{
	double t0 = store_now();
	cm_model *m = cm_model_new();
	int rows = 0, skipped = 0, nw = 0, seeded = 0;
	char buf[PATH_MAX], prefix[16];
	snprintf(prefix, sizeof prefix, "%s:", kind_names[k]);
	const char *seed = seed_path(d, k, buf, sizeof buf);
	tir_error terr = { "" };
	if (seed && (seeded = cm_model_append_file(m, seed, prefix, &nw, &skipped, &terr)) < 0) {
		snprintf(msg, n, "%s", terr.msg);
		cm_model_free(m);
		if (d->cfg.model_seed && d->cfg.model_seed[0])
			return NULL;
		log_warn("cost model for %s: the seed is not used: %s", kind_names[k], msg);
		m = cm_model_new();
		seeded = skipped = 0;
		seed = NULL;
	}
	append_stored(d, m, k, &rows, &skipped);
	if (cm_model_train(m, &terr))
		log_warn("cost model for %s: %s", kind_names[k], terr.msg);
	char from_seed[PATH_MAX + 96] = "";
	if (seed)
		snprintf(from_seed, sizeof from_seed, ", and %d rows of %d workloads from the seed %s",
			 seeded, nw, seed);
	if (why)
		log_warn("cost model for %s not loaded (%s): rebuilt from %d stored records "
			 "(%d skipped)%s in %.1f s", kind_names[k], why, rows, skipped, from_seed,
			 store_now() - t0);
	else
		log_info("cost model for %s: new, from %d stored records (%d skipped)%s in %.1f s",
			 kind_names[k], rows, skipped, from_seed, store_now() - t0);
	return m;
}

/* ---- load and save ---------------------------------------------------------------------- */

int models_load(tird *d, char *msg, size_t n)
{
	for (int k = 0; k < 2; k++) {
		tir_target_kind kind = k ? TIR_TARGET_CUDA : TIR_TARGET_CPU;
		void *blob = NULL;
		size_t len = 0;
		store_error err;
		tir_error terr = { "" };
		int rc = store_model_get(d->db, kind_names[k], &blob, &len, &err);
		if (rc < 0)
			log_warn("cost model for %s: %s", kind_names[k], err.msg);
		if (rc == 1 && (d->models[k] = cm_model_load(blob, len, &terr))) {
			log_info("cost model for %s: %d rows", kind_names[k],
				 cm_model_rows(d->models[k]));
		} else {
			d->models[k] = model_make(d, k, rc == 1 ? terr.msg : NULL, msg, n);
			if (!d->models[k]) {
				free(blob);
				return -1;
			}
			/* saved at once, so a restart loads it instead of making it
			 * again from the seed and the records */
			if (cm_model_rows(d->models[k]) > 0)
				models_save(d, kind);
		}
		free(blob);
		cm_model_set_threads(d->models[k], tird_search_threads(kind));
	}
	return 0;
}

void models_save(tird *d, tir_target_kind kind)
{
	int k = kind_index(kind);
	unsigned char *blob = NULL;
	size_t len = 0;
	tir_error terr = { "" };
	store_error err;
	int learnt = atomic_exchange(&d->model_unsaved[k], 0);
	if (cm_model_save(d->models[k], &blob, &len, &terr)) {
		log_warn("cost model for %s not saved: %s", kind_names[k], terr.msg);
	} else if (store_model_put(d->db, kind_names[k], "xgboost", blob, len, &err)) {
		log_warn("cost model for %s not saved: %s", kind_names[k], err.msg);
	} else {
		atomic_fetch_add(&d->metrics.model_saves[k], 1);
		d->model_dirty_since[k] = 0;
		log_info("cost model for %s saved: %d rows, %.1f MB, %d learnt since the last "
			 "write", kind_names[k], cm_model_rows(d->models[k]), (double)len / 1e6,
			 learnt);
		learnt = 0;
	}
	if (learnt)                /* not written: still to write */
		atomic_fetch_add(&d->model_unsaved[k], learnt);
	free(blob);
}

void models_learned(tird *d, tir_target_kind kind, int rows)
{
	if (rows > 0)
		atomic_fetch_add(&d->model_unsaved[kind_index(kind)], rows);
}

void models_cron(tird *d, bool all)
{
	double now = store_now();
	for (int k = 0; k < 2; k++) {
		int learnt = atomic_load(&d->model_unsaved[k]);
		if (!d->models[k] || learnt <= 0)
			continue;
		if (!d->model_dirty_since[k])
			d->model_dirty_since[k] = now;
		if (all || learnt >= d->cfg.model_save_rows ||
		    now - d->model_dirty_since[k] >= (double)d->cfg.model_save_s)
			models_save(d, k ? TIR_TARGET_CUDA : TIR_TARGET_CPU);
	}
}

void models_free(tird *d)
{
	for (int k = 0; k < 2; k++) {
		cm_model_free(d->models[k]);
		d->models[k] = NULL;
	}
}
