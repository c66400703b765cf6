/*
 * tensorcore.c — the tensor-core sketches: gpu-tensorcore, for CUDA targets
 * with WMMA (compute capability 7.0 on), and gpu-wgmma, for 9.0 (below).
 *
 * It applies to a heavy block (rules.c) of matrix-multiply form — each one
 * of the program, the others tiled by gpu-tile and the rest of the program
 * scheduled by rows.c (sketch_gpu_heavy) — recognised by
 * what the block computes (mm_form): acc[..] += cast(a[..]) * cast(b[..])
 * with operand and accumulator dtypes of an MMA intrinsic (ir/intrins.def),
 * and iterators that are, each, in all three accesses (batch), in a and the
 * output (I), in b and the output (J), or a reduction in a and b (K) — one
 * each of I, J and K, with extents that are whole 16-element tiles.  That is
 * a matmul, batched or not, in any operand layout.
 *
 * Every reduction of that product form, also with several iterators per
 * role (einsum_of: a convolution's n,h,w are I, its r,s,ci are K; a grouped
 * convolution's output channel k, which the input reads only as k // f, is
 * split into a batch part, the group, and a J part) or
 * extents that are not whole tiles, is first normalized (normalize):
 * transform_block_layout fuses each role's iterators into one; a sampled
 * split-K (rfactor into 1-16 parts, which become a batch iterator, summed by
 * a kernel after) for outputs too few to fill the GPU; reindex gives every
 * access that is then not a plain [i][k] / [k][j] / [i][j] matrix a buffer
 * of its own (the input's im2col matrix); pad_einsum rounds the extents up
 * to a sampled multiple of the tile.  The input stages this leaves are
 * inlined into the shared-memory fetch (the im2col matrix is never stored).
 * A block left writing its own output stores its fragments there directly
 * (wgmma: in 3 draws of 4 through the epilogue, its consumer inlined into
 * the store of the registers);
 * otherwise the accumulator goes through a shared-memory tile that all
 * threads copy out, with the crop, the reindex and the epilogues inlined
 * into that copy (the parts' sum and what follows it: kernels of their own).
 * The normalization is also the CPU's (sketch_mm_normalize: cpu.c's cpu-sdot
 * and cpu-smmla), with that sketch's tile and without WMMA's alignment.
 *
 * The schedule, per thread block of W warps (blockDim = 32 x W):
 *   I split [I0 blockIdx, I1 warp, I2 fragments per warp, 16]
 *   J split [J0 blockIdx, J1 warp, J2 fragments per warp, 16]
 *   K split [K0 serial, K1 staged steps, 16]
 *   order   batch I0 J0 | I1 J1 | K0 | K1 | I2 J2 | 16 16 16
 *   (batch, I0, J0) fused to blockIdx.x, (I1, J1) fused to threadIdx.y;
 *   a and b: cache_read "shared" at K0 (cooperative fetch over all threads,
 *   threadIdx.y x threadIdx.x x a sampled vector of up to 16 bytes, a
 *   sampled storage_align padding against bank conflicts), then cache_read
 *   into wmma.matrix_a / wmma.matrix_b at K1, split into 16-row tiles and
 *   tensorized with the LOAD intrinsics; the accumulator: cache_write
 *   "wmma.accumulator" written back at the warp level in 16 x 16 tiles
 *   (STORE); the reduction decomposed at K0, its init tensorized (FILL), its
 *   update (MMA).  Consumers (epilogues) become kernels of their own.
 * Tile factors are drawn jointly under soft limits (warps, fragments per
 * warp, staged bytes) and recorded as sample_perfect_tile decisions, so the
 * search mutates them; validation filters what breaks hard limits.
 *
 * gpu-wgmma, the same for Hopper's warpgroup MMA (sm_90, float16 / bfloat16
 * into float32), per thread block of W warpgroups (blockDim = 128 x W):
 *   a width N of 64, 128 or 256 (at most twice J) drawn by the sketch, then
 *   normalized as above with I padded to multiples of 64, J of N, K of 64;
 *   I split [I0 blockIdx, I1 warpgroup, I2 MMAs per warpgroup, 64]
 *   J split [J0 blockIdx, J1 warpgroup, J2 MMAs per warpgroup, N]
 *   K split [K0 serial, K1 = 4 steps, 16]: a staged K tile of 64 two-byte
 *   elements is one 128-byte row, the swizzle atom's width
 *   order   batch I0 J0 | I1 J1 | K0 | K1 | I2 J2 | 64 N 16, bound as above;
 *   a and b: cache_read "shared" at K0, no padding (codegen swizzles these
 *   buffers), read by the MMA itself, fetched — where both are boxes of the
 *   kernel's inputs (lower_tma_stage), 3 draws in 4 — by the tensor memory
 *   accelerator from a producer warpgroup (K0 annotated "tma", the fetch
 *   loops left serial), else cooperatively by all threads; the accumulator: cache_write "wgmma.accumulator" written back
 *   per warpgroup in 64 x N tiles (STORE), its init FILL, the update MMA.
 * Its tiles are drawn with warpgroups and MMAs per warpgroup among small
 * divisors (draw_inner) under the limits of wg_penalty: at most 4
 * warpgroups, at most 128 accumulators a thread and what __launch_bounds__
 * leaves them.
 */
#include <stdlib.h>
#include <string.h>
#include "sketch.h"
#include "../codegen/codegen.h"

#define TRY SKETCH_TRY
#define MAX_WARPS 8
#define MAX_FRAGS 16          /* accumulator fragments per warp: 8 registers each */
#define MAX_KTILE 8           /* K1: 16-element steps staged per K0 iteration */
#define MAX_STAGED (48 * 1024)
#define MAX_SHARED (96 * 1024)   /* operands and a staged output tile */
#define DRAWS 256
#define PAD_CHOICES 4  /* pad to 1, 2, 4 or 8 tiles: at most a third more work */
/* gpu-wgmma: warpgroups a block, accumulators a thread, staged bytes of one
 * K tile (the pipeline multiplies it) */
#define WG_MAX 4
#define WG_MAX_ACC 128
#define WG_MAX_STAGED (64 * 1024)

typedef struct mm_form {
	const tir_block *b;
	const tir_intrin *mma;
	const tir_buffer *a, *bb;    /* the operands */
	int i, j, k;                 /* iterator index of I, J, K */
} mm_form;

static bool uses(const tir_expr *load, const tir_var *v)
{
	for (int d = 0; d < load->nidx; d++)
		if (expr_uses_var(load->idx[d], v))
			return true;
	return false;
}

static bool plain_indices(const tir_expr *const *idx, int n)
{
	for (int d = 0; d < n; d++)
		if (idx[d]->kind != E_VAR && idx[d]->kind != E_INT)
			return false;
	return true;
}

