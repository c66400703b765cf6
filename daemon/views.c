/*
 * views.c — the JSON documents tird's routes answer: a job, a row of the
 * job list, a best result, an exported record, a worker, a leased batch.  One function per document,
 * so that every route that shows a job shows the same fields (the names are
 * the contract of DESIGN.md: job_id, state, workload_key, latency_us, ...).
 * The documents are built from data the parts return; only view_job reads
 * the store (the workload and the best of the job's target).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tird.h"

/* Whether a full key names measurements under an emulator ("+emulated"
 * last, target.c). */
static bool target_emulated(const char *key)
{
	size_t n = key ? strlen(key) : 0, e = strlen("+emulated");
	return n > e && !strcmp(key + n - e, "+emulated");
}

cJSON *view_best(const store_best *b, bool with_trace)
{
	if (!b->record_id[0])
		return NULL;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "workload_key", b->workload_key);
	cJSON *w = b->canonical ? cJSON_Parse(b->canonical) : NULL;
	cJSON_AddItemToObject(o, "workload", w ? w : cJSON_CreateNull());
	cJSON_AddStringToObject(o, "op", b->op ? b->op : "");
	cJSON_AddStringToObject(o, "target", b->target);
	if (target_emulated(b->target))
		cJSON_AddBoolToObject(o, "emulated", true);
	cJSON_AddNumberToObject(o, "latency_us", b->latency_us);
	cJSON_AddNumberToObject(o, "gflops",
				b->latency_us > 0 ? b->flops / (b->latency_us * 1e3) : 0);
	cJSON_AddNumberToObject(o, "trials", b->trials);
	cJSON_AddStringToObject(o, "record_id", b->record_id);
	if (with_trace) {
		cJSON *t = b->trace ? cJSON_Parse(b->trace) : NULL;
		cJSON_AddItemToObject(o, "trace", t ? t : cJSON_CreateNull());
	}
	return o;
}

static void add_time(cJSON *o, const char *name, double t)
{
	if (t > 0)
		cJSON_AddNumberToObject(o, name, t);
	else
		cJSON_AddNullToObject(o, name);
}

cJSON *view_job(tird *d, const job_view *v)
{
	const store_job *sj = &v->job;
	cJSON *o = cJSON_CreateObject();
	char *canon = NULL;
	double flops = 0;
	store_error err;
	if (store_workload_get(d->db, sj->workload_key, &canon, NULL, &flops, &err) < 0)
		log_warn("job %lld: %s", (long long)sj->id, err.msg);
	cJSON_AddNumberToObject(o, "job_id", (double)sj->id);
	cJSON_AddStringToObject(o, "state", store_job_state_name(sj->state));
	cJSON_AddStringToObject(o, "workload_key", sj->workload_key);
	cJSON *w = cJSON_Parse(v->canonical ? v->canonical : canon ? canon : "null");
	cJSON_AddItemToObject(o, "workload", w ? w : cJSON_CreateNull());
	cJSON_AddStringToObject(o, "target", sj->target);
	cJSON_AddNumberToObject(o, "trials", sj->trials);
	cJSON_AddNumberToObject(o, "batch", sj->batch);
	cJSON *so = cJSON_AddObjectToObject(o, "search");
	cJSON_AddStringToObject(so, "cost_model",
				sj->search.cost_model[0] ? sj->search.cost_model : tird_cost_models[0]);
	if (sj->search.has_seed)
		cJSON_AddNumberToObject(so, "seed", (double)sj->search.seed);
	else
		cJSON_AddNullToObject(so, "seed");
	if (sj->search.has_patience)
		cJSON_AddNumberToObject(so, "patience", sj->search.patience);
	else
		cJSON_AddNullToObject(so, "patience");
	cJSON_AddNumberToObject(o, "trials_done", sj->trials_done);
	cJSON_AddNumberToObject(o, "errors", sj->errors);
	if (sj->best_us > 0) {
		cJSON_AddNumberToObject(o, "best_us", sj->best_us);
		cJSON_AddNumberToObject(o, "best_gflops", flops / (sj->best_us * 1e3));
	} else {
		cJSON_AddNullToObject(o, "best_us");
		cJSON_AddNullToObject(o, "best_gflops");
	}
	cJSON_AddBoolToObject(o, "cached", sj->cached);
	if (sj->message && sj->message[0])
		cJSON_AddStringToObject(o, "message", sj->message);
	add_time(o, "created", sj->created);
	add_time(o, "started", sj->started);
	add_time(o, "finished", sj->finished);
	if (sj->owner[0])
		cJSON_AddStringToObject(o, "owner", sj->owner);
	cJSON_AddNumberToObject(o, "version", (double)v->version);
	store_best b;
	if (store_best_get(d->db, sj->workload_key, sj->target, &b, &err) == 1) {
		cJSON *r = view_best(&b, false);
		if (r)
			cJSON_AddItemToObject(o, "result", r);
		store_best_clear(&b);
	}
	free(canon);
	return o;
}

