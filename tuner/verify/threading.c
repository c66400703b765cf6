/*
 * threading.c — threading validation: do the loops bound to hardware fit
 * the target, and does nothing race?
 *
 * On CUDA each top-level statement of the root is one kernel.  Per kernel:
 *  - thread extents within the hardware limits (threadIdx.x/y <= 1024,
 *    threadIdx.z <= 64, blockIdx.y/z <= 65535), and the threads of a block
 *    (product of the launch extent of each threadIdx tag: the largest extent
 *    any loop binds it to) within max_threads_per_block;
 *  - blockIdx loops outside every other loop;
 *  - a threadIdx loop shorter than its tag's launch extent runs guarded by
 *    `if (idx < extent)`, so it must not write shared memory (the barrier
 *    after such a write would not be reached by every thread);
 *  - no reduction iterator fed by a threadIdx loop unless the block is
 *    annotated "cross_thread_reduction" and has the one shape
 *    codegen/cuda.c turns into a cross-thread reduction (check_xthread),
 *    never by a blockIdx loop;
 *  - vectorized accesses at most 16 bytes;
 *  - shared memory (compacted as in docs/ir-semantics.md) within
 *    max_shared_per_block;
 *  - shared and local buffers used by one kernel only, and a local buffer
 *    written under a threadIdx loop read only under that loop (a thread's
 *    registers are its own);
 *  - no reduction block under a thread-bound loop its bindings ignore: every
 *    thread would accumulate into the same element.
 * On a CPU thread bindings are serial loops and only the last rule applies,
 * to parallel loops (OpenMP iterations race the same way) and to buffers
 * allocated outside the parallel loop.
 */
#include <string.h>
#include "verify.h"
#include "../codegen/codegen.h"

#define VEC_BYTES_CUDA 16

static bool is_thread(const tir_stmt *l)
{
	return l->kind == STMT_FOR && l->loop_kind == LOOP_THREAD &&
	       (l->tag == TIR_THREAD_X || l->tag == TIR_THREAD_Y || l->tag == TIR_THREAD_Z);
}

static bool is_blockidx(const tir_stmt *l)
{
	return l->kind == STMT_FOR && l->loop_kind == LOOP_THREAD &&
	       (l->tag == TIR_BLOCK_X || l->tag == TIR_BLOCK_Y || l->tag == TIR_BLOCK_Z);
}

static const char *tag_name(tir_thread_tag t)
{
	static const char *const names[] = {
#define TIR_THREAD_TAG(id, name) name,
#include "../thread_tags.def"
#undef TIR_THREAD_TAG
	};
	return (unsigned)t < TIR_NTHREAD_TAGS ? names[t] : "?";
}

static const char *kind_of(const tir_stmt *l)
{
	static const char *const names[] = {
#define TIR_LOOP_KIND(id, name) name,
#include "../ir/loop_kinds.def"
#undef TIR_LOOP_KIND
	};
	if (l->loop_kind == LOOP_THREAD)
		return tag_name(l->tag);
	return (unsigned)l->loop_kind < LOOP_NKINDS ? names[l->loop_kind] : "?";
}

static bool block_uses_loop(const tir_block *b, const tir_stmt *l)
{
	for (int i = 0; i < b->niters; i++)
		if (expr_uses_var(b->iters[i].binding, l->var))
			return true;
	return false;
}

static bool loads_buf(const tir_expr *e, const tir_buffer *buf)
{
	if (!e)
		return false;
	if (e->kind == E_LOAD && e->buf == buf)
		return true;
	if (loads_buf(e->a, buf) || loads_buf(e->b, buf) || loads_buf(e->c, buf))
		return true;
	for (int i = 0; i < e->nidx; i++)
		if (loads_buf(e->idx[i], buf))
			return true;
	return false;
}

static bool accesses(const tir_block *b, const tir_buffer *buf)
{
	return b->store == buf || loads_buf(b->value, buf) || loads_buf(b->init, buf);
}

