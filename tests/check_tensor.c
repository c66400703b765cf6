/*
 * check_tensor.c — tensor intrinsics: the tensorize primitive, the
 * validation of tensorized programs and the tensor-core sketch.
 *
 * The sketch's candidates for matrix products of every operand dtype with
 * an MMA intrinsic (float16, bfloat16; int8 where WMMA's alignment allows,
 * the NT layout), batched, transposed, with an epilogue, are valid for
 * cuda:sm_90, call the WMMA functions, replay from their traces to the same
 * code, and compile with NVRTC for sm_90; the small ones also compute the
 * right result on the CPU through the C backend once their tensorize
 * annotations are dropped (the annotation changes how, never what: the
 * program below it is the scalar computation).  Running them on a GPU is
 * bench/gpu.sh's part.
 *
 * The same for the warpgroup MMA sketch (gpu-wgmma: wgmma with swizzled
 * shared operands, float16 and bfloat16 only).
 *
 * Refusals, each with its message: a loop of the wrong extent, the wrong
 * dtypes, a reduction that still has its init, the reserved annotation key,
 * a tensorized program on a CPU target, a warp-level intrinsic without a
 * warp, a fragment touched outside an intrinsic; wgmma on a target other
 * than 9.0, without one warpgroup, with a padded shared operand, with more
 * accumulators than the block leaves registers.
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

static tir_target cpu, sm90;

static void setup(void)
{
	tir_error err;
	ck_assert_msg(tir_target_parse("cpu", &cpu, &err) == 0, "%s", err.msg);
	ck_assert_msg(tir_target_parse("cuda:sm_90", &sm90, &err) == 0, "%s", err.msg);
}

static const char *const products[][2] = {
	{ "f16",       "{\"op\":\"matmul\",\"M\":64,\"N\":48,\"K\":32,\"dtype\":\"float16\"}" },
	{ "bf16",      "{\"op\":\"matmul\",\"M\":32,\"N\":64,\"K\":48,\"dtype\":\"bfloat16\"}" },
	{ "f16-NT",    "{\"op\":\"matmul\",\"M\":48,\"N\":32,\"K\":64,\"dtype\":\"float16\",\"layout\":\"NT\"}" },
	{ "f16-TN",    "{\"op\":\"matmul\",\"M\":32,\"N\":32,\"K\":32,\"dtype\":\"float16\",\"layout\":\"TN\"}" },
	{ "f16-batch", "{\"op\":\"matmul\",\"batch\":3,\"M\":32,\"N\":16,\"K\":32,\"dtype\":\"float16\"}" },
	{ "f16-bias-relu", "{\"op\":\"matmul\",\"M\":32,\"N\":32,\"K\":16,\"dtype\":\"float16\",\"epilogue\":[\"bias\",\"relu\"]}" },
	{ "int8-NT",   "{\"op\":\"matmul\",\"M\":32,\"N\":32,\"K\":64,\"dtype\":\"int8\",\"layout\":\"NT\"}" },
	{ "f16-large", "{\"op\":\"matmul\",\"M\":1024,\"N\":1024,\"K\":1024,\"dtype\":\"float16\"}" },
	/* normalized first: padded to whole tiles, iterators fused, reindexed */
	{ "f16-odd",   "{\"op\":\"matmul\",\"M\":40,\"N\":24,\"K\":20,\"dtype\":\"float16\"}" },
	{ "conv2d",    "{\"op\":\"conv2d\",\"N\":1,\"C\":8,\"H\":6,\"W\":6,\"K\":16,\"R\":3,\"S\":3,\"pad\":1,\"layout\":\"NHWC\",\"dtype\":\"float16\"}" },
	{ "conv2d-s2-dil-bf16", "{\"op\":\"conv2d\",\"N\":2,\"C\":16,\"H\":9,\"W\":9,\"K\":24,\"R\":3,\"S\":3,\"stride\":2,\"dilation\":2,\"pad\":2,\"layout\":\"NHWC\",\"dtype\":\"bfloat16\"}" },
	{ "conv2d-NCHW-bias-relu", "{\"op\":\"conv2d\",\"N\":1,\"C\":16,\"H\":5,\"W\":7,\"K\":32,\"R\":3,\"S\":1,\"pad\":1,\"layout\":\"NCHW\",\"dtype\":\"float16\",\"epilogue\":[\"bias\",\"relu\"]}" },
	{ "conv1d",    "{\"op\":\"conv1d\",\"N\":2,\"C\":16,\"W\":10,\"K\":32,\"S\":3,\"pad\":1,\"layout\":\"NWC\",\"dtype\":\"float16\"}" },
	{ "conv3d",    "{\"op\":\"conv3d\",\"N\":1,\"C\":4,\"D\":3,\"H\":4,\"W\":4,\"K\":16,\"T\":3,\"R\":3,\"S\":3,\"pad\":1,\"layout\":\"NDHWC\",\"dtype\":\"float16\"}" },
	{ "conv2d_transpose", "{\"op\":\"conv2d_transpose\",\"N\":1,\"C\":16,\"H\":4,\"W\":4,\"K\":3,\"R\":4,\"S\":4,\"stride\":2,\"pad\":1,\"layout\":\"NHWC\",\"dtype\":\"float16\"}" },
	{ "conv2d-splitk", "{\"op\":\"conv2d\",\"N\":1,\"C\":32,\"H\":4,\"W\":4,\"K\":16,\"R\":3,\"S\":3,\"pad\":1,\"layout\":\"NHWC\",\"dtype\":\"float16\"}" },
	{ "conv2d-grouped", "{\"op\":\"conv2d\",\"N\":1,\"C\":32,\"H\":5,\"W\":5,\"K\":32,\"R\":3,\"S\":3,\"pad\":1,\"groups\":2,\"layout\":\"NHWC\",\"dtype\":\"float16\"}" },
	{ "conv2d-grouped-NCHW-s2", "{\"op\":\"conv2d\",\"N\":2,\"C\":16,\"H\":7,\"W\":6,\"K\":64,\"R\":3,\"S\":3,\"stride\":2,\"pad\":1,\"groups\":4,\"layout\":\"NCHW\",\"dtype\":\"float16\"}" },
	{ "f16-batch-odd", "{\"op\":\"matmul\",\"batch\":3,\"M\":20,\"N\":24,\"K\":136,\"dtype\":\"float16\"}" },
	{ "conv2d-splitk-bias-relu", "{\"op\":\"conv2d\",\"N\":1,\"C\":32,\"H\":3,\"W\":5,\"K\":16,\"R\":3,\"S\":3,\"pad\":1,\"layout\":\"NHWC\",\"dtype\":\"float16\",\"epilogue\":[\"bias\",\"relu\"]}" },
	{ "conv2d-C2D-2", "{\"op\":\"conv2d\",\"N\":1,\"C\":256,\"H\":14,\"W\":14,\"K\":256,\"R\":3,\"S\":3,\"pad\":1,\"layout\":\"NHWC\",\"dtype\":\"float16\"}" },
};
#define NPRODUCTS (int)(sizeof products / sizeof *products)
#define NCAND 6

