/*
 * reduction.c — decompose_reduction: splitting a reduction block's init out
 * into a block of its own.
 *
 * A reduction block with an init writes the init on its first reduction step.
 * Decomposing at loop L puts a separate init block, over the spatial
 * iterators only, in a copy of the data-parallel loops from L down, right
 * before L; the reduction block keeps only the update.  This is what lets a
 * GPU schedule keep the accumulator in registers: the init runs once per
 * output tile, outside the reduction loops.
 */
#include <stdlib.h>
#include <string.h>
#include "sched.h"

struct loop_use { bool spatial, reduce; };

static struct loop_use loop_use(const tir_block *b, const tir_var *v)
{
	struct loop_use u = { false, false };
	for (int i = 0; i < b->niters; i++) {
		if (!expr_uses_var(b->iters[i].binding, v))
			continue;
		if (b->iters[i].kind == ITER_SPATIAL)
			u.spatial = true;
		else
			u.reduce = true;
	}
	return u;
}

static void env_add_all_loops(tir_env *e, const tir_stmt *s)
{
	if (s->kind == STMT_FOR)
		env_set(e, s->var, 0, s->extent - 1);
	for (int i = 0; i < s->nkids; i++)
		env_add_all_loops(e, s->kids[i]);
}

/* Splits a predicate into its conjuncts; returns the count. */
static int conjuncts(tir_expr *e, tir_expr **out, int n, int max)
{
	if (!e)
		return n;
	if (e->kind == E_AND)
		return conjuncts(e->b, out, conjuncts(e->a, out, n, max), max);
	if (n < max)
		out[n] = e;
	return n + 1;
}

/* decompose_reduction(block, loop): `loop` encloses a reduction block that
 * still has its init.  Creates block `<name>_init` (the spatial iterators,
 * store[idx] = init) in copies of the loops from `loop` down to the block that
 * feed spatial iterators only (kind, thread tag and annotations kept), placed
 * right before `loop`; the block loses its init.  Requires every loop that
 * feeds a reduction iterator to be `loop` or inside it, and no loop to feed
 * both kinds.  Returns the init block. */