/* Block b if it computes acc += cast(x) * cast(y) with x and y loads of two
 * buffers of one dtype and an MMA intrinsic for those dtypes (*mma: the
 * first in intrins.def, a GPU one where there is one; float16 into float16
 * and uint8 into int32 have only AArch64's fmla and udot, which the GPU
 * sketches refuse), else NULL.  A sum only: an MMA never computes a max or a min of products, so
 * neither tensor-core sketch applies to one. */
static const tir_block *product_of(const tir_block *b, const tir_expr **x,
				   const tir_expr **y, const tir_intrin **mma)
{
	if (!b || b->reduce != REDUCE_SUM || !b->value || b->value->kind != E_MUL)
		return NULL;
	tir_dtype acc = b->store->dtype;
	*x = expr_uncast(b->value->a, acc);
	*y = expr_uncast(b->value->b, acc);
	if (!*x || !*y || (*x)->kind != E_LOAD || (*y)->kind != E_LOAD || (*x)->buf == (*y)->buf ||
	    (*x)->buf->dtype != (*y)->buf->dtype)
		return NULL;
	*mma = NULL;
	for (int i = 0; i < tir_nintrins && !*mma; i++)
		if (tir_intrins[i].kind == INTRIN_MMA && tir_intrins[i].in == (*x)->buf->dtype &&
		    tir_intrins[i].acc == acc)
			*mma = &tir_intrins[i];
	return *mma ? b : NULL;
}

/* Whether block b0 has matrix-multiply form, I, J and K whole tiles of
 * tile[0..2] (NULL: the MMA intrinsic's), one-byte operands (wmma: true)
 * contiguous along K. */
static bool mm_form_tiled(const tir_block *b0, mm_form *f, const int *tile, bool wmma);

static bool mm_form_of(const tir_block *b0, mm_form *f)
{
	return mm_form_tiled(b0, f, NULL, true);
}

static bool mm_form_tiled(const tir_block *b0, mm_form *f, const int *tile, bool wmma)
{
	memset(f, 0, sizeof *f);
	const tir_expr *x, *y;
	const tir_block *b = product_of(b0, &x, &y, &f->mma);
	if (!b || !plain_indices((const tir_expr *const *)x->idx, x->nidx) ||
	    !plain_indices((const tir_expr *const *)y->idx, y->nidx) ||
	    !plain_indices((const tir_expr *const *)b->store_idx, b->store->ndim))
		return false;
	f->b = b;
	f->a = x->buf;
	f->bb = y->buf;
	f->i = f->j = f->k = -1;
	tir_expr store = { .kind = E_LOAD, .nidx = b->store->ndim,
			   .idx = (tir_expr **)b->store_idx };
	for (int it = 0; it < b->niters; it++) {
		const tir_var *v = b->iters[it].var;
		bool ia = uses(x, v), ib = uses(y, v), ic = uses(&store, v);
		int *slot = NULL;
		if (b->iters[it].kind == ITER_REDUCE) {
			if (!ia || !ib || ic)
				return false;
			slot = &f->k;
		} else if (ia && ic && !ib) {
			slot = &f->i;
		} else if (ib && ic && !ia) {
			slot = &f->j;
		} else if (!(ia && ib && ic) && b->iters[it].extent > 1) {
			return false;        /* neither a batch nor a matrix axis */
		}
		if (slot && *slot >= 0)
			return false;
		if (slot)
			*slot = it;
	}
	/* one-byte operands: 16 columns are 16 bytes, so only tiles whose
	 * contiguous axis is K (K1 = 1, see tiles_penalty) stay 32-byte aligned */
	if (wmma && dtype_bytes(x->buf->dtype) == 1 && f->k >= 0 &&
	    (!expr_uses_var(x->idx[x->nidx - 1], b->iters[f->k].var) ||
	     !expr_uses_var(y->idx[y->nidx - 1], b->iters[f->k].var)))
		return false;
	int tm = tile ? tile[0] : f->mma->m, tn = tile ? tile[1] : f->mma->n,
	    tk = tile ? tile[2] : f->mma->k;
	return f->i >= 0 && f->j >= 0 && f->k >= 0 && b->iters[f->i].extent % tm == 0 &&
	       b->iters[f->j].extent % tn == 0 && b->iters[f->k].extent % tk == 0;
}

/* The roles of a product-form reduction's iterators: batch (in a, b and the
 * output), I (a and output), J (b and output), K (reduction in a and b), any
 * number of each; an iterator of extent 1 goes where its kind allows. */
enum { ROLE_BATCH, ROLE_I, ROLE_J, ROLE_K, NROLES };
typedef struct einsum_form {
	const tir_block *b;
	const tir_intrin *mma;
	const tir_buffer *a, *bb;
	int n[NROLES];
	int it[NROLES][TIR_MAX_ITERS];
	/* a split iterator (a grouped convolution's output channel k, which
	 * one operand reads only as k // f): its outer part in one role, its
	 * inner part (split[.][.] = f) in another, "k/f" and "k%f" */
	int64_t split[NROLES][TIR_MAX_ITERS];
	bool inner[NROLES][TIR_MAX_ITERS];
} einsum_form;

/* Whether v occurs in e, and only as floordiv(v, f) with one constant f. */
static bool only_divided(const tir_expr *e, const tir_var *v, int64_t *f)
{
	if (!e)
		return true;
	if (e->kind == E_VAR)
		return e->var != v;
	if (e->kind == E_FLOORDIV && e->a->kind == E_VAR && e->a->var == v &&
	    e->b->kind == E_INT && e->b->ival > 1) {
		if (*f && *f != e->b->ival)
			return false;
		*f = e->b->ival;
		return true;
	}
	bool ok = only_divided(e->a, v, f) && only_divided(e->b, v, f) &&
		  only_divided(e->c, v, f);
	for (int d = 0; ok && d < e->nidx; d++)
		ok = only_divided(e->idx[d], v, f);
	return ok;
}

/* f > 1 if load uses v only as floordiv(v, f) and f divides the extent. */
static int64_t divided_by(const tir_expr *load, const tir_block *b, int it)
{
	int64_t f = 0;
	if (!only_divided(load, b->iters[it].var, &f) || f <= 1 || b->iters[it].extent % f)
		return 0;
	return f;
}

static void add_role(einsum_form *e, int role, int it, int64_t split, bool inner)
{
	int k = e->n[role]++;
	e->it[role][k] = it;
	e->split[role][k] = split;
	e->inner[role][k] = inner;
}

