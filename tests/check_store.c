/*
 * check_store.c — the store (schema/), on either backend: SQLite (a file in
 * /tmp), or PostgreSQL when TIRD_TEST_PG names a scratch database
 * (postgresql://USER@HOST:PORT/DBNAME; every test empties its public schema
 * first: tests/postgres.sh starts a throwaway server and runs this so).  The
 * same tests, the same expectations, on both: migrations (a 001 database
 * brought up to date with its jobs intact), the job state transitions and
 * search options, records and the best row per (workload, FULL target), record
 * ids and idempotent inserts, an import all or nothing, persistence across
 * reopen; provenance (003): untrusted imports count for nothing, a
 * measurement replaces an import of its trace, a removal recomputes the best;
 * leases (004): a job claimed once until its lease passes, then taken over,
 * the old owner's moves and progress refused; dedupe by insert-or-join; a
 * cost model written only by its writer lease's holder; worker batches
 * (006) through their states.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sqlite3.h>
#ifdef HAVE_LIBPQ
#include <libpq-fe.h>
#endif
#include "store.h"
#include "testutil.h"

static char dbpath[256];
static store *db;
static const char *pg_url;     /* TIRD_TEST_PG, or NULL: SQLite */

#ifdef HAVE_LIBPQ
static void quiet(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}
#endif

/* Runs SQL (statements, no parameters) on the test's database as a client
 * of its own, not through the store. */
static void sql(const char *text)
{
	if (!pg_url) {
		sqlite3 *h;
		char *msg = NULL;
		ck_assert_int_eq(sqlite3_open(dbpath, &h), SQLITE_OK);
		int rc = sqlite3_exec(h, text, NULL, NULL, &msg);
		ck_assert_msg(rc == SQLITE_OK, "%s: %s", text, msg ? msg : "");
		sqlite3_free(msg);
		sqlite3_close(h);
		return;
	}
#ifdef HAVE_LIBPQ
	PGconn *c = PQconnectdb(pg_url);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s: %s", pg_url, PQerrorMessage(c));
	PQsetNoticeProcessor(c, quiet, NULL);
	PGresult *r = PQexec(c, text);
	ExecStatusType st = PQresultStatus(r);
	ck_assert_msg(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "%s: %s", text,
		      PQresultErrorMessage(r));
	PQclear(r);
	PQfinish(c);
#else
	ck_abort_msg("TIRD_TEST_PG is set but this build has no libpq");
#endif
}

static void setup(void)
{
	pg_url = getenv("TIRD_TEST_PG");
	if (pg_url && !*pg_url)
		pg_url = NULL;
	if (pg_url) {
		snprintf(dbpath, sizeof dbpath, "%s", pg_url);
		sql("DROP SCHEMA public CASCADE; CREATE SCHEMA public");
	} else {
		snprintf(dbpath, sizeof dbpath, "/tmp/check_store.%d.db", (int)getpid());
		unlink(dbpath);
	}
	store_error err;
	db = store_open(dbpath, &err);
	ck_assert_msg(db != NULL, "%s", err.msg);
	ck_assert_str_eq(store_backend_name(db), pg_url ? "postgresql" : "sqlite");
}

static void teardown(void)
{
	store_close(db);
	if (pg_url)
		return;
	char p[300];
	unlink(dbpath);
	snprintf(p, sizeof p, "%s-wal", dbpath);
	unlink(p);
	snprintf(p, sizeof p, "%s-shm", dbpath);
	unlink(p);
}

static const char *WK = "aaaa000000000000000000000000000000000000000000000000000000000001";
static const char *CPU1 = "cpu:x86_64+avx2+fma";
static const char *CPU2 = "cpu:x86_64+avx512f";

static void put_basics(void)
{
	store_error err;
	ck_assert_int_eq(store_workload_put(db, WK, "matmul", "{\"op\":\"matmul\",\"M\":8}",
					    1024, &err), 0);
	ck_assert_int_eq(store_target_put(db, CPU1, "cpu", &err), 0);
	ck_assert_int_eq(store_target_put(db, CPU2, "cpu", &err), 0);
}

static int add(const char *target, const char *trace, const char *status, double us,
	       bool *changed)
{
	store_error err;
	store_record r = { .workload_key = WK, .target = target, .trace = trace,
			   .status = status, .latency_us = us, .max_rel_error = 0 };
	int rc = store_record_add(db, &r, changed, &err);
	ck_assert_msg(rc >= 0, "%s", err.msg);
	return rc;
}

static void count_rec(void *ctx, const store_record *r)
{
	(void)r;
	(*(int *)ctx)++;
}

/* store_records_page: every record once, in pages, whatever the page size;
 * a filter applies; a record added between pages comes in a later one. */
START_TEST(records_page_through_every_record_once)
{
	put_basics();
	char tr[64];
	for (int i = 0; i < 10; i++) {
		snprintf(tr, sizeof tr, "{\"insts\":[],\"n\":%d}", i);
		add(i % 2 ? CPU2 : CPU1, tr, "ok", 10.0 + i, NULL);
	}
	store_error err;
	int64_t cursor = 0;
	int seen = 0, pages = 0, n;
	while ((n = store_records_page(db, NULL, NULL, &cursor, 3, count_rec, &seen, &err)) > 0) {
		pages++;
		if (pages == 2)
			add(CPU1, "{\"insts\":[],\"late\":1}", "ok", 5, NULL);
	}
	ck_assert_int_eq(n, 0);
	ck_assert_int_eq(seen, 11);
	ck_assert_int_eq(pages, 4);
	cursor = 0;
	seen = 0;
	while (store_records_page(db, WK, CPU2, &cursor, 2, count_rec, &seen, &err) > 0)
		;
	ck_assert_int_eq(seen, 5);
}
END_TEST

START_TEST(migrations_apply_once)
{
	ck_assert_int_ge(store_schema_version(db), 1);
	store_close(db);
	store_error err;
	db = store_open(dbpath, &err);             /* a second open applies nothing */
	ck_assert_msg(db != NULL, "%s", err.msg);
	ck_assert_int_ge(store_schema_version(db), 1);
}
END_TEST

