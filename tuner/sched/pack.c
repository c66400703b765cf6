/*
 * pack.c — layout rewriting of a block's input: transform_layout.
 *
 * A blocked layout (oneDNN's nChw16c activations, OIhw16i16o weights) is a
 * buffer whose dimensions are a permutation of the original ones, some of
 * them split into an outer part (d / f) and an inner part (d % f): W[r][s][ci]
 * [co] as Wp[co/16][r][s][ci][co%16] puts the 16 output channels a vector
 * reads next to each other and the reduction over (r, s, ci) on a contiguous
 * stream.  transform_layout (TensorIR's transform_layout, applied to one
 * reader) builds such a buffer for one read of a block: a producer block
 * packs the original buffer into it, and the block's loads of the original
 * are rewritten to the packed buffer through the same map, so the program
 * computes exactly what it did.
 *
 * The map is a bijection by construction, and checked to be one: every
 * dimension of the original appears exactly once whole or exactly once as
 * an outer and once as an inner part of the same factor.  A factor that does
 * not divide its dimension pads: the packed buffer is rounded up and the
 * producer writes 0 past the original extent, where no rewritten load reads
 * (the rewritten index is the original one, in range).
 *
 * The producer is a fresh nest at the top level, after the last writer of
 * the buffer and before the block's nest, as reindex's stages are: it runs
 * once per call (an input's packing); compute_at may move it under a tile
 * loop so that it packs only the tile.  The consumer's indices become
 * floordiv / floormod of the old ones; code generation binds them to the
 * loops (c.c: bind_divmod), where a loop split by the factor removes them.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include "sched.h"

/* a split factor is at most this (a larger one pads a dimension by more) */
#define PACK_MAX_FACTOR 4096

typedef enum { PART_WHOLE, PART_OUTER, PART_INNER } part_kind;

/* One dimension of the packed buffer: part `kind` of dimension `dim` of
 * the original, split by `factor` (PART_WHOLE: 1). */
typedef struct pack_dim {
	int dim;
	part_kind kind;
	int64_t factor;
} pack_dim;

/* Parses "3/16,0,1,2,3%16" into dims[0..*n) and checks that it is a
 * bijection onto the dimensions of buf. */
static int parse_map(const char *map, const tir_buffer *buf, pack_dim *dims, int *n,
		     tir_error *err)
{
	*n = 0;
	if (!map || !*map)
		return tir_fail(err, "no layout map for \"%s\"", buf->name);
	const char *p = map;
	while (*p) {
		if (*n == TIR_MAX_DIMS)
			return tir_fail(err, "layout map \"%s\" has more than %d dimensions",
					map, TIR_MAX_DIMS);
		char *end;
		if (!isdigit((unsigned char)*p))
			return tir_fail(err, "layout map \"%s\": expected a dimension at \"%s\"", map, p);
		long d = strtol(p, &end, 10);
		if (d >= buf->ndim)
			return tir_fail(err, "layout map \"%s\": \"%s\" has %d dimensions, not %ld",
					map, buf->name, buf->ndim, d + 1);
		pack_dim *q = &dims[(*n)++];
		q->dim = (int)d;
		q->kind = PART_WHOLE;
		q->factor = 1;
		p = end;
		if (*p == '/' || *p == '%') {
			q->kind = *p == '/' ? PART_OUTER : PART_INNER;
			p++;
			if (!isdigit((unsigned char)*p))
				return tir_fail(err, "layout map \"%s\": expected a factor at \"%s\"", map, p);
			long long f = strtoll(p, &end, 10);
			if (f < 2 || f > PACK_MAX_FACTOR)
				return tir_fail(err, "layout map \"%s\": factor %lld of dimension %ld must be 2 to %d",
						map, f, d, PACK_MAX_FACTOR);
			q->factor = f;
			p = end;
		}
		if (*p == ',')
			p++;
		else if (*p)
			return tir_fail(err, "layout map \"%s\": unexpected \"%c\"", map, *p);
	}
	/* a bijection: each dimension whole once, or outer and inner once each
	 * with one factor */
	for (int d = 0; d < buf->ndim; d++) {
		int whole = 0, outer = 0, inner = 0;
		int64_t fo = 0, fi = 0;
		for (int i = 0; i < *n; i++) {
			if (dims[i].dim != d)
				continue;
			if (dims[i].kind == PART_WHOLE)
				whole++;
			else if (dims[i].kind == PART_OUTER) {
				outer++;
				fo = dims[i].factor;
			} else {
				inner++;
				fi = dims[i].factor;
			}
		}
		if (whole + outer + inner == 0)
			return tir_fail(err, "layout map \"%s\" is not a bijection: dimension %d of \"%s\" is missing",
					map, d, buf->name);
		if (whole > 1 || outer > 1 || inner > 1 || (whole && (outer || inner)))
			return tir_fail(err, "layout map \"%s\" is not a bijection: dimension %d of \"%s\" appears more than once",
					map, d, buf->name);
		if (!whole && (outer != 1 || inner != 1))
			return tir_fail(err, "layout map \"%s\" is not a bijection: dimension %d of \"%s\" has an %s part without the %s",
					map, d, buf->name, outer ? "outer" : "inner", outer ? "inner" : "outer");
		if (!whole && fo != fi)
			return tir_fail(err, "layout map \"%s\" is not a bijection: dimension %d of \"%s\" is split by %lld and %lld",
					map, d, buf->name, (long long)fo, (long long)fi);
	}
	return 0;
}

