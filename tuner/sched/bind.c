/*
 * bind.c — primitives that change how a loop runs, not what it iterates:
 * bind (to a GPU thread axis), parallel, vectorize, unroll, and annotate.
 *
 * parallel and vectorize require a data-parallel loop: its variable may feed
 * only spatial iterators of the blocks below it (running a reduction's
 * iterations at once would race on the accumulator).  Thread bindings of
 * reduction loops are left to validation, which allows them only through a
 * cross-thread reduction.
 */
#include <string.h>
#include "sched.h"

struct feeds { const tir_var *v; const tir_block *bad; int iter; };

static void find_reduce_use(tir_block *b, void *ctx)
{
	struct feeds *f = ctx;
	if (f->bad)
		return;
	for (int i = 0; i < b->niters; i++)
		if (b->iters[i].kind == ITER_REDUCE && expr_uses_var(b->iters[i].binding, f->v)) {
			f->bad = b;
			f->iter = i;
			return;
		}
}

/* Fails if the loop's variable feeds a reduction iterator below it. */
static int check_data_parallel(tir_stmt *loop, const char *what, tir_error *err)
{
	struct feeds f = { loop->var, NULL, 0 };
	stmt_visit_blocks(loop, find_reduce_use, &f);
	if (f.bad)
		return tir_fail(err, "loop \"%s\" feeds reduction iterator \"%s\" of block \"%s\"; only data-parallel loops can be %s",
				loop->var->name, f.bad->iters[f.iter].var->name, f.bad->name, what);
	return 0;
}

static tir_stmt *serial_loop(tir_sched *s, tir_inst *in, tir_error *err)
{
	if (in->nin != 1) {
		tir_fail(err, "takes one loop");
		return NULL;
	}
	tir_stmt *l = sched_loop(s, in->in[0], err);
	if (l && l->loop_kind != LOOP_SERIAL) {
		tir_fail(err, "loop \"%s\" is already %s", l->var->name,
			 l->loop_kind == LOOP_THREAD ? thread_tag_name(l->tag) : loop_kind_name(l->loop_kind));
		return NULL;
	}
	return l;
}

int prim_bind(tir_sched *s, tir_inst *in, tir_error *err)
{
	tir_stmt *l = serial_loop(s, in, err);
	if (!l)
		return -1;
	int tag = in->str ? thread_tag_parse(in->str) : -1;
	if (tag < 0)
		return tir_fail(err, "unknown thread axis \"%s\" (expected blockIdx.x/y/z, vthread.x/y/z or threadIdx.x/y/z)",
				in->str ? in->str : "");
	for (tir_stmt *q = l->parent; q; q = q->parent)
		if (q->kind == STMT_FOR && q->loop_kind == LOOP_THREAD && (int)q->tag == tag &&
		    tag <= TIR_BLOCK_Z)
			return tir_fail(err, "loop \"%s\" is inside loop \"%s\", already bound to %s",
					l->var->name, q->var->name, thread_tag_name(tag));
	l->loop_kind = LOOP_THREAD;
	l->tag = (tir_thread_tag)tag;
	return 0;
}

int prim_parallel(tir_sched *s, tir_inst *in, tir_error *err)
{
	tir_stmt *l = serial_loop(s, in, err);
	if (!l || check_data_parallel(l, "parallel", err))
		return -1;
	l->loop_kind = LOOP_PARALLEL;
	return 0;
}

int prim_vectorize(tir_sched *s, tir_inst *in, tir_error *err)
{
	tir_stmt *l = serial_loop(s, in, err);
	if (!l || check_data_parallel(l, "vectorized", err))
		return -1;
	for (int i = 0; i < l->nkids; i++)
		if (l->kids[i]->kind == STMT_FOR)
			return tir_fail(err, "loop \"%s\" contains loop \"%s\"; only innermost loops can be vectorized",
					l->var->name, l->kids[i]->var->name);
	l->loop_kind = LOOP_VECTORIZED;
	return 0;
}

int prim_unroll(tir_sched *s, tir_inst *in, tir_error *err)
{
	tir_stmt *l = serial_loop(s, in, err);
	if (!l)
		return -1;
	l->loop_kind = LOOP_UNROLLED;
	return 0;
}

static int add_ann(tir_ann *ann, int *n, const char *key, int64_t value, tir_arena *a,
		   tir_error *err)
{
	for (int i = 0; i < *n; i++)
		if (!strcmp(ann[i].key, key)) {
			ann[i].value = value;
			return 0;
		}
	if (*n == TIR_MAX_ANN)
		return tir_fail(err, "more than %d annotations", TIR_MAX_ANN);
	ann[*n].key = arena_strdup(a, key);
	ann[*n].value = value;
	(*n)++;
	return 0;
}

int prim_annotate(tir_sched *s, tir_inst *in, tir_error *err)
{
	/* the value is a literal attribute, or an integer RV (a sampled
	 * decision, so that mutating the sample changes the annotation) */
	int64_t value;
	if (in->nin == 2 && in->nattr == 0) {
		if (sched_value(s, in->in[1], &value, err))
			return -1;
	} else if (in->nin == 1 && in->nattr == 1) {
		value = in->attr[0];
	} else {
		return tir_fail(err, "takes a block or loop, a key and an integer value");
	}
	if (!in->str || !*in->str)
		return tir_fail(err, "takes a block or loop, a key and an integer value");
	if (strlen(in->str) > 64)
		return tir_fail(err, "annotation key longer than 64 characters");
	if (!strcmp(in->str, TIR_TENSORIZE_ANN))
		return tir_fail(err, "annotation key \"%s\" is reserved: use tensorize", in->str);
	for (const char *c = in->str; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
			return tir_fail(err, "annotation key \"%s\": use lowercase letters, digits and _", in->str);
	int rv = in->in[0].rv;
	if (rv < 0 || rv >= s->nrv)
		return tir_fail(err, "expected a block or loop");
	if (s->rv[rv].kind == RV_LOOP) {
		tir_stmt *l = sched_loop(s, in->in[0], err);
		return l ? add_ann(l->ann, &l->nann, in->str, value, &s->p->arena, err) : -1;
	}
	if (s->rv[rv].kind == RV_BLOCK) {
		tir_block *b = sched_block(s, in->in[0], err);
		return b ? add_ann(b->ann, &b->nann, in->str, value, &s->p->arena, err) : -1;
	}
	return tir_fail(err, "expected a block or loop, got an integer");
}
