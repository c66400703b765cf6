/*
 * check_measure.c — the builders and runners (tuner/measure/, codegen/nvrtc.c)
 * with hand-written sources, so no part of the IR, schedules or code
 * generators is needed: a correct kernel, one that crashes, one that never
 * returns, one that returns an error, one that computes the wrong values and
 * one that does not compile each end in the right status, and the test
 * process (the runner's caller) lives on.  The inputs' conversions (float16,
 * bfloat16) and the error metric are checked against the compiler's own
 * types.  NVRTC and the CUDA runner are checked where the build has CUDA; the
 * CUDA runner's kernels run only where a driver loads (the GPU machine).
 * The batch guard (tir_child_batch) is checked with plain C items that
 * crash, hang, exit, ask to end their process or fail to set up, so its
 * bookkeeping is tested on any machine.
 */
#include <math.h>
#include <pthread.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <check.h>
#include "ir/ir.h"
#include "codegen/codegen.h"
#include "measure/measure.h"
#include "testutil.h"

/* ---- hand-made code ----------------------------------------------------------- */

/* Code of n-element float32 arguments: inputs `nin`, then the output. */
static tir_code *make_code(const char *source, int nin, int64_t n, int dtype)
{
	tir_code *c = calloc(1, sizeof *c);
	c->source = strdup(source);
	c->nargs = nin + 1;
	c->args = calloc((size_t)c->nargs, sizeof *c->args);
	for (int i = 0; i <= nin; i++) {
		tir_arg_info *a = &c->args[i];
		snprintf(a->name, sizeof a->name, "%c", i == nin ? 'C' : 'A' + i);
		a->dtype = dtype;
		a->elem_bytes = dtype_bytes(dtype);
		a->elems = n;
		a->is_output = i == nin;
	}
	snprintf(c->entry, sizeof c->entry, "tir_entry");
	return c;
}

static void free_code(tir_code *c)
{
	free(c->source);
	free(c->args);
	free(c->launches);
	free(c);
}

static const char *const src_add =
	"#include <stdint.h>\n"
	"int tir_entry(void *const *args) {\n"
	"  const float *a = args[0], *b = args[1]; float *c = args[2];\n"
	"  #pragma omp parallel for\n"
	"  for (int i = 0; i < 4096; i++) c[i] = a[i] + b[i];\n"
	"  return 0;\n"
	"}\n";

static tir_target cpu_target(void)
{
	tir_target t;
	tir_error err;
	ck_assert_msg(tir_target_parse("cpu", &t, &err) == 0, "%s", err.msg);
	return t;
}

/* Builds and runs c on this CPU. */
static int run_cpu(tir_code *c, double timeout_s, tir_measure_result *r)
{
	tir_target t = cpu_target();
	tir_error err = { "" };
	memset(r, 0, sizeof *r);
	tir_artifact *a = tir_runner_cpu.build(c, &t, &err);
	if (!a) {
		r->status = TIR_MEASURE_BUILD_ERROR;
		snprintf(r->msg, sizeof r->msg, "%s", err.msg);
		return -1;
	}
	tir_measure_opts o = { .seed = 42, .timeout_s = timeout_s };
	int rc = tir_runner_cpu.run(a, c, &o, r);
	tir_runner_cpu.free(a);
	return rc;
}

/* ---- CPU runner ------------------------------------------------------------------ */

START_TEST(cpu_correct_kernel)
{
	tir_code *c = make_code(src_add, 2, 4096, TIR_F32);
	tir_measure_result r;
	int rc = run_cpu(c, 20, &r);
	ck_assert_msg(rc == 0 && r.status == TIR_MEASURE_OK, "status %s: %s",
		      tir_measure_status_name(r.status), r.msg);
	ck_assert_int_eq(r.nrepeats, 5);
	ck_assert(r.median_us > 0);
	for (int i = 0; i < r.nrepeats; i++)
		ck_assert(r.repeat_us[i] > 0);
	ck_assert_int_eq(r.out_elems, 4096);
	float *a = malloc(4096 * 4), *b = malloc(4096 * 4);
	tir_measure_fill(c, 0, 42, a);
	tir_measure_fill(c, 1, 42, b);
	for (int i = 0; i < 4096; i++) {
		ck_assert(a[i] >= -1 && a[i] <= 1);
		ck_assert(r.output[i] == (double)(a[i] + b[i]));
	}
	ck_assert(a[0] != b[0]);              /* arguments get distinct values */
	free(a);
	free(b);
	tir_measure_result_clear(&r);
	free_code(c);
}
END_TEST

START_TEST(cpu_crash)
{
	pid_t me = getpid();
	tir_code *c = make_code("int tir_entry(void *const *args) {\n"
				"  *(volatile int *)args[3] = 1; return 0; }\n",
				2, 16, TIR_F32);
	tir_measure_result r;
	ck_assert_int_eq(run_cpu(c, 10, &r), -1);
	ck_assert_int_eq(r.status, TIR_MEASURE_CRASH);
	ck_assert_msg(strstr(r.msg, "SIGSEGV") != NULL, "%s", r.msg);
	ck_assert(r.output == NULL);
	free_code(c);
	/* The caller lives on, and runs the next candidate. */
	ck_assert_int_eq(getpid(), me);
	c = make_code(src_add, 2, 4096, TIR_F32);
	ck_assert_int_eq(run_cpu(c, 20, &r), 0);
	tir_measure_result_clear(&r);
	free_code(c);
}
END_TEST

START_TEST(cpu_timeout)
{
	tir_code *c = make_code("int tir_entry(void *const *args) {\n"
				"  for (volatile int i = 0; ; i++) ; return 0; }\n",
				2, 16, TIR_F32);
	tir_measure_result r;
	ck_assert_int_eq(run_cpu(c, 1, &r), -1);
	ck_assert_int_eq(r.status, TIR_MEASURE_TIMEOUT);
	ck_assert_msg(strstr(r.msg, "timed out after 1 s") != NULL, "%s", r.msg);
	free_code(c);
}
END_TEST

START_TEST(cpu_nonzero_return)
{
	tir_code *c = make_code("int tir_entry(void *const *args) { return 3; }\n",
				2, 16, TIR_F32);
	tir_measure_result r;
	ck_assert_int_eq(run_cpu(c, 10, &r), -1);
	ck_assert_int_eq(r.status, TIR_MEASURE_RUN_ERROR);
	ck_assert_msg(strstr(r.msg, "returned 3") != NULL, "%s", r.msg);
	free_code(c);
}
END_TEST

/* The CPU's run_batch: candidates that share one process are checked on
 * freshly filled arguments each (one that overwrites its inputs cannot fail
 * or pass the next), one that writes past its output crashes on the guard
 * instead of corrupting the others, and each correct one is timed in
 * o->rounds rounds, recorded at its best round. */
