/*
 * reference.c — the hand-written reference: a naive, independent
 * implementation of every single-operator workload in double precision,
 * written from the operators' definitions (measure.h states the argument
 * and layout convention), not from the IR.  It was measurement's reference
 * until the interpreter of the unscheduled program took its place
 * (tuner/measure/reference.c); it stays here as the independent check of
 * that interpreter and of the compute definitions (tests/check_interp.c,
 * check_workload.c).  Convolutions of
 * 1, 2 and 3 spatial dimensions share one loop nest over three dimensions,
 * the unused ones of extent 1; layouts are handled by the index functions
 * alone, so the arithmetic is written once.
 */
#include <math.h>
#include <pthread.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ir/ir.h"
#include "measure/measure.h"
#include "reference.h"

/* A convolution's geometry with three spatial dimensions, unused ones 1. */
typedef struct geom {
	int64_t n, c, k, groups, mult;
	int64_t in[3], ker[3], out[3], stride[3], dil[3], pad[3];
	bool last;                 /* channels-last */
} geom;

/* The reference's loops run billions of times for the large suite entries;
 * sanitizer instrumentation of them multiplies the test suite's time without
 * checking anything the tests of this file do not already check. */
#define REF_HOT __attribute__((no_sanitize("address", "undefined")))

static geom geom_of(const tir_workload *w)
{
	geom g = { .n = w->n, .c = w->c, .k = w->k, .groups = w->groups,
		   .mult = w->multiplier, .last = w->channels_last };
	for (int d = 0; d < 3; d++) {
		bool used = d < w->nd;
		g.in[d] = used ? w->in[d] : 1;
		g.ker[d] = used ? w->kernel[d] : 1;
		g.out[d] = used ? w->out[d] : 1;
		g.stride[d] = used ? w->stride[d] : 1;
		g.dil[d] = used ? w->dilation[d] : 1;
		g.pad[d] = used ? w->pad_lo[d] : 0;
	}
	return g;
}

/* Offset of [n, ch, s0, s1, s2] in a tensor of `nch` channels and spatial
 * extents ext[], in the geometry's layout. */
REF_HOT static int64_t act(const geom *g, const int64_t *ext, int64_t nch, int64_t n,
		   int64_t ch, int64_t s0, int64_t s1, int64_t s2)
{
	if (g->last)
		return (((n * ext[0] + s0) * ext[1] + s1) * ext[2] + s2) * nch + ch;
	return (((n * nch + ch) * ext[0] + s0) * ext[1] + s1) * ext[2] + s2;
}

/* Offset of a weight element [a, b, r0, r1, r2] (channels-first order
 * A, B, kernel; channels-last kernel, A, B). */
REF_HOT static int64_t wgt(const geom *g, int64_t na, int64_t nb, int64_t a, int64_t b,
		   int64_t r0, int64_t r1, int64_t r2)
{
	int64_t r = (r0 * g->ker[1] + r1) * g->ker[2] + r2;
	if (g->last)
		return (r * na + a) * nb + b;
	return (a * nb + b) * (g->ker[0] * g->ker[1] * g->ker[2]) + r;
}

static void set_arg(tir_ref_arg *a, const char *name, int dtype, int ndim,
		    const int64_t *shape, bool out)
{
	memset(a, 0, sizeof *a);
	snprintf(a->name, sizeof a->name, "%s", name);
	a->dtype = dtype;
	a->ndim = ndim;
	a->elems = 1;
	for (int i = 0; i < ndim; i++) {
		a->shape[i] = shape[i];
		a->elems *= shape[i];
	}
	a->is_output = out;
}

/* Shape of an activation [N, C, *sp] or [N, *sp, C]. */
static int act_shape(const tir_workload *w, int64_t ch, const int64_t *sp,
		     int64_t *shape)
{
	int n = 0;
	shape[n++] = w->n;
	if (!w->channels_last)
		shape[n++] = ch;
	for (int d = 0; d < w->nd; d++)
		shape[n++] = sp[d];
	if (w->channels_last)
		shape[n++] = ch;
	return n;
}

/* Shape of a weight [a, b, *kernel] or [*kernel, a, b]. */
static int wgt_shape(const tir_workload *w, int64_t a, int64_t b, int64_t *shape)
{
	int n = 0;
	if (!w->channels_last) {
		shape[n++] = a;
		shape[n++] = b;
	}
	for (int d = 0; d < w->nd; d++)
		shape[n++] = w->kernel[d];
	if (w->channels_last) {
		shape[n++] = a;
		shape[n++] = b;
	}
	return n;
}

