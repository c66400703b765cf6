/*
 * check_records.c — files of measured records (tuner/records.c): a document
 * of tirctl export read back field by field, every kind of fault refused
 * with its place named and nothing handed out, and tir_read_file.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tir.h"
#include "testutil.h"

#define MM "{\"op\":\"matmul\",\"M\":8,\"N\":8,\"K\":8}"
#define MM2 "{\"op\":\"matmul\",\"M\":16,\"N\":8,\"K\":8}"

static char key1[65], key2[65], canon1[512], canon2[512];

static void keys(void)
{
	const char *docs[2] = { MM, MM2 };
	char *k[2] = { key1, key2 }, *c[2] = { canon1, canon2 };
	for (int i = 0; i < 2; i++) {
		tir_error err;
		tir_workload *w = tir_workload_parse(docs[i], strlen(docs[i]), NULL, &err);
		ck_assert_msg(w != NULL, "%s", err.msg);
		snprintf(k[i], 65, "%s", tir_workload_key(w));
		snprintf(c[i], 512, "%s", tir_workload_canonical(w));
		tir_workload_free(w);
	}
}

/* A document with the two workloads and the records given (JSON text of
 * the array's items); malloc'd. */
static char *doc(const char *records)
{
	size_t n = strlen(records) + 2048;
	char *s = malloc(n);
	snprintf(s, n, "{\"format\":\"tird-records/1\",\"workloads\":{\"%s\":%s,\"%s\":%s},"
		 "\"records\":[%s]}", key1, canon1, key2, canon2, records);
	return s;
}

static char *rec_as(const char *key, const char *target, const char *status,
		    const char *extra)
{
	char *s = malloc(1024);
	snprintf(s, 1024, "{\"workload_key\":\"%s\",\"target\":\"%s\",\"trace\":\"[]\","
		 "\"status\":\"%s\"%s}", key, target, status, extra);
	return s;
}

static char *rec(const char *key, const char *target, const char *extra)
{
	return rec_as(key, target, "ok", extra);
}

START_TEST(reads_every_field)
{
	keys();
	char *r1 = rec(key2, "cpu:x86_64+avx2", ",\"latency_us\":12.5,\"max_rel_error\":1e-6,"
		       "\"message\":\"m\",\"worker\":\"w1\",\"created\":1700000000");
	char *r2 = rec_as(key1, "cuda:sm_90", "build_error", "");   /* no latency: not ok */
	char all[4096];
	snprintf(all, sizeof all, "%s,%s", r1, r2);
	char *text = doc(all);
	tir_error err = { "" };
	tir_records_fault fault = TIR_RECORDS_BAD_TARGET;
	tir_records *r = tir_records_parse(text, strlen(text), NULL, &fault, &err);
	ck_assert_msg(r != NULL, "%s", err.msg);
	ck_assert_int_eq(tir_records_workloads(r), 2);
	ck_assert_str_eq(tir_workload_key(tir_records_workload(r, 0)), key1);
	ck_assert_str_eq(tir_workload_key(tir_records_workload(r, 1)), key2);
	ck_assert_int_eq(tir_records_count(r), 2);
	const tir_record *a = tir_records_at(r, 0), *b = tir_records_at(r, 1);
	ck_assert_int_eq(a->workload, 1);
	ck_assert_str_eq(a->target, "cpu:x86_64+avx2");
	ck_assert_str_eq(a->trace, "[]");
	ck_assert_str_eq(a->status, "ok");
	ck_assert_double_eq(a->latency_us, 12.5);
	ck_assert_double_eq(a->max_rel_error, 1e-6);
	ck_assert_str_eq(a->message, "m");
	ck_assert_str_eq(a->worker, "w1");
	ck_assert_double_eq(a->created, 1700000000);
	/* absent optional fields: their defaults */
	ck_assert_int_eq(b->workload, 0);
	ck_assert_str_eq(b->target, "cuda:sm_90");
	ck_assert_str_eq(b->status, "build_error");
	ck_assert_double_eq(b->latency_us, 0);
	ck_assert_double_eq(b->max_rel_error, -1);
	ck_assert_ptr_null(b->message);
	ck_assert_ptr_null(b->worker);
	ck_assert_double_eq(b->created, 0);
	tir_records_free(r);
	/* no records, no "format": still a records document */
	char empty[2048];
	snprintf(empty, sizeof empty, "{\"workloads\":{},\"records\":[]}");
	r = tir_records_parse(empty, strlen(empty), NULL, NULL, &err);
	ck_assert_msg(r != NULL, "%s", err.msg);
	ck_assert_int_eq(tir_records_workloads(r), 0);
	ck_assert_int_eq(tir_records_count(r), 0);
	tir_records_free(r);
	free(text);
	free(r1);
	free(r2);
}
END_TEST

/* Each bad document: how to make it, the fault, and what the message must
 * say.  "K1"/"K2" in a template become the workloads' keys. */
