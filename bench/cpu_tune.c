/*
 * cpu_tune.c — tuned versus naive versus peer libraries on this CPU, in one
 * run, on the same shapes:
 *
 *   sgemm 1024^3 float32   tir_tune | the unscheduled program | OpenBLAS
 *                          cblas_sgemm | oneDNN dnnl_sgemm
 *   the suite's conv2d     tir_tune | the unscheduled program | oneDNN
 *   (NHWC: C2D, GRP, DIL)  convolution (NHWC src/dst, groups and dilation as
 *                          the workload's) twice: weights given as the
 *                          workload has them (HWIO, grouped HWIGO) and
 *                          reordered to the layout oneDNN prefers in every
 *                          call (onednn_us, the default comparison: tird's
 *                          programs read the same weights and pack them, if
 *                          they do, in every call), and the weights reordered
 *                          once outside the timing (dnnl_pre_us: what an
 *                          inference framework with constant weights does,
 *                          which tird's timed call never does)
 *
 *   cpu_tune [--trials N] [--seed S] [--suite FILE] [--only NAME,...]
 *            [--no-peers] [--no-naive]
 *
 * N defaults to 128.  Names: sgemm-1024, C2D-0, GRP-2 ... (the suite's
 * names); at most MAX_ROWS rows.
 * Progress goes to stderr, the table to stdout (bench/cpu_tune.sh writes it
 * to bench/results/ with the date, the machine and the command).
 *
 * Timing.  tird's figures are its own measurement protocol (measure/: a
 * child process, warm-up, caches flushed before each of 5 repeats of at
 * least 1 ms, the median); tuned is the best the search measured, naive the
 * empty trace measured the same way.  Peers are timed the same way in this
 * program: warm-up, 5 repeats of at least 1 ms each after their buffers are
 * evicted from the caches as tird's runner evicts a candidate's arguments
 * (tir_cpu_evict), the median.  Each peer runs in a forked child, so their
 * thread pools (OpenMP, OpenBLAS) never live in the process that forks
 * tird's measurements.  All use every core.
 *
 * Ratios are throughput ratios (peer time / tuned time): tuned/openblas 0.5
 * means tuned sgemm runs at half OpenBLAS's GFLOP/s.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include <cJSON.h>
#include "tir.h"
#include "measure/measure.h"
#ifdef HAVE_OPENBLAS
#include <cblas.h>
#endif
#ifdef HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

#ifndef SUITE_JSON
#define SUITE_JSON "bench/suite.json"
#endif

/* ---- timing of peers ---------------------------------------------------------- */

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Median per-call time of fn over 5 repeats of at least 1 ms, each after
 * its n buffers buf[i] (bytes[i] each) are evicted from the caches as tird's
 * runner evicts a candidate's arguments (tir_cpu_evict); one warm-up call
 * first. */
static double time_calls(void (*fn)(void *), void *ctx, int n_buf, const void *const *buf,
			 const size_t *bytes)
{
	fn(ctx);
	double t0 = now_us();
	fn(ctx);
	double one = now_us() - t0;
	long n = one > 1000 ? 1 : (long)ceil(1000 / (one > 0.01 ? one : 0.01));
	double rep[5];
	for (int r = 0; r < 5; r++) {
		tir_cpu_evict(n_buf, buf, bytes);
		t0 = now_us();
		for (long i = 0; i < n; i++)
			fn(ctx);
		rep[r] = (now_us() - t0) / (double)n;
	}
	qsort(rep, 5, sizeof rep[0], cmp_d);
	return rep[2];
}

/* Runs fn in a forked child and returns the double it reports (< 0: failed). */
static double in_child(double (*fn)(void *), void *ctx)
{
	int fd[2];
	if (pipe(fd))
		return -1;
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		close(fd[0]);
		double v = fn(ctx);
		ssize_t k = write(fd[1], &v, sizeof v);
		_exit(k == sizeof v ? 0 : 1);
	}
	close(fd[1]);
	double v = -1;
	if (read(fd[0], &v, sizeof v) != sizeof v)
		v = -1;
	close(fd[0]);
	int st;
	waitpid(pid, &st, 0);
	return v;
}

