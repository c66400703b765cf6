/*
 * sched.c — schedules: random variables, the one path every primitive takes
 * (sched_apply), the public wrappers of tir.h, trace JSON and replay, and the
 * two lookups get_block and get_loops.
 *
 * A schedule owns its program.  Each applied instruction is appended to the
 * trace with its inputs, attributes, outputs and sampled decisions, so the
 * trace alone rebuilds the program: tir_sched_replay on a fresh schedule of
 * the same workload applies the same instructions through the same functions.
 * A trace's identity is the SHA-256 of its canonical text (tir_trace_hash),
 * and sched_replay_valid is replay plus validation, how the search and the
 * measurement both turn a trace into a candidate.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include <nettle/sha2.h>
#include "sched.h"

static const char *const prim_names[] = {
#define TIR_PRIM(id, name, file) #name,
#include "prims.def"
#undef TIR_PRIM
};

typedef int (*prim_fn)(tir_sched *, tir_inst *, tir_error *);
static const prim_fn prim_fns[] = {
#define TIR_PRIM(id, name, file) prim_##name,
#include "prims.def"
#undef TIR_PRIM
};

const char *prim_name(tir_prim k) { return prim_names[k]; }

int prim_parse(const char *name)
{
	for (int i = 0; i < PRIM_NKINDS; i++)
		if (!strcmp(prim_names[i], name))
			return i;
	return -1;
}

tir_sched *tir_sched_new(const tir_workload *w, uint64_t seed, tir_error *err)
{
	tir_program *p = tir_program_build(w, err);
	if (!p)
		return NULL;
	tir_sched *s = xcalloc(1, sizeof *s);
	s->p = p;
	s->w = w;
	s->rng = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
	if (!s->rng)
		s->rng = 1;
	return s;
}

void tir_sched_free(tir_sched *s)
{
	if (!s)
		return;
	tir_program_free(s->p);
	arena_free(&s->arena);
	free(s->rv);
	free(s->inst);
	free(s);
}

const tir_program *tir_sched_program(const tir_sched *s) { return s->p; }

uint64_t sched_rand(tir_sched *s)
{
	return tir_rand(&s->rng);
}

double sched_uniform(tir_sched *s)
{
	return tir_rand_unit(&s->rng);
}

int sched_new_rv(tir_sched *s, tir_rv_kind k)
{
	if (s->nrv == s->caprv) {
		s->caprv = s->caprv ? 2 * s->caprv : 64;
		s->rv = xrealloc(s->rv, sizeof(tir_rv) * (size_t)s->caprv);
	}
	memset(&s->rv[s->nrv], 0, sizeof(tir_rv));
	s->rv[s->nrv].kind = k;
	return s->nrv++;
}

static const char *const rv_kind_names[] = { "block", "loop", "integer" };

static int rv_check(tir_sched *s, tir_int x, tir_rv_kind k, tir_error *err)
{
	if (x.rv < 0)
		return tir_fail(err, "expected a %s, got the literal %lld",
				rv_kind_names[k], (long long)x.lit);
	if (x.rv >= s->nrv)
		return tir_fail(err, "no random variable %d", x.rv);
	if (s->rv[x.rv].kind != k)
		return tir_fail(err, "random variable %d is a %s, expected a %s",
				x.rv, rv_kind_names[s->rv[x.rv].kind], rv_kind_names[k]);
	return 0;
}

tir_block *sched_block(tir_sched *s, tir_int x, tir_error *err)
{
	if (rv_check(s, x, RV_BLOCK, err))
		return NULL;
	tir_block *b = s->rv[x.rv].block;
	if (!b->stmt) {
		tir_fail(err, "block \"%s\" no longer exists", b->name);
		return NULL;
	}
	return b;
}

tir_stmt *sched_loop(tir_sched *s, tir_int x, tir_error *err)
{
	if (rv_check(s, x, RV_LOOP, err))
		return NULL;
	tir_stmt *l = s->rv[x.rv].loop;
	if (l->dead) {
		tir_fail(err, "loop \"%s\" no longer exists (it was split, fused or removed)",
			 l->var->name);
		return NULL;
	}
	return l;
}

int sched_value(tir_sched *s, tir_int x, int64_t *v, tir_error *err)
{
	if (x.rv < 0) {
		*v = x.lit;
		return 0;
	}
	if (rv_check(s, x, RV_INT, err))
		return -1;
	*v = s->rv[x.rv].value;
	return 0;
}

int64_t tir_sched_int(const tir_sched *s, int rv)
{
	if (rv < 0 || rv >= s->nrv || s->rv[rv].kind != RV_INT)
		return 0;
	return s->rv[rv].value;
}

int sched_apply(tir_sched *s, tir_inst *in, tir_error *err)
{
	int nrv = s->nrv;
	in->nout = 0;
	tir_error e;
	if (prim_fns[in->op](s, in, &e)) {
		s->nrv = nrv;
		return tir_fail(err, "%s: %s", prim_names[in->op], e.msg);
	}
	if (s->ninst == s->capinst) {
		s->capinst = s->capinst ? 2 * s->capinst : 32;
		s->inst = xrealloc(s->inst, sizeof(tir_inst) * (size_t)s->capinst);
	}
	if (in->str)
		in->str = arena_strdup(&s->arena, in->str);
	s->inst[s->ninst++] = *in;
	return 0;
}

/* ---- rebinding after loop changes ------------------------------------------ */

