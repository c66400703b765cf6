/*
 * layout.c — putting a block into the form of a tensor intrinsic:
 * transform_block_layout, reindex and pad_einsum.
 *
 * A convolution computes Y[n,h,w,co] += X[n, h*st + r*d, w*st + s*d, ci] *
 * W[r,s,ci,co] with seven iterators; a 16x16x16 matrix-multiply intrinsic has
 * three.  The three primitives bridge the two, as in TensorIR:
 *  - transform_block_layout fuses groups of the block's iterators into one
 *    iterator each (n,h,w -> m; co -> n; r,s,ci -> k): the block's accesses
 *    become expressions of the fused iterators (floordiv/floormod);
 *  - reindex gives one access of the block a buffer of its own indexed by the
 *    iterators it uses (X_reindex[m][k], the im2col matrix), filled (read) or
 *    written back (write) by a stage block, so the block reads and writes
 *    plain [m][k], [k][n], [m][n] matrices;
 *  - pad_einsum rounds iterator extents up to multiples of the intrinsic's
 *    tile, with zero-filled padded inputs and a cropping stage for the
 *    output.
 * The stages are ordinary blocks: the sketch inlines the input stages into
 * its shared-memory fetch (so the im2col matrix is never materialized) and
 * runs the output stage as the write-back.
 *
 * All three want a fresh nest: one loop per iterator, bound one to one, with
 * nothing else inside (what the compute definition builds).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sched.h"

/* pad_einsum adds at most this much, or the extent itself if larger */
#define PAD_MAX_ADDED 1024
/* rfactor makes at most this many partial sums */
#define RFACTOR_MAX_PARTS 64

/* The loops of a fresh nest around b, loop[i] binding iterator i; returns
 * the outermost of them or NULL with a message. */
static tir_stmt *fresh_nest(const tir_block *b, tir_stmt **loop, tir_error *err)
{
	tir_stmt *l[TIR_MAX_IO];
	int n = stmt_loops(b->stmt, l, TIR_MAX_IO);
	if (b->predicate) {
		tir_fail(err, "block \"%s\" has a predicate; it needs a fresh loop nest", b->name);
		return NULL;
	}
	if (n < b->niters) {
		tir_fail(err, "block \"%s\" has %d iterators but %d loops; it needs a fresh loop nest",
			 b->name, b->niters, n);
		return NULL;
	}
	/* the innermost niters loops, perfectly nested, each binding one iterator */
	tir_stmt *const *in = l + (n - b->niters);
	for (int i = 0; i < b->niters; i++)
		loop[i] = NULL;
	for (int j = 0; j < b->niters; j++) {
		const tir_stmt *q = in[j];
		if (q->nkids != 1 || q->loop_kind != LOOP_SERIAL) {
			tir_fail(err, "loop \"%s\" around block \"%s\" is %s; it needs a fresh loop nest",
				 q->var->name, b->name, q->nkids != 1 ? "not a perfect nest" : "not serial");
			return NULL;
		}
		int it = -1;
		for (int i = 0; i < b->niters; i++)
			if (b->iters[i].binding->kind == E_VAR && b->iters[i].binding->var == q->var)
				it = i;
		if (it < 0 || loop[it] || q->extent != b->iters[it].extent) {
			tir_fail(err, "loop \"%s\" does not bind one iterator of block \"%s\" over its domain; it needs a fresh loop nest",
				 q->var->name, b->name);
			return NULL;
		}
		loop[it] = (tir_stmt *)q;
	}
	return in[0];
}

/* Replaces the fresh nest of b (outermost loop `outer`) by a new one over
 * b's current iterators, at the same place. */
static void renest(tir_program *p, tir_block *b, tir_stmt *outer)
{
	tir_stmt *parent = outer->parent;
	int pos = stmt_index(outer);
	stmt_remove(outer);
	for (tir_stmt *q = outer; q && q->kind == STMT_FOR; q = q->nkids ? q->kids[0] : NULL)
		q->dead = true;
	b->stmt->dead = true;
	stmt_insert(parent, pos, program_nest(p, b, NULL));
}

/* ---- transform_block_layout ------------------------------------------------- */

/* One element of a group: iterator `it` whole (split 0), or the outer
 * (it / split) or inner (it % split) part of it. */
typedef struct iter_part {
	int it;
	int64_t split;
	bool inner;
} iter_part;

static int64_t part_extent(const tir_block *b, const iter_part *q)
{
	int64_t e = b->iters[q->it].extent;
	return !q->split ? e : q->inner ? q->split : e / q->split;
}

/* Parses "0,1,2;3/32;3%32;4,5,6" into groups of iterator parts: each
 * iterator once, whole, or split by a factor of its extent into an outer
 * ("i/f") and an inner ("i%f") part that both appear (with `all`, every
 * iterator of b). */
