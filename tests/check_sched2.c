/*
 * check_sched2.c — the primitives that move computation and data: cache_read,
 * cache_write, storage_align, compute_at, reverse_compute_at, compute_inline,
 * reverse_compute_inline and decompose_reduction, and those that put a block
 * into an intrinsic's form: transform_block_layout, reindex, pad_einsum and
 * rfactor.
 *
 * Each schedule is checked three ways: the shape of the resulting tree (which
 * blocks, loops and extents), the program's meaning (a small interpreter runs
 * the IR by the semantics of docs/ir-semantics.md and compares the output
 * with the unscheduled program's, reading an unwritten intermediate gives
 * NaN and an access out of bounds fails), and the trace (replaying it on a
 * fresh schedule prints the same program).  Illegal schedules must fail with
 * a message and leave the program unchanged.
 *
 * Reducers: hand-built row maxima, minima and sums (tests/reducers.h)
 * through rfactor, decompose_reduction and pad_einsum — each partial, init
 * and pad value the reducer's identity — and pad_einsum's refusal of a
 * body that is not the identity where its inputs are padded
 * (R[i] += A[i, k] + 1).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tir.h"
#include "ir/ir.h"
#include "sched/sched.h"
#include "measure/measure.h"
#include "testutil.h"
#include "sched_fixture.h"
#include "reducers.h"

/* ---- fixtures ------------------------------------------------------------- */

typedef tu_fix fix;

static tir_program *prog(fix *f) { return (tir_program *)tir_sched_program(f->s); }

static int loops(fix *f, int b, int *out)
{
	tir_error err = { "" };
	int n = tir_get_loops(f->s, b, out, 32, &err);
	ck_assert_msg(n >= 0, "get_loops: %s", err.msg);
	return n;
}

