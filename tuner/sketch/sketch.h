/*
 * sketch.h — sketches: schedules with their decisions left open.  Internal to
 * tuner/.
 *
 * A sketch is a function that schedules a fresh tir_sched through the
 * public primitives, drawing every open decision with a sampling instruction
 * (sample_perfect_tile, sample_categorical, sample_compute_location), so its
 * trace records the decisions and the search mutates them and replays.  The
 * functions are written against the block structure of the program (the
 * reduction blocks, their injective producers and consumers, spatial and
 * reduction loops), never against an operator's name.
 *
 * Each target kind has a table of sketch definitions; tir_sketches lists the
 * ones whose applies() accepts the program.
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

/* ---- cpu.c: SSRSRS tiling, parallel outer, vectorized inner ---------------- */
extern const sketch_def sketch_cpu_defs[];
extern const int sketch_cpu_ndefs;

/* ---- gpu.c: SSSRRSRS tiling bound to blockIdx/vthread/threadIdx, AutoCopy
 * stages, local write cache, cross-thread reduction ---------------------------- */
extern const sketch_def sketch_gpu_defs[];
extern const int sketch_gpu_ndefs;

/* ---- tensorcore.c: WMMA tensorization of matrix-multiply blocks ------------ */
bool sketch_tensorcore_applies(const tir_program *p, const tir_target *t);
int sketch_tensorcore_apply(tir_sched *s, const tir_target *t, tir_error *err);
/* the same with Hopper's warpgroup MMA (wgmma, sm_90a) */
bool sketch_wgmma_applies(const tir_program *p, const tir_target *t);
int sketch_wgmma_apply(tir_sched *s, const tir_target *t, tir_error *err);

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

/* The blocks a sketch is written against, found from the block structure
 * only: the first reduction block in program order (the one to tile), the
 * spatial blocks that write an intermediate it reads (injective producers,
 * e.g. padding) and the spatial blocks that read its output (consumers,
 * e.g. epilogues).  Names, for tir_get_block. */
#define SKETCH_MAX_STAGES 8
typedef struct sketch_blocks {
	const char *reduction;              /* NULL when the program has none */
	int nproducers, nconsumers;
	const char *producer[SKETCH_MAX_STAGES];
	const char *consumer[SKETCH_MAX_STAGES];
} sketch_blocks;
void sketch_find_blocks(const tir_program *p, sketch_blocks *sb);

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

/* The data type the reduction block accumulates in (its output's). */
int sketch_accum_dtype(const tir_program *p, const sketch_blocks *sb);

/* Runs a primitive call; on failure prefixes the message with `what`. */
#define SKETCH_TRY(call, what) do { if ((call) < 0) { \
	tir_error e_ = *err; \
	return tir_fail(err, "%s: %s", what, e_.msg); } } while (0)

#endif
