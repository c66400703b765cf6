/*
 * loopnest.c — loop-nest validation: does each block's signature agree with
 * the loops around it?
 *
 * For every live block, in program order, and its enclosing loops L:
 *  1. every binding is quasi-affine in the variables of L (+, -, * by a
 *     constant, floordiv / floormod by a positive constant); the predicate
 *     uses only variables of L;
 *  2. the iterators are independent: no loop variable is used directly
 *     (additively, outside floordiv / floormod) by two iterators — TensorIR's
 *     "i and i*2" — and no loop feeds both a spatial and a reduction
 *     iterator;
 *  3. each binding covers its iterator's domain [0, extent) over L (for a
 *     block writing an intermediate buffer only its reduction iterators
 *     must: see must_cover), and may exceed it only when a predicate guards
 *     the block; the loops the bindings use have at least as many points as
 *     the domain they must cover;
 *  4. a reduction iterator is not bound to a parallel or vectorized loop;
 *  5. the body (store index, value, init) uses only the block's iterators,
 *     and every access outside a select stays inside its buffer for the
 *     iterator values the bindings reach.
 * Every loop has an extent of at least 1.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "verify.h"

typedef struct nest {
	vfy_ctx *c;
	const tir_block *b;
	tir_stmt *loops[VFY_MAX_DEPTH];
	int n;
	tir_env loop_env;          /* the loops of L ranged over their extents */
	tir_env iter_env;          /* iterators over domain ∩ binding range */
} nest;

