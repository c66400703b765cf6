/*
 * check_search.c — the evolutionary search (tuner/search/) and the local
 * measurement of a batch (tuner/measure/batch.c).
 *
 * Most tests run the search over a small sampled CPU sketch written here
 * (local_sketch: tiles drawn with sample_perfect_tile, a reduction split
 * drawn with sample_categorical), so they test the search, not the sketch
 * rules, and measure with fake, deterministic measure functions: no compiler
 * runs.  The end-to-end tests tune a small matmul and a small conv2d with
 * the real sketches and tir_measure_local, a few trials each.
 */
#include <math.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <check.h>
#include <cJSON.h>
#include "sched/sched.h"
#include "search/search.h"
#include "measure/measure.h"
#include "testutil.h"

/* ---- workloads and target ---------------------------------------------------- */

static const char *const mm_json = "{\"op\":\"matmul\",\"M\":64,\"N\":64,\"K\":64}";
static const char *const conv_json =
	"{\"op\":\"conv2d\",\"N\":1,\"C\":8,\"H\":16,\"W\":16,\"K\":16,\"R\":3,\"S\":3,"
	"\"pad\":1,\"layout\":\"NHWC\"}";

static tir_workload *load(const char *json)
{
	tir_error err;
	tir_workload *w = tir_workload_parse(json, strlen(json), NULL, &err);
	ck_assert_msg(w, "%s", err.msg);
	return w;
}

static tir_target cpu(void)
{
	tir_target t;
	tir_error err;
	ck_assert_msg(tir_target_parse("cpu", &t, &err) == 0, "%s", err.msg);
	return t;
}

/* ---- a local sketch: SSRSRS-like tiling with sampled tiles -------------------- */

#define TRY(x) do { if ((x) < 0) return -1; } while (0)

static int local_sketch(void *ctx, int id, tir_sched *s, tir_error *err)
{
	(void)ctx;
	const tir_program *p = tir_sched_program(s);
	if (program_find_block(p, "pad")) {
		int pad;
		TRY(pad = tir_get_block(s, "pad", err));
		TRY(tir_compute_inline(s, pad, err));
	}
	int b, loops[TIR_MAX_IO], n;
	TRY(b = tir_get_block(s, "compute", err));
	TRY(n = tir_get_loops(s, b, loops, TIR_MAX_IO, err));
	const tir_block *blk = program_find_block(tir_sched_program(s), "compute");
	tir_stmt *ls[TIR_MAX_IO];
	stmt_loops(blk->stmt, ls, TIR_MAX_IO);
	int outer[TIR_MAX_IO], inner[TIR_MAX_IO], ro[TIR_MAX_IO], ri[TIR_MAX_IO];
	int no = 0, nr = 0;
	for (int i = 0; i < n; i++) {
		bool red = false;
		for (int k = 0; k < blk->niters; k++)
			if (blk->iters[k].kind == ITER_REDUCE &&
			    expr_uses_var(blk->iters[k].binding, ls[i]->var))
				red = true;
		int v[2], o[2];
		if (red && nr == 0 && id == 0) {
			/* the first reduction loop: a categorical split */
			static const int64_t cand[] = { 1, 2, 4, 8 };
			TRY(v[1] = tir_sample_categorical(s, 4, cand, NULL, err));
			tir_int f[2] = { TIR_LIT(0), TIR_RV(v[1]) };
			TRY(tir_split(s, loops[i], 2, f, o, err));
		} else {
			TRY(tir_sample_perfect_tile(s, loops[i], 2, red ? 0 : 16, v, err));
			tir_int f[2] = { TIR_RV(v[0]), TIR_RV(v[1]) };
			TRY(tir_split(s, loops[i], 2, f, o, err));
		}
		if (red) {
			ro[nr] = o[0];
			ri[nr++] = o[1];
		} else {
			outer[no] = o[0];
			inner[no++] = o[1];
		}
	}
	int order[4 * TIR_MAX_IO], k = 0;
	for (int i = 0; i < no; i++) order[k++] = outer[i];
	for (int i = 0; i < nr; i++) order[k++] = ro[i];
	for (int i = 0; i < nr; i++) order[k++] = ri[i];
	for (int i = 0; i < no; i++) order[k++] = inner[i];
	TRY(tir_reorder(s, k, order, err));
	int par = outer[0];
	if (no >= 2)
		TRY(par = tir_fuse(s, 2, outer, err));
	TRY(tir_parallel(s, par, err));
	TRY(tir_vectorize(s, inner[no - 1], err));
	return 0;
}

static search_space local_space(void)
{
	search_space sp = { .nsketches = 2, .apply = local_sketch };
	snprintf(sp.names[0], sizeof sp.names[0], "local-categorical");
	snprintf(sp.names[1], sizeof sp.names[1], "local-tiles");
	return sp;
}

/* ---- fake measurements ------------------------------------------------------------ */

static uint64_t trace_u64(const char *trace)
{
	unsigned char h[32];
	tir_trace_hash(trace, h);
	uint64_t x;
	memcpy(&x, h, sizeof x);
	return x;
}

/* What the fake measure functions saw, in order. */
typedef struct log_ {
	int n;
	char *trace[512];
	int status[512];
	double us[512];
	/* planted failures: every `bad`-th trace (by hash) fails with status
	 * bad_status and claims a tiny latency, so it would win if it counted */
	int bad;
	int bad_status;
	/* check every trace asked for replays and validates */
	const tir_workload *w;
	const tir_target *t;
	atomic_int invalid_seen;   /* measure functions may run at once (pipeline) */
	atomic_int cancel;
	int cancel_after_round;
	int rounds[64];            /* the rounds on_progress reported, in order */
	atomic_int nrounds;        /* read by a measure function (any order) */
} log_;

static void log_free(log_ *l)
{
	for (int i = 0; i < l->n; i++)
		free(l->trace[i]);
	l->n = 0;
}

static int fake_measure(void *ctx, const tir_workload *w, const tir_target *t, int n,
			const char *const *traces, tir_candidate *out)
{
	log_ *l = ctx;
	for (int i = 0; i < n; i++) {
		uint64_t h = trace_u64(traces[i]);
		tir_error e;
		tir_sched *s = sched_replay_valid(w, t, traces[i], &e);
		if (!s)
			l->invalid_seen++;
		tir_sched_free(s);
		if (l->bad && h % (uint64_t)l->bad == 0) {
			out[i].status = l->bad_status;
			out[i].latency_us = 0.001;
			out[i].msg = strdup("planted");
		} else {
			out[i].status = TIR_MEASURE_OK;
			out[i].latency_us = 10.0 + (double)(h % 1000);
			out[i].msg = NULL;
		}
		out[i].max_rel_error = 0;
	}
	return 0;
}

static void on_result(void *ctx, const tir_candidate *c)
{
	log_ *l = ctx;
	ck_assert_int_lt(l->n, 512);
	l->trace[l->n] = strdup(c->trace);
	l->status[l->n] = c->status;
	l->us[l->n] = c->latency_us;
	l->n++;
}

static void on_progress(void *ctx, const tir_tune_progress *p)
{
	log_ *l = ctx;
	ck_assert_int_le(p->trials_done, p->trials_total);
	if (l->nrounds < 64 && !p->drain)
		l->rounds[l->nrounds++] = p->round;
	if (l->cancel_after_round && p->round >= l->cancel_after_round)
		atomic_store(&l->cancel, 1);
}

static tir_tune_opts fake_opts(log_ *l, uint64_t seed, int trials)
{
	tir_tune_opts o = {
		.trials = trials, .batch = 8, .seed = seed, .population = 24,
		.measure = fake_measure, .measure_ctx = l,
		.on_result = on_result, .on_progress = on_progress, .cb_ctx = l,
		.cancel = &l->cancel,
	};
	return o;
}

