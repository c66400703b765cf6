/*
 * cuda_run.c — the CUDA builder and runner (tir_runner_cuda), and the
 * device's properties.
 *
 * Build is tir_nvrtc_compile for the target's sm_XY (a cubin); running
 * several builds at once is the caller's business.
 *
 * Run: the driver API is loaded with dlopen("libcuda.so.1") — never linked,
 * so one binary runs on machines with and without a GPU — and ONLY in the
 * child process of guard.c's guard.  CUDA is not fork-safe: a child forked
 * from a process that has called cuInit cannot use the GPU, so nothing here
 * touches the driver in the caller (tir_cuda_device_props asks in a child
 * too).  In the child: cuInit, the device's primary context, the cubin, one
 * function per launch (opting in to more than 48 KiB of dynamic shared
 * memory where a launch needs it), a device buffer per argument (inputs from
 * tir_measure_fill, the output all-ones, scratch zeroed), then the launches
 * in order, each kernel taking every argument's device pointer in
 * tir_code.args order.  The output is copied back, then timed with events:
 * repeats of whole launch sequences captured as one CUDA graph (at most
 * GRAPH_MAX_CALLS sequences, replayed as often as the repeat needs: device
 * time per call, as the peer's figures in bench/ are taken), on a blocking
 * stream of its own, the L2 flushed before each repeat by a memset of twice
 * its size.
 *
 * A faulting kernel (illegal address, misaligned access, trap) is CRASH;
 * other driver errors (no binary for this GPU, too many resources requested)
 * are RUN_ERROR; a kernel that never ends is killed by the parent's watchdog
 * (TIMEOUT).
 *
 * The stream (stream_start / put / finish), the tuner's path, and
 * run_batch (the same, every candidate put at once): one child
 * (tir_child_stream) measures the candidates one after another as they are
 * put, paying once for what run() pays per candidate — cuInit and the
 * context, the device buffers of the inputs and the output (the parent
 * fills the inputs once before forking; candidates of one workload share
 * them, tir_code_same_args checks it, and one that does not runs alone
 * with run() at finish), the events and the L2-flush buffer.  The child is forked
 * before the candidates are built, so put copies each cubin and its code's
 * tables into a MAP_SHARED area mapped at start (one that does not fit
 * runs alone too).  Per
 * candidate: cuModuleLoadData, its kernels, scratch buffers of its own,
 * the output set to all-ones, one run, the output compared with the
 * reference in the child (the parent computed it before forking), timing
 * only when it matched (a candidate whose first timed call is over 10x the
 * best this child measured is reported from that call: opts.slow_us),
 * cuModuleUnload.  Sharing buffers gives up some of
 * the isolation a child per candidate had, so: every buffer sits between
 * guard zones that are checked after the run (a write past them is CRASH);
 * a wrong result is re-run once on inputs read back and restored, in case
 * an earlier candidate wrote into them unnoticed; and after a fault, a
 * driver-caught hang or an error that a synchronisation still reports (the
 * context is dead: CUDA's errors are sticky) the candidate ends its child
 * and the guard continues in a fresh one.  Errors that leave the context
 * usable (too much shared memory, too many resources) are RUN_ERROR and the
 * child goes on.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
	CUresult (*ModuleUnload)(CUmodule);
	CUresult (*FuncSetAttribute)(CUfunction, CUfunction_attribute, int);
	CUresult (*MemAlloc)(CUdeviceptr *, size_t);
	CUresult (*MemFree)(CUdeviceptr);
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
	CUresult (*StreamCreate)(CUstream *, unsigned int);
	CUresult (*StreamBeginCapture)(CUstream, CUstreamCaptureMode);
	CUresult (*StreamEndCapture)(CUstream, CUgraph *);
	CUresult (*GraphInstantiate)(CUgraphExec *, CUgraph, unsigned long long);
	CUresult (*GraphLaunch)(CUgraphExec, CUstream);
	CUresult (*GraphExecDestroy)(CUgraphExec);
	CUresult (*GraphDestroy)(CUgraph);
	CUresult (*TensorMapEncodeTiled)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
					 const cuuint64_t *, const cuuint64_t *,
					 const cuuint32_t *, const cuuint32_t *,
					 CUtensorMapInterleave, CUtensorMapSwizzle,
					 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
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
	CU_SYM(ModuleUnload, "cuModuleUnload"),
	CU_SYM(FuncSetAttribute, "cuFuncSetAttribute"),
	CU_SYM(MemAlloc, "cuMemAlloc_v2"),
	CU_SYM(MemFree, "cuMemFree_v2"),
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
	CU_SYM(StreamCreate, "cuStreamCreate"),
	CU_SYM(StreamBeginCapture, "cuStreamBeginCapture_v2", "cuStreamBeginCapture"),
	CU_SYM(StreamEndCapture, "cuStreamEndCapture"),
	CU_SYM(GraphInstantiate, "cuGraphInstantiateWithFlags"),
	CU_SYM(GraphLaunch, "cuGraphLaunch"),
	CU_SYM(GraphExecDestroy, "cuGraphExecDestroy"),
	CU_SYM(GraphDestroy, "cuGraphDestroy"),
	CU_SYM(TensorMapEncodeTiled, "cuTensorMapEncodeTiled"),
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
	/* per launch, what it takes: params, or params and its tensor maps
	 * (launch_params) */
	void ***lparams;
	void **tparams;
	CUtensorMap *tmaps;
	CUevent start, stop;
	CUdeviceptr flush;
	size_t flush_bytes;
	int flush_round;
	/* the stream every launch goes to: blocking, so that the synchronous
	 * copies and memsets of the legacy stream order with it */
	CUstream stream;
	/* the timed calls as one CUDA graph of graph_calls launch sequences
	 * (0: none yet), as the peer's figures are taken */
	CUgraph graph;
	CUgraphExec exec;
	long graph_calls;
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
					x->stream, x->lparams ? x->lparams[i] : x->params, NULL),
		       "launching %s (grid %dx%dx%d, block %dx%dx%d, %d B shared)",
		       l->name, l->grid[0], l->grid[1], l->grid[2], l->block[0],
		       l->block[1], l->block[2], l->shared_bytes);
	}
	return 0;
}

