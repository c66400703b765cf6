/*
 * api.c — the handler of every route (the table is TIRD_ROUTES in tird.h):
 * each parses and checks its request, asks the part that answers it (jobs,
 * workers, the store), and maps the data to a document (views.c) and a
 * tird_error to its HTTP status (answer_error).  Nothing else in tird
 * speaks HTTP but http.c.
 *
 * GET /v1/best is the hot path (CI and people asking for the best schedule of
 * an op): its answers are kept in a small in-memory cache keyed by the query
 * string and stamped with d->best_gen, which every change of a best row bumps,
 * so a cached answer is never stale and a miss costs one indexed query.  On
 * a shared store (replicas on PostgreSQL) other replicas change best rows
 * too: the stamp adds the store's count of their changes
 * (store_best_epoch, which a NOTIFY from the database bumps within
 * milliseconds of their commit), and while the store cannot see them (its
 * listener reconnecting) every answer is read from the database.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tird.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "unknown"
#endif

/* ---- errors: a part's tird_error as an HTTP answer ----------------------------------- */

static int http_status_of(tird_errcode code)
{
	switch (code) {
	case TIRD_E_BAD_REQUEST:
	case TIRD_E_INVALID_WORKLOAD:
	case TIRD_E_INVALID_TARGET:
		return 400;
	case TIRD_E_FORBIDDEN:
		return 403;
	case TIRD_E_NOT_FOUND:
	case TIRD_E_UNKNOWN_WORKER:
		return 404;
	case TIRD_E_CONFLICT:
	case TIRD_E_LEASE_LOST:
		return 409;
	case TIRD_E_QUEUE_FULL:
		return 429;
	default:
		return 500;
	}
}

static void answer_error(http_resp *out, const tird_error *e)
{
	http_error(out, http_status_of(e->code), e->code ? tird_errcode_name(e->code) : "internal",
		   "%s", e->msg);
}

/* A database failure as a 500 that names the operation; the store's own
 * message (SQL, SQLite's words) goes to the log only (tird_store_fail). */
static void answer_store(http_resp *out, const store_error *err, const char *what)
{
	tird_error e = { 0 };
	tird_store_fail(&e, err, "%s", what);
	answer_error(out, &e);
}

/* ---- targets ------------------------------------------------------------------------ */

int tird_resolve_target(tird *d, const char *s, tir_target *t, tir_error *err)
{
	if (!strcmp(s, "cpu")) {
		*t = d->cpu;
		return 0;
	}
	if (!strcmp(s, "cuda")) {
		char key[128];
		if (workers_find_kind(d->workers, "cuda", key, sizeof key))
			return tir_target_parse(key, t, err);
	}
	return tir_target_parse(s, t, err);
}

/* ---- the best-query cache -------------------------------------------------------- */

#define BEST_SLOTS 128

typedef struct best_slot {
	char *query, *body;
	unsigned long gen;
} best_slot;

typedef struct best_cache {
	pthread_rwlock_t lock;
	best_slot slot[BEST_SLOTS];
} best_cache;

static unsigned hash(const char *s)
{
	unsigned h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

void api_init(tird *d)
{
	best_cache *c = tird_xcalloc(1, sizeof *c);
	pthread_rwlock_init(&c->lock, NULL);
	d->best_cache = c;
}

void api_free(tird *d)
{
	best_cache *c = d->best_cache;
	if (!c)
		return;
	for (int i = 0; i < BEST_SLOTS; i++) {
		free(c->slot[i].query);
		free(c->slot[i].body);
	}
	pthread_rwlock_destroy(&c->lock);
	free(c);
	d->best_cache = NULL;
}

/* A copy of the cached answer to query at generation gen, or NULL. */
static char *cache_get(best_cache *c, const char *query, unsigned long gen)
{
	best_slot *s = &c->slot[hash(query) % BEST_SLOTS];
	char *body = NULL;
	pthread_rwlock_rdlock(&c->lock);
	if (s->query && s->gen == gen && !strcmp(s->query, query))
		body = tird_strdup(s->body);
	pthread_rwlock_unlock(&c->lock);
	return body;
}

static void cache_put(best_cache *c, const char *query, const char *body, unsigned long gen)
{
	best_slot *s = &c->slot[hash(query) % BEST_SLOTS];
	char *q = tird_strdup(query), *b = tird_strdup(body);
	pthread_rwlock_wrlock(&c->lock);
	free(s->query);
	free(s->body);
	s->query = q;
	s->body = b;
	s->gen = gen;
	pthread_rwlock_unlock(&c->lock);
}

/* ---- small routes ------------------------------------------------------------------- */

void api_healthz(http_req *r, http_resp *out)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "status", atomic_load(&r->d->stopping) ? "stopping" : "ok");
	cJSON_AddStringToObject(o, "version", PACKAGE_VERSION);
	cJSON_AddNumberToObject(o, "schema", store_schema_version(r->d->db));
	cJSON_AddStringToObject(o, "cpu", r->d->cpu.key);
	cJSON_AddStringToObject(o, "replica", r->d->replica);
	cJSON_AddStringToObject(o, "db_backend", store_backend_name(r->d->db));
	cJSON_AddNumberToObject(o, "uptime_s", store_now() - r->d->started);
	http_json(out, 200, o);
}

void api_metrics(http_req *r, http_resp *out)
{
	out->status = 200;
	out->body = metrics_render(r->d);
	out->content_type = "text/plain; version=0.0.4";
}

/* POST /v1/fuse {"workload": GRAPH, "mode": "inductor"|"tvm"|"eager"}: the
 * plan (tir_fusion_plan_json), computed here, nothing stored. */
