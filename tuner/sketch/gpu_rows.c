/*
 * gpu_rows.c — the GPU's part of rows.c's walk: every block bound to
 * threads (a block left without a thread loop would run on one thread).
 *
 *   a thread block per row (SKETCH_GPU_ROW_BLOCK): the row loop bound to
 *       blockIdx.x; in each member, a sampled number T of threads (a warp,
 *       32, up to 1024; one RV, so every thread loop of the kernel has the
 *       launch's extent): a reduction's reduction loops fused and split
 *       [T, serial] with T bound to threadIdx.x and the block annotated
 *       "cross_thread_reduction" (codegen/cuda_reduce.c: per-thread partials
 *       and a tree across the threads), a spatial member's loops fused and
 *       split [serial, T, a sampled vector] (adjacent threads, adjacent
 *       vectors, the vector stored at once); what the
 *       members other than the anchor write — a row's max, sum, mean —
 *       kept in shared memory (set_scope "shared"), where thread 0 of the
 *       reduction writes it and every thread reads it after a barrier (the
 *       code puts one before a read of shared data written above).  So a
 *       softmax is one kernel, a thread block per row, its max, sum and
 *       normalization one after the other.  Only what the members read in
 *       one row, at most GPU_ROW_SHARED bytes, goes to shared memory; a
 *       block writing more, or writing a parameter (which must stay in global
 *       memory, where a barrier does not order it), is left a kernel of its
 *       own.  Where the row of an input that only the group reads fits
 *       (GPU_ROW_PERSIST), in one draw of two Inductor's persistent
 *       reduction: that row fetched once into shared memory by all the
 *       threads (cache_read_all under the row loop, in sampled vectors of
 *       up to 16 bytes) and read there by every member (else each member
 *       reads it from global memory: a loop over the row).
 *   a thread per row (SKETCH_GPU_ROW_THREAD): the row loop split [blocks, a
 *       sampled 32 to 256 threads] and bound; each thread computes its row's
 *       members one after the other, a row's partial results (at most
 *       GPU_ROW_LOCAL elements) in registers (set_scope "local").  For many
 *       short rows, and reductions along a dim other than the innermost
 *       (adjacent threads then read adjacent elements).
 *   auto (the heavy sketches): a thread block per row where a row has at
 *       least a warp's work, else a thread per row.
 *   pointwise kernels: the loops fused and split [blocks, a sampled 64 to
 *       512 threads, a sampled vector of 1, 2 or 4 elements of at most 16
 *       bytes], bound to blockIdx.x / threadIdx.x, the vector vectorized.
 */
#include <string.h>
#include "sketch.h"

#define GPU_ROW_SHARED (16 * 1024)
#define GPU_ROW_PERSIST (48 * 1024)   /* an input's row held for the group */
#define GPU_ROW_LOCAL 16
#define GPU_ROW_WARP 32

/* Iterations of the anchor per row: its domain over its row's. */
static int64_t anchor_work(const sketch_group *g)
{
	const tir_block *a = g->member[0];
	int64_t dom = 1, row = 1;
	for (int i = 0; i < a->niters; i++)
		dom *= a->iters[i].extent;
	for (int c = 0; c < g->nrow; c++)
		row *= g->rext[c];
	return row > 0 ? dom / row : dom;
}

static int mode_of(const sketch_rest *r, const sketch_group *g)
{
	if (r->mode != SKETCH_GPU_ROW_AUTO)
		return r->mode;
	return anchor_work(g) >= GPU_ROW_WARP ? SKETCH_GPU_ROW_BLOCK : SKETCH_GPU_ROW_THREAD;
}

/* Elements of b's output one row holds. */
static int64_t row_elems(const sketch_group *g, const tir_block *b)
{
	int64_t all = 1, row = 1;
	for (int d = 0; d < b->store->ndim; d++)
		all *= b->store->shape[d];
	for (int c = 0; c < g->nrow; c++)
		row *= g->rext[c];
	return all / row > 0 ? all / row : 1;
}

