/*
 * check_workload.c — workload parsing, canonical form and key, limits, the
 * messages of rejected documents, target strings, and both references on
 * hand-computed cases: measurement's (the unscheduled program interpreted,
 * tir_reference) and the hand-written one (tests/reference.c), which must
 * take the same arguments and agree.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tir.h"
#include "ir/ir.h"
#include "measure/measure.h"
#include "testutil.h"
#include "reference.h"

static tir_workload *parse_ok(const char *json)
{
	tir_error err = { "" };
	tir_workload *w = tir_workload_parse(json, strlen(json), NULL, &err);
	ck_assert_msg(w != NULL, "%s: %s", json, err.msg);
	return w;
}

/* The key of a document that must parse. */
static void key_of(const char *json, char key[65])
{
	tir_workload *w = parse_ok(json);
	memcpy(key, tir_workload_key(w), 65);
	tir_workload_free(w);
}

/* ---- the shared suite ------------------------------------------------------------ */

START_TEST(suite_parses_and_canonical_is_stable)
{
	int n = tu_suite_count();
	ck_assert_msg(n > 0, "cannot read the workload suite at %s", tu_suite_path());
	for (int i = 0; i < n; i++) {
		char *name = tu_suite_name(i), *json = tu_suite_workload_at(i);
		tir_error err = { "" };
		tir_workload *w = tir_workload_parse(json, strlen(json), NULL, &err);
		ck_assert_msg(w != NULL, "%s: %s", name, err.msg);
		const char *key = tir_workload_key(w);
		ck_assert_int_eq(strlen(key), 64);
		for (const char *p = key; *p; p++)
			ck_assert(strchr("0123456789abcdef", *p) != NULL);
		const char *canon = tir_workload_canonical(w);
		ck_assert_msg(strchr(canon, ' ') == NULL && strchr(canon, '\n') == NULL,
			      "%s: whitespace in canonical form %s", name, canon);
		/* the canonical form is a fixed point */
		tir_workload *w2 = tir_workload_parse(canon, strlen(canon), NULL, &err);
		ck_assert_msg(w2 != NULL, "%s: canonical %s does not parse: %s", name,
			      canon, err.msg);
		ck_assert_str_eq(tir_workload_canonical(w2), canon);
		ck_assert_str_eq(tir_workload_key(w2), key);
		ck_assert(tir_workload_flops(w) > 0);
		tir_workload_free(w2);
		tir_workload_free(w);
		free(name);
		free(json);
	}
}
END_TEST

START_TEST(suite_keys_are_distinct)
{
	int n = tu_suite_count();
	ck_assert(n > 0);
	char (*keys)[65] = calloc((size_t)n, 65);
	for (int i = 0; i < n; i++) {
		char *json = tu_suite_workload_at(i);
		key_of(json, keys[i]);
		free(json);
		for (int j = 0; j < i; j++)
			ck_assert_str_ne(keys[i], keys[j]);
	}
	free(keys);
}
END_TEST

START_TEST(canonical_form_is_sorted_and_complete)
{
	tir_workload *w = parse_ok("{\"op\":\"matmul\",\"M\":2,\"N\":3,\"K\":4}");
	ck_assert_str_eq(tir_workload_canonical(w),
			 "{\"K\":4,\"M\":2,\"N\":3,\"dtype\":\"float32\",\"epilogue\":[],"
			 "\"layout\":\"NN\",\"op\":\"matmul\",\"out_dtype\":\"float32\"}");
	ck_assert_str_eq(tir_workload_op(w), "matmul");
	tir_workload_free(w);
	w = parse_ok("{\"op\":\"conv2d\",\"N\":1,\"C\":2,\"H\":5,\"W\":6,\"K\":3,"
		     "\"R\":3,\"S\":3,\"pad\":[1,2]}");
	ck_assert_str_eq(tir_workload_canonical(w),
			 "{\"C\":2,\"H\":5,\"K\":3,\"N\":1,\"R\":3,\"S\":3,\"W\":6,"
			 "\"dilation\":[1,1],\"dtype\":\"float32\",\"epilogue\":[],"
			 "\"groups\":1,\"layout\":\"NCHW\",\"op\":\"conv2d\","
			 "\"out_dtype\":\"float32\",\"pad\":[1,2,1,2],\"stride\":[1,1]}");
	ck_assert_int_eq(w->out[0], 5);
	ck_assert_int_eq(w->out[1], 8);
	tir_workload_free(w);
}
END_TEST

START_TEST(defaults_are_equivalent)
{
	char a[65], b[65];
	static const char *const same[] = {
		"{\"op\":\"conv2d\",\"N\":1,\"C\":8,\"H\":9,\"W\":9,\"K\":4,\"R\":3,\"S\":3,"
		"\"pad\":1}",
		"{\"op\":\"conv2d\",\"N\":1,\"C\":8,\"H\":9,\"W\":9,\"K\":4,\"R\":3,\"S\":3,"
		"\"pad\":[1],\"stride\":1,\"dilation\":[1,1]}",
		"{\"op\":\"conv2d\",\"N\":1,\"C\":8,\"H\":9,\"W\":9,\"K\":4,\"R\":3,\"S\":3,"
		"\"pad\":[1,1],\"stride\":[1,1],\"groups\":1,\"layout\":\"NCHW\"}",
		" {\n \"S\":3, \"R\":3, \"K\":4, \"W\":9, \"H\":9, \"C\":8, \"N\":1, "
		"\"op\":\"conv2d\", \"pad\":[1,1,1,1], \"dtype\":\"float32\", "
		"\"out_dtype\":\"float32\", \"epilogue\":[] }\n",
		"{\"op\":\"conv2d\",\"N\":1.0,\"C\":8,\"H\":9,\"W\":9,\"K\":4,\"R\":3,"
		"\"S\":3,\"pad\":1,\"stride\":[1]}",
	};
	key_of(same[0], a);
	for (size_t i = 1; i < sizeof same / sizeof same[0]; i++) {
		key_of(same[i], b);
		ck_assert_msg(!strcmp(a, b), "document %zu differs from document 0", i);
	}
	static const char *const differ[] = {
		"{\"op\":\"conv2d\",\"N\":1,\"C\":8,\"H\":9,\"W\":9,\"K\":4,\"R\":3,\"S\":3,"
		"\"pad\":[1,1,1,2]}",
		"{\"op\":\"conv2d\",\"N\":1,\"C\":8,\"H\":9,\"W\":9,\"K\":4,\"R\":3,\"S\":3,"
		"\"pad\":1,\"layout\":\"NHWC\"}",
		"{\"op\":\"conv2d\",\"N\":1,\"C\":8,\"H\":9,\"W\":9,\"K\":4,\"R\":3,\"S\":3,"
		"\"pad\":1,\"dtype\":\"float16\"}",
		"{\"op\":\"conv2d\",\"N\":1,\"C\":8,\"H\":9,\"W\":9,\"K\":4,\"R\":3,\"S\":3,"
		"\"pad\":1,\"epilogue\":[\"relu\"]}",
		"{\"op\":\"conv2d\",\"N\":1,\"C\":8,\"H\":9,\"W\":9,\"K\":4,\"R\":3,\"S\":3,"
		"\"pad\":1,\"groups\":2}",
	};
	for (size_t i = 0; i < sizeof differ / sizeof differ[0]; i++) {
		key_of(differ[i], b);
		ck_assert_msg(strcmp(a, b) != 0, "document %zu should differ", i);
	}
	/* epilogue order matters; matmul defaults; batch 1 is not "no batch" */
	key_of("{\"op\":\"matmul\",\"M\":4,\"N\":4,\"K\":4,\"epilogue\":[\"bias\",\"relu\"]}", a);
	key_of("{\"op\":\"matmul\",\"M\":4,\"N\":4,\"K\":4,\"epilogue\":[\"relu\",\"bias\"]}", b);
	ck_assert_str_ne(a, b);
	key_of("{\"op\":\"matmul\",\"M\":4,\"N\":4,\"K\":4}", a);
	key_of("{\"op\":\"matmul\",\"M\":4,\"N\":4,\"K\":4,\"layout\":\"NN\","
	       "\"dtype\":\"float32\",\"out_dtype\":\"float32\"}", b);
	ck_assert_str_eq(a, b);
	key_of("{\"op\":\"matmul\",\"M\":4,\"N\":4,\"K\":4,\"batch\":1}", b);
	ck_assert_str_ne(a, b);
	/* int8 accumulates in int32 by default */
	key_of("{\"op\":\"matmul\",\"M\":4,\"N\":4,\"K\":4,\"dtype\":\"int8\"}", a);
	key_of("{\"op\":\"matmul\",\"M\":4,\"N\":4,\"K\":4,\"dtype\":\"int8\","
	       "\"out_dtype\":\"int32\"}", b);
	ck_assert_str_eq(a, b);
	/* so does uint8, a workload of its own */
	key_of("{\"op\":\"matmul\",\"M\":4,\"N\":4,\"K\":4,\"dtype\":\"uint8\"}", b);
	ck_assert_str_ne(a, b);
	key_of("{\"op\":\"matmul\",\"M\":4,\"N\":4,\"K\":4,\"dtype\":\"uint8\","
	       "\"out_dtype\":\"int32\"}", a);
	ck_assert_str_eq(a, b);
}
END_TEST

