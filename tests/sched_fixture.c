/*
 * sched_fixture.c — the schedule fixture of sched_fixture.h.
 */
#include <stdlib.h>
#include <string.h>
#include <check.h>
#include "sched_fixture.h"
#include "measure/measure.h"

tu_fix tu_fix_make(const char *json)
{
	tir_error err = { "" };
	tu_fix f;
	f.w = tir_workload_parse(json, strlen(json), NULL, &err);
	ck_assert_msg(f.w != NULL, "%s: %s", json, err.msg);
	f.s = tir_sched_new(f.w, 1, &err);
	ck_assert_msg(f.s != NULL, "%s: %s", json, err.msg);
	return f;
}

void tu_fix_done(tu_fix *f)
{
	tir_sched_free(f->s);
	tir_workload_free(f->w);
}

int tu_fix_block(tu_fix *f, const char *name)
{
	tir_error err = { "" };
	int b = tir_get_block(f->s, name, &err);
	ck_assert_msg(b >= 0, "get_block %s: %s", name, err.msg);
	return b;
}

int tu_fix_read(tu_fix *f, int b, const char *buf)
{
	const tir_block *blk = f->s->rv[b].block;
	for (int i = 0; i < blk->nreads; i++)
		if (!strcmp(blk->reads[i].buf->name, buf))
			return i;
	ck_abort_msg("block %s does not read %s", blk->name, buf);
	return -1;
}

int64_t tu_buffer_elems(const tir_buffer *b)
{
	int64_t n = 1;
	for (int d = 0; d < b->ndim; d++)
		n *= b->shape[d];
	return n;
}

void tu_fix_check_replay(tu_fix *f)
{
	char *trace = tir_sched_trace(f->s);
	tir_error err = { "" };
	tir_sched *s2 = tir_sched_new(f->w, 1, &err);
	ck_assert(s2);
	ck_assert_msg(tir_sched_replay(s2, trace, &err) == 0, "replay: %s\n%s", err.msg, trace);
	char *t1 = tir_program_print(tir_sched_program(f->s));
	char *t2 = tir_program_print(tir_sched_program(s2));
	ck_assert_str_eq(t1, t2);
	free(t1);
	free(t2);
	free(trace);
	tir_sched_free(s2);
}

void tu_fix_check_cpu(tu_fix *f)
{
	tir_error err = { "" };
	tir_target t;
	ck_assert_msg(tir_target_parse("cpu", &t, &err) == 0, "%s", err.msg);
	const tir_program *p = tir_sched_program(f->s);
	ck_assert_msg(tir_verify(p, &t, &err) == 0, "verify: %s", err.msg);
	tir_code *c = tir_codegen(p, &t, &err);
	ck_assert_msg(c != NULL, "codegen: %s", err.msg);
	tir_measure_opts o;
	memset(&o, 0, sizeof o);
	o.seed = 7;
	o.no_timing = true;
	o.timeout_s = 60;
	tir_measure_result r;
	memset(&r, 0, sizeof r);
	int rc = tir_measure(tir_runner_for(&t), f->w, c, &t, &o, &r);
	ck_assert_msg(rc == 0, "%s: %s (max_rel_error %g)", tir_measure_status_name(r.status),
		      r.msg, r.max_rel_error);
	tir_measure_result_clear(&r);
	tir_code_free(c);
}
