/*
 * check_interp.c — the interpreter of programs (tuner/ir/interp.c), which
 * measurement's reference is (tuner/measure/reference.c):
 *   - on every workload of bench/suite.json, and on the odd shapes of
 *     check_workload, check_codegen and testutil (groups, dilation,
 *     transposed, depthwise, int8, float16, epilogues, layouts, NT/TN,
 *     batch), it takes the hand-written reference's arguments
 *     (tests/reference.c) and agrees with it: max normwise relative error
 *     below 1e-12 per output (float16 / bfloat16 accumulators excepted,
 *     which the program rounds at every step as the code does);
 *   - its nest evaluator computes what its tree evaluator computes, and
 *     neither result depends on the number of threads;
 *   - programs built by hand: MAX and MIN reductions, predicates, casts
 *     and stores of every dtype, the math functions, floor division,
 *     selects that guard out-of-bounds loads, an out-of-bounds load,
 *     blocks that read what they write, several outputs;
 *   - scheduled programs (sampled CPU and GPU candidates, tensor cores
 *     included) mean what the unscheduled program means.
 * The suite's workloads print the time of both references.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tir.h"
#include "ir/ir.h"
#include "measure/measure.h"
#include "testutil.h"
#include "reference.h"

/* ---- helpers ------------------------------------------------------------------------- */

static tir_workload *parse(const char *json)
{
	tir_error err = { "" };
	tir_workload *w = tir_workload_parse(json, strlen(json), NULL, &err);
	ck_assert_msg(w != NULL, "%s: %s", json, err.msg);
	return w;
}

static double normwise(const double *ref, const double *out, int64_t n)
{
	double d = 0, m = 0;
	for (int64_t i = 0; i < n; i++) {
		if (!isfinite(out[i]) || !isfinite(ref[i]))
			return INFINITY;
		d = fmax(d, fabs(out[i] - ref[i]));
		m = fmax(m, fabs(ref[i]));
	}
	return d / fmax(m, 1e-30);
}

/* Random values for argument i of w: in [-1, 1] rounded to its dtype, as
 * measurement's inputs are (integers in [-8, 8]). */
static void fill(const tir_ref_arg *a, uint64_t seed, double *v)
{
	uint64_t s = tir_derive(seed, 17, (uint64_t)a->elems);
	for (int64_t i = 0; i < a->elems; i++) {
		double x = tir_rand_unit(&s) * 2 - 1;
		switch (a->dtype) {
		case TIR_F32: v[i] = (float)x; break;
		case TIR_F16: v[i] = ldexp(nearbyint(ldexp(x, 10)), -10); break;   /* exact in f16 */
		case TIR_BF16: v[i] = ldexp(nearbyint(ldexp(x, 7)), -7); break;    /* exact in bf16 */
		case TIR_U8: v[i] = (double)(tir_rand(&s) % 256); break;           /* all of uint8 */
		default: v[i] = (double)(int)(tir_rand(&s) % 17) - 8; break;
		}
	}
}

/* A workload's arguments, filled (outputs NaN). */
typedef struct args {
	int n;
	tir_ref_arg a[TIR_REF_MAX_ARGS];
	double *v[TIR_REF_MAX_ARGS];
} args;

static void args_open(args *x, const tir_workload *w, uint64_t seed)
{
	tir_error err = { "" };
	x->n = tir_reference_args(w, x->a, TIR_REF_MAX_ARGS, &err);
	ck_assert_msg(x->n > 0, "%s", err.msg);
	for (int i = 0; i < x->n; i++) {
		x->v[i] = malloc(sizeof(double) * (size_t)x->a[i].elems + 1);
		if (x->a[i].is_output)
			for (int64_t k = 0; k < x->a[i].elems; k++)
				x->v[i][k] = NAN;
		else
			fill(&x->a[i], seed + (uint64_t)i, x->v[i]);
	}
}

static void args_close(args *x)
{
	for (int i = 0; i < x->n; i++)
		free(x->v[i]);
}

/* ---- against the hand-written reference ------------------------------------------------- */

/* The interpreter's arguments are the hand-written reference's, and its
 * output agrees with it; returns the error.  *t_hand, *t_interp: seconds. */
static double against_hand(const char *name, const char *json, double *t_hand, double *t_interp)
{
	tir_error err = { "" };
	tir_workload *w = parse(json);
	args x;
	args_open(&x, w, 1);
	tir_ref_arg h[TIR_REF_MAX_ARGS];
	ck_assert_int_eq(ref_hand_args(w, h, TIR_REF_MAX_ARGS, &err), x.n);
	for (int i = 0; i < x.n; i++)
		ck_assert_msg(x.a[i].ndim == h[i].ndim && x.a[i].elems == h[i].elems &&
			      x.a[i].dtype == h[i].dtype && x.a[i].is_output == h[i].is_output &&
			      !memcmp(x.a[i].shape, h[i].shape, sizeof(int64_t) * (size_t)h[i].ndim),
			      "%s: argument %d: \"%s\" differs from the hand-written \"%s\"",
			      name, i, x.a[i].name, h[i].name);
	int o = x.n - 1;
	ck_assert(x.a[o].is_output);
	for (int i = 0; i < o; i++)
		ck_assert(!x.a[i].is_output);
	double *hand = malloc(sizeof(double) * (size_t)x.a[o].elems + 1);
	double t0 = tir_now_s();
	ck_assert_msg(ref_hand(w, x.v, hand, &err) == 0, "%s: %s", name, err.msg);
	double t1 = tir_now_s();
	tir_program *p = tir_program_build(w, &err);
	ck_assert_msg(p, "%s: %s", name, err.msg);
	interp_opts io = { 0 };
	ck_assert_msg(interp_run(p, x.v, &io, &err) == 0, "%s: %s", name, err.msg);
	double t2 = tir_now_s();
	ck_assert_msg(io.tree_blocks == 0 && io.nest_blocks > 0,
		      "%s: %d statements left to the tree evaluator", name, io.tree_blocks);
	*t_hand = t1 - t0;
	*t_interp = t2 - t1;
	double e = normwise(hand, x.v[o], x.a[o].elems);
	/* A float16 / bfloat16 accumulator rounds at every step: every value
	 * the program stores there is of that type. */
	if (w->out_dtype == TIR_F16 || w->out_dtype == TIR_BF16) {
		int bits = w->out_dtype == TIR_F16 ? 11 : 8;
		for (int64_t k = 0; k < x.a[o].elems; k++) {
			double v = x.v[o][k];
			int ex;
			frexp(v, &ex);
			ck_assert_msg(v == 0 || ldexp(nearbyint(ldexp(v, bits - ex)), ex - bits) == v,
				      "%s: output %lld = %.17g is not a %s", name, (long long)k, v,
				      dtype_name(w->out_dtype));
		}
	}
	free(hand);
	tir_program_free(p);
	args_close(&x);
	tir_workload_free(w);
	return e;
}

