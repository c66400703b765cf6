/*
 * check_sketch_graph.c — sketches of graph workloads (tuner/sketch/rows.c
 * and the heavy sketches around it): every block of a program scheduled.
 *
 * For every graph of examples/graphs/ (at small shapes where they run) and
 * graphs built here — every node op, broadcasting, keepdim both ways, views,
 * odd shapes (primes, 1000 x 997, a row of 1, a row of 100,003), float32
 * and float16, heavy operators with pointwise and reduction consumers,
 * programs with no reduction at all — every sketch that applies gives
 * candidates that are:
 *   CPU   valid, replayed to the same trace and the same code, compiled and
 *         run, matching the reference (the unscheduled program interpreted);
 *   CUDA  valid for sm_90, replayed to the same code, compiled by NVRTC
 *         (all of a graph in one translation unit), free of one-thread
 *         kernels (every block of every kernel under a threadIdx loop, every
 *         launch more than one thread), and, where the graph is small,
 *         meaning what the program means: the same program run on the CPU
 *         through the C backend (thread loops are serial loops there,
 *         cross-thread reductions included) matches the reference.
 * Softmax, layernorm and the seed's 10-op example also have the structure
 * the rules promise: one parallel row loop holding every block (CPU), one
 * kernel of a thread block per row with cross-thread reductions (CUDA).
 * Also set_scope's and rfactor_interleaved's contracts.
 *
 * TIR_SKETCH_GRAPH_FULL=1 runs every CPU candidate and every CUDA one on the
 * CPU (slower).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tir.h"
#include "ir/ir.h"
#include "sched/sched.h"
#include "sketch/sketch.h"
#include "codegen/codegen.h"
#include "measure/measure.h"
#include "testutil.h"

#define NCAND 3                  /* candidates per sketch and target */
#define MAX_DRAWS 12             /* draws per candidate before giving up */
#define RUN_MAX_ELEMS 300000     /* graphs run on the CPU below this many outputs */

static tir_target cpu, sm90;

static void setup(void)
{
	tir_error err;
	ck_assert_msg(tir_target_parse("cpu", &cpu, &err) == 0, "%s", err.msg);
	ck_assert_msg(tir_target_parse("cuda:sm_90", &sm90, &err) == 0, "%s", err.msg);
}

/* ---- the graphs ------------------------------------------------------------------ */

#define SOFTMAX(shape, dt) \
	"{\"op\":\"graph\",\"inputs\":{\"x\":{\"shape\":" shape ",\"dtype\":\"" dt "\"}},\"nodes\":[" \
	"{\"name\":\"mx\",\"op\":\"amax\",\"args\":[\"x\"],\"dim\":-1,\"keepdim\":true}," \
	"{\"name\":\"sh\",\"op\":\"sub\",\"args\":[\"x\",\"mx\"]}," \
	"{\"name\":\"ex\",\"op\":\"exp\",\"args\":[\"sh\"]}," \
	"{\"name\":\"sm\",\"op\":\"sum\",\"args\":[\"ex\"],\"dim\":-1,\"keepdim\":true}," \
	"{\"name\":\"y\",\"op\":\"div\",\"args\":[\"ex\",\"sm\"]}],\"outputs\":[\"y\"]}"

#define LAYERNORM(r, c, dt) \
	"{\"op\":\"graph\",\"inputs\":{\"x\":{\"shape\":[" r "," c "],\"dtype\":\"" dt "\"}," \
	"\"weight\":{\"shape\":[" c "]},\"bias\":{\"shape\":[" c "]}},\"nodes\":[" \
	"{\"name\":\"mu\",\"op\":\"mean\",\"args\":[\"x\"],\"dim\":-1,\"keepdim\":true}," \
	"{\"name\":\"c\",\"op\":\"sub\",\"args\":[\"x\",\"mu\"]}," \
	"{\"name\":\"c2\",\"op\":\"mul\",\"args\":[\"c\",\"c\"]}," \
	"{\"name\":\"var\",\"op\":\"mean\",\"args\":[\"c2\"],\"dim\":-1,\"keepdim\":true}," \
	"{\"name\":\"ve\",\"op\":\"add\",\"args\":[\"var\",1e-5]}," \
	"{\"name\":\"rs\",\"op\":\"rsqrt\",\"args\":[\"ve\"]}," \
	"{\"name\":\"n\",\"op\":\"mul\",\"args\":[\"c\",\"rs\"]}," \
	"{\"name\":\"sc\",\"op\":\"mul\",\"args\":[\"n\",\"weight\"]}," \
	"{\"name\":\"sh\",\"op\":\"add\",\"args\":[\"sc\",\"bias\"]}," \
	"{\"name\":\"y\",\"op\":\"gelu\",\"args\":[\"sh\"]}],\"outputs\":[\"y\"]}"

#define SEED10(r, c) \
	"{\"op\":\"graph\",\"inputs\":{\"x\":{\"shape\":[" r "," c "]},\"bias\":{\"shape\":[" c "]}," \
	"\"gamma\":{\"shape\":[" c "]},\"beta\":{\"shape\":[" c "]}},\"nodes\":[" \
	"{\"name\":\"t0\",\"op\":\"mul\",\"args\":[\"x\",1.1]}," \
	"{\"name\":\"t\",\"op\":\"add\",\"args\":[\"t0\",\"bias\"]}," \
	"{\"name\":\"a\",\"op\":\"relu\",\"args\":[\"t\"]}," \
	"{\"name\":\"p\",\"op\":\"mul\",\"args\":[\"a\",\"a\"]}," \
	"{\"name\":\"q\",\"op\":\"mul\",\"args\":[\"a\",0.1]}," \
	"{\"name\":\"s\",\"op\":\"add\",\"args\":[\"p\",\"q\"]}," \
	"{\"name\":\"m\",\"op\":\"mean\",\"args\":[\"s\"],\"dim\":[1],\"keepdim\":true}," \
	"{\"name\":\"d\",\"op\":\"sub\",\"args\":[\"s\",\"m\"]}," \
	"{\"name\":\"e\",\"op\":\"mul\",\"args\":[\"d\",\"gamma\"]}," \
	"{\"name\":\"y\",\"op\":\"add\",\"args\":[\"e\",\"beta\"]}],\"outputs\":[\"y\"]}"

