/*
 * check_sketch_gpu.c — the GPU sketches of tuner/sketch/gpu.c and the
 * cross-thread reduction they use.
 *
 * For odd shapes of every operator and every workload of the shared suite
 * (float32, and float16 with the same shapes), 16 candidates drawn from the
 * sketches that apply (round robin, fresh schedules with distinct seeds; a
 * draw that fails validation is redrawn, as the search does, within a bound)
 * are valid for cuda:sm_90, stage their inputs through shared memory (the
 * sketches without stages by design excepted), generate CUDA code and replay
 * from their traces to the same code.  NVRTC compiles 8 of the 16 of each odd
 * shape (so every operator has more than 16 compiled) and 1 of each suite
 * workload, rotating over the indices, all of a workload in one translation
 * unit, each candidate in a namespace of its own (a failure is retried alone
 * to name the candidate).  The first 6 candidates of each small odd shape
 * (every sketch among them) also run on the CPU through the C backend
 * (thread loops are serial loops there, cross-thread reductions included)
 * and must match the reference.  TIR_SKETCH_GPU_FULL=1 compiles and runs
 * all of them (minutes; NVRTC dominates).
 *
 * Also: threading validation accepts a reduction loop bound to threadIdx
 * only in the annotated cross-thread pattern, never one bound to blockIdx.
 * And hand-built row maxima and minima (tests/reducers.h): reductions
 * without data reuse, so the row sketches apply (never a tensor-core or
 * tiling one): a thread block per row with a cross-thread reduction, and a
 * thread per row; valid, replayed, compiled by NVRTC, run on the CPU (and
 * on a GPU where there is one) against a plain loop.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tir.h"
#include "ir/ir.h"
#include "sched/sched.h"
#include "sketch/sketch.h"
#include "codegen/codegen.h"
#include "measure/measure.h"
#include "testutil.h"
#include "reducers.h"

#define NCAND 16
#define MAX_DRAWS 8              /* draws per candidate before giving up */
/* Candidates of each odd shape run on the CPU (the first ones, which cover
 * every sketch), and only for shapes below RUN_MAX_FLOPS: GPU-shaped C code
 * repeats every cooperative copy per thread.  Candidates of each suite
 * workload compiled with NVRTC (rotating over the 16, so every index is
 * compiled somewhere); TIR_SKETCH_GPU_FULL=1 compiles and runs all. */
#define RUN_CANDS 6
#define RUN_MAX_FLOPS 4e6
#define SUITE_NVRTC 1
#define ODD_NVRTC 8


static tir_target cpu, sm90;

static void setup(void)
{
	tir_error err;
	ck_assert_msg(tir_target_parse("cpu", &cpu, &err) == 0, "%s", err.msg);
	ck_assert_msg(tir_target_parse("cuda:sm_90", &sm90, &err) == 0, "%s", err.msg);
}

/* Whether a sketch stages its inputs through shared memory by design. */
static bool has_stages(const sketch_def *d)
{
	return !strcmp(d->name, "gpu-tile-autocopy") || !strcmp(d->name, "gpu-tensorcore") ||
	       !strcmp(d->name, "gpu-wgmma");
}

static bool uses_shared(const tir_program *p)
{
	for (int i = 0; i < p->nbufs; i++)
		if (!p->bufs[i]->dead && p->bufs[i]->scope == TIR_SCOPE_SHARED)
			return true;
	return false;
}

/* One valid candidate of sketch d: the first of MAX_DRAWS seeds whose
 * schedule applies and validates.  *seed advances past the seeds used. */
static tir_sched *draw(const char *name, const tir_workload *w, const sketch_def *d,
		       uint64_t *seed, int *rejected)
{
	tir_error err = { "" };
	for (int k = 0; k < MAX_DRAWS; k++) {
		tir_sched *s = tir_sched_new(w, (*seed)++, &err);
		ck_assert_msg(s, "%s: %s", name, err.msg);
		if (d->apply(s, &sm90, &err) == 0 && tir_verify(tir_sched_program(s), &sm90, &err) == 0)
			return s;
		(*rejected)++;
		tir_sched_free(s);
	}
	ck_abort_msg("%s: sketch %s: no valid candidate in %d draws; last: %s", name, d->name,
		     MAX_DRAWS, err.msg);
	return NULL;
}

