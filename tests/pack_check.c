/*
 * pack_check.c — the program of tests/pack.sh: a CPU kernel pack (`tirctl
 * pack`) checked from the outside, through its tird_pack.h only.
 *
 * Not built by automake: tird_pack.h exists only once the test has packed,
 * so pack.sh compiles this file with the build's compiler and flags against
 * the pack's header and libtirdpack.a, libtir (for the reference) and a
 * small generated file, pack_named.c, that lists each kernel's own function
 * (the names in manifest.json) as pack_named_names / pack_named_fns.
 *
 * For every packed kernel (tird_kernel_count / tird_kernel_at):
 *   - its workload (tird_kernel_workload) parses (tir_workload_parse) to the
 *     same key, and its arguments (tird_kernel_arg) are the program's
 *     (tir_reference_args: count, names, dtypes, elements, outputs);
 *   - on seeded random inputs, with outputs filled with NaN bytes, tird_run
 *     matches tir_reference (libtir's IR interpreter, in double) within the
 *     workload's tolerance (tir_workload_tolerance), each output normwise
 *     (tir_measure_compare, the check tird itself applies);
 *   - its own function (tird_<op>_<key>) gives the same result;
 *   - tird_find of its key is that kernel;
 *   - its op's dispatch function (tird_matmul, tird_conv2d,
 *     tird_depthwise_conv2d) with its shape runs it (a workload without an
 *     epilogue) or answers TIRD_NOT_PACKED (one with an epilogue: dispatch
 *     never reaches those), and with the shape changed (M + 1; a stride)
 *     answers TIRD_NOT_PACKED with tird_last_error naming the shape;
 * and once: tird_find("nope") and tird_find(NULL) are NULL, tird_kernel_at
 * out of range is NULL, tird_run(NULL, ...), NULL args, a NULL argument and a
 * NULL shape are TIRD_BAD_ARGUMENT naming the fault, tird_pack_target is a
 * CPU key.
 *
 * Prints one line per kernel (name, op, max relative error, tolerance) and
 * "pack_check: N kernels, F failures"; exits 1 on any failure.  Usage:
 * pack_check [SEED].
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include "tir.h"
#include "measure/measure.h"
#include "tird_pack.h"

typedef int (*pack_fn)(void *const *args, void *stream);
extern const char *const pack_named_names[];   /* NULL-terminated */
extern const pack_fn pack_named_fns[];

static int failures;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("FAIL ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	failures++;
}

static uint64_t rng;

static double rnd(void)        /* uniform in [-1, 1) */
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) / 4503599627370496.0 - 1.0;
}

/* The stored values of dtype (float32 or float64: what this test tunes). */
static int dtype_ok(int dtype)
{
	return !strcmp(tir_dtype_name(dtype), "float32") || !strcmp(tir_dtype_name(dtype), "float64");
}

static void store(int dtype, void *dst, int64_t i, double v)
{
	if (!strcmp(tir_dtype_name(dtype), "float32"))
		((float *)dst)[i] = (float)v;
	else
		((double *)dst)[i] = v;
}

/* One kernel's buffers: the pack's arguments as stored, the reference's in double. */
typedef struct bufs {
	int n;
	tir_ref_arg ra[TIR_REF_MAX_ARGS];
	void *args[TIR_REF_MAX_ARGS];
	double *ref[TIR_REF_MAX_ARGS];
	size_t bytes[TIR_REF_MAX_ARGS];
} bufs;

static void bufs_free(bufs *b)
{
	for (int i = 0; i < b->n; i++) {
		free(b->args[i]);
		free(b->ref[i]);
	}
}

/* Outputs back to NaN bytes: a kernel must write every element. */
static void clear_outputs(bufs *b)
{
	for (int i = 0; i < b->n; i++)
		if (b->ra[i].is_output)
			memset(b->args[i], 0xff, b->bytes[i]);
}

