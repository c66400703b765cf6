/*
 * inductor.c — TorchInductor's scheduler over a graph workload (seeds/000,
 * §6-§7): scheduler nodes with memory dependencies, can_fuse,
 * score_fusion, fuse_nodes.
 *
 * Scheduler nodes.  The default realization (graph.c, Inductor's lowering
 * rule) decides which nodes are buffers; each realized node is one
 * scheduler node, its pointwise and view producers inlined into it.  Its
 * memory dependencies come from its own program (tir_graph_kernel with it
 * alone): the main block — the reduction block of a reduction, the block
 * writing the output otherwise — gives the iteration space (spatial
 * iterators, then reduction iterators: (numel, rnumel)), the write (the
 * store's row-major offset over the spatial iterators) and the reads (each
 * load of a graph input or another scheduler node's buffer, as a row-major
 * offset over the iterators).  A heavy operator (a template) has its output
 * as its write over the output's dims and reads that are never equal to
 * another's (its operands are read many times over).
 *
 * Indices are compared as Inductor compares MemoryDeps, on one loop nest:
 * two nodes' iteration spaces, flattened row-major, are refined into common
 * digits (possible when the two lists of suffix products of their extents
 * form one chain under divisibility: [1024, 1024] and [1048576] do, [4, 6]
 * and [6, 4] do not), every index becomes a linear form over the digits
 * (floordiv and floormod of a form split where its terms do), and two
 * dependencies are identical when the buffer and the form are.  An index
 * that is not such a form is identical to nothing (so a reshape that splits
 * a loop, read through floordiv / floormod, is not fused vertically: a
 * missed fusion, never a wrong one).
 *
 * can_fuse(node1, node2) refuses, each rule with its WhyNoFuse sentence:
 * a node with itself; node2 an ancestor of node1 (order); two templates;
 * a template's consumer that is not pointwise or reads the template's
 * output at another index (epilogue), a prologue that is not a pointwise
 * node of one user (the template's input); a vertical pair where a read of
 * node1's output by node2 is not node1's write index; loop sizes that are
 * neither equal (numel, rnumel) nor a pointwise node of numel = numel x
 * rnumel of the reduction splittable into its loops; shared data below 10
 * bytes (score_fusion_memory_threshold); more than 64 nodes
 * (max_fusion_size).  will_fusion_create_cycle is checked where pairs
 * merge: a node outside the pair that descends from one and is an
 * ancestor of the other.
 *
 * score_fusion is Inductor's FusionScore (template, node type, memory,
 * buffer overlap, proximity) with its __lt__ (the 16x memory rule before the
 * field order); fuse_nodes runs at most 10 rounds of fuse_nodes_once:
 * candidates among nodes sharing a buffer name, each paired with at most the
 * next 64 of that buffer's users, can_fuse without the cycle check, sorted
 * by score (best first), merged greedily with can_fuse and the cycle check
 * again on the current fused nodes; it stops when a round merges nothing or
 * one node is left.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fusion.h"

#define FZ_SHARED_MIN 10        /* score_fusion_memory_threshold */
#define FZ_MAX_FUSION 64        /* max_fusion_size */
#define FZ_PAIR_ATTEMPTS 64     /* max_fusion_buffer_group_pairwise_attempts */
#define FZ_ROUNDS 10
#define FZ_MEMORY_RATIO 16      /* FusionScore.__lt__'s threshold */
/* beyond Inductor: two candidates of one node whose scores are this close
 * in memory (and equal in template and node type) are a near tie; where the
 * greedy pass took one and could then not take the other, the plan with the
 * taken one refused is an alternative (tir_fusion_plan_alternatives) */
#define FZ_NEAR_RATIO_NUM 5
#define FZ_NEAR_RATIO_DEN 4         /* 1.25 */
#define FZ_MAX_DIGITS (2 * TIR_MAX_ITERS)

/* ---- iteration spaces and linear forms ---------------------------------------------- */

typedef struct space {
	int n;
	int64_t ext[TIR_MAX_ITERS];         /* spatial iterators, then reduction ones */
	const tir_var *var[TIR_MAX_ITERS];
} space;

typedef struct digits {
	int n;
	int64_t stride[FZ_MAX_DIGITS];      /* suffix products, innermost first */
	int64_t ext[FZ_MAX_DIGITS];
} digits;

typedef struct lin {
	bool ok;
	int64_t c[FZ_MAX_DIGITS];
	int64_t k;
} lin;