START_TEST(cpu_batch)
{
	static const char *const src[] = {
		NULL,                                           /* src_add */
		"int tir_entry(void *const *args) {\n"         /* past its output */
		"  const float *a = args[0], *b = args[1]; float *c = args[2];\n"
		"  for (int i = 0; i < 4096; i++) c[i] = a[i] + b[i];\n"
		"  c[4096 + 100] = 0; return 0; }\n",
		"int tir_entry(void *const *args) {\n"         /* wrong */
		"  const float *a = args[0], *b = args[1]; float *c = args[2];\n"
		"  for (int i = 0; i < 4096; i++) c[i] = a[i] - b[i]; return 0; }\n",
		"int tir_entry(void *const *args) { return 3; }\n",
		"int tir_entry(void *const *args) {\n"         /* right, then spoils a */
		"  float *a = args[0], *b = args[1], *c = args[2];\n"
		"  for (int i = 0; i < 4096; i++) { c[i] = a[i] + b[i]; a[i] = 1e30f; }\n"
		"  return 0; }\n",
		NULL,                                           /* src_add again */
	};
	enum { N = 6 };
	tir_target t = cpu_target();
	tir_error err = { "" };
	tir_code *c[N + 1];
	tir_artifact *a[N + 1];
	for (int i = 0; i < N; i++)
		c[i] = make_code(src[i] ? src[i] : src_add, 2, 4096, TIR_F32);
	/* another argument list (int32): measured alone, against the same
	 * reference, so wrong */
	c[N] = make_code("int tir_entry(void *const *args) {\n"
			 "  const int *a = args[0], *b = args[1]; int *c = args[2];\n"
			 "  for (int i = 0; i < 4096; i++) c[i] = a[i] + b[i]; return 0; }\n",
			 2, 4096, TIR_I32);
	for (int i = 0; i <= N; i++) {
		a[i] = tir_runner_cpu.build(c[i], &t, &err);
		ck_assert_msg(a[i] != NULL, "%s", err.msg);
	}
	float *x = malloc(4096 * 4), *y = malloc(4096 * 4);
	double *ref = malloc(4096 * sizeof *ref);
	tir_measure_fill(c[0], 0, 42, x);
	tir_measure_fill(c[0], 1, 42, y);
	for (int i = 0; i < 4096; i++)
		ref[i] = (double)x[i] + (double)y[i];
	tir_measure_opts o = { .seed = 42, .timeout_s = 10, .rounds = 4 };
	tir_measure_result r[N + 1];
	int children = tir_runner_cpu.run_batch(N + 1, (const tir_artifact *const *)a,
						(const tir_code *const *)c, &o, ref, 4096, r);
	/* checking: {0, 1} {2..5}; timing: one; the int32 one alone */
	ck_assert_int_eq(children, 4);
	static const tir_measure_status want[N + 1] = {
		TIR_MEASURE_OK, TIR_MEASURE_CRASH, TIR_MEASURE_WRONG_RESULT,
		TIR_MEASURE_RUN_ERROR, TIR_MEASURE_OK, TIR_MEASURE_OK,
		TIR_MEASURE_WRONG_RESULT,
	};
	for (int i = 0; i <= N; i++) {
		ck_assert_msg(r[i].status == want[i], "candidate %d: %s (%s)", i,
			      tir_measure_status_name(r[i].status), r[i].msg);
		ck_assert(r[i].output == NULL);
		if (want[i] != TIR_MEASURE_OK) {
			ck_assert(r[i].latency_us == 0 && r[i].nrepeats == 0);
			continue;
		}
		ck_assert(r[i].max_rel_error >= 0 && r[i].max_rel_error < 1e-6);
		ck_assert_int_eq(r[i].nrepeats, 4);
		double best = r[i].repeat_us[0];
		for (int k = 0; k < 4; k++)
			best = r[i].repeat_us[k] < best ? r[i].repeat_us[k] : best;
		ck_assert(r[i].latency_us == best && best > 0);
		ck_assert(r[i].median_us >= r[i].latency_us);
	}
	ck_assert_msg(strstr(r[1].msg, "SIGSEGV") != NULL, "%s", r[1].msg);
	ck_assert_msg(strstr(r[3].msg, "returned 3") != NULL, "%s", r[3].msg);
	for (int i = 0; i <= N; i++) {
		tir_runner_cpu.free(a[i]);
		free_code(c[i]);
	}
	free(ref);
	free(y);
	free(x);
}
END_TEST

/* Code of two float32 outputs of n elements: inputs A, B, outputs C, D. */
static tir_code *two_output_code(const char *source, int64_t n)
{
	tir_code *c = make_code(source, 2, n, TIR_F32);
	c->nargs = 4;
	c->args = realloc(c->args, 4 * sizeof *c->args);
	c->args[3] = c->args[2];
	snprintf(c->args[3].name, sizeof c->args[3].name, "D");
	return c;
}

/* The reference of C = A + B, D = A - B (n each), concatenated: C then D. */
static double *two_output_ref(const tir_code *c, uint64_t seed, int64_t n)
{
	float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
	double *ref = malloc(2 * (size_t)n * sizeof *ref);
	tir_measure_fill(c, 0, seed, x);
	tir_measure_fill(c, 1, seed, y);
	for (int64_t i = 0; i < n; i++) {
		ref[i] = (double)x[i] + (double)y[i];
		ref[n + i] = (double)x[i] - (double)y[i];
	}
	free(x);
	free(y);
	return ref;
}

/* Several outputs: the runner brings back every output, concatenated in
 * argument order with the size of each, and the check judges each on its
 * own and names the one at fault (run, run_batch, tir_measure). */
START_TEST(cpu_two_outputs)
{
	static const char *const src =
		"int tir_entry(void *const *args) {\n"
		"  const float *a = args[0], *b = args[1]; float *c = args[2], *d = args[3];\n"
		"  for (int i = 0; i < 1024; i++) { c[i] = a[i] + b[i]; d[i] = a[i] - b[i]%s; }\n"
		"  return 0; }\n";
	char good[512], bad[512];
	snprintf(good, sizeof good, src, "");
	snprintf(bad, sizeof bad, src, " + 0.5f");
	tir_code *c[2] = { two_output_code(good, 1024), two_output_code(bad, 1024) };
	ck_assert_int_eq(tir_code_noutputs(c[0]), 2);
	ck_assert_int_eq(tir_code_output_elems(c[0]), 2048);
	ck_assert_int_eq(tir_code_output_bytes(c[0]), 8192);
	double *ref = two_output_ref(c[0], 42, 1024);

	tir_measure_result r;
	ck_assert_int_eq(run_cpu(c[0], 20, &r), 0);
	ck_assert_int_eq(r.out_elems, 2048);
	ck_assert_int_eq(r.noutputs, 2);
	ck_assert(r.output_elems[0] == 1024 && r.output_elems[1] == 1024);
	for (int i = 0; i < 2048; i++)
		ck_assert(r.output[i] == ref[i]);
	double e;
	char msg[512] = "";
	ck_assert_int_eq(tir_measure_judge(c[0], ref, 2048, r.output, r.out_elems, &e, msg,
					   sizeof msg), TIR_MEASURE_OK);
	ck_assert(e == 0);
	/* D off by 0.5 where |D| is at most 2: an error of 1/4 in D, none in C */
	r.output[1024 + 7] += 0.5;
	ck_assert_int_eq(tir_measure_judge(c[0], ref, 2048, r.output, r.out_elems, &e, msg,
					   sizeof msg), TIR_MEASURE_WRONG_RESULT);
	ck_assert_msg(strstr(msg, "in output \"D\""), "%s", msg);
	r.output[1024 + 7] -= 0.5;
	r.output[3] = NAN;
	ck_assert_int_eq(tir_measure_judge(c[0], ref, 2048, r.output, r.out_elems, &e, msg,
					   sizeof msg), TIR_MEASURE_WRONG_RESULT);
	ck_assert_msg(isinf(e) && strstr(msg, "in output \"C\""), "%s", msg);
	tir_measure_result_clear(&r);

	tir_target t = cpu_target();
	tir_error err = { "" };
	tir_artifact *a[2];
	for (int i = 0; i < 2; i++) {
		a[i] = tir_runner_cpu.build(c[i], &t, &err);
		ck_assert_msg(a[i] != NULL, "%s", err.msg);
	}
	tir_measure_opts o = { .seed = 42, .timeout_s = 10, .rounds = 2, .reference = ref };
	tir_measure_result rb[2];
	tir_runner_cpu.run_batch(2, (const tir_artifact *const *)a, (const tir_code *const *)c,
				 &o, ref, 2048, rb);
	ck_assert_msg(rb[0].status == TIR_MEASURE_OK, "%s", rb[0].msg);
	ck_assert_int_eq(rb[1].status, TIR_MEASURE_WRONG_RESULT);
	ck_assert_msg(strstr(rb[1].msg, "in output \"D\""), "%s", rb[1].msg);
	ck_assert(rb[1].max_rel_error > 0.1 && rb[1].max_rel_error < 1);
	for (int i = 0; i < 2; i++) {
		tir_runner_cpu.free(a[i]);
		/* the whole pipeline, with the reference given */
		int rc = tir_measure(&tir_runner_cpu, NULL, c[i], &t, &o, &r);
		ck_assert_int_eq(rc, i == 0 ? 0 : -1);
		ck_assert_int_eq(r.status, i == 0 ? TIR_MEASURE_OK : TIR_MEASURE_WRONG_RESULT);
		ck_assert_int_eq(r.noutputs, 2);
		tir_measure_result_clear(&r);
		free_code(c[i]);
	}
	free(ref);
}
END_TEST

