/*
 * tir.h — the public API of libtir, tird's tuning library.
 *
 * libtir turns an operator workload (JSON) into a loop-nest program in a small
 * TensorIR-style IR, transforms it with schedule primitives recorded in a trace,
 * validates the result and generates C or CUDA code for it.  It knows nothing of
 * HTTP or SQLite; the daemon and tirctl are its callers.
 *
 * Conventions, for every function below:
 *  - Errors are values: a function that can fail returns a status (0 / NULL / -1 on
 *    failure) and fills *err with a message naming the input at fault.  err may be
 *    NULL.  Nothing here exits or aborts on bad input; allocation failure is fatal.
 *  - Strings returned as `char *` are malloc'd and owned by the caller (free()).
 *    Strings returned as `const char *` belong to the object they came from.
 *  - Objects are opaque and not thread-safe; distinct objects may be used from
 *    distinct threads at once (libtir keeps no global mutable state).
 */
#ifndef TIR_H
#define TIR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tir_error {
	char msg[512];
} tir_error;

/* Fills err->msg like printf; returns -1 so callers can `return tir_fail(...)`. */
int tir_fail(tir_error *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ---- workload.c: operator workloads ------------------------------------ */

typedef struct tir_workload tir_workload;

/* Bounds that keep one request from exhausting memory or time.  A field of 0
 * means "use the default" (tir_limits_default). */
typedef struct tir_limits {
	int64_t max_extent;        /* any single dimension */
	int64_t max_elements;      /* any one buffer, in elements */
	double max_flops;          /* the whole operator */
	int max_json_depth;        /* nesting of the workload document */
	size_t max_json_bytes;     /* length of the workload document */
	int max_nodes;             /* nodes of a graph workload */
} tir_limits;

tir_limits tir_limits_default(void);

/* Parses and validates one workload document (see DESIGN.md, "Workload JSON").
 * lim may be NULL for the defaults.  Returns NULL with a message naming the
 * offending key or value on any fault. */
tir_workload *tir_workload_parse(const char *json, size_t len,
				 const tir_limits *lim, tir_error *err);
void tir_workload_free(tir_workload *w);

/* The canonical JSON: every key present with its default filled in, sorted
 * keys, no whitespace.  Two documents that mean the same workload have the
 * same canonical form. */
const char *tir_workload_canonical(const tir_workload *w);
/* SHA-256 of the canonical JSON, 64 lowercase hex digits. */
const char *tir_workload_key(const tir_workload *w);
/* The operator's name ("conv2d", ...). */
const char *tir_workload_op(const tir_workload *w);
/* The dtype of an operator workload's inputs (a tir_dtype, tir_dtype_name);
 * -1 for a graph, whose nodes may each have their own. */
int tir_workload_dtype(const tir_workload *w);
/* Useful floating-point operations of one call (2 per multiply-add). */
double tir_workload_flops(const tir_workload *w);

/* ---- target.c: what code is generated for ------------------------------ */

typedef enum { TIR_TARGET_CPU, TIR_TARGET_CUDA } tir_target_kind;

typedef struct tir_target {
	tir_target_kind kind;
	char key[128];            /* full key: "cpu:x86_64+avx2+fma", "cuda:sm_90+h200" */
	/* cpu */
	int vector_bytes;         /* widest SIMD register: 16, 32 or 64 */
	int cores;
	bool emulated;            /* the key ends in "+emulated": measured under an
				   * emulator (qemu-user), never the hardware's */
	char emulator[64];        /* which, as detected ("qemu-aarch64-st"), or "" */
	/* cuda */
	int sm;                   /* compute capability * 10, e.g. 90 */
	int sm_count;
	int max_threads_per_block;
	int max_shared_per_block; /* opt-in limit, bytes */
	int warp_size;
	int64_t l2_bytes;
} tir_target;

/* Parses "cpu", "cuda", "cuda:sm_90", "cuda:sm_90+h200",
 * "cpu:x86_64+avx2+fma", ...  A bare "cpu" is this machine's CPU, detected; a
 * bare "cuda" is the first GPU (detected through the driver where one loads,
 * else an error), whose key names its part ("cuda:sm_90+h200",
 * "cuda:sm_90+h100-80gb-hbm3"): parts of one architecture keep their own
 * records, bests and cost models.  Known architectures take their limits
 * from a built-in table; code for "cuda:sm_90+PART" is code for sm_90. */
int tir_target_parse(const char *s, tir_target *t, tir_error *err);

/* The part of a CUDA key from the driver's device name: lower case, without
 * the vendor's "NVIDIA ", each run of other characters than letters and
 * digits one '-' ("NVIDIA H100 80GB HBM3" -> "h100-80gb-hbm3").  false (out
 * "") when nothing is left. */
#define TIR_CUDA_PART_MAX 48
bool tir_cuda_part_of_name(const char *name, char *out, size_t n);

/* Whether this process runs under a user-mode emulator (qemu-user); which,
 * in emu.  A bare "cpu" asks it, and its key then ends in "+emulated". */
bool tir_cpu_emulated(char *emu, size_t n);
/* Whether CPU target t's key names feature f ("dotprod", "avx512vnni"). */
bool tir_target_has(const tir_target *t, const char *f);

/* The roofline of a target: peak compute and memory bandwidth.  tird has
 * no calibration, so both are nominal figures, never measured: for a CUDA
 * key the float32 (CUDA-core, not tensor-core) peak and the DRAM bandwidth
 * of the data-sheet part its architecture table names (sm_90: H200 SXM);
 * for a CPU key t->cores x SIMD lanes x 2 flops (x 2 FMA pipes with fma or
 * on AArch64) at an assumed 3.0 GHz, and two channels of DDR4-3200.  basis
 * says how each figure was made, for people reading the plot. */
typedef struct tir_peak {
	double gflops;            /* float32 GFLOP/s */
	double gbps;              /* DRAM GB/s (1e9 bytes) */
	char basis[256];
} tir_peak;
void tir_target_peak(const tir_target *t, tir_peak *out);

/* The ceiling of a target for an input dtype: a throughput that no genuine
 * measurement on any hardware the key can name beats, from the key alone (an
 * importing tird may have no such hardware).  Unlike tir_target_peak's
 * nominal figures it is an upper bound: for a CUDA key 2 x the highest dense
 * data-sheet throughput of any part of its architecture for the dtype,
 * tensor cores included (TF32 for float32); for a CPU key the key's vector
 * width at 512 cores x 6 GHz x 3 (x86) or 4 (AArch64) pipes of the dtype's
 * widest multiply-add instruction (AMX on an x86 key naming avx512vnni).
 * dtype is a tir_dtype (tir_workload_dtype) or -1: the highest of float32,
 * float16, bfloat16 and int8.  basis says how it was made ("2 x H200 SXM's
 * dense tensor-core peak of 989 TFLOP/s"), for error messages. */
typedef struct tir_ceiling {
	double gflops;            /* GFLOP/s (GOP/s for int8), 1e9 a second */
	const char *unit;         /* "FLOP/s", or "OP/s" for int8 */
	char basis[160];
} tir_ceiling;
void tir_target_ceiling(const tir_target *t, int dtype, tir_ceiling *out);

/* measure/cuda_props.c: fills the GPU fields of *t (sm, sm_count,
 * max_threads_per_block, max_shared_per_block (opt-in), warp_size, l2_bytes;
 * kind and key "cuda:sm_XY") from device `ordinal`, asking the driver
 * (dlopen'd) in a child process so that the caller never initialises CUDA
 * itself (a forked child of a process that has cannot use CUDA).  Returns -1
 * with a message when no driver loads or there is no such device. */
int tir_cuda_device_props(int ordinal, tir_target *t, tir_error *err);

/* ---- records.c: files of measured records (tirctl export) -------------- */

#define TIR_RECORDS_FORMAT "tird-records/1"

/* All of file path ("-": standard input), NUL-terminated; *len (may be
 * NULL) without the NUL.  NULL with errno set when it cannot be read, or
 * EFBIG when it is longer than max bytes (0: no limit). */
char *tir_read_file(const char *path, size_t max, size_t *len);

typedef struct tir_records tir_records;

/* One record of a file.  Strings belong to the tir_records. */
typedef struct tir_record {
	int workload;              /* index for tir_records_workload */
	const char *target;        /* a full target key ("cpu:x86_64+avx2", "cuda:sm_90") */
	const char *trace;         /* JSON (tir_sched_trace), not yet replayed */
	const char *status;        /* "ok" or why not */
	double latency_us;         /* 0 when absent */
	double max_rel_error;      /* -1 when absent */
	const char *message;       /* NULL when absent */
	const char *worker;        /* NULL when absent */
	double created;            /* unix seconds, 0 when absent */
} tir_record;

/* Which part of a records document is at fault. */
typedef enum {
	TIR_RECORDS_BAD_JSON,      /* not JSON, or cannot be read */
	TIR_RECORDS_BAD_DOCUMENT,  /* not the format, or a record's fields */
	TIR_RECORDS_BAD_WORKLOAD,  /* a workload does not parse or has the wrong key */
	TIR_RECORDS_BAD_TARGET,    /* a record's target is not a full target key */
} tir_records_fault;

/* Parses and checks a whole document of format TIR_RECORDS_FORMAT: every
 * workload within lim (NULL: the defaults) under the key of its canonical
 * form, every record with a workload of the file, a full target key, a trace
 * and a status.  NULL on the first fault, with *fault (may be NULL) and err
 * naming it ("records[3]: target ...").  Traces are not replayed here. */
tir_records *tir_records_parse(const char *text, size_t len, const tir_limits *lim,
			       tir_records_fault *fault, tir_error *err);
/* The same for the file at path; err's message starts with the path. */
tir_records *tir_records_read(const char *path, const tir_limits *lim,
			      tir_records_fault *fault, tir_error *err);
void tir_records_free(tir_records *r);
int tir_records_workloads(const tir_records *r);
const tir_workload *tir_records_workload(const tir_records *r, int i);
int tir_records_count(const tir_records *r);
const tir_record *tir_records_at(const tir_records *r, int i);

/* ---- ir/: programs ------------------------------------------------------ */

typedef struct tir_program tir_program;

/* The workload's initial program: its compute definition lowered into buffers,
 * loops and blocks, unscheduled (a graph workload's: tir_graph_program(w,
 * NULL, NULL), below). */
tir_program *tir_program_build(const tir_workload *w, tir_error *err);
void tir_program_free(tir_program *p);
/* TVMScript-like text of the program. */
char *tir_program_print(const tir_program *p);
/* The bytes one call must move at the least: every parameter buffer of
 * the program (the inputs, read once, and the output, written once),
 * whole.  With tir_workload_flops it places a workload on a roofline
 * (arithmetic intensity = flops / bytes). */
double tir_program_param_bytes(const tir_program *p);

/* ---- graph.c: graph workloads ("op": "graph", DESIGN.md "Graph workloads") */

/* A graph's nodes are numbered in the document's order.  A set of nodes (a
 * part of the graph, or which of them to realize) is a mask of
 * tir_graph_nodes(w) bytes, non-zero for a member. */

/* The number of nodes; 0 when w is not a graph. */
int tir_graph_nodes(const tir_workload *w);
/* A node's name and op ("add", "sum", "reshape", "matmul", ...); NULL out
 * of range. */
const char *tir_graph_node_name(const tir_workload *w, int node);
const char *tir_graph_node_op(const tir_workload *w, int node);
/* The node called name, or -1. */
int tir_graph_node_find(const tir_workload *w, const char *name);
/* 1 when no output of the graph depends on the node: it is parsed and
 * checked but computed by no program (a fusion plan's "dropped"). */
int tir_graph_node_dropped(const tir_workload *w, int node);

/* Which nodes of part (NULL: every node) the default rule realizes (graph.c's
 * top comment): fills realize[0 .. tir_graph_nodes(w)).  Returns -1 with a
 * message for a part that is not a set of the graph's nodes. */
int tir_graph_default_realize(const tir_workload *w, const unsigned char *part,
			      unsigned char *realize, tir_error *err);
/* One program computing the nodes of part (NULL: the whole graph), each node
 * of realize (NULL: the default rule) in a block of its own; every other
 * pointwise or view node inlined into its users.  Reductions, heavy
 * operators and the part's outputs are realized whatever realize says.
 * Parameters: what the part reads (the graph's inputs in their order, then
 * other nodes' values in node order), then what it produces (the graph's
 * outputs in their order, then values other nodes read, in node order).
 * tir_program_build(w) is tir_graph_program(w, NULL, NULL). */
tir_program *tir_graph_program(const tir_workload *w, const unsigned char *part,
			       const unsigned char *realize, tir_error *err);
/* The program of one kernel of a fusion plan whose realized nodes are
 * realize (over the whole graph): the nodes of members (each realized) and
 * the nodes they read that the plan inlines, and theirs, recomputed here (a
 * node inlined into two kernels is computed by both).  Parameters: what it
 * reads of the graph's inputs and the plan's other realized nodes; its
 * outputs: members that are graph outputs or that realized nodes outside
 * it read; other members are kernel-local temporaries. */
tir_program *tir_graph_kernel(const tir_workload *w, const unsigned char *realize,
			      const unsigned char *members, tir_error *err);

/* ---- fusion/: fusion plans of graph workloads --------------------------- */

/* How a graph's nodes are grouped into kernels (tuner/fusion/fusion.h):
 * TorchInductor's scheduler (can_fuse, score_fusion, fuse_nodes), TVM's
 * FuseOps rules, or one kernel per node (eager). */
typedef enum { TIR_FUSE_INDUCTOR, TIR_FUSE_TVM, TIR_FUSE_EAGER, TIR_FUSE_MEASURED } tir_fuse_mode;
/* "inductor", "tvm", "eager", "measured"; -1 with a message naming the
 * modes.  A measured plan is decided by tuning (tirctl tune --fusion
 * measured: each fusion of the Inductor plan kept only where the fused
 * kernel is faster than its parts, tir_fusion_plan_split); tir_fusion_plan_new
 * refuses it. */
int tir_fuse_mode_parse(const char *s, tir_fuse_mode *mode, tir_error *err);
const char *tir_fuse_mode_name(tir_fuse_mode mode);

typedef struct tir_fusion_plan tir_fusion_plan;
/* The plan of graph workload w (it must outlive the plan). */
tir_fusion_plan *tir_fusion_plan_new(const tir_workload *w, tir_fuse_mode mode,
				     tir_error *err);
void tir_fusion_plan_free(tir_fusion_plan *p);
int tir_fusion_plan_kernels(const tir_fusion_plan *p);
/* Kernel k's members (the nodes it realizes): how many. */
int tir_fusion_kernel_members(const tir_fusion_plan *p, int k);
/* p with every kernel k where split[k] is non-zero split into one kernel per
 * member (the parts of a fusion), the others as they are; mode m. */
tir_fusion_plan *tir_fusion_plan_split(const tir_fusion_plan *p, const unsigned char *split,
				       tir_fuse_mode m, tir_error *err);
/* Beyond Inductor: the plans its greedy order skipped.  Where fuse_nodes
 * took a fusion over another of one of its nodes with a near-equal score
 * (template and node type equal, memory within 1.25x) and could then not
 * take the other, the Inductor plan with the fusion taken refused is an
 * alternative.  Fills out[0..n) with up to max of them, each different
 * from the Inductor plan and from the others, and returns n (the caller
 * frees them); -1 with a message for a graph that has no plan. */
int tir_fusion_plan_alternatives(const tir_workload *w, tir_fusion_plan **out, int max,
				 tir_error *err);
/* Whether every member of kernel k of p is a member of kernel k2 of p2 (a
 * part of it), for plans of one graph. */
int tir_fusion_kernel_within(const tir_fusion_plan *p, int k, const tir_fusion_plan *p2,
			     int k2);
/* Kernel k's name and bytes (k in execution order). */
const char *tir_fusion_kernel_name(const tir_fusion_plan *p, int k);
/* The program of kernel k (tir_graph_kernel). */
tir_program *tir_fusion_kernel_program(const tir_fusion_plan *p, int k, tir_error *err);
/* Kernel k as a graph workload of its own (malloc'd JSON): its inputs are
 * what it reads (graph inputs, other kernels' values), its nodes what it
 * computes, its outputs its members that the graph or another kernel needs;
 * tuned like any workload, so two graphs with the same kernel share its
 * key and its records. */
char *tir_fusion_kernel_json(const tir_fusion_plan *p, int k);
/* The plan as one JSON document (DESIGN.md "Graph workloads"): {"mode",
 * "kernels": [{"name", "nodes", "read_bytes", "write_bytes"}], "rejected":
 * [{"nodes": [a, b], "reason"}], "dropped", "read_bytes", "write_bytes"};
 * and as a table for people.  malloc'd. */
char *tir_fusion_plan_json(const tir_fusion_plan *p);
char *tir_fusion_plan_text(const tir_fusion_plan *p);

/* ---- sched/: schedules and traces --------------------------------------- */

/* A schedule is a program being transformed plus the trace of every
 * instruction applied to it.  Random variables (RVs) name the blocks, loops and
 * integers that instructions take and return; they are small integers valid
 * for the schedule that returned them. */
typedef struct tir_sched tir_sched;

tir_sched *tir_sched_new(const tir_workload *w, uint64_t seed, tir_error *err);
void tir_sched_free(tir_sched *s);
const tir_program *tir_sched_program(const tir_sched *s);
/* The trace as JSON: {"insts":[{"op":..., "in":[...], "attrs":{...},
 * "out":[...], "decision":...}, ...]}. */
char *tir_sched_trace(const tir_sched *s);
/* Applies every instruction of a trace (JSON as above) in order; sampling
 * instructions take their recorded decisions.  On failure the message names
 * the instruction's index and op; the schedule is then unusable. */
int tir_sched_replay(tir_sched *s, const char *trace_json, tir_error *err);
/* The 32-byte identity (SHA-256) of a canonical trace text: the trace a
 * fresh schedule prints (tir_sched_trace) after replaying it, so the same
 * decisions of the same sketch have the same identity wherever they came
 * from.  Hashes any NUL-terminated text. */
void tir_trace_hash(const char *trace, unsigned char out[32]);

/* An integer argument: a literal, or an integer RV returned by a sampler. */
typedef struct tir_int {
	int rv;        /* >= 0: an integer RV; -1: the literal below */
	int64_t lit;   /* with rv == -1; 0 in a split factor list means "infer" */
} tir_int;
#define TIR_LIT(x) ((tir_int){ -1, (x) })
#define TIR_RV(r)  ((tir_int){ (r), 0 })

typedef enum {
#define TIR_THREAD_TAG(id, name) TIR_##id,
#include "thread_tags.def"
#undef TIR_THREAD_TAG
	TIR_NTHREAD_TAGS
} tir_thread_tag;

/* Every primitive returns the RV of its (first) result or 0 on success, and -1
 * with a message on a failed precondition; the program is then unchanged and
 * nothing is appended to the trace. */
int tir_get_block(tir_sched *s, const char *name, tir_error *err);
int tir_get_loops(tir_sched *s, int block, int *loops, int max, tir_error *err);
int tir_split(tir_sched *s, int loop, int n, const tir_int *factors,
	      int *out_loops, tir_error *err);
int tir_fuse(tir_sched *s, int n, const int *loops, tir_error *err);
int tir_reorder(tir_sched *s, int n, const int *loops, tir_error *err);
int tir_bind(tir_sched *s, int loop, const char *thread_tag, tir_error *err);
int tir_parallel(tir_sched *s, int loop, tir_error *err);
int tir_vectorize(tir_sched *s, int loop, tir_error *err);
int tir_unroll(tir_sched *s, int loop, tir_error *err);
int tir_cache_read(tir_sched *s, int block, int read_index, const char *scope,
		   tir_error *err);
/* The same, every block that reads the buffer reading the cache (TensorIR's
 * cache_read without consumer blocks): one copy, in the innermost loop
 * holding them all, before the first of them, of what they read in one of
 * its iterations. */
int tir_cache_read_all(tir_sched *s, int block, int read_index, const char *scope,
		       tir_error *err);
int tir_cache_write(tir_sched *s, int block, int write_index, const char *scope,
		    tir_error *err);
int tir_compute_at(tir_sched *s, int block, int loop, tir_error *err);
int tir_reverse_compute_at(tir_sched *s, int block, int loop, tir_error *err);
int tir_compute_inline(tir_sched *s, int block, tir_error *err);
int tir_reverse_compute_inline(tir_sched *s, int block, tir_error *err);
int tir_decompose_reduction(tir_sched *s, int block, int loop, tir_error *err);
int tir_storage_align(tir_sched *s, int block, int buffer_index, int axis,
		      int factor, int offset, tir_error *err);
int tir_annotate(tir_sched *s, int rv, const char *key, int64_t value,
		 tir_error *err);
/* annotate with the value of an integer RV (a sampled decision). */
/* Replaces the loop nest under `loop` by a tensor intrinsic of
 * ir/intrins.def (e.g. "wmma_mma_16x16x16_f16_f32", "sdot_4x4x4_i8_i32")
 * after checking that the nest computes exactly what the intrinsic
 * computes.  The warp and warpgroup ones are for CUDA targets, the CPU ones
 * for AArch64 keys with their feature (validation refuses the rest). */
int tir_tensorize(tir_sched *s, int loop, const char *intrin, tir_error *err);
int tir_annotate_rv(tir_sched *s, int rv, const char *key, int value_rv,
		    tir_error *err);
/* Fuses groups of the block's iterators into one iterator each; groups is
 * "0,1,2;3;4,5,6" (iterator indices, outermost first), the new loop order.
 * The block needs a fresh nest (one loop per iterator). */
int tir_transform_block_layout(tir_sched *s, int block, const char *groups,
			       tir_error *err);
/* Gives read `index` (write: is_write, index 0) of the block a buffer of its
 * own indexed by the iterators the access uses (in the order they appear in
 * it, or in the order dims lists them, e.g. "0,2,3"), with a stage block
 * copying into or out of it.  Returns the stage block. */
int tir_reindex(tir_sched *s, int block, int is_write, int index, const char *dims,
		tir_error *err);
/* Packs read `read_index` of the block (an input it loads) into a blocked
 * copy laid out by `map` — the copy's dimensions, outermost first, each "d"
 * (the original's dimension d), "d/f" or "d%f" (its outer and inner parts
 * split by f); a bijection: "3/16,0,1,2,3%16" packs HWIO weights as
 * O/16,H,W,I,16 — filled by a stage block at the top level (0 past an
 * extent f does not divide), the block's loads rewritten to it.  Returns
 * the stage block. */
int tir_transform_layout(tir_sched *s, int block, int read_index, const char *map,
			 tir_error *err);
/* Splits the reduction over iterator `iterator` into `factor` partial
 * reductions written to a new buffer with a leading dimension, summed by a
 * new block after it (split-K).  Returns the summing block, or 0 if factor
 * is 1 (nothing changes). */
int tir_rfactor(tir_sched *s, int block, int iterator, tir_int factor, tir_error *err);
/* The same with the parts interleaved: part p reduces the iterator's values
 * p, p + factor, p + 2 * factor, ... (the iterator's inner part), so where
 * the iterator indexes an innermost dimension the parts read adjacent
 * elements and a loop over them vectorizes.  Returns the combining block. */
int tir_rfactor_interleaved(tir_sched *s, int block, int iterator, tir_int factor,
			    tir_error *err);
/* The buffer the block writes (write index 0), an intermediate, moves to
 * storage scope `scope` ("global", "shared" or "local"): allocated as that
 * scope is (docs/ir-semantics.md), nothing else changed; validation judges
 * whether its accesses allow it. */
int tir_set_scope(tir_sched *s, int block, int write_index, const char *scope, tir_error *err);
/* Rounds iterator i's extent up to a multiple of factors[i] (literals or
 * integer RVs; n = the block's iterator count) with zero-padded inputs and a
 * cropped output.  Returns the cropping block, or 0 if the output needs none
 * (nothing changes when every extent is a multiple already). */
int tir_pad_einsum(tir_sched *s, int block, int n, const tir_int *factors,
		   tir_error *err);
/* Which primitive a sampled location is for: compute_at (the loops
 * enclosing every consumer of the block's output) or reverse_compute_at (the
 * loops enclosing every producer of what it reads, outside the producers'
 * reduction loops). */
typedef enum { TIR_LOC_COMPUTE_AT, TIR_LOC_REVERSE_COMPUTE_AT } tir_loc_side;

/* A loop drawn among the places where `block` can be computed by the
 * primitive of `side`, outermost first, minus the block's own loops and
 * vectorized loops.  The decision is the index in that list.  Fails when the
 * block has no consumer (compute_at) or no producer (reverse_compute_at).
 * Returns the loop's RV or -1.  (The trace records the side only where it is
 * not the one older traces implied — compute_at for a block whose output
 * something reads, else reverse — so those replay unchanged.) */
int tir_sample_compute_location(tir_sched *s, int block, tir_loc_side side, tir_error *err);
int tir_sample_perfect_tile(tir_sched *s, int loop, int n, int max_innermost,
			    int *out_ints, tir_error *err);
int tir_sample_categorical(tir_sched *s, int n, const int64_t *candidates,
			   const double *probs, tir_error *err);
/* The value an integer RV holds. */
int64_t tir_sched_int(const tir_sched *s, int rv);

/* ---- verify/: validation ----------------------------------------------- */

/* Loop-nest, producer-consumer and (for CUDA targets) threading validation.
 * Returns 0 if the program is valid for the target, else -1 with a message
 * naming the block, loop or buffer at fault. */
int tir_verify(const tir_program *p, const tir_target *t, tir_error *err);

/* ---- codegen/: code generation ------------------------------------------ */

/* A tensor map (Hopper's tensor memory accelerator, TMA) that a kernel takes
 * by value after the arguments: a view of kernel argument `arg` as a dense
 * tensor of `rank` dimensions, innermost first, copied in boxes of `box`
 * elements into shared memory under the 128-byte swizzle.  The runner makes
 * it (cuTensorMapEncodeTiled) once the argument's device address is known. */
#define TIR_MAX_TMAPS 4
#define TIR_TMAP_RANK 5
typedef struct tir_tmap_info {
	int arg;                   /* index in tir_code.args */
	int elem_bytes, rank;
	int64_t dims[TIR_TMAP_RANK];    /* elements, innermost first */
	int64_t strides[TIR_TMAP_RANK]; /* bytes between steps of dims[d], d >= 1 */
	int box[TIR_TMAP_RANK];
} tir_tmap_info;

/* One launch of a CUDA kernel. */
typedef struct tir_launch {
	char name[64];
	int grid[3], block[3];
	int shared_bytes;          /* dynamic shared memory */
	int ntmaps;                /* tensor maps the kernel takes after the arguments */
	tir_tmap_info tmaps[TIR_MAX_TMAPS];
} tir_launch;

/* A buffer the generated code takes, in argument order: the inputs, the
 * output, then scratch buffers the caller allocates (CUDA only). */
typedef struct tir_arg_info {
	char name[32];
	int dtype;                 /* a tir_dtype, see ir/ir.h */
	int elem_bytes;
	int64_t elems;
	int is_output, is_scratch;
} tir_arg_info;

/* The name of a tir_arg_info.dtype ("float32", ...); "?" for no dtype. */
const char *tir_dtype_name(int dtype);

typedef struct tir_code {
	char *source;              /* C or CUDA C */
	int nargs;
	tir_arg_info *args;
	int nlaunches;             /* CUDA: kernels in launch order */
	tir_launch *launches;
	char entry[64];            /* C: the exported function */
	/* CUDA: block statements and intrinsic calls in the kernels once the
	 * compiler has unrolled every loop marked for it — the size of what it
	 * compiles, which decides how long it takes (0 for C) */
	int64_t unrolled_blocks;
} tir_code;

/* Generates code for the program on the target.  The C entry point is
 *   int tir_entry(void *const *args);   (args in tir_code.args order)
 * Returns NULL with a message when the program cannot be generated. */
tir_code *tir_codegen(const tir_program *p, const tir_target *t, tir_error *err);
void tir_code_free(tir_code *c);

/* codegen/nvrtc.c: compiles CUDA C with NVRTC for sm_<sm> into a cubin
 * (malloc'd); no GPU needed.  Returns -1 with NVRTC's log in the message when
 * compilation fails, or when libtir was built without CUDA.  NVRTC runs in a
 * forked child (killed after TIR_NVRTC_TIMEOUT_S, codegen/codegen.h) unless
 * this process chose otherwise (tir_nvrtc_in_process). */
int tir_nvrtc_compile(const char *source, int sm, char **cubin, size_t *size,
		      tir_error *err);


/* ---- sketch/: search spaces ---------------------------------------------- */

/* A sketch is a schedule with its decisions left open: applying it to a
 * fresh schedule draws every decision (tile sizes, unroll depth, compute
 * locations, vector widths) from the schedule's seeded generator through
 * sampling instructions, so the resulting trace records them and a mutated
 * decision replays.  Sketches come from rules applied to the blocks of the
 * workload's program (sketch/), never from the operator's name. */
typedef struct tir_sketch {
	char name[64];             /* e.g. "gpu-tile-autocopy" */
	int id;                    /* index in the list tir_sketches fills */
} tir_sketch;

#define TIR_MAX_SKETCHES 16
/* The sketches of a workload on a target; returns their count (>= 1) or -1. */
int tir_sketches(const tir_workload *w, const tir_target *t, tir_sketch *out,
		 int max, tir_error *err);
/* Applies sketch `id` to the fresh schedule s (tir_sched_new), sampling its
 * decisions from s's generator.  The caller validates the result. */
int tir_sketch_apply(const tir_workload *w, const tir_target *t, int id,
		     tir_sched *s, tir_error *err);
/* n random valid candidates of the search space (each a schedule of a
 * random sketch whose program passed tir_verify); returns how many it made
 * (it gives up on a candidate after repeated invalid draws) or -1. */
int tir_sample_candidates(const tir_workload *w, const tir_target *t, int n,
			  uint64_t seed, tir_sched **out, tir_error *err);

/* ---- measure/: the outcome of a measurement (runner.c), the clock ------- */

/* Measuring one candidate by hand (the runners, tir_measure) is
 * tir_measure.h's; a batch of traces is tir_measure_local, below. */

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

/* "ok", "build_error", ... ("unknown" out of range). */
const char *tir_measure_status_name(tir_measure_status s);
/* The status named name ("ok", ...), or -1. */
int tir_measure_status_parse(const char *name);

/* measure/timing.c: CLOCK_MONOTONIC in seconds. */
double tir_now_s(void);

/* measure/check.c: the largest max_rel_error a correct result of w may have,
 * the check's tolerance for its arguments' dtypes (tir_measure_tolerance) (float32 1e-5, float16 1e-2,
 * bfloat16 2e-2, integers 0): a result above it is a wrong_result whatever
 * its sender says.  -1 with a message when w's program cannot be built. */
double tir_workload_tolerance(const tir_workload *w, tir_error *err);

/* ---- ir/parallel.c: work spread over the cores ------------------------- */

/* fn(ctx, i) for every i in [0, n), spread over `threads` threads (<= 0: one
 * per core, at most TIR_MAX_THREADS), the caller one of them; returns when
 * all are done.  Each index is done exactly once; fn must only write its own
 * slot, so that results never depend on the number of threads. */
#define TIR_MAX_THREADS 64
void tir_parallel_for(int n, int threads, void (*fn)(void *ctx, int i), void *ctx);
/* The online cores (at least 1). */
int tir_cores(void);

/* ---- search/: tuning (measure/batch.c: tir_measure_local) ------------- */

/* One measured candidate. */
typedef struct tir_candidate {
	const char *trace;         /* JSON (tir_sched_trace) */
	int status;                /* a tir_measure_status: 0 is "ok" */
	double latency_us;         /* median per call, when ok */
	double max_rel_error;      /* against the reference, -1 if not run */
	const char *msg;           /* why, when not ok; may be NULL */
} tir_candidate;

/* A cost model, as a table of functions (costmodel/ implements XGBoost; the
 * tuner's own default is random).  Scores rank: higher means predicted
 * faster; predict returns -1 while the model cannot rank yet (too little
 * data), and the search then draws random scores.  update() gets
 * throughputs (GFLOP/s; 0 for failed candidates). */
typedef struct tir_cost_model {
	const char *name;
	int (*predict)(void *self, const tir_workload *w, const tir_target *t,
		       int n, const tir_program *const *progs, double *scores);
	void (*update)(void *self, const tir_workload *w, const tir_target *t,
		       int n, const tir_program *const *progs,
		       const double *gflops);
} tir_cost_model;

/* Measures n candidates (traces) of w on t and fills out[i] (status, latency,
 * error, message; trace is set by the caller; msg is NULL or malloc'd, and
 * the caller frees it).  The default (NULL in tir_tune_opts) builds them in
 * parallel on all cores and runs them one at a time on this machine
 * (measure/batch.c: tir_measure_local, whose ctx is NULL or a context that
 * keeps the reference between batches: tir_measure_cache_new, or inside
 * tuner/ a measure_local of measure/measure.h); the daemon plugs in its
 * dispatcher to remote workers. */
typedef int (*tir_measure_batch_fn)(void *ctx, const tir_workload *w,
				    const tir_target *t, int n,
				    const char *const *traces, tir_candidate *out);
int tir_measure_local(void *ctx, const tir_workload *w, const tir_target *t,
		      int n, const char *const *traces, tir_candidate *out);
/* A context for tir_measure_local outside a search (a worker measuring
 * batch after batch): default options, and the reference output of the last
 * workload kept between batches (recomputing it costs seconds for large
 * shapes).  Not for two threads at once. */
void *tir_measure_cache_new(void);
void tir_measure_cache_free(void *cache);

/* Where the last tir_measure_local with this context spent its time (wall
 * seconds): building (replay, codegen, compile, on every core; generate_s
 * is its part before the compiles), the
 * reference, and running after the last build (CUDA measures while it
 * builds: this is what was still queued; CPU: every run); what the
 * candidates took in the measuring processes (loading, checking, timing;
 * for CUDA mostly during the builds) and the timing alone. */
typedef struct tir_measure_phases {
	double build_s, reference_s, run_s;
	double generate_s;         /* of build_s: replaying, validating, generating code */
	double candidates_s, timing_s;
	int built, processes;
	int by_profiler;           /* candidates timed by the profiler timer (CUDA) */
	/* candidates not compiled because an identical build (the same source
	 * for the same target, compiler and flags) was at hand: kept from an
	 * earlier batch in the context's compile cache, or another candidate's
	 * of this batch; of the context's life, the same counted in all */
	int cache_hits;
	long cache_hits_total;
} tir_measure_phases;
void tir_measure_cache_phases(const void *cache, tir_measure_phases *out);

typedef struct tir_tune_progress {
	int round;
	int trials_done, trials_total;
	int errors;                /* candidates that did not end ok */
	double best_us;            /* 0 until one candidate is ok */
	double best_gflops;
	/* where this round's wall time went: the search (population,
	 * evolution, scoring, the batch), waiting for the measurements, and
	 * recording them and updating the cost model (with async_update only
	 * the recording and the hand-over: the update runs beside) */
	double search_s, measure_s, update_s;
	/* the model's own time in updates (in line: this round's, update_s's
	 * part; async_update: those that ended, beside, since the last round
	 * began), and the batches measured but not yet learnt when this
	 * round's search began (0 in line; 1: it scored, at least at first,
	 * without the last batch's rows) */
	double train_s;
	int model_lag;
	/* since the search began: wall seconds, and those spent waiting for
	 * measurements (their ratio: how busy the measurer was kept) */
	double elapsed_s, measure_total_s;
	/* async_update: the report after the last round of the wait for the
	 * model to learn what was still queued (update_s); round is the last */
	bool drain;
} tir_tune_progress;

/* the most batches tir_tune keeps in flight (tir_tune_opts.pipeline) */
#define TIR_TUNE_PIPELINE_MAX 4

typedef struct tir_tune_opts {
	int trials;                /* measured candidates in all (default 64) */
	int batch;                 /* measured per round (default 16) */
	uint64_t seed;
	int population;            /* evolutionary population (default 256) */
	/* rounds in a row that measure nothing faster than the best (by
	 * 0.1 %) before the search ends short of its trials; 0 (the
	 * default): never, the whole budget is measured.  Measured over 80
	 * jobs of 256 trials, 6 rounds saved 10% of a GPU job's trials and
	 * 22% of a CPU job's, and lost up to 37% on a best
	 * (bench/results/2026-12-07-plateau.txt) */
	int patience;
	int threads;               /* for the search's parallel steps (0: a core each);
	                              the result does not depend on it */
	/* earlier measurements of the same workload and target: never measured
	 * again, their best seed the population */
	int nprior;
	const tir_candidate *prior;
	const tir_cost_model *model;   /* NULL: random scores */
	void *model_self;
	/* the model learns each measured batch on a thread of the search's own
	 * while the next batch is searched and measured, and the search scores
	 * with what the model holds at the time (the last training that ended):
	 * faster, not deterministic (which rows a score saw depends on timing).
	 * The model's predict and update must then be safe to call at once
	 * (cm_xgboost is; the random model learns nothing).  false: the update
	 * in line after each batch, the old order, deterministic. */
	bool async_update;
	/* how many batches are measured while the next is searched (at most
	 * TIR_TUNE_PIPELINE_MAX; 0: none, each batch searched after the last
	 * is recorded).  The measure function then runs on threads of the
	 * search's own, called for up to `pipeline` batches at once (it must
	 * be safe so; tir_measure_local is not: 1 at most with it), and each
	 * batch is picked without the results of the `pipeline` before it.
	 * Deterministic as the other order (with the update in line), not the
	 * same sequence of candidates. */
	int pipeline;
	/* with pipeline: the batch measured is recorded (learnt, reported,
	 * counted) as it ends, not in the order it was sent, so that one held
	 * up by a slow build holds up only itself; not deterministic */
	bool pipeline_any_order;
	tir_measure_batch_fn measure;  /* NULL: tir_measure_local */
	void *measure_ctx;
	/* called for every measured candidate and after every round */
	void (*on_result)(void *ctx, const tir_candidate *c);
	void (*on_progress)(void *ctx, const tir_tune_progress *p);
	void *cb_ctx;
	const atomic_int *cancel;      /* non-zero: stop after the round */
} tir_tune_opts;

/* Why a search ended before its trial budget (tir_tune_result.end). */
typedef enum tir_tune_end {
	TIR_TUNE_END_BUDGET,       /* the trial budget measured (or an error) */
	TIR_TUNE_END_CANCELLED,    /* opts->cancel set */
	TIR_TUNE_END_PLATEAU,      /* tir_tune_opts.patience rounds in a row
	                              measured nothing faster than the best */
	TIR_TUNE_END_EXHAUSTED,    /* TIR_TUNE_STALE_ROUNDS rounds in a row found
	                              no candidate not measured already */
} tir_tune_end;
#define TIR_TUNE_STALE_ROUNDS  3

typedef struct tir_tune_result {
	char *best_trace;          /* malloc'd; NULL if nothing was ok */
	double best_us, best_gflops;
	int trials;                /* measured by this call */
	int errors;
	int rounds;
	tir_tune_end end;          /* why the search ended */
} tir_tune_result;

/* Tunes w on t: sketches, evolutionary search under the cost model,
 * measurement in batches, until opts->trials candidates were measured, or
 * a plateau (res->end says which) ended it sooner.  Deterministic for a given seed and
 * the same measurements.  Returns 0 (even when no candidate was ok: then
 * best_trace is NULL) or -1 on an error that stopped the search. */
int tir_tune(const tir_workload *w, const tir_target *t, const tir_tune_opts *opts,
	     tir_tune_result *res, tir_error *err);
void tir_tune_result_clear(tir_tune_result *res);

#ifdef __cplusplus
}
#endif
#endif
