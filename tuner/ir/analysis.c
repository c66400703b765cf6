/*
 * analysis.c — integer analysis for index expressions: affine normal forms,
 * bounds by interval arithmetic, simplification and symbolic intervals.
 *
 * Every schedule primitive that moves computation (compute_at, cache stages,
 * buffer compaction in lowering) asks one question: which rectangle of a
 * buffer do the accesses under a loop touch, as a function of the loops above
 * it?  interval_of answers it for one index: the variables that vary (ranged
 * in the env) contribute constant bounds, the fixed ones (symbolic) a base
 * expression.  Non-affine terms (floordiv / floormod from fuse) are bounded as
 * a whole when all their variables vary, kept in the base when none does, and
 * make the answer `full` (the whole dimension) when they mix both.
 */
#include <stdlib.h>
#include <string.h>
#include "ir.h"

tir_env env_new(int nvars)
{
	tir_env e = { nvars, xmalloc(sizeof(tir_range) * (size_t)(nvars ? nvars : 1)) };
	for (int i = 0; i < nvars; i++)
		e.r[i] = (tir_range){ 1, 0 };
	return e;
}

void env_free(tir_env *e)
{
	free(e->r);
	e->r = NULL;
	e->n = 0;
}

void env_set(tir_env *e, const tir_var *v, int64_t min, int64_t max)
{
	if (v->id < e->n)
		e->r[v->id] = (tir_range){ min, max };
}

void env_unset(tir_env *e, const tir_var *v)
{
	if (v->id < e->n)
		e->r[v->id] = (tir_range){ 1, 0 };
}

bool env_has(const tir_env *e, const tir_var *v)
{
	return e && v->id < e->n && e->r[v->id].min <= e->r[v->id].max;
}

static int64_t fdiv(int64_t x, int64_t y)
{
	int64_t q = x / y;
	if ((x % y != 0) && ((x < 0) != (y < 0)))
		q--;
	return q;
}

static int64_t fmod64(int64_t x, int64_t y) { return x - fdiv(x, y) * y; }

