/*
 * tvm.c — TVM's FuseOps over a graph workload (seeds/000, §9): an
 * OpPatternKind per node, the IndexedForwardGraph in post-DFS order, its
 * post-dominator tree, three phases of CheckPath rules, union-find groups.
 *
 * The forward graph.  Its nodes are the live nodes of the graph (graph
 * inputs are not nodes: in TVM they are opaque parameters that never
 * fuse), in post-DFS order: a depth-first walk from the outputs in their
 * order, each node's arguments in argument order, a node placed after its
 * arguments (Relay's ExprVisitor).  An edge runs from an argument to each
 * node reading it (twice for a node reading it twice) and carries the
 * reader's pattern, except that a Broadcast reader's edge from an argument
 * of the result's own shape is ElemWise.  A graph output is extern_ref: it
 * is post-dominated by nothing (the virtual sink past the graph), as
 * Relax marks the variables a dataflow block exports.  Patterns:
 *   ElemWise         a pointwise node whose tensor arguments all have its
 *                    shape (add of two [M, N], relu, cast);
 *   Broadcast        a pointwise node with a broadcast argument (x + bias);
 *   Injective        a view (reshape, permute, expand, slice);
 *   CommReduce       a reduction (sum, mean, amax, amin);
 *   OutEWiseFusable  a heavy operator (matmul, the convolutions);
 *   Tuple, Opaque    none of our ops; the rules for them are kept (Opaque
 *                    is a barrier), phase 2 (tuples) is then a no-op.
 *
 * The post-dominator tree (DominatorTree::PostDom): in reverse post-DFS
 * order, a node's parent is the least common ancestor in the tree of the
 * nodes reading it (none for an output, or where the readers reach
 * different outputs), and its relation pattern the largest of the edge
 * patterns and of the tree nodes' patterns passed on the way to it.
 *
 * Fusion (GraphPartitioner::RunFuse), phases 0, 1 and 2, each a walk in
 * post-DFS order; a node with no post-dominator d, or already in d's group,
 * is skipped, else by the pattern of its own group:
 *   OutEWiseFusable  (phase 0) when the relation to d is ElemWise and every
 *                    node on every path to d, d included, is in a group
 *                    Broadcast or simpler: an elementwise epilogue, and
 *                    never a second OutEWiseFusable in the group;
 *   ElemWise, Broadcast (phases 0 and 1) when the relation is Injective or
 *                    simpler or CommReduce, the nodes between are in
 *                    groups Injective or simpler and d's group is no
 *                    Tuple or Opaque (it may be an OutEWiseFusable group);
 *   Injective        (phase 1, so that heavy ops finish fusing first) when
 *                    every node on the paths, d included, is in a group
 *                    Injective or simpler;
 *   CommReduce       never: a reduction is only a group's sink;
 *   Opaque           never, and no path through it passes CheckPath.
 * Conditions test the pattern of each node's group (its union-find root),
 * as TVM's do.  CommitFuse merges the group of every node on the paths into
 * d's group; the root keeps its pattern unless the merged group holds an
 * OutEWiseFusable anchor, whose pattern it takes (CombinePattern).  A group
 * never grows past FZ_MAX_FUSE_DEPTH nodes (TVM's max_fuse_depth); TVM
 * counts a group's nodes once per path node, we count the merged group's
 * exact size.
 *
 * Every refused attempt is remembered with its rule's sentence (the last
 * one per node, as phase 1 retries phase 0's refusals), and recorded with
 * fz_reject at the end when the node and its post-dominator did not end up
 * in one group after all.
 *
 * Kernels.  Values crossing a group boundary go through memory, as
 * FuseTIR's fused functions do: a live node is realized when it is a
 * reduction, a heavy operator, a graph output or read by a node of another
 * group; the other nodes of a group are inlined into its realized ones.
 * Only realized nodes are handed to fz_plan_finish as the group's members:
 * every reader of an inlined node is in its group, so the closure a kernel
 * computes (its members and the inlined nodes they read, transitively) is
 * exactly the group, and no node is computed by two kernels.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fusion.h"

#define FZ_MAX_FUSE_DEPTH 256   /* relay.FuseOps.max_depth, kMaxFusedOps */
#define FZ_REASON 320

