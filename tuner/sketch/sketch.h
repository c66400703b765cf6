/*
 * sketch.h — sketches: schedules with their decisions left open.  Internal to
 * tuner/.
 *
 * A sketch is a function that schedules a fresh tir_sched through the
 * public primitives, drawing every open decision with a sampling instruction
 * (sample_perfect_tile, sample_categorical, sample_compute_location), so its
 * trace records the decisions and the search mutates them and replays.  The
 * functions are written against the block structure of the program (the
 * kinds of its blocks, found by one rule in post-order — rules.c — their
 * producers and consumers, spatial and reduction loops), never against an
 * operator's name.
 *
 * Each target kind has a table of sketch definitions; tir_sketches lists the
 * ones whose applies() accepts the program: the heavy sketches where a block
 * has data reuse (each tiles every heavy block its way, then the rest of the
 * program as rows.c does), the row sketches where reductions have none, the
 * pointwise sketch where there is no reduction.  A single operator's table
 * is what it was before graph programs: its one heavy block, and nothing
 * left for rows.c.
 */
#ifndef TIR_SKETCH_H
#define TIR_SKETCH_H

#include "../sched/sched.h"

typedef struct sketch_def {
	const char *name;
	/* whether this sketch fits the program (NULL: always) */
	bool (*applies)(const tir_program *p, const tir_target *t);
	/* schedules s (fresh) and samples its decisions */
	int (*apply)(tir_sched *s, const tir_target *t, tir_error *err);
} sketch_def;

/* ---- cpu.c: SSRSRS tiling, parallel outer, vectorized inner; cpu-rows and
 * cpu-pointwise (rows.c with cpu_rows.c) ------------------------------------ */
extern const sketch_def sketch_cpu_defs[];
extern const int sketch_cpu_ndefs;

/* ---- cpu_conv.c: channels-last convolutions, register tile over output
 * width x output-channel vectors (cpu-conv-blocked, cpu-conv-direct) ---- */
/* Whether every heavy block of p is a channels-last convolution the
 * sketches take (and there is one), on a CPU target. */
bool sketch_cpu_conv_applies(const tir_program *p, const tir_target *t);
/* With the weights packed by the vector lanes of output channels
 * (transform_layout), or read where they are. */
int sketch_cpu_conv_blocked(tir_sched *s, const tir_target *t, tir_error *err);
int sketch_cpu_conv_direct(tir_sched *s, const tir_target *t, tir_error *err);

/* ---- gpu.c: SSSRRSRS tiling bound to blockIdx/vthread/threadIdx, AutoCopy
 * stages, local write cache, cross-thread reduction; gpu-rows,
 * gpu-rows-thread and gpu-pointwise (rows.c with gpu_rows.c) ------------------- */
extern const sketch_def sketch_gpu_defs[];
extern const int sketch_gpu_ndefs;

/* The multi-level tiling of one heavy block, with (stages) or without
 * shared-memory stages (gpu-tile-autocopy, gpu-tile). */
int sketch_gpu_tile_block(tir_sched *s, const tir_target *t, bool stages,
			  const tir_block *heavy, tir_error *err);
/* The GPU heavy sketches' driver: every heavy block in post-order by
 * `heavy` where `fits` accepts it (NULL: all) and by gpu-tile where not,
 * then sketch_schedule_rest (a thread block per row where a row is a warp's
 * work or more). */
int sketch_gpu_heavy(tir_sched *s, const tir_target *t,
		     int (*heavy)(tir_sched *, const tir_target *, const tir_block *, tir_error *),
		     bool (*fits)(const tir_program *, const tir_target *, const tir_block *),
		     tir_error *err);

/* ---- tensorcore.c: WMMA tensorization of matrix-multiply blocks ------------ */
bool sketch_tensorcore_applies(const tir_program *p, const tir_target *t);
int sketch_tensorcore_apply(tir_sched *s, const tir_target *t, tir_error *err);
/* the same with Hopper's warpgroup MMA (wgmma, sm_90a) */
bool sketch_wgmma_applies(const tir_program *p, const tir_target *t);
int sketch_wgmma_apply(tir_sched *s, const tir_target *t, tir_error *err);

