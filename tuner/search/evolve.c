/*
 * evolve.c — the evolutionary search (as MetaSchedule's, after Ansor's).
 *
 * State: the measured set (every trace with a result, prior records
 * included, keyed by the SHA-256 of its canonical text) and, within a round,
 * the pool of valid candidates the round has seen.  One round, in order
 * (search_round):
 *
 *   a. population: the best measured traces (SEARCH_MEASURED_SHARE of it),
 *      replayed, plus fresh samples of each sketch in turn, each applied to a
 *      fresh schedule whose seed derives from (seed, round, index);
 *   b. evolution, SEARCH_GENERATIONS times: score the generation with the
 *      cost model, pick parents by tournament on the scores, mutate one
 *      decision of each (mutate.c) and replay the copy on a fresh schedule; a
 *      copy that fails to replay or to validate is discarded and counted,
 *      one already in the pool is dropped, and so is one whose program
 *      (the printed scheduled program, hashed) is in the pool already or
 *      was measured: traces that differ only in decisions without effect
 *      on the program (13-20% of the measured candidates of the session-5
 *      H200 runs) would measure the same kernel again;
 *   c. the last generation is scored too, so every candidate in the pool has
 *      a score;
 *   d. the batch: the unmeasured candidates of the pool ranked by score;
 *      1 - SEARCH_EPSILON of the batch from the model: its best-scored in
 *      the proportion of the budget spent, the others at random from the
 *      best SEARCH_TOP_FRACTION — half of them shared among the sketches by
 *      each one's chance to beat the best so far (evenly before anything is
 *      measured; every candidate knows the sketch it was sampled from); the
 *      rest at random from all the others;
 *   e. measurement through opts->measure; every result is recorded (whatever
 *      its status), reported through on_result and fed back to the model as
 *      GFLOP/s (0 for a failure): in line, or with opts->async_update on
 *      the search's updater thread (below), the next round going on at
 *      once and scoring with the model's last finished training.
 *
 * The search stops at the trial budget, on cancel (after the round), or at a
 * plateau (search.h: SEARCH_STALE_ROUNDS, and opts->patience when given).
 *
 * Determinism: every random choice draws from one generator seeded by
 * opts->seed, or from schedules seeded by values derived from it; sorting
 * breaks ties by the candidates' hashes; nothing depends on time or threads.
 * Same seed and same measurements, same sequence of measured traces — with
 * the update in line; with async_update the scores depend on which
 * trainings had ended, a matter of time.
 *
 * Only a candidate measured with status ok and a positive, finite latency
 * can become the best; a crash, a timeout or a wrong result is recorded and
 * the search goes on.
 */
#define _GNU_SOURCE          /* setpriority on one thread: gettid */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include "search.h"
#include "../ir/ir.h"
#include "../sched/sched.h"
#include "../measure/measure.h"

/* ---- identities ---------------------------------------------------------------- */

/* A set of 32-byte hashes, open addressing; each maps to an int. */
typedef struct hashset {
	size_t cap, n;
	unsigned char (*key)[32];
	int *val;
	bool *used;
} hashset;

static size_t slot_of(const unsigned char *k, size_t cap)
{
	uint64_t h;
	memcpy(&h, k, sizeof h);
	return (size_t)(h & (cap - 1));
}

static int set_find(const hashset *s, const unsigned char *k)
{
	if (!s->cap)
		return -1;
	for (size_t i = slot_of(k, s->cap);; i = (i + 1) & (s->cap - 1)) {
		if (!s->used[i])
			return -1;
		if (!memcmp(s->key[i], k, 32))
			return s->val[i];
	}
}

static void set_put(hashset *s, const unsigned char *k, int v);

static void set_grow(hashset *s)
{
	hashset b = { s->cap ? 2 * s->cap : 256, 0, NULL, NULL, NULL };
	b.key = xcalloc(b.cap, 32);
	b.val = xcalloc(b.cap, sizeof(int));
	b.used = xcalloc(b.cap, sizeof(bool));
	for (size_t i = 0; i < s->cap; i++)
		if (s->used[i])
			set_put(&b, s->key[i], s->val[i]);
	free(s->key);
	free(s->val);
	free(s->used);
	*s = b;
}

static void set_put(hashset *s, const unsigned char *k, int v)
{
	if (2 * (s->n + 1) > s->cap)
		set_grow(s);
	size_t i = slot_of(k, s->cap);
	while (s->used[i] && memcmp(s->key[i], k, 32))
		i = (i + 1) & (s->cap - 1);
	if (!s->used[i])
		s->n++;
	s->used[i] = true;
	memcpy(s->key[i], k, 32);
	s->val[i] = v;
}

static void set_clear(hashset *s)
{
	free(s->key);
	free(s->val);
	free(s->used);
	memset(s, 0, sizeof *s);
}

/* ---- state ------------------------------------------------------------------------ */

/* A measured trace. */
typedef struct record {
	char *trace;
	unsigned char hash[32];
	unsigned char prog[32];    /* program_hash */
	int status;
	double latency_us;
	int sketch;                /* the sketch it came from; -1: unknown (a prior record) */
} record;

/* A candidate of this round. */
typedef struct cand {
	char *trace;
	unsigned char hash[32];
	unsigned char prog[32];    /* program_hash */
	tir_sched *s;              /* alive while its generation is scored and bred */
	double score;
	bool measured;
	int sketch;                /* fresh sample's sketch, inherited by mutants; -1: unknown */
} cand;

typedef struct search {
	const tir_workload *w;
	const tir_target *t;
	const tir_tune_opts *o;
	const search_space *space;
	int trials, batch, population;
	int patience;              /* flat rounds that end it; INT_MAX: none do */
	double flops;
	uint64_t rng;

	const tir_cost_model *model;
	void *model_self;
	search_random_model random;
	tir_measure_batch_fn measure;
	void *measure_ctx;
	measure_local local;

	record *rec;               /* the measured set */
	int nrec, caprec;
	hashset measured;
	hashset measured_prog;     /* program_hash of every measured trace */
	int best;                  /* index in rec, -1 while none is ok */

	cand *pool;                /* this round's candidates */
	int npool, cappool;
	hashset in_pool;
	hashset in_pool_prog;      /* their program_hash */
	hashset flying, flying_prog;   /* pipeline: the batches being measured */
	/* pipeline: a flight's thread says it ended (flight.ended) under fmu
	 * and signals fcv */
	pthread_mutex_t fmu;
	pthread_cond_t fcv;

	int round, done, errors;
	search_stats st;
	double search_s, measure_s, update_s;   /* the last round's phases */
	double start_s, measure_total_s;        /* when the search began; all measuring */

	struct updater *up;        /* async_update: the model's thread; NULL: in line */
	double train_s;            /* updates that ended this round (their own time) */
	int model_lag;             /* batches measured, not yet learnt, at the last pick */
} search;

