/*
 * cuda_copy.c — the CUDA backend's copies: a vectorized loop as one vector
 * load and store, and in the copy stages of a pipelined loop
 * (cuda_pipeline.c) global -> shared copies as cp.async.
 *
 * A vectorized loop whose body is a copy of contiguous, provably aligned
 * elements (a plain one, or a padded one: select(c, load, 0) with conditions
 * the same for every lane, as an im2col fetch along the channels), under a
 * predicate the same for every lane too (a fused fetch loop's guard when its
 * split leaves a partial tail of whole vectors), becomes one 4-, 8- or
 * 16-byte load and store; one over a block that computes its value
 * (cu_vector_store) computes each lane's into registers and stores them as
 * one vector; otherwise it is an unrolled scalar loop.
 * In a copy stage (cu_gen.async) such a copy of 4, 8 or 16 bytes from
 * global to shared memory, or a one-element one of 4 or 8, is one
 * cp.async instead.
 */
#include <stdlib.h>
#include "cuda.h"

/* Asynchronous global -> shared copies (sm_80 on, as every CUDA target of
 * target.c), for pipelined loops: n of
 * the `bytes` bytes are read, the rest zero-filled (n = 0: padding). */
static const char cuda_async_prelude[] =
"TIR_DEV unsigned tir_smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }\n"
"TIR_DEV void tir_cp_async16(void *dst, const void *src, int n)\n"
"{\n"
"    asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\\n\" ::\n"
"                 \"r\"(tir_smem_addr(dst)), \"l\"(src), \"r\"(n) : \"memory\");\n"
"}\n"
"TIR_DEV void tir_cp_async8(void *dst, const void *src, int n)\n"
"{\n"
"    asm volatile(\"cp.async.ca.shared.global [%0], [%1], 8, %2;\\n\" ::\n"
"                 \"r\"(tir_smem_addr(dst)), \"l\"(src), \"r\"(n) : \"memory\");\n"
"}\n"
"TIR_DEV void tir_cp_async4(void *dst, const void *src, int n)\n"
"{\n"
"    asm volatile(\"cp.async.ca.shared.global [%0], [%1], 4, %2;\\n\" ::\n"
"                 \"r\"(tir_smem_addr(dst)), \"l\"(src), \"r\"(n) : \"memory\");\n"
"}\n"
"TIR_DEV void tir_cp_async_commit() { asm volatile(\"cp.async.commit_group;\\n\" ::: \"memory\"); }\n"
"#define TIR_CP_ASYNC_WAIT(n) asm volatile(\"cp.async.wait_group \" #n \";\\n\" ::: \"memory\")\n"
"\n";

void cu_async_prelude(tir_buf *o)
{
	buf_puts(o, cuda_async_prelude);
}

/* The vector type that moves `bytes` bytes of dtype t at once. */
static const char *vec_type(tir_dtype t, int64_t bytes)
{
	bool f = t == TIR_F32;
	switch (bytes) {
	case 4: return f ? "float" : "int";
	case 8: return f ? "float2" : "int2";
	case 16: return f ? "float4" : "int4";
	default: return NULL;
	}
}

/* Whether the integer expression e is provably a multiple of n. */
static bool multiple_of(const tir_expr *e, int64_t n)
{
	switch (e->kind) {
	case E_INT:
		return e->ival % n == 0;
	case E_ADD: case E_SUB:
		return multiple_of(e->a, n) && multiple_of(e->b, n);
	case E_MUL:
		return multiple_of(e->a, n) || multiple_of(e->b, n);
	case E_FLOORMOD:
		return e->b->kind == E_INT && e->b->ival % n == 0 && multiple_of(e->a, n);
	default:
		return false;
	}
}

/* Whether x is y + v with y a multiple of n and v the lane variable (which
 * then ranges over [0, n)); sets *y. */
