/*
 * interp_nest.c — the nest evaluator of the interpreter (interp.c says
 * what a program means and how values are treated): a top-level loop nest
 * with one loop per iterator of one block, bound one to one, which is what
 * compute definitions build, run fast.
 *
 * Its spatial iterators write distinct elements (the store indexes each with
 * one iterator), so their order is free; each element's reduction steps
 * stay in the program's order.  The spatial points are cut into tiles:
 * rows (the points of every spatial iterator but the innermost one of extent
 * above 1, in nest order) times a chunk of ROW_LANES values of that inner
 * iterator, up to TILE_LANES lanes; tiles run on every core
 * (tir_parallel_for), each writing its own elements.  The block's body is
 * compiled once into instructions over a tile's lanes, each register one
 * value for the whole tile where it can be; each load is resolved
 * statically where its indices are affine (but for terms that move with the
 * spatial or the reduction iterators alone) and provably stay in the buffer
 * — an offset per row, a stride along the row, a part that moves with the
 * reduction steps — and checked lane by lane otherwise.  A sum of products
 * of two static loads (every contraction) runs as one multiply-add loop
 * over each row.  What the tile computes does not depend on which thread
 * computes it, so the result does not depend on the number of threads.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ir.h"
#include "interp.h"

/* ---- the nest evaluator: plans ------------------------------------------------------------- */

#define TILE_LANES 2048            /* lanes of a tile at most */
#define ROW_LANES 128              /* lanes of a row at most */
#define MAX_TERMS 32               /* non-affine terms of one address */

/* A term of an address that is not affine in the iterators (a floordiv, a
 * floormod, a select...), by what it moves with: the row iterators only,
 * the inner one too, or the reduction iterators only. */
typedef enum { TERM_ROW, TERM_LANE, TERM_STEP } term_class;

typedef struct aterm {
	const tir_expr *e;
	int64_t coef;
	term_class cls;
} aterm;

/* An access resolved statically: its flat offset is c0 + sum over the
 * iterators of coef[i] * i, plus the terms; its indices provably stay in
 * the buffer over the whole domain. */
typedef struct saddr {
	const tir_buffer *buf;
	int64_t c0;
	int64_t coef[TIR_MAX_ITERS];
	int nterm;
	aterm term[MAX_TERMS];
	bool lane;                 /* a term moves with the inner iterator */
	bool step_terms;           /* a term moves with the reduction iterators */
	bool steps;                /* the offset moves with the reduction iterators */
} saddr;

/* A load whose indices the machine computes and checks lane by lane. */
typedef struct dload {
	const tir_buffer *buf;
	int idx[TIR_MAX_DIMS];     /* registers */
	int guard;                 /* register of the lanes that use it; -1: all */
} dload;

typedef enum {
	VOP_CONST, VOP_VAR, VOP_SLOAD, VOP_DLOAD, VOP_BIN, VOP_NOT, VOP_SELECT,
	VOP_CAST, VOP_CALL,
} vop;

/* One instruction; it writes register `dst`, which is its own index. */
typedef struct vins {
	vop op;
	int a, b, c;               /* operand registers */
	int sub;                   /* BIN: the expression kind; CAST: dtype; CALL: fn */
	tir_dtype dtype;           /* BIN: the operation's (E_DIV) */
	int ref;                   /* VAR: iterator; SLOAD: address; DLOAD: load */
	double k;                  /* CONST */
	bool step;                 /* moves with the reduction iterators: run every step */
} vins;

/* A loop nest of one block, one loop per iterator, and its compiled body.
 * Iterators are numbered as the block's; "nest order" is the loops'. */
struct nest {
	const tir_block *b;
	int n;                                  /* iterators */
	int64_t ext[TIR_MAX_ITERS];
	int nr, rd[TIR_MAX_ITERS];              /* reduction iterators, nest order */
	int64_t rmask;                          /* bit i: iterator i reduces */
	int inner;                              /* the spatial iterator along a row, or -1 */
	int nrow, row[TIR_MAX_ITERS];           /* the other spatial ones, nest order */
	int pos[TIR_MAX_ITERS];                 /* iterator -> position in rd[] or row[] */
	int64_t P, E;                           /* rows; the inner extent (1: none) */
	int A, B;                               /* a tile: rows, lanes a row */
	int64_t nch, ntiles;                    /* chunks of a row; tiles */
	int64_t steps;                          /* reduction steps of an element */
	const tir_var *itvar[TIR_MAX_ITERS], *loopvar[TIR_MAX_ITERS];
	int nvars;
	int *itof;                              /* var id -> iterator, or -1 */
	tir_env env;                            /* iterator domains, for bounds */
	/* the body */
	int naddr, capaddr;
	saddr *addr;                            /* [0]: the store */
	int ndl, capdl;
	dload *dl;
	int nins, capins;
	vins *ins;
	int value, init, pred;                  /* registers, or -1 */
	bool mac;                               /* value = load * load, summed */
	int mx, my;                             /* their addresses */
	bool load_acc;                          /* a tile starts from the stored values */
};

void interp_nest_free(nest *ns)
{
	if (!ns)
		return;
	free(ns->itof);
	env_free(&ns->env);
	free(ns->addr);
	free(ns->dl);
	free(ns->ins);
	free(ns);
}

static int iter_of_var(const nest *ns, const tir_var *v)
{
	return v->id < ns->nvars ? ns->itof[v->id] : -1;
}