static bool einsum_of(const tir_block *b0, einsum_form *e)
{
	memset(e, 0, sizeof *e);
	const tir_expr *x, *y;
	const tir_block *b = product_of(b0, &x, &y, &e->mma);
	if (!b)
		return false;
	tir_expr store = { .kind = E_LOAD, .nidx = b->store->ndim,
			   .idx = (tir_expr **)b->store_idx };
	for (int it = 0; it < b->niters; it++) {
		const tir_var *v = b->iters[it].var;
		bool ia = uses(x, v), ib = uses(y, v), ic = uses(&store, v);
		bool one = b->iters[it].extent == 1;
		int role;
		if (b->iters[it].kind == ITER_REDUCE) {
			if ((!ia || !ib || ic) && !one)
				return false;
			role = ROLE_K;
		} else if (ia && ib && ic) {
			/* in all three, but one operand sees only k // f: the
			 * outer part a batch, the inner one a matrix axis */
			int64_t fa = divided_by(x, b, it), fb = divided_by(y, b, it);
			if (fa || fb) {
				add_role(e, ROLE_BATCH, it, fa ? fa : fb, false);
				add_role(e, fa ? ROLE_J : ROLE_I, it, fa ? fa : fb, true);
				continue;
			}
			role = ROLE_BATCH;
		} else if (ia && ic && !ib) {
			role = ROLE_I;
		} else if (ib && ic && !ia) {
			role = ROLE_J;
		} else if (one) {
			role = ROLE_I;
		} else {
			return false;
		}
		add_role(e, role, it, 0, false);
	}
	e->b = b;
	e->a = x->buf;
	e->bb = y->buf;
	return e->n[ROLE_I] && e->n[ROLE_J] && e->n[ROLE_K];
}

/* gpu-wgmma: two-byte operands (float16, bfloat16) into float32 on a 9.0
 * GPU (sm_90a's wgmma), the product form as for WMMA. */
static bool wgmma_fits(const tir_program *p, const tir_target *t, const tir_block *b)
{
	(void)p;
	mm_form f;
	einsum_form e;
	const tir_intrin *mma;
	if (t->kind != TIR_TARGET_CUDA || t->sm != 90)
		return false;
	if (mm_form_of(b, &f))
		mma = f.mma;
	else if (einsum_of(b, &e))
		mma = e.mma;
	else
		return false;
	return mma->unit != INTRIN_CPU && (mma->in == TIR_F16 || mma->in == TIR_BF16) &&
	       mma->acc == TIR_F32;
}

static bool wmma_fits(const tir_program *p, const tir_target *t, const tir_block *b)
{
	(void)p;
	mm_form f;
	einsum_form e;
	const tir_intrin *mma;
	if (t->kind != TIR_TARGET_CUDA)
		return false;
	if (mm_form_of(b, &f))
		mma = f.mma;
	else if (einsum_of(b, &e) && e.mma->in != TIR_I8)
		mma = e.mma;    /* one-byte operands: reindexed b is [k][j], see mm_form_of */
	else
		return false;
	if (mma->unit == INTRIN_CPU)    /* dtypes only AArch64 has (fmla's, udot's) */
		return false;
	int need = mma->in == TIR_I8 ? 72 : mma->in == TIR_BF16 ? 80 : 70;
	return t->sm == 0 || t->sm >= need;
}

/* Whether some heavy block of p fits. */
static bool some_heavy_fits(const tir_program *p, const tir_target *t,
			    bool (*fits)(const tir_program *, const tir_target *, const tir_block *))
{
	tir_block *hv[SKETCH_MAX_BLOCKS];
	int n = sketch_heavy_blocks(p, hv, SKETCH_MAX_BLOCKS);
	for (int i = 0; i < n; i++)
		if (fits(p, t, hv[i]))
			return true;
	return false;
}

bool sketch_wgmma_applies(const tir_program *p, const tir_target *t)
{
	return some_heavy_fits(p, t, wgmma_fits);
}

bool sketch_tensorcore_applies(const tir_program *p, const tir_target *t)
{
	return some_heavy_fits(p, t, wmma_fits);
}


static int read_of(tir_sched *s, int block, const tir_buffer *buf, tir_error *err);

/* The load of buf in b's product (the operand's access). */
static const tir_expr *operand(const tir_block *b, const tir_buffer *buf)
{
	const tir_expr *x = expr_uncast(b->value->a, b->store->dtype);
	return x && x->kind == E_LOAD && x->buf == buf ? x
	       : expr_uncast(b->value->b, b->store->dtype);
}

/* The dimensions of an operand's reindexed buffer: its first nb iterators
 * (the part and batch, which every access uses) first, the others in the
 * order they appear in its indices (the innermost stays contiguous). */
static char *operand_dims(const tir_block *b, const tir_expr *x, int nb)
{
	tir_buf d = { 0 };
	bool done[TIR_MAX_ITERS] = { false };
	for (int i = 0; i < nb; i++) {
		buf_printf(&d, "%s%d", d.len ? "," : "", i);
		done[i] = true;
	}
	for (int k = 0; k < x->nidx; k++)
		for (int i = 0; i < b->niters; i++)
			if (!done[i] && expr_uses_var(x->idx[k], b->iters[i].var)) {
				buf_printf(&d, "%s%d", d.len ? "," : "", i);
				done[i] = true;
			}
	return buf_take(&d);
}

/* Puts the block of e into matrix-multiply form (see the top of the file),
 * I, J and K padded to multiples of tile[0..2] (times a sampled number). */
