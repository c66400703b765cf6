/*
 * interp.c — a program run as docs/ir-semantics.md defines it, in double
 * precision: the meaning of a program, computed.  Measurement's reference
 * is this interpreter run on a workload's unscheduled program
 * (measure/reference.c), so it is written from the semantics, never from
 * the code generators: a bug in codegen cannot hide in both.
 *
 * Values.  Every buffer element is a double; every operation of exprs.def,
 * mathfns.def and reducers.def is done on doubles by the functions of
 * interp.h's first section, the one definition both evaluators use.
 * Float32 values are never rounded (the reference is the exact computation
 * the float32 code approximates); a cast to float16 / bfloat16, and a store
 * into a buffer of either, rounds to that type (to nearest, ties to even,
 * overflow to infinity), as the generated code does when it converts to
 * their bits; integer casts and stores truncate toward zero and wrap to
 * their width, as C's conversions do on the machines we build for
 * (integers are exact while they stay below 2^53).  A reduction into a
 * float16 buffer therefore rounds at every step, as the code does.
 *
 * Two evaluators, one meaning:
 *   - the tree evaluator (eval, run_instance, walk): every loop in order,
 *     every block instance by its definition (bindings, predicate, init on
 *     the first reduction step, the reducer's combination), each
 *     expression walked node by node; selects, `and` and `or` evaluate
 *     only what they need.  Any program, slowly: the definition, and the
 *     path for anything the second does not take.
 *   - the nest evaluator (interp_nest.c): a top-level loop nest with
 *     one loop per iterator of one block, bound one to one (what compute
 *     definitions build).  Its spatial iterators write distinct elements,
 *     so their order is free; each element's reduction steps stay in the
 *     program's order.  The spatial points are cut into tiles of up to
 *     TILE_LANES lanes (rows of the other spatial iterators times a chunk
 *     of the innermost one), which run on every core (tir_parallel_for),
 *     and the block's body is compiled once into instructions over a
 *     tile's lanes: each load's address resolved to a per-row offset, a
 *     stride along the row and a part that moves with the reduction
 *     iterators.  A sum of products of two loads (every contraction) runs
 *     as one multiply-add loop over the tile.  Results never depend on the
 *     number of threads, and equal the tree evaluator's (tests/check_interp.c).
 *
 * Out-of-bounds loads are errors, never guesses: the tree evaluator checks
 * every index; the nest evaluator resolves statically only the loads whose
 * indices provably stay in their buffer over the iteration domain, and
 * checks the others lane by lane, skipping the lanes where the select (or
 * `and` / `or`) around them does not take them.
 *
 * Storage: parameters are the caller's arrays; every other buffer is
 * allocated whole (its logical shape, row-major: storage_align and compaction
 * are layouts of the generated code, not meaning), filled with NaN so that
 * reading an element never written shows.  Loops bound to threads are serial
 * loops (a threadIdx loop nested under one of the same tag, which on a GPU
 * is the same index again, is run as a nested loop: its copies are
 * idempotent); tensorized loops run their scalar blocks.
 */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ir.h"
#include "interp.h"

/* ---- the machine -------------------------------------------------------------------- */

void interp_fail(interp *I, int64_t at, const char *fmt, ...)
{
	pthread_mutex_lock(&I->lock);
	if (!atomic_load(&I->failed) || at < I->err_at) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(I->err.msg, sizeof I->err.msg, fmt, ap);
		va_end(ap);
		I->err_at = at;
	}
	atomic_store(&I->failed, 1);
	pthread_mutex_unlock(&I->lock);
}

/* "[1, -1, 3]" of n indices, into s. */
static void index_text(char *s, size_t size, int n, const int64_t *idx)
{
	size_t len = 0;
	s[0] = '\0';
	for (int d = 0; d < n && len < size; d++)
		len += (size_t)snprintf(s + len, size - len, "%s%lld", d ? ", " : "[",
					(long long)idx[d]);
	if (len < size)
		snprintf(s + len, size - len, "]");
}

int64_t interp_offset(interp *I, const tir_block *blk, const tir_buffer *b,
		      const double *idx, int64_t at)
{
	const ibuf *ib = &I->buf[b->id];
	int64_t off = 0;
	for (int d = 0; d < b->ndim; d++) {
		if (!(idx[d] >= 0 && idx[d] < (double)b->shape[d])) {
			int64_t iv[TIR_MAX_DIMS], sh[TIR_MAX_DIMS];
			char is[200], ss[200];
			for (int k = 0; k < b->ndim; k++) {
				iv[k] = fabs(idx[k]) < 0x1p62 ? (int64_t)idx[k] : INT64_MIN;
				sh[k] = b->shape[k];
			}
			index_text(is, sizeof is, b->ndim, iv);
			index_text(ss, sizeof ss, b->ndim, sh);
			interp_fail(I, at, "interp: block \"%s\" accesses %s%s outside its shape %s",
				blk->name, b->name, is, ss);
			return -1;
		}
		off += (int64_t)idx[d] * ib->stride[d];
	}
	if (!ib->data) {
		interp_fail(I, at, "interp: block \"%s\" accesses buffer %s, which was inlined away",
			blk->name, b->name);
		return -1;
	}
	return off;
}

/* ---- the tree evaluator: the definition, one instance at a time ------------------------ */