/* exp / sum / div over the last dim (check_graph's odd shapes) */
#define EXPSUM(shape, dt) \
	"{\"op\":\"graph\",\"inputs\":{\"x\":{\"shape\":" shape ",\"dtype\":\"" dt "\"}},\"nodes\":[" \
	"{\"name\":\"e\",\"op\":\"exp\",\"args\":[\"x\"]}," \
	"{\"name\":\"z\",\"op\":\"sum\",\"args\":[\"e\"],\"dim\":-1,\"keepdim\":true}," \
	"{\"name\":\"y\",\"op\":\"div\",\"args\":[\"e\",\"z\"]}],\"outputs\":[\"y\"]}"

static const char every_op[] =
	"{\"op\":\"graph\",\"inputs\":{\"x\":{\"shape\":[4,6]},\"b\":{\"shape\":[6]},"
	"\"h\":{\"shape\":[4,1],\"dtype\":\"float16\"}},"
	"\"nodes\":["
	"{\"name\":\"add\",\"op\":\"add\",\"args\":[\"x\",\"b\"]},"
	"{\"name\":\"sub\",\"op\":\"sub\",\"args\":[2.5,\"add\"]},"
	"{\"name\":\"mul\",\"op\":\"mul\",\"args\":[\"sub\",\"h\"]},"
	"{\"name\":\"div\",\"op\":\"div\",\"args\":[\"mul\",3]},"
	"{\"name\":\"neg\",\"op\":\"neg\",\"args\":[\"div\"]},"
	"{\"name\":\"relu\",\"op\":\"relu\",\"args\":[\"neg\"]},"
	"{\"name\":\"gelu\",\"op\":\"gelu\",\"args\":[\"relu\"]},"
	"{\"name\":\"exp\",\"op\":\"exp\",\"args\":[\"gelu\"]},"
	"{\"name\":\"tanh\",\"op\":\"tanh\",\"args\":[\"exp\"]},"
	"{\"name\":\"sig\",\"op\":\"sigmoid\",\"args\":[\"tanh\"]},"
	"{\"name\":\"sqrt\",\"op\":\"sqrt\",\"args\":[\"sig\"]},"
	"{\"name\":\"rsqrt\",\"op\":\"rsqrt\",\"args\":[\"sqrt\"]},"
	"{\"name\":\"half\",\"op\":\"cast\",\"args\":[\"rsqrt\"],\"dtype\":\"float16\"},"
	"{\"name\":\"sum\",\"op\":\"sum\",\"args\":[\"half\"],\"dim\":-1},"
	"{\"name\":\"mean\",\"op\":\"mean\",\"args\":[\"half\"],\"dim\":[0],\"keepdim\":true},"
	"{\"name\":\"amax\",\"op\":\"amax\",\"args\":[\"x\"]},"
	"{\"name\":\"amin\",\"op\":\"amin\",\"args\":[\"x\"],\"dim\":[1,0],\"keepdim\":true},"
	"{\"name\":\"rs\",\"op\":\"reshape\",\"args\":[\"x\"],\"shape\":[2,-1,3]},"
	"{\"name\":\"pm\",\"op\":\"permute\",\"args\":[\"rs\"],\"dims\":[-1,0,1]},"
	"{\"name\":\"ex\",\"op\":\"expand\",\"args\":[\"h\"],\"shape\":[5,-1,6]},"
	"{\"name\":\"sl\",\"op\":\"slice\",\"args\":[\"x\"],\"dim\":-1,\"start\":-5,\"end\":100,\"step\":2}],"
	"\"outputs\":[\"sum\",\"mean\",\"amax\",\"amin\",\"pm\",\"ex\",\"sl\"]}";

