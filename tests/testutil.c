/*
 * testutil.c — file, suite and golden-file helpers for the Check suites.
 * SUITE_JSON and GOLDEN_DIR are set by Makefile.am.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include "testutil.h"

#ifndef SUITE_JSON
#define SUITE_JSON "../shared/workloads/suite.json"
#endif
#ifndef GOLDEN_DIR
#define GOLDEN_DIR "tests/golden"
#endif

char *tu_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 4096, n = 0;
	char *s = malloc(cap);
	for (;;) {
		if (n + 1 >= cap) {
			cap *= 2;
			s = realloc(s, cap);
		}
		size_t got = fread(s + n, 1, cap - n - 1, f);
		if (got == 0)
			break;
		n += got;
	}
	fclose(f);
	s[n] = '\0';
	if (len)
		*len = n;
	return s;
}

const char *tu_suite_path(void)
{
	const char *env = getenv("TIR_SUITE_JSON");
	return env && *env ? env : SUITE_JSON;
}

static cJSON *suite_load(void)
{
	char *text = tu_read_file(tu_suite_path(), NULL);
	if (!text)
		return NULL;
	cJSON *j = cJSON_Parse(text);
	free(text);
	if (j && !cJSON_IsArray(j)) {
		cJSON_Delete(j);
		j = NULL;
	}
	return j;
}

int tu_suite_count(void)
{
	cJSON *j = suite_load();
	if (!j)
		return -1;
	int n = cJSON_GetArraySize(j);
	cJSON_Delete(j);
	return n;
}

static char *suite_field(int i, const char *name, int as_json)
{
	cJSON *j = suite_load();
	if (!j)
		return NULL;
	char *out = NULL;
	cJSON *e = cJSON_GetArrayItem(j, i);
	cJSON *f = e ? cJSON_GetObjectItemCaseSensitive(e, name) : NULL;
	if (f)
		out = as_json ? cJSON_PrintUnformatted(f)
			      : (cJSON_IsString(f) ? strdup(f->valuestring) : NULL);
	cJSON_Delete(j);
	return out;
}

char *tu_suite_name(int i) { return suite_field(i, "name", 0); }
char *tu_suite_workload_at(int i) { return suite_field(i, "workload", 1); }

char *tu_suite_workload(const char *name)
{
	int n = tu_suite_count();
	for (int i = 0; i < n; i++) {
		char *nm = tu_suite_name(i);
		int hit = nm && !strcmp(nm, name);
		free(nm);
		if (hit)
			return tu_suite_workload_at(i);
	}
	return NULL;
}

char *tu_golden_path(const char *name)
{
	const char *dir = getenv("TIR_GOLDEN_DIR");
	if (!dir || !*dir)
		dir = GOLDEN_DIR;
	size_t n = strlen(dir) + strlen(name) + 2;
	char *p = malloc(n);
	snprintf(p, n, "%s/%s", dir, name);
	return p;
}

int tu_golden_check(const char *name, const char *text)
{
	char *path = tu_golden_path(name);
	const char *upd = getenv("TIR_UPDATE_GOLDEN");
	if (upd && !strcmp(upd, "1")) {
		FILE *f = fopen(path, "wb");
		int ok = f && fputs(text, f) >= 0;
		if (f && fclose(f) != 0)
			ok = 0;
		if (!ok)
			fprintf(stderr, "golden: cannot write %s\n", path);
		free(path);
		return ok;
	}
	char *want = tu_read_file(path, NULL);
	if (!want) {
		fprintf(stderr, "golden: cannot read %s (TIR_UPDATE_GOLDEN=1 writes it)\n",
			path);
		free(path);
		return 0;
	}
	int ok = !strcmp(want, text);
	if (!ok) {
		const char *a = want, *b = text;
		int line = 1;
		while (*a && *a == *b) {
			if (*a == '\n')
				line++;
			a++, b++;
		}
		const char *ea = strchr(a, '\n'), *eb = strchr(b, '\n');
		fprintf(stderr, "golden: %s differs at line %d\n  want: %.*s\n  got:  %.*s\n",
			path, line, ea ? (int)(ea - a) : (int)strlen(a), a,
			eb ? (int)(eb - b) : (int)strlen(b), b);
	}
	free(want);
	free(path);
	return ok;
}

int tu_run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