static bool block_in(const tir_block *b, const tir_stmt *s)
{
	return s->kind == STMT_SEQ || stmt_is_ancestor(s, b->stmt);
}

/* The LCA of the blocks under `in` that access buf, or NULL if none does:
 * the lowest statement (loop or root) that encloses them all. */
static tir_stmt *buffer_lca(vfy_ctx *c, const tir_buffer *buf, const tir_stmt *in)
{
	tir_stmt *lca = NULL;
	for (int i = 0; i < c->nblocks; i++) {
		const tir_block *b = c->blocks[i];
		if (!block_in(b, in) || !accesses(b, buf))
			continue;
		if (!lca)
			lca = b->stmt->parent;
		while (lca->parent && !stmt_is_ancestor(lca, b->stmt))
			lca = lca->parent;
	}
	return lca;
}

/* ---- shared memory ------------------------------------------------------------ */

typedef struct acc {
	vfy_ctx *c;
	const tir_block *b;
	const tir_buffer *buf;
	tir_stmt *at;
	tir_interval iv[TIR_MAX_DIMS];
	bool any;
} acc;

static void acc_index(acc *a, tir_expr *const *idx)
{
	for (int d = 0; d < a->buf->ndim; d++) {
		tir_interval iv = vfy_interval(a->c, a->b, idx[d], a->at, true, true);
		a->iv[d] = a->any ? interval_union(&a->c->arena, a->iv[d], iv) : iv;
	}
	a->any = true;
}

static void acc_load(tir_expr *load, void *ctx)
{
	acc *a = ctx;
	if (load->buf == a->buf && load->nidx == a->buf->ndim)
		acc_index(a, load->idx);
}

/* Elements of buf compacted to the region its accesses under k touch. */
static int64_t compacted_elems(vfy_ctx *c, const tir_buffer *buf, tir_stmt *k)
{
	tir_stmt *lca = buffer_lca(c, buf, k);
	if (!lca)
		return 0;
	acc a = { c, NULL, buf, lca, { { 0 } }, false };
	for (int i = 0; i < c->nblocks; i++) {
		const tir_block *b = c->blocks[i];
		if (!block_in(b, k) || !accesses(b, buf))
			continue;
		a.b = b;
		if (b->store == buf)
			acc_index(&a, b->store_idx);
		expr_visit_loads(b->value, acc_load, &a);
		expr_visit_loads(b->init, acc_load, &a);
	}
	int64_t ext[TIR_MAX_DIMS], stride = 1, elems = 1;
	for (int d = 0; d < buf->ndim; d++) {
		ext[d] = a.iv[d].full ? buf->shape[d] : a.iv[d].hi - a.iv[d].lo + 1;
		if (ext[d] > buf->shape[d])
			ext[d] = buf->shape[d];
		if (ext[d] < 1)
			ext[d] = 1;
	}
	for (int d = buf->ndim - 1; d >= 0; d--) {
		int64_t f = buf->align_factor[d];
		if (f > 0) {
			int64_t o = buf->align_offset[d] % f;
			stride += ((o - stride % f) % f + f) % f;
		}
		elems = stride * ext[d];
		stride = elems;
	}
	return elems;
}

/* Shared bytes of kernel k with the allocations of codegen/lower.c when it
 * lowers the program (L != NULL), else with the local compaction above (the
 * same rule, docs/ir-semantics.md). */
static int64_t shared_bytes(vfy_ctx *c, const tir_lowered *L, tir_stmt *k)
{
	int64_t bytes = 0;
	for (int i = 0; i < c->p->nbufs; i++) {
		const tir_buffer *buf = c->p->bufs[i];
		if (buf->dead || buf->scope != TIR_SCOPE_SHARED || !buffer_lca(c, buf, k))
			continue;
		if (L && L->alloc[i].buf == buf)
			bytes += L->alloc[i].bytes;
		else
			bytes += compacted_elems(c, buf, k) * dtype_bytes(buf->dtype);
	}
	return bytes;
}

