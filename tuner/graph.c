/*
 * graph.c — a set of a graph workload's nodes (a part; the whole graph by
 * default) lowered to one tir_program.
 *
 * Each node of the part is either realized — computed by a block of its own
 * into a buffer — or inlined: its expression is substituted into every user
 * at the user's index, as TorchInductor's lowering turns Pointwise and View
 * nodes into inner functions that their users call (seeds/000, §6).  Which:
 *  - reductions and heavy operators are always realized, and so is every
 *    output of the part (a graph output, or a value a live node outside
 *    the part reads);
 *  - any other node (pointwise or view) is realized when the caller's
 *    `realize` mask says so; without a mask, by the default rule, which is
 *    Inductor's before fusion: inline every pointwise and view node into
 *    its users, except a node whose inlined expression
 *      reads more than 8 distinct buffers (has_exceeded_max_reads,
 *      realize_acc_reads_threshold), or
 *      is used more than once within the part and has more than 30
 *      operations or reads more than 4 buffers (should_realize_on_reuse:
 *      recomputing it per use would cost more than storing it), or
 *      has more than GRAPH_MAX_INLINE_OPS operations (tird's own cap,
 *      which keeps a block's expression, and the code, bounded);
 *    operations are counted with repetition (a value used twice counts
 *    twice), a load of a realized value or a parameter is one.  So a
 *    pointwise prologue is inlined into a heavy operator's compute (it is
 *    then evaluated once per multiply-add; a caller that wants it stored
 *    realizes it), and a view of a buffer is only an index map.
 * A mean is a SUM block and a division by the number of elements reduced:
 * folded into the readers (they load sum / n) where the mean is a
 * temporary, or done by a block "<op>_<node>_out" that writes the output
 * from the sum where the mean is an output.  Reductions accumulate in
 * float32 ("<node>_acc" when the output itself is float16).
 *
 * Values and dtypes: every expression is computed in float32 — a float16
 * load is converted, a float16 value is rounded only where it is realized
 * (stored, or read back from a float32 accumulator) or cast — as Inductor
 * computes half-precision pointwise code in float.  Broadcasting is an index
 * expression: a size-1 dimension reads index 0; a reshape maps each group of
 * dimensions whose sizes multiply to the same product through its row-major
 * offset (floordiv / floormod only where a group splits or merges dims); a
 * permute reorders the index, an expand reads index 0 of a broadcast dim, a
 * slice reads start + step * i.  Rank-0 values are buffers of shape [1].
 *
 * The program: parameters first — the values the part reads from outside
 * (the graph's inputs in their order, then other nodes' values in node
 * order), then the part's outputs (the graph's outputs in their order, then
 * values other nodes read, in node order) — then a block (or a heavy
 * operator's stages, compute.c: compute_into) per realized node in node
 * order, in its own loop nest; the other realized values are global
 * temporaries (BUF_TEMP: the C code mallocs them, CUDA gets them as
 * scratch).  Names are stable: a value's buffer is its name sanitised to an
 * identifier (another character becomes '_', a leading digit gets a '_', a
 * C keyword or a name of the generated code's, or one ending in _<digits>,
 * gets a trailing '_'), its block "<op>_<buffer>", a heavy operator's
 * stages "<op>_<buffer>_pad" / "_epilogue" with temporaries "<buffer>_pad"
 * / "_acc"; loops i0, i1, ... (spatial) and r0, ... (reduction), iterators
 * vi0, ..., vr0, ...; the IR makes a name taken twice unique with a _<n>
 * suffix, in creation order, so the same graph always gives the same names.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ir/ir.h"

#define GRAPH_REUSE_OPS 30          /* Inductor's realize_opcount_threshold */
#define GRAPH_REUSE_READS 4         /* realize_reads_threshold */
#define GRAPH_MAX_READS 8           /* realize_acc_reads_threshold */
#define GRAPH_MAX_INLINE_OPS 512
#define GRAPH_MAX_BLOCK_OPS (1 << 14)   /* a realize mask that inlines too much */

