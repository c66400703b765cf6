/*
 * verify.c — tir_verify and what its three checks share: the context (a
 * scratch arena, the loop of each variable, the blocks in program order),
 * statement helpers, access intervals under a loop, and printing of
 * expressions and regions for messages.
 *
 * The search generates programs by the thousand and the verifier is what
 * keeps illegal ones from being measured, so every check is sound in the
 * direction that matters: when it cannot decide, it rejects, except where a
 * function's contract says otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "verify.h"

static void index_loops(vfy_ctx *c, tir_stmt *s)
{
	if (s->kind == STMT_FOR && s->var && s->var->id < c->p->nvars)
		c->loop_of[s->var->id] = s;
	for (int i = 0; i < s->nkids; i++)
		index_loops(c, s->kids[i]);
}

void vfy_init(vfy_ctx *c, const tir_program *p, const tir_target *t)
{
	memset(c, 0, sizeof *c);
	c->p = p;
	c->t = t;
	c->loop_of = arena_alloc(&c->arena, sizeof(tir_stmt *) * (size_t)(p->nvars + 1));
	index_loops(c, p->root);
	c->nblocks = stmt_blocks(p->root, NULL, 0);
	c->blocks = arena_alloc(&c->arena, sizeof(tir_block *) * (size_t)(c->nblocks + 1));
	stmt_blocks(p->root, c->blocks, c->nblocks);
}

void vfy_free(vfy_ctx *c)
{
	arena_free(&c->arena);
}

int vfy_order(const vfy_ctx *c, const tir_block *b)
{
	for (int i = 0; i < c->nblocks; i++)
		if (c->blocks[i] == b)
			return i;
	return -1;
}

tir_stmt *vfy_lca(tir_stmt *a, tir_stmt *b)
{
	for (tir_stmt *x = a->parent; x; x = x->parent)
		if (x == b->parent || stmt_is_ancestor(x, b))
			return x;
	return a->p->root;
}

tir_stmt *vfy_kernel_of(tir_stmt *s)
{
	while (s->parent && s->parent->parent)
		s = s->parent;
	return s;
}

const char *vfy_stmt_name(vfy_ctx *c, const tir_stmt *s)
{
	if (s->kind == STMT_FOR)
		return arena_printf(&c->arena, "loop %s", s->var->name);
	if (s->kind == STMT_BLOCK)
		return arena_printf(&c->arena, "block \"%s\"", s->block->name);
	return "root";
}

/* ---- printing ---------------------------------------------------------------- */

static int prec(const tir_expr *e)
{
	switch (e->kind) {
	case E_OR: return 1;
	case E_AND: return 2;
	case E_LT: case E_LE: case E_EQ: case E_NE: return 3;
	case E_ADD: case E_SUB: return 4;
	case E_MUL: case E_DIV: case E_FLOORDIV: case E_FLOORMOD: return 5;
	default: return 9;
	}
}

static void put_expr(tir_buf *o, const tir_expr *e, int outer)
{
	if (!e) {
		buf_puts(o, "true");
		return;
	}
	int p = prec(e);
	switch (e->kind) {
	case E_INT: buf_printf(o, "%lld", (long long)e->ival); return;
	case E_FLOAT: buf_printf(o, "%g", e->fval); return;
	case E_VAR: buf_puts(o, e->var->name); return;
	case E_LOAD:
		buf_printf(o, "%s[", e->buf->name);
		for (int i = 0; i < e->nidx; i++) {
			if (i)
				buf_puts(o, ", ");
			put_expr(o, e->idx[i], 0);
		}
		buf_puts(o, "]");
		return;
	case E_MIN: case E_MAX: case E_SELECT: case E_CAST: case E_CALL: case E_NOT:
		if (e->kind == E_CAST)
			buf_printf(o, "%s(", dtype_name(e->dtype));
		else if (e->kind == E_CALL)
			buf_printf(o, "%s(", mathfn_name(e->fn));
		else
			buf_printf(o, "%s(", expr_kind_name(e->kind));
		if (e->kind == E_SELECT) {
			put_expr(o, e->c, 0);
			buf_puts(o, ", ");
		}
		put_expr(o, e->a, 0);
		if (e->b) {
			buf_puts(o, ", ");
			put_expr(o, e->b, 0);
		}
		buf_puts(o, ")");
		return;
	default:
		break;
	}
	if (p < outer)
		buf_puts(o, "(");
	put_expr(o, e->a, p);
	buf_printf(o, " %s ", expr_kind_name(e->kind));
	put_expr(o, e->b, p + 1);
	if (p < outer)
		buf_puts(o, ")");
}