/* The iterators whose vars e uses (bit i: iterator i); -1 when e uses a
 * var outside the nest or loads. */
static int64_t uses(const nest *ns, const tir_expr *e)
{
	if (!e)
		return 0;
	if (e->kind == E_LOAD)
		return -1;
	if (e->kind == E_VAR) {
		int i = iter_of_var(ns, e->var);
		return i < 0 ? -1 : (int64_t)1 << i;
	}
	int64_t a = uses(ns, e->a), b = uses(ns, e->b), c = uses(ns, e->c);
	return a < 0 || b < 0 || c < 0 ? -1 : a | b | c;
}

/* The static address of buf[idx] into *a; false unless every index is
 * affine but for terms that move with spatial or reduction iterators
 * alone, and provably stays in its dimension. */
static bool static_addr(const nest *ns, const tir_buffer *buf, int nidx,
			tir_expr *const *idx, saddr *a)
{
	memset(a, 0, sizeof *a);
	a->buf = buf;
	int64_t stride = 1;
	for (int d = nidx - 1; d >= 0; d--) {
		int64_t lo, hi;
		tir_affine f;
		if (!expr_bounds(idx[d], &ns->env, &lo, &hi) || lo < 0 || hi >= buf->shape[d] ||
		    !affine_of(idx[d], &f))
			return false;
		a->c0 += f.c0 * stride;
		for (int t = 0; t < f.nterms; t++) {
			int64_t c = f.coef[t] * stride;
			if (f.var[t]) {
				int i = iter_of_var(ns, f.var[t]);
				if (i < 0)
					return false;
				a->coef[i] += c;
				continue;
			}
			int64_t m = uses(ns, f.opaque[t]);
			if (m < 0 || a->nterm == MAX_TERMS || ((m & ns->rmask) && (m & ~ns->rmask)))
				return false;
			term_class cls = (m & ns->rmask) ? TERM_STEP
				: ns->inner >= 0 && (m >> ns->inner & 1) ? TERM_LANE : TERM_ROW;
			a->term[a->nterm++] = (aterm){ f.opaque[t], c, cls };
			a->lane |= cls == TERM_LANE;
			a->step_terms |= cls == TERM_STEP;
		}
		stride *= buf->shape[d];
	}
	for (int j = 0; j < ns->nr; j++)
		a->steps |= a->coef[ns->rd[j]] != 0;
	a->steps |= a->step_terms;
	return true;
}

/* ---- the nest evaluator: compiling the body -------------------------------------------------- */

/* Appends an instruction; returns its register. */
static int emit(nest *ns, vins in)
{
	if (ns->nins == ns->capins) {
		ns->capins = ns->capins ? 2 * ns->capins : 32;
		ns->ins = xrealloc(ns->ins, sizeof *ns->ins * (size_t)ns->capins);
	}
	const vins *R = ns->ins;
	switch (in.op) {
	case VOP_CONST: in.step = false; break;
	case VOP_VAR: in.step = ns->rmask >> in.ref & 1; break;
	case VOP_SLOAD: in.step = ns->addr[in.ref].steps; break;
	case VOP_DLOAD: {
		const dload *dl = &ns->dl[in.ref];
		in.step = dl->guard >= 0 && R[dl->guard].step;
		for (int d = 0; d < dl->buf->ndim; d++)
			in.step |= R[dl->idx[d]].step;
		break;
	}
	case VOP_BIN: in.step = R[in.a].step || R[in.b].step; break;
	case VOP_SELECT: in.step = R[in.a].step || R[in.b].step || R[in.c].step; break;
	default: in.step = R[in.a].step; break;
	}
	ns->ins[ns->nins] = in;
	return ns->nins++;
}

static int add_addr(nest *ns, const saddr *a)
{
	if (ns->naddr == ns->capaddr) {
		ns->capaddr = ns->capaddr ? 2 * ns->capaddr : 8;
		ns->addr = xrealloc(ns->addr, sizeof *ns->addr * (size_t)ns->capaddr);
	}
	ns->addr[ns->naddr] = *a;
	return ns->naddr++;
}

/* Whether e holds a load that the machine checks lane by lane. */
static bool needs_guard(const nest *ns, const tir_expr *e)
{
	if (!e)
		return false;
	if (e->kind == E_LOAD) {
		saddr a;
		return !static_addr(ns, e->buf, e->nidx, e->idx, &a);
	}
	return needs_guard(ns, e->a) || needs_guard(ns, e->b) || needs_guard(ns, e->c);
}

static int emit_bin(nest *ns, tir_expr_kind k, tir_dtype t, int a, int b)
{
	return emit(ns, (vins){ .op = VOP_BIN, .sub = k, .dtype = t, .a = a, .b = b });
}

/* The lanes of `guard` (-1: all) where g holds. */
static int guard_and(nest *ns, int guard, int g)
{
	return guard < 0 ? g : emit_bin(ns, E_AND, TIR_BOOL, guard, g);
}

/* e without the casts that change no value (cast_is_identity). */
static const tir_expr *strip_casts(const tir_expr *e)
{
	while (e->kind == E_CAST && cast_is_identity(e->dtype, e->a->dtype))
		e = e->a;
	return e;
}

/* Compiles e; returns its register, or -1 when the machine cannot run it
 * (the nest then runs on the tree evaluator).  guard: the register of the
 * lanes that use e's value (-1: all), for the loads checked lane by lane:
 * the branches of a select and the second operands of `and` and `or` are
 * evaluated on every lane, their loads only where they are taken. */
