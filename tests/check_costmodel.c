/*
 * check_costmodel.c — program features and the XGBoost model: features are
 * finite and deterministic for every operator and schedule, a saved model
 * loads and predicts identically, degenerate training data does not break
 * it, and it learns a ranking that is there to learn.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tir.h"
#include "ir/ir.h"
#include "costmodel/costmodel.h"
#include "sketch/sketch.h"
#include "measure/measure.h"
#include "schedules.h"
#include "testutil.h"

static tir_target cpu, sm90;

static void setup(void)
{
	tir_error err;
	ck_assert(tir_target_parse("cpu:x86_64+avx2+fma+avx512f", &cpu, &err) == 0);
	ck_assert(tir_target_parse("cuda:sm_90", &sm90, &err) == 0);
}

/* Features of one program twice: finite, equal, and not all zero. */
static void features_ok(const char *what, const tir_program *p, const tir_target *t)
{
	float a[CM_NFEATURES], b[CM_NFEATURES];
	tir_error err;
	ck_assert_msg(cm_features(p, t, a, &err) == 0, "%s: %s", what, err.msg);
	ck_assert(cm_features(p, t, b, &err) == 0);
	int nonzero = 0;
	for (int i = 0; i < CM_NFEATURES; i++) {
		ck_assert_msg(isfinite(a[i]), "%s: feature %s is %g", what, cm_feature_names[i], a[i]);
		ck_assert_msg(a[i] == b[i], "%s: feature %s differs between runs", what, cm_feature_names[i]);
		nonzero += a[i] != 0;
	}
	ck_assert_msg(nonzero >= 8, "%s: only %d non-zero features", what, nonzero);
}

START_TEST(features_every_workload)
{
	int n = tu_suite_count();
	ck_assert(n > 0);
	for (int i = 0; i < n; i++) {
		char *name = tu_suite_name(i), *json = tu_suite_workload_at(i);
		tir_error err;
		tir_workload *w = tir_workload_parse(json, strlen(json), NULL, &err);
		ck_assert(w);
		tir_sched *s = tir_sched_new(w, 1, &err);
		features_ok(name, tir_sched_program(s), &cpu);
		features_ok(name, tir_sched_program(s), &sm90);
		tir_sched_free(s);
		s = tir_sched_new(w, 1, &err);
		ck_assert(sched_cpu_tiled(s, &err) == 0);
		features_ok(name, tir_sched_program(s), &cpu);
		tir_sched_free(s);
		s = tir_sched_new(w, 1, &err);
		ck_assert(sched_gpu_tiled(s, &err) == 0);
		features_ok(name, tir_sched_program(s), &sm90);
		tir_sched_free(s);
		tir_workload_free(w);
		free(name);
		free(json);
	}
}
END_TEST

/* A schedule choice shows in the features: the GPU tiling has threads and
 * shared memory, the unscheduled program neither. */
START_TEST(features_see_the_schedule)
{
	const char *j = "{\"op\":\"matmul\",\"M\":256,\"N\":256,\"K\":256}";
	tir_error err;
	tir_workload *w = tir_workload_parse(j, strlen(j), NULL, &err);
	tir_sched *a = tir_sched_new(w, 1, &err), *b = tir_sched_new(w, 1, &err);
	ck_assert(sched_gpu_tiled(b, &err) == 0);
	float fa[CM_NFEATURES], fb[CM_NFEATURES];
	ck_assert(cm_features(tir_sched_program(a), &sm90, fa, &err) == 0);
	ck_assert(cm_features(tir_sched_program(b), &sm90, fb, &err) == 0);
	int threads = -1, shared = -1;
	for (int i = 0; i < CM_NFEATURES; i++) {
		if (!strcmp(cm_feature_names[i], "threads")) threads = i;
		if (!strcmp(cm_feature_names[i], "shared_bytes")) shared = i;
	}
	ck_assert(threads >= 0 && shared >= 0);
	ck_assert(fa[shared] == 0 && fb[threads] > fa[threads]);
	ck_assert(fb[threads] > 0 && fb[shared] > 0);
	tir_sched_free(a);
	tir_sched_free(b);
	tir_workload_free(w);
}
END_TEST

static int feature(const char *name)
{
	for (int i = 0; i < CM_NFEATURES; i++)
		if (!strcmp(cm_feature_names[i], name))
			return i;
	ck_abort_msg("no feature %s", name);
	return -1;
}

/* The features of the program schedule s has reached on the CPU. */
static void cpu_features(tir_sched *s, float *f)
{
	tir_error err;
	ck_assert_msg(cm_features(tir_sched_program(s), &cpu, f, &err) == 0, "%s", err.msg);
}

/* A grouped convolution (16 output channels in 2 groups) with its pad
 * inlined and its output channel split by `inner`, the inner part innermost:
 * its features. */