static int64_t space_total(const space *s)
{
	int64_t t = 1;
	for (int i = 0; i < s->n; i++)
		t *= s->ext[i];
	return t;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* The common refinement of spaces a and b (of one total); false when their
 * suffix products do not form one chain. */
static bool refine(const space *a, const space *b, digits *d)
{
	int64_t sp[2 * TIR_MAX_ITERS + 2];
	int n = 0;
	const space *s2[2] = { a, b };
	for (int k = 0; k < 2; k++) {
		int64_t p = 1;
		sp[n++] = 1;
		for (int i = s2[k]->n - 1; i >= 0; i--) {
			p *= s2[k]->ext[i];
			sp[n++] = p;
		}
	}
	if (space_total(a) != space_total(b))
		return false;
	qsort(sp, (size_t)n, sizeof *sp, cmp_i64);
	d->n = 0;
	for (int i = 1; i < n; i++) {
		if (sp[i] == sp[i - 1])
			continue;
		if (sp[i] % sp[i - 1])
			return false;
		if (d->n == FZ_MAX_DIGITS)
			return false;
		d->stride[d->n] = sp[i - 1];
		d->ext[d->n] = sp[i] / sp[i - 1];
		d->n++;
	}
	return true;
}

static lin lin_const(int64_t k)
{
	lin l;
	memset(&l, 0, sizeof l);
	l.ok = true;
	l.k = k;
	return l;
}

static bool lin_is_const(const lin *l, const digits *d)
{
	for (int i = 0; i < d->n; i++)
		if (l->c[i])
			return false;
	return true;
}

/* Iterator i of space s as a form over d. */
static lin lin_iter(const space *s, int i, const digits *d)
{
	lin l = lin_const(0);
	int64_t st = 1;
	for (int j = s->n - 1; j > i; j--)
		st *= s->ext[j];
	int64_t hi = st * s->ext[i];
	for (int k = 0; k < d->n; k++)
		if (d->stride[k] >= st && d->stride[k] < hi)
			l.c[k] = d->stride[k] / st;
	return l;
}

/* e (an index expression over s's iterators) as a form over d. */
static lin linearize(const tir_expr *e, const space *s, const digits *d)
{
	lin bad = { .ok = false };
	if (!e)
		return bad;
	switch (e->kind) {
	case E_INT:
		return lin_const(e->ival);
	case E_VAR:
		for (int i = 0; i < s->n; i++)
			if (s->var[i] == e->var)
				return lin_iter(s, i, d);
		return bad;
	case E_ADD: case E_SUB: {
		lin a = linearize(e->a, s, d), b = linearize(e->b, s, d);
		if (!a.ok || !b.ok)
			return bad;
		int sg = e->kind == E_ADD ? 1 : -1;
		for (int i = 0; i < d->n; i++)
			a.c[i] += sg * b.c[i];
		a.k += sg * b.k;
		return a;
	}
	case E_MUL: {
		lin a = linearize(e->a, s, d), b = linearize(e->b, s, d);
		if (!a.ok || !b.ok)
			return bad;
		if (!lin_is_const(&a, d)) {
			lin t = a;
			a = b;
			b = t;
		}
		if (!lin_is_const(&a, d))
			return bad;
		for (int i = 0; i < d->n; i++)
			b.c[i] *= a.k;
		b.k *= a.k;
		return b;
	}
	case E_FLOORDIV: case E_FLOORMOD: {
		lin a = linearize(e->a, s, d), q = linearize(e->b, s, d);
		if (!a.ok || !q.ok || !lin_is_const(&q, d) || q.k <= 0 || a.k < 0)
			return bad;
		int64_t k = q.k, lowmax = a.k % k;
		lin hi = lin_const(a.k / k), lo = lin_const(a.k % k);
		for (int i = 0; i < d->n; i++) {
			if (a.c[i] % k == 0) {
				hi.c[i] = a.c[i] / k;
			} else {
				if (a.c[i] < 0)
					return bad;
				lo.c[i] = a.c[i];
				lowmax += a.c[i] * (d->ext[i] - 1);
			}
		}
		if (lowmax >= k)
			return bad;
		return e->kind == E_FLOORDIV ? hi : lo;
	}
	default:
		return bad;
	}
}

static bool lin_eq(const lin *a, const lin *b, const digits *d)
{
	if (!a->ok || !b->ok || a->k != b->k)
		return false;
	for (int i = 0; i < d->n; i++)
		if (d->ext[i] > 1 && a->c[i] != b->c[i])
			return false;
	return true;
}

/* ---- scheduler nodes ------------------------------------------------------------------ */

typedef struct dep {
	int value;                          /* graph value index */
	int nidx;
	tir_expr *const *idx;               /* per dimension of the value, or NULL: opaque */
	int64_t bytes;                      /* its footprint */
} dep;

typedef struct snode {
	int node;                           /* graph node index */
	tir_program *prog;                  /* its own program (owns the exprs) */
	space sp;
	int nspatial;
	int64_t numel, rnumel;
	bool reduction, heavy;
	dep write;
	int nreads;
	dep *reads;
	int order;                          /* topological position */
} snode;

typedef struct sched {
	tir_fusion_plan *p;
	const tir_graph *g;
	int n;
	snode *s;
	int *snode_of;                      /* per value: its scheduler node, or -1 */
	unsigned char *anc;                 /* anc[a * n + b]: b is an ancestor of a */
	int *group;                         /* per snode: its fused node (union-find root) */
	int ban[2];                         /* snodes never put in one fused node (-1: none) */
	int (*ties)[2];                     /* where not NULL: merges a near tie decided, */
	int nties, maxties;                 /* (snodes of the candidate taken) */
} sched;

static int64_t value_elems(const tir_gvalue *x)
{
	int64_t n = 1;
	for (int d = 0; d < x->ndim; d++)
		n *= x->shape[d];
	return n;
}

/* Row-major offset form of the dep over d (s: its node's space). */
static lin dep_form(const sched *S, const dep *x, const space *s, const digits *d)
{
	lin bad = { .ok = false };
	if (!x->idx)
		return bad;
	const tir_gvalue *v = &S->g->v[x->value];
	lin off = lin_const(0);
	int64_t stride = 1;
	for (int k = x->nidx - 1; k >= 0; k--) {
		lin l = linearize(x->idx[k], s, d);
		if (!l.ok)
			return bad;
		for (int i = 0; i < d->n; i++)
			off.c[i] += l.c[i] * stride;
		off.k += l.k * stride;
		stride *= k < v->ndim ? v->shape[k] : 1;
	}
	return off;
}

/* Whether dep a of node na and dep b of node nb are the same access. */
static bool dep_same(const sched *S, const dep *a, const snode *na, const dep *b,
		     const snode *nb)
{
	if (a->value != b->value || !a->idx || !b->idx)
		return false;
	digits d;
	if (!refine(&na->sp, &nb->sp, &d))
		return false;
	lin fa = dep_form(S, a, &na->sp, &d), fb = dep_form(S, b, &nb->sp, &d);
	return lin_eq(&fa, &fb, &d);
}

/* The footprint of dep x of node s: elements of the digits its form uses. */
static int64_t dep_bytes(const sched *S, const dep *x, const snode *s)
{
	const tir_gvalue *v = &S->g->v[x->value];
	int64_t whole = value_elems(v) * dtype_bytes(v->dtype);
	if (!x->idx)
		return whole;
	digits d;
	refine(&s->sp, &s->sp, &d);
	lin f = dep_form(S, x, &s->sp, &d);
	if (!f.ok)
		return whole;
	int64_t e = 1;
	for (int i = 0; i < d.n; i++)
		if (f.c[i])
			e *= d.ext[i];
	e *= dtype_bytes(v->dtype);
	return e < whole ? e : whole;
}

struct load_ctx { sched *S; snode *s; const tir_buffer *const *param_of; int nvalues; };

static void add_read(tir_expr *load, void *ctx)
{
	struct load_ctx *c = ctx;
	for (int v = 0; v < c->nvalues; v++)
		if (c->param_of[v] == load->buf) {
			snode *s = c->s;
			s->reads = xrealloc(s->reads, sizeof *s->reads * (size_t)(s->nreads + 1));
			dep *x = &s->reads[s->nreads++];
			x->value = v;
			x->nidx = load->nidx;
			x->idx = s->heavy ? NULL : load->idx;
			x->bytes = dep_bytes(c->S, x, s);
			return;
		}
}

static void visit_params(tir_block *b, struct load_ctx *c)
{
	if (b->value)
		expr_visit_loads(b->value, add_read, c);
	if (b->predicate)
		expr_visit_loads(b->predicate, add_read, c);
	if (b->init)
		expr_visit_loads(b->init, add_read, c);
}

/* Scheduler node s (s->node set): its program, space and dependencies. */
static int build_snode(sched *S, snode *s, tir_error *err)
{
	const tir_graph *g = S->g;
	int nv = g->ninputs + g->nnodes;
	unsigned char *members = xcalloc((size_t)g->nnodes + 1, 1);
	members[s->node] = 1;
	s->prog = tir_graph_kernel(S->p->w, S->p->realize, members, err);
	if (!s->prog) {
		free(members);
		return -1;
	}
	tir_program *p = s->prog;
	const tir_gvalue *x = &g->v[g->ninputs + s->node];
	s->heavy = gop_kind(x->op) == GK_HEAVY;
	s->reduction = gop_kind(x->op) == GK_REDUCTION;
	/* the parameters, in tir_graph_kernel's order: the values the kernel's
	 * nodes (the member and the inlined nodes it reaches) read from outside
	 * them, in value order; then the member */
	unsigned char *part = xcalloc((size_t)g->nnodes + 1, 1), *read = xcalloc((size_t)nv + 1, 1);
	graph_kernel_nodes(g, S->p->realize, members, part);
	for (int i = 0; i < g->nnodes; i++)
		for (int k = 0; part[i] && k < g->v[g->ninputs + i].nargs; k++) {
			int a = g->v[g->ninputs + i].arg[k];
			if (a >= 0 && (a < g->ninputs || !part[a - g->ninputs]))
				read[a] = 1;
		}
	const tir_buffer **param_of = xcalloc((size_t)nv + 1, sizeof *param_of);
	int np = 0;
	for (int v = 0; v < nv; v++)
		if (read[v]) {
			if (np >= p->nparams || p->bufs[np]->role != BUF_INPUT) {
				free(part);
				free(read);
				free(param_of);
				free(members);
				return tir_fail(err, "fuse: node \"%s\": its program's parameters "
						"are not the values it reads", x->name);
			}
			param_of[v] = p->bufs[np++];
		}
	free(part);
	free(read);
	free(members);
	/* the main block */
	tir_block *main = NULL;
	for (int i = 0; i < p->nblocks; i++) {
		tir_block *b = p->blocks[i];
		if (!b->stmt)
			continue;
		if (s->reduction ? b->reduce != REDUCE_NONE : b->store->role == BUF_OUTPUT)
			main = b;
	}
	if (!main) {
		free(param_of);
		return tir_fail(err, "fuse: node \"%s\": no block computes it", x->name);
	}
	s->sp.n = 0;
	s->nspatial = 0;
	s->numel = s->rnumel = 1;
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < main->niters; i++) {
			const tir_iter *it = &main->iters[i];
			if ((it->kind == ITER_REDUCE) != (pass == 1))
				continue;
			s->sp.ext[s->sp.n] = it->extent;
			s->sp.var[s->sp.n] = it->var;
			s->sp.n++;
			if (pass == 0) {
				s->nspatial++;
				s->numel *= it->extent;
			} else {
				s->rnumel *= it->extent;
			}
		}
	s->write.value = g->ninputs + s->node;
	s->write.nidx = main->store->ndim;
	s->write.idx = main->store_idx;
	if (s->heavy) {
		/* a template: its output over the output's dims (its loops for an
		 * epilogue), its operands read opaquely */
		s->sp.n = s->nspatial;
		s->rnumel = 1;
	}
	s->write.bytes = value_elems(x) * dtype_bytes(x->dtype);
	struct load_ctx c = { S, s, param_of, nv };
	if (s->heavy) {
		for (int i = 0; i < p->nblocks; i++)
			if (p->blocks[i]->stmt)
				visit_params(p->blocks[i], &c);
	} else {
		visit_params(main, &c);
	}
	free(param_of);
	return 0;
}

