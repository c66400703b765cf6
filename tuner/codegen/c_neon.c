/*
 * c_neon.c — AArch64 code of the C backend (c.c): the CPU tensor
 * intrinsics of ir/intrins.def, with <arm_neon.h>.
 *
 * Design.  A loop tensorized with a CPU intrinsic (sdot_4x4x4_i8_i32,
 * smmla_2x2x8_i8_i32) is printed as one call of a static inline function of
 * the prelude, which c_neon_prelude emits only for the intrinsics the
 * program uses — a program without them (every x86 one) is printed as
 * before, byte for byte.  The call passes the address of each access's
 * tile origin (the tile's loops at 0) and its constant strides along the
 * tile's loops, from lower_offset: the intrinsic's operands may be in any
 * layout and scope (ir/intrin.c, match_cpu_mma), so the function packs them
 * into the registers the instruction wants — for sdot, a's 4 x 4 tile row by
 * row into 16 bytes and b transposed (its columns) into 16 more, for smmla
 * a's 2 x 8 rows and b's 2 columns of 8 — and with the strides constant
 * after inlining, gcc turns the packing of a contiguous row into one load.
 * The accumulator tile is read, updated by the instruction and written back
 * per call:
 *
 *   sdot   acc_i = vdotq_laneq_s32(acc_i, bT, a, i), i = 0..3: lane j of
 *          row i gains the dot of b's column j with a's row i
 *   smmla  acc = vmmlaq_s32(acc, a, bT): the 2 x 2 tile (row-major) gains
 *          a (2 x 8) x b (8 x 2)
 *
 * Each function is guarded by the ACLE macro of its extension
 * (__ARM_FEATURE_DOTPROD, __ARM_FEATURE_MATMUL_INT8) with an #error naming
 * the missing one otherwise: the C compiler's flags for the target key
 * (measure/cpu.c: -march=armv8.2-a+dotprod+i8mm) define them, and a source
 * built without them fails to compile instead of running something else.
 */
#include <string.h>
#include "codegen.h"

/* ---- the prelude ----------------------------------------------------------------- */

static const char neon_sdot[] =
"#if defined(__ARM_FEATURE_DOTPROD)\n"
"#include <arm_neon.h>\n"
"/* sdot_4x4x4_i8_i32: c[i, j] += sum over k of a[i, k] * b[k, j], a 4 x 4 x 4\n"
" * tile; element (i, j) of c at c[i * ci + j * cj], and so on */\n"
"static inline void tir_sdot_4x4x4_i8_i32(int32_t *c, int64_t ci, int64_t cj,\n"
"    const int8_t *a, int64_t ai, int64_t ak, const int8_t *b, int64_t bk, int64_t bj)\n"
"{\n"
"    int8_t pa[16], pb[16];\n"
"    int32_t t[16];\n"
"    for (int r = 0; r < 4; r++)\n"
"        for (int q = 0; q < 4; q++) {\n"
"            pa[4 * r + q] = a[r * ai + q * ak];     /* a's row r */\n"
"            pb[4 * r + q] = b[q * bk + r * bj];     /* b's column r */\n"
"            t[4 * r + q] = c[r * ci + q * cj];\n"
"        }\n"
"    const int8x16_t va = vld1q_s8(pa), vb = vld1q_s8(pb);\n"
"    vst1q_s32(t, vdotq_laneq_s32(vld1q_s32(t), vb, va, 0));\n"
"    vst1q_s32(t + 4, vdotq_laneq_s32(vld1q_s32(t + 4), vb, va, 1));\n"
"    vst1q_s32(t + 8, vdotq_laneq_s32(vld1q_s32(t + 8), vb, va, 2));\n"
"    vst1q_s32(t + 12, vdotq_laneq_s32(vld1q_s32(t + 12), vb, va, 3));\n"
"    for (int r = 0; r < 4; r++)\n"
"        for (int q = 0; q < 4; q++)\n"
"            c[r * ci + q * cj] = t[4 * r + q];\n"
"}\n"
"#else\n"
"#error \"sdot_4x4x4_i8_i32 needs the AArch64 dot-product extension "
"(__ARM_FEATURE_DOTPROD: -march=armv8.2-a+dotprod)\"\n"
"#endif\n"
"\n";

static const char neon_smmla[] =
"#if defined(__ARM_FEATURE_MATMUL_INT8)\n"
"#include <arm_neon.h>\n"
"/* smmla_2x2x8_i8_i32: c[i, j] += sum over k of a[i, k] * b[k, j], a 2 x 2 x 8\n"
" * tile; element (i, j) of c at c[i * ci + j * cj], and so on */\n"
"static inline void tir_smmla_2x2x8_i8_i32(int32_t *c, int64_t ci, int64_t cj,\n"
"    const int8_t *a, int64_t ai, int64_t ak, const int8_t *b, int64_t bk, int64_t bj)\n"
"{\n"
"    int8_t pa[16], pb[16];\n"
"    int32_t t[4];\n"
"    for (int r = 0; r < 2; r++) {\n"
"        for (int q = 0; q < 8; q++) {\n"
"            pa[8 * r + q] = a[r * ai + q * ak];     /* a's row r */\n"
"            pb[8 * r + q] = b[q * bk + r * bj];     /* b's column r */\n"
"        }\n"
"        t[2 * r] = c[r * ci];\n"
"        t[2 * r + 1] = c[r * ci + cj];\n"
"    }\n"
"    vst1q_s32(t, vmmlaq_s32(vld1q_s32(t), vld1q_s8(pa), vld1q_s8(pb)));\n"
"    for (int r = 0; r < 2; r++) {\n"
"        c[r * ci] = t[2 * r];\n"
"        c[r * ci + cj] = t[2 * r + 1];\n"
"    }\n"
"}\n"
"#else\n"
"#error \"smmla_2x2x8_i8_i32 needs the AArch64 int8 matrix multiply extension "
"(__ARM_FEATURE_MATMUL_INT8: -march=armv8.2-a+i8mm)\"\n"
"#endif\n"
"\n";

