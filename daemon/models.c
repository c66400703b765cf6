/*
 * models.c — the cost model of each full target key ("cpu:x86_64+avx2+fma",
 * "cpu:aarch64+neon+dotprod", "cuda:sm_90+h200"; an H100's is not an
 * H200's): loaded from the store the
 * first time a job of the key needs it, or made from a seed and the stored
 * records of that key when none was saved (or the saved one was made by a
 * build with other features), and written back when it learnt enough:
 * model_save_rows rows since its last write, or model_save_s after the
 * first of them, and at shutdown (the cron duty, models_cron).  A blob is
 * megabytes (8 MB CPU, 3 MB CUDA with the seeds), so writing it after every
 * job, as tird did, cost more than a small job; a tird killed loses at most
 * what the model learnt since the last write, which the stored records can
 * teach a new one again.
 *
 * One XGBoost model per key is shared by every job of that key, so each
 * workload tuned teaches the next; rows of other hardware never train or
 * score it (an x86 and an AArch64 measurement of one workload used to share
 * a CPU model and its workload's own booster).  A new model starts from the
 * seed of its kind (costmodel/seed/KIND.records, built beside tird or
 * installed with it; the model_seed setting names another file, or none),
 * the seed's records of the key's own architecture only ("cpu:x86_64" for
 * every x86 key, "cuda:sm_90" for every sm_90 part), each workload in a "seed:" group of its own,
 * so the first workload tuned on a fresh tird is already ranked by what was
 * learnt on others.  A key ending in "+emulated" (a worker under qemu) has
 * no model: emulated timings train nothing, and its jobs rank with random
 * scores.  The model of this machine's CPU is made at start-up; the others
 * when their first job runs.  The stored records are the truth; the model
 * is a summary of them.
 *
 * Replicas on one database: a model is written only by the replica that
 * holds its writer lease (store_model_put: the first write takes it, the
 * lease thread renews it, models_renew, and shutdown gives it up).  The
 * others read the model the holder wrote: when their first job of the key
 * needs it, and again whenever the holder wrote a newer one — each write
 * is a version of the cost_models row (007_model_version.sql), and a
 * replica compares the version its copy is of with the row's at the start
 * of each job of the key and, from the cron duty, every MODELS_READ_S
 * (slot_read; the writer finds its own version there and reads nothing).
 * A newer one is fetched and loaded without any lock a search takes, then
 * swapped into the model the searches hold, whole (cm_model_replace: a
 * search scoring meanwhile uses the old model or the new one, never a mix,
 * and a training under way is dropped).  Their own jobs still teach their
 * copy in memory until the next read, but what it learns is not written
 * (the holder's is the one in the database, and the stored records,
 * shared by all, are the truth).  A holder that dies stops renewing its
 * lease; once it lapsed (job_lease_s), the first replica whose copy learnt
 * something and is due to write it (models_cron) takes the lease with that
 * write, and writes the model from then on.
 *
 * The store's cost_models rows are keyed by the full key (in the column
 * 001_init.sql named target_kind); the rows "cpu" and "cuda" of tirds
 * before issue #33, one model for every key of a kind, are no longer read.
 */
#include <limits.h>
#include <pthread.h>
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

/* How often, at most, the cron duty asks the store whether a model's
 * writer saved a newer version (one small SELECT per key). */
#define MODELS_READ_S 3.0

/* One key's model.  key and kind never change; m is made once, under
 * make_mu (a job of another key never waits for it), and its contents are
 * replaced in place when another replica's newer version is read (the
 * pointer jobs hold stays valid); unsaved, writer and reading are atomic;
 * the rest is guarded by make_mu. */
