/*
 * lower.c — `tirctl lower`: a workload through libtir offline, no daemon.
 *
 *   workload JSON → initial schedule → (trace replayed) → validation for the
 *   target → printed program + generated code → (--run) build, run, check
 *   against the reference, time.
 *
 * Each step's failure is reported with libtir's message, which names the
 * fault (the workload key, the trace instruction, the block), and ends with
 * exit 1; a candidate that fails to build or run, or runs wrong, ends with
 * exit 3 after its result is printed.
 *
 * A bare "cuda" target is resolved with tir_cuda_device_props, which asks the
 * driver in a child process: this process must not initialise CUDA itself,
 * or the runner's forked child could not use the GPU.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include "tir.h"
#include "tir_measure.h"
#include "tirctl.h"

/* A workload or trace file longer than this is refused (far past any). */
#define MAX_INPUT ((size_t)64 << 20)

typedef struct lower_opts {
	const char *file;
	const char *target;
	const char *trace;
	bool run;
	long sample;               /* 0: none */
	uint64_t seed;
	double timeout_s;
} lower_opts;

void tirctl_lower_usage(void)
{
	printf("usage: tirctl [--json] lower FILE|- --target T [--trace TRACE.json] [--run]\n"
	       "                      [--seed S] [--timeout SECONDS] [--sample N]\n"
	       "\n"
	       "Builds the program of the workload in FILE (- for stdin) for target T\n"
	       "(cpu, cuda, cpu:ARCH+FEATURES, cuda:sm_XY), replays TRACE.json on it if\n"
	       "given, validates it, and prints the program and the generated code.\n"
	       "  --run        also build and run it here on random inputs (seed S,\n"
	       "               default 1), check it against the reference and time it\n"
	       "               (a cuda target needs a GPU driver on this machine)\n"
	       "  --timeout    the run's time limit (default 60 s)\n"
	       "  --sample N   N random valid candidates of the tuner's search space\n"
	       "               (seed S): each one's trace and source, and whether the\n"
	       "               compiler (NVRTC for cuda, the system C compiler for cpu)\n"
	       "               accepted it; --json: {\"candidates\": [{\"trace\",\n"
	       "               \"source\", \"compiled\"}...]}\n"
	       "With --json: {\"workload_key\", \"target\", \"program\", \"source\", \"trace\",\n"
	       "and with --run \"status\", \"max_rel_error\", \"median_us\", \"gflops\"\n"
	       "(and on CUDA \"timer\", \"profiler\" or \"graph\", and under the graph\n"
	       "timer \"launch_us\", the launch term per kernel in median_us)}.\n");
}

static int parse_args(int argc, char **argv, tirctl_globals *g, lower_opts *o)
{
	memset(o, 0, sizeof *o);
	o->seed = 1;
	o->timeout_s = 60;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = NULL;
		const char *eq = strchr(a, '=');
		size_t nlen = eq && a[0] == '-' ? (size_t)(eq - a) : strlen(a);
#define IS(name) (strlen(name) == nlen && !strncmp(a, name, nlen))
#define VALUE() (eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL))
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			tirctl_lower_usage();
			exit(TIRCTL_OK);
		} else if (!strcmp(a, "--run")) {
			o->run = true;
		} else if (!strcmp(a, "--json")) {
			g->json = true;
		} else if (IS("--target") || IS("--trace") || IS("--seed") ||
			   IS("--sample") || IS("--timeout")) {
			char name[16];
			snprintf(name, sizeof name, "%.*s", (int)nlen, a);
			if (!(v = VALUE()) || !*v) {
				tirctl_err("lower: %s needs a value", name);
				return -1;
			}
			char *end;
			errno = 0;
			if (!strcmp(name, "--target")) {
				o->target = v;
			} else if (!strcmp(name, "--trace")) {
				o->trace = v;
			} else if (!strcmp(name, "--seed")) {
				unsigned long long s = strtoull(v, &end, 0);
				if (*end || errno || v[0] == '-') {
					tirctl_err("lower: --seed '%s' is not a non-negative integer", v);
					return -1;
				}
				o->seed = s;
			} else if (!strcmp(name, "--sample")) {
				long n = strtol(v, &end, 10);
				if (*end || errno || n < 1 || n > 100000) {
					tirctl_err("lower: --sample '%s' is not a count from 1 to 100000", v);
					return -1;
				}
				o->sample = n;
			} else {
				double t = strtod(v, &end);
				if (*end || errno || !(t > 0 && t <= 3600)) {
					tirctl_err("lower: --timeout '%s' is not a number of seconds "
						   "in (0, 3600]", v);
					return -1;
				}
				o->timeout_s = t;
			}
		} else if (a[0] == '-' && a[1] != '\0') {
			tirctl_err("lower: unknown option '%s' (try tirctl help lower)", a);
			return -1;
		} else if (!o->file) {
			o->file = a;
		} else {
			tirctl_err("lower: more than one workload file ('%s', '%s')", o->file, a);
			return -1;
		}
