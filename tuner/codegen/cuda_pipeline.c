/*
 * cuda_pipeline.c — the CUDA backend's software pipelining: copy stages
 * fetched ahead by cp.async, or by the tensor memory accelerator (TMA) from
 * a producer warpgroup.
 *
 * Software pipelining: a serial loop annotated "software_pipeline" = S with
 * copy stages (lower_pipeline_stages) runs its copy stages S - 1 iterations
 * ahead of the rest, into ring copies of their shared buffers, with
 * cp.async (commit per iteration, wait_group S - 1, then a barrier); see
 * cu_pipelined_loop.  One annotated "tma" = 1 as well fetches its copy
 * stages with Hopper's tensor memory accelerator instead: the kernel gets a
 * producer warpgroup of its own (threadIdx.y one past the rest) whose one
 * thread issues a bulk tensor copy per box of each stage, S ring slots
 * handed over by mbarriers (full: the slot's bytes landed; empty: every
 * consumer thread is done reading it); see cu_tma_loop.
 *
 * cu_loop (cuda.c) hands a pipelined loop to cu_pipelined_loop or
 * cu_tma_loop; cu_kernel sets up the kernel's TMA pipeline beforehand
 * (cu_tma_prepare).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda.h"

/* The tensor memory accelerator (sm_90): a tensor map (CUtensorMap, 128
 * opaque bytes the runner encodes) taken by value as a __grid_constant__
 * kernel parameter; mbarriers in shared memory (init, arrive, arrive with
 * the bytes a copy will deliver, wait for a phase's parity); bulk tensor
 * copies of rank 1 to 5 completing on an mbarrier (tma_load_fn). */
static const char cuda_tma_prelude[] =
"struct __align__(64) tir_tmap { unsigned long long opaque[16]; };\n"
"TIR_DEV void tir_mbar_init(unsigned long long *b, unsigned n)\n"
"{\n"
"    asm volatile(\"mbarrier.init.shared::cta.b64 [%0], %1;\\n\" :: \"r\"(tir_smem_addr(b)), \"r\"(n) : \"memory\");\n"
"}\n"
"TIR_DEV void tir_mbar_init_fence() { asm volatile(\"fence.mbarrier_init.release.cluster;\\n\" ::: \"memory\"); }\n"
"TIR_DEV void tir_mbar_arrive(unsigned long long *b)\n"
"{\n"
"    asm volatile(\"mbarrier.arrive.shared::cta.b64 _, [%0];\\n\" :: \"r\"(tir_smem_addr(b)) : \"memory\");\n"
"}\n"
"TIR_DEV void tir_mbar_expect(unsigned long long *b, unsigned bytes)\n"
"{\n"
"    asm volatile(\"mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\\n\" ::\n"
"                 \"r\"(tir_smem_addr(b)), \"r\"(bytes) : \"memory\");\n"
"}\n"
"TIR_DEV void tir_mbar_wait(unsigned long long *b, unsigned parity)\n"
"{\n"
"    asm volatile(\"{\\n.reg .pred p;\\nTIR_WAIT:\\n\"\n"
"                 \"mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\\n\"\n"
"                 \"@!p bra TIR_WAIT;\\n}\\n\" :: \"r\"(tir_smem_addr(b)), \"r\"(parity) : \"memory\");\n"
"}\n";

/* tir_tma_load<rank>(dst, map, c0 .. c<rank-1>, bar): the box at those
 * coordinates (innermost first) into shared memory at dst. */
static void tma_load_fn(tir_buf *o, int rank)
{
	buf_printf(o, "TIR_DEV void tir_tma_load%d(void *dst, const tir_tmap *m", rank);
	for (int i = 0; i < rank; i++)
		buf_printf(o, ", int c%d", i);
	buf_puts(o, ", unsigned long long *bar)\n{\n");
	buf_printf(o, "    asm volatile(\"cp.async.bulk.tensor.%dd.shared::cluster.global."
		   "mbarrier::complete_tx::bytes [%%0], [%%1, {", rank);
	for (int i = 0; i < rank; i++)
		buf_printf(o, "%s%%%d", i ? ", " : "", i + 2);
	buf_printf(o, "}], [%%%d];\\n\"\n                 :: \"r\"(tir_smem_addr(dst)), "
		   "\"l\"(m)", rank + 2);
	for (int i = 0; i < rank; i++)
		buf_printf(o, ", \"r\"(c%d)", i);
	buf_puts(o, ", \"r\"(tir_smem_addr(bar)) : \"memory\");\n}\n");
}

