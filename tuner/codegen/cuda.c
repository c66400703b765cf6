/*
 * cuda.c — the CUDA C backend (compiled by NVRTC, see nvrtc.c).
 *
 * Design.  Each top-level statement of the root that holds a block becomes one
 * kernel, `extern "C" __global__ <block>_kernel<N>`, launched in order
 * (tir_code.launches).  Every kernel takes the same parameters: every entry
 * of tir_code.args in order, i.e. the params then the global temps
 * (is_scratch, allocated by the runner).
 *
 * Loops bound to blockIdx / threadIdx are not loops: their variable is the
 * hardware index; the launch dimension of a tag is the largest extent bound
 * to it in the kernel and a loop of smaller extent guards its body with
 * `if (idx < extent)`.  A blockIdx loop must enclose every other loop of its
 * kernel (else the code would be wrong, and we refuse).  vthread loops are
 * unrolled serial loops; parallel loops are serial.
 *
 * Memory: shared buffers are carved from dynamic shared memory
 * (tir_launch.shared_bytes) at 16-byte aligned offsets and named at kernel
 * top; local buffers are arrays at their allocation site (lower.c).
 * __syncthreads() is inserted by a small analysis over each statement list:
 * before a statement that reads a shared buffer written since the last
 * barrier, and at the end of a loop body that writes and reads shared
 * memory (the next iteration overwrites what this one read).
 *
 * Cross-thread reduction: a loop bound to threadIdx.x that feeds a reduction
 * iterator of a block annotated "cross_thread_reduction" (the only block
 * under it; verify/threading.c admits nothing else) becomes a per-thread
 * partial sum in a register over the loops under it, then a tree across the
 * threads (warp shuffles, and a small static shared array between warps when
 * the extent is a multiple of 32; a shared-memory tree otherwise), then one
 * thread writes store = (init if some thread ran the block's first reduction
 * step, else store) + sum, if any thread ran the block at all (its predicate
 * may be false everywhere).  Every thread reaches the barriers: the loop is
 * never guarded.
 *
 * Unrolling: an "unroll" annotation N > 0 is `#pragma unroll N`; unroll,
 * vectorized (scalar) and vthread loops are unrolled fully; and under a loop
 * annotated "auto_unroll_max_step" N (TVM's pragma of that name), every loop
 * that holds one block and whose body copies, fully unrolled, are at most N
 * is unrolled fully (a loop holding several stages, e.g. a reduction step
 * with its shared-memory copies and barriers, stays a loop: code size).
 *
 * A vectorized loop whose body is a copy of contiguous, provably aligned
 * elements (a plain one, or a padded one: select(c, load, 0) with conditions
 * the same for every lane, as an im2col fetch along the channels), under a
 * predicate the same for every lane too (a fused fetch loop's guard when its
 * split leaves a partial tail of whole vectors), becomes one 4-, 8- or
 * 16-byte load and store; otherwise it is an unrolled scalar loop.
 * float16 / bfloat16 are __half / __nv_bfloat16 in memory and float in
 * arithmetic.
 *
 * Tensor intrinsics (ir/intrins.def): WMMA calls per warp on fragments;
 * wgmma per warpgroup, its accumulator a float array per thread, its shared
 * operands stored in 128-byte swizzled atoms (every access through
 * tir_swz128, the buffers carved at 1 KB boundaries) and read through
 * matrix descriptors; a run of MMAs fenced before, committed and waited for
 * before anything else runs (wg_flush), except that a pipelined loop leaves
 * one iteration's group in flight into the next (cu_pipelined_loop).
 *
 * Software pipelining: a serial loop annotated "software_pipeline" = S with
 * copy stages (lower_pipeline_stages) runs its copy stages S - 1 iterations
 * ahead of the rest, into ring copies of their shared buffers, with
 * cp.async (commit per iteration, wait_group S - 1, then a barrier); see
 * cu_pipelined_loop.  One annotated "tma" = 1 as well fetches its copy
 * stages with Hopper's tensor memory accelerator instead: the kernel gets a
 * producer warpgroup of its own (threadIdx.y one past the rest) whose one
 * thread issues a bulk tensor copy per box of each stage, S ring slots
 * handed over by mbarriers (full: the slot's bytes landed; empty: every
 * consumer thread is done reading it); see cu_tma_loop.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "codegen.h"

static const cg_dialect cuda_dialect_int = {
	.idx_type = "int",
	.storage = {
#define TIR_DTYPE(id, name, bytes, ctype, cudatype, isfloat) [TIR_##id] = cudatype,
#include "../ir/dtypes.def"
#undef TIR_DTYPE
	},
	.value = {
		[TIR_F32] = "float", [TIR_F16] = "float", [TIR_BF16] = "float",
		[TIR_I8] = "signed char", [TIR_I32] = "int", [TIR_I64] = "long long",
		[TIR_BOOL] = "int",
	},
	.load_cvt = { [TIR_F16] = "__half2float", [TIR_BF16] = "__bfloat162float" },
	.store_cvt = { [TIR_F16] = "__float2half", [TIR_BF16] = "__float2bfloat16" },
	.round = { [TIR_F16] = "tir_round_f16", [TIR_BF16] = "tir_round_bf16" },
};

static const char cuda_prelude[] =
"/* generated by tird (libtir, CUDA backend) */\n"
"#include <cuda_fp16.h>\n"
"#include <cuda_bf16.h>\n"
"\n"
"#define TIR_DEV static __device__ __forceinline__\n"
"TIR_DEV float tir_round_f16(float x) { return __half2float(__float2half(x)); }\n"
"TIR_DEV float tir_round_bf16(float x) { return __bfloat162float(__float2bfloat16(x)); }\n"
"TIR_DEV long long tir_floordiv(long long a, long long b)\n"
"{\n"
"    long long q = a / b;\n"
"    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;\n"
"}\n"
"TIR_DEV long long tir_floormod(long long a, long long b) { return a - tir_floordiv(a, b) * b; }\n"
"TIR_DEV float tir_minf(float a, float b) { return a < b ? a : b; }\n"
"TIR_DEV float tir_maxf(float a, float b) { return a > b ? a : b; }\n"
"TIR_DEV long long tir_mini(long long a, long long b) { return a < b ? a : b; }\n"
"TIR_DEV long long tir_maxi(long long a, long long b) { return a > b ? a : b; }\n"
"TIR_DEV float tir_exp(float x) { return expf(x); }\n"
"TIR_DEV float tir_tanh(float x) { return tanhf(x); }\n"
"TIR_DEV float tir_erf(float x) { return erff(x); }\n"
"TIR_DEV float tir_sqrt(float x) { return sqrtf(x); }\n"
"TIR_DEV float tir_rsqrt(float x) { return rsqrtf(x); }\n"
"TIR_DEV float tir_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }\n"
"TIR_DEV float tir_gelu(float x) { return x * 0.5f * (1.0f + erff(x * 0.70710678f)); }\n"
"\n";

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

/* The tensor memory accelerator (sm_90): a tensor map (CUtensorMap, 128
 * opaque bytes the runner encodes) taken by value as a __grid_constant__
 * kernel parameter; mbarriers in shared memory (init, arrive, arrive with
 * the bytes a copy will deliver, wait for a phase's parity); bulk tensor
 * copies of rank 1 to 5 completing on an mbarrier (tma_load_fn). */
static const char cuda_tma_prelude[] =
"struct __align__(64) tir_tmap { unsigned long long opaque[16]; };\n"
"TIR_DEV void tir_mbar_init(unsigned long long *b, unsigned n)\n"
"{\n"
"    asm volatile(\"mbarrier.init.shared::cta.b64 [%0], %1;\\n\" :: \"r\"(tir_smem_addr(b)), \"r\"(n) : \"memory\");\n"
"}\n"
"TIR_DEV void tir_mbar_init_fence() { asm volatile(\"fence.mbarrier_init.release.cluster;\\n\" ::: \"memory\"); }\n"
"TIR_DEV void tir_mbar_arrive(unsigned long long *b)\n"
"{\n"
"    asm volatile(\"mbarrier.arrive.shared::cta.b64 _, [%0];\\n\" :: \"r\"(tir_smem_addr(b)) : \"memory\");\n"
"}\n"
"TIR_DEV void tir_mbar_expect(unsigned long long *b, unsigned bytes)\n"
"{\n"
"    asm volatile(\"mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\\n\" ::\n"
"                 \"r\"(tir_smem_addr(b)), \"r\"(bytes) : \"memory\");\n"
"}\n"
"TIR_DEV void tir_mbar_wait(unsigned long long *b, unsigned parity)\n"
"{\n"
"    asm volatile(\"{\\n.reg .pred p;\\nTIR_WAIT:\\n\"\n"
"                 \"mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\\n\"\n"
"                 \"@!p bra TIR_WAIT;\\n}\\n\" :: \"r\"(tir_smem_addr(b)), \"r\"(parity) : \"memory\");\n"
"}\n";

/* tir_tma_load<rank>(dst, map, c0 .. c<rank-1>, bar): the box at those
 * coordinates (innermost first) into shared memory at dst. */
static void tma_load_fn(tir_buf *o, int rank)
{
	buf_printf(o, "TIR_DEV void tir_tma_load%d(void *dst, const tir_tmap *m", rank);
	for (int i = 0; i < rank; i++)
		buf_printf(o, ", int c%d", i);
	buf_puts(o, ", unsigned long long *bar)\n{\n");
	buf_printf(o, "    asm volatile(\"cp.async.bulk.tensor.%dd.shared::cluster.global."
		   "mbarrier::complete_tx::bytes [%%0], [%%1, {", rank);
	for (int i = 0; i < rank; i++)
		buf_printf(o, "%s%%%d", i ? ", " : "", i + 2);
	buf_printf(o, "}], [%%%d];\\n\"\n                 :: \"r\"(tir_smem_addr(dst)), "
		   "\"l\"(m)", rank + 2);
	for (int i = 0; i < rank; i++)
		buf_printf(o, ", \"r\"(c%d)", i);
	buf_puts(o, ", \"r\"(tir_smem_addr(bar)) : \"memory\");\n}\n");
}

/* Asynchronous global -> shared copies (sm_80 on, as every CUDA target of
 * target.c), for pipelined loops: n of
 * the `bytes` bytes are read, the rest zero-filled (n = 0: padding). */