/* ---- derived values ---------------------------------------------------------------- */

static tir_workload *suite_w(const char *name)
{
	char *json = tu_suite_workload(name);
	ck_assert_msg(json != NULL, "no %s in the suite", name);
	tir_workload *w = parse_ok(json);
	free(json);
	return w;
}

START_TEST(flops_and_output_extents)
{
	tir_workload *w = suite_w("GMM-0");
	ck_assert_double_eq(tir_workload_flops(w), 2.0 * 128 * 128 * 128);
	ck_assert_int_eq(w->batch, 1);
	tir_workload_free(w);

	w = suite_w("C2D-2");          /* 14x14, 3x3, pad 1 */
	ck_assert_int_eq(w->out[0], 14);
	ck_assert_int_eq(w->out[1], 14);
	ck_assert(w->channels_last);
	ck_assert_double_eq(tir_workload_flops(w), 2.0 * 256 * 14 * 14 * 256 * 9);
	tir_workload_free(w);

	w = suite_w("C2D-0");          /* 224, 7x7, stride 2, pad 3 -> 112 */
	ck_assert_int_eq(w->out[0], 112);
	tir_workload_free(w);

	w = suite_w("DIL-0");          /* (224 + 6 - 2*6 - 1)/2 + 1 = 109 */
	ck_assert_int_eq(w->out[0], 109);
	tir_workload_free(w);

	w = suite_w("DEP-1");          /* 112, stride 2, pad 1 -> 56 */
	ck_assert_int_eq(w->out[0], 56);
	ck_assert_int_eq(w->k, 64);
	ck_assert_double_eq(tir_workload_flops(w), 2.0 * 64 * 56 * 56 * 9);
	tir_workload_free(w);

	w = suite_w("T2D-0");          /* (4-1)*2 - 2 + 3 + 1 = 8 */
	ck_assert_int_eq(w->out[0], 8);
	ck_assert_int_eq(w->out[1], 8);
	ck_assert_double_eq(tir_workload_flops(w), 2.0 * 512 * 16 * 256 * 16);
	tir_workload_free(w);

	w = suite_w("GRP-0");
	ck_assert(w->groups > 1);
	ck_assert_double_eq(tir_workload_flops(w),
			    2.0 * w->k * w->out[0] * w->out[1] * (w->c / w->groups) * 9);
	tir_workload_free(w);

	w = parse_ok("{\"op\":\"conv3d\",\"N\":2,\"C\":4,\"D\":5,\"H\":6,\"W\":7,\"K\":8,"
		     "\"T\":3,\"R\":3,\"S\":3,\"pad\":[0,1,1,1,1,2],\"stride\":[1,2,2]}");
	ck_assert_int_eq(w->out[0], 4);    /* 5 + 0 + 1 - 3 + 1 */
	ck_assert_int_eq(w->out[1], 3);    /* (6 + 2 - 3)/2 + 1 */
	ck_assert_int_eq(w->out[2], 4);    /* (7 + 3 - 3)/2 + 1 */
	ck_assert_double_eq(tir_workload_flops(w), 2.0 * 2 * 8 * 4 * 3 * 4 * 4 * 27);
	tir_workload_free(w);

	w = parse_ok("{\"op\":\"conv1d\",\"N\":1,\"C\":4,\"W\":10,\"K\":2,\"S\":3,"
		     "\"pad\":[2,0]}");
	ck_assert_int_eq(w->out[0], 10);
	ck_assert_int_eq(w->pad_lo[0], 2);
	ck_assert_int_eq(w->pad_hi[0], 0);
	tir_workload_free(w);

	w = parse_ok("{\"op\":\"matmul\",\"M\":3,\"N\":5,\"K\":7,\"batch\":4,"
		     "\"layout\":\"TN\",\"epilogue\":[\"gelu\",\"add\"]}");
	ck_assert_double_eq(tir_workload_flops(w), 2.0 * 4 * 3 * 5 * 7);
	ck_assert_int_eq(w->mm_layout, TIR_LAYOUT_TN);
	ck_assert_int_eq(w->nepilogue, 2);
	ck_assert_int_eq(w->epilogue[0], TIR_EPI_GELU);
	ck_assert_int_eq(w->epilogue[1], TIR_EPI_ADD);
	tir_workload_free(w);
}
END_TEST

/* ---- rejected documents --------------------------------------------------------------- */

#define CONV2D "\"op\":\"conv2d\",\"N\":1,\"C\":4,\"H\":8,\"W\":8,\"K\":4,\"R\":3,\"S\":3"
#define MATMUL "\"op\":\"matmul\",\"M\":16,\"N\":16,\"K\":16"
#define TCONV "\"op\":\"conv2d_transpose\",\"N\":1,\"C\":4,\"H\":4,\"W\":4,\"K\":4,\"R\":3,\"S\":3"