static int64_t gcd64(int64_t a, int64_t b)
{
	while (b) {
		int64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

static bool add_term(tir_affine *f, int64_t coef, tir_var *v, tir_expr *opaque)
{
	if (coef == 0)
		return true;
	for (int i = 0; i < f->nterms; i++) {
		bool same = v ? f->var[i] == v
			      : !f->var[i] && expr_equal(f->opaque[i], opaque);
		if (same) {
			f->coef[i] += coef;
			if (f->coef[i] == 0) {
				f->nterms--;
				memmove(&f->coef[i], &f->coef[i + 1], sizeof(int64_t) * (size_t)(f->nterms - i));
				memmove(&f->var[i], &f->var[i + 1], sizeof(tir_var *) * (size_t)(f->nterms - i));
				memmove(&f->opaque[i], &f->opaque[i + 1], sizeof(tir_expr *) * (size_t)(f->nterms - i));
			}
			return true;
		}
	}
	if (f->nterms == TIR_MAX_TERMS)
		return false;
	/* keep variables sorted by id, opaque terms after them */
	int pos = f->nterms;
	if (v)
		for (pos = 0; pos < f->nterms; pos++)
			if (!f->var[pos] || f->var[pos]->id > v->id)
				break;
	memmove(&f->coef[pos + 1], &f->coef[pos], sizeof(int64_t) * (size_t)(f->nterms - pos));
	memmove(&f->var[pos + 1], &f->var[pos], sizeof(tir_var *) * (size_t)(f->nterms - pos));
	memmove(&f->opaque[pos + 1], &f->opaque[pos], sizeof(tir_expr *) * (size_t)(f->nterms - pos));
	f->coef[pos] = coef;
	f->var[pos] = v;
	f->opaque[pos] = opaque;
	f->nterms++;
	return true;
}

static bool affine_rec(const tir_expr *e, int64_t scale, tir_affine *f)
{
	if (e->dtype != TIR_I64 && e->dtype != TIR_I32)
		return false;
	switch (e->kind) {
	case E_INT:
		f->c0 += scale * e->ival;
		return true;
	case E_VAR:
		return add_term(f, scale, e->var, NULL);
	case E_ADD:
		return affine_rec(e->a, scale, f) && affine_rec(e->b, scale, f);
	case E_SUB:
		return affine_rec(e->a, scale, f) && affine_rec(e->b, -scale, f);
	case E_MUL:
		if (e->b->kind == E_INT)
			return affine_rec(e->a, scale * e->b->ival, f);
		if (e->a->kind == E_INT)
			return affine_rec(e->b, scale * e->a->ival, f);
		return add_term(f, scale, NULL, (tir_expr *)e);
	case E_LOAD: case E_FLOAT:
		return false;
	default:
		return add_term(f, scale, NULL, (tir_expr *)e);
	}
}

bool affine_of(const tir_expr *e, tir_affine *out)
{
	memset(out, 0, sizeof *out);
	return affine_rec(e, 1, out);
}

tir_expr *affine_to_expr(tir_arena *a, const tir_affine *f)
{
	tir_expr *e = NULL;
	for (int i = 0; i < f->nterms; i++) {
		tir_expr *t = f->var[i] ? mk_var(a, f->var[i]) : f->opaque[i];
		int64_t c = f->coef[i];
		if (!e) {
			e = mk_mul(a, t, mk_int(a, c));
		} else if (c < 0) {
			e = mk_sub(a, e, c == -1 ? t : mk_mul(a, t, mk_int(a, -c)));
		} else {
			e = mk_add(a, e, mk_mul(a, t, mk_int(a, c)));
		}
	}
	if (!e)
		return mk_int(a, f->c0);
	return mk_add(a, e, mk_int(a, f->c0));
}

static bool bounds_rec(const tir_expr *e, const tir_env *env, int64_t *lo, int64_t *hi);

static bool affine_bounds(const tir_affine *f, const tir_env *env, int64_t *lo,
			  int64_t *hi)
{
	int64_t l = f->c0, h = f->c0;
	for (int i = 0; i < f->nterms; i++) {
		int64_t tl, th;
		if (f->var[i]) {
			if (!env_has(env, f->var[i]))
				return false;
			tl = env->r[f->var[i]->id].min;
			th = env->r[f->var[i]->id].max;
		} else if (!bounds_rec(f->opaque[i], env, &tl, &th)) {
			return false;
		}
		int64_t c = f->coef[i];
		if (c >= 0) {
			l += c * tl;
			h += c * th;
		} else {
			l += c * th;
			h += c * tl;
		}
	}
	*lo = l;
	*hi = h;
	return true;
}

static bool bounds_rec(const tir_expr *e, const tir_env *env, int64_t *lo, int64_t *hi)
{
	int64_t al, ah, bl, bh;
	switch (e->kind) {
	case E_INT:
		*lo = *hi = e->ival;
		return true;
	case E_VAR:
		if (!env_has(env, e->var))
			return false;
		*lo = env->r[e->var->id].min;
		*hi = env->r[e->var->id].max;
		return true;
	case E_ADD: case E_SUB: {
		tir_affine f;
		if (!affine_of(e, &f))
			return false;
		return affine_bounds(&f, env, lo, hi);
	}
	case E_MUL: {
		if (!bounds_rec(e->a, env, &al, &ah) || !bounds_rec(e->b, env, &bl, &bh))
			return false;
		int64_t p[4] = { al * bl, al * bh, ah * bl, ah * bh };
		*lo = *hi = p[0];
		for (int i = 1; i < 4; i++) {
			if (p[i] < *lo) *lo = p[i];
			if (p[i] > *hi) *hi = p[i];
		}
		return true;
	}
	case E_FLOORDIV:
		if (e->b->kind != E_INT || e->b->ival <= 0 || !bounds_rec(e->a, env, &al, &ah))
			return false;
		*lo = fdiv(al, e->b->ival);
		*hi = fdiv(ah, e->b->ival);
		return true;
	case E_FLOORMOD: {
		if (e->b->kind != E_INT || e->b->ival <= 0)
			return false;
		int64_t c = e->b->ival;
		if (bounds_rec(e->a, env, &al, &ah) && fdiv(al, c) == fdiv(ah, c)) {
			*lo = fmod64(al, c);
			*hi = fmod64(ah, c);
		} else {
			*lo = 0;
			*hi = c - 1;
		}
		return true;
	}
	case E_MIN: case E_MAX:
		if (!bounds_rec(e->a, env, &al, &ah) || !bounds_rec(e->b, env, &bl, &bh))
			return false;
		if (e->kind == E_MIN) {
			*lo = al < bl ? al : bl;
			*hi = ah < bh ? ah : bh;
		} else {
			*lo = al > bl ? al : bl;
			*hi = ah > bh ? ah : bh;
		}
		return true;
	case E_SELECT:
		if (!bounds_rec(e->a, env, &al, &ah) || !bounds_rec(e->b, env, &bl, &bh))
			return false;
		*lo = al < bl ? al : bl;
		*hi = ah > bh ? ah : bh;
		return true;
	case E_LT: case E_LE: case E_EQ: case E_NE: case E_AND: case E_OR: case E_NOT:
		*lo = 0;
		*hi = 1;
		return true;
	default:
		return false;
	}
}

bool expr_bounds(const tir_expr *e, const tir_env *env, int64_t *min, int64_t *max)
{
	return bounds_rec(e, env, min, max);
}

/* r as g*big + sm: big the terms (and the part of the constant) that g
 * divides, over g; sm the rest. */
static void split_by(const tir_affine *r, int64_t g, tir_affine *big, tir_affine *sm)
{
	memset(big, 0, sizeof *big);
	memset(sm, 0, sizeof *sm);
	big->c0 = fdiv(r->c0, g);
	sm->c0 = fmod64(r->c0, g);
	for (int t = 0; t < r->nterms; t++)
		if (r->coef[t] % g == 0)
			add_term(big, r->coef[t] / g, r->var[t], r->opaque[t]);
		else
			add_term(sm, r->coef[t], r->var[t], r->opaque[t]);
}

/* floordiv / floormod of an affine numerator by a positive constant:
 * x = c*q + r with q the terms whose coefficients c divides. */
static tir_expr *simplify_divmod(tir_arena *a, tir_expr_kind k, tir_expr *x,
				 int64_t c, const tir_env *env)
{
	tir_affine f, q, r;
	if (!affine_of(x, &f))
		return mk_bin(a, k, x, mk_int(a, c));
	memset(&q, 0, sizeof q);
	memset(&r, 0, sizeof r);
	q.c0 = fdiv(f.c0, c);
	r.c0 = fmod64(f.c0, c);
	for (int i = 0; i < f.nterms; i++) {
		if (f.coef[i] % c == 0)
			add_term(&q, f.coef[i] / c, f.var[i], f.opaque[i]);
		else
			add_term(&r, f.coef[i], f.var[i], f.opaque[i]);
	}
	int64_t lo, hi;
	bool bounded = affine_bounds(&r, env, &lo, &hi);
	tir_expr *re = affine_to_expr(a, &r);
	if (bounded && fdiv(lo, c) == fdiv(hi, c)) {
		int64_t k0 = fdiv(lo, c);
		if (k == E_FLOORDIV)
			return mk_add(a, affine_to_expr(a, &q), mk_int(a, k0));
		return mk_sub(a, re, mk_int(a, k0 * c));
	}
	/* r = g*B + s with g dividing c and 0 <= s < g: floordiv(r, c) is
	 * floordiv(B, c/g) and floormod(r, c) is floormod(B, c/g)*g + s — a
	 * k loop tiled by 4 inside groups of 8 channels, floordiv(4*k0 + k1, 8)
	 * with k1 < 4, is floordiv(k0, 2), free of the inner k1.  The largest
	 * such g of the terms' common factors with c. */
	int64_t best = 0;
	tir_affine big, sm;
	for (int i = 0; i < r.nterms; i++) {
		int64_t g = gcd64(llabs(r.coef[i]), c), sl, sh;
		if (g <= best || g == c)
			continue;
		split_by(&r, g, &big, &sm);
		if (affine_bounds(&sm, env, &sl, &sh) && sl >= 0 && sh < g)
			best = g;
	}
	if (best > 1) {
		split_by(&r, best, &big, &sm);
		tir_expr *inner = simplify_divmod(a, k, affine_to_expr(a, &big), c / best, env);
		if (k == E_FLOORDIV)
			return mk_add(a, affine_to_expr(a, &q), inner);
		return mk_add(a, mk_mul(a, inner, mk_int(a, best)), affine_to_expr(a, &sm));
	}
	if (k == E_FLOORDIV) {
		/* nested floordiv(floordiv(y, d), c) == floordiv(y, d*c) */
		if (q.nterms == 0 && q.c0 == 0 && r.nterms == 1 && r.c0 == 0 &&
		    r.coef[0] == 1 && !r.var[0] && r.opaque[0]->kind == E_FLOORDIV &&
		    r.opaque[0]->b->kind == E_INT && r.opaque[0]->b->ival > 0)
			return simplify_divmod(a, E_FLOORDIV, r.opaque[0]->a,
					       r.opaque[0]->b->ival * c, env);
		return mk_add(a, affine_to_expr(a, &q),
			      mk_floordiv(a, re, mk_int(a, c)));
	}
	return mk_floormod(a, re, mk_int(a, c));
}

tir_expr *expr_simplify(tir_arena *a, tir_expr *e, const tir_env *env)
{
	if (!e)
		return NULL;
	switch (e->kind) {
	case E_INT: case E_FLOAT: case E_VAR:
		return e;
	default: break;
	}
	tir_expr *x = expr_simplify(a, e->a, env);
	tir_expr *y = expr_simplify(a, e->b, env);
	tir_expr *z = expr_simplify(a, e->c, env);
	if ((e->kind == E_FLOORDIV || e->kind == E_FLOORMOD) && y->kind == E_INT &&
	    y->ival > 0)
		return simplify_divmod(a, e->kind, x, y->ival, env);
	if (e->kind == E_LOAD) {
		tir_expr *idx[TIR_MAX_DIMS];
		for (int i = 0; i < e->nidx; i++)
			idx[i] = expr_simplify(a, e->idx[i], env);
		return mk_load(a, e->buf, e->nidx, idx);
	}
	tir_expr *r;
	switch (e->kind) {
	case E_NOT: r = mk_not(a, x); break;
	case E_SELECT: r = mk_select(a, z, x, y); break;
	case E_CAST: r = mk_cast(a, e->dtype, x); break;
	case E_CALL: r = mk_call(a, e->fn, x); break;
	case E_DIV: {
		r = arena_alloc(a, sizeof *r);
		*r = *e;
		r->a = x;
		r->b = y;
		break;
	}
	default: r = mk_bin(a, e->kind, x, y); break;
	}
	if (r->dtype == TIR_I64 && r->kind != E_INT && r->kind != E_VAR) {
		tir_affine f;
		if (affine_of(r, &f))
			r = affine_to_expr(a, &f);
	}
	/* comparisons decided by bounds */
	if (r->kind == E_LT || r->kind == E_LE) {
		int64_t al, ah, bl, bh;
		tir_expr *d = mk_sub(a, r->a, r->b);
		tir_affine f;
		if (affine_of(d, &f) && affine_bounds(&f, env, &al, &ah)) {
			bl = r->kind == E_LT ? -1 : 0;  /* d <= bl means true */
			bh = bl;
			if (ah <= bh) { r = mk_int(a, 1); r->dtype = TIR_BOOL; }
			else if (al > bl) { r = mk_int(a, 0); r->dtype = TIR_BOOL; }
		}
	}
	return r;
}

/* Whether e uses a variable that env ranges (want_ranged) or leaves symbolic. */
static bool uses_vars(const tir_expr *e, const tir_env *env, bool want_ranged)
{
	if (!e)
		return false;
	if (e->kind == E_VAR)
		return env_has(env, e->var) == want_ranged;
	if (uses_vars(e->a, env, want_ranged) || uses_vars(e->b, env, want_ranged) ||
	    uses_vars(e->c, env, want_ranged))
		return true;
	for (int i = 0; i < e->nidx; i++)
		if (uses_vars(e->idx[i], env, want_ranged))
			return true;
	return false;
}

tir_interval interval_of(tir_arena *a, const tir_expr *e, const tir_env *env)
{
	tir_interval iv = { NULL, 0, 0, false };
	tir_affine f, base;
	if (!affine_of(e, &f)) {
		iv.full = true;
		return iv;
	}
	memset(&base, 0, sizeof base);
	int64_t lo = f.c0, hi = f.c0;
	for (int i = 0; i < f.nterms; i++) {
		int64_t tl = 0, th = 0;
		bool ranged;
		if (f.var[i]) {
			ranged = env_has(env, f.var[i]);
			if (ranged) {
				tl = env->r[f.var[i]->id].min;
				th = env->r[f.var[i]->id].max;
			}
		} else if (!uses_vars(f.opaque[i], env, true)) {
			ranged = false;
		} else if (!uses_vars(f.opaque[i], env, false)) {
			ranged = bounds_rec(f.opaque[i], env, &tl, &th);
			if (!ranged) {
				iv.full = true;
				return iv;
			}
		} else {
			iv.full = true;
			return iv;
		}
		if (ranged) {
			int64_t c = f.coef[i];
			if (c >= 0) { lo += c * tl; hi += c * th; }
			else { lo += c * th; hi += c * tl; }
		} else {
			add_term(&base, f.coef[i], f.var[i], f.opaque[i]);
		}
	}
	iv.base = base.nterms ? affine_to_expr(a, &base) : NULL;
	iv.lo = lo;
	iv.hi = hi;
	return iv;
}

tir_interval interval_union(tir_arena *a, tir_interval x, tir_interval y)
{
	tir_interval r = x;
	if (x.full || y.full) {
		r.full = true;
		return r;
	}
	int64_t shift = 0;
	if (!(x.base == y.base || (x.base && y.base && expr_equal(x.base, y.base)))) {
		tir_affine f;
		tir_expr *d = mk_sub(a, x.base ? x.base : mk_int(a, 0),
				     y.base ? y.base : mk_int(a, 0));
		if (!affine_of(d, &f) || f.nterms) {
			r.full = true;
			return r;
		}
		shift = f.c0;   /* y.base = x.base - shift */
	}
	int64_t ylo = y.lo - shift, yhi = y.hi - shift;
	r.lo = x.lo < ylo ? x.lo : ylo;
	r.hi = x.hi > yhi ? x.hi : yhi;
	return r;
}