int64_t verify_shared_bytes(vfy_ctx *c, tir_stmt *k)
{
	tir_lowered L;
	if (lower_program(c->p, c->t, &L, NULL) != 0)
		return shared_bytes(c, NULL, k);
	int64_t bytes = shared_bytes(c, &L, k);
	lower_free(&L);
	return bytes;
}

/* ---- races on one element --------------------------------------------------------- */

/* Whether buf is private to loop l: allocated at or under it. */
static bool private_to(vfy_ctx *c, const tir_buffer *buf, const tir_stmt *l)
{
	if (buf->role != BUF_TEMP || buf->scope == TIR_SCOPE_GLOBAL)
		return false;
	tir_stmt *lca = buffer_lca(c, buf, c->p->root);
	return lca && (lca == l || stmt_is_ancestor(l, lca));
}

static int check_races(vfy_ctx *c, tir_error *err)
{
	bool cuda = c->t->kind == TIR_TARGET_CUDA;
	for (int i = 0; i < c->nblocks; i++) {
		const tir_block *b = c->blocks[i];
		tir_stmt *loops[VFY_MAX_DEPTH];
		int n = stmt_loops(b->stmt, loops, VFY_MAX_DEPTH);
		for (int j = 0; j < n && j < VFY_MAX_DEPTH; j++) {
			tir_stmt *l = loops[j];
			bool concurrent = cuda ? is_thread(l) || is_blockidx(l)
					       : l->loop_kind == LOOP_PARALLEL;
			if (!concurrent || l->extent < 2 || block_uses_loop(b, l))
				continue;
			if (cuda) {
				tir_scope sc = b->store->scope;
				if (b->reduce == REDUCE_NONE)
					continue;   /* the same value from every thread */
				if (sc != TIR_SCOPE_GLOBAL && sc != TIR_SCOPE_SHARED)
					continue;   /* registers: private to each thread */
				if (sc == TIR_SCOPE_SHARED && is_blockidx(l))
					continue;   /* shared: private to each thread block */
			} else if (private_to(c, b->store, l)) {
				continue;
			}
			return tir_fail(err, "threading: block \"%s\" under %s loop %s does not use "
					"it: every %s writes the same elements of \"%s\"",
					b->name, kind_of(l), l->var->name,
					cuda ? "thread" : "iteration", b->store->name);
		}
	}
	return 0;
}

/* ---- CUDA kernels ----------------------------------------------------------------- */

typedef struct kernel {
	vfy_ctx *c;
	tir_stmt *k;
	int64_t launch[TIR_NTHREAD_TAGS];
	const char *name;
} kernel;

static int64_t tag_limit(tir_thread_tag t)
{
	switch (t) {
	case TIR_THREAD_X: case TIR_THREAD_Y: return 1024;
	case TIR_THREAD_Z: return 64;
	case TIR_BLOCK_X: return 2147483647LL;
	case TIR_BLOCK_Y: case TIR_BLOCK_Z: return 65535;
	default: return INT64_MAX;
	}
}

