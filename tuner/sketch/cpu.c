/*
 * cpu.c — the CPU sketches (Ansor / MetaSchedule style), for C targets.
 *
 * Written against the block structure only: the heavy sketches below tile
 * every heavy block of the program (rules.c's rule, in post-order) with the
 * injective producers it reads (padding) and the consumers of its output
 * (epilogues, sketch_find_blocks); a consumer that reads more than the heavy
 * block's output (a residual, a row's statistics) and every other block are
 * then scheduled by rows.c (cpu_rows.c: parallel rows, vector lanes).
 * Programs without a heavy block get cpu-rows (row reductions and their
 * consumers, rows.c) or, without any reduction, cpu-pointwise.
 *
 *   cpu-tile-cache   injective producers inlined; multi-level tiling SSRSRS of
 *                    the reduction block: every spatial loop in 4 levels
 *                    (S0 S1 S2 S3), every reduction loop in 2 (R0 R1), ordered
 *                    S0 S1 R0 S2 R1 S3; the S0 loops fused and parallel; the
 *                    innermost S3 loop (a tile of the last spatial loop, whose
 *                    length is a sampled multiple of the vector lanes)
 *                    vectorized; the accumulator in a local write cache
 *                    (cache_write "local") written back at a sampled location
 *                    (sample_compute_location: the fused S0 loop or an S1
 *                    loop), with the consumers inlined into the write-back
 *                    (reverse_compute_inline); the init decomposed out of the
 *                    reduction (decompose_reduction at R0), so the inner
 *                    S2 R1 S3 loops are a blocked micro-kernel: R1
 *                    accumulates into the S3 tile (rows x vectors) of the
 *                    cache (gcc keeps it in memory: its address moves with
 *                    the S2 loops); a sampled unroll depth ({0, 16, 64, 512})
 *                    on the S3 row loops, a sampled factor ({0, 2, 4, 8}) on
 *                    the innermost R1 loop.
 *   cpu-tile-reg     the register-tile variant: reduction loops untiled
 *                    (S0 S1 S2 R S3), the local write cache at the innermost
 *                    S2 loop, so it is exactly the S3 register tile, indexed
 *                    by constants once unrolled (gcc keeps it in registers);
 *                    the inputs read along the vector loop and the reduction
 *                    packed with cache_read "local" + compute_at at a
 *                    sampled location, so the reduction streams them.
 *   cpu-tile         the same without the write cache: the reduction
 *                    accumulates in its output, each consumer is moved to a
 *                    sampled location (reverse_compute_at) and vectorized.
 *
 *   cpu-conv-blocked, channels-last convolutions (cpu_conv.c): a register
 *   cpu-conv-direct  tile over output width x output-channel vectors, the
 *                    input broadcast into FMAs, the weights packed by the
 *                    lanes (transform_layout) or read where they are.
 *
 *   cpu-sdot,        on an AArch64 key with dotprod (i8mm): each int8 matmul
 *   cpu-smmla        or convolution (a product form, tensorcore.c) normalized
 *                    to a matmul, tiled around a 4 x 4 x 4 (2 x 2 x 8) nest
 *                    tensorized with sdot_4x4x4_i8_i32 (smmla_2x2x8_i8_i32,
 *                    ir/intrins.def, codegen/c_neon.c); see cpu_dot_block.
 *   cpu-udot         cpu-sdot for uint8 products, with udot_4x4x4_u8_i32.
 *   cpu-fmla         cpu-sdot's schedule on a key with fp16 for each
 *                    float16 product summed into float16 (out_dtype
 *                    float16), around a 4 x 8 x 4 nest tensorized with
 *                    fmla_4x8x4_f16.
 *
 * Tile sizes are sample_perfect_tile instructions whose decisions are drawn
 * here jointly over the loops (sketch_tile_decided), preferring tilings that
 * a CPU runs well: a register tile of at most CPU_MAX_ACC vector accumulators,
 * enough S0 iterations to feed every core, an R1 long enough to amortise the
 * accumulators' loads and stores.  The preference only biases the first
 * draw: the decisions are recorded like any other, mutations move factors
 * freely and replay checks only that they multiply to the extent.  The
 * copy loops of moved blocks (write-back, packs, consumers) are left to the
 * compiler's vectorizer: a get_loops after a sampled location would name a
 * number of loops that changes with the location, and the trace would no
 * longer replay once the search mutates it.  Extents need not divide: the vector tile is a split by a sampled lane multiple with
 * an inferred outer factor, which adds a predicate where it overshoots.
 */
