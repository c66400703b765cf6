/*
 * reference.h — the hand-written reference (reference.c), in
 * tests/libtestutil.a: every single-operator workload computed in double
 * precision straight from its definition, without the IR, to check the
 * interpreter that measurement's reference is (tuner/ir/interp.c,
 * tuner/measure/reference.c) and the compute definitions against.
 */
#ifndef TIR_TESTS_REFERENCE_H
#define TIR_TESTS_REFERENCE_H

#include "tir.h"
#include "measure/measure.h"

/* The operator's arguments in measure.h's convention (inputs, epilogue
 * operands, the output last), into args[0..n-1]; returns n, or -1 with a
 * message when max is too small. */
int ref_hand_args(const tir_workload *w, tir_ref_arg *args, int max, tir_error *err);

/* The output of w in double precision: inputs[] every argument of
 * ref_hand_args but the output, output the output's elements.  Returns 0,
 * or -1 with a message (an operator it does not know). */
int ref_hand(const tir_workload *w, double *const *inputs, double *output, tir_error *err);

#endif
