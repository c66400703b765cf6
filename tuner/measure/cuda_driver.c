/*
 * cuda_driver.c — the CUDA driver API, loaded at run time: the table of its
 * entry points (cu_api, cuda_runner.h), how its errors are reported, and
 * opening a device's primary context.  Used by the runner (cuda_run.c,
 * cuda_stream.c) and the device query (cuda_props.c).
 *
 * The driver is loaded with dlopen("libcuda.so.1") — never linked, so one
 * binary runs on machines with and without a GPU — and ONLY in the child
 * processes of guard.c's guards.  CUDA is not fork-safe: a child forked from
 * a process that has called cuInit cannot use the GPU, so nothing here
 * touches the driver in the caller (tir_cuda_device_props asks in a child
 * too).
 *
 * A faulting kernel (illegal address, misaligned access, trap) is CRASH;
 * other driver errors (no binary for this GPU, too many resources requested)
 * are RUN_ERROR (cuda_api_fail decides); a kernel that never ends is killed by the
 * parent's watchdog (TIMEOUT).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cuda_runner.h"

#ifdef HAVE_CUDA

/* Every entry point with the exported names to try, newest first (cuda.h
 * maps the API names to these versioned symbols). */
#define CU_SYM(field, ...) { offsetof(cu_api, field), { __VA_ARGS__, NULL } }
static const struct { size_t off; const char *names[3]; } cu_syms[] = {
	CU_SYM(Init, "cuInit"),
	CU_SYM(DeviceGet, "cuDeviceGet"),
	CU_SYM(DeviceGetCount, "cuDeviceGetCount"),
	CU_SYM(DeviceGetAttribute, "cuDeviceGetAttribute"),
	CU_SYM(DeviceGetName, "cuDeviceGetName"),
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
	CU_SYM(MemcpyDtoD, "cuMemcpyDtoD_v2"),
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
int cuda_api_load(cu_api *cu, char *msg, size_t size)
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
int cuda_api_fail(const cu_api *cu, tir_child_report *rep, CUresult r,
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

static void turn_open(cu_api *cu, CUdevice dev);

/* Loads the driver and makes device's primary context current; its compute
 * capability (90 for sm_90) in *sm, its L2 size in *l2. */
int cuda_api_open(cu_api *cu, int device, int *sm, int *l2, tir_child_report *rep)
{
	if (cuda_api_load(cu, rep->msg, sizeof rep->msg)) {
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
	cu->ctx = ctx;
	*sm = major * 10 + minor;
	turn_open(cu, dev);
	return 0;
}

/* The device's lock file (cuda_device_turn), by its PCI address: the same
 * for every process whatever CUDA_VISIBLE_DEVICES numbers it. */
static void turn_open(cu_api *cu, CUdevice dev)
{
	int dom = 0, bus = 0, slot = 0;
	if (cu->DeviceGetAttribute(&dom, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev) ||
	    cu->DeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev) ||
	    cu->DeviceGetAttribute(&slot, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev))
		return;
	const char *dir = getenv("TMPDIR");
	char path[512];
	snprintf(path, sizeof path, "%s/tird-cuda-%04x-%02x-%02x.lock",
		 dir && *dir ? dir : "/tmp", dom, bus, slot);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (fd >= 0)
		cu->turn_fd = fd + 1;
}

void cuda_device_turn(cu_api *cu, bool take)
{
	if (cu->turn_fd <= 0)
		return;
	struct flock l = { .l_type = take ? F_WRLCK : F_UNLCK, .l_whence = SEEK_SET };
	while (fcntl(cu->turn_fd - 1, take ? F_SETLKW : F_SETLK, &l) < 0 && errno == EINTR)
		;
}

#endif /* HAVE_CUDA */
