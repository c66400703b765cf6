/*
 * c.c — the portable C backend, and the C-family printer it shares with
 * cuda.c.
 *
 * Design.  The generated file is self-contained: a prelude (stdint, math,
 * float16 / bfloat16 conversions on uint16_t bits, floor division helpers,
 * the math functions of mathfns.def) and one function
 *
 *     int tir_entry(void *const *args);     args in tir_code.args order
 *
 * that mallocs the global temps, runs the statement tree and frees them.  The
 * tree is printed as it stands: a loop is a C for loop (parallel → `omp
 * parallel for` unless already inside one, vectorized → `omp simd` when that
 * is safe — NEON intrinsics on AArch64 where c_neon.c can —, unroll → `GCC
 * unroll`, thread-bound → serial); a block instance is
 * printed exactly as docs/ir-semantics.md defines it; a loop tensorized with
 * a CPU intrinsic (AArch64's sdot, smmla, fmla) is one call of the intrinsic's
 * NEON function (c_neon.c).  Compacted buffers are
 * local arrays declared in the body of their allocation loop (lower.c).
 *
 * Values of float16 / bfloat16 are computed in float and rounded where the
 * IR casts to or stores them; everything else is computed in its own type.
 * The printer (cg_*) is parameterised by a dialect table so that CUDA C uses
 * the same expression and block printing with its own types and conversions.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "codegen.h"

/* ---- the C-family printer ---------------------------------------------------- */

void cg_var(tir_buf *o, const tir_var *v)
{
	char id[40];
	lower_ident(id, sizeof id, v->name);
	buf_printf(o, "%s_%d", id, v->id);
}

void cg_name_buffers(cg_ctx *c)
{
	const tir_program *p = c->L->p;
	c->bufname = xcalloc((size_t)p->nbufs + 1, sizeof *c->bufname);
	for (int i = 0; i < p->nbufs; i++) {
		lower_ident(c->bufname[i], 40, p->bufs[i]->name);
		for (int j = 0; j < i; j++)
			if (!strcmp(c->bufname[i], c->bufname[j])) {
				char tmp[48];
				snprintf(tmp, sizeof tmp, "%.32s_b%d", c->bufname[i], i);
				memcpy(c->bufname[i], tmp, sizeof tmp);
				break;
			}
	}
}

static void int_lit(tir_buf *o, int64_t v)
{
	if (v == INT64_MIN)                 /* 9223372036854775808LL is no literal */
		buf_puts(o, "(-9223372036854775807LL - 1)");
	else if (v >= -2147483647 && v <= 2147483647)
		buf_printf(o, "%lld", (long long)v);
	else
		buf_printf(o, "%lldLL", (long long)v);
}

/* A float literal.  An infinity or a NaN (a MAX / MIN reduction's identity
 * is one) has no literal of its own in C or CUDA C ("-inff" is not one):
 * the dialect names an expression for it. */
static void float_lit(cg_ctx *c, double v)
{
	tir_buf *o = c->out;
	if (isnan(v)) {
		buf_puts(o, c->d->nan);
		return;
	}
	if (isinf(v)) {
		buf_puts(o, v > 0 ? c->d->inf : c->d->ninf);
		return;
	}
	char s[64];
	snprintf(s, sizeof s, "%.9g", v);
	if (!strpbrk(s, ".eEn"))            /* "3" → "3.0f" */
		strcat(s, ".0");
	buf_printf(o, "%sf", s);
}

/* The prelude's function for T.max / T.min in dtype t: a > b ? a : b and
 * a < b ? a : b (docs/ir-semantics.md: with b not NaN, C's fmax / fmin). */
static const char *minmax_fn(tir_expr_kind k, tir_dtype t)
{
	bool fl = dtype_is_float(t);
	if (k == E_MIN)
		return fl ? "tir_minf" : "tir_mini";
	return fl ? "tir_maxf" : "tir_maxi";
}

const char *cg_combine_fn(tir_reduce r, tir_dtype t)
{
	if (r != REDUCE_MAX && r != REDUCE_MIN)
		return NULL;
	return minmax_fn(reduce_combiner(r), t);
}

void cg_identity(cg_ctx *c, tir_reduce r, tir_dtype t)
{
	cg_expr(c, reduce_identity(&c->L->arena, r, t));
}

static bool nonneg(cg_ctx *c, const tir_expr *e)
{
	int64_t lo, hi;
	return expr_bounds(e, &c->L->env, &lo, &hi) && lo >= 0;
}

static void binop(cg_ctx *c, const tir_expr *e, const char *op)
{
	buf_puts(c->out, "(");
	cg_expr(c, e->a);
	buf_printf(c->out, " %s ", op);
	cg_expr(c, e->b);
	buf_puts(c->out, ")");
}

