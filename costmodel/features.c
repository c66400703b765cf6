/*
 * features.c — a fixed-length feature vector per candidate program.
 *
 * The features describe what the hardware will see once the program is
 * lowered: arithmetic, bytes moved at each memory level and how they are
 * reused, strides of the innermost and thread-bound loops (vectorization and
 * coalescing), parallelism, thread-block shape, shared memory, registers,
 * occupancy and waves; and an analytical estimate of the bytes that reach
 * each cache level, from the footprint of every block at every loop level,
 * with the roofline it implies.  They are computed from the scheduled program and the
 * allocations of codegen/lower.c, never from generated source, and in one walk
 * over the blocks: about 36 us per CPU candidate of GMM-1 and 250-280 us per
 * H200 candidate of the suite on this project's 2-core VM, lowering included
 * (`bench/costmodel_eval --records FILE` prints it).
 *
 * All counts are log2(1 + x) so that the ranker sees sizes spanning many
 * orders of magnitude on one scale; fractions are in [0, 1].  What grows with
 * the problem — bytes loaded, stored and touched, the main block's instances,
 * the estimated cache traffic — is counted per operation of the whole
 * program (log2 of bytes per op, "_per_op"), so that one tiling of a small
 * and of a large workload look alike: the model is shared by every workload
 * of a target, and a new workload is ranked by what was learnt on others.
 * (Held out by workload, `bench/costmodel_eval --records`: pairwise 0.702 ->
 * 0.756 on this VM's CPU records; on four sets of H200 records -0.004 ..
 * +0.017, about neutral; within a workload unchanged;
 * bench/results/archive/2026-11-30-costmodel-per-op.txt.)  Only the total flops and
 * the parallel extents (cores, SMs and waves depend on them) stay absolute.
 * The table below names every feature; its index is its position.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "costmodel.h"
#include "ir/ir.h"
#include "codegen/codegen.h"
#include "sketch/sketch.h"

/* Feature indices.  Scope-aggregated features come in groups of SC_N per
 * memory level (global, shared, local); the main block's accesses in groups
 * of AC_N for up to MAIN_ACC accesses (its loads in order, then its store). */
enum {
	F_FLOPS,            /* total floating-point (or integer MAC) ops */
	F_MAIN_INSTANCES,   /* executed instances of the main (reduction) block, per op */
	F_WASTE,            /* instances / iteration domain: >1 when tiles overshoot */
	F_BLOCKS,           /* live blocks */
	F_KERNELS,          /* top-level loop nests (GPU kernels) */
	F_PARALLEL,         /* product of parallel loop extents (CPU) */
	F_PAR_BALANCE,      /* parallel work / (cores * rounds): load balance */
	F_VECTOR_BYTES,     /* bytes per vectorized innermost loop (max) */
	F_VECTOR_FRAC,      /* fraction of ops under a vectorized loop */
	F_UNROLL,           /* product of unrolled extents around the main block */
	F_UNROLL_ANN,       /* largest "unroll" annotation */
	F_GRID,             /* thread blocks (product of blockIdx extents) */
	F_THREADS,          /* threads per block */
	F_VTHREADS,         /* virtual threads */
	F_SHARED,           /* shared memory bytes per thread block */
	F_LOCAL,            /* local (register) bytes per thread */
	F_OCCUPANCY,        /* resident threads / 2048 per SM, estimated */
	F_WAVES,            /* thread blocks / (SMs * resident blocks) */
	F_WAVE_EFF,         /* useful fraction of the last wave */
	F_INTENSITY,        /* ops / unique global bytes */
	F_SYNC_LOOPS,       /* serial loops holding shared-memory stages */
	F_CROSS_THREAD,     /* 1 if a reduction is bound across threads */
	F_SCOPES,           /* start of the per-scope groups */
};
/* load, store and unique bytes per op (per_op); reuse: (loads + stores) /
 * unique; the rest fractions of the scope's accesses */
enum { SC_LOAD, SC_STORE, SC_UNIQUE, SC_REUSE, SC_STRIDE0, SC_STRIDE1, SC_STRIDEN,
       SC_COALESCED, SC_N };
#define NSCOPES 3
enum { F_MAIN = F_SCOPES + NSCOPES * SC_N };
/* unique bytes per op (per_op), reuse, strides of the innermost and the
 * thread-bound (CUDA) or vectorized (CPU) loop; the bytes of the 64-byte
 * cache lines the access brings into the first-level cache (per_op: its
 * part of traffic_l1 below, with each row of its footprint rounded up to
 * whole lines, so short or strided rows count in full); its reuse distance: the bytes
 * the whole block touches between two uses of one element, under the
 * innermost loop the access does not depend on (the loop that carries the
 * reuse; 0 when every loop moves it), and that loop's extent (how many times
 * an element is used there) */
enum { AC_UNIQUE, AC_REUSE, AC_INNER_STRIDE, AC_THREAD_STRIDE, AC_LINES, AC_REUSE_DIST,
       AC_REUSE_COUNT, AC_N };
#define MAIN_ACC 4
/* main_depth: loops around the main block; problem: the parameters' bytes
 * per op */
/* loop_iters: executed iterations of the main block's loops that remain
 * loops in the compiled code (not vectorized, unrolled, or of extent 1; a
 * loop under an "unroll" annotation at least its extent counts as unrolled),
 * per op: the loop overhead; body_ops: the ops of one iteration of the
 * innermost of them (log2): the straight-line code the compiler schedules */
