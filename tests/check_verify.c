/*
 * check_verify.c — the check_verify suite: tir_verify accepts every
 * unscheduled program and rejects illegal ones with the right message.
 *
 * Illegal programs are made by editing the IR directly (the schedule
 * primitives may refuse to build them, which is the point of a verifier):
 * a binding rewritten to i*2, a reduction loop bound to threadIdx.x, a shared
 * stage too large, a producer moved out of cover, ...  Every negative test
 * has a legal twin or a control that passes, so a verifier that rejects
 * everything fails the suite too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <check.h>
#include "tir.h"
#include "ir/ir.h"
#include "testutil.h"
#include "reducers.h"

static tir_target t_cpu, t_cuda;

static void setup(void)
{
	tir_error e;
	ck_assert_msg(tir_target_parse("cpu:x86_64+avx2+fma", &t_cpu, &e) == 0, "%s", e.msg);
	ck_assert_msg(tir_target_parse("cuda:sm_90", &t_cuda, &e) == 0, "%s", e.msg);
}

typedef struct prog {
	tir_workload *w;
	tir_program *p;
	tir_arena *a;
} prog;

static prog build(const char *json)
{
	tir_error e;
	prog g;
	g.w = tir_workload_parse(json, strlen(json), NULL, &e);
	ck_assert_msg(g.w != NULL, "%s: %s", json, e.msg);
	g.p = tir_program_build(g.w, &e);
	ck_assert_msg(g.p != NULL, "%s: %s", json, e.msg);
	g.a = &g.p->arena;
	return g;
}

static void drop(prog *g)
{
	tir_program_free(g->p);
	tir_workload_free(g->w);
}

static tir_block *blk(prog *g, const char *name)
{
	tir_block *b = program_find_block(g->p, name);
	ck_assert_msg(b != NULL, "no block %s", name);
	return b;
}

/* The i-th loop around block b, outermost first. */
static tir_stmt *loop(tir_block *b, int i)
{
	tir_stmt *ls[32];
	int n = stmt_loops(b->stmt, ls, 32);
	ck_assert_int_lt(i, n);
	return ls[i];
}

static tir_expr *var(prog *g, tir_stmt *l)
{
	return mk_var(g->a, l->var);
}

static tir_expr *num(prog *g, int64_t v)
{
	return mk_int(g->a, v);
}

static tir_stmt *nest_of(tir_block *b)
{
	tir_stmt *s = b->stmt;
	while (s->parent && s->parent->parent)
		s = s->parent;
	return s;
}

static void move(tir_stmt *s, tir_stmt *parent, int pos)
{
	stmt_remove(s);
	stmt_insert(parent, pos, s);
}

/* Puts every top-level statement under one new loop; returns it. */
static tir_stmt *wrap_root(prog *g, const char *name, int64_t extent)
{
	tir_stmt *l = stmt_new_for(g->p, program_var(g->p, name), extent);
	while (g->p->root->nkids)
		move(g->p->root->kids[0], l, l->nkids);
	stmt_append(g->p->root, l);
	return l;
}

static void bind(tir_stmt *l, tir_thread_tag tag)
{
	l->loop_kind = LOOP_THREAD;
	l->tag = tag;
}

static void ok(prog *g, const tir_target *t)
{
	tir_error e = { "" };
	int rc = tir_verify(g->p, t, &e);
	ck_assert_msg(rc == 0, "%s: expected valid, got: %s", t->key, e.msg);
}

static void bad(prog *g, const tir_target *t, const char *want)
{
	tir_error e = { "" };
	int rc = tir_verify(g->p, t, &e);
	ck_assert_msg(rc == -1, "%s: expected \"%s\", but the program was accepted",
		      t->key, want);
	ck_assert_msg(strstr(e.msg, want) != NULL, "%s: expected \"%s\" in: %s",
		      t->key, want, e.msg);
}

/* A stage copying src into a new buffer of `scope`, whose loops are inserted
 * into parent at pos; `user`'s loads of src now read the copy. */