static void grouped_features(int64_t inner, float *f)
{
	const char *j = "{\"op\":\"conv2d\",\"N\":1,\"C\":8,\"H\":6,\"W\":6,\"K\":16,\"R\":3,"
			"\"S\":3,\"pad\":1,\"groups\":2,\"layout\":\"NHWC\"}";
	tir_error err;
	tir_workload *w = tir_workload_parse(j, strlen(j), NULL, &err);
	ck_assert_msg(w, "%s", err.msg);
	tir_sched *s = tir_sched_new(w, 1, &err);
	ck_assert(tir_compute_inline(s, tir_get_block(s, "pad", &err), &err) >= 0);
	int b = tir_get_block(s, "compute", &err), l[7], k[2];
	ck_assert_int_eq(tir_get_loops(s, b, l, 7, &err), 7);
	tir_int fk[2] = { TIR_LIT(0), TIR_LIT(inner) };
	ck_assert_msg(tir_split(s, l[3], 2, fk, k, &err) >= 0, "%s", err.msg);
	int order[8] = { l[0], l[1], l[2], k[0], l[4], l[5], l[6], k[1] };
	ck_assert_msg(tir_reorder(s, 8, order, &err) >= 0, "%s", err.msg);
	cpu_features(s, f);
	tir_sched_free(s);
	tir_workload_free(w);
}

/* Arithmetic by kind: a convolution's products and reduction adds (half
 * its ops each), none of the kinds it does not have; its pad's guards and
 * selects, evaluated per product once the pad is inlined (far more per op
 * than in a pad stage of its own).  The division of a grouped
 * convolution's input channel counts along the innermost loop only where
 * the loops do not decide it: a tile of the output channel within a group
 * divides by nothing, one across both groups does. */
START_TEST(features_count_kinds)
{
	const char *j = "{\"op\":\"conv2d\",\"N\":1,\"C\":8,\"H\":10,\"W\":10,\"K\":16,\"R\":3,"
			"\"S\":3,\"pad\":1,\"layout\":\"NHWC\"}";
	tir_error err;
	tir_workload *w = tir_workload_parse(j, strlen(j), NULL, &err);
	tir_sched *s = tir_sched_new(w, 1, &err);
	float a[CM_NFEATURES], b[CM_NFEATURES];
	cpu_features(s, a);
	ck_assert(tir_compute_inline(s, tir_get_block(s, "pad", &err), &err) >= 0);
	cpu_features(s, b);
	int mul = feature("op_mul_per_op"), add = feature("op_add_per_op");
	int sel = feature("op_select_per_op"), cmp = feature("op_cmp_per_op");
	for (int i = 0; i < 2; i++) {
		const float *f = i ? b : a;
		ck_assert_msg(fabsf(f[mul] + 1) < 1e-3 && fabsf(f[add] + 1) < 1e-3,
			      "mul %g add %g", f[mul], f[add]);
		const char *none[] = { "op_div_per_op", "op_minmax_per_op", "op_call_per_op",
				       "op_cast_per_op", "idx_divmod_inner_per_op" };
		for (size_t k = 0; k < sizeof none / sizeof *none; k++)
			ck_assert_msg(f[feature(none[k])] < -25, "%s %g", none[k], f[feature(none[k])]);
		ck_assert(f[sel] > -25 && f[cmp] > f[sel]);
	}
	ck_assert_msg(b[sel] > a[sel] + 2 && b[cmp] > a[cmp] + 2, "select %g -> %g, cmp %g -> %g",
		      a[sel], b[sel], a[cmp], b[cmp]);
	tir_sched_free(s);
	tir_workload_free(w);

	int dm = feature("idx_divmod_inner_per_op");
	grouped_features(8, a);
	grouped_features(16, b);
	ck_assert_msg(a[dm] < -25 && b[dm] > -25, "within a group %g, across groups %g", a[dm], b[dm]);
}
END_TEST

/* Rows show: a softmax's max and sum are half max, half sum; two row
 * reductions of 1024 floats (4 KiB a row), none held on chip and reduced by
 * one thread in the plain program; among the GPU row sketches' candidates,
 * one reducing a row across a warp or more, and one holding its row in
 * shared memory (the persistent reduction).  A matmul has no row. */