static int normalize(tir_sched *s, const einsum_form *e, const int tile[3], tir_error *err)
{
	int b;
	TRY(b = tir_get_block(s, e->b->name, err), "get block");
	tir_buf g = { 0 };
	for (int r = 0; r < NROLES; r++) {
		for (int j = 0; j < e->n[r]; j++) {
			buf_printf(&g, "%s%d", j ? "," : g.len ? ";" : "", e->it[r][j]);
			if (e->split[r][j])
				buf_printf(&g, "%c%lld", e->inner[r][j] ? '%' : '/',
					   (long long)e->split[r][j]);
		}
	}
	char *groups = buf_take(&g);
	int rc = tir_transform_block_layout(s, b, groups, err);
	free(groups);
	if (rc < 0)
		return -1;
	/* split-K: a sampled number of partial sums over consecutive parts
	 * of K (at least 64 each), run in parallel and summed after */
	int nb = e->n[ROLE_BATCH] ? 1 : 0, parts = 1;
	if (dtype_bytes(e->mma->in) > 1)   /* one-byte K stays whole: see mm_form_of */
		TRY(parts = sketch_split_k(s, b, nb + 2, 64, SKETCH_SPLIT_K_TC_OUTPUTS, err), "split-K");
	if (parts > 1)
		nb++;                   /* the part: a batch iterator in front */
	const tir_block *blk = sched_block(s, TIR_RV(b), err);
	const tir_buffer *ops[2] = { e->a, e->bb };
	for (int o = 0; o < 2; o++) {
		const tir_expr *x = operand(blk, ops[o]);
		if (block_plain_access(blk, x->nidx, x->idx, NULL))
			continue;
		int ri;
		char *dims = operand_dims(blk, x, nb);
		TRY(ri = read_of(s, b, ops[o], err), "operand");
		int rc2 = tir_reindex(s, b, 0, ri, dims, err);
		free(dims);
		if (rc2 < 0)
			return -1;
	}
	/* the accumulator's tiles are row-major [batch][I][J] */
	if (!block_plain_access(blk, blk->store->ndim, blk->store_idx, NULL)) {
		tir_buf d = { 0 };
		for (int i = 0; i < nb + 2; i++)
			buf_printf(&d, "%s%d", i ? "," : "", i);
		char *dims = buf_take(&d);
		int rc2 = tir_reindex(s, b, 1, 0, dims, err);
		free(dims);
		if (rc2 < 0)
			return -1;
	}
	/* iterators: [part] [batch] I J K, I J K each padded to a multiple of
	 * a sampled number of whole tiles: a few more rows can buy an extent
	 * with factors to tile by (196 = 4 x 49 rows, 208 = 13 x 16, 256) */
	tir_int fac[5];
	int n = 0;
	while (n < nb)
		fac[n++] = TIR_LIT(1);
	for (int r = 0; r < 3; r++, n++) {
		int64_t ext = blk->iters[n].extent, c[PAD_CHOICES];
		int nc = 0;
		for (int64_t m = tile[r]; nc < PAD_CHOICES; m *= 2)
			if (nc == 0 || (ext + m - 1) / m * m * 3 <= ext * 4)
				c[nc++] = m;
			else
				break;
		int rv;
		TRY(rv = tir_sample_categorical(s, nc, c, NULL, err), "padding");
		fac[n] = TIR_RV(rv);
	}
	TRY(tir_pad_einsum(s, b, n, fac, err), "pad_einsum");
	return 0;
}

bool sketch_product_form(const tir_block *b, tir_dtype in, tir_dtype acc)
{
	einsum_form e;
	return einsum_of(b, &e) && e.a->dtype == in && e.b->store->dtype == acc;
}

int sketch_mm_normalize(tir_sched *s, const tir_block *b, const int tile[3], sketch_mm *out,
			tir_error *err)
{
	einsum_form e;
	mm_form f;
	if (!einsum_of(b, &e))
		return tir_fail(err, "block \"%s\" is not of product form", b->name);
	TRY(normalize(s, &e, tile, err), "normalize");
	if (!mm_form_tiled(e.b, &f, tile, false))
		return tir_fail(err, "block \"%s\" is not of matrix-multiply form after "
				"normalization", e.b->name);
	out->b = f.b;
	out->a = f.a;
	out->bb = f.bb;
	out->i = f.i;
	out->j = f.j;
	out->k = f.k;
	return 0;
}

/* ---- decisions ------------------------------------------------------------------ */

typedef struct tc_tiles {
	int64_t i[3], j[3], k[2];    /* of the extents / 16 */
} tc_tiles;

static int64_t tiles_penalty(const tc_tiles *x, int64_t ebytes, int64_t out_bytes,
			     int64_t grid, int sms)
{
	/* 16 one-byte columns are 16 bytes: a second staged step along K would
	 * start a tile off WMMA's 32-byte alignment */
	if (ebytes == 1 && x->k[1] > 1)
		return 1000000;
	int64_t warps = x->i[1] * x->j[1], frags = x->i[2] * x->j[2];
	int64_t staged = (x->i[1] * x->i[2] + x->j[1] * x->j[2]) * 16 * x->k[1] * 16 * ebytes;
	int64_t pen = 0;
	if (warps > MAX_WARPS)
		pen += 1000 * warps;
	if (warps < 2)
		pen += 10;
	if (frags > MAX_FRAGS)
		pen += 100 * frags;
	/* a warp's fragments: each a fragment of A serves j2 products, each of
	 * B i2; fewer than 4 leaves the tensor cores waiting on shared memory */
	if (frags < 2)
		pen += 5;
	else if (frags < 4)
		pen += 2;
	/* a block tile under 64 x 64 re-reads its operands from L2 once per
	 * 16 rows or columns; only worth it when bigger tiles would leave SMs
	 * idle (grid: the blocks of this tiling, parts and batch included) */
	int64_t tile_frags = x->i[1] * x->i[2] * x->j[1] * x->j[2];
	if (tile_frags < 16 && grid * tile_frags / 16 >= sms)
		pen += 2;
	if (x->k[1] > MAX_KTILE)
		pen += 100 * x->k[1];
	if (staged > MAX_STAGED)
		pen += staged / 1024;
	/* the output tile staged in shared memory, next to the operands */
	int64_t out = (x->i[1] * x->i[2]) * (x->j[1] * x->j[2]) * 256 * out_bytes;
	if (staged + out > MAX_SHARED)
		pen += (staged + out) / 1024;
	return pen;
}

/* The warpgroup tiling (gpu-wgmma), in tiles of 64 rows (i) and wn columns
 * (j): i[1] x j[1] warpgroups a block, each i[2] x j[2] MMAs of 64 x wn. */
static int64_t wg_penalty(const tc_tiles *x, int64_t wn, int64_t out_bytes, int64_t grid,
			  int sms, int64_t max_shared)
{
	int64_t wgs = x->i[1] * x->j[1], regs = x->i[2] * x->j[2] * wn / 2;
	int64_t rows = x->i[1] * x->i[2] * 64, cols = x->j[1] * x->j[2] * wn;
	int64_t staged = (rows + cols) * 64 * 2, out = rows * cols * out_bytes, pen = 0;
	if (wgs > WG_MAX)
		pen += 1000 * wgs;
	if (wgs < 2)
		pen += 3;
	if (regs > WG_MAX_ACC)            /* accumulators per thread */
		pen += 1000 + regs;
	/* and what __launch_bounds__ leaves a thread (verify/tensor.c) */
	int64_t cap = 65536 / (wgs * 128) < 255 ? 65536 / (wgs * 128) : 255;
	if (regs + 32 > cap)
		pen += 1000 + regs;
	if (regs < 64)
		pen += 2;
	if (staged > WG_MAX_STAGED)
		pen += staged / 1024;
	if (staged + out > max_shared)
		pen += (staged + out) / 1024;
	if (grid < sms)
		pen += 2;
	return pen;
}

/* What a tiling is drawn for: the intrinsic's tile (rows, columns, K
 * steps; wk 0: K is not tiled by the draw) and what the penalties need. */