/* The implementation of CPU intrinsic `in`: its prelude text and the
 * function the call names (its intrins.def name, prefixed "tir_"). */
static const char *implementation(const tir_intrin *in)
{
	if (!strcmp(in->name, "sdot_4x4x4_i8_i32"))
		return neon_sdot;
	if (!strcmp(in->name, "smmla_2x2x8_i8_i32"))
		return neon_smmla;
	return NULL;
}

static void mark_used(const tir_stmt *s, bool *used)
{
	const tir_intrin *in = s->kind == STMT_FOR ? intrin_of_loop(s) : NULL;
	if (in && in->unit == INTRIN_CPU)
		used[in - tir_intrins] = true;
	for (int i = 0; i < s->nkids; i++)
		mark_used(s->kids[i], used);
}

void c_neon_prelude(tir_buf *o, const tir_stmt *root)
{
	bool used[64] = { false };
	if (tir_nintrins > 64)
		return;
	mark_used(root, used);
	for (int i = 0; i < tir_nintrins; i++) {
		const char *text = used[i] ? implementation(&tir_intrins[i]) : NULL;
		if (text)
			buf_puts(o, text);
	}
}

/* ---- the call ------------------------------------------------------------------- */

/* x's offset with the tile's loops at 0 (*origin) and its strides along
 * the loops (the change of the offset from one to the next, constant: the
 * allocation's strides are). */
static int tile_offsets(cg_ctx *c, const tir_intrin_match *m, const tir_intrin_access *x,
			tir_expr **origin, int64_t stride[3], tir_error *err)
{
	tir_lowered *L = c->L;
	const tir_program *p = L->p;
	tir_expr *at[3][TIR_MAX_DIMS], *zero[TIR_MAX_DIMS];
	for (int v = -1; v < m->nloops; v++) {
		tir_subst sub = { p->nvars, arena_alloc(&L->arena, sizeof(tir_expr *) *
							(size_t)(p->nvars + 1)) };
		for (int i = 0; i < m->nloops; i++)
			sub.map[m->loops[i]->var->id] = mk_int(&L->arena, i == v);
		for (int d = 0; d < x->buf->ndim; d++) {
			tir_expr *e = expr_subst(&L->arena, x->idx[d], &sub);
			if (v < 0)
				zero[d] = e;
			else
				at[v][d] = e;
		}
	}
	*origin = lower_simplify(L, lower_offset(L, x->buf, x->buf->ndim, zero));
	for (int v = 0; v < m->nloops; v++) {
		tir_expr *off = lower_offset(L, x->buf, x->buf->ndim, at[v]);
		tir_expr *d = lower_simplify(L, mk_sub(&L->arena, off, *origin));
		if (d->kind != E_INT)
			return tir_fail(err, "codegen: %s of loop %s: the stride of \"%s\" along loop "
					"%s is not a constant", m->in->name, m->loops[0]->var->name,
					x->buf->name, m->loops[v]->var->name);
		stride[v] = d->ival;
	}
	return 0;
}

static void address(cg_ctx *c, const tir_buffer *buf, tir_expr *origin)
{
	buf_printf(c->out, "&%s[", c->bufname[buf->id]);
	cg_index(c, buf, origin);
	buf_puts(c->out, "]");
}

int c_neon_call(cg_ctx *c, const tir_stmt *loop, int depth, tir_error *err)
{
	const tir_intrin *in = intrin_of_loop(loop);
	tir_intrin_match m;
	if (!in || in->unit != INTRIN_CPU || !implementation(in))
		return tir_fail(err, "codegen: loop %s: %s has no C implementation", loop->var->name,
				in ? in->name : "(no intrinsic)");
	if (intrin_match(&c->L->arena, c->L->p, loop, in, &m, err))
		return -1;
	tir_expr *o[3];
	int64_t s[3][3];
	/* dst over (i, j), a over (i, k), b over (k, j): loops 0, 1, 2 */
	if (tile_offsets(c, &m, &m.dst, &o[0], s[0], err) ||
	    tile_offsets(c, &m, &m.src[0], &o[1], s[1], err) ||
	    tile_offsets(c, &m, &m.src[1], &o[2], s[2], err))
		return -1;
	tir_buf *out = c->out;
	buf_indent(out, depth);
	buf_printf(out, "/* %s: %s tensorized (block %s) */\n", loop->var->name, in->name,
		   m.b->name);
	buf_indent(out, depth);
	buf_printf(out, "tir_%s(", in->name);
	address(c, m.dst.buf, o[0]);
	buf_printf(out, ", %lld, %lld, ", (long long)s[0][0], (long long)s[0][1]);
	address(c, m.src[0].buf, o[1]);
	buf_printf(out, ", %lld, %lld, ", (long long)s[1][0], (long long)s[1][2]);
	address(c, m.src[1].buf, o[2]);
	buf_printf(out, ", %lld, %lld);\n", (long long)s[2][2], (long long)s[2][1]);
	return 0;
}