static int parse_groups(const tir_block *b, const char *what, const char *s, int *ngroups,
			int *gsize, iter_part groups[][TIR_MAX_ITERS], bool all, tir_error *err)
{
	int seen[TIR_MAX_ITERS] = { 0 };       /* bit 1: whole or outer, bit 2: inner */
	int64_t split[TIR_MAX_ITERS] = { 0 };
	int ng = 0;
	const char *c = s;
	if (!s || !*s)
		return tir_fail(err, "no iterator %s", what);
	gsize[0] = 0;
	while (*c) {
		char *end;
		long v = strtol(c, &end, 10);
		if (end == c || v < 0 || v >= b->niters)
			return tir_fail(err, "%s \"%s\": expected iterator indices 0..%d of block \"%s\"",
					what, s, b->niters - 1, b->name);
		iter_part q = { (int)v, 0, false };
		c = end;
		if (*c == '/' || *c == '%') {
			q.inner = *c == '%';
			long long f = strtoll(c + 1, &end, 10);
			if (end == c + 1 || f < 2 || b->iters[v].extent % f)
				return tir_fail(err, "%s \"%s\": iterator %ld (extent %lld) split by %lld: not a factor above 1",
						what, s, v, (long long)b->iters[v].extent, f);
			if (split[v] && split[v] != f)
				return tir_fail(err, "%s \"%s\": iterator %ld split two ways", what, s, v);
			split[v] = f;
			q.split = f;
			c = end;
		}
		int bit = q.inner ? 2 : 1;
		if (seen[v] & bit || (seen[v] && !q.split) || (seen[v] && !split[v]))
			return tir_fail(err, "%s \"%s\": iterator %ld appears twice", what, s, v);
		seen[v] |= bit;
		if (gsize[ng] >= TIR_MAX_ITERS)
			return tir_fail(err, "%s \"%s\": too many parts in group %d", what, s, ng);
		groups[ng][gsize[ng]++] = q;
		if ((*c == ',' || *c == ';') && !c[1])
			return tir_fail(err, "%s \"%s\": ends with '%c'", what, s, *c);
		if (*c == ',') {
			c++;
		} else if (*c == ';') {
			c++;
			if (++ng >= TIR_MAX_ITERS)
				return tir_fail(err, "%s \"%s\": too many groups", what, s);
			gsize[ng] = 0;
		} else if (*c) {
			return tir_fail(err, "%s \"%s\": unexpected '%c'", what, s, *c);
		}
	}
	ng++;
	for (int g = 0; g < ng; g++)
		if (!gsize[g])
			return tir_fail(err, "%s \"%s\": group %d is empty", what, s, g);
	int missing = 0;
	for (int i = 0; i < b->niters; i++) {
		if (split[i] && seen[i] != 3)
			return tir_fail(err, "%s \"%s\": iterator %d has only one of its parts", what, s, i);
		missing += !seen[i];
	}
	if (all && missing)
		return tir_fail(err, "%s \"%s\": %d of the %d iterators of block \"%s\" are in no group",
				what, s, missing, b->niters, b->name);
	*ngroups = ng;
	return 0;
}

/* transform_block_layout(block, "groups"): each group of iterators (indices,
 * comma-separated; groups separated by ';'; outermost first) becomes one
 * iterator ranging over the product of their extents, row-major within the
 * group; the old iterators are recovered from it by floordiv and floormod.
 * An iterator can be split in two parts placed in different groups: "i/f"
 * (i // f) and "i%f" (i % f), f a factor of its extent.  The groups are the
 * new loop order.  Requires a fresh nest, and the iterators of a group of one
 * kind. */
int prim_transform_block_layout(tir_sched *s, tir_inst *in, tir_error *err)
{
	tir_program *p = s->p;
	if (in->nin != 1)
		return tir_fail(err, "takes one block");
	tir_block *b = sched_block(s, in->in[0], err);
	if (!b)
		return -1;
	int ng = 0, gsize[TIR_MAX_ITERS];
	iter_part groups[TIR_MAX_ITERS][TIR_MAX_ITERS];
	if (parse_groups(b, "groups", in->str, &ng, gsize, groups, true, err))
		return -1;
	tir_stmt *loop[TIR_MAX_ITERS], *outer = fresh_nest(b, loop, err);
	if (!outer)
		return -1;
	int64_t ext[TIR_MAX_ITERS];
	for (int g = 0; g < ng; g++) {
		ext[g] = 1;
		for (int j = 0; j < gsize[g]; j++) {
			const tir_iter *it = &b->iters[groups[g][j].it];
			if (it->kind != b->iters[groups[g][0].it].kind)
				return tir_fail(err, "group %d mixes spatial and reduction iterators (\"%s\", \"%s\")",
						g, b->iters[groups[g][0].it].var->name, it->var->name);
			int64_t e = part_extent(b, &groups[g][j]);
			if (ext[g] > INT64_MAX / e)
				return tir_fail(err, "group %d: the fused extent overflows", g);
			ext[g] *= e;
		}
	}

	tir_iter old[TIR_MAX_ITERS];
	memcpy(old, b->iters, sizeof old);
	tir_arena *a = &p->arena;
	tir_subst sub = { p->nvars + ng, xcalloc((size_t)(p->nvars + ng) + 1, sizeof(tir_expr *)) };
	tir_expr *outer_of[TIR_MAX_ITERS] = { NULL }, *inner_of[TIR_MAX_ITERS] = { NULL };
	int64_t split_of[TIR_MAX_ITERS] = { 0 };
	b->niters = 0;
	for (int g = 0; g < ng; g++) {
		tir_buf name = { 0 };
		for (int j = 0; j < gsize[g]; j++)
			buf_printf(&name, "%s%s%s", j ? "_" : "", old[groups[g][j].it].var->name,
				   !groups[g][j].split ? "" : groups[g][j].inner ? "_i" : "_o");
		char *nm = buf_take(&name);
		tir_var *u = program_var(p, nm);
		free(nm);
		block_add_iter(b, u, ext[g], old[groups[g][0].it].kind, NULL);
		int64_t stride = ext[g];
		for (int j = 0; j < gsize[g]; j++) {
			const iter_part *q = &groups[g][j];
			int64_t e = !q->split ? old[q->it].extent : q->inner ? q->split
								   : old[q->it].extent / q->split;
			stride /= e;
			tir_expr *v = mk_var(a, u);
			if (j > 0)
				v = mk_floormod(a, mk_floordiv(a, v, mk_int(a, stride)), mk_int(a, e));
			else
				v = mk_floordiv(a, v, mk_int(a, stride));
			if (!q->split)
				sub.map[old[q->it].var->id] = v;
			else if (q->inner)
				inner_of[q->it] = v;
			else
				outer_of[q->it] = v;
			split_of[q->it] = q->split;
		}
	}
	for (int i = 0; i < TIR_MAX_ITERS; i++)
		if (split_of[i])
			sub.map[old[i].var->id] = mk_add(a, mk_mul(a, outer_of[i],
								   mk_int(a, split_of[i])), inner_of[i]);
	tir_env env = sched_iter_env(p, b);
	for (int d = 0; d < b->store->ndim; d++)
		b->store_idx[d] = expr_simplify(a, expr_subst(a, b->store_idx[d], &sub), &env);
	b->value = expr_simplify(a, expr_subst(a, b->value, &sub), &env);
	if (b->init)
		b->init = expr_simplify(a, expr_subst(a, b->init, &sub), &env);
	env_free(&env);
	free(sub.map);
	renest(p, b, outer);
	block_update_regions(p, b);
	return 0;
}

