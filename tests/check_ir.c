/*
 * check_ir.c — the IR core: programs built from every operator's compute
 * definition, the printer (golden files), trace round trips, and the integer
 * analysis that schedule primitives rely on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include "tir.h"
#include "ir/ir.h"
#include "testutil.h"
#include "reducers.h"

static tir_workload *parse(const char *json)
{
	tir_error err = { "" };
	tir_workload *w = tir_workload_parse(json, strlen(json), NULL, &err);
	ck_assert_msg(w != NULL, "%s: %s", json, err.msg);
	return w;
}

/* One workload per operator and layout, with odd sizes. */
static const char *const odd_workloads[] = {
	"{\"op\":\"matmul\",\"M\":37,\"N\":29,\"K\":13}",
	"{\"op\":\"matmul\",\"M\":17,\"N\":23,\"K\":11,\"batch\":3,\"layout\":\"NT\"}",
	"{\"op\":\"matmul\",\"M\":19,\"N\":7,\"K\":31,\"layout\":\"TN\",\"epilogue\":[\"bias\",\"relu\"]}",
	"{\"op\":\"conv1d\",\"N\":2,\"C\":5,\"W\":29,\"K\":7,\"S\":3,\"stride\":3,\"pad\":[1,2]}",
	"{\"op\":\"conv1d\",\"N\":1,\"C\":6,\"W\":31,\"K\":4,\"S\":2,\"dilation\":3,\"groups\":2,\"layout\":\"NWC\"}",
	"{\"op\":\"conv2d\",\"N\":1,\"C\":3,\"H\":13,\"W\":11,\"K\":5,\"R\":3,\"S\":2,\"stride\":[2,3],\"pad\":[1,0,2,1]}",
	"{\"op\":\"conv2d\",\"N\":2,\"C\":4,\"H\":9,\"W\":7,\"K\":6,\"R\":3,\"S\":3,\"dilation\":3,\"pad\":3,\"groups\":2,\"layout\":\"NHWC\",\"epilogue\":[\"add\",\"gelu\"]}",
	"{\"op\":\"conv3d\",\"N\":1,\"C\":2,\"D\":5,\"H\":7,\"W\":6,\"K\":3,\"T\":3,\"R\":2,\"S\":3,\"stride\":2,\"pad\":1}",
	"{\"op\":\"conv3d\",\"N\":1,\"C\":3,\"D\":4,\"H\":5,\"W\":5,\"K\":2,\"T\":2,\"R\":2,\"S\":2,\"layout\":\"NDHWC\",\"dtype\":\"float16\"}",
	"{\"op\":\"conv2d_transpose\",\"N\":1,\"C\":4,\"H\":5,\"W\":3,\"K\":6,\"R\":4,\"S\":3,\"stride\":2,\"pad\":1,\"output_padding\":1}",
	"{\"op\":\"conv2d_transpose\",\"N\":2,\"C\":6,\"H\":3,\"W\":4,\"K\":4,\"R\":3,\"S\":3,\"stride\":3,\"groups\":2,\"layout\":\"NHWC\"}",
	"{\"op\":\"depthwise_conv2d\",\"N\":1,\"C\":5,\"H\":11,\"W\":13,\"R\":3,\"S\":3,\"stride\":2,\"pad\":1,\"multiplier\":2}",
	"{\"op\":\"depthwise_conv2d\",\"N\":2,\"C\":7,\"H\":9,\"W\":9,\"R\":5,\"S\":3,\"pad\":[2,1],\"layout\":\"NHWC\",\"dtype\":\"int8\"}",
	"{\"op\":\"matmul\",\"M\":1000,\"N\":997,\"K\":61,\"dtype\":\"bfloat16\"}",
};
#define N_ODD (int)(sizeof odd_workloads / sizeof *odd_workloads)

struct count { int blocks, reductions; const char *compute_store; };

static void count_block(tir_block *b, void *ctx)
{
	struct count *c = ctx;
	c->blocks++;
	c->reductions += b->reduce != REDUCE_NONE;
	if (!strcmp(b->name, "compute"))
		c->compute_store = b->store->name;
}

/* The stages of each program: pad when padded, compute, epilogue when listed,
 * each block with a signature that matches its body. */