typedef struct tc_draw {
	int64_t wm, wn, wk;
	int64_t ebytes, out_bytes, max_shared;
	int sms;
	bool wg;
} tc_draw;

/* f[1] and f[2] divisors of e of at most `cap` each (uniform among those
 * that fit), f[0] the rest: the warpgroup tiling's inner levels are small
 * (a few warpgroups, a few MMAs each), where spreading e's prime factors
 * over the levels (sketch_draw_factors) seldom lands for large e. */
static void draw_inner(tir_sched *s, int64_t e, int64_t cap, int64_t *f)
{
	int64_t rest = e;
	for (int lv = 1; lv <= 2; lv++) {
		int64_t c[64];
		int n = 0;
		for (int64_t d = 1; d <= cap && n < 64; d++)
			if (rest % d == 0)
				c[n++] = d;
		f[lv] = c[sched_rand(s) % (uint64_t)n];
		rest /= f[lv];
	}
	f[0] = rest;
}

/* Draws the tiling of f with the least penalty out of DRAWS (the first
 * without any stops), all from the schedule's generator. */
static void draw_tiles(tir_sched *s, const mm_form *f, const tc_draw *d, tc_tiles *best)
{
	const tir_block *b = f->b;
	int64_t ei = b->iters[f->i].extent / d->wm, ej = b->iters[f->j].extent / d->wn;
	int64_t ek = d->wk ? b->iters[f->k].extent / d->wk : 1;
	int64_t outer = 1;          /* parts and batch: blocks of their own */
	for (int i = 0; i < b->niters; i++)
		if (i != f->i && i != f->j && b->iters[i].kind == ITER_SPATIAL)
			outer *= b->iters[i].extent;
	int64_t bp = -1;
	for (int k = 0; k < DRAWS && bp != 0; k++) {
		tc_tiles x;
		if (d->wg) {
			draw_inner(s, ei, WG_MAX, x.i);
			draw_inner(s, ej, WG_MAX, x.j);
		} else {
			sketch_draw_factors(s, ei, 3, x.i);
			sketch_draw_factors(s, ej, 3, x.j);
		}
		if (d->wk)
			sketch_draw_factors(s, ek, 2, x.k);
		else
			x.k[0] = x.k[1] = 1;
		int64_t grid = outer * x.i[0] * x.j[0];
		int64_t pen = d->wg ? wg_penalty(&x, d->wn, d->out_bytes, grid, d->sms, d->max_shared)
				    : tiles_penalty(&x, d->ebytes, d->out_bytes, grid, d->sms);
		if (bp < 0 || pen < bp) {
			bp = pen;
			*best = x;
		}
	}
}

/* ---- the schedule --------------------------------------------------------------- */

static int read_of(tir_sched *s, int block, const tir_buffer *buf, tir_error *err)
{
	const tir_block *b = sched_block(s, TIR_RV(block), err);
	if (!b)
		return -1;
	for (int i = 0; i < b->nreads; i++)
		if (b->reads[i].buf == buf)
			return i;
	return tir_fail(err, "block \"%s\" does not read \"%s\"", b->name, buf->name);
}

static int tile_2d(tir_sched *s, int block, int at, const char *intrin, int64_t rows,
		   int64_t cols, tir_error *err);

/* Inlines into block the spatial blocks that compute what it reads (the
 * reindex, padding and pad stages of an operand), transitively. */
static int inline_into(tir_sched *s, int block, tir_error *err)
{
	for (;;) {
		const tir_block *b = sched_block(s, TIR_RV(block), err);
		const tir_program *p = s->p;
		const tir_block *prod = NULL;
		for (int r = 0; r < b->nreads && !prod; r++)
			for (int i = 0; i < p->nblocks && !prod; i++)
				if (p->blocks[i]->stmt && p->blocks[i] != b &&
				    p->blocks[i]->store == b->reads[r].buf &&
				    !block_is_reduction(p->blocks[i]))
					prod = p->blocks[i];
		if (!prod)
			return 0;
		int pb;
		TRY(pb = tir_get_block(s, prod->name, err), "get stage");
		TRY(tir_compute_inline(s, pb, err), "compute_inline");
	}
}

/* The cooperative fetch of shared stage sh at k0: its loops fused and split
 * over threadIdx.y (groups) x threadIdx.x (lanes) x a sampled vector of up
 * to 16 bytes. */
static int coop_fetch(tir_sched *s, int sh, int k0, int64_t groups, int64_t lanes,
		      tir_error *err)
{
	const tir_buffer *shbuf = sched_block(s, TIR_RV(sh), err)->store;
	int ebytes = dtype_bytes(shbuf->dtype);
	int64_t vc[4] = { 1, 2, 4, 8 };
	int nv = 0, vrv, f, o[4], l[TIR_MAX_IO], n;
	while (nv < 4 && vc[nv] * ebytes <= 16)
		nv++;
	TRY(vrv = tir_sample_categorical(s, nv, vc, NULL, err), "vector width");
	TRY(n = sketch_loops_under(s, sh, k0, l, err), "fetch loops");
	TRY(f = tir_fuse(s, n, l, err), "fuse fetch");
	tir_int fac[4] = { TIR_LIT(0), TIR_LIT(groups), TIR_LIT(lanes), TIR_RV(vrv) };
	TRY(tir_split(s, f, 4, fac, o, err), "split fetch");
	TRY(tir_bind(s, o[1], "threadIdx.y", err), "bind fetch y");
	TRY(tir_bind(s, o[2], "threadIdx.x", err), "bind fetch x");
	TRY(tir_vectorize(s, o[3], err), "vectorize fetch");
	return 0;
}

/* The stage of operand `buf`: shared memory at k0 with a cooperative fetch,
 * then fragments at k1 in 16-row tiles, tensorized. */
static int stage(tir_sched *s, int block, const tir_buffer *buf, const char *frag_scope,
		 const char *load, int k0, int k1, int64_t warps, tir_error *err)
{
	int ri, sh, fr;
	TRY(ri = read_of(s, block, buf, err), "stage");
	TRY(sh = tir_cache_read(s, block, ri, "shared", err), "cache_read shared");
	TRY(inline_into(s, sh, err), "inline the operand's stages");
	const tir_buffer *shbuf = sched_block(s, TIR_RV(sh), err)->store;
	TRY(ri = read_of(s, block, shbuf, err), "stage");
	TRY(fr = tir_cache_read(s, block, ri, frag_scope, err), "cache_read fragment");
	TRY(tir_compute_at(s, fr, k1, err), "fragments at K1");
	TRY(tir_compute_at(s, sh, k0, err), "shared at K0");

	TRY(coop_fetch(s, sh, k0, warps, 32, err), "fetch");
	int ebytes = dtype_bytes(shbuf->dtype);
	/* padding of each row by 0 or 16 bytes: rows start in other banks */
	int64_t pad[2] = { 0, 16 / ebytes }, p;
	int prv;
	TRY(prv = tir_sample_categorical(s, 2, pad, NULL, err), "padding");
	p = tir_sched_int(s, prv);
	if (p > 0 && shbuf->ndim >= 2)
		TRY(tir_storage_align(s, sh, 0, shbuf->ndim - 2, 128 / ebytes, (int)p, err),
		    "storage_align");

	/* fragments: 16 x 16 tiles, each tensorized */
	TRY(tile_2d(s, fr, k1, load, 16, 16, err), "fragment load");
	return 0;
}