/* ---- stages at the top level ---------------------------------------------------- */

/* Where a stage feeding block b from buffer buf goes: at the top level after
 * the last writer of buf and before b's nest. */
int sched_input_stage_pos(const tir_program *p, const tir_block *b, const tir_buffer *buf,
			  tir_error *err)
{
	tir_stmt *top = sched_top_stmt(b->stmt);
	int pos = stmt_index(top);
	for (int i = 0; i < p->nblocks; i++) {
		const tir_block *w = p->blocks[i];
		if (!w->stmt || w == b || w->store != buf)
			continue;
		tir_stmt *wt = sched_top_stmt(w->stmt);
		if (wt == top || stmt_index(wt) > stmt_index(top))
			return tir_fail(err, "block \"%s\" writes \"%s\" in or after the loop nest of block \"%s\"",
					w->name, buf->name, b->name);
	}
	return pos;
}

/* Whether another block writes buf or reads it in or before b's nest. */
static int check_output_stage(const tir_program *p, const tir_block *b, tir_error *err)
{
	const tir_buffer *buf = b->store;
	int t = stmt_index(sched_top_stmt(b->stmt));
	for (int i = 0; i < p->nblocks; i++) {
		const tir_block *c = p->blocks[i];
		if (!c->stmt || c == b)
			continue;
		if (c->store == buf)
			return tir_fail(err, "block \"%s\" also writes \"%s\"; block \"%s\" must be its only producer",
					c->name, buf->name, b->name);
		for (int r = 0; r < c->nreads; r++)
			if (c->reads[r].buf == buf && stmt_index(sched_top_stmt(c->stmt)) <= t)
				return tir_fail(err, "block \"%s\" reads \"%s\" in or before the loop nest of block \"%s\"",
						c->name, buf->name, b->name);
	}
	return 0;
}

/* A spatial block `name` storing dst[w0..] over `ext`, with the value given
 * in its own iterators, nested fresh at the top level at pos. */
tir_block *sched_stage_block(tir_program *p, const char *name, tir_buffer *dst, int n,
			     const int64_t *ext, tir_var **w, tir_expr *const *store_idx,
			     tir_expr *value, int pos)
{
	tir_block *c = block_new(p, name);
	for (int d = 0; d < n; d++)
		block_add_iter(c, w[d], ext[d], ITER_SPATIAL, NULL);
	c->store = dst;
	memcpy(c->store_idx, store_idx, sizeof(tir_expr *) * (size_t)dst->ndim);
	c->value = value;
	c->reduce = REDUCE_NONE;
	block_update_regions(p, c);
	stmt_insert(p->root, pos, program_nest(p, c, NULL));
	return c;
}

/* The one index list with which e loads buf: NULL if e never loads it, or
 * with *mixed set when it loads it at different indices. */
struct one_load {
	const tir_buffer *buf;
	tir_expr *load;
	bool mixed;
};

static void find_load(tir_expr *load, void *ctx)
{
	struct one_load *o = ctx;
	if (load->buf != o->buf)
		return;
	if (o->load && !expr_equal(o->load, load))
		o->mixed = true;
	else
		o->load = load;
}

static tir_expr *the_load(tir_expr *value, const tir_buffer *buf, const tir_block *b,
			  tir_error *err)
{
	struct one_load o = { buf, NULL, false };
	expr_visit_loads(value, find_load, &o);
	if (o.mixed) {
		tir_fail(err, "block \"%s\" reads \"%s\" at more than one index", b->name, buf->name);
		return NULL;
	}
	if (!o.load)
		tir_fail(err, "block \"%s\" does not load \"%s\"", b->name, buf->name);
	return o.load;
}

/* ---- reindex ---------------------------------------------------------------------- */

/* reindex(block, kind, index[, "dims"]): kind 0 reindexes read `index` of
 * the block, kind 1 its write (index 0).  The access gets a buffer
 * `<buf>_reindex` of its own, with one dimension per block iterator the
 * access uses, over their domains, indexed by those iterators: in the order
 * they first appear in its indices (which keeps the innermost dimension's
 * contiguity), or in the order "dims" lists them (iterator indices,
 * comma-separated); a stage block copies the original buffer into it (read:
 * before the block, at the top level) or out of it (write: after).  A
 * reduction accumulates in the new buffer.  Returns the stage block. */
