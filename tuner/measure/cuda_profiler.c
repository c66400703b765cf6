/*
 * cuda_profiler.c — the profiler timer of the CUDA runner: each kernel's
 * gpu__time_duration.sum read from the GPU's own counters through CUPTI's
 * range profiler, the figure Nsight Compute reports for a kernel, taken in
 * the measuring process (cuda_runner.h: cuda_prof_*).
 *
 * Why: a kernel's time back to back in a graph (the graph timer) hides the
 * part of its launch that overlaps the kernel before it, and events around
 * one call count the host's launch and the events themselves; neither came
 * within 5% of ncu's duration for kernels under about 15 us
 * (bench/results/2026-12-07-h100-harness-context.txt).  The profiler reads
 * the counter ncu reads, per kernel, each kernel run alone: what a kernel
 * costs where it runs among other work.
 *
 * CUPTI is loaded with dlopen ("libcupti.so.13", then "libcupti.so") in the
 * measuring child, like the driver, never linked.  The ranges are CUPTI's
 * automatic ones, one per kernel, replayed by CUPTI where the metric needs
 * more than one pass (gpu__time_duration needs one).  A session's counter
 * image holds at most max_ranges kernels; it is set up anew before each
 * collection.
 *
 * The GPU's counters serve one process at a time (another gets
 * CUPTI_ERROR_HARDWARE_BUSY), so the profiler is enabled on the context
 * only while the measuring process holds its turn on the device
 * (cuda_device_turn): at a candidate's first collection, and disabled when
 * the candidate is released.  The configuration (the host object, the
 * counters' availability) is made once, when the timing is set up, under
 * the turn too.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_runner.h"

#ifdef HAVE_CUDA
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_result.h>
#include <cupti_target.h>

/* The metric: the kernel's duration on the GPU, in nanoseconds. */
static const char *const METRIC[] = { "gpu__time_duration.sum" };

typedef struct cupti_api {
	void *lib;
	CUptiResult (*GetResultString)(CUptiResult, const char **);
	CUptiResult (*ProfilerInitialize)(CUpti_Profiler_Initialize_Params *);
	CUptiResult (*DeviceGetChipName)(CUpti_Device_GetChipName_Params *);
	CUptiResult (*GetCounterAvailability)(CUpti_Profiler_GetCounterAvailability_Params *);
	CUptiResult (*HostInitialize)(CUpti_Profiler_Host_Initialize_Params *);
	CUptiResult (*HostDeinitialize)(CUpti_Profiler_Host_Deinitialize_Params *);
	CUptiResult (*HostConfigAddMetrics)(CUpti_Profiler_Host_ConfigAddMetrics_Params *);
	CUptiResult (*HostGetConfigImageSize)(CUpti_Profiler_Host_GetConfigImageSize_Params *);
	CUptiResult (*HostGetConfigImage)(CUpti_Profiler_Host_GetConfigImage_Params *);
	CUptiResult (*HostGetNumOfPasses)(CUpti_Profiler_Host_GetNumOfPasses_Params *);
	CUptiResult (*HostEvaluateToGpuValues)(CUpti_Profiler_Host_EvaluateToGpuValues_Params *);
	CUptiResult (*Enable)(CUpti_RangeProfiler_Enable_Params *);
	CUptiResult (*Disable)(CUpti_RangeProfiler_Disable_Params *);
	CUptiResult (*GetCounterDataSize)(CUpti_RangeProfiler_GetCounterDataSize_Params *);
	CUptiResult (*CounterDataImageInitialize)(
		CUpti_RangeProfiler_CounterDataImage_Initialize_Params *);
	CUptiResult (*SetConfig)(CUpti_RangeProfiler_SetConfig_Params *);
	CUptiResult (*Start)(CUpti_RangeProfiler_Start_Params *);
	CUptiResult (*Stop)(CUpti_RangeProfiler_Stop_Params *);
	CUptiResult (*DecodeData)(CUpti_RangeProfiler_DecodeData_Params *);
	CUptiResult (*GetCounterDataInfo)(CUpti_RangeProfiler_GetCounterDataInfo_Params *);
} cupti_api;