static void note_invalid(search *S, const char *what, const char *msg)
{
	snprintf(S->st.last_invalid, sizeof S->st.last_invalid, "%.60s: %.180s", what, msg);
}

static bool is_ok(int status, double latency_us)
{
	return status == TIR_MEASURE_OK && isfinite(latency_us) && latency_us > 0;
}

static double gflops_of(const search *S, int status, double latency_us)
{
	return is_ok(status, latency_us) ? S->flops / latency_us * 1e-3 : 0;
}

static double best_us(const search *S)
{
	return S->best >= 0 ? S->rec[S->best].latency_us : 0;
}

/* Adds a result to the measured set; the best moves only to an ok one. */
static void record_add(search *S, const char *trace, const unsigned char *hash,
		       const unsigned char *prog, int sketch, int status, double latency_us)
{
	if (S->nrec == S->caprec) {
		S->caprec = S->caprec ? 2 * S->caprec : 64;
		S->rec = xrealloc(S->rec, sizeof(record) * (size_t)S->caprec);
	}
	record *r = &S->rec[S->nrec];
	r->trace = xstrdup(trace);
	memcpy(r->hash, hash, 32);
	memcpy(r->prog, prog, 32);
	r->status = status;
	r->latency_us = latency_us;
	r->sketch = sketch;
	set_put(&S->measured, hash, S->nrec);
	set_put(&S->measured_prog, prog, S->nrec);
	if (is_ok(status, latency_us) && (S->best < 0 || latency_us < best_us(S)))
		S->best = S->nrec;
	S->nrec++;
}

/* The identity of what a schedule makes: its program printed, hashed. */
static void program_hash(tir_sched *s, unsigned char out[32])
{
	char *text = tir_program_print(tir_sched_program(s));
	tir_trace_hash(text, out);
	free(text);
}

/* ---- the pool ------------------------------------------------------------------------ */

/* Adds schedule s (valid; its trace, the trace's hash h and its program's
 * hash ph, the first two taken over; the sketch it came from) to the pool
 * unless the trace or the program is there already; returns its index, or
 * -1 (s and trace are then freed).  A program measured under another trace
 * counts as measured. */
static int pool_add_traced(search *S, tir_sched *s, char *trace, const unsigned char *h,
			   const unsigned char *ph, int sketch)
{
	if (set_find(&S->in_pool, h) >= 0 || set_find(&S->in_pool_prog, ph) >= 0) {
		free(trace);
		tir_sched_free(s);
		return -1;
	}
	if (S->npool == S->cappool) {
		S->cappool = S->cappool ? 2 * S->cappool : 256;
		S->pool = xrealloc(S->pool, sizeof(cand) * (size_t)S->cappool);
	}
	cand *c = &S->pool[S->npool];
	c->trace = trace;
	memcpy(c->hash, h, 32);
	memcpy(c->prog, ph, 32);
	c->s = s;
	c->score = 0;
	c->sketch = sketch;
	c->measured = set_find(&S->measured, h) >= 0 || set_find(&S->measured_prog, ph) >= 0 ||
		      set_find(&S->flying, h) >= 0 || set_find(&S->flying_prog, ph) >= 0;
	set_put(&S->in_pool, h, S->npool);
	set_put(&S->in_pool_prog, ph, S->npool);
	return S->npool++;
}


/* ---- candidates made in parallel ------------------------------------------------------ */

/* One candidate to make: a trace to replay (a mutant), or a sketch to apply
 * with a seed (a fresh sample).  Out: the valid schedule with its trace and
 * hash, or NULL with the reason. */
typedef struct made {
	const char *parent;          /* a mutant: its parent's trace, mutated with seed */
	char *text;
	int sketch;                  /* a fresh sample's sketch, or a mutant's parent's */
	uint64_t seed;
	tir_sched *s;
	char *trace;
	unsigned char hash[32], prog[32];
	char msg[240];
} made;

typedef struct maker {
	search *S;
	made *m;
} maker;

static void make_one(void *ctx, int i)
{
	maker *mk = ctx;
	search *S = mk->S;
	made *m = &mk->m[i];
	tir_error e = { "" };
	if (m->parent) {
		uint64_t rng = m->seed;
		m->text = mutate_trace(m->parent, &rng);
	}
	if (m->text) {
		m->s = sched_replay_valid(S->w, S->t, m->text, &e);
	} else if (!m->parent && m->sketch >= 0) {
		m->s = tir_sched_new(S->w, m->seed, &e);
		if (m->s && (S->space->apply(S->space->ctx, m->sketch, m->s, &e) ||
			     tir_verify(tir_sched_program(m->s), S->t, &e))) {
			tir_sched_free(m->s);
			m->s = NULL;
		}
	}
	if (m->s) {
		m->trace = tir_sched_trace(m->s);
		tir_trace_hash(m->trace, m->hash);
		program_hash(m->s, m->prog);
	} else {
		snprintf(m->msg, sizeof m->msg, "%s", e.msg);
	}
}

static void make_all(search *S, int n, made *m)
{
	maker mk = { S, m };
	tir_parallel_for(n, S->o->threads, make_one, &mk);
}

static void pool_clear(search *S)
{
	for (int i = 0; i < S->npool; i++) {
		free(S->pool[i].trace);
		tir_sched_free(S->pool[i].s);
	}
	S->npool = 0;
	set_clear(&S->in_pool);
	set_clear(&S->in_pool_prog);
}

/* A generation: indices into the pool. */
typedef struct gen {
	int n, cap;
	int *idx;
} gen;

static void gen_push(gen *g, int i)
{
	if (g->n == g->cap) {
		g->cap = g->cap ? 2 * g->cap : 64;
		g->idx = xrealloc(g->idx, sizeof(int) * (size_t)g->cap);
	}
	g->idx[g->n++] = i;
}