/* OpPatternKind with TVM's values: the rules compare them ("Injective or
 * simpler" is kind <= INJECTIVE). */
#define FZ_PATTERNS(X)                              \
	X(ELEMWISE,          0, "ElemWise")         \
	X(BROADCAST,         1, "Broadcast")        \
	X(INJECTIVE,         2, "Injective")        \
	X(COMM_REDUCE,       3, "CommReduce")       \
	X(OUT_EWISE_FUSABLE, 4, "OutEWiseFusable")  \
	X(TUPLE,             7, "Tuple")            \
	X(OPAQUE,            8, "Opaque")

typedef enum {
#define X(id, value, name) K_##id = value,
	FZ_PATTERNS(X)
#undef X
} pattern;

static const char *pattern_name(pattern k)
{
	switch (k) {
#define X(id, value, name) case K_##id: return name;
	FZ_PATTERNS(X)
#undef X
	}
	return "?";
}

static pattern max_pattern(pattern a, pattern b) { return a > b ? a : b; }

/* CheckPath's conditions (the fcond lambdas of RunFuse). */
typedef enum {
	PATH_BROADCAST,     /* every node, d included: Broadcast or simpler */
	PATH_INJECTIVE,     /* every node, d included: Injective or simpler */
	PATH_INTO_SINK,     /* between: Injective or simpler; d: not Tuple / Opaque */
} path_cond;

static bool path_ok(path_cond c, pattern k, bool is_sink)
{
	switch (c) {
	case PATH_BROADCAST: return k <= K_BROADCAST;
	case PATH_INJECTIVE: return k <= K_INJECTIVE;
	case PATH_INTO_SINK:
		return is_sink ? k <= K_OUT_EWISE_FUSABLE : k <= K_INJECTIVE;
	}
	return false;
}

static const char *path_bound(path_cond c)
{
	return c == PATH_BROADCAST ? "broadcast" : "injective";
}

/* The forward graph, its post-dominator tree and the groups; every array
 * per post-DFS position unless said otherwise. */
typedef struct fgraph {
	tir_fusion_plan *p;
	const tir_graph *g;
	int n;                      /* live nodes */
	int *node;                  /* position -> node index */
	int *pos;                   /* per node index: position, -1 when dead */
	pattern *kind;              /* the node's OpPatternKind */
	int *edge0;                 /* edges of i: edge0[i] .. edge0[i + 1] - 1 */
	int *edge_to;               /* the reader */
	pattern *edge_kind;
	int nedges;
	/* post-dominator tree */
	int *pdom;                  /* immediate post-dominator, -1: none */
	int *depth;
	pattern *rel;               /* relation pattern to pdom */
	/* groups (union-find over positions; a group is its root's entry) */
	int *up;                    /* parent, -1 at a root */
	pattern *gkind;             /* the group's pattern (meaningful at roots,
	                               and read at a node's own entry as TVM does) */
	int *anchor;                /* the OutEWiseFusable node of the group, -1 */
	int *size;                  /* nodes in the group */
	/* walks */
	int *mark, *rmark, stamp;
	int *stack;
	/* the last refusal per node */
	int *refused;               /* its post-dominator, -1: none pending */
	char (*reason)[FZ_REASON];
} fgraph;

static const tir_gvalue *fval(const fgraph *f, int i)
{
	return &f->g->v[f->g->ninputs + f->node[i]];
}

static const char *fname(const fgraph *f, int i) { return fval(f, i)->name; }

static const char *fop(const fgraph *f, int i)
{
	return tir_graph_node_op(f->p->w, f->node[i]);
}

static bool same_shape(const tir_gvalue *a, const tir_gvalue *b)
{
	if (a->ndim != b->ndim)
		return false;
	for (int d = 0; d < a->ndim; d++)
		if (a->shape[d] != b->shape[d])
			return false;
	return true;
}