START_TEST(suite_against_hand)
{
	char *name = tu_suite_name(_i), *json = tu_suite_workload_at(_i);
	ck_assert(name && json);
	double th, ti;
	double e = against_hand(name, json, &th, &ti);
	fprintf(stderr, "interp: %-6s hand-written %7.3f s, interpreter %7.3f s, error %.2g\n",
		name, th, ti, e);
	ck_assert_msg(e < 1e-12, "%s: the interpreter differs from the hand-written "
		      "reference by %g", name, e);
	free(name);
	free(json);
}
END_TEST

/* check_codegen's unscheduled workloads and check_workload's hand-computed
 * ones. */
static const char *const odd[] = {
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
	"{\"op\":\"matmul\",\"M\":16,\"N\":12,\"K\":64,\"dtype\":\"uint8\",\"epilogue\":[\"bias\",\"relu\"]}",
	"{\"op\":\"conv2d\",\"N\":1,\"C\":8,\"H\":6,\"W\":6,\"K\":4,\"R\":3,\"S\":3,\"pad\":1,\"dtype\":\"uint8\"}",
	"{\"op\":\"conv2d\",\"N\":1,\"C\":1,\"H\":3,\"W\":3,\"K\":1,\"R\":2,\"S\":2,\"pad\":1}",
	"{\"op\":\"conv2d\",\"N\":1,\"C\":1,\"H\":5,\"W\":5,\"K\":1,\"R\":2,\"S\":2,\"stride\":2,\"dilation\":2}",
	"{\"op\":\"conv2d\",\"N\":1,\"C\":4,\"H\":1,\"W\":1,\"K\":2,\"R\":1,\"S\":1,\"groups\":2,\"layout\":\"NHWC\"}",
	"{\"op\":\"depthwise_conv2d\",\"N\":1,\"C\":2,\"H\":1,\"W\":1,\"R\":1,\"S\":1,\"multiplier\":2}",
	"{\"op\":\"conv2d_transpose\",\"N\":1,\"C\":1,\"H\":3,\"W\":3,\"K\":1,\"R\":3,\"S\":3,\"pad\":1}",
	"{\"op\":\"conv2d_transpose\",\"N\":1,\"C\":2,\"H\":1,\"W\":1,\"K\":2,\"R\":1,\"S\":1,\"groups\":2,\"layout\":\"NHWC\"}",
	"{\"op\":\"matmul\",\"M\":3,\"N\":4,\"K\":5,\"batch\":2,\"layout\":\"TN\"}",
	"{\"op\":\"conv2d\",\"N\":1,\"C\":1,\"H\":1,\"W\":2,\"K\":2,\"R\":1,\"S\":1,\"epilogue\":[\"bias\",\"gelu\"]}",
};
#define NODD ((int)(sizeof odd / sizeof odd[0]))

static const char *odd_json(int i) { return i < NODD ? odd[i] : tu_odd[i - NODD][1]; }

START_TEST(odd_against_hand)
{
	const char *json = odd_json(_i);
	tir_workload *w = parse(json);
	double tol = w->out_dtype == TIR_F16 ? 1e-2 : w->out_dtype == TIR_BF16 ? 3e-2 : 1e-12;
	tir_workload_free(w);
	double th, ti;
	double e = against_hand(json, json, &th, &ti);
	ck_assert_msg(e < tol, "%s: the interpreter differs from the hand-written reference "
		      "by %g", json, e);
}
END_TEST

/* ---- the two evaluators, the threads ------------------------------------------------------ */

/* p run on x's inputs with o; the outputs into out[] (malloc'd). */
static void run_with(const tir_program *p, const args *x, interp_opts o, double **out)
{
	tir_error err = { "" };
	double *v[TIR_REF_MAX_ARGS];
	for (int i = 0; i < x->n; i++) {
		v[i] = malloc(sizeof(double) * (size_t)x->a[i].elems + 1);
		memcpy(v[i], x->v[i], sizeof(double) * (size_t)x->a[i].elems);
	}
	ck_assert_msg(interp_run(p, v, &o, &err) == 0, "%s", err.msg);
	for (int i = 0; i < x->n; i++) {
		if (x->a[i].is_output)
			out[i] = v[i];
		else
			free(v[i]);
	}
}

