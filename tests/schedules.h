/*
 * schedules.h — hand-written schedules for tests: one CPU tiling and one GPU
 * tiling that apply to the program of ANY operator, written against the block
 * structure (the compute block's spatial and reduction loops, its pad
 * producer and epilogue consumer), never against an operator's name.
 *
 * CPU:  split every spatial loop, reorder tiles outside the reduction, fuse
 *       and parallelize the outer tiles, vectorize the innermost; the pad
 *       block is inlined, the epilogue parallelized.
 * GPU:  split every spatial loop into blockIdx / threadIdx / inner tiles,
 *       split the reduction, stage the inputs through shared memory with
 *       cache_read + compute_at and a cooperative fetch bound to threadIdx,
 *       accumulate in registers (cache_write local + reverse_compute_at),
 *       inline the epilogue into the write-back, unroll the inner reduction.
 */
#ifndef TIR_TEST_SCHEDULES_H
#define TIR_TEST_SCHEDULES_H

#include "tir.h"

/* Each applies its schedule to a fresh schedule s; returns 0 or -1 with the
 * failing step in err. */
int sched_cpu_tiled(tir_sched *s, tir_error *err);
int sched_gpu_tiled(tir_sched *s, tir_error *err);

#endif