void api_fuse(http_req *r, http_resp *out)
{
	tird *d = r->d;
	cJSON *body = http_body_object(r, out);
	if (!body)
		return;
	const cJSON *wj = cJSON_GetObjectItemCaseSensitive(body, "workload");
	const cJSON *mj = cJSON_GetObjectItemCaseSensitive(body, "mode");
	tir_error err = { "" };
	tir_workload *w = NULL;
	tir_fusion_plan *p = NULL;
	char *text = NULL, *plan = NULL;
	tir_fuse_mode mode = TIR_FUSE_INDUCTOR;
	if (!cJSON_IsObject(wj) || (mj && !cJSON_IsString(mj))) {
		http_error(out, 400, "bad_request", "expected {\"workload\": {\"op\": \"graph\", "
			   "...}, \"mode\": \"inductor\"|\"tvm\"|\"eager\" (optional)}");
		goto out;
	}
	if (mj && tir_fuse_mode_parse(mj->valuestring, &mode, &err)) {
		http_error(out, 400, "bad_request", "mode: %s", err.msg);
		goto out;
	}
	if (mode == TIR_FUSE_MEASURED) {
		http_error(out, 400, "bad_request", "mode: a measured plan is decided by tuning "
			   "its kernels (tirctl tune --fusion measured), not planned alone");
		goto out;
	}
	text = cJSON_PrintUnformatted(wj);
	if (!(w = tir_workload_parse(text, strlen(text), &d->cfg.limits, &err))) {
		http_error(out, 400, "invalid_workload", "%s", err.msg);
		goto out;
	}
	if (!(p = tir_fusion_plan_new(w, mode, &err))) {
		http_error(out, 400, "invalid_workload", "%s", err.msg);
		goto out;
	}
	plan = tir_fusion_plan_json(p);
	cJSON *o = cJSON_Parse(plan);
	if (!o)
		http_error(out, 500, "internal", "the plan is not JSON");
	else
		http_json(out, 200, o);
out:
	free(plan);
	free(text);
	tir_fusion_plan_free(p);
	tir_workload_free(w);
	cJSON_Delete(body);
}

/* ---- jobs ----------------------------------------------------------------------------- */

static bool parse_id(const char *s, int64_t *id)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v <= 0)
		return false;
	*id = v;
	return true;
}

/* An optional integer field of body in [lo, hi] (absent: def).  false after
 * answering 400. */
static bool json_int(const cJSON *body, const char *name, long lo, long hi, long def,
		     long *v, http_resp *out)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(body, name);
	if (!x) {
		*v = def;
		return true;
	}
	/* the range before the conversion: a double out of long's range
	 * ("trials": 1e300) converts to no defined value */
	if (!cJSON_IsNumber(x) || !(x->valuedouble >= (double)lo && x->valuedouble <= (double)hi) ||
	    x->valuedouble != (double)(long)x->valuedouble) {
		http_error(out, 400, "bad_request", "%s: expected an integer in [%ld, %ld]",
			   name, lo, hi);
		return false;
	}
	*v = (long)x->valuedouble;
	return true;
}

#define SEED_MAX 9007199254740991.0        /* 2^53 - 1: exact as a JSON number */

/* "search": {"cost_model": "xgboost" | "random", "seed": N, "patience": P},
 * each optional, into rq->search (the default cost model where none is
 * named).  false after answering 400. */
static bool parse_search(const cJSON *body, job_request *rq, http_resp *out)
{
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(body, "search");
	store_search *o = &rq->search;
	*o = (store_search){ 0 };
	snprintf(o->cost_model, sizeof o->cost_model, "%s", tird_cost_models[0]);
	if (!s)
		return true;
	if (!cJSON_IsObject(s)) {
		http_error(out, 400, "bad_request", "search: expected an object {\"cost_model\": "
			   "\"xgboost\" | \"random\", \"seed\": N, \"patience\": P}");
		return false;
	}
	for (const cJSON *k = s->child; k; k = k->next) {
		if (!strcmp(k->string, "cost_model")) {
			bool ok = false;
			for (int i = 0; cJSON_IsString(k) && tird_cost_models[i]; i++)
				if (!strcmp(k->valuestring, tird_cost_models[i])) {
					snprintf(o->cost_model, sizeof o->cost_model, "%s",
						 tird_cost_models[i]);
					ok = true;
				}
			if (!ok) {
				http_error(out, 400, "bad_request", "search.cost_model: expected "
					   "\"xgboost\" or \"random\"%s%.40s%s",
					   cJSON_IsString(k) ? " (got \"" : "",
					   cJSON_IsString(k) ? k->valuestring : "",
					   cJSON_IsString(k) ? "\")" : "");
				return false;
			}
		} else if (!strcmp(k->string, "seed")) {
			if (!cJSON_IsNumber(k) || !(k->valuedouble >= 0) || k->valuedouble > SEED_MAX ||
			    (double)(int64_t)k->valuedouble != k->valuedouble) {
				http_error(out, 400, "bad_request", "search.seed: expected an integer "
					   "in [0, 2^53-1]");
				return false;
			}
			o->seed = (int64_t)k->valuedouble;
			o->has_seed = true;
		} else if (!strcmp(k->string, "patience")) {
			if (!cJSON_IsNumber(k) || !(k->valuedouble >= 0) ||
			    k->valuedouble > TIRD_PATIENCE_MAX ||
			    (double)(int)k->valuedouble != k->valuedouble) {
				http_error(out, 400, "bad_request", "search.patience: expected an "
					   "integer in [0, %d] (rounds; 0: never stop early)",
					   TIRD_PATIENCE_MAX);
				return false;
			}
			o->patience = (int)k->valuedouble;
			o->has_patience = true;
		} else {
			http_error(out, 400, "bad_request", "search: unknown key \"%s\" (expected "
				   "cost_model, seed, patience)", k->string);
			return false;
		}
	}
	return true;
}

/* A graph job with "fusion": the graph planned (tuner/fusion/), each kernel
 * submitted as a job of its own (its graph document: the same kernel in two
 * graphs is one workload), as tirctl tune --fusion does.  Answers 201 when
 * some kernel's job is new, else 200: {"fusion", "kernels": [{"name",
 * "nodes", "job": JOB}]}, the graph's time being the sum of the kernels'
 * bests once they are done.  rq->w is taken. */
