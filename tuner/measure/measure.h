/*
 * measure.h — measuring candidates, internal to tuner/: the reference
 * implementation that every candidate's output is checked against, then
 * what the builders and runners share (runner.c: the interface; check.c:
 * the inputs and the check; guard.c: the child-process guards; timing.c:
 * the timing loop), the runners (cpu.c; cuda_run.c, with the files that
 * cuda_runner.h joins) and batch measurement (batch.c).  The public part —
 * the runner table, tir_measure, the options and results — is
 * ../tir_measure.h; the statuses, the clock, tir_cuda_device_props and
 * tir_measure_local are in ../tir.h.
 *
 * Design.  A candidate is trusted only after its output matches an
 * independent computation of the same workload on the same random inputs.
 * The reference is the workload's unscheduled program — its compute
 * definition's blocks before any schedule — run by the IR's interpreter in
 * double precision (reference.c, ../ir/interp.c).  The interpreter is
 * written from the IR's semantics (docs/ir-semantics.md), not from the code
 * generators, and the unscheduled program shares nothing with a candidate
 * but its compute definition: a bug in a schedule primitive or a code
 * generator cannot hide in both, and every workload a compute definition
 * builds, a graph of many blocks and outputs included, has a reference.
 * What it cannot see is a compute definition that means the wrong thing:
 * the tests check those against a hand-written reference of every
 * single-operator workload (tests/reference.c, written from the
 * conventions below, without the IR).
 *
 * Several outputs.  The reference's arguments are the program's parameters,
 * in order; a program may have several outputs.  A reference, and the
 * output a runner brings back, is then every output concatenated in
 * argument order, each as doubles; the sizes of the parts are the code's
 * output arguments' (tir_code_output_elems and the rest, runner.c), and
 * each part is compared with its reference on its own (tir_measure_judge).
 *
 * Argument convention of the single-operator workloads, shared with the IR
 * (compute.c) and the code generators: the operator's inputs first, then
 * the epilogue operands in the order the epilogues are listed, then the
 * output.  Memory layouts, row-major:
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
#include <stddef.h>
#include <stdint.h>
#include "../tir.h"
#include "../tir_measure.h"

/* ---- reference.c: the reference ---------------------------------------------- */

#define TIR_REF_MAX_ARGS 64
#define TIR_REF_MAX_DIMS 8

/* One argument of a workload's program: one of its parameters. */
typedef struct tir_ref_arg {
	char name[32];             /* the buffer's: "A", "X", "bias", "residual", "Y" */
	int dtype;                 /* a tir_dtype */
	int ndim;
	int64_t shape[TIR_REF_MAX_DIMS];
	int64_t elems;
	bool is_output;
} tir_ref_arg;

/* The arguments of w's unscheduled program, its parameters in order: fills
 * args[0..n-1] and returns n, or -1 with a message when max is too small
 * or the program cannot be built. */
int tir_reference_args(const tir_workload *w, tir_ref_arg *args, int max,
		       tir_error *err);

/* Runs w's unscheduled program in double precision (ir/interp.c): args[i]
 * holds argument i of tir_reference_args, its elements row-major; inputs
 * are read, outputs written.  Returns 0, or -1 with a message ("reference:
 * ..."). */
int tir_reference(const tir_workload *w, double *const *args, tir_error *err);

/* ---- runner.c: the runner interface (its contract: ../tir_measure.h) ---------- */

/* What build() produced (tir_artifact, opaque outside the runners). */
struct tir_artifact {
	const struct tir_runner *runner;
	char dir[256];             /* cpu: private temporary directory */
	char path[320];            /* cpu: the shared object in it */
	char entry[80];            /* cpu: its entry point's symbol; "": the code's
				    * (tir_code.entry; a group build renames it) */
	char *image;               /* cuda: the cubin, malloc'd */
	size_t image_size;
	int sm;                    /* cuda: compiled for */
};

/* The runners, one per kind of hardware: cpu.c and cuda_run.c.  Outside
 * tuner/, tir_runner_for picks one. */
extern const tir_runner tir_runner_cpu;
extern const tir_runner tir_runner_cuda;

/* cpu.c: evicts the n buffers p[i] (bytes[i] each) from every cache of the
 * coherence domain, each line written back if dirty and invalidated, so
 * that the next call reads them from memory as a cold call would (CLFLUSH
 * on x86, DC CIVAC on AArch64; elsewhere a write of twice the last-level
 * cache).  The CPU runner's flush before each timed repeat, on the
 * candidate's arguments; bench/cpu_tune's for the peers', on theirs. */
void tir_cpu_evict(int n, const void *const *p, const size_t *bytes);

/* Fills o's zero fields with the defaults. */
tir_measure_opts tir_measure_opts_default(const tir_measure_opts *o);

/* Whether c takes the inputs and output of first at the same argument
 * indices, so that it can run on the buffers of first: tir_measure_fill's
 * values depend on the seed, the index, the dtype and the element count
 * only.  Scratch buffers may differ: each candidate gets its own. */
