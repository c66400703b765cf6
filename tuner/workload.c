/*
 * workload.c — workload JSON → struct tir_workload, its limits, canonical form
 * and key.
 *
 * A workload document is one JSON object (DESIGN.md, "Workload JSON").  Parsing
 * is strict: every key must be known for the op, every size a positive integer,
 * every list the right length, and the result must fit the limits, so that
 * nothing downstream (compute definitions, search, codegen) has to re-check a
 * request.  Each fault is reported with the op and the key at fault.
 *
 * The document is screened before cJSON sees it: its length and its nesting
 * depth (a scan that honours strings), so that a hostile document cannot
 * exhaust the stack of cJSON's recursive parser.
 *
 * The canonical form lists every key the op takes, defaults filled in, lists
 * fully expanded (stride [sh, sw], pad [top, left, bottom, right]), keys sorted,
 * no whitespace.  Its SHA-256 is the workload key, so two documents that mean
 * the same operator share one key.  Parsing the canonical form gives the same
 * canonical form.
 *
 * A graph workload ("op": "graph") is parsed by graph_parse.c; its heavy
 * nodes are operators parsed here (wl_parse_operator, with the node's name
 * in every message), and their canonical keys are the same
 * (wl_operator_fields).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include <nettle/sha2.h>
#include "ir/ir.h"

int tir_fail(tir_error *err, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof err->msg, fmt, ap);
		va_end(ap);
	}
	return -1;
}

tir_limits tir_limits_default(void)
{
	return (tir_limits){
		.max_extent = 1 << 20,
		.max_elements = (int64_t)1 << 28,
		.max_flops = 1e13,
		.max_json_depth = 8,
		.max_json_bytes = 1 << 20,
		.max_nodes = 256,
	};
}

static tir_limits limits_fill(const tir_limits *lim)
{
	tir_limits d = tir_limits_default();
	if (!lim)
		return d;
	tir_limits l = *lim;
	if (l.max_extent <= 0)
		l.max_extent = d.max_extent;
	if (l.max_elements <= 0)
		l.max_elements = d.max_elements;
	if (!(l.max_flops > 0))
		l.max_flops = d.max_flops;
	if (l.max_json_depth <= 0)
		l.max_json_depth = d.max_json_depth;
	if (l.max_json_bytes == 0)
		l.max_json_bytes = d.max_json_bytes;
	if (l.max_nodes <= 0)
		l.max_nodes = d.max_nodes;
	return l;
}

/* ---- vocabularies ---------------------------------------------------------- */

static const char *const op_names[] = {
#define TIR_OP(id, name, build) name,
#include "ops.def"
#undef TIR_OP
};

static const char *const epilogue_names[] = {
#define TIR_EPILOGUE(id, name) name,
#include "ir/epilogues.def"
#undef TIR_EPILOGUE
};

static const char *const mm_layout_names[] = { "NN", "NT", "TN" };

/* Spatial key names, outermost first, by number of spatial dimensions. */
static const char *const in_keys[4][3] = {
	{ 0 }, { "W" }, { "H", "W" }, { "D", "H", "W" },
};
static const char *const kernel_keys[4][3] = {
	{ 0 }, { "S" }, { "R", "S" }, { "T", "R", "S" },
};
static const char *const layouts_first[4] = { 0, "NCW", "NCHW", "NCDHW" };
static const char *const layouts_last[4] = { 0, "NWC", "NHWC", "NDHWC" };

const char *tir_workload_op(const tir_workload *w)
{
	return op_names[w->op];
}

int tir_workload_dtype(const tir_workload *w)
{
	return w->graph ? -1 : (int)w->dtype;
}

/* ---- the parse state --------------------------------------------------------- */

typedef wl_parse parse;

const char *wl_json_kind(const cJSON *v)
{
	if (cJSON_IsString(v))
		return "a string";
	if (cJSON_IsBool(v))
		return "a boolean";
	if (cJSON_IsNull(v))
		return "null";
	if (cJSON_IsArray(v))
		return "a list";
	if (cJSON_IsObject(v))
		return "an object";
	return "a number";
}

/* An integer value: a JSON number with no fractional part, exactly
 * representable.  Describes the fault as "<op>: <what> must be an integer". */
