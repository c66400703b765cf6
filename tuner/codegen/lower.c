/*
 * lower.c — the lowering every code generator shares, and tir_codegen.
 *
 * Design.  Code generators print the statement tree as it stands; the only
 * decisions they share are about memory: where a buffer is allocated, how big
 * it is and how an access buf[i, j, ...] becomes one offset.  lower_program
 * answers those once per program, following docs/ir-semantics.md:
 *
 *   params, global temps   full-size, row-major (temps: storage_align padding)
 *   shared, local, ...     allocated in the body of the lowest common ancestor
 *                          loop (LCA) of the blocks that touch them, compacted
 *                          to the union of the intervals their accesses cover
 *                          when the loops inside the LCA vary (plus, for
 *                          shared buffers, threadIdx / vthread loops above it).
 *
 * A compacted dimension keeps a symbolic base (an expression in the loops
 * fixed at the allocation site) and constant bounds lo..lo+extent-1, so the
 * offset of an access is sum_d (idx[d] - base[d] - lo[d]) * stride[d].
 * Nothing here prints code; nothing here changes the program.
 */
#include <stdlib.h>
#include <string.h>
#include "codegen.h"

bool lower_has_blocks(const tir_stmt *s)
{
	if (s->kind == STMT_BLOCK)
		return true;
	for (int i = 0; i < s->nkids; i++)
		if (lower_has_blocks(s->kids[i]))
			return true;
	return false;
}

void lower_ident(char *dst, size_t n, const char *name)
{
	size_t j = 0;
	if (n == 0)
		return;
	if (name[0] >= '0' && name[0] <= '9' && j + 1 < n)
		dst[j++] = '_';
	for (const char *s = name; *s && j + 1 < n; s++) {
		char ch = *s;
		bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			  (ch >= '0' && ch <= '9') || ch == '_';
		dst[j++] = ok ? ch : '_';
	}
	if (j == 0 && n > 1)
		dst[j++] = '_';
	dst[j] = '\0';
}

tir_expr *lower_bind(tir_lowered *L, const tir_block *b, tir_expr *e)
{
	tir_subst s = { L->p->nvars, xcalloc((size_t)L->p->nvars + 1, sizeof(tir_expr *)) };
	for (int i = 0; i < b->niters; i++)
		if (b->iters[i].binding)
			s.map[b->iters[i].var->id] = b->iters[i].binding;
	tir_expr *r = expr_subst(&L->arena, e, &s);
	free(s.map);
	return r;
}

/* ---- allocation sites ------------------------------------------------------ */

/* The lowest common ancestor (a loop or the root) of statements a and b,
 * either of which may be an ancestor of the other. */
static const tir_stmt *lca2(const tir_stmt *a, const tir_stmt *b)
{
	if (!a)
		return b;
	for (const tir_stmt *x = b; x; x = x->parent)
		if (x == a || stmt_is_ancestor(x, a))
			return x;
	return a->p->root;
}

/* Calls fn for every access of block b: the store and each load of its
 * value and init (indices in iterator variables). */
typedef void (*access_fn)(const tir_block *b, const tir_buffer *buf, int n,
			  tir_expr *const *idx, void *ctx);

struct access_walk {
	const tir_block *b;
	access_fn fn;
	void *ctx;
};

static void visit_load(tir_expr *load, void *ctx)
{
	struct access_walk *w = ctx;
	w->fn(w->b, load->buf, load->nidx, load->idx, w->ctx);
}

static void block_accesses(const tir_block *b, access_fn fn, void *ctx)
{
	struct access_walk w = { b, fn, ctx };
	fn(b, b->store, b->store->ndim, b->store_idx, ctx);
	expr_visit_loads(b->value, visit_load, &w);
	expr_visit_loads(b->init, visit_load, &w);
	expr_visit_loads(b->predicate, visit_load, &w);
}

struct lca_pass {
	tir_lowered *L;
	const tir_stmt **lca;       /* by buffer id; the root when at top level */
};

static void lca_access(const tir_block *b, const tir_buffer *buf, int n,
		       tir_expr *const *idx, void *ctx)
{
	struct lca_pass *lp = ctx;
	tir_alloc *a = &lp->L->alloc[buf->id];
	a->used = true;
	lp->lca[buf->id] = lca2(lp->lca[buf->id], b->stmt->parent);
}