static bool lane_split(tir_lowered *L, const tir_expr *x, const tir_var *v,
		       int64_t n, tir_expr **y)
{
	tir_affine f;
	if (!affine_of(x, &f) || f.c0 % n)
		return false;
	bool seen = false;
	for (int i = 0; i < f.nterms; i++) {
		if (f.var[i] == v) {
			if (f.coef[i] != 1)
				return false;
			seen = true;
			f.coef[i] = 0;
		} else if (!f.var[i] && expr_uses_var(f.opaque[i], v)) {
			return false;
		} else if (f.coef[i] % n && !(f.opaque[i] && multiple_of(f.opaque[i], n))) {
			return false;
		}
	}
	if (!seen)
		return false;
	*y = mk_sub(&L->arena, (tir_expr *)x, mk_var(&L->arena, (tir_var *)v));
	*y = expr_simplify(&L->arena, *y, NULL);
	return true;
}

/* Rewrites floordiv(y + v, c) → floordiv(y, c) and floormod(y + v, c) →
 * floormod(y, c) + v where y is a multiple of n, v the lane variable in
 * [0, n) and n divides c: what a fused index split into lanes looks like. */
static tir_expr *split_lanes(tir_lowered *L, tir_expr *e, const tir_var *v, int64_t n)
{
	if (!e || e->kind == E_INT || e->kind == E_VAR || e->kind == E_FLOAT ||
	    e->kind == E_LOAD || e->kind == E_CALL || e->kind == E_CAST || e->kind == E_SELECT)
		return e;
	tir_arena *ar = &L->arena;
	if (e->kind == E_NOT)
		return mk_not(ar, split_lanes(L, e->a, v, n));
	/* innermost first: floormod(floordiv(y + v, 256), 3) */
	tir_expr *a = lower_simplify(L, split_lanes(L, e->a, v, n));
	tir_expr *b = split_lanes(L, e->b, v, n), *y;
	if ((e->kind == E_FLOORDIV || e->kind == E_FLOORMOD) && b->kind == E_INT &&
	    b->ival > 0 && b->ival % n == 0 && lane_split(L, a, v, n, &y)) {
		if (e->kind == E_FLOORDIV)
			return mk_floordiv(ar, y, b);
		return mk_add(ar, mk_floormod(ar, y, b), mk_var(ar, (tir_var *)v));
	}
	return mk_bin(ar, e->kind, a, b);
}

/* Whether condition c (bound, simplified, its floordivs and floormods
 * split by split_lanes) holds for all n lanes of v alike: each conjunct
 * either does not use v or compares a multiple of n plus the lane with a
 * bound that is a multiple of n, which the lane cannot cross:
 *   y + v < 0   iff  y < 0        y - v <= 0  iff  y <= 0
 * (y a multiple of n, v in [0, n)), as a fused loop's guard `i < extent`
 * reads when the extent is a whole number of vectors. */
static bool lane_uniform(tir_lowered *L, const tir_expr *c, const tir_var *v, int64_t n)
{
	if (!expr_uses_var(c, v))
		return true;
	if (c->kind == E_AND)
		return lane_uniform(L, c->a, v, n) && lane_uniform(L, c->b, v, n);
	if (c->kind != E_LT && c->kind != E_LE)
		return false;
	tir_expr *d = lower_simplify(L, mk_sub(&L->arena, c->a, c->b)), *y;
	tir_affine f;
	if (!affine_of(d, &f))
		return false;
	int64_t s = 0;
	for (int i = 0; i < f.nterms; i++)
		if (f.var[i] == v)
			s = f.coef[i];
	if ((c->kind == E_LT && s == 1) || (c->kind == E_LE && s == -1))
		return lane_split(L, s == 1 ? d : lower_simplify(L, mk_sub(&L->arena,
						  mk_int(&L->arena, 0), d)), v, n, &y);
	return false;
}

/* Expression e of block b over its loops, the n lanes of v split out of its
 * floordivs and floormods (split_lanes), simplified. */
static tir_expr *lanes_out(tir_lowered *L, const tir_block *b, const tir_expr *e,
			   const tir_var *v, int64_t n)
{
	tir_expr *x = lower_simplify(L, lower_bind(L, b, (tir_expr *)e));
	return lower_simplify(L, split_lanes(L, x, v, n));
}