START_TEST(cpu_build_error)
{
	tir_code *c = make_code("int tir_entry(void *const *args) { return nosuch; }\n",
				2, 16, TIR_F32);
	tir_measure_result r;
	ck_assert_int_eq(run_cpu(c, 10, &r), -1);
	ck_assert_int_eq(r.status, TIR_MEASURE_BUILD_ERROR);
	ck_assert_msg(strstr(r.msg, "nosuch") != NULL, "%s", r.msg);
	free_code(c);
}
END_TEST

/* A group build: three sources in one compiler run, each artifact with its
 * own entry point and directory (a hard link to the one shared object), so
 * that each runs and is freed alone; a group with a source that does not
 * compile fails whole with the compiler's message and leaves nothing. */
START_TEST(cpu_group_build)
{
	static const char *const sub =
		"#include <stdint.h>\n"
		"int tir_entry(void *const *args) {\n"
		"  const float *a = args[0], *b = args[1]; float *c = args[2];\n"
		"  for (int i = 0; i < 4096; i++) c[i] = a[i] - b[i];\n"
		"  return 0;\n"
		"}\n";
	static const char *const three = "int tir_entry(void *const *args) { return 3; }\n";
	tir_code *c[3] = { make_code(src_add, 2, 4096, TIR_F32), make_code(sub, 2, 4096, TIR_F32),
			   make_code(three, 2, 4096, TIR_F32) };
	tir_target t = cpu_target();
	tir_error err = { "" };
	tir_artifact *a[3];
	ck_assert_msg(tir_runner_cpu.build_group(3, (const tir_code *const *)c, &t, a, &err) == 0,
		      "%s", err.msg);
	for (int i = 0; i < 3; i++) {
		char want[32];
		snprintf(want, sizeof want, "tir_entry_g%d", i);
		ck_assert_str_eq(a[i]->entry, want);
		for (int j = 0; j < i; j++)
			ck_assert_str_ne(a[i]->dir, a[j]->dir);
	}
	char dir0[sizeof a[0]->dir];
	snprintf(dir0, sizeof dir0, "%s", a[0]->dir);
	tir_runner_cpu.free(a[1]);               /* the others still run */
	ck_assert_int_eq(access(dir0, F_OK), 0);
	tir_measure_opts o = { .seed = 42, .timeout_s = 20, .repeats = 2 };
	tir_measure_result r;
	memset(&r, 0, sizeof r);
	ck_assert_int_eq(tir_runner_cpu.run(a[0], c[0], &o, &r), 0);
	float *x = malloc(4096 * 4), *y = malloc(4096 * 4);
	tir_measure_fill(c[0], 0, 42, x);
	tir_measure_fill(c[0], 1, 42, y);
	for (int i = 0; i < 4096; i++)
		ck_assert(r.output[i] == (double)(x[i] + y[i]));
	tir_measure_result_clear(&r);
	tir_runner_cpu.free(a[0]);
	ck_assert_int_ne(access(dir0, F_OK), 0);
	ck_assert_int_eq(tir_runner_cpu.run(a[2], c[2], &o, &r), -1);
	ck_assert_msg(strstr(r.msg, "returned 3") != NULL, "%s", r.msg);
	tir_measure_result_clear(&r);
	tir_runner_cpu.free(a[2]);

	/* one bad source: the group fails, naming it; no artifact */
	tir_code *bad = make_code("int tir_entry(void *const *args) { return nosuch; }\n",
				  2, 4096, TIR_F32);
	const tir_code *g[2] = { c[0], bad };
	a[0] = a[1] = (tir_artifact *)1;
	ck_assert_int_eq(tir_runner_cpu.build_group(2, g, &t, a, &err), -1);
	ck_assert_msg(strstr(err.msg, "nosuch") != NULL, "%s", err.msg);
	ck_assert(a[0] == NULL && a[1] == NULL);
	free_code(bad);
	for (int i = 0; i < 3; i++)
		free_code(c[i]);
	free(x);
	free(y);
}
END_TEST

/* A compile past its time limit (TIRD_CC_TIMEOUT_S, 3 s here) is killed
 * with every process it started: a stand-in compiler ($CC) that starts a
 * child (as gcc starts cc1) and waits; after the build fails naming the
 * limit, the child is gone too (it used to run on, orphaned, holding a
 * core). */
START_TEST(cpu_compile_timeout_kills_the_tree)
{
	char dir[] = "/tmp/check_measure_cc.XXXXXX";
	ck_assert(mkdtemp(dir));
	char cc[128], pidfile[128];
	snprintf(cc, sizeof cc, "%s/slowcc", dir);
	snprintf(pidfile, sizeof pidfile, "%s/child.pid", dir);
	FILE *f = fopen(cc, "w");
	ck_assert(f);
	fprintf(f, "#!/bin/sh\nsleep 300 &\necho $! > %s\nwait\n", pidfile);
	fclose(f);
	ck_assert_int_eq(chmod(cc, 0700), 0);
	const char *old = getenv("CC");
	char *saved = old ? strdup(old) : NULL;
	setenv("CC", cc, 1);
	setenv("TIRD_CC_TIMEOUT_S", "3", 1);
	tir_code *c = make_code("int tir_entry(void *const *args) { return 0; }\n", 2, 16, TIR_F32);
	tir_measure_result r;
	double t0 = tir_now_s();
	ck_assert_int_eq(run_cpu(c, 10, &r), -1);
	double took = tir_now_s() - t0;
	if (saved)
		setenv("CC", saved, 1);
	else
		unsetenv("CC");
	free(saved);
	unsetenv("TIRD_CC_TIMEOUT_S");
	ck_assert_int_eq(r.status, TIR_MEASURE_BUILD_ERROR);
	ck_assert_msg(strstr(r.msg, "ran past 3 s (TIRD_CC_TIMEOUT_S)"), "%s", r.msg);
	ck_assert_msg(took < 20, "the build took %.1f s", took);
	f = fopen(pidfile, "r");
	ck_assert(f);
	long child = 0;
	ck_assert(fscanf(f, "%ld", &child) == 1 && child > 1);
	fclose(f);
	/* killed: gone, or a zombie its new parent has not reaped yet */
	bool gone = false;
	for (int i = 0; i < 100 && !gone; i++) {
		char path[64], st[256] = "";
		snprintf(path, sizeof path, "/proc/%ld/stat", child);
		FILE *ps = fopen(path, "r");
		if (!ps) {
			gone = true;
			break;
		}
		size_t nr = fread(st, 1, sizeof st - 1, ps);
		fclose(ps);
		st[nr] = '\0';
		const char *paren = strrchr(st, ')');
		gone = paren && paren[1] == ' ' && paren[2] == 'Z';
		if (!gone)
			usleep(20000);
	}
	if (!gone)
		kill((pid_t)child, SIGKILL);
	ck_assert_msg(gone, "the compiler's child %ld outlived the timeout", child);
	unlink(pidfile);
	unlink(cc);
	rmdir(dir);
	free_code(c);
}
END_TEST

