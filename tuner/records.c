/*
 * records.c — files of measured records, the format of `tirctl export`
 * (tird-records/1), read once for everyone who reads them: the daemon's
 * import and the seed of its CPU cost model, and the bench tools.
 *
 *   {"format": "tird-records/1",
 *    "workloads": {KEY: workload document, ...},
 *    "records": [{"workload_key": KEY, "target": "cpu:...", "trace": "...",
 *                 "status": "ok", "latency_us": 12.5, ...}, ...]}
 *
 * The text must be exactly one JSON document (white space may follow it).
 * The whole document is checked before any of it is handed out, so a caller
 * that stores or learns from records never acts on half a file: every
 * workload parses (within the caller's limits) and its key is the SHA-256 of
 * its canonical form; every record names a workload of the file, a full
 * target key that parses, a trace and a measurement status; its numbers
 * (latency_us, max_rel_error, created) are finite and >= 0 where given, and
 * an ok record has a latency.  The first fault is reported
 * with where it is (workloads["KEY"], records[i]) and what is wrong.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include "ir/ir.h"

struct tir_records {
	cJSON *doc;                /* the strings of recs point into it */
	int nw, nrec;
	tir_workload **w;
	tir_record *recs;
};

char *tir_read_file(const char *path, size_t max, size_t *len)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	if (!f)
		return NULL;
	size_t cap = 1 << 16, n = 0, got;
	char *s = xmalloc(cap);
	while (!(max && n > max) && (got = fread(s + n, 1, cap - n - 1, f)) > 0)
		if ((n += got) + 1 == cap)
			s = xrealloc(s, cap *= 2);
	int bad = ferror(f) ? EIO : max && n > max ? EFBIG : 0;
	if (f != stdin)
		fclose(f);
	if (bad) {
		free(s);
		errno = bad;
		return NULL;
	}
	s[n] = '\0';
	if (len)
		*len = n;
	return s;
}

void tir_records_free(tir_records *r)
{
	if (!r)
		return;
	for (int i = 0; i < r->nw; i++)
		tir_workload_free(r->w[i]);
	free(r->w);
	free(r->recs);
	cJSON_Delete(r->doc);
	free(r);
}

static const char *str_of(const cJSON *o, const char *name)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, name);
	return cJSON_IsString(x) ? x->valuestring : NULL;
}

static double num_of(const cJSON *o, const char *name, double def)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, name);
	return cJSON_IsNumber(x) ? x->valuedouble : def;
}

/* The first of a record's numbers that is given but is not a finite
 * number >= 0 (1e999 parses as infinity), or NULL. */
static const char *number_fault(const cJSON *o)
{
	static const char *const names[] = { "latency_us", "max_rel_error", "created" };
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, names[i]);
		if (x && !cJSON_IsNull(x) && (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) ||
					      x->valuedouble < 0))
			return names[i];
	}
	return NULL;
}

/* Index of the workload whose key is key, or -1. */
static int workload_index(const tir_records *r, const char *key)
{
	for (int i = 0; i < r->nw; i++)
		if (!strcmp(tir_workload_key(r->w[i]), key))
			return i;
	return -1;
}

static tir_records *fail(tir_records *r, tir_records_fault *fault, tir_records_fault f)
{
	if (fault)
		*fault = f;
	tir_records_free(r);
	return NULL;
}

