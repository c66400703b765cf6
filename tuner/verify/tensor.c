/*
 * tensor.c — validation of tensorized loops (messages start "tensorize: ").
 *
 * A tensorized loop (tensorize, sched/tensorize.c) stands for a warp- or
 * warpgroup-level intrinsic, or a CPU one (AArch64's sdot, smmla).  The
 * program must still mean what the intrinsic computes and the intrinsic
 * must be callable where it stands:
 *   - every tensorized loop matches its intrinsic again (ir/intrin.c), so a
 *     later primitive cannot leave a stale one;
 *   - a CPU intrinsic on a CPU target whose key has its feature
 *     (intrin_check_target: "sdot_4x4x4_i8_i32 needs +dotprod; target
 *     cpu:aarch64+neon has not"), not under a vectorized loop; nothing
 *     below applies to it (its operands are memory of any layout);
 *   - the others on CUDA targets only, with the compute capability WMMA
 *     needs (wgmma: exactly 9.0, its sm_90a instructions run nowhere else);
 *   - warp scope: the kernel launches exactly one warp along threadIdx.x and
 *     no threadIdx.x loop encloses the tensorized loop, so the 32 lanes of
 *     each warp reach the call together with the same operands (threadIdx.y
 *     and .z loops, guarded or not, are uniform over a warp); a warpgroup
 *     intrinsic the same with one warpgroup (128 threads) along threadIdx.x;
 *   - wgmma's shared operands: laid out by codegen in 128-byte swizzled
 *     atoms (cuda.c), which needs rows of a multiple of 128 bytes, no
 *     storage_align padding, rows in groups of 8, and each tile starting
 *     at a row that is a multiple of 8 and, along the contiguous dimension,
 *     32 bytes in (K-major) or on a 128-byte atom (MN-major);
 *   - fragments: a fragment buffer is touched only by tensorized blocks, its
 *     compacted tile dimensions are whole tiles, and every product reads an
 *     operand fragment with one orientation (its layout);
 *   - memory operands: the leading dimension is a multiple of 16 bytes and
 *     the tile's first element provably 32-byte aligned (WMMA's contract).
 */
#include <string.h>
#include "verify.h"
#include "../codegen/codegen.h"

#define MAX_TZ 64
#define WG_REG_SPARE 32

typedef struct tz {
	vfy_ctx *c;
	tir_stmt *loop[MAX_TZ];
	int n;
	bool bad_value;             /* a "tensorize" annotation naming nothing */
	const tir_stmt *bad;
} tz;

static void find_tensorized(tz *z, tir_stmt *s)
{
	if (s->kind == STMT_FOR) {
		for (int i = 0; i < s->nann; i++)
			if (s->ann[i].key && !strcmp(s->ann[i].key, TIR_TENSORIZE_ANN) &&
			    !intrin_of_loop(s) && !z->bad) {
				z->bad_value = true;
				z->bad = s;
			}
		if (intrin_of_loop(s) && z->n < MAX_TZ)
			z->loop[z->n++] = s;
	}
	for (int i = 0; i < s->nkids; i++)
		find_tensorized(z, s->kids[i]);
}

static bool accesses_buf(const tir_expr *e, const tir_buffer *buf)
{
	if (!e)
		return false;
	if (e->kind == E_LOAD && e->buf == buf)
		return true;
	for (int i = 0; i < e->nidx; i++)
		if (accesses_buf(e->idx[i], buf))
			return true;
	return accesses_buf(e->a, buf) || accesses_buf(e->b, buf) || accesses_buf(e->c, buf);
}

static bool block_touches(const tir_block *b, const tir_buffer *buf)
{
	return b->store == buf || accesses_buf(b->value, buf) || accesses_buf(b->init, buf);
}

/* The threads a block of kernel k launches: ext[] gets the largest extent
 * bound to each of threadIdx.x, .y, .z (0: none). */
static int64_t launch_threads(const tir_stmt *s, int64_t ext[3])
{
	if (s->kind == STMT_FOR && s->loop_kind == LOOP_THREAD &&
	    (s->tag == TIR_THREAD_X || s->tag == TIR_THREAD_Y || s->tag == TIR_THREAD_Z)) {
		int d = s->tag - TIR_THREAD_X;
		if (s->extent > ext[d])
			ext[d] = s->extent;
	}
	const tir_intrin *in = s->kind == STMT_FOR ? intrin_of_loop(s) : NULL;
	if (in && intrin_lanes(in) > ext[0])
		ext[0] = intrin_lanes(in);
	for (int i = 0; i < s->nkids; i++)
		launch_threads(s->kids[i], ext);
	return (ext[0] > 0 ? ext[0] : 1) * (ext[1] > 0 ? ext[1] : 1) * (ext[2] > 0 ? ext[2] : 1);
}

