/*
 * cuda_run.c — the CUDA builder and runner (tir_runner_cuda): the build,
 * and the run of one candidate in a child of its own; the stream and
 * run_batch, the tuner's path, are cuda_stream.c, which measures with the
 * pieces of a run kept here (cuda_runner.h: the launches, the timing).
 *
 * Build is tir_nvrtc_compile for the target's sm_XY (a cubin); running
 * several builds at once is the caller's business.
 *
 * Run: the driver API (cuda_driver.c) is used ONLY in the child process of
 * guard.c's guard.  In the child: cuInit, the device's primary context, the
 * cubin, one function per launch (opting in to more than 48 KiB of dynamic
 * shared memory where a launch needs it), a device buffer per argument
 * (inputs from tir_measure_fill, the output all-ones, scratch zeroed), then
 * the launches in order, each kernel taking every argument's device pointer
 * in tir_code.args order.  The outputs are copied back, then timed, the
 * L2 flushed before each repeat by a memset of twice its size, by one of
 * two timers (TIRD_CUDA_TIMER in the measuring process):
 *
 *   graph (the default, and "auto" where the profiler cannot run): events
 *   around repeats of whole launch sequences captured as one CUDA graph
 *   (at most GRAPH_MAX_CALLS sequences, replayed as often as the repeat
 *   needs: device time per call, as the peer's figures in bench/ are
 *   taken), plus the launch term below.
 *
 *   profiler ("profiler", or "auto" where it can run): CUPTI's range
 *   profiler (cuda_profiler.c) reads each kernel's gpu__time_duration, the
 *   figure ncu gives, every kernel run alone, at most PROF_MAX_RANGES
 *   kernels a repeat; a call's figure is the sum over its kernels.
 *
 * Both run on a blocking stream of the runner's own.  The calls rotate
 * through copies of the inputs and outputs that together span twice the
 * L2 (cuda_rotation), so every call reads its data from device memory, as
 * a kernel among other work does; back to back on one set of buffers
 * (TIRD_CUDA_L2=warm in the measuring process, for comparisons) every call
 * after the first found its data in the L2 the call before had filled, and
 * kernels tuned that way lost up to 45% on a cold L2 where the vendor's
 * lost a few percent (bench/results/2026-12-02-h200-harness.txt).
 *
 * The launch term (graph timer only).  Back to back, a kernel's launch
 * overlaps the kernel before it; alone (ncu's gpu__time_duration, or a
 * kernel after other work) it does not, and the back-to-back figure of a
 * best was ncu's less a near constant 0.9 us per kernel
 * (bench/results/2026-12-02-h200-l2.txt).  A candidate of two kernels
 * (split-K) pays that twice where it runs among other work, so the search
 * must see it: every figure gets the launch term once per kernel of the
 * launch sequence, the term being an empty kernel's time per call back to
 * back on the same device and stream, measured when the timing is set up
 * (launch_term; tir_measure_result.launch_us says what was added).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../ir/ir.h"
#include "../codegen/codegen.h"
#include "cuda_runner.h"

#ifdef HAVE_CUDA

/* ---- run (in the child) -------------------------------------------------------------------- */

static int dim(int d) { return d > 0 ? d : 1; }

/* Launches every kernel once, in order; no synchronisation. */
int cuda_launch_all(cuda_ctx *x, tir_child_report *rep)
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

/* x->lparams: for each launch, the device pointers of the arguments and
 * then the tensor maps it takes (tir_launch.tmaps), encoded for those
 * pointers: a dense view of the argument, boxes of the given extents,
 * 128-byte swizzle, elements moved as unsigned integers of their size. */
