/*
 * fusion.h — the fusion planner: a graph workload's nodes grouped into
 * kernels, each kernel one program (tir_graph_kernel).  Prefix fz_.
 *
 * Three planners fill the same plan (seeds/000, §6-§9):
 *   inductor.c  TorchInductor: the default realization (graph.c) makes the
 *               scheduler nodes, each with its memory dependencies; can_fuse,
 *               score_fusion and fuse_nodes merge them;
 *   tvm.c       TVM's FuseOps: an OpPatternKind per node, the post-dominator
 *               tree, three phases of CheckPath rules, union-find groups;
 *   plan.c      eager: a kernel per node (views inlined into their users,
 *               as PyTorch's strided views), and what every mode shares:
 *               a kernel's nodes, name and bytes, the JSON and text forms.
 *
 * Bytes: a kernel reads every value it loads from outside itself (a graph
 * input, or a node another kernel realizes) once, whole, and writes each of
 * its members that a graph output or another kernel needs once, whole; a
 * value made and last used inside the kernel costs nothing (Inductor's
 * remove_kernel_local_buffers, TVM's FuseTIR).
 */
#ifndef TIR_FUSION_H
#define TIR_FUSION_H

#include <stdbool.h>
#include <stdint.h>
#include "tir.h"
#include "ir/ir.h"

typedef struct fz_kernel {
	char *name;                 /* "fused_add_mean_mul_relu_sub" (malloc'd) */
	unsigned char *members;     /* per node: realized by this kernel */
	unsigned char *nodes;       /* per node: computed by it (members, and the
	                               inlined nodes they read: tir_graph_kernel) */
	int64_t read_bytes, write_bytes;
} fz_kernel;

typedef struct fz_reject {
	int a, b;                   /* nodes: one of each side of the pair */
	char *reason;               /* malloc'd: the WhyNoFuse sentence */
} fz_rejection;

struct tir_fusion_plan {
	const tir_workload *w;
	const tir_graph *g;
	tir_fuse_mode mode;
	unsigned char *realize;     /* per node: realized (a buffer) */
	int nkernels;
	fz_kernel *k;               /* in execution order */
	int nrejected, cap_rejected;
	fz_rejection *rej;
	int64_t read_bytes, write_bytes;
};

/* ---- plan.c ---- */

/* A plan for graph workload w, empty (realize all zero, no kernel). */
tir_fusion_plan *fz_plan_new(const tir_workload *w, tir_fuse_mode mode, tir_error *err);
/* Records a pair that a rule refused to fuse and why (printf format). */
void fz_reject(tir_fusion_plan *p, int a, int b, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Makes the kernels from group_of[node] (a kernel index from 0, -1 for a
 * node no kernel realizes: dropped or inlined), p->realize set: orders them
 * by their first member, fills nodes, names and bytes.  Every realized live
 * node must be in a group, and every group member realized. */
int fz_plan_finish(tir_fusion_plan *p, const int *group_of, tir_error *err);
/* Whether plans p and q of one graph make the same kernels (members). */
bool fz_plan_same(const tir_fusion_plan *p, const tir_fusion_plan *q);
/* The eager plan (mode TIR_FUSE_EAGER). */
int fz_eager(tir_fusion_plan *p, tir_error *err);

/* ---- inductor.c ---- */

/* Inductor's FusionScore of a candidate pair. */
typedef struct fz_score {
	int template_score;         /* 2 plain, 1 an epilogue, 0 a prologue (fuses last) */
	int node_type_score;        /* 1 both reductions or both not (sharing data), else 0;
	                               -1 reductions of different rnumel */
	int64_t memory;             /* bytes of identical dependencies */
	int64_t overlap;            /* bytes of buffers both read at other indices
	                               (only where memory is 0) */
	int proximity;              /* -distance in the original order */
} fz_score;
/* FusionScore.__lt__: template first; then, where one memory is more than
 * 16 times the other, memory alone; else (node type, memory, overlap,
 * proximity) in that order. */
bool fz_score_lt(const fz_score *x, const fz_score *y);

/* Whether two scores are a near tie: template and node type equal, memory
 * within 1.25x. */
bool fz_score_near(const fz_score *x, const fz_score *y);

int fz_inductor(tir_fusion_plan *p, tir_error *err);
/* tir_fusion_plan_alternatives (tir.h). */
int fz_inductor_alternatives(const tir_workload *w, tir_fusion_plan **out, int max,
			     tir_error *err);
/* can_fuse (with the cycle check) of the scheduler nodes of w realizing
 * nodes node1 and node2, in that order: 1, or 0 with the WhyNoFuse sentence
 * in why; -1 with a message (not a graph, not scheduler nodes). */
int fz_inductor_why(const tir_workload *w, const char *node1, const char *node2, char *why,
		    size_t nwhy, tir_error *err);

/* ---- tvm.c ---- */
int fz_tvm(tir_fusion_plan *p, tir_error *err);

#endif