#include <string.h>
#include "sketch.h"

#define CPU_MAX_ACC 24        /* vector accumulators of the register tile */
#define CPU_MAX_ROWS 12       /* rows (non-vector S3 iterations) of it */
#define CPU_MIN_RTILE 16      /* R1 iterations wanted per register tile */
#define CPU_MAX_RTILE 1024
#define CPU_DRAWS 64

static bool cpu_applies(const tir_program *p, const tir_target *t)
{
	return t->kind == TIR_TARGET_CPU && sketch_program_has(p, SKETCH_HEAVY);
}

/* ---- the joint draw of tile sizes -------------------------------------------- */

typedef struct cpu_tiles {
	/* spatial loop i (extent > 1, not the vector loop): f[i][0..3]; the
	 * vector loop's outer part: vf[0..2] (S0 S1 S2) */
	int64_t sf[TIR_MAX_IO][4];
	int64_t vf[3];
	int64_t rf[TIR_MAX_IO][2];
} cpu_tiles;

typedef struct cpu_shape {
	int ns, nr;
	int64_t sext[TIR_MAX_IO], rext[TIR_MAX_IO];
	bool tiled_s[TIR_MAX_IO], tiled_r[TIR_MAX_IO];
	int vi;                   /* the vector loop's index in sext, or -1 */
	int64_t vouter;           /* its outer part's extent (split by vlen) */
	int64_t vlen;             /* its S3 length */
	int lanes, cores;
} cpu_shape;

static int64_t tiles_penalty(const cpu_shape *sh, const cpu_tiles *t)
{
	int64_t rows = 1, par = 1, rtile = 1, rtotal = 1;
	for (int i = 0; i < sh->ns; i++) {
		if (!sh->tiled_s[i])
			continue;
		rows *= t->sf[i][3];
		par *= t->sf[i][0];
	}
	if (sh->vi >= 0 && sh->vouter > 1)
		par *= t->vf[0];
	for (int i = 0; i < sh->nr; i++)
		if (sh->tiled_r[i]) {
			rtile *= t->rf[i][1];
			rtotal *= sh->rext[i];
		}
	int64_t vecs = (sh->vlen + sh->lanes - 1) / sh->lanes;
	int64_t acc = rows * vecs, pen = 0;
	if (acc > CPU_MAX_ACC)
		pen += 10 * (acc - CPU_MAX_ACC);
	if (rows > CPU_MAX_ROWS)
		pen += 10 * (rows - CPU_MAX_ROWS);
	if (rows < 2 && acc < 4)
		pen += 5;
	if (par < 2 * sh->cores)
		pen += 20;
	int64_t want = rtotal < CPU_MIN_RTILE ? rtotal : CPU_MIN_RTILE;
	if (rtile < want)
		pen += 10;
	if (rtile > CPU_MAX_RTILE)
		pen += 5;
	return pen;
}