/* Whether condition c of block b holds for all n lanes of v alike. */
static bool uniform_over_lanes(tir_lowered *L, const tir_block *b, const tir_expr *c,
			       const tir_var *v, int64_t n)
{
	return lane_uniform(L, lanes_out(L, b, c, v, n), v, n);
}

/* Whether offset `off` of block b is base + v with base a multiple of n,
 * v the vectorized loop's variable: n lanes, contiguous and aligned. */
static bool aligned_lanes(tir_lowered *L, const tir_block *b, tir_expr *off,
			  const tir_var *v, int64_t n)
{
	tir_expr *y;
	return lane_split(L, lanes_out(L, b, off, v, n), v, n, &y);
}

static bool is_zero(const tir_expr *e)
{
	return (e->kind == E_FLOAT && e->fval == 0.0) || (e->kind == E_INT && e->ival == 0) ||
	       (e->kind == E_CAST && is_zero(e->a));
}

/* Whether block b is a copy, store = load or store = select(c, load, 0)
 * (nested, at most 4 conditions): the load and the conditions. */
static const tir_expr *copy_of(const tir_block *b, const tir_expr **conds, int *nconds)
{
	const tir_expr *v = b->value;
	*nconds = 0;
	while (v->kind == E_SELECT && is_zero(v->b) && *nconds < 4) {
		conds[(*nconds)++] = v->c;
		v = v->a;
	}
	if (b->reduce != REDUCE_NONE || v->kind != E_LOAD || v->buf->dtype != b->store->dtype)
		return NULL;
	return v;
}

/* The conjunction of conds[0..n), printed into o. */
static void print_conds(cu_gen *g, tir_buf *o, const tir_expr *const *conds, int n)
{
	tir_buf *save = g->c.out;
	g->c.out = o;
	for (int i = 0; i < n; i++) {
		buf_puts(o, i ? " && (" : "(");
		cg_expr(&g->c, conds[i]);
		buf_puts(o, ")");
	}
	g->c.out = save;
}

/* Prints the store of a copy of `bytes` bytes at once: dst[doff] = conds ?
 * src[soff] : 0, as one cp.async in a copy stage of a pipelined loop when it
 * moves 4, 8 or 16 bytes from global to shared memory (vt NULL: one element,
 * only there), else as one load and store of vector type vt. */
static void copy_store(cu_gen *g, const tir_block *b, const tir_expr *ld,
		       const tir_expr *const *conds, int nconds, tir_expr *doff,
		       tir_expr *soff, const char *vt, int64_t bytes, int depth)
{
	tir_buf *o = g->c.out, cb = { 0 };
	const char *dst = g->c.bufname[b->store->id], *src = g->c.bufname[ld->buf->id];
	print_conds(g, &cb, conds, nconds);
	buf_indent(o, depth);
	if (g->async && b->store->scope == TIR_SCOPE_SHARED &&
	    ld->buf->scope == TIR_SCOPE_GLOBAL && (bytes == 4 || bytes == 8 || bytes == 16)) {
		buf_printf(o, "tir_cp_async%lld(%s + ", (long long)bytes, dst);
		cg_index(&g->c, b->store, doff);
		/* padding reads nothing: the address is the buffer's start */
		buf_printf(o, ", %s%s(const void *)(%s + ", nconds ? cb.s : "", nconds ? " ? " : "",
			   src);
		cg_index(&g->c, ld->buf, soff);
		buf_puts(o, ")");
		if (nconds)
			buf_printf(o, " : (const void *)%s, %s ? %lld : 0", src, cb.s, (long long)bytes);
		else
			buf_printf(o, ", %lld", (long long)bytes);
		buf_puts(o, ");\n");
	} else {
		buf_printf(o, "*(%s *)(%s + ", vt, dst);
		cg_index(&g->c, b->store, doff);
		buf_printf(o, ") = %s%s*(const %s *)(%s + ", nconds ? cb.s : "", nconds ? " ? " : "",
			   vt, src);
		cg_index(&g->c, ld->buf, soff);
		buf_puts(o, ")");
		if (nconds)
			buf_printf(o, " : %s{}", vt);
		buf_puts(o, ";\n");
	}
	free(cb.s);
}