static void call2(cg_ctx *c, const char *fn, const tir_expr *x, const tir_expr *y)
{
	buf_printf(c->out, "%s(", fn);
	cg_expr(c, x);
	buf_puts(c->out, ", ");
	cg_expr(c, y);
	buf_puts(c->out, ")");
}

void cg_index(cg_ctx *c, const tir_buffer *b, const tir_expr *off)
{
	if (!c->swizzled || !c->swizzled[b->id]) {
		cg_expr(c, off);
		return;
	}
	const tir_alloc *a = &c->L->alloc[b->id];
	int64_t cols = a->extent[b->ndim - 1];
	buf_puts(c->out, "tir_swz128(");
	cg_expr(c, off);
	buf_printf(c->out, ", %lld, %lld, %d)", (long long)cols, (long long)(a->elems / cols),
		   dtype_bytes(b->dtype));
}

/* e's element, converted to its value type (convert) or as stored. */
static void load_as(cg_ctx *c, const tir_expr *e, bool convert)
{
	if (c->reg_buf && e->buf == c->reg_buf) {
		buf_puts(c->out, c->reg_expr);
		return;
	}
	const char *cvt = convert ? c->d->load_cvt[e->buf->dtype] : NULL;
	tir_expr *off = lower_offset(c->L, e->buf, e->nidx, e->idx);
	if (cvt)
		buf_printf(c->out, "%s(", cvt);
	buf_printf(c->out, "%s[", c->bufname[e->buf->id]);
	cg_index(c, e->buf, off);
	buf_puts(c->out, "]");
	if (cvt)
		buf_puts(c->out, ")");
}

static void load(cg_ctx *c, const tir_expr *e)
{
	load_as(c, e, true);
}

void cg_expr(cg_ctx *c, const tir_expr *e)
{
	tir_buf *o = c->out;
	bool fl = dtype_is_float(e->dtype);
	for (int i = 0; fl && i < c->ncse; i++)
		if (expr_equal(e, c->cse[i])) {
			buf_printf(o, "tir_cse%d", i);
			return;
		}
	switch (e->kind) {
	case E_INT:
		if (fl)
			float_lit(c, (double)e->ival);
		else
			int_lit(o, e->ival);
		return;
	case E_FLOAT:
		float_lit(c, e->fval);
		return;
	case E_VAR:
		cg_var(o, e->var);
		return;
	case E_ADD:
		if (e->b->kind == E_INT && e->b->ival < 0 && !fl && e->b->ival > INT64_MIN) {
			buf_puts(o, "(");
			cg_expr(c, e->a);
			buf_puts(o, " - ");
			int_lit(o, -e->b->ival);
			buf_puts(o, ")");
			return;
		}
		binop(c, e, "+");
		return;
	case E_SUB: binop(c, e, "-"); return;
	case E_MUL: binop(c, e, "*"); return;
	case E_DIV: binop(c, e, "/"); return;
	case E_FLOORDIV: case E_FLOORMOD:
		/* C's / and % truncate; they agree with floor division when both
		 * operands are provably non-negative */
		if (nonneg(c, e->a) && e->b->kind == E_INT && e->b->ival > 0)
			binop(c, e, e->kind == E_FLOORDIV ? "/" : "%");
		else
			call2(c, e->kind == E_FLOORDIV ? "tir_floordiv" : "tir_floormod",
			      e->a, e->b);
		return;
	case E_MIN: case E_MAX: call2(c, minmax_fn(e->kind, e->dtype), e->a, e->b); return;
	case E_LT: binop(c, e, "<"); return;
	case E_LE: binop(c, e, "<="); return;
	case E_EQ: binop(c, e, "=="); return;
	case E_NE: binop(c, e, "!="); return;
	case E_AND: binop(c, e, "&&"); return;
	case E_OR: binop(c, e, "||"); return;
	case E_NOT:
		buf_puts(o, "(!");
		cg_expr(c, e->a);
		buf_puts(o, ")");
		return;
	case E_SELECT:            /* lazy: the untaken side is never evaluated */
		buf_puts(o, "(");
		cg_expr(c, e->c);
		buf_puts(o, " ? ");
		cg_expr(c, e->a);
		buf_puts(o, " : ");
		cg_expr(c, e->b);
		buf_puts(o, ")");
		return;
	case E_CAST: {
		const char *r = c->d->round[e->dtype];
		if (r && e->a->dtype != e->dtype) {
			buf_printf(o, "%s((%s)", r, c->d->value[e->dtype]);
			cg_expr(c, e->a);
			buf_puts(o, ")");
		} else {
			buf_printf(o, "((%s)", c->d->value[e->dtype]);
			cg_expr(c, e->a);
			buf_puts(o, ")");
		}
		return;
	}
	case E_CALL:
		buf_printf(o, "tir_%s(", mathfn_name(e->fn));
		cg_expr(c, e->a);
		buf_puts(o, ")");
		return;
	case E_LOAD:
		load(c, e);
		return;
	default:
		buf_printf(o, "/* unknown expression kind %d */ 0", (int)e->kind);
		return;
	}
}