static void draw_tiles(tir_sched *s, const cpu_shape *sh, cpu_tiles *best)
{
	int64_t bestpen = -1;
	cpu_tiles cur;
	memset(&cur, 0, sizeof cur);
	for (int k = 0; k < CPU_DRAWS && bestpen != 0; k++) {
		for (int i = 0; i < sh->ns; i++)
			if (sh->tiled_s[i])
				sketch_draw_factors(s, sh->sext[i], 4, cur.sf[i]);
		if (sh->vi >= 0 && sh->vouter > 1)
			sketch_draw_factors(s, sh->vouter, 3, cur.vf);
		for (int i = 0; i < sh->nr; i++)
			if (sh->tiled_r[i])
				sketch_draw_factors(s, sh->rext[i], 2, cur.rf[i]);
		int64_t pen = tiles_penalty(sh, &cur);
		if (bestpen < 0 || pen < bestpen) {
			bestpen = pen;
			*best = cur;
		}
	}
}

/* ---- the sketch ----------------------------------------------------------------- */

static bool uses_reduce_iter(const tir_block *b, const tir_expr *e)
{
	for (int i = 0; i < b->niters; i++)
		if (b->iters[i].kind == ITER_REDUCE && expr_uses_var(e, b->iters[i].var))
			return true;
	return false;
}

/* cache_read "local" of every input of block b whose region moves with the
 * vector iterator and a reduction iterator, computed at a sampled location. */
static int pack_vector_operands(tir_sched *s, int b, const tir_var *vec_var, tir_error *err)
{
	const tir_block *blk = s->rv[b].block;
	const tir_buffer *bufs[TIR_MAX_IO];
	int nb = 0;
	for (int r = 0; r < blk->nreads && nb < TIR_MAX_IO; r++) {
		const tir_region *rg = &blk->reads[r];
		if (rg->buf->role != BUF_INPUT)
			continue;
		/* only plain operands (every index one iterator, as a matmul's B
		 * or a convolution's weights): their packs are dense boxes */
		bool vec = false, red = false, plain = true;
		for (int d = 0; d < rg->buf->ndim; d++) {
			vec = vec || expr_uses_var(rg->min[d], vec_var);
			red = red || uses_reduce_iter(blk, rg->min[d]);
			plain = plain && rg->min[d]->kind == E_VAR && rg->extent[d] == 1;
		}
		if (vec && red && plain)
			bufs[nb++] = rg->buf;
	}
	for (int k = 0; k < nb; k++) {
		int r = -1;
		for (int i = 0; i < blk->nreads && r < 0; i++)
			if (blk->reads[i].buf == bufs[k])
				r = i;
		if (r < 0)
			continue;
		int copy, loc;
		SKETCH_TRY(copy = tir_cache_read(s, b, r, "local", err), "cache_read");
		SKETCH_TRY(loc = tir_sample_compute_location(s, copy, TIR_LOC_COMPUTE_AT, err), "pack location");
		SKETCH_TRY(tir_compute_at(s, copy, loc, err), "compute_at the pack");
	}
	return 0;
}

/* How the accumulator is written back. */
typedef enum {
	WB_DIRECT,      /* the reduction accumulates in its output */
	WB_CACHE,       /* a local cache at a sampled S0 / S1 location */
	WB_REGISTER     /* a local cache of the register tile: at the innermost S2
			   loop, the reduction loops untiled (R0 empty) */
} cpu_wb;

