/*
 * check_sched.c — the loop, binding and sampling primitives: what they do to
 * a program, and the message of each precondition they refuse.  A refused
 * primitive leaves the program and the trace as they were.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tir.h"
#include "ir/ir.h"
#include "testutil.h"

static tir_workload *w_mm;

static void setup(void)
{
	const char *j = "{\"op\":\"matmul\",\"M\":64,\"N\":48,\"K\":32}";
	tir_error err;
	w_mm = tir_workload_parse(j, strlen(j), NULL, &err);
	ck_assert(w_mm);
}

static void teardown(void) { tir_workload_free(w_mm); }

typedef struct fx {
	tir_sched *s;
	int b, l[3];            /* compute block; loops i, j, k */
	char *before, *trace_before;
} fx;

static fx fx_new(void)
{
	fx f;
	tir_error err;
	f.s = tir_sched_new(w_mm, 7, &err);
	ck_assert(f.s);
	f.b = tir_get_block(f.s, "compute", &err);
	ck_assert_int_eq(tir_get_loops(f.s, f.b, f.l, 3, &err), 3);
	f.before = NULL;
	f.trace_before = NULL;
	return f;
}

static void snapshot(fx *f)
{
	free(f->before);
	free(f->trace_before);
	f->before = tir_program_print(tir_sched_program(f->s));
	f->trace_before = tir_sched_trace(f->s);
}

/* Asserts the last call failed with `msg` in its message and changed nothing. */
static void refused(fx *f, int rc, const tir_error *err, const char *msg)
{
	ck_assert_msg(rc < 0, "accepted, expected refusal with \"%s\"", msg);
	ck_assert_msg(strstr(err->msg, msg), "message \"%s\" lacks \"%s\"", err->msg, msg);
	char *now = tir_program_print(tir_sched_program(f->s));
	char *trace = tir_sched_trace(f->s);
	ck_assert_str_eq(now, f->before);
	ck_assert_str_eq(trace, f->trace_before);
	free(now);
	free(trace);
}

static void fx_free(fx *f)
{
	free(f->before);
	free(f->trace_before);
	tir_sched_free(f->s);
}

START_TEST(split_infers_and_predicates)
{
	fx f = fx_new();
	tir_error err;
	tir_int fac[2] = { TIR_LIT(0), TIR_LIT(10) };
	int o[2];
	ck_assert(tir_split(f.s, f.l[0], 2, fac, o, &err) >= 0);
	char *txt = tir_program_print(tir_sched_program(f.s));
	ck_assert_msg(strstr(txt, "for i_0 in range(7):"), "%s", txt);
	ck_assert_msg(strstr(txt, "T.where(i_0 * 10 + i_1 < 64)"), "%s", txt);
	free(txt);
	/* perfect factors leave no predicate */
	tir_int g[3] = { TIR_LIT(4), TIR_LIT(0), TIR_LIT(4) };
	int o2[3];
	ck_assert(tir_split(f.s, f.l[1], 3, g, o2, &err) >= 0);
	const tir_program *p = tir_sched_program(f.s);
	tir_block *b = program_find_block(p, "compute");
	char *bind = tir_expr_print(b->iters[1].binding);
	ck_assert_str_eq(bind, "j_0 * 12 + j_1 * 4 + j_2");
	free(bind);
	fx_free(&f);
}
END_TEST

START_TEST(fuse_then_split_back)
{
	fx f = fx_new();
	tir_error err;
	int ij[2] = { f.l[0], f.l[1] };
	int fu = tir_fuse(f.s, 2, ij, &err);
	ck_assert_msg(fu >= 0, "%s", err.msg);
	tir_int fac[2] = { TIR_LIT(64), TIR_LIT(48) };
	int o[2];
	ck_assert(tir_split(f.s, fu, 2, fac, o, &err) >= 0);
	tir_block *b = program_find_block(tir_sched_program(f.s), "compute");
	/* the bindings simplify back to plain loop variables */
	ck_assert(b->iters[0].binding->kind == E_VAR);
	ck_assert(b->iters[1].binding->kind == E_VAR);
	ck_assert(b->predicate == NULL);
	fx_free(&f);
}
END_TEST

START_TEST(reorder_moves_loops)
{
	fx f = fx_new();
	tir_error err;
	int kji[3] = { f.l[2], f.l[1], f.l[0] };
	ck_assert(tir_reorder(f.s, 3, kji, &err) >= 0);
	char *txt = tir_program_print(tir_sched_program(f.s));
	char *k = strstr(txt, "for k in"), *j = strstr(txt, "for j in"), *i = strstr(txt, "for i in");
	ck_assert(k && j && i && k < j && j < i);
	free(txt);
	fx_free(&f);
}
END_TEST

