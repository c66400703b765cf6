/*
 * reducers.c — hand-built reductions for the suites (see reducers.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <check.h>
#include "tir.h"
#include "tir_measure.h"
#include "ir/ir.h"
#include "sched/sched.h"
#include "measure/measure.h"
#include "reducers.h"

const char *tr_name(const tr_spec *s)
{
	static char name[128];
	snprintf(name, sizeof name, "%s %s->%s %lldx%lld%s%s", reduce_name(s->r),
		 dtype_name(s->in), dtype_name(s->out), (long long)s->M, (long long)s->K,
		 s->plus_one ? " +1" : "", s->nan_every ? " with NaN values" : "");
	return name;
}

tir_program *tr_program(const tr_spec *s)
{
	tir_program *p = program_new(NULL);
	tir_arena *a = &p->arena;
	int64_t sa[2] = { s->M, s->K }, sr[1] = { s->M };
	tir_buffer *A = program_buffer(p, "A", s->in, 2, sa, TIR_SCOPE_GLOBAL, BUF_INPUT);
	tir_buffer *R = program_buffer(p, "R", s->out, 1, sr, TIR_SCOPE_GLOBAL, BUF_OUTPUT);
	tir_block *b = block_new(p, "reduce");
	tir_var *vi = program_var(p, "vi"), *vk = program_var(p, "vk");
	block_add_iter(b, vi, s->M, ITER_SPATIAL, NULL);
	block_add_iter(b, vk, s->K, ITER_REDUCE, NULL);
	b->store = R;
	b->store_idx[0] = mk_var(a, vi);
	tir_expr *idx[2] = { mk_var(a, vi), mk_var(a, vk) };
	tir_expr *v = mk_cast(a, s->out, mk_load(a, A, 2, idx));
	if (s->plus_one)
		v = mk_add(a, v, mk_float(a, 1.0, s->out));
	if (s->nan_every) {
		int64_t n = s->nan_every;
		tir_expr *at = n == 1 ? mk_bin(a, E_LE, mk_int(a, 0), mk_var(a, vk))
			     : mk_bin(a, E_EQ, mk_floormod(a, mk_var(a, vk), mk_int(a, n)),
				      mk_int(a, n - 1));
		v = mk_select(a, at, mk_float(a, NAN, s->out), v);
	}
	b->value = v;
	b->reduce = s->r;
	b->init = reduce_identity(a, s->r, s->out);
	block_update_regions(p, b);
	static const char *const loops[] = { "i", "k" };
	stmt_append(p->root, program_nest(p, b, loops));
	return p;
}

tir_sched *tr_sched(const tr_spec *spec)
{
	tir_sched *s = xcalloc(1, sizeof *s);
	s->p = tr_program(spec);
	s->rng = 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;    /* seed 1 */
	return s;
}

void tr_check_replay(tir_sched *s, const tr_spec *spec)
{
	char *trace = tir_sched_trace(s);
	tir_error err = { "" };
	tir_sched *s2 = tr_sched(spec);
	ck_assert_msg(tir_sched_replay(s2, trace, &err) == 0, "%s: replay: %s\n%s", tr_name(spec),
		      err.msg, trace);
	char *t1 = tir_program_print(tir_sched_program(s));
	char *t2 = tir_program_print(tir_sched_program(s2));
	ck_assert_str_eq(t1, t2);
	free(t1);
	free(t2);
	free(trace);
	tir_sched_free(s2);
}

void tr_expect(const tr_spec *s, const double *A, double *R)
{
	for (int64_t i = 0; i < s->M; i++) {
		double acc = s->r == REDUCE_MAX ? -INFINITY : s->r == REDUCE_MIN ? INFINITY : 0;
		for (int64_t k = 0; k < s->K; k++) {
			double v = A[i * s->K + k];
			if (s->plus_one)
				v = s->out == TIR_F32 ? (double)((float)v + 1.0f) : v + 1;
			if (s->nan_every && k % s->nan_every == s->nan_every - 1)
				v = NAN;
			if (s->r == REDUCE_MAX) {
				if (v > acc)
					acc = v;
			} else if (s->r == REDUCE_MIN) {
				if (v < acc)
					acc = v;
			} else {
				acc += v;
			}
		}
		R[i] = acc;
	}
}

static tir_target target(const char *key)
{
	tir_target t;
	tir_error err;
	ck_assert_msg(tir_target_parse(key, &t, &err) == 0, "target %s: %s", key, err.msg);
	return t;
}