int ref_hand_args(const tir_workload *w, tir_ref_arg *args, int max, tir_error *err)
{
	if (max < 3 + w->nepilogue)
		return tir_fail(err, "reference: room for %d arguments, %s needs up to %d",
				max, tir_workload_op(w), 3 + w->nepilogue);
	int n = 0, nd;
	int64_t s[6], out[6];
	int outnd;
	int64_t outch;
	if (w->op == TIR_OP_MATMUL) {
		int b = w->batch > 0;
		int64_t rows_a = w->mm_layout == TIR_LAYOUT_TN ? w->K : w->M;
		int64_t cols_a = w->mm_layout == TIR_LAYOUT_TN ? w->M : w->K;
		int64_t rows_b = w->mm_layout == TIR_LAYOUT_NT ? w->N : w->K;
		int64_t cols_b = w->mm_layout == TIR_LAYOUT_NT ? w->K : w->N;
		int64_t sa[3] = { w->batch, rows_a, cols_a };
		int64_t sb[3] = { w->batch, rows_b, cols_b };
		set_arg(&args[n++], "A", w->dtype, 2 + b, sa + 1 - b, false);
		set_arg(&args[n++], "B", w->dtype, 2 + b, sb + 1 - b, false);
		out[0] = w->batch;
		out[1] = w->M;
		out[2] = w->N;
		outnd = 2 + b;
		memmove(out, out + 1 - b, sizeof(int64_t) * (size_t)outnd);
		outch = w->N;
	} else {
		nd = act_shape(w, w->c, w->in, s);
		set_arg(&args[n++], "X", w->dtype, nd, s, false);
		if (w->op == TIR_OP_DEPTHWISE_CONV2D)
			nd = wgt_shape(w, w->c, w->multiplier, s);
		else if (w->op == TIR_OP_CONV2D_TRANSPOSE)
			nd = wgt_shape(w, w->c, w->k / w->groups, s);
		else if (w->channels_last)     /* [*kernel, C/groups, K] */
			nd = wgt_shape(w, w->c / w->groups, w->k, s);
		else                           /* [K, C/groups, *kernel] */
			nd = wgt_shape(w, w->k, w->c / w->groups, s);
		set_arg(&args[n++], "W", w->dtype, nd, s, false);
		outnd = act_shape(w, w->k, w->out, out);
		outch = w->k;
	}
	for (int i = 0; i < w->nepilogue; i++) {
		if (w->epilogue[i] == TIR_EPI_BIAS)
			set_arg(&args[n++], "bias", w->out_dtype, 1, &outch, false);
		else if (w->epilogue[i] == TIR_EPI_ADD)
			set_arg(&args[n++], "add", w->out_dtype, outnd, out, false);
	}
	set_arg(&args[n++], w->op == TIR_OP_MATMUL ? "C" : "Y", w->out_dtype, outnd, out, true);
	return n;
}

/* ---- operators ------------------------------------------------------------------- */

/* Rows [i0, i1) of every batch of C: C[i, :] = sum over k of A[i, k] B[k, :],
 * k outside j so that the inner loop runs along a row of B (in NN and TN). */
REF_HOT static void ref_matmul_rows(const tir_workload *w, const double *A, const double *B,
				    double *C, int64_t i0, int64_t i1)
{
	int64_t nb = w->batch > 0 ? w->batch : 1, M = w->M, N = w->N, K = w->K;
	/* element strides: A[i, k] at i * ai + k * ak, B[k, j] at k * bk + j * bj */
	bool ta = w->mm_layout == TIR_LAYOUT_TN, tb = w->mm_layout == TIR_LAYOUT_NT;
	int64_t ai = ta ? 1 : K, ak = ta ? M : 1, bk = tb ? 1 : N, bj = tb ? K : 1;
	for (int64_t b = 0; b < nb; b++) {
		const double *a = A + b * M * K, *bb = B + b * K * N;
		double *c = C + b * M * N;
		for (int64_t i = i0; i < i1; i++) {
			double *row = c + i * N;
			for (int64_t j = 0; j < N; j++)
				row[j] = 0;
			for (int64_t k = 0; k < K; k++) {
				double x = a[i * ai + k * ak];
				const double *y = bb + k * bk;
				for (int64_t j = 0; j < N; j++)
					row[j] += x * y[j * bj];
			}
		}
	}
}