START_TEST(record_ids_are_content_hashes)
{
	char a[65], b[65], c[65];
	store_record_id(WK, CPU1, "{\"insts\":[]}", a);
	store_record_id(WK, CPU1, "{\"insts\":[]}", b);
	store_record_id(WK, CPU2, "{\"insts\":[]}", c);
	ck_assert_str_eq(a, b);
	ck_assert_str_ne(a, c);
	ck_assert_int_eq((int)strlen(a), 64);
}
END_TEST

START_TEST(best_follows_ok_records_per_full_target)
{
	put_basics();
	bool changed;
	ck_assert_int_eq(add(CPU1, "t1", "build_error", 0, &changed), 1);
	ck_assert(!changed);
	store_best b;
	store_error err;
	ck_assert_int_eq(store_best_get(db, WK, CPU1, &b, &err), 1);
	ck_assert_str_eq(b.record_id, "");         /* nothing ok yet */
	ck_assert_int_eq(b.trials, 1);
	store_best_clear(&b);
	ck_assert_int_eq(add(CPU1, "t2", "ok", 20, &changed), 1);
	ck_assert(changed);
	ck_assert_int_eq(add(CPU1, "t3", "ok", 30, &changed), 1);
	ck_assert(!changed);                         /* slower */
	ck_assert_int_eq(add(CPU1, "t4", "ok", 10, &changed), 1);
	ck_assert(changed);
	ck_assert_int_eq(add(CPU1, "t4", "ok", 5, &changed), 0);   /* same id: ignored */
	ck_assert_int_eq(store_best_get(db, WK, CPU1, &b, &err), 1);
	ck_assert_int_eq(b.trials, 4);
	ck_assert(b.latency_us == 10);
	ck_assert_str_eq(b.trace, "t4");
	ck_assert_str_eq(b.op, "matmul");
	store_best_clear(&b);
	/* another full target shares nothing */
	ck_assert_int_eq(store_best_get(db, WK, CPU2, &b, &err), 0);
	ck_assert_int_eq(add(CPU2, "t4", "ok", 50, &changed), 1);  /* same trace, new id */
	ck_assert_int_eq(store_record_count(db, WK, CPU1, &err), 4);
	ck_assert_int_eq(store_record_count(db, WK, CPU2, &err), 1);
}
END_TEST

static void count_best(void *ctx, const store_best *b)
{
	(void)b;
	(*(int *)ctx)++;
}

START_TEST(best_each_filters_op_and_target_prefix)
{
	put_basics();
	add(CPU1, "t1", "ok", 10, NULL);
	add(CPU2, "t1", "ok", 12, NULL);
	int n = 0;
	store_error err;
	ck_assert_int_eq(store_best_each(db, "matmul", NULL, NULL, count_best, &n, &err), 2);
	n = 0;
	ck_assert_int_eq(store_best_each(db, "matmul", CPU1, NULL, count_best, &n, &err), 1);
	ck_assert_int_eq(store_best_each(db, "matmul", NULL, "cpu:", count_best, &n, &err), 2);
	ck_assert_int_eq(store_best_each(db, "matmul", NULL, "cuda:", count_best, &n, &err), 0);
	ck_assert_int_eq(store_best_each(db, "conv2d", NULL, NULL, count_best, &n, &err), 0);
	/* an exact key or a prefix (the daemon's filter of "cuda:sm_90": the
	 * key and each of its parts, tird_target_filter_of) */
	static const char *const gpus[] = { "cuda:sm_90", "cuda:sm_90+h200",
					    "cuda:sm_90+h100-80gb-hbm3", "cuda:sm_80+a100" };
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(store_target_put(db, gpus[i], "cuda", &err), 0);
		add(gpus[i], "t1", "ok", 5 + i, NULL);
	}
	ck_assert_int_eq(store_best_each(db, "matmul", NULL, "cuda:", count_best, &n, &err), 4);
	ck_assert_int_eq(store_best_each(db, "matmul", "cuda:sm_90", "cuda:sm_90+", count_best,
					 &n, &err), 3);
	ck_assert_int_eq(store_best_each(db, "matmul", "cuda:sm_90+h200", NULL, count_best, &n,
					 &err), 1);
	ck_assert_int_eq(store_best_each(db, "matmul", NULL, "cuda:sm_9", count_best, &n, &err), 3);
}
END_TEST

START_TEST(record_needs_a_stored_workload)
{
	store_error err;
	ck_assert_int_eq(store_target_put(db, CPU1, "cpu", &err), 0);
	store_record r = { .workload_key = WK, .target = CPU1, .trace = "t",
			   .status = "ok", .latency_us = 1, .max_rel_error = 0 };
	ck_assert_int_eq(store_record_add(db, &r, NULL, &err), -1);
	ck_assert_int_eq(store_record_count(db, WK, CPU1, &err), 0);   /* rolled back */
}
END_TEST

START_TEST(job_transitions_check_the_stored_state)
{
	put_basics();
	store_error err;
	store_job j = { 0 };
	snprintf(j.workload_key, sizeof j.workload_key, "%s", WK);
	snprintf(j.target, sizeof j.target, "%s", CPU1);
	j.trials = 16;
	j.batch = 4;
	j.state = STORE_JOB_QUEUED;
	ck_assert_int_eq(store_job_insert(db, &j, &err), 0);
	ck_assert_int_gt(j.id, 0);
	ck_assert_int_eq(store_job_transition(db, j.id, STORE_JOB_QUEUED, STORE_JOB_RUNNING,
					      NULL, &err), 0);
	/* a stale `from` changes nothing */
	ck_assert_int_eq(store_job_transition(db, j.id, STORE_JOB_QUEUED, STORE_JOB_CANCELLED,
					      "x", &err), 1);
	ck_assert_int_eq(store_job_progress(db, j.id, NULL, 8, 1, 12.5, &err), 0);
	ck_assert_int_eq(store_job_transition(db, j.id, STORE_JOB_RUNNING, STORE_JOB_DONE,
					      "best 12.5 us", &err), 0);
	store_job g;
	ck_assert_int_eq(store_job_get(db, j.id, &g, &err), 1);
	ck_assert_int_eq(g.state, STORE_JOB_DONE);
	ck_assert_int_eq(g.trials_done, 8);
	ck_assert_str_eq(g.message, "best 12.5 us");
	ck_assert(g.started > 0 && g.finished >= g.started);
	store_job_clear(&g);
	ck_assert_int_eq(store_job_get(db, j.id + 100, &g, &err), 0);
	ck_assert_int_eq(store_job_transition(db, j.id + 100, STORE_JOB_QUEUED,
					      STORE_JOB_RUNNING, NULL, &err), -1);
}
END_TEST