/* Frees the schedules of a generation (their traces stay in the pool). */
static void gen_release(search *S, gen *g)
{
	for (int i = 0; i < g->n; i++) {
		tir_sched_free(S->pool[g->idx[i]].s);
		S->pool[g->idx[i]].s = NULL;
	}
	free(g->idx);
	memset(g, 0, sizeof *g);
}

/* ---- a. the initial population -------------------------------------------------- */

/* Faster first; equal latencies by hash. */
static int record_cmp(const record *x, const record *y)
{
	if (x->latency_us != y->latency_us)
		return x->latency_us < y->latency_us ? -1 : 1;
	return memcmp(x->hash, y->hash, 32);
}

/* Indices of the ok records, fastest first (ties by hash). */
static int *ok_records_by_latency(const search *S, int *n)
{
	int *idx = xmalloc(sizeof(int) * (size_t)(S->nrec + 1));
	*n = 0;
	for (int i = 0; i < S->nrec; i++)
		if (is_ok(S->rec[i].status, S->rec[i].latency_us))
			idx[(*n)++] = i;
	/* insertion sort: stable, deterministic, and the set is small */
	for (int i = 1; i < *n; i++) {
		int x = idx[i], j = i;
		while (j > 0 && record_cmp(&S->rec[idx[j - 1]], &S->rec[x]) > 0) {
			idx[j] = idx[j - 1];
			j--;
		}
		idx[j] = x;
	}
	return idx;
}

static void init_population(search *S, gen *g)
{
	/* the best measured traces */
	int nok, *ok = ok_records_by_latency(S, &nok);
	int nbest = (int)(S->population * SEARCH_MEASURED_SHARE);
	for (int i = 0; i < nok && g->n < nbest; i++) {
		tir_error e;
		const record *r = &S->rec[ok[i]];
		tir_sched *s = sched_replay_valid(S->w, S->t, r->trace, &e);
		int k = s ? pool_add_traced(S, s, xstrdup(r->trace), r->hash, r->prog, r->sketch)
			  : -1;
		if (k >= 0) {
			gen_push(g, k);
			S->st.seeded++;
		}
	}
	free(ok);

	/* fresh samples of each sketch in turn: sample k has its own seed,
	 * made in parallel a chunk at a time, taken in order until full */
	int need = S->population - g->n;
	for (int k0 = 0; k0 < 2 * need && g->n < S->population;) {
		int n = S->population - g->n;
		if (n > 2 * need - k0)
			n = 2 * need - k0;
		made *m = xcalloc((size_t)n, sizeof *m);
		for (int i = 0; i < n; i++) {
			m[i].sketch = (k0 + i) % S->space->nsketches;
			m[i].seed = tir_derive(S->o->seed, (uint64_t)S->round, (uint64_t)(k0 + i));
		}
		make_all(S, n, m);
		int i = 0;
		for (; i < n && g->n < S->population; i++) {
			S->st.samples++;
			if (!m[i].s) {
				S->st.samples_invalid++;
				note_invalid(S, S->space->names[m[i].sketch], m[i].msg);
				continue;
			}
			int k = pool_add_traced(S, m[i].s, m[i].trace, m[i].hash, m[i].prog,
						m[i].sketch);
			if (k >= 0)
				gen_push(g, k);
		}
		for (; i < n; i++) {         /* made past the population: unused */
			tir_sched_free(m[i].s);
			free(m[i].trace);
		}
		free(m);
		k0 += n;
	}
}

/* ---- b, c. scoring and evolution ----------------------------------------------- */

static int score(search *S, const gen *g, tir_error *err)
{
	if (!g->n)
		return 0;
	const tir_program **progs = xmalloc(sizeof(*progs) * (size_t)g->n);
	double *sc = xcalloc((size_t)g->n, sizeof(double));
	for (int i = 0; i < g->n; i++)
		progs[i] = tir_sched_program(S->pool[g->idx[i]].s);
	int rc = S->model->predict(S->model_self, S->w, S->t, g->n, progs, sc);
	if (rc)   /* the model cannot rank yet (too little data): random scores */
		rc = search_random_cost_model.predict(&S->random, S->w, S->t, g->n, progs, sc);
	for (int i = 0; i < g->n; i++)
		S->pool[g->idx[i]].score = isfinite(sc[i]) ? sc[i] : -INFINITY;
	free(progs);
	free(sc);
	if (rc)
		return tir_fail(err, "cost model %s: prediction failed", S->model->name);
	return 0;
}

/* A parent: the better scored of two drawn at random. */
static int tournament(search *S, const gen *g)
{
	int a = g->idx[tir_rand(&S->rng) % (uint64_t)g->n];
	int b = g->idx[tir_rand(&S->rng) % (uint64_t)g->n];
	return S->pool[b].score > S->pool[a].score ? b : a;
}

/* The next generation: population children, each one mutation of a parent,
 * replayed and validated; discarded mutants are counted.  In up to
 * SEARCH_MUTATE_TRIES passes, the parents of the mutants still wanted and
 * a seed for each are drawn in order (the generator's sequence), the
 * mutations made and replayed in parallel, the children added in order. */
static void evolve(search *S, const gen *parents, gen *next)
{
	for (int attempt = 0; attempt < SEARCH_MUTATE_TRIES && parents->n &&
			      next->n < S->population; attempt++) {
		int n = S->population - next->n;
		made *m = xcalloc((size_t)n, sizeof *m);
		for (int c = 0; c < n; c++) {
			const cand *p = &S->pool[tournament(S, parents)];
			m[c].parent = p->trace;
			m[c].seed = tir_rand(&S->rng);
			m[c].sketch = p->sketch;
		}
		make_all(S, n, m);
		for (int c = 0; c < n; c++) {
			if (!m[c].text)
				continue;
			free(m[c].text);
			S->st.mutants++;
			if (!m[c].s) {
				S->st.mutants_discarded++;
				note_invalid(S, "mutant", m[c].msg);
				continue;
			}
			int k = pool_add_traced(S, m[c].s, m[c].trace, m[c].hash, m[c].prog,
						m[c].sketch);
			if (k < 0) {
				S->st.mutants_duplicate++;
				continue;
			}
			gen_push(next, k);
		}
		free(m);
	}
}

/* ---- d. the batch --------------------------------------------------------------- */