int wl_json_int(parse *ps, const cJSON *v, const char *what, int64_t *out)
{
	if (!cJSON_IsNumber(v))
		return tir_fail(ps->err, "%s: %s must be an integer, got %s",
				ps->op, what, wl_json_kind(v));
	double d = v->valuedouble;
	if (!isfinite(d) || d != floor(d))
		return tir_fail(ps->err, "%s: %s must be an integer, got %g",
				ps->op, what, d);
	if (fabs(d) > 9007199254740992.0)      /* 2^53 */
		return tir_fail(ps->err, "%s: %s = %g is out of range",
				ps->op, what, d);
	*out = (int64_t)d;
	return 0;
}

/* A size: a positive integer no larger than max_extent. */
int wl_json_size(parse *ps, const cJSON *v, const char *what, int64_t *out)
{
	if (wl_json_int(ps, v, what, out))
		return -1;
	if (*out <= 0)
		return tir_fail(ps->err, "%s: %s must be positive, got %lld",
				ps->op, what, (long long)*out);
	if (*out > ps->lim.max_extent)
		return tir_fail(ps->err, "%s: %s = %lld exceeds max_extent %lld",
				ps->op, what, (long long)*out,
				(long long)ps->lim.max_extent);
	return 0;
}

static const cJSON *get(const cJSON *obj, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(obj, key);
}

static int need(parse *ps, const cJSON *obj, const char *key, int64_t *out)
{
	const cJSON *v = get(obj, key);
	if (!v)
		return tir_fail(ps->err, "%s: missing required key \"%s\"", ps->op, key);
	return wl_json_size(ps, v, key, out);
}

/* An optional size; *out keeps its default when the key is absent. */
static int opt_size(parse *ps, const cJSON *obj, const char *key, int64_t *out)
{
	const cJSON *v = get(obj, key);
	return v ? wl_json_size(ps, v, key, out) : 0;
}

static int opt_string(parse *ps, const cJSON *obj, const char *key,
		      const char **out)
{
	const cJSON *v = get(obj, key);
	if (!v)
		return 0;
	if (!cJSON_IsString(v))
		return tir_fail(ps->err, "%s: %s must be a string, got %s",
				ps->op, key, wl_json_kind(v));
	*out = v->valuestring;
	return 0;
}

/*
 * A per-dimension parameter (stride, dilation, output_padding, pad): an integer,
 * or a list whose length is one of the allowed counts.  Values go to vals[] as
 * given, *count receives how many.  min is the smallest allowed value.
 */
static int int_list(parse *ps, const cJSON *obj, const char *key, int nd,
		    const int *counts, int ncounts, int64_t min, int64_t *vals,
		    int *count)
{
	const cJSON *v = get(obj, key);
	*count = 0;
	if (!v)
		return 0;
	char what[48];
	if (cJSON_IsArray(v)) {
		int n = cJSON_GetArraySize(v);
		int ok = 0;
		for (int i = 0; i < ncounts; i++)
			ok |= n == counts[i];
		if (!ok) {
			char exp[32] = "";
			for (int i = 0; i < ncounts; i++)
				snprintf(exp + strlen(exp), sizeof exp - strlen(exp), "%s%d",
					 i == 0 ? "" : i == ncounts - 1 ? " or " : ", ",
					 counts[i]);
			return tir_fail(ps->err, "%s: %s has %d value%s, expected %s",
					ps->op, key, n, n == 1 ? "" : "s", exp);
		}
		int i = 0;
		const cJSON *e;
		cJSON_ArrayForEach(e, v) {
			snprintf(what, sizeof what, "%s[%d]", key, i);
			if (wl_json_int(ps, e, what, &vals[i]))
				return -1;
			i++;
		}
		*count = n;
	} else {
		snprintf(what, sizeof what, "%s", key);
		if (wl_json_int(ps, v, what, &vals[0]))
			return -1;
		*count = 1;
	}
	for (int i = 0; i < *count; i++) {
		if (vals[i] < min)
			return tir_fail(ps->err, "%s: %s must be %s, got %lld", ps->op,
					key, min == 0 ? "non-negative" :
					min == 1 ? "at least 1" : "larger",
					(long long)vals[i]);
		if (vals[i] > ps->lim.max_extent)
			return tir_fail(ps->err, "%s: %s = %lld exceeds max_extent %lld",
					ps->op, key, (long long)vals[i],
					(long long)ps->lim.max_extent);
	}
	(void)nd;
	return 0;
}