static void lca_block(tir_block *b, void *ctx)
{
	block_accesses(b, lca_access, ctx);
}

/* ---- compacted regions ------------------------------------------------------- */

struct region_pass {
	tir_lowered *L;
	const tir_buffer *buf;
	const tir_stmt *lca;
	tir_env env;                /* ranged: loops relaxed for the current block */
	bool any;
	tir_interval iv[TIR_MAX_DIMS];
};

static bool is_thread_tag(tir_thread_tag t)
{
	return t == TIR_THREAD_X || t == TIR_THREAD_Y || t == TIR_THREAD_Z;
}

static bool is_vthread_tag(tir_thread_tag t)
{
	return t == TIR_VTHREAD_X || t == TIR_VTHREAD_Y || t == TIR_VTHREAD_Z;
}

/* Whether loop l, enclosing an access, varies over the allocation of a
 * buffer of scope sc allocated in the body of lca. */
static bool relaxed(const tir_stmt *l, const tir_stmt *lca, tir_scope sc)
{
	if (l != lca && stmt_is_ancestor(lca, l))
		return true;                    /* strictly inside the LCA */
	if (l->loop_kind != LOOP_THREAD)
		return false;
	if (sc == TIR_SCOPE_SHARED)
		return is_thread_tag(l->tag) || is_vthread_tag(l->tag);
	/* local and fragment buffers allocated under a vthread loop live in one
	 * iteration of it: codegen runs vthreads as serial loops */
	return false;
}

static void region_access(const tir_block *b, const tir_buffer *buf, int n,
			  tir_expr *const *idx, void *ctx)
{
	struct region_pass *rp = ctx;
	if (buf != rp->buf)
		return;
	tir_lowered *L = rp->L;
	for (int d = 0; d < n; d++) {
		tir_expr *e = lower_bind(L, b, idx[d]);
		e = expr_simplify(&L->arena, e, &L->env);
		tir_interval iv = interval_of(&L->arena, e, &rp->env);
		rp->iv[d] = rp->any ? interval_union(&L->arena, rp->iv[d], iv) : iv;
	}
	rp->any = true;
}

static void region_block(tir_block *b, void *ctx)
{
	struct region_pass *rp = ctx;
	tir_stmt *loops[64];
	int n = stmt_loops(b->stmt, loops, 64);
	if (n > 64)
		n = 64;
	for (int i = 0; i < n; i++)
		if (relaxed(loops[i], rp->lca, rp->buf->scope))
			env_set(&rp->env, loops[i]->var, 0, loops[i]->extent - 1);
	block_accesses(b, region_access, rp);
	for (int i = 0; i < n; i++)
		env_unset(&rp->env, loops[i]->var);
}

static void compact(tir_lowered *L, tir_alloc *a, const tir_stmt *lca)
{
	const tir_buffer *buf = a->buf;
	struct region_pass rp = { L, buf, lca, env_new(L->p->nvars), false, { { 0 } } };
	stmt_visit_blocks(L->p->root, region_block, &rp);
	env_free(&rp.env);
	a->lca = lca == L->p->root ? NULL : lca;
	for (int d = 0; d < buf->ndim; d++) {
		tir_interval iv = rp.iv[d];
		if (!iv.full && !iv.base) {     /* constant: clamp to the shape */
			if (iv.lo < 0)
				iv.lo = 0;
			if (iv.hi > buf->shape[d] - 1)
				iv.hi = buf->shape[d] - 1;
		}
		if (iv.full || iv.hi - iv.lo + 1 > buf->shape[d] || iv.hi < iv.lo) {
			a->base[d] = NULL;
			a->lo[d] = 0;
			a->extent[d] = buf->shape[d];
		} else {
			a->base[d] = iv.base;
			a->lo[d] = iv.lo;
			a->extent[d] = iv.hi - iv.lo + 1;
		}
	}
}

/* Row-major strides over a->extent, padded where storage_align asks:
 * the stride of dimension d is rounded up until stride % factor == offset. */