static tir_block *add_copy(prog *g, tir_buffer *src, tir_scope scope,
			   tir_stmt *parent, int pos, tir_block *user)
{
	char name[64];
	snprintf(name, sizeof name, "%s_%s", src->name, scope_name(scope));
	tir_buffer *dst = program_buffer(g->p, name, src->dtype, src->ndim, src->shape,
					 scope, BUF_TEMP);
	tir_block *b = block_new(g->p, name);
	tir_expr *idx[TIR_MAX_DIMS];
	const char *lnames[TIR_MAX_DIMS];
	for (int d = 0; d < src->ndim; d++) {
		char vn[16];
		snprintf(vn, sizeof vn, "v%d", d);
		tir_var *v = program_var(g->p, vn);
		block_add_iter(b, v, src->shape[d], ITER_SPATIAL, NULL);
		idx[d] = mk_var(g->a, v);
		lnames[d] = arena_printf(g->a, "ax%d", d);
	}
	b->store = dst;
	for (int d = 0; d < src->ndim; d++)
		b->store_idx[d] = idx[d];
	b->value = mk_load(g->a, src, src->ndim, idx);
	block_update_regions(g->p, b);
	stmt_insert(parent, pos, program_nest(g->p, b, lnames));
	user->value = expr_replace_buffer(g->a, user->value, src, dst);
	block_update_regions(g->p, user);
	return b;
}

static const char *const MM64 = "{\"op\":\"matmul\",\"M\":64,\"N\":64,\"K\":64}";
static const char *const MM64_RELU =
	"{\"op\":\"matmul\",\"M\":64,\"N\":64,\"K\":64,\"epilogue\":[\"relu\"]}";
static const char *const CONV_PAD =
	"{\"op\":\"conv2d\",\"N\":1,\"C\":4,\"H\":8,\"W\":8,\"K\":4,\"R\":3,\"S\":3,"
	"\"pad\":1,\"layout\":\"NHWC\"}";

/* ---- every unscheduled program is valid --------------------------------------- */

static void valid_everywhere(const char *json)
{
	prog g = build(json);
	ok(&g, &t_cpu);
	ok(&g, &t_cuda);
	drop(&g);
}

START_TEST(test_suite_unscheduled)
{
	int n = tu_suite_count();
	ck_assert_msg(n > 0, "cannot read the workload suite %s", tu_suite_path());
	const char *dtypes[] = { "float32", "float16" };
	for (int i = 0; i < n; i++) {
		char *w = tu_suite_workload_at(i);
		ck_assert(w != NULL);
		for (int d = 0; d < 2; d++) {
			size_t len = strlen(w);
			char *j = malloc(len + 64);
			/* {"op":... -> {"dtype":"...","op":... */
			snprintf(j, len + 64, "{\"dtype\":\"%s\",%s", dtypes[d], w + 1);
			valid_everywhere(j);
			free(j);
		}
		free(w);
	}
}
END_TEST

START_TEST(test_variants_unscheduled)
{
	static const char *const ws[] = {
		"{\"op\":\"matmul\",\"M\":64,\"N\":32,\"K\":16}",
		"{\"op\":\"matmul\",\"batch\":2,\"M\":16,\"N\":32,\"K\":8,\"layout\":\"NT\"}",
		"{\"op\":\"matmul\",\"M\":16,\"N\":32,\"K\":8,\"layout\":\"TN\","
		"\"epilogue\":[\"bias\",\"relu\",\"add\"]}",
		"{\"op\":\"matmul\",\"M\":16,\"N\":16,\"K\":16,\"dtype\":\"int8\"}",
		"{\"op\":\"matmul\",\"M\":16,\"N\":16,\"K\":16,\"dtype\":\"bfloat16\","
		"\"epilogue\":[\"gelu\"]}",
		"{\"op\":\"conv1d\",\"N\":2,\"C\":8,\"W\":32,\"K\":8,\"S\":3,\"pad\":1,"
		"\"dilation\":2,\"layout\":\"NCW\"}",
		"{\"op\":\"conv2d\",\"N\":1,\"C\":8,\"H\":9,\"W\":7,\"K\":8,\"R\":3,\"S\":2,"
		"\"stride\":[2,1],\"pad\":[1,0,2,1],\"groups\":2,\"layout\":\"NCHW\","
		"\"epilogue\":[\"bias\",\"add\"]}",
		"{\"op\":\"conv3d\",\"N\":1,\"C\":4,\"D\":5,\"H\":6,\"W\":7,\"K\":4,\"T\":3,"
		"\"R\":3,\"S\":3,\"pad\":1,\"layout\":\"NCDHW\"}",
		"{\"op\":\"depthwise_conv2d\",\"N\":1,\"C\":4,\"H\":8,\"W\":8,\"R\":3,\"S\":3,"
		"\"multiplier\":2,\"stride\":2,\"pad\":1,\"layout\":\"NCHW\"}",
		"{\"op\":\"depthwise_conv2d\",\"N\":1,\"C\":4,\"H\":8,\"W\":8,\"R\":3,\"S\":3,"
		"\"multiplier\":3,\"layout\":\"NHWC\",\"epilogue\":[\"relu\"]}",
		"{\"op\":\"conv2d_transpose\",\"N\":1,\"C\":8,\"H\":5,\"W\":5,\"K\":4,\"R\":3,"
		"\"S\":3,\"stride\":2,\"pad\":1,\"output_padding\":1,\"layout\":\"NCHW\"}",
		"{\"op\":\"conv2d_transpose\",\"N\":1,\"C\":8,\"H\":4,\"W\":4,\"K\":4,\"R\":4,"
		"\"S\":4,\"stride\":2,\"pad\":1,\"groups\":2,\"layout\":\"NHWC\"}",
	};
	for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
		valid_everywhere(ws[i]);
}
END_TEST

