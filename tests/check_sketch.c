/*
 * check_sketch.c — the CPU search space (sketch/): every sketch of every
 * operator gives valid programs whose C code matches the reference on random
 * inputs; sampling is deterministic for a seed and its traces replay;
 * sample_compute_location draws among the legal locations and replays its
 * decision; the CUDA table, when it has sketches, gives valid candidates that
 * NVRTC compiles.
 *
 * Kept small: a few shapes per operator, one candidate per sketch each.
 * Also hand-built row maxima and minima (tests/reducers.h): every CPU
 * sketch that applies (the row sketch) gives valid candidates whose C code
 * matches a plain loop.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tir.h"
#include "ir/ir.h"
#include "codegen/codegen.h"
#include "measure/measure.h"
#include "sketch/sketch.h"
#include "sched/sched.h"
#include "testutil.h"
#include "reducers.h"

static const char *const odd[][2] = {
	{ "mm-prime", "{\"op\":\"matmul\",\"M\":37,\"N\":29,\"K\":13}" },
	{ "bmm-nt", "{\"op\":\"matmul\",\"M\":17,\"N\":23,\"K\":11,\"batch\":3,\"layout\":\"NT\"}" },
	{ "mm-tn-bias-relu", "{\"op\":\"matmul\",\"M\":19,\"N\":7,\"K\":31,\"layout\":\"TN\",\"epilogue\":[\"bias\",\"relu\"]}" },
	{ "mm-bf16-gelu", "{\"op\":\"matmul\",\"M\":24,\"N\":17,\"K\":32,\"dtype\":\"bfloat16\",\"epilogue\":[\"gelu\"]}" },
	{ "mm-int8", "{\"op\":\"matmul\",\"M\":31,\"N\":18,\"K\":40,\"dtype\":\"int8\"}" },
	{ "c1d-s3-asym", "{\"op\":\"conv1d\",\"N\":2,\"C\":5,\"W\":29,\"K\":7,\"S\":3,\"stride\":3,\"pad\":[1,2]}" },
	{ "c2d-d3-g2-nhwc-add-gelu", "{\"op\":\"conv2d\",\"N\":2,\"C\":4,\"H\":9,\"W\":7,\"K\":6,\"R\":3,\"S\":3,\"dilation\":3,\"pad\":3,\"groups\":2,\"layout\":\"NHWC\",\"epilogue\":[\"add\",\"gelu\"]}" },
	{ "c3d-ndhwc-f16", "{\"op\":\"conv3d\",\"N\":1,\"C\":3,\"D\":4,\"H\":5,\"W\":5,\"K\":2,\"T\":2,\"R\":2,\"S\":2,\"layout\":\"NDHWC\",\"dtype\":\"float16\"}" },
	{ "t2d-op", "{\"op\":\"conv2d_transpose\",\"N\":1,\"C\":4,\"H\":5,\"W\":3,\"K\":6,\"R\":4,\"S\":3,\"stride\":2,\"pad\":1,\"output_padding\":1}" },
	{ "dep-int8-nhwc", "{\"op\":\"depthwise_conv2d\",\"N\":2,\"C\":7,\"H\":9,\"W\":9,\"R\":5,\"S\":3,\"pad\":[2,1],\"layout\":\"NHWC\",\"dtype\":\"int8\"}" },
};
#define N_ODD (int)(sizeof odd / sizeof *odd)

/* Small entries of the shared suite, one per operator family. */
static const char *const suite[] = { "GMM-0", "C1D-3", "DEP-3", "T2D-0", "GRP-3" };
#define N_SUITE (int)(sizeof suite / sizeof *suite)

static tir_target cpu, sm90;

static void setup(void)
{
	tir_error err;
	ck_assert_msg(tir_target_parse("cpu", &cpu, &err) == 0, "%s", err.msg);
	ck_assert_msg(tir_target_parse("cuda:sm_90", &sm90, &err) == 0, "%s", err.msg);
}

static tir_workload *parse(const char *name, const char *json)
{
	tir_error err = { "" };
	tir_workload *w = tir_workload_parse(json, strlen(json), NULL, &err);
	ck_assert_msg(w, "%s: %s", name, err.msg);
	return w;
}

/* The trace of s replays on a fresh schedule to the same trace. */
static void check_replays(const char *name, const tir_workload *w, const tir_sched *s)
{
	tir_error err = { "" };
	char *tr = tir_sched_trace(s);
	tir_sched *r = tir_sched_new(w, 99, &err);
	ck_assert_msg(r, "%s: %s", name, err.msg);
	ck_assert_msg(tir_sched_replay(r, tr, &err) == 0, "%s: replay: %s", name, err.msg);
	char *tr2 = tir_sched_trace(r);
	ck_assert_msg(!strcmp(tr, tr2), "%s: the replayed trace differs", name);
	free(tr);
	free(tr2);
	tir_sched_free(r);
}

