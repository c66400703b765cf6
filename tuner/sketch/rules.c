/*
 * rules.c — what the CPU and GPU sketches share: the one rule that finds the
 * blocks to schedule (sketch_post_order, sketch_kind_of: every live block
 * from the outputs back, each heavy, a row reduction or spatial — see
 * sketch.h), a heavy block's neighbours (sketch_find_blocks), classifying a
 * block's loops, the inline rule, multi-level tiling by
 * sample_perfect_tile, vector lanes, seeds.
 *
 * Everything here looks at the block structure only — which blocks reduce,
 * which buffers they read and write and how often a reduction reads each
 * input element — never at an operator's name.  Data reuse is measured as
 * the block's domain over the footprint of its largest input (the interval
 * of each index over the block's iterator domains): a matmul reads each
 * operand element N or M times, a convolution its input R * S / stride^2
 * times or more and its weights once per output pixel; a row sum, max or
 * mean reads each element once, however small the broadcast vectors it also
 * reads (the fusion seed's bias).
 */
#include <string.h>
#include "sketch.h"
#include "../codegen/codegen.h"

int sketch_nest_of(tir_sched *s, int block, sketch_nest *n, tir_error *err)
{
	memset(n, 0, sizeof *n);
	n->n = tir_get_loops(s, block, n->loop, TIR_MAX_IO, err);
	if (n->n < 0)
		return -1;
	if (n->n > TIR_MAX_IO)
		return tir_fail(err, "more than %d loops", TIR_MAX_IO);
	const tir_block *b = s->rv[block].block;
	for (int i = 0; i < n->n; i++) {
		const tir_stmt *l = s->rv[n->loop[i]].loop;
		bool red = false;
		for (int k = 0; k < b->niters; k++)
			if (b->iters[k].kind == ITER_REDUCE &&
			    expr_uses_var(b->iters[k].binding, l->var))
				red = true;
		if (red) {
			n->rext[n->nr] = l->extent;
			n->reduce[n->nr++] = n->loop[i];
		} else {
			n->sext[n->ns] = l->extent;
			n->spatial[n->ns++] = n->loop[i];
		}
	}
	return 0;
}

/* ---- the blocks to schedule ------------------------------------------------------ */

const tir_region *sketch_largest_read(const tir_program *p, const tir_block *b, double *elems)
{
	const tir_region *best = NULL;
	double most = 0;
	tir_arena a = { 0 };
	tir_env env = sched_iter_env(p, b);
	for (int r = 0; r < b->nreads; r++) {
		const tir_region *rg = &b->reads[r];
		if (rg->buf == b->store)
			continue;
		double f = 1;
		for (int d = 0; d < rg->buf->ndim; d++) {
			tir_interval iv = interval_of(&a, rg->min[d], &env);
			int64_t len = rg->buf->shape[d];
			if (!iv.full && !iv.base && iv.hi - iv.lo + rg->extent[d] < len)
				len = iv.hi - iv.lo + rg->extent[d];
			f *= (double)(len > 0 ? len : 1);
		}
		if (f > most) {
			most = f;
			best = rg;
		}
	}
	env_free(&env);
	arena_free(&a);
	if (elems)
		*elems = most;
	return best;
}

bool sketch_has_reuse(const tir_program *p, const tir_block *b)
{
	if (!block_is_reduction(b))
		return false;
	double points = 1, largest = 0;
	for (int i = 0; i < b->niters; i++)
		points *= (double)b->iters[i].extent;
	sketch_largest_read(p, b, &largest);
	return largest > 0 && points >= SKETCH_REUSE_MIN * largest;
}

sketch_kind sketch_kind_of(const tir_program *p, const tir_block *b)
{
	if (!block_is_reduction(b))
		return SKETCH_SPATIAL;
	return sketch_has_reuse(p, b) ? SKETCH_HEAVY : SKETCH_ROW;
}

int sketch_post_order(const tir_program *p, tir_block **out, int max)
{
	tir_block *blocks[SKETCH_MAX_BLOCKS];
	int n = stmt_blocks(p->root, blocks, SKETCH_MAX_BLOCKS);
	if (n > SKETCH_MAX_BLOCKS)
		n = SKETCH_MAX_BLOCKS;
	int k = 0;
	for (int i = n - 1; i >= 0 && k < max; i--)
		out[k++] = blocks[i];
	return k;
}

int sketch_heavy_blocks(const tir_program *p, tir_block **out, int max)
{
	tir_block *po[SKETCH_MAX_BLOCKS];
	int n = sketch_post_order(p, po, SKETCH_MAX_BLOCKS), k = 0;
	for (int i = 0; i < n && k < max; i++)
		if (sketch_kind_of(p, po[i]) == SKETCH_HEAVY)
			out[k++] = po[i];
	return k;
}

bool sketch_program_has(const tir_program *p, sketch_kind kind)
{
	tir_block *po[SKETCH_MAX_BLOCKS];
	int n = sketch_post_order(p, po, SKETCH_MAX_BLOCKS);
	for (int i = 0; i < n; i++)
		if (sketch_kind_of(p, po[i]) == kind)
			return true;
	return false;
}