void cg_for_open(cg_ctx *c, const char *type, const tir_var *v, int64_t extent)
{
	buf_printf(c->out, "for (%s ", type);
	cg_var(c->out, v);
	buf_puts(c->out, " = 0; ");
	cg_var(c->out, v);
	buf_printf(c->out, " < %lld; ++", (long long)extent);
	cg_var(c->out, v);
	buf_puts(c->out, ") {\n");
}

void cg_block_iters(cg_ctx *c, const tir_block *b, int depth)
{
	for (int i = 0; i < b->niters; i++) {
		buf_indent(c->out, depth);
		buf_printf(c->out, "const %s ", c->d->idx_type);
		cg_var(c->out, b->iters[i].var);
		buf_puts(c->out, " = ");
		cg_expr(c, b->iters[i].binding);
		buf_puts(c->out, ";\n");
	}
}

const tir_expr *cg_stored_value(const cg_ctx *c, const tir_block *b, const tir_expr *v)
{
	if (c->d->store_cvt[b->store->dtype] && v->kind == E_CAST && v->dtype == b->store->dtype &&
	    c->d->round[v->dtype] && dtype_is_float(v->a->dtype))
		return v->a;
	return v;
}

/* store[off] = value (converted to the storage type), or with reducer r
 * store[off] = combine(store[off], value): `store + value` for SUM,
 * tir_maxf(value, store) / tir_minf(value, store) for MAX / MIN.  The
 * accumulator is the second operand on purpose: a > b ? a : b ignores a NaN
 * in a, so a NaN value never enters the accumulator, which (started from a
 * non-NaN init, the identity) stays what C's fmax / fmin would give in any
 * order of the values (docs/ir-semantics.md).  A copy from a
 * buffer of the same storage type moves the stored bits: converting them
 * to the value type and back is the identity (but for a signalling NaN's
 * payload) and costs two conversions an element, and the conversion's NaN
 * branch, if-converted in a vectorized loop, is what gcc 12 -O3 with
 * 512-bit vectors miscompiled in a bfloat16 copy (tests/check_tensor.c). */
static void store(cg_ctx *c, const tir_block *b, const char *off, const tir_expr *v,
		  tir_reduce r, int depth)
{
	tir_buf *o = c->out;
	const char *name = c->bufname[b->store->id];
	const char *scvt = c->d->store_cvt[b->store->dtype];
	const char *lcvt = c->d->load_cvt[b->store->dtype];
	const char *fn = cg_combine_fn(r, b->store->dtype);
	bool accumulate = r != REDUCE_NONE;
	buf_indent(o, depth);
	buf_printf(o, "%s[%s] = ", name, off);
	if (scvt && !accumulate && v->kind == E_LOAD && v->buf->dtype == b->store->dtype) {
		load_as(c, v, false);
		buf_puts(o, ";\n");
		return;
	}
	if (!accumulate)
		v = cg_stored_value(c, b, v);
	if (scvt)
		buf_printf(o, "%s(", scvt);
	if (fn) {
		buf_printf(o, "%s(", fn);
		cg_expr(c, v);
		buf_puts(o, ", ");
	}
	if (accumulate) {
		if (lcvt)
			buf_printf(o, "%s(%s[%s])", lcvt, name, off);
		else
			buf_printf(o, "%s[%s]", name, off);
	}
	if (fn)
		buf_puts(o, ")");
	else if (accumulate)
		buf_puts(o, " + ");
	if (!fn)
		cg_expr(c, v);
	if (scvt)
		buf_puts(o, ")");
	buf_puts(o, ";\n");
}

/* ---- offsets of compacted buffers in loop variables (C backend) --------------
 * A local accumulator indexed through block iterators prints as
 * C_local[((vi * 16) + vj) - (i1 * 1024) - ...]; the terms cancel only once the
 * iterators' bindings are substituted, and gcc, not seeing that the address
 * is a constant offset from the array, keeps separate pointers for the load
 * and the store of `acc = acc + x` and cannot keep the accumulators in
 * registers across the reduction loop (no store motion).  So for the C
 * backend the indices of compacted buffers are printed with the bindings
 * substituted, and lower_offset simplifies them: the same address, folded.
 * CUDA has the same problem with a thread's register tile (local buffers):
 * an index nvcc cannot fold to a constant once the loops are unrolled, such
 * as (tx / 8) * 64 + (tx % 8) * 8 - tx * 8, puts the whole tile in local
 * memory; bound and simplified (merge_divmod), the thread terms cancel. */
static const cg_dialect c_dialect;

static bool is_compact(const cg_ctx *c, const tir_buffer *buf)
{
	return c->L->alloc[buf->id].compact &&
	       (c->d == &c_dialect || buf->scope == TIR_SCOPE_LOCAL);
}