static void strides(tir_alloc *a, bool align)
{
	const tir_buffer *buf = a->buf;
	int64_t s = 1;
	for (int d = buf->ndim - 1; d >= 0; d--) {
		int64_t f = align ? buf->align_factor[d] : 0;
		if (f > 0) {
			int64_t off = ((buf->align_offset[d] % f) + f) % f;
			s += ((off - s % f) % f + f) % f;
		}
		a->stride[d] = s;
		s *= a->extent[d];
	}
	a->elems = buf->ndim ? s : 1;
	a->ring = 1;
	a->slot = a->elems;
	a->bytes = a->elems * dtype_bytes(buf->dtype);
}

/* ---- software pipelining --------------------------------------------------- */

struct stage_pass {
	const tir_lowered *L;
	const tir_stmt *loop;
	const bool *written;        /* by buffer id: stored to under the loop */
	bool ok;
};

static void stage_load(tir_expr *load, void *ctx)
{
	struct stage_pass *sp = ctx;
	if (sp->written[load->buf->id])
		sp->ok = false;
}

static void stage_block(tir_block *b, void *ctx)
{
	struct stage_pass *sp = ctx;
	const tir_alloc *a = &sp->L->alloc[b->store->id];
	if (b->store->scope != TIR_SCOPE_SHARED || !a->compact || a->lca != sp->loop ||
	    b->reduce != REDUCE_NONE)
		sp->ok = false;
	expr_visit_loads(b->value, stage_load, sp);
	expr_visit_loads(b->predicate, stage_load, sp);
}

static void mark_written(tir_block *b, void *ctx)
{
	((bool *)ctx)[b->store->id] = true;
}

static void mark_load(tir_expr *load, void *ctx)
{
	((bool *)ctx)[load->buf->id] = true;
}

static void mark_read(tir_block *b, void *ctx)
{
	expr_visit_loads(b->value, mark_load, ctx);
	expr_visit_loads(b->init, mark_load, ctx);
	expr_visit_loads(b->predicate, mark_load, ctx);
}

static bool copy_stage(const tir_lowered *L, const tir_stmt *loop, const tir_stmt *child,
		       const bool *written)
{
	if (!lower_has_blocks(child))
		return false;
	struct stage_pass sp = { L, loop, written, true };
	stmt_visit_blocks((tir_stmt *)child, stage_block, &sp);
	if (!sp.ok)
		return false;
	/* its buffers written by no other child, and read by none before it
	 * (which would read the previous iteration's copy) */
	bool *mine = xcalloc((size_t)L->p->nbufs + 1, 1);
	stmt_visit_blocks((tir_stmt *)child, mark_written, mine);
	bool before = true;
	for (int k = 0; k < loop->nkids && sp.ok; k++) {
		if (loop->kids[k] == child) {
			before = false;
			continue;
		}
		bool *other = xcalloc((size_t)L->p->nbufs + 1, 1);
		stmt_visit_blocks(loop->kids[k], mark_written, other);
		if (before)
			stmt_visit_blocks(loop->kids[k], mark_read, other);
		for (int i = 0; i < L->p->nbufs; i++)
			if (mine[i] && other[i])
				sp.ok = false;
		free(other);
	}
	free(mine);
	return sp.ok;
}

int64_t lower_ann(const tir_stmt *l, const char *key, int64_t dflt)
{
	for (int i = 0; i < l->nann; i++)
		if (l->ann[i].key && !strcmp(l->ann[i].key, key))
			return l->ann[i].value;
	return dflt;
}

bool lower_copy_stage(const tir_lowered *L, const tir_stmt *loop, const tir_stmt *child)
{
	bool *written = xcalloc((size_t)L->p->nbufs + 1, 1);
	stmt_visit_blocks((tir_stmt *)loop, mark_written, written);
	bool r = copy_stage(L, loop, child, written);
	free(written);
	return r;
}

int lower_pipeline_stages(const tir_lowered *L, const tir_stmt *loop)
{
	if (loop->kind != STMT_FOR || loop->loop_kind != LOOP_SERIAL)
		return 1;
	int64_t s = lower_ann(loop, "software_pipeline", 1);
	if (s < 2)
		return 1;
	for (int k = 0; k < loop->nkids; k++)
		if (lower_copy_stage(L, loop, loop->kids[k]))
			return (int)(s > 8 ? 8 : s);
	return 1;
}

