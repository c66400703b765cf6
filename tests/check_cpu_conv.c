/*
 * check_cpu_conv.c — the CPU convolution sketches (sketch/cpu_conv.c,
 * cpu-conv-blocked and cpu-conv-direct):
 *
 *   - they are offered for channels-last dense, grouped and dilated
 *     convolutions (1-D, 2-D, 3-D, with epilogues) and not for what they must
 *     not take: a matmul, an NCHW convolution (weights [K, C, R, S]), a
 *     depthwise or transposed one, a CUDA target;
 *   - every sampled candidate of either is valid, replays to the same trace
 *     and its C code computes what the reference does on random inputs;
 *   - the blocked one packs the weights (a W_packed buffer) and the direct
 *     one does not; the register tile (the local write cache) fits AVX2's
 *     16 vector registers with its weight vectors and the broadcast input,
 *     and the outer parallel loop has at least two chunks per core;
 *   - a width no perfect tile suits is tiled imperfectly, under a predicate.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include "tir.h"
#include "ir/ir.h"
#include "codegen/codegen.h"
#include "measure/measure.h"
#include "sketch/sketch.h"
#include "sched/sched.h"
#include "testutil.h"

static tir_target host, avx2;

static void setup(void)
{
	tir_error err;
	ck_assert_msg(tir_target_parse("cpu", &host, &err) == 0, "%s", err.msg);
	ck_assert_msg(tir_target_parse("cpu:x86_64+avx2+fma", &avx2, &err) == 0, "%s", err.msg);
}

static tir_workload *parse(const char *json)
{
	tir_error err = { "" };
	tir_workload *w = tir_workload_parse(json, strlen(json), NULL, &err);
	ck_assert_msg(w, "%s: %s", json, err.msg);
	return w;
}

/* The id of sketch `name` among w's sketches on t, or -1. */
static int sketch_id(const tir_workload *w, const tir_target *t, const char *name)
{
	tir_error err = { "" };
	tir_sketch sk[TIR_MAX_SKETCHES];
	int n = tir_sketches(w, t, sk, TIR_MAX_SKETCHES, &err);
	ck_assert_msg(n >= 1, "no sketch: %s", err.msg);
	for (int i = 0; i < n; i++)
		if (!strcmp(sk[i].name, name))
			return sk[i].id;
	return -1;
}

/* Convolutions the sketches take: small shapes of each family. */
static const char *const taken[] = {
	"{\"op\":\"conv2d\",\"N\":1,\"C\":16,\"H\":9,\"W\":12,\"K\":32,\"R\":3,\"S\":3,\"pad\":1,\"layout\":\"NHWC\"}",
	"{\"op\":\"conv2d\",\"N\":2,\"C\":8,\"H\":11,\"W\":11,\"K\":24,\"R\":3,\"S\":3,\"stride\":2,\"pad\":1,\"groups\":2,\"layout\":\"NHWC\"}",
	"{\"op\":\"conv2d\",\"N\":1,\"C\":12,\"H\":10,\"W\":10,\"K\":16,\"R\":3,\"S\":3,\"pad\":2,\"dilation\":2,\"layout\":\"NHWC\",\"epilogue\":[\"bias\",\"relu\"]}",
	"{\"op\":\"conv2d\",\"N\":1,\"C\":3,\"H\":20,\"W\":20,\"K\":16,\"R\":7,\"S\":7,\"stride\":2,\"pad\":3,\"layout\":\"NHWC\"}",
	"{\"op\":\"conv2d\",\"N\":1,\"C\":16,\"H\":7,\"W\":7,\"K\":20,\"R\":1,\"S\":1,\"layout\":\"NHWC\"}",
	"{\"op\":\"conv1d\",\"N\":2,\"C\":6,\"W\":29,\"K\":16,\"S\":3,\"pad\":1,\"layout\":\"NWC\"}",
	"{\"op\":\"conv3d\",\"N\":1,\"C\":4,\"D\":4,\"H\":5,\"W\":6,\"K\":8,\"T\":2,\"R\":2,\"S\":2,\"layout\":\"NDHWC\"}",
};
#define N_TAKEN (int)(sizeof taken / sizeof *taken)

