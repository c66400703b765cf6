/*
 * graph_parse.c — a graph workload's document ("op": "graph") → struct
 * tir_graph, checked, and its canonical form.
 *
 * The document (DESIGN.md, "Graph workloads") has `inputs`, an object of
 * {"shape": [...], "dtype": "float32" | "float16"}, `nodes`, a list of
 * {"name", "op", "args", ...}, and `outputs`, a list of node names.  Parsing
 * infers every value's shape and dtype and checks everything a lowering
 * would otherwise trip on, so that graph.c never meets a bad graph:
 *  - names: an input or node is defined once; an argument names an input or
 *    an earlier node (a later one is a use before the definition, which is
 *    also how a cycle shows); outputs name nodes, once each;
 *  - pointwise ops broadcast their tensor arguments as NumPy does (aligned
 *    at the last dimension, each pair equal or one of them 1); numbers are
 *    allowed as the arguments of binary ops.  The result's dtype is float16
 *    when every tensor argument is, else float32 (numbers do not promote, as
 *    in PyTorch); cast takes "dtype";
 *  - reductions take "dim" (an int or a non-empty list, negative counted
 *    from the end; absent: every dim) and "keepdim" (false); a dim out of
 *    range or given twice is a fault; the dtype is the argument's;
 *  - views: reshape ("shape", one -1 inferred, the same element count),
 *    permute ("dims", a permutation, negative dims allowed), expand
 *    ("shape": new leading dims, -1 or the same size or a size-1 dim
 *    broadcast), slice ("dim" 0, "start" 0, "end" to the end, "step" 1, as
 *    PyTorch's: negative start and end counted from the end, both clamped to
 *    the dim, step positive, the result not empty; null is the default);
 *  - heavy nodes: "op" is an operator of ops.def and its other keys are that
 *    operator's (workload.c parses them: wl_parse_operator), except that
 *    "dtype" defaults to the first operand's; "args" are its operands in
 *    argument order (compute.c: X/A, W/B, then bias and residual as its
 *    epilogue lists them), each of exactly the type the keys give it
 *    (compute_signature); its result has out_dtype;
 *  - limits: at most max_nodes nodes, every dimension of every value within
 *    max_extent, every value within max_elements, the FLOPs within
 *    max_flops.  FLOPs count one per element of a pointwise result, one per
 *    element reduced, none for a view, and the heavy operators' own.
 * A node no output depends on is not a fault: it stays in the document and
 * in the canonical form but is marked not live, and no program computes it
 * (tir_graph_node_dropped; a fusion plan lists it under "dropped").
 *
 * The canonical form: {"inputs": {name: {"dtype", "shape"}} (keys sorted, so
 * the inputs' order is their names' byte order, which is also the order of
 * the program's parameters), "nodes": [...] in the document's order, each
 * node with its keys sorted and defaults filled (reductions' "dim" sorted
 * and non-negative, "keepdim"; reshape and expand shapes resolved; permute
 * dims non-negative; slices normalised; a heavy node's keys as its
 * operator's canonical form), "op": "graph", "outputs": [...]}.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include "ir/ir.h"

static const struct gop_info {
	const char *name;
	tir_gkind kind;
	int nargs;
} gops[GOP_NOPS] = {
	[GOP_INPUT] = { "input", GK_INPUT, 0 },
#define TIR_GOP(id, nm, k, n) [GOP_##id] = { nm, GK_##k, n },
#include "graph_ops.def"
#undef TIR_GOP
	[GOP_HEAVY] = { "heavy", GK_HEAVY, 2 },
};

static const char *const heavy_names[] = {
#define TIR_OP(id, name, build) name,
#include "ops.def"
#undef TIR_OP
};

tir_gkind gop_kind(tir_gop op) { return gops[op].kind; }
const char *gop_name(tir_gop op) { return gops[op].name; }

#define MAX_NAME 64

typedef struct gparse {
	wl_parse *ps;
	tir_graph *g;
	const cJSON *nodes;
	char where[MAX_NAME + 48];  /* "graph: node \"t\" (add)": prefix of messages */
} gparse;

