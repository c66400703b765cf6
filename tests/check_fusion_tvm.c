/*
 * check_fusion_tvm.c — TVM's FuseOps rules (tuner/fusion/tvm.c) through
 * tir_fusion_plan_new(w, TIR_FUSE_TVM): the seed's 10-op example (3
 * kernels, exact bytes, the two refusals of seeds/000 §9) and a graph built
 * for every rule: an elementwise chain, broadcast into elementwise,
 * injective ops fused in phase 1 (after, and never into, a heavy op's
 * group), a matmul with a bias and relu epilogue, two matmuls never in one
 * group, a reduction only as a group's sink, elementwise diamonds fused
 * whole and diamonds through a reduction not, outputs post-dominated by
 * nothing, dropped nodes, max_fuse_depth.  Every refused pair is listed
 * with its rule's sentence, and every kernel's program lowers and passes
 * tir_verify on the CPU.
 *
 * Kernels are written "t0* t* a* p* q* s | m | d* e* y": in execution
 * order, each kernel's nodes in node order, '*' on the ones it inlines (the
 * others are its members: realized).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tir.h"
#include "ir/ir.h"
#include "fusion/fusion.h"
#include "testutil.h"

#define MiB (1024 * 1024)
#define KiB 1024

/* ---- helpers ------------------------------------------------------------------ */

/* A workload from JSON written with ' for " (lim NULL: the defaults). */
static tir_workload *parse_lim(const char *text, const tir_limits *lim)
{
	char *json = xstrdup(text);
	for (char *c = json; *c; c++)
		if (*c == '\'')
			*c = '"';
	tir_error err = { "" };
	tir_workload *w = tir_workload_parse(json, strlen(json), lim, &err);
	ck_assert_msg(w != NULL, "%s: %s", json, err.msg);
	free(json);
	return w;
}

static tir_workload *parse(const char *text) { return parse_lim(text, NULL); }

static tir_target cpu(void)
{
	tir_target t;
	tir_error err;
	ck_assert_msg(tir_target_parse("cpu", &t, &err) == 0, "%s", err.msg);
	return t;
}

/* Every kernel's program lowers and is valid on the CPU. */
static void check_programs(const tir_fusion_plan *p)
{
	tir_target t = cpu();
	for (int k = 0; k < p->nkernels; k++) {
		tir_error err = { "" };
		tir_program *prog = tir_fusion_kernel_program(p, k, &err);
		ck_assert_msg(prog, "kernel %d (%s): %s", k, p->k[k].name, err.msg);
		ck_assert_msg(tir_verify(prog, &t, &err) == 0, "kernel %d (%s): %s", k,
			      p->k[k].name, err.msg);
		tir_program_free(prog);
	}
}

/* The TVM plan of w, checked against fz_plan_finish's contract. */
static tir_fusion_plan *fuse(const tir_workload *w)
{
	tir_error err = { "" };
	tir_fusion_plan *p = tir_fusion_plan_new(w, TIR_FUSE_TVM, &err);
	ck_assert_msg(p, "%s", err.msg);
	ck_assert_int_eq(p->mode, TIR_FUSE_TVM);
	const tir_graph *g = p->g;
	for (int i = 0; i < g->nnodes; i++) {
		const tir_gvalue *x = &g->v[g->ninputs + i];
		int in = 0;
		for (int k = 0; k < p->nkernels; k++)
			in += p->k[k].nodes[i];
		if (!x->live) {
			ck_assert_msg(!p->realize[i] && in == 0, "dropped %s in a kernel", x->name);
			continue;
		}
		/* TVM computes a node in exactly one kernel: values cross groups
		 * through memory, so nothing is inlined into two */
		ck_assert_msg(in == 1, "%s is computed by %d kernels", x->name, in);
		tir_gkind gk = gop_kind(x->op);
		if (gk == GK_REDUCTION || gk == GK_HEAVY || x->output >= 0)
			ck_assert_msg(p->realize[i], "%s is not realized", x->name);
	}
	return p;
}