static int compile_expr(nest *ns, const tir_expr *e, int guard)
{
	e = strip_casts(e);
	int a, b, c;
	switch (e->kind) {
	case E_INT:
		return emit(ns, (vins){ .op = VOP_CONST, .k = (double)e->ival });
	case E_FLOAT:
		return emit(ns, (vins){ .op = VOP_CONST, .k = e->fval });
	case E_VAR: {
		int i = iter_of_var(ns, e->var);
		return i < 0 ? -1 : emit(ns, (vins){ .op = VOP_VAR, .ref = i });
	}
	case E_CAST: case E_CALL: case E_NOT:
		if ((a = compile_expr(ns, e->a, guard)) < 0)
			return -1;
		return emit(ns, (vins){ .op = e->kind == E_CAST ? VOP_CAST : e->kind == E_CALL
					? VOP_CALL : VOP_NOT, .a = a,
					.sub = e->kind == E_CAST ? (int)e->dtype : (int)e->fn });
	case E_SELECT: {
		if ((c = compile_expr(ns, e->c, guard)) < 0)
			return -1;
		int gt = needs_guard(ns, e->a) ? guard_and(ns, guard, c) : guard;
		int gf = needs_guard(ns, e->b)
			? guard_and(ns, guard, emit(ns, (vins){ .op = VOP_NOT, .a = c })) : guard;
		if ((a = compile_expr(ns, e->a, gt)) < 0 || (b = compile_expr(ns, e->b, gf)) < 0)
			return -1;
		return emit(ns, (vins){ .op = VOP_SELECT, .a = a, .b = b, .c = c });
	}
	case E_LOAD: {
		if (e->buf == ns->b->store || e->buf->dead)   /* in order only; an error */
			return -1;
		saddr sa;
		if (static_addr(ns, e->buf, e->nidx, e->idx, &sa))
			return emit(ns, (vins){ .op = VOP_SLOAD, .ref = add_addr(ns, &sa) });
		dload dl = { .buf = e->buf, .guard = guard };
		for (int d = 0; d < e->nidx; d++)
			if ((dl.idx[d] = compile_expr(ns, e->idx[d], guard)) < 0)
				return -1;
		if (ns->ndl == ns->capdl) {
			ns->capdl = ns->capdl ? 2 * ns->capdl : 4;
			ns->dl = xrealloc(ns->dl, sizeof *ns->dl * (size_t)ns->capdl);
		}
		ns->dl[ns->ndl] = dl;
		return emit(ns, (vins){ .op = VOP_DLOAD, .ref = ns->ndl++ });
	}
	default: {
		if ((a = compile_expr(ns, e->a, guard)) < 0)
			return -1;
		int g = guard;
		if ((e->kind == E_AND || e->kind == E_OR) && needs_guard(ns, e->b))
			g = guard_and(ns, guard, e->kind == E_AND ? a
				      : emit(ns, (vins){ .op = VOP_NOT, .a = a }));
		if ((b = compile_expr(ns, e->b, g)) < 0)
			return -1;
		return emit_bin(ns, e->kind, e->dtype, a, b);
	}
	}
}

/* Whether idx indexes buf with constants and spatial iterators, each of
 * extent > 1 exactly once (distinct points write distinct elements) and no
 * reduction iterator. */
static bool injective_store(const nest *ns, int nidx, tir_expr *const *idx)
{
	int seen[TIR_MAX_ITERS] = { 0 };
	for (int d = 0; d < nidx; d++) {
		if (idx[d]->kind == E_INT)
			continue;
		int i = idx[d]->kind == E_VAR ? iter_of_var(ns, idx[d]->var) : -1;
		if (i < 0 || (ns->rmask >> i & 1))
			return false;
		seen[i]++;
	}
	for (int i = 0; i < ns->n; i++)
		if (!(ns->rmask >> i & 1) && ns->ext[i] > 1 && seen[i] != 1)
			return false;
	return true;
}

/* The plan of top, a top-level loop, or NULL when it is not a nest of one
 * block with one loop per iterator bound one to one (or its body is
 * beyond the machine): then the tree evaluator runs it. */
