/*
 * expr.c — expression constructors, substitution and comparison.
 *
 * Expressions are immutable trees in a program's arena.  The constructors do
 * the local simplifications that keep printed programs and generated code
 * readable (constant folding, x+0, x*1, floordiv(x, 1), ...); anything that
 * needs variable ranges lives in analysis.c.  Integer division and modulo are
 * floor division and floor modulo throughout, as in TensorIR.
 */
#include <math.h>
#include <string.h>
#include "ir.h"

static tir_expr *node(tir_arena *a, tir_expr_kind k, tir_dtype t)
{
	tir_expr *e = arena_alloc(a, sizeof *e);
	e->kind = k;
	e->dtype = t;
	return e;
}

tir_expr *mk_int(tir_arena *a, int64_t v)
{
	tir_expr *e = node(a, E_INT, TIR_I64);
	e->ival = v;
	return e;
}

tir_expr *mk_float(tir_arena *a, double v, tir_dtype t)
{
	tir_expr *e = node(a, E_FLOAT, t);
	e->fval = v;
	return e;
}

tir_expr *mk_var(tir_arena *a, tir_var *v)
{
	tir_expr *e = node(a, E_VAR, TIR_I64);
	e->var = v;
	return e;
}

static int64_t floordiv64(int64_t x, int64_t y)
{
	int64_t q = x / y;
	if ((x % y != 0) && ((x < 0) != (y < 0)))
		q--;
	return q;
}

static int64_t floormod64(int64_t x, int64_t y)
{
	return x - floordiv64(x, y) * y;
}

static bool is_int(const tir_expr *e, int64_t v)
{
	return e->kind == E_INT && e->ival == v;
}

static bool is_cmp(tir_expr_kind k)
{
	return k == E_LT || k == E_LE || k == E_EQ || k == E_NE;
}

tir_expr *mk_bin(tir_arena *a, tir_expr_kind k, tir_expr *x, tir_expr *y)
{
	bool ints = x->kind == E_INT && y->kind == E_INT;
	if (ints) {
		int64_t p = x->ival, q = y->ival;
		switch (k) {
		case E_ADD: return mk_int(a, p + q);
		case E_SUB: return mk_int(a, p - q);
		case E_MUL: return mk_int(a, p * q);
		case E_FLOORDIV: if (q) return mk_int(a, floordiv64(p, q)); break;
		case E_FLOORMOD: if (q) return mk_int(a, floormod64(p, q)); break;
		case E_MIN: return mk_int(a, p < q ? p : q);
		case E_MAX: return mk_int(a, p > q ? p : q);
		default: break;
		}
	}
	bool idx = x->dtype == TIR_I64 && y->dtype == TIR_I64;
	if (idx) {
		switch (k) {
		case E_ADD:
			if (is_int(x, 0)) return y;
			if (is_int(y, 0)) return x;
			if (x->kind == E_INT)   /* constants to the right */
				return mk_bin(a, E_ADD, y, x);
			if (y->kind == E_INT && x->kind == E_ADD && x->b->kind == E_INT)
				return mk_add(a, x->a, mk_int(a, x->b->ival + y->ival));
			break;
		case E_SUB:
			if (is_int(y, 0)) return x;
			if (y->kind == E_INT)
				return mk_add(a, x, mk_int(a, -y->ival));
			break;
		case E_MUL:
			if (is_int(x, 0) || is_int(y, 0)) return mk_int(a, 0);
			if (is_int(x, 1)) return y;
			if (is_int(y, 1)) return x;
			if (x->kind == E_INT)
				return mk_bin(a, E_MUL, y, x);
			if (y->kind == E_INT && x->kind == E_MUL && x->b->kind == E_INT)
				return mk_mul(a, x->a, mk_int(a, x->b->ival * y->ival));
			break;
		case E_FLOORDIV:
			if (is_int(y, 1)) return x;
			if (is_int(x, 0)) return x;
			break;
		case E_FLOORMOD:
			if (is_int(y, 1) || is_int(x, 0)) return mk_int(a, 0);
			break;
		default: break;
		}
	}
	if (k == E_AND) {
		if (x->kind == E_INT) return x->ival ? y : x;
		if (y->kind == E_INT) return y->ival ? x : y;
	}
	if (k == E_OR) {
		if (x->kind == E_INT) return x->ival ? x : y;
		if (y->kind == E_INT) return y->ival ? y : x;
	}
	if (ints && is_cmp(k)) {
		int64_t p = x->ival, q = y->ival;
		bool r = k == E_LT ? p < q : k == E_LE ? p <= q : k == E_EQ ? p == q : p != q;
		tir_expr *e = mk_int(a, r);
		e->dtype = TIR_BOOL;
		return e;
	}
	tir_dtype t = x->dtype;
	if (is_cmp(k) || k == E_AND || k == E_OR)
		t = TIR_BOOL;
	tir_expr *e = node(a, k, t);
	e->a = x;
	e->b = y;
	return e;
}