void cu_tma_prelude(tir_buf *o, unsigned ranks)
{
	buf_puts(o, cuda_tma_prelude);
	for (int r = 1; r <= TIR_TMAP_RANK; r++)
		if (ranks & (1u << r))
			tma_load_fn(o, r);
	buf_puts(o, "\n");
}

/* The pointers to this iteration's copy of the ring buffers of pipelined
 * loop l: copy (l's variable) % S. */
static void ring_ptrs(cu_gen *g, const tir_stmt *l, int depth)
{
	tir_lowered *L = g->c.L;
	tir_buf *o = g->c.out;
	for (int i = 0; i < L->p->nbufs; i++) {
		const tir_alloc *a = &L->alloc[i];
		if (!a->used || a->ring < 2 || a->lca != l)
			continue;
		const char *st = g->c.d->storage[a->buf->dtype];
		buf_indent(o, depth);
		buf_printf(o, "%s *const %s = %s_ring + (", st, g->c.bufname[i], g->c.bufname[i]);
		cg_var(o, l->var);
		buf_printf(o, " %% %d) * %lld;\n", a->ring, (long long)a->slot);
	}
}

/* The copy stages of pipelined loop l for iteration `it` + `ahead` (`it`: a
 * C variable counting iterations), if that is below the extent, then the
 * commit of their cp.async group (empty when none). */
static void pipe_copies(cu_gen *g, const tir_stmt *l, const bool *stage, const char *it,
			int ahead, int depth)
{
	tir_buf *o = g->c.out;
	buf_indent(o, depth);
	buf_printf(o, "if (%s + %d < %lld) {\n", it, ahead, (long long)l->extent);
	buf_indent(o, depth + 1);
	buf_printf(o, "const %s ", g->c.d->idx_type);
	cg_var(o, l->var);
	buf_printf(o, " = %s + %d;\n", it, ahead);
	ring_ptrs(g, l, depth + 1);
	g->async = true;
	for (int k = 0; k < l->nkids; k++)
		if (stage[k])
			cu_stmt(g, l->kids[k], depth + 1);
	g->async = false;
	buf_indent(o, depth);
	buf_puts(o, "}\n");
	buf_indent(o, depth);
	buf_puts(o, "tir_cp_async_commit();\n");
}

/* A software-pipelined loop of S stages (lower_pipeline_stages): its copy
 * stages run S - 1 iterations ahead of the rest, into the next copy of their
 * ring buffers, by cp.async.  The prologue starts iterations 0..S-2; each
 * iteration k starts k + S - 1, waits until at most S - 1 groups are in
 * flight (k's has landed), and the barrier makes every thread's copies of k
 * visible; the barrier at the end keeps iteration k + 1 from overwriting the
 * copy that k read. */
void cu_pipelined_loop(cu_gen *g, const tir_stmt *l, int S, int depth)
{
	tir_buf *o = g->c.out;
	char pro[96], it[96];
	bool *stage = xcalloc((size_t)l->nkids + 1, sizeof *stage);
	for (int k = 0; k < l->nkids; k++)
		stage[k] = lower_copy_stage(g->c.L, l, l->kids[k]);
	tir_buf nb = { 0 };
	cg_var(&nb, l->var);
	snprintf(pro, sizeof pro, "tir_pro_%s", nb.s);
	snprintf(it, sizeof it, "tir_it_%s", nb.s);
	free(nb.s);
	buf_indent(o, depth);
	buf_printf(o, "/* %s: serial, software pipeline of %d stages (cp.async) */\n",
		   l->var->name, S);
	buf_indent(o, depth);
	buf_puts(o, "#pragma unroll\n");
	buf_indent(o, depth);
	buf_printf(o, "for (%s %s = 0; %s < %d; ++%s) {\n", g->c.d->idx_type, pro, pro, S - 1, pro);
	pipe_copies(g, l, stage, pro, 0, depth + 1);
	buf_indent(o, depth);
	buf_puts(o, "}\n");
	buf_indent(o, depth);
	buf_printf(o, "for (%s %s = 0; %s < %lld; ++%s) {\n", g->c.d->idx_type, it, it,
		   (long long)l->extent, it);
	pipe_copies(g, l, stage, it, S - 1, depth + 1);
	buf_indent(o, depth + 1);
	buf_printf(o, "TIR_CP_ASYNC_WAIT(%d);\n", S - 1);
	cu_sync(g, depth + 1, "this iteration's copies have landed");
	buf_indent(o, depth + 1);
	buf_puts(o, "{\n");
	buf_indent(o, depth + 2);
	buf_printf(o, "const %s ", g->c.d->idx_type);
	cg_var(o, l->var);
	buf_printf(o, " = %s;\n", it);
	ring_ptrs(g, l, depth + 2);
	cu_allocs(g, l, depth + 2);
	tir_stmt **rest = xcalloc((size_t)l->nkids + 1, sizeof *rest);
	int nrest = 0;
	for (int k = 0; k < l->nkids; k++)
		if (!stage[k])
			rest[nrest++] = l->kids[k];
	/* warpgroup MMAs: this iteration's group stays in flight into the
	 * next, which waits for it only when it has issued its own (its
	 * copies go to a ring copy no MMA still reads: lower_holds_wgmma) */
	tir_stmt *const *save = g->wg_overlap_list;
	if (lower_holds_wgmma(l))
		g->wg_overlap_list = rest;
	cu_list(g, rest, nrest, depth + 2, false);
	g->wg_overlap_list = save;
	free(rest);
	free(stage);
	buf_indent(o, depth + 1);
	buf_puts(o, "}\n");
	cu_sync(g, depth + 1, "the next iteration's copies overwrite a ring copy read here");
	buf_indent(o, depth);
	buf_puts(o, "}\n");
	cu_wg_drain(g, depth);
}