/* The rewrite of every load of `from` in an expression into a load of `to`
 * through the map. */
typedef struct pack_rw {
	tir_arena *a;
	const tir_buffer *from;
	tir_buffer *to;
	const pack_dim *dims;
	int n;
} pack_rw;

static tir_expr *rewrite(const pack_rw *rw, tir_expr *e)
{
	if (!e || e->kind == E_INT || e->kind == E_FLOAT || e->kind == E_VAR)
		return e;
	tir_expr *x = arena_alloc(rw->a, sizeof *x);
	*x = *e;
	x->a = rewrite(rw, e->a);
	x->b = rewrite(rw, e->b);
	x->c = rewrite(rw, e->c);
	if (e->kind != E_LOAD)
		return x;
	tir_expr *idx[TIR_MAX_DIMS];
	for (int d = 0; d < e->nidx; d++)
		idx[d] = rewrite(rw, e->idx[d]);
	if (e->buf != rw->from)
		return mk_load(rw->a, e->buf, e->nidx, idx);
	tir_expr *pi[TIR_MAX_DIMS];
	for (int i = 0; i < rw->n; i++) {
		const pack_dim *q = &rw->dims[i];
		tir_expr *f = mk_int(rw->a, q->factor);
		pi[i] = q->kind == PART_WHOLE ? idx[q->dim]
			: q->kind == PART_OUTER ? mk_floordiv(rw->a, idx[q->dim], f)
						: mk_floormod(rw->a, idx[q->dim], f);
	}
	return mk_load(rw->a, rw->to, rw->n, pi);
}

struct count_ctx {
	const tir_buffer *buf;
	int n;
};

static void count_load(tir_expr *load, void *ctx)
{
	struct count_ctx *c = ctx;
	c->n += load->buf == c->buf;
}

/* transform_layout(block, read index, "map"): read `index` of the block (a
 * buffer it loads, not its output) gets a packed copy `<buf>_packed` laid
 * out by the map — comma-separated dimensions of the original, each "d"
 * (dimension d whole), "d/f" (its outer part, extent ceil(ext/f)) or "d%f"
 * (its inner part, extent f), the packed buffer's dimensions outermost
 * first; the map must be a bijection onto the original's dimensions (each
 * whole once, or split once into both parts by one factor of 2 or more).
 * A stage block `<buf>_packed` fills it (0 where a split overshoots the
 * extent) at the top level, after the last writer of the original and
 * before the block's nest; every load of the original in the block (value
 * and init) reads the packed buffer at the mapped indices.  Other readers
 * keep the original.  Returns the stage block. */