static int fake_threads;    /* the search's threads in run_fake (0: a core each) */

static int run_fake(const char *json, uint64_t seed, int trials, log_ *l,
		    tir_tune_result *res, search_stats *st)
{
	tir_workload *w = load(json);
	tir_target t = cpu();
	search_space sp = local_space();
	l->w = w;
	l->t = &t;
	tir_tune_opts o = fake_opts(l, seed, trials);
	o.threads = fake_threads;
	tir_error err = { "" };
	int rc = search_run(w, &t, &o, &sp, res, st, &err);
	ck_assert_msg(rc == 0, "%s", err.msg);
	ck_assert_int_eq(l->invalid_seen, 0);
	tir_workload_free(w);
	return rc;
}

/* ---- determinism --------------------------------------------------------------------- */

START_TEST(test_deterministic)
{
	log_ a = { 0 }, b = { 0 }, c = { 0 };
	tir_tune_result ra, rb, rc;
	/* the same with one thread and with five: candidates are made in
	 * parallel but taken in order */
	fake_threads = 1;
	run_fake(mm_json, 7, 32, &a, &ra, NULL);
	fake_threads = 5;
	run_fake(mm_json, 7, 32, &b, &rb, NULL);
	fake_threads = 0;
	run_fake(mm_json, 8, 32, &c, &rc, NULL);
	ck_assert_int_eq(a.n, 32);
	ck_assert_int_eq(a.n, b.n);
	for (int i = 0; i < a.n; i++)
		ck_assert_msg(!strcmp(a.trace[i], b.trace[i]), "run 2 differs at trial %d", i);
	ck_assert_str_eq(ra.best_trace, rb.best_trace);
	ck_assert(ra.best_us == rb.best_us);
	int same = 0;
	for (int i = 0; i < a.n && i < c.n; i++)
		same += !strcmp(a.trace[i], c.trace[i]);
	ck_assert_msg(same < a.n, "another seed measured the same sequence");
	log_free(&a);
	log_free(&b);
	log_free(&c);
	tir_tune_result_clear(&ra);
	tir_tune_result_clear(&rb);
	tir_tune_result_clear(&rc);
}
END_TEST

START_TEST(test_no_repeats_and_budget)
{
	log_ l = { 0 };
	tir_tune_result r;
	search_stats st;
	run_fake(conv_json, 3, 21, &l, &r, &st);
	ck_assert_int_eq(l.n, 21);                 /* 8 + 8 + 5 */
	ck_assert_int_eq(r.trials, 21);
	ck_assert_int_eq(r.rounds, 3);
	for (int i = 0; i < l.n; i++)
		for (int j = 0; j < i; j++)
			ck_assert_msg(strcmp(l.trace[i], l.trace[j]), "trials %d and %d are the same", j, i);
	/* the best is the fastest measured */
	double best = INFINITY;
	for (int i = 0; i < l.n; i++)
		if (l.us[i] < best)
			best = l.us[i];
	ck_assert(r.best_us == best);
	ck_assert(st.mutants > 0);
	ck_assert(st.samples > 0);
	log_free(&l);
	tir_tune_result_clear(&r);
}
END_TEST

/* A sketch with a decision that changes nothing: the tiles of local_sketch,
 * then a categorical no instruction uses.  Traces that differ only there
 * make the same program, and the search measures a program once. */
static int idle_decision_sketch(void *ctx, int id, tir_sched *s, tir_error *err)
{
	(void)id;
	TRY(local_sketch(ctx, 1, s, err));
	static const int64_t cand[] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	TRY(tir_sample_categorical(s, 8, cand, NULL, err));
	return 0;
}

START_TEST(test_no_program_repeats)
{
	tir_workload *w = load(mm_json);
	tir_target t = cpu();
	search_space sp = { .nsketches = 1, .apply = idle_decision_sketch };
	snprintf(sp.names[0], sizeof sp.names[0], "idle-decision");
	log_ l = { 0 };
	l.w = w;
	l.t = &t;
	tir_tune_opts o = fake_opts(&l, 5, 40);
	tir_tune_result r;
	tir_error err = { "" };
	ck_assert_msg(search_run(w, &t, &o, &sp, &r, NULL, &err) == 0, "%s", err.msg);
	ck_assert_int_gt(l.n, 8);
	char **prog = calloc((size_t)l.n, sizeof *prog);
	for (int i = 0; i < l.n; i++) {
		tir_sched *sc = sched_replay_valid(w, &t, l.trace[i], &err);
		ck_assert_msg(sc, "%s", err.msg);
		prog[i] = tir_program_print(tir_sched_program(sc));
		tir_sched_free(sc);
		for (int j = 0; j < i; j++)
			ck_assert_msg(strcmp(prog[i], prog[j]), "trials %d and %d measure the same "
				      "program", j, i);
	}
	for (int i = 0; i < l.n; i++)
		free(prog[i]);
	free(prog);
	log_free(&l);
	tir_tune_result_clear(&r);
	tir_workload_free(w);
}
END_TEST

/* Two sketches of the same tiling, the first one marked by an annotation
 * that the model below scores low: a model sure of itself after a few
 * samples.  Under a model that started from nothing, and under one trained
 * before the search (on other workloads), the marked sketch must keep part
 * of every batch's exploring picks (SEARCH_SKETCH_SHARE), not only the
 * random share. */
static int marked_sketch(void *ctx, int id, tir_sched *s, tir_error *err)
{
	TRY(local_sketch(ctx, 1, s, err));
	if (id == 0) {
		int b;
		TRY(b = tir_get_block(s, "compute", err));
		TRY(tir_annotate(s, b, "sketch_mark", 1, err));
	}
	return 0;
}

static int mark_trained;       /* a model from nothing: it ranks after its first update */

static int mark_predict(void *self, const tir_workload *w, const tir_target *t, int n,
			const tir_program *const *progs, double *scores)
{
	(void)self, (void)w, (void)t;
	if (!mark_trained)
		return -1;
	for (int i = 0; i < n; i++) {
		char *text = tir_program_print(progs[i]);
		unsigned char h[32];
		tir_trace_hash(text, h);
		scores[i] = (strstr(text, "sketch_mark") ? 0 : 10) + h[0] / 256.0;
		free(text);
	}
	return 0;
}

static void mark_update(void *self, const tir_workload *w, const tir_target *t, int n,
			const tir_program *const *progs, const double *gflops)
{
	(void)self, (void)w, (void)t, (void)n, (void)progs, (void)gflops;
	mark_trained = 1;
}

/* The marked sketch's trials from trial `from` on, under the model above
 * starting from nothing (cold) or already trained, in batches of `batch`,
 * summed over the searches of seeds 1 to `seeds` (one seed's count swings
 * by several times: 1 to 18 of 56 seen). */
static int marked_from(bool cold, int batch, int from, int seeds)
{
	int marked = 0;
	for (uint64_t seed = 1; seed <= (uint64_t)seeds; seed++) {
		tir_workload *w = load(mm_json);
		tir_target t = cpu();
		search_space sp = { .nsketches = 2, .apply = marked_sketch };
		snprintf(sp.names[0], sizeof sp.names[0], "marked");
		snprintf(sp.names[1], sizeof sp.names[1], "plain");
		static const tir_cost_model model = { "sure", mark_predict, mark_update };
		log_ l = { 0 };
		l.w = w;
		l.t = &t;
		tir_tune_opts o = fake_opts(&l, seed, 64);
		o.batch = batch;
		o.model = &model;
		mark_trained = !cold;
		tir_tune_result r;
		tir_error err = { "" };
		ck_assert_msg(search_run(w, &t, &o, &sp, &r, NULL, &err) == 0, "%s", err.msg);
		ck_assert_int_ge(l.n, from + 32);   /* a plateau may end it early */
		for (int i = from; i < l.n; i++)
			marked += strstr(l.trace[i], "sketch_mark") != NULL;
		log_free(&l);
		tir_tune_result_clear(&r);
		tir_workload_free(w);
	}
	return marked;
}