static void env_add_loops(tir_env *e, const tir_stmt *s)
{
	if (s->kind == STMT_FOR)
		env_set(e, s->var, 0, s->extent - 1);
	for (int i = 0; i < s->nkids; i++)
		env_add_loops(e, s->kids[i]);
}

tir_stmt *sched_top_stmt(tir_stmt *s)
{
	while (s->parent && s->parent->parent)
		s = s->parent;
	return s;
}

tir_env sched_iter_env(const tir_program *p, const tir_block *b)
{
	tir_env e = env_new(p->nvars);
	for (int i = 0; i < b->niters; i++)
		env_set(&e, b->iters[i].var, 0, b->iters[i].extent - 1);
	return e;
}

tir_env sched_loop_env(const tir_program *p)
{
	tir_env e = env_new(p->nvars);
	env_add_loops(&e, p->root);
	return e;
}

struct rebind { tir_program *p; const tir_subst *sub; tir_env env; };

static void rebind_block(tir_block *b, void *ctx)
{
	struct rebind *r = ctx;
	tir_arena *a = &r->p->arena;
	for (int i = 0; i < b->niters; i++)
		b->iters[i].binding = expr_simplify(a, expr_subst(a, b->iters[i].binding, r->sub), &r->env);
	if (b->predicate) {
		b->predicate = expr_simplify(a, expr_subst(a, b->predicate, r->sub), &r->env);
		if (b->predicate->kind == E_INT && b->predicate->ival)
			b->predicate = NULL;
	}
}

void sched_rebind(tir_program *p, tir_stmt *root, const tir_subst *sub)
{
	struct rebind r = { p, sub, sched_loop_env(p) };
	stmt_visit_blocks(root, rebind_block, &r);
	env_free(&r.env);
}

/* ---- get_block, get_loops ---------------------------------------------------- */

int prim_get_block(tir_sched *s, tir_inst *in, tir_error *err)
{
	if (!in->str)
		return tir_fail(err, "no block name");
	tir_block *b = program_find_block(s->p, in->str);
	if (!b)
		return tir_fail(err, "no block named \"%s\"", in->str);
	int rv = sched_new_rv(s, RV_BLOCK);
	s->rv[rv].block = b;
	in->out[in->nout++] = rv;
	return 0;
}

int prim_get_loops(tir_sched *s, tir_inst *in, tir_error *err)
{
	if (in->nin != 1)
		return tir_fail(err, "takes one block");
	tir_block *b = sched_block(s, in->in[0], err);
	if (!b)
		return -1;
	tir_stmt *loops[TIR_MAX_IO];
	int n = stmt_loops(b->stmt, loops, TIR_MAX_IO);
	if (n > TIR_MAX_IO)
		return tir_fail(err, "block \"%s\" has %d loops, more than %d", b->name, n, TIR_MAX_IO);
	for (int i = 0; i < n; i++) {
		int rv = sched_new_rv(s, RV_LOOP);
		s->rv[rv].loop = loops[i];
		in->out[in->nout++] = rv;
	}
	return 0;
}

/* ---- the public wrappers -------------------------------------------------------- */