#define CUPTI_SYM(field, name) { offsetof(cupti_api, field), name }
static const struct { size_t off; const char *name; } cupti_syms[] = {
	CUPTI_SYM(GetResultString, "cuptiGetResultString"),
	CUPTI_SYM(ProfilerInitialize, "cuptiProfilerInitialize"),
	CUPTI_SYM(DeviceGetChipName, "cuptiDeviceGetChipName"),
	CUPTI_SYM(GetCounterAvailability, "cuptiProfilerGetCounterAvailability"),
	CUPTI_SYM(HostInitialize, "cuptiProfilerHostInitialize"),
	CUPTI_SYM(HostDeinitialize, "cuptiProfilerHostDeinitialize"),
	CUPTI_SYM(HostConfigAddMetrics, "cuptiProfilerHostConfigAddMetrics"),
	CUPTI_SYM(HostGetConfigImageSize, "cuptiProfilerHostGetConfigImageSize"),
	CUPTI_SYM(HostGetConfigImage, "cuptiProfilerHostGetConfigImage"),
	CUPTI_SYM(HostGetNumOfPasses, "cuptiProfilerHostGetNumOfPasses"),
	CUPTI_SYM(HostEvaluateToGpuValues, "cuptiProfilerHostEvaluateToGpuValues"),
	CUPTI_SYM(Enable, "cuptiRangeProfilerEnable"),
	CUPTI_SYM(Disable, "cuptiRangeProfilerDisable"),
	CUPTI_SYM(GetCounterDataSize, "cuptiRangeProfilerGetCounterDataSize"),
	CUPTI_SYM(CounterDataImageInitialize, "cuptiRangeProfilerCounterDataImageInitialize"),
	CUPTI_SYM(SetConfig, "cuptiRangeProfilerSetConfig"),
	CUPTI_SYM(Start, "cuptiRangeProfilerStart"),
	CUPTI_SYM(Stop, "cuptiRangeProfilerStop"),
	CUPTI_SYM(DecodeData, "cuptiRangeProfilerDecodeData"),
	CUPTI_SYM(GetCounterDataInfo, "cuptiRangeProfilerGetCounterDataInfo"),
};

struct cuda_prof {
	cupti_api api;
	CUcontext ctx;
	CUpti_Profiler_Host_Object *host;
	CUpti_RangeProfiler_Object *obj;
	uint8_t *config, *counters, *avail;
	size_t config_size, counters_size;
	int max_ranges;
	int passes;
};

/* "cuda profiler: what: CUPTI_ERROR_... (text)" into msg; returns -1. */
static int prof_fail(const cupti_api *a, CUptiResult r, char *msg, size_t size,
		     const char *what)
{
	const char *s = NULL;
	if (a->GetResultString)
		a->GetResultString(r, &s);
	snprintf(msg, size, "cuda profiler: %s: error %d%s%s%s", what, (int)r,
		 s ? " (" : "", s ? s : "", s ? ")" : "");
	return -1;
}

static int prof_oom(char *msg, size_t size)
{
	snprintf(msg, size, "cuda profiler: out of memory");
	return -1;
}

#define PROF_TRY(call, what) do { CUptiResult r_ = (call); \
	if (r_ != CUPTI_SUCCESS) return prof_fail(&p->api, r_, msg, size, what); } while (0)

static int prof_load(cupti_api *a, char *msg, size_t size)
{
	memset(a, 0, sizeof *a);
	a->lib = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
	if (!a->lib)
		a->lib = dlopen("libcupti.so", RTLD_NOW | RTLD_LOCAL);
	if (!a->lib) {
		snprintf(msg, size, "cuda profiler: CUPTI could not be loaded (%s)", dlerror());
		return -1;
	}
	for (size_t i = 0; i < sizeof cupti_syms / sizeof cupti_syms[0]; i++) {
		void *f = dlsym(a->lib, cupti_syms[i].name);
		if (!f) {
			snprintf(msg, size, "cuda profiler: this CUPTI lacks %s (CUDA 12.6 or "
				 "later has it)", cupti_syms[i].name);
			return -1;
		}
		memcpy((char *)a + cupti_syms[i].off, &f, sizeof f);
	}
	return 0;
}

/* The host object with the metric, its configuration image and the number
 * of passes it takes. */