static const char cuda_async_prelude[] =
"TIR_DEV unsigned tir_smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }\n"
"TIR_DEV void tir_cp_async16(void *dst, const void *src, int n)\n"
"{\n"
"    asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\\n\" ::\n"
"                 \"r\"(tir_smem_addr(dst)), \"l\"(src), \"r\"(n) : \"memory\");\n"
"}\n"
"TIR_DEV void tir_cp_async8(void *dst, const void *src, int n)\n"
"{\n"
"    asm volatile(\"cp.async.ca.shared.global [%0], [%1], 8, %2;\\n\" ::\n"
"                 \"r\"(tir_smem_addr(dst)), \"l\"(src), \"r\"(n) : \"memory\");\n"
"}\n"
"TIR_DEV void tir_cp_async4(void *dst, const void *src, int n)\n"
"{\n"
"    asm volatile(\"cp.async.ca.shared.global [%0], [%1], 4, %2;\\n\" ::\n"
"                 \"r\"(tir_smem_addr(dst)), \"l\"(src), \"r\"(n) : \"memory\");\n"
"}\n"
"TIR_DEV void tir_cp_async_commit() { asm volatile(\"cp.async.commit_group;\\n\" ::: \"memory\"); }\n"
"#define TIR_CP_ASYNC_WAIT(n) asm volatile(\"cp.async.wait_group \" #n \";\\n\" ::: \"memory\")\n"
"\n";

static bool is_block_tag(tir_thread_tag t)
{
	return t == TIR_BLOCK_X || t == TIR_BLOCK_Y || t == TIR_BLOCK_Z;
}

static bool is_thread_tag(tir_thread_tag t)
{
	return t == TIR_THREAD_X || t == TIR_THREAD_Y || t == TIR_THREAD_Z;
}

/* blockIdx / threadIdx loops are hardware indices; vthread loops are loops */
static bool is_hw(const tir_stmt *l)
{
	return l->kind == STMT_FOR && l->loop_kind == LOOP_THREAD &&
	       (is_block_tag(l->tag) || is_thread_tag(l->tag));
}

static const char *const hw_index[TIR_NTHREAD_TAGS] = {
	[TIR_BLOCK_X] = "blockIdx.x", [TIR_BLOCK_Y] = "blockIdx.y",
	[TIR_BLOCK_Z] = "blockIdx.z", [TIR_THREAD_X] = "threadIdx.x",
	[TIR_THREAD_Y] = "threadIdx.y", [TIR_THREAD_Z] = "threadIdx.z",
};

static const char *const tag_names[] = {
#define TIR_THREAD_TAG(id, name) name,
#include "../thread_tags.def"
#undef TIR_THREAD_TAG
};

typedef struct cu_gen {
	cg_ctx c;
	tir_error *err;
	bool failed;
	int64_t launch[TIR_NTHREAD_TAGS];   /* this kernel's launch dims by tag */
	int guard;                          /* inside `if (idx < extent)` */
	int nbufs;
	int nargs;
	int *argbuf;                        /* buffer id of each kernel argument */
	/* scratch for the barrier analysis, by buffer id */
	bool *rd, *wr;
	/* the block being emitted as a cross-thread partial sum, if any */
	const tir_block *xblock;
	/* "auto_unroll_max_step" of the innermost annotated enclosing loop: loops
	 * under it whose body copies, fully unrolled, are at most this many get
	 * `#pragma unroll` (0: none) */
	int64_t auto_unroll;
	/* fragments, by buffer id: the intrinsic whose operand each is and
	 * whether products read it transposed (a col_major fragment) */
	const tir_intrin **frag_in;
	bool *frag_col;
	/* emitting a copy stage of a pipelined loop: global -> shared copies
	 * are cp.async */
	bool async;
	/* warpgroup MMAs (wgmma): the shared buffers they read, swizzled (by
	 * buffer id, also g->c.swizzled); the wrappers used (wg_wrapper_bit);
	 * whether this kernel calls any; whether MMAs issued above are not yet
	 * committed and waited for (see wg_flush) */
	bool *swz;
	unsigned wg_wrappers;
	bool wg_kernel, wg_pending;
	/* a committed group left in flight by a pipelined loop's iteration
	 * (cu_pipelined_loop), and the statement list whose end leaves it */
	bool wg_inflight;
	tir_stmt *const *wg_overlap_list;
	/* the kernel's pipelined loop fed by the tensor memory accelerator
	 * (at most one; NULL: none), its copies, the tensor map of each, its
	 * warpgroups of consumers (the producer is threadIdx.y == tma_wgs),
	 * and whether the producer has left: barriers are among the
	 * consumers only from there on; the tma ranks used (bit per rank) */
	const tir_stmt *tma_loop;
	lower_tma_copy tma[TIR_MAX_TMAPS];
	int ntma;
	int64_t tma_wgs;
	bool tma_consumers;
	unsigned tma_ranks;
} cu_gen;