static void submit_plan(tird *d, job_request *rq, const cJSON *fj, http_resp *out)
{
	tir_error err = { "" };
	tir_fuse_mode mode;
	tir_fusion_plan *p = NULL;
	cJSON *o = NULL, *plan = NULL;
	if (!cJSON_IsString(fj) || tir_fuse_mode_parse(fj->valuestring, &mode, &err) ||
	    mode == TIR_FUSE_MEASURED) {
		http_error(out, 400, "bad_request", "fusion: expected \"inductor\", \"tvm\", "
			   "\"eager\" or \"none\" (a measured plan is decided by tuning: tirctl tune "
			   "--fusion measured)");
		goto out;
	}
	if (!(p = tir_fusion_plan_new(rq->w, mode, &err))) {
		http_error(out, 400, "invalid_workload", "%s", err.msg);
		goto out;
	}
	char *pj = tir_fusion_plan_json(p);
	plan = cJSON_Parse(pj);
	free(pj);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "fusion", tir_fuse_mode_name(mode));
	cJSON *ks = cJSON_AddArrayToObject(o, "kernels");
	bool any_new = false;
	for (int k = 0; k < tir_fusion_plan_kernels(p); k++) {
		char *doc = tir_fusion_kernel_json(p, k);
		job_request kr = *rq;
		kr.w = tir_workload_parse(doc, strlen(doc), &d->cfg.limits, &err);
		free(doc);
		if (!kr.w) {
			http_error(out, 500, "internal", "kernel %s: %s", tir_fusion_kernel_name(p, k),
				   err.msg);
			goto out;
		}
		job_view v;
		job_outcome how;
		tird_error e = { 0 };
		if (jobs_submit(d->jobs, &kr, &v, &how, &e)) {
			answer_error(out, &e);
			goto out;
		}
		any_new |= how == JOB_NEW;
		cJSON *ko = cJSON_CreateObject();
		cJSON_AddStringToObject(ko, "name", tir_fusion_kernel_name(p, k));
		cJSON *kn = cJSON_GetArrayItem(cJSON_GetObjectItem(plan, "kernels"), k);
		cJSON_AddItemToObject(ko, "nodes", cJSON_Duplicate(cJSON_GetObjectItem(kn, "nodes"), 1));
		cJSON *jv = view_job(d, &v);
		if (how == JOB_JOINED)
			cJSON_AddBoolToObject(jv, "joined", true);
		cJSON_AddItemToObject(ko, "job", jv);
		job_view_clear(&v);
		cJSON_AddItemToArray(ks, ko);
	}
	http_json(out, any_new ? 201 : 200, o);
	o = NULL;
out:
	cJSON_Delete(o);
	cJSON_Delete(plan);
	tir_fusion_plan_free(p);
	tir_workload_free(rq->w);
	rq->w = NULL;
}

/* POST /v1/jobs: {"workload": {...}, "target": "cpu", "trials": N,
 * "batch": B, "search": {"cost_model": "xgboost" | "random", "seed": S,
 * "patience": P},
 * "fusion": M}: a graph is planned (submit_plan; Inductor's plan by default,
 * "none": tuned as one program).
 * Answers the job: 201 new, 200 joined ("joined": true) or cached
 * ("cached": true); the search options do not split the cache: a joined
 * job keeps its own, a cached one ran no search. */
static void submit(tird *d, const cJSON *body, http_resp *out)
{
	static const char *const known[] = { "workload", "target", "trials", "batch", "search",
					     "fusion" };
	for (const cJSON *k = body->child; k; k = k->next) {
		bool ok = false;
		for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
			ok |= !strcmp(k->string, known[i]);
		if (!ok) {
			http_error(out, 400, "bad_request", "unknown key \"%s\" (expected workload, "
				   "target, trials, batch, search, fusion)", k->string);
			return;
		}
	}
	const cJSON *wj = cJSON_GetObjectItemCaseSensitive(body, "workload");
	const cJSON *tj = cJSON_GetObjectItemCaseSensitive(body, "target");
	if (!cJSON_IsObject(wj)) {
		http_error(out, 400, "bad_request", "\"workload\" must be a workload object");
		return;
	}
	if (!cJSON_IsString(tj) || !tj->valuestring[0]) {
		http_error(out, 400, "bad_request", "\"target\" must be a string such as \"cpu\", "
			   "\"cuda\" or \"cuda:sm_90+h200\"");
		return;
	}
	long trials, batch;
	job_request rq = { 0 };
	if (!json_int(body, "trials", 1, d->cfg.max_trials, d->cfg.default_trials, &trials, out) ||
	    !json_int(body, "batch", 1, 4096, d->cfg.default_batch, &batch, out) ||
	    !parse_search(body, &rq, out))
		return;
	rq.trials = (int)trials;
	rq.batch = (int)batch;

	tir_error terr = { "" };
	char *wtext = cJSON_PrintUnformatted(wj);
	rq.w = wtext ? tir_workload_parse(wtext, strlen(wtext), &d->cfg.limits, &terr) : NULL;
	free(wtext);
	if (!rq.w) {
		http_error(out, 400, "invalid_workload", "%s", terr.msg);
		return;
	}
	if (tird_resolve_target(d, tj->valuestring, &rq.target, &terr)) {
		tir_workload_free(rq.w);
		http_error(out, 400, "invalid_target", "%s", terr.msg);
		return;
	}
	/* a graph is planned (Inductor's plan unless "fusion" says otherwise);
	 * "fusion": "none" tunes it as one program */
	const cJSON *fj = cJSON_GetObjectItemCaseSensitive(body, "fusion");
	if (fj && !(cJSON_IsString(fj) && !strcmp(fj->valuestring, "none"))) {
		submit_plan(d, &rq, fj, out);
		return;
	}
	if (!fj && tir_graph_nodes(rq.w) > 0) {
		cJSON *inductor = cJSON_CreateString("inductor");
		submit_plan(d, &rq, inductor, out);
		cJSON_Delete(inductor);
		return;
	}
	job_view v;
	job_outcome how;
	tird_error e = { 0 };
	if (jobs_submit(d->jobs, &rq, &v, &how, &e)) {
		answer_error(out, &e);
		return;
	}
	cJSON *o = view_job(d, &v);
	if (how == JOB_JOINED)
		cJSON_AddBoolToObject(o, "joined", true);
	job_view_clear(&v);
	http_json(out, how == JOB_NEW ? 201 : 200, o);
}

void api_jobs_submit(http_req *r, http_resp *out)
{
	cJSON *body = http_body_object(r, out);
	if (!body)
		return;
	submit(r->d, body, out);
	cJSON_Delete(body);
}

void api_jobs_list(http_req *r, http_resp *out)
{
	const char *st = http_query(r, "state"), *lim = http_query(r, "limit");
	int state = -1;
	if (st && (state = store_job_state_parse(st)) < 0) {
		http_error(out, 400, "bad_request", "state: \"%s\" is not queued, running, done, "
			   "failed or cancelled", st);
		return;
	}
	int limit = lim ? atoi(lim) : 100;
	job_list l;
	tird_error e = { 0 };
	if (jobs_list(r->d->jobs, state, limit > 0 ? limit : 100, &l, &e)) {
		answer_error(out, &e);
		return;
	}
	cJSON *arr = cJSON_CreateArray();
	for (int i = 0; i < l.n; i++)
		cJSON_AddItemToArray(arr, view_job_row(&l.rows[i]));
	job_list_clear(&l);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "jobs", arr);
	http_json(out, 200, o);
}

