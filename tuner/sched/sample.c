/*
 * sample.c — sampling instructions: sample_perfect_tile and
 * sample_categorical.  Each draws from the schedule's seeded generator, or,
 * when the instruction carries a decision (a replayed trace), checks and
 * takes it.  The decision is recorded in the trace either way.
 */
#include "sched.h"

void sched_draw_factors(tir_sched *s, int64_t extent, int n, int64_t *f)
{
	for (int i = 0; i < n; i++)
		f[i] = 1;
	int64_t x = extent;
	for (int64_t d = 2; d * d <= x; d++)
		while (x % d == 0) {
			f[sched_rand(s) % (uint64_t)n] *= d;
			x /= d;
		}
	if (x > 1)
		f[sched_rand(s) % (uint64_t)n] *= x;
}

/* Draws n factors whose product is `extent`, innermost at most max_inner. */
static void draw_tile(tir_sched *s, int64_t extent, int n, int64_t max_inner, int64_t *f)
{
	for (int attempt = 0; attempt < 64; attempt++) {
		sched_draw_factors(s, extent, n, f);
		if (max_inner <= 0 || f[n - 1] <= max_inner)
			return;
	}
	for (int i = 0; i < n; i++)
		f[i] = 1;
	f[0] = extent;
}

int prim_sample_perfect_tile(tir_sched *s, tir_inst *in, tir_error *err)
{
	if (in->nin != 1 || in->nattr != 2)
		return tir_fail(err, "takes a loop, n and max_innermost");
	tir_stmt *l = sched_loop(s, in->in[0], err);
	if (!l)
		return -1;
	int64_t n = in->attr[0], max_inner = in->attr[1];
	if (n < 1 || n > TIR_MAX_IO)
		return tir_fail(err, "n = %lld, expected 1 to %d", (long long)n, TIR_MAX_IO);
	int64_t f[TIR_MAX_IO];
	if (in->ndecision) {
		if (in->ndecision != n)
			return tir_fail(err, "the decision has %d factors, expected %lld", in->ndecision, (long long)n);
		int64_t prod = 1;
		for (int i = 0; i < n; i++) {
			if (in->decision[i] < 1 || in->decision[i] > l->extent)
				return tir_fail(err, "decision factor %lld out of range", (long long)in->decision[i]);
			prod *= in->decision[i];
			if (prod > l->extent)
				break;
			f[i] = in->decision[i];
		}
		if (prod != l->extent)
			return tir_fail(err, "the decision's factors do not multiply to the extent %lld of loop \"%s\"",
					(long long)l->extent, l->var->name);
		if (max_inner > 0 && f[n - 1] > max_inner)
			return tir_fail(err, "innermost factor %lld exceeds max_innermost %lld",
					(long long)f[n - 1], (long long)max_inner);
	} else {
		draw_tile(s, l->extent, (int)n, max_inner, f);
		in->ndecision = (int)n;
		for (int i = 0; i < n; i++)
			in->decision[i] = f[i];
	}
	for (int i = 0; i < n; i++) {
		int rv = sched_new_rv(s, RV_INT);
		s->rv[rv].value = f[i];
		in->out[in->nout++] = rv;
	}
	return 0;
}

int prim_sample_categorical(tir_sched *s, tir_inst *in, tir_error *err)
{
	int n = in->nin;
	if (n < 1 || in->nfattr != n)
		return tir_fail(err, "needs candidates and one probability each");
	double total = 0;
	for (int i = 0; i < n; i++) {
		if (in->in[i].rv >= 0)
			return tir_fail(err, "candidates must be literals");
		if (!(in->fattr[i] >= 0))
			return tir_fail(err, "probability %d is negative or not a number", i);
		total += in->fattr[i];
	}
	if (!(total > 0))
		return tir_fail(err, "the probabilities sum to zero");
	int64_t k;
	if (in->ndecision) {
		k = in->decision[0];
		if (in->ndecision != 1 || k < 0 || k >= n)
			return tir_fail(err, "decision %lld is not a candidate index", (long long)k);
	} else {
		double u = sched_uniform(s) * total;
		for (k = 0; k < n - 1; k++) {
			u -= in->fattr[k];
			if (u < 0)
				break;
		}
		in->ndecision = 1;
		in->decision[0] = k;
	}
	int rv = sched_new_rv(s, RV_INT);
	s->rv[rv].value = in->in[k].lit;
	in->out[in->nout++] = rv;
	return 0;
}