static int cpu_tile_block(tir_sched *s, const tir_target *t, cpu_wb wbmode,
			  const tir_block *heavy, tir_error *err)
{
	sketch_blocks sb;
	sketch_find_blocks(s->p, heavy, &sb);
	cpu_shape sh;
	memset(&sh, 0, sizeof sh);
	sh.lanes = sketch_vector_lanes(t, sketch_accum_dtype(&sb));
	sh.cores = t->cores > 0 ? t->cores : 1;

	/* 1. injective producers (padding) inlined where legal */
	if (sketch_inline_producers(s, &sb, err) < 0)
		return -1;

	/* 2. the loops of the reduction block */
	int b;
	SKETCH_TRY(b = tir_get_block(s, sb.reduction->name, err), "get the reduction block");
	sketch_nest n;
	SKETCH_TRY(sketch_nest_of(s, b, &n, err), "its loops");
	sh.ns = n.ns;
	sh.nr = n.nr;
	sh.vi = -1;
	for (int i = 0; i < n.ns; i++) {
		sh.sext[i] = n.sext[i];
		sh.tiled_s[i] = n.sext[i] > 1;
		if (n.sext[i] > 1)
			sh.vi = i;
	}
	for (int i = 0; i < n.nr; i++) {
		sh.rext[i] = n.rext[i];
		sh.tiled_r[i] = n.rext[i] > 1 && wbmode != WB_REGISTER;
	}

	/* the block iterator the vector loop feeds */
	const tir_var *vec_var = NULL;
	if (sh.vi >= 0) {
		const tir_block *blk = s->rv[b].block;
		const tir_var *lv = s->rv[n.spatial[sh.vi]].loop->var;
		for (int i = 0; i < blk->niters; i++)
			if (expr_uses_var(blk->iters[i].binding, lv))
				vec_var = blk->iters[i].var;
	}

	/* 3. the vector tile: a sampled multiple of the lanes, outer part
	 * inferred (a predicate where it overshoots) */
	int S[4][TIR_MAX_IO], nS[4] = { 0 }, R[2][TIR_MAX_IO], nR[2] = { 0 };
	int vloop = -1, vouter = -1;
	if (sh.vi >= 0) {
		sh.tiled_s[sh.vi] = false;
		int64_t ext = n.sext[sh.vi];
		if (ext > sh.lanes) {
			int64_t cand[3];
			int nc = 0;
			for (int64_t m = 1; m <= 4 && m * sh.lanes <= ext; m *= 2)
				cand[nc++] = m * sh.lanes;
			int v;
			SKETCH_TRY(v = tir_sample_categorical(s, nc, cand, NULL, err), "vector tile");
			sh.vlen = tir_sched_int(s, v);
			tir_int fac[2] = { TIR_LIT(0), TIR_RV(v) };
			int o[2];
			SKETCH_TRY(tir_split(s, n.spatial[sh.vi], 2, fac, o, err), "split the vector tile");
			vouter = o[0];
			vloop = o[1];
			sh.vouter = (ext + sh.vlen - 1) / sh.vlen;
		} else {
			vloop = n.spatial[sh.vi];
			sh.vlen = ext;
			sh.vouter = 1;
		}
	}

	/* 4. the other tiles, drawn jointly, then split */
	cpu_tiles tl;
	memset(&tl, 0, sizeof tl);
	draw_tiles(s, &sh, &tl);
	for (int i = 0; i < n.ns; i++) {
		if (i == sh.vi) {
			if (vouter >= 0 && sh.vouter > 1) {
				int o[3];
				SKETCH_TRY(sketch_tile_decided(s, vouter, 3, 0, tl.vf, o, err),
					   "tile the vector loop");
				for (int l = 0; l < 3; l++)
					S[l][nS[l]++] = o[l];
			} else if (vouter >= 0) {
				S[0][nS[0]++] = vouter;
			}
			continue;
		}
		if (!sh.tiled_s[i]) {
			S[0][nS[0]++] = n.spatial[i];
			continue;
		}
		int o[4];
		SKETCH_TRY(sketch_tile_decided(s, n.spatial[i], 4, 0, tl.sf[i], o, err),
			   "tile a spatial loop");
		for (int l = 0; l < 4; l++)
			S[l][nS[l]++] = o[l];
	}
	if (vloop >= 0)
		S[3][nS[3]++] = vloop;
	for (int i = 0; i < n.nr; i++) {
		if (!sh.tiled_r[i]) {
			if (wbmode == WB_REGISTER)
				R[1][nR[1]++] = n.reduce[i];
			else
				R[0][nR[0]++] = n.reduce[i];
			continue;
		}
		int o[2];
		SKETCH_TRY(sketch_tile_decided(s, n.reduce[i], 2, 0, tl.rf[i], o, err),
			   "tile a reduction loop");
		R[0][nR[0]++] = o[0];
		R[1][nR[1]++] = o[1];
	}

	/* 5. S0 S1 R0 S2 R1 S3 */
	int order[6 * TIR_MAX_IO], k = 0;
	const int *lv[6] = { S[0], S[1], R[0], S[2], R[1], S[3] };
	const int nlv[6] = { nS[0], nS[1], nR[0], nS[2], nR[1], nS[3] };
	for (int l = 0; l < 6; l++)
		for (int i = 0; i < nlv[l]; i++)
			order[k++] = lv[l][i];
	if (k > 1)
		SKETCH_TRY(tir_reorder(s, k, order, err), "reorder SSRSRS");

	/* 6. outer tiles fused and parallel, the vector tile vectorized */
	if (nS[0]) {
		int par;
		SKETCH_TRY(par = tir_fuse(s, nS[0], S[0], err), "fuse the outer tiles");
		SKETCH_TRY(tir_parallel(s, par, err), "parallel");
	}
	if (vloop >= 0)
		SKETCH_TRY(tir_vectorize(s, vloop, err), "vectorize");

	/* 7. unroll depth on the register tile's rows (gcc unrolls a loop up to
	 * that many times: the rows of a tile up to it are unrolled whole), and
	 * a small unroll factor of the innermost reduction loop (the rows'
	 * depth there would multiply the code by hundreds) */
	static const int64_t unroll[] = { 0, 16, 64, 512 };
	static const int64_t runroll[] = { 0, 2, 4, 8 };
	int u, ru;
	SKETCH_TRY(u = tir_sample_categorical(s, 4, unroll, NULL, err), "unroll depth");
	int nrows = vloop >= 0 ? nS[3] - 1 : nS[3];     /* S3 but the vector loop */
	for (int i = 0; i < nrows; i++)
		SKETCH_TRY(sketch_annotate_rv(s, S[3][i], "unroll", u, err), "unroll a row loop");
	if (nR[1]) {
		SKETCH_TRY(ru = tir_sample_categorical(s, 4, runroll, NULL, err), "reduction unroll");
		SKETCH_TRY(sketch_annotate_rv(s, R[1][nR[1] - 1], "unroll", ru, err),
			   "unroll the inner reduction");
	}

	/* 8. the write-back: through a local cache with the consumers inlined,
	 * or the consumers moved next to the tiles */
	if (wbmode != WB_DIRECT) {
		int wb, loc;
		SKETCH_TRY(wb = tir_cache_write(s, b, 0, "local", err), "cache_write");
		for (int i = 0; i < sb.nconsumers; i++) {
			int c;
			tir_error ignored;
			SKETCH_TRY(c = tir_get_block(s, sb.consumer[i]->name, err), "get a consumer");
			/* one that reads more (a residual, a row's statistics) is
			 * left to the rest (rows.c) */
			tir_reverse_compute_inline(s, c, &ignored);
		}
		if (wbmode == WB_REGISTER && nS[2])
			loc = S[2][nS[2] - 1];
		else if (wbmode == WB_REGISTER && nS[1])
			loc = S[1][nS[1] - 1];
		else
			SKETCH_TRY(loc = tir_sample_compute_location(s, wb, TIR_LOC_REVERSE_COMPUTE_AT, err),
				   "write-back location");
		SKETCH_TRY(tir_reverse_compute_at(s, wb, loc, err), "reverse_compute_at the write-back");
	} else {
		for (int i = 0; i < sb.nconsumers; i++) {
			int c, loc;
			tir_error ignored;
			SKETCH_TRY(c = tir_get_block(s, sb.consumer[i]->name, err), "get a consumer");
			/* where it has no place among the tiles (it reads what
			 * other nests compute), it is left to the rest */
			if ((loc = tir_sample_compute_location(s, c, TIR_LOC_REVERSE_COMPUTE_AT,
							       &ignored)) < 0)
				continue;
			tir_reverse_compute_at(s, c, loc, &ignored);
		}
	}

	/* 9. register tiles stream their vector operand: the inputs read along
	 * the vector loop and the reduction are packed (cache_read into a
	 * local buffer at a sampled location), so the reduction walks them
	 * contiguously instead of a row of the input apart */
	if (wbmode == WB_REGISTER && vec_var)
		SKETCH_TRY(pack_vector_operands(s, b, vec_var, err), "pack");

	/* 10. the init out of the reduction loops */
	if (nR[0] || nR[1])
		SKETCH_TRY(tir_decompose_reduction(s, b, nR[0] ? R[0][0] : R[1][0], err),
			   "decompose_reduction");
	return 0;
}

