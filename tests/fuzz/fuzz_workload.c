/*
 * fuzz_workload.c — workload documents (tuner/workload.c, and graph_parse.c
 * for "op": "graph") as POST /v1/jobs hands them to libtir, under tird's
 * default limits.  What parsing promises, checked on every input:
 *   - a refusal names its fault (a message);
 *   - an accepted workload's canonical form parses again, to the same
 *     canonical form and key (the key of a document is its canonical
 *     form's: two documents meaning one workload share their records);
 *   - its key is 64 lowercase hex digits, its flops finite and >= 0;
 *   - its program builds ("nothing downstream has to re-check a request")
 *     and prints, and its check's tolerance is known.
 */
#include <math.h>
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tir_error err = { "" };
	tir_workload *w = tir_workload_parse((const char *)data, size, &limits, &err);
	if (!w) {
		FUZZ_ASSERT(err.msg[0], "a refused workload without a message");
		FUZZ_NOTE("refused: %s", err.msg);
		return 0;
	}
	const char *canon = tir_workload_canonical(w), *key = tir_workload_key(w);
	FUZZ_ASSERT(strlen(key) == 64 && strspn(key, "0123456789abcdef") == 64, "key %s", key);
	FUZZ_ASSERT(tir_workload_op(w), "no op");
	double flops = tir_workload_flops(w);
	FUZZ_ASSERT(isfinite(flops) && flops >= 0, "flops %g", flops);

	tir_workload *w2 = tir_workload_parse(canon, strlen(canon), &limits, &err);
	FUZZ_ASSERT(w2, "the canonical form %s does not parse: %s", canon, err.msg);
	FUZZ_ASSERT(!strcmp(tir_workload_canonical(w2), canon), "canonical %s reparses as %s",
		    canon, tir_workload_canonical(w2));
	FUZZ_ASSERT(!strcmp(tir_workload_key(w2), key), "the key changed");
	tir_workload_free(w2);

	double tol = tir_workload_tolerance(w, &err);
	FUZZ_ASSERT(tol >= 0 || err.msg[0], "tolerance %g without a message", tol);
	tir_program *p = tir_program_build(w, &err);
	FUZZ_ASSERT(p, "the program of accepted workload %s does not build: %s", canon, err.msg);
	char *text = tir_program_print(p);
	FUZZ_ASSERT(text && text[0], "the program does not print");
	free(text);
	tir_program_free(p);
	tir_workload_free(w);
	return 0;
}