START_TEST(features_see_rows)
{
	const char *j = "{\"op\":\"graph\",\"inputs\":{\"x\":{\"shape\":[64,1024]}},\"nodes\":["
			"{\"name\":\"m\",\"op\":\"amax\",\"args\":[\"x\"],\"dim\":1,\"keepdim\":true},"
			"{\"name\":\"d\",\"op\":\"sub\",\"args\":[\"x\",\"m\"]},"
			"{\"name\":\"e\",\"op\":\"exp\",\"args\":[\"d\"]},"
			"{\"name\":\"z\",\"op\":\"sum\",\"args\":[\"e\"],\"dim\":1,\"keepdim\":true},"
			"{\"name\":\"y\",\"op\":\"div\",\"args\":[\"e\",\"z\"]}],\"outputs\":[\"y\"]}";
	tir_error err;
	tir_workload *w = tir_workload_parse(j, strlen(j), NULL, &err);
	ck_assert_msg(w, "%s", err.msg);
	int sum = feature("red_sum_frac"), mm = feature("red_minmax_frac");
	int rows = feature("row_blocks"), bytes = feature("row_bytes");
	int held = feature("row_held"), thr = feature("row_threads");
	float f[CM_NFEATURES];
	tir_sched *s = tir_sched_new(w, 1, &err);
	cpu_features(s, f);
	ck_assert_msg(fabsf(f[sum] - 0.5f) < 1e-6 && fabsf(f[mm] - 0.5f) < 1e-6, "sum %g minmax %g",
		      f[sum], f[mm]);
	ck_assert_msg(fabsf(f[rows] - log2f(3)) < 1e-5, "row_blocks %g", f[rows]);
	ck_assert_msg(fabsf(f[bytes] - log2f(4097)) < 1e-4, "row_bytes %g", f[bytes]);
	ck_assert_msg(f[held] == 0 && f[thr] == 1, "held %g threads %g", f[held], f[thr]);
	tir_sched_free(s);

	tir_sketch sk[TIR_MAX_SKETCHES];
	int n = tir_sketches(w, &sm90, sk, TIR_MAX_SKETCHES, &err);
	ck_assert_msg(n >= 1, "%s", err.msg);
	bool warp = false, shared = false;
	for (int k = 0; k < n; k++)
		for (uint64_t seed = 1; seed <= 24; seed++) {
			s = tir_sched_new(w, seed, &err);
			if (tir_sketch_apply(w, &sm90, sk[k].id, s, &err) == 0 &&
			    tir_verify(tir_sched_program(s), &sm90, &err) == 0) {
				ck_assert(cm_features(tir_sched_program(s), &sm90, f, &err) == 0);
				ck_assert(f[held] >= 0 && f[held] <= 1);
				warp |= f[thr] >= log2f(33);
				shared |= f[held] > 0.4f;
			}
			tir_sched_free(s);
		}
	ck_assert_msg(warp && shared, "a row across a warp: %d, a row held in shared memory: %d",
		      warp, shared);
	tir_workload_free(w);

	j = "{\"op\":\"matmul\",\"M\":64,\"N\":64,\"K\":64}";
	w = tir_workload_parse(j, strlen(j), NULL, &err);
	s = tir_sched_new(w, 1, &err);
	cpu_features(s, f);
	ck_assert_msg(f[sum] == 1 && f[mm] == 0 && f[rows] == 0 && f[bytes] == 0,
		      "matmul: sum %g minmax %g rows %g bytes %g", f[sum], f[mm], f[rows], f[bytes]);
	tir_sched_free(s);
	tir_workload_free(w);
}
END_TEST

/* The loop annotation "software_pipeline" of p, if one has a copy stage. */
static int annotated_stages(const tir_stmt *s)
{
	int n = 1;
	for (int i = 0; i < s->nann; i++)
		if (s->kind == STMT_FOR && !strcmp(s->ann[i].key, "software_pipeline"))
			n = (int)s->ann[i].value;
	for (int i = 0; i < s->nkids; i++) {
		int k = annotated_stages(s->kids[i]);
		if (k > n)
			n = k;
	}
	return n;
}

/* Tensor cores and pipelining show: tensorized candidates have all their
 * products on tensor cores and a positive MMA-per-fragment reuse, and the
 * pipeline feature follows the sampled stages; the SIMT tiling has none. */
START_TEST(features_see_tensor_cores)
{
	const char *j = "{\"op\":\"matmul\",\"M\":256,\"N\":256,\"K\":256,\"dtype\":\"float16\"}";
	tir_error err;
	tir_workload *w = tir_workload_parse(j, strlen(j), NULL, &err);
	int tf = feature("tensor_frac"), mf = feature("mma_per_frag"), pf = feature("pipeline");
	float f[CM_NFEATURES];
	tir_sched *s = tir_sched_new(w, 1, &err);
	ck_assert(sched_gpu_tiled(s, &err) == 0);
	ck_assert(cm_features(tir_sched_program(s), &sm90, f, &err) == 0);
	ck_assert(f[tf] == 0 && f[mf] == 0 && f[pf] == 1);
	tir_sched_free(s);
	int piped = 0;
	for (uint64_t seed = 1; seed <= 12; seed++) {
		s = tir_sched_new(w, seed, &err);
		if (sketch_tensorcore_apply(s, &sm90, &err) != 0) {
			tir_sched_free(s);
			continue;
		}
		const tir_program *p = tir_sched_program(s);
		ck_assert(cm_features(p, &sm90, f, &err) == 0);
		ck_assert_msg(f[tf] > 0.99f, "seed %llu: tensor_frac %g", (unsigned long long)seed, f[tf]);
		ck_assert(f[mf] > 0);
		ck_assert_int_eq((int)f[pf], annotated_stages(p->root));
		piped += f[pf] > 1;
		tir_sched_free(s);
	}
	ck_assert_msg(piped > 0, "no pipelined candidate in 12 seeds");
	/* warpgroup MMAs, and the TMA pipelines among them as the code has them */
	int wf = feature("wgmma_frac"), tma = feature("tma"), with = 0, without = 0;
	for (uint64_t seed = 1; seed <= 16; seed++) {
		s = tir_sched_new(w, seed, &err);
		ck_assert_msg(sketch_wgmma_apply(s, &sm90, &err) == 0, "%s", err.msg);
		const tir_program *p = tir_sched_program(s);
		ck_assert(cm_features(p, &sm90, f, &err) == 0);
		ck_assert_msg(f[wf] > 0.99f, "seed %llu: wgmma_frac %g", (unsigned long long)seed, f[wf]);
		tir_code *c = tir_codegen(p, &sm90, &err);
		ck_assert_msg(c, "%s", err.msg);
		ck_assert_int_eq((int)f[tma], c->launches[0].ntmaps > 0);
		with += f[tma] > 0;
		without += f[tma] == 0;
		tir_code_free(c);
		tir_sched_free(s);
	}
	ck_assert_msg(with > 0 && without > 0, "16 seeds: %d with TMA, %d without", with, without);
	tir_workload_free(w);
}
END_TEST