enum { F_MAIN_DEPTH = F_MAIN + MAIN_ACC * AC_N, F_PROBLEM, F_LOOP_ITERS, F_BODY_OPS,
       F_TRAFFIC };
/* Estimated traffic into a cache of each capacity in cache_bytes[] (log2
 * bytes per op), then the register-tile features and the roofline estimate
 * (see traffic() below). */
#define NCACHES 4
enum { F_ACCUM = F_TRAFFIC + NCACHES, F_MICRO_BYTES, F_ROOFLINE,
       /* tensor cores and pipelining (CUDA):
	*  tensor_frac     fraction of ops in blocks under a tensorized MMA loop
	*  mma_per_frag    log2(1 + MMAs per fragment loaded): a warp's
	*                  register-tile reuse (16 x 16 x 16 products per
	*                  16 x 16 operand tiles loaded from shared memory)
	*  pipeline        stages of the deepest software-pipelined loop (1: none)
	*  wgmma_frac      fraction of ops under a warpgroup MMA (wgmma: twice a
	*                  warp MMA's throughput, operands read from shared
	*                  memory by the tensor cores themselves)
	*  tma             1 if a pipelined loop's copies come from the tensor
	*                  memory accelerator, issued by a producer warpgroup
	*                  (lower_tma_loop; its copy blocks count above as if
	*                  every thread ran their loops) */
       F_TENSOR_FRAC, F_MMA_PER_FRAG, F_PIPELINE, F_WGMMA_FRAC, F_TMA,
       /* arithmetic by kind (kinds_of), executed counts per op of the whole
	* program (per_op): the blocks' values, predicates and reduction
	* updates, loads' indices excluded */
       F_KINDS,
       /* floordiv/floormod nodes of the accesses' offsets (bound to the
	* loops and simplified, as codegen prints them) that depend on the
	* innermost loop, executed counts per op: address arithmetic a
	* compiler cannot strength-reduce out of the inner loop (a grouped
	* convolution's channel tiled across groups) */
       F_IDX_DIVMOD = F_KINDS + 9,
       /* reductions (graph programs: rows of a softmax or a layernorm):
	*  red_sum_frac    fraction of the executed reduction updates that sum
	*  red_minmax_frac the same, max or min
	*  row_blocks      reduction blocks without data reuse (row reductions:
	*                  sketch_has_reuse false), log2(1 + n)
	*  row_bytes       bytes one row of such a block reads (its reduction
	*                  domain times its inputs' element bytes), the largest,
	*                  log2(1 + bytes)
	*  row_held        fraction of the row reductions' executed loads that
	*                  read a shared or local buffer: a row held on chip
	*                  (Inductor's persistent reduction) rather than reread
	*                  from global memory
	*  row_threads     threads that reduce one row together (the threadIdx
	*                  loops a row reduction's reduction iterators are bound
	*                  to), the most, log2(1 + n) */
       F_RED_SUM, F_RED_MINMAX, F_ROW_BLOCKS, F_ROW_BYTES, F_ROW_HELD, F_ROW_THREADS,
       F_END };

/* The kinds counted from F_KINDS on: float add/sub, mul, div, min/max;
 * calls (transcendental); compares and logic (the guards of an inlined
 * pad, a block's predicate over a tile that overshoots); selects
 * (if_then_else); casts; index-typed arithmetic in a value (outside loads'
 * indices). */
enum { K_ADD, K_MUL, K_DIV, K_MINMAX, K_CALL, K_CMP, K_SELECT, K_CAST, K_INT, K_N };
_Static_assert(F_IDX_DIVMOD == F_KINDS + K_N, "one feature per kind");

_Static_assert(F_END == CM_NFEATURES, "feature table and CM_NFEATURES differ");

const char *const cm_feature_names[CM_NFEATURES] = {
	"flops", "main_instances_per_op", "waste", "blocks", "kernels", "parallel",
	"par_balance", "vector_bytes", "vector_frac", "unroll", "unroll_ann",
	"grid", "threads", "vthreads", "shared_bytes", "local_bytes", "occupancy",
	"waves", "wave_eff", "intensity", "sync_loops", "cross_thread",
#define SC(s) s "_load_per_op", s "_store_per_op", s "_unique_per_op", s "_reuse", s "_stride0", \
	s "_stride1", s "_stride_n", s "_coalesced"
	SC("global"), SC("shared"), SC("local"),
#undef SC
#define AC(i) "acc" #i "_unique_per_op", "acc" #i "_reuse", "acc" #i "_inner_stride", \
	"acc" #i "_thread_stride", "acc" #i "_lines_per_op", "acc" #i "_reuse_dist", \
	"acc" #i "_reuse_count"
	AC(0), AC(1), AC(2), AC(3),
#undef AC
	"main_depth", "problem_bytes_per_op", "loop_iters_per_op", "body_ops",
	"traffic_reg_per_op", "traffic_l1_per_op", "traffic_l2_per_op", "traffic_llc_per_op",
	"accumulators", "micro_bytes_per_op", "roofline_cycles_per_op",
	"tensor_frac", "mma_per_frag", "pipeline", "wgmma_frac", "tma",
	"op_add_per_op", "op_mul_per_op", "op_div_per_op", "op_minmax_per_op",
	"op_call_per_op", "op_cmp_per_op", "op_select_per_op", "op_cast_per_op",
	"op_int_per_op", "idx_divmod_inner_per_op",
	"red_sum_frac", "red_minmax_frac", "row_blocks", "row_bytes", "row_held", "row_threads",
};