/* ---- loop-nest ------------------------------------------------------------------ */

/* TensorIR's example: two spatial iterators bound to i and i*2. */
START_TEST(test_dependent_iterators)
{
	prog g = build(MM64);
	tir_block *c = blk(&g, "compute");
	c->iters[1].binding = mk_mul(g.a, var(&g, loop(c, 0)), num(&g, 2));
	bad(&g, &t_cpu, "not independent");
	bad(&g, &t_cuda, "not independent");
	drop(&g);
}
END_TEST

/* ... while i//64 and i%64 of one fused loop are legal. */
START_TEST(test_fused_bindings_legal)
{
	prog g = build(MM64);
	tir_block *c = blk(&g, "compute");
	tir_stmt *i = loop(c, 0), *j = loop(c, 1), *k = loop(c, 2);
	move(k, i, 0);
	stmt_remove(j);
	i->extent = 64 * 64;
	c->iters[0].binding = mk_floordiv(g.a, var(&g, i), num(&g, 64));
	c->iters[1].binding = mk_floormod(g.a, var(&g, i), num(&g, 64));
	ok(&g, &t_cpu);
	ok(&g, &t_cuda);
	/* the same quotient twice: dependent */
	c->iters[1].binding = c->iters[0].binding;
	bad(&g, &t_cpu, "have the same binding i // 64: the iterators are not independent");
	drop(&g);
}
END_TEST

START_TEST(test_binding_non_enclosing_loop)
{
	prog g = build(MM64_RELU);
	tir_block *c = blk(&g, "compute"), *e = blk(&g, "epilogue");
	e->iters[0].binding = var(&g, loop(c, 0));
	char want[128];
	snprintf(want, sizeof want, "binding of %s uses loop %s that does not enclose the block",
		 e->iters[0].var->name, loop(c, 0)->var->name);
	bad(&g, &t_cpu, want);
	drop(&g);
}
END_TEST

START_TEST(test_binding_not_quasi_affine)
{
	prog g = build(MM64);
	tir_block *c = blk(&g, "compute");
	c->iters[0].binding = mk_mul(g.a, var(&g, loop(c, 0)), var(&g, loop(c, 1)));
	bad(&g, &t_cpu, "is not quasi-affine");
	drop(&g);
}
END_TEST

START_TEST(test_binding_floordiv_by_zero)
{
	prog g = build(MM64);
	tir_block *c = blk(&g, "compute");
	c->iters[0].binding = mk_floordiv(g.a, var(&g, loop(c, 0)), num(&g, 0));
	bad(&g, &t_cpu, "is not quasi-affine");
	drop(&g);
}
END_TEST

START_TEST(test_binding_uses_iterator)
{
	prog g = build(MM64);
	tir_block *c = blk(&g, "compute");
	c->iters[0].binding = mk_var(g.a, c->iters[1].var);
	bad(&g, &t_cpu, "uses iterator vj instead of loop variables");
	drop(&g);
}
END_TEST

START_TEST(test_domain_not_covered)
{
	prog g = build(MM64);
	tir_block *c = blk(&g, "compute");
	c->iters[0].extent = 128;
	bad(&g, &t_cpu, "does not cover its domain");
	drop(&g);
}
END_TEST

/* A loop longer than its iterator needs a predicate. */
START_TEST(test_binding_exceeds_domain)
{
	prog g = build(MM64);
	tir_block *c = blk(&g, "compute");
	tir_stmt *i = loop(c, 0);
	i->extent = 70;
	bad(&g, &t_cpu, "binding exceeds domain");
	bad(&g, &t_cuda, "binding exceeds domain");
	c->predicate = mk_bin(g.a, E_LT, var(&g, i), num(&g, 64));
	ok(&g, &t_cpu);
	ok(&g, &t_cuda);
	drop(&g);
}
END_TEST

