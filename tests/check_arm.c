/*
 * check_arm.c — AArch64's tensor intrinsics: sdot_4x4x4_i8_i32 (+dotprod)
 * and smmla_2x2x8_i8_i32 (+i8mm) for int8, udot_4x4x4_u8_i32 (+dotprod)
 * for uint8, fmla_4x8x4_f16 (+fp16) for
 * float16 summed in float16, in tensorize, validation, the C backend's
 * NEON code (codegen/c_neon.c) and the cpu-sdot / cpu-udot / cpu-smmla /
 * cpu-fmla sketches.
 *
 * A hand-written schedule of a matmul in the intrinsic's dtypes (split by
 * the tile, the init decomposed, the tile tensorized) is valid on a key
 * with the feature and its code calls the NEON instruction under the ACLE guard; on a key
 * without the feature, or a CUDA key, validation and codegen refuse it by
 * name.  The matcher refuses a wrong extent, a float32 product, a
 * reduction that still has its init, a float16 product summed into
 * float32.  The sketches are offered only where the key has the feature
 * and the block is a product of the intrinsic's dtypes (matmul, conv2d),
 * never to the GPU sketches; their candidates verify, call the intrinsic and replay to the
 * same code; with the annotation dropped (the program below it is the
 * scalar computation) the code runs right on this CPU.  Vectorized float32
 * loops on AArch64 are NEON intrinsics (vfmaq_f32), float16 ones on a key
 * with fp16 too (vfmaq_f16).  x86 keys see none of it.  Whether the NEON
 * code computes the right result on AArch64 is tests/arm.sh's part
 * (cross-compiled, run under qemu).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tir.h"
#include "ir/ir.h"
#include "sched/sched.h"
#include "codegen/codegen.h"
#include "measure/measure.h"
#include "testutil.h"

#define MM8 "{\"op\":\"matmul\",\"M\":8,\"N\":8,\"K\":16,\"dtype\":\"int8\"}"
#define MM64 "{\"op\":\"matmul\",\"M\":64,\"N\":64,\"K\":64,\"dtype\":\"int8\"}"
#define C2D "{\"op\":\"conv2d\",\"N\":1,\"C\":16,\"H\":8,\"W\":8,\"K\":16,\"R\":3,\"S\":3," \
	"\"pad\":1,\"dtype\":\"int8\",\"layout\":\"NHWC\"}"
/* uint8 into int32 (udot_4x4x4_u8_i32) */
#define UMM8 "{\"op\":\"matmul\",\"M\":8,\"N\":8,\"K\":16,\"dtype\":\"uint8\"}"
#define UMM64 "{\"op\":\"matmul\",\"M\":64,\"N\":64,\"K\":64,\"dtype\":\"uint8\"}"
#define UC2D "{\"op\":\"conv2d\",\"N\":1,\"C\":16,\"H\":8,\"W\":8,\"K\":16,\"R\":3,\"S\":3," \
	"\"pad\":1,\"dtype\":\"uint8\",\"layout\":\"NHWC\"}"
/* float16 summed into float16 (fmla_4x8x4_f16), and into float32 (not it) */
#define F16 "\"dtype\":\"float16\",\"out_dtype\":\"float16\"}"
#define HMM8 "{\"op\":\"matmul\",\"M\":8,\"N\":8,\"K\":16," F16
#define HMM64 "{\"op\":\"matmul\",\"M\":64,\"N\":64,\"K\":64," F16
#define HC2D "{\"op\":\"conv2d\",\"N\":1,\"C\":16,\"H\":8,\"W\":8,\"K\":16,\"R\":3,\"S\":3," \
	"\"pad\":1,\"layout\":\"NHWC\"," F16
#define HMM64_F32 "{\"op\":\"matmul\",\"M\":64,\"N\":64,\"K\":64,\"dtype\":\"float16\"}"

static tir_target target(const char *key)
{
	tir_target t;
	tir_error err = { "" };
	ck_assert_msg(tir_target_parse(key, &t, &err) == 0, "%s: %s", key, err.msg);
	return t;
}