static const struct graph {
	const char *name, *json;
} graphs[] = {
	{ "softmax-7x13", SOFTMAX("[7,13]", "float32") },
	{ "softmax-64x256", SOFTMAX("[64,256]", "float32") },
	{ "softmax-f16-33x100", SOFTMAX("[33,100]", "float16") },
	{ "softmax-3d-keepdim", SOFTMAX("[2,3,40]", "float32") },
	{ "layernorm-5x37", LAYERNORM("5", "37", "float32") },
	{ "layernorm-32x64", LAYERNORM("32", "64", "float32") },
	{ "layernorm-f16-9x48", LAYERNORM("9", "48", "float16") },
	{ "seed10-8x16", SEED10("8", "16") },
	{ "seed10-24x41", SEED10("24", "41") },
	{ "every-op", every_op },
	{ "broadcasting",
	  "{\"op\":\"graph\",\"inputs\":{\"a\":{\"shape\":[3,1,5]},\"b\":{\"shape\":[4,1]},"
	  "\"s\":{\"shape\":[]},\"r\":{\"shape\":[1,5]}},\"nodes\":["
	  "{\"name\":\"ab\",\"op\":\"add\",\"args\":[\"a\",\"b\"]},"
	  "{\"name\":\"abs\",\"op\":\"mul\",\"args\":[\"ab\",\"s\"]},"
	  "{\"name\":\"rb\",\"op\":\"sub\",\"args\":[\"r\",\"b\"]},"
	  "{\"name\":\"k\",\"op\":\"div\",\"args\":[1,\"s\"]}],"
	  "\"outputs\":[\"abs\",\"rb\",\"k\"]}" },
	{ "keepdim",
	  "{\"op\":\"graph\",\"inputs\":{\"x\":{\"shape\":[2,3,5,7]}},\"nodes\":["
	  "{\"name\":\"m\",\"op\":\"mean\",\"args\":[\"x\"],\"dim\":[-1,1],\"keepdim\":true},"
	  "{\"name\":\"s\",\"op\":\"sum\",\"args\":[\"x\"],\"dim\":2},"
	  "{\"name\":\"mn\",\"op\":\"amin\",\"args\":[\"x\"],\"dim\":-1,\"keepdim\":false},"
	  "{\"name\":\"c\",\"op\":\"sub\",\"args\":[\"x\",\"m\"]}],"
	  "\"outputs\":[\"m\",\"s\",\"mn\",\"c\"]}" },
	{ "views",
	  "{\"op\":\"graph\",\"inputs\":{\"x\":{\"shape\":[6,10]},\"c\":{\"shape\":[1,7]}},"
	  "\"nodes\":["
	  "{\"name\":\"r1\",\"op\":\"reshape\",\"args\":[\"x\"],\"shape\":[-1]},"
	  "{\"name\":\"r2\",\"op\":\"reshape\",\"args\":[\"r1\"],\"shape\":[1,4,1,15]},"
	  "{\"name\":\"p\",\"op\":\"permute\",\"args\":[\"r2\"],\"dims\":[3,1,2,0]},"
	  "{\"name\":\"e\",\"op\":\"expand\",\"args\":[\"c\"],\"shape\":[2,3,-1,7]},"
	  "{\"name\":\"s1\",\"op\":\"slice\",\"args\":[\"x\"],\"dim\":0,\"start\":-4},"
	  "{\"name\":\"s2\",\"op\":\"slice\",\"args\":[\"x\"],\"dim\":1,\"start\":null,\"end\":-3,\"step\":4},"
	  "{\"name\":\"s3\",\"op\":\"slice\",\"args\":[\"x\"],\"start\":-100,\"end\":2}],"
	  "\"outputs\":[\"p\",\"e\",\"s1\",\"s2\",\"s3\"]}" },
	{ "views-and-broadcasts",
	  "{\"op\":\"graph\",\"inputs\":{\"x\":{\"shape\":[5,7,3]},\"u\":{\"shape\":[5,1]},"
	  "\"c\":{\"shape\":[1,7]},\"z\":{\"shape\":[6,10]},\"h\":{\"shape\":[9,12],\"dtype\":\"float16\"}},"
	  "\"nodes\":["
	  "{\"name\":\"p\",\"op\":\"permute\",\"args\":[\"x\"],\"dims\":[2,0,1]},"
	  "{\"name\":\"pu\",\"op\":\"add\",\"args\":[\"p\",\"u\"]},"
	  "{\"name\":\"e\",\"op\":\"expand\",\"args\":[\"c\"],\"shape\":[3,5,7]},"
	  "{\"name\":\"pe\",\"op\":\"mul\",\"args\":[\"pu\",\"e\"]},"
	  "{\"name\":\"r2\",\"op\":\"reshape\",\"args\":[\"z\"],\"shape\":[6,2,5]},"
	  "{\"name\":\"r2s\",\"op\":\"sum\",\"args\":[\"r2\"],\"dim\":2},"
	  "{\"name\":\"tot\",\"op\":\"sum\",\"args\":[\"z\"]},"
	  "{\"name\":\"zc\",\"op\":\"sub\",\"args\":[\"z\",\"tot\"]},"
	  "{\"name\":\"hm\",\"op\":\"mean\",\"args\":[\"h\"],\"dim\":0},"
	  "{\"name\":\"h32\",\"op\":\"cast\",\"args\":[\"hm\"],\"dtype\":\"float32\"}],"
	  "\"outputs\":[\"pe\",\"r2s\",\"tot\",\"zc\",\"h32\",\"hm\"]}" },
	{ "column-mean",
	  "{\"op\":\"graph\",\"inputs\":{\"x\":{\"shape\":[13,29]}},\"nodes\":["
	  "{\"name\":\"m\",\"op\":\"mean\",\"args\":[\"x\"],\"dim\":0,\"keepdim\":true},"
	  "{\"name\":\"y\",\"op\":\"sub\",\"args\":[\"x\",\"m\"]}],\"outputs\":[\"y\"]}" },
	{ "expsum-prime", EXPSUM("[7,13]", "float32") },
	{ "expsum-1000x997", EXPSUM("[1000,997]", "float32") },
	{ "expsum-row-of-1", EXPSUM("[1,31]", "float32") },
	{ "expsum-100003", EXPSUM("[100003]", "float32") },
	{ "expsum-cols-of-1", EXPSUM("[3,1]", "float16") },
	{ "expsum-f16-1000x997", EXPSUM("[1000,997]", "float16") },
	{ "pointwise",
	  "{\"op\":\"graph\",\"inputs\":{\"x\":{\"shape\":[37,29]},\"b\":{\"shape\":[29]}},"
	  "\"nodes\":["
	  "{\"name\":\"t\",\"op\":\"add\",\"args\":[\"x\",\"b\"]},"
	  "{\"name\":\"g\",\"op\":\"gelu\",\"args\":[\"t\"]},"
	  "{\"name\":\"y\",\"op\":\"mul\",\"args\":[\"g\",\"t\"]}],\"outputs\":[\"y\",\"g\"]}" },
	{ "pointwise-f16-prime",
	  "{\"op\":\"graph\",\"inputs\":{\"x\":{\"shape\":[1009],\"dtype\":\"float16\"}},"
	  "\"nodes\":[{\"name\":\"y\",\"op\":\"sigmoid\",\"args\":[\"x\"]}],\"outputs\":[\"y\"]}" },
	{ "float16-sum-dim0",
	  "{\"op\":\"graph\",\"inputs\":{\"x\":{\"shape\":[13,29],\"dtype\":\"float16\"},"
	  "\"b\":{\"shape\":[29],\"dtype\":\"float16\"}},\"nodes\":["
	  "{\"name\":\"t\",\"op\":\"add\",\"args\":[\"x\",\"b\"]},"
	  "{\"name\":\"s\",\"op\":\"sigmoid\",\"args\":[\"t\"]},"
	  "{\"name\":\"y\",\"op\":\"mul\",\"args\":[\"s\",\"t\"]},"
	  "{\"name\":\"z\",\"op\":\"sum\",\"args\":[\"y\"],\"dim\":0}],"
	  "\"outputs\":[\"y\",\"z\"]}" },
	{ "matmul-bias-relu-rowsum",
	  "{\"op\":\"graph\",\"inputs\":{\"x\":{\"shape\":[17,23]},\"w\":{\"shape\":[23,29]},"
	  "\"b\":{\"shape\":[29]}},\"nodes\":["
	  "{\"name\":\"mm\",\"op\":\"matmul\",\"args\":[\"x\",\"w\"],\"M\":17,\"N\":29,\"K\":23},"
	  "{\"name\":\"t\",\"op\":\"add\",\"args\":[\"mm\",\"b\"]},"
	  "{\"name\":\"r\",\"op\":\"relu\",\"args\":[\"t\"]},"
	  "{\"name\":\"s\",\"op\":\"sum\",\"args\":[\"r\"],\"dim\":1}],"
	  "\"outputs\":[\"s\",\"r\"]}" },
	{ "matmul-f16-rowsum",
	  "{\"op\":\"graph\",\"inputs\":{\"x\":{\"shape\":[64,32],\"dtype\":\"float16\"},"
	  "\"w\":{\"shape\":[32,48],\"dtype\":\"float16\"}},\"nodes\":["
	  "{\"name\":\"mm\",\"op\":\"matmul\",\"args\":[\"x\",\"w\"],\"M\":64,\"N\":48,\"K\":32},"
	  "{\"name\":\"r\",\"op\":\"relu\",\"args\":[\"mm\"]},"
	  "{\"name\":\"s\",\"op\":\"sum\",\"args\":[\"r\"],\"dim\":1}],"
	  "\"outputs\":[\"s\"]}" },
	{ "matmul-f16-bias-gelu",
	  "{\"op\":\"graph\",\"inputs\":{\"x\":{\"shape\":[128,64],\"dtype\":\"float16\"},"
	  "\"w\":{\"shape\":[64,128],\"dtype\":\"float16\"},"
	  "\"b\":{\"shape\":[128],\"dtype\":\"float16\"}},\"nodes\":["
	  "{\"name\":\"mm\",\"op\":\"matmul\",\"args\":[\"x\",\"w\"],\"M\":128,\"N\":128,\"K\":64,"
	  "\"out_dtype\":\"float32\"},"
	  "{\"name\":\"t\",\"op\":\"add\",\"args\":[\"mm\",\"b\"]},"
	  "{\"name\":\"g\",\"op\":\"gelu\",\"args\":[\"t\"]},"
	  "{\"name\":\"y\",\"op\":\"cast\",\"args\":[\"g\"],\"dtype\":\"float16\"}],"
	  "\"outputs\":[\"y\"]}" },
	{ "matmul-residual",
	  "{\"op\":\"graph\",\"inputs\":{\"x\":{\"shape\":[16,24]},\"w\":{\"shape\":[24,20]},"
	  "\"z\":{\"shape\":[16,20]}},\"nodes\":["
	  "{\"name\":\"mm\",\"op\":\"matmul\",\"args\":[\"x\",\"w\"],\"M\":16,\"N\":20,\"K\":24},"
	  "{\"name\":\"ez\",\"op\":\"exp\",\"args\":[\"z\"]},"
	  "{\"name\":\"y\",\"op\":\"add\",\"args\":[\"mm\",\"ez\"]}],"
	  "\"outputs\":[\"y\",\"ez\"]}" },
	{ "attention",
	  "{\"op\":\"graph\",\"inputs\":{\"q\":{\"shape\":[32,16]},\"k\":{\"shape\":[16,40]},"
	  "\"v\":{\"shape\":[40,8]}},\"nodes\":["
	  "{\"name\":\"s\",\"op\":\"matmul\",\"args\":[\"q\",\"k\"],\"M\":32,\"N\":40,\"K\":16},"
	  "{\"name\":\"mx\",\"op\":\"amax\",\"args\":[\"s\"],\"dim\":-1,\"keepdim\":true},"
	  "{\"name\":\"sh\",\"op\":\"sub\",\"args\":[\"s\",\"mx\"]},"
	  "{\"name\":\"e\",\"op\":\"exp\",\"args\":[\"sh\"]},"
	  "{\"name\":\"z\",\"op\":\"sum\",\"args\":[\"e\"],\"dim\":-1,\"keepdim\":true},"
	  "{\"name\":\"pr\",\"op\":\"div\",\"args\":[\"e\",\"z\"]},"
	  "{\"name\":\"o\",\"op\":\"matmul\",\"args\":[\"pr\",\"v\"],\"M\":32,\"N\":8,\"K\":40}],"
	  "\"outputs\":[\"o\"]}" },
	{ "conv2d-mean",
	  "{\"op\":\"graph\",\"inputs\":{\"x\":{\"shape\":[2,3,7,6]},\"f\":{\"shape\":[4,3,3,3]},"
	  "\"fb\":{\"shape\":[4]}},\"nodes\":["
	  "{\"name\":\"xr\",\"op\":\"relu\",\"args\":[\"x\"]},"
	  "{\"name\":\"cv\",\"op\":\"conv2d\",\"args\":[\"xr\",\"f\",\"fb\"],\"N\":2,\"C\":3,\"H\":7,"
	  "\"W\":6,\"K\":4,\"R\":3,\"S\":3,\"pad\":1,\"epilogue\":[\"bias\"]},"
	  "{\"name\":\"m\",\"op\":\"mean\",\"args\":[\"cv\"],\"dim\":[2,3]}],"
	  "\"outputs\":[\"m\"]}" },
	{ "prologue-bmm",
	  "{\"op\":\"graph\",\"inputs\":{\"q\":{\"shape\":[5,3,4]},\"k\":{\"shape\":[3,4,6]}},"
	  "\"nodes\":["
	  "{\"name\":\"qt\",\"op\":\"permute\",\"args\":[\"q\"],\"dims\":[1,0,2]},"
	  "{\"name\":\"qs\",\"op\":\"mul\",\"args\":[\"qt\",0.5]},"
	  "{\"name\":\"bm\",\"op\":\"matmul\",\"args\":[\"qs\",\"k\"],\"batch\":3,\"M\":5,\"N\":6,\"K\":4}],"
	  "\"outputs\":[\"bm\"]}" },
	{ "two-matmuls",
	  "{\"op\":\"graph\",\"inputs\":{\"x\":{\"shape\":[12,10]},\"w1\":{\"shape\":[10,14]},"
	  "\"w2\":{\"shape\":[14,9]}},\"nodes\":["
	  "{\"name\":\"h\",\"op\":\"matmul\",\"args\":[\"x\",\"w1\"],\"M\":12,\"N\":14,\"K\":10},"
	  "{\"name\":\"hr\",\"op\":\"relu\",\"args\":[\"h\"]},"
	  "{\"name\":\"o\",\"op\":\"matmul\",\"args\":[\"hr\",\"w2\"],\"M\":12,\"N\":9,\"K\":14},"
	  "{\"name\":\"om\",\"op\":\"amax\",\"args\":[\"o\"],\"dim\":-1}],"
	  "\"outputs\":[\"o\",\"om\"]}" },
};
#define NGRAPHS (int)(sizeof graphs / sizeof *graphs)