/* The operators compute a part [lo, hi) of one output axis (matmul rows,
 * convolution output channels); large ones split the axis over threads,
 * joined before returning, so a caller that forks afterwards forks a
 * single-threaded process. */
typedef void (*ref_part_fn)(const tir_workload *w, const double *X, const double *W,
			    double *Y, int64_t lo, int64_t hi);

typedef struct ref_part {
	ref_part_fn fn;
	const tir_workload *w;
	const double *X, *W;
	double *Y;
	int64_t lo, hi;
} ref_part;

static void *ref_thread(void *arg)
{
	ref_part *p = arg;
	p->fn(p->w, p->X, p->W, p->Y, p->lo, p->hi);
	return NULL;
}

#define REF_MAX_THREADS 64
static void ref_split(ref_part_fn fn, const tir_workload *w, const double *X, const double *W,
		      double *Y, int64_t n, double macs)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	int nt = macs < 1e8 || cores < 2 ? 1 : cores > REF_MAX_THREADS ? REF_MAX_THREADS : (int)cores;
	if (nt > n)
		nt = n > 0 ? (int)n : 1;
	ref_part part[REF_MAX_THREADS];
	pthread_t tid[REF_MAX_THREADS];
	bool running[REF_MAX_THREADS] = { false };
	for (int t = 0; t < nt; t++)
		part[t] = (ref_part){ fn, w, X, W, Y, n * t / nt, n * (t + 1) / nt };
	for (int t = 1; t < nt; t++)
		running[t] = pthread_create(&tid[t], NULL, ref_thread, &part[t]) == 0;
	fn(w, X, W, Y, part[0].lo, part[0].hi);
	for (int t = 1; t < nt; t++) {
		if (running[t])
			pthread_join(tid[t], NULL);
		else       /* no thread: this part here */
			fn(w, X, W, Y, part[t].lo, part[t].hi);
	}
}

static void ref_matmul(const tir_workload *w, const double *A, const double *B, double *C)
{
	double macs = (double)(w->batch > 0 ? w->batch : 1) * (double)w->M * (double)w->N *
		      (double)w->K;
	ref_split(ref_matmul_rows, w, A, B, C, w->M, macs);
}

/* The kernel window of output position (o0, o1, o2) that lands inside the
 * input: for each such tap, its kernel offsets and input position, into
 * tap[k][0..5] = r0, r1, r2, i0, i1, i2 (room for the whole window).
 * Returns how many. */
REF_HOT static int window(const geom *g, int64_t o0, int64_t o1, int64_t o2,
			  int64_t (*tap)[6])
{
	int n = 0;
	for (int64_t r0 = 0; r0 < g->ker[0]; r0++) {
		int64_t i0 = o0 * g->stride[0] - g->pad[0] + r0 * g->dil[0];
		if (i0 < 0 || i0 >= g->in[0])
			continue;
		for (int64_t r1 = 0; r1 < g->ker[1]; r1++) {
			int64_t i1 = o1 * g->stride[1] - g->pad[1] + r1 * g->dil[1];
			if (i1 < 0 || i1 >= g->in[1])
				continue;
			for (int64_t r2 = 0; r2 < g->ker[2]; r2++) {
				int64_t i2 = o2 * g->stride[2] - g->pad[2] + r2 * g->dil[2];
				if (i2 < 0 || i2 >= g->in[2])
					continue;
				int64_t *t = tap[n++];
				t[0] = r0, t[1] = r1, t[2] = r2, t[3] = i0, t[4] = i1, t[5] = i2;
			}
		}
	}
	return n;
}

/* Forward convolution, channels-last and not depthwise (W[*ker, C/groups,
 * K]): for each output position the output channels [k0, k1) are summed
 * together, the innermost loop running along a contiguous row of W. */