static float *rand_floats(size_t n, unsigned seed)
{
	float *x = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		x[i] = (float)(seed >> 8) * 0x1p-23f - 1.0f;
	}
	return x;
}

/* ---- sgemm peers ---------------------------------------------------------------- */

typedef struct gemm { int M, N, K; float *A, *B, *C; } gemm;

static void gemm_alloc(gemm *g)
{
	g->A = rand_floats((size_t)g->M * g->K, 1);
	g->B = rand_floats((size_t)g->K * g->N, 2);
	g->C = rand_floats((size_t)g->M * g->N, 3);
}

#ifdef HAVE_OPENBLAS
static void openblas_call(void *ctx)
{
	gemm *g = ctx;
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->M, g->N, g->K, 1.0f,
		    g->A, g->K, g->B, g->N, 0.0f, g->C, g->N);
}

/* The operands of g, for time_calls. */
static double time_gemm(void (*fn)(void *), gemm *g)
{
	const void *buf[3] = { g->A, g->B, g->C };
	size_t bytes[3] = { sizeof(float) * (size_t)g->M * g->K, sizeof(float) * (size_t)g->K * g->N,
			    sizeof(float) * (size_t)g->M * g->N };
	return time_calls(fn, g, 3, buf, bytes);
}

static double openblas_sgemm(void *ctx)
{
	gemm_alloc(ctx);
	return time_gemm(openblas_call, ctx);
}
#endif

#ifdef HAVE_DNNL
static void dnnl_call(void *ctx)
{
	gemm *g = ctx;
	dnnl_sgemm('N', 'N', g->M, g->N, g->K, 1.0f, g->A, g->K, g->B, g->N, 0.0f, g->C, g->N);
}

static double dnnl_sgemm_time(void *ctx)
{
	gemm_alloc(ctx);
	return time_gemm(dnnl_call, ctx);
}

/* ---- oneDNN convolution --------------------------------------------------------- */

typedef struct conv {
	int64_t N, C, H, W, K, R, S, sh, sw, dh, dw, pt, pl, pb, pr, groups;
	bool prepacked;            /* the weights reordered once, outside the timing */
	dnnl_stream_t stream;
	dnnl_primitive_t prim;
	dnnl_exec_arg_t args[3];
	dnnl_primitive_t reorder;  /* plain weights -> oneDNN's, in every call (or NULL) */
	dnnl_exec_arg_t rargs[2];
} conv;

static void conv_call(void *ctx)
{
	conv *c = ctx;
	if (c->reorder)
		dnnl_primitive_execute(c->reorder, c->stream, 2, c->rargs);
	dnnl_primitive_execute(c->prim, c->stream, 3, c->args);
	dnnl_stream_wait(c->stream);
}

static dnnl_memory_t filled(const dnnl_memory_desc_t *md, dnnl_engine_t eng, unsigned seed)
{
	dnnl_memory_t m;
	if (dnnl_memory_create(&m, md, eng, DNNL_MEMORY_ALLOCATE) != dnnl_success)
		return NULL;
	void *p;
	dnnl_memory_get_data_handle(m, &p);
	size_t n = dnnl_memory_desc_get_size(md) / sizeof(float);
	float *x = rand_floats(n, seed);
	memcpy(p, x, n * sizeof(float));
	free(x);
	return m;
}