/* The kernels as "a* b | c" (the top comment). */
static char *kernels(const tir_fusion_plan *p)
{
	const tir_graph *g = p->g;
	size_t cap = 64;
	for (int i = 0; i < g->nnodes; i++)
		cap += strlen(g->v[g->ninputs + i].name) + 4;
	char *s = xcalloc(cap, 1);
	for (int k = 0; k < p->nkernels; k++) {
		if (k)
			strcat(s, " |");
		for (int i = 0; i < g->nnodes; i++)
			if (p->k[k].nodes[i]) {
				if (s[0])
					strcat(s, " ");
				strcat(s, g->v[g->ninputs + i].name);
				if (!p->k[k].members[i])
					strcat(s, "*");
			}
	}
	return s;
}

static void assert_kernels(const tir_fusion_plan *p, const char *expect)
{
	char *got = kernels(p);
	ck_assert_msg(!strcmp(got, expect), "kernels \"%s\", expected \"%s\"", got, expect);
	free(got);
}

static int node(const tir_fusion_plan *p, const char *name)
{
	int i = tir_graph_node_find(p->w, name);
	ck_assert_msg(i >= 0, "no node %s", name);
	return i;
}

/* A refused pair (a, b) whose reason holds `says`. */
static void assert_refused(const tir_fusion_plan *p, const char *a, const char *b,
			   const char *says)
{
	int ia = node(p, a), ib = node(p, b);
	for (int r = 0; r < p->nrejected; r++)
		if (p->rej[r].a == ia && p->rej[r].b == ib) {
			ck_assert_msg(strstr(p->rej[r].reason, says), "%s + %s: \"%s\", expected "
				      "\"%s\" in it", a, b, p->rej[r].reason, says);
			return;
		}
	char *text = tir_fusion_plan_text(p);
	ck_abort_msg("no refusal %s + %s in\n%s", a, b, text);
	free(text);
}

static void assert_nrefused(const tir_fusion_plan *p, int n)
{
	if (p->nrejected != n) {
		char *text = tir_fusion_plan_text(p);
		ck_abort_msg("%d refusals, expected %d:\n%s", p->nrejected, n, text);
		free(text);
	}
}

/* fuse, the kernels and the refusal count, the programs. */
static tir_fusion_plan *plan(const tir_workload *w, const char *expect, int nrefused)
{
	tir_fusion_plan *p = fuse(w);
	assert_kernels(p, expect);
	assert_nrefused(p, nrefused);
	check_programs(p);
	return p;
}

/* ---- the seed's example -------------------------------------------------------------- */

static char *read_example(const char *file)
{
	char path[512];
	snprintf(path, sizeof path, "%s/examples/graphs/%s", TOP_SRCDIR, file);
	size_t len;
	char *doc = tir_read_file(path, 0, &len);
	ck_assert_msg(doc, "cannot read %s", path);
	return doc;
}

/* seeds/000 §9: s ... before it, the mean alone, the epilogue; s written
 * once and read twice. */
START_TEST(seed_example_three_kernels)
{
	char *doc = read_example("seed10.json");
	tir_error err = { "" };
	tir_workload *w = tir_workload_parse(doc, strlen(doc), NULL, &err);
	ck_assert_msg(w, "%s", err.msg);
	tir_fusion_plan *p = plan(w, "t0* t* a* p* q* s | m | d* e* y", 2);
	/* reads x, bias; s; s, m, gamma, beta.  writes s; m; y */
	ck_assert_int_eq(p->k[0].read_bytes, 4 * MiB + 4 * KiB);
	ck_assert_int_eq(p->k[0].write_bytes, 4 * MiB);
	ck_assert_int_eq(p->k[1].read_bytes, 4 * MiB);
	ck_assert_int_eq(p->k[1].write_bytes, 4 * KiB);
	ck_assert_int_eq(p->k[2].read_bytes, 4 * MiB + 12 * KiB);
	ck_assert_int_eq(p->k[2].write_bytes, 4 * MiB);
	ck_assert_int_eq(p->read_bytes, 12599296);          /* 12 MiB + 16 KiB */
	ck_assert_int_eq(p->write_bytes, 8392704);          /* 8 MiB + 4 KiB */
	ck_assert_str_eq(p->k[0].name, "fused_add_mul_relu");
	ck_assert_str_eq(p->k[1].name, "fused_mean");
	ck_assert_str_eq(p->k[2].name, "fused_add_mul_sub");
	assert_refused(p, "s", "d", "the path from s to its post-dominator d passes m "
		       "(CommReduce), not injective or simpler");
	assert_refused(p, "m", "d", "a CommReduce node (m: mean) is only a group's sink");
	char *json = tir_fusion_plan_json(p);
	ck_assert_msg(strstr(json, "\"mode\":\"tvm\"") &&
		      strstr(json, "{\"nodes\":[\"s\",\"d\"],\"reason\":\"the path from s"), "%s",
		      json);
	free(json);
	tir_fusion_plan_free(p);
	tir_workload_free(w);
	free(doc);
}
END_TEST

