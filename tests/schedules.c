/*
 * schedules.c — see schedules.h.  Every step goes through the public schedule
 * API, so the result is also a trace that replays.
 */
#include <stdio.h>
#include <string.h>
#include "schedules.h"
#include "ir/ir.h"

#define TRY(call, what) do { if ((call) < 0) { \
	tir_error e_ = *err; \
	return tir_fail(err, "%s: %s", what, e_.msg); } } while (0)

typedef struct nest {
	int n, ns, nr;
	int loop[TIR_MAX_ITERS];          /* RVs, outermost first */
	int spatial[TIR_MAX_ITERS];       /* RVs of spatial loops, in order */
	int64_t sext[TIR_MAX_ITERS];
	int reduce[TIR_MAX_ITERS];
	int64_t rext[TIR_MAX_ITERS];
} nest;

/* The compute block's loops by the kind of iterator each one feeds (in the
 * initial program each loop binds exactly one iterator). */
static int nest_of(tir_sched *s, int block, nest *n, tir_error *err)
{
	memset(n, 0, sizeof *n);
	n->n = tir_get_loops(s, block, n->loop, TIR_MAX_ITERS, err);
	if (n->n < 0)
		return -1;
	const tir_program *p = tir_sched_program(s);
	const tir_block *b = program_find_block(p, "compute");
	tir_stmt *loops[TIR_MAX_ITERS];
	stmt_loops(b->stmt, loops, TIR_MAX_ITERS);
	for (int i = 0; i < n->n; i++) {
		bool red = false;
		for (int k = 0; k < b->niters; k++)
			if (b->iters[k].kind == ITER_REDUCE && expr_uses_var(b->iters[k].binding, loops[i]->var))
				red = true;
		if (red) {
			n->rext[n->nr] = loops[i]->extent;
			n->reduce[n->nr++] = n->loop[i];
		} else {
			n->sext[n->ns] = loops[i]->extent;
			n->spatial[n->ns++] = n->loop[i];
		}
	}
	return 0;
}

/* The largest divisor of x not above cap; cap itself when no divisor comes
 * near it and x is large (a tile that needs a predicate). */
static int64_t pick(int64_t x, int64_t cap)
{
	if (cap >= x)
		return x;
	int64_t d = cap;
	while (x % d)
		d--;
	return d * 4 <= cap ? cap : d;
}

static bool has_block(tir_sched *s, const char *name)
{
	return program_find_block(tir_sched_program(s), name) != NULL;
}

int sched_cpu_tiled(tir_sched *s, tir_error *err)
{
	int b;
	if (has_block(s, "pad")) {
		int pad;
		TRY(pad = tir_get_block(s, "pad", err), "get pad");
		TRY(tir_compute_inline(s, pad, err), "inline pad");
	}
	TRY(b = tir_get_block(s, "compute", err), "get compute");
	nest n;
	TRY(nest_of(s, b, &n, err), "loops");
	int outer[TIR_MAX_ITERS], inner[TIR_MAX_ITERS], no = 0, ni = 0;
	for (int i = 0; i < n.ns; i++) {
		int64_t f = i == n.ns - 1 ? 8 : 4;
		if (n.sext[i] < 2 * f) {
			outer[no++] = n.spatial[i];
			continue;
		}
		tir_int fac[2] = { TIR_LIT(0), TIR_LIT(pick(n.sext[i], f)) };
		int o[2];
		TRY(tir_split(s, n.spatial[i], 2, fac, o, err), "split spatial");
		outer[no++] = o[0];
		inner[ni++] = o[1];
	}
	int order[3 * TIR_MAX_ITERS], k = 0;
	for (int i = 0; i < no; i++) order[k++] = outer[i];
	for (int i = 0; i < n.nr; i++) order[k++] = n.reduce[i];
	for (int i = 0; i < ni; i++) order[k++] = inner[i];
	TRY(tir_reorder(s, k, order, err), "reorder");
	int par = outer[0];
	if (no >= 2)
		TRY(par = tir_fuse(s, 2, outer, err), "fuse outer tiles");
	TRY(tir_parallel(s, par, err), "parallel");
	if (ni)
		TRY(tir_vectorize(s, inner[ni - 1], err), "vectorize");
	if (has_block(s, "epilogue")) {
		int e, l[TIR_MAX_ITERS], nl;
		TRY(e = tir_get_block(s, "epilogue", err), "get epilogue");
		TRY(nl = tir_get_loops(s, e, l, TIR_MAX_ITERS, err), "epilogue loops");
		int f;
		TRY(f = tir_fuse(s, nl > 1 ? 2 : 1, l, err), "fuse epilogue");
		TRY(tir_parallel(s, f, err), "parallel epilogue");
	}
	return 0;
}

/* A cooperative fetch: the copy block's loops under the compute_at loop are
 * fused and spread over `threads` threads. */