static void fail(cu_gen *g, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Records the first failure; generation goes on but its result is dropped. */
static void fail(cu_gen *g, const char *fmt, ...)
{
	if (!g->failed && g->err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(g->err->msg, sizeof g->err->msg, fmt, ap);
		va_end(ap);
	}
	g->failed = true;
}

/* Collects launch dims; checks that blockIdx loops enclose all others.
 * `outer` is the innermost non-blockIdx loop above s, if any. */
static void scan_launch(cu_gen *g, const tir_stmt *s, const tir_stmt *outer)
{
	if (s->kind == STMT_FOR && lower_has_blocks(s)) {
		if (s->loop_kind == LOOP_THREAD && is_block_tag(s->tag)) {
			if (outer)
				fail(g, "cuda: loop \"%s\" bound to %s is nested under a loop "
				     "that is not bound to blockIdx", s->var->name,
				     tag_names[s->tag]);
		} else {
			outer = s;
		}
		if (is_hw(s) && s->extent > g->launch[s->tag])
			g->launch[s->tag] = s->extent;
		const tir_intrin *in = intrin_of_loop(s);
		if (in && intrin_lanes(in) > g->launch[TIR_THREAD_X])
			g->launch[TIR_THREAD_X] = intrin_lanes(in);
	}
	for (int i = 0; i < s->nkids; i++)
		scan_launch(g, s->kids[i], outer);
}

/* ---- barriers ------------------------------------------------------------------ */

static void note_read(tir_expr *load, void *ctx)
{
	cu_gen *g = ctx;
	if (load->buf->scope == TIR_SCOPE_SHARED)
		g->rd[load->buf->id] = true;
}

/* Adds the shared buffers s reads and writes to g->rd / g->wr. */
static void shared_rw(cu_gen *g, const tir_stmt *s)
{
	if (s->kind == STMT_BLOCK) {
		const tir_block *b = s->block;
		expr_visit_loads(b->value, note_read, g);
		expr_visit_loads(b->init, note_read, g);
		expr_visit_loads(b->predicate, note_read, g);
		if (b->store->scope == TIR_SCOPE_SHARED) {
			g->wr[b->store->id] = true;
			if (b->reduce != REDUCE_NONE)
				g->rd[b->store->id] = true;
		}
		return;
	}
	for (int i = 0; i < s->nkids; i++)
		shared_rw(g, s->kids[i]);
}

static void clear_rw(cu_gen *g)
{
	memset(g->rd, 0, (size_t)g->nbufs);
	memset(g->wr, 0, (size_t)g->nbufs);
}

static void wg_flush(cu_gen *g, int depth);

static void sync(cu_gen *g, int depth, const char *why)
{
	if (g->guard)
		fail(g, "cuda: a barrier (%s) is needed inside a thread-index guard "
		     "(a loop bound to a thread axis with a smaller extent than the "
		     "launch dimension)", why);
	wg_flush(g, depth);
	if (g->wg_kernel) {
		buf_indent(g->c.out, depth);
		buf_puts(g->c.out, "tir_fence_proxy_async();\n");
	}
	buf_indent(g->c.out, depth);
	if (g->tma_consumers)
		buf_printf(g->c.out, "asm volatile(\"bar.sync 1, %lld;\" ::: \"memory\"); "
			   "/* %s (the consumers) */\n", (long long)g->tma_wgs * 128, why);
	else
		buf_printf(g->c.out, "__syncthreads(); /* %s */\n", why);
}

/* ---- statements ---------------------------------------------------------------- */

static void cu_stmt(cu_gen *g, const tir_stmt *s, int depth);

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

static void cu_fragment_array(cu_gen *g, const tir_alloc *a, int depth)
{
	tir_buf *o = g->c.out;
	const tir_buffer *b = a->buf;
	const tir_intrin *in = g->frag_in[b->id];
	if (!in) {
		fail(g, "cuda: fragment \"%s\" is used by no tensor intrinsic", b->name);
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

static void cu_local(cu_gen *g, const tir_alloc *a, int depth)
{
	if (scope_is_fragment(a->buf->scope))
		cu_fragment_array(g, a, depth);
	else
		cg_local_array(&g->c, a, "__align__(16) ", depth);
}

static void cu_allocs(cu_gen *g, const tir_stmt *site, int depth)
{
	tir_lowered *L = g->c.L;
	for (int i = 0; i < L->p->nbufs; i++) {
		const tir_alloc *a = &L->alloc[i];
		if (a->used && a->compact && a->lca == site &&
		    a->buf->scope != TIR_SCOPE_SHARED)
			cu_local(g, a, depth);
	}
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
		fail(g, "cuda: %s reads or writes buffer \"%s\" through a pointer, but the buffer "
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
static void wg_flush(cu_gen *g, int depth)
{
	if (!g->wg_pending)
		return;
	buf_indent(g->c.out, depth);
	buf_puts(g->c.out, "tir_wgmma_commit_wait();\n");
	g->wg_pending = false;
}

/* Waits for the group a pipelined loop's iteration left in flight: before
 * the accumulators are read or reset, and where the loop ends. */
static void wg_drain(cu_gen *g, int depth)
{
	wg_flush(g, depth);
	if (!g->wg_inflight)
		return;
	buf_indent(g->c.out, depth);
	buf_puts(g->c.out, "tir_wgmma_wait();\n");
	g->wg_inflight = false;
}

/* Whether s is warpgroup MMAs only: a loop tensorized with one, or loops
 * that hold nothing else. */
static bool wg_mma_only(const tir_stmt *s)
{
	const tir_intrin *in = intrin_of_loop(s);
	if (in)
		return in->unit == INTRIN_WARPGROUP && in->kind == INTRIN_MMA;
	if (s->kind != STMT_FOR || s->nkids == 0)
		return false;
	for (int i = 0; i < s->nkids; i++)
		if (!wg_mma_only(s->kids[i]))
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
		buf_puts(o, "const int tir_r = 16 * ((threadIdx.x >> 5) & 3) + ((threadIdx.x & 31) >> 2), "
			 "tir_c = 2 * (threadIdx.x & 3);\n");
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
		fail(g, "cuda: %s: a warpgroup intrinsic of kind %d has no implementation",
		     in->name, (int)in->kind);
		break;
	}
}

static void cu_intrin(cu_gen *g, const tir_stmt *l, int depth)
{
	tir_lowered *L = g->c.L;
	tir_buf *o = g->c.out;
	const tir_intrin *in = intrin_of_loop(l);
	tir_intrin_match m;
	tir_error e;
	if (intrin_match(&L->arena, L->p, l, in, &m, &e)) {
		fail(g, "cuda: %s", e.msg);
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
 * tensorized loop of the program; false if there is none. */
static void scan_fragment(cu_gen *g, const tir_stmt *s, bool *any)
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
		scan_fragment(g, s->kids[i], any);
}

/* Prints the children of a loop (or a kernel's top statement list) with the
 * barriers they need; returns whether the list writes and reads shared
 * memory (for the WAR barrier at the end of an enclosing loop body). */
static void cu_list(cu_gen *g, tir_stmt *const *kids, int n, int depth,
		    bool loop_body)
{
	bool *written = xcalloc((size_t)g->nbufs + 1, 1);
	bool any_r = false, any_w = false;
	for (int k = 0; k < n; k++) {
		if (!lower_has_blocks(kids[k]))
			continue;
		clear_rw(g);
		shared_rw(g, kids[k]);
		bool need = false;
		for (int i = 0; i < g->nbufs; i++) {
			need |= g->rd[i] && written[i];
			any_r |= g->rd[i];
			any_w |= g->wr[i];
		}
		if (need) {
			sync(g, depth, "shared data written above is read below");
			memset(written, 0, (size_t)g->nbufs);
		}
		for (int i = 0; i < g->nbufs; i++)
			written[i] |= g->wr[i];
		cu_stmt(g, kids[k], depth);
	}
	if (loop_body && any_r && any_w)
		sync(g, depth, "the next iteration overwrites shared data read here");
	bool mma_only = g->wg_kernel;
	for (int k = 0; k < n && mma_only; k++)
		mma_only = wg_mma_only(kids[k]);
	if (kids == g->wg_overlap_list && g->wg_pending) {
		buf_indent(g->c.out, depth);
		buf_puts(g->c.out, "tir_wgmma_commit_wait1();\n");
		g->wg_pending = false;
		g->wg_inflight = true;
	} else if (!mma_only) {
		wg_flush(g, depth);
	}
	free(written);
}

/* The vector type that moves `bytes` bytes of dtype t at once. */
static const char *vec_type(tir_dtype t, int64_t bytes)
{
	bool f = t == TIR_F32;
	switch (bytes) {
	case 4: return f ? "float" : "int";
	case 8: return f ? "float2" : "int2";
	case 16: return f ? "float4" : "int4";
	default: return NULL;
	}
}

/* Whether the integer expression e is provably a multiple of n. */
static bool multiple_of(const tir_expr *e, int64_t n)
{
	switch (e->kind) {
	case E_INT:
		return e->ival % n == 0;
	case E_ADD: case E_SUB:
		return multiple_of(e->a, n) && multiple_of(e->b, n);
	case E_MUL:
		return multiple_of(e->a, n) || multiple_of(e->b, n);
	case E_FLOORMOD:
		return e->b->kind == E_INT && e->b->ival % n == 0 && multiple_of(e->a, n);
	default:
		return false;
	}
}

/* Whether x is y + v with y a multiple of n and v the lane variable (which
 * then ranges over [0, n)); sets *y. */
static bool lane_split(tir_lowered *L, const tir_expr *x, const tir_var *v,
		       int64_t n, tir_expr **y)
{
	tir_affine f;
	if (!affine_of(x, &f) || f.c0 % n)
		return false;
	bool seen = false;
	for (int i = 0; i < f.nterms; i++) {
		if (f.var[i] == v) {
			if (f.coef[i] != 1)
				return false;
			seen = true;
			f.coef[i] = 0;
		} else if (!f.var[i] && expr_uses_var(f.opaque[i], v)) {
			return false;
		} else if (f.coef[i] % n && !(f.opaque[i] && multiple_of(f.opaque[i], n))) {
			return false;
		}
	}
	if (!seen)
		return false;
	*y = mk_sub(&L->arena, (tir_expr *)x, mk_var(&L->arena, (tir_var *)v));
	*y = expr_simplify(&L->arena, *y, NULL);
	return true;
}

/* Rewrites floordiv(y + v, c) → floordiv(y, c) and floormod(y + v, c) →
 * floormod(y, c) + v where y is a multiple of n, v the lane variable in
 * [0, n) and n divides c: what a fused index split into lanes looks like. */
static tir_expr *split_lanes(tir_lowered *L, tir_expr *e, const tir_var *v, int64_t n)
{
	if (!e || e->kind == E_INT || e->kind == E_VAR || e->kind == E_FLOAT ||
	    e->kind == E_LOAD || e->kind == E_CALL || e->kind == E_CAST || e->kind == E_SELECT)
		return e;
	tir_arena *ar = &L->arena;
	if (e->kind == E_NOT)
		return mk_not(ar, split_lanes(L, e->a, v, n));
	/* innermost first: floormod(floordiv(y + v, 256), 3) */
	tir_expr *a = lower_simplify(L, split_lanes(L, e->a, v, n));
	tir_expr *b = split_lanes(L, e->b, v, n), *y;
	if ((e->kind == E_FLOORDIV || e->kind == E_FLOORMOD) && b->kind == E_INT &&
	    b->ival > 0 && b->ival % n == 0 && lane_split(L, a, v, n, &y)) {
		if (e->kind == E_FLOORDIV)
			return mk_floordiv(ar, y, b);
		return mk_add(ar, mk_floormod(ar, y, b), mk_var(ar, (tir_var *)v));
	}
	return mk_bin(ar, e->kind, a, b);
}

/* Whether condition c (bound, simplified, its floordivs and floormods
 * split by split_lanes) holds for all n lanes of v alike: each conjunct
 * either does not use v or compares a multiple of n plus the lane with a
 * bound that is a multiple of n, which the lane cannot cross:
 *   y + v < 0   iff  y < 0        y - v <= 0  iff  y <= 0
 * (y a multiple of n, v in [0, n)), as a fused loop's guard `i < extent`
 * reads when the extent is a whole number of vectors. */
static bool lane_uniform(tir_lowered *L, const tir_expr *c, const tir_var *v, int64_t n)
{
	if (!expr_uses_var(c, v))
		return true;
	if (c->kind == E_AND)
		return lane_uniform(L, c->a, v, n) && lane_uniform(L, c->b, v, n);
	if (c->kind != E_LT && c->kind != E_LE)
		return false;
	tir_expr *d = lower_simplify(L, mk_sub(&L->arena, c->a, c->b)), *y;
	tir_affine f;
	if (!affine_of(d, &f))
		return false;
	int64_t s = 0;
	for (int i = 0; i < f.nterms; i++)
		if (f.var[i] == v)
			s = f.coef[i];
	if ((c->kind == E_LT && s == 1) || (c->kind == E_LE && s == -1))
		return lane_split(L, s == 1 ? d : lower_simplify(L, mk_sub(&L->arena,
						  mk_int(&L->arena, 0), d)), v, n, &y);
	return false;
}

/* Expression e of block b over its loops, the n lanes of v split out of its
 * floordivs and floormods (split_lanes), simplified. */
static tir_expr *lanes_out(tir_lowered *L, const tir_block *b, const tir_expr *e,
			   const tir_var *v, int64_t n)
{
	tir_expr *x = lower_simplify(L, lower_bind(L, b, (tir_expr *)e));
	return lower_simplify(L, split_lanes(L, x, v, n));
}

/* Whether condition c of block b holds for all n lanes of v alike. */
static bool uniform_over_lanes(tir_lowered *L, const tir_block *b, const tir_expr *c,
			       const tir_var *v, int64_t n)
{
	return lane_uniform(L, lanes_out(L, b, c, v, n), v, n);
}

/* Whether offset `off` of block b is base + v with base a multiple of n,
 * v the vectorized loop's variable: n lanes, contiguous and aligned. */
static bool aligned_lanes(tir_lowered *L, const tir_block *b, tir_expr *off,
			  const tir_var *v, int64_t n)
{
	tir_expr *y;
	return lane_split(L, lanes_out(L, b, off, v, n), v, n, &y);
}

static bool is_zero(const tir_expr *e)
{
	return (e->kind == E_FLOAT && e->fval == 0.0) || (e->kind == E_INT && e->ival == 0) ||
	       (e->kind == E_CAST && is_zero(e->a));
}

/* Whether block b is a copy, store = load or store = select(c, load, 0)
 * (nested, at most 4 conditions): the load and the conditions. */
static const tir_expr *copy_of(const tir_block *b, const tir_expr **conds, int *nconds)
{
	const tir_expr *v = b->value;
	*nconds = 0;
	while (v->kind == E_SELECT && is_zero(v->b) && *nconds < 4) {
		conds[(*nconds)++] = v->c;
		v = v->a;
	}
	if (b->reduce != REDUCE_NONE || v->kind != E_LOAD || v->buf->dtype != b->store->dtype)
		return NULL;
	return v;
}

/* The conjunction of conds[0..n), printed into o. */
static void print_conds(cu_gen *g, tir_buf *o, const tir_expr *const *conds, int n)
{
	tir_buf *save = g->c.out;
	g->c.out = o;
	for (int i = 0; i < n; i++) {
		buf_puts(o, i ? " && (" : "(");
		cg_expr(&g->c, conds[i]);
		buf_puts(o, ")");
	}
	g->c.out = save;
}

/* Prints the store of a copy of `bytes` bytes at once: dst[doff] = conds ?
 * src[soff] : 0, as one cp.async in a copy stage of a pipelined loop when it
 * moves 4, 8 or 16 bytes from global to shared memory (vt NULL: one element,
 * only there), else as one load and store of vector type vt. */
static void copy_store(cu_gen *g, const tir_block *b, const tir_expr *ld,
		       const tir_expr *const *conds, int nconds, tir_expr *doff,
		       tir_expr *soff, const char *vt, int64_t bytes, int depth)
{
	tir_buf *o = g->c.out, cb = { 0 };
	const char *dst = g->c.bufname[b->store->id], *src = g->c.bufname[ld->buf->id];
	print_conds(g, &cb, conds, nconds);
	buf_indent(o, depth);
	if (g->async && b->store->scope == TIR_SCOPE_SHARED &&
	    ld->buf->scope == TIR_SCOPE_GLOBAL && (bytes == 4 || bytes == 8 || bytes == 16)) {
		buf_printf(o, "tir_cp_async%lld(%s + ", (long long)bytes, dst);
		cg_index(&g->c, b->store, doff);
		/* padding reads nothing: the address is the buffer's start */
		buf_printf(o, ", %s%s(const void *)(%s + ", nconds ? cb.s : "", nconds ? " ? " : "",
			   src);
		cg_index(&g->c, ld->buf, soff);
		buf_puts(o, ")");
		if (nconds)
			buf_printf(o, " : (const void *)%s, %s ? %lld : 0", src, cb.s, (long long)bytes);
		else
			buf_printf(o, ", %lld", (long long)bytes);
		buf_puts(o, ");\n");
	} else {
		buf_printf(o, "*(%s *)(%s + ", vt, dst);
		cg_index(&g->c, b->store, doff);
		buf_printf(o, ") = %s%s*(const %s *)(%s + ", nconds ? cb.s : "", nconds ? " ? " : "",
			   vt, src);
		cg_index(&g->c, ld->buf, soff);
		buf_puts(o, ")");
		if (nconds)
			buf_printf(o, " : %s{}", vt);
		buf_puts(o, ";\n");
	}
	free(cb.s);
}

/* Block b as one copy_store: its iterators, its predicate, the store. */
static void copy_block(cu_gen *g, const tir_block *b, const tir_expr *ld,
		       const tir_expr *const *conds, int nconds, tir_expr *doff,
		       tir_expr *soff, const char *vt, int64_t bytes, int depth)
{
	tir_buf *o = g->c.out;
	buf_indent(o, depth);
	buf_printf(o, "{ /* block %s */\n", b->name);
	cg_block_iters(&g->c, b, depth + 1);
	if (b->predicate) {
		buf_indent(o, depth + 1);
		buf_puts(o, "if (");
		cg_expr(&g->c, b->predicate);
		buf_puts(o, ")\n");
	}
	copy_store(g, b, ld, conds, nconds, doff, soff, vt, bytes,
		   depth + (b->predicate ? 2 : 1));
	buf_indent(o, depth);
	buf_puts(o, "}\n");
}

/* A vectorized loop whose body is one copy of n contiguous aligned
 * elements, each loaded or zero by conditions that hold for all lanes alike
 * (padding: select(c, load, 0), nested): prints one vector load/store, the
 * conditions evaluated at lane 0, and returns true. */
static bool cu_vector_copy(cu_gen *g, const tir_stmt *l, int depth)
{
	if (l->nkids != 1 || l->kids[0]->kind != STMT_BLOCK)
		return false;
	const tir_block *b = l->kids[0]->block;
	const tir_expr *conds[4];
	int nconds;
	const tir_expr *v = copy_of(b, conds, &nconds);
	if (!v)
		return false;
	tir_lowered *L = g->c.L;
	if (b->predicate && !uniform_over_lanes(L, b, b->predicate, l->var, l->extent))
		return false;
	int64_t bytes = l->extent * dtype_bytes(b->store->dtype);
	const char *vt = vec_type(b->store->dtype, bytes);
	if (!vt)
		return false;
	tir_expr *doff = lower_offset(L, b->store, b->store->ndim, b->store_idx);
	tir_expr *soff = lower_offset(L, v->buf, v->nidx, v->idx);
	if (!aligned_lanes(L, b, doff, l->var, l->extent) ||
	    !aligned_lanes(L, b, soff, l->var, l->extent))
		return false;
	for (int i = 0; i < nconds; i++)
		if (!uniform_over_lanes(L, b, conds[i], l->var, l->extent))
			return false;

	tir_buf *o = g->c.out;
	buf_indent(o, depth);
	buf_printf(o, "{ /* %s: vectorized, %lld lanes as one %s */\n", l->var->name,
		   (long long)l->extent, vt);
	buf_indent(o, depth + 1);
	buf_printf(o, "const %s ", g->c.d->idx_type);
	cg_var(o, l->var);
	buf_puts(o, " = 0;\n");
	copy_block(g, b, v, conds, nconds, doff, soff, vt, bytes, depth + 1);
	buf_indent(o, depth);
	buf_puts(o, "}\n");
	return true;
}

/* In a copy stage: a one-element copy of 4 or 8 bytes from global to shared
 * memory, as one cp.async.  Returns false for anything else. */
static bool cu_async_scalar(cu_gen *g, const tir_block *b, int depth)
{
	const tir_expr *conds[4];
	int nconds;
	const tir_expr *v = copy_of(b, conds, &nconds);
	int64_t bytes = dtype_bytes(b->store->dtype);
	if (!g->async || !v || (bytes != 4 && bytes != 8) ||
	    b->store->scope != TIR_SCOPE_SHARED || v->buf->scope != TIR_SCOPE_GLOBAL)
		return false;
	tir_lowered *L = g->c.L;
	tir_expr *doff = lower_offset(L, b->store, b->store->ndim, b->store_idx);
	tir_expr *soff = lower_offset(L, v->buf, v->nidx, v->idx);
	copy_block(g, b, v, conds, nconds, doff, soff, NULL, bytes, depth);
	return true;
}

/* ---- cross-thread reduction ----------------------------------------------------- */

static bool block_annotated(const tir_block *b, const char *key)
{
	for (int i = 0; i < b->nann; i++)
		if (b->ann[i].key && !strcmp(b->ann[i].key, key) && b->ann[i].value)
			return true;
	return false;
}

/* The block whose reduction the thread loop l spreads over threads: an
 * annotated block under l with a reduction iterator fed by l; NULL if none. */
static const tir_block *xthread_block(const tir_stmt *l)
{
	if (!is_thread_tag(l->tag))
		return NULL;
	tir_block *bs[64];
	int n = stmt_blocks((tir_stmt *)l, bs, 64);
	for (int i = 0; i < n && i < 64; i++) {
		if (!block_annotated(bs[i], "cross_thread_reduction"))
			continue;
		for (int k = 0; k < bs[i]->niters; k++)
			if (bs[i]->iters[k].kind == ITER_REDUCE &&
			    expr_uses_var(bs[i]->iters[k].binding, l->var))
				return bs[i];
	}
	return NULL;
}

/* Whether e uses the variable of l or of a loop under it. */
static bool uses_loops_under(const tir_expr *e, const tir_stmt *l)
{
	if (!e)
		return false;
	if (l->kind == STMT_FOR && expr_uses_var(e, l->var))
		return true;
	for (int i = 0; i < l->nkids; i++)
		if (uses_loops_under(e, l->kids[i]))
			return true;
	return false;
}

static bool has_thread_loop(const tir_stmt *s)
{
	for (int i = 0; i < s->nkids; i++)
		if ((s->kids[i]->kind == STMT_FOR && s->kids[i]->loop_kind == LOOP_THREAD) ||
		    has_thread_loop(s->kids[i]))
			return true;
	return false;
}

/* One instance of the cross-thread block: its value added to this thread's
 * partial sum. */
static void cu_xthread_step(cu_gen *g, const tir_block *b, int depth)
{
	tir_buf *o = g->c.out;
	buf_indent(o, depth);
	buf_printf(o, "{ /* block %s: this thread's partial sum */\n", b->name);
	cg_block_iters(&g->c, b, depth + 1);
	int d = depth + 1;
	buf_indent(o, d);
	if (b->predicate) {
		buf_puts(o, "if (");
		cg_expr(&g->c, b->predicate);
		buf_puts(o, ") {\n");
		d++;
		buf_indent(o, d);
	}
	buf_puts(o, "tir_xany = 1;\n");
	if (b->init) {
		int nred = 0;
		buf_indent(o, d);
		for (int i = 0; i < b->niters; i++) {
			if (b->iters[i].kind != ITER_REDUCE)
				continue;
			buf_puts(o, nred++ ? " && " : "if (");
			cg_var(o, b->iters[i].var);
			buf_puts(o, " == 0");
		}
		buf_puts(o, nred ? ")\n" : "\n");
		buf_indent(o, d + (nred ? 1 : 0));
		buf_puts(o, "tir_xfirst = 1;\n");
	}
	buf_indent(o, d);
	buf_puts(o, "tir_xacc = tir_xacc + (");
	cg_expr(&g->c, b->value);
	buf_puts(o, ");\n");
	if (b->predicate) {
		buf_indent(o, d - 1);
		buf_puts(o, "}\n");
	}
	buf_indent(o, depth);
	buf_puts(o, "}\n");
}

/* The thread loop l of a cross-thread reduction of block b (see the top). */
static void cu_xthread_loop(cu_gen *g, const tir_stmt *l, const tir_block *b, int depth)
{
	tir_lowered *L = g->c.L;
	tir_buf *o = g->c.out;
	tir_block *bs[2];
	int64_t x = l->extent;
	if (stmt_blocks((tir_stmt *)l, bs, 2) != 1 || has_thread_loop(l))
		fail(g, "cuda: cross-thread reduction of block \"%s\": loop \"%s\" must hold "
		     "that block only and no thread-bound loop", b->name, l->var->name);
	if (l->tag != TIR_THREAD_X || x != g->launch[TIR_THREAD_X] ||
	    g->launch[TIR_THREAD_Y] > 1 || g->launch[TIR_THREAD_Z] > 1 || g->guard)
		fail(g, "cuda: cross-thread reduction of block \"%s\": loop \"%s\" must be "
		     "bound to threadIdx.x over the whole launch (%lld threads), unguarded",
		     b->name, l->var->name, (long long)g->launch[TIR_THREAD_X]);
	if (b->reduce != REDUCE_SUM || b->store->scope == TIR_SCOPE_LOCAL)
		fail(g, "cuda: cross-thread reduction of block \"%s\": needs a sum into a "
		     "global or shared buffer", b->name);
	tir_expr *off = lower_offset(L, b->store, b->store->ndim, b->store_idx);
	off = lower_simplify(L, lower_bind(L, b, off));
	tir_expr *init = b->init ? lower_simplify(L, lower_bind(L, b, b->init)) : NULL;
	if (uses_loops_under(off, l) || uses_loops_under(init, l))
		fail(g, "cuda: cross-thread reduction of block \"%s\": its output element "
		     "depends on loop \"%s\" or a loop under it", b->name, l->var->name);
	if (g->failed)
		return;
	const char *vt = g->c.d->value[b->store->dtype];
	const char *name = g->c.bufname[b->store->id];
	const char *scvt = g->c.d->store_cvt[b->store->dtype];
	const char *lcvt = g->c.d->load_cvt[b->store->dtype];

	buf_indent(o, depth);
	buf_printf(o, "{ /* %s: threadIdx.x, cross-thread reduction of block %s */\n",
		   l->var->name, b->name);
	int d = depth + 1;
	buf_indent(o, d);
	buf_printf(o, "const %s ", g->c.d->idx_type);
	cg_var(o, l->var);
	buf_printf(o, " = (%s)threadIdx.x;\n", g->c.d->idx_type);
	buf_indent(o, d);
	buf_printf(o, "%s tir_xacc = (%s)0;\n", vt, vt);
	buf_indent(o, d);
	buf_puts(o, "int tir_xany = 0, tir_xfirst = 0;\n");
	cu_allocs(g, l, d);
	const tir_block *save = g->xblock;
	g->xblock = b;
	cu_list(g, l->kids, l->nkids, d, false);
	g->xblock = save;

	/* the sum over the threads, in thread 0 */
	buf_indent(o, d);
	buf_puts(o, "{ /* across the threads */\n");
	int e = d + 1;
	if (x % 32 == 0) {
		int64_t warps = x / 32;
		buf_indent(o, e);
		buf_puts(o, "for (int tir_o = 16; tir_o > 0; tir_o >>= 1)\n");
		buf_indent(o, e + 1);
		buf_puts(o, "tir_xacc += __shfl_down_sync(0xffffffffu, tir_xacc, tir_o);\n");
		if (warps > 1) {
			buf_indent(o, e);
			buf_printf(o, "__shared__ %s tir_xred[%lld];\n", vt, (long long)warps);
			buf_indent(o, e);
			buf_puts(o, "if ((threadIdx.x & 31) == 0)\n");
			buf_indent(o, e + 1);
			buf_puts(o, "tir_xred[threadIdx.x >> 5] = tir_xacc;\n");
			buf_indent(o, e);
			buf_puts(o, "__syncthreads();\n");
			buf_indent(o, e);
			buf_printf(o, "tir_xacc = threadIdx.x < %lld ? tir_xred[threadIdx.x] : (%s)0;\n",
				   (long long)warps, vt);
			buf_indent(o, e);
			buf_puts(o, "if (threadIdx.x < 32)\n");
			buf_indent(o, e + 1);
			buf_puts(o, "for (int tir_o = 16; tir_o > 0; tir_o >>= 1)\n");
			buf_indent(o, e + 2);
			buf_puts(o, "tir_xacc += __shfl_down_sync(0xffffffffu, tir_xacc, tir_o);\n");
		}
	} else {
		int64_t p2 = 1;
		while (p2 < x)
			p2 *= 2;
		buf_indent(o, e);
		buf_printf(o, "__shared__ %s tir_xred[%lld];\n", vt, (long long)x);
		buf_indent(o, e);
		buf_puts(o, "tir_xred[threadIdx.x] = tir_xacc;\n");
		buf_indent(o, e);
		buf_puts(o, "__syncthreads();\n");
		buf_indent(o, e);
		buf_printf(o, "for (int tir_s = %lld; tir_s > 0; tir_s >>= 1) {\n", (long long)(p2 / 2));
		buf_indent(o, e + 1);
		buf_printf(o, "if (threadIdx.x < tir_s && threadIdx.x + tir_s < %lld)\n", (long long)x);
		buf_indent(o, e + 2);
		buf_puts(o, "tir_xred[threadIdx.x] += tir_xred[threadIdx.x + tir_s];\n");
		buf_indent(o, e + 1);
		buf_puts(o, "__syncthreads();\n");
		buf_indent(o, e);
		buf_puts(o, "}\n");
		buf_indent(o, e);
		buf_puts(o, "tir_xacc = tir_xred[0];\n");
	}
	/* barriers too: tir_xred is free again after them */
	buf_indent(o, e);
	buf_puts(o, "tir_xany = __syncthreads_or(tir_xany);\n");
	buf_indent(o, e);
	buf_puts(o, "tir_xfirst = __syncthreads_or(tir_xfirst);\n");
	buf_indent(o, d);
	buf_puts(o, "}\n");

	/* the write, by one thread */
	buf_indent(o, d);
	buf_puts(o, "if (threadIdx.x == 0 && tir_xany) {\n");
	buf_indent(o, d + 1);
	buf_printf(o, "%s[", name);
	cg_index(&g->c, b->store, off);
	buf_puts(o, "] = ");
	if (scvt)
		buf_printf(o, "%s(", scvt);
	buf_puts(o, "(");
	if (init) {
		buf_puts(o, "tir_xfirst ? (");
		cg_expr(&g->c, init);
		buf_puts(o, ") : ");
	}
	if (lcvt)
		buf_printf(o, "%s(", lcvt);
	buf_printf(o, "%s[", name);
	cg_index(&g->c, b->store, off);
	buf_puts(o, "]");
	if (lcvt)
		buf_puts(o, ")");
	buf_puts(o, ") + tir_xacc");
	if (scvt)
		buf_puts(o, ")");
	buf_puts(o, ";\n");
	buf_indent(o, d);
	buf_puts(o, "}\n");
	buf_indent(o, depth);
	buf_puts(o, "}\n");
}

static void cu_hw_loop(cu_gen *g, const tir_stmt *l, int depth)
{
	tir_buf *o = g->c.out;
	const tir_block *xb = xthread_block(l);
	if (xb) {
		cu_xthread_loop(g, l, xb, depth);
		return;
	}
	bool guard = l->extent < g->launch[l->tag];
	buf_indent(o, depth);
	buf_printf(o, "{ /* %s: %s */\n", l->var->name, tag_names[l->tag]);
	buf_indent(o, depth + 1);
	buf_printf(o, "const %s ", g->c.d->idx_type);
	cg_var(o, l->var);
	buf_printf(o, " = (%s)%s;\n", g->c.d->idx_type, hw_index[l->tag]);
	int d = depth + 1;
	if (guard) {
		buf_indent(o, d);
		buf_puts(o, "if (");
		cg_var(o, l->var);
		buf_printf(o, " < %lld) {\n", (long long)l->extent);
		d++;
		g->guard++;
	}
	cu_allocs(g, l, d);
	cu_list(g, l->kids, l->nkids, d, false);
	if (guard) {
		g->guard--;
		buf_indent(o, d - 1);
		buf_puts(o, "}\n");
	}
	buf_indent(o, depth);
	buf_puts(o, "}\n");
}

/* Body copies of s fully unrolled: extent times the sum over its children
 * (a tensorized nest is one call). */
static int64_t unrolled_size(const tir_stmt *s)
{
	if (s->kind == STMT_BLOCK || intrin_of_loop(s))
		return 1;
	int64_t n = 0;
	for (int i = 0; i < s->nkids; i++) {
		n += unrolled_size(s->kids[i]);
		if (n > ((int64_t)1 << 40))
			break;
	}
	if (s->kind == STMT_FOR && n > 0 && s->extent > ((int64_t)1 << 40) / n)
		return (int64_t)1 << 40;
	return s->kind == STMT_FOR ? s->extent * n : n;
}

/* The pointers to this iteration's copy of the ring buffers of pipelined
 * loop l: copy (l's variable) % S. */
static void ring_ptrs(cu_gen *g, const tir_stmt *l, int depth)
{
	tir_lowered *L = g->c.L;
	tir_buf *o = g->c.out;
	for (int i = 0; i < L->p->nbufs; i++) {
		const tir_alloc *a = &L->alloc[i];
		if (!a->used || a->ring < 2 || a->lca != l)
			continue;
		const char *st = g->c.d->storage[a->buf->dtype];
		buf_indent(o, depth);
		buf_printf(o, "%s *const %s = %s_ring + (", st, g->c.bufname[i], g->c.bufname[i]);
		cg_var(o, l->var);
		buf_printf(o, " %% %d) * %lld;\n", a->ring, (long long)a->slot);
	}
}

/* The copy stages of pipelined loop l for iteration `it` + `ahead` (`it`: a
 * C variable counting iterations), if that is below the extent, then the
 * commit of their cp.async group (empty when none). */
static void pipe_copies(cu_gen *g, const tir_stmt *l, const bool *stage, const char *it,
			int ahead, int depth)
{
	tir_buf *o = g->c.out;
	buf_indent(o, depth);
	buf_printf(o, "if (%s + %d < %lld) {\n", it, ahead, (long long)l->extent);
	buf_indent(o, depth + 1);
	buf_printf(o, "const %s ", g->c.d->idx_type);
	cg_var(o, l->var);
	buf_printf(o, " = %s + %d;\n", it, ahead);
	ring_ptrs(g, l, depth + 1);
	g->async = true;
	for (int k = 0; k < l->nkids; k++)
		if (stage[k])
			cu_stmt(g, l->kids[k], depth + 1);
	g->async = false;
	buf_indent(o, depth);
	buf_puts(o, "}\n");
	buf_indent(o, depth);
	buf_puts(o, "tir_cp_async_commit();\n");
}

/* A software-pipelined loop of S stages (lower_pipeline_stages): its copy
 * stages run S - 1 iterations ahead of the rest, into the next copy of their
 * ring buffers, by cp.async.  The prologue starts iterations 0..S-2; each
 * iteration k starts k + S - 1, waits until at most S - 1 groups are in
 * flight (k's has landed), and the barrier makes every thread's copies of k
 * visible; the barrier at the end keeps iteration k + 1 from overwriting the
 * copy that k read. */
static void cu_pipelined_loop(cu_gen *g, const tir_stmt *l, int S, int depth)
{
	tir_buf *o = g->c.out;
	char pro[96], it[96];
	bool *stage = xcalloc((size_t)l->nkids + 1, sizeof *stage);
	for (int k = 0; k < l->nkids; k++)
		stage[k] = lower_copy_stage(g->c.L, l, l->kids[k]);
	tir_buf nb = { 0 };
	cg_var(&nb, l->var);
	snprintf(pro, sizeof pro, "tir_pro_%s", nb.s);
	snprintf(it, sizeof it, "tir_it_%s", nb.s);
	free(nb.s);
	buf_indent(o, depth);
	buf_printf(o, "/* %s: serial, software pipeline of %d stages (cp.async) */\n",
		   l->var->name, S);
	buf_indent(o, depth);
	buf_puts(o, "#pragma unroll\n");
	buf_indent(o, depth);
	buf_printf(o, "for (%s %s = 0; %s < %d; ++%s) {\n", g->c.d->idx_type, pro, pro, S - 1, pro);
	pipe_copies(g, l, stage, pro, 0, depth + 1);
	buf_indent(o, depth);
	buf_puts(o, "}\n");
	buf_indent(o, depth);
	buf_printf(o, "for (%s %s = 0; %s < %lld; ++%s) {\n", g->c.d->idx_type, it, it,
		   (long long)l->extent, it);
	pipe_copies(g, l, stage, it, S - 1, depth + 1);
	buf_indent(o, depth + 1);
	buf_printf(o, "TIR_CP_ASYNC_WAIT(%d);\n", S - 1);
	sync(g, depth + 1, "this iteration's copies have landed");
	buf_indent(o, depth + 1);
	buf_puts(o, "{\n");
	buf_indent(o, depth + 2);
	buf_printf(o, "const %s ", g->c.d->idx_type);
	cg_var(o, l->var);
	buf_printf(o, " = %s;\n", it);
	ring_ptrs(g, l, depth + 2);
	cu_allocs(g, l, depth + 2);
	tir_stmt **rest = xcalloc((size_t)l->nkids + 1, sizeof *rest);
	int nrest = 0;
	for (int k = 0; k < l->nkids; k++)
		if (!stage[k])
			rest[nrest++] = l->kids[k];
	/* warpgroup MMAs: this iteration's group stays in flight into the
	 * next, which waits for it only when it has issued its own (its
	 * copies go to a ring copy no MMA still reads: lower_holds_wgmma) */
	tir_stmt *const *save = g->wg_overlap_list;
	if (lower_holds_wgmma(l))
		g->wg_overlap_list = rest;
	cu_list(g, rest, nrest, depth + 2, false);
	g->wg_overlap_list = save;
	free(rest);
	free(stage);
	buf_indent(o, depth + 1);
	buf_puts(o, "}\n");
	sync(g, depth + 1, "the next iteration's copies overwrite a ring copy read here");
	buf_indent(o, depth);
	buf_puts(o, "}\n");
	wg_drain(g, depth);
}

/* The boxes of TMA copy c (one tensor map, g->tma[m]): its destination's
 * 128-byte atom columns (the swizzle's span; the map's inner box), and the
 * outermost dimension of more than one element cut into `*chunks` boxes of
 * at most 256 (the copy engine's limit), every other dimension whole.
 * *box gets the map's box, innermost first; *cut the cut dimension (-1:
 * none).  0, or -1 when it cannot be cut so. */
static int tma_boxes(const lower_tma_copy *c, int *box, int *atoms, int *chunks, int *cut)
{
	const int n = c->src->ndim, eb = dtype_bytes(c->src->dtype);
	if ((c->ext[n - 1] * eb) % 128)
		return -1;
	*atoms = (int)(c->ext[n - 1] * eb / 128);
	box[0] = 128 / eb;
	*cut = -1;
	*chunks = 1;
	for (int d = 0; d < n - 1; d++) {
		int64_t e = c->ext[d];
		if (*cut < 0 && e > 1) {
			*cut = d;
			int64_t k = (e + 255) / 256;
			while (e % k)
				k++;
			*chunks = (int)k;
			e /= k;
		}
		if (e > 256)
			return -1;
		box[n - 1 - d] = (int)e;
	}
	return 0;
}

/* The pipelined loop of the kernel's TMA copies (g->tma_loop), S stages:
 * the producer warpgroup's first thread issues, for iteration k, once
 * consumers freed ring slot k % S (iteration k - S released it; the
 * empty mbarrier's phase), the slot's byte count on its full mbarrier and
 * every box of every copy stage, then the producer leaves the kernel; the
 * consumers wait for the full mbarrier's phase of k, run the rest of the
 * body and arrive on the slot's empty mbarrier once they are done with it
 * (with warpgroup MMAs left in flight into the next iteration: slot k - 1
 * after iteration k's MMAs were issued and k - 1's waited for). */
static void cu_tma_loop(cu_gen *g, const tir_stmt *l, int S, int depth)
{
	tir_lowered *L = g->c.L;
	tir_buf *o = g->c.out;
	char it[96];
	tir_buf nb = { 0 };
	cg_var(&nb, l->var);
	snprintf(it, sizeof it, "tir_it_%s", nb.s);
	free(nb.s);
	int64_t bytes = 0;
	for (int c = 0; c < g->ntma; c++)
		bytes += L->alloc[g->tma[c].dst->id].elems * dtype_bytes(g->tma[c].dst->dtype);
	const long long ext = (long long)l->extent;
	const char *idx = g->c.d->idx_type;
	buf_indent(o, depth);
	buf_printf(o, "/* %s: serial, software pipeline of %d stages (TMA by the producer "
		   "warpgroup, threadIdx.y == %lld) */\n", l->var->name, S, (long long)g->tma_wgs);
	buf_indent(o, depth);
	buf_printf(o, "if (threadIdx.y == %lld) {\n", (long long)g->tma_wgs);
	buf_indent(o, depth + 1);
	buf_puts(o, "if (threadIdx.x == 0) {\n");
	buf_indent(o, depth + 2);
	buf_printf(o, "for (%s %s = 0; %s < %lld; ++%s) {\n", idx, it, it, ext, it);
	int d = depth + 3;
	buf_indent(o, d);
	buf_printf(o, "const %s ", idx);
	cg_var(o, l->var);
	buf_printf(o, " = %s;\n", it);
	ring_ptrs(g, l, d);
	buf_indent(o, d);
	buf_printf(o, "if (%s >= %d)\n", it, S);
	buf_indent(o, d + 1);
	buf_printf(o, "tir_mbar_wait(tir_bar + %d + %s %% %d, ((%s / %d) + 1) & 1);\n", S, it, S,
		   it, S);
	buf_indent(o, d);
	buf_printf(o, "tir_mbar_expect(tir_bar + %s %% %d, %lldu);\n", it, S, (long long)bytes);
	for (int c = 0; c < g->ntma; c++) {
		const lower_tma_copy *x = &g->tma[c];
		const int n = x->src->ndim;
		int box[TIR_TMAP_RANK], atoms, chunks, cut;
		tma_boxes(x, box, &atoms, &chunks, &cut);
		const tir_alloc *a = &L->alloc[x->dst->id];
		int64_t rows = a->elems / x->ext[n - 1];
		for (int at = 0; at < atoms; at++)
			for (int q = 0; q < chunks; q++) {
				buf_indent(o, d);
				buf_printf(o, "tir_tma_load%d((unsigned char *)%s + %lld, &tir_tmap%d",
					   n, g->c.bufname[x->dst->id],
					   (long long)(at * rows * 128 + q * (rows / chunks) * 128), c);
				for (int k = n - 1; k >= 0; k--) {
					buf_puts(o, ", (int)(");
					cg_expr(&g->c, x->origin[k]);
					if (k == n - 1 && at)
						buf_printf(o, " + %d", at * box[0]);
					if (k == cut && q)
						buf_printf(o, " + %lld", (long long)q * box[n - 1 - k]);
					buf_puts(o, ")");
				}
				buf_printf(o, ", tir_bar + %s %% %d);\n", it, S);
			}
	}
	buf_indent(o, depth + 2);
	buf_puts(o, "}\n");
	buf_indent(o, depth + 1);
	buf_puts(o, "}\n");
	buf_indent(o, depth + 1);
	buf_puts(o, "return; /* the producer's work is done */\n");
	buf_indent(o, depth);
	buf_puts(o, "}\n");
	g->tma_consumers = true;

	buf_indent(o, depth);
	buf_printf(o, "for (%s %s = 0; %s < %lld; ++%s) {\n", idx, it, it, ext, it);
	buf_indent(o, depth + 1);
	buf_puts(o, "{\n");
	d = depth + 2;
	buf_indent(o, d);
	buf_printf(o, "const %s ", idx);
	cg_var(o, l->var);
	buf_printf(o, " = %s;\n", it);
	ring_ptrs(g, l, d);
	cu_allocs(g, l, d);
	buf_indent(o, d);
	buf_printf(o, "tir_mbar_wait(tir_bar + %s %% %d, (%s / %d) & 1);\n", it, S, it, S);
	tir_stmt **rest = xcalloc((size_t)l->nkids + 1, sizeof *rest);
	int nrest = 0;
	for (int k = 0; k < l->nkids; k++)
		if (!lower_copy_stage(L, l, l->kids[k]))
			rest[nrest++] = l->kids[k];
	bool overlap = lower_holds_wgmma(l);
	tir_stmt *const *save = g->wg_overlap_list;
	if (overlap)
		g->wg_overlap_list = rest;
	cu_list(g, rest, nrest, d, false);
	g->wg_overlap_list = save;
	free(rest);
	buf_indent(o, depth + 1);
	buf_puts(o, "}\n");
	buf_indent(o, depth + 1);
	if (overlap) {
		buf_printf(o, "if (%s > 0) /* the previous iteration's MMAs are done */\n", it);
		buf_indent(o, depth + 2);
		buf_printf(o, "tir_mbar_arrive(tir_bar + %d + (%s - 1) %% %d);\n", S, it, S);
	} else {
		buf_printf(o, "tir_mbar_arrive(tir_bar + %d + %s %% %d);\n", S, it, S);
	}
	buf_indent(o, depth);
	buf_puts(o, "}\n");
	wg_drain(g, depth);
}

/* Whether the non-hardware loop l gets a bare `#pragma unroll` under an
 * "auto_unroll_max_step" of auto_unroll: unroll, vectorized (scalar) and
 * vthread loops, and a loop holding one block whose body copies, fully
 * unrolled, are at most auto_unroll. */
static bool unrolls_fully(const tir_stmt *l, int64_t auto_unroll)
{
	return l->loop_kind == LOOP_UNROLLED || l->loop_kind == LOOP_VECTORIZED ||
	       l->loop_kind == LOOP_THREAD ||  /* vthread */
	       (auto_unroll > 0 && stmt_blocks((tir_stmt *)l, NULL, 0) == 1 &&
		unrolled_size(l) <= auto_unroll);
}

static int64_t sat_mul(int64_t a, int64_t b)
{
	const int64_t cap = (int64_t)1 << 40;
	return a > 0 && b > cap / a ? cap : a * b;
}

/* cuda_unrolled_blocks below s, under an auto_unroll_max_step of auto_unroll. */
static int64_t count_unrolled(const tir_stmt *s, int64_t auto_unroll)
{
	if (s->kind == STMT_BLOCK || (s->kind == STMT_FOR && intrin_of_loop(s)))
		return 1;
	if (s->kind == STMT_FOR)
		auto_unroll = lower_ann(s, "auto_unroll_max_step", auto_unroll);
	int64_t n = 0;
	for (int i = 0; i < s->nkids; i++) {
		n += count_unrolled(s->kids[i], auto_unroll);
		if (n > ((int64_t)1 << 40))
			n = (int64_t)1 << 40;
	}
	if (s->kind != STMT_FOR || is_hw(s))
		return n;
	int64_t unroll = lower_ann(s, "unroll", 0);
	if (unroll > 0)
		return sat_mul(n, unroll < s->extent ? unroll : s->extent);
	return unrolls_fully(s, auto_unroll) ? sat_mul(n, s->extent) : n;
}

int64_t cuda_unrolled_blocks(const tir_stmt *s)
{
	return count_unrolled(s, 0);
}

static void cu_loop(cu_gen *g, const tir_stmt *l, int depth)
{
	tir_buf *o = g->c.out;
	if (is_hw(l)) {
		cu_hw_loop(g, l, depth);
		return;
	}
	if (l->loop_kind == LOOP_VECTORIZED && cu_vector_copy(g, l, depth))
		return;
	int S = lower_pipeline_stages(g->c.L, l);
	if (S > 1 && lower_tma_loop(g->c.L, l)) {
		if (l == g->tma_loop)
			cu_tma_loop(g, l, S, depth);
		else
			fail(g, "cuda: loop \"%s\" is a second TMA pipeline in its kernel; one "
			     "producer warpgroup serves one", l->var->name);
		return;
	}
	if (S > 1) {
		cu_pipelined_loop(g, l, S, depth);
		return;
	}
	int64_t unroll = lower_ann(l, "unroll", 0);
	bool unrolled = unrolls_fully(l, g->auto_unroll);
	buf_indent(o, depth);
	buf_printf(o, "/* %s: %s */\n", l->var->name,
		   l->loop_kind == LOOP_THREAD ? tag_names[l->tag] :
		   l->loop_kind == LOOP_VECTORIZED ? "vectorized (scalar)" :
		   l->loop_kind == LOOP_UNROLLED ? "unroll" :
		   l->loop_kind == LOOP_PARALLEL ? "parallel (serial on CUDA)" : "serial");
	if (unroll > 0) {
		buf_indent(o, depth);
		buf_printf(o, "#pragma unroll %lld\n", (long long)unroll);
	} else if (unrolled) {
		buf_indent(o, depth);
		buf_puts(o, "#pragma unroll\n");
	}
	buf_indent(o, depth);
	buf_printf(o, "for (%s ", g->c.d->idx_type);
	cg_var(o, l->var);
	buf_puts(o, " = 0; ");
	cg_var(o, l->var);
	buf_printf(o, " < %lld; ++", (long long)l->extent);
	cg_var(o, l->var);
	buf_puts(o, ") {\n");
	cu_allocs(g, l, depth + 1);
	cu_list(g, l->kids, l->nkids, depth + 1, true);
	buf_indent(o, depth);
	buf_puts(o, "}\n");
}

static void cu_stmt(cu_gen *g, const tir_stmt *s, int depth)
{
	if (!lower_has_blocks(s))
		return;
	bool mma_only = g->wg_kernel && wg_mma_only(s);
	if (!mma_only) {
		wg_flush(g, depth);
	} else if (!g->wg_pending) {
		/* a run of warpgroup MMAs starts: the accumulators were last
		 * touched by other instructions (FILL) or waited for */
		buf_indent(g->c.out, depth);
		buf_puts(g->c.out, "tir_wgmma_fence();\n");
		g->wg_pending = true;
	}
	if (s->kind == STMT_FOR && intrin_of_loop(s)) {
		cu_intrin(g, s, depth);
	} else if (s->kind == STMT_FOR) {
		int64_t save = g->auto_unroll;
		g->auto_unroll = lower_ann(s, "auto_unroll_max_step", save);
		cu_loop(g, s, depth);
		g->auto_unroll = save;
	} else if (s->kind == STMT_BLOCK && s->block == g->xblock)
		cu_xthread_step(g, s->block, depth);
	else if (s->kind == STMT_BLOCK && !cu_async_scalar(g, s->block, depth))
		cg_block(&g->c, s->block, depth);
	else
		cu_list(g, s->kids, s->nkids, depth, false);
}

/* ---- kernels -------------------------------------------------------------------- */

struct owner_pass {
	tir_lowered *L;
	int *owner;                 /* by buffer id: kernel, -1 none, -2 several */
	int kernel;
};

static void own_buf(struct owner_pass *op, const tir_buffer *b)
{
	int *o = &op->owner[b->id];
	if (*o == -1)
		*o = op->kernel;
	else if (*o != op->kernel)
		*o = -2;
}

static void own_load(tir_expr *load, void *ctx)
{
	own_buf(ctx, load->buf);
}

static void own_block(tir_block *b, void *ctx)
{
	own_buf(ctx, b->store);
	expr_visit_loads(b->value, own_load, ctx);
	expr_visit_loads(b->init, own_load, ctx);
	expr_visit_loads(b->predicate, own_load, ctx);
}

static const char *first_block_name(tir_stmt *s)
{
	tir_block *b[1];
	return stmt_blocks(s, b, 1) ? b[0]->name : "stmt";
}

static void store_scope(tir_block *b, void *ctx)
{
	tir_scope sc = b->store->scope;
	if (sc == TIR_SCOPE_SHARED || sc == TIR_SCOPE_GLOBAL)
		*(const tir_block **)ctx = b;
}

/* Sets up the kernel's TMA pipeline l (kernel statement s) for launch ln:
 * its copies (lower_tma_stage) and their tensor maps, checking what the
 * producer warpgroup's early exit needs: warpgroups along threadIdx.y
 * (threadIdx.x exactly 128, no threadIdx.z), only thread- and block-bound
 * loops around l and no guard on them, nothing stored to shared or
 * global memory before l (the producer runs that part too), boxes the
 * copy engine takes, swizzled destinations and origins independent of the
 * thread indices. */
static void tma_prepare(cu_gen *g, const tir_stmt *s, const tir_stmt *l, tir_launch *ln)
{
	tir_lowered *L = g->c.L;
	g->tma_loop = l;
	g->ntma = 0;
	if (g->launch[TIR_THREAD_X] != 128 || g->launch[TIR_THREAD_Z] > 1) {
		fail(g, "cuda: a TMA pipeline needs warpgroups: threadIdx.x of 128 (not %lld) "
		     "and no threadIdx.z", (long long)g->launch[TIR_THREAD_X]);
		return;
	}
	g->tma_wgs = g->launch[TIR_THREAD_Y] > 0 ? g->launch[TIR_THREAD_Y] : 1;
	for (const tir_stmt *c = l; c != s; c = c->parent) {
		const tir_stmt *up = c->parent;
		if (up->kind == STMT_FOR && (!is_hw(up) || up->extent < g->launch[up->tag])) {
			fail(g, "cuda: TMA pipeline \"%s\" is under loop \"%s\", not only under "
			     "whole thread and block indices", l->var->name, up->var->name);
			return;
		}
		for (int k = 0; k < up->nkids && up->kids[k] != c; k++) {
			const tir_block *bad = NULL;
			stmt_visit_blocks(up->kids[k], store_scope, &bad);
			if (bad) {
				fail(g, "cuda: block \"%s\" stores to %s memory before TMA pipeline "
				     "\"%s\", which the producer warpgroup skips", bad->name,
				     scope_name(bad->store->scope), l->var->name);
				return;
			}
		}
	}
	for (int k = 0; k < l->nkids; k++) {
		if (!lower_copy_stage(L, l, l->kids[k]))
			continue;
		if (g->ntma == TIR_MAX_TMAPS) {
			fail(g, "cuda: TMA pipeline \"%s\" has more than %d copy stages",
			     l->var->name, TIR_MAX_TMAPS);
			return;
		}
		lower_tma_copy *x = &g->tma[g->ntma];
		tir_error e;
		if (lower_tma_stage(L, l, l->kids[k], x, &e)) {
			fail(g, "cuda: %s", e.msg);
			return;
		}
		const tir_buffer *src = x->src;
		const int n = src->ndim, eb = dtype_bytes(src->dtype);
		const tir_alloc *as = &L->alloc[src->id];
		int box[TIR_TMAP_RANK], atoms, chunks, cut;
		if (!g->swz[x->dst->id] || tma_boxes(x, box, &atoms, &chunks, &cut)) {
			fail(g, "cuda: TMA copy into \"%s\": the destination must be a swizzled "
			     "wgmma operand of rows of 128 bytes with boxes of at most 256 "
			     "elements a dimension", x->dst->name);
			return;
		}
		for (const tir_stmt *c = l; c != s; c = c->parent) {
			const tir_stmt *up = c->parent;
			for (int d = 0; d < n && up->kind == STMT_FOR; d++)
				if (is_thread_tag(up->tag) && expr_uses_var(x->origin[d], up->var)) {
					fail(g, "cuda: the box of \"%s\" depends on %s", x->dst->name,
					     tag_names[up->tag]);
					return;
				}
		}
		tir_tmap_info *m = &ln->tmaps[g->ntma];
		memset(m, 0, sizeof *m);
		m->arg = -1;
		for (int i = 0; i < g->nargs; i++)
			if (g->argbuf[i] == src->id)
				m->arg = i;
		m->elem_bytes = eb;
		m->rank = n;
		if (m->arg < 0) {
			fail(g, "cuda: TMA source \"%s\" is not a kernel argument", src->name);
			return;
		}
		for (int d = 0; d < n; d++) {     /* strides checked by lower_tma_stage */
			m->dims[d] = as->extent[n - 1 - d];
			m->strides[d] = as->stride[n - 1 - d] * eb;
			m->box[d] = box[d];
		}
		g->tma_ranks |= 1u << n;
		g->ntma++;
	}
	ln->ntmaps = g->ntma;
}

/* One kernel for top-level statement s; fills the launch. */
static void cu_kernel(cu_gen *g, tir_stmt *s, int k, const int *owner,
		      tir_code *code, tir_launch *ln)
{
	tir_lowered *L = g->c.L;
	const tir_program *p = L->p;
	tir_buf *o = g->c.out;
	memset(g->launch, 0, sizeof g->launch);
	scan_launch(g, s, NULL);
	char id[40];
	lower_ident(id, sizeof id, first_block_name(s));
	snprintf(ln->name, sizeof ln->name, "%s_kernel%d", id, k);
	int threads = 1;
	for (int d = 0; d < 3; d++) {
		int64_t gd = g->launch[TIR_BLOCK_X + d], bd = g->launch[TIR_THREAD_X + d];
		ln->grid[d] = gd > 0 ? (int)gd : 1;
		ln->block[d] = bd > 0 ? (int)bd : 1;
	}
	/* a TMA pipeline's producer: one warpgroup more along threadIdx.y */
	const tir_stmt *tl = lower_find_tma(L, s);
	int tma_stages = tl ? lower_pipeline_stages(L, tl) : 0;
	g->tma_loop = NULL;
	g->tma_consumers = false;
	ln->ntmaps = 0;
	if (tl) {
		tma_prepare(g, s, tl, ln);
		ln->block[1] = (int)g->tma_wgs + 1;
	}
	for (int d = 0; d < 3; d++)
		threads *= ln->block[d];
	/* shared buffers of this kernel, carved from dynamic shared memory;
	 * wgmma's swizzled operands at 1 KB boundaries of a base rounded up to
	 * one (the 8-row atoms of the swizzle are 1 KB; 1 KB more is asked) */
	int64_t smem = 0;
	tir_buf carve = { 0 };
	bool swizzled = false;
	g->wg_kernel = lower_holds_wgmma(s);
	g->wg_pending = g->wg_inflight = false;
	for (int i = 0; i < p->nbufs; i++)
		swizzled |= L->alloc[i].used && L->alloc[i].compact && owner[i] == k && g->swz[i];
	if (swizzled) {
		buf_indent(&carve, 1);
		buf_puts(&carve, "unsigned char *const tir_smem_1k = tir_smem + "
			 "((1024 - (tir_smem_addr(tir_smem) & 1023)) & 1023);\n");
	}
	for (int i = 0; i < p->nbufs; i++) {
		const tir_alloc *a = &L->alloc[i];
		if (!a->used || !a->compact || owner[i] != k)
			continue;
		if (a->buf->scope == TIR_SCOPE_SHARED) {
			if (g->swz[i])
				smem = (smem + 1023) / 1024 * 1024;
			buf_indent(&carve, 1);
			buf_printf(&carve, "%s *const %s%s = (%s *)(%s + %lld); /* %lld bytes",
				   g->c.d->storage[a->buf->dtype], g->c.bufname[i],
				   a->ring > 1 ? "_ring" : "",
				   g->c.d->storage[a->buf->dtype], swizzled ? "tir_smem_1k" : "tir_smem",
				   (long long)smem,
				   (long long)a->bytes);
			if (a->ring > 1)
				buf_printf(&carve, ": %d copies", a->ring);
			buf_puts(&carve, " */\n");
			smem += (a->bytes + 127) / 128 * 128;   /* WMMA tiles: 32-byte aligned */
		}
	}
	if (tl) {
		/* the full and empty mbarriers of each ring slot */
		smem = (smem + 7) / 8 * 8;
		buf_indent(&carve, 1);
		buf_printf(&carve, "unsigned long long *const tir_bar = (unsigned long long *)(%s + "
			   "%lld); /* mbarriers: %d full, %d empty */\n",
			   swizzled ? "tir_smem_1k" : "tir_smem", (long long)smem, tma_stages,
			   tma_stages);
		smem += 16 * tma_stages;
	}
	ln->shared_bytes = (int)smem + (swizzled ? 1024 : 0);

	buf_printf(o, "extern \"C\" __global__ void __launch_bounds__(%d)\n%s(", threads,
		   ln->name);
	for (int i = 0; i < code->nargs; i++) {
		int bid = g->argbuf[i];
		const tir_buffer *b = p->bufs[bid];
		bool ro = b->role == BUF_INPUT;
		buf_printf(o, "%s%s%s *__restrict__ %s", i ? ",\n    " : "",
			   ro ? "const " : "", g->c.d->storage[b->dtype], g->c.bufname[bid]);
	}
	for (int i = 0; i < ln->ntmaps; i++)
		buf_printf(o, ",\n    const __grid_constant__ tir_tmap tir_tmap%d", i);
	buf_puts(o, ")\n{\n");
	if (carve.s)
		buf_puts(o, carve.s);
	free(carve.s);
	if (tl) {
		buf_printf(o, "    if (threadIdx.x == 0 && threadIdx.y == 0) {\n"
			   "        for (int tir_q = 0; tir_q < %d; ++tir_q) {\n"
			   "            tir_mbar_init(tir_bar + tir_q, 1);\n"
			   "            tir_mbar_init(tir_bar + %d + tir_q, %lld);\n"
			   "        }\n"
			   "        tir_mbar_init_fence();\n"
			   "    }\n"
			   "    __syncthreads();\n", tma_stages, tma_stages,
			   (long long)g->tma_wgs * 128);
	}
	/* local buffers allocated at top level and only used here */
	for (int i = 0; i < p->nbufs; i++) {
		const tir_alloc *a = &L->alloc[i];
		if (a->used && a->compact && !a->lca && owner[i] == k &&
		    a->buf->scope != TIR_SCOPE_SHARED)
			cu_local(g, a, 1);
	}
	cu_stmt(g, s, 1);
	wg_drain(g, 1);
	buf_puts(o, "}\n\n");
}

static tir_code *cuda_generate(const tir_program *p, const tir_target *t,
			       tir_error *err)
{
	tir_lowered L;
	if (lower_program(p, t, &L, err))
		return NULL;
	tir_buf o = { 0 };
	cu_gen g = { .c = { &L, &cuda_dialect_int, &o, NULL }, .err = err,
		     .nbufs = p->nbufs };
	cg_name_buffers(&g.c);
	g.rd = xcalloc((size_t)p->nbufs + 1, 1);
	g.wr = xcalloc((size_t)p->nbufs + 1, 1);
	int *owner = xcalloc((size_t)p->nbufs + 1, sizeof *owner);
	tir_code *code = xcalloc(1, sizeof *code);

	/* 32-bit indices unless some buffer needs more */
	bool big = false;
	for (int i = 0; i < p->nbufs; i++)
		big |= L.alloc[i].elems >= ((int64_t)1 << 31);
	cg_dialect dl = cuda_dialect_int;
	if (big)
		dl.idx_type = "long long";
	g.c.d = &dl;

	/* args: params, then the global temps as scratch */
	int nscratch = 0;
	for (int i = p->nparams; i < p->nbufs; i++)
		nscratch += L.alloc[i].used && !L.alloc[i].compact;
	code->nargs = p->nparams + nscratch;
	code->args = xcalloc((size_t)code->nargs + 1, sizeof *code->args);
	g.argbuf = xcalloc((size_t)code->nargs + 1, sizeof *g.argbuf);
	for (int i = 0, n = 0; i < p->nbufs; i++) {
		const tir_buffer *b = p->bufs[i];
		bool scratch = i >= p->nparams && L.alloc[i].used && !L.alloc[i].compact;
		if (i >= p->nparams && !scratch)
			continue;
		g.argbuf[n] = i;
		tir_arg_info *ai = &code->args[n++];
		snprintf(ai->name, sizeof ai->name, "%s", g.c.bufname[i]);
		ai->dtype = b->dtype;
		ai->elem_bytes = dtype_bytes(b->dtype);
		ai->elems = L.alloc[i].elems;
		ai->is_output = b->role == BUF_OUTPUT;
		ai->is_scratch = scratch;
	}

	/* kernels: the top-level statements that hold blocks */
	int nk = 0;
	for (int i = 0; i < p->nbufs; i++)
		owner[i] = -1;
	struct owner_pass op = { &L, owner, 0 };
	for (int i = 0; i < p->root->nkids; i++) {
		if (!lower_has_blocks(p->root->kids[i]))
			continue;
		op.kernel = nk++;
		stmt_visit_blocks(p->root->kids[i], own_block, &op);
	}
	for (int i = 0; i < p->nbufs && !g.failed; i++)
		if (L.alloc[i].used && L.alloc[i].compact && owner[i] == -2)
			fail(&g, "cuda: buffer \"%s\" (%s) is used by two kernels; only "
			     "global buffers outlive a kernel", p->bufs[i]->name,
			     scope_name(p->bufs[i]->scope));

	code->launches = xcalloc((size_t)nk + 1, sizeof *code->launches);
	g.frag_in = xcalloc((size_t)p->nbufs + 1, sizeof *g.frag_in);
	g.frag_col = xcalloc((size_t)p->nbufs + 1, sizeof *g.frag_col);
	g.swz = xcalloc((size_t)p->nbufs + 1, sizeof *g.swz);
	g.c.swizzled = g.swz;
	bool tensor = false;
	scan_fragment(&g, p->root, &tensor);
	/* the kernels first, into their own text: the prelude depends on them */
	tir_buf kern = { 0 };
	g.c.out = &kern;
	g.nargs = code->nargs;
	for (int i = 0, k = 0; i < p->root->nkids && !g.failed; i++) {
		if (!lower_has_blocks(p->root->kids[i]))
			continue;
		cu_kernel(&g, p->root->kids[i], k, owner, code, &code->launches[k]);
		k++;
	}
	g.c.out = &o;
	buf_puts(&o, cuda_prelude);
	buf_puts(&o, cuda_async_prelude);   /* every source alike, pipelined or not */
	if (tensor)
		buf_puts(&o, "#include <mma.h>\n\n");
	if (g.wg_wrappers) {
		buf_puts(&o, cuda_wgmma_prelude);
		for (int bit = 0; bit < 24; bit++)
			if (g.wg_wrappers & (1u << bit))
				wg_wrapper(&o, bit / 8 == 0 ? 64 : bit / 8 == 1 ? 128 : 256,
					   bit & 4 ? TIR_BF16 : TIR_F16, (bit >> 1) & 1, bit & 1);
		buf_puts(&o, "\n");
	}
	bool any_smem = false;
	for (int i = 0; i < p->nbufs; i++)
		any_smem |= L.alloc[i].used && L.alloc[i].compact &&
			    p->bufs[i]->scope == TIR_SCOPE_SHARED;
	if (g.tma_ranks) {
		buf_puts(&o, cuda_tma_prelude);
		for (int r = 1; r <= TIR_TMAP_RANK; r++)
			if (g.tma_ranks & (1u << r))
				tma_load_fn(&o, r);
		buf_puts(&o, "\n");
	}
	if (any_smem)
		buf_puts(&o, "extern __shared__ __align__(128) unsigned char tir_smem[];\n\n");
	if (kern.s)
		buf_puts(&o, kern.s);
	free(kern.s);
	code->nlaunches = nk;
	code->unrolled_blocks = cuda_unrolled_blocks(p->root);
	code->source = buf_take(&o);
	free(owner);
	free(g.argbuf);
	free(g.frag_in);
	free(g.frag_col);
	free(g.swz);
	free(g.rd);
	free(g.wr);
	free(g.c.bufname);
	lower_free(&L);
	if (g.failed) {
		tir_code_free(code);
		return NULL;
	}
	return code;
}

const tir_codegen_backend tir_codegen_cuda = { "cuda", cuda_generate };