START_TEST(illegal_loop_schedules)
{
	fx f = fx_new();
	tir_error err;
	int rc;
	snapshot(&f);
	tir_int two_infer[3] = { TIR_LIT(0), TIR_LIT(0), TIR_LIT(4) };
	rc = tir_split(f.s, f.l[0], 3, two_infer, NULL, &err);
	refused(&f, rc, &err, "more than one factor to infer");
	tir_int small[2] = { TIR_LIT(3), TIR_LIT(4) };
	rc = tir_split(f.s, f.l[0], 2, small, NULL, &err);
	refused(&f, rc, &err, "multiply to 12, less than its extent 64");
	tir_int neg[2] = { TIR_LIT(-2), TIR_LIT(0) };
	rc = tir_split(f.s, f.l[0], 2, neg, NULL, &err);
	refused(&f, rc, &err, "is not positive");
	int ik[2] = { f.l[0], f.l[2] };
	rc = tir_fuse(f.s, 2, ik, &err);
	refused(&f, rc, &err, "not the only child");
	int ii[2] = { f.l[0], f.l[0] };
	rc = tir_reorder(f.s, 2, ii, &err);
	refused(&f, rc, &err, "given twice");
	rc = tir_parallel(f.s, f.l[2], &err);
	refused(&f, rc, &err, "feeds reduction iterator \"vk\"");
	rc = tir_vectorize(f.s, f.l[0], &err);
	refused(&f, rc, &err, "only innermost loops can be vectorized");
	rc = tir_bind(f.s, f.l[0], "warpIdx.x", &err);
	refused(&f, rc, &err, "unknown thread axis \"warpIdx.x\"");
	rc = tir_get_block(f.s, "nonexistent", &err);
	refused(&f, rc, &err, "no block named \"nonexistent\"");
	rc = tir_annotate(f.s, f.l[0], "Bad Key", 1, &err);
	refused(&f, rc, &err, "use lowercase letters");
	double zero[2] = { 0, 0 };
	int64_t cand[2] = { 1, 2 };
	rc = tir_sample_categorical(f.s, 2, cand, zero, &err);
	refused(&f, rc, &err, "sum to zero");
	/* a loop used after it was split away */
	tir_int fac[2] = { TIR_LIT(0), TIR_LIT(8) };
	ck_assert(tir_split(f.s, f.l[0], 2, fac, NULL, &err) >= 0);
	snapshot(&f);
	rc = tir_unroll(f.s, f.l[0], &err);
	refused(&f, rc, &err, "no longer exists");
	/* kinds are fixed once set */
	ck_assert(tir_parallel(f.s, f.l[1], &err) >= 0);
	snapshot(&f);
	rc = tir_bind(f.s, f.l[1], "threadIdx.x", &err);
	refused(&f, rc, &err, "is already parallel");
	rc = tir_split(f.s, f.l[1], 2, fac, NULL, &err);
	refused(&f, rc, &err, "split it before changing its kind");
	/* nested blockIdx.x */
	fx_free(&f);
	f = fx_new();
	ck_assert(tir_bind(f.s, f.l[0], "blockIdx.x", &err) >= 0);
	snapshot(&f);
	rc = tir_bind(f.s, f.l[1], "blockIdx.x", &err);
	refused(&f, rc, &err, "already bound to blockIdx.x");
	fx_free(&f);
}
END_TEST

START_TEST(perfect_tile_samples_are_perfect)
{
	tir_error err;
	for (uint64_t seed = 1; seed < 60; seed++) {
		tir_sched *s = tir_sched_new(w_mm, seed, &err);
		int b = tir_get_block(s, "compute", &err), l[3];
		tir_get_loops(s, b, l, 3, &err);
		int t[4];
		ck_assert(tir_sample_perfect_tile(s, l[0], 4, 8, t, &err) >= 0);
		int64_t prod = 1;
		for (int i = 0; i < 4; i++)
			prod *= tir_sched_int(s, t[i]);
		ck_assert_int_eq(prod, 64);
		ck_assert(tir_sched_int(s, t[3]) <= 8);
		tir_sched_free(s);
	}
}
END_TEST

static Suite *make_sched_suite(void)
{
	Suite *s = suite_create("sched");
	TCase *tc = tcase_create("loops");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, split_infers_and_predicates);
	tcase_add_test(tc, fuse_then_split_back);
	tcase_add_test(tc, reorder_moves_loops);
	tcase_add_test(tc, illegal_loop_schedules);
	tcase_add_test(tc, perfect_tile_samples_are_perfect);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(make_sched_suite());
}