static float lg(double x) { return (float)log2(1.0 + (x > 0 ? x : 0)); }

/* log2 of x per op of a program of `flops` ops (about -30 for none). */
static float per_op(double x, double flops)
{
	return (float)log2(1e-9 + (x > 0 ? x : 0) / (flops > 0 ? flops : 1));
}

typedef struct fctx {
	tir_lowered L;
	const tir_target *t;
	float *f;
	double flops, vec_flops;
	double scope_cnt[NSCOPES];            /* accesses per scope, for fractions */
	double scope_raw[NSCOPES][SC_N];
	double global_unique;
	double traffic[NCACHES];              /* bytes, summed over blocks */
	double par_eff;                       /* cores kept busy by the main block */
	double tc_flops;                      /* ops under tensorized MMA loops */
	double wg_flops;                      /* of which under warpgroup MMAs */
	double mma, frag_loads;               /* 16x16x16 products, 16x16 tiles loaded */
	double main_instances;
	double kinds[K_N];                    /* executed operations by kind */
	double idx_divmod;                    /* executed inner-loop div/mod of offsets */
	double main_unique[MAIN_ACC];         /* bytes, per main-block access */
	double main_lines[MAIN_ACC];          /* line bytes into L1, per main-block access */
	double loop_iters;                    /* main block's executed loop iterations */
	const tir_block *main;
	double red_updates[3];                /* executed updates: all, sum, max or min */
	double row_loads, row_held;           /* row reductions' loads, of which on chip */
	double row_blocks, row_bytes, row_threads;
} fctx;

static int scope_group(const tir_buffer *b)
{
	switch (b->scope) {
	case TIR_SCOPE_GLOBAL: return 0;
	case TIR_SCOPE_SHARED: return 1;
	default: return 2;
	}
}

/* Arithmetic operations in one evaluation of e. */
static double ops_of(const tir_expr *e)
{
	if (!e || e->kind == E_LOAD || e->kind == E_INT || e->kind == E_FLOAT || e->kind == E_VAR)
		return 0;
	double n = ops_of(e->a) + ops_of(e->b) + ops_of(e->c);
	switch (e->kind) {
	case E_ADD: case E_SUB: case E_MUL: case E_DIV: case E_MIN: case E_MAX:
		return n + (e->dtype == TIR_I64 || e->dtype == TIR_BOOL ? 0 : 1);
	case E_CALL:
		return n + 8;   /* transcendental: several instructions */
	default:
		return n;
	}
}

/* Adds the operations of one evaluation of e by kind to k[K_N] (loads'
 * indices excluded). */
static void kinds_of(const tir_expr *e, double *k)
{
	if (!e || e->kind == E_LOAD || e->kind == E_INT || e->kind == E_FLOAT || e->kind == E_VAR)
		return;
	kinds_of(e->a, k);
	kinds_of(e->b, k);
	kinds_of(e->c, k);
	bool idx = e->dtype == TIR_I64 || e->dtype == TIR_BOOL;
	switch (e->kind) {
	case E_ADD: case E_SUB: k[idx ? K_INT : K_ADD]++; break;
	case E_MUL: k[idx ? K_INT : K_MUL]++; break;
	case E_DIV: k[idx ? K_INT : K_DIV]++; break;
	case E_MIN: case E_MAX: k[idx ? K_INT : K_MINMAX]++; break;
	case E_FLOORDIV: case E_FLOORMOD: k[K_INT]++; break;
	case E_LT: case E_LE: case E_EQ: case E_NE: case E_AND: case E_OR: case E_NOT:
		k[K_CMP]++;
		break;
	case E_SELECT: k[K_SELECT]++; break;
	case E_CAST: k[K_CAST]++; break;
	case E_CALL: k[K_CALL]++; break;
	default: break;
	}
}

/* floordiv/floormod nodes of e whose dividend uses v. */
static int divmods_using(const tir_expr *e, const tir_var *v)
{
	if (!e || !v || e->kind == E_INT || e->kind == E_FLOAT || e->kind == E_VAR)
		return 0;
	int n = divmods_using(e->a, v) + divmods_using(e->b, v) + divmods_using(e->c, v);
	if ((e->kind == E_FLOORDIV || e->kind == E_FLOORMOD) && expr_uses_var(e->a, v))
		n++;
	return n;
}

/* |coefficient| of loop variable v in the flattened offset (0 if absent,
 * -1 if the offset is not affine in it). */
static double stride_of(const tir_expr *off, const tir_var *v)
{
	if (!v)
		return 0;
	tir_affine a;
	if (!affine_of(off, &a))
		return -1;
	for (int i = 0; i < a.nterms; i++) {
		if (a.var[i] == v)
			return (double)llabs(a.coef[i]);
		if (!a.var[i] && expr_uses_var(a.opaque[i], v))
			return -1;
	}
	return 0;
}

