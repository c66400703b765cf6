/*
 * sched.h — schedules: the program being transformed, its random variables
 * and its trace.  Internal to tuner/.
 *
 * Every primitive goes through one path, sched_apply: the public tir_split()
 * etc. build a tir_inst and apply it; replaying a trace applies the parsed
 * instructions the same way.  So a program built by calls and the same
 * program replayed from its trace are equal by construction.
 *
 * An instruction's inputs are RVs or literals (tir_int), its outputs new RVs.
 * String attributes (block name, thread tag, scope, annotation key) go in
 * `str`; integer attributes in `attr`; sampled decisions in `decision`.
 * Primitives check every precondition before they change the program; if they
 * fail, sched_apply drops the RVs they allocated and the trace is unchanged.
 */
#ifndef TIR_SCHED_H
#define TIR_SCHED_H

#include "../ir/ir.h"

typedef enum {
#define TIR_PRIM(id, name, file) PRIM_##id,
#include "prims.def"
#undef TIR_PRIM
	PRIM_NKINDS
} tir_prim;

typedef enum { RV_BLOCK, RV_LOOP, RV_INT } tir_rv_kind;

typedef struct tir_rv {
	tir_rv_kind kind;
	tir_block *block;
	tir_stmt *loop;
	int64_t value;
} tir_rv;

#define TIR_MAX_IO 32
typedef struct tir_inst {
	tir_prim op;
	int nin;
	tir_int in[TIR_MAX_IO];
	int nout;
	int out[TIR_MAX_IO];
	const char *str;            /* owned by the schedule's arena */
	int nattr;
	int64_t attr[4];
	int nfattr;
	double fattr[TIR_MAX_IO];
	int ndecision;              /* > 0: replay these decisions */
	int64_t decision[TIR_MAX_IO];
} tir_inst;

struct tir_sched {
	tir_program *p;
	const tir_workload *w;
	tir_arena arena;            /* strings of the trace */
	int nrv, caprv;
	tir_rv *rv;
	int ninst, capinst;
	tir_inst *inst;
	uint64_t rng;
};

const char *prim_name(tir_prim k);
int prim_parse(const char *name);                   /* -1 if unknown */

/* Applies one instruction; on success appends it to the trace. */
int sched_apply(tir_sched *s, tir_inst *in, tir_error *err);

/* For primitives. */
int sched_new_rv(tir_sched *s, tir_rv_kind k);
tir_block *sched_block(tir_sched *s, tir_int rv, tir_error *err);
tir_stmt *sched_loop(tir_sched *s, tir_int rv, tir_error *err);
/* The value of a literal or integer RV. */
int sched_value(tir_sched *s, tir_int x, int64_t *v, tir_error *err);
uint64_t sched_rand(tir_sched *s);                  /* tir_rand of the schedule's stream */
/* Each prime factor of extent to one of n levels at random (sample.c): n
 * factors whose product is extent. */
void sched_draw_factors(tir_sched *s, int64_t extent, int n, int64_t *f);
double sched_uniform(tir_sched *s);                 /* [0, 1) */

/* Rewrites the bindings and predicates of every block under `root` with the
 * substitution (loop vars to expressions) and simplifies them with the loop
 * ranges of the tree. */
void sched_rebind(tir_program *p, tir_stmt *root, const tir_subst *sub);

/* The ancestor of s directly under the root (s itself if it is there). */
tir_stmt *sched_top_stmt(tir_stmt *s);
/* An environment with b's iterators ranged over their domains. */
tir_env sched_iter_env(const tir_program *p, const tir_block *b);

/* An environment with every loop variable of the program ranged over its
 * extent: the context for simplifying bindings. */
tir_env sched_loop_env(const tir_program *p);

/* ---- sched.c: traces ---- */

/* Replays trace on a fresh schedule of w and validates the program for t
 * (tir_verify): the one way the search and the measurement turn a trace
 * into a candidate.  Returns the schedule (its trace is the canonical text),
 * or NULL with the reason. */
tir_sched *sched_replay_valid(const tir_workload *w, const tir_target *t,
			      const char *trace, tir_error *err);

/* ---- compute_at.c: placing stages ---- */

/* Puts copy block b (its statement not yet in the tree; it stores at exactly
 * its iterators, iterator d for dimension d) under `scope` (a loop or the
 * root) at child position pos, with loops covering the region of `src` that
 * the blocks others[0..n) read (writes: write) in one iteration of scope.
 * Used by cache_read and cache_write. */
void sched_place_stage(tir_program *p, tir_block *b, tir_stmt *scope, int pos,
		       tir_block *const *others, int nothers, const tir_buffer *src, bool writes);

/* ---- layout.c: stages at the top level (reindex, pad_einsum, pack.c) ---- */
/* Where a stage feeding block b from buffer buf goes: the child position at
 * the top level after the last writer of buf and before b's nest; -1 with a
 * message when a writer of buf is in or after that nest. */
int sched_input_stage_pos(const tir_program *p, const tir_block *b, const tir_buffer *buf,
			  tir_error *err);
/* A spatial block `name` storing dst[store_idx] over the iterators w[0..n)
 * of extents ext, with `value` in those iterators, nested fresh at the top
 * level at child position pos. */
tir_block *sched_stage_block(tir_program *p, const char *name, tir_buffer *dst, int n,
			     const int64_t *ext, tir_var **w, tir_expr *const *store_idx,
			     tir_expr *value, int pos);
/* ---- sample_loc.c ---- */

/* The side a trace without one implies (compute_at when something reads b's
 * output, else reverse_compute_at). */
tir_loc_side sched_location_side(const tir_program *p, const tir_block *b);
/* The candidate loops of sample_compute_location for block b and side,
 * outermost first (see tir_sample_compute_location in tir.h): fills
 * out[0..min(n, max)), returns n or -1 with a message. */
int sched_compute_locations(const tir_program *p, const tir_block *b, tir_loc_side side,
			    tir_stmt **out, int max, tir_error *err);

/* Each primitive. */
#define TIR_PRIM(id, name, file) \
	int prim_##name(tir_sched *s, tir_inst *in, tir_error *err);
#include "prims.def"
#undef TIR_PRIM

#endif