/* stride / dilation / output_padding: one value for all dimensions or one per
 * dimension. */
static int per_dim(parse *ps, const cJSON *obj, const char *key, int nd,
		   int64_t min, int64_t def, int64_t *out)
{
	int64_t vals[6];
	int counts[2] = { 1, nd }, n;
	if (int_list(ps, obj, key, nd, counts, nd == 1 ? 1 : 2, min, vals, &n))
		return -1;
	for (int d = 0; d < nd; d++)
		out[d] = n == 0 ? def : n == 1 ? vals[0] : vals[d];
	return 0;
}

/* pad: p, [p], one per dimension, or [lo..., hi...]. */
static int parse_pad(parse *ps, const cJSON *obj, int nd, int64_t *lo,
		     int64_t *hi)
{
	int64_t vals[6];
	int counts3[3] = { 1, nd, 2 * nd }, counts1[2] = { 1, 2 }, n;
	if (int_list(ps, obj, "pad", nd, nd == 1 ? counts1 : counts3, nd == 1 ? 2 : 3,
		     0, vals, &n))
		return -1;
	if (nd == 1 && n == 2) {        /* conv1d: [lo, hi] */
		lo[0] = vals[0];
		hi[0] = vals[1];
		return 0;
	}
	for (int d = 0; d < nd; d++) {
		if (n == 0)
			lo[d] = hi[d] = 0;
		else if (n == 1)
			lo[d] = hi[d] = vals[0];
		else if (n == nd)
			lo[d] = hi[d] = vals[d];
		else {
			lo[d] = vals[d];
			hi[d] = vals[nd + d];
		}
	}
	return 0;
}

/* ---- key sets ------------------------------------------------------------------- */

static bool in_list(const char *key, const char *const *list)
{
	for (; *list; list++)
		if (!strcmp(key, *list))
			return true;
	return false;
}

/* Every key of the object must be one the op takes (or one of
 * ps->extra_keys), and appear once. */
int wl_check_keys(parse *ps, const cJSON *obj, const char *const *a,
		  const char *const *b)
{
	const cJSON *e;
	cJSON_ArrayForEach(e, obj) {
		if (!in_list(e->string, a) && !(b && in_list(e->string, b)) &&
		    !(ps->extra_keys && in_list(e->string, ps->extra_keys)))
			return tir_fail(ps->err, "%s: unknown key \"%s\"", ps->op,
					e->string);
		for (const cJSON *f = e->next; f; f = f->next)
			if (!strcmp(e->string, f->string))
				return tir_fail(ps->err, "%s: duplicate key \"%s\"",
						ps->op, e->string);
	}
	return 0;
}

static const char *const common_keys[] = { "op", "dtype", "out_dtype", "epilogue", 0 };
static const char *const matmul_keys[] = { "M", "N", "K", "batch", "layout", 0 };

/* The keys a convolution takes, built from its dimension and kind. */
static void conv_keys(tir_op op, int nd, const char **keys)
{
	int n = 0;
	keys[n++] = "N";
	keys[n++] = "C";
	if (op != TIR_OP_DEPTHWISE_CONV2D)
		keys[n++] = "K";
	for (int d = 0; d < nd; d++) {
		keys[n++] = in_keys[nd][d];
		keys[n++] = kernel_keys[nd][d];
	}
	keys[n++] = "stride";
	keys[n++] = "pad";
	keys[n++] = "dilation";
	keys[n++] = "layout";
	if (op == TIR_OP_DEPTHWISE_CONV2D)
		keys[n++] = "multiplier";
	else
		keys[n++] = "groups";
	if (op == TIR_OP_CONV2D_TRANSPOSE)
		keys[n++] = "output_padding";
	keys[n] = NULL;
}