START_TEST(nest_equals_tree)
{
	const char *json = odd_json(_i);
	tir_error err = { "" };
	tir_workload *w = parse(json);
	tir_program *p = tir_program_build(w, &err);
	args x;
	args_open(&x, w, 3);
	double *tree[TIR_REF_MAX_ARGS] = { 0 }, *nest[TIR_REF_MAX_ARGS] = { 0 };
	run_with(p, &x, (interp_opts){ .tree = true }, tree);
	run_with(p, &x, (interp_opts){ 0 }, nest);
	for (int i = 0; i < x.n; i++) {
		if (!x.a[i].is_output)
			continue;
		/* the same operations in the same order: equal, but for a
		 * contraction into fused multiply-adds where the compiler makes one */
		double e = normwise(tree[i], nest[i], x.a[i].elems);
		ck_assert_msg(e <= 1e-15, "%s: output %s: the evaluators differ by %g", json,
			      x.a[i].name, e);
		free(tree[i]);
		free(nest[i]);
	}
	args_close(&x);
	tir_program_free(p);
	tir_workload_free(w);
}
END_TEST

START_TEST(threads_change_nothing)
{
	static const char *const docs[] = {
		"{\"op\":\"conv2d\",\"N\":2,\"C\":16,\"H\":20,\"W\":20,\"K\":32,\"R\":3,\"S\":3,"
		"\"pad\":1,\"groups\":2,\"layout\":\"NHWC\",\"epilogue\":[\"bias\",\"gelu\"]}",
		"{\"op\":\"matmul\",\"M\":200,\"N\":300,\"K\":77,\"layout\":\"TN\",\"batch\":2}",
	};
	for (int d = 0; d < 2; d++) {
		tir_error err = { "" };
		tir_workload *w = parse(docs[d]);
		tir_program *p = tir_program_build(w, &err);
		args x;
		args_open(&x, w, 5);
		int o = x.n - 1;
		double *one[TIR_REF_MAX_ARGS] = { 0 };
		run_with(p, &x, (interp_opts){ .threads = 1 }, one);
		for (int t = 2; t <= 7; t += 5) {
			double *many[TIR_REF_MAX_ARGS] = { 0 };
			run_with(p, &x, (interp_opts){ .threads = t }, many);
			ck_assert_msg(!memcmp(one[o], many[o], sizeof(double) * (size_t)x.a[o].elems),
				      "%s: %d threads change the result", docs[d], t);
			free(many[o]);
		}
		free(one[o]);
		args_close(&x);
		tir_program_free(p);
		tir_workload_free(w);
	}
}
END_TEST

/* ---- programs built by hand ---------------------------------------------------------------- */

/* A program under construction: any workload (it only names the program). */
typedef struct hp {
	tir_workload *w;
	tir_program *p;
	tir_arena *a;
} hp;

static hp hp_new(void)
{
	hp h;
	h.w = parse("{\"op\":\"matmul\",\"M\":1,\"N\":1,\"K\":1}");
	h.p = program_new(h.w);
	h.a = &h.p->arena;
	return h;
}

static void hp_free(hp *h)
{
	tir_program_free(h->p);
	tir_workload_free(h->w);
}

static tir_buffer *buf1(hp *h, const char *name, tir_dtype t, int64_t n, tir_buf_role role)
{
	return program_buffer(h->p, name, t, 1, &n, TIR_SCOPE_GLOBAL, role);
}

static tir_buffer *buf2(hp *h, const char *name, tir_dtype t, int64_t n, int64_t m,
			tir_buf_role role)
{
	int64_t shape[2] = { n, m };
	return program_buffer(h->p, name, t, 2, shape, TIR_SCOPE_GLOBAL, role);
}

/* A block of n iterators (the last nred reduce) of extents ext; vars into
 * v.  The caller sets store, store_idx, value (reduce, init, predicate),
 * then nest() puts it in a nest of its own at the end of the program. */
static tir_block *block(hp *h, const char *name, int n, const int64_t *ext, int nred,
			tir_var **v)
{
	tir_block *b = block_new(h->p, name);
	for (int i = 0; i < n; i++) {
		v[i] = program_var(h->p, "v");
		block_add_iter(b, v[i], ext[i], i >= n - nred ? ITER_REDUCE : ITER_SPATIAL, NULL);
	}
	return b;
}

static void nest(hp *h, tir_block *b)
{
	block_update_regions(h->p, b);
	stmt_append(h->p->root, program_nest(h->p, b, NULL));
}

static tir_expr *V(hp *h, tir_var *v) { return mk_var(h->a, v); }
static tir_expr *I(hp *h, int64_t x) { return mk_int(h->a, x); }
static tir_expr *F(hp *h, double x) { return mk_float(h->a, x, TIR_F32); }
static tir_expr *ld1(hp *h, tir_buffer *b, tir_expr *i) { return mk_load(h->a, b, 1, &i); }
static tir_expr *ld2(hp *h, tir_buffer *b, tir_expr *i, tir_expr *j)
{
	tir_expr *idx[2] = { i, j };
	return mk_load(h->a, b, 2, idx);
}

static void store1(tir_block *b, tir_buffer *out, tir_expr *i)
{
	b->store = out;
	b->store_idx[0] = i;
}

/* Runs h's program with both evaluators on params (copies), checks they
 * agree exactly, and leaves the nest evaluator's results in params.
 * Returns interp_run's status of the nest evaluator (err filled). */