/* Block b's iterators at depth, and its predicate as an `if (...)` over the
 * next statement; the depth of that statement. */
static int lane_head(cu_gen *g, const tir_block *b, int depth)
{
	cg_block_iters(&g->c, b, depth);
	if (!b->predicate)
		return depth;
	buf_indent(g->c.out, depth);
	buf_puts(g->c.out, "if (");
	cg_expr(&g->c, b->predicate);
	buf_puts(g->c.out, ")\n");
	return depth + 1;
}

/* Block b as one copy_store: its iterators, its predicate, the store. */
static void copy_block(cu_gen *g, const tir_block *b, const tir_expr *ld,
		       const tir_expr *const *conds, int nconds, tir_expr *doff,
		       tir_expr *soff, const char *vt, int64_t bytes, int depth)
{
	tir_buf *o = g->c.out;
	buf_indent(o, depth);
	buf_printf(o, "{ /* block %s */\n", b->name);
	copy_store(g, b, ld, conds, nconds, doff, soff, vt, bytes, lane_head(g, b, depth + 1));
	buf_indent(o, depth);
	buf_puts(o, "}\n");
}

/* A vectorized loop whose body is one copy of n contiguous aligned
 * elements, each loaded or zero by conditions that hold for all lanes alike
 * (padding: select(c, load, 0), nested): prints one vector load/store, the
 * conditions evaluated at lane 0, and returns true. */
bool cu_vector_copy(cu_gen *g, const tir_stmt *l, int depth)
{
	if (l->nkids != 1 || l->kids[0]->kind != STMT_BLOCK)
		return false;
	const tir_block *b = l->kids[0]->block;
	const tir_expr *conds[4];
	int nconds;
	const tir_expr *v = copy_of(b, conds, &nconds);
	if (!v)
		return false;
	tir_lowered *L = g->c.L;
	if (b->predicate && !uniform_over_lanes(L, b, b->predicate, l->var, l->extent))
		return false;
	int64_t bytes = l->extent * dtype_bytes(b->store->dtype);
	const char *vt = vec_type(b->store->dtype, bytes);
	if (!vt)
		return false;
	tir_expr *doff = lower_offset(L, b->store, b->store->ndim, b->store_idx);
	tir_expr *soff = lower_offset(L, v->buf, v->nidx, v->idx);
	if (!aligned_lanes(L, b, doff, l->var, l->extent) ||
	    !aligned_lanes(L, b, soff, l->var, l->extent))
		return false;
	for (int i = 0; i < nconds; i++)
		if (!uniform_over_lanes(L, b, conds[i], l->var, l->extent))
			return false;

	tir_buf *o = g->c.out;
	buf_indent(o, depth);
	buf_printf(o, "{ /* %s: vectorized, %lld lanes as one %s */\n", l->var->name,
		   (long long)l->extent, vt);
	buf_indent(o, depth + 1);
	buf_printf(o, "const %s ", g->c.d->idx_type);
	cg_var(o, l->var);
	buf_puts(o, " = 0;\n");
	copy_block(g, b, v, conds, nconds, doff, soff, vt, bytes, depth + 1);
	buf_indent(o, depth);
	buf_puts(o, "}\n");
	return true;
}

/* In a copy stage: a one-element copy of 4 or 8 bytes from global to shared
 * memory, as one cp.async.  Returns false for anything else. */
bool cu_async_scalar(cu_gen *g, const tir_block *b, int depth)
{
	const tir_expr *conds[4];
	int nconds;
	const tir_expr *v = copy_of(b, conds, &nconds);
	int64_t bytes = dtype_bytes(b->store->dtype);
	if (!g->async || !v || (bytes != 4 && bytes != 8) ||
	    b->store->scope != TIR_SCOPE_SHARED || v->buf->scope != TIR_SCOPE_GLOBAL)
		return false;
	tir_lowered *L = g->c.L;
	tir_expr *doff = lower_offset(L, b->store, b->store->ndim, b->store_idx);
	tir_expr *soff = lower_offset(L, v->buf, v->nidx, v->idx);
	copy_block(g, b, v, conds, nconds, doff, soff, NULL, bytes, depth);
	return true;
}

