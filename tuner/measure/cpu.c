/*
 * cpu.c — the CPU builder and runner (tir_runner_cpu).
 *
 * Build: the generated C goes into a private temporary directory
 * ($TMPDIR/tird-cpu-XXXXXX, mode 0700) and the system C compiler ($CC, else
 * the compiler libtir was configured with, else `cc`) makes a shared object
 * of it: -O3 -fno-math-errno -fopenmp -shared -fPIC, plus -march=native when the target is
 * this machine's CPU, or the -m flags of the target key's features when it
 * names another (a key is taken at its word, as target.c does).  The
 * compiler runs with posix_spawn (no fork of a possibly threaded caller into
 * arbitrary code) under a time limit; its output becomes the error message.
 *
 * Run (one candidate, run()): in a child (guard.c's guard) the shared
 * object is dlopen'd, the arguments allocated (64-byte aligned) and filled,
 * the entry point called once and its outputs copied to the report, then
 * timed with tir_time_repeats; the caches are flushed between repeats by
 * writing a buffer of twice the last-level cache (32 to 128 MiB).  Nothing
 * of the candidate ever runs in the caller.
 *
 * Run a batch (run_batch(), the search's path): two passes of guarded
 * children (tir_child_batch), each child loading many candidates of one
 * workload:
 *   1. check: each candidate runs on arguments filled afresh, its outputs
 *      are judged against the reference in the child, and one call is timed;
 *   2. time, in rounds interleaved across the batch: round after round,
 *      every candidate that passed gets one repeat (the caches flushed,
 *      then enough calls to last min_repeat_us), `rounds` rounds each
 *      (10; fewer where they would not end in 80% of the timeout).  Recorded:
 *      each candidate's best round (latency_us; median_us keeps the median).
 * Why: on a shared virtual machine the CPU time a process gets changes
 * from one tenth of a second to the next (here two threads of a spin loop
 * took 1x or 2x the single-thread time, in stretches of 0.1-0.5 s), so
 * five repeats in a row all land in one such stretch, and two measurements
 * of the same 64 candidates agreed on the order of 69-95% of their pairs
 * (mean |A/B - 1| 3-29%).  Spread over the batch and taken at their best,
 * 83-99% (bench/measure_noise, bench/results/2026-12-01-measure-noise.txt;
 * 10 rounds agreed better than 5 for little more time).
 * "The caches flushed" is the candidate's arguments evicted from every
 * level of every core's caches, line by line (evict_args: CLFLUSH on x86,
 * DC CIVAC on AArch64): what a call could have left cached is its
 * arguments, and the cost is theirs, not the cache's.  Writing twice the
 * last-level cache did the same at the cache's size: 128 MiB, 6 ms a repeat
 * on this VM, whose L3 reads 508 MiB, most of the timing pass's time.
 * A candidate in a shared child could corrupt the next ones' state: each
 * argument sits between inaccessible guards (a write past either end
 * crashes and is blamed on the writer), the check pass refills every
 * argument before each candidate, and the timing pass runs only candidates
 * that passed.  A candidate whose argument list differs from the first's
 * runs alone with run().
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
#include <math.h>
#include <sys/mman.h>
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

/* A compile past its limit (TIRD_CC_TIMEOUT_S, default 120 s) is killed,
 * the compiler's whole process group (the driver, cc1, as, ld): killing the
 * driver alone left cc1 running on, and a candidate whose unrolled loops
 * took gcc minutes (109 x 109 columns unrolled: cc1 at 800 MB for over 10
 * minutes) held a core long after its build had failed.  A batch's builder
 * on one build is killed CC_GRACE_S after the limit (cpu_build_limit_s):
 * the compiler's own limit comes first, so no compile outlives its
 * builder. */
#define CC_TIMEOUT_S 120
#define CC_GRACE_S 10

static double cc_timeout_s(void)
{
	const char *e = getenv("TIRD_CC_TIMEOUT_S");
	char *end;
	double v = e && *e ? strtod(e, &end) : 0;
	return e && *e && *end == '\0' && v >= 1 && v <= 3600 ? v : CC_TIMEOUT_S;
}

static double cpu_build_limit_s(void)
{
	return cc_timeout_s() + CC_GRACE_S;
}

#define MAX_WORDS 64

/* ---- compiler flags ------------------------------------------------------------ */