typedef struct glow {
	const tir_graph *g;
	int nv;                     /* values: inputs, then nodes */
	unsigned char *part;        /* per value: a live node of the part */
	unsigned char *real;        /* per value: realized (a node of the part) */
	unsigned char *out;         /* per value: an output of the part */
	int *uses;                  /* per value: reads by nodes of the part */
	int64_t *ops;               /* per value: operations of its inlined expression */
	uint64_t *reads;            /* per value: bitset of the buffers that reads */
	int words;                  /* of a bitset */
	/* while building */
	tir_program *p;
	tir_arena *a;
	tir_buffer **buf;           /* per value: what its readers load; NULL: inlined */
	double *div;                /* per value: readers divide by it (a mean), or 0 */
	/* tir_graph_kernel: the plan's realized nodes (per node), whose readers
	 * outside the part read them; an inlined node read outside the part is
	 * recomputed there, not an output.  NULL: every value read outside the
	 * part is an output. */
	const unsigned char *plan;
} glow;

static const tir_gvalue *val(const glow *L, int v) { return &L->g->v[v]; }

static void glow_free(glow *L)
{
	free(L->part);
	free(L->real);
	free(L->out);
	free(L->uses);
	free(L->ops);
	free(L->reads);
	free(L->buf);
	free(L->div);
}

/* ---- which nodes are realized ---------------------------------------------------- */

static int popcount_reads(const glow *L, int v)
{
	int n = 0;
	for (int i = 0; i < L->words; i++)
		n += __builtin_popcountll(L->reads[(size_t)v * (size_t)L->words + (size_t)i]);
	return n;
}

/* ops and reads of node v's expression with its arguments as decided so
 * far: a realized or outside value is one load. */
static void measure(glow *L, int v)
{
	const tir_gvalue *x = val(L, v);
	uint64_t *r = &L->reads[(size_t)v * (size_t)L->words];
	memset(r, 0, sizeof(uint64_t) * (size_t)L->words);
	int64_t ops = gop_kind(x->op) == GK_POINTWISE ? 1 : 0;
	for (int i = 0; i < x->nargs; i++) {
		int a = x->arg[i];
		if (a < 0)
			continue;
		if (L->part[a] && !L->real[a]) {
			ops += L->ops[a];
			const uint64_t *ra = &L->reads[(size_t)a * (size_t)L->words];
			for (int k = 0; k < L->words; k++)
				r[k] |= ra[k];
		} else {
			ops += 1;
			r[a / 64] |= 1ull << (a % 64);
		}
	}
	L->ops[v] = ops;
}

/* The part's members, outputs, uses and realized nodes (the top comment). */
static int decide(glow *L, const unsigned char *part, const unsigned char *realize,
		  tir_error *err)
{
	const tir_graph *g = L->g;
	L->nv = g->ninputs + g->nnodes;
	L->words = (L->nv + 63) / 64;
	L->part = xcalloc((size_t)L->nv, 1);
	L->real = xcalloc((size_t)L->nv, 1);
	L->out = xcalloc((size_t)L->nv, 1);
	L->uses = xcalloc((size_t)L->nv, sizeof *L->uses);
	L->ops = xcalloc((size_t)L->nv, sizeof *L->ops);
	L->reads = xcalloc((size_t)L->nv * (size_t)L->words, sizeof *L->reads);
	int members = 0;
	for (int i = 0; i < g->nnodes; i++) {
		int v = g->ninputs + i;
		if ((!part || part[i]) && val(L, v)->live) {
			L->part[v] = 1;
			members++;
		}
	}
	if (!members)
		return tir_fail(err, "graph: the part has no node that an output depends on");
	for (int v = g->ninputs; v < L->nv; v++) {
		const tir_gvalue *x = val(L, v);
		if (!x->live)
			continue;
		if (L->part[v] && x->output >= 0)
			L->out[v] = 1;
		for (int i = 0; i < x->nargs; i++) {
			int a = x->arg[i];
			if (a < 0)
				continue;
			if (L->part[v])
				L->uses[a]++;
			else if (L->part[a] && (!L->plan || L->plan[a - g->ninputs]))
				L->out[a] = 1;      /* read outside the part */
		}
	}
	for (int v = g->ninputs; v < L->nv; v++) {
		if (!L->part[v])
			continue;
		const tir_gvalue *x = val(L, v);
		tir_gkind k = gop_kind(x->op);
		measure(L, v);
		int reads = popcount_reads(L, v);
		if (k == GK_REDUCTION || k == GK_HEAVY || L->out[v])
			L->real[v] = 1;
		else if (realize)
			L->real[v] = realize[v - g->ninputs] != 0;
		else
			L->real[v] = reads > GRAPH_MAX_READS ||
				     (L->uses[v] > 1 && (L->ops[v] > GRAPH_REUSE_OPS ||
							 reads > GRAPH_REUSE_READS)) ||
				     L->ops[v] > GRAPH_MAX_INLINE_OPS;
		if (L->real[v] && L->ops[v] > GRAPH_MAX_BLOCK_OPS)
			return tir_fail(err, "graph: node \"%s\": its expression has %lld "
					"operations with its arguments inlined (more than %d); "
					"realize some of them", x->name, (long long)L->ops[v],
					GRAPH_MAX_BLOCK_OPS);
	}
	return 0;
}

