/*
 * ir.h — libtir's internal IR: workloads, expressions, buffers, loops, blocks
 * and programs.  Shared by every folder of tuner/; not installed.
 *
 * A program is a tree: a root sequence of statements, where a statement is a
 * loop (For) with an ordered list of children, or a block.  A block is a leaf
 * that computes one buffer element per instance and carries the TensorIR
 * signature: iterators (domain and kind), their bindings to the enclosing
 * loops, an optional predicate, and the regions it reads and writes.
 *
 * Invariants every schedule primitive keeps:
 *  - Loop extents are constants and loops start at 0.  Loop variables appear
 *    only in block bindings and block predicates, so a loop transformation
 *    rewrites exactly those.
 *  - A block's store index and value refer to its iterator variables only.
 *  - Expressions are immutable and may be shared; everything lives in the
 *    program's arena and is freed with it.
 */
#ifndef TIR_IR_H
#define TIR_IR_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include "../tir.h"

/* ---- arena.c ------------------------------------------------------------ */

typedef struct tir_arena_chunk tir_arena_chunk;
typedef struct tir_arena {
	tir_arena_chunk *head;
	size_t used;                /* bytes handed out, for statistics */
} tir_arena;

void *arena_alloc(tir_arena *a, size_t n);       /* zeroed, 16-byte aligned */
char *arena_strdup(tir_arena *a, const char *s);
char *arena_printf(tir_arena *a, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void arena_free(tir_arena *a);
/* Fatal on allocation failure (the one condition libtir does not return). */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t m);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);