static const struct {
	const char *text;      /* NULL: doc() of records */
	const char *records;
	tir_records_fault fault;
	const char *says;
} bad[] = {
	{ "{\"format\":\"tird-records/1\",\"workloads\":", NULL, TIR_RECORDS_BAD_JSON, "not JSON (at byte" },
	{ "", NULL, TIR_RECORDS_BAD_JSON, "not JSON" },
	{ "[1,2]", NULL, TIR_RECORDS_BAD_DOCUMENT, "not a JSON object" },
	{ "{\"format\":\"tird-records/2\",\"workloads\":{},\"records\":[]}", NULL,
	  TIR_RECORDS_BAD_DOCUMENT, "not records of tirctl export" },
	{ "{\"format\":1,\"workloads\":{},\"records\":[]}", NULL, TIR_RECORDS_BAD_DOCUMENT,
	  "not records of tirctl export" },
	{ "{\"workloads\":[],\"records\":[]}", NULL, TIR_RECORDS_BAD_DOCUMENT, "not records" },
	{ "{\"workloads\":{},\"records\":{}}", NULL, TIR_RECORDS_BAD_DOCUMENT, "not records" },
	{ "{\"workloads\":{\"abc\":" MM "},\"records\":[]}", NULL, TIR_RECORDS_BAD_WORKLOAD,
	  "workloads[\"abc\"]: the key is not the SHA-256" },
	{ "{\"workloads\":{\"abc\":{\"op\":\"matmul\",\"M\":0}},\"records\":[]}", NULL,
	  TIR_RECORDS_BAD_WORKLOAD, "workloads[\"abc\"]: matmul" },
	{ NULL, "{\"workload_key\":\"K1\",\"target\":\"cpu:x86_64\",\"status\":\"ok\"}",
	  TIR_RECORDS_BAD_DOCUMENT, "records[0]: workload_key, target, trace and status" },
	{ NULL, "{\"workload_key\":\"K1\",\"target\":\"cpu:x86_64\",\"trace\":\"[]\","
	  "\"status\":\"ok\",\"latency_us\":1},{\"workload_key\":\"K1\",\"target\":\"cpu:x86_64\",\"trace\":[],"
	  "\"status\":\"ok\"}", TIR_RECORDS_BAD_DOCUMENT, "records[1]: workload_key" },
	{ NULL, "{\"workload_key\":\"0123\",\"target\":\"cpu:x86_64\",\"trace\":\"[]\","
	  "\"status\":\"ok\"}", TIR_RECORDS_BAD_DOCUMENT, "records[0]: workload 0123 is not in" },
	{ NULL, "{\"workload_key\":\"K2\",\"target\":\"cpu\",\"trace\":\"[]\",\"status\":\"ok\"}",
	  TIR_RECORDS_BAD_TARGET, "records[0]: target \"cpu\" is not a full target key" },
	{ NULL, "{\"workload_key\":\"K2\",\"target\":\"tpu:v5\",\"trace\":\"[]\",\"status\":\"ok\"}",
	  TIR_RECORDS_BAD_TARGET, "records[0]: target \"tpu:v5\" is not a full target key: " },
	{ NULL, "1", TIR_RECORDS_BAD_DOCUMENT, "records[0]: workload_key" },
	/* exactly one document */
	{ "{\"workloads\":{},\"records\":[]}xyz", NULL, TIR_RECORDS_BAD_JSON,
	  "not one JSON document: 3 bytes after it (at byte 29)" },
	{ "{\"workloads\":{},\"records\":[]} {}", NULL, TIR_RECORDS_BAD_JSON,
	  "not one JSON document: 2 bytes after it" },
	/* a record's status and numbers */
	{ NULL, "{\"workload_key\":\"K1\",\"target\":\"cpu:x86_64\",\"trace\":\"[]\","
	  "\"status\":\"ok\",\"latency_us\":1},{\"workload_key\":\"K1\",\"target\":"
	  "\"cpu:x86_64\",\"trace\":\"[]\",\"status\":\"fine\"}", TIR_RECORDS_BAD_DOCUMENT,
	  "records[1]: status \"fine\" is not a measurement status" },
	{ NULL, "{\"workload_key\":\"K1\",\"target\":\"cpu:x86_64\",\"trace\":\"[]\","
	  "\"status\":\"ok\"}", TIR_RECORDS_BAD_DOCUMENT, "records[0]: an ok record needs latency_us" },
	{ NULL, "{\"workload_key\":\"K1\",\"target\":\"cpu:x86_64\",\"trace\":\"[]\","
	  "\"status\":\"ok\",\"latency_us\":-1e-9}", TIR_RECORDS_BAD_DOCUMENT,
	  "records[0]: latency_us must be a finite number" },
	{ NULL, "{\"workload_key\":\"K1\",\"target\":\"cpu:x86_64\",\"trace\":\"[]\","
	  "\"status\":\"wrong_result\",\"max_rel_error\":1e999}", TIR_RECORDS_BAD_DOCUMENT,
	  "records[0]: max_rel_error must be a finite number" },
	{ NULL, "{\"workload_key\":\"K1\",\"target\":\"cpu:x86_64\",\"trace\":\"[]\","
	  "\"status\":\"build_error\",\"created\":\"today\"}", TIR_RECORDS_BAD_DOCUMENT,
	  "records[0]: created must be a finite number" },
};