static int check_graph(const tir_workload *w, tir_error *err)
{
	if (!w)
		return tir_fail(err, "no workload");
	if (!w->graph)
		return tir_fail(err, "%s: not a graph workload", tir_workload_op(w));
	return 0;
}

int tir_graph_default_realize(const tir_workload *w, const unsigned char *part,
			      unsigned char *realize, tir_error *err)
{
	if (check_graph(w, err))
		return -1;
	glow L = { .g = w->graph };
	int rc = decide(&L, part, NULL, err);
	for (int i = 0; rc == 0 && i < L.g->nnodes; i++)
		realize[i] = L.real[L.g->ninputs + i];
	glow_free(&L);
	return rc;
}

/* ---- names ------------------------------------------------------------------------ */

/* Names the generated C and CUDA code uses inside its entry point or kernels,
 * and C's keywords: a buffer may not shadow them. */
static const char *const reserved[] = {
	"auto", "break", "case", "char", "const", "continue", "default", "do", "double",
	"else", "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long",
	"register", "restrict", "return", "short", "signed", "sizeof", "static", "struct",
	"switch", "typedef", "union", "unsigned", "void", "volatile", "while", "bool",
	"true", "false", "half", "args", "free", "malloc", "aligned_alloc", "threadIdx",
	"blockIdx", "blockDim", "gridDim", "warpSize", "int8_t", "int16_t", "int32_t",
	"int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "size_t", "NULL",
	"INFINITY", "NAN", "float2", "float4", "int2", "int4", "uint2", "uint4", "half2",
	"nvcuda", "wmma", 0,
};

static const char *sanitize(tir_arena *a, const char *name)
{
	size_t n = strlen(name);
	char *s = arena_alloc(a, n + 3), *q = s;
	if (isdigit((unsigned char)name[0]))
		*q++ = '_';
	for (const char *c = name; *c; c++)
		*q++ = isalnum((unsigned char)*c) ? *c : '_';
	*q = '\0';
	bool bad = !strncmp(s, "tir_", 4) || !strncmp(s, "__", 2);
	for (const char *const *r = reserved; *r && !bad; r++)
		bad = !strcmp(s, *r);
	const char *u = strrchr(s, '_');
	if (u && u[1]) {              /* ends in _<digits>: the IR's and C's suffixes */
		bool digits = true;
		for (const char *c = u + 1; *c; c++)
			digits = digits && isdigit((unsigned char)*c);
		bad = bad || digits;
	}
	if (bad)
		strcat(s, "_");
	return s;
}

static const char *node_op_name(const tir_gvalue *x)
{
	return x->op == GOP_HEAVY ? tir_workload_op(x->heavy) : gop_name(x->op);
}

/* ---- expressions ------------------------------------------------------------------- */