/* Whether e is provably a multiple of q for every value of its variables
 * (an opaque term is an integer: its coefficient decides). */
static bool multiple_of(const tir_expr *e, int64_t q)
{
	tir_affine f;
	if (!affine_of(e, &f) || f.c0 % q)
		return false;
	for (int i = 0; i < f.nterms; i++)
		if (f.coef[i] % q)
			return false;
	return true;
}

/* The memory operand of a LOAD or STORE: leading dimension and alignment. */
static int check_memory(vfy_ctx *c, tir_lowered *L, const tir_intrin_match *m,
			const tir_intrin_access *x, tir_error *err)
{
	const tir_alloc *a = &L->alloc[x->buf->id];
	int last = x->buf->ndim - 1;
	int contiguous = x->col == last ? x->col : x->row;
	int lead = contiguous == x->col ? x->row : x->col;
	int64_t bytes = dtype_bytes(x->buf->dtype);
	if (a->stride[contiguous] != 1)
		return tir_fail(err, "tensorize: %s of loop %s: buffer \"%s\" is not contiguous "
				"along the tile (stride %lld)", m->in->name, m->loops[0]->var->name,
				x->buf->name, (long long)a->stride[contiguous]);
	if ((a->stride[lead] * bytes) % 16)
		return tir_fail(err, "tensorize: %s of loop %s: the leading dimension of \"%s\" "
				"is %lld bytes, not a multiple of 16", m->in->name,
				m->loops[0]->var->name, x->buf->name, (long long)(a->stride[lead] * bytes));
	tir_subst zero = { c->p->nvars, arena_alloc(&c->arena, sizeof(tir_expr *) *
						      (size_t)(c->p->nvars + 1)) };
	for (int i = 0; i < m->nloops; i++)
		zero.map[m->loops[i]->var->id] = mk_int(&c->arena, 0);
	for (int v = 0; v < c->p->nvars; v++)     /* loops of one iteration are 0 */
		if (c->loop_of[v] && c->loop_of[v]->extent == 1)
			zero.map[v] = mk_int(&c->arena, 0);
	tir_expr *idx[TIR_MAX_DIMS];
	for (int d = 0; d < x->buf->ndim; d++)
		idx[d] = expr_subst(&c->arena, x->idx[d], &zero);
	tir_expr *off = lower_simplify(L, lower_offset(L, x->buf, x->buf->ndim, idx));
	if (!multiple_of(off, 32 / bytes))
		return tir_fail(err, "tensorize: %s of loop %s: the tile of \"%s\" at %s cannot "
				"be shown to start 32-byte aligned", m->in->name, m->loops[0]->var->name,
				x->buf->name, vfy_expr_str(c, off));
	return 0;
}

/* A fragment operand: whole tiles in its compacted last two dimensions. */
static int check_fragment(tir_lowered *L, const tir_intrin_match *m,
			  const tir_intrin_access *x, int64_t rows, int64_t cols, tir_error *err)
{
	const tir_alloc *a = &L->alloc[x->buf->id];
	int64_t er = a->extent[x->row], ec = a->extent[x->col];
	if (er % rows || ec % cols)
		return tir_fail(err, "tensorize: fragment \"%s\" holds %lld x %lld elements per "
				"warp, not whole %lld x %lld tiles of %s", x->buf->name,
				(long long)er, (long long)ec, (long long)rows, (long long)cols,
				m->in->name);
	return 0;
}

/* A shared operand of a warpgroup MMA (see the top of the file): its
 * compacted allocation as rows x L (the last dimension), the tile's origin. */
