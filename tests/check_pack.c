/*
 * check_pack.c — transform_layout (tuner/sched/pack.c): a block's input
 * packed into a blocked buffer by an index map.
 *
 * Each packing is checked for its shape (the packed buffer's extents, the
 * stage before the consumer), its meaning (the interpreter, ir/interp.c,
 * runs the scheduled and the unscheduled program on the same inputs and the
 * outputs must agree; an access outside a buffer fails the run), its trace
 * (replayed on a fresh schedule it prints the same program) and its code
 * (built, run and checked against the reference by the CPU runner).  Maps
 * that are not a bijection, and reads that are not inputs, must fail with a
 * message naming the fault and leave the program and the trace unchanged.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tir.h"
#include "ir/ir.h"
#include "sched/sched.h"
#include "measure/measure.h"
#include "testutil.h"
#include "sched_fixture.h"

typedef tu_fix fix;

static const tir_program *prog(fix *f) { return tir_sched_program(f->s); }

#define OK(call) do { tir_error e_ = { "" }; \
	ck_assert_msg((call) >= 0, "%s: %s", #call, e_.msg); } while (0)
#define E (&e_)

static const tir_buffer *buffer(fix *f, const char *name)
{
	const tir_program *p = prog(f);
	for (int i = 0; i < p->nbufs; i++)
		if (!strcmp(p->bufs[i]->name, name))
			return p->bufs[i];
	ck_abort_msg("no buffer %s", name);
	return NULL;
}

/* The output of p on inputs drawn from a fixed seed (malloc'd). */
static double *run(const tir_program *p, int64_t *n)
{
	double *params[TIR_MAX_IO];
	uint64_t seed = 12345;
	ck_assert_int_le(p->nparams, TIR_MAX_IO);
	double *out = NULL;
	for (int i = 0; i < p->nparams; i++) {
		const tir_buffer *b = p->bufs[i];
		int64_t ne = tu_buffer_elems(b);
		params[i] = malloc(sizeof(double) * (size_t)ne);
		for (int64_t k = 0; k < ne; k++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			params[i][k] = b->role == BUF_INPUT ? (double)((seed >> 33) % 17) - 8 : NAN;
		}
		if (b->role == BUF_OUTPUT) {
			out = params[i];
			*n = ne;
		}
	}
	tir_error err = { "" };
	interp_opts o = { .tree = false };
	ck_assert_msg(interp_run(p, params, &o, &err) == 0, "interp: %s", err.msg);
	for (int i = 0; i < p->nparams; i++)
		if (params[i] != out)
			free(params[i]);
	ck_assert_ptr_nonnull(out);
	return out;
}

/* The scheduled program computes what the unscheduled one does. */
static void check_same(fix *f)
{
	tir_error err = { "" };
	tir_program *ref = tir_program_build(f->w, &err);
	ck_assert_msg(ref, "%s", err.msg);
	int64_t n1 = 0, n2 = 0;
	double *a = run(ref, &n1), *b = run(prog(f), &n2);
	ck_assert_int_eq(n1, n2);
	for (int64_t i = 0; i < n1; i++)
		ck_assert_msg(fabs(a[i] - b[i]) <= 1e-9 * (1 + fabs(a[i])),
			      "output %lld: %g, expected %g", (long long)i, b[i], a[i]);
	free(a);
	free(b);
	tir_program_free(ref);
}

static void check_all(fix *f)
{
	check_same(f);
	tu_fix_check_replay(f);
	tu_fix_check_cpu(f);
}

static const char *CONV = "{\"op\":\"conv2d\",\"N\":1,\"C\":6,\"H\":7,\"W\":9,\"K\":8,\"R\":3,\"S\":3,"
			  "\"stride\":2,\"pad\":1,\"layout\":\"NHWC\"}";
static const char *GRP = "{\"op\":\"conv2d\",\"N\":1,\"C\":8,\"H\":5,\"W\":6,\"K\":12,\"R\":3,\"S\":3,"
			 "\"pad\":1,\"groups\":2,\"layout\":\"NHWC\",\"epilogue\":[\"relu\"]}";