#undef IS
#undef VALUE
	}
	if (!o->file) {
		tirctl_err("lower: no workload file (FILE or - for stdin)");
		return -1;
	}
	if (!o->target) {
		tirctl_err("lower: no --target (cpu, cuda, cpu:ARCH+FEATURES, cuda:sm_XY)");
		return -1;
	}
	return 0;
}

/* The target, without initialising CUDA in this process (see the top). */
static int resolve_target(const char *s, tir_target *t, tir_error *err)
{
	if (!strcmp(s, "cuda"))
		return tir_cuda_device_props(0, t, err);
	return tir_target_parse(s, t, err);
}

/* What lowering produced, for the printers. */
typedef struct lowered {
	const tir_workload *w;
	const tir_target *t;
	char *program, *trace;
	tir_code *code;
	bool ran;
	tir_measure_result res;
} lowered;

static double gflops(const lowered *l)
{
	if (l->res.status != TIR_MEASURE_OK || !(l->res.median_us > 0))
		return 0;
	return tir_workload_flops(l->w) / (l->res.median_us * 1e3);
}

static void print_json(const lowered *l)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "workload_key", tir_workload_key(l->w));
	cJSON_AddStringToObject(o, "target", l->t->key);
	cJSON_AddStringToObject(o, "program", l->program ? l->program : "");
	cJSON_AddStringToObject(o, "source", l->code->source ? l->code->source : "");
	cJSON *tr = l->trace ? cJSON_Parse(l->trace) : NULL;
	if (tr)
		cJSON_AddItemToObject(o, "trace", tr);
	else
		cJSON_AddStringToObject(o, "trace", l->trace ? l->trace : "");
	if (l->ran) {
		const tir_measure_result *r = &l->res;
		cJSON_AddStringToObject(o, "status", tir_measure_status_name(r->status));
		if (r->status != TIR_MEASURE_OK)
			cJSON_AddStringToObject(o, "message", r->msg);
		/* Numbers where there is one; null where the run never got there.
		 * A wrong result keeps its error and time, for a look. */
		if (r->max_rel_error >= 0)
			cJSON_AddNumberToObject(o, "max_rel_error",
						r->max_rel_error > 1e300 ? 1e300
									 : r->max_rel_error);
		else
			cJSON_AddNullToObject(o, "max_rel_error");
		if (r->nrepeats > 0) {
			cJSON_AddNumberToObject(o, "median_us", r->median_us);
			if (r->launch_us > 0)
				cJSON_AddNumberToObject(o, "launch_us", r->launch_us);
			if (r->timer != TIR_TIMER_NONE)
				cJSON_AddStringToObject(o, "timer", r->timer == TIR_TIMER_PROFILER
							? "profiler" : "graph");
			cJSON *rep = cJSON_AddArrayToObject(o, "repeats_us");
			for (int i = 0; i < r->nrepeats; i++)
				cJSON_AddItemToArray(rep, cJSON_CreateNumber(r->repeat_us[i]));
		} else {
			cJSON_AddNullToObject(o, "median_us");
		}
		if (r->status == TIR_MEASURE_OK)
			cJSON_AddNumberToObject(o, "gflops", gflops(l));
		else
			cJSON_AddNullToObject(o, "gflops");
	}
	char *s = cJSON_PrintUnformatted(o);
	puts(s);
	free(s);
	cJSON_Delete(o);
}