/* Division and remainder nodes of an index expression; with v, only those
 * whose operands use v. */
static int divmods(const tir_expr *e, const tir_var *v)
{
	if (!e)
		return 0;
	int n = (e->kind == E_FLOORDIV || e->kind == E_FLOORMOD) && (!v || expr_uses_var(e, v));
	n += divmods(e->a, v) + divmods(e->b, v) + divmods(e->c, v);
	for (int i = 0; i < e->nidx; i++)
		n += divmods(e->idx[i], v);
	return n;
}

/* An index of a buffer that keeps its shape, printed in loop variables when
 * the loops' ranges decide a division or remainder of it — fewer of them, or
 * none left along the innermost loop.  A grouped convolution reads input
 * channel (k / (K/groups)) * (C/groups) + c, a division of the output
 * channel in block iterators; inside a loop vectorized along k gcc gathers
 * it (CPU GRP-2: 12 GFLOP/s).  Bound to loops that tile k within a group,
 * it is constant along the vector (the same trace: 71 GFLOP/s). */
static tir_expr *bind_divmod(cg_ctx *c, const tir_block *b, tir_expr *idx)
{
	if (!divmods(idx, NULL))
		return NULL;
	tir_expr *bound = lower_bind(c->L, b, idx);
	tir_expr *simple = lower_simplify(c->L, bound);
	const tir_stmt *l = b->stmt->parent;
	const tir_var *inner = l && l->kind == STMT_FOR ? l->var : NULL;
	if (divmods(simple, NULL) < divmods(bound, NULL) ||
	    (inner && divmods(bound, inner) && !divmods(simple, inner)))
		return simple;
	return NULL;
}

static tir_expr *bind_compact(cg_ctx *c, const tir_block *b, tir_expr *e)
{
	if (!e || e->kind == E_INT || e->kind == E_FLOAT || e->kind == E_VAR)
		return e;
	tir_expr *n = arena_alloc(&c->L->arena, sizeof *n);
	*n = *e;
	n->a = bind_compact(c, b, e->a);
	n->b = bind_compact(c, b, e->b);
	n->c = bind_compact(c, b, e->c);
	if (e->kind == E_LOAD) {
		n->idx = arena_alloc(&c->L->arena, sizeof(tir_expr *) * (size_t)(e->nidx + 1));
		bool compact = is_compact(c, e->buf);
		for (int i = 0; i < e->nidx; i++) {
			tir_expr *bd = compact ? lower_bind(c->L, b, e->idx[i])
					       : bind_divmod(c, b, e->idx[i]);
			n->idx[i] = bd ? bd : bind_compact(c, b, e->idx[i]);
		}
	}
	return n;
}

/* ---- common subexpressions ---------------------------------------------------
 * Inlining a producer into a consumer that reads it twice (t * sigmoid(t),
 * (x - mean) * (x - mean)) repeats its expression in the consumer's value.
 * As Inductor's codegen does, such an expression is computed once: every
 * float subexpression of a block's value that occurs twice or more (by
 * expr_equal) is declared, children first, as `const T tir_cse<i> = ...;`
 * before the store, and printed by that name (cg_expr).  Not looked into:
 * a select's branches (only the taken side may be evaluated: a padded
 * load is guarded by its condition) and load indices (integer offsets,
 * printed from lower_offset).  At most CSE_NODES nodes are compared. */
#define CSE_NODES 512

typedef struct cse_walk {
	const tir_expr *node[CSE_NODES];
	int n;
	bool full;
} cse_walk;

static void cse_collect(cse_walk *w, const tir_expr *e)
{
	if (!e || !dtype_is_float(e->dtype) || e->kind == E_INT || e->kind == E_FLOAT ||
	    e->kind == E_VAR)
		return;
	if (e->kind == E_SELECT) {
		cse_collect(w, e->c);
	} else if (e->kind != E_LOAD) {
		cse_collect(w, e->a);
		cse_collect(w, e->b);
	}
	if (w->n == CSE_NODES) {
		w->full = true;
		return;
	}
	w->node[w->n++] = e;       /* post-order: children first */
}

/* Declares the repeated subexpressions of v (see above) at depth; sets
 * c->cse / c->ncse, which the caller clears (cse_end). */
static void cse_begin(cg_ctx *c, const tir_expr *v, int depth)
{
	cse_walk *w = xcalloc(1, sizeof *w);
	cse_collect(w, v);
	const tir_expr **keep = xcalloc((size_t)w->n + 1, sizeof *keep);
	int nk = 0;
	for (int i = 0; i < w->n && !w->full; i++) {
		const tir_expr *e = w->node[i];
		int count = 0;
		bool dup = false;
		for (int k = 0; k < nk && !dup; k++)
			dup = expr_equal(keep[k], e);
		for (int j = 0; j < w->n && !dup && count < 2; j++)
			count += expr_equal(w->node[j], e);
		if (dup || count < 2 || e->kind == E_LOAD)
			continue;
		keep[nk] = e;
		buf_indent(c->out, depth);
		buf_printf(c->out, "const %s tir_cse%d = ", c->d->value[e->dtype], nk);
		c->cse = keep;
		c->ncse = nk;       /* the definition uses the ones before it */
		cg_expr(c, e);
		buf_puts(c->out, ";\n");
		nk++;
	}
	c->cse = keep;
	c->ncse = nk;
	free(w);
}

