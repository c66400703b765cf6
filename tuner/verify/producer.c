/*
 * producer.c — producer-consumer validation: is every value read before it
 * is written?
 *
 * For each intermediate buffer (BUF_TEMP, not inlined away) and each block
 * that reads it (a load in its value or init), some block that writes the
 * buffer must come earlier in program order and cover what is read: at the
 * LCA of writer and reader, with the loops under the LCA ranged over their
 * extents and the loops above it fixed, the reader's region must lie inside
 * the writer's, dimension by dimension (same symbolic base, constant bounds
 * compared).  As in allocation (docs/ir-semantics.md), shared buffers also
 * range the threadIdx / vthread loops above the LCA (every thread of the
 * block writes its part before any reads), local ones the vthread loops.
 *
 * A reduction without an init (after decompose_reduction) reads its own
 * store, so it is a reader of that buffer too, param or not.  A temp buffer
 * that is read and never written, an output never written and an input
 * written are errors.
 */
#include <string.h>
#include "verify.h"

typedef struct region {
	int n;
	tir_interval iv[TIR_MAX_DIMS];
} region;

typedef struct reads {
	vfy_ctx *c;
	const tir_block *r;
	const tir_buffer *buf;
	tir_stmt *at;
	region reg;
	bool any;
} reads;

static void relax_of(const tir_buffer *buf, bool *threads, bool *vthreads)
{
	*threads = buf->scope == TIR_SCOPE_SHARED;
	*vthreads = buf->scope == TIR_SCOPE_SHARED;    /* as lower.c's relaxed() */
}

/* The interval of one index, clipped to the buffer when it is constant. */
static tir_interval access_iv(vfy_ctx *c, const tir_block *b, const tir_buffer *buf,
			      int d, const tir_expr *e, tir_stmt *at)
{
	bool th, vt;
	relax_of(buf, &th, &vt);
	tir_interval iv = vfy_interval(c, b, e, at, th, vt);
	if (!iv.full && !iv.base) {
		if (iv.lo < 0)
			iv.lo = 0;
		if (iv.hi > buf->shape[d] - 1)
			iv.hi = buf->shape[d] - 1;
	}
	return iv;
}

static void add_load(tir_expr *load, void *ctx)
{
	reads *rs = ctx;
	if (load->buf != rs->buf || load->nidx != rs->buf->ndim)
		return;
	for (int d = 0; d < load->nidx; d++) {
		tir_interval iv = access_iv(rs->c, rs->r, rs->buf, d, load->idx[d], rs->at);
		rs->reg.iv[d] = rs->any ? interval_union(&rs->c->arena, rs->reg.iv[d], iv) : iv;
	}
	rs->reg.n = load->nidx;
	rs->any = true;
}

static bool loads_buffer(const tir_expr *e, const tir_buffer *buf)
{
	if (!e)
		return false;
	if (e->kind == E_LOAD && e->buf == buf)
		return true;
	if (loads_buffer(e->a, buf) || loads_buffer(e->b, buf) || loads_buffer(e->c, buf))
		return true;
	for (int i = 0; i < e->nidx; i++)
		if (loads_buffer(e->idx[i], buf))
			return true;
	return false;
}

static bool self_read(const tir_block *b)
{
	return b->reduce != REDUCE_NONE && !b->init;
}

/* What reader r reads of buf, under `at`. */
static region read_region(vfy_ctx *c, const tir_block *r, const tir_buffer *buf,
			  tir_stmt *at)
{
	reads rs = { c, r, buf, at, { 0 }, false };
	if (r->store != buf) {
		expr_visit_loads(r->value, add_load, &rs);
		expr_visit_loads(r->init, add_load, &rs);
	} else {
		tir_expr *self = mk_load(&c->arena, (tir_buffer *)buf, buf->ndim,
					 (tir_expr *const *)r->store_idx);
		add_load(self, &rs);
	}
	return rs.reg;
}

static region write_region(vfy_ctx *c, const tir_block *w, tir_stmt *at)
{
	region reg = { w->store->ndim, { { 0 } } };
	for (int d = 0; d < reg.n; d++)
		reg.iv[d] = access_iv(c, w, w->store, d, w->store_idx[d], at);
	return reg;
}

/* An interval that could not be bounded stands for the whole dimension. */
static tir_interval whole_if_full(tir_interval iv, int64_t extent)
{
	if (iv.full) {
		iv.full = false;
		iv.base = NULL;
		iv.lo = 0;
		iv.hi = extent - 1;
	}
	return iv;
}

/* Whether [r] lies inside [w] for every value of the loops above: the bases
 * may differ by an expression whose bounds over all loop extents keep r's
 * ends inside w's. */