static const struct bad {
	const char *json;
	const char *msg;        /* must appear in the error */
} bad_docs[] = {
	{ "{\"op\":\"conv2d\",\"N\":1,\"C\":3}", "conv2d: missing required key \"K\"" },
	{ "{\"op\":\"conv2d\",\"N\":1,\"C\":3,\"K\":2,\"H\":4,\"W\":4,\"R\":1}",
	  "missing required key \"S\"" },
	{ "{\"M\":1,\"N\":1,\"K\":1}", "missing required key \"op\"" },
	{ "{" MATMUL ",\"foo\":2}", "matmul: unknown key \"foo\"" },
	{ "{" MATMUL ",\"H\":2}", "matmul: unknown key \"H\"" },
	{ "{\"op\":\"depthwise_conv2d\",\"N\":1,\"C\":4,\"H\":8,\"W\":8,\"R\":3,\"S\":3,"
	  "\"K\":4}", "depthwise_conv2d: unknown key \"K\"" },
	{ "{\"op\":\"matmul\",\"M\":\"128\",\"N\":1,\"K\":1}",
	  "matmul: M must be an integer, got a string" },
	{ "{\"op\":\"matmul\",\"M\":1.5,\"N\":1,\"K\":1}", "M must be an integer, got 1.5" },
	{ "{\"op\":\"matmul\",\"M\":true,\"N\":1,\"K\":1}", "M must be an integer, got a boolean" },
	{ "{\"op\":\"matmul\",\"M\":null,\"N\":1,\"K\":1}", "M must be an integer, got null" },
	{ "{\"op\":\"matmul\",\"M\":[4],\"N\":1,\"K\":1}", "M must be an integer, got a list" },
	{ "{\"op\":\"matmul\",\"M\":0,\"N\":1,\"K\":1}", "M must be positive, got 0" },
	{ "{\"op\":\"matmul\",\"M\":4,\"N\":1,\"K\":-3}", "K must be positive, got -3" },
	{ "{" MATMUL ",\"batch\":0}", "batch must be positive" },
	{ "{" CONV2D ",\"pad\":-1}", "conv2d: pad must be non-negative, got -1" },
	{ "{" CONV2D ",\"pad\":[1,-2]}", "pad must be non-negative, got -2" },
	{ "{" CONV2D ",\"stride\":0}", "conv2d: stride must be at least 1, got 0" },
	{ "{" CONV2D ",\"dilation\":[1,0]}", "dilation must be at least 1, got 0" },
	{ "{" CONV2D ",\"stride\":\"2\"}", "stride must be an integer, got a string" },
	{ "{" CONV2D ",\"stride\":[2,1.5]}", "stride[1] must be an integer, got 1.5" },
	{ "{\"op\":\"conv2d\",\"N\":1,\"C\":4,\"H\":2,\"W\":8,\"K\":4,\"R\":5,\"S\":3}",
	  "conv2d: empty output along H" },
	{ "{" CONV2D ",\"dilation\":4}", "empty output along H" },
	{ "{" CONV2D ",\"groups\":3}", "conv2d: groups = 3 does not divide C = 4" },
	{ "{\"op\":\"conv2d\",\"N\":1,\"C\":4,\"H\":8,\"W\":8,\"K\":6,\"R\":3,\"S\":3,"
	  "\"groups\":4}", "groups = 4 does not divide K = 6" },
	{ "{" CONV2D ",\"groups\":0}", "groups must be positive" },
	{ "{\"op\":\"softmax\",\"N\":1}", "workload: unknown op \"softmax\"" },
	{ "{\"op\":7}", "op must be a string, got a number" },
	{ "{" MATMUL ",\"dtype\":\"float64\"}", "matmul: unknown dtype \"float64\"" },
	{ "{" MATMUL ",\"dtype\":\"int32\"}", "unknown dtype \"int32\"" },
	{ "{" MATMUL ",\"dtype\":\"int8\",\"out_dtype\":\"float32\"}",
	  "out_dtype \"float32\" is not allowed with dtype int8" },
	{ "{" MATMUL ",\"out_dtype\":\"int32\"}",
	  "out_dtype \"int32\" is not allowed with dtype float32" },
	{ "{" MATMUL ",\"dtype\":\"uint8\",\"out_dtype\":\"float32\"}",
	  "out_dtype \"float32\" is not allowed with dtype uint8 (expected int32)" },
	{ "{" MATMUL ",\"dtype\":\"uint8\",\"out_dtype\":\"uint8\"}",
	  "out_dtype \"uint8\" is not allowed with dtype uint8" },
	{ "{" MATMUL ",\"dtype\":\"uint16\"}",
	  "unknown dtype \"uint16\" (expected float32, float16, bfloat16, int8 or uint8)" },
	{ "{" MATMUL ",\"out_dtype\":\"double\"}", "out_dtype \"double\"" },
	{ "{" CONV2D ",\"layout\":\"NCWH\"}", "conv2d: unknown layout \"NCWH\"" },
	{ "{" CONV2D ",\"layout\":\"NWC\"}", "unknown layout \"NWC\" (expected NCHW or NHWC)" },
	{ "{" MATMUL ",\"layout\":\"TT\"}", "matmul: unknown layout \"TT\"" },
	{ "{" MATMUL ",\"layout\":1}", "layout must be a string, got a number" },
	{ "{" MATMUL ",\"epilogue\":[\"swish\"]}", "matmul: unknown epilogue \"swish\"" },
	{ "{" MATMUL ",\"epilogue\":[\"relu\",\"relu\"]}", "epilogue \"relu\" is listed twice" },
	{ "{" MATMUL ",\"epilogue\":\"relu\"}", "epilogue must be a list of strings" },
	{ "{" MATMUL ",\"epilogue\":[1]}", "epilogue entries must be strings" },
	{ "{" CONV2D ",\"pad\":[1,1,1]}", "conv2d: pad has 3 values, expected 1, 2 or 4" },
	{ "{" CONV2D ",\"pad\":[]}", "conv2d: pad has 0 values, expected 1, 2 or 4" },
	{ "{" CONV2D ",\"stride\":[1,1,1]}", "conv2d: stride has 3 values, expected 1 or 2" },
	{ "{\"op\":\"conv1d\",\"N\":1,\"C\":4,\"W\":8,\"K\":4,\"S\":3,\"pad\":[1,1,1]}",
	  "conv1d: pad has 3 values, expected 1 or 2" },
	{ "{\"op\":\"conv3d\",\"N\":1,\"C\":4,\"D\":8,\"H\":8,\"W\":8,\"K\":4,\"T\":3,"
	  "\"R\":3,\"S\":3,\"pad\":[1,1]}", "conv3d: pad has 2 values, expected 1, 3 or 6" },
	{ "{" TCONV ",\"stride\":2,\"output_padding\":2}",
	  "conv2d_transpose: output_padding 2 along H must be smaller than stride 2" },
	{ "{" TCONV ",\"output_padding\":-1}", "output_padding must be non-negative" },
	{ "{" TCONV ",\"pad\":5}", "conv2d_transpose: empty output along H" },
	{ "{\"op\":\"depthwise_conv2d\",\"N\":1,\"C\":4,\"H\":8,\"W\":8,\"R\":3,\"S\":3,"
	  "\"multiplier\":0}", "multiplier must be positive" },
	{ "{\"op\":\"matmul\",\"M\":2000000,\"N\":1,\"K\":1}",
	  "matmul: M = 2000000 exceeds max_extent 1048576" },
	{ "{\"op\":\"matmul\",\"M\":1e300,\"N\":1,\"K\":1}", "M = 1e+300 is out of range" },
	{ "{\"op\":\"matmul\",\"M\":1048576,\"N\":16,\"K\":1024}",
	  "matmul: A has 1073741824 elements, over max_elements 268435456" },
	{ "{\"op\":\"conv2d\",\"N\":1,\"C\":2048,\"H\":256,\"W\":256,\"K\":2048,\"R\":7,"
	  "\"S\":7,\"pad\":3}", "conv2d: 2.69e+13 FLOPs exceeds max_flops 1e+13" },
	{ "{\"op\":\"conv2d\",\"N\":1,\"C\":1,\"H\":8,\"W\":8,\"K\":1,\"R\":1,\"S\":1,"
	  "\"pad\":100000}", "the padded input has" },
	{ "{\"op\": \"matmul\", \"M\": }", "workload: malformed JSON at line 1, column" },
	{ "{\"op\":\"matmul\",\n\"M\":1,\n  \"N\":@}", "malformed JSON at line 3, column 7" },
	{ "{\"op\":\"matmul\"", "malformed JSON: unexpected end of document" },
	{ "", "malformed JSON" },
	{ "{" MATMUL "} x", "trailing garbage after the JSON object at line 1" },
	{ "{" MATMUL "}{}", "trailing garbage" },
	{ "[1,2]", "workload: expected a JSON object, got a list" },
	{ "\"matmul\"", "expected a JSON object, got a string" },
	{ "42", "expected a JSON object, got a number" },
	{ "{" MATMUL ",\"M\":32}", "matmul: duplicate key \"M\"" },
	{ "{\"op\":[[[[[[[[[\"matmul\"]]]]]]]]]}", "JSON nested deeper than 8 levels" },
	{ "{\"op\":\"matmul\",\"M\":{\"a\":{\"b\":{\"c\":{\"d\":{\"e\":{\"f\":{\"g\":{}}}}}}}}}",
	  "nested deeper than 8 levels (max_json_depth) at line 1, column 55" },
};

