/*
 * c_neon.c — AArch64 code of the C backend (c.c): the CPU tensor
 * intrinsics of ir/intrins.def, with <arm_neon.h>.
 *
 * Design.  A vectorized loop over one float32 block whose accesses are
 * contiguous along the loop or do not move with it is printed with NEON
 * intrinsics, four lanes a step (c_neon_vector_loop): loads vld1q_f32 or
 * vdupq_n_f32, arithmetic vaddq / vsubq / vmulq / vdivq, x + y * z and a
 * sum's acc += y * z as vfmaq_f32, max and min as a compare and select;
 * anything else (a predicate, another dtype, a strided or gathered access,
 * an extent not a multiple of 4, a math function) keeps the C backend's
 * `omp simd` loop.  On a key with fp16 a float16 block is printed the same
 * way, eight lanes of float16x8_t a step (FMLA on .8h for a sum's
 * acc += y * z), where its value rounds once, at the store, as the IR's
 * float16 arithmetic does (hvectorizable): a copy, one operation of two
 * operands, a fused x + y * z, a sum's acc + x or acc + y * z.  Only
 * AArch64 keys are affected.
 *
 * A loop tensorized with a CPU intrinsic (sdot_4x4x4_i8_i32,
 * udot_4x4x4_u8_i32, smmla_2x2x8_i8_i32, fmla_4x8x4_f16) is printed as one call of a static inline function of
 * the prelude, which c_neon_prelude emits only for the intrinsics the
 * program uses — a program without them (every x86 one) is printed as
 * before, byte for byte.  The call passes the address of each access's
 * tile origin (the tile's loops at 0) and its constant strides along the
 * tile's loops, from lower_offset: the intrinsic's operands may be in any
 * layout and scope (ir/intrin.c, match_cpu_mma), so the function packs them
 * into the registers the instruction wants — for sdot, a's 4 x 4 tile row by
 * row into 16 bytes and b transposed (its columns) into 16 more, for smmla
 * a's 2 x 8 rows and b's 2 columns of 8, for fmla a's 4 x 4 tile into two
 * registers of 8 float16 and b's 4 rows of 8 — and with the strides constant
 * after inlining, gcc turns the packing of a contiguous row into one load.
 * The accumulator tile is read, updated by the instruction and written back
 * per call:
 *
 *   sdot   acc_i = vdotq_laneq_s32(acc_i, bT, a, i), i = 0..3: lane j of
 *          row i gains the dot of b's column j with a's row i
 *   udot   the same, vdotq_laneq_u32 on uint8 into the int32 tile's bits
 *   smmla  acc = vmmlaq_s32(acc, a, bT): the 2 x 2 tile (row-major) gains
 *          a (2 x 8) x b (8 x 2)
 *   fmla   acc_i = vfmaq_laneq_f16(acc_i, b_k, a, lane of a[i, k]), for
 *          k = 0..3 and rows i = 0..3: row i (8 float16) gains a[i, k]
 *          times b's row k, rounded once per step as a float16 store is
 *
 * Each function is guarded by the ACLE macro of its extension
 * (__ARM_FEATURE_DOTPROD, __ARM_FEATURE_MATMUL_INT8,
 * __ARM_FEATURE_FP16_VECTOR_ARITHMETIC) with an #error naming the missing
 * one otherwise: the C compiler's flags for the target key (measure/cpu.c:
 * -march=armv8.2-a+dotprod+fp16+i8mm) define them, and a source
 * built without them fails to compile instead of running something else.
 */
#include <math.h>
#include <string.h>
#include "codegen.h"

static bool aarch64(const tir_target *t)
{
	return t && t->kind == TIR_TARGET_CPU && !strncmp(t->key, "cpu:aarch64", 11);
}

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

