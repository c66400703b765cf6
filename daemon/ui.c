/*
 * ui.c — the dashboard: its pages and script, served by tird itself, and
 * the two JSON routes only it needed that the API lacked.
 *
 * The assets (daemon/ui/: index.html, dash.js, dash.css) are compiled into
 * the binary (daemon/ui/embed.sh makes ui_assets.inc at build time), so
 * tird serves them with nothing fetched from outside and nothing read from
 * disk at run time.  They hold no data: every figure a page shows comes
 * from tird's JSON routes, read by dash.js in the browser, so the assets
 * are `open` routes and the data routes keep their own access (with
 * protect_reads, the page asks for the token and sends it as
 * `Authorization: Bearer`).  One page document serves every page: `/` is
 * the jobs page, `/ui/NAME` the page NAME (dash.js reads the path).
 *
 * The JSON routes:
 *   GET /v1/roofline  every stored best placed on its target's roofline:
 *                     the workload's flops and compulsory bytes (libtir), the
 *                     target's nominal peaks (tir_target_peak);
 *   GET /v1/models    each full key's cost model: rows, last trained, ranking
 *                     accuracy before learning (cm_model_stats).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tird.h"

/* ---- the assets ------------------------------------------------------------------ */

typedef struct ui_asset {
	const char *name;          /* its file name in daemon/ui/ */
	const char *type;          /* Content-Type */
	const char *text;
} ui_asset;

static const ui_asset assets[] = {
#include "ui_assets.inc"
};
#define NASSETS (sizeof assets / sizeof assets[0])

/* The pages dash.js draws; each is the page document. */
static const char *const pages[] = { "jobs", "job", "cache", "workload", "workers", "graph",
				     NULL };

static const ui_asset *asset_named(const char *name)
{
	for (size_t i = 0; i < NASSETS; i++)
		if (!strcmp(assets[i].name, name))
			return &assets[i];
	return NULL;
}

static void answer_asset(http_resp *out, const ui_asset *a)
{
	out->status = 200;
	out->body = tird_strdup(a->text);
	out->content_type = a->type;
}

void ui_index(http_req *r, http_resp *out)
{
	(void)r;
	answer_asset(out, asset_named("index.html"));
}

void ui_asset_get(http_req *r, http_resp *out)
{
	for (int i = 0; pages[i]; i++)
		if (!strcmp(r->arg, pages[i])) {
			answer_asset(out, asset_named("index.html"));
			return;
		}
	const ui_asset *a = strcmp(r->arg, "index.html") ? asset_named(r->arg) : NULL;
	if (!a) {
		http_error(out, 404, "not_found", "the dashboard has no page or file \"%.100s\" "
			   "(pages: jobs, job, cache, workload, workers, graph)", r->arg);
		return;
	}
	answer_asset(out, a);
}

/* ---- GET /v1/roofline -------------------------------------------------------------- */

typedef struct best_copy {
	store_best *rows;
	int n, cap;
} best_copy;

static void copy_best(void *ctx, const store_best *b)
{
	best_copy *c = ctx;
	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 16;
		c->rows = tird_xrealloc(c->rows, sizeof *c->rows * (size_t)c->cap);
	}
	store_best *d = &c->rows[c->n++];
	*d = *b;
	d->op = tird_strdup(b->op);
	d->canonical = tird_strdup(b->canonical);
	d->trace = NULL;
}

/* The target object of key in arr, made (with its peaks) the first time;
 * NULL when the key does not parse (a row of an older tird's key). */
static cJSON *target_of(cJSON *arr, const char *key)
{
	cJSON *t;
	cJSON_ArrayForEach(t, arr)
		if (!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(t, "target")), key))
			return t;
	tir_target tt;
	tir_error err;
	if (tir_target_parse(key, &tt, &err) < 0)
		return NULL;
	tir_peak pk;
	tir_target_peak(&tt, &pk);
	t = cJSON_CreateObject();
	cJSON_AddStringToObject(t, "target", key);
	cJSON_AddStringToObject(t, "kind", tt.kind == TIR_TARGET_CUDA ? "cuda" : "cpu");
	cJSON_AddNumberToObject(t, "peak_gflops", pk.gflops);
	cJSON_AddNumberToObject(t, "peak_gbps", pk.gbps);
	cJSON_AddBoolToObject(t, "nominal", true);
	cJSON_AddStringToObject(t, "basis", pk.basis);
	cJSON_AddNumberToObject(t, "ridge", pk.gbps > 0 ? pk.gflops / pk.gbps : 0);
	cJSON_AddArrayToObject(t, "points");
	cJSON_AddItemToArray(arr, t);
	return t;
}

/* The flops and compulsory bytes of a stored workload: 0 with both, -1
 * with a message when it no longer parses or builds. */