static void check_structure(const char *json)
{
	tir_workload *w = parse(json);
	tir_error err;
	tir_program *p = tir_program_build(w, &err);
	ck_assert_msg(p, "%s: %s", json, err.msg);
	struct count c = { 0, 0, NULL };
	stmt_visit_blocks(p->root, count_block, &c);
	bool padded = false;
	for (int d = 0; d < w->nd; d++)
		padded = padded || w->pad_lo[d] || w->pad_hi[d];
	padded = padded || w->op == TIR_OP_CONV2D_TRANSPOSE;
	int expect = 1 + padded + (w->nepilogue > 0);
	ck_assert_msg(c.blocks == expect, "%s: %d blocks, expected %d", json, c.blocks, expect);
	ck_assert_int_eq(c.reductions, 1);
	ck_assert(c.compute_store != NULL);
	tir_block *cb = program_find_block(p, "compute");
	ck_assert(cb && cb->reduce == REDUCE_SUM && cb->init);
	/* every iterator bound one to one to a loop of its own extent */
	tir_stmt *loops[TIR_MAX_ITERS];
	int nl = stmt_loops(cb->stmt, loops, TIR_MAX_ITERS);
	ck_assert_int_eq(nl, cb->niters);
	for (int i = 0; i < nl; i++) {
		ck_assert(cb->iters[i].binding->kind == E_VAR);
		ck_assert(cb->iters[i].binding->var == loops[i]->var);
		ck_assert_int_eq(cb->iters[i].extent, loops[i]->extent);
	}
	/* params: inputs, epilogue operands, output last */
	ck_assert_int_eq(p->bufs[p->nparams - 1]->role, BUF_OUTPUT);
	char *txt = tir_program_print(p);
	ck_assert(strstr(txt, "with T.block(\"compute\")"));
	ck_assert(strstr(txt, "T.axis.reduce("));
	free(txt);
	tir_program_free(p);
	tir_workload_free(w);
}

START_TEST(every_op_builds)
{
	for (int i = 0; i < N_ODD; i++)
		check_structure(odd_workloads[i]);
	int n = tu_suite_count();
	ck_assert(n > 0);
	for (int i = 0; i < n; i++) {
		char *json = tu_suite_workload_at(i);
		check_structure(json);
		free(json);
	}
}
END_TEST

/* ---- the printer against golden files ---------------------------------------- */

static void golden_program(const char *file, const char *json)
{
	tir_workload *w = parse(json);
	tir_error err;
	tir_program *p = tir_program_build(w, &err);
	ck_assert_msg(p, "%s", err.msg);
	char *txt = tir_program_print(p);
	ck_assert_msg(tu_golden_check(file, txt), "printed program differs from %s", file);
	free(txt);
	tir_program_free(p);
	tir_workload_free(w);
}

START_TEST(printer_golden)
{
	golden_program("print_matmul.txt", "{\"op\":\"matmul\",\"M\":128,\"N\":128,\"K\":128}");
	golden_program("print_conv2d_pad_bias_relu.txt",
		       "{\"op\":\"conv2d\",\"N\":1,\"C\":8,\"H\":14,\"W\":14,\"K\":16,\"R\":3,\"S\":3,"
		       "\"pad\":1,\"layout\":\"NHWC\",\"epilogue\":[\"bias\",\"relu\"]}");
	golden_program("print_conv2d_transpose.txt",
		       "{\"op\":\"conv2d_transpose\",\"N\":1,\"C\":4,\"H\":4,\"W\":4,\"K\":2,\"R\":4,\"S\":4,"
		       "\"stride\":2,\"pad\":1}");
	golden_program("print_depthwise_int8.txt",
		       "{\"op\":\"depthwise_conv2d\",\"N\":1,\"C\":8,\"H\":7,\"W\":7,\"R\":3,\"S\":3,"
		       "\"stride\":2,\"multiplier\":2,\"dtype\":\"int8\"}");
}
END_TEST

/* A tiled schedule of the compute block using loop primitives only; the
 * same calls for every operator. */
