/*
 * fuzz_trace.c — schedule traces, as an import or POST /v1/lower hands them
 * to libtir: parsed, replayed on a workload's program and validated for a
 * target (daemon/trust.c's trust_canonical_trace, the check every imported
 * record passes), then code generated for what validated.
 *
 * The input's first byte picks the workload and target: workload (byte / 3)
 * mod N of the suite (bench/suite.json) followed by the graphs of
 * examples/graphs/, target byte mod 3 of cpu:x86_64+avx2+fma, cuda:sm_80
 * and cuda:sm_90 (full keys: nothing depends on this machine).  The rest is
 * the trace.  Checked on every input:
 *   - a refusal names its fault;
 *   - an accepted trace's canonical form replays and validates again and
 *     prints the same (imports store the canonical form as the record's
 *     identity: a clone with a space added must be the same record);
 *   - code is generated for it, or the refusal says why.
 */
#include <dirent.h>
#include "tird.h"
#include "fuzz.h"

#ifndef TOP_SRCDIR
#define TOP_SRCDIR "."
#endif

enum { MAX_WORKLOADS = 64 };
static tir_workload *wl[MAX_WORKLOADS];
static int nwl;
static tir_target targets[3];

static void add_workload(const char *json, const char *from)
{
	tir_error err;
	tir_workload *w = tir_workload_parse(json, strlen(json), NULL, &err);
	if (!w || nwl == MAX_WORKLOADS) {
		fprintf(stderr, "fuzz_trace: %s: %s\n", from, w ? "too many" : err.msg);
		exit(1);
	}
	wl[nwl++] = w;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	const char *top = getenv("TOP_SRCDIR") ? getenv("TOP_SRCDIR") : TOP_SRCDIR;
	char path[4096];
	snprintf(path, sizeof path, "%s/bench/suite.json", top);
	char *text = tir_read_file(path, 0, NULL);
	cJSON *suite = text ? cJSON_Parse(text) : NULL;
	if (!cJSON_IsArray(suite)) {
		fprintf(stderr, "fuzz_trace: cannot read the suite %s (TOP_SRCDIR)\n", path);
		exit(1);
	}
	const cJSON *e;
	cJSON_ArrayForEach(e, suite) {
		char *w = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(e, "workload"));
		add_workload(w, path);
		free(w);
	}
	cJSON_Delete(suite);
	free(text);
	struct dirent **names;
	snprintf(path, sizeof path, "%s/examples/graphs", top);
	int n = scandir(path, &names, NULL, by_name);
	for (int i = 0; i < n; i++) {
		char file[4096 + 256];
		snprintf(file, sizeof file, "%s/%s", path, names[i]->d_name);
		size_t len = strlen(names[i]->d_name);
		if (len > 5 && !strcmp(names[i]->d_name + len - 5, ".json")) {
			char *g = tir_read_file(file, 0, NULL);
			if (!g) {
				fprintf(stderr, "fuzz_trace: cannot read %s\n", file);
				exit(1);
			}
			add_workload(g, file);
			free(g);
		}
		free(names[i]);
	}
	free(n > 0 ? names : NULL);
	static const char *const keys[] = { "cpu:x86_64+avx2+fma", "cuda:sm_80", "cuda:sm_90" };
	for (int i = 0; i < 3; i++) {
		tir_error err;
		if (tir_target_parse(keys[i], &targets[i], &err)) {
			fprintf(stderr, "fuzz_trace: %s: %s\n", keys[i], err.msg);
			exit(1);
		}
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const tir_workload *w = wl[(data[0] / 3) % nwl];
	const tir_target *t = &targets[data[0] % 3];
	char *trace = fuzz_text(data + 1, size - 1), *canon = NULL;
	tir_error err = { "" };
	if (trust_canonical_trace(w, t, trace, &canon, &err)) {
		FUZZ_ASSERT(err.msg[0], "a refused trace without a message");
		FUZZ_NOTE("refused: %s", err.msg);
		FUZZ_ASSERT(!canon, "a refused trace with a canonical form");
		free(trace);
		return 0;
	}
	tir_sched *s = tir_sched_new(w, 0, &err);
	FUZZ_ASSERT(s, "%s", err.msg);
	FUZZ_ASSERT(!tir_sched_replay(s, canon, &err), "the canonical form %s of %s does not "
		    "replay: %s", canon, trace, err.msg);
	FUZZ_ASSERT(!tir_verify(tir_sched_program(s), t, &err), "the canonical form %s of %s "
		    "does not validate for %s: %s", canon, trace, t->key, err.msg);
	char *again = tir_sched_trace(s);
	FUZZ_ASSERT(again && !strcmp(again, canon), "the canonical form %s prints as %s", canon,
		    again);
	tir_code *code = tir_codegen(tir_sched_program(s), t, &err);
	FUZZ_ASSERT(code || err.msg[0], "no code for %s without a message", canon);
	FUZZ_ASSERT(!code || (code->source && code->source[0]), "empty code for %s", canon);
	tir_code_free(code);
	free(again);
	tir_sched_free(s);
	free(canon);
	free(trace);
	return 0;
}
