/*
 * intrin.c — tensor intrinsics: their table (intrins.def) and the matcher
 * that decides whether a loop nest computes what an intrinsic computes.
 *
 * As in TensorIR, an intrinsic is a pair: a description of its semantics
 * and an implementation.  The description here is the shape of the block an
 * intrinsic replaces, by kind (intrins.def): how many loops of which
 * extents, what the block stores where, what it loads, in which dtypes and
 * memory scopes.  intrin_match compares a scheduled loop nest with it
 * structurally: the block's indices, with its iterators replaced by their
 * loop bindings, must be affine with coefficient 1 in exactly one loop of
 * the tile per dimension.  Nothing looks at an operator's or a buffer's
 * name, so a convolution's inner tile matches as well as a matmul's once
 * its loops have the shape.  A warpgroup STORE also matches an epilogue
 * inlined into it (match_epilogue): the pointwise work after a matmul done
 * on the accumulator registers before they are stored.  The implementation
 * is in codegen/cuda.c (a CPU intrinsic's in codegen/c_neon.c).
 *
 * The fragments (scopes wmma.matrix_a, wmma.matrix_b, wmma.accumulator) are
 * opaque per-warp registers: a fragment buffer is an array of m x n (or m x
 * k, k x n) tiles in its last two dimensions, each one fragment.  A
 * warpgroup intrinsic's accumulator (wgmma.accumulator) is the same for a
 * warpgroup, and its MMA reads both operands from shared memory, each
 * tile in the buffer's last two dimensions either way round (K-major or
 * MN-major: codegen's descriptors and trans flags follow).  A CPU
 * intrinsic (AArch64's sdot, smmla) has no fragments: its operands and
 * accumulator are memory of any layout (match_cpu_mma).
 */
#include <string.h>
#include "ir.h"