static tir_expr *F(glow *L, double x) { return mk_float(L->a, x, TIR_F32); }

/* A value's float16 rounding, where its dtype says so. */
static tir_expr *rounded(glow *L, tir_dtype t, tir_expr *x)
{
	return t == TIR_F16 ? mk_cast(L->a, TIR_F32, mk_cast(L->a, TIR_F16, x)) : x;
}

static tir_expr *compute_at(glow *L, int v, tir_expr *const *idx);

/* Value v at idx (v's rank of index expressions), in float32. */
static tir_expr *value_at(glow *L, int v, tir_expr *const *idx)
{
	tir_buffer *b = L->buf[v];
	if (!b)
		return compute_at(L, v, idx);
	const tir_gvalue *x = val(L, v);
	tir_expr *zero = mk_int(L->a, 0);
	tir_expr *e = mk_cast(L->a, TIR_F32, mk_load(L->a, b, b->ndim, x->ndim ? idx : &zero));
	if (L->div[v] > 0)
		e = mk_bin(L->a, E_DIV, e, F(L, L->div[v]));
	return b->dtype == x->dtype ? e : rounded(L, x->dtype, e);
}

/* The index of argument a of a broadcasting op (pointwise, expand) whose
 * result has rank n. */
static void broadcast_index(glow *L, const tir_gvalue *a, int n, tir_expr *const *idx,
			    tir_expr **ai)
{
	int lead = n - a->ndim;
	for (int d = 0; d < a->ndim; d++)
		ai[d] = a->shape[d] == 1 ? mk_int(L->a, 0) : idx[d + lead];
}

/* reshape: each group of dims of equal products through its row-major
 * offset; size-1 dims read 0. */
static void reshape_index(glow *L, const tir_gvalue *a, const tir_gvalue *x,
			  tir_expr *const *idx, tir_expr **ai)
{
	int i = 0, j = 0;
	for (;;) {
		while (i < x->ndim && x->shape[i] == 1)
			i++;
		while (j < a->ndim && a->shape[j] == 1)
			ai[j++] = mk_int(L->a, 0);
		if (i >= x->ndim || j >= a->ndim)
			break;
		int i0 = i, j0 = j;
		int64_t px = x->shape[i++], pa = a->shape[j++];
		while (px != pa) {
			if (px < pa)
				px *= x->shape[i++];
			else
				pa *= a->shape[j++];
		}
		tir_expr *lin = mk_int(L->a, 0);
		int64_t st = 1;
		for (int d = i - 1; d >= i0; d--) {
			if (x->shape[d] == 1)
				continue;
			lin = mk_add(L->a, mk_mul(L->a, idx[d], mk_int(L->a, st)), lin);
			st *= x->shape[d];
		}
		st = 1;
		for (int d = j - 1; d >= j0; d--) {
			if (a->shape[d] == 1) {
				ai[d] = mk_int(L->a, 0);
				continue;
			}
			tir_expr *q = st == 1 ? lin : mk_floordiv(L->a, lin, mk_int(L->a, st));
			ai[d] = d == j0 ? q : mk_floormod(L->a, q, mk_int(L->a, a->shape[d]));
			st *= a->shape[d];
		}
	}
}

