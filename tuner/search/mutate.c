/*
 * mutate.c — mutators: one changed decision of one sampling instruction of a
 * trace, and the generator the search draws from.
 *
 * A mutator edits the JSON of a trace, never a program: the copy is replayed
 * on a fresh schedule (sched_replay_valid), where the sampling instruction checks
 * the new decision and every later instruction re-derives the program from
 * it.  So a mutator only needs to propose decisions that are plausible; the
 * replay and the verifier decide, and the search counts what they reject.
 * The proposals stay inside each instruction's own contract where the trace
 * says enough to know it (a perfect tile keeps its product and its
 * max_innermost; a categorical index stays among the candidates), so few are
 * rejected.
 */
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include "search.h"
#include "../sched/sched.h"

static uint64_t below(uint64_t *rng, uint64_t n)
{
	return n ? tir_rand(rng) % n : 0;
}

/* ---- reading one instruction ------------------------------------------------- */

typedef enum { MUT_NONE, MUT_TILE, MUT_CATEGORICAL, MUT_LOCATION } mut_kind;

static mut_kind kind_of(const cJSON *inst)
{
	const cJSON *op = cJSON_GetObjectItemCaseSensitive(inst, "op");
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(inst, "decision");
	if (!cJSON_IsString(op) || !cJSON_IsArray(d) || cJSON_GetArraySize(d) < 1)
		return MUT_NONE;
	if (!strcmp(op->valuestring, "sample_perfect_tile"))
		return MUT_TILE;
	if (!strcmp(op->valuestring, "sample_categorical"))
		return MUT_CATEGORICAL;
	if (!strcmp(op->valuestring, "sample_compute_location"))
		return MUT_LOCATION;
	return MUT_NONE;
}

static int64_t num_at(const cJSON *a, int i)
{
	const cJSON *x = cJSON_GetArrayItem(a, i);
	return cJSON_IsNumber(x) ? (int64_t)x->valuedouble : 0;
}

static void set_num(cJSON *a, int i, int64_t v)
{
	cJSON_ReplaceItemInArray(a, i, cJSON_CreateNumber((double)v));
}

/* ---- the mutators: each changes inst's decision in place, 0 or -1 ----------- */

/* The prime factors of x (with repetition), at most max; returns how many. */
static int prime_factors(int64_t x, int64_t *p, int max)
{
	int n = 0;
	for (int64_t d = 2; d * d <= x && n < max; d++)
		while (x % d == 0 && n < max) {
			p[n++] = d;
			x /= d;
		}
	if (x > 1 && n < max)
		p[n++] = x;
	return n;
}

/* sample_perfect_tile: move one prime factor from one position to another;
 * the product stays the loop's extent, the innermost stays within
 * max_innermost (attrs[1], when positive). */
static int mutate_tile(cJSON *inst, uint64_t *rng)
{
	cJSON *d = cJSON_GetObjectItemCaseSensitive(inst, "decision");
	const cJSON *attrs = cJSON_GetObjectItemCaseSensitive(inst, "attrs");
	int n = cJSON_GetArraySize(d);
	if (n < 2 || n > TIR_MAX_IO)
		return -1;
	int64_t max_inner = attrs ? num_at(attrs, 1) : 0;
	int64_t f[TIR_MAX_IO];
	int from[TIR_MAX_IO], nfrom = 0;
	for (int i = 0; i < n; i++) {
		f[i] = num_at(d, i);
		if (f[i] > 1)
			from[nfrom++] = i;
	}
	if (!nfrom)
		return -1;
	for (int attempt = 0; attempt < 8; attempt++) {
		int i = from[below(rng, (uint64_t)nfrom)];
		int j = (int)below(rng, (uint64_t)n - 1);
		if (j >= i)
			j++;
		int64_t p[64];
		int np = prime_factors(f[i], p, 64);
		int64_t q = p[below(rng, (uint64_t)np)];
		int64_t fi = f[i] / q, fj = f[j] * q;
		int64_t inner = j == n - 1 ? fj : i == n - 1 ? fi : f[n - 1];
		if (max_inner > 0 && inner > max_inner)
			continue;
		set_num(d, i, fi);
		set_num(d, j, fj);
		return 0;
	}
	return -1;
}

/* sample_categorical: another candidate index among those of non-zero
 * probability (fattrs). */
