/*
 * pack_write.c — the files of a kernel library (`tirctl pack`, pack.c):
 * sources, cubins as C arrays, tird_pack.h, tird_pack.c, Makefile,
 * tirdpack.pc and manifest.json.
 *
 * tird_pack.c is a table of the kernels (generated) followed by a runtime
 * that is the same in every pack (rt_text below).  For CUDA the runtime uses
 * the driver API on the caller's current context: each kernel's cubin is
 * loaded, its functions opted in to their dynamic shared memory and its
 * scratch buffers allocated (zeroed) at its first call; every call encodes
 * the tensor maps of the caller's pointers exactly as tird's runner does
 * (tuner/measure/cuda_run.c: dense view, 128-byte swizzle, elements moved as
 * unsigned integers of their size) and launches the kernels in order on the
 * caller's stream.  For the CPU a call is the kernel's entry function.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "pack.h"
#include "tir_measure.h"

/* ---- what every pack has ------------------------------------------------------------- */

/* The ABI of tird_pack.h: the number of libtirdpack.so's soname, raised when
 * a type or a function of the header changes incompatibly (a program built
 * against one pack then refuses to load a pack of another ABI). */
#define PACK_ABI "1"

static const char header_text[] =
"/* tird_pack.h — a kernel library packed by `tirctl pack` from tird's tuned bests.\n"
" *\n"
" * Arguments are the workload's tensors in tird's layouts, inputs then outputs\n"
" * (manifest.json and tird_kernel_arg name each one's dtype and element count):\n"
" * host pointers for a CPU pack, device pointers for a CUDA pack, whose calls\n"
" * run on `stream` (a CUstream; NULL: the legacy default stream) in the\n"
" * current CUDA context.  A CUDA kernel's scratch buffers belong to the pack\n"
" * (allocated at its first call): calls of one kernel must not overlap.\n"
" * Every function returns TIRD_OK or a status below; tird_last_error() then\n"
" * says why (per thread). */\n"
"#ifndef TIRD_PACK_H\n#define TIRD_PACK_H\n\n"
"#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
"/* the ABI of this header: libtirdpack.so's soname is libtirdpack.so.<ABI> */\n"
"#define TIRD_PACK_ABI " PACK_ABI "\n\n"
"enum {\n"
"\tTIRD_OK = 0,\n"
"\tTIRD_NOT_PACKED = 1,      /* no kernel of this pack has that workload */\n"
"\tTIRD_BAD_ARGUMENT = 2,    /* a NULL shape, kernel or argument */\n"
"\tTIRD_RUN_ERROR = 3        /* the kernel or the CUDA driver failed */\n"
"};\n\n"
"typedef struct tird_arg_info {\n"
"\tconst char *name, *dtype;\n"
"\tint elem_bytes;\n"
"\tlong long elems;\n"
"\tint is_output;\n"
"} tird_arg_info;\n\n"
"/* The shapes the dispatch functions match exactly (workloads without an\n"
" * epilogue; others are reached by key or by their own function).  A NULL\n"
" * layout is the default (NN; channels-last), a NULL out_dtype is dtype,\n"
" * 0 in stride, dilation, groups or multiplier is 1. */\n"
"typedef struct tird_matmul_shape {\n"
"\tlong long batch;          /* 0: no batch axis */\n"
"\tlong long M, N, K;\n"
"\tconst char *layout;       /* \"NN\", \"NT\", \"TN\" */\n"
"\tconst char *dtype, *out_dtype;\n"
"} tird_matmul_shape;\n\n"
"typedef struct tird_conv_shape {\n"
"\tlong long N, C, K;        /* K: output channels (depthwise_conv2d: 0 or C * multiplier) */\n"
"\tlong long in[3];          /* input extents, outermost first: W; H W; D H W */\n"
"\tlong long kernel[3];      /* S; R S; T R S */\n"
"\tlong long stride[3], dilation[3];\n"
"\tlong long pad[6];         /* the low pads, then the high pads */\n"
"\tlong long output_padding[3];   /* conv2d_transpose */\n"
"\tlong long groups, multiplier;  /* multiplier: depthwise_conv2d */\n"
"\tconst char *layout;       /* \"NHWC\", \"NCHW\", ... */\n"
"\tconst char *dtype, *out_dtype;\n"
"} tird_conv_shape;\n\n"
"typedef struct tird_kernel tird_kernel;\n\n"
"const char *tird_pack_target(void);          /* the full target key */\n"
"int tird_kernel_count(void);\n"
"const tird_kernel *tird_kernel_at(int i);\n"
"const tird_kernel *tird_find(const char *workload_key);   /* NULL: not packed */\n"
"const char *tird_kernel_name(const tird_kernel *k);\n"
"const char *tird_kernel_op(const tird_kernel *k);\n"
"const char *tird_kernel_key(const tird_kernel *k);       /* workload key */\n"
"const char *tird_kernel_workload(const tird_kernel *k);  /* canonical JSON */\n"
"const char *tird_kernel_record(const tird_kernel *k);    /* tird's record id */\n"
"double tird_kernel_latency_us(const tird_kernel *k);     /* as tird measured it */\n"
"int tird_kernel_nargs(const tird_kernel *k);\n"
"const tird_arg_info *tird_kernel_arg(const tird_kernel *k, int i);\n"
"int tird_run(const tird_kernel *k, void *const *args, void *stream);\n"
"const char *tird_last_error(void);\n\n"
"/* dispatch: the kernel of exactly this shape, or TIRD_NOT_PACKED */\n"
"int tird_matmul(const tird_matmul_shape *s, void *const *args, void *stream);\n"
"int tird_conv1d(const tird_conv_shape *s, void *const *args, void *stream);\n"
"int tird_conv2d(const tird_conv_shape *s, void *const *args, void *stream);\n"
"int tird_conv3d(const tird_conv_shape *s, void *const *args, void *stream);\n"
"int tird_conv2d_transpose(const tird_conv_shape *s, void *const *args, void *stream);\n"
"int tird_depthwise_conv2d(const tird_conv_shape *s, void *const *args, void *stream);\n\n"
"/* the packed kernels, one function per workload */\n";