static tir_workload *parse(const char *json)
{
	tir_error err = { "" };
	tir_workload *w = tir_workload_parse(json, strlen(json), NULL, &err);
	ck_assert_msg(w, "%s", err.msg);
	return w;
}

/* The annotations of intrinsics of `kind` (-1: all) removed. */
static void drop_tensorize(tir_stmt *s, int kind)
{
	const tir_intrin *in = intrin_of_loop(s);
	if (s->kind == STMT_FOR && in && (kind < 0 || (int)in->kind == kind)) {
		int k = 0;
		for (int i = 0; i < s->nann; i++)
			if (strcmp(s->ann[i].key, TIR_TENSORIZE_ANN))
				s->ann[k++] = s->ann[i];
		s->nann = k;
	}
	for (int i = 0; i < s->nkids; i++)
		drop_tensorize(s->kids[i], kind);
}

static void run_on_cpu(const char *name, const tir_workload *w, tir_sched *s)
{
	tir_error err = { "" };
	tir_program *p = (tir_program *)tir_sched_program(s);
	drop_tensorize(p->root, -1);
	for (int i = 0; i < p->nbufs; i++)     /* a fragment is a local array on a CPU */
		if (scope_is_fragment(p->bufs[i]->scope))
			p->bufs[i]->scope = TIR_SCOPE_LOCAL;
	ck_assert_msg(tir_verify(p, &cpu, &err) == 0, "%s: without tensorize, on cpu: %s", name,
		      err.msg);
	tir_code *c = tir_codegen(p, &cpu, &err);
	ck_assert_msg(c, "%s: C codegen: %s", name, err.msg);
	tir_measure_opts o = { .seed = 1, .no_timing = true, .timeout_s = 60 };
	tir_measure_result res;
	memset(&res, 0, sizeof res);
	tir_measure(&tir_runner_cpu, w, c, &cpu, &o, &res);
	ck_assert_msg(res.status == TIR_MEASURE_OK, "%s: %s: %s (max rel error %g)", name,
		      tir_measure_status_name(res.status), res.msg, res.max_rel_error);
	tir_measure_result_clear(&res);
	tir_code_free(c);
}

/* Candidate s of w (code c): its trace replays to the same code, which
 * NVRTC compiles for sm_90 (where libtir has CUDA). */