/* What they must not take. */
static const char *const refused[] = {
	"{\"op\":\"matmul\",\"M\":64,\"N\":64,\"K\":64}",
	"{\"op\":\"conv2d\",\"N\":1,\"C\":16,\"H\":9,\"W\":9,\"K\":16,\"R\":3,\"S\":3,\"pad\":1}",
	"{\"op\":\"depthwise_conv2d\",\"N\":1,\"C\":16,\"H\":9,\"W\":9,\"R\":3,\"S\":3,\"pad\":1,\"layout\":\"NHWC\"}",
	"{\"op\":\"conv2d_transpose\",\"N\":1,\"C\":4,\"H\":5,\"W\":3,\"K\":6,\"R\":4,\"S\":3,\"stride\":2,\"pad\":1}",
};
#define N_REFUSED (int)(sizeof refused / sizeof *refused)

START_TEST(applies)
{
	tir_workload *w = parse(taken[_i]);
	ck_assert_msg(sketch_id(w, &avx2, "cpu-conv-blocked") >= 0, "blocked not offered: %s", taken[_i]);
	ck_assert_msg(sketch_id(w, &avx2, "cpu-conv-direct") >= 0, "direct not offered: %s", taken[_i]);
	tir_target sm90;
	tir_error err;
	ck_assert_msg(tir_target_parse("cuda:sm_90", &sm90, &err) == 0, "%s", err.msg);
	ck_assert_msg(sketch_id(w, &sm90, "cpu-conv-blocked") < 0, "offered on CUDA: %s", taken[_i]);
	tir_workload_free(w);
}
END_TEST

START_TEST(not_applies)
{
	tir_workload *w = parse(refused[_i]);
	ck_assert_msg(sketch_id(w, &avx2, "cpu-conv-blocked") < 0, "blocked offered: %s", refused[_i]);
	ck_assert_msg(sketch_id(w, &avx2, "cpu-conv-direct") < 0, "direct offered: %s", refused[_i]);
	tir_workload_free(w);
}
END_TEST

/* The trace of s replays on a fresh schedule to the same trace. */
static void check_replays(const char *what, const tir_workload *w, const tir_sched *s)
{
	tir_error err = { "" };
	char *tr = tir_sched_trace(s);
	tir_sched *r = tir_sched_new(w, 99, &err);
	ck_assert_msg(r, "%s: %s", what, err.msg);
	ck_assert_msg(tir_sched_replay(r, tr, &err) == 0, "%s: replay: %s", what, err.msg);
	char *tr2 = tir_sched_trace(r);
	ck_assert_msg(!strcmp(tr, tr2), "%s: the replayed trace differs", what);
	free(tr);
	free(tr2);
	tir_sched_free(r);
}

/* The C code of s, built and run on the reference's inputs, is right. */
static void check_runs(const char *what, const tir_workload *w, const tir_sched *s, double **ref)
{
	tir_error err = { "" };
	const tir_program *p = tir_sched_program(s);
	ck_assert_msg(tir_verify(p, &host, &err) == 0, "%s: invalid: %s", what, err.msg);
	tir_code *c = tir_codegen(p, &host, &err);
	ck_assert_msg(c, "%s: codegen: %s", what, err.msg);
	if (!*ref) {
		int64_t n;
		ck_assert_msg(tir_measure_reference(w, c, 1, ref, &n, &err) == 0,
			      "%s: reference: %s", what, err.msg);
	}
	tir_measure_opts o = { .seed = 1, .no_timing = true, .timeout_s = 60, .reference = *ref };
	tir_measure_result res;
	memset(&res, 0, sizeof res);
	tir_measure(&tir_runner_cpu, w, c, &host, &o, &res);
	if (res.status != TIR_MEASURE_OK) {
		char *tr = tir_sched_trace(s);
		fprintf(stderr, "%s: failing trace %s\n", what, tr);
		free(tr);
	}
	ck_assert_msg(res.status == TIR_MEASURE_OK, "%s: %s: %s (max rel error %g)", what,
		      tir_measure_status_name(res.status), res.msg, res.max_rel_error);
	tir_measure_result_clear(&res);
	tir_code_free(c);
}

static const tir_buffer *buffer_named(const tir_program *p, const char *name)
{
	for (int i = 0; i < p->nbufs; i++)
		if (!p->bufs[i]->dead && !strcmp(p->bufs[i]->name, name))
			return p->bufs[i];
	return NULL;
}

/* Candidates of both sketches on every taken workload: valid, replayed,
 * right; the blocked ones pack the weights, the direct ones do not. */