static const char rt_text[] =
"/* ---- the runtime (the same in every pack) ---- */\n\n"
"static _Thread_local char pk_err[512];\n\n"
"static int pk_fail(int status, const char *fmt, ...)\n"
"{\n"
"\tva_list ap;\n"
"\tva_start(ap, fmt);\n"
"\tvsnprintf(pk_err, sizeof pk_err, fmt, ap);\n"
"\tva_end(ap);\n"
"\treturn status;\n"
"}\n\n"
"const char *tird_last_error(void) { return pk_err; }\n"
"const char *tird_pack_target(void) { return PK_TARGET; }\n"
"int tird_kernel_count(void) { return PK_NKERNELS; }\n"
"const tird_kernel *tird_kernel_at(int i)\n"
"{\n\treturn i >= 0 && i < PK_NKERNELS ? &pk_kernels[i] : NULL;\n}\n"
"const tird_kernel *tird_find(const char *key)\n"
"{\n"
"\tfor (int i = 0; key && i < PK_NKERNELS; i++)\n"
"\t\tif (!strcmp(pk_kernels[i].key, key))\n"
"\t\t\treturn &pk_kernels[i];\n"
"\treturn NULL;\n"
"}\n"
"const char *tird_kernel_name(const tird_kernel *k) { return k ? k->name : NULL; }\n"
"const char *tird_kernel_op(const tird_kernel *k) { return k ? k->op : NULL; }\n"
"const char *tird_kernel_key(const tird_kernel *k) { return k ? k->key : NULL; }\n"
"const char *tird_kernel_workload(const tird_kernel *k) { return k ? k->workload : NULL; }\n"
"const char *tird_kernel_record(const tird_kernel *k) { return k ? k->record : NULL; }\n"
"double tird_kernel_latency_us(const tird_kernel *k) { return k ? k->latency_us : 0; }\n"
"int tird_kernel_nargs(const tird_kernel *k) { return k ? k->nuser : 0; }\n"
"const tird_arg_info *tird_kernel_arg(const tird_kernel *k, int i)\n"
"{\n\treturn k && i >= 0 && i < k->nuser ? &k->args[i] : NULL;\n}\n\n"
"static int pk_check_args(const tird_kernel *k, void *const *args)\n"
"{\n"
"\tif (!k)\n"
"\t\treturn pk_fail(TIRD_BAD_ARGUMENT, \"tird_run: no kernel\");\n"
"\tif (!args)\n"
"\t\treturn pk_fail(TIRD_BAD_ARGUMENT, \"%s: no arguments\", k->name);\n"
"\tfor (int i = 0; i < k->nuser; i++)\n"
"\t\tif (!args[i])\n"
"\t\t\treturn pk_fail(TIRD_BAD_ARGUMENT, \"%s: argument %d (%s) is NULL\", k->name,\n"
"\t\t\t\t       i, k->args[i].name);\n"
"\treturn TIRD_OK;\n"
"}\n\n"
"#ifdef TIRD_PACK_CUDA\n"
"typedef struct pk_state {\n"
"\tpthread_mutex_t lock;\n"
"\tCUcontext ctx;\n"
"\tCUmodule mod;\n"
"\tCUfunction fn[PK_MAX_LAUNCHES];\n"
"\tCUdeviceptr scratch[PK_MAX_ARGS];\n"
"} pk_state;\n"
"static pk_state pk_states[PK_NKERNELS];\n"
"static pthread_once_t pk_once = PTHREAD_ONCE_INIT;\n\n"
"static void pk_init_locks(void)\n"
"{\n"
"\tfor (int i = 0; i < PK_NKERNELS; i++)\n"
"\t\tpthread_mutex_init(&pk_states[i].lock, NULL);\n"
"}\n\n"
"static int pk_cu(CUresult r, const tird_kernel *k, const char *what)\n"
"{\n"
"\tif (r == CUDA_SUCCESS)\n"
"\t\treturn TIRD_OK;\n"
"\tconst char *name = NULL, *why = NULL;\n"
"\tcuGetErrorName(r, &name);\n"
"\tcuGetErrorString(r, &why);\n"
"\treturn pk_fail(TIRD_RUN_ERROR, \"%s: %s: %s (%s)\", k->name, what, name ? name : \"?\",\n"
"\t\t       why ? why : \"?\");\n"
"}\n\n"
"/* The module, functions and scratch of k in the current context. */\n"
"static int pk_prepare(const tird_kernel *k, pk_state *st)\n"
"{\n"
"\tCUcontext ctx = NULL;\n"
"\tint rc = pk_cu(cuCtxGetCurrent(&ctx), k, \"cuCtxGetCurrent\");\n"
"\tif (rc)\n"
"\t\treturn rc;\n"
"\tif (!ctx)\n"
"\t\treturn pk_fail(TIRD_RUN_ERROR, \"%s: no current CUDA context\", k->name);\n"
"\tif (st->ctx == ctx)\n"
"\t\treturn TIRD_OK;\n"
"\tif (st->ctx)\n"
"\t\treturn pk_fail(TIRD_RUN_ERROR, \"%s: loaded in another CUDA context\", k->name);\n"
"\tif ((rc = pk_cu(cuModuleLoadData(&st->mod, k->cubin), k, \"loading the cubin\")))\n"
"\t\treturn rc;\n"
"\tfor (int i = 0; i < k->nlaunches && !rc; i++) {\n"
"\t\tconst pk_launch *l = &k->launches[i];\n"
"\t\trc = pk_cu(cuModuleGetFunction(&st->fn[i], st->mod, l->name), k, l->name);\n"
"\t\tif (!rc && l->shared > 48 * 1024)\n"
"\t\t\trc = pk_cu(cuFuncSetAttribute(st->fn[i],\n"
"\t\t\t\tCU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)l->shared),\n"
"\t\t\t\t   k, \"opting in to its shared memory\");\n"
"\t}\n"
"\tfor (int i = k->nuser; i < k->nargs && !rc; i++) {\n"
"\t\tsize_t bytes = (size_t)k->args[i].elems * (size_t)k->args[i].elem_bytes;\n"
"\t\trc = pk_cu(cuMemAlloc(&st->scratch[i], bytes ? bytes : 1), k, \"allocating scratch\");\n"
"\t\tif (!rc)\n"
"\t\t\trc = pk_cu(cuMemsetD8(st->scratch[i], 0, bytes), k, \"clearing scratch\");\n"
"\t}\n"
"\tif (rc) {\n"
"\t\tfor (int i = k->nuser; i < k->nargs; i++)\n"
"\t\t\tif (st->scratch[i])\n"
"\t\t\t\tcuMemFree(st->scratch[i]);\n"
"\t\tcuModuleUnload(st->mod);\n"
"\t\tmemset(st->scratch, 0, sizeof st->scratch);\n"
"\t\treturn rc;\n"
"\t}\n"
"\tst->ctx = ctx;\n"
"\treturn TIRD_OK;\n"
"}\n\n"
"int tird_run(const tird_kernel *k, void *const *args, void *stream)\n"
"{\n"
"\tint rc = pk_check_args(k, args);\n"
"\tif (rc)\n"
"\t\treturn rc;\n"
"\tpthread_once(&pk_once, pk_init_locks);\n"
"\tpk_state *st = &pk_states[k - pk_kernels];\n"
"\tpthread_mutex_lock(&st->lock);\n"
"\trc = pk_prepare(k, st);\n"
"\tpthread_mutex_unlock(&st->lock);\n"
"\tif (rc)\n"
"\t\treturn rc;\n"
"\tCUdeviceptr ptr[PK_MAX_ARGS];\n"
"\tfor (int i = 0; i < k->nargs; i++)\n"
"\t\tptr[i] = i < k->nuser ? (CUdeviceptr)(uintptr_t)args[i] : st->scratch[i];\n"
"\tstatic const CUtensorMapDataType types[9] = {\n"
"\t\t[1] = CU_TENSOR_MAP_DATA_TYPE_UINT8, [2] = CU_TENSOR_MAP_DATA_TYPE_UINT16,\n"
"\t\t[4] = CU_TENSOR_MAP_DATA_TYPE_UINT32, [8] = CU_TENSOR_MAP_DATA_TYPE_INT64,\n"
"\t};\n"
"\tfor (int i = 0; i < k->nlaunches; i++) {\n"
"\t\tconst pk_launch *l = &k->launches[i];\n"
"\t\tCUtensorMap maps[PK_MAX_TMAPS];\n"
"\t\tvoid *params[PK_MAX_ARGS + PK_MAX_TMAPS];\n"
"\t\tfor (int a = 0; a < k->nargs; a++)\n"
"\t\t\tparams[a] = &ptr[a];\n"
"\t\tfor (int j = 0; j < l->ntmaps; j++) {\n"
"\t\t\tconst pk_tmap *m = &l->tmaps[j];\n"
"\t\t\tuint64_t strides[PK_TMAP_RANK];\n"
"\t\t\tuint32_t one[PK_TMAP_RANK];\n"
"\t\t\tfor (int d = 0; d < m->rank; d++) {\n"
"\t\t\t\tstrides[d] = d + 1 < m->rank ? m->strides[d + 1] : 0;\n"
"\t\t\t\tone[d] = 1;\n"
"\t\t\t}\n"
"\t\t\trc = pk_cu(cuTensorMapEncodeTiled(&maps[j], types[m->elem_bytes],\n"
"\t\t\t\t(cuuint32_t)m->rank, (void *)(uintptr_t)ptr[m->arg], m->dims, strides,\n"
"\t\t\t\tm->box, one, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,\n"
"\t\t\t\tCU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),\n"
"\t\t\t\t   k, \"encoding a tensor map\");\n"
"\t\t\tif (rc)\n"
"\t\t\t\treturn rc;\n"
"\t\t\tparams[k->nargs + j] = &maps[j];\n"
"\t\t}\n"
"\t\trc = pk_cu(cuLaunchKernel(st->fn[i], l->grid[0], l->grid[1], l->grid[2],\n"
"\t\t\t\t\t   l->block[0], l->block[1], l->block[2], l->shared,\n"
"\t\t\t\t\t   (CUstream)stream, params, NULL), k, l->name);\n"
"\t\tif (rc)\n"
"\t\t\treturn rc;\n"
"\t}\n"
"\treturn TIRD_OK;\n"
"}\n"
"#else\n"
"int tird_run(const tird_kernel *k, void *const *args, void *stream)\n"
"{\n"
"\t(void)stream;\n"
"\tint rc = pk_check_args(k, args);\n"
"\tif (rc)\n"
"\t\treturn rc;\n"
"\tif (k->entry(args) != 0)\n"
"\t\treturn pk_fail(TIRD_RUN_ERROR, \"%s: out of memory for its temporaries\", k->name);\n"
"\treturn TIRD_OK;\n"
"}\n"
"#endif\n\n"
"/* ---- dispatch ---- */\n\n"
"static int pk_str_eq(const char *a, const char *dflt, const char *b)\n"
"{\n\treturn !strcmp(a ? a : dflt, b);\n}\n\n"
"static long long pk_one(long long v) { return v ? v : 1; }\n\n"
"static int pk_mm_eq(const tird_matmul_shape *s, const tird_matmul_shape *k)\n"
"{\n"
"\treturn s->batch == k->batch && s->M == k->M && s->N == k->N && s->K == k->K &&\n"
"\t       pk_str_eq(s->layout, \"NN\", k->layout) && s->dtype && !strcmp(s->dtype, k->dtype) &&\n"
"\t       pk_str_eq(s->out_dtype, s->dtype, k->out_dtype);\n"
"}\n\n"
"static int pk_conv_eq(const tird_conv_shape *s, const tird_conv_shape *k, int nd,\n"
"\t\t      const char *dflt_layout)\n"
"{\n"
"\tif (s->N != k->N || s->C != k->C || (s->K != k->K && !(k->K == 0 && s->K ==\n"
"\t    s->C * pk_one(s->multiplier))) || pk_one(s->groups) != k->groups ||\n"
"\t    pk_one(s->multiplier) != k->multiplier)\n"
"\t\treturn 0;\n"
"\tfor (int d = 0; d < nd; d++)\n"
"\t\tif (s->in[d] != k->in[d] || s->kernel[d] != k->kernel[d] ||\n"
"\t\t    pk_one(s->stride[d]) != k->stride[d] || pk_one(s->dilation[d]) != k->dilation[d] ||\n"
"\t\t    s->pad[d] != k->pad[d] || s->pad[nd + d] != k->pad[nd + d] ||\n"
"\t\t    s->output_padding[d] != k->output_padding[d])\n"
"\t\t\treturn 0;\n"
"\treturn pk_str_eq(s->layout, dflt_layout, k->layout) && s->dtype &&\n"
"\t       !strcmp(s->dtype, k->dtype) && pk_str_eq(s->out_dtype, s->dtype, k->out_dtype);\n"
"}\n\n"
"int tird_matmul(const tird_matmul_shape *s, void *const *args, void *stream)\n"
"{\n"
"\tif (!s)\n"
"\t\treturn pk_fail(TIRD_BAD_ARGUMENT, \"tird_matmul: no shape\");\n"
"\tfor (int i = 0; i < PK_NKERNELS; i++)\n"
"\t\tif (pk_kernels[i].dispatch && !strcmp(pk_kernels[i].op, \"matmul\") &&\n"
"\t\t    pk_mm_eq(s, &pk_kernels[i].mm))\n"
"\t\t\treturn tird_run(&pk_kernels[i], args, stream);\n"
"\treturn pk_fail(TIRD_NOT_PACKED, \"tird_matmul: no kernel packed for batch %lld M %lld \"\n"
"\t\t       \"N %lld K %lld %s %s\", s->batch, s->M, s->N, s->K,\n"
"\t\t       s->layout ? s->layout : \"NN\", s->dtype ? s->dtype : \"(no dtype)\");\n"
"}\n\n"
"static int pk_conv(const char *op, int nd, const char *dflt_layout, const tird_conv_shape *s,\n"
"\t\t   void *const *args, void *stream)\n"
"{\n"
"\tif (!s)\n"
"\t\treturn pk_fail(TIRD_BAD_ARGUMENT, \"tird_%s: no shape\", op);\n"
"\tfor (int i = 0; i < PK_NKERNELS; i++)\n"
"\t\tif (pk_kernels[i].dispatch && !strcmp(pk_kernels[i].op, op) &&\n"
"\t\t    pk_conv_eq(s, &pk_kernels[i].cv, nd, dflt_layout))\n"
"\t\t\treturn tird_run(&pk_kernels[i], args, stream);\n"
"\tchar dims[512];\n"
"\tint o = 0;\n"
"\tconst char *names[] = { \"input\", \"kernel\", \"stride\", \"dilation\", \"pad\" };\n"
"\tconst long long *vals[] = { s->in, s->kernel, s->stride, s->dilation, s->pad };\n"
"\tfor (int v = 0; v < 5; v++) {\n"
"\t\to += snprintf(dims + o, sizeof dims - (size_t)o, \" %s\", names[v]);\n"
"\t\tfor (int d = 0; d < (v == 4 ? 2 * nd : nd); d++)\n"
"\t\t\to += snprintf(dims + o, sizeof dims - (size_t)o, \" %lld\",\n"
"\t\t\t\t      v >= 2 && v <= 3 ? pk_one(vals[v][d]) : vals[v][d]);\n"
"\t}\n"
"\treturn pk_fail(TIRD_NOT_PACKED, \"tird_%s: no kernel packed for N %lld C %lld K %lld%s \"\n"
"\t\t       \"groups %lld %s %s\", op, s->N, s->C, s->K, dims, pk_one(s->groups),\n"
"\t\t       s->layout ? s->layout : dflt_layout, s->dtype ? s->dtype : \"(no dtype)\");\n"
"}\n\n"
"int tird_conv1d(const tird_conv_shape *s, void *const *a, void *st)\n"
"{\n\treturn pk_conv(\"conv1d\", 1, \"NWC\", s, a, st);\n}\n"
"int tird_conv2d(const tird_conv_shape *s, void *const *a, void *st)\n"
"{\n\treturn pk_conv(\"conv2d\", 2, \"NHWC\", s, a, st);\n}\n"
"int tird_conv3d(const tird_conv_shape *s, void *const *a, void *st)\n"
"{\n\treturn pk_conv(\"conv3d\", 3, \"NDHWC\", s, a, st);\n}\n"
"int tird_conv2d_transpose(const tird_conv_shape *s, void *const *a, void *st)\n"
"{\n\treturn pk_conv(\"conv2d_transpose\", 2, \"NHWC\", s, a, st);\n}\n"
"int tird_depthwise_conv2d(const tird_conv_shape *s, void *const *a, void *st)\n"
"{\n\treturn pk_conv(\"depthwise_conv2d\", 2, \"NHWC\", s, a, st);\n}\n";