bool lower_holds_wgmma(const tir_stmt *s)
{
	const tir_intrin *in = intrin_of_loop(s);
	if (in && in->unit == INTRIN_WARPGROUP && in->kind == INTRIN_MMA)
		return true;
	for (int k = 0; k < s->nkids; k++)
		if (lower_holds_wgmma(s->kids[k]))
			return true;
	return false;
}

bool lower_tma_loop(const tir_lowered *L, const tir_stmt *loop)
{
	return lower_ann(loop, "tma", 0) > 0 && lower_pipeline_stages(L, loop) >= 2;
}

const tir_stmt *lower_find_tma(const tir_lowered *L, const tir_stmt *s)
{
	if (s->kind == STMT_FOR && lower_tma_loop(L, s))
		return s;
	for (int k = 0; k < s->nkids; k++) {
		const tir_stmt *t = lower_find_tma(L, s->kids[k]);
		if (t)
			return t;
	}
	return NULL;
}

/* Index e (of block b) as origin + one loop of st[0..nl) with unit stride:
 * *which is that loop (-1: none), *origin the rest.  false when e is not
 * affine or a stage loop enters it otherwise. */
static bool origin_plus_loop(tir_lowered *L, const tir_block *b, tir_expr *e,
			     const tir_stmt *const *st, int nl, int *which, tir_expr **origin)
{
	/* loops of one iteration are 0 */
	tir_subst z = { L->p->nvars, xcalloc((size_t)L->p->nvars + 1, sizeof(tir_expr *)) };
	for (int k = 0; k < nl; k++)
		if (st[k]->extent == 1)
			z.map[st[k]->var->id] = mk_int(&L->arena, 0);
	tir_affine f;
	bool ok = affine_of(lower_simplify(L, expr_subst(&L->arena, lower_bind(L, b, e), &z)), &f);
	free(z.map);
	if (!ok)
		return false;
	*which = -1;
	int at = -1;
	for (int t = 0; t < f.nterms; t++)
		for (int k = 0; k < nl; k++) {
			bool here = f.var[t] ? f.var[t] == st[k]->var
				  : expr_uses_var(f.opaque[t], st[k]->var);
			if (!here)
				continue;
			if (!f.var[t] || f.coef[t] != 1 || *which >= 0)
				return false;
			*which = k;
			at = t;
		}
	if (at >= 0)
		f.coef[at] = 0;
	*origin = lower_simplify(L, affine_to_expr(&L->arena, &f));
	return true;
}