/* Node v's own expression at idx (its arguments loaded or inlined). */
static tir_expr *compute_at(glow *L, int v, tir_expr *const *idx)
{
	const tir_gvalue *x = val(L, v);
	tir_arena *A = L->a;
	tir_expr *ai[TIR_MAX_DIMS];
	if (gop_kind(x->op) == GK_VIEW) {
		const tir_gvalue *a = val(L, x->arg[0]);
		switch (x->op) {
		case GOP_RESHAPE:
			reshape_index(L, a, x, idx, ai);
			break;
		case GOP_PERMUTE:
			for (int d = 0; d < x->ndim; d++)
				ai[x->perm[d]] = idx[d];
			break;
		case GOP_EXPAND:
			broadcast_index(L, a, x->ndim, idx, ai);
			break;
		default:   /* slice */
			for (int d = 0; d < x->ndim; d++)
				ai[d] = idx[d];
			ai[x->sdim] = mk_add(A, mk_mul(A, idx[x->sdim], mk_int(A, x->step)),
					     mk_int(A, x->start));
			break;
		}
		return value_at(L, x->arg[0], ai);
	}
	/* pointwise (reductions and heavy operators are always realized) */
	tir_expr *in[2] = { NULL, NULL };
	for (int i = 0; i < x->nargs && i < 2; i++) {
		if (x->arg[i] < 0) {
			in[i] = F(L, x->num[i]);
			continue;
		}
		broadcast_index(L, val(L, x->arg[i]), x->ndim, idx, ai);
		in[i] = value_at(L, x->arg[i], ai);
	}
	tir_expr *p = in[0], *q = in[1];
	switch (x->op) {
	case GOP_ADD: return mk_add(A, p, q);
	case GOP_SUB: return mk_sub(A, p, q);
	case GOP_MUL: return mk_mul(A, p, q);
	case GOP_DIV: return mk_bin(A, E_DIV, p, q);
	case GOP_NEG: return mk_mul(A, p, F(L, -1.0));
	case GOP_RELU: return mk_bin(A, E_MAX, p, F(L, 0.0));
	case GOP_GELU: return mk_call(A, FN_GELU, p);
	case GOP_EXP: return mk_call(A, FN_EXP, p);
	case GOP_TANH: return mk_call(A, FN_TANH, p);
	case GOP_SIGMOID: return mk_call(A, FN_SIGMOID, p);
	case GOP_SQRT: return mk_call(A, FN_SQRT, p);
	case GOP_RSQRT: return mk_call(A, FN_RSQRT, p);
	default: return rounded(L, x->dtype, p);   /* cast */
	}
}

/* ---- blocks --------------------------------------------------------------------------- */

static tir_buffer *value_buffer(glow *L, int v, const char *name, tir_dtype t,
				tir_buf_role role)
{
	const tir_gvalue *x = val(L, v);
	int64_t one = 1;
	return program_buffer(L->p, name, t, x->ndim ? x->ndim : 1, x->ndim ? x->shape : &one,
			      TIR_SCOPE_GLOBAL, role);
}

/* A block over the n spatial iterators of a value's shape (a rank-0 value:
 * one of extent 1) and nred reduction iterators; vars gets them all. */
static tir_block *new_block(glow *L, const char *name, const tir_gvalue *x, int nred,
			    const int64_t *rext, tir_var **vars, const char **loops)
{
	tir_block *b = block_new(L->p, name);
	int ns = x->ndim ? x->ndim : 1;
	for (int i = 0; i < ns + nred; i++) {
		bool red = i >= ns;
		int k = red ? i - ns : i;
		char vn[16], ln[16];
		snprintf(vn, sizeof vn, "v%c%d", red ? 'r' : 'i', k);
		snprintf(ln, sizeof ln, "%c%d", red ? 'r' : 'i', k);
		vars[i] = program_var(L->p, vn);
		loops[i] = arena_strdup(L->a, ln);
		block_add_iter(b, vars[i], red ? rext[k] : x->ndim ? x->shape[k] : 1,
			       red ? ITER_REDUCE : ITER_SPATIAL, NULL);
	}
	return b;
}

static void finish(glow *L, tir_block *b, tir_buffer *store, tir_expr *const *sidx,
		   const char *const *loops)
{
	b->store = store;
	for (int d = 0; d < store->ndim; d++)
		b->store_idx[d] = sidx[d];
	block_update_regions(L->p, b);
	stmt_append(L->p->root, program_nest(L->p, b, loops));
}

/* A pointwise or view node, or the division / rounding of a reduction
 * (from != NULL: out = from / div, rounded). */