/* ---- files ------------------------------------------------------------------------------- */

typedef struct out {
	FILE *f;
	char path[4200];
	char *msg;
	size_t size;
	int failed;
} out;

static int open_out(out *o, const char *dir, const char *name, char *msg, size_t size)
{
	snprintf(o->path, sizeof o->path, "%s/%s", dir, name);
	o->msg = msg;
	o->size = size;
	o->failed = 0;
	if (!(o->f = fopen(o->path, "wb"))) {
		snprintf(msg, size, "cannot create %s: %s", o->path, strerror(errno));
		return -1;
	}
	return 0;
}

static void put(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (vfprintf(o->f, fmt, ap) < 0)
		o->failed = 1;
	va_end(ap);
}

static int close_out(out *o)
{
	int bad = o->failed | ferror(o->f);
	if (fclose(o->f) != 0)
		bad = 1;
	if (bad)
		snprintf(o->msg, o->size, "cannot write %s: %s", o->path, strerror(errno));
	return bad ? -1 : 0;
}

/* s as a C string literal's contents. */
static void put_cstr(out *o, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			put(o, "\\%c", c);
		else if (c < 32 || c > 126)
			put(o, "\\%03o", c);
		else
			put(o, "%c", c);
	}
}

static const char *jstr(const cJSON *o, const char *k)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(x) ? x->valuestring : "";
}