static const char neon_udot[] =
"#if defined(__ARM_FEATURE_DOTPROD)\n"
"#include <arm_neon.h>\n"
"/* udot_4x4x4_u8_i32: c[i, j] += sum over k of a[i, k] * b[k, j], a 4 x 4 x 4\n"
" * tile of uint8 into int32 (the unsigned dot's uint32 lanes are c's bits, both\n"
" * wrapping modulo 2^32); element (i, j) of c at c[i * ci + j * cj], and so on */\n"
"static inline void tir_udot_4x4x4_u8_i32(int32_t *c, int64_t ci, int64_t cj,\n"
"    const uint8_t *a, int64_t ai, int64_t ak, const uint8_t *b, int64_t bk, int64_t bj)\n"
"{\n"
"    uint8_t pa[16], pb[16];\n"
"    uint32_t t[16];\n"
"    for (int r = 0; r < 4; r++)\n"
"        for (int q = 0; q < 4; q++) {\n"
"            pa[4 * r + q] = a[r * ai + q * ak];     /* a's row r */\n"
"            pb[4 * r + q] = b[q * bk + r * bj];     /* b's column r */\n"
"            t[4 * r + q] = (uint32_t)c[r * ci + q * cj];\n"
"        }\n"
"    const uint8x16_t va = vld1q_u8(pa), vb = vld1q_u8(pb);\n"
"    vst1q_u32(t, vdotq_laneq_u32(vld1q_u32(t), vb, va, 0));\n"
"    vst1q_u32(t + 4, vdotq_laneq_u32(vld1q_u32(t + 4), vb, va, 1));\n"
"    vst1q_u32(t + 8, vdotq_laneq_u32(vld1q_u32(t + 8), vb, va, 2));\n"
"    vst1q_u32(t + 12, vdotq_laneq_u32(vld1q_u32(t + 12), vb, va, 3));\n"
"    for (int r = 0; r < 4; r++)\n"
"        for (int q = 0; q < 4; q++)\n"
"            c[r * ci + q * cj] = (int32_t)t[4 * r + q];\n"
"}\n"
"#else\n"
"#error \"udot_4x4x4_u8_i32 needs the AArch64 dot-product extension "
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

/* float16 operands and accumulator are the C backend's uint16_t bits,
 * reinterpreted in the registers; the lane of vfmaq_laneq_f16 must be a
 * constant, so the four steps are written out (TIR_FMLA_STEP). */
static const char neon_fmla[] =
"#if defined(__ARM_FEATURE_FP16_VECTOR_ARITHMETIC)\n"
"#include <arm_neon.h>\n"
"/* fmla_4x8x4_f16: c[i, j] += a[i, k] * b[k, j] for k = 0..3 in turn, each step\n"
" * one fused multiply-add rounded to float16, a 4 x 8 x 4 tile of float16 bits;\n"
" * element (i, j) of c at c[i * ci + j * cj], and so on */\n"
"static inline void tir_fmla_4x8x4_f16(uint16_t *c, int64_t ci, int64_t cj,\n"
"    const uint16_t *a, int64_t ai, int64_t ak, const uint16_t *b, int64_t bk, int64_t bj)\n"
"{\n"
"    uint16_t pa[16], pb[32], t[32];\n"
"    for (int r = 0; r < 4; r++)\n"
"        for (int q = 0; q < 4; q++)\n"
"            pa[4 * r + q] = a[r * ai + q * ak];     /* a's row r */\n"
"    for (int q = 0; q < 4; q++)\n"
"        for (int x = 0; x < 8; x++)\n"
"            pb[8 * q + x] = b[q * bk + x * bj];     /* b's row q */\n"
"    for (int r = 0; r < 4; r++)\n"
"        for (int x = 0; x < 8; x++)\n"
"            t[8 * r + x] = c[r * ci + x * cj];\n"
"    const float16x8_t a01 = vreinterpretq_f16_u16(vld1q_u16(pa));      /* rows 0, 1 */\n"
"    const float16x8_t a23 = vreinterpretq_f16_u16(vld1q_u16(pa + 8));  /* rows 2, 3 */\n"
"    float16x8_t c0 = vreinterpretq_f16_u16(vld1q_u16(t));\n"
"    float16x8_t c1 = vreinterpretq_f16_u16(vld1q_u16(t + 8));\n"
"    float16x8_t c2 = vreinterpretq_f16_u16(vld1q_u16(t + 16));\n"
"    float16x8_t c3 = vreinterpretq_f16_u16(vld1q_u16(t + 24));\n"
"#define TIR_FMLA_STEP(q) do { \\\n"
"        const float16x8_t bq = vreinterpretq_f16_u16(vld1q_u16(pb + 8 * (q))); \\\n"
"        c0 = vfmaq_laneq_f16(c0, bq, a01, (q)); \\\n"
"        c1 = vfmaq_laneq_f16(c1, bq, a01, 4 + (q)); \\\n"
"        c2 = vfmaq_laneq_f16(c2, bq, a23, (q)); \\\n"
"        c3 = vfmaq_laneq_f16(c3, bq, a23, 4 + (q)); \\\n"
"    } while (0)\n"
"    TIR_FMLA_STEP(0);\n"
"    TIR_FMLA_STEP(1);\n"
"    TIR_FMLA_STEP(2);\n"
"    TIR_FMLA_STEP(3);\n"
"#undef TIR_FMLA_STEP\n"
"    vst1q_u16(t, vreinterpretq_u16_f16(c0));\n"
"    vst1q_u16(t + 8, vreinterpretq_u16_f16(c1));\n"
"    vst1q_u16(t + 16, vreinterpretq_u16_f16(c2));\n"
"    vst1q_u16(t + 24, vreinterpretq_u16_f16(c3));\n"
"    for (int r = 0; r < 4; r++)\n"
"        for (int x = 0; x < 8; x++)\n"
"            c[r * ci + x * cj] = t[8 * r + x];\n"
"}\n"
"#else\n"
"#error \"fmla_4x8x4_f16 needs the AArch64 half-precision arithmetic "
"(__ARM_FEATURE_FP16_VECTOR_ARITHMETIC: -march=armv8.2-a+fp16)\"\n"
"#endif\n"
"\n";

