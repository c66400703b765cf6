/*
 * nvrtc_parallel.c — NVRTC compiles of many sources at once: in the threads
 * of one process, or in as many processes, side by side.
 *
 *   bench/nvrtc_parallel N FILE.cu...
 *
 * Splits the files into three interleaved thirds and compiles, with tird's
 * NVRTC options for sm_90, the first third in one thread, the second in N
 * threads of this process, the third in N forked processes (each pulling
 * the next file from a shared counter); prints per mode the wall time, the
 * mean time of one compile, the compiles per second and the bytes of cubin.
 * Each file is compiled once: NVRTC keeps what it compiled in a cache on
 * disk (~/.nv/ComputeCache on the H200 machine), and a source compiled
 * again there takes a tenth of the time — give it sources it has not seen
 * (`tirctl --json lower W.json --target cuda:sm_90 --sample N --seed S`
 * prints candidates' generated code;
 * bench/results/2026-11-30-h200-build-processes.txt).
 */
#define _GNU_SOURCE
/* nvrtc.h tests macros it never defines. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wundef"
#include <nvrtc.h>
#pragma GCC diagnostic pop
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char **src;
static int nsrc;
static int *next;                  /* shared: the next file */
static double *secs;               /* shared: per file, its compile */
static long *cubin;                /* shared: per file, its cubin bytes */

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void compile(int i)
{
	const char *opts[] = { "--gpu-architecture=sm_90", "-default-device", "--std=c++17",
			       "-I" CUDA_HOME "/include" };
	double t0 = now();
	nvrtcProgram p;
	size_t n = 0;
	if (nvrtcCreateProgram(&p, src[i], "k.cu", 0, NULL, NULL) == NVRTC_SUCCESS) {
		nvrtcResult r = nvrtcCompileProgram(p, 4, opts);
		if (r == NVRTC_SUCCESS)
			nvrtcGetCUBINSize(p, &n);
		else
			fprintf(stderr, "file %d: %s\n", i, nvrtcGetErrorString(r));
		nvrtcDestroyProgram(&p);
	}
	secs[i] = now() - t0;
	cubin[i] = (long)n;
}

static int lo, hi, step;           /* the mode's files: lo, lo + step, ... < hi */

static void *worker(void *arg)
{
	(void)arg;
	for (int k; (k = __atomic_fetch_add(next, 1, __ATOMIC_SEQ_CST)) * step + lo < hi;)
		compile(k * step + lo);
	return NULL;
}

static void mode(const char *name, int k, int procs, int first)
{
	*next = 0;
	lo = first;
	hi = nsrc;
	step = 3;
	double t0 = now();
	if (procs) {
		for (int j = 0; j < k; j++)
			if (fork() == 0) {
				worker(NULL);
				_exit(0);
			}
		while (wait(NULL) > 0)
			;
	} else {
		pthread_t th[256];
		for (int j = 0; j < k; j++)
			pthread_create(&th[j], NULL, worker, NULL);
		for (int j = 0; j < k; j++)
			pthread_join(th[j], NULL);
	}
	double wall = now() - t0, sum = 0;
	long bytes = 0;
	int n = 0;
	for (int i = first; i < nsrc; i += 3, n++) {
		sum += secs[i];
		bytes += cubin[i];
	}
	printf("%-10s %3d   %3d files   %7.2f s wall   %6.3f s per compile   %6.1f compiles/s   "
	       "%ld cubin bytes\n", name, k, n, wall, n ? sum / n : 0, wall > 0 ? n / wall : 0, bytes);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	int k = argc > 2 ? atoi(argv[1]) : 0;
	if (k < 1 || k > 256) {
		fprintf(stderr, "usage: %s N FILE.cu...   (1 <= N <= 256)\n", argv[0]);
		return 2;
	}
	nsrc = argc - 2;
	src = calloc((size_t)nsrc, sizeof *src);
	for (int i = 0; i < nsrc; i++) {
		FILE *f = fopen(argv[2 + i], "r");
		if (!f) {
			perror(argv[2 + i]);
			return 1;
		}
		fseek(f, 0, SEEK_END);
		long m = ftell(f);
		rewind(f);
		src[i] = calloc((size_t)m + 1, 1);
		if (fread(src[i], 1, (size_t)m, f) != (size_t)m) {
			fprintf(stderr, "%s: short read\n", argv[2 + i]);
			return 1;
		}
		fclose(f);
	}
	size_t sh = sizeof(int) + (sizeof(double) + sizeof(long)) * (size_t)nsrc;
	char *m = mmap(NULL, sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	secs = (double *)m;
	cubin = (long *)(m + sizeof(double) * (size_t)nsrc);
	next = (int *)(m + (sizeof(double) + sizeof(long)) * (size_t)nsrc);
	printf("%d sources in three thirds; mode, workers, files, wall time, mean compile, rate, "
	       "cubin bytes\n", nsrc);
	mode("thread", 1, 0, 0);
	mode("threads", k, 0, 1);
	mode("processes", k, 1, 2);
	return 0;
}
