/*
 * tir_measure.h — libtir's public measurement API, beside tir.h: the
 * runners, a table of functions per kind of hardware, and the measurement
 * of one candidate by hand — build, run in a child process, check against
 * the reference (tirctl lower --run, the bench tools).  Callers outside
 * tuner/ may include it; it includes tir.h, which has the statuses of a
 * measurement (tir_measure_status), the clock, tir_cuda_device_props and
 * tir_measure_local, the measurement of a batch of traces.  What the
 * runners share among themselves (the guards, the check, the timing loop,
 * the reference) is internal to tuner/: measure/measure.h.
 *
 * The conventions are tir.h's.
 */
#ifndef TIR_TIR_MEASURE_H
#define TIR_TIR_MEASURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "tir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- measure/runner.c: the runner interface -----------------------------------
 *
 * A runner is a table of functions, one per kind of hardware (tir_runner_cpu
 * in cpu.c, tir_runner_cuda in cuda_run.c, later a remote one); callers pick
 * the table with tir_runner_for() and never compare names.  build() turns
 * generated code into something runnable (a shared object, a cubin); run()
 * executes it in a CHILD PROCESS, so that a candidate that crashes, hangs or
 * corrupts memory costs one result and never its caller:
 *
 *   1. fill the inputs with deterministic random values from opts->seed
 *      (tir_measure_fill: float in [-1, 1], integers in [-8, 8], float16 /
 *      bfloat16 stored as the bits of the rounded float), the outputs with
 *      all-ones bytes (NaN for floats) so unwritten elements show;
 *   2. call the candidate once and copy its outputs back to the parent;
 *   3. time it: a warm-up call, then `repeats` repeats, each of enough calls
 *      to last at least min_repeat_us (one call is timed to choose the count),
 *      with the caches flushed before every repeat; report the median.
 * The parent waits with a watchdog and kills the child after timeout_s.
 *
 * run_batch() measures many candidates of one workload in guarded children
 * (tir_child_batch): the setup that every candidate shares — the driver
 * and the device's context (CUDA), the flush buffer (CPU), the inputs,
 * which depend only on the seed and the argument list — is paid once per
 * child instead of once per candidate, and the child checks each output
 * against the reference itself.  A candidate that crashes, hangs or leaves
 * the child unusable still costs only its own result: the guard forks a
 * fresh child for the candidates after it.  The CPU's times its candidates
 * in rounds interleaved across the batch and records each at its best round
 * (cpu.c says why); a CPU candidate runs in the child's own address space,
 * so its arguments sit between inaccessible guards there.
 *
 * Callers must not set SIGCHLD to SIG_IGN (the runner reaps its children with
 * waitpid).  A process that has initialised CUDA must not use the CUDA runner
 * afterwards in a forked child — the CUDA runner therefore never initialises
 * CUDA in the calling process; see tir_cuda_device_props. */

#define TIR_MEASURE_MAX_REPEATS 64

/* How a GPU candidate was timed (docs/measurement.md, "The CUDA runner"):
 * by CUPTI's range profiler, each kernel's gpu__time_duration as ncu reads
 * it, or, where the profiler cannot run, by a graph of back-to-back calls
 * plus the launch term.  NONE: not timed, or not a GPU. */
typedef enum tir_timer {
	TIR_TIMER_NONE = 0,
	TIR_TIMER_GRAPH,
	TIR_TIMER_PROFILER,
} tir_timer;
#define TIR_MEASURE_MAX_OUTPUTS 16

typedef struct tir_measure_opts {
	uint64_t seed;             /* random inputs */
	int repeats;               /* timed repeats; 0: 5 (at most MAX_REPEATS) */
	int rounds;                /* the CPU's run_batch: timed rounds, one repeat
				    * each; 0: 10 (at most MAX_REPEATS) */
	double min_repeat_us;      /* shortest repeat; 0: 1000 */
	double timeout_s;          /* run(): the whole child; run_batch(): each
				    * candidate, and the child's setup; 0: 10 */
	bool no_timing;            /* run once for the output only */
	/* a candidate whose one timed call takes longer than this is reported
	 * from that call alone (one repeat): it is no contender, and its figure
	 * needs no precision (0: off; the CUDA stream sets 10x its best so far) */
	double slow_us;
	int device;                /* CUDA device ordinal */
	/* tir_measure only: the reference output for this seed
	 * (tir_measure_reference), computed once per workload and reused for
	 * every candidate; NULL: computed for this call. */
	const double *reference;
} tir_measure_opts;

typedef struct tir_measure_result {
	tir_measure_status status;
	char msg[512];             /* why, when status is not OK */
	double median_us;          /* per call, the median of the repeats; 0 when not timed */
	/* The figure the candidate is recorded with (per call; 0 when not
	 * timed): the median, except from the CPU's run_batch, which times in
	 * rounds interleaved across the batch and takes each candidate's best
	 * round (cpu.c says why). */
	double latency_us;
	int nrepeats;
	double repeat_us[TIR_MEASURE_MAX_REPEATS];   /* per call, each repeat */
	/* The outputs, as doubles: every output argument of the code
	 * concatenated in argument order (most codes have one), and the size
	 * of each part (the first TIR_MEASURE_MAX_OUTPUTS of them). */
	int64_t out_elems;         /* in all */
	double *output;            /* malloc'd (tir_measure_result_clear), or NULL */
	int noutputs;
	int64_t output_elems[TIR_MEASURE_MAX_OUTPUTS];
	double max_rel_error;      /* filled by tir_measure_check; -1 before */
	double run_s;              /* run_batch: wall seconds in the measuring
				    * process: loading, checking and timing */
	double timing_s;           /* of which in tir_time_repeats */
	/* CUDA: the launch term per kernel that median_us and latency_us
	 * include (cuda_run.c: what back-to-back calls hide); 0 elsewhere and
	 * under the profiler timer */
	double launch_us;
	tir_timer timer;           /* how the figure was timed */
} tir_measure_result;