/* The largest normwise error of the outputs against the reference. */
static double max_error(const bufs *b)
{
	double worst = 0;
	for (int i = 0; i < b->n; i++) {
		if (!b->ra[i].is_output)
			continue;
		double *got = malloc((size_t)b->ra[i].elems * sizeof *got);
		if (!got)
			abort();
		tir_measure_to_double(b->ra[i].dtype, b->args[i], b->ra[i].elems, got);
		double e = tir_measure_compare(b->ref[i], got, b->ra[i].elems);
		if (!(e <= worst))              /* NaN: infinitely wrong */
			worst = isnan(e) ? INFINITY : e;
		free(got);
	}
	return worst;
}

/* The outputs as they stand, for comparing two runs. */
static void *outputs_copy(const bufs *b)
{
	size_t total = 0;
	for (int i = 0; i < b->n; i++)
		total += b->ra[i].is_output ? b->bytes[i] : 0;
	unsigned char *c = malloc(total ? total : 1), *p = c;
	if (!c)
		abort();
	for (int i = 0; i < b->n; i++)
		if (b->ra[i].is_output) {
			memcpy(p, b->args[i], b->bytes[i]);
			p += b->bytes[i];
		}
	return c;
}

static int outputs_equal(const bufs *b, const void *copy)
{
	const unsigned char *p = copy;
	for (int i = 0; i < b->n; i++)
		if (b->ra[i].is_output) {
			if (memcmp(p, b->args[i], b->bytes[i]))
				return 0;
			p += b->bytes[i];
		}
	return 1;
}

/* The arguments of k, checked against the reference's, filled with random
 * inputs; the reference computed.  0, or -1 after a failure. */
static int bufs_make(const tird_kernel *k, const tir_workload *w, bufs *b)
{
	const char *name = tird_kernel_name(k);
	tir_error err = { "" };
	memset(b, 0, sizeof *b);
	int n = tir_reference_args(w, b->ra, TIR_REF_MAX_ARGS, &err);
	if (n < 0) {
		fail("%s: tir_reference_args: %s", name, err.msg);
		return -1;
	}
	if (n != tird_kernel_nargs(k)) {
		fail("%s: %d arguments, the program of its workload %d", name, tird_kernel_nargs(k), n);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		const tird_arg_info *ai = tird_kernel_arg(k, i);
		const tir_ref_arg *ra = &b->ra[i];
		if (!ai || strcmp(ai->name, ra->name) || strcmp(ai->dtype, tir_dtype_name(ra->dtype)) ||
		    ai->elems != ra->elems || !ai->is_output != !ra->is_output) {
			fail("%s: argument %d is %s %s[%lld]%s, the program's %s %s[%lld]%s", name, i,
			     ai ? ai->dtype : "?", ai ? ai->name : "?", ai ? ai->elems : -1LL,
			     ai && ai->is_output ? " (out)" : "", tir_dtype_name(ra->dtype), ra->name,
			     (long long)ra->elems, ra->is_output ? " (out)" : "");
			return -1;
		}
		if (!dtype_ok(ra->dtype)) {
			fail("%s: argument %s is %s: this test fills float32 and float64 only", name,
			     ra->name, ai->dtype);
			return -1;
		}
	}
	b->n = n;
	for (int i = 0; i < n; i++) {
		const tird_arg_info *ai = tird_kernel_arg(k, i);
		b->bytes[i] = (size_t)ai->elems * (size_t)ai->elem_bytes;
		b->args[i] = malloc(b->bytes[i] ? b->bytes[i] : 1);
		b->ref[i] = calloc((size_t)ai->elems + 1, sizeof(double));
		if (!b->args[i] || !b->ref[i])
			abort();
		if (ai->is_output)
			continue;
		for (int64_t e = 0; e < ai->elems; e++)
			store(b->ra[i].dtype, b->args[i], e, rnd());
		tir_measure_to_double(b->ra[i].dtype, b->args[i], ai->elems, b->ref[i]);
	}
	clear_outputs(b);
	if (tir_reference(w, b->ref, &err)) {
		fail("%s: tir_reference: %s", name, err.msg);
		return -1;
	}
	return 0;
}

/* ---- the shapes of the dispatch functions, from the canonical workload ------------------- */

static long long jint(const cJSON *o, const char *key)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsNumber(x) ? (long long)x->valuedouble : 0;
}

static const char *jstr(const cJSON *o, const char *key)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsString(x) ? x->valuestring : NULL;
}

