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

/* ---- rules.c: what both tables share -------------------------------------- */

/* The loops around a block by the kind of iterator each one feeds. */
typedef struct sketch_nest {
	int n;
	int loop[TIR_MAX_IO];               /* loop RVs, outermost first */
	int ns, nr;
	int spatial[TIR_MAX_IO], reduce[TIR_MAX_IO];   /* loop RVs */
	int64_t sext[TIR_MAX_IO], rext[TIR_MAX_IO];    /* their extents */
} sketch_nest;

#endif
