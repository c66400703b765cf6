/*
 * check_codegen.c — the code generators, checked by running what they emit.
 *
 * C: each program's generated file is compiled with the system compiler
 * (cc -O2 -fopenmp -shared -fPIC) into a temporary directory, dlopen'ed, run
 * on random inputs and compared with tir_reference() (measurement's
 * reference: the unscheduled program run by the IR's interpreter in double
 * precision, ir/interp.c, written from the IR's semantics and checked
 * against the hand-written reference in check_interp).  CUDA: the generated
 * source must compile with NVRTC for sm_90 when libtir has CUDA; without it
 * only generation is checked.  Both for unscheduled programs of every
 * operator and layout, and for scheduled ones (a tiled CPU trace, a GPU trace
 * with shared-memory stages and cooperative fetch).
 *
 * Error metric: err = max_i |out_i - ref_i| / max(1, max_i |ref_i|), the
 * largest error relative to the output's scale.  A float32 sum of n terms
 * has an error bounded by about n * eps * sum |terms|, which for random
 * inputs in [-1, 1] is of the order of the output's scale, so normalising by
 * max |ref| (not by each |ref_i|, which may be near 0 after cancellation) is
 * sound.  Bounds: 1e-5 for float32, 1e-2 when float16 / bfloat16 is the
 * input or output type (3e-2 when bfloat16, with its 8-bit significand, is
 * the accumulation type), 0 (exact) for int8 with int32 accumulation.  Inputs
 * are multiples of 1/32 in [-1, 1] (integers in [-8, 8] for int8), exactly
 * representable in every type, so reference and candidate see the same
 * numbers.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tir.h"
#include "ir/ir.h"
#include "codegen/codegen.h"
#include "sched/sched.h"
#include "measure/measure.h"
#include "testutil.h"
#include "schedules.h"
#include "reducers.h"

#ifndef TIR_SYSTEM_CC
#define TIR_SYSTEM_CC "cc"
#endif
#ifndef TIR_OPENMP_CFLAGS
#define TIR_OPENMP_CFLAGS "-fopenmp"
#endif

/* ---- helpers ----------------------------------------------------------------- */

static tir_workload *parse(const char *json)
{
	tir_error err;
	tir_workload *w = tir_workload_parse(json, strlen(json), NULL, &err);
	ck_assert_msg(w, "workload %s: %s", json, err.msg);
	return w;
}

static tir_target target(const char *key)
{
	tir_target t;
	tir_error err;
	ck_assert_msg(tir_target_parse(key, &t, &err) == 0, "target %s: %s", key, err.msg);
	return t;
}

static double f16_to_double(uint16_t h)
{
	int e = (h >> 10) & 0x1f, m = h & 0x3ff;
	double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY)
		 : ldexp(m + 1024, e - 25);
	return (h & 0x8000) ? -v : v;
}

/* Exact for the inputs used here (multiples of 1/32 in [-1, 1]). */
static uint16_t double_to_f16(double v)
{
	uint16_t s = v < 0 ? 0x8000 : 0;
	v = fabs(v);
	if (v == 0)
		return s;
	int e;
	double m = frexp(v, &e);          /* v = m * 2^e, m in [0.5, 1) */
	int he = e - 1 + 15;
	return (uint16_t)(s | (he << 10) | ((int)lrint((m * 2 - 1) * 1024) & 0x3ff));
}

static double bf16_to_double(uint16_t h)
{
	uint32_t x = (uint32_t)h << 16;
	float f;
	memcpy(&f, &x, 4);
	return f;
}

static uint16_t double_to_bf16(double v)
{
	float f = (float)v;
	uint32_t x;
	memcpy(&x, &f, 4);
	return (uint16_t)(x >> 16);
}

static void put(void *p, int dtype, int64_t i, double v)
{
	switch (dtype) {
	case TIR_F32: ((float *)p)[i] = (float)v; break;
	case TIR_F16: ((uint16_t *)p)[i] = double_to_f16(v); break;
	case TIR_BF16: ((uint16_t *)p)[i] = double_to_bf16(v); break;
	case TIR_I8: ((int8_t *)p)[i] = (int8_t)v; break;
	case TIR_I32: ((int32_t *)p)[i] = (int32_t)v; break;
	default: ck_abort_msg("unexpected dtype %d", dtype);
	}
}

static double get(const void *p, int dtype, int64_t i)
{
	switch (dtype) {
	case TIR_F32: return ((const float *)p)[i];
	case TIR_F16: return f16_to_double(((const uint16_t *)p)[i]);
	case TIR_BF16: return bf16_to_double(((const uint16_t *)p)[i]);
	case TIR_I8: return ((const int8_t *)p)[i];
	case TIR_I32: return ((const int32_t *)p)[i];
	default: ck_abort_msg("unexpected dtype %d", dtype);
	}
	return 0;
}

static uint64_t rng_state;

static double rnd(int dtype)
{
	rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
	int r = (int)((rng_state >> 33) % 65);      /* 0..64 */
	if (dtype == TIR_I8)
		return (r % 17) - 8;
	return (r - 32) / 32.0;
}

typedef int (*entry_fn)(void *const *);

/* Compiles C source into a shared object and returns its tir_entry; *handle
 * gets the dlopen handle.  The files are removed once loaded. */
