/*
 * cuda_reduce.c — the CUDA backend's cross-thread reduction.
 *
 * Cross-thread reduction: a loop bound to threadIdx.x that feeds a reduction
 * iterator of a block annotated "cross_thread_reduction" (the only block
 * under it; verify/threading.c admits nothing else) becomes a per-thread
 * partial result in a register over the loops under it, then a tree across
 * the threads (warp shuffles, and a small static shared array between warps
 * when the extent is a multiple of 32; a shared-memory tree otherwise), then
 * one thread writes store = combine(init if some thread ran the block's
 * first reduction step, else store, partial), if any thread ran the block
 * at all (its predicate may be false everywhere).  Every thread reaches the
 * barriers: the loop is never guarded.
 *
 * The block's reducer combines (reducers.def): a sum adds, a max or a min
 * takes tir_maxf / tir_minf (cg_combine_fn), the incoming value first and
 * the accumulator second.  A thread's partial starts at the reducer's
 * identity (0, -inf, +inf), and so does what a lane holds that has nothing
 * (a thread whose steps all fall outside the predicate, the slots past the
 * last warp), so they change no result.  A sum prints as it always did:
 * tir_xacc += ..., (T)0.
 *
 * cu_hw_loop (cuda.c) hands a thread loop to cu_xthread_loop when
 * cu_xthread_block finds its block; cu_stmt prints that block, while
 * cu_gen.xblock names it, as cu_xthread_step.
 */
#include <string.h>
#include "cuda.h"

static bool block_annotated(const tir_block *b, const char *key)
{
	for (int i = 0; i < b->nann; i++)
		if (b->ann[i].key && !strcmp(b->ann[i].key, key) && b->ann[i].value)
			return true;
	return false;
}

/* The block whose reduction the thread loop l spreads over threads: an
 * annotated block under l with a reduction iterator fed by l; NULL if none. */
const tir_block *cu_xthread_block(const tir_stmt *l)
{
	if (!cu_is_thread_tag(l->tag))
		return NULL;
	tir_block *bs[64];
	int n = stmt_blocks((tir_stmt *)l, bs, 64);
	for (int i = 0; i < n && i < 64; i++) {
		if (!block_annotated(bs[i], "cross_thread_reduction"))
			continue;
		for (int k = 0; k < bs[i]->niters; k++)
			if (bs[i]->iters[k].kind == ITER_REDUCE &&
			    expr_uses_var(bs[i]->iters[k].binding, l->var))
				return bs[i];
	}
	return NULL;
}

/* Whether e uses the variable of l or of a loop under it. */
static bool uses_loops_under(const tir_expr *e, const tir_stmt *l)
{
	if (!e)
		return false;
	if (l->kind == STMT_FOR && expr_uses_var(e, l->var))
		return true;
	for (int i = 0; i < l->nkids; i++)
		if (uses_loops_under(e, l->kids[i]))
			return true;
	return false;
}

static bool has_thread_loop(const tir_stmt *s)
{
	for (int i = 0; i < s->nkids; i++)
		if ((s->kids[i]->kind == STMT_FOR && s->kids[i]->loop_kind == LOOP_THREAD) ||
		    has_thread_loop(s->kids[i]))
			return true;
	return false;
}

/* One instance of the cross-thread block: its value combined into this
 * thread's partial result. */
void cu_xthread_step(cu_gen *g, const tir_block *b, int depth)
{
	tir_buf *o = g->c.out;
	buf_indent(o, depth);
	buf_printf(o, "{ /* block %s: this thread's partial %s */\n", b->name,
		   b->reduce == REDUCE_SUM ? "sum" : reduce_name(b->reduce));
	cg_block_iters(&g->c, b, depth + 1);
	int d = depth + 1;
	buf_indent(o, d);
	if (b->predicate) {
		buf_puts(o, "if (");
		cg_expr(&g->c, b->predicate);
		buf_puts(o, ") {\n");
		d++;
		buf_indent(o, d);
	}
	buf_puts(o, "tir_xany = 1;\n");
	if (b->init) {
		int nred = 0;
		buf_indent(o, d);
		for (int i = 0; i < b->niters; i++) {
			if (b->iters[i].kind != ITER_REDUCE)
				continue;
			buf_puts(o, nred++ ? " && " : "if (");
			cg_var(o, b->iters[i].var);
			buf_puts(o, " == 0");
		}
		buf_puts(o, nred ? ")\n" : "\n");
		buf_indent(o, d + (nred ? 1 : 0));
		buf_puts(o, "tir_xfirst = 1;\n");
	}
	buf_indent(o, d);
	const char *fn = cg_combine_fn(b->reduce, b->store->dtype);
	if (fn) {
		buf_printf(o, "tir_xacc = %s((", fn);
		cg_expr(&g->c, b->value);
		buf_puts(o, "), tir_xacc);\n");
	} else {
		buf_puts(o, "tir_xacc = tir_xacc + (");
		cg_expr(&g->c, b->value);
		buf_puts(o, ");\n");
	}
	if (b->predicate) {
		buf_indent(o, d - 1);
		buf_puts(o, "}\n");
	}
	buf_indent(o, depth);
	buf_puts(o, "}\n");
}

