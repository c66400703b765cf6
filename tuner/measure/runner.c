/*
 * runner.c — the runner interface and the steps of measuring one candidate:
 * the statuses, the defaults of the options, the runner of a target, the
 * argument lists that runners compare, and tir_measure(), which builds,
 * runs and checks one candidate in that order.
 *
 * What every runner shares sits beside it, one concern a file: check.c
 * (the random inputs and the check against the reference), guard.c (the
 * child-process guards), timing.c (the timing loop).  The runners are
 * cpu.c and cuda_run.c (with cuda_stream.c); batch.c measures a batch of
 * traces with them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "measure.h"

/* ---- argument lists ---------------------------------------------------------- */

int tir_code_noutputs(const tir_code *c)
{
	int n = 0;
	for (int i = 0; i < c->nargs; i++)
		n += c->args[i].is_output != 0;
	return n;
}

int64_t tir_code_output_elems(const tir_code *c)
{
	int64_t n = 0;
	for (int i = 0; i < c->nargs; i++)
		if (c->args[i].is_output)
			n += c->args[i].elems;
	return n;
}

size_t tir_code_output_bytes(const tir_code *c)
{
	size_t n = 0;
	for (int i = 0; i < c->nargs; i++)
		if (c->args[i].is_output)
			n += (size_t)c->args[i].elems * (size_t)c->args[i].elem_bytes;
	return n;
}

void tir_code_outputs_pack(const tir_code *c, void *const *args, void *raw)
{
	unsigned char *at = raw;
	for (int i = 0; i < c->nargs; i++) {
		if (!c->args[i].is_output)
			continue;
		size_t bytes = (size_t)c->args[i].elems * (size_t)c->args[i].elem_bytes;
		memcpy(at, args[i], bytes);
		at += bytes;
	}
}

void tir_code_outputs_unpack(const tir_code *c, const void *raw, double *dst)
{
	const unsigned char *at = raw;
	for (int i = 0; i < c->nargs; i++) {
		const tir_arg_info *a = &c->args[i];
		if (!a->is_output)
			continue;
		tir_measure_to_double(a->dtype, at, a->elems, dst);
		at += (size_t)a->elems * (size_t)a->elem_bytes;
		dst += a->elems;
	}
}

bool tir_code_same_args(const tir_code *first, const tir_code *c)
{
	int i = 0, j = 0;
	for (;;) {
		while (i < first->nargs && first->args[i].is_scratch)
			i++;
		while (j < c->nargs && c->args[j].is_scratch)
			j++;
		if (i == first->nargs || j == c->nargs)
			return i == first->nargs && j == c->nargs;
		if (i != j)
			return false;
		const tir_arg_info *x = &first->args[i++], *y = &c->args[j++];
		if (x->dtype != y->dtype || x->elem_bytes != y->elem_bytes ||
		    x->elems != y->elems || !x->is_output != !y->is_output)
			return false;
	}
}

/* ---- statuses and options --------------------------------------------------- */

static const char *const status_names[] = {
#define TIR_MS_NAME(id, name) name,
	TIR_MEASURE_STATUSES(TIR_MS_NAME)
#undef TIR_MS_NAME
};

const char *tir_measure_status_name(tir_measure_status s)
{
	if ((int)s < 0 || s >= TIR_MEASURE_NSTATUSES)
		return "unknown";
	return status_names[s];
}

int tir_measure_status_parse(const char *name)
{
	for (int s = 0; name && s < TIR_MEASURE_NSTATUSES; s++)
		if (!strcmp(name, status_names[s]))
			return s;
	return -1;
}

void tir_measure_result_clear(tir_measure_result *r)
{
	free(r->output);
	memset(r, 0, sizeof *r);
	r->max_rel_error = -1;
}

tir_measure_opts tir_measure_opts_default(const tir_measure_opts *o)
{
	tir_measure_opts d = { 0 };
	if (o)
		d = *o;
	if (d.repeats <= 0)
		d.repeats = 5;
	if (d.repeats > TIR_MEASURE_MAX_REPEATS)
		d.repeats = TIR_MEASURE_MAX_REPEATS;
	if (d.rounds <= 0)
		d.rounds = 10;
	if (d.rounds > TIR_MEASURE_MAX_REPEATS)
		d.rounds = TIR_MEASURE_MAX_REPEATS;
	if (!(d.min_repeat_us > 0))
		d.min_repeat_us = 1000;
	if (!(d.timeout_s > 0))
		d.timeout_s = 10;
	return d;
}

const tir_runner *tir_runner_for(const tir_target *t)
{
	return t->kind == TIR_TARGET_CUDA ? &tir_runner_cuda : &tir_runner_cpu;
}

/* ---- the pipeline ------------------------------------------------------------------ */

int tir_measure(const tir_runner *r, const tir_workload *w, const tir_code *c,
		const tir_target *t, const tir_measure_opts *opts,
		tir_measure_result *res)
{
	memset(res, 0, sizeof *res);
	res->max_rel_error = -1;
	tir_measure_opts o = tir_measure_opts_default(opts);
	tir_error err = { "" };

	/* 1. build */
	tir_artifact *a = r->build(c, t, &err);
	if (!a) {
		res->status = TIR_MEASURE_BUILD_ERROR;
		snprintf(res->msg, sizeof res->msg, "%s", err.msg);
		return -1;
	}
	/* 2. run once and time, in a child */
	int rc = r->run(a, c, &o, res);
	r->free(a);
	if (rc)
		return -1;
	/* 3. check the output against the reference on the same inputs */
	const double *ref = o.reference;
	double *own = NULL;
	int64_t ref_n = res->out_elems;       /* o.reference is for this code */
	if (!ref) {
		if (tir_measure_reference(w, c, o.seed, &own, &ref_n, &err)) {
			res->status = TIR_MEASURE_RUN_ERROR;
			snprintf(res->msg, sizeof res->msg, "%s", err.msg);
			return -1;
		}
		ref = own;
	}
	res->status = tir_measure_judge(c, ref, ref_n, res->output, res->out_elems,
					&res->max_rel_error, res->msg, sizeof res->msg);
	free(own);
	return res->status == TIR_MEASURE_OK ? 0 : -1;
}