/* ---- ElemWise and Broadcast ---------------------------------------------------------- */

START_TEST(elemwise_chain_one_group)
{
	tir_workload *w = parse(
		"{'op':'graph','inputs':{'x':{'shape':[64,32]}},'nodes':["
		"{'name':'a','op':'relu','args':['x']},"
		"{'name':'b','op':'exp','args':['a']},"
		"{'name':'c','op':'mul','args':['b',0.5]},"
		"{'name':'d','op':'tanh','args':['c']}],'outputs':['d']}");
	tir_fusion_plan *p = plan(w, "a* b* c* d", 0);
	ck_assert_int_eq(p->read_bytes, 64 * 32 * 4);
	ck_assert_int_eq(p->write_bytes, 64 * 32 * 4);
	tir_fusion_plan_free(p);
	tir_workload_free(w);
}
END_TEST

/* b2 (ElemWise on [32]) into t through a Broadcast edge; t (Broadcast) into
 * r (ElemWise). */
START_TEST(broadcast_into_elemwise)
{
	tir_workload *w = parse(
		"{'op':'graph','inputs':{'x':{'shape':[64,32]},'b':{'shape':[32]}},'nodes':["
		"{'name':'b2','op':'mul','args':['b',2]},"
		"{'name':'t','op':'add','args':['x','b2']},"
		"{'name':'r','op':'relu','args':['t']}],'outputs':['r']}");
	tir_fusion_plan *p = plan(w, "b2* t* r", 0);
	ck_assert_int_eq(p->read_bytes, (64 * 32 + 32) * 4);
	tir_fusion_plan_free(p);
	tir_workload_free(w);
}
END_TEST

/* relu's readers p, q meet again at s: the diamond is one group. */
START_TEST(elemwise_diamond_fused_whole)
{
	tir_workload *w = parse(
		"{'op':'graph','inputs':{'x':{'shape':[16,16]}},'nodes':["
		"{'name':'a','op':'relu','args':['x']},"
		"{'name':'p','op':'mul','args':['a','a']},"
		"{'name':'q','op':'exp','args':['a']},"
		"{'name':'s','op':'add','args':['p','q']}],'outputs':['s']}");
	tir_fusion_plan *p = plan(w, "a* p* q* s", 0);
	tir_fusion_plan_free(p);
	tir_workload_free(w);
}
END_TEST

/* s's post-dominator d is reached through the mean: s is not fused, and the
 * mean is not fused into d either. */
START_TEST(diamond_through_a_reduction_not_fused)
{
	tir_workload *w = parse(
		"{'op':'graph','inputs':{'x':{'shape':[16,8]}},'nodes':["
		"{'name':'s','op':'relu','args':['x']},"
		"{'name':'m','op':'amax','args':['s'],'dim':1,'keepdim':true},"
		"{'name':'d','op':'sub','args':['s','m']}],'outputs':['d']}");
	tir_fusion_plan *p = plan(w, "s | m | d", 2);
	assert_refused(p, "s", "d", "passes m (CommReduce), not injective or simpler");
	assert_refused(p, "m", "d", "a CommReduce node (m: amax) is only a group's sink");
	/* s once written, read by m and d */
	ck_assert_int_eq(p->read_bytes, 16 * 8 * 4 * 3 + 16 * 4);
	tir_fusion_plan_free(p);
	tir_workload_free(w);
}
END_TEST

