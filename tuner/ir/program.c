/*
 * program.c — programs: variables, buffers, the statement tree and blocks.
 *
 * The tree is mutable (schedule primitives edit it in place after checking
 * their preconditions) but every node lives in the program's arena, so a
 * candidate's whole program is freed at once.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ir.h"

tir_program *program_new(const tir_workload *w)
{
	tir_program *p = xcalloc(1, sizeof *p);
	p->w = w;
	p->root = stmt_new_seq(p);
	return p;
}

void tir_program_free(tir_program *p)
{
	if (!p)
		return;
	arena_free(&p->arena);
	free(p->bufs);
	free(p->blocks);
	free(p->vars);
	free(p);
}

static bool name_taken(const tir_program *p, const char *name)
{
	for (int i = 0; i < p->nbufs; i++)
		if (!strcmp(p->bufs[i]->name, name))
			return true;
	for (int i = 0; i < p->nblocks; i++)
		if (!strcmp(p->blocks[i]->name, name))
			return true;
	return false;
}

const char *program_fresh_name(tir_program *p, const char *base)
{
	if (!name_taken(p, base))
		return arena_strdup(&p->arena, base);
	for (int i = 1;; i++) {
		char *s = arena_printf(&p->arena, "%s_%d", base, i);
		if (!name_taken(p, s))
			return s;
	}
}

static bool var_taken(const tir_program *p, const char *name)
{
	for (int i = 0; i < p->nvars; i++)
		if (!strcmp(p->vars[i]->name, name))
			return true;
	return false;
}

/* Variable names are unique in a program, so generated code can use them. */
tir_var *program_var(tir_program *p, const char *name)
{
	tir_var *v = arena_alloc(&p->arena, sizeof *v);
	if (!var_taken(p, name)) {
		v->name = arena_strdup(&p->arena, name);
	} else {
		for (int i = 1;; i++) {
			char *s = arena_printf(&p->arena, "%s_%d", name, i);
			if (!var_taken(p, s)) {
				v->name = s;
				break;
			}
		}
	}
	if (p->nvars == p->capvars) {
		p->capvars = p->capvars ? 2 * p->capvars : 32;
		p->vars = xrealloc(p->vars, sizeof(tir_var *) * (size_t)p->capvars);
	}
	v->id = p->nvars;
	p->vars[p->nvars++] = v;
	return v;
}

tir_buffer *program_buffer(tir_program *p, const char *name, tir_dtype t,
			   int ndim, const int64_t *shape, tir_scope scope,
			   tir_buf_role role)
{
	tir_buffer *b = arena_alloc(&p->arena, sizeof *b);
	b->name = program_fresh_name(p, name);
	b->id = p->nbufs;
	b->dtype = t;
	b->ndim = ndim;
	memcpy(b->shape, shape, sizeof(int64_t) * (size_t)ndim);
	b->scope = scope;
	b->role = role;
	if (p->nbufs == p->capbufs) {
		p->capbufs = p->capbufs ? 2 * p->capbufs : 8;
		p->bufs = xrealloc(p->bufs, sizeof(tir_buffer *) * (size_t)p->capbufs);
	}
	p->bufs[p->nbufs++] = b;
	if (role != BUF_TEMP)
		p->nparams++;
	return b;
}

tir_block *program_find_block(const tir_program *p, const char *name)
{
	for (int i = 0; i < p->nblocks; i++)
		if (p->blocks[i]->stmt && !strcmp(p->blocks[i]->name, name))
			return p->blocks[i];
	return NULL;
}

/* ---- statements ---------------------------------------------------------- */

static tir_stmt *stmt_new(tir_program *p, tir_stmt_kind k)
{
	tir_stmt *s = arena_alloc(&p->arena, sizeof *s);
	s->kind = k;
	s->p = p;
	return s;
}

tir_stmt *stmt_new_seq(tir_program *p) { return stmt_new(p, STMT_SEQ); }

