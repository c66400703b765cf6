/*
 * check.c — the random inputs of a candidate and the check of its outputs
 * against the reference (reference.c: the unscheduled program,
 * interpreted): fill, the conversions to double, the tolerance, the
 * comparison and the verdict, output by output.
 *
 * The inputs of a candidate are a pure function of (seed, argument index,
 * dtype, element count): tir_measure_fill draws them from tir_splitmix, so the
 * child that runs the candidate and the parent that computes the reference
 * make the same values without sending them anywhere.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../ir/ir.h"
#include "measure.h"

/* ---- random inputs ------------------------------------------------------------ */

static uint32_t f32_bits(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	return x;
}

static float bits_f32(uint32_t x)
{
	float f;
	memcpy(&f, &x, 4);
	return f;
}

/* float → IEEE binary16, round to nearest even. */
static uint16_t f32_to_f16(float f)
{
	uint32_t x = f32_bits(f);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
	uint32_t ax = x & 0x7fffffffu;
	if (ax >= 0x7f800000u)                       /* inf, nan */
		return sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0);
	if (ax >= 0x477ff000u)                       /* >= 65520: overflows */
		return sign | 0x7c00;
	if (ax < 0x38800000u) {                      /* below 2^-14: subnormal */
		uint32_t e = ax >> 23;
		if (e < 102)
			return sign;
		uint32_t m = (ax & 0x7fffffu) | 0x800000u;
		int shift = 126 - (int)e;            /* 14 .. 24 */
		uint32_t q = m >> shift, rem = m & ((1u << shift) - 1);
		uint32_t half = 1u << (shift - 1);
		if (rem > half || (rem == half && (q & 1)))
			q++;
		return sign | (uint16_t)q;
	}
	uint32_t r = ax + 0xfffu + ((ax >> 13) & 1);
	return sign | (uint16_t)((r - 0x38000000u) >> 13);
}

static float f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
	if (e == 0) {                                /* zero, subnormal */
		float v = (float)m * 0x1p-24f;
		return sign ? -v : v;
	}
	if (e == 31)
		return bits_f32(sign | 0x7f800000u | (m << 13));
	return bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

static uint16_t f32_to_bf16(float f)
{
	uint32_t x = f32_bits(f);
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x40);  /* quiet nan */
	return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

static float bf16_to_f32(uint16_t h)
{
	return bits_f32((uint32_t)h << 16);
}

void tir_measure_fill(const tir_code *c, int index, uint64_t seed, void *dst)
{
	const tir_arg_info *a = &c->args[index];
	size_t bytes = (size_t)a->elems * (size_t)a->elem_bytes;
	if (a->is_output) {
		memset(dst, 0xff, bytes);
		return;
	}
	if (a->is_scratch) {
		memset(dst, 0, bytes);
		return;
	}
	uint64_t s = seed ^ (0xd1b54a32d192ed03ULL * (uint64_t)(index + 1));
	for (int64_t i = 0; i < a->elems; i++) {
		uint64_t r = tir_splitmix(&s);
		float f = (float)(r >> 40) * 0x1p-23f - 1.0f;   /* [-1, 1) */
		int64_t k = (int64_t)(r % 17) - 8;               /* [-8, 8] */
		switch (a->dtype) {
		case TIR_F32:
			((float *)dst)[i] = f;
			break;
		case TIR_F16:
			((uint16_t *)dst)[i] = f32_to_f16(f);
			break;
		case TIR_BF16:
			((uint16_t *)dst)[i] = f32_to_bf16(f);
			break;
		case TIR_I8:
			((int8_t *)dst)[i] = (int8_t)k;
			break;
		case TIR_U8:          /* [0, 255]: above 127, where signedness shows */
			((uint8_t *)dst)[i] = (uint8_t)(r >> 24);
			break;
		case TIR_I32:
			((int32_t *)dst)[i] = (int32_t)k;
			break;
		case TIR_I64:
			((int64_t *)dst)[i] = k;
			break;
		default:                                     /* bool and the like */
			memset((char *)dst + i * a->elem_bytes, 0, (size_t)a->elem_bytes);
			((unsigned char *)dst)[i * a->elem_bytes] = (unsigned char)(r & 1);
			break;
		}
	}
}