typedef struct loopinfo {
	int n;
	tir_stmt *l[64];
	double instances;          /* product of all extents */
	const tir_var *inner;      /* innermost loop variable */
	const tir_var *thread_x;   /* the innermost threadIdx.x loop */
	const tir_var *vec;        /* the vectorized loop */
	double unroll;
	int64_t unroll_ann;
	bool vectorized;
	const tir_intrin *intrin;  /* the tensor intrinsic of an enclosing loop */
} loopinfo;

static void loops_of(const tir_block *b, loopinfo *li)
{
	memset(li, 0, sizeof *li);
	li->n = stmt_loops(b->stmt, li->l, 64);
	if (li->n > 64)
		li->n = 64;
	li->instances = 1;
	li->unroll = 1;
	for (int i = 0; i < li->n; i++) {
		const tir_stmt *l = li->l[i];
		li->instances *= (double)l->extent;
		if (l->loop_kind == LOOP_THREAD && l->tag == TIR_THREAD_X)
			li->thread_x = l->var;
		if (l->loop_kind == LOOP_VECTORIZED) {
			li->vec = l->var;
			li->vectorized = true;
		}
		if (l->loop_kind == LOOP_UNROLLED)
			li->unroll *= (double)l->extent;
		for (int k = 0; k < l->nann; k++)
			if (!strcmp(l->ann[k].key, "unroll") && l->ann[k].value > li->unroll_ann)
				li->unroll_ann = l->ann[k].value;
		if (!li->intrin)
			li->intrin = intrin_of_loop(l);
	}
	if (li->n)
		li->inner = li->l[li->n - 1]->var;
}

/* One access of block b to buf at idx (iterator expressions). */
static void access(fctx *c, const tir_block *b, const loopinfo *li, const tir_buffer *buf,
		   tir_expr *const *idx, bool store, int main_slot)
{
	tir_lowered *L = &c->L;
	int s = scope_group(buf);
	double bytes = (double)dtype_bytes(buf->dtype);
	tir_expr *off = lower_bind(L, b, lower_offset(L, buf, buf->ndim, idx));
	off = lower_simplify(L, off);
	/* the hull of what the access touches over the whole nest */
	double unique = bytes;
	for (int d = 0; d < buf->ndim; d++) {
		int64_t lo, hi;
		tir_expr *e = lower_bind(L, b, idx[d]);
		double ext = (double)buf->shape[d];
		if (expr_bounds(e, &L->env, &lo, &hi)) {
			if (lo < 0) lo = 0;
			if (hi > buf->shape[d] - 1) hi = buf->shape[d] - 1;
			ext = hi >= lo ? (double)(hi - lo + 1) : 1;
		}
		unique *= ext;
	}
	double total = li->instances * bytes;
	c->idx_divmod += li->instances * divmods_using(off, li->inner);
	double inner = stride_of(off, li->inner);
	const tir_var *tv = c->t->kind == TIR_TARGET_CUDA ? li->thread_x : li->vec;
	double tstride = stride_of(off, tv);
	double *raw = c->scope_raw[s];
	raw[store ? SC_STORE : SC_LOAD] += total;
	raw[SC_UNIQUE] += unique;
	c->scope_cnt[s] += 1;
	raw[inner == 0 ? SC_STRIDE0 : inner == 1 ? SC_STRIDE1 : SC_STRIDEN] += 1;
	if (tstride == 0 || tstride == 1)
		raw[SC_COALESCED] += 1;
	if (s == 0)
		c->global_unique += unique;
	if (main_slot >= 0 && main_slot < MAIN_ACC) {
		float *a = &c->f[F_MAIN + main_slot * AC_N];
		c->main_unique[main_slot] = unique;
		a[AC_REUSE] = lg(total / unique);
		a[AC_INNER_STRIDE] = inner < 0 ? 31.0f : lg(inner);
		a[AC_THREAD_STRIDE] = tstride < 0 ? 31.0f : lg(tstride);
	}
}

/* Whether loop l stays a loop in the compiled code: not vectorized, not
 * unrolled (by kind or by an "unroll" annotation of at least its extent),
 * not of extent 1. */
static bool remains_loop(const tir_stmt *l)
{
	if (l->extent <= 1 || l->loop_kind == LOOP_VECTORIZED || l->loop_kind == LOOP_UNROLLED)
		return false;
	for (int k = 0; k < l->nann; k++)
		if (!strcmp(l->ann[k].key, "unroll") && l->ann[k].value >= l->extent)
			return false;
	return true;
}

struct loads_ctx { fctx *c; const tir_block *b; const loopinfo *li; bool main; int slot; };

static void load_access(tir_expr *load, void *ctx)
{
	struct loads_ctx *lc = ctx;
	access(lc->c, lc->b, lc->li, load->buf, load->idx, false, lc->main ? lc->slot : -1);
	lc->slot++;
}

/* ---- cache traffic: an analytical estimate ------------------------------------ */

/* The capacities traffic is estimated for: registers, then the first-level
 * cache (shared memory / L1 on a GPU), one core's L2 (on a GPU a share of
 * it), the last level. */
static void cache_sizes(const tir_target *t, double out[NCACHES])
{
	out[0] = 1024;
	if (t->kind == TIR_TARGET_CUDA) {
		out[1] = 48 * 1024;
		out[2] = 1 << 20;
		out[3] = t->l2_bytes > 0 ? (double)t->l2_bytes : 50.0 * (1 << 20);
	} else {
		out[1] = 32 * 1024;
		out[2] = 1 << 20;
		out[3] = 32.0 * (1 << 20);
	}
}