static bool gpu_admit(const tir_program *p, const tir_target *t, const sketch_rest *r,
		      const sketch_group *g, const tir_block *b)
{
	(void)p;
	(void)t;
	if (mode_of(r, g) != SKETCH_GPU_ROW_BLOCK)
		return true;
	/* a spatial block of one element a row would write its shared value
	 * from one guarded thread, which validation refuses */
	int64_t elems = row_elems(g, b);
	return b->store->role == BUF_TEMP && (block_is_reduction(b) || elems > 1) &&
	       elems * dtype_bytes(b->store->dtype) <= GPU_ROW_SHARED;
}

/* The spatial loops of a member over the threads: those of one iteration
 * (a row's own coordinates) left outside, unsplit, so that the member's
 * row stays one row for every thread; the rest fused and split [serial,
 * T] with T bound — or [serial, T, vector] with the vector vectorized,
 * where vrv (a sampled width) is not -1 — or, where nothing is left, the
 * innermost loop bound itself (a loop of one iteration: thread 0 alone,
 * guarded). */
static int spatial_threads(tir_sched *s, const int *sp, int ns, int trv, int vrv,
			   tir_error *err)
{
	int one[TIR_MAX_IO], more[TIR_MAX_IO], n1 = 0, n2 = 0, f, o[3];
	for (int k = 0; k < ns; k++) {
		if (s->rv[sp[k]].loop->extent == 1)
			one[n1++] = sp[k];
		else
			more[n2++] = sp[k];
	}
	if (n2 == 0)
		return tir_bind(s, sp[ns - 1], "threadIdx.x", err);
	bool moved = false;
	for (int k = 0; k < n1; k++)
		moved = moved || sp[k] != one[k];
	if (moved) {
		int ord[TIR_MAX_IO];
		memcpy(ord, one, sizeof(int) * (size_t)n1);
		memcpy(ord + n1, more, sizeof(int) * (size_t)n2);
		SKETCH_TRY(tir_reorder(s, ns, ord, err), "one-iteration loops outside");
	}
	tir_int fac[3] = { TIR_LIT(0), TIR_RV(trv), TIR_RV(vrv) };
	f = more[0];
	if (n2 > 1)
		SKETCH_TRY(f = tir_fuse(s, n2, more, err), "fuse the loops");
	SKETCH_TRY(tir_split(s, f, vrv >= 0 ? 3 : 2, fac, o, err), "split over the threads");
	SKETCH_TRY(tir_bind(s, o[1], "threadIdx.x", err), "bind the threads");
	return vrv >= 0 ? tir_vectorize(s, o[2], err) : 0;
}

/* Whether g's members are the only readers of buf and read it a row at a
 * time (some dimension at a row iterator wherever they read it); fills
 * *elems with what one row reads. */
static bool row_input(const tir_program *p, const sketch_group *g, const tir_buffer *buf,
		      int64_t *elems)
{
	bool rowdim[TIR_MAX_DIMS], seen = false;
	for (int d = 0; d < buf->ndim; d++)
		rowdim[d] = true;
	for (int i = 0; i < p->nblocks; i++) {
		const tir_block *c = p->blocks[i];
		if (!c->stmt)
			continue;
		int m = -1;
		for (int k = 0; k < g->n; k++)
			if (g->member[k] == c)
				m = k;
		if (c->store == buf && m >= 0)
			return false;
		for (int r = 0; r < c->nreads; r++) {
			const tir_region *rg = &c->reads[r];
			if (rg->buf != buf)
				continue;
			if (m < 0)
				return false;
			seen = true;
			for (int d = 0; d < buf->ndim; d++) {
				const tir_expr *x = rg->min[d];
				int it = x->kind == E_VAR ? block_iter_of(c, x->var) : -1;
				rowdim[d] = rowdim[d] && rg->extent[d] == 1 && it >= 0 &&
					    g->coord[m][it] >= 0;
			}
		}
	}
	bool any = false;
	*elems = 1;
	for (int d = 0; d < buf->ndim; d++) {
		any = any || rowdim[d];
		if (!rowdim[d])
			*elems *= buf->shape[d];
	}
	return seen && any;
}

/* Inductor's persistent reduction: where what the row reads of an input
 * fits (GPU_ROW_PERSIST bytes) and only the group reads it, in one draw of
 * two, the input a row at a time in shared memory, fetched once by all the
 * threads (cache_read_all: a copy under the row loop) and read there
 * by every member, instead of each member reading the row from global
 * memory.  Picks the largest such input. */