/* The examples of examples/graphs/, at their own (large) shapes: CUDA only,
 * compiled, not run. */
static const char *const examples[] = { "softmax.json", "layernorm.json", "seed10.json" };

/* ---- checks ---------------------------------------------------------------------- */

static tir_workload *parse(const char *name, const char *json)
{
	tir_error err = { "" };
	tir_workload *w = tir_workload_parse(json, strlen(json), NULL, &err);
	ck_assert_msg(w, "%s: %s", name, err.msg);
	return w;
}

static int64_t output_elems(const tir_program *p)
{
	int64_t n = 0;
	for (int i = 0; i < p->nparams; i++)
		if (p->bufs[i]->role == BUF_OUTPUT) {
			int64_t e = 1;
			for (int d = 0; d < p->bufs[i]->ndim; d++)
				e *= p->bufs[i]->shape[d];
			n += e;
		}
	return n;
}

/* The trace of s replays on a fresh schedule to the same trace and the same
 * code on t. */
static void check_replays(const char *what, const tir_workload *w, const tir_sched *s,
			  const tir_target *t)
{
	tir_error err = { "" };
	char *tr = tir_sched_trace(s);
	tir_sched *r = tir_sched_new(w, 99, &err);
	ck_assert_msg(r, "%s: %s", what, err.msg);
	ck_assert_msg(tir_sched_replay(r, tr, &err) == 0, "%s: replay: %s", what, err.msg);
	char *tr2 = tir_sched_trace(r);
	ck_assert_msg(!strcmp(tr, tr2), "%s: the replayed trace differs", what);
	tir_code *a = tir_codegen(tir_sched_program(s), t, &err);
	ck_assert_msg(a, "%s: codegen: %s", what, err.msg);
	tir_code *b = tir_codegen(tir_sched_program(r), t, &err);
	ck_assert_msg(b, "%s: codegen of the replay: %s", what, err.msg);
	ck_assert_msg(!strcmp(a->source, b->source), "%s: the replayed code differs", what);
	tir_code_free(a);
	tir_code_free(b);
	free(tr);
	free(tr2);
	tir_sched_free(r);
}

