/*
 * pack.c — `tirctl pack`: a kernel library from the stored bests.
 *
 *   GET /v1/best?target=T[&op=OP]      the bests (workload, key, record, latency)
 *   GET /v1/workloads/KEY?target=...   each one's trace
 *   offline, through libtir: the trace replayed, validated, code generated
 *   (and for CUDA compiled by NVRTC for the target's sm, as tird measured it)
 *
 * and writes, into a new folder DIR (all or nothing: built in DIR.part-PID
 * and renamed into place when every file is written):
 *
 *   kernels/NAME.c | NAME.cu     each kernel's source, exactly as tird generated it
 *   kernels/NAME_cubin.c         CUDA: the cubin NVRTC made of it, as a C array
 *   tird_pack.h                  the API (pack_rt.c's header text): one function per
 *                                workload, one dispatch function per op, lookup by key
 *   tird_pack.c                  the table of kernels and the runtime (launches,
 *                                tensor maps, scratch buffers)
 *   Makefile, tirdpack.pc        libtirdpack.a / .so, `make install PREFIX=...`
 *   manifest.json                per kernel: workload and its key, record id,
 *                                latency, target, arguments, launches, tird version
 *
 * Every kernel of a pack is for one full target key: a --target that matches
 * several (cuda:sm_90 and cuda:sm_80 bests under "cuda") is refused naming them.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cJSON.h>
#include "tir.h"
#include "tirctl.h"
#include "pack.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "unknown"
#endif

#define MAX_OPS 16

typedef struct pack_opts {
	const char *target, *out;
	const char *ops[MAX_OPS];
	int nops;
} pack_opts;

static void usage(void)
{
	printf("usage: tirctl pack --target T [--op OP ...] --out DIR\n"
	       "\n"
	       "Writes a kernel library of tird's stored bests for target T (a full key\n"
	       "or a kind: cpu, cuda) into the new folder DIR: one source per kernel,\n"
	       "tird_pack.h (one function per workload, one dispatch function per op,\n"
	       "tird_find by workload key), tird_pack.c, a Makefile (libtirdpack.a and\n"
	       "libtirdpack.so), tirdpack.pc and manifest.json.  --op keeps only the\n"
	       "bests of those operators (repeatable; graph for graph workloads).\n");
}

static int parse_args(int argc, char **argv, pack_opts *o)
{
	memset(o, 0, sizeof *o);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage();
			exit(0);
		}
		bool known = !strcmp(a, "--target") || !strcmp(a, "--op") || !strcmp(a, "--out");
		if (!known || i + 1 >= argc) {
			tirctl_err(known ? "pack: %s needs a value"
				   : "pack: unknown argument %s (try tirctl pack --help)", a);
			return -1;
		}
		const char *v = argv[++i];
		if (!strcmp(a, "--target")) {
			o->target = v;
		} else if (!strcmp(a, "--out")) {
			o->out = v;
		} else if (o->nops == MAX_OPS) {
			tirctl_err("pack: at most %d --op", MAX_OPS);
			return -1;
		} else {
			o->ops[o->nops++] = v;
		}
	}
	if (!o->target || !o->out) {
		tirctl_err("pack: needs --target T and --out DIR (try tirctl pack --help)");
		return -1;
	}
	return 0;
}

/* ---- the bests ------------------------------------------------------------------------ */

static const char *jstr(const cJSON *o, const char *k)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(x) ? x->valuestring : "";
}

/* Whether arr holds a best of b's workload on b's target. */
static bool has_best(const cJSON *arr, const cJSON *b)
{
	const cJSON *x;
	cJSON_ArrayForEach(x, arr)
		if (!strcmp(jstr(x, "workload_key"), jstr(b, "workload_key")) &&
		    !strcmp(jstr(x, "target"), jstr(b, "target")))
			return true;
	return false;
}

/* Appends the bests of op (NULL: every op) on o->target to arr, each
 * workload once (an --op given twice would pack a kernel twice: two
 * definitions of one function, a pack that does not build). */
static int fetch_bests(const tirctl_globals *g, const pack_opts *o, const char *op, cJSON *arr)
{
	char *t = tirctl_escape(o->target), *e = tirctl_escape(op ? op : "");
	char path[512];
	snprintf(path, sizeof path, "/v1/best?target=%s%s%s", t, op ? "&op=" : "", e);
	free(t);
	free(e);
	cJSON *j;
	int rc = tirctl_call(g, "GET", path, NULL, 0, &j);
	if (rc)
		return rc;
	cJSON *b = cJSON_GetObjectItem(j, "best"), *x;
	while (cJSON_IsArray(b) && (x = cJSON_DetachItemFromArray(b, 0))) {
		if (has_best(arr, x))
			cJSON_Delete(x);
		else
			cJSON_AddItemToArray(arr, x);
	}
	cJSON_Delete(j);
	return 0;
}

/* The trace of best b (its record, on its target), unformatted JSON. */
static int fetch_trace(const tirctl_globals *g, const cJSON *b, char **trace)
{
	char *k = tirctl_escape(jstr(b, "workload_key")), *t = tirctl_escape(jstr(b, "target"));
	char path[512];
	snprintf(path, sizeof path, "/v1/workloads/%s?target=%s", k, t);
	free(k);
	free(t);
	cJSON *j;
	int rc = tirctl_call(g, "GET", path, NULL, 0, &j);
	if (rc)
		return rc;
	const cJSON *x;
	*trace = NULL;
	cJSON_ArrayForEach(x, cJSON_GetObjectItem(j, "best"))
		if (!strcmp(jstr(x, "record_id"), jstr(b, "record_id")) &&
		    !strcmp(jstr(x, "target"), jstr(b, "target")))
			*trace = cJSON_PrintUnformatted(cJSON_GetObjectItem(x, "trace"));
	cJSON_Delete(j);
	if (!*trace) {
		tirctl_err("pack: the best of %s on %s changed while packing (record %s is no "
			   "longer its best); run pack again", jstr(b, "workload_key"),
			   jstr(b, "target"), jstr(b, "record_id"));
		return TIRCTL_FAILED;
	}
	return 0;
}

