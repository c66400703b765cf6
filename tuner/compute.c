/*
 * compute.c — operators as compute definitions.
 *
 * Each operator of ops.def is defined here by its compute: buffers, an output
 * iteration space, reduction axes and a body over affine accesses.  From that
 * one description the initial program is built: one block per stage inside a
 * loop nest bound one-to-one to its iterators.  Stages:
 *   pad       (optional) an injective producer: X_pad = select(in bounds, X, 0)
 *   compute   the operator: out += cast(in) * cast(weight) over the reduction
 *   epilogue  (optional) an injective consumer: bias, relu, gelu, add
 * There is no per-operator kernel anywhere in libtir: schedules, validation
 * and code generation see only these blocks.
 *
 * The same stages can be built into a larger program (compute_into: a heavy
 * node of a graph workload, graph.c): the operands are then not parameters
 * but values the caller supplies at an index (a load of some buffer, or a
 * prologue expression), the output is a buffer the caller made, and the
 * blocks and temporaries are named after the caller's node.  A
 * single-operator program is built by the same code with its operands as
 * parameters, so its program does not change.
 *
 * Argument order of the generated code (and of measure/reference.c): the
 * inputs, the epilogue operands in the order listed, then the output.
 * Layouts:
 *   matmul   NN: A[M,K] B[K,N]  NT: A[M,K] B[N,K]  TN: A[K,M] B[K,N]
 *            (a leading batch axis on all three with "batch")
 *   conv     channels-first X[N,C,*in]  W[K,C/groups,*kernel]   Y[N,K,*out]
 *            channels-last  X[N,*in,C]  W[*kernel,C/groups,K]   Y[N,*out,K]
 *   depthwise W[C,multiplier,R,S] or W[R,S,C,multiplier]; K = C*multiplier
 *   transpose W[C,K/groups,R,S] or W[R,S,C,K/groups]
 */
#include <stdio.h>
#include <string.h>
#include "ir/ir.h"

typedef struct cdef {
	tir_program *p;
	tir_arena *a;
	const tir_workload *w;
	/* NULL: a single-operator program, whose operands are the parameters
	 * opbuf[]; else the caller's operands, output and names */
	const compute_io *io;
	tir_buffer *opbuf[TIR_MAX_OPERANDS];
	int bias_op, res_op;        /* operand index of bias / residual, or -1 */
	int nops;
} cdef;

static tir_expr *V(cdef *c, tir_var *v) { return mk_var(c->a, v); }
static tir_expr *I(cdef *c, int64_t x) { return mk_int(c->a, x); }

static tir_expr *zero(cdef *c, tir_dtype t)
{
	if (dtype_is_float(t))
		return mk_float(c->a, 0.0, t);
	return mk_cast(c->a, t, I(c, 0));
}

static tir_expr *load(cdef *c, tir_buffer *b, tir_expr **idx)
{
	return mk_load(c->a, b, b->ndim, idx);
}

/* The value of operand k at idx, in the operand's dtype: a load of its
 * parameter, or what the caller supplies, cast to that dtype. */
static tir_expr *operand(cdef *c, int k, tir_expr **idx)
{
	if (!c->io)
		return load(c, c->opbuf[k], idx);
	tir_dtype t = k < 2 ? c->w->dtype : c->w->out_dtype;
	return mk_cast(c->a, t, c->io->load(c->io->ctx, k, idx));
}

/* A block or temporary's name: the single-operator one, or the caller's
 * block name (blocks) or prefix (buffers) and a suffix. */
static const char *block_name(cdef *c, const char *single, const char *suffix)
{
	if (!c->io)
		return single;
	return suffix ? arena_printf(c->a, "%s_%s", c->io->block, suffix) : c->io->block;
}

static const char *temp_name(cdef *c, const char *single, const char *suffix)
{
	return c->io ? arena_printf(c->a, "%s_%s", c->io->prefix, suffix) : single;
}

/* Creates a block with iterators named names[0..n) (kinds by `nreduce`
 * trailing reduction iterators), puts it in its own loop nest at the end of
 * the root, and returns it.  The caller fills store/value before
 * finish_block. */
static tir_block *stage(cdef *c, const char *name, int n, const char *const *names,
			const int64_t *extents, int nreduce, tir_var **vars)
{
	tir_block *b = block_new(c->p, name);
	for (int i = 0; i < n; i++) {
		char vn[32];
		snprintf(vn, sizeof vn, "v%s", names[i]);
		vars[i] = program_var(c->p, vn);
		block_add_iter(b, vars[i], extents[i],
			       i >= n - nreduce ? ITER_REDUCE : ITER_SPATIAL, NULL);
	}
	return b;
}

