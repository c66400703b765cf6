/*
 * cache.c — cache stages and buffer layout: cache_read, cache_write,
 * storage_align.
 *
 * A cache stage is a plain copy block (one spatial iterator per dimension,
 * dst[v] = src[v]) in a loop nest of its own at the top level of the program,
 * between the stage's producer and its consumer.  It starts out copying the
 * whole buffer; compute_at / reverse_compute_at then move it under a tile loop
 * where it copies only the tile, and buffer compaction at lowering sizes the
 * cache to that tile.  The cache buffer is named `<buffer>_<scope>` and so is
 * its copy block.
 */
#include <ctype.h>
#include <string.h>
#include "sched.h"

/* "<buffer>_<scope>" with characters a C identifier cannot hold as '_'. */
static char *cache_name(tir_program *p, const tir_buffer *buf, const char *scope)
{
	char *s = arena_printf(&p->arena, "%s_%s", buf->name, scope);
	for (char *c = s; *c; c++)
		if (!isalnum((unsigned char)*c) && *c != '_')
			*c = '_';
	return s;
}

/* The block copying src into dst (one spatial iterator per dimension, dst
 * or src being the new buffer), in a statement not yet in the tree. */
static tir_block *copy_block(tir_program *p, tir_buffer *dst, tir_buffer *src,
			     const char *name)
{
	tir_arena *a = &p->arena;
	tir_block *c = block_new(p, name);
	c->name = name;             /* the cache buffer's name; block_new added a suffix */
	tir_expr *idx[TIR_MAX_DIMS];
	for (int d = 0; d < dst->ndim; d++) {
		tir_var *v = program_var(p, arena_printf(a, "v%d", d));
		block_add_iter(c, v, dst->shape[d], ITER_SPATIAL, NULL);
		idx[d] = mk_var(a, v);
	}
	c->store = dst;
	memcpy(c->store_idx, idx, sizeof(tir_expr *) * (size_t)dst->ndim);
	c->value = mk_load(a, src, src->ndim, idx);
	c->reduce = REDUCE_NONE;
	block_update_regions(p, c);
	stmt_new_block(p, c);
	return c;
}

/* The innermost loop (or the root) enclosing both a and b. */
static tir_stmt *common_scope(tir_stmt *a, tir_stmt *b)
{
	for (tir_stmt *q = a->parent; q; q = q->parent)
		if (stmt_is_ancestor(q, b))
			return q;
	return NULL;
}

/* The child of scope that holds s. */
static tir_stmt *child_in(const tir_stmt *scope, tir_stmt *s)
{
	while (s->parent != scope)
		s = s->parent;
	return s;
}

static int parse_scope(const tir_inst *in, tir_error *err)
{
	if (!in->str)
		return tir_fail(err, "no storage scope");
	int sc = scope_parse(in->str);
	if (sc < 0)
		return tir_fail(err, "unknown storage scope \"%s\"", in->str);
	return sc;
}

/* Every reader of buf (blocks[0..n), n returned), the block b among them. */
static int readers_of(tir_program *p, const tir_buffer *buf, tir_block **out)
{
	int n = 0;
	for (int i = 0; i < p->nblocks && n < 256; i++) {
		tir_block *c = p->blocks[i];
		if (!c->stmt || c->store == buf)
			continue;
		for (int r = 0; r < c->nreads; r++)
			if (c->reads[r].buf == buf) {
				out[n++] = c;
				break;
			}
	}
	return n;
}

/* cache_read(block, all) with all = 1: every block reading the buffer reads
 * the cache (TensorIR's cache_read without consumer blocks), filled by a
 * copy, in the innermost scope holding the buffer's writers and readers, of
 * what the readers read in one iteration of it, after the last writer or,
 * for a buffer nothing writes, right before the first reader (compute_at
 * may move it further in).  Every writer must run before every reader. */