static int gfail(gparse *gp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int gfail(gparse *gp, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return tir_fail(gp->ps->err, "%s: %s", gp->where, msg);
}

static void shape_str(char *s, size_t n, int ndim, const int64_t *shape)
{
	size_t k = (size_t)snprintf(s, n, "[");
	for (int d = 0; d < ndim && k < n; d++)
		k += (size_t)snprintf(s + k, n - k, "%s%lld", d ? ", " : "", (long long)shape[d]);
	if (k < n)
		snprintf(s + k, n - k, "]");
}

static double elems(int ndim, const int64_t *shape)
{
	double e = 1;
	for (int d = 0; d < ndim; d++)
		e *= (double)shape[d];
	return e;
}

/* A name: a non-empty string of at most MAX_NAME bytes, no control
 * characters. */
static int check_name(gparse *gp, const char *s, const char *what)
{
	size_t n = strlen(s);
	if (n == 0 || n > MAX_NAME)
		return gfail(gp, "%s \"%.80s\" must have 1 to %d bytes", what, s, MAX_NAME);
	for (const char *c = s; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return gfail(gp, "%s has a control character", what);
	return 0;
}

/* A list of at most TIR_MAX_DIMS integers, key[i] named in faults. */
static int int_list(gparse *gp, const cJSON *v, const char *key, int64_t *vals, int *n)
{
	if (!cJSON_IsArray(v))
		return gfail(gp, "%s must be a list of integers, got %s", key, wl_json_kind(v));
	*n = cJSON_GetArraySize(v);
	if (*n > TIR_MAX_DIMS)
		return gfail(gp, "%s has %d entries, at most %d dimensions are allowed", key, *n,
			     TIR_MAX_DIMS);
	int i = 0;
	const cJSON *e;
	cJSON_ArrayForEach(e, v) {
		char what[48];
		snprintf(what, sizeof what, "%s[%d]", key, i);
		if (wl_json_int(gp->ps, e, what, &vals[i]))
			return -1;
		i++;
	}
	return 0;
}

/* The dims of a value must be within max_extent and its elements within
 * max_elements. */
static int check_value_limits(gparse *gp, const tir_gvalue *v)
{
	const char *what = v->op == GOP_INPUT ? "the input" : "the result";
	const tir_limits *l = &gp->ps->lim;
	for (int d = 0; d < v->ndim; d++)
		if (v->shape[d] > l->max_extent)
			return gfail(gp, "dim %d of %s (size %lld) exceeds max_extent %lld",
				     d, what, (long long)v->shape[d], (long long)l->max_extent);
	double e = elems(v->ndim, v->shape);
	if (e > (double)l->max_elements) {
		char sh[160];
		shape_str(sh, sizeof sh, v->ndim, v->shape);
		return gfail(gp, "%s %s has %.0f elements, over max_elements %lld", what, sh, e,
			     (long long)l->max_elements);
	}
	return 0;
}

static int parse_dtype_name(gparse *gp, const cJSON *v, const char *what, tir_dtype *out)
{
	if (!cJSON_IsString(v))
		return gfail(gp, "%s must be a string, got %s", what, wl_json_kind(v));
	int t = dtype_parse(v->valuestring);
	if (t != TIR_F32 && t != TIR_F16)
		return gfail(gp, "unknown %s \"%s\" (expected float32 or float16)", what,
			     v->valuestring);
	*out = (tir_dtype)t;
	return 0;
}

/* ---- inputs ------------------------------------------------------------------ */

static int value_cmp(const void *a, const void *b)
{
	return strcmp(((const tir_gvalue *)a)->name, ((const tir_gvalue *)b)->name);
}

static int parse_inputs(gparse *gp, const cJSON *inputs)
{
	tir_graph *g = gp->g;
	if (!cJSON_IsObject(inputs))
		return tir_fail(gp->ps->err, "graph: inputs must be an object of {\"shape\": "
				"[...], \"dtype\": ...}, got %s", wl_json_kind(inputs));
	int n = cJSON_GetArraySize(inputs);
	if (n == 0)
		return tir_fail(gp->ps->err, "graph: inputs is empty");
	if (n > gp->ps->lim.max_nodes)
		return tir_fail(gp->ps->err, "graph: %d inputs, over max_nodes %d", n,
				gp->ps->lim.max_nodes);
	static const char *const input_keys[] = { "shape", "dtype", 0 };
	const cJSON *e;
	cJSON_ArrayForEach(e, inputs) {
		snprintf(gp->where, sizeof gp->where, "graph: input \"%.*s\"", MAX_NAME, e->string);
		if (check_name(gp, e->string, "the name"))
			return -1;
		for (int i = 0; i < g->ninputs; i++)
			if (!strcmp(g->v[i].name, e->string))
				return tir_fail(gp->ps->err, "%s is defined twice", gp->where);
		tir_gvalue *v = &g->v[g->ninputs++];
		v->name = xstrdup(e->string);
		v->op = GOP_INPUT;
		v->output = -1;
		v->dtype = TIR_F32;
		if (!cJSON_IsObject(e))
			return gfail(gp, "must be an object {\"shape\": [...], \"dtype\": ...}, got %s",
				     wl_json_kind(e));
		gp->ps->op = gp->where;
		if (wl_check_keys(gp->ps, e, input_keys, NULL))
			return -1;
		const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
		if (!sh)
			return gfail(gp, "missing required key \"shape\"");
		int64_t vals[TIR_MAX_DIMS];
		if (int_list(gp, sh, "shape", vals, &v->ndim))
			return -1;
		for (int d = 0; d < v->ndim; d++) {
			char what[32];
			snprintf(what, sizeof what, "shape[%d]", d);
			const cJSON *x = cJSON_GetArrayItem(sh, d);
			if (wl_json_size(gp->ps, x, what, &v->shape[d]))
				return -1;
		}
		const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
		if (dt && parse_dtype_name(gp, dt, "dtype", &v->dtype))
			return -1;
		if (check_value_limits(gp, v))
			return -1;
	}
	qsort(g->v, (size_t)g->ninputs, sizeof g->v[0], value_cmp);
	return 0;
}

/* ---- nodes ------------------------------------------------------------------------- */

/* The value an argument names among the first n values, or -1 with the
 * fault: unknown, the node itself, or a later node. */
static int find_arg(gparse *gp, int n, const char *name)
{
	const tir_graph *g = gp->g;
	for (int i = 0; i < n; i++)
		if (!strcmp(g->v[i].name, name))
			return i;
	int self = n - g->ninputs, k = 0;
	const cJSON *e;
	cJSON_ArrayForEach(e, gp->nodes) {
		const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
		if (k >= self && cJSON_IsString(nm) && !strcmp(nm->valuestring, name)) {
			if (k == self)
				return gfail(gp, "reads its own result \"%s\" (a cycle)", name);
			return gfail(gp, "argument \"%s\" is used before its definition "
				     "(nodes[%d]); a node must come after its arguments, so "
				     "a graph has no cycles", name, k);
		}
		k++;
	}
	return gfail(gp, "unknown argument \"%s\" (no input or node of that name)", name);
}

static int parse_args(gparse *gp, const cJSON *node, tir_gvalue *v, int defined)
{
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(node, "args");
	if (!args)
		return gfail(gp, "missing required key \"args\"");
	if (!cJSON_IsArray(args))
		return gfail(gp, "args must be a list of names and numbers, got %s",
			     wl_json_kind(args));
	int n = cJSON_GetArraySize(args);
	if (n > TIR_GRAPH_MAX_ARGS)
		return gfail(gp, "has %d arguments, at most %d are allowed", n, TIR_GRAPH_MAX_ARGS);
	const cJSON *e;
	cJSON_ArrayForEach(e, args) {
		int i = v->nargs++;
		if (cJSON_IsString(e)) {
			if ((v->arg[i] = find_arg(gp, defined, e->valuestring)) < 0)
				return -1;
		} else if (cJSON_IsNumber(e) && isfinite(e->valuedouble)) {
			v->arg[i] = -1;
			v->num[i] = e->valuedouble;
		} else {
			return gfail(gp, "args[%d] must be a name or a number, got %s", i,
				     wl_json_kind(e));
		}
	}
	return 0;
}

/* Every argument must be a tensor (numbers only where `numbers`). */
static int check_arg_count(gparse *gp, const tir_gvalue *v, int want, bool numbers)
{
	if (v->nargs != want)
		return gfail(gp, "expects %d argument%s, got %d", want, want == 1 ? "" : "s",
			     v->nargs);
	int tensors = 0;
	for (int i = 0; i < v->nargs; i++) {
		if (v->arg[i] >= 0)
			tensors++;
		else if (!numbers)
			return gfail(gp, "args[%d] must be a tensor (an input or node name), got "
				     "a number", i);
	}
	if (!tensors)
		return gfail(gp, "needs a tensor argument, got only numbers");
	return 0;
}

static const char *const node_keys[] = { "name", "op", "args", 0 };

static int parse_pointwise(gparse *gp, const cJSON *node, tir_gvalue *v)
{
	static const char *const cast_keys[] = { "dtype", 0 };
	const tir_graph *g = gp->g;
	if (wl_check_keys(gp->ps, node, node_keys, v->op == GOP_CAST ? cast_keys : NULL) ||
	    check_arg_count(gp, v, gops[v->op].nargs, gops[v->op].nargs == 2))
		return -1;
	/* NumPy broadcasting, aligned at the last dimension */
	v->ndim = 0;
	bool all16 = true;
	for (int i = 0; i < v->nargs; i++) {
		if (v->arg[i] < 0)
			continue;
		const tir_gvalue *a = &g->v[v->arg[i]];
		all16 = all16 && a->dtype == TIR_F16;
		if (a->ndim > v->ndim) {
			memmove(v->shape + (a->ndim - v->ndim), v->shape,
				sizeof(int64_t) * (size_t)v->ndim);
			for (int d = 0; d < a->ndim - v->ndim; d++)
				v->shape[d] = 1;
			v->ndim = a->ndim;
		}
		for (int d = 0; d < a->ndim; d++) {
			int64_t *r = &v->shape[d + v->ndim - a->ndim];
			int64_t x = a->shape[d];
			if (*r == x || x == 1)
				continue;
			if (*r == 1) {
				*r = x;
				continue;
			}
			char s0[160], s1[160];
			const tir_gvalue *b = &g->v[v->arg[0]];
			shape_str(s0, sizeof s0, b->ndim, b->shape);
			shape_str(s1, sizeof s1, a->ndim, a->shape);
			return gfail(gp, "shapes %s (\"%s\") and %s (\"%s\") do not broadcast "
				     "(dim %d from the end: %lld and %lld)", s0, b->name, s1,
				     a->name, a->ndim - d, (long long)*r, (long long)x);
		}
	}
	v->dtype = all16 ? TIR_F16 : TIR_F32;
	if (v->op == GOP_CAST) {
		const cJSON *dt = cJSON_GetObjectItemCaseSensitive(node, "dtype");
		if (!dt)
			return gfail(gp, "missing required key \"dtype\"");
		if (parse_dtype_name(gp, dt, "dtype", &v->dtype))
			return -1;
	}
	return 0;
}

/* A dim of a tensor of rank r: -r .. r-1, normalised to 0 .. r-1. */
static int norm_dim(gparse *gp, const cJSON *e, const char *what, int r, int *out)
{
	int64_t d;
	if (wl_json_int(gp->ps, e, what, &d))
		return -1;
	if (d < -r || d >= r)
		return gfail(gp, "%s = %lld is out of range for a tensor of rank %d (expected "
			     "%d to %d)", what, (long long)d, r, -r, r - 1);
	*out = (int)(d < 0 ? d + r : d);
	return 0;
}

static int parse_reduction(gparse *gp, const cJSON *node, tir_gvalue *v)
{
	static const char *const keys[] = { "dim", "keepdim", 0 };
	if (wl_check_keys(gp->ps, node, node_keys, keys) || check_arg_count(gp, v, 1, false))
		return -1;
	const tir_gvalue *a = &gp->g->v[v->arg[0]];
	int r = a->ndim;
	if (r == 0)
		return gfail(gp, "cannot reduce \"%s\", a tensor of rank 0", a->name);
	const cJSON *dim = cJSON_GetObjectItemCaseSensitive(node, "dim");
	v->rdims = 0;
	if (!dim) {
		v->rdims = (1u << r) - 1;
	} else if (cJSON_IsArray(dim)) {
		if (cJSON_GetArraySize(dim) == 0)
			return gfail(gp, "dim is an empty list (leave it out to reduce every dim)");
		int i = 0;
		const cJSON *e;
		cJSON_ArrayForEach(e, dim) {
			char what[32];
			snprintf(what, sizeof what, "dim[%d]", i++);
			int d;
			if (norm_dim(gp, e, what, r, &d))
				return -1;
			if (v->rdims & (1u << d))
				return gfail(gp, "dim %d is repeated", d);
			v->rdims |= 1u << d;
		}
	} else {
		int d;
		if (norm_dim(gp, dim, "dim", r, &d))
			return -1;
		v->rdims = 1u << d;
	}
	const cJSON *kd = cJSON_GetObjectItemCaseSensitive(node, "keepdim");
	v->keepdim = false;
	if (kd) {
		if (!cJSON_IsBool(kd))
			return gfail(gp, "keepdim must be true or false, got %s", wl_json_kind(kd));
		v->keepdim = cJSON_IsTrue(kd);
	}
	v->ndim = 0;
	for (int d = 0; d < r; d++) {
		if (!(v->rdims & (1u << d)))
			v->shape[v->ndim++] = a->shape[d];
		else if (v->keepdim)
			v->shape[v->ndim++] = 1;
	}
	v->dtype = a->dtype;
	return 0;
}

static int parse_reshape(gparse *gp, const cJSON *node, tir_gvalue *v, const tir_gvalue *a)
{
	const cJSON *sh = cJSON_GetObjectItemCaseSensitive(node, "shape");
	if (!sh)
		return gfail(gp, "missing required key \"shape\"");
	int64_t vals[TIR_MAX_DIMS];
	if (int_list(gp, sh, "shape", vals, &v->ndim))
		return -1;
	int infer = -1;
	double known = 1;
	for (int d = 0; d < v->ndim; d++) {
		if (vals[d] == -1) {
			if (infer >= 0)
				return gfail(gp, "shape has more than one -1");
			infer = d;
		} else if (vals[d] <= 0) {
			return gfail(gp, "shape[%d] must be positive or -1, got %lld", d,
				     (long long)vals[d]);
		} else {
			known *= (double)vals[d];
		}
		v->shape[d] = vals[d];
	}
	double total = elems(a->ndim, a->shape);
	char sa[160], sv[160];
	shape_str(sa, sizeof sa, a->ndim, a->shape);
	if (infer >= 0) {
		double q = total / known;
		if (q != floor(q) || q < 1) {
			shape_str(sv, sizeof sv, v->ndim, vals);
			return gfail(gp, "shape %s does not fit the %.0f elements of \"%s\" %s", sv,
				     total, a->name, sa);
		}
		v->shape[infer] = (int64_t)q;
		known *= q;
	}
	if (known != total) {
		shape_str(sv, sizeof sv, v->ndim, v->shape);
		return gfail(gp, "shape %s has %.0f elements, \"%s\" %s has %.0f", sv, known,
			     a->name, sa, total);
	}
	return 0;
}

static int parse_permute(gparse *gp, const cJSON *node, tir_gvalue *v, const tir_gvalue *a)
{
	const cJSON *dims = cJSON_GetObjectItemCaseSensitive(node, "dims");
	if (!dims)
		return gfail(gp, "missing required key \"dims\"");
	if (!cJSON_IsArray(dims))
		return gfail(gp, "dims must be a list of integers, got %s", wl_json_kind(dims));
	int n = cJSON_GetArraySize(dims), r = a->ndim;
	if (n != r)
		return gfail(gp, "dims has %d entries, \"%s\" has rank %d", n, a->name, r);
	unsigned seen = 0;
	int i = 0;
	const cJSON *e;
	cJSON_ArrayForEach(e, dims) {
		char what[32];
		snprintf(what, sizeof what, "dims[%d]", i);
		int d;
		if (norm_dim(gp, e, what, r, &d))
			return -1;
		if (seen & (1u << d))
			return gfail(gp, "dims is not a permutation of 0..%d (dim %d is repeated)",
				     r - 1, d);
		seen |= 1u << d;
		v->perm[i] = d;
		v->shape[i] = a->shape[d];
		i++;
	}
	v->ndim = r;
	return 0;
}

static int parse_expand(gparse *gp, const cJSON *node, tir_gvalue *v, const tir_gvalue *a)
{
	const cJSON *sh = cJSON_GetObjectItemCaseSensitive(node, "shape");
	if (!sh)
		return gfail(gp, "missing required key \"shape\"");
	int64_t vals[TIR_MAX_DIMS];
	if (int_list(gp, sh, "shape", vals, &v->ndim))
		return -1;
	if (v->ndim < a->ndim)
		return gfail(gp, "shape has %d dims, fewer than the %d of \"%s\"", v->ndim,
			     a->ndim, a->name);
	int lead = v->ndim - a->ndim;
	for (int d = 0; d < v->ndim; d++) {
		int64_t x = d >= lead ? a->shape[d - lead] : 1;
		int64_t want = vals[d];
		if (want == -1 && d >= lead)
			want = x;
		if (want <= 0)
			return gfail(gp, "shape[%d] must be positive%s, got %lld", d,
				     d >= lead ? " or -1" : " for a new leading dim",
				     (long long)vals[d]);
		if (want != x && x != 1)
			return gfail(gp, "cannot expand dim %d of \"%s\" (size %lld) to %lld: only "
				     "a dim of size 1 expands", d - lead, a->name, (long long)x,
				     (long long)want);
		v->shape[d] = want;
	}
	return 0;
}

/* start or end of a slice: absent or null gives def. */
static int slice_bound(gparse *gp, const cJSON *node, const char *key, int64_t def,
		       int64_t *out)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(node, key);
	*out = def;
	if (!e || cJSON_IsNull(e))
		return 0;
	return wl_json_int(gp->ps, e, key, out);
}

static int parse_slice(gparse *gp, const cJSON *node, tir_gvalue *v, const tir_gvalue *a)
{
	int r = a->ndim;
	if (r == 0)
		return gfail(gp, "cannot slice \"%s\", a tensor of rank 0", a->name);
	const cJSON *dim = cJSON_GetObjectItemCaseSensitive(node, "dim");
	v->sdim = 0;
	if (dim && norm_dim(gp, dim, "dim", r, &v->sdim))
		return -1;
	int64_t n = a->shape[v->sdim], start, end, step;
	if (slice_bound(gp, node, "start", 0, &start) ||
	    slice_bound(gp, node, "end", n, &end) || slice_bound(gp, node, "step", 1, &step))
		return -1;
	if (step <= 0)
		return gfail(gp, "step must be positive, got %lld", (long long)step);
	int64_t s = start < 0 ? start + n : start, e = end < 0 ? end + n : end;
	s = s < 0 ? 0 : s > n ? n : s;
	e = e < 0 ? 0 : e > n ? n : e;
	if (e <= s)
		return gfail(gp, "the slice [%lld:%lld] of dim %d of \"%s\" (size %lld) is empty "
			     "or out of range", (long long)start, (long long)end, v->sdim,
			     a->name, (long long)n);
	v->start = s;
	v->end = e;
	v->step = step;
	v->ndim = r;
	memcpy(v->shape, a->shape, sizeof v->shape);
	v->shape[v->sdim] = (e - s + step - 1) / step;
	return 0;
}

static int parse_view(gparse *gp, const cJSON *node, tir_gvalue *v)
{
	static const char *const shape_keys[] = { "shape", 0 };
	static const char *const dims_keys[] = { "dims", 0 };
	static const char *const slice_keys[] = { "dim", "start", "end", "step", 0 };
	const char *const *keys = v->op == GOP_PERMUTE ? dims_keys
				: v->op == GOP_SLICE ? slice_keys : shape_keys;
	if (wl_check_keys(gp->ps, node, node_keys, keys) || check_arg_count(gp, v, 1, false))
		return -1;
	const tir_gvalue *a = &gp->g->v[v->arg[0]];
	v->dtype = a->dtype;
	switch (v->op) {
	case GOP_RESHAPE: return parse_reshape(gp, node, v, a);
	case GOP_PERMUTE: return parse_permute(gp, node, v, a);
	case GOP_EXPAND: return parse_expand(gp, node, v, a);
	default: return parse_slice(gp, node, v, a);
	}
}

/* The names of an operator's operands, for messages. */
static const char *operand_name(const tir_workload *w, int k)
{
	if (k < 2)
		return w->op == TIR_OP_MATMUL ? (k ? "B" : "A") : (k ? "W" : "X");
	int n = 2;
	for (int i = 0; i < w->nepilogue; i++) {
		if (w->epilogue[i] == TIR_EPI_BIAS && n++ == k)
			return "bias";
		if (w->epilogue[i] == TIR_EPI_ADD && n++ == k)
			return "residual";
	}
	return "operand";
}

static int parse_heavy(gparse *gp, const cJSON *node, tir_gvalue *v, tir_op op)
{
	const tir_graph *g = gp->g;
	static const char *const extra[] = { "name", "args", 0 };
	tir_workload *hw = xcalloc(1, sizeof *hw);
	v->heavy = hw;
	hw->op = op;
	gp->ps->extra_keys = extra;
	gp->ps->default_dtype = v->nargs > 0 && v->arg[0] >= 0
				? dtype_name(g->v[v->arg[0]].dtype) : NULL;
	int rc = wl_parse_operator(gp->ps, node, hw);
	gp->ps->extra_keys = NULL;
	gp->ps->default_dtype = NULL;
	if (rc)
		return -1;
	tir_tensor_type ops[TIR_MAX_OPERANDS], out;
	int n = compute_signature(hw, ops, &out);
	if (v->nargs != n) {
		char names[64] = "";
		for (int k = 0; k < n; k++)
			snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
				 k ? ", " : "", operand_name(hw, k));
		return gfail(gp, "expects %d arguments (%s), got %d", n, names, v->nargs);
	}
	for (int k = 0; k < n; k++) {
		if (v->arg[k] < 0)
			return gfail(gp, "args[%d] (%s) must be a tensor, got a number", k,
				     operand_name(hw, k));
		const tir_gvalue *a = &g->v[v->arg[k]];
		char sa[160], se[160];
		shape_str(sa, sizeof sa, a->ndim, a->shape);
		shape_str(se, sizeof se, ops[k].ndim, ops[k].shape);
		if (a->ndim != ops[k].ndim)
			return gfail(gp, "args[%d] \"%s\" (%s) has rank %d %s, expected rank %d %s",
				     k, a->name, operand_name(hw, k), a->ndim, sa, ops[k].ndim, se);
		if (memcmp(a->shape, ops[k].shape, sizeof(int64_t) * (size_t)a->ndim))
			return gfail(gp, "args[%d] \"%s\" (%s) has shape %s, expected %s", k,
				     a->name, operand_name(hw, k), sa, se);
		if (a->dtype != ops[k].dtype)
			return gfail(gp, "args[%d] \"%s\" (%s) is %s, expected %s", k, a->name,
				     operand_name(hw, k), dtype_name(a->dtype),
				     dtype_name(ops[k].dtype));
	}
	v->dtype = out.dtype;
	v->ndim = out.ndim;
	memcpy(v->shape, out.shape, sizeof v->shape);
	return 0;
}