static int conv_nd(tir_op op)
{
	switch (op) {
	case TIR_OP_CONV1D:
		return 1;
	case TIR_OP_CONV3D:
		return 3;
	case TIR_OP_MATMUL:
		return 0;
	default:
		return 2;
	}
}

/* ---- dtypes and epilogues ---------------------------------------------------------- */

static int parse_dtypes(parse *ps, const cJSON *obj, tir_workload *w)
{
	const char *dt = ps->default_dtype ? ps->default_dtype : "float32", *odt = NULL;
	if (opt_string(ps, obj, "dtype", &dt) || opt_string(ps, obj, "out_dtype", &odt))
		return -1;
	int t = dtype_parse(dt);
	if (t != TIR_F32 && t != TIR_F16 && t != TIR_BF16 && t != TIR_I8 && t != TIR_U8)
		return tir_fail(ps->err, "%s: unknown dtype \"%s\" (expected float32, "
				"float16, bfloat16, int8 or uint8)", ps->op, dt);
	w->dtype = t;
	bool isint = t == TIR_I8 || t == TIR_U8;
	if (!odt)
		odt = isint ? "int32" : "float32";
	int o = dtype_parse(odt);
	bool ok = isint ? o == TIR_I32
			: (o == TIR_F32 || o == TIR_F16 || o == TIR_BF16);
	if (o < 0 || !ok)
		return tir_fail(ps->err, "%s: out_dtype \"%s\" is not allowed with dtype %s "
				"(expected %s)", ps->op, odt, dt,
				isint ? "int32" : "float32, float16 or bfloat16");
	w->out_dtype = o;
	return 0;
}

static int parse_epilogue(parse *ps, const cJSON *obj, tir_workload *w)
{
	const cJSON *v = get(obj, "epilogue");
	w->nepilogue = 0;
	if (!v)
		return 0;
	if (!cJSON_IsArray(v))
		return tir_fail(ps->err, "%s: epilogue must be a list of strings, got %s",
				ps->op, wl_json_kind(v));
	const cJSON *e;
	cJSON_ArrayForEach(e, v) {
		if (!cJSON_IsString(e))
			return tir_fail(ps->err, "%s: epilogue entries must be strings, got %s",
					ps->op, wl_json_kind(e));
		int k = -1;
		for (int i = 0; i < TIR_NEPILOGUES; i++)
			if (!strcmp(e->valuestring, epilogue_names[i]))
				k = i;
		if (k < 0)
			return tir_fail(ps->err, "%s: unknown epilogue \"%s\" (expected bias, "
					"relu, gelu or add)", ps->op, e->valuestring);
		for (int i = 0; i < w->nepilogue; i++)
			if ((int)w->epilogue[i] == k)
				return tir_fail(ps->err, "%s: epilogue \"%s\" is listed twice",
						ps->op, e->valuestring);
		w->epilogue[w->nepilogue++] = k;     /* at most TIR_NEPILOGUES <= 8 */
	}
	return 0;
}

/* ---- operators --------------------------------------------------------------------- */

static int parse_matmul(parse *ps, const cJSON *obj, tir_workload *w)
{
	if (wl_check_keys(ps, obj, common_keys, matmul_keys))
		return -1;
	if (need(ps, obj, "M", &w->M) || need(ps, obj, "N", &w->N) ||
	    need(ps, obj, "K", &w->K) || opt_size(ps, obj, "batch", &w->batch))
		return -1;
	const char *lay = "NN";
	if (opt_string(ps, obj, "layout", &lay))
		return -1;
	int l = -1;
	for (int i = 0; i < 3; i++)
		if (!strcmp(lay, mm_layout_names[i]))
			l = i;
	if (l < 0)
		return tir_fail(ps->err, "%s: unknown layout \"%s\" (expected NN, NT "
				"or TN)", ps->op, lay);
	w->mm_layout = l;
	return 0;
}