static int cooperative_fetch(tir_sched *s, int copy, int depth, int64_t threads, tir_error *err)
{
	int l[TIR_MAX_ITERS], nl;
	TRY(nl = tir_get_loops(s, copy, l, TIR_MAX_ITERS, err), "copy loops");
	int f;
	TRY(f = tir_fuse(s, nl - depth, l + depth, err), "fuse copy loops");
	tir_int fac[2] = { TIR_LIT(0), TIR_LIT(threads) };
	int o[2];
	TRY(tir_split(s, f, 2, fac, o, err), "split copy");
	TRY(tir_bind(s, o[1], "threadIdx.x", err), "bind copy");
	return 0;
}

int sched_gpu_tiled(tir_sched *s, tir_error *err)
{
	int b;
	TRY(b = tir_get_block(s, "compute", err), "get compute");
	nest n;
	TRY(nest_of(s, b, &n, err), "loops");
	/* spatial tiles: threads from the innermost loops outward, 256 at most */
	int bl[TIR_MAX_ITERS], tl[TIR_MAX_ITERS], il[TIR_MAX_ITERS];
	int64_t budget = 256, threads = 1;
	for (int i = n.ns - 1; i >= 0; i--) {
		int64_t ext = n.sext[i];
		int64_t t = pick(ext, i == n.ns - 1 ? 32 : budget < 16 ? budget : 16);
		if (t > budget)
			t = budget;
		budget /= t;
		threads *= t;
		int64_t rest = (ext + t - 1) / t;
		int64_t in = i >= n.ns - 2 ? pick(rest, 4) : 1;
		tir_int fac[3] = { TIR_LIT(0), TIR_LIT(t), TIR_LIT(in) };
		int o[3];
		TRY(tir_split(s, n.spatial[i], 3, fac, o, err), "split spatial");
		bl[i] = o[0];
		tl[i] = o[1];
		il[i] = o[2];
	}
	/* the longest reduction loop staged by shared-memory tiles: its outer
	 * part outermost, the other reduction loops inside it */
	int ko = -1, ki = -1, big = 0;
	int order[4 * TIR_MAX_ITERS], k = 0;
	for (int i = 1; i < n.nr; i++)
		if (n.rext[i] > n.rext[big])
			big = i;
	for (int i = 0; i < n.ns; i++) order[k++] = bl[i];
	for (int i = 0; i < n.ns; i++) order[k++] = tl[i];
	if (n.nr) {
		/* a short loop is staged one step at a time, a long one 8 */
		int64_t inner = n.rext[big] >= 16 ? pick(n.rext[big], 8) : 1;
		tir_int fac[2] = { TIR_LIT(0), TIR_LIT(inner) };
		int o[2];
		TRY(tir_split(s, n.reduce[big], 2, fac, o, err), "split reduction");
		ko = o[0];
		ki = o[1];
		order[k++] = ko;
		for (int i = 0; i < n.nr; i++)
			if (i != big)
				order[k++] = n.reduce[i];
		order[k++] = ki;
	}
	for (int i = 0; i < n.ns; i++) order[k++] = il[i];
	TRY(tir_reorder(s, k, order, err), "reorder");
	int bx, tx;
	TRY(bx = tir_fuse(s, n.ns, bl, err), "fuse blocks");
	TRY(tx = tir_fuse(s, n.ns, tl, err), "fuse threads");
	TRY(tir_bind(s, bx, "blockIdx.x", err), "bind blockIdx.x");
	TRY(tir_bind(s, tx, "threadIdx.x", err), "bind threadIdx.x");
	/* registers for the accumulator, written back per thread */
	int wb;
	TRY(wb = tir_cache_write(s, b, 0, "local", err), "cache_write");
	TRY(tir_reverse_compute_at(s, wb, tx, err), "reverse_compute_at");
	/* shared-memory stages for both inputs (reads 0 and 1) */
	for (int r = 0; r < 2; r++) {
		int copy;
		TRY(copy = tir_cache_read(s, b, r, "shared", err), "cache_read");
		TRY(tir_compute_at(s, copy, ko, err), "compute_at");
		TRY(cooperative_fetch(s, copy, 3, threads, err), "cooperative fetch");
	}
	if (has_block(s, "pad")) {
		int pad;
		TRY(pad = tir_get_block(s, "pad", err), "get pad");
		TRY(tir_compute_inline(s, pad, err), "inline pad");
	}
	if (has_block(s, "epilogue")) {
		int e;
		TRY(e = tir_get_block(s, "epilogue", err), "get epilogue");
		TRY(tir_reverse_compute_inline(s, e, err), "inline epilogue");
	}
	if (ki >= 0)
		TRY(tir_unroll(s, ki, err), "unroll");
	/* the per-thread tile unrolled, so its accumulators live in registers */
	for (int i = 0; i < n.ns; i++)
		TRY(tir_unroll(s, il[i], err), "unroll inner tile");
	return 0;
}