static void finish_block(cdef *c, tir_block *b, const char *const *names)
{
	block_update_regions(c->p, b);
	stmt_append(c->p->root, program_nest(c->p, b, names));
}

static void set_store(tir_block *b, tir_buffer *out, tir_expr **idx)
{
	b->store = out;
	for (int d = 0; d < out->ndim; d++)
		b->store_idx[d] = idx[d];
}

/* The epilogue operands in the listed order (operands 2, 3): their
 * indices, and for a single-operator program their parameters. */
static void epilogue_params(cdef *c, int64_t channels, int ndim, const int64_t *shape)
{
	const tir_workload *w = c->w;
	c->bias_op = c->res_op = -1;
	for (int i = 0; i < w->nepilogue; i++) {
		if (w->epilogue[i] == TIR_EPI_BIAS) {
			c->bias_op = c->nops++;
			if (!c->io)
				c->opbuf[c->bias_op] = program_buffer(c->p, "bias", w->out_dtype, 1,
								      &channels, TIR_SCOPE_GLOBAL,
								      BUF_INPUT);
		} else if (w->epilogue[i] == TIR_EPI_ADD) {
			c->res_op = c->nops++;
			if (!c->io)
				c->opbuf[c->res_op] = program_buffer(c->p, "residual", w->out_dtype,
								     ndim, shape, TIR_SCOPE_GLOBAL,
								     BUF_INPUT);
		}
	}
}

static bool has_pointwise_epilogue(const tir_workload *w) { return w->nepilogue > 0; }

/* The epilogue stage: out[idx] = f(acc[idx]) over the output's iterators;
 * chan is the position of the channel axis among them. */
static void epilogue_stage(cdef *c, tir_buffer *acc, tir_buffer *out, int chan,
			   const char *const *names)
{
	const tir_workload *w = c->w;
	tir_var *vars[TIR_MAX_ITERS];
	tir_block *b = stage(c, block_name(c, "epilogue", "epilogue"), out->ndim, names,
			     out->shape, 0, vars);
	tir_expr *idx[TIR_MAX_DIMS];
	for (int d = 0; d < out->ndim; d++)
		idx[d] = V(c, vars[d]);
	tir_expr *x = load(c, acc, idx);
	for (int i = 0; i < w->nepilogue; i++) {
		switch (w->epilogue[i]) {
		case TIR_EPI_BIAS: {
			tir_expr *ci = idx[chan];
			x = mk_add(c->a, x, operand(c, c->bias_op, &ci));
			break;
		}
		case TIR_EPI_RELU:
			x = mk_bin(c->a, E_MAX, x, zero(c, x->dtype));
			break;
		case TIR_EPI_GELU:
			x = mk_call(c->a, FN_GELU, x);
			break;
		case TIR_EPI_ADD:
			x = mk_add(c->a, x, operand(c, c->res_op, idx));
			break;
		default:
			break;
		}
	}
	set_store(b, out, idx);
	b->value = x;
	finish_block(c, b, names);
}

/* The shapes of A, B and C; returns their rank. */
static int matmul_shapes(const tir_workload *w, int64_t *ash, int64_t *bsh, int64_t *csh)
{
	int bt = w->batch > 0;
	int64_t M = w->M, N = w->N, K = w->K;
	int r = 0;
	if (bt) { ash[0] = bsh[0] = csh[0] = w->batch; r = 1; }
	bool ta = w->mm_layout == TIR_LAYOUT_TN, tb = w->mm_layout == TIR_LAYOUT_NT;
	ash[r] = ta ? K : M; ash[r + 1] = ta ? M : K;
	bsh[r] = tb ? N : K; bsh[r + 1] = tb ? K : N;
	csh[r] = M; csh[r + 1] = N;
	return r + 2;
}