static int persist(tir_sched *s, sketch_group *g, int trv, tir_error *err)
{
	const tir_buffer *best = NULL;
	int64_t most = 0;
	int bm = -1, br = -1;
	for (int m = 0; m < g->n; m++)
		for (int r = 0; r < g->member[m]->nreads; r++) {
			const tir_buffer *buf = g->member[m]->reads[r].buf;
			int64_t elems;
			if (buf == best || buf == g->member[m]->store || !row_input(s->p, g, buf, &elems) ||
			    elems * dtype_bytes(buf->dtype) > GPU_ROW_PERSIST || elems < 2 ||
			    elems <= most)
				continue;
			best = buf;
			most = elems;
			bm = m;
			br = r;
		}
	if (!best || sched_rand(s) % 2)
		return 0;
	int copy, l[TIR_MAX_IO], n;
	SKETCH_TRY(copy = tir_cache_read_all(s, g->rv[bm], br, "shared", err), "the row in shared memory");
	if (!stmt_is_ancestor(s->rv[g->row].loop, s->rv[copy].block->stmt))
		SKETCH_TRY(tir_compute_at(s, copy, g->row, err), "the row's copy under the row loop");
	SKETCH_TRY(n = sketch_loops_under(s, copy, g->row, l, err), "the copy's loops");
	/* the copy in vectors of up to 16 bytes (codegen/cuda_copy.c: one
	 * wide load and store where the lanes are aligned, scalar where not),
	 * whole 16-byte loads in flight per thread */
	static const int64_t vecs[] = { 1, 2, 4, 8 };
	int nv = 0, vrv;
	while (nv < 4 && vecs[nv] * dtype_bytes(best->dtype) <= 16)
		nv++;
	SKETCH_TRY(vrv = tir_sample_categorical(s, nv, vecs, NULL, err), "the copy's vector");
	return spatial_threads(s, l, n, trv, vrv, err);
}

static int block_per_row(tir_sched *s, sketch_group *g, tir_error *err)
{
	int64_t work = sketch_row_work(s, g), cand[6];
	int nc = 0, trv;
	for (int64_t x = GPU_ROW_WARP; x <= 1024; x *= 2) {
		cand[nc++] = x;
		if (x >= work)
			break;
	}
	SKETCH_TRY(trv = tir_sample_categorical(s, nc, cand, NULL, err), "threads per row");
	SKETCH_TRY(tir_bind(s, g->row, "blockIdx.x", err), "bind the rows");
	/* the spatial members' stores in a sampled vector of up to 16 bytes
	 * of the anchor's elements (codegen/cuda_copy.c, cu_vector_store:
	 * each lane's value in a register, one wide store) */
	int vrv = -1;
	bool spatial = false;
	for (int m = 0; m < g->n; m++)
		spatial = spatial || !block_is_reduction(g->member[m]);
	if (spatial) {
		static const int64_t vecs[] = { 1, 2, 4, 8 };
		int nv = 0;
		while (nv < 4 && vecs[nv] * dtype_bytes(g->member[0]->store->dtype) <= 16)
			nv++;
		SKETCH_TRY(vrv = tir_sample_categorical(s, nv, vecs, NULL, err), "the stores' vector");
	}
	for (int m = 0; m < g->n; m++) {
		tir_block *b = g->member[m];
		int sp[TIR_MAX_IO], rd[TIR_MAX_IO], ns, nr, f, o[2];
		SKETCH_TRY(sketch_member_loops(s, g, m, sp, &ns, rd, &nr, err), b->name);
		tir_int fac[2] = { TIR_LIT(0), TIR_RV(trv) };
		if (block_is_reduction(b)) {
			f = rd[0];
			if (nr > 1)
				SKETCH_TRY(f = tir_fuse(s, nr, rd, err), "fuse the reduction loops");
			SKETCH_TRY(tir_split(s, f, 2, fac, o, err), "split over the threads");
			int ord[2] = { o[1], o[0] };
			SKETCH_TRY(tir_reorder(s, 2, ord, err), "the threads outside");
			SKETCH_TRY(tir_bind(s, o[1], "threadIdx.x", err), "bind the threads");
			SKETCH_TRY(tir_annotate(s, g->rv[m], "cross_thread_reduction", 1, err),
				   "annotate");
		} else {
			SKETCH_TRY(spatial_threads(s, sp, ns, trv, vrv, err), "bind the threads");
		}
		if (m > 0 && b->store->role == BUF_TEMP)
			SKETCH_TRY(tir_set_scope(s, g->rv[m], 0, "shared", err), "shared row values");
	}
	return persist(s, g, trv, err);
}

