/*
 * cuda_run.c — the CUDA builder and runner (tir_runner_cuda), and the
 * device's properties.
 *
 * Build is tir_nvrtc_compile for the target's sm_XY (a cubin); running
 * several builds at once is the caller's business.
 *
 * Run: the driver API is loaded with dlopen("libcuda.so.1") — never linked,
 * so one binary runs on machines with and without a GPU — and ONLY in the
 * child process of runner.c's guard.  CUDA is not fork-safe: a child forked
 * from a process that has called cuInit cannot use the GPU, so nothing here
 * touches the driver in the caller (tir_cuda_device_props asks in a child
 * too).  In the child: cuInit, the device's primary context, the cubin, one
 * function per launch (opting in to more than 48 KiB of dynamic shared
 * memory where a launch needs it), a device buffer per argument (inputs from
 * tir_measure_fill, the output all-ones, scratch zeroed), then the launches
 * in order, each kernel taking every argument's device pointer in
 * tir_code.args order.  The output is copied back, then timed with events on
 * the default stream: repeats of whole launch sequences, the L2 flushed
 * before each by a memset of twice its size.
 *
 * A faulting kernel (illegal address, misaligned access, trap) is CRASH;
 * other driver errors (no binary for this GPU, too many resources requested)
 * are RUN_ERROR; a kernel that never ends is killed by the parent's watchdog
 * (TIMEOUT).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../ir/ir.h"
#include "../codegen/codegen.h"
#include "measure.h"

#ifdef HAVE_CUDA
#include <cuda.h>

/* ---- the driver API, loaded at run time ------------------------------------------ */

typedef struct cu_api {
	void *lib;
	CUresult (*Init)(unsigned int);
	CUresult (*DeviceGet)(CUdevice *, int);
	CUresult (*DeviceGetCount)(int *);
	CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
	CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*CtxSetCurrent)(CUcontext);
	CUresult (*CtxSynchronize)(void);
	CUresult (*ModuleLoadData)(CUmodule *, const void *);
	CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
	CUresult (*FuncSetAttribute)(CUfunction, CUfunction_attribute, int);
	CUresult (*MemAlloc)(CUdeviceptr *, size_t);
	CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
	CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
	CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
	CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
				 unsigned, unsigned, unsigned, CUstream, void **, void **);
	CUresult (*EventCreate)(CUevent *, unsigned int);
	CUresult (*EventRecord)(CUevent, CUstream);
	CUresult (*EventSynchronize)(CUevent);
	CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
	CUresult (*GetErrorName)(CUresult, const char **);
	CUresult (*GetErrorString)(CUresult, const char **);
} cu_api;

/* Every entry point with the exported names to try, newest first (cuda.h
 * maps the API names to these versioned symbols). */
