/*
 * cpu_rows.c — the CPU's part of rows.c's walk (sketch_cpu_rest): row
 * groups over parallel rows with vector loops inside, pointwise kernels as a
 * parallel outer loop over a vector loop.
 *
 *   prepare    a row reduction whose innermost reduction iterator runs along
 *              the innermost dimension of its largest input (a sum, max or
 *              min over the last dim) is, in 3 draws of 4, split into a
 *              sampled number of interleaved partial reductions, a multiple
 *              of the vector lanes dividing the extent
 *              (rfactor_interleaved): lane p of the vector accumulates
 *              elements p, p + F, ..., so the parts are a vector loop over
 *              adjacent elements; a small block after combines them.
 *   group      the row loop parallel; in each member, the spatial loop
 *              that indexes the innermost dimension of what it reads most
 *              (a reduction's parts, or a dimension computed whole per
 *              row) innermost and vectorized, a reduction's init decomposed
 *              out of its reduction loops; a spatial member's innermost loop
 *              split by a sampled multiple of the lanes and vectorized; the
 *              partial results of a row (the parts, a row's max or sum, at
 *              most CPU_ROW_LOCAL elements) in local buffers, allocated in
 *              the parallel loop's body (set_scope "local").
 *   pointwise  the innermost loop split by a sampled multiple of the lanes
 *              (outer part inferred, a predicate where it overshoots) and
 *              vectorized, every loop outside it fused and parallel.
 */
#include <string.h>
#include "sketch.h"

#define CPU_ROW_LOCAL 64       /* elements of a row's partial results kept local */
#define CPU_MAX_PARTS 64       /* rfactor's limit */

/* The iterator of b used in the innermost index of its largest read, of the
 * given kind, or -1. */
static int innermost_iter(const tir_program *p, const tir_block *b, tir_iter_kind kind)
{
	const tir_region *rg = sketch_largest_read(p, b, NULL);
	if (!rg)
		return -1;
	const tir_expr *x = rg->min[rg->buf->ndim - 1];
	int found = -1;
	for (int i = 0; i < b->niters; i++)
		if (b->iters[i].kind == kind && b->iters[i].extent > 1 &&
		    expr_uses_var(x, b->iters[i].var))
			found = i;
	return found;
}

static int cpu_prepare(tir_sched *s, const tir_target *t, const sketch_rest *r,
		       tir_block *const *blocks, int n, tir_error *err)
{
	(void)r;
	for (int i = 0; i < n; i++) {
		const tir_block *b = blocks[i];
		if (!block_is_reduction(b) || !b->init || !b->stmt)
			continue;
		int it = innermost_iter(s->p, b, ITER_REDUCE);
		const tir_region *rg = sketch_largest_read(s->p, b, NULL);
		if (it < 0 || rg->min[rg->buf->ndim - 1]->kind != E_VAR)
			continue;
		int lanes = sketch_vector_lanes(t, b->store->dtype);
		int64_t ext = b->iters[it].extent, cand[3];
		int nc = 0;
		for (int64_t m = 1; m <= 4; m *= 2)
			if (m * lanes <= CPU_MAX_PARTS && ext % (m * lanes) == 0 && ext / (m * lanes) >= 2)
				cand[nc++] = m * lanes;
		if (nc == 0 || sched_rand(s) % 4 == 0)
			continue;
		int rb, v;
		SKETCH_TRY(rb = tir_get_block(s, b->name, err), "get a row reduction");
		SKETCH_TRY(v = tir_sample_categorical(s, nc, cand, NULL, err), "vector parts");
		SKETCH_TRY(tir_rfactor_interleaved(s, rb, it, TIR_RV(v), err), "rfactor into lanes");
	}
	return 0;
}

/* Splits `loop` by a sampled multiple of the lanes where it is longer than
 * them and vectorizes the inner part (the loop itself where it is not). */
static int vector_tail(tir_sched *s, int loop, int lanes, tir_error *err)
{
	int64_t ext = s->rv[loop].loop->extent;
	if (ext <= 1)
		return 0;
	if (ext <= lanes)
		return tir_vectorize(s, loop, err);
	int64_t cand[3];
	int nc = 0, v, o[2];
	for (int64_t m = 1; m <= 4 && m * lanes <= ext; m *= 2)
		cand[nc++] = m * lanes;
	SKETCH_TRY(v = tir_sample_categorical(s, nc, cand, NULL, err), "vector length");
	tir_int f[2] = { TIR_LIT(0), TIR_RV(v) };
	SKETCH_TRY(tir_split(s, loop, 2, f, o, err), "split the vector loop");
	return tir_vectorize(s, o[1], err);
}