cJSON *view_job_row(const store_job *sj)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "job_id", (double)sj->id);
	cJSON_AddStringToObject(o, "state", store_job_state_name(sj->state));
	cJSON_AddStringToObject(o, "workload_key", sj->workload_key);
	cJSON_AddStringToObject(o, "target", sj->target);
	cJSON_AddNumberToObject(o, "trials", sj->trials);
	cJSON_AddNumberToObject(o, "trials_done", sj->trials_done);
	if (sj->best_us > 0)
		cJSON_AddNumberToObject(o, "best_us", sj->best_us);
	else
		cJSON_AddNullToObject(o, "best_us");
	cJSON_AddBoolToObject(o, "cached", sj->cached);
	add_time(o, "created", sj->created);
	return o;
}

cJSON *view_record(const store_record *r)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "id", r->id);
	cJSON_AddStringToObject(o, "workload_key", r->workload_key);
	cJSON_AddStringToObject(o, "target", r->target);
	cJSON_AddStringToObject(o, "trace", r->trace);
	cJSON_AddStringToObject(o, "status", r->status);
	/* measured under an emulator: its latency says nothing of the hardware */
	if (target_emulated(r->target))
		cJSON_AddBoolToObject(o, "emulated", true);
	if (r->latency_us > 0)
		cJSON_AddNumberToObject(o, "latency_us", r->latency_us);
	if (r->max_rel_error >= 0)
		cJSON_AddNumberToObject(o, "max_rel_error", r->max_rel_error);
	if (r->message)
		cJSON_AddStringToObject(o, "message", r->message);
	if (r->worker)
		cJSON_AddStringToObject(o, "worker", r->worker);
	if (r->job_id > 0)         /* the job that measured it (this tird's id) */
		cJSON_AddNumberToObject(o, "job_id", (double)r->job_id);
	cJSON_AddNumberToObject(o, "created", r->created);
	/* provenance: how this tird came by it (an importer ignores these and
	 * decides its own trust) */
	cJSON_AddStringToObject(o, "origin", r->imported ? "imported" : "measured");
	cJSON_AddBoolToObject(o, "trusted", r->trusted);
	if (r->source)
		cJSON_AddStringToObject(o, "source", r->source);
	if (r->token)
		cJSON_AddStringToObject(o, "token", r->token);
	if (r->host)
		cJSON_AddStringToObject(o, "host", r->host);
	return o;
}

cJSON *view_worker(const struct worker_info *w)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "worker_id", w->id);
	cJSON_AddStringToObject(o, "target", w->target);
	cJSON_AddStringToObject(o, "name", w->name);
	cJSON_AddStringToObject(o, "state", w->live ? "live" : "gone");
	if (w->token[0])
		cJSON_AddStringToObject(o, "token", w->token);
	if (w->peer[0])
		cJSON_AddStringToObject(o, "address", w->peer);
	cJSON_AddBoolToObject(o, "emulated", w->emulator[0] != '\0');
	if (w->emulator[0])
		cJSON_AddStringToObject(o, "emulator", w->emulator);
	cJSON_AddNumberToObject(o, "registered", w->registered);
	cJSON_AddNumberToObject(o, "last_seen", w->last_seen);
	if (w->batch_id)
		cJSON_AddNumberToObject(o, "batch_id", (double)w->batch_id);
	else
		cJSON_AddNullToObject(o, "batch_id");
	if (w->job_id)             /* the job it is measuring for */
		cJSON_AddNumberToObject(o, "job_id", (double)w->job_id);
	else
		cJSON_AddNullToObject(o, "job_id");
	return o;
}

cJSON *view_batch(const struct worker_batch *b)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "batch_id", (double)b->id);
	cJSON_AddNumberToObject(o, "job_id", (double)b->job_id);
	cJSON_AddStringToObject(o, "workload_key", b->workload_key);
	cJSON *w = cJSON_Parse(b->canonical);
	cJSON_AddItemToObject(o, "workload", w ? w : cJSON_CreateNull());
	cJSON_AddStringToObject(o, "target", b->target);
	cJSON *tr = cJSON_AddArrayToObject(o, "traces");
	for (int i = 0; i < b->n; i++)
		cJSON_AddItemToArray(tr, cJSON_CreateString(b->traces[i]));
	return o;
}