nest *interp_nest_plan(const tir_program *p, const tir_stmt *top)
{
	const tir_stmt *loops[TIR_MAX_ITERS], *s = top;
	int nl = 0;
	while (s->kind == STMT_FOR) {
		if (s->nkids != 1 || nl == TIR_MAX_ITERS || s->dead)
			return NULL;
		loops[nl++] = s;
		s = s->kids[0];
	}
	if (s->kind != STMT_BLOCK || s->dead || s->block->niters != nl || nl == 0)
		return NULL;
	const tir_block *b = s->block;
	nest *ns = xcalloc(1, sizeof *ns);
	ns->b = b;
	ns->n = nl;
	ns->nvars = p->nvars;
	ns->itof = xmalloc(sizeof(int) * (size_t)(p->nvars + 1));
	for (int v = 0; v < p->nvars; v++)
		ns->itof[v] = -1;
	ns->env = env_new(p->nvars);
	ns->value = ns->init = ns->pred = -1;
	int order[TIR_MAX_ITERS];               /* loop position -> iterator */
	for (int j = 0; j < nl; j++)
		order[j] = -1;
	for (int i = 0; i < nl; i++) {
		const tir_iter *it = &b->iters[i];
		int j = 0;
		while (j < nl && !(it->binding->kind == E_VAR && it->binding->var == loops[j]->var))
			j++;
		if (j == nl || order[j] >= 0 || loops[j]->extent != it->extent ||
		    it->var->id >= p->nvars || loops[j]->var->id >= p->nvars) {
			interp_nest_free(ns);
			return NULL;
		}
		order[j] = i;
		ns->ext[i] = it->extent;
		ns->itvar[i] = it->var;
		ns->loopvar[i] = loops[j]->var;
		ns->itof[it->var->id] = ns->itof[loops[j]->var->id] = i;
		env_set(&ns->env, it->var, 0, it->extent - 1);
		env_set(&ns->env, loops[j]->var, 0, it->extent - 1);
		if (it->kind == ITER_REDUCE)
			ns->rmask |= (int64_t)1 << i;
	}
	/* rows, the inner iterator, the reduction order */
	ns->inner = -1;
	for (int j = nl - 1; j >= 0 && ns->inner < 0; j--)
		if (!(ns->rmask >> order[j] & 1) && ns->ext[order[j]] > 1)
			ns->inner = order[j];
	ns->P = 1;
	ns->steps = 1;
	for (int j = 0; j < nl; j++) {
		int i = order[j];
		if (ns->rmask >> i & 1) {
			ns->pos[i] = ns->nr;
			ns->rd[ns->nr++] = i;
			ns->steps *= ns->ext[i];
		} else if (i != ns->inner) {
			ns->pos[i] = ns->nrow;
			ns->row[ns->nrow++] = i;
			ns->P *= ns->ext[i];
		}
	}
	ns->E = ns->inner >= 0 ? ns->ext[ns->inner] : 1;
	ns->B = (int)(ns->E < ROW_LANES ? ns->E : ROW_LANES);
	ns->A = (int)(ns->P < TILE_LANES / ns->B ? ns->P : TILE_LANES / ns->B);
	ns->nch = (ns->E + ns->B - 1) / ns->B;
	ns->ntiles = (ns->P + ns->A - 1) / ns->A * ns->nch;

	/* the store, the sum of products, the body */
	saddr st;
	if (!injective_store(ns, b->store->ndim, b->store_idx) ||
	    !static_addr(ns, b->store, b->store->ndim, b->store_idx, &st)) {
		interp_nest_free(ns);
		return NULL;
	}
	add_addr(ns, &st);
	tir_dtype sd = b->store->dtype;
	const tir_expr *v = strip_casts(b->value);
	if (b->reduce == REDUCE_SUM && !b->predicate && v->kind == E_MUL &&
	    (sd == TIR_F32 || sd == TIR_I8 || sd == TIR_U8 || sd == TIR_I32 || sd == TIR_I64)) {
		const tir_expr *x = strip_casts(v->a), *y = strip_casts(v->b);
		saddr sx, sy;
		if (x->kind == E_LOAD && y->kind == E_LOAD && x->buf != b->store &&
		    y->buf != b->store && !x->buf->dead && !y->buf->dead && static_addr(ns, x->buf, x->nidx, x->idx, &sx) &&
		    static_addr(ns, y->buf, y->nidx, y->idx, &sy)) {
			ns->mac = true;
			ns->mx = add_addr(ns, &sx);
			ns->my = add_addr(ns, &sy);
		}
	}
	bool ok = true;
	if (b->reduce != REDUCE_NONE && b->init)
		ok = (ns->init = compile_expr(ns, b->init, -1)) >= 0;
	if (ok && b->predicate)
		ok = (ns->pred = compile_expr(ns, b->predicate, -1)) >= 0;
	if (ok && !ns->mac)
		ok = (ns->value = compile_expr(ns, b->value, ns->pred)) >= 0;
	if (!ok) {
		interp_nest_free(ns);
		return NULL;
	}
	ns->load_acc = b->predicate || (b->reduce != REDUCE_NONE && !b->init);
	return ns;
}

/* ---- the nest evaluator: running tiles ----------------------------------------------------- */

/* A thread's scratch. */
typedef struct worker {
	double *reg;               /* [nins][TILE_LANES] */
	bool *uni;                 /* [nins]: the register holds one value for the tile */
	double *acc, *tmp;         /* [TILE_LANES], [3][TILE_LANES] */
	int64_t *roff, *loff;      /* [naddr][TILE_LANES]: per row, per lane */
	bool *auni;                /* [naddr]: one address for the whole tile */
	int64_t *g, *gaff;         /* [naddr]: the reduction part (its affine part) */
	int64_t *rowv;             /* [TILE_LANES][nrow] */
	int64_t rv[TIR_MAX_ITERS]; /* the reduction iterators' values */
	int64_t *vals;             /* by var id, for the tree evaluator's terms */
	tev t;
	int At, Bt, N;             /* this tile: rows, lanes a row, lanes */
	int64_t c0;                /* the inner iterator's first value */
} worker;

static void set_iter(const nest *ns, worker *wk, int i, int64_t v)
{
	wk->vals[ns->itvar[i]->id] = v;
	wk->vals[ns->loopvar[i]->id] = v;
}

static double *R(const worker *wk, int r) { return wk->reg + (size_t)r * TILE_LANES; }

/* Register r over every lane: itself, or its one value copied into
 * temporary `which`. */