const char *vfy_expr_str(vfy_ctx *c, const tir_expr *e)
{
	tir_buf o = { 0 };
	put_expr(&o, e, 0);
	char *s = buf_take(&o);
	const char *r = arena_strdup(&c->arena, s);
	free(s);
	return r;
}

const char *vfy_region_str(vfy_ctx *c, const tir_buffer *buf, int n,
			   const tir_interval *iv)
{
	tir_buf o = { 0 };
	buf_printf(&o, "%s[", buf->name);
	for (int d = 0; d < n; d++) {
		if (d)
			buf_puts(&o, ", ");
		if (iv[d].full) {
			buf_puts(&o, ":");
		} else if (!iv[d].base) {
			buf_printf(&o, "%lld:%lld", (long long)iv[d].lo,
				   (long long)iv[d].hi + 1);
		} else {
			const char *b = vfy_expr_str(c, iv[d].base);
			buf_printf(&o, "%s%+lld:%s%+lld", b, (long long)iv[d].lo, b,
				   (long long)iv[d].hi + 1);
		}
	}
	buf_puts(&o, "]");
	char *s = buf_take(&o);
	const char *r = arena_strdup(&c->arena, s);
	free(s);
	return r;
}

/* ---- access intervals ---------------------------------------------------------- */

tir_expr *vfy_in_loops(vfy_ctx *c, const tir_block *b, const tir_expr *e)
{
	tir_subst s = { c->p->nvars, arena_alloc(&c->arena, sizeof(tir_expr *) *
						 (size_t)(c->p->nvars + 1)) };
	for (int i = 0; i < b->niters; i++)
		if (b->iters[i].var->id < s.n)
			s.map[b->iters[i].var->id] = b->iters[i].binding;
	return expr_subst(&c->arena, (tir_expr *)e, &s);
}

static bool is_thread_idx(tir_thread_tag t)
{
	return t == TIR_THREAD_X || t == TIR_THREAD_Y || t == TIR_THREAD_Z;
}

static bool is_vthread(tir_thread_tag t)
{
	return t == TIR_VTHREAD_X || t == TIR_VTHREAD_Y || t == TIR_VTHREAD_Z;
}

tir_interval vfy_interval(vfy_ctx *c, const tir_block *b, const tir_expr *e,
			  tir_stmt *at, bool relax_threads, bool relax_vthreads)
{
	tir_stmt *loops[VFY_MAX_DEPTH];
	int n = stmt_loops(b->stmt, loops, VFY_MAX_DEPTH);
	if (n > VFY_MAX_DEPTH)
		n = VFY_MAX_DEPTH;
	tir_env all = env_new(c->p->nvars), env = env_new(c->p->nvars);
	for (int i = 0; i < n; i++) {
		tir_stmt *l = loops[i];
		/* a loop of extent 1 is the constant 0 wherever it stands */
		bool ranged = at->kind == STMT_SEQ || stmt_is_ancestor(at, l) ||
			      l->extent == 1;
		if (!ranged && l->loop_kind == LOOP_THREAD)
			ranged = (relax_threads && (is_thread_idx(l->tag) || is_vthread(l->tag))) ||
				 (relax_vthreads && is_vthread(l->tag));
		env_set(&all, l->var, 0, l->extent - 1);
		if (ranged)
			env_set(&env, l->var, 0, l->extent - 1);
	}
	tir_expr *x = expr_simplify(&c->arena, vfy_in_loops(c, b, e), &all);
	tir_interval iv = interval_of(&c->arena, x, &env);
	if (!iv.full && !iv.base) {
		/* only instances with iterators in their domains execute */
		tir_env dom = env_new(c->p->nvars);
		int64_t lo, hi;
		for (int i = 0; i < b->niters; i++)
			env_set(&dom, b->iters[i].var, 0, b->iters[i].extent - 1);
		if (expr_bounds(e, &dom, &lo, &hi)) {
			if (lo > iv.lo)
				iv.lo = lo;
			if (hi < iv.hi)
				iv.hi = hi;
		}
		env_free(&dom);
	}
	env_free(&all);
	env_free(&env);
	return iv;
}

/* ---- the entry point ----------------------------------------------------------- */

int tir_verify(const tir_program *p, const tir_target *t, tir_error *err)
{
	if (!p || !t)
		return tir_fail(err, "verify: no program or no target");
	vfy_ctx c;
	vfy_init(&c, p, t);
	int rc = verify_loopnest(&c, err);
	if (rc == 0)
		rc = verify_producer(&c, err);
	if (rc == 0)
		rc = verify_threading(&c, err);
	if (rc == 0)
		rc = verify_tensor(&c, err);
	vfy_free(&c);
	return rc;
}