bool tir_code_same_args(const tir_code *first, const tir_code *c);

/* c's output arguments: how many; their elements and bytes in all. */
int tir_code_noutputs(const tir_code *c);
int64_t tir_code_output_elems(const tir_code *c);
size_t tir_code_output_bytes(const tir_code *c);

/* Copies c's outputs as stored, args[i] being argument i, to raw: every
 * output concatenated in argument order (tir_code_output_bytes(c) bytes). */
void tir_code_outputs_pack(const tir_code *c, void *const *args, void *raw);

/* Converts outputs packed so (each in its dtype) to doubles, concatenated in
 * the same order: tir_code_output_elems(c) values. */
void tir_code_outputs_unpack(const tir_code *c, const void *raw, double *dst);

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
 * the reference and compares output (out_elems values: every output
 * concatenated in argument order) with it, output by output:
 *
 *   max_rel_error = max over outputs of
 *                   max_i |out_i - ref_i| / max(max_i |ref_i|, 1e-30)
 *
 * a normwise relative error — an element-wise one is meaningless where the
 * reference is near zero, which random inputs make common.  A NaN or
 * infinite output element makes it +infinity.  Returns 0 with *max_rel_error
 * set, or -1 with a message when the code's arguments do not match the
 * program's (tir_reference_args: count, elements, dtypes, which are
 * outputs) or the reference cannot be computed. */
int tir_measure_check(const tir_workload *w, const tir_code *c, uint64_t seed,
		      const double *output, int64_t out_elems,
		      double *max_rel_error, tir_error *err);

/* The two halves of tir_measure_check, so that a search computes the
 * reference once per workload and seed: the reference output (malloc'd,
 * *n values: every output of the program concatenated in argument order),
 * and the error of one array against another.  The inputs are filled by
 * c's argument indices (tir_measure_fill), the outputs start as the
 * candidates' do (all-ones bytes).  Where the reference is not finite (a
 * NaN: a square root of a negative input, say — a kernel of a fusion plan
 * gets random values for what another kernel computes) a candidate must
 * give the same NaN or infinity there; an output with no finite element
 * is an error (nothing to check).  The error: normwise over the finite
 * elements of the reference, infinite where a candidate differs from it in
 * finiteness. */
int tir_measure_reference(const tir_workload *w, const tir_code *c, uint64_t seed,
			  double **ref, int64_t *n, tir_error *err);
double tir_measure_compare(const double *ref, const double *out, int64_t n);

/* The largest max_rel_error accepted for code with these arguments: the
 * loosest over the dtypes of its inputs and outputs of float32 1e-5,
 * float16 1e-2, bfloat16 2e-2; 0 (exact) when every one is an integer. */
double tir_measure_tolerance(const tir_code *c);

/* The verdict on an output of c (out_n values) against the reference (ref_n
 * values): RUN_ERROR when the counts differ; else each output of c (its
 * part of both, in argument order) is compared on its own
 * (tir_measure_compare), *max_rel_error is the largest, and WRONG_RESULT
 * when it exceeds tir_measure_tolerance(c), naming the output, else OK.
 * When not OK, msg (size bytes) says why; it is left alone when OK. */
tir_measure_status tir_measure_judge(const tir_code *c, const double *ref, int64_t ref_n,
				     const double *out, int64_t out_n,
				     double *max_rel_error, char *msg, size_t size);

/* ---- guard.c: the child-process guards (for runners only) --------------------- */

/* The child reports through a tir_child_report in shared memory
 * (tir_child_report_new: MAP_SHARED, so it survives the child), followed by
 * out_bytes bytes for the raw outputs: every output as stored, concatenated
 * in argument order (tir_code_outputs_pack; the parts' sizes are the
 * code's output arguments'). */
typedef struct tir_child_report {
	int status;                /* a tir_measure_status the child decided */
	char msg[512];
	int nrepeats;
	double median_us;
	double repeat_us[TIR_MEASURE_MAX_REPEATS];
	double timing_s;           /* wall seconds in tir_time_repeats */
	double launch_us;          /* CUDA: the launch term in median_us, per kernel */
	int timer;                 /* tir_timer */
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

/* Converts the child's raw outputs (tir_code_outputs_unpack) into r->output,
 * with their count and sizes, and copies its times into r. */
void tir_child_collect(const tir_child_report *rep, const tir_code *c,
		       tir_measure_result *r);

/* The whole guarded run of one candidate: a report sized for c's outputs,
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

/* ---- timing.c: the timing loop (for runners only) ----------------------------- */

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
	/* the compile cache (batch.c): builds kept by the SHA-256 of what made
	 * them, made at the first batch; NULL before */
	struct compile_cache *builds;
} measure_local;

/* Frees what l holds (the reference, the compile cache and its builds),
 * not l itself; l can be used again. */
void measure_local_clear(measure_local *l);

#endif