static int cpu_group(tir_sched *s, const tir_target *t, const sketch_rest *r, sketch_group *g,
		     tir_error *err)
{
	(void)r;
	SKETCH_TRY(tir_parallel(s, g->row, err), "parallel rows");
	for (int m = 0; m < g->n; m++) {
		tir_block *b = g->member[m];
		int sp[TIR_MAX_IO], rd[TIR_MAX_IO], ns, nr;
		SKETCH_TRY(sketch_member_loops(s, g, m, sp, &ns, rd, &nr, err), b->name);
		int lanes = sketch_vector_lanes(t, b->store->dtype);
		if (!block_is_reduction(b)) {
			if (ns)
				SKETCH_TRY(vector_tail(s, sp[ns - 1], lanes, err), b->name);
			continue;
		}
		/* the spatial loop along the innermost dimension it reads most,
		 * inside the reduction loops, vectorized */
		int it = innermost_iter(s->p, b, ITER_SPATIAL), vec = -1;
		for (int k = 0; k < ns && it >= 0; k++)
			if (expr_uses_var(b->iters[it].binding, s->rv[sp[k]].loop->var) &&
			    s->rv[sp[k]].loop->extent > 1)
				vec = sp[k];
		int64_t elems = 1;
		for (int k = 0; k < ns; k++)
			elems *= s->rv[sp[k]].loop->extent;
		if (vec >= 0 && nr) {
			int order[2 * TIR_MAX_IO], k = 0;
			for (int q = 0; q < ns; q++)
				if (sp[q] != vec)
					order[k++] = sp[q];
			for (int q = 0; q < nr; q++)
				order[k++] = rd[q];
			order[k++] = vec;
			SKETCH_TRY(tir_reorder(s, k, order, err), "the vector loop innermost");
			SKETCH_TRY(tir_vectorize(s, vec, err), "vectorize");
			if (b->init)
				SKETCH_TRY(tir_decompose_reduction(s, g->rv[m], rd[0], err),
					   "decompose_reduction");
		}
		if (m > 0 && b->store->role == BUF_TEMP && elems <= CPU_ROW_LOCAL)
			SKETCH_TRY(tir_set_scope(s, g->rv[m], 0, "local", err), "local partials");
	}
	return 0;
}

static int cpu_pointwise(tir_sched *s, const tir_target *t, const sketch_rest *r, int block,
			 tir_error *err)
{
	(void)r;
	int l[TIR_MAX_IO], n, lanes = sketch_vector_lanes(t, s->rv[block].block->store->dtype);
	SKETCH_TRY(n = tir_get_loops(s, block, l, TIR_MAX_IO, err), "loops");
	if (n == 0)
		return 0;
	int64_t ext = s->rv[l[n - 1]].loop->extent;
	int outer[TIR_MAX_IO], no = 0, vec = -1;
	for (int i = 0; i < n - 1; i++)
		outer[no++] = l[i];
	if (ext > lanes) {
		int64_t cand[3];
		int nc = 0, v, o[2];
		for (int64_t m = 1; m <= 4 && m * lanes <= ext; m *= 2)
			cand[nc++] = m * lanes;
		SKETCH_TRY(v = tir_sample_categorical(s, nc, cand, NULL, err), "vector length");
		tir_int f[2] = { TIR_LIT(0), TIR_RV(v) };
		SKETCH_TRY(tir_split(s, l[n - 1], 2, f, o, err), "split the vector loop");
		outer[no++] = o[0];
		vec = o[1];
	} else if (ext > 1) {
		vec = l[n - 1];
	}
	if (no) {
		int par = outer[0];
		if (no > 1)
			SKETCH_TRY(par = tir_fuse(s, no, outer, err), "fuse the outer loops");
		SKETCH_TRY(tir_parallel(s, par, err), "parallel");
	}
	if (vec >= 0)
		SKETCH_TRY(tir_vectorize(s, vec, err), "vectorize");
	return 0;
}

const sketch_rest sketch_cpu_rest = { 0, cpu_prepare, NULL, cpu_group, cpu_pointwise };