int lower_tma_stage(tir_lowered *L, const tir_stmt *loop, const tir_stmt *child,
		    lower_tma_copy *out, tir_error *err)
{
	/* the chain of loops down to the block */
	const tir_stmt *st[TIR_MAX_ITERS + 1];
	int nl = 0;
	const tir_stmt *s = child;
	while (s->kind == STMT_FOR && nl < TIR_MAX_ITERS) {
		if (s->loop_kind != LOOP_SERIAL && s->loop_kind != LOOP_UNROLLED)
			return tir_fail(err, "tma: loop \"%s\" of the copy into a pipeline "
					"stage is %s, not serial", s->var->name,
					loop_kind_name(s->loop_kind));
		st[nl++] = s;
		if (s->nkids != 1)
			return tir_fail(err, "tma: loop \"%s\" of a pipeline stage holds %d "
					"statements, not one nest", s->var->name, s->nkids);
		s = s->kids[0];
	}
	if (s->kind != STMT_BLOCK)
		return tir_fail(err, "tma: a pipeline stage of loop \"%s\" is not one loop "
				"nest over one block", loop->var->name);
	const tir_block *b = s->block;
	const tir_expr *v = b->value;
	if (b->reduce != REDUCE_NONE || b->predicate || v->kind != E_LOAD ||
	    v->buf->dtype != b->store->dtype)
		return tir_fail(err, "tma: block \"%s\" is not a plain copy (no predicate, "
				"no conversion)", b->name);
	const tir_buffer *dst = b->store, *src = v->buf;
	const tir_alloc *ad = &L->alloc[dst->id], *as = &L->alloc[src->id];
	if (src->scope != TIR_SCOPE_GLOBAL || as->compact)
		return tir_fail(err, "tma: block \"%s\" copies from \"%s\", not a buffer "
				"the kernel takes", b->name, src->name);
	if (src->ndim > TIR_TMAP_RANK)
		return tir_fail(err, "tma: \"%s\" has %d dimensions, at most %d", src->name,
				src->ndim, TIR_TMAP_RANK);
	/* the copy engine's view of src: its innermost dimension contiguous,
	 * the others 16-byte multiples apart */
	for (int d = 0; d < src->ndim; d++) {
		int64_t bytes = as->stride[d] * dtype_bytes(src->dtype);
		if (d == src->ndim - 1 ? as->stride[d] != 1 : bytes % 16 != 0)
			return tir_fail(err, "tma: \"%s\" has a stride of %lld bytes along "
					"dimension %d (the copy engine needs %s)", src->name,
					(long long)bytes, d, d == src->ndim - 1 ? "contiguous rows" :
					"multiples of 16");
	}
	out->dst = dst;
	out->src = src;
	/* the stage loops in the order of dst's dimensions, each covering one
	 * whole dimension of dst's allocation, which starts at the box */
	int dorder[TIR_MAX_DIMS], nd = 0;
	tir_expr *dorig[TIR_MAX_DIMS];
	bool used[TIR_MAX_ITERS + 1] = { false };
	for (int d = 0; d < dst->ndim; d++) {
		int k;
		if (!origin_plus_loop(L, b, b->store_idx[d], st, nl, &k, &dorig[d]))
			return tir_fail(err, "tma: index %d of \"%s\" in block \"%s\" is not an "
					"origin plus one loop of the stage", d, dst->name, b->name);
		int64_t ext = k >= 0 ? st[k]->extent : 1;
		if (ext != ad->extent[d])
			return tir_fail(err, "tma: the stage covers %lld of the %lld elements of "
					"\"%s\" along dimension %d", (long long)ext,
					(long long)ad->extent[d], dst->name, d);
		if (k >= 0 && ext > 1) {
			if (used[k])
				return tir_fail(err, "tma: loop \"%s\" indexes two dimensions of \"%s\"",
						st[k]->var->name, dst->name);
			used[k] = true;
			dorder[nd++] = k;
		}
	}
	for (int k = 0; k < nl; k++)
		if (!used[k] && st[k]->extent > 1)
			return tir_fail(err, "tma: loop \"%s\" of the stage indexes no dimension "
					"of \"%s\"", st[k]->var->name, dst->name);
	int64_t stride = 1;
	for (int d = dst->ndim - 1; d >= 0; d--) {
		if (ad->extent[d] > 1 && ad->stride[d] != stride)
			return tir_fail(err, "tma: \"%s\" is padded (storage_align)", dst->name);
		stride *= ad->extent[d];
	}
	tir_expr *off = lower_offset(L, dst, dst->ndim, dorig);
	if (off->kind != E_INT || off->ival != 0)
		return tir_fail(err, "tma: the box of block \"%s\" does not start at the "
				"first element of \"%s\"", b->name, dst->name);
	/* src: a box, the same loops in the same order (the box's elements
	 * land in dst's row-major order), its innermost dimension dst's */
	int so = 0, last = -1;
	for (int d = 0; d < src->ndim; d++) {
		int k;
		if (!origin_plus_loop(L, b, v->idx[d], st, nl, &k, &out->origin[d]))
			return tir_fail(err, "tma: index %d of \"%s\" in block \"%s\" is not an "
					"origin plus one loop of the stage (a gather, not a box)", d,
					src->name, b->name);
		out->ext[d] = k >= 0 ? st[k]->extent : 1;
		if (out->ext[d] > 1) {
			if (so >= nd || dorder[so] != k)
				return tir_fail(err, "tma: block \"%s\" reorders the dimensions of "
						"\"%s\" into \"%s\"", b->name, src->name, dst->name);
			so++;
			last = d;
		}
	}
	if (so != nd || last != src->ndim - 1 || ad->extent[dst->ndim - 1] != out->ext[last])
		return tir_fail(err, "tma: block \"%s\" does not copy rows of \"%s\" into rows "
				"of \"%s\"", b->name, src->name, dst->name);
	return 0;
}