/* The op of a node: a graph op or an operator of ops.def. */
static int node_op(gparse *gp, const cJSON *node, tir_gvalue *v, tir_op *heavy)
{
	const cJSON *op = cJSON_GetObjectItemCaseSensitive(node, "op");
	if (!op)
		return gfail(gp, "missing required key \"op\"");
	if (!cJSON_IsString(op))
		return gfail(gp, "op must be a string, got %s", wl_json_kind(op));
	for (int i = GOP_INPUT + 1; i < GOP_HEAVY; i++)
		if (!strcmp(op->valuestring, gops[i].name)) {
			v->op = (tir_gop)i;
			return 0;
		}
	for (int i = 0; i < TIR_NOPS; i++)
		if (i != TIR_OP_GRAPH && !strcmp(op->valuestring, heavy_names[i])) {
			v->op = GOP_HEAVY;
			*heavy = (tir_op)i;
			return 0;
		}
	char list[400] = "";
	for (int i = GOP_INPUT + 1; i < GOP_HEAVY; i++)
		snprintf(list + strlen(list), sizeof list - strlen(list), "%s, ", gops[i].name);
	for (int i = 0; i < TIR_NOPS; i++)
		if (i != TIR_OP_GRAPH)
			snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
				 heavy_names[i], i < TIR_NOPS - 2 ? ", " : "");
	return gfail(gp, "unknown op \"%s\" (expected one of %s)", op->valuestring, list);
}