static void jints(const cJSON *o, const char *key, long long *v, int n)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
	for (int i = 0; i < n; i++) {
		const cJSON *x = cJSON_GetArrayItem(a, i);
		v[i] = cJSON_IsNumber(x) ? (long long)x->valuedouble : 0;
	}
}

/* As a caller would write it: the defaults left as NULL / 0 where they are
 * the defaults (layout NN, out_dtype dtype, dilation 1). */
static tird_matmul_shape mm_shape(const cJSON *j)
{
	tird_matmul_shape s = { 0 };
	s.batch = jint(j, "batch");
	s.M = jint(j, "M");
	s.N = jint(j, "N");
	s.K = jint(j, "K");
	s.dtype = jstr(j, "dtype");
	const char *l = jstr(j, "layout"), *o = jstr(j, "out_dtype");
	s.layout = l && strcmp(l, "NN") ? l : NULL;
	s.out_dtype = o && s.dtype && strcmp(o, s.dtype) ? o : NULL;
	return s;
}

static tird_conv_shape conv2d_shape(const cJSON *j, int depthwise)
{
	tird_conv_shape s = { 0 };
	s.N = jint(j, "N");
	s.C = jint(j, "C");
	s.K = depthwise ? 0 : jint(j, "K");
	s.in[0] = jint(j, "H");
	s.in[1] = jint(j, "W");
	s.kernel[0] = jint(j, "R");
	s.kernel[1] = jint(j, "S");
	jints(j, "stride", s.stride, 2);
	jints(j, "dilation", s.dilation, 2);
	if (s.dilation[0] == 1 && s.dilation[1] == 1)
		s.dilation[0] = s.dilation[1] = 0;
	jints(j, "pad", s.pad, 4);
	s.groups = depthwise ? 0 : jint(j, "groups");
	s.multiplier = depthwise ? jint(j, "multiplier") : 0;
	s.layout = jstr(j, "layout");
	s.dtype = jstr(j, "dtype");
	s.out_dtype = jstr(j, "out_dtype");
	return s;
}

/* Runs op's dispatch function on shape s (a tird_matmul_shape or tird_conv_shape). */
static int dispatch(const char *op, const void *s, void *const *args)
{
	if (!strcmp(op, "matmul"))
		return tird_matmul(s, args, NULL);
	if (!strcmp(op, "conv2d"))
		return tird_conv2d(s, args, NULL);
	return tird_depthwise_conv2d(s, args, NULL);
}

/* The dispatch checks of kernel k (its workload j, its buffers b). */
static void check_dispatch(const tird_kernel *k, const cJSON *j, bufs *b, double tol)
{
	const char *name = tird_kernel_name(k), *op = tird_kernel_op(k);
	int has_epilogue = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "epilogue")) > 0;
	tird_matmul_shape mm = { 0 };
	tird_conv_shape cv = { 0 };
	const void *s;
	if (!strcmp(op, "matmul")) {
		mm = mm_shape(j);
		s = &mm;
	} else if (!strcmp(op, "conv2d") || !strcmp(op, "depthwise_conv2d")) {
		cv = conv2d_shape(j, !strcmp(op, "depthwise_conv2d"));
		s = &cv;
	} else {
		printf("  %s: no dispatch check for %s\n", name, op);
		return;
	}
	clear_outputs(b);
	int rc = dispatch(op, s, b->args);
	if (has_epilogue) {
		/* dispatch matches workloads without an epilogue only */
		if (rc != TIRD_NOT_PACKED)
			fail("%s (epilogue): tird_%s with its shape gave %d, not TIRD_NOT_PACKED", name,
			     op, rc);
		else
			printf("  %s: tird_%s with its shape: TIRD_NOT_PACKED (an epilogue workload)\n",
			       name, op);
	} else {
		double e = rc == TIRD_OK ? max_error(b) : INFINITY;
		if (rc != TIRD_OK || !(e <= tol))
			fail("%s: tird_%s with its shape: %d (%s), error %.3g", name, op, rc,
			     rc ? tird_last_error() : "ok", e);
		else
			printf("  %s: tird_%s with its shape: TIRD_OK, error %.3g\n", name, op, e);
	}
	/* another shape: not packed, and the error says which */
	if (s == &cv) {
		tird_conv_shape other = cv;
		other.stride[1] = other.stride[1] > 1 ? 1 : 2;
		rc = dispatch(op, &other, b->args);
		char st[64];
		snprintf(st, sizeof st, " stride %lld %lld ", other.stride[0] > 0 ? other.stride[0] : 1,
			 other.stride[1]);
		if (rc != TIRD_NOT_PACKED || !strstr(tird_last_error(), st))
			fail("%s: tird_%s with another stride: %d, \"%s\" (want TIRD_NOT_PACKED naming "
			     "\"%s\")", name, op, rc, tird_last_error(), st);
	}
	char want[64];
	if (s == &mm) {
		mm.M++;
		snprintf(want, sizeof want, "M %lld ", mm.M);
	} else {
		cv.N++;
		snprintf(want, sizeof want, "N %lld ", cv.N);
	}
	rc = dispatch(op, s, b->args);
	if (rc != TIRD_NOT_PACKED || !strstr(tird_last_error(), want) ||
	    !strstr(tird_last_error(), "tird_"))
		fail("%s: tird_%s with another shape: %d, \"%s\" (want TIRD_NOT_PACKED naming \"%s\")",
		     name, op, rc, tird_last_error(), want);
	else
		printf("  %s: another shape: TIRD_NOT_PACKED, \"%s\"\n", name, tird_last_error());
}