static void build_matmul(cdef *c)
{
	const tir_workload *w = c->w;
	int bt = w->batch > 0;
	int64_t M = w->M, N = w->N, K = w->K;
	int64_t ash[3], bsh[3], csh[3];
	int nd = matmul_shapes(w, ash, bsh, csh), r = nd - 2;
	bool ta = w->mm_layout == TIR_LAYOUT_TN, tb = w->mm_layout == TIR_LAYOUT_NT;
	c->nops = 2;
	if (!c->io) {
		c->opbuf[0] = program_buffer(c->p, "A", w->dtype, nd, ash, TIR_SCOPE_GLOBAL, BUF_INPUT);
		c->opbuf[1] = program_buffer(c->p, "B", w->dtype, nd, bsh, TIR_SCOPE_GLOBAL, BUF_INPUT);
	}
	epilogue_params(c, N, nd, csh);
	tir_buffer *C = c->io ? c->io->out
		: program_buffer(c->p, "C", w->out_dtype, nd, csh, TIR_SCOPE_GLOBAL, BUF_OUTPUT);
	tir_buffer *acc = C;
	if (has_pointwise_epilogue(w))
		acc = program_buffer(c->p, temp_name(c, "C_acc", "acc"), w->out_dtype, nd, csh,
				     TIR_SCOPE_GLOBAL, BUF_TEMP);

	const char *names4[] = { "b", "i", "j", "k" };
	const char *const *names = bt ? names4 : names4 + 1;
	int64_t ext[4] = { w->batch, M, N, K };
	tir_var *v[4];
	tir_block *blk = stage(c, block_name(c, "compute", NULL), nd + 1, names,
			       bt ? ext : ext + 1, 1, v);
	tir_expr *b0 = bt ? V(c, v[0]) : NULL;
	tir_expr *i = V(c, v[r]), *j = V(c, v[r + 1]), *k = V(c, v[r + 2]);
	tir_expr *ai[3], *bi[3], *ci[3];
	if (bt) ai[0] = bi[0] = ci[0] = b0;
	ai[r] = ta ? k : i; ai[r + 1] = ta ? i : k;
	bi[r] = tb ? j : k; bi[r + 1] = tb ? k : j;
	ci[r] = i; ci[r + 1] = j;
	tir_dtype at = w->out_dtype;
	blk->value = mk_mul(c->a, mk_cast(c->a, at, operand(c, 0, ai)),
			    mk_cast(c->a, at, operand(c, 1, bi)));
	blk->reduce = REDUCE_SUM;
	blk->init = zero(c, at);
	set_store(blk, acc, ci);
	finish_block(c, blk, names);
	if (acc != C)
		epilogue_stage(c, acc, C, nd - 1, names);
}

/* The position of spatial dimension d and of the channel axis in a tensor of
 * the workload's layout with nd spatial dimensions. */
static int spatial_pos(const tir_workload *w, int d) { return w->channels_last ? 1 + d : 2 + d; }
static int chan_pos(const tir_workload *w) { return w->channels_last ? w->nd + 1 : 1; }

static void act_shape(const tir_workload *w, int64_t n, int64_t ch, const int64_t *sp,
		      int64_t *shape)
{
	shape[0] = n;
	shape[chan_pos(w)] = ch;
	for (int d = 0; d < w->nd; d++)
		shape[spatial_pos(w, d)] = sp[d];
}

/* The weight tensor: channels-first [o, i, *kernel], channels-last
 * [*kernel, i, o]. */
static void weight_shape(const tir_workload *w, int64_t o, int64_t i, int64_t *shape)
{
	if (w->channels_last) {
		for (int d = 0; d < w->nd; d++)
			shape[d] = w->kernel[d];
		shape[w->nd] = i;
		shape[w->nd + 1] = o;
	} else {
		shape[0] = o;
		shape[1] = i;
		for (int d = 0; d < w->nd; d++)
			shape[2 + d] = w->kernel[d];
	}
}

static void weight_idx(const tir_workload *w, tir_expr *o, tir_expr *i,
		       tir_expr *const *kr, tir_expr **idx)
{
	if (w->channels_last) {
		for (int d = 0; d < w->nd; d++)
			idx[d] = kr[d];
		idx[w->nd] = i;
		idx[w->nd + 1] = o;
	} else {
		idx[0] = o;
		idx[1] = i;
		for (int d = 0; d < w->nd; d++)
			idx[2 + d] = kr[d];
	}
}

static const char *const sp_names[3][3] = {
	{ "w" }, { "h", "w" }, { "d", "h", "w" } };
static const char *const kr_names[3][3] = {
	{ "s" }, { "r", "s" }, { "t", "r", "s" } };

/* The pad stage: P[n, c, y...] = select(cond, X[n, c, src(y)...], 0) with a
 * per-dimension source index and condition from `map`. */
typedef tir_expr *(*pad_map)(cdef *c, int d, tir_expr *y, tir_expr **cond);