int prim_transform_layout(tir_sched *s, tir_inst *in, tir_error *err)
{
	tir_program *p = s->p;
	tir_arena *a = &p->arena;
	if (in->nin != 1 || in->nattr != 1)
		return tir_fail(err, "takes a block, a read index and a layout map");
	tir_block *b = sched_block(s, in->in[0], err);
	if (!b)
		return -1;
	int64_t index = in->attr[0];
	if (index < 0 || index >= b->nreads)
		return tir_fail(err, "block \"%s\" has %d read regions; read index %lld is out of range",
				b->name, b->nreads, (long long)index);
	tir_buffer *buf = b->reads[index].buf;
	if (buf == b->store)
		return tir_fail(err, "read %lld of block \"%s\" is its own output \"%s\"; only inputs are packed",
				(long long)index, b->name, buf->name);
	struct count_ctx cc = { buf, 0 };
	expr_visit_loads(b->value, count_load, &cc);
	expr_visit_loads(b->init, count_load, &cc);
	if (cc.n == 0)
		return tir_fail(err, "block \"%s\" does not load \"%s\"", b->name, buf->name);
	pack_dim dims[TIR_MAX_DIMS];
	int n;
	if (parse_map(in->str, buf, dims, &n, err))
		return -1;
	int pos = sched_input_stage_pos(p, b, buf, err);
	if (pos < 0)
		return -1;

	/* the packed buffer and its stage: dst[v] = src[mapped v] */
	int64_t shape[TIR_MAX_DIMS];
	tir_var *v[TIR_MAX_DIMS];
	tir_expr *vv[TIR_MAX_DIMS];
	for (int i = 0; i < n; i++) {
		int64_t ext = buf->shape[dims[i].dim], f = dims[i].factor;
		shape[i] = dims[i].kind == PART_WHOLE ? ext
			 : dims[i].kind == PART_OUTER ? (ext + f - 1) / f : f;
		v[i] = program_var(p, arena_printf(a, "v%d", i));
		vv[i] = mk_var(a, v[i]);
	}
	tir_expr *src[TIR_MAX_DIMS], *cond = NULL;
	for (int d = 0; d < buf->ndim; d++) {
		int whole = -1, outer = -1, inner = -1;
		for (int i = 0; i < n; i++) {
			if (dims[i].dim != d)
				continue;
			if (dims[i].kind == PART_WHOLE)
				whole = i;
			else if (dims[i].kind == PART_OUTER)
				outer = i;
			else
				inner = i;
		}
		if (whole >= 0) {
			src[d] = vv[whole];
			continue;
		}
		int64_t f = dims[outer].factor;
		src[d] = mk_add(a, mk_mul(a, vv[outer], mk_int(a, f)), vv[inner]);
		if (buf->shape[d] % f)
			cond = mk_and(a, cond, mk_bin(a, E_LT, src[d], mk_int(a, buf->shape[d])));
	}
	const char *name = program_fresh_name(p, arena_printf(a, "%s_packed", buf->name));
	tir_buffer *pb = program_buffer(p, name, buf->dtype, n, shape, TIR_SCOPE_GLOBAL, BUF_TEMP);
	tir_expr *value = mk_load(a, buf, buf->ndim, src);
	if (cond) {
		tir_expr *zero = dtype_is_float(buf->dtype) ? mk_float(a, 0.0, buf->dtype)
							    : mk_cast(a, buf->dtype, mk_int(a, 0));
		value = mk_select(a, cond, value, zero);
	}
	tir_block *stage = sched_stage_block(p, name, pb, n, shape, v, vv, value, pos);
	stage->name = name;

	/* the block reads the packed buffer */
	pack_rw rw = { a, buf, pb, dims, n };
	b->value = rewrite(&rw, b->value);
	b->init = rewrite(&rw, b->init);
	block_update_regions(p, b);
	int rv = sched_new_rv(s, RV_BLOCK);
	s->rv[rv].block = stage;
	in->out[in->nout++] = rv;
	return 0;
}