static tir_inst inst_of(tir_prim op)
{
	tir_inst in;
	memset(&in, 0, sizeof in);
	in.op = op;
	return in;
}

static int first_out(tir_sched *s, tir_inst *in, tir_error *err)
{
	if (sched_apply(s, in, err))
		return -1;
	return in->nout ? in->out[0] : 0;
}

int tir_get_block(tir_sched *s, const char *name, tir_error *err)
{
	tir_inst in = inst_of(PRIM_GET_BLOCK);
	in.str = name;
	return first_out(s, &in, err);
}

int tir_get_loops(tir_sched *s, int block, int *loops, int max, tir_error *err)
{
	tir_inst in = inst_of(PRIM_GET_LOOPS);
	in.in[in.nin++] = TIR_RV(block);
	if (sched_apply(s, &in, err))
		return -1;
	for (int i = 0; i < in.nout && i < max; i++)
		loops[i] = in.out[i];
	return in.nout;
}

int tir_split(tir_sched *s, int loop, int n, const tir_int *factors, int *out_loops,
	      tir_error *err)
{
	if (n < 1 || n >= TIR_MAX_IO)
		return tir_fail(err, "split: %d factors, expected 1 to %d", n, TIR_MAX_IO - 1);
	tir_inst in = inst_of(PRIM_SPLIT);
	in.in[in.nin++] = TIR_RV(loop);
	for (int i = 0; i < n; i++)
		in.in[in.nin++] = factors[i];
	if (sched_apply(s, &in, err))
		return -1;
	for (int i = 0; out_loops && i < in.nout; i++)
		out_loops[i] = in.out[i];
	return in.out[0];
}

static int loops_inst(tir_sched *s, tir_prim op, int n, const int *loops, tir_error *err)
{
	if (n < 1 || n > TIR_MAX_IO)
		return tir_fail(err, "%s: %d loops, expected 1 to %d", prim_names[op], n, TIR_MAX_IO);
	tir_inst in = inst_of(op);
	for (int i = 0; i < n; i++)
		in.in[in.nin++] = TIR_RV(loops[i]);
	return first_out(s, &in, err);
}

int tir_fuse(tir_sched *s, int n, const int *loops, tir_error *err)
{
	return loops_inst(s, PRIM_FUSE, n, loops, err);
}

int tir_reorder(tir_sched *s, int n, const int *loops, tir_error *err)
{
	return loops_inst(s, PRIM_REORDER, n, loops, err);
}

static int one_rv(tir_sched *s, tir_prim op, int rv, const char *str, tir_error *err)
{
	tir_inst in = inst_of(op);
	in.in[in.nin++] = TIR_RV(rv);
	in.str = str;
	return first_out(s, &in, err);
}

int tir_bind(tir_sched *s, int loop, const char *tag, tir_error *err)
{
	return one_rv(s, PRIM_BIND, loop, tag, err);
}

int tir_parallel(tir_sched *s, int loop, tir_error *err) { return one_rv(s, PRIM_PARALLEL, loop, NULL, err); }
int tir_vectorize(tir_sched *s, int loop, tir_error *err) { return one_rv(s, PRIM_VECTORIZE, loop, NULL, err); }
int tir_unroll(tir_sched *s, int loop, tir_error *err) { return one_rv(s, PRIM_UNROLL, loop, NULL, err); }
int tir_compute_inline(tir_sched *s, int block, tir_error *err) { return one_rv(s, PRIM_COMPUTE_INLINE, block, NULL, err); }
int tir_reverse_compute_inline(tir_sched *s, int block, tir_error *err) { return one_rv(s, PRIM_REVERSE_COMPUTE_INLINE, block, NULL, err); }

static int block_index_scope(tir_sched *s, tir_prim op, int block, int index,
			     const char *scope, tir_error *err)
{
	tir_inst in = inst_of(op);
	in.in[in.nin++] = TIR_RV(block);
	in.attr[in.nattr++] = index;
	in.str = scope;
	return first_out(s, &in, err);
}

int tir_cache_read(tir_sched *s, int block, int read_index, const char *scope, tir_error *err)
{
	return block_index_scope(s, PRIM_CACHE_READ, block, read_index, scope, err);
}