static long long jint(const cJSON *o, const char *k, long long dflt)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsNumber(x) ? (long long)x->valuedouble : dflt;
}

/* The kernel's C identifier: tird_<op>_<first 12 hex digits of its key>. */
static void kernel_name(const pack_kernel *k, char *name, size_t size)
{
	snprintf(name, size, "tird_%s_%.12s", jstr(k->best, "op"), jstr(k->best, "workload_key"));
}

/* ---- the shape a dispatch function matches ------------------------------------------- */

static const char *const spatial_keys[4][3] = {
	{ 0 }, { "W" }, { "H", "W" }, { "D", "H", "W" } };
static const char *const kernel_keys[4][3] = {
	{ 0 }, { "S" }, { "R", "S" }, { "T", "R", "S" } };

static int conv_nd(const char *op)
{
	return !strcmp(op, "conv1d") ? 1 : !strcmp(op, "conv3d") ? 3
	     : !strcmp(op, "conv2d") || !strcmp(op, "conv2d_transpose") ||
	       !strcmp(op, "depthwise_conv2d") ? 2 : 0;
}

static void put_array(out *o, const cJSON *w, const char *key, int n, long long dflt)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(w, key);
	put(o, "{ ");
	for (int i = 0; i < n; i++) {
		const cJSON *x = cJSON_IsArray(a) ? cJSON_GetArrayItem(a, i) : NULL;
		put(o, "%lld, ", cJSON_IsNumber(x) ? (long long)x->valuedouble : dflt);
	}
	put(o, "}");
}