/* ---- CommReduce ------------------------------------------------------------------- */

/* d into the sum (a reduction is a group's sink), the sum not into z. */
START_TEST(reduction_only_a_sink)
{
	tir_workload *w = parse(
		"{'op':'graph','inputs':{'x':{'shape':[64,32]}},'nodes':["
		"{'name':'d','op':'mul','args':['x',2]},"
		"{'name':'r','op':'sum','args':['d'],'dim':1,'keepdim':true},"
		"{'name':'z','op':'add','args':['r',1]}],'outputs':['z']}");
	tir_fusion_plan *p = plan(w, "d* r | z", 1);
	assert_refused(p, "r", "z", "a CommReduce node (r: sum) is only a group's sink; it "
		       "does not fuse into its post-dominator z");
	ck_assert_int_eq(p->k[0].read_bytes, 64 * 32 * 4);
	ck_assert_int_eq(p->k[0].write_bytes, 64 * 4);
	tir_fusion_plan_free(p);
	tir_workload_free(w);
}
END_TEST

/* A Broadcast node before a reduction joins it; nodes between a node and a
 * reduction it post-dominates must be injective or simpler. */
START_TEST(layernorm_example)
{
	char *doc = read_example("layernorm.json");
	tir_error err = { "" };
	tir_workload *w = tir_workload_parse(doc, strlen(doc), NULL, &err);
	ck_assert_msg(w, "%s", err.msg);
	tir_fusion_plan *p = fuse(w);
	/* every reduction is the last realized node of its kernel's group */
	for (int k = 0; k < p->nkernels; k++)
		for (int i = 0; i < p->g->nnodes; i++) {
			const tir_gvalue *x = &p->g->v[p->g->ninputs + i];
			if (!p->k[k].nodes[i] || gop_kind(x->op) != GK_REDUCTION)
				continue;
			for (int j = i + 1; j < p->g->nnodes; j++)
				ck_assert_msg(!p->k[k].nodes[j], "%s after the reduction %s in %s",
					      p->g->v[p->g->ninputs + j].name, x->name, p->k[k].name);
		}
	check_programs(p);
	tir_fusion_plan_free(p);
	tir_workload_free(w);
	free(doc);
}
END_TEST

/* ---- OutEWiseFusable -------------------------------------------------------------- */

#define MM_INPUTS "'a':{'shape':[8,4]},'b':{'shape':[4,16]}"
#define MM "{'name':'mm','op':'matmul','args':['a','b'],'M':8,'N':16,'K':4}"

/* The bias add (a Broadcast node whose edge from mm is ElemWise) and relu are
 * mm's epilogue: one kernel writing r alone. */
START_TEST(matmul_bias_relu_epilogue)
{
	tir_workload *w = parse(
		"{'op':'graph','inputs':{" MM_INPUTS ",'bias':{'shape':[16]}},'nodes':[" MM ","
		"{'name':'t','op':'add','args':['mm','bias']},"
		"{'name':'r','op':'relu','args':['t']}],'outputs':['r']}");
	tir_fusion_plan *p = plan(w, "mm t* r", 0);
	ck_assert_int_eq(p->k[0].read_bytes, (8 * 4 + 4 * 16 + 16) * 4);
	ck_assert_int_eq(p->k[0].write_bytes, 8 * 16 * 4);     /* mm stays in the kernel */
	tir_fusion_plan_free(p);
	tir_workload_free(w);
}
END_TEST

/* A pointwise prologue is not fused: its relation to the matmul is
 * OutEWiseFusable. */