static int cache_read_all(tir_sched *s, tir_inst *in, tir_block *b, tir_buffer *buf, int sc,
			  tir_error *err)
{
	tir_program *p = s->p;
	tir_block *rd[256];
	int nr = readers_of(p, buf, rd);
	/* the innermost statement holding every reader and writer */
	tir_stmt *scope = b->stmt->parent;
	for (int i = 0; i < p->nblocks; i++) {
		tir_block *c = p->blocks[i];
		if (!c->stmt || (c->store != buf && !block_reads(c, buf)))
			continue;
		while (scope->parent && !stmt_is_ancestor(scope, c->stmt))
			scope = scope->parent;
	}
	int last_w = -1, first_r = -1;
	for (int i = 0; i < p->nblocks; i++) {
		tir_block *c = p->blocks[i];
		if (!c->stmt)
			continue;
		if (c->store == buf) {
			int k = stmt_index(child_in(scope, c->stmt));
			if (k > last_w)
				last_w = k;
		}
	}
	for (int i = 0; i < nr; i++) {
		int k = stmt_index(child_in(scope, rd[i]->stmt));
		if (first_r < 0 || k < first_r)
			first_r = k;
	}
	if (last_w >= 0 && last_w >= first_r)
		return tir_fail(err, "\"%s\" is written in or after the loop nest of a block that reads it",
				buf->name);
	int pos = last_w >= 0 ? last_w + 1 : first_r;
	tir_buffer *cb = program_buffer(p, cache_name(p, buf, in->str), buf->dtype,
					buf->ndim, buf->shape, (tir_scope)sc, BUF_TEMP);
	tir_block *copy = copy_block(p, cb, buf, cb->name);
	sched_place_stage(p, copy, scope, pos, rd, nr, buf, false);
	for (int i = 0; i < nr; i++) {
		rd[i]->value = expr_replace_buffer(&p->arena, rd[i]->value, buf, cb);
		rd[i]->init = expr_replace_buffer(&p->arena, rd[i]->init, buf, cb);
		block_update_regions(p, rd[i]);
	}
	int rv = sched_new_rv(s, RV_BLOCK);
	s->rv[rv].block = copy;
	in->out[in->nout++] = rv;
	return 0;
}

/* cache_read(block, read_index, scope[, all]): block reads region read_index
 * of its reads (not its own output) through a new buffer `<buf>_<scope>`,
 * filled by a copy block inserted right after the top-level statement of
 * the buffer's last producer, or, for a buffer nothing writes, right before
 * the top-level statement holding the block.  Only this block reads the
 * cache; with the attribute all = 1, every block that reads the buffer
 * (cache_read_all above).  Returns the copy block. */