/* Best score first; equal scores by hash. */
static int cand_cmp(const search *S, int a, int b)
{
	const cand *x = &S->pool[a], *y = &S->pool[b];
	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	return memcmp(x->hash, y->hash, 32);
}

/* Removes and returns u[j], keeping the order of the rest. */
static int take_at(int *u, int *nu, int j)
{
	int x = u[j];
	memmove(u + j, u + j + 1, sizeof(int) * (size_t)(*nu - j - 1));
	(*nu)--;
	return x;
}

/* One of the best-scored fraction (at least one) of the candidates of
 * sketch group g (sketch + 1; 0: unknown) left in u, drawn at random and
 * taken out; -1 if the group has none left. */
static int take_of_sketch(search *S, int *u, int *nu, int g)
{
	int cnt = 0;
	for (int i = 0; i < *nu; i++)
		cnt += S->pool[u[i]].sketch + 1 == g;
	if (!cnt)
		return -1;
	int top = (int)ceil(cnt * SEARCH_TOP_FRACTION);
	int r = (int)(tir_rand(&S->rng) % (uint64_t)top);
	for (int i = 0; i < *nu; i++)
		if (S->pool[u[i]].sketch + 1 == g && r-- == 0)
			return take_at(u, nu, i);
	return -1;
}

/* The chance that a new candidate of each sketch group (sketch + 1; 0:
 * unknown) beats the best measured so far, from the group's own ok
 * measurements of this workload: their log-latencies taken as normal, the
 * spread shrunk towards SEARCH_SKETCH_SPREAD by two pseudo-measurements (one
 * measurement says little of a sketch whose tilings spread by several
 * times).  A group never measured gets an even chance. */
static void sketch_chances(const search *S, int groups, double *p)
{
	double *n = xcalloc((size_t)groups, sizeof(double));
	double *sum = xcalloc((size_t)groups, sizeof(double));
	double *sq = xcalloc((size_t)groups, sizeof(double));
	for (int i = 0; i < S->nrec; i++) {
		const record *r = &S->rec[i];
		int g = r->sketch + 1;
		if (g < 0 || g >= groups || !is_ok(r->status, r->latency_us))
			continue;
		double x = log(r->latency_us);
		n[g]++;
		sum[g] += x;
		sq[g] += x * x;
	}
	double best = log(best_us(S)), k0 = 2, s0 = SEARCH_SKETCH_SPREAD;
	for (int g = 0; g < groups; g++) {
		if (!n[g]) {
			p[g] = 0.5;
			continue;
		}
		double mu = sum[g] / n[g], ss = sq[g] - n[g] * mu * mu;
		double sd = sqrt((ss > 0 ? ss : 0) + k0 * s0 * s0) / sqrt(n[g] - 1 + k0);
		p[g] = 0.5 * erfc(-(best - mu) / (sd * sqrt(2.0)));
	}
	free(n);
	free(sum);
	free(sq);
}

/* Fills batch[] with pool indices; returns how many (at most max).
 *
 * The model's share (1 - SEARCH_EPSILON): its best-scored candidates in the
 * proportion of the budget already spent (none in the first batch, most in
 * the last), the rest explores.  A model trained on tens of rows ranks
 * regions, not candidates: its very top is a cluster of near-twins around
 * what it has seen, which teaches it little early on, while the top
 * fraction keeps its signal and the variety of the pool; late in the
 * budget the very top is what should be measured.
 *
 * Within a sketch latencies spread by several times (a CPU tiling's first
 * samples were seen 3-6x off its best), and a model can prefer the wrong
 * sketch for a workload: one that starts from nothing judges a sketch by
 * an unlucky first batch, one trained on other workloads carries their
 * preference (C2D-3 on the CPU kept to cpu-tile-cache, its best sketch being
 * cpu-tile-reg), and its online retraining, a few rows among thousands,
 * does not move it; its evolution, bred from what scores well, then stops
 * making the other sketch (bench/results/archive/2026-11-30-search-sketch-share.txt,
 * 2026-11-30-costmodel-eval-s11.txt).  So once something is measured,
 * SEARCH_SKETCH_SHARE of the exploring picks are shared among the sketches
 * by each one's chance to beat the best so far (sketch_chances), each from
 * its sketch's own best-scored fraction; the others come at random from
 * the best-scored fraction of the whole pool.  Before anything is measured
 * (the first batch) the sketches share evenly: a 64-trial GPU search of one
 * batch under a model trained on other workloads measured no wgmma
 * candidate of a float16 matmul and kept a best 2.2x slower than the one
 * another run found (bench/results/2026-12-02-h200-l2.txt).  The random
 * share (SEARCH_EPSILON) is drawn from all the others. */
static int pick_batch(search *S, int max, int *batch)
{
	int *c = xmalloc(sizeof(int) * (size_t)(S->npool + 1)), n = 0;
	for (int i = 0; i < S->npool; i++)
		if (!S->pool[i].measured)
			c[n++] = i;
	/* insertion sort: deterministic, and the pool is at most a few thousand */
	for (int i = 1; i < n; i++) {
		int x = c[i], j = i;
		while (j > 0 && cand_cmp(S, c[j - 1], x) > 0) {
			c[j] = c[j - 1];
			j--;
		}
		c[j] = x;
	}
	int take = n < max ? n : max;
	int nrand = (int)floor(take * SEARCH_EPSILON + 0.5);
	int ntop = take - nrand, k = 0;
	int nbest = S->trials > 0 ? (int)floor((double)ntop * S->done / S->trials) : 0;
	int nsketch = (int)ceil((ntop - nbest) * SEARCH_SKETCH_SHARE);
	int top = (int)ceil(n * SEARCH_TOP_FRACTION);
	if (top < ntop)
		top = ntop;
	int nu = n;                  /* c[0..nu): not taken yet, best scored first */
	for (; k < nbest; k++)
		batch[k] = take_at(c, &nu, 0);
	int groups = S->space->nsketches + 1;
	double *p = xmalloc(sizeof(double) * (size_t)groups);
	if (S->best >= 0) {
		sketch_chances(S, groups, p);
	} else {
		/* nothing measured yet: every sketch the even chance of one never
		 * measured.  The first batch is where a model trained on other
		 * workloads carries their preference most, and where a search of
		 * one round (batch = trials) has all its picks */
		for (int g = 0; g < groups; g++)
			p[g] = 0.5;
	}
	while (k < nbest + nsketch) {
		double tot = 0;
		for (int g = 0; g < groups; g++)
			tot += p[g];
		if (!(tot > 0))
			break;
		double r = tir_rand_unit(&S->rng) * tot;
		int g = 0;
		while (g < groups - 1 && (r -= p[g]) >= 0)
			g++;
		int x = take_of_sketch(S, c, &nu, g);
		if (x < 0)
			p[g] = 0;            /* none left of this sketch */
		else
			batch[k++] = x;
	}
	free(p);
	/* the rest of the model's share: at random from the best-scored part */
	int left = top - k;
	for (; k < ntop && nu; k++, left--)
		batch[k] = take_at(c, &nu, (int)(tir_rand(&S->rng) % (uint64_t)(left < nu ? left : nu)));
	/* the random share: from all the others */
	for (; k < take && nu; k++)
		batch[k] = take_at(c, &nu, (int)(tir_rand(&S->rng) % (uint64_t)nu));
	free(c);
	return k;
}