/* The stage of operand `buf` for the warpgroup MMA: shared memory at k0,
 * read by the MMA itself; returns its block's RV (the caller picks the
 * fetch).  No storage_align: codegen lays the buffer out in swizzled
 * 128-byte atoms, which needs dense rows and keeps the banks apart itself. */
static int stage_wg(tir_sched *s, int block, const tir_buffer *buf, int k0, tir_error *err)
{
	int ri, sh;
	TRY(ri = read_of(s, block, buf, err), "stage");
	TRY(sh = tir_cache_read(s, block, ri, "shared", err), "cache_read shared");
	TRY(inline_into(s, sh, err), "inline the operand's stages");
	TRY(tir_compute_at(s, sh, k0, err), "shared at K0");
	return sh;
}

/* Whether every copy stage at loop k0 can be fetched by the tensor memory
 * accelerator (lower_tma_stage: boxes of what the kernel takes; an im2col
 * gather or a padded read is not one). */
static bool tma_fetchable(tir_sched *s, const tir_target *t, int k0)
{
	tir_lowered L;
	if (t->sm < 90 || lower_program(s->p, t, &L, NULL))
		return false;
	const tir_stmt *l = s->rv[k0].loop;
	int n = 0;
	bool ok = true;
	for (int k = 0; k < l->nkids && ok; k++) {
		lower_tma_copy x;
		if (!lower_copy_stage(&L, l, l->kids[k]))
			continue;
		ok = lower_tma_stage(&L, l, l->kids[k], &x, NULL) == 0;
		n++;
	}
	lower_free(&L);
	return ok && n > 0;
}

/* The tensorized rows x cols tiles of a 2-D nest: the last two loops split
 * by rows and cols, reordered (r0 c0 r1 c1), r1 tensorized with `intrin`. */
static int tile_2d(tir_sched *s, int block, int at, const char *intrin, int64_t rows,
		   int64_t cols, tir_error *err)
{
	int l[TIR_MAX_IO], n, r[2], c[2];
	TRY(n = sketch_loops_under(s, block, at, l, err), "loops");
	if (n < 2)
		return tir_fail(err, "%s: %d loops under the warp", intrin, n);
	/* the loops over fragments are unrolled: a fragment array indexed at
	 * run time would live in local memory */
	for (int i = 0; i < n - 2; i++)
		if (s->rv[l[i]].loop->loop_kind == LOOP_SERIAL)
			TRY(tir_unroll(s, l[i], err), "unroll the fragment loops");
	if (s->rv[l[n - 2]].loop->extent == rows && s->rv[l[n - 1]].loop->extent == cols) {
		TRY(tir_tensorize(s, l[n - 2], intrin, err), "tensorize");
		return 0;
	}
	tir_int fr[2] = { TIR_LIT(0), TIR_LIT(rows) }, fc[2] = { TIR_LIT(0), TIR_LIT(cols) };
	TRY(tir_split(s, l[n - 2], 2, fr, r, err), "split rows");
	TRY(tir_split(s, l[n - 1], 2, fc, c, err), "split columns");
	int ord[4] = { r[0], c[0], r[1], c[1] };
	TRY(tir_reorder(s, 4, ord, err), "reorder tiles");
	TRY(tir_unroll(s, r[0], err), "unroll the fragment rows");
	TRY(tir_unroll(s, c[0], err), "unroll the fragment columns");
	TRY(tir_tensorize(s, r[1], intrin, err), "tensorize");
	return 0;
}

/* The intrinsic of a kind, unit, operand and accumulator dtypes and width
 * n (for a warp: 16), or NULL. */
static const char *intrin_name(tir_intrin_kind kind, tir_dtype in, tir_dtype acc,
			       tir_intrin_unit unit, int n)
{
	for (int i = 0; i < tir_nintrins; i++)
		if (tir_intrins[i].kind == kind && tir_intrins[i].acc == acc &&
		    tir_intrins[i].unit == unit && tir_intrins[i].n == n &&
		    (kind == INTRIN_FILL || kind == INTRIN_STORE || tir_intrins[i].in == in))
			return tir_intrins[i].name;
	return NULL;
}

/* Whether the producer of every intermediate block `name` reads is one of
 * names[0..n) (never the tensorized write-back). */
static bool producer_among(const tir_program *p, const char *name, const char *const *names,
			   int n)
{
	const tir_block *c = program_find_block(p, name);
	bool found = false;
	for (int r = 0; c && r < c->nreads; r++) {
		if (c->reads[r].buf->role != BUF_TEMP)
			continue;
		for (int i = 0; i < p->nblocks; i++) {
			const tir_block *w = p->blocks[i];
			if (!w->stmt || w->store != c->reads[r].buf)
				continue;
			bool in = false;
			for (int k = 0; k < n; k++)
				in = in || (names[k] && !strcmp(names[k], w->name));
			if (!in)
				return false;
			found = true;
		}
	}
	return found;
}

/* Both sketches: unit INTRIN_WARP (gpu-tensorcore, WMMA) or
 * INTRIN_WARPGROUP (gpu-wgmma), see the top of the file. */