START_TEST(cpu_explicit_key)
{
	/* A key that is not this machine's: flags from its features. */
	tir_target t;
	tir_error err;
#if defined(__x86_64__)
	ck_assert(tir_target_parse("cpu:x86_64", &t, &err) == 0);
#elif defined(__aarch64__)
	ck_assert(tir_target_parse("cpu:aarch64+neon", &t, &err) == 0);
#else
	return;
#endif
	tir_code *c = make_code(src_add, 2, 4096, TIR_F32);
	tir_artifact *a = tir_runner_cpu.build(c, &t, &err);
	ck_assert_msg(a != NULL, "%s", err.msg);
	tir_measure_opts o = { .seed = 1, .no_timing = true };
	tir_measure_result r = { 0 };
	ck_assert_int_eq(tir_runner_cpu.run(a, c, &o, &r), 0);
	ck_assert_int_eq(r.nrepeats, 0);
	ck_assert_int_eq(r.out_elems, 4096);
	tir_runner_cpu.free(a);
	tir_measure_result_clear(&r);
	free_code(c);
}
END_TEST

/* ---- the check against the reference ------------------------------------------- */

/* matmul 16x8 · 8x12 (NN), float32; `sign` -1 makes it wrong. */
static char *matmul_src(const char *op)
{
	char *s = malloc(1024);
	snprintf(s, 1024,
		 "int tir_entry(void *const *args) {\n"
		 "  const float *A = args[0], *B = args[1]; float *C = args[2];\n"
		 "  for (int i = 0; i < 16; i++) for (int j = 0; j < 12; j++) {\n"
		 "    float acc = 0;\n"
		 "    for (int k = 0; k < 8; k++) acc %s A[i*8+k] * B[k*12+j];\n"
		 "    C[i*12+j] = acc; }\n"
		 "  return 0; }\n", op);
	return s;
}

static tir_code *matmul_code(const char *op)
{
	char *s = matmul_src(op);
	tir_code *c = make_code(s, 2, 0, TIR_F32);
	free(s);
	c->args[0].elems = 16 * 8;
	c->args[1].elems = 8 * 12;
	c->args[2].elems = 16 * 12;
	return c;
}

static const char *const matmul_json = "{\"op\":\"matmul\",\"M\":16,\"N\":12,\"K\":8}";

START_TEST(check_right_and_wrong)
{
	tir_error err;
	tir_workload *w = tir_workload_parse(matmul_json, strlen(matmul_json), NULL, &err);
	ck_assert_msg(w != NULL, "%s", err.msg);
	tir_target t = cpu_target();

	tir_code *c = matmul_code("+=");
	tir_measure_result r;
	tir_measure_opts o = { .seed = 7 };
	int rc = tir_measure(&tir_runner_cpu, w, c, &t, &o, &r);
	ck_assert_msg(rc == 0, "%s: %s", tir_measure_status_name(r.status), r.msg);
	ck_assert(r.max_rel_error >= 0 && r.max_rel_error <= 1e-6);
	ck_assert(tir_measure_tolerance(c) == 1e-5);
	tir_measure_result_clear(&r);
	free_code(c);

	c = matmul_code("-=");
	rc = tir_measure(&tir_runner_cpu, w, c, &t, &o, &r);
	ck_assert_int_eq(rc, -1);
	ck_assert_int_eq(r.status, TIR_MEASURE_WRONG_RESULT);
	ck_assert(r.max_rel_error > 0.1);
	ck_assert(r.output != NULL);            /* kept, for a look */
	tir_measure_result_clear(&r);

	/* Arguments that do not match the workload are an error, not a verdict. */
	c->args[1].elems = 7;
	double e;
	ck_assert_int_eq(tir_measure_check(w, c, 7, NULL, 0, &e, &err), -1);
	ck_assert_msg(strstr(err.msg, "elements") != NULL, "%s", err.msg);
	free_code(c);
	tir_workload_free(w);
}
END_TEST

START_TEST(check_metric)
{
	double ref[4] = { 1, -4, 0, 2 }, out[4] = { 1, -4.004, 0.001, 2 };
	ck_assert(fabs(tir_measure_compare(ref, out, 4) - 0.001) < 1e-12);
	out[2] = NAN;
	ck_assert(isinf(tir_measure_compare(ref, out, 4)));
	double zero[2] = { 0, 0 }, z2[2] = { 0, 0 };
	ck_assert(tir_measure_compare(zero, z2, 2) == 0);
}
END_TEST

/* float16 and bfloat16 inputs are the float32 inputs rounded to nearest even. */
START_TEST(fill_half_types)
{
	enum { N = 20000 };
	tir_code *c32 = make_code("", 1, N, TIR_F32);
	tir_code *c16 = make_code("", 1, N, TIR_F16);
	tir_code *cbf = make_code("", 1, N, TIR_BF16);
	tir_code *ci8 = make_code("", 1, N, TIR_I8);
	float *f = malloc(N * 4);
	uint16_t *h = malloc(N * 2), *bf = malloc(N * 2);
	int8_t *i8 = malloc(N);
	double *d = malloc(N * sizeof(double));
	tir_measure_fill(c32, 0, 5, f);
	tir_measure_fill(c16, 0, 5, h);
	tir_measure_fill(cbf, 0, 5, bf);
	tir_measure_fill(ci8, 0, 5, i8);
	int seen[17] = { 0 };
	for (int i = 0; i < N; i++) {
		ck_assert(i8[i] >= -8 && i8[i] <= 8);
		seen[i8[i] + 8] = 1;
	}
	for (int k = 0; k < 17; k++)
		ck_assert(seen[k]);
	tir_measure_to_double(TIR_F16, h, N, d);
	for (int i = 0; i < N; i++) {
#ifdef __FLT16_MANT_DIG__
		ck_assert_msg(d[i] == (double)(_Float16)f[i], "%d: %a -> %a", i, f[i], d[i]);
#else
		ck_assert(fabs(d[i] - f[i]) <= 0x1p-11 * fabs(f[i]) + 0x1p-25);
#endif
	}
	tir_measure_to_double(TIR_BF16, bf, N, d);
	for (int i = 0; i < N; i++) {
		uint32_t x;
		memcpy(&x, &f[i], 4);
		uint32_t lo = x & 0xffff0000u, hi = lo + 0x10000u;
		float flo, fhi;
		memcpy(&flo, &lo, 4);
		memcpy(&fhi, &hi, 4);
		/* the nearer of the two neighbours, ties to the even one */
		double dl = fabs((double)f[i] - flo), dh = fabs((double)fhi - f[i]);
		double want = dl < dh ? flo : dh < dl ? fhi : ((lo >> 16) & 1) ? fhi : flo;
		ck_assert_msg(d[i] == want, "%d: %a -> %a", i, f[i], d[i]);
	}
	uint16_t special[] = { 0x3c00, 0xc000, 0x7bff, 0x0001, 0x7c00 };
	double sd[5];
	tir_measure_to_double(TIR_F16, special, 5, sd);
	ck_assert(sd[0] == 1 && sd[1] == -2 && sd[2] == 65504 && sd[3] == 0x1p-24 &&
		  isinf(sd[4]));
	free(f); free(h); free(bf); free(i8); free(d);
	free_code(c32); free_code(c16); free_code(cbf); free_code(ci8);
}
END_TEST

/* ---- the batch guard ------------------------------------------------------------------ */

/* What the children of a batch leave for the test (MAP_SHARED). */
typedef struct batch_log {
	int setups;                /* setups run, one per child */
	pid_t pid[16];             /* the process that measured each item */
	int seq[16], nseq;         /* the items in the order they were measured */
} batch_log;

/* A batch of plain C items, one letter each: o ok, l ok after 0.3 s,
 * s SIGSEGV, h hang, e an error that ends the child, x exit(3),
 * w wrong result. */
