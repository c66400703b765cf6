/*
 * cuda_mma.c — the CUDA backend's tensor intrinsics: WMMA calls on
 * fragments, and warpgroup MMAs (wgmma).
 *
 * Tensor intrinsics (ir/intrins.def): WMMA calls per warp on fragments;
 * wgmma per warpgroup, its accumulator a float array per thread, its shared
 * operands stored in 128-byte swizzled atoms (every access through
 * tir_swz128, the buffers carved at 1 KB boundaries) and read through
 * matrix descriptors; a run of MMAs fenced before, committed and waited for
 * before anything else runs (cu_wg_flush), except that a pipelined loop
 * leaves one iteration's group in flight into the next (cu_pipelined_loop,
 * cuda_pipeline.c).
 *
 * cuda.c declares fragments through cu_fragment_array, prints a tensorized
 * loop through cu_intrin, and fences, flushes and drains runs of wgmma
 * around the statements it prints (cu_wg_mma_only, cu_wg_flush,
 * cu_wg_drain); cu_scan_fragment tells it beforehand what the program uses.
 */
#include "cuda.h"

/* Warpgroup MMAs (wgmma, sm_90a).  The shared operands live in 128-byte
 * swizzled atoms: a compacted buffer of R rows (every dimension but the
 * last) of L elements of S bytes, L * S a multiple of 128, is stored as
 * L * S / 128 atom columns of R rows x 128 bytes, the 16-byte chunks of
 * each row XOR-ed with the row's place in its 8-row group (1 KB), the
 * layout the descriptors' 128-byte swizzle mode reads.  tir_swz_pos is an
 * element's byte position before the swizzle (what a descriptor's start
 * address counts), tir_swz128 its element index after it.  Descriptors:
 * start >> 4, leading byte offset (MN-major: between atom columns, R * 128;
 * K-major: unused, 16), stride byte offset 1 KB (between 8-row groups),
 * swizzle mode 1 (128 B) in bits 62-63. */
static const char cuda_wgmma_prelude[] =
"TIR_DEV int tir_swz_pos(int e, int L, int R, int S)\n"
"{\n"
"    const int r = e / L, c = (e % L) * S;\n"
"    return (c >> 7) * (R << 7) + (r << 7) + (c & 127);\n"
"}\n"
"TIR_DEV int tir_swz128(int e, int L, int R, int S)\n"
"{\n"
"    const int b = tir_swz_pos(e, L, R, S);\n"
"    return (b ^ (((b >> 7) & 7) << 4)) / S;\n"
"}\n"
"TIR_DEV unsigned long long tir_wgmma_desc(const void *base, int pos, int lbo)\n"
"{\n"
"    const unsigned a = tir_smem_addr(base) + (unsigned)pos;\n"
"    return (unsigned long long)((a & 0x3FFFF) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |\n"
"           ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);\n"
"}\n"
"TIR_DEV void tir_wgmma_fence() { asm volatile(\"wgmma.fence.sync.aligned;\\n\" ::: \"memory\"); }\n"
"TIR_DEV void tir_wgmma_commit_wait()\n"
"{\n"
"    asm volatile(\"wgmma.commit_group.sync.aligned;\\n\" ::: \"memory\");\n"
"    asm volatile(\"wgmma.wait_group.sync.aligned 0;\\n\" ::: \"memory\");\n"
"}\n"
"/* the group just committed left in flight, the one before waited for */\n"
"TIR_DEV void tir_wgmma_commit_wait1()\n"
"{\n"
"    asm volatile(\"wgmma.commit_group.sync.aligned;\\n\" ::: \"memory\");\n"
"    asm volatile(\"wgmma.wait_group.sync.aligned 1;\\n\" ::: \"memory\");\n"
"}\n"
"TIR_DEV void tir_wgmma_wait()\n"
"{\n"
"    asm volatile(\"wgmma.wait_group.sync.aligned 0;\\n\" ::: \"memory\");\n"
"}\n"
"/* generic-proxy writes to shared memory made visible to wgmma's async proxy */\n"
"TIR_DEV void tir_fence_proxy_async() { asm volatile(\"fence.proxy.async.shared::cta;\\n\" ::: \"memory\"); }\n"
"\n";