static int64_t queued_job(void)
{
	store_error err;
	store_job j = { 0 };
	snprintf(j.workload_key, sizeof j.workload_key, "%s", WK);
	snprintf(j.target, sizeof j.target, "%s", CPU1);
	j.trials = 16;
	j.batch = 4;
	j.state = STORE_JOB_QUEUED;
	ck_assert_int_eq(store_job_insert(db, &j, &err), 0);
	return j.id;
}

static void count_job(void *ctx, const store_job *j)
{
	(void)j;
	(*(int *)ctx)++;
}

START_TEST(job_claim_holds_until_the_lease_passes)
{
	put_basics();
	store_error err;
	int64_t id = queued_job();
	double now = store_now();
	int n = 0;
	ck_assert_int_eq(store_jobs_claimable(db, now, count_job, &n, &err), 1);
	store_job was;
	ck_assert_int_eq(store_job_claim(db, id, "A", now, now + 10, &was, &err), 1);
	ck_assert_int_eq(was.state, STORE_JOB_QUEUED);
	store_job_clear(&was);
	/* held: B cannot claim it, and it is claimable no more */
	ck_assert_int_eq(store_job_claim(db, id, "B", now + 5, now + 15, NULL, &err), 0);
	n = 0;
	ck_assert_int_eq(store_jobs_claimable(db, now + 5, count_job, &n, &err), 0);
	bool cancel = true;
	ck_assert_int_eq(store_job_renew(db, id, "A", now + 12, &cancel, &err), 1);
	ck_assert(!cancel);
	ck_assert_int_eq(store_job_renew(db, id, "B", now + 12, NULL, &err), 0);
	/* a user on another replica asks it to stop: the owner reads it */
	ck_assert_int_eq(store_job_request_cancel(db, id, &err), 1);
	ck_assert_int_eq(store_job_renew(db, id, "A", now + 12, &cancel, &err), 1);
	ck_assert(cancel);
	store_job g;
	ck_assert_int_eq(store_job_get(db, id, &g, &err), 1);
	ck_assert_str_eq(g.owner, "A");
	ck_assert(g.lease_until > now + 11 && g.cancel_requested);
	store_job_clear(&g);
	/* only the owner moves it */
	ck_assert_int_eq(store_job_move(db, id, "B", STORE_JOB_RUNNING, STORE_JOB_DONE,
					NULL, &err), 1);
	ck_assert_int_eq(store_job_move(db, id, "A", STORE_JOB_RUNNING, STORE_JOB_DONE,
					"done by A", &err), 0);
	ck_assert_int_eq(store_job_claim(db, id, "B", now + 100, now + 110, NULL, &err), 0);
	ck_assert_int_eq(store_job_request_cancel(db, id, &err), 0);   /* it ended */
	ck_assert_int_eq(store_job_get(db, id, &g, &err), 1);
	ck_assert_int_eq(g.state, STORE_JOB_DONE);
	ck_assert(g.lease_until == 0);
	store_job_clear(&g);
}
END_TEST

START_TEST(job_lease_expiry_hands_the_job_over)
{
	put_basics();
	store_error err;
	int64_t id = queued_job();
	double now = store_now();
	ck_assert_int_eq(store_job_claim(db, id, "A", now, now + 3, NULL, &err), 1);
	ck_assert_int_eq(store_job_progress(db, id, "A", 4, 0, 9.5, &err), 0);
	/* A stalls past its lease: the job is claimable, B takes it over */
	int n = 0;
	ck_assert_int_eq(store_jobs_claimable(db, now + 4, count_job, &n, &err), 1);
	store_job was;
	ck_assert_int_eq(store_job_claim(db, id, "B", now + 4, now + 7, &was, &err), 1);
	ck_assert_int_eq(was.state, STORE_JOB_RUNNING);
	ck_assert_str_eq(was.owner, "A");
	store_job_clear(&was);
	/* A wakes up: it holds nothing, and writes nothing over B's work */
	ck_assert_int_eq(store_job_renew(db, id, "A", now + 8, NULL, &err), 0);
	ck_assert_int_eq(store_job_progress(db, id, "A", 99, 9, 1.0, &err), 0);
	ck_assert_int_eq(store_job_move(db, id, "A", STORE_JOB_RUNNING, STORE_JOB_FAILED,
					"A's end", &err), 1);
	store_job g;
	ck_assert_int_eq(store_job_get(db, id, &g, &err), 1);
	ck_assert_int_eq(g.state, STORE_JOB_RUNNING);
	ck_assert_str_eq(g.owner, "B");
	ck_assert_int_eq(g.trials_done, 4);
	store_job_clear(&g);
	/* B gives it back to the queue (stopping): claimable at once */
	ck_assert_int_eq(store_job_move(db, id, "B", STORE_JOB_RUNNING, STORE_JOB_QUEUED,
					"B stops", &err), 0);
	n = 0;
	ck_assert_int_eq(store_jobs_claimable(db, now, count_job, &n, &err), 1);
}
END_TEST