/* Whether block b reads buffer buf. */
/* A vectorized loop over one spatial block that is not a copy (a pointwise
 * value, a row's normalization), whose n stores are contiguous and
 * aligned, under a predicate the same for every lane: each lane's value
 * computed into a register array, then one 4-, 8- or 16-byte store of it
 * (the lanes' loads stay scalar).  A block that reads its own output is
 * left scalar: a lane could read what an earlier lane stored.  Returns
 * true where it printed the loop. */
bool cu_vector_store(cu_gen *g, const tir_stmt *l, int depth)
{
	if (l->nkids != 1 || l->kids[0]->kind != STMT_BLOCK)
		return false;
	const tir_block *b = l->kids[0]->block;
	tir_lowered *L = g->c.L;
	if (b->reduce != REDUCE_NONE || !b->value || block_reads(b, b->store) ||
	    (b->store->scope != TIR_SCOPE_GLOBAL && b->store->scope != TIR_SCOPE_SHARED))
		return false;
	if (b->predicate && !uniform_over_lanes(L, b, b->predicate, l->var, l->extent))
		return false;
	int64_t bytes = l->extent * dtype_bytes(b->store->dtype);
	const char *vt = vec_type(b->store->dtype, bytes);
	tir_expr *doff = lower_offset(L, b->store, b->store->ndim, b->store_idx);
	if (!vt || !aligned_lanes(L, b, doff, l->var, l->extent))
		return false;
	tir_buf *o = g->c.out;
	const char *scvt = g->c.d->store_cvt[b->store->dtype];
	const char *it = g->c.d->idx_type;
	buf_indent(o, depth);
	buf_printf(o, "{ /* %s: vectorized, %lld lanes computed, stored as one %s */\n",
		   l->var->name, (long long)l->extent, vt);
	buf_indent(o, depth + 1);
	buf_printf(o, "__align__(16) %s tir_vs[%lld];\n", g->c.d->storage[b->store->dtype],
		   (long long)l->extent);
	buf_indent(o, depth + 1);
	buf_puts(o, "#pragma unroll\n");
	buf_indent(o, depth + 1);
	cg_for_open(&g->c, it, l->var, l->extent);
	int d = lane_head(g, b, depth + 2);
	buf_indent(o, d);
	buf_puts(o, "tir_vs[");
	cg_var(o, l->var);
	buf_printf(o, "] = %s(", scvt ? scvt : "");
	cg_expr(&g->c, cg_stored_value(&g->c, b, b->value));
	buf_puts(o, ");\n");
	buf_indent(o, depth + 1);
	buf_puts(o, "}\n");
	/* the store, at lane 0 */
	buf_indent(o, depth + 1);
	buf_puts(o, "{\n");
	buf_indent(o, depth + 2);
	buf_printf(o, "const %s ", it);
	cg_var(o, l->var);
	buf_puts(o, " = 0;\n");
	d = lane_head(g, b, depth + 2);
	buf_indent(o, d);
	buf_printf(o, "*(%s *)(%s + ", vt, g->c.bufname[b->store->id]);
	cg_index(&g->c, b->store, doff);
	buf_printf(o, ") = *(const %s *)tir_vs;\n", vt);
	buf_indent(o, depth + 1);
	buf_puts(o, "}\n");
	buf_indent(o, depth);
	buf_puts(o, "}\n");
	return true;
}

const char *cu_vec_type(tir_dtype t, int64_t bytes)
{
	return vec_type(t, bytes);
}

bool cu_aligned_lanes(cu_gen *g, const tir_block *b, tir_expr *off, const tir_var *v, int64_t n)
{
	return aligned_lanes(g->c.L, b, off, v, n);
}