int tir_cache_read_all(tir_sched *s, int block, int read_index, const char *scope,
		       tir_error *err)
{
	tir_inst in = inst_of(PRIM_CACHE_READ);
	in.in[in.nin++] = TIR_RV(block);
	in.attr[0] = read_index;
	in.attr[1] = 1;
	in.nattr = 2;
	in.str = scope;
	return first_out(s, &in, err);
}

int tir_cache_write(tir_sched *s, int block, int write_index, const char *scope, tir_error *err)
{
	return block_index_scope(s, PRIM_CACHE_WRITE, block, write_index, scope, err);
}

static int block_loop(tir_sched *s, tir_prim op, int block, int loop, tir_error *err)
{
	tir_inst in = inst_of(op);
	in.in[in.nin++] = TIR_RV(block);
	in.in[in.nin++] = TIR_RV(loop);
	return first_out(s, &in, err);
}

int tir_compute_at(tir_sched *s, int block, int loop, tir_error *err) { return block_loop(s, PRIM_COMPUTE_AT, block, loop, err); }
int tir_reverse_compute_at(tir_sched *s, int block, int loop, tir_error *err) { return block_loop(s, PRIM_REVERSE_COMPUTE_AT, block, loop, err); }
int tir_decompose_reduction(tir_sched *s, int block, int loop, tir_error *err) { return block_loop(s, PRIM_DECOMPOSE_REDUCTION, block, loop, err); }

int tir_storage_align(tir_sched *s, int block, int buffer_index, int axis, int factor,
		      int offset, tir_error *err)
{
	tir_inst in = inst_of(PRIM_STORAGE_ALIGN);
	in.in[in.nin++] = TIR_RV(block);
	in.attr[0] = buffer_index;
	in.attr[1] = axis;
	in.attr[2] = factor;
	in.attr[3] = offset;
	in.nattr = 4;
	return first_out(s, &in, err);
}

int tir_annotate(tir_sched *s, int rv, const char *key, int64_t value, tir_error *err)
{
	tir_inst in = inst_of(PRIM_ANNOTATE);
	in.in[in.nin++] = TIR_RV(rv);
	in.str = key;
	in.attr[in.nattr++] = value;
	return first_out(s, &in, err);
}

int tir_tensorize(tir_sched *s, int loop, const char *intrin, tir_error *err)
{
	tir_inst in = inst_of(PRIM_TENSORIZE);
	in.in[in.nin++] = TIR_RV(loop);
	in.str = intrin;
	return first_out(s, &in, err);
}

int tir_transform_block_layout(tir_sched *s, int block, const char *groups, tir_error *err)
{
	return one_rv(s, PRIM_TRANSFORM_BLOCK_LAYOUT, block, groups, err);
}

int tir_reindex(tir_sched *s, int block, int is_write, int index, const char *dims,
		tir_error *err)
{
	tir_inst in = inst_of(PRIM_REINDEX);
	in.in[in.nin++] = TIR_RV(block);
	in.attr[0] = is_write ? 1 : 0;
	in.attr[1] = index;
	in.nattr = 2;
	in.str = dims;
	return first_out(s, &in, err);
}

int tir_transform_layout(tir_sched *s, int block, int read_index, const char *map,
			 tir_error *err)
{
	tir_inst in = inst_of(PRIM_TRANSFORM_LAYOUT);
	in.in[in.nin++] = TIR_RV(block);
	in.attr[in.nattr++] = read_index;
	in.str = map;
	return first_out(s, &in, err);
}

int tir_pad_einsum(tir_sched *s, int block, int n, const tir_int *factors, tir_error *err)
{
	if (n < 1 || n >= TIR_MAX_IO)
		return tir_fail(err, "pad_einsum: %d factors, expected 1 to %d", n, TIR_MAX_IO - 1);
	tir_inst in = inst_of(PRIM_PAD_EINSUM);
	in.in[in.nin++] = TIR_RV(block);
	for (int i = 0; i < n; i++)
		in.in[in.nin++] = factors[i];
	return first_out(s, &in, err);
}

int tir_rfactor(tir_sched *s, int block, int iterator, tir_int factor, tir_error *err)
{
	tir_inst in = inst_of(PRIM_RFACTOR);
	in.in[in.nin++] = TIR_RV(block);
	in.in[in.nin++] = factor;
	in.attr[0] = iterator;
	in.nattr = 1;
	return first_out(s, &in, err);
}