/* Gives the buffers of the copy stages of every pipelined loop their ring:
 * S copies, one more where warpgroup MMAs read them (lower_holds_wgmma)
 * unless mbarriers hand the copies over (lower_tma_loop). */
static void rings(tir_lowered *L, const tir_stmt *s)
{
	for (int k = 0; k < s->nkids; k++)
		rings(L, s->kids[k]);
	int S = lower_pipeline_stages(L, s);
	if (S < 2)
		return;
	int copies = S + (lower_holds_wgmma(s) && !lower_tma_loop(L, s) ? 1 : 0);
	bool *written = xcalloc((size_t)L->p->nbufs + 1, 1);
	stmt_visit_blocks((tir_stmt *)s, mark_written, written);
	for (int k = 0; k < s->nkids; k++) {
		if (!copy_stage(L, s, s->kids[k], written))
			continue;
		bool *mine = xcalloc((size_t)L->p->nbufs + 1, 1);
		stmt_visit_blocks(s->kids[k], mark_written, mine);
		for (int i = 0; i < L->p->nbufs; i++) {
			tir_alloc *a = &L->alloc[i];
			if (!mine[i] || a->ring > 1)
				continue;
			int64_t eb = dtype_bytes(a->buf->dtype);
			a->ring = copies;
			a->slot = (a->elems * eb + 127) / 128 * 128 / eb;
			a->bytes = a->slot * eb * copies;
		}
		free(mine);
	}
	free(written);
}

static void ranges_of(const tir_stmt *s, tir_env *env)
{
	if (s->kind == STMT_FOR)
		env_set(env, s->var, 0, s->extent - 1);
	if (s->kind == STMT_BLOCK) {
		const tir_block *b = s->block;
		for (int i = 0; i < b->niters; i++)
			env_set(env, b->iters[i].var, 0, b->iters[i].extent - 1);
	}
	for (int i = 0; i < s->nkids; i++)
		ranges_of(s->kids[i], env);
}

int lower_program(const tir_program *p, const tir_target *t, tir_lowered *out,
		  tir_error *err)
{
	memset(out, 0, sizeof *out);
	out->p = p;
	out->t = t;
	out->alloc = xcalloc((size_t)p->nbufs + 1, sizeof(tir_alloc));
	out->env = env_new(p->nvars);
	ranges_of(p->root, &out->env);

	const tir_stmt **lca = xcalloc((size_t)p->nbufs + 1, sizeof *lca);
	for (int i = 0; i < p->nbufs; i++)
		out->alloc[i].buf = p->bufs[i];
	struct lca_pass lp = { out, lca };
	stmt_visit_blocks(p->root, lca_block, &lp);

	for (int i = 0; i < p->nbufs; i++) {
		tir_alloc *a = &out->alloc[i];
		const tir_buffer *b = a->buf;
		if (b->id != i) {
			free(lca);
			lower_free(out);
			return tir_fail(err, "lower: buffer \"%s\" has id %d at position %d",
					b->name, b->id, i);
		}
		bool param = i < p->nparams;
		a->compact = !param && b->scope != TIR_SCOPE_GLOBAL && a->used;
		if (a->compact) {
			compact(out, a, lca[i]);
		} else {
			for (int d = 0; d < b->ndim; d++)
				a->extent[d] = b->shape[d];
		}
		strides(a, !param);
	}
	free(lca);
	rings(out, p->root);
	return 0;
}

void lower_free(tir_lowered *L)
{
	arena_free(&L->arena);
	free(L->alloc);
	env_free(&L->env);
	L->alloc = NULL;
}

/* floordiv(x, c) * (k*c) + floormod(x, c) * k == x * k: the identity that
 * undoes a fuse-then-split of an index (cooperative fetches) and that
 * analysis.c's affine forms do not see.  Applied to a whole affine form until
 * no pair is left. */
