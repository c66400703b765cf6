/*
 * rows.c — scheduling what the heavy rules leave: row groups, pointwise
 * kernels and cheap inlining, the same walk on every target (the target's
 * parts are the callbacks of a sketch_rest, cpu_rows.c and gpu_rows.c).
 *
 * Design.  The blocks left are the free ones (sketch_block_free: as the
 * program built them) that are not heavy, visited in post-order
 * (sketch_post_order: from the outputs back), as TensorIR's sketch
 * generation visits blocks and as its cross-thread reduction rule places a
 * reduction: under the loop of its consumer (compute_at), not the consumer
 * under the reduction.  Each block, when the walk reaches it unvisited:
 *
 *   1. is inlined into its consumers where that recomputes nothing
 *      (cheap_to_inline: a copy, a cast, a constant, or a value read once by
 *      one block) and none is tensorized (an inlined operand is no load);
 *   2. else anchors a group when it is a reduction (its spatial loops are the
 *      row) or reads a reduction that the walk has yet to reach (its loops
 *      along the dims of that reduction's output are the row: softmax's
 *      normalization, layernorm's scale and shift, seed10's centring): the
 *      row loops are put outermost and fused into one row loop, and the
 *      blocks the walk reaches later that write what the group reads join it
 *      (compute_at under the row loop) where each row then computes its own
 *      part of their output and nothing twice (joins) and the target admits
 *      them (a shared buffer must fit, ...).  So a softmax becomes one row
 *      loop holding its max, its sum and its normalization, a layernorm its
 *      two means and the rest; a reduction that something outside the group
 *      reads, or that the group reads across rows, is left to anchor its
 *      own group.  The target then schedules the group (sketch_rest.group):
 *      parallel rows and vector loops on a CPU, a thread block or a thread
 *      per row on a GPU;
 *   3. else is a pointwise kernel of its own (sketch_rest.pointwise).
 *
 * A row's coordinates are the anchor's row iterators of more than one
 * element; each member's iterators map to them (sketch_group.coord) through
 * the indices by which members read what it writes.
 */
#include <string.h>
#include "sketch.h"

/* Loads of buf in e. */
static int count_loads(const tir_expr *e, const tir_buffer *buf)
{
	if (!e)
		return 0;
	int n = e->kind == E_LOAD && e->buf == buf;
	n += count_loads(e->a, buf) + count_loads(e->b, buf) + count_loads(e->c, buf);
	for (int i = 0; i < e->nidx; i++)
		n += count_loads(e->idx[i], buf);
	return n;
}

/* Whether inlining spatial block b into its consumers recomputes nothing:
 * its value is a copy (a load, maybe converted) or a constant, or a single
 * block reads it, once, and is not heavy (a heavy block reads each input
 * many times). */
static bool tensorized(const tir_block *b)
{
	for (const tir_stmt *q = b->stmt ? b->stmt->parent : NULL; q; q = q->parent)
		if (q->kind == STMT_FOR && intrin_of_loop(q))
			return true;
	return false;
}

static bool cheap_to_inline(const tir_program *p, const tir_block *b)
{
	if (block_is_reduction(b) || b->store->role != BUF_TEMP)
		return false;
	/* never into a tensorized block: its operand would stop being a load
	 * (an im2col copy inlined into sdot's nest reads through divisions),
	 * the nest would no longer match its intrinsic */
	for (int i = 0; i < p->nblocks; i++) {
		const tir_block *c = p->blocks[i];
		if (c->stmt && c != b && tensorized(c) &&
		    count_loads(c->value, b->store) + count_loads(c->init, b->store))
			return false;
	}
	const tir_expr *v = b->value;
	while (v && v->kind == E_CAST)
		v = v->a;
	if (v && (v->kind == E_LOAD || v->kind == E_INT || v->kind == E_FLOAT))
		return true;
	int readers = 0, loads = 0;
	for (int i = 0; i < p->nblocks; i++) {
		const tir_block *c = p->blocks[i];
		if (!c->stmt || c == b)
			continue;
		int k = count_loads(c->value, b->store) + count_loads(c->init, b->store) +
			count_loads(c->predicate, b->store);
		if (!k)
			continue;
		if (sketch_kind_of(p, c) == SKETCH_HEAVY)
			return false;
		readers++;
		loads += k;
	}
	return readers == 1 && loads == 1;
}