static const double *lanes(worker *wk, int r, int which)
{
	if (!wk->uni[r])
		return R(wk, r);
	double *t = wk->tmp + (size_t)which * TILE_LANES, v = R(wk, r)[0];
	for (int i = 0; i < wk->N; i++)
		t[i] = v;
	return t;
}


#define UNARY(OP) do {                                                               \
	if (ua) { double x_ = A[0]; D[0] = (OP); }                                    \
	else for (int t = 0; t < n; t++) { double x_ = A[t]; D[t] = (OP); }           \
} while (0)

#define BINARY(OP) do {                                                              \
	if (ua && ub) { double x_ = A[0], y_ = B[0]; D[0] = (OP); }                   \
	else if (ua) { double x_ = A[0]; for (int t = 0; t < n; t++) { double y_ = B[t]; D[t] = (OP); } } \
	else if (ub) { double y_ = B[0]; for (int t = 0; t < n; t++) { double x_ = A[t]; D[t] = (OP); } } \
	else for (int t = 0; t < n; t++) { double x_ = A[t], y_ = B[t]; D[t] = (OP); } \
} while (0)

/* A static load: every lane's element, or the one of the whole tile. */
static void sload(interp *I, const nest *ns, worker *wk, int k, double *D, bool *u)
{
	const saddr *a = &ns->addr[k];
	const double *data = I->buf[a->buf->id].data + wk->g[k];
	const int64_t *ro = wk->roff + (size_t)k * TILE_LANES, *lo = wk->loff + (size_t)k * TILE_LANES;
	*u = wk->auni[k];
	if (*u) {
		D[0] = data[a->lane ? lo[0] : ro[0]];
		return;
	}
	if (a->lane) {
		for (int t = 0; t < wk->N; t++)
			D[t] = data[lo[t]];
		return;
	}
	int64_t s = ns->inner >= 0 ? a->coef[ns->inner] : 0;
	for (int r = 0; r < wk->At; r++) {
		const double *src = data + ro[r];
		double *dst = D + (size_t)r * wk->Bt;
		if (s == 1)
			memcpy(dst, src, sizeof(double) * (size_t)wk->Bt);
		else
			for (int b = 0; b < wk->Bt; b++)
				dst[b] = src[b * s];
	}
}

/* A checked load: each lane that its guard takes, its indices checked. */
static int dload_run(interp *I, const nest *ns, worker *wk, const dload *dl, double *D, bool *u)
{
	int nd = dl->buf->ndim;
	bool all = dl->guard < 0 || wk->uni[dl->guard];
	for (int d = 0; d < nd; d++)
		all = all && wk->uni[dl->idx[d]];
	*u = all;
	const double *G = dl->guard >= 0 ? R(wk, dl->guard) : NULL, *X[TIR_MAX_DIMS];
	bool ug = dl->guard >= 0 && wk->uni[dl->guard], ux[TIR_MAX_DIMS];
	for (int d = 0; d < nd; d++) {
		X[d] = R(wk, dl->idx[d]);
		ux[d] = wk->uni[dl->idx[d]];
	}
	const double *data = I->buf[dl->buf->id].data;
	for (int t = 0; t < (all ? 1 : wk->N); t++) {
		if (G && (ug ? G[0] : G[t]) == 0) {
			D[t] = 0;
			continue;
		}
		double iv[TIR_MAX_DIMS];
		for (int d = 0; d < nd; d++)
			iv[d] = ux[d] ? X[d][0] : X[d][t];
		int64_t off = interp_offset(I, ns->b, dl->buf, iv, wk->t.at);
		if (off < 0)
			return -1;
		D[t] = data[off];
	}
	return 0;
}