static int check_swizzled(vfy_ctx *c, tir_lowered *L, const tir_intrin_match *m,
			  const tir_intrin_access *x, int kdim, tir_error *err)
{
	const tir_alloc *a = &L->alloc[x->buf->id];
	int n = x->buf->ndim, last = n - 1;
	int64_t bytes = dtype_bytes(x->buf->dtype), rows = 1;
	const char *what = NULL;
	for (int d = 0; d < last; d++)
		rows *= a->extent[d];
	if (!a->compact || n < 2)
		what = "is not a compacted shared tile of two or more dimensions";
	else if (a->stride[last] != 1 || a->stride[last - 1] != a->extent[last] ||
		 a->elems != rows * a->extent[last])
		what = "is padded (storage_align): the swizzled layout needs dense rows";
	else if ((a->extent[last] * bytes) % 128)
		what = "has rows that are not a multiple of 128 bytes";
	else if (rows % 8)
		what = "has a number of rows that is not a multiple of 8";
	if (what)
		return tir_fail(err, "tensorize: %s of loop %s: shared operand \"%s\" %s",
				m->in->name, m->loops[0]->var->name, x->buf->name, what);
	tir_subst zero = { c->p->nvars, arena_alloc(&c->arena, sizeof(tir_expr *) *
						      (size_t)(c->p->nvars + 1)) };
	for (int i = 0; i < m->nloops; i++)
		zero.map[m->loops[i]->var->id] = mk_int(&c->arena, 0);
	for (int v = 0; v < c->p->nvars; v++)
		if (c->loop_of[v] && c->loop_of[v]->extent == 1)
			zero.map[v] = mk_int(&c->arena, 0);
	/* the origin's position in rows x L: the row from every dimension but
	 * the last, the column from the last */
	tir_expr *idx[TIR_MAX_DIMS];
	for (int d = 0; d < n; d++)
		idx[d] = expr_subst(&c->arena, x->idx[d], &zero);
	/* the origin's row part (its column put at the allocation's first) and
	 * its column within the row */
	tir_expr *first = mk_int(&c->arena, a->lo[last]), *col0 = idx[last];
	if (a->base[last])
		first = mk_add(&c->arena, a->base[last], first);
	idx[last] = first;
	tir_expr *row_off = lower_simplify(L, lower_offset(L, x->buf, n, idx));
	tir_expr *col = lower_simplify(L, mk_sub(&c->arena, col0, first));
	int64_t col_q = kdim == last ? 32 / bytes : 128 / bytes;    /* K-major : MN-major */
	if (!multiple_of(row_off, 8 * a->extent[last]) || !multiple_of(col, col_q))
		return tir_fail(err, "tensorize: %s of loop %s: the tile of \"%s\" cannot be shown "
				"to start on a row that is a multiple of 8 (row offset %s) and a "
				"multiple of %lld bytes into its row (column %s)", m->in->name,
				m->loops[0]->var->name, x->buf->name, vfy_expr_str(c, row_off),
				(long long)(col_q * bytes), vfy_expr_str(c, col));
	return 0;
}

/* A CPU intrinsic (sdot, smmla): one thread calls it, so it may stand
 * under parallel loops but not inside a vectorized one, whose lanes would
 * each call it (codegen/c_neon.c emits it as a scalar call). */
static int check_cpu(const tir_stmt *l, const tir_intrin_match *m, tir_error *err)
{
	for (const tir_stmt *q = l->parent; q; q = q->parent)
		if (q->kind == STMT_FOR && q->loop_kind == LOOP_VECTORIZED)
			return tir_fail(err, "tensorize: loop %s (%s) is under vectorized loop %s",
					l->var->name, m->in->name, q->var->name);
	return 0;
}