/* compute_inline of b where cheap and legal; whether it was inlined. */
static bool try_inline(tir_sched *s, const tir_block *b)
{
	if (!cheap_to_inline(s->p, b))
		return false;
	tir_error e;
	int rv = tir_get_block(s, b->name, &e);
	return rv >= 0 && tir_compute_inline(s, rv, &e) == 0;
}

/* The loops of b's fresh nest (l[0..n), n returned) and the loop RV of each
 * iterator (loop_of[i] binds iterator i), or -1. */
static int nest_loops(tir_sched *s, int brv, int *l, int *loop_of, tir_error *err)
{
	int n;
	SKETCH_TRY(n = tir_get_loops(s, brv, l, TIR_MAX_IO, err), "loops");
	const tir_block *b = s->rv[brv].block;
	for (int i = 0; i < b->niters; i++) {
		loop_of[i] = -1;
		for (int k = 0; k < n; k++)
			if (expr_uses_var(b->iters[i].binding, s->rv[l[k]].loop->var))
				loop_of[i] = l[k];
	}
	return n;
}

/* The anchor's row iterators (coordinates, g->coord[0]) and extents; whether
 * b anchors a group.  A reduction: its spatial iterators.  A spatial block:
 * the iterators by which it reads the output of the first reduction among
 * list[from..n) (the walk reaches it later), each dimension of more than one
 * element indexed by one iterator. */
static bool find_row(const tir_program *p, const tir_block *b, tir_block *const *list, int n,
		     int from, sketch_group *g, bool *row_iter)
{
	for (int i = 0; i < b->niters; i++) {
		g->coord[0][i] = -1;
		row_iter[i] = false;
	}
	g->nrow = 0;
	if (block_is_reduction(b)) {
		for (int i = 0; i < b->niters; i++) {
			if (b->iters[i].kind != ITER_SPATIAL)
				continue;
			row_iter[i] = true;
			if (b->iters[i].extent > 1) {
				g->rext[g->nrow] = b->iters[i].extent;
				g->coord[0][i] = (signed char)g->nrow++;
			}
		}
		return true;
	}
	const tir_block *red = NULL;
	for (int j = from; j < n && !red; j++) {
		const tir_block *r = list[j];
		if (!r->stmt || !block_is_reduction(r))
			continue;
		for (int k = 0; k < b->nreads && !red; k++)
			if (b->reads[k].buf == r->store)
				red = r;
	}
	if (!red)
		return false;
	for (int k = 0; k < b->nreads; k++) {
		const tir_region *rg = &b->reads[k];
		if (rg->buf != red->store)
			continue;
		for (int d = 0; d < rg->buf->ndim; d++) {
			if (rg->buf->shape[d] == 1)
				continue;
			const tir_expr *x = rg->min[d];
			int it = x->kind == E_VAR ? block_iter_of(b, x->var) : -1;
			if (rg->extent[d] != 1 || it < 0)
				return false;
			if (g->coord[0][it] >= 0)
				continue;
			row_iter[it] = true;
			g->rext[g->nrow] = b->iters[it].extent;
			g->coord[0][it] = (signed char)g->nrow++;
		}
	}
	return g->nrow > 0;
}

/* Whether block c (a later block in the walk, writing what some member reads)
 * can join g: every read of its output by a member indexes each dimension of
 * more than one element either by a row iterator — the same coordinate at
 * every read — or by an index that uses none (the dimension is then computed
 * whole in each row), and the dimensions read at row iterators cover each
 * coordinate once (each row computes its own part, nothing twice).  c must
 * write its output at exactly its iterators.  Fills cc with c's iterators'
 * coordinates. */
