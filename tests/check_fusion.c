/*
 * check_fusion.c — the fusion planner's Inductor and eager modes
 * (tuner/fusion/): the seed's 10-op example planned as the seed derives it,
 * byte counts exact; every can_fuse refusal triggered by a graph built for
 * it; the FusionScore order; and every plan's kernels, run one after the
 * other through the interpreter on random inputs, computing what the whole
 * graph computes, each kernel valid and compiled for the CPU, and as a
 * workload of its own (tir_fusion_kernel_json) a sampled candidate of each
 * of its sketches compiled by NVRTC for sm_90.  TVM's mode is check_fusion_tvm.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tir.h"
#include "ir/ir.h"
#include "fusion/fusion.h"
#include "measure/measure.h"
#include "testutil.h"

static tir_workload *parse(const char *json)
{
	tir_error err = { "" };
	tir_workload *w = tir_workload_parse(json, strlen(json), NULL, &err);
	ck_assert_msg(w, "%s: %s", json, err.msg);
	return w;
}

static tir_workload *parse_file(const char *rel)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/%s", TOP_SRCDIR, rel);
	size_t len;
	char *text = tir_read_file(path, 1 << 24, &len);
	ck_assert_msg(text, "cannot read %s", path);
	tir_error err = { "" };
	tir_workload *w = tir_workload_parse(text, len, NULL, &err);
	ck_assert_msg(w, "%s: %s", path, err.msg);
	free(text);
	return w;
}

static tir_fusion_plan *plan(const tir_workload *w, tir_fuse_mode m)
{
	tir_error err = { "" };
	tir_fusion_plan *p = tir_fusion_plan_new(w, m, &err);
	ck_assert_msg(p, "plan: %s", err.msg);
	return p;
}

/* ---- the plans' kernels compute the graph ------------------------------------------ */

typedef struct named { char *name; double *v; int64_t n; } named;

static int64_t buf_elems(const tir_buffer *b)
{
	int64_t n = 1;
	for (int d = 0; d < b->ndim; d++)
		n *= b->shape[d];
	return n;
}

static named *find(named *vals, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(vals[i].name, name))
			return &vals[i];
	return NULL;
}

/* A valid sm_90 candidate of every sketch of kernel workload kw, its code
 * compiled by NVRTC (where this build has CUDA). */
static void sm90_candidate(const char *what, const tir_workload *kw, const tir_target *t)
{
	tir_error err = { "" };
	tir_sketch sk[TIR_MAX_SKETCHES];
	int n = tir_sketches(kw, t, sk, TIR_MAX_SKETCHES, &err);
	ck_assert_msg(n >= 1, "%s: no sketch: %s", what, err.msg);
	for (int i = 0; i < n; i++) {
		tir_code *c = NULL;
		for (uint64_t seed = 1; seed <= 16 && !c; seed++) {
			tir_sched *s = tir_sched_new(kw, seed, &err);
			ck_assert(s);
			if (tir_sketch_apply(kw, t, sk[i].id, s, &err) == 0 &&
			    tir_verify(tir_sched_program(s), t, &err) == 0)
				c = tir_codegen(tir_sched_program(s), t, &err);
			tir_sched_free(s);
		}
		ck_assert_msg(c, "%s: sketch %s: no valid candidate: %s", what, sk[i].name, err.msg);
#ifdef HAVE_CUDA
		char *cubin = NULL;
		size_t size = 0;
		ck_assert_msg(tir_nvrtc_compile(c->source, 90, &cubin, &size, &err) == 0,
			      "%s: sketch %s: NVRTC: %.400s", what, sk[i].name, err.msg);
		free(cubin);
#endif
		tir_code_free(c);
	}
}

/* Runs the whole graph and the plan's kernels one after the other on the
 * same random inputs (the interpreter), and compares every graph output;
 * each kernel also verified and compiled for the CPU and sm_90. */