/* Runs the tile's instructions (step false) or a step's (true), in order. */
static int exec(interp *I, const nest *ns, worker *wk, bool step)
{
	const int N = wk->N, At = wk->At, Bt = wk->Bt;
	for (int r = 0; r < ns->nins; r++) {
		const vins *in = &ns->ins[r];
		if (in->step != step)
			continue;
		double *D = R(wk, r);
		bool *u = &wk->uni[r];
		bool ua = in->op >= VOP_BIN && wk->uni[in->a];
		bool ub = (in->op == VOP_BIN || in->op == VOP_SELECT) && wk->uni[in->b];
		const double *A = in->op >= VOP_BIN ? R(wk, in->a) : NULL;
		const double *B = in->op == VOP_BIN || in->op == VOP_SELECT ? R(wk, in->b) : NULL;
		int n = N;
		switch (in->op) {
		case VOP_CONST:
			*u = true;
			D[0] = in->k;
			break;
		case VOP_VAR: {
			int i = in->ref;
			if (ns->rmask >> i & 1) {
				*u = true;
				D[0] = (double)wk->rv[ns->pos[i]];
			} else if (i == ns->inner) {
				*u = Bt == 1;
				for (int a = 0; a < (*u ? 1 : At); a++)
					for (int b = 0; b < Bt; b++)
						D[a * Bt + b] = (double)(wk->c0 + b);
			} else {
				*u = At == 1;
				for (int a = 0; a < At; a++) {
					double v = (double)wk->rowv[(size_t)a * ns->nrow + ns->pos[i]];
					for (int b = 0; b < (*u ? 1 : Bt); b++)
						D[a * Bt + b] = v;
				}
			}
			break;
		}
		case VOP_SLOAD:
			sload(I, ns, wk, in->ref, D, u);
			break;
		case VOP_DLOAD:
			if (dload_run(I, ns, wk, &ns->dl[in->ref], D, u))
				return -1;
			break;
		case VOP_NOT:
			*u = ua;
			UNARY(x_ == 0);
			break;
		case VOP_CAST: {
			tir_dtype to = (tir_dtype)in->sub;
			*u = ua;
			UNARY(to_dtype(to, x_));
			break;
		}
		case VOP_CALL: {
			tir_mathfn f = (tir_mathfn)in->sub;
			*u = ua;
			UNARY(mathfn(f, x_));
			break;
		}
		case VOP_SELECT: {
			const double *C = R(wk, in->c);
			if (wk->uni[in->c]) {
				int src = C[0] != 0 ? in->a : in->b;
				*u = wk->uni[src];
				memcpy(D, R(wk, src), sizeof(double) * (size_t)(*u ? 1 : N));
				break;
			}
			*u = false;
			const double *x = lanes(wk, in->a, 0), *y = lanes(wk, in->b, 1);
			for (int t = 0; t < N; t++)
				D[t] = C[t] != 0 ? x[t] : y[t];
			break;
		}
		case VOP_BIN:
			*u = ua && ub;
			switch ((tir_expr_kind)in->sub) {
			case E_ADD: BINARY(x_ + y_); break;
			case E_SUB: BINARY(x_ - y_); break;
			case E_MUL: BINARY(x_ * y_); break;
			case E_DIV:
				if (dtype_is_float(in->dtype))
					BINARY(x_ / y_);
				else
					BINARY(op_div(in->dtype, x_, y_));
				break;
			case E_FLOORDIV: BINARY(op_floordiv(x_, y_)); break;
			case E_FLOORMOD: BINARY(op_floormod(x_, y_)); break;
			case E_MIN: BINARY(op_min(x_, y_)); break;
			case E_MAX: BINARY(op_max(x_, y_)); break;
			case E_LT: BINARY(x_ < y_); break;
			case E_LE: BINARY(x_ <= y_); break;
			case E_EQ: BINARY(x_ == y_); break;
			case E_NE: BINARY(x_ != y_); break;
			case E_AND: BINARY(x_ != 0 && y_ != 0); break;
			case E_OR: BINARY(x_ != 0 || y_ != 0); break;
			default: BINARY(op_bin((tir_expr_kind)in->sub, in->dtype, x_, y_)); break;
			}
			break;
		}
	}
	return 0;
}

/* The store's offset of lane (a, b). */
static int64_t store_off(const nest *ns, const worker *wk, int a, int b)
{
	const saddr *st = &ns->addr[0];
	if (st->lane)
		return wk->loff[a * wk->Bt + b];
	return wk->roff[a] + (ns->inner >= 0 ? st->coef[ns->inner] * b : 0);
}

/* One step of a block other than a sum of products: the init on the first
 * step, then the value combined into the accumulators (or, without a
 * reducer, stored), on the lanes whose predicate holds. */
static void combine(const nest *ns, worker *wk, bool first)
{
	const tir_block *b = ns->b;
	tir_dtype sd = b->store->dtype;
	double *acc = wk->acc;
	const double *m = NULL;
	if (ns->pred >= 0) {
		if (!wk->uni[ns->pred])
			m = R(wk, ns->pred);
		else if (R(wk, ns->pred)[0] == 0)
			return;
	}
	const double *v = lanes(wk, ns->value, 0);
	const double *iv = first && ns->init >= 0 ? lanes(wk, ns->init, 2) : NULL;
	if (!m && !iv && sd == TIR_F32) {
		switch (b->reduce) {
		case REDUCE_NONE: memcpy(acc, v, sizeof(double) * (size_t)wk->N); return;
		case REDUCE_SUM: for (int t = 0; t < wk->N; t++) acc[t] += v[t]; return;
		case REDUCE_MAX: for (int t = 0; t < wk->N; t++) acc[t] = op_max(acc[t], v[t]); return;
		case REDUCE_MIN: for (int t = 0; t < wk->N; t++) acc[t] = op_min(acc[t], v[t]); return;
		default: break;
		}
	}
	tir_expr_kind k = b->reduce == REDUCE_NONE ? E_ADD : reduce_combiner(b->reduce);
	for (int t = 0; t < wk->N; t++) {
		if (m && m[t] == 0)
			continue;
		double x = iv ? to_dtype(sd, iv[t]) : acc[t];
		x = b->reduce == REDUCE_NONE ? v[t] : op_bin(k, sd, x, v[t]);
		acc[t] = to_dtype(sd, x);
	}
}

/* Four doubles at a time (GCC / Clang vector extensions; at -O2 the loops
 * below would stay scalar), loaded and stored unaligned. */
typedef double vec4 __attribute__((vector_size(32)));
typedef double vec4u __attribute__((vector_size(32), aligned(8)));

/* ac[b] += x * y[b], b < n. */
static void mac_sv(double *restrict ac, double x, const double *restrict y, int n)
{
	vec4 xv = { x, x, x, x };
	int b = 0;
	for (; b + 4 <= n; b += 4) {
		vec4 p = xv * *(const vec4u *)(y + b);
		*(vec4u *)(ac + b) = *(const vec4u *)(ac + b) + p;
	}
	for (; b < n; b++)
		ac[b] += x * y[b];
}