static tir_expr *merge_divmod(tir_arena *ar, tir_expr *e)
{
	tir_affine f;
	if (!affine_of(e, &f))
		return e;
	bool changed = false;
	bool again = true;
	while (again) {
		again = false;
		for (int i = 0; i < f.nterms && !again; i++) {
			const tir_expr *d = f.opaque[i];
			if (f.var[i] || d->kind != E_FLOORDIV || d->b->kind != E_INT || d->b->ival <= 0)
				continue;
			int64_t c = d->b->ival;
			for (int j = 0; j < f.nterms; j++) {
				const tir_expr *m = f.opaque[j];
				if (f.var[j] || m->kind != E_FLOORMOD || !expr_equal(m->a, d->a) ||
				    !expr_equal(m->b, d->b) || f.coef[i] != f.coef[j] * c)
					continue;
				tir_affine x;
				if (!affine_of(d->a, &x))
					continue;
				int64_t k = f.coef[j];
				tir_expr *rest;
				/* drop terms i and j, add k * x */
				tir_affine g = f;
				g.nterms = 0;
				for (int t = 0; t < f.nterms; t++)
					if (t != i && t != j) {
						g.coef[g.nterms] = f.coef[t];
						g.var[g.nterms] = f.var[t];
						g.opaque[g.nterms] = f.opaque[t];
						g.nterms++;
					}
				rest = mk_add(ar, affine_to_expr(ar, &g),
					      mk_mul(ar, d->a, mk_int(ar, k)));
				if (!affine_of(rest, &f))
					return e;
				changed = again = true;
				break;
			}
		}
	}
	return changed ? affine_to_expr(ar, &f) : e;
}

tir_expr *lower_simplify(tir_lowered *L, tir_expr *e)
{
	e = expr_simplify(&L->arena, e, &L->env);
	if (e->dtype == TIR_I64)
		e = merge_divmod(&L->arena, e);
	return e;
}

tir_expr *lower_offset(tir_lowered *L, const tir_buffer *buf, int n,
		       tir_expr *const *idx)
{
	tir_arena *ar = &L->arena;
	const tir_alloc *a = &L->alloc[buf->id];
	tir_expr *off = mk_int(ar, 0);
	for (int d = 0; d < n && d < buf->ndim; d++) {
		tir_expr *i = idx[d];
		if (a->compact) {
			if (a->base[d])
				i = mk_sub(ar, i, a->base[d]);
			i = mk_sub(ar, i, mk_int(ar, a->lo[d]));
		}
		off = mk_add(ar, off, mk_mul(ar, i, mk_int(ar, a->stride[d])));
	}
	return lower_simplify(L, off);
}

/* ---- tir_codegen ------------------------------------------------------------- */

static const tir_codegen_backend *const backends[] = {
	[TIR_TARGET_CPU] = &tir_codegen_c,
	[TIR_TARGET_CUDA] = &tir_codegen_cuda,
};

/* -1 with a message where a tensorized loop under s names an intrinsic
 * target t cannot run (intrin_check_target): a CUDA one on a CPU, sdot on
 * a key without +dotprod. */
static int refuse_intrinsics(const tir_stmt *s, const tir_target *t, tir_error *err)
{
	const tir_intrin *in = intrin_of_loop(s);
	if (in && intrin_check_target(in, t, "codegen", s->var->name, err))
		return -1;
	for (int i = 0; i < s->nkids; i++)
		if (refuse_intrinsics(s->kids[i], t, err))
			return -1;
	return 0;
}

tir_code *tir_codegen(const tir_program *p, const tir_target *t, tir_error *err)
{
	if (!p || !t) {
		tir_fail(err, "codegen: no program or no target");
		return NULL;
	}
	if ((unsigned)t->kind >= sizeof backends / sizeof backends[0] || !backends[t->kind]) {
		tir_fail(err, "codegen: no code generator for target \"%s\"", t->key);
		return NULL;
	}
	if (refuse_intrinsics(p->root, t, err))
		return NULL;
	return backends[t->kind]->generate(p, t, err);
}

void tir_code_free(tir_code *c)
{
	if (!c)
		return;
	free(c->source);
	free(c->args);
	free(c->launches);
	free(c);
}