static bool joins(const sketch_group *g, const tir_block *c, signed char *cc)
{
	const tir_buffer *out = c->store;
	int dimc[TIR_MAX_DIMS];
	for (int d = 0; d < out->ndim; d++)
		dimc[d] = -2;
	bool read = false;
	for (int m = 0; m < g->n; m++) {
		const tir_block *mb = g->member[m];
		for (int k = 0; k < mb->nreads; k++) {
			const tir_region *rg = &mb->reads[k];
			if (rg->buf != out || mb->store == out)
				continue;
			read = true;
			for (int d = 0; d < out->ndim; d++) {
				if (out->shape[d] == 1)
					continue;
				if (rg->extent[d] != 1)
					return false;
				const tir_expr *x = rg->min[d];
				int it = x->kind == E_VAR ? block_iter_of(mb, x->var) : -1;
				int co = it >= 0 ? g->coord[m][it] : -1;
				if (co < 0)
					for (int i = 0; i < mb->niters; i++)
						if (g->coord[m][i] >= 0 && expr_uses_var(x, mb->iters[i].var))
							return false;
				if (dimc[d] == -2)
					dimc[d] = co;
				else if (dimc[d] != co)
					return false;
			}
		}
	}
	if (!read)
		return false;
	for (int co = 0; co < g->nrow; co++) {
		int k = 0;
		for (int d = 0; d < out->ndim; d++)
			k += dimc[d] == co;
		if (k != 1)
			return false;
	}
	for (int i = 0; i < c->niters; i++)
		cc[i] = -1;
	for (int d = 0; d < out->ndim; d++) {
		const tir_expr *x = c->store_idx[d];
		int it = x->kind == E_VAR ? block_iter_of(c, x->var) : -1;
		if (it < 0 || c->iters[it].kind != ITER_SPATIAL)
			return false;
		cc[it] = (signed char)(dimc[d] >= 0 ? dimc[d] : -1);
	}
	return true;
}

/* Whether some member of g reads buf. */
static bool group_reads(const sketch_group *g, const tir_buffer *buf)
{
	for (int m = 0; m < g->n; m++)
		for (int k = 0; k < g->member[m]->nreads; k++)
			if (g->member[m]->reads[k].buf == buf && g->member[m]->store != buf)
				return true;
	return false;
}

/* Puts the anchor's row loops outermost, in coordinate order (a reduction:
 * its spatial loops in order), and fuses them into g->row; where nothing is
 * left under them, a loop of one iteration is split off, so that the
 * members go before the anchor's own loop. */
static int make_row(tir_sched *s, sketch_group *g, const bool *row_iter, tir_error *err)
{
	const tir_block *b = g->member[0];
	int loop_of[TIR_MAX_ITERS], order[TIR_MAX_IO], rows[TIR_MAX_IO], nr = 0, k = 0;
	int l[TIR_MAX_IO], nl;
	SKETCH_TRY(nl = nest_loops(s, g->rv[0], l, loop_of, err), "the anchor's loops");
	bool reduction = block_is_reduction(b);
	if (reduction) {
		for (int i = 0; i < b->niters; i++)
			if (row_iter[i] && loop_of[i] >= 0)
				rows[nr++] = loop_of[i];
	} else {
		for (int co = 0; co < g->nrow; co++)
			for (int i = 0; i < b->niters; i++)
				if (g->coord[0][i] == co && loop_of[i] >= 0)
					rows[nr++] = loop_of[i];
	}
	if (nr == 0)
		return tir_fail(err, "block \"%s\" has no row loop", b->name);
	for (int i = 0; i < nr; i++)
		order[k++] = rows[i];
	for (int i = 0; i < b->niters; i++)
		if (!row_iter[i] && loop_of[i] >= 0)
			order[k++] = loop_of[i];
	bool moved = false;
	for (int i = 0; i < k && i < nl; i++)
		moved = moved || order[i] != l[i];
	if (moved)
		SKETCH_TRY(tir_reorder(s, k, order, err), "the row loops outermost");
	g->row = rows[0];
	if (nr > 1)
		SKETCH_TRY(g->row = tir_fuse(s, nr, rows, err), "fuse the row loops");
	if (k == nr) {
		int o[2];
		tir_int f[2] = { TIR_LIT(0), TIR_LIT(1) };
		SKETCH_TRY(tir_split(s, g->row, 2, f, o, err), "a loop under the row");
		g->row = o[0];
	}
	return 0;
}