START_TEST(no_prologue_into_matmul)
{
	tir_workload *w = parse(
		"{'op':'graph','inputs':{" MM_INPUTS "},'nodes':["
		"{'name':'ra','op':'relu','args':['a']},"
		"{'name':'mm','op':'matmul','args':['ra','b'],'M':8,'N':16,'K':4}],"
		"'outputs':['mm']}");
	tir_fusion_plan *p = plan(w, "ra | mm", 1);
	assert_refused(p, "ra", "mm", "ra (relu, ElemWise) fuses only into a post-dominator "
		       "it reaches through injective ops or a reduction; its relation to mm is "
		       "OutEWiseFusable");
	tir_fusion_plan_free(p);
	tir_workload_free(w);
}
END_TEST

/* mm [8, 1] broadcast over y: the relation is Broadcast, not an
 * elementwise epilogue. */
START_TEST(broadcast_of_the_matmul_is_no_epilogue)
{
	tir_workload *w = parse(
		"{'op':'graph','inputs':{'a':{'shape':[8,4]},'b':{'shape':[4,1]},"
		"'y':{'shape':[8,16]}},'nodes':["
		"{'name':'mm','op':'matmul','args':['a','b'],'M':8,'N':1,'K':4},"
		"{'name':'t','op':'add','args':['mm','y']}],'outputs':['t']}");
	tir_fusion_plan *p = plan(w, "mm | t", 1);
	assert_refused(p, "mm", "t", "an OutEWiseFusable group fuses only an elementwise "
		       "epilogue: the relation of mm (OutEWiseFusable) to its post-dominator t "
		       "is Broadcast");
	tir_fusion_plan_free(p);
	tir_workload_free(w);
}
END_TEST

/* mm1 feeding mm2: not an epilogue; mm1 + mm2: the add joins mm1's group
 * and mm2 is refused (two OutEWiseFusable never share a group). */
START_TEST(two_matmuls_never_one_group)
{
	tir_workload *w = parse(
		"{'op':'graph','inputs':{" MM_INPUTS ",'c':{'shape':[16,16]}},'nodes':["
		"{'name':'mm1','op':'matmul','args':['a','b'],'M':8,'N':16,'K':4},"
		"{'name':'mm2','op':'matmul','args':['mm1','c'],'M':8,'N':16,'K':16}],"
		"'outputs':['mm2']}");
	tir_fusion_plan *p = plan(w, "mm1 | mm2", 1);
	assert_refused(p, "mm1", "mm2", "the relation of mm1 (OutEWiseFusable) to its "
		       "post-dominator mm2 is OutEWiseFusable");
	tir_fusion_plan_free(p);
	tir_workload_free(w);

	w = parse(
		"{'op':'graph','inputs':{" MM_INPUTS ",'c':{'shape':[8,4]},'d':{'shape':[4,16]}},"
		"'nodes':["
		"{'name':'mm1','op':'matmul','args':['a','b'],'M':8,'N':16,'K':4},"
		"{'name':'mm2','op':'matmul','args':['c','d'],'M':8,'N':16,'K':4},"
		"{'name':'s','op':'add','args':['mm1','mm2']}],'outputs':['s']}");
	p = plan(w, "mm2 | mm1 s", 1);
	assert_refused(p, "mm2", "s", "two OutEWiseFusable nodes never share a group: mm2's "
		       "group holds mm2, its post-dominator s's holds mm1");
	ck_assert_int_eq(p->k[0].write_bytes, 8 * 16 * 4);      /* mm2 through memory */
	tir_fusion_plan_free(p);
	tir_workload_free(w);
}
END_TEST

/* ---- Injective -------------------------------------------------------------------- */

/* Views fuse with each other and into elementwise readers (phase 1), and
 * an elementwise node into a view (phase 0). */