REF_HOT static void ref_conv_last(const tir_workload *w, const double *X, const double *W,
				  double *Y, int64_t k0, int64_t k1)
{
	geom g = geom_of(w);
	int64_t cg = g.c / g.groups, kg = g.k / g.groups;
	double *acc = xcalloc((size_t)(k1 - k0) + 1, sizeof(double));
	int64_t (*tap)[6] = xcalloc((size_t)(g.ker[0] * g.ker[1] * g.ker[2]) + 1, sizeof *tap);
	for (int64_t n = 0; n < g.n; n++)
	for (int64_t o0 = 0; o0 < g.out[0]; o0++)
	for (int64_t o1 = 0; o1 < g.out[1]; o1++)
	for (int64_t o2 = 0; o2 < g.out[2]; o2++) {
		memset(acc, 0, sizeof(double) * (size_t)(k1 - k0));
		int taps = window(&g, o0, o1, o2, tap);
		for (int t = 0; t < taps; t++) {
			const int64_t *p = tap[t];
			const double *x = X + act(&g, g.in, g.c, n, 0, p[3], p[4], p[5]);
			/* the groups that [k0, k1) meets */
			for (int64_t grp = k0 / kg; grp * kg < k1; grp++) {
				int64_t lo = grp * kg > k0 ? grp * kg : k0;
				int64_t hi = (grp + 1) * kg < k1 ? (grp + 1) * kg : k1;
				for (int64_t c = 0; c < cg; c++) {
					double xv = x[grp * cg + c];
					const double *f = W + wgt(&g, cg, g.k, c, 0, p[0], p[1], p[2]);
					for (int64_t k = lo; k < hi; k++)
						acc[k - k0] += xv * f[k];
				}
			}
		}
		for (int64_t k = k0; k < k1; k++)
			Y[act(&g, g.out, g.k, n, k, o0, o1, o2)] = acc[k - k0];
	}
	free(tap);
	free(acc);
}

/* Forward convolution, grouped or depthwise.  For each output element the
 * kernel window is walked outside and the input channels inside, so that
 * bounds are checked once per window position and the inner loop runs at
 * fixed strides (contiguous in X for channels-last layouts). */
REF_HOT static void ref_conv_channels(const tir_workload *w, const double *X,
				      const double *W, double *Y, int64_t k0, int64_t k1)
{
	geom g = geom_of(w);
	bool dw = w->op == TIR_OP_DEPTHWISE_CONV2D;
	int64_t cg = dw ? 1 : g.c / g.groups, kg = dw ? g.mult : g.k / g.groups;
	/* strides between input channels: in X, and in W (conv: W[K, C/groups,
	 * *ker] / W[*ker, C/groups, K]; depthwise has one channel per group) */
	int64_t xc = g.last ? 1 : g.in[0] * g.in[1] * g.in[2];
	int64_t wc = g.last ? g.k : g.ker[0] * g.ker[1] * g.ker[2];
	int64_t (*tap)[6] = xcalloc((size_t)(g.ker[0] * g.ker[1] * g.ker[2]) + 1, sizeof *tap);
	for (int64_t n = 0; n < g.n; n++)
	for (int64_t k = k0; k < k1; k++)
	for (int64_t o0 = 0; o0 < g.out[0]; o0++)
	for (int64_t o1 = 0; o1 < g.out[1]; o1++)
	for (int64_t o2 = 0; o2 < g.out[2]; o2++) {
		int64_t grp = k / kg;
		double acc = 0;
		int taps = window(&g, o0, o1, o2, tap);
		for (int t = 0; t < taps; t++) {
			const int64_t *p = tap[t];
			const double *x = X + act(&g, g.in, g.c, n, grp * cg, p[3], p[4], p[5]);
			/* depthwise: W[C, mult, *ker] / W[*ker, C, mult] */
			const double *f =
				dw ? W + wgt(&g, g.c, g.mult, grp, k % g.mult, p[0], p[1], p[2])
				: g.last ? W + wgt(&g, cg, g.k, 0, k, p[0], p[1], p[2])
					 : W + wgt(&g, g.k, cg, k, 0, p[0], p[1], p[2]);
			for (int64_t c = 0; c < cg; c++)
				acc += x[c * xc] * f[c * wc];
		}
		Y[act(&g, g.out, g.k, n, k, o0, o1, o2)] = acc;
	}
	free(tap);
}