static void kernels_compute_graph(const char *what, const tir_workload *w,
				  const tir_fusion_plan *p)
{
	tir_error err = { "" };
	tir_program *whole = tir_program_build(w, &err);
	ck_assert_msg(whole, "%s: %s", what, err.msg);
	named vals[256];
	int nv = 0;
	uint64_t seed = 7;
	double *params[256];
	for (int i = 0; i < whole->nparams; i++) {
		const tir_buffer *b = whole->bufs[i];
		int64_t n = buf_elems(b);
		params[i] = calloc((size_t)n, sizeof(double));
		if (b->role == BUF_INPUT) {
			for (int64_t k = 0; k < n; k++) {
				seed = seed * 6364136223846793005ull + 1442695040888963407ull;
				params[i][k] = (double)((seed >> 33) % 2001) / 1000.0 - 1.0;
				if (b->dtype == TIR_F16)
					params[i][k] = (double)(float)params[i][k];
			}
			vals[nv++] = (named){ strdup(b->name), params[i], n };
		}
	}
	ck_assert_msg(interp_run(whole, params, NULL, &err) == 0, "%s: %s", what, err.msg);
	tir_target cpu, sm90;
	ck_assert(tir_target_parse("cpu", &cpu, &err) == 0);
	ck_assert(tir_target_parse("cuda:sm_90", &sm90, &err) == 0);
	for (int k = 0; k < tir_fusion_plan_kernels(p); k++) {
		tir_program *kp = tir_fusion_kernel_program(p, k, &err);
		ck_assert_msg(kp, "%s: kernel %d: %s", what, k, err.msg);
		ck_assert_msg(tir_verify(kp, &cpu, &err) == 0, "%s: kernel %s: %s", what,
			      tir_fusion_kernel_name(p, k), err.msg);
		tir_code *c = tir_codegen(kp, &cpu, &err);
		ck_assert_msg(c, "%s: kernel %s: C: %s", what, tir_fusion_kernel_name(p, k), err.msg);
		tir_code_free(c);
		/* the kernel as a workload of its own: it parses, and its
		 * program (what tuning measures) is what runs below; a sampled
		 * candidate of it compiles for sm_90 */
		char *doc = tir_fusion_kernel_json(p, k);
		ck_assert(doc);
		tir_workload *kw = tir_workload_parse(doc, strlen(doc), NULL, &err);
		ck_assert_msg(kw, "%s: kernel %s: its document %s: %s", what,
			      tir_fusion_kernel_name(p, k), doc, err.msg);
		free(doc);
		tir_program_free(kp);
		kp = tir_program_build(kw, &err);
		ck_assert_msg(kp, "%s: %s", what, err.msg);
		sm90_candidate(what, kw, &sm90);
		double *kparams[256];
		for (int i = 0; i < kp->nparams; i++) {
			const tir_buffer *b = kp->bufs[i];
			if (b->role == BUF_INPUT) {
				named *x = find(vals, nv, b->name);
				ck_assert_msg(x, "%s: kernel %s reads %s, which nothing made", what,
					      tir_fusion_kernel_name(p, k), b->name);
				ck_assert_int_eq(x->n, buf_elems(b));
				kparams[i] = x->v;
			} else {
				kparams[i] = calloc((size_t)buf_elems(b), sizeof(double));
				ck_assert_msg(!find(vals, nv, b->name), "%s: %s written twice", what, b->name);
				ck_assert(nv < 256);
				vals[nv++] = (named){ strdup(b->name), kparams[i], buf_elems(b) };
			}
		}
		ck_assert_msg(interp_run(kp, kparams, NULL, &err) == 0, "%s: kernel %s: %s", what,
			      tir_fusion_kernel_name(p, k), err.msg);
		tir_program_free(kp);
		tir_workload_free(kw);
	}
	for (int i = 0; i < whole->nparams; i++) {
		const tir_buffer *b = whole->bufs[i];
		if (b->role != BUF_OUTPUT)
			continue;
		named *x = find(vals, nv, b->name);
		ck_assert_msg(x, "%s: no kernel wrote the output %s", what, b->name);
		double worst = 0;
		for (int64_t e = 0; e < x->n; e++) {
			double d = fabs(x->v[e] - params[i][e]) / (1e-6 + fabs(params[i][e]));
			if (d > worst)
				worst = d;
		}
		ck_assert_msg(worst < 1e-9, "%s: output %s differs by %g (relative)", what, b->name,
			      worst);
	}
	for (int i = 0; i < nv; i++) {
		bool param = false;
		for (int j = 0; j < whole->nparams; j++)
			param |= vals[i].v == params[j];
		if (!param)
			free(vals[i].v);
		free(vals[i].name);
	}
	for (int i = 0; i < whole->nparams; i++)
		free(params[i]);
	tir_program_free(whole);
}

