/*
 * codegen.h — code generators and the lowering they share.  Internal.
 *
 * A code generator is a table of functions (tir_codegen_backend); tir_codegen
 * picks the table by target kind, never by a name compared in callers.
 * lower.c does what every backend needs first: where each non-param buffer
 * is allocated, its compacted extents and strides, and the flattened offset
 * of each access.  c.c holds the C-family printer (expressions and blocks)
 * that the C backend and, with its own dialect, the CUDA backend use.
 */
#ifndef TIR_CODEGEN_H
#define TIR_CODEGEN_H

#include "../ir/ir.h"

typedef struct tir_codegen_backend {
	const char *name;
	tir_code *(*generate)(const tir_program *p, const tir_target *t,
			      tir_error *err);
} tir_codegen_backend;

extern const tir_codegen_backend tir_codegen_c;
extern const tir_codegen_backend tir_codegen_cuda;

/* The size of what NVRTC compiles for s (a kernel, or the program's root):
 * its blocks and intrinsic calls
 * counted once per copy the compiler makes of them, i.e. multiplied by the
 * extent of every enclosing loop the CUDA code unrolls (unroll, vectorized,
 * vthread loops, `unroll` annotations, loops under "auto_unroll_max_step"
 * small enough), thread-bound loops once.  Compile time grows faster than
 * it (tir_code.unrolled_blocks; validation bounds it). */
int64_t cuda_unrolled_blocks(const tir_stmt *s);

/* ---- lower.c: allocation sites, compaction, flattened offsets ------------- */

/* How one buffer is laid out in the generated code.  Params and global-scope
 * temps are full-size and dense (a temp's strides may still be padded by
 * storage_align).  Other scopes are compacted: allocated in the body of `lca`
 * (NULL: the function / kernel top level), covering for dimension d the
 * indices [base[d] + lo[d], base[d] + lo[d] + extent[d]), where base[d] is an
 * expression in the loop variables fixed at the allocation site (NULL: 0). */
typedef struct tir_alloc {
	const tir_buffer *buf;
	bool used;                  /* accessed by some live block */
	bool compact;               /* false: full-size (params, global temps) */
	const tir_stmt *lca;        /* allocation site; NULL: top level */
	tir_expr *base[TIR_MAX_DIMS];
	int64_t lo[TIR_MAX_DIMS];
	int64_t extent[TIR_MAX_DIMS];
	int64_t stride[TIR_MAX_DIMS]; /* in elements, storage_align applied */
	int64_t elems;              /* elements of one copy, padding included */
	/* software pipelining: the buffer of a copy stage of a loop annotated
	 * "software_pipeline" = S >= 2 has `ring` = S copies (S + 1 under
	 * warpgroup MMAs, lower_holds_wgmma), `slot` elements apart (a
	 * multiple of 128 bytes); 1 and elems otherwise */
	int ring;
	int64_t slot;
	int64_t bytes;              /* all copies */
} tir_alloc;

typedef struct tir_lowered {
	const tir_program *p;
	const tir_target *t;
	tir_arena arena;            /* expressions made by lowering */
	tir_alloc *alloc;           /* [p->nbufs], indexed by buffer id */
	/* every loop variable and block iterator ranged over its domain: the
	 * context for simplifying and bounding expressions of the program */
	tir_env env;
} tir_lowered;

/* Computes the allocation of every buffer of p (docs/ir-semantics.md,
 * "Allocation of a non-param buffer", scope relaxation included).  p must
 * stay alive and unchanged while out is used.  Returns 0, or -1 with a
 * message (out is then released).  Release with lower_free. */
int lower_program(const tir_program *p, const tir_target *t, tir_lowered *out,
		  tir_error *err);
void lower_free(tir_lowered *L);

/* The value of loop l's annotation `key`, or dflt when it has none. */
int64_t lower_ann(const tir_stmt *l, const char *key, int64_t dflt);
/* The stages of a software-pipelined loop: the value of its
 * "software_pipeline" annotation when it is a serial loop with at least one
 * copy stage, else 1.  A copy stage is a child of the loop whose blocks all
 * store to shared buffers allocated at the loop and written by no other
 * child (nor read by a child before it), and load only buffers that no
 * block under the loop writes: its
 * iteration k + S - 1 can run during iteration k of the rest
 * (codegen/cuda_pipeline.c with cp.async), into copy (k + S - 1) % S of its
 * buffers. */
int lower_pipeline_stages(const tir_lowered *L, const tir_stmt *loop);
/* Whether s holds a warpgroup MMA (wgmma).  A pipelined loop that does gets
 * S + 1 ring copies: its MMAs are left in flight for one iteration
 * (cuda_pipeline.c, cu_pipelined_loop), so the copy S - 1 iterations
 * ahead must not overwrite the one they read. */