static pattern node_pattern(const tir_graph *g, const tir_gvalue *x)
{
	switch (gop_kind(x->op)) {
	case GK_POINTWISE:
		for (int i = 0; i < x->nargs; i++)
			if (x->arg[i] >= 0 && !same_shape(&g->v[x->arg[i]], x))
				return K_BROADCAST;
		return K_ELEMWISE;
	case GK_VIEW: return K_INJECTIVE;
	case GK_REDUCTION: return K_COMM_REDUCE;
	case GK_HEAVY: return K_OUT_EWISE_FUSABLE;
	case GK_INPUT: break;
	}
	return K_OPAQUE;
}

static void fgraph_free(fgraph *f)
{
	free(f->node);
	free(f->pos);
	free(f->kind);
	free(f->edge0);
	free(f->edge_to);
	free(f->edge_kind);
	free(f->pdom);
	free(f->depth);
	free(f->rel);
	free(f->up);
	free(f->gkind);
	free(f->anchor);
	free(f->size);
	free(f->mark);
	free(f->rmark);
	free(f->stack);
	free(f->refused);
	free(f->reason);
}

/* ---- the IndexedForwardGraph ---------------------------------------------------- */

/* Positions in post-DFS order from the outputs (an explicit stack: a chain
 * of max_nodes nodes must not exhaust the C stack). */
static void post_dfs(fgraph *f)
{
	const tir_graph *g = f->g;
	int nn = g->nnodes;
	int *stk = xmalloc(sizeof *stk * (size_t)(nn + 1));
	int *next = xcalloc((size_t)nn + 1, sizeof *next);     /* next argument to visit */
	unsigned char *seen = xcalloc((size_t)nn + 1, 1);
	for (int o = 0; o < g->noutputs; o++) {
		int root = g->outputs[o] - g->ninputs;
		if (root < 0 || seen[root])
			continue;
		int sp = 0;
		stk[sp++] = root;
		seen[root] = 1;
		while (sp) {
			int u = stk[sp - 1];
			const tir_gvalue *x = &g->v[g->ninputs + u];
			if (next[u] < x->nargs) {
				int a = x->arg[next[u]++] - g->ninputs;
				if (a >= 0 && !seen[a]) {
					seen[a] = 1;
					stk[sp++] = a;
				}
				continue;
			}
			sp--;
			f->pos[u] = f->n;
			f->node[f->n++] = u;
		}
	}
	free(stk);
	free(next);
	free(seen);
}

/* The forward graph of p's live nodes: positions, patterns and edges. */
static int build_graph(fgraph *f, tir_error *err)
{
	const tir_graph *g = f->g;
	size_t nn = (size_t)g->nnodes + 1;
	f->node = xmalloc(sizeof *f->node * nn);
	f->pos = xmalloc(sizeof *f->pos * nn);
	for (int i = 0; i < g->nnodes; i++)
		f->pos[i] = -1;
	post_dfs(f);
	int live = 0;
	for (int i = 0; i < g->nnodes; i++)
		live += g->v[g->ninputs + i].live;
	if (live != f->n)
		return tir_fail(err, "fuse (tvm): %d live nodes but %d reached from the outputs",
				live, f->n);
	size_t n = (size_t)f->n + 1;
	f->kind = xmalloc(sizeof *f->kind * n);
	f->edge0 = xcalloc(n + 1, sizeof *f->edge0);
	for (int i = 0; i < f->n; i++) {
		const tir_gvalue *x = fval(f, i);
		f->kind[i] = node_pattern(g, x);
		for (int j = 0; j < x->nargs; j++)
			if (x->arg[j] >= g->ninputs)
				f->edge0[f->pos[x->arg[j] - g->ninputs] + 1]++;
	}
	for (int i = 0; i < f->n; i++)
		f->edge0[i + 1] += f->edge0[i];
	f->nedges = f->edge0[f->n];
	f->edge_to = xmalloc(sizeof *f->edge_to * (size_t)(f->nedges + 1));
	f->edge_kind = xmalloc(sizeof *f->edge_kind * (size_t)(f->nedges + 1));
	int *fill = xmalloc(sizeof *fill * n);
	memcpy(fill, f->edge0, sizeof *fill * (size_t)f->n);
	for (int i = 0; i < f->n; i++) {       /* readers in post-DFS order */
		const tir_gvalue *x = fval(f, i);
		for (int j = 0; j < x->nargs; j++) {
			if (x->arg[j] < g->ninputs)
				continue;
			int a = f->pos[x->arg[j] - g->ninputs];
			pattern k = f->kind[i];
			if (k == K_BROADCAST && same_shape(&g->v[x->arg[j]], x))
				k = K_ELEMWISE;
			f->edge_to[fill[a]] = i;
			f->edge_kind[fill[a]++] = k;
		}
	}
	free(fill);
	return 0;
}