/* FLOPs of a node, as the top comment counts them. */
static double node_flops(const tir_graph *g, const tir_gvalue *v)
{
	switch (gops[v->op].kind) {
	case GK_POINTWISE: return elems(v->ndim, v->shape);
	case GK_REDUCTION: return elems(g->v[v->arg[0]].ndim, g->v[v->arg[0]].shape);
	case GK_HEAVY: return tir_workload_flops(v->heavy);
	default: return 0;
	}
}

static int parse_node(gparse *gp, int i, const cJSON *node)
{
	tir_graph *g = gp->g;
	int idx = g->ninputs + i;
	snprintf(gp->where, sizeof gp->where, "graph: nodes[%d]", i);
	if (!cJSON_IsObject(node))
		return gfail(gp, "must be an object {\"name\", \"op\", \"args\", ...}, got %s",
			     wl_json_kind(node));
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(node, "name");
	if (!name)
		return gfail(gp, "missing required key \"name\"");
	if (!cJSON_IsString(name))
		return gfail(gp, "name must be a string, got %s", wl_json_kind(name));
	if (check_name(gp, name->valuestring, "name"))
		return -1;
	snprintf(gp->where, sizeof gp->where, "graph: node \"%s\"", name->valuestring);
	for (int k = 0; k < idx; k++)
		if (!strcmp(g->v[k].name, name->valuestring))
			return k < g->ninputs
				? tir_fail(gp->ps->err, "%s is defined twice (an input and "
					   "nodes[%d])", gp->where, i)
				: tir_fail(gp->ps->err, "%s is defined twice (nodes[%d] and "
					   "nodes[%d])", gp->where, k - g->ninputs, i);
	tir_gvalue *v = &g->v[idx];
	g->nnodes++;
	v->name = xstrdup(name->valuestring);
	v->output = -1;
	tir_op heavy = TIR_OP_MATMUL;
	if (node_op(gp, node, v, &heavy))
		return -1;
	snprintf(gp->where, sizeof gp->where, "graph: node \"%s\" (%s)", v->name,
		 v->op == GOP_HEAVY ? heavy_names[heavy] : gops[v->op].name);
	gp->ps->op = gp->where;
	if (parse_args(gp, node, v, idx))
		return -1;
	int rc;
	switch (gops[v->op].kind) {
	case GK_POINTWISE: rc = parse_pointwise(gp, node, v); break;
	case GK_REDUCTION: rc = parse_reduction(gp, node, v); break;
	case GK_VIEW: rc = parse_view(gp, node, v); break;
	default: rc = parse_heavy(gp, node, v, heavy); break;
	}
	return rc ? -1 : check_value_limits(gp, v);
}