static entry_fn build_c(const char *src, void **handle)
{
	char dir[] = "/tmp/tir_check_codegen_XXXXXX";
	ck_assert(mkdtemp(dir));
	char c[128], so[128], log[128], cmd[768];
	snprintf(c, sizeof c, "%s/gen.c", dir);
	snprintf(so, sizeof so, "%s/gen.so", dir);
	snprintf(log, sizeof log, "%s/cc.log", dir);
	FILE *f = fopen(c, "w");
	ck_assert(f);
	fputs(src, f);
	fclose(f);
	snprintf(cmd, sizeof cmd, "%s -std=gnu11 -O2 %s -shared -fPIC -o %s %s -lm > %s 2>&1",
		 TIR_SYSTEM_CC, TIR_OPENMP_CFLAGS, so, c, log);
	int rc = system(cmd);
	if (rc != 0) {
		char *l = tir_read_file(log, 0, NULL);
		fprintf(stderr, "%s\n---\n%s\n", src, l ? l : "");
		ck_abort_msg("generated C does not compile (%s): %.300s", cmd, l ? l : "");
	}
	/* NODELETE: unloading the object would unload libgomp under its idle
	 * worker threads */
	*handle = dlopen(so, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	ck_assert_msg(*handle, "dlopen: %s", dlerror());
	entry_fn fn = (entry_fn)dlsym(*handle, "tir_entry");
	ck_assert(fn);
	if (getenv("TIR_CHECK_KEEP")) {       /* for debugging: keep the files */
		fprintf(stderr, "kept %s\n", c);
		return fn;
	}
	unlink(c);
	unlink(so);
	unlink(log);
	rmdir(dir);
	return fn;
}

/* Runs the C code of p (the program of workload w) on random inputs and
 * returns the error against the reference (see the top comment). */
static double run_c_against_reference(const tir_workload *w, const tir_program *p)
{
	tir_target t = target("cpu");
	tir_error err;
	tir_code *code = tir_codegen(p, &t, &err);
	ck_assert_msg(code, "codegen: %s", err.msg);
	ck_assert_str_eq(code->entry, "tir_entry");
	void *h;
	entry_fn fn = build_c(code->source, &h);

	tir_ref_arg ra[TIR_REF_MAX_ARGS];
	int n = tir_reference_args(w, ra, TIR_REF_MAX_ARGS, &err);
	ck_assert_msg(n == code->nargs, "reference has %d args, code %d", n, code->nargs);
	void *args[TIR_REF_MAX_ARGS];
	double *dargs[TIR_REF_MAX_ARGS];
	rng_state = 12345;
	for (int i = 0; i < n; i++) {
		const tir_arg_info *ai = &code->args[i];
		ck_assert_int_eq(ai->elems, ra[i].elems);
		ck_assert_int_eq(ai->is_output, ra[i].is_output);
		ck_assert(!ai->is_scratch);
		args[i] = calloc((size_t)ai->elems, (size_t)ai->elem_bytes);
		dargs[i] = calloc((size_t)ai->elems, sizeof(double));
		for (int64_t k = 0; k < ai->elems; k++) {
			/* the output is filled with garbage: the code must not read it
			 * before writing */
			double v = rnd(ai->dtype);
			put(args[i], ai->dtype, k, ai->is_output ? 77 : v);
			dargs[i][k] = get(args[i], ai->dtype, k);
		}
	}
	ck_assert_int_eq(fn(args), 0);
	ck_assert_msg(tir_reference(w, dargs, &err) == 0, "%s", err.msg);
	const tir_arg_info *out = &code->args[n - 1];
	double maxref = 1, maxerr = 0;
	for (int64_t k = 0; k < out->elems; k++) {
		double r = dargs[n - 1][k], a = get(args[n - 1], out->dtype, k);
		if (fabs(r) > maxref)
			maxref = fabs(r);
		if (!(fabs(a - r) <= maxerr))          /* NaN counts as infinite */
			maxerr = isnan(a) ? INFINITY : fabs(a - r);
	}
	for (int i = 0; i < n; i++) {
		free(args[i]);
		free(dargs[i]);
	}
	dlclose(h);
	tir_code_free(code);
	return maxerr / maxref;
}

static double tolerance(const tir_workload *w)
{
	if (w->dtype == TIR_I8)
		return 0;
	if (w->out_dtype == TIR_BF16)   /* 8-bit significand, rounded at each step */
		return 3e-2;
	if (w->dtype == TIR_F16 || w->dtype == TIR_BF16 || w->out_dtype == TIR_F16)
		return 1e-2;
	return 1e-5;
}

/* CUDA source for p compiles with NVRTC (when libtir has CUDA). */
static void check_cuda_compiles(const tir_program *p, const char *what)
{
	tir_target t = target("cuda:sm_90");
	tir_error err;
	tir_code *code = tir_codegen(p, &t, &err);
	ck_assert_msg(code, "%s: cuda codegen: %s", what, err.msg);
	ck_assert(code->nlaunches >= 1);
	ck_assert(strstr(code->source, "extern \"C\" __global__"));
	for (int i = 0; i < code->nlaunches; i++)
		ck_assert_msg(strstr(code->source, code->launches[i].name),
			      "kernel %s not in the source", code->launches[i].name);
#ifdef HAVE_CUDA
	char *cubin = NULL;
	size_t size = 0;
	int rc = tir_nvrtc_compile(code->source, 90, &cubin, &size, &err);
	if (rc != 0)
		fprintf(stderr, "%s\n", code->source);
	ck_assert_msg(rc == 0, "%s: nvrtc: %s", what, err.msg);
	ck_assert(size > 0);
	free(cubin);
#endif
	tir_code_free(code);
}

/* ---- unscheduled programs ------------------------------------------------------- */

static const char *const workloads[] = {
	"{\"op\":\"matmul\",\"M\":33,\"N\":17,\"K\":19}",
	"{\"op\":\"matmul\",\"M\":16,\"N\":24,\"K\":40,\"layout\":\"NT\",\"batch\":2}",
	"{\"op\":\"matmul\",\"M\":12,\"N\":20,\"K\":28,\"layout\":\"TN\",\"epilogue\":[\"bias\",\"gelu\",\"add\"]}",
	"{\"op\":\"matmul\",\"M\":8,\"N\":16,\"K\":24,\"batch\":3,\"epilogue\":[\"relu\"]}",
	"{\"op\":\"conv1d\",\"N\":2,\"C\":4,\"W\":17,\"K\":6,\"S\":3,\"stride\":2,\"pad\":1,\"dilation\":2,\"groups\":2}",
	"{\"op\":\"conv1d\",\"N\":1,\"C\":6,\"W\":16,\"K\":8,\"S\":3,\"pad\":[2,1],\"layout\":\"NWC\",\"epilogue\":[\"bias\"]}",
	"{\"op\":\"conv2d\",\"N\":1,\"C\":4,\"H\":9,\"W\":8,\"K\":6,\"R\":3,\"S\":2,\"stride\":[2,1],\"pad\":[1,2,0,1],\"dilation\":[1,2],\"groups\":2,\"epilogue\":[\"bias\",\"relu\"]}",
	"{\"op\":\"conv2d\",\"N\":2,\"C\":5,\"H\":7,\"W\":7,\"K\":4,\"R\":3,\"S\":3,\"stride\":2,\"pad\":1,\"layout\":\"NHWC\",\"epilogue\":[\"add\"]}",
	"{\"op\":\"conv2d\",\"N\":1,\"C\":8,\"H\":6,\"W\":6,\"K\":8,\"R\":1,\"S\":1}",
	"{\"op\":\"conv3d\",\"N\":1,\"C\":3,\"D\":5,\"H\":6,\"W\":5,\"K\":4,\"T\":3,\"R\":3,\"S\":2,\"pad\":1,\"stride\":[1,2,1]}",
	"{\"op\":\"conv3d\",\"N\":1,\"C\":4,\"D\":4,\"H\":5,\"W\":6,\"K\":4,\"T\":2,\"R\":3,\"S\":3,\"pad\":1,\"groups\":2,\"layout\":\"NDHWC\"}",
	"{\"op\":\"depthwise_conv2d\",\"N\":1,\"C\":4,\"H\":8,\"W\":7,\"R\":3,\"S\":3,\"pad\":1,\"multiplier\":2}",
	"{\"op\":\"depthwise_conv2d\",\"N\":2,\"C\":6,\"H\":9,\"W\":9,\"R\":3,\"S\":3,\"stride\":2,\"layout\":\"NHWC\"}",
	"{\"op\":\"conv2d_transpose\",\"N\":1,\"C\":4,\"H\":5,\"W\":4,\"K\":6,\"R\":3,\"S\":3,\"stride\":2,\"pad\":1,\"output_padding\":1,\"groups\":2}",
	"{\"op\":\"conv2d_transpose\",\"N\":1,\"C\":3,\"H\":4,\"W\":5,\"K\":4,\"R\":2,\"S\":3,\"stride\":[2,1],\"layout\":\"NHWC\"}",
	"{\"op\":\"matmul\",\"M\":16,\"N\":16,\"K\":32,\"dtype\":\"float16\"}",
	"{\"op\":\"matmul\",\"M\":16,\"N\":8,\"K\":16,\"dtype\":\"float16\",\"out_dtype\":\"float16\",\"epilogue\":[\"bias\",\"relu\"]}",
	"{\"op\":\"conv2d\",\"N\":1,\"C\":4,\"H\":6,\"W\":6,\"K\":4,\"R\":3,\"S\":3,\"pad\":1,\"dtype\":\"bfloat16\",\"out_dtype\":\"bfloat16\"}",
	"{\"op\":\"matmul\",\"M\":16,\"N\":12,\"K\":64,\"dtype\":\"int8\",\"epilogue\":[\"bias\",\"relu\"]}",
	"{\"op\":\"conv2d\",\"N\":1,\"C\":8,\"H\":6,\"W\":6,\"K\":4,\"R\":3,\"S\":3,\"pad\":1,\"dtype\":\"int8\",\"layout\":\"NHWC\"}",
};
#define NWORKLOADS ((int)(sizeof workloads / sizeof workloads[0]))

START_TEST(test_c_unscheduled)
{
	tir_workload *w = parse(workloads[_i]);
	tir_error err;
	tir_program *p = tir_program_build(w, &err);
	ck_assert_msg(p, "build: %s", err.msg);
	double e = run_c_against_reference(w, p);
	ck_assert_msg(e <= tolerance(w), "%s: error %g > %g", workloads[_i], e, tolerance(w));
	tir_program_free(p);
	tir_workload_free(w);
}
END_TEST

START_TEST(test_cuda_unscheduled)
{
	tir_workload *w = parse(workloads[_i]);
	tir_error err;
	tir_program *p = tir_program_build(w, &err);
	ck_assert_msg(p, "build: %s", err.msg);
	check_cuda_compiles(p, workloads[_i]);
	tir_program_free(p);
	tir_workload_free(w);
}
END_TEST

static int occurrences(const char *s, const char *what)
{
	int n = 0;
	for (const char *q = s; (q = strstr(q, what)); q += strlen(what))
		n++;
	return n;
}

/* A value that repeats an inlined expression computes it once: t = x + b
 * read three times by y = t * sigmoid(t) + t * t (inlined into y's block)
 * is one declaration, tir_cse0, in C and in CUDA; and the result is right. */
START_TEST(test_cse)
{
	tir_workload *w = parse("{\"op\":\"graph\",\"inputs\":{\"x\":{\"shape\":[37]},"
				"\"b\":{\"shape\":[37]}},\"nodes\":["
				"{\"name\":\"t\",\"op\":\"add\",\"args\":[\"x\",\"b\"]},"
				"{\"name\":\"s\",\"op\":\"sigmoid\",\"args\":[\"t\"]},"
				"{\"name\":\"u\",\"op\":\"mul\",\"args\":[\"t\",\"s\"]},"
				"{\"name\":\"v\",\"op\":\"mul\",\"args\":[\"t\",\"t\"]},"
				"{\"name\":\"y\",\"op\":\"add\",\"args\":[\"u\",\"v\"]}],"
				"\"outputs\":[\"y\"]}");
	tir_error err;
	tir_program *p = tir_program_build(w, &err);
	ck_assert_msg(p, "build: %s", err.msg);
	const char *keys[] = { "cpu", "cuda:sm_90" };
	for (int k = 0; k < 2; k++) {
		tir_target t = target(keys[k]);
		tir_code *c = tir_codegen(p, &t, &err);
		ck_assert_msg(c, "%s: %s", keys[k], err.msg);
		ck_assert_msg(occurrences(c->source, "tir_cse0 = (x[") == 1 &&
			      occurrences(c->source, "x[") == 1 && !strstr(c->source, "tir_cse1"),
			      "%s: x + b not computed once:\n%s", keys[k], c->source);
		tir_code_free(c);
	}
	double e = run_c_against_reference(w, p);
	ck_assert_msg(e <= tolerance(w), "error %g > %g", e, tolerance(w));
	tir_program_free(p);
	tir_workload_free(w);
}
END_TEST

/* The generated C of a small program, byte for byte. */
START_TEST(test_c_golden)
{
	tir_workload *w = parse("{\"op\":\"matmul\",\"M\":4,\"N\":6,\"K\":8,\"epilogue\":[\"bias\",\"relu\"]}");
	tir_error err;
	tir_program *p = tir_program_build(w, &err);
	tir_target t = target("cpu");
	tir_code *c = tir_codegen(p, &t, &err);
	ck_assert_msg(c, "%s", err.msg);
	ck_assert(tu_golden_check("codegen_matmul_bias_relu.c", c->source));
	tir_code_free(c);
	tir_target g = target("cuda:sm_90");
	c = tir_codegen(p, &g, &err);
	ck_assert_msg(c, "%s", err.msg);
	ck_assert(tu_golden_check("codegen_matmul_bias_relu.cu", c->source));
	ck_assert_int_eq(c->nlaunches, 2);
	ck_assert_int_eq(c->nargs, 5);           /* A, B, bias, C, scratch C_acc */
	ck_assert(c->args[4].is_scratch);
	ck_assert(c->args[3].is_output);
	tir_code_free(c);
	tir_program_free(p);
	tir_workload_free(w);
}
END_TEST

/* floor division by a constant of a provably non-negative operand is plain
 * C division; only possibly negative operands need the helpers. */
static char *entry_body(const char *json)
{
	tir_workload *w = parse(json);
	tir_error err;
	tir_program *p = tir_program_build(w, &err);
	tir_target t = target("cpu");
	tir_code *c = tir_codegen(p, &t, &err);
	ck_assert_msg(c, "%s", err.msg);
	const char *body = strstr(c->source, "int tir_entry");
	ck_assert(body);
	char *r = strdup(body);
	tir_code_free(c);
	tir_program_free(p);
	tir_workload_free(w);
	return r;
}

START_TEST(test_c_floordiv)
{
	/* depthwise with multiplier 2: k // 2 and k % 2 of a loop index */
	char *b = entry_body("{\"op\":\"depthwise_conv2d\",\"N\":1,\"C\":4,\"H\":8,\"W\":7,\"R\":3,\"S\":3,\"pad\":1,\"multiplier\":2}");
	ck_assert(strstr(b, " / 2)"));
	ck_assert(!strstr(b, "tir_floordiv(") && !strstr(b, "tir_floormod("));
	free(b);
	/* transposed convolution: (y - 2) % 2 with y - 2 possibly negative */
	b = entry_body("{\"op\":\"conv2d_transpose\",\"N\":1,\"C\":2,\"H\":3,\"W\":3,\"K\":2,\"R\":3,\"S\":3,\"stride\":2}");
	ck_assert(strstr(b, "tir_floormod((vh_"));
	free(b);
}
END_TEST

/* ---- scheduled programs ---------------------------------------------------------- */

static tir_sched *sched(tir_workload *w)
{
	tir_error err;
	tir_sched *s = tir_sched_new(w, 1, &err);
	ck_assert_msg(s, "%s", err.msg);
	return s;
}

#define OK(call) do { int rc_ = (call); ck_assert_msg(rc_ >= 0, "%s: %s", #call, err.msg); } while (0)

/* CPU: tiles, reorder, parallel outer, vectorized inner, unrolled reduction,
 * epilogue moved under the tile loop (M does not divide: predicates). */
START_TEST(test_c_scheduled_cpu)
{
	tir_workload *w = parse("{\"op\":\"matmul\",\"M\":60,\"N\":48,\"K\":32,\"epilogue\":[\"bias\",\"relu\"]}");
	tir_sched *s = sched(w);
	tir_error err;
	int b = tir_get_block(s, "compute", &err);
	ck_assert_msg(b >= 0, "%s", err.msg);
	int l[3], i[2], j[2], k[2];
	ck_assert_int_eq(tir_get_loops(s, b, l, 3, &err), 3);
	tir_int fi[2] = { TIR_LIT(0), TIR_LIT(8) }, fj[2] = { TIR_LIT(0), TIR_LIT(16) },
		fk[2] = { TIR_LIT(0), TIR_LIT(4) };
	OK(tir_split(s, l[0], 2, fi, i, &err));
	OK(tir_split(s, l[1], 2, fj, j, &err));
	OK(tir_split(s, l[2], 2, fk, k, &err));
	int order[6] = { i[0], j[0], k[0], i[1], k[1], j[1] };
	OK(tir_reorder(s, 6, order, &err));
	OK(tir_parallel(s, i[0], &err));
	OK(tir_vectorize(s, j[1], &err));
	OK(tir_unroll(s, k[1], &err));
	int e = tir_get_block(s, "epilogue", &err);
	ck_assert_msg(e >= 0, "%s", err.msg);
	OK(tir_reverse_compute_at(s, e, j[0], &err));
	const tir_program *p = tir_sched_program(s);
	double er = run_c_against_reference(w, p);
	ck_assert_msg(er <= 1e-5, "error %g", er);
	check_cuda_compiles(p, "scheduled cpu program");
	tir_sched_free(s);
	tir_workload_free(w);
}
END_TEST

/* A padded NHWC conv2d's pad stage inlined; the compute block (returned)
 * and its loops n h w k r s c in l. */
static int conv_loops(tir_sched *s, int l[7])
{
	tir_error err;
	int pad = tir_get_block(s, "pad", &err);
	ck_assert_msg(pad >= 0, "%s", err.msg);
	OK(tir_compute_inline(s, pad, &err));
	int b = tir_get_block(s, "compute", &err);
	ck_assert_msg(b >= 0, "%s", err.msg);
	ck_assert_int_eq(tir_get_loops(s, b, l, 7, &err), 7);
	return b;
}

/* CPU: a padded convolution with the pad stage inlined, a local cache of the
 * output tile and a storage-aligned stage. */
START_TEST(test_c_scheduled_conv)
{
	tir_workload *w = parse("{\"op\":\"conv2d\",\"N\":1,\"C\":8,\"H\":10,\"W\":10,\"K\":16,\"R\":3,\"S\":3,\"pad\":1,\"layout\":\"NHWC\"}");
	tir_sched *s = sched(w);
	tir_error err;
	int l[7];
	int b = conv_loops(s, l);
	int h[2];
	tir_int fh[2] = { TIR_LIT(0), TIR_LIT(2) };
	OK(tir_split(s, l[1], 2, fh, h, &err));
	OK(tir_parallel(s, h[0], &err));
	int cw = tir_cache_write(s, b, 0, "local", &err);
	ck_assert_msg(cw >= 0, "%s", err.msg);
	OK(tir_reverse_compute_at(s, cw, h[1], &err));
	int cr = tir_cache_read(s, b, 1, "local", &err);      /* W */
	ck_assert_msg(cr >= 0, "%s", err.msg);
	OK(tir_compute_at(s, cr, h[0], &err));
	OK(tir_storage_align(s, cr, 0, 2, 8, 1, &err));
	const tir_program *p = tir_sched_program(s);
	double er = run_c_against_reference(w, p);
	ck_assert_msg(er <= 1e-5, "error %g", er);
	tir_sched_free(s);
	tir_workload_free(w);
}
END_TEST

/* A grouped convolution reads input channel (k / (K/groups)) * (C/groups) + c.
 * With k tiled by a multiple of K/groups the loops decide the division: the
 * C code indexes X in loop variables and without the vectorized k_1, so
 * that the load is the same along the vector (CPU GRP-2: 4.6 ms -> 0.8 ms
 * for one trace).  With a tile that does not decide it the division of k
 * stays. */
static char *grouped_body(int64_t inner, bool *invariant)
{
	tir_workload *w = parse("{\"op\":\"conv2d\",\"N\":1,\"C\":8,\"H\":6,\"W\":6,\"K\":16,\"R\":3,\"S\":3,\"pad\":1,\"groups\":2,\"layout\":\"NHWC\"}");
	tir_sched *s = sched(w);
	tir_error err;
	int l[7], k[2];
	conv_loops(s, l);
	tir_int fk[2] = { TIR_LIT(0), TIR_LIT(inner) };
	OK(tir_split(s, l[3], 2, fk, k, &err));
	int order[8] = { l[0], l[1], l[2], k[0], l[4], l[5], l[6], k[1] };
	OK(tir_reorder(s, 8, order, &err));
	OK(tir_vectorize(s, k[1], &err));
	const tir_program *p = tir_sched_program(s);
	double er = run_c_against_reference(w, p);
	ck_assert_msg(er <= 1e-5, "inner %lld: error %g", (long long)inner, er);
	tir_target t = target("cpu");
	tir_code *c = tir_codegen(p, &t, &err);
	ck_assert_msg(c, "%s", err.msg);
	const char *x = strstr(c->source, "? X[");
	ck_assert_msg(x, "%s", c->source);
	char *r = strndup(x, (size_t)(strchr(x, ']') - x + 1));
	*invariant = !strstr(r, "vk_") && !strstr(r, "k_1_");    /* nothing of k_1 */
	tir_code_free(c);
	tir_sched_free(s);
	tir_workload_free(w);
	return r;
}

START_TEST(test_c_grouped_channel)
{
	bool invariant;
	char *x = grouped_body(8, &invariant);            /* K/groups = 8: k_0 */
	ck_assert_msg(invariant, "%s", x);
	free(x);
	x = grouped_body(4, &invariant);                  /* 4 divides 8: k_0 / 2 */
	ck_assert_msg(invariant && strstr(x, "(k_0_"), "%s", x);
	free(x);
	x = grouped_body(16, &invariant);                 /* k_1 spans both groups */
	ck_assert_msg(!invariant, "%s", x);
	free(x);
}
END_TEST

/* The first loop under s annotated `key`. */
static const tir_stmt *program_loop_annotated(const tir_stmt *s, const char *key)
{
	for (int i = 0; s->kind == STMT_FOR && i < s->nann; i++)
		if (!strcmp(s->ann[i].key, key))
			return s;
	for (int i = 0; i < s->nkids; i++) {
		const tir_stmt *r = program_loop_annotated(s->kids[i], key);
		if (r)
			return r;
	}
	return NULL;
}

/* p's CUDA code for sm_90, once p (run by the C backend, where thread
 * loops are serial) has computed the reference's result. */
static tir_code *checked_cuda_code(const tir_workload *w, const tir_program *p)
{
	double er = run_c_against_reference(w, p);
	ck_assert_msg(er <= 1e-5, "error %g", er);
	tir_error err;
	tir_target t = target("cuda:sm_90");
	tir_code *code = tir_codegen(p, &t, &err);
	ck_assert_msg(code, "cuda: %s", err.msg);
	return code;
}

/* The outer tiles (i[0], j[0]) to blockIdx.y / .x, the next ones to
 * threadIdx.y / .x: the 2-D GPU tiling of the tests below. */
static void bind_tiles(tir_sched *s, const int *i, const int *j)
{
	tir_error err;
	OK(tir_bind(s, i[0], "blockIdx.y", &err));
	OK(tir_bind(s, j[0], "blockIdx.x", &err));
	OK(tir_bind(s, i[1], "threadIdx.y", &err));
	OK(tir_bind(s, j[1], "threadIdx.x", &err));
}

/* GPU: the classic tiled matmul — block tiles bound to blockIdx, thread
 * tiles to threadIdx, A and B staged through shared memory per k tile with a
 * cooperative fetch bound to the thread axes, a local accumulator.  Run on
 * the CPU (thread loops are serial there) and compiled with NVRTC.  Cases 2
 * and 3 software-pipeline the k loop with that many stages: the fetch is a
 * cp.async into one of `stages` copies of each shared buffer. */
START_TEST(test_scheduled_cuda)
{
	bool vec = _i >= 1;     /* fetch 4 contiguous floats per thread */
	int stages = _i >= 2 ? _i : 1;
	tir_workload *w = parse("{\"op\":\"matmul\",\"M\":64,\"N\":64,\"K\":32,\"epilogue\":[\"bias\"]}");
	tir_sched *s = sched(w);
	tir_error err;
	int b = tir_get_block(s, "compute", &err);
	int l[3], i[3], j[3], k[2];
	ck_assert_int_eq(tir_get_loops(s, b, l, 3, &err), 3);
	tir_int fi[3] = { TIR_LIT(0), TIR_LIT(8), TIR_LIT(2) };
	tir_int fk[2] = { TIR_LIT(0), TIR_LIT(8) };
	OK(tir_split(s, l[0], 3, fi, i, &err));
	OK(tir_split(s, l[1], 3, fi, j, &err));
	OK(tir_split(s, l[2], 2, fk, k, &err));
	int order[8] = { i[0], j[0], i[1], j[1], k[0], k[1], i[2], j[2] };
	OK(tir_reorder(s, 8, order, &err));
	bind_tiles(s, i, j);
	OK(tir_unroll(s, k[1], &err));
	int cw = tir_cache_write(s, b, 0, "local", &err);
	ck_assert_msg(cw >= 0, "%s", err.msg);
	OK(tir_reverse_compute_at(s, cw, j[1], &err));
	for (int r = 0; r < 2; r++) {
		int cr = tir_cache_read(s, b, r, "shared", &err);
		ck_assert_msg(cr >= 0, "cache_read %d: %s", r, err.msg);
		OK(tir_compute_at(s, cr, k[0], &err));
		int cl[8];
		int n = tir_get_loops(s, cr, cl, 8, &err);
		ck_assert_msg(n >= 7, "%d loops", n);
		int f = tir_fuse(s, n - 5, cl + 5, &err);
		ck_assert_msg(f >= 0, "fuse: %s", err.msg);
		int ft[4];
		tir_int ff[4] = { TIR_LIT(0), TIR_LIT(8), TIR_LIT(vec ? 4 : 8), TIR_LIT(4) };
		OK(tir_split(s, f, vec ? 4 : 3, ff, ft, &err));
		OK(tir_bind(s, ft[1], "threadIdx.y", &err));
		OK(tir_bind(s, ft[2], "threadIdx.x", &err));
		if (vec)
			OK(tir_vectorize(s, ft[3], &err));
	}
	int e = tir_get_block(s, "epilogue", &err);
	OK(tir_reverse_compute_inline(s, e, &err));
	if (stages > 1)
		OK(tir_annotate(s, k[0], "software_pipeline", stages, &err));
	const tir_program *p = tir_sched_program(s);
	tir_code *code = checked_cuda_code(w, p);
	ck_assert_int_eq(code->nlaunches, 1);
	tir_launch *ln = &code->launches[0];
	ck_assert_int_eq(ln->grid[0], 4);
	ck_assert_int_eq(ln->grid[1], 4);
	ck_assert_int_eq(ln->block[0], 8);
	ck_assert_int_eq(ln->block[1], 8);
	/* A_shared 16x8 and B_shared 8x16 floats, `stages` copies of each */
	ck_assert_int_eq(ln->shared_bytes, stages * 2 * 16 * 8 * 4);
	ck_assert(strstr(code->source, "__syncthreads()"));
	/* the compiler's copies: the two shared copies once each (4 times
	 * under their vectorized loops), the product 8 times under the
	 * unrolled k_1, the write-back once */
	ck_assert_int_eq(code->unrolled_blocks, (vec ? 4 + 4 : 1 + 1) + 8 + 1);
	if (stages == 1) {
		ck_assert(!vec || strstr(code->source, "*(float4 *)(A_shared + "));
		ck_assert(!strstr(code->source, "tir_cp_async16(A_shared"));
	} else {
		char wait[64];
		snprintf(wait, sizeof wait, "TIR_CP_ASYNC_WAIT(%d);", stages - 1);
		ck_assert(strstr(code->source, "tir_cp_async16(A_shared + "));
		ck_assert(strstr(code->source, "tir_cp_async16(B_shared + "));
		ck_assert(strstr(code->source, "A_shared_ring + ("));
		ck_assert(strstr(code->source, wait));
		/* the rule of lower.c: with the products moved in front of the
		 * copies (they would read the previous iteration's tiles), the
		 * copies are no copy stages and nothing is pipelined */
		tir_stmt *kl = (tir_stmt *)program_loop_annotated(p->root, "software_pipeline");
		ck_assert(kl && kl->nkids >= 3);
		tir_lowered L;
		tir_target t = target("cuda:sm_90");
		ck_assert(lower_program(p, &t, &L, &err) == 0);
		ck_assert_int_eq(lower_pipeline_stages(&L, kl), stages);
		lower_free(&L);
		tir_stmt *last = kl->kids[kl->nkids - 1];
		memmove(kl->kids + 1, kl->kids, sizeof *kl->kids * (size_t)(kl->nkids - 1));
		kl->kids[0] = last;
		ck_assert(lower_program(p, &t, &L, &err) == 0);
		ck_assert_int_eq(lower_pipeline_stages(&L, kl), 1);
		lower_free(&L);
		memmove(kl->kids, kl->kids + 1, sizeof *kl->kids * (size_t)(kl->nkids - 1));
		kl->kids[kl->nkids - 1] = last;
	}
	tir_code_free(code);
	check_cuda_compiles(p, "scheduled cuda matmul");
	tir_sched_free(s);
	tir_workload_free(w);
}
END_TEST

/* A cooperative fetch whose split leaves a partial tail: the fused loop of
 * A_shared's 16 x 12 = 192 elements split [2, 8 (threadIdx.y), 4
 * (threadIdx.x), 4 (vector)] covers 256, so the copy is guarded by
 * `fused < 192`.  With whole vectors (192 % 4 == 0 and each part of the
 * index a multiple of 4) the guard is the same for every lane and the copy
 * stays one float4 (case 0); a tail that ends inside a vector (case 1: K
 * tile 13 x 16 = 208 ... of 8-lane vectors, 208 % 8 != 0) is copied lane by
 * lane.  Both compute the reference's result and compile with NVRTC. */
START_TEST(test_cuda_guarded_vector_fetch)
{
	bool whole = _i == 0;
	int kt = whole ? 12 : 13, lanes = whole ? 4 : 8;
	char json[160];
	snprintf(json, sizeof json, "{\"op\":\"matmul\",\"M\":64,\"N\":64,\"K\":%d}", kt * 4);
	tir_workload *w = parse(json);
	tir_sched *s = sched(w);
	tir_error err;
	int b = tir_get_block(s, "compute", &err);
	int l[3], i[2], j[2], k[2];
	ck_assert_int_eq(tir_get_loops(s, b, l, 3, &err), 3);
	tir_int f16[2] = { TIR_LIT(0), TIR_LIT(16) };
	tir_int fk[2] = { TIR_LIT(0), TIR_LIT(kt) };
	OK(tir_split(s, l[0], 2, f16, i, &err));
	OK(tir_split(s, l[1], 2, f16, j, &err));
	OK(tir_split(s, l[2], 2, fk, k, &err));
	int order[6] = { i[0], j[0], k[0], i[1], j[1], k[1] };
	OK(tir_reorder(s, 6, order, &err));
	bind_tiles(s, i, j);
	int cr = tir_cache_read(s, b, 0, "shared", &err);
	ck_assert_msg(cr >= 0, "cache_read: %s", err.msg);
	OK(tir_compute_at(s, cr, k[0], &err));
	int cl[8];
	int n = tir_get_loops(s, cr, cl, 8, &err);
	ck_assert_msg(n == 5, "%d loops", n);
	int f = tir_fuse(s, 2, cl + 3, &err);
	ck_assert_msg(f >= 0, "fuse: %s", err.msg);
	int ft[4];
	tir_int ff[4] = { TIR_LIT(0), TIR_LIT(8), TIR_LIT(4), TIR_LIT(lanes) };
	OK(tir_split(s, f, 4, ff, ft, &err));
	OK(tir_bind(s, ft[1], "threadIdx.y", &err));
	OK(tir_bind(s, ft[2], "threadIdx.x", &err));
	OK(tir_vectorize(s, ft[3], &err));
	const tir_program *p = tir_sched_program(s);
	tir_code *code = checked_cuda_code(w, p);
	ck_assert(strstr(code->source, "< 192") || !whole);
	if (whole)
		ck_assert_msg(strstr(code->source, "lanes as one float4") &&
			      !strstr(code->source, "vectorized (scalar)"), "the guarded fetch is not one float4");
	else
		ck_assert_msg(strstr(code->source, "vectorized (scalar)"), "a tail inside a vector was vectorized");
	tir_code_free(code);
	check_cuda_compiles(p, "guarded vector fetch");
	tir_sched_free(s);
	tir_workload_free(w);
}
END_TEST

/* The generic test schedules (tests/schedules.c) on every workload: the
 * CPU tiling and the GPU tiling (run on the CPU, where thread loops are
 * serial) must compute the reference's result, and the GPU one must compile
 * with NVRTC. */
START_TEST(test_generic_schedules)
{
	int wi = _i / 2;
	bool gpu = _i % 2;
	tir_workload *w = parse(workloads[wi]);
	tir_error err;
	tir_sched *s = sched(w);
	int rc = gpu ? sched_gpu_tiled(s, &err) : sched_cpu_tiled(s, &err);
	ck_assert_msg(rc == 0, "%s schedule of %s: %s", gpu ? "gpu" : "cpu", workloads[wi], err.msg);
	const tir_program *p = tir_sched_program(s);
	double e = run_c_against_reference(w, p);
	ck_assert_msg(e <= tolerance(w), "%s, %s schedule: error %g > %g", workloads[wi],
		      gpu ? "gpu" : "cpu", e, tolerance(w));
	if (gpu)
		check_cuda_compiles(p, workloads[wi]);
	tir_sched_free(s);
	tir_workload_free(w);
}
END_TEST

/* A blockIdx loop under a serial loop has no CUDA meaning: refused. */
START_TEST(test_cuda_refuses_nested_block_idx)
{
	tir_workload *w = parse("{\"op\":\"matmul\",\"M\":16,\"N\":16,\"K\":16}");
	tir_sched *s = sched(w);
	tir_error err;
	int b = tir_get_block(s, "compute", &err);
	int l[3];
	ck_assert_int_eq(tir_get_loops(s, b, l, 3, &err), 3);
	OK(tir_bind(s, l[1], "blockIdx.x", &err));
	tir_target t = target("cuda:sm_90");
	tir_code *code = tir_codegen(tir_sched_program(s), &t, &err);
	ck_assert(!code);
	ck_assert_msg(strstr(err.msg, "blockIdx.x"), "%s", err.msg);
	tir_sched_free(s);
	tir_workload_free(w);
}
END_TEST

/* ---- lowering --------------------------------------------------------------------- */

/* Shared buffers are compacted to the block's tile (threadIdx relaxed),
 * local ones to the thread's. */
START_TEST(test_lower_compaction)
{
	tir_workload *w = parse("{\"op\":\"matmul\",\"M\":64,\"N\":64,\"K\":32}");
	tir_sched *s = sched(w);
	tir_error err;
	int b = tir_get_block(s, "compute", &err);
	int l[3], i[3], j[3];
	ck_assert_int_eq(tir_get_loops(s, b, l, 3, &err), 3);
	tir_int fi[3] = { TIR_LIT(0), TIR_LIT(8), TIR_LIT(2) };
	OK(tir_split(s, l[0], 3, fi, i, &err));
	OK(tir_split(s, l[1], 3, fi, j, &err));
	int order[7] = { i[0], j[0], i[1], j[1], l[2], i[2], j[2] };
	OK(tir_reorder(s, 7, order, &err));
	bind_tiles(s, i, j);
	int cw = tir_cache_write(s, b, 0, "local", &err);
	ck_assert_msg(cw >= 0, "%s", err.msg);
	OK(tir_reverse_compute_at(s, cw, j[1], &err));
	int cr = tir_cache_read(s, b, 0, "shared", &err);
	ck_assert_msg(cr >= 0, "%s", err.msg);
	OK(tir_compute_at(s, cr, l[2], &err));
	const tir_program *p = tir_sched_program(s);
	tir_target t = target("cuda:sm_90");
	tir_lowered L;
	ck_assert_msg(lower_program(p, &t, &L, &err) == 0, "%s", err.msg);
	int nshared = 0, nlocal = 0;
	for (int q = p->nparams; q < p->nbufs; q++) {
		const tir_alloc *a = &L.alloc[q];
		if (!a->used)
			continue;
		if (a->buf->scope == TIR_SCOPE_SHARED) {
			nshared++;
			ck_assert(a->compact);
			ck_assert_int_eq(a->elems, 16);    /* 16 rows x 1 k, whole block */
		} else if (a->buf->scope == TIR_SCOPE_LOCAL) {
			nlocal++;
			ck_assert_int_eq(a->elems, 4);     /* 2 x 2 per thread */
			ck_assert(a->lca && a->lca->kind == STMT_FOR);
		}
	}
	ck_assert_int_eq(nshared, 1);
	ck_assert_int_eq(nlocal, 1);
	lower_free(&L);
	tir_sched_free(s);
	tir_workload_free(w);
}
END_TEST

/* ---- reducers: max and min ------------------------------------------------------
 * Row maxima and minima of A[M, K] built by hand (tests/reducers.h), run as C
 * on the CPU and compared with a plain C loop over the same inputs, exactly;
 * their CUDA compiled by NVRTC for sm_90 and run where there is a GPU.  Odd
 * shapes (K prime, K = 1, M = 1), 16-bit types (stored as bits in C,
 * converted on store), NaN values (skipped: fmax), every value NaN (the
 * identity, -inf / +inf, is the result), integers (INT32_MIN / _MAX). */

static const tr_spec reduce_specs[] = {
	{ REDUCE_MAX, TIR_F32, TIR_F32, 5, 7, 0, false },
	{ REDUCE_MIN, TIR_F32, TIR_F32, 5, 7, 0, false },
	{ REDUCE_MAX, TIR_F32, TIR_F32, 1, 13, 0, false },
	{ REDUCE_MIN, TIR_F32, TIR_F32, 6, 1, 0, false },
	{ REDUCE_MAX, TIR_F32, TIR_F32, 1, 1, 0, false },
	{ REDUCE_MAX, TIR_F16, TIR_F16, 3, 11, 0, false },
	{ REDUCE_MIN, TIR_F16, TIR_F16, 1, 1, 0, false },
	{ REDUCE_MAX, TIR_F16, TIR_F32, 4, 31, 0, false },
	{ REDUCE_MIN, TIR_BF16, TIR_BF16, 3, 17, 0, false },
	{ REDUCE_MAX, TIR_F32, TIR_F32, 3, 10, 3, false },
	{ REDUCE_MIN, TIR_F16, TIR_F16, 2, 5, 1, false },
	{ REDUCE_MAX, TIR_F32, TIR_F32, 4, 6, 0, true },
	{ REDUCE_SUM, TIR_F32, TIR_F32, 4, 9, 0, false },
	{ REDUCE_MAX, TIR_I32, TIR_I32, 3, 7, 0, false },
	{ REDUCE_MIN, TIR_I8, TIR_I32, 2, 5, 0, false },
};
#define NREDUCE ((int)(sizeof reduce_specs / sizeof reduce_specs[0]))

/* The identity of s's reducer as each backend prints it. */
static const char *c_identity(const tr_spec *s)
{
	if (s->out == TIR_I32)
		return s->r == REDUCE_MAX ? "-2147483648LL" : s->r == REDUCE_MIN ? "2147483647" : "0";
	return s->r == REDUCE_MAX ? "-INFINITY" : s->r == REDUCE_MIN ? "INFINITY" : "0.0f";
}

static const char *cuda_identity(const tr_spec *s)
{
	if (s->out == TIR_I32)
		return c_identity(s);
	return s->r == REDUCE_MAX ? "__int_as_float(0xff800000)"
	     : s->r == REDUCE_MIN ? "__int_as_float(0x7f800000)" : "0.0f";
}

/* Unscheduled: the init stores the identity, the update combines with
 * tir_maxf / tir_minf, the accumulator second. */
START_TEST(test_reduce_unscheduled)
{
	const tr_spec *rs = &reduce_specs[_i];
	tir_program *p = tr_program(rs);
	char *c = tr_c_source(p);
	ck_assert_msg(strstr(c, c_identity(rs)), "%s: no %s in\n%s", tr_name(rs), c_identity(rs), c);
	ck_assert(!strstr(c, "inff"));
	if (rs->r != REDUCE_SUM)
		ck_assert_msg(strstr(c, rs->out == TIR_I32 ? (rs->r == REDUCE_MAX ? "tir_maxi(" : "tir_mini(")
					: rs->r == REDUCE_MAX ? "tir_maxf(" : "tir_minf("), "%s", c);
	if (rs->r != REDUCE_SUM && rs->out == TIR_F32 && !rs->plus_one && !rs->nan_every)
		ck_assert_msg(strstr(c, "), R[") || strstr(c, "], R["), "the accumulator second:\n%s", c);
	if (rs->r != REDUCE_SUM && rs->out == TIR_F16)
		ck_assert_msg(strstr(c, "tir_f32_to_f16(tir_m"), "%s", c);
	free(c);
	tr_run(p, rs, "cpu", "unscheduled");
	char *cu = tr_cuda_source(p, tr_name(rs));
	ck_assert_msg(strstr(cu, cuda_identity(rs)), "%s: no %s in\n%s", tr_name(rs),
		      cuda_identity(rs), cu);
	free(cu);
	tr_run(p, rs, "cuda:sm_90", "unscheduled");
	tir_program_free(p);
}
END_TEST

#define ROK(call) do { tir_error e_ = { "" }; int rc_ = (call); \
	ck_assert_msg(rc_ >= 0, "%s: %s: %s", tr_name(rs), #call, e_.msg); } while (0)

/* CPU schedules: (0) split k by 4 (a predicate where 4 does not divide
 * K), the k tiles outside i, the init decomposed out of them, i parallel;
 * (1) K padded to a multiple of 4 (with the identity) and rfactored into 4
 * partials (each starting at the identity; with K = 1 three of them see
 * only padding), the partials' loop parallel, then combined by
 * R_rf_max / _min. */
START_TEST(test_reduce_scheduled_cpu)
{
	const tr_spec *rs = &reduce_specs[_i / 2];
	int which = _i % 2;
	tir_sched *s = tr_sched(rs);
	int b, l[4], k[2];
	ROK(b = tir_get_block(s, "reduce", &e_));
	ck_assert_int_eq(tir_get_loops(s, b, l, 4, NULL), 2);
	if (which == 0) {
		tir_int f[2] = { TIR_LIT(0), TIR_LIT(4) };
		ROK(tir_split(s, l[1], 2, f, k, &e_));
		int order[3] = { k[0], l[0], k[1] };
		ROK(tir_reorder(s, 3, order, &e_));
		int init;
		ROK(init = tir_decompose_reduction(s, b, k[0], &e_));
		ROK(tir_parallel(s, l[0], &e_));
		const tir_block *ib = s->rv[init].block;
		ck_assert(ib->reduce == REDUCE_NONE && reduce_is_identity(rs->r, ib->value));
	} else {
		tir_int pf[2] = { TIR_LIT(1), TIR_LIT(4) };
		ROK(tir_pad_einsum(s, b, 2, pf, &e_));
		int sum;
		ROK(sum = tir_rfactor(s, b, 1, TIR_LIT(4), &e_));
		int rl[3];
		ck_assert_int_eq(tir_get_loops(s, b, rl, 3, NULL), 3);
		ROK(tir_parallel(s, rl[0], &e_));
		tir_block *rf = s->rv[b].block, *comb = s->rv[sum].block;
		ck_assert(reduce_is_identity(rs->r, rf->init));
		ck_assert_int_eq(comb->reduce, rs->r);
		ck_assert(reduce_is_identity(rs->r, comb->init));
		ck_assert_str_eq(comb->name, rs->r == REDUCE_MAX ? "R_rf_max"
					    : rs->r == REDUCE_MIN ? "R_rf_min" : "R_rf_sum");
	}
	tr_check_replay(s, rs);
	tr_run(tir_sched_program(s), rs, "cpu", which ? "padded, rfactor" : "split, decomposed");
	char *cu = tr_cuda_source(tir_sched_program(s), tr_name(rs));
	free(cu);
	tir_sched_free(s);
}
END_TEST

/* CUDA cross-thread reduction: i bound to blockIdx.x, k split by T threads
 * bound to threadIdx.x outside the rest of k, the block annotated: partials
 * start at the identity, threads past K (predicate false) keep it, warp
 * shuffles (T = 32), shuffles and a shared array between warps (64), a
 * shared-memory tree (48) combine with tir_maxf / tir_minf.  Runs on the CPU
 * (thread loops serial there) and on a GPU where there is one. */
static const int xthreads[] = { 32, 64, 48, 128 };

START_TEST(test_reduce_cross_thread)
{
	static const tr_spec specs[] = {
		{ REDUCE_MAX, TIR_F32, TIR_F32, 3, 13, 0, false },
		{ REDUCE_MIN, TIR_F32, TIR_F32, 2, 97, 0, false },
		{ REDUCE_MAX, TIR_F16, TIR_F16, 1, 211, 0, false },
		{ REDUCE_MIN, TIR_BF16, TIR_F32, 4, 1, 0, false },
		{ REDUCE_MAX, TIR_F32, TIR_F32, 2, 100, 7, false },
		{ REDUCE_SUM, TIR_F32, TIR_F32, 2, 77, 0, false },
	};
	const tr_spec *rs = &specs[_i / 4];
	int threads = xthreads[_i % 4];
	tir_sched *s = tr_sched(rs);
	int b, l[2], k[2];
	ROK(b = tir_get_block(s, "reduce", &e_));
	ck_assert_int_eq(tir_get_loops(s, b, l, 2, NULL), 2);
	tir_int f[2] = { TIR_LIT(0), TIR_LIT(threads) };
	ROK(tir_split(s, l[1], 2, f, k, &e_));
	int order[3] = { l[0], k[1], k[0] };
	ROK(tir_reorder(s, 3, order, &e_));
	ROK(tir_bind(s, l[0], "blockIdx.x", &e_));
	ROK(tir_bind(s, k[1], "threadIdx.x", &e_));
	ROK(tir_annotate(s, b, "cross_thread_reduction", 1, &e_));
	tr_check_replay(s, rs);
	const tir_program *p = tir_sched_program(s);
	char *cu = tr_cuda_source(p, tr_name(rs));
	ck_assert_msg(strstr(cu, "tir_xacc = ") && strstr(cu, cuda_identity(rs)), "%s", cu);
	if (rs->r != REDUCE_SUM)
		ck_assert_msg(strstr(cu, threads % 32 ? "tir_xred[threadIdx.x] = tir_m"
					 : "tir_xacc = tir_m"), "%s", cu);
	free(cu);
	tr_run(p, rs, "cpu", "cross-thread");
	tr_run(p, rs, "cuda:sm_90", "cross-thread");
	tir_sched_free(s);
}
END_TEST

static Suite *codegen_suite(void)
{
	Suite *s = suite_create("codegen");
	TCase *tc = tcase_create("c");
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, test_c_unscheduled, 0, NWORKLOADS);
	tcase_add_test(tc, test_c_golden);
	tcase_add_test(tc, test_cse);
	tcase_add_test(tc, test_c_floordiv);
	tcase_add_test(tc, test_c_grouped_channel);
	suite_add_tcase(s, tc);
	tc = tcase_create("cuda");
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, test_cuda_unscheduled, 0, NWORKLOADS);
	tcase_add_test(tc, test_cuda_refuses_nested_block_idx);
	suite_add_tcase(s, tc);
	tc = tcase_create("scheduled");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_lower_compaction);
	tcase_add_test(tc, test_c_scheduled_cpu);
	tcase_add_test(tc, test_c_scheduled_conv);
	tcase_add_loop_test(tc, test_generic_schedules, 0, 2 * NWORKLOADS);
	tcase_add_loop_test(tc, test_scheduled_cuda, 0, 4);
	tcase_add_loop_test(tc, test_cuda_guarded_vector_fetch, 0, 2);
	suite_add_tcase(s, tc);
	tc = tcase_create("reducers");
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, test_reduce_unscheduled, 0, NREDUCE);
	tcase_add_loop_test(tc, test_reduce_scheduled_cpu, 0, 2 * NREDUCE);
	tcase_add_loop_test(tc, test_reduce_cross_thread, 0, 6 * 4);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(codegen_suite());
}