/* GET /v1/jobs/{id}[?wait=S&version=V]: the job, after waiting up to S
 * seconds for a change past version V. */
void api_job_get(http_req *r, http_resp *out)
{
	int64_t id;
	if (!parse_id(r->arg, &id)) {
		http_error(out, 404, "not_found", "no job \"%s\" (job ids are positive integers)",
			   r->arg);
		return;
	}
	const char *w = http_query(r, "wait"), *ver = http_query(r, "version");
	job_view v;
	tird_error e = { 0 };
	if (jobs_get(r->d->jobs, id, w ? atof(w) : 0, ver ? atol(ver) : 0, &v, &e)) {
		answer_error(out, &e);
		return;
	}
	cJSON *o = view_job(r->d, &v);
	job_view_clear(&v);
	http_json(out, 200, o);
}

/* DELETE /v1/jobs/{id}: a queued job is cancelled (200), a running one asked
 * to stop after its batch (202, "cancel_requested": true). */
void api_job_cancel(http_req *r, http_resp *out)
{
	int64_t id;
	if (!parse_id(r->arg, &id)) {
		http_error(out, 404, "not_found", "no job \"%s\"", r->arg);
		return;
	}
	job_view v;
	tird_error e = { 0 };
	if (jobs_cancel(r->d->jobs, id, &v, &e)) {
		answer_error(out, &e);
		return;
	}
	cJSON *o = view_job(r->d, &v);
	bool requested = v.cancel_requested;
	if (requested)
		cJSON_AddBoolToObject(o, "cancel_requested", true);
	job_view_clear(&v);
	http_json(out, requested ? 202 : 200, o);
}

/* ---- best -------------------------------------------------------------------------------- */

/* "cpu" and "cuda" ask for every target of that kind; a full key for itself. */
void tird_target_filter_of(const char *t, tird_target_filter *f)
{
	f->exact = f->prefix = NULL;
	if (!t || !*t)
		return;
	if (!strcmp(t, "cpu") || !strcmp(t, "cuda")) {
		snprintf(f->buf[1], sizeof f->buf[1], "%s:", t);
		f->prefix = f->buf[1];
		return;
	}
	snprintf(f->buf[0], sizeof f->buf[0], "%s", t);
	f->exact = f->buf[0];
	if (!strncmp(t, "cuda:", 5) && !strchr(t, '+')) {
		snprintf(f->buf[1], sizeof f->buf[1], "%s+", t);
		f->prefix = f->buf[1];
	}
}

typedef struct where {
	char key[64];
	const char *value;
} where;

typedef struct best_ctx {
	cJSON *arr;
	where w[16];
	int nw;
	bool bad;
	char why[160];
} best_ctx;

static void add_where(void *ctx, const char *v)
{
	best_ctx *b = ctx;
	const char *eq = strchr(v, '=');
	if (!eq || eq == v || (size_t)(eq - v) >= sizeof b->w[0].key || b->nw == 16) {
		b->bad = true;
		snprintf(b->why, sizeof b->why, "where: \"%.80s\" is not KEY=VALUE (at most 16)", v);
		return;
	}
	snprintf(b->w[b->nw].key, sizeof b->w[0].key, "%.*s", (int)(eq - v), v);
	b->w[b->nw++].value = eq + 1;
}

static bool where_match(const cJSON *x, const char *value)
{
	if (cJSON_IsNumber(x)) {
		char *end;
		double v = strtod(value, &end);
		return end != value && !*end && v == x->valuedouble;
	}
	if (cJSON_IsString(x))
		return !strcmp(x->valuestring, value);
	char *s = cJSON_PrintUnformatted(x);
	bool eq = s && !strcmp(s, value);
	free(s);
	return eq;
}

static void best_one(void *ctx, const store_best *b)
{
	best_ctx *c = ctx;
	cJSON *o = view_best(b, false);
	if (!o)
		return;
	const cJSON *w = cJSON_GetObjectItem(o, "workload");
	for (int i = 0; i < c->nw; i++) {
		const cJSON *x = cJSON_GetObjectItemCaseSensitive(w, c->w[i].key);
		if (!x || !where_match(x, c->w[i].value)) {
			cJSON_Delete(o);
			return;
		}
	}
	cJSON_AddItemToArray(c->arr, o);
}

void api_best(http_req *r, http_resp *out)
{
	tird *d = r->d;
	uint64_t others;
	bool cacheable = store_best_epoch(d->db, &others);
	/* both counts only grow: their sum changes whenever either does */
	unsigned long gen = atomic_load(&d->best_gen) + (unsigned long)others;
	char *q = http_query_string(r);
	char *hit = cacheable ? cache_get(d->best_cache, q, gen) : NULL;
	if (hit) {
		atomic_fetch_add(&d->metrics.best_cache_hits, 1);
		free(q);
		out->status = 200;
		out->body = hit;
		return;
	}
	const char *op = http_query(r, "op"), *t = http_query(r, "target");
	tird_target_filter tf;
	tird_target_filter_of(t, &tf);
	best_ctx c = { .arr = cJSON_CreateArray() };
	http_query_each(r, "where", add_where, &c);
	if (c.bad) {
		cJSON_Delete(c.arr);
		free(q);
		http_error(out, 400, "bad_request", "%s", c.why);
		return;
	}
	store_error err;
	if (store_best_each(d->db, op && *op ? op : NULL, tf.exact, tf.prefix, best_one, &c,
			    &err) < 0) {
		cJSON_Delete(c.arr);
		free(q);
		answer_store(out, &err, "reading the best");
		return;
	}
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "best", c.arr);
	http_json(out, 200, o);
	if (cacheable)
		cache_put(d->best_cache, q, out->body, gen);
	free(q);
}

/* ---- workloads: the best programs, traces and code ----------------------------------------- */

typedef struct wl_ctx {
	const char *key;
	store_best *rows;
	int n, cap;
} wl_ctx;