static double dnnl_conv_time(void *ctx)
{
	conv *c = ctx;
	int64_t OH = (c->H + c->pt + c->pb - c->dh * (c->R - 1) - 1) / c->sh + 1;
	int64_t OW = (c->W + c->pl + c->pr - c->dw * (c->S - 1) - 1) / c->sw + 1;
	dnnl_engine_t eng;
	if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success ||
	    dnnl_stream_create(&c->stream, eng, dnnl_stream_default_flags) != dnnl_success)
		return -1;
	dnnl_memory_desc_t src, wany, dst;
	dnnl_dims_t sd = { c->N, c->C, c->H, c->W }, dd = { c->N, c->K, OH, OW };
	dnnl_dims_t wd5 = { c->groups, c->K / c->groups, c->C / c->groups, c->R, c->S };
	dnnl_dims_t wd4 = { c->K, c->C, c->R, c->S };
	dnnl_memory_desc_init_by_tag(&src, 4, sd, dnnl_f32, dnnl_nhwc);
	dnnl_memory_desc_init_by_tag(&dst, 4, dd, dnnl_f32, dnnl_nhwc);
	if (c->groups > 1)
		dnnl_memory_desc_init_by_tag(&wany, 5, wd5, dnnl_f32, dnnl_format_tag_any);
	else
		dnnl_memory_desc_init_by_tag(&wany, 4, wd4, dnnl_f32, dnnl_format_tag_any);
	dnnl_dims_t strides = { c->sh, c->sw }, dil = { c->dh - 1, c->dw - 1 };
	dnnl_dims_t pl = { c->pt, c->pl }, pr = { c->pb, c->pr };
	dnnl_convolution_desc_t cd;
	dnnl_primitive_desc_t pd;
	if (dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference,
			dnnl_convolution_direct, &src, &wany, NULL, &dst, strides, dil,
			pl, pr) != dnnl_success ||
	    dnnl_primitive_desc_create(&pd, &cd, NULL, eng, NULL) != dnnl_success ||
	    dnnl_primitive_create(&c->prim, pd) != dnnl_success)
		return -1;
	const dnnl_memory_desc_t *wmd = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
	c->args[0] = (dnnl_exec_arg_t){ DNNL_ARG_SRC, filled(&src, eng, 1) };
	c->args[1] = (dnnl_exec_arg_t){ DNNL_ARG_WEIGHTS, filled(wmd, eng, 2) };
	c->args[2] = (dnnl_exec_arg_t){ DNNL_ARG_DST, filled(&dst, eng, 3) };
	if (!c->args[0].memory || !c->args[1].memory || !c->args[2].memory)
		return -1;
	/* the workload's weights: [R][S][C/g][K], K = g * K/g + k (HWIO, HWIGO) */
	dnnl_memory_desc_t plain;
	if (c->groups > 1)
		dnnl_memory_desc_init_by_tag(&plain, 5, wd5, dnnl_f32, dnnl_hwigo);
	else
		dnnl_memory_desc_init_by_tag(&plain, 4, wd4, dnnl_f32, dnnl_hwio);
	if (!c->prepacked && !dnnl_memory_desc_equal(&plain, wmd)) {
		dnnl_primitive_desc_t rpd;
		dnnl_memory_t pm = filled(&plain, eng, 2);
		if (!pm || dnnl_reorder_primitive_desc_create(&rpd, &plain, eng, wmd, eng, NULL) !=
				   dnnl_success ||
		    dnnl_primitive_create(&c->reorder, rpd) != dnnl_success)
			return -1;
		c->rargs[0] = (dnnl_exec_arg_t){ DNNL_ARG_FROM, pm };
		c->rargs[1] = (dnnl_exec_arg_t){ DNNL_ARG_TO, c->args[1].memory };
	}
	/* every buffer a call touches: the source, its weights (and the plain
	 * ones it reorders), the destination */
	const void *buf[4];
	size_t bytes[4];
	int nb = 0;
	dnnl_memory_t mem[4] = { c->args[0].memory, c->args[1].memory, c->args[2].memory,
				 c->reorder ? c->rargs[0].memory : NULL };
	for (int i = 0; i < 4; i++) {
		const dnnl_memory_desc_t *md;
		void *p;
		if (!mem[i] || dnnl_memory_get_memory_desc(mem[i], &md) != dnnl_success ||
		    dnnl_memory_get_data_handle(mem[i], &p) != dnnl_success)
			continue;
		buf[nb] = p;
		bytes[nb++] = dnnl_memory_desc_get_size(md);
	}
	return time_calls(conv_call, c, nb, buf, bytes);
}
#endif