/* The CUDA source after its prelude (from the first extern declaration),
 * with the kernels' C linkage dropped so a namespace keeps them apart. */
static void append_body(tir_buf *all, const char *src, int k)
{
	const char *a = strstr(src, "\nextern ");
	ck_assert(a);
	buf_printf(all, "namespace cand%d {\n", k);
	const char *key = "extern \"C\" __global__";
	for (const char *p = a + 1;;) {
		const char *q = strstr(p, key);
		if (!q) {
			buf_puts(all, p);
			break;
		}
		buf_printf(all, "%.*s__global__", (int)(q - p), p);
		p = q + strlen(key);
	}
	buf_puts(all, "}\n");
}

/* The length of src's prelude: up to its first extern declaration. */
static size_t prelude_len(const char *src)
{
	const char *a = strstr(src, "\nextern ");
	ck_assert(a);
	return (size_t)(a - src + 1);
}

/* Compiles the candidates with NVRTC, those with the same prelude (the
 * helpers and intrinsic wrappers each needs) as one source. */
static void nvrtc_check(const char *name, int n, char **srcs, const char *const *what)
{
	if (n == 0)
		return;
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
			for (int i = 0; i < n; i++) {
				if (tir_nvrtc_compile(srcs[i], 90, &cubin, &size, &err) == 0) {
					free(cubin);
					continue;
				}
				char path[256];
				snprintf(path, sizeof path, "/tmp/check_sketch_gpu-%s-%d.cu", name, i);
				FILE *f = fopen(path, "w");
				if (f) {
					fputs(srcs[i], f);
					fclose(f);
				}
				ck_abort_msg("%s candidate %d (%s): NVRTC (source in %s): %.300s", name,
					     i, what[i], path, err.msg);
			}
			ck_abort_msg("%s: NVRTC rejects the candidates together: %s", name, err.msg);
		}
		ck_assert(size > 0);
		free(cubin);
		free(all.s);
	}
	free(done);
#else
	(void)name; (void)n; (void)srcs; (void)what;
#endif
}