int prim_reindex(tir_sched *s, tir_inst *in, tir_error *err)
{
	tir_program *p = s->p;
	tir_arena *a = &p->arena;
	if (in->nin != 1 || in->nattr != 2)
		return tir_fail(err, "takes a block, a kind (0 read, 1 write) and an index");
	tir_block *b = sched_block(s, in->in[0], err);
	if (!b)
		return -1;
	int64_t kind = in->attr[0], index = in->attr[1];
	if (kind != 0 && kind != 1)
		return tir_fail(err, "kind %lld: expected 0 (read) or 1 (write)", (long long)kind);
	tir_buffer *buf;
	tir_expr *const *idx;
	int nidx;
	if (kind == 0) {
		if (index < 0 || index >= b->nreads)
			return tir_fail(err, "block \"%s\" has %d read regions; read index %lld is out of range",
					b->name, b->nreads, (long long)index);
		buf = b->reads[index].buf;
		if (buf == b->store)
			return tir_fail(err, "read %lld of block \"%s\" is its own output \"%s\"; reindex the write",
					(long long)index, b->name, buf->name);
		tir_expr *load = the_load(b->value, buf, b, err);
		if (!load)
			return -1;
		idx = load->idx;
		nidx = load->nidx;
	} else {
		if (index != 0)
			return tir_fail(err, "block \"%s\" writes one buffer; write index %lld is out of range",
					b->name, (long long)index);
		buf = b->store;
		idx = b->store_idx;
		nidx = buf->ndim;
		if (check_output_stage(p, b, err))
			return -1;
	}
	/* the iterators the access uses, in order of first appearance or
	 * in the block's order */
	int used[TIR_MAX_ITERS], nu = 0;
	bool is_used[TIR_MAX_ITERS] = { false };
	for (int d = 0; d < nidx; d++)
		for (int i = 0; i < b->niters; i++)
			if (!is_used[i] && expr_uses_var(idx[d], b->iters[i].var)) {
				is_used[i] = true;
				used[nu++] = i;
			}
	if (in->str && *in->str) {
		int ng = 0, gsize[TIR_MAX_ITERS];
		iter_part g[TIR_MAX_ITERS][TIR_MAX_ITERS];
		if (parse_groups(b, "dims", in->str, &ng, gsize, g, false, err))
			return -1;
		if (ng != 1 || gsize[0] != nu)
			return tir_fail(err, "dims \"%s\": the access of \"%s\" uses %d iterators",
					in->str, buf->name, nu);
		for (int j = 0; j < nu; j++) {
			if (g[0][j].split)
				return tir_fail(err, "dims \"%s\": iterators are not split here", in->str);
			if (!is_used[g[0][j].it])
				return tir_fail(err, "dims \"%s\": the access of \"%s\" does not use iterator %d",
						in->str, buf->name, g[0][j].it);
			used[j] = g[0][j].it;
		}
	}
	if (nu == 0 || nu > TIR_MAX_DIMS)
		return tir_fail(err, "the access of \"%s\" in block \"%s\" uses %d iterators; reindex needs 1 to %d",
				buf->name, b->name, nu, TIR_MAX_DIMS);
	for (int j = 0; kind == 1 && j < nu; j++)
		if (b->iters[used[j]].kind != ITER_SPATIAL)
			return tir_fail(err, "block \"%s\" writes \"%s\" at reduction iterator \"%s\"",
					b->name, buf->name, b->iters[used[j]].var->name);
	int pos;
	if (kind == 0 && (pos = sched_input_stage_pos(p, b, buf, err)) < 0)
		return -1;
	if (kind == 1)
		pos = stmt_index(sched_top_stmt(b->stmt)) + 1;

	int64_t shape[TIR_MAX_DIMS];
	tir_var *w[TIR_MAX_DIMS];
	tir_expr *wv[TIR_MAX_DIMS], *uv[TIR_MAX_DIMS];
	tir_subst sub = { p->nvars + nu, xcalloc((size_t)(p->nvars + nu) + 1, sizeof(tir_expr *)) };
	for (int j = 0; j < nu; j++) {
		const tir_iter *it = &b->iters[used[j]];
		shape[j] = it->extent;
		w[j] = program_var(p, arena_printf(a, "v%d", j));
		wv[j] = mk_var(a, w[j]);
		uv[j] = mk_var(a, it->var);
		sub.map[it->var->id] = wv[j];
	}
	const char *name = program_fresh_name(p, arena_printf(a, "%s_reindex", buf->name));
	tir_buffer *rb = program_buffer(p, name, buf->dtype, nu, shape, TIR_SCOPE_GLOBAL, BUF_TEMP);
	/* the access in the stage's iterators */
	tir_expr *orig[TIR_MAX_DIMS];
	for (int d = 0; d < nidx; d++)
		orig[d] = expr_subst(a, idx[d], &sub);
	free(sub.map);
	tir_block *stage;
	if (kind == 0) {
		stage = sched_stage_block(p, name, rb, nu, shape, w, wv, mk_load(a, buf, nidx, orig), pos);
		b->value = expr_replace_loads(a, b->value, buf, mk_load(a, rb, nu, uv));
	} else {
		stage = sched_stage_block(p, name, buf, nu, shape, w, orig, mk_load(a, rb, nu, wv), pos);
		b->store = rb;
		memcpy(b->store_idx, uv, sizeof(tir_expr *) * (size_t)nu);
	}
	stage->name = name;
	block_update_regions(p, b);
	int rv = sched_new_rv(s, RV_BLOCK);
	s->rv[rv].block = stage;
	in->out[in->nout++] = rv;
	return 0;
}

/* ---- pad_einsum ------------------------------------------------------------------- */

struct pad_ctx {
	const tir_block *b;
	bool ok;
	const tir_buffer *bad;
};

static void check_plain(tir_expr *load, void *ctx)
{
	struct pad_ctx *c = ctx;
	int dim_iter[TIR_MAX_DIMS];
	if (!block_plain_access(c->b, load->nidx, load->idx, dim_iter) && c->ok) {
		c->ok = false;
		c->bad = load->buf;
	}
}

/* The value inputs are padded with for a block reducing by r: the
 * identity of a max or min (-inf, +inf, the lowest or highest integer),
 * zero otherwise (a sum; a block that does not reduce). */
static tir_expr *pad_value(tir_arena *a, tir_reduce r, tir_dtype t)
{
	if (r == REDUCE_MAX || r == REDUCE_MIN)
		return reduce_identity(a, r, t);
	return dtype_is_float(t) ? mk_float(a, 0.0, t) : mk_cast(a, t, mk_int(a, 0));
}

