/*
 * cpu.c — the CPU builder and runner (tir_runner_cpu).
 *
 * Build: the generated C goes into a private temporary directory
 * ($TMPDIR/tird-cpu-XXXXXX, mode 0700) and the system C compiler ($CC, else
 * the compiler libtir was configured with, else `cc`) makes a shared object
 * of it: -O3 -fopenmp -shared -fPIC, plus -march=native when the target is
 * this machine's CPU, or the -m flags of the target key's features when it
 * names another (a key is taken at its word, as target.c does).  The
 * compiler runs with posix_spawn (no fork of a possibly threaded caller into
 * arbitrary code) under a time limit; its output becomes the error message.
 *
 * Run: in a child (runner.c's guard) the shared object is dlopen'd, the
 * arguments allocated (64-byte aligned) and filled, the entry point called
 * once and its output copied to the report, then timed with
 * tir_time_repeats; the caches are flushed between repeats by writing a
 * buffer of twice the last-level cache (at least 64 MiB).  Nothing of the
 * candidate ever runs in the caller.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "../ir/ir.h"
#include "measure.h"

extern char **environ;

#ifndef TIR_SYSTEM_CC
#define TIR_SYSTEM_CC "cc"
#endif
#ifndef TIR_OPENMP_CFLAGS
#define TIR_OPENMP_CFLAGS "-fopenmp"
#endif

#define COMPILE_TIMEOUT_S 120
#define MAX_WORDS 64

/* ---- compiler flags ------------------------------------------------------------ */

/* The flags each feature of a target key brings. */
static const struct { const char *arch, *feature, *flags; } feature_flags[] = {
	{ "x86_64", "avx2", "-mavx2 -mf16c" },    /* every AVX2 CPU has F16C */
	{ "x86_64", "fma", "-mfma" },
	{ "x86_64", "avx512f", "-mavx512f" },
	{ "x86_64", "avx512bw", "-mavx512bw -mavx512vl -mavx512dq" },
	{ "x86_64", "avx512vnni", "-mavx512vnni" },
	{ "aarch64", "neon", "" },                 /* baseline on AArch64 */
	{ "aarch64", "dotprod", "-march=armv8.2-a+dotprod" },
};

/* Appends the words of s (split at blanks) to argv; words point into a copy
 * kept in *keep (freed by the caller). */
static int add_words(char **argv, int n, const char *s, char **keep)
{
	char *copy = xstrdup(s);
	*keep = copy;
	for (char *tok = strtok(copy, " \t\n"); tok && n < MAX_WORDS - 8;
	     tok = strtok(NULL, " \t\n"))
		argv[n++] = tok;
	return n;
}

/* The ISA flags for target t: -march=native when t is this machine.  With
 * 64-byte vectors gcc still prefers 256-bit ones unless told otherwise; the
 * tuned kernels are written for the target's full width (1.1-1.7x measured
 * on sgemm candidates). */
static void isa_flags(const tir_target *t, char *out, size_t size)
{
	tir_target host;
	const char *wide = t->vector_bytes >= 64 && !strncmp(t->key, "cpu:x86_64", 10)
		? " -mprefer-vector-width=512" : "";
	if (tir_target_parse("cpu", &host, NULL) == 0 && !strcmp(host.key, t->key)) {
		snprintf(out, size, "-march=native%s", wide);
		return;
	}
	out[0] = '\0';
	const char *p = t->key + 4;              /* "cpu:" */
	size_t alen = strcspn(p, "+");
	char arch[32];
	snprintf(arch, sizeof arch, "%.*s", (int)alen, p);
	if (!strcmp(arch, "x86_64"))
		snprintf(out, size, "-march=x86-64");
	for (p += alen; *p == '+';) {
		p++;
		size_t flen = strcspn(p, "+");
		for (size_t i = 0; i < sizeof feature_flags / sizeof feature_flags[0]; i++)
			if (!strcmp(feature_flags[i].arch, arch) &&
			    strlen(feature_flags[i].feature) == flen &&
			    !strncmp(feature_flags[i].feature, p, flen) &&
			    feature_flags[i].flags[0]) {
				size_t l = strlen(out);
				snprintf(out + l, size - l, "%s%s", l ? " " : "",
					 feature_flags[i].flags);
			}
		p += flen;
	}
	size_t l = strlen(out);
	snprintf(out + l, size - l, "%s", wide);
}

/* ---- build --------------------------------------------------------------------- */

static int write_file(const char *path, const char *text, tir_error *err)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return tir_fail(err, "cpu build: cannot create %s: %s", path, strerror(errno));
	size_t len = strlen(text), off = 0;
	while (off < len) {
		ssize_t w = write(fd, text + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int e = errno;
			close(fd);
			return tir_fail(err, "cpu build: cannot write %s: %s", path, strerror(e));
		}
		off += (size_t)w;
	}
	if (close(fd) != 0)
		return tir_fail(err, "cpu build: cannot write %s: %s", path, strerror(errno));
	return 0;
}