static tir_workload *parse(const char *json)
{
	tir_error err = { "" };
	tir_workload *w = tir_workload_parse(json, strlen(json), NULL, &err);
	ck_assert_msg(w, "%s", err.msg);
	return w;
}

/* The int8 matmul of w split by an m x n x k tile, ordered i0 j0 k0 | i1 j1
 * k1, its init decomposed at k0; l[] gets i1 (the tile's outer loop). */
static tir_sched *tiled(const tir_workload *w, int64_t m, int64_t n, int64_t k, bool decompose,
			int *tile)
{
	tir_error err = { "" };
	tir_sched *s = tir_sched_new(w, 1, &err);
	ck_assert_msg(s, "%s", err.msg);
	int b, l[3], i[2], j[2], r[2];
	ck_assert_msg((b = tir_get_block(s, "compute", &err)) >= 0, "%s", err.msg);
	ck_assert_int_eq(tir_get_loops(s, b, l, 3, &err), 3);
	tir_int fm[2] = { TIR_LIT(0), TIR_LIT(m) }, fn[2] = { TIR_LIT(0), TIR_LIT(n) },
		fk[2] = { TIR_LIT(0), TIR_LIT(k) };
	ck_assert(tir_split(s, l[0], 2, fm, i, &err) >= 0);
	ck_assert(tir_split(s, l[1], 2, fn, j, &err) >= 0);
	ck_assert(tir_split(s, l[2], 2, fk, r, &err) >= 0);
	int ord[6] = { i[0], j[0], r[0], i[1], j[1], r[1] };
	ck_assert_msg(tir_reorder(s, 6, ord, &err) >= 0, "%s", err.msg);
	if (decompose)
		ck_assert_msg(tir_decompose_reduction(s, b, r[0], &err) >= 0, "%s", err.msg);
	*tile = i[1];
	return s;
}

/* With the tensorize annotations dropped, the program is the scalar
 * computation: the C backend's code of it runs right here (exactly for
 * integers; float16 within the check's tolerance: the scalar code rounds
 * each step's float sum to float16, twice rounded where the reference
 * rounds once). */
static void scalar_runs_right(const tir_workload *w, tir_sched *s)
{
	tir_error err = { "" };
	tir_target cpu = target("cpu");
	tir_program *p = (tir_program *)tir_sched_program(s);
	for (int v = 0; v < p->nblocks; v++) {
		tir_stmt *q = p->blocks[v]->stmt;
		for (q = q ? q->parent : NULL; q; q = q->parent) {
			int k = 0;
			for (int a = 0; a < q->nann; a++)
				if (strcmp(q->ann[a].key, TIR_TENSORIZE_ANN))
					q->ann[k++] = q->ann[a];
			q->nann = k;
		}
	}
	ck_assert_msg(tir_verify(p, &cpu, &err) == 0, "%s", err.msg);
	tir_code *c = tir_codegen(p, &cpu, &err);
	ck_assert_msg(c, "%s", err.msg);
	ck_assert(!strstr(c->source, "arm_neon"));
	tir_measure_opts o = { .seed = 1, .no_timing = true, .timeout_s = 60 };
	tir_measure_result res;
	memset(&res, 0, sizeof res);
	tir_measure(&tir_runner_cpu, w, c, &cpu, &o, &res);
	bool exact = w->dtype == TIR_I8 || w->dtype == TIR_U8;
	ck_assert_msg(res.status == TIR_MEASURE_OK && (!exact || res.max_rel_error == 0),
		      "%s: %s (error %g)", tir_measure_status_name(res.status), res.msg,
		      res.max_rel_error);
	tir_measure_result_clear(&res);
	tir_code_free(c);
}

/* Each intrinsic: the workload it tiles (8 x 8 x 16, so the strides of
 * the call are the same), a key with its feature, one with the others. */