int tr_run(const tir_program *p, const tr_spec *s, const char *key, const char *what)
{
	tir_target t = target(key);
	tir_error err = { "" };
	bool cuda = t.kind == TIR_TARGET_CUDA, gpu = false;
	if (cuda) {
		tir_target dev;
		if (tir_cuda_device_props(0, &dev, &err) == 0) {
			gpu = true;
			t = dev;
		}
	}
	ck_assert_msg(tir_verify(p, &t, &err) == 0, "%s: %s: verify: %s", tr_name(s), what, err.msg);
	tir_code *c = tir_codegen(p, &t, &err);
	ck_assert_msg(c, "%s: %s: codegen: %s", tr_name(s), what, err.msg);
	const tir_runner *rn = tir_runner_for(&t);
	tir_artifact *art = rn->build(c, &t, &err);
#ifndef HAVE_CUDA
	if (cuda) {
		tir_code_free(c);
		return 0;
	}
#endif
	ck_assert_msg(art, "%s: %s: build: %s\n%s", tr_name(s), what, err.msg, c->source);
	if (cuda && !gpu) {
		rn->free(art);
		tir_code_free(c);
		return 0;
	}
	tir_measure_opts o;
	memset(&o, 0, sizeof o);
	o.seed = 7;
	o.no_timing = true;
	o.timeout_s = 60;
	tir_measure_result r;
	memset(&r, 0, sizeof r);
	int rc = rn->run(art, c, &o, &r);
	rn->free(art);
	ck_assert_msg(rc == 0, "%s: %s: run: %s: %s", tr_name(s), what,
		      tir_measure_status_name(r.status), r.msg);
	ck_assert_int_eq(c->args[0].elems, s->M * s->K);
	ck_assert_int_eq(r.out_elems, s->M);
	void *raw = malloc((size_t)(s->M * s->K) * (size_t)c->args[0].elem_bytes);
	double *A = malloc(sizeof(double) * (size_t)(s->M * s->K));
	double *R = malloc(sizeof(double) * (size_t)s->M);
	tir_measure_fill(c, 0, o.seed, raw);
	tir_measure_to_double(c->args[0].dtype, raw, s->M * s->K, A);
	tr_expect(s, A, R);
	double scale = 1;
	for (int64_t i = 0; i < s->M; i++)
		if (isfinite(R[i]) && fabs(R[i]) > scale)
			scale = fabs(R[i]);
	/* a max or min is one of the values, exact; a sum is rounded */
	bool exact = s->r != REDUCE_SUM && (!s->plus_one || s->out == TIR_F32);
	double tol = exact ? 0 : s->in == TIR_F32 && s->out == TIR_F32 ? 1e-5 : 1e-2;
	for (int64_t i = 0; i < s->M; i++) {
		double x = r.output[i], y = R[i];
		bool ok = x == y || (isnan(x) && isnan(y)) ||
			  (isfinite(x) && isfinite(y) && fabs(x - y) <= tol * scale);
		ck_assert_msg(ok, "%s: %s on %s: R[%lld] = %.9g, the plain loop gives %.9g\n%s",
			      tr_name(s), what, t.key, (long long)i, x, y, c->source);
	}
	if (getenv("TIR_TEST_VERBOSE"))        /* which ran where */
		fprintf(stderr, "%s: %s: ran on %s, as the plain loop\n", tr_name(s), what, t.key);
	free(raw);
	free(A);
	free(R);
	tir_measure_result_clear(&r);
	tir_code_free(c);
	return 1;
}

char *tr_cuda_source(const tir_program *p, const char *what)
{
	tir_target t = target("cuda:sm_90");
	tir_error err = { "" };
	tir_code *c = tir_codegen(p, &t, &err);
	ck_assert_msg(c, "%s: cuda codegen: %s", what, err.msg);
#ifdef HAVE_CUDA
	char *cubin = NULL;
	size_t size = 0;
	int rc = tir_nvrtc_compile(c->source, 90, &cubin, &size, &err);
	if (rc != 0)
		fprintf(stderr, "%s\n", c->source);
	ck_assert_msg(rc == 0, "%s: nvrtc: %s", what, err.msg);
	free(cubin);
#endif
	char *src = strdup(c->source);
	tir_code_free(c);
	return src;
}

char *tr_c_source(const tir_program *p)
{
	tir_target t = target("cpu");
	tir_error err = { "" };
	tir_code *c = tir_codegen(p, &t, &err);
	ck_assert_msg(c, "c codegen: %s", err.msg);
	char *src = strdup(c->source);
	tir_code_free(c);
	return src;
}