/* Runs the program's C code on the CPU against the reference. */
static void run_c(const char *name, const char *what, const tir_workload *w,
		  const tir_program *p, const double **ref)
{
	tir_error err = { "" };
	ck_assert_msg(tir_verify(p, &cpu, &err) == 0, "%s %s: invalid on cpu: %s", name, what, err.msg);
	tir_code *c = tir_codegen(p, &cpu, &err);
	ck_assert_msg(c, "%s %s: C codegen: %s", name, what, err.msg);
	if (!*ref) {
		double *r;
		int64_t n;
		ck_assert_msg(tir_measure_reference(w, c, 1, &r, &n, &err) == 0, "%s: reference: %s",
			      name, err.msg);
		*ref = r;
	}
	tir_measure_opts o = { .seed = 1, .no_timing = true, .timeout_s = 60, .reference = *ref };
	tir_measure_result res;
	memset(&res, 0, sizeof res);
	tir_measure(&tir_runner_cpu, w, c, &cpu, &o, &res);
	ck_assert_msg(res.status == TIR_MEASURE_OK, "%s %s: %s: %s (max rel error %g)", name, what,
		      tir_measure_status_name(res.status), res.msg, res.max_rel_error);
	ck_assert(res.max_rel_error >= 0 && res.max_rel_error <= tir_measure_tolerance(c));
	tir_measure_result_clear(&res);
	tir_code_free(c);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Seconds spent per phase, printed with TIR_TEST_TIMING=1. */
static double t_draw, t_gen, t_cpu, t_nvrtc;

/* The whole check of one workload: `first`, the index of the first of
 * the `ncompile` candidates compiled with NVRTC (mod NCAND). */
static void check_workload(const char *name, const char *json, bool run_cpu, int first,
			   int ncompile)
{
	bool full = getenv("TIR_SKETCH_GPU_FULL") != NULL;
	if (full)
		ncompile = NCAND;
	tir_error err = { "" };
	tir_workload *w = tir_workload_parse(json, strlen(json), NULL, &err);
	ck_assert_msg(w, "%s: %s", name, err.msg);
	tir_sched *s0 = tir_sched_new(w, 0, &err);
	ck_assert_msg(s0, "%s: %s", name, err.msg);
	const sketch_def *defs[8];
	int nd = 0;
	for (int i = 0; i < sketch_gpu_ndefs && nd < 8; i++)
		if (!sketch_gpu_defs[i].applies ||
		    sketch_gpu_defs[i].applies(tir_sched_program(s0), &sm90))
			defs[nd++] = &sketch_gpu_defs[i];
	tir_sched_free(s0);
	ck_assert_msg(nd > 0, "%s: no GPU sketch applies", name);

	char *srcs[NCAND];
	const char *what[NCAND];
	const double *ref = NULL;
	uint64_t seed = 1;
	int rejected = 0;
	for (int i = 0; i < NCAND; i++) {
		const sketch_def *d = defs[i % nd];
		double t0 = now();
		tir_sched *s = draw(name, w, d, &seed, &rejected);
		double t1 = now();
		const tir_program *p = tir_sched_program(s);
		what[i] = d->name;
		if (has_stages(d))
			ck_assert_msg(uses_shared(p), "%s %s: no shared-memory stage", name, d->name);
		tir_code *c = tir_codegen(p, &sm90, &err);
		ck_assert_msg(c, "%s %s: CUDA codegen: %s", name, d->name, err.msg);
		ck_assert(strstr(c->source, "__global__"));
		/* the trace replays to the same code */
		char *trace = tir_sched_trace(s);
		tir_sched *r = tir_sched_new(w, 999, &err);
		ck_assert_msg(tir_sched_replay(r, trace, &err) == 0, "%s %s: replay: %s", name,
			      d->name, err.msg);
		tir_code *rc = tir_codegen(tir_sched_program(r), &sm90, &err);
		ck_assert_msg(rc && !strcmp(rc->source, c->source), "%s %s: replay differs", name,
			      d->name);
		tir_code_free(rc);
		tir_sched_free(r);
		free(trace);
		srcs[i] = c->source;
		c->source = NULL;
		tir_code_free(c);
		double t2 = now();
		bool wmma = !strcmp(d->name, "gpu-tensorcore"), wgmma = !strcmp(d->name, "gpu-wgmma");
		if (wmma)
			ck_assert_msg(strstr(srcs[i], "nvcuda::wmma::mma_sync("), "%s: no WMMA", name);
		if (wgmma)
			ck_assert_msg(strstr(srcs[i], "wgmma.mma_async"), "%s: no wgmma", name);
		/* (tensorized candidates run on the CPU in check_tensor) */
		if (run_cpu && !wmma && !wgmma &&
		    (full || (i < RUN_CANDS && tir_workload_flops(w) < RUN_MAX_FLOPS)))
			run_c(name, d->name, w, p, &ref);
		tir_sched_free(s);
		t_draw += t1 - t0;
		t_gen += t2 - t1;
		t_cpu += now() - t2;
	}
	double t3 = now();
	char *csrc[NCAND];
	const char *cwhat[NCAND];
	for (int i = 0; i < ncompile; i++) {
		csrc[i] = srcs[(first + i) % NCAND];
		cwhat[i] = what[(first + i) % NCAND];
	}
	nvrtc_check(name, ncompile, csrc, cwhat);
	t_nvrtc += now() - t3;
	if (getenv("TIR_TEST_TIMING"))
		fprintf(stderr, "%s: draw %.2f gen %.2f cpu %.2f nvrtc %.2f s\n", name, t_draw,
			t_gen, t_cpu, t_nvrtc);
	t_draw = t_gen = t_cpu = t_nvrtc = 0;
	for (int i = 0; i < NCAND; i++)
		free(srcs[i]);
	if (rejected > NCAND)
		fprintf(stderr, "%s: %d draws rejected for %d candidates\n", name, rejected, NCAND);
	free((double *)ref);
	tir_workload_free(w);
}

START_TEST(odd_shapes)
{
	check_workload(tu_odd[_i][0], tu_odd[_i][1], true, _i * ODD_NVRTC, ODD_NVRTC);
}
END_TEST

/* Suite entries: even indices float32, odd ones the same shape in float16. */
START_TEST(suite_workloads)
{
	int k = _i / 2;
	char *name = tu_suite_name(k), *json = tu_suite_workload_at(k);
	ck_assert(name && json);
	if (_i % 2) {
		size_t n = strlen(json);
		char *j2 = malloc(n + 32);
		ck_assert(json[n - 1] == '}');
		snprintf(j2, n + 32, "%.*s,\"dtype\":\"float16\"}", (int)(n - 1), json);
		free(json);
		json = j2;
	}
	char full[64];
	snprintf(full, sizeof full, "%s%s", name, _i % 2 ? "-f16" : "");
	check_workload(full, json, false, _i * SUITE_NVRTC, SUITE_NVRTC);
	free(name);
	free(json);
}
END_TEST

/* ---- validation of reductions bound to threads ------------------------------ */

static tir_workload *gmm_w;      /* the workload of the last gmm() */

static void done(tir_sched *s)
{
	tir_sched_free(s);
	tir_workload_free(gmm_w);
	gmm_w = NULL;
}

static tir_sched *gmm(const char *json)
{
	tir_error err = { "" };
	tir_workload *w = gmm_w = tir_workload_parse(json, strlen(json), NULL, &err);
	ck_assert_msg(w, "%s", err.msg);
	tir_sched *s = tir_sched_new(w, 1, &err);
	ck_assert_msg(s, "%s", err.msg);
	return s;
}

/* matmul loops i, j, k: k split by 32, the inner part bound to `tag`. */
static int bind_reduction(tir_sched *s, const char *tag, bool annotate, bool threads_outside)
{
	tir_error err = { "" };
	int b = tir_get_block(s, "compute", &err), l[3], r[2];
	ck_assert(b >= 0);
	ck_assert(tir_get_loops(s, b, l, 3, &err) == 3);
	int ij = tir_fuse(s, 2, l, &err);
	ck_assert(ij >= 0);
	tir_int f[2] = { TIR_LIT(0), TIR_LIT(32) };
	ck_assert(tir_split(s, l[2], 2, f, r, &err) >= 0);
	if (threads_outside) {
		int o[2] = { r[1], r[0] };
		ck_assert(tir_reorder(s, 2, o, &err) == 0);
	}
	ck_assert(tir_bind(s, ij, "blockIdx.x", &err) == 0);
	ck_assert(tir_bind(s, r[1], tag, &err) == 0);
	if (annotate)
		ck_assert(tir_annotate(s, b, "cross_thread_reduction", 1, &err) == 0);
	return b;
}

START_TEST(xthread_validation)
{
	const char *mm = "{\"op\":\"matmul\",\"M\":8,\"N\":4,\"K\":100}";
	tir_error err = { "" };
	/* unannotated: rejected */
	tir_sched *s = gmm(mm);
	bind_reduction(s, "threadIdx.x", false, true);
	ck_assert(tir_verify(tir_sched_program(s), &sm90, &err) != 0);
	ck_assert_msg(strstr(err.msg, "cross_thread_reduction"), "%s", err.msg);
	done(s);
	/* annotated, threads outside the serial reduction loop: accepted and run */
	s = gmm(mm);
	bind_reduction(s, "threadIdx.x", true, true);
	ck_assert_msg(tir_verify(tir_sched_program(s), &sm90, &err) == 0, "%s", err.msg);
	tir_code *c = tir_codegen(tir_sched_program(s), &sm90, &err);
	ck_assert_msg(c, "%s", err.msg);
	ck_assert(strstr(c->source, "__shfl_down_sync"));
	tir_code_free(c);
	const double *ref = NULL;
	run_c("xthread", "annotated", s->w, tir_sched_program(s), &ref);
	free((double *)ref);
	done(s);
	/* annotated, threads inside the serial loop: still one group per
	 * serial step, accepted */
	s = gmm(mm);
	bind_reduction(s, "threadIdx.x", true, false);
	ck_assert_msg(tir_verify(tir_sched_program(s), &sm90, &err) == 0, "%s", err.msg);
	c = tir_codegen(tir_sched_program(s), &sm90, &err);
	ck_assert_msg(c, "%s", err.msg);
	tir_code_free(c);
	done(s);
	/* a reduction bound to blockIdx: rejected even when annotated */
	s = gmm(mm);
	bind_reduction(s, "blockIdx.y", true, true);
	ck_assert(tir_verify(tir_sched_program(s), &sm90, &err) != 0);
	ck_assert_msg(strstr(err.msg, "blockIdx"), "%s", err.msg);
	done(s);
	/* annotated, but over threadIdx.y: not the pattern cuda.c implements */
	s = gmm(mm);
	bind_reduction(s, "threadIdx.y", true, true);
	ck_assert(tir_verify(tir_sched_program(s), &sm90, &err) != 0);
	ck_assert_msg(strstr(err.msg, "threadIdx.x"), "%s", err.msg);
	done(s);
}
END_TEST

/* Every GPU sketch that applies to a row max / min, 6 candidates each
 * (distinct seeds; a draw that fails validation is redrawn): no tensor-core
 * sketch among them; each valid, replayed to the same program, compiled by
 * NVRTC and run on the CPU and, where there is one, the GPU.  Shapes: one
 * long row, rows of a prime length, many short rows, each with both row
 * sketches: gpu-rows (a thread block per row, cross-thread) and
 * gpu-rows-thread (a thread per row). */
START_TEST(max_min_sketches)
{
	static const tr_spec specs[] = {
		{ REDUCE_MAX, TIR_F32, TIR_F32, 1, 4096, 0, false },
		{ REDUCE_MIN, TIR_F16, TIR_F16, 6, 211, 0, false },
		{ REDUCE_MAX, TIR_F16, TIR_F32, 64, 128, 0, false },
		{ REDUCE_MIN, TIR_F32, TIR_F32, 3, 1024, 5, false },
	};
	const tr_spec *spec = &specs[_i];
	tir_program *p0 = tr_program(spec);
	int nd = 0, nx = 0, nthread = 0;
	for (int i = 0; i < sketch_gpu_ndefs; i++) {
		const sketch_def *d = &sketch_gpu_defs[i];
		if (d->applies && !d->applies(p0, &sm90))
			continue;
		ck_assert_msg(!strncmp(d->name, "gpu-rows", 8), "%s: %s applies", tr_name(spec),
			      d->name);
		nd++;
		uint64_t seed = 1;
		for (int c = 0; c < 6; c++) {
			tir_sched *s = NULL;
			tir_error err = { "" };
			for (int k = 0; k < MAX_DRAWS && !s; k++) {
				s = tr_sched(spec);
				s->rng = tir_derive(seed++, 0x4ed, (uint64_t)i);
				if (d->apply(s, &sm90, &err) || tir_verify(tir_sched_program(s), &sm90, &err)) {
					tir_sched_free(s);
					s = NULL;
				}
			}
			ck_assert_msg(s, "%s: %s: no valid candidate in %d draws: %s", tr_name(spec),
				      d->name, MAX_DRAWS, err.msg);
			const tir_program *p = tir_sched_program(s);
			const tir_block *rb = program_find_block(p, "reduce");
			for (int a = 0; rb && a < rb->nann; a++)
				nx += !strcmp(rb->ann[a].key, "cross_thread_reduction");
			nthread += !strcmp(d->name, "gpu-rows-thread");
			tr_check_replay(s, spec);
			char *src = tr_cuda_source(p, tr_name(spec));
			free(src);
			tr_run(p, spec, "cpu", d->name);
			tr_run(p, spec, "cuda:sm_90", d->name);
			tir_sched_free(s);
		}
	}
	ck_assert_msg(nd >= 2, "%s: %d GPU sketches apply", tr_name(spec), nd);
	ck_assert_msg(nx > 0, "%s: no cross-thread candidate", tr_name(spec));
	ck_assert_msg(nthread > 0, "%s: no thread-per-row candidate", tr_name(spec));
	tir_program_free(p0);
}
END_TEST

static Suite *make_sketch_gpu_suite(void)
{
	Suite *s = suite_create("sketch_gpu");
	TCase *tc = tcase_create("xthread");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, xthread_validation);
	suite_add_tcase(s, tc);
	tc = tcase_create("reducers");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, max_min_sketches, 0, 4);
	suite_add_tcase(s, tc);
	tc = tcase_create("odd");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_loop_test(tc, odd_shapes, 0, tu_nodd);
	suite_add_tcase(s, tc);
	tc = tcase_create("suite");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_loop_test(tc, suite_workloads, 0, 2 * tu_suite_count());
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(make_sketch_gpu_suite());
}