/* Synthetic rows: the throughput grows with feature 3 and falls with
 * feature 7, across two workloads of different scale. */
static void synth(int n, unsigned seed, float *f, double *g, int scale)
{
	srand(seed);
	for (int i = 0; i < n; i++) {
		for (int k = 0; k < CM_NFEATURES; k++)
			f[i * CM_NFEATURES + k] = (float)(rand() % 1000) / 100.0f;
		g[i] = scale * (1.0 + f[i * CM_NFEATURES + 3] - 0.5 * f[i * CM_NFEATURES + 7] + 10);
	}
}

static void synth_reversed(int n, unsigned seed, float *f, double *g);

static double pairwise(const double *pred, const double *truth, int n)
{
	int ok = 0, all = 0;
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++) {
			if (truth[i] == truth[j])
				continue;
			all++;
			ok += (pred[i] > pred[j]) == (truth[i] > truth[j]);
		}
	return all ? (double)ok / all : 1;
}

START_TEST(learns_and_round_trips)
{
	enum { N = 200 };
	float *f = malloc(sizeof(float) * N * CM_NFEATURES);
	double g[N], pred[N], pred2[N];
	tir_error err;
	cm_model *m = cm_model_new();
	ck_assert(cm_model_predict(m, 1, f, pred) == -1);   /* untrained */
	synth(N, 1, f, g, 1);
	ck_assert(cm_model_add(m, "w1", N / 2, f, g, &err) == 0);
	synth(N, 2, f, g, 1000);
	ck_assert(cm_model_add(m, "w2", N / 2, f, g, &err) == 0);
	ck_assert(cm_model_trained(m));
	/* held-out rows of a third scale */
	synth(N, 3, f, g, 7);
	ck_assert(cm_model_predict(m, N, f, pred) == 0);
	double acc = pairwise(pred, g, N);
	ck_assert_msg(acc > 0.8, "pairwise accuracy %.3f", acc);
	unsigned char *blob;
	size_t len;
	ck_assert(cm_model_save(m, &blob, &len, &err) == 0);
	cm_model *m2 = cm_model_load(blob, len, &err);
	ck_assert_msg(m2, "%s", err.msg);
	ck_assert_int_eq(cm_model_rows(m2), cm_model_rows(m));
	ck_assert(cm_model_predict(m2, N, f, pred2) == 0);
	for (int i = 0; i < N; i++)
		ck_assert(pred[i] == pred2[i]);
	/* corrupt blobs are refused with a message */
	ck_assert(cm_model_load(blob, len / 2, &err) == NULL);
	ck_assert(strstr(err.msg, "truncated"));
	/* a model saved with another feature table (its identity after the
	 * magic and the count), or by the build before identities were kept */
	blob[12] ^= 1;
	ck_assert(cm_model_load(blob, len, &err) == NULL);
	ck_assert_msg(strstr(err.msg, "other features"), "%s", err.msg);
	blob[12] ^= 1;
	blob[5] = '1';
	ck_assert(cm_model_load(blob, len, &err) == NULL);
	ck_assert_msg(strstr(err.msg, "older build"), "%s", err.msg);
	blob[0] = 'X';
	ck_assert(cm_model_load(blob, len, &err) == NULL);
	ck_assert(strstr(err.msg, "magic"));
	ck_assert(cm_model_load(blob, 3, &err) == NULL);
	ck_assert(strstr(err.msg, "magic"));
	free(blob);
	cm_model_free(m2);
	cm_model_free(m);
	free(f);
}
END_TEST

/* A replica that reads another's model swaps the loaded one in whole
 * (cm_model_replace): afterwards the model it hands its searches holds the
 * loaded rows and scores exactly as the loaded model does, its own and
 * shared boosters alike, and goes on learning from there. */