START_TEST(test_every_sketch_explored)
{
	/* batches of 8: 1 random, 7 from the model, of which the exploring
	 * part (7 in the first two batches, 1 in the last) is half shared by
	 * the two sketches (equal chances here: the fake latencies do not
	 * depend on the sketch), whether the model started from nothing or
	 * was trained before: 7-18 marked ones in batches 2-8 per seed, 55 over
	 * seeds 1-4 from the model started from nothing; the random share
	 * alone would find about 2 per seed. */
	int cold = marked_from(true, 8, 8, 4), warm = marked_from(false, 8, 8, 4);
	ck_assert_msg(cold >= 32, "cold model: the marked sketch measured %d times in batches 2-8 "
		      "over four searches", cold);
	ck_assert_msg(warm >= 32, "trained model: the marked sketch measured %d times in batches "
		      "2-8 over four searches", warm);
}
END_TEST

/* A search of one batch (64 trials, batch 64) under the trained model: the
 * first batch shares its exploring picks evenly among the sketches (28 of
 * 56 from the model's share, half of them marked), where the random share
 * alone gives the marked sketch about 4-6 of 64 (25 over seeds 1-4 seen). */
START_TEST(test_first_batch_every_sketch)
{
	int marked = marked_from(false, 64, 0, 3);
	ck_assert_msg(marked >= 30, "one batch of 64: the marked sketch measured %d times over three "
		      "searches", marked);
}
END_TEST

START_TEST(test_cancel)
{
	log_ l = { .cancel_after_round = 1 };
	tir_tune_result r;
	run_fake(mm_json, 3, 64, &l, &r, NULL);
	ck_assert_int_eq(r.rounds, 1);
	ck_assert_int_eq(r.trials, 8);
	log_free(&l);
	tir_tune_result_clear(&r);
}
END_TEST

/* Every candidate slower than all before it: the first round's best is never
 * beaten, so every later round is flat. */
static int rising_measure(void *ctx, const tir_workload *w, const tir_target *t, int n,
			  const char *const *traces, tir_candidate *out)
{
	log_ *l = ctx;
	(void)w, (void)t, (void)traces;
	for (int i = 0; i < n; i++)
		out[i] = (tir_candidate){ .status = TIR_MEASURE_OK, .latency_us = 10.0 + l->n + i };
	return 0;
}