static int parse_outputs(gparse *gp, const cJSON *outputs)
{
	tir_graph *g = gp->g;
	if (!outputs)
		return tir_fail(gp->ps->err, "graph: missing required key \"outputs\" (no outputs)");
	if (!cJSON_IsArray(outputs))
		return tir_fail(gp->ps->err, "graph: outputs must be a list of node names, got %s",
				wl_json_kind(outputs));
	int n = cJSON_GetArraySize(outputs);
	if (n == 0)
		return tir_fail(gp->ps->err, "graph: no outputs (outputs is empty)");
	g->outputs = xcalloc((size_t)n, sizeof *g->outputs);
	int i = 0;
	const cJSON *e;
	cJSON_ArrayForEach(e, outputs) {
		if (!cJSON_IsString(e))
			return tir_fail(gp->ps->err, "graph: outputs[%d] must be a node name, got %s",
					i, wl_json_kind(e));
		int k = -1;
		for (int j = 0; j < g->ninputs + g->nnodes; j++)
			if (!strcmp(g->v[j].name, e->valuestring))
				k = j;
		if (k < 0)
			return tir_fail(gp->ps->err, "graph: output \"%s\" is not a node (unknown "
					"name)", e->valuestring);
		if (k < g->ninputs)
			return tir_fail(gp->ps->err, "graph: output \"%s\" is an input, not a node",
					e->valuestring);
		if (g->v[k].output >= 0)
			return tir_fail(gp->ps->err, "graph: output \"%s\" is listed twice",
					e->valuestring);
		g->v[k].output = i;
		g->outputs[g->noutputs++] = k;
		i++;
	}
	return 0;
}