/* ".dispatch = 1, .mm = {...}" or ".cv = {...}" for workloads without an
 * epilogue; nothing for the rest. */
static void put_shape(out *o, const cJSON *w, const char *op)
{
	const cJSON *epi = cJSON_GetObjectItemCaseSensitive(w, "epilogue");
	if (cJSON_GetArraySize(epi) > 0)
		return;
	int nd = conv_nd(op);
	if (!strcmp(op, "matmul")) {
		put(o, "\t  .dispatch = 1, .mm = { %lld, %lld, %lld, %lld, \"%s\", \"%s\", \"%s\" },\n",
		    jint(w, "batch", 0), jint(w, "M", 0), jint(w, "N", 0), jint(w, "K", 0),
		    jstr(w, "layout"), jstr(w, "dtype"), jstr(w, "out_dtype"));
		return;
	}
	if (!nd)
		return;
	put(o, "\t  .dispatch = 1, .cv = { .N = %lld, .C = %lld, .K = %lld, .in = { ",
	    jint(w, "N", 0), jint(w, "C", 0), jint(w, "K", 0));
	for (int d = 0; d < nd; d++)
		put(o, "%lld, ", jint(w, spatial_keys[nd][d], 0));
	put(o, "}, .kernel = { ");
	for (int d = 0; d < nd; d++)
		put(o, "%lld, ", jint(w, kernel_keys[nd][d], 0));
	put(o, "},\n\t\t.stride = ");
	put_array(o, w, "stride", nd, 1);
	put(o, ", .dilation = ");
	put_array(o, w, "dilation", nd, 1);
	put(o, ", .pad = ");
	put_array(o, w, "pad", 2 * nd, 0);
	put(o, ", .output_padding = ");
	put_array(o, w, "output_padding", nd, 0);
	put(o, ",\n\t\t.groups = %lld, .multiplier = %lld, .layout = \"%s\", .dtype = \"%s\", "
	    ".out_dtype = \"%s\" },\n", jint(w, "groups", 1), jint(w, "multiplier", 1),
	    jstr(w, "layout"), jstr(w, "dtype"), jstr(w, "out_dtype"));
}

/* ---- tird_pack.c ------------------------------------------------------------------------- */

static int user_args(const tir_code *c)
{
	int n = 0;
	for (int i = 0; i < c->nargs; i++)
		n += !c->args[i].is_scratch;
	return n;
}