/* Every heavy block in post-order, then the rest (rows.c, cpu_rows.c). */
static int cpu_tile(tir_sched *s, const tir_target *t, cpu_wb wbmode, tir_error *err)
{
	tir_block *hv[SKETCH_MAX_BLOCKS];
	int n = sketch_heavy_blocks(s->p, hv, SKETCH_MAX_BLOCKS);
	if (n == 0)
		return tir_fail(err, "the program has no reduction block with data reuse");
	for (int i = 0; i < n; i++)
		if (hv[i]->stmt)
			SKETCH_TRY(cpu_tile_block(s, t, wbmode, hv[i], err), hv[i]->name);
	return sketch_schedule_rest(s, t, &sketch_cpu_rest, err);
}

static int cpu_tile_cache(tir_sched *s, const tir_target *t, tir_error *err)
{
	return cpu_tile(s, t, WB_CACHE, err);
}

static int cpu_tile_plain(tir_sched *s, const tir_target *t, tir_error *err)
{
	return cpu_tile(s, t, WB_DIRECT, err);
}

static int cpu_tile_reg(tir_sched *s, const tir_target *t, tir_error *err)
{
	return cpu_tile(s, t, WB_REGISTER, err);
}

/* ---- cpu-sdot, cpu-udot, cpu-smmla, cpu-fmla: AArch64's tensor intrinsics ------------ */