/* The start of the compiler's log (its first error is what helps). */
static void read_log(const char *path, char *out, size_t size)
{
	out[0] = '\0';
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	size_t n = fread(out, 1, size - 1, f);
	fclose(f);
	out[n] = '\0';
}

/* Runs argv with stdout and stderr into log; 0 when it exits 0. */
static int run_compiler(char **argv, const char *log, tir_error *err)
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	pid_t pid;
	int e = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (e != 0)
		return tir_fail(err, "cpu build: cannot run the C compiler \"%s\": %s "
				"(set CC)", argv[0], strerror(e));
	double deadline = tir_now_s() + COMPILE_TIMEOUT_S;
	int st;
	for (;;) {
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid)
			break;
		if (w < 0 && errno != EINTR) {
			kill(pid, SIGKILL);
			return tir_fail(err, "cpu build: waitpid: %s", strerror(errno));
		}
		if (tir_now_s() > deadline) {
			kill(pid, SIGKILL);
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
			return tir_fail(err, "cpu build: the C compiler ran past %d s",
					COMPILE_TIMEOUT_S);
		}
		struct timespec ts = { 0, 5000000 };
		nanosleep(&ts, NULL);
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	char msg[400];
	read_log(log, msg, sizeof msg);
	if (WIFSIGNALED(st))
		return tir_fail(err, "cpu build: %s killed by signal %d: %s", argv[0],
				WTERMSIG(st), msg);
	return tir_fail(err, "cpu build: %s failed (exit %d): %s", argv[0],
			WEXITSTATUS(st), msg);
}

static void cpu_free(tir_artifact *a)
{
	if (!a)
		return;
	const char *keep = getenv("TIRD_KEEP_BUILD");
	if (a->dir[0] && !(keep && *keep && strcmp(keep, "0"))) {
		static const char *const files[] = { "k.c", "k.so", "k.log" };
		for (size_t i = 0; i < 3; i++) {
			char p[sizeof a->dir + 8];
			snprintf(p, sizeof p, "%s/%s", a->dir, files[i]);
			unlink(p);
		}
		rmdir(a->dir);
	}
	free(a->image);
	free(a);
}

static tir_artifact *cpu_build(const tir_code *c, const tir_target *t, tir_error *err)
{
	if (t->kind != TIR_TARGET_CPU) {
		tir_fail(err, "cpu build: target %s is not a CPU", t->key);
		return NULL;
	}
	if (!c->source) {
		tir_fail(err, "cpu build: no source");
		return NULL;
	}
	tir_artifact *a = xcalloc(1, sizeof *a);
	a->runner = &tir_runner_cpu;
	const char *tmp = getenv("TMPDIR");
	if (!tmp || !*tmp || strlen(tmp) > 200)
		tmp = "/tmp";
	snprintf(a->dir, sizeof a->dir, "%s/tird-cpu-XXXXXX", tmp);
	if (!mkdtemp(a->dir)) {
		tir_fail(err, "cpu build: cannot make a directory in %s: %s", tmp,
			 strerror(errno));
		a->dir[0] = '\0';
		cpu_free(a);
		return NULL;
	}
	char src[sizeof a->dir + 8], log[sizeof a->dir + 8];
	snprintf(src, sizeof src, "%s/k.c", a->dir);
	snprintf(log, sizeof log, "%s/k.log", a->dir);
	snprintf(a->path, sizeof a->path, "%s/k.so", a->dir);
	if (write_file(src, c->source, err)) {
		cpu_free(a);
		return NULL;
	}

	char isa[256];
	isa_flags(t, isa, sizeof isa);
	const char *cc = getenv("CC");
	if (!cc || !*cc)
		cc = TIR_SYSTEM_CC[0] ? TIR_SYSTEM_CC : "cc";
	char *argv[MAX_WORDS];
	char *k1, *k2, *k3;
	int n = add_words(argv, 0, cc, &k1);
	int ncc = n;
	n = add_words(argv, n, isa, &k2);
	n = add_words(argv, n, TIR_OPENMP_CFLAGS[0] ? TIR_OPENMP_CFLAGS : "-fopenmp", &k3);
	char *fixed[] = { "-O3", "-shared", "-fPIC", "-o", a->path, src, "-lm", NULL };
	for (int i = 0; fixed[i]; i++)
		argv[n++] = fixed[i];
	argv[n] = NULL;
	int rc = ncc > 0 ? run_compiler(argv, log, err)
		       : tir_fail(err, "cpu build: CC is empty");
	free(k1);
	free(k2);
	free(k3);
	if (rc) {
		cpu_free(a);
		return NULL;
	}
	return a;
}

/* ---- run (in the child) -------------------------------------------------------------- */

typedef int (*entry_fn)(void *const *args);