START_TEST(bad_documents_name_their_fault)
{
	const struct bad *b = &bad_docs[_i];
	tir_error err = { "" };
	tir_workload *w = tir_workload_parse(b->json, strlen(b->json), NULL, &err);
	ck_assert_msg(w == NULL, "accepted: %s", b->json);
	ck_assert_msg(strstr(err.msg, b->msg) != NULL,
		      "document %s\n  message:  %s\n  expected: %s", b->json, err.msg,
		      b->msg);
}
END_TEST

START_TEST(deep_nesting_is_rejected_before_parsing)
{
	size_t n = 10000;
	char *s = malloc(2 * n + 1);
	for (size_t i = 0; i < n; i++) {
		s[i] = '[';
		s[n + i] = ']';
	}
	s[2 * n] = '\0';
	tir_error err = { "" };
	ck_assert(tir_workload_parse(s, 2 * n, NULL, &err) == NULL);
	ck_assert_msg(strstr(err.msg, "nested deeper than 8") != NULL, "%s", err.msg);
	/* also when the limit is raised far beyond what is sane */
	tir_limits lim = { .max_json_depth = 1 << 20 };
	memset(s, '{', n);        /* unbalanced: must fail cleanly either way */
	ck_assert(tir_workload_parse(s, n, &lim, &err) == NULL);
	free(s);
	/* brackets inside strings do not count */
	const char *str = "{\"op\":\"[[[[[[[[[[[[[[[[[[[[\"}";
	ck_assert(tir_workload_parse(str, strlen(str), NULL, &err) == NULL);
	ck_assert_msg(strstr(err.msg, "unknown op") != NULL, "%s", err.msg);
}
END_TEST

START_TEST(limits_can_be_set)
{
	tir_error err = { "" };
	const char *gmm = "{" MATMUL "}";
	tir_limits lim = { .max_flops = 1000 };
	ck_assert(tir_workload_parse(gmm, strlen(gmm), &lim, &err) == NULL);
	ck_assert_msg(strstr(err.msg, "FLOPs exceeds max_flops 1000") != NULL, "%s", err.msg);
	lim = (tir_limits){ .max_json_bytes = 10 };
	ck_assert(tir_workload_parse(gmm, strlen(gmm), &lim, &err) == NULL);
	ck_assert_msg(strstr(err.msg, "over max_json_bytes 10") != NULL, "%s", err.msg);
	lim = (tir_limits){ .max_extent = 8 };
	ck_assert(tir_workload_parse(gmm, strlen(gmm), &lim, &err) == NULL);
	ck_assert_msg(strstr(err.msg, "M = 16 exceeds max_extent 8") != NULL, "%s", err.msg);
	lim = (tir_limits){ .max_elements = 100 };
	ck_assert(tir_workload_parse(gmm, strlen(gmm), &lim, &err) == NULL);
	ck_assert_msg(strstr(err.msg, "has 256 elements, over max_elements 100") != NULL,
		      "%s", err.msg);
	tir_limits d = tir_limits_default();
	ck_assert_int_eq(d.max_extent, 1 << 20);
	ck_assert_int_eq(d.max_elements, 1 << 28);
	ck_assert_int_eq(d.max_json_depth, 8);
	/* a document need not be NUL-terminated */
	static const char doc[] = "{\"op\":\"matmul\",\"M\":2,\"N\":2,\"K\":2}";
	char buf[64];
	memcpy(buf, doc, sizeof doc - 1);
	memcpy(buf + sizeof doc - 1, "XXXX", 4);
	tir_workload *w = tir_workload_parse(buf, sizeof doc - 1, NULL, &err);
	ck_assert_msg(w != NULL, "%s", err.msg);
	tir_workload_free(w);
	tir_workload_free(NULL);
}
END_TEST

/* ---- targets --------------------------------------------------------------------------- */

/* The roofline's figures: compulsory bytes from the program's parameters,
 * nominal peaks from the target's description. */