int prim_decompose_reduction(tir_sched *s, tir_inst *in, tir_error *err)
{
	tir_program *p = s->p;
	tir_arena *a = &p->arena;
	if (in->nin != 2)
		return tir_fail(err, "takes a block and a loop");
	tir_block *b = sched_block(s, in->in[0], err);
	if (!b)
		return -1;
	tir_stmt *loop = sched_loop(s, in->in[1], err);
	if (!loop)
		return -1;
	if (!block_is_reduction(b))
		return tir_fail(err, "block \"%s\" is not a reduction", b->name);
	if (!b->init)
		return tir_fail(err, "block \"%s\" has no init (already decomposed)", b->name);
	if (!stmt_is_ancestor(loop, b->stmt))
		return tir_fail(err, "loop \"%s\" does not enclose block \"%s\"",
				loop->var->name, b->name);
	tir_stmt *loops[64];
	int n = stmt_loops(b->stmt, loops, 64);
	if (n > 64)
		return tir_fail(err, "block \"%s\" is under %d loops, more than 64", b->name, n);
	int k = 0;
	while (loops[k] != loop)
		k++;
	bool keep[64] = { false };
	for (int i = 0; i < n; i++) {
		struct loop_use u = loop_use(b, loops[i]->var);
		if (i < k && u.reduce)
			return tir_fail(err, "loop \"%s\" feeds a reduction iterator of block \"%s\" and is outside loop \"%s\"",
					loops[i]->var->name, b->name, loop->var->name);
		if (i >= k && u.reduce && u.spatial)
			return tir_fail(err, "loop \"%s\" feeds both spatial and reduction iterators of block \"%s\"",
					loops[i]->var->name, b->name);
		keep[i] = i >= k && u.spatial;
	}
	/* the predicate's conjuncts over kept or outer loops go to the init;
	 * those over reduction loops stay with the update alone */
	tir_expr *conj[32];
	int nc = conjuncts(b->predicate, conj, 0, 32);
	if (nc > 32)
		return tir_fail(err, "block \"%s\" has a predicate of more than 32 terms", b->name);
	bool conj_keep[32];
	for (int c = 0; c < nc; c++) {
		bool uses_kept = false, uses_dropped = false;
		for (int i = k; i < n; i++) {
			if (!expr_uses_var(conj[c], loops[i]->var))
				continue;
			if (keep[i])
				uses_kept = true;
			else
				uses_dropped = true;
		}
		if (uses_kept && uses_dropped)
			return tir_fail(err, "the predicate of block \"%s\" ties spatial and reduction loops under loop \"%s\"",
					b->name, loop->var->name);
		conj_keep[c] = !uses_dropped;
	}

	/* copies of the kept loops, outermost first */
	tir_subst sub = { p->nvars + 2 * TIR_MAX_ITERS + 64, NULL };
	sub.map = xcalloc((size_t)sub.n, sizeof(tir_expr *));
	tir_stmt *outer = NULL, *inner = NULL;
	for (int i = k; i < n; i++) {
		if (!keep[i])
			continue;
		tir_stmt *o = loops[i];
		tir_stmt *l = stmt_new_for(p, program_var(p, arena_printf(a, "%s_init", o->var->name)),
					   o->extent);
		l->loop_kind = o->loop_kind;
		l->tag = o->tag;
		l->nann = o->nann;
		memcpy(l->ann, o->ann, sizeof l->ann);
		sub.map[o->var->id] = mk_var(a, l->var);
		if (inner)
			stmt_append(inner, l);
		else
			outer = l;
		inner = l;
	}
	/* the init block: b's spatial iterators, bound through the copies */
	tir_block *ib = block_new(p, arena_printf(a, "%s_init", b->name));
	tir_subst isub = { p->nvars + TIR_MAX_ITERS, NULL };
	isub.map = xcalloc((size_t)isub.n, sizeof(tir_expr *));
	for (int i = 0; i < b->niters; i++) {
		tir_iter *it = &b->iters[i];
		if (it->kind != ITER_SPATIAL)
			continue;
		tir_var *v = program_var(p, it->var->name);
		block_add_iter(ib, v, it->extent, ITER_SPATIAL, expr_subst(a, it->binding, &sub));
		isub.map[it->var->id] = mk_var(a, v);
	}
	for (int c = 0; c < nc; c++)
		if (conj_keep[c])
			ib->predicate = mk_and(a, ib->predicate, expr_subst(a, conj[c], &sub));
	ib->store = b->store;
	for (int d = 0; d < b->store->ndim; d++)
		ib->store_idx[d] = expr_subst(a, b->store_idx[d], &isub);
	ib->value = expr_subst(a, b->init, &isub);
	ib->reduce = REDUCE_NONE;
	free(sub.map);
	free(isub.map);
	block_update_regions(p, ib);

	tir_stmt *bs = stmt_new_block(p, ib);
	if (inner)
		stmt_append(inner, bs);
	else
		outer = bs;
	stmt_insert(loop->parent, stmt_index(loop), outer);
	b->init = NULL;

	tir_env env = env_new(p->nvars);
	env_add_all_loops(&env, p->root);
	for (int i = 0; i < ib->niters; i++)
		ib->iters[i].binding = expr_simplify(a, ib->iters[i].binding, &env);
	if (ib->predicate) {
		ib->predicate = expr_simplify(a, ib->predicate, &env);
		if (ib->predicate->kind == E_INT && ib->predicate->ival)
			ib->predicate = NULL;
	}
	env_free(&env);

	int rv = sched_new_rv(s, RV_BLOCK);
	s->rv[rv].block = ib;
	in->out[in->nout++] = rv;
	return 0;
}