/* Transposed convolution, written as the scatter that defines it. */
REF_HOT static void ref_conv_transpose_part(const tir_workload *w, const double *X,
					    const double *W, double *Y, int64_t kk0, int64_t kk1)
{
	geom g = geom_of(w);
	int64_t cg = g.c / g.groups, kg = g.k / g.groups;
	for (int64_t n = 0; n < g.n; n++)
	for (int64_t c = 0; c < g.c; c++)
	for (int64_t i0 = 0; i0 < g.in[0]; i0++)
	for (int64_t i1 = 0; i1 < g.in[1]; i1++)
	for (int64_t i2 = 0; i2 < g.in[2]; i2++) {
		double x = X[act(&g, g.in, g.c, n, c, i0, i1, i2)];
		int64_t grp = c / cg;
		for (int64_t kk = kk0; kk < kk1; kk++)
		for (int64_t r0 = 0; r0 < g.ker[0]; r0++)
		for (int64_t r1 = 0; r1 < g.ker[1]; r1++)
		for (int64_t r2 = 0; r2 < g.ker[2]; r2++) {
			int64_t o0 = i0 * g.stride[0] - g.pad[0] + r0 * g.dil[0];
			int64_t o1 = i1 * g.stride[1] - g.pad[1] + r1 * g.dil[1];
			int64_t o2 = i2 * g.stride[2] - g.pad[2] + r2 * g.dil[2];
			if (o0 < 0 || o0 >= g.out[0] || o1 < 0 || o1 >= g.out[1] ||
			    o2 < 0 || o2 >= g.out[2])
				continue;
			double f = W[wgt(&g, g.c, kg, c, kk, r0, r1, r2)];
			Y[act(&g, g.out, g.k, n, grp * kg + kk, o0, o1, o2)] += x * f;
		}
	}
}

static double conv_macs(const tir_workload *w)
{
	double m = (double)w->n * (double)w->k *
		   (double)(w->op == TIR_OP_DEPTHWISE_CONV2D ? 1 : w->c / w->groups);
	for (int d = 0; d < w->nd; d++)
		m *= (double)w->out[d] * (double)w->kernel[d];
	return m;
}

static void ref_conv(const tir_workload *w, const double *X, const double *W, double *Y)
{
	bool last = w->channels_last && w->op != TIR_OP_DEPTHWISE_CONV2D;
	ref_split(last ? ref_conv_last : ref_conv_channels, w, X, W, Y, w->k, conv_macs(w));
}

/* Threads take disjoint output channels of each group (the scatter writes
 * k = group * K/groups + kk), so no two add to one element. */
static void ref_conv_transpose(const tir_workload *w, const double *X, const double *W,
			       double *Y, int64_t ny)
{
	for (int64_t i = 0; i < ny; i++)
		Y[i] = 0;
	ref_split(ref_conv_transpose_part, w, X, W, Y, w->k / w->groups, conv_macs(w));
}

/* Output channel of flat output index i. */
static int64_t out_channel(const tir_workload *w, int64_t i)
{
	if (w->op == TIR_OP_MATMUL)
		return i % w->N;
	if (w->channels_last)
		return i % w->k;
	int64_t sp = 1;
	for (int d = 0; d < w->nd; d++)
		sp *= w->out[d];
	return (i / sp) % w->k;
}

int ref_hand(const tir_workload *w, double *const *inputs, double *output, tir_error *err)
{
	tir_ref_arg args[TIR_REF_MAX_ARGS];
	int nargs = ref_hand_args(w, args, TIR_REF_MAX_ARGS, err);
	if (nargs < 0)
		return -1;
	int64_t ny = args[nargs - 1].elems;
	switch (w->op) {
	case TIR_OP_MATMUL:
		ref_matmul(w, inputs[0], inputs[1], output);
		break;
	case TIR_OP_CONV1D:
	case TIR_OP_CONV2D:
	case TIR_OP_CONV3D:
	case TIR_OP_DEPTHWISE_CONV2D:
		ref_conv(w, inputs[0], inputs[1], output);
		break;
	case TIR_OP_CONV2D_TRANSPOSE:
		ref_conv_transpose(w, inputs[0], inputs[1], output, ny);
		break;
	default:
		return tir_fail(err, "reference: no reference for op %s",
				tir_workload_op(w));
	}
	int operand = 2;
	for (int e = 0; e < w->nepilogue; e++) {
		const double *src = NULL;
		if (w->epilogue[e] == TIR_EPI_BIAS || w->epilogue[e] == TIR_EPI_ADD)
			src = inputs[operand++];
		for (int64_t i = 0; i < ny; i++) {
			double x = output[i];
			switch (w->epilogue[e]) {
			case TIR_EPI_BIAS:
				x += src[out_channel(w, i)];
				break;
			case TIR_EPI_ADD:
				x += src[i];
				break;
			case TIR_EPI_RELU:
				x = x > 0 ? x : 0;
				break;
			case TIR_EPI_GELU:
				x = x * 0.5 * (1.0 + erf(x / sqrt(2.0)));
				break;
			default:
				break;
			}
			output[i] = x;
		}
	}
	return 0;
}
