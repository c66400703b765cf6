/*
 * nvrtc.c — CUDA C → cubin with NVRTC, in process.
 *
 * NVRTC is linked (configure finds it beside the toolkit); it needs no GPU,
 * so a build machine without one compiles for any sm_XY.  The toolkit's
 * include directory is on the path for <cuda_fp16.h> and friends: CUDA_HOME
 * from configure, overridden at run time by $TIRD_CUDA_HOME, so a binary
 * carried to a machine with the toolkit elsewhere still finds the headers.
 * A program is compiled for a real architecture (sm_XY, not compute_XY) so
 * the result is SASS the driver loads without a JIT step.
 *
 * NVRTC runs in a forked child, which sends the cubin (or the log) back
 * through a pipe.  Where a GPU driver is installed, NVRTC 13 loads libcuda
 * and initialises it (seen on the H200 machine): after that, no child forked
 * by this process can use CUDA (cuInit gives CUDA_ERROR_NOT_INITIALIZED), and
 * the CUDA runner measures in forked children.  The fork costs about a
 * millisecond against NVRTC's tens, but the child starts NVRTC (and libcuda)
 * afresh for every compile.  A process that never measures compiles in
 * itself instead: tir_nvrtc_in_process (measure/batch.c's builder
 * processes, which enforce the time limit themselves), or
 * TIRD_NVRTC_IN_PROCESS=1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include "codegen.h"

#ifdef HAVE_CUDA
/* nvrtc.h tests macros it never defines. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wundef"
#include <nvrtc.h>
#pragma GCC diagnostic pop

#ifndef CUDA_HOME
#define CUDA_HOME "/usr/local/cuda"
#endif

static bool in_process;     /* tir_nvrtc_in_process */

void tir_nvrtc_in_process(bool on)
{
	in_process = on;
}

/* Fills err with what failed and as much of the log as fits (its end, where
 * NVRTC puts the summary, is dropped first: the first error is what helps). */
static int fail_with_log(nvrtcProgram prog, const char *what, nvrtcResult r,
			 tir_error *err)
{
	size_t n = 0;
	char *log = NULL;
	if (nvrtcGetProgramLogSize(prog, &n) == NVRTC_SUCCESS && n > 1) {
		log = xmalloc(n + 1);
		if (nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS)
			log[0] = '\0';
		log[n] = '\0';
	}
	tir_fail(err, "nvrtc: %s failed (%s)%s%s", what, nvrtcGetErrorString(r),
		 log && log[0] ? ":\n" : "", log ? log : "");
	free(log);
	return -1;
}

/* $TIRD_NVRTC_OPTIONS: options added after tird's own, separated by blanks
 * (e.g. --Ofast-compile=min: NVVM's optimizer is most of a compile).  They
 * are part of a build's key (measure/batch.c), so a cached build is never
 * one made with other options. */
#define NVRTC_MAX_EXTRA 8
#define NVRTC_EXTRA_LEN 512

/* The compilation itself, in whichever process calls it. */
static int compile_here(const char *source, int sm, char **cubin, size_t *size,
			tir_error *err)
{
	const char *home = getenv("TIRD_CUDA_HOME");
	if (!home || !*home)
		home = CUDA_HOME;

	char arch[48], inc[1100];
	/* 9.0 as sm_90a: its arch-specific instructions (wgmma) are what the
	 * "a" adds, and a cubin for sm_90 runs on 9.0 devices only anyway */
	snprintf(arch, sizeof arch, "--gpu-architecture=sm_%d%s", sm, sm == 90 ? "a" : "");
	snprintf(inc, sizeof inc, "-I%s/include", home);
	const char *opts[4 + NVRTC_MAX_EXTRA] = { arch, "-default-device", "--std=c++17", inc };
	char extra[NVRTC_EXTRA_LEN];
	int nopts = 4;
	const char *env = getenv("TIRD_NVRTC_OPTIONS");
	if (env && *env) {
		if (strlen(env) >= sizeof extra)
			return tir_fail(err, "nvrtc: TIRD_NVRTC_OPTIONS is longer than %zu bytes",
					sizeof extra - 1);
		strcpy(extra, env);
		for (char *save = NULL, *o = strtok_r(extra, " \t", &save); o;
		     o = strtok_r(NULL, " \t", &save)) {
			if (nopts == 4 + NVRTC_MAX_EXTRA)
				return tir_fail(err, "nvrtc: TIRD_NVRTC_OPTIONS has more than %d options",
						NVRTC_MAX_EXTRA);
			opts[nopts++] = o;
		}
	}

	nvrtcProgram prog;
	nvrtcResult r = nvrtcCreateProgram(&prog, source, "tir_kernel.cu", 0, NULL, NULL);
	if (r != NVRTC_SUCCESS)
		return tir_fail(err, "nvrtc: nvrtcCreateProgram failed (%s)",
				nvrtcGetErrorString(r));
	int rc = -1;
	r = nvrtcCompileProgram(prog, nopts, opts);
	if (r != NVRTC_SUCCESS) {
		fail_with_log(prog, "compilation", r, err);
		goto out;
	}
	size_t n = 0;
	if ((r = nvrtcGetCUBINSize(prog, &n)) != NVRTC_SUCCESS || n == 0) {
		fail_with_log(prog, "nvrtcGetCUBINSize", r, err);
		goto out;
	}
	char *bin = xmalloc(n);
	if ((r = nvrtcGetCUBIN(prog, bin)) != NVRTC_SUCCESS) {
		free(bin);
		fail_with_log(prog, "nvrtcGetCUBIN", r, err);
		goto out;
	}
	*cubin = bin;
	*size = n;
	rc = 0;
out:
	nvrtcDestroyProgram(&prog);
	return rc;
}