static void replays_and_compiles(const char *name, const tir_workload *w, tir_sched *s,
				 const tir_code *c)
{
	tir_error err = { "" };
	char *trace = tir_sched_trace(s);
	tir_sched *r = tir_sched_new(w, 999, &err);
	ck_assert_msg(tir_sched_replay(r, trace, &err) == 0, "%s: replay: %s", name, err.msg);
	tir_code *rc = tir_codegen(tir_sched_program(r), &sm90, &err);
	ck_assert_msg(rc && !strcmp(rc->source, c->source), "%s: replay differs", name);
	ck_assert(strstr(trace, "\"tensorize\""));
	tir_code_free(rc);
	tir_sched_free(r);
	free(trace);
#ifdef HAVE_CUDA
	char *cubin = NULL;
	size_t size = 0;
	if (tir_nvrtc_compile(c->source, 90, &cubin, &size, &err)) {
		FILE *f = fopen("/tmp/check_tensor-failed.cu", "w");
		if (f) {
			fputs(c->source, f);
			fclose(f);
		}
		ck_abort_msg("%s: NVRTC (source in /tmp/check_tensor-failed.cu): %.400s", name,
			     err.msg);
	}
	ck_assert(size > 0);
	free(cubin);
#endif
}

/* NCAND candidates of sketch d for product i: valid, their code has every
 * operation of `ops`, replayed to the same code, compiled by NVRTC, the
 * small ones right on the CPU. */
static void candidates(int i, const sketch_def *d, const char *const *ops)
{
	const char *name = products[i][0];
	tir_workload *w = parse(products[i][1]);
	tir_error err = { "" };
	tir_sched *s0 = tir_sched_new(w, 0, &err);
	bool applies = d->applies(tir_sched_program(s0), &sm90);
	tir_sched_free(s0);
	if (!strcmp(d->name, "gpu-wgmma") && strstr(name, "int8")) {
		ck_assert_msg(!applies, "%s: gpu-wgmma applies to int8", name);   /* f16 / bf16 only */
		tir_workload_free(w);
		return;
	}
	ck_assert_msg(applies, "%s: %s does not apply", name, d->name);
	int made = 0, split_k = 0;
	for (uint64_t seed = 1; made < NCAND && seed < 64; seed++) {
		tir_sched *s = tir_sched_new(w, seed, &err);
		ck_assert_msg(d->apply(s, &sm90, &err) == 0, "%s %s seed %llu: %s", name, d->name,
			      (unsigned long long)seed, err.msg);
		if (tir_verify(tir_sched_program(s), &sm90, &err)) {
			/* mutation-free draws stay within the soft limits; a hard
			 * limit (shared memory) may still refuse one */
			ck_assert_msg(strstr(err.msg, "shared memory"), "%s seed %llu: %s", name,
				      (unsigned long long)seed, err.msg);
			tir_sched_free(s);
			continue;
		}
		tir_code *c = tir_codegen(tir_sched_program(s), &sm90, &err);
		ck_assert_msg(c, "%s: CUDA codegen: %s", name, err.msg);
		for (int k = 0; ops[k]; k++)
			ck_assert_msg(strstr(c->source, ops[k]), "%s %s: no %s in the code", name,
				      d->name, ops[k]);
		replays_and_compiles(name, w, s, c);
		if (tir_workload_flops(w) < 1e6)
			run_on_cpu(name, w, s);
		if (strstr(c->source, "_rf_sum"))
			split_k++;
		tir_code_free(c);
		tir_sched_free(s);
		made++;
	}
	ck_assert_msg(made == NCAND, "%s %s: %d valid candidates in 63 draws", name, d->name, made);
	/* a reduction of 288 is split into 2 or 4 parts by some candidates */
	if (!strcmp(name, "conv2d-splitk") || !strcmp(name, "conv2d-splitk-bias-relu"))
		ck_assert_msg(split_k > 0, "%s: no candidate splits K", name);
	tir_workload_free(w);
}

static const sketch_def *sketch_named(const char *n)
{
	for (int i = 0; i < sketch_gpu_ndefs; i++)
		if (!strcmp(sketch_gpu_defs[i].name, n))
			return &sketch_gpu_defs[i];
	ck_abort_msg("no sketch %s", n);
	return NULL;
}

START_TEST(tensorcore_candidates)
{
	static const char *const ops[] = { "nvcuda::wmma::mma_sync(",
		"nvcuda::wmma::load_matrix_sync(", "nvcuda::wmma::store_matrix_sync(",
		"nvcuda::wmma::fill_fragment(", NULL };
	candidates(_i, sketch_named("gpu-tensorcore"), ops);
}
END_TEST

/* Hopper's warpgroup MMA: the same products (not int8), the shared operands
 * read through swizzled descriptors, the asynchronous MMAs fenced, committed
 * and waited for. */
