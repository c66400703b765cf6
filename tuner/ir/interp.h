/*
 * interp.h — what the two files of the interpreter share, private to them
 * (interp.c: the values, the machine, the tree evaluator, the program;
 * interp_nest.c: the nest evaluator).  ir.h stays the folder's header:
 * interp_run is declared there; nothing here is for the rest of libtir.
 */
#ifndef TIR_IR_INTERP_H
#define TIR_IR_INTERP_H

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include "ir.h"

/* ---- values: what the operations compute, the one definition both evaluators use ---- */

/* x rounded to a binary floating-point type of `bits` significant bits,
 * smallest normal 2^emin, largest finite value maxv: to nearest, ties to
 * even, overflow to infinity. */
static inline double round_to(double x, int bits, int emin, double maxv)
{
	if (!isfinite(x) || x == 0)
		return x;
	int e;
	double a = fabs(x);
	frexp(a, &e);                   /* a in [2^(e-1), 2^e) */
	int q = e - bits;               /* the quantum: 2^(e-1) / 2^(bits-1) */
	if (q < emin - bits + 1)        /* subnormal: the smallest normal's quantum */
		q = emin - bits + 1;
	double r = ldexp(nearbyint(ldexp(a, -q)), q);
	if (r > maxv)
		r = INFINITY;
	return copysign(r, x);
}

static inline double round_f16(double x) { return round_to(x, 11, -14, 65504.0); }
static inline double round_bf16(double x) { return round_to(x, 8, -126, 0x1.fep127); }

/* x wrapped into the unsigned integers of `bits` bits. */
static inline double uwrap(double x, int bits)
{
	double m = ldexp(1.0, bits);
	if (x >= 0 && x < m)
		return x;
	return x - m * floor(x / m);
}

/* x wrapped into the signed integers of `bits` bits. */
static inline double wrap(double x, int bits)
{
	double m = ldexp(1.0, bits), h = ldexp(1.0, bits - 1);
	if (x >= -h && x < h)
		return x;
	return x - m * floor((x + h) / m);
}

/* What a cast to t, or a store into a buffer of t, makes of x. */
static inline double to_dtype(tir_dtype t, double x)
{
	switch (t) {
	case TIR_F32: return x;
	case TIR_F16: return round_f16(x);
	case TIR_BF16: return round_bf16(x);
	case TIR_BOOL: return x != 0;
	default:
		break;
	}
	if (!isfinite(x))               /* undefined in C: say 0 */
		return 0;
	x = trunc(x);
	return t == TIR_I8 ? wrap(x, 8) : t == TIR_U8 ? uwrap(x, 8) : t == TIR_I32 ? wrap(x, 32) : x;
}

/* Whether a cast from `from` to `to` leaves every value of `from` as it is
 * (to_dtype(to, x) == x for every x of `from`): to float32 always (never
 * rounded here), to an integer type from a narrower integer one. */
static inline bool cast_is_identity(tir_dtype to, tir_dtype from)
{
	if (to == from || to == TIR_F32)
		return true;
	if (to == TIR_I64)
		return from == TIR_I8 || from == TIR_U8 || from == TIR_I32 || from == TIR_BOOL;
	if (to == TIR_I32)
		return from == TIR_I8 || from == TIR_U8 || from == TIR_BOOL;
	if (to == TIR_U8)
		return from == TIR_BOOL;
	return false;
}

static inline double op_div(tir_dtype t, double a, double b)
{
	if (dtype_is_float(t))
		return a / b;
	return b == 0 ? 0 : trunc(a / b);      /* C's integer division; x / 0 is 0 */
}

static inline double op_floordiv(double a, double b) { return b == 0 ? 0 : floor(a / b); }
static inline double op_floormod(double a, double b)
{
	return b == 0 ? 0 : a - floor(a / b) * b;
}

/* fmin / fmax: a NaN operand gives the other (docs/ir-semantics.md) */
static inline double op_min(double a, double b) { return fmin(a, b); }
static inline double op_max(double a, double b) { return fmax(a, b); }

/* A binary operation of exprs.def (dtype t: the operation's, for E_DIV). */
static inline double op_bin(tir_expr_kind k, tir_dtype t, double a, double b)
{
	switch (k) {
	case E_ADD: return a + b;
	case E_SUB: return a - b;
	case E_MUL: return a * b;
	case E_DIV: return op_div(t, a, b);
	case E_FLOORDIV: return op_floordiv(a, b);
	case E_FLOORMOD: return op_floormod(a, b);
	case E_MIN: return op_min(a, b);
	case E_MAX: return op_max(a, b);
	case E_LT: return a < b;
	case E_LE: return a <= b;
	case E_EQ: return a == b;
	case E_NE: return a != b;
	case E_AND: return a != 0 && b != 0;
	case E_OR: return a != 0 || b != 0;
	default: return NAN;
	}
}

/* A math function of mathfns.def. */
static inline double mathfn(tir_mathfn f, double x)
{
	switch (f) {
	case FN_EXP: return exp(x);
	case FN_TANH: return tanh(x);
	case FN_ERF: return erf(x);
	case FN_SQRT: return sqrt(x);
	case FN_RSQRT: return 1.0 / sqrt(x);
	case FN_SIGMOID: return 1.0 / (1.0 + exp(-x));
	case FN_GELU: return x * 0.5 * (1.0 + erf(x / sqrt(2.0)));
	default: return NAN;
	}
}

/* ---- the machine (interp.c) ---------------------------------------------------------- */

typedef struct ibuf {
	double *data;              /* NULL: dead */
	int64_t elems;
	int64_t stride[TIR_MAX_DIMS];
	bool owned;
} ibuf;

typedef struct interp {
	const tir_program *p;
	ibuf *buf;                 /* by buffer id */
	int threads;
	pthread_mutex_t lock;      /* err, err_at */
	atomic_int failed;
	int64_t err_at;            /* the tile of err (the lowest that failed) */
	tir_error err;
} interp;

/* Records a failure at position `at` (a tile; 0 outside tiles); the lowest
 * position's message is kept, so the message does not depend on threads. */
void interp_fail(interp *I, int64_t at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The flat offset of idx in buffer b, or -1 (failure recorded at `at`, blk
 * named) when an index lies outside its dimension or b was inlined away. */
int64_t interp_offset(interp *I, const tir_block *blk, const tir_buffer *b,
		      const double *idx, int64_t at);

/* ---- the tree evaluator (interp.c) ---------------------------------------------------- */

typedef struct tev {
	interp *I;
	int64_t *vals;             /* by var id: loop and iterator values */
	const tir_block *b;        /* for messages */
	int64_t at;                /* for messages: the tile, or 0 */
} tev;

/* e's value at t->vals; a failure (an index outside its buffer) is
 * recorded in t->I and its value is NaN. */
double interp_eval(tev *t, const tir_expr *e);

/* ---- the nest evaluator (interp_nest.c) ------------------------------------------------ */

typedef struct nest nest;

/* The plan of `top`, a top-level loop of p, or NULL when it is not a nest
 * of one block with one loop per iterator bound one to one, or its body is
 * beyond the machine: the tree evaluator then runs it. */
nest *interp_nest_plan(const tir_program *p, const tir_stmt *top);
/* Runs the nest on I's buffers over I->threads threads; a failure is
 * recorded in I. */
void interp_nest_run(interp *I, const nest *ns);
void interp_nest_free(nest *ns);

#endif