#define OK(call) do { tir_error e_ = { "" }; \
	ck_assert_msg((call) >= 0, "%s: %s", #call, e_.msg); } while (0)
#define E (&e_)

static void split2(fix *f, int loop, int64_t outer, int64_t inner, int *out)
{
	tir_int fs[2] = { TIR_LIT(outer), TIR_LIT(inner) };
	OK(tir_split(f->s, loop, 2, fs, out, E));
}

static tir_stmt *loop_stmt(fix *f, int rv) { return f->s->rv[rv].loop; }
static tir_block *block_ptr(fix *f, int rv) { return f->s->rv[rv].block; }

/* ---- an interpreter of the IR ---------------------------------------------- */

typedef struct interp {
	const tir_program *p;
	double **mem;               /* by buffer id */
	double *vars;               /* by var id */
	char fault[256];
} interp;

static int64_t flat(interp *it, const tir_buffer *b, const double *idx)
{
	int64_t off = 0;
	for (int d = 0; d < b->ndim; d++) {
		int64_t i = (int64_t)idx[d];
		if (i < 0 || i >= b->shape[d]) {
			if (!it->fault[0])
				snprintf(it->fault, sizeof it->fault, "%s index %d = %lld out of [0, %lld)",
					 b->name, d, (long long)i, (long long)b->shape[d]);
			return -1;
		}
		off = off * b->shape[d] + i;
	}
	return off;
}

static double fdivf(double x, double y) { return floor(x / y); }

static double eval(interp *it, const tir_expr *e)
{
	double a, b;
	switch (e->kind) {
	case E_INT: return (double)e->ival;
	case E_FLOAT: return e->fval;
	case E_VAR: return it->vars[e->var->id];
	case E_LOAD: {
		double idx[TIR_MAX_DIMS];
		for (int d = 0; d < e->nidx; d++)
			idx[d] = eval(it, e->idx[d]);
		if (e->buf->dead && !it->fault[0])
			snprintf(it->fault, sizeof it->fault, "load of dead buffer %s", e->buf->name);
		int64_t o = flat(it, e->buf, idx);
		return o < 0 ? NAN : it->mem[e->buf->id][o];
	}
	case E_SELECT:
		return eval(it, e->c) != 0 ? eval(it, e->a) : eval(it, e->b);
	case E_NOT: return eval(it, e->a) == 0;
	case E_CAST:
		a = eval(it, e->a);
		return dtype_is_float(e->dtype) ? a : trunc(a);
	case E_CALL:
		a = eval(it, e->a);
		switch (e->fn) {
		case FN_EXP: return exp(a);
		case FN_TANH: return tanh(a);
		case FN_ERF: return erf(a);
		case FN_SQRT: return sqrt(a);
		case FN_RSQRT: return 1 / sqrt(a);
		case FN_SIGMOID: return 1 / (1 + exp(-a));
		case FN_GELU: return a * 0.5 * (1 + erf(a / sqrt(2.0)));
		default: return NAN;
		}
	default: break;
	}
	a = eval(it, e->a);
	b = eval(it, e->b);
	switch (e->kind) {
	case E_ADD: return a + b;
	case E_SUB: return a - b;
	case E_MUL: return a * b;
	case E_DIV: return dtype_is_float(e->dtype) ? a / b : trunc(a / b);
	case E_FLOORDIV: return fdivf(a, b);
	case E_FLOORMOD: return a - fdivf(a, b) * b;
	/* docs/ir-semantics.md: C's fmax / fmin */
	case E_MIN: return fmin(a, b);
	case E_MAX: return fmax(a, b);
	case E_LT: return a < b;
	case E_LE: return a <= b;
	case E_EQ: return a == b;
	case E_NE: return a != b;
	case E_AND: return a != 0 && b != 0;
	case E_OR: return a != 0 || b != 0;
	default: return NAN;
	}
}

static void run_block(interp *it, const tir_block *b)
{
	bool first = true;
	for (int i = 0; i < b->niters; i++) {
		it->vars[b->iters[i].var->id] = eval(it, b->iters[i].binding);
		if (b->iters[i].kind == ITER_REDUCE && it->vars[b->iters[i].var->id] != 0)
			first = false;
	}
	if (b->predicate && eval(it, b->predicate) == 0)
		return;
	for (int i = 0; i < b->niters; i++) {
		double v = it->vars[b->iters[i].var->id];
		if ((v < 0 || v >= b->iters[i].extent) && !it->fault[0])
			snprintf(it->fault, sizeof it->fault, "block %s: iterator %s = %g outside [0, %lld)",
				 b->name, b->iters[i].var->name, v, (long long)b->iters[i].extent);
	}
	double idx[TIR_MAX_DIMS];
	for (int d = 0; d < b->store->ndim; d++)
		idx[d] = eval(it, b->store_idx[d]);
	int64_t o = flat(it, b->store, idx);
	if (o < 0)
		return;
	double *m = &it->mem[b->store->id][o];
	if (b->reduce == REDUCE_NONE) {
		*m = eval(it, b->value);
		return;
	}
	if (b->init && first)
		*m = eval(it, b->init);
	double v = eval(it, b->value);
	*m = b->reduce == REDUCE_MAX ? fmax(*m, v) : b->reduce == REDUCE_MIN ? fmin(*m, v) : *m + v;
}

static void run_stmt(interp *it, const tir_stmt *s)
{
	if (s->kind == STMT_BLOCK) {
		run_block(it, s->block);
		return;
	}
	if (s->kind == STMT_FOR) {
		for (int64_t i = 0; i < s->extent; i++) {
			it->vars[s->var->id] = (double)i;
			for (int k = 0; k < s->nkids; k++)
				run_stmt(it, s->kids[k]);
		}
		return;
	}
	for (int k = 0; k < s->nkids; k++)
		run_stmt(it, s->kids[k]);
}

/* Runs p on inputs filled from a fixed seed; returns the output (malloc'd). */
static double *run(const tir_program *p, int64_t *n, char *fault)
{
	interp it = { p, calloc((size_t)p->nbufs, sizeof(double *)),
		      calloc((size_t)p->nvars + 1, sizeof(double)), "" };
	uint64_t seed = 12345;
	double *out = NULL;
	for (int i = 0; i < p->nbufs; i++) {
		const tir_buffer *b = p->bufs[i];
		int64_t ne = tu_buffer_elems(b);
		it.mem[i] = malloc(sizeof(double) * (size_t)ne);
		for (int64_t k = 0; k < ne; k++) {
			if (b->role == BUF_INPUT) {
				seed = seed * 6364136223846793005ull + 1442695040888963407ull;
				it.mem[i][k] = (double)((seed >> 33) % 17) - 8;
			} else {
				it.mem[i][k] = NAN;
			}
		}
	}
	run_stmt(&it, p->root);
	for (int i = 0; i < p->nbufs; i++) {
		if (p->bufs[i]->role == BUF_OUTPUT) {
			out = it.mem[i];
			*n = tu_buffer_elems(p->bufs[i]);
		} else {
			free(it.mem[i]);
		}
	}
	strcpy(fault, it.fault);
	free(it.mem);
	free(it.vars);
	return out;
}

/* The scheduled program computes what the unscheduled one does. */
static void check_same(fix *f)
{
	tir_error err;
	tir_program *ref = tir_program_build(f->w, &err);
	ck_assert(ref);
	int64_t n1, n2;
	char f1[256], f2[256];
	double *a = run(ref, &n1, f1), *b = run(prog(f), &n2, f2);
	ck_assert_msg(!f1[0], "reference: %s", f1);
	ck_assert_msg(!f2[0], "scheduled: %s", f2);
	ck_assert_int_eq(n1, n2);
	for (int64_t i = 0; i < n1; i++)
		ck_assert_msg(fabs(a[i] - b[i]) <= 1e-9 * (1 + fabs(a[i])),
			      "output %lld: %g, expected %g", (long long)i, b[i], a[i]);
	free(a);
	free(b);
	tir_program_free(ref);
}

static void check_all(fix *f)
{
	check_same(f);
	tu_fix_check_replay(f);
	tu_fix_check_cpu(f);
}

/* Finds a live block by name. */
static tir_block *find(fix *f, const char *name)
{
	tir_block *b = program_find_block(prog(f), name);
	ck_assert_msg(b != NULL, "no block %s", name);
	return b;
}

static int nloops(tir_block *b, int64_t *ext)
{
	tir_stmt *ls[32];
	int n = stmt_loops(b->stmt, ls, 32);
	for (int i = 0; i < n && ext; i++)
		ext[i] = ls[i]->extent;
	return n;
}

static const char *MM = "{\"op\":\"matmul\",\"M\":32,\"N\":24,\"K\":16}";
static const char *MM_ODD = "{\"op\":\"matmul\",\"M\":30,\"N\":20,\"K\":12}";
static const char *MM_EPI = "{\"op\":\"matmul\",\"M\":16,\"N\":12,\"K\":8,\"epilogue\":[\"bias\",\"relu\"]}";
static const char *CONV = "{\"op\":\"conv2d\",\"N\":1,\"C\":4,\"H\":9,\"W\":8,\"K\":6,\"R\":3,\"S\":3,\"pad\":1,\"epilogue\":[\"relu\"]}";
static const char *GRP = "{\"op\":\"conv2d\",\"N\":1,\"C\":4,\"H\":5,\"W\":4,\"K\":8,\"R\":3,\"S\":1,\"pad\":1,\"groups\":2,\"layout\":\"NHWC\"}";
static const char *CONV_S2 = "{\"op\":\"conv2d\",\"N\":1,\"C\":3,\"H\":11,\"W\":9,\"K\":4,\"R\":3,\"S\":3,\"stride\":2,\"pad\":[1,2],\"layout\":\"NHWC\"}";

/* ---- cache_read + compute_at ------------------------------------------------ */

/* i0 j k0 i1 k1: A's tile is 16 x 4 per k0 iteration, B's 4 x 1. */
START_TEST(cache_read_compute_at)
{
	fix f = tu_fix_make(MM);
	int b = tu_fix_block(&f, "compute"), l[8], li[2], lk[2];
	ck_assert_int_eq(loops(&f, b, l), 3);
	split2(&f, l[0], 2, 16, li);
	split2(&f, l[2], 4, 4, lk);
	int order[5] = { li[0], l[1], lk[0], li[1], lk[1] };
	OK(tir_reorder(f.s, 5, order, E));
	int as;
	OK(as = tir_cache_read(f.s, b, 0, "shared", E));
	ck_assert_str_eq(block_ptr(&f, as)->name, "A_shared");
	ck_assert_str_eq(block_ptr(&f, as)->store->name, "A_shared");
	ck_assert_int_eq(block_ptr(&f, as)->store->scope, TIR_SCOPE_SHARED);
	ck_assert_ptr_eq(find(&f, "compute")->reads[0].buf, block_ptr(&f, as)->store);
	check_same(&f);
	int bs;
	OK(bs = tir_cache_read(f.s, b, 1, "shared", E));
	ck_assert_str_eq(block_ptr(&f, bs)->name, "B_shared");
	OK(tir_compute_at(f.s, as, lk[0], E));
	OK(tir_compute_at(f.s, bs, lk[0], E));
	int64_t ext[8];
	ck_assert_int_eq(nloops(block_ptr(&f, as), ext), 5);
	ck_assert_int_eq(ext[3], 16);
	ck_assert_int_eq(ext[4], 4);
	ck_assert_int_eq(nloops(block_ptr(&f, bs), ext), 5);
	ck_assert_int_eq(ext[3], 4);
	ck_assert_int_eq(ext[4], 1);
	ck_assert_ptr_null(block_ptr(&f, as)->predicate);
	/* the cache stages run before the compute inside k0 */
	tir_stmt *k0 = loop_stmt(&f, lk[0]);
	ck_assert_int_eq(k0->nkids, 3);
	ck_assert(stmt_is_ancestor(k0->kids[0], block_ptr(&f, as)->stmt));
	ck_assert(stmt_is_ancestor(k0->kids[1], block_ptr(&f, bs)->stmt));
	OK(tir_storage_align(f.s, as, 0, 0, 32, 8, E));
	ck_assert_int_eq(block_ptr(&f, as)->store->align_factor[0], 32);
	ck_assert_int_eq(block_ptr(&f, as)->store->align_offset[0], 8);
	check_all(&f);
	tu_fix_done(&f);
}
END_TEST

/* Tiles that overshoot the extent: the stage gets a predicate. */
START_TEST(compute_at_predicate)
{
	fix f = tu_fix_make(MM_ODD);
	int b = tu_fix_block(&f, "compute"), l[8], li[2];
	loops(&f, b, l);
	split2(&f, l[0], 4, 8, li);
	int as;
	OK(as = tir_cache_read(f.s, b, 0, "local", E));
	OK(tir_compute_at(f.s, as, li[0], E));
	tir_block *ab = block_ptr(&f, as);
	int64_t ext[8];
	ck_assert_int_eq(nloops(ab, ext), 3);
	ck_assert_int_eq(ext[1], 8);
	ck_assert_int_eq(ext[2], 12);
	ck_assert_ptr_nonnull(ab->predicate);
	check_all(&f);
	tu_fix_done(&f);
}
END_TEST

/* The pad stage computed at a loop of the convolution: a 1 x 4 x 3 x 3
 * window of the padded input per output point. */
START_TEST(compute_at_pad)
{
	fix f = tu_fix_make(CONV);
	int c = tu_fix_block(&f, "compute"), pad = tu_fix_block(&f, "pad"), l[8];
	ck_assert_int_eq(loops(&f, c, l), 7);
	OK(tir_compute_at(f.s, pad, l[3], E));
	int64_t ext[8];
	ck_assert_int_eq(nloops(find(&f, "pad"), ext), 8);
	ck_assert_int_eq(ext[4], 1);
	ck_assert_int_eq(ext[5], 4);
	ck_assert_int_eq(ext[6], 3);
	ck_assert_int_eq(ext[7], 3);
	ck_assert_ptr_null(find(&f, "pad")->predicate);
	/* a cache of the padded window, between pad and compute in loop w */
	int xs;
	OK(xs = tir_cache_read(f.s, c, 0, "local", E));
	ck_assert_str_eq(block_ptr(&f, xs)->name, "X_pad_local");
	ck_assert_int_eq(nloops(block_ptr(&f, xs), ext), 8);
	ck_assert_int_eq(ext[5], 4);
	ck_assert_int_eq(ext[6], 3);
	ck_assert_int_eq(loop_stmt(&f, l[3])->nkids, 3);
	check_all(&f);
	tu_fix_done(&f);
}
END_TEST

/* Stride 2 and uneven padding, computed at the output row. */
START_TEST(compute_at_strided)
{
	fix f = tu_fix_make(CONV_S2);
	int c = tu_fix_block(&f, "compute"), pad = tu_fix_block(&f, "pad"), l[8];
	loops(&f, c, l);
	OK(tir_compute_at(f.s, pad, l[1], E));
	check_all(&f);
	tu_fix_done(&f);
}
END_TEST

/* A reduction producer computed at a row of its epilogue: its reduction
 * loops stay whole, innermost. */
START_TEST(compute_at_reduction)
{
	fix f = tu_fix_make(CONV);
	int c = tu_fix_block(&f, "compute"), e = tu_fix_block(&f, "epilogue"), l[8];
	loops(&f, e, l);
	OK(tir_compute_at(f.s, c, l[2], E));
	int64_t ext[16];
	ck_assert_int_eq(nloops(find(&f, "compute"), ext), 10);
	ck_assert_int_eq(ext[3], 1);
	ck_assert_int_eq(ext[6], 8);
	ck_assert_int_eq(ext[7], 4);
	check_all(&f);
	tu_fix_done(&f);
}
END_TEST

/* The epilogue moved under a row of the convolution, then the convolution
 * moved under the epilogue's column loop: both halves of a fused pixel. */
START_TEST(compute_at_after_reverse)
{
	fix f = tu_fix_make(CONV);
	int c = tu_fix_block(&f, "compute"), e = tu_fix_block(&f, "epilogue"), l[8], el[8];
	loops(&f, c, l);
	OK(tir_reverse_compute_at(f.s, e, l[2], E));
	ck_assert_int_eq(loops(&f, e, el), 7);
	OK(tir_compute_at(f.s, c, el[4], E));
	int64_t ext[16];
	ck_assert_int_eq(nloops(find(&f, "compute"), ext), 12);
	check_all(&f);
	tu_fix_done(&f);
}
END_TEST

/* ---- cache_write + reverse_compute_at --------------------------------------- */

START_TEST(cache_write_reverse_compute_at)
{
	fix f = tu_fix_make(MM);
	int b = tu_fix_block(&f, "compute"), l[8], li[2], lj[2];
	loops(&f, b, l);
	split2(&f, l[0], 4, 8, li);
	split2(&f, l[1], 3, 8, lj);
	int order[5] = { li[0], lj[0], li[1], lj[1], l[2] };
	OK(tir_reorder(f.s, 5, order, E));
	int cw;
	OK(cw = tir_cache_write(f.s, b, 0, "local", E));
	ck_assert_str_eq(block_ptr(&f, cw)->name, "C_local");
	ck_assert_str_eq(find(&f, "compute")->store->name, "C_local");
	ck_assert_str_eq(block_ptr(&f, cw)->store->name, "C");
	check_same(&f);
	OK(tir_reverse_compute_at(f.s, cw, lj[0], E));
	int64_t ext[8];
	ck_assert_int_eq(nloops(block_ptr(&f, cw), ext), 4);
	ck_assert_int_eq(ext[2], 8);
	ck_assert_int_eq(ext[3], 8);
	tir_stmt *j0 = loop_stmt(&f, lj[0]);
	ck_assert_int_eq(j0->nkids, 2);
	ck_assert(stmt_is_ancestor(j0->kids[1], block_ptr(&f, cw)->stmt));
	check_all(&f);
	tu_fix_done(&f);
}
END_TEST

/* The epilogue moved under the convolution's output pixel. */
START_TEST(reverse_compute_at_epilogue)
{
	fix f = tu_fix_make(CONV);
	int c = tu_fix_block(&f, "compute"), e = tu_fix_block(&f, "epilogue"), l[8];
	loops(&f, c, l);
	OK(tir_reverse_compute_at(f.s, e, l[2], E));
	int64_t ext[8];
	ck_assert_int_eq(nloops(find(&f, "epilogue"), ext), 7);
	ck_assert_int_eq(ext[3], 1);
	ck_assert_int_eq(ext[6], 8);
	check_all(&f);
	tu_fix_done(&f);
}
END_TEST

/* ---- inlining -------------------------------------------------------------- */

START_TEST(compute_inline_pad)
{
	fix f = tu_fix_make(CONV_S2);
	int pad = tu_fix_block(&f, "pad");
	tir_buffer *xp = block_ptr(&f, pad)->store;
	OK(tir_compute_inline(f.s, pad, E));
	ck_assert(xp->dead);
	ck_assert_ptr_null(program_find_block(prog(&f), "pad"));
	ck_assert_int_eq(prog(&f)->root->nkids, 1);
	for (int i = 0; i < find(&f, "compute")->nreads; i++)
		ck_assert_ptr_ne(find(&f, "compute")->reads[i].buf, xp);
	check_all(&f);
	tu_fix_done(&f);
}
END_TEST

/* A cache stage inlined back is the original program. */
START_TEST(compute_inline_cache)
{
	fix f = tu_fix_make(MM);
	int b = tu_fix_block(&f, "compute"), as;
	OK(as = tir_cache_read(f.s, b, 1, "shared", E));
	OK(tir_compute_inline(f.s, as, E));
	ck_assert_int_eq(prog(&f)->root->nkids, 1);
	check_all(&f);
	tu_fix_done(&f);
}
END_TEST

START_TEST(reverse_compute_inline_epilogue)
{
	fix f = tu_fix_make(MM_EPI);
	int b = tu_fix_block(&f, "compute"), e = tu_fix_block(&f, "epilogue");
	tir_error err = { "" };
	char *before = tir_program_print(prog(&f));
	ck_assert_int_eq(tir_reverse_compute_inline(f.s, e, &err), -1);
	ck_assert_str_eq(err.msg, "reverse_compute_inline: producer \"compute\" of \"C_acc\" is a reduction; cache_write it first");
	char *after = tir_program_print(prog(&f));
	ck_assert_str_eq(before, after);
	free(before);
	free(after);
	int cw;
	OK(cw = tir_cache_write(f.s, b, 0, "local", E));
	OK(tir_reverse_compute_inline(f.s, e, E));
	ck_assert_ptr_null(program_find_block(prog(&f), "epilogue"));
	ck_assert_str_eq(block_ptr(&f, cw)->store->name, "C");
	ck_assert_int_eq(prog(&f)->root->nkids, 2);
	check_all(&f);
	tu_fix_done(&f);
}
END_TEST

/* The pad merged into a cache stage of its output: the stage reads X. */
START_TEST(reverse_compute_inline_cache)
{
	fix f = tu_fix_make(CONV);
	int c = tu_fix_block(&f, "compute"), cs;
	OK(cs = tir_cache_read(f.s, c, 0, "shared", E));
	OK(tir_reverse_compute_inline(f.s, cs, E));
	ck_assert_ptr_null(program_find_block(prog(&f), "X_pad_shared"));
	ck_assert_str_eq(find(&f, "pad")->store->name, "X_pad_shared");
	check_all(&f);
	tu_fix_done(&f);
}
END_TEST

/* ---- transform_block_layout, reindex, pad_einsum, rfactor -------------------- */

/* A strided convolution in matrix-multiply form: n,h,w fused (I, 36), k (J,
 * 4), r,s,c (K, 27); K split in 3 parts; the input, the weights and the
 * output reindexed into plain matrices; everything padded to 8.  Then the
 * crop and the reindex stage inlined into a write-back, which keeps a
 * predicate. */
START_TEST(layout_conv_gemm)
{
	fix f = tu_fix_make(CONV_S2);
	int c = tu_fix_block(&f, "compute");
	tir_block *cb = block_ptr(&f, c);
	OK(tir_transform_block_layout(f.s, c, "0,1,2;3;4,5,6", E));
	ck_assert_int_eq(cb->niters, 3);
	ck_assert_int_eq(cb->iters[0].extent, 36);
	ck_assert_int_eq(cb->iters[2].extent, 27);
	ck_assert_int_eq(cb->iters[2].kind, ITER_REDUCE);
	check_all(&f);
	int sum;
	OK(sum = tir_rfactor(f.s, c, 2, TIR_LIT(3), E));
	ck_assert_int_eq(cb->niters, 4);
	ck_assert_int_eq(cb->iters[0].extent, 3);
	ck_assert_int_eq(cb->iters[3].extent, 9);
	ck_assert_str_eq(cb->store->name, "Y_rf");
	ck_assert(block_is_reduction(block_ptr(&f, sum)));
	check_all(&f);
	OK(tir_reindex(f.s, c, 0, tu_fix_read(&f, c, "X_pad"), "0,1,3", E));
	OK(tir_reindex(f.s, c, 0, tu_fix_read(&f, c, "W"), NULL, E));
	OK(tir_reindex(f.s, c, 1, 0, "0,1,2", E));
	ck_assert_str_eq(cb->store->name, "Y_rf_reindex");
	ck_assert_int_eq(find(&f, "X_pad_reindex")->store->ndim, 3);
	check_all(&f);
	int64_t fac8[4] = { 1, 8, 8, 8 };
	tir_int fac[4];
	for (int i = 0; i < 4; i++)
		fac[i] = TIR_LIT(fac8[i]);
	int crop;
	OK(crop = tir_pad_einsum(f.s, c, 4, fac, E));
	ck_assert_int_gt(crop, 0);
	ck_assert_int_eq(cb->iters[1].extent, 40);
	ck_assert_int_eq(cb->iters[2].extent, 8);
	ck_assert_int_eq(cb->iters[3].extent, 16);
	check_all(&f);
	/* nothing left to pad: a no-op */
	OK(tir_pad_einsum(f.s, c, 4, fac, E));
	/* the accumulator in a local cache, the crop merged into its
	 * write-back (a predicate), then the reindex stage */
	int wb;
	OK(wb = tir_cache_write(f.s, c, 0, "local", E));
	OK(tir_reverse_compute_inline(f.s, crop, E));
	ck_assert_ptr_nonnull(block_ptr(&f, wb)->predicate);
	OK(tir_reverse_compute_inline(f.s, tu_fix_block(&f, "Y_rf_reindex"), E));
	ck_assert_str_eq(block_ptr(&f, wb)->store->name, "Y_rf");
	check_all(&f);
	tu_fix_done(&f);
}
END_TEST

/* A grouped convolution's output channel split into its group (outer) and
 * the channel within (inner), in different groups: a batched product. */
START_TEST(layout_split_iterator)
{
	fix f = tu_fix_make(GRP);
	int c = tu_fix_block(&f, "compute");
	tir_block *cb = block_ptr(&f, c);
	OK(tir_transform_block_layout(f.s, c, "3/4;0,1,2;3%4;4,5,6", E));
	ck_assert_int_eq(cb->niters, 4);
	ck_assert_int_eq(cb->iters[0].extent, 2);
	ck_assert_int_eq(cb->iters[2].extent, 4);
	check_all(&f);
	tu_fix_done(&f);
}
END_TEST

/* rfactor of a matmul into 4 parts of 4, computed and summed. */
START_TEST(rfactor_matmul)
{
	fix f = tu_fix_make(MM);
	int c = tu_fix_block(&f, "compute"), sum;
	OK(sum = tir_rfactor(f.s, c, 2, TIR_LIT(4), E));
	ck_assert_int_eq(find(&f, "compute")->store->shape[0], 4);
	ck_assert_str_eq(block_ptr(&f, sum)->store->name, "C");
	ck_assert_int_eq(prog(&f)->root->nkids, 2);
	check_all(&f);
	/* factor 1: nothing changes */
	char *before = tir_program_print(prog(&f));
	OK(tir_rfactor(f.s, c, 3, TIR_LIT(1), E));
	char *after = tir_program_print(prog(&f));
	ck_assert_str_eq(before, after);
	free(before);
	free(after);
	tu_fix_done(&f);
}
END_TEST

/* ---- reducers ------------------------------------------------------------------
 * Hand-built row reductions (tests/reducers.h): the meaning checked by the
 * interpreter against the unscheduled program, the trace by replay, and the
 * C code against a plain loop. */

static void check_same_spec(tir_sched *s, const tr_spec *spec)
{
	tir_program *ref = tr_program(spec);
	int64_t n1, n2;
	char f1[256], f2[256];
	double *a = run(ref, &n1, f1), *b = run(tir_sched_program(s), &n2, f2);
	ck_assert_msg(!f1[0], "reference: %s", f1);
	ck_assert_msg(!f2[0], "scheduled: %s", f2);
	ck_assert_int_eq(n1, n2);
	for (int64_t i = 0; i < n1; i++)
		ck_assert_msg(a[i] == b[i] || fabs(a[i] - b[i]) <= 1e-9 * (1 + fabs(a[i])),
			      "%s: output %lld: %g, expected %g", tr_name(spec), (long long)i, b[i], a[i]);
	free(a);
	free(b);
	tir_program_free(ref);
}

static void check_all_spec(tir_sched *s, const tr_spec *spec)
{
	check_same_spec(s, spec);
	tr_check_replay(s, spec);
	tr_run(tir_sched_program(s), spec, "cpu", "scheduled");
}

#define ROK(call) do { tir_error e_ = { "" }; int rc_ = (call); \
	ck_assert_msg(rc_ >= 0, "%s: %s: %s", tr_name(spec), #call, e_.msg); } while (0)

static const tr_spec red_specs[] = {
	{ REDUCE_MAX, TIR_F32, TIR_F32, 3, 12, 0, false },
	{ REDUCE_MIN, TIR_F32, TIR_F32, 3, 12, 0, false },
	{ REDUCE_MAX, TIR_F16, TIR_F16, 1, 12, 0, false },
	{ REDUCE_MIN, TIR_BF16, TIR_F32, 2, 12, 4, false },
	{ REDUCE_SUM, TIR_F32, TIR_F32, 3, 12, 0, false },
};
#define NRED (int)(sizeof red_specs / sizeof *red_specs)

/* rfactor into 4 and 3 partials: each partial starts at the identity, the
 * combining block reduces by the same reducer from the block's init. */
START_TEST(reduce_rfactor)
{
	const tr_spec *spec = &red_specs[_i / 2];
	int64_t parts = _i % 2 ? 3 : 4;
	tir_sched *s = tr_sched(spec);
	int b, comb;
	ROK(b = tir_get_block(s, "reduce", &e_));
	ROK(comb = tir_rfactor(s, b, 1, TIR_LIT(parts), &e_));
	const tir_block *rf = s->rv[b].block, *c = s->rv[comb].block;
	ck_assert_str_eq(rf->store->name, "R_rf");
	ck_assert_int_eq(rf->store->shape[0], parts);
	ck_assert_int_eq(rf->reduce, spec->r);
	ck_assert(reduce_is_identity(spec->r, rf->init));
	char want[32];
	snprintf(want, sizeof want, "R_rf_%s", reduce_name(spec->r));
	ck_assert_str_eq(c->name, want);
	ck_assert_int_eq(c->reduce, spec->r);
	ck_assert(reduce_is_identity(spec->r, c->init));
	ck_assert_str_eq(c->store->name, "R");
	char *txt = tir_program_print(tir_sched_program(s));
	if (spec->r != REDUCE_SUM) {
		char form[64];
		snprintf(form, sizeof form, "R[v0] = T.%s(R[v0], R_rf[vpart, v0])", reduce_name(spec->r));
		ck_assert_msg(strstr(txt, form), "no \"%s\" in\n%s", form, txt);
	}
	free(txt);
	check_all_spec(s, spec);
	tir_sched_free(s);
}
END_TEST

/* A sum whose init is not its identity (R = 5 + sum): the partials start
 * at 0, the output at 5 — once, not once a partial. */
START_TEST(reduce_rfactor_init)
{
	const tr_spec sp = { REDUCE_SUM, TIR_F32, TIR_F32, 3, 8, 0, false }, *spec = &sp;
	tir_sched *s = tr_sched(spec);
	tir_program *p = s->p;
	tir_block *b0 = program_find_block(p, "reduce");
	b0->init = mk_float(&p->arena, 5.0, TIR_F32);
	tir_program *ref = tr_program(spec);
	program_find_block(ref, "reduce")->init = mk_float(&ref->arena, 5.0, TIR_F32);
	int b, comb;
	ROK(b = tir_get_block(s, "reduce", &e_));
	ROK(comb = tir_rfactor(s, b, 1, TIR_LIT(4), &e_));
	ck_assert(reduce_is_identity(REDUCE_SUM, s->rv[b].block->init));
	ck_assert(s->rv[comb].block->init->kind == E_FLOAT && s->rv[comb].block->init->fval == 5.0);
	int64_t n1, n2;
	char f1[256], f2[256];
	double *x = run(ref, &n1, f1), *y = run(p, &n2, f2);
	ck_assert(!f1[0] && !f2[0] && n1 == n2);
	for (int64_t i = 0; i < n1; i++)
		ck_assert_msg(x[i] == y[i], "R[%lld] = %g, expected %g", (long long)i, y[i], x[i]);
	free(x);
	free(y);
	tir_program_free(ref);
	tir_sched_free(s);
}
END_TEST

/* decompose_reduction: the init block stores the identity (-inf, +inf). */
START_TEST(reduce_decompose)
{
	const tr_spec *spec = &red_specs[_i];
	tir_sched *s = tr_sched(spec);
	int b, l[2], k[2], ib;
	ROK(b = tir_get_block(s, "reduce", &e_));
	ck_assert_int_eq(tir_get_loops(s, b, l, 2, NULL), 2);
	tir_int f[2] = { TIR_LIT(0), TIR_LIT(5) };
	ROK(tir_split(s, l[1], 2, f, k, &e_));
	ROK(ib = tir_decompose_reduction(s, b, k[0], &e_));
	const tir_block *init = s->rv[ib].block;
	ck_assert_str_eq(init->name, "reduce_init");
	ck_assert(init->reduce == REDUCE_NONE && reduce_is_identity(spec->r, init->value));
	ck_assert_ptr_null(s->rv[b].block->init);
	check_all_spec(s, spec);
	tir_sched_free(s);
}
END_TEST

/* pad_einsum of K (7 to 8, 1 to 4): a max's input padded with -inf, a min's
 * with +inf, a sum's with 0; then rfactor into 4 (with K = 1, three
 * partials see padding only and keep the identity). */
START_TEST(reduce_pad_einsum)
{
	static const tr_spec specs[] = {
		{ REDUCE_MAX, TIR_F32, TIR_F32, 3, 7, 0, false },
		{ REDUCE_MIN, TIR_F32, TIR_F32, 3, 7, 0, false },
		{ REDUCE_MAX, TIR_F16, TIR_F16, 2, 1, 0, false },
		{ REDUCE_MIN, TIR_F16, TIR_F32, 1, 1, 0, false },
		{ REDUCE_MAX, TIR_F32, TIR_F32, 3, 7, 0, true },    /* -inf + 1 is -inf */
		{ REDUCE_MAX, TIR_F32, TIR_F32, 2, 7, 3, false },   /* NaN or -inf: skipped */
		{ REDUCE_SUM, TIR_F32, TIR_F32, 3, 7, 0, false },
	};
	const tr_spec *spec = &specs[_i];
	tir_sched *s = tr_sched(spec);
	int b;
	ROK(b = tir_get_block(s, "reduce", &e_));
	tir_int f[2] = { TIR_LIT(1), TIR_LIT(4) };
	ROK(tir_pad_einsum(s, b, 2, f, &e_));
	const tir_block *pad = program_find_block(s->p, "A_pad");
	ck_assert(pad && pad->value->kind == E_SELECT);
	ck_assert_msg(spec->r == REDUCE_SUM ? pad->value->b->fval == 0
					    : reduce_is_identity(spec->r, pad->value->b),
		      "%s: the pad value", tr_name(spec));
	ck_assert_int_eq(s->rv[b].block->iters[1].extent, spec->K == 1 ? 4 : 8);
	check_all_spec(s, spec);
	ROK(tir_rfactor(s, b, 1, TIR_LIT(4), &e_));
	check_all_spec(s, spec);
	tir_sched_free(s);
}
END_TEST

/* The defect: R[i] += A[i, k] + 1 padded from K = 30 to 32 would add 1 for
 * each of the two padded steps (47 where 45 is right, with A = 0.5): refused,
 * naming the block, the program unchanged.  So is a max whose body is not
 * -inf where its inputs are -inf (-A), and a padded iterator over a
 * dimension larger than its extent (it would read past the domain). */
START_TEST(pad_einsum_refuses)
{
	static const struct {
		tr_spec spec;
		bool neg, wide;
		const char *want;
	} cases[] = {
		{ { REDUCE_SUM, TIR_F32, TIR_F32, 4, 30, 0, true }, false, false,
		  "pad_einsum: block \"reduce\" cannot pad reduction iterator \"vk\" from 30 to 32: "
		  "where its inputs are padded (with 0) the value is 1, not the sum's identity 0" },
		{ { REDUCE_MAX, TIR_F32, TIR_F32, 4, 30, 0, false }, true, false,
		  "block \"reduce\" cannot pad reduction iterator \"vk\" from 30 to 32: where its "
		  "inputs are padded (with the lowest value) the value is inf, not the max's identity -inf" },
		{ { REDUCE_SUM, TIR_F32, TIR_F32, 4, 30, 0, false }, false, true,
		  "block \"reduce\" indexes dimension 1 of \"A\" (extent 33) with iterator \"vk\" of "
		  "extent 30: padding it would read elements outside its domain" },
	};
	const tr_spec *spec = &cases[_i].spec;
	tir_sched *s = tr_sched(spec);
	tir_block *rb = program_find_block(s->p, "reduce");
	if (cases[_i].neg)
		rb->value = mk_sub(&s->p->arena, mk_float(&s->p->arena, 0.0, TIR_F32), rb->value);
	if (cases[_i].wide)
		s->p->bufs[0]->shape[1] = 33;
	char *before = tir_program_print(tir_sched_program(s));
	tir_error err = { "" };
	int b = tir_get_block(s, "reduce", &err);
	tir_int f[2] = { TIR_LIT(1), TIR_LIT(32) };
	ck_assert_int_eq(tir_pad_einsum(s, b, 2, f, &err), -1);
	ck_assert_msg(strstr(err.msg, cases[_i].want), "message \"%s\", expected \"%s\"", err.msg,
		      cases[_i].want);
	char *after = tir_program_print(tir_sched_program(s));
	ck_assert_str_eq(before, after);
	free(before);
	free(after);
	/* a product with a padded factor pads: 0 * x is 0 */
	if (_i == 0) {
		rb->value = mk_mul(&s->p->arena, rb->value->a, mk_float(&s->p->arena, 2.0, TIR_F32));
		ck_assert_msg(tir_pad_einsum(s, b, 2, f, &err) >= 0, "%s", err.msg);
	}
	tir_sched_free(s);
}
END_TEST

/* An integer sum's init is a cast of 0, a constant too: an int8 matmul
 * pads (it was refused as "an init that is not a constant"). */
START_TEST(pad_einsum_int8)
{
	fix f = tu_fix_make("{\"op\":\"matmul\",\"M\":5,\"N\":6,\"K\":7,\"dtype\":\"int8\"}");
	int c = tu_fix_block(&f, "compute");
	ck_assert(block_ptr(&f, c)->init->kind == E_CAST);
	tir_int fac[3] = { TIR_LIT(8), TIR_LIT(8), TIR_LIT(8) };
	OK(tir_pad_einsum(f.s, c, 3, fac, E));
	ck_assert_int_eq(block_ptr(&f, c)->iters[2].extent, 8);
	check_all(&f);
	tu_fix_done(&f);
}
END_TEST

/* ---- decompose_reduction ----------------------------------------------------- */

START_TEST(decompose_outer)
{
	fix f = tu_fix_make(MM);
	int b = tu_fix_block(&f, "compute"), l[8];
	loops(&f, b, l);
	int ib;
	OK(ib = tir_decompose_reduction(f.s, b, l[0], E));
	ck_assert_str_eq(block_ptr(&f, ib)->name, "compute_init");
	ck_assert_ptr_null(find(&f, "compute")->init);
	int64_t ext[8];
	ck_assert_int_eq(nloops(block_ptr(&f, ib), ext), 2);
	ck_assert_int_eq(ext[0], 32);
	ck_assert_int_eq(ext[1], 24);
	ck_assert_int_eq(prog(&f)->root->nkids, 2);
	check_all(&f);
	tu_fix_done(&f);
}
END_TEST

/* Tiled, cached and bound like a GPU sketch: the init keeps the spatial
 * tile loops and their thread bindings, skips the reduction loops. */
START_TEST(decompose_tiled)
{
	fix f = tu_fix_make(MM);
	int b = tu_fix_block(&f, "compute"), l[8], li[2], lj[2], lk[2];
	loops(&f, b, l);
	split2(&f, l[0], 4, 8, li);
	split2(&f, l[1], 3, 8, lj);
	split2(&f, l[2], 4, 4, lk);
	int order[6] = { li[0], lj[0], lk[0], li[1], lk[1], lj[1] };
	OK(tir_reorder(f.s, 6, order, E));
	OK(tir_bind(f.s, li[0], "blockIdx.x", E));
	OK(tir_bind(f.s, lj[0], "threadIdx.x", E));
	int as, cw;
	OK(cw = tir_cache_write(f.s, b, 0, "local", E));
	OK(tir_reverse_compute_at(f.s, cw, lj[0], E));
	OK(as = tir_cache_read(f.s, b, 0, "shared", E));
	OK(tir_compute_at(f.s, as, lk[0], E));
	int ib;
	OK(ib = tir_decompose_reduction(f.s, b, lk[0], E));
	int64_t ext[8];
	ck_assert_int_eq(nloops(block_ptr(&f, ib), ext), 4);
	ck_assert_int_eq(ext[2], 8);
	ck_assert_int_eq(ext[3], 8);
	tir_stmt *ls[8];
	stmt_loops(block_ptr(&f, ib)->stmt, ls, 8);
	ck_assert_int_eq(ls[1]->loop_kind, LOOP_THREAD);
	ck_assert_int_eq(nloops(block_ptr(&f, as), ext), 5);
	ck_assert_int_eq(ext[3], 8);
	ck_assert_int_eq(ext[4], 4);
	/* B_shared is relaxed over threadIdx.x: the 4 x 24 tile of the whole
	 * thread block; B_local is not: 4 x 8 per thread */
	int bs, bl;
	OK(bs = tir_cache_read(f.s, b, 1, "shared", E));
	OK(tir_compute_at(f.s, bs, lk[0], E));
	ck_assert_int_eq(nloops(block_ptr(&f, bs), ext), 5);
	ck_assert_int_eq(ext[3], 4);
	ck_assert_int_eq(ext[4], 24);
	OK(bl = tir_cache_read(f.s, b, 1, "local", E));   /* B_shared -> B_shared_local, under k0 */
	ck_assert_str_eq(block_ptr(&f, bl)->name, "B_shared_local");
	ck_assert_int_eq(nloops(block_ptr(&f, bl), ext), 5);
	ck_assert_int_eq(ext[3], 4);
	ck_assert_int_eq(ext[4], 8);
	check_all(&f);
	tu_fix_done(&f);
}
END_TEST

/* decompose at the innermost reduction loop: no loop to copy. */
START_TEST(decompose_inner)
{
	fix f = tu_fix_make(CONV);
	int b = tu_fix_block(&f, "compute"), l[8];
	loops(&f, b, l);
	int ib;
	OK(ib = tir_decompose_reduction(f.s, b, l[4], E));
	ck_assert_int_eq(nloops(block_ptr(&f, ib), NULL), 4);
	check_all(&f);
	tu_fix_done(&f);
}
END_TEST

/* ---- illegal schedules ------------------------------------------------------- */

/* Each case sets up a schedule, tries one illegal primitive and expects a
 * failure whose message contains `want`, with the program unchanged. */
typedef struct bad {
	const char *workload;
	void (*setup)(fix *f, int *rv);
	int (*apply)(fix *f, int *rv, tir_error *err);
	const char *want;
} bad;

static void setup_none(fix *f, int *rv)
{
	rv[0] = tu_fix_block(f, "compute");
	loops(f, rv[0], rv + 1);
	int b = program_find_block(prog(f), "pad") ? tu_fix_block(f, "pad") : -1;
	rv[9] = b;
	rv[10] = program_find_block(prog(f), "epilogue") ? tu_fix_block(f, "epilogue") : -1;
}

static void setup_cached(fix *f, int *rv)
{
	setup_none(f, rv);
	OK(rv[11] = tir_cache_read(f->s, rv[0], 0, "shared", E));
}

static int ap_read_index(fix *f, int *rv, tir_error *e) { return tir_cache_read(f->s, rv[0], 3, "shared", e); }
static int ap_read_self(fix *f, int *rv, tir_error *e) { return tir_cache_read(f->s, rv[0], 2, "shared", e); }
static int ap_read_scope(fix *f, int *rv, tir_error *e) { return tir_cache_read(f->s, rv[0], 0, "texture", e); }
static int ap_write_index(fix *f, int *rv, tir_error *e) { return tir_cache_write(f->s, rv[0], 1, "local", e); }
static int ap_align_param(fix *f, int *rv, tir_error *e) { return tir_storage_align(f->s, rv[0], 0, 0, 32, 8, e); }
static int ap_align_offset(fix *f, int *rv, tir_error *e) { return tir_storage_align(f->s, rv[11], 0, 0, 32, 32, e); }
static int ap_align_factor(fix *f, int *rv, tir_error *e) { return tir_storage_align(f->s, rv[11], 0, 0, 0, 0, e); }
static int ap_align_axis(fix *f, int *rv, tir_error *e) { return tir_storage_align(f->s, rv[11], 0, 2, 32, 0, e); }
static int ap_align_global(fix *f, int *rv, tir_error *e) { return tir_storage_align(f->s, rv[9], 0, 0, 32, 0, e); }
static int ap_ca_ancestor(fix *f, int *rv, tir_error *e) { return tir_compute_at(f->s, rv[0], rv[2], e); }
static int ap_ca_no_consumer(fix *f, int *rv, tir_error *e) { return tir_compute_at(f->s, rv[10], rv[1], e); }
static int ap_ca_outside(fix *f, int *rv, tir_error *e)
{
	int el[8];
	loops(f, rv[10], el);
	return tir_compute_at(f->s, rv[9], el[1], e);
}
static int ap_rca_reduction(fix *f, int *rv, tir_error *e)
{
	int pl[8];
	loops(f, rv[9], pl);
	return tir_reverse_compute_at(f->s, rv[0], pl[1], e);
}
static int ap_rca_outside(fix *f, int *rv, tir_error *e)
{
	int pl[8];
	loops(f, rv[9], pl);
	return tir_reverse_compute_at(f->s, rv[10], pl[1], e);
}
static int ap_inline_reduction(fix *f, int *rv, tir_error *e) { return tir_compute_inline(f->s, rv[0], e); }
static int ap_inline_output(fix *f, int *rv, tir_error *e) { return tir_compute_inline(f->s, rv[10], e); }
static int ap_rinline_reduction(fix *f, int *rv, tir_error *e) { return tir_reverse_compute_inline(f->s, rv[10], e); }
static int ap_rinline_no_temp(fix *f, int *rv, tir_error *e) { return tir_reverse_compute_inline(f->s, rv[9], e); }
static int ap_dec_spatial(fix *f, int *rv, tir_error *e) { return tir_decompose_reduction(f->s, rv[10], rv[1], e); }
static int ap_dec_not_enclosing(fix *f, int *rv, tir_error *e)
{
	int el[8];
	loops(f, rv[10], el);
	return tir_decompose_reduction(f->s, rv[0], el[0], e);
}

static void setup_decomposed(fix *f, int *rv)
{
	setup_none(f, rv);
	OK(rv[12] = tir_decompose_reduction(f->s, rv[0], rv[1], E));
}
static int ap_dec_twice(fix *f, int *rv, tir_error *e) { return tir_decompose_reduction(f->s, rv[0], rv[2], e); }
static int ap_ca_two_writers(fix *f, int *rv, tir_error *e)
{
	int el[8];
	loops(f, rv[10], el);
	return tir_compute_at(f->s, rv[12], el[1], e);
}

static void setup_k_outer(fix *f, int *rv)
{
	setup_none(f, rv);
	int order[3] = { rv[3], rv[1], rv[2] };
	OK(tir_reorder(f->s, 3, order, E));
}
static int ap_dec_reduce_outside(fix *f, int *rv, tir_error *e) { return tir_decompose_reduction(f->s, rv[0], rv[1], e); }

static void setup_fused(fix *f, int *rv)
{
	setup_none(f, rv);
	int two[2] = { rv[2], rv[3] };
	OK(rv[12] = tir_fuse(f->s, 2, two, E));
}
static int ap_dec_fused(fix *f, int *rv, tir_error *e) { return tir_decompose_reduction(f->s, rv[0], rv[12], e); }

static void setup_epi_moved(fix *f, int *rv)
{
	setup_none(f, rv);
	OK(tir_reverse_compute_at(f->s, rv[10], rv[3], E));
}
static int ap_cw_reader_before(fix *f, int *rv, tir_error *e) { return tir_cache_write(f->s, rv[0], 0, "local", e); }

static int ap_tbl_twice(fix *f, int *rv, tir_error *e) { return tir_transform_block_layout(f->s, rv[0], "0,0;1;2", e); }
static int ap_tbl_mixed(fix *f, int *rv, tir_error *e) { return tir_transform_block_layout(f->s, rv[0], "0,2;1", e); }
static int ap_tbl_missing(fix *f, int *rv, tir_error *e) { return tir_transform_block_layout(f->s, rv[0], "0;1", e); }
static int ap_tbl_syntax(fix *f, int *rv, tir_error *e) { return tir_transform_block_layout(f->s, rv[0], "0;1;x", e); }
static int ap_tbl_fused(fix *f, int *rv, tir_error *e) { return tir_transform_block_layout(f->s, rv[0], "0;1;2", e); }
static int ap_tbl_split_factor(fix *f, int *rv, tir_error *e) { return tir_transform_block_layout(f->s, rv[0], "0/5;0%5;1;2", e); }
static int ap_tbl_split_half(fix *f, int *rv, tir_error *e) { return tir_transform_block_layout(f->s, rv[0], "0/4;1;2", e); }
static int ap_tbl_split_twice(fix *f, int *rv, tir_error *e) { return tir_transform_block_layout(f->s, rv[0], "0/4;0%8;1;2", e); }
static int ap_tbl_trailing(fix *f, int *rv, tir_error *e) { return tir_transform_block_layout(f->s, rv[0], "0;1;2;", e); }
static int ap_pad_huge(fix *f, int *rv, tir_error *e)
{
	tir_int fac[3] = { TIR_LIT(4096), TIR_LIT(1), TIR_LIT(1) };
	return tir_pad_einsum(f->s, rv[0], 3, fac, e);
}
static int ap_reindex_self(fix *f, int *rv, tir_error *e) { return tir_reindex(f->s, rv[0], 0, 2, NULL, e); }
static int ap_reindex_dims(fix *f, int *rv, tir_error *e) { return tir_reindex(f->s, rv[0], 0, 0, "0", e); }
static int ap_reindex_unused(fix *f, int *rv, tir_error *e) { return tir_reindex(f->s, rv[0], 0, 0, "0,1", e); }
static int ap_reindex_index(fix *f, int *rv, tir_error *e) { return tir_reindex(f->s, rv[0], 0, 5, NULL, e); }
static int ap_pad_count(fix *f, int *rv, tir_error *e)
{
	tir_int fac[2] = { TIR_LIT(8), TIR_LIT(8) };
	return tir_pad_einsum(f->s, rv[0], 2, fac, e);
}
static int ap_pad_not_einsum(fix *f, int *rv, tir_error *e)
{
	tir_int fac[7];
	for (int i = 0; i < 7; i++)
		fac[i] = TIR_LIT(8);
	return tir_pad_einsum(f->s, rv[0], 7, fac, e);
}
static int ap_pad_factor(fix *f, int *rv, tir_error *e)
{
	tir_int fac[3] = { TIR_LIT(0), TIR_LIT(8), TIR_LIT(8) };
	return tir_pad_einsum(f->s, rv[0], 3, fac, e);
}
static int ap_rf_divide(fix *f, int *rv, tir_error *e) { return tir_rfactor(f->s, rv[0], 2, TIR_LIT(3), e); }
static int ap_rf_many(fix *f, int *rv, tir_error *e)
{
	fix g = tu_fix_make("{\"op\":\"matmul\",\"M\":4,\"N\":4,\"K\":256}");
	int b = tu_fix_block(&g, "compute");
	int r = tir_rfactor(g.s, b, 2, TIR_LIT(128), e);
	tu_fix_done(&g);
	(void)f, (void)rv;
	return r;
}
static int ap_rf_spatial(fix *f, int *rv, tir_error *e) { return tir_rfactor(f->s, rv[0], 0, TIR_LIT(2), e); }
static int ap_rf_decomposed(fix *f, int *rv, tir_error *e) { return tir_rfactor(f->s, rv[0], 2, TIR_LIT(2), e); }

static const bad bad_cases[] = {
	{ "MM", setup_none, ap_tbl_twice, "iterator 0 appears twice" },
	{ "MM", setup_none, ap_tbl_mixed, "mixes spatial and reduction iterators" },
	{ "MM", setup_none, ap_tbl_missing, "1 of the 3 iterators of block \"compute\" are in no group" },
	{ "MM", setup_none, ap_tbl_syntax, "expected iterator indices 0..2" },
	{ "MM", setup_fused, ap_tbl_fused, "it needs a fresh loop nest" },
	{ "MM", setup_none, ap_tbl_split_factor, "split by 5: not a factor above 1" },
	{ "MM", setup_none, ap_tbl_split_half, "iterator 0 has only one of its parts" },
	{ "MM", setup_none, ap_tbl_split_twice, "iterator 0 split two ways" },
	{ "MM", setup_none, ap_tbl_trailing, "ends with ';'" },
	{ "MM", setup_none, ap_pad_huge, "factor 4096 pads iterator \"vi\" from 32 to 4096: more than doubles it" },
	{ "MM", setup_none, ap_reindex_self, "is its own output \"C\"; reindex the write" },
	{ "MM", setup_none, ap_reindex_dims, "uses 2 iterators" },
	{ "MM", setup_none, ap_reindex_unused, "does not use iterator 1" },
	{ "MM", setup_none, ap_reindex_index, "read index 5 is out of range" },
	{ "MM", setup_none, ap_pad_count, "has 3 iterators; 2 factors given" },
	{ "CONV", setup_none, ap_pad_not_einsum, "is not an einsum" },
	{ "MM", setup_none, ap_pad_factor, "factor 0 for iterator" },
	{ "MM", setup_none, ap_rf_divide, "factor 3 does not divide the extent 16" },
	{ "MM", setup_none, ap_rf_spatial, "is not a reduction" },
	{ "MM", setup_none, ap_rf_many, "factor 128: at most 64 partial sums" },
	{ "MM", setup_decomposed, ap_rf_decomposed, "is not a reduction with its init" },
	{ "MM", setup_none, ap_read_index, "read index 3 is out of range" },
	{ "MM", setup_none, ap_read_self, "is its own output \"C\"" },
	{ "MM", setup_none, ap_read_scope, "unknown storage scope \"texture\"" },
	{ "MM", setup_none, ap_write_index, "write index 1 is out of range" },
	{ "MM", setup_none, ap_align_param, "buffer \"C\" is a parameter" },
	{ "MM", setup_cached, ap_align_offset, "offset 32 is not in 0..31" },
	{ "MM", setup_cached, ap_align_factor, "factor 0 is not in" },
	{ "MM", setup_cached, ap_align_axis, "axis 2 is out of range" },
	{ "CONV", setup_none, ap_align_global, "only shared and local buffers can be aligned" },
	{ "MM", setup_none, ap_ca_ancestor, "already encloses block \"compute\"" },
	{ "CONV", setup_none, ap_ca_no_consumer, "has no consumer of \"Y\"" },
	{ "CONV", setup_none, ap_ca_outside, "has a consumer \"compute\" outside loop" },
	{ "CONV", setup_decomposed, ap_ca_two_writers, "is not its only producer" },
	{ "CONV", setup_none, ap_rca_reduction, "is a reduction" },
	{ "CONV", setup_none, ap_rca_outside, "has a producer \"compute\" outside loop" },
	{ "CONV", setup_none, ap_inline_reduction, "is a reduction" },
	{ "CONV", setup_none, ap_inline_output, "a parameter of the operator" },
	{ "CONV", setup_none, ap_rinline_reduction, "producer \"compute\" of \"Y_acc\" is a reduction; cache_write it first" },
	{ "CONV", setup_none, ap_rinline_no_temp, "reads no intermediate buffer" },
	{ "CONV", setup_none, ap_dec_spatial, "is not a reduction" },
	{ "CONV", setup_none, ap_dec_not_enclosing, "does not enclose block \"compute\"" },
	{ "MM", setup_decomposed, ap_dec_twice, "has no init" },
	{ "MM", setup_k_outer, ap_dec_reduce_outside, "feeds a reduction iterator of block \"compute\" and is outside loop" },
	{ "MM", setup_fused, ap_dec_fused, "feeds both spatial and reduction iterators" },
	{ "CONV", setup_epi_moved, ap_cw_reader_before, "reads \"Y_acc\" in or before the loop nest" },
};
#define N_BAD (int)(sizeof bad_cases / sizeof *bad_cases)

START_TEST(illegal)
{
	const bad *c = &bad_cases[_i];
	fix f = tu_fix_make(!strcmp(c->workload, "MM") ? MM : CONV);
	int rv[16];
	for (int i = 0; i < 16; i++)
		rv[i] = -1;
	c->setup(&f, rv);
	char *before = tir_program_print(prog(&f));
	tir_error err = { "" };
	int r = c->apply(&f, rv, &err);
	ck_assert_msg(r == -1, "case %d (%s) succeeded", _i, c->want);
	ck_assert_msg(strstr(err.msg, c->want) != NULL, "case %d: message \"%s\", expected \"%s\"",
		      _i, err.msg, c->want);
	char *after = tir_program_print(prog(&f));
	ck_assert_msg(!strcmp(before, after), "case %d changed the program", _i);
	free(before);
	free(after);
	tu_fix_done(&f);
}
END_TEST

Suite *make_sched2_suite(void);

Suite *make_sched2_suite(void)
{
	Suite *s = suite_create("sched2");
	TCase *tc = tcase_create("legal");
	tcase_add_test(tc, cache_read_compute_at);
	tcase_add_test(tc, compute_at_predicate);
	tcase_add_test(tc, compute_at_pad);
	tcase_add_test(tc, compute_at_strided);
	tcase_add_test(tc, compute_at_reduction);
	tcase_add_test(tc, compute_at_after_reverse);
	tcase_add_test(tc, cache_write_reverse_compute_at);
	tcase_add_test(tc, reverse_compute_at_epilogue);
	tcase_add_test(tc, compute_inline_pad);
	tcase_add_test(tc, compute_inline_cache);
	tcase_add_test(tc, reverse_compute_inline_epilogue);
	tcase_add_test(tc, reverse_compute_inline_cache);
	tcase_add_test(tc, layout_conv_gemm);
	tcase_add_test(tc, rfactor_matmul);
	tcase_add_test(tc, layout_split_iterator);
	tcase_add_test(tc, decompose_outer);
	tcase_add_test(tc, decompose_tiled);
	tcase_add_test(tc, decompose_inner);
	suite_add_tcase(s, tc);
	TCase *tr = tcase_create("reducers");
	tcase_set_timeout(tr, 600);
	tcase_add_loop_test(tr, reduce_rfactor, 0, 2 * NRED);
	tcase_add_test(tr, reduce_rfactor_init);
	tcase_add_loop_test(tr, reduce_decompose, 0, NRED);
	tcase_add_loop_test(tr, reduce_pad_einsum, 0, 7);
	tcase_add_loop_test(tr, pad_einsum_refuses, 0, 3);
	tcase_add_test(tr, pad_einsum_int8);
	suite_add_tcase(s, tr);
	TCase *tb = tcase_create("illegal");
	tcase_add_loop_test(tb, illegal, 0, N_BAD);
	suite_add_tcase(s, tb);
	return s;
}

int main(void)
{
	return tu_run_suite(make_sched2_suite());
}