/* The value of a constant expression: E_FLOAT, E_INT, E_INT cast. */
static bool const_value(const tir_expr *e, double *v)
{
	if (e->kind == E_CAST && e->a->kind == E_INT)
		e = e->a;
	if (e->kind == E_FLOAT)
		*v = e->fval;
	else if (e->kind == E_INT)
		*v = (double)e->ival;
	else
		return false;
	return true;
}

/* What block b's value is at a point where padded iterator `var` is past
 * its old extent: every load indexed by it reads its buffer's pad value
 * (pad_value); the other loads and variables are unknown, assumed finite
 * (so 0 * x = 0 and -inf + x = -inf, as x may be any real number but no
 * infinity or NaN).  A partial constant folding over doubles. */
typedef struct pad_val {
	bool known;
	double v;
} pad_val;

static pad_val pad_eval(tir_arena *a, const tir_block *b, const tir_var *var,
			const tir_expr *e)
{
	pad_val r = { false, 0 }, x, y;
	double v;
	switch (e->kind) {
	case E_INT: case E_FLOAT:
		r.known = const_value(e, &r.v);
		return r;
	case E_VAR:
		return r;
	case E_LOAD:
		if (e->buf != b->store && expr_uses_var(e, var))
			r.known = const_value(pad_value(a, b->reduce, e->buf->dtype), &r.v);
		return r;
	case E_CAST:
		x = pad_eval(a, b, var, e->a);
		if (!x.known)
			return r;
		if (e->dtype == TIR_F32)
			x.v = (double)(float)x.v;
		else if (dtype_is_float(e->dtype))
			x.known = x.v == 0 || isinf(x.v) || isnan(x.v);  /* exact in 16 bits */
		else if (isfinite(x.v) && fabs(x.v) < 9e15)
			x.v = trunc(x.v);
		else
			x.known = false;
		return x;
	case E_CALL:
		x = pad_eval(a, b, var, e->a);
		if (!x.known)
			return r;
		switch (e->fn) {
		case FN_EXP: x.v = exp(x.v); break;
		case FN_TANH: x.v = tanh(x.v); break;
		case FN_ERF: x.v = erf(x.v); break;
		case FN_SQRT: x.v = sqrt(x.v); break;
		case FN_RSQRT: x.v = 1 / sqrt(x.v); break;
		case FN_SIGMOID: x.v = 1 / (1 + exp(-x.v)); break;
		case FN_GELU: x.v = x.v * 0.5 * (1 + erf(x.v / sqrt(2.0))); break;
		default: x.known = false; break;
		}
		return x;
	case E_SELECT: {
		pad_val c = pad_eval(a, b, var, e->c);
		x = pad_eval(a, b, var, e->a);
		y = pad_eval(a, b, var, e->b);
		if (c.known)
			return c.v != 0 ? x : y;
		if (x.known && y.known && x.v == y.v)
			return x;
		return r;
	}
	case E_NOT:
		x = pad_eval(a, b, var, e->a);
		x.v = x.v == 0;
		return x;
	default:
		break;
	}
	if (!e->a || !e->b)
		return r;
	x = pad_eval(a, b, var, e->a);
	y = pad_eval(a, b, var, e->b);
	if (!x.known || !y.known) {
		/* one side known: what it decides alone for a finite other side */
		pad_val k = x.known ? x : y;
		if (!k.known)
			return r;
		switch (e->kind) {
		case E_MUL:
			r.known = k.v == 0;
			break;
		case E_ADD:
			r.known = isinf(k.v);
			r.v = k.v;
			break;
		case E_SUB:
			r.known = isinf(k.v);
			r.v = x.known ? k.v : -k.v;
			break;
		case E_MAX:
			r.known = k.v == INFINITY;
			r.v = k.v;
			break;
		case E_MIN:
			r.known = k.v == -INFINITY;
			r.v = k.v;
			break;
		default:
			break;
		}
		return r;
	}
	r.known = true;
	bool fl = dtype_is_float(e->dtype);
	switch (e->kind) {
	case E_ADD: v = x.v + y.v; break;
	case E_SUB: v = x.v - y.v; break;
	case E_MUL: v = x.v * y.v; break;
	case E_DIV:
		if (!fl && y.v == 0)
			r.known = false;
		v = fl ? x.v / y.v : trunc(x.v / y.v);
		break;
	/* fmax / fmin: docs/ir-semantics.md */
	case E_MAX: v = fmax(x.v, y.v); break;
	case E_MIN: v = fmin(x.v, y.v); break;
	case E_LT: v = x.v < y.v; break;
	case E_LE: v = x.v <= y.v; break;
	case E_EQ: v = x.v == y.v; break;
	case E_NE: v = x.v != y.v; break;
	case E_AND: v = x.v != 0 && y.v != 0; break;
	case E_OR: v = x.v != 0 || y.v != 0; break;
	default: r.known = false; v = 0; break;     /* floordiv / floormod of values */
	}
	r.v = v;
	return r;
}

/* Whether b's value e contributes nothing at a point past the old extent
 * of padded iterator var: the reducer's identity; for a max or a min a NaN
 * too, which they skip (fmax, docs/ir-semantics.md), or the padded input
 * itself, widened (T.Cast("int32", A[i, k]) of int8 A): its pad value, the
 * lowest (highest) int8, is no more (less) than any value it has; or a
 * choice between two such values whatever the condition. */
static bool pads_to_identity(tir_arena *a, const tir_block *b, const tir_var *var,
			     const tir_expr *e)
{
	if (b->reduce == REDUCE_MAX || b->reduce == REDUCE_MIN) {
		const tir_expr *x = e->kind == E_CAST ? e->a : e;
		bool widens = x == e || (dtype_is_float(x->dtype) == dtype_is_float(e->dtype) &&
					 dtype_bytes(x->dtype) <= dtype_bytes(e->dtype));
		if (x->kind == E_LOAD && x->buf != b->store && expr_uses_var(x, var) && widens)
			return true;
	}
	pad_val v = pad_eval(a, b, var, e);
	if (v.known) {
		double id = 0;
		const_value(reduce_identity(a, b->reduce, b->store->dtype), &id);
		return v.v == id || (isnan(v.v) && b->reduce != REDUCE_SUM);
	}
	return e->kind == E_SELECT && pads_to_identity(a, b, var, e->a) &&
	       pads_to_identity(a, b, var, e->b);
}