/* Extents, nesting of blockIdx loops and launch extents. */
static int check_loops(kernel *kn, tir_stmt *s, tir_error *err)
{
	if (s->kind == STMT_FOR && s->loop_kind == LOOP_THREAD) {
		if ((unsigned)s->tag >= TIR_NTHREAD_TAGS)
			return tir_fail(err, "threading: loop %s has an unknown thread tag %d",
					s->var->name, (int)s->tag);
		if (s->extent > tag_limit(s->tag))
			return tir_fail(err, "threading: loop %s bound to %s has extent %lld, "
					"more than the limit %lld", s->var->name, tag_name(s->tag),
					(long long)s->extent, (long long)tag_limit(s->tag));
		if (s->extent > kn->launch[s->tag])
			kn->launch[s->tag] = s->extent;
		if (is_blockidx(s))
			for (tir_stmt *q = s->parent; q; q = q->parent)
				if (q->kind == STMT_FOR && !is_blockidx(q))
					return tir_fail(err, "threading: loop %s bound to %s is nested "
							"under loop %s (%s); blockIdx loops must be "
							"outermost", s->var->name, tag_name(s->tag),
							q->var->name, kind_of(q));
	}
	const tir_intrin *in = s->kind == STMT_FOR ? intrin_of_loop(s) : NULL;
	if (in && intrin_lanes(in) > kn->launch[TIR_THREAD_X])
		kn->launch[TIR_THREAD_X] = intrin_lanes(in);
	for (int i = 0; i < s->nkids; i++)
		if (check_loops(kn, s->kids[i], err))
			return -1;
	return 0;
}

/* A threadIdx loop shorter than its launch extent must not write shared. */
static int check_guarded(kernel *kn, tir_stmt *s, tir_error *err)
{
	vfy_ctx *c = kn->c;
	if (is_thread(s) && s->extent < kn->launch[s->tag]) {
		for (int i = 0; i < c->nblocks; i++) {
			const tir_block *b = c->blocks[i];
			if (stmt_is_ancestor(s, b->stmt) && b->store->scope == TIR_SCOPE_SHARED)
				return tir_fail(err, "threading: loop %s bound to %s has extent %lld, "
						"less than the %lld launched in its kernel, and block "
						"\"%s\" under it writes shared buffer \"%s\" (not every "
						"thread would reach the barrier)", s->var->name,
						tag_name(s->tag), (long long)s->extent,
						(long long)kn->launch[s->tag], b->name, b->store->name);
		}
	}
	for (int i = 0; i < s->nkids; i++)
		if (check_guarded(kn, s->kids[i], err))
			return -1;
	return 0;
}

/* The cross-thread pattern codegen/cuda.c implements: reduction iterators of
 * b fed by thread loop l (b annotated).  l is bound to threadIdx.x, the only
 * threadIdx tag of the kernel, over the whole launch extent, under no other
 * thread loop and no guarded blockIdx loop (every thread must reach the
 * barriers of the tree); b is the only block under l and no loop under l is
 * thread-bound; b reduces (any reducer: the tree combines with it) into a
 * global or shared buffer at an element that neither l nor a loop under it
 * changes (one partial result per thread). */
static bool uses_loop_or_under(const tir_expr *e, const tir_stmt *l)
{
	if (!e)
		return false;
	if (l->kind == STMT_FOR && expr_uses_var(e, l->var))
		return true;
	for (int i = 0; i < l->nkids; i++)
		if (uses_loop_or_under(e, l->kids[i]))
			return true;
	return false;
}

static bool thread_loop_under(const tir_stmt *s)
{
	for (int i = 0; i < s->nkids; i++)
		if ((s->kids[i]->kind == STMT_FOR && s->kids[i]->loop_kind == LOOP_THREAD) ||
		    thread_loop_under(s->kids[i]))
			return true;
	return false;
}

