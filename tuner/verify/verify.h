/*
 * verify.h — validation of programs (TensorIR "Validation"), internal to
 * tuner/verify/.  The public entry point is tir_verify in tir.h.
 *
 * Four checks run in order, each on the whole program, and the first
 * failure is the answer:
 *   loopnest.c   every block's bindings are quasi-affine in its enclosing
 *                loops, its iterators independent and their domains covered,
 *                its body uses only its iterators and stays inside params;
 *   producer.c   every intermediate buffer is written before it is read, and
 *                the writer covers what the reader reads under their LCA;
 *   threading.c  thread bindings fit the target (CUDA) and nothing races;
 *   tensor.c     tensorized loops still match their intrinsics, at warp
 *                scope, with whole fragments and aligned memory operands.
 * A check returns 0, or -1 with a message that starts with the check's name
 * ("loop-nest: ", "producer-consumer: ", "threading: ") and names the block,
 * loop or buffer at fault and the rule it breaks.
 *
 * The checks never change the program: scratch expressions go to the
 * context's own arena, freed with it.
 */
#ifndef TIR_VERIFY_H
#define TIR_VERIFY_H

#include "../ir/ir.h"

#define VFY_MAX_DEPTH 64   /* loops around one block */
/* Block instances one CUDA kernel may hold once its unrolled loops are
 * unrolled (cuda_unrolled_blocks).  NVRTC's time grows faster than the
 * count: a 4,100-instance convolution kernel ran past NVRTC's 30 s limit,
 * 1,792-instance ones take 8-18 s, ~100 instances 0.2-0.5 s; and a batch
 * waits for its slowest compile.  Of the best kernels of 53 H200 tasks
 * (session 5's suite, both dtypes) one had more than 1,024 (conv3d float32,
 * 1,584; the best under 1,024 was 3% slower). */
#define VFY_MAX_UNROLLED 1024
/* The same bound for a CPU program, whose loops the C backend unrolls by
 * their "unroll" annotation (#pragma GCC unroll, at most the extent) or
 * their unrolled kind (cpu_unrolled_blocks, threading.c).  gcc's time
 * grows as NVRTC's does: a candidate with two nested 109-column loops
 * annotated unroll (11,881 instances of an AVX-512 body) had cc1 at 800 MB
 * for over 10 minutes; the register tiles the CPU sketches make unroll to
 * a few hundred (wb x kb accumulators x the inner reduction's unroll). */
#define VFY_MAX_UNROLLED_CPU 2048

/* ---- verify.c: shared context and helpers ------------------------------- */

typedef struct vfy_ctx {
	const tir_program *p;
	const tir_target *t;
	tir_arena arena;            /* scratch, freed by vfy_free */
	tir_stmt **loop_of;         /* var id -> the loop of that var, or NULL */
	int nblocks;
	tir_block **blocks;         /* live blocks in program order */
} vfy_ctx;

void vfy_init(vfy_ctx *c, const tir_program *p, const tir_target *t);
void vfy_free(vfy_ctx *c);

/* Position of a live block in program order, -1 if it is not in the tree. */
int vfy_order(const vfy_ctx *c, const tir_block *b);
/* The lowest common ancestor of two statements (root if nothing lower). */
tir_stmt *vfy_lca(tir_stmt *a, tir_stmt *b);
/* The top-level statement (child of root) containing s: its kernel on CUDA. */
tir_stmt *vfy_kernel_of(tir_stmt *s);
/* "loop i" / "root" for messages. */
const char *vfy_stmt_name(vfy_ctx *c, const tir_stmt *s);

/* Text of an expression, for messages (in the context's arena). */
const char *vfy_expr_str(vfy_ctx *c, const tir_expr *e);
/* "B[lo:hi, ...]" of a list of intervals. */
const char *vfy_region_str(vfy_ctx *c, const tir_buffer *buf, int n,
			   const tir_interval *iv);

/* The index expression e of block b (in its iterator vars) rewritten in loop
 * variables by substituting the bindings. */
tir_expr *vfy_in_loops(vfy_ctx *c, const tir_block *b, const tir_expr *e);

/* The interval an index e of block b covers under statement `at` (an
 * ancestor of b, or root): loops strictly inside `at` are ranged over their
 * extents, loops above stay symbolic, except that with relax_threads the
 * threadIdx.* and vthread.* loops above `at` are ranged too, and with
 * relax_vthreads the vthread.* loops.  The iterator's domain clips the
 * result when it is a constant interval. */
tir_interval vfy_interval(vfy_ctx *c, const tir_block *b, const tir_expr *e,
			  tir_stmt *at, bool relax_threads, bool relax_vthreads);

/* ---- the checks ------------------------------------------------------------- */

int verify_loopnest(vfy_ctx *c, tir_error *err);
int verify_producer(vfy_ctx *c, tir_error *err);
int verify_threading(vfy_ctx *c, tir_error *err);
int verify_tensor(vfy_ctx *c, tir_error *err);

/* threading.c: bytes of shared memory kernel `k` (a child of root) declares:
 * the compacted sizes of the shared buffers its blocks access, summed. */
int64_t verify_shared_bytes(vfy_ctx *c, tir_stmt *k);

#endif