tir_stmt *stmt_new_for(tir_program *p, tir_var *v, int64_t extent)
{
	tir_stmt *s = stmt_new(p, STMT_FOR);
	s->var = v;
	s->extent = extent;
	s->loop_kind = LOOP_SERIAL;
	return s;
}

tir_stmt *stmt_new_block(tir_program *p, tir_block *b)
{
	tir_stmt *s = stmt_new(p, STMT_BLOCK);
	s->block = b;
	b->stmt = s;
	return s;
}

void stmt_insert(tir_stmt *parent, int pos, tir_stmt *kid)
{
	if (parent->nkids == parent->capkids) {
		int cap = parent->capkids ? 2 * parent->capkids : 4;
		tir_stmt **k = arena_alloc(&parent->p->arena, sizeof(tir_stmt *) * (size_t)cap);
		if (parent->nkids)
			memcpy(k, parent->kids, sizeof(tir_stmt *) * (size_t)parent->nkids);
		parent->kids = k;
		parent->capkids = cap;
	}
	memmove(&parent->kids[pos + 1], &parent->kids[pos],
		sizeof(tir_stmt *) * (size_t)(parent->nkids - pos));
	parent->kids[pos] = kid;
	parent->nkids++;
	kid->parent = parent;
}

void stmt_append(tir_stmt *parent, tir_stmt *kid)
{
	stmt_insert(parent, parent->nkids, kid);
}

int stmt_index(const tir_stmt *kid)
{
	const tir_stmt *p = kid->parent;
	for (int i = 0; p && i < p->nkids; i++)
		if (p->kids[i] == kid)
			return i;
	return -1;
}

void stmt_remove(tir_stmt *kid)
{
	tir_stmt *p = kid->parent;
	int i = stmt_index(kid);
	if (i < 0)
		return;
	memmove(&p->kids[i], &p->kids[i + 1], sizeof(tir_stmt *) * (size_t)(p->nkids - i - 1));
	p->nkids--;
	kid->parent = NULL;
}

int stmt_loops(const tir_stmt *s, tir_stmt **out, int max)
{
	int n = 0;
	for (const tir_stmt *q = s->parent; q; q = q->parent)
		if (q->kind == STMT_FOR)
			n++;
	int i = n;
	for (const tir_stmt *q = s->parent; q; q = q->parent)
		if (q->kind == STMT_FOR) {
			i--;
			if (i < max)
				out[i] = (tir_stmt *)q;
		}
	return n;
}

bool stmt_is_ancestor(const tir_stmt *anc, const tir_stmt *s)
{
	for (const tir_stmt *q = s->parent; q; q = q->parent)
		if (q == anc)
			return true;
	return false;
}

static int stmt_depth(const tir_stmt *s)
{
	int d = 0;
	for (; s->parent; s = s->parent)
		d++;
	return d;
}

int stmt_order(const tir_stmt *a, const tir_stmt *b)
{
	int da = stmt_depth(a), db = stmt_depth(b);
	for (; da > db; da--)
		a = a->parent;
	for (; db > da; db--)
		b = b->parent;
	if (a == b)
		return 0;
	while (a->parent != b->parent) {
		a = a->parent;
		b = b->parent;
	}
	return stmt_index(a) < stmt_index(b) ? -1 : 1;
}

void stmt_visit_blocks(tir_stmt *s, void (*fn)(tir_block *b, void *ctx), void *ctx)
{
	if (s->kind == STMT_BLOCK) {
		fn(s->block, ctx);
		return;
	}
	for (int i = 0; i < s->nkids; i++)
		stmt_visit_blocks(s->kids[i], fn, ctx);
}

struct collect { tir_block **out; int n, max; };

static void collect_block(tir_block *b, void *ctx)
{
	struct collect *c = ctx;
	if (c->n < c->max)
		c->out[c->n] = b;
	c->n++;
}

int stmt_blocks(tir_stmt *s, tir_block **out, int max)
{
	struct collect c = { out, 0, max };
	stmt_visit_blocks(s, collect_block, &c);
	return c.n;
}

/* ---- blocks --------------------------------------------------------------- */