static int check_xthread(kernel *kn, const tir_block *b, tir_stmt *l, tir_error *err)
{
	vfy_ctx *c = kn->c;
	const char *why = NULL;
	if (l->tag != TIR_THREAD_X)
		why = "the loop is not bound to threadIdx.x";
	else if (kn->launch[TIR_THREAD_Y] > 1 || kn->launch[TIR_THREAD_Z] > 1)
		why = "its kernel also uses threadIdx.y or threadIdx.z";
	else if (l->extent != kn->launch[TIR_THREAD_X])
		why = "the loop is shorter than the threadIdx.x launch extent (guarded)";
	else if (b->reduce == REDUCE_NONE)
		why = "the block is not a reduction";
	else if (b->store->scope != TIR_SCOPE_GLOBAL && b->store->scope != TIR_SCOPE_SHARED)
		why = "the block's output is not in global or shared memory";
	else if (thread_loop_under(l))
		why = "a loop under it is bound to a thread axis";
	if (!why) {
		tir_block *bs[2];
		if (stmt_blocks(l, bs, 2) != 1)
			why = "the loop holds another block";
	}
	for (tir_stmt *q = l->parent; !why && q && q->kind == STMT_FOR; q = q->parent)
		if (is_thread(q))
			why = "the loop is under another threadIdx loop";
		else if (is_blockidx(q) && q->extent < kn->launch[q->tag])
			why = "the loop is under a guarded blockIdx loop";
	for (int d = 0; !why && d < b->store->ndim; d++) {
		tir_expr *e = expr_simplify(&c->arena, vfy_in_loops(c, b, b->store_idx[d]), NULL);
		if (uses_loop_or_under(e, l))
			why = "the output element changes with the loop or a loop under it";
	}
	if (!why && b->init &&
	    uses_loop_or_under(expr_simplify(&c->arena, vfy_in_loops(c, b, b->init), NULL), l))
		why = "the init value changes with the loop or a loop under it";
	if (why)
		return tir_fail(err, "threading: cross-thread reduction of block \"%s\" over %s "
				"loop %s: %s", b->name, tag_name(l->tag), l->var->name, why);
	return 0;
}

static int check_reductions(kernel *kn, const tir_block *b, tir_error *err)
{
	tir_stmt *loops[VFY_MAX_DEPTH];
	int n = stmt_loops(b->stmt, loops, VFY_MAX_DEPTH);
	bool xthread = false;
	for (int i = 0; i < b->nann; i++)
		if (b->ann[i].key && !strcmp(b->ann[i].key, "cross_thread_reduction") &&
		    b->ann[i].value)
			xthread = true;
	for (int k = 0; k < b->niters; k++) {
		const tir_iter *it = &b->iters[k];
		if (it->kind != ITER_REDUCE)
			continue;
		for (int j = 0; j < n && j < VFY_MAX_DEPTH; j++) {
			tir_stmt *l = loops[j];
			if (!expr_uses_var(it->binding, l->var))
				continue;
			if (is_blockidx(l))
				return tir_fail(err, "threading: reduction iterator %s of block \"%s\" "
						"bound to %s loop %s: reductions across thread "
						"blocks are not supported", it->var->name, b->name,
						tag_name(l->tag), l->var->name);
			if (is_thread(l) && !xthread)
				return tir_fail(err, "threading: reduction iterator %s of block \"%s\" "
						"bound to %s loop %s without the "
						"\"cross_thread_reduction\" annotation",
						it->var->name, b->name, tag_name(l->tag), l->var->name);
			if (is_thread(l) && check_xthread(kn, b, l, err))
				return -1;
		}
	}
	return 0;
}

typedef struct vec {
	kernel *kn;
	const tir_block *b;
	const tir_stmt *l;
	const tir_buffer *bad;
} vec;

static bool index_varies(vfy_ctx *c, const tir_block *b, tir_expr *const *idx, int n,
			 const tir_stmt *l)
{
	for (int d = 0; d < n; d++)
		if (expr_uses_var(vfy_in_loops(c, b, idx[d]), l->var))
			return true;
	return false;
}

static void vec_load(tir_expr *load, void *ctx)
{
	vec *v = ctx;
	if (v->bad)
		return;
	if (v->l->extent * dtype_bytes(load->buf->dtype) > VEC_BYTES_CUDA &&
	    index_varies(v->kn->c, v->b, load->idx, load->nidx, v->l))
		v->bad = load->buf;
}