static void wl_row(void *ctx, const store_best *b)
{
	wl_ctx *c = ctx;
	if (strcmp(b->workload_key, c->key) != 0)
		return;
	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 4;
		c->rows = tird_xrealloc(c->rows, (size_t)c->cap * sizeof *c->rows);
	}
	store_best *dst = &c->rows[c->n++];
	*dst = *b;
	dst->op = tird_strdup(b->op);
	dst->canonical = tird_strdup(b->canonical);
	dst->trace = tird_strdup(b->trace);
}

/* Adds "tir" and/or "source" of the best trace to o. */
static void add_program(cJSON *o, const store_best *b, bool tir, bool source)
{
	tir_error err = { "" };
	tir_workload *w = tir_workload_parse(b->canonical, strlen(b->canonical), NULL, &err);
	tir_sched *s = w ? tir_sched_new(w, 0, &err) : NULL;
	tir_target t;
	if (!s || tir_sched_replay(s, b->trace, &err)) {
		cJSON_AddStringToObject(o, "error", err.msg);
		goto out;
	}
	if (tir) {
		char *p = tir_program_print(tir_sched_program(s));
		cJSON_AddStringToObject(o, "tir", p ? p : "");
		free(p);
	}
	if (source) {
		tir_code *code = NULL;
		if (tir_target_parse(b->target, &t, &err) == 0)
			code = tir_codegen(tir_sched_program(s), &t, &err);
		if (code)
			cJSON_AddStringToObject(o, "source", code->source ? code->source : "");
		else
			cJSON_AddStringToObject(o, "error", err.msg);
		tir_code_free(code);
	}
out:
	tir_sched_free(s);
	tir_workload_free(w);
}

void api_workload(http_req *r, http_resp *out)
{
	tird *d = r->d;
	char *canon = NULL, *op = NULL;
	double flops = 0;
	store_error err;
	int rc = store_workload_get(d->db, r->arg, &canon, &op, &flops, &err);
	if (rc <= 0) {
		if (rc < 0)
			answer_store(out, &err, "reading a workload and its bests");
		else
			http_error(out, 404, "not_found", "no workload %s is stored", r->arg);
		return;
	}
	const char *t = http_query(r, "target"), *inc = http_query(r, "include");
	bool tir = inc && strstr(inc, "tir"), source = inc && strstr(inc, "source");
	tird_target_filter tf;
	tird_target_filter_of(t, &tf);
	wl_ctx c = { .key = r->arg };
	if (store_best_each(d->db, op, tf.exact, tf.prefix, wl_row, &c, &err) < 0) {
		free(canon);
		free(op);
		answer_store(out, &err, "reading a workload and its bests");
		return;
	}
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "workload_key", r->arg);
	cJSON *w = cJSON_Parse(canon);
	cJSON_AddItemToObject(o, "workload", w ? w : cJSON_CreateNull());
	cJSON_AddStringToObject(o, "op", op);
	cJSON_AddNumberToObject(o, "flops", flops);
	cJSON *arr = cJSON_AddArrayToObject(o, "best");
	for (int i = 0; i < c.n; i++) {
		cJSON *e = view_best(&c.rows[i], true);
		if (e && (tir || source))
			add_program(e, &c.rows[i], tir, source);
		if (e)
			cJSON_AddItemToArray(arr, e);
		store_best_clear(&c.rows[i]);
	}
	free(c.rows);
	free(canon);
	free(op);
	http_json(out, 200, o);
}

/* ---- records: export and import -------------------------------------------------------------- */

/* GET /v1/records is streamed (http_resp.stream): a page of EXPORT_PAGE
 * records at a time is read from the store and printed as the client reads,
 * so an export holds one page in memory, never the whole table (16 exports
 * of 100k records at once took tird from 238 MB to 1.97 GB when each was
 * built as one cJSON tree and one string).  The document is
 *   {"format": ..., "records": [...], "workloads": {KEY: workload, ...}}
 * each record as view_record writes it (with its provenance: origin,
 * trusted, source, token, host), the workloads last: they are those of the
 * records sent, gathered on the way, so a record stored during the export
 * comes with its workload. */
enum { EXPORT_PAGE = 256 };

typedef enum { EX_RECORDS, EX_WORKLOADS, EX_DONE } export_phase;

typedef struct export_ctx {
	tird *d;
	char *wk, *target;         /* the filters, malloc'd, or NULL */
	int64_t cursor;            /* store_records_page's */
	export_phase phase;
	bool first;                /* no record written yet */
	char *buf;                 /* bytes made and not yet sent: buf[off..len) */
	size_t len, off, cap;
	cJSON *keys;               /* the workload keys seen: an object used as a set */
	char last_key[65];
} export_ctx;

static void ex_put(export_ctx *e, const char *s, size_t n)
{
	if (e->len + n > e->cap) {
		e->cap = (e->len + n) * 2;
		e->buf = tird_xrealloc(e->buf, e->cap);
	}
	memcpy(e->buf + e->len, s, n);
	e->len += n;
}

static void ex_puts(export_ctx *e, const char *s)
{
	ex_put(e, s, strlen(s));
}

static void export_one(void *ctx, const store_record *r)
{
	export_ctx *e = ctx;
	cJSON *v = view_record(r);
	char *t = cJSON_PrintUnformatted(v);
	cJSON_Delete(v);
	if (!e->first)
		ex_put(e, ",", 1);
	e->first = false;
	ex_puts(e, t);
	free(t);
	if (strcmp(e->last_key, r->workload_key)) {
		snprintf(e->last_key, sizeof e->last_key, "%s", r->workload_key);
		if (!cJSON_HasObjectItem(e->keys, r->workload_key))
			cJSON_AddNullToObject(e->keys, r->workload_key);
	}
}

/* Makes the next bytes of the document: 0, or -1 on a database error. */
static int export_more(export_ctx *e)
{
	store_error err;
	if (e->phase == EX_RECORDS) {
		int n = store_records_page(e->d->db, e->wk, e->target, &e->cursor, EXPORT_PAGE,
					   export_one, e, &err);
		if (n < 0) {
			tird_error te;
			tird_store_fail(&te, &err, "reading the records");
			return -1;
		}
		if (n == 0) {
			ex_puts(e, "],\"workloads\":{");
			e->phase = EX_WORKLOADS;
		}
		return 0;
	}
	if (e->phase == EX_WORKLOADS) {
		bool first = true;
		for (cJSON *k = e->keys->child; k; k = k->next) {
			char *canon = NULL;
			if (store_workload_get(e->d->db, k->string, &canon, NULL, NULL, &err) == 1 &&
			    canon) {
				cJSON *ks = cJSON_CreateString(k->string);
				char *key = cJSON_PrintUnformatted(ks);
				cJSON_Delete(ks);
				ex_puts(e, first ? "" : ",");
				ex_puts(e, key);
				ex_puts(e, ":");
				ex_puts(e, canon);
				free(key);
				first = false;
			}
			free(canon);
		}
		ex_puts(e, "}}");
		e->phase = EX_DONE;
	}
	return 0;
}