static int thread_per_row(tir_sched *s, sketch_group *g, tir_error *err)
{
	static const int64_t cand[] = { 32, 64, 128, 256 };
	int trv, o[2];
	SKETCH_TRY(trv = tir_sample_categorical(s, 4, cand, NULL, err), "threads");
	tir_int fac[2] = { TIR_LIT(0), TIR_RV(trv) };
	SKETCH_TRY(tir_split(s, g->row, 2, fac, o, err), "split the rows");
	SKETCH_TRY(tir_bind(s, o[0], "blockIdx.x", err), "bind blocks");
	SKETCH_TRY(tir_bind(s, o[1], "threadIdx.x", err), "bind threads");
	for (int m = 1; m < g->n; m++) {
		tir_block *b = g->member[m];
		if (block_is_reduction(b) && b->store->role == BUF_TEMP &&
		    row_elems(g, b) <= GPU_ROW_LOCAL)
			SKETCH_TRY(tir_set_scope(s, g->rv[m], 0, "local", err), "a row's partials local");
	}
	return 0;
}

static int gpu_group(tir_sched *s, const tir_target *t, const sketch_rest *r, sketch_group *g,
		     tir_error *err)
{
	/* a spatial anchor that no reduction joined: a pointwise kernel (its
	 * row loop and the loops under it are one chain) */
	if (g->n == 1 && !block_is_reduction(g->member[0]))
		return r->pointwise(s, t, r, g->rv[0], err);
	if (mode_of(r, g) == SKETCH_GPU_ROW_BLOCK)
		return block_per_row(s, g, err);
	return thread_per_row(s, g, err);
}

static int gpu_pointwise(tir_sched *s, const tir_target *t, const sketch_rest *r, int block,
			 tir_error *err)
{
	(void)t;
	(void)r;
	static const int64_t threads[] = { 64, 128, 256, 512 }, vecs[] = { 1, 2, 4 };
	int l[TIR_MAX_IO], n, f, trv, vrv, o[3];
	int eb = dtype_bytes(s->rv[block].block->store->dtype), nv = 0;
	while (nv < 3 && vecs[nv] * eb <= 16)
		nv++;
	SKETCH_TRY(n = tir_get_loops(s, block, l, TIR_MAX_IO, err), "loops");
	f = l[0];
	if (n > 1)
		SKETCH_TRY(f = tir_fuse(s, n, l, err), "fuse");
	SKETCH_TRY(trv = tir_sample_categorical(s, 4, threads, NULL, err), "threads");
	SKETCH_TRY(vrv = tir_sample_categorical(s, nv, vecs, NULL, err), "vector width");
	tir_int fac[3] = { TIR_LIT(0), TIR_RV(trv), TIR_RV(vrv) };
	SKETCH_TRY(tir_split(s, f, 3, fac, o, err), "split");
	SKETCH_TRY(tir_bind(s, o[0], "blockIdx.x", err), "bind blocks");
	SKETCH_TRY(tir_bind(s, o[1], "threadIdx.x", err), "bind threads");
	SKETCH_TRY(tir_vectorize(s, o[2], err), "vectorize");
	return 0;
}

const sketch_rest sketch_gpu_rest_block = { SKETCH_GPU_ROW_BLOCK, NULL, gpu_admit, gpu_group,
					    gpu_pointwise };
const sketch_rest sketch_gpu_rest_thread = { SKETCH_GPU_ROW_THREAD, NULL, gpu_admit, gpu_group,
					     gpu_pointwise };
const sketch_rest sketch_gpu_rest_auto = { SKETCH_GPU_ROW_AUTO, NULL, gpu_admit, gpu_group,
					   gpu_pointwise };