/* ---- tensor intrinsics (ir/intrins.def): their implementation ---------------- */

/* The tile of fragment buffer `buf`, rows x columns in its last two
 * dimensions. */
static void frag_tile(const cu_gen *g, const tir_buffer *buf, int64_t *rows, int64_t *cols)
{
	const tir_intrin *in = g->frag_in[buf->id];
	*rows = buf->scope == TIR_SCOPE_FRAG_B ? in->k : in->m;
	*cols = buf->scope == TIR_SCOPE_FRAG_A ? in->k : in->n;
	if (g->frag_col[buf->id]) {
		int64_t t = *rows;
		*rows = *cols;
		*cols = t;
	}
}

/* Fragments in a compacted allocation: one per tile. */
static int64_t frag_count(const cu_gen *g, const tir_alloc *a)
{
	int64_t rows, cols, n = 1;
	frag_tile(g, a->buf, &rows, &cols);
	for (int d = 0; d < a->buf->ndim; d++)
		n *= a->extent[d] / (d == a->buf->ndim - 2 ? rows : d == a->buf->ndim - 1 ? cols : 1);
	return n;
}

void cu_fragment_array(cu_gen *g, const tir_alloc *a, int depth)
{
	tir_buf *o = g->c.out;
	const tir_buffer *b = a->buf;
	const tir_intrin *in = g->frag_in[b->id];
	if (!in) {
		cu_fail(g, "cuda: fragment \"%s\" is used by no tensor intrinsic", b->name);
		return;
	}
	if (b->scope == TIR_SCOPE_WG_ACC) {     /* n / 2 floats per thread a tile */
		buf_indent(o, depth);
		buf_printf(o, "float %s[%lld][%d]; /* %s */\n", g->c.bufname[b->id],
			   (long long)frag_count(g, a), in->n / 2, scope_name(b->scope));
		return;
	}
	const char *use = b->scope == TIR_SCOPE_FRAG_A ? "matrix_a" :
			  b->scope == TIR_SCOPE_FRAG_B ? "matrix_b" : "accumulator";
	buf_indent(o, depth);
	buf_printf(o, "nvcuda::wmma::fragment<nvcuda::wmma::%s, %d, %d, %d, %s", use, in->m,
		   in->n, in->k, g->c.d->storage[b->dtype]);
	if (b->scope != TIR_SCOPE_FRAG_ACC)
		buf_printf(o, ", nvcuda::wmma::%s", g->frag_col[b->id] ? "col_major" : "row_major");
	buf_printf(o, "> %s[%lld]; /* %s */\n", g->c.bufname[b->id],
		   (long long)frag_count(g, a), scope_name(b->scope));
}

/* The access x at the tile's origin: the tile's loops at 0. */
static void at_origin(cu_gen *g, const tir_intrin_match *m, const tir_intrin_access *x,
		      tir_expr **idx)
{
	tir_lowered *L = g->c.L;
	tir_subst zero = { L->p->nvars, arena_alloc(&L->arena, sizeof(tir_expr *) *
						     (size_t)(L->p->nvars + 1)) };
	for (int i = 0; i < m->nloops; i++)
		zero.map[m->loops[i]->var->id] = mk_int(&L->arena, 0);
	for (int d = 0; d < x->buf->ndim; d++)
		idx[d] = expr_subst(&L->arena, x->idx[d], &zero);
}

/* The fragment of x at the tile's origin: NAME[index]. */
static void cu_fragment(cu_gen *g, const tir_intrin_match *m, const tir_intrin_access *x)
{
	tir_lowered *L = g->c.L;
	const tir_alloc *a = &L->alloc[x->buf->id];
	tir_expr *idx[TIR_MAX_DIMS], *e = mk_int(&L->arena, 0);
	at_origin(g, m, x, idx);
	int64_t rows, cols, stride = 1;
	frag_tile(g, x->buf, &rows, &cols);
	for (int d = x->buf->ndim - 1; d >= 0; d--) {
		int64_t t = d == x->buf->ndim - 2 ? rows : d == x->buf->ndim - 1 ? cols : 1;
		tir_expr *rel = mk_sub(&L->arena, idx[d], mk_int(&L->arena, a->lo[d]));
		if (a->base[d])
			rel = mk_sub(&L->arena, rel, a->base[d]);
		rel = mk_floordiv(&L->arena, rel, mk_int(&L->arena, t));
		e = mk_add(&L->arena, e, mk_mul(&L->arena, rel, mk_int(&L->arena, stride)));
		stride *= a->extent[d] / t;
	}
	buf_printf(g->c.out, "%s[", g->c.bufname[x->buf->id]);
	cg_expr(&g->c, lower_simplify(L, e));
	buf_puts(g->c.out, "]");
}