static int mutate_categorical(cJSON *inst, uint64_t *rng)
{
	cJSON *d = cJSON_GetObjectItemCaseSensitive(inst, "decision");
	const cJSON *probs = cJSON_GetObjectItemCaseSensitive(inst, "fattrs");
	const cJSON *in = cJSON_GetObjectItemCaseSensitive(inst, "in");
	int n = cJSON_GetArraySize(in);
	int64_t cur = num_at(d, 0);
	int other[TIR_MAX_IO], nother = 0;
	for (int k = 0; k < n && k < TIR_MAX_IO; k++) {
		const cJSON *pk = probs ? cJSON_GetArrayItem(probs, k) : NULL;
		if (k != cur && (!pk || (cJSON_IsNumber(pk) && pk->valuedouble > 0)))
			other[nother++] = k;
	}
	if (!nother)
		return -1;
	set_num(d, 0, other[below(rng, (uint64_t)nother)]);
	return 0;
}

/* sample_compute_location: another location index.  The trace does not say
 * how many locations there are (sched_compute_locations lists them on the
 * program at replay time), so the proposal is a neighbour (±1, ±2) that is
 * not negative; the replay rejects an index past the end, and the mutant is
 * discarded. */
static int mutate_location(cJSON *inst, uint64_t *rng)
{
	cJSON *d = cJSON_GetObjectItemCaseSensitive(inst, "decision");
	int64_t cur = num_at(d, 0);
	static const int delta[] = { -2, -1, 1, 2 };
	for (int attempt = 0; attempt < 8; attempt++) {
		int64_t k = cur + delta[below(rng, 4)];
		if (k >= 0) {
			set_num(d, 0, k);
			return 0;
		}
	}
	return -1;
}

/* Whether inst has a decision that some mutation could change. */
static bool mutable_inst(const cJSON *inst)
{
	switch (kind_of(inst)) {
	case MUT_TILE: {
		const cJSON *d = cJSON_GetObjectItemCaseSensitive(inst, "decision");
		int n = cJSON_GetArraySize(d);
		for (int i = 0; n >= 2 && i < n; i++)
			if (num_at(d, i) > 1)
				return true;
		return false;
	}
	case MUT_CATEGORICAL:
		return cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(inst, "in")) >= 2;
	case MUT_LOCATION:
		return true;
	default:
		return false;
	}
}

static const cJSON *insts_of(const cJSON *root)
{
	const cJSON *insts = cJSON_IsObject(root)
		? cJSON_GetObjectItemCaseSensitive(root, "insts") : NULL;
	return cJSON_IsArray(insts) ? insts : NULL;
}

int mutate_count(const char *trace)
{
	cJSON *root = cJSON_Parse(trace);
	const cJSON *insts = insts_of(root);
	int n = 0;
	const cJSON *x;
	if (insts)
		cJSON_ArrayForEach(x, insts)
			n += mutable_inst(x);
	cJSON_Delete(root);
	return n;
}

char *mutate_trace(const char *trace, uint64_t *rng)
{
	cJSON *root = cJSON_Parse(trace);
	const cJSON *insts = insts_of(root);
	if (!insts) {
		cJSON_Delete(root);
		return NULL;
	}
	int n = cJSON_GetArraySize(insts);
	int *idx = xmalloc(sizeof(int) * (size_t)(n + 1));
	int m = 0;
	for (int i = 0; i < n; i++)
		if (mutable_inst(cJSON_GetArrayItem(insts, i)))
			idx[m++] = i;
	char *out = NULL;
	/* Pick an instruction; if its mutator cannot move (a tile held in place
	 * by max_innermost), try another, a bounded number of times. */
	for (int attempt = 0; m && attempt < 8 && !out; attempt++) {
		cJSON *inst = cJSON_GetArrayItem(insts, idx[below(rng, (uint64_t)m)]);
		int rc = -1;
		switch (kind_of(inst)) {
		case MUT_TILE: rc = mutate_tile(inst, rng); break;
		case MUT_CATEGORICAL: rc = mutate_categorical(inst, rng); break;
		case MUT_LOCATION: rc = mutate_location(inst, rng); break;
		default: break;
		}
		if (rc == 0) {
			char *txt = cJSON_PrintUnformatted(root);
			out = xstrdup(txt);
			cJSON_free(txt);
		}
	}
	free(idx);
	cJSON_Delete(root);
	return out;
}