/* Runs p's C code on the CPU against the reference of w (computed once). */
static void run_c(const char *what, const tir_workload *w, const tir_program *p, double **ref)
{
	tir_error err = { "" };
	ck_assert_msg(tir_verify(p, &cpu, &err) == 0, "%s: invalid on cpu: %s", what, err.msg);
	tir_code *c = tir_codegen(p, &cpu, &err);
	ck_assert_msg(c, "%s: C codegen: %s", what, err.msg);
	if (!*ref) {
		int64_t n;
		ck_assert_msg(tir_measure_reference(w, c, 1, ref, &n, &err) == 0, "%s: reference: %s",
			      what, err.msg);
	}
	tir_measure_opts o = { .seed = 1, .no_timing = true, .timeout_s = 120, .reference = *ref };
	tir_measure_result res;
	memset(&res, 0, sizeof res);
	tir_measure(&tir_runner_cpu, w, c, &cpu, &o, &res);
	ck_assert_msg(res.status == TIR_MEASURE_OK, "%s: %s: %s (max rel error %g)", what,
		      tir_measure_status_name(res.status), res.msg, res.max_rel_error);
	tir_measure_result_clear(&res);
	tir_code_free(c);
}

static bool is_thread_loop(const tir_stmt *q)
{
	return q->kind == STMT_FOR && q->loop_kind == LOOP_THREAD &&
	       (q->tag == TIR_THREAD_X || q->tag == TIR_THREAD_Y || q->tag == TIR_THREAD_Z);
}

/* No one-thread kernels: every block of every kernel (a top-level statement
 * holding blocks) under a loop bound to a threadIdx axis, and every launch
 * more than one thread. */
static void check_threads(const char *what, const tir_program *p, const tir_code *c)
{
	int k = 0;
	for (int i = 0; i < p->root->nkids; i++) {
		tir_block *bl[SKETCH_MAX_BLOCKS];
		int n = stmt_blocks(p->root->kids[i], bl, SKETCH_MAX_BLOCKS);
		if (n == 0)
			continue;
		for (int j = 0; j < n && j < SKETCH_MAX_BLOCKS; j++) {
			bool thr = false;
			for (const tir_stmt *q = bl[j]->stmt->parent; q && !thr; q = q->parent)
				thr = is_thread_loop(q);
			ck_assert_msg(thr, "%s: block \"%s\" of kernel %d is under no threadIdx loop",
				      what, bl[j]->name, k);
		}
		ck_assert_msg(k < c->nlaunches, "%s: %d launches for more kernels", what, c->nlaunches);
		const tir_launch *l = &c->launches[k];
		int64_t threads = (int64_t)l->block[0] * l->block[1] * l->block[2];
		ck_assert_msg(threads > 1, "%s: kernel %s launches %lld thread", what, l->name,
			      (long long)threads);
		k++;
	}
	ck_assert_int_eq(k, c->nlaunches);
}

/* One valid candidate of sketch `id` of w on t, drawn from *seed on. */
static tir_sched *draw(const char *what, const tir_workload *w, const tir_target *t, int id,
		       uint64_t *seed)
{
	tir_error err = { "" };
	for (int k = 0; k < MAX_DRAWS; k++) {
		tir_sched *s = tir_sched_new(w, (*seed)++, &err);
		ck_assert_msg(s, "%s: %s", what, err.msg);
		if (tir_sketch_apply(w, t, id, s, &err) == 0 &&
		    tir_verify(tir_sched_program(s), t, &err) == 0)
			return s;
		tir_sched_free(s);
	}
	ck_abort_msg("%s: no valid candidate in %d draws; the last: %s", what, MAX_DRAWS, err.msg);
	return NULL;
}

/* The sketches of w on t (at least one). */
static int sketches(const char *name, const tir_workload *w, const tir_target *t,
		    tir_sketch *sk)
{
	tir_error err = { "" };
	int n = tir_sketches(w, t, sk, TIR_MAX_SKETCHES, &err);
	ck_assert_msg(n >= 1, "%s: no %s sketch: %s", name, t->key, err.msg);
	return n;
}

/* Every CPU sketch: NCAND candidates, valid, replayed, the first of each
 * (all with TIR_SKETCH_GRAPH_FULL) run against the reference. */
static void check_cpu(const char *name, const char *json)
{
	bool full = getenv("TIR_SKETCH_GRAPH_FULL") != NULL;
	tir_workload *w = parse(name, json);
	tir_error err = { "" };
	tir_program *p0 = tir_program_build(w, &err);
	ck_assert_msg(p0, "%s: %s", name, err.msg);
	bool small = output_elems(p0) <= RUN_MAX_ELEMS;
	tir_program_free(p0);
	tir_sketch sk[TIR_MAX_SKETCHES];
	int n = sketches(name, w, &cpu, sk);
	double *ref = NULL;
	for (int i = 0; i < n; i++) {
		uint64_t seed = 1;
		for (int c = 0; c < NCAND; c++) {
			char what[256];
			snprintf(what, sizeof what, "%.100s %.64s #%d (cpu)", name, sk[i].name, c);
			tir_sched *s = draw(what, w, &cpu, i, &seed);
			check_replays(what, w, s, &cpu);
			if ((c == 0 && (small || i == 0)) || full)
				run_c(what, w, tir_sched_program(s), &ref);
			tir_sched_free(s);
		}
	}
	free(ref);
	tir_workload_free(w);
}

