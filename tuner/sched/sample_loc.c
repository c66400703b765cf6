/*
 * sample_loc.c — sample_compute_location: a loop drawn among the places
 * where a block can be computed.
 *
 * The candidates of a block b are the loops that compute_at or
 * reverse_compute_at — the side the caller names — can move b under and keep
 * the result right (sched_compute_locations below lists them, outermost
 * first):
 *
 *   compute_at side      the loops enclosing every consumer of b's output
 *                        (the chain of common ancestors of the consumers);
 *   reverse side         the loops enclosing every producer of what b reads,
 *                        minus every loop that feeds (or sits inside a loop
 *                        that feeds) a reduction iterator of a producer: under
 *                        such a loop the producer's values are still partial
 *                        when b would read them;
 *
 * and on both sides minus the loops of b's own nest, loops enclosing b, and
 * vectorized loops (they stay innermost, a nest cannot go under them).
 *
 * The side is the instruction's attribute: 0 compute_at, 1 reverse.  A trace
 * written before the side was an argument has none; the side is then the one
 * those traces meant, compute_at when something reads b's output, else
 * reverse (sched_location_side) — which picked the wrong side for a consumer
 * that itself has consumers, placed with reverse_compute_at.  The attribute
 * is recorded only where it differs from that default, so every trace of the
 * old form keeps its text and its identity.
 *
 * The decision is the index of the chosen loop in that list.  Replay recomputes
 * the list on the replayed program, which is the same program, and checks the
 * index; a mutated index is legal when it is in range.  The list depends on
 * the program only, never on the generator.
 */
#include <string.h>
#include "sched.h"

/* Whether loop l feeds a reduction iterator of block w. */
static bool feeds_reduction(const tir_stmt *l, const tir_block *w)
{
	for (int i = 0; i < w->niters; i++)
		if (w->iters[i].kind == ITER_REDUCE && expr_uses_var(w->iters[i].binding, l->var))
			return true;
	return false;
}

/* The outermost statement whose subtree holds b and nothing else. */
static const tir_stmt *own_nest(const tir_block *b)
{
	tir_stmt *s = b->stmt;
	while (s->parent && s->parent->kind == STMT_FOR &&
	       stmt_blocks(s->parent, NULL, 0) == 1)
		s = s->parent;
	return s;
}

/* See the top of the file; fills out[0..n) (n at most max), returns n or -1
 * with a message when b has neither consumers nor producers. */
/* The consumers of b's output (compute_at) or the producers of what b reads
 * (reverse), at most 256; returns the count. */
static int others_of(const tir_program *p, const tir_block *b, bool reverse,
		     const tir_block **other)
{
	int n = 0;
	for (int i = 0; i < p->nblocks && n < 256; i++) {
		const tir_block *c = p->blocks[i];
		if (!c->stmt || c == b)
			continue;
		if (reverse ? c->store != b->store && block_reads(b, c->store) : block_reads(c, b->store))
			other[n++] = c;
	}
	return n;
}

tir_loc_side sched_location_side(const tir_program *p, const tir_block *b)
{
	const tir_block *other[256];
	return others_of(p, b, false, other) ? TIR_LOC_COMPUTE_AT : TIR_LOC_REVERSE_COMPUTE_AT;
}

int sched_compute_locations(const tir_program *p, const tir_block *b, tir_loc_side side,
			    tir_stmt **out, int max, tir_error *err)
{
	const tir_block *other[256];
	bool reverse = side == TIR_LOC_REVERSE_COMPUTE_AT;
	int nother = others_of(p, b, reverse, other);
	if (!nother)
		return tir_fail(err, "block \"%s\" has no %s", b->name,
				reverse ? "producer to be computed after (reverse_compute_at)"
					: "consumer to be computed before (compute_at)");
	/* the loops enclosing the first one, kept while they enclose every other */
	tir_stmt *chain[256];
	int n = stmt_loops(other[0]->stmt, chain, 256);
	if (n > 256)
		n = 256;
	for (int k = 1; k < nother; k++)
		for (int i = 0; i < n; i++)
			if (!stmt_is_ancestor(chain[i], other[k]->stmt)) {
				n = i;
				break;
			}
	const tir_stmt *nest = own_nest(b);
	int m = 0;
	bool partial = false;
	for (int i = 0; i < n; i++) {
		tir_stmt *l = chain[i];
		if (reverse)
			for (int k = 0; k < nother && !partial; k++)
				partial = feeds_reduction(l, other[k]);
		if (partial)
			break;
		if (stmt_is_ancestor(l, b->stmt) || l == nest || stmt_is_ancestor(nest, l) ||
		    l->loop_kind == LOOP_VECTORIZED)
			continue;
		/* compute_at side: b must still run before its first consumer
		 * and its consumers after it (order outside l is unchanged) */
		if (!reverse) {
			bool before = true;
			for (int k = 0; k < nother; k++)
				before = before && stmt_order(nest, other[k]->stmt) == -1;
			if (!before)
				continue;
		}
		if (m < max)
			out[m] = l;
		m++;
	}
	return m;
}

/* sample_compute_location(block[, side]) -> loop: see the top of the file.
 * Fails when the block has no candidate loop. */
int prim_sample_compute_location(tir_sched *s, tir_inst *in, tir_error *err)
{
	if (in->nin != 1 || in->nattr > 1 ||
	    (in->nattr == 1 && in->attr[0] != TIR_LOC_COMPUTE_AT &&
	     in->attr[0] != TIR_LOC_REVERSE_COMPUTE_AT))
		return tir_fail(err, "takes one block and a side (0 compute_at, 1 reverse_compute_at)");
	tir_block *b = sched_block(s, in->in[0], err);
	if (!b)
		return -1;
	tir_loc_side implied = sched_location_side(s->p, b);
	tir_loc_side side = in->nattr ? (tir_loc_side)in->attr[0] : implied;
	in->nattr = side != implied;       /* recorded only where it differs */
	in->attr[0] = side;
	tir_stmt *cand[TIR_MAX_IO * 4];
	int n = sched_compute_locations(s->p, b, side, cand, TIR_MAX_IO * 4, err);
	if (n < 0)
		return -1;
	if (n > TIR_MAX_IO * 4)
		n = TIR_MAX_IO * 4;
	if (n == 0)
		return tir_fail(err, "block \"%s\" has no loop it can be computed under", b->name);
	int64_t k;
	if (in->ndecision) {
		k = in->decision[0];
		if (in->ndecision != 1 || k < 0 || k >= n)
			return tir_fail(err, "decision %lld is not the index of one of the %d locations of block \"%s\"",
					(long long)k, n, b->name);
	} else {
		k = (int64_t)(sched_rand(s) % (uint64_t)n);
		in->ndecision = 1;
		in->decision[0] = k;
	}
	int rv = sched_new_rv(s, RV_LOOP);
	s->rv[rv].loop = cand[k];
	in->out[in->nout++] = rv;
	return 0;
}

int tir_sample_compute_location(tir_sched *s, int block, tir_loc_side side, tir_error *err)
{
	tir_inst in;
	memset(&in, 0, sizeof in);
	in.op = PRIM_SAMPLE_COMPUTE_LOCATION;
	in.in[in.nin++] = TIR_RV(block);
	in.attr[in.nattr++] = side;
	if (sched_apply(s, &in, err))
		return -1;
	return in.out[0];
}