/* One access of a block: its buffer and its indices in loop variables. */
typedef struct acc {
	const tir_buffer *buf;
	tir_expr *idx[TIR_MAX_DIMS];
	bool store;
} acc;

#define MAX_ACC 16
struct accs { fctx *c; const tir_block *b; acc a[MAX_ACC]; int n; };

static void add_acc(struct accs *x, const tir_buffer *buf, tir_expr *const *idx, bool store)
{
	if (x->n == MAX_ACC)
		return;
	acc *a = &x->a[x->n++];
	a->buf = buf;
	a->store = store;
	for (int d = 0; d < buf->ndim; d++)
		a->idx[d] = lower_bind(&x->c->L, x->b, idx[d]);
}

static void collect_load(tir_expr *load, void *ctx)
{
	add_acc(ctx, load->buf, load->idx, false);
}

/* Bytes access a touches while the loops not fixed in env run; *lines (if
 * not NULL): the bytes of the 64-byte lines they lie in, each row of the
 * last (contiguous) dimension rounded up to whole lines. */
static double touched(const tir_env *env, const acc *a, double *lines)
{
	double bytes = (double)dtype_bytes(a->buf->dtype), u = bytes;
	if (lines)
		*lines = 1;
	for (int d = 0; d < a->buf->ndim; d++) {
		int64_t lo, hi;
		double ext = (double)a->buf->shape[d];
		if (expr_bounds(a->idx[d], env, &lo, &hi)) {
			if (lo < 0) lo = 0;
			if (hi > a->buf->shape[d] - 1) hi = a->buf->shape[d] - 1;
			ext = hi >= lo ? (double)(hi - lo + 1) : 1;
		}
		u *= ext;
		if (lines)
			*lines *= d == a->buf->ndim - 1 ? 64 * ceil(ext * bytes / 64) : ext;
	}
	return u;
}

/* The innermost loop of li (extent > 1) that no index of access a uses: the
 * loop that carries its reuse (for the store, a reduction loop); -1 if none. */
static int reuse_loop(const loopinfo *li, const acc *a)
{
	for (int k = li->n - 1; k >= 0; k--) {
		bool uses = false;
		for (int d = 0; d < a->buf->ndim && !uses; d++)
			uses = expr_uses_var(a->idx[d], li->l[k]->var);
		if (!uses && li->l[k]->extent > 1)
			return k;
	}
	return -1;
}

/* The footprint of the block at every loop level (loops l[0..k) fixed, the
 * rest running): U[k][a] bytes per access.  Traffic into a cache of capacity
 * C: at the outermost level k whose footprint fits, each access brings in its
 * footprint once per iteration of the loops outside k; data touched again
 * further out is assumed evicted.  For the main block also the register
 * tile: the outputs held across the innermost reduction loop (accumulators)
 * and the bytes its body loads per operation. */
static void traffic(fctx *c, tir_block *b, const loopinfo *li, double ops)
{
	struct accs x = { .c = c, .b = b };
	expr_visit_loads(b->value, collect_load, &x);
	add_acc(&x, b->store, b->store_idx, true);
	int n = li->n;
	double U[65][MAX_ACC], lines[65][MAX_ACC];
	double F[65];
	tir_env *env = &c->L.env;
	for (int k = 0; k <= n; k++) {
		if (k > 0)
			env_set(env, li->l[k - 1]->var, 0, 0);
		F[k] = 0;
		for (int a = 0; a < x.n; a++)
			F[k] += U[k][a] = touched(env, &x.a[a], &lines[k][a]);
	}
	for (int k = 0; k < n; k++)
		env_set(env, li->l[k]->var, 0, li->l[k]->extent - 1);

	double cap[NCACHES];
	cache_sizes(c->t, cap);
	int k1 = 0;
	double outer1 = 1;
	for (int ci = 0; ci < NCACHES; ci++) {
		int k = 0;
		double outer = 1;
		while (k < n && F[k] > cap[ci])
			outer *= (double)li->l[k++]->extent;
		c->traffic[ci] += F[k] * outer;
		if (ci == 1) {
			k1 = k;
			outer1 = outer;
		}
	}
	if (b != c->main)
		return;
	/* per access slot (the first loads, then the store): lines into L1 and
	 * reuse */
	for (int a = 0; a < x.n; a++) {
		bool store = a == x.n - 1;
		if (!store && a >= MAIN_ACC - 1)
			continue;
		int slot = store ? MAIN_ACC - 1 : a;
		int k = reuse_loop(li, &x.a[a]);
		c->main_lines[slot] = lines[k1][a] * outer1;
		float *f = &c->f[F_MAIN + slot * AC_N];
		f[AC_REUSE_DIST] = k >= 0 ? lg(F[k + 1]) : 0;
		f[AC_REUSE_COUNT] = k >= 0 ? lg((double)li->l[k]->extent) : 0;
	}
	/* the innermost loop the output does not depend on: a reduction loop */
	const acc *st = &x.a[x.n - 1];
	int r = reuse_loop(li, st);
	if (r < 0)
		return;
	double inner = 1, loads = 0;
	for (int k = r + 1; k < n; k++)
		inner *= (double)li->l[k]->extent;
	for (int a = 0; a + 1 < x.n; a++)
		loads += U[r + 1][a];
	c->f[F_ACCUM] = lg(U[r + 1][x.n - 1] / dtype_bytes(st->buf->dtype));
	c->f[F_MICRO_BYTES] = (float)(loads / (inner * (ops > 0 ? ops : 1)));
}