void sketch_find_blocks(const tir_program *p, const tir_block *heavy, sketch_blocks *sb)
{
	memset(sb, 0, sizeof *sb);
	if (!heavy)
		return;
	tir_block *blocks[SKETCH_MAX_BLOCKS];
	int n = stmt_blocks(p->root, blocks, SKETCH_MAX_BLOCKS);
	if (n > SKETCH_MAX_BLOCKS)
		n = SKETCH_MAX_BLOCKS;
	sb->reduction = heavy;
	for (int i = 0; i < n; i++) {
		const tir_block *b = blocks[i];
		/* (another rule's stages, e.g. the shared-memory copy of a later
		 * matmul reading this one's output, are not this block's) */
		if (b == heavy || block_is_reduction(b) || !sketch_block_free(b))
			continue;
		if (b->store->role == BUF_TEMP && block_reads(heavy, b->store) &&
		    sb->nproducers < SKETCH_MAX_STAGES)
			sb->producer[sb->nproducers++] = b;
		else if (block_reads(b, heavy->store) && sb->nconsumers < SKETCH_MAX_STAGES)
			sb->consumer[sb->nconsumers++] = b;
	}
}

bool sketch_block_free(const tir_block *b)
{
	if (!b->stmt)
		return false;
	if (stmt_blocks(sched_top_stmt(b->stmt), NULL, 0) != 1)
		return false;
	for (const tir_stmt *q = b->stmt->parent; q && q->kind == STMT_FOR; q = q->parent)
		if (q->loop_kind != LOOP_SERIAL || q->nann)
			return false;
	return true;
}

int sketch_inline_producers(tir_sched *s, const sketch_blocks *sb, tir_error *err)
{
	int done = 0;
	for (int i = 0; i < sb->nproducers; i++) {
		int b = tir_get_block(s, sb->producer[i]->name, err);
		if (b < 0)
			return -1;
		tir_error e;
		if (tir_compute_inline(s, b, &e) == 0)
			done++;
	}
	return done;
}

int sketch_tile(tir_sched *s, int loop, int levels, int max_innermost,
		int *out_loops, tir_error *err)
{
	int f[TIR_MAX_IO];
	tir_int fac[TIR_MAX_IO];
	if (levels < 1 || levels >= TIR_MAX_IO)
		return tir_fail(err, "tile: %d levels", levels);
	if (levels == 1) {
		out_loops[0] = loop;
		return loop;
	}
	if (tir_sample_perfect_tile(s, loop, levels, max_innermost, f, err) < 0)
		return -1;
	for (int i = 0; i < levels; i++)
		fac[i] = TIR_RV(f[i]);
	return tir_split(s, loop, levels, fac, out_loops, err);
}

int sketch_tile_decided(tir_sched *s, int loop, int levels, int max_innermost,
			const int64_t *decision, int *out_loops, tir_error *err)
{
	if (levels < 2 || levels >= TIR_MAX_IO)
		return tir_fail(err, "tile: %d levels", levels);
	tir_inst in;
	memset(&in, 0, sizeof in);
	in.op = PRIM_SAMPLE_PERFECT_TILE;
	in.in[in.nin++] = TIR_RV(loop);
	in.attr[0] = levels;
	in.attr[1] = max_innermost;
	in.nattr = 2;
	in.ndecision = levels;
	for (int i = 0; i < levels; i++)
		in.decision[i] = decision[i];
	if (sched_apply(s, &in, err))
		return -1;
	tir_int fac[TIR_MAX_IO];
	for (int i = 0; i < levels; i++)
		fac[i] = TIR_RV(in.out[i]);
	return tir_split(s, loop, levels, fac, out_loops, err);
}

void sketch_draw_factors(tir_sched *s, int64_t extent, int levels, int64_t *f)
{
	for (int i = 0; i < levels; i++)
		f[i] = 1;
	int64_t x = extent;
	for (int64_t d = 2; d * d <= x; d++)
		while (x % d == 0) {
			f[sched_rand(s) % (uint64_t)levels] *= d;
			x /= d;
		}
	if (x > 1)
		f[sched_rand(s) % (uint64_t)levels] *= x;
}

int sketch_annotate_rv(tir_sched *s, int rv, const char *key, int value_rv,
		       tir_error *err)
{
	tir_inst in;
	memset(&in, 0, sizeof in);
	in.op = PRIM_ANNOTATE;
	in.in[in.nin++] = TIR_RV(rv);
	in.in[in.nin++] = TIR_RV(value_rv);
	in.str = key;
	tir_error e;
	if (sched_apply(s, &in, &e) == 0)
		return 0;
	return tir_annotate(s, rv, key, tir_sched_int(s, value_rv), err);
}