static int parse_conv(parse *ps, const cJSON *obj, tir_workload *w)
{
	int nd = conv_nd(w->op);
	bool dw = w->op == TIR_OP_DEPTHWISE_CONV2D;
	bool tr = w->op == TIR_OP_CONV2D_TRANSPOSE;
	const char *keys[24];
	conv_keys(w->op, nd, keys);
	if (wl_check_keys(ps, obj, common_keys, keys))
		return -1;
	w->nd = nd;
	if (need(ps, obj, "N", &w->n) || need(ps, obj, "C", &w->c))
		return -1;
	if (!dw && need(ps, obj, "K", &w->k))
		return -1;
	for (int d = 0; d < nd; d++)
		if (need(ps, obj, in_keys[nd][d], &w->in[d]) ||
		    need(ps, obj, kernel_keys[nd][d], &w->kernel[d]))
			return -1;
	if (per_dim(ps, obj, "stride", nd, 1, 1, w->stride) ||
	    per_dim(ps, obj, "dilation", nd, 1, 1, w->dilation) ||
	    parse_pad(ps, obj, nd, w->pad_lo, w->pad_hi))
		return -1;
	if (tr && per_dim(ps, obj, "output_padding", nd, 0, 0, w->output_padding))
		return -1;
	for (int d = nd; d < 3; d++) {         /* unused dimensions: neutral */
		w->in[d] = w->kernel[d] = w->stride[d] = w->dilation[d] = 1;
		w->out[d] = 1;
	}

	const char *lay = layouts_first[nd];
	if (opt_string(ps, obj, "layout", &lay))
		return -1;
	if (!strcmp(lay, layouts_first[nd]))
		w->channels_last = false;
	else if (!strcmp(lay, layouts_last[nd]))
		w->channels_last = true;
	else
		return tir_fail(ps->err, "%s: unknown layout \"%s\" (expected %s or %s)",
				ps->op, lay, layouts_first[nd], layouts_last[nd]);

	if (dw) {
		w->multiplier = 1;
		if (opt_size(ps, obj, "multiplier", &w->multiplier))
			return -1;
		w->groups = w->c;
		w->k = w->c * w->multiplier;
		if (w->k > ps->lim.max_extent)
			return tir_fail(ps->err, "%s: C * multiplier = %lld exceeds "
					"max_extent %lld", ps->op, (long long)w->k,
					(long long)ps->lim.max_extent);
	} else {
		w->groups = 1;
		w->multiplier = 1;
		if (opt_size(ps, obj, "groups", &w->groups))
			return -1;
		if (w->c % w->groups)
			return tir_fail(ps->err, "%s: groups = %lld does not divide C = %lld",
					ps->op, (long long)w->groups, (long long)w->c);
		if (w->k % w->groups)
			return tir_fail(ps->err, "%s: groups = %lld does not divide K = %lld",
					ps->op, (long long)w->groups, (long long)w->k);
	}

	for (int d = 0; d < nd; d++) {
		const char *name = in_keys[nd][d];
		int64_t span = w->dilation[d] * (w->kernel[d] - 1);
		if (tr) {
			if (w->output_padding[d] >= w->stride[d] &&
			    w->output_padding[d] >= w->dilation[d])
				return tir_fail(ps->err, "%s: output_padding %lld along %s must "
						"be smaller than stride %lld or dilation %lld",
						ps->op, (long long)w->output_padding[d], name,
						(long long)w->stride[d],
						(long long)w->dilation[d]);
			w->out[d] = (w->in[d] - 1) * w->stride[d] - w->pad_lo[d] -
				    w->pad_hi[d] + span + w->output_padding[d] + 1;
			if (w->out[d] <= 0)
				return tir_fail(ps->err, "%s: empty output along %s (padding "
						"%lld + %lld removes all of it)", ps->op, name,
						(long long)w->pad_lo[d],
						(long long)w->pad_hi[d]);
		} else {
			int64_t padded = w->in[d] + w->pad_lo[d] + w->pad_hi[d];
			if (padded < span + 1)
				return tir_fail(ps->err, "%s: empty output along %s (padded "
						"input %lld is smaller than the dilated kernel "
						"%lld)", ps->op, name, (long long)padded,
						(long long)(span + 1));
			w->out[d] = (padded - span - 1) / w->stride[d] + 1;
		}
		if (w->out[d] > ps->lim.max_extent)
			return tir_fail(ps->err, "%s: output extent %lld along %s exceeds "
					"max_extent %lld", ps->op, (long long)w->out[d], name,
					(long long)ps->lim.max_extent);
	}
	return 0;
}