typedef struct model_slot {
	char key[128];
	tir_target_kind kind;
	pthread_mutex_t make_mu;
	cm_model *m;
	bool failed;               /* making it failed: jobs rank at random */
	atomic_int unsaved;        /* rows learnt since the last write */
	atomic_bool writer;        /* this replica holds the writer lease */
	atomic_bool reading;       /* a thread is reading a newer version */
	double dirty_since;        /* when the first of them was */
	int64_t version;           /* the stored write m is of (0: none) */
	int64_t refused;           /* a stored version that did not load */
	double read_at;            /* when the store's version was last asked */
	struct model_slot *next;
} model_slot;

struct tird_models {
	pthread_mutex_t mu;        /* guards list */
	model_slot *list;
};

/* The slot of key (made empty the first time). */
static model_slot *slot_of(tird *d, const tir_target *t)
{
	tird_models *ms = d->models;
	pthread_mutex_lock(&ms->mu);
	model_slot *s = ms->list;
	while (s && strcmp(s->key, t->key))
		s = s->next;
	if (!s) {
		s = tird_xcalloc(1, sizeof *s);
		snprintf(s->key, sizeof s->key, "%s", t->key);
		s->kind = t->kind;
		pthread_mutex_init(&s->make_mu, NULL);
		s->next = ms->list;
		ms->list = s;
	}
	pthread_mutex_unlock(&ms->mu);
	return s;
}

/* ---- the stored records of a key ------------------------------------------------- */

/* Records of one target key, copied out of the store (its callback holds
 * the store's lock, so no other store call can run in it). */
typedef struct rec_copy {
	char *wk;                  /* the workload key, malloc'd */
	int seq;                   /* the store's order */
	cm_record r;               /* target and trace malloc'd */
} rec_copy;

typedef struct rec_list {
	const char *key;           /* the full target key */
	rec_copy *c;
	int n, cap;
} rec_list;

