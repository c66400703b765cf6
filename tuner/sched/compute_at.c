/*
 * compute_at.c — moving a block under another block's loop: compute_at (a
 * producer moves under a loop of its consumers) and reverse_compute_at (a
 * consumer moves under a loop of its producers).
 *
 * Both take the block's own loop nest away (the chain of enclosing loops that
 * hold this block alone; their kinds are lost) and build a fresh one under the
 * target loop that covers exactly the region the other side touches in one
 * iteration of that loop.  The region is found as TensorIR does: the other
 * side's access regions (in its iterator vars) with its bindings substituted,
 * bounded by interval_of with every loop strictly under the target ranged and
 * the loops at or above it fixed; the symbolic part becomes the base of the new
 * bindings.  A shared buffer is filled by the whole thread block, so for it the
 * threadIdx / vthread loops at or above the target are ranged too.  Where the
 * new loops can step outside the block's iterator domain a predicate keeps
 * them in.
 *
 * Only blocks that write (compute_at) or read (reverse_compute_at) their
 * buffer at exactly their iterators can move: then the new loops map one to
 * one onto buffer dimensions.
 */
#include <stdlib.h>
#include <string.h>
#include "sched.h"

/* ---- tree helpers ---------------------------------------------------------- */


/* The outermost statement whose subtree holds block b and nothing else: b's
 * own loop nest, what moves. */
static tir_stmt *own_nest(tir_block *b)
{
	tir_stmt *s = b->stmt;
	while (s->parent && s->parent->kind == STMT_FOR &&
	       stmt_blocks(s->parent, NULL, 0) == 1)
		s = s->parent;
	return s;
}

static void mark_dead(tir_stmt *s)
{
	if (s->kind != STMT_FOR)
		return;
	s->dead = true;
	for (int i = 0; i < s->nkids; i++)
		mark_dead(s->kids[i]);
}

static void range_loops_under(tir_env *e, const tir_stmt *s)
{
	for (int i = 0; i < s->nkids; i++) {
		const tir_stmt *k = s->kids[i];
		if (k->kind == STMT_FOR)
			env_set(e, k->var, 0, k->extent - 1);
		range_loops_under(e, k);
	}
}

static bool is_relaxed_tag(tir_thread_tag t)
{
	return t == TIR_THREAD_X || t == TIR_THREAD_Y || t == TIR_THREAD_Z ||
	       t == TIR_VTHREAD_X || t == TIR_VTHREAD_Y || t == TIR_VTHREAD_Z;
}

/* The env of the region one iteration of `loop` (a loop or the root) covers
 * for a buffer in `scope`: the loops strictly under it ranged; for a shared
 * buffer, threadIdx / vthread loops at or above it too. */
static tir_env region_env(const tir_program *p, const tir_stmt *loop, tir_scope scope)
{
	tir_env e = env_new(p->nvars);
	range_loops_under(&e, loop);
	if (scope == TIR_SCOPE_SHARED)
		for (const tir_stmt *q = loop; q; q = q->parent)
			if (q->kind == STMT_FOR && q->loop_kind == LOOP_THREAD &&
			    is_relaxed_tag(q->tag))
				env_set(&e, q->var, 0, q->extent - 1);
	return e;
}

/* The access of region r of block b in loop variables: r's starts with b's
 * bindings substituted, as intervals over env, unioned into acc. */
static void add_region(tir_program *p, const tir_block *b, const tir_region *r,
		       const tir_env *env, tir_interval *acc, bool *have)
{
	tir_arena *a = &p->arena;
	tir_subst sub = { p->nvars, xcalloc((size_t)p->nvars + 1, sizeof(tir_expr *)) };
	for (int i = 0; i < b->niters; i++)
		sub.map[b->iters[i].var->id] = b->iters[i].binding;
	for (int d = 0; d < r->buf->ndim; d++) {
		/* simplified first: floordiv / floormod whose remainder stays in
		 * one period over the ranged loops fold into affine terms */
		tir_expr *m = expr_simplify(a, expr_subst(a, r->min[d], &sub), env);
		tir_interval iv = interval_of(a, m, env);
		iv.hi += r->extent[d] - 1;
		acc[d] = *have ? interval_union(a, acc[d], iv) : iv;
	}
	*have = true;
	free(sub.map);
}