static int prof_configure(cuda_prof *p, CUcontext ctx, int device, char *msg, size_t size)
{
	CUpti_Profiler_Initialize_Params init = { CUpti_Profiler_Initialize_Params_STRUCT_SIZE };
	PROF_TRY(p->api.ProfilerInitialize(&init), "initialising CUPTI's profiler");
	CUpti_Device_GetChipName_Params chip = { CUpti_Device_GetChipName_Params_STRUCT_SIZE };
	chip.deviceIndex = (size_t)device;
	PROF_TRY(p->api.DeviceGetChipName(&chip), "the device's chip name");

	CUpti_Profiler_GetCounterAvailability_Params av =
		{ CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE };
	av.ctx = ctx;
	PROF_TRY(p->api.GetCounterAvailability(&av), "the counters' availability");
	p->avail = malloc(av.counterAvailabilityImageSize + 1);
	if (!p->avail)
		return prof_oom(msg, size);
	av.pCounterAvailabilityImage = p->avail;
	PROF_TRY(p->api.GetCounterAvailability(&av), "the counters' availability");

	CUpti_Profiler_Host_Initialize_Params hi = { CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE };
	hi.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
	hi.pChipName = chip.pChipName;
	hi.pCounterAvailabilityImage = p->avail;
	PROF_TRY(p->api.HostInitialize(&hi), "the profiler's host object");
	p->host = hi.pHostObject;

	CUpti_Profiler_Host_ConfigAddMetrics_Params am =
		{ CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE };
	am.pHostObject = p->host;
	am.ppMetricNames = (const char **)METRIC;
	am.numMetrics = 1;
	PROF_TRY(p->api.HostConfigAddMetrics(&am), "adding gpu__time_duration.sum");
	CUpti_Profiler_Host_GetConfigImageSize_Params cs =
		{ CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE };
	cs.pHostObject = p->host;
	PROF_TRY(p->api.HostGetConfigImageSize(&cs), "the configuration's size");
	p->config_size = cs.configImageSize;
	p->config = malloc(p->config_size + 1);
	if (!p->config)
		return prof_oom(msg, size);
	CUpti_Profiler_Host_GetConfigImage_Params ci =
		{ CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE };
	ci.pHostObject = p->host;
	ci.configImageSize = p->config_size;
	ci.pConfigImage = p->config;
	PROF_TRY(p->api.HostGetConfigImage(&ci), "the configuration");
	CUpti_Profiler_Host_GetNumOfPasses_Params np =
		{ CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE };
	np.configImageSize = p->config_size;
	np.pConfigImage = p->config;
	PROF_TRY(p->api.HostGetNumOfPasses(&np), "the configuration's passes");
	p->passes = (int)np.numOfPasses;
	return 0;
}

/* The range profiler on p->ctx and (the first time) its counter image of
 * p->max_ranges kernels. */
static int prof_enable(cuda_prof *p, char *msg, size_t size)
{
	CUpti_RangeProfiler_Enable_Params en = { CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE };
	en.ctx = p->ctx;
	PROF_TRY(p->api.Enable(&en), "enabling the range profiler");
	p->obj = en.pRangeProfilerObject;
	if (p->counters)
		return 0;
	CUpti_RangeProfiler_GetCounterDataSize_Params ds =
		{ CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE };
	ds.pRangeProfilerObject = p->obj;
	ds.pMetricNames = (const char **)METRIC;
	ds.numMetrics = 1;
	ds.maxNumOfRanges = (size_t)p->max_ranges;
	ds.maxNumRangeTreeNodes = (uint32_t)p->max_ranges;
	PROF_TRY(p->api.GetCounterDataSize(&ds), "the counter image's size");
	p->counters_size = ds.counterDataSize;
	p->counters = malloc(p->counters_size + 1);
	if (!p->counters)
		return prof_oom(msg, size);
	return 0;
}

cuda_prof *cuda_prof_open(CUcontext ctx, int device, int max_ranges, char *msg, size_t size)
{
	cuda_prof *p = calloc(1, sizeof *p);
	if (!p) {
		prof_oom(msg, size);
		return NULL;
	}
	p->max_ranges = max_ranges > 0 ? max_ranges : 1;
	p->ctx = ctx;
	if (prof_load(&p->api, msg, size) || prof_configure(p, ctx, device, msg, size)) {
		cuda_prof_close(p);
		return NULL;
	}
	return p;
}

void cuda_prof_release(cuda_prof *p)
{
	if (!p || !p->obj)
		return;
	CUpti_RangeProfiler_Disable_Params d = { CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE };
	d.pRangeProfilerObject = p->obj;
	p->api.Disable(&d);
	p->obj = NULL;
}