/* The memory operand of x: a pointer to the tile's first element, and its
 * leading dimension; *col: the tile's columns are not the contiguous axis. */
static void cu_tile_ptr(cu_gen *g, const tir_intrin_match *m, const tir_intrin_access *x,
			bool is_const, int64_t *ldm, bool *col)
{
	tir_lowered *L = g->c.L;
	const tir_alloc *a = &L->alloc[x->buf->id];
	tir_expr *idx[TIR_MAX_DIMS];
	if (g->swz[x->buf->id])
		cu_fail(g, "cuda: %s reads or writes buffer \"%s\" through a pointer, but the buffer "
		     "is laid out in swizzled atoms for a warpgroup MMA", m->in->name, x->buf->name);
	at_origin(g, m, x, idx);
	*col = x->col != x->buf->ndim - 1;
	*ldm = a->stride[*col ? x->col : x->row];
	buf_printf(g->c.out, "(%s%s *)(%s + ", is_const ? "const " : "",
		   g->c.d->storage[x->buf->dtype], g->c.bufname[x->buf->id]);
	cg_expr(&g->c, lower_offset(L, x->buf, x->buf->ndim, idx));
	buf_puts(g->c.out, ")");
}

/* ---- warpgroup MMAs (wgmma) ------------------------------------------------------ */

/* The wrappers of wgmma.mma_async: one per width N (64, 128, 256), operand
 * dtype and operand majors; bit wg_wrapper_bit of g->wg_wrappers. */
static int wg_wrapper_bit(int n, tir_dtype in, int ta, int tb)
{
	return (n == 64 ? 0 : n == 128 ? 1 : 2) * 8 + (in == TIR_BF16 ? 4 : 0) + ta * 2 + tb;
}

static void wg_wrapper_name(tir_buf *o, int n, tir_dtype in, int ta, int tb)
{
	buf_printf(o, "tir_wgmma_%d_%s_%d%d", n, in == TIR_BF16 ? "bf16" : "f16", ta, tb);
}

/* d[0 .. n/2) += A * B, A and B by descriptor, their majors ta and tb
 * (1: MN-major, PTX's imm-trans-a / -b); the accumulator always read
 * (scale-d true: FILL zeroes it). */
static void wg_wrapper(tir_buf *o, int n, tir_dtype in, int ta, int tb)
{
	const char *ty = in == TIR_BF16 ? "bf16" : "f16";
	int r = n / 2;
	buf_puts(o, "TIR_DEV void ");
	wg_wrapper_name(o, n, in, ta, tb);
	buf_puts(o, "(float *d, unsigned long long a, unsigned long long b)\n{\n");
	buf_printf(o, "    asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %%%d, 0;\\n\"\n", r + 2);
	buf_printf(o, "        \"wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {", n, ty, ty);
	for (int i = 0; i < r; i++)
		buf_printf(o, "%s%%%d", i ? ", " : "", i);
	buf_printf(o, "}, %%%d, %%%d, p, 1, 1, %d, %d;\\n}\\n\"\n        : ", r, r + 1, ta, tb);
	for (int i = 0; i < r; i++)
		buf_printf(o, "%s\"+f\"(d[%d])", i ? ", " : "", i);
	buf_puts(o, "\n        : \"l\"(a), \"l\"(b), \"r\"(1));\n}\n");
}

void cu_wgmma_prelude(tir_buf *o, unsigned wrappers)
{
	buf_puts(o, cuda_wgmma_prelude);
	for (int bit = 0; bit < 24; bit++)
		if (wrappers & (1u << bit))
			wg_wrapper(o, bit / 8 == 0 ? 64 : bit / 8 == 1 ? 128 : 256,
				   bit & 4 ? TIR_BF16 : TIR_F16, (bit >> 1) & 1, bit & 1);
	buf_puts(o, "\n");
}