/* Iterator of b whose var is exactly expression e, or -1. */
static int plain_iter(const tir_block *b, const tir_expr *e)
{
	if (!e || e->kind != E_VAR)
		return -1;
	return block_iter_of(b, e->var);
}

/* Maps each buffer dimension of idx (ndim of them) to a distinct spatial
 * iterator of b whose var is the index, covering every spatial iterator.
 * Returns false otherwise. */
static bool iters_are_index(const tir_block *b, int ndim, tir_expr *const *idx,
			    int *dim_iter)
{
	bool used[TIR_MAX_ITERS] = { false };
	int nspatial = 0;
	for (int i = 0; i < b->niters; i++)
		if (b->iters[i].kind == ITER_SPATIAL)
			nspatial++;
	if (nspatial != ndim)
		return false;
	for (int d = 0; d < ndim; d++) {
		int it = plain_iter(b, idx[d]);
		if (it < 0 || used[it] || b->iters[it].kind != ITER_SPATIAL)
			return false;
		used[it] = true;
		dim_iter[d] = it;
	}
	return true;
}

static void env_add_all_loops(tir_env *e, const tir_stmt *s)
{
	if (s->kind == STMT_FOR)
		env_set(e, s->var, 0, s->extent - 1);
	for (int i = 0; i < s->nkids; i++)
		env_add_all_loops(e, s->kids[i]);
}

/* Rebuilds b's loop nest under `loop` at position pos: for buffer dimension d
 * (iterator dim_iter[d]) a loop over region reg[d]; reduction iterators get a
 * loop over their whole domain, innermost.  Sets the bindings and the
 * predicate that keeps the iterators in their domains. */
static void build_nest(tir_program *p, tir_block *b, int ndim, const int *dim_iter,
		       const tir_interval *reg, tir_stmt *loop, int pos)
{
	tir_arena *a = &p->arena;
	int iter_dim[TIR_MAX_ITERS];
	for (int i = 0; i < b->niters; i++)
		iter_dim[i] = -1;
	for (int d = 0; d < ndim; d++)
		iter_dim[dim_iter[d]] = d;
	int order[TIR_MAX_ITERS], n = 0;
	for (int i = 0; i < b->niters; i++)
		if (iter_dim[i] >= 0)
			order[n++] = i;
	for (int i = 0; i < b->niters; i++)
		if (iter_dim[i] < 0)
			order[n++] = i;

	tir_stmt *outer = NULL, *inner = NULL;
	for (int k = 0; k < n; k++) {
		tir_iter *it = &b->iters[order[k]];
		int d = iter_dim[order[k]];
		int64_t ext = d >= 0 ? reg[d].hi - reg[d].lo + 1 : it->extent;
		tir_stmt *l = stmt_new_for(p, program_var(p, arena_printf(a, "ax%d", k)), ext);
		tir_expr *v = mk_var(a, l->var);
		if (d >= 0) {
			tir_expr *start = mk_int(a, reg[d].lo);
			if (reg[d].base)
				start = mk_add(a, reg[d].base, start);
			it->binding = mk_add(a, start, v);
		} else {
			it->binding = v;
		}
		if (inner)
			stmt_append(inner, l);
		else
			outer = l;
		inner = l;
	}
	if (b->stmt->parent)
		stmt_remove(b->stmt);
	if (inner)
		stmt_append(inner, b->stmt);
	else
		outer = b->stmt;
	stmt_insert(loop, pos, outer);

	tir_env env = env_new(p->nvars);
	env_add_all_loops(&env, p->root);
	b->predicate = NULL;
	for (int i = 0; i < b->niters; i++) {
		tir_iter *it = &b->iters[i];
		it->binding = expr_simplify(a, it->binding, &env);
		int64_t lo, hi;
		bool ok = expr_bounds(it->binding, &env, &lo, &hi);
		if (!ok || lo < 0)
			b->predicate = mk_and(a, b->predicate,
					      mk_bin(a, E_LE, mk_int(a, 0), it->binding));
		if (!ok || hi >= it->extent)
			b->predicate = mk_and(a, b->predicate,
					      mk_bin(a, E_LT, it->binding, mk_int(a, it->extent)));
	}
	env_free(&env);
}