START_TEST(replace_installs_whole)
{
	enum { N = 200 };
	float *f = malloc(sizeof(float) * N * CM_NFEATURES);
	double g[N], pa[N], pb[N], pc[N];
	tir_error err;
	/* a: this replica's copy; b: the writer's, of other rows */
	cm_model *a = cm_model_new(), *b = cm_model_new();
	synth(N / 2, 1, f, g, 1);
	ck_assert(cm_model_add(a, "w1", N / 2, f, g, &err) == 0);
	synth_reversed(N / 2, 4, f, g);
	ck_assert(cm_model_add(b, "w1", N / 2, f, g, &err) == 0);
	synth(N / 2, 2, f, g, 1000);
	ck_assert(cm_model_add(b, "w2", N / 2, f, g, &err) == 0);
	synth(N, 3, f, g, 7);
	ck_assert(cm_model_predict_group(a, "w1", N, f, pa) == 0);
	ck_assert(cm_model_predict_group(b, "w1", N, f, pb) == 0);
	bool differ = false;
	for (int i = 0; i < N; i++)
		differ = differ || pa[i] != pb[i];
	ck_assert(differ);
	unsigned char *blob;
	size_t len;
	ck_assert(cm_model_save(b, &blob, &len, &err) == 0);
	cm_model *c = cm_model_load(blob, len, &err);
	ck_assert_msg(c, "%s", err.msg);
	free(blob);
	cm_model_set_threads(a, 2);
	cm_model_replace(a, c);                     /* c is a's now */
	ck_assert_int_eq(cm_model_rows(a), cm_model_rows(b));
	ck_assert(cm_model_trained(a));
	cm_stats sa, sb;
	cm_model_stats(a, &sa);
	cm_model_stats(b, &sb);
	ck_assert_int_eq(sa.workloads, 2);
	ck_assert(sa.judged_pairs == sb.judged_pairs && sa.recent_batches == 0);
	ck_assert(cm_model_predict_group(a, "w1", N, f, pa) == 0);
	for (int i = 0; i < N; i++)
		ck_assert(pa[i] == pb[i]);
	ck_assert(cm_model_predict(a, N, f, pa) == 0);
	ck_assert(cm_model_predict(b, N, f, pc) == 0);
	for (int i = 0; i < N; i++)
		ck_assert(pa[i] == pc[i]);
	/* and it learns on from the loaded rows */
	synth(N / 2, 5, f, g, 3);
	ck_assert(cm_model_add(a, "w3", N / 2, f, g, &err) == 0);
	ck_assert_int_eq(cm_model_rows(a), cm_model_rows(b) + N / 2);
	ck_assert_int_eq(cm_model_trained_rows(a), cm_model_rows(a));
	cm_model_free(a);
	cm_model_free(b);
	free(f);
}
END_TEST

/* What GET /v1/models shows: rows, when the booster was last trained, and
 * how well it ranked each batch before learning it, over all batches (kept
 * in the blob) and over the newest eight (in memory only). */
START_TEST(stats_say_how_it_ranks)
{
	enum { N = 100, B = 10 };
	float *f = malloc(sizeof(float) * N * CM_NFEATURES);
	double g[N];
	tir_error err;
	cm_stats st;
	cm_model *m = cm_model_new();
	cm_model_stats(m, &st);
	ck_assert(st.rows == 0 && !st.trained && st.trained_at == 0 && st.judged_pairs == 0 &&
		  st.recent_batches == 0);
	synth(N, 1, f, g, 1);
	ck_assert(cm_model_add(m, "w1", N, f, g, &err) == 0);
	cm_model_stats(m, &st);
	/* trained, but nothing judged: there was no booster before these rows */
	ck_assert(st.trained && st.rows == N && st.trained_at > 1.7e9 && st.judged_pairs == 0);
	synth(N, 2, f, g, 1000);
	ck_assert(cm_model_add(m, "w2", N, f, g, &err) == 0);
	cm_model_stats(m, &st);
	/* w2's rows were ranked first: every pair of distinct throughputs */
	ck_assert_int_eq(st.recent_batches, 1);
	ck_assert(st.judged_pairs > 0.9 * N * (N - 1) / 2 && st.judged_pairs <= N * (N - 1) / 2);
	ck_assert(st.recent_pairs == st.judged_pairs && st.recent_right == st.judged_right);
	ck_assert_msg(st.judged_right / st.judged_pairs > 0.8, "accuracy %.3f",
		      st.judged_right / st.judged_pairs);
	ck_assert_int_eq(st.workloads, 2);
	/* ten batches more: the newest eight are the recent ones */
	for (int b = 0; b < 10; b++) {
		synth(B, 10 + (unsigned)b, f, g, 3);
		ck_assert(cm_model_add(m, "w3", B, f, g, &err) == 0);
	}
	cm_model_stats(m, &st);
	ck_assert_int_eq(st.recent_batches, 8);
	ck_assert(st.recent_pairs > 0 && st.recent_pairs <= 8 * B * (B - 1) / 2);
	ck_assert(st.judged_pairs >= st.recent_pairs + 0.9 * N * (N - 1) / 2);   /* w2 and w3 */
	/* a model loaded: the tallies stay, the recent batches and the time do not */
	unsigned char *blob;
	size_t len;
	ck_assert(cm_model_save(m, &blob, &len, &err) == 0);
	cm_model *m2 = cm_model_load(blob, len, &err);
	ck_assert_msg(m2, "%s", err.msg);
	cm_stats st2;
	cm_model_stats(m2, &st2);
	ck_assert(st2.rows == st.rows && st2.judged_pairs == st.judged_pairs &&
		  st2.judged_right == st.judged_right && st2.recent_batches == 0 && st2.trained_at == 0);
	free(blob);
	cm_model_free(m2);
	cm_model_free(m);
	free(f);
}
END_TEST

/* Rows appended for many workloads and trained once make the booster that
 * adding them workload by workload makes (a model rebuilt or seeded at
 * start-up); appended rows alone train nothing. */