static void cse_end(cg_ctx *c)
{
	free((void *)c->cse);
	c->cse = NULL;
	c->ncse = 0;
}

void cg_block(cg_ctx *c, const tir_block *b, int depth)
{
	tir_buf *o = c->out;
	tir_block bound;
	{
		bound = *b;
		bound.value = bind_compact(c, b, b->value);
		bound.init = bind_compact(c, b, b->init);
		if (is_compact(c, b->store))
			for (int d = 0; d < b->store->ndim; d++)
				bound.store_idx[d] = lower_bind(c->L, b, b->store_idx[d]);
		b = &bound;
	}
	buf_indent(o, depth);
	buf_printf(o, "{ /* block %s */\n", b->name);
	cg_block_iters(c, b, depth + 1);
	int d = depth + 1;
	if (b->predicate) {
		buf_indent(o, d);
		buf_puts(o, "if (");
		cg_expr(c, b->predicate);
		buf_puts(o, ") {\n");
		d++;
	}
	/* the offset, once */
	tir_buf off = { 0 };
	tir_buf *save = c->out;
	c->out = &off;
	cg_index(c, b->store, lower_offset(c->L, b->store, b->store->ndim, b->store_idx));
	c->out = save;
	cse_begin(c, b->value, d);
	if (b->reduce == REDUCE_NONE) {
		store(c, b, off.s, b->value, REDUCE_NONE, d);
	} else {
		if (b->init) {
			buf_indent(o, d);
			int nred = 0;
			for (int i = 0; i < b->niters; i++) {
				if (b->iters[i].kind != ITER_REDUCE)
					continue;
				buf_puts(o, nred++ ? " && " : "if (");
				cg_var(o, b->iters[i].var);
				buf_puts(o, " == 0");
			}
			if (nred) {
				buf_puts(o, ")\n");
				store(c, b, off.s, b->init, REDUCE_NONE, d + 1);
			} else {
				buf_puts(o, "/* no reduction iterator: init every step */\n");
				store(c, b, off.s, b->init, REDUCE_NONE, d);
			}
		}
		store(c, b, off.s, b->value, b->reduce, d);
	}
	cse_end(c);
	free(off.s);
	if (b->predicate) {
		buf_indent(o, d - 1);
		buf_puts(o, "}\n");
	}
	buf_indent(o, depth);
	buf_puts(o, "}\n");
}

void cg_local_array(cg_ctx *c, const tir_alloc *a, const char *align_attr,
		    int depth)
{
	buf_indent(c->out, depth);
	buf_printf(c->out, "%s %s%s[%lld]; /* %s, %lld bytes */\n",
		   c->d->storage[a->buf->dtype], align_attr, c->bufname[a->buf->id],
		   (long long)a->elems, scope_name(a->buf->scope), (long long)a->bytes);
}

/* ---- the C backend ------------------------------------------------------------- */

static const cg_dialect c_dialect = {
	.idx_type = "int64_t",
	.storage = {
#define TIR_DTYPE(id, name, bytes, ctype, cudatype, isfloat) [TIR_##id] = ctype,
#include "../ir/dtypes.def"
#undef TIR_DTYPE
	},
	.value = {
		[TIR_F32] = "float", [TIR_F16] = "float", [TIR_BF16] = "float",
		[TIR_I8] = "int8_t", [TIR_I32] = "int32_t", [TIR_I64] = "int64_t",
		[TIR_BOOL] = "int", [TIR_U8] = "uint8_t",
	},
	.load_cvt = { [TIR_F16] = "tir_f16_to_f32", [TIR_BF16] = "tir_bf16_to_f32" },
	.store_cvt = { [TIR_F16] = "tir_f32_to_f16", [TIR_BF16] = "tir_f32_to_bf16" },
	.round = { [TIR_F16] = "tir_round_f16", [TIR_BF16] = "tir_round_bf16" },
	/* math.h's, which the prelude includes: float constant expressions */
	.inf = "INFINITY", .ninf = "-INFINITY", .nan = "NAN",
};