#define N_DRAWS 3
START_TEST(candidates_right)
{
	static const char *const names[] = { "cpu-conv-blocked", "cpu-conv-direct" };
	tir_workload *w = parse(taken[_i]);
	double *ref = NULL;
	for (int k = 0; k < 2; k++) {
		int id = sketch_id(w, &host, names[k]);
		ck_assert_msg(id >= 0, "%s not offered: %s", names[k], taken[_i]);
		for (int d = 0; d < N_DRAWS; d++) {
			char what[512];
			snprintf(what, sizeof what, "%s draw %d of %.400s", names[k], d, taken[_i]);
			tir_error err = { "" };
			tir_sched *s = tir_sched_new(w, 7 + (uint64_t)(31 * d + k), &err);
			ck_assert_msg(s, "%s", err.msg);
			ck_assert_msg(tir_sketch_apply(w, &host, id, s, &err) == 0, "%s: %s", what, err.msg);
			const tir_program *p = tir_sched_program(s);
			ck_assert_msg((buffer_named(p, "W_packed") != NULL) == (k == 0),
				      "%s: the weights %s", what, k == 0 ? "not packed" : "packed");
			check_replays(what, w, s);
			check_runs(what, w, s, &ref);
			tir_sched_free(s);
		}
	}
	free(ref);
	tir_workload_free(w);
}
END_TEST

/* The inner factors of the first two sample_perfect_tile decisions of s's
 * trace: the k blocks' (kb) and the output width's (wb). */
static void tile_decisions(const tir_sched *s, int64_t *kb, int64_t *wb)
{
	char *tr = tir_sched_trace(s);
	cJSON *doc = cJSON_Parse(tr);
	ck_assert_msg(doc, "the trace does not parse");
	int found = 0;
	const cJSON *inst;
	cJSON_ArrayForEach(inst, cJSON_GetObjectItemCaseSensitive(doc, "insts")) {
		const cJSON *op = cJSON_GetObjectItemCaseSensitive(inst, "op");
		const cJSON *dec = cJSON_GetObjectItemCaseSensitive(inst, "decision");
		if (found < 2 && cJSON_IsString(op) && !strcmp(op->valuestring, "sample_perfect_tile")) {
			ck_assert_int_eq(cJSON_GetArraySize(dec), 2);
			*(found++ ? wb : kb) = (int64_t)cJSON_GetArrayItem(dec, 1)->valuedouble;
		}
	}
	ck_assert_int_eq(found, 2);
	cJSON_Delete(doc);
	free(tr);
}

/* On the AVX2 target, candidates of the suite's C2D-2 (256 -> 256
 * channels, 14 x 14, 3 x 3): the register tile (the one local buffer, wb x
 * kb vectors of 8) with its kb weight vectors and one broadcast fits 16
 * registers, at least 8 accumulators, and the first parallel loop of the
 * convolution has at least 2 chunks per core of the target. */
START_TEST(register_tile)
{
	tir_workload *w = parse("{\"op\":\"conv2d\",\"N\":1,\"C\":256,\"H\":14,\"W\":14,\"K\":256,"
				"\"R\":3,\"S\":3,\"pad\":1,\"layout\":\"NHWC\"}");
	int id = sketch_id(w, &avx2, "cpu-conv-blocked");
	ck_assert_int_ge(id, 0);
	for (int d = 0; d < 8; d++) {
		tir_error err = { "" };
		tir_sched *s = tir_sched_new(w, 100 + (uint64_t)d, &err);
		ck_assert_msg(s, "%s", err.msg);
		ck_assert_msg(tir_sketch_apply(w, &avx2, id, s, &err) == 0, "draw %d: %s", d, err.msg);
		const tir_program *p = tir_sched_program(s);
		ck_assert_msg(tir_verify(p, &avx2, &err) == 0, "draw %d: invalid: %s", d, err.msg);
		tir_code *c = tir_codegen(p, &avx2, &err);
		ck_assert_msg(c, "draw %d: codegen: %s", d, err.msg);
		/* the tile's decisions: (k0, kb) of the k blocks, then (w0, wb) */
		int64_t kb, wb;
		tile_decisions(s, &kb, &wb);
		const char *decl = strstr(c->source, "Y_local[");
		ck_assert_msg(decl, "draw %d: no register tile in the source", d);
		ck_assert_int_eq(atoll(decl + 8), wb * kb * 8);
		ck_assert_msg(wb * kb >= 8 && wb * kb + kb + 1 <= 16,
			      "draw %d: %lld x %lld accumulators + %lld weight vectors + 1 do not "
			      "fit 16", d, (long long)wb, (long long)kb, (long long)kb);
		/* the convolution's parallel loop: the last in the source */
		const char *par = NULL, *q = c->source;
		while ((q = strstr(q, "#pragma omp parallel for")))
			par = q++;
		ck_assert_msg(par, "draw %d: no parallel loop", d);
		const char *lt = strstr(par, " < ");
		ck_assert_msg(lt, "draw %d: no bound", d);
		long long ext = atoll(lt + 3);
		ck_assert_msg(ext >= 2 * avx2.cores || avx2.cores <= 0,
			      "draw %d: %lld parallel chunks for %d cores", d, ext, avx2.cores);
		tir_code_free(c);
		tir_sched_free(s);
	}
	tir_workload_free(w);
}
END_TEST