START_TEST(wgmma_candidates)
{
	static const char *const ops[] = { "wgmma.mma_async.sync.aligned.m64n", "tir_wgmma_desc(",
		"tir_swz128(", "tir_wgmma_fence();", "tir_wgmma_commit_wait", NULL };
	candidates(_i, sketch_named("gpu-wgmma"), ops);
}
END_TEST

/* The pipelined loop of s (annotated "software_pipeline"), or NULL. */
static tir_stmt *pipelined(tir_stmt *s)
{
	for (int i = 0; s->kind == STMT_FOR && i < s->nann; i++)
		if (!strcmp(s->ann[i].key, "software_pipeline"))
			return s;
	for (int k = 0; k < s->nkids; k++) {
		tir_stmt *l = pipelined(s->kids[k]);
		if (l)
			return l;
	}
	return NULL;
}

static const char *const tma_products[] = {
	"{\"op\":\"matmul\",\"M\":256,\"N\":512,\"K\":512,\"dtype\":\"float16\"}",
	"{\"op\":\"matmul\",\"M\":512,\"N\":256,\"K\":256,\"dtype\":\"bfloat16\",\"layout\":\"TN\"}",
	"{\"op\":\"matmul\",\"M\":256,\"N\":256,\"K\":512,\"dtype\":\"float16\",\"layout\":\"NT\"}",
	"{\"op\":\"matmul\",\"batch\":3,\"M\":128,\"N\":128,\"K\":256,\"dtype\":\"float16\"}",
};

/* wgmma candidates whose operands the tensor memory accelerator fetches:
 * a producer warpgroup more along threadIdx.y, a tensor map per operand
 * over a kernel input in boxes of one 128-byte swizzle span, mbarriers,
 * the bulk copies; replayed to the same code, compiled by NVRTC, and the
 * program (its semantics, without the intrinsics) right on the CPU. */
START_TEST(tma_candidates)
{
	tir_workload *w = parse(tma_products[_i]);
	tir_error err = { "" };
	const sketch_def *d = sketch_named("gpu-wgmma");
	int made = 0;
	for (uint64_t seed = 1; made < 3 && seed < 64; seed++) {
		tir_sched *s = tir_sched_new(w, seed, &err);
		ck_assert_msg(d->apply(s, &sm90, &err) == 0, "%s", err.msg);
		tir_code *c = NULL;
		if (tir_verify(tir_sched_program(s), &sm90, &err) ||
		    !(c = tir_codegen(tir_sched_program(s), &sm90, &err)) ||
		    c->launches[0].ntmaps == 0) {
			ck_assert_msg(c || strstr(err.msg, "shared memory"), "%s", err.msg);
			tir_code_free(c);
			tir_sched_free(s);
			continue;
		}
		const tir_launch *ln = &c->launches[0];
		ck_assert_int_eq(ln->block[0], 128);
		ck_assert_msg(ln->block[1] >= 2, "no producer warpgroup: block %d x %d",
			      ln->block[0], ln->block[1]);
		ck_assert_int_eq(ln->ntmaps, 2);
		for (int m = 0; m < ln->ntmaps; m++) {
			const tir_tmap_info *x = &ln->tmaps[m];
			ck_assert(x->arg >= 0 && x->arg < c->nargs && !c->args[x->arg].is_output);
			ck_assert_int_eq(x->box[0] * x->elem_bytes, 128);
			ck_assert_int_eq(x->strides[1] % 16, 0);
			for (int k = 1; k < x->rank; k++)
				ck_assert(x->box[k] >= 1 && x->box[k] <= 256);
		}
		static const char *const ops[] = { "cp.async.bulk.tensor.", "tir_mbar_wait(",
			"tir_mbar_expect(", "tir_mbar_arrive(", "__grid_constant__ tir_tmap tir_tmap1",
			"return; /* the producer", "wgmma.mma_async", NULL };
		for (int k = 0; ops[k]; k++)
			ck_assert_msg(strstr(c->source, ops[k]), "no %s in the code", ops[k]);
		ck_assert_msg(!strstr(c->source, "tir_cp_async_commit();"), "cp.async beside TMA");
		replays_and_compiles(tma_products[_i], w, s, c);
		if (tir_workload_flops(w) < 1e8)
			run_on_cpu("tma", w, s);
		tir_code_free(c);
		tir_sched_free(s);
		made++;
	}
	ck_assert_msg(made == 3, "%s: %d TMA candidates in 63 draws", tma_products[_i], made);
	tir_workload_free(w);
}
END_TEST

/* "tma" on a pipeline whose copies are not boxes fetched by serial loops:
 * a cooperative cp.async fetch (its loops bound to threads), an im2col
 * gather; codegen names the fault. */