/* The majors of a matched warpgroup MMA's operands: 1 where the operand's
 * M (a) or N (b) dimension, not K, is its buffer's last. */
static void wg_majors(const tir_intrin_match *m, int *ta, int *tb)
{
	*ta = m->src[0].col != m->src[0].buf->ndim - 1;
	*tb = m->src[1].col == m->src[1].buf->ndim - 1;
}

/* Commits the warpgroup MMAs issued since the last flush and waits for
 * them: before anything else reads or writes what they use — a barrier
 * (the next fetch overwrites their shared operands), the accumulator's
 * FILL or STORE, any block — and at the end of a statement list that is
 * more than MMAs (its loop may come round to such a thing). */
void cu_wg_flush(cu_gen *g, int depth)
{
	if (!g->wg_pending)
		return;
	buf_indent(g->c.out, depth);
	buf_puts(g->c.out, "tir_wgmma_commit_wait();\n");
	g->wg_pending = false;
}

/* Waits for the group a pipelined loop's iteration left in flight: before
 * the accumulators are read or reset, and where the loop ends. */
void cu_wg_drain(cu_gen *g, int depth)
{
	cu_wg_flush(g, depth);
	if (!g->wg_inflight)
		return;
	buf_indent(g->c.out, depth);
	buf_puts(g->c.out, "tir_wgmma_wait();\n");
	g->wg_inflight = false;
}

/* Whether s is warpgroup MMAs only: a loop tensorized with one, or loops
 * that hold nothing else. */
bool cu_wg_mma_only(const tir_stmt *s)
{
	const tir_intrin *in = intrin_of_loop(s);
	if (in)
		return in->unit == INTRIN_WARPGROUP && in->kind == INTRIN_MMA;
	if (s->kind != STMT_FOR || s->nkids == 0)
		return false;
	for (int i = 0; i < s->nkids; i++)
		if (!cu_wg_mma_only(s->kids[i]))
			return false;
	return true;
}

/* The descriptor of operand x of a warpgroup MMA at its tile's origin. */
static void wg_desc(cu_gen *g, const tir_intrin_match *m, const tir_intrin_access *x,
		    bool mn_major)
{
	tir_lowered *L = g->c.L;
	const tir_alloc *a = &L->alloc[x->buf->id];
	tir_expr *idx[TIR_MAX_DIMS];
	at_origin(g, m, x, idx);
	int64_t cols = a->extent[x->buf->ndim - 1], rows = a->elems / cols;
	tir_buf *o = g->c.out;
	buf_printf(o, "tir_wgmma_desc(%s, tir_swz_pos(", g->c.bufname[x->buf->id]);
	cg_expr(&g->c, lower_offset(L, x->buf, x->buf->ndim, idx));
	buf_printf(o, ", %lld, %lld, %d), %lld)", (long long)cols, (long long)rows,
		   dtype_bytes(x->buf->dtype), (long long)(mn_major ? rows * 128 : 16));
}

/* Thread t of a warpgroup holds the accumulator's rows tir_r and tir_r + 8
 * (warp w = t / 32: 16w + l / 4, l = t % 32), columns 8q + tir_c and the
 * next (tir_c = 2 (l % 4)): the STORE's layout, with or without epilogue. */
#define WG_LANE_ROW_COL \
	"const int tir_r = 16 * ((threadIdx.x >> 5) & 3) + ((threadIdx.x & 31) >> 2), " \
	"tir_c = 2 * (threadIdx.x & 3);\n"

/* The tile loops of m at register 4 tir_q + tir_h (plus col in its column):
 * their variables declared at depth. */
static void wg_tile_vars(cu_gen *g, const tir_intrin_match *m, const char *col, int depth)
{
	tir_buf *o = g->c.out;
	buf_indent(o, depth);
	buf_printf(o, "const %s ", g->c.d->idx_type);
	cg_var(o, m->loops[0]->var);
	buf_puts(o, " = tir_r + 8 * (tir_h >> 1);\n");
	buf_indent(o, depth);
	buf_printf(o, "const %s ", g->c.d->idx_type);
	cg_var(o, m->loops[1]->var);
	buf_printf(o, " = 8 * tir_q + tir_c%s;\n", col);
}

