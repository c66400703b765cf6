/*
 * loops.c — the loop primitives: split, fuse, reorder.
 *
 * They change loops only; blocks keep their iterators and see new bindings
 * (sched_rebind).  A split whose factors overshoot the extent adds a block
 * predicate, so tile sizes need not divide the extent.
 */
#include <stdlib.h>
#include <string.h>
#include "sched.h"

/* a * b, saturated just above `limit` so it cannot overflow. */
static int64_t sat_mul(int64_t a, int64_t b, int64_t limit)
{
	int64_t r;
	if (__builtin_mul_overflow(a, b, &r) || r > limit)
		return limit + 1;
	return r;
}

static tir_subst subst_new(const tir_program *p)
{
	tir_subst s = { p->nvars + 64, NULL };
	s.map = xcalloc((size_t)s.n, sizeof(tir_expr *));
	return s;
}

struct pred { tir_program *p; tir_expr *cond; };

static void add_pred(tir_block *b, void *ctx)
{
	struct pred *c = ctx;
	b->predicate = mk_and(&c->p->arena, b->predicate, c->cond);
}

/* Replaces loop `old` in its parent by the chain outer..inner, the children
 * of `old` moving under `inner`. */
static void replace_loop(tir_stmt *old, tir_stmt *outer, tir_stmt *inner)
{
	tir_stmt *parent = old->parent;
	int pos = stmt_index(old);
	stmt_remove(old);
	stmt_insert(parent, pos, outer);
	for (int i = 0; i < old->nkids; i++)
		stmt_append(inner, old->kids[i]);
	old->nkids = 0;
	old->dead = true;
}

int prim_split(tir_sched *s, tir_inst *in, tir_error *err)
{
	tir_program *p = s->p;
	if (in->nin < 3)
		return tir_fail(err, "needs a loop and at least two factors");
	tir_stmt *loop = sched_loop(s, in->in[0], err);
	if (!loop)
		return -1;
	int n = in->nin - 1;
	int64_t f[TIR_MAX_IO], prod = 1;
	int infer = -1;
	for (int i = 0; i < n; i++) {
		if (sched_value(s, in->in[1 + i], &f[i], err))
			return -1;
		if (f[i] == 0 && in->in[1 + i].rv < 0) {
			if (infer >= 0)
				return tir_fail(err, "loop \"%s\": more than one factor to infer", loop->var->name);
			infer = i;
			continue;
		}
		if (f[i] < 1)
			return tir_fail(err, "loop \"%s\": factor %lld is not positive",
					loop->var->name, (long long)f[i]);
		prod = sat_mul(prod, f[i], loop->extent);
	}
	if (loop->loop_kind != LOOP_SERIAL)
		return tir_fail(err, "loop \"%s\" is %s; split it before changing its kind",
				loop->var->name, loop->loop_kind == LOOP_THREAD ? "bound to a thread" : "not serial");
	if (infer >= 0)
		f[infer] = prod > loop->extent ? 1 : (loop->extent + prod - 1) / prod;
	else if (prod < loop->extent)
		return tir_fail(err, "loop \"%s\": factors multiply to %lld, less than its extent %lld",
				loop->var->name, (long long)prod, (long long)loop->extent);
	prod = 1;
	for (int i = 0; i < n; i++)
		prod = sat_mul(prod, f[i], loop->extent);

	tir_stmt *outer = NULL, *inner = NULL;
	tir_expr *fused = NULL;
	for (int i = 0; i < n; i++) {
		char *name = arena_printf(&p->arena, "%s_%d", loop->var->name, i);
		tir_stmt *l = stmt_new_for(p, program_var(p, name), f[i]);
		if (inner)
			stmt_append(inner, l);
		else
			outer = l;
		inner = l;
		tir_expr *v = mk_var(&p->arena, l->var);
		fused = fused ? mk_add(&p->arena, mk_mul(&p->arena, fused, mk_int(&p->arena, f[i])), v) : v;
		int rv = sched_new_rv(s, RV_LOOP);
		s->rv[rv].loop = l;
		in->out[in->nout++] = rv;
	}
	replace_loop(loop, outer, inner);
	tir_subst sub = subst_new(p);
	sub.map[loop->var->id] = fused;
	if (prod > loop->extent) {
		struct pred c = { p, mk_bin(&p->arena, E_LT, fused, mk_int(&p->arena, loop->extent)) };
		stmt_visit_blocks(outer, add_pred, &c);
	}
	sched_rebind(p, outer, &sub);
	free(sub.map);
	return 0;
}

