/*
 * cpu_conv.c — the CPU sketches of channels-last convolutions, as oneDNN's
 * direct convolutions compute them: a register tile over output width x
 * output-channel blocks, the vector along the output channels, each input
 * element broadcast into the FMAs of its row, no im2col.
 *
 * They apply to a heavy block of the convolution form (conv_form below):
 * Y[n, .., w, k] += X[n, .., f(w, kernel), g(k, c)] * W[kernel.., c, k] —
 * dense, grouped and dilated 1-D, 2-D and 3-D convolutions of the
 * channels-last layout (NWC / NHWC / NDHWC, weights [kernel.., C/g, K]).  A
 * depthwise or transposed convolution reads its weights at another index
 * (a multiplier, a flipped kernel) and is left to cpu.c's sketches.
 *
 *   cpu-conv-blocked  the weights packed (transform_layout, sched/pack.c)
 *                     into W[k/L][kernel..][c][k%L], L the vector lanes:
 *                     the L output channels of a vector side by side and
 *                     the reduction over (kernel, c) one contiguous stream;
 *                     packed once per call (the stage at the top level, the
 *                     weights an input like any other, counted in the call).
 *   cpu-conv-direct   the same nest reading the weights where they are
 *                     (W[.., c, k]: a vector of k is contiguous already, the
 *                     next c one row of K apart), for shapes where packing
 *                     costs more than it saves (large weights read few times).
 *
 * The nest, outermost first:
 *   (n, k0, spatial but w)  fused, parallel
 *   w0                      tiles of the output width
 *   kernel.., c             the reduction, c innermost (the NHWC input's
 *                           contiguous dimension), decomposed init before it
 *   wb, kb                  the register tile: wb output columns x kb
 *                           vectors of L output channels, unrolled
 *   kv                      the L lanes, vectorized
 * with k split as (k0, kb, kv), kv = L, and the accumulator in a local write
 * cache at w0, exactly the wb x kb*L tile (gcc keeps it in vector registers
 * once the tile loops are unrolled, as in cpu-tile-reg), the epilogues
 * inlined into its write-back (by whole vectors, unrolled).  The input's padding is not inlined: a
 * select per FMA costs more than one copy of the input per call, so the
 * pad stage stays a kernel of its own (rows.c), as does the weights' pack.
 * wb and kb are sampled jointly (sample_perfect_tile decisions drawn under
 * a soft limit on the registers, vector_regs below, and at least two parallel
 * chunks per core; mutations move them freely), and so is an unroll factor
 * of the innermost reduction loop.
 *
 * An output width with no divisor that makes a good tile (a prime, as
 * DIL-0's 109: one column x 4 vectors, 4 accumulators, 0.6x oneDNN) is
 * tiled imperfectly: wb drawn by sample_categorical among 2..CONV_MAX_WB,
 * likelier the better its tile, the split's last tile cut short by a
 * predicate on the columns past the width (loops.c), kb a perfect tile of
 * the k blocks as before.  On DIL-0 (AVX-512) a 5-column tile took 617 us
 * where the perfect one took 2,106 (tirctl lower --run, the same trace but
 * for the w split).
 */
#include <stdio.h>
#include <string.h>
#include "sketch.h"

/* The register tile: wb x kb accumulators, the kb weight vectors of a
 * reduction step and the broadcast input all in registers, so at most
 * vector_regs() of them (4 x 3 or 6 x 2 of AVX2's 16, 7 x 3 or 4 x 6 of
 * AVX-512's and AArch64's 32: a larger tile spills or reloads a weight
 * vector per FMA); at least CONV_MIN_ACC accumulators (independent FMA
 * chains: 4 cycles of latency x 2 FMA pipes, fewer leave the pipes idle). */
#define CONV_MIN_ACC 8
#define CONV_DRAWS 64
/* The widest imperfect w tile (columns) drawn. */
#define CONV_MAX_WB 16