START_TEST(append_then_train)
{
	enum { N = 120 };
	float *f = malloc(sizeof(float) * 3 * N * CM_NFEATURES);
	double g[3 * N], pa[N], pb[N];
	tir_error err;
	for (int w = 0; w < 3; w++)
		synth(N, 10 + w, &f[(size_t)w * N * CM_NFEATURES], &g[w * N], 1 + 100 * w);
	cm_model *a = cm_model_new(), *b = cm_model_new();
	const char *names[3] = { "w1", "w2", "w3" };
	for (int w = 0; w < 3; w++) {
		ck_assert(cm_model_add(a, names[w], N, &f[(size_t)w * N * CM_NFEATURES], &g[w * N],
				       &err) == 0);
		cm_model_append(b, names[w], N, &f[(size_t)w * N * CM_NFEATURES], &g[w * N]);
	}
	ck_assert(!cm_model_trained(b));
	ck_assert(cm_model_predict(b, N, f, pb) == -1);
	ck_assert_int_eq(cm_model_rows(b), 3 * N);
	ck_assert(cm_model_train(b, &err) == 0);
	ck_assert(cm_model_trained(b));
	ck_assert_int_eq(cm_model_trained_rows(b), 3 * N);
	synth(N, 20, f, g, 5);
	ck_assert(cm_model_predict(a, N, f, pa) == 0);
	ck_assert(cm_model_predict(b, N, f, pb) == 0);
	for (int i = 0; i < N; i++)
		ck_assert(pa[i] == pb[i]);
	cm_model_free(a);
	cm_model_free(b);
	free(f);
}
END_TEST

/* A workload whose candidates rank unlike the others' (throughput falls
 * with feature 3 and grows with feature 7): the shared booster, which
 * cannot tell its rows from the other workloads', ranks new candidates of
 * it poorly; scored for that workload (cm_model_predict_group), its own
 * rows' booster corrects the ranking (shared 0.45, blended 0.84 when
 * written).  The usual workloads gain too, an unknown one gets the shared
 * scores, all-failed rows add no own booster, and a saved model blends
 * exactly as before. */
static void synth_reversed(int n, unsigned seed, float *f, double *g)
{
	synth(n, seed, f, g, 1);
	for (int i = 0; i < n; i++)
		g[i] = 1.0 - f[i * CM_NFEATURES + 3] + 0.5 * f[i * CM_NFEATURES + 7] + 10;
}

START_TEST(own_rows_blend)
{
	enum { N = 200, OTHER = 64, B = 16, OWN = 96 };
	float *f = malloc(sizeof(float) * N * CM_NFEATURES);
	double g[N], shared[N], blend[N], again[N];
	tir_error err;
	cm_model *m = cm_model_new();
	synth(OTHER, 1, f, g, 1);
	ck_assert(cm_model_add(m, "w1", OTHER, f, g, &err) == 0);
	synth(OTHER, 2, f, g, 1000);
	ck_assert(cm_model_add(m, "w2", OTHER, f, g, &err) == 0);
	/* the search's batches of the odd workload */
	synth_reversed(OWN, 3, f, g);
	for (int b = 0; b < OWN; b += B)
		ck_assert(cm_model_add(m, "odd", B, &f[(size_t)b * CM_NFEATURES], &g[b], &err) == 0);
	synth_reversed(N, 4, f, g);
	ck_assert(cm_model_predict(m, N, f, shared) == 0);
	ck_assert(cm_model_predict_group(m, "odd", N, f, blend) == 0);
	double as = pairwise(shared, g, N), ab = pairwise(blend, g, N);
	ck_assert_msg(ab > 0.75 && ab > as + 0.15, "odd workload: shared %.3f, blended %.3f", as, ab);
	/* the same scores on a second call, and from a saved model */
	ck_assert(cm_model_predict_group(m, "odd", N, f, again) == 0);
	for (int i = 0; i < N; i++)
		ck_assert(again[i] == blend[i]);
	unsigned char *blob;
	size_t len;
	ck_assert(cm_model_save(m, &blob, &len, &err) == 0);
	cm_model *m2 = cm_model_load(blob, len, &err);
	ck_assert_msg(m2, "%s", err.msg);
	ck_assert(cm_model_predict_group(m2, "odd", N, f, again) == 0);
	for (int i = 0; i < N; i++)
		ck_assert(again[i] == blend[i]);
	/* a model saved before the tallies were (format TIRCM2: the same blob
	 * without them, 4 doubles for each of the 3 workloads) still loads */
	blob[5] = '2';
	cm_model *v2 = cm_model_load(blob, len - 3 * 4 * sizeof(double), &err);
	ck_assert_msg(v2, "%s", err.msg);
	ck_assert(cm_model_predict(v2, N, f, again) == 0);
	for (int i = 0; i < N; i++)
		ck_assert(again[i] == shared[i]);
	cm_model_free(v2);
	blob[5] = '3';
	ck_assert(cm_model_load(blob, len - 1, &err) == NULL);   /* cut short */
	ck_assert(strstr(err.msg, "truncated"));
	/* an unknown workload: the shared scores */
	ck_assert(cm_model_predict_group(m, "never-seen", N, f, again) == 0);
	for (int i = 0; i < N; i++)
		ck_assert(again[i] == shared[i]);
	/* a usual workload, whose rows the shared booster now confuses with
	 * the odd one's (both sets of features are alike), is helped too */
	synth(N, 5, f, g, 3);
	ck_assert(cm_model_predict(m, N, f, shared) == 0);
	ck_assert(cm_model_predict_group(m, "w1", N, f, blend) == 0);
	as = pairwise(shared, g, N);
	ab = pairwise(blend, g, N);
	ck_assert_msg(ab > 0.7 && ab > as + 0.1, "w1: shared %.3f, blended %.3f", as, ab);
	/* a workload whose rows all failed: nothing of its own to learn */
	double zero[B] = { 0 };
	ck_assert(cm_model_add(m, "failed", B, f, zero, &err) == 0);
	ck_assert(cm_model_add(m, "failed", B, &f[B * CM_NFEATURES], zero, &err) == 0);
	ck_assert(cm_model_predict(m, N, f, shared) == 0);
	ck_assert(cm_model_predict_group(m, "failed", N, f, again) == 0);
	for (int i = 0; i < N; i++)
		ck_assert(again[i] == shared[i]);
	free(blob);
	cm_model_free(m2);
	cm_model_free(m);
	free(f);
}
END_TEST

