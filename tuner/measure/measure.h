/*
 * measure.h — measuring candidates: the reference implementation that every
 * candidate's output is checked against, then the builders and runners
 * (runner.c: the interface; check.c: the inputs and the check; guard.c: the
 * child-process guards; timing.c: the timing loop; the runners cpu.c; cuda_run.c, with the files that
 * cuda_runner.h joins)
 * and batch measurement (batch.c).
 *
 * Design.  A candidate is trusted only after its output matches an independent
 * computation of the same operator on the same random inputs.  The reference
 * here is written straight from the operator's definition (DESIGN.md and the
 * conventions below), in double precision, without the IR: a bug in compute
 * definitions, schedules or code generators cannot hide in both.  It is slow
 * and simple on purpose.
 *
 * Argument convention, shared with the IR (compute.c) and the code
 * generators: the operator's inputs first, then the epilogue operands in the
 * order the epilogues are listed, then the output.  Memory layouts, row-major:
 *
 *   matmul   NN: A[M,K] B[K,N]   NT: A[M,K] B[N,K]   TN: A[K,M] B[K,N]
 *            with batch > 0 every buffer has a leading [batch] dimension;
 *            output C[(batch,) M, N].
 *   conv     channels-first: X[N, C, *in]  W[K, C/groups, *kernel]  Y[N, K, *out]
 *            channels-last:  X[N, *in, C]  W[*kernel, C/groups, K]  Y[N, *out, K]
 *            output channel k is in group g = k / (K/groups) and reads input
 *            channels g*(C/groups) + c;
 *            Y[n,k,o] = sum_{c,r} X[n, g*C/groups + c, o*stride - pad_lo + r*dilation]
 *                                 * W[k, c, r]   (out-of-range X reads are 0)
 *   depthwise_conv2d
 *            X as conv;  W[C, multiplier, R, S] or W[R, S, C, multiplier];
 *            output channel k = c*multiplier + m, K = C*multiplier.
 *   conv2d_transpose
 *            X[N,C,H,W] or [N,H,W,C];  W[C, K/groups, R, S] or [R, S, C, K/groups];
 *            Y[n, k, ih*stride - pad_lo + r*dilation, ...] +=
 *                X[n, c, ih, ...] * W[c, k % (K/groups), r, ...]
 *            for c in k's group; output extents from w->out.
 *   epilogue operands: bias → [out channels] (matmul: [N]);
 *            add → the output's shape and layout.
 *            relu max(x, 0); gelu x * 0.5 * (1 + erf(x / sqrt 2)); in listed order.
 */
#ifndef TIR_MEASURE_H
#define TIR_MEASURE_H

#include <stdbool.h>
#include <stdint.h>
#include "../tir.h"

/* ---- reference.c ------------------------------------------------------------ */

#define TIR_REF_MAX_ARGS 8

/* One argument of an operator, in the convention above. */
typedef struct tir_ref_arg {
	char name[16];        /* "A", "B", "X", "W", "bias", "add", then "C" / "Y" */
	int ndim;
	int64_t shape[6];
	int64_t elems;
	bool is_output;       /* the last argument only */
} tir_ref_arg;

/* Describes the operator's arguments: fills args[0..n-1] (inputs, epilogue
 * operands, output) and returns n, or -1 with a message when max is too
 * small. */
int tir_reference_args(const tir_workload *w, tir_ref_arg *args, int max,
		       tir_error *err);

/* Computes the output of w in double precision.  inputs[] holds every
 * argument but the output, in the order of tir_reference_args; output has the
 * output's element count.  Returns 0, or -1 with a message. */
int tir_reference(const tir_workload *w, double *const *inputs, double *output,
		  tir_error *err);

/* ---- builders and runners: below this line ---------------------------------- */

/* ---- runner.c: the runner interface ------------------------------------------
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
 *      bfloat16 stored as the bits of the rounded float), the output with
 *      all-ones bytes (NaN for floats) so unwritten elements show;
 *   2. call the candidate once and copy its output back to the parent;
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

/* Outcome of one measurement: TIR_MEASURE_STATUS(enum suffix, name). */
#define TIR_MEASURE_STATUSES(X) \
	X(OK,           "ok")           /* built, ran, output correct, timed */ \
	X(BUILD_ERROR,  "build_error")  /* the compiler or NVRTC rejected it */ \
	X(RUN_ERROR,    "run_error")    /* could not load or launch, nonzero return */ \
	X(CRASH,        "crash")        /* killed by a signal, illegal address */ \
	X(TIMEOUT,      "timeout")      /* the watchdog killed it */ \
	X(WRONG_RESULT, "wrong_result") /* output differs from the reference */