void tir_measure_to_double(int dtype, const void *src, int64_t n, double *dst)
{
	for (int64_t i = 0; i < n; i++) {
		switch (dtype) {
		case TIR_F32: dst[i] = ((const float *)src)[i]; break;
		case TIR_F16: dst[i] = f16_to_f32(((const uint16_t *)src)[i]); break;
		case TIR_BF16: dst[i] = bf16_to_f32(((const uint16_t *)src)[i]); break;
		case TIR_I8: dst[i] = ((const int8_t *)src)[i]; break;
		case TIR_U8: dst[i] = ((const uint8_t *)src)[i]; break;
		case TIR_I32: dst[i] = ((const int32_t *)src)[i]; break;
		case TIR_I64: dst[i] = (double)((const int64_t *)src)[i]; break;
		default: dst[i] = ((const unsigned char *)src)[i * dtype_bytes(dtype)]; break;
		}
	}
}

/* ---- the check ------------------------------------------------------------------ */

static double dtype_tolerance(int dtype)
{
	switch (dtype) {
	case TIR_F32: return 1e-5;
	case TIR_F16: return 1e-2;
	case TIR_BF16: return 2e-2;
	default: return 0;
	}
}

double tir_measure_tolerance(const tir_code *c)
{
	double tol = 0;
	for (int i = 0; i < c->nargs; i++)
		if (!c->args[i].is_scratch && dtype_tolerance(c->args[i].dtype) > tol)
			tol = dtype_tolerance(c->args[i].dtype);
	return tol;
}

double tir_workload_tolerance(const tir_workload *w, tir_error *err)
{
	tir_ref_arg ra[TIR_REF_MAX_ARGS];
	int n = tir_reference_args(w, ra, TIR_REF_MAX_ARGS, err);
	if (n < 0)
		return -1;
	double tol = 0;
	for (int i = 0; i < n; i++)
		if (dtype_tolerance(ra[i].dtype) > tol)   /* as tir_measure_tolerance: every argument */
			tol = dtype_tolerance(ra[i].dtype);
	return tol;
}

/* Matches the code's arguments but scratch, in order, with the program's
 * parameters (tir_reference_args): the same count, and for each the same
 * element count, dtype and role.  Fills ra[] and idx[] (the code's index of
 * each); returns the count. */
static int match_args(const tir_workload *w, const tir_code *c, tir_ref_arg *ra,
		      int *idx, tir_error *err)
{
	int n = tir_reference_args(w, ra, TIR_REF_MAX_ARGS, err);
	if (n < 0)
		return -1;
	int k = 0;
	for (int i = 0; i < c->nargs; i++) {
		const tir_arg_info *a = &c->args[i];
		if (a->is_scratch)
			continue;
		if (k == n)
			return tir_fail(err, "check: the code takes more arguments than the "
					"program of %s (%d)", tir_workload_op(w), n);
		if (a->elems != ra[k].elems)
			return tir_fail(err, "check: argument %d \"%s\" has %lld elements, "
					"the program's \"%s\" %lld", i, a->name,
					(long long)a->elems, ra[k].name, (long long)ra[k].elems);
		if (a->dtype != ra[k].dtype)
			return tir_fail(err, "check: argument %d \"%s\" is %s, the program's "
					"\"%s\" %s", i, a->name, dtype_name(a->dtype), ra[k].name,
					dtype_name(ra[k].dtype));
		if (!a->is_output != !ra[k].is_output)
			return tir_fail(err, "check: argument %d \"%s\" is %s, the program's "
					"\"%s\" is not", i, a->name,
					a->is_output ? "an output" : "an input", ra[k].name);
		idx[k++] = i;
	}
	if (k != n)
		return tir_fail(err, "check: the code takes %d arguments, the program of %s %d",
				k, tir_workload_op(w), n);
	return n;
}