START_TEST(insert_or_join_dedupes_and_model_writer_lease)
{
	put_basics();
	store_error err;
	int64_t id = queued_job();
	store_job j = { 0 };
	snprintf(j.workload_key, sizeof j.workload_key, "%s", WK);
	snprintf(j.target, sizeof j.target, "%s", CPU1);
	j.trials = 12;
	j.batch = 4;
	j.state = STORE_JOB_QUEUED;
	bool joined = false;
	ck_assert_int_eq(store_job_insert_or_join(db, &j, &joined, &err), 0);
	ck_assert(joined);
	ck_assert_int_eq(j.id, id);
	ck_assert_int_eq(j.trials, 16);          /* the joined job's row */
	store_job_clear(&j);
	ck_assert_int_eq(store_job_transition(db, id, STORE_JOB_QUEUED, STORE_JOB_CANCELLED,
					      NULL, &err), 0);
	j = (store_job){ .trials = 12, .batch = 4, .state = STORE_JOB_QUEUED };
	snprintf(j.workload_key, sizeof j.workload_key, "%s", WK);
	snprintf(j.target, sizeof j.target, "%s", CPU1);
	ck_assert_int_eq(store_job_insert_or_join(db, &j, &joined, &err), 0);
	ck_assert(!joined);
	ck_assert_int_gt(j.id, id);
	/* the model of a key: A's first write takes the writer lease, and is
	 * version 1; a write refused leaves the version as it was */
	double now = store_now();
	int64_t v = 0, v2 = 0;
	ck_assert_int_eq(store_model_version(db, CPU1, &v, &err), 0);
	ck_assert_int_eq(store_model_put(db, CPU1, "xgboost", "aa", 2, "A", now, now + 3,
					 &v, &err), 1);
	ck_assert_int_eq((int)v, 1);
	v = 0;
	ck_assert_int_eq(store_model_put(db, CPU1, "xgboost", "bb", 2, "B", now + 1, now + 4,
					 &v, &err), 0);
	ck_assert_int_eq((int)v, 0);
	ck_assert_int_eq(store_model_version(db, CPU1, &v, &err), 1);
	ck_assert_int_eq((int)v, 1);
	ck_assert_int_eq(store_model_renew(db, CPU1, "A", now + 6, &err), 1);
	ck_assert_int_eq(store_model_renew(db, CPU1, "B", now + 6, &err), 0);
	void *blob;
	size_t len;
	ck_assert_int_eq(store_model_get(db, CPU1, &blob, &len, &v2, &err), 1);
	ck_assert(len == 2 && !memcmp(blob, "aa", 2));
	ck_assert_int_eq((int)v2, 1);
	free(blob);
	/* A writes again: version 2, read with the blob */
	ck_assert_int_eq(store_model_put(db, CPU1, "xgboost", "ab", 2, "A", now + 2, now + 6,
					 &v, &err), 1);
	ck_assert_int_eq((int)v, 2);
	ck_assert_int_eq(store_model_get(db, CPU1, &blob, &len, &v2, &err), 1);
	ck_assert(len == 2 && !memcmp(blob, "ab", 2));
	ck_assert_int_eq((int)v2, 2);
	free(blob);
	/* A's lease passes: B takes the model over (version 3), and A writes no
	 * more */
	ck_assert_int_eq(store_model_put(db, CPU1, "xgboost", "bb", 2, "B", now + 7, now + 10,
					 &v, &err), 1);
	ck_assert_int_eq((int)v, 3);
	ck_assert_int_eq(store_model_put(db, CPU1, "xgboost", "aa", 2, "A", now + 8, now + 11,
					 NULL, &err), 0);
	ck_assert_int_eq(store_model_release(db, CPU1, "B", &err), 0);
	ck_assert_int_eq(store_model_put(db, CPU1, "xgboost", "cc", 2, "A", now + 8, now + 11,
					 NULL, &err), 1);
	ck_assert_int_eq(store_model_get(db, CPU1, &blob, &len, NULL, &err), 1);
	ck_assert(len == 2 && !memcmp(blob, "cc", 2));
	free(blob);
	ck_assert_int_eq(store_model_version(db, CPU1, &v, &err), 1);
	ck_assert_int_eq((int)v, 4);
	/* another key's model has versions of its own */
	ck_assert_int_eq(store_model_put(db, "cuda:sm_90", "xgboost", "dd", 2, "A", now + 8,
					 now + 11, &v, &err), 1);
	ck_assert_int_eq((int)v, 1);
}
END_TEST

START_TEST(state_names_round_trip)
{
	for (int s = 0; s < STORE_JOB_NSTATES; s++)
		ck_assert_int_eq(store_job_state_parse(store_job_state_name(s)), s);
	ck_assert_int_eq(store_job_state_parse("nope"), -1);
}
END_TEST

/* An import of n records of WK on CPU1 ("i0", "i1", ...), the one at bad
 * (if >= 0) naming a workload that is neither given nor stored. */
static int import(int n, int bad, store_import_result *res, store_error *err)
{
	static const char *const nowhere =
		"bbbb000000000000000000000000000000000000000000000000000000000002";
	store_workload w = { WK, "matmul", "{\"op\":\"matmul\",\"M\":8}", 1024 };
	store_target t = { CPU1, "cpu" };
	store_record *r = calloc((size_t)n, sizeof *r);
	char (*traces)[16] = calloc((size_t)n, sizeof *traces);
	for (int i = 0; i < n; i++) {
		snprintf(traces[i], sizeof traces[i], "i%d", i);
		r[i] = (store_record){ .workload_key = i == bad ? nowhere : WK, .target = CPU1,
				       .trace = traces[i], .status = "ok", .latency_us = 100 - i % 50,
				       .max_rel_error = 0 };
	}
	int rc = store_import(db, &w, 1, &t, 1, r, n, res, err);
	free(traces);
	free(r);
	return rc;
}

START_TEST(import_is_all_or_nothing)
{
	store_error err = { "" };
	store_import_result res;
	store_best b;
	/* 200 good records and one bad (its workload unknown): nothing stored,
	 * not even the workload and target put before the records */
	ck_assert_int_eq(import(201, 150, &res, &err), -1);
	ck_assert_msg(strstr(err.msg, "records[150]") && strstr(err.msg, "nothing stored"),
		      "%s", err.msg);
	ck_assert_int_eq(res.added, 0);
	ck_assert_int_eq(store_record_count(db, WK, CPU1, &err), 0);
	ck_assert_int_eq(store_workload_get(db, WK, NULL, NULL, NULL, &err), 0);
	ck_assert_int_eq(store_best_get(db, WK, CPU1, &b, &err), 0);
	/* the good ones: all stored, the best updated as record by record */
	ck_assert_int_eq(import(200, -1, &res, &err), 0);
	ck_assert_int_eq(res.added, 200);
	ck_assert_int_eq(res.present, 0);
	ck_assert(res.best_changed);
	ck_assert_int_eq(store_record_count(db, WK, CPU1, &err), 200);
	ck_assert_int_eq(store_best_get(db, WK, CPU1, &b, &err), 1);
	ck_assert_double_eq(b.latency_us, 51);
	ck_assert_int_eq(b.trials, 200);
	store_best_clear(&b);
	/* again: each id already stored, nothing changes */
	ck_assert_int_eq(import(200, -1, &res, &err), 0);
	ck_assert_int_eq(res.added, 0);
	ck_assert_int_eq(res.present, 200);
	ck_assert(!res.best_changed);
	/* a failed import after them leaves them as they were */
	ck_assert_int_eq(import(300, 299, &res, &err), -1);
	ck_assert_int_eq(store_record_count(db, WK, CPU1, &err), 200);
	ck_assert_int_eq(store_best_get(db, WK, CPU1, &b, &err), 1);
	ck_assert_int_eq(b.trials, 200);
	store_best_clear(&b);
}
END_TEST