typedef struct cpu_ctx {
	const tir_artifact *a;
	const tir_code *c;
	const tir_measure_opts *o;
	entry_fn entry;
	void **args;
	unsigned char *flush;
	size_t flush_bytes;
	int flush_round;
} cpu_ctx;

static void report(tir_child_report *rep, tir_measure_status s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void report(tir_child_report *rep, tir_measure_status s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rep->msg, sizeof rep->msg, fmt, ap);
	va_end(ap);
	rep->status = s;
}

static int cpu_flush(void *ctx, tir_child_report *rep)
{
	cpu_ctx *x = ctx;
	memset(x->flush, ++x->flush_round & 0xff, x->flush_bytes);
	/* The stores must happen: tell the compiler the buffer is read. */
	__asm__ __volatile__("" : : "r"(x->flush) : "memory");
	return 0;
}

static int cpu_timed(void *ctx, long n, double *us, tir_child_report *rep)
{
	cpu_ctx *x = ctx;
	double t0 = tir_now_s();
	for (long i = 0; i < n; i++) {
		int rc = x->entry(x->args);
		if (rc != 0) {
			report(rep, TIR_MEASURE_RUN_ERROR, "candidate returned %d", rc);
			return -1;
		}
	}
	*us = (tir_now_s() - t0) * 1e6;
	return 0;
}

/* Twice the last-level cache, within [32, 128] MiB: virtual machines report
 * a whole socket's L3 (480 MiB here), and writing a gigabyte before every
 * repeat cost a second per candidate while flushing nothing more of what
 * one process's candidate could have cached. */
static size_t flush_size(void)
{
	size_t size = (size_t)32 << 20;
#ifdef _SC_LEVEL3_CACHE_SIZE
	long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
	if (l3 > 0 && (size_t)l3 * 2 > size)
		size = (size_t)l3 * 2;
#endif
	if (size > (size_t)128 << 20)
		size = (size_t)128 << 20;
	return size;
}

static void cpu_child(void *ctx, tir_child_report *rep)
{
	cpu_ctx *x = ctx;
	const tir_code *c = x->c;
	void *h = dlopen(x->a->path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		report(rep, TIR_MEASURE_RUN_ERROR, "dlopen: %s", dlerror());
		return;
	}
	const char *name = c->entry[0] ? c->entry : "tir_entry";
	*(void **)&x->entry = dlsym(h, name);
	if (!x->entry) {
		report(rep, TIR_MEASURE_RUN_ERROR, "the shared object has no \"%s\"", name);
		return;
	}
	x->args = calloc((size_t)c->nargs + 1, sizeof(void *));
	if (!x->args) {
		report(rep, TIR_MEASURE_RUN_ERROR, "out of memory");
		return;
	}
	for (int i = 0; i < c->nargs; i++) {
		size_t bytes = (size_t)c->args[i].elems * (size_t)c->args[i].elem_bytes;
		size_t alloc = (bytes + 63) / 64 * 64;
		x->args[i] = aligned_alloc(64, alloc ? alloc : 64);
		if (!x->args[i]) {
			report(rep, TIR_MEASURE_RUN_ERROR, "out of memory for argument "
			       "\"%s\" (%zu bytes)", c->args[i].name, bytes);
			return;
		}
		tir_measure_fill(c, i, x->o->seed, x->args[i]);
	}

	int rc = x->entry(x->args);
	if (rc != 0) {
		report(rep, TIR_MEASURE_RUN_ERROR, "candidate returned %d", rc);
		return;
	}
	int o = tir_code_output(c);
	if (o >= 0) {
		size_t bytes = (size_t)c->args[o].elems * (size_t)c->args[o].elem_bytes;
		if (bytes <= rep->out_bytes) {
			memcpy(rep->out, x->args[o], bytes);
			rep->output_ready = 1;
		}
	}
	if (!x->o->no_timing) {
		x->flush_bytes = flush_size();
		x->flush = malloc(x->flush_bytes);
		if (!x->flush) {
			report(rep, TIR_MEASURE_RUN_ERROR, "out of memory for the cache flush");
			return;
		}
		if (tir_time_repeats(x->o, x, cpu_flush, cpu_timed, rep))
			return;
	}
	report(rep, TIR_MEASURE_OK, "%s", "");
}

static int cpu_run(const tir_artifact *a, const tir_code *c, const tir_measure_opts *opts,
		   tir_measure_result *r)
{
	tir_measure_opts o = tir_measure_opts_default(opts);
	free(r->output);
	memset(r, 0, sizeof *r);
	r->max_rel_error = -1;
	cpu_ctx x = { .a = a, .c = c, .o = &o };
	return tir_child_measure(c, o.timeout_s, cpu_child, &x, r);
}

const tir_runner tir_runner_cpu = {
	.name = "cpu",
	.build = cpu_build,
	.run = cpu_run,
	.free = cpu_free,
};