/* ---- one kernel ----------------------------------------------------------------------------- */

static pack_fn named_fn(const char *name)
{
	for (int i = 0; pack_named_names[i]; i++)
		if (!strcmp(pack_named_names[i], name))
			return pack_named_fns[i];
	return NULL;
}

static void check_kernel(const tird_kernel *k)
{
	const char *name = tird_kernel_name(k), *key = tird_kernel_key(k);
	const char *wj = tird_kernel_workload(k);
	int before = failures;
	tir_error err = { "" };
	tir_workload *w = wj ? tir_workload_parse(wj, strlen(wj), NULL, &err) : NULL;
	cJSON *j = wj ? cJSON_Parse(wj) : NULL;
	bufs b;
	memset(&b, 0, sizeof b);
	if (!w || !j) {
		fail("%s: its workload %s does not parse: %s", name, wj ? wj : "(null)", err.msg);
		goto out;
	}
	if (!key || strcmp(tir_workload_key(w), key))
		fail("%s: key %s, its workload's %s", name, key ? key : "(null)", tir_workload_key(w));
	if (strcmp(tird_kernel_op(k), tir_workload_op(w)))
		fail("%s: op %s, its workload's %s", name, tird_kernel_op(k), tir_workload_op(w));
	const char *rec = tird_kernel_record(k);
	if (!rec || strlen(rec) != 64 || strspn(rec, "0123456789abcdef") != 64)
		fail("%s: record id \"%s\"", name, rec ? rec : "(null)");
	if (!(tird_kernel_latency_us(k) > 0))
		fail("%s: latency %g us", name, tird_kernel_latency_us(k));
	if (tird_find(key) != k)
		fail("%s: tird_find(its key) is not it", name);
	double tol = tir_workload_tolerance(w, &err);
	if (tol < 0) {
		fail("%s: tolerance: %s", name, err.msg);
		goto out;
	}
	if (bufs_make(k, w, &b))
		goto out;

	int rc = tird_run(k, b.args, NULL);
	double e = rc == TIRD_OK ? max_error(&b) : INFINITY;
	if (rc != TIRD_OK || !(e <= tol))
		fail("%s: tird_run: %d (%s), max relative error %.3g over the tolerance %g", name, rc,
		     rc ? tird_last_error() : "ok", e, tol);
	void *first = outputs_copy(&b);

	/* its own function */
	pack_fn fn = named_fn(name);
	if (!fn) {
		fail("%s: not among the functions of manifest.json", name);
	} else {
		clear_outputs(&b);
		rc = fn(b.args, NULL);
		double e2 = rc == TIRD_OK ? max_error(&b) : INFINITY;
		if (rc != TIRD_OK || !(e2 <= tol))
			fail("%s(): %d (%s), error %.3g", name, rc, rc ? tird_last_error() : "ok", e2);
		else if (!outputs_equal(&b, first))
			printf("  %s(): within the tolerance (%.3g), not bit for bit tird_run's\n",
			       name, e2);
	}
	free(first);
	check_dispatch(k, j, &b, tol);
	printf("%s %s %-20s max_rel_error %.3g tolerance %g\n", failures == before ? "ok  " : "FAIL",
	       name, tird_kernel_op(k), e, tol);
out:
	bufs_free(&b);
	cJSON_Delete(j);
	tir_workload_free(w);
}