/* The iterators of a block of the convolution form. */
typedef struct conv_form {
	int k, w;                     /* output channel, output width (iterator indices) */
	int weight;                   /* read index of the weights */
	const tir_buffer *wbuf;
} conv_form;

static bool plain_iter(const tir_block *b, const tir_expr *e, int *it)
{
	if (e->kind != E_VAR)
		return false;
	*it = block_iter_of(b, e->var);
	return *it >= 0;
}

/* Whether heavy block b is of the convolution form: its output indexed by
 * plain spatial iterators, the last (k) and the one before it (w); an input
 * whose last index is k and whose other indices are plain reduction
 * iterators (the weights); another load using w (the activation). */
static bool conv_form_of(const tir_block *b, conv_form *f)
{
	const tir_buffer *y = b->store;
	if (!y || y->ndim < 3 || b->reduce != REDUCE_SUM)
		return false;
	for (int d = 0; d < y->ndim; d++) {
		int it;
		if (!plain_iter(b, b->store_idx[d], &it) || b->iters[it].kind != ITER_SPATIAL)
			return false;
	}
	plain_iter(b, b->store_idx[y->ndim - 1], &f->k);
	plain_iter(b, b->store_idx[y->ndim - 2], &f->w);
	f->weight = -1;
	bool act = false;
	for (int r = 0; r < b->nreads; r++) {
		const tir_region *rg = &b->reads[r];
		const tir_buffer *buf = rg->buf;
		if (buf == y)
			continue;
		bool weights = buf->role == BUF_INPUT && buf->ndim >= 2;
		for (int d = 0; d < buf->ndim && weights; d++) {
			int it;
			weights = rg->extent[d] == 1 && plain_iter(b, rg->min[d], &it) &&
				  (d == buf->ndim - 1 ? it == f->k : b->iters[it].kind == ITER_REDUCE);
		}
		if (weights && f->weight < 0) {
			f->weight = r;
			f->wbuf = buf;
			continue;
		}
		for (int d = 0; d < buf->ndim; d++)
			act = act || expr_uses_var(rg->min[d], b->iters[f->w].var);
	}
	return f->weight >= 0 && act;
}

bool sketch_cpu_conv_applies(const tir_program *p, const tir_target *t)
{
	if (t->kind != TIR_TARGET_CPU)
		return false;
	tir_block *hv[SKETCH_MAX_BLOCKS];
	int n = sketch_heavy_blocks(p, hv, SKETCH_MAX_BLOCKS);
	conv_form f;
	for (int i = 0; i < n; i++)
		if (!conv_form_of(hv[i], &f))
			return false;
	return n > 0;
}

/* The register tile (wb, kb) and the parallel chunks: the first draw
 * without penalty, or the least penalized of CONV_DRAWS. */
static int vector_regs(const tir_target *t)
{
	return t->vector_bytes >= 64 || !strncmp(t->key, "cpu:aarch64", 11) ? 32 : 16;
}

/* How far a tile of wb columns x kb vectors, with par parallel chunks,
 * falls short: registers past max_regs (10 each), accumulators under
 * CONV_MIN_ACC, fewer than two chunks a core (20).  0: none. */
static int64_t tile_penalty(int64_t wb, int64_t kb, int64_t par, int cores, int max_regs)
{
	int64_t acc = wb * kb, regs = acc + kb + 1, pen = 0;
	if (regs > max_regs)
		pen += 10 * (regs - max_regs);
	if (acc < CONV_MIN_ACC)
		pen += CONV_MIN_ACC - acc;
	if (par < 2 * cores)
		pen += 20;
	return pen;
}

static void draw_tile(tir_sched *s, int64_t wext, int64_t kblocks, int64_t par_rest,
		      int cores, int max_regs, int64_t *wf, int64_t *kf)
{
	int64_t best = -1, cw[2], ck[2];
	for (int k = 0; k < CONV_DRAWS && best != 0; k++) {
		sketch_draw_factors(s, wext, 2, cw);
		sketch_draw_factors(s, kblocks, 2, ck);
		int64_t pen = tile_penalty(cw[1], ck[1], par_rest * ck[0], cores, max_regs);
		if (best < 0 || pen < best) {
			best = pen;
			memcpy(wf, cw, sizeof cw);
			memcpy(kf, ck, sizeof ck);
		}
	}
}