tir_block *block_new(tir_program *p, const char *name)
{
	tir_block *b = arena_alloc(&p->arena, sizeof *b);
	b->name = program_fresh_name(p, name);
	if (p->nblocks == p->capblocks) {
		p->capblocks = p->capblocks ? 2 * p->capblocks : 8;
		p->blocks = xrealloc(p->blocks, sizeof(tir_block *) * (size_t)p->capblocks);
	}
	p->blocks[p->nblocks++] = b;
	return b;
}

int block_add_iter(tir_block *b, tir_var *v, int64_t extent, tir_iter_kind kind,
		   tir_expr *binding)
{
	if (b->niters >= TIR_MAX_ITERS)
		return -1;
	tir_iter *it = &b->iters[b->niters++];
	it->var = v;
	it->extent = extent;
	it->kind = kind;
	it->binding = binding;
	return 0;
}

/* ---- reducers (reducers.def) ----------------------------------------------- */

static const char *const reducer_names[REDUCE_NKINDS] = {
	[REDUCE_NONE] = "",
#define TIR_REDUCER(id, name, kind) [REDUCE_##id] = name,
#include "reducers.def"
#undef TIR_REDUCER
};

static const tir_expr_kind reducer_kinds[REDUCE_NKINDS] = {
	[REDUCE_NONE] = E_ADD,
#define TIR_REDUCER(id, name, kind) [REDUCE_##id] = E_##kind,
#include "reducers.def"
#undef TIR_REDUCER
};

const char *reduce_name(tir_reduce r)
{
	return (unsigned)r < REDUCE_NKINDS ? reducer_names[r] : "";
}

int reduce_parse(const char *name)
{
	for (int r = 1; name && r < REDUCE_NKINDS; r++)
		if (!strcmp(name, reducer_names[r]))
			return r;
	return -1;
}

tir_expr_kind reduce_combiner(tir_reduce r)
{
	return reducer_kinds[(unsigned)r < REDUCE_NKINDS ? r : REDUCE_SUM];
}

tir_expr *reduce_combine(tir_arena *a, tir_reduce r, tir_expr *acc, tir_expr *v)
{
	return mk_bin(a, reduce_combiner(r), acc, v);
}

/* The identity of r in integer dtype t. */
static int64_t int_identity(tir_reduce r, tir_dtype t)
{
	if (r != REDUCE_MAX && r != REDUCE_MIN)
		return 0;
	int bits = 8 * dtype_bytes(t);
	int64_t lo = bits >= 64 ? INT64_MIN : -((int64_t)1 << (bits - 1));
	int64_t top = bits >= 64 ? INT64_MAX : ((int64_t)1 << (bits - 1)) - 1;
	return r == REDUCE_MIN ? top : lo;
}

tir_expr *reduce_identity(tir_arena *a, tir_reduce r, tir_dtype t)
{
	bool hi = r == REDUCE_MIN;
	if (r != REDUCE_MAX && r != REDUCE_MIN)
		return dtype_is_float(t) ? mk_float(a, 0.0, t) : mk_cast(a, t, mk_int(a, 0));
	if (dtype_is_float(t))
		return mk_float(a, hi ? INFINITY : -INFINITY, t);
	return mk_cast(a, t, mk_int(a, int_identity(r, t)));
}

bool reduce_is_identity(tir_reduce r, const tir_expr *e)
{
	if (!e || r == REDUCE_NONE)
		return false;
	if (e->kind == E_FLOAT)
		return e->fval == (r == REDUCE_SUM ? 0.0 : r == REDUCE_MIN ? INFINITY : -INFINITY);
	tir_dtype t = e->dtype;
	if (e->kind == E_CAST && e->a->kind == E_INT && !dtype_is_float(t) && t != TIR_BOOL)
		e = e->a;
	else if (e->kind != E_INT || t == TIR_BOOL)
		return false;
	if (dtype_is_float(t))
		return r == REDUCE_SUM && e->ival == 0;
	return e->ival == int_identity(r, t);
}