int graph_parse(wl_parse *ps, const cJSON *doc, tir_workload *w)
{
	static const char *const keys[] = { "op", "inputs", "nodes", "outputs", 0 };
	if (wl_check_keys(ps, doc, keys, NULL))
		return -1;
	const cJSON *inputs = cJSON_GetObjectItemCaseSensitive(doc, "inputs");
	const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(doc, "nodes");
	if (!inputs)
		return tir_fail(ps->err, "graph: missing required key \"inputs\"");
	if (!nodes)
		return tir_fail(ps->err, "graph: missing required key \"nodes\" (an empty graph)");
	if (!cJSON_IsArray(nodes))
		return tir_fail(ps->err, "graph: nodes must be a list of nodes, got %s",
				wl_json_kind(nodes));
	int nn = cJSON_GetArraySize(nodes);
	if (nn == 0)
		return tir_fail(ps->err, "graph: no nodes (an empty graph)");
	if (nn > ps->lim.max_nodes)
		return tir_fail(ps->err, "graph: %d nodes, over max_nodes %d", nn,
				ps->lim.max_nodes);
	tir_graph *g = xcalloc(1, sizeof *g);
	w->graph = g;
	int ni = cJSON_IsObject(inputs) ? cJSON_GetArraySize(inputs) : 0;
	g->v = xcalloc((size_t)(ni + nn), sizeof *g->v);
	gparse gp = { .ps = ps, .g = g, .nodes = nodes };
	const char *op = ps->op;
	int rc = parse_inputs(&gp, inputs);
	int i = 0;
	const cJSON *e;
	cJSON_ArrayForEach(e, nodes) {
		if (rc)
			break;
		rc = parse_node(&gp, i++, e);
	}
	ps->op = op;
	if (rc || parse_outputs(&gp, cJSON_GetObjectItemCaseSensitive(doc, "outputs")))
		return -1;

	/* liveness: what the outputs depend on, and how often each is read */
	for (int k = 0; k < g->noutputs; k++)
		g->v[g->outputs[k]].live = true;
	for (int k = g->ninputs + g->nnodes - 1; k >= g->ninputs; k--) {
		tir_gvalue *v = &g->v[k];
		if (!v->live)
			continue;
		g->flops += node_flops(g, v);
		for (int a = 0; a < v->nargs; a++)
			if (v->arg[a] >= 0) {
				g->v[v->arg[a]].live = true;
				g->v[v->arg[a]].uses++;
			}
	}
	if (g->flops > ps->lim.max_flops)
		return tir_fail(ps->err, "graph: %.3g FLOPs exceeds max_flops %g", g->flops,
				ps->lim.max_flops);
	w->dtype = g->v[0].dtype;
	w->out_dtype = g->v[g->outputs[0]].dtype;
	/* the operator fields, unused, neutral: code that reads them without
	 * knowing graphs (a reference of operators) sees a degenerate shape and
	 * divides by no zero */
	w->n = w->c = w->k = w->groups = w->multiplier = 1;
	w->M = w->N = w->K = 1;
	return 0;
}