/* Frees result->output and zeroes the result (max_rel_error -1). */
void tir_measure_result_clear(tir_measure_result *r);

/* What build() produced; private to the runners (measure/measure.h), opaque
 * to callers. */
typedef struct tir_artifact tir_artifact;

typedef struct tir_run_stream tir_run_stream;

typedef struct tir_runner {
	const char *name;
	/* Builds code for target; NULL with the compiler's message on failure.
	 * Safe to call from several threads at once. */
	tir_artifact *(*build)(const tir_code *c, const tir_target *t,
			       tir_error *err);
	/* Optional: builds the n codes c[0..n-1] at once, cheaper than one by
	 * one (the CPU's: one compiler run), out[i] candidate i's artifact,
	 * each freed on its own.  0, or -1 with the compiler's message and no
	 * artifact: a batch then builds each with build(), so that only the
	 * faulty candidate fails, with its own message.  Takes up to n times
	 * build_limit_s. */
	int (*build_group)(int n, const tir_code *const *c, const tir_target *t,
			   tir_artifact **out, tir_error *err);
	/* Optional: the most seconds one build() may take, after which a batch
	 * kills the builder process running it (NULL: TIR_NVRTC_TIMEOUT_S, an
	 * in-process NVRTC compile being uninterruptible).  A build that runs
	 * a compiler of its own kills it sooner itself. */
	double (*build_limit_s)(void);
	/* Runs a built candidate (see above) and fills *r (status, message,
	 * times, outputs).  Returns 0 when status is OK, else -1. */
	int (*run)(const tir_artifact *a, const tir_code *c,
		   const tir_measure_opts *o, tir_measure_result *r);
	/* Removes the artifact and whatever it left on disk; NULL is fine. */
	void (*free)(tir_artifact *a);
	/* Optional (NULL: call run() per candidate).  Runs the n built
	 * candidates a[i] / c[i] of ONE workload in as few guarded children as
	 * their failures allow (tir_child_batch, per pass: the CPU's has a
	 * checking and a timing pass; o->timeout_s is per candidate),
	 * checks each output against ref (ref_n values, tir_measure_reference
	 * for o->seed) inside the child with tir_measure_judge, and times only
	 * the correct ones.  Fills r[0..n-1] as run() then the check would —
	 * status (WRONG_RESULT included), message, times, max_rel_error — but
	 * never an output; r[] is overwritten (it must hold no output).  A c[i]
	 * whose inputs and output differ from the first candidate's is run on
	 * its own with run().  Returns the number of child processes used. */
	int (*run_batch)(int n, const tir_artifact *const *a, const tir_code *const *c,
			 const tir_measure_opts *o, const double *ref, int64_t ref_n,
			 tir_measure_result *r);
	/* Optional, where run_batch is: the same measurement as a stream, so
	 * that runs overlap the builds (run_batch is start, put, finish).
	 * stream_start forks the measuring process at once — in the calling
	 * thread, before the builders start — with first's inputs (the argument
	 * list of the batch) and ref, which must stay valid until finish.
	 * stream_put (any thread) hands it candidate i (0 <= i < n) once built;
	 * it is measured while others still build, in the order they are put.
	 * a and c must stay valid until finish: a candidate whose arguments
	 * differ from first's runs on its own there.  stream_finish waits for
	 * the last, fills r[0..n-1] as run_batch does (a candidate never put:
	 * RUN_ERROR) and returns the number of child processes used. */
	tir_run_stream *(*stream_start)(int n, const tir_code *first,
					const tir_measure_opts *o, const double *ref,
					int64_t ref_n);
	void (*stream_put)(tir_run_stream *s, int i, const tir_artifact *a,
			   const tir_code *c);
	int (*stream_finish)(tir_run_stream *s, tir_measure_result *r);
} tir_runner;

/* The runner for a target's kind. */
const tir_runner *tir_runner_for(const tir_target *t);

/* cpu.c: the ISA flags the CPU builder compiles for target t with (the -m
 * flags of its key's features, -march=native when t is this machine). */
void tir_cpu_isa_flags(const tir_target *t, char *out, size_t size);

/* The whole measurement of one candidate, top to bottom: build with r,
 * run, check against the reference (WRONG_RESULT when max_rel_error exceeds
 * tir_measure_tolerance).  Fills *res, including the output; returns 0
 * when res->status is OK, else -1.  opts may be NULL for the defaults. */
int tir_measure(const tir_runner *r, const tir_workload *w, const tir_code *c,
		const tir_target *t, const tir_measure_opts *opts,
		tir_measure_result *res);

#ifdef __cplusplus
}
#endif
#endif