/* The CPU intrinsic of a sketch, by its intrins.def name. */
static const tir_intrin *dot_intrin(const char *name)
{
	const tir_intrin *in = intrin_find(name);
	return in && in->unit == INTRIN_CPU ? in : NULL;
}

static bool dot_fits(const tir_block *b, const tir_intrin *in)
{
	return sketch_product_form(b, in->in, in->acc);
}

static bool dot_applies(const tir_program *p, const tir_target *t, const char *intrin)
{
	const tir_intrin *in = dot_intrin(intrin);
	if (!in || t->kind != TIR_TARGET_CPU || !tir_target_has(t, in->feature))
		return false;
	tir_block *hv[SKETCH_MAX_BLOCKS];
	int n = sketch_heavy_blocks(p, hv, SKETCH_MAX_BLOCKS);
	for (int i = 0; i < n; i++)
		if (dot_fits(hv[i], in))
			return true;
	return false;
}

static bool sdot_applies(const tir_program *p, const tir_target *t)
{
	return dot_applies(p, t, "sdot_4x4x4_i8_i32");
}

static bool udot_applies(const tir_program *p, const tir_target *t)
{
	return dot_applies(p, t, "udot_4x4x4_u8_i32");
}

static bool smmla_applies(const tir_program *p, const tir_target *t)
{
	return dot_applies(p, t, "smmla_2x2x8_i8_i32");
}

static bool fmla_applies(const tir_program *p, const tir_target *t)
{
	return dot_applies(p, t, "fmla_4x8x4_f16");
}