static void sched_free(sched *S)
{
	for (int i = 0; i < S->n; i++) {
		tir_program_free(S->s[i].prog);
		free(S->s[i].reads);
	}
	free(S->s);
	free(S->snode_of);
	free(S->anc);
	free(S->group);
}

/* The scheduler nodes of p (p->realize: the default rule), their
 * dependencies and ancestors. */
static int sched_build(sched *S, tir_fusion_plan *p, tir_error *err)
{
	memset(S, 0, sizeof *S);
	S->p = p;
	S->g = p->g;
	const tir_graph *g = p->g;
	int nv = g->ninputs + g->nnodes;
	if (tir_graph_default_realize(p->w, NULL, p->realize, err))
		return -1;
	S->snode_of = xmalloc(sizeof *S->snode_of * (size_t)(nv + 1));
	S->s = xcalloc((size_t)g->nnodes + 1, sizeof *S->s);
	for (int v = 0; v < nv; v++)
		S->snode_of[v] = -1;
	for (int i = 0; i < g->nnodes; i++) {
		if (!g->v[g->ninputs + i].live || !p->realize[i])
			continue;
		snode *s = &S->s[S->n];
		s->node = i;
		s->order = S->n;
		S->snode_of[g->ninputs + i] = S->n;
		S->n++;
		if (build_snode(S, s, err))
			return -1;
	}
	/* ancestors: a node's reads' writers and theirs (document order is
	 * topological) */
	int n = S->n;
	S->anc = xcalloc((size_t)n * (size_t)n + 1, 1);
	for (int a = 0; a < n; a++)
		for (int r = 0; r < S->s[a].nreads; r++) {
			int b = S->snode_of[S->s[a].reads[r].value];
			if (b < 0 || b == a)
				continue;
			S->anc[a * n + b] = 1;
			for (int c = 0; c < n; c++)
				if (S->anc[b * n + c])
					S->anc[a * n + c] = 1;
		}
	S->group = xmalloc(sizeof *S->group * (size_t)(n + 1));
	for (int a = 0; a < n; a++)
		S->group[a] = a;
	return 0;
}