static tir_expr *map_pad(cdef *c, int d, tir_expr *y, tir_expr **cond)
{
	const tir_workload *w = c->w;
	tir_expr *x = mk_sub(c->a, y, I(c, w->pad_lo[d]));
	if (w->pad_lo[d] > 0)
		*cond = mk_and(c->a, *cond, mk_bin(c->a, E_LE, I(c, w->pad_lo[d]), y));
	if (w->pad_hi[d] > 0)
		*cond = mk_and(c->a, *cond, mk_bin(c->a, E_LT, y, I(c, w->pad_lo[d] + w->in[d])));
	return x;
}

/* conv2d_transpose: the input dilated by the stride, then padded so that a
 * stride-1 convolution with the flipped kernel gives the transposed one. */
static tir_expr *map_dilate(cdef *c, int d, tir_expr *y, tir_expr **cond)
{
	const tir_workload *w = c->w;
	int64_t off = w->dilation[d] * (w->kernel[d] - 1) - w->pad_lo[d];
	int64_t s = w->stride[d];
	tir_expr *z = mk_sub(c->a, y, I(c, off));
	*cond = mk_and(c->a, *cond, mk_bin(c->a, E_LE, I(c, 0), z));
	if (s > 1)
		*cond = mk_and(c->a, *cond, mk_bin(c->a, E_EQ, mk_floormod(c->a, z, I(c, s)), I(c, 0)));
	*cond = mk_and(c->a, *cond, mk_bin(c->a, E_LT, z, I(c, (w->in[d] - 1) * s + 1)));
	return s > 1 ? mk_floordiv(c->a, z, I(c, s)) : z;
}

static tir_buffer *pad_stage(cdef *c, int rank, const int64_t *padded, pad_map map)
{
	const tir_workload *w = c->w;
	int64_t shape[TIR_MAX_DIMS];
	act_shape(w, w->n, w->c, padded, shape);
	tir_buffer *P = program_buffer(c->p, temp_name(c, "X_pad", "pad"), w->dtype, rank,
				       shape, TIR_SCOPE_GLOBAL, BUF_TEMP);
	const char *names[TIR_MAX_DIMS];
	names[0] = "n";
	names[chan_pos(w)] = "c";
	for (int d = 0; d < w->nd; d++)
		names[spatial_pos(w, d)] = sp_names[w->nd - 1][d];
	tir_var *v[TIR_MAX_DIMS];
	tir_block *b = stage(c, block_name(c, "pad", "pad"), rank, names, shape, 0, v);
	tir_expr *oi[TIR_MAX_DIMS], *xi[TIR_MAX_DIMS], *cond = NULL;
	for (int d = 0; d < rank; d++)
		oi[d] = xi[d] = V(c, v[d]);
	for (int d = 0; d < w->nd; d++) {
		int pos = spatial_pos(w, d);
		xi[pos] = map(c, d, oi[pos], &cond);
	}
	set_store(b, P, oi);
	tir_expr *x = operand(c, 0, xi);
	b->value = cond ? mk_select(c->a, cond, x, zero(c, w->dtype)) : x;
	finish_block(c, b, names);
	return P;
}

/* The shapes of X, W and Y of a convolution. */
static void conv_shapes(const tir_workload *w, int64_t *xsh, int64_t *wsh, int64_t *ysh)
{
	bool transpose = w->op == TIR_OP_CONV2D_TRANSPOSE;
	bool dw = w->op == TIR_OP_DEPTHWISE_CONV2D;
	int64_t K = dw ? w->c * w->multiplier : w->k;
	int64_t G = dw ? w->c : w->groups;
	int64_t Cg = w->c / G, Kg = K / G;
	act_shape(w, w->n, w->c, w->in, xsh);
	act_shape(w, w->n, K, w->out, ysh);
	if (dw)
		weight_shape(w, w->multiplier, w->c, wsh);   /* [C, mult, ...] / [..., C, mult] */
	else if (transpose)
		weight_shape(w, Kg, w->c, wsh);              /* [C, K/g, ...] / [..., C, K/g] */
	else
		weight_shape(w, K, Cg, wsh);
	if (dw && !w->channels_last) {   /* depthwise channels-first is [C, mult, R, S] */
		wsh[0] = w->c;
		wsh[1] = w->multiplier;
	}
	if (transpose && !w->channels_last) {
		wsh[0] = w->c;
		wsh[1] = Kg;
	}
}