/* The least penalty of any perfect tile: wb a divisor of wext, kb of
 * kblocks. */
static int64_t perfect_penalty(int64_t wext, int64_t kblocks, int64_t par_rest, int cores,
			       int max_regs)
{
	int64_t best = -1;
	for (int64_t wb = 1; wb <= wext && wb <= 4 * CONV_MAX_WB; wb++)
		for (int64_t kb = 1; kb <= kblocks && kb <= max_regs; kb++)
			if (wext % wb == 0 && kblocks % kb == 0) {
				int64_t p = tile_penalty(wb, kb, par_rest * (kblocks / kb), cores,
							 max_regs);
				if (best < 0 || p < best)
					best = p;
			}
	return best;
}

/* The imperfect tile of a width no perfect one suits: kb drawn as a
 * perfect tile of the k blocks (the least penalized of CONV_DRAWS, over
 * any wb), then the categorical of the wb in 2..CONV_MAX_WB (not past
 * wext) whose tile with that kb is penalized least, each as likely as
 * 1 / (1 + p)^2, p the part of the columns its last tile wastes, x 8.
 * Fills kf; *wb_rv the sampled wb's RV, or -1 with err. */
static int draw_imperfect(tir_sched *s, int64_t wext, int64_t kblocks, int64_t par_rest,
			  int cores, int max_regs, int64_t *kf, int *wb_rv, tir_error *err)
{
	int64_t best = -1, ck[2];
	int maxw = wext < CONV_MAX_WB ? (int)wext : CONV_MAX_WB;
	for (int k = 0; k < CONV_DRAWS && best != 0; k++) {
		sketch_draw_factors(s, kblocks, 2, ck);
		for (int wb = 2; wb <= maxw; wb++) {
			int64_t pen = tile_penalty(wb, ck[1], par_rest * ck[0], cores, max_regs);
			if (best < 0 || pen < best) {
				best = pen;
				memcpy(kf, ck, sizeof ck);
			}
		}
	}
	int64_t cand[CONV_MAX_WB];
	double prob[CONV_MAX_WB];
	int n = 0;
	for (int wb = 2; wb <= maxw; wb++) {
		int64_t pen = tile_penalty(wb, kf[1], par_rest * kf[0], cores, max_regs);
		if (pen > best)    /* only the best tiles (those of no penalty, if any) */
			continue;
		int64_t tiles = (wext + wb - 1) / wb, waste = tiles * wb - wext;
		double p = (double)pen + 8.0 * (double)waste / (double)wext;
		cand[n] = wb;
		prob[n++] = 1.0 / ((1 + p) * (1 + p));
	}
	if (n == 0)
		return tir_fail(err, "an output width of %lld has no imperfect tile",
				(long long)wext);
	*wb_rv = tir_sample_categorical(s, n, cand, prob, err);
	return *wb_rv < 0 ? -1 : 0;
}