static void print_text(const lowered *l)
{
	printf("# workload %s on %s\n", tir_workload_key(l->w), l->t->key);
	const char *prog = l->program ? l->program : "";
	fputs(prog, stdout);
	if (prog[0] && prog[strlen(prog) - 1] != '\n')
		putchar('\n');
	printf("\n# ---- generated code ----\n");
	fputs(l->code->source ? l->code->source : "", stdout);
	if (!l->ran)
		return;
	const tir_measure_result *r = &l->res;
	printf("\n# run: %s", tir_measure_status_name(r->status));
	if (r->max_rel_error >= 0)
		printf(", max relative error %.3g", r->max_rel_error);
	if (r->status == TIR_MEASURE_OK)
		printf(", median %.3f us over %d repeats, %.2f GFLOP/s", r->median_us,
		       r->nrepeats, gflops(l));
	if (r->status == TIR_MEASURE_OK && r->timer == TIR_TIMER_PROFILER)
		printf(" (each kernel's gpu__time_duration, by the profiler)");
	else if (r->status == TIR_MEASURE_OK && r->launch_us > 0)
		printf(" (back to back, including a launch term of %.3f us per kernel)",
		       r->launch_us);
	if (r->status != TIR_MEASURE_OK)
		printf(": %s", r->msg);
	putchar('\n');
}

/* Whether the compiler of t's kind accepts the code: NVRTC for CUDA (no GPU
 * needed), the runner's build (the system C compiler) for CPUs. */
static bool compiles(const tir_code *c, const tir_target *t, tir_error *err)
{
	if (t->kind == TIR_TARGET_CUDA) {
		char *cubin = NULL;
		size_t size = 0;
		int rc = tir_nvrtc_compile(c->source, t->sm, &cubin, &size, err);
		free(cubin);
		return rc == 0;
	}
	const tir_runner *r = tir_runner_for(t);
	tir_artifact *a = r->build(c, t, err);
	if (!a)
		return false;
	r->free(a);
	return true;
}

/* --sample N: N candidates of the search space, each validated (by
 * tir_sample_candidates), generated and compiled. */
static int lower_sample(tirctl_globals *g, const lower_opts *o, const tir_workload *w,
			const tir_target *t)
{
	tir_error err = { "" };
	tir_sched **c = calloc((size_t)o->sample, sizeof *c);
	if (!c) {
		tirctl_err("lower: out of memory");
		return TIRCTL_FAILED;
	}
	int n = tir_sample_candidates(w, t, (int)o->sample, o->seed, c, &err);
	if (n < 0) {
		tirctl_err("lower: sampling candidates for %s: %s", t->key, err.msg);
		free(c);
		return TIRCTL_FAILED;
	}
	int rc = TIRCTL_OK;
	cJSON *root = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(root, "candidates");
	if (!g->json)
		printf("# %d candidates of workload %s on %s (seed %llu)\n", n,
		       tir_workload_key(w), t->key, (unsigned long long)o->seed);
	for (int i = 0; i < n; i++) {
		char *trace = tir_sched_trace(c[i]);
		tir_code *code = tir_codegen(tir_sched_program(c[i]), t, &err);
		bool ok = code && compiles(code, t, &err);
		if (!code || !ok) {
			tirctl_err("lower: candidate %d: %s", i, err.msg);
			rc = TIRCTL_FAILED;
		}
		if (g->json) {
			cJSON *o1 = cJSON_CreateObject();
			cJSON *tr = cJSON_Parse(trace);
			if (tr)
				cJSON_AddItemToObject(o1, "trace", tr);
			else
				cJSON_AddStringToObject(o1, "trace", trace);
			cJSON_AddStringToObject(o1, "source", code ? code->source : "");
			cJSON_AddBoolToObject(o1, "compiled", ok);
			cJSON_AddItemToArray(arr, o1);
		} else {
			printf("\n# ---- candidate %d: %s ----\n# trace\n%s\n# source\n%s", i,
			       ok ? "compiled" : "did not compile", trace,
			       code ? code->source : "");
		}
		free(trace);
		if (code)
			tir_code_free(code);
		tir_sched_free(c[i]);
	}
	free(c);
	if (g->json) {
		char *s = cJSON_PrintUnformatted(root);
		puts(s);
		free(s);
	}
	cJSON_Delete(root);
	if (fflush(stdout) != 0) {
		tirctl_err("lower: cannot write the output: %s", strerror(errno));
		rc = TIRCTL_FAILED;
	}
	return rc;
}