/* The CUDA source after its prelude, each kernel in a namespace of its own
 * (check_sketch_gpu.c's way of compiling many candidates at once). */
static void append_body(tir_buf *all, const char *src, int k)
{
	const char *a = strstr(src, "\nextern ");
	ck_assert(a);
	buf_printf(all, "namespace cand%d {\n", k);
	const char *key = "extern \"C\" __global__";
	for (const char *q = a + 1;;) {
		const char *e = strstr(q, key);
		if (!e) {
			buf_puts(all, q);
			break;
		}
		buf_printf(all, "%.*s__global__", (int)(e - q), q);
		q = e + strlen(key);
	}
	buf_puts(all, "}\n");
}

static size_t prelude_len(const char *src)
{
	const char *a = strstr(src, "\nextern ");
	ck_assert(a);
	return (size_t)(a - src + 1);
}

static void nvrtc_check(const char *name, int n, char **srcs, char **what)
{
#ifdef HAVE_CUDA
	bool *done = calloc((size_t)n, sizeof *done);
	for (int g = 0; g < n; g++) {
		if (done[g])
			continue;
		tir_error err = { "" };
		tir_buf all = { 0 };
		size_t pl = prelude_len(srcs[g]);
		buf_printf(&all, "%.*s", (int)pl, srcs[g]);
		for (int i = g; i < n; i++)
			if (!done[i] && prelude_len(srcs[i]) == pl && !strncmp(srcs[i], srcs[g], pl)) {
				append_body(&all, srcs[i], i);
				done[i] = true;
			}
		char *cubin = NULL;
		size_t size = 0;
		if (tir_nvrtc_compile(all.s, 90, &cubin, &size, &err) != 0) {
			for (int i = 0; i < n; i++)
				if (tir_nvrtc_compile(srcs[i], 90, &cubin, &size, &err) != 0)
					ck_abort_msg("%s: NVRTC rejects %s: %.400s", name, what[i], err.msg);
				else
					free(cubin);
			ck_abort_msg("%s: NVRTC rejects the candidates together: %.400s", name, err.msg);
		}
		free(cubin);
		free(all.s);
	}
	free(done);
#else
	(void)name; (void)n; (void)srcs; (void)what;
#endif
}

/* Every CUDA sketch: NCAND candidates, valid for sm_90, replayed to the same
 * code, no one-thread kernel, all compiled by NVRTC; where the graph is
 * small, the first of each (all with TIR_SKETCH_GRAPH_FULL) run on the CPU. */
static void check_cuda_doc(const char *name, const char *json, bool may_run)
{
	bool full = getenv("TIR_SKETCH_GRAPH_FULL") != NULL;
	tir_workload *w = parse(name, json);
	tir_error err = { "" };
	tir_program *p0 = tir_program_build(w, &err);
	ck_assert_msg(p0, "%s: %s", name, err.msg);
	bool small = may_run && output_elems(p0) <= RUN_MAX_ELEMS;
	tir_program_free(p0);
	tir_sketch sk[TIR_MAX_SKETCHES];
	int n = sketches(name, w, &sm90, sk);
	char *srcs[TIR_MAX_SKETCHES * NCAND], *what[TIR_MAX_SKETCHES * NCAND];
	int ns = 0;
	double *ref = NULL;
	for (int i = 0; i < n; i++) {
		uint64_t seed = 1;
		for (int c = 0; c < NCAND; c++) {
			char wh[256];
			snprintf(wh, sizeof wh, "%.100s %.64s #%d (cuda)", name, sk[i].name, c);
			tir_sched *s = draw(wh, w, &sm90, i, &seed);
			const tir_program *p = tir_sched_program(s);
			tir_code *code = tir_codegen(p, &sm90, &err);
			ck_assert_msg(code, "%s: CUDA codegen: %s", wh, err.msg);
			check_threads(wh, p, code);
			check_replays(wh, w, s, &sm90);
			bool tc = strstr(code->source, "wmma::") || strstr(code->source, "wgmma");
			if (!tc && ((c == 0 && small) || (full && may_run)))
				run_c(wh, w, p, &ref);
			srcs[ns] = code->source;
			what[ns] = strdup(wh);
			ns++;
			code->source = NULL;
			tir_code_free(code);
			tir_sched_free(s);
		}
	}
	nvrtc_check(name, ns, srcs, what);
	for (int i = 0; i < ns; i++) {
		free(srcs[i]);
		free(what[i]);
	}
	free(ref);
	tir_workload_free(w);
}

START_TEST(cpu_graphs)
{
	check_cpu(graphs[_i].name, graphs[_i].json);
}
END_TEST

START_TEST(cuda_graphs)
{
	check_cuda_doc(graphs[_i].name, graphs[_i].json, true);
}
END_TEST

static char *read_example(const char *file)
{
	char path[512];
	snprintf(path, sizeof path, "%s/examples/graphs/%s", TOP_SRCDIR, file);
	size_t len;
	char *doc = tir_read_file(path, 0, &len);
	ck_assert_msg(doc, "cannot read %s", path);
	return doc;
}

START_TEST(cuda_examples)
{
	char *doc = read_example(examples[_i]);
	check_cuda_doc(examples[_i], doc, false);
	free(doc);
}
END_TEST

/* ---- structure ------------------------------------------------------------------- */

static const sketch_def *def_named(const sketch_def *defs, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(defs[i].name, name))
			return &defs[i];
	ck_abort_msg("no sketch %s", name);
	return NULL;
}

/* Applies d to a fresh schedule of w (seed), validated for t. */
static tir_sched *apply_def(const tir_workload *w, const sketch_def *d, const tir_target *t,
			    uint64_t seed)
{
	tir_error err = { "" };
	for (int k = 0; k < MAX_DRAWS; k++) {
		tir_sched *s = tir_sched_new(w, seed + (uint64_t)k, &err);
		if (d->apply(s, t, &err) == 0 && tir_verify(tir_sched_program(s), t, &err) == 0)
			return s;
		tir_sched_free(s);
	}
	ck_abort_msg("%s: no valid candidate: %s", d->name, err.msg);
	return NULL;
}

/* Top-level statements holding blocks. */
static int kernels(const tir_program *p)
{
	int k = 0;
	for (int i = 0; i < p->root->nkids; i++)
		k += stmt_blocks(p->root->kids[i], NULL, 0) > 0;
	return k;
}