static int write_table(const pack_write_opts *wo, const pack_kernel *ks, int n, char *msg,
		       size_t size)
{
	bool cuda = wo->target->kind == TIR_TARGET_CUDA;
	int max_args = 1, max_launches = 1;
	for (int i = 0; i < n; i++) {
		if (ks[i].code->nargs > max_args)
			max_args = ks[i].code->nargs;
		if (ks[i].code->nlaunches > max_launches)
			max_launches = ks[i].code->nlaunches;
	}
	out o;
	if (open_out(&o, wo->dir, "tird_pack.c", msg, size))
		return -1;
	put(&o, "/* tird_pack.c — generated by `tirctl pack` (tird %s) for %s: %d kernel%s.\n"
	    " * The table of the kernels, then the runtime. */\n", wo->version, wo->target->key, n,
	    n == 1 ? "" : "s");
	if (cuda)
		put(&o, "#define TIRD_PACK_CUDA 1\n");
	put(&o, "#include <stdarg.h>\n#include <stdint.h>\n#include <stdio.h>\n#include <string.h>\n");
	if (cuda)
		put(&o, "#include <pthread.h>\n#include <cuda.h>\n");
	put(&o, "#include \"tird_pack.h\"\n\n");
	put(&o, "#define PK_TARGET \"%s\"\n#define PK_NKERNELS %d\n#define PK_MAX_ARGS %d\n"
	    "#define PK_MAX_LAUNCHES %d\n#define PK_MAX_TMAPS %d\n#define PK_TMAP_RANK %d\n\n",
	    wo->target->key, n, max_args, max_launches, TIR_MAX_TMAPS, TIR_TMAP_RANK);
	put(&o, "typedef struct pk_tmap {\n\tint arg, elem_bytes, rank;\n"
	    "\tuint64_t dims[PK_TMAP_RANK], strides[PK_TMAP_RANK];\n"
	    "\tuint32_t box[PK_TMAP_RANK];\n} pk_tmap;\n\n"
	    "typedef struct pk_launch {\n\tconst char *name;\n\tunsigned grid[3], block[3], shared;\n"
	    "\tint ntmaps;\n\tpk_tmap tmaps[PK_MAX_TMAPS];\n} pk_launch;\n\n"
	    "struct tird_kernel {\n\tconst char *name, *op, *key, *record, *workload;\n"
	    "\tdouble latency_us;\n"
	    "\tint nargs, nuser;           /* every argument; the caller's (no scratch) */\n"
	    "\tconst tird_arg_info *args;\n"
	    "\tint dispatch;               /* matched by its op's dispatch function */\n"
	    "\ttird_matmul_shape mm;\n\ttird_conv_shape cv;\n"
	    "\tint (*entry)(void *const *args);         /* CPU */\n"
	    "\tconst unsigned char *cubin;              /* CUDA */\n"
	    "\tint nlaunches;\n\tconst pk_launch *launches;\n};\n\n");
	for (int i = 0; i < n; i++) {
		const tir_code *c = ks[i].code;
		char name[96];
		kernel_name(&ks[i], name, sizeof name);
		if (cuda)
			put(&o, "extern const unsigned char %s_cubin[];\n", name);
		else
			put(&o, "int %s_entry(void *const *args);\n", name);
		put(&o, "static const tird_arg_info %s_args[] = {\n", name);
		for (int a = 0; a < c->nargs; a++)
			put(&o, "\t{ \"%s\", \"%s\", %d, %lldLL, %d },\n", c->args[a].name,
			    tir_dtype_name(c->args[a].dtype), c->args[a].elem_bytes,
			    (long long)c->args[a].elems, c->args[a].is_output);
		put(&o, "};\n");
		if (cuda) {
			put(&o, "static const pk_launch %s_launches[] = {\n", name);
			for (int l = 0; l < c->nlaunches; l++) {
				const tir_launch *L = &c->launches[l];
				put(&o, "\t{ \"%s\", { %d, %d, %d }, { %d, %d, %d }, %d, %d, {\n", L->name,
				    L->grid[0] > 0 ? L->grid[0] : 1, L->grid[1] > 0 ? L->grid[1] : 1,
				    L->grid[2] > 0 ? L->grid[2] : 1, L->block[0] > 0 ? L->block[0] : 1,
				    L->block[1] > 0 ? L->block[1] : 1, L->block[2] > 0 ? L->block[2] : 1,
				    L->shared_bytes, L->ntmaps);
				for (int t = 0; t < L->ntmaps; t++) {
					const tir_tmap_info *m = &L->tmaps[t];
					put(&o, "\t\t{ %d, %d, %d, { ", m->arg, m->elem_bytes, m->rank);
					for (int d = 0; d < m->rank; d++)
						put(&o, "%lldULL, ", (long long)m->dims[d]);
					put(&o, "}, { ");
					for (int d = 0; d < m->rank; d++)
						put(&o, "%lldULL, ", (long long)m->strides[d]);
					put(&o, "}, { ");
					for (int d = 0; d < m->rank; d++)
						put(&o, "%d, ", m->box[d]);
					put(&o, "} },\n");
				}
				put(&o, "%s\t} },\n", L->ntmaps ? "" : "\t\t{ 0 },\n");
			}
			put(&o, "};\n");
		}
		put(&o, "\n");
	}
	put(&o, "static const struct tird_kernel pk_kernels[PK_NKERNELS] = {\n");
	for (int i = 0; i < n; i++) {
		const cJSON *b = ks[i].best;
		const tir_code *c = ks[i].code;
		char name[96];
		kernel_name(&ks[i], name, sizeof name);
		char *wj = cJSON_PrintUnformatted(cJSON_GetObjectItem(b, "workload"));
		put(&o, "\t{ \"%s\", \"%s\", \"%s\", \"%s\",\n\t  \"", name, jstr(b, "op"),
		    jstr(b, "workload_key"), jstr(b, "record_id"));
		put_cstr(&o, wj ? wj : "null");
		free(wj);
		const cJSON *lat = cJSON_GetObjectItem(b, "latency_us");
		put(&o, "\",\n\t  %.17g, %d, %d, %s_args,\n",
		    cJSON_IsNumber(lat) ? lat->valuedouble : 0.0, c->nargs, user_args(c), name);
		put_shape(&o, cJSON_GetObjectItem(b, "workload"), jstr(b, "op"));
		if (cuda)
			put(&o, "\t  .cubin = %s_cubin, .nlaunches = %d, .launches = %s_launches },\n",
			    name, c->nlaunches, name);
		else
			put(&o, "\t  .entry = %s_entry },\n", name);
	}
	put(&o, "};\n\n%s\n/* ---- one function per workload ---- */\n\n", rt_text);
	for (int i = 0; i < n; i++) {
		char name[96];
		kernel_name(&ks[i], name, sizeof name);
		put(&o, "int %s(void *const *args, void *stream)\n{\n"
		    "\treturn tird_run(&pk_kernels[%d], args, stream);\n}\n", name, i);
	}
	return close_out(&o);
}

/* ---- tird_pack.h ------------------------------------------------------------------------- */

/* s inside a C comment: "*\/" for every "*" "/" (a graph's tensor may be named
 * so; in JSON "\/" is "/", so the text stays the same document). */
static void put_comment(out *o, const char *s)
{
	for (; *s; s++) {
		if (s[0] == '*' && s[1] == '/')
			put(o, "*\\");
		else
			put(o, "%c", *s);
	}
}