#define MAX_ROWS 16

/* ---- tird: naive and tuned --------------------------------------------------------- */

typedef struct row {
	char name[32];
	double gflop;
	double naive_us, tuned_us, blas_us, dnnl_us;   /* 0: not run, < 0: failed */
	double dnnl_pre_us;        /* oneDNN, its weights reordered outside the timing */
	bool conv;
	int trials, errors;
	double tune_s;
} row;

static void progress(void *ctx, const tir_tune_progress *p)
{
	fprintf(stderr, "  %s round %d: %d/%d trials, %d errors, best %.1f us (%.1f GFLOP/s)\n",
		(const char *)ctx, p->round, p->trials_done, p->trials_total, p->errors,
		p->best_us, p->best_gflops);
}

static void run_tird(row *r, const char *json, const tir_target *t, int trials,
		     uint64_t seed, bool naive)
{
	tir_error err;
	tir_workload *w = tir_workload_parse(json, strlen(json), NULL, &err);
	if (!w) {
		fprintf(stderr, "%s: %s\n", r->name, err.msg);
		r->naive_us = r->tuned_us = -1;
		return;
	}
	r->gflop = tir_workload_flops(w) * 1e-9;
	if (naive) {
		/* the unscheduled program: the empty trace */
		measure_local l = { .opts = { .timeout_s = 300 } };
		const char *empty[1] = { "{\"insts\":[]}" };
		tir_candidate c;
		fprintf(stderr, "%s: naive\n", r->name);
		tir_measure_local(&l, w, t, 1, empty, &c);
		r->naive_us = c.status == 0 ? c.latency_us : -1;
		if (c.status)
			fprintf(stderr, "  naive: %s\n", c.msg ? c.msg : "failed");
		free((char *)c.msg);
		measure_local_clear(&l);
	}
	fprintf(stderr, "%s: tuning, %d trials\n", r->name, trials);
	tir_tune_opts o = { .trials = trials, .seed = seed, .on_progress = progress,
			    .cb_ctx = r->name };
	tir_tune_result res;
	double t0 = now_us();
	if (tir_tune(w, t, &o, &res, &err)) {
		fprintf(stderr, "  tune: %s\n", err.msg);
		r->tuned_us = -1;
	} else {
		r->tuned_us = res.best_trace ? res.best_us : -1;
		r->trials = res.trials;
		r->errors = res.errors;
	}
	r->tune_s = (now_us() - t0) * 1e-6;
	tir_tune_result_clear(&res);
	tir_workload_free(w);
}

/* ---- the suite's convolutions ------------------------------------------------------------ */

static int64_t num(const cJSON *o, const char *k, int64_t dflt)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsNumber(x) ? (int64_t)x->valuedouble : dflt;
}

/* stride / dilation: an int or [h, w]; pad: int, [p], [ph, pw], [t, l, b, r]. */
static void pair(const cJSON *o, const char *k, int64_t dflt, int64_t *a, int64_t *b)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
	*a = *b = dflt;
	if (cJSON_IsNumber(x))
		*a = *b = (int64_t)x->valuedouble;
	else if (cJSON_IsArray(x) && cJSON_GetArraySize(x) >= 1) {
		*a = *b = (int64_t)cJSON_GetArrayItem(x, 0)->valuedouble;
		if (cJSON_GetArraySize(x) >= 2)
			*b = (int64_t)cJSON_GetArrayItem(x, 1)->valuedouble;
	}
}