/* A width no perfect tile suits (109 columns, a prime, on AVX2's 16
 * registers: one column x 8 vectors spills, one x fewer has under 8
 * accumulators): the width tiled imperfectly, wb a categorical decision
 * among 2..16, the tile within the registers, a predicate on the columns past
 * the width; and the candidates compute what the reference does. */
START_TEST(imperfect_width)
{
	tir_workload *w = parse("{\"op\":\"conv1d\",\"N\":1,\"C\":4,\"W\":109,\"K\":64,"
				"\"S\":1,\"layout\":\"NWC\"}");
	int id = sketch_id(w, &avx2, "cpu-conv-direct");
	ck_assert_int_ge(id, 0);
	double *ref = NULL;
	for (int d = 0; d < 6; d++) {
		tir_error err = { "" };
		tir_sched *s = tir_sched_new(w, 300 + (uint64_t)d, &err);
		ck_assert_msg(s, "%s", err.msg);
		ck_assert_msg(tir_sketch_apply(w, &avx2, id, s, &err) == 0, "draw %d: %s", d, err.msg);
		char *tr = tir_sched_trace(s);
		cJSON *doc = cJSON_Parse(tr);
		ck_assert(doc);
		int64_t wb = 0, kb = 0;
		const cJSON *inst;
		cJSON_ArrayForEach(inst, cJSON_GetObjectItemCaseSensitive(doc, "insts")) {
			const char *op = cJSON_GetObjectItemCaseSensitive(inst, "op")->valuestring;
			const cJSON *in = cJSON_GetObjectItemCaseSensitive(inst, "in");
			const cJSON *dec = cJSON_GetObjectItemCaseSensitive(inst, "decision");
			/* the first categorical: the width's tile, among 2..16 */
			if (!strcmp(op, "sample_categorical") && !wb) {
				const cJSON *x;
				cJSON_ArrayForEach(x, in)
					ck_assert(x->valuedouble >= 2 && x->valuedouble <= 16);
				int k = (int)cJSON_GetArrayItem(dec, 0)->valuedouble;
				ck_assert(k >= 0 && k < cJSON_GetArraySize(in));
				wb = (int64_t)cJSON_GetArrayItem(in, k)->valuedouble;
			}
			if (!strcmp(op, "sample_perfect_tile") && !kb)
				kb = (int64_t)cJSON_GetArrayItem(dec, 1)->valuedouble;
		}
		cJSON_Delete(doc);
		ck_assert_msg(wb >= 2 && kb >= 1, "draw %d: no categorical width (%lld) or k tile: %.3000s",
			      d, (long long)wb, tr);
		free(tr);
		ck_assert_msg(wb * kb >= 8 && wb * kb + kb + 1 <= 16,
			      "draw %d: %lld x %lld accumulators + %lld weight vectors + 1 do not "
			      "fit 16", d, (long long)wb, (long long)kb, (long long)kb);
		const tir_program *p = tir_sched_program(s);
		ck_assert_msg(tir_verify(p, &avx2, &err) == 0, "draw %d: invalid: %s", d, err.msg);
		tir_code *c = tir_codegen(p, &avx2, &err);
		ck_assert_msg(c, "draw %d: codegen: %s", d, err.msg);
		char guard[32];
		snprintf(guard, sizeof guard, " < 109)");
		ck_assert_msg(109 % wb == 0 || strstr(c->source, guard),
			      "draw %d: a %lld-column tile without a guard on the width", d,
			      (long long)wb);
		tir_code_free(c);
		char what[64];
		snprintf(what, sizeof what, "imperfect width draw %d", d);
		check_replays(what, w, s);
		check_runs(what, w, s, &ref);
		tir_sched_free(s);
	}
	free(ref);
	tir_workload_free(w);
}
END_TEST

static Suite *make_suite(void)
{
	Suite *s = suite_create("cpu_conv");
	TCase *tc = tcase_create("cpu");
	tcase_set_timeout(tc, 600);
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_loop_test(tc, applies, 0, N_TAKEN);
	tcase_add_loop_test(tc, not_applies, 0, N_REFUSED);
	tcase_add_test(tc, register_tile);
	tcase_add_test(tc, imperfect_width);
	tcase_add_loop_test(tc, candidates_right, 0, N_TAKEN);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(make_suite());
}