/* ---- the seed's example ---------------------------------------------------------------- */

START_TEST(seed10_inductor)
{
	tir_workload *w = parse_file("examples/graphs/seed10.json");
	tir_fusion_plan *p = plan(w, TIR_FUSE_INDUCTOR);
	ck_assert_int_eq(tir_fusion_plan_kernels(p), 1);
	ck_assert_str_eq(tir_fusion_kernel_name(p, 0), "fused_add_mean_mul_relu_sub");
	ck_assert_int_eq(p->read_bytes, 4194304 + 3 * 4096);
	ck_assert_int_eq(p->write_bytes, 4194304);
	for (int i = 0; i < 10; i++)
		ck_assert(p->k[0].nodes[i]);
	char *j = tir_fusion_plan_json(p);
	ck_assert_msg(strstr(j, "\"nodes\":[\"t0\",\"t\",\"a\",\"p\",\"q\",\"s\",\"m\",\"d\",\"e\",\"y\"]"),
		      "%s", j);
	free(j);
	kernels_compute_graph("seed10 inductor", w, p);
	tir_fusion_plan_free(p);
	tir_workload_free(w);
}
END_TEST

START_TEST(seed10_eager)
{
	tir_workload *w = parse_file("examples/graphs/seed10.json");
	tir_fusion_plan *p = plan(w, TIR_FUSE_EAGER);
	ck_assert_int_eq(tir_fusion_plan_kernels(p), 10);
	ck_assert_int_eq(p->read_bytes, 44 * 1048576 + 4 * 4096);
	ck_assert_int_eq(p->write_bytes, 36 * 1048576 + 4096);
	kernels_compute_graph("seed10 eager", w, p);
	tir_fusion_plan_free(p);
	tir_workload_free(w);
}
END_TEST

/* ---- can_fuse's refusals ------------------------------------------------------------- */

static void refused(const char *json, const char *a, const char *b, const char *reason)
{
	tir_workload *w = parse(json);
	char why[512] = "";
	tir_error err = { "" };
	int rc = fz_inductor_why(w, a, b, why, sizeof why, &err);
	ck_assert_msg(rc == 0, "%s + %s: rc %d (%s) instead of refused for \"%s\"", a, b, rc,
		      rc < 0 ? err.msg : "fusable", reason);
	ck_assert_msg(strstr(why, reason), "%s + %s: \"%s\", not \"%s\"", a, b, why, reason);
	tir_workload_free(w);
}

static void fusable(const char *json, const char *a, const char *b)
{
	tir_workload *w = parse(json);
	char why[512] = "";
	tir_error err = { "" };
	int rc = fz_inductor_why(w, a, b, why, sizeof why, &err);
	ck_assert_msg(rc == 1, "%s + %s: %s", a, b, rc < 0 ? err.msg : why);
	tir_workload_free(w);
}

#define G(inputs, nodes, outputs) "{\"op\":\"graph\",\"inputs\":{" inputs "},\"nodes\":[" nodes \
	"],\"outputs\":[" outputs "]}"
#define IN(n, shape) "\"" n "\":{\"shape\":" shape "}"
#define N(n, op, args) "{\"name\":\"" n "\",\"op\":\"" op "\",\"args\":[" args "]}"
#define MM(n, args) "{\"name\":\"" n "\",\"op\":\"matmul\",\"args\":[" args "],\"M\":64,\"N\":64,\"K\":64}"
#define R(n, op, arg, dim) "{\"name\":\"" n "\",\"op\":\"" op "\",\"args\":[\"" arg "\"],\"dim\":" \
	dim ",\"keepdim\":true}"