static int run_both(hp *h, double **params, const int64_t *elems, tir_error *err)
{
	int n = h->p->nparams;
	double *copy[16];
	for (int i = 0; i < n; i++) {
		copy[i] = malloc(sizeof(double) * (size_t)elems[i] + 1);
		memcpy(copy[i], params[i], sizeof(double) * (size_t)elems[i]);
	}
	tir_error terr = { "" };
	int rt = interp_run(h->p, copy, &(interp_opts){ .tree = true }, &terr);
	int rn = interp_run(h->p, params, NULL, err);
	ck_assert_int_eq(rt, rn);
	if (rt)
		ck_assert_str_eq(terr.msg, err->msg);
	for (int i = 0; i < n; i++) {
		for (int64_t k = 0; k < elems[i] && rt == 0; k++)
			ck_assert_msg(copy[i][k] == params[i][k] ||
				      (isnan(copy[i][k]) && isnan(params[i][k])),
				      "param %d element %lld: tree %.17g, nest %.17g", i,
				      (long long)k, copy[i][k], params[i][k]);
		free(copy[i]);
	}
	return rn;
}

START_TEST(max_min_sum_reductions)
{
	hp h = hp_new();
	enum { R = 4, C = 6 };
	tir_buffer *X = buf2(&h, "X", TIR_F32, R, C, BUF_INPUT);
	tir_buffer *Xi = buf2(&h, "Xi", TIR_I32, R, C, BUF_INPUT);
	tir_buffer *mx = buf1(&h, "mx", TIR_F32, R, BUF_OUTPUT);
	tir_buffer *mn = buf1(&h, "mn", TIR_F32, R, BUF_OUTPUT);
	tir_buffer *sm = buf1(&h, "sm", TIR_F32, R, BUF_OUTPUT);
	tir_buffer *mi = buf1(&h, "mi", TIR_I32, R, BUF_OUTPUT);
	tir_buffer *mo = buf1(&h, "mo", TIR_F32, R, BUF_OUTPUT);   /* max without init */
	tir_buffer *outs[5] = { mx, mn, sm, mi, mo };
	tir_reduce red[5] = { REDUCE_MAX, REDUCE_MIN, REDUCE_SUM, REDUCE_MAX, REDUCE_MAX };
	for (int k = 0; k < 5; k++) {
		tir_var *v[2];
		int64_t ext[2] = { R, C };
		tir_block *b = block(&h, "r", 2, ext, 1, v);
		store1(b, outs[k], V(&h, v[0]));
		b->value = ld2(&h, k == 3 ? Xi : X, V(&h, v[0]), V(&h, v[1]));
		b->reduce = red[k];
		b->init = k == 4 ? NULL : reduce_identity(h.a, red[k], outs[k]->dtype);
		nest(&h, b);
	}
	double x[R * C], xi[R * C], o[5][R];
	for (int i = 0; i < R * C; i++) {
		x[i] = sin(i * 1.7) * 3;
		xi[i] = (double)((i * 37) % 23 - 11);
	}
	for (int k = 0; k < 5; k++)
		for (int i = 0; i < R; i++)
			o[k][i] = k == 4 ? 0.5 : NAN;
	double *params[7] = { x, xi, o[0], o[1], o[2], o[3], o[4] };
	int64_t elems[7] = { R * C, R * C, R, R, R, R, R };
	tir_error err = { "" };
	ck_assert_msg(run_both(&h, params, elems, &err) == 0, "%s", err.msg);
	for (int i = 0; i < R; i++) {
		double a = -INFINITY, b = INFINITY, s = 0, m = -INFINITY;
		for (int j = 0; j < C; j++) {
			a = fmax(a, x[i * C + j]);
			b = fmin(b, x[i * C + j]);
			s += x[i * C + j];
			m = fmax(m, xi[i * C + j]);
		}
		ck_assert_double_eq(o[0][i], a);
		ck_assert_double_eq(o[1][i], b);
		ck_assert_double_eq(o[2][i], s);
		ck_assert_double_eq(o[3][i], m);
		ck_assert_double_eq(o[4][i], fmax(a, 0.5));
	}
	hp_free(&h);
}
END_TEST

START_TEST(predicates)
{
	hp h = hp_new();
	enum { N = 6, K = 5 };
	tir_buffer *X = buf2(&h, "X", TIR_F32, N, K, BUF_INPUT);
	tir_buffer *Y = buf1(&h, "Y", TIR_F32, N, BUF_OUTPUT);
	tir_buffer *S = buf1(&h, "S", TIR_F32, N, BUF_OUTPUT);
	tir_var *v[2];
	int64_t ext[2] = { N, K };
	/* Y[i] = X[i, 0] * 2 where i < 3 (a predicate in loop variables) */
	tir_block *b = block(&h, "half", 1, ext, 0, v);
	store1(b, Y, V(&h, v[0]));
	b->value = mk_mul(h.a, ld2(&h, X, V(&h, v[0]), I(&h, 0)), F(&h, 2));
	nest(&h, b);
	b->predicate = mk_bin(h.a, E_LT, b->iters[0].binding, I(&h, 3));
	/* S[i] = sum over j < 2 of X[i, j]: the init where the predicate holds
	 * at j == 0, S[5] never touched (i < 5) */
	b = block(&h, "partial", 2, ext, 1, v);
	store1(b, S, V(&h, v[0]));
	b->value = ld2(&h, X, V(&h, v[0]), V(&h, v[1]));
	b->reduce = REDUCE_SUM;
	b->init = F(&h, 0);
	nest(&h, b);
	b->predicate = mk_and(h.a, mk_bin(h.a, E_LT, b->iters[1].binding, I(&h, 2)),
			      mk_bin(h.a, E_LT, b->iters[0].binding, I(&h, 5)));
	double x[N * K], y[N], s[N];
	for (int i = 0; i < N * K; i++)
		x[i] = i + 1;
	for (int i = 0; i < N; i++)
		y[i] = s[i] = 7;
	double *params[3] = { x, y, s };
	int64_t elems[3] = { N * K, N, N };
	tir_error err = { "" };
	ck_assert_msg(run_both(&h, params, elems, &err) == 0, "%s", err.msg);
	for (int i = 0; i < N; i++) {
		ck_assert_double_eq(y[i], i < 3 ? 2 * x[i * K] : 7);
		ck_assert_double_eq(s[i], i < 5 ? x[i * K] + x[i * K + 1] : 7);
	}
	hp_free(&h);
}
END_TEST