static const struct {
	const char *intrin, *feature, *key, *other, *guard, *call, *mm;
	int64_t m, n, k;
} dots[] = {
	{ "sdot_4x4x4_i8_i32", "dotprod", "cpu:aarch64+neon+dotprod", "cpu:aarch64+neon+i8mm",
	  "__ARM_FEATURE_DOTPROD", "vdotq_laneq_s32", MM8, 4, 4, 4 },
	{ "smmla_2x2x8_i8_i32", "i8mm", "cpu:aarch64+neon+i8mm", "cpu:aarch64+neon+dotprod",
	  "__ARM_FEATURE_MATMUL_INT8", "vmmlaq_s32", MM8, 2, 2, 8 },
	{ "udot_4x4x4_u8_i32", "dotprod", "cpu:aarch64+neon+dotprod", "cpu:aarch64+neon+fp16+i8mm",
	  "__ARM_FEATURE_DOTPROD", "vdotq_laneq_u32", UMM8, 4, 4, 4 },
	{ "fmla_4x8x4_f16", "fp16", "cpu:aarch64+neon+fp16", "cpu:aarch64+neon+dotprod+i8mm+bf16",
	  "__ARM_FEATURE_FP16_VECTOR_ARITHMETIC", "vfmaq_laneq_f16", HMM8, 4, 8, 4 },
};
#define NDOTS ((int)(sizeof dots / sizeof *dots))

START_TEST(tensorize_and_code)
{
	tir_error err = { "" };
	tir_workload *w = parse(dots[_i].mm);
	int tile;
	tir_sched *s = tiled(w, dots[_i].m, dots[_i].n, dots[_i].k, true, &tile);
	ck_assert_msg(tir_tensorize(s, tile, dots[_i].intrin, &err) >= 0, "%s", err.msg);
	tir_target t = target(dots[_i].key);
	const tir_program *p = tir_sched_program(s);
	ck_assert_msg(tir_verify(p, &t, &err) == 0, "%s", err.msg);
	tir_code *c = tir_codegen(p, &t, &err);
	ck_assert_msg(c, "%s", err.msg);
	char want[96];
	snprintf(want, sizeof want, "#if defined(%s)", dots[_i].guard);
	ck_assert_msg(strstr(c->source, want), "no %s guard", dots[_i].guard);
	ck_assert(strstr(c->source, "#include <arm_neon.h>"));
	ck_assert_msg(strstr(c->source, dots[_i].call), "no %s", dots[_i].call);
	snprintf(want, sizeof want, "tir_%s(&C[", dots[_i].intrin);
	ck_assert_msg(strstr(c->source, want), "no call %s in\n%s", want, c->source);
	/* C is 8 wide, A 16 (K), B 8 (N): the strides of the call */
	ck_assert_msg(strstr(c->source, "], 8, 1, &A[") && strstr(c->source, "], 16, 1, &B[") &&
		      strstr(c->source, "], 8, 1);"), "strides: %s", strstr(c->source, want));
	tir_code_free(c);
	scalar_runs_right(w, s);
	tir_sched_free(s);
	tir_workload_free(w);
}
END_TEST

/* A key without the feature, another with it only, a CUDA key. */
START_TEST(refuse_target)
{
	tir_error err = { "" };
	tir_workload *w = parse(dots[_i].mm);
	int tile;
	tir_sched *s = tiled(w, dots[_i].m, dots[_i].n, dots[_i].k, true, &tile);
	ck_assert(tir_tensorize(s, tile, dots[_i].intrin, &err) >= 0);
	const tir_program *p = tir_sched_program(s);
	const char *keys[] = { "cpu:aarch64+neon", dots[_i].other, "cpu:x86_64+avx2+fma" };
	for (int k = 0; k < 3; k++) {
		tir_target t = target(keys[k]);
		char want[160];
		snprintf(want, sizeof want, "%s needs +%s; target %s has not", dots[_i].intrin,
			 dots[_i].feature, keys[k]);
		ck_assert(tir_verify(p, &t, &err) < 0);
		ck_assert_msg(strstr(err.msg, want), "verify on %s: %s", keys[k], err.msg);
		ck_assert(!tir_codegen(p, &t, &err));
		ck_assert_msg(strstr(err.msg, want) && strstr(err.msg, "codegen"), "codegen on %s: %s",
			      keys[k], err.msg);
	}
	tir_target sm90 = target("cuda:sm_90");
	ck_assert(tir_verify(p, &sm90, &err) < 0);
	ck_assert_msg(strstr(err.msg, "a CPU intrinsic; target cuda:sm_90 is not a CPU"), "%s",
		      err.msg);
	tir_sched_free(s);
	tir_workload_free(w);
}
END_TEST

