/*
 * timing.c — the clock and the timing loop that every runner shares: how
 * many calls make a repeat and how many repeats fit in the time left
 * (tir_repeat_plan, also the rule of the CPU batch's rounds), the median,
 * and tir_time_repeats, which runs the loop over a runner's flush and timed
 * calls.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <time.h>
#include "measure.h"

double tir_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the timing loop ------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int tir_repeat_plan(const tir_measure_opts *o, double one_us, double spent_s, int want,
		    long *calls)
{
	if (one_us < 0.01)
		one_us = 0.01;
	double n = ceil(o->min_repeat_us / one_us);
	*calls = n < 1 ? 1 : n > 1e7 ? 10000000 : (long)n;
	double left_us = (0.8 * o->timeout_s - spent_s) * 1e6;
	double per_repeat = (double)*calls * one_us * 1.2 + 20000;   /* + a generous flush */
	if (want * per_repeat > left_us)
		want = left_us / per_repeat < 1 ? 1 : (int)(left_us / per_repeat);
	return want;
}

double tir_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof v[0], cmp_double);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int tir_time_repeats(const tir_measure_opts *o, void *ctx,
		     int (*flush)(void *ctx, tir_child_report *rep),
		     int (*timed)(void *ctx, long n, double *us, tir_child_report *rep),
		     tir_child_report *rep)
{
	double start = tir_now_s();
	double one;
	if (timed(ctx, 1, &one, rep))            /* warm-up */
		return -1;
	if (timed(ctx, 1, &one, rep))            /* how long one call takes */
		return -1;
	if (o->slow_us > 0 && one > o->slow_us) {
		rep->nrepeats = 1;
		rep->repeat_us[0] = rep->median_us = one;
		rep->timing_s = tir_now_s() - start;
		return 0;
	}
	long n;
	int repeats = tir_repeat_plan(o, one, tir_now_s() - start, o->repeats, &n);
	double sorted[TIR_MEASURE_MAX_REPEATS];
	for (int i = 0; i < repeats; i++) {
		double us;
		if (flush(ctx, rep) || timed(ctx, n, &us, rep))
			return -1;
		rep->repeat_us[i] = us / (double)n;
		sorted[i] = us / (double)n;
	}
	rep->nrepeats = repeats;
	rep->median_us = tir_median(sorted, repeats);
	rep->timing_s = tir_now_s() - start;
	return 0;
}