START_TEST(roofline_figures)
{
	tir_error err = { "" };
	tir_workload *w = parse_ok("{\"op\": \"matmul\", \"M\": 16, \"N\": 32, \"K\": 8}");
	tir_program *p = tir_program_build(w, &err);
	ck_assert_ptr_nonnull(p);
	/* A 16x8, B 8x32, C 16x32, float32, each once */
	ck_assert_double_eq(tir_program_param_bytes(p), 4.0 * (16 * 8 + 8 * 32 + 16 * 32));
	tir_program_free(p);
	tir_workload_free(w);
	w = parse_ok("{\"op\": \"matmul\", \"M\": 4, \"N\": 4, \"K\": 4, \"dtype\": \"float16\", "
		     "\"epilogue\": [\"bias\"]}");
	p = tir_program_build(w, &err);
	ck_assert_ptr_nonnull(p);
	/* float16 A and B, a float32 bias of N and output; the accumulator
	 * (C_acc, a temporary) is no traffic */
	ck_assert_double_eq(tir_program_param_bytes(p), 2.0 * (16 + 16) + 4.0 * 4 + 4.0 * 16);
	tir_program_free(p);
	tir_workload_free(w);

	tir_target t;
	tir_peak pk;
	ck_assert_int_eq(tir_target_parse("cuda:sm_90", &t, &err), 0);
	tir_target_peak(&t, &pk);
	ck_assert_double_eq(pk.gflops, 67000);
	ck_assert_double_eq(pk.gbps, 4800);
	ck_assert(strstr(pk.basis, "nominal") == pk.basis && strstr(pk.basis, "H200"));
	ck_assert_int_eq(tir_target_parse("cpu:x86_64+avx2+fma", &t, &err), 0);
	tir_target_peak(&t, &pk);
	/* cores x 8 lanes x 2 flops x 2 FMA pipes x 3 GHz */
	ck_assert_double_eq(pk.gflops, t.cores * 8 * 2.0 * 2 * 3.0);
	ck_assert_double_eq(pk.gbps, 51.2);
	ck_assert_int_eq(tir_target_parse("cpu:x86_64", &t, &err), 0);
	tir_target_peak(&t, &pk);
	ck_assert_double_eq(pk.gflops, t.cores * 4 * 2.0 * 1 * 3.0);   /* SSE, no FMA */
	ck_assert(strstr(pk.basis, "nominal") == pk.basis);
}
END_TEST

START_TEST(targets)
{
	tir_target t;
	tir_error err = { "" };
	ck_assert_int_eq(tir_target_parse("cuda:sm_90", &t, &err), 0);
	ck_assert_int_eq(t.kind, TIR_TARGET_CUDA);
	ck_assert_str_eq(t.key, "cuda:sm_90");
	ck_assert_int_eq(t.sm, 90);
	ck_assert_int_eq(t.sm_count, 132);
	ck_assert_int_eq(t.max_shared_per_block, 232448);
	ck_assert_int_eq(t.warp_size, 32);
	ck_assert_int_eq(tir_target_parse("cuda:sm_80", &t, &err), 0);
	ck_assert_int_eq(t.max_shared_per_block, 166912);
	/* a part after the architecture: its own key, the architecture's code
	 * and limits (an H100's records are never an H200's, issue #33) */
	ck_assert_int_eq(tir_target_parse("cuda:sm_90+h100-80gb-hbm3", &t, &err), 0);
	ck_assert_str_eq(t.key, "cuda:sm_90+h100-80gb-hbm3");
	ck_assert(t.kind == TIR_TARGET_CUDA && t.sm == 90 && t.sm_count == 132);
	ck_assert_int_eq(tir_target_parse("cuda:sm_90+h200", &t, &err), 0);
	ck_assert_str_eq(t.key, "cuda:sm_90+h200");
	char part[TIR_CUDA_PART_MAX];
	static const struct { const char *name, *part; } names[] = {
		{ "NVIDIA H200", "h200" },
		{ "NVIDIA H100 80GB HBM3", "h100-80gb-hbm3" },
		{ "NVIDIA GeForce RTX 4090", "geforce-rtx-4090" },
		{ "  NVIDIA A100-SXM4-40GB ", "nvidia-a100-sxm4-40gb" },
		{ "Tesla T4", "tesla-t4" },
		{ "NVIDIA H100 PCIe (MIG 1g.10gb)", "h100-pcie-mig-1g-10gb" },
	};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		ck_assert(tir_cuda_part_of_name(names[i].name, part, sizeof part));
		ck_assert_str_eq(part, names[i].part);
		/* every part made of a name is a key's */
		char key[128];
		snprintf(key, sizeof key, "cuda:sm_90+%s", part);
		ck_assert_msg(tir_target_parse(key, &t, &err) == 0, "%s: %s", key, err.msg);
	}
	ck_assert(!tir_cuda_part_of_name("NVIDIA ", part, sizeof part) && !part[0]);
	ck_assert(!tir_cuda_part_of_name("()", part, sizeof part) && !part[0]);
	/* a long name is cut, never overflows, and still makes a key */
	ck_assert(tir_cuda_part_of_name("NVIDIA A Very Long Board Name That Goes On And On "
					"And On Past Any Limit", part, sizeof part));
	ck_assert(strlen(part) < TIR_CUDA_PART_MAX);

	ck_assert_int_eq(tir_target_parse("cpu", &t, &err), 0);
	ck_assert_int_eq(t.kind, TIR_TARGET_CPU);
	ck_assert_msg(!strncmp(t.key, "cpu:", 4), "%s", t.key);
	ck_assert(t.vector_bytes == 16 || t.vector_bytes == 32 || t.vector_bytes == 64);
	ck_assert(t.cores >= 1);
	/* the detected key parses back to itself */
	char key[128];
	memcpy(key, t.key, sizeof key);
	ck_assert_int_eq(tir_target_parse(key, &t, &err), 0);
	ck_assert_str_eq(t.key, key);

	/* a full key is taken as given, in canonical feature order */
	ck_assert_int_eq(tir_target_parse("cpu:x86_64+fma+avx2", &t, &err), 0);
	ck_assert_str_eq(t.key, "cpu:x86_64+avx2+fma");
	ck_assert_int_eq(t.vector_bytes, 32);
	ck_assert_int_eq(tir_target_parse("cpu:x86_64+avx2+fma+avx512f+avx512bw+avx512vnni",
					  &t, &err), 0);
	ck_assert_int_eq(t.vector_bytes, 64);
	ck_assert_int_eq(tir_target_parse("cpu:aarch64+neon+dotprod", &t, &err), 0);
	ck_assert_str_eq(t.key, "cpu:aarch64+neon+dotprod");
	ck_assert_int_eq(t.vector_bytes, 16);
	ck_assert(!t.emulated && tir_target_has(&t, "dotprod") && tir_target_has(&t, "neon"));
	ck_assert(!tir_target_has(&t, "dot") && !tir_target_has(&t, "i8mm"));
	/* every AArch64 hwcap tird names, in key order; +emulated last (issue #33) */
	ck_assert_int_eq(tir_target_parse("cpu:aarch64+sve2+sve+bf16+i8mm+fp16+dotprod+neon+"
					  "emulated", &t, &err), 0);
	ck_assert_str_eq(t.key, "cpu:aarch64+neon+dotprod+fp16+i8mm+bf16+sve+sve2+emulated");
	ck_assert(t.emulated && tir_target_has(&t, "i8mm") && tir_target_has(&t, "sve2"));
	ck_assert_int_eq(tir_target_parse("cpu:x86_64+avx2+fma+emulated", &t, &err), 0);
	ck_assert(t.emulated && !strcmp(t.key, "cpu:x86_64+avx2+fma+emulated"));

	static const struct { const char *s, *msg; } bad[] = {
		{ "tpu", "unknown target \"tpu\"" },
		{ "", "unknown target" },
		{ "cuda:sm_99", "unknown architecture sm_99" },
		{ "cuda:90", "expected cuda:sm_XY" },
		{ "cuda:sm_9x", "expected cuda:sm_XY" },
		{ "cuda:sm_+90", "expected cuda:sm_XY" },
		{ "cuda:sm_90+", "the part \"\" must be" },
		{ "cuda:sm_90+H200", "the part \"H200\" must be" },
		{ "cuda:sm_90+h200+h100", "the part \"h200+h100\" must be" },
		{ "cuda:sm_90+h100--pcie", "must be lower-case" },
		{ "cuda:sm_90+-h100", "must be lower-case" },
		{ "cuda:sm_90+h100-", "must be lower-case" },
		{ "cuda:sm_90+h100 pcie", "must be lower-case" },
		{ "cuda:sm_90+0123456789012345678901234567890123456789012345678",
		  "at most 47 characters" },
		{ "cuda:sm_99+h200", "unknown architecture sm_99" },
		{ "cpu:x86_64+sse9", "unknown feature \"sse9\" for x86_64" },
		{ "cpu:aarch64+avx2", "unknown feature \"avx2\" for aarch64" },
		{ "cpu:", "expected cpu:ARCH" },
		{ "cpu:X86!", "bad architecture name" },
		/* a full key names hardware that exists (issue #31: cpu:sparc was taken) */
		{ "cpu:sparc", "unknown architecture \"sparc\"" },
		{ "cpu:anything", "unknown architecture \"anything\"" },
		{ "cpu:x86_64+avx2+avx2", "feature \"avx2\" is named twice" },
		{ "cpu:x86_64+avx512f", "feature \"avx512f\" without \"avx2\"" },
		{ "cpu:x86_64+avx2+avx512bw", "feature \"avx512bw\" without \"avx512f\"" },
		{ "cpu:aarch64+dotprod", "feature \"dotprod\" without \"neon\"" },
		{ "cpu:x86_64+", "unknown feature \"\" for x86_64" },
		{ "cpu:aarch64+sve2", "feature \"sve2\" without \"sve\"" },
		{ "cpu:aarch64+neon+emulated+dotprod", "\"emulated\" must come last" },
		{ "cpu:aarch64+neon+qemu", "unknown feature \"qemu\" for aarch64" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ck_assert_msg(tir_target_parse(bad[i].s, &t, &err) == -1, "%s", bad[i].s);
		ck_assert_msg(strstr(err.msg, bad[i].msg) != NULL, "%s: %s", bad[i].s,
			      err.msg);
	}
	/* bare "cuda" either finds a GPU or says why not */
	if (tir_target_parse("cuda", &t, &err) == 0)
		ck_assert(t.sm >= 50 && t.sm_count > 0 && t.max_shared_per_block > 0);
	else
		ck_assert_msg(strstr(err.msg, "cuda:") != NULL, "%s", err.msg);
}
END_TEST