static void emit_elementwise(glow *L, int v, const char *name, tir_buffer *out,
			     tir_buffer *from, double div)
{
	const tir_gvalue *x = val(L, v);
	tir_var *vars[TIR_MAX_ITERS];
	const char *loops[TIR_MAX_ITERS];
	tir_block *b = new_block(L, name, x, 0, NULL, vars, loops);
	tir_expr *idx[TIR_MAX_DIMS];
	for (int d = 0; d < out->ndim; d++)
		idx[d] = mk_var(L->a, vars[d]);
	tir_expr *e;
	if (from) {
		e = mk_load(L->a, from, from->ndim, idx);
		if (div > 0)
			e = mk_bin(L->a, E_DIV, e, F(L, div));
	} else {
		e = compute_at(L, v, idx);
	}
	b->value = mk_cast(L->a, out->dtype, e);
	finish(L, b, out, idx, loops);
}

static void emit_reduction(glow *L, int v, const char *block, tir_buffer *acc)
{
	const tir_gvalue *x = val(L, v), *a = val(L, x->arg[0]);
	int64_t rext[TIR_MAX_DIMS];
	int nred = 0;
	for (int d = 0; d < a->ndim; d++)
		if (x->rdims & (1u << d))
			rext[nred++] = a->shape[d];
	tir_var *vars[TIR_MAX_ITERS];
	const char *loops[TIR_MAX_ITERS];
	tir_block *b = new_block(L, block, x, nred, rext, vars, loops);
	int ns = x->ndim ? x->ndim : 1;
	tir_expr *sidx[TIR_MAX_DIMS], *ai[TIR_MAX_DIMS];
	for (int d = 0; d < ns; d++)
		sidx[d] = mk_var(L->a, vars[d]);
	int r = 0, o = 0;
	for (int d = 0; d < a->ndim; d++) {
		if (x->rdims & (1u << d)) {
			ai[d] = mk_var(L->a, vars[ns + r++]);
			if (x->keepdim)
				o++;
		} else {
			ai[d] = sidx[o++];
		}
	}
	b->reduce = x->op == GOP_AMAX ? REDUCE_MAX : x->op == GOP_AMIN ? REDUCE_MIN : REDUCE_SUM;
	b->value = value_at(L, x->arg[0], ai);
	b->init = reduce_identity(L->a, b->reduce, TIR_F32);
	finish(L, b, acc, sidx, loops);
}

typedef struct heavy_ctx {
	glow *L;
	const tir_gvalue *x;
} heavy_ctx;

static tir_expr *heavy_operand(void *ctx, int k, tir_expr *const *idx)
{
	heavy_ctx *h = ctx;
	return value_at(h->L, h->x->arg[k], idx);
}

/* Node v, realized: its block(s), and what its readers load. */
static void emit_node(glow *L, int v)
{
	const tir_gvalue *x = val(L, v);
	tir_gkind kind = gop_kind(x->op);
	tir_buffer *out = L->buf[v];            /* a parameter, or a temporary: */
	bool temp = !out;
	if (temp)
		out = value_buffer(L, v, sanitize(L->a, x->name),
				   kind == GK_REDUCTION ? TIR_F32 : x->dtype, BUF_TEMP);
	const char *bn = out->name;
	const char *block = arena_printf(L->a, "%s_%s", node_op_name(x), bn);
	switch (kind) {
	case GK_HEAVY: {
		L->buf[v] = out;
		heavy_ctx h = { L, x };
		compute_io io = { block, bn, heavy_operand, &h, out };
		compute_into(L->p, x->heavy, &io);
		break;
	}
	case GK_REDUCTION: {
		double n = 1;
		const tir_gvalue *a = val(L, x->arg[0]);
		for (int d = 0; d < a->ndim; d++)
			if (x->rdims & (1u << d))
				n *= (double)a->shape[d];
		double div = x->op == GOP_MEAN ? n : 0;
		if (temp) {        /* the sum in float32; readers divide and round */
			L->buf[v] = out;
			L->div[v] = div;
			emit_reduction(L, v, block, out);
		} else if (div > 0 || out->dtype != TIR_F32) {
			tir_buffer *acc = value_buffer(L, v, arena_printf(L->a, "%s_acc", bn),
						       TIR_F32, BUF_TEMP);
			emit_reduction(L, v, block, acc);
			emit_elementwise(L, v, arena_printf(L->a, "%s_out", block), out, acc, div);
		} else {
			emit_reduction(L, v, block, out);
		}
		break;
	}
	default:
		emit_elementwise(L, v, block, out, NULL, 0);
		L->buf[v] = out;      /* after: its own expression reads its arguments */
		break;
	}
}

