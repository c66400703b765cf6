/*
 * inline.c — removing an intermediate buffer by merging its producer into its
 * consumers (compute_inline) or its consumer into its producer
 * (reverse_compute_inline).
 *
 * Both need the removed block to touch the buffer at exactly its iterators, so
 * that an iterator is a buffer coordinate: then the other block's index
 * expressions can be substituted for the iterators and the arithmetic moves
 * over whole.  The buffer is then marked dead and the removed block's loops
 * that hold nothing else go with it.
 */
#include <stdlib.h>
#include <string.h>
#include "sched.h"


/* Takes block b out of the tree with the loops left holding nothing. */
static void remove_block(tir_block *b)
{
	tir_stmt *s = b->stmt;
	tir_stmt *parent = s->parent;
	stmt_remove(s);
	s->dead = true;
	b->stmt = NULL;
	while (parent && parent->kind == STMT_FOR && parent->nkids == 0) {
		tir_stmt *up = parent->parent;
		stmt_remove(parent);
		parent->dead = true;
		parent = up;
	}
}

/* Whether idx (ndim of them) is a permutation of all of b's iterator vars;
 * fills dim_iter[d] with the iterator of dimension d. */
static bool index_is_iters(const tir_block *b, int ndim, tir_expr *const *idx,
			   int *dim_iter)
{
	bool used[TIR_MAX_ITERS] = { false };
	if (ndim != b->niters)
		return false;
	for (int d = 0; d < ndim; d++) {
		int it = idx[d] && idx[d]->kind == E_VAR ? block_iter_of(b, idx[d]->var) : -1;
		if (it < 0 || used[it])
			return false;
		used[it] = true;
		dim_iter[d] = it;
	}
	return true;
}

/* Rebuilds e with every load of `buf` replaced by the producer's value with
 * its iterator vars bound to the load's indices (iterator dim_iter[d] to
 * index d). */
struct inliner {
	tir_program *p;
	const tir_block *prod;
	const int *dim_iter;
	tir_subst sub;
	const tir_buffer *buf;
};

static tir_expr *inline_loads(struct inliner *in, tir_expr *e)
{
	tir_arena *a = &in->p->arena;
	if (!e || e->kind == E_INT || e->kind == E_FLOAT || e->kind == E_VAR)
		return e;
	tir_expr *x = inline_loads(in, e->a), *y = inline_loads(in, e->b);
	tir_expr *z = inline_loads(in, e->c);
	tir_expr *idx[TIR_MAX_DIMS];
	for (int i = 0; i < e->nidx; i++)
		idx[i] = inline_loads(in, e->idx[i]);
	switch (e->kind) {
	case E_LOAD:
		if (e->buf == in->buf) {
			for (int d = 0; d < e->nidx; d++)
				in->sub.map[in->prod->iters[in->dim_iter[d]].var->id] = idx[d];
			tir_expr *r = expr_subst(a, in->prod->value, &in->sub);
			for (int d = 0; d < e->nidx; d++)
				in->sub.map[in->prod->iters[in->dim_iter[d]].var->id] = NULL;
			return r;
		}
		return mk_load(a, e->buf, e->nidx, idx);
	case E_NOT: return mk_not(a, x);
	case E_SELECT: return mk_select(a, z, x, y);
	case E_CAST: return mk_cast(a, e->dtype, x);
	case E_CALL: return mk_call(a, e->fn, x);
	case E_DIV: {
		tir_expr *n = arena_alloc(a, sizeof *n);
		*n = *e;
		n->a = x;
		n->b = y;
		return n;
	}
	default:
		return mk_bin(a, e->kind, x, y);
	}
}

/* compute_inline(block): a spatial block writing an intermediate buffer at
 * exactly its iterators is substituted into every load of that buffer by its
 * consumers; the block, its empty loops and the buffer go away.  Requires:
 * not a reduction; the buffer is not a parameter, has a consumer and no other
 * writer; the block does not read its own output. */