/* ---- the post-dominator tree ------------------------------------------------------ */

/* The least common ancestor of tree nodes a and b (-1: none), the
 * patterns of the tree nodes left on the way combined into *k. */
static int lca(const fgraph *f, int a, int b, pattern *k)
{
	while (a != b) {
		if (a < 0 || b < 0)
			return -1;
		if (f->depth[a] < f->depth[b]) {
			*k = max_pattern(*k, f->rel[b]);
			b = f->pdom[b];
		} else if (f->depth[b] < f->depth[a]) {
			*k = max_pattern(*k, f->rel[a]);
			a = f->pdom[a];
		} else {
			*k = max_pattern(*k, max_pattern(f->rel[a], f->rel[b]));
			a = f->pdom[a];
			b = f->pdom[b];
		}
	}
	return a;
}

/* Readers come after their arguments in post-DFS order, so one pass in
 * reverse order sees every reader's tree position first. */
static void post_dominators(fgraph *f)
{
	size_t n = (size_t)f->n + 1;
	f->pdom = xmalloc(sizeof *f->pdom * n);
	f->depth = xmalloc(sizeof *f->depth * n);
	f->rel = xmalloc(sizeof *f->rel * n);
	for (int i = f->n - 1; i >= 0; i--) {
		if (fval(f, i)->output >= 0 || f->edge0[i] == f->edge0[i + 1]) {
			f->pdom[i] = -1;        /* extern_ref: the virtual sink */
			f->depth[i] = 1;
			f->rel[i] = K_OPAQUE;
			continue;
		}
		pattern k = K_ELEMWISE;
		int e = f->edge0[i];
		int par = f->edge_to[e];
		k = max_pattern(k, f->edge_kind[e]);
		for (e++; e < f->edge0[i + 1]; e++) {
			par = lca(f, par, f->edge_to[e], &k);
			k = max_pattern(k, f->edge_kind[e]);
		}
		f->pdom[i] = par;
		f->depth[i] = par >= 0 ? f->depth[par] + 1 : 1;
		f->rel[i] = k;
	}
}

/* ---- groups --------------------------------------------------------------------- */

static void init_groups(fgraph *f)
{
	size_t n = (size_t)f->n + 1;
	f->up = xmalloc(sizeof *f->up * n);
	f->gkind = xmalloc(sizeof *f->gkind * n);
	f->anchor = xmalloc(sizeof *f->anchor * n);
	f->size = xmalloc(sizeof *f->size * n);
	f->mark = xcalloc(n, sizeof *f->mark);
	f->rmark = xcalloc(n, sizeof *f->rmark);
	f->stack = xmalloc(sizeof *f->stack * (size_t)(f->nedges + 2));
	f->refused = xmalloc(sizeof *f->refused * n);
	f->reason = xcalloc(n, sizeof *f->reason);
	for (int i = 0; i < f->n; i++) {
		f->up[i] = -1;
		f->gkind[i] = f->kind[i];
		f->anchor[i] = f->kind[i] == K_OUT_EWISE_FUSABLE ? i : -1;
		f->size[i] = 1;
		f->refused[i] = -1;
	}
}