START_TEST(refuse_match)
{
	tir_error err = { "" };
	tir_workload *w = parse(MM8);
	int tile;
	/* a tile of 8 rows, not 4 */
	tir_sched *s = tiled(w, 8, 4, 4, true, &tile);
	ck_assert(tir_tensorize(s, tile, "sdot_4x4x4_i8_i32", &err) < 0);
	ck_assert_msg(strstr(err.msg, "has extent 8, sdot_4x4x4_i8_i32 needs 4"), "%s", err.msg);
	tir_sched_free(s);
	/* the init still in the block */
	s = tiled(w, 4, 4, 4, false, &tile);
	ck_assert(tir_tensorize(s, tile, "sdot_4x4x4_i8_i32", &err) < 0);
	ck_assert_msg(strstr(err.msg, "still has its init"), "%s", err.msg);
	tir_sched_free(s);
	tir_workload_free(w);
	/* a float32 product */
	w = parse("{\"op\":\"matmul\",\"M\":8,\"N\":8,\"K\":16}");
	s = tiled(w, 2, 2, 8, true, &tile);
	ck_assert(tir_tensorize(s, tile, "smmla_2x2x8_i8_i32", &err) < 0);
	ck_assert_msg(strstr(err.msg, "does not match smmla_2x2x8_i8_i32: the dtype of C"), "%s",
		      err.msg);
	tir_sched_free(s);
	tir_workload_free(w);
	/* float16 summed into float32: fmla would round each step to float16 */
	w = parse("{\"op\":\"matmul\",\"M\":8,\"N\":8,\"K\":16,\"dtype\":\"float16\"}");
	s = tiled(w, 4, 8, 4, true, &tile);
	ck_assert(tir_tensorize(s, tile, "fmla_4x8x4_f16", &err) < 0);
	ck_assert_msg(strstr(err.msg, "does not match fmla_4x8x4_f16: the dtype of C"), "%s",
		      err.msg);
	tir_sched_free(s);
	tir_workload_free(w);
	/* int8 operands cast to int32: not float16's casts */
	w = parse(MM8);
	s = tiled(w, 4, 8, 4, true, &tile);
	ck_assert(tir_tensorize(s, tile, "fmla_4x8x4_f16", &err) < 0);
	ck_assert_msg(strstr(err.msg, "does not match fmla_4x8x4_f16: "), "%s", err.msg);
	tir_sched_free(s);
	tir_workload_free(w);
}
END_TEST

/* Whether sketch `name` is among those of w on key. */
static int sketch_id(const tir_workload *w, const char *key, const char *name)
{
	tir_target t = target(key);
	tir_sketch sk[TIR_MAX_SKETCHES];
	tir_error err = { "" };
	int n = tir_sketches(w, &t, sk, TIR_MAX_SKETCHES, &err);
	ck_assert_msg(n > 0, "%s", err.msg);
	for (int i = 0; i < n; i++)
		if (!strcmp(sk[i].name, name))
			return sk[i].id;
	return -1;
}