static int root(const sched *S, int a)
{
	while (S->group[a] != a)
		a = S->group[a];
	return a;
}

static bool in_group(const sched *S, int a, int grp)
{
	return root(S, a) == grp;
}

static const char *name_of(const sched *S, int a)
{
	return S->g->v[S->g->ninputs + S->s[a].node].name;
}

/* A fused node: the members of one group. */
typedef struct fnode {
	int root, n;
	int m[FZ_MAX_FUSION * 2];
	bool reduction, heavy;
	int64_t numel, rnumel;           /* its loops: its reductions' if any */
	int min_order, max_order;
	int rep;                         /* the member that sets numel / rnumel */
} fnode;

static void fnode_of(const sched *S, int grp, fnode *f)
{
	memset(f, 0, sizeof *f);
	f->root = grp;
	f->min_order = 1 << 30;
	f->max_order = -1;
	f->rep = -1;
	for (int a = 0; a < S->n; a++) {
		if (!in_group(S, a, grp))
			continue;
		if (f->n < (int)(sizeof f->m / sizeof *f->m))
			f->m[f->n] = a;
		f->n++;
		const snode *s = &S->s[a];
		f->reduction |= s->reduction;
		f->heavy |= s->heavy;
		if (f->rep < 0 || (s->reduction && !S->s[f->rep].reduction))
			f->rep = a;
		if (s->order < f->min_order)
			f->min_order = s->order;
		if (s->order > f->max_order)
			f->max_order = s->order;
	}
	f->numel = S->s[f->rep].numel;
	f->rnumel = S->s[f->rep].rnumel;
}