START_TEST(records_survive_reopen)
{
	put_basics();
	add(CPU1, "t1", "ok", 10, NULL);
	add(CPU1, "t2", "crash", 0, NULL);
	store_close(db);
	store_error err;
	db = store_open(dbpath, &err);
	ck_assert_msg(db != NULL, "%s", err.msg);
	ck_assert_int_eq(store_record_count(db, WK, CPU1, &err), 2);
	void *blob;
	size_t len;
	int64_t v = 0;
	ck_assert_int_eq(store_model_get(db, "cpu", &blob, &len, &v, &err), 0);
	ck_assert_int_eq(store_model_put(db, "cpu", "xgboost", "abc", 3, NULL, 0, 0, &v, &err), 1);
	ck_assert_int_eq((int)v, 1);
	ck_assert_int_eq(store_model_get(db, "cpu", &blob, &len, &v, &err), 1);
	ck_assert_int_eq((int)v, 1);
	ck_assert_int_eq((int)len, 3);
	ck_assert(!memcmp(blob, "abc", 3));
	free(blob);
}
END_TEST

/* The embedded migrations, as the backends have them (schema/migrations.inc,
 * schema/migrations_pg.inc). */
typedef struct mig { int version; const char *name, *sql; } mig;
static const mig lite_migs[] = {
#include "migrations.inc"
};
#ifdef HAVE_LIBPQ
static const mig pg_migs[] = {
#include "migrations_pg.inc"
};
#endif

typedef struct seen {
	int n;
	char trace[8][32];
	bool imported[8], trusted[8];
	char token[8][32];
} seen;

static void see(void *ctx, const store_record *r)
{
	seen *s = ctx;
	if (s->n < 8) {
		snprintf(s->trace[s->n], sizeof s->trace[0], "%s", r->trace);
		snprintf(s->token[s->n], sizeof s->token[0], "%s", r->token ? r->token : "");
		s->imported[s->n] = r->imported;
		s->trusted[s->n++] = r->trusted;
	}
}

START_TEST(job_search_options_round_trip)
{
	put_basics();
	store_error err;
	store_job j = { 0 };
	snprintf(j.workload_key, sizeof j.workload_key, "%s", WK);
	snprintf(j.target, sizeof j.target, "%s", CPU1);
	j.trials = 4;
	j.batch = 2;
	j.state = STORE_JOB_QUEUED;
	ck_assert_int_eq(store_job_insert(db, &j, &err), 0);   /* no options: defaults */
	store_job k = j;
	snprintf(k.search.cost_model, sizeof k.search.cost_model, "random");
	k.search.has_seed = true;
	k.search.seed = 9007199254740991LL;              /* 2^53 - 1 */
	ck_assert_int_eq(store_job_insert(db, &k, &err), 0);
	store_job z = j;
	z.search.has_seed = true;
	z.search.seed = 0;                               /* 0 is a seed, not "none" */
	z.search.has_patience = true;
	z.search.patience = 0;                           /* 0: never stop early, not "none" */
	ck_assert_int_eq(store_job_insert(db, &z, &err), 0);
	k.search.has_patience = true;
	k.search.patience = 12;
	k.id = 0;
	ck_assert_int_eq(store_job_insert(db, &k, &err), 0);
	store_job g;
	ck_assert_int_eq(store_job_get(db, j.id, &g, &err), 1);
	ck_assert_str_eq(g.search.cost_model, "xgboost");
	ck_assert(!g.search.has_seed);
	ck_assert(!g.search.has_patience);
	store_job_clear(&g);
	ck_assert_int_eq(store_job_get(db, k.id, &g, &err), 1);
	ck_assert_str_eq(g.search.cost_model, "random");
	ck_assert(g.search.has_seed && g.search.seed == 9007199254740991LL);
	ck_assert(g.search.has_patience && g.search.patience == 12);
	store_job_clear(&g);
	ck_assert_int_eq(store_job_get(db, z.id, &g, &err), 1);
	ck_assert(g.search.has_seed && g.search.seed == 0);
	ck_assert(g.search.has_patience && g.search.patience == 0);
	store_job_clear(&g);
}
END_TEST

/* A database made by 001 alone (as a tird of that version left it) is
 * brought to the current schema at open, its jobs intact: they ran under
 * xgboost with a derived seed. */
