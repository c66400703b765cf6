/*
 * testutil.c — suite and golden-file helpers for the Check suites.
 * SUITE_JSON and GOLDEN_DIR are set by Makefile.am.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include "tir.h"
#include "testutil.h"

#ifndef SUITE_JSON
#define SUITE_JSON "bench/suite.json"
#endif
#ifndef GOLDEN_DIR
#define GOLDEN_DIR "tests/golden"
#endif

const char *tu_suite_path(void)
{
	const char *env = getenv("TIR_SUITE_JSON");
	return env && *env ? env : SUITE_JSON;
}

static cJSON *suite_load(void)
{
	char *text = tir_read_file(tu_suite_path(), 0, NULL);
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
	char *want = tir_read_file(path, 0, NULL);
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

/* Odd shapes of every operator: primes, 1000x997, asymmetric padding, stride
 * and dilation 3, batch > 1, every layout and dtype, epilogues. */
const char *const tu_odd[][2] = {
	{ "mm-prime", "{\"op\":\"matmul\",\"M\":37,\"N\":29,\"K\":13}" },
	{ "mm-1000x997", "{\"op\":\"matmul\",\"M\":1000,\"N\":997,\"K\":16}" },
	{ "bmm-nt", "{\"op\":\"matmul\",\"M\":17,\"N\":23,\"K\":11,\"batch\":3,\"layout\":\"NT\"}" },
	{ "mm-tn-bias-relu", "{\"op\":\"matmul\",\"M\":19,\"N\":7,\"K\":31,\"layout\":\"TN\",\"epilogue\":[\"bias\",\"relu\"]}" },
	{ "mm-f16", "{\"op\":\"matmul\",\"M\":33,\"N\":40,\"K\":24,\"dtype\":\"float16\"}" },
	{ "mm-bf16-gelu", "{\"op\":\"matmul\",\"M\":24,\"N\":17,\"K\":32,\"dtype\":\"bfloat16\",\"epilogue\":[\"gelu\"]}" },
	{ "mm-int8", "{\"op\":\"matmul\",\"M\":31,\"N\":18,\"K\":40,\"dtype\":\"int8\"}" },
	{ "mm-long-k", "{\"op\":\"matmul\",\"M\":5,\"N\":3,\"K\":1100,\"epilogue\":[\"bias\"]}" },
	{ "c1d-s3-asym", "{\"op\":\"conv1d\",\"N\":2,\"C\":5,\"W\":29,\"K\":7,\"S\":3,\"stride\":3,\"pad\":[1,2]}" },
	{ "c1d-d3-g2-nwc", "{\"op\":\"conv1d\",\"N\":1,\"C\":6,\"W\":31,\"K\":4,\"S\":2,\"dilation\":3,\"groups\":2,\"layout\":\"NWC\"}" },
	{ "c2d-asym", "{\"op\":\"conv2d\",\"N\":1,\"C\":3,\"H\":13,\"W\":11,\"K\":5,\"R\":3,\"S\":2,\"stride\":[2,3],\"pad\":[1,0,2,1]}" },
	{ "c2d-d3-g2-nhwc-add-gelu", "{\"op\":\"conv2d\",\"N\":2,\"C\":4,\"H\":9,\"W\":7,\"K\":6,\"R\":3,\"S\":3,\"dilation\":3,\"pad\":3,\"groups\":2,\"layout\":\"NHWC\",\"epilogue\":[\"add\",\"gelu\"]}" },
	{ "c2d-f16-nhwc", "{\"op\":\"conv2d\",\"N\":1,\"C\":8,\"H\":7,\"W\":7,\"K\":12,\"R\":3,\"S\":3,\"pad\":1,\"layout\":\"NHWC\",\"dtype\":\"float16\"}" },
	{ "c3d", "{\"op\":\"conv3d\",\"N\":1,\"C\":2,\"D\":5,\"H\":7,\"W\":6,\"K\":3,\"T\":3,\"R\":2,\"S\":3,\"stride\":2,\"pad\":1}" },
	{ "c3d-ndhwc-f16", "{\"op\":\"conv3d\",\"N\":1,\"C\":3,\"D\":4,\"H\":5,\"W\":5,\"K\":2,\"T\":2,\"R\":2,\"S\":2,\"layout\":\"NDHWC\",\"dtype\":\"float16\"}" },
	{ "t2d-op", "{\"op\":\"conv2d_transpose\",\"N\":1,\"C\":4,\"H\":5,\"W\":3,\"K\":6,\"R\":4,\"S\":3,\"stride\":2,\"pad\":1,\"output_padding\":1}" },
	{ "t2d-s3-g2-nhwc", "{\"op\":\"conv2d_transpose\",\"N\":2,\"C\":6,\"H\":3,\"W\":4,\"K\":4,\"R\":3,\"S\":3,\"stride\":3,\"groups\":2,\"layout\":\"NHWC\"}" },
	{ "dep-m2", "{\"op\":\"depthwise_conv2d\",\"N\":1,\"C\":5,\"H\":11,\"W\":13,\"R\":3,\"S\":3,\"stride\":2,\"pad\":1,\"multiplier\":2}" },
	{ "dep-int8-nhwc", "{\"op\":\"depthwise_conv2d\",\"N\":2,\"C\":7,\"H\":9,\"W\":9,\"R\":5,\"S\":3,\"pad\":[2,1],\"layout\":\"NHWC\",\"dtype\":\"int8\"}" },
	{ "dep-bf16-d3", "{\"op\":\"depthwise_conv2d\",\"N\":1,\"C\":4,\"H\":10,\"W\":10,\"R\":3,\"S\":3,\"dilation\":3,\"pad\":3,\"dtype\":\"bfloat16\"}" },
};
const int tu_nodd = (int)(sizeof tu_odd / sizeof *tu_odd);

double tu_pairs_alike(int n, const double *a, const double *b)
{
	long ok = 0, tot = 0;
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++) {
			if (!(a[i] > 0 && a[j] > 0 && b[i] > 0 && b[j] > 0) || a[i] == a[j])
				continue;
			tot++;
			ok += (a[i] < a[j]) == (b[i] < b[j]);
		}
	return tot ? (double)ok / (double)tot : NAN;
}