/* A growable string, for printers and code generators. */
typedef struct tir_buf {
	char *s;
	size_t len, cap;
} tir_buf;
void buf_puts(tir_buf *b, const char *s);
void buf_put(tir_buf *b, const void *p, size_t n);   /* n bytes, any bytes */
void buf_printf(tir_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void buf_indent(tir_buf *b, int depth);
char *buf_take(tir_buf *b);                      /* the string, malloc'd */

/* Writes all n bytes to fd, again after EINTR or a short write; 0, or -1
 * (errno) when the write fails (a pipe whose reader is gone). */
int tir_write_all(int fd, const void *p, size_t n);

/* ---- rand.c: random numbers ------------------------------------------- */

/* The next number of the stream *state (xorshift64*; any state, 0 too). */
uint64_t tir_rand(uint64_t *state);
/* The next number of the stream in [0, 1), 53 bits. */
double tir_rand_unit(uint64_t *state);
/* splitmix64: advances *state by a constant and returns it mixed, so
 * consecutive states give independent-looking numbers (seeds, inputs). */
uint64_t tir_splitmix(uint64_t *state);
/* A seed derived from a seed and two indices: distinct (a, b) give
 * independent streams. */
uint64_t tir_derive(uint64_t seed, uint64_t a, uint64_t b);

/* ---- dtypes (dtypes.def) ------------------------------------------------ */

typedef enum {
#define TIR_DTYPE(id, name, bytes, ctype, cudatype, isfloat) TIR_##id,
#include "dtypes.def"
#undef TIR_DTYPE
	TIR_NDTYPES
} tir_dtype;

const char *dtype_name(tir_dtype t);
int dtype_bytes(tir_dtype t);
bool dtype_is_float(tir_dtype t);
/* Returns -1 if the name is unknown. */
int dtype_parse(const char *name);

/* ---- workload.c --------------------------------------------------------- */

typedef enum {
#define TIR_OP(id, name, build) TIR_OP_##id,
#include "../ops.def"
#undef TIR_OP
	TIR_NOPS
} tir_op;

typedef enum {
#define TIR_EPILOGUE(id, name) TIR_EPI_##id,
#include "epilogues.def"
#undef TIR_EPILOGUE
	TIR_NEPILOGUES
} tir_epilogue;

typedef enum { TIR_LAYOUT_NN, TIR_LAYOUT_NT, TIR_LAYOUT_TN } tir_mm_layout;

typedef struct tir_graph tir_graph;

/* The parsed workload.  For convolutions the spatial dimensions are stored
 * outermost first in in[]/kernel[]/...: conv1d uses index 0 for W/S; conv2d
 * 0,1 for H,W / R,S; conv3d 0,1,2 for D,H,W / T,R,S. */
struct tir_workload {
	tir_op op;
	tir_dtype dtype, out_dtype;
	int nepilogue;
	tir_epilogue epilogue[8];
	/* matmul */
	int64_t batch;              /* 0: plain matmul (no batch axis) */
	int64_t M, N, K;
	tir_mm_layout mm_layout;
	/* convolutions: N batch, C in channels, K out channels */
	int nd;                     /* spatial dimensions: 1, 2 or 3 */
	int64_t n, c, k;
	int64_t in[3], kernel[3];
	int64_t stride[3], dilation[3];
	int64_t pad_lo[3], pad_hi[3];
	int64_t output_padding[3];  /* conv2d_transpose */
	int64_t out[3];             /* derived output extents */
	int64_t groups, multiplier;
	bool channels_last;
	/* op graph: the nodes (graph_parse.c), owned; NULL for an operator.
	 * dtype and out_dtype are then the first input's and the first
	 * output's, for information */
	tir_graph *graph;
	char *canonical;            /* malloc'd */
	char key[65];
};

/* The parse of a document, shared by workload.c and graph_parse.c.  Every
 * message starts with op ("conv2d", "graph: node \"mm\" (matmul)"). */
struct cJSON;
typedef struct wl_parse {
	const char *op;
	tir_limits lim;
	tir_error *err;
	const char *const *extra_keys;   /* keys allowed besides the op's (a node's
	                                    "name" and "args"); NULL: none */
	const char *default_dtype;       /* of "dtype"; NULL: float32 */
} wl_parse;

const char *wl_json_kind(const struct cJSON *v);   /* "a string", "a number", ... */
/* An integer / a size (positive, at most max_extent) with the fault named
 * "<op>: <what> must be ...". */
int wl_json_int(wl_parse *ps, const struct cJSON *v, const char *what, int64_t *out);
int wl_json_size(wl_parse *ps, const struct cJSON *v, const char *what, int64_t *out);
/* Every key of obj is in a, b or ps->extra_keys (b may be NULL), once. */
int wl_check_keys(wl_parse *ps, const struct cJSON *obj, const char *const *a,
		  const char *const *b);
/* The keys of operator w->op (not graph) in obj: its sizes, dtypes,
 * epilogue, limits. */
int wl_parse_operator(wl_parse *ps, const struct cJSON *obj, tir_workload *w);
/* A canonical object: key-value pairs sorted by key (the values are moved
 * into it). */
#define WL_MAX_FIELDS 32
typedef struct wl_kv {
	const char *key;
	struct cJSON *val;
} wl_kv;
struct cJSON *wl_object(wl_kv *f, int n);
/* The canonical fields of operator w (at most WL_MAX_FIELDS - 2); returns
 * their count. */
int wl_operator_fields(const tir_workload *w, wl_kv *f);

/* ---- expr.c: expressions ------------------------------------------------ */

typedef struct tir_var {
	const char *name;
	int id;                     /* unique within the program */
} tir_var;

typedef enum {
#define TIR_EXPR(id, name, arity) E_##id,
#include "exprs.def"
#undef TIR_EXPR
	E_NKINDS
} tir_expr_kind;

typedef enum {
#define TIR_MATHFN(id, name) FN_##id,
#include "mathfns.def"
#undef TIR_MATHFN
	FN_NFUNCS
} tir_mathfn;

typedef struct tir_buffer tir_buffer;
typedef struct tir_expr tir_expr;
struct tir_expr {
	tir_expr_kind kind;
	tir_dtype dtype;            /* index expressions are TIR_I64, tests TIR_BOOL */
	int64_t ival;               /* E_INT */
	double fval;                /* E_FLOAT */
	tir_var *var;               /* E_VAR */
	tir_expr *a, *b, *c;        /* operands; E_SELECT: c ? a : b -> see mk_select */
	tir_buffer *buf;            /* E_LOAD */
	int nidx;
	tir_expr **idx;             /* E_LOAD indices */
	tir_mathfn fn;              /* E_CALL */
};

const char *expr_kind_name(tir_expr_kind k);
const char *mathfn_name(tir_mathfn f);

/* Constructors fold constants and apply the obvious identities (x+0, x*1,
 * x*0, floordiv(x,1), ...); they never change a result. */
tir_expr *mk_int(tir_arena *a, int64_t v);
tir_expr *mk_float(tir_arena *a, double v, tir_dtype t);
tir_expr *mk_var(tir_arena *a, tir_var *v);
tir_expr *mk_bin(tir_arena *a, tir_expr_kind k, tir_expr *x, tir_expr *y);
tir_expr *mk_add(tir_arena *a, tir_expr *x, tir_expr *y);
tir_expr *mk_sub(tir_arena *a, tir_expr *x, tir_expr *y);
tir_expr *mk_mul(tir_arena *a, tir_expr *x, tir_expr *y);
tir_expr *mk_floordiv(tir_arena *a, tir_expr *x, tir_expr *y);
tir_expr *mk_floormod(tir_arena *a, tir_expr *x, tir_expr *y);
tir_expr *mk_and(tir_arena *a, tir_expr *x, tir_expr *y);   /* NULL is true */
tir_expr *mk_not(tir_arena *a, tir_expr *x);
tir_expr *mk_select(tir_arena *a, tir_expr *cond, tir_expr *then,
		    tir_expr *otherwise);
tir_expr *mk_cast(tir_arena *a, tir_dtype t, tir_expr *x);
tir_expr *mk_call(tir_arena *a, tir_mathfn f, tir_expr *x);
tir_expr *mk_load(tir_arena *a, tir_buffer *b, int n, tir_expr *const *idx);

/* Substitution: every E_VAR whose var id has map[id] != NULL is replaced. */
typedef struct tir_subst {
	int n;                      /* capacity: var ids below n */
	tir_expr **map;
} tir_subst;
tir_expr *expr_subst(tir_arena *a, tir_expr *e, const tir_subst *s);
/* Replaces loads of buffer `from` with loads of buffer `to`, same indices. */
tir_expr *expr_replace_buffer(tir_arena *a, tir_expr *e, tir_buffer *from,
			      tir_buffer *to);
/* Replaces every load of buffer `buf` (whatever its indices) by `with`. */
tir_expr *expr_replace_loads(tir_arena *a, tir_expr *e, const tir_buffer *buf,
			     tir_expr *with);
bool expr_uses_var(const tir_expr *e, const tir_var *v);
/* e without an outer cast to dtype t (e itself if it has none). */
const tir_expr *expr_uncast(const tir_expr *e, tir_dtype t);
bool expr_equal(const tir_expr *x, const tir_expr *y);
/* TVMScript-like text of an expression (printer.c); malloc'd. */
char *tir_expr_print(const tir_expr *e);
/* Visits every E_LOAD in evaluation order. */
void expr_visit_loads(tir_expr *e, void (*fn)(tir_expr *load, void *ctx),
		      void *ctx);

/* ---- analysis.c: affine forms and bounds --------------------------------- */

/* An integer expression as c0 + sum(coef[i] * var[i]).  Non-affine parts
 * (floordiv, floormod, min, max, select) are kept as opaque terms whose bounds
 * are computed by interval arithmetic. */
#define TIR_MAX_TERMS 24
typedef struct tir_affine {
	int64_t c0;
	int nterms;
	int64_t coef[TIR_MAX_TERMS];
	tir_var *var[TIR_MAX_TERMS];      /* NULL when the term is opaque */
	tir_expr *opaque[TIR_MAX_TERMS];  /* with var == NULL */
} tir_affine;

/* Range of each variable: the value of ranges[var->id] is [min, max]
 * (inclusive); a variable whose range is unset (min > max) stays symbolic. */
typedef struct tir_range {
	int64_t min, max;
} tir_range;

typedef struct tir_env {
	int n;
	tir_range *r;               /* indexed by var id */
} tir_env;

tir_env env_new(int nvars);            /* all symbolic */
void env_free(tir_env *e);
void env_set(tir_env *e, const tir_var *v, int64_t min, int64_t max);
void env_unset(tir_env *e, const tir_var *v);
bool env_has(const tir_env *e, const tir_var *v);

/* Returns false if e is not an integer expression it can split into terms. */
bool affine_of(const tir_expr *e, tir_affine *out);
tir_expr *affine_to_expr(tir_arena *a, const tir_affine *f);
/* Canonical simplification of an index expression: affine normal form,
 * constant folding, floordiv/floormod of provable ranges removed. */
tir_expr *expr_simplify(tir_arena *a, tir_expr *e, const tir_env *env);

/* Bounds of an integer expression over the ranged variables of env.  Returns
 * false if some variable it uses is symbolic or a term is unbounded. */
bool expr_bounds(const tir_expr *e, const tir_env *env, int64_t *min,
		 int64_t *max);

/* A one-dimensional region with a symbolic start:
 * [base + lo, base + hi] where base is affine in the symbolic variables of
 * env (loop variables kept fixed) and lo..hi are constants. */
typedef struct tir_interval {
	tir_expr *base;             /* NULL means 0 */
	int64_t lo, hi;             /* inclusive */
	bool full;                  /* could not be bounded: the whole dimension */
} tir_interval;

/* The interval an index expression covers when the ranged variables of env
 * vary and the others stay fixed. */
tir_interval interval_of(tir_arena *a, const tir_expr *e, const tir_env *env);
/* Union of two intervals; `full` if their bases differ by a non-constant. */
tir_interval interval_union(tir_arena *a, tir_interval x, tir_interval y);

/* ---- buffers, loops, blocks, programs: program.c -------------------------- */

typedef enum {
#define TIR_SCOPE(id, name) TIR_SCOPE_##id,
#include "scopes.def"
#undef TIR_SCOPE
	TIR_NSCOPES
} tir_scope;
const char *scope_name(tir_scope s);
int scope_parse(const char *name);              /* -1 if unknown */

typedef enum { BUF_INPUT, BUF_OUTPUT, BUF_TEMP } tir_buf_role;

#define TIR_MAX_DIMS 8
struct tir_buffer {
	const char *name;
	int id;
	tir_dtype dtype;
	int ndim;
	int64_t shape[TIR_MAX_DIMS];
	tir_scope scope;
	tir_buf_role role;
	/* storage_align: the stride of dimension `axis` is padded so that
	 * stride % factor == offset (factor 0: none). */
	int align_factor[TIR_MAX_DIMS], align_offset[TIR_MAX_DIMS];
	bool dead;                  /* removed by compute_inline */
};

typedef enum { ITER_SPATIAL, ITER_REDUCE } tir_iter_kind;

typedef struct tir_iter {
	tir_var *var;
	int64_t extent;             /* domain [0, extent) */
	tir_iter_kind kind;
	tir_expr *binding;          /* in loop variables */
} tir_iter;

/* A buffer region in block iterator variables: [min[d], min[d] + extent[d]). */
typedef struct tir_region {
	tir_buffer *buf;
	tir_expr *min[TIR_MAX_DIMS];
	int64_t extent[TIR_MAX_DIMS];
} tir_region;

typedef enum {
	REDUCE_NONE,               /* a plain block: store[idx] = value */
#define TIR_REDUCER(id, name, kind) REDUCE_##id,
#include "reducers.def"
#undef TIR_REDUCER
	REDUCE_NKINDS
} tir_reduce;

/* "sum", "max", "min" ("" for REDUCE_NONE). */
const char *reduce_name(tir_reduce r);
/* -1 for an unknown name. */
int reduce_parse(const char *name);
/* The expression kind that combines under r: E_ADD, E_MAX, E_MIN. */
tir_expr_kind reduce_combiner(tir_reduce r);
/* acc combined with v under r (mk_bin of reduce_combiner). */
tir_expr *reduce_combine(tir_arena *a, tir_reduce r, tir_expr *acc, tir_expr *v);
/* The identity of r in dtype t: 0 for SUM; for MAX the lowest value (-inf
 * for floats), for MIN the highest (+inf), so that combining with it leaves
 * any value unchanged. */
tir_expr *reduce_identity(tir_arena *a, tir_reduce r, tir_dtype t);
/* Whether e is a constant (E_FLOAT, E_INT, or an E_INT cast to an integer
 * dtype) equal to the identity of r in e's dtype: 0.0, -inf, the lowest
 * int32, ... */
bool reduce_is_identity(tir_reduce r, const tir_expr *e);

#define TIR_MAX_ITERS 16
#define TIR_MAX_ANN 8
typedef struct tir_ann {
	const char *key;
	int64_t value;
} tir_ann;

typedef struct tir_stmt tir_stmt;

typedef struct tir_block {
	const char *name;
	int niters;
	tir_iter iters[TIR_MAX_ITERS];
	tir_expr *predicate;        /* in loop variables; NULL means true */
	/* the computation: store[idx] = value, or with a reducer
	 * store[idx] = combine(store[idx], value) (reducers.def) after init on
	 * the first reduction step */
	tir_buffer *store;
	tir_expr *store_idx[TIR_MAX_DIMS];
	tir_expr *value;
	tir_reduce reduce;
	tir_expr *init;             /* NULL: no init (after decompose_reduction) */
	/* the signature's regions, derived from the body when it is set */
	int nreads;
	tir_region *reads;
	tir_region write;
	int nann;
	tir_ann ann[TIR_MAX_ANN];
	tir_stmt *stmt;             /* where it stands in the tree */
} tir_block;

typedef enum {
#define TIR_LOOP_KIND(id, name) LOOP_##id,
#include "loop_kinds.def"
#undef TIR_LOOP_KIND
	LOOP_NKINDS
} tir_loop_kind;

const char *loop_kind_name(tir_loop_kind k);
const char *thread_tag_name(tir_thread_tag t);
int thread_tag_parse(const char *name);         /* -1 if unknown */

typedef enum { STMT_SEQ, STMT_FOR, STMT_BLOCK } tir_stmt_kind;

struct tir_stmt {
	tir_stmt_kind kind;
	tir_stmt *parent;
	tir_program *p;             /* the owner, for allocation */
	/* STMT_SEQ and STMT_FOR: the children, in order */
	int nkids, capkids;
	tir_stmt **kids;
	/* STMT_FOR */
	tir_var *var;
	int64_t extent;
	tir_loop_kind loop_kind;
	tir_thread_tag tag;         /* with LOOP_THREAD */
	int nann;
	tir_ann ann[TIR_MAX_ANN];
	/* STMT_BLOCK */
	tir_block *block;
	bool dead;                  /* removed from the tree (an RV may still name it) */
};

struct tir_program {
	tir_arena arena;
	const tir_workload *w;      /* not owned */
	int nbufs, capbufs;
	tir_buffer **bufs;          /* params first: inputs in order, then output */
	int nparams;
	int nblocks, capblocks;
	tir_block **blocks;         /* every block ever created; dead ones have
	                               stmt == NULL */
	tir_stmt *root;             /* STMT_SEQ */
	int nvars, capvars;         /* var ids handed out */
	tir_var **vars;             /* every var, by id */
};

tir_program *program_new(const tir_workload *w);
tir_var *program_var(tir_program *p, const char *name);   /* unique name */
tir_buffer *program_buffer(tir_program *p, const char *name, tir_dtype t,
			   int ndim, const int64_t *shape, tir_scope scope,
			   tir_buf_role role);
/* A fresh name based on `base` not used by any buffer or block. */
const char *program_fresh_name(tir_program *p, const char *base);
tir_block *program_find_block(const tir_program *p, const char *name);

tir_stmt *stmt_new_for(tir_program *p, tir_var *v, int64_t extent);
tir_stmt *stmt_new_block(tir_program *p, tir_block *b);
tir_stmt *stmt_new_seq(tir_program *p);
void stmt_append(tir_stmt *parent, tir_stmt *kid);
void stmt_insert(tir_stmt *parent, int pos, tir_stmt *kid);
void stmt_remove(tir_stmt *kid);                /* from its parent */
int stmt_index(const tir_stmt *kid);            /* position in its parent */
/* The loops enclosing s, outermost first; returns the count. */
int stmt_loops(const tir_stmt *s, tir_stmt **out, int max);
bool stmt_is_ancestor(const tir_stmt *anc, const tir_stmt *s);
/* Program order: -1 if a runs before b, 1 if after, 0 if one holds the other. */
int stmt_order(const tir_stmt *a, const tir_stmt *b);
/* Calls fn for every block under s in program order. */
void stmt_visit_blocks(tir_stmt *s, void (*fn)(tir_block *b, void *ctx),
		       void *ctx);
/* The blocks under s, in order; returns the count (fills at most max). */
int stmt_blocks(tir_stmt *s, tir_block **out, int max);

/* Builds a new block.  store_idx and value refer to the iterators' vars.
 * Regions are derived with block_update_regions. */
tir_block *block_new(tir_program *p, const char *name);
/* Appends an iterator to b: 0, or -1 (nothing added) when b holds
 * TIR_MAX_ITERS already.  Callers that add one iterator per dimension of a
 * buffer (at most TIR_MAX_DIMS, plus one) or per iterator of another block
 * cannot reach the limit; others check. */
int block_add_iter(tir_block *b, tir_var *v, int64_t extent,
		   tir_iter_kind kind, tir_expr *binding);
_Static_assert(TIR_MAX_DIMS + 1 < TIR_MAX_ITERS, "a block holds an iterator per dimension");
/* Recomputes reads/write from store, store_idx and value: each access of the
 * body, bounded over the iterator domains. */
void block_update_regions(tir_program *p, tir_block *b);
bool block_is_reduction(const tir_block *b);
/* Whether b reads buffer buf (one of its read regions is of buf). */
bool block_reads(const tir_block *b, const tir_buffer *buf);
/* The iterator whose var is v, or -1. */
int block_iter_of(const tir_block *b, const tir_var *v);
/* Whether an access indexes each of its n dimensions with one iterator
 * variable of b, each at most once; fills dim_iter[d] (if not NULL) with the
 * iterator of dimension d. */
bool block_plain_access(const tir_block *b, int n, tir_expr *const *idx, int *dim_iter);

/* A loop nest with one loop per iterator of b, bound one to one, wrapping b;
 * returns the outermost loop.  Used by compute definitions. */
tir_stmt *program_nest(tir_program *p, tir_block *b, const char *const *loop_names);

/* ---- intrin.c: tensor intrinsics (intrins.def) ----------------------------- */

typedef enum { INTRIN_FILL, INTRIN_LOAD_A, INTRIN_LOAD_B, INTRIN_MMA, INTRIN_STORE } tir_intrin_kind;

/* Who calls an intrinsic together: a warp (32 threads, WMMA), a
 * warpgroup (4 consecutive warps, 128 threads: Hopper's wgmma), or one CPU
 * thread (AArch64's sdot / smmla, operands in memory). */
typedef enum { INTRIN_WARP, INTRIN_WARPGROUP, INTRIN_CPU } tir_intrin_unit;

typedef struct tir_intrin {
	const char *name;
	tir_intrin_kind kind;
	int m, n, k;                /* the tile: acc m x n, a m x k, b k x n */
	tir_dtype in, acc;          /* operand and accumulator dtypes */
	tir_intrin_unit unit;
	const char *feature;        /* CPU: the key feature it needs ("dotprod") */
} tir_intrin;

extern const tir_intrin tir_intrins[];
extern const int tir_nintrins;
const tir_intrin *intrin_find(const char *name);        /* NULL if unknown */

/* tensorize leaves this annotation on the loop, its value the intrinsic's
 * index in tir_intrins; intrin_of_loop reads it back (NULL: none). */
#define TIR_TENSORIZE_ANN "tensorize"
const tir_intrin *intrin_of_loop(const tir_stmt *l);
/* The threads that call intrinsic `in` together, its lanes along
 * threadIdx.x: 32 (a warp) or 128 (a warpgroup); 1 for a CPU intrinsic.  A
 * kernel launches at least that many along threadIdx.x, bound loops or not. */
int64_t intrin_lanes(const tir_intrin *in);
/* Whether target t can run intrinsic `in`: a CPU intrinsic needs a CPU
 * target whose key has its feature ("sdot_4x4x4_i8_i32 needs +dotprod;
 * target cpu:aarch64+neon has not"), a warp or warpgroup one a CUDA target
 * (its compute capability is verify/tensor.c's).  Returns 0, or -1 with
 * that message, prefixed by `who` ("tensorize", "codegen"). */
int intrin_check_target(const tir_intrin *in, const tir_target *t, const char *who,
			const char *loop, tir_error *err);

/* One access of a matched block: its buffer, its indices in loop variables
 * (block iterators replaced by their bindings), and the dimensions that hold
 * the tile's rows and columns. */
typedef struct tir_intrin_access {
	const tir_buffer *buf;
	tir_expr *idx[TIR_MAX_DIMS];
	int row, col;
} tir_intrin_access;

/* A loop matched against an intrinsic's semantics: the loop and the loops
 * under it (outermost first), the block, the store (dst) and the loads
 * (src[0]: LOAD and STORE's source, MMA's a; src[1]: MMA's b).  epilogue:
 * a warpgroup STORE whose value is not the accumulator alone but a
 * pointwise function of it (and of memory), dst[i, j] = f(acc[i, j], ...):
 * codegen evaluates the block's value per accumulator register. */
typedef struct tir_intrin_match {
	const tir_intrin *in;
	const tir_block *b;
	int nloops;
	const tir_stmt *loops[3];
	tir_intrin_access dst, src[2];
	int nsrc;
	bool epilogue;
} tir_intrin_match;

/* Whether the loop nest under `loop` (itself included) computes exactly the
 * semantics of `in` (intrins.def): a perfect nest of the intrinsic's extents
 * over one unpredicated block, whose store and loads have the scopes and
 * dtypes of the intrinsic and index the tile with unit coefficients, one loop
 * per dimension, the fragment tiles in their buffers' last two dimensions —
 * or, for a warpgroup STORE, an epilogue (see tir_intrin_match): the value
 * any expression whose fragment loads are all the accumulator at the tile,
 * stored to memory of any dtype.
 * Matching is by what the block computes, never by names.  Expressions of m
 * live in arena a.  Returns 0, or -1 with the first mismatch. */
int intrin_match(tir_arena *a, const tir_program *p, const tir_stmt *loop,
		 const tir_intrin *in, tir_intrin_match *m, tir_error *err);
/* Whether a scope is an opaque register tile that only tensor intrinsics
 * touch: a warp's WMMA fragments (wmma.*) or a warpgroup's wgmma
 * accumulator (wgmma.accumulator). */
bool scope_is_fragment(tir_scope s);

/* ---- graph_parse.c: graph workloads ----------------------------------------- */

typedef enum {
	GOP_INPUT,                  /* a graph input, not a node */
#define TIR_GOP(id, name, kind, nargs) GOP_##id,
#include "../graph_ops.def"
#undef TIR_GOP
	GOP_HEAVY,                  /* an operator of ops.def: see heavy->op */
	GOP_NOPS
} tir_gop;

typedef enum { GK_INPUT, GK_POINTWISE, GK_REDUCTION, GK_VIEW, GK_HEAVY } tir_gkind;

tir_gkind gop_kind(tir_gop op);
const char *gop_name(tir_gop op);         /* "add", ...; "input", "heavy" */

#define TIR_GRAPH_MAX_ARGS 4        /* a heavy node: two operands, bias, residual */

/* A value of the graph: an input or a node's result.  A rank-0 value
 * (ndim 0) is a scalar tensor. */
typedef struct tir_gvalue {
	char *name;                 /* malloc'd */
	tir_gop op;
	tir_dtype dtype;            /* float32 or float16 (a heavy node: out_dtype) */
	int ndim;
	int64_t shape[TIR_MAX_DIMS];
	int nargs;
	int arg[TIR_GRAPH_MAX_ARGS];     /* value indices; -1: the number num[i] */
	double num[TIR_GRAPH_MAX_ARGS];
	/* reductions: the argument's dims reduced (bit d), and keepdim */
	unsigned rdims;
	bool keepdim;
	int perm[TIR_MAX_DIMS];     /* permute: result dim d is argument dim perm[d] */
	int sdim;                   /* slice: along argument dim sdim, */
	int64_t start, step;        /* elements start, start + step, ... (normalised) */
	int64_t end;                /* clamped, for the canonical form */
	tir_workload *heavy;        /* GOP_HEAVY: the operator (no canonical, no key) */
	int uses;                   /* arguments of live nodes that name it */
	bool live;                  /* an output depends on it */
	int output;                 /* position in outputs, or -1 */
} tir_gvalue;

struct tir_graph {
	int ninputs, nnodes;
	tir_gvalue *v;              /* inputs (sorted by name), then the nodes in order */
	int noutputs;
	int *outputs;               /* value indices, in the document's order */
	double flops;               /* of the live nodes (tir_workload_flops) */
};

/* Parses the keys of a graph document into w->graph (freed with the
 * workload); every fault names the input, node or output. */
int graph_parse(wl_parse *ps, const struct cJSON *doc, tir_workload *w);
/* The canonical object of a graph (cJSON_Delete it). */
struct cJSON *graph_canonical(const tir_graph *g);
void graph_free(tir_graph *g);
/* The nodes a fusion plan's kernel computes (graph.c): its members (per
 * node) and every node they read that realize (per node) inlines, and
 * theirs, into nodes[0 .. g->nnodes). */
void graph_kernel_nodes(const tir_graph *g, const unsigned char *realize,
			const unsigned char *members, unsigned char *nodes);

/* ---- compute.c: operators as compute definitions ----------------------------- */

/* The type of a tensor: dtype and shape. */
typedef struct tir_tensor_type {
	tir_dtype dtype;
	int ndim;
	int64_t shape[TIR_MAX_DIMS];
} tir_tensor_type;

/* An operator's operands in argument order (X/A, W/B, then bias and
 * residual in the order its epilogue lists them) and its output, as
 * compute.c's top comment lays them out; returns the operand count (at most
 * TIR_MAX_OPERANDS).  w is an operator, not a graph. */
#define TIR_MAX_OPERANDS 4
int compute_signature(const tir_workload *w, tir_tensor_type *ops, tir_tensor_type *out);

/* Operand k's value at index idx (k's rank of index expressions in the
 * block's iterators), any floating dtype: the compute casts it to the
 * operand's. */
typedef tir_expr *(*compute_loader)(void *ctx, int k, tir_expr *const *idx);

/* How an operator is built into a larger program. */
typedef struct compute_io {
	const char *block;          /* the compute block's name; its pad and
	                               epilogue stages are "<block>_pad",
	                               "<block>_epilogue" */
	const char *prefix;         /* temporaries: "<prefix>_acc", "<prefix>_pad" */
	compute_loader load;
	void *ctx;
	tir_buffer *out;            /* the output, of compute_signature's type */
} compute_io;

/* Appends the stages of operator w to the root of p, reading its operands
 * through io->load and writing io->out (temporaries are BUF_TEMP). */
void compute_into(tir_program *p, const tir_workload *w, const compute_io *io);
/* ---- interp.c: a program run, in double precision -------------------------- */

/* How interp_run runs a program, and what it did. */
typedef struct interp_opts {
	int threads;               /* 0: one per core */
	bool tree;                 /* every block by the tree evaluator (tests) */
	/* filled in: the top-level statements each evaluator ran */
	int nest_blocks, tree_blocks;
} interp_opts;

/* Runs p as docs/ir-semantics.md defines it, in double precision (interp.c
 * says how each dtype's values are treated).  params[i] holds parameter i
 * (p->bufs[i], i < p->nparams) as doubles, row-major in its shape: inputs
 * are read, outputs written (and read where the program reads them: a
 * reduction without init starts from what they hold).  Every other buffer
 * is allocated here, whole, and freed.  Threads are started and joined
 * inside; the result does not depend on their number.  Returns 0, or -1
 * with a message naming the block and the access at fault (an index outside
 * its buffer, a buffer inlined away) or the allocation that failed.  o may
 * be NULL. */
int interp_run(const tir_program *p, double *const *params, interp_opts *o,
	       tir_error *err);

#endif
