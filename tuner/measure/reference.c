/*
 * reference.c — the reference every candidate's output is checked against:
 * the workload's unscheduled program (tir_program_build: its compute
 * definition's blocks, before any schedule) run by the IR's interpreter in
 * double precision (ir/interp.c).  Its arguments are the program's
 * parameters, in order, whatever the workload: a graph of many blocks and
 * outputs has a reference as soon as it has a compute definition.
 *
 * The interpreter is written from the IR's semantics, never from the code
 * generators, so a bug in a schedule or a code generator cannot hide in
 * both; what it cannot see is a compute definition that means the wrong
 * thing, which the tests check against the hand-written reference of the
 * single-operator workloads (tests/reference.c).
 */
#include <stdio.h>
#include <string.h>
#include "../ir/ir.h"
#include "measure.h"

_Static_assert(TIR_MAX_DIMS <= TIR_REF_MAX_DIMS, "a reference argument holds every shape");

static int program_args(const tir_program *p, tir_ref_arg *args, int max, tir_error *err)
{
	if (p->nparams > max)
		return tir_fail(err, "reference: room for %d arguments, the program of %s has %d",
				max, tir_workload_op(p->w), p->nparams);
	for (int i = 0; i < p->nparams; i++) {
		const tir_buffer *b = p->bufs[i];
		tir_ref_arg *a = &args[i];
		memset(a, 0, sizeof *a);
		snprintf(a->name, sizeof a->name, "%s", b->name);
		a->dtype = b->dtype;
		a->ndim = b->ndim;
		a->elems = 1;
		for (int d = 0; d < b->ndim; d++) {
			a->shape[d] = b->shape[d];
			a->elems *= b->shape[d];
		}
		a->is_output = b->role == BUF_OUTPUT;
	}
	return p->nparams;
}

int tir_reference_args(const tir_workload *w, tir_ref_arg *args, int max, tir_error *err)
{
	tir_program *p = tir_program_build(w, err);
	if (!p)
		return -1;
	int n = program_args(p, args, max, err);
	tir_program_free(p);
	return n;
}

int tir_reference(const tir_workload *w, double *const *args, tir_error *err)
{
	tir_program *p = tir_program_build(w, err);
	if (!p)
		return -1;
	tir_error e = { "" };
	int rc = interp_run(p, args, NULL, &e);
	if (rc)
		tir_fail(err, "reference: %s", e.msg);
	tir_program_free(p);
	return rc;
}