static int apply_mma(tir_sched *s, const tir_target *t, tir_intrin_unit unit,
		     const tir_block *heavy, tir_error *err)
{
	mm_form f;
	einsum_form ef;
	const bool wg = unit == INTRIN_WARPGROUP;
	const char *name = wg ? "gpu-wgmma" : "gpu-tensorcore";
	if (!einsum_of(heavy, &ef))
		return tir_fail(err, "%s: block \"%s\" is not of product form", name, heavy->name);
	/* the block's own stages after it: what normalize and the caches make
	 * (blocks from first_new on) and its epilogues; other blocks after it
	 * (a graph's later nodes) are the rest's (rows.c) */
	const int first_new = s->p->nblocks;
	sketch_blocks own;
	sketch_find_blocks(s->p, heavy, &own);
	const tir_buffer *out = ef.b->store;
	int tile[3] = { ef.mma->m, ef.mma->n, ef.mma->k }, wn = 16;
	if (wg) {
		/* the width N of the warpgroup's MMA, at most twice J: a choice of
		 * the sketch (its splits and intrinsics are literals in the
		 * trace), not a decision a mutation could change alone */
		int64_t ej = 1, nc = 0, ns[3] = { 64, 128, 256 };
		for (int k = 0; k < ef.n[ROLE_J]; k++)
			ej *= ef.b->iters[ef.it[ROLE_J][k]].extent;
		while (nc < 3 && (nc == 0 || ns[nc] <= 2 * ej))
			nc++;
		wn = (int)ns[sched_rand(s) % (uint64_t)nc];
		tile[0] = 64;
		tile[1] = wn;
		tile[2] = 64;   /* K tiles of 64 two-byte elements: 128-byte rows */
	}
	TRY(normalize(s, &ef, tile, err), "normalize");
	if (!mm_form_of(ef.b, &f))
		return tir_fail(err, "%s: block \"%s\" is not of matrix-multiply form after "
				"normalization", name, ef.b->name);
	/* a matmul left as it was (no reindex, padding or split) stores its
	 * fragments straight into its output */
	bool direct = f.b->store == out;
	const tir_dtype in = f.mma->in, acc = f.mma->acc;
	const char *after[TIR_MAX_IO + 1];
	int nafter = 0;
	{
		/* the blocks in top-level nests after the product's: output
		 * stages and epilogues */
		const tir_stmt *top = f.b->stmt;
		while (top->parent->parent)
			top = top->parent;
		tir_block *bl[TIR_MAX_IO];
		for (int k = stmt_index(top) + 1; k < s->p->root->nkids; k++) {
			int nb = stmt_blocks(s->p->root->kids[k], bl, TIR_MAX_IO);
			for (int q = 0; q < nb && nafter < TIR_MAX_IO; q++) {
				bool mine = false;
				for (int i = first_new; i < s->p->nblocks && !mine; i++)
					mine = s->p->blocks[i] == bl[q];
				for (int i = 0; i < own.nconsumers && !mine; i++)
					mine = own.consumer[i] == bl[q];
				if (mine)
					after[nafter++] = bl[q]->name;
			}
		}
	}
	int b, l[TIR_MAX_IO], n;
	TRY(b = tir_get_block(s, f.b->name, err), "get block");
	TRY(n = tir_get_loops(s, b, l, TIR_MAX_IO, err), "loops");
	/* the loop of each iterator: the fresh nest binds them one to one */
	int li = -1, lj = -1, lk = -1, lb[TIR_MAX_IO], nb = 0;
	for (int x = 0; x < n; x++) {
		const tir_var *v = s->rv[l[x]].loop->var;
		int it = -1;
		for (int k = 0; k < f.b->niters; k++)
			if (expr_uses_var(f.b->iters[k].binding, v))
				it = k;
		if (it == f.i) li = l[x];
		else if (it == f.j) lj = l[x];
		else if (it == f.k) lk = l[x];
		else lb[nb++] = l[x];
	}
	if (li < 0 || lj < 0 || lk < 0)
		return tir_fail(err, "%s: the I, J and K loops of \"%s\" not found", name, f.b->name);
	tc_tiles x;
	int sms = t->sm_count > 0 ? t->sm_count : 132;
	int si[2], sj[2], sk[2], I[3], J[3], K[2];
	tc_draw dr = { wg ? 64 : 16, wg ? wn : 16, wg ? 0 : 16, dtype_bytes(f.a->dtype),
		       direct ? 0 : dtype_bytes(acc),
		       t->max_shared_per_block > 0 ? t->max_shared_per_block - 1024 : 227 * 1024,
		       sms, wg };
	draw_tiles(s, &f, &dr, &x);
	if (wg) {
		/* I by 64, J by N, K by 64 and that by 16: K[0] the staged
		 * tiles, K[1] their four steps */
		tir_int fi[2] = { TIR_LIT(0), TIR_LIT(64) }, fj[2] = { TIR_LIT(0), TIR_LIT(wn) },
			f16[2] = { TIR_LIT(0), TIR_LIT(16) };
		int k64[2];
		TRY(tir_split(s, li, 2, fi, si, err), "split I");
		TRY(tir_split(s, lj, 2, fj, sj, err), "split J");
		TRY(tir_split(s, lk, 2, fi, k64, err), "split K");
		TRY(tir_split(s, k64[1], 2, f16, sk, err), "split K by 16");
		K[0] = k64[0];
		K[1] = sk[0];
	} else {
		tir_int f16[2] = { TIR_LIT(0), TIR_LIT(16) };
		TRY(tir_split(s, li, 2, f16, si, err), "split I");
		TRY(tir_split(s, lj, 2, f16, sj, err), "split J");
		TRY(tir_split(s, lk, 2, f16, sk, err), "split K");
	}
	TRY(sketch_tile_decided(s, si[0], 3, 0, x.i, I, err), "tile I");
	TRY(sketch_tile_decided(s, sj[0], 3, 0, x.j, J, err), "tile J");
	if (!wg)
		TRY(sketch_tile_decided(s, sk[0], 2, 0, x.k, K, err), "tile K");
	int ord[TIR_MAX_IO], k = 0;
	for (int q = 0; q < nb; q++)
		ord[k++] = lb[q];
	int rest[] = { I[0], J[0], I[1], J[1], K[0], K[1], I[2], J[2], si[1], sj[1], sk[1] };
	for (size_t q = 0; q < sizeof rest / sizeof *rest; q++)
		ord[k++] = rest[q];
	TRY(tir_reorder(s, k, ord, err), "reorder");
	int outer[TIR_MAX_IO], no = 0;
	for (int q = 0; q < nb; q++)
		outer[no++] = lb[q];
	outer[no++] = I[0];
	outer[no++] = J[0];
	int bx, ty;
	TRY(bx = tir_fuse(s, no, outer, err), "fuse blocks");
	int wl[2] = { I[1], J[1] };
	TRY(ty = tir_fuse(s, 2, wl, err), "fuse warps");
	TRY(tir_bind(s, bx, "blockIdx.x", err), "bind blockIdx.x");
	TRY(tir_bind(s, ty, "threadIdx.y", err), "bind threadIdx.y");
	/* threadIdx.y: warps (WMMA) or warpgroups (wgmma) of lanes threads */
	int64_t warps = x.i[1] * x.j[1], lanes = wg ? 128 : 32;
	const int tm = wg ? 64 : 16;

	/* the accumulator in fragments, written back per warp */
	int wb, init, cs = -1;
	if (!direct)    /* through shared memory, see the top of the file */
		TRY(cs = tir_cache_write(s, b, 0, "shared", err), "cache_write shared");
	TRY(wb = tir_cache_write(s, b, 0, wg ? "wgmma.accumulator" : "wmma.accumulator", err),
	    "cache_write");
	TRY(tir_reverse_compute_at(s, wb, ty, err), "write-back at the warp");
	TRY(tile_2d(s, wb, ty, intrin_name(INTRIN_STORE, in, acc, unit, wn), tm, wn, err), "store");
	if (cs >= 0) {
		/* the block's tile, copied out by all its threads along the rows */
		int cl[TIR_MAX_IO], nc, fu, o[3];
		TRY(tir_reverse_compute_at(s, cs, bx, err), "output tile at the block");
		TRY(nc = sketch_loops_under(s, cs, bx, cl, err), "output loops");
		TRY(fu = tir_fuse(s, nc, cl, err), "fuse output");
		tir_int fo[3] = { TIR_LIT(0), TIR_LIT(warps), TIR_LIT(lanes) };
		TRY(tir_split(s, fu, 3, fo, o, err), "split output");
		TRY(tir_bind(s, o[1], "threadIdx.y", err), "bind output warps");
		TRY(tir_bind(s, o[2], "threadIdx.x", err), "bind output lanes");
		const tir_block *cb = sched_block(s, TIR_RV(cs), err);
		memmove(after + 1, after, sizeof(*after) * (size_t)nafter);
		after[0] = cb->name;
		nafter++;
	}
	TRY(init = tir_decompose_reduction(s, b, K[0], err), "decompose_reduction");
	TRY(tile_2d(s, init, ty, intrin_name(INTRIN_FILL, in, acc, unit, wn), tm, wn, err), "fill");
	if (wg) {
		int sa, sb;
		TRY(sa = stage_wg(s, b, f.a, K[0], err), "stage a");
		TRY(sb = stage_wg(s, b, f.bb, K[0], err), "stage b");
		/* the fetch: where both stages are boxes of what the kernel takes,
		 * the tensor memory accelerator from a producer warpgroup (3 in
		 * 4: on the H200 it took a 4096^3 float16 matmul from 0.63x to
		 * 0.96x cuBLAS, bench/results/2026-11-30-h200-wgmma-ws-probe.txt),
		 * else a cooperative cp.async fetch by all threads.  A choice of
		 * the sketch like the width: the fetch's loops differ */
		if (tma_fetchable(s, t, K[0]) && sched_rand(s) % 4 != 0) {
			TRY(tir_annotate(s, K[0], "tma", 1, err), "annotate tma");
		} else {
			TRY(coop_fetch(s, sa, K[0], warps, 128, err), "fetch a");
			TRY(coop_fetch(s, sb, K[0], warps, 128, err), "fetch b");
		}
	} else {
		TRY(stage(s, b, f.a, "wmma.matrix_a", intrin_name(INTRIN_LOAD_A, in, acc, unit, 16),
			  K[0], K[1], warps, err), "stage a");
		TRY(stage(s, b, f.bb, "wmma.matrix_b", intrin_name(INTRIN_LOAD_B, in, acc, unit, 16),
			  K[0], K[1], warps, err), "stage b");
	}
	/* (wgmma's product tensorized first: its pipelined loop keeps one ring
	 * copy more, which the pipeline's choice of stages counts) */
	if (wg)
		TRY(tir_tensorize(s, si[1], intrin_name(INTRIN_MMA, in, acc, unit, wn), err),
		    "tensorize mma");
	TRY(sketch_pipeline(s, t, 1, &K[0], err), "software pipeline");
	/* the steps of a staged tile unrolled: the next step's fragment loads
	 * can overlap this step's products (K1 <= MAX_KTILE copies) */
	TRY(tir_unroll(s, K[1], err), "unroll the staged steps");
	TRY(tir_unroll(s, I[2], err), "unroll the fragments' rows");
	TRY(tir_unroll(s, J[2], err), "unroll the fragments' columns");
	if (!wg)
		TRY(tir_tensorize(s, si[1], f.mma->name, err), "tensorize mma");
	/* the output stages and epilogues: merged where they can be (a crop
	 * into the write-back, an epilogue into what it reads), then one
	 * kernel each */
	for (int c = cs >= 0 ? 1 : 0; c < nafter; c++) {
		tir_error ignored;
		int cb;
		TRY(cb = tir_get_block(s, after[c], err), "get consumer");
		if (tir_compute_inline(s, cb, &ignored) == 0)
			after[c] = NULL;
	}
	for (int c = 1; c < nafter; c++) {
		tir_error ignored;
		int cb;
		if (!after[c] || !producer_among(s->p, after[c], after, c))
			continue;
		TRY(cb = tir_get_block(s, after[c], err), "get consumer");
		if (tir_reverse_compute_inline(s, cb, &ignored) == 0)
			after[c] = NULL;
	}
	/* a warpgroup's accumulators stored straight to the output go through
	 * the epilogue there, in registers (ir/intrin.c, match_epilogue): the
	 * consumer left of the product inlined into the write-back — in 3
	 * draws of 4, so that measurement also sees the epilogue as a kernel
	 * of its own (more registers live at the store, fewer bytes moved) */
	bool epilogue = wg && direct && sched_rand(s) % 4 != 0;
	for (int c = 0; epilogue && c < nafter; c++) {
		tir_error ignored;
		int cb;
		if (!after[c])
			continue;
		TRY(cb = tir_get_block(s, after[c], err), "get consumer");
		if (tir_reverse_compute_inline(s, cb, &ignored) == 0) {
			after[c] = NULL;
			break;
		}
	}
	for (int c = cs >= 0 ? 1 : 0; c < nafter; c++)
		if (after[c])
			TRY(sketch_kernelize(s, after[c], err), "kernel of its own");
	int unroll;
	TRY(unroll = tir_sample_categorical(s, SKETCH_GPU_NUNROLL, sketch_gpu_unroll_steps, NULL,
					    err), "unroll");
	TRY(sketch_annotate_rv(s, bx, "auto_unroll_max_step", unroll, err), "annotate unroll");
	return 0;
}

static int wmma_block(tir_sched *s, const tir_target *t, const tir_block *b, tir_error *err)
{
	return apply_mma(s, t, INTRIN_WARP, b, err);
}

static int wgmma_block(tir_sched *s, const tir_target *t, const tir_block *b, tir_error *err)
{
	return apply_mma(s, t, INTRIN_WARPGROUP, b, err);
}

int sketch_tensorcore_apply(tir_sched *s, const tir_target *t, tir_error *err)
{
	return sketch_gpu_heavy(s, t, wmma_block, wmma_fits, err);
}

int sketch_wgmma_apply(tir_sched *s, const tir_target *t, tir_error *err)
{
	return sketch_gpu_heavy(s, t, wgmma_block, wgmma_fits, err);
}