/* ---- limits on buffers and work ------------------------------------------------------ */

static double prod(const int64_t *v, int n)
{
	double p = 1;
	for (int i = 0; i < n; i++)
		p *= (double)v[i];
	return p;
}

double tir_workload_flops(const tir_workload *w)
{
	if (w->graph)
		return w->graph->flops;
	if (w->op == TIR_OP_MATMUL)
		return 2.0 * (double)(w->batch ? w->batch : 1) * (double)w->M *
		       (double)w->N * (double)w->K;
	double kernel = prod(w->kernel, w->nd);
	switch (w->op) {
	case TIR_OP_DEPTHWISE_CONV2D:
		return 2.0 * (double)w->n * (double)w->c * (double)w->multiplier *
		       prod(w->out, w->nd) * kernel;
	case TIR_OP_CONV2D_TRANSPOSE:
		return 2.0 * (double)w->n * (double)w->c * prod(w->in, w->nd) *
		       (double)(w->k / w->groups) * kernel;
	default:
		return 2.0 * (double)w->n * (double)w->k * prod(w->out, w->nd) *
		       (double)(w->c / w->groups) * kernel;
	}
}

static int check_elems(parse *ps, const char *what, double elems)
{
	if (elems > (double)ps->lim.max_elements)
		return tir_fail(ps->err, "%s: %s has %.0f elements, over max_elements %lld",
				ps->op, what, elems, (long long)ps->lim.max_elements);
	return 0;
}

static int check_limits(parse *ps, const tir_workload *w)
{
	if (w->op == TIR_OP_MATMUL) {
		double b = w->batch ? (double)w->batch : 1;
		if (check_elems(ps, "A", b * (double)w->M * (double)w->K) ||
		    check_elems(ps, "B", b * (double)w->K * (double)w->N) ||
		    check_elems(ps, "the output", b * (double)w->M * (double)w->N))
			return -1;
	} else {
		int64_t padded[3];
		for (int d = 0; d < w->nd; d++)
			padded[d] = w->in[d] + w->pad_lo[d] + w->pad_hi[d];
		double kernel = prod(w->kernel, w->nd);
		double wel = w->op == TIR_OP_DEPTHWISE_CONV2D
				     ? (double)w->c * (double)w->multiplier * kernel
			     : w->op == TIR_OP_CONV2D_TRANSPOSE
				     ? (double)w->c * (double)(w->k / w->groups) * kernel
				     : (double)w->k * (double)(w->c / w->groups) * kernel;
		double nc = (double)w->n * (double)w->c;
		if (check_elems(ps, "the input", nc * prod(w->in, w->nd)) ||
		    check_elems(ps, "the padded input", nc * prod(padded, w->nd)) ||
		    check_elems(ps, "the weight", wel) ||
		    check_elems(ps, "the output",
				(double)w->n * (double)w->k * prod(w->out, w->nd)))
			return -1;
	}
	double f = tir_workload_flops(w);
	if (f > ps->lim.max_flops)
		return tir_fail(ps->err, "%s: %.3g FLOPs exceeds max_flops %g", ps->op,
				f, ps->lim.max_flops);
	return 0;
}

/* ---- canonical form and key ---------------------------------------------------------- */

typedef wl_kv kv;

static int kv_cmp(const void *a, const void *b)
{
	return strcmp(((const kv *)a)->key, ((const kv *)b)->key);
}

cJSON *wl_object(wl_kv *f, int n)
{
	qsort(f, (size_t)n, sizeof f[0], kv_cmp);
	cJSON *obj = cJSON_CreateObject();
	for (int i = 0; i < n; i++)
		cJSON_AddItemToObject(obj, f[i].key, f[i].val);
	return obj;
}