/* ac[b] += x[b] * y[b], b < n. */
static void mac_vv(double *restrict ac, const double *restrict x, const double *restrict y, int n)
{
	int b = 0;
	for (; b + 4 <= n; b += 4) {
		vec4 p = *(const vec4u *)(x + b) * *(const vec4u *)(y + b);
		*(vec4u *)(ac + b) = *(const vec4u *)(ac + b) + p;
	}
	for (; b < n; b++)
		ac[b] += x[b] * y[b];
}

/* One step of a sum of products of two static loads: acc += x * y on every
 * lane, a row at a time. */
static void mac_step(interp *I, const nest *ns, worker *wk)
{
	const saddr *X = &ns->addr[ns->mx], *Y = &ns->addr[ns->my];
	const double *xd = I->buf[X->buf->id].data + wk->g[ns->mx];
	const double *yd = I->buf[Y->buf->id].data + wk->g[ns->my];
	const int64_t *xr = wk->roff + (size_t)ns->mx * TILE_LANES;
	const int64_t *yr = wk->roff + (size_t)ns->my * TILE_LANES;
	const int64_t *xl = wk->loff + (size_t)ns->mx * TILE_LANES;
	const int64_t *yl = wk->loff + (size_t)ns->my * TILE_LANES;
	int64_t sx = ns->inner >= 0 ? X->coef[ns->inner] : 0;
	int64_t sy = ns->inner >= 0 ? Y->coef[ns->inner] : 0;
	const int Bt = wk->Bt;
	for (int a = 0; a < wk->At; a++) {
		double *ac = wk->acc + (size_t)a * Bt;
		if (X->lane || Y->lane) {
			for (int b = 0; b < Bt; b++) {
				double x = X->lane ? xd[xl[a * Bt + b]] : xd[xr[a] + b * sx];
				double y = Y->lane ? yd[yl[a * Bt + b]] : yd[yr[a] + b * sy];
				ac[b] += x * y;
			}
			continue;
		}
		const double *px = xd + xr[a], *py = yd + yr[a];
		if (sx == 0 && sy == 1)
			mac_sv(ac, *px, py, Bt);
		else if (sx == 1 && sy == 0)          /* x * y == y * x */
			mac_sv(ac, *py, px, Bt);
		else if (sx == 1 && sy == 1)
			mac_vv(ac, px, py, Bt);
		else
			for (int b = 0; b < Bt; b++)
				ac[b] += px[b * sx] * py[b * sy];
	}
}

/* The terms of address k that move with the reduction iterators, at the
 * iterators' values in wk->vals. */
static int64_t step_terms(worker *wk, const saddr *a)
{
	int64_t g = 0;
	for (int m = 0; m < a->nterm; m++)
		if (a->term[m].cls == TERM_STEP)
			g += a->term[m].coef * (int64_t)interp_eval(&wk->t, a->term[m].e);
	return g;
}

/* The next reduction step: the iterators' odometer (the last fastest, as the
 * loops run) and every address's reduction part. */
static void advance(const nest *ns, worker *wk)
{
	for (int j = ns->nr - 1; j >= 0; j--) {
		int i = ns->rd[j];
		int64_t back = ++wk->rv[j] < ns->ext[i] ? 0 : ns->ext[i];
		wk->rv[j] -= back;
		set_iter(ns, wk, i, wk->rv[j]);
		for (int k = 0; k < ns->naddr; k++)
			wk->gaff[k] += ns->addr[k].coef[i] * (1 - back);
		if (!back)
			break;
	}
	for (int k = 0; k < ns->naddr; k++)
		wk->g[k] = wk->gaff[k] + (ns->addr[k].step_terms ? step_terms(wk, &ns->addr[k]) : 0);
}

/* One tile: its rows' offsets, the tile's instructions, every reduction
 * step in order, the accumulators stored. */