int sketch_pipeline(tir_sched *s, const tir_target *t, int n, const int *loops,
		    tir_error *err)
{
	static const int64_t cp_stages[] = { 1, 2, 3 }, tma_stages[] = { 2, 3, 4 };
	/* loops annotated "tma" already (TMA copies from a producer warpgroup,
	 * codegen/lower.c lower_tma_loop): at least two stages, the ring
	 * handed over by mbarriers, no copy more for warpgroup MMAs */
	bool tma = false;
	for (int i = 0; i < n; i++)
		tma |= lower_ann(s->rv[loops[i]].loop, "tma", 0) > 0;
	const int64_t *stages = tma ? tma_stages : cp_stages;
	/* only as many copies as fit beside what the program already holds */
	tir_lowered L;
	int64_t bytes = 0;
	if (lower_program(s->p, t, &L, NULL) == 0) {
		for (int i = 0; i < s->p->nbufs; i++)
			if (L.alloc[i].used && L.alloc[i].compact &&
			    s->p->bufs[i]->scope == TIR_SCOPE_SHARED)
				bytes += L.alloc[i].bytes;
		lower_free(&L);
	}
	/* a loop of warpgroup MMAs keeps one ring copy more (lower_holds_wgmma) */
	bool wg = false;
	for (int i = 0; i < n && !tma; i++)
		wg = wg || lower_holds_wgmma(s->rv[loops[i]].loop);
	int ns = 1;
	while (ns < 3 && bytes * (stages[ns] + (wg ? 1 : 0)) <= t->max_shared_per_block)
		ns++;
	int v = tir_sample_categorical(s, ns, stages, NULL, err);
	if (v < 0)
		return -1;
	for (int i = 0; i < n; i++)
		if (sketch_annotate_rv(s, loops[i], "software_pipeline", v, err))
			return -1;
	return 0;
}

int sketch_vector_lanes(const tir_target *t, int dtype)
{
	int bytes = t->vector_bytes > 0 ? t->vector_bytes : 16;
	int eb = dtype_bytes((tir_dtype)dtype);
	int lanes = eb > 0 ? bytes / eb : 1;
	return lanes > 0 ? lanes : 1;
}

int sketch_accum_dtype(const sketch_blocks *sb)
{
	return sb->reduction ? (int)sb->reduction->store->dtype : (int)TIR_F32;
}

int sketch_loops_under(tir_sched *s, int block, int at, int *out, tir_error *err)
{
	int l[TIR_MAX_IO], n;
	SKETCH_TRY(n = tir_get_loops(s, block, l, TIR_MAX_IO, err), "loops");
	const tir_stmt *a = s->rv[at].loop;
	int k = 0;
	for (int i = 0; i < n; i++)
		if (s->rv[l[i]].loop != a && stmt_is_ancestor(a, s->rv[l[i]].loop))
			out[k++] = l[i];
	return k;
}

const int64_t sketch_gpu_unroll_steps[SKETCH_GPU_NUNROLL] = { 0, 16, 64, 512 };

int sketch_split_k(tir_sched *s, int block, int iterator, int64_t min_chunk,
		   int64_t max_outputs, tir_error *err)
{
	const tir_block *b = sched_block(s, TIR_RV(block), err);
	if (!b)
		return -1;
	int64_t ext = b->iters[iterator].extent, parts[8], outputs = 1;
	for (int i = 0; i < b->niters; i++)
		if (b->iters[i].kind == ITER_SPATIAL)
			outputs *= b->iters[i].extent;
	int np = 0;
	for (int64_t f = 1; f <= SKETCH_MAX_PARTS && np < 8; f *= 2)
		if (ext % f == 0 && (f == 1 || (ext / f >= min_chunk &&
						outputs < max_outputs)))
			parts[np++] = f;
	/* half the draws keep the reduction whole */
	double probs[8];
	for (int i = 0; i < np; i++)
		probs[i] = i == 0 ? (np > 1 ? 0.5 : 1.0) : 0.5 / (np - 1);
	int rv;
	SKETCH_TRY(rv = tir_sample_categorical(s, np, parts, probs, err), "parts of the reduction");
	SKETCH_TRY(tir_rfactor(s, block, iterator, TIR_RV(rv), err), "rfactor");
	return (int)tir_sched_int(s, rv);
}

int sketch_kernelize(tir_sched *s, const char *name, tir_error *err)
{
	int b, l[TIR_MAX_IO], fu, o[2];
	sketch_nest n;
	SKETCH_TRY(b = tir_get_block(s, name, err), "get block");
	SKETCH_TRY(sketch_nest_of(s, b, &n, err), "loops");
	memcpy(l, n.spatial, sizeof(int) * (size_t)n.ns);
	SKETCH_TRY(fu = tir_fuse(s, n.ns, l, err), "fuse");
	int64_t cands[3] = { 64, 128, 256 };
	int th;
	SKETCH_TRY(th = tir_sample_categorical(s, 3, cands, NULL, err), "threads");
	tir_int f[2] = { TIR_LIT(0), TIR_RV(th) };
	SKETCH_TRY(tir_split(s, fu, 2, f, o, err), "split");
	SKETCH_TRY(tir_bind(s, o[0], "blockIdx.x", err), "bind blocks");
	SKETCH_TRY(tir_bind(s, o[1], "threadIdx.x", err), "bind threads");
	return 0;
}