static tir_sched *tiled(const tir_workload *w, uint64_t seed)
{
	tir_error err;
	tir_sched *s = tir_sched_new(w, seed, &err);
	ck_assert_msg(s, "%s", err.msg);
	int b = tir_get_block(s, "compute", &err);
	ck_assert_msg(b >= 0, "%s", err.msg);
	int loops[TIR_MAX_ITERS];
	int n = tir_get_loops(s, b, loops, TIR_MAX_ITERS, &err);
	ck_assert(n >= 3);
	/* the first two spatial loops: a sampled 2-level tile each */
	int outer[2], inner[2];
	for (int i = 0; i < 2; i++) {
		int t[2];
		ck_assert_msg(tir_sample_perfect_tile(s, loops[i], 2, 16, t, &err) >= 0, "%s", err.msg);
		tir_int f[2] = { TIR_RV(t[0]), TIR_RV(t[1]) };
		int o[2];
		ck_assert_msg(tir_split(s, loops[i], 2, f, o, &err) >= 0, "%s", err.msg);
		outer[i] = o[0];
		inner[i] = o[1];
	}
	/* the last loop (a reduction) split by a factor that need not divide */
	tir_int f[2] = { TIR_LIT(0), TIR_LIT(4) };
	int r[2];
	ck_assert_msg(tir_split(s, loops[n - 1], 2, f, r, &err) >= 0, "%s", err.msg);
	int order[4] = { outer[0], outer[1], inner[0], inner[1] };
	ck_assert_msg(tir_reorder(s, 4, order, &err) >= 0, "%s", err.msg);
	int fo = tir_fuse(s, 2, outer, &err);
	ck_assert_msg(fo >= 0, "%s", err.msg);
	ck_assert_msg(tir_parallel(s, fo, &err) >= 0, "%s", err.msg);
	ck_assert_msg(tir_unroll(s, r[1], &err) >= 0, "%s", err.msg);
	ck_assert_msg(tir_annotate(s, b, "tile_note", 7, &err) >= 0, "%s", err.msg);
	int64_t cand[3] = { 0, 16, 64 };
	ck_assert_msg(tir_sample_categorical(s, 3, cand, NULL, &err) >= 0, "%s", err.msg);
	return s;
}

START_TEST(trace_round_trip)
{
	for (int i = 0; i < N_ODD; i++) {
		tir_workload *w = parse(odd_workloads[i]);
		tir_sched *s = tiled(w, 1234 + (uint64_t)i);
		char *trace = tir_sched_trace(s);
		char *text = tir_program_print(tir_sched_program(s));
		tir_error err;
		/* another seed: decisions come from the trace, not the generator */
		tir_sched *r = tir_sched_new(w, 99, &err);
		ck_assert_msg(tir_sched_replay(r, trace, &err) == 0, "%s: %s", odd_workloads[i], err.msg);
		char *trace2 = tir_sched_trace(r);
		char *text2 = tir_program_print(tir_sched_program(r));
		ck_assert_str_eq(trace, trace2);
		ck_assert_str_eq(text, text2);
		/* and byte-identical generated code, for both backends */
		static const char *const targets[] = { "cpu:x86_64+avx2+fma", "cuda:sm_90" };
		for (int t = 0; t < 2; t++) {
			tir_target tg;
			ck_assert(tir_target_parse(targets[t], &tg, &err) == 0);
			tir_code *c1 = tir_codegen(tir_sched_program(s), &tg, &err);
			ck_assert_msg(c1, "%s: %s", odd_workloads[i], err.msg);
			tir_code *c2 = tir_codegen(tir_sched_program(r), &tg, &err);
			ck_assert_msg(c2, "%s: %s", odd_workloads[i], err.msg);
			ck_assert_str_eq(c1->source, c2->source);
			tir_code_free(c1);
			tir_code_free(c2);
		}
		free(trace); free(trace2); free(text); free(text2);
		tir_sched_free(s);
		tir_sched_free(r);
		tir_workload_free(w);
	}
}
END_TEST

START_TEST(same_seed_same_schedule)
{
	tir_workload *w = parse(odd_workloads[0]);
	tir_sched *a = tiled(w, 5), *b = tiled(w, 5);
	char *ta = tir_sched_trace(a), *tb = tir_sched_trace(b);
	ck_assert_str_eq(ta, tb);
	free(ta); free(tb);
	tir_sched_free(a);
	tir_sched_free(b);
	tir_workload_free(w);
}
END_TEST