/* Cycles per operation of an idealised machine: the slowest of arithmetic
 * and each cache level's bandwidth, over the processors kept busy. */
static double roofline(const fctx *c)
{
	const tir_target *t = c->t;
	double compute, bw[NCACHES];
	if (t->kind == TIR_TARGET_CUDA) {
		/* 128 FMA lanes per SM; tensor cores 16 times that (f16) from a
		 * warp's MMA, 32 from a warpgroup's */
		compute = (c->flops - c->tc_flops) / 256.0 + (c->tc_flops - c->wg_flops) / 4096.0 +
			  c->wg_flops / 8192.0;
		bw[0] = 256; bw[1] = 128; bw[2] = 64; bw[3] = 24;
	} else {
		double lanes = t->vector_bytes > 0 ? t->vector_bytes / 4.0 : 4;
		compute = c->vec_flops / (4 * lanes) + (c->flops - c->vec_flops) / 4;
		bw[0] = 128; bw[1] = 64; bw[2] = 32; bw[3] = 8;
	}
	double worst = compute;
	for (int i = 0; i < NCACHES; i++)
		if (c->traffic[i] / bw[i] > worst)
			worst = c->traffic[i] / bw[i];
	double par = c->par_eff > 1 ? c->par_eff : 1;
	return worst / par / (c->flops > 0 ? c->flops : 1);
}

struct row_loads { double all, held; };

static void count_row_load(tir_expr *load, void *ctx)
{
	struct row_loads *r = ctx;
	r->all++;
	if (load->buf->scope != TIR_SCOPE_GLOBAL)
		r->held++;
}

/* The reduction features of reduction block b (loops li): its reducer, and
 * where it has no data reuse, its row (F_RED_SUM .. F_ROW_THREADS). */
static void reduction_features(fctx *c, tir_block *b, const loopinfo *li)
{
	c->red_updates[0] += li->instances;
	if (b->reduce == REDUCE_SUM)
		c->red_updates[1] += li->instances;
	else
		c->red_updates[2] += li->instances;
	if (sketch_has_reuse(c->L.p, b))
		return;
	c->row_blocks++;
	double row = 1, elem = 0;
	for (int i = 0; i < b->niters; i++)
		if (b->iters[i].kind == ITER_REDUCE)
			row *= (double)b->iters[i].extent;
	for (int r = 0; r < b->nreads; r++)
		if (b->reads[r].buf != b->store && dtype_bytes(b->reads[r].buf->dtype) > elem)
			elem = dtype_bytes(b->reads[r].buf->dtype);
	if (row * elem > c->row_bytes)
		c->row_bytes = row * elem;
	struct row_loads rl = { 0, 0 };
	expr_visit_loads(b->value, count_row_load, &rl);
	c->row_loads += li->instances * rl.all;
	c->row_held += li->instances * rl.held;
	double threads = 1;
	for (int k = 0; k < li->n; k++) {
		const tir_stmt *l = li->l[k];
		if (l->loop_kind != LOOP_THREAD || l->tag < TIR_THREAD_X)
			continue;
		for (int i = 0; i < b->niters; i++)
			if (b->iters[i].kind == ITER_REDUCE && expr_uses_var(b->iters[i].binding, l->var)) {
				threads *= (double)l->extent;
				break;
			}
	}
	if (threads > c->row_threads)
		c->row_threads = threads;
}