START_TEST(test_reduction_on_parallel_loop)
{
	prog g = build(MM64);
	tir_block *c = blk(&g, "compute");
	loop(c, 2)->loop_kind = LOOP_PARALLEL;
	bad(&g, &t_cpu, "reduction iterator vk bound to parallel loop k");
	loop(c, 2)->loop_kind = LOOP_VECTORIZED;
	bad(&g, &t_cpu, "reduction iterator vk bound to vectorized loop k");
	loop(c, 2)->loop_kind = LOOP_SERIAL;
	loop(c, 0)->loop_kind = LOOP_PARALLEL;
	ok(&g, &t_cpu);
	drop(&g);
}
END_TEST

START_TEST(test_spatial_and_reduction_mixed)
{
	prog g = build(MM64);
	tir_block *c = blk(&g, "compute");
	c->iters[2].binding = mk_floormod(g.a, var(&g, loop(c, 0)), num(&g, 64));
	bad(&g, &t_cpu, "loop i feeds both spatial iterator vi and reduction iterator vk");
	drop(&g);
}
END_TEST

START_TEST(test_empty_loop)
{
	prog g = build(MM64);
	loop(blk(&g, "compute"), 1)->extent = 0;
	bad(&g, &t_cpu, "loop j has extent 0");
	drop(&g);
}
END_TEST

START_TEST(test_body_uses_loop_var)
{
	prog g = build(MM64);
	tir_block *c = blk(&g, "compute");
	c->store_idx[0] = var(&g, loop(c, 0));
	bad(&g, &t_cpu, "the store index uses i, which is not one of the block's iterators");
	drop(&g);
}
END_TEST

START_TEST(test_load_out_of_bounds)
{
	prog g = build(MM64);
	tir_buffer *A = g.p->bufs[0];
	ck_assert_str_eq(A->name, "A");
	A->shape[1] = 63;
	bad(&g, &t_cpu, "reads A out of bounds");
	drop(&g);
}
END_TEST

/* ---- producer-consumer ---------------------------------------------------------- */

START_TEST(test_consumer_before_producer)
{
	prog g = build(MM64_RELU);
	move(nest_of(blk(&g, "epilogue")), g.p->root, 0);
	bad(&g, &t_cpu, "producer-consumer: block \"epilogue\" reads C_acc before its "
	    "producer \"compute\" writes it");
	drop(&g);
}
END_TEST

/* The pad stage writes only the top half of X_pad. */
START_TEST(test_producer_does_not_cover)
{
	prog g = build(CONV_PAD);
	tir_block *pad = blk(&g, "pad");
	pad->iters[1].extent = 5;
	loop(pad, 1)->extent = 5;
	bad(&g, &t_cpu, "producer-consumer: block \"compute\" reads X_pad[0:1, 0:10, "
	    "0:10, 0:4] that \"pad\" does not write under root");
	drop(&g);
}
END_TEST

/* Pad computed at the consumer's row loop h: rows h..h+2 are right, rows
 * 7-h..9-h cover the domain but not what row h reads. */
START_TEST(test_producer_moved_out_of_cover)
{
	prog g = build(CONV_PAD);
	tir_block *pad = blk(&g, "pad"), *c = blk(&g, "compute");
	tir_stmt *h = loop(c, 1);
	move(nest_of(pad), h, 0);
	tir_stmt *ax = loop(pad, 3);   /* n, h | n, h, w, c */
	ax->extent = 3;
	pad->iters[1].binding = mk_add(g.a, var(&g, h), var(&g, ax));
	ok(&g, &t_cpu);
	ok(&g, &t_cuda);
	pad->iters[1].binding = mk_add(g.a, mk_sub(g.a, num(&g, 7), var(&g, h)), var(&g, ax));
	bad(&g, &t_cpu, "that \"pad\" does not write under loop h");
	/* and placed after its consumer inside the loop */
	pad->iters[1].binding = mk_add(g.a, var(&g, h), var(&g, ax));
	move(loop(pad, 2), h, h->nkids - 1);
	bad(&g, &t_cpu, "reads X_pad before its producer \"pad\" writes it");
	drop(&g);
}
END_TEST

START_TEST(test_temp_never_written)
{
	prog g = build(CONV_PAD);
	tir_block *pad = blk(&g, "pad");
	stmt_remove(nest_of(pad));
	pad->stmt = NULL;
	bad(&g, &t_cpu, "buffer \"X_pad\" is read by block \"compute\" but never written");
	drop(&g);
}
END_TEST

START_TEST(test_output_never_written)
{
	prog g = build(MM64_RELU);
	tir_block *e = blk(&g, "epilogue");
	stmt_remove(nest_of(e));
	e->stmt = NULL;
	bad(&g, &t_cpu, "output \"C\" is never written");
	drop(&g);
}
END_TEST

START_TEST(test_reduction_without_init)
{
	prog g = build(MM64);
	blk(&g, "compute")->init = NULL;
	bad(&g, &t_cpu, "block \"compute\" reads C, which no other block writes");
	drop(&g);
}
END_TEST