static int fnode_count(const fnode *f)
{
	return f->n < (int)(sizeof f->m / sizeof *f->m) ? f->n : (int)(sizeof f->m / sizeof *f->m);
}

/* Whether member a of a group reads value v from outside the group. */
static bool group_writes(const sched *S, const fnode *f, int value)
{
	int w = S->snode_of[value];
	return w >= 0 && in_group(S, w, f->root);
}

/* Bytes of dependencies identical in f1 and f2 (score_fusion_memory), and the
 * overlap of the buffers both read at other indices. */
static void shared_bytes(const sched *S, const fnode *f1, const fnode *f2, int64_t *memory,
			 int64_t *overlap)
{
	*memory = *overlap = 0;
	for (int i = 0; i < fnode_count(f1); i++) {
		const snode *a = &S->s[f1->m[i]];
		for (int ra = -1; ra < a->nreads; ra++) {
			const dep *x = ra < 0 ? &a->write : &a->reads[ra];
			if (ra >= 0 && group_writes(S, f1, x->value))
				continue;          /* met inside f1 */
			bool same = false, over = false;
			for (int j = 0; j < fnode_count(f2) && !same; j++) {
				const snode *b = &S->s[f2->m[j]];
				for (int rb = -1; rb < b->nreads && !same; rb++) {
					const dep *y = rb < 0 ? &b->write : &b->reads[rb];
					if (y->value != x->value)
						continue;
					if (dep_same(S, x, a, y, b))
						same = true;
					else
						over = true;
				}
			}
			if (same)
				*memory += x->bytes;
			else if (over)
				*overlap += x->bytes;
		}
	}
}

/* will_fusion_create_cycle: a node outside f1 and f2 that descends from one
 * and is an ancestor of the other; its index, or -1. */
static int cycle_through(const sched *S, const fnode *f1, const fnode *f2)
{
	int n = S->n;
	for (int x = 0; x < n; x++) {
		if (in_group(S, x, f1->root) || in_group(S, x, f2->root))
			continue;
		bool from1 = false, from2 = false, to1 = false, to2 = false;
		for (int k = 0; k < fnode_count(f1); k++) {
			from1 |= S->anc[x * n + f1->m[k]] != 0;
			to1 |= S->anc[f1->m[k] * n + x] != 0;
		}
		for (int k = 0; k < fnode_count(f2); k++) {
			from2 |= S->anc[x * n + f2->m[k]] != 0;
			to2 |= S->anc[f2->m[k] * n + x] != 0;
		}
		if ((from1 && to2) || (from2 && to1))
			return x;
	}
	return -1;
}

/* Whether some member of f2 has an ancestor in f1 (f1 a producer of f2). */
static bool feeds(const sched *S, const fnode *f1, const fnode *f2)
{
	for (int i = 0; i < fnode_count(f2); i++)
		for (int j = 0; j < fnode_count(f1); j++)
			if (S->anc[f2->m[i] * S->n + f1->m[j]])
				return true;
	return false;
}

/* The vertical rule: every read by f2 of a value f1 writes is at f1's
 * write index.  false with the offending pair's text in why. */
static bool reads_match(const sched *S, const fnode *f1, const fnode *f2, char *why, size_t nwhy)
{
	for (int i = 0; i < fnode_count(f2); i++) {
		const snode *b = &S->s[f2->m[i]];
		for (int r = 0; r < b->nreads; r++) {
			int w = S->snode_of[b->reads[r].value];
			if (w < 0 || !in_group(S, w, f1->root))
				continue;
			if (!dep_same(S, &S->s[w].write, &S->s[w], &b->reads[r], b)) {
				snprintf(why, nwhy, "%s reads %s at other indices than %s writes it "
					 "(the value would be another thread's)", name_of(S, f2->m[i]),
					 S->g->v[b->reads[r].value].name, name_of(S, w));
				return false;
			}
		}
	}
	return true;
}