tir_records *tir_records_parse(const char *text, size_t len, const tir_limits *lim,
			       tir_records_fault *fault, tir_error *err)
{
	tir_records *r = xcalloc(1, sizeof *r);
	const char *end = NULL;
	if (!(r->doc = cJSON_ParseWithLengthOpts(text, len, &end, 0))) {
		tir_fail(err, "not JSON (at byte %zu)", end ? (size_t)(end - text) : (size_t)0);
		return fail(r, fault, TIR_RECORDS_BAD_JSON);
	}
	size_t at = (size_t)(end - text);
	while (at < len && text[at] && strchr(" \t\r\n", text[at]))
		at++;
	if (at < len) {            /* one document, nothing after it but white space */
		tir_fail(err, "not one JSON document: %zu bytes after it (at byte %zu)",
			 len - at, at);
		return fail(r, fault, TIR_RECORDS_BAD_JSON);
	}
	if (!cJSON_IsObject(r->doc)) {
		tir_fail(err, "not records of tirctl export: not a JSON object");
		return fail(r, fault, TIR_RECORDS_BAD_DOCUMENT);
	}
	const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(r->doc, "format");
	const cJSON *wls = cJSON_GetObjectItemCaseSensitive(r->doc, "workloads");
	const cJSON *recs = cJSON_GetObjectItemCaseSensitive(r->doc, "records");
	/* a document without "format" is taken for one (hand-made files) */
	if ((fmt && (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, TIR_RECORDS_FORMAT))) ||
	    !cJSON_IsObject(wls) || !cJSON_IsArray(recs)) {
		tir_fail(err, "not records of tirctl export: expected {\"format\": \""
			 TIR_RECORDS_FORMAT "\", \"workloads\": {...}, \"records\": [...]}");
		return fail(r, fault, TIR_RECORDS_BAD_DOCUMENT);
	}
	r->w = xcalloc((size_t)cJSON_GetArraySize(wls) + 1, sizeof *r->w);
	const cJSON *x;
	cJSON_ArrayForEach(x, wls) {
		char *canon = cJSON_PrintUnformatted(x);
		if (!canon)
			abort();   /* out of memory: fatal (tir.h) */
		tir_error werr = { "" };
		tir_workload *w = tir_workload_parse(canon, strlen(canon), lim, &werr);
		free(canon);
		if (!w || strcmp(tir_workload_key(w), x->string) || workload_index(r, x->string) >= 0) {
			tir_fail(err, "workloads[\"%.64s\"]: %s", x->string,
				 !w ? werr.msg : workload_index(r, x->string) >= 0 ? "given twice"
				 : "the key is not the SHA-256 of the workload's canonical form");
			tir_workload_free(w);
			return fail(r, fault, TIR_RECORDS_BAD_WORKLOAD);
		}
		r->w[r->nw++] = w;
	}
	r->recs = xcalloc((size_t)cJSON_GetArraySize(recs) + 1, sizeof *r->recs);
	cJSON_ArrayForEach(x, recs) {
		int i = r->nrec;
		tir_record *rec = &r->recs[i];
		const char *wk = str_of(x, "workload_key");
		rec->target = str_of(x, "target");
		rec->trace = str_of(x, "trace");
		rec->status = str_of(x, "status");
		if (!wk || !rec->target || !rec->trace || !rec->status) {
			tir_fail(err, "records[%d]: workload_key, target, trace and status are "
				 "required strings", i);
			return fail(r, fault, TIR_RECORDS_BAD_DOCUMENT);
		}
		if ((rec->workload = workload_index(r, wk)) < 0) {
			tir_fail(err, "records[%d]: workload %.64s is not in \"workloads\"", i, wk);
			return fail(r, fault, TIR_RECORDS_BAD_DOCUMENT);
		}
		tir_target t;
		tir_error terr = { "" };
		if (!strchr(rec->target, ':') || tir_target_parse(rec->target, &t, &terr)) {
			tir_fail(err, "records[%d]: target \"%.64s\" is not a full target key%s%s",
				 i, rec->target, terr.msg[0] ? ": " : "", terr.msg);
			return fail(r, fault, TIR_RECORDS_BAD_TARGET);
		}
		if (tir_measure_status_parse(rec->status) < 0) {
			tir_fail(err, "records[%d]: status \"%.32s\" is not a measurement status "
				 "(ok, build_error, run_error, ...)", i, rec->status);
			return fail(r, fault, TIR_RECORDS_BAD_DOCUMENT);
		}
		const char *bad_num = number_fault(x);
		if (bad_num) {
			tir_fail(err, "records[%d]: %s must be a finite number >= 0 when given", i,
				 bad_num);
			return fail(r, fault, TIR_RECORDS_BAD_DOCUMENT);
		}
		rec->latency_us = num_of(x, "latency_us", 0);
		if (!strcmp(rec->status, "ok") && !(rec->latency_us > 0)) {
			tir_fail(err, "records[%d]: an ok record needs latency_us > 0", i);
			return fail(r, fault, TIR_RECORDS_BAD_DOCUMENT);
		}
		rec->max_rel_error = num_of(x, "max_rel_error", -1);
		rec->message = str_of(x, "message");
		rec->worker = str_of(x, "worker");
		rec->created = num_of(x, "created", 0);
		r->nrec++;
	}
	return r;
}

tir_records *tir_records_read(const char *path, const tir_limits *lim,
			      tir_records_fault *fault, tir_error *err)
{
	size_t len = 0;
	char *text = tir_read_file(path, 0, &len);
	if (!text) {
		tir_fail(err, "%s: %s", path, strerror(errno));
		if (fault)
			*fault = TIR_RECORDS_BAD_JSON;
		return NULL;
	}
	tir_error perr = { "" };
	tir_records *r = tir_records_parse(text, len, lim, fault, &perr);
	free(text);
	if (!r)
		tir_fail(err, "%s: %s", path, perr.msg);
	return r;
}

int tir_records_workloads(const tir_records *r)
{
	return r->nw;
}

const tir_workload *tir_records_workload(const tir_records *r, int i)
{
	return r->w[i];
}

int tir_records_count(const tir_records *r)
{
	return r->nrec;
}

const tir_record *tir_records_at(const tir_records *r, int i)
{
	return &r->recs[i];
}