/* ---- threading -------------------------------------------------------------------- */

START_TEST(test_reduction_bound_to_thread)
{
	prog g = build(MM64);
	tir_block *c = blk(&g, "compute");
	bind(loop(c, 2), TIR_THREAD_X);
	ok(&g, &t_cpu);
	bad(&g, &t_cuda, "reduction iterator vk of block \"compute\" bound to threadIdx.x "
	    "loop k without the \"cross_thread_reduction\" annotation");
	c->ann[c->nann++] = (tir_ann){ "cross_thread_reduction", 1 };
	ok(&g, &t_cuda);
	drop(&g);
}
END_TEST

/* A row max and a row min (tests/reducers.h) in the cross-thread pattern:
 * rows over blockIdx.x, the reduction over threadIdx.x, annotated — valid
 * for every reducer, as for a sum; unannotated, refused alike. */
START_TEST(test_cross_thread_max_min)
{
	static const tir_reduce rs[] = { REDUCE_MAX, REDUCE_MIN, REDUCE_SUM };
	for (int r = 0; r < 3; r++) {
		tr_spec spec = { rs[r], TIR_F32, TIR_F32, 4, 64, 0, false };
		prog g = { NULL, tr_program(&spec), NULL };
		g.a = &g.p->arena;
		tir_block *c = blk(&g, "reduce");
		bind(loop(c, 0), TIR_BLOCK_X);
		bind(loop(c, 1), TIR_THREAD_X);
		ok(&g, &t_cpu);
		bad(&g, &t_cuda, "reduction iterator vk of block \"reduce\" bound to threadIdx.x "
		    "loop k without the \"cross_thread_reduction\" annotation");
		c->ann[c->nann++] = (tir_ann){ "cross_thread_reduction", 1 };
		ok(&g, &t_cuda);
		tir_program_free(g.p);
	}
}
END_TEST

START_TEST(test_reduction_bound_to_block)
{
	prog g = build(MM64);
	tir_block *c = blk(&g, "compute");
	c->ann[c->nann++] = (tir_ann){ "cross_thread_reduction", 1 };
	bind(loop(c, 0), TIR_BLOCK_Y);
	bind(loop(c, 1), TIR_BLOCK_Z);
	bind(loop(c, 2), TIR_BLOCK_X);
	bad(&g, &t_cuda, "bound to blockIdx.x loop k: reductions across thread blocks");
	drop(&g);
}
END_TEST

START_TEST(test_too_many_threads)
{
	prog g = build(MM64);
	tir_block *c = blk(&g, "compute");
	bind(loop(c, 0), TIR_THREAD_X);
	bind(loop(c, 1), TIR_THREAD_Y);
	ok(&g, &t_cpu);
	bad(&g, &t_cuda, "launches 4096 threads per block");
	loop(c, 1)->loop_kind = LOOP_SERIAL;
	ok(&g, &t_cuda);
	drop(&g);
}
END_TEST

/* MM64 (64 x 64 x 64): the k loop unrolled is 64 copies of the block, j too
 * 4096 > VFY_MAX_UNROLLED (and > VFY_MAX_UNROLLED_CPU); as an
 * auto_unroll_max_step the same, and a step below the nest's size unrolls
 * nothing; an "unroll" = N annotation makes N copies (`#pragma unroll N`). */
START_TEST(test_unrolled_too_much)
{
	prog g = build(MM64);
	tir_block *c = blk(&g, "compute");
	bind(loop(c, 0), TIR_BLOCK_X);
	loop(c, 2)->loop_kind = LOOP_UNROLLED;
	ok(&g, &t_cuda);
	loop(c, 1)->loop_kind = LOOP_UNROLLED;
	bad(&g, &t_cpu, "the program unrolls to 4096 block instances, more than 2048");
	bad(&g, &t_cuda, "unrolls to 4096 block instances, more than 1024");
	loop(c, 1)->loop_kind = LOOP_SERIAL;
	loop(c, 2)->loop_kind = LOOP_SERIAL;
	tir_stmt *j = loop(c, 1);
	j->ann[j->nann].key = "auto_unroll_max_step";
	j->ann[j->nann++].value = 4096;
	bad(&g, &t_cuda, "unrolls to 4096 block instances");
	j->ann[j->nann - 1].value = 512;     /* j's nest is 4096: only k unrolls */
	ok(&g, &t_cuda);
	j->nann--;
	loop(c, 2)->loop_kind = LOOP_UNROLLED;
	j->ann[j->nann].key = "unroll";
	j->ann[j->nann++].value = 32;        /* 32 x 64 */
	bad(&g, &t_cuda, "unrolls to 2048 block instances, more than 1024");
	j->ann[j->nann - 1].value = 16;      /* 16 x 64 */
	ok(&g, &t_cuda);
	/* on a CPU: "unroll" 32 on j (32 x 64 = 2048) is the bound itself */
	j->ann[j->nann - 1].value = 32;
	ok(&g, &t_cpu);
	j->ann[j->nann - 1].value = 33;      /* 33 x 64 */
	bad(&g, &t_cpu, "unrolls to 2112 block instances, more than 2048");
	drop(&g);
}
END_TEST