START_TEST(sketches_offered)
{
	tir_workload *w = parse(MM64), *f = parse("{\"op\":\"matmul\",\"M\":64,\"N\":64,\"K\":64}");
	ck_assert(sketch_id(w, "cpu:aarch64+neon+dotprod", "cpu-sdot") >= 0);
	ck_assert(sketch_id(w, "cpu:aarch64+neon+dotprod", "cpu-smmla") < 0);
	ck_assert(sketch_id(w, "cpu:aarch64+neon+dotprod+i8mm", "cpu-smmla") >= 0);
	ck_assert(sketch_id(w, "cpu:aarch64+neon+dotprod+i8mm+emulated", "cpu-sdot") >= 0);
	ck_assert(sketch_id(w, "cpu:aarch64+neon", "cpu-sdot") < 0);
	ck_assert(sketch_id(w, "cpu:x86_64+avx2+fma", "cpu-sdot") < 0);
	ck_assert(sketch_id(w, "cpu:x86_64+avx2+fma", "cpu-smmla") < 0);
	ck_assert(sketch_id(f, "cpu:aarch64+neon+dotprod+i8mm", "cpu-sdot") < 0);   /* float32 */
	ck_assert(sketch_id(f, "cpu:aarch64+neon+dotprod+i8mm", "cpu-smmla") < 0);
	ck_assert(sketch_id(w, "cpu:aarch64+neon+dotprod+fp16+i8mm", "cpu-fmla") < 0);  /* int8 */
	ck_assert(sketch_id(w, "cpu:aarch64+neon+dotprod", "cpu-udot") < 0);
	tir_workload *u = parse(UMM64), *uc = parse(UC2D);
	ck_assert(sketch_id(u, "cpu:aarch64+neon+dotprod", "cpu-udot") >= 0);
	ck_assert(sketch_id(uc, "cpu:aarch64+neon+dotprod", "cpu-udot") >= 0);
	ck_assert(sketch_id(u, "cpu:aarch64+neon+dotprod+i8mm", "cpu-sdot") < 0);   /* uint8 */
	ck_assert(sketch_id(u, "cpu:aarch64+neon+dotprod+i8mm", "cpu-smmla") < 0);
	ck_assert(sketch_id(u, "cpu:aarch64+neon+fp16+i8mm", "cpu-udot") < 0);
	ck_assert(sketch_id(u, "cpu:x86_64+avx2+fma", "cpu-udot") < 0);
	ck_assert(sketch_id(u, "cuda:sm_80", "gpu-tensorcore") < 0);
	tir_workload_free(u);
	tir_workload_free(uc);
	tir_workload_free(w);
	tir_workload_free(f);
	/* cpu-fmla: float16 into float16 on a key with fp16; float16 into float32
	 * is not its product (refuse_match); CUDA's sketches do not take the CPU
	 * intrinsic for theirs */
	tir_workload *h = parse(HMM64), *hf = parse(HMM64_F32), *hc = parse(HC2D);
	ck_assert(sketch_id(h, "cpu:aarch64+neon+fp16", "cpu-fmla") >= 0);
	ck_assert(sketch_id(hc, "cpu:aarch64+neon+fp16", "cpu-fmla") >= 0);
	ck_assert(sketch_id(h, "cpu:aarch64+neon+dotprod+fp16+i8mm+emulated", "cpu-fmla") >= 0);
	ck_assert(sketch_id(h, "cpu:aarch64+neon+fp16", "cpu-sdot") < 0);
	ck_assert(sketch_id(h, "cpu:aarch64+neon+dotprod+i8mm", "cpu-fmla") < 0);
	ck_assert(sketch_id(h, "cpu:aarch64+neon", "cpu-fmla") < 0);
	ck_assert(sketch_id(h, "cpu:x86_64+avx2+fma", "cpu-fmla") < 0);
	ck_assert(sketch_id(hf, "cpu:aarch64+neon+fp16", "cpu-fmla") < 0);
	ck_assert(sketch_id(h, "cuda:sm_90", "gpu-tensorcore") < 0);
	ck_assert(sketch_id(h, "cuda:sm_90", "gpu-wgmma") < 0);
	ck_assert(sketch_id(hf, "cuda:sm_90", "gpu-wgmma") >= 0);
	tir_workload_free(h);
	tir_workload_free(hf);
	tir_workload_free(hc);
}
END_TEST

/* cpu-sdot, cpu-smmla and cpu-fmla candidates of a matmul and a conv2d of
 * their dtypes: valid, calling the intrinsic, the same code after replay,
 * right as scalar code. */
static const struct { const char *sketch, *call, *workload; } candidates[] = {
	{ "cpu-sdot", "tir_sdot_4x4x4_i8_i32(", MM64 },
	{ "cpu-smmla", "tir_smmla_2x2x8_i8_i32(", MM64 },
	{ "cpu-sdot", "tir_sdot_4x4x4_i8_i32(", C2D },
	{ "cpu-smmla", "tir_smmla_2x2x8_i8_i32(", C2D },
	{ "cpu-udot", "tir_udot_4x4x4_u8_i32(", UMM64 },
	{ "cpu-udot", "tir_udot_4x4x4_u8_i32(", UC2D },
	{ "cpu-fmla", "tir_fmla_4x8x4_f16(", HMM64 },
	{ "cpu-fmla", "tir_fmla_4x8x4_f16(", HC2D },
};