static int write_header(const pack_write_opts *wo, const pack_kernel *ks, int n, char *msg,
			size_t size)
{
	out o;
	if (open_out(&o, wo->dir, "tird_pack.h", msg, size))
		return -1;
	put(&o, "%s", header_text);
	for (int i = 0; i < n; i++) {
		const tir_code *c = ks[i].code;
		char name[96];
		kernel_name(&ks[i], name, sizeof name);
		char *wj = cJSON_PrintUnformatted(cJSON_GetObjectItem(ks[i].best, "workload"));
		const cJSON *lat = cJSON_GetObjectItem(ks[i].best, "latency_us");
		put(&o, "\n/* ");
		put_comment(&o, wj ? wj : "");
		put(&o, ", %.3f us as tird measured it", cJSON_IsNumber(lat) ? lat->valuedouble : 0.0);
		free(wj);
		for (int a = 0, first = 1; a < c->nargs; a++) {
			if (c->args[a].is_scratch)
				continue;
			put(&o, "%s %s%s %s[%lld]", first ? "\n * args:" : ",", c->args[a].is_output
			    ? "out " : "", tir_dtype_name(c->args[a].dtype), c->args[a].name,
			    (long long)c->args[a].elems);
			first = 0;
		}
		put(&o, " */\nint %s(void *const *args, void *stream);\n", name);
	}
	put(&o, "\n#ifdef __cplusplus\n}\n#endif\n\n#endif\n");
	return close_out(&o);
}

/* ---- kernels/ ---------------------------------------------------------------------------- */

static int write_kernels(const pack_write_opts *wo, const pack_kernel *ks, int n, char *msg,
			 size_t size)
{
	char dir[4200];
	snprintf(dir, sizeof dir, "%s/kernels", wo->dir);
	if (mkdir(dir, 0777)) {
		snprintf(msg, size, "cannot create %s: %s", dir, strerror(errno));
		return -1;
	}
	bool cuda = wo->target->kind == TIR_TARGET_CUDA;
	for (int i = 0; i < n; i++) {
		char name[96], file[128];
		kernel_name(&ks[i], name, sizeof name);
		snprintf(file, sizeof file, "%s.%s", name, cuda ? "cu" : "c");
		out o;
		if (open_out(&o, dir, file, msg, size))
			return -1;
		put(&o, "%s", ks[i].code->source);
		if (close_out(&o))
			return -1;
		if (!cuda)
			continue;
		snprintf(file, sizeof file, "%s_cubin.c", name);
		if (open_out(&o, dir, file, msg, size))
			return -1;
		put(&o, "/* the cubin of %s.cu, compiled by NVRTC for %s as tird measured it */\n"
		    "const unsigned char %s_cubin[] __attribute__((aligned(16))) = {", name,
		    wo->target->key, name);
		for (size_t b = 0; b < ks[i].cubin_size; b++)
			put(&o, "%s0x%02x,", b % 16 ? "" : "\n\t", (unsigned char)ks[i].cubin[b]);
		put(&o, "\n};\n");
		if (close_out(&o))
			return -1;
	}
	return 0;
}

/* ---- Makefile, tirdpack.pc --------------------------------------------------------------- */

static int write_build(const pack_write_opts *wo, const pack_kernel *ks, int n, char *msg,
		       size_t size)
{
	bool cuda = wo->target->kind == TIR_TARGET_CUDA;
	out o;
	if (open_out(&o, wo->dir, "Makefile", msg, size))
		return -1;
	put(&o, "# Makefile of a tird kernel pack (%s): make; make install PREFIX=/usr/local\n",
	    wo->target->key);
	put(&o, "PREFIX ?= /usr/local\nCC ?= cc\n");
	if (cuda) {
		put(&o, "CUDA ?= /usr/local/cuda\n"
		    "# CFLAGS adds to the pack's flags; it never replaces them\n"
		    "TIRD_CFLAGS = -O2\n"
		    "PACK_CFLAGS = -std=c11 -fPIC -I$(CUDA)/include\n"
		    "# libcuda comes with the driver; the toolkit's stub links where none is installed\n"
		    "LDLIBS = -L$(CUDA)/lib64 -L$(CUDA)/lib64/stubs -lcuda -lpthread\n");
	} else {
		char isa[256];
		tir_cpu_isa_flags(wo->target, isa, sizeof isa);
		put(&o, "# the flags tird built its candidates with (tuner/measure/cpu.c); TIRD_ISA\n"
		    "# names the target's ISA (-march=native where the pack was written on it:\n"
		    "# building elsewhere, give the target key's -m flags); CFLAGS adds to them\n"
		    "TIRD_ISA ?= %s\n"
		    "TIRD_CFLAGS = -O3 -fno-math-errno $(TIRD_ISA)\n"
		    "PACK_CFLAGS = -fPIC -fopenmp\n"
		    "LDLIBS = -fopenmp -lm\n", isa);
	}
	put(&o, "KERNELS =");
	for (int i = 0; i < n; i++) {
		char name[96];
		kernel_name(&ks[i], name, sizeof name);
		put(&o, " \\\n\tkernels/%s%s.o", name, cuda ? "_cubin" : "");
	}
	put(&o, "\n\n# the soname's number is tird_pack.h's TIRD_PACK_ABI; libtirdpack.so links to it\n"
	    "SONAME = libtirdpack.so." PACK_ABI "\n\n"
	    "all: libtirdpack.a libtirdpack.so\n\n"
	    "libtirdpack.a: tird_pack.o $(KERNELS)\n\trm -f $@\n\tar rcs $@ $^\n\n"
	    "$(SONAME): tird_pack.o $(KERNELS)\n\t$(CC) -shared -Wl,-soname,$(SONAME) -o $@ $^ $(LDLIBS)\n\n"
	    "libtirdpack.so: $(SONAME)\n\tln -sf $(SONAME) $@\n\n"
	    "tird_pack.o: tird_pack.c tird_pack.h\n\t$(CC) $(TIRD_CFLAGS) $(CFLAGS) $(PACK_CFLAGS) -c -o $@ $<\n\n");
	if (cuda)
		put(&o, "kernels/%%_cubin.o: kernels/%%_cubin.c\n"
		    "\t$(CC) $(TIRD_CFLAGS) $(CFLAGS) $(PACK_CFLAGS) -c -o $@ $<\n\n");
	else
		put(&o, "# each kernel's entry, tir_entry in its source, gets the kernel's name\n"
		    "kernels/%%.o: kernels/%%.c\n"
		    "\t$(CC) $(TIRD_CFLAGS) $(CFLAGS) $(PACK_CFLAGS) -Dtir_entry=$(notdir $*)_entry -c -o $@ $<\n\n");
	put(&o, "install: all\n"
	    "\tinstall -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig\n"
	    "\tinstall -m 644 tird_pack.h $(DESTDIR)$(PREFIX)/include/\n"
	    "\tinstall -m 644 libtirdpack.a $(SONAME) $(DESTDIR)$(PREFIX)/lib/\n"
	    "\tln -sf $(SONAME) $(DESTDIR)$(PREFIX)/lib/libtirdpack.so\n"
	    "\tsed 's|@PREFIX@|$(PREFIX)|' tirdpack.pc > $(DESTDIR)$(PREFIX)/lib/pkgconfig/tirdpack.pc\n\n"
	    "clean:\n\trm -f tird_pack.o $(KERNELS) libtirdpack.a libtirdpack.so $(SONAME)\n\n"
	    ".PHONY: all install clean\n");
	if (close_out(&o))
		return -1;
	if (open_out(&o, wo->dir, "tirdpack.pc", msg, size))
		return -1;
	put(&o, "prefix=@PREFIX@\nlibdir=${prefix}/lib\nincludedir=${prefix}/include\n\n"
	    "Name: tirdpack\nDescription: tird's tuned kernels for %s\nVersion: %s\n"
	    "Cflags: -I${includedir}\nLibs: -L${libdir} -ltirdpack\nLibs.private: %s\n",
	    wo->target->key, wo->version, cuda ? "-lcuda -lpthread" : "-fopenmp -lm");
	return close_out(&o);
}