/* Whether padding iterator i of b (to ext[i]) keeps b's meaning: every
 * dimension that a padded iterator indexes has exactly that iterator's old
 * extent (a larger buffer would be read, or written, past the domain); and
 * at a point past the old extent of a padded reduction iterator, where its
 * inputs read their pad value, the value contributes the reducer's
 * identity: for a sum, 0 where the padded inputs are 0 (a product with a
 * padded factor: A[i, k] * B[k, j]), not A[i, k] + 1; for a max, -inf where
 * they are -inf (A[i, k], a cast of it, A[i, k] + bias[i]).  Returns 0, or
 * -1 with a message naming the block. */
static int check_pad_meaning(tir_arena *a, const tir_block *b, const int64_t *ext,
			     tir_error *err)
{
	/* the accesses: the store and each load, one iterator per dimension */
	const tir_buffer *bufs[TIR_MAX_IO + 1];
	int iters[TIR_MAX_IO + 1][TIR_MAX_DIMS], n = 0;
	bufs[n] = b->store;
	block_plain_access(b, b->store->ndim, b->store_idx, iters[n++]);
	for (int r = 0; r < b->nreads && n <= TIR_MAX_IO; r++) {
		if (b->reads[r].buf == b->store)
			continue;
		tir_expr *load = the_load(b->value, b->reads[r].buf, b, err);
		if (!load)
			return -1;
		bufs[n] = load->buf;
		block_plain_access(b, load->nidx, load->idx, iters[n++]);
	}
	for (int k = 0; k < n; k++)
		for (int d = 0; d < bufs[k]->ndim; d++) {
			const tir_iter *it = &b->iters[iters[k][d]];
			if (ext[iters[k][d]] != it->extent && bufs[k]->shape[d] != it->extent)
				return tir_fail(err, "block \"%s\" indexes dimension %d of \"%s\" (extent %lld) "
						"with iterator \"%s\" of extent %lld: padding it would "
						"%s elements outside its domain", b->name, d, bufs[k]->name,
						(long long)bufs[k]->shape[d], it->var->name,
						(long long)it->extent, k ? "read" : "write");
		}
	if (!block_is_reduction(b))
		return 0;
	for (int i = 0; i < b->niters; i++) {
		const tir_iter *it = &b->iters[i];
		if (it->kind != ITER_REDUCE || ext[i] == it->extent)
			continue;
		if (pads_to_identity(a, b, it->var, b->value))
			continue;
		double id = 0;
		const_value(reduce_identity(a, b->reduce, b->store->dtype), &id);
		pad_val v = pad_eval(a, b, it->var, b->value);
		char what[64] = "not a constant";
		if (v.known)
			snprintf(what, sizeof what, "%g", v.v);
		return tir_fail(err, "block \"%s\" cannot pad reduction iterator \"%s\" from %lld "
				"to %lld: where its inputs are padded (with %s) the value is %s, "
				"not the %s's identity %g", b->name, it->var->name,
				(long long)it->extent, (long long)ext[i],
				b->reduce == REDUCE_SUM ? "0" : b->reduce == REDUCE_MAX ? "the lowest value"
				: "the highest value", what, reduce_name(b->reduce), id);
	}
	return 0;
}

/* pad_einsum(block, f0, f1, ...): rounds the extent of iterator i up to a
 * multiple of f_i (1: unchanged).  Every input the padded iterators index
 * is read through a padded copy `<buf>_pad` (a stage block before the
 * block), filled past the old extents with 0, or for a max / min reduction
 * with its identity (-inf / +inf, the lowest / highest integer); the output
 * is written to `<buf>_pad` and cropped back by a stage block after it.
 * Requires a fresh nest; an einsum: every access indexes each dimension
 * with one iterator, every dimension a padded iterator indexes of its
 * extent, and a constant init; and, for each padded reduction iterator, a
 * value that is the reducer's identity where its inputs are padded (a sum
 * of products, not of A[i, k] + 1: check_pad_meaning).  Returns the
 * cropping stage; when every extent is a multiple of its factor already, it
 * changes nothing. */