/* The matrix-multiply form a heavy block is normalized into (tensorcore.c's
 * top comment): iterators [part] [batch] I J K, the product
 * acc[.., I, J] += cast(a[.., I, K]) * cast(bb[.., K, J]) with i, j, k the
 * indices of I, J and K among b's iterators. */
typedef struct sketch_mm {
	const tir_block *b;
	const tir_buffer *a, *bb;
	int i, j, k;
} sketch_mm;
/* Whether block b is a product-form reduction (a matmul, batched or not,
 * a convolution, grouped or not: tensorcore.c, einsum_of) of operands of
 * dtype `in` into an accumulator of dtype acc. */
bool sketch_product_form(const tir_block *b, tir_dtype in, tir_dtype acc);
/* Normalizes product-form block b (transform_block_layout, reindex of every
 * operand that is not then a plain matrix, pad_einsum of I, J, K to sampled
 * multiples of tile[0..2]) and fills *out.  Every decision is a sampling
 * instruction of s.  Returns 0, or -1 with a message. */
int sketch_mm_normalize(tir_sched *s, const tir_block *b, const int tile[3], sketch_mm *out,
			tir_error *err);

/* ---- rules.c: what both tables share -------------------------------------- */

/* The loops around a block by the kind of iterator each one feeds. */
typedef struct sketch_nest {
	int n;
	int loop[TIR_MAX_IO];               /* loop RVs, outermost first */
	int ns, nr;
	int spatial[TIR_MAX_IO], reduce[TIR_MAX_IO];   /* loop RVs */
	int64_t sext[TIR_MAX_IO], rext[TIR_MAX_IO];    /* their extents */
} sketch_nest;

/* Fills *n with the loops of `block` (an RV of s): a loop that feeds a
 * reduction iterator is a reduction loop, any other a spatial one. */
int sketch_nest_of(tir_sched *s, int block, sketch_nest *n, tir_error *err);

/* ---- the blocks to schedule (rules.c) ----
 *
 * One rule finds them: the live blocks in post-order — from the outputs
 * back, each block before the blocks whose outputs it reads (reverse program
 * order: a program runs its blocks in a topological order), as TensorIR's
 * sketch generation visits them — each of one kind:
 *
 *   SKETCH_HEAVY    a reduction with data reuse: its largest input is read
 *                   at least SKETCH_REUSE_MIN times per element over the
 *                   block's domain (a matmul's operands, a convolution's
 *                   input and weights; a row reduction reads each element
 *                   once, and a 3 x 3 depthwise convolution of stride 2 on a
 *                   padded 14 x 14 image 1.72 times).  Tiled by the heavy sketches, with
 *                   its injective producers (padding) inlined into it and
 *                   its spatial consumers (epilogues) into its write-back.
 *   SKETCH_ROW      a reduction without reuse (a sum, max, min or mean over
 *                   some dims: every input element is read once): a row
 *                   reduction, computed per row, its consumers and the
 *                   other reductions of the row under the same row loop
 *                   (rows.c).
 *   SKETCH_SPATIAL  anything else: inlined into its consumers where that
 *                   recomputes nothing, a member of a row group, or a
 *                   pointwise kernel of its own (rows.c).
 */
#define SKETCH_MAX_BLOCKS 256
#define SKETCH_REUSE_MIN 1.5
typedef enum { SKETCH_SPATIAL, SKETCH_ROW, SKETCH_HEAVY } sketch_kind;

/* The region of b's largest read (not of its own output) and its elements
 * over b's domain (elems may be NULL); NULL when b reads nothing else. */
const tir_region *sketch_largest_read(const tir_program *p, const tir_block *b, double *elems);
/* Whether reduction block b has data reuse (above); false for a spatial block. */
bool sketch_has_reuse(const tir_program *p, const tir_block *b);
sketch_kind sketch_kind_of(const tir_program *p, const tir_block *b);
/* The live blocks of p in post-order; fills out[0..n), returns n (at most max). */
int sketch_post_order(const tir_program *p, tir_block **out, int max);
/* The heavy blocks of p in post-order; returns how many. */
int sketch_heavy_blocks(const tir_program *p, tir_block **out, int max);
/* Whether some live block of p is of that kind. */
bool sketch_program_has(const tir_program *p, sketch_kind kind);
/* Whether block b is as the program built it: alone in its top-level loop
 * nest, every loop serial and unannotated (no rule has scheduled it). */