#define CU_SYM(field, ...) { offsetof(cu_api, field), { __VA_ARGS__, NULL } }
static const struct { size_t off; const char *names[3]; } cu_syms[] = {
	CU_SYM(Init, "cuInit"),
	CU_SYM(DeviceGet, "cuDeviceGet"),
	CU_SYM(DeviceGetCount, "cuDeviceGetCount"),
	CU_SYM(DeviceGetAttribute, "cuDeviceGetAttribute"),
	CU_SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
	CU_SYM(CtxSetCurrent, "cuCtxSetCurrent"),
	CU_SYM(CtxSynchronize, "cuCtxSynchronize"),
	CU_SYM(ModuleLoadData, "cuModuleLoadData"),
	CU_SYM(ModuleGetFunction, "cuModuleGetFunction"),
	CU_SYM(FuncSetAttribute, "cuFuncSetAttribute"),
	CU_SYM(MemAlloc, "cuMemAlloc_v2"),
	CU_SYM(MemcpyHtoD, "cuMemcpyHtoD_v2"),
	CU_SYM(MemcpyDtoH, "cuMemcpyDtoH_v2"),
	CU_SYM(MemsetD8, "cuMemsetD8_v2"),
	CU_SYM(LaunchKernel, "cuLaunchKernel"),
	CU_SYM(EventCreate, "cuEventCreate"),
	CU_SYM(EventRecord, "cuEventRecord"),
	CU_SYM(EventSynchronize, "cuEventSynchronize"),
	CU_SYM(EventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime"),
	CU_SYM(GetErrorName, "cuGetErrorName"),
	CU_SYM(GetErrorString, "cuGetErrorString"),
};

/* Loads the driver; 0, or -1 with a message in msg. */
static int cu_load(cu_api *cu, char *msg, size_t size)
{
	memset(cu, 0, sizeof *cu);
	cu->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!cu->lib) {
		snprintf(msg, size, "cuda: no GPU driver could be loaded (%s)", dlerror());
		return -1;
	}
	for (size_t i = 0; i < sizeof cu_syms / sizeof cu_syms[0]; i++) {
		void *p = NULL;
		for (int k = 0; !p && cu_syms[i].names[k]; k++)
			p = dlsym(cu->lib, cu_syms[i].names[k]);
		if (!p) {
			snprintf(msg, size, "cuda: the GPU driver lacks %s", cu_syms[i].names[0]);
			return -1;
		}
		memcpy((char *)cu + cu_syms[i].off, &p, sizeof p);
	}
	return 0;
}

/* Errors after which the context is dead: the kernel faulted. */
static bool is_fault(CUresult r)
{
	switch (r) {
	case CUDA_ERROR_ILLEGAL_ADDRESS:
	case CUDA_ERROR_HARDWARE_STACK_ERROR:
	case CUDA_ERROR_ILLEGAL_INSTRUCTION:
	case CUDA_ERROR_MISALIGNED_ADDRESS:
	case CUDA_ERROR_INVALID_ADDRESS_SPACE:
	case CUDA_ERROR_INVALID_PC:
	case CUDA_ERROR_LAUNCH_FAILED:
	case CUDA_ERROR_ASSERT:
		return true;
	default:
		return false;
	}
}

