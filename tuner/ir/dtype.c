/*
 * dtype.c — the element types of dtypes.def, and the vocabularies of the other
 * .def tables (scopes, expression kinds, math functions) by name.
 */
#include <string.h>
#include "ir.h"

static const struct {
	const char *name;
	int bytes;
	bool isfloat;
} dtypes[] = {
#define TIR_DTYPE(id, name, bytes, ctype, cudatype, isfloat) { name, bytes, isfloat },
#include "dtypes.def"
#undef TIR_DTYPE
};

const char *dtype_name(tir_dtype t) { return dtypes[t].name; }
const char *tir_dtype_name(int t) { return t >= 0 && t < TIR_NDTYPES ? dtypes[t].name : "?"; }
int dtype_bytes(tir_dtype t) { return dtypes[t].bytes; }
bool dtype_is_float(tir_dtype t) { return dtypes[t].isfloat; }

int dtype_parse(const char *name)
{
	for (int i = 0; i < TIR_NDTYPES; i++)
		if (!strcmp(dtypes[i].name, name))
			return i;
	return -1;
}

static const char *const scope_names[] = {
#define TIR_SCOPE(id, name) name,
#include "scopes.def"
#undef TIR_SCOPE
};

const char *scope_name(tir_scope s) { return scope_names[s]; }

int scope_parse(const char *name)
{
	for (int i = 0; i < TIR_NSCOPES; i++)
		if (!strcmp(scope_names[i], name))
			return i;
	return -1;
}

static const char *const expr_names[] = {
#define TIR_EXPR(id, name, arity) name,
#include "exprs.def"
#undef TIR_EXPR
};

const char *expr_kind_name(tir_expr_kind k) { return expr_names[k]; }

static const char *const fn_names[] = {
#define TIR_MATHFN(id, name) name,
#include "mathfns.def"
#undef TIR_MATHFN
};

const char *mathfn_name(tir_mathfn f) { return fn_names[f]; }

static const char *const tag_names[] = {
#define TIR_THREAD_TAG(id, name) name,
#include "../thread_tags.def"
#undef TIR_THREAD_TAG
};

const char *thread_tag_name(tir_thread_tag t) { return tag_names[t]; }

int thread_tag_parse(const char *name)
{
	for (int i = 0; i < TIR_NTHREAD_TAGS; i++)
		if (!strcmp(tag_names[i], name))
			return i;
	return -1;
}

static const char *const kind_names[] = {
#define TIR_LOOP_KIND(id, name) name,
#include "loop_kinds.def"
#undef TIR_LOOP_KIND
};

const char *loop_kind_name(tir_loop_kind k) { return kind_names[k]; }