void graph_free(tir_graph *g)
{
	if (!g)
		return;
	for (int i = 0; i < g->ninputs + g->nnodes; i++) {
		free(g->v[i].name);
		tir_workload_free(g->v[i].heavy);
	}
	free(g->v);
	free(g->outputs);
	free(g);
}

/* ---- the canonical form ---------------------------------------------------------- */

static cJSON *int_array(const int64_t *v, int n)
{
	cJSON *a = cJSON_CreateArray();
	for (int i = 0; i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
	return a;
}

static cJSON *node_canonical(const tir_graph *g, const tir_gvalue *v)
{
	wl_kv f[WL_MAX_FIELDS];
	int n = 0;
#define PUT(k, x) (f[n].key = (k), f[n].val = (x), n++)
	cJSON *args = cJSON_CreateArray();
	for (int i = 0; i < v->nargs; i++)
		cJSON_AddItemToArray(args, v->arg[i] >= 0
				     ? cJSON_CreateString(g->v[v->arg[i]].name)
				     : cJSON_CreateNumber(v->num[i]));
	PUT("args", args);
	PUT("name", cJSON_CreateString(v->name));
	if (v->op == GOP_HEAVY)
		n += wl_operator_fields(v->heavy, f + n);
	else
		PUT("op", cJSON_CreateString(gops[v->op].name));
	const tir_gvalue *a = v->nargs > 0 && v->arg[0] >= 0 ? &g->v[v->arg[0]] : NULL;
	switch (v->op) {
	case GOP_CAST:
		PUT("dtype", cJSON_CreateString(dtype_name(v->dtype)));
		break;
	case GOP_SUM: case GOP_MEAN: case GOP_AMAX: case GOP_AMIN: {
		int64_t dims[TIR_MAX_DIMS];
		int nd = 0;
		for (int d = 0; d < a->ndim; d++)
			if (v->rdims & (1u << d))
				dims[nd++] = d;
		PUT("dim", int_array(dims, nd));
		PUT("keepdim", cJSON_CreateBool(v->keepdim));
		break;
	}
	case GOP_RESHAPE: case GOP_EXPAND:
		PUT("shape", int_array(v->shape, v->ndim));
		break;
	case GOP_PERMUTE: {
		int64_t dims[TIR_MAX_DIMS];
		for (int d = 0; d < v->ndim; d++)
			dims[d] = v->perm[d];
		PUT("dims", int_array(dims, v->ndim));
		break;
	}
	case GOP_SLICE:
		PUT("dim", cJSON_CreateNumber(v->sdim));
		PUT("start", cJSON_CreateNumber((double)v->start));
		PUT("end", cJSON_CreateNumber((double)v->end));
		PUT("step", cJSON_CreateNumber((double)v->step));
		break;
	default:
		break;
	}
#undef PUT
	return wl_object(f, n);
}

cJSON *graph_canonical(const tir_graph *g)
{
	cJSON *inputs = cJSON_CreateObject();
	for (int i = 0; i < g->ninputs; i++) {      /* sorted by name already */
		const tir_gvalue *v = &g->v[i];
		cJSON *in = cJSON_CreateObject();
		cJSON_AddItemToObject(in, "dtype", cJSON_CreateString(dtype_name(v->dtype)));
		cJSON_AddItemToObject(in, "shape", int_array(v->shape, v->ndim));
		cJSON_AddItemToObject(inputs, v->name, in);
	}
	cJSON *nodes = cJSON_CreateArray();
	for (int i = 0; i < g->nnodes; i++)
		cJSON_AddItemToArray(nodes, node_canonical(g, &g->v[g->ninputs + i]));
	cJSON *outputs = cJSON_CreateArray();
	for (int i = 0; i < g->noutputs; i++)
		cJSON_AddItemToArray(outputs, cJSON_CreateString(g->v[g->outputs[i]].name));
	cJSON *obj = cJSON_CreateObject();
	cJSON_AddItemToObject(obj, "inputs", inputs);
	cJSON_AddItemToObject(obj, "nodes", nodes);
	cJSON_AddItemToObject(obj, "op", cJSON_CreateString("graph"));
	cJSON_AddItemToObject(obj, "outputs", outputs);
	return obj;
}

/* ---- the public view of the nodes ---------------------------------------------------- */

int tir_graph_nodes(const tir_workload *w)
{
	return w && w->graph ? w->graph->nnodes : 0;
}

static const tir_gvalue *node_at(const tir_workload *w, int node)
{
	if (!w || !w->graph || node < 0 || node >= w->graph->nnodes)
		return NULL;
	return &w->graph->v[w->graph->ninputs + node];
}

const char *tir_graph_node_name(const tir_workload *w, int node)
{
	const tir_gvalue *v = node_at(w, node);
	return v ? v->name : NULL;
}

const char *tir_graph_node_op(const tir_workload *w, int node)
{
	const tir_gvalue *v = node_at(w, node);
	if (!v)
		return NULL;
	return v->op == GOP_HEAVY ? heavy_names[v->heavy->op] : gops[v->op].name;
}

int tir_graph_node_find(const tir_workload *w, const char *name)
{
	for (int i = 0; name && i < tir_graph_nodes(w); i++)
		if (!strcmp(node_at(w, i)->name, name))
			return i;
	return -1;
}

int tir_graph_node_dropped(const tir_workload *w, int node)
{
	const tir_gvalue *v = node_at(w, node);
	return v && !v->live;
}