static void build_conv_common(cdef *c, bool transpose)
{
	const tir_workload *w = c->w;
	int nd = w->nd, rank = nd + 2;
	bool dw = w->op == TIR_OP_DEPTHWISE_CONV2D;
	int64_t K = dw ? w->c * w->multiplier : w->k;
	int64_t G = dw ? w->c : w->groups;
	int64_t Cg = w->c / G, Kg = K / G;
	int64_t xsh[TIR_MAX_DIMS], wsh[TIR_MAX_DIMS], ysh[TIR_MAX_DIMS];
	conv_shapes(w, xsh, wsh, ysh);
	c->nops = 2;
	if (!c->io) {
		c->opbuf[0] = program_buffer(c->p, "X", w->dtype, rank, xsh, TIR_SCOPE_GLOBAL, BUF_INPUT);
		c->opbuf[1] = program_buffer(c->p, "W", w->dtype, rank, wsh, TIR_SCOPE_GLOBAL, BUF_INPUT);
	}
	epilogue_params(c, K, rank, ysh);
	tir_buffer *Y = c->io ? c->io->out
		: program_buffer(c->p, "Y", w->out_dtype, rank, ysh, TIR_SCOPE_GLOBAL, BUF_OUTPUT);
	tir_buffer *acc = Y;
	if (has_pointwise_epilogue(w))
		acc = program_buffer(c->p, temp_name(c, "Y_acc", "acc"), w->out_dtype, rank, ysh,
				     TIR_SCOPE_GLOBAL, BUF_TEMP);

	/* the (padded or dilated) input: NULL reads operand 0 itself */
	tir_buffer *P = c->opbuf[0];
	int64_t padded[3];
	bool need_pad = transpose;
	for (int d = 0; d < nd; d++) {
		if (transpose)
			padded[d] = w->out[d] + (w->kernel[d] - 1) * w->dilation[d];
		else
			padded[d] = w->in[d] + w->pad_lo[d] + w->pad_hi[d];
		if (w->pad_lo[d] || w->pad_hi[d])
			need_pad = true;
	}
	if (need_pad)
		P = pad_stage(c, rank, padded, transpose ? map_dilate : map_pad);

	/* iterators: spatial in output layout order, then the reduction */
	const char *names[TIR_MAX_ITERS] = { 0 };
	int64_t ext[TIR_MAX_ITERS] = { 0 };
	int n = 0;
	for (int d = 0; d < rank; d++) {
		if (d == 0) names[n] = "n";
		else if (d == chan_pos(w)) names[n] = "k";
		else names[n] = sp_names[nd - 1][d - spatial_pos(w, 0)];
		ext[n++] = ysh[d];
	}
	int nred = 0;
	int cpos = -1;
	if (!dw && w->channels_last) {
		for (int d = 0; d < nd; d++) { names[n] = kr_names[nd - 1][d]; ext[n++] = w->kernel[d]; nred++; }
		cpos = n; names[n] = "c"; ext[n++] = Cg; nred++;
	} else {
		if (!dw) { cpos = n; names[n] = "c"; ext[n++] = Cg; nred++; }
		for (int d = 0; d < nd; d++) { names[n] = kr_names[nd - 1][d]; ext[n++] = w->kernel[d]; nred++; }
	}
	tir_var *v[TIR_MAX_ITERS];
	tir_block *b = stage(c, block_name(c, "compute", NULL), n, names, ext, nred, v);
	tir_expr *yi[TIR_MAX_DIMS];
	for (int d = 0; d < rank; d++)
		yi[d] = V(c, v[d]);
	tir_expr *k = yi[chan_pos(w)];
	tir_expr *kr[3];
	int rfirst = rank + ((!dw && !w->channels_last) ? 1 : 0);
	for (int d = 0; d < nd; d++)
		kr[d] = V(c, v[rfirst + d]);
	tir_expr *cin = cpos >= 0 ? V(c, v[cpos]) : NULL;

	/* input channel and weight index */
	tir_expr *ic, *wi[TIR_MAX_DIMS];
	if (dw) {
		ic = w->multiplier == 1 ? k : mk_floordiv(c->a, k, I(c, w->multiplier));
		tir_expr *m = w->multiplier == 1 ? I(c, 0) : mk_floormod(c->a, k, I(c, w->multiplier));
		weight_idx(w, m, ic, kr, wi);
		if (!w->channels_last) { wi[0] = ic; wi[1] = m; }
	} else {
		ic = G == 1 ? cin : mk_add(c->a, mk_mul(c->a, mk_floordiv(c->a, k, I(c, Kg)), I(c, Cg)), cin);
		if (transpose) {
			tir_expr *flip[3];
			for (int d = 0; d < nd; d++)
				flip[d] = mk_sub(c->a, I(c, w->kernel[d] - 1), kr[d]);
			tir_expr *ko = G == 1 ? k : mk_floormod(c->a, k, I(c, Kg));
			weight_idx(w, ko, ic, flip, wi);
			if (!w->channels_last) { wi[0] = ic; wi[1] = ko; }
		} else {
			weight_idx(w, k, cin, kr, wi);
		}
	}
	tir_expr *xi[TIR_MAX_DIMS];
	xi[0] = yi[0];
	xi[chan_pos(w)] = ic;
	for (int d = 0; d < nd; d++) {
		int pos = spatial_pos(w, d);
		int64_t s = transpose ? 1 : w->stride[d];
		xi[pos] = mk_add(c->a, mk_mul(c->a, yi[pos], I(c, s)),
				 mk_mul(c->a, kr[d], I(c, w->dilation[d])));
	}
	tir_dtype at = w->out_dtype;
	b->value = mk_mul(c->a, mk_cast(c->a, at, P ? load(c, P, xi) : operand(c, 0, xi)),
			  mk_cast(c->a, at, operand(c, 1, wi)));
	b->reduce = REDUCE_SUM;
	b->init = zero(c, at);
	set_store(b, acc, yi);
	finish_block(c, b, names);
	if (acc != Y)
		epilogue_stage(c, acc, Y, chan_pos(w), names);
}