/* ---- the compiling child ----------------------------------------------------- */

/* What the child sends back through the pipe: this header, then `len` bytes
 * of cubin (rc 0) or of message (rc -1).  Length-prefixed, so the parent
 * never waits for an EOF that another fork's copy of the pipe could delay. */
typedef struct reply {
	int32_t rc;
	uint64_t len;
} reply;

/* Reads n bytes before the deadline; 0, or -1 (EOF, error: errno; ETIMEDOUT). */
static int read_all(int fd, void *p, size_t n, double deadline)
{
	char *s = p;
	while (n > 0) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		double left = deadline - ((double)ts.tv_sec + (double)ts.tv_nsec * 1e-9);
		if (left <= 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		struct pollfd pfd = { fd, POLLIN, 0 };
		int k = poll(&pfd, 1, (int)(left * 1000) + 1);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -1;
		if (k == 0)
			continue;
		ssize_t r = read(fd, s, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0)
				errno = EPIPE;
			return -1;
		}
		s += r;
		n -= (size_t)r;
	}
	return 0;
}

static void child_main(int fd, const char *source, int sm)
{
	tir_error e = { "" };
	char *bin = NULL;
	size_t n = 0;
	reply h = { 0, 0 };
	if (compile_here(source, sm, &bin, &n, &e) == 0) {
		h.len = n;
		if (tir_write_all(fd, &h, sizeof h) || tir_write_all(fd, bin, n))
			_exit(1);
	} else {
		h.rc = -1;
		h.len = strlen(e.msg);
		if (tir_write_all(fd, &h, sizeof h) || tir_write_all(fd, e.msg, h.len))
			_exit(1);
	}
	_exit(0);
}

int tir_nvrtc_compile(const char *source, int sm, char **cubin, size_t *size,
		      tir_error *err)
{
	*cubin = NULL;
	*size = 0;
	if (!source)
		return tir_fail(err, "nvrtc: no source");
	if (sm < 30 || sm > 1000)
		return tir_fail(err, "nvrtc: bad architecture sm_%d", sm);
	const char *inproc = getenv("TIRD_NVRTC_IN_PROCESS");
	if (in_process || (inproc && *inproc && strcmp(inproc, "0")))
		return compile_here(source, sm, cubin, size, err);

	int fd[2];
	if (pipe2(fd, O_CLOEXEC) != 0)
		return tir_fail(err, "nvrtc: pipe: %s", strerror(errno));
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(fd[0]);
		close(fd[1]);
		return tir_fail(err, "nvrtc: fork: %s", strerror(e));
	}
	if (pid == 0) {
		close(fd[0]);
		child_main(fd[1], source, sm);
	}
	close(fd[1]);

	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	double deadline = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + TIR_NVRTC_TIMEOUT_S;
	reply h;
	char *data = NULL;
	int rc = -1;
	if (read_all(fd[0], &h, sizeof h, deadline) != 0) {
		int e = errno;
		kill(pid, SIGKILL);
		if (e == ETIMEDOUT)
			tir_fail(err, "nvrtc: compilation ran past %d s", TIR_NVRTC_TIMEOUT_S);
		else
			tir_fail(err, "nvrtc: the compiling process ended without an answer");
	} else if (h.len > ((uint64_t)1 << 32)) {
		kill(pid, SIGKILL);
		tir_fail(err, "nvrtc: the compiling process sent nonsense");
	} else if (read_all(fd[0], (data = xmalloc((size_t)h.len + 1)), (size_t)h.len,
			    deadline) != 0) {
		kill(pid, SIGKILL);
		tir_fail(err, "nvrtc: the compiling process ended mid-answer");
	} else if (h.rc != 0) {
		data[h.len] = '\0';
		tir_fail(err, "%s", data);
	} else {
		*cubin = data;
		*size = (size_t)h.len;
		data = NULL;
		rc = 0;
	}
	free(data);
	close(fd[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return rc;
}

#else /* !HAVE_CUDA */

void tir_nvrtc_in_process(bool on)
{
	(void)on;
}

int tir_nvrtc_compile(const char *source, int sm, char **cubin, size_t *size,
		      tir_error *err)
{
	(void)source;
	(void)sm;
	*cubin = NULL;
	*size = 0;
	return tir_fail(err, "nvrtc: libtir was built without CUDA");
}

#endif