static bool wanted(const char *only, const char *name)
{
	if (!only)
		return true;
	size_t n = strlen(name);
	for (const char *p = only; (p = strstr(p, name)); p += n)
		if ((p == only || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
			return true;
	return false;
}

/* ---- the table ------------------------------------------------------------------------- */

static void cell_us(double us)
{
	if (us > 0)
		printf(" %11.1f", us);
	else
		printf(" %11s", us < 0 ? "fail" : "-");
}

static void cell_gf(double gflop, double us)
{
	if (us > 0)
		printf(" %9.1f", gflop / us * 1e6);
	else
		printf(" %9s", "-");
}

static void cell_ratio(double peer_us, double tuned_us)
{
	if (peer_us > 0 && tuned_us > 0)
		printf(" %9.3f", peer_us / tuned_us);
	else
		printf(" %9s", "-");
}

static void print_table(const row *rows, int n)
{
	printf("\n%-10s %7s %11s %11s %11s %11s %11s | %9s %9s %9s %9s | %9s %9s %9s %9s | "
	       "%6s %6s %7s\n",
	       "workload", "GFLOP", "naive_us", "tuned_us", "openblas_us", "onednn_us",
	       "dnnl_pre_us", "naive_GF", "tuned_GF", "oblas_GF", "dnnl_GF",
	       "tun/naive", "tun/oblas", "tun/dnnl", "tun/dnnlp", "trials", "errors", "tune_s");
	double lg = 0, lgp = 0, lo = 1e9;
	int nc = 0, ncp = 0;
	const char *lowest = "-";
	for (int i = 0; i < n; i++) {
		const row *r = &rows[i];
		printf("%-10s %7.3f", r->name, r->gflop);
		cell_us(r->naive_us);
		cell_us(r->tuned_us);
		cell_us(r->blas_us);
		cell_us(r->dnnl_us);
		cell_us(r->dnnl_pre_us);
		printf(" |");
		cell_gf(r->gflop, r->naive_us);
		cell_gf(r->gflop, r->tuned_us);
		cell_gf(r->gflop, r->blas_us);
		cell_gf(r->gflop, r->dnnl_us);
		printf(" |");
		cell_ratio(r->naive_us, r->tuned_us);
		cell_ratio(r->blas_us, r->tuned_us);
		cell_ratio(r->dnnl_us, r->tuned_us);
		cell_ratio(r->dnnl_pre_us, r->tuned_us);
		printf(" | %6d %6d %7.0f\n", r->trials, r->errors, r->tune_s);
		if (r->conv && r->dnnl_us > 0 && r->tuned_us > 0) {
			double x = r->dnnl_us / r->tuned_us;
			lg += log(x);
			nc++;
			if (x < lo) {
				lo = x;
				lowest = r->name;
			}
		}
		if (r->conv && r->dnnl_pre_us > 0 && r->tuned_us > 0) {
			lgp += log(r->dnnl_pre_us / r->tuned_us);
			ncp++;
		}
	}
	printf("\nratios: peer time / tuned time (throughput of tuned relative to the "
	       "column; > 1: tuned is faster).\n");
	if (nc > 0)
		printf("geomean tuned/oneDNN over %d convolutions: %.3f, weights reordered in "
		       "each call as tird's are read (lowest %s %.3f)\n", nc, exp(lg / nc),
		       lowest, lo);
	if (ncp > 0)
		printf("geomean tuned/oneDNN over %d convolutions: %.3f, oneDNN's weights "
		       "reordered once outside the timing (tird's never are)\n", ncp,
		       exp(lgp / ncp));
}

int main(int argc, char **argv)
{
	int trials = 128;
	uint64_t seed = 1;
	const char *suite = SUITE_JSON, *only = NULL;
	bool peers = true, naive = true;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--trials") && i + 1 < argc)
			trials = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--suite") && i + 1 < argc)
			suite = argv[++i];
		else if (!strcmp(argv[i], "--only") && i + 1 < argc)
			only = argv[++i];
		else if (!strcmp(argv[i], "--no-peers"))
			peers = false;
		else if (!strcmp(argv[i], "--no-naive"))
			naive = false;
		else {
			fprintf(stderr, "usage: %s [--trials N] [--seed S] [--suite FILE] "
				"[--only NAME,...] [--no-peers] [--no-naive]\n", argv[0]);
			return 2;
		}
	}
	tir_target t;
	tir_error err;
	if (tir_target_parse("cpu", &t, &err)) {
		fprintf(stderr, "cpu: %s\n", err.msg);
		return 1;
	}
	printf("tird bench/cpu_tune: target %s, %d cores, %d trials per workload, seed %llu\n",
	       t.key, t.cores, trials, (unsigned long long)seed);
#ifndef HAVE_OPENBLAS
	printf("(built without OpenBLAS)\n");
#endif
#ifndef HAVE_DNNL
	printf("(built without oneDNN)\n");
#endif

	row rows[MAX_ROWS];
	int n = 0;
	/* sgemm 1024^3 */
	if (wanted(only, "sgemm-1024")) {
		row *r = &rows[n++];
		memset(r, 0, sizeof *r);
		snprintf(r->name, sizeof r->name, "sgemm-1024");
		run_tird(r, "{\"op\":\"matmul\",\"M\":1024,\"N\":1024,\"K\":1024}", &t, trials,
			 seed, naive);
		if (peers) {
			gemm g = { 1024, 1024, 1024, NULL, NULL, NULL };
#ifdef HAVE_OPENBLAS
			r->blas_us = in_child(openblas_sgemm, &g);
#endif
#ifdef HAVE_DNNL
			r->dnnl_us = in_child(dnnl_sgemm_time, &g);
#endif
			(void)g;
		}
	}
	/* the suite's 2-D convolutions (NHWC: dense, grouped, dilated) */
	char *text = tir_read_file(suite, 0, NULL);
	cJSON *doc = text ? cJSON_Parse(text) : NULL;
	if (!doc)
		fprintf(stderr, "cannot read the suite %s; convolutions skipped\n", suite);
	const cJSON *e;
	cJSON_ArrayForEach(e, doc) {
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
		const cJSON *wl = cJSON_GetObjectItemCaseSensitive(e, "workload");
		const cJSON *op = cJSON_GetObjectItemCaseSensitive(wl, "op");
		const cJSON *layout = cJSON_GetObjectItemCaseSensitive(wl, "layout");
		if (!cJSON_IsString(name) || !cJSON_IsString(op) || strcmp(op->valuestring, "conv2d") ||
		    !cJSON_IsString(layout) || strcmp(layout->valuestring, "NHWC") ||
		    !wanted(only, name->valuestring))
			continue;
		if (n == MAX_ROWS) {
			fprintf(stderr, "more than %d rows: %s and after skipped (use --only)\n",
				MAX_ROWS, name->valuestring);
			break;
		}
		row *r = &rows[n++];
		memset(r, 0, sizeof *r);
		r->conv = true;
		snprintf(r->name, sizeof r->name, "%s", name->valuestring);
		char *json = cJSON_PrintUnformatted(wl);
		run_tird(r, json, &t, trials, seed, naive);
		cJSON_free(json);
#ifdef HAVE_DNNL
		if (peers) {
			conv c = { .N = num(wl, "N", 1), .C = num(wl, "C", 1), .H = num(wl, "H", 1),
				   .W = num(wl, "W", 1), .K = num(wl, "K", 1), .R = num(wl, "R", 1),
				   .S = num(wl, "S", 1), .groups = num(wl, "groups", 1) };
			pair(wl, "stride", 1, &c.sh, &c.sw);
			pair(wl, "dilation", 1, &c.dh, &c.dw);
			const cJSON *pad = cJSON_GetObjectItemCaseSensitive(wl, "pad");
			pair(wl, "pad", 0, &c.pt, &c.pl);
			c.pb = c.pt;
			c.pr = c.pl;
			if (cJSON_GetArraySize(pad) == 4) {
				c.pb = (int64_t)cJSON_GetArrayItem(pad, 2)->valuedouble;
				c.pr = (int64_t)cJSON_GetArrayItem(pad, 3)->valuedouble;
			}
			r->dnnl_us = in_child(dnnl_conv_time, &c);
			c.prepacked = true;
			r->dnnl_pre_us = in_child(dnnl_conv_time, &c);
		}
#endif
	}
	cJSON_Delete(doc);
	free(text);
	print_table(rows, n);
	return 0;
}