/* ---- the references ---------------------------------------------------------------------- */

typedef struct ref_case {
	tir_workload *w;
	int nargs;
	tir_ref_arg args[TIR_REF_MAX_ARGS];
	double *buf[TIR_REF_MAX_ARGS];
} ref_case;

/* The program's arguments (tir_reference_args), checked against the
 * hand-written reference's: the same shapes, dtypes and roles, in order
 * (the names may differ: the program's residual is the hand-written
 * "add"). */
static void ref_open(ref_case *rc, const char *json)
{
	tir_error err = { "" };
	rc->w = parse_ok(json);
	rc->nargs = tir_reference_args(rc->w, rc->args, TIR_REF_MAX_ARGS, &err);
	ck_assert_msg(rc->nargs > 0, "%s", err.msg);
	tir_ref_arg hand[TIR_REF_MAX_ARGS];
	ck_assert_int_eq(ref_hand_args(rc->w, hand, TIR_REF_MAX_ARGS, &err), rc->nargs);
	for (int i = 0; i < rc->nargs; i++) {
		const tir_ref_arg *a = &rc->args[i], *h = &hand[i];
		ck_assert_msg(a->ndim == h->ndim && a->elems == h->elems && a->dtype == h->dtype &&
			      a->is_output == h->is_output && !memcmp(a->shape, h->shape,
								      sizeof(int64_t) * (size_t)a->ndim),
			      "%s: argument %d: %s vs %s", json, i, a->name, h->name);
		rc->buf[i] = calloc((size_t)rc->args[i].elems, sizeof(double));
	}
}

/* Both references on rc's inputs; they must agree (to rounding: the
 * hand-written one sums the taps of a window in another order), and the
 * interpreter's output is left in rc->buf for the caller's checks. */
static void ref_run(ref_case *rc)
{
	tir_error err = { "" };
	int n = rc->nargs, o = n - 1;
	ck_assert(rc->args[o].is_output);
	double *hand = calloc((size_t)rc->args[o].elems, sizeof(double));
	ck_assert_msg(ref_hand(rc->w, rc->buf, hand, &err) == 0, "%s", err.msg);
	ck_assert_msg(tir_reference(rc->w, rc->buf, &err) == 0, "%s", err.msg);
	double d = 0, m = 0;
	for (int64_t i = 0; i < rc->args[o].elems; i++) {
		d = fmax(d, fabs(hand[i] - rc->buf[o][i]));
		m = fmax(m, fabs(hand[i]));
	}
	ck_assert_msg(d <= 1e-12 * fmax(m, 1), "%s: the references differ by %g",
		      tir_workload_canonical(rc->w), d);
	free(hand);
}

static void ref_close(ref_case *rc)
{
	for (int i = 0; i < rc->nargs; i++)
		free(rc->buf[i]);
	tir_workload_free(rc->w);
}

static void fill_seq(double *v, int64_t n, double start)
{
	for (int64_t i = 0; i < n; i++)
		v[i] = start + (double)i;
}