/* The flags each feature of a target key brings.  AArch64's are extensions
 * of one -march (the last -march wins, so they cannot be separate flags):
 * "+dotprod" after "-march=armv8.2-a". */
static const struct { const char *arch, *feature, *flags; } feature_flags[] = {
	{ "x86_64", "avx2", "-mavx2 -mf16c" },    /* every AVX2 CPU has F16C */
	{ "x86_64", "fma", "-mfma" },
	{ "x86_64", "avx512f", "-mavx512f" },
	{ "x86_64", "avx512bw", "-mavx512bw -mavx512vl -mavx512dq" },
	{ "x86_64", "avx512vnni", "-mavx512vnni" },
	{ "aarch64", "neon", "" },                 /* baseline on AArch64 */
	{ "aarch64", "dotprod", "+dotprod" },
	{ "aarch64", "fp16", "+fp16" },
	{ "aarch64", "i8mm", "+i8mm" },
	{ "aarch64", "bf16", "+bf16" },
	{ "aarch64", "sve", "+sve" },
	{ "aarch64", "sve2", "+sve2" },
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

/* The ISA flags for target t: -march=native when t is this machine (never
 * under an emulator: the compiler it runs, a cross compiler on the host,
 * would take the host's CPU for the target's).  With
 * 64-byte vectors gcc still prefers 256-bit ones unless told otherwise; the
 * tuned kernels are written for the target's full width (1.1-1.7x measured
 * on sgemm candidates). */
void tir_cpu_isa_flags(const tir_target *t, char *out, size_t size)
{
	tir_target host;
	const char *wide = t->vector_bytes >= 64 && !strncmp(t->key, "cpu:x86_64", 10)
		? " -mprefer-vector-width=512" : "";
	if (!t->emulated && tir_target_parse("cpu", &host, NULL) == 0 &&
	    !strcmp(host.key, t->key)) {
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
				const char *f = feature_flags[i].flags;
				if (f[0] == '+' && !l)   /* the first extension */
					snprintf(out, size, "-march=armv8.2-a%s", f);
				else
					snprintf(out + l, size - l, "%s%s", f[0] == '+' ? "" :
						 l ? " " : "", f);
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
	/* a process group of its own, so a timeout kills every process of
	 * the compile */
	posix_spawnattr_t at;
	posix_spawnattr_init(&at);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
	posix_spawnattr_setpgroup(&at, 0);
	pid_t pid;
	int e = posix_spawnp(&pid, argv[0], &fa, &at, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (e != 0)
		return tir_fail(err, "cpu build: cannot run the C compiler \"%s\": %s "
				"(set CC)", argv[0], strerror(e));
	double limit = cc_timeout_s(), deadline = tir_now_s() + limit;
	int st;
	for (;;) {
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid)
			break;
		if (w < 0 && errno != EINTR) {
			kill(-pid, SIGKILL);
			return tir_fail(err, "cpu build: waitpid: %s", strerror(errno));
		}
		if (tir_now_s() > deadline) {
			kill(-pid, SIGKILL);
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
			return tir_fail(err, "cpu build: the C compiler ran past %g s "
					"(TIRD_CC_TIMEOUT_S)", limit);
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

/* Whether build directories are kept ($TIRD_KEEP_BUILD set, and not 0). */
static bool keep_builds(void)
{
	const char *keep = getenv("TIRD_KEEP_BUILD");
	return keep && *keep && strcmp(keep, "0");
}

static void cpu_free(tir_artifact *a)
{
	if (!a)
		return;
	if (a->dir[0] && !keep_builds()) {
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

/* A fresh private directory in $TMPDIR (or /tmp) into dir; 0, or -1 with
 * err set and dir empty. */
static int make_dir(char *dir, size_t size, tir_error *err)
{
	const char *tmp = getenv("TMPDIR");
	if (!tmp || !*tmp || strlen(tmp) > 200)
		tmp = "/tmp";
	snprintf(dir, size, "%s/tird-cpu-XXXXXX", tmp);
	if (!mkdtemp(dir)) {
		tir_fail(err, "cpu build: cannot make a directory in %s: %s", tmp,
			 strerror(errno));
		dir[0] = '\0';
		return -1;
	}
	return 0;
}

/* Compiles the C file src for target t into the shared object so, the
 * compiler's output into log; 0, or -1 with err set. */
static int compile(const tir_target *t, const char *src, const char *so, const char *log,
		   tir_error *err)
{
	char isa[256];
	tir_cpu_isa_flags(t, isa, sizeof isa);
	const char *cc = getenv("CC");
	if (!cc || !*cc)
		cc = TIR_SYSTEM_CC[0] ? TIR_SYSTEM_CC : "cc";
	char *argv[MAX_WORDS];
	char *k1, *k2, *k3;
	int n = add_words(argv, 0, cc, &k1);
	int ncc = n;
	n = add_words(argv, n, isa, &k2);
	n = add_words(argv, n, TIR_OPENMP_CFLAGS[0] ? TIR_OPENMP_CFLAGS : "-fopenmp", &k3);
	/* -fno-math-errno: nothing reads errno, and the C prelude's vector
	 * expf / erff / tanhf (glibc's libmvec) are called only without it */
	char *fixed[] = { "-O3", "-fno-math-errno", "-shared", "-fPIC", "-o", (char *)so,
			  (char *)src, "-lm", NULL };
	for (int i = 0; fixed[i]; i++)
		argv[n++] = fixed[i];
	argv[n] = NULL;
	int rc = ncc > 0 ? run_compiler(argv, log, err)
		       : tir_fail(err, "cpu build: CC is empty");
	free(k1);
	free(k2);
	free(k3);
	return rc;
}

static int check_build(const tir_code *c, const tir_target *t, tir_error *err)
{
	if (t->kind != TIR_TARGET_CPU)
		return tir_fail(err, "cpu build: target %s is not a CPU", t->key);
	if (!c->source)
		return tir_fail(err, "cpu build: no source");
	return 0;
}

static tir_artifact *cpu_build(const tir_code *c, const tir_target *t, tir_error *err)
{
	if (check_build(c, t, err))
		return NULL;
	tir_artifact *a = xcalloc(1, sizeof *a);
	a->runner = &tir_runner_cpu;
	if (make_dir(a->dir, sizeof a->dir, err)) {
		cpu_free(a);
		return NULL;
	}
	char src[sizeof a->dir + 8], log[sizeof a->dir + 8];
	snprintf(src, sizeof src, "%s/k.c", a->dir);
	snprintf(log, sizeof log, "%s/k.log", a->dir);
	snprintf(a->path, sizeof a->path, "%s/k.so", a->dir);
	if (write_file(src, c->source, err) || compile(t, src, a->path, log, err)) {
		cpu_free(a);
		return NULL;
	}
	return a;
}

/* Builds n candidates in one compiler run: one translation unit of every
 * candidate's source in turn, its entry point renamed by a macro (entry
 * "tir_entry" of candidate 3 becomes "tir_entry_g3"), its pragmas kept to
 * itself (push_options / pop_options); the C prelude, guarded, is read
 * once.  Each artifact gets a directory of its own with a hard link to the
 * one shared object, so that each is freed alone.  The compiler then
 * starts, reads the headers, assembles and links once, not n times: 6 GMM-2
 * candidates on this VM, 0.21-0.25 s each alone, 0.66 s together. */
static int cpu_build_group(int n, const tir_code *const *c, const tir_target *t,
			   tir_artifact **out, tir_error *err)
{
	for (int i = 0; i < n; i++) {
		out[i] = NULL;
		if (check_build(c[i], t, err))
			return -1;
	}
	char dir[256], src[300], so[300], log[300];
	if (make_dir(dir, sizeof dir, err))
		return -1;
	snprintf(src, sizeof src, "%s/g.c", dir);
	snprintf(so, sizeof so, "%s/g.so", dir);
	snprintf(log, sizeof log, "%s/g.log", dir);
	tir_buf text = { 0 };
	for (int i = 0; i < n; i++) {
		const char *entry = c[i]->entry[0] ? c[i]->entry : "tir_entry";
		buf_printf(&text, "#pragma GCC push_options\n#define %s %s_g%d\n", entry, entry, i);
		buf_puts(&text, c[i]->source);
		buf_printf(&text, "\n#undef %s\n#pragma GCC pop_options\n", entry);
	}
	int rc = write_file(src, text.s, err) || compile(t, src, so, log, err) ? -1 : 0;
	free(text.s);
	bool kept = keep_builds();
	for (int i = 0; rc == 0 && i < n; i++) {
		tir_artifact *a = out[i] = xcalloc(1, sizeof *a);
		a->runner = &tir_runner_cpu;
		snprintf(a->entry, sizeof a->entry, "%.63s_g%d",
			 c[i]->entry[0] ? c[i]->entry : "tir_entry", i);
		if (make_dir(a->dir, sizeof a->dir, err)) {
			rc = -1;
			break;
		}
		snprintf(a->path, sizeof a->path, "%s/k.so", a->dir);
		if (link(so, a->path) != 0)
			rc = tir_fail(err, "cpu build: cannot link %s to %s: %s", so, a->path,
				      strerror(errno));
		/* kept (TIRD_KEEP_BUILD): each member's own source beside its
		 * object, as a build alone leaves it */
		char ksrc[sizeof a->dir + 8];
		snprintf(ksrc, sizeof ksrc, "%s/k.c", a->dir);
		if (rc == 0 && kept && write_file(ksrc, c[i]->source, err))
			rc = -1;
	}
	for (int i = 0; rc != 0 && i < n; i++) {
		cpu_free(out[i]);
		out[i] = NULL;
	}
	if (!kept) {
		unlink(src);
		unlink(so);
		unlink(log);
		rmdir(dir);
	}
	return rc;
}

/* ---- run (in the child) -------------------------------------------------------------- */

typedef int (*entry_fn)(void *const *args);

/* The symbol of c's entry point in a's shared object. */
static const char *entry_name(const tir_artifact *a, const tir_code *c)
{
	return a->entry[0] ? a->entry : c->entry[0] ? c->entry : "tir_entry";
}

typedef struct cpu_ctx {
	const tir_artifact *a;
	const tir_code *c;
	const tir_measure_opts *o;
	entry_fn entry;
	void **args;
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

#if !defined(__x86_64__) && !defined(__i386__) && !defined(__aarch64__)
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
#endif

void tir_cpu_evict(int n, const void *const *p, const size_t *bytes)
{
#if defined(__x86_64__) || defined(__i386__)
	for (int i = 0; i < n; i++)
		for (size_t o = 0; o < bytes[i]; o += 64)
			__asm__ __volatile__("clflush %0" : : "m"(((const char *)p[i])[o]) : "memory");
	__asm__ __volatile__("mfence" ::: "memory");
#elif defined(__aarch64__)
	uint64_t ctr;
	__asm__ __volatile__("mrs %0, ctr_el0" : "=r"(ctr));
	size_t line = (size_t)4 << ((ctr >> 16) & 0xf);     /* DminLine, in bytes */
	for (int i = 0; i < n; i++)
		for (size_t o = 0; o < bytes[i]; o += line)
			__asm__ __volatile__("dc civac, %0" : : "r"((const char *)p[i] + o) : "memory");
	__asm__ __volatile__("dsb ish" ::: "memory");
#else
	static unsigned char *buf;
	static size_t size;
	static int round;
	(void)n;
	(void)p;
	(void)bytes;
	if (!buf && (size = flush_size()) && !(buf = malloc(size)))
		return;
	memset(buf, ++round & 0xff, size);
	/* The stores must happen: tell the compiler the buffer is read. */
	__asm__ __volatile__("" : : "r"(buf) : "memory");
#endif
}

/* Code c's arguments args[] evicted (tir_cpu_evict). */
static void evict_args(const tir_code *c, void *const *args)
{
	for (int i = 0; i < c->nargs; i++) {
		size_t bytes = (size_t)c->args[i].elems * (size_t)c->args[i].elem_bytes;
		tir_cpu_evict(1, (const void *const *)&args[i], &bytes);
	}
}

static int cpu_flush(void *ctx, tir_child_report *rep)
{
	cpu_ctx *x = ctx;
	(void)rep;
	evict_args(x->c, x->args);
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

static void cpu_child(void *ctx, tir_child_report *rep)
{
	cpu_ctx *x = ctx;
	const tir_code *c = x->c;
	void *h = dlopen(x->a->path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		report(rep, TIR_MEASURE_RUN_ERROR, "dlopen: %s", dlerror());
		return;
	}
	const char *name = entry_name(x->a, c);
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
	if (tir_code_output_bytes(c) <= rep->out_bytes) {
		tir_code_outputs_pack(c, x->args, rep->out);
		rep->output_ready = 1;
	}
	if (!x->o->no_timing && tir_time_repeats(x->o, x, cpu_flush, cpu_timed, rep))
		return;
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

/* ---- run_batch: one child for many candidates, timed in interleaved rounds --------------- */

/* Each argument of a batch child lives in a mapping of its own between two
 * inaccessible guards of GUARD_BYTES, its end (rounded up to 64 bytes)
 * against the upper one: a candidate that writes past either end of an
 * argument crashes there and is blamed, instead of corrupting what the
 * candidates after it use. */
#define GUARD_BYTES ((size_t)1 << 20)

typedef struct guarded {
	unsigned char *base;       /* the whole mapping, or NULL */
	size_t size;
} guarded;

static void *guarded_alloc(guarded *g, size_t bytes)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t body = (bytes + 63) / 64 * 64;
	size_t inner = (body + page - 1) / page * page;
	if (!inner)
		inner = page;
	g->size = inner + 2 * GUARD_BYTES;
	g->base = mmap(NULL, g->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (g->base == MAP_FAILED) {
		g->base = NULL;
		return NULL;
	}
	if (mprotect(g->base + GUARD_BYTES, inner, PROT_READ | PROT_WRITE)) {
		munmap(g->base, g->size);
		g->base = NULL;
		return NULL;
	}
	return g->base + GUARD_BYTES + (inner - body);
}

/* What the two passes of a batch share.  Set by the parent before each
 * fork; the child's part is filled in the child. */
typedef struct cpu_batch {
	/* the parent's */
	const tir_artifact *const *a;
	const tir_code *const *c;  /* every one takes the arguments of c[0] */
	const tir_measure_opts *o;
	const double *ref;
	int64_t ref_n;
	const int *cand;           /* timing pass: item -> candidate */
	const long *calls;         /* timing pass: calls per round, per candidate */
	int n;
	/* the child's */
	void **args;
	guarded *g;
	entry_fn *entry;           /* per candidate, once loaded */
	bool *warm;                /* timing pass: warmed up in this child */
	unsigned char *out_raw;    /* the outputs as stored (tir_code_outputs_pack) */
	double *out_d;             /* and as doubles */
} cpu_batch;

/* The arguments of c[0], in guarded mappings, filled for the seed. */
static int batch_args(cpu_batch *b, tir_child_report *rep)
{
	const tir_code *c = b->c[0];
	b->args = calloc((size_t)c->nargs + 1, sizeof *b->args);
	b->g = calloc((size_t)c->nargs + 1, sizeof *b->g);
	b->entry = calloc((size_t)b->n + 1, sizeof *b->entry);
	b->warm = calloc((size_t)b->n + 1, sizeof *b->warm);
	b->out_raw = malloc(tir_code_output_bytes(c) + 1);
	b->out_d = malloc((size_t)tir_code_output_elems(c) * sizeof(double) + 1);
	if (!b->args || !b->g || !b->entry || !b->warm || !b->out_raw || !b->out_d) {
		report(rep, TIR_MEASURE_RUN_ERROR, "out of memory");
		return -1;
	}
	for (int i = 0; i < c->nargs; i++) {
		size_t bytes = (size_t)c->args[i].elems * (size_t)c->args[i].elem_bytes;
		b->args[i] = guarded_alloc(&b->g[i], bytes);
		if (!b->args[i]) {
			report(rep, TIR_MEASURE_RUN_ERROR, "out of memory for argument "
			       "\"%s\" (%zu bytes)", c->args[i].name, bytes);
			return -1;
		}
		tir_measure_fill(c, i, b->o->seed, b->args[i]);
	}
	return 0;
}

/* Candidate i's entry point, loaded the first time. */
static entry_fn batch_entry(cpu_batch *b, int i, tir_child_report *rep)
{
	if (b->entry[i])
		return b->entry[i];
	void *h = dlopen(b->a[i]->path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		report(rep, TIR_MEASURE_RUN_ERROR, "dlopen: %s", dlerror());
		return NULL;
	}
	const char *name = entry_name(b->a[i], b->c[i]);
	*(void **)&b->entry[i] = dlsym(h, name);
	if (!b->entry[i])
		report(rep, TIR_MEASURE_RUN_ERROR, "the shared object has no \"%s\"", name);
	return b->entry[i];
}

static int call(entry_fn f, void **args, tir_child_report *rep)
{
	int rc = f(args);
	if (rc != 0)
		report(rep, TIR_MEASURE_RUN_ERROR, "candidate returned %d", rc);
	return rc;
}

/* Each pass's child: the arguments (batch_args). */
static int batch_setup(void *ctx, tir_child_report *rep)
{
	return batch_args(ctx, rep);
}

/* The checking pass, item i: candidate i on freshly filled arguments (an
 * earlier candidate may have left anything in them), its outputs judged
 * against the reference, then one call timed for the timing pass to plan
 * with (rep->median_us). */
static int check_item(void *ctx, int i, tir_child_report *rep, double *max_rel_error)
{
	cpu_batch *b = ctx;
	const tir_code *c = b->c[i];
	entry_fn f = batch_entry(b, i, rep);
	if (!f)
		return 0;
	for (int k = 0; k < c->nargs; k++)
		tir_measure_fill(c, k, b->o->seed, b->args[k]);
	if (call(f, b->args, rep))
		return 0;
	int64_t n = tir_code_output_elems(c);
	tir_code_outputs_pack(c, b->args, b->out_raw);
	tir_code_outputs_unpack(c, b->out_raw, b->out_d);
	tir_measure_status st = tir_measure_judge(c, b->ref, b->ref_n, b->out_d, n,
						  max_rel_error, rep->msg, sizeof rep->msg);
	if (st != TIR_MEASURE_OK) {
		rep->status = st;
		return 0;
	}
	if (!b->o->no_timing) {
		double t0 = tir_now_s();
		if (call(f, b->args, rep))
			return 0;
		rep->median_us = (tir_now_s() - t0) * 1e6;
	}
	report(rep, TIR_MEASURE_OK, "%s", "");
	return 0;
}

/* The timing pass, item k: one round of candidate cand[k] — the caches
 * flushed, then calls[cand[k]] calls timed (after a warm-up call, the first
 * time this child runs it). */
static int time_item(void *ctx, int k, tir_child_report *rep, double *max_rel_error)
{
	cpu_batch *b = ctx;
	(void)max_rel_error;
	int i = b->cand[k];
	entry_fn f = batch_entry(b, i, rep);
	if (!f)
		return 0;
	if (!b->warm[i]) {
		if (call(f, b->args, rep))
			return 0;
		b->warm[i] = true;
	}
	double t0 = tir_now_s();
	evict_args(b->c[i], b->args);
	double t1 = tir_now_s();
	for (long n = 0; n < b->calls[i]; n++)
		if (call(f, b->args, rep))
			return 0;
	double us = (tir_now_s() - t1) * 1e6 / (double)b->calls[i];
	rep->nrepeats = 1;
	rep->repeat_us[0] = rep->median_us = us;
	rep->timing_s = tir_now_s() - t0;
	report(rep, TIR_MEASURE_OK, "%s", "");
	return 0;
}

/* Candidates c[idx[0..m-1]] (all with the arguments of c[idx[0]]) in two
 * passes of guarded children, results into r[idx[j]]; returns the children
 * forked. */
static int batch_measure(int m, const int *idx, const tir_artifact *const *a,
			 const tir_code *const *c, const tir_measure_opts *o,
			 const double *ref, int64_t ref_n, tir_measure_result *r)
{
	const tir_artifact **aa = xcalloc((size_t)m + 1, sizeof *aa);
	const tir_code **cc = xcalloc((size_t)m + 1, sizeof *cc);
	for (int j = 0; j < m; j++) {
		aa[j] = a[idx[j]];
		cc[j] = c[idx[j]];
	}
	cpu_batch b = { .a = aa, .c = cc, .o = o, .ref = ref, .ref_n = ref_n, .n = m };
	tir_measure_result *res = xcalloc((size_t)m + 1, sizeof *res);
	int children = tir_child_batch(m, o->timeout_s, batch_setup, check_item, &b, res);

	/* The plan (tir_repeat_plan, as tir_time_repeats): each candidate that
	 * passed gets o->rounds rounds (fewer where they would not end in 80%
	 * of its timeout), each of enough calls to last min_repeat_us; one past
	 * o->slow_us keeps its single timed call. */
	long *calls = xcalloc((size_t)m + 1, sizeof *calls);
	int *rounds = xcalloc((size_t)m + 1, sizeof *rounds);
	int nitems = 0, most = 0;
	for (int j = 0; j < m; j++) {
		tir_measure_result *x = &res[j];
		double one = x->median_us > 0.01 ? x->median_us : 0.01;
		x->latency_us = x->median_us = 0;
		if (x->status != TIR_MEASURE_OK || o->no_timing)
			continue;
		if (o->slow_us > 0 && one > o->slow_us) {
			x->nrepeats = 1;
			x->repeat_us[0] = x->median_us = x->latency_us = one;
			continue;
		}
		rounds[j] = tir_repeat_plan(o, one, 0, o->rounds, &calls[j]);
		nitems += rounds[j];
		most = rounds[j] > most ? rounds[j] : most;
	}
	/* Round after round over the whole batch, so that every candidate's
	 * rounds are spread over the same stretch of time. */
	int *cand = xcalloc((size_t)nitems + 1, sizeof *cand);
	int k = 0;
	for (int round = 0; round < most; round++)
		for (int j = 0; j < m; j++)
			if (round < rounds[j])
				cand[k++] = j;
	tir_measure_result *t = xcalloc((size_t)nitems + 1, sizeof *t);
	if (nitems > 0) {
		b.cand = cand;
		b.calls = calls;
		children += tir_child_batch(nitems, o->timeout_s, batch_setup, time_item, &b, t);
	}
	for (k = 0; k < nitems; k++) {
		tir_measure_result *x = &res[cand[k]];
		x->run_s += t[k].run_s;
		x->timing_s += t[k].timing_s;
		if (x->status != TIR_MEASURE_OK)
			continue;
		if (t[k].status != TIR_MEASURE_OK) {
			x->status = t[k].status;
			snprintf(x->msg, sizeof x->msg, "while timed: %s", t[k].msg);
			continue;
		}
		x->repeat_us[x->nrepeats++] = t[k].median_us;
	}
	for (int j = 0; j < m; j++) {
		tir_measure_result *x = &res[j];
		if (x->status == TIR_MEASURE_OK && rounds[j] > 0) {
			double sorted[TIR_MEASURE_MAX_REPEATS];
			memcpy(sorted, x->repeat_us, (size_t)x->nrepeats * sizeof sorted[0]);
			x->median_us = tir_median(sorted, x->nrepeats);
			x->latency_us = sorted[0];
		}
		if (x->status != TIR_MEASURE_OK) {
			x->nrepeats = 0;
			x->median_us = x->latency_us = 0;
		}
		r[idx[j]] = *x;
	}
	free(t);
	free(cand);
	free(rounds);
	free(calls);
	free(res);
	free(cc);
	free(aa);
	return children;
}

static int cpu_run_batch(int n, const tir_artifact *const *a, const tir_code *const *c,
			 const tir_measure_opts *opts, const double *ref, int64_t ref_n,
			 tir_measure_result *r)
{
	tir_measure_opts o = tir_measure_opts_default(opts);
	int *idx = xcalloc((size_t)n + 1, sizeof *idx);
	int m = 0, children = 0;
	for (int i = 0; i < n; i++) {
		memset(&r[i], 0, sizeof r[i]);
		r[i].max_rel_error = -1;
		if (tir_code_same_args(c[0], c[i])) {
			idx[m++] = i;
			continue;
		}
		/* another argument list: alone, as run() measures */
		if (cpu_run(a[i], c[i], &o, &r[i]) == 0)
			r[i].status = tir_measure_judge(c[i], ref, ref_n, r[i].output,
							r[i].out_elems, &r[i].max_rel_error,
							r[i].msg, sizeof r[i].msg);
		free(r[i].output);
		r[i].output = NULL;
		r[i].out_elems = 0;
		if (r[i].status != TIR_MEASURE_OK) {
			r[i].nrepeats = 0;
			r[i].median_us = r[i].latency_us = 0;
		}
		children++;
	}
	if (m > 0)
		children += batch_measure(m, idx, a, c, &o, ref, ref_n, r);
	free(idx);
	return children;
}

const tir_runner tir_runner_cpu = {
	.name = "cpu",
	.build = cpu_build,
	.build_group = cpu_build_group,
	.build_limit_s = cpu_build_limit_s,
	.run = cpu_run,
	.free = cpu_free,
	.run_batch = cpu_run_batch,
};