START_TEST(migration_002_keeps_old_jobs)
{
	store_close(db);
	db = NULL;
	const mig *migs = lite_migs;
	size_t nmigs = sizeof lite_migs / sizeof lite_migs[0];
	if (pg_url) {
#ifdef HAVE_LIBPQ
		migs = pg_migs;
		nmigs = sizeof pg_migs / sizeof pg_migs[0];
#endif
		sql("DROP SCHEMA public CASCADE; CREATE SCHEMA public");
	} else {
		unlink(dbpath);
	}
	ck_assert_int_ge((int)nmigs, 2);
	ck_assert_int_eq(migs[0].version, 1);
	sql("CREATE TABLE schema_version (version INTEGER NOT NULL, name TEXT NOT NULL, "
	    "applied REAL NOT NULL)");
	sql(migs[0].sql);
	sql("INSERT INTO schema_version VALUES (1, '001_init', 1.0)");
	char ins[2048];
	snprintf(ins, sizeof ins,
		 "INSERT INTO workloads VALUES ('%s', 'matmul', '{}', 1024, 1.0);"
		 "INSERT INTO targets VALUES ('%s', 'cpu', 1.0);"
		 "INSERT INTO jobs(id, workload_key, target, trials, batch, state, trials_done, "
		 "best_us, message, created, started, finished) VALUES "
		 "(7, '%s', '%s', 16, 4, 'done', 16, 12.5, 'best 12.5 us', 1.0, 2.0, 3.0),"
		 "(8, '%s', '%s', 32, 8, 'queued', 0, NULL, NULL, 4.0, NULL, NULL);"
		 "INSERT INTO records(id, workload_key, target, trace, status, latency_us, "
		 "job_id, created) VALUES ('r1', '%s', '%s', 'a', 'ok', 3, 7, 1.0), "
		 "('r2', '%s', '%s', 'b', 'ok', 2, NULL, 1.0)",
		 WK, CPU1, WK, CPU1, WK, CPU1, WK, CPU1, WK, CPU1);
	sql(ins);
	/* rows of explicit ids (as a restore writes them) move PostgreSQL's
	 * identity on, as pg_dump's setval does; SQLite takes max(id) + 1 */
	if (pg_url)
		sql("SELECT setval(pg_get_serial_sequence('jobs', 'id'), 8)");
	/* a model saved before 007: written once, then written on from there */
	sql(pg_url ? "INSERT INTO cost_models VALUES ('cpu:old', 'xgboost', '\\x6161', 1.0)"
		   : "INSERT INTO cost_models VALUES ('cpu:old', 'xgboost', X'6161', 1.0)");

	store_error err;
	db = store_open(dbpath, &err);
	ck_assert_msg(db != NULL, "%s", err.msg);
	ck_assert_int_eq(store_schema_version(db), migs[nmigs - 1].version);
	ck_assert_int_ge(store_schema_version(db), 2);
	int64_t v = 0;
	void *blob = NULL;
	size_t len = 0;
	ck_assert_int_eq(store_model_get(db, "cpu:old", &blob, &len, &v, &err), 1);
	ck_assert(len == 2 && !memcmp(blob, "aa", 2) && v == 1);
	free(blob);
	ck_assert_int_eq(store_model_put(db, "cpu:old", "xgboost", "ab", 2, "A", 2.0, 5.0, &v,
					 &err), 1);
	ck_assert_int_eq((int)v, 2);
	store_job g;
	ck_assert_int_eq(store_job_get(db, 7, &g, &err), 1);
	ck_assert_str_eq(g.workload_key, WK);
	ck_assert_str_eq(g.target, CPU1);
	ck_assert_int_eq(g.trials, 16);
	ck_assert_int_eq(g.batch, 4);
	ck_assert_int_eq(g.state, STORE_JOB_DONE);
	ck_assert_int_eq(g.trials_done, 16);
	ck_assert(g.best_us == 12.5 && g.created == 1.0 && g.finished == 3.0);
	ck_assert_str_eq(g.message, "best 12.5 us");
	ck_assert_str_eq(g.search.cost_model, "xgboost");
	ck_assert(!g.search.has_seed);
	store_job_clear(&g);
	ck_assert_int_eq(store_job_get(db, 8, &g, &err), 1);
	ck_assert_int_eq(g.state, STORE_JOB_QUEUED);
	ck_assert_str_eq(g.search.cost_model, "xgboost");
	store_job_clear(&g);
	/* the old queued job moves on as before, and new jobs carry options */
	ck_assert_int_eq(store_job_transition(db, 8, STORE_JOB_QUEUED, STORE_JOB_RUNNING,
					      NULL, &err), 0);
	store_job k = { .trials = 2, .batch = 2, .state = STORE_JOB_QUEUED,
			.search.cost_model = "random", .search.has_seed = true, .search.seed = 7 };
	snprintf(k.workload_key, sizeof k.workload_key, "%s", WK);
	snprintf(k.target, sizeof k.target, "%s", CPU1);
	ck_assert_int_eq(store_job_insert(db, &k, &err), 0);
	ck_assert_int_eq(k.id, 9);
	ck_assert_int_eq(store_job_get(db, 9, &g, &err), 1);
	ck_assert_str_eq(g.search.cost_model, "random");
	ck_assert(g.search.has_seed && g.search.seed == 7);
	store_job_clear(&g);
	/* 003: a record without a job was an import, and keeps its trust */
	seen sn = { 0 };
	ck_assert_int_eq(store_records_each(db, WK, CPU1, see, &sn, &err), 2);
	ck_assert(!sn.imported[0] && sn.trusted[0]);
	ck_assert(sn.imported[1] && sn.trusted[1]);
	/* reopening applies nothing more */
	store_close(db);
	db = store_open(dbpath, &err);
	ck_assert_msg(db != NULL, "%s", err.msg);
	ck_assert_int_eq(store_job_get(db, 7, &g, &err), 1);
	ck_assert_int_eq(g.trials, 16);
	store_job_clear(&g);
}
END_TEST


static store_record imp(const char *trace, double us, bool trusted)
{
	return (store_record){ .workload_key = WK, .target = CPU1, .trace = trace, .status = "ok",
			       .latency_us = us, .max_rel_error = 0, .imported = true,
			       .trusted = trusted, .source = "test", .token = "admin" };
}

static void best_of(const char *target, store_best *b)
{
	store_error err;
	ck_assert_int_eq(store_best_get(db, WK, target, b, &err), 1);
}

/* A page's records carry their provenance, as store_records_each's do: what
 * a streamed export writes. */