static int find(fgraph *f, int i)
{
	int r = i;
	while (f->up[r] >= 0)
		r = f->up[r];
	while (f->up[i] >= 0) {         /* path compression */
		int next = f->up[i];
		f->up[i] = r;
		i = next;
	}
	return r;
}

/* MergeFromTo: child's group into parent's.  Two OutEWiseFusable anchors,
 * or an anchor joining a group past Broadcast, is TVM's fatal "cannot merge
 * two complex groups": CheckPath rules it out, so it is a planner fault. */
static int merge(fgraph *f, int child, int parent, tir_error *err)
{
	int c = find(f, child), r = find(f, parent);
	if (c == r)
		return 0;
	if (f->anchor[c] >= 0) {
		if (f->anchor[r] >= 0 || f->gkind[r] > K_BROADCAST)
			return tir_fail(err, "fuse (tvm): cannot merge two complex groups "
					"(%s and %s), a planner fault", fname(f, c), fname(f, r));
		f->anchor[r] = f->anchor[c];
		f->gkind[r] = max_pattern(f->gkind[c], f->gkind[r]);
	}
	f->size[r] += f->size[c];
	f->up[c] = r;
	return 0;
}

/* Walks every path from src's readers (from src itself when with_src) to
 * sink, which post-dominates src, each node once, in the order of a
 * recursive depth-first walk; calls visit on each node but the sink (and
 * the sink with at_sink), stopping at the first nonzero result, returned. */
typedef int (*visit_fn)(fgraph *f, int node, bool is_sink, void *ctx);

static int walk(fgraph *f, int src, int sink, bool with_src, bool at_sink, visit_fn visit,
		void *ctx)
{
	int sp = 0;
	f->stamp++;
	if (with_src) {
		f->stack[sp++] = src;
	} else {
		f->mark[src] = f->stamp;
		for (int e = f->edge0[src + 1] - 1; e >= f->edge0[src]; e--)
			f->stack[sp++] = f->edge_to[e];
	}
	while (sp) {
		int v = f->stack[--sp];
		if (f->mark[v] == f->stamp)
			continue;
		f->mark[v] = f->stamp;
		if (v == sink) {
			int rc = at_sink ? visit(f, v, true, ctx) : 0;
			if (rc)
				return rc;
			continue;
		}
		int rc = visit(f, v, false, ctx);
		if (rc)
			return rc;
		for (int e = f->edge0[v + 1] - 1; e >= f->edge0[v]; e--)
			if (f->mark[f->edge_to[e]] != f->stamp)
				f->stack[sp++] = f->edge_to[e];
	}
	return 0;
}

typedef struct path_ctx { path_cond cond; int failed; } path_ctx;

static int path_visit(fgraph *f, int v, bool is_sink, void *ctx)
{
	path_ctx *c = ctx;
	if (path_ok(c->cond, f->gkind[find(f, v)], is_sink))
		return 0;
	c->failed = v;
	return 1;
}

/* CheckPath: the first node on the paths from src to sink (sink included,
 * src not) whose group's pattern fails cond, or -1 when none does. */
static int check_path(fgraph *f, int src, int sink, path_cond cond)
{
	path_ctx c = { cond, -1 };
	walk(f, src, sink, false, true, path_visit, &c);
	return c.failed;
}

typedef struct count_ctx { int sink_root, total; } count_ctx;

static int count_visit(fgraph *f, int v, bool is_sink, void *ctx)
{
	count_ctx *c = ctx;
	int r = find(f, v);
	if (r != c->sink_root && f->rmark[r] != f->stamp) {
		f->rmark[r] = f->stamp;
		c->total += f->size[r];
	}
	return 0;
}

/* The nodes of sink's group once src and the paths to sink join it. */
static int fused_size(fgraph *f, int src, int sink)
{
	count_ctx c = { find(f, sink), 0 };
	c.total = f->size[c.sink_root];
	walk(f, src, sink, true, false, count_visit, &c);
	return c.total;
}

typedef struct commit_ctx { int sink; tir_error *err; } commit_ctx;