bool sketch_block_free(const tir_block *b);

/* A heavy block and its neighbours: the free spatial blocks that write an
 * intermediate it reads (injective producers, e.g. padding) and the free
 * spatial blocks that read its output (consumers, e.g. epilogues), in
 * program order.  heavy NULL: all empty. */
#define SKETCH_MAX_STAGES 8
typedef struct sketch_blocks {
	const tir_block *reduction;         /* the heavy block, or NULL */
	int nproducers, nconsumers;
	const tir_block *producer[SKETCH_MAX_STAGES];
	const tir_block *consumer[SKETCH_MAX_STAGES];
} sketch_blocks;
void sketch_find_blocks(const tir_program *p, const tir_block *heavy, sketch_blocks *sb);

/* ---- rows.c: what the heavy rules leave (row groups, pointwise kernels) ---- */

/* A row group: an anchor (member 0: a reduction, or a block reading one) whose
 * row loops are fused into one loop, `row`, and the blocks computed under it
 * (compute_at), each row computing its own part of their outputs. */
#define SKETCH_MAX_GROUP 16
typedef struct sketch_group {
	int row;                            /* loop RV */
	int nrow;                           /* row coordinates (dims of > 1 element) */
	int64_t rext[TIR_MAX_DIMS];         /* their extents */
	int n;
	tir_block *member[SKETCH_MAX_GROUP];   /* the anchor, then in post-order */
	int rv[SKETCH_MAX_GROUP];              /* their block RVs */
	/* per member, per iterator: its row coordinate, or -1 */
	signed char coord[SKETCH_MAX_GROUP][TIR_MAX_ITERS];
} sketch_group;

/* A target's part of the walk (rows.c's top comment): mode and ctx are the
 * target's. */
typedef struct sketch_rest sketch_rest;
struct sketch_rest {
	int mode;
	/* before the walk, over the blocks it will visit (may be NULL) */
	int (*prepare)(tir_sched *s, const tir_target *t, const sketch_rest *r,
		       tir_block *const *blocks, int n, tir_error *err);
	/* whether block b may join g (NULL: always) */
	bool (*admit)(const tir_program *p, const tir_target *t, const sketch_rest *r,
		      const sketch_group *g, const tir_block *b);
	/* schedules a group whose members are under its row loop */
	int (*group)(tir_sched *s, const tir_target *t, const sketch_rest *r, sketch_group *g,
		     tir_error *err);
	/* schedules a free spatial block (an RV) as a kernel of its own */
	int (*pointwise)(tir_sched *s, const tir_target *t, const sketch_rest *r, int block,
			 tir_error *err);
};

/* Schedules every free block that is not heavy: the walk of rows.c.  With
 * none (a single operator, once its heavy rule has run), applies nothing. */
int sketch_schedule_rest(tir_sched *s, const tir_target *t, const sketch_rest *r,
			 tir_error *err);
/* The loops of member m of g under the row loop, by the kind of iterator each
 * feeds (spatial[0..ns), reduce[0..nr), outermost first); returns ns + nr
 * or -1. */
int sketch_member_loops(tir_sched *s, const sketch_group *g, int m, int *spatial, int *ns,
			int *reduce, int *nr, tir_error *err);
/* The most iterations any member of g runs per row. */
int64_t sketch_row_work(tir_sched *s, const sketch_group *g);

/* ---- cpu_rows.c / gpu_rows.c: the targets' parts ---- */
extern const sketch_rest sketch_cpu_rest;
/* GPU: a thread block per row (cross-thread reduction), a thread per row, or
 * the first where a row is at least a warp long (the heavy sketches) */
enum { SKETCH_GPU_ROW_BLOCK, SKETCH_GPU_ROW_THREAD, SKETCH_GPU_ROW_AUTO };
extern const sketch_rest sketch_gpu_rest_block, sketch_gpu_rest_thread, sketch_gpu_rest_auto;

/* compute_inline of every injective producer of sb where it is legal (a
 * refused inline leaves the program as it was).  Returns how many were
 * inlined, or -1 on an error other than a refused precondition. */