/* Turns unioned intervals into loop ranges: `full` or wider than the domain
 * means the whole domain. */
static void clamp_region(const tir_block *b, int ndim, const int *dim_iter,
			 tir_interval *reg)
{
	for (int d = 0; d < ndim; d++) {
		int64_t ext = b->iters[dim_iter[d]].extent;
		if (reg[d].full || reg[d].hi - reg[d].lo + 1 >= ext) {
			reg[d].full = false;
			reg[d].base = NULL;
			reg[d].lo = 0;
			reg[d].hi = ext - 1;
		}
	}
}

/* Checks shared by both directions: the loop and block are alive, the loop
 * does not hold the block, and the block's own nest does not hold the loop. */
static int check_move(tir_block *b, tir_stmt *loop, tir_stmt **nest, tir_error *err)
{
	if (stmt_is_ancestor(loop, b->stmt))
		return tir_fail(err, "loop \"%s\" already encloses block \"%s\"",
				loop->var->name, b->name);
	*nest = own_nest(b);
	if (*nest == loop || stmt_is_ancestor(*nest, loop))
		return tir_fail(err, "loop \"%s\" is inside the loop nest of block \"%s\"",
				loop->var->name, b->name);
	return 0;
}

/* Fails if a block writing a buffer b reads (other than b itself) does not
 * run before `before` (a statement in the tree). */
static int check_inputs_ready(tir_program *p, tir_block *b, const tir_stmt *before,
			      const char *what, tir_error *err)
{
	for (int i = 0; i < b->nreads; i++) {
		tir_buffer *buf = b->reads[i].buf;
		for (int j = 0; j < p->nblocks; j++) {
			tir_block *w = p->blocks[j];
			if (!w->stmt || w == b || w->store != buf)
				continue;
			if (stmt_order(w->stmt, before) != -1)
				return tir_fail(err, "block \"%s\" writes \"%s\", which block \"%s\" reads, and would run after it %s",
						w->name, buf->name, b->name, what);
		}
	}
	return 0;
}

static void move_out(tir_stmt *nest)
{
	stmt_remove(nest);
	mark_dead(nest);
}

/* See sched.h. */
void sched_place_stage(tir_program *p, tir_block *b, tir_stmt *scope, int pos,
		       tir_block *const *others, int nothers, const tir_buffer *src, bool writes)
{
	int dim_iter[TIR_MAX_DIMS];
	for (int d = 0; d < b->store->ndim; d++)
		dim_iter[d] = d;
	tir_interval reg[TIR_MAX_DIMS];
	bool have = false;
	tir_env env = region_env(p, scope, b->store->scope);
	for (int k = 0; k < nothers; k++) {
		const tir_block *other = others[k];
		if (writes && other->write.buf == src)
			add_region(p, other, &other->write, &env, reg, &have);
		for (int r = 0; !writes && r < other->nreads; r++)
			if (other->reads[r].buf == src)
				add_region(p, other, &other->reads[r], &env, reg, &have);
	}
	env_free(&env);
	if (!have)
		for (int d = 0; d < b->store->ndim; d++)
			reg[d].full = true;
	clamp_region(b, b->store->ndim, dim_iter, reg);
	build_nest(p, b, b->store->ndim, dim_iter, reg, scope, pos);
}

/* ---- compute_at ------------------------------------------------------------- */

/* compute_at(block, loop): moves a producer block under `loop`, before the
 * first child of `loop` that holds a consumer, computing there exactly the
 * part of its output the consumers under `loop` read in one iteration.
 * Requires: `loop` does not enclose the block; the block writes its buffer at
 * exactly its spatial iterators and is its only writer; the buffer has a
 * consumer and every consumer is under `loop` and after the block; the
 * block's inputs are written before the new position. */