static const char c_prelude[] =
"/* generated by tird (libtir, C backend) */\n"
"/* guarded: a group build (measure/cpu.c) puts many sources in one file */\n"
"#ifndef TIR_C_PRELUDE\n"
"#define TIR_C_PRELUDE\n"
"#include <stdint.h>\n"
"#include <stdlib.h>\n"
"#include <string.h>\n"
"#include <math.h>\n"
"\n"
"/* glibc's vector expf, erff and tanhf (libmvec, which libm.so brings in),\n"
" * declared as math.h declares them only under -ffast-math: built with\n"
" * -fno-math-errno, the loops that call them vectorize */\n"
"#if defined(__x86_64__) && defined(__GLIBC__) && defined(_OPENMP)\n"
"#if __GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35)\n"
"#pragma omp declare simd notinbranch\n"
"float expf(float);\n"
"#pragma omp declare simd notinbranch\n"
"float erff(float);\n"
"#pragma omp declare simd notinbranch\n"
"float tanhf(float);\n"
"#endif\n"
"#endif\n"
"\n"
"static inline float tir_f16_to_f32(uint16_t h)\n"
"{\n"
"    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;\n"
"    float f;\n"
"    if (e == 0) {\n"
"        f = ldexpf((float)m, -24);\n"
"        return sign ? -f : f;\n"
"    }\n"
"    x = e == 31 ? (sign | 0x7f800000u | (m << 13)) : (sign | ((e + 112u) << 23) | (m << 13));\n"
"    memcpy(&f, &x, 4);\n"
"    return f;\n"
"}\n"
"\n"
"static inline uint16_t tir_f32_to_f16(float f)\n"
"{\n"
"    uint32_t x, ax, sign, mant, h, rem;\n"
"    memcpy(&x, &f, 4);\n"
"    sign = (x >> 16) & 0x8000u;\n"
"    ax = x & 0x7fffffffu;\n"
"    if (ax >= 0x7f800000u)                         /* inf, nan */\n"
"        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));\n"
"    if (ax >= 0x477ff000u)                         /* rounds to inf */\n"
"        return (uint16_t)(sign | 0x7c00u);\n"
"    if (ax < 0x38800000u) {                        /* subnormal or zero */\n"
"        float a;\n"
"        memcpy(&a, &ax, 4);\n"
"        return (uint16_t)(sign | (uint32_t)nearbyintf(a * 16777216.0f));\n"
"    }\n"
"    mant = ax & 0x7fffffu;\n"
"    h = (((ax >> 23) - 112u) << 10) | (mant >> 13);\n"
"    rem = mant & 0x1fffu;\n"
"    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))\n"
"        h++;\n"
"    return (uint16_t)(sign | h);\n"
"}\n"
"\n"
"static inline float tir_bf16_to_f32(uint16_t h)\n"
"{\n"
"    uint32_t x = (uint32_t)h << 16;\n"
"    float f;\n"
"    memcpy(&f, &x, 4);\n"
"    return f;\n"
"}\n"
"\n"
"static inline uint16_t tir_f32_to_bf16(float f)\n"
"{\n"
"    uint32_t x;\n"
"    memcpy(&x, &f, 4);\n"
"    if ((x & 0x7fffffffu) > 0x7f800000u)\n"
"        return (uint16_t)((x >> 16) | 0x40u);\n"
"    x += 0x7fffu + ((x >> 16) & 1u);\n"
"    return (uint16_t)(x >> 16);\n"
"}\n"
"\n"
"static inline float tir_round_f16(float x) { return tir_f16_to_f32(tir_f32_to_f16(x)); }\n"
"static inline float tir_round_bf16(float x) { return tir_bf16_to_f32(tir_f32_to_bf16(x)); }\n"
"\n"
"/* floor division, used only where an operand may be negative */\n"
"static inline int64_t tir_floordiv(int64_t a, int64_t b)\n"
"{\n"
"    int64_t q = a / b;\n"
"    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;\n"
"}\n"
"static inline int64_t tir_floormod(int64_t a, int64_t b) { return a - tir_floordiv(a, b) * b; }\n"
"\n"
"static inline float tir_minf(float a, float b) { return a < b ? a : b; }\n"
"static inline float tir_maxf(float a, float b) { return a > b ? a : b; }\n"
"static inline int64_t tir_mini(int64_t a, int64_t b) { return a < b ? a : b; }\n"
"static inline int64_t tir_maxi(int64_t a, int64_t b) { return a > b ? a : b; }\n"
"\n"
"static inline float tir_exp(float x) { return expf(x); }\n"
"static inline float tir_tanh(float x) { return tanhf(x); }\n"
"static inline float tir_erf(float x) { return erff(x); }\n"
"static inline float tir_sqrt(float x) { return sqrtf(x); }\n"
"static inline float tir_rsqrt(float x) { return 1.0f / sqrtf(x); }\n"
"static inline float tir_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }\n"
"static inline float tir_gelu(float x) { return x * 0.5f * (1.0f + erff(x * 0.70710678f)); }\n"
"#endif /* TIR_C_PRELUDE */\n"
"\n";

/* Stack arrays above this size are malloc'd at their allocation site
 * instead (OpenMP threads have small stacks). */
#define C_STACK_LIMIT (128 * 1024)