static int run_tile(interp *I, const nest *ns, worker *wk, int64_t tile)
{
	const size_t L = TILE_LANES;
	int64_t r0 = tile / ns->nch * ns->A;
	wk->c0 = tile % ns->nch * ns->B;
	wk->At = (int)(ns->P - r0 < ns->A ? ns->P - r0 : ns->A);
	wk->Bt = (int)(ns->E - wk->c0 < ns->B ? ns->E - wk->c0 : ns->B);
	const int At = wk->At, Bt = wk->Bt, N = wk->N = At * Bt, in = ns->inner;
	wk->t.at = tile;
	for (int a = 0; a < At; a++) {
		int64_t q = r0 + a, *rv = wk->rowv + (size_t)a * ns->nrow;
		for (int j = ns->nrow - 1; j >= 0; j--) {
			int64_t e = ns->ext[ns->row[j]];
			rv[j] = q % e;
			q /= e;
			set_iter(ns, wk, ns->row[j], rv[j]);
		}
		if (in >= 0)
			set_iter(ns, wk, in, wk->c0);
		for (int k = 0; k < ns->naddr; k++) {
			const saddr *ad = &ns->addr[k];
			int64_t off = ad->c0 + (in >= 0 ? ad->coef[in] * wk->c0 : 0);
			for (int j = 0; j < ns->nrow; j++)
				off += ad->coef[ns->row[j]] * rv[j];
			for (int m = 0; m < ad->nterm; m++)
				if (ad->term[m].cls == TERM_ROW)
					off += ad->term[m].coef * (int64_t)interp_eval(&wk->t, ad->term[m].e);
			wk->roff[k * L + (size_t)a] = off;
			if (!ad->lane)
				continue;
			for (int b = 0; b < Bt; b++) {
				set_iter(ns, wk, in, wk->c0 + b);
				int64_t lo = off + ad->coef[in] * b;
				for (int m = 0; m < ad->nterm; m++)
					if (ad->term[m].cls == TERM_LANE)
						lo += ad->term[m].coef * (int64_t)interp_eval(&wk->t, ad->term[m].e);
				wk->loff[k * L + (size_t)(a * Bt + b)] = lo;
			}
			set_iter(ns, wk, in, wk->c0);
		}
	}
	for (int k = 0; k < ns->naddr; k++) {
		const saddr *ad = &ns->addr[k];
		const int64_t *ro = wk->roff + k * L, *lo = wk->loff + k * L;
		bool u = true;
		if (ad->lane) {
			for (int t = 1; t < N && u; t++)
				u = lo[t] == lo[0];
		} else {
			u = Bt == 1 || in < 0 || ad->coef[in] == 0;
			for (int a = 1; a < At && u; a++)
				u = ro[a] == ro[0];
		}
		wk->auni[k] = u;
	}
	for (int j = 0; j < ns->nr; j++) {
		wk->rv[j] = 0;
		set_iter(ns, wk, ns->rd[j], 0);
	}
	for (int k = 0; k < ns->naddr; k++) {
		wk->gaff[k] = 0;
		wk->g[k] = ns->addr[k].step_terms ? step_terms(wk, &ns->addr[k]) : 0;
	}
	if (exec(I, ns, wk, false))
		return -1;

	tir_dtype sd = ns->b->store->dtype;
	double *acc = wk->acc, *sdata = I->buf[ns->b->store->id].data;
	if (ns->load_acc)
		for (int a = 0; a < At; a++)
			for (int b = 0; b < Bt; b++)
				acc[a * Bt + b] = sdata[store_off(ns, wk, a, b)];
	if (ns->mac && ns->init >= 0) {
		const double *iv = lanes(wk, ns->init, 2);
		for (int t = 0; t < N; t++)
			acc[t] = to_dtype(sd, iv[t]);
	}
	for (int64_t s = 0; s < ns->steps; s++) {
		if (s > 0)
			advance(ns, wk);
		if (exec(I, ns, wk, true))
			return -1;
		if (ns->mac)
			mac_step(I, ns, wk);
		else
			combine(ns, wk, s == 0);
	}
	/* a sum of integers wraps once: the same, modulo 2^bits, as at every step */
	if (ns->mac && sd != TIR_F32)
		for (int t = 0; t < N; t++)
			acc[t] = to_dtype(sd, acc[t]);
	for (int a = 0; a < At; a++)
		for (int b = 0; b < Bt; b++)
			sdata[store_off(ns, wk, a, b)] = acc[a * Bt + b];
	return 0;
}

static worker *worker_new(interp *I, const nest *ns)
{
	const size_t L = TILE_LANES, na = (size_t)ns->naddr, nr = (size_t)ns->nins + 1;
	worker *wk = xcalloc(1, sizeof *wk);
	wk->reg = xmalloc(sizeof(double) * nr * L);
	wk->uni = xcalloc(nr, sizeof(bool));
	wk->acc = xmalloc(sizeof(double) * L);
	wk->tmp = xmalloc(sizeof(double) * 3 * L);
	wk->roff = xcalloc(na * L, sizeof(int64_t));
	wk->loff = xcalloc(na * L, sizeof(int64_t));
	wk->auni = xcalloc(na, sizeof(bool));
	wk->g = xcalloc(na, sizeof(int64_t));
	wk->gaff = xcalloc(na, sizeof(int64_t));
	wk->rowv = xcalloc(L * (size_t)(ns->nrow + 1), sizeof(int64_t));
	wk->vals = xcalloc((size_t)ns->nvars + 1, sizeof(int64_t));
	wk->t = (tev){ I, wk->vals, ns->b, 0 };
	return wk;
}

static void worker_free(worker *wk)
{
	free(wk->reg);
	free(wk->uni);
	free(wk->acc);
	free(wk->tmp);
	free(wk->roff);
	free(wk->loff);
	free(wk->auni);
	free(wk->g);
	free(wk->gaff);
	free(wk->rowv);
	free(wk->vals);
	free(wk);
}

typedef struct nest_run {
	interp *I;
	const nest *ns;
	atomic_llong next;         /* the next tile to take */
} nest_run;

/* A thread: tiles, whichever is next, until none is left or one failed. */
static void nest_thread(void *ctx, int i)
{
	nest_run *r = ctx;
	(void)i;
	worker *wk = worker_new(r->I, r->ns);
	while (!atomic_load(&r->I->failed)) {
		int64_t t = (int64_t)atomic_fetch_add(&r->next, 1);
		if (t >= r->ns->ntiles || run_tile(r->I, r->ns, wk, t))
			break;
	}
	worker_free(wk);
}

void interp_nest_run(interp *I, const nest *ns)
{
	double work = (double)ns->P * (double)ns->E * (double)ns->steps;
	int nt = work < 1e5 ? 1 : I->threads;
	if (nt > ns->ntiles)
		nt = (int)ns->ntiles;
	nest_run r = { .I = I, .ns = ns };
	atomic_init(&r.next, 0);
	tir_parallel_for(nt, nt, nest_thread, &r);
}