START_TEST(reference_tiny_conv2d)
{
	/* X = 1..9 (3x3), W = 1..4 (2x2): Y = [[37, 47], [67, 77]] */
	static const char *const docs[] = {
		"{\"op\":\"conv2d\",\"N\":1,\"C\":1,\"H\":3,\"W\":3,\"K\":1,\"R\":2,\"S\":2}",
		"{\"op\":\"conv2d\",\"N\":1,\"C\":1,\"H\":3,\"W\":3,\"K\":1,\"R\":2,\"S\":2,"
		"\"layout\":\"NHWC\"}",
	};
	for (int d = 0; d < 2; d++) {
		ref_case rc;
		ref_open(&rc, docs[d]);
		ck_assert_int_eq(rc.nargs, 3);
		ck_assert_str_eq(rc.args[0].name, "X");
		ck_assert_str_eq(rc.args[1].name, "W");
		ck_assert_str_eq(rc.args[2].name, "Y");
		ck_assert(rc.args[2].is_output);
		ck_assert_int_eq(rc.args[2].elems, 4);
		ck_assert_int_eq(rc.args[0].ndim, 4);
		fill_seq(rc.buf[0], 9, 1);
		fill_seq(rc.buf[1], 4, 1);
		ref_run(&rc);
		const double want[4] = { 37, 47, 67, 77 };
		for (int i = 0; i < 4; i++)
			ck_assert_double_eq(rc.buf[2][i], want[i]);
		ref_close(&rc);
	}
	/* pad 1: 4x4 output; corners see one tap each */
	ref_case rc;
	ref_open(&rc, "{\"op\":\"conv2d\",\"N\":1,\"C\":1,\"H\":3,\"W\":3,\"K\":1,"
		 "\"R\":2,\"S\":2,\"pad\":1}");
	ck_assert_int_eq(rc.args[2].elems, 16);
	fill_seq(rc.buf[0], 9, 1);
	fill_seq(rc.buf[1], 4, 1);
	ref_run(&rc);
	ck_assert_double_eq(rc.buf[2][0], 1 * 4);          /* X[0,0] W[1,1] */
	ck_assert_double_eq(rc.buf[2][3], 3 * 3);          /* X[0,2] W[1,0] */
	ck_assert_double_eq(rc.buf[2][15], 9 * 1);         /* X[2,2] W[0,0] */
	ck_assert_double_eq(rc.buf[2][5], 37);             /* interior = unpadded [0,0] */
	ref_close(&rc);
	/* stride 2, dilation 2 on 5x5 with a 2x2 kernel: taps (0,0),(0,2),(2,0),(2,2) */
	ref_open(&rc, "{\"op\":\"conv2d\",\"N\":1,\"C\":1,\"H\":5,\"W\":5,\"K\":1,"
		 "\"R\":2,\"S\":2,\"stride\":2,\"dilation\":2}");
	ck_assert_int_eq(rc.w->out[0], 2);
	fill_seq(rc.buf[0], 25, 0);
	fill_seq(rc.buf[1], 4, 1);
	ref_run(&rc);
	ck_assert_double_eq(rc.buf[2][0], 0 * 1 + 2 * 2 + 10 * 3 + 12 * 4);
	ck_assert_double_eq(rc.buf[2][3], 12 * 1 + 14 * 2 + 22 * 3 + 24 * 4);
	ref_close(&rc);
}
END_TEST

START_TEST(reference_grouped_conv)
{
	/* 1x1 conv, C=4, K=2, groups=2: y0 = x0*1 + x1*10, y1 = x2*100 + x3*1000 */
	ref_case rc;
	ref_open(&rc, "{\"op\":\"conv2d\",\"N\":1,\"C\":4,\"H\":1,\"W\":1,\"K\":2,"
		 "\"R\":1,\"S\":1,\"groups\":2}");
	ck_assert_int_eq(rc.args[1].elems, 4);          /* W[K=2, C/groups=2] */
	fill_seq(rc.buf[0], 4, 1);
	double wf[4] = { 1, 10, 100, 1000 };
	memcpy(rc.buf[1], wf, sizeof wf);
	ref_run(&rc);
	ck_assert_double_eq(rc.buf[2][0], 21);
	ck_assert_double_eq(rc.buf[2][1], 4300);
	ref_close(&rc);
	/* the same in NHWC, weight [C/groups, K] */
	ref_open(&rc, "{\"op\":\"conv2d\",\"N\":1,\"C\":4,\"H\":1,\"W\":1,\"K\":2,"
		 "\"R\":1,\"S\":1,\"groups\":2,\"layout\":\"NHWC\"}");
	ck_assert_int_eq(rc.args[1].shape[2], 2);
	fill_seq(rc.buf[0], 4, 1);
	double wl[4] = { 1, 100, 10, 1000 };
	memcpy(rc.buf[1], wl, sizeof wl);
	ref_run(&rc);
	ck_assert_double_eq(rc.buf[2][0], 21);
	ck_assert_double_eq(rc.buf[2][1], 4300);
	ref_close(&rc);
	/* depthwise, multiplier 2: y[c*2+m] = x[c] * w[c, m] */
	ref_open(&rc, "{\"op\":\"depthwise_conv2d\",\"N\":1,\"C\":2,\"H\":1,\"W\":1,"
		 "\"R\":1,\"S\":1,\"multiplier\":2}");
	ck_assert_int_eq(rc.args[2].elems, 4);
	rc.buf[0][0] = 3;
	rc.buf[0][1] = 5;
	fill_seq(rc.buf[1], 4, 1);
	ref_run(&rc);
	ck_assert_double_eq(rc.buf[2][0], 3);
	ck_assert_double_eq(rc.buf[2][1], 6);
	ck_assert_double_eq(rc.buf[2][2], 15);
	ck_assert_double_eq(rc.buf[2][3], 20);
	ref_close(&rc);
}
END_TEST

START_TEST(reference_transpose)
{
	/* stride 2, 2x2 kernel, no overlap: Y[2i+r, 2j+s] = X[i,j] * W[r,s] */
	ref_case rc;
	ref_open(&rc, "{\"op\":\"conv2d_transpose\",\"N\":1,\"C\":1,\"H\":2,\"W\":2,"
		 "\"K\":1,\"R\":2,\"S\":2,\"stride\":2}");
	ck_assert_int_eq(rc.w->out[0], 4);
	fill_seq(rc.buf[0], 4, 1);
	fill_seq(rc.buf[1], 4, 1);
	ref_run(&rc);
	const double want[16] = { 1, 2, 2, 4, 3, 4, 6, 8, 3, 6, 4, 8, 9, 12, 12, 16 };
	for (int i = 0; i < 16; i++)
		ck_assert_double_eq(rc.buf[2][i], want[i]);
	ref_close(&rc);
	/* stride 1, 3x3 kernel of ones, pad 1: each output sums its 3x3 neighbourhood */
	ref_open(&rc, "{\"op\":\"conv2d_transpose\",\"N\":1,\"C\":1,\"H\":3,\"W\":3,"
		 "\"K\":1,\"R\":3,\"S\":3,\"pad\":1}");
	ck_assert_int_eq(rc.w->out[0], 3);
	fill_seq(rc.buf[0], 9, 1);
	for (int i = 0; i < 9; i++)
		rc.buf[1][i] = 1;
	ref_run(&rc);
	ck_assert_double_eq(rc.buf[2][4], 45);
	ck_assert_double_eq(rc.buf[2][0], 1 + 2 + 4 + 5);
	ref_close(&rc);
	/* grouped, channels-last: C=2, K=2, groups=2: y[k] = x[k] * w[k] */
	ref_open(&rc, "{\"op\":\"conv2d_transpose\",\"N\":1,\"C\":2,\"H\":1,\"W\":1,"
		 "\"K\":2,\"R\":1,\"S\":1,\"groups\":2,\"layout\":\"NHWC\"}");
	rc.buf[0][0] = 3;
	rc.buf[0][1] = 5;
	rc.buf[1][0] = 7;
	rc.buf[1][1] = 11;
	ref_run(&rc);
	ck_assert_double_eq(rc.buf[2][0], 21);
	ck_assert_double_eq(rc.buf[2][1], 55);
	ref_close(&rc);
}
END_TEST