/* ---- the model's input ------------------------------------------------------------ */

static void model_update(search *S, int n, tir_sched *const *s, const double *gflops)
{
	if (!S->model->update || !n)
		return;
	const tir_program **progs = xmalloc(sizeof(*progs) * (size_t)n);
	double *g = xmalloc(sizeof(double) * (size_t)n);
	int k = 0;
	for (int i = 0; i < n; i++)
		if (s[i]) {
			progs[k] = tir_sched_program(s[i]);
			g[k++] = gflops[i];
		}
	if (k)
		S->model->update(S->model_self, S->w, S->t, k, progs, g);
	free(progs);
	free(g);
}

/* Measured traces given to the model: each replayed on a fresh schedule
 * (the model's input is the program), then model_update.  Reads only what
 * never changes during a search (w, t, the model), so it may run on the
 * updater's thread. */
static void learn(search *S, int n, char *const *traces, const double *gflops)
{
	tir_error e;
	tir_sched **s = xcalloc((size_t)n + 1, sizeof *s);
	for (int i = 0; i < n; i++)
		s[i] = sched_replay_valid(S->w, S->t, traces[i], &e);
	model_update(S, n, s, gflops);
	for (int i = 0; i < n; i++)
		tir_sched_free(s[i]);
	free(s);
}

/* ---- the model's update, beside the search (async_update) ----------------
 *
 * One thread per search learns the batches in the order they were measured.
 * The search hands it each batch's traces (copies the thread owns) and
 * throughputs and goes on at once: it scores the next generations with
 * whatever the model holds then (cm_xgboost installs a booster whole when
 * its training ends, costmodel/xgb.c).  Batches that arrive while the
 * thread is busy are learnt together when it is done ("train on what has
 * arrived"), so a training slower than a round never queues up.  The thread
 * runs at the lowest priority (nice 19, which the threads it starts
 * inherit): on a machine whose cores also build and time the candidates (a
 * CPU target with a local worker) it takes the cycles they leave, instead
 * of slowing the timed runs.  The search waits for it only at its end
 * (updater_stop), so that every measured row is in the model when tir_tune
 * returns. */
typedef struct updater {
	search *S;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	char **traces;             /* queued: owned, with their throughputs */
	double *gflops;
	int n, cap, batches;       /* rows and batches queued */
	bool busy, stop;
	double done_s;             /* the own time of updates ended since last read */
} updater;

static void *updater_main(void *arg)
{
	updater *u = arg;
	/* this thread only (a Linux thread id is a process id to setpriority);
	 * failing leaves it at the search's priority */
	(void)setpriority(PRIO_PROCESS, (id_t)gettid(), 19);
	pthread_mutex_lock(&u->mu);
	for (;;) {
		while (!u->n && !u->stop)
			pthread_cond_wait(&u->cv, &u->mu);
		if (!u->n)
			break;
		char **traces = u->traces;
		double *gflops = u->gflops;
		int n = u->n;
		u->traces = NULL;
		u->gflops = NULL;
		u->n = u->cap = u->batches = 0;
		u->busy = true;
		pthread_mutex_unlock(&u->mu);
		double t0 = tir_now_s();
		learn(u->S, n, traces, gflops);
		double took = tir_now_s() - t0;
		for (int i = 0; i < n; i++)
			free(traces[i]);
		free(traces);
		free(gflops);
		pthread_mutex_lock(&u->mu);
		u->busy = false;
		u->done_s += took;
		pthread_cond_broadcast(&u->cv);
	}
	pthread_mutex_unlock(&u->mu);
	return NULL;
}

/* The updater of S, started; NULL when no thread could start (the search
 * then learns in line). */
static updater *updater_start(search *S)
{
	updater *u = xcalloc(1, sizeof *u);
	u->S = S;
	pthread_mutex_init(&u->mu, NULL);
	pthread_cond_init(&u->cv, NULL);
	if (pthread_create(&u->th, NULL, updater_main, u)) {
		pthread_mutex_destroy(&u->mu);
		pthread_cond_destroy(&u->cv);
		free(u);
		return NULL;
	}
	return u;
}

/* Queues a batch (the traces copied) for the updater's thread. */
static void updater_push(updater *u, int n, char *const *traces, const double *gflops)
{
	pthread_mutex_lock(&u->mu);
	if (u->n + n > u->cap) {
		u->cap = 2 * (u->n + n);
		u->traces = xrealloc(u->traces, sizeof(char *) * (size_t)u->cap);
		u->gflops = xrealloc(u->gflops, sizeof(double) * (size_t)u->cap);
	}
	for (int i = 0; i < n; i++) {
		u->traces[u->n + i] = xstrdup(traces[i]);
		u->gflops[u->n + i] = gflops[i];
	}
	u->n += n;
	u->batches++;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
}

/* Batches handed over and not yet learnt (queued, or the one being
 * learnt), and the own time of the updates that ended since the last call. */
static int updater_poll(updater *u, double *done_s)
{
	pthread_mutex_lock(&u->mu);
	int lag = u->batches + u->busy;
	*done_s = u->done_s;
	u->done_s = 0;
	pthread_mutex_unlock(&u->mu);
	return lag;
}