START_TEST(golden_tiled_matmul)
{
	tir_workload *w = parse("{\"op\":\"matmul\",\"M\":100,\"N\":64,\"K\":30}");
	tir_sched *s = tiled(w, 42);
	char *txt = tir_program_print(tir_sched_program(s));
	ck_assert_msg(tu_golden_check("print_matmul_tiled.txt", txt), "tiled matmul differs");
	char *trace = tir_sched_trace(s);
	ck_assert_msg(tu_golden_check("trace_matmul_tiled.json", trace), "trace differs");
	free(trace);
	free(txt);
	tir_sched_free(s);
	tir_workload_free(w);
}
END_TEST

START_TEST(bad_traces_rejected)
{
	tir_workload *w = parse(odd_workloads[0]);
	static const struct { const char *trace, *msg; } bad[] = {
		{ "{", "malformed JSON" },
		{ "[]", "\"insts\" list" },
		{ "{\"insts\":[{\"op\":\"explode\"}]}", "unknown instruction \"explode\"" },
		{ "{\"insts\":[{\"op\":\"get_block\",\"str\":\"nope\",\"out\":[\"b0\"]}]}", "no block named \"nope\"" },
		{ "{\"insts\":[{\"op\":\"get_loops\",\"in\":[\"b7\"],\"out\":[]}]}", "not the output of an earlier" },
		{ "{\"insts\":[{\"op\":\"get_block\",\"str\":\"compute\",\"out\":[\"b0\"],\"colour\":1}]}", "unknown key \"colour\"" },
		{ "{\"insts\":[{\"op\":\"get_block\",\"str\":\"compute\",\"out\":[\"b0\"]},"
		  "{\"op\":\"get_loops\",\"in\":[\"b0\"],\"out\":[\"l1\",\"l2\",\"l3\"]},"
		  "{\"op\":\"sample_perfect_tile\",\"in\":[\"l1\"],\"attrs\":[2,64],\"out\":[\"v4\",\"v5\"],\"decision\":[2,2]}]}",
		  "do not multiply to the extent 37" },
		{ "{\"insts\":[{\"op\":\"get_block\",\"str\":\"compute\",\"out\":[\"b0\"]},"
		  "{\"op\":\"get_loops\",\"in\":[\"b0\"],\"out\":[\"l1\",\"l2\"]}]}", "gives 3 outputs, the trace names 2" },
		{ "{\"insts\":[{\"op\":\"get_block\",\"str\":\"compute\",\"out\":[\"b0\"]},"
		  "{\"op\":\"get_loops\",\"in\":[\"b0\"],\"out\":[\"l1\",\"l2\",\"l3\"]},"
		  "{\"op\":\"split\",\"in\":[\"l1\",1.5,null],\"out\":[\"l4\",\"l5\"]}]}", "neither a variable name nor an integer" },
		{ "{\"insts\":[{\"op\":\"get_block\",\"str\":\"compute\",\"out\":[\"b0\"]},"
		  "{\"op\":\"split\",\"in\":[\"b0\",null,4],\"out\":[\"l4\",\"l5\"]}]}", "is a block, expected a loop" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		tir_error err = { "" };
		tir_sched *s = tir_sched_new(w, 1, &err);
		ck_assert_msg(tir_sched_replay(s, bad[i].trace, &err) != 0, "accepted: %s", bad[i].trace);
		ck_assert_msg(strstr(err.msg, bad[i].msg), "trace %zu: message \"%s\" lacks \"%s\"",
			      i, err.msg, bad[i].msg);
		tir_sched_free(s);
	}
	tir_workload_free(w);
}
END_TEST

/* ---- integer analysis ------------------------------------------------------------- */

START_TEST(simplify_split_and_fuse)
{
	tir_program *p = program_new(NULL);
	tir_arena *a = &p->arena;
	tir_var *i0 = program_var(p, "i0"), *i1 = program_var(p, "i1"), *f = program_var(p, "f");
	tir_env env = env_new(p->nvars);
	env_set(&env, i0, 0, 7);
	env_set(&env, i1, 0, 15);
	env_set(&env, f, 0, 127);
	tir_expr *x = mk_add(a, mk_mul(a, mk_var(a, i0), mk_int(a, 16)), mk_var(a, i1));
	/* (i0*16 + i1) // 16 == i0 and % 16 == i1 */
	tir_expr *q = expr_simplify(a, mk_floordiv(a, x, mk_int(a, 16)), &env);
	tir_expr *r = expr_simplify(a, mk_floormod(a, x, mk_int(a, 16)), &env);
	ck_assert(q->kind == E_VAR && q->var == i0);
	ck_assert(r->kind == E_VAR && r->var == i1);
	/* f // 16 // 2 == f // 32 */
	tir_expr *d = expr_simplify(a, mk_floordiv(a, mk_floordiv(a, mk_var(a, f), mk_int(a, 16)), mk_int(a, 2)), &env);
	char *s = tir_expr_print(d);
	ck_assert_str_eq(s, "f // 32");
	free(s);
	/* i1 // 16 == 0 when i1 < 16 */
	tir_expr *z = expr_simplify(a, mk_floordiv(a, mk_var(a, i1), mk_int(a, 16)), &env);
	ck_assert(z->kind == E_INT && z->ival == 0);
	/* i0*16 + i1 < 128 is always true */
	tir_expr *c = expr_simplify(a, mk_bin(a, E_LT, x, mk_int(a, 128)), &env);
	ck_assert(c->kind == E_INT && c->ival == 1);
	int64_t lo, hi;
	ck_assert(expr_bounds(x, &env, &lo, &hi));
	ck_assert_int_eq(lo, 0);
	ck_assert_int_eq(hi, 127);
	env_free(&env);
	tir_program_free(p);
}
END_TEST

/* The value of an integer expression of variables vals[var->id]. */
static int64_t ieval(const tir_expr *e, const int64_t *vals)
{
	int64_t x, y, q;
	switch (e->kind) {
	case E_INT: return e->ival;
	case E_VAR: return vals[e->var->id];
	default: break;
	}
	x = ieval(e->a, vals);
	y = ieval(e->b, vals);
	switch (e->kind) {
	case E_ADD: return x + y;
	case E_SUB: return x - y;
	case E_MUL: return x * y;
	case E_FLOORDIV: case E_FLOORMOD:
		q = x / y - ((x % y != 0) && ((x < 0) != (y < 0)));
		return e->kind == E_FLOORDIV ? q : x - q * y;
	default: ck_abort_msg("unexpected expression kind %d", e->kind);
	}
	return 0;
}

/* floordiv / floormod of g*B + s by c, g dividing c and 0 <= s < g: B's
 * division by c/g, free of s (a k loop tiled inside the channel groups of a
 * grouped convolution).  Every form checked against the original on every
 * point of the ranges, and the rule not taken where s can reach g. */
START_TEST(simplify_common_factor)
{
	tir_program *p = program_new(NULL);
	tir_arena *a = &p->arena;
	tir_var *o = program_var(p, "o"), *i = program_var(p, "i"), *j = program_var(p, "j");
	tir_env env = env_new(p->nvars);
	env_set(&env, o, 0, 5);
	env_set(&env, i, 0, 3);
	tir_expr *x = mk_add(a, mk_mul(a, mk_var(a, o), mk_int(a, 4)), mk_var(a, i));
	tir_expr *q = expr_simplify(a, mk_floordiv(a, x, mk_int(a, 8)), &env);
	tir_expr *r = expr_simplify(a, mk_floormod(a, x, mk_int(a, 8)), &env);
	char *s = tir_expr_print(q);
	ck_assert_str_eq(s, "o // 2");
	free(s);
	s = tir_expr_print(r);
	ck_assert_str_eq(s, "o % 2 * 4 + i");
	free(s);
	/* (24*j + 8*o + 2*i + 1) with i < 4: g = 8 -> (3*j + o) // c/8 */
	env_set(&env, j, 0, 2);
	tir_expr *y = mk_add(a, mk_add(a, mk_mul(a, mk_var(a, j), mk_int(a, 24)),
				      mk_mul(a, mk_var(a, o), mk_int(a, 8))),
			     mk_add(a, mk_mul(a, mk_var(a, i), mk_int(a, 2)), mk_int(a, 1)));
	const int64_t divs[] = { 2, 3, 8, 16, 48, 5 };
	for (int ex = 0; ex < 2; ex++)
		for (size_t d = 0; d < sizeof divs / sizeof *divs; d++)
			for (int kind = 0; kind < 2; kind++) {
				tir_expr *e0 = ex ? y : x;
				tir_expr *e = kind ? mk_floormod(a, e0, mk_int(a, divs[d]))
						   : mk_floordiv(a, e0, mk_int(a, divs[d]));
				tir_expr *f = expr_simplify(a, e, &env);
				int64_t v[3];
				for (v[0] = 0; v[0] <= 5; v[0]++)
					for (v[1] = 0; v[1] <= 3; v[1]++)
						for (v[2] = 0; v[2] <= 2; v[2]++) {
							int64_t vals[8] = { 0 };
							vals[o->id] = v[0];
							vals[i->id] = v[1];
							vals[j->id] = v[2];
							ck_assert_msg(ieval(e, vals) == ieval(f, vals),
								      "expression %d, %s %lld at o=%lld i=%lld j=%lld",
								      ex, kind ? "mod" : "div", (long long)divs[d],
								      (long long)v[0], (long long)v[1], (long long)v[2]);
						}
				if (ex == 1 && divs[d] == 16 && !kind) {
					char *t = tir_expr_print(f);
					ck_assert_msg(!expr_uses_var(f, i), "%s", t);
					free(t);
				}
			}
	/* i may reach 4 = g: the division keeps i */
	env_set(&env, i, 0, 4);
	q = expr_simplify(a, mk_floordiv(a, x, mk_int(a, 8)), &env);
	ck_assert(expr_uses_var(q, i));
	env_free(&env);
	tir_program_free(p);
}
END_TEST

/* buf_put appends any bytes (zeros included) and keeps the text
 * terminated; tir_write_all writes all of a buffer larger than a pipe's. */
START_TEST(buffers_and_writes)
{
	tir_buf b = { 0 };
	buf_puts(&b, "ab");
	const char bin[4] = { 0, 1, 0, 2 };
	buf_put(&b, bin, sizeof bin);
	buf_put(&b, NULL, 0);
	ck_assert_uint_eq(b.len, 6);
	ck_assert_int_eq(memcmp(b.s, "ab\0\1\0\2", 6), 0);
	ck_assert_int_eq(b.s[6], '\0');
	free(buf_take(&b));

	int fd[2];
	ck_assert_int_eq(pipe(fd), 0);
	size_t n = 1 << 20;
	char *big = malloc(n), *back = malloc(n);
	for (size_t i = 0; i < n; i++)
		big[i] = (char)(i * 7);
	pid_t pid = fork();
	if (pid == 0) {
		close(fd[0]);
		_exit(tir_write_all(fd[1], big, n) ? 1 : 0);
	}
	close(fd[1]);
	size_t got = 0;
	for (ssize_t k; got < n && (k = read(fd[0], back + got, n - got)) > 0;)
		got += (size_t)k;
	close(fd[0]);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	ck_assert_uint_eq(got, n);
	ck_assert_int_eq(memcmp(big, back, n), 0);
	free(big);
	free(back);
}
END_TEST

START_TEST(intervals)
{
	tir_program *p = program_new(NULL);
	tir_arena *a = &p->arena;
	tir_var *o = program_var(p, "o"), *i = program_var(p, "i"), *r = program_var(p, "r");
	tir_env env = env_new(p->nvars);
	env_set(&env, i, 0, 3);
	env_set(&env, r, 0, 2);
	/* (o*4 + i)*2 + r - 1: o fixed, i and r vary */
	tir_expr *e = mk_sub(a, mk_add(a, mk_mul(a, mk_add(a, mk_mul(a, mk_var(a, o), mk_int(a, 4)),
						       mk_var(a, i)), mk_int(a, 2)), mk_var(a, r)), mk_int(a, 1));
	tir_interval iv = interval_of(a, e, &env);
	ck_assert(!iv.full);
	ck_assert_int_eq(iv.lo, -1);
	ck_assert_int_eq(iv.hi, 7);
	char *s = tir_expr_print(iv.base);
	ck_assert_str_eq(s, "o * 8");
	free(s);
	/* union with a shifted copy */
	tir_interval iv2 = interval_of(a, mk_add(a, e, mk_int(a, 3)), &env);
	tir_interval u = interval_union(a, iv, iv2);
	ck_assert(!u.full);
	ck_assert_int_eq(u.lo, -1);
	ck_assert_int_eq(u.hi, 10);
	/* a term mixing fixed and varying variables under floordiv: unknown */
	tir_expr *m = mk_floordiv(a, mk_add(a, mk_var(a, o), mk_var(a, i)), mk_int(a, 3));
	ck_assert(interval_of(a, m, &env).full);
	env_free(&env);
	tir_program_free(p);
}
END_TEST

/* The reducers: names, identities, and how a reduction block prints — a
 * sum as it always did, a max or min as TVMScript writes one. */
START_TEST(reducers)
{
	ck_assert_str_eq(reduce_name(REDUCE_MAX), "max");
	ck_assert_int_eq(reduce_parse("min"), REDUCE_MIN);
	ck_assert_int_eq(reduce_parse("mean"), -1);
	tir_arena a = { 0 };
	ck_assert(reduce_is_identity(REDUCE_MAX, reduce_identity(&a, REDUCE_MAX, TIR_F16)));
	ck_assert(reduce_is_identity(REDUCE_MIN, reduce_identity(&a, REDUCE_MIN, TIR_I32)));
	ck_assert(reduce_is_identity(REDUCE_MAX, reduce_identity(&a, REDUCE_MAX, TIR_I8)));
	ck_assert(reduce_is_identity(REDUCE_SUM, mk_float(&a, 0.0, TIR_F32)));
	ck_assert(!reduce_is_identity(REDUCE_MAX, mk_float(&a, 0.0, TIR_F32)));
	ck_assert(!reduce_is_identity(REDUCE_MIN, reduce_identity(&a, REDUCE_MAX, TIR_F32)));
	ck_assert(!reduce_is_identity(REDUCE_MAX, mk_cast(&a, TIR_I32, mk_int(&a, -128))));
	char *t = tir_expr_print(reduce_identity(&a, REDUCE_MIN, TIR_I32));
	ck_assert_str_eq(t, "T.Cast(\"int32\", 2147483647)");
	free(t);
	arena_free(&a);
	static const char *const want[] = {
		"R[vi] = R[vi] + A[vi, vk]",
		"R[vi] = T.max(R[vi], A[vi, vk])",
		"R[vi] = T.min(R[vi], A[vi, vk])",
	};
	static const char *const init[] = { "T.float32(0.0)", "T.float32(-inf)", "T.float32(inf)" };
	for (int r = REDUCE_SUM; r <= REDUCE_MIN; r++) {
		tr_spec spec = { (tir_reduce)r, TIR_F32, TIR_F32, 3, 5, 0, false };
		tir_program *p = tr_program(&spec);
		char *txt = tir_program_print(p);
		ck_assert_msg(strstr(txt, want[r - REDUCE_SUM]), "no \"%s\" in\n%s", want[r - REDUCE_SUM], txt);
		ck_assert_msg(strstr(txt, init[r - REDUCE_SUM]), "no \"%s\" in\n%s", init[r - REDUCE_SUM], txt);
		free(txt);
		tir_program_free(p);
	}
}
END_TEST

static Suite *make_ir_suite(void)
{
	Suite *s = suite_create("ir");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, every_op_builds);
	tcase_add_test(tc, printer_golden);
	tcase_add_test(tc, trace_round_trip);
	tcase_add_test(tc, same_seed_same_schedule);
	tcase_add_test(tc, golden_tiled_matmul);
	tcase_add_test(tc, bad_traces_rejected);
	tcase_add_test(tc, simplify_split_and_fuse);
	tcase_add_test(tc, simplify_common_factor);
	tcase_add_test(tc, intervals);
	tcase_add_test(tc, reducers);
	tcase_add_test(tc, buffers_and_writes);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(make_ir_suite());
}