/* can_fuse(f1, f2) without the cycle check; false with the reason. */
static bool can_fuse(const sched *S, const fnode *f1, const fnode *f2, char *why, size_t nwhy)
{
	if (f1->root == f2->root) {
		snprintf(why, nwhy, "a node cannot fuse with itself");
		return false;
	}
	if (feeds(S, f2, f1)) {
		snprintf(why, nwhy, "node1 must go before node2 (%s is an ancestor of %s)",
			 name_of(S, f2->rep), name_of(S, f1->rep));
		return false;
	}
	if (fnode_count(f1) + fnode_count(f2) > FZ_MAX_FUSION) {
		snprintf(why, nwhy, "the fused node would have %d nodes (more than %d, max_fusion_size)",
			 fnode_count(f1) + fnode_count(f2), FZ_MAX_FUSION);
		return false;
	}
	bool vertical = feeds(S, f1, f2);
	if (f1->heavy && f2->heavy) {
		snprintf(why, nwhy, "two templates (heavy operators %s and %s) in one kernel",
			 name_of(S, f1->rep), name_of(S, f2->rep));
		return false;
	}
	if (f1->heavy || f2->heavy) {
		const fnode *t = f1->heavy ? f1 : f2, *o = f1->heavy ? f2 : f1;
		if (o->reduction) {
			snprintf(why, nwhy, "template %s: a reduction (%s) is neither an epilogue nor "
				 "a prologue", name_of(S, t->rep), name_of(S, o->rep));
			return false;
		}
		if (t == f1) {   /* epilogue */
			if (!vertical) {
				snprintf(why, nwhy, "template %s: %s does not read its output (an epilogue "
					 "must)", name_of(S, t->rep), name_of(S, o->rep));
				return false;
			}
			if (!reads_match(S, f1, f2, why, nwhy))
				return false;
			if (o->numel != t->numel) {
				snprintf(why, nwhy, "template %s: the epilogue %s has %lld elements, the "
					 "output %lld", name_of(S, t->rep), name_of(S, o->rep),
					 (long long)o->numel, (long long)t->numel);
				return false;
			}
		} else {         /* prologue: a pointwise producer of one user */
			for (int i = 0; i < fnode_count(o); i++) {
				const tir_gvalue *v = &S->g->v[S->g->ninputs + S->s[o->m[i]].node];
				if (v->uses != 1 || v->output >= 0) {
					snprintf(why, nwhy, "template %s: the prologue %s has %s", name_of(S, t->rep),
						 v->name, v->output >= 0 ? "a graph output" : "several users");
					return false;
				}
			}
			if (!vertical) {
				snprintf(why, nwhy, "template %s does not read %s (a prologue is its input)",
					 name_of(S, t->rep), name_of(S, o->rep));
				return false;
			}
		}
		return true;
	}
	/* loop sizes */
	bool sizes = f1->numel == f2->numel && f1->rnumel == f2->rnumel;
	if (!sizes && f1->reduction != f2->reduction) {
		const fnode *r = f1->reduction ? f1 : f2, *q = f1->reduction ? f2 : f1;
		if (q->numel == r->numel * r->rnumel) {
			digits d;
			sizes = refine(&S->s[r->rep].sp, &S->s[q->rep].sp, &d);
			if (!sizes) {
				snprintf(why, nwhy, "the loops of %s (%lld) do not split into the loops of "
					 "the reduction %s (%lld x %lld)", name_of(S, q->rep),
					 (long long)q->numel, name_of(S, r->rep), (long long)r->numel,
					 (long long)r->rnumel);
				return false;
			}
		}
	}
	if (!sizes) {
		snprintf(why, nwhy, "different loop sizes: (numel, rnumel) (%lld, %lld) and (%lld, %lld)",
			 (long long)f1->numel, (long long)f1->rnumel, (long long)f2->numel,
			 (long long)f2->rnumel);
		return false;
	}
	if (vertical && !reads_match(S, f1, f2, why, nwhy))
		return false;
	int64_t memory, overlap;
	shared_bytes(S, f1, f2, &memory, &overlap);
	if (memory < FZ_SHARED_MIN) {
		snprintf(why, nwhy, "they share %lld bytes of data (below the threshold %d, "
			 "score_fusion_memory_threshold)", (long long)memory, FZ_SHARED_MIN);
		return false;
	}
	return true;
}

/* ---- score_fusion ------------------------------------------------------------------- */


static fz_score score_fusion(const sched *S, const fnode *f1, const fnode *f2)
{
	fz_score sc;
	shared_bytes(S, f1, f2, &sc.memory, &sc.overlap);
	if (sc.memory > 0)
		sc.overlap = 0;      /* only where there is no identical dependency */
	/* epilogue_fusion_first is false: a plain fusion 2, an epilogue 1, a
	 * prologue 0 */
	sc.template_score = f2->heavy ? 0 : 1 + ((f1->heavy ? 1 : 0) == 0 && sc.memory > 0);
	sc.node_type_score = f1->reduction == f2->reduction && sc.memory > 0;
	if (f1->reduction && f2->reduction && f1->rnumel != f2->rnumel)
		sc.node_type_score = -1;
	int a = f1->min_order - f2->max_order, b = f2->min_order - f1->max_order;
	if (a < 0) a = -a;
	if (b < 0) b = -b;
	sc.proximity = -(a > b ? a : b);
	return sc;
}

bool fz_score_lt(const fz_score *x, const fz_score *y)
{
	if (x->template_score != y->template_score)
		return x->template_score < y->template_score;
	int64_t hi = x->memory > y->memory ? x->memory : y->memory;
	int64_t lo = x->memory < y->memory ? x->memory : y->memory;
	if (hi > lo * FZ_MEMORY_RATIO)
		return x->memory < y->memory;
	if (x->node_type_score != y->node_type_score)
		return x->node_type_score < y->node_type_score;
	if (x->memory != y->memory)
		return x->memory < y->memory;
	if (x->overlap != y->overlap)
		return x->overlap < y->overlap;
	return x->proximity < y->proximity;
}