int tir_rfactor_interleaved(tir_sched *s, int block, int iterator, tir_int factor,
			    tir_error *err)
{
	tir_inst in = inst_of(PRIM_RFACTOR);
	in.in[in.nin++] = TIR_RV(block);
	in.in[in.nin++] = factor;
	in.attr[0] = iterator;
	in.attr[1] = 1;
	in.nattr = 2;
	return first_out(s, &in, err);
}

int tir_set_scope(tir_sched *s, int block, int write_index, const char *scope, tir_error *err)
{
	return block_index_scope(s, PRIM_SET_SCOPE, block, write_index, scope, err);
}

int tir_annotate_rv(tir_sched *s, int rv, const char *key, int value_rv, tir_error *err)
{
	tir_inst in = inst_of(PRIM_ANNOTATE);
	in.in[in.nin++] = TIR_RV(rv);
	in.in[in.nin++] = TIR_RV(value_rv);
	in.str = key;
	return first_out(s, &in, err);
}

int tir_sample_perfect_tile(tir_sched *s, int loop, int n, int max_innermost, int *out_ints,
			    tir_error *err)
{
	tir_inst in = inst_of(PRIM_SAMPLE_PERFECT_TILE);
	in.in[in.nin++] = TIR_RV(loop);
	in.attr[0] = n;
	in.attr[1] = max_innermost;
	in.nattr = 2;
	if (sched_apply(s, &in, err))
		return -1;
	for (int i = 0; out_ints && i < in.nout; i++)
		out_ints[i] = in.out[i];
	return in.out[0];
}

int tir_sample_categorical(tir_sched *s, int n, const int64_t *candidates, const double *probs,
			   tir_error *err)
{
	if (n < 1 || n > TIR_MAX_IO)
		return tir_fail(err, "sample_categorical: %d candidates, expected 1 to %d", n, TIR_MAX_IO);
	tir_inst in = inst_of(PRIM_SAMPLE_CATEGORICAL);
	for (int i = 0; i < n; i++) {
		in.in[in.nin++] = TIR_LIT(candidates[i]);
		in.fattr[in.nfattr++] = probs ? probs[i] : 1.0 / n;
	}
	return first_out(s, &in, err);
}

/* ---- trace JSON -------------------------------------------------------------------- */

static void rv_name(const tir_sched *s, int rv, char *out, size_t n)
{
	static const char pre[] = { 'b', 'l', 'v' };
	snprintf(out, n, "%c%d", pre[s->rv[rv].kind], rv);
}

char *tir_sched_trace(const tir_sched *s)
{
	cJSON *root = cJSON_CreateObject();
	cJSON *insts = cJSON_AddArrayToObject(root, "insts");
	char name[32];
	for (int i = 0; i < s->ninst; i++) {
		const tir_inst *in = &s->inst[i];
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "op", prim_names[in->op]);
		if (in->nin) {
			cJSON *a = cJSON_AddArrayToObject(o, "in");
			for (int j = 0; j < in->nin; j++) {
				if (in->in[j].rv >= 0) {
					rv_name(s, in->in[j].rv, name, sizeof name);
					cJSON_AddItemToArray(a, cJSON_CreateString(name));
				} else if (in->op == PRIM_SPLIT && in->in[j].lit == 0) {
					cJSON_AddItemToArray(a, cJSON_CreateNull());
				} else {
					cJSON_AddItemToArray(a, cJSON_CreateNumber((double)in->in[j].lit));
				}
			}
		}
		if (in->str)
			cJSON_AddStringToObject(o, "str", in->str);
		if (in->nattr) {
			cJSON *a = cJSON_AddArrayToObject(o, "attrs");
			for (int j = 0; j < in->nattr; j++)
				cJSON_AddItemToArray(a, cJSON_CreateNumber((double)in->attr[j]));
		}
		if (in->nfattr) {
			cJSON *a = cJSON_AddArrayToObject(o, "fattrs");
			for (int j = 0; j < in->nfattr; j++)
				cJSON_AddItemToArray(a, cJSON_CreateNumber(in->fattr[j]));
		}
		if (in->nout) {
			cJSON *a = cJSON_AddArrayToObject(o, "out");
			for (int j = 0; j < in->nout; j++) {
				rv_name(s, in->out[j], name, sizeof name);
				cJSON_AddItemToArray(a, cJSON_CreateString(name));
			}
		}
		if (in->ndecision) {
			cJSON *a = cJSON_AddArrayToObject(o, "decision");
			for (int j = 0; j < in->ndecision; j++)
				cJSON_AddItemToArray(a, cJSON_CreateNumber((double)in->decision[j]));
		}
		cJSON_AddItemToArray(insts, o);
	}
	char *txt = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	char *r = xstrdup(txt);
	cJSON_free(txt);
	return r;
}