static int check_vectorized(kernel *kn, tir_stmt *s, tir_error *err)
{
	vfy_ctx *c = kn->c;
	if (s->kind == STMT_FOR && s->loop_kind == LOOP_VECTORIZED) {
		for (int i = 0; i < c->nblocks; i++) {
			const tir_block *b = c->blocks[i];
			if (!stmt_is_ancestor(s, b->stmt))
				continue;
			vec v = { kn, b, s, NULL };
			if (s->extent * dtype_bytes(b->store->dtype) > VEC_BYTES_CUDA &&
			    index_varies(c, b, b->store_idx, b->store->ndim, s))
				v.bad = b->store;
			expr_visit_loads(b->value, vec_load, &v);
			if (v.bad)
				return tir_fail(err, "threading: vectorized loop %s of extent %lld "
						"accesses %s buffer \"%s\" in block \"%s\": %lld bytes, "
						"more than %d", s->var->name, (long long)s->extent,
						dtype_name(v.bad->dtype), v.bad->name, b->name,
						(long long)(s->extent * dtype_bytes(v.bad->dtype)),
						VEC_BYTES_CUDA);
		}
	}
	for (int i = 0; i < s->nkids; i++)
		if (check_vectorized(kn, s->kids[i], err))
			return -1;
	return 0;
}

static int check_kernel(vfy_ctx *c, const tir_lowered *L, tir_stmt *k, tir_error *err)
{
	kernel kn = { c, k, { 0 }, NULL };
	if (check_loops(&kn, k, err))
		return -1;
	int64_t threads = 1;
	for (int t = TIR_THREAD_X; t <= TIR_THREAD_Z; t++)
		if (kn.launch[t] > 0)
			threads *= kn.launch[t];
	/* a TMA pipeline's producer warpgroup: one more along threadIdx.y */
	const tir_stmt *tma = L ? lower_find_tma(L, k) : NULL;
	if (tma)
		threads += threads / (kn.launch[TIR_THREAD_Y] > 0 ? kn.launch[TIR_THREAD_Y] : 1);
	tir_block *first = NULL;
	stmt_blocks(k, &first, 1);
	const char *kname = first ? arena_printf(&c->arena, "the kernel of block \"%s\"",
						 first->name) : "a kernel";
	if (threads > c->t->max_threads_per_block)
		return tir_fail(err, "threading: %s launches %lld threads per block "
				"(threadIdx x*y*z = %lld*%lld*%lld), more than the limit %d of %s",
				kname, (long long)threads,
				(long long)(kn.launch[TIR_THREAD_X] ? kn.launch[TIR_THREAD_X] : 1),
				(long long)(kn.launch[TIR_THREAD_Y] ? kn.launch[TIR_THREAD_Y] : 1),
				(long long)(kn.launch[TIR_THREAD_Z] ? kn.launch[TIR_THREAD_Z] : 1),
				c->t->max_threads_per_block, c->t->key);
	if (check_guarded(&kn, k, err))
		return -1;
	for (int i = 0; i < c->nblocks; i++)
		if (block_in(c->blocks[i], k) && check_reductions(&kn, c->blocks[i], err))
			return -1;
	if (check_vectorized(&kn, k, err))
		return -1;
	int64_t copies = cuda_unrolled_blocks(k);
	if (copies > VFY_MAX_UNROLLED)
		return tir_fail(err, "threading: %s unrolls to %lld block instances, more than %d "
				"(NVRTC would take seconds to minutes to compile it)", kname,
				(long long)copies, VFY_MAX_UNROLLED);
	int64_t shared = shared_bytes(c, L, k);
	if (tma)
		shared += 16 * lower_pipeline_stages(L, tma);
	if (shared > c->t->max_shared_per_block)
		return tir_fail(err, "threading: shared memory %lld bytes exceeds the limit %d "
				"of %s (in %s)", (long long)shared, c->t->max_shared_per_block,
				c->t->key, kname);
	return 0;
}