/* Learns what is queued, stops the thread and frees u. */
static void updater_stop(updater *u)
{
	pthread_mutex_lock(&u->mu);
	u->stop = true;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
	pthread_join(u->th, NULL);
	pthread_mutex_destroy(&u->mu);
	pthread_cond_destroy(&u->cv);
	free(u);
}

/* ---- e. measurement --------------------------------------------------------------- */

/* A batch picked and sent to be measured: copies of what the search knows
 * of its candidates (the pool is cleared at the end of the round that
 * picked it), the measure function's results, and the times.  With
 * opts->pipeline the measure function runs on a thread of the flight's own
 * while the search picks the next batch; else in line. */
typedef struct flight {
	search *S;
	int n, round;
	char **traces;             /* owned */
	unsigned char (*hash)[32], (*prog)[32];
	int *sketch;
	tir_candidate *out;
	int failed;
	double search_s, t0, t1;   /* the search that picked it; the measuring */
	int model_lag;
	pthread_t th;
	bool threaded;
	bool ended;                /* its measuring returned (under S->fmu) */
} flight;

/* The batch (pool indices) copied into f. */
static void flight_fill(search *S, flight *f, int n, const int *batch)
{
	memset(f, 0, sizeof *f);
	f->S = S;
	f->n = n;
	f->round = S->round;
	f->traces = xcalloc((size_t)n + 1, sizeof *f->traces);
	f->hash = xcalloc((size_t)n + 1, sizeof *f->hash);
	f->prog = xcalloc((size_t)n + 1, sizeof *f->prog);
	f->sketch = xcalloc((size_t)n + 1, sizeof *f->sketch);
	f->out = xcalloc((size_t)n + 1, sizeof *f->out);
	for (int i = 0; i < n; i++) {
		const cand *c = &S->pool[batch[i]];
		f->traces[i] = xstrdup(c->trace);
		memcpy(f->hash[i], c->hash, 32);
		memcpy(f->prog[i], c->prog, 32);
		f->sketch[i] = c->sketch;
		f->out[i].status = TIR_MEASURE_RUN_ERROR;
		f->out[i].max_rel_error = -1;
	}
}

/* The messages of a flight that is not recorded (the search failed). */
static void flight_drop(flight *f)
{
	for (int i = 0; i < f->n; i++) {
		free((char *)f->out[i].msg);
		f->out[i].msg = NULL;
	}
}

static void flight_free(flight *f)
{
	for (int i = 0; i < f->n; i++)
		free(f->traces[i]);
	free(f->traces);
	free(f->hash);
	free(f->prog);
	free(f->sketch);
	free(f->out);
	memset(f, 0, sizeof *f);
}

static void *flight_main(void *arg)
{
	flight *f = arg;
	search *S = f->S;
	f->t0 = tir_now_s();
	f->failed = S->measure(S->measure_ctx, S->w, S->t, f->n,
			       (const char *const *)f->traces, f->out);
	f->t1 = tir_now_s();
	pthread_mutex_lock(&S->fmu);
	f->ended = true;
	pthread_cond_broadcast(&S->fcv);
	pthread_mutex_unlock(&S->fmu);
	return NULL;
}

/* Measures f: on a thread (pipelined; flight_wait joins it), or in line
 * when threaded is false or no thread can start. */
static void flight_start(flight *f, bool threaded)
{
	f->threaded = threaded && !pthread_create(&f->th, NULL, flight_main, f);
	if (!f->threaded)
		flight_main(f);
}

static void flight_wait(flight *f)
{
	if (f->threaded)
		pthread_join(f->th, NULL);
	f->threaded = false;
}

/* The results of a measured flight: every one recorded (whatever its
 * status), reported through on_result and learnt by the model — in line,
 * or handed to the updater's thread.  Sets the phases progress() reports. */
static int flight_record(search *S, flight *f, tir_error *err)
{
	int n = f->n;
	S->search_s = f->search_s;
	S->measure_s = f->t1 - f->t0;
	S->measure_total_s += S->measure_s;
	S->model_lag = f->model_lag;
	if (f->failed) {
		for (int i = 0; i < n; i++)
			free((char *)f->out[i].msg);
		return tir_fail(err, "tune: the measure function failed on a batch of %d", n);
	}
	double t1 = tir_now_s();
	double *gflops = xcalloc((size_t)n + 1, sizeof(double));
	for (int i = 0; i < n; i++) {
		tir_candidate *out = &f->out[i];
		out->trace = f->traces[i];
		if (!is_ok(out->status, out->latency_us))
			S->errors++;
		record_add(S, f->traces[i], f->hash[i], f->prog[i], f->sketch[i], out->status,
			   out->latency_us);
		S->done++;
		if (S->o->on_result)
			S->o->on_result(S->o->cb_ctx, out);
		free((char *)out->msg);
		out->msg = NULL;
		gflops[i] = gflops_of(S, out->status, out->latency_us);
	}
	/* the model learns the batch: in line, or on the updater's thread while
	 * the next round searches and measures */
	if (S->up) {
		updater_push(S->up, n, f->traces, gflops);
	} else {
		learn(S, n, f->traces, gflops);
		S->train_s = tir_now_s() - t1;
	}
	free(gflops);
	S->update_s = tir_now_s() - t1;
	return 0;
}

/* ---- one round ------------------------------------------------------------------------ */

/* b, c: SEARCH_GENERATIONS rounds of breeding from the scored population g;
 * the last generation is scored too.  Every schedule is released; the
 * traces and scores stay in the pool. */
static int evolve_generations(search *S, gen *g, tir_error *err)
{
	int rc = 0;
	for (int i = 0; i <= SEARCH_GENERATIONS && g->n && !rc; i++) {
		gen next = { 0 };
		rc = score(S, g, err);
		if (!rc && i < SEARCH_GENERATIONS)
			evolve(S, g, &next);
		gen_release(S, g);
		*g = next;
	}
	gen_release(S, g);
	return rc;
}

/* Steps a-d of a round (see the top of the file): the next batch, at most
 * `max` candidates, into f (nothing in f when it returns 0: nothing new
 * was found).  Returns its size, or -1. */