START_TEST(refuse_tma)
{
	static const char *const cases[][2] = {
		{ "{\"op\":\"matmul\",\"M\":256,\"N\":256,\"K\":256,\"dtype\":\"float16\"}",
		  "not serial" },
		{ "{\"op\":\"conv2d\",\"N\":1,\"C\":64,\"H\":8,\"W\":8,\"K\":64,\"R\":3,\"S\":3,"
		  "\"pad\":1,\"layout\":\"NHWC\",\"dtype\":\"float16\"}", "tma: " },
	};
	const sketch_def *d = sketch_named("gpu-wgmma");
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		tir_workload *w = parse(cases[i][0]);
		tir_error err = { "" };
		bool done = false;
		for (uint64_t seed = 1; seed < 64 && !done; seed++) {
			tir_sched *s = tir_sched_new(w, seed, &err);
			ck_assert_msg(d->apply(s, &sm90, &err) == 0, "%s", err.msg);
			tir_program *p = (tir_program *)tir_sched_program(s);
			tir_stmt *l = pipelined(p->root);
			tir_code *c = l && !tir_verify(p, &sm90, &err) ? tir_codegen(p, &sm90, &err) : NULL;
			if (c && c->launches[0].ntmaps == 0 && l->nann < TIR_MAX_ANN) {
				bool two = false;
				for (int a = 0; a < l->nann; a++)
					two |= !strcmp(l->ann[a].key, "software_pipeline") && l->ann[a].value >= 2;
				if (two) {
					l->ann[l->nann].key = "tma";
					l->ann[l->nann++].value = 1;
					tir_code *t = tir_codegen(p, &sm90, &err);
					ck_assert_msg(!t, "%s: a TMA pipeline generated", cases[i][0]);
					ck_assert_msg(strstr(err.msg, cases[i][1]), "%s", err.msg);
					done = true;
				}
			}
			tir_code_free(c);
			tir_sched_free(s);
		}
		ck_assert_msg(done, "%s: no cp.async pipeline to mark", cases[i][0]);
		tir_workload_free(w);
	}
}
END_TEST

/* int8 with B row-major: 16 one-byte columns are 16 bytes, so WMMA's
 * 32-byte alignment cannot hold for every tile; the sketch says so before
 * drawing anything. */
START_TEST(int8_row_major_b_not_tensorized)
{
	tir_workload *w = parse("{\"op\":\"matmul\",\"M\":32,\"N\":32,\"K\":32,\"dtype\":\"int8\"}");
	tir_error err;
	tir_sched *s = tir_sched_new(w, 1, &err);
	ck_assert(!sketch_tensorcore_applies(tir_sched_program(s), &sm90));
	/* and float32 has no intrinsic at all */
	tir_workload *f = parse("{\"op\":\"matmul\",\"M\":32,\"N\":32,\"K\":32}");
	tir_sched *t = tir_sched_new(f, 1, &err);
	ck_assert(!sketch_tensorcore_applies(tir_sched_program(t), &sm90));
	tir_sched_free(s);
	tir_sched_free(t);
	tir_workload_free(w);
	tir_workload_free(f);
}
END_TEST

/* ---- refusals --------------------------------------------------------------------- */

/* A 16 x 16 x 16 product (or `json`) with fragments: a and b read into
 * matrix_a / matrix_b fragments, the output through an accumulator
 * fragment; *blk is the product's block RV, *l its three loops. */
static tir_sched *fragments(const char *json, tir_workload **w, int *blk, int *l)
{
	tir_error err = { "" };
	*w = parse(json);
	tir_sched *s = tir_sched_new(*w, 1, &err);
	int b = tir_get_block(s, "compute", &err);
	ck_assert(b >= 0);
	ck_assert_msg(tir_cache_read(s, b, 0, "wmma.matrix_a", &err) >= 0, "%s", err.msg);
	ck_assert_msg(tir_cache_read(s, b, 1, "wmma.matrix_b", &err) >= 0, "%s", err.msg);
	ck_assert_msg(tir_cache_write(s, b, 0, "wmma.accumulator", &err) >= 0, "%s", err.msg);
	ck_assert(tir_get_loops(s, b, l, 3, &err) == 3);
	*blk = b;
	return s;
}

#define MM16 "{\"op\":\"matmul\",\"M\":16,\"N\":16,\"K\":16,\"dtype\":\"float16\"}"