/* Reports a failed driver call: "cuda: what: NAME (description)". */
static int cu_fail(const cu_api *cu, tir_child_report *rep, CUresult r,
		   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int cu_fail(const cu_api *cu, tir_child_report *rep, CUresult r,
		   const char *fmt, ...)
{
	const char *name = NULL, *desc = NULL;
	if (cu->GetErrorName)
		cu->GetErrorName(r, &name);
	if (cu->GetErrorString)
		cu->GetErrorString(r, &desc);
	char what[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	char num[32];
	snprintf(num, sizeof num, "error %d", (int)r);
	snprintf(rep->msg, sizeof rep->msg, "cuda: %s: %s%s%s%s", what,
		 name ? name : num, desc ? " (" : "", desc ? desc : "", desc ? ")" : "");
	rep->status = r == CUDA_ERROR_LAUNCH_TIMEOUT ? TIR_MEASURE_TIMEOUT
		    : is_fault(r) ? TIR_MEASURE_CRASH : TIR_MEASURE_RUN_ERROR;
	return -1;
}

#define CU_TRY(call, ...) do { CUresult r_ = (call); \
	if (r_ != CUDA_SUCCESS) return cu_fail(cu, rep, r_, __VA_ARGS__); } while (0)

/* ---- run (in the child) -------------------------------------------------------------------- */

typedef struct cuda_ctx {
	const tir_artifact *a;
	const tir_code *c;
	const tir_measure_opts *o;
	cu_api cu;
	CUfunction *fn;
	CUdeviceptr *dptr;
	void **params;
	CUevent start, stop;
	CUdeviceptr flush;
	size_t flush_bytes;
	int flush_round;
} cuda_ctx;

static int dim(int d) { return d > 0 ? d : 1; }

/* Launches every kernel once, in order; no synchronisation. */
static int launch_all(cuda_ctx *x, tir_child_report *rep)
{
	const cu_api *cu = &x->cu;
	for (int i = 0; i < x->c->nlaunches; i++) {
		const tir_launch *l = &x->c->launches[i];
		CU_TRY(cu->LaunchKernel(x->fn[i], (unsigned)dim(l->grid[0]),
					(unsigned)dim(l->grid[1]), (unsigned)dim(l->grid[2]),
					(unsigned)dim(l->block[0]), (unsigned)dim(l->block[1]),
					(unsigned)dim(l->block[2]), (unsigned)l->shared_bytes,
					NULL, x->params, NULL),
		       "launching %s (grid %dx%dx%d, block %dx%dx%d, %d B shared)",
		       l->name, l->grid[0], l->grid[1], l->grid[2], l->block[0],
		       l->block[1], l->block[2], l->shared_bytes);
	}
	return 0;
}

static int cuda_flush(void *ctx, tir_child_report *rep)
{
	cuda_ctx *x = ctx;
	const cu_api *cu = &x->cu;
	CU_TRY(cu->MemsetD8(x->flush, (unsigned char)(++x->flush_round & 0xff),
			    x->flush_bytes), "flushing the L2");
	return 0;
}

static int cuda_timed(void *ctx, long n, double *us, tir_child_report *rep)
{
	cuda_ctx *x = ctx;
	const cu_api *cu = &x->cu;
	CU_TRY(cu->EventRecord(x->start, NULL), "cuEventRecord");
	for (long i = 0; i < n; i++)
		if (launch_all(x, rep))
			return -1;
	CU_TRY(cu->EventRecord(x->stop, NULL), "cuEventRecord");
	CU_TRY(cu->EventSynchronize(x->stop), "running the kernels");
	float ms = 0;
	CU_TRY(cu->EventElapsedTime(&ms, x->start, x->stop), "cuEventElapsedTime");
	*us = (double)ms * 1e3;
	return 0;
}

static int cuda_child_run(cuda_ctx *x, tir_child_report *rep)
{
	const tir_code *c = x->c;
	cu_api *cu = &x->cu;
	if (cu_load(cu, rep->msg, sizeof rep->msg)) {
		rep->status = TIR_MEASURE_RUN_ERROR;
		return -1;
	}
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CU_TRY(cu->Init(0), "cuInit (no usable GPU?)");
	CU_TRY(cu->DeviceGet(&dev, x->o->device), "device %d", x->o->device);
	int major = 0, minor = 0, l2 = 0;
	CU_TRY(cu->DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
				      dev), "cuDeviceGetAttribute");
	CU_TRY(cu->DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
				      dev), "cuDeviceGetAttribute");
	CU_TRY(cu->DeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev),
	       "cuDeviceGetAttribute");
	CU_TRY(cu->DevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
	CU_TRY(cu->CtxSetCurrent(ctx), "cuCtxSetCurrent");
	CU_TRY(cu->ModuleLoadData(&mod, x->a->image),
	       "loading the cubin for sm_%d on a device of sm_%d", x->a->sm,
	       major * 10 + minor);

	x->fn = calloc((size_t)c->nlaunches + 1, sizeof *x->fn);
	x->dptr = calloc((size_t)c->nargs + 1, sizeof *x->dptr);
	x->params = calloc((size_t)c->nargs + 1, sizeof *x->params);
	if (!x->fn || !x->dptr || !x->params) {
		snprintf(rep->msg, sizeof rep->msg, "out of memory");
		rep->status = TIR_MEASURE_RUN_ERROR;
		return -1;
	}
	for (int i = 0; i < c->nlaunches; i++) {
		const tir_launch *l = &c->launches[i];
		CU_TRY(cu->ModuleGetFunction(&x->fn[i], mod, l->name),
		       "no kernel \"%s\" in the cubin", l->name);
		if (l->shared_bytes > 48 * 1024)
			CU_TRY(cu->FuncSetAttribute(x->fn[i],
				CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
				l->shared_bytes),
			       "kernel %s: opting in to %d bytes of shared memory",
			       l->name, l->shared_bytes);
	}

	for (int i = 0; i < c->nargs; i++) {
		const tir_arg_info *a = &c->args[i];
		size_t bytes = (size_t)a->elems * (size_t)a->elem_bytes;
		CU_TRY(cu->MemAlloc(&x->dptr[i], bytes ? bytes : 1),
		       "allocating %zu bytes for \"%s\"", bytes, a->name);
		x->params[i] = &x->dptr[i];
		if (a->is_scratch) {
			CU_TRY(cu->MemsetD8(x->dptr[i], 0, bytes), "clearing \"%s\"", a->name);
			continue;
		}
		void *host = malloc(bytes ? bytes : 1);
		if (!host) {
			snprintf(rep->msg, sizeof rep->msg, "out of memory for \"%s\"", a->name);
			rep->status = TIR_MEASURE_RUN_ERROR;
			return -1;
		}
		tir_measure_fill(c, i, x->o->seed, host);
		CUresult r = cu->MemcpyHtoD(x->dptr[i], host, bytes);
		free(host);
		if (r != CUDA_SUCCESS)
			return cu_fail(cu, rep, r, "copying \"%s\" to the device", a->name);
	}

	/* One run, for the output. */
	if (launch_all(x, rep))
		return -1;
	CU_TRY(cu->CtxSynchronize(), "running the kernels");
	int o = tir_code_output(c);
	if (o >= 0) {
		size_t bytes = (size_t)c->args[o].elems * (size_t)c->args[o].elem_bytes;
		if (bytes <= rep->out_bytes) {
			CU_TRY(cu->MemcpyDtoH(rep->out, x->dptr[o], bytes),
			       "copying the output back");
			rep->output_ready = 1;
		}
	}
	if (x->o->no_timing)
		return 0;

	/* Timing. */
	CU_TRY(cu->EventCreate(&x->start, CU_EVENT_DEFAULT), "cuEventCreate");
	CU_TRY(cu->EventCreate(&x->stop, CU_EVENT_DEFAULT), "cuEventCreate");
	x->flush_bytes = l2 > 0 ? (size_t)l2 * 2 : (size_t)256 << 20;
	CU_TRY(cu->MemAlloc(&x->flush, x->flush_bytes), "allocating the L2 flush buffer");
	if (tir_time_repeats(x->o, x, cuda_flush, cuda_timed, rep))
		return -1;
	return 0;
}