tir_expr *mk_add(tir_arena *a, tir_expr *x, tir_expr *y) { return mk_bin(a, E_ADD, x, y); }
tir_expr *mk_sub(tir_arena *a, tir_expr *x, tir_expr *y) { return mk_bin(a, E_SUB, x, y); }
tir_expr *mk_mul(tir_arena *a, tir_expr *x, tir_expr *y) { return mk_bin(a, E_MUL, x, y); }
tir_expr *mk_floordiv(tir_arena *a, tir_expr *x, tir_expr *y) { return mk_bin(a, E_FLOORDIV, x, y); }
tir_expr *mk_floormod(tir_arena *a, tir_expr *x, tir_expr *y) { return mk_bin(a, E_FLOORMOD, x, y); }

tir_expr *mk_and(tir_arena *a, tir_expr *x, tir_expr *y)
{
	if (!x) return y;
	if (!y) return x;
	return mk_bin(a, E_AND, x, y);
}

tir_expr *mk_not(tir_arena *a, tir_expr *x)
{
	if (x->kind == E_INT) {
		tir_expr *e = mk_int(a, !x->ival);
		e->dtype = TIR_BOOL;
		return e;
	}
	tir_expr *e = node(a, E_NOT, TIR_BOOL);
	e->a = x;
	return e;
}

tir_expr *mk_select(tir_arena *a, tir_expr *cond, tir_expr *then,
		    tir_expr *otherwise)
{
	if (cond->kind == E_INT)
		return cond->ival ? then : otherwise;
	tir_expr *e = node(a, E_SELECT, then->dtype);
	e->c = cond;
	e->a = then;
	e->b = otherwise;
	return e;
}

tir_expr *mk_cast(tir_arena *a, tir_dtype t, tir_expr *x)
{
	if (x->dtype == t)
		return x;
	if (x->kind == E_FLOAT && dtype_is_float(t))
		return mk_float(a, x->fval, t);
	if (x->kind == E_INT && dtype_is_float(t))
		return mk_float(a, (double)x->ival, t);
	/* a 16-bit float widened to float32 and narrowed back is itself (every
	 * float16 and bfloat16 value is a float32 value) */
	if (x->kind == E_CAST && x->a->dtype == t && x->dtype == TIR_F32 &&
	    (t == TIR_F16 || t == TIR_BF16))
		return x->a;
	tir_expr *e = node(a, E_CAST, t);
	e->a = x;
	return e;
}

tir_expr *mk_call(tir_arena *a, tir_mathfn f, tir_expr *x)
{
	tir_expr *e = node(a, E_CALL, x->dtype);
	e->fn = f;
	e->a = x;
	return e;
}

tir_expr *mk_load(tir_arena *a, tir_buffer *b, int n, tir_expr *const *idx)
{
	tir_expr *e = node(a, E_LOAD, b->dtype);
	e->buf = b;
	e->nidx = n;
	e->idx = arena_alloc(a, sizeof(tir_expr *) * (size_t)(n ? n : 1));
	memcpy(e->idx, idx, sizeof(tir_expr *) * (size_t)n);
	return e;
}

/* Rebuilds e with new operands through the simplifying constructors. */
static tir_expr *rebuild(tir_arena *a, const tir_expr *e, tir_expr *x,
			 tir_expr *y, tir_expr *z, tir_expr **idx)
{
	switch (e->kind) {
	case E_INT: case E_FLOAT: case E_VAR:
		return (tir_expr *)e;
	case E_NOT: return mk_not(a, x);
	case E_SELECT: return mk_select(a, z, x, y);
	case E_CAST: return mk_cast(a, e->dtype, x);
	case E_CALL: return mk_call(a, e->fn, x);
	case E_LOAD: return mk_load(a, e->buf, e->nidx, idx);
	case E_DIV: {
		tir_expr *n = arena_alloc(a, sizeof *n);
		*n = *e;
		n->a = x;
		n->b = y;
		return n;
	}
	default:
		return mk_bin(a, e->kind, x, y);
	}
}