int sketch_schedule_rest(tir_sched *s, const tir_target *t, const sketch_rest *r, tir_error *err)
{
	tir_block *po[SKETCH_MAX_BLOCKS], *list[SKETCH_MAX_BLOCKS];
	int n = sketch_post_order(s->p, po, SKETCH_MAX_BLOCKS), nl = 0;
	for (int i = 0; i < n; i++)
		if (sketch_kind_of(s->p, po[i]) != SKETCH_HEAVY && sketch_block_free(po[i]))
			list[nl++] = po[i];
	if (nl == 0)
		return 0;
	int first_new = s->p->nblocks;
	if (r->prepare && r->prepare(s, t, r, list, nl, err))
		return -1;
	/* again, with what prepare made (rfactor's combining blocks) */
	n = sketch_post_order(s->p, po, SKETCH_MAX_BLOCKS);
	int m = 0;
	for (int i = 0; i < n; i++) {
		bool keep = false;
		for (int k = 0; k < nl && !keep; k++)
			keep = po[i] == list[k];
		for (int k = first_new; k < s->p->nblocks && !keep; k++)
			keep = po[i] == s->p->blocks[k];
		if (keep && sketch_block_free(po[i]))
			po[m++] = po[i];
	}
	nl = m;
	memcpy(list, po, sizeof(*list) * (size_t)nl);

	bool visited[SKETCH_MAX_BLOCKS] = { false };
	for (int i = 0; i < nl; i++) {
		tir_block *b = list[i];
		if (visited[i] || !b->stmt)
			continue;
		visited[i] = true;
		if (try_inline(s, b))
			continue;
		sketch_group g;
		memset(&g, 0, sizeof g);
		bool row_iter[TIR_MAX_ITERS];
		g.member[0] = b;
		g.n = 1;
		SKETCH_TRY(g.rv[0] = tir_get_block(s, b->name, err), "get a block");
		if (!find_row(s->p, b, list, nl, i + 1, &g, row_iter)) {
			SKETCH_TRY(r->pointwise(s, t, r, g.rv[0], err), b->name);
			continue;
		}
		SKETCH_TRY(make_row(s, &g, row_iter, err), b->name);
		for (int j = i + 1; j < nl && g.n < SKETCH_MAX_GROUP; j++) {
			tir_block *c = list[j];
			if (visited[j] || !c->stmt || !group_reads(&g, c->store))
				continue;
			if (try_inline(s, c)) {
				visited[j] = true;
				continue;
			}
			signed char cc[TIR_MAX_ITERS];
			if (!joins(&g, c, cc) || (r->admit && !r->admit(s->p, t, r, &g, c)))
				continue;
			tir_error e;
			int rv;
			SKETCH_TRY(rv = tir_get_block(s, c->name, err), "get a block");
			if (tir_compute_at(s, rv, g.row, &e))
				continue;
			visited[j] = true;
			g.member[g.n] = c;
			g.rv[g.n] = rv;
			memcpy(g.coord[g.n], cc, sizeof cc);
			g.n++;
		}
		SKETCH_TRY(r->group(s, t, r, &g, err), b->name);
	}
	return 0;
}

int sketch_member_loops(tir_sched *s, const sketch_group *g, int m, int *spatial, int *ns,
			int *reduce, int *nr, tir_error *err)
{
	int l[TIR_MAX_IO], n;
	SKETCH_TRY(n = sketch_loops_under(s, g->rv[m], g->row, l, err), "loops under the row");
	const tir_block *b = s->rv[g->rv[m]].block;
	*ns = *nr = 0;
	for (int k = 0; k < n; k++) {
		bool red = false;
		for (int i = 0; i < b->niters; i++)
			red = red || (b->iters[i].kind == ITER_REDUCE &&
				      expr_uses_var(b->iters[i].binding, s->rv[l[k]].loop->var));
		if (red)
			reduce[(*nr)++] = l[k];
		else
			spatial[(*ns)++] = l[k];
	}
	return n;
}

int64_t sketch_row_work(tir_sched *s, const sketch_group *g)
{
	/* from the tree: a get_loops would be an instruction of the trace */
	const tir_stmt *row = s->rv[g->row].loop;
	int64_t most = 1;
	for (int m = 0; m < g->n; m++) {
		int64_t w = 1;
		for (const tir_stmt *q = g->member[m]->stmt->parent; q && q != row; q = q->parent)
			if (q->kind == STMT_FOR)
				w *= q->extent;
		if (w > most)
			most = w;
	}
	return most;
}