typedef struct batch_plan {
	const char *items;
	int fail_setup_from;       /* the setup (1-based) from which setups fail; 0 none */
	bool setup_hangs;
	batch_log *log;
} batch_plan;

static batch_log *batch_log_new(void)
{
	void *p = mmap(NULL, sizeof(batch_log), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert(p != MAP_FAILED);
	return memset(p, 0, sizeof(batch_log));
}

static int plan_setup(void *ctx, tir_child_report *rep)
{
	batch_plan *p = ctx;
	int k = ++p->log->setups;          /* children run one after another */
	if (p->fail_setup_from && k >= p->fail_setup_from) {
		rep->status = TIR_MEASURE_RUN_ERROR;
		snprintf(rep->msg, sizeof rep->msg, "no device in setup %d", k);
		return -1;
	}
	while (p->setup_hangs)
		pause();
	return 0;
}

static int plan_item(void *ctx, int i, tir_child_report *rep, double *max_rel_error)
{
	batch_plan *p = ctx;
	p->log->pid[i] = getpid();
	if (p->log->nseq < 16)
		p->log->seq[p->log->nseq++] = i;
	switch (p->items[i]) {
	case 's':
		raise(SIGSEGV);
		break;
	case 'h':
		for (;;)
			pause();
	case 'e':
		rep->status = TIR_MEASURE_CRASH;
		snprintf(rep->msg, sizeof rep->msg, "illegal address in item %d", i);
		return TIR_BATCH_END;
	case 'x':
		_exit(3);
	case 'w':
		rep->status = TIR_MEASURE_WRONG_RESULT;
		snprintf(rep->msg, sizeof rep->msg, "wrong result in item %d", i);
		*max_rel_error = 0.5;
		return 0;
	case 'l':
		nanosleep(&(struct timespec){ 0, 300000000L }, NULL);
		break;
	default:
		break;
	}
	rep->status = TIR_MEASURE_OK;
	rep->msg[0] = '\0';
	rep->nrepeats = 1;
	rep->repeat_us[0] = rep->median_us = 10 + i;
	*max_rel_error = 0;
	return 0;
}

static void assert_item(const tir_measure_result *r, int i, tir_measure_status want,
			const char *msg_part)
{
	ck_assert_msg(r[i].status == want, "item %d: %s (%s), expected %s", i,
		      tir_measure_status_name(r[i].status), r[i].msg,
		      tir_measure_status_name(want));
	ck_assert(r[i].output == NULL);
	if (want == TIR_MEASURE_OK) {
		ck_assert_str_eq(r[i].msg, "");
		ck_assert_int_eq(r[i].nrepeats, 1);
		ck_assert(r[i].median_us == 10 + i && r[i].repeat_us[0] == 10 + i);
		ck_assert(r[i].max_rel_error == 0);
	} else {
		ck_assert_msg(strstr(r[i].msg, msg_part) != NULL, "item %d: \"%s\" lacks "
			      "\"%s\"", i, r[i].msg, msg_part);
	}
}

/* The case: a crash, a hang and an item that ends its process, each
 * costing one result, the items after each still measured, in a fresh
 * child with a fresh setup. */
START_TEST(batch_failures)
{
	pid_t me = getpid();
	batch_plan p = { .items = "osoheo", .log = batch_log_new() };
	tir_measure_result r[6];
	int children = tir_child_batch(6, 0.5, plan_setup, plan_item, &p, r);
	ck_assert_int_eq(getpid(), me);
	assert_item(r, 0, TIR_MEASURE_OK, "");
	assert_item(r, 1, TIR_MEASURE_CRASH, "candidate crashed with SIGSEGV");
	assert_item(r, 2, TIR_MEASURE_OK, "");
	assert_item(r, 3, TIR_MEASURE_TIMEOUT, "timed out after 0.5 s");
	assert_item(r, 4, TIR_MEASURE_CRASH, "illegal address in item 4");
	assert_item(r, 5, TIR_MEASURE_OK, "");
	ck_assert(r[1].max_rel_error == -1 && r[3].max_rel_error == -1);
	/* children: {0, 1}, {2, 3}, {4}, {5}; each set up once */
	ck_assert_int_eq(children, 4);
	ck_assert_int_eq(p.log->setups, 4);
	const batch_log *l = p.log;
	ck_assert(l->pid[0] == l->pid[1] && l->pid[2] == l->pid[3]);
	ck_assert(l->pid[1] != l->pid[2] && l->pid[3] != l->pid[4] &&
		  l->pid[4] != l->pid[5] && l->pid[0] != me);
	munmap(p.log, sizeof *p.log);
}
END_TEST

/* The watchdog is per item: four items of 0.3 s each under a 0.8 s
 * timeout all end ok, in one child.  An exit during an item and a wrong
 * result are that item's alone. */
START_TEST(batch_timeout_per_item)
{
	batch_plan p = { .items = "llll", .log = batch_log_new() };
	tir_measure_result r[4];
	ck_assert_int_eq(tir_child_batch(4, 0.8, plan_setup, plan_item, &p, r), 1);
	for (int i = 0; i < 4; i++)
		assert_item(r, i, TIR_MEASURE_OK, "");
	ck_assert_int_eq(p.log->setups, 1);

	memset(p.log, 0, sizeof *p.log);
	p.items = "oxwo";
	ck_assert_int_eq(tir_child_batch(4, 0.5, plan_setup, plan_item, &p, r), 2);
	assert_item(r, 0, TIR_MEASURE_OK, "");
	assert_item(r, 1, TIR_MEASURE_RUN_ERROR, "exited with status 3");
	assert_item(r, 2, TIR_MEASURE_WRONG_RESULT, "wrong result in item 2");
	ck_assert(r[2].max_rel_error == 0.5);
	assert_item(r, 3, TIR_MEASURE_OK, "");
	ck_assert(p.log->pid[2] == p.log->pid[3] && p.log->pid[1] != p.log->pid[2]);
	munmap(p.log, sizeof *p.log);
}
END_TEST

/* A setup that fails, at once or in a later child, or hangs, ends the
 * batch: every item left gets its message, and no child is forked again. */
START_TEST(batch_setup_fails)
{
	batch_plan p = { .items = "ooo", .fail_setup_from = 1, .log = batch_log_new() };
	tir_measure_result r[3];
	ck_assert_int_eq(tir_child_batch(3, 5, plan_setup, plan_item, &p, r), 1);
	for (int i = 0; i < 3; i++) {
		assert_item(r, i, TIR_MEASURE_RUN_ERROR, "no device in setup 1");
		ck_assert_int_eq(p.log->pid[i], 0);
	}

	memset(p.log, 0, sizeof *p.log);
	p.items = "oso";
	p.fail_setup_from = 2;
	ck_assert_int_eq(tir_child_batch(3, 5, plan_setup, plan_item, &p, r), 2);
	assert_item(r, 0, TIR_MEASURE_OK, "");
	assert_item(r, 1, TIR_MEASURE_CRASH, "SIGSEGV");
	assert_item(r, 2, TIR_MEASURE_RUN_ERROR, "no device in setup 2");

	memset(p.log, 0, sizeof *p.log);
	p.items = "oo";
	p.fail_setup_from = 0;
	p.setup_hangs = true;
	ck_assert_int_eq(tir_child_batch(2, 0.3, plan_setup, plan_item, &p, r), 1);
	for (int i = 0; i < 2; i++)
		assert_item(r, i, TIR_MEASURE_RUN_ERROR, "setting up the measuring process "
			    "timed out after 0.3 s");

	ck_assert_int_eq(tir_child_batch(0, 1, plan_setup, plan_item, &p, r), 0);
	munmap(p.log, sizeof *p.log);
}
END_TEST

/* The stream: items put from another thread, out of order and further
 * apart than the watchdog's timeout, are measured in the order they were
 * put, the waits not counted; after a crash the rest are measured in a
 * fresh child forked once the stream is closed; an item never put is
 * "not measured". */
typedef struct putter {
	tir_child_stream *s;
	const int *order;
	int n;
} putter;

static void *put_slowly(void *arg)
{
	putter *pu = arg;
	for (int k = 0; k < pu->n; k++) {
		nanosleep(&(struct timespec){ 0, 400000000L }, NULL);
		tir_child_stream_put(pu->s, pu->order[k]);
	}
	return NULL;
}

START_TEST(stream_puts_over_time)
{
	batch_plan p = { .items = "ooosooo", .log = batch_log_new() };
	static const int order[] = { 2, 0, 3, 5, 1, 4 };
	tir_measure_result r[7];
	tir_child_stream *s = tir_child_stream_start(7, 0.3, plan_setup, plan_item, &p);
	putter pu = { s, order, 6 };
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, put_slowly, &pu), 0);
	pthread_join(t, NULL);
	ck_assert_int_eq(tir_child_stream_finish(s, r), 2);
	for (int i = 0; i < 6; i++)
		assert_item(r, i, i == 3 ? TIR_MEASURE_CRASH : TIR_MEASURE_OK, "SIGSEGV");
	assert_item(r, 6, TIR_MEASURE_RUN_ERROR, "not measured");
	ck_assert_int_eq(p.log->setups, 2);
	ck_assert_int_eq(p.log->nseq, 6);
	for (int k = 0; k < 6; k++)
		ck_assert_int_eq(p.log->seq[k], order[k]);
	const pid_t *pid = p.log->pid;
	ck_assert(pid[2] == pid[0] && pid[0] == pid[3]);
	ck_assert(pid[5] == pid[1] && pid[1] == pid[4] && pid[5] != pid[3]);

	/* nothing put at all: the child set up, waited, and ended cleanly */
	memset(p.log, 0, sizeof *p.log);
	s = tir_child_stream_start(3, 0.3, plan_setup, plan_item, &p);
	nanosleep(&(struct timespec){ 0, 400000000L }, NULL);
	ck_assert_int_eq(tir_child_stream_finish(s, r), 1);
	for (int i = 0; i < 3; i++)
		assert_item(r, i, TIR_MEASURE_RUN_ERROR, "not measured");
	ck_assert_int_eq(p.log->setups, 1);
	munmap(p.log, sizeof *p.log);
}
END_TEST