/* Builds and runs the C code of s on the reference's inputs. */
static void check_runs(const char *name, const tir_workload *w, const tir_sched *s,
		       double **ref)
{
	tir_error err = { "" };
	const tir_program *p = tir_sched_program(s);
	ck_assert_msg(tir_verify(p, &cpu, &err) == 0, "%s: invalid: %s", name, err.msg);
	tir_code *c = tir_codegen(p, &cpu, &err);
	ck_assert_msg(c, "%s: codegen: %s", name, err.msg);
	if (!*ref) {
		int64_t n;
		ck_assert_msg(tir_measure_reference(w, c, 1, ref, &n, &err) == 0,
			      "%s: reference: %s", name, err.msg);
	}
	tir_measure_opts o = { .seed = 1, .no_timing = true, .timeout_s = 60, .reference = *ref };
	tir_measure_result res;
	memset(&res, 0, sizeof res);
	tir_measure(&tir_runner_cpu, w, c, &cpu, &o, &res);
	if (res.status != TIR_MEASURE_OK) {
		char *tr = tir_sched_trace(s);
		fprintf(stderr, "%s: failing trace %s\n", name, tr);
		free(tr);
	}
	ck_assert_msg(res.status == TIR_MEASURE_OK, "%s: %s: %s (max rel error %g)", name,
		      tir_measure_status_name(res.status), res.msg, res.max_rel_error);
	tir_measure_result_clear(&res);
	tir_code_free(c);
}

/* One candidate of every CPU sketch: replays and is right.  A draw may be
 * invalid (validation filters it in the search); a few seeds must give a
 * valid one. */
static void check_cpu_sketches(const char *name, const char *json, uint64_t seed)
{
	tir_error err = { "" };
	tir_workload *w = parse(name, json);
	tir_sketch sk[TIR_MAX_SKETCHES];
	int n = tir_sketches(w, &cpu, sk, TIR_MAX_SKETCHES, &err);
	ck_assert_msg(n >= 1, "%s: no cpu sketch: %s", name, err.msg);
	double *ref = NULL;
	for (int i = 0; i < n; i++) {
		char what[256];
		snprintf(what, sizeof what, "%.100s %.64s", name, sk[i].name);
		ck_assert_int_eq(sk[i].id, i);
		tir_sched *s = NULL;
		for (int a = 0; a < 8 && !s; a++) {
			s = tir_sched_new(w, seed + (uint64_t)(16 * i + a), &err);
			ck_assert_msg(s, "%s", err.msg);
			ck_assert_msg(tir_sketch_apply(w, &cpu, i, s, &err) == 0, "%s: %s", what, err.msg);
			if (tir_verify(tir_sched_program(s), &cpu, &err)) {
				tir_sched_free(s);
				s = NULL;
			}
		}
		ck_assert_msg(s, "%s: no valid draw in 8: %s", what, err.msg);
		check_replays(what, w, s);
		check_runs(what, w, s, &ref);
		tir_sched_free(s);
	}
	free(ref);
	tir_workload_free(w);
}

START_TEST(odd_shapes)
{
	check_cpu_sketches(odd[_i][0], odd[_i][1], 11 + (uint64_t)_i);
}
END_TEST

START_TEST(suite_workloads)
{
	char *json = tu_suite_workload(suite[_i]);
	ck_assert_msg(json, "no suite entry %s", suite[_i]);
	check_cpu_sketches(suite[_i], json, 5);
	free(json);
}
END_TEST

/* The same seed gives the same candidates; they are distinct and valid. */
START_TEST(sample_deterministic)
{
	tir_error err = { "" };
	tir_workload *w = parse("mm", "{\"op\":\"matmul\",\"M\":64,\"N\":48,\"K\":40,\"epilogue\":[\"bias\"]}");
	enum { N = 8 };
	tir_sched *a[N], *b[N], *c[N];
	int na = tir_sample_candidates(w, &cpu, N, 42, a, &err);
	ck_assert_msg(na == N, "made %d: %s", na, err.msg);
	int nb = tir_sample_candidates(w, &cpu, N, 42, b, &err);
	ck_assert_int_eq(nb, na);
	int nc = tir_sample_candidates(w, &cpu, N, 43, c, &err);
	ck_assert_int_eq(nc, N);
	int same_as_other_seed = 0;
	for (int i = 0; i < na; i++) {
		char *ta = tir_sched_trace(a[i]), *tb = tir_sched_trace(b[i]);
		char *tc = tir_sched_trace(c[i]);
		ck_assert_msg(!strcmp(ta, tb), "candidate %d differs for the same seed", i);
		same_as_other_seed += !strcmp(ta, tc);
		for (int j = 0; j < i; j++) {
			char *tj = tir_sched_trace(a[j]);
			ck_assert_msg(strcmp(ta, tj), "candidates %d and %d are the same", j, i);
			free(tj);
		}
		ck_assert_msg(tir_verify(tir_sched_program(a[i]), &cpu, &err) == 0, "%s", err.msg);
		free(ta);
		free(tb);
		free(tc);
	}
	ck_assert_msg(same_as_other_seed < na, "another seed gave the same candidates");
	for (int i = 0; i < na; i++) {
		tir_sched_free(a[i]);
		tir_sched_free(b[i]);
		tir_sched_free(c[i]);
	}
	tir_workload_free(w);
}
END_TEST