/* The identity of b's reducer as a value of type vt: (vt)0 for a sum. */
static void identity(cu_gen *g, const tir_block *b, const char *vt)
{
	if (b->reduce == REDUCE_SUM)
		buf_printf(g->c.out, "(%s)0", vt);
	else
		cg_identity(&g->c, b->reduce, b->store->dtype);
}

/* acc = combine(acc, v): `acc += v;` for a sum, else acc = fn(v, acc). */
static void combine(cu_gen *g, const char *fn, const char *acc, const char *v)
{
	if (fn)
		buf_printf(g->c.out, "%s = %s(%s, %s);\n", acc, fn, v, acc);
	else
		buf_printf(g->c.out, "%s += %s;\n", acc, v);
}

/* The thread loop l of a cross-thread reduction of block b (see the top). */
void cu_xthread_loop(cu_gen *g, const tir_stmt *l, const tir_block *b, int depth)
{
	tir_lowered *L = g->c.L;
	tir_buf *o = g->c.out;
	tir_block *bs[2];
	int64_t x = l->extent;
	if (stmt_blocks((tir_stmt *)l, bs, 2) != 1 || has_thread_loop(l))
		cu_fail(g, "cuda: cross-thread reduction of block \"%s\": loop \"%s\" must hold "
		     "that block only and no thread-bound loop", b->name, l->var->name);
	if (l->tag != TIR_THREAD_X || x != g->launch[TIR_THREAD_X] ||
	    g->launch[TIR_THREAD_Y] > 1 || g->launch[TIR_THREAD_Z] > 1 || g->guard)
		cu_fail(g, "cuda: cross-thread reduction of block \"%s\": loop \"%s\" must be "
		     "bound to threadIdx.x over the whole launch (%lld threads), unguarded",
		     b->name, l->var->name, (long long)g->launch[TIR_THREAD_X]);
	if (b->reduce == REDUCE_NONE || b->store->scope == TIR_SCOPE_LOCAL)
		cu_fail(g, "cuda: cross-thread reduction of block \"%s\": needs a reduction into a "
		     "global or shared buffer", b->name);
	tir_expr *off = lower_offset(L, b->store, b->store->ndim, b->store_idx);
	off = lower_simplify(L, lower_bind(L, b, off));
	tir_expr *init = b->init ? lower_simplify(L, lower_bind(L, b, b->init)) : NULL;
	if (uses_loops_under(off, l) || uses_loops_under(init, l))
		cu_fail(g, "cuda: cross-thread reduction of block \"%s\": its output element "
		     "depends on loop \"%s\" or a loop under it", b->name, l->var->name);
	if (g->failed)
		return;
	const char *vt = g->c.d->value[b->store->dtype];
	const char *name = g->c.bufname[b->store->id];
	const char *scvt = g->c.d->store_cvt[b->store->dtype];
	const char *lcvt = g->c.d->load_cvt[b->store->dtype];

	buf_indent(o, depth);
	buf_printf(o, "{ /* %s: threadIdx.x, cross-thread reduction of block %s */\n",
		   l->var->name, b->name);
	int d = depth + 1;
	buf_indent(o, d);
	buf_printf(o, "const %s ", g->c.d->idx_type);
	cg_var(o, l->var);
	buf_printf(o, " = (%s)threadIdx.x;\n", g->c.d->idx_type);
	const char *fn = cg_combine_fn(b->reduce, b->store->dtype);
	buf_indent(o, d);
	buf_printf(o, "%s tir_xacc = ", vt);
	identity(g, b, vt);
	buf_puts(o, ";\n");
	buf_indent(o, d);
	buf_puts(o, "int tir_xany = 0, tir_xfirst = 0;\n");
	cu_allocs(g, l, d);
	const tir_block *save = g->xblock;
	g->xblock = b;
	cu_list(g, l->kids, l->nkids, d, false);
	g->xblock = save;

	/* the combination over the threads, in thread 0 */
	buf_indent(o, d);
	buf_puts(o, "{ /* across the threads */\n");
	int e = d + 1;
	if (x % 32 == 0) {
		int64_t warps = x / 32;
		buf_indent(o, e);
		buf_puts(o, "for (int tir_o = 16; tir_o > 0; tir_o >>= 1)\n");
		buf_indent(o, e + 1);
		combine(g, fn, "tir_xacc", "__shfl_down_sync(0xffffffffu, tir_xacc, tir_o)");
		if (warps > 1) {
			buf_indent(o, e);
			buf_printf(o, "__shared__ %s tir_xred[%lld];\n", vt, (long long)warps);
			buf_indent(o, e);
			buf_puts(o, "if ((threadIdx.x & 31) == 0)\n");
			buf_indent(o, e + 1);
			buf_puts(o, "tir_xred[threadIdx.x >> 5] = tir_xacc;\n");
			buf_indent(o, e);
			buf_puts(o, "__syncthreads();\n");
			buf_indent(o, e);
			buf_printf(o, "tir_xacc = threadIdx.x < %lld ? tir_xred[threadIdx.x] : ",
				   (long long)warps);
			identity(g, b, vt);
			buf_puts(o, ";\n");
			buf_indent(o, e);
			buf_puts(o, "if (threadIdx.x < 32)\n");
			buf_indent(o, e + 1);
			buf_puts(o, "for (int tir_o = 16; tir_o > 0; tir_o >>= 1)\n");
			buf_indent(o, e + 2);
			combine(g, fn, "tir_xacc", "__shfl_down_sync(0xffffffffu, tir_xacc, tir_o)");
		}
	} else {
		int64_t p2 = 1;
		while (p2 < x)
			p2 *= 2;
		buf_indent(o, e);
		buf_printf(o, "__shared__ %s tir_xred[%lld];\n", vt, (long long)x);
		buf_indent(o, e);
		buf_puts(o, "tir_xred[threadIdx.x] = tir_xacc;\n");
		buf_indent(o, e);
		buf_puts(o, "__syncthreads();\n");
		buf_indent(o, e);
		buf_printf(o, "for (int tir_s = %lld; tir_s > 0; tir_s >>= 1) {\n", (long long)(p2 / 2));
		buf_indent(o, e + 1);
		buf_printf(o, "if (threadIdx.x < tir_s && threadIdx.x + tir_s < %lld)\n", (long long)x);
		buf_indent(o, e + 2);
		combine(g, fn, "tir_xred[threadIdx.x]", "tir_xred[threadIdx.x + tir_s]");
		buf_indent(o, e + 1);
		buf_puts(o, "__syncthreads();\n");
		buf_indent(o, e);
		buf_puts(o, "}\n");
		buf_indent(o, e);
		buf_puts(o, "tir_xacc = tir_xred[0];\n");
	}
	/* barriers too: tir_xred is free again after them */
	buf_indent(o, e);
	buf_puts(o, "tir_xany = __syncthreads_or(tir_xany);\n");
	buf_indent(o, e);
	buf_puts(o, "tir_xfirst = __syncthreads_or(tir_xfirst);\n");
	buf_indent(o, d);
	buf_puts(o, "}\n");

	/* the write, by one thread */
	buf_indent(o, d);
	buf_puts(o, "if (threadIdx.x == 0 && tir_xany) {\n");
	buf_indent(o, d + 1);
	buf_printf(o, "%s[", name);
	cg_index(&g->c, b->store, off);
	buf_puts(o, "] = ");
	if (scvt)
		buf_printf(o, "%s(", scvt);
	if (fn)
		buf_printf(o, "%s(tir_xacc, ", fn);
	buf_puts(o, "(");
	if (init) {
		buf_puts(o, "tir_xfirst ? (");
		cg_expr(&g->c, init);
		buf_puts(o, ") : ");
	}
	if (lcvt)
		buf_printf(o, "%s(", lcvt);
	buf_printf(o, "%s[", name);
	cg_index(&g->c, b->store, off);
	buf_puts(o, "]");
	if (lcvt)
		buf_puts(o, ")");
	buf_puts(o, fn ? "))" : ") + tir_xacc");
	if (scvt)
		buf_puts(o, ")");
	buf_puts(o, ";\n");
	buf_indent(o, d);
	buf_puts(o, "}\n");
	buf_indent(o, depth);
	buf_puts(o, "}\n");
}