/* The timing loop on a stand-in device whose calls take 5 ms each: five
 * repeats of one call; with slow_us below that, the one timed call alone. */
typedef struct fake_dev {
	int calls, flushes;
} fake_dev;

static int fake_flush(void *ctx, tir_child_report *rep)
{
	(void)rep;
	((fake_dev *)ctx)->flushes++;
	return 0;
}

static int fake_timed(void *ctx, long n, double *us, tir_child_report *rep)
{
	(void)rep;
	((fake_dev *)ctx)->calls += (int)n;
	*us = 5000.0 * (double)n;
	return 0;
}

START_TEST(timing_slow_cutoff)
{
	tir_measure_opts o = tir_measure_opts_default(NULL);
	tir_child_report rep;
	fake_dev d = { 0 };
	memset(&rep, 0, sizeof rep);
	ck_assert_int_eq(tir_time_repeats(&o, &d, fake_flush, fake_timed, &rep), 0);
	ck_assert_int_eq(rep.nrepeats, 5);
	ck_assert(rep.median_us == 5000);
	ck_assert_int_eq(d.calls, 2 + 5);
	ck_assert_int_eq(d.flushes, 5);

	o.slow_us = 1000;
	memset(&d, 0, sizeof d);
	memset(&rep, 0, sizeof rep);
	ck_assert_int_eq(tir_time_repeats(&o, &d, fake_flush, fake_timed, &rep), 0);
	ck_assert_int_eq(rep.nrepeats, 1);
	ck_assert(rep.median_us == 5000 && rep.repeat_us[0] == 5000);
	ck_assert_int_eq(d.calls, 2);
	ck_assert_int_eq(d.flushes, 0);

	o.slow_us = 6000;                  /* not past it: timed in full */
	memset(&d, 0, sizeof d);
	ck_assert_int_eq(tir_time_repeats(&o, &d, fake_flush, fake_timed, &rep), 0);
	ck_assert_int_eq(rep.nrepeats, 5);
}
END_TEST

/* ---- NVRTC and the CUDA runner ------------------------------------------------------- */

static const char *const cu_add =
	"extern \"C\" __global__ void k_add(const float *a, const float *b, float *c) {\n"
	"  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
	"  if (i < 4096) c[i] = a[i] + b[i];\n"
	"}\n";

#ifdef HAVE_CUDA
START_TEST(nvrtc_compiles)
{
	char *bin;
	size_t n;
	tir_error err;
	int rc = tir_nvrtc_compile(cu_add, 90, &bin, &n, &err);
	ck_assert_msg(rc == 0, "%s", err.msg);
	ck_assert(n > 4 && !memcmp(bin, "\177ELF", 4));
	free(bin);
	/* cuda_fp16.h comes from the toolkit's include directory */
	rc = tir_nvrtc_compile("#include <cuda_fp16.h>\n"
			       "extern \"C\" __global__ void k(__half *x) "
			       "{ x[0] = __float2half(1.0f); }\n", 80, &bin, &n, &err);
	ck_assert_msg(rc == 0, "%s", err.msg);
	free(bin);
}
END_TEST

START_TEST(nvrtc_error_has_log)
{
	char *bin = (char *)1;
	size_t n = 1;
	tir_error err;
	int rc = tir_nvrtc_compile("extern \"C\" __global__ void k(float *x) "
				   "{ x[0] = undeclared_thing; }\n", 90, &bin, &n, &err);
	ck_assert_int_eq(rc, -1);
	ck_assert(bin == NULL && n == 0);
	ck_assert_msg(strstr(err.msg, "undeclared_thing") != NULL, "%s", err.msg);
}
END_TEST
#endif

static tir_code *cuda_code(const char *src, const char *kernel)
{
	tir_code *c = make_code(src, 2, 4096, TIR_F32);
	c->nlaunches = 1;
	c->launches = calloc(1, sizeof *c->launches);
	snprintf(c->launches[0].name, sizeof c->launches[0].name, "%s", kernel);
	c->launches[0].grid[0] = 32;
	c->launches[0].block[0] = 128;
	return c;
}