/* The boxes of TMA copy c (one tensor map, g->tma[m]): its destination's
 * 128-byte atom columns (the swizzle's span; the map's inner box), and the
 * outermost dimension of more than one element cut into `*chunks` boxes of
 * at most 256 (the copy engine's limit), every other dimension whole.
 * *box gets the map's box, innermost first; *cut the cut dimension (-1:
 * none).  0, or -1 when it cannot be cut so. */
static int tma_boxes(const lower_tma_copy *c, int *box, int *atoms, int *chunks, int *cut)
{
	const int n = c->src->ndim, eb = dtype_bytes(c->src->dtype);
	if ((c->ext[n - 1] * eb) % 128)
		return -1;
	*atoms = (int)(c->ext[n - 1] * eb / 128);
	box[0] = 128 / eb;
	*cut = -1;
	*chunks = 1;
	for (int d = 0; d < n - 1; d++) {
		int64_t e = c->ext[d];
		if (*cut < 0 && e > 1) {
			*cut = d;
			int64_t k = (e + 255) / 256;
			while (e % k)
				k++;
			*chunks = (int)k;
			e /= k;
		}
		if (e > 256)
			return -1;
		box[n - 1 - d] = (int)e;
	}
	return 0;
}

/* The pipelined loop of the kernel's TMA copies (g->tma_loop), S stages:
 * the producer warpgroup's first thread issues, for iteration k, once
 * consumers freed ring slot k % S (iteration k - S released it; the
 * empty mbarrier's phase), the slot's byte count on its full mbarrier and
 * every box of every copy stage, then the producer leaves the kernel; the
 * consumers wait for the full mbarrier's phase of k, run the rest of the
 * body and arrive on the slot's empty mbarrier once they are done with it
 * (with warpgroup MMAs left in flight into the next iteration: slot k - 1
 * after iteration k's MMAs were issued and k - 1's waited for). */