tir_expr *expr_subst(tir_arena *a, tir_expr *e, const tir_subst *s)
{
	if (!e)
		return NULL;
	if (e->kind == E_VAR) {
		if (e->var->id < s->n && s->map[e->var->id])
			return s->map[e->var->id];
		return e;
	}
	if (e->kind == E_INT || e->kind == E_FLOAT)
		return e;
	tir_expr *x = expr_subst(a, e->a, s), *y = expr_subst(a, e->b, s);
	tir_expr *z = expr_subst(a, e->c, s);
	tir_expr *idx[TIR_MAX_DIMS];
	bool same = x == e->a && y == e->b && z == e->c;
	for (int i = 0; i < e->nidx; i++) {
		idx[i] = expr_subst(a, e->idx[i], s);
		same = same && idx[i] == e->idx[i];
	}
	if (same)
		return e;
	return rebuild(a, e, x, y, z, idx);
}

/* e with every load of `buf` replaced by fn(load, its indices rewritten,
 * ctx); the rest rebuilt only where something under it changed. */
typedef tir_expr *(*load_fn)(tir_arena *a, const tir_expr *load, tir_expr **idx, void *ctx);

static tir_expr *map_loads(tir_arena *a, tir_expr *e, const tir_buffer *buf, load_fn fn,
			   void *ctx)
{
	if (!e || e->kind == E_INT || e->kind == E_FLOAT || e->kind == E_VAR)
		return e;
	tir_expr *x = map_loads(a, e->a, buf, fn, ctx);
	tir_expr *y = map_loads(a, e->b, buf, fn, ctx);
	tir_expr *z = map_loads(a, e->c, buf, fn, ctx);
	tir_expr *idx[TIR_MAX_DIMS];
	for (int i = 0; i < e->nidx; i++)
		idx[i] = map_loads(a, e->idx[i], buf, fn, ctx);
	if (e->kind == E_LOAD && e->buf == buf)
		return fn(a, e, idx, ctx);
	return rebuild(a, e, x, y, z, idx);
}

static tir_expr *load_of(tir_arena *a, const tir_expr *load, tir_expr **idx, void *to)
{
	return mk_load(a, to, load->nidx, idx);
}

tir_expr *expr_replace_buffer(tir_arena *a, tir_expr *e, tir_buffer *from,
			      tir_buffer *to)
{
	return map_loads(a, e, from, load_of, to);
}

static tir_expr *fixed(tir_arena *a, const tir_expr *load, tir_expr **idx, void *with)
{
	(void)a;
	(void)load;
	(void)idx;
	return with;
}

tir_expr *expr_replace_loads(tir_arena *a, tir_expr *e, const tir_buffer *buf,
			     tir_expr *with)
{
	return map_loads(a, e, buf, fixed, with);
}

bool expr_uses_var(const tir_expr *e, const tir_var *v)
{
	if (!e)
		return false;
	if (e->kind == E_VAR)
		return e->var == v;
	if (expr_uses_var(e->a, v) || expr_uses_var(e->b, v) || expr_uses_var(e->c, v))
		return true;
	for (int i = 0; i < e->nidx; i++)
		if (expr_uses_var(e->idx[i], v))
			return true;
	return false;
}

bool expr_equal(const tir_expr *x, const tir_expr *y)
{
	if (x == y)
		return true;
	if (!x || !y || x->kind != y->kind || x->dtype != y->dtype)
		return false;
	switch (x->kind) {
	case E_INT: return x->ival == y->ival;
	case E_FLOAT: return x->fval == y->fval;
	case E_VAR: return x->var == y->var;
	case E_CALL: if (x->fn != y->fn) return false; break;
	case E_LOAD:
		if (x->buf != y->buf || x->nidx != y->nidx)
			return false;
		for (int i = 0; i < x->nidx; i++)
			if (!expr_equal(x->idx[i], y->idx[i]))
				return false;
		return true;
	default: break;
	}
	return expr_equal(x->a, y->a) && expr_equal(x->b, y->b) &&
	       expr_equal(x->c, y->c);
}

void expr_visit_loads(tir_expr *e, void (*fn)(tir_expr *load, void *ctx),
		      void *ctx)
{
	if (!e)
		return;
	if (e->kind == E_SELECT) {
		expr_visit_loads(e->c, fn, ctx);
		expr_visit_loads(e->a, fn, ctx);
		expr_visit_loads(e->b, fn, ctx);
		return;
	}
	expr_visit_loads(e->a, fn, ctx);
	expr_visit_loads(e->b, fn, ctx);
	expr_visit_loads(e->c, fn, ctx);
	for (int i = 0; i < e->nidx; i++)
		expr_visit_loads(e->idx[i], fn, ctx);
	if (e->kind == E_LOAD)
		fn(e, ctx);
}

const tir_expr *expr_uncast(const tir_expr *e, tir_dtype t)
{
	return e && e->kind == E_CAST && e->dtype == t ? e->a : e;
}