/* ---- lowering ---------------------------------------------------------------------------- */

/* b's trace replayed, validated and generated for t into k. */
static int lower_best(const cJSON *b, const char *trace, const tir_target *t, pack_kernel *k)
{
	tir_error err = { "" };
	char *wj = cJSON_PrintUnformatted(cJSON_GetObjectItem(b, "workload"));
	tir_workload *w = wj ? tir_workload_parse(wj, strlen(wj), NULL, &err) : NULL;
	tir_sched *s = w ? tir_sched_new(w, 0, &err) : NULL;
	int rc = -1;
	if (!s || tir_sched_replay(s, trace, &err) ||
	    tir_verify(tir_sched_program(s), t, &err) ||
	    !(k->code = tir_codegen(tir_sched_program(s), t, &err))) {
		tirctl_err("pack: workload %s on %s (record %s): %s", jstr(b, "workload_key"),
			   t->key, jstr(b, "record_id"), err.msg);
		goto out;
	}
	if (t->kind == TIR_TARGET_CUDA &&
	    tir_nvrtc_compile(k->code->source, t->sm, &k->cubin, &k->cubin_size, &err)) {
		tirctl_err("pack: compiling the kernel of %s for sm_%d: %s",
			   jstr(b, "workload_key"), t->sm, err.msg);
		goto out;
	}
	rc = 0;
out:
	free(wj);
	tir_sched_free(s);
	tir_workload_free(w);
	return rc;
}

/* ---- writing ---------------------------------------------------------------------------- */

static int rm_tree(const char *dir)
{
	char cmd[4200];
	if (strlen(dir) > 4000 || strchr(dir, '\''))
		return -1;
	snprintf(cmd, sizeof cmd, "rm -rf -- '%s'", dir);
	return system(cmd);
}

int tirctl_pack(tirctl_globals *g, int argc, char **argv)
{
	pack_opts o;
	if (parse_args(argc, argv, &o))
		return TIRCTL_USAGE;
	struct stat st;
	if (stat(o.out, &st) == 0) {
		tirctl_err("pack: %s exists; pack writes a new folder", o.out);
		return TIRCTL_BAD_INPUT;
	}
	cJSON *bests = cJSON_CreateArray();
	int rc = 0;
	if (o.nops == 0)
		rc = fetch_bests(g, &o, NULL, bests);
	for (int i = 0; i < o.nops && !rc; i++)
		rc = fetch_bests(g, &o, o.ops[i], bests);
	int n = cJSON_GetArraySize(bests);
	if (!rc && n == 0) {
		tirctl_err("pack: no stored best on %s%s", o.target, o.nops ? " for those ops" : "");
		rc = TIRCTL_FAILED;
	}
	/* one full target key */
	const char *key = n ? jstr(cJSON_GetArrayItem(bests, 0), "target") : "";
	const cJSON *b;
	cJSON_ArrayForEach(b, bests) {
		if (!rc && strcmp(jstr(b, "target"), key)) {
			tirctl_err("pack: %s matches bests of %s and of %s; name one full key",
				   o.target, key, jstr(b, "target"));
			rc = TIRCTL_BAD_INPUT;
		}
	}
	tir_target t;
	tir_error err = { "" };
	if (!rc && tir_target_parse(key, &t, &err)) {
		tirctl_err("pack: target %s: %s", key, err.msg);
		rc = TIRCTL_BAD_INPUT;
	}
	pack_kernel *ks = calloc((size_t)n + 1, sizeof *ks);
	if (!ks)
		abort();
	int i = 0;
	cJSON_ArrayForEach(b, bests) {
		if (rc)
			break;
		char *trace = NULL;
		pack_kernel *k = &ks[i++];
		if ((rc = fetch_trace(g, b, &trace)))
			break;
		k->best = b;
		if (lower_best(b, trace, &t, k))
			rc = TIRCTL_FAILED;
		free(trace);
	}
	char part[4096];
	snprintf(part, sizeof part, "%s.part-%ld", o.out, (long)getpid());
	if (!rc) {
		pack_write_opts wo = { .dir = part, .target = &t, .version = PACKAGE_VERSION };
		if (pack_write(&wo, ks, n, err.msg, sizeof err.msg)) {
			tirctl_err("pack: writing %s: %s", o.out, err.msg);
			rc = TIRCTL_FAILED;
		} else if (rename(part, o.out)) {
			tirctl_err("pack: cannot rename %s to %s: %s", part, o.out, strerror(errno));
			rc = TIRCTL_FAILED;
		}
		if (rc)
			rm_tree(part);
	}
	if (!rc && !g->json)
		printf("packed %d kernel%s for %s into %s\n", n, n == 1 ? "" : "s", key, o.out);
	if (!rc && g->json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "out", o.out);
		cJSON_AddStringToObject(j, "target", key);
		cJSON_AddNumberToObject(j, "kernels", n);
		tirctl_print_json(j);
		cJSON_Delete(j);
	}
	for (int j = 0; j < n; j++) {
		if (ks[j].code)
			tir_code_free(ks[j].code);
		free(ks[j].cubin);
	}
	free(ks);
	cJSON_Delete(bests);
	return rc;
}