static int conv_block(tir_sched *s, const tir_target *t, bool pack, const tir_block *heavy,
		      tir_error *err)
{
	sketch_blocks sb;
	sketch_find_blocks(s->p, heavy, &sb);
	conv_form f;
	if (!conv_form_of(heavy, &f))
		return tir_fail(err, "block \"%s\" is not of the convolution form", heavy->name);
	int lanes = sketch_vector_lanes(t, sketch_accum_dtype(&sb));
	int cores = t->cores > 0 ? t->cores : 1;
	int b;
	SKETCH_TRY(b = tir_get_block(s, heavy->name, err), "get the convolution");

	/* 1. the weights packed by L output channels */
	if (pack) {
		char map[96];
		int nd = f.wbuf->ndim, o = 0;
		o += snprintf(map + o, sizeof map - (size_t)o, "%d/%d", nd - 1, lanes);
		for (int d = 0; d < nd - 1; d++)
			o += snprintf(map + o, sizeof map - (size_t)o, ",%d", d);
		snprintf(map + o, sizeof map - (size_t)o, ",%d%%%d", nd - 1, lanes);
		int st, l[TIR_MAX_IO], nl, pl;
		SKETCH_TRY(st = tir_transform_layout(s, b, f.weight, map, err), "pack the weights");
		/* the pack, once per call: its rows parallel, its lanes a vector
		 * (scheduled here: a free copy would be inlined back by rows.c) */
		SKETCH_TRY(nl = tir_get_loops(s, st, l, TIR_MAX_IO, err), "the pack's loops");
		SKETCH_TRY(pl = tir_fuse(s, nl - 1, l, err), "fuse the pack's rows");
		SKETCH_TRY(tir_parallel(s, pl, err), "parallel pack");
		SKETCH_TRY(tir_vectorize(s, l[nl - 1], err), "vectorize the pack");
	}

	/* 2. the loops: k and w by their iterators, the rest kept */
	sketch_nest n;
	SKETCH_TRY(sketch_nest_of(s, b, &n, err), "its loops");
	const tir_block *blk = s->rv[b].block;
	int lk = -1, lw = -1, outer[TIR_MAX_IO], nouter = 0;
	int64_t kext = 0, wext = 0, par_rest = 1;
	for (int i = 0; i < n.ns; i++) {
		const tir_var *v = s->rv[n.spatial[i]].loop->var;
		if (expr_uses_var(blk->iters[f.k].binding, v)) {
			lk = n.spatial[i];
			kext = n.sext[i];
		} else if (expr_uses_var(blk->iters[f.w].binding, v)) {
			lw = n.spatial[i];
			wext = n.sext[i];
		} else {
			outer[nouter++] = n.spatial[i];
			par_rest *= n.sext[i];
		}
	}
	if (lk < 0 || lw < 0)
		return tir_fail(err, "the k and w loops of \"%s\" not found", heavy->name);

	/* 3. k as (k0, kb, kv = L), w as (w0, wb) */
	int ks[2];
	tir_int fl[2] = { TIR_LIT(0), TIR_LIT(lanes) };
	SKETCH_TRY(tir_split(s, lk, 2, fl, ks, err), "split k by the lanes");
	int64_t kblocks = (kext + lanes - 1) / lanes, wf[2], kf[2];
	int K[2], W[2], regs = vector_regs(t);
	if (wext > 1 && perfect_penalty(wext, kblocks, par_rest, cores, regs) > 0) {
		int wb_rv = -1;
		if (draw_imperfect(s, wext, kblocks, par_rest, cores, regs, kf, &wb_rv, err))
			return -1;
		SKETCH_TRY(sketch_tile_decided(s, ks[0], 2, 0, kf, K, err), "tile the k blocks");
		tir_int wfac[2] = { TIR_LIT(0), TIR_RV(wb_rv) };
		SKETCH_TRY(tir_split(s, lw, 2, wfac, W, err), "tile w imperfectly");
	} else {
		draw_tile(s, wext, kblocks, par_rest, cores, regs, wf, kf);
		SKETCH_TRY(sketch_tile_decided(s, ks[0], 2, 0, kf, K, err), "tile the k blocks");
		SKETCH_TRY(sketch_tile_decided(s, lw, 2, 0, wf, W, err), "tile w");
	}

	/* 4. (n, k0, ..) w0 | reduction | wb kb kv */
	int order[3 * TIR_MAX_IO], no = 0;
	int par[TIR_MAX_IO + 1], np = 0;
	if (nouter)
		par[np++] = order[no++] = outer[0];
	par[np++] = order[no++] = K[0];
	for (int i = 1; i < nouter; i++)
		par[np++] = order[no++] = outer[i];
	order[no++] = W[0];
	for (int i = 0; i < n.nr; i++)
		order[no++] = n.reduce[i];
	order[no++] = W[1];
	order[no++] = K[1];
	order[no++] = ks[1];
	SKETCH_TRY(tir_reorder(s, no, order, err), "reorder");
	int pl;
	SKETCH_TRY(pl = tir_fuse(s, np, par, err), "fuse the outer loops");
	SKETCH_TRY(tir_parallel(s, pl, err), "parallel");
	SKETCH_TRY(tir_vectorize(s, ks[1], err), "vectorize the lanes");
	SKETCH_TRY(tir_annotate(s, W[1], "unroll", 64, err), "unroll the tile's columns");
	SKETCH_TRY(tir_annotate(s, K[1], "unroll", 64, err), "unroll the tile's vectors");
	if (n.nr) {
		static const int64_t runroll[] = { 0, 2, 4, 8 };
		int ru;
		SKETCH_TRY(ru = tir_sample_categorical(s, 4, runroll, NULL, err), "reduction unroll");
		SKETCH_TRY(sketch_annotate_rv(s, n.reduce[n.nr - 1], "unroll", ru, err),
			   "unroll the inner reduction");
	}

	/* 5. the register tile: a local write cache at w0, the epilogues in
	 * its write-back */
	int wb;
	SKETCH_TRY(wb = tir_cache_write(s, b, 0, "local", err), "cache_write");
	for (int i = 0; i < sb.nconsumers; i++) {
		int c;
		tir_error ignored;
		SKETCH_TRY(c = tir_get_block(s, sb.consumer[i]->name, err), "get a consumer");
		/* one that reads more (a residual) is left to the rest */
		tir_reverse_compute_inline(s, c, &ignored);
	}
	SKETCH_TRY(tir_reverse_compute_at(s, wb, W[0], err), "reverse_compute_at the write-back");
	/* the write-back by whole vectors, its other loops unrolled: every
	 * access of the cache then has a constant index, so gcc keeps the
	 * tile in registers (a loop over it with a variable index leaves the
	 * tile an array on the stack, loaded and stored around every FMA) */
	int wl[TIR_MAX_IO], nw, wv[2];
	SKETCH_TRY(nw = sketch_loops_under(s, wb, W[0], wl, err), "the write-back's loops");
	if (nw > 0) {
		SKETCH_TRY(tir_split(s, wl[nw - 1], 2, fl, wv, err), "split the write-back by the lanes");
		SKETCH_TRY(tir_vectorize(s, wv[1], err), "vectorize the write-back");
		wl[nw - 1] = wv[0];
		for (int i = 0; i < nw; i++)
			SKETCH_TRY(tir_annotate(s, wl[i], "unroll", 64, err), "unroll the write-back");
	}

	/* 6. the init out of the reduction */
	if (n.nr)
		SKETCH_TRY(tir_decompose_reduction(s, b, n.reduce[0], err), "decompose_reduction");
	return 0;
}

/* Every heavy block (each of the convolution form: sketch_cpu_conv_applies)
 * by the nest above, then the rest. */
static int conv_sketch(tir_sched *s, const tir_target *t, bool pack, tir_error *err)
{
	tir_block *hv[SKETCH_MAX_BLOCKS];
	int n = sketch_heavy_blocks(s->p, hv, SKETCH_MAX_BLOCKS);
	if (n == 0)
		return tir_fail(err, "the program has no reduction block with data reuse");
	for (int i = 0; i < n; i++)
		if (hv[i]->stmt)
			SKETCH_TRY(conv_block(s, t, pack, hv[i], err), hv[i]->name);
	return sketch_schedule_rest(s, t, &sketch_cpu_rest, err);
}

int sketch_cpu_conv_blocked(tir_sched *s, const tir_target *t, tir_error *err)
{
	return conv_sketch(s, t, true, err);
}

int sketch_cpu_conv_direct(tir_sched *s, const tir_target *t, tir_error *err)
{
	return conv_sketch(s, t, false, err);
}