/* Y[i] = f(X[i]) for the value expressions f of vals, one output each. */
typedef tir_expr *(*value_fn)(hp *h, tir_expr *x, tir_var *i);

static void pointwise(int nx, const double *x, int nf, const value_fn *f, const tir_dtype *dt,
		      double (*out)[16])
{
	hp h = hp_new();
	tir_buffer *X = buf1(&h, "X", TIR_F32, nx, BUF_INPUT), *Y[8];
	for (int k = 0; k < nf; k++)
		Y[k] = buf1(&h, "Y", dt[k], nx, BUF_OUTPUT);
	for (int k = 0; k < nf; k++) {
		tir_var *v[1];
		int64_t ext[1] = { nx };
		tir_block *b = block(&h, "f", 1, ext, 0, v);
		store1(b, Y[k], V(&h, v[0]));
		b->value = f[k](&h, ld1(&h, X, V(&h, v[0])), v[0]);
		nest(&h, b);
	}
	double *params[9] = { (double *)x };
	int64_t elems[9] = { nx };
	for (int k = 0; k < nf; k++) {
		params[k + 1] = out[k];
		elems[k + 1] = nx;
	}
	tir_error err = { "" };
	ck_assert_msg(run_both(&h, params, elems, &err) == 0, "%s", err.msg);
	hp_free(&h);
}

static tir_expr *to_f16(hp *h, tir_expr *x, tir_var *i) { (void)i; return mk_cast(h->a, TIR_F16, x); }
static tir_expr *to_bf16(hp *h, tir_expr *x, tir_var *i) { (void)i; return mk_cast(h->a, TIR_BF16, x); }
static tir_expr *to_i8(hp *h, tir_expr *x, tir_var *i) { (void)i; return mk_cast(h->a, TIR_I8, x); }
static tir_expr *to_u8(hp *h, tir_expr *x, tir_var *i) { (void)i; return mk_cast(h->a, TIR_U8, x); }
static tir_expr *to_i32(hp *h, tir_expr *x, tir_var *i) { (void)i; return mk_cast(h->a, TIR_I32, x); }
static tir_expr *to_bool(hp *h, tir_expr *x, tir_var *i) { (void)i; return mk_cast(h->a, TIR_BOOL, x); }
static tir_expr *same(hp *h, tir_expr *x, tir_var *i) { (void)h; (void)i; return x; }

START_TEST(casts_and_stores)
{
	const double u16 = ldexp(1, -10), u8 = ldexp(1, -7);
	double x[] = {
		1 + u16 / 2,          /* a tie: to even, 1 */
		1 + 3 * u16 / 2,      /* a tie: to even, 1 + 2 ulp */
		65519, 65520, -70000, /* 65504, inf, -inf in float16 */
		1e-8, 4e-8,           /* float16: 0 and its smallest subnormal 2^-24 */
		1 + u8 / 2, 1 + 3 * u8 / 2,
		200, -129, -2.7, 2.5, 2147483648.0, 0.5, 0,
	};
	const int n = (int)(sizeof x / sizeof x[0]);
	static const value_fn f[] = { to_f16, to_bf16, to_i8, to_i32, to_bool, same, same };
	/* the last two store into float16 and int8 buffers: a store converts */
	static const tir_dtype dt[] = { TIR_F32, TIR_F32, TIR_I32, TIR_I32, TIR_I32, TIR_F16, TIR_I8 };
	double out[7][16];
	pointwise(n, x, 7, f, dt, out);
	static const double f16[] = { 1, 1 + 2 * 0x1p-10, 65504, INFINITY, -INFINITY, 0, 0x1p-24 };
	for (int i = 0; i < 7; i++) {
		ck_assert_double_eq(out[0][i], f16[i]);
		ck_assert_double_eq(out[5][i], f16[i]);
	}
	ck_assert_double_eq(out[1][7], 1);
	ck_assert_double_eq(out[1][8], 1 + 2 * u8);
	ck_assert_double_eq(out[1][2], 65536);               /* bfloat16 keeps 8 bits */
	static const double i8[] = { -56, 127, -2, 2, 0, 0, 0 }, i32[] = { 200, -129, -2, 2,
		-2147483648.0, 0, 0 };
	for (int i = 0; i < 7; i++) {
		ck_assert_double_eq(out[2][9 + i], i8[i]);
		ck_assert_double_eq(out[6][9 + i], i8[i]);      /* a store wraps as a cast */
		ck_assert_double_eq(out[3][9 + i], i32[i]);
	}
	ck_assert_double_eq(out[4][14], 1);                  /* bool: x != 0 */
	ck_assert_double_eq(out[4][15], 0);
}
END_TEST

/* uint8: a cast and a store truncate toward zero and wrap modulo 256 (C's
 * conversion to uint8_t, of values the C code can hold). */
START_TEST(casts_to_uint8)
{
	double x[] = { 200, 255, 256, -1, -129, -2.7, 2.5, 2147483648.0, 0.5, 0 };
	const int n = (int)(sizeof x / sizeof x[0]);
	static const value_fn f[] = { to_u8, same };
	static const tir_dtype dt[] = { TIR_I32, TIR_U8 };
	double out[2][16];
	pointwise(n, x, 2, f, dt, out);
	static const double u8[] = { 200, 255, 0, 255, 127, 254, 2, 0, 0, 0 };
	for (int i = 0; i < n; i++) {
		ck_assert_double_eq(out[0][i], u8[i]);
		ck_assert_double_eq(out[1][i], u8[i]);
	}
}
END_TEST