START_TEST(test_thread_extent_limit)
{
	prog g = build("{\"op\":\"matmul\",\"M\":128,\"N\":8,\"K\":8}");
	bind(loop(blk(&g, "compute"), 0), TIR_THREAD_Z);
	bad(&g, &t_cuda, "loop i bound to threadIdx.z has extent 128, more than the limit 64");
	drop(&g);
}
END_TEST

START_TEST(test_blockidx_nested)
{
	prog g = build(MM64);
	tir_block *c = blk(&g, "compute");
	bind(loop(c, 1), TIR_BLOCK_X);
	ok(&g, &t_cpu);
	bad(&g, &t_cuda, "loop j bound to blockIdx.x is nested under loop i (serial)");
	bind(loop(c, 0), TIR_BLOCK_Y);
	ok(&g, &t_cuda);
	drop(&g);
}
END_TEST

/* A[256,256] float32 staged in shared memory: 262144 bytes. */
static prog shared_stage(int64_t m, int64_t k, tir_stmt **top, tir_block **copy)
{
	char json[128];
	snprintf(json, sizeof json, "{\"op\":\"matmul\",\"M\":%lld,\"N\":16,\"K\":%lld}",
		 (long long)m, (long long)k);
	prog g = build(json);
	*top = wrap_root(&g, "bx", 1);
	bind(*top, TIR_BLOCK_X);
	*copy = add_copy(&g, g.p->bufs[0], TIR_SCOPE_SHARED, *top, 0, blk(&g, "compute"));
	return g;
}

START_TEST(test_shared_memory_limit)
{
	tir_stmt *top;
	tir_block *copy;
	prog g = shared_stage(256, 256, &top, &copy);
	ok(&g, &t_cpu);
	bad(&g, &t_cuda, "shared memory 262144 bytes exceeds the limit 232448 of cuda:sm_90");
	drop(&g);
	g = shared_stage(128, 128, &top, &copy);
	ok(&g, &t_cuda);
	drop(&g);
}
END_TEST

START_TEST(test_shared_in_two_kernels)
{
	prog g = build(MM64);
	add_copy(&g, g.p->bufs[0], TIR_SCOPE_SHARED, g.p->root, 0, blk(&g, "compute"));
	ok(&g, &t_cpu);
	bad(&g, &t_cuda, "shared buffer \"A_shared\" is accessed in two kernels");
	drop(&g);
}
END_TEST

/* The copy's 64-thread loop runs guarded under a 128-thread launch. */
START_TEST(test_short_thread_loop_writes_shared)
{
	tir_stmt *top;
	tir_block *copy;
	prog g = shared_stage(128, 64, &top, &copy);
	tir_block *c = blk(&g, "compute");
	bind(loop(c, 1), TIR_THREAD_X);
	bind(loop(copy, 1), TIR_THREAD_X);
	ok(&g, &t_cuda);
	bind(loop(copy, 2), TIR_THREAD_X);
	loop(copy, 1)->loop_kind = LOOP_SERIAL;
	bad(&g, &t_cuda, "loop ax1 bound to threadIdx.x has extent 64, less than the 128");
	drop(&g);
}
END_TEST

START_TEST(test_vectorized_too_wide)
{
	prog g = build(MM64_RELU);
	tir_block *e = blk(&g, "epilogue");
	tir_stmt *j = loop(e, 1);
	j->loop_kind = LOOP_VECTORIZED;
	ok(&g, &t_cpu);
	char want[128];
	snprintf(want, sizeof want, "vectorized loop %s of extent 64 accesses float32 "
		 "buffer \"C\"", j->var->name);
	bad(&g, &t_cuda, want);
	drop(&g);
	g = build("{\"op\":\"matmul\",\"M\":4,\"N\":4,\"K\":4,\"epilogue\":[\"relu\"]}");
	loop(blk(&g, "epilogue"), 1)->loop_kind = LOOP_VECTORIZED;
	ok(&g, &t_cuda);
	drop(&g);
}
END_TEST

/* compute accumulates into C_local under threadIdx.x; the write-back block
 * reads it outside that loop, or inside it. */