/* sample_compute_location of the pad block of a conv: the candidates are the
 * loops of its consumer; every index replays and compute_at there is valid
 * and right; an index out of range is refused with a message. */
START_TEST(compute_location)
{
	tir_error err = { "" };
	const char *json = "{\"op\":\"conv2d\",\"N\":1,\"C\":3,\"H\":6,\"W\":5,\"K\":4,\"R\":3,\"S\":3,\"pad\":1}";
	tir_workload *w = parse("conv", json);
	tir_sched *s = tir_sched_new(w, 1, &err);
	int pad = tir_get_block(s, "pad", &err);
	ck_assert_msg(pad >= 0, "%s", err.msg);
	tir_stmt *cand[64];
	int n = sched_compute_locations(tir_sched_program(s), s->rv[pad].block, TIR_LOC_COMPUTE_AT,
				    cand, 64, &err);
	/* the compute block's 7 loops (n k h w c r s), none vectorized */
	ck_assert_msg(n == 7, "%d candidate locations: %s", n, err.msg);
	tir_sched_free(s);
	double *ref = NULL;
	for (int k = 0; k <= n; k++) {
		char trace[1024];
		snprintf(trace, sizeof trace,
			 "{\"insts\":[{\"op\":\"get_block\",\"str\":\"pad\",\"out\":[\"b0\"]},"
			 "{\"op\":\"sample_compute_location\",\"in\":[\"b0\"],\"out\":[\"l1\"],\"decision\":[%d]},"
			 "{\"op\":\"compute_at\",\"in\":[\"b0\",\"l1\"]}]}", k);
		s = tir_sched_new(w, 1, &err);
		int rc = tir_sched_replay(s, trace, &err);
		if (k == n) {
			ck_assert_msg(rc != 0, "index %d out of range was accepted", k);
			ck_assert_msg(strstr(err.msg, "not the index"), "message: %s", err.msg);
		} else {
			ck_assert_msg(rc == 0, "location %d: %s", k, err.msg);
			char name[32];
			snprintf(name, sizeof name, "pad at location %d", k);
			check_runs(name, w, s, &ref);
		}
		tir_sched_free(s);
	}
	/* drawn, it records its decision and replays */
	s = tir_sched_new(w, 7, &err);
	pad = tir_get_block(s, "pad", &err);
	int l = tir_sample_compute_location(s, pad, TIR_LOC_COMPUTE_AT, &err);
	ck_assert_msg(l >= 0, "%s", err.msg);
	ck_assert_msg(tir_compute_at(s, pad, l, &err) == 0, "%s", err.msg);
	check_replays("sampled location", w, s);
	tir_sched_free(s);

	/* a write-back's locations stop at the producer's reduction loops */
	s = tir_sched_new(w, 1, &err);
	int b = tir_get_block(s, "compute", &err);
	int wb = tir_cache_write(s, b, 0, "local", &err);
	ck_assert_msg(wb >= 0, "%s", err.msg);
	n = sched_compute_locations(tir_sched_program(s), s->rv[wb].block,
				    TIR_LOC_REVERSE_COMPUTE_AT, cand, 64, &err);
	ck_assert_msg(n == 4, "%d write-back locations (n k h w expected)", n);
	for (int i = 0; i < n; i++)
		ck_assert(cand[i]->kind == STMT_FOR);
	tir_sched_free(s);
	free(ref);
	tir_workload_free(w);

	/* a write-back whose output a consumer still reads (its epilogue not
	 * inlined): placed with reverse_compute_at, its locations are the
	 * producer's loops, not the consumer's; the side is in the trace, which
	 * replays, and every location runs right */
	w = parse("mm-bias", "{\"op\":\"matmul\",\"M\":24,\"N\":20,\"K\":12,\"epilogue\":[\"bias\"]}");
	ref = NULL;
	for (uint64_t seed = 1; seed <= 6; seed++) {
		s = tir_sched_new(w, seed, &err);
		b = tir_get_block(s, "compute", &err);
		wb = tir_cache_write(s, b, 0, "local", &err);
		ck_assert_msg(wb >= 0, "%s", err.msg);
		ck_assert(sched_location_side(tir_sched_program(s), s->rv[wb].block) ==
			  TIR_LOC_COMPUTE_AT);      /* what a trace without a side means */
		l = tir_sample_compute_location(s, wb, TIR_LOC_REVERSE_COMPUTE_AT, &err);
		ck_assert_msg(l >= 0, "seed %llu: %s", (unsigned long long)seed, err.msg);
		ck_assert_msg(tir_reverse_compute_at(s, wb, l, &err) == 0, "seed %llu: %s",
			      (unsigned long long)seed, err.msg);
		char *tr = tir_sched_trace(s);
		ck_assert_msg(strstr(tr, "\"op\":\"sample_compute_location\",\"in\":[\"b1\"],"
				     "\"attrs\":[1]"), "the side is not in the trace: %s", tr);
		free(tr);
		check_replays("write-back before its consumer", w, s);
		check_runs("write-back before its consumer", w, s, &ref);
		tir_sched_free(s);
	}
	free(ref);
	tir_workload_free(w);
}
END_TEST

