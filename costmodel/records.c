/*
 * records.c — a model's rows from measured records: the way a new model
 * learns what a tuning cache (or a seed file) already measured.
 *
 * A record holds a trace, not features: features depend on the build that
 * computes them (CM_FEATURES_VERSION), so every record is replayed on a
 * fresh schedule of its workload and its features computed again, by this
 * build.  That is a start-up's work, before any job runs, so it uses every
 * core; each row is computed in its own slot, and the rows keep the
 * records' order whatever the thread count.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "costmodel.h"
#include "ir/ir.h"

typedef struct row_job {
	const tir_workload *w;
	const cm_record *r;
	float *f;
	double *g;
	bool *ok;
} row_job;

/* Row i of a row_job: record i replayed and its features computed. */
static void row_of(void *ctx, int i)
{
	row_job *j = ctx;
	tir_target t;
	tir_sched *s = NULL;
	tir_error terr;
	const cm_record *r = &j->r[i];
	j->ok[i] = tir_target_parse(r->target, &t, &terr) == 0 &&
		   (s = tir_sched_new(j->w, 1, &terr)) && tir_sched_replay(s, r->trace, &terr) == 0 &&
		   cm_features(tir_sched_program(s), &t, &j->f[(size_t)i * CM_NFEATURES], &terr) == 0;
	j->g[i] = r->ok && r->latency_us > 0 ? tir_workload_flops(j->w) / (r->latency_us * 1e3) : 0;
	tir_sched_free(s);
}

int cm_model_append_records(cm_model *m, const char *group, const tir_workload *w, int n,
			    const cm_record *r, int *skipped)
{
	int k = 0;
	if (w && n > 0) {
		float *f = xmalloc(sizeof(float) * (size_t)n * CM_NFEATURES);
		double *g = xmalloc(sizeof(double) * (size_t)n);
		row_job j = { w, r, f, g, xcalloc((size_t)n, sizeof(bool)) };
		tir_parallel_for(n, 0, row_of, &j);
		for (int i = 0; i < n; i++)
			if (j.ok[i]) {
				if (k != i) {
					memmove(&f[(size_t)k * CM_NFEATURES], &f[(size_t)i * CM_NFEATURES],
						sizeof(float) * CM_NFEATURES);
					g[k] = g[i];
				}
				k++;
			}
		cm_model_append(m, group, k, f, g);
		free(j.ok);
		free(f);
		free(g);
	}
	*skipped += n - k;
	return k;
}

/* Whether a record of target key `target` is of prefix: the key itself, or
 * one that goes on with a feature ("cpu:x86_64" takes "cpu:x86_64+avx2",
 * never "cpu:x86_64x"; "cpu:" every CPU); never one measured under an
 * emulator ("+emulated"), whose timings are not the hardware's. */
static bool of_prefix(const char *target, const char *prefix, size_t plen)
{
	size_t n = strlen(target), e = strlen("+emulated");
	if (strncmp(target, prefix, plen) ||
	    (plen && prefix[plen - 1] != ':' && target[plen] != '\0' && target[plen] != '+'))
		return false;
	return !(n > e && !strcmp(target + n - e, "+emulated"));
}

int cm_model_append_file(cm_model *m, const char *path, const char *prefix, int *nworkloads,
			 int *skipped, tir_error *err)
{
	*nworkloads = 0;
	tir_records *recs = tir_records_read(path, NULL, NULL, err);
	if (!recs)
		return -1;
	size_t plen = strlen(prefix);
	int rows = 0, nrec = tir_records_count(recs);
	cm_record *r = xcalloc((size_t)(nrec ? nrec : 1), sizeof *r);
	for (int i = 0; i < tir_records_workloads(recs); i++) {
		const tir_workload *w = tir_records_workload(recs, i);
		int c = 0;
		for (int j = 0; j < nrec; j++) {
			const tir_record *x = tir_records_at(recs, j);
			if (x->workload == i && of_prefix(x->target, prefix, plen))
				r[c++] = (cm_record){ x->target, x->trace, !strcmp(x->status, "ok"),
						      x->latency_us };
		}
		if (c == 0)
			continue;
		char group[96];
		snprintf(group, sizeof group, "seed:%s", tir_workload_key(w));
		int added = cm_model_append_records(m, group, w, c, r, skipped);
		rows += added;
		*nworkloads += added > 0;
	}
	free(r);
	tir_records_free(recs);
	return rows;
}