/* Where no driver loads, a clear run_error; where one does, real runs. */
START_TEST(cuda_runner)
{
	tir_target t;
	tir_error err;
	ck_assert(tir_target_parse("cuda:sm_90", &t, &err) == 0);
	tir_target dev;
	bool have_gpu = tir_cuda_device_props(0, &dev, &err) == 0;
	if (!have_gpu)
		ck_assert_msg(strstr(err.msg, "cuda") != NULL, "%s", err.msg);
	else
		t = dev;

	tir_code *c = cuda_code(cu_add, "k_add");
	tir_measure_result r = { 0 };
	tir_measure_opts o = { .seed = 3, .timeout_s = 30 };
	tir_artifact *a = tir_runner_cuda.build(c, &t, &err);
#ifdef HAVE_CUDA
	ck_assert_msg(a != NULL, "%s", err.msg);
#else
	ck_assert(a == NULL);
	free_code(c);
	return;
#endif
	int rc = tir_runner_cuda.run(a, c, &o, &r);
	tir_runner_cuda.free(a);
	if (!have_gpu) {
		ck_assert_int_eq(rc, -1);
		ck_assert_int_eq(r.status, TIR_MEASURE_RUN_ERROR);
		ck_assert_msg(strstr(r.msg, "cuda") != NULL, "%s", r.msg);
		free_code(c);
		return;
	}
	ck_assert_msg(rc == 0, "%s: %s", tir_measure_status_name(r.status), r.msg);
	ck_assert(r.median_us > 0 && r.out_elems == 4096);
	float *x = malloc(4096 * 4), *y = malloc(4096 * 4);
	tir_measure_fill(c, 0, 3, x);
	tir_measure_fill(c, 1, 3, y);
	for (int i = 0; i < 4096; i++)
		ck_assert(r.output[i] == (double)(x[i] + y[i]));
	free(x);
	free(y);
	tir_measure_result_clear(&r);
	free_code(c);

	/* an illegal address */
	c = cuda_code("extern \"C\" __global__ void k_bad(float *a, float *b, float *c) "
		      "{ ((float *)0x10)[threadIdx.x] = 1.0f; }\n", "k_bad");
	a = tir_runner_cuda.build(c, &t, &err);
	ck_assert_msg(a != NULL, "%s", err.msg);
	ck_assert_int_eq(tir_runner_cuda.run(a, c, &o, &r), -1);
	ck_assert_msg(r.status == TIR_MEASURE_CRASH, "%s: %s",
		      tir_measure_status_name(r.status), r.msg);
	tir_runner_cuda.free(a);
	free_code(c);

	/* a kernel that never ends */
	c = cuda_code("extern \"C\" __global__ void k_hang(float *a, float *b, float *c) "
		      "{ while (((volatile float *)a)[0] < 100.0f) ; }\n", "k_hang");
	a = tir_runner_cuda.build(c, &t, &err);
	ck_assert_msg(a != NULL, "%s", err.msg);
	o.timeout_s = 3;
	ck_assert_int_eq(tir_runner_cuda.run(a, c, &o, &r), -1);
	ck_assert_msg(r.status == TIR_MEASURE_TIMEOUT, "%s: %s",
		      tir_measure_status_name(r.status), r.msg);
	tir_runner_cuda.free(a);
	free_code(c);
}
END_TEST

/* The timers (TIRD_CUDA_TIMER in the measuring child): graph adds its
 * launch term; profiler reads each kernel's duration, no term, or fails
 * naming the profiler where CUPTI's cannot run; auto is one of the two; any
 * other value is a run_error naming the variable.  Needs a GPU. */
START_TEST(cuda_timers)
{
	tir_target t;
	tir_error err;
	if (tir_cuda_device_props(0, &t, &err) != 0)
		return;                /* no GPU: cuda_runner covers the no-driver path */
	tir_code *c = cuda_code(cu_add, "k_add");
	tir_artifact *a = tir_runner_cuda.build(c, &t, &err);
	ck_assert_msg(a != NULL, "%s", err.msg);
	tir_measure_opts o = { .seed = 3, .timeout_s = 60 };
	tir_measure_result r = { 0 };

	setenv("TIRD_CUDA_TIMER", "graph", 1);
	ck_assert_msg(tir_runner_cuda.run(a, c, &o, &r) == 0, "%s", r.msg);
	ck_assert_int_eq(r.timer, TIR_TIMER_GRAPH);
	ck_assert(r.launch_us > 0 && r.median_us > r.launch_us);
	double graph_us = r.median_us;

	setenv("TIRD_CUDA_TIMER", "profiler", 1);
	bool profiler = tir_runner_cuda.run(a, c, &o, &r) == 0;
	if (profiler) {
		ck_assert_int_eq(r.timer, TIR_TIMER_PROFILER);
		ck_assert(r.launch_us == 0);
		/* one small kernel alone: about what the graph gives it with its
		 * launch term, never an order of magnitude off */
		ck_assert_msg(r.median_us > 0.3 * graph_us && r.median_us < 3 * graph_us,
			      "profiler %.3f us, graph %.3f us", r.median_us, graph_us);
		for (int i = 0; i < 4096; i++)
			ck_assert(r.output[i] == r.output[i]);
	} else {
		ck_assert_int_eq(r.status, TIR_MEASURE_RUN_ERROR);
		ck_assert_msg(strstr(r.msg, "cuda profiler") != NULL, "%s", r.msg);
	}

	setenv("TIRD_CUDA_TIMER", "auto", 1);
	ck_assert_msg(tir_runner_cuda.run(a, c, &o, &r) == 0, "%s", r.msg);
	ck_assert_int_eq(r.timer, profiler ? TIR_TIMER_PROFILER : TIR_TIMER_GRAPH);

	setenv("TIRD_CUDA_TIMER", "events", 1);
	ck_assert_int_eq(tir_runner_cuda.run(a, c, &o, &r), -1);
	ck_assert_int_eq(r.status, TIR_MEASURE_RUN_ERROR);
	ck_assert_msg(strstr(r.msg, "TIRD_CUDA_TIMER") != NULL, "%s", r.msg);
	unsetenv("TIRD_CUDA_TIMER");

	tir_measure_result_clear(&r);
	tir_runner_cuda.free(a);
	free_code(c);
}
END_TEST

/* Two outputs on the GPU: run() copies both back, the stream judges each
 * and names the one at fault.  Without a GPU, the no-driver path. */
START_TEST(cuda_two_outputs)
{
	static const char *const src =
		"extern \"C\" __global__ void k_two(const float *a, const float *b, float *c, "
		"float *d) { int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
		"  if (i < 4096) { c[i] = a[i] + b[i]; d[i] = a[i] - b[i]%s; } }\n";
	tir_target t;
	tir_error err;
	ck_assert(tir_target_parse("cuda:sm_90", &t, &err) == 0);
	tir_target dev;
	bool have_gpu = tir_cuda_device_props(0, &dev, &err) == 0;
	if (have_gpu)
		t = dev;
	tir_code *c[2];
	tir_artifact *a[2];
	for (int i = 0; i < 2; i++) {
		char text[512];
		snprintf(text, sizeof text, src, i ? " + 0.5f" : "");
		c[i] = two_output_code(text, 4096);
		c[i]->nlaunches = 1;
		c[i]->launches = calloc(1, sizeof *c[i]->launches);
		snprintf(c[i]->launches[0].name, sizeof c[i]->launches[0].name, "k_two");
		c[i]->launches[0].grid[0] = 32;
		c[i]->launches[0].block[0] = 128;
		a[i] = tir_runner_cuda.build(c[i], &t, &err);
#ifdef HAVE_CUDA
		ck_assert_msg(a[i] != NULL, "%s", err.msg);
#else
		ck_assert(a[i] == NULL);
#endif
	}
	double *ref = two_output_ref(c[0], 3, 4096);
	tir_measure_opts o = { .seed = 3, .timeout_s = 30, .repeats = 2 };
	tir_measure_result r = { 0 }, rb[2];
	if (a[0]) {
		int rc = tir_runner_cuda.run(a[0], c[0], &o, &r);
		if (!have_gpu) {
			ck_assert_int_eq(rc, -1);
			ck_assert_int_eq(r.status, TIR_MEASURE_RUN_ERROR);
		} else {
			ck_assert_msg(rc == 0, "%s", r.msg);
			ck_assert(r.out_elems == 8192 && r.noutputs == 2 &&
				  r.output_elems[0] == 4096 && r.output_elems[1] == 4096);
			for (int i = 0; i < 8192; i++)
				ck_assert(r.output[i] == ref[i]);
		}
		tir_measure_result_clear(&r);
		tir_runner_cuda.run_batch(2, (const tir_artifact *const *)a,
					  (const tir_code *const *)c, &o, ref, 8192, rb);
		if (!have_gpu) {
			ck_assert(rb[0].status == TIR_MEASURE_RUN_ERROR &&
				  rb[1].status == TIR_MEASURE_RUN_ERROR);
		} else {
			ck_assert_msg(rb[0].status == TIR_MEASURE_OK, "%s", rb[0].msg);
			ck_assert(rb[0].max_rel_error == 0);
			ck_assert_int_eq(rb[1].status, TIR_MEASURE_WRONG_RESULT);
			ck_assert_msg(strstr(rb[1].msg, "in output \"D\""), "%s", rb[1].msg);
		}
	}
	for (int i = 0; i < 2; i++) {
		tir_runner_cuda.free(a[i]);
		free_code(c[i]);
	}
	free(ref);
}
END_TEST