int prim_cache_read(tir_sched *s, tir_inst *in, tir_error *err)
{
	tir_program *p = s->p;
	if (in->nin != 1 || in->nattr < 1 || in->nattr > 2 ||
	    (in->nattr == 2 && in->attr[1] != 0 && in->attr[1] != 1))
		return tir_fail(err, "takes a block, a read index and whether every reader reads the cache (0 or 1)");
	tir_block *b = sched_block(s, in->in[0], err);
	if (!b)
		return -1;
	int sc = parse_scope(in, err);
	if (sc < 0)
		return -1;
	int64_t ri = in->attr[0];
	if (ri < 0 || ri >= b->nreads)
		return tir_fail(err, "block \"%s\" has %d read regions; read index %lld is out of range",
				b->name, b->nreads, (long long)ri);
	tir_buffer *buf = b->reads[ri].buf;
	if (buf == b->store)
		return tir_fail(err, "read %lld of block \"%s\" is its own output \"%s\"; use cache_write",
				(long long)ri, b->name, buf->name);
	if (in->nattr == 2 && in->attr[1] == 1)
		return cache_read_all(s, in, b, buf, sc, err);
	/* where the stage goes: for a buffer that blocks write, in the innermost
	 * scope holding the writers and the block, after the last writer; else
	 * at the top level right before the block's loop nest */
	tir_stmt *scope = p->root;
	bool first = true;
	for (int i = 0; i < p->nblocks; i++) {
		tir_block *w = p->blocks[i];
		if (!w->stmt || w->store != buf || w == b)
			continue;
		tir_stmt *sc2 = common_scope(w->stmt, b->stmt);
		if (first || stmt_is_ancestor(sc2, scope))
			scope = sc2;
		first = false;
	}
	tir_stmt *cons = child_in(scope, b->stmt);
	int pos = -1;
	for (int i = 0; i < p->nblocks; i++) {
		tir_block *w = p->blocks[i];
		if (!w->stmt || w->store != buf)
			continue;
		tir_stmt *wc = child_in(scope, w->stmt);
		if (wc == cons)
			return tir_fail(err, "block \"%s\" writes \"%s\" in the same loop nest as its consumer \"%s\"",
					w->name, buf->name, b->name);
		if (stmt_index(wc) > stmt_index(cons))
			return tir_fail(err, "block \"%s\" writes \"%s\" after its consumer \"%s\"",
					w->name, buf->name, b->name);
		if (stmt_index(wc) + 1 > pos)
			pos = stmt_index(wc) + 1;
	}
	if (pos < 0)
		pos = stmt_index(cons);

	tir_buffer *cb = program_buffer(p, cache_name(p, buf, in->str), buf->dtype,
					buf->ndim, buf->shape, (tir_scope)sc, BUF_TEMP);
	tir_block *copy = copy_block(p, cb, buf, cb->name);
	sched_place_stage(p, copy, scope, pos, &b, 1, buf, false);
	b->value = expr_replace_buffer(&p->arena, b->value, buf, cb);
	b->init = expr_replace_buffer(&p->arena, b->init, buf, cb);
	block_update_regions(p, b);

	int rv = sched_new_rv(s, RV_BLOCK);
	s->rv[rv].block = copy;
	in->out[in->nout++] = rv;
	return 0;
}

/* The arguments of cache_write and set_scope: a block (*b) and write index 0
 * (attrs_ok: the instruction has its attributes), and the scope, which is
 * returned; -1 with a message. */
static int write_args(tir_sched *s, const tir_inst *in, bool attrs_ok, tir_block **b,
		      tir_error *err)
{
	if (in->nin != 1 || !attrs_ok)
		return tir_fail(err, "takes a block and a write index");
	if (!(*b = sched_block(s, in->in[0], err)))
		return -1;
	int sc = parse_scope(in, err);
	if (sc < 0)
		return -1;
	if (in->attr[0] != 0)
		return tir_fail(err, "block \"%s\" writes one buffer; write index %lld is out of range",
				(*b)->name, (long long)in->attr[0]);
	return sc;
}

/* cache_write(block, 0, scope): block writes a new buffer `<buf>_<scope>`
 * instead of its output buffer; a copy block inserted right after the block's
 * top-level statement writes it back.  A reduction accumulates in the cache.
 * Requires the block to be the output's only writer and every other reader of
 * the output to run after the block's top-level statement.  Returns the
 * copy-back block. */
int prim_cache_write(tir_sched *s, tir_inst *in, tir_error *err)
{
	tir_program *p = s->p;
	tir_block *b;
	int sc = write_args(s, in, in->nattr >= 1, &b, err);
	if (sc < 0)
		return -1;
	tir_buffer *buf = b->store;
	tir_stmt *top = sched_top_stmt(b->stmt);
	for (int i = 0; i < p->nblocks; i++) {
		tir_block *c = p->blocks[i];
		if (!c->stmt || c == b)
			continue;
		if (c->store == buf)
			return tir_fail(err, "block \"%s\" also writes \"%s\"; cache_write needs block \"%s\" to be its only producer",
					c->name, buf->name, b->name);
		bool reads = false;
		for (int r = 0; r < c->nreads; r++)
			reads = reads || c->reads[r].buf == buf;
		if (reads && stmt_index(sched_top_stmt(c->stmt)) <= stmt_index(top))
			return tir_fail(err, "block \"%s\" reads \"%s\" in or before the loop nest of its producer \"%s\"",
					c->name, buf->name, b->name);
	}

	tir_buffer *cb = program_buffer(p, cache_name(p, buf, in->str), buf->dtype,
					buf->ndim, buf->shape, (tir_scope)sc, BUF_TEMP);
	tir_block *copy = copy_block(p, buf, cb, cb->name);
	sched_place_stage(p, copy, p->root, stmt_index(top) + 1, &b, 1, buf, true);
	b->store = cb;
	b->value = expr_replace_buffer(&p->arena, b->value, buf, cb);
	b->init = expr_replace_buffer(&p->arena, b->init, buf, cb);
	block_update_regions(p, b);

	int rv = sched_new_rv(s, RV_BLOCK);
	s->rv[rv].block = copy;
	in->out[in->nout++] = rv;
	return 0;
}