START_TEST(records_page_carries_provenance)
{
	put_basics();
	bool changed;
	ck_assert_int_eq(add(CPU1, "t1", "ok", 40, &changed), 1);
	store_error err;
	store_import_result res;
	store_record r = imp("claimed", 2, false);
	ck_assert_int_eq(store_import(db, NULL, 0, NULL, 0, &r, 1, &res, &err), 0);
	seen sn = { 0 };
	int64_t cursor = 0;
	ck_assert_int_eq(store_records_page(db, WK, CPU1, &cursor, 1, see, &sn, &err), 1);
	ck_assert_int_eq(store_records_page(db, WK, CPU1, &cursor, 1, see, &sn, &err), 1);
	ck_assert_int_eq(store_records_page(db, WK, CPU1, &cursor, 1, see, &sn, &err), 0);
	ck_assert_int_eq(sn.n, 2);
	ck_assert_str_eq(sn.trace[0], "t1");
	ck_assert(!sn.imported[0] && sn.trusted[0]);
	ck_assert_str_eq(sn.trace[1], "claimed");
	ck_assert(sn.imported[1] && !sn.trusted[1]);
	ck_assert_str_eq(sn.token[1], "admin");
}
END_TEST

/* An untrusted import is stored and counts for nothing: not the best, not in
 * best.trials (so junk cannot push trials past max_trials, nor answer a job
 * from the cache); a trusted import counts as a measurement. */
START_TEST(untrusted_imports_count_for_nothing)
{
	put_basics();
	bool changed;
	ck_assert_int_eq(add(CPU1, "t1", "ok", 40, &changed), 1);
	store_error err;
	store_import_result res;
	store_record r[3] = { imp("forged", 1e-3, false), imp("junk1", 2, false),
			      imp("junk2", 3, false) };
	ck_assert_int_eq(store_import(db, NULL, 0, NULL, 0, r, 3, &res, &err), 0);
	ck_assert_int_eq(res.added, 3);
	ck_assert(!res.best_changed);
	store_best b;
	best_of(CPU1, &b);
	ck_assert(b.latency_us == 40);
	ck_assert_str_eq(b.trace, "t1");
	ck_assert_int_eq(b.trials, 1);
	store_best_clear(&b);
	ck_assert_int_eq(store_record_count(db, WK, CPU1, &err), 1);
	store_record t = imp("trusted", 20, true);
	ck_assert_int_eq(store_import(db, NULL, 0, NULL, 0, &t, 1, &res, &err), 0);
	ck_assert(res.best_changed);
	best_of(CPU1, &b);
	ck_assert(b.latency_us == 20);
	ck_assert_int_eq(b.trials, 2);
	store_best_clear(&b);
}
END_TEST

/* Import ignores an id it holds, so a forged import of a trace would have
 * outlived every later measurement of it: a measurement here replaces an
 * import of the same id (trusted or not), and the best is recomputed. */
START_TEST(measurement_replaces_a_forged_import)
{
	put_basics();
	bool changed;
	store_error err;
	store_import_result res;
	ck_assert_int_eq(add(CPU1, "t1", "ok", 40, &changed), 1);
	store_record r[2] = { imp("forged", 1e-3, true), imp("waiting", 5, false) };
	ck_assert_int_eq(store_import(db, NULL, 0, NULL, 0, r, 2, &res, &err), 0);
	store_best b;
	best_of(CPU1, &b);
	ck_assert_str_eq(b.trace, "forged");       /* trusted by the admin */
	store_best_clear(&b);
	/* the genuine measurement of the forged trace: slower than t1 */
	store_record m = { .workload_key = WK, .target = CPU1, .trace = "forged", .status = "ok",
			   .latency_us = 55, .max_rel_error = 0, .worker = "w-1", .token = "wtok",
			   .job_id = 3 };
	ck_assert_int_eq(store_record_add(db, &m, &changed, &err), 1);
	ck_assert(changed);
	best_of(CPU1, &b);
	ck_assert_str_eq(b.trace, "t1");
	ck_assert(b.latency_us == 40);
	ck_assert_int_eq(b.trials, 2);
	store_best_clear(&b);
	/* measured again here: a record measured here is kept as it is */
	m.latency_us = 1;
	m.id[0] = '\0';
	ck_assert_int_eq(store_record_add(db, &m, &changed, &err), 0);
	/* the untrusted one, measured here: it becomes the best, trusted */
	store_record w = { .workload_key = WK, .target = CPU1, .trace = "waiting", .status = "ok",
			   .latency_us = 30, .max_rel_error = 0, .worker = "w-1", .job_id = 3 };
	ck_assert_int_eq(store_record_add(db, &w, &changed, &err), 1);
	ck_assert(changed);
	best_of(CPU1, &b);
	ck_assert_str_eq(b.trace, "waiting");
	ck_assert_int_eq(b.trials, 3);
	store_best_clear(&b);
	seen s = { 0 };
	ck_assert_int_eq(store_records_each(db, WK, CPU1, see, &s, &err), 3);
	for (int i = 0; i < s.n; i++)
		ck_assert_msg(!s.imported[i] && s.trusted[i], "%s", s.trace[i]);
	ck_assert_str_eq(s.token[1], "wtok");
}
END_TEST

/* A removed record leaves the best recomputed from what remains. */
START_TEST(remove_recomputes_the_best)
{
	put_basics();
	bool changed;
	store_error err;
	ck_assert_int_eq(add(CPU1, "t1", "ok", 40, &changed), 1);
	ck_assert_int_eq(add(CPU1, "t2", "ok", 10, &changed), 1);
	ck_assert_int_eq(add(CPU1, "t3", "run_error", 0, &changed), 1);
	char id[65];
	store_record_id(WK, CPU1, "t2", id);
	ck_assert_int_eq(store_record_remove(db, id, &changed, &err), 1);
	ck_assert(changed);
	store_best b;
	best_of(CPU1, &b);
	ck_assert_str_eq(b.trace, "t1");
	ck_assert_int_eq(b.trials, 2);
	store_best_clear(&b);
	ck_assert_int_eq(store_record_remove(db, id, &changed, &err), 0);
	store_record_id(WK, CPU1, "t1", id);
	ck_assert_int_eq(store_record_remove(db, id, &changed, &err), 1);
	best_of(CPU1, &b);
	ck_assert_str_eq(b.record_id, "");          /* nothing ok left */
	ck_assert_int_eq(b.trials, 1);
	store_best_clear(&b);
	/* the untrusted imports of a (workload, target), fastest claim first */
	store_import_result res;
	store_record r[3] = { imp("u1", 9, false), imp("u2", 3, false), imp("u3", 5, true) };
	ck_assert_int_eq(store_import(db, NULL, 0, NULL, 0, r, 3, &res, &err), 0);
	seen s = { 0 };
	ck_assert_int_eq(store_untrusted_each(db, WK, CPU1, 8, see, &s, &err), 2);
	ck_assert_str_eq(s.trace[0], "u2");
	ck_assert_str_eq(s.trace[1], "u1");
}
END_TEST