/* A warpgroup STORE with an epilogue (ir/intrin.c, match_epilogue): the
 * block's value once per accumulator register of this thread — its tile
 * loops' variables set to the register's row and column (the layout of
 * the plain STORE below) and its loads of the accumulator printed as that
 * register — so the pointwise work after a matmul runs on the registers
 * and only its result is stored.  A thread's two registers of adjacent
 * columns are stored together (one 4- or 8-byte store) where the output is
 * contiguous along the columns with an even offset at the pair (no
 * predicate; the block not reading its own output); else each alone, the
 * block as it is. */
static void wg_store_epilogue(cu_gen *g, const tir_intrin *in, const tir_intrin_match *m,
			      int depth)
{
	tir_buf *o = g->c.out;
	const tir_block *b = m->b;
	tir_expr *doff = lower_offset(g->c.L, b->store, b->store->ndim, b->store_idx);
	const char *vt = cu_vec_type(b->store->dtype, 2 * dtype_bytes(b->store->dtype));
	bool pair = vt && !b->predicate && !block_reads(b, b->store) &&
		    cu_aligned_lanes(g, b, doff, m->loops[1]->var, 2);
	buf_puts(o, "{ /* with its epilogue */\n");
	buf_indent(o, depth + 1);
	buf_puts(o, "const float *tir_d = ");
	cu_fragment(g, m, &m->src[0]);
	buf_puts(o, ";\n");
	buf_indent(o, depth + 1);
	buf_puts(o, WG_LANE_ROW_COL);
	buf_indent(o, depth + 1);
	buf_puts(o, "#pragma unroll\n");
	buf_indent(o, depth + 1);
	buf_printf(o, "for (int tir_q = 0; tir_q < %d; ++tir_q) {\n", in->n / 8);
	buf_indent(o, depth + 2);
	buf_puts(o, "#pragma unroll\n");
	buf_indent(o, depth + 2);
	/* tir_h: register 4 tir_q + tir_h, rows tir_r (+ 8 for tir_h >= 2),
	 * columns tir_c (+ 1 for odd tir_h) */
	buf_printf(o, "for (int tir_h = 0; tir_h < 4; tir_h += %d) {\n", pair ? 2 : 1);
	int d = depth + 3;
	g->c.reg_buf = m->src[0].buf;
	if (!pair) {
		wg_tile_vars(g, m, " + (tir_h & 1)", d);
		g->c.reg_expr = "tir_d[4 * tir_q + tir_h]";
		cg_block(&g->c, b, d);
	} else {
		const char *scvt = g->c.d->store_cvt[b->store->dtype];
		buf_indent(o, d);
		buf_printf(o, "__align__(8) %s tir_vs[2];\n", g->c.d->storage[b->store->dtype]);
		for (int k = 0; k < 3; k++) {   /* the two columns, then the store */
			buf_indent(o, d);
			buf_puts(o, "{\n");
			wg_tile_vars(g, m, k == 1 ? " + 1" : "", d + 1);
			cg_block_iters(&g->c, b, d + 1);
			buf_indent(o, d + 1);
			if (k < 2) {
				g->c.reg_expr = k ? "tir_d[4 * tir_q + tir_h + 1]" : "tir_d[4 * tir_q + tir_h]";
				buf_printf(o, "tir_vs[%d] = %s(", k, scvt ? scvt : "");
				cg_expr(&g->c, cg_stored_value(&g->c, b, b->value));
				buf_puts(o, ");\n");
			} else {
				buf_printf(o, "*(%s *)(%s + ", vt, g->c.bufname[b->store->id]);
				cg_index(&g->c, b->store, doff);
				buf_printf(o, ") = *(const %s *)tir_vs;\n", vt);
			}
			buf_indent(o, d);
			buf_puts(o, "}\n");
		}
	}
	g->c.reg_buf = NULL;
	g->c.reg_expr = NULL;
	for (int k = 2; k >= 0; k--) {
		buf_indent(o, depth + k);
		buf_puts(o, "}\n");
	}
}