/* storage_align(block, buffer_index, axis, factor, offset): pads the stride of
 * dimension `axis` of the block's output (buffer_index 0) so that
 * stride % factor == offset, against shared-memory bank conflicts.  Only a
 * shared or local intermediate buffer has a layout of its own to change. */
int prim_storage_align(tir_sched *s, tir_inst *in, tir_error *err)
{
	if (in->nin != 1 || in->nattr != 4)
		return tir_fail(err, "takes a block, a buffer index, an axis, a factor and an offset");
	tir_block *b = sched_block(s, in->in[0], err);
	if (!b)
		return -1;
	int64_t bi = in->attr[0], axis = in->attr[1], factor = in->attr[2], offset = in->attr[3];
	if (bi != 0)
		return tir_fail(err, "block \"%s\" writes one buffer; buffer index %lld is out of range",
				b->name, (long long)bi);
	tir_buffer *buf = b->store;
	if (buf->role != BUF_TEMP)
		return tir_fail(err, "buffer \"%s\" is a parameter; its layout is the caller's", buf->name);
	if (buf->scope != TIR_SCOPE_SHARED && buf->scope != TIR_SCOPE_LOCAL)
		return tir_fail(err, "buffer \"%s\" is in %s scope; only shared and local buffers can be aligned",
				buf->name, scope_name(buf->scope));
	if (axis < 0 || axis >= buf->ndim)
		return tir_fail(err, "buffer \"%s\" has %d dimensions; axis %lld is out of range",
				buf->name, buf->ndim, (long long)axis);
	if (factor <= 0 || factor > (1 << 20))
		return tir_fail(err, "buffer \"%s\": factor %lld is not in 1..%d",
				buf->name, (long long)factor, 1 << 20);
	if (offset < 0 || offset >= factor)
		return tir_fail(err, "buffer \"%s\": offset %lld is not in 0..%lld",
				buf->name, (long long)offset, (long long)factor - 1);
	buf->align_factor[axis] = (int)factor;
	buf->align_offset[axis] = (int)offset;
	return 0;
}

/* set_scope(block, 0, scope): the buffer the block writes moves to storage
 * scope `scope` (global, shared or local), as TensorIR's set_scope: nothing
 * in the program changes but where the buffer lives — a shared buffer is
 * allocated per thread block and a local one per thread, each compacted to
 * what its accessors touch under their lowest common loop
 * (docs/ir-semantics.md).  Whether its accesses allow that (one kernel, a
 * local buffer read where it was written, the sizes) is validation's to
 * judge.  Used where a value is made and used within one kernel: a row's
 * reduction read by the row's other threads (shared, so that the code puts
 * a barrier between), or kept by the thread that reads it (local).
 * Requires an intermediate buffer (not a parameter) and a scope that is not
 * a tensor-core fragment (only intrinsics fill those). */
int prim_set_scope(tir_sched *s, tir_inst *in, tir_error *err)
{
	tir_block *b;
	int sc = write_args(s, in, in->nattr == 1, &b, err);
	if (sc < 0)
		return -1;
	tir_buffer *buf = b->store;
	if (buf->role != BUF_TEMP)
		return tir_fail(err, "buffer \"%s\" is a parameter; its scope is the caller's", buf->name);
	if (scope_is_fragment((tir_scope)sc))
		return tir_fail(err, "buffer \"%s\": scope \"%s\" is a tensor-core fragment, which only intrinsics fill",
				buf->name, in->str);
	buf->scope = (tir_scope)sc;
	return 0;
}