START_TEST(refuse_init_wrong_extent_wrong_dtype)
{
	tir_workload *w;
	int b, l[3];
	tir_error err = { "" };
	tir_sched *s = fragments(MM16, &w, &b, l);
	ck_assert(tir_tensorize(s, l[0], "wmma_mma_16x16x16_f16_f32", &err) < 0);
	ck_assert_msg(strstr(err.msg, "init"), "%s", err.msg);
	ck_assert(tir_decompose_reduction(s, b, l[0], &err) >= 0);
	/* the wrong operand dtype */
	ck_assert(tir_tensorize(s, l[0], "wmma_mma_16x16x16_bf16_f32", &err) < 0);
	ck_assert_msg(strstr(err.msg, "dtype"), "%s", err.msg);
	/* the wrong kind: a product is not a load */
	ck_assert(tir_tensorize(s, l[0], "wmma_load_a_16x16x16_f16", &err) < 0);
	/* an unknown intrinsic */
	ck_assert(tir_tensorize(s, l[0], "mma_32x8x16", &err) < 0);
	ck_assert_msg(strstr(err.msg, "unknown intrinsic"), "%s", err.msg);
	/* the reserved key */
	ck_assert(tir_annotate(s, l[0], "tensorize", 8, &err) < 0);
	ck_assert_msg(strstr(err.msg, "reserved"), "%s", err.msg);
	/* and the right one */
	ck_assert_msg(tir_tensorize(s, l[0], "wmma_mma_16x16x16_f16_f32", &err) >= 0, "%s", err.msg);
	/* not twice */
	ck_assert(tir_tensorize(s, l[1], "wmma_mma_16x16x16_f16_f32", &err) < 0);
	tir_sched_free(s);
	tir_workload_free(w);

	s = fragments("{\"op\":\"matmul\",\"M\":32,\"N\":16,\"K\":16,\"dtype\":\"float16\"}", &w, &b, l);
	ck_assert(tir_decompose_reduction(s, b, l[0], &err) >= 0);
	ck_assert(tir_tensorize(s, l[0], "wmma_mma_16x16x16_f16_f32", &err) < 0);
	ck_assert_msg(strstr(err.msg, "extent 32"), "%s", err.msg);
	tir_sched_free(s);
	tir_workload_free(w);
}
END_TEST

/* A max or min of products is no MMA: tensorize refuses it by name, and
 * neither tensor-core sketch applies to it (a sum of the same products:
 * both do). */
START_TEST(refuse_max_min)
{
	static const tir_reduce rs[] = { REDUCE_MAX, REDUCE_MIN };
	for (int r = 0; r < 2; r++) {
		tir_workload *w;
		int b, l[3];
		tir_error err = { "" };
		tir_sched *s = fragments(MM16, &w, &b, l);
		tir_block *blk = s->rv[b].block;
		blk->reduce = rs[r];
		blk->init = reduce_identity(&s->p->arena, rs[r], blk->store->dtype);
		ck_assert(tir_decompose_reduction(s, b, l[0], &err) >= 0);
		ck_assert(tir_tensorize(s, l[0], "wmma_mma_16x16x16_f16_f32", &err) < 0);
		ck_assert_msg(strstr(err.msg, "an MMA sums, and it is a reduction by ") &&
			      strstr(err.msg, reduce_name(rs[r])), "%s", err.msg);
		tir_sched_free(s);
		tir_workload_free(w);

		w = parse("{\"op\":\"matmul\",\"M\":128,\"N\":128,\"K\":64,\"dtype\":\"float16\"}");
		tir_program *p = tir_program_build(w, &err);
		ck_assert(sketch_tensorcore_applies(p, &sm90) && sketch_wgmma_applies(p, &sm90));
		tir_block *c = program_find_block(p, "compute");
		c->reduce = rs[r];
		c->init = reduce_identity(&p->arena, rs[r], c->store->dtype);
		ck_assert(!sketch_tensorcore_applies(p, &sm90));
		ck_assert(!sketch_wgmma_applies(p, &sm90));
		tir_program_free(p);
		tir_workload_free(w);
	}
}
END_TEST

/* A tensorized product where nothing else is: the CPU target refuses it, the
 * GPU one for want of a warp, and the untensorized fragment copies. */
/* Sets the decision of the k-th instruction of kind `op` in trace t (in
 * place; the new decision no longer than the old, padded with spaces). */
static void set_decision(char *t, const char *op, int k, const char *dec)
{
	char key[64];
	snprintf(key, sizeof key, "\"op\":\"%s\"", op);
	char *q = t;
	for (int i = 0; i <= k; i++) {
		q = strstr(q, key);
		ck_assert_msg(q, "no %s number %d in the trace", op, k);
		q += strlen(key);
	}
	char *d = strstr(q, "\"decision\":[");
	ck_assert(d);
	d += strlen("\"decision\":");
	char *e = strchr(d, ']');
	size_t old = (size_t)(e - d + 1), n = strlen(dec);
	ck_assert_msg(n <= old, "decision %s longer than %.*s", dec, (int)old, d);
	memcpy(d, dec, n);
	memset(d + n, ' ', old - n);
}

/* The warpgroup MMA's refusals: a target other than 9.0, a block without
 * exactly one warpgroup along threadIdx.x, a padded (storage_align) shared
 * operand, more accumulators than __launch_bounds__ leaves registers. */