const tir_intrin tir_intrins[] = {
#define TIR_INTRIN(id, name, kind, m, n, k, in, acc, unit, feature) \
	{ name, INTRIN_##kind, m, n, k, TIR_##in, TIR_##acc, INTRIN_##unit, feature },
#include "intrins.def"
#undef TIR_INTRIN
};
const int tir_nintrins = (int)(sizeof tir_intrins / sizeof *tir_intrins);

const tir_intrin *intrin_find(const char *name)
{
	for (int i = 0; name && i < tir_nintrins; i++)
		if (!strcmp(tir_intrins[i].name, name))
			return &tir_intrins[i];
	return NULL;
}

int64_t intrin_lanes(const tir_intrin *in)
{
	return in->unit == INTRIN_WARPGROUP ? 128 : in->unit == INTRIN_CPU ? 1 : 32;
}

int intrin_check_target(const tir_intrin *in, const tir_target *t, const char *who,
			const char *loop, tir_error *err)
{
	if (in->unit == INTRIN_CPU) {
		if (t->kind != TIR_TARGET_CPU)
			return tir_fail(err, "%s: loop %s is tensorized with %s, a CPU intrinsic; "
					"target %s is not a CPU", who, loop, in->name, t->key);
		if (!tir_target_has(t, in->feature))
			return tir_fail(err, "%s: loop %s: %s needs +%s; target %s has not", who,
					loop, in->name, in->feature, t->key);
		return 0;
	}
	if (t->kind != TIR_TARGET_CUDA)
		return tir_fail(err, "%s: loop %s is tensorized with %s, which needs a CUDA "
				"target (not %s)", who, loop, in->name, t->key);
	return 0;
}

const tir_intrin *intrin_of_loop(const tir_stmt *l)
{
	if (!l || l->kind != STMT_FOR)
		return NULL;
	for (int i = 0; i < l->nann; i++)
		if (l->ann[i].key && !strcmp(l->ann[i].key, TIR_TENSORIZE_ANN) &&
		    l->ann[i].value >= 0 && l->ann[i].value < tir_nintrins)
			return &tir_intrins[l->ann[i].value];
	return NULL;
}

bool scope_is_fragment(tir_scope s)
{
	return s == TIR_SCOPE_FRAG_A || s == TIR_SCOPE_FRAG_B || s == TIR_SCOPE_FRAG_ACC ||
	       s == TIR_SCOPE_WG_ACC;
}

/* ---- matching ------------------------------------------------------------------ */

typedef struct mctx {
	tir_arena *a;
	const tir_program *p;
	const tir_intrin *in;
	const tir_block *b;
	tir_subst bind;             /* block iterators -> their bindings */
	tir_env env;                /* all symbolic: simplification only */
	const tir_var *v[3];        /* the tile's loop variables */
	int nv;
	tir_error *err;
} mctx;

static int mismatch(mctx *c, const char *fmt, const char *what)
{
	return tir_fail(c->err, "tensorize: block \"%s\" does not match %s: %s%s",
			c->b ? c->b->name : "?", c->in->name, fmt, what ? what : "");
}

/* Fills acc from buf[idx] (block iterators): indices in loop variables, and
 * for each tile variable the dimension it indexes (dim[j], -1 if none).
 * Every dimension is affine; a tile variable appears in one dimension only,
 * with coefficient 1, alone among the tile variables. */
static int access_of(mctx *c, const tir_buffer *buf, tir_expr *const *idx,
		     tir_intrin_access *acc, int dim[3])
{
	acc->buf = buf;
	acc->row = acc->col = -1;
	for (int j = 0; j < c->nv; j++)
		dim[j] = -1;
	for (int d = 0; d < buf->ndim; d++) {
		tir_expr *e = expr_simplify(c->a, expr_subst(c->a, idx[d], &c->bind), &c->env);
		acc->idx[d] = e;
		tir_affine f;
		if (!affine_of(e, &f))
			return mismatch(c, "an index of ", buf->name);
		int here = 0;
		for (int t = 0; t < f.nterms; t++) {
			for (int j = 0; j < c->nv; j++) {
				if (f.var[t] == c->v[j]) {
					if (f.coef[t] != 1)
						return mismatch(c, "a tile loop with a coefficient other than 1 in ",
								buf->name);
					if (dim[j] >= 0)
						return mismatch(c, "a tile loop in two dimensions of ", buf->name);
					dim[j] = d;
					here++;
				} else if (!f.var[t] && expr_uses_var(f.opaque[t], c->v[j])) {
					return mismatch(c, "a tile loop in a non-affine index of ", buf->name);
				}
			}
		}
		if (here > 1)
			return mismatch(c, "two tile loops in one dimension of ", buf->name);
	}
	return 0;
}

/* The tile of a fragment fills its last two dimensions, rows then columns
 * or (transposed) columns then rows. */
static int fragment_tile(mctx *c, const tir_intrin_access *acc, int row, int col,
			 bool transposed_ok)
{
	int n = acc->buf->ndim;
	if (n < 2)
		return mismatch(c, "a fragment of fewer than two dimensions: ", acc->buf->name);
	bool straight = row == n - 2 && col == n - 1;
	bool transposed = row == n - 1 && col == n - 2;
	if (!straight && !(transposed_ok && transposed))
		return mismatch(c, "the tile is not in the last two dimensions of fragment ",
				acc->buf->name);
	return 0;
}

static bool is_zero(const tir_expr *e)
{
	if (e && e->kind == E_CAST)
		return is_zero(e->a);
	return e && ((e->kind == E_FLOAT && e->fval == 0) || (e->kind == E_INT && e->ival == 0));
}

static int check_memory(mctx *c, const tir_buffer *buf, tir_dtype want)
{
	if (buf->scope != TIR_SCOPE_GLOBAL && buf->scope != TIR_SCOPE_SHARED)
		return mismatch(c, "its memory operand is not in global or shared memory: ",
				buf->name);
	if (buf->dtype != want)
		return mismatch(c, "the dtype of ", buf->name);
	return 0;
}

static int check_fragment(mctx *c, const tir_buffer *buf, tir_scope sc, tir_dtype want)
{
	if (buf->scope != sc)
		return tir_fail(c->err, "tensorize: block \"%s\" does not match %s: buffer \"%s\" "
				"is in scope %s, the intrinsic needs %s", c->b->name, c->in->name,
				buf->name, scope_name(buf->scope), scope_name(sc));
	if (buf->dtype != want)
		return mismatch(c, "the dtype of ", buf->name);
	return 0;
}

/* The accumulator's scope of an intrinsic. */
static tir_scope acc_scope(const tir_intrin *in)
{
	return in->unit == INTRIN_WARPGROUP ? TIR_SCOPE_WG_ACC : TIR_SCOPE_FRAG_ACC;
}

static int match_fill(mctx *c, tir_intrin_match *m)
{
	const tir_block *b = c->b;
	int d[3];
	if (b->reduce != REDUCE_NONE || !is_zero(b->value))
		return mismatch(c, "it does not store zero", NULL);
	if (check_fragment(c, b->store, acc_scope(c->in), c->in->acc) ||
	    access_of(c, b->store, b->store_idx, &m->dst, d) ||
	    fragment_tile(c, &m->dst, d[0], d[1], false))
		return -1;
	m->dst.row = d[0];
	m->dst.col = d[1];
	return 0;
}

/* A copy between a fragment and memory (shared or global), the tile in the
 * same order on both sides: LOAD_A / LOAD_B frag[r, c] = src[r, c], the
 * tile's columns the memory's last dimension (the fragment's layout is the
 * product's); STORE dst[r, c] = acc[r, c], either tile dimension the
 * memory's last (row- or column-major store). */
static int match_copy(mctx *c, tir_intrin_match *m, tir_scope sc, tir_dtype dt, bool load)
{
	const tir_block *b = c->b;
	const tir_expr *v = b->value;
	if (b->reduce != REDUCE_NONE || !v || v->kind != E_LOAD)
		return mismatch(c, "it is not a copy", NULL);
	const tir_buffer *fb = load ? b->store : v->buf, *mb = load ? v->buf : b->store;
	tir_expr *const *fidx = load ? b->store_idx : v->idx, *const *midx = load ? v->idx
										 : b->store_idx;
	tir_intrin_access *fa = load ? &m->dst : &m->src[0], *ma = load ? &m->src[0] : &m->dst;
	int f[3], e[3];
	if (check_fragment(c, fb, sc, dt) || check_memory(c, mb, dt) ||
	    access_of(c, fb, fidx, fa, f) || fragment_tile(c, fa, f[0], f[1], false) ||
	    access_of(c, mb, midx, ma, e))
		return -1;
	int last = mb->ndim - 1;
	if (e[0] < 0 || e[1] < 0 || (e[1] != last && (load || e[0] != last)))
		return mismatch(c, load ? "the tile's columns are not the last dimension of "
				: "neither tile dimension is the last of ", mb->name);
	fa->row = f[0];
	fa->col = f[1];
	ma->row = e[0];
	ma->col = e[1];
	m->nsrc = 1;
	return 0;
}

/* A warpgroup STORE with an epilogue: dst[r, c] = f(acc[r, c], ...), the
 * value any expression whose fragment loads are all of one accumulator at
 * the tile (the same indices each time) and whose other loads are of
 * memory; dst in memory, of any dtype, indexed by both tile loops. */
typedef struct epi_ctx {
	mctx *c;
	tir_intrin_match *m;
	int rc, nfrag;
} epi_ctx;

static void epi_load(tir_expr *load, void *ctx)
{
	epi_ctx *x = ctx;
	mctx *c = x->c;
	if (x->rc || !scope_is_fragment(load->buf->scope))
		return;
	tir_intrin_access a;
	int f[3];
	if (check_fragment(c, load->buf, acc_scope(c->in), c->in->acc) ||
	    access_of(c, load->buf, load->idx, &a, f) || fragment_tile(c, &a, f[0], f[1], false)) {
		x->rc = -1;
		return;
	}
	a.row = f[0];
	a.col = f[1];
	if (x->nfrag++ == 0) {
		x->m->src[0] = a;
		return;
	}
	bool same = a.buf == x->m->src[0].buf;
	for (int d = 0; same && d < a.buf->ndim; d++)
		same = expr_equal(a.idx[d], x->m->src[0].idx[d]);
	if (!same)
		x->rc = mismatch(c, "its epilogue reads the accumulator at two places: ", a.buf->name);
}

static int match_epilogue(mctx *c, tir_intrin_match *m)
{
	const tir_block *b = c->b;
	epi_ctx x = { c, m, 0, 0 };
	if (b->reduce != REDUCE_NONE || !b->value)
		return mismatch(c, "it is a reduction", NULL);
	expr_visit_loads(b->value, epi_load, &x);
	if (x.rc)
		return -1;
	if (x.nfrag == 0)
		return mismatch(c, "it does not read the accumulator", NULL);
	const tir_buffer *mb = b->store;
	int e[3];
	if (mb->scope != TIR_SCOPE_GLOBAL && mb->scope != TIR_SCOPE_SHARED)
		return mismatch(c, "its memory operand is not in global or shared memory: ", mb->name);
	if (access_of(c, mb, b->store_idx, &m->dst, e))
		return -1;
	if (e[0] < 0 || e[1] < 0)
		return mismatch(c, "a tile loop does not index ", mb->name);
	m->dst.row = e[0];
	m->dst.col = e[1];
	m->nsrc = 1;
	m->epilogue = true;
	return 0;
}

static int match_store(mctx *c, tir_intrin_match *m)
{
	const tir_expr *v = c->b->value;
	if (c->in->unit == INTRIN_WARPGROUP && v && c->b->reduce == REDUCE_NONE &&
	    !(v->kind == E_LOAD && v->buf->dtype == c->b->store->dtype))
		return match_epilogue(c, m);
	return match_copy(c, m, acc_scope(c->in), c->in->acc, false);
}

/* A CPU intrinsic's operand or accumulator: memory a thread reads and
 * writes (global, shared or local; never a GPU fragment), of the row's dtype. */
static int check_cpu_operand(mctx *c, const tir_buffer *buf, tir_dtype want)
{
	if (scope_is_fragment(buf->scope))
		return tir_fail(c->err, "tensorize: block \"%s\" does not match %s: buffer \"%s\" "
				"is in scope %s; a CPU intrinsic reads and writes memory",
				c->b->name, c->in->name, buf->name, scope_name(buf->scope));
	if (buf->dtype != want)
		return mismatch(c, "the dtype of ", buf->name);
	return 0;
}

/* A CPU MMA over loops (i, j, k): acc[i, j] += cast(a[i, k]) * cast(b[k,
 * j]), the operands either way round in the product; any dimensions of
 * each buffer may hold the tile (codegen/c_neon.c packs the operands from
 * their strides), but a is indexed by i and k only, b by k and j only, the
 * accumulator by i and j only.  row / col: the dimension of the first and
 * second tile loop of each access (a: i, k; b: k, j; acc: i, j). */
static int match_cpu_mma(mctx *c, tir_intrin_match *m, const tir_expr *x, const tir_expr *y)
{
	const tir_block *b = c->b;
	int d[3], a[3], e[3];
	if (check_cpu_operand(c, b->store, c->in->acc) ||
	    check_cpu_operand(c, x->buf, c->in->in) || check_cpu_operand(c, y->buf, c->in->in) ||
	    access_of(c, b->store, b->store_idx, &m->dst, d) ||
	    access_of(c, x->buf, x->idx, &m->src[0], a))
		return -1;
	if (a[1] >= 0) {            /* x is b: the product the other way round */
		const tir_expr *t = x;
		x = y;
		y = t;
		if (access_of(c, x->buf, x->idx, &m->src[0], a))
			return -1;
	}
	if (access_of(c, y->buf, y->idx, &m->src[1], e))
		return -1;
	if (d[0] < 0 || d[1] < 0 || d[2] >= 0)
		return mismatch(c, "the accumulator is not indexed by the tile's i and j loops "
				"alone: ", b->store->name);
	if (a[0] < 0 || a[2] < 0 || a[1] >= 0)
		return mismatch(c, "an operand is not indexed by the tile's i and k loops alone: ",
				x->buf->name);
	if (e[2] < 0 || e[1] < 0 || e[0] >= 0)
		return mismatch(c, "an operand is not indexed by the tile's k and j loops alone: ",
				y->buf->name);
	m->dst.row = d[0];
	m->dst.col = d[1];
	m->src[0].row = a[0];
	m->src[0].col = a[2];
	m->src[1].row = e[2];
	m->src[1].col = e[1];
	m->nsrc = 2;
	return 0;
}

/* MMA over loops (i, j, k): acc[i, j] += cast(a[i, k]) * cast(b[k, j]); the
 * operands either way round, a and b fragments possibly transposed (a CPU
 * intrinsic: match_cpu_mma). */
static int match_mma(mctx *c, tir_intrin_match *m)
{
	const tir_block *b = c->b;
	const tir_expr *v = b->value;
	int d[3];
	/* an MMA sums products: a max or min reduction is refused by name */
	if (b->reduce == REDUCE_MAX || b->reduce == REDUCE_MIN)
		return mismatch(c, "an MMA sums, and it is a reduction by ", reduce_name(b->reduce));
	if (b->reduce != REDUCE_SUM)
		return mismatch(c, "it is not a sum", NULL);
	if (b->init)
		return mismatch(c, "it still has its init (decompose the reduction first)", NULL);
	if (!v || v->kind != E_MUL)
		return mismatch(c, "it does not accumulate a product", NULL);
	/* a CPU accumulator is plain memory: its dtype is the first thing that
	 * can differ (a float16 product summed into float32 is not fmla's) */
	if (c->in->unit == INTRIN_CPU && b->store->dtype != c->in->acc)
		return mismatch(c, "the dtype of ", b->store->name);
	const tir_expr *x = expr_uncast(v->a, c->in->acc), *y = expr_uncast(v->b, c->in->acc);
	if (!x || !y || x->kind != E_LOAD || y->kind != E_LOAD)
		return mismatch(c, "its product is not of two loads", NULL);
	if (c->in->unit == INTRIN_CPU)
		return match_cpu_mma(c, m, x, y);
	bool wg = c->in->unit == INTRIN_WARPGROUP;
	if (!wg && y->buf->scope == TIR_SCOPE_FRAG_A) {
		const tir_expr *t = x;
		x = y;
		y = t;
	}
	if (check_fragment(c, b->store, acc_scope(c->in), c->in->acc) ||
	    access_of(c, b->store, b->store_idx, &m->dst, d))
		return -1;
	if (wg) {
		/* which operand is a: the one the accumulator's row loop indexes */
		int t0[3];
		if (access_of(c, x->buf, x->idx, &m->src[0], t0))
			return -1;
		if (t0[0] < 0) {
			const tir_expr *t = x;
			x = y;
			y = t;
		}
		if (check_fragment(c, x->buf, TIR_SCOPE_SHARED, c->in->in) ||
		    check_fragment(c, y->buf, TIR_SCOPE_SHARED, c->in->in))
			return -1;
	} else if (check_fragment(c, x->buf, TIR_SCOPE_FRAG_A, c->in->in) ||
		   check_fragment(c, y->buf, TIR_SCOPE_FRAG_B, c->in->in)) {
		return -1;
	}
	if (d[2] >= 0)
		return mismatch(c, "the reduction loop indexes the accumulator", NULL);
	if (fragment_tile(c, &m->dst, d[0], d[1], false))
		return -1;
	m->dst.row = d[0];
	m->dst.col = d[1];
	int a[3], e[3];
	if (access_of(c, x->buf, x->idx, &m->src[0], a) ||
	    access_of(c, y->buf, y->idx, &m->src[1], e))
		return -1;
	if (a[1] >= 0 || e[0] >= 0)
		return mismatch(c, "an operand is indexed by the wrong tile loop", NULL);
	if (fragment_tile(c, &m->src[0], a[0], a[2], true) ||
	    fragment_tile(c, &m->src[1], e[2], e[1], true))
		return -1;
	m->src[0].row = a[0];
	m->src[0].col = a[2];
	m->src[1].row = e[2];
	m->src[1].col = e[1];
	m->nsrc = 2;
	return 0;
}

int intrin_match(tir_arena *a, const tir_program *p, const tir_stmt *loop,
		 const tir_intrin *in, tir_intrin_match *m, tir_error *err)
{
	memset(m, 0, sizeof *m);
	m->in = in;
	if (!loop || loop->kind != STMT_FOR)
		return tir_fail(err, "tensorize: expected a loop");
	int want = in->kind == INTRIN_MMA ? 3 : 2;
	int64_t ext[3];
	switch (in->kind) {
	case INTRIN_LOAD_A: ext[0] = in->m; ext[1] = in->k; break;
	case INTRIN_LOAD_B: ext[0] = in->k; ext[1] = in->n; break;
	default: ext[0] = in->m; ext[1] = in->n; ext[2] = in->k; break;
	}
	const tir_stmt *l = loop;
	for (;;) {
		if (m->nloops == 3)
			return tir_fail(err, "tensorize: more than %d loops under %s for %s", want,
					loop->var->name, in->name);
		if (l != loop && l->loop_kind != LOOP_SERIAL && l->loop_kind != LOOP_UNROLLED)
			return tir_fail(err, "tensorize: loop %s under %s is %s; the tile's loops "
					"must be serial", l->var->name, loop->var->name,
					loop_kind_name(l->loop_kind));
		m->loops[m->nloops++] = l;
		if (l->nkids != 1)
			return tir_fail(err, "tensorize: loop %s holds %d statements, not one loop "
					"nest over one block", l->var->name, l->nkids);
		if (l->kids[0]->kind == STMT_BLOCK)
			break;
		if (l->kids[0]->kind != STMT_FOR)
			return tir_fail(err, "tensorize: loop %s does not hold a perfect loop nest",
					l->var->name);
		l = l->kids[0];
	}
	if (loop->loop_kind == LOOP_THREAD || loop->loop_kind == LOOP_VECTORIZED ||
	    loop->loop_kind == LOOP_PARALLEL)
		return tir_fail(err, "tensorize: loop %s is %s; a tensorized loop is serial",
				loop->var->name, loop_kind_name(loop->loop_kind));
	if (m->nloops != want)
		return tir_fail(err, "tensorize: %s needs %d loops over its block, loop %s has %d",
				in->name, want, loop->var->name, m->nloops);
	for (int i = 0; i < want; i++)
		if (m->loops[i]->extent != ext[i])
			return tir_fail(err, "tensorize: loop %s has extent %lld, %s needs %lld",
					m->loops[i]->var->name, (long long)m->loops[i]->extent,
					in->name, (long long)ext[i]);
	const tir_block *b = l->kids[0]->block;
	m->b = b;
	if (b->predicate)
		return tir_fail(err, "tensorize: block \"%s\" has a predicate (a partial tile)",
				b->name);
	mctx c = { a, p, in, b, { p->nvars, NULL }, env_new(p->nvars), { NULL }, want, err };
	c.bind.map = arena_alloc(a, sizeof(tir_expr *) * (size_t)(p->nvars + 1));
	for (int i = 0; i < b->niters; i++)
		c.bind.map[b->iters[i].var->id] = b->iters[i].binding;
	for (int i = 0; i < want; i++)
		c.v[i] = m->loops[i]->var;
	int rc;
	switch (in->kind) {
	case INTRIN_FILL:   rc = match_fill(&c, m); break;
	case INTRIN_LOAD_A: rc = match_copy(&c, m, TIR_SCOPE_FRAG_A, in->in, true); break;
	case INTRIN_LOAD_B: rc = match_copy(&c, m, TIR_SCOPE_FRAG_B, in->in, true); break;
	case INTRIN_STORE:  rc = match_store(&c, m); break;
	default:            rc = match_mma(&c, m); break;
	}
	env_free(&c.env);
	return rc;
}