static void block_features(tir_block *b, void *ctx)
{
	fctx *c = ctx;
	loopinfo li;
	loops_of(b, &li);
	double ops = ops_of(b->value) + (b->reduce != REDUCE_NONE ? 1 : 0);
	double total = li.instances * ops;
	c->flops += total;
	double kinds[K_N] = { 0 };
	kinds_of(b->value, kinds);
	kinds_of(b->predicate, kinds);
	if (b->reduce != REDUCE_NONE)
		reduction_features(c, b, &li);
	if (b->reduce == REDUCE_SUM)
		kinds[K_ADD]++;
	else if (b->reduce == REDUCE_MAX || b->reduce == REDUCE_MIN)
		kinds[K_MINMAX]++;      /* the combine is a max / min */
	for (int i = 0; i < K_N; i++)
		c->kinds[i] += li.instances * kinds[i];
	if (li.vectorized)
		c->vec_flops += total;
	if (li.intrin && li.intrin->kind == INTRIN_MMA) {
		c->tc_flops += total;
		if (li.intrin->unit == INTRIN_WARPGROUP)
			c->wg_flops += total;
		c->mma += li.instances / 4096.0;
	}
	if (li.intrin && (li.intrin->kind == INTRIN_LOAD_A || li.intrin->kind == INTRIN_LOAD_B))
		c->frag_loads += li.instances / 256.0;
	bool is_main = b == c->main;
	struct loads_ctx lc = { c, b, &li, is_main, 0 };
	expr_visit_loads(b->value, load_access, &lc);
	access(c, b, &li, b->store, b->store_idx, true, is_main ? MAIN_ACC - 1 : -1);
	traffic(c, b, &li, ops);
	float *f = c->f;
	if (li.vec)
		for (int i = 0; i < li.n; i++)
			if (li.l[i]->var == li.vec) {
				double vb = (double)li.l[i]->extent * dtype_bytes(b->store->dtype);
				if (vb > f[F_VECTOR_BYTES])
					f[F_VECTOR_BYTES] = (float)vb;
			}
	if ((double)li.unroll_ann > f[F_UNROLL_ANN])
		f[F_UNROLL_ANN] = (float)li.unroll_ann;
	for (int k = 0; k < b->nann; k++)
		if (!strcmp(b->ann[k].key, "cross_thread_reduction") && b->ann[k].value)
			f[F_CROSS_THREAD] = 1;
	if (is_main) {
		double dom = 1;
		for (int i = 0; i < b->niters; i++)
			dom *= (double)b->iters[i].extent;
		c->main_instances = li.instances;
		double iters = 1, body = ops;
		int innermost = -1;
		for (int i = 0; i < li.n; i++) {
			const tir_stmt *l = li.l[i];
			iters *= (double)l->extent;
			if (remains_loop(l)) {
				c->loop_iters += iters;
				innermost = i;
			}
		}
		for (int i = innermost + 1; i < li.n; i++)
			body *= (double)li.l[i]->extent;
		f[F_BODY_OPS] = lg(body);
		f[F_WASTE] = (float)(li.instances / dom);
		f[F_UNROLL] = lg(li.unroll);
		f[F_MAIN_DEPTH] = lg(li.n);
		double par = 1, grid = 1, threads = 1, vthreads = 1;
		for (int i = 0; i < li.n; i++) {
			const tir_stmt *l = li.l[i];
			if (l->loop_kind == LOOP_PARALLEL)
				par *= (double)l->extent;
			if (l->loop_kind == LOOP_THREAD) {
				if (l->tag <= TIR_BLOCK_Z) grid *= (double)l->extent;
				else if (l->tag <= TIR_VTHREAD_Z) vthreads *= (double)l->extent;
				else threads *= (double)l->extent;
			}
		}
		f[F_PARALLEL] = lg(par);
		int cores = c->t->cores > 0 ? c->t->cores : 1;
		double rounds = ceil(par / cores);
		f[F_PAR_BALANCE] = par > 1 ? (float)(par / (rounds * cores)) : 0;
		c->par_eff = par / rounds;
		f[F_GRID] = lg(grid);
		f[F_THREADS] = lg(threads);
		f[F_VTHREADS] = lg(vthreads);
		c->f[F_SYNC_LOOPS] = 0;
		/* thread-block resources, from the allocations in the main kernel */
		const tir_stmt *kernel = b->stmt;
		while (kernel->parent && kernel->parent->parent)
			kernel = kernel->parent;
		double shared = 0, local = 0;
		for (int i = 0; i < c->L.p->nbufs; i++) {
			const tir_alloc *a = &c->L.alloc[i];
			if (!a->used || !a->compact)
				continue;
			if (a->lca && !stmt_is_ancestor(kernel, a->lca) && a->lca != kernel)
				continue;
			if (a->buf->scope == TIR_SCOPE_SHARED)
				shared += (double)a->bytes;
			else if (a->buf->scope != TIR_SCOPE_GLOBAL)
				local += (double)a->bytes;
		}
		f[F_SHARED] = lg(shared);
		f[F_LOCAL] = lg(local);
		if (c->t->kind == TIR_TARGET_CUDA) {
			double bps = floor(2048.0 / (threads > 0 ? threads : 1));
			if (bps > 32) bps = 32;
			if (shared > 0) {
				double by_smem = floor((double)c->t->max_shared_per_block / shared);
				if (by_smem < bps) bps = by_smem;
			}
			double regs = 32 + local / 4;   /* registers per thread, estimated */
			double by_regs = floor(65536.0 / (regs * threads));
			if (by_regs < bps) bps = by_regs;
			if (bps < 1) bps = 0;
			f[F_OCCUPANCY] = (float)(bps * threads / 2048.0);
			double slots = bps * (c->t->sm_count > 0 ? c->t->sm_count : 1);
			double waves = slots > 0 ? grid / slots : 0;
			f[F_WAVES] = lg(waves);
			f[F_WAVE_EFF] = waves > 0 ? (float)(waves / ceil(waves)) : 0;
			double sms = c->t->sm_count > 0 ? c->t->sm_count : 1;
			c->par_eff = grid < sms ? grid : sms;
		}
	}
}

struct find_main { const tir_block *main; double best; };

static void pick_main(tir_block *b, void *ctx)
{
	struct find_main *fm = ctx;
	loopinfo li;
	loops_of(b, &li);
	double w = li.instances * (b->reduce != REDUCE_NONE ? 2 : 1);
	if (!fm->main || w > fm->best) {
		fm->main = b;
		fm->best = w;
	}
}

/* The most stages of a software-pipelined loop under s (1: none). */
static int pipeline_stages(const tir_lowered *L, const tir_stmt *s)
{
	int n = s->kind == STMT_FOR ? lower_pipeline_stages(L, s) : 1;
	for (int i = 0; i < s->nkids; i++) {
		int k = pipeline_stages(L, s->kids[i]);
		if (k > n)
			n = k;
	}
	return n;
}