static int commit_visit(fgraph *f, int v, bool is_sink, void *ctx)
{
	commit_ctx *c = ctx;
	return merge(f, v, c->sink, c->err) ? 1 : 0;
}

/* CommitFuse: src and every node on the paths to sink into sink's group. */
static int commit(fgraph *f, int src, int sink, tir_error *err)
{
	commit_ctx c = { sink, err };
	if (walk(f, src, sink, true, false, commit_visit, &c))
		return -1;
	f->refused[src] = -1;
	return 0;
}

/* ---- the phases ------------------------------------------------------------------ */

static void refuse(fgraph *f, int src, int dom, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void refuse(fgraph *f, int src, int dom, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(f->reason[src], FZ_REASON, fmt, ap);
	va_end(ap);
	f->refused[src] = dom;
}

/* "m (CommReduce)"; "add (in mm's OutEWiseFusable group)" for a node of
 * another node's anchored group; "v (in a Broadcast group)" for a node
 * whose group's pattern is not its own. */
static void describe(fgraph *f, int v, char *buf, size_t len)
{
	int root = find(f, v);
	pattern k = f->gkind[root];
	if (f->anchor[root] >= 0 && f->anchor[root] != v)
		snprintf(buf, len, "%s (in %s's %s group)", fname(f, v),
			 fname(f, f->anchor[root]), pattern_name(k));
	else if (f->kind[v] == k)
		snprintf(buf, len, "%s (%s)", fname(f, v), pattern_name(k));
	else
		snprintf(buf, len, "%s (in a %s group)", fname(f, v), pattern_name(k));
}

/* Fuses src into the group of its post-dominator d when the group stays
 * within FZ_MAX_FUSE_DEPTH and CheckPath(cond) holds; else remembers the
 * refusal.  -1 only on a planner fault. */
static int try_fuse(fgraph *f, int src, int d, path_cond cond, tir_error *err)
{
	int size = fused_size(f, src, d);
	if (size > FZ_MAX_FUSE_DEPTH) {
		refuse(f, src, d, "fusing %s into the group of its post-dominator %s would make "
		       "a group of %d nodes, over max_fuse_depth %d", fname(f, src), fname(f, d),
		       size, FZ_MAX_FUSE_DEPTH);
		return 0;
	}
	int bad = check_path(f, src, d, cond);
	if (bad < 0)
		return commit(f, src, d, err);
	char what[160];
	describe(f, bad, what, sizeof what);
	int sa = f->anchor[find(f, src)], da = f->anchor[find(f, bad)];
	if (bad != d)
		refuse(f, src, d, "the path from %s to its post-dominator %s passes %s, "
		       "not %s or simpler", fname(f, src), fname(f, d), what, path_bound(cond));
	else if (sa >= 0 && da >= 0)
		refuse(f, src, d, "two OutEWiseFusable nodes never share a group: %s's group "
		       "holds %s, its post-dominator %s's holds %s", fname(f, src), fname(f, sa),
		       fname(f, d), fname(f, da));
	else if (cond == PATH_INTO_SINK)
		refuse(f, src, d, "the path from %s ends at its post-dominator %s, a fusion "
		       "barrier", fname(f, src), what);
	else
		refuse(f, src, d, "the path from %s to its post-dominator ends at %s, not %s "
		       "or simpler", fname(f, src), what, path_bound(cond));
	return 0;
}

/* One phase of RunFuse (the top comment); -1 on a planner fault. */
static int run_fuse(fgraph *f, int phase, tir_error *err)
{
	for (int i = 0; i < f->n; i++) {
		pattern k = f->gkind[i];        /* the node's own group entry, as TVM */
		int d = f->pdom[i];
		if (k == K_OPAQUE) {
			if (d >= 0)
				refuse(f, i, d, "%s (%s) is Opaque: a fusion barrier", fname(f, i),
				       fop(f, i));
			continue;
		}
		if (d < 0)
			continue;
		if (phase == 2)
			continue;       /* tuples: we have none */
		if (find(f, i) == find(f, d))
			continue;
		int rc = 0;
		if (k == K_OUT_EWISE_FUSABLE) {
			if (phase != 0)
				continue;
			if (f->rel[i] != K_ELEMWISE) {
				char what[160];
				describe(f, i, what, sizeof what);
				refuse(f, i, d, "an OutEWiseFusable group fuses only an elementwise "
				       "epilogue: the relation of %s to its post-dominator %s is %s",
				       what, fname(f, d), pattern_name(f->rel[i]));
			} else
				rc = try_fuse(f, i, d, PATH_BROADCAST, err);
		} else if (k <= K_BROADCAST) {
			if (f->rel[i] <= K_INJECTIVE || f->rel[i] == K_COMM_REDUCE)
				rc = try_fuse(f, i, d, PATH_INTO_SINK, err);
			else
				refuse(f, i, d, "%s (%s, %s) fuses only into a post-dominator "
				       "it reaches through injective ops or a reduction; its relation "
				       "to %s is %s", fname(f, i), fop(f, i), pattern_name(k),
				       fname(f, d), pattern_name(f->rel[i]));
		} else if (k == K_INJECTIVE || k == K_TUPLE) {
			if (phase != 1)
				continue;       /* deferred: heavy ops fuse first */
			rc = try_fuse(f, i, d, PATH_INJECTIVE, err);
		} else {
			refuse(f, i, d, "a CommReduce node (%s: %s) is only a group's sink; it does "
			       "not fuse into its post-dominator %s", fname(f, i), fop(f, i),
			       fname(f, d));
		}
		if (rc)
			return -1;
	}
	return 0;
}

/* ---- the plan ------------------------------------------------------------------- */

/* Realizes what crosses a group or is a reduction, a heavy op or an
 * output, and hands the groups to fz_plan_finish, numbered by their first
 * realized node. */
static int finish(fgraph *f, tir_error *err)
{
	tir_fusion_plan *p = f->p;
	const tir_graph *g = f->g;
	for (int i = 0; i < f->n; i++) {
		const tir_gvalue *x = fval(f, i);
		tir_gkind gk = gop_kind(x->op);
		bool r = gk == GK_REDUCTION || gk == GK_HEAVY || x->output >= 0;
		for (int e = f->edge0[i]; !r && e < f->edge0[i + 1]; e++)
			r = find(f, f->edge_to[e]) != find(f, i);
		p->realize[f->node[i]] = r;
	}
	int *group_of = xmalloc(sizeof *group_of * ((size_t)g->nnodes + 1));
	int *gid = xmalloc(sizeof *gid * ((size_t)f->n + 1));
	for (int i = 0; i < f->n; i++)
		gid[i] = -1;
	int ngroups = 0;
	for (int u = 0; u < g->nnodes; u++) {
		group_of[u] = -1;
		if (f->pos[u] < 0 || !p->realize[u])
			continue;
		int r = find(f, f->pos[u]);
		if (gid[r] < 0)
			gid[r] = ngroups++;
		group_of[u] = gid[r];
	}
	int rc = fz_plan_finish(p, group_of, err);
	free(group_of);
	free(gid);
	return rc;
}

/* TVM's FuseOps over p's graph (the top comment): fills p's kernels (one per
 * group), p->realize and the refused pairs.  Returns 0, or -1 with err set
 * (a planner fault; p's kernels are then not filled). */
int fz_tvm(tir_fusion_plan *p, tir_error *err)
{
	fgraph f = { .p = p, .g = p->g };
	int rc = build_graph(&f, err);
	if (!rc) {
		post_dominators(&f);
		init_groups(&f);
		for (int phase = 0; phase < 3 && !rc; phase++)
			rc = run_fuse(&f, phase, err);
	}
	if (!rc) {
		for (int i = 0; i < f.n; i++)
			if (f.refused[i] >= 0 && find(&f, i) != find(&f, f.refused[i]))
				fz_reject(p, f.node[i], f.node[f.refused[i]], "%s", f.reason[i]);
		rc = finish(&f, err);
	}
	fgraph_free(&f);
	return rc;
}