static int search_pick(search *S, int max, flight *f, tir_error *err)
{
	gen g = { 0 };
	int n = 0;
	int *batch = xmalloc(sizeof(int) * (size_t)(max + 1));

	double t0 = tir_now_s();
	memset(f, 0, sizeof *f);
	S->search_s = S->measure_s = S->update_s = S->train_s = 0;
	/* what the model has not learnt yet as this round starts scoring */
	if (S->up)
		S->model_lag = updater_poll(S->up, &S->train_s);
	/* a. population: the best measured traces, fresh samples of each sketch */
	init_population(S, &g);
	/* b, c. evolution under the cost model; every candidate scored */
	int rc = evolve_generations(S, &g, err);
	/* d. the batch: best scores first, an epsilon share at random */
	if (!rc)
		n = pick_batch(S, max, batch);
	S->search_s = tir_now_s() - t0;
	if (!rc && n) {
		flight_fill(S, f, n, batch);
		f->search_s = S->search_s;
		f->model_lag = S->model_lag;
	}
	free(batch);
	pool_clear(S);
	return rc ? -1 : n;
}

/* One round in order: the batch picked (a-d), then measured, recorded,
 * reported and learnt (e).  Returns how many candidates it measured (0: it
 * found nothing new), or -1. */
static int search_round(search *S, tir_error *err)
{
	int left = S->trials - S->done;
	flight f;
	int n = search_pick(S, left < S->batch ? left : S->batch, &f, err);
	if (n > 0) {
		flight_start(&f, false);
		if (flight_record(S, &f, err))
			n = -1;
		flight_free(&f);
	}
	return n;
}

/* ---- the search ---------------------------------------------------------------------- */

static void load_prior(search *S)
{
	int n = S->o->nprior;
	if (n <= 0 || !S->o->prior)
		return;
	tir_sched **s = xcalloc((size_t)n, sizeof *s);
	double *gflops = xcalloc((size_t)n, sizeof(double));
	for (int i = 0; i < n; i++) {
		const tir_candidate *c = &S->o->prior[i];
		tir_error e;
		s[i] = c->trace ? sched_replay_valid(S->w, S->t, c->trace, &e) : NULL;
		if (!s[i]) {
			S->st.prior_invalid++;
			continue;
		}
		char *trace = tir_sched_trace(s[i]);
		unsigned char h[32];
		tir_trace_hash(trace, h);
		if (set_find(&S->measured, h) < 0) {
			unsigned char ph[32];
			program_hash(s[i], ph);
			record_add(S, trace, h, ph, -1, c->status, c->latency_us);
			gflops[i] = gflops_of(S, c->status, c->latency_us);
		} else {
			tir_sched_free(s[i]);
			s[i] = NULL;
		}
		free(trace);
	}
	model_update(S, n, s, gflops);
	for (int i = 0; i < n; i++)
		tir_sched_free(s[i]);
	free(s);
	free(gflops);
}

static void progress(search *S, int round)
{
	if (!S->o->on_progress)
		return;
	tir_tune_progress p = {
		.round = round, .trials_done = S->done, .trials_total = S->trials,
		.errors = S->errors, .best_us = best_us(S),
		.best_gflops = S->best >= 0 ? gflops_of(S, 0, best_us(S)) : 0,
		.search_s = S->search_s, .measure_s = S->measure_s, .update_s = S->update_s,
		.train_s = S->train_s, .model_lag = S->model_lag,
		.elapsed_s = tir_now_s() - S->start_s, .measure_total_s = S->measure_total_s,
	};
	S->o->on_progress(S->o->cb_ctx, &p);
}

/* The rounds with opts->pipeline = D: the batch of round k+1 is picked
 * while D batches are measured (each on its flight's own thread), from what
 * was recorded before — the candidates in flight count as measured, so
 * none is picked twice — and, once D are out, the next to end is recorded
 * (reported, learnt, counted by the plateau rules) and the one picked sent
 * at once.  Which is recorded next: the oldest (the default), so that the
 * order of every draw is fixed and a pipelined search is as deterministic
 * as the other (with the update in line), each batch picked D batches of
 * results earlier; or, with opts->pipeline_any_order, whichever ends
 * first, so that a batch held up by one slow build holds up only itself
 * while a measurer that takes batches at once (tird-worker's slots) goes
 * on with the others — not deterministic.  Returns 0 or -1; the plateau
 * counters are search_run's. */
static int pipelined(search *S, int *stale, int *flat, tir_error *err)
{
	const tir_tune_opts *o = S->o;
	int depth = o->pipeline < TIR_TUNE_PIPELINE_MAX ? o->pipeline : TIR_TUNE_PIPELINE_MAX;
	if (!o->measure)           /* tir_measure_local: one batch at a time */
		depth = 1;
	flight fl[TIR_TUNE_PIPELINE_MAX];
	int order[TIR_TUNE_PIPELINE_MAX];   /* fl indices in flight, oldest first */
	int count = 0;
	int rc = 0;
	bool stop = false;
	for (;;) {
		int inflight = 0;
		for (int k = 0; k < count; k++)
			inflight += fl[order[k]].n;
		int left = S->trials - S->done - inflight;
		bool more = !rc && !stop && left > 0 && !(o->cancel && atomic_load(o->cancel));
		flight next = { 0 };
		int n = 0;
		if (more) {
			S->round++;
			n = search_pick(S, left < S->batch ? left : S->batch, &next, err);
			if (n < 0)
				rc = -1;
		}
		/* flights recorded: one while D are out, and every one when
		 * nothing new goes out beside them */
		double search_s = S->search_s;
		int lag = S->model_lag;
		while (count > 0 && (count >= depth || n <= 0)) {
			int at = 0;        /* the oldest, or the first to end */
			if (o->pipeline_any_order) {
				pthread_mutex_lock(&S->fmu);
				for (;;) {
					at = 0;
					while (at < count && !fl[order[at]].ended)
						at++;
					if (at < count)
						break;
					pthread_cond_wait(&S->fcv, &S->fmu);
				}
				pthread_mutex_unlock(&S->fmu);
			}
			flight *cur = &fl[order[at]];
			double before = best_us(S);
			flight_wait(cur);
			memmove(&order[at], &order[at + 1], sizeof *order * (size_t)(count - at - 1));
			count--;
			set_clear(&S->flying);
			set_clear(&S->flying_prog);
			for (int k = 0; k < count; k++) {
				const flight *f = &fl[order[k]];
				for (int i = 0; i < f->n; i++) {
					set_put(&S->flying, f->hash[i], i);
					set_put(&S->flying_prog, f->prog[i], i);
				}
			}
			if (!rc)
				rc = flight_record(S, cur, err);
			else
				flight_drop(cur);
			if (!rc) {
				*stale = 0;
				bool better = S->best >= 0 &&
					      (before == 0 || best_us(S) < before * 0.999);
				*flat = better ? 0 : *flat + 1;
				progress(S, cur->round);
			}
			flight_free(cur);
		}
		S->search_s = search_s;     /* the round just picked: its own */
		S->model_lag = lag;
		if (rc || !more) {
			flight_free(&next);
			if (count == 0)
				break;
			stop = true;
			continue;
		}
		if (n == 0) {
			(*stale)++;
			S->measure_s = S->update_s = 0;
			progress(S, S->round);
		}
		if (*stale >= SEARCH_STALE_ROUNDS || *flat >= S->patience) {
			/* what is in flight is measured already: it is recorded */
			flight_free(&next);
			stop = true;
			continue;
		}
		if (n > 0) {
			int slot = 0;      /* a free one: fl[] not in order[] */
			for (bool used = true; used; slot += used) {
				used = false;
				for (int k = 0; k < count; k++)
					used |= order[k] == slot;
			}
			flight *f = &fl[slot];
			*f = next;
			for (int i = 0; i < f->n; i++) {
				set_put(&S->flying, f->hash[i], i);
				set_put(&S->flying_prog, f->prog[i], i);
			}
			order[count++] = slot;
			flight_start(f, true);
		}
	}
	return rc;
}