int prim_compute_at(tir_sched *s, tir_inst *in, tir_error *err)
{
	tir_program *p = s->p;
	if (in->nin != 2)
		return tir_fail(err, "takes a block and a loop");
	tir_block *b = sched_block(s, in->in[0], err);
	if (!b)
		return -1;
	tir_stmt *loop = sched_loop(s, in->in[1], err);
	if (!loop)
		return -1;
	tir_stmt *nest;
	if (check_move(b, loop, &nest, err))
		return -1;
	tir_buffer *buf = b->store;
	int dim_iter[TIR_MAX_DIMS];
	if (!iters_are_index(b, buf->ndim, b->store_idx, dim_iter))
		return tir_fail(err, "block \"%s\" does not write \"%s\" at exactly its spatial iterators",
				b->name, buf->name);
	int nconsumers = 0;
	tir_block *first = NULL;
	for (int i = 0; i < p->nblocks; i++) {
		tir_block *c = p->blocks[i];
		if (!c->stmt || c == b)
			continue;
		if (c->store == buf)
			return tir_fail(err, "block \"%s\" also writes \"%s\"; block \"%s\" is not its only producer",
					c->name, buf->name, b->name);
		if (!block_reads(c, buf))
			continue;
		if (!stmt_is_ancestor(loop, c->stmt))
			return tir_fail(err, "block \"%s\" has a consumer \"%s\" outside loop \"%s\"",
					b->name, c->name, loop->var->name);
		if (stmt_order(b->stmt, c->stmt) != -1)
			return tir_fail(err, "block \"%s\" runs after its consumer \"%s\"",
					b->name, c->name);
		if (!first || stmt_order(c->stmt, first->stmt) < 0)
			first = c;
		nconsumers++;
	}
	if (!nconsumers)
		return tir_fail(err, "block \"%s\" has no consumer of \"%s\"", b->name, buf->name);
	/* the child of loop holding the first consumer: the insertion point */
	tir_stmt *at = first->stmt;
	while (at->parent != loop)
		at = at->parent;
	if (check_inputs_ready(p, b, at, "at loop \"%s\"", err))
		return -1;
	for (int i = 0; i < b->nreads; i++)
		if (b->reads[i].buf == buf && !block_is_reduction(b))
			return tir_fail(err, "block \"%s\" reads its own output \"%s\"",
					b->name, buf->name);

	/* the region the consumers under loop read in one iteration */
	tir_interval reg[TIR_MAX_DIMS];
	bool have = false;
	tir_env env = region_env(p, loop, buf->scope);
	for (int i = 0; i < p->nblocks; i++) {
		tir_block *c = p->blocks[i];
		if (!c->stmt || c == b || !block_reads(c, buf))
			continue;
		for (int r = 0; r < c->nreads; r++)
			if (c->reads[r].buf == buf)
				add_region(p, c, &c->reads[r], &env, reg, &have);
	}
	env_free(&env);
	clamp_region(b, buf->ndim, dim_iter, reg);

	move_out(nest);
	build_nest(p, b, buf->ndim, dim_iter, reg, loop, stmt_index(at));
	return 0;
}

/* ---- reverse_compute_at ---------------------------------------------------- */

/* reverse_compute_at(block, loop): moves a consumer block under `loop`, after
 * the last child of `loop` that holds a producer of the buffer it reads,
 * computing there exactly the part the producers under `loop` write in one
 * iteration.  Requires: `loop` does not enclose the block; the block is not a
 * reduction, reads exactly one buffer that some block writes, reads it at
 * exactly its iterators, and every writer of it is under `loop` and before the
 * block; nothing reads or writes the block's output before it runs now. */