/* Softmax, layernorm, the seed's example: on a CPU one parallel row loop
 * holds every block (the row's partials local); on CUDA one kernel, a
 * thread block per row, its reductions across the threads (the row's values
 * in shared memory), or a thread per row. */
START_TEST(rows_are_fused)
{
	static const char *const docs[][2] = {
		{ "softmax", SOFTMAX("[48,256]", "float32") },
		{ "layernorm", LAYERNORM("24", "96", "float32") },
		{ "seed10", SEED10("16", "64") },
	};
	tir_workload *w = parse(docs[_i][0], docs[_i][1]);
	tir_error err = { "" };
	tir_program *p0 = tir_program_build(w, &err);
	int nblocks = stmt_blocks(p0->root, NULL, 0);
	tir_program_free(p0);
	for (uint64_t seed = 1; seed <= 4; seed++) {
		tir_sched *s = apply_def(w, def_named(sketch_cpu_defs, sketch_cpu_ndefs, "cpu-rows"),
					 &cpu, 10 * seed);
		const tir_program *p = tir_sched_program(s);
		ck_assert_msg(kernels(p) == 1, "%s cpu: %d loop nests", docs[_i][0], kernels(p));
		ck_assert(p->root->kids[0]->loop_kind == LOOP_PARALLEL);
		ck_assert_msg(stmt_blocks(p->root, NULL, 0) >= nblocks, "%s: blocks lost", docs[_i][0]);
		tir_sched_free(s);

		s = apply_def(w, def_named(sketch_gpu_defs, sketch_gpu_ndefs, "gpu-rows"), &sm90,
			      10 * seed);
		p = tir_sched_program(s);
		ck_assert_msg(kernels(p) == 1, "%s gpu-rows: %d kernels", docs[_i][0], kernels(p));
		tir_code *c = tir_codegen(p, &sm90, &err);
		ck_assert_msg(c, "%s", err.msg);
		ck_assert(c->nlaunches == 1);
		ck_assert_msg(strstr(c->source, "cross-thread reduction"), "%s: no cross-thread reduction",
			      docs[_i][0]);
		ck_assert_msg(strstr(c->source, "__syncthreads"), "%s: no barrier", docs[_i][0]);
		tir_code_free(c);
		tir_sched_free(s);

		s = apply_def(w, def_named(sketch_gpu_defs, sketch_gpu_ndefs, "gpu-rows-thread"),
			      &sm90, 10 * seed);
		ck_assert_int_eq(kernels(tir_sched_program(s)), 1);
		tir_sched_free(s);
	}
	tir_workload_free(w);
}
END_TEST

/* A float16 matmul with bias, gelu and a cast after it (a graph kernel):
 * gpu-wgmma draws both forms — the epilogue applied to the accumulator
 * registers in the store (one kernel, the float32 product never stored)
 * and the other forms — each valid and compiled by NVRTC. */
START_TEST(wgmma_epilogue)
{
	const char *name = "matmul-f16-bias-gelu", *json = NULL;
	for (int i = 0; i < NGRAPHS; i++)
		if (!strcmp(graphs[i].name, name))
			json = graphs[i].json;
	ck_assert(json);
	tir_workload *w = parse(name, json);
	const sketch_def *d = def_named(sketch_gpu_defs, sketch_gpu_ndefs, "gpu-wgmma");
	char *srcs[2] = { NULL, NULL }, *what[2] = { "with the epilogue", "without" };
	for (uint64_t seed = 1; seed <= 64 && (!srcs[0] || !srcs[1]); seed++) {
		tir_error err = { "" };
		tir_sched *s = apply_def(w, d, &sm90, 100 * seed);
		tir_code *c = tir_codegen(tir_sched_program(s), &sm90, &err);
		ck_assert_msg(c, "%s", err.msg);
		bool epi = strstr(c->source, "with its epilogue") != NULL;
		if (epi) {
			ck_assert_int_eq(c->nlaunches, 1);
			ck_assert_msg(strstr(c->source, "tir_gelu((tir_d[4 * tir_q + tir_h]"),
				      "the epilogue does not read the accumulator's registers");
			ck_assert_msg(!strstr(c->source, "float *__restrict__ mm"),
				      "the product is still a buffer of the kernel");
		}
		/* (without: the epilogue a second kernel after a direct store,
		 * or inlined into the copy-out of a shared-memory tile) */
		if (!srcs[epi ? 0 : 1]) {
			srcs[epi ? 0 : 1] = c->source;
			c->source = NULL;
		}
		tir_code_free(c);
		tir_sched_free(s);
	}
	ck_assert_msg(srcs[0] && srcs[1], "gpu-wgmma drew only one form in 64 seeds");
	nvrtc_check(name, 2, srcs, what);
	free(srcs[0]);
	free(srcs[1]);
	tir_workload_free(w);
}
END_TEST

/* gpu-rows stores a softmax's normalized row in sampled vectors: some
 * candidate stores whole float4s (each lane's value computed into a
 * register array first), some the row's copy-in loads float4s, and they
 * compile with NVRTC. */
START_TEST(row_vectors)
{
	tir_workload *w = parse("softmax", SOFTMAX("[48,256]", "float32"));
	const sketch_def *d = def_named(sketch_gpu_defs, sketch_gpu_ndefs, "gpu-rows");
	char *srcs[2] = { NULL, NULL }, *what[2] = { "vector stores", "vector copy-in" };
	const char *marks[2] = { "4 lanes computed, stored as one float4",
				 "4 lanes as one float4" };
	for (uint64_t seed = 1; seed <= 128 && (!srcs[0] || !srcs[1]); seed++) {
		tir_error err = { "" };
		tir_sched *s = apply_def(w, d, &sm90, 7 * seed);
		tir_code *c = tir_codegen(tir_sched_program(s), &sm90, &err);
		ck_assert_msg(c, "%s", err.msg);
		for (int k = 0; k < 2; k++)
			if (!srcs[k] && strstr(c->source, marks[k]))
				srcs[k] = strdup(c->source);
		tir_code_free(c);
		tir_sched_free(s);
	}
	ck_assert_msg(srcs[0], "no candidate stores float4s");
	ck_assert_msg(srcs[1], "no candidate loads the row as float4s");
	nvrtc_check("softmax", 2, srcs, what);
	free(srcs[0]);
	free(srcs[1]);
	tir_workload_free(w);
}
END_TEST