void cu_tma_loop(cu_gen *g, const tir_stmt *l, int S, int depth)
{
	tir_lowered *L = g->c.L;
	tir_buf *o = g->c.out;
	char it[96];
	tir_buf nb = { 0 };
	cg_var(&nb, l->var);
	snprintf(it, sizeof it, "tir_it_%s", nb.s);
	free(nb.s);
	int64_t bytes = 0;
	for (int c = 0; c < g->ntma; c++)
		bytes += L->alloc[g->tma[c].dst->id].elems * dtype_bytes(g->tma[c].dst->dtype);
	const long long ext = (long long)l->extent;
	const char *idx = g->c.d->idx_type;
	buf_indent(o, depth);
	buf_printf(o, "/* %s: serial, software pipeline of %d stages (TMA by the producer "
		   "warpgroup, threadIdx.y == %lld) */\n", l->var->name, S, (long long)g->tma_wgs);
	buf_indent(o, depth);
	buf_printf(o, "if (threadIdx.y == %lld) {\n", (long long)g->tma_wgs);
	buf_indent(o, depth + 1);
	buf_puts(o, "if (threadIdx.x == 0) {\n");
	buf_indent(o, depth + 2);
	buf_printf(o, "for (%s %s = 0; %s < %lld; ++%s) {\n", idx, it, it, ext, it);
	int d = depth + 3;
	buf_indent(o, d);
	buf_printf(o, "const %s ", idx);
	cg_var(o, l->var);
	buf_printf(o, " = %s;\n", it);
	ring_ptrs(g, l, d);
	buf_indent(o, d);
	buf_printf(o, "if (%s >= %d)\n", it, S);
	buf_indent(o, d + 1);
	buf_printf(o, "tir_mbar_wait(tir_bar + %d + %s %% %d, ((%s / %d) + 1) & 1);\n", S, it, S,
		   it, S);
	buf_indent(o, d);
	buf_printf(o, "tir_mbar_expect(tir_bar + %s %% %d, %lldu);\n", it, S, (long long)bytes);
	for (int c = 0; c < g->ntma; c++) {
		const lower_tma_copy *x = &g->tma[c];
		const int n = x->src->ndim;
		int box[TIR_TMAP_RANK], atoms, chunks, cut;
		tma_boxes(x, box, &atoms, &chunks, &cut);
		const tir_alloc *a = &L->alloc[x->dst->id];
		int64_t rows = a->elems / x->ext[n - 1];
		for (int at = 0; at < atoms; at++)
			for (int q = 0; q < chunks; q++) {
				buf_indent(o, d);
				buf_printf(o, "tir_tma_load%d((unsigned char *)%s + %lld, &tir_tmap%d",
					   n, g->c.bufname[x->dst->id],
					   (long long)(at * rows * 128 + q * (rows / chunks) * 128), c);
				for (int k = n - 1; k >= 0; k--) {
					buf_puts(o, ", (int)(");
					cg_expr(&g->c, x->origin[k]);
					if (k == n - 1 && at)
						buf_printf(o, " + %d", at * box[0]);
					if (k == cut && q)
						buf_printf(o, " + %lld", (long long)q * box[n - 1 - k]);
					buf_puts(o, ")");
				}
				buf_printf(o, ", tir_bar + %s %% %d);\n", it, S);
			}
	}
	buf_indent(o, depth + 2);
	buf_puts(o, "}\n");
	buf_indent(o, depth + 1);
	buf_puts(o, "}\n");
	buf_indent(o, depth + 1);
	buf_puts(o, "return; /* the producer's work is done */\n");
	buf_indent(o, depth);
	buf_puts(o, "}\n");
	g->tma_consumers = true;

	buf_indent(o, depth);
	buf_printf(o, "for (%s %s = 0; %s < %lld; ++%s) {\n", idx, it, it, ext, it);
	buf_indent(o, depth + 1);
	buf_puts(o, "{\n");
	d = depth + 2;
	buf_indent(o, d);
	buf_printf(o, "const %s ", idx);
	cg_var(o, l->var);
	buf_printf(o, " = %s;\n", it);
	ring_ptrs(g, l, d);
	cu_allocs(g, l, d);
	buf_indent(o, d);
	buf_printf(o, "tir_mbar_wait(tir_bar + %s %% %d, (%s / %d) & 1);\n", it, S, it, S);
	tir_stmt **rest = xcalloc((size_t)l->nkids + 1, sizeof *rest);
	int nrest = 0;
	for (int k = 0; k < l->nkids; k++)
		if (!lower_copy_stage(L, l, l->kids[k]))
			rest[nrest++] = l->kids[k];
	bool overlap = lower_holds_wgmma(l);
	tir_stmt *const *save = g->wg_overlap_list;
	if (overlap)
		g->wg_overlap_list = rest;
	cu_list(g, rest, nrest, d, false);
	g->wg_overlap_list = save;
	free(rest);
	buf_indent(o, depth + 1);
	buf_puts(o, "}\n");
	buf_indent(o, depth + 1);
	if (overlap) {
		buf_printf(o, "if (%s > 0) /* the previous iteration's MMAs are done */\n", it);
		buf_indent(o, depth + 2);
		buf_printf(o, "tir_mbar_arrive(tir_bar + %d + (%s - 1) %% %d);\n", S, it, S);
	} else {
		buf_printf(o, "tir_mbar_arrive(tir_bar + %d + %s %% %d);\n", S, it, S);
	}
	buf_indent(o, depth);
	buf_puts(o, "}\n");
	cu_wg_drain(g, depth);
}

static void store_scope(tir_block *b, void *ctx)
{
	tir_scope sc = b->store->scope;
	if (sc == TIR_SCOPE_SHARED || sc == TIR_SCOPE_GLOBAL)
		*(const tir_block **)ctx = b;
}