static tir_expr *m_exp(hp *h, tir_expr *x, tir_var *i) { (void)i; return mk_call(h->a, FN_EXP, x); }
static tir_expr *m_tanh(hp *h, tir_expr *x, tir_var *i) { (void)i; return mk_call(h->a, FN_TANH, x); }
static tir_expr *m_erf(hp *h, tir_expr *x, tir_var *i) { (void)i; return mk_call(h->a, FN_ERF, x); }
static tir_expr *m_sqrt(hp *h, tir_expr *x, tir_var *i) { (void)i; return mk_call(h->a, FN_SQRT, x); }
static tir_expr *m_rsqrt(hp *h, tir_expr *x, tir_var *i) { (void)i; return mk_call(h->a, FN_RSQRT, x); }
static tir_expr *m_sigmoid(hp *h, tir_expr *x, tir_var *i) { (void)i; return mk_call(h->a, FN_SIGMOID, x); }
static tir_expr *m_gelu(hp *h, tir_expr *x, tir_var *i) { (void)i; return mk_call(h->a, FN_GELU, x); }
static tir_expr *m_fdiv(hp *h, tir_expr *x, tir_var *i) { (void)i; return mk_floordiv(h->a, x, F(h, -2)); }
static tir_expr *m_fmod(hp *h, tir_expr *x, tir_var *i) { (void)i; return mk_floormod(h->a, x, F(h, 3)); }
static tir_expr *m_idiv(hp *h, tir_expr *x, tir_var *i)
{
	(void)i;
	return mk_bin(h->a, E_DIV, mk_cast(h->a, TIR_I32, x), mk_cast(h->a, TIR_I32, I(h, 2)));
}
static tir_expr *m_ifloor(hp *h, tir_expr *x, tir_var *i)
{
	(void)x;          /* index arithmetic: floordiv(i - 3, 2) * 10 + floormod(i - 3, 2) */
	tir_expr *z = mk_sub(h->a, V(h, i), I(h, 3));
	return mk_cast(h->a, TIR_F32, mk_add(h->a, mk_mul(h->a, mk_floordiv(h->a, z, I(h, 2)), I(h, 10)),
					      mk_floormod(h->a, z, I(h, 2))));
}

START_TEST(math_functions)
{
	double x[] = { -2.5, -1, -0.25, 0, 0.5, 1, 3, 7 };
	const int n = 8;
	static const value_fn f[] = { m_exp, m_tanh, m_erf, m_sqrt, m_rsqrt, m_sigmoid, m_gelu };
	static const tir_dtype dt[] = { TIR_F32, TIR_F32, TIR_F32, TIR_F32, TIR_F32, TIR_F32, TIR_F32 };
	double out[7][16];
	pointwise(n, x, 7, f, dt, out);
	for (int i = 0; i < n; i++) {
		ck_assert_double_eq(out[0][i], exp(x[i]));
		ck_assert_double_eq(out[1][i], tanh(x[i]));
		ck_assert_double_eq(out[2][i], erf(x[i]));
		if (x[i] >= 0) {
			ck_assert_double_eq(out[3][i], sqrt(x[i]));
			ck_assert_double_eq(out[4][i], 1 / sqrt(x[i]));
		}
		ck_assert_double_eq(out[5][i], 1 / (1 + exp(-x[i])));
		ck_assert_double_eq(out[6][i], x[i] * 0.5 * (1 + erf(x[i] / sqrt(2.0))));
	}
	static const value_fn g[] = { m_fdiv, m_fmod, m_idiv, m_ifloor };
	static const tir_dtype gt[] = { TIR_F32, TIR_F32, TIR_I32, TIR_F32 };
	double y[] = { -7, -6, -1, 0, 1, 5, 7, 8 };
	pointwise(n, y, 4, g, gt, out);
	for (int i = 0; i < n; i++) {
		ck_assert_double_eq(out[0][i], floor(y[i] / -2));
		ck_assert_double_eq(out[1][i], y[i] - floor(y[i] / 3) * 3);
		ck_assert_double_eq(out[2][i], trunc(y[i] / 2));      /* C's division */
		int z = i - 3;
		ck_assert_double_eq(out[3][i], floor(z / 2.0) * 10 + (z - floor(z / 2.0) * 2));
	}
}
END_TEST

/* Y[i] = value(i) over i < 5, X of 4 elements; returns interp_run's status
 * of both evaluators (which must agree), the message in err. */
static int shifted(tir_expr *(*value)(hp *, tir_buffer *, tir_var *), double *y,
		   tir_error *err)
{
	hp h = hp_new();
	tir_buffer *X = buf1(&h, "X", TIR_F32, 4, BUF_INPUT);
	tir_buffer *Y = buf1(&h, "Y", TIR_F32, 5, BUF_OUTPUT);
	tir_var *v[1];
	int64_t ext[1] = { 5 };
	tir_block *b = block(&h, "shift", 1, ext, 0, v);
	store1(b, Y, V(&h, v[0]));
	b->value = value(&h, X, v[0]);
	nest(&h, b);
	double x[4] = { 1, 2, 3, 4 };
	for (int i = 0; i < 5; i++)
		y[i] = NAN;
	double *params[2] = { x, y };
	int64_t elems[2] = { 4, 5 };
	int rc = run_both(&h, params, elems, err);
	hp_free(&h);
	return rc;
}