static void build_conv(cdef *c) { build_conv_common(c, false); }
static void build_conv_transpose(cdef *c) { build_conv_common(c, true); }
/* A graph is no compute definition: tir_program_build hands it to graph.c,
 * and a graph's heavy nodes are never graphs (graph_parse.c). */
static void build_graph(cdef *c) { (void)c; }

static void (*const builders[])(cdef *) = {
#define TIR_OP(id, name, build) build_##build,
#include "ops.def"
#undef TIR_OP
};

int compute_signature(const tir_workload *w, tir_tensor_type *ops, tir_tensor_type *out)
{
	int64_t sh[3][TIR_MAX_DIMS];
	int rank, n = 2;
	if (w->op == TIR_OP_MATMUL) {
		rank = matmul_shapes(w, sh[0], sh[1], sh[2]);
	} else {
		rank = w->nd + 2;
		conv_shapes(w, sh[0], sh[1], sh[2]);
	}
	for (int k = 0; k < 2; k++) {
		ops[k].dtype = w->dtype;
		ops[k].ndim = rank;
		memcpy(ops[k].shape, sh[k], sizeof sh[k]);
	}
	out->dtype = w->out_dtype;
	out->ndim = rank;
	memcpy(out->shape, sh[2], sizeof sh[2]);
	int chan = w->op == TIR_OP_MATMUL ? rank - 1 : chan_pos(w);
	for (int i = 0; i < w->nepilogue; i++) {
		if (w->epilogue[i] == TIR_EPI_BIAS) {
			ops[n].dtype = w->out_dtype;
			ops[n].ndim = 1;
			ops[n].shape[0] = sh[2][chan];
			n++;
		} else if (w->epilogue[i] == TIR_EPI_ADD) {
			ops[n++] = *out;
		}
	}
	return n;
}

void compute_into(tir_program *p, const tir_workload *w, const compute_io *io)
{
	cdef c = { .p = p, .a = &p->arena, .w = w, .io = io };
	builders[w->op](&c);
}

tir_program *tir_program_build(const tir_workload *w, tir_error *err)
{
	if (!w) {
		tir_fail(err, "no workload");
		return NULL;
	}
	if (w->graph)
		return tir_graph_program(w, NULL, NULL, err);
	tir_program *p = program_new(w);
	cdef c = { .p = p, .a = &p->arena, .w = w };
	builders[w->op](&c);
	return p;
}

double tir_program_param_bytes(const tir_program *p)
{
	double bytes = 0;
	for (int i = 0; i < p->nparams; i++) {
		const tir_buffer *b = p->bufs[i];
		double elems = 1;
		for (int d = 0; d < b->ndim; d++)
			elems *= (double)b->shape[d];
		bytes += elems * dtype_bytes(b->dtype);
	}
	return bytes;
}