/* s with every K1 / K2 replaced by the keys; malloc'd. */
static char *with_keys(const char *s)
{
	size_t n = strlen(s);
	char *o = malloc(n * 40 + 1), *p = o;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == 'K' && (s[i + 1] == '1' || s[i + 1] == '2')) {
			p += sprintf(p, "%s", s[i + 1] == '1' ? key1 : key2);
			i++;
		} else {
			*p++ = s[i];
		}
	}
	*p = '\0';
	return o;
}

START_TEST(bad_documents_name_their_fault)
{
	keys();
	char *recs = bad[_i].text ? NULL : with_keys(bad[_i].records);
	char *text = bad[_i].text ? strdup(bad[_i].text) : doc(recs);
	tir_error err = { "" };
	tir_records_fault fault = (tir_records_fault)-1;
	tir_records *r = tir_records_parse(text, strlen(text), NULL, &fault, &err);
	ck_assert_msg(r == NULL, "case %d accepted: %s", _i, text);
	ck_assert_msg(fault == bad[_i].fault, "case %d: fault %d, expected %d (%s)", _i,
		      (int)fault, (int)bad[_i].fault, err.msg);
	ck_assert_msg(strstr(err.msg, bad[_i].says) != NULL, "case %d: \"%s\" does not say \"%s\"",
		      _i, err.msg, bad[_i].says);
	free(text);
	free(recs);
}
END_TEST

START_TEST(workload_limits_apply)
{
	keys();
	char *text = doc("");
	tir_limits lim = tir_limits_default();
	lim.max_extent = 8;   /* MM2 has M = 16 */
	tir_error err = { "" };
	tir_records_fault fault;
	ck_assert_ptr_null(tir_records_parse(text, strlen(text), &lim, &fault, &err));
	ck_assert_int_eq(fault, TIR_RECORDS_BAD_WORKLOAD);
	ck_assert_msg(strstr(err.msg, key2) != NULL, "%s", err.msg);
	free(text);
}
END_TEST

START_TEST(read_names_the_file)
{
	keys();
	char dir[] = "/tmp/check_records-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char path[128];
	snprintf(path, sizeof path, "%s/r.json", dir);
	/* a file longer than the reader's first buffer */
	size_t nrec = 2000;
	char *one = rec(key1, "cpu:x86_64", ",\"latency_us\":3");
	char *all = malloc(nrec * (strlen(one) + 1) + 1), *p = all;
	for (size_t i = 0; i < nrec; i++)
		p += sprintf(p, "%s%s", i ? "," : "", one);
	char *text = doc(all);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	size_t len = 0;
	char *back = tir_read_file(path, 0, &len);
	ck_assert_ptr_nonnull(back);
	ck_assert_uint_eq(len, strlen(text));
	ck_assert_str_eq(back, text);
	free(back);
	errno = 0;
	ck_assert_ptr_null(tir_read_file(path, 1000, &len));
	ck_assert_int_eq(errno, EFBIG);
	tir_error err = { "" };
	tir_records *r = tir_records_read(path, NULL, NULL, &err);
	ck_assert_msg(r != NULL, "%s", err.msg);
	ck_assert_int_eq(tir_records_count(r), (int)nrec);
	ck_assert_double_eq(tir_records_at(r, (int)nrec - 1)->latency_us, 3);
	tir_records_free(r);
	/* faults start with the path */
	f = fopen(path, "w");
	fputs("{\"records\":", f);
	fclose(f);
	tir_records_fault fault;
	ck_assert_ptr_null(tir_records_read(path, NULL, &fault, &err));
	ck_assert_int_eq(fault, TIR_RECORDS_BAD_JSON);
	ck_assert_msg(!strncmp(err.msg, path, strlen(path)) && strstr(err.msg, ": not JSON"),
		      "%s", err.msg);
	unlink(path);
	ck_assert_ptr_null(tir_records_read(path, NULL, &fault, &err));
	ck_assert_int_eq(fault, TIR_RECORDS_BAD_JSON);
	ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, strerror(ENOENT)), "%s", err.msg);
	rmdir(dir);
	free(text);
	free(all);
	free(one);
}
END_TEST

static Suite *records_suite(void)
{
	Suite *s = suite_create("records");
	TCase *tc = tcase_create("parse");
	tcase_add_test(tc, reads_every_field);
	tcase_add_loop_test(tc, bad_documents_name_their_fault, 0, (int)(sizeof bad / sizeof *bad));
	tcase_add_test(tc, workload_limits_apply);
	tcase_add_test(tc, read_names_the_file);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(records_suite());
}