bool block_reads(const tir_block *b, const tir_buffer *buf)
{
	for (int i = 0; i < b->nreads; i++)
		if (b->reads[i].buf == buf)
			return true;
	return false;
}

bool block_is_reduction(const tir_block *b)
{
	return b->reduce != REDUCE_NONE;
}

int block_iter_of(const tir_block *b, const tir_var *v)
{
	for (int i = 0; i < b->niters; i++)
		if (b->iters[i].var == v)
			return i;
	return -1;
}

struct regions {
	tir_program *p;
	tir_block *b;
	tir_env env;
	int n, cap;
	tir_region *r;
};

/* Adds one load's region, merging it with an earlier region of the same
 * buffer whose starts differ from it by constants only. */
static void add_read(tir_expr *load, void *ctx)
{
	struct regions *rs = ctx;
	tir_arena *a = &rs->p->arena;
	for (int i = 0; i < rs->n; i++) {
		tir_region *r = &rs->r[i];
		if (r->buf != load->buf)
			continue;
		int64_t off[TIR_MAX_DIMS];
		bool ok = true;
		for (int d = 0; d < load->nidx && ok; d++) {
			tir_affine f;
			ok = affine_of(mk_sub(a, load->idx[d], r->min[d]), &f) && f.nterms == 0;
			off[d] = f.c0;
		}
		if (!ok)
			continue;
		for (int d = 0; d < load->nidx; d++) {
			if (off[d] < 0) {
				r->min[d] = expr_simplify(a, load->idx[d], NULL);
				r->extent[d] -= off[d];
			} else if (off[d] + 1 > r->extent[d]) {
				r->extent[d] = off[d] + 1;
			}
		}
		return;
	}
	if (rs->n == rs->cap) {
		rs->cap = rs->cap ? 2 * rs->cap : 4;
		tir_region *nr = arena_alloc(a, sizeof(tir_region) * (size_t)rs->cap);
		if (rs->n)
			memcpy(nr, rs->r, sizeof(tir_region) * (size_t)rs->n);
		rs->r = nr;
	}
	tir_region *r = &rs->r[rs->n++];
	r->buf = load->buf;
	for (int d = 0; d < load->nidx; d++) {
		r->min[d] = load->idx[d];
		r->extent[d] = 1;
	}
}

void block_update_regions(tir_program *p, tir_block *b)
{
	struct regions rs = { p, b, { 0, NULL }, 0, 0, NULL };
	expr_visit_loads(b->value, add_read, &rs);
	if (b->reduce != REDUCE_NONE) {
		/* an update reads what it writes */
		tir_expr *self = mk_load(&p->arena, b->store, b->store->ndim, b->store_idx);
		add_read(self, &rs);
	}
	b->nreads = rs.n;
	b->reads = rs.r;
	b->write.buf = b->store;
	for (int d = 0; d < b->store->ndim; d++) {
		b->write.min[d] = b->store_idx[d];
		b->write.extent[d] = 1;
	}
}

bool block_plain_access(const tir_block *b, int n, tir_expr *const *idx, int *dim_iter)
{
	bool seen[TIR_MAX_ITERS] = { false };
	for (int d = 0; d < n; d++) {
		int it = idx[d]->kind == E_VAR ? block_iter_of(b, idx[d]->var) : -1;
		if (it < 0 || seen[it])
			return false;
		seen[it] = true;
		if (dim_iter)
			dim_iter[d] = it;
	}
	return true;
}

tir_stmt *program_nest(tir_program *p, tir_block *b, const char *const *loop_names)
{
	tir_stmt *inner = stmt_new_block(p, b), *outer = inner;
	for (int i = b->niters - 1; i >= 0; i--) {
		tir_var *lv = program_var(p, loop_names ? loop_names[i] : b->iters[i].var->name);
		b->iters[i].binding = mk_var(&p->arena, lv);
		tir_stmt *f = stmt_new_for(p, lv, b->iters[i].extent);
		stmt_append(f, outer);
		outer = f;
	}
	return outer;
}