START_TEST(can_fuse_refusals)
{
	const char *seed = G(IN("x", "[64,32]"), R("m", "mean", "x", "1") ","
			     N("d", "sub", "\"x\",\"m\""), "\"d\"");
	fusable(seed, "m", "d");
	refused(seed, "m", "m", "itself");
	refused(seed, "d", "m", "must go before");
	/* a cycle through a node outside the pair */
	refused(G(IN("x", "[64,32]"), R("mx", "amax", "x", "1") "," N("sh", "sub", "\"x\",\"mx\"") ","
		  R("sm", "sum", "sh", "1") "," N("y", "div", "\"sh\",\"sm\""), "\"y\""),
		"mx", "y", "cycle through sm");
	/* buf0[i, j] against buf0[j, i]; a shifted read (buf0[x + 1], a slice)
	 * has fewer elements, so the loop sizes refuse it first */
	refused(G(IN("x", "[8,8]"), N("a", "mul", "\"x\",2") ","
		  "{\"name\":\"b\",\"op\":\"permute\",\"args\":[\"a\"],\"dims\":[1,0]}"
		  "," N("c", "add", "\"b\",1"), "\"a\",\"c\""),
		"a", "c", "at other indices");
	refused(G(IN("x", "[64]"), N("a", "mul", "\"x\",2") ","
		  "{\"name\":\"b\",\"op\":\"slice\",\"args\":[\"a\"],\"dim\":0,\"start\":1,\"end\":64}"
		  "," N("c", "add", "\"b\",1"), "\"a\",\"c\""),
		"a", "c", "different loop sizes");
	/* loop sizes */
	refused(G(IN("x", "[64,32]"), R("r1", "sum", "x", "1") "," R("r2", "sum", "x", "0"),
		  "\"r1\",\"r2\""), "r1", "r2", "different loop sizes");
	refused(G(IN("x", "[4,6]"), R("m", "sum", "x", "0") "," N("y", "add", "\"x\",\"m\""), "\"y\""),
		"m", "y", "do not split");
	/* shared data */
	refused(G(IN("x", "[64,64]") "," IN("z", "[64,64]"), N("a", "relu", "\"x\"") ","
		  N("b", "relu", "\"z\""), "\"a\",\"b\""), "a", "b", "share 0 bytes");
	/* templates */
	const char *mm2 = G(IN("a", "[64,64]") "," IN("b", "[64,64]") "," IN("c", "[64,64]"),
			    MM("m1", "\"a\",\"b\"") "," MM("m2", "\"m1\",\"c\""),
			    "\"m2\"");
	refused(mm2, "m1", "m2", "two templates");
	const char *epi = G(IN("a", "[64,64]") "," IN("b", "[64,64]") "," IN("bias", "[64]"),
			    MM("mm", "\"a\",\"b\"") "," N("t", "add", "\"mm\",\"bias\"") ","
			    N("y", "relu", "\"t\""), "\"y\"");
	fusable(epi, "mm", "y");
	refused(G(IN("a", "[64,64]") "," IN("b", "[64,64]"), MM("mm", "\"a\",\"b\"") ","
		  "{\"name\":\"t\",\"op\":\"permute\",\"args\":[\"mm\"],\"dims\":[1,0]}" ","
		  N("y", "add", "\"t\",1"), "\"y\""), "mm", "y", "at other indices");
	refused(G(IN("a", "[64,64]") "," IN("b", "[64,64]"), MM("mm", "\"a\",\"b\"") ","
		  R("s", "sum", "mm", "1"), "\"s\""), "mm", "s", "neither an epilogue nor");
	refused(G(IN("a", "[64,64]") "," IN("b", "[64,64]"), N("p", "relu", "\"a\"") ","
		  MM("mm", "\"p\",\"b\""), "\"p\",\"mm\""), "p", "mm", "prologue");
}
END_TEST

