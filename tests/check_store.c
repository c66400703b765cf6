/*
 * check_store.c — the SQLite store (schema/): migrations, the job state
 * transitions, records and the best row per (workload, FULL target), record
 * ids and idempotent inserts, persistence across reopen.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "store.h"
#include "testutil.h"

static char dbpath[256];
static store *db;

static void setup(void)
{
	snprintf(dbpath, sizeof dbpath, "/tmp/check_store.%d.db", (int)getpid());
	unlink(dbpath);
	store_error err;
	db = store_open(dbpath, &err);
	ck_assert_msg(db != NULL, "%s", err.msg);
}

static void teardown(void)
{
	store_close(db);
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
	ck_assert_int_eq(store_best_each(db, "matmul", NULL, count_best, &n, &err), 2);
	n = 0;
	ck_assert_int_eq(store_best_each(db, "matmul", CPU1, count_best, &n, &err), 1);
	ck_assert_int_eq(store_best_each(db, "matmul", "cpu:", count_best, &n, &err), 2);
	ck_assert_int_eq(store_best_each(db, "matmul", "cuda:", count_best, &n, &err), 0);
	ck_assert_int_eq(store_best_each(db, "conv2d", NULL, count_best, &n, &err), 0);
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
	ck_assert_int_eq(store_job_progress(db, j.id, 8, 1, 12.5, &err), 0);
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

START_TEST(state_names_round_trip)
{
	for (int s = 0; s < STORE_JOB_NSTATES; s++)
		ck_assert_int_eq(store_job_state_parse(store_job_state_name(s)), s);
	ck_assert_int_eq(store_job_state_parse("nope"), -1);
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
	ck_assert_int_eq(store_model_get(db, "cpu", &blob, &len, &err), 0);
	ck_assert_int_eq(store_model_put(db, "cpu", "xgboost", "abc", 3, &err), 0);
	ck_assert_int_eq(store_model_get(db, "cpu", &blob, &len, &err), 1);
	ck_assert_int_eq((int)len, 3);
	ck_assert(!memcmp(blob, "abc", 3));
	free(blob);
}
END_TEST

static Suite *make_store_suite(void)
{
	Suite *s = suite_create("store");
	TCase *tc = tcase_create("store");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, migrations_apply_once);
	tcase_add_test(tc, record_ids_are_content_hashes);
	tcase_add_test(tc, best_follows_ok_records_per_full_target);
	tcase_add_test(tc, best_each_filters_op_and_target_prefix);
	tcase_add_test(tc, record_needs_a_stored_workload);
	tcase_add_test(tc, job_transitions_check_the_stored_state);
	tcase_add_test(tc, state_names_round_trip);
	tcase_add_test(tc, records_survive_reopen);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(make_store_suite());
}