typedef struct c_gen {
	cg_ctx c;
	int in_parallel;            /* inside an `omp parallel for` */
	int in_simd;
	tir_error *err;
	int rc;                     /* -1 once a tensorized loop failed (err says why) */
} c_gen;

/* Whether `omp simd` on loop l is safe: its body is one block, and the loop
 * feeds no reduction iterator (lanes would race on one accumulator). */
static bool simd_safe(const tir_stmt *l)
{
	if (l->nkids != 1 || l->kids[0]->kind != STMT_BLOCK)
		return false;
	const tir_block *b = l->kids[0]->block;
	for (int i = 0; i < b->niters; i++)
		if (b->iters[i].kind == ITER_REDUCE &&
		    expr_uses_var(b->iters[i].binding, l->var))
			return false;
	return true;
}

static void c_allocs(c_gen *g, const tir_stmt *site, int depth, bool open)
{
	tir_lowered *L = g->c.L;
	tir_buf *o = g->c.out;
	for (int i = 0; i < L->p->nbufs; i++) {
		const tir_alloc *a = &L->alloc[i];
		if (!a->used || !a->compact || a->lca != site)
			continue;
		const char *name = g->c.bufname[i];
		if (a->bytes <= C_STACK_LIMIT) {
			if (open)
				cg_local_array(&g->c, a, "__attribute__((aligned(64))) ", depth);
		} else if (open) {
			buf_indent(o, depth);
			buf_printf(o, "%s *%s = aligned_alloc(64, %lld); /* %s */\n",
				   g->c.d->storage[a->buf->dtype], name,
				   (long long)((a->bytes + 63) / 64 * 64), scope_name(a->buf->scope));
		} else {
			buf_indent(o, depth);
			buf_printf(o, "free(%s);\n", name);
		}
	}
}

static void c_stmt(c_gen *g, const tir_stmt *s, int depth);

static const char *const loop_kind_names[] = {
#define TIR_LOOP_KIND(id, name) name,
#include "../ir/loop_kinds.def"
#undef TIR_LOOP_KIND
};

static void c_loop(c_gen *g, const tir_stmt *l, int depth)
{
	tir_buf *o = g->c.out;
	if (!g->in_simd && c_neon_vector_loop(&g->c, l, depth))
		return;          /* AArch64: NEON float32x4_t / float16x8_t (c_neon.c) */
	bool par = false, simd = false;
	int64_t unroll = lower_ann(l, "unroll", 0);
	switch (l->loop_kind) {
	case LOOP_PARALLEL:
		par = !g->in_parallel && !g->in_simd;
		break;
	case LOOP_VECTORIZED:
		simd = !g->in_simd && simd_safe(l);
		break;
	case LOOP_UNROLLED:
		if (unroll <= 0)
			unroll = l->extent < 64 ? l->extent : 64;
		break;
	default:
		break;
	}
	buf_indent(o, depth);
	buf_printf(o, "/* %s: %s%s */\n", l->var->name, loop_kind_names[l->loop_kind],
		   l->loop_kind == LOOP_THREAD ? ", serial on CPU" : "");
	if (par) {
		buf_indent(o, depth);
		buf_puts(o, "#pragma omp parallel for\n");
	} else if (simd) {
		buf_indent(o, depth);
		buf_puts(o, "#pragma omp simd\n");
	} else if (unroll > 1 && !g->in_simd) {
		buf_indent(o, depth);
		buf_printf(o, "#pragma GCC unroll %lld\n", (long long)(unroll > 65534 ? 65534 : unroll));
	}
	buf_indent(o, depth);
	cg_for_open(&g->c, "int64_t", l->var, l->extent);
	g->in_parallel += par;
	g->in_simd += simd;
	c_allocs(g, l, depth + 1, true);
	for (int i = 0; i < l->nkids; i++)
		c_stmt(g, l->kids[i], depth + 1);
	c_allocs(g, l, depth + 1, false);
	g->in_parallel -= par;
	g->in_simd -= simd;
	buf_indent(o, depth);
	buf_puts(o, "}\n");
}

static void c_stmt(c_gen *g, const tir_stmt *s, int depth)
{
	if (!lower_has_blocks(s))
		return;
	switch (s->kind) {
	case STMT_FOR:
		if (intrin_of_loop(s)) {        /* a CPU intrinsic: c_neon.c */
			if (!g->rc && c_neon_call(&g->c, s, depth, g->err))
				g->rc = -1;
			break;
		}
		c_loop(g, s, depth);
		break;
	case STMT_BLOCK:
		cg_block(&g->c, s->block, depth);
		break;
	case STMT_SEQ:
		for (int i = 0; i < s->nkids; i++)
			c_stmt(g, s->kids[i], depth);
		break;
	}
}