/* more than 64 nodes in one kernel: a chain of 70 outputs */
START_TEST(max_fusion_size)
{
	char json[16384];
	int n = snprintf(json, sizeof json, "{\"op\":\"graph\",\"inputs\":{\"x\":{\"shape\":[32]}},"
			 "\"nodes\":[");
	for (int i = 0; i < 70; i++)
		n += snprintf(json + n, sizeof json - (size_t)n,
			      "%s{\"name\":\"o%d\",\"op\":\"add\",\"args\":[\"%s%d\",1]}",
			      i ? "," : "", i, i ? "o" : "x", i ? i - 1 : 0);
	/* o0 reads "x0": fix to x */
	char *x0 = strstr(json, "\"x0\"");
	memmove(x0 + 2, x0 + 3, strlen(x0 + 3) + 1);
	n = (int)strlen(json);
	n += snprintf(json + n, sizeof json - (size_t)n, "],\"outputs\":[");
	for (int i = 0; i < 70; i++)
		n += snprintf(json + n, sizeof json - (size_t)n, "%s\"o%d\"", i ? "," : "", i);
	snprintf(json + n, sizeof json - (size_t)n, "]}");
	tir_workload *w = parse(json);
	tir_fusion_plan *p = plan(w, TIR_FUSE_INDUCTOR);
	ck_assert_int_eq(tir_fusion_plan_kernels(p), 2);
	bool said = false;
	for (int i = 0; i < p->nrejected; i++)
		said |= strstr(p->rej[i].reason, "more than 64") != NULL;
	ck_assert_msg(said, "no refusal names the 64-node limit");
	kernels_compute_graph("chain of 70", w, p);
	tir_fusion_plan_free(p);
	tir_workload_free(w);
}
END_TEST

/* Plans of every example graph and of graphs with views, broadcasting and
 * a heavy operator: their kernels compute the graph, in both modes. */
static const char *const graphs[] = {
	G(IN("x", "[16,24]") "," IN("w", "[24]"), R("mu", "mean", "x", "1") ","
	  N("c", "sub", "\"x\",\"mu\"") "," N("c2", "mul", "\"c\",\"c\"") "," R("v", "mean", "c2", "1") ","
	  N("r", "rsqrt", "\"v\"") "," N("n", "mul", "\"c\",\"r\"") "," N("y", "mul", "\"n\",\"w\""),
	  "\"y\",\"mu\""),
	G(IN("x", "[8,6]"), "{\"name\":\"t\",\"op\":\"permute\",\"args\":[\"x\"],\"dims\":[1,0]}" ","
	  N("e", "exp", "\"t\"") "," R("s", "sum", "e", "1") "," N("y", "div", "\"e\",\"s\"") ","
	  "{\"name\":\"z\",\"op\":\"reshape\",\"args\":[\"y\"],\"shape\":[48]}", "\"z\""),
	G(IN("a", "[64,64]") "," IN("b", "[64,64]") "," IN("bias", "[64]"),
	  MM("mm", "\"a\",\"b\"") "," N("t", "add", "\"mm\",\"bias\"") "," N("g", "gelu", "\"t\"") ","
	  R("s", "amax", "g", "1") "," N("y", "sub", "\"g\",\"s\""), "\"y\""),
};

START_TEST(plans_compute_the_graph)
{
	const char *files[] = { "examples/graphs/seed10.json", "examples/graphs/softmax.json",
				"examples/graphs/layernorm.json" };
	for (int m = 0; m < 2; m++) {
		tir_fuse_mode mode = m ? TIR_FUSE_EAGER : TIR_FUSE_INDUCTOR;
		for (size_t i = 0; i < sizeof graphs / sizeof *graphs; i++) {
			tir_workload *w = parse(graphs[i]);
			tir_fusion_plan *p = plan(w, mode);
			char what[64];
			snprintf(what, sizeof what, "graph %zu %s", i, tir_fuse_mode_name(mode));
			kernels_compute_graph(what, w, p);
			tir_fusion_plan_free(p);
			tir_workload_free(w);
		}
		/* the examples at their shapes are large for the interpreter: the
		 * seed example only, and the others' plans are built and printed */
		for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
			tir_workload *w = parse_file(files[i]);
			tir_fusion_plan *p = plan(w, mode);
			if (i == 0)
				kernels_compute_graph(files[i], w, p);
			char *t = tir_fusion_plan_text(p);
			ck_assert(strstr(t, "kernel"));
			free(t);
			tir_fusion_plan_free(p);
			tir_workload_free(w);
		}
	}
	/* the layernorm-like graph: Inductor makes one kernel of it */
	tir_workload *w = parse(graphs[0]);
	tir_fusion_plan *p = plan(w, TIR_FUSE_INDUCTOR);
	ck_assert_int_eq(tir_fusion_plan_kernels(p), 1);
	tir_fusion_plan_free(p);
	tir_workload_free(w);
}
END_TEST