/* cm_xgboost over programs: features computed on several threads give
 * the model exactly what one thread gives it, and the same scores. */
START_TEST(threads_change_nothing)
{
	enum { N = 48 };
	tir_error err;
	const char *json = "{\"op\":\"matmul\",\"M\":256,\"N\":256,\"K\":256}";
	tir_workload *w = tir_workload_parse(json, strlen(json), NULL, &err);
	ck_assert_msg(w, "%s", err.msg);
	tir_sched *s[N];
	int n = tir_sample_candidates(w, &sm90, N, 5, s, &err);
	ck_assert_msg(n >= 32, "%d samples: %s", n, err.msg);
	ck_assert(sm90.kind == TIR_TARGET_CUDA);
	const tir_program *progs[N];
	double g[N], one[N], four[N];
	for (int i = 0; i < n; i++) {
		progs[i] = tir_sched_program(s[i]);
		g[i] = 1 + (i * 37) % 11;
	}
	cm_model *a = cm_model_new(), *b = cm_model_new();
	cm_model_set_threads(b, 4);
	cm_xgboost.update(a, w, &sm90, n, progs, g);
	cm_xgboost.update(b, w, &sm90, n, progs, g);
	ck_assert(cm_model_trained(a) && cm_model_trained(b));
	ck_assert(cm_xgboost.predict(a, w, &sm90, n, progs, one) == 0);
	ck_assert(cm_xgboost.predict(b, w, &sm90, n, progs, four) == 0);
	for (int i = 0; i < n; i++)
		ck_assert_msg(one[i] == four[i], "candidate %d: %g vs %g", i, one[i], four[i]);
	cm_model_free(a);
	cm_model_free(b);
	for (int i = 0; i < n; i++)
		tir_sched_free(s[i]);
	tir_workload_free(w);
}
END_TEST

/* Past 16,384 rows a training takes a bounded set: the workload just
 * added keeps its rows, the others share the rest; it still ranks.  The
 * same rows train the same booster (xgb.c: seedless, CM_XGB_THREADS):
 * a second model given them predicts exactly the same.  (Rows are
 * appended without training until the last workload: each training of
 * this size takes seconds.) */
START_TEST(bounded_training)
{
	enum { PER = 6000 };
	float *f = malloc(sizeof(float) * PER * CM_NFEATURES);
	double g[PER], pred[PER], pred2[PER];
	tir_error err;
	cm_model *m = cm_model_new(), *m2 = cm_model_new();
	for (int w = 0; w < 3; w++) {
		char name[16];
		snprintf(name, sizeof name, "w%d", w);
		synth(PER, (unsigned)w + 1, f, g, 1 + w);
		if (w < 2) {
			cm_model_append(m, name, PER, f, g);
			cm_model_append(m2, name, PER, f, g);
		} else {
			ck_assert(cm_model_add(m, name, PER, f, g, &err) == 0);
			ck_assert(cm_model_add(m2, name, PER, f, g, &err) == 0);
		}
		ck_assert_int_eq(cm_model_rows(m), (w + 1) * PER);
		if (w == 0) {   /* under the limit: every row */
			ck_assert(cm_model_train(m, &err) == 0);
			ck_assert_int_eq(cm_model_trained_rows(m), PER);
		}
	}
	ck_assert_int_eq(cm_model_trained_rows(m), 16384);
	ck_assert_int_eq(cm_model_trained_rows(m2), 16384);
	synth(PER, 99, f, g, 3);
	ck_assert(cm_model_predict(m, PER, f, pred) == 0);
	ck_assert(cm_model_predict(m2, PER, f, pred2) == 0);
	for (int i = 0; i < PER; i++)
		ck_assert_msg(pred[i] == pred2[i], "row %d: %g vs %g", i, pred[i], pred2[i]);
	double acc = pairwise(pred, g, PER);
	ck_assert_msg(acc > 0.8, "pairwise accuracy %.3f", acc);
	cm_model_free(m2);
	cm_model_free(m);
	free(f);
}
END_TEST