void cuda_prof_close(cuda_prof *p)
{
	if (!p)
		return;
	cuda_prof_release(p);
	if (p->host) {
		CUpti_Profiler_Host_Deinitialize_Params d =
			{ CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE };
		d.pHostObject = p->host;
		p->api.HostDeinitialize(&d);
	}
	/* the library stays loaded: the driver keeps CUPTI's hooks to the end
	 * of the process */
	free(p->config);
	free(p->counters);
	free(p->avail);
	free(p);
}

int cuda_prof_max_ranges(const cuda_prof *p)
{
	return p->max_ranges;
}

int cuda_prof_begin(cuda_prof *p, char *msg, size_t size)
{
	if (!p->obj && prof_enable(p, msg, size))
		return -1;
	CUpti_RangeProfiler_CounterDataImage_Initialize_Params ci =
		{ CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE };
	ci.pRangeProfilerObject = p->obj;
	ci.counterDataSize = p->counters_size;
	ci.pCounterData = p->counters;
	PROF_TRY(p->api.CounterDataImageInitialize(&ci), "clearing the counter image");
	CUpti_RangeProfiler_SetConfig_Params sc = { CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE };
	sc.pRangeProfilerObject = p->obj;
	sc.configSize = p->config_size;
	sc.pConfig = p->config;
	sc.counterDataImageSize = p->counters_size;
	sc.pCounterDataImage = p->counters;
	sc.range = CUPTI_AutoRange;
	sc.replayMode = CUPTI_KernelReplay;
	sc.maxRangesPerPass = (size_t)p->max_ranges;
	sc.numNestingLevels = 1;
	sc.minNestingLevel = 1;
	sc.passIndex = 0;
	sc.targetNestingLevel = 1;
	PROF_TRY(p->api.SetConfig(&sc), "configuring the range profiler");
	CUpti_RangeProfiler_Start_Params st = { CUpti_RangeProfiler_Start_Params_STRUCT_SIZE };
	st.pRangeProfilerObject = p->obj;
	PROF_TRY(p->api.Start(&st), "starting the range profiler");
	return 0;
}

int cuda_prof_end(cuda_prof *p, int kernels, double *us, char *msg, size_t size)
{
	CUpti_RangeProfiler_Stop_Params sp = { CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE };
	sp.pRangeProfilerObject = p->obj;
	PROF_TRY(p->api.Stop(&sp), "stopping the range profiler");
	if (!sp.isAllPassSubmitted) {
		snprintf(msg, size, "cuda profiler: gpu__time_duration.sum took more than "
			 "one pass (%d)", p->passes);
		return -1;
	}
	CUpti_RangeProfiler_DecodeData_Params dd = { CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE };
	dd.pRangeProfilerObject = p->obj;
	PROF_TRY(p->api.DecodeData(&dd), "decoding the counters");
	CUpti_RangeProfiler_GetCounterDataInfo_Params di =
		{ CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE };
	di.pCounterDataImage = p->counters;
	di.counterDataImageSize = p->counters_size;
	PROF_TRY(p->api.GetCounterDataInfo(&di), "the counter image's ranges");
	if (dd.numOfRangeDropped > 0 || di.numTotalRanges != (size_t)kernels) {
		snprintf(msg, size, "cuda profiler: %zu kernels profiled (%zu dropped) of the "
			 "%d launched", di.numTotalRanges, dd.numOfRangeDropped, kernels);
		return -1;
	}
	double sum_ns = 0;
	for (size_t r = 0; r < di.numTotalRanges; r++) {
		double v = 0;
		CUpti_Profiler_Host_EvaluateToGpuValues_Params ev =
			{ CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE };
		ev.pHostObject = p->host;
		ev.pCounterDataImage = p->counters;
		ev.counterDataImageSize = p->counters_size;
		ev.rangeIndex = r;
		ev.ppMetricNames = (const char **)METRIC;
		ev.numMetrics = 1;
		ev.pMetricValues = &v;
		PROF_TRY(p->api.HostEvaluateToGpuValues(&ev), "evaluating gpu__time_duration.sum");
		if (!(v > 0)) {
			snprintf(msg, size, "cuda profiler: kernel %zu of %d has no duration (%g ns)",
				 r + 1, kernels, v);
			return -1;
		}
		sum_ns += v;
	}
	*us = sum_ns * 1e-3;
	return 0;
}

#endif /* HAVE_CUDA */
