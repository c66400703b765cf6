/*
 * fuzz_records.c — records files (tirctl export, tird-records/1) down the
 * path of an import, POST /v1/records: tir_records_parse under tird's
 * limits, trust_check_import (every trace replayed and validated for its
 * target, every ok within the bounds), then store_import into a fresh
 * in-memory database (schema/store.c, one transaction), as api.c stores it.
 * An input's last byte says whether the import is trusted (odd) or not.
 *
 * Checked on every input:
 *   - a refusal names its fault;
 *   - what passed the checks is stored (the store refuses nothing the
 *     checks let through): added + already present = the records;
 *   - a trusted import's best of each (workload, target) is one of the
 *     file's ok records of that pair, no slower than the fastest of them
 *     (ids repeat when traces do: the first stored stands), with trials at
 *     most the pair's records; an untrusted import makes no best.
 * A fresh database per input keeps every crash reproducible from its input
 * alone.
 */
#include <math.h>
#include "tird.h"
#include "fuzz.h"

static tir_limits limits;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	tird_config c;
	char msg[256];
	config_defaults(&c);           /* tird's limits, as its config makes them */
	if (config_set(&c, "log_level", "error", msg, sizeof msg) ||
	    config_finish(&c, msg, sizeof msg)) {
		fprintf(stderr, "fuzz_records: %s\n", msg);
		exit(1);
	}
	limits = c.limits;
	config_free(&c);
	return 0;
}

static void check_bests(store *db, const tir_records *recs, bool trust)
{
	int nr = tir_records_count(recs);
	for (int i = 0; i < nr; i++) {
		const tir_record *x = tir_records_at(recs, i);
		const char *key = tir_workload_key(tir_records_workload(recs, x->workload));
		double fastest = INFINITY;
		int count = 0;
		bool found_latency = false;
		store_best b;
		store_error err;
		int got = store_best_get(db, key, x->target, &b, &err);
		FUZZ_ASSERT(got >= 0, "best of records[%d]: %s", i, err.msg);
		for (int k = 0; k < nr; k++) {
			const tir_record *y = tir_records_at(recs, k);
			if (y->workload != x->workload || strcmp(y->target, x->target))
				continue;
			count++;
			if (strcmp(y->status, "ok"))
				continue;
			if (y->latency_us < fastest)
				fastest = y->latency_us;
			if (got == 1 && b.record_id[0] && y->latency_us == b.latency_us)
				found_latency = true;
		}
		if (got == 1 && b.record_id[0]) {
			FUZZ_ASSERT(trust, "an untrusted import made a best (records[%d])", i);
			FUZZ_ASSERT(found_latency && b.latency_us >= fastest,
				    "best %g us of records[%d]'s pair is none of its ok records "
				    "(fastest %g)", b.latency_us, i, fastest);
		} else {
			FUZZ_ASSERT(!trust || fastest == INFINITY, "a trusted ok import (records[%d], "
				    "%g us) made no best", i, fastest);
		}
		if (got == 1)
			FUZZ_ASSERT(b.trials <= count, "trials %d of records[%d]'s pair, %d records",
				    b.trials, i, count);
		if (got == 1)
			store_best_clear(&b);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tir_records_fault fault;
	tir_error err = { "" };
	bool trust = size && (data[size - 1] & 1);
	tir_records *recs = tir_records_parse((const char *)data, size, &limits, &fault, &err);
	if (!recs) {
		FUZZ_ASSERT(err.msg[0], "a refused records file without a message");
		FUZZ_NOTE("refused: %s", err.msg);
		return 0;
	}
	char **canon = trust_check_import(recs, &err);
	if (!canon) {
		FUZZ_ASSERT(err.msg[0], "a refused import without a message");
		FUZZ_NOTE("refused: %s", err.msg);
		tir_records_free(recs);
		return 0;
	}
	int nw = tir_records_workloads(recs), nr = tir_records_count(recs), nt = 0;
	store_workload *wls = tird_xcalloc((size_t)nw + 1, sizeof *wls);
	store_target *tg = tird_xcalloc((size_t)nr + 1, sizeof *tg);
	store_record *rec = tird_xcalloc((size_t)nr + 1, sizeof *rec);
	for (int i = 0; i < nw; i++) {
		const tir_workload *w = tir_records_workload(recs, i);
		wls[i] = (store_workload){ tir_workload_key(w), tir_workload_op(w),
					   tir_workload_canonical(w), tir_workload_flops(w) };
	}
	for (int i = 0; i < nr; i++) {
		const tir_record *x = tir_records_at(recs, i);
		FUZZ_ASSERT(canon[i], "records[%d] passed without a canonical trace", i);
		rec[i] = (store_record){ .workload_key = wls[x->workload].key, .target = x->target,
					 .trace = canon[i], .status = x->status,
					 .latency_us = x->latency_us,
					 .max_rel_error = x->max_rel_error, .message = x->message,
					 .worker = x->worker, .created = x->created,
					 .imported = true, .trusted = trust, .source = "fuzz",
					 .token = NULL, .host = "127.0.0.1" };
		tg[nt++] = (store_target){ x->target, strncmp(x->target, "cuda:", 5) ? "cpu" : "cuda" };
	}
	store_error serr;
	store *db = store_open(":memory:", &serr);
	FUZZ_ASSERT(db, "%s", serr.msg);
	store_import_result res;
	FUZZ_ASSERT(!store_import(db, wls, nw, tg, nt, rec, nr, &res, &serr),
		    "an import that passed the checks was refused: %s", serr.msg);
	FUZZ_ASSERT(res.added + res.present == nr, "%d added + %d present of %d records",
		    res.added, res.present, nr);
	check_bests(db, recs, trust);
	store_close(db);
	for (int i = 0; i < nr; i++)
		free(canon[i]);
	free(canon);
	free(rec);
	free(tg);
	free(wls);
	tir_records_free(recs);
	return 0;
}