static int workload_traffic(tird *d, const char *canonical, double *flops, double *bytes,
			    tir_error *err)
{
	tir_workload *w = tir_workload_parse(canonical, strlen(canonical), &d->cfg.limits, err);
	if (!w)
		return -1;
	tir_program *p = tir_program_build(w, err);
	if (!p) {
		tir_workload_free(w);
		return -1;
	}
	*flops = tir_workload_flops(w);
	*bytes = tir_program_param_bytes(p);
	tir_program_free(p);
	tir_workload_free(w);
	return 0;
}

void ui_roofline(http_req *r, http_resp *out)
{
	tird *d = r->d;
	const char *t = http_query(r, "target");
	tird_target_filter tf;
	tird_target_filter_of(t, &tf);
	best_copy c = { 0 };
	store_error err;
	if (store_best_each(d->db, NULL, tf.exact, tf.prefix, copy_best, &c, &err) < 0) {
		tird_error e;
		tird_store_fail(&e, &err, "reading the bests");
		http_error(out, 500, "store", "%s", e.msg);
		free(c.rows);
		return;
	}
	cJSON *targets = cJSON_CreateArray();
	for (int i = 0; i < c.n; i++) {
		store_best *b = &c.rows[i];
		cJSON *tg = target_of(targets, b->target);
		double flops = 0, bytes = 0;
		tir_error terr = { "the workload's program has no parameters" };
		if (tg && b->latency_us > 0) {
			cJSON *pt = cJSON_CreateObject();
			cJSON_AddStringToObject(pt, "workload_key", b->workload_key);
			cJSON_AddStringToObject(pt, "op", b->op ? b->op : "");
			cJSON_AddNumberToObject(pt, "latency_us", b->latency_us);
			cJSON_AddStringToObject(pt, "record_id", b->record_id);
			if (workload_traffic(d, b->canonical ? b->canonical : "", &flops, &bytes,
					     &terr) == 0 && bytes > 0) {
				cJSON_AddNumberToObject(pt, "flops", flops);
				cJSON_AddNumberToObject(pt, "bytes", bytes);
				cJSON_AddNumberToObject(pt, "intensity", flops / bytes);
				cJSON_AddNumberToObject(pt, "gflops", flops / (b->latency_us * 1e3));
				cJSON_AddNumberToObject(pt, "gbps", bytes / (b->latency_us * 1e3));
			} else {
				cJSON_AddStringToObject(pt, "error", terr.msg);
			}
			cJSON_AddItemToArray(cJSON_GetObjectItem(tg, "points"), pt);
		}
		free(b->op);
		free(b->canonical);
	}
	free(c.rows);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "targets", targets);
	http_json(out, 200, o);
}

/* ---- GET /v1/models ------------------------------------------------------------------ */

static void add_accuracy(cJSON *o, const char *name, double pairs, double right)
{
	if (pairs > 0)
		cJSON_AddNumberToObject(o, name, right / pairs);
	else
		cJSON_AddNullToObject(o, name);
}

void ui_models(http_req *r, http_resp *out)
{
	model_info *m;
	int n = models_list(r->d, &m);
	cJSON *arr = cJSON_CreateArray();
	for (int i = 0; i < n; i++) {
		const cm_stats *s = &m[i].stats;
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "target", m[i].key);
		cJSON_AddStringToObject(o, "state", m[i].making ? "making" : m[i].failed ? "failed"
					: m[i].made ? "ready" : "none");
		if (m[i].made) {
			cJSON_AddNumberToObject(o, "rows", s->rows);
			cJSON_AddNumberToObject(o, "trained_rows", s->trained_rows);
			cJSON_AddNumberToObject(o, "workloads", s->workloads);
			cJSON_AddBoolToObject(o, "trained", s->trained);
			if (s->trained_at > 0)
				cJSON_AddNumberToObject(o, "last_trained", s->trained_at);
			else
				cJSON_AddNullToObject(o, "last_trained");
			cJSON_AddNumberToObject(o, "unsaved_rows", m[i].unsaved);
			if (m[i].version > 0)
				cJSON_AddNumberToObject(o, "version", (double)m[i].version);
			else
				cJSON_AddNullToObject(o, "version");
			cJSON_AddBoolToObject(o, "writer", m[i].writer);
			cJSON_AddNumberToObject(o, "judged_pairs", s->judged_pairs);
			add_accuracy(o, "pairwise_accuracy", s->judged_pairs, s->judged_right);
			cJSON_AddNumberToObject(o, "recent_batches", s->recent_batches);
			add_accuracy(o, "recent_pairwise_accuracy", s->recent_pairs, s->recent_right);
		}
		cJSON_AddItemToArray(arr, o);
	}
	free(m);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "models", arr);
	http_json(out, 200, o);
}