/* Sets up the kernel's TMA pipeline l (kernel statement s) for launch ln:
 * its copies (lower_tma_stage) and their tensor maps, checking what the
 * producer warpgroup's early exit needs: warpgroups along threadIdx.y
 * (threadIdx.x exactly 128, no threadIdx.z), only thread- and block-bound
 * loops around l and no guard on them, nothing stored to shared or
 * global memory before l (the producer runs that part too), boxes the
 * copy engine takes, swizzled destinations and origins independent of the
 * thread indices. */
void cu_tma_prepare(cu_gen *g, const tir_stmt *s, const tir_stmt *l, tir_launch *ln)
{
	tir_lowered *L = g->c.L;
	g->tma_loop = l;
	g->ntma = 0;
	if (g->launch[TIR_THREAD_X] != 128 || g->launch[TIR_THREAD_Z] > 1) {
		cu_fail(g, "cuda: a TMA pipeline needs warpgroups: threadIdx.x of 128 (not %lld) "
		     "and no threadIdx.z", (long long)g->launch[TIR_THREAD_X]);
		return;
	}
	g->tma_wgs = g->launch[TIR_THREAD_Y] > 0 ? g->launch[TIR_THREAD_Y] : 1;
	for (const tir_stmt *c = l; c != s; c = c->parent) {
		const tir_stmt *up = c->parent;
		if (up->kind == STMT_FOR && (!cu_is_hw(up) || up->extent < g->launch[up->tag])) {
			cu_fail(g, "cuda: TMA pipeline \"%s\" is under loop \"%s\", not only under "
			     "whole thread and block indices", l->var->name, up->var->name);
			return;
		}
		for (int k = 0; k < up->nkids && up->kids[k] != c; k++) {
			const tir_block *bad = NULL;
			stmt_visit_blocks(up->kids[k], store_scope, &bad);
			if (bad) {
				cu_fail(g, "cuda: block \"%s\" stores to %s memory before TMA pipeline "
				     "\"%s\", which the producer warpgroup skips", bad->name,
				     scope_name(bad->store->scope), l->var->name);
				return;
			}
		}
	}
	for (int k = 0; k < l->nkids; k++) {
		if (!lower_copy_stage(L, l, l->kids[k]))
			continue;
		if (g->ntma == TIR_MAX_TMAPS) {
			cu_fail(g, "cuda: TMA pipeline \"%s\" has more than %d copy stages",
			     l->var->name, TIR_MAX_TMAPS);
			return;
		}
		lower_tma_copy *x = &g->tma[g->ntma];
		tir_error e;
		if (lower_tma_stage(L, l, l->kids[k], x, &e)) {
			cu_fail(g, "cuda: %s", e.msg);
			return;
		}
		const tir_buffer *src = x->src;
		const int n = src->ndim, eb = dtype_bytes(src->dtype);
		const tir_alloc *as = &L->alloc[src->id];
		int box[TIR_TMAP_RANK], atoms, chunks, cut;
		if (!g->swz[x->dst->id] || tma_boxes(x, box, &atoms, &chunks, &cut)) {
			cu_fail(g, "cuda: TMA copy into \"%s\": the destination must be a swizzled "
			     "wgmma operand of rows of 128 bytes with boxes of at most 256 "
			     "elements a dimension", x->dst->name);
			return;
		}
		for (const tir_stmt *c = l; c != s; c = c->parent) {
			const tir_stmt *up = c->parent;
			for (int d = 0; d < n && up->kind == STMT_FOR; d++)
				if (cu_is_thread_tag(up->tag) && expr_uses_var(x->origin[d], up->var)) {
					cu_fail(g, "cuda: the box of \"%s\" depends on %s", x->dst->name,
					     thread_tag_name(up->tag));
					return;
				}
		}
		tir_tmap_info *m = &ln->tmaps[g->ntma];
		memset(m, 0, sizeof *m);
		m->arg = -1;
		for (int i = 0; i < g->nargs; i++)
			if (g->argbuf[i] == src->id)
				m->arg = i;
		m->elem_bytes = eb;
		m->rank = n;
		if (m->arg < 0) {
			cu_fail(g, "cuda: TMA source \"%s\" is not a kernel argument", src->name);
			return;
		}
		for (int d = 0; d < n; d++) {     /* strides checked by lower_tma_stage */
			m->dims[d] = as->extent[n - 1 - d];
			m->strides[d] = as->stride[n - 1 - d] * eb;
			m->box[d] = box[d];
		}
		g->tma_ranks |= 1u << n;
		g->ntma++;
	}
	ln->ntmaps = g->ntma;
}
