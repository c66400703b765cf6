/*
 * check_handsched.c — every workload of the shared suite and odd shapes of
 * every operator, unscheduled and under the hand-written schedules of
 * schedules.c: the C code matches the independent reference on random inputs
 * and the CUDA code is valid for sm_90 and compiles with NVRTC.
 *
 * With TIR_TRACE_DIR set, the traces of the schedules are written there as
 * <name>.cpu.json and <name>.cuda.json (examples/traces/ came from this).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tir.h"
#include "ir/ir.h"
#include "codegen/codegen.h"
#include "measure/measure.h"
#include "schedules.h"
#include "testutil.h"


static tir_target cpu, sm90;

static void write_trace(const char *name, const char *kind, const tir_sched *s)
{
	const char *dir = getenv("TIR_TRACE_DIR");
	if (!dir)
		return;
	char path[512];
	snprintf(path, sizeof path, "%s/%s.%s.json", dir, name, kind);
	FILE *f = fopen(path, "w");
	ck_assert_msg(f, "cannot write %s", path);
	char *t = tir_sched_trace(s);
	fprintf(f, "%s\n", t);
	fclose(f);
	free(t);
}

/* Runs the program's C code on the reference's inputs and checks it. */
static void run_c(const char *name, const char *what, const tir_workload *w,
		  const tir_program *p, const double **ref)
{
	tir_error err = { "" };
	ck_assert_msg(tir_verify(p, &cpu, &err) == 0, "%s %s: invalid: %s", name, what, err.msg);
	tir_code *c = tir_codegen(p, &cpu, &err);
	ck_assert_msg(c, "%s %s: codegen: %s", name, what, err.msg);
	if (!*ref) {
		double *r;
		int64_t n;
		ck_assert_msg(tir_measure_reference(w, c, 1, &r, &n, &err) == 0, "%s: reference: %s", name, err.msg);
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

static void compile_cuda(const char *name, const char *what, const tir_program *p)
{
	tir_error err = { "" };
	ck_assert_msg(tir_verify(p, &sm90, &err) == 0, "%s %s: invalid for sm_90: %s", name, what, err.msg);
	tir_code *c = tir_codegen(p, &sm90, &err);
	ck_assert_msg(c, "%s %s: cuda codegen: %s", name, what, err.msg);
	ck_assert(strstr(c->source, "__global__"));
#ifdef HAVE_CUDA
	char *cubin = NULL;
	size_t size = 0;
	ck_assert_msg(tir_nvrtc_compile(c->source, 90, &cubin, &size, &err) == 0,
		      "%s %s: NVRTC: %s", name, what, err.msg);
	ck_assert(size > 0);
	free(cubin);
#endif
	tir_code_free(c);
}

/* Replaying the schedule's trace gives byte-identical code. */
static void check_replay(const char *name, const tir_workload *w, const tir_sched *s,
			 const tir_target *t)
{
	tir_error err = { "" };
	char *trace = tir_sched_trace(s);
	tir_sched *r = tir_sched_new(w, 12345, &err);
	ck_assert_msg(r && tir_sched_replay(r, trace, &err) == 0, "%s: replay: %s", name, err.msg);
	tir_code *a = tir_codegen(tir_sched_program(s), t, &err);
	tir_code *b = tir_codegen(tir_sched_program(r), t, &err);
	ck_assert_msg(a && b, "%s: %s", name, err.msg);
	ck_assert_msg(!strcmp(a->source, b->source), "%s: replayed code differs", name);
	tir_code_free(a);
	tir_code_free(b);
	tir_sched_free(r);
	free(trace);
}

/* The whole check for one workload. */
static void check_workload(const char *name, const char *json, bool run_unscheduled)
{
	tir_error err = { "" };
	tir_workload *w = tir_workload_parse(json, strlen(json), NULL, &err);
	ck_assert_msg(w, "%s: %s", name, err.msg);
	const double *ref = NULL;

	tir_sched *s = tir_sched_new(w, 1, &err);
	ck_assert_msg(s, "%s: %s", name, err.msg);
	if (run_unscheduled)
		run_c(name, "unscheduled", w, tir_sched_program(s), &ref);
	compile_cuda(name, "unscheduled", tir_sched_program(s));
	tir_sched_free(s);

	s = tir_sched_new(w, 1, &err);
	ck_assert_msg(sched_cpu_tiled(s, &err) == 0, "%s: cpu schedule: %s", name, err.msg);
	run_c(name, "cpu-tiled", w, tir_sched_program(s), &ref);
	check_replay(name, w, s, &cpu);
	write_trace(name, "cpu", s);
	tir_sched_free(s);

	s = tir_sched_new(w, 1, &err);
	ck_assert_msg(sched_gpu_tiled(s, &err) == 0, "%s: gpu schedule: %s", name, err.msg);
	compile_cuda(name, "gpu-tiled", tir_sched_program(s));
	check_replay(name, w, s, &sm90);
	/* the GPU schedule is a valid program for the CPU too, with the same
	 * result; there every thread repeats the cooperative copies, so only
	 * small workloads are run that way */
	if (tir_workload_flops(w) < 2e7)
		run_c(name, "gpu-tiled-on-cpu", w, tir_sched_program(s), &ref);
	write_trace(name, "cuda", s);
	tir_sched_free(s);

	free((double *)ref);
	tir_workload_free(w);
}

static void setup(void)
{
	tir_error err;
	ck_assert_msg(tir_target_parse("cpu", &cpu, &err) == 0, "%s", err.msg);
	ck_assert_msg(tir_target_parse("cuda:sm_90", &sm90, &err) == 0, "%s", err.msg);
}

START_TEST(odd_shapes)
{
	check_workload(tu_odd[_i][0], tu_odd[_i][1], true);
}
END_TEST

START_TEST(suite_workloads)
{
	char *name = tu_suite_name(_i), *json = tu_suite_workload_at(_i);
	/* the unscheduled naive loops of the large suite entries take minutes
	 * under sanitizers; their scheduled versions are checked instead */
	check_workload(name, json, false);
	free(name);
	free(json);
}
END_TEST

static Suite *make_handsched_suite(void)
{
	Suite *s = suite_create("handsched");
	TCase *tc = tcase_create("odd");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_loop_test(tc, odd_shapes, 0, tu_nodd);
	suite_add_tcase(s, tc);
	tc = tcase_create("suite");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_loop_test(tc, suite_workloads, 0, tu_suite_count());
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(make_handsched_suite());
}
