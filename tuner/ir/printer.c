/*
 * printer.c — TVMScript-like text of a program, for people and for golden
 * tests.  The text is deterministic: the same program prints the same bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ir.h"

static int prec(const tir_expr *e)
{
	switch (e->kind) {
	case E_OR: return 1;
	case E_AND: return 2;
	case E_NOT: return 3;
	case E_LT: case E_LE: case E_EQ: case E_NE: return 4;
	case E_ADD: case E_SUB: return 5;
	case E_MUL: case E_DIV: case E_FLOORDIV: case E_FLOORMOD: return 6;
	case E_INT: return e->ival < 0 ? 7 : 9;
	default: return 9;
	}
}

static void print_expr(tir_buf *b, const tir_expr *e);

static void operand(tir_buf *b, const tir_expr *e, int parent, bool right)
{
	int p = prec(e);
	bool paren = p < parent || (right && p == parent);
	if (paren)
		buf_puts(b, "(");
	print_expr(b, e);
	if (paren)
		buf_puts(b, ")");
}

static void print_float(tir_buf *b, double v)
{
	char tmp[64];
	snprintf(tmp, sizeof tmp, "%.17g", v);
	if (!strpbrk(tmp, ".eEn"))
		strcat(tmp, ".0");
	buf_puts(b, tmp);
}

static void print_expr(tir_buf *b, const tir_expr *e)
{
	switch (e->kind) {
	case E_INT:
		if (e->dtype == TIR_BOOL)
			buf_puts(b, e->ival ? "True" : "False");
		else if (e->dtype != TIR_I64)
			buf_printf(b, "T.%s(%lld)", dtype_name(e->dtype), (long long)e->ival);
		else
			buf_printf(b, "%lld", (long long)e->ival);
		return;
	case E_FLOAT:
		buf_printf(b, "T.%s(", dtype_name(e->dtype));
		print_float(b, e->fval);
		buf_puts(b, ")");
		return;
	case E_VAR:
		buf_puts(b, e->var->name);
		return;
	case E_MIN: case E_MAX:
		buf_printf(b, "T.%s(", e->kind == E_MIN ? "min" : "max");
		print_expr(b, e->a);
		buf_puts(b, ", ");
		print_expr(b, e->b);
		buf_puts(b, ")");
		return;
	case E_NOT:
		buf_puts(b, "not ");
		operand(b, e->a, 3, false);
		return;
	case E_SELECT:
		buf_puts(b, "T.if_then_else(");
		print_expr(b, e->c);
		buf_puts(b, ", ");
		print_expr(b, e->a);
		buf_puts(b, ", ");
		print_expr(b, e->b);
		buf_puts(b, ")");
		return;
	case E_CAST:
		buf_printf(b, "T.Cast(\"%s\", ", dtype_name(e->dtype));
		print_expr(b, e->a);
		buf_puts(b, ")");
		return;
	case E_CALL:
		buf_printf(b, "T.%s(", mathfn_name(e->fn));
		print_expr(b, e->a);
		buf_puts(b, ")");
		return;
	case E_LOAD:
		buf_printf(b, "%s[", e->buf->name);
		for (int i = 0; i < e->nidx; i++) {
			if (i)
				buf_puts(b, ", ");
			print_expr(b, e->idx[i]);
		}
		buf_puts(b, "]");
		return;
	default: {
		int p = prec(e);
		if (e->kind == E_ADD && e->b->kind == E_INT && e->b->ival < 0 &&
		    e->b->dtype == TIR_I64) {
			operand(b, e->a, p, false);
			buf_printf(b, " - %lld", -(long long)e->b->ival);
			return;
		}
		operand(b, e->a, p, false);
		buf_printf(b, " %s ", expr_kind_name(e->kind));
		operand(b, e->b, p, true);
		return;
	}
	}
}

char *tir_expr_print(const tir_expr *e)
{
	tir_buf b = { 0 };
	print_expr(&b, e);
	return buf_take(&b);
}

static void print_shape(tir_buf *b, const tir_buffer *buf)
{
	buf_puts(b, "(");
	for (int i = 0; i < buf->ndim; i++)
		buf_printf(b, "%s%lld", i ? ", " : "", (long long)buf->shape[i]);
	buf_puts(b, buf->ndim == 1 ? ",)" : ")");
}

static void print_region(tir_buf *b, tir_arena *a, const tir_region *r)
{
	buf_printf(b, "%s[", r->buf->name);
	for (int d = 0; d < r->buf->ndim; d++) {
		if (d)
			buf_puts(b, ", ");
		print_expr(b, r->min[d]);
		if (r->extent[d] != 1) {
			buf_puts(b, ":");
			print_expr(b, mk_add(a, r->min[d], mk_int(a, r->extent[d])));
		}
	}
	buf_puts(b, "]");
}

static void print_store(tir_buf *b, const tir_block *blk)
{
	buf_printf(b, "%s[", blk->store->name);
	for (int d = 0; d < blk->store->ndim; d++) {
		if (d)
			buf_puts(b, ", ");
		print_expr(b, blk->store_idx[d]);
	}
	buf_puts(b, "]");
}

static void print_anns(tir_buf *b, const tir_ann *ann, int n)
{
	buf_puts(b, "{");
	for (int i = 0; i < n; i++)
		buf_printf(b, "%s\"%s\": %lld", i ? ", " : "", ann[i].key, (long long)ann[i].value);
	buf_puts(b, "}");
}

static void print_block(tir_buf *b, tir_arena *a, const tir_block *blk, int depth)
{
	buf_indent(b, depth);
	buf_printf(b, "with T.block(\"%s\"):\n", blk->name);
	depth++;
	for (int i = 0; i < blk->niters; i++) {
		const tir_iter *it = &blk->iters[i];
		buf_indent(b, depth);
		buf_printf(b, "%s = T.axis.%s(%lld, ", it->var->name,
			   it->kind == ITER_SPATIAL ? "spatial" : "reduce", (long long)it->extent);
		if (it->binding)
			print_expr(b, it->binding);
		buf_puts(b, ")\n");
	}
	if (blk->predicate) {
		buf_indent(b, depth);
		buf_puts(b, "T.where(");
		print_expr(b, blk->predicate);
		buf_puts(b, ")\n");
	}
	buf_indent(b, depth);
	buf_puts(b, "T.reads(");
	for (int i = 0; i < blk->nreads; i++) {
		if (i)
			buf_puts(b, ", ");
		print_region(b, a, &blk->reads[i]);
	}
	buf_puts(b, ")\n");
	buf_indent(b, depth);
	buf_puts(b, "T.writes(");
	print_region(b, a, &blk->write);
	buf_puts(b, ")\n");
	if (blk->nann) {
		buf_indent(b, depth);
		buf_puts(b, "T.block_attr(");
		print_anns(b, blk->ann, blk->nann);
		buf_puts(b, ")\n");
	}
	if (blk->reduce != REDUCE_NONE && blk->init) {
		buf_indent(b, depth);
		buf_puts(b, "with T.init():\n");
		buf_indent(b, depth + 1);
		print_store(b, blk);
		buf_puts(b, " = ");
		print_expr(b, blk->init);
		buf_puts(b, "\n");
	}
	buf_indent(b, depth);
	print_store(b, blk);
	buf_puts(b, " = ");
	if (blk->reduce == REDUCE_SUM) {
		print_store(b, blk);
		buf_puts(b, " + ");
		operand(b, blk->value, 5, true);
	} else if (blk->reduce != REDUCE_NONE) {
		/* C[i] = T.max(C[i], value), as TVMScript writes a max reduction */
		buf_printf(b, "T.%s(", reduce_name(blk->reduce));
		print_store(b, blk);
		buf_puts(b, ", ");
		print_expr(b, blk->value);
		buf_puts(b, ")");
	} else {
		print_expr(b, blk->value);
	}
	buf_puts(b, "\n");
}