START_TEST(sketch_candidates)
{
	const char *key = "cpu:aarch64+neon+dotprod+fp16+i8mm", *name = candidates[_i].sketch;
	const char *call = candidates[_i].call;
	tir_workload *w = parse(candidates[_i].workload);
	tir_target t = target(key);
	int id = sketch_id(w, key, name);
	ck_assert_msg(id >= 0, "%s not offered", name);
	tir_error err = { "" };
	for (uint64_t seed = 1; seed <= 2; seed++) {
		tir_sched *s = tir_sched_new(w, seed, &err);
		ck_assert_msg(tir_sketch_apply(w, &t, id, s, &err) == 0, "%s seed %llu: %s", name,
			      (unsigned long long)seed, err.msg);
		ck_assert_msg(tir_verify(tir_sched_program(s), &t, &err) == 0, "%s seed %llu: %s",
			      name, (unsigned long long)seed, err.msg);
		tir_code *c = tir_codegen(tir_sched_program(s), &t, &err);
		ck_assert_msg(c && strstr(c->source, call), "%s: %s", name, c ? "no call" : err.msg);
		char *trace = tir_sched_trace(s);
		tir_sched *r = tir_sched_new(w, 999, &err);
		ck_assert_msg(tir_sched_replay(r, trace, &err) == 0, "replay: %s", err.msg);
		tir_code *rc = tir_codegen(tir_sched_program(r), &t, &err);
		ck_assert_msg(rc && !strcmp(rc->source, c->source), "%s: replay differs", name);
		tir_code_free(rc);
		tir_sched_free(r);
		free(trace);
		tir_code_free(c);
		if (seed == 1)
			scalar_runs_right(w, s);
		tir_sched_free(s);
	}
	tir_workload_free(w);
}
END_TEST

/* x86 keys: no AArch64 sketch, no NEON in any sampled candidate's code,
 * of the int8, uint8 and float16 matmuls. */
START_TEST(x86_untouched)
{
	static const char *const mms[] = { MM64, UMM64, HMM64 };
	tir_workload *w = parse(mms[_i]);
	tir_target t = target("cpu:x86_64+avx2+fma");
	tir_error err = { "" };
	tir_sched *c[4];
	int n = tir_sample_candidates(w, &t, 4, 1, c, &err);
	ck_assert_msg(n == 4, "%s", err.msg);
	for (int i = 0; i < n; i++) {
		tir_code *code = tir_codegen(tir_sched_program(c[i]), &t, &err);
		ck_assert_msg(code, "%s", err.msg);
		ck_assert(!strstr(code->source, "arm_neon") && !strstr(code->source, "tir_sdot") &&
			  !strstr(code->source, "tir_smmla") && !strstr(code->source, "tir_udot") &&
			  !strstr(code->source, "tir_fmla") && !strstr(code->source, "float16x8_t"));
		tir_code_free(code);
		tir_sched_free(c[i]);
	}
	tir_workload_free(w);
}
END_TEST

/* Vectorized float32 loops on AArch64: NEON intrinsics in every sampled
 * candidate of a float32 matmul (its vector tiles are multiples of 4), the
 * same program's x86 code without them. */