static int fail(nest *x, tir_error *err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(nest *x, tir_error *err, const char *fmt, ...)
{
	char rule[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rule, sizeof rule, fmt, ap);
	va_end(ap);
	return tir_fail(err, "loop-nest: block \"%s\": %s", x->b->name, rule);
}

static int loop_index(const nest *x, const tir_var *v)
{
	for (int i = 0; i < x->n; i++)
		if (x->loops[i]->var == v)
			return i;
	return -1;
}

/* Checks that every variable of e is a variable of an enclosing loop.
 * `what` names the expression for the message. */
static int loop_vars_only(nest *x, const tir_expr *e, const char *what,
			  tir_error *err)
{
	if (!e)
		return 0;
	if (e->kind == E_VAR) {
		if (loop_index(x, e->var) >= 0)
			return 0;
		if (e->var->id < x->c->p->nvars && x->c->loop_of[e->var->id])
			return fail(x, err, "%s uses loop %s that does not enclose the block",
				    what, e->var->name);
		if (block_iter_of(x->b, e->var) >= 0)
			return fail(x, err, "%s uses iterator %s instead of loop variables",
				    what, e->var->name);
		return fail(x, err, "%s uses %s, which is not a loop variable",
			    what, e->var->name);
	}
	if (loop_vars_only(x, e->a, what, err) || loop_vars_only(x, e->b, what, err) ||
	    loop_vars_only(x, e->c, what, err))
		return -1;
	for (int i = 0; i < e->nidx; i++)
		if (loop_vars_only(x, e->idx[i], what, err))
			return -1;
	return 0;
}

static bool quasi_affine(const tir_expr *e)
{
	switch (e->kind) {
	case E_INT: case E_VAR:
		return e->dtype == TIR_I64 || e->dtype == TIR_I32;
	case E_ADD: case E_SUB:
		return quasi_affine(e->a) && quasi_affine(e->b);
	case E_MUL:
		return (e->b->kind == E_INT && quasi_affine(e->a)) ||
		       (e->a->kind == E_INT && quasi_affine(e->b));
	case E_FLOORDIV: case E_FLOORMOD:
		return e->b->kind == E_INT && e->b->ival > 0 && quasi_affine(e->a);
	default:
		return false;
	}
}

/* Marks the loops e uses: direct[i] for additive uses, any[i] for all. */
static void loop_uses(const nest *x, const tir_expr *e, bool under_div,
		      bool *direct, bool *any)
{
	if (!e)
		return;
	if (e->kind == E_VAR) {
		int i = loop_index(x, e->var);
		if (i >= 0) {
			any[i] = true;
			if (!under_div)
				direct[i] = true;
		}
		return;
	}
	bool div = under_div || e->kind == E_FLOORDIV || e->kind == E_FLOORMOD;
	loop_uses(x, e->a, div, direct, any);
	loop_uses(x, e->b, div, direct, any);
	loop_uses(x, e->c, div, direct, any);
}

static int check_bindings(nest *x, tir_error *err)
{
	const tir_block *b = x->b;
	vfy_ctx *c = x->c;
	for (int k = 0; k < b->niters; k++) {
		const tir_iter *it = &b->iters[k];
		const char *what = arena_printf(&c->arena, "binding of %s", it->var->name);
		if (!it->binding)
			return fail(x, err, "iterator %s has no binding", it->var->name);
		if (it->extent < 1)
			return fail(x, err, "iterator %s has an empty domain (extent %s)",
				    it->var->name,
				    arena_printf(&c->arena, "%lld", (long long)it->extent));
		if (loop_vars_only(x, it->binding, what, err))
			return -1;
		if (!quasi_affine(it->binding))
			return fail(x, err, "binding %s = %s is not quasi-affine (+, -, * by a "
				    "constant, floordiv/floormod by a positive constant of loop variables)",
				    it->var->name, vfy_expr_str(c, it->binding));
	}
	return loop_vars_only(x, b->predicate, "the predicate", err);
}

/* Rule 2: independence of iterators. */
static int check_independent(nest *x, tir_error *err)
{
	const tir_block *b = x->b;
	int direct_user[VFY_MAX_DEPTH], spatial_user[VFY_MAX_DEPTH], reduce_user[VFY_MAX_DEPTH];
	for (int i = 0; i < x->n; i++)
		direct_user[i] = spatial_user[i] = reduce_user[i] = -1;
	for (int k = 0; k < b->niters; k++) {
		const tir_iter *it = &b->iters[k];
		bool direct[VFY_MAX_DEPTH] = { 0 }, any[VFY_MAX_DEPTH] = { 0 };
		loop_uses(x, it->binding, false, direct, any);
		for (int i = 0; i < x->n; i++) {
			const char *lv = x->loops[i]->var->name;
			if (direct[i]) {
				if (direct_user[i] >= 0) {
					const tir_iter *o = &b->iters[direct_user[i]];
					return fail(x, err, "iterators %s and %s both use loop %s directly: "
						    "the iterators are not independent",
						    arena_printf(&x->c->arena, "%s = %s", o->var->name,
								 vfy_expr_str(x->c, o->binding)),
						    arena_printf(&x->c->arena, "%s = %s", it->var->name,
								 vfy_expr_str(x->c, it->binding)),
						    lv);
				}
				direct_user[i] = k;
			}
			if (!any[i])
				continue;
			int *mine = it->kind == ITER_REDUCE ? reduce_user : spatial_user;
			int *other = it->kind == ITER_REDUCE ? spatial_user : reduce_user;
			mine[i] = k;
			if (other[i] >= 0) {
				const tir_iter *s = &b->iters[spatial_user[i]];
				const tir_iter *r = &b->iters[reduce_user[i]];
				return fail(x, err, "loop %s feeds both spatial iterator %s and "
					    "reduction iterator %s", lv, s->var->name, r->var->name);
			}
		}
		/* two iterators with one and the same non-constant binding */
		for (int j = 0; j < k; j++)
			if (it->binding->kind != E_INT &&
			    expr_equal(it->binding, b->iters[j].binding))
				return fail(x, err, "iterators %s and %s have the same binding %s: "
					    "the iterators are not independent",
					    b->iters[j].var->name, it->var->name,
					    vfy_expr_str(x->c, it->binding));
	}
	return 0;
}

/* Whether an iterator must reach its whole domain.  A reduction always
 * does (else a partial sum), and so does every iterator of a block that
 * writes a param.  A block writing an intermediate buffer may compute only
 * part of it — compute_at leaves a producer exactly what its consumers read
 * in one iteration — and producer.c checks that the part read is written. */
static bool must_cover(const tir_block *b, const tir_iter *it)
{
	return it->kind == ITER_REDUCE || b->store->role != BUF_TEMP;
}

/* Rules 3 and 4: domain cover, and reductions off parallel loops. */
static int check_domains(nest *x, tir_error *err)
{
	const tir_block *b = x->b;
	vfy_ctx *c = x->c;
	bool used[VFY_MAX_DEPTH] = { 0 };
	int kind[VFY_MAX_DEPTH] = { 0 };
	double points[2] = { 1, 1 }, domain[2] = { 1, 1 };
	for (int k = 0; k < b->niters; k++) {
		const tir_iter *it = &b->iters[k];
		int64_t lo, hi;
		const char *dom = arena_printf(&c->arena, "[0, %lld)", (long long)it->extent);
		if (!expr_bounds(it->binding, &x->loop_env, &lo, &hi))
			return fail(x, err, "binding %s = %s cannot be bounded", it->var->name,
				    vfy_expr_str(c, it->binding));
		const char *range = arena_printf(&c->arena, "%s = %s spans [%lld, %lld]",
						 it->var->name, vfy_expr_str(c, it->binding),
						 (long long)lo, (long long)hi);
		if ((lo > 0 || hi < it->extent - 1) && must_cover(b, it))
			return fail(x, err, "iterator %s does not cover its domain %s",
				    range, dom);
		if ((lo < 0 || hi > it->extent - 1) && !b->predicate)
			return fail(x, err, "iterator %s: binding exceeds domain %s and no "
				    "predicate guards the block", range, dom);
		env_set(&x->iter_env, it->var, lo > 0 ? lo : 0,
			hi < it->extent - 1 ? hi : it->extent - 1);
		if (must_cover(b, it))
			domain[it->kind == ITER_REDUCE] *= (double)it->extent;

		bool direct[VFY_MAX_DEPTH] = { 0 }, any[VFY_MAX_DEPTH] = { 0 };
		loop_uses(x, it->binding, false, direct, any);
		for (int i = 0; i < x->n; i++) {
			if (!any[i])
				continue;
			used[i] = true;
			kind[i] = it->kind == ITER_REDUCE;
			tir_stmt *l = x->loops[i];
			if (it->kind == ITER_REDUCE &&
			    (l->loop_kind == LOOP_PARALLEL || l->loop_kind == LOOP_VECTORIZED))
				return fail(x, err, "reduction iterator %s bound to %s loop %s",
					    it->var->name,
					    l->loop_kind == LOOP_PARALLEL ? "parallel" : "vectorized",
					    l->var->name);
		}
	}
	for (int i = 0; i < x->n; i++)
		if (used[i])
			points[kind[i]] *= (double)x->loops[i]->extent;
	for (int r = 0; r < 2; r++)
		if (points[r] < domain[r])
			return fail(x, err, "the %s iterators do not cover their domain: the "
				    "loops they are bound to have %.0f points, the domain %.0f",
				    r ? "reduction" : "spatial", points[r], domain[r]);
	return 0;
}

/* Rule 5a: the body refers to the block's iterators only. */
static int iter_vars_only(nest *x, const tir_expr *e, const char *what, tir_error *err)
{
	if (!e)
		return 0;
	if (e->kind == E_VAR) {
		if (block_iter_of(x->b, e->var) >= 0)
			return 0;
		return fail(x, err, "%s uses %s, which is not one of the block's iterators",
			    what, e->var->name);
	}
	if (iter_vars_only(x, e->a, what, err) || iter_vars_only(x, e->b, what, err) ||
	    iter_vars_only(x, e->c, what, err))
		return -1;
	for (int i = 0; i < e->nidx; i++)
		if (iter_vars_only(x, e->idx[i], what, err))
			return -1;
	return 0;
}

/* Rule 5b: one access inside its buffer. */
static int access_in_bounds(nest *x, const tir_buffer *buf, int n,
			    tir_expr *const *idx, bool write, tir_error *err)
{
	vfy_ctx *c = x->c;
	const char *verb = write ? "writes" : "reads";
	if (buf->dead)
		return fail(x, err, "%s buffer %s, which was inlined away", verb,
			    buf->name);
	if (n != buf->ndim)
		return fail(x, err, "%s %s with %s indices", verb, buf->name,
			    arena_printf(&c->arena, "%d (it has %d dimensions)", n, buf->ndim));
	for (int d = 0; d < n; d++) {
		int64_t lo, hi;
		if (!expr_bounds(idx[d], &x->iter_env, &lo, &hi))
			continue;   /* not decidable here */
		if (lo >= 0 && hi < buf->shape[d])
			continue;
		return fail(x, err, "%s %s out of bounds: %s",
			    verb, buf->name,
			    arena_printf(&c->arena, "index %s of dimension %d spans [%lld, %lld], "
					 "the buffer's extent is %lld",
					 vfy_expr_str(c, idx[d]), d, (long long)lo,
					 (long long)hi, (long long)buf->shape[d]));
	}
	return 0;
}

static int loads_in_bounds(nest *x, const tir_expr *e, tir_error *err)
{
	if (!e || e->kind == E_SELECT)
		return 0;   /* a select guards its loads; not decided here */
	if (e->kind == E_LOAD) {
		for (int i = 0; i < e->nidx; i++)
			if (loads_in_bounds(x, e->idx[i], err))
				return -1;
		return access_in_bounds(x, e->buf, e->nidx, e->idx, false, err);
	}
	if (loads_in_bounds(x, e->a, err) || loads_in_bounds(x, e->b, err))
		return -1;
	return loads_in_bounds(x, e->c, err);
}

static int check_body(nest *x, tir_error *err)
{
	const tir_block *b = x->b;
	for (int d = 0; d < b->store->ndim; d++) {
		if (!b->store_idx[d])
			return fail(x, err, "store index %s of %s is missing",
				    arena_printf(&x->c->arena, "%d", d), b->store->name);
		if (iter_vars_only(x, b->store_idx[d], "the store index", err))
			return -1;
	}
	if (iter_vars_only(x, b->value, "the value", err) ||
	    iter_vars_only(x, b->init, "the init", err))
		return -1;
	if (access_in_bounds(x, b->store, b->store->ndim, b->store_idx, true, err))
		return -1;
	return loads_in_bounds(x, b->value, err) || loads_in_bounds(x, b->init, err) ? -1 : 0;
}

static int check_block(vfy_ctx *c, const tir_block *b, tir_error *err)
{
	nest x = { .c = c, .b = b };
	x.n = stmt_loops(b->stmt, x.loops, VFY_MAX_DEPTH);
	if (x.n > VFY_MAX_DEPTH)
		return tir_fail(err, "loop-nest: block \"%s\" is nested in %d loops, more "
				"than %d", b->name, x.n, VFY_MAX_DEPTH);
	x.loop_env = env_new(c->p->nvars);
	x.iter_env = env_new(c->p->nvars);
	for (int i = 0; i < x.n; i++)
		env_set(&x.loop_env, x.loops[i]->var, 0, x.loops[i]->extent - 1);
	int rc = 0;
	if (!b->store || !b->value)
		rc = fail(&x, err, "the block has no %s", !b->store ? "store" : "value");
	if (!rc)
		rc = check_bindings(&x, err);
	if (!rc)
		rc = check_independent(&x, err);
	if (!rc)
		rc = check_domains(&x, err);
	if (!rc)
		rc = check_body(&x, err);
	env_free(&x.loop_env);
	env_free(&x.iter_env);
	return rc;
}

static int check_loops(const tir_stmt *s, tir_error *err)
{
	if (s->kind == STMT_FOR && s->extent < 1)
		return tir_fail(err, "loop-nest: loop %s has extent %lld; loop extents "
				"must be at least 1", s->var->name, (long long)s->extent);
	for (int i = 0; i < s->nkids; i++)
		if (check_loops(s->kids[i], err))
			return -1;
	return 0;
}

int verify_loopnest(vfy_ctx *c, tir_error *err)
{
	if (check_loops(c->p->root, err))
		return -1;
	for (int i = 0; i < c->nblocks; i++)
		if (check_block(c, c->blocks[i], err))
			return -1;
	return 0;
}