/* The warpgroup intrinsics' implementation (intrins.def). */
static void cu_wg_intrin(cu_gen *g, const tir_intrin *in, const tir_intrin_match *m, int depth)
{
	tir_buf *o = g->c.out;
	int ta, tb;
	int64_t ldm;
	bool col;
	if (in->kind != INTRIN_MMA && g->wg_inflight) {   /* reads or resets the accumulator */
		buf_puts(o, "tir_wgmma_wait();\n");
		buf_indent(o, depth);
		g->wg_inflight = false;
	}
	switch (in->kind) {
	case INTRIN_FILL:
		buf_printf(o, "{ float *tir_d = ");
		cu_fragment(g, m, &m->dst);
		buf_printf(o, "; _Pragma(\"unroll\") for (int tir_q = 0; tir_q < %d; ++tir_q) "
			   "tir_d[tir_q] = 0.f; }\n", in->n / 2);
		break;
	case INTRIN_MMA:       /* cu_stmt fenced the run this call is part of */
		wg_majors(m, &ta, &tb);
		wg_wrapper_name(o, in->n, in->in, ta, tb);
		buf_puts(o, "(");
		cu_fragment(g, m, &m->dst);
		buf_puts(o, ", ");
		wg_desc(g, m, &m->src[0], ta);
		buf_puts(o, ", ");
		wg_desc(g, m, &m->src[1], tb);
		buf_puts(o, ");\n");
		g->wg_pending = true;
		break;
	case INTRIN_STORE:
		if (m->epilogue) {
			wg_store_epilogue(g, in, m, depth);
			break;
		}
		/* thread t of the warpgroup: warp w = t / 32 holds rows 16w + l / 4
		 * and 8 below (l = t % 32), columns 8q + 2 (l % 4) and the next */
		buf_puts(o, "{\n");
		buf_indent(o, depth + 1);
		buf_puts(o, "const float *tir_d = ");
		cu_fragment(g, m, &m->src[0]);
		buf_puts(o, ";\n");
		buf_indent(o, depth + 1);
		buf_printf(o, "%s *tir_p = ", g->c.d->storage[m->dst.buf->dtype]);
		cu_tile_ptr(g, m, &m->dst, false, &ldm, &col);
		buf_puts(o, ";\n");
		buf_indent(o, depth + 1);
		buf_puts(o, WG_LANE_ROW_COL);
		buf_indent(o, depth + 1);
		buf_printf(o, "#define TIR_AT(r, c) tir_p[%s]\n",
			   col ? "(c) * TIR_LDM + (r)" : "(r) * TIR_LDM + (c)");
		buf_indent(o, depth + 1);
		buf_printf(o, "const int TIR_LDM = %lld;\n", (long long)ldm);
		buf_indent(o, depth + 1);
		buf_puts(o, "#pragma unroll\n");
		buf_indent(o, depth + 1);
		buf_printf(o, "for (int tir_q = 0; tir_q < %d; ++tir_q) {\n", in->n / 8);
		if (!col && m->dst.buf->dtype == TIR_F32) {
			/* a row's two columns as one 8-byte store: the tile origin
			 * is 32-byte aligned and the leading dimension a multiple
			 * of 16 bytes (verify/tensor.c, check_memory), tir_c even */
			for (int h = 0; h < 2; h++) {
				buf_indent(o, depth + 2);
				buf_printf(o, "*(float2 *)&TIR_AT(tir_r%s, 8 * tir_q + tir_c) = "
					   "make_float2(tir_d[4 * tir_q + %d], tir_d[4 * tir_q + %d]);\n",
					   h ? " + 8" : "", 2 * h, 2 * h + 1);
			}
		} else {
			for (int h = 0; h < 4; h++) {   /* the rows r and r + 8, two columns each */
				buf_indent(o, depth + 2);
				buf_printf(o, "TIR_AT(tir_r%s, 8 * tir_q + tir_c%s) = tir_d[4 * tir_q",
					   h / 2 ? " + 8" : "", h % 2 ? " + 1" : "");
				if (h)
					buf_printf(o, " + %d", h);
				buf_puts(o, "];\n");
			}
		}
		buf_indent(o, depth + 1);
		buf_puts(o, "}\n");
		buf_indent(o, depth + 1);
		buf_puts(o, "#undef TIR_AT\n");
		buf_indent(o, depth);
		buf_puts(o, "}\n");
		break;
	default:
		cu_fail(g, "cuda: %s: a warpgroup intrinsic of kind %d has no implementation",
		     in->name, (int)in->kind);
		break;
	}
}

