/*
 * cuda.h — the CUDA backend's generator state and what its files share.
 * Internal to tuner/codegen/cuda*.c: the rest of libtir reaches the backend
 * only through tir_codegen_cuda (codegen.h).
 *
 * cuda.c prints kernels, loops and statement lists with their barriers; a
 * statement that needs more goes to the file of its concern (tensor
 * intrinsics, copies, cross-thread reduction, software pipelining), which
 * prints the statements under it through cu_stmt / cu_list again.  One
 * generation is one cu_gen, passed to everything; nothing is global.
 */
#ifndef TIR_CODEGEN_CUDA_H
#define TIR_CODEGEN_CUDA_H

#include "codegen.h"

/* The state of one CUDA generation (cuda_generate), and of the kernel being
 * printed (cu_kernel resets the per-kernel part). */
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
	/* the block being emitted as a cross-thread partial result, if any */
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
	 * committed and waited for (see cu_wg_flush) */
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

/* ---- cuda.c: kernels, loops, statements, barriers ---------------------------- */

/* Records the first failure in g->err; generation goes on but its result is
 * dropped. */
void cu_fail(cu_gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Whether t is threadIdx.x, .y or .z. */
bool cu_is_thread_tag(tir_thread_tag t);
/* Whether l is a loop bound to blockIdx / threadIdx: a hardware index, not a
 * loop (vthread loops are loops). */
bool cu_is_hw(const tir_stmt *l);
/* A barrier at depth, `why` in its comment: the pending warpgroup MMAs
 * flushed first, then __syncthreads(), or a barrier among the consumers
 * once a TMA producer has left.  Fails inside a thread-index guard. */
void cu_sync(cu_gen *g, int depth, const char *why);
/* Declares the local buffers and fragments allocated at `site`. */
void cu_allocs(cu_gen *g, const tir_stmt *site, int depth);
/* Prints kids[0..n) with the barriers they need (loop_body: also the one
 * at the end of a loop body that writes and reads shared memory), then
 * flushes or leaves in flight the warpgroup MMAs issued. */
void cu_list(cu_gen *g, tir_stmt *const *kids, int n, int depth, bool loop_body);
/* Prints statement s (nothing when it holds no block). */
void cu_stmt(cu_gen *g, const tir_stmt *s, int depth);

/* ---- cuda_mma.c: tensor intrinsics, WMMA and wgmma ---------------------------- */

/* The wgmma prelude, and the mma_async wrapper of each bit set in
 * `wrappers` (cu_gen.wg_wrappers). */
void cu_wgmma_prelude(tir_buf *o, unsigned wrappers);
/* Fills g->frag_in, frag_col, swz and wg_wrappers from every tensorized
 * loop under s; sets *any when there is one. */
void cu_scan_fragment(cu_gen *g, const tir_stmt *s, bool *any);
/* The declaration of fragment buffer a: WMMA fragments, or a warpgroup
 * accumulator's floats, one per tile. */
void cu_fragment_array(cu_gen *g, const tir_alloc *a, int depth);
/* Tensorized loop l as its intrinsic's call. */
void cu_intrin(cu_gen *g, const tir_stmt *l, int depth);
/* Commits and waits for the warpgroup MMAs issued since the last flush. */
void cu_wg_flush(cu_gen *g, int depth);
/* cu_wg_flush, then waits for a group left in flight by a pipelined loop. */
void cu_wg_drain(cu_gen *g, int depth);
/* Whether s is warpgroup MMAs only. */
bool cu_wg_mma_only(const tir_stmt *s);

/* ---- cuda_copy.c: vector copies and cp.async ----------------------------------- */

/* The cp.async prelude, with tir_smem_addr, which the other preludes use:
 * every source has it. */
void cu_async_prelude(tir_buf *o);
/* Vectorized loop l as one vector load and store (cp.async in a copy
 * stage) when its body is one copy of contiguous aligned lanes; false,
 * nothing printed, otherwise. */
bool cu_vector_copy(cu_gen *g, const tir_stmt *l, int depth);
bool cu_vector_store(cu_gen *g, const tir_stmt *l, int depth);
/* The vector type that moves `bytes` bytes of dtype t at once (4, 8, 16),
 * or NULL. */
const char *cu_vec_type(tir_dtype t, int64_t bytes);
/* Whether offset off of block b is base + v, base a multiple of n: the n
 * elements from an even v on are contiguous and n-aligned. */
bool cu_aligned_lanes(cu_gen *g, const tir_block *b, tir_expr *off, const tir_var *v, int64_t n);
/* In a copy stage, block b as one cp.async when it copies one element of 4
 * or 8 bytes from global to shared memory; false, nothing printed,
 * otherwise. */
bool cu_async_scalar(cu_gen *g, const tir_block *b, int depth);

/* ---- cuda_reduce.c: cross-thread reduction -------------------------------------- */

/* The block whose reduction thread loop l spreads over threads, or NULL. */
const tir_block *cu_xthread_block(const tir_stmt *l);
/* Thread loop l as the cross-thread reduction of its block b. */
void cu_xthread_loop(cu_gen *g, const tir_stmt *l, const tir_block *b, int depth);
/* One instance of g->xblock: its value combined into this thread's partial. */
void cu_xthread_step(cu_gen *g, const tir_block *b, int depth);

/* ---- cuda_pipeline.c: software pipelining, cp.async and TMA -------------------- */

/* The TMA prelude, and tir_tma_load<r> for each rank r set in `ranks`. */
void cu_tma_prelude(tir_buf *o, unsigned ranks);
/* Sets up TMA pipeline l of kernel statement s for launch ln (its copies
 * and tensor maps in g and ln), or fails naming what it cannot take. */
void cu_tma_prepare(cu_gen *g, const tir_stmt *s, const tir_stmt *l, tir_launch *ln);
/* Pipelined loop l of S stages, its copy stages fetched by cp.async. */
void cu_pipelined_loop(cu_gen *g, const tir_stmt *l, int S, int depth);
/* Pipelined loop l of S stages fed by TMA (g->tma_loop). */
void cu_tma_loop(cu_gen *g, const tir_stmt *l, int S, int depth);

#endif