START_TEST(test_local_across_threads)
{
	prog g = build("{\"op\":\"matmul\",\"M\":32,\"N\":32,\"K\":32}");
	tir_block *c = blk(&g, "compute");
	tir_buffer *C = c->store;
	tir_buffer *L = program_buffer(g.p, "C_local", C->dtype, C->ndim, C->shape,
				       TIR_SCOPE_LOCAL, BUF_TEMP);
	c->store = L;
	block_update_regions(g.p, c);
	tir_stmt *top = wrap_root(&g, "bx", 1);
	bind(top, TIR_BLOCK_X);
	tir_stmt *i = loop(c, 1);
	bind(i, TIR_THREAD_X);
	tir_block *wb = block_new(g.p, "C_local_wb");
	tir_var *v0 = program_var(g.p, "v0"), *v1 = program_var(g.p, "v1");
	block_add_iter(wb, v0, 32, ITER_SPATIAL, NULL);
	block_add_iter(wb, v1, 32, ITER_SPATIAL, NULL);
	tir_expr *idx[2] = { mk_var(g.a, v0), mk_var(g.a, v1) };
	wb->store = C;
	wb->store_idx[0] = idx[0];
	wb->store_idx[1] = idx[1];
	wb->value = mk_load(g.a, L, 2, idx);
	block_update_regions(g.p, wb);
	const char *names[] = { "w0", "w1" };
	tir_stmt *wn = program_nest(g.p, wb, names);
	stmt_append(top, wn);
	ok(&g, &t_cpu);
	bad(&g, &t_cuda, "local buffer \"C_local\" is written by block \"compute\" under "
	    "threadIdx.x loop i and read by block \"C_local_wb\" outside it");
	/* inside the thread's loop: legal */
	tir_stmt *w1 = wn->kids[0];
	stmt_remove(wn);
	stmt_append(i, w1);
	wb->iters[0].binding = var(&g, i);
	ok(&g, &t_cpu);
	ok(&g, &t_cuda);
	drop(&g);
}
END_TEST

/* A reduction repeated by every iteration of a loop it does not use. */
START_TEST(test_reduction_race)
{
	prog g = build(MM64);
	tir_stmt *p = wrap_root(&g, "p", 4);
	ok(&g, &t_cpu);
	p->loop_kind = LOOP_PARALLEL;
	bad(&g, &t_cpu, "block \"compute\" under parallel loop p does not use it: every "
	    "iteration writes the same elements of \"C\"");
	bind(p, TIR_THREAD_Y);
	ok(&g, &t_cpu);
	bad(&g, &t_cuda, "under threadIdx.y loop p does not use it");
	drop(&g);
}
END_TEST

START_TEST(test_dead_buffer_access)
{
	prog g = build(MM64_RELU);
	tir_block *c = blk(&g, "compute");
	c->store->dead = true;
	bad(&g, &t_cpu, "writes buffer C_acc, which was inlined away");
	drop(&g);
}
END_TEST


/* ---- programs scheduled through the public API -------------------------------- */

#define OK_RV(x) do { int rv_ = (x); ck_assert_msg(rv_ >= 0, "%s: %s", #x, e.msg); } while (0)

/* The usual GPU matmul: tiles fused onto blockIdx.x / threadIdx.x (ti*tj
 * threads), A and B staged in shared memory at k0 and fetched cooperatively,
 * C accumulated in registers. */