/* Names used by the trace being replayed, mapped to this schedule's RVs. */
typedef struct rvmap {
	int n, cap;
	char **names;
	int *rv;
} rvmap;

static int rvmap_find(const rvmap *m, const char *name)
{
	for (int i = 0; i < m->n; i++)
		if (!strcmp(m->names[i], name))
			return m->rv[i];
	return -1;
}

static void rvmap_add(rvmap *m, const char *name, int rv)
{
	if (m->n == m->cap) {
		m->cap = m->cap ? 2 * m->cap : 64;
		m->names = xrealloc(m->names, sizeof(char *) * (size_t)m->cap);
		m->rv = xrealloc(m->rv, sizeof(int) * (size_t)m->cap);
	}
	m->names[m->n] = xstrdup(name);
	m->rv[m->n++] = rv;
}

static void rvmap_free(rvmap *m)
{
	for (int i = 0; i < m->n; i++)
		free(m->names[i]);
	free(m->names);
	free(m->rv);
}

static bool is_int_number(const cJSON *x, int64_t *v)
{
	if (!cJSON_IsNumber(x))
		return false;
	double d = x->valuedouble;
	/* the range first: converting a double out of int64_t's range is undefined */
	if (!(d <= 9.0e15 && d >= -9.0e15) || d != (double)(int64_t)d)
		return false;
	*v = (int64_t)d;
	return true;
}

/* Reads an integer list field of an instruction. */
static int int_list(const cJSON *o, const char *key, int64_t *out, int *n, int max,
		    tir_error *err)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
	*n = 0;
	if (!a)
		return 0;
	if (!cJSON_IsArray(a))
		return tir_fail(err, "\"%s\" is not a list", key);
	const cJSON *x;
	cJSON_ArrayForEach(x, a) {
		if (*n == max)
			return tir_fail(err, "\"%s\" has more than %d values", key, max);
		if (!is_int_number(x, &out[*n]))
			return tir_fail(err, "\"%s\" holds a value that is not an integer", key);
		(*n)++;
	}
	return 0;
}