static bool inside(vfy_ctx *c, tir_interval w, tir_interval r, int64_t extent)
{
	if (!r.full && r.lo > r.hi)
		return true;   /* nothing is read */
	w = whole_if_full(w, extent);
	r = whole_if_full(r, extent);
	if (w.base == r.base || (w.base && r.base && expr_equal(w.base, r.base)))
		return w.lo <= r.lo && r.hi <= w.hi;
	tir_expr *d = mk_sub(&c->arena, r.base ? r.base : mk_int(&c->arena, 0),
			     w.base ? w.base : mk_int(&c->arena, 0));
	tir_env env = env_new(c->p->nvars);
	for (int v = 0; v < c->p->nvars; v++)
		if (c->loop_of[v])
			env_set(&env, c->p->vars[v], 0, c->loop_of[v]->extent - 1);
	int64_t dmin, dmax;
	d = expr_simplify(&c->arena, d, &env);
	bool ok = expr_bounds(d, &env, &dmin, &dmax);
	env_free(&env);
	/* r.base = w.base + d, d in [dmin, dmax] */
	return ok && w.lo <= r.lo + dmin && r.hi + dmax <= w.hi;
}

static bool covers(vfy_ctx *c, const tir_buffer *buf, const region *w, const region *r)
{
	for (int d = 0; d < r->n && d < w->n; d++)
		if (!inside(c, w->iv[d], r->iv[d], buf->shape[d]))
			return false;
	return true;
}

static int check_reader(vfy_ctx *c, const tir_buffer *buf, const tir_block *r,
			tir_block *const *writers, int nw, tir_error *err)
{
	int ro = vfy_order(c, r);
	const tir_block *last = NULL;
	region lr = { 0 }, lw = { 0 };
	tir_stmt *lat = NULL;
	for (int i = nw - 1; i >= 0; i--) {
		const tir_block *w = writers[i];
		if (w == r || vfy_order(c, w) > ro)
			continue;
		tir_stmt *at = vfy_lca(w->stmt, r->stmt);
		region rr = read_region(c, r, buf, at), wr = write_region(c, w, at);
		if (covers(c, buf, &wr, &rr))
			return 0;
		if (!last) {
			last = w;
			lr = rr;
			lw = wr;
			lat = at;
		}
	}
	if (!last) {
		const tir_block *later = NULL;
		for (int i = 0; i < nw && !later; i++)
			if (writers[i] != r)
				later = writers[i];
		if (!later)
			return tir_fail(err, "producer-consumer: block \"%s\" reads %s, which "
					"no other block writes", r->name, buf->name);
		return tir_fail(err, "producer-consumer: block \"%s\" reads %s before its "
				"producer \"%s\" writes it", r->name, buf->name, later->name);
	}
	return tir_fail(err, "producer-consumer: block \"%s\" reads %s that \"%s\" does "
			"not write under %s (it writes %s)", r->name,
			vfy_region_str(c, buf, lr.n, lr.iv), last->name,
			vfy_stmt_name(c, lat), vfy_region_str(c, buf, lw.n, lw.iv));
}

static int check_buffer(vfy_ctx *c, const tir_buffer *buf, tir_error *err)
{
	tir_block **writers = arena_alloc(&c->arena, sizeof(tir_block *) * (size_t)(c->nblocks + 1));
	int nw = 0;
	const tir_block *reader = NULL;
	for (int i = 0; i < c->nblocks; i++) {
		tir_block *b = c->blocks[i];
		if (b->store == buf)
			writers[nw++] = b;
		else if (!reader && (loads_buffer(b->value, buf) || loads_buffer(b->init, buf)))
			reader = b;
	}
	if (buf->role == BUF_INPUT && nw)
		return tir_fail(err, "producer-consumer: block \"%s\" writes input \"%s\"",
				writers[0]->name, buf->name);
	if (buf->role == BUF_OUTPUT && !nw)
		return tir_fail(err, "producer-consumer: output \"%s\" is never written",
				buf->name);
	if (buf->role == BUF_TEMP && reader && !nw)
		return tir_fail(err, "producer-consumer: buffer \"%s\" is read by block \"%s\" "
				"but never written", buf->name, reader->name);
	for (int i = 0; i < c->nblocks; i++) {
		const tir_block *b = c->blocks[i];
		bool reads_it = b->store == buf ? self_read(b)
			: buf->role == BUF_TEMP &&
			  (loads_buffer(b->value, buf) || loads_buffer(b->init, buf));
		if (reads_it && check_reader(c, buf, b, writers, nw, err))
			return -1;
	}
	return 0;
}

int verify_producer(vfy_ctx *c, tir_error *err)
{
	for (int i = 0; i < c->p->nbufs; i++) {
		const tir_buffer *buf = c->p->bufs[i];
		if (buf->dead)
			continue;
		if (check_buffer(c, buf, err))
			return -1;
	}
	return 0;
}