/* ---- manifest.json ----------------------------------------------------------------------- */

static int write_manifest(const pack_write_opts *wo, const pack_kernel *ks, int n, char *msg,
			  size_t size)
{
	bool cuda = wo->target->kind == TIR_TARGET_CUDA;
	cJSON *m = cJSON_CreateObject();
	cJSON_AddStringToObject(m, "tird_version", wo->version);
	cJSON_AddStringToObject(m, "target", wo->target->key);
	cJSON_AddNumberToObject(m, "created", (double)time(NULL));
	cJSON *arr = cJSON_AddArrayToObject(m, "kernels");
	for (int i = 0; i < n; i++) {
		const cJSON *b = ks[i].best;
		const tir_code *c = ks[i].code;
		char name[96], file[160];
		kernel_name(&ks[i], name, sizeof name);
		cJSON *k = cJSON_CreateObject();
		cJSON_AddStringToObject(k, "function", name);
		cJSON_AddStringToObject(k, "op", jstr(b, "op"));
		cJSON_AddStringToObject(k, "workload_key", jstr(b, "workload_key"));
		cJSON_AddItemToObject(k, "workload",
				      cJSON_Duplicate(cJSON_GetObjectItem(b, "workload"), 1));
		cJSON_AddStringToObject(k, "record_id", jstr(b, "record_id"));
		const cJSON *lat = cJSON_GetObjectItem(b, "latency_us");
		cJSON_AddNumberToObject(k, "latency_us", cJSON_IsNumber(lat) ? lat->valuedouble : 0);
		snprintf(file, sizeof file, "kernels/%s.%s", name, cuda ? "cu" : "c");
		cJSON_AddStringToObject(k, "source", file);
		cJSON *args = cJSON_AddArrayToObject(k, "args");
		for (int a = 0; a < c->nargs; a++) {
			cJSON *x = cJSON_CreateObject();
			cJSON_AddStringToObject(x, "name", c->args[a].name);
			cJSON_AddStringToObject(x, "dtype", tir_dtype_name(c->args[a].dtype));
			cJSON_AddNumberToObject(x, "elem_bytes", c->args[a].elem_bytes);
			cJSON_AddNumberToObject(x, "elems", (double)c->args[a].elems);
			cJSON_AddStringToObject(x, "role", c->args[a].is_scratch ? "scratch"
						: c->args[a].is_output ? "output" : "input");
			cJSON_AddItemToArray(args, x);
		}
		if (cuda) {
			cJSON *ls = cJSON_AddArrayToObject(k, "launches");
			for (int l = 0; l < c->nlaunches; l++) {
				const tir_launch *L = &c->launches[l];
				cJSON *x = cJSON_CreateObject();
				cJSON_AddStringToObject(x, "name", L->name);
				cJSON_AddItemToObject(x, "grid", cJSON_CreateIntArray(L->grid, 3));
				cJSON_AddItemToObject(x, "block", cJSON_CreateIntArray(L->block, 3));
				cJSON_AddNumberToObject(x, "shared_bytes", L->shared_bytes);
				cJSON_AddNumberToObject(x, "tensor_maps", L->ntmaps);
				cJSON_AddItemToArray(ls, x);
			}
		}
		cJSON_AddItemToArray(arr, k);
	}
	char *text = cJSON_Print(m);
	cJSON_Delete(m);
	out o;
	int rc = -1;
	if (text && open_out(&o, wo->dir, "manifest.json", msg, size) == 0) {
		put(&o, "%s\n", text);
		rc = close_out(&o);
	}
	free(text);
	return rc;
}

int pack_write(const pack_write_opts *o, const pack_kernel *k, int n, char *msg, size_t size)
{
	if (mkdir(o->dir, 0777)) {
		snprintf(msg, size, "cannot create %s: %s", o->dir, strerror(errno));
		return -1;
	}
	if (write_kernels(o, k, n, msg, size) || write_header(o, k, n, msg, size) ||
	    write_table(o, k, n, msg, size) || write_build(o, k, n, msg, size) ||
	    write_manifest(o, k, n, msg, size))
		return -1;
	return 0;
}