/* A worker batch (006) through its states, as two replicas see it: queued
 * by the replica running its job, leased once with its workload and traces,
 * posted only by the lease's holder (with its token, host and compile-cache
 * hits), stored, deleted. */
START_TEST(batch_moves_through_its_states)
{
	put_basics();
	store_error err;
	int64_t job = queued_job();
	double now = store_now();
	ck_assert_int_eq(store_job_claim(db, job, "A", now, now + 60, NULL, &err), 1);
	const char *canonical = "{\"op\":\"matmul\",\"M\":8}";
	const char *traces[] = { "{\"insts\":[0]}", "{\"insts\":[1]}" };
	store_batch_row b = { .job_id = job, .n = 2 };
	snprintf(b.replica, sizeof b.replica, "A");
	snprintf(b.target, sizeof b.target, "%s", CPU1);
	snprintf(b.workload_key, sizeof b.workload_key, "%s", WK);
	ck_assert_msg(store_batch_add(db, &b, canonical, traces, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(store_batches_pending(db, &err), 1);
	/* another target's worker gets nothing; this one gets it whole, once */
	store_batch_row l;
	ck_assert_int_eq(store_batch_lease(db, CPU2, "w2", now, now + 15, &l, &err), 0);
	ck_assert_int_eq(store_batch_lease(db, CPU1, "w1", now, now + 15, &l, &err), 1);
	ck_assert_int_eq(l.id, b.id);
	ck_assert_int_eq(l.job_id, job);
	ck_assert_int_eq(l.n, 2);
	ck_assert_str_eq(l.canonical, canonical);
	ck_assert_str_eq(l.traces[0], traces[0]);
	ck_assert_str_eq(l.traces[1], traces[1]);
	ck_assert_str_eq(l.state, "leased");
	ck_assert_str_eq(l.worker, "w1");
	store_batch_clear(&l);
	store_batch_row again;
	ck_assert_int_eq(store_batch_lease(db, CPU1, "w3", now, now + 15, &again, &err), 0);
	ck_assert_int_eq(store_batches_pending(db, &err), 0);
	/* only the holder posts, and only as many results as candidates */
	store_result res[2] = { { "ok", 3.5, 0.0, NULL }, { "run_error", 0, -1, (char *)"boom" } };
	ck_assert_int_eq(store_batch_post(db, b.id, "w3", 2, res, "t", "h", 0, &err), 0);
	ck_assert_int_eq(store_batch_post(db, b.id, "w1", 1, res, "t", "h", 0, &err), 0);
	ck_assert_int_eq(store_batch_post(db, b.id, "w1", 2, res, "tok1", "hand (127.0.0.1)", 3,
					  &err), 1);
	ck_assert_int_eq(store_batch_post(db, b.id, "w1", 2, res, "tok1", "h", 3, &err), 0);
	store_batch_row g;
	ck_assert_int_eq(store_batch_get(db, b.id, &g, &err), 1);
	ck_assert_str_eq(g.state, "measured");
	ck_assert_str_eq(g.token, "tok1");
	ck_assert_str_eq(g.host, "hand (127.0.0.1)");
	ck_assert_int_eq(g.cache_hits, 3);
	store_batch_clear(&g);
	store_result out[2];
	ck_assert_int_eq(store_batch_results(db, b.id, 2, out, &err), 1);
	ck_assert_str_eq(out[0].status, "ok");
	ck_assert(out[0].latency_us == 3.5 && out[0].max_rel_error == 0);
	ck_assert_str_eq(out[1].status, "run_error");
	ck_assert(out[1].max_rel_error < 0);
	ck_assert_str_eq(out[1].msg, "boom");
	free(out[0].msg);
	free(out[1].msg);
	ck_assert_int_eq(store_batch_stored(db, b.id, 1, &err), 1);
	ck_assert_int_eq(store_batch_stored(db, b.id, 1, &err), 0);
	ck_assert_int_eq(store_batch_get(db, b.id, &g, &err), 1);
	ck_assert_str_eq(g.state, "stored");
	ck_assert_int_eq(g.not_stored, 1);
	store_batch_clear(&g);
	ck_assert_int_eq(store_batch_delete(db, b.id, &err), 0);
	ck_assert_int_eq(store_batch_get(db, b.id, &g, &err), 0);
}
END_TEST

static Suite *make_store_suite(void)
{
	const char *pg = getenv("TIRD_TEST_PG");
	Suite *s = suite_create(pg && *pg ? "store (postgresql)" : "store (sqlite)");
	TCase *tc = tcase_create("store");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, migrations_apply_once);
	tcase_add_test(tc, record_ids_are_content_hashes);
	tcase_add_test(tc, best_follows_ok_records_per_full_target);
	tcase_add_test(tc, best_each_filters_op_and_target_prefix);
	tcase_add_test(tc, record_needs_a_stored_workload);
	tcase_add_test(tc, job_transitions_check_the_stored_state);
	tcase_add_test(tc, state_names_round_trip);
	tcase_add_test(tc, job_claim_holds_until_the_lease_passes);
	tcase_add_test(tc, job_lease_expiry_hands_the_job_over);
	tcase_add_test(tc, insert_or_join_dedupes_and_model_writer_lease);
	tcase_add_test(tc, import_is_all_or_nothing);
	tcase_add_test(tc, records_survive_reopen);
	tcase_add_test(tc, job_search_options_round_trip);
	tcase_add_test(tc, migration_002_keeps_old_jobs);
	tcase_add_test(tc, records_page_through_every_record_once);
	tcase_add_test(tc, records_page_carries_provenance);
	tcase_add_test(tc, untrusted_imports_count_for_nothing);
	tcase_add_test(tc, measurement_replaces_a_forged_import);
	tcase_add_test(tc, remove_recomputes_the_best);
	tcase_add_test(tc, batch_moves_through_its_states);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(make_store_suite());
}
