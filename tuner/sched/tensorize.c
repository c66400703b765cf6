/*
 * tensorize.c — tensorize: a loop nest replaced by a tensor intrinsic.
 *
 * tensorize(loop, intrinsic) checks that the nest under the loop computes
 * exactly the intrinsic's semantics (ir/intrin.c: intrin_match) and marks
 * the loop with the "tensorize" annotation naming it; the program keeps its
 * loops and block, so every analysis, validation and the C reference
 * semantics still see the scalar computation, and codegen/cuda.c emits the
 * intrinsic's implementation in place of the nest.  Validation matches every
 * tensorized loop again (verify/threading.c), so a later primitive that
 * changes the nest cannot leave a wrong intrinsic behind.
 */
#include <string.h>
#include "sched.h"

int prim_tensorize(tir_sched *s, tir_inst *in, tir_error *err)
{
	if (in->nin != 1 || !in->str)
		return tir_fail(err, "takes a loop and the name of an intrinsic");
	tir_stmt *l = sched_loop(s, in->in[0], err);
	if (!l)
		return -1;
	const tir_intrin *it = intrin_find(in->str);
	if (!it)
		return tir_fail(err, "unknown intrinsic \"%s\"", in->str);
	for (const tir_stmt *q = l; q && q->kind == STMT_FOR; q = q->parent)
		if (intrin_of_loop(q))
			return tir_fail(err, "loop %s is already under a tensorized loop (%s)",
					l->var->name, q->var->name);
	tir_arena a = { 0 };
	tir_intrin_match m;
	int rc = intrin_match(&a, s->p, l, it, &m, err);
	arena_free(&a);
	if (rc)
		return -1;
	if (l->nann >= TIR_MAX_ANN)
		return tir_fail(err, "loop %s has %d annotations already", l->var->name, l->nann);
	l->ann[l->nann].key = arena_strdup(&s->p->arena, TIR_TENSORIZE_ANN);
	l->ann[l->nann].value = it - tir_intrins;
	l->nann++;
	return 0;
}