static void cuda_child(void *ctx, tir_child_report *rep)
{
	cuda_ctx *x = ctx;
	if (cuda_child_run(x, rep) == 0) {
		rep->status = TIR_MEASURE_OK;
		rep->msg[0] = '\0';
	}
	/* The process ends here: the driver frees the context with it. */
}

static int cuda_run(const tir_artifact *a, const tir_code *c, const tir_measure_opts *opts,
		    tir_measure_result *r)
{
	tir_measure_opts o = tir_measure_opts_default(opts);
	free(r->output);
	memset(r, 0, sizeof *r);
	r->max_rel_error = -1;
	if (!a || !a->image) {
		r->status = TIR_MEASURE_RUN_ERROR;
		snprintf(r->msg, sizeof r->msg, "cuda: nothing built");
		return -1;
	}
	cuda_ctx x = { .a = a, .c = c, .o = &o };
	return tir_child_measure(c, o.timeout_s, cuda_child, &x, r);
}

/* ---- device properties (in a child) ----------------------------------------------------------- */

typedef struct cuda_props {
	int v[7];
} cuda_props;

typedef struct props_ctx {
	int ordinal;
} props_ctx;

static void props_child(void *ctx, tir_child_report *rep)
{
	props_ctx *x = ctx;
	cu_api api, *cu = &api;
	if (cu_load(cu, rep->msg, sizeof rep->msg)) {
		rep->status = TIR_MEASURE_RUN_ERROR;
		return;
	}
	static const CUdevice_attribute attrs[7] = {
		CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
		CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
		CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
		CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
		CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
		CU_DEVICE_ATTRIBUTE_WARP_SIZE,
		CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE,
	};
	cuda_props p;
	CUdevice dev;
	CUresult r;
	if ((r = cu->Init(0)) != CUDA_SUCCESS) {
		cu_fail(cu, rep, r, "cuInit (no usable GPU?)");
		return;
	}
	if ((r = cu->DeviceGet(&dev, x->ordinal)) != CUDA_SUCCESS) {
		cu_fail(cu, rep, r, "no GPU device %d", x->ordinal);
		return;
	}
	for (int i = 0; i < 7; i++)
		if ((r = cu->DeviceGetAttribute(&p.v[i], attrs[i], dev)) != CUDA_SUCCESS) {
			cu_fail(cu, rep, r, "cuDeviceGetAttribute(%d)", (int)attrs[i]);
			return;
		}
	memcpy(rep->out, &p, sizeof p);
	rep->output_ready = 1;
	rep->status = TIR_MEASURE_OK;
}

