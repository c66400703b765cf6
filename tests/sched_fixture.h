/*
 * sched_fixture.h — what the suites that check schedule primitives share: a
 * workload with a fresh schedule of it, lookups of its blocks and reads, and
 * two of the three checks each primitive's result gets (the trace replayed
 * on a fresh schedule prints the same program; the program's C code, built,
 * run and checked against the reference by the CPU runner).  The third, the
 * program's meaning, each suite checks with its own interpreter:
 * check_sched2.c's own, written from docs/ir-semantics.md, and the
 * library's (ir/interp.c) elsewhere.
 */
#ifndef TIR_SCHED_FIXTURE_H
#define TIR_SCHED_FIXTURE_H

#include <stdint.h>
#include "tir.h"
#include "ir/ir.h"
#include "sched/sched.h"

typedef struct tu_fix {
	tir_workload *w;
	tir_sched *s;
} tu_fix;

/* The workload of json and a schedule of it (seed 1); fails the test when
 * either cannot be made. */
tu_fix tu_fix_make(const char *json);
void tu_fix_done(tu_fix *f);
/* The block called name, or the test fails. */
int tu_fix_block(tu_fix *f, const char *name);
/* The index of block b's read of buffer buf, or the test fails. */
int tu_fix_read(tu_fix *f, int b, const char *buf);
/* The number of elements of b. */
int64_t tu_buffer_elems(const tir_buffer *b);
/* Replaying f's trace on a fresh schedule prints the same program. */
void tu_fix_check_replay(tu_fix *f);
/* f's program passes validation for this machine's CPU, and its C code
 * computes what the reference implementation does. */
void tu_fix_check_cpu(tu_fix *f);

#endif