void cu_intrin(cu_gen *g, const tir_stmt *l, int depth)
{
	tir_lowered *L = g->c.L;
	tir_buf *o = g->c.out;
	const tir_intrin *in = intrin_of_loop(l);
	tir_intrin_match m;
	tir_error e;
	if (intrin_match(&L->arena, L->p, l, in, &m, &e)) {
		cu_fail(g, "cuda: %s", e.msg);
		return;
	}
	int64_t ldm;
	bool col;
	buf_indent(o, depth);
	buf_printf(o, "/* %s: %s */\n", l->var->name, in->name);
	buf_indent(o, depth);
	if (in->unit == INTRIN_WARPGROUP) {
		cu_wg_intrin(g, in, &m, depth);
		return;
	}
	switch (in->kind) {
	case INTRIN_FILL:
		buf_puts(o, "nvcuda::wmma::fill_fragment(");
		cu_fragment(g, &m, &m.dst);
		buf_printf(o, ", (%s)0);\n", g->c.d->storage[in->acc]);
		break;
	case INTRIN_LOAD_A:
	case INTRIN_LOAD_B:
		buf_puts(o, "nvcuda::wmma::load_matrix_sync(");
		cu_fragment(g, &m, &m.dst);
		buf_puts(o, ", ");
		cu_tile_ptr(g, &m, &m.src[0], true, &ldm, &col);
		buf_printf(o, ", %lld);\n", (long long)ldm);
		break;
	case INTRIN_MMA:
		buf_puts(o, "nvcuda::wmma::mma_sync(");
		cu_fragment(g, &m, &m.dst);
		buf_puts(o, ", ");
		cu_fragment(g, &m, &m.src[0]);
		buf_puts(o, ", ");
		cu_fragment(g, &m, &m.src[1]);
		buf_puts(o, ", ");
		cu_fragment(g, &m, &m.dst);
		buf_puts(o, ");\n");
		break;
	case INTRIN_STORE:
		buf_puts(o, "nvcuda::wmma::store_matrix_sync(");
		cu_tile_ptr(g, &m, &m.dst, false, &ldm, &col);
		buf_puts(o, ", ");
		cu_fragment(g, &m, &m.src[0]);
		buf_printf(o, ", %lld, nvcuda::wmma::%s);\n", (long long)ldm,
			   col ? "mem_col_major" : "mem_row_major");
		break;
	}
}

/* Which intrinsic each fragment serves and its layout, from every
 * tensorized loop of the program; *any says whether there is one. */
void cu_scan_fragment(cu_gen *g, const tir_stmt *s, bool *any)
{
	const tir_intrin *in = intrin_of_loop(s);
	if (in) {
		tir_intrin_match m;
		tir_error e;
		*any = true;
		if (intrin_match(&g->c.L->arena, g->c.L->p, s, in, &m, &e) == 0) {
			const tir_intrin_access *ops[3] = { &m.dst, &m.src[0], &m.src[1] };
			for (int i = 0; i < 1 + m.nsrc; i++)
				if (scope_is_fragment(ops[i]->buf->scope)) {
					g->frag_in[ops[i]->buf->id] = in;
					if (in->kind == INTRIN_MMA && i > 0)
						g->frag_col[ops[i]->buf->id] = ops[i]->row > ops[i]->col;
				}
			if (in->unit == INTRIN_WARPGROUP && in->kind == INTRIN_MMA) {
				int ta, tb;
				wg_majors(&m, &ta, &tb);
				g->wg_wrappers |= 1u << wg_wrapper_bit(in->n, in->in, ta, tb);
				g->swz[m.src[0].buf->id] = g->swz[m.src[1].buf->id] = true;
			}
		}
	}
	for (int i = 0; i < s->nkids; i++)
		cu_scan_fragment(g, s->kids[i], any);
}