/* A program with a local array (a compacted buffer of scope "local": a
 * register tile, sketch/cpu.c's cpu-tile-reg, sketch/cpu_conv.c) is built
 * without gcc's loop-pattern distribution: it turns the tile's zeroing and
 * its copy-out into memset / memcpy calls, which take the array's address,
 * and the tile then stays on the stack, loaded and stored around every FMA
 * of the reduction, instead of living in registers (3x slower measured on a
 * convolution's 2 x 4-vector tile).  Only such programs get it, so the code
 * of every other one is unchanged. */
static const char c_register_tile_pragma[] =
"/* a register tile: its zeroing and copy-out stay vector stores (no memset /\n"
" * memcpy call taking its address), so gcc keeps it in registers */\n"
"#if defined(__GNUC__) && !defined(__clang__)\n"
"#pragma GCC optimize(\"no-tree-loop-distribute-patterns\")\n"
"#endif\n\n";

static bool has_register_tile(const tir_lowered *L)
{
	for (int i = L->p->nparams; i < L->p->nbufs; i++) {
		const tir_alloc *a = &L->alloc[i];
		if (a->used && a->compact && a->buf->scope == TIR_SCOPE_LOCAL)
			return true;
	}
	return false;
}

static tir_code *c_generate(const tir_program *p, const tir_target *t,
			    tir_error *err)
{
	tir_lowered L;
	if (lower_program(p, t, &L, err))
		return NULL;
	tir_buf o = { 0 };
	c_gen g = { { &L, &c_dialect, &o, NULL }, 0, 0, err, 0 };
	cg_name_buffers(&g.c);

	tir_code *code = xcalloc(1, sizeof *code);
	code->nargs = p->nparams;
	code->args = xcalloc((size_t)p->nparams + 1, sizeof *code->args);
	snprintf(code->entry, sizeof code->entry, "tir_entry");

	buf_puts(&o, c_prelude);
	c_neon_prelude(&g.c, p->root);
	if (has_register_tile(&L))
		buf_puts(&o, c_register_tile_pragma);
	buf_puts(&o, "int tir_entry(void *const *args)\n{\n");
	for (int i = 0; i < p->nparams; i++) {
		const tir_buffer *b = p->bufs[i];
		tir_arg_info *ai = &code->args[i];
		snprintf(ai->name, sizeof ai->name, "%s", g.c.bufname[i]);
		ai->dtype = b->dtype;
		ai->elem_bytes = dtype_bytes(b->dtype);
		ai->elems = L.alloc[i].elems;
		ai->is_output = b->role == BUF_OUTPUT;
		buf_indent(&o, 1);
		buf_printf(&o, "%s%s *restrict %s = (%s%s *)args[%d];\n",
			   ai->is_output ? "" : "const ", c_dialect.storage[b->dtype],
			   g.c.bufname[i], ai->is_output ? "" : "const ",
			   c_dialect.storage[b->dtype], i);
	}
	/* global temps: full-size, on the heap */
	int ntemps = 0;
	for (int i = p->nparams; i < p->nbufs; i++) {
		const tir_alloc *a = &L.alloc[i];
		if (!a->used || a->compact)
			continue;
		buf_indent(&o, 1);
		buf_printf(&o, "%s *restrict %s = aligned_alloc(64, %lld);\n",
			   c_dialect.storage[a->buf->dtype], g.c.bufname[i],
			   (long long)((a->bytes + 63) / 64 * 64));
		ntemps++;
	}
	if (ntemps) {
		buf_indent(&o, 1);
		buf_puts(&o, "if (");
		int k = 0;
		for (int i = p->nparams; i < p->nbufs; i++)
			if (L.alloc[i].used && !L.alloc[i].compact)
				buf_printf(&o, "%s!%s", k++ ? " || " : "", g.c.bufname[i]);
		buf_puts(&o, ") {\n");
		for (int i = p->nparams; i < p->nbufs; i++)
			if (L.alloc[i].used && !L.alloc[i].compact) {
				buf_indent(&o, 2);
				buf_printf(&o, "free(%s);\n", g.c.bufname[i]);
			}
		buf_indent(&o, 2);
		buf_puts(&o, "return -1;\n");
		buf_indent(&o, 1);
		buf_puts(&o, "}\n");
	}
	c_allocs(&g, NULL, 1, true);
	c_stmt(&g, p->root, 1);
	c_allocs(&g, NULL, 1, false);
	for (int i = p->nparams; i < p->nbufs; i++)
		if (L.alloc[i].used && !L.alloc[i].compact) {
			buf_indent(&o, 1);
			buf_printf(&o, "free(%s);\n", g.c.bufname[i]);
		}
	buf_puts(&o, "    return 0;\n}\n");
	code->source = buf_take(&o);
	free(g.c.bufname);
	lower_free(&L);
	if (g.rc) {
		tir_code_free(code);
		return NULL;
	}
	return code;
}

const tir_codegen_backend tir_codegen_c = { "c", c_generate };
