/*
 * pack.h — what `tirctl pack` (pack.c: fetching and lowering the bests) hands
 * to its writer (pack_write.c: the files of the kernel library).  Internal
 * to client/.
 */
#ifndef TIRCTL_PACK_H
#define TIRCTL_PACK_H

#include <stddef.h>
#include <cJSON.h>
#include "tir.h"

/* One packed kernel: the best it comes from (/v1/best's entry: workload,
 * workload_key, op, target, latency_us, record_id), its code, and for CUDA
 * the cubin NVRTC made of it. */
typedef struct pack_kernel {
	const cJSON *best;
	tir_code *code;
	char *cubin;
	size_t cubin_size;
} pack_kernel;

typedef struct pack_write_opts {
	const char *dir;           /* created; must not exist */
	const tir_target *target;  /* every kernel's */
	const char *version;       /* tird's, for the manifest */
} pack_write_opts;

/* Writes the library of the n kernels into o->dir.  0, or -1 with the fault
 * in msg (the folder then holds a part of it: the caller removes it). */
int pack_write(const pack_write_opts *o, const pack_kernel *k, int n, char *msg, size_t size);

#endif