static const char *MM = "{\"op\":\"matmul\",\"M\":12,\"N\":20,\"K\":10}";

/* HWIO weights as O/4, H, W, I, 4 (the output channels divide): the stage
 * fills a [2][3][3][6][4] buffer before the convolution, which reads it. */
START_TEST(pack_weights)
{
	fix f = tu_fix_make(CONV);
	int c = tu_fix_block(&f, "compute");
	int st;
	OK(st = tir_transform_layout(f.s, c, tu_fix_read(&f, c, "W"), "3/4,0,1,2,3%4", E));
	const tir_block *sb = f.s->rv[st].block;
	ck_assert_str_eq(sb->name, "W_packed");
	const tir_buffer *pb = buffer(&f, "W_packed");
	int64_t want[5] = { 2, 3, 3, 6, 4 };
	ck_assert_int_eq(pb->ndim, 5);
	for (int d = 0; d < 5; d++)
		ck_assert_int_eq(pb->shape[d], want[d]);
	ck_assert(pb->role == BUF_TEMP);
	ck_assert(stmt_order(sb->stmt, f.s->rv[c].block->stmt) < 0);
	ck_assert(!block_reads(f.s->rv[c].block, buffer(&f, "W")));
	ck_assert(block_reads(f.s->rv[c].block, pb));
	check_all(&f);
	tu_fix_done(&f);
}
END_TEST

/* NHWC input (after padding) with its 6 channels blocked by 4: N, C/4, H,
 * W, 4, padded to 8 channels with zeros; then the weights too, and a loop
 * split that lines the output channels up with the packed blocks. */
START_TEST(pack_input_padded)
{
	fix f = tu_fix_make(CONV);
	int c = tu_fix_block(&f, "compute");
	OK(tir_transform_layout(f.s, c, tu_fix_read(&f, c, "X_pad"), "0,3/4,1,2,3%4", E));
	const tir_buffer *pb = buffer(&f, "X_pad_packed");
	ck_assert_int_eq(pb->ndim, 5);
	ck_assert_int_eq(pb->shape[1], 2);
	ck_assert_int_eq(pb->shape[4], 4);
	ck_assert_ptr_nonnull(program_find_block(prog(&f), "X_pad_packed")->value);
	check_all(&f);
	OK(tir_transform_layout(f.s, c, tu_fix_read(&f, c, "W"), "3/4,0,1,2,3%4", E));
	int l[16], n;
	OK(n = tir_get_loops(f.s, c, l, 16, E));
	ck_assert_int_eq(n, 7);
	int k[2];
	tir_int fac[2] = { TIR_LIT(0), TIR_LIT(4) };
	OK(tir_split(f.s, l[3], 2, fac, k, E));
	int order[] = { l[0], l[1], l[2], k[0], l[4], l[5], l[6], k[1] };
	OK(tir_reorder(f.s, 8, order, E));
	OK(tir_vectorize(f.s, k[1], E));
	check_all(&f);
	tu_fix_done(&f);
}
END_TEST

/* The weights of a grouped convolution packed by 4 output channels (12 = 3
 * blocks), the stage moved under the convolution's outer output-channel
 * loop so that it packs one block per iteration. */
START_TEST(pack_grouped_compute_at)
{
	fix f = tu_fix_make(GRP);
	int c = tu_fix_block(&f, "compute");
	int st;
	OK(st = tir_transform_layout(f.s, c, tu_fix_read(&f, c, "W"), "3/4,0,1,2,3%4", E));
	int l[16], n;
	OK(n = tir_get_loops(f.s, c, l, 16, E));
	int k[2];
	tir_int fac[2] = { TIR_LIT(0), TIR_LIT(4) };
	OK(tir_split(f.s, l[3], 2, fac, k, E));
	int order[] = { l[0], k[0], l[1], l[2], l[4], l[5], l[6], k[1] };
	OK(tir_reorder(f.s, 8, order, E));
	OK(tir_compute_at(f.s, st, k[0], E));
	ck_assert(stmt_is_ancestor(f.s->rv[k[0]].loop, f.s->rv[st].block->stmt));
	check_all(&f);
	tu_fix_done(&f);
}
END_TEST