double interp_eval(tev *t, const tir_expr *e)
{
	switch (e->kind) {
	case E_INT: return (double)e->ival;
	case E_FLOAT: return e->fval;
	case E_VAR: return (double)t->vals[e->var->id];
	case E_SELECT:
		return interp_eval(t, e->c) != 0 ? interp_eval(t, e->a) : interp_eval(t, e->b);
	case E_AND: return interp_eval(t, e->a) != 0 && interp_eval(t, e->b) != 0;
	case E_OR: return interp_eval(t, e->a) != 0 || interp_eval(t, e->b) != 0;
	case E_NOT: return interp_eval(t, e->a) == 0;
	case E_CAST: return to_dtype(e->dtype, interp_eval(t, e->a));
	case E_CALL: return mathfn(e->fn, interp_eval(t, e->a));
	case E_LOAD: {
		double idx[TIR_MAX_DIMS];
		for (int d = 0; d < e->nidx; d++)
			idx[d] = interp_eval(t, e->idx[d]);
		int64_t off = interp_offset(t->I, t->b, e->buf, idx, t->at);
		return off < 0 ? NAN : t->I->buf[e->buf->id].data[off];
	}
	default:
		return op_bin(e->kind, e->dtype, interp_eval(t, e->a), interp_eval(t, e->b));
	}
}

/* One instance of b at the loop values in t->vals, as ir-semantics.md says. */
static void run_instance(tev *t, const tir_block *b)
{
	t->b = b;
	for (int i = 0; i < b->niters; i++)
		t->vals[b->iters[i].var->id] = (int64_t)interp_eval(t, b->iters[i].binding);
	if (b->predicate && interp_eval(t, b->predicate) == 0)
		return;
	double idx[TIR_MAX_DIMS];
	for (int d = 0; d < b->store->ndim; d++)
		idx[d] = interp_eval(t, b->store_idx[d]);
	int64_t off = interp_offset(t->I, b, b->store, idx, t->at);
	if (off < 0)
		return;
	double *dst = &t->I->buf[b->store->id].data[off];
	tir_dtype st = b->store->dtype;
	if (b->reduce == REDUCE_NONE) {
		*dst = to_dtype(st, interp_eval(t, b->value));
		return;
	}
	if (b->init) {
		bool first = true;
		for (int i = 0; i < b->niters && first; i++)
			first = b->iters[i].kind != ITER_REDUCE || t->vals[b->iters[i].var->id] == 0;
		if (first)
			*dst = to_dtype(st, interp_eval(t, b->init));
	}
	double v = interp_eval(t, b->value);
	*dst = to_dtype(st, op_bin(reduce_combiner(b->reduce), st, *dst, v));
}

static void walk(tev *t, const tir_stmt *s)
{
	if (s->dead || atomic_load(&t->I->failed))
		return;
	switch (s->kind) {
	case STMT_SEQ:
		for (int i = 0; i < s->nkids; i++)
			walk(t, s->kids[i]);
		break;
	case STMT_FOR:
		for (int64_t v = 0; v < s->extent && !atomic_load(&t->I->failed); v++) {
			t->vals[s->var->id] = v;
			for (int i = 0; i < s->nkids; i++)
				walk(t, s->kids[i]);
		}
		break;
	case STMT_BLOCK:
		run_instance(t, s->block);
		break;
	}
}

/* ---- the program ------------------------------------------------------------------------- */

static int count_blocks(const tir_stmt *s)
{
	if (s->dead)
		return 0;
	if (s->kind == STMT_BLOCK)
		return 1;
	int n = 0;
	for (int i = 0; i < s->nkids; i++)
		n += count_blocks(s->kids[i]);
	return n;
}

int interp_run(const tir_program *p, double *const *params, interp_opts *o,
	       tir_error *err)
{
	interp I = { .p = p };
	I.threads = o && o->threads > 0 ? o->threads : tir_cores();
	pthread_mutex_init(&I.lock, NULL);
	atomic_init(&I.failed, 0);
	I.buf = xcalloc((size_t)p->nbufs + 1, sizeof *I.buf);
	int rc = 0;
	for (int i = 0; i < p->nbufs && rc == 0; i++) {
		const tir_buffer *b = p->bufs[i];
		ibuf *ib = &I.buf[i];
		ib->elems = 1;
		for (int d = b->ndim - 1; d >= 0; d--) {
			ib->stride[d] = ib->elems;
			ib->elems *= b->shape[d];
		}
		if (i < p->nparams) {
			ib->data = params[i];
			continue;
		}
		if (b->dead)
			continue;
		ib->data = malloc(sizeof(double) * (size_t)ib->elems + 1);
		if (!ib->data) {
			rc = tir_fail(err, "interp: no memory for buffer %s (%lld elements)", b->name,
				      (long long)ib->elems);
			break;
		}
		ib->owned = true;
		for (int64_t k = 0; k < ib->elems; k++)
			ib->data[k] = NAN;
	}
	int64_t *vals = xcalloc((size_t)p->nvars + 1, sizeof(int64_t));
	tev t = { &I, vals, NULL, 0 };
	for (int i = 0; rc == 0 && i < p->root->nkids && !atomic_load(&I.failed); i++) {
		const tir_stmt *s = p->root->kids[i];
		nest *ns = (!o || !o->tree) && s->kind == STMT_FOR ? interp_nest_plan(p, s) : NULL;
		if (ns) {
			interp_nest_run(&I, ns);
			interp_nest_free(ns);
			if (o)
				o->nest_blocks++;
		} else {
			walk(&t, s);
			if (o)
				o->tree_blocks += count_blocks(s);
		}
	}
	if (rc == 0 && atomic_load(&I.failed))
		rc = tir_fail(err, "%s", I.err.msg);
	free(vals);
	for (int i = 0; i < p->nbufs; i++)
		if (I.buf[i].owned)
			free(I.buf[i].data);
	free(I.buf);
	pthread_mutex_destroy(&I.lock);
	return rc;
}