/* Serial loops whose bodies hold a shared-memory stage: one barrier pair per
 * iteration on the GPU. */
static int sync_loops(const tir_stmt *s)
{
	int n = 0;
	for (int i = 0; i < s->nkids; i++) {
		const tir_stmt *k = s->kids[i];
		if (k->kind == STMT_BLOCK && k->block->store->scope == TIR_SCOPE_SHARED &&
		    s->kind == STMT_FOR && s->loop_kind == LOOP_SERIAL)
			n++;
		else if (k->kind != STMT_BLOCK)
			n += sync_loops(k);
	}
	return n;
}

int cm_features(const tir_program *p, const tir_target *t, float *out, tir_error *err)
{
	fctx c;
	memset(&c, 0, sizeof c);
	memset(out, 0, sizeof(float) * CM_NFEATURES);
	if (lower_program(p, t, &c.L, err))
		return -1;
	c.t = t;
	c.f = out;
	struct find_main fm = { NULL, 0 };
	stmt_visit_blocks(p->root, pick_main, &fm);
	c.main = fm.main;
	stmt_visit_blocks(p->root, block_features, &c);
	out[F_FLOPS] = lg(c.flops);
	out[F_VECTOR_FRAC] = c.flops > 0 ? (float)(c.vec_flops / c.flops) : 0;
	out[F_BLOCKS] = 0;
	out[F_KERNELS] = 0;
	for (int i = 0; i < p->root->nkids; i++)
		if (lower_has_blocks(p->root->kids[i]))
			out[F_KERNELS] += 1;
	for (int i = 0; i < p->nblocks; i++)
		if (p->blocks[i]->stmt)
			out[F_BLOCKS] += 1;
	out[F_INTENSITY] = lg(c.flops / (c.global_unique > 0 ? c.global_unique : 1));
	out[F_SYNC_LOOPS] = lg(sync_loops(p->root));
	for (int s = 0; s < NSCOPES; s++) {
		float *g = &out[F_SCOPES + s * SC_N];
		double *raw = c.scope_raw[s], n = c.scope_cnt[s];
		g[SC_LOAD] = per_op(raw[SC_LOAD], c.flops);
		g[SC_STORE] = per_op(raw[SC_STORE], c.flops);
		g[SC_UNIQUE] = per_op(raw[SC_UNIQUE], c.flops);
		g[SC_REUSE] = lg((raw[SC_LOAD] + raw[SC_STORE]) / (raw[SC_UNIQUE] > 0 ? raw[SC_UNIQUE] : 1));
		for (int k = SC_STRIDE0; k <= SC_COALESCED; k++)
			g[k] = n > 0 ? (float)(raw[k] / n) : 0;
	}
	double problem = 0;
	for (int i = 0; i < p->nparams; i++) {
		double e = dtype_bytes(p->bufs[i]->dtype);
		for (int d = 0; d < p->bufs[i]->ndim; d++)
			e *= (double)p->bufs[i]->shape[d];
		problem += e;
	}
	out[F_PROBLEM] = per_op(problem, c.flops);
	for (int i = 0; i < NCACHES; i++)
		out[F_TRAFFIC + i] = per_op(c.traffic[i], c.flops);
	out[F_MAIN_INSTANCES] = per_op(c.main_instances, c.flops);
	for (int a = 0; a < MAIN_ACC; a++) {
		out[F_MAIN + a * AC_N + AC_UNIQUE] = per_op(c.main_unique[a], c.flops);
		out[F_MAIN + a * AC_N + AC_LINES] = per_op(c.main_lines[a], c.flops);
	}
	out[F_LOOP_ITERS] = per_op(c.loop_iters, c.flops);
	out[F_ROOFLINE] = (float)log2(1e-9 + roofline(&c));
	out[F_TENSOR_FRAC] = c.flops > 0 ? (float)(c.tc_flops / c.flops) : 0;
	out[F_MMA_PER_FRAG] = c.frag_loads > 0 ? lg(c.mma / c.frag_loads) : 0;
	out[F_PIPELINE] = (float)pipeline_stages(&c.L, p->root);
	out[F_WGMMA_FRAC] = c.flops > 0 ? (float)(c.wg_flops / c.flops) : 0;
	out[F_TMA] = lower_find_tma(&c.L, p->root) ? 1 : 0;
	for (int i = 0; i < K_N; i++)
		out[F_KINDS + i] = per_op(c.kinds[i], c.flops);
	out[F_IDX_DIVMOD] = per_op(c.idx_divmod, c.flops);
	if (c.red_updates[0] > 0) {
		out[F_RED_SUM] = (float)(c.red_updates[1] / c.red_updates[0]);
		out[F_RED_MINMAX] = (float)(c.red_updates[2] / c.red_updates[0]);
	}
	out[F_ROW_BLOCKS] = lg(c.row_blocks);
	out[F_ROW_BYTES] = lg(c.row_bytes);
	out[F_ROW_HELD] = c.row_loads > 0 ? (float)(c.row_held / c.row_loads) : 0;
	out[F_ROW_THREADS] = lg(c.row_threads);
	for (int i = 0; i < CM_NFEATURES; i++)
		if (!isfinite(out[i]))
			out[i] = 0;
	lower_free(&c.L);
	return 0;
}