static int check_one(vfy_ctx *c, tir_lowered *L, tir_stmt *l, signed char *orient,
		     bool *tensorized, tir_error *err)
{
	const tir_intrin *in = intrin_of_loop(l);
	tir_intrin_match m;
	if (intrin_match(&c->arena, c->p, l, in, &m, err))
		return -1;
	for (int i = 0; i < c->nblocks; i++)
		if (c->blocks[i] == m.b)
			tensorized[i] = true;
	if (in->unit == INTRIN_CPU)
		return check_cpu(l, &m, err);
	bool wg = in->unit == INTRIN_WARPGROUP;
	int need = wg ? 90 : in->in == TIR_I8 ? 72 : in->in == TIR_BF16 ? 80 : 70;
	if (c->t->sm > 0 && (c->t->sm < need || (wg && c->t->sm != 90)))
		return tir_fail(err, "tensorize: %s needs compute capability %s%d.%d, %s has %d.%d",
				in->name, wg ? "exactly " : "", need / 10, need % 10, c->t->key,
				c->t->sm / 10, c->t->sm % 10);
	tir_stmt *k = vfy_kernel_of(l);
	int64_t ext[3] = { 0, 0, 0 }, threads = launch_threads(k, ext);
	if (lower_find_tma(L, k))   /* the producer warpgroup */
		threads += threads / (ext[1] > 0 ? ext[1] : 1);
	int64_t lanes = ext[0], warp = c->t->warp_size > 0 ? c->t->warp_size : 32;
	if (wg)
		warp *= 4;
	if (lanes != warp)
		return tir_fail(err, "tensorize: the kernel of loop %s launches %lld threads along "
				"threadIdx.x; a %s-level intrinsic needs exactly one %s (%lld)",
				l->var->name, (long long)lanes, wg ? "warpgroup" : "warp",
				wg ? "warpgroup" : "warp", (long long)warp);
	for (const tir_stmt *q = l->parent; q; q = q->parent)
		if (q->kind == STMT_FOR && q->loop_kind == LOOP_THREAD && q->tag == TIR_THREAD_X)
			return tir_fail(err, "tensorize: loop %s is under threadIdx.x loop %s: the "
					"lanes of a warp would call %s with different operands",
					l->var->name, q->var->name, in->name);
	switch (in->kind) {
	case INTRIN_FILL:
		return check_fragment(L, &m, &m.dst, in->m, in->n, err) ? -1 : 0;
	case INTRIN_LOAD_A:
		return check_fragment(L, &m, &m.dst, in->m, in->k, err) ||
		       check_memory(c, L, &m, &m.src[0], err) ? -1 : 0;
	case INTRIN_LOAD_B:
		return check_fragment(L, &m, &m.dst, in->k, in->n, err) ||
		       check_memory(c, L, &m, &m.src[0], err) ? -1 : 0;
	case INTRIN_STORE:
		/* an epilogue's store is element by element (codegen/cuda_mma.c):
		 * no constraint on its memory's layout */
		return check_fragment(L, &m, &m.src[0], in->m, in->n, err) ||
		       (!m.epilogue && check_memory(c, L, &m, &m.dst, err)) ? -1 : 0;
	case INTRIN_MMA:
		break;
	}
	if (wg) {
		/* the accumulators stay in registers: with 64K a multiprocessor and
		 * __launch_bounds__(threads), a thread has 65536 / threads of them
		 * (at most 255), and the MMA's addresses and loop state want some
		 * (WG_REG_SPARE) beside the accumulators */
		int64_t acc = L->alloc[m.dst.buf->id].elems / 128, cap = 65536 / threads;
		if (cap > 255)
			cap = 255;
		if (acc + WG_REG_SPARE > cap)
			return tir_fail(err, "tensorize: %s of loop %s: %lld accumulator registers a "
					"thread, and a block of %lld threads has %lld registers a thread "
					"(%d are needed beside them)", in->name, l->var->name,
					(long long)acc, (long long)threads, (long long)cap, WG_REG_SPARE);
	}
	if (wg)
		return check_fragment(L, &m, &m.dst, in->m, in->n, err) ||
		       check_swizzled(c, L, &m, &m.src[0], m.src[0].col, err) ||
		       check_swizzled(c, L, &m, &m.src[1], m.src[1].row, err) ? -1 : 0;
	if (check_fragment(L, &m, &m.dst, in->m, in->n, err) ||
	    check_fragment(L, &m, &m.src[0], in->m, in->k, err) ||
	    check_fragment(L, &m, &m.src[1], in->k, in->n, err))
		return -1;
	for (int s = 0; s < 2; s++) {
		const tir_intrin_access *x = &m.src[s];
		signed char o = x->row > x->col ? 2 : 1;     /* 2: transposed */
		if (orient[x->buf->id] && orient[x->buf->id] != o)
			return tir_fail(err, "tensorize: fragment \"%s\" is read both transposed and "
					"not (one fragment has one layout)", x->buf->name);
		orient[x->buf->id] = o;
	}
	return 0;
}

int verify_tensor(vfy_ctx *c, tir_error *err)
{
	tz z = { c, { NULL }, 0, false, NULL };
	find_tensorized(&z, c->p->root);
	if (z.bad_value)
		return tir_fail(err, "tensorize: loop %s carries a \"%s\" annotation that names no "
				"intrinsic", z.bad->var->name, TIR_TENSORIZE_ANN);
	if (z.n == MAX_TZ)
		return tir_fail(err, "tensorize: more than %d tensorized loops", MAX_TZ - 1);
	for (int i = 0; i < z.n; i++)
		if (intrin_check_target(intrin_of_loop(z.loop[i]), c->t, "tensorize",
					z.loop[i]->var->name, err))
			return -1;
	bool *tensorized = arena_alloc(&c->arena, (size_t)c->nblocks + 1);
	signed char *orient = arena_alloc(&c->arena, (size_t)c->p->nbufs + 1);
	int rc = 0;
	if (z.n) {
		tir_lowered L;
		if (lower_program(c->p, c->t, &L, err))
			return -1;
		for (int i = 0; i < z.n && !rc; i++)
			rc = check_one(c, &L, z.loop[i], orient, tensorized, err);
		lower_free(&L);
	}
	for (int i = 0; i < c->nblocks && !rc; i++) {
		const tir_block *b = c->blocks[i];
		for (int j = 0; j < c->p->nbufs && !tensorized[i]; j++) {
			const tir_buffer *buf = c->p->bufs[j];
			if (!buf->dead && scope_is_fragment(buf->scope) && block_touches(b, buf))
				rc = tir_fail(err, "tensorize: block \"%s\" accesses fragment \"%s\" (%s) "
					      "outside a tensor intrinsic", b->name, buf->name,
					      scope_name(buf->scope));
		}
	}
	return rc;
}