typedef enum {
#define TIR_MS_ENUM(id, name) TIR_MEASURE_##id,
	TIR_MEASURE_STATUSES(TIR_MS_ENUM)
#undef TIR_MS_ENUM
	TIR_MEASURE_NSTATUSES
} tir_measure_status;

/* "ok", "build_error", ... */
const char *tir_measure_status_name(tir_measure_status s);

#define TIR_MEASURE_MAX_REPEATS 64

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
	int64_t out_elems;
	double *output;            /* malloc'd (tir_measure_result_clear), or NULL */
	double max_rel_error;      /* filled by tir_measure_check; -1 before */
	double run_s;              /* run_batch: wall seconds in the measuring
				    * process: loading, checking and timing */
	double timing_s;           /* of which in tir_time_repeats */
} tir_measure_result;

/* Frees result->output and zeroes the result (max_rel_error -1). */
void tir_measure_result_clear(tir_measure_result *r);

/* What build() produced; private to the runners, opaque to callers. */
typedef struct tir_artifact {
	const struct tir_runner *runner;
	char dir[256];             /* cpu: private temporary directory */
	char path[320];            /* cpu: the shared object in it */
	char *image;               /* cuda: the cubin, malloc'd */
	size_t image_size;
	int sm;                    /* cuda: compiled for */
} tir_artifact;

typedef struct tir_run_stream tir_run_stream;

