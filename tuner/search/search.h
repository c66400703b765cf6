/*
 * search.h — the evolutionary search behind tir_tune (tir.h) and its
 * mutators.  Internal to tuner/.
 *
 * The search (evolve.c) sees the space it explores only through a
 * search_space: how many sketches there are and how to apply one to a fresh
 * schedule.  tir_tune (tune.c) makes one from tir_sketches/tir_sketch_apply;
 * tests make their own, so the loop can be checked without the real sketches.
 *
 * Every candidate is a trace.  Its identity is the SHA-256 of its canonical
 * text (tir_trace_hash) — the trace a fresh schedule prints after replaying
 * it (sched_replay_valid, sched/sched.h) — so the same decisions of the same
 * sketch are the same candidate wherever they came from (a sample, a mutant,
 * a prior record written by an older process).
 *
 * Measure functions (tir_measure_batch_fn) fill out[i].status, latency_us,
 * max_rel_error and msg; msg is NULL or malloc'd, and the caller frees it
 * (tir_tune does, after on_result).
 */
#ifndef TIR_SEARCH_H
#define TIR_SEARCH_H

#include <stdbool.h>
#include <stdint.h>
#include "../tir.h"

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
 * fails), or, given a patience (tir_tune_opts.patience), after that many
 * rounds in a row that measured something but did not improve the best
 * latency by more than 0.1 % (tir.h: tir_tune_end). */
#define SEARCH_STALE_ROUNDS    TIR_TUNE_STALE_ROUNDS

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
 * (sched_replay_valid) and discards it on failure. */
char *mutate_trace(const char *trace, uint64_t *rng);

/* Every draw of the search is tir_rand / tir_derive's (ir/rand.c). */

/* ---- tune.c: the default cost model ------------------------------------------ */

/* Random scores from a generator seeded by the tuning seed; update() is a
 * no-op.  self is a search_random_model. */
typedef struct search_random_model { uint64_t rng; } search_random_model;
extern const tir_cost_model search_random_cost_model;

#endif