/* FusionScore's order on pairs */
START_TEST(score_order)
{
	fz_score plain = { 2, 0, 4096, 0, -1 }, epi = { 1, 1, 1 << 20, 0, -1 };
	ck_assert(fz_score_lt(&epi, &plain));         /* template first, whatever the bytes */
	fz_score same = { 2, 1, 1000, 0, -1 }, other = { 2, 0, 20000, 0, -1 };
	ck_assert(fz_score_lt(&same, &other));        /* 20x the bytes: memory decides */
	ck_assert(!fz_score_lt(&other, &same));
	fz_score other15 = { 2, 0, 15000, 0, -1 };
	ck_assert(fz_score_lt(&other15, &same));      /* 15x: node type before memory */
	fz_score near = { 2, 1, 1000, 0, -1 }, far = { 2, 1, 1000, 0, -9 };
	ck_assert(fz_score_lt(&far, &near));          /* then proximity */
	fz_score ov = { 2, 1, 1000, 64, -9 };
	ck_assert(fz_score_lt(&near, &ov));           /* overlap before proximity */
	fz_score zero = { 2, 0, 0, 0, -1 }, small = { 2, 0, 10, 0, -5 };
	ck_assert(fz_score_lt(&zero, &small));        /* 0 against anything: memory decides */
}
END_TEST

/* Near ties: a = exp(x) (an output) fuses with b = sum(a, dim 1) or with
 * d = sum(a), scores equal but for proximity; the greedy pass takes (a, b)
 * and then cannot add d (other loop sizes).  The one alternative takes
 * (a, d) instead and keeps b apart, with the refusal recorded; its kernels
 * compute the graph.  seed10's plan, one kernel without a tie, has none.
 * fz_score_near: template and node type equal, memory within 1.25x. */
START_TEST(alternatives)
{
	tir_workload *w = parse("{\"op\":\"graph\",\"inputs\":{\"x\":{\"shape\":[64,32]}},"
				"\"nodes\":[{\"name\":\"a\",\"op\":\"exp\",\"args\":[\"x\"]},"
				"{\"name\":\"b\",\"op\":\"sum\",\"args\":[\"a\"],\"dim\":1},"
				"{\"name\":\"d\",\"op\":\"sum\",\"args\":[\"a\"]}],"
				"\"outputs\":[\"a\",\"b\",\"d\"]}");
	tir_error err = { "" };
	tir_fusion_plan *p = tir_fusion_plan_new(w, TIR_FUSE_INDUCTOR, &err), *alt[4];
	ck_assert_msg(p, "%s", err.msg);
	char *pj = tir_fusion_plan_json(p);
	ck_assert_msg(strstr(pj, "\"nodes\":[\"a\",\"b\"]"), "%s", pj);
	int n = tir_fusion_plan_alternatives(w, alt, 4, &err);
	ck_assert_msg(n == 1, "%d alternatives: %s", n, err.msg);
	char *aj = tir_fusion_plan_json(alt[0]);
	ck_assert_msg(strstr(aj, "\"nodes\":[\"a\",\"d\"]") && strstr(aj, "\"nodes\":[\"b\"]") &&
		      strstr(aj, "near tie"), "%s", aj);
	kernels_compute_graph("the alternative", w, alt[0]);
	free(pj);
	free(aj);
	tir_fusion_plan_free(alt[0]);
	tir_fusion_plan_free(p);
	tir_workload_free(w);
	w = parse_file("examples/graphs/seed10.json");
	ck_assert_int_eq(tir_fusion_plan_alternatives(w, alt, 4, &err), 0);
	tir_workload_free(w);
	fz_score x = { 2, 0, 1000, 0, -1 }, y = { 2, 0, 1250, 0, -7 }, z = { 2, 0, 1251, 0, -1 },
		 e = { 1, 0, 1000, 0, -1 };
	ck_assert(fz_score_near(&x, &y) && fz_score_near(&y, &x));
	ck_assert(!fz_score_near(&x, &z) && !fz_score_near(&x, &e));
}
END_TEST