int prim_pad_einsum(tir_sched *s, tir_inst *in, tir_error *err)
{
	tir_program *p = s->p;
	tir_arena *a = &p->arena;
	if (in->nin < 2)
		return tir_fail(err, "takes a block and one factor per iterator");
	tir_block *b = sched_block(s, in->in[0], err);
	if (!b)
		return -1;
	if (in->nin - 1 != b->niters)
		return tir_fail(err, "block \"%s\" has %d iterators; %d factors given",
				b->name, b->niters, in->nin - 1);
	int64_t ext[TIR_MAX_ITERS];
	bool any = false;
	for (int i = 0; i < b->niters; i++) {
		int64_t f;
		if (sched_value(s, in->in[1 + i], &f, err))
			return -1;
		if (f < 1 || f > (1 << 20))
			return tir_fail(err, "factor %lld for iterator \"%s\" is not in 1..%d",
					(long long)f, b->iters[i].var->name, 1 << 20);
		int64_t e = b->iters[i].extent;
		ext[i] = (e + f - 1) / f * f;
		if (ext[i] - e > (e > PAD_MAX_ADDED ? e : PAD_MAX_ADDED))
			return tir_fail(err, "factor %lld pads iterator \"%s\" from %lld to %lld: more than doubles it",
					(long long)f, b->iters[i].var->name, (long long)e, (long long)ext[i]);
		any = any || ext[i] != e;
	}
	if (!any)
		return 0;       /* every extent is a multiple of its factor already */
	tir_stmt *loop[TIR_MAX_ITERS];
	if (!fresh_nest(b, loop, err))
		return -1;
	int store_dims[TIR_MAX_DIMS];
	struct pad_ctx pc = { b, true, NULL };
	expr_visit_loads(b->value, check_plain, &pc);
	if (!pc.ok || !block_plain_access(b, b->store->ndim, b->store_idx, store_dims))
		return tir_fail(err, "block \"%s\" is not an einsum: it accesses \"%s\" at other than one iterator per dimension",
				b->name, pc.ok ? b->store->name : pc.bad->name);
	double init;
	if (b->init && !const_value(b->init, &init))   /* an integer one is a cast */
		return tir_fail(err, "block \"%s\" has an init that is not a constant", b->name);
	if (check_pad_meaning(a, b, ext, err))
		return -1;
	for (int r = 0; r < b->nreads; r++)
		if (b->reads[r].buf != b->store && sched_input_stage_pos(p, b, b->reads[r].buf, err) < 0)
			return -1;
	if (check_output_stage(p, b, err))
		return -1;

	/* the inputs: a padded copy of each buffer a padded iterator indexes */
	int nreads = b->nreads;
	tir_buffer *reads[TIR_MAX_IO];
	for (int r = 0; r < nreads && r < TIR_MAX_IO; r++)
		reads[r] = b->reads[r].buf;
	for (int r = 0; r < nreads && r < TIR_MAX_IO; r++) {
		tir_buffer *x = reads[r];
		if (x == b->store)
			continue;
		tir_expr *load = the_load(b->value, x, b, err);
		if (!load)
			return -1;        /* not reached: checked above */
		int dim_iter[TIR_MAX_DIMS];
		block_plain_access(b, load->nidx, load->idx, dim_iter);
		int64_t shape[TIR_MAX_DIMS];
		bool padded = false;
		for (int d = 0; d < x->ndim; d++) {
			shape[d] = x->shape[d];
			if (ext[dim_iter[d]] > shape[d]) {
				shape[d] = ext[dim_iter[d]];
				padded = true;
			}
		}
		if (!padded)
			continue;
		const char *name = program_fresh_name(p, arena_printf(a, "%s_pad", x->name));
		tir_buffer *xp = program_buffer(p, name, x->dtype, x->ndim, shape, TIR_SCOPE_GLOBAL,
						BUF_TEMP);
		tir_var *w[TIR_MAX_DIMS];
		tir_expr *wv[TIR_MAX_DIMS], *in_bounds = NULL;
		for (int d = 0; d < x->ndim; d++) {
			w[d] = program_var(p, arena_printf(a, "v%d", d));
			wv[d] = mk_var(a, w[d]);
			if (shape[d] > x->shape[d])
				in_bounds = mk_and(a, in_bounds,
						   mk_bin(a, E_LT, wv[d], mk_int(a, x->shape[d])));
		}
		tir_expr *v = mk_select(a, in_bounds, mk_load(a, x, x->ndim, wv),
					pad_value(a, b->reduce, x->dtype));
		int pos = sched_input_stage_pos(p, b, x, err);
		tir_block *st = sched_stage_block(p, name, xp, x->ndim, shape, w, wv, v, pos);
		st->name = name;
		b->value = expr_replace_buffer(a, b->value, x, xp);
	}

	/* the output: computed padded, cropped after */
	tir_buffer *y = b->store;
	int64_t shape[TIR_MAX_DIMS];
	bool padded = false;
	for (int d = 0; d < y->ndim; d++) {
		shape[d] = y->shape[d];
		if (ext[store_dims[d]] > shape[d]) {
			shape[d] = ext[store_dims[d]];
			padded = true;
		}
	}
	tir_block *crop = NULL;
	if (padded) {
		const char *name = program_fresh_name(p, arena_printf(a, "%s_pad", y->name));
		tir_buffer *yp = program_buffer(p, name, y->dtype, y->ndim, shape, TIR_SCOPE_GLOBAL,
						BUF_TEMP);
		tir_var *w[TIR_MAX_DIMS];
		tir_expr *wv[TIR_MAX_DIMS];
		for (int d = 0; d < y->ndim; d++) {
			w[d] = program_var(p, arena_printf(a, "v%d", d));
			wv[d] = mk_var(a, w[d]);
		}
		int pos = stmt_index(sched_top_stmt(b->stmt)) + 1;
		crop = sched_stage_block(p, arena_printf(a, "%s_crop", y->name), y, y->ndim, y->shape, w,
				   wv, mk_load(a, yp, y->ndim, wv), pos);
		b->store = yp;
	}
	for (int i = 0; i < b->niters; i++) {
		b->iters[i].extent = ext[i];
		loop[i]->extent = ext[i];
	}
	block_update_regions(p, b);
	if (crop) {
		int rv = sched_new_rv(s, RV_BLOCK);
		s->rv[rv].block = crop;
		in->out[in->nout++] = rv;
	}
	return 0;
}

/* ---- rfactor ---------------------------------------------------------------------- */

/* rfactor(block, iterator, factor[, interleaved]): splits the reduction
 * over `iterator` (extent E) into `factor` independent partial reductions
 * over E / factor values each — consecutive ones (part p reduces
 * p * E / factor + k), or, with the attribute interleaved = 1, every
 * factor-th one (part p reduces k * factor + p: the parts read adjacent
 * elements where the iterator indexes an innermost dimension, so a loop over
 * them vectorizes) — the block gets a spatial iterator in front (the
 * partial's index) and writes `<out>_rf[partial, ...]`, each partial
 * starting at the reducer's identity (0, -inf, +inf); a new reduction block
 * `<out>_rf_<reducer>` after it (`<out>_rf_sum`, `_rf_max`, `_rf_min`)
 * combines the partials into the output with the same reducer, starting at
 * the block's own init.  The partials can then run in parallel (split-K).
 * Factor 1 changes nothing.  Requires a fresh nest, a reduction (any
 * reducer) that still has its init, and E a multiple of factor.  Returns
 * the combining block. */