START_TEST(refuse_wgmma)
{
	tir_workload *w = parse("{\"op\":\"matmul\",\"M\":512,\"N\":512,\"K\":64,\"dtype\":\"float16\"}");
	tir_error err = { "" };
	const sketch_def *d = sketch_named("gpu-wgmma");
	tir_target sm80;
	ck_assert(tir_target_parse("cuda:sm_80", &sm80, &err) == 0);
	/* a valid candidate fetching by cp.async with all its threads (its
	 * fetch a split of 128 lanes: ,128,"v), refused on 8.0 — for its
	 * compute capability where its shared memory would fit there (8.0 has
	 * less) */
	tir_sched *s = NULL;
	char *trace = NULL, *q;
	for (uint64_t seed = 1; seed < 64 && !s; seed++) {
		s = tir_sched_new(w, seed, &err);
		bool ok = d->apply(s, &sm90, &err) == 0 && tir_verify(tir_sched_program(s), &sm90, &err) == 0;
		if (ok) {
			trace = tir_sched_trace(s);
			ok = strstr(trace, ",128,\"v") != NULL;
		}
		if (ok) {
			ck_assert(tir_verify(tir_sched_program(s), &sm80, &err) < 0);
			ok = !strstr(err.msg, "shared memory");
		}
		if (!ok) {
			free(trace);
			trace = NULL;
			tir_sched_free(s);
			s = NULL;
		}
	}
	ck_assert_msg(s, "no valid cp.async gpu-wgmma candidate within 8.0's shared memory");
	ck_assert_msg(strstr(err.msg, "exactly 9.0"), "%s", err.msg);

	/* two warpgroups' worth of lanes along threadIdx.x */
	while ((q = strstr(trace, ",128,\"v")))
		memcpy(q, ",256", 4);
	tir_sched *r = tir_sched_new(w, 1, &err);
	ck_assert_msg(tir_sched_replay(r, trace, &err) == 0, "%s", err.msg);
	ck_assert(tir_verify(tir_sched_program(r), &sm90, &err) < 0);
	ck_assert_msg(strstr(err.msg, "exactly one warpgroup"), "%s", err.msg);
	tir_sched_free(r);
	free(trace);

	/* 4 warpgroups (512 threads: 128 registers a thread), each 4 MMAs of
	 * 64 x 64: 128 accumulators (a draw of that width fetching by cp.async,
	 * redecided) */
	tir_workload *n32 = parse("{\"op\":\"matmul\",\"M\":1024,\"N\":64,\"K\":64,\"dtype\":\"float16\"}");
	tir_sched *t = NULL;
	for (uint64_t seed = 1; seed < 64 && !t; seed++) {
		t = tir_sched_new(n32, seed, &err);
		ck_assert_msg(d->apply(t, &sm90, &err) == 0, "%s", err.msg);
		trace = tir_sched_trace(t);
		if (!strstr(trace, "wgmma_64x64x16_f16_f32") || !strstr(trace, ",128,\"v")) {
			free(trace);
			tir_sched_free(t);
			t = NULL;
		}
	}
	ck_assert(t);
	/* the fetches' split over the warpgroups (a literal) made 4 as well */
	for (char *f = trace; (f = strstr(f, "null,")); f += 5)
		if (f[5] >= '1' && f[5] <= '8' && !strncmp(f + 6, ",128,\"v", 7))
			f[5] = '4';
	ck_assert(strstr(trace, "wgmma_64x64x16_f16_f32"));
	/* no software pipeline: the 1024 x 64 tile of A fits once (the
	 * decision of the sample its annotation takes, if any) */
	char *pipe = strstr(trace, "\"str\":\"software_pipeline\"");
	if (pipe) {
		char *a = pipe, rv[32], out[48];
		while (a > trace && strncmp(a, "{\"op\":\"annotate\"", strlen("{\"op\":\"annotate\"")))
			a--;
		ck_assert(sscanf(strstr(a, ",\"v") + 2, "%31[^\"]", rv) == 1);
		snprintf(out, sizeof out, "\"out\":[\"%s\"]", rv);
		ck_assert((a = strstr(trace, out)) && (a = strstr(a, "\"decision\":[")));
		a[strlen("\"decision\":[")] = '0';
	}
	set_decision(trace, "sample_categorical", 0, "[0]");    /* no split-K */
	set_decision(trace, "sample_perfect_tile", 0, "[1,4,4]");
	set_decision(trace, "sample_perfect_tile", 1, "[1,1,1]");
	r = tir_sched_new(n32, 1, &err);
	ck_assert_msg(tir_sched_replay(r, trace, &err) == 0, "%s", err.msg);
	ck_assert(tir_verify(tir_sched_program(r), &sm90, &err) < 0);
	ck_assert_msg(strstr(err.msg, "128 accumulator registers a thread, and a block of 512 "
				  "threads has 128"), "%s", err.msg);
	tir_sched_free(r);
	/* one MMA each: 32 accumulators fit */
	set_decision(trace, "sample_perfect_tile", 0, "[4,4,1]");
	r = tir_sched_new(n32, 1, &err);
	ck_assert_msg(tir_sched_replay(r, trace, &err) == 0, "%s", err.msg);
	ck_assert_msg(tir_verify(tir_sched_program(r), &sm90, &err) == 0, "%s", err.msg);
	tir_sched_free(r);
	tir_sched_free(t);
	tir_workload_free(n32);
	free(trace);

	/* a padded shared operand: rows no longer 128-byte atoms */
	const tir_program *p = tir_sched_program(s);
	const tir_block *sh = NULL;
	for (int i = 0; i < p->nblocks && !sh; i++)
		if (p->blocks[i]->stmt && p->blocks[i]->store->scope == TIR_SCOPE_SHARED)
			sh = p->blocks[i];
	ck_assert(sh);
	int b;
	ck_assert((b = tir_get_block(s, sh->name, &err)) >= 0);
	ck_assert_msg(tir_storage_align(s, b, 0, sh->store->ndim - 2, 64, 8, &err) == 0, "%s",
		      err.msg);
	ck_assert(tir_verify(tir_sched_program(s), &sm90, &err) < 0);
	ck_assert_msg(strstr(err.msg, "is padded (storage_align)"), "%s", err.msg);
	tir_sched_free(s);
	tir_workload_free(w);
}
END_TEST