static long export_read(void *ctx, uint64_t pos, char *buf, size_t max)
{
	export_ctx *e = ctx;
	(void)pos;
	while (e->off == e->len) {
		e->off = e->len = 0;
		if (e->phase == EX_DONE)
			return HTTP_STREAM_END;
		if (export_more(e))
			return HTTP_STREAM_ERROR;   /* the client sees a cut document */
	}
	size_t n = e->len - e->off < max ? e->len - e->off : max;
	memcpy(buf, e->buf + e->off, n);
	e->off += n;
	return (long)n;
}

static void export_free(void *ctx)
{
	export_ctx *e = ctx;
	free(e->wk);
	free(e->target);
	free(e->buf);
	cJSON_Delete(e->keys);
	free(e);
}

void api_records_export(http_req *r, http_resp *out)
{
	tird *d = r->d;
	const char *wk = http_query(r, "workload"), *t = http_query(r, "target");
	export_ctx *e = tird_xcalloc(1, sizeof *e);
	e->d = d;
	e->wk = wk && *wk ? tird_strdup(wk) : NULL;
	e->target = t && *t ? tird_strdup(t) : NULL;
	e->first = true;
	e->keys = cJSON_CreateObject();
	ex_puts(e, "{\"format\":\"" TIR_RECORDS_FORMAT "\",\"records\":[");
	/* the first page before the answer, so that a database failing at once
	 * is a 500 naming the operation, not a cut document */
	store_error err;
	int n = store_records_page(d->db, e->wk, e->target, &e->cursor, EXPORT_PAGE, export_one,
				   e, &err);
	if (n < 0) {
		export_free(e);
		answer_store(out, &err, "reading the records");
		return;
	}
	if (n == 0) {
		ex_puts(e, "],\"workloads\":{}}");
		e->phase = EX_DONE;
	}
	out->status = 200;
	out->content_type = NULL;
	out->stream = export_read;
	out->stream_ctx = e;
	out->stream_free = export_free;
}

/* POST /v1/records[?trust=1]: a tird-records/1 document.  1. everything is
 * checked (tir_records_parse: the document; trust_check_import: every trace
 * replays and validates for its target, every ok record keeps to the bounds
 * of its workload; a bad record is a 400 naming records[i], nothing stored);
 * 2. it is stored in one transaction (store_import): all of it or, on a
 * database error, a full disk or a crash, none.  The records are stored
 * imported, with their source (the token and the address), and untrusted
 * unless trust=1: an untrusted record is never a best and counts in no
 * best's trials until a worker of this tird measures its trace again. */
void api_records_import(http_req *r, http_resp *out)
{
	tird *d = r->d;
	if (r->len == 0) {
		http_error(out, 400, "bad_request", "the request needs a JSON body");
		return;
	}
	const char *tq = http_query(r, "trust");
	if (tq && strcmp(tq, "1") && strcmp(tq, "0") && strcmp(tq, "true") && strcmp(tq, "false")) {
		http_error(out, 400, "bad_request", "trust: expected 1 or 0 (got \"%.40s\")", tq);
		return;
	}
	bool trust = tq && (!strcmp(tq, "1") || !strcmp(tq, "true"));
	tir_records_fault fault;
	tir_error terr = { "" };
	tir_records *recs = tir_records_parse(r->body, r->len, &d->cfg.limits, &fault, &terr);
	if (!recs) {
		static const char *const codes[] = { [TIR_RECORDS_BAD_JSON] = "bad_json",
			[TIR_RECORDS_BAD_DOCUMENT] = "bad_request",
			[TIR_RECORDS_BAD_WORKLOAD] = "invalid_workload",
			[TIR_RECORDS_BAD_TARGET] = "invalid_target" };
		http_error(out, 400, codes[fault], "%s", terr.msg);
		return;
	}
	char **canon = trust_check_import(recs, &terr);
	if (!canon) {
		http_error(out, 400, "invalid_record", "%s (nothing of the import was stored)",
			   terr.msg);
		tir_records_free(recs);
		return;
	}
	int nw = tir_records_workloads(recs), nr = tir_records_count(recs), nt = 0;
	const char *who = r->token ? r->token->name : "an open tird";
	char source[200];
	snprintf(source, sizeof source, "import by %s from %s%s", who, r->peer,
		 trust ? ", trusted" : "");
	store_workload *wl = tird_xcalloc((size_t)nw + 1, sizeof *wl);
	store_target *tg = tird_xcalloc((size_t)nr + 1, sizeof *tg);
	store_record *rec = tird_xcalloc((size_t)nr + 1, sizeof *rec);
	for (int i = 0; i < nw; i++) {
		const tir_workload *w = tir_records_workload(recs, i);
		wl[i] = (store_workload){ tir_workload_key(w), tir_workload_op(w),
					  tir_workload_canonical(w), tir_workload_flops(w) };
	}
	for (int i = 0; i < nr; i++) {
		const tir_record *x = tir_records_at(recs, i);
		/* the id is recomputed from the content and the trace made canonical,
		 * so a record imported twice, exported by two caches, or cloned with
		 * a space added, is stored once */
		rec[i] = (store_record){ .workload_key = wl[x->workload].key, .target = x->target,
					 .trace = canon[i], .status = x->status,
					 .latency_us = x->latency_us,
					 .max_rel_error = x->max_rel_error, .message = x->message,
					 .worker = x->worker, .created = x->created,
					 .imported = true, .trusted = trust, .source = source,
					 .token = r->token ? r->token->name : NULL, .host = r->peer };
		/* a target per record, put if new (the insert of a stored one is a
		 * cheap no-op in the transaction; no quadratic search here) */
		tg[nt++] = (store_target){ x->target, strncmp(x->target, "cuda:", 5) ? "cpu" : "cuda" };
	}
	store_import_result res;
	store_error err;
	if (store_import(d->db, wl, nw, tg, nt, rec, nr, &res, &err)) {
		answer_store(out, &err, "storing the import (nothing of it was stored)");
	} else {
		if (res.best_changed)
			atomic_fetch_add(&d->best_gen, 1);
		log_info("import by %s from %s: %d records added (%s), %d already stored", who,
			 r->peer, res.added, trust ? "trusted" : "untrusted until measured here",
			 res.present);
		cJSON *o = cJSON_CreateObject();
		cJSON_AddNumberToObject(o, "imported", res.added);
		cJSON_AddNumberToObject(o, "skipped", res.present);
		cJSON_AddBoolToObject(o, "trusted", trust);
		http_json(out, 200, o);
	}
	for (int i = 0; i < nr; i++)
		free(canon[i]);
	free(canon);
	free(rec);
	free(tg);
	free(wl);
	tir_records_free(recs);
}