int tirctl_lower(tirctl_globals *g, int argc, char **argv)
{
	lower_opts o;
	if (parse_args(argc, argv, g, &o))
		return TIRCTL_USAGE;
	if (o.sample && (o.trace || o.run)) {
		tirctl_err("lower: --sample draws its own traces; it takes neither --trace nor --run");
		return TIRCTL_USAGE;
	}

	int rc = TIRCTL_BAD_INPUT;
	tir_error err = { "" };
	tir_workload *w = NULL;
	tir_sched *s = NULL;
	char *text = NULL, *trace_text = NULL;
	lowered l = { 0 };
	tir_target t;

	/* 1. the workload */
	size_t len = 0;
	text = tir_read_file(o.file, MAX_INPUT, &len);
	if (!text) {
		tirctl_err("lower: cannot read %s: %s", strcmp(o.file, "-") ? o.file : "stdin",
			   strerror(errno));
		goto out;
	}
	if (!(w = tir_workload_parse(text, len, NULL, &err))) {
		tirctl_err("lower: %s: %s", o.file, err.msg);
		goto out;
	}
	/* 2. the target */
	if (resolve_target(o.target, &t, &err)) {
		tirctl_err("lower: %s", err.msg);
		goto out;
	}
	if (o.sample) {
		rc = lower_sample(g, &o, w, &t);
		goto out;
	}
	/* 3. the schedule, with the trace replayed */
	if (!(s = tir_sched_new(w, o.seed, &err))) {
		tirctl_err("lower: %s", err.msg);
		goto out;
	}
	if (o.trace) {
		size_t tlen;
		if (!(trace_text = tir_read_file(o.trace, MAX_INPUT, &tlen))) {
			tirctl_err("lower: cannot read the trace %s: %s", o.trace,
				   strerror(errno));
			goto out;
		}
		if (tir_sched_replay(s, trace_text, &err)) {
			tirctl_err("lower: trace %s: %s", o.trace, err.msg);
			goto out;
		}
	}
	/* 4. validation */
	const tir_program *p = tir_sched_program(s);
	if (tir_verify(p, &t, &err)) {
		tirctl_err("lower: the program is not valid for %s: %s", t.key, err.msg);
		goto out;
	}
	/* 5. the program's text and the code */
	l.w = w;
	l.t = &t;
	l.program = tir_program_print(p);
	l.trace = tir_sched_trace(s);
	if (!(l.code = tir_codegen(p, &t, &err))) {
		tirctl_err("lower: code generation for %s: %s", t.key, err.msg);
		goto out;
	}
	/* 6. optionally, the run */
	rc = TIRCTL_OK;
	if (o.run) {
		tir_measure_opts mo = { .seed = o.seed, .timeout_s = o.timeout_s };
		l.ran = true;
		if (tir_measure(tir_runner_for(&t), w, l.code, &t, &mo, &l.res)) {
			tirctl_err("lower: the candidate %s: %s",
				   l.res.status == TIR_MEASURE_WRONG_RESULT ? "is wrong"
				   : l.res.status == TIR_MEASURE_BUILD_ERROR ? "did not build"
				   : "failed to run",
				   l.res.msg);
			rc = TIRCTL_FAILED;
		}
	}
	if (g->json)
		print_json(&l);
	else
		print_text(&l);
	if (fflush(stdout) != 0) {
		tirctl_err("lower: cannot write the output: %s", strerror(errno));
		rc = TIRCTL_FAILED;
	}
out:
	tir_measure_result_clear(&l.res);
	if (l.code)
		tir_code_free(l.code);
	free(l.program);
	free(l.trace);
	if (s)
		tir_sched_free(s);
	if (w)
		tir_workload_free(w);
	free(text);
	free(trace_text);
	return rc;
}