/* The implementation of each CPU intrinsic: its prelude text, which
 * defines the function the call names (its intrins.def name, prefixed
 * "tir_"). */
static const struct { const char *name, *text; } implementations[] = {
	{ "sdot_4x4x4_i8_i32", neon_sdot },
	{ "udot_4x4x4_u8_i32", neon_udot },
	{ "smmla_2x2x8_i8_i32", neon_smmla },
	{ "fmla_4x8x4_f16", neon_fmla },
};

static const char *implementation(const tir_intrin *in)
{
	for (size_t i = 0; i < sizeof implementations / sizeof *implementations; i++)
		if (!strcmp(in->name, implementations[i].name))
			return implementations[i].text;
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

/* A NEON vector of a block's dtype: its lanes, its C type and how a
 * register is loaded from, broadcast from and stored to the buffer's
 * elements (float16's are the C backend's uint16_t bits, reinterpreted). */
typedef struct neon_vec neon_vec;
struct neon_vec {
	tir_dtype dt;
	int lanes;
	const char *type, *sfx, *elem;
	const char *load, *dup, *close, *store, *store_close;
};

static const neon_vec neon_f32 = {
	TIR_F32, 4, "float32x4_t", "f32", "float32_t",
	"vld1q_f32(", "vdupq_n_f32(", ")", "vst1q_f32(tir_dst, ", ");"
};
static const neon_vec neon_f16 = {
	TIR_F16, 8, "float16x8_t", "f16", "uint16_t",
	"vreinterpretq_f16_u16(vld1q_u16(", "vreinterpretq_f16_u16(vdupq_n_u16(", "))",
	"vst1q_u16(tir_dst, vreinterpretq_u16_f16(", "));"
};

static const neon_vec *neon_loop(tir_lowered *L, const tir_stmt *l);

/* Which NEON vector loops are under s: bit 0 float32, bit 1 float16. */
static int neon_loops(tir_lowered *L, const tir_stmt *s)
{
	const neon_vec *t = neon_loop(L, s);
	int has = t == &neon_f32 ? 1 : t == &neon_f16 ? 2 : 0;
	for (int i = 0; i < s->nkids; i++)
		has |= neon_loops(L, s->kids[i]);
	return has;
}

void c_neon_prelude(cg_ctx *c, const tir_stmt *root)
{
	bool used[64] = { false };
	tir_buf *o = c->out;
	int has = neon_loops(c->L, root);
	if (has & 1)
		buf_puts(o, "/* AArch64: vectorized float32 loops as NEON float32x4_t */\n");
	if (has & 2)
		buf_puts(o, "/* AArch64: vectorized float16 loops as NEON float16x8_t */\n"
			    "#if !defined(__ARM_FEATURE_FP16_VECTOR_ARITHMETIC)\n"
			    "#error \"float16 vector loops need the AArch64 half-precision arithmetic "
			    "(__ARM_FEATURE_FP16_VECTOR_ARITHMETIC: -march=armv8.2-a+fp16)\"\n"
			    "#endif\n");
	if (has)
		buf_puts(o, "#include <arm_neon.h>\n\n");
	if (tir_nintrins > 64)
		return;
	mark_used(root, used);
	/* each guarded, as the C prelude is (a group build) */
	for (int i = 0; i < tir_nintrins; i++) {
		const char *text = used[i] ? implementation(&tir_intrins[i]) : NULL;
		if (text)
			buf_printf(o, "#ifndef TIR_NEON_%s\n#define TIR_NEON_%s\n%s#endif\n",
				   tir_intrins[i].name, tir_intrins[i].name, text);
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

/* ---- vectorized float32 and float16 loops ---------------------------------------- */

/* The change of offset `off` (in loop variables) when v steps by one: 0 or
 * 1 for a broadcast or a contiguous access, anything else (-1: not a
 * constant) for one NEON cannot load in one instruction. */
static int64_t step_of(tir_lowered *L, tir_expr *off, const tir_var *v)
{
	const tir_program *p = L->p;
	tir_subst sub = { p->nvars, arena_alloc(&L->arena, sizeof(tir_expr *) *
						(size_t)(p->nvars + 1)) };
	sub.map[v->id] = mk_add(&L->arena, mk_var(&L->arena, (tir_var *)v),
				 mk_int(&L->arena, 1));
	tir_expr *d = lower_simplify(L, mk_sub(&L->arena, expr_subst(&L->arena, off, &sub), off));
	return d->kind == E_INT ? d->ival : -1;
}

/* The offset of an access of block b, its indices bound to loop variables. */
static tir_expr *bound_offset(tir_lowered *L, const tir_block *b, const tir_buffer *buf,
			      int n, tir_expr *const *idx)
{
	tir_expr *bi[TIR_MAX_DIMS];
	for (int d = 0; d < n; d++)
		bi[d] = lower_bind(L, b, idx[d]);
	return lower_simplify(L, lower_offset(L, buf, n, bi));
}

/* Whether load e of block b is of a buffer of dtype dt, contiguous along v
 * or not moving with it. */
static bool neon_load(tir_lowered *L, const tir_block *b, const tir_expr *e, const tir_var *v,
		      tir_dtype dt)
{
	if (e->buf->dtype != dt)
		return false;
	int64_t st = step_of(L, bound_offset(L, b, e->buf, e->nidx, e->idx), v);
	return st == 0 || st == 1;
}

/* Whether value e of block b has a NEON form along v: float32 arithmetic
 * (+ - * /, min, max, float32 casts of float32), constants, and loads of
 * float32 buffers that are contiguous along v or do not move with it. */
static bool vectorizable(tir_lowered *L, const tir_block *b, const tir_expr *e,
			 const tir_var *v)
{
	if (!e || e->dtype != TIR_F32)
		return false;
	switch (e->kind) {
	case E_INT:
	case E_FLOAT:
		return true;
	case E_ADD:
	case E_SUB:
	case E_MUL:
	case E_DIV:
	case E_MIN:
	case E_MAX:
		return vectorizable(L, b, e->a, v) && vectorizable(L, b, e->b, v);
	case E_CAST:
		return vectorizable(L, b, e->a, v);
	case E_LOAD:
		return neon_load(L, b, e, v, TIR_F32);
	default:
		return false;
	}
}

/* Whether x is a float16 value exactly (a constant broadcast unrounded):
 * zero, or finite, at most 65504 in magnitude, an integer multiple of its
 * float16 ulp (2^(E - 10) for a normal value 1.f x 2^E, E >= -14; 2^-24
 * below). */
static bool exact_f16(double x)
{
	if (x == 0)
		return true;
	if (!(fabs(x) <= 65504))
		return false;
	int e;
	frexp(x, &e);                           /* |x| = m 2^e, m in [0.5, 1): E = e - 1 */
	double s = ldexp(x, e - 1 >= -14 ? 11 - e : 24);
	return s == floor(s);
}

/* A float16 operand of a NEON float16 loop: a load of a float16 buffer
 * contiguous or invariant along v, a constant that is a float16 value, or
 * a float16 cast of one. */
static bool hleaf(tir_lowered *L, const tir_block *b, const tir_expr *e, const tir_var *v)
{
	if (!e || e->dtype != TIR_F16)
		return false;
	switch (e->kind) {
	case E_FLOAT:
		return exact_f16(e->fval);
	case E_INT:
		return exact_f16((double)e->ival);
	case E_CAST:
		return hleaf(L, b, e->a, v);
	case E_LOAD:
		return neon_load(L, b, e, v, TIR_F16);
	default:
		return false;
	}
}

static bool hproduct(tir_lowered *L, const tir_block *b, const tir_expr *e, const tir_var *v)
{
	return e && e->kind == E_MUL && e->dtype == TIR_F16 && hleaf(L, b, e->a, v) &&
	       hleaf(L, b, e->b, v);
}

/* Whether the value of block b has a NEON float16 form along v that rounds
 * once, where the store does (ir/interp.c: float16 arithmetic is exact until
 * a cast or a store rounds it), so the lanes compute exactly the IR's
 * values: an operand (a copy); one +, -, *, min or max of two; x + y * z,
 * fused (vfmaq_f16); a sum's acc + x or acc + y * z (fused).  Anything else
 * (a division, two roundings' worth, a float32 part) keeps omp simd. */
static bool hvectorizable(tir_lowered *L, const tir_block *b, const tir_var *v)
{
	const tir_expr *e = b->value;
	if (hleaf(L, b, e, v) || (b->reduce == REDUCE_SUM && hproduct(L, b, e, v)))
		return true;
	if (b->reduce != REDUCE_NONE || !e || e->dtype != TIR_F16)
		return false;
	switch (e->kind) {
	case E_ADD:
		if (hproduct(L, b, e->a, v) && hleaf(L, b, e->b, v))
			return true;
		if (hproduct(L, b, e->b, v) && hleaf(L, b, e->a, v))
			return true;
		return hleaf(L, b, e->a, v) && hleaf(L, b, e->b, v);
	case E_SUB:
	case E_MUL:
	case E_MIN:
	case E_MAX:
		return hleaf(L, b, e->a, v) && hleaf(L, b, e->b, v);
	default:
		return false;
	}
}

static void vexpr(cg_ctx *c, const neon_vec *t, const tir_block *b, const tir_expr *e,
		  const tir_var *v);

static void vcall2(cg_ctx *c, const neon_vec *t, const tir_block *b, const char *fn,
		   const tir_expr *x, const tir_expr *y, const tir_var *v)
{
	buf_printf(c->out, "%s_%s(", fn, t->sfx);
	vexpr(c, t, b, x, v);
	buf_puts(c->out, ", ");
	vexpr(c, t, b, y, v);
	buf_puts(c->out, ")");
}

/* e as a vector of type t, lane l the value at v + l (vectorizable or
 * hvectorizable holds).  x + y * z is one fused multiply-add (vfmaq), as gcc
 * contracts the scalar float32 code and as float16's single rounding is;
 * max / min keep the C backend's a > b ? a : b (a < b ? a : b) under NaNs,
 * not vmaxq's. */
static void vexpr(cg_ctx *c, const neon_vec *t, const tir_block *b, const tir_expr *e,
		  const tir_var *v)
{
	tir_buf *o = c->out;
	switch (e->kind) {
	case E_INT:
	case E_FLOAT:
		if (t->dt == TIR_F16) {         /* a float16 value (exact_f16) */
			buf_printf(o, "vdupq_n_f16(%.17g)",
				   e->kind == E_FLOAT ? e->fval : (double)e->ival);
			return;
		}
		buf_puts(o, "vdupq_n_f32(");
		cg_expr(c, e);
		buf_puts(o, ")");
		return;
	case E_ADD:
		if (e->b->kind == E_MUL || e->a->kind == E_MUL) {
			const tir_expr *m = e->b->kind == E_MUL ? e->b : e->a,
				       *x = m == e->b ? e->a : e->b;
			buf_printf(o, "vfmaq_%s(", t->sfx);
			vexpr(c, t, b, x, v);
			buf_puts(o, ", ");
			vexpr(c, t, b, m->a, v);
			buf_puts(o, ", ");
			vexpr(c, t, b, m->b, v);
			buf_puts(o, ")");
			return;
		}
		vcall2(c, t, b, "vaddq", e->a, e->b, v);
		return;
	case E_SUB:
		vcall2(c, t, b, "vsubq", e->a, e->b, v);
		return;
	case E_MUL:
		vcall2(c, t, b, "vmulq", e->a, e->b, v);
		return;
	case E_DIV:
		vcall2(c, t, b, "vdivq", e->a, e->b, v);
		return;
	case E_MIN:
	case E_MAX:
		buf_printf(o, "vbslq_%s(", t->sfx);
		vcall2(c, t, b, e->kind == E_MAX ? "vcgtq" : "vcltq", e->a, e->b, v);
		buf_puts(o, ", ");
		vexpr(c, t, b, e->a, v);
		buf_puts(o, ", ");
		vexpr(c, t, b, e->b, v);
		buf_puts(o, ")");
		return;
	case E_CAST:
		vexpr(c, t, b, e->a, v);
		return;
	default: {          /* E_LOAD */
		tir_expr *off = bound_offset(c->L, b, e->buf, e->nidx, e->idx);
		bool bcast = step_of(c->L, off, v) == 0;
		buf_printf(o, "%s%s%s[", bcast ? t->dup : t->load, bcast ? "" : "&",
			   c->bufname[e->buf->id]);
		cg_index(c, e->buf, off);
		buf_printf(o, "]%s", t->close);
		return;
	}
	}
}

/* The NEON vector loop l has a form in (c_neon_vector_loop), or NULL: one
 * unpredicated block, the extent a multiple of the lanes, the store
 * contiguous along the loop, not a reduction along it (lanes would race on
 * an accumulator), of a float32 value (vectorizable) or, on a key with
 * fp16, a float16 one (hvectorizable). */
static const neon_vec *neon_loop(tir_lowered *L, const tir_stmt *l)
{
	if (!aarch64(L->t) || l->kind != STMT_FOR || l->loop_kind != LOOP_VECTORIZED ||
	    l->nkids != 1 || l->kids[0]->kind != STMT_BLOCK)
		return NULL;
	const tir_block *b = l->kids[0]->block;
	const tir_var *v = l->var;
	const neon_vec *t = b->store->dtype == TIR_F32 ? &neon_f32
		: b->store->dtype == TIR_F16 && tir_target_has(L->t, "fp16") ? &neon_f16 : NULL;
	if (!t || l->extent % t->lanes || b->predicate ||
	    (b->reduce != REDUCE_NONE && (b->reduce != REDUCE_SUM || b->init)))
		return NULL;
	for (int i = 0; i < b->niters; i++)
		if (b->iters[i].kind == ITER_REDUCE && expr_uses_var(b->iters[i].binding, v))
			return NULL;
	tir_expr *off = bound_offset(L, b, b->store, b->store->ndim, b->store_idx);
	if (step_of(L, off, v) != 1)
		return NULL;
	bool ok = t == &neon_f32 ? vectorizable(L, b, b->value, v) : hvectorizable(L, b, v);
	return ok ? t : NULL;
}

int c_neon_vector_loop(cg_ctx *c, const tir_stmt *l, int depth)
{
	const neon_vec *t = neon_loop(c->L, l);
	if (!t)
		return 0;
	const tir_block *b = l->kids[0]->block;
	const tir_var *v = l->var;
	tir_expr *off = bound_offset(c->L, b, b->store, b->store->ndim, b->store_idx);
	tir_buf *o = c->out;
	buf_indent(o, depth);
	buf_printf(o, "/* %s: vectorized, NEON %s */\n", v->name, t->type);
	buf_indent(o, depth);
	buf_printf(o, "for (int64_t ");
	cg_var(o, v);
	buf_puts(o, " = 0; ");
	cg_var(o, v);
	buf_printf(o, " < %lld; ", (long long)l->extent);
	cg_var(o, v);
	buf_printf(o, " += %d) { /* block %s */\n", t->lanes, b->name);
	buf_indent(o, depth + 1);
	buf_printf(o, "%s *tir_dst = &%s[", t->elem, c->bufname[b->store->id]);
	cg_index(c, b->store, off);
	buf_puts(o, "];\n");
	buf_indent(o, depth + 1);
	buf_puts(o, t->store);
	if (b->reduce == REDUCE_SUM) {
		/* acc + value, the value's product fused into it */
		const tir_expr *x = b->value;
		buf_printf(o, "%s_%s(%stir_dst%s, ", x->kind == E_MUL ? "vfmaq" : "vaddq", t->sfx,
			   t->load, t->close);
		if (x->kind == E_MUL) {
			vexpr(c, t, b, x->a, v);
			buf_puts(o, ", ");
			vexpr(c, t, b, x->b, v);
		} else {
			vexpr(c, t, b, x, v);
		}
		buf_puts(o, ")");
	} else {
		vexpr(c, t, b, b->value, v);
	}
	buf_printf(o, "%s\n", t->store_close);
	buf_indent(o, depth);
	buf_puts(o, "}\n");
	return 1;
}