START_TEST(refuse_target_warp_fragments)
{
	tir_workload *w;
	int b, l[3];
	tir_error err = { "" };
	tir_sched *s = fragments(MM16, &w, &b, l);
	ck_assert(tir_decompose_reduction(s, b, l[0], &err) >= 0);
	ck_assert(tir_tensorize(s, l[0], "wmma_mma_16x16x16_f16_f32", &err) >= 0);
	const tir_program *p = tir_sched_program(s);
	ck_assert(tir_verify(p, &cpu, &err) < 0);
	ck_assert_msg(strstr(err.msg, "needs a CUDA target"), "%s", err.msg);
	ck_assert(tir_codegen(p, &cpu, &err) == NULL);
	ck_assert_msg(strstr(err.msg, "tensorized"), "%s", err.msg);
	ck_assert(tir_verify(p, &sm90, &err) < 0);    /* no threads at all */
	tir_sched_free(s);
	tir_workload_free(w);

	/* a valid candidate whose fills are no longer tensorized */
	w = parse("{\"op\":\"matmul\",\"M\":64,\"N\":64,\"K\":64,\"dtype\":\"float16\"}");
	s = tir_sched_new(w, 1, &err);
	ck_assert_msg(sketch_tensorcore_apply(s, &sm90, &err) == 0, "%s", err.msg);
	ck_assert_msg(tir_verify(tir_sched_program(s), &sm90, &err) == 0, "%s", err.msg);
	/* the same with two warps' worth of lanes along threadIdx.x: its
	 * cooperative fetches split [outer, warps, 32, vector] become 64 */
	char *trace = tir_sched_trace(s), *q;
	ck_assert(strstr(trace, ",32,\"v"));
	while ((q = strstr(trace, ",32,\"v")))
		memcpy(q, ",64", 3);
	tir_sched *r = tir_sched_new(w, 1, &err);
	ck_assert_msg(tir_sched_replay(r, trace, &err) == 0, "%s", err.msg);
	ck_assert(tir_verify(tir_sched_program(r), &sm90, &err) < 0);
	ck_assert_msg(strstr(err.msg, "exactly one warp"), "%s", err.msg);
	tir_sched_free(r);
	free(trace);
	drop_tensorize(((tir_program *)tir_sched_program(s))->root, INTRIN_FILL);
	ck_assert(tir_verify(tir_sched_program(s), &sm90, &err) < 0);
	ck_assert_msg(strstr(err.msg, "outside a tensor intrinsic"), "%s", err.msg);
	tir_sched_free(s);
	tir_workload_free(w);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("tensor");
	TCase *tc = tcase_create("tensor");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, tensorcore_candidates, 0, NPRODUCTS);
	tcase_add_loop_test(tc, wgmma_candidates, 0, NPRODUCTS);
	tcase_add_test(tc, int8_row_major_b_not_tensorized);
	tcase_add_test(tc, refuse_init_wrong_extent_wrong_dtype);
	tcase_add_test(tc, refuse_max_min);
	tcase_add_test(tc, refuse_target_warp_fragments);
	tcase_add_test(tc, refuse_wgmma);
	tcase_add_loop_test(tc, tma_candidates, 0, (int)(sizeof tma_products / sizeof *tma_products));
	tcase_add_test(tc, refuse_tma);
	suite_add_tcase(su, tc);
	return tu_run_suite(su);
}
