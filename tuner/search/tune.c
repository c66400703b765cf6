/*
 * tune.c — tir_tune: the workload's sketches (sketch/) as the space of an
 * evolutionary search (evolve.c), and the tuner's own cost model, which
 * scores at random.
 *
 * The random model is the default so that libtir tunes alone; costmodel/
 * plugs XGBoost in through the same table (tir_cost_model).  Its generator
 * lives in the search's state, seeded from the tuning seed, so a search under
 * it stays deterministic and two tuning threads never share it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "search.h"
#include "../ir/ir.h"

/* ---- the random cost model -------------------------------------------------- */

static int random_predict(void *self, const tir_workload *w, const tir_target *t,
			  int n, const tir_program *const *progs, double *scores)
{
	search_random_model *m = self;
	for (int i = 0; i < n; i++)
		scores[i] = tir_rand_unit(&m->rng);
	return 0;
}

static void random_update(void *self, const tir_workload *w, const tir_target *t,
			  int n, const tir_program *const *progs, const double *gflops)
{
}

const tir_cost_model search_random_cost_model = {
	.name = "random",
	.predict = random_predict,
	.update = random_update,
};

/* ---- tir_tune ---------------------------------------------------------------- */

typedef struct sketch_space {
	const tir_workload *w;
	const tir_target *t;
	tir_sketch sk[TIR_MAX_SKETCHES];
} sketch_space;

static int apply_sketch(void *ctx, int id, tir_sched *s, tir_error *err)
{
	sketch_space *sp = ctx;
	return tir_sketch_apply(sp->w, sp->t, sp->sk[id].id, s, err);
}

int tir_tune(const tir_workload *w, const tir_target *t, const tir_tune_opts *opts,
	     tir_tune_result *res, tir_error *err)
{
	memset(res, 0, sizeof *res);
	sketch_space sp = { .w = w, .t = t };
	search_space space = { .apply = apply_sketch, .ctx = &sp };
	space.nsketches = tir_sketches(w, t, sp.sk, TIR_MAX_SKETCHES, err);
	if (space.nsketches < 0)
		return -1;
	for (int i = 0; i < space.nsketches; i++)
		snprintf(space.names[i], sizeof space.names[i], "%s", sp.sk[i].name);
	return search_run(w, t, opts, &space, res, NULL, err);
}

void tir_tune_result_clear(tir_tune_result *res)
{
	if (!res)
		return;
	free(res->best_trace);
	memset(res, 0, sizeof *res);
}