typedef struct tir_runner {
	const char *name;
	/* Builds code for target; NULL with the compiler's message on failure.
	 * Safe to call from several threads at once. */
	tir_artifact *(*build)(const tir_code *c, const tir_target *t,
			       tir_error *err);
	/* Runs a built candidate (see above) and fills *r (status, message,
	 * times, output).  Returns 0 when status is OK, else -1. */
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

extern const tir_runner tir_runner_cpu;
extern const tir_runner tir_runner_cuda;

/* The runner for a target's kind. */
const tir_runner *tir_runner_for(const tir_target *t);

/* The whole measurement of one candidate, top to bottom: build with r,
 * run, check against the reference (WRONG_RESULT when max_rel_error exceeds
 * tir_measure_tolerance).  Fills *res, including the output; returns 0
 * when res->status is OK, else -1.  opts may be NULL for the defaults. */
int tir_measure(const tir_runner *r, const tir_workload *w, const tir_code *c,
		const tir_target *t, const tir_measure_opts *opts,
		tir_measure_result *res);

/* Fills o's zero fields with the defaults. */
tir_measure_opts tir_measure_opts_default(const tir_measure_opts *o);

/* Whether c takes the inputs and output of first at the same argument
 * indices, so that it can run on the buffers of first: tir_measure_fill's
 * values depend on the seed, the index, the dtype and the element count
 * only.  Scratch buffers may differ: each candidate gets its own. */
bool tir_code_same_args(const tir_code *first, const tir_code *c);

/* Index of c's output argument, or -1. */
int tir_code_output(const tir_code *c);

/* ---- check.c: the random inputs and the check against the reference ----------- */

/* Fills arg `index` of c (elems * elem_bytes bytes at dst) with the random
 * values of seed (see above): the same seed gives the same bytes, whatever
 * the runner.  Output and scratch arguments are not inputs: the output is
 * filled with 0xff bytes, scratch with zeros. */
void tir_measure_fill(const tir_code *c, int index, uint64_t seed, void *dst);

/* Converts n stored elements of dtype (a tir_dtype) to double; float16 and
 * bfloat16 from their bits. */
void tir_measure_to_double(int dtype, const void *src, int64_t n, double *dst);

/* The check against the reference.  Recreates the inputs of seed, converts
 * them to double (as stored: float16 / bfloat16 already rounded), computes
 * tir_reference and compares output (out_elems values) with it:
 *
 *   max_rel_error = max_i |out_i - ref_i| / max(max_i |ref_i|, 1e-30)
 *
 * a normwise relative error — an element-wise one is meaningless where the
 * reference is near zero, which random inputs make common.  A NaN or
 * infinite output element makes it +infinity.  Returns 0 with *max_rel_error
 * set, or -1 with a message when the code's arguments do not match the
 * workload's (tir_reference_args). */
int tir_measure_check(const tir_workload *w, const tir_code *c, uint64_t seed,
		      const double *output, int64_t out_elems,
		      double *max_rel_error, tir_error *err);

/* The two halves of tir_measure_check, so that a search computes the
 * (slow, naive) reference once per workload and seed: the reference output
 * (malloc'd, *n values), and the error of one output against it. */
int tir_measure_reference(const tir_workload *w, const tir_code *c, uint64_t seed,
			  double **ref, int64_t *n, tir_error *err);
double tir_measure_compare(const double *ref, const double *out, int64_t n);

/* The largest max_rel_error accepted for code with these arguments: the
 * loosest over the dtypes of its inputs and output of float32 1e-5,
 * float16 1e-2, bfloat16 2e-2; 0 (exact) when every one is an integer. */
double tir_measure_tolerance(const tir_code *c);

/* The verdict on an output of c (out_n values) against the reference (ref_n
 * values): RUN_ERROR when the counts differ, WRONG_RESULT when the error
 * (tir_measure_compare, stored in *max_rel_error) exceeds
 * tir_measure_tolerance(c), else OK.  When not OK, msg (size bytes) says
 * why; it is left alone when OK. */
tir_measure_status tir_measure_judge(const tir_code *c, const double *ref, int64_t ref_n,
				     const double *out, int64_t out_n,
				     double *max_rel_error, char *msg, size_t size);

/* ---- guard.c: the child-process guards (for runners only) --------------------- */

/* The child reports through a tir_child_report in shared memory
 * (tir_child_report_new: MAP_SHARED, so it survives the child), followed by
 * out_bytes bytes for the raw output. */
typedef struct tir_child_report {
	int status;                /* a tir_measure_status the child decided */
	char msg[512];
	int nrepeats;
	double median_us;
	double repeat_us[TIR_MEASURE_MAX_REPEATS];
	double timing_s;           /* wall seconds in tir_time_repeats */
	int output_ready;          /* 1 once out[] holds the output */
	size_t out_bytes;
	unsigned char out[];
} tir_child_report;

tir_child_report *tir_child_report_new(size_t out_bytes);
void tir_child_report_free(tir_child_report *rep);

/* Runs fn(ctx, rep) in a forked child, which exits when fn returns; kills it
 * after timeout_s.  Sets r->status / r->msg from how the child ended: a
 * signal is CRASH ("candidate crashed with SIGSEGV"), the watchdog TIMEOUT
 * ("timed out after 10 s"), a normal exit takes rep->status and rep->msg.
 * Returns 0 when the child ended normally with rep->status OK. */
int tir_child_run(double timeout_s, void (*fn)(void *ctx, tir_child_report *rep),
		  void *ctx, tir_child_report *rep, tir_measure_result *r);

/* Converts the child's raw output (dtype of the output argument of c) into
 * r->output and copies its times into r. */
void tir_child_collect(const tir_child_report *rep, const tir_code *c,
		       tir_measure_result *r);

/* The whole guarded run of one candidate: a report sized for c's output,
 * fn in a child (tir_child_run), the output and times collected into r.
 * Returns 0 when the child ended with status OK. */
int tir_child_measure(const tir_code *c, double timeout_s,
		      void (*fn)(void *ctx, tir_child_report *rep), void *ctx,
		      tir_measure_result *r);

/* The guard for a batch: items 0..n-1 in as few forked children as their
 * failures allow.  Each child calls setup(ctx, rep) once (NULL: nothing to
 * set up), then item(ctx, i, rep, &max_rel_error) for its items in order;
 * item fills rep's status, msg and times (rep starts as RUN_ERROR "ended
 * without a report", max_rel_error as -1) and returns 0 to go on, or
 * TIR_BATCH_END when the child's state is no longer fit for the next item
 * (a CUDA context after a fault): the child then ends and a fresh one,
 * with a fresh setup, takes the next item.
 *
 * The items' reports live in MAP_SHARED memory with the index of the item
 * the child is on, so the parent knows where any child stopped:
 *   - killed by a signal: that item is CRASH ("candidate crashed with
 *     SIGSEGV"), the rest go on in a fresh child;
 *   - still on one item timeout_s after it began (the watchdog, per item,
 *     not per batch): SIGKILLed, that item TIMEOUT, the rest go on;
 *   - exited during an item: that item RUN_ERROR, the rest go on;
 *   - setup failed (returned -1 with rep set, crashed, exited, or took
 *     longer than timeout_s): every item not yet measured gets RUN_ERROR
 *     with setup's message, and no child is forked again — a fresh child
 *     would fail the same way.
 * Every item ends with a status and, when not OK, a message.  Fills r[i]'s
 * status, msg, times and max_rel_error; r[] is overwritten and must hold no
 * output.  Returns the number of children forked (1 when nothing failed).
 * setup and item run only in children; ctx is the parent's memory as it was
 * at each fork. */
#define TIR_BATCH_END 1
int tir_child_batch(int n, double timeout_s,
		    int (*setup)(void *ctx, tir_child_report *rep),
		    int (*item)(void *ctx, int i, tir_child_report *rep,
				double *max_rel_error),
		    void *ctx, tir_measure_result *r);

/* The same guard over items that become ready over time (tir_child_batch
 * is start, every item put, finish).  start forks the first child at once,
 * in the calling thread, so its setup (a CUDA context) overlaps whatever
 * the caller does next; items are measured in the order they are put;
 * while the child waits for one, the watchdog does not count.  put (from
 * any thread) says item i (0 <= i < n, at most once) is ready: what the
 * child's item(ctx, i) reads must by then be in memory the child shares
 * (MAP_SHARED mapped before start; ctx itself is the parent's memory as it
 * was at the fork).  finish closes the stream, waits for the children and
 * fills r[0..n-1] as tir_child_batch does — an item never put gets
 * RUN_ERROR "not measured" — and returns the number of children forked.
 * After a child dies a fresh one is forked only once the stream is closed:
 * callers put from threads that build, and a fork while another thread
 * holds a lock (the dynamic loader's, say) could leave the child stuck. */
typedef struct tir_child_stream tir_child_stream;
tir_child_stream *tir_child_stream_start(int n, double timeout_s,
					 int (*setup)(void *ctx, tir_child_report *rep),
					 int (*item)(void *ctx, int i, tir_child_report *rep,
						     double *max_rel_error),
					 void *ctx);
void tir_child_stream_put(tir_child_stream *s, int i);
int tir_child_stream_finish(tir_child_stream *s, tir_measure_result *r);

/* ---- timing.c: the clock and the timing loop (for runners only) --------------- */

/* CLOCK_MONOTONIC in seconds. */
double tir_now_s(void);

/* How a candidate whose one call takes one_us is timed: *calls per repeat
 * (enough to last o->min_repeat_us, at most 1e7), and the repeats returned:
 * want, or fewer (at least one) where they would not end within 80% of
 * o->timeout_s with spent_s seconds of it already spent: a slow candidate
 * is reported, not timed out.  The rule of tir_time_repeats and of the CPU
 * batch's rounds. */
int tir_repeat_plan(const tir_measure_opts *o, double one_us, double spent_s, int want,
		    long *calls);

/* The median of v[0..n) (n >= 1; v is sorted in place). */
double tir_median(double *v, int n);

/* The timing loop every runner shares: one warm-up call, one timed call to
 * choose how many calls make a repeat of at least o->min_repeat_us (or, past
 * o->slow_us, to be the one repeat reported), then o->repeats repeats, each
 * after flush(ctx).  timed(ctx, n, &us) runs n
 * calls and returns 0 with the elapsed microseconds, or -1 with a message in
 * rep->msg (and rep->status set).  Fills rep's times; returns 0 or -1. */
int tir_time_repeats(const tir_measure_opts *o, void *ctx,
		     int (*flush)(void *ctx, tir_child_report *rep),
		     int (*timed)(void *ctx, long n, double *us, tir_child_report *rep),
		     tir_child_report *rep);

/* ---- cuda_props.c --------------------------------------------------------------- */

/* Fills the GPU fields of *t (sm, sm_count, max_threads_per_block,
 * max_shared_per_block (opt-in), warp_size, l2_bytes; kind and key
 * "cuda:sm_XY") from device `ordinal`, asking the driver (dlopen'd) in a
 * child process so that the caller never initialises CUDA itself (a forked
 * child of a process that has cannot use CUDA).  Returns -1 with a message
 * when no driver loads or there is no such device. */
int tir_cuda_device_props(int ordinal, tir_target *t, tir_error *err);

/* ---- batch.c: the context of tir_measure_local --------------------------------- */

/* The context tir_measure_local takes (ctx may also be NULL: default options,
 * the reference computed for every batch; tir_measure_cache_new makes one
 * with the defaults).  With a context the reference output is computed once
 * per (workload, seed) and kept until measure_local_clear. */
typedef struct measure_local {
	tir_measure_opts opts;      /* repeats, min_repeat_us, timeout_s, seed */
	int threads;                /* builders; 0: every online core */
	char ref_key[65];           /* workload key of ref */
	uint64_t ref_seed;
	double *ref;
	int64_t ref_n;
	tir_measure_phases phases;  /* of the last batch */
} measure_local;

void measure_local_clear(measure_local *l);

#endif