int sketch_inline_producers(tir_sched *s, const sketch_blocks *sb, tir_error *err);

/* Splits `loop` into `levels` loops by sample_perfect_tile (innermost factor
 * at most max_innermost, 0: any); fills out_loops[0..levels). */
int sketch_tile(tir_sched *s, int loop, int levels, int max_innermost,
		int *out_loops, tir_error *err);

/* The same with the decision given (drawn jointly by the caller, e.g. under
 * soft limits on the register tile): the instruction checks and records it
 * as a replayed decision is checked.  decision[0..levels), outermost first. */
int sketch_tile_decided(tir_sched *s, int loop, int levels, int max_innermost,
			const int64_t *decision, int *out_loops, tir_error *err);

/* Draws the factors of extent over `levels` levels: every prime factor goes
 * to a random level (the generator of s), as sample_perfect_tile does. */
void sketch_draw_factors(tir_sched *s, int64_t extent, int levels, int64_t *f);

/* annotate(rv, key, value) where value is the integer RV `value_rv` (the
 * annotation follows a mutated decision on replay); where annotate takes
 * literals only, the literal value of value_rv. */
int sketch_annotate_rv(tir_sched *s, int rv, const char *key, int value_rv,
		       tir_error *err);

/* Software pipelining as a sampled decision (cp.async: every CUDA target is
 * sm_80 or later): 1, 2 or 3 stages (as many as fit, each a copy of the shared memory the
 * program holds so far, in the target's shared memory), annotated "software_pipeline" on each of the n
 * loops (the places the shared-memory copies may be; the annotation acts
 * where a copy is, codegen/lower.c).  Returns 0 or -1. */
int sketch_pipeline(tir_sched *s, const tir_target *t, int n, const int *loops,
		    tir_error *err);

/* The loops of `block` strictly under loop `at` (RVs), outermost first;
 * returns how many (at most TIR_MAX_IO), or -1. */
int sketch_loops_under(tir_sched *s, int block, int at, int *out, tir_error *err);
/* Split-K: rfactor of `iterator` of `block` (a fresh nest) into a sampled
 * number of parts, 1 (half the draws), 2, 4, ... up to SKETCH_MAX_PARTS,
 * each at least min_chunk long, offered only for blocks of fewer than
 * max_outputs outputs: SKETCH_SPLIT_K_OUTPUTS for one thread per output
 * (about two waves on an H200's 132 SMs; more outputs fill the GPU without
 * it), SKETCH_SPLIT_K_TC_OUTPUTS for tensor-core tiles (a block computes
 * 4096 to 16384 outputs: two waves of the largest).  Returns the number of
 * parts (1: nothing changed) or -1. */
#define SKETCH_MAX_PARTS 16
#define SKETCH_SPLIT_K_OUTPUTS (1 << 18)
#define SKETCH_SPLIT_K_TC_OUTPUTS (1 << 22)
int sketch_split_k(tir_sched *s, int block, int iterator, int64_t min_chunk,
		   int64_t max_outputs, tir_error *err);
/* Block `name` as a kernel of its own: its spatial loops (the outer ones)
 * fused and split over blockIdx.x and a sampled 64, 128 or 256 threads; a
 * reduction loop stays inside each thread. */
int sketch_kernelize(tir_sched *s, const char *name, tir_error *err);
/* The GPU sketches' candidates for "auto_unroll_max_step" (more: NVRTC takes
 * seconds per kernel). */
#define SKETCH_GPU_NUNROLL 4
extern const int64_t sketch_gpu_unroll_steps[SKETCH_GPU_NUNROLL];
/* Vector lanes of the target's widest register for elements of dtype (a
 * tir_dtype); at least 1. */
int sketch_vector_lanes(const tir_target *t, int dtype);

/* The data type the heavy block accumulates in (its output's). */
int sketch_accum_dtype(const sketch_blocks *sb);

/* Runs a primitive call; on failure prefixes the message with `what`. */
#define SKETCH_TRY(call, what) do { if ((call) < 0) { \
	tir_error e_ = *err; \
	return tir_fail(err, "%s: %s", what, e_.msg); } } while (0)

#endif