/* DELETE /v1/records/{id} (admin): the record removed and the best of its
 * (workload, target) recomputed from what remains. */
void api_record_remove(http_req *r, http_resp *out)
{
	tird *d = r->d;
	size_t n = strlen(r->arg);
	if (n != 64 || strspn(r->arg, "0123456789abcdef") != 64) {
		http_error(out, 404, "not_found", "no record \"%.80s\" (a record id is 64 hex "
			   "digits)", r->arg);
		return;
	}
	bool changed = false;
	store_error err;
	int rc = store_record_remove(d->db, r->arg, &changed, &err);
	if (rc < 0) {
		answer_store(out, &err, "removing a record");
		return;
	}
	if (rc == 0) {
		http_error(out, 404, "not_found", "no record %s is stored", r->arg);
		return;
	}
	if (changed)
		atomic_fetch_add(&d->best_gen, 1);
	log_info("record %s removed by %s from %s%s", r->arg,
		 r->token ? r->token->name : "an open tird", r->peer,
		 changed ? "; its best recomputed" : "");
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "removed", r->arg);
	cJSON_AddBoolToObject(o, "best_changed", changed);
	http_json(out, 200, o);
}

/* ---- lower: a program and its code, no measurement ------------------------------------------------ */

static const char *str_field(const cJSON *o, const char *name)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, name);
	return cJSON_IsString(x) ? x->valuestring : NULL;
}

void api_lower(http_req *r, http_resp *out)
{
	tird *d = r->d;
	cJSON *body = http_body_object(r, out);
	if (!body)
		return;
	const cJSON *wj = cJSON_GetObjectItemCaseSensitive(body, "workload");
	const char *ts = str_field(body, "target");
	const cJSON *trj = cJSON_GetObjectItemCaseSensitive(body, "trace");
	tir_error err = { "" };
	tir_workload *w = NULL;
	tir_sched *s = NULL;
	tir_code *code = NULL;
	char *text = NULL, *trace = NULL, *prog = NULL;
	tir_target t;
	if (!cJSON_IsObject(wj) || !ts) {
		http_error(out, 400, "bad_request", "expected {\"workload\": {...}, \"target\": "
			   "\"...\", \"trace\": {...} (optional)}");
		goto out;
	}
	text = cJSON_PrintUnformatted(wj);
	if (!(w = tir_workload_parse(text, strlen(text), &d->cfg.limits, &err))) {
		http_error(out, 400, "invalid_workload", "%s", err.msg);
		goto out;
	}
	if (tird_resolve_target(d, ts, &t, &err)) {
		http_error(out, 400, "invalid_target", "%s", err.msg);
		goto out;
	}
	if (!(s = tir_sched_new(w, 0, &err))) {
		http_error(out, 500, "internal", "%s", err.msg);
		goto out;
	}
	if (trj) {
		trace = cJSON_IsString(trj) ? tird_strdup(trj->valuestring)
					    : cJSON_PrintUnformatted(trj);
		if (tir_sched_replay(s, trace, &err)) {
			http_error(out, 400, "invalid_trace", "%s", err.msg);
			goto out;
		}
	}
	if (tir_verify(tir_sched_program(s), &t, &err)) {
		http_error(out, 400, "invalid_schedule", "%s", err.msg);
		goto out;
	}
	if (!(code = tir_codegen(tir_sched_program(s), &t, &err))) {
		http_error(out, 400, "codegen", "%s", err.msg);
		goto out;
	}
	prog = tir_program_print(tir_sched_program(s));
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "workload_key", tir_workload_key(w));
	cJSON_AddStringToObject(o, "target", t.key);
	cJSON_AddStringToObject(o, "program", prog ? prog : "");
	cJSON_AddStringToObject(o, "source", code->source ? code->source : "");
	http_json(out, 200, o);
out:
	free(prog);
	free(trace);
	free(text);
	tir_code_free(code);
	tir_sched_free(s);
	tir_workload_free(w);
	cJSON_Delete(body);
}

/* ---- workers: registration, leases, results ---------------------------------------------------- */

/* The emulator an emulated worker named, kept with it (its key says only
 * that it is emulated); 0 (a step of api_worker_register's chain). */
static int emulator_of(tir_target *t, const cJSON *emj)
{
	if (t->emulated && cJSON_IsString(emj) && emj->valuestring[0])
		snprintf(t->emulator, sizeof t->emulator, "%s", emj->valuestring);
	return 0;
}

/* POST /v1/workers {"target": FULL_KEY, "name": N, "emulated": B,
 * "emulator": E}: 201 with the worker's id and the periods it must keep
 * (lease_s, heartbeat_s).  A worker under an emulator says so, and then
 * its key must end in "+emulated": what it measures is stored under that
 * key, never the hardware's. */