bool lower_holds_wgmma(const tir_stmt *s);
/* Whether pipelined loop `loop` (lower_pipeline_stages >= 2) fetches its
 * copy stages with the tensor memory accelerator (annotation "tma" = 1):
 * a producer warpgroup of its own issues the copies, ring slots are handed
 * over by mbarriers (cuda_pipeline.c, cu_tma_loop), the ring has S copies. */
bool lower_tma_loop(const tir_lowered *L, const tir_stmt *loop);
/* The first such loop in s (a kernel), or NULL.  Its kernel launches one
 * warpgroup more along threadIdx.y (the producer) and holds 2 S mbarriers
 * (16 S bytes of shared memory) beside its buffers. */
const tir_stmt *lower_find_tma(const tir_lowered *L, const tir_stmt *s);
/* One copy stage block in the tensor memory accelerator's form: `dst`
 * (shared, allocated at the pipelined loop) receives, densely and in its
 * own order, the box of `src` (a buffer the kernel takes) whose first
 * element is at origin[] (expressions in the loop variables outside the
 * stage) and whose extents are ext[], both over src's dimensions. */
typedef struct lower_tma_copy {
	const tir_buffer *dst, *src;
	tir_expr *origin[TIR_MAX_DIMS];
	int64_t ext[TIR_MAX_DIMS];
} lower_tma_copy;
/* The copy of stage `child` of pipelined loop `loop` in that form: a chain
 * of serial loops down to one block storing dst[...] = src[...], every
 * index on either side an origin plus at most one loop of the stage (unit
 * stride), the loops in the same order on both sides (the box lands in
 * dst's row-major order), covering dst's dense allocation from its first
 * element, src's innermost dimension dst's, src's rows contiguous and its
 * other strides multiples of 16 bytes.  Returns 0, or -1 with a message
 * naming what breaks the form. */
int lower_tma_stage(tir_lowered *L, const tir_stmt *loop, const tir_stmt *child,
		    lower_tma_copy *out, tir_error *err);
bool lower_copy_stage(const tir_lowered *L, const tir_stmt *loop, const tir_stmt *child);

/* The flattened element offset of buf[idx[0..n)] in its allocation:
 * sum_d (idx[d] - base[d] - lo[d]) * stride[d], simplified.  idx may use
 * block iterators and loop variables; the result uses the same ones plus the
 * loop variables of the bases.  Lives in L's arena. */
tir_expr *lower_offset(tir_lowered *L, const tir_buffer *buf, int n,
		       tir_expr *const *idx);
/* expr_simplify over L->env, plus floordiv(x, c) * c + floormod(x, c) → x. */
tir_expr *lower_simplify(tir_lowered *L, tir_expr *e);
/* e with block b's iterators replaced by their bindings (loop variables). */
tir_expr *lower_bind(tir_lowered *L, const tir_block *b, tir_expr *e);
/* Whether a statement holds at least one block (empty loops emit nothing). */
bool lower_has_blocks(const tir_stmt *s);
/* A C identifier for a name: [A-Za-z0-9_] kept, anything else '_', never
 * starting with a digit.  Writes at most n bytes with the NUL. */
void lower_ident(char *dst, size_t n, const char *name);

/* ---- c.c: the C-family printer, shared by the C and CUDA backends ----------- */

/* What differs between C and CUDA C in expressions and blocks. */
typedef struct cg_dialect {
	const char *idx_type;                 /* loop / index variables */
	const char *storage[TIR_NDTYPES];     /* an element in memory */
	const char *value[TIR_NDTYPES];       /* a value in an expression */
	const char *load_cvt[TIR_NDTYPES];    /* storage -> value, or NULL */
	const char *store_cvt[TIR_NDTYPES];   /* value -> storage, or NULL */
	const char *round[TIR_NDTYPES];       /* value rounded to the dtype, or NULL */
	/* float expressions of +infinity, -infinity and a quiet NaN, which have
	 * no literal (a MAX / MIN reduction's identity is an infinity) */
	const char *inf, *ninf, *nan;
} cg_dialect;

/* The state of one generation: what is printed where, and the C names of
 * the buffers (by buffer id). */