int cuda_launch_params(cuda_ctx *x, tir_child_report *rep)
{
	const cu_api *cu = &x->cu;
	const tir_code *c = x->c;
	int nt = 0;
	for (int i = 0; i < c->nlaunches; i++)
		nt += c->launches[i].ntmaps;
	x->lparams = calloc((size_t)c->nlaunches + 1, sizeof *x->lparams);
	if (!x->lparams)
		return cuda_out_of_memory(rep, "the launch parameters");
	if (nt == 0) {
		for (int i = 0; i < c->nlaunches; i++)
			x->lparams[i] = x->params;
		return 0;
	}
	const size_t per = (size_t)c->nargs + TIR_MAX_TMAPS;
	x->tparams = calloc(per * (size_t)c->nlaunches + 1, sizeof *x->tparams);
	x->tmaps = aligned_alloc(64, (size_t)nt * sizeof *x->tmaps);
	if (!x->tparams || !x->tmaps)
		return cuda_out_of_memory(rep, "the tensor maps");
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

int cuda_flush(void *ctx, tir_child_report *rep)
{
	cuda_ctx *x = ctx;
	const cu_api *cu = &x->cu;
	CU_TRY(cu->MemsetD8(x->flush, (unsigned char)(++x->flush_round & 0xff),
			    x->flush_bytes), "flushing the L2");
	return 0;
}

/* At most this many launch sequences in one graph; more calls replay it. */
#define GRAPH_MAX_CALLS 256
/* The profiler timer's kernels per collection: a repeat of at most this
 * many kernels, however short they are (each is run alone). */
#define PROF_MAX_RANGES 16
/* The empty kernel of the launch term: one block of one warp. */
#define LAUNCH_BLOCKS 1
#define LAUNCH_THREADS 32

static void graph_drop(cuda_ctx *x)
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

static void copies_drop(cuda_ctx *x)
{
	const cu_api *cu = &x->cu;
	for (int r = 1; r < x->ncopies; r++) {
		cuda_copy *k = &x->copies[r];
		if (k->base)
			cu->MemFree(k->base);
		free(k->dptr);
		free(k->params);
		free(k->lparams);
		free(k->tparams);
		free(k->tmaps);
	}
	free(x->copies);
	x->copies = NULL;
	x->ncopies = 0;
}

void cuda_graph_release(cuda_ctx *x)
{
	graph_drop(x);
	copies_drop(x);
	cuda_prof_release(x->prof);
}

/* x->copies: as many copies of the inputs and outputs (the scratch buffers
 * are shared) as make twice the L2 (x->flush_bytes) with the arguments
 * themselves, at most GRAPH_MAX_CALLS; one allocation each, the inputs
 * copied from the arguments, and each copy's launch parameters (its tensor
 * maps encoded for it).  Where the arguments alone span twice the L2 there
 * is one copy, the arguments. */
static int cuda_rotation(cuda_ctx *x, tir_child_report *rep)
{
	const cu_api *cu = &x->cu;
	const tir_code *c = x->c;
	if (x->ncopies > 0)
		return 0;
	if (x->warm_l2) {
		/* one set of buffers: copy 0, the arguments */
		x->copies = calloc(1, sizeof *x->copies);
		if (!x->copies)
			return cuda_out_of_memory(rep, "the timing's copies");
		x->ncopies = 1;
		x->copies[0] = (cuda_copy){ 0, x->dptr, x->params, x->lparams, x->tparams, x->tmaps };
		return 0;
	}
	size_t span = 0;
	for (int i = 0; i < c->nargs; i++)
		if (!c->args[i].is_scratch)
			span += (cuda_arg_bytes(&c->args[i]) + 255) & ~(size_t)255;
	size_t n = span >= x->flush_bytes || span == 0 ? 1 : (x->flush_bytes + span - 1) / span;
	if (n > GRAPH_MAX_CALLS)
		n = GRAPH_MAX_CALLS;
	x->copies = calloc(n, sizeof *x->copies);
	if (!x->copies)
		return cuda_out_of_memory(rep, "the timing's copies");
	x->ncopies = (int)n;
	x->copies[0] = (cuda_copy){ 0, x->dptr, x->params, x->lparams, x->tparams, x->tmaps };
	cuda_copy self = x->copies[0];
	int rc = 0;
	for (int r = 1; r < x->ncopies && rc == 0; r++) {
		cuda_copy *k = &x->copies[r];
		k->dptr = calloc((size_t)c->nargs + 1, sizeof *k->dptr);
		k->params = calloc((size_t)c->nargs + 1, sizeof *k->params);
		if (!k->dptr || !k->params)
			return cuda_out_of_memory(rep, "the timing's copies");
		CUresult e = cu->MemAlloc(&k->base, span);
		if (e != CUDA_SUCCESS) {
			/* fewer copies than twice the L2: the device is short of memory */
			k->base = 0;
			free(k->dptr);
			free(k->params);
			*k = (cuda_copy){ 0 };
			x->ncopies = r;
			break;
		}
		size_t off = 0;
		for (int i = 0; i < c->nargs && rc == 0; i++) {
			size_t bytes = cuda_arg_bytes(&c->args[i]);
			if (c->args[i].is_scratch) {
				k->dptr[i] = self.dptr[i];
			} else {
				k->dptr[i] = k->base + off;
				off += (bytes + 255) & ~(size_t)255;
				if (bytes && (e = cu->MemcpyDtoD(k->dptr[i], self.dptr[i], bytes)))
					rc = cuda_api_fail(cu, rep, e, "copying \"%s\" for the timing",
							   c->args[i].name);
			}
			k->params[i] = &k->dptr[i];
		}
		/* cuda_launch_params builds from x's pointers: point them at the copy */
		x->dptr = k->dptr;
		x->params = k->params;
		x->lparams = NULL;
		x->tparams = NULL;
		x->tmaps = NULL;
		if (rc == 0)
			rc = cuda_launch_params(x, rep);
		k->lparams = x->lparams;
		k->tparams = x->tparams;
		k->tmaps = x->tmaps;
		x->dptr = self.dptr;
		x->params = self.params;
		x->lparams = self.lparams;
		x->tparams = self.tparams;
		x->tmaps = self.tmaps;
	}
	return rc;
}

/* x->exec: `calls` launch sequences captured from x->stream as one graph,
 * call i on copy i % x->ncopies. */
static int graph_of(cuda_ctx *x, long calls, tir_child_report *rep)
{
	const cu_api *cu = &x->cu;
	if (x->exec && x->graph_calls == calls)
		return 0;
	graph_drop(x);
	if (cuda_rotation(x, rep))
		return -1;
	CU_TRY(cu->StreamBeginCapture(x->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
	       "capturing the launches");
	int rc = 0;
	void ***own = x->lparams;
	for (long i = 0; i < calls && rc == 0; i++) {
		x->lparams = x->copies[i % x->ncopies].lparams;
		rc = cuda_launch_all(x, rep);
	}
	x->lparams = own;
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

/* The profiler timer's n calls: at most as many launch sequences as the
 * profiler has ranges for (PROF_MAX_RANGES kernels), each on the next copy of the
 * rotation, each kernel profiled alone; the sum of their durations scaled
 * to n calls. */
static int cuda_timed_profiled(cuda_ctx *x, long n, double *us, tir_child_report *rep)
{
	const cu_api *cu = &x->cu;
	int per = x->c->nlaunches > 0 ? x->c->nlaunches : 1;
	long calls = cuda_prof_max_ranges(x->prof) / per;
	if (calls > n)
		calls = n;
	if (calls < 1) {
		snprintf(rep->msg, sizeof rep->msg, "cuda profiler: %d kernels in one call, more "
			 "than the %d a collection holds", per, cuda_prof_max_ranges(x->prof));
		rep->status = TIR_MEASURE_RUN_ERROR;
		return -1;
	}
	if (cuda_rotation(x, rep))
		return -1;
	if (cuda_prof_begin(x->prof, rep->msg, sizeof rep->msg)) {
		rep->status = TIR_MEASURE_RUN_ERROR;
		return -1;
	}
	int rc = 0;
	void ***own = x->lparams;
	for (long i = 0; i < calls && rc == 0; i++) {
		x->lparams = x->copies[x->prof_next++ % x->ncopies].lparams;
		rc = cuda_launch_all(x, rep);
	}
	x->lparams = own;
	CUresult e = cu->CtxSynchronize();
	double sum = 0;
	char why[sizeof rep->msg];
	int ended = cuda_prof_end(x->prof, (int)(calls * per), &sum, why, sizeof why);
	if (rc)
		return -1;
	if (e != CUDA_SUCCESS)
		return cuda_api_fail(cu, rep, e, "running the kernels");
	if (ended) {
		memcpy(rep->msg, why, sizeof why);
		rep->status = TIR_MEASURE_RUN_ERROR;
		return -1;
	}
	*us = sum * (double)n / (double)calls;
	return 0;
}

/* n calls timed: by the profiler timer where it is on, else with events
 * around replays of a CUDA graph of up to GRAPH_MAX_CALLS launch sequences
 * (the device time of the calls, without the host's launch gaps between
 * them), the time scaled to n calls. */
int cuda_timed(void *ctx, long n, double *us, tir_child_report *rep)
{
	cuda_ctx *x = ctx;
	const cu_api *cu = &x->cu;
	if (x->prof)
		return cuda_timed_profiled(x, n, us, rep);
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

/* x->fn[] (allocated) for every launch of x->c from mod, opted in to the
 * dynamic shared memory each launch asks for beyond the default 48 KiB. */
int cuda_get_kernels(cuda_ctx *x, CUmodule mod, tir_child_report *rep)
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

/* ---- the launch term -------------------------------------------------------------------------- */

/* An empty kernel, as PTX the driver compiles for the device. */
static const char EMPTY_PTX[] =
	".version 7.0\n.target sm_50\n.address_size 64\n"
	".visible .entry tird_empty() { ret; }\n";
/* The launch term's replays of a graph of GRAPH_MAX_CALLS empty kernels;
 * the median counts. */
#define LAUNCH_REPLAYS 7

/* x->launch_us: the time per call of an empty kernel (LAUNCH_BLOCKS blocks
 * of LAUNCH_THREADS threads) back to back in a graph on x->stream, the
 * median of LAUNCH_REPLAYS replays.  Why it is added to every figure: see
 * the file's comment. */
static int launch_term(cuda_ctx *x, tir_child_report *rep)
{
	const cu_api *cu = &x->cu;
	CUmodule mod;
	CUfunction fn;
	CU_TRY(cu->ModuleLoadData(&mod, EMPTY_PTX), "loading the empty kernel of the launch term");
	CUresult e = cu->ModuleGetFunction(&fn, mod, "tird_empty");
	if (e != CUDA_SUCCESS) {
		cu->ModuleUnload(mod);
		return cuda_api_fail(cu, rep, e, "the empty kernel of the launch term");
	}
	CUgraph g = NULL;
	CUgraphExec exec = NULL;
	int rc = 0;
	e = cu->StreamBeginCapture(x->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
	for (int i = 0; i < GRAPH_MAX_CALLS && e == CUDA_SUCCESS; i++)
		e = cu->LaunchKernel(fn, LAUNCH_BLOCKS, 1, 1, LAUNCH_THREADS, 1, 1, 0, x->stream,
				     NULL, NULL);
	CUresult e2 = cu->StreamEndCapture(x->stream, &g);
	if (e == CUDA_SUCCESS)
		e = e2;
	if (e == CUDA_SUCCESS)
		e = cu->GraphInstantiate(&exec, g, 0);
	double per[LAUNCH_REPLAYS];
	for (int r = -1; r < LAUNCH_REPLAYS && e == CUDA_SUCCESS; r++) {
		float ms = 0;
		if ((e = cu->EventRecord(x->start, x->stream)) == CUDA_SUCCESS &&
		    (e = cu->GraphLaunch(exec, x->stream)) == CUDA_SUCCESS &&
		    (e = cu->EventRecord(x->stop, x->stream)) == CUDA_SUCCESS &&
		    (e = cu->EventSynchronize(x->stop)) == CUDA_SUCCESS &&
		    (e = cu->EventElapsedTime(&ms, x->start, x->stop)) == CUDA_SUCCESS && r >= 0)
			per[r] = (double)ms * 1e3 / GRAPH_MAX_CALLS;    /* r = -1: the warm-up */
	}
	if (e != CUDA_SUCCESS)
		rc = cuda_api_fail(cu, rep, e, "timing the empty kernel of the launch term");
	if (exec)
		cu->GraphExecDestroy(exec);
	if (g)
		cu->GraphDestroy(g);
	cu->ModuleUnload(mod);
	if (rc)
		return rc;
	x->launch_us = tir_median(per, LAUNCH_REPLAYS);
	return 0;
}

void cuda_add_launch_term(const cuda_ctx *x, tir_child_report *rep)
{
	double add = x->launch_us * x->c->nlaunches;
	if (rep->median_us > 0)
		rep->median_us += add;
	for (int i = 0; i < rep->nrepeats && i < TIR_MEASURE_MAX_REPEATS; i++)
		rep->repeat_us[i] += add;
	rep->launch_us = x->launch_us;
	rep->timer = x->prof ? TIR_TIMER_PROFILER : TIR_TIMER_GRAPH;
}

/* The events and the L2-flush buffer (twice the L2) of the timing loop,
 * and the launch term. */
int cuda_timing_init(cuda_ctx *x, int l2, tir_child_report *rep)
{
	const cu_api *cu = &x->cu;
	CU_TRY(cu->EventCreate(&x->start, CU_EVENT_DEFAULT), "cuEventCreate");
	CU_TRY(cu->EventCreate(&x->stop, CU_EVENT_DEFAULT), "cuEventCreate");
	CU_TRY(cu->StreamCreate(&x->stream, CU_STREAM_DEFAULT), "cuStreamCreate");
	x->flush_bytes = l2 > 0 ? (size_t)l2 * 2 : (size_t)256 << 20;
	const char *mode = getenv("TIRD_CUDA_L2");    /* "warm": no rotation */
	x->warm_l2 = mode && strcmp(mode, "warm") == 0;
	CU_TRY(cu->MemAlloc(&x->flush, x->flush_bytes), "allocating the L2 flush buffer");
	/* the timer: TIRD_CUDA_TIMER=graph (the default), profiler, or auto
	 * (the profiler where CUPTI's can run, else the graph).  The graph
	 * stays the default while records do not say which timer took them:
	 * a store of graph figures would keep its bests against profiler
	 * figures a few tenths of a microsecond a kernel slower. */
	const char *timer = getenv("TIRD_CUDA_TIMER");
	if (!timer || !*timer)
		timer = "graph";
	bool must = strcmp(timer, "profiler") == 0;
	if (!must && strcmp(timer, "auto") != 0 && strcmp(timer, "graph") != 0) {
		snprintf(rep->msg, sizeof rep->msg, "cuda: TIRD_CUDA_TIMER is \"%.40s\"; "
			 "profiler, graph or auto", timer);
		rep->status = TIR_MEASURE_RUN_ERROR;
		return -1;
	}
	if (strcmp(timer, "graph") != 0) {
		char why[sizeof rep->msg];
		x->prof = cuda_prof_open(cu->ctx, x->o->device, PROF_MAX_RANGES, why, sizeof why);
		if (x->prof) {
			x->launch_us = 0;   /* each kernel's duration is its own, launch included */
			return 0;
		}
		if (must) {
			memcpy(rep->msg, why, sizeof why);
			rep->status = TIR_MEASURE_RUN_ERROR;
			return -1;
		}
	}
	return launch_term(x, rep);
}

int cuda_out_of_memory(tir_child_report *rep, const char *what)
{
	snprintf(rep->msg, sizeof rep->msg, "out of memory for %s", what);
	rep->status = TIR_MEASURE_RUN_ERROR;
	return -1;
}

static int cuda_child_run(cuda_ctx *x, tir_child_report *rep)
{
	const tir_code *c = x->c;
	cu_api *cu = &x->cu;
	int sm = 0, l2 = 0;
	CUmodule mod;
	if (cuda_api_open(cu, x->o->device, &sm, &l2, rep))
		return -1;
	cuda_device_turn(cu, true);   /* to the end of this child */
	CU_TRY(cu->ModuleLoadData(&mod, x->a->image),
	       "loading the cubin for sm_%d on a device of sm_%d", x->a->sm, sm);

	x->fn = calloc((size_t)c->nlaunches + 1, sizeof *x->fn);
	x->dptr = calloc((size_t)c->nargs + 1, sizeof *x->dptr);
	x->params = calloc((size_t)c->nargs + 1, sizeof *x->params);
	if (!x->fn || !x->dptr || !x->params)
		return cuda_out_of_memory(rep, "the arguments");
	if (cuda_get_kernels(x, mod, rep))
		return -1;

	for (int i = 0; i < c->nargs; i++) {
		const tir_arg_info *a = &c->args[i];
		size_t bytes = cuda_arg_bytes(a);
		CU_TRY(cu->MemAlloc(&x->dptr[i], bytes ? bytes : 1),
		       "allocating %zu bytes for \"%s\"", bytes, a->name);
		x->params[i] = &x->dptr[i];
		if (a->is_scratch) {
			CU_TRY(cu->MemsetD8(x->dptr[i], 0, bytes), "clearing \"%s\"", a->name);
			continue;
		}
		void *host = malloc(bytes ? bytes : 1);
		if (!host)
			return cuda_out_of_memory(rep, a->name);
		tir_measure_fill(c, i, x->o->seed, host);
		CUresult r = cu->MemcpyHtoD(x->dptr[i], host, bytes);
		free(host);
		if (r != CUDA_SUCCESS)
			return cuda_api_fail(cu, rep, r, "copying \"%s\" to the device", a->name);
	}

	if (cuda_launch_params(x, rep))
		return -1;
	/* One run, for the outputs: copied back concatenated in argument order
	 * (tir_code_outputs_pack's layout). */
	if (cuda_launch_all(x, rep))
		return -1;
	CU_TRY(cu->CtxSynchronize(), "running the kernels");
	if (tir_code_output_bytes(c) <= rep->out_bytes) {
		unsigned char *at = rep->out;
		for (int i = 0; i < c->nargs; i++) {
			if (!c->args[i].is_output)
				continue;
			size_t bytes = cuda_arg_bytes(&c->args[i]);
			CU_TRY(cu->MemcpyDtoH(at, x->dptr[i], bytes), "copying the output \"%s\" back",
			       c->args[i].name);
			at += bytes;
		}
		rep->output_ready = 1;
	}
	if (x->o->no_timing)
		return 0;
	if (cuda_timing_init(x, l2, rep) || tir_time_repeats(x->o, x, cuda_flush, cuda_timed, rep))
		return -1;
	cuda_add_launch_term(x, rep);
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

int cuda_run(const tir_artifact *a, const tir_code *c, const tir_measure_opts *opts,
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

#else /* !HAVE_CUDA */

int cuda_run(const tir_artifact *a, const tir_code *c, const tir_measure_opts *opts,
	     tir_measure_result *r)
{
	free(r->output);
	memset(r, 0, sizeof *r);
	r->max_rel_error = -1;
	r->status = TIR_MEASURE_RUN_ERROR;
	snprintf(r->msg, sizeof r->msg, "cuda: libtir was built without CUDA");
	return -1;
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
	.run_batch = cuda_run_batch,
	.stream_start = cuda_stream_start,
	.stream_put = cuda_stream_put,
	.stream_finish = cuda_stream_finish,
};