static int parse_inst(tir_sched *s, const cJSON *o, rvmap *m, tir_inst *in, tir_error *err)
{
	memset(in, 0, sizeof *in);
	if (!cJSON_IsObject(o))
		return tir_fail(err, "not an object");
	static const char *const known[] = { "op", "in", "str", "attrs", "fattrs", "out", "decision" };
	const cJSON *f;
	cJSON_ArrayForEach(f, o) {
		bool ok = false;
		for (size_t k = 0; k < sizeof known / sizeof *known; k++)
			ok = ok || !strcmp(f->string, known[k]);
		if (!ok)
			return tir_fail(err, "unknown key \"%s\"", f->string);
	}
	const cJSON *op = cJSON_GetObjectItemCaseSensitive(o, "op");
	if (!cJSON_IsString(op))
		return tir_fail(err, "\"op\" is missing or not a string");
	int k = prim_parse(op->valuestring);
	if (k < 0)
		return tir_fail(err, "unknown instruction \"%s\"", op->valuestring);
	in->op = (tir_prim)k;
	const cJSON *ins = cJSON_GetObjectItemCaseSensitive(o, "in");
	if (ins) {
		if (!cJSON_IsArray(ins))
			return tir_fail(err, "\"in\" is not a list");
		const cJSON *x;
		cJSON_ArrayForEach(x, ins) {
			if (in->nin == TIR_MAX_IO)
				return tir_fail(err, "more than %d inputs", TIR_MAX_IO);
			tir_int *t = &in->in[in->nin++];
			if (cJSON_IsString(x)) {
				int rv = rvmap_find(m, x->valuestring);
				if (rv < 0)
					return tir_fail(err, "input \"%s\" is not the output of an earlier instruction",
							x->valuestring);
				*t = TIR_RV(rv);
			} else if (cJSON_IsNull(x)) {
				*t = TIR_LIT(0);
			} else if (is_int_number(x, &t->lit)) {
				t->rv = -1;
			} else {
				return tir_fail(err, "input %d is neither a variable name nor an integer", in->nin - 1);
			}
		}
	}
	const cJSON *str = cJSON_GetObjectItemCaseSensitive(o, "str");
	if (str) {
		if (!cJSON_IsString(str))
			return tir_fail(err, "\"str\" is not a string");
		in->str = arena_strdup(&s->arena, str->valuestring);
	}
	if (int_list(o, "attrs", in->attr, &in->nattr, 4, err) ||
	    int_list(o, "decision", in->decision, &in->ndecision, TIR_MAX_IO, err))
		return -1;
	const cJSON *fa = cJSON_GetObjectItemCaseSensitive(o, "fattrs");
	if (fa) {
		if (!cJSON_IsArray(fa))
			return tir_fail(err, "\"fattrs\" is not a list");
		const cJSON *x;
		cJSON_ArrayForEach(x, fa) {
			if (in->nfattr == TIR_MAX_IO)
				return tir_fail(err, "\"fattrs\" has more than %d values", TIR_MAX_IO);
			/* finite: JSON has no infinity, so one (1e999) would print as
			 * null and the canonical trace would not replay */
			if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble))
				return tir_fail(err, "\"fattrs\" holds a value that is not a finite number");
			in->fattr[in->nfattr++] = x->valuedouble;
		}
	}
	return 0;
}

int tir_sched_replay(tir_sched *s, const char *trace_json, tir_error *err)
{
	cJSON *root = cJSON_Parse(trace_json);
	if (!root)
		return tir_fail(err, "trace: malformed JSON near \"%.20s\"",
				cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() : "");
	const cJSON *insts = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "insts") : NULL;
	if (!cJSON_IsArray(insts)) {
		cJSON_Delete(root);
		return tir_fail(err, "trace: expected an object with an \"insts\" list");
	}
	rvmap m = { 0 };
	int i = 0, rc = 0;
	const cJSON *o;
	cJSON_ArrayForEach(o, insts) {
		tir_inst in;
		tir_error e;
		if (parse_inst(s, o, &m, &in, &e) || sched_apply(s, &in, &e)) {
			const cJSON *op = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, "op") : NULL;
			rc = tir_fail(err, "trace: instruction %d (%s): %s", i,
				      cJSON_IsString(op) ? op->valuestring : "?", e.msg);
			break;
		}
		const cJSON *outs = cJSON_GetObjectItemCaseSensitive(o, "out");
		int j = 0;
		const cJSON *x;
		if (outs && cJSON_IsArray(outs)) {
			if (cJSON_GetArraySize(outs) != in.nout) {
				rc = tir_fail(err, "trace: instruction %d (%s) gives %d outputs, the trace names %d",
					      i, prim_names[in.op], in.nout, cJSON_GetArraySize(outs));
				break;
			}
			cJSON_ArrayForEach(x, outs) {
				if (!cJSON_IsString(x)) {
					rc = tir_fail(err, "trace: instruction %d: an output name is not a string", i);
					break;
				}
				rvmap_add(&m, x->valuestring, in.out[j++]);
			}
			if (rc)
				break;
		}
		i++;
	}
	rvmap_free(&m);
	cJSON_Delete(root);
	return rc;
}

tir_sched *sched_replay_valid(const tir_workload *w, const tir_target *t, const char *trace,
			      tir_error *err)
{
	tir_sched *s = tir_sched_new(w, 0, err);
	if (!s)
		return NULL;
	if (tir_sched_replay(s, trace, err) || tir_verify(tir_sched_program(s), t, err)) {
		tir_sched_free(s);
		return NULL;
	}
	return s;
}

void tir_trace_hash(const char *trace, unsigned char out[32])
{
	struct sha256_ctx ctx;
	sha256_init(&ctx);
	sha256_update(&ctx, strlen(trace), (const uint8_t *)trace);
	sha256_digest(&ctx, 32, out);
}