typedef struct cg_ctx {
	tir_lowered *L;
	const cg_dialect *d;
	tir_buf *out;
	char (*bufname)[48];
	/* by buffer id, NULL for none: buffers laid out in 128-byte swizzled
	 * atoms (cuda_mma.c: the shared operands of wgmma), whose element
	 * offsets go through tir_swz128 */
	const bool *swizzled;
	/* a buffer whose loads print as an expression instead (NULL for
	 * none): a warpgroup STORE's epilogue reads the accumulator's register
	 * of the element it computes (cuda_mma.c) */
	const tir_buffer *reg_buf;
	const char *reg_expr;
	/* the common subexpressions of the block being printed (cg_block):
	 * an expression equal to cse[i], i < ncse, prints as tir_cse<i> */
	const tir_expr **cse;
	int ncse;
} cg_ctx;

/* Fills c->bufname with unique C identifiers for every buffer (malloc'd,
 * the caller frees c->bufname). */
void cg_name_buffers(cg_ctx *c);
/* A variable's C name: its sanitized name and id ("i0_7"). */
void cg_var(tir_buf *o, const tir_var *v);
void cg_expr(cg_ctx *c, const tir_expr *e);
/* The index of the element at offset off (lower_offset) of buffer b: off
 * itself, or its place in b's swizzled layout. */
void cg_index(cg_ctx *c, const tir_buffer *b, const tir_expr *off);
/* The prelude function that combines a value v with an accumulator acc
 * under reducer r in dtype t, printed fn(v, acc) — the accumulator second
 * (see store() in c.c: a NaN value is ignored, never kept) — or NULL for
 * SUM, printed acc + v. */
const char *cg_combine_fn(tir_reduce r, tir_dtype t);
/* Prints the identity of reducer r in dtype t (reduce_identity): 0, or the
 * dialect's infinity, or the lowest / highest integer. */
void cg_identity(cg_ctx *c, tir_reduce r, tir_dtype t);
/* "for (TYPE v = 0; v < extent; ++v) {\n" at the current position. */
void cg_for_open(cg_ctx *c, const char *type, const tir_var *v, int64_t extent);
/* Declares b's iterators as constants bound to the loop variables. */
void cg_block_iters(cg_ctx *c, const tir_block *b, int depth);
/* What a plain store of value v by block b converts to b's storage type:
 * v, or where v is a cast to that type (a float16 / bfloat16 rounding),
 * what it casts — the store's conversion rounds it once. */
const tir_expr *cg_stored_value(const cg_ctx *c, const tir_block *b, const tir_expr *v);
/* A whole block instance: iterators, predicate, init and store. */
void cg_block(cg_ctx *c, const tir_block *b, int depth);
/* The declaration of a compacted buffer as a local array, at depth. */
void cg_local_array(cg_ctx *c, const tir_alloc *a, const char *align_attr,
		    int depth);

/* ---- c_neon.c: AArch64's tensor intrinsics in the C backend ------------------ */

/* The prelude's part for AArch64 (c->L->t, printed to c->out):
 * <arm_neon.h> where a vectorized loop under root has a NEON form
 * (c_neon_vector_loop; a float16 one guarded by
 * __ARM_FEATURE_FP16_VECTOR_ARITHMETIC), and the functions of the CPU
 * intrinsics (sdot, smmla, fmla) that loops are tensorized with, each
 * guarded by its ACLE feature macro (#error naming the missing extension
 * otherwise); nothing for a program without either, nor for another
 * target. */
void c_neon_prelude(cg_ctx *c, const tir_stmt *root);
/* Prints vectorized loop l (at depth) as NEON float32x4_t code when t is an
 * AArch64 key and l is one float32 block of contiguous or invariant
 * accesses whose extent is a multiple of 4, or as float16x8_t code when
 * the key has fp16 and l is such a float16 block, a multiple of 8, whose
 * value rounds once (c_neon.c's top comment); returns 1 if it did, 0 if l
 * is the C backend's to print. */
int c_neon_vector_loop(cg_ctx *c, const tir_stmt *l, int depth);
/* Prints the call that replaces CPU-tensorized loop `loop` and its nest, at
 * depth.  Returns 0, or -1 with a message (the nest does not match its
 * intrinsic, an access's stride along the tile is not a constant). */
int c_neon_call(cg_ctx *c, const tir_stmt *loop, int depth, tir_error *err);

/* ---- nvrtc.c --------------------------------------------------------------- */

/* tir_nvrtc_compile, the compile itself, is public (tir.h). */

/* A candidate slower to compile than this is not worth tuning: the limit of
 * tir_nvrtc_compile's child, and of a builder process on one item. */
#define TIR_NVRTC_TIMEOUT_S 30

/* NVRTC in this process from now on (or again in a child per compile): for a
 * process that will never use CUDA nor fork one that does, and that watches
 * its own time (measure/batch.c's builder processes). */
void tir_nvrtc_in_process(bool on);

#endif
