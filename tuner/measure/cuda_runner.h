/*
 * cuda_runner.h — what the files of the CUDA runner share, private to them
 * (cuda_driver.c, cuda_run.c, cuda_stream.c, cuda_props.c): the driver's
 * table and the pieces of one candidate's run that the stream reuses.
 * measure.h stays the folder's header; nothing here is for the rest of
 * libtir, and only these files include <cuda.h>.
 */
#ifndef TIR_MEASURE_CUDA_RUNNER_H
#define TIR_MEASURE_CUDA_RUNNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "measure.h"

/* ---- cuda_run.c ------------------------------------------------------------------------------ */

/* tir_runner_cuda.run: one candidate in a child of its own (guard.c's
 * tir_child_measure). */
int cuda_run(const tir_artifact *a, const tir_code *c, const tir_measure_opts *opts,
	     tir_measure_result *r);

/* ---- cuda_stream.c: tir_runner_cuda's stream and run_batch ----------------------------------- */

tir_run_stream *cuda_stream_start(int n, const tir_code *first,
				  const tir_measure_opts *opts, const double *ref,
				  int64_t ref_n);
void cuda_stream_put(tir_run_stream *s, int i, const tir_artifact *a,
		     const tir_code *c);
int cuda_stream_finish(tir_run_stream *s, tir_measure_result *r);
int cuda_run_batch(int n, const tir_artifact *const *a, const tir_code *const *c,
		   const tir_measure_opts *opts, const double *ref, int64_t ref_n,
		   tir_measure_result *r);

#ifdef HAVE_CUDA
#include <cuda.h>

/* ---- cuda_driver.c: the driver API, loaded at run time ----------------------------------------- */

typedef struct cu_api {
	void *lib;
	CUresult (*Init)(unsigned int);
	CUresult (*DeviceGet)(CUdevice *, int);
	CUresult (*DeviceGetCount)(int *);
	CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
	CUresult (*DeviceGetName)(char *, int, CUdevice);
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
	CUresult (*MemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t);
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
	int turn_fd;               /* the device's lock file, + 1 (0: none; cuda_device_turn) */
	CUcontext ctx;             /* the primary context cuda_api_open made current */
} cu_api;

/* Loads the driver; 0, or -1 with a message in msg. */
int cuda_api_load(cu_api *cu, char *msg, size_t size);

/* Reports a failed driver call: "cuda: what: NAME (description)", with the
 * status the error means (TIMEOUT, CRASH for a fault, else RUN_ERROR);
 * returns -1. */
int cuda_api_fail(const cu_api *cu, tir_child_report *rep, CUresult r,
		  const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* A driver call that returns cuda_api_fail(...) from the calling function (which
 * has `cu` and `rep` in scope) when it fails. */
#define CU_TRY(call, ...) do { CUresult r_ = (call); \
	if (r_ != CUDA_SUCCESS) return cuda_api_fail(cu, rep, r_, __VA_ARGS__); } while (0)

/* Loads the driver and makes device's primary context current; its compute
 * capability (90 for sm_90) in *sm, its L2 size in *l2. */
int cuda_api_open(cu_api *cu, int device, int *sm, int *l2, tir_child_report *rep);

/* Takes (take) or gives back this process's turn on the device that
 * cuda_api_open opened: one measuring process at a time runs candidates
 * on a GPU, whichever worker or slot forked it, so that no timing shares
 * the GPU with another's kernels.  The turn is an fcntl lock on a file per
 * device (named by its PCI address, in $TMPDIR or /tmp); a process that
 * dies holding it gives it back.  Without the file (it cannot be opened)
 * there are no turns. */
void cuda_device_turn(cu_api *cu, bool take);

/* ---- cuda_run.c: one candidate on the device (in a child) --------------------------------------- */

/* One copy of a candidate's inputs and outputs for the timed calls
 * (cuda_rotation), with the launch parameters that point at it. */