void api_worker_register(http_req *r, http_resp *out)
{
	cJSON *body = http_body_object(r, out);
	if (!body)
		return;
	const cJSON *tj = cJSON_GetObjectItemCaseSensitive(body, "target");
	const cJSON *nj = cJSON_GetObjectItemCaseSensitive(body, "name");
	const cJSON *ej = cJSON_GetObjectItemCaseSensitive(body, "emulated");
	const cJSON *emj = cJSON_GetObjectItemCaseSensitive(body, "emulator");
	tir_target t;
	tir_error terr = { "" };
	worker_info w;
	tird_error e = { 0 };
	if (!cJSON_IsString(tj))
		http_error(out, 400, "bad_request", "\"target\" must be a full target key such "
			   "as \"cpu:x86_64+avx2+fma\" or \"cuda:sm_90+h200\"");
	else if (ej && !cJSON_IsBool(ej))
		http_error(out, 400, "bad_request", "\"emulated\" must be true or false");
	else if (tir_target_parse(tj->valuestring, &t, &terr))
		http_error(out, 400, "invalid_target", "%s", terr.msg);
	else if (cJSON_IsTrue(ej) && !t.emulated)
		http_error(out, 400, "invalid_target", "target \"%s\": the worker says it runs "
			   "under an emulator%s%s, so its key must end in +emulated (its timings "
			   "are not the hardware's)", t.key, cJSON_IsString(emj) ? ", " : "",
			   cJSON_IsString(emj) ? emj->valuestring : "");
	else if (emulator_of(&t, emj) ||
		 workers_register(r->d->workers, &t, cJSON_IsString(nj) ? nj->valuestring : NULL,
				  r->token, r->peer, &w, &e))
		answer_error(out, &e);
	else {
		jobs_wake(r->d->jobs);     /* a job queued for this target may start */
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "worker_id", w.id);
		cJSON_AddStringToObject(o, "target", w.target);
		cJSON_AddBoolToObject(o, "emulated", t.emulated);
		cJSON_AddNumberToObject(o, "lease_s", w.lease_s);
		cJSON_AddNumberToObject(o, "heartbeat_s", w.heartbeat_s);
		http_json(out, 201, o);
	}
	cJSON_Delete(body);
}

static void batch_doc(void *ctx, const worker_batch *b)
{
	*(cJSON **)ctx = view_batch(b);
}

/* POST /v1/workers/{id}/lease[?wait=S]: a long poll (default 20 s, at most
 * 30): 200 with a batch, or 204 when none came. */
void api_worker_lease(http_req *r, http_resp *out)
{
	const char *wq = http_query(r, "wait");
	cJSON *doc = NULL;
	tird_error e = { 0 };
	int rc = workers_lease(r->d->workers, r->arg, r->token, wq ? atof(wq) : 20, batch_doc,
			       &doc, &e);
	if (rc < 0) {
		answer_error(out, &e);
	} else if (rc == 0) {
		out->status = 204;
		out->body = tird_strdup("");
	} else {
		http_json(out, 200, doc);
	}
}

/* POST /v1/workers/{id}/results {"batch_id": N, "results": [{"status",
 * "latency_us", "max_rel_error", "message"}...], "compile_cache_hits": H}:
 * every result is checked before the batch is touched (H, optional: the
 * compiles the worker's cache saved, 0 to the batch's size). */
void api_worker_results(http_req *r, http_resp *out)
{
	cJSON *body = http_body_object(r, out);
	if (!body)
		return;
	const cJSON *bj = cJSON_GetObjectItemCaseSensitive(body, "batch_id");
	const cJSON *rs = cJSON_GetObjectItemCaseSensitive(body, "results");
	if (!cJSON_IsNumber(bj) || !cJSON_IsArray(rs)) {
		cJSON_Delete(body);
		http_error(out, 400, "bad_request", "expected {\"batch_id\": N, \"results\": [...]}");
		return;
	}
	if (!(bj->valuedouble >= 1 && bj->valuedouble <= SEED_MAX) ||
	    bj->valuedouble != (double)(int64_t)bj->valuedouble) {
		cJSON_Delete(body);
		http_error(out, 400, "bad_request", "batch_id: expected a positive integer (a batch "
			   "this worker leased)");
		return;
	}
	int n = cJSON_GetArraySize(rs), i = 0;
	tir_candidate *res = tird_xcalloc((size_t)(n ? n : 1), sizeof *res);
	const cJSON *x;
	cJSON_ArrayForEach(x, rs) {
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(x, "status");
		const cJSON *lat = cJSON_GetObjectItemCaseSensitive(x, "latency_us");
		const cJSON *mre = cJSON_GetObjectItemCaseSensitive(x, "max_rel_error");
		const cJSON *msg = cJSON_GetObjectItemCaseSensitive(x, "message");
		int status = cJSON_IsString(st) ? tir_measure_status_parse(st->valuestring) : -1;
		if (status < 0) {
			free(res);
			cJSON_Delete(body);
			http_error(out, 400, "bad_request", "results[%d].status: expected a "
				   "measurement status such as \"ok\" or \"build_error\"", i);
			return;
		}
		res[i++] = (tir_candidate){ NULL, status, cJSON_IsNumber(lat) ? lat->valuedouble : 0,
					    cJSON_IsNumber(mre) ? mre->valuedouble : -1,
					    cJSON_IsString(msg) ? msg->valuestring : NULL };
	}
	const cJSON *hj = cJSON_GetObjectItemCaseSensitive(body, "compile_cache_hits");
	if (hj && !(cJSON_IsNumber(hj) && hj->valuedouble >= 0 && hj->valuedouble <= n &&
		    hj->valuedouble == (double)(int)hj->valuedouble)) {
		free(res);
		cJSON_Delete(body);
		http_error(out, 400, "bad_request", "compile_cache_hits: expected an integer from 0 "
			   "to the %d results", n);
		return;
	}
	int hits = hj ? (int)hj->valuedouble : 0;
	tird_error e = { 0 };
	if (workers_results(r->d->workers, r->arg, r->token, (int64_t)bj->valuedouble, n, res,
			    hits, &e)) {
		answer_error(out, &e);
	} else {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddNumberToObject(o, "accepted", n);
		http_json(out, 200, o);
	}
	free(res);
	cJSON_Delete(body);
}

static void answer_ok(http_resp *out)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddBoolToObject(o, "ok", true);
	http_json(out, 200, o);
}

void api_worker_heartbeat(http_req *r, http_resp *out)
{
	tird_error e = { 0 };
	if (workers_heartbeat(r->d->workers, r->arg, r->token, &e))
		answer_error(out, &e);
	else
		answer_ok(out);
}

void api_worker_leave(http_req *r, http_resp *out)
{
	tird_error e = { 0 };
	if (workers_leave(r->d->workers, r->arg, r->token, &e))
		answer_error(out, &e);
	else
		answer_ok(out);
}

void api_workers_list(http_req *r, http_resp *out)
{
	worker_info *w;
	int n = workers_list(r->d->workers, &w);
	cJSON *arr = cJSON_CreateArray();
	for (int i = 0; i < n; i++)
		cJSON_AddItemToArray(arr, view_worker(&w[i]));
	free(w);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "workers", arr);
	http_json(out, 200, o);
}
