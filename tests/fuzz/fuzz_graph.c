/*
 * fuzz_graph.c — graph workloads ("op": "graph", tuner/graph_parse.c) and
 * what is made of an accepted one: its program (graph.c) and its fusion
 * plans (fusion/: Inductor, TVM, eager, and Inductor's alternatives), as
 * POST /v1/fuse and tune --fusion make them.  Checked on every graph
 * accepted, beyond fuzz_workload's canonical round trip:
 *   - the whole graph's program builds;
 *   - every mode plans it (a graph that parses has a plan), the plan's JSON
 *     is JSON, and each kernel's program builds and its document is a
 *     workload that parses (kernels are tuned as workloads of their own).
 * Documents that are not graphs are left to fuzz_workload.
 */
#include <cJSON.h>
#include "tir.h"
#include "fuzz.h"

static tir_limits limits;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	limits = tir_limits_default();
	limits.max_json_bytes = 65536;     /* tird's max_body */
	return 0;
}

static void check_plan(const tir_workload *w, tir_fusion_plan *p, const char *mode)
{
	tir_error err = { "" };
	char *json = tir_fusion_plan_json(p), *text = tir_fusion_plan_text(p);
	cJSON *doc = cJSON_Parse(json);
	FUZZ_ASSERT(doc, "%s plan: not JSON: %s", mode, json);
	cJSON_Delete(doc);
	FUZZ_ASSERT(text, "%s plan: no text", mode);
	free(json);
	free(text);
	int nk = tir_fusion_plan_kernels(p);
	FUZZ_ASSERT(nk >= 1, "%s plan of %s: %d kernels", mode, tir_workload_canonical(w), nk);
	for (int k = 0; k < nk; k++) {
		FUZZ_ASSERT(tir_fusion_kernel_members(p, k) >= 1, "%s kernel %d has no member", mode, k);
		tir_program *kp = tir_fusion_kernel_program(p, k, &err);
		FUZZ_ASSERT(kp, "%s kernel %d of %s: no program: %s", mode, k,
			    tir_workload_canonical(w), err.msg);
		tir_program_free(kp);
		char *kj = tir_fusion_kernel_json(p, k);
		FUZZ_ASSERT(kj, "%s kernel %d: no document", mode, k);
		tir_workload *kw = tir_workload_parse(kj, strlen(kj), NULL, &err);
		FUZZ_ASSERT(kw, "%s kernel %d of %s: its document %s does not parse: %s", mode, k,
			    tir_workload_canonical(w), kj, err.msg);
		tir_workload_free(kw);
		free(kj);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tir_error err = { "" };
	tir_workload *w = tir_workload_parse((const char *)data, size, &limits, &err);
	if (!w) {
		FUZZ_ASSERT(err.msg[0], "a refused workload without a message");
		FUZZ_NOTE("refused: %s", err.msg);
		return 0;
	}
	if (tir_graph_nodes(w) == 0) {
		tir_workload_free(w);
		return 0;
	}
	const char *canon = tir_workload_canonical(w);
	tir_workload *w2 = tir_workload_parse(canon, strlen(canon), &limits, &err);
	FUZZ_ASSERT(w2, "the canonical form %s does not parse: %s", canon, err.msg);
	FUZZ_ASSERT(!strcmp(tir_workload_canonical(w2), canon), "canonical %s reparses as %s",
		    canon, tir_workload_canonical(w2));
	tir_workload_free(w2);

	tir_program *p = tir_program_build(w, &err);
	FUZZ_ASSERT(p, "the program of accepted graph %s does not build: %s", canon, err.msg);
	tir_program_free(p);

	static const tir_fuse_mode modes[] = { TIR_FUSE_INDUCTOR, TIR_FUSE_TVM, TIR_FUSE_EAGER };
	for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
		const char *mode = tir_fuse_mode_name(modes[i]);
		tir_fusion_plan *plan = tir_fusion_plan_new(w, modes[i], &err);
		FUZZ_ASSERT(plan, "no %s plan of accepted graph %s: %s", mode, canon, err.msg);
		check_plan(w, plan, mode);
		tir_fusion_plan_free(plan);
	}
	tir_fusion_plan *alt[4];
	int na = tir_fusion_plan_alternatives(w, alt, 4, &err);
	FUZZ_ASSERT(na >= 0, "alternatives of accepted graph %s: %s", canon, err.msg);
	for (int i = 0; i < na; i++) {
		check_plan(w, alt[i], "alternative");
		tir_fusion_plan_free(alt[i]);
	}
	tir_workload_free(w);
	return 0;
}