static tir_program *lower_part(const tir_workload *w, const unsigned char *part,
			       const unsigned char *realize, const unsigned char *plan,
			       tir_error *err)
{
	if (check_graph(w, err))
		return NULL;
	glow L = { .g = w->graph, .plan = plan };
	if (decide(&L, part, realize, err)) {
		glow_free(&L);
		return NULL;
	}
	const tir_graph *g = L.g;
	L.p = program_new(w);
	L.a = &L.p->arena;
	L.buf = xcalloc((size_t)L.nv, sizeof *L.buf);
	L.div = xcalloc((size_t)L.nv, sizeof *L.div);

	/* parameters: what the part reads from outside, then its outputs */
	unsigned char *read = xcalloc((size_t)L.nv, 1);
	for (int v = g->ninputs; v < L.nv; v++)
		for (int i = 0; L.part[v] && i < val(&L, v)->nargs; i++)
			if (val(&L, v)->arg[i] >= 0 && !L.part[val(&L, v)->arg[i]])
				read[val(&L, v)->arg[i]] = 1;
	for (int v = 0; v < L.nv; v++)
		if (read[v])
			L.buf[v] = value_buffer(&L, v, sanitize(L.a, val(&L, v)->name),
						val(&L, v)->dtype, BUF_INPUT);
	free(read);
	for (int k = 0; k < g->noutputs; k++) {
		int v = g->outputs[k];
		if (L.part[v])
			L.buf[v] = value_buffer(&L, v, sanitize(L.a, val(&L, v)->name),
						val(&L, v)->dtype, BUF_OUTPUT);
	}
	for (int v = g->ninputs; v < L.nv; v++)
		if (L.out[v] && val(&L, v)->output < 0)
			L.buf[v] = value_buffer(&L, v, sanitize(L.a, val(&L, v)->name),
						val(&L, v)->dtype, BUF_OUTPUT);

	for (int v = g->ninputs; v < L.nv; v++)
		if (L.part[v] && L.real[v])
			emit_node(&L, v);
	tir_program *p = L.p;
	glow_free(&L);
	return p;
}

tir_program *tir_graph_program(const tir_workload *w, const unsigned char *part,
			       const unsigned char *realize, tir_error *err)
{
	return lower_part(w, part, realize, NULL, err);
}

void graph_kernel_nodes(const tir_graph *g, const unsigned char *realize,
			const unsigned char *members, unsigned char *nodes)
{
	memset(nodes, 0, (size_t)g->nnodes);
	/* from the last node back: a node's arguments come before it */
	for (int i = g->nnodes - 1; i >= 0; i--) {
		if (!members[i] && !nodes[i])
			continue;
		nodes[i] = 1;
		const tir_gvalue *x = &g->v[g->ninputs + i];
		for (int k = 0; k < x->nargs; k++) {
			int a = x->arg[k] - g->ninputs;
			if (x->arg[k] >= g->ninputs && !realize[a])
				nodes[a] = 1;
		}
	}
}

tir_program *tir_graph_kernel(const tir_workload *w, const unsigned char *realize,
			      const unsigned char *members, tir_error *err)
{
	if (check_graph(w, err))
		return NULL;
	const tir_graph *g = w->graph;
	for (int i = 0; i < g->nnodes; i++)
		if (members[i] && !realize[i]) {
			tir_fail(err, "graph: node \"%s\" is a member of a kernel but not realized",
				 g->v[g->ninputs + i].name);
			return NULL;
		}
	unsigned char *part = xcalloc((size_t)g->nnodes + 1, 1);
	graph_kernel_nodes(g, realize, members, part);
	tir_program *p = lower_part(w, part, realize, realize, err);
	free(part);
	return p;
}