/* A training leaves no OpenMP thread pool behind it: tird trains the shared
 * model in the process whose local workers then fork a child per batch to
 * run CPU candidates, whose parallel loops are OpenMP regions, and libgomp's
 * pool does not survive fork (the child waits for its lost threads until
 * the watchdog kills it).  Train and predict, then measure candidates with
 * parallel loops in this process: they must end ok (with trainings on 4
 * threads this test times out). */
START_TEST(measures_after_training)
{
	enum { N = 200, C = 6 };
	float *f = malloc(sizeof(float) * N * CM_NFEATURES);
	double g[N];
	tir_error err;
	cm_model *m = cm_model_new();
	synth(N, 1, f, g, 1);
	ck_assert(cm_model_add(m, "w", N, f, g, &err) == 0);
	ck_assert(cm_model_trained(m));
	double pred[N];
	ck_assert(cm_model_predict(m, N, f, pred) == 0);   /* the search's use, too */
	free(f);
	tir_target host;
	ck_assert(tir_target_parse("cpu", &host, &err) == 0);
	const char *json = "{\"op\":\"matmul\",\"M\":128,\"N\":128,\"K\":64}";
	tir_workload *w = tir_workload_parse(json, strlen(json), NULL, &err);
	ck_assert_msg(w, "%s", err.msg);
	tir_sched *s[C];
	int n = tir_sample_candidates(w, &host, C, 3, s, &err);
	ck_assert_msg(n > 0, "%s", err.msg);
	char *traces[C];
	int parallel = 0;
	for (int i = 0; i < n; i++) {
		traces[i] = tir_sched_trace(s[i]);
		tir_code *code = tir_codegen(tir_sched_program(s[i]), &host, &err);
		ck_assert_msg(code, "%s", err.msg);
		parallel += strstr(code->source, "omp parallel") != NULL;
		tir_code_free(code);
	}
	ck_assert_msg(parallel > 0, "no sampled candidate has a parallel loop");
	tir_candidate out[C];
	memset(out, 0, sizeof out);
	ck_assert_int_eq(tir_measure_local(NULL, w, &host, n, (const char *const *)traces, out), 0);
	for (int i = 0; i < n; i++) {
		ck_assert_msg(out[i].status == TIR_MEASURE_OK, "candidate %d: %s", i,
			      out[i].msg ? out[i].msg : "?");
		free((char *)out[i].msg);
		free(traces[i]);
		tir_sched_free(s[i]);
	}
	tir_workload_free(w);
	cm_model_free(m);
}
END_TEST

START_TEST(degenerate_data)
{
	enum { N = 64 };
	float *f = calloc(N * CM_NFEATURES, sizeof(float));
	double g[N], pred[N];
	tir_error err;
	/* all failed */
	for (int i = 0; i < N; i++)
		g[i] = 0;
	cm_model *m = cm_model_new();
	ck_assert(cm_model_add(m, "w", N, f, g, &err) == 0);
	ck_assert(!cm_model_trained(m));
	ck_assert(cm_model_predict(m, N, f, pred) == -1);
	/* all equal, and NaN / infinite throughputs treated as failures */
	for (int i = 0; i < N; i++)
		g[i] = i % 3 ? 5.0 : (i % 2 ? NAN : INFINITY);
	ck_assert(cm_model_add(m, "w", N, f, g, &err) == 0);
	ck_assert(cm_model_predict(m, N, f, pred) == 0 || !cm_model_trained(m));
	unsigned char *blob;
	size_t len;
	ck_assert(cm_model_save(m, &blob, &len, &err) == 0);
	cm_model *m2 = cm_model_load(blob, len, &err);
	ck_assert(m2);
	cm_model_free(m2);
	free(blob);
	cm_model_free(m);
	free(f);
}
END_TEST

static Suite *make_costmodel_suite(void)
{
	Suite *s = suite_create("costmodel");
	TCase *tc = tcase_create("features");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, features_every_workload);
	tcase_add_test(tc, features_see_the_schedule);
	tcase_add_test(tc, features_see_tensor_cores);
	tcase_add_test(tc, features_count_kinds);
	tcase_add_test(tc, features_see_rows);
	suite_add_tcase(s, tc);
	tc = tcase_create("model");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, learns_and_round_trips);
	tcase_add_test(tc, stats_say_how_it_ranks);
	tcase_add_test(tc, degenerate_data);
	tcase_add_test(tc, append_then_train);
	tcase_add_test(tc, own_rows_blend);
	tcase_add_test(tc, threads_change_nothing);
	tcase_add_test(tc, replace_installs_whole);
	suite_add_tcase(s, tc);
	/* trainings of thousands of rows: seconds each */
	tc = tcase_create("bounded");
	tcase_set_timeout(tc, 300);   /* seconds of training; slow on 2 busy cores */
	tcase_add_test(tc, bounded_training);
	tcase_add_test(tc, measures_after_training);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(make_costmodel_suite());
}
