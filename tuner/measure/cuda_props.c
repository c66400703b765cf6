/*
 * cuda_props.c — tir_cuda_device_props: a GPU's properties, asked from the
 * driver (cuda_driver.c) in a child process (guard.c's tir_child_run), so
 * that the caller never initialises CUDA itself: a forked child of a process
 * that has cannot use CUDA, and the caller may fork measuring children
 * later.
 */
#include <stdio.h>
#include <string.h>
#include "cuda_runner.h"

#ifdef HAVE_CUDA

typedef struct cuda_props {
	int v[7];
	char name[128];            /* the driver's, e.g. "NVIDIA H200" */
} cuda_props;

typedef struct props_ctx {
	int ordinal;
} props_ctx;

static void props_child(void *ctx, tir_child_report *rep)
{
	props_ctx *x = ctx;
	cu_api api, *cu = &api;
	if (cuda_api_load(cu, rep->msg, sizeof rep->msg)) {
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
		cuda_api_fail(cu, rep, r, "cuInit (no usable GPU?)");
		return;
	}
	if ((r = cu->DeviceGet(&dev, x->ordinal)) != CUDA_SUCCESS) {
		cuda_api_fail(cu, rep, r, "no GPU device %d", x->ordinal);
		return;
	}
	for (int i = 0; i < 7; i++)
		if ((r = cu->DeviceGetAttribute(&p.v[i], attrs[i], dev)) != CUDA_SUCCESS) {
			cuda_api_fail(cu, rep, r, "cuDeviceGetAttribute(%d)", (int)attrs[i]);
			return;
		}
	if ((r = cu->DeviceGetName(p.name, (int)sizeof p.name, dev)) != CUDA_SUCCESS) {
		cuda_api_fail(cu, rep, r, "cuDeviceGetName");
		return;
	}
	p.name[sizeof p.name - 1] = '\0';
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
	/* the part in the key: an H100's records, bests and cost model are
	 * never an H200's (one architecture, other memory and clocks) */
	char part[TIR_CUDA_PART_MAX];
	if (tir_cuda_part_of_name(p.name, part, sizeof part))
		snprintf(t->key, sizeof t->key, "cuda:sm_%d+%s", t->sm, part);
	else
		snprintf(t->key, sizeof t->key, "cuda:sm_%d", t->sm);
	t->sm_count = p.v[2];
	t->max_threads_per_block = p.v[3];
	t->max_shared_per_block = p.v[4];
	t->warp_size = p.v[5];
	t->l2_bytes = p.v[6];
	return 0;
}

#else /* !HAVE_CUDA */

int tir_cuda_device_props(int ordinal, tir_target *t, tir_error *err)
{
	return tir_fail(err, "cuda: no GPU driver could be loaded (libtir was built "
			"without CUDA support)");
}

#endif