static void print_stmt(tir_buf *b, tir_arena *a, const tir_stmt *s, int depth)
{
	if (s->kind == STMT_BLOCK) {
		print_block(b, a, s->block, depth);
		return;
	}
	if (s->kind == STMT_FOR) {
		buf_indent(b, depth);
		buf_printf(b, "for %s in ", s->var->name);
		if (s->loop_kind == LOOP_SERIAL && !s->nann)
			buf_printf(b, "range(%lld)", (long long)s->extent);
		else if (s->loop_kind == LOOP_THREAD)
			buf_printf(b, "T.thread_binding(%lld, thread=\"%s\"", (long long)s->extent,
				   thread_tag_name(s->tag));
		else
			buf_printf(b, "T.%s(%lld", loop_kind_name(s->loop_kind), (long long)s->extent);
		if (s->loop_kind != LOOP_SERIAL || s->nann) {
			if (s->nann) {
				buf_puts(b, ", annotations=");
				print_anns(b, s->ann, s->nann);
			}
			buf_puts(b, ")");
		}
		buf_puts(b, ":\n");
		depth++;
		if (!s->nkids) {
			buf_indent(b, depth);
			buf_puts(b, "T.evaluate(0)\n");
		}
	}
	for (int i = 0; i < s->nkids; i++)
		print_stmt(b, a, s->kids[i], depth);
}

char *tir_program_print(const tir_program *p)
{
	tir_buf b = { 0 };
	tir_arena scratch = { 0 };
	buf_puts(&b, "@T.prim_func\ndef main(");
	int n = 0;
	for (int i = 0; i < p->nbufs; i++) {
		const tir_buffer *buf = p->bufs[i];
		if (buf->role == BUF_TEMP)
			continue;
		buf_printf(&b, "%s%s: T.Buffer(", n++ ? ", " : "", buf->name);
		print_shape(&b, buf);
		buf_printf(&b, ", \"%s\")", dtype_name(buf->dtype));
	}
	buf_puts(&b, "):\n");
	for (int i = 0; i < p->nbufs; i++) {
		const tir_buffer *buf = p->bufs[i];
		if (buf->role != BUF_TEMP || buf->dead)
			continue;
		buf_printf(&b, "    %s = T.alloc_buffer(", buf->name);
		print_shape(&b, buf);
		buf_printf(&b, ", \"%s\"", dtype_name(buf->dtype));
		if (buf->scope != TIR_SCOPE_GLOBAL)
			buf_printf(&b, ", scope=\"%s\"", scope_name(buf->scope));
		for (int d = 0; d < buf->ndim; d++)
			if (buf->align_factor[d])
				buf_printf(&b, ", align_%d=(%d, %d)", d, buf->align_factor[d], buf->align_offset[d]);
		buf_puts(&b, ")\n");
	}
	print_stmt(&b, &scratch, p->root, 1);
	arena_free(&scratch);
	return buf_take(&b);
}