/* A matmul's B [K][N] as N/8 (padded 20 -> 24), K, 8: a padded split of
 * the innermost dimension, the other operand untouched. */
START_TEST(pack_matmul_padded)
{
	fix f = tu_fix_make(MM);
	int c = tu_fix_block(&f, "compute");
	OK(tir_transform_layout(f.s, c, tu_fix_read(&f, c, "B"), "1/8,0,1%8", E));
	const tir_buffer *pb = buffer(&f, "B_packed");
	ck_assert_int_eq(pb->shape[0], 3);
	ck_assert_int_eq(pb->shape[1], 10);
	ck_assert_int_eq(pb->shape[2], 8);
	ck_assert(block_reads(f.s->rv[c].block, buffer(&f, "A")));
	check_all(&f);
	tu_fix_done(&f);
}
END_TEST

/* Maps that are not a bijection and reads that are not inputs: refused
 * with the fault named, nothing changed. */
static const struct bad {
	const char *buf, *map, *msg;
} bad[] = {
	{ "W", "3/4,0,1,3%4", "dimension 2 of \"W\" is missing" },
	{ "W", "3/4,0,1,2,3%4,1", "dimension 1 of \"W\" appears more than once" },
	{ "W", "3/4,0,1,2", "has an outer part without the inner" },
	{ "W", "0,1,2,3%4", "has an inner part without the outer" },
	{ "W", "3/4,0,1,2,3%2", "is split by 4 and 2" },
	{ "W", "3/1,0,1,2,3%1", "factor 1 of dimension 3 must be 2 to" },
	{ "W", "0,1,2,4", "\"W\" has 4 dimensions, not 5" },
	{ "W", "0,1,2;3", "unexpected \";\"" },
	{ "W", "0,1,x", "expected a dimension at \"x\"" },
	{ "W", "", "no layout map for \"W\"" },
	{ "Y", "0,1,2,3", "is its own output \"Y\"" },
};
#define N_BAD ((int)(sizeof bad / sizeof bad[0]))

START_TEST(refuses)
{
	const struct bad *t = &bad[_i];
	fix f = tu_fix_make(CONV);
	int c = tu_fix_block(&f, "compute");
	const tir_block *cb = f.s->rv[c].block;
	int idx = -1;
	for (int i = 0; i < cb->nreads; i++)
		if (!strcmp(cb->reads[i].buf->name, t->buf))
			idx = i;
	ck_assert_msg(idx >= 0, "block compute does not read %s", t->buf);
	char *before = tir_program_print(prog(&f)), *tb = tir_sched_trace(f.s);
	tir_error err = { "" };
	ck_assert_int_lt(tir_transform_layout(f.s, c, idx, t->map, &err), 0);
	ck_assert_msg(strstr(err.msg, t->msg), "\"%s\": got \"%s\", expected \"%s\"", t->map,
		      err.msg, t->msg);
	char *after = tir_program_print(prog(&f)), *ta = tir_sched_trace(f.s);
	ck_assert_str_eq(before, after);
	ck_assert_str_eq(tb, ta);
	free(before);
	free(after);
	free(tb);
	free(ta);
	tu_fix_done(&f);
}
END_TEST

/* A read index out of range. */
START_TEST(refuses_index)
{
	fix f = tu_fix_make(CONV);
	int c = tu_fix_block(&f, "compute");
	tir_error err = { "" };
	ck_assert_int_lt(tir_transform_layout(f.s, c, 9, "0", &err), 0);
	ck_assert_msg(strstr(err.msg, "read index 9 is out of range"), "%s", err.msg);
	tu_fix_done(&f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pack");
	TCase *tc = tcase_create("transform_layout");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, pack_weights);
	tcase_add_test(tc, pack_input_padded);
	tcase_add_test(tc, pack_grouped_compute_at);
	tcase_add_test(tc, pack_matmul_padded);
	tcase_add_loop_test(tc, refuses, 0, N_BAD);
	tcase_add_test(tc, refuses_index);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