/* One heavy block of product form on intrinsic `in` (m x n x k): normalized
 * (sketch_mm_normalize: a convolution's im2col operand a reindexed copy of
 * its own, extents padded to whole tiles), I, J and K split by the tile and
 * the rest tiled in two sampled levels, ordered
 *   batch I0 J0 | K0 | I1 J1 K1 | m n k
 * with (batch, I0, J0) fused and parallel, the init decomposed at K0 and the
 * m x n x k nest tensorized; a sampled unroll of K1.  The copy stages the
 * normalization leaves (the im2col matrix, a crop, the output's reindex) are
 * the rest's (rows.c), which never inlines one into the tensorized block. */
static int cpu_dot_block(tir_sched *s, const tir_intrin *in, const tir_block *heavy,
			 tir_error *err)
{
	int tile[3] = { in->m, in->n, in->k };
	sketch_mm mm;
	SKETCH_TRY(sketch_mm_normalize(s, heavy, tile, &mm, err), "normalize");
	int b, l[TIR_MAX_IO], n;
	SKETCH_TRY(b = tir_get_block(s, mm.b->name, err), "get the product");
	SKETCH_TRY(n = tir_get_loops(s, b, l, TIR_MAX_IO, err), "its loops");
	/* the loop of each iterator: the normalized nest binds them one to one */
	int li = -1, lj = -1, lk = -1, lb[TIR_MAX_IO], nb = 0;
	for (int x = 0; x < n; x++) {
		const tir_var *v = s->rv[l[x]].loop->var;
		int it = -1;
		for (int k = 0; k < mm.b->niters; k++)
			if (expr_uses_var(mm.b->iters[k].binding, v))
				it = k;
		if (it == mm.i)
			li = l[x];
		else if (it == mm.j)
			lj = l[x];
		else if (it == mm.k)
			lk = l[x];
		else
			lb[nb++] = l[x];
	}
	if (li < 0 || lj < 0 || lk < 0)
		return tir_fail(err, "the I, J and K loops of \"%s\" not found", mm.b->name);
	int si[2], sj[2], sk[2], I[2], J[2], K[2];
	tir_int fm[2] = { TIR_LIT(0), TIR_LIT(in->m) }, fn[2] = { TIR_LIT(0), TIR_LIT(in->n) },
		fk[2] = { TIR_LIT(0), TIR_LIT(in->k) };
	SKETCH_TRY(tir_split(s, li, 2, fm, si, err), "split I by the tile");
	SKETCH_TRY(tir_split(s, lj, 2, fn, sj, err), "split J by the tile");
	SKETCH_TRY(tir_split(s, lk, 2, fk, sk, err), "split K by the tile");
	SKETCH_TRY(sketch_tile(s, si[0], 2, 0, I, err), "tile I");
	SKETCH_TRY(sketch_tile(s, sj[0], 2, 0, J, err), "tile J");
	SKETCH_TRY(sketch_tile(s, sk[0], 2, 0, K, err), "tile K");
	int ord[TIR_MAX_IO + 9], k = 0;
	for (int q = 0; q < nb; q++)
		ord[k++] = lb[q];
	int rest[] = { I[0], J[0], K[0], I[1], J[1], K[1], si[1], sj[1], sk[1] };
	for (size_t q = 0; q < sizeof rest / sizeof *rest; q++)
		ord[k++] = rest[q];
	SKETCH_TRY(tir_reorder(s, k, ord, err), "reorder");
	int outer[TIR_MAX_IO + 2], no = 0, par;
	for (int q = 0; q < nb; q++)
		outer[no++] = lb[q];
	outer[no++] = I[0];
	outer[no++] = J[0];
	SKETCH_TRY(par = tir_fuse(s, no, outer, err), "fuse the outer tiles");
	SKETCH_TRY(tir_parallel(s, par, err), "parallel");
	static const int64_t runroll[] = { 0, 2, 4, 8 };
	int ru;
	SKETCH_TRY(ru = tir_sample_categorical(s, 4, runroll, NULL, err), "reduction unroll");
	SKETCH_TRY(sketch_annotate_rv(s, K[1], "unroll", ru, err), "unroll K1");
	SKETCH_TRY(tir_decompose_reduction(s, b, K[0], err), "decompose_reduction");
	SKETCH_TRY(tir_tensorize(s, si[1], in->name, err), "tensorize");
	return 0;
}