/* select(1 <= i, X[i - 1], 0) */
static tir_expr *guarded(hp *h, tir_buffer *X, tir_var *i)
{
	return mk_select(h->a, mk_bin(h->a, E_LE, I(h, 1), V(h, i)),
			 ld1(h, X, mk_sub(h->a, V(h, i), I(h, 1))), F(h, 0));
}

/* select(i >= 1 and X[i - 1] > 2, 1, 0): the load behind `and` */
static tir_expr *guarded_and(hp *h, tir_buffer *X, tir_var *i)
{
	tir_expr *c = mk_and(h->a, mk_bin(h->a, E_LE, I(h, 1), V(h, i)),
			     mk_bin(h->a, E_LT, F(h, 2), ld1(h, X, mk_sub(h->a, V(h, i), I(h, 1)))));
	return mk_select(h->a, c, F(h, 1), F(h, 0));
}

/* X[i - 1], unguarded */
static tir_expr *unguarded(hp *h, tir_buffer *X, tir_var *i)
{
	return ld1(h, X, mk_sub(h->a, V(h, i), I(h, 1)));
}

START_TEST(out_of_bounds)
{
	double y[5];
	tir_error err = { "" };
	ck_assert_msg(shifted(guarded, y, &err) == 0, "%s", err.msg);
	static const double want[5] = { 0, 1, 2, 3, 4 };
	for (int i = 0; i < 5; i++)
		ck_assert_double_eq(y[i], want[i]);
	ck_assert_msg(shifted(guarded_and, y, &err) == 0, "%s", err.msg);
	static const double want2[5] = { 0, 0, 0, 1, 1 };
	for (int i = 0; i < 5; i++)
		ck_assert_double_eq(y[i], want2[i]);
	ck_assert_int_eq(shifted(unguarded, y, &err), -1);
	ck_assert_msg(strstr(err.msg, "block \"shift\" accesses X[-1] outside its shape [4]"),
		      "%s", err.msg);
}
END_TEST

/* Blocks that read what they write run in program order (the tree
 * evaluator): a running sum, and a reduction whose value reads its own
 * accumulator. */