/* ---- the API's edges -------------------------------------------------------------------- */

static void check_edges(void)
{
	int n = tird_kernel_count(), before = failures;
	if (tird_find("nope") || tird_find(NULL))
		fail("tird_find(\"nope\") / tird_find(NULL) is not NULL");
	if (tird_kernel_at(-1) || tird_kernel_at(n))
		fail("tird_kernel_at out of range is not NULL");
	if (strncmp(tird_pack_target(), "cpu:", 4))
		fail("tird_pack_target() is %s", tird_pack_target());
	float x = 0;
	void *one[TIR_REF_MAX_ARGS] = { &x };
	int rc = tird_run(NULL, one, NULL);
	if (rc != TIRD_BAD_ARGUMENT || !strstr(tird_last_error(), "no kernel"))
		fail("tird_run(NULL, ...): %d \"%s\"", rc, tird_last_error());
	if (n > 0) {
		const tird_kernel *k = tird_kernel_at(0);
		rc = tird_run(k, NULL, NULL);
		if (rc != TIRD_BAD_ARGUMENT || !strstr(tird_last_error(), "no arguments"))
			fail("tird_run(k, NULL): %d \"%s\"", rc, tird_last_error());
		void *args[TIR_REF_MAX_ARGS] = { 0 };
		for (int i = 0; i + 1 < tird_kernel_nargs(k); i++)
			args[i] = &x;           /* the last one NULL */
		rc = tird_run(k, args, NULL);
		const tird_arg_info *last = tird_kernel_arg(k, tird_kernel_nargs(k) - 1);
		if (rc != TIRD_BAD_ARGUMENT || !last || !strstr(tird_last_error(), last->name))
			fail("tird_run with a NULL argument: %d \"%s\"", rc, tird_last_error());
	}
	if (tird_matmul(NULL, one, NULL) != TIRD_BAD_ARGUMENT ||
	    tird_conv2d(NULL, one, NULL) != TIRD_BAD_ARGUMENT ||
	    tird_depthwise_conv2d(NULL, one, NULL) != TIRD_BAD_ARGUMENT)
		fail("a dispatch function with a NULL shape is not TIRD_BAD_ARGUMENT");
	tird_matmul_shape nodtype = { .M = 1, .N = 1, .K = 1 };
	rc = tird_matmul(&nodtype, one, NULL);
	if (rc != TIRD_NOT_PACKED || !strstr(tird_last_error(), "no dtype"))
		fail("tird_matmul without a dtype: %d \"%s\"", rc, tird_last_error());
	printf("%s edges: tird_find(\"nope\") and out of range, NULL kernel, arguments, argument, "
	       "shape and dtype\n", failures == before ? "ok  " : "FAIL");
}

int main(int argc, char **argv)
{
	rng = argc > 1 ? strtoull(argv[1], NULL, 0) : 0x9e3779b97f4a7c15ull;
	if (!rng)
		rng = 1;
	int n = tird_kernel_count();
	printf("pack of %s: %d kernels\n", tird_pack_target(), n);
	if (n <= 0)
		fail("no kernels");
	for (int i = 0; i < n; i++) {
		const tird_kernel *k = tird_kernel_at(i);
		if (!k) {
			fail("tird_kernel_at(%d) is NULL", i);
			continue;
		}
		check_kernel(k);
	}
	check_edges();
	printf("pack_check: %d kernels, %d failures\n", n, failures);
	return failures ? 1 : 0;
}