typedef struct cuda_copy {
	CUdeviceptr base;          /* the copy's one allocation; 0 for copy 0 */
	CUdeviceptr *dptr;
	void **params;
	void ***lparams;
	void **tparams;
	CUtensorMap *tmaps;
} cuda_copy;

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
	/* the copies the timed calls rotate through (0: not made yet): call i
	 * of the graph reads and writes copy i % ncopies, copy 0 being the
	 * arguments themselves, so that together they span twice the L2 and
	 * every call finds its data in device memory, as a kernel among other
	 * work does, not in the L2 the call before it filled */
	int ncopies;
	cuda_copy *copies;
	bool warm_l2;              /* TIRD_CUDA_L2=warm: one set of buffers */
	/* the launch term (cuda_timing_init): an empty kernel's time per call
	 * back to back on this device, added per kernel to every figure; 0
	 * under the profiler timer */
	double launch_us;
	/* the profiler timer (TIRD_CUDA_TIMER=profiler; NULL: the graph timer)
	 * and the copy its next call reads */
	struct cuda_prof *prof;
	long prof_next;
} cuda_ctx;

/* Launches every kernel once, in order; no synchronisation. */
int cuda_launch_all(cuda_ctx *x, tir_child_report *rep);
/* x->lparams: per launch, the arguments' device pointers and its tensor
 * maps, encoded for them. */
int cuda_launch_params(cuda_ctx *x, tir_child_report *rep);
/* x->fn[] for every launch of x->c from mod, opted in to the dynamic shared
 * memory each launch asks for beyond the default 48 KiB. */
int cuda_get_kernels(cuda_ctx *x, CUmodule mod, tir_child_report *rep);
/* The events, the stream and the L2-flush buffer (twice l2) of the timing,
 * and the launch term x->launch_us, measured on the device. */
int cuda_timing_init(cuda_ctx *x, int l2, tir_child_report *rep);
/* Adds the launch term once per kernel of x->c to the figures of rep
 * (its median and each repeat) and records it in rep->launch_us. */
void cuda_add_launch_term(const cuda_ctx *x, tir_child_report *rep);
/* The flush and timed calls of tir_time_repeats (ctx is a cuda_ctx). */
int cuda_flush(void *ctx, tir_child_report *rep);
int cuda_timed(void *ctx, long n, double *us, tir_child_report *rep);
/* Drops the graph of the timed calls and the copies they rotate through
 * (the candidate changes). */
void cuda_graph_release(cuda_ctx *x);
/* RUN_ERROR "out of memory for what"; returns -1. */
int cuda_out_of_memory(tir_child_report *rep, const char *what);

/* ---- cuda_profiler.c: the profiler timer (CUPTI's range profiler) -------------------------- */

typedef struct cuda_prof cuda_prof;
/* CUPTI loaded and configured for gpu__time_duration.sum on ctx (device's
 * context), with room for max_ranges kernels per collection; NULL with the
 * reason in msg.  Call with the device's turn held. */
cuda_prof *cuda_prof_open(CUcontext ctx, int device, int max_ranges, char *msg, size_t size);
void cuda_prof_close(cuda_prof *p);
/* Gives the device's counters back (the profiler is enabled again by the
 * next cuda_prof_begin): before the process's turn on the device ends. */
void cuda_prof_release(cuda_prof *p);
int cuda_prof_max_ranges(const cuda_prof *p);
/* A collection: begin, then launch the kernels, then end with the number
 * of kernels launched, which gives the sum of their durations in *us
 * (each kernel alone on the GPU, as ncu's gpu__time_duration).  0, or -1
 * with the reason in msg (a kernel not profiled is one). */
int cuda_prof_begin(cuda_prof *p, char *msg, size_t size);
int cuda_prof_end(cuda_prof *p, int kernels, double *us, char *msg, size_t size);

static inline size_t cuda_arg_bytes(const tir_arg_info *a)
{
	return (size_t)a->elems * (size_t)a->elem_bytes;
}

#endif /* HAVE_CUDA */

#endif