START_TEST(reading_what_it_writes)
{
	hp h = hp_new();
	enum { N = 6 };
	tir_buffer *X = buf1(&h, "X", TIR_F32, N, BUF_INPUT);
	tir_buffer *Y = buf1(&h, "Y", TIR_F32, N, BUF_OUTPUT);
	tir_var *v[1];
	int64_t ext[1] = { N };
	tir_block *b = block(&h, "scan", 1, ext, 0, v);
	store1(b, Y, V(&h, v[0]));
	tir_expr *prev = mk_select(h.a, mk_bin(h.a, E_LT, I(&h, 0), V(&h, v[0])),
				   ld1(&h, Y, mk_sub(h.a, V(&h, v[0]), I(&h, 1))), F(&h, 0));
	b->value = mk_add(h.a, prev, ld1(&h, X, V(&h, v[0])));
	nest(&h, b);
	double x[N], y[N];
	for (int i = 0; i < N; i++) {
		x[i] = i + 1;
		y[i] = NAN;
	}
	double *params[2] = { x, y };
	tir_error err = { "" };
	interp_opts o = { 0 };
	ck_assert_msg(interp_run(h.p, params, &o, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(o.tree_blocks, 1);
	for (int i = 0; i < N; i++)
		ck_assert_double_eq(y[i], (i + 1) * (i + 2) / 2);
	hp_free(&h);
}
END_TEST

/* Indices that are not affine, resolved statically by the nest evaluator:
 * a reshape (floordiv / floormod of row and inner iterators: offsets per
 * lane), a floordiv of the row iterator alone (per row), and a permutation
 * of the reduction iterator (per step). */
START_TEST(non_affine_indices)
{
	hp h = hp_new();
	enum { R = 4, C = 6 };
	tir_buffer *X = buf2(&h, "X", TIR_F32, 6, 4, BUF_INPUT);
	tir_buffer *Y = buf2(&h, "Y", TIR_F32, R, C, BUF_OUTPUT);
	tir_buffer *S = buf1(&h, "S", TIR_F32, 6, BUF_OUTPUT);
	tir_var *v[2];
	int64_t ext[2] = { R, C };
	tir_block *b = block(&h, "reshape", 2, ext, 0, v);
	tir_expr *flat = mk_add(h.a, mk_mul(h.a, V(&h, v[0]), I(&h, C)), V(&h, v[1]));
	b->store = Y;
	b->store_idx[0] = V(&h, v[0]);
	b->store_idx[1] = V(&h, v[1]);
	b->value = mk_add(h.a, ld2(&h, X, mk_floordiv(h.a, flat, I(&h, 4)),
				   mk_floormod(h.a, flat, I(&h, 4))),
			  ld2(&h, X, mk_floordiv(h.a, V(&h, v[0]), I(&h, 2)), I(&h, 1)));
	nest(&h, b);
	int64_t ext2[2] = { 6, 4 };
	b = block(&h, "permuted", 2, ext2, 1, v);
	store1(b, S, V(&h, v[0]));
	tir_expr *r = V(&h, v[1]);
	tir_expr *perm = mk_add(h.a, mk_mul(h.a, mk_floordiv(h.a, r, I(&h, 2)), I(&h, 2)),
				mk_floormod(h.a, mk_add(h.a, mk_floormod(h.a, r, I(&h, 2)), I(&h, 1)), I(&h, 2)));
	/* a sum of products whose second load moves by a term of the reduction */
	b->value = mk_mul(h.a, ld2(&h, X, V(&h, v[0]), perm), ld2(&h, X, V(&h, v[0]), r));
	b->reduce = REDUCE_SUM;
	b->init = F(&h, 0);
	nest(&h, b);
	double x[24], y[R * C], sm[6];
	for (int i = 0; i < 24; i++)
		x[i] = i * i - 3;
	for (int i = 0; i < R * C; i++)
		y[i] = NAN;
	double *params[3] = { x, y, sm };
	int64_t elems[3] = { 24, R * C, 6 };
	tir_error err = { "" };
	interp_opts o = { 0 };
	ck_assert_msg(interp_run(h.p, params, &o, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(o.nest_blocks, 2);
	ck_assert_msg(run_both(&h, params, elems, &err) == 0, "%s", err.msg);
	for (int i = 0; i < R; i++)
		for (int j = 0; j < C; j++)
			ck_assert_double_eq(y[i * C + j], x[i * C + j] + x[(i / 2) * 4 + 1]);
	for (int i = 0; i < 6; i++) {
		double want = 0;
		for (int k = 0; k < 4; k++)
			want += x[i * 4 + (k / 2 * 2 + (k % 2 + 1) % 2)] * x[i * 4 + k];
		ck_assert_double_eq(sm[i], want);
	}
	hp_free(&h);
}
END_TEST

/* ---- scheduled programs mean what the unscheduled one means --------------------------------- */

static const struct { const char *target, *json; } sched_cases[] = {
	{ "cpu", "{\"op\":\"matmul\",\"M\":24,\"N\":40,\"K\":36,\"epilogue\":[\"bias\",\"relu\"]}" },
	{ "cpu", "{\"op\":\"conv2d\",\"N\":1,\"C\":6,\"H\":9,\"W\":9,\"K\":8,\"R\":3,\"S\":3,\"pad\":1,\"layout\":\"NHWC\"}" },
	{ "cpu", "{\"op\":\"depthwise_conv2d\",\"N\":1,\"C\":8,\"H\":10,\"W\":10,\"R\":3,\"S\":3,\"stride\":2,\"pad\":1,\"layout\":\"NHWC\"}" },
	{ "cuda:sm_90", "{\"op\":\"matmul\",\"M\":32,\"N\":48,\"K\":64}" },
	{ "cuda:sm_90", "{\"op\":\"conv2d\",\"N\":1,\"C\":8,\"H\":8,\"W\":8,\"K\":16,\"R\":3,\"S\":3,\"pad\":1,\"layout\":\"NHWC\",\"epilogue\":[\"gelu\"]}" },
	{ "cuda:sm_80", "{\"op\":\"matmul\",\"M\":32,\"N\":32,\"K\":32,\"dtype\":\"float16\"}" },
	{ "cuda:sm_90", "{\"op\":\"matmul\",\"M\":64,\"N\":64,\"K\":32,\"dtype\":\"float16\"}" },
};

START_TEST(schedules_keep_the_meaning)
{
	tir_error err = { "" };
	tir_target t;
	ck_assert_msg(tir_target_parse(sched_cases[_i].target, &t, &err) == 0, "%s", err.msg);
	tir_workload *w = parse(sched_cases[_i].json);
	tir_program *p = tir_program_build(w, &err);
	args x;
	args_open(&x, w, 9);
	int o = x.n - 1;
	double *want[TIR_REF_MAX_ARGS] = { 0 };
	run_with(p, &x, (interp_opts){ 0 }, want);
	enum { NC = 6 };
	tir_sched *s[NC];
	int n = tir_sample_candidates(w, &t, NC, 11, s, &err);
	ck_assert_msg(n > 0, "%s: %s", sched_cases[_i].json, err.msg);
	for (int c = 0; c < n; c++) {
		double *got[TIR_REF_MAX_ARGS] = { 0 };
		run_with(tir_sched_program(s[c]), &x, (interp_opts){ 0 }, got);
		double e = normwise(want[o], got[o], x.a[o].elems);
		if (!(e < 1e-12)) {
			char *tr = tir_sched_trace(s[c]);
			fprintf(stderr, "%s\n", tr);
			free(tr);
		}
		ck_assert_msg(e < 1e-12, "%s on %s, candidate %d: the scheduled program differs "
			      "by %g", sched_cases[_i].json, t.key, c, e);
		free(got[o]);
		tir_sched_free(s[c]);
	}
	free(want[o]);
	args_close(&x);
	tir_program_free(p);
	tir_workload_free(w);
}
END_TEST

/* ---- the suite ---------------------------------------------------------------------------- */

static Suite *interp_suite(void)
{
	Suite *s = suite_create("interp");
	TCase *tc = tcase_create("hand");
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, odd_against_hand, 0, NODD + tu_nodd);
	tcase_add_loop_test(tc, suite_against_hand, 0, tu_suite_count());
	suite_add_tcase(s, tc);
	tc = tcase_create("evaluators");
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, nest_equals_tree, 0, NODD + tu_nodd);
	tcase_add_test(tc, threads_change_nothing);
	suite_add_tcase(s, tc);
	tc = tcase_create("semantics");
	tcase_add_test(tc, max_min_sum_reductions);
	tcase_add_test(tc, predicates);
	tcase_add_test(tc, casts_and_stores);
	tcase_add_test(tc, casts_to_uint8);
	tcase_add_test(tc, math_functions);
	tcase_add_test(tc, out_of_bounds);
	tcase_add_test(tc, reading_what_it_writes);
	tcase_add_test(tc, non_affine_indices);
	suite_add_tcase(s, tc);
	tc = tcase_create("schedules");
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, schedules_keep_the_meaning, 0,
			    (int)(sizeof sched_cases / sizeof sched_cases[0]));
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(interp_suite());
}