/* patience p (0: none); its rounds */
static int run_flat(int patience, tir_tune_result *r)
{
	log_ l = { 0 };
	tir_workload *w = load(mm_json);
	tir_target t = cpu();
	search_space sp = local_space();
	tir_tune_opts o = fake_opts(&l, 5, 96);
	o.measure = rising_measure;
	o.patience = patience;
	tir_error err = { "" };
	ck_assert_msg(search_run(w, &t, &o, &sp, r, NULL, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(l.n, r->trials);
	log_free(&l);
	tir_workload_free(w);
	return r->rounds;
}

START_TEST(test_patience)
{
	tir_tune_result r;
	/* the best in round 1, then p flat rounds: the search ends there */
	ck_assert_int_eq(run_flat(2, &r), 3);
	ck_assert_int_eq(r.trials, 24);
	ck_assert_int_eq(r.end, TIR_TUNE_END_PLATEAU);
	ck_assert(r.best_us == 10.0);
	tir_tune_result_clear(&r);
	ck_assert_int_eq(run_flat(6, &r), 7);
	ck_assert_int_eq(r.end, TIR_TUNE_END_PLATEAU);
	tir_tune_result_clear(&r);
	/* none (the default): the whole budget, 12 rounds of 8 */
	ck_assert_int_eq(run_flat(0, &r), 12);
	ck_assert_int_eq(r.trials, 96);
	ck_assert_int_eq(r.end, TIR_TUNE_END_BUDGET);
	tir_tune_result_clear(&r);
}
END_TEST

/* ---- mutation legality ------------------------------------------------------------------ */

/* The product of a perfect tile decision and its innermost factor. */
static void tile_facts(const cJSON *inst, int64_t *prod, int64_t *inner, int64_t *max_inner)
{
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(inst, "decision");
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(inst, "attrs");
	int n = cJSON_GetArraySize(d);
	*prod = 1;
	for (int i = 0; i < n; i++)
		*prod *= (int64_t)cJSON_GetArrayItem(d, i)->valuedouble;
	*inner = (int64_t)cJSON_GetArrayItem(d, n - 1)->valuedouble;
	*max_inner = (int64_t)cJSON_GetArrayItem(a, 1)->valuedouble;
}

/* Each mutant differs from its parent in exactly one decision; a perfect
 * tile keeps its product and its innermost bound. */
static void check_one_change(const char *parent, const char *child)
{
	cJSON *p = cJSON_Parse(parent), *c = cJSON_Parse(child);
	const cJSON *pi = cJSON_GetObjectItem(p, "insts"), *ci = cJSON_GetObjectItem(c, "insts");
	ck_assert_int_eq(cJSON_GetArraySize(pi), cJSON_GetArraySize(ci));
	int changed = 0;
	for (int i = 0; i < cJSON_GetArraySize(pi); i++) {
		const cJSON *a = cJSON_GetArrayItem(pi, i), *b = cJSON_GetArrayItem(ci, i);
		char *ta = cJSON_PrintUnformatted(a), *tb = cJSON_PrintUnformatted(b);
		if (strcmp(ta, tb)) {
			changed++;
			const char *op = cJSON_GetObjectItem(a, "op")->valuestring;
			if (!strcmp(op, "sample_perfect_tile")) {
				int64_t p1, i1, m1, p2, i2, m2;
				tile_facts(a, &p1, &i1, &m1);
				tile_facts(b, &p2, &i2, &m2);
				ck_assert_int_eq(p1, p2);
				ck_assert(m2 <= 0 || i2 <= m2);
			}
		}
		cJSON_free(ta);
		cJSON_free(tb);
	}
	ck_assert_int_eq(changed, 1);
	cJSON_Delete(p);
	cJSON_Delete(c);
}

/* Mutates each parent trace `per` times; every mutant either replays and
 * validates (kept) or is discarded — none is invalid yet kept. */
static void mutate_parents(const tir_workload *w, const tir_target *t, char **parents,
			   int n, int per, int *kept_out, int *proposals_out)
{
	uint64_t rng = 12345;
	int kept = 0, discarded = 0, proposals = 0;
	for (int k = 0; k < n; k++) {
		tir_error err;
		const char *parent = parents[k];
		ck_assert_int_gt(mutate_count(parent), 0);
		/* a sampled trace is canonical: replaying it prints it again */
		tir_sched *again = sched_replay_valid(w, t, parent, &err);
		ck_assert_msg(again, "%s", err.msg);
		char *t2 = tir_sched_trace(again);
		ck_assert_str_eq(parent, t2);
		free(t2);
		tir_sched_free(again);
		for (int m = 0; m < per; m++) {
			char *child = mutate_trace(parent, &rng);
			if (!child)
				continue;
			proposals++;
			check_one_change(parent, child);
			tir_sched *ms = sched_replay_valid(w, t, child, &err);
			if (!ms) {
				discarded++;
			} else {
				/* kept: it validates, and its canonical text replays */
				ck_assert_msg(tir_verify(tir_sched_program(ms), t, &err) == 0,
					      "kept mutant is invalid: %s", err.msg);
				char *canon = tir_sched_trace(ms);
				tir_sched *r2 = sched_replay_valid(w, t, canon, &err);
				ck_assert_msg(r2, "%s", err.msg);
				tir_sched_free(r2);
				free(canon);
				tir_sched_free(ms);
				kept++;
			}
			free(child);
		}
	}
	ck_assert_int_eq(kept + discarded, proposals);
	*kept_out = kept;
	*proposals_out = proposals;
}

/* Parents from the local sketch. */
static void mutation_legality(const char *json)
{
	tir_workload *w = load(json);
	tir_target t = cpu();
	char *parents[12];
	for (int k = 0; k < 12; k++) {
		tir_error err;
		tir_sched *s = tir_sched_new(w, tir_derive(1, 2, (uint64_t)k), &err);
		ck_assert(s);
		ck_assert_msg(local_sketch(NULL, k % 2, s, &err) == 0, "%s", err.msg);
		ck_assert_msg(tir_verify(tir_sched_program(s), &t, &err) == 0, "%s", err.msg);
		parents[k] = tir_sched_trace(s);
		tir_sched_free(s);
	}
	int kept, proposals;
	mutate_parents(w, &t, parents, 12, 10, &kept, &proposals);
	ck_assert_int_gt(kept, proposals / 2);
	for (int k = 0; k < 12; k++)
		free(parents[k]);
	tir_workload_free(w);
}

/* Parents from the real sketches (tir_sample_candidates), on CPU and CUDA
 * targets (validation only; nothing runs). */
static void mutation_legality_real(const char *json, const char *target)
{
	tir_workload *w = load(json);
	tir_target t;
	tir_error err;
	ck_assert_msg(tir_target_parse(target, &t, &err) == 0, "%s", err.msg);
	tir_sched *s[8];
	int n = tir_sample_candidates(w, &t, 8, 3, s, &err);
	ck_assert_msg(n > 0, "%s", err.msg);
	char *parents[8];
	for (int k = 0; k < n; k++) {
		parents[k] = tir_sched_trace(s[k]);
		tir_sched_free(s[k]);
	}
	int kept, proposals;
	mutate_parents(w, &t, parents, n, 8, &kept, &proposals);
	ck_assert_int_gt(proposals, 0);
	ck_assert_int_gt(kept, 0);
	for (int k = 0; k < n; k++)
		free(parents[k]);
	tir_workload_free(w);
}

START_TEST(test_mutation_legality_matmul) { mutation_legality(mm_json); }
END_TEST
START_TEST(test_mutation_legality_conv) { mutation_legality(conv_json); }
END_TEST

START_TEST(test_mutation_legality_sketches)
{
	mutation_legality_real(mm_json, "cpu");
	mutation_legality_real(conv_json, "cpu");
	mutation_legality_real(mm_json, "cuda:sm_90");
	mutation_legality_real(conv_json, "cuda:sm_90");
}
END_TEST

/* tir_tune over the real sketches with a fake measurement: deterministic, no
 * repeats, every measured trace valid. */
START_TEST(test_tune_deterministic)
{
	tir_workload *w = load(conv_json);
	tir_target t = cpu();
	log_ a = { .w = w, .t = &t }, b = { .w = w, .t = &t };
	tir_tune_result ra, rb;
	tir_error err;
	tir_tune_opts oa = fake_opts(&a, 99, 24), ob = fake_opts(&b, 99, 24);
	ck_assert_msg(tir_tune(w, &t, &oa, &ra, &err) == 0, "%s", err.msg);
	ck_assert_msg(tir_tune(w, &t, &ob, &rb, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(a.n, 24);
	ck_assert_int_eq(a.n, b.n);
	for (int i = 0; i < a.n; i++) {
		ck_assert_str_eq(a.trace[i], b.trace[i]);
		for (int j = 0; j < i; j++)
			ck_assert(strcmp(a.trace[i], a.trace[j]));
	}
	ck_assert_int_eq(a.invalid_seen, 0);
	log_free(&a);
	log_free(&b);
	tir_tune_result_clear(&ra);
	tir_tune_result_clear(&rb);
	tir_workload_free(w);
}
END_TEST

/* Within a search: every mutant is counted as kept, discarded or duplicate,
 * and every trace sent to measurement replays and validates (fake_measure
 * checks; run_fake asserts none was invalid). */
START_TEST(test_search_counts_mutants)
{
	log_ l = { 0 };
	tir_tune_result r;
	search_stats st;
	run_fake(conv_json, 11, 16, &l, &r, &st);
	ck_assert(st.mutants >= st.mutants_discarded + st.mutants_duplicate);
	ck_assert_int_eq(l.invalid_seen, 0);
	log_free(&l);
	tir_tune_result_clear(&r);
}
END_TEST

/* A mutant that cannot replay is discarded: a tile decision that breaks the
 * product, or a categorical index out of range, fails in the replay. */
START_TEST(test_broken_decision_discarded)
{
	tir_workload *w = load(mm_json);
	tir_target t = cpu();
	tir_error err;
	tir_sched *s = tir_sched_new(w, 5, &err);
	ck_assert(local_sketch(NULL, 0, s, &err) == 0);
	char *tr = tir_sched_trace(s);
	cJSON *root = cJSON_Parse(tr);
	cJSON *x;
	cJSON_ArrayForEach(x, cJSON_GetObjectItem(root, "insts")) {
		const char *op = cJSON_GetObjectItem(x, "op")->valuestring;
		if (!strcmp(op, "sample_categorical"))
			cJSON_ReplaceItemInArray(cJSON_GetObjectItem(x, "decision"), 0,
						 cJSON_CreateNumber(9));
	}
	char *bad = cJSON_PrintUnformatted(root);
	ck_assert_ptr_null(sched_replay_valid(w, &t, bad, &err));
	ck_assert(strstr(err.msg, "sample_categorical"));
	cJSON_free(bad);
	cJSON_Delete(root);
	free(tr);
	tir_sched_free(s);
	tir_workload_free(w);
}
END_TEST

/* ---- planted bad candidates ------------------------------------------------------------- */

static void planted(int status)
{
	log_ l = { .bad = 3, .bad_status = status };
	tir_tune_result r;
	run_fake(mm_json, 5, 24, &l, &r, NULL);
	ck_assert_int_eq(l.n, 24);                 /* the search went on */
	int nbad = 0;
	for (int i = 0; i < l.n; i++)
		nbad += l.status[i] != TIR_MEASURE_OK;
	ck_assert_int_gt(nbad, 0);
	ck_assert_int_eq(r.errors, nbad);
	ck_assert_ptr_nonnull(r.best_trace);
	ck_assert(r.best_us >= 10.0);              /* never a planted 0.001 */
	for (int i = 0; i < l.n; i++)
		if (!strcmp(l.trace[i], r.best_trace))
			ck_assert_int_eq(l.status[i], TIR_MEASURE_OK);
	log_free(&l);
	tir_tune_result_clear(&r);
}

START_TEST(test_planted_crash) { planted(TIR_MEASURE_CRASH); }
END_TEST
START_TEST(test_planted_timeout) { planted(TIR_MEASURE_TIMEOUT); }
END_TEST
START_TEST(test_planted_wrong) { planted(TIR_MEASURE_WRONG_RESULT); }
END_TEST

/* ---- prior records ----------------------------------------------------------------------- */

START_TEST(test_prior)
{
	log_ a = { 0 };
	tir_tune_result ra;
	run_fake(conv_json, 21, 16, &a, &ra, NULL);
	/* the records of run 1, pretty-printed (not canonical text) */
	tir_candidate prior[16];
	char *pretty[16];
	for (int i = 0; i < a.n; i++) {
		cJSON *x = cJSON_Parse(a.trace[i]);
		pretty[i] = cJSON_Print(x);
		cJSON_Delete(x);
		prior[i] = (tir_candidate){ .trace = pretty[i], .status = a.status[i],
					    .latency_us = a.us[i], .max_rel_error = 0 };
	}
	log_ b = { 0 };
	tir_tune_result rb;
	search_stats st;
	tir_workload *w = load(conv_json);
	tir_target t = cpu();
	search_space sp = local_space();
	b.w = w;
	b.t = &t;
	tir_tune_opts o = fake_opts(&b, 22, 16);
	o.nprior = a.n;
	o.prior = prior;
	tir_error err;
	ck_assert_msg(search_run(w, &t, &o, &sp, &rb, &st, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(b.n, 16);
	ck_assert_int_eq(st.prior_invalid, 0);
	ck_assert_int_gt(st.seeded, 0);            /* priors seeded the population */
	for (int i = 0; i < b.n; i++)
		for (int j = 0; j < a.n; j++)
			ck_assert_msg(strcmp(b.trace[i], a.trace[j]), "prior %d measured again", j);
	ck_assert(rb.best_us <= ra.best_us);       /* the best knows the priors */
	for (int i = 0; i < a.n; i++)
		cJSON_free(pretty[i]);
	log_free(&a);
	log_free(&b);
	tir_tune_result_clear(&ra);
	tir_tune_result_clear(&rb);
	tir_workload_free(w);
}
END_TEST

/* ---- pipelining: the next batch searched while this one is measured -------------------- */

static atomic_int pipe_measuring, pipe_overlaps, pipe_most, pipe_calls, pipe_depth;

static int pipe_measure(void *ctx, const tir_workload *w, const tir_target *t, int n,
			const char *const *traces, tir_candidate *out)
{
	int now = atomic_fetch_add(&pipe_measuring, 1) + 1;
	for (int most = atomic_load(&pipe_most); now > most;)
		if (atomic_compare_exchange_weak(&pipe_most, &most, now))
			break;
	int rc = fake_measure(ctx, w, t, n, traces, out);
	/* the first batch lasts until the search sent as many as it keeps in
	 * flight (at most 60 s: a slow machine's search takes longer than the
	 * measuring's 100 ms) */
	if (atomic_fetch_add(&pipe_calls, 1) == 0)
		for (int i = 0; i < 60000 && atomic_load(&pipe_measuring) < atomic_load(&pipe_depth); i++)
			usleep(1000);
	usleep(100 * 1000);
	atomic_fetch_sub(&pipe_measuring, 1);
	return rc;
}

/* A model whose scores are a hash of the program (deterministic), which
 * counts the scorings made while a batch is being measured. */
static int pipe_predict(void *self, const tir_workload *w, const tir_target *t, int n,
			const tir_program *const *progs, double *scores)
{
	(void)self, (void)w, (void)t;
	if (atomic_load(&pipe_measuring))
		atomic_fetch_add(&pipe_overlaps, 1);
	for (int i = 0; i < n; i++) {
		char *text = tir_program_print(progs[i]);
		scores[i] = (double)(trace_u64(text) % 1000);
		free(text);
	}
	return 0;
}

/* A pipelined search of the matmul: `trials` in batches of 8, measured by
 * `measure`, `depth` batches in flight. */
static void pipe_run(uint64_t seed, int trials, int depth, bool any_order,
		     tir_measure_batch_fn measure, log_ *l, tir_tune_result *r)
{
	static const tir_cost_model model = { "pipe", pipe_predict, NULL };
	tir_workload *w = load(mm_json);
	tir_target t = cpu();
	search_space sp = local_space();
	l->w = w;
	l->t = &t;
	tir_tune_opts o = fake_opts(l, seed, trials);
	o.measure = measure;
	o.model = &model;
	o.pipeline = depth;
	o.pipeline_any_order = any_order;
	tir_error err = { "" };
	ck_assert_msg(search_run(w, &t, &o, &sp, r, NULL, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(l->invalid_seen, 0);
	tir_workload_free(w);
}

/* pipeline = 1 and 2: the budget exactly (36 in batches of 8: the last of
 * 4), no candidate measured twice though each batch was picked while the
 * ones before it were still being measured, as many batches measured at
 * once as asked, and the same sequence again from the same seed */
static void pipe_check(int depth)
{
	log_ a = { 0 }, b = { 0 };
	tir_tune_result ra, rb;
	atomic_store(&pipe_overlaps, 0);
	atomic_store(&pipe_most, 0);
	atomic_store(&pipe_calls, 0);
	atomic_store(&pipe_depth, depth);
	pipe_run(5, 36, depth, false, pipe_measure, &a, &ra);
	ck_assert_int_eq(a.n, 36);
	for (int i = 0; i < a.n; i++)
		for (int j = 0; j < i; j++)
			ck_assert_msg(strcmp(a.trace[i], a.trace[j]), "trial %d repeats %d", i, j);
	ck_assert_msg(atomic_load(&pipe_overlaps) > 0, "no scoring during a measurement");
	ck_assert_int_eq(atomic_load(&pipe_most), depth);
	pipe_run(5, 36, depth, false, pipe_measure, &b, &rb);
	ck_assert_int_eq(b.n, a.n);
	for (int i = 0; i < a.n; i++)
		ck_assert_msg(!strcmp(a.trace[i], b.trace[i]), "run 2 differs at trial %d", i);
	ck_assert(ra.best_us == rb.best_us);
	log_free(&a);
	log_free(&b);
	tir_tune_result_clear(&ra);
	tir_tune_result_clear(&rb);
}

START_TEST(test_pipeline)
{
	pipe_check(1);
}
END_TEST

/* pipeline_any_order: batches recorded as they end.  The first batch lasts
 * until another was recorded (at most 60 s). */
static pthread_mutex_t sent_mu = PTHREAD_MUTEX_INITIALIZER;
static char *sent_first[64];       /* the first trace of each batch, as sent */
static int nsent;

static int slow_measure(void *ctx, const tir_workload *w, const tir_target *t, int n,
			const char *const *traces, tir_candidate *out)
{
	pthread_mutex_lock(&sent_mu);
	int k = nsent;
	if (nsent < 64)
		sent_first[nsent++] = strdup(traces[0]);
	pthread_mutex_unlock(&sent_mu);
	int rc = fake_measure(ctx, w, t, n, traces, out);
	log_ *l = ctx;
	for (int i = 0; k == 0 && i < 60000 && atomic_load(&l->nrounds) < 1; i++)
		usleep(1000);
	usleep(20 * 1000);
	return rc;
}

START_TEST(test_pipeline_any_order)
{
	log_ l = { 0 };
	tir_tune_result r;
	nsent = 0;
	pipe_run(5, 48, 2, true, slow_measure, &l, &r);
	/* the budget exactly, nothing measured twice */
	ck_assert_int_eq(l.n, 48);
	ck_assert_int_eq(nsent, 6);
	for (int i = 0; i < l.n; i++)
		for (int j = 0; j < i; j++)
			ck_assert_msg(strcmp(l.trace[i], l.trace[j]), "trial %d repeats %d", i, j);
	/* recorded as they ended: round 2 before round 1 */
	ck_assert_int_eq(l.nrounds, 6);
	ck_assert_msg(l.rounds[0] == 2 && l.rounds[1] == 1, "rounds recorded %d, %d, ...",
		      l.rounds[0], l.rounds[1]);
	bool overtaken = false;    /* and its traces first */
	for (int b = 0; b < nsent; b++)
		overtaken |= strcmp(l.trace[8 * b], sent_first[b]) != 0;
	ck_assert_msg(overtaken, "every batch's traces recorded in the order it was sent");
	for (int b = 0; b < nsent; b++)
		free(sent_first[b]);
	log_free(&l);
	tir_tune_result_clear(&r);
}
END_TEST

START_TEST(test_pipeline_two)
{
	pipe_check(2);
}
END_TEST

/* ---- the model learning beside the search (async_update) ------------------------------ */

/* A model that proves its update runs beside the search: its first update
 * waits (up to 10 s) until the search scores while it is still inside —
 * which the search, learning in line, could not do — and it counts the rows
 * it learnt and the thread it learnt them on. */
typedef struct side_model {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t caller;
	int rows, updates, predicts;
	bool in_update, overlapped, other_thread;
} side_model;

static int side_predict(void *self, const tir_workload *w, const tir_target *t, int n,
			const tir_program *const *progs, double *scores)
{
	side_model *m = self;
	(void)w, (void)t;
	pthread_mutex_lock(&m->mu);
	m->predicts++;
	if (m->in_update)
		m->overlapped = true;
	pthread_cond_broadcast(&m->cv);
	int rows = m->rows;
	pthread_mutex_unlock(&m->mu);
	if (!rows)
		return -1;
	for (int i = 0; i < n; i++) {
		char *text = tir_program_print(progs[i]);
		scores[i] = (double)(trace_u64(text) % 1000);
		free(text);
	}
	return 0;
}

static void side_update(void *self, const tir_workload *w, const tir_target *t, int n,
			const tir_program *const *progs, const double *gflops)
{
	side_model *m = self;
	(void)w, (void)t, (void)progs, (void)gflops;
	pthread_mutex_lock(&m->mu);
	m->other_thread = !pthread_equal(pthread_self(), m->caller);
	if (m->updates++ == 0) {
		m->in_update = true;
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 10;
		int before = m->predicts;
		while (m->predicts == before &&
		       pthread_cond_timedwait(&m->cv, &m->mu, &until) == 0)
			;
		m->in_update = false;
	}
	m->rows += n;
	pthread_mutex_unlock(&m->mu);
}

typedef struct side_log {
	log_ l;
	int max_lag, drains;
	double train_s;
} side_log;

static void side_progress(void *ctx, const tir_tune_progress *p)
{
	side_log *sl = ctx;
	if (p->drain) {
		sl->drains++;
		return;
	}
	ck_assert_int_le(p->trials_done, p->trials_total);
	ck_assert(p->elapsed_s >= p->measure_total_s && p->measure_total_s >= 0);
	if (p->model_lag > sl->max_lag)
		sl->max_lag = p->model_lag;
	sl->train_s += p->train_s;
}

static void side_result(void *ctx, const tir_candidate *c)
{
	on_result(&((side_log *)ctx)->l, c);
}

/* fake_measure taking 100 ms a batch: on a loaded machine the model's
 * thread may not run at all while an instant search goes through its four
 * rounds, and a training that ends after the last round's search is
 * reported only by the drain */
static int side_measure(void *ctx, const tir_workload *w, const tir_target *t, int n,
			const char *const *traces, tir_candidate *out)
{
	int rc = fake_measure(ctx, w, t, n, traces, out);
	usleep(100 * 1000);
	return rc;
}

START_TEST(test_async_update)
{
	static const tir_cost_model model = { "side", side_predict, side_update };
	side_model m = { .caller = pthread_self() };
	pthread_mutex_init(&m.mu, NULL);
	pthread_cond_init(&m.cv, NULL);
	tir_workload *w = load(mm_json);
	tir_target t = cpu();
	search_space sp = local_space();
	side_log sl = { 0 };
	sl.l.w = w;
	sl.l.t = &t;
	tir_tune_opts o = fake_opts(&sl.l, 3, 32);
	o.measure = side_measure;
	o.model = &model;
	o.model_self = &m;
	o.async_update = true;
	o.on_result = side_result;
	o.on_progress = side_progress;
	o.cb_ctx = &sl;
	tir_tune_result r;
	tir_error err = { "" };
	ck_assert_msg(search_run(w, &t, &o, &sp, &r, NULL, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(sl.l.n, 32);
	/* every measured row learnt before tir_tune returned, on another
	 * thread, and the search scored while the first update was running */
	ck_assert_int_eq(m.rows, 32);
	ck_assert(m.other_thread);
	ck_assert_msg(m.overlapped, "the search did not score during the model's update");
	ck_assert_int_ge(sl.max_lag, 1);
	ck_assert_int_eq(sl.drains, 1);
	ck_assert(sl.train_s > 0);
	ck_assert_ptr_nonnull(r.best_trace);
	log_free(&sl.l);
	tir_tune_result_clear(&r);
	tir_workload_free(w);
	pthread_mutex_destroy(&m.mu);
	pthread_cond_destroy(&m.cv);
}
END_TEST

/* ---- tir_measure_local on real code ------------------------------------------------------ */

/* Fast settings: a test machine is shared. */
static measure_local fast_local(void)
{
	measure_local l = { .opts = { .repeats = 3, .min_repeat_us = 100, .timeout_s = 20 } };
	return l;
}

static char *sample_trace(const tir_workload *w, uint64_t seed)
{
	tir_error err;
	tir_sched *s = tir_sched_new(w, seed, &err);
	ck_assert(local_sketch(NULL, 1, s, &err) == 0);
	char *tr = tir_sched_trace(s);
	tir_sched_free(s);
	return tr;
}

/* A builder process that dies costs the candidate it was building and no
 * other: the compiler (CC) kills its parent, the builder, the first two
 * times.  The first is the builder of the group of both candidates, whose
 * members are then built again one by one; the second, the builder of the
 * first of them, which alone is lost. */
START_TEST(test_measure_local_builder_dies)
{
	char dir[] = "/tmp/tir-builder-XXXXXX", cc[64], once[64], twice[64];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(cc, sizeof cc, "%s/cc", dir);
	snprintf(once, sizeof once, "%s/once", dir);
	snprintf(twice, sizeof twice, "%s/twice", dir);
	FILE *f = fopen(cc, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "#!/bin/sh\nif mkdir %s 2>/dev/null || mkdir %s 2>/dev/null; then\n"
		   "  kill -9 $PPID; sleep 5\nfi\nexec cc \"$@\"\n", once, twice);
	fclose(f);
	ck_assert_int_eq(chmod(cc, 0700), 0);
	const char *old = getenv("CC");
	char *saved = old ? strdup(old) : NULL;
	setenv("CC", cc, 1);

	tir_workload *w = load(mm_json);
	tir_target t = cpu();
	char *a = sample_trace(w, 1), *b = sample_trace(w, 2);
	const char *traces[2] = { a, b };
	tir_candidate out[2];
	measure_local l = fast_local();
	l.threads = 1;                 /* one builder: it takes the first and dies */
	ck_assert_int_eq(tir_measure_local(&l, w, &t, 2, traces, out), 0);
	int lost = out[0].status == TIR_MEASURE_BUILD_ERROR ? 0 : 1;
	ck_assert_int_eq(out[lost].status, TIR_MEASURE_BUILD_ERROR);
	ck_assert_msg(strstr(out[lost].msg, "builder process died"), "%s", out[lost].msg);
	ck_assert_msg(out[1 - lost].status == TIR_MEASURE_OK, "%s", out[1 - lost].msg);
	for (int i = 0; i < 2; i++)
		free((char *)out[i].msg);
	measure_local_clear(&l);

	if (saved)
		setenv("CC", saved, 1);
	else
		unsetenv("CC");
	free(saved);
	unlink(cc);
	rmdir(once);
	rmdir(twice);
	rmdir(dir);
	free(a);
	free(b);
	tir_workload_free(w);
}
END_TEST

/* The compile cache: a source built once is not compiled again, in the
 * batch (the same trace twice) or in a later batch of the same context; a
 * compiler of another name is another build.  A CC wrapper counts the
 * compiles. */
START_TEST(test_measure_local_compile_cache)
{
	char dir[] = "/tmp/tir-cc-XXXXXX", cc[64], cc2[64], count[64];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(cc, sizeof cc, "%s/cc", dir);
	snprintf(cc2, sizeof cc2, "%s/cc2", dir);
	snprintf(count, sizeof count, "%s/count", dir);
	for (int k = 0; k < 2; k++) {
		FILE *f = fopen(k ? cc2 : cc, "w");
		ck_assert_ptr_nonnull(f);
		fprintf(f, "#!/bin/sh\necho x >> %s\nexec cc \"$@\"\n", count);
		fclose(f);
		ck_assert_int_eq(chmod(k ? cc2 : cc, 0700), 0);
	}
	const char *old = getenv("CC");
	char *saved = old ? strdup(old) : NULL;
	setenv("CC", cc, 1);

	tir_workload *w = load(mm_json);
	tir_target t = cpu();
	char *a = sample_trace(w, 1), *b = sample_trace(w, 2);
	ck_assert_str_ne(a, b);
	const char *traces[3] = { a, b, a };
	tir_candidate out[3];
	measure_local l = fast_local();
	ck_assert_int_eq(tir_measure_local(&l, w, &t, 3, traces, out), 0);
	for (int i = 0; i < 3; i++) {
		ck_assert_msg(out[i].status == TIR_MEASURE_OK, "%d: %s", i, out[i].msg);
		free((char *)out[i].msg);
	}
	tir_measure_phases ph;
	tir_measure_cache_phases(&l, &ph);
	ck_assert_int_eq(ph.cache_hits, 1);
	ck_assert_int_eq(ph.built, 3);
	struct stat st;
	ck_assert_int_eq(stat(count, &st), 0);
	ck_assert_int_eq(st.st_size, 2 * 2);        /* two compiles: "x\n" each */

	/* a later batch: both from the cache, nothing compiled */
	ck_assert_int_eq(tir_measure_local(&l, w, &t, 2, traces, out), 0);
	for (int i = 0; i < 2; i++) {
		ck_assert_msg(out[i].status == TIR_MEASURE_OK, "%d: %s", i, out[i].msg);
		free((char *)out[i].msg);
	}
	tir_measure_cache_phases(&l, &ph);
	ck_assert_int_eq(ph.cache_hits, 2);
	ck_assert_int_eq(ph.cache_hits_total, 3);
	ck_assert_int_eq(stat(count, &st), 0);
	ck_assert_int_eq(st.st_size, 2 * 2);

	/* another compiler: another build */
	setenv("CC", cc2, 1);
	ck_assert_int_eq(tir_measure_local(&l, w, &t, 1, traces, out), 0);
	ck_assert_msg(out[0].status == TIR_MEASURE_OK, "%s", out[0].msg);
	free((char *)out[0].msg);
	tir_measure_cache_phases(&l, &ph);
	ck_assert_int_eq(ph.cache_hits, 0);
	ck_assert_int_eq(stat(count, &st), 0);
	ck_assert_int_eq(st.st_size, 3 * 2);
	measure_local_clear(&l);
	ck_assert_ptr_null(l.builds);

	if (saved)
		setenv("CC", saved, 1);
	else
		unsetenv("CC");
	free(saved);
	unlink(cc);
	unlink(cc2);
	unlink(count);
	rmdir(dir);
	free(a);
	free(b);
	tir_workload_free(w);
}
END_TEST

/* A CC wrapper script in dir: it appends a line to dir/count per compile
 * and one to dir/groups per compile of a group (a source of renamed entry
 * points), and with refuse_groups fails those. */
static void group_cc(const char *dir, bool refuse_groups, char *cc, size_t size)
{
	snprintf(cc, size, "%s/cc", dir);
	FILE *f = fopen(cc, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "#!/bin/sh\necho x >> %s/count\n"
		   "for a in \"$@\"; do case $a in *.c) if grep -q tir_entry_g \"$a\"; then\n"
		   "  echo x >> %s/groups\n%s"
		   "fi;; esac; done\nexec cc \"$@\"\n",
		dir, dir, refuse_groups ? "  echo 'no groups here' >&2; exit 1\n" : "");
	fclose(f);
	ck_assert_int_eq(chmod(cc, 0700), 0);
}

static off_t lines_of(const char *dir, const char *name)
{
	char p[128];
	struct stat st;
	snprintf(p, sizeof p, "%s/%s", dir, name);
	return stat(p, &st) == 0 ? st.st_size / 2 : 0;      /* "x\n" each */
}

/* The CPU builds a batch in groups: six candidates, two builders, two
 * compiles (two groups of three), each candidate measured from its own
 * entry point in the shared object, their figures those of the same
 * candidates built alone; a group the compiler refuses is built member by
 * member, and every candidate is still measured. */
START_TEST(test_measure_local_group_build)
{
	tir_workload *w = load(mm_json);
	tir_target t = cpu();
	enum { N = 6 };
	char *tr[N];
	const char *traces[N];
	for (int i = 0; i < N; i++)
		traces[i] = tr[i] = sample_trace(w, 11 + (uint64_t)i);
	const char *old = getenv("CC");
	char *saved = old ? strdup(old) : NULL;
	double us[2][N];
	for (int refuse = 0; refuse < 2; refuse++) {
		char dir[] = "/tmp/tir-group-XXXXXX", cc[64];
		ck_assert_ptr_nonnull(mkdtemp(dir));
		group_cc(dir, refuse, cc, sizeof cc);
		setenv("CC", cc, 1);
		tir_candidate out[N];
		measure_local l = fast_local();
		l.threads = 2;
		ck_assert_int_eq(tir_measure_local(&l, w, &t, N, traces, out), 0);
		int distinct = N;                  /* sample traces may repeat a source */
		tir_measure_phases ph;
		tir_measure_cache_phases(&l, &ph);
		distinct -= ph.cache_hits;
		for (int i = 0; i < N; i++) {
			ck_assert_msg(out[i].status == TIR_MEASURE_OK, "%d: %s", i, out[i].msg);
			ck_assert(out[i].latency_us > 0 && out[i].max_rel_error >= 0);
			us[refuse][i] = out[i].latency_us;
			free((char *)out[i].msg);
		}
		ck_assert_int_eq(ph.built, N);
		/* two groups: one compile each, and when refused one per member too */
		ck_assert_int_eq(lines_of(dir, "groups"), 2);
		ck_assert_int_eq(lines_of(dir, "count"), refuse ? 2 + distinct : 2);
		measure_local_clear(&l);
		char p[128];
		snprintf(p, sizeof p, "%s/count", dir);
		unlink(p);
		snprintf(p, sizeof p, "%s/groups", dir);
		unlink(p);
		unlink(cc);
		ck_assert_int_eq(rmdir(dir), 0);
	}
	/* the same candidates, built together or alone: times of one order
	 * (a shared test machine: within 5x) */
	for (int i = 0; i < N; i++)
		ck_assert_msg(us[0][i] < 5 * us[1][i] && us[1][i] < 5 * us[0][i],
			      "%d: %g us in a group, %g alone", i, us[0][i], us[1][i]);
	if (saved)
		setenv("CC", saved, 1);
	else
		unsetenv("CC");
	free(saved);
	for (int i = 0; i < N; i++)
		free(tr[i]);
	tir_workload_free(w);
}
END_TEST

START_TEST(test_measure_local_statuses)
{
	tir_workload *w = load(mm_json);
	tir_target t = cpu();
	char *good = sample_trace(w, 1), *good2 = sample_trace(w, 2);
	const char *traces[3] = { good, "{\"insts\":[{\"op\":\"get_block\",\"str\":\"nope\"}]}", good2 };
	tir_candidate out[3];
	measure_local l = fast_local();
	ck_assert_int_eq(tir_measure_local(&l, w, &t, 3, traces, out), 0);
	ck_assert_msg(out[0].status == TIR_MEASURE_OK, "%s", out[0].msg);
	ck_assert(out[0].latency_us > 0);
	ck_assert(out[0].max_rel_error >= 0 && out[0].max_rel_error <= 1e-5);
	ck_assert_int_eq(out[1].status, TIR_MEASURE_BUILD_ERROR);
	ck_assert(strstr(out[1].msg, "nope"));
	ck_assert_int_eq(out[2].status, TIR_MEASURE_OK);
	ck_assert_ptr_nonnull(l.ref);              /* kept for the next batch */
	for (int i = 0; i < 3; i++)
		free((char *)out[i].msg);

	/* a real wrong result: the cached reference is poisoned */
	for (int64_t i = 0; i < l.ref_n; i++)
		l.ref[i] += 1.0;
	ck_assert_int_eq(tir_measure_local(&l, w, &t, 1, traces, out), 0);
	ck_assert_int_eq(out[0].status, TIR_MEASURE_WRONG_RESULT);
	free((char *)out[0].msg);
	measure_local_clear(&l);

	/* a real timeout: no time at all (the CPU's batch child does not
	 * even finish setting up: run_error naming the timeout) */
	l = fast_local();
	l.opts.timeout_s = 1e-4;
	ck_assert_int_eq(tir_measure_local(&l, w, &t, 1, traces, out), 0);
	ck_assert(out[0].status == TIR_MEASURE_TIMEOUT || out[0].status == TIR_MEASURE_RUN_ERROR);
	ck_assert_msg(strstr(out[0].msg, "timed out after 0.0001 s"), "%s", out[0].msg);
	free((char *)out[0].msg);
	measure_local_clear(&l);
	free(good);
	free(good2);
	tir_workload_free(w);
}
END_TEST

/* A search whose measurements are real, with every third candidate made to
 * fail for real (a poisoned reference: wrong_result): the search goes on and
 * the best is a correct one. */
typedef struct real_ctx { measure_local good, bad; } real_ctx;

static int real_planted(void *ctx, const tir_workload *w, const tir_target *t, int n,
			const char *const *traces, tir_candidate *out)
{
	real_ctx *r = ctx;
	for (int i = 0; i < n; i++) {
		bool bad = trace_u64(traces[i]) % 3 == 0;
		tir_measure_local(bad ? &r->bad : &r->good, w, t, 1, &traces[i], &out[i]);
	}
	return 0;
}

START_TEST(test_real_planted)
{
	tir_workload *w = load(mm_json);
	tir_target t = cpu();
	real_ctx rc = { fast_local(), fast_local() };
	/* compute the bad context's reference now, then poison it */
	char *tr = sample_trace(w, 9);
	const char *one[1] = { tr };
	tir_candidate out;
	tir_measure_local(&rc.bad, w, &t, 1, one, &out);
	free((char *)out.msg);
	for (int64_t k = 0; k < rc.bad.ref_n; k++)
		rc.bad.ref[k] = -rc.bad.ref[k] + 1;
	free(tr);

	log_ l = { 0 };
	search_space sp = local_space();
	tir_tune_opts o = { .trials = 6, .batch = 3, .seed = 1, .population = 16,
			    .measure = real_planted, .measure_ctx = &rc,
			    .on_result = on_result, .cb_ctx = &l };
	tir_tune_result r;
	tir_error err;
	ck_assert_msg(search_run(w, &t, &o, &sp, &r, NULL, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(l.n, 6);
	int nwrong = 0;
	for (int i = 0; i < l.n; i++) {
		bool bad = trace_u64(l.trace[i]) % 3 == 0;
		ck_assert_int_eq(l.status[i], bad ? TIR_MEASURE_WRONG_RESULT : TIR_MEASURE_OK);
		nwrong += bad;
	}
	ck_assert_int_eq(r.errors, nwrong);
	if (nwrong < l.n) {
		ck_assert_ptr_nonnull(r.best_trace);
		ck_assert(trace_u64(r.best_trace) % 3 != 0);
	}
	measure_local_clear(&rc.good);
	measure_local_clear(&rc.bad);
	log_free(&l);
	tir_tune_result_clear(&r);
	tir_workload_free(w);
}
END_TEST

/* ---- end to end: tune on this CPU ------------------------------------------------------- */

static void end_to_end(const char *json)
{
	tir_workload *w = load(json);
	tir_target t = cpu();
	measure_local ml = fast_local();
	log_ l = { 0 };
	tir_tune_opts o = { .trials = 6, .batch = 3, .seed = 42, .population = 16,
			    .measure = tir_measure_local, .measure_ctx = &ml,
			    .on_result = on_result, .cb_ctx = &l };
	tir_tune_result r;
	tir_error err = { "" };
	ck_assert_msg(tir_tune(w, &t, &o, &r, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(l.n, 6);
	ck_assert_msg(r.best_trace, "no candidate was ok (first: %d)", l.status[0]);
	/* the best replays and validates, and beats or ties the first batch */
	tir_sched *s = sched_replay_valid(w, &t, r.best_trace, &err);
	ck_assert_msg(s, "%s", err.msg);
	tir_sched_free(s);
	double first = INFINITY;
	for (int i = 0; i < 3; i++)
		if (l.status[i] == TIR_MEASURE_OK && l.us[i] < first)
			first = l.us[i];
	ck_assert(r.best_us <= first);
	/* and it measures ok again */
	const char *one[1] = { r.best_trace };
	tir_candidate c;
	ck_assert_int_eq(tir_measure_local(&ml, w, &t, 1, one, &c), 0);
	ck_assert_msg(c.status == TIR_MEASURE_OK, "%s", c.msg);
	free((char *)c.msg);
	measure_local_clear(&ml);
	log_free(&l);
	tir_tune_result_clear(&r);
	tir_workload_free(w);
}

START_TEST(test_e2e_matmul) { end_to_end(mm_json); }
END_TEST
START_TEST(test_e2e_conv) { end_to_end(conv_json); }
END_TEST

static Suite *make_search_suite(void)
{
	Suite *s = suite_create("search");
	TCase *tc = tcase_create("search");
	tcase_add_test(tc, test_deterministic);
	tcase_add_test(tc, test_no_repeats_and_budget);
	tcase_add_test(tc, test_no_program_repeats);
	tcase_add_test(tc, test_cancel);
	tcase_add_test(tc, test_patience);
	tcase_add_test(tc, test_mutation_legality_matmul);
	tcase_add_test(tc, test_mutation_legality_conv);
	tcase_add_test(tc, test_mutation_legality_sketches);
	tcase_add_test(tc, test_tune_deterministic);
	tcase_add_test(tc, test_search_counts_mutants);
	tcase_add_test(tc, test_broken_decision_discarded);
	tcase_add_test(tc, test_planted_crash);
	tcase_add_test(tc, test_planted_timeout);
	tcase_add_test(tc, test_planted_wrong);
	tcase_add_test(tc, test_prior);
	tcase_add_test(tc, test_async_update);
	tcase_add_test(tc, test_pipeline);
	tcase_add_test(tc, test_pipeline_two);
	tcase_add_test(tc, test_pipeline_any_order);
	suite_add_tcase(s, tc);
	TCase *share = tcase_create("sketch share");
	tcase_set_timeout(share, 120);         /* several whole searches each */
	tcase_add_test(share, test_every_sketch_explored);
	tcase_add_test(share, test_first_batch_every_sketch);
	suite_add_tcase(s, share);
	TCase *real = tcase_create("measured");
	tcase_set_timeout(real, 300);          /* compiles and runs candidates */
	tcase_add_test(real, test_measure_local_statuses);
	tcase_add_test(real, test_measure_local_builder_dies);
	tcase_add_test(real, test_measure_local_compile_cache);
	tcase_add_test(real, test_measure_local_group_build);
	tcase_add_test(real, test_real_planted);
	tcase_add_test(real, test_e2e_matmul);
	tcase_add_test(real, test_e2e_conv);
	suite_add_tcase(s, real);
	return s;
}

int main(void)
{
	return tu_run_suite(make_search_suite());
}