START_TEST(reference_matmul_layouts_agree)
{
	const int M = 3, N = 4, K = 5, B = 2;
	ref_case nn, nt, tn;
	ref_open(&nn, "{\"op\":\"matmul\",\"M\":3,\"N\":4,\"K\":5,\"batch\":2}");
	ref_open(&nt, "{\"op\":\"matmul\",\"M\":3,\"N\":4,\"K\":5,\"batch\":2,\"layout\":\"NT\"}");
	ref_open(&tn, "{\"op\":\"matmul\",\"M\":3,\"N\":4,\"K\":5,\"batch\":2,\"layout\":\"TN\"}");
	ck_assert_int_eq(nt.args[1].shape[1], N);
	ck_assert_int_eq(tn.args[0].shape[1], K);
	ck_assert_int_eq(nn.args[2].ndim, 3);
	for (int b = 0; b < B; b++)
		for (int i = 0; i < M; i++)
			for (int k = 0; k < K; k++) {
				double v = sin(1.0 + b * 31 + i * 7 + k);
				nn.buf[0][(b * M + i) * K + k] = v;
				nt.buf[0][(b * M + i) * K + k] = v;
				tn.buf[0][(b * K + k) * M + i] = v;
			}
	for (int b = 0; b < B; b++)
		for (int k = 0; k < K; k++)
			for (int j = 0; j < N; j++) {
				double v = cos(2.0 + b * 17 + k * 3 + j);
				nn.buf[1][(b * K + k) * N + j] = v;
				nt.buf[1][(b * N + j) * K + k] = v;
				tn.buf[1][(b * K + k) * N + j] = v;
			}
	ref_run(&nn);
	ref_run(&nt);
	ref_run(&tn);
	for (int i = 0; i < B * M * N; i++) {
		ck_assert_double_eq_tol(nt.buf[2][i], nn.buf[2][i], 1e-12);
		ck_assert_double_eq_tol(tn.buf[2][i], nn.buf[2][i], 1e-12);
	}
	/* one element by hand */
	double c = 0;
	for (int k = 0; k < K; k++)
		c += nn.buf[0][(1 * M + 2) * K + k] * nn.buf[1][(1 * K + k) * N + 3];
	ck_assert_double_eq_tol(nn.buf[2][(1 * M + 2) * N + 3], c, 1e-12);
	ref_close(&nn);
	ref_close(&nt);
	ref_close(&tn);
}
END_TEST

START_TEST(reference_epilogues)
{
	/* C = A B with A = I (2x2); then + bias[N], relu, + add */
	ref_case rc;
	ref_open(&rc, "{\"op\":\"matmul\",\"M\":2,\"N\":2,\"K\":2,"
		 "\"epilogue\":[\"bias\",\"relu\",\"add\"]}");
	ck_assert_int_eq(rc.nargs, 5);
	ck_assert_str_eq(rc.args[2].name, "bias");
	ck_assert_int_eq(rc.args[2].elems, 2);
	ck_assert_str_eq(rc.args[3].name, "residual");
	ck_assert_int_eq(rc.args[3].elems, 4);
	ck_assert_str_eq(rc.args[4].name, "C");
	double a[4] = { 1, 0, 0, 1 }, b[4] = { 1, -5, 2, 3 }, bias[2] = { 10, 1 };
	double add[4] = { 0.5, 0.5, 0.5, 0.5 };
	memcpy(rc.buf[0], a, sizeof a);
	memcpy(rc.buf[1], b, sizeof b);
	memcpy(rc.buf[2], bias, sizeof bias);
	memcpy(rc.buf[3], add, sizeof add);
	ref_run(&rc);
	ck_assert_double_eq(rc.buf[4][0], 11.5);
	ck_assert_double_eq(rc.buf[4][1], 0.5);   /* relu(-5 + 1) + 0.5 */
	ck_assert_double_eq(rc.buf[4][2], 12.5);
	ck_assert_double_eq(rc.buf[4][3], 4.5);
	ref_close(&rc);
	/* conv NCHW bias is per channel; gelu(1) = 0.8413447460685429 */
	ref_open(&rc, "{\"op\":\"conv2d\",\"N\":1,\"C\":1,\"H\":1,\"W\":2,\"K\":2,"
		 "\"R\":1,\"S\":1,\"epilogue\":[\"bias\",\"gelu\"]}");
	rc.buf[0][0] = 1;
	rc.buf[0][1] = 2;
	rc.buf[1][0] = 1;
	rc.buf[1][1] = 0;
	rc.buf[2][0] = 0;
	rc.buf[2][1] = 1;
	ref_run(&rc);
	ck_assert_double_eq_tol(rc.buf[3][0], 0.8413447460685429, 1e-12);   /* k0,w0 */
	ck_assert_double_eq_tol(rc.buf[3][1], 2 * 0.5 * (1 + erf(2 / sqrt(2.0))), 1e-12);
	ck_assert_double_eq_tol(rc.buf[3][2], 0.8413447460685429, 1e-12);   /* k1: 0 + 1 */
	ref_close(&rc);
}
END_TEST

static Suite *workload_suite(void)
{
	Suite *s = suite_create("workload");
	TCase *tc = tcase_create("parse");
	tcase_add_test(tc, suite_parses_and_canonical_is_stable);
	tcase_add_test(tc, suite_keys_are_distinct);
	tcase_add_test(tc, canonical_form_is_sorted_and_complete);
	tcase_add_test(tc, defaults_are_equivalent);
	tcase_add_test(tc, flops_and_output_extents);
	tcase_add_loop_test(tc, bad_documents_name_their_fault, 0,
			    (int)(sizeof bad_docs / sizeof bad_docs[0]));
	tcase_add_test(tc, deep_nesting_is_rejected_before_parsing);
	tcase_add_test(tc, limits_can_be_set);
	suite_add_tcase(s, tc);
	tc = tcase_create("target");
	tcase_add_test(tc, targets);
	tcase_add_test(tc, roofline_figures);
	suite_add_tcase(s, tc);
	tc = tcase_create("reference");
	tcase_add_test(tc, reference_tiny_conv2d);
	tcase_add_test(tc, reference_grouped_conv);
	tcase_add_test(tc, reference_transpose);
	tcase_add_test(tc, reference_matmul_layouts_agree);
	tcase_add_test(tc, reference_epilogues);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(workload_suite());
}