/* Shared and local buffers live in one kernel; local ones in one thread. */
static int check_scoped_buffers(vfy_ctx *c, tir_error *err)
{
	for (int i = 0; i < c->p->nbufs; i++) {
		const tir_buffer *buf = c->p->bufs[i];
		if (buf->dead || buf->scope == TIR_SCOPE_GLOBAL)
			continue;
		const tir_block *first = NULL;
		for (int j = 0; j < c->nblocks; j++) {
			const tir_block *b = c->blocks[j];
			if (!accesses(b, buf))
				continue;
			if (!first) {
				first = b;
			} else if (vfy_kernel_of(b->stmt) != vfy_kernel_of(first->stmt)) {
				return tir_fail(err, "threading: %s buffer \"%s\" is accessed in two "
						"kernels (by blocks \"%s\" and \"%s\")",
						scope_name(buf->scope), buf->name, first->name, b->name);
			}
		}
		if (buf->scope != TIR_SCOPE_LOCAL)
			continue;
		for (int j = 0; j < c->nblocks; j++) {
			const tir_block *w = c->blocks[j];
			if (w->store != buf)
				continue;
			for (tir_stmt *l = w->stmt->parent; l; l = l->parent) {
				if (!is_thread(l))
					continue;
				for (int r = 0; r < c->nblocks; r++) {
					const tir_block *rd = c->blocks[r];
					if (rd == w || !accesses(rd, buf) || stmt_is_ancestor(l, rd->stmt))
						continue;
					return tir_fail(err, "threading: local buffer \"%s\" is written by "
							"block \"%s\" under %s loop %s and read by block "
							"\"%s\" outside it (another thread's registers)",
							buf->name, w->name, tag_name(l->tag), l->var->name,
							rd->name);
				}
			}
		}
	}
	return 0;
}

/* Block instances of s once the C backend's unrolled loops are unrolled:
 * a loop annotated "unroll" N makes min(N, extent) copies of its body, one
 * of the unrolled kind min(extent, 64) (c.c); a tensor intrinsic counts as
 * one block.  Saturates at 2^40. */
static int64_t cpu_unrolled_blocks(const tir_stmt *s)
{
	const int64_t cap = (int64_t)1 << 40;
	if (s->kind == STMT_BLOCK || (s->kind == STMT_FOR && intrin_of_loop(s)))
		return 1;
	int64_t n = 0;
	for (int i = 0; i < s->nkids && n < cap; i++)
		n += cpu_unrolled_blocks(s->kids[i]);
	if (n > cap)
		n = cap;
	if (s->kind != STMT_FOR || s->loop_kind == LOOP_PARALLEL ||
	    s->loop_kind == LOOP_VECTORIZED)
		return n;
	int64_t u = lower_ann(s, "unroll", 0);
	if (u <= 0 && s->loop_kind == LOOP_UNROLLED)
		u = 64;
	if (u > s->extent)
		u = s->extent;
	return u > 1 ? (n > cap / u ? cap : n * u) : n;
}

int verify_threading(vfy_ctx *c, tir_error *err)
{
	if (c->t->kind == TIR_TARGET_CPU) {
		int64_t copies = cpu_unrolled_blocks(c->p->root);
		if (copies > VFY_MAX_UNROLLED_CPU)
			return tir_fail(err, "threading: the program unrolls to %lld block "
					"instances, more than %d (the C compiler would take minutes "
					"to compile it)", (long long)copies, VFY_MAX_UNROLLED_CPU);
	}
	if (c->t->kind == TIR_TARGET_CUDA) {
		if (check_scoped_buffers(c, err))
			return -1;
		tir_lowered L;
		bool lowered = lower_program(c->p, c->t, &L, NULL) == 0;
		int rc = 0;
		for (int i = 0; i < c->p->root->nkids && !rc; i++)
			rc = check_kernel(c, lowered ? &L : NULL, c->p->root->kids[i], err);
		if (lowered)
			lower_free(&L);
		if (rc)
			return -1;
	}
	return check_races(c, err);
}
