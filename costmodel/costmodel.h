/*
 * costmodel.h — the learned cost model: program features and an XGBoost
 * ranker trained online.  Prefix cm_.
 *
 * The tuner declares the cost-model interface (tir_cost_model in tir.h) and
 * ranks candidates with a random model of its own; this folder implements
 * the XGBoost table, and the daemon plugs it in.  One model per target kind
 * is shared by every workload tuned on that target: each measured candidate
 * adds a row (its features, its workload, its GFLOP/s), the booster is
 * retrained on all rows, and the whole model (rows and booster) is saved as
 * one blob the daemon keeps in its database.  A new model learns what was
 * measured before it from records (records.c): the cache's own and a seed's.
 */
#ifndef TIR_COSTMODEL_H
#define TIR_COSTMODEL_H

#include <stdbool.h>
#include <stddef.h>
#include "tir.h"

/* ---- features.c ---------------------------------------------------------- */

#define CM_NFEATURES 106
/* Raised whenever a feature changes meaning without changing its name: a
 * model saved with other features is not loaded (cm_model_load). */
#define CM_FEATURES_VERSION 3

/* The names of the features, for people and for the evaluation. */
extern const char *const cm_feature_names[CM_NFEATURES];

/* Fills out[0..CM_NFEATURES) with the features of program p on target t
 * (documented feature by feature in features.c).  Every value is finite.
 * Returns 0, or -1 if the program cannot be lowered. */
int cm_features(const tir_program *p, const tir_target *t, float *out,
		tir_error *err);

/* ---- xgb.c ---------------------------------------------------------------- */

typedef struct cm_model cm_model;

/* An empty model: it predicts nothing until it has been trained on at least
 * CM_MIN_ROWS rows of which some succeeded. */
#define CM_MIN_ROWS 16
cm_model *cm_model_new(void);
void cm_model_free(cm_model *m);
/* Threads the tir_cost_model table (cm_xgboost) may use to compute the
 * features of the programs it scores or learns (0: a core each; 1, the
 * default: the calling thread only).  Scores never depend on it. */
void cm_model_set_threads(cm_model *m, int threads);

/* Adds measured candidates: n rows of features with their GFLOP/s (0 for a
 * candidate that failed), of the workload `group` (its key).  Then retrains
 * the shared booster when enough rows exist and the rows it has not learned
 * reach an eighth of those it learned (xgb.c, CM_RETRAIN_DIV; the workload's
 * own booster of cm_model_predict_group learns every batch), and returns
 * when the new booster is installed.
 * Thread-safe: the retraining does not hold the model's lock, so
 * predictions on other threads go on meanwhile with the booster installed
 * before (never a half-trained one). */
int cm_model_add(cm_model *m, const char *group, int n, const float *features,
		 const double *gflops, tir_error *err);
/* The same rows added without training, for many workloads at once (a
 * model rebuilt from records, or seeded); cm_model_train then trains once
 * on all of them, no workload favoured. */
void cm_model_append(cm_model *m, const char *group, int n, const float *features,
		     const double *gflops);
int cm_model_train(cm_model *m, tir_error *err);
/* Scores n feature rows (higher: predicted faster).  Returns -1 while the
 * model is untrained (callers then fall back to random scores). */
int cm_model_predict(cm_model *m, int n, const float *features, double *scores);
/* The same scores for candidates of workload `group`, blended with its
 * own: once the model holds CM_MIN_ROWS rows of that workload (and rows of
 * others), a booster trained on its rows alone scores them too, and the
 * score is the mix of both, each scaled by its spread over the workload's
 * rows, each weighed by how well it ranked the workload's rows before it
 * learned them (counted by cm_model_add; CM_JUDGE_PRIOR pairs at 0.6 before
 * any).  The shared booster carries what other workloads taught; the own
 * one what this workload's measurements say where they differ (xgb.c).  An
 * unknown group, or one without its own booster, gets cm_model_predict's
 * scores. */
#define CM_JUDGE_PRIOR 60
int cm_model_predict_group(cm_model *m, const char *group, int n, const float *features,
			   double *scores);
/* Rows held, rows the booster was last trained on (at most 16,384: past
 * that, the workload just added keeps up to half and the others share the
 * rest), and whether the booster is trained. */
int cm_model_rows(const cm_model *m);
int cm_model_trained_rows(const cm_model *m);
bool cm_model_trained(const cm_model *m);

/* What a person asks of a model: its rows, when it was last trained
 * (a Unix time; 0: not since it was loaded or made), and how well the
 * shared booster ranked rows before it learnt them — the pairs of rows of
 * different throughput it was given to rank and those it ordered right
 * (a tie half right), over every batch of every workload (kept in the
 * blob) and over the newest batches (up to 8, since the model was loaded). */
typedef struct cm_stats {
	int rows, trained_rows, workloads;
	bool trained;
	double trained_at;
	double judged_pairs, judged_right;
	int recent_batches;
	double recent_pairs, recent_right;
} cm_stats;
void cm_model_stats(const cm_model *m, cm_stats *out);

/* The whole model as one blob (malloc'd) and back; a loaded model predicts
 * exactly as the saved one did. */
int cm_model_save(cm_model *m, unsigned char **blob, size_t *len, tir_error *err);
cm_model *cm_model_load(const void *blob, size_t len, tir_error *err);
/* Replaces m's rows, booster and tallies by those of `from` (a model just
 * loaded, cm_model_load, by a replica that reads what another writes),
 * whole: the swap holds m's lock only to exchange pointers, so a search
 * scoring with m on another thread sees the old model or the new one,
 * never a mix, and waits for no load.  A training of m under way when it
 * happens is not installed (its rows were the old ones); what m learnt
 * since it was loaded is dropped with them.  m keeps its threads setting
 * (cm_model_set_threads).  from is freed: it is no longer valid. */
void cm_model_replace(cm_model *m, cm_model *from);

/* The tir_cost_model table over a cm_model (self): predict computes features
 * and scores them, update adds the rows under the workload's key. */
extern const tir_cost_model cm_xgboost;

/* ---- records.c: rows from measured records ---------------------------------- */

/* One measured record as a model learns from it. */
typedef struct cm_record {
	const char *target;        /* its full key */
	const char *trace;
	bool ok;
	double latency_us;         /* when ok */
} cm_record;

/* Appends records r[0..n) of workload w to m (cm_model_append, no training)
 * under group: each replayed on a fresh schedule of w and its features
 * computed by this build, on every core, in the records' order.  Records
 * that do not replay (w NULL: all) are left out and counted in *skipped.
 * Returns the rows added. */
int cm_model_append_records(cm_model *m, const char *group, const tir_workload *w, int n,
			    const cm_record *r, int *skipped);

/* Appends the records of file path (tirctl export's format, tird-records/1)
 * whose target key is of prefix ("cpu:" any CPU, "cpu:x86_64" that
 * architecture with any features, "cuda:sm_90"; never a key ending in
 * "+emulated") to m, each
 * workload's under the group "seed:KEY": never in one ranking group with a
 * cache's own measurements of the same workload, which another machine's
 * latencies are not comparable with.  Returns the rows added (*nworkloads:
 * of how many workloads), or -1 with err naming the fault in the file. */
int cm_model_append_file(cm_model *m, const char *path, const char *prefix, int *nworkloads,
			 int *skipped, tir_error *err);

#endif