int prim_reverse_compute_at(tir_sched *s, tir_inst *in, tir_error *err)
{
	tir_program *p = s->p;
	if (in->nin != 2)
		return tir_fail(err, "takes a block and a loop");
	tir_block *b = sched_block(s, in->in[0], err);
	if (!b)
		return -1;
	tir_stmt *loop = sched_loop(s, in->in[1], err);
	if (!loop)
		return -1;
	tir_stmt *nest;
	if (check_move(b, loop, &nest, err))
		return -1;
	if (block_is_reduction(b))
		return tir_fail(err, "block \"%s\" is a reduction; only a spatial consumer can move under its producer",
				b->name);
	/* the one buffer b reads that a block writes */
	const tir_region *src = NULL;
	for (int i = 0; i < b->nreads; i++) {
		bool produced = false;
		for (int j = 0; j < p->nblocks && !produced; j++)
			produced = p->blocks[j]->stmt && p->blocks[j] != b &&
				   p->blocks[j]->store == b->reads[i].buf;
		if (!produced)
			continue;
		if (src && src->buf == b->reads[i].buf)
			return tir_fail(err, "block \"%s\" reads \"%s\" at more than one index",
					b->name, src->buf->name);
		if (src)
			return tir_fail(err, "block \"%s\" reads two computed buffers, \"%s\" and \"%s\"",
					b->name, src->buf->name, b->reads[i].buf->name);
		src = &b->reads[i];
	}
	if (!src)
		return tir_fail(err, "block \"%s\" reads no buffer that a block writes", b->name);
	tir_buffer *buf = src->buf;
	int dim_iter[TIR_MAX_DIMS];
	bool unit = true;
	for (int d = 0; d < buf->ndim; d++)
		unit = unit && src->extent[d] == 1;
	if (!unit || !iters_are_index(b, buf->ndim, src->min, dim_iter) ||
	    b->niters != buf->ndim)
		return tir_fail(err, "block \"%s\" does not read \"%s\" at exactly its iterators",
				b->name, buf->name);
	tir_block *last = NULL;
	for (int i = 0; i < p->nblocks; i++) {
		tir_block *w = p->blocks[i];
		if (!w->stmt || w == b)
			continue;
		if (w->store == b->store)
			return tir_fail(err, "block \"%s\" also writes \"%s\"; block \"%s\" is not its only producer",
					w->name, b->store->name, b->name);
		if (w->store != buf)
			continue;
		if (!stmt_is_ancestor(loop, w->stmt))
			return tir_fail(err, "block \"%s\" has a producer \"%s\" outside loop \"%s\"",
					b->name, w->name, loop->var->name);
		if (stmt_order(w->stmt, b->stmt) != -1)
			return tir_fail(err, "block \"%s\" runs before its producer \"%s\"",
					b->name, w->name);
		if (!last || stmt_order(w->stmt, last->stmt) > 0)
			last = w;
	}
	tir_stmt *after = last->stmt;
	while (after->parent != loop)
		after = after->parent;
	/* nothing between the new position and the old one may touch b's output
	 * or write what b reads; nothing under loop may read b's output */
	for (int i = 0; i < p->nblocks; i++) {
		tir_block *c = p->blocks[i];
		if (!c->stmt || c == b)
			continue;
		bool touches_out = block_reads(c, b->store);
		bool writes_in = block_reads(b, c->store) && c->store != buf;
		if (!touches_out && !writes_in)
			continue;
		bool between = stmt_order(after, c->stmt) == -1 &&
			       stmt_order(c->stmt, b->stmt) == -1;
		if (touches_out && (between || stmt_is_ancestor(loop, c->stmt)))
			return tir_fail(err, "block \"%s\" reads \"%s\", the output of block \"%s\", before it would be written",
					c->name, b->store->name, b->name);
		if (writes_in && (between || stmt_is_ancestor(loop, c->stmt)))
			return tir_fail(err, "block \"%s\" writes \"%s\", which block \"%s\" reads, and would run after it at loop \"%s\"",
					c->name, c->store->name, b->name, loop->var->name);
	}

	/* the region the producers under loop write in one iteration */
	tir_interval reg[TIR_MAX_DIMS];
	bool have = false;
	tir_env env = region_env(p, loop, buf->scope);
	for (int i = 0; i < p->nblocks; i++) {
		tir_block *w = p->blocks[i];
		if (w->stmt && w != b && w->store == buf)
			add_region(p, w, &w->write, &env, reg, &have);
	}
	env_free(&env);
	clamp_region(b, buf->ndim, dim_iter, reg);

	move_out(nest);
	build_nest(p, b, buf->ndim, dim_iter, reg, loop, stmt_index(after) + 1);
	return 0;
}