static tir_sched *gpu_matmul(tir_workload **w, int64_t ti, int64_t tj)
{
	tir_error e = { "" };
	const char *js = "{\"op\":\"matmul\",\"batch\":1,\"M\":512,\"N\":512,\"K\":512}";
	*w = tir_workload_parse(js, strlen(js), NULL, &e);
	ck_assert_msg(*w != NULL, "%s", e.msg);
	tir_sched *s = tir_sched_new(*w, 1, &e);
	ck_assert_msg(s != NULL, "%s", e.msg);
	int c = tir_get_block(s, "compute", &e), l[4], i[3], j[3], k[2];
	OK_RV(c);
	OK_RV(tir_get_loops(s, c, l, 4, &e));
	tir_int fi[3] = { TIR_LIT(0), TIR_LIT(ti), TIR_LIT(4) };
	tir_int fj[3] = { TIR_LIT(0), TIR_LIT(tj), TIR_LIT(4) };
	tir_int fk[2] = { TIR_LIT(64), TIR_LIT(8) };
	OK_RV(tir_split(s, l[1], 3, fi, i, &e));
	OK_RV(tir_split(s, l[2], 3, fj, j, &e));
	OK_RV(tir_split(s, l[3], 2, fk, k, &e));
	int ord[8] = { i[0], j[0], i[1], j[1], k[0], k[1], i[2], j[2] };
	OK_RV(tir_reorder(s, 8, ord, &e));
	int bx = tir_fuse(s, 3, (int[]){ l[0], i[0], j[0] }, &e);
	OK_RV(bx);
	int tx = tir_fuse(s, 2, (int[]){ i[1], j[1] }, &e);
	OK_RV(tx);
	OK_RV(tir_bind(s, bx, "blockIdx.x", &e));
	OK_RV(tir_bind(s, tx, "threadIdx.x", &e));
	for (int r = 0; r < 2; r++) {
		int a = tir_cache_read(s, c, r, "shared", &e), al[8], sp[2];
		OK_RV(a);
		OK_RV(tir_compute_at(s, a, k[0], &e));
		int n = tir_get_loops(s, a, al, 8, &e);
		OK_RV(n);
		int f = tir_fuse(s, n - 3, al + 3, &e);
		OK_RV(f);
		tir_int fs[2] = { TIR_LIT(0), TIR_LIT(ti * tj) };
		OK_RV(tir_split(s, f, 2, fs, sp, &e));
		OK_RV(tir_bind(s, sp[1], "threadIdx.x", &e));
	}
	int cw = tir_cache_write(s, c, 0, "local", &e);
	OK_RV(cw);
	OK_RV(tir_reverse_compute_at(s, cw, tx, &e));
	return s;
}

START_TEST(test_gpu_schedule)
{
	tir_workload *w;
	tir_sched *s = gpu_matmul(&w, 16, 16);
	prog g = { w, (tir_program *)tir_sched_program(s), NULL };
	ok(&g, &t_cpu);
	ok(&g, &t_cuda);
	tir_sched_free(s);
	tir_workload_free(w);

	s = gpu_matmul(&w, 32, 64);
	g = (prog){ w, (tir_program *)tir_sched_program(s), NULL };
	ok(&g, &t_cpu);
	bad(&g, &t_cuda, "bound to threadIdx.x has extent 2048, more than the limit 1024");
	tir_sched_free(s);
	tir_workload_free(w);
}
END_TEST

static Suite *make_verify_suite(void)
{
	Suite *s = suite_create("verify");
	TCase *tc = tcase_create("unscheduled");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_suite_unscheduled);
	tcase_add_test(tc, test_variants_unscheduled);
	suite_add_tcase(s, tc);

	tc = tcase_create("loopnest");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_dependent_iterators);
	tcase_add_test(tc, test_fused_bindings_legal);
	tcase_add_test(tc, test_binding_non_enclosing_loop);
	tcase_add_test(tc, test_binding_not_quasi_affine);
	tcase_add_test(tc, test_binding_floordiv_by_zero);
	tcase_add_test(tc, test_binding_uses_iterator);
	tcase_add_test(tc, test_domain_not_covered);
	tcase_add_test(tc, test_binding_exceeds_domain);
	tcase_add_test(tc, test_reduction_on_parallel_loop);
	tcase_add_test(tc, test_spatial_and_reduction_mixed);
	tcase_add_test(tc, test_empty_loop);
	tcase_add_test(tc, test_body_uses_loop_var);
	tcase_add_test(tc, test_load_out_of_bounds);
	tcase_add_test(tc, test_dead_buffer_access);
	suite_add_tcase(s, tc);

	tc = tcase_create("producer");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_consumer_before_producer);
	tcase_add_test(tc, test_producer_does_not_cover);
	tcase_add_test(tc, test_producer_moved_out_of_cover);
	tcase_add_test(tc, test_temp_never_written);
	tcase_add_test(tc, test_output_never_written);
	tcase_add_test(tc, test_reduction_without_init);
	suite_add_tcase(s, tc);

	tc = tcase_create("threading");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_reduction_bound_to_thread);
	tcase_add_test(tc, test_reduction_bound_to_block);
	tcase_add_test(tc, test_too_many_threads);
	tcase_add_test(tc, test_thread_extent_limit);
	tcase_add_test(tc, test_unrolled_too_much);
	tcase_add_test(tc, test_blockidx_nested);
	tcase_add_test(tc, test_shared_memory_limit);
	tcase_add_test(tc, test_shared_in_two_kernels);
	tcase_add_test(tc, test_short_thread_loop_writes_shared);
	tcase_add_test(tc, test_vectorized_too_wide);
	tcase_add_test(tc, test_local_across_threads);
	tcase_add_test(tc, test_reduction_race);
	tcase_add_test(tc, test_cross_thread_max_min);
	tcase_add_test(tc, test_gpu_schedule);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(make_verify_suite());
}