/* A kernel's inputs are random, so its reference may be NaN where another
 * kernel's value would never be negative (TVM's layernorm: rsqrt(var + eps)
 * of a random var): a candidate must then match the NaN; the unscheduled
 * kernel runs and checks on the CPU. */
START_TEST(nan_reference)
{
	double ref[3] = { NAN, 2.0, INFINITY }, good[3] = { NAN, 2.0, INFINITY };
	double finite[3] = { 0.0, 2.0, INFINITY }, nan2[3] = { NAN, NAN, INFINITY };
	double minf[3] = { NAN, 2.0, -INFINITY };
	ck_assert(tir_measure_compare(ref, good, 3) == 0);
	ck_assert(isinf(tir_measure_compare(ref, finite, 3)));
	ck_assert(isinf(tir_measure_compare(ref, nan2, 3)));
	ck_assert(isinf(tir_measure_compare(ref, minf, 3)));
	tir_workload *w = parse(G(IN("v", "[64,16]") "," IN("c", "[64,16]"),
				  N("e", "add", "\"v\",0.00001") "," N("r", "rsqrt", "\"e\"") ","
				  N("y", "mul", "\"c\",\"r\""), "\"y\""));
	tir_error err = { "" };
	tir_target cpu;
	ck_assert(tir_target_parse("cpu", &cpu, &err) == 0);
	tir_program *p = tir_program_build(w, &err);
	tir_code *c = tir_codegen(p, &cpu, &err);
	ck_assert_msg(c, "%s", err.msg);
	tir_measure_opts mo = { .seed = 1, .timeout_s = 60 };
	tir_measure_result res;
	int rc = tir_measure(tir_runner_for(&cpu), w, c, &cpu, &mo, &res);
	ck_assert_msg(rc == 0 && res.status == TIR_MEASURE_OK, "status %d: %s", res.status, res.msg);
	tir_measure_result_clear(&res);
	tir_code_free(c);
	tir_program_free(p);
	tir_workload_free(w);
}
END_TEST

START_TEST(bad_plans)
{
	tir_error err = { "" };
	const char *mm = "{\"op\":\"matmul\",\"M\":8,\"N\":8,\"K\":8}";
	tir_workload *w = parse(mm);
	ck_assert(tir_fusion_plan_new(w, TIR_FUSE_INDUCTOR, &err) == NULL);
	ck_assert_msg(strstr(err.msg, "not a graph workload"), "%s", err.msg);
	tir_workload_free(w);
	tir_fuse_mode m;
	ck_assert(tir_fuse_mode_parse("greedy", &m, &err) < 0);
	ck_assert_msg(strstr(err.msg, "inductor, tvm, eager"), "%s", err.msg);
	ck_assert(tir_fuse_mode_parse("tvm", &m, &err) == 0 && m == TIR_FUSE_TVM);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fusion");
	TCase *tc = tcase_create("inductor");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, seed10_inductor);
	tcase_add_test(tc, seed10_eager);
	tcase_add_test(tc, can_fuse_refusals);
	tcase_add_test(tc, max_fusion_size);
	tcase_add_test(tc, plans_compute_the_graph);
	tcase_add_test(tc, score_order);
	tcase_add_test(tc, alternatives);
	tcase_add_test(tc, nan_reference);
	tcase_add_test(tc, bad_plans);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