static void copy_record(void *ctx, const store_record *r)
{
	rec_list *l = ctx;
	if (!r->target || !r->trace || strcmp(r->target, l->key) ||
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

/* Appends to m every stored record of key, each workload's under its key. */
static void append_stored(tird *d, cm_model *m, const char *key, int *rows, int *skipped)
{
	rec_list l = { key, NULL, 0, 0 };
	store_error err;
	if (store_records_each(d->db, NULL, NULL, copy_record, &l, &err) < 0)
		log_warn("cost model for %s: reading records: %s", key, err.msg);
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
 * (one file for both kinds: each key takes its own architecture's records),
 * else KIND.records built beside tird or installed with it; NULL: none. */
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

/* A model of slot s's key made from the seed records of its architecture
 * and the stored records of the key, trained once: when none was saved, or
 * the saved one cannot be loaded (why: its error; NULL: none was saved).
 * NULL with msg when a seed the settings name cannot be used. */
static cm_model *model_make(tird *d, const model_slot *s, const char *why, char *msg,
			    size_t n)
{
	double t0 = store_now();
	int k = kind_index(s->kind);
	cm_model *m = cm_model_new();
	int rows = 0, skipped = 0, nw = 0, seeded = 0;
	char buf[PATH_MAX], arch[sizeof s->key];
	/* the architecture: the key before its first feature */
	snprintf(arch, sizeof arch, "%.*s", (int)strcspn(s->key, "+"), s->key);
	const char *seed = seed_path(d, k, buf, sizeof buf);
	tir_error terr = { "" };
	if (seed && (seeded = cm_model_append_file(m, seed, arch, &nw, &skipped, &terr)) < 0) {
		snprintf(msg, n, "%s", terr.msg);
		cm_model_free(m);
		if (d->cfg.model_seed && d->cfg.model_seed[0])
			return NULL;
		log_warn("cost model for %s: the seed is not used: %s", s->key, msg);
		m = cm_model_new();
		seeded = skipped = 0;
		seed = NULL;
	}
	append_stored(d, m, s->key, &rows, &skipped);
	if (cm_model_train(m, &terr))
		log_warn("cost model for %s: %s", s->key, terr.msg);
	char from_seed[PATH_MAX + 512] = "";
	if (seed)
		snprintf(from_seed, sizeof from_seed, ", and %d rows of %d workloads of %s from "
			 "the seed %s", seeded, nw, arch, seed);
	if (why)
		log_warn("cost model for %s not loaded (%s): rebuilt from %d stored records "
			 "(%d skipped)%s in %.1f s", s->key, why, rows, skipped, from_seed,
			 store_now() - t0);
	else
		log_info("cost model for %s: new, from %d stored records (%d skipped)%s in %.1f s",
			 s->key, rows, skipped, from_seed, store_now() - t0);
	return m;
}

/* ---- load and save ---------------------------------------------------------------------- */

static void slot_save(tird *d, model_slot *s);

/* Loads or makes slot s's model (s->make_mu held); -1 with msg when a seed
 * the settings name cannot be used. */
static int slot_make(tird *d, model_slot *s, char *msg, size_t n)
{
	void *blob = NULL;
	size_t len = 0;
	int64_t version = 0;
	store_error err;
	tir_error terr = { "" };
	int rc = store_model_get(d->db, s->key, &blob, &len, &version, &err);
	if (rc < 0)
		log_warn("cost model for %s: %s", s->key, err.msg);
	s->read_at = store_now();
	if (rc == 1 && (s->m = cm_model_load(blob, len, &terr))) {
		s->version = version;
		log_info("cost model for %s: %d rows", s->key, cm_model_rows(s->m));
	} else {
		if (rc == 1)       /* not read again until a newer one is written */
			s->refused = version;
		s->m = model_make(d, s, rc == 1 ? terr.msg : NULL, msg, n);
		if (!s->m) {
			free(blob);
			return -1;
		}
		/* saved at once, so a restart loads it instead of making it again
		 * from the seed and the records */
		if (cm_model_rows(s->m) > 0)
			slot_save(d, s);
	}
	free(blob);
	cm_model_set_threads(s->m, tird_search_threads(s->kind));
	return 0;
}

int models_load(tird *d, char *msg, size_t n)
{
	d->models = tird_xcalloc(1, sizeof *d->models);
	pthread_mutex_init(&d->models->mu, NULL);
	/* this machine's CPU now: a seed the settings name that cannot be used
	 * stops tird here rather than at its first job */
	model_slot *s = slot_of(d, &d->cpu);
	pthread_mutex_lock(&s->make_mu);
	int rc = slot_make(d, s, msg, n);
	s->failed = rc != 0;
	pthread_mutex_unlock(&s->make_mu);
	return rc;
}

/* Reads the stored model of slot s's key when another replica wrote a
 * newer version than s->m is of, and swaps it into s->m whole (without
 * make_mu while it fetches and loads: jobs of the key start meanwhile, and
 * GET /v1/models answers, with the copy they have).  What the copy learnt
 * since is dropped with it: unsaved starts again from 0 (a job running
 * meanwhile still counts its rows when it ends, models_learned, which
 * only makes the next write due sooner).  A version that does not load
 * (written by a build with other features) is logged once and not asked
 * again; the copy is kept.  One thread reads a slot at a time: another
 * that finds it being read goes on with the copy, which the read replaces
 * under it. */
static void slot_read(tird *d, model_slot *s)
{
	if (atomic_exchange(&s->reading, true))
		return;
	store_error err;
	int64_t have, refused, v = 0;
	pthread_mutex_lock(&s->make_mu);
	bool made = s->m != NULL;
	have = s->version;
	refused = s->refused;
	s->read_at = store_now();
	pthread_mutex_unlock(&s->make_mu);
	int rc = made ? store_model_version(d->db, s->key, &v, &err) : 0;
	if (rc < 0)
		log_warn("cost model for %s: its stored version not read: %s", s->key, err.msg);
	if (rc != 1 || v <= have || v == refused)
		goto out;
	void *blob = NULL;
	size_t len = 0;
	double t0 = store_now();
	if ((rc = store_model_get(d->db, s->key, &blob, &len, &v, &err)) != 1) {
		if (rc < 0)
			log_warn("cost model for %s: version %lld not read: %s", s->key,
				 (long long)v, err.msg);
		goto out;
	}
	tir_error terr = { "" };
	cm_model *m = cm_model_load(blob, len, &terr);
	free(blob);
	pthread_mutex_lock(&s->make_mu);
	if (!m) {
		s->refused = v;
		log_warn("cost model for %s: version %lld, written by another replica, not "
			 "loaded (%s): this replica goes on with its own copy", s->key,
			 (long long)v, terr.msg);
	} else if (v <= s->version) {    /* this replica wrote one as new meanwhile */
		cm_model_free(m);
	} else {
		int rows = cm_model_rows(m), was = cm_model_rows(s->m);
		atomic_store(&s->unsaved, 0);
		cm_model_replace(s->m, m);
		s->version = v;
		s->dirty_since = 0;
		log_info("cost model for %s: version %lld read, written by another replica: %d "
			 "rows (the copy it replaced had %d) in %.2f s", s->key, (long long)v, rows,
			 was, store_now() - t0);
	}
	pthread_mutex_unlock(&s->make_mu);
out:
	atomic_store(&s->reading, false);
}

cm_model *models_of(tird *d, const tir_target *t)
{
	if (t->emulated)
		return NULL;
	model_slot *s = slot_of(d, t);
	pthread_mutex_lock(&s->make_mu);
	bool made_now = false;
	if (!s->m && !s->failed) {
		char msg[512];
		made_now = true;
		if (slot_make(d, s, msg, sizeof msg)) {
			log_error("cost model for %s: %s; its jobs rank candidates at random",
				  s->key, msg);
			s->failed = true;
		}
	}
	cm_model *m = s->m;
	pthread_mutex_unlock(&s->make_mu);
	/* a job starts with the newest model any replica wrote */
	if (m && !made_now)
		slot_read(d, s);
	return m;
}

static void slot_save(tird *d, model_slot *s)
{
	int k = kind_index(s->kind);
	unsigned char *blob = NULL;
	size_t len = 0;
	tir_error terr = { "" };
	store_error err;
	int learnt = atomic_exchange(&s->unsaved, 0), put = -1;
	int64_t version = 0;
	double now = store_now();
	if (cm_model_save(s->m, &blob, &len, &terr)) {
		log_warn("cost model for %s not saved: %s", s->key, terr.msg);
	} else if ((put = store_model_put(d->db, s->key, "xgboost", blob, len, d->replica, now,
					  now + (double)d->cfg.job_lease_s, &version,
					  &err)) < 0) {
		log_warn("cost model for %s not saved: %s", s->key, err.msg);
	} else if (put == 0) {
		/* another replica writes this model: what this copy learnt is
		 * not written, and asked again only model_save_s from now */
		if (atomic_exchange(&s->writer, false) || !s->dirty_since)
			log_info("cost model for %s not written: another replica holds its "
				 "writer lease", s->key);
		s->dirty_since = now;
		learnt = 0;
	} else {
		if (!atomic_exchange(&s->writer, true))
			log_info("cost model for %s: this replica writes it (writer lease taken)",
				 s->key);
		atomic_fetch_add(&d->metrics.model_saves[k], 1);
		s->dirty_since = 0;
		s->version = version;      /* this copy is that write: not read back */
		log_info("cost model for %s saved: %d rows, %.1f MB, %d learnt since the last "
			 "write (version %lld)", s->key, cm_model_rows(s->m), (double)len / 1e6,
			 learnt, (long long)version);
		learnt = 0;
	}
	if (learnt)                /* not written: still to write */
		atomic_fetch_add(&s->unsaved, learnt);
	free(blob);
}

int models_list(tird *d, model_info **out)
{
	int n = 0;
	*out = NULL;
	if (!d->models)
		return 0;
	pthread_mutex_lock(&d->models->mu);
	model_slot *list = d->models->list;  /* slots are only ever prepended */
	pthread_mutex_unlock(&d->models->mu);
	for (model_slot *s = list; s; s = s->next)
		n++;
	*out = tird_xcalloc((size_t)(n ? n : 1), sizeof **out);
	int i = 0;
	for (model_slot *s = list; s && i < n; s = s->next, i++) {
		model_info *m = &(*out)[i];
		snprintf(m->key, sizeof m->key, "%s", s->key);
		m->unsaved = atomic_load(&s->unsaved);
		/* a model being made (from the seed: seconds) holds make_mu; the
		 * page that asks says so rather than waiting */
		if (pthread_mutex_trylock(&s->make_mu)) {
			m->making = true;
			continue;
		}
		m->failed = s->failed;
		m->made = s->m != NULL;
		m->version = s->version;
		m->writer = atomic_load(&s->writer);
		if (s->m)
			cm_model_stats(s->m, &m->stats);
		pthread_mutex_unlock(&s->make_mu);
	}
	return n;
}

void models_learned(tird *d, const tir_target *t, int rows)
{
	if (rows > 0 && !t->emulated)
		atomic_fetch_add(&slot_of(d, t)->unsaved, rows);
}

void models_cron(tird *d, bool all)
{
	if (!d->models)
		return;
	double now = store_now();
	pthread_mutex_lock(&d->models->mu);
	model_slot *list = d->models->list;  /* slots are only ever prepended */
	pthread_mutex_unlock(&d->models->mu);
	for (model_slot *s = list; s; s = s->next) {
		/* a newer version another replica wrote (not at shutdown), asked
		 * without waiting for a model being made */
		if (!all && !pthread_mutex_trylock(&s->make_mu)) {
			bool due = s->m && now - s->read_at >= MODELS_READ_S;
			pthread_mutex_unlock(&s->make_mu);
			if (due)
				slot_read(d, s);
		}
		int learnt = atomic_load(&s->unsaved);
		if (learnt <= 0)
			continue;
		pthread_mutex_lock(&s->make_mu);
		if (s->m) {
			if (!s->dirty_since)
				s->dirty_since = now;
			if (all || learnt >= d->cfg.model_save_rows ||
			    now - s->dirty_since >= (double)d->cfg.model_save_s)
				slot_save(d, s);
		}
		pthread_mutex_unlock(&s->make_mu);
	}
}

/* The slots, for the lease duties (slots are only ever prepended). */
static model_slot *slots(tird *d)
{
	if (!d->models)
		return NULL;
	pthread_mutex_lock(&d->models->mu);
	model_slot *list = d->models->list;
	pthread_mutex_unlock(&d->models->mu);
	return list;
}

void models_renew(tird *d)
{
	double until = store_now() + (double)d->cfg.job_lease_s;
	for (model_slot *s = slots(d); s; s = s->next) {
		if (!atomic_load(&s->writer))
			continue;
		store_error err;
		int rc = store_model_renew(d->db, s->key, d->replica, until, &err);
		if (rc < 0)
			log_warn("cost model for %s: writer lease not renewed: %s", s->key, err.msg);
		else if (rc == 0 && atomic_exchange(&s->writer, false))
			log_warn("cost model for %s: writer lease lost: another replica writes it "
				 "now", s->key);
	}
}

void models_release(tird *d)
{
	for (model_slot *s = slots(d); s; s = s->next) {
		store_error err;
		if (atomic_exchange(&s->writer, false) &&
		    store_model_release(d->db, s->key, d->replica, &err))
			log_warn("cost model for %s: writer lease not given up: %s", s->key,
				 err.msg);
	}
}

void models_free(tird *d)
{
	if (!d->models)
		return;
	while (d->models->list) {
		model_slot *s = d->models->list;
		d->models->list = s->next;
		cm_model_free(s->m);
		pthread_mutex_destroy(&s->make_mu);
		free(s);
	}
	pthread_mutex_destroy(&d->models->mu);
	free(d->models);
	d->models = NULL;
}