/* Which sketches apply: heavy sketches where a block has data reuse, row
 * sketches where reductions have none, pointwise sketches where there is no
 * reduction; a single operator's table is as it was. */
START_TEST(which_sketches)
{
	static const struct { const char *json, *cpu, *cuda; } cases[] = {
		{ SOFTMAX("[8,16]", "float32"), "cpu-rows", "gpu-rows,gpu-rows-thread" },
		{ "{\"op\":\"graph\",\"inputs\":{\"x\":{\"shape\":[5]}},\"nodes\":["
		  "{\"name\":\"y\",\"op\":\"relu\",\"args\":[\"x\"]}],\"outputs\":[\"y\"]}",
		  "cpu-pointwise", "gpu-pointwise" },
		{ "{\"op\":\"matmul\",\"M\":64,\"N\":64,\"K\":64}", "cpu-tile-reg,cpu-tile-cache,cpu-tile",
		  "gpu-tile-autocopy,gpu-tile,gpu-cross-thread" },
		{ "{\"op\":\"matmul\",\"M\":64,\"N\":64,\"K\":64,\"dtype\":\"float16\"}",
		  "cpu-tile-reg,cpu-tile-cache,cpu-tile",
		  "gpu-tensorcore,gpu-wgmma,gpu-tile-autocopy,gpu-tile,gpu-cross-thread" },
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		tir_workload *w = parse("case", cases[c].json);
		for (int k = 0; k < 2; k++) {
			tir_sketch sk[TIR_MAX_SKETCHES];
			int n = sketches("case", w, k ? &sm90 : &cpu, sk);
			tir_buf names = { 0 };
			buf_puts(&names, "");
			for (int i = 0; i < n; i++)
				buf_printf(&names, "%s%s", i ? "," : "", sk[i].name);
			ck_assert_str_eq(names.s, k ? cases[c].cuda : cases[c].cpu);
			free(names.s);
		}
		tir_workload_free(w);
	}
}
END_TEST

/* set_scope: an intermediate's scope changes; a parameter, a fragment scope,
 * an unknown scope are refused, the program unchanged. */
START_TEST(set_scope_contract)
{
	tir_workload *w = parse("softmax", SOFTMAX("[4,8]", "float32"));
	tir_error err = { "" };
	tir_sched *s = tir_sched_new(w, 1, &err);
	int mx = tir_get_block(s, "amax_mx", &err), y = tir_get_block(s, "div_y", &err);
	ck_assert(mx >= 0 && y >= 0);
	ck_assert(tir_set_scope(s, y, 0, "local", &err) < 0);
	ck_assert_msg(strstr(err.msg, "parameter"), "%s", err.msg);
	ck_assert(tir_set_scope(s, mx, 0, "wmma.accumulator", &err) < 0);
	ck_assert_msg(strstr(err.msg, "fragment"), "%s", err.msg);
	ck_assert(tir_set_scope(s, mx, 0, "nowhere", &err) < 0);
	ck_assert(tir_set_scope(s, mx, 1, "local", &err) < 0);
	ck_assert_int_eq(s->ninst, 2);
	ck_assert(tir_set_scope(s, mx, 0, "local", &err) == 0);
	ck_assert(s->rv[mx].block->store->scope == TIR_SCOPE_LOCAL);
	char *tr = tir_sched_trace(s);
	ck_assert_msg(strstr(tr, "{\"op\":\"set_scope\",\"in\":[\"b0\"],\"str\":\"local\",\"attrs\":[0]}"),
		      "%s", tr);
	free(tr);
	/* a local buffer whose readers are in another loop nest: still right
	 * on a CPU (allocated whole at the top) */
	double *ref = NULL;
	run_c("set_scope local", w, tir_sched_program(s), &ref);
	free(ref);
	tir_sched_free(s);
	tir_workload_free(w);
}
END_TEST

/* rfactor_interleaved: part p reduces p, p + F, ...: the parts read
 * adjacent elements; the trace records the attribute; right for a sum and a
 * max; a factor that does not divide is refused. */
START_TEST(rfactor_interleaved_contract)
{
	tir_workload *w = parse("softmax", SOFTMAX("[3,32]", "float32"));
	tir_error err = { "" };
	tir_sched *s = tir_sched_new(w, 1, &err);
	int mx = tir_get_block(s, "amax_mx", &err), sm = tir_get_block(s, "sum_sm", &err);
	ck_assert(tir_rfactor_interleaved(s, mx, 2, TIR_LIT(5), &err) < 0);
	ck_assert_msg(strstr(err.msg, "divide"), "%s", err.msg);
	ck_assert_msg(tir_rfactor_interleaved(s, mx, 2, TIR_LIT(8), &err) > 0, "%s", err.msg);
	ck_assert_msg(tir_rfactor_interleaved(s, sm, 2, TIR_LIT(4), &err) > 0, "%s", err.msg);
	const tir_block *b = s->rv[mx].block;
	char *v = tir_expr_print(b->value);
	ck_assert_msg(strstr(v, "* 8 + vr0_rf") || strstr(v, "*8 + vr0_rf") ||
		      strstr(v, "vr0 * 8 + vr0_rf"), "%s", v);
	free(v);
	char *tr = tir_sched_trace(s);
	ck_assert_msg(strstr(tr, "\"op\":\"rfactor\",\"in\":[\"b0\",8],\"attrs\":[2,1]"), "%s", tr);
	free(tr);
	check_replays("rfactor_interleaved", w, s, &cpu);
	double *ref = NULL;
	run_c("rfactor_interleaved", w, tir_sched_program(s), &ref);
	free(ref);
	tir_sched_free(s);
	tir_workload_free(w);
}
END_TEST

static Suite *make_suite(void)
{
	Suite *s = suite_create("sketch_graph");
	TCase *tc = tcase_create("contracts");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, set_scope_contract);
	tcase_add_test(tc, rfactor_interleaved_contract);
	tcase_add_test(tc, which_sketches);
	tcase_add_loop_test(tc, rows_are_fused, 0, 3);
	suite_add_tcase(s, tc);
	tc = tcase_create("cpu");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_loop_test(tc, cpu_graphs, 0, NGRAPHS);
	suite_add_tcase(s, tc);
	tc = tcase_create("cuda");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_loop_test(tc, cuda_graphs, 0, NGRAPHS);
	tcase_add_loop_test(tc, cuda_examples, 0, 3);
	tcase_add_test(tc, wgmma_epilogue);
	tcase_add_test(tc, row_vectors);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(make_suite());
}