#ifdef HAVE_CUDA
/* One batch through run_batch, every failure the issue plants among
 * correct candidates.  Without a GPU every candidate is a run_error naming
 * the driver; with one, each gets its own status. */
START_TEST(cuda_batch)
{
	static const struct { const char *src, *kernel; } kernels[] = {
		{ cu_add, "k_add" },
		{ "extern \"C\" __global__ void k_bad(float *a, float *b, float *c) "
		  "{ ((float *)0x10)[threadIdx.x] = 1.0f; }\n", "k_bad" },
		{ "extern \"C\" __global__ void k_oob(const float *a, const float *b, "
		  "float *c) { int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
		  "  c[i] = a[i] + b[i]; c[i + 4096] = 1.0f; }\n", "k_oob" },
		{ "extern \"C\" __global__ void k_hang(float *a, float *b, float *c) "
		  "{ while (((volatile float *)a)[0] < 100.0f) ; }\n", "k_hang" },
		{ cu_add, "k_add" },                         /* too much shared memory */
		{ "extern \"C\" __global__ void k_sub(const float *a, const float *b, "
		  "float *c) { int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
		  "  if (i < 4096) c[i] = a[i] - b[i]; }\n", "k_sub" },
		{ "extern \"C\" __global__ void k_scr(const float *a, const float *b, "
		  "float *c, float *s) { int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
		  "  if (i < 4096) { s[i] = a[i] * 2.0f; c[i] = s[i] * 0.5f + b[i]; } }\n",
		  "k_scr" },
		{ "extern \"C\" __global__ void k_add2(const float *a, const float *b, "
		  "float *c) { int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
		  "  if (i < 2048) c[i] = a[i] + b[i]; }\n", "k_add2" },  /* other arguments */
		{ cu_add, "k_add" },
	};
	enum { N = sizeof kernels / sizeof kernels[0] };
	tir_target t;
	tir_error err;
	ck_assert(tir_target_parse("cuda:sm_90", &t, &err) == 0);
	tir_target dev;
	bool have_gpu = tir_cuda_device_props(0, &dev, &err) == 0;
	if (have_gpu)
		t = dev;
	else   /* on a GPU machine, say why (under ASan: protect_shadow_gap=0) */
		fprintf(stderr, "cuda_batch: no GPU (%s): the no-driver path only\n",
			err.msg);

	tir_code *c[N];
	tir_artifact *a[N];
	for (int i = 0; i < N; i++) {
		c[i] = cuda_code(kernels[i].src, kernels[i].kernel);
		a[i] = tir_runner_cuda.build(c[i], &t, &err);
		ck_assert_msg(a[i] != NULL, "%d: %s", i, err.msg);
	}
	c[4]->launches[0].shared_bytes = 1 << 20;
	c[6]->nargs = 4;
	c[6]->args = realloc(c[6]->args, 4 * sizeof *c[6]->args);
	c[6]->args[3] = c[6]->args[0];
	snprintf(c[6]->args[3].name, sizeof c[6]->args[3].name, "S");
	c[6]->args[3].is_scratch = 1;
	for (int i = 0; i < 3; i++)
		c[7]->args[i].elems = 2048;

	float *x = malloc(4096 * 4), *y = malloc(4096 * 4);
	double *ref = malloc(4096 * sizeof(double));
	tir_measure_fill(c[0], 0, 3, x);
	tir_measure_fill(c[0], 1, 3, y);
	for (int i = 0; i < 4096; i++)
		ref[i] = (double)x[i] + y[i];
	free(x);
	free(y);

	tir_measure_opts o = { .seed = 3, .timeout_s = 3 };
	tir_measure_result r[N];
	int children = tir_runner_cuda.run_batch(N, (const tir_artifact *const *)a,
						 (const tir_code *const *)c, &o, ref, 4096, r);
	if (!have_gpu) {
		for (int i = 0; i < N; i++)
			ck_assert_msg(r[i].status == TIR_MEASURE_RUN_ERROR &&
				      strstr(r[i].msg, "cuda") != NULL, "%d: %s: %s", i,
				      tir_measure_status_name(r[i].status), r[i].msg);
		ck_assert_int_eq(children, 2);      /* the batch's, candidate 7's */
	} else {
		static const tir_measure_status want[N] = {
			TIR_MEASURE_OK, TIR_MEASURE_CRASH, TIR_MEASURE_CRASH,
			TIR_MEASURE_TIMEOUT, TIR_MEASURE_RUN_ERROR,
			TIR_MEASURE_WRONG_RESULT, TIR_MEASURE_OK, TIR_MEASURE_RUN_ERROR,
			TIR_MEASURE_OK,
		};
		for (int i = 0; i < N; i++) {
			ck_assert_msg(r[i].status == want[i], "%d (%s): %s: %s", i,
				      kernels[i].kernel, tir_measure_status_name(r[i].status),
				      r[i].msg);
			ck_assert(r[i].output == NULL);
			if (want[i] == TIR_MEASURE_OK)
				ck_assert(r[i].median_us > 0 && r[i].nrepeats == 5 &&
					  r[i].max_rel_error >= 0 && r[i].max_rel_error < 1e-6);
		}
		ck_assert_msg(strstr(r[2].msg, "past the end of \"C\"") != NULL, "%s", r[2].msg);
		ck_assert(r[5].max_rel_error > 0.1);
		ck_assert_msg(strstr(r[7].msg, "2048 output values") != NULL, "%s", r[7].msg);
		/* {0, 1}, {2}, {3}, {4, 5, 6, 8}, and 7 alone */
		ck_assert_int_eq(children, 5);
	}
	for (int i = 0; i < N; i++) {
		tir_runner_cuda.free(a[i]);
		free_code(c[i]);
	}
	free(ref);
}
END_TEST
#endif

static Suite *make_measure_suite(void)
{
	Suite *s = suite_create("measure");
	TCase *tc = tcase_create("cpu");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, cpu_correct_kernel);
	tcase_add_test(tc, cpu_crash);
	tcase_add_test(tc, cpu_timeout);
	tcase_add_test(tc, cpu_nonzero_return);
	tcase_add_test(tc, cpu_build_error);
	tcase_add_test(tc, cpu_group_build);
	tcase_add_test(tc, cpu_compile_timeout_kills_the_tree);
	tcase_add_test(tc, cpu_batch);
	tcase_add_test(tc, cpu_two_outputs);
	tcase_add_test(tc, cpu_explicit_key);
	suite_add_tcase(s, tc);
	tc = tcase_create("check");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, check_right_and_wrong);
	tcase_add_test(tc, check_metric);
	tcase_add_test(tc, fill_half_types);
	suite_add_tcase(s, tc);
	tc = tcase_create("batch");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, batch_failures);
	tcase_add_test(tc, batch_timeout_per_item);
	tcase_add_test(tc, batch_setup_fails);
	tcase_add_test(tc, stream_puts_over_time);
	tcase_add_test(tc, timing_slow_cutoff);
	suite_add_tcase(s, tc);
	tc = tcase_create("cuda");
	tcase_set_timeout(tc, 300);
#ifdef HAVE_CUDA
	tcase_add_test(tc, nvrtc_compiles);
	tcase_add_test(tc, nvrtc_error_has_log);
	tcase_add_test(tc, cuda_batch);
#endif
	tcase_add_test(tc, cuda_runner);
	tcase_add_test(tc, cuda_timers);
	tcase_add_test(tc, cuda_two_outputs);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(make_measure_suite());
}