int prim_compute_inline(tir_sched *s, tir_inst *in, tir_error *err)
{
	tir_program *p = s->p;
	if (in->nin != 1)
		return tir_fail(err, "takes one block");
	tir_block *b = sched_block(s, in->in[0], err);
	if (!b)
		return -1;
	tir_buffer *buf = b->store;
	if (block_is_reduction(b))
		return tir_fail(err, "block \"%s\" is a reduction; only a spatial block can be inlined",
				b->name);
	if (buf->role != BUF_TEMP)
		return tir_fail(err, "block \"%s\" writes \"%s\", a parameter of the operator; only intermediate buffers can be inlined",
				b->name, buf->name);
	int dim_iter[TIR_MAX_DIMS];
	if (!index_is_iters(b, buf->ndim, b->store_idx, dim_iter))
		return tir_fail(err, "block \"%s\" does not write \"%s\" at exactly its iterators",
				b->name, buf->name);
	if (block_reads(b, buf))
		return tir_fail(err, "block \"%s\" reads its own output \"%s\"", b->name, buf->name);
	int nconsumers = 0;
	for (int i = 0; i < p->nblocks; i++) {
		tir_block *c = p->blocks[i];
		if (!c->stmt || c == b)
			continue;
		if (c->store == buf)
			return tir_fail(err, "block \"%s\" also writes \"%s\"; block \"%s\" is not its only producer",
					c->name, buf->name, b->name);
		if (block_reads(c, buf)) {
			if (stmt_order(c->stmt, b->stmt) < 0)
				return tir_fail(err, "block \"%s\" reads \"%s\" before block \"%s\" writes it",
						c->name, buf->name, b->name);
			nconsumers++;
		}
	}
	if (!nconsumers)
		return tir_fail(err, "block \"%s\" has no consumer of \"%s\"", b->name, buf->name);

	struct inliner il = { p, b, dim_iter,
			      { p->nvars, xcalloc((size_t)p->nvars + 1, sizeof(tir_expr *)) },
			      buf };
	for (int i = 0; i < p->nblocks; i++) {
		tir_block *c = p->blocks[i];
		if (!c->stmt || c == b || !block_reads(c, buf))
			continue;
		tir_env env = sched_iter_env(p, c);
		c->value = expr_simplify(&p->arena, inline_loads(&il, c->value), &env);
		if (c->init)
			c->init = expr_simplify(&p->arena, inline_loads(&il, c->init), &env);
		env_free(&env);
		block_update_regions(p, c);
	}
	free(il.sub.map);
	remove_block(b);
	buf->dead = true;
	return 0;
}

/* reverse_compute_inline(block): a spatial consumer that reads exactly one
 * intermediate buffer, at exactly its iterators, is merged into that buffer's
 * producer: the producer computes the consumer's value from its own and
 * stores it where the consumer stored.  A consumer that reads only the start
 * of the buffer (a crop) leaves the producer a predicate: it computes only
 * that part.  The consumer, its empty loops and the
 * buffer go away.  Requires: the consumer is not a reduction; the buffer has
 * one writer, which is not a reduction, and no other reader; no block between
 * the two touches the consumer's output or writes what it reads. */