int tir_measure_reference(const tir_workload *w, const tir_code *c, uint64_t seed,
			  double **ref, int64_t *n_out, tir_error *err)
{
	tir_ref_arg ra[TIR_REF_MAX_ARGS];
	int idx[TIR_REF_MAX_ARGS];
	int n = match_args(w, c, ra, idx, err);
	if (n < 0)
		return -1;
	double *arg[TIR_REF_MAX_ARGS] = { 0 };
	int64_t total = 0;
	for (int k = 0; k < n; k++) {
		const tir_arg_info *a = &c->args[idx[k]];
		void *raw = xmalloc((size_t)a->elems * (size_t)a->elem_bytes + 1);
		tir_measure_fill(c, idx[k], seed, raw);   /* outputs: all-ones, as a candidate's */
		arg[k] = xmalloc((size_t)a->elems * sizeof(double) + 1);
		tir_measure_to_double(a->dtype, raw, a->elems, arg[k]);
		free(raw);
		if (ra[k].is_output)
			total += ra[k].elems;
	}
	int rc = tir_reference(w, arg, err);
	double *out = rc ? NULL : xmalloc((size_t)total * sizeof(double) + 1);
	int64_t at = 0;
	for (int k = 0; k < n && out; k++) {
		if (!ra[k].is_output)
			continue;
		int64_t finite = 0;
		for (int64_t i = 0; i < ra[k].elems; i++)
			finite += isfinite(arg[k][i]) != 0;
		if (rc == 0 && finite == 0)
			rc = tir_fail(err, "reference: output \"%s\" has no finite element (%g at "
				      "element 0): nothing to check a candidate against",
				      ra[k].name, arg[k][0]);
		memcpy(out + at, arg[k], (size_t)ra[k].elems * sizeof(double));
		at += ra[k].elems;
	}
	for (int k = 0; k < n; k++)
		free(arg[k]);
	if (rc) {
		free(out);
		return -1;
	}
	*ref = out;
	*n_out = total;
	return 0;
}

double tir_measure_compare(const double *ref, const double *out, int64_t n)
{
	double maxref = 0, maxdiff = 0;
	for (int64_t i = 0; i < n; i++) {
		if (!isfinite(ref[i])) {
			/* the same NaN or infinity, or wrong */
			if (!(isnan(ref[i]) ? isnan(out[i]) : out[i] == ref[i]))
				return INFINITY;
			continue;
		}
		if (!isfinite(out[i]))
			return INFINITY;
		double d = fabs(out[i] - ref[i]);
		if (d > maxdiff)
			maxdiff = d;
		if (fabs(ref[i]) > maxref)
			maxref = fabs(ref[i]);
	}
	return maxdiff / (maxref > 1e-30 ? maxref : 1e-30);
}

/* The largest error of out against ref (n values), output by output when
 * c's outputs make up n values (else as one), and the output it is in
 * (NULL when c has none). */
static double compare_outputs(const tir_code *c, const double *ref, const double *out,
			      int64_t n, const char **worst)
{
	*worst = NULL;
	for (int i = 0; i < c->nargs && !*worst; i++)
		if (c->args[i].is_output)
			*worst = c->args[i].name;
	if (tir_code_output_elems(c) != n)
		return tir_measure_compare(ref, out, n);
	double e = 0;
	int64_t at = 0;
	for (int i = 0; i < c->nargs; i++) {
		const tir_arg_info *a = &c->args[i];
		if (!a->is_output)
			continue;
		double ei = tir_measure_compare(ref + at, out + at, a->elems);
		if (ei > e) {
			e = ei;
			*worst = a->name;
		}
		at += a->elems;
	}
	return e;
}

int tir_measure_check(const tir_workload *w, const tir_code *c, uint64_t seed,
		      const double *output, int64_t out_elems,
		      double *max_rel_error, tir_error *err)
{
	double *ref;
	int64_t n;
	if (tir_measure_reference(w, c, seed, &ref, &n, err))
		return -1;
	if (n != out_elems) {
		free(ref);
		return tir_fail(err, "check: %lld output values, the reference has %lld",
				(long long)out_elems, (long long)n);
	}
	const char *worst;
	*max_rel_error = compare_outputs(c, ref, output, n, &worst);
	free(ref);
	return 0;
}

tir_measure_status tir_measure_judge(const tir_code *c, const double *ref, int64_t ref_n,
				     const double *out, int64_t out_n,
				     double *max_rel_error, char *msg, size_t size)
{
	if (out_n != ref_n) {
		snprintf(msg, size, "%lld output values, the reference has %lld",
			 (long long)out_n, (long long)ref_n);
		return TIR_MEASURE_RUN_ERROR;
	}
	const char *worst;
	*max_rel_error = compare_outputs(c, ref, out, ref_n, &worst);
	double tol = tir_measure_tolerance(c);
	if (!(*max_rel_error <= tol)) {
		snprintf(msg, size, "wrong result: max relative error %.3g in output \"%s\" "
			 "exceeds the tolerance %g", *max_rel_error, worst ? worst : "?", tol);
		return TIR_MEASURE_WRONG_RESULT;
	}
	return TIR_MEASURE_OK;
}