int tir_cuda_device_props(int ordinal, tir_target *t, tir_error *err)
{
	tir_child_report *rep = tir_child_report_new(sizeof(cuda_props));
	if (!rep)
		return tir_fail(err, "cuda: cannot map memory for the device query");
	props_ctx x = { ordinal };
	tir_measure_result r = { 0 };
	int rc = tir_child_run(30, props_child, &x, rep, &r);
	if (rc || !rep->output_ready) {
		tir_child_report_free(rep);
		return tir_fail(err, "%s", r.msg[0] ? r.msg : "cuda: the device query failed");
	}
	cuda_props p;
	memcpy(&p, rep->out, sizeof p);
	tir_child_report_free(rep);
	memset(t, 0, sizeof *t);
	t->kind = TIR_TARGET_CUDA;
	t->sm = p.v[0] * 10 + p.v[1];
	snprintf(t->key, sizeof t->key, "cuda:sm_%d", t->sm);
	t->sm_count = p.v[2];
	t->max_threads_per_block = p.v[3];
	t->max_shared_per_block = p.v[4];
	t->warp_size = p.v[5];
	t->l2_bytes = p.v[6];
	return 0;
}

#else /* !HAVE_CUDA */

static int cuda_run(const tir_artifact *a, const tir_code *c, const tir_measure_opts *opts,
		    tir_measure_result *r)
{
	free(r->output);
	memset(r, 0, sizeof *r);
	r->max_rel_error = -1;
	r->status = TIR_MEASURE_RUN_ERROR;
	snprintf(r->msg, sizeof r->msg, "cuda: libtir was built without CUDA");
	return -1;
}

int tir_cuda_device_props(int ordinal, tir_target *t, tir_error *err)
{
	return tir_fail(err, "cuda: no GPU driver could be loaded (libtir was built "
			"without CUDA support)");
}

#endif

/* ---- build ----------------------------------------------------------------------------------- */

static tir_artifact *cuda_build(const tir_code *c, const tir_target *t, tir_error *err)
{
	if (t->kind != TIR_TARGET_CUDA) {
		tir_fail(err, "cuda build: target %s is not a GPU", t->key);
		return NULL;
	}
	char *image;
	size_t size;
	if (tir_nvrtc_compile(c->source, t->sm, &image, &size, err))
		return NULL;
	tir_artifact *a = xcalloc(1, sizeof *a);
	a->runner = &tir_runner_cuda;
	a->image = image;
	a->image_size = size;
	a->sm = t->sm;
	return a;
}

static void cuda_free(tir_artifact *a)
{
	if (!a)
		return;
	free(a->image);
	free(a);
}

const tir_runner tir_runner_cuda = {
	.name = "cuda",
	.build = cuda_build,
	.run = cuda_run,
	.free = cuda_free,
};