static cJSON *int_array(const int64_t *v, int n)
{
	cJSON *a = cJSON_CreateArray();
	for (int i = 0; i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
	return a;
}

int wl_operator_fields(const tir_workload *w, wl_kv *f)
{
	int n = 0;
#define PUT(k, v) (f[n].key = (k), f[n].val = (v), n++)
#define NUM(x) cJSON_CreateNumber((double)(x))
	PUT("op", cJSON_CreateString(op_names[w->op]));
	PUT("dtype", cJSON_CreateString(dtype_name(w->dtype)));
	PUT("out_dtype", cJSON_CreateString(dtype_name(w->out_dtype)));
	cJSON *epi = cJSON_CreateArray();
	for (int i = 0; i < w->nepilogue; i++)
		cJSON_AddItemToArray(epi, cJSON_CreateString(epilogue_names[w->epilogue[i]]));
	PUT("epilogue", epi);
	if (w->op == TIR_OP_MATMUL) {
		PUT("M", NUM(w->M));
		PUT("N", NUM(w->N));
		PUT("K", NUM(w->K));
		if (w->batch)
			PUT("batch", NUM(w->batch));
		PUT("layout", cJSON_CreateString(mm_layout_names[w->mm_layout]));
	} else {
		int nd = w->nd;
		bool dw = w->op == TIR_OP_DEPTHWISE_CONV2D;
		PUT("N", NUM(w->n));
		PUT("C", NUM(w->c));
		if (!dw)
			PUT("K", NUM(w->k));
		for (int d = 0; d < nd; d++) {
			PUT(in_keys[nd][d], NUM(w->in[d]));
			PUT(kernel_keys[nd][d], NUM(w->kernel[d]));
		}
		PUT("stride", int_array(w->stride, nd));
		PUT("dilation", int_array(w->dilation, nd));
		int64_t pad[6];
		for (int d = 0; d < nd; d++) {
			pad[d] = w->pad_lo[d];
			pad[nd + d] = w->pad_hi[d];
		}
		PUT("pad", int_array(pad, 2 * nd));
		PUT("layout", cJSON_CreateString(w->channels_last ? layouts_last[nd]
								  : layouts_first[nd]));
		if (dw)
			PUT("multiplier", NUM(w->multiplier));
		else
			PUT("groups", NUM(w->groups));
		if (w->op == TIR_OP_CONV2D_TRANSPOSE)
			PUT("output_padding", int_array(w->output_padding, nd));
	}
#undef PUT
#undef NUM
	return n;
}

static char *canonical_json(const tir_workload *w)
{
	cJSON *obj;
	if (w->graph) {
		obj = graph_canonical(w->graph);
	} else {
		kv f[WL_MAX_FIELDS];
		obj = wl_object(f, wl_operator_fields(w, f));
	}
	char *s = cJSON_PrintUnformatted(obj);
	cJSON_Delete(obj);
	if (!s) {
		fprintf(stderr, "tir: out of memory\n");
		abort();
	}
	char *out = xstrdup(s);       /* owned by the workload, freed with free() */
	cJSON_free(s);
	return out;
}

static void sha256_hex(const char *s, char hex[65])
{
	struct sha256_ctx ctx;
	uint8_t d[SHA256_DIGEST_SIZE];
	sha256_init(&ctx);
	sha256_update(&ctx, strlen(s), (const uint8_t *)s);
	sha256_digest(&ctx, sizeof d, d);
	for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

const char *tir_workload_canonical(const tir_workload *w) { return w->canonical; }
const char *tir_workload_key(const tir_workload *w) { return w->key; }

/* ---- the document ------------------------------------------------------------------------ */

/* Line and column (1-based) of byte offset pos. */
static void position(const char *s, size_t pos, int *line, int *col)
{
	*line = 1;
	*col = 1;
	for (size_t i = 0; i < pos; i++) {
		if (s[i] == '\n') {
			++*line;
			*col = 1;
		} else {
			++*col;
		}
	}
}

/* Rejects documents nested deeper than max before any recursive parse.
 * *open is set when the document ends inside a string or an open bracket. */
static int check_depth(const char *s, size_t len, int max, bool *open,
		       tir_error *err)
{
	int depth = 0;
	bool str = false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				str = false;
		} else if (c == '"') {
			str = true;
		} else if (c == '{' || c == '[') {
			if (++depth > max) {
				int line, col;
				position(s, i, &line, &col);
				return tir_fail(err, "workload: JSON nested deeper than %d "
						"levels (max_json_depth) at line %d, column %d",
						max, line, col);
			}
		} else if (c == '}' || c == ']') {
			depth--;
		}
	}
	*open = str || depth > 0;
	return 0;
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

tir_workload *tir_workload_parse(const char *json, size_t len,
				 const tir_limits *lim, tir_error *err)
{
	parse ps = { .op = "workload", .lim = limits_fill(lim), .err = err };
	if (!json) {
		tir_fail(err, "workload: no document");
		return NULL;
	}
	if (len > ps.lim.max_json_bytes) {
		tir_fail(err, "workload: document is %zu bytes, over max_json_bytes %zu",
			 len, ps.lim.max_json_bytes);
		return NULL;
	}
	bool open = false;
	if (check_depth(json, len, ps.lim.max_json_depth, &open, err))
		return NULL;

	const char *end = NULL;
	cJSON *doc = cJSON_ParseWithLengthOpts(json, len, &end, 0);
	if (!doc) {
		size_t pos = end && end >= json && end <= json + len ? (size_t)(end - json) : 0;
		int line, col;
		position(json, pos, &line, &col);
		if (open || pos >= len) {
			position(json, len, &line, &col);
			tir_fail(err, "workload: malformed JSON: unexpected end of document "
				 "at line %d, column %d", line, col);
		}
		else
			tir_fail(err, "workload: malformed JSON at line %d, column %d "
				 "(byte %zu)", line, col, pos);
		return NULL;
	}
	size_t pos = (size_t)(end - json);
	while (pos < len && is_space(json[pos]))
		pos++;
	if (pos < len) {
		int line, col;
		position(json, pos, &line, &col);
		tir_fail(err, "workload: trailing garbage after the JSON object at line "
			 "%d, column %d (byte %zu)", line, col, pos);
		cJSON_Delete(doc);
		return NULL;
	}
	if (!cJSON_IsObject(doc)) {
		tir_fail(err, "workload: expected a JSON object, got %s", wl_json_kind(doc));
		cJSON_Delete(doc);
		return NULL;
	}

	tir_workload *w = xcalloc(1, sizeof *w);
	const cJSON *opv = get(doc, "op");
	int op = -1;
	if (!opv) {
		tir_fail(err, "workload: missing required key \"op\"");
		goto fail;
	}
	if (!cJSON_IsString(opv)) {
		tir_fail(err, "workload: op must be a string, got %s", wl_json_kind(opv));
		goto fail;
	}
	for (int i = 0; i < TIR_NOPS; i++)
		if (!strcmp(opv->valuestring, op_names[i]))
			op = i;
	if (op < 0) {
		char ops[160] = "";
		for (int i = 0; i < TIR_NOPS; i++)
			snprintf(ops + strlen(ops), sizeof ops - strlen(ops), "%s%s",
				 i == 0 ? "" : i == TIR_NOPS - 1 ? " or " : ", ", op_names[i]);
		tir_fail(err, "workload: unknown op \"%s\" (expected %s)", opv->valuestring, ops);
		goto fail;
	}
	w->op = op;
	ps.op = op_names[op];

	if (op == TIR_OP_GRAPH ? graph_parse(&ps, doc, w) : wl_parse_operator(&ps, doc, w))
		goto fail;
	cJSON_Delete(doc);

	w->canonical = canonical_json(w);
	sha256_hex(w->canonical, w->key);
	return w;
fail:
	cJSON_Delete(doc);
	tir_workload_free(w);
	return NULL;
}

int wl_parse_operator(wl_parse *ps, const cJSON *obj, tir_workload *w)
{
	if (w->op == TIR_OP_GRAPH)
		return tir_fail(ps->err, "%s: a graph cannot be a node of a graph", ps->op);
	return (w->op == TIR_OP_MATMUL ? parse_matmul(ps, obj, w) : parse_conv(ps, obj, w)) ||
	       parse_dtypes(ps, obj, w) || parse_epilogue(ps, obj, w) || check_limits(ps, w)
		? -1 : 0;
}

void tir_workload_free(tir_workload *w)
{
	if (!w)
		return;
	graph_free(w->graph);
	free(w->canonical);
	free(w);
}