int prim_reverse_compute_inline(tir_sched *s, tir_inst *in, tir_error *err)
{
	tir_program *p = s->p;
	if (in->nin != 1)
		return tir_fail(err, "takes one block");
	tir_block *c = sched_block(s, in->in[0], err);
	if (!c)
		return -1;
	if (block_is_reduction(c))
		return tir_fail(err, "block \"%s\" is a reduction; only a spatial consumer can be inlined into its producer",
				c->name);
	const tir_region *src = NULL;
	for (int i = 0; i < c->nreads; i++) {
		if (c->reads[i].buf->role != BUF_TEMP)
			continue;
		if (src && src->buf == c->reads[i].buf)
			return tir_fail(err, "block \"%s\" reads \"%s\" at more than one index",
					c->name, src->buf->name);
		if (src)
			return tir_fail(err, "block \"%s\" reads two intermediate buffers, \"%s\" and \"%s\"",
					c->name, src->buf->name, c->reads[i].buf->name);
		src = &c->reads[i];
	}
	if (!src)
		return tir_fail(err, "block \"%s\" reads no intermediate buffer", c->name);
	tir_buffer *buf = src->buf;
	int dim_iter[TIR_MAX_DIMS];
	bool unit = true;
	for (int d = 0; d < buf->ndim; d++)
		unit = unit && src->extent[d] == 1;
	if (!unit || !index_is_iters(c, buf->ndim, src->min, dim_iter))
		return tir_fail(err, "block \"%s\" does not read \"%s\" at exactly its iterators",
				c->name, buf->name);
	bool partial = false;
	for (int d = 0; d < buf->ndim; d++)
		partial = partial || c->iters[dim_iter[d]].extent < buf->shape[d];
	if (block_reads(c, c->store))
		return tir_fail(err, "block \"%s\" reads its own output \"%s\"", c->name, c->store->name);
	tir_block *prod = NULL;
	for (int i = 0; i < p->nblocks; i++) {
		tir_block *w = p->blocks[i];
		if (!w->stmt || w == c || w->store != buf)
			continue;
		if (prod)
			return tir_fail(err, "\"%s\" has two producers, \"%s\" and \"%s\"",
					buf->name, prod->name, w->name);
		prod = w;
	}
	if (!prod)
		return tir_fail(err, "no block writes \"%s\"", buf->name);
	if (block_is_reduction(prod))
		return tir_fail(err, "producer \"%s\" of \"%s\" is a reduction; cache_write it first",
				prod->name, buf->name);
	if (stmt_order(prod->stmt, c->stmt) != -1)
		return tir_fail(err, "block \"%s\" runs before its producer \"%s\"", c->name, prod->name);
	for (int i = 0; i < p->nblocks; i++) {
		tir_block *o = p->blocks[i];
		if (!o->stmt || o == c || o == prod)
			continue;
		if (block_reads(o, buf))
			return tir_fail(err, "\"%s\" has another consumer \"%s\" besides \"%s\"",
					buf->name, o->name, c->name);
		if (o->store == c->store)
			return tir_fail(err, "block \"%s\" also writes \"%s\"; block \"%s\" is not its only producer",
					o->name, c->store->name, c->name);
		bool between = stmt_order(prod->stmt, o->stmt) == -1 &&
			       stmt_order(o->stmt, c->stmt) == -1;
		if (!between)
			continue;
		if (block_reads(o, c->store))
			return tir_fail(err, "block \"%s\" reads \"%s\" between \"%s\" and \"%s\"",
					o->name, c->store->name, prod->name, c->name);
		if (block_reads(c, o->store))
			return tir_fail(err, "block \"%s\" writes \"%s\", which block \"%s\" reads, between \"%s\" and it",
					o->name, o->store->name, c->name, prod->name);
	}
	if (prod->store->ndim != buf->ndim)
		return tir_fail(err, "producer \"%s\" writes \"%s\" with %d indices, expected %d",
				prod->name, buf->name, prod->store->ndim, buf->ndim);

	/* c's iterator of dimension d is prod's store index d */
	tir_arena *a = &p->arena;
	for (int d = 0; partial && d < buf->ndim; d++) {
		const tir_expr *x = prod->store_idx[d];
		if (c->iters[dim_iter[d]].extent < buf->shape[d] &&
		    (x->kind != E_VAR || block_iter_of(prod, x->var) < 0))
			return tir_fail(err, "block \"%s\" reads only part of \"%s\" (iterator \"%s\" covers %lld of %lld) and its producer \"%s\" does not write that dimension at one iterator",
					c->name, buf->name, c->iters[dim_iter[d]].var->name,
					(long long)c->iters[dim_iter[d]].extent, (long long)buf->shape[d],
					prod->name);
	}
	if (partial) {
		/* prod computes only what c reads: the iterators that write the
		 * dimensions c's domain cuts short get c's extents, and a
		 * predicate in prod's loop variables keeps their bindings there */
		tir_subst bind = { p->nvars, xcalloc((size_t)p->nvars + 1, sizeof(tir_expr *)) };
		for (int i = 0; i < prod->niters; i++)
			bind.map[prod->iters[i].var->id] = prod->iters[i].binding;
		for (int d = 0; d < buf->ndim; d++) {
			int64_t ext = c->iters[dim_iter[d]].extent;
			if (ext >= buf->shape[d])
				continue;
			int it = block_iter_of(prod, prod->store_idx[d]->var);
			if (prod->iters[it].extent > ext)
				prod->iters[it].extent = ext;
			prod->predicate = mk_and(a, prod->predicate,
				mk_bin(a, E_LT, expr_subst(a, prod->store_idx[d], &bind),
				       mk_int(a, ext)));
		}
		free(bind.map);
		tir_env lenv = sched_loop_env(p);
		prod->predicate = expr_simplify(a, prod->predicate, &lenv);
		if (prod->predicate->kind == E_INT && prod->predicate->ival)
			prod->predicate = NULL;
		env_free(&lenv);
	}
	tir_subst sub = { p->nvars, xcalloc((size_t)p->nvars + 1, sizeof(tir_expr *)) };
	for (int d = 0; d < buf->ndim; d++)
		sub.map[c->iters[dim_iter[d]].var->id] = prod->store_idx[d];
	/* c's value with its loads of buf (all at c's iterators) replaced by
	 * prod's value, which is in prod's iterators already */
	tir_expr *v = expr_replace_loads(a, c->value, buf, prod->value);
	v = expr_subst(a, v, &sub);
	tir_expr *idx[TIR_MAX_DIMS];
	for (int d = 0; d < c->store->ndim; d++)
		idx[d] = expr_subst(a, c->store_idx[d], &sub);
	free(sub.map);

	tir_env env = sched_iter_env(p, prod);
	prod->store = c->store;
	for (int d = 0; d < c->store->ndim; d++)
		prod->store_idx[d] = expr_simplify(a, idx[d], &env);
	prod->value = expr_simplify(a, v, &env);
	env_free(&env);
	block_update_regions(p, prod);
	remove_block(c);
	buf->dead = true;
	return 0;
}