/* Every heavy block in post-order: those of product form in the dtypes of
 * CPU intrinsic `intrin`, the others as cpu-tile-cache; then the rest. */
static int cpu_dot(tir_sched *s, const tir_target *t, const char *intrin, tir_error *err)
{
	const tir_intrin *in = dot_intrin(intrin);
	tir_block *hv[SKETCH_MAX_BLOCKS];
	int n = sketch_heavy_blocks(s->p, hv, SKETCH_MAX_BLOCKS);
	if (!in || n == 0)
		return tir_fail(err, "the program has no reduction block with data reuse");
	for (int i = 0; i < n; i++) {
		if (!hv[i]->stmt)
			continue;
		if (dot_fits(hv[i], in))
			SKETCH_TRY(cpu_dot_block(s, in, hv[i], err), hv[i]->name);
		else
			SKETCH_TRY(cpu_tile_block(s, t, WB_CACHE, hv[i], err), hv[i]->name);
	}
	return sketch_schedule_rest(s, t, &sketch_cpu_rest, err);
}

static int cpu_sdot(tir_sched *s, const tir_target *t, tir_error *err)
{
	return cpu_dot(s, t, "sdot_4x4x4_i8_i32", err);
}

static int cpu_udot(tir_sched *s, const tir_target *t, tir_error *err)
{
	return cpu_dot(s, t, "udot_4x4x4_u8_i32", err);
}

static int cpu_smmla(tir_sched *s, const tir_target *t, tir_error *err)
{
	return cpu_dot(s, t, "smmla_2x2x8_i8_i32", err);
}

static int cpu_fmla(tir_sched *s, const tir_target *t, tir_error *err)
{
	return cpu_dot(s, t, "fmla_4x8x4_f16", err);
}

/* ---- programs without heavy blocks (rows.c, cpu_rows.c) ------------------------------- */

static bool rows_apply(const tir_program *p, const tir_target *t)
{
	return t->kind == TIR_TARGET_CPU && !sketch_program_has(p, SKETCH_HEAVY) &&
	       sketch_program_has(p, SKETCH_ROW);
}

static bool pointwise_applies(const tir_program *p, const tir_target *t)
{
	return t->kind == TIR_TARGET_CPU && !sketch_program_has(p, SKETCH_HEAVY) &&
	       !sketch_program_has(p, SKETCH_ROW);
}

static int cpu_rest(tir_sched *s, const tir_target *t, tir_error *err)
{
	return sketch_schedule_rest(s, t, &sketch_cpu_rest, err);
}

const sketch_def sketch_cpu_defs[] = {
	{ "cpu-tile-reg", cpu_applies, cpu_tile_reg },
	{ "cpu-tile-cache", cpu_applies, cpu_tile_cache },
	{ "cpu-tile", cpu_applies, cpu_tile_plain },
	{ "cpu-sdot", sdot_applies, cpu_sdot },
	{ "cpu-udot", udot_applies, cpu_udot },
	{ "cpu-smmla", smmla_applies, cpu_smmla },
	{ "cpu-fmla", fmla_applies, cpu_fmla },
	{ "cpu-rows", rows_apply, cpu_rest },
	{ "cpu-pointwise", pointwise_applies, cpu_rest },
	{ "cpu-conv-blocked", sketch_cpu_conv_applies, sketch_cpu_conv_blocked },
	{ "cpu-conv-direct", sketch_cpu_conv_applies, sketch_cpu_conv_direct },
};
const int sketch_cpu_ndefs = (int)(sizeof sketch_cpu_defs / sizeof *sketch_cpu_defs);