int search_run(const tir_workload *w, const tir_target *t, const tir_tune_opts *opts,
	       const search_space *space, tir_tune_result *res, search_stats *stats,
	       tir_error *err)
{
	memset(res, 0, sizeof *res);
	if (stats)
		memset(stats, 0, sizeof *stats);
	if (!space || space->nsketches < 1)
		return tir_fail(err, "tune: no sketch applies to this workload");
	tir_tune_opts none = { 0 };
	const tir_tune_opts *o = opts ? opts : &none;
	search S = {
		.w = w, .t = t, .o = o, .space = space,
		.trials = o->trials > 0 ? o->trials : SEARCH_TRIALS,
		.batch = o->batch > 0 ? o->batch : SEARCH_BATCH,
		.population = o->population > 0 ? o->population : SEARCH_POPULATION,
		.patience = o->patience > 0 ? o->patience : INT_MAX,
		.flops = tir_workload_flops(w),
		.rng = tir_derive(o->seed, 0x5EA4C4, 0),
		.best = -1,
	};
	S.random.rng = tir_derive(o->seed, 0xC057, 0);
	S.model = o->model ? o->model : &search_random_cost_model;
	S.model_self = o->model ? o->model_self : &S.random;
	S.measure = o->measure ? o->measure : tir_measure_local;
	S.measure_ctx = o->measure ? o->measure_ctx : &S.local;

	pthread_mutex_init(&S.fmu, NULL);
	pthread_cond_init(&S.fcv, NULL);
	S.start_s = tir_now_s();
	load_prior(&S);
	if (o->async_update && S.model->update)
		S.up = updater_start(&S);
	int rc = 0, stale = 0, flat = 0;
	while (o->pipeline <= 0 && S.done < S.trials && !(o->cancel && atomic_load(o->cancel))) {
		double before = best_us(&S);
		S.round++;
		int n = search_round(&S, err);
		if (n < 0) {
			rc = -1;
			break;
		}
		stale = n ? 0 : stale + 1;
		bool better = S.best >= 0 && (before == 0 || best_us(&S) < before * 0.999);
		flat = !n ? flat : better ? 0 : flat + 1;
		progress(&S, S.round);
		if (stale >= SEARCH_STALE_ROUNDS || flat >= S.patience)
			break;
	}
	if (o->pipeline > 0 && !rc)
		rc = pipelined(&S, &stale, &flat, err);
	if (S.up) {
		/* every measured row in the model before tir_tune returns: the
		 * wait, on the job's time, is reported as the last round's */
		double w0 = tir_now_s();
		updater_stop(S.up);
		S.up = NULL;
		if (o->on_progress && S.round > 0) {
			S.update_s = tir_now_s() - w0;
			S.search_s = S.measure_s = S.train_s = 0;
			S.model_lag = 0;
			tir_tune_progress p = {
				.round = S.round, .drain = true, .trials_done = S.done, .trials_total = S.trials,
				.errors = S.errors, .best_us = best_us(&S),
				.best_gflops = S.best >= 0 ? gflops_of(&S, 0, best_us(&S)) : 0,
				.update_s = S.update_s, .elapsed_s = tir_now_s() - S.start_s,
				.measure_total_s = S.measure_total_s,
			};
			o->on_progress(o->cb_ctx, &p);
		}
	}
	if (!rc && S.nrec == 0 && stale >= SEARCH_STALE_ROUNDS)
		rc = tir_fail(err, "tune: no valid candidate in %d rounds (%d samples%s%s)",
			      S.round, S.st.samples, S.st.last_invalid[0] ? "; last: " : "",
			      S.st.last_invalid);

	if (S.best >= 0) {
		res->best_trace = xstrdup(S.rec[S.best].trace);
		res->best_us = best_us(&S);
		res->best_gflops = gflops_of(&S, 0, res->best_us);
	}
	res->trials = S.done;
	res->errors = S.errors;
	res->rounds = S.round;
	res->end = S.done >= S.trials ? TIR_TUNE_END_BUDGET
		 : o->cancel && atomic_load(o->cancel) ? TIR_TUNE_END_CANCELLED
		 : stale >= SEARCH_STALE_ROUNDS ? TIR_TUNE_END_EXHAUSTED
		 : flat >= S.patience ? TIR_TUNE_END_PLATEAU : TIR_TUNE_END_BUDGET;
	S.st.stale_rounds = stale;
	S.st.flat_rounds = flat;
	if (stats)
		*stats = S.st;

	for (int i = 0; i < S.nrec; i++)
		free(S.rec[i].trace);
	free(S.rec);
	set_clear(&S.measured);
	set_clear(&S.measured_prog);
	set_clear(&S.flying);
	set_clear(&S.flying_prog);
	pthread_mutex_destroy(&S.fmu);
	pthread_cond_destroy(&S.fcv);
	pool_clear(&S);
	free(S.pool);
	measure_local_clear(&S.local);
	return rc;
}