bool fz_score_near(const fz_score *x, const fz_score *y)
{
	int64_t hi = x->memory > y->memory ? x->memory : y->memory;
	int64_t lo = x->memory < y->memory ? x->memory : y->memory;
	return x->template_score == y->template_score &&
	       x->node_type_score == y->node_type_score &&
	       hi * FZ_NEAR_RATIO_DEN <= lo * FZ_NEAR_RATIO_NUM;
}

/* ---- fuse_nodes ----------------------------------------------------------------------- */

typedef struct cand { int a, b; fz_score sc; } cand;

static int cmp_cand(const void *x, const void *y)
{
	const cand *p = x, *q = y;
	if (fz_score_lt(&q->sc, &p->sc))
		return -1;       /* p ranks above q: first */
	if (fz_score_lt(&p->sc, &q->sc))
		return 1;
	return p->a != q->a ? p->a - q->a : p->b - q->b;
}

/* Records a refusal once per pair of nodes. */
static void reject_once(sched *S, int a, int b, const char *why)
{
	tir_fusion_plan *p = S->p;
	int na = S->s[a].node, nb = S->s[b].node;
	for (int i = 0; i < p->nrejected; i++)
		if (p->rej[i].a == na && p->rej[i].b == nb)
			return;
	fz_reject(p, na, nb, "%s", why);
}

/* The fused nodes of groups a and b, the earlier first, and can_fuse of
 * them (without the cycle check); a refusal is recorded for nodes (ra, rb),
 * or for the groups' representatives where ra is -1. */
static bool pair_can_fuse(sched *S, int a, int b, int ra, int rb, fnode *f1, fnode *f2)
{
	fnode_of(S, a, f1);
	fnode_of(S, b, f2);
	if (f2->min_order < f1->min_order) {
		fnode t = *f1;
		*f1 = *f2;
		*f2 = t;
	}
	char why[512];
	if (can_fuse(S, f1, f2, why, sizeof why))
		return true;
	reject_once(S, ra >= 0 ? ra : f1->rep, ra >= 0 ? rb : f2->rep, why);
	return false;
}

/* One round of fuse_nodes_once; returns the merges made. */
static int fuse_nodes_once(sched *S)
{
	int n = S->n, nv = S->g->ninputs + S->g->nnodes;
	/* candidates: the groups that use each buffer, in order */
	unsigned char *seen = xcalloc((size_t)n * (size_t)n + 1, 1);
	cand *c = NULL;
	int nc = 0, cap = 0;
	int *users = xmalloc(sizeof *users * (size_t)(n + 1));
	for (int v = 0; v < nv; v++) {
		int nu = 0;
		for (int a = 0; a < n; a++) {
			if (root(S, a) != a)
				continue;
			bool uses = false;
			for (int m = 0; m < n && !uses; m++) {
				if (!in_group(S, m, a))
					continue;
				const snode *s = &S->s[m];
				uses = s->write.value == v;
				for (int r = 0; r < s->nreads && !uses; r++)
					uses = s->reads[r].value == v;
			}
			if (uses)
				users[nu++] = a;
		}
		for (int i = 0; i < nu; i++)
			for (int j = i + 1; j < nu && j <= i + FZ_PAIR_ATTEMPTS; j++) {
				int a = users[i], b = users[j];
				if (seen[a * n + b])
					continue;
				seen[a * n + b] = 1;
				fnode f1, f2;
				if (!pair_can_fuse(S, a, b, -1, -1, &f1, &f2))
					continue;
				if (nc == cap) {
					cap = cap ? 2 * cap : 16;
					c = xrealloc(c, sizeof *c * (size_t)cap);
				}
				c[nc++] = (cand){ f1.rep, f2.rep, score_fusion(S, &f1, &f2) };
			}
	}
	free(users);
	free(seen);
	if (nc > 1)
		qsort(c, (size_t)nc, sizeof *c, cmp_cand);
	int merged = 0;
	bool *took = xcalloc((size_t)nc + 1, sizeof *took);
	for (int i = 0; i < nc; i++) {
		int ra = root(S, c[i].a), rb = root(S, c[i].b);
		if (ra == rb)
			continue;
		if (S->ban[0] >= 0 && ((root(S, S->ban[0]) == ra && root(S, S->ban[1]) == rb) ||
				       (root(S, S->ban[0]) == rb && root(S, S->ban[1]) == ra))) {
			reject_once(S, S->ban[0], S->ban[1], "kept apart to measure the other fusion "
				    "of a near tie (tir_fusion_plan_alternatives)");
			continue;
		}
		fnode f1, f2;
		if (!pair_can_fuse(S, ra, rb, c[i].a, c[i].b, &f1, &f2))
			continue;
		char why[512];
		int x = cycle_through(S, &f1, &f2);
		if (x >= 0) {
			snprintf(why, sizeof why, "fusing would create a cycle through %s "
				 "(will_fusion_create_cycle)", name_of(S, x));
			reject_once(S, c[i].a, c[i].b, why);
			continue;
		}
		int lo = f1.root < f2.root ? f1.root : f2.root, hi = f1.root ^ f2.root ^ lo;
		S->group[hi] = lo;
		took[i] = true;
		merged++;
	}
	/* the near ties this round decided: a merge taken over a later
	 * candidate of one of its nodes, of a near-equal score, that then did
	 * not merge */
	for (int i = 0; i < nc && S->ties; i++) {
		bool tie = false;
		for (int k = i + 1; k < nc && took[i] && !tie; k++) {
			bool shares = c[k].a == c[i].a || c[k].a == c[i].b || c[k].b == c[i].a ||
				      c[k].b == c[i].b;
			tie = shares && !took[k] && root(S, c[k].a) != root(S, c[k].b) &&
			      fz_score_near(&c[i].sc, &c[k].sc);
		}
		if (tie && S->nties < S->maxties) {
			S->ties[S->nties][0] = c[i].a;
			S->ties[S->nties][1] = c[i].b;
			S->nties++;
		}
	}
	free(took);
	free(c);
	return merged;
}