/* The GPU table (gpu.c, another part of the tree) when it has sketches:
 * candidates are valid for sm_90 and NVRTC compiles them. */
START_TEST(cuda_candidates)
{
	tir_error err = { "" };
	if (sketch_gpu_ndefs == 0)
		return;
	tir_workload *w = parse("gmm", "{\"op\":\"matmul\",\"M\":128,\"N\":96,\"K\":64,\"epilogue\":[\"relu\"]}");
	tir_sched *c[3];
	int n = tir_sample_candidates(w, &sm90, 3, 5, c, &err);
	ck_assert_msg(n >= 1, "%s", err.msg);
	for (int i = 0; i < n; i++) {
		ck_assert_msg(tir_verify(tir_sched_program(c[i]), &sm90, &err) == 0, "%s", err.msg);
		tir_code *code = tir_codegen(tir_sched_program(c[i]), &sm90, &err);
		ck_assert_msg(code, "%s", err.msg);
#ifdef HAVE_CUDA
		char *cubin = NULL;
		size_t size = 0;
		ck_assert_msg(tir_nvrtc_compile(code->source, 90, &cubin, &size, &err) == 0,
			      "NVRTC: %s", err.msg);
		free(cubin);
#endif
		tir_code_free(code);
		tir_sched_free(c[i]);
	}
	tir_workload_free(w);
}
END_TEST

/* Every CPU sketch on a row max / min (a reduction without reuse: the row
 * sketch, parallel rows, the reduction in interleaved vector lanes where
 * they divide the row): 3 candidates each, valid, replayed, and their C
 * code right. */
START_TEST(max_min_sketches)
{
	static const tr_spec specs[] = {
		{ REDUCE_MAX, TIR_F32, TIR_F32, 37, 29, 0, false },
		{ REDUCE_MIN, TIR_F16, TIR_F16, 37, 64, 0, false },
		{ REDUCE_MAX, TIR_BF16, TIR_F32, 1, 97, 3, false },
	};
	const tr_spec *spec = &specs[_i];
	tir_program *p0 = tr_program(spec);
	int nd = 0;
	for (int i = 0; i < sketch_cpu_ndefs; i++) {
		const sketch_def *d = &sketch_cpu_defs[i];
		if (d->applies && !d->applies(p0, &cpu))
			continue;
		nd++;
		for (int c = 0; c < 3; c++) {
			tir_sched *s = tr_sched(spec);
			s->rng = tir_derive(1 + (uint64_t)c, 0xc9, (uint64_t)i);
			tir_error err = { "" };
			ck_assert_msg(d->apply(s, &cpu, &err) == 0, "%s: %s: %s", tr_name(spec), d->name,
				      err.msg);
			tr_check_replay(s, spec);
			tr_run(tir_sched_program(s), spec, "cpu", d->name);
			tir_sched_free(s);
		}
	}
	ck_assert_msg(nd > 0, "%s: no CPU sketch applies", tr_name(spec));
	tir_program_free(p0);
}
END_TEST

static Suite *make_sketch_suite(void)
{
	Suite *s = suite_create("sketch");
	TCase *tc = tcase_create("cpu");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, sample_deterministic);
	tcase_add_test(tc, compute_location);
	tcase_add_loop_test(tc, odd_shapes, 0, N_ODD);
	tcase_add_loop_test(tc, suite_workloads, 0, N_SUITE);
	tcase_add_loop_test(tc, max_min_sketches, 0, 3);
	suite_add_tcase(s, tc);
	tc = tcase_create("cuda");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, cuda_candidates);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(make_sketch_suite());
}