START_TEST(injective_fused_in_phase_1)
{
	tir_workload *w = parse(
		"{'op':'graph','inputs':{'x':{'shape':[8,16]}},'nodes':["
		"{'name':'p','op':'permute','args':['x'],'dims':[1,0]},"
		"{'name':'r','op':'reshape','args':['p'],'shape':[128]},"
		"{'name':'e','op':'exp','args':['r']},"
		"{'name':'v','op':'reshape','args':['e'],'shape':[4,32]},"
		"{'name':'sl','op':'slice','args':['v'],'dim':1,'start':0,'end':16}],"
		"'outputs':['sl']}");
	tir_fusion_plan *p = plan(w, "p* r* e* v* sl", 0);
	tir_fusion_plan_free(p);
	tir_workload_free(w);
}
END_TEST

/* A view after a matmul is no elementwise epilogue (phase 0) and joins its
 * own reader (phase 1); a view before a matmul never joins its group. */
START_TEST(injective_not_into_a_heavy_group)
{
	tir_workload *w = parse(
		"{'op':'graph','inputs':{" MM_INPUTS "},'nodes':[" MM ","
		"{'name':'r','op':'reshape','args':['mm'],'shape':[16,8]},"
		"{'name':'z','op':'relu','args':['r']}],'outputs':['z']}");
	tir_fusion_plan *p = plan(w, "mm | r* z", 1);
	assert_refused(p, "mm", "r", "an OutEWiseFusable group fuses only an elementwise "
		       "epilogue: the relation of mm (OutEWiseFusable) to its post-dominator r "
		       "is Injective");
	tir_fusion_plan_free(p);
	tir_workload_free(w);

	w = parse(
		"{'op':'graph','inputs':{'a':{'shape':[4,8]},'b':{'shape':[4,16]}},'nodes':["
		"{'name':'v','op':'permute','args':['a'],'dims':[1,0]},"
		"{'name':'mm','op':'matmul','args':['v','b'],'M':8,'N':16,'K':4}],"
		"'outputs':['mm']}");
	p = plan(w, "v | mm", 1);
	assert_refused(p, "v", "mm", "the path from v to its post-dominator ends at mm "
		       "(OutEWiseFusable), not injective or simpler");
	tir_fusion_plan_free(p);
	tir_workload_free(w);
}
END_TEST

/* o = v + relu(mm): v comes first in post-DFS order, but injective fusion
 * waits for phase 1, by when mm, relu and o are one OutEWiseFusable group
 * that v cannot join.  (Fused in phase 0, v would have made o's group
 * Injective and kept mm out.) */
START_TEST(heavy_ops_fuse_before_injective)
{
	tir_workload *w = parse(
		"{'op':'graph','inputs':{" MM_INPUTS ",'y':{'shape':[16,8]}},'nodes':[" MM ","
		"{'name':'ra','op':'relu','args':['mm']},"
		"{'name':'v','op':'permute','args':['y'],'dims':[1,0]},"
		"{'name':'o','op':'add','args':['v','ra']}],'outputs':['o']}");
	tir_fusion_plan *p = plan(w, "v | mm ra* o", 1);
	assert_refused(p, "v", "o", "the path from v to its post-dominator ends at o (in mm's "
		       "OutEWiseFusable group), not injective or simpler");
	tir_fusion_plan_free(p);
	tir_workload_free(w);
}
END_TEST

/* ---- the graph's edges ------------------------------------------------------------ */

/* An output is post-dominated by nothing: y1 never joins y2, and a, read
 * on the way to two outputs, has no post-dominator. */
START_TEST(outputs_have_no_post_dominator)
{
	tir_workload *w = parse(
		"{'op':'graph','inputs':{'x':{'shape':[16,16]}},'nodes':["
		"{'name':'y1','op':'relu','args':['x']},"
		"{'name':'y2','op':'exp','args':['y1']}],'outputs':['y1','y2']}");
	tir_fusion_plan *p = plan(w, "y1 | y2", 0);
	tir_fusion_plan_free(p);
	tir_workload_free(w);

	w = parse(
		"{'op':'graph','inputs':{'x':{'shape':[16,16]}},'nodes':["
		"{'name':'a','op':'relu','args':['x']},"
		"{'name':'o1','op':'exp','args':['a']},"
		"{'name':'o2','op':'neg','args':['a']}],'outputs':['o1','o2']}");
	p = plan(w, "a | o1 | o2", 0);
	tir_fusion_plan_free(p);
	tir_workload_free(w);
}
END_TEST