int prim_rfactor(tir_sched *s, tir_inst *in, tir_error *err)
{
	tir_program *p = s->p;
	tir_arena *a = &p->arena;
	if (in->nin != 2 || in->nattr < 1 || in->nattr > 2 ||
	    (in->nattr == 2 && in->attr[1] != 0 && in->attr[1] != 1))
		return tir_fail(err, "takes a block, an iterator index, a factor and whether the parts interleave (0 or 1)");
	bool interleaved = in->nattr == 2 && in->attr[1] == 1;
	tir_block *b = sched_block(s, in->in[0], err);
	if (!b)
		return -1;
	int64_t it = in->attr[0], f;
	if (sched_value(s, in->in[1], &f, err))
		return -1;
	if (it < 0 || it >= b->niters)
		return tir_fail(err, "block \"%s\" has %d iterators; iterator %lld is out of range",
				b->name, b->niters, (long long)it);
	tir_iter *k = &b->iters[it];
	if (k->kind != ITER_REDUCE)
		return tir_fail(err, "iterator \"%s\" of block \"%s\" is not a reduction", k->var->name,
				b->name);
	if (!block_is_reduction(b) || !b->init)
		return tir_fail(err, "block \"%s\" is not a reduction with its init", b->name);
	if (f < 1 || k->extent % f)
		return tir_fail(err, "factor %lld does not divide the extent %lld of iterator \"%s\"",
				(long long)f, (long long)k->extent, k->var->name);
	if (f > RFACTOR_MAX_PARTS)
		return tir_fail(err, "factor %lld: at most %d partial sums (each a copy of the output)",
				(long long)f, RFACTOR_MAX_PARTS);
	if (f == 1)
		return 0;
	if (b->niters >= TIR_MAX_ITERS || b->store->ndim >= TIR_MAX_DIMS)
		return tir_fail(err, "block \"%s\" has no room for another iterator or dimension",
				b->name);
	tir_stmt *loop[TIR_MAX_ITERS], *outer = fresh_nest(b, loop, err);
	if (!outer || check_output_stage(p, b, err))
		return -1;

	tir_buffer *out = b->store;
	int64_t shape[TIR_MAX_DIMS];
	shape[0] = f;
	memcpy(shape + 1, out->shape, sizeof(int64_t) * (size_t)out->ndim);
	const char *name = program_fresh_name(p, arena_printf(a, "%s_rf", out->name));
	tir_buffer *rf = program_buffer(p, name, out->dtype, out->ndim + 1, shape,
					TIR_SCOPE_GLOBAL, BUF_TEMP);
	/* k = part * (E / f) + k' (interleaved: k' * f + part), the part a new
	 * outermost spatial iterator */
	int64_t chunk = k->extent / f;
	tir_var *part = program_var(p, arena_printf(a, "%s_rf", k->var->name));
	tir_subst sub = { p->nvars, xcalloc((size_t)p->nvars + 1, sizeof(tir_expr *)) };
	sub.map[k->var->id] = interleaved
		? mk_add(a, mk_mul(a, mk_var(a, k->var), mk_int(a, f)), mk_var(a, part))
		: mk_add(a, mk_mul(a, mk_var(a, part), mk_int(a, chunk)), mk_var(a, k->var));
	b->value = expr_subst(a, b->value, &sub);
	free(sub.map);
	k->extent = chunk;
	memmove(&b->iters[1], &b->iters[0], sizeof(tir_iter) * (size_t)b->niters);
	b->niters++;
	b->iters[0] = (tir_iter){ part, f, ITER_SPATIAL, NULL };
	tir_expr *idx[TIR_MAX_DIMS];
	idx[0] = mk_var(a, part);
	memcpy(idx + 1, b->store_idx, sizeof(tir_expr *) * (size_t)out->ndim);
	b->store = rf;
	memcpy(b->store_idx, idx, sizeof(tir_expr *) * (size_t)rf->ndim);
	/* each partial starts at the identity, the output at the init: an init
	 * other than the identity must count once, not once a partial.  A sum's
	 * init of 0 is its identity already and stays the same expression. */
	tir_expr *init = b->init;
	if (!reduce_is_identity(b->reduce, init))
		b->init = reduce_identity(a, b->reduce, rf->dtype);
	int pos = stmt_index(sched_top_stmt(b->stmt)) + 1;
	renest(p, b, outer);
	tir_env env = sched_iter_env(p, b);
	b->value = expr_simplify(a, b->value, &env);
	env_free(&env);
	block_update_regions(p, b);

	/* out[v] = the reduction over parts of rf[part, v] */
	tir_block *sum = block_new(p, arena_printf(a, "%s_%s", name, reduce_name(b->reduce)));
	tir_expr *v[TIR_MAX_DIMS], *ridx[TIR_MAX_DIMS];
	for (int d = 0; d < out->ndim; d++) {
		tir_var *w = program_var(p, arena_printf(a, "v%d", d));
		block_add_iter(sum, w, out->shape[d], ITER_SPATIAL, NULL);
		v[d] = ridx[d + 1] = mk_var(a, w);
	}
	tir_var *r = program_var(p, "vpart");
	block_add_iter(sum, r, f, ITER_REDUCE, NULL);
	ridx[0] = mk_var(a, r);
	sum->store = out;
	memcpy(sum->store_idx, v, sizeof(tir_expr *) * (size_t)out->ndim);
	sum->value = mk_load(a, rf, rf->ndim, ridx);
	sum->reduce = b->reduce;
	sum->init = init;
	block_update_regions(p, sum);
	stmt_insert(p->root, pos, program_nest(p, sum, NULL));
	int rv = sched_new_rv(s, RV_BLOCK);
	s->rv[rv].block = sum;
	in->out[in->nout++] = rv;
	return 0;
}
