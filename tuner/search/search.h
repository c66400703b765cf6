/*
 * search.h — the evolutionary search behind tir_tune (tir.h), its mutators
 * and the local measurement of a batch.  Internal to tuner/.
 *
 * The search (evolve.c) sees the space it explores only through a
 * search_space: how many sketches there are and how to apply one to a fresh
 * schedule.  tir_tune (tune.c) makes one from tir_sketches/tir_sketch_apply;
 * tests make their own, so the loop can be checked without the real sketches.
 *
 * Every candidate is a trace.  Its identity is the SHA-256 of its canonical
 * text — the trace a fresh schedule prints after replaying it — so the same
 * decisions of the same sketch are the same candidate wherever they came from
 * (a sample, a mutant, a prior record written by an older process).
 *
 * Measure functions (tir_measure_batch_fn) fill out[i].status, latency_us,
 * max_rel_error and msg; msg is NULL or malloc'd, and the caller frees it
 * (tir_tune does, after on_result).
 */
#ifndef TIR_SEARCH_H
#define TIR_SEARCH_H

#include <stdbool.h>
#include "../tir.h"
#include "../measure/measure.h"

/* ---- evolve.c: the search loop --------------------------------------------- */

/* Defaults and fixed parameters of the search (tir_tune_opts may override the
 * first three). */
#define SEARCH_TRIALS          64    /* measured candidates in all */
#define SEARCH_BATCH           16    /* measured per round */
#define SEARCH_POPULATION      256   /* candidates alive in one generation */
#define SEARCH_GENERATIONS     3     /* rounds of mutation per search round */
#define SEARCH_MEASURED_SHARE  0.2   /* of the population: best measured traces */
#define SEARCH_EPSILON         0.125 /* of a batch: random unmeasured candidates */
#define SEARCH_TOP_FRACTION    0.1   /* the rest: at random from this best-scored part */
#define SEARCH_SKETCH_SHARE    0.5   /* of those: shared among the sketches */
#define SEARCH_SKETCH_SPREAD   1.0   /* prior spread of a sketch's log-latencies */
#define SEARCH_MUTATE_TRIES    4     /* attempts per child before giving up */
/* Plateau: the search stops after SEARCH_STALE_ROUNDS rounds in a row that
 * found no unmeasured valid candidate (the space is exhausted, or every draw
 * fails), or SEARCH_PATIENCE rounds in a row that measured something but did
 * not improve the best latency by more than 0.1 %. */
#define SEARCH_STALE_ROUNDS    3
#define SEARCH_PATIENCE        6

/* The space searched: n sketches, each applied to a fresh schedule. */
typedef struct search_space {
	int nsketches;
	int (*apply)(void *ctx, int id, tir_sched *s, tir_error *err);
	void *ctx;
	char names[TIR_MAX_SKETCHES][64];   /* for messages; may be empty */
} search_space;

/* What one search did beyond tir_tune_result, for tests and logs. */
typedef struct search_stats {
	int seeded;                       /* measured traces put in populations */
	int samples, samples_invalid;     /* fresh sketch applications */
	int mutants, mutants_discarded;   /* replay or verify failed: discarded */
	int mutants_duplicate;            /* already in the pool: not kept */
	int prior_invalid;                /* prior traces that no longer replay */
	int stale_rounds, flat_rounds;    /* the plateau counters at the end */
	char last_invalid[256];           /* the last reason a candidate was dropped */
} search_stats;

/* tir_tune over an explicit space; stats may be NULL.  The contract is
 * tir_tune's. */
int search_run(const tir_workload *w, const tir_target *t,
	       const tir_tune_opts *opts, const search_space *space,
	       tir_tune_result *res, search_stats *stats, tir_error *err);

/* The 32-byte identity of a canonical trace text. */
void search_trace_hash(const char *trace, unsigned char out[32]);

/* Replays trace on a fresh schedule of w and validates the program for t.
 * Returns the schedule (its trace is the canonical text), or NULL with the
 * reason. */
tir_sched *search_replay(const tir_workload *w, const tir_target *t,
			 const char *trace, tir_error *err);

/* ---- mutate.c: mutators ----------------------------------------------------- */

/* The decisions a mutator may change: sample_perfect_tile (move one prime
 * factor of one tile to another position, keeping the product and
 * max_innermost), sample_categorical (another candidate index),
 * sample_compute_location (another location index).  Returns how many
 * sampling instructions of the trace can be mutated. */
int mutate_count(const char *trace);

/* A copy of trace (malloc'd) with one decision of one sampling instruction
 * changed, drawn from *rng; NULL when the trace has nothing to mutate.  The
 * copy is only a proposal: the caller replays and validates it
 * (search_replay) and discards it on failure. */
char *mutate_trace(const char *trace, uint64_t *rng);

/* The generator every part of the search draws from (xorshift64*). */
/* parallel.c: fn(ctx, i) for every i in [0, n), spread over `threads`
 * threads (<= 0: one per core, at most SEARCH_MAX_THREADS), the caller one
 * of them; returns when all are done.  fn must only write its own slot. */
#define SEARCH_MAX_THREADS 64
void search_parallel_for(int n, int threads, void (*fn)(void *ctx, int i), void *ctx);
int search_cores(void);
uint64_t search_rand(uint64_t *rng);
/* A seed derived from a seed and two indices (splitmix64 of their mix). */
uint64_t search_derive(uint64_t seed, uint64_t a, uint64_t b);

/* ---- tune.c: the default cost model ------------------------------------------ */

/* Random scores from a generator seeded by the tuning seed; update() is a
 * no-op.  self is a search_random_model. */
typedef struct search_random_model { uint64_t rng; } search_random_model;
extern const tir_cost_model search_random_cost_model;

/* ---- batch.c: tir_measure_local --------------------------------------------- */

/* The context tir_measure_local takes (ctx may also be NULL: default options,
 * the reference computed for every batch).  With a context the reference
 * output is computed once per (workload, seed) and kept until
 * search_local_clear. */
typedef struct search_local {
	tir_measure_opts opts;      /* repeats, min_repeat_us, timeout_s, seed */
	int threads;                /* builders; 0: every online core */
	char ref_key[65];           /* workload key of ref */
	uint64_t ref_seed;
	double *ref;
	int64_t ref_n;
	tir_measure_phases phases;  /* of the last batch */
} search_local;

void search_local_clear(search_local *l);

#endif