START_TEST(neon_float32)
{
	tir_workload *w = parse("{\"op\":\"matmul\",\"M\":64,\"N\":64,\"K\":64}");
	tir_target arm = target("cpu:aarch64+neon"), x86 = target("cpu:x86_64+avx2+fma");
	tir_error err = { "" };
	tir_sched *c[4];
	int n = tir_sample_candidates(w, &arm, 4, 1, c, &err);
	ck_assert_msg(n == 4, "%s", err.msg);
	for (int i = 0; i < n; i++) {
		tir_code *a = tir_codegen(tir_sched_program(c[i]), &arm, &err);
		ck_assert_msg(a, "%s", err.msg);
		ck_assert_msg(strstr(a->source, "#include <arm_neon.h>") &&
			      strstr(a->source, "vst1q_f32(tir_dst, vfmaq_f32(vld1q_f32(tir_dst), ") &&
			      strstr(a->source, "NEON float32x4_t"), "candidate %d:\n%s", i, a->source);
		tir_code *x = tir_codegen(tir_sched_program(c[i]), &x86, &err);
		ck_assert_msg(x, "%s", err.msg);
		ck_assert(!strstr(x->source, "arm_neon") && !strstr(x->source, "vfmaq_f32") &&
			  strstr(x->source, "#pragma omp simd"));
		tir_code_free(a);
		tir_code_free(x);
		tir_sched_free(c[i]);
	}
	tir_workload_free(w);
}
END_TEST

/* Vectorized float16 loops on an AArch64 key with fp16: NEON float16x8_t
 * (vfmaq_f16, FMLA on .8h) in every sampled candidate of a float16 matmul
 * summed in float16 that cpu-fmla does not tensorize, under the ACLE guard;
 * on a key without fp16, and for a float16 product summed in float32 (its
 * block stores float32 from float16 loads), omp simd as before. */
START_TEST(neon_float16)
{
	tir_workload *w = parse(HMM64), *wf = parse(HMM64_F32);
	tir_target fp16 = target("cpu:aarch64+neon+fp16"), neon = target("cpu:aarch64+neon");
	tir_error err = { "" };
	tir_sched *c[6];
	int n = tir_sample_candidates(w, &fp16, 6, 1, c, &err), nvec = 0;
	ck_assert_msg(n == 6, "%s", err.msg);
	for (int i = 0; i < n; i++) {
		tir_code *a = tir_codegen(tir_sched_program(c[i]), &fp16, &err);
		ck_assert_msg(a, "%s", err.msg);
		if (!strstr(a->source, "tir_fmla_4x8x4_f16(&")) {
			nvec++;
			ck_assert_msg(strstr(a->source, "#if !defined(__ARM_FEATURE_FP16_VECTOR_ARITHMETIC)") &&
				      strstr(a->source, "vst1q_u16(tir_dst, vreinterpretq_u16_f16(vfmaq_f16("
						 "vreinterpretq_f16_u16(vld1q_u16(tir_dst)), ") &&
				      strstr(a->source, "NEON float16x8_t"), "candidate %d:\n%s", i,
				      a->source);
		}
		tir_code *x = tir_codegen(tir_sched_program(c[i]), &neon, &err);
		ck_assert(!x || (!strstr(x->source, "float16x8_t") && !strstr(x->source, "vfmaq_f16")));
		tir_code_free(x);
		tir_code_free(a);
		tir_sched_free(c[i]);
	}
	ck_assert_msg(nvec > 0, "every candidate tensorized: no vector loop seen");
	n = tir_sample_candidates(wf, &fp16, 4, 1, c, &err);
	ck_assert_msg(n == 4, "%s", err.msg);
	for (int i = 0; i < n; i++) {
		tir_code *a = tir_codegen(tir_sched_program(c[i]), &fp16, &err);
		ck_assert_msg(a, "%s", err.msg);
		ck_assert_msg(!strstr(a->source, "vfmaq_f16") && strstr(a->source, "#pragma omp simd"),
			      "float16 into float32, candidate %d:\n%s", i, a->source);
		tir_code_free(a);
		tir_sched_free(c[i]);
	}
	tir_workload_free(w);
	tir_workload_free(wf);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("arm");
	TCase *tc = tcase_create("arm");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, tensorize_and_code, 0, NDOTS);
	tcase_add_loop_test(tc, refuse_target, 0, NDOTS);
	tcase_add_test(tc, refuse_match);
	tcase_add_test(tc, sketches_offered);
	tcase_add_loop_test(tc, sketch_candidates, 0,
			    (int)(sizeof candidates / sizeof *candidates));
	tcase_add_loop_test(tc, x86_untouched, 0, 3);
	tcase_add_test(tc, neon_float32);
	tcase_add_test(tc, neon_float16);
	suite_add_tcase(su, tc);
	return tu_run_suite(su);
}