int prim_fuse(tir_sched *s, tir_inst *in, tir_error *err)
{
	tir_program *p = s->p;
	int n = in->nin;
	if (n < 1)
		return tir_fail(err, "needs at least one loop");
	tir_stmt *l[TIR_MAX_IO];
	int64_t ext = 1;
	for (int i = 0; i < n; i++) {
		if (!(l[i] = sched_loop(s, in->in[i], err)))
			return -1;
		if (l[i]->loop_kind != LOOP_SERIAL)
			return tir_fail(err, "loop \"%s\" is not serial; fuse loops before changing their kind",
					l[i]->var->name);
		if (i && (l[i]->parent != l[i - 1] || l[i - 1]->nkids != 1))
			return tir_fail(err, "loop \"%s\" is not the only child of loop \"%s\"; fused loops must be perfectly nested and given outermost first",
					l[i]->var->name, l[i - 1]->var->name);
		if (ext > (INT64_C(1) << 40) / l[i]->extent)
			return tir_fail(err, "the fused extent is too large");
		ext *= l[i]->extent;
	}
	if (n == 1) {
		in->out[in->nout++] = in->in[0].rv;
		return 0;
	}
	tir_buf nb = { 0 };
	for (int i = 0; i < n; i++)
		if (nb.len < 40)
			buf_printf(&nb, "%s%s", i ? "_" : "", l[i]->var->name);
	buf_puts(&nb, "_fused");
	char *name = arena_strdup(&p->arena, nb.s);
	free(nb.s);
	tir_stmt *f = stmt_new_for(p, program_var(p, name), ext);
	tir_expr *fv = mk_var(&p->arena, f->var);
	tir_subst sub = subst_new(p);
	int64_t inner = 1;
	for (int i = n - 1; i >= 0; i--) {
		tir_expr *e = inner > 1 ? mk_floordiv(&p->arena, fv, mk_int(&p->arena, inner)) : fv;
		if (i > 0)
			e = mk_floormod(&p->arena, e, mk_int(&p->arena, l[i]->extent));
		sub.map[l[i]->var->id] = e;
		inner *= l[i]->extent;
	}
	/* move the innermost loop's children under the fused loop */
	tir_stmt *parent = l[0]->parent;
	int pos = stmt_index(l[0]);
	stmt_remove(l[0]);
	stmt_insert(parent, pos, f);
	for (int i = 0; i < l[n - 1]->nkids; i++)
		stmt_append(f, l[n - 1]->kids[i]);
	for (int i = 0; i < n; i++) {
		l[i]->nkids = 0;
		l[i]->dead = true;
	}
	sched_rebind(p, f, &sub);
	free(sub.map);
	int rv = sched_new_rv(s, RV_LOOP);
	s->rv[rv].loop = f;
	in->out[in->nout++] = rv;
	return 0;
}

int prim_reorder(tir_sched *s, tir_inst *in, tir_error *err)
{
	int n = in->nin;
	tir_stmt *l[TIR_MAX_IO];
	for (int i = 0; i < n; i++) {
		if (!(l[i] = sched_loop(s, in->in[i], err)))
			return -1;
		for (int j = 0; j < i; j++)
			if (l[j] == l[i])
				return tir_fail(err, "loop \"%s\" is given twice", l[i]->var->name);
	}
	if (n < 2)
		return 0;
	/* the outermost of them; every other must be below it */
	tir_stmt *top = l[0];
	for (int i = 1; i < n; i++)
		if (stmt_is_ancestor(l[i], top))
			top = l[i];
	for (int i = 0; i < n; i++)
		if (l[i] != top && !stmt_is_ancestor(top, l[i]))
			return tir_fail(err, "loops \"%s\" and \"%s\" are not nested in one another",
					top->var->name, l[i]->var->name);
	/* the path from top down to the deepest given loop, single children only */
	tir_stmt *path[256];
	int m = 0, found = 0;
	for (tir_stmt *q = top;; q = q->kids[0]) {
		if (m == 256)
			return tir_fail(err, "loop nest too deep");
		path[m++] = q;
		for (int i = 0; i < n; i++)
			found += l[i] == q;
		if (found == n)
			break;
		if (q->nkids != 1 || q->kids[0]->kind != STMT_FOR)
			return tir_fail(err, "loop \"%s\" has %s between the loops to reorder; they must form a single chain",
					q->var->name, q->nkids != 1 ? "several children" : "a block");
	}
	/* the new order: given loops take the given positions in the given order */
	tir_stmt *order[256];
	int next = 0;
	for (int i = 0; i < m; i++) {
		bool given = false;
		for (int j = 0; j < n; j++)
			given = given || path[i] == l[j];
		order[i] = given ? l[next++] : path[i];
	}
	tir_stmt *bottom = path[m - 1];
	int nk = bottom->nkids;
	tir_stmt **kids = xmalloc(sizeof(tir_stmt *) * (size_t)(nk ? nk : 1));
	memcpy(kids, bottom->kids, sizeof(tir_stmt *) * (size_t)nk);
	tir_stmt *parent = top->parent;
	int pos = stmt_index(top);
	stmt_remove(top);
	for (int i = 0; i < m; i++)
		path[i]->nkids = 0;
	stmt_insert(parent, pos, order[0]);
	for (int i = 1; i < m; i++)
		stmt_append(order[i - 1], order[i]);
	for (int i = 0; i < nk; i++)
		stmt_append(order[m - 1], kids[i]);
	free(kids);
	return 0;
}
