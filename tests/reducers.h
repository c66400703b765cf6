/*
 * reducers.h — hand-built reductions of every reducer (sum, max, min) for
 * the suites that check how each place handles one: the printer, the
 * primitives, validation, the sketches and both code generators.
 *
 * The program is a row reduction built with the IR API (no workload):
 *
 *     R[i] = reduce_k value(A[i, k]),   A: [M, K] of dtype `in`, R: [M] of `out`
 *
 * value is T.Cast(out, A[vi, vk]), + 1 with `plus_one`, NaN at every
 * `nan_every`-th k (T.if_then_else(vk % n == n - 1, NaN, ...)); the init is
 * the reducer's identity.  Block "reduce", loops "i" and "k".  Its meaning is
 * checked against a plain C loop over the same inputs (tr_expect), exactly
 * for max and min (a max of stored values is one of them), within the
 * dtype's rounding for a sum.
 */
#ifndef TIR_TEST_REDUCERS_H
#define TIR_TEST_REDUCERS_H

#include <stdbool.h>
#include "tir.h"
#include "ir/ir.h"

typedef struct tr_spec {
	tir_reduce r;
	tir_dtype in, out;
	int64_t M, K;
	int nan_every;             /* 0: no NaN values */
	bool plus_one;
} tr_spec;

/* "max f16->f32 5x7" (static storage, for messages). */
const char *tr_name(const tr_spec *s);
/* The program of s (tir_program_free). */
tir_program *tr_program(const tr_spec *s);
/* A fresh schedule over tr_program(s), seed 1; it owns the program
 * (tir_sched_free). */
tir_sched *tr_sched(const tr_spec *s);
/* Replaying s's trace on a fresh tr_sched(spec) prints the same program. */
void tr_check_replay(tir_sched *s, const tr_spec *spec);
/* What a plain C loop computes from A (M * K values, as stored) into R
 * (M values): acc = identity; for each k, max: if (v > acc) acc = v (a NaN
 * value is skipped), min: if (v < acc) acc = v, sum: acc += v. */
void tr_expect(const tr_spec *s, const double *A, double *R);
/* Generates p's code for target `key` ("cpu", "cuda:sm_90"), validates p
 * for it, builds the code with that target's runner, runs it on the
 * runner's inputs of seed 7 and compares the output with tr_expect of the
 * same inputs.  A CUDA target runs on this machine's GPU when there is
 * one.  Returns 1 when it ran, 0 when it could not run here (CUDA without a
 * GPU, after generating and compiling); fails the test on a mismatch.
 * With TIR_TEST_VERBOSE set, says on stderr what ran where. */
int tr_run(const tir_program *p, const tr_spec *s, const char *key, const char *what);
/* p's CUDA source for sm_90, compiled by NVRTC when libtir has CUDA
 * (malloc'd). */
char *tr_cuda_source(const tir_program *p, const char *what);
/* p's C source (malloc'd). */
char *tr_c_source(const tir_program *p);

#endif