static int out_of_memory(tir_child_report *rep, const char *what);

/* x->lparams: for each launch, the device pointers of the arguments and
 * then the tensor maps it takes (tir_launch.tmaps), encoded for those
 * pointers: a dense view of the argument, boxes of the given extents,
 * 128-byte swizzle, elements moved as unsigned integers of their size. */
static int launch_params(cuda_ctx *x, tir_child_report *rep)
{
	const cu_api *cu = &x->cu;
	const tir_code *c = x->c;
	int nt = 0;
	for (int i = 0; i < c->nlaunches; i++)
		nt += c->launches[i].ntmaps;
	x->lparams = calloc((size_t)c->nlaunches + 1, sizeof *x->lparams);
	if (!x->lparams)
		return out_of_memory(rep, "the launch parameters");
	if (nt == 0) {
		for (int i = 0; i < c->nlaunches; i++)
			x->lparams[i] = x->params;
		return 0;
	}
	const size_t per = (size_t)c->nargs + TIR_MAX_TMAPS;
	x->tparams = calloc(per * (size_t)c->nlaunches + 1, sizeof *x->tparams);
	x->tmaps = aligned_alloc(64, (size_t)nt * sizeof *x->tmaps);
	if (!x->tparams || !x->tmaps)
		return out_of_memory(rep, "the tensor maps");
	for (int i = 0, k = 0; i < c->nlaunches; i++) {
		const tir_launch *l = &c->launches[i];
		void **p = x->tparams + per * (size_t)i;
		memcpy(p, x->params, (size_t)c->nargs * sizeof *p);
		for (int j = 0; j < l->ntmaps && j < TIR_MAX_TMAPS; j++, k++) {
			const tir_tmap_info *m = &l->tmaps[j];
			static const CUtensorMapDataType types[9] = {
				[1] = CU_TENSOR_MAP_DATA_TYPE_UINT8, [2] = CU_TENSOR_MAP_DATA_TYPE_UINT16,
				[4] = CU_TENSOR_MAP_DATA_TYPE_UINT32, [8] = CU_TENSOR_MAP_DATA_TYPE_INT64,
			};
			if (m->arg < 0 || m->arg >= c->nargs || m->rank < 1 ||
			    m->rank > TIR_TMAP_RANK || m->elem_bytes < 1 || m->elem_bytes > 8 ||
			    (m->elem_bytes & (m->elem_bytes - 1))) {
				snprintf(rep->msg, sizeof rep->msg, "cuda: kernel %s: tensor map %d is "
					 "malformed (argument %d, rank %d, %d-byte elements)", l->name,
					 j, m->arg, m->rank, m->elem_bytes);
				rep->status = TIR_MEASURE_RUN_ERROR;
				return -1;
			}
			cuuint64_t dims[TIR_TMAP_RANK], strides[TIR_TMAP_RANK];
			cuuint32_t box[TIR_TMAP_RANK], one[TIR_TMAP_RANK];
			for (int d = 0; d < m->rank; d++) {
				dims[d] = (cuuint64_t)m->dims[d];
				strides[d] = d + 1 < m->rank ? (cuuint64_t)m->strides[d + 1] : 0;
				box[d] = (cuuint32_t)m->box[d];
				one[d] = 1;
			}
			CU_TRY(cu->TensorMapEncodeTiled(&x->tmaps[k], types[m->elem_bytes],
							(cuuint32_t)m->rank,
							(void *)(uintptr_t)x->dptr[m->arg], dims,
							strides, box, one,
							CU_TENSOR_MAP_INTERLEAVE_NONE,
							CU_TENSOR_MAP_SWIZZLE_128B,
							CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
							CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
			       "kernel %s: encoding tensor map %d (of \"%s\")", l->name, j,
			       c->args[m->arg].name);
			p[c->nargs + j] = &x->tmaps[k];
		}
		x->lparams[i] = p;
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

/* At most this many launch sequences in one graph; more calls replay it. */
#define GRAPH_MAX_CALLS 256

static void graph_release(cuda_ctx *x)
{
	const cu_api *cu = &x->cu;
	if (x->exec)
		cu->GraphExecDestroy(x->exec);
	if (x->graph)
		cu->GraphDestroy(x->graph);
	x->exec = NULL;
	x->graph = NULL;
	x->graph_calls = 0;
}

/* x->exec: `calls` launch sequences captured from x->stream as one graph. */
static int graph_of(cuda_ctx *x, long calls, tir_child_report *rep)
{
	const cu_api *cu = &x->cu;
	if (x->exec && x->graph_calls == calls)
		return 0;
	graph_release(x);
	CU_TRY(cu->StreamBeginCapture(x->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
	       "capturing the launches");
	int rc = 0;
	for (long i = 0; i < calls && rc == 0; i++)
		rc = launch_all(x, rep);
	CUgraph g = NULL;
	CU_TRY(cu->StreamEndCapture(x->stream, &g), "capturing the launches");
	if (rc) {
		cu->GraphDestroy(g);
		return -1;
	}
	x->graph = g;
	CU_TRY(cu->GraphInstantiate(&x->exec, g, 0), "instantiating the graph of %ld calls",
	       calls);
	x->graph_calls = calls;
	return 0;
}

/* n calls timed with events: replays of a CUDA graph of up to
 * GRAPH_MAX_CALLS launch sequences (the device time of the calls, without
 * the host's launch gaps between them), the time scaled to n calls. */
static int cuda_timed(void *ctx, long n, double *us, tir_child_report *rep)
{
	cuda_ctx *x = ctx;
	const cu_api *cu = &x->cu;
	long calls = n < GRAPH_MAX_CALLS ? n : GRAPH_MAX_CALLS;
	long replays = (n + calls - 1) / calls;
	if (graph_of(x, calls, rep))
		return -1;
	CU_TRY(cu->EventRecord(x->start, x->stream), "cuEventRecord");
	for (long i = 0; i < replays; i++)
		CU_TRY(cu->GraphLaunch(x->exec, x->stream), "launching the graph");
	CU_TRY(cu->EventRecord(x->stop, x->stream), "cuEventRecord");
	CU_TRY(cu->EventSynchronize(x->stop), "running the kernels");
	float ms = 0;
	CU_TRY(cu->EventElapsedTime(&ms, x->start, x->stop), "cuEventElapsedTime");
	*us = (double)ms * 1e3 * (double)n / (double)(replays * calls);
	return 0;
}

/* Loads the driver and makes device's primary context current; its compute
 * capability (90 for sm_90) in *sm, its L2 size in *l2. */
static int cu_open(cu_api *cu, int device, int *sm, int *l2, tir_child_report *rep)
{
	if (cu_load(cu, rep->msg, sizeof rep->msg)) {
		rep->status = TIR_MEASURE_RUN_ERROR;
		return -1;
	}
	CUdevice dev;
	CUcontext ctx;
	int major = 0, minor = 0;
	CU_TRY(cu->Init(0), "cuInit (no usable GPU?)");
	CU_TRY(cu->DeviceGet(&dev, device), "device %d", device);
	CU_TRY(cu->DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
				      dev), "cuDeviceGetAttribute");
	CU_TRY(cu->DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
				      dev), "cuDeviceGetAttribute");
	CU_TRY(cu->DeviceGetAttribute(l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev),
	       "cuDeviceGetAttribute");
	CU_TRY(cu->DevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
	CU_TRY(cu->CtxSetCurrent(ctx), "cuCtxSetCurrent");
	*sm = major * 10 + minor;
	return 0;
}

/* x->fn[] (allocated) for every launch of x->c from mod, opted in to the
 * dynamic shared memory each launch asks for beyond the default 48 KiB. */
static int get_kernels(cuda_ctx *x, CUmodule mod, tir_child_report *rep)
{
	const cu_api *cu = &x->cu;
	for (int i = 0; i < x->c->nlaunches; i++) {
		const tir_launch *l = &x->c->launches[i];
		CU_TRY(cu->ModuleGetFunction(&x->fn[i], mod, l->name),
		       "no kernel \"%s\" in the cubin", l->name);
		if (l->shared_bytes > 48 * 1024)
			CU_TRY(cu->FuncSetAttribute(x->fn[i],
				CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
				l->shared_bytes),
			       "kernel %s: opting in to %d bytes of shared memory",
			       l->name, l->shared_bytes);
	}
	return 0;
}

/* The events and the L2-flush buffer (twice the L2) of the timing loop. */
static int timing_init(cuda_ctx *x, int l2, tir_child_report *rep)
{
	const cu_api *cu = &x->cu;
	CU_TRY(cu->EventCreate(&x->start, CU_EVENT_DEFAULT), "cuEventCreate");
	CU_TRY(cu->EventCreate(&x->stop, CU_EVENT_DEFAULT), "cuEventCreate");
	CU_TRY(cu->StreamCreate(&x->stream, CU_STREAM_DEFAULT), "cuStreamCreate");
	x->flush_bytes = l2 > 0 ? (size_t)l2 * 2 : (size_t)256 << 20;
	CU_TRY(cu->MemAlloc(&x->flush, x->flush_bytes), "allocating the L2 flush buffer");
	return 0;
}

static int out_of_memory(tir_child_report *rep, const char *what)
{
	snprintf(rep->msg, sizeof rep->msg, "out of memory for %s", what);
	rep->status = TIR_MEASURE_RUN_ERROR;
	return -1;
}

static size_t arg_bytes(const tir_arg_info *a)
{
	return (size_t)a->elems * (size_t)a->elem_bytes;
}

static int cuda_child_run(cuda_ctx *x, tir_child_report *rep)
{
	const tir_code *c = x->c;
	cu_api *cu = &x->cu;
	int sm = 0, l2 = 0;
	CUmodule mod;
	if (cu_open(cu, x->o->device, &sm, &l2, rep))
		return -1;
	CU_TRY(cu->ModuleLoadData(&mod, x->a->image),
	       "loading the cubin for sm_%d on a device of sm_%d", x->a->sm, sm);

	x->fn = calloc((size_t)c->nlaunches + 1, sizeof *x->fn);
	x->dptr = calloc((size_t)c->nargs + 1, sizeof *x->dptr);
	x->params = calloc((size_t)c->nargs + 1, sizeof *x->params);
	if (!x->fn || !x->dptr || !x->params)
		return out_of_memory(rep, "the arguments");
	if (get_kernels(x, mod, rep))
		return -1;

	for (int i = 0; i < c->nargs; i++) {
		const tir_arg_info *a = &c->args[i];
		size_t bytes = arg_bytes(a);
		CU_TRY(cu->MemAlloc(&x->dptr[i], bytes ? bytes : 1),
		       "allocating %zu bytes for \"%s\"", bytes, a->name);
		x->params[i] = &x->dptr[i];
		if (a->is_scratch) {
			CU_TRY(cu->MemsetD8(x->dptr[i], 0, bytes), "clearing \"%s\"", a->name);
			continue;
		}
		void *host = malloc(bytes ? bytes : 1);
		if (!host)
			return out_of_memory(rep, a->name);
		tir_measure_fill(c, i, x->o->seed, host);
		CUresult r = cu->MemcpyHtoD(x->dptr[i], host, bytes);
		free(host);
		if (r != CUDA_SUCCESS)
			return cu_fail(cu, rep, r, "copying \"%s\" to the device", a->name);
	}

	if (launch_params(x, rep))
		return -1;
	/* One run, for the output. */
	if (launch_all(x, rep))
		return -1;
	CU_TRY(cu->CtxSynchronize(), "running the kernels");
	int o = tir_code_output(c);
	if (o >= 0) {
		size_t bytes = arg_bytes(&c->args[o]);
		if (bytes <= rep->out_bytes) {
			CU_TRY(cu->MemcpyDtoH(rep->out, x->dptr[o], bytes),
			       "copying the output back");
			rep->output_ready = 1;
		}
	}
	if (x->o->no_timing)
		return 0;
	if (timing_init(x, l2, rep) || tir_time_repeats(x->o, x, cuda_flush, cuda_timed, rep))
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

/* ---- run_batch (in the children of tir_child_batch) ------------------------------------------- */

/* Every device buffer a candidate can reach sits between two guards of
 * GUARD_BYTES filled with GUARD_BYTE, read back after the run for the
 * output: an out-of-bounds write that lands there is CRASH and ends the
 * child, so it cannot spoil the inputs the next candidates share. */
#define GUARD_BYTES ((size_t)64 << 10)
#define GUARD_BYTE 0xa5

/* An input or the output, which every candidate of the batch shares. */
typedef struct shared_arg {
	const tir_arg_info *info;  /* the first candidate's */
	size_t bytes;
	const void *host;          /* inputs: filled by the parent before the fork */
	CUdeviceptr base;          /* guard, bytes, guard (in the child) */
} shared_arg;

/* A candidate put in the stream: its cubin and its code's tables, copied
 * to the stream's shared data area at `off` — the arguments, the launches,
 * then the image — for the children forked before it was built. */
typedef struct slot {
	size_t off, image_size;
	int sm, nargs, nlaunches;
} slot;

typedef struct cuda_batch {
	/* the parent's, read by the children */
	const slot *slots;         /* [n], shared */
	const unsigned char *data; /* shared */
	const tir_measure_opts *o;
	const double *ref;
	int64_t ref_n;
	shared_arg *sh;            /* the non-scratch arguments, in order */
	int nshared;
	int out_k;                 /* the output in sh[], or -1 */
	/* the child's */
	cuda_ctx x;                /* the current candidate, for launch_all and timing */
	int sm;
	CUmodule mod;              /* the current candidate's cubin, or NULL */
	CUdeviceptr *scratch;      /* per argument of the current candidate, or 0 */
	unsigned char *out_raw;    /* the output as stored */
	double *out_d;             /* and as double */
	unsigned char *guard, *pattern;   /* a guard read back; what it must hold */
	unsigned char *readback;   /* an input read back */
	size_t readback_bytes;
	const char *overwritten;   /* the input restore_inputs found changed */
	double best_us;            /* the best median this child measured, 0: none */
} cuda_batch;

/* bytes on the device between two guards; all of it holds the pattern. */
static int guarded_alloc(const cu_api *cu, CUdeviceptr *base, size_t bytes,
			 const char *name, tir_child_report *rep)
{
	size_t total = bytes + 2 * GUARD_BYTES;
	*base = 0;
	CU_TRY(cu->MemAlloc(base, total), "allocating %zu bytes for \"%s\"", bytes, name);
	CU_TRY(cu->MemsetD8(*base, GUARD_BYTE, total), "clearing \"%s\"", name);
	return 0;
}

/* Once per child: the context, the shared buffers with the inputs the
 * parent filled, the host buffers for the checks, the timing's events and
 * flush buffer. */
static int batch_setup(void *ctx, tir_child_report *rep)
{
	cuda_batch *b = ctx;
	cuda_ctx *x = &b->x;
	cu_api *cu = &x->cu;
	int l2 = 0;
	x->o = b->o;
	if (cu_open(cu, b->o->device, &b->sm, &l2, rep))
		return -1;
	const tir_arg_info *out = b->out_k >= 0 ? b->sh[b->out_k].info : NULL;
	b->guard = malloc(GUARD_BYTES);
	b->pattern = malloc(GUARD_BYTES);
	b->out_raw = malloc((out ? arg_bytes(out) : 0) + 1);
	b->out_d = malloc((size_t)(out ? out->elems : 0) * sizeof(double) + 1);
	if (!b->guard || !b->pattern || !b->out_raw || !b->out_d)
		return out_of_memory(rep, "the output");
	memset(b->pattern, GUARD_BYTE, GUARD_BYTES);
	for (int k = 0; k < b->nshared; k++) {
		shared_arg *s = &b->sh[k];
		if (guarded_alloc(cu, &s->base, s->bytes, s->info->name, rep))
			return -1;
		if (s->host)
			CU_TRY(cu->MemcpyHtoD(s->base + GUARD_BYTES, s->host, s->bytes),
			       "copying \"%s\" to the device", s->info->name);
	}
	if (!b->o->no_timing && timing_init(x, l2, rep))
		return -1;
	return 0;
}

/* Points c's arguments at the shared buffers and at guarded scratch
 * buffers of its own. */
static int bind_args(cuda_batch *b, const tir_code *c, tir_child_report *rep)
{
	cuda_ctx *x = &b->x;
	for (int i = 0, k = 0; i < c->nargs; i++) {
		const tir_arg_info *a = &c->args[i];
		if (a->is_scratch) {
			if (guarded_alloc(&x->cu, &b->scratch[i], arg_bytes(a), a->name, rep))
				return -1;
			x->dptr[i] = b->scratch[i] + GUARD_BYTES;
		} else {
			x->dptr[i] = b->sh[k++].base + GUARD_BYTES;
		}
		x->params[i] = &x->dptr[i];
	}
	return 0;
}

/* Before a run for the output: the output all-ones bytes (unwritten
 * elements show as NaN), scratch zeroed. */
static int clear_outputs(cuda_batch *b, const tir_code *c, tir_child_report *rep)
{
	const cu_api *cu = &b->x.cu;
	if (b->out_k >= 0)
		CU_TRY(cu->MemsetD8(b->sh[b->out_k].base + GUARD_BYTES, 0xff,
				    b->sh[b->out_k].bytes), "clearing the output");
	for (int i = 0; i < c->nargs; i++)
		if (b->scratch[i])
			CU_TRY(cu->MemsetD8(b->scratch[i] + GUARD_BYTES, 0,
					    arg_bytes(&c->args[i])),
			       "clearing \"%s\"", c->args[i].name);
	return 0;
}

/* Both guards of the buffer at base (bytes between them) still hold the
 * pattern, or CRASH naming the buffer. */
static int check_guard(cuda_batch *b, CUdeviceptr base, size_t bytes, const char *name,
		       tir_child_report *rep)
{
	const cu_api *cu = &b->x.cu;
	const CUdeviceptr at[2] = { base, base + GUARD_BYTES + bytes };
	for (int side = 0; side < 2; side++) {
		CU_TRY(cu->MemcpyDtoH(b->guard, at[side], GUARD_BYTES),
		       "reading the guard of \"%s\"", name);
		if (memcmp(b->guard, b->pattern, GUARD_BYTES)) {
			rep->status = TIR_MEASURE_CRASH;
			snprintf(rep->msg, sizeof rep->msg, "cuda: the candidate wrote out "
				 "of bounds, %s \"%s\"", side ? "past the end of" :
				 "before the start of", name);
			return -1;
		}
	}
	return 0;
}

static int check_guards(cuda_batch *b, const tir_code *c, tir_child_report *rep)
{
	for (int k = 0; k < b->nshared; k++)
		if (check_guard(b, b->sh[k].base, b->sh[k].bytes, b->sh[k].info->name, rep))
			return -1;
	for (int i = 0; i < c->nargs; i++)
		if (b->scratch[i] && check_guard(b, b->scratch[i], arg_bytes(&c->args[i]),
						 c->args[i].name, rep))
			return -1;
	return 0;
}

/* Reads every input back and copies the parent's values over any that
 * changed, naming the first in b->overwritten.  Returns 1 when one had
 * changed, 0 when none had, -1 on a driver error (rep set). */
static int restore_inputs(cuda_batch *b, tir_child_report *rep)
{
	const cu_api *cu = &b->x.cu;
	int changed = 0;
	for (int k = 0; k < b->nshared; k++) {
		const shared_arg *s = &b->sh[k];
		if (!s->host)
			continue;
		if (s->bytes > b->readback_bytes) {
			free(b->readback);
			b->readback_bytes = 0;
			if (!(b->readback = malloc(s->bytes)))
				return out_of_memory(rep, "reading the inputs back");
			b->readback_bytes = s->bytes;
		}
		CU_TRY(cu->MemcpyDtoH(b->readback, s->base + GUARD_BYTES, s->bytes),
		       "reading \"%s\" back", s->info->name);
		if (!memcmp(b->readback, s->host, s->bytes))
			continue;
		CU_TRY(cu->MemcpyHtoD(s->base + GUARD_BYTES, s->host, s->bytes),
		       "restoring \"%s\"", s->info->name);
		if (!changed)
			b->overwritten = s->info->name;
		changed = 1;
	}
	return changed;
}

/* Runs the current candidate once on the shared inputs and judges its
 * output against the reference.  Returns the verdict (rep->msg says why
 * when not OK), or -1 with rep set when the driver failed or the candidate
 * wrote out of bounds. */
static int check_once(cuda_batch *b, const tir_code *c, tir_child_report *rep,
		      double *max_rel_error)
{
	cuda_ctx *x = &b->x;
	const cu_api *cu = &x->cu;
	if (clear_outputs(b, c, rep) || launch_all(x, rep))
		return -1;
	CU_TRY(cu->CtxSynchronize(), "running the kernels");
	if (check_guards(b, c, rep))
		return -1;
	int64_t n = 0;
	if (b->out_k >= 0) {
		const shared_arg *s = &b->sh[b->out_k];
		CU_TRY(cu->MemcpyDtoH(b->out_raw, s->base + GUARD_BYTES, s->bytes),
		       "copying the output back");
		n = s->info->elems;
		tir_measure_to_double(s->info->dtype, b->out_raw, n, b->out_d);
	}
	return (int)tir_measure_judge(c, b->ref, b->ref_n, b->out_d, n, max_rel_error,
				      rep->msg, sizeof rep->msg);
}

/* check_once, and for a wrong result a second look: the inputs are shared,
 * and an earlier candidate may have written into them beyond the guards
 * without faulting.  Restored, the candidate runs again; if it changes
 * them once more it is the culprit (CRASH, and the child ends). */
static int check_output(cuda_batch *b, const tir_code *c, tir_child_report *rep,
			double *max_rel_error)
{
	int s = check_once(b, c, rep, max_rel_error);
	if (s == TIR_MEASURE_WRONG_RESULT) {
		int changed = restore_inputs(b, rep);
		if (changed < 0)
			return -1;
		if (changed)
			s = check_once(b, c, rep, max_rel_error);
		if (changed && s == TIR_MEASURE_WRONG_RESULT &&
		    (changed = restore_inputs(b, rep)) != 0) {
			if (changed < 0)
				return -1;
			rep->status = TIR_MEASURE_CRASH;
			snprintf(rep->msg, sizeof rep->msg, "cuda: the candidate wrote into "
				 "its input \"%s\"", b->overwritten);
			return -1;
		}
	}
	if (s < 0)
		return -1;
	rep->status = s;
	return s == TIR_MEASURE_OK ? 0 : -1;
}

/* One candidate: its cubin, its kernels and scratch, one checked run, the
 * timing.  Fills rep; 0 when it is OK. */
static int item_run(cuda_batch *b, const tir_artifact *a, const tir_code *c,
		    tir_child_report *rep, double *max_rel_error)
{
	cuda_ctx *x = &b->x;
	const cu_api *cu = &x->cu;
	x->a = a;
	x->c = c;
	x->fn = calloc((size_t)c->nlaunches + 1, sizeof *x->fn);
	x->dptr = calloc((size_t)c->nargs + 1, sizeof *x->dptr);
	x->params = calloc((size_t)c->nargs + 1, sizeof *x->params);
	b->scratch = calloc((size_t)c->nargs + 1, sizeof *b->scratch);
	if (!x->fn || !x->dptr || !x->params || !b->scratch)
		return out_of_memory(rep, "the arguments");
	CU_TRY(cu->ModuleLoadData(&b->mod, a->image),
	       "loading the cubin for sm_%d on a device of sm_%d", a->sm, b->sm);
	if (get_kernels(x, b->mod, rep) || bind_args(b, c, rep) || launch_params(x, rep) ||
	    check_output(b, c, rep, max_rel_error))
		return -1;
	if (b->o->no_timing)
		return 0;
	tir_measure_opts o = *b->o;
	if (b->best_us > 0)
		o.slow_us = 10 * b->best_us;
	if (tir_time_repeats(&o, x, cuda_flush, cuda_timed, rep))
		return -1;
	if (b->best_us <= 0 || rep->median_us < b->best_us)
		b->best_us = rep->median_us;
	return 0;
}

/* What item_run took: the cubin, the scratch buffers, the tables.  Errors
 * are ignored: a context they would report is probed next. */
static void item_release(cuda_batch *b)
{
	graph_release(&b->x);
	cuda_ctx *x = &b->x;
	const cu_api *cu = &x->cu;
	for (int i = 0; b->scratch && i < x->c->nargs; i++)
		if (b->scratch[i])
			cu->MemFree(b->scratch[i]);
	if (b->mod)
		cu->ModuleUnload(b->mod);
	b->mod = NULL;
	free(b->scratch);
	free(x->fn);
	free(x->dptr);
	free(x->params);
	free(x->lparams);
	free(x->tparams);
	free(x->tmaps);
	x->lparams = NULL;
	x->tparams = NULL;
	x->tmaps = NULL;
	b->scratch = NULL;
	x->fn = NULL;
	x->dptr = NULL;
	x->params = NULL;
}

/* Whether the child must end after this candidate: after a fault or a hang
 * the driver caught, every later call fails (CUDA's sticky errors), and a
 * CRASH may have spoilt the shared buffers; after another error, whether a
 * synchronisation still fails. */
static bool item_must_end(cuda_batch *b, const tir_child_report *rep)
{
	if (rep->status == TIR_MEASURE_CRASH || rep->status == TIR_MEASURE_TIMEOUT)
		return true;
	return rep->status == TIR_MEASURE_RUN_ERROR &&
	       b->x.cu.CtxSynchronize() != CUDA_SUCCESS;
}

static int batch_item(void *ctx, int i, tir_child_report *rep, double *max_rel_error)
{
	cuda_batch *b = ctx;
	const slot *sl = &b->slots[i];
	const unsigned char *at = b->data + sl->off;
	tir_code c = { .nargs = sl->nargs, .args = (tir_arg_info *)(uintptr_t)at,
		       .nlaunches = sl->nlaunches };
	at += (size_t)sl->nargs * sizeof(tir_arg_info);
	c.launches = (tir_launch *)(uintptr_t)at;
	at += (size_t)sl->nlaunches * sizeof(tir_launch);
	tir_artifact a = { .runner = &tir_runner_cuda, .image = (char *)(uintptr_t)at,
			   .image_size = sl->image_size, .sm = sl->sm };
	if (item_run(b, &a, &c, rep, max_rel_error) == 0) {
		rep->status = TIR_MEASURE_OK;
		rep->msg[0] = '\0';
	}
	item_release(b);
	return item_must_end(b, rep) ? TIR_BATCH_END : 0;
}

/* ---- the measuring stream ------------------------------------------------------------------ */

struct tir_run_stream {
	int n;
	tir_measure_opts o;
	const tir_code *first;     /* the argument list every streamed candidate shares */
	const double *ref;
	int64_t ref_n;
	cuda_batch b;              /* what the children inherit */
	tir_child_stream *cs;      /* NULL: no child (nothing to measure, or setup failed) */
	/* the shared mapping: n slots, then the data area */
	void *map;
	size_t map_bytes, data_bytes;
	slot *slots;
	unsigned char *data;
	pthread_mutex_t lock;      /* used, alone_a / alone_c */
	size_t used;
	/* put but run on their own at finish: other arguments, or no room */
	const tir_artifact **alone_a;
	const tir_code **alone_c;
	char fail[256];            /* start failed: every candidate's message */
};

/* The shared data area: room for the tables and cubins of a batch (most
 * cubins are tens to hundreds of KiB); pages are used only when written. */
static size_t stream_data_bytes(int n)
{
	return ((size_t)64 << 20) + (size_t)n * ((size_t)2 << 20);
}

static size_t round16(size_t x)
{
	return (x + 15) & ~(size_t)15;
}

static tir_run_stream *cuda_stream_start(int n, const tir_code *first,
					 const tir_measure_opts *opts, const double *ref,
					 int64_t ref_n)
{
	tir_run_stream *s = xcalloc(1, sizeof *s);
	s->n = n > 0 ? n : 0;
	s->o = tir_measure_opts_default(opts);
	s->first = first;
	s->ref = ref;
	s->ref_n = ref_n;
	pthread_mutex_init(&s->lock, NULL);
	s->alone_a = xcalloc((size_t)s->n + 1, sizeof *s->alone_a);
	s->alone_c = xcalloc((size_t)s->n + 1, sizeof *s->alone_c);
	if (s->n == 0 || !first)
		return s;
	s->data_bytes = stream_data_bytes(s->n);
	size_t table = round16((size_t)s->n * sizeof(slot));
	s->map_bytes = table + s->data_bytes;
	s->map = mmap(NULL, s->map_bytes, PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (s->map == MAP_FAILED) {
		s->map = NULL;
		snprintf(s->fail, sizeof s->fail, "cuda: cannot map %zu bytes for the "
			 "candidates: %s", s->map_bytes, strerror(errno));
		return s;
	}
	s->slots = s->map;
	s->data = (unsigned char *)s->map + table;

	cuda_batch *b = &s->b;
	*b = (cuda_batch){ .slots = s->slots, .data = s->data, .o = &s->o, .ref = ref,
			   .ref_n = ref_n, .out_k = -1 };
	b->sh = xcalloc((size_t)first->nargs + 1, sizeof *b->sh);
	for (int i = 0; i < first->nargs; i++) {
		const tir_arg_info *ai = &first->args[i];
		if (ai->is_scratch)
			continue;
		shared_arg *sa = &b->sh[b->nshared];
		sa->info = ai;
		sa->bytes = arg_bytes(ai);
		if (ai->is_output) {
			b->out_k = b->nshared;
		} else {
			void *host = xmalloc(sa->bytes + 1);
			tir_measure_fill(first, i, s->o.seed, host);
			sa->host = host;
		}
		b->nshared++;
	}
	s->cs = tir_child_stream_start(s->n, s->o.timeout_s, batch_setup, batch_item, b);
	return s;
}

/* Copies a's cubin and c's tables into the data area; false when there is
 * no room left. */
static bool stream_copy(tir_run_stream *s, int i, const tir_artifact *a, const tir_code *c)
{
	size_t tables = (size_t)c->nargs * sizeof(tir_arg_info) +
			(size_t)c->nlaunches * sizeof(tir_launch);
	size_t need = round16(tables + a->image_size);
	pthread_mutex_lock(&s->lock);
	size_t off = s->used;
	bool room = s->data && need <= s->data_bytes - off;
	if (room)
		s->used += need;
	pthread_mutex_unlock(&s->lock);
	if (!room)
		return false;
	unsigned char *at = s->data + off;
	memcpy(at, c->args, (size_t)c->nargs * sizeof(tir_arg_info));
	at += (size_t)c->nargs * sizeof(tir_arg_info);
	memcpy(at, c->launches, (size_t)c->nlaunches * sizeof(tir_launch));
	at += (size_t)c->nlaunches * sizeof(tir_launch);
	memcpy(at, a->image, a->image_size);
	s->slots[i] = (slot){ .off = off, .image_size = a->image_size, .sm = a->sm,
			      .nargs = c->nargs, .nlaunches = c->nlaunches };
	return true;
}

static void cuda_stream_put(tir_run_stream *s, int i, const tir_artifact *a,
			    const tir_code *c)
{
	if (i < 0 || i >= s->n || !a || !a->image)
		return;
	if (s->cs && tir_code_same_args(s->first, c) && stream_copy(s, i, a, c)) {
		tir_child_stream_put(s->cs, i);
		return;
	}
	pthread_mutex_lock(&s->lock);
	s->alone_a[i] = a;
	s->alone_c[i] = c;
	pthread_mutex_unlock(&s->lock);
}

/* A candidate that could not be streamed: a child of its own (run), then
 * the check. */
static void run_alone(const tir_artifact *a, const tir_code *c, const tir_measure_opts *o,
		      const double *ref, int64_t ref_n, tir_measure_result *r)
{
	if (cuda_run(a, c, o, r) == 0)
		r->status = tir_measure_judge(c, ref, ref_n, r->output, r->out_elems,
					      &r->max_rel_error, r->msg, sizeof r->msg);
	free(r->output);
	r->output = NULL;
	r->out_elems = 0;
}

static int cuda_stream_finish(tir_run_stream *s, tir_measure_result *r)
{
	int children = 0;
	if (s->cs) {
		children = tir_child_stream_finish(s->cs, r);
	} else {
		for (int i = 0; i < s->n; i++) {
			memset(&r[i], 0, sizeof r[i]);
			r[i].max_rel_error = -1;
			r[i].status = TIR_MEASURE_RUN_ERROR;
			snprintf(r[i].msg, sizeof r[i].msg, "%s",
				 s->fail[0] ? s->fail : "cuda: nothing built");
		}
	}
	for (int i = 0; i < s->n; i++)
		if (s->alone_a[i]) {
			run_alone(s->alone_a[i], s->alone_c[i], &s->o, s->ref, s->ref_n, &r[i]);
			children++;
		}
	for (int k = 0; k < s->b.nshared; k++)
		free((void *)s->b.sh[k].host);
	free(s->b.sh);
	if (s->map)
		munmap(s->map, s->map_bytes);
	free(s->alone_a);
	free(s->alone_c);
	pthread_mutex_destroy(&s->lock);
	free(s);
	return children;
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

struct tir_run_stream {
	int n;
};

static tir_run_stream *cuda_stream_start(int n, const tir_code *first,
					 const tir_measure_opts *opts, const double *ref,
					 int64_t ref_n)
{
	tir_run_stream *s = xcalloc(1, sizeof *s);
	s->n = n;
	return s;
}

static void cuda_stream_put(tir_run_stream *s, int i, const tir_artifact *a,
			    const tir_code *c)
{
}

static int cuda_stream_finish(tir_run_stream *s, tir_measure_result *r)
{
	for (int i = 0; i < s->n; i++) {
		memset(&r[i], 0, sizeof r[i]);
		r[i].max_rel_error = -1;
		r[i].status = TIR_MEASURE_RUN_ERROR;
		snprintf(r[i].msg, sizeof r[i].msg, "cuda: libtir was built without CUDA");
	}
	free(s);
	return 0;
}

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

/* run_batch: the stream with every candidate put at once. */
static int cuda_run_batch(int n, const tir_artifact *const *a, const tir_code *const *c,
			  const tir_measure_opts *opts, const double *ref, int64_t ref_n,
			  tir_measure_result *r)
{
	const tir_code *first = NULL;
	for (int i = 0; i < n && !first; i++)
		if (a[i] && a[i]->image)
			first = c[i];
	tir_run_stream *s = cuda_stream_start(n, first, opts, ref, ref_n);
	for (int i = 0; i < n; i++)
		cuda_stream_put(s, i, a[i], c[i]);
	return cuda_stream_finish(s, r);
}

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
	.run_batch = cuda_run_batch,
	.stream_start = cuda_stream_start,
	.stream_put = cuda_stream_put,
	.stream_finish = cuda_stream_finish,
};