/* A dropped node is in no kernel and not realized; it is no reader either. */
START_TEST(dropped_nodes_ignored)
{
	tir_workload *w = parse(
		"{'op':'graph','inputs':{'x':{'shape':[16,16]}},'nodes':["
		"{'name':'a','op':'relu','args':['x']},"
		"{'name':'dead','op':'sum','args':['a']},"
		"{'name':'y','op':'exp','args':['a']}],'outputs':['y']}");
	tir_fusion_plan *p = plan(w, "a* y", 0);
	ck_assert(!p->realize[node(p, "dead")]);
	tir_fusion_plan_free(p);
	tir_workload_free(w);
}
END_TEST

/* A chain of 300 relus: the first group stops at max_fuse_depth, 256
 * nodes.  Phase 1 tries n255 again, against the 44 nodes after it. */
START_TEST(max_fuse_depth)
{
	enum { N = 300 };
	size_t cap = 128 + (size_t)N * 64;
	char *json = xmalloc(cap);
	size_t len = (size_t)snprintf(json, cap, "{'op':'graph','inputs':{'x':{'shape':[4,4]}},"
				      "'nodes':[");
	for (int i = 0; i < N; i++) {
		char prev[16] = "x";
		if (i)
			snprintf(prev, sizeof prev, "n%d", i - 1);
		len += (size_t)snprintf(json + len, cap - len, "%s{'name':'n%d','op':'relu',"
					"'args':['%s']}", i ? "," : "", i, prev);
	}
	snprintf(json + len, cap - len, "],'outputs':['n%d']}", N - 1);
	tir_limits lim = tir_limits_default();
	lim.max_nodes = N;
	tir_workload *w = parse_lim(json, &lim);
	free(json);
	tir_fusion_plan *p = fuse(w);
	ck_assert_int_eq(p->nkernels, 2);
	int count[2] = { 0, 0 };
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < N; i++)
			count[k] += p->k[k].nodes[i];
	ck_assert_int_eq(count[0], 256);
	ck_assert_int_eq(count[1], N - 256);
	ck_assert(p->realize[255] && p->k[0].members[255]);
	assert_nrefused(p, 1);
	assert_refused(p, "n255", "n256", "fusing n255 into the group of its post-dominator "
		       "n256 would make a group of 300 nodes, over max_fuse_depth 256");
	check_programs(p);
	tir_fusion_plan_free(p);
	tir_workload_free(w);
}
END_TEST

static Suite *fusion_tvm_suite(void)
{
	Suite *s = suite_create("fusion_tvm");
	TCase *tc = tcase_create("seed");
	tcase_add_test(tc, seed_example_three_kernels);
	tcase_add_test(tc, layernorm_example);
	suite_add_tcase(s, tc);
	tc = tcase_create("rules");
	tcase_add_test(tc, elemwise_chain_one_group);
	tcase_add_test(tc, broadcast_into_elemwise);
	tcase_add_test(tc, elemwise_diamond_fused_whole);
	tcase_add_test(tc, diamond_through_a_reduction_not_fused);
	tcase_add_test(tc, reduction_only_a_sink);
	tcase_add_test(tc, matmul_bias_relu_epilogue);
	tcase_add_test(tc, no_prologue_into_matmul);
	tcase_add_test(tc, broadcast_of_the_matmul_is_no_epilogue);
	tcase_add_test(tc, two_matmuls_never_one_group);
	tcase_add_test(tc, injective_fused_in_phase_1);
	tcase_add_test(tc, injective_not_into_a_heavy_group);
	tcase_add_test(tc, heavy_ops_fuse_before_injective);
	tcase_add_test(tc, outputs_have_no_post_dominator);
	tcase_add_test(tc, dropped_nodes_ignored);
	tcase_add_test(tc, max_fuse_depth);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(fusion_tvm_suite());
}