static int groups(const sched *S)
{
	int k = 0;
	for (int a = 0; a < S->n; a++)
		k += root(S, a) == a;
	return k;
}

/* fuse_nodes over p's scheduler nodes, with snodes ban[0] and ban[1] (-1:
 * none) never in one fused node; where ties is not NULL, up to maxties
 * near ties decided are put there (their count in *nties). */
static int inductor_run(tir_fusion_plan *p, const int ban[2], int (*ties)[2], int maxties,
			int *nties, tir_error *err)
{
	sched S;
	if (sched_build(&S, p, err)) {
		sched_free(&S);
		return -1;
	}
	S.ban[0] = ban[0];
	S.ban[1] = ban[1];
	S.ties = ties;
	S.nties = 0;
	S.maxties = maxties;
	for (int round = 0; round < FZ_ROUNDS && groups(&S) > 1; round++)
		if (!fuse_nodes_once(&S))
			break;
	int *group_of = xmalloc(sizeof *group_of * (size_t)(p->g->nnodes + 1));
	for (int i = 0; i < p->g->nnodes; i++)
		group_of[i] = -1;
	for (int a = 0; a < S.n; a++)
		group_of[S.s[a].node] = root(&S, a);
	int rc = fz_plan_finish(p, group_of, err);
	free(group_of);
	if (nties)
		*nties = S.nties;
	sched_free(&S);
	return rc;
}

int fz_inductor(tir_fusion_plan *p, tir_error *err)
{
	static const int none[2] = { -1, -1 };
	return inductor_run(p, none, NULL, 0, NULL, err);
}

int fz_inductor_alternatives(const tir_workload *w, tir_fusion_plan **out, int max,
			     tir_error *err)
{
	int (*ties)[2] = xcalloc((size_t)max + 1, sizeof *ties), nties = 0, n = 0;
	static const int none[2] = { -1, -1 };
	tir_fusion_plan *p = fz_plan_new(w, TIR_FUSE_INDUCTOR, err);
	int rc = p ? inductor_run(p, none, ties, max, &nties, err) : -1;
	for (int t = 0; rc == 0 && t < nties; t++) {
		tir_fusion_plan *q = fz_plan_new(w, TIR_FUSE_INDUCTOR, err);
		if (!q || inductor_run(q, ties[t], NULL, 0, NULL, err)) {
			tir_fusion_plan_free(q);
			rc = -1;
			break;
		}
		bool seen = fz_plan_same(q, p);
		for (int k = 0; k < n && !seen; k++)
			seen = fz_plan_same(q, out[k]);
		if (seen)
			tir_fusion_plan_free(q);
		else
			out[n++] = q;
	}
	tir_fusion_plan_free(p);
	free(ties);
	if (rc) {
		for (int k = 0; k < n; k++)
			tir_fusion_plan_free(out[k]);
		return -1;
	}
	return n;
}

int fz_inductor_why(const tir_workload *w, const char *node1, const char *node2, char *why,
		    size_t nwhy, tir_error *err)
{
	tir_fusion_plan *p = fz_plan_new(w, TIR_FUSE_INDUCTOR, err);
	if (!p)
		return -1;
	sched S;
	int rc = sched_build(&S, p, err);
	int a = -1, b = -1;
	for (int i = 0; rc == 0 && i < S.n; i++) {
		if (!strcmp(name_of(&S, i), node1))
			a = i;
		if (!strcmp(name_of(&S, i), node2))
			b = i;
	}
	if (rc == 0 && (a < 0 || b < 0))
		rc = tir_fail(err, "fuse: \"%s\" is not a scheduler node", a < 0 ? node1 : node2);
	if (rc == 0) {
		fnode f1, f2;
		fnode_of(&S, a, &f1);
		fnode_of(&S, b, &f2);
		rc = 1;
		if (!can_fuse(&S, &f1, &f2, why, nwhy)) {
			rc = 0;
		} else {
			int x = cycle_through(&S, &f1, &f2);
			if (x >= 0) {
				snprintf(why, nwhy, "fusing would create a cycle through %s "
					 "(will_fusion_create_cycle)", name_of(&S, x));
				rc = 0;
			}
		}
	}
	sched_free(&S);
	tir_fusion_plan_free(p);
	return rc;
}
