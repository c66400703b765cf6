/*
 * plan.c — what every fusion mode shares: a plan's kernels (their computed
 * nodes, names and bytes, from the groups a planner chose), the eager plan,
 * tir_fusion_plan_new and the plan's JSON and text forms.
 *
 * Contract of fz_plan_finish.  In: p->realize (which live nodes are
 * buffers) and group_of[node] (the kernel realizing each realized live node;
 * -1 for the others).  Out: the kernels, in an order where each runs after
 * the kernels whose members it reads (among those, by first member), each
 * with
 *   members  the nodes of its group;
 *   nodes    its members and every node they read that the plan inlines,
 *            transitively (tir_graph_kernel computes exactly these);
 *   name     Inductor's: "fused_" and the distinct ops of its nodes sorted
 *            and joined by '_' (fused_add_mean_mul_relu_sub); a name two
 *            kernels would share gets "_1", "_2", ... on the later ones;
 *   bytes    reads: each value its nodes load from outside it (a graph
 *            input, or a member of another kernel) once, whole; writes:
 *            each member that is a graph output or that a node outside it
 *            reads, once, whole (fusion.h).
 * Refused, with p unchanged: a realized live node without a group, a group
 * member that is not realized or not live, kernels that read each other in
 * a cycle.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cJSON.h>
#include "fusion.h"

static const char *const mode_names[] = { "inductor", "tvm", "eager", "measured" };

int tir_fuse_mode_parse(const char *s, tir_fuse_mode *mode, tir_error *err)
{
	for (int i = 0; i < (int)(sizeof mode_names / sizeof *mode_names); i++)
		if (s && !strcmp(s, mode_names[i])) {
			*mode = (tir_fuse_mode)i;
			return 0;
		}
	return tir_fail(err, "fusion mode \"%s\": not one of inductor, tvm, eager, measured",
			s ? s : "");
}

const char *tir_fuse_mode_name(tir_fuse_mode mode)
{
	return (unsigned)mode < sizeof mode_names / sizeof *mode_names ? mode_names[mode] : "?";
}

tir_fusion_plan *fz_plan_new(const tir_workload *w, tir_fuse_mode mode, tir_error *err)
{
	if (!w || !w->graph) {
		tir_fail(err, "fuse: %s is not a graph workload (\"op\": \"graph\")",
			 w ? tir_workload_op(w) : "no workload");
		return NULL;
	}
	tir_fusion_plan *p = xcalloc(1, sizeof *p);
	p->w = w;
	p->g = w->graph;
	p->mode = mode;
	p->realize = xcalloc((size_t)p->g->nnodes + 1, 1);
	return p;
}

void fz_reject(tir_fusion_plan *p, int a, int b, const char *fmt, ...)
{
	if (p->nrejected == p->cap_rejected) {
		p->cap_rejected = p->cap_rejected ? 2 * p->cap_rejected : 16;
		p->rej = xrealloc(p->rej, sizeof *p->rej * (size_t)p->cap_rejected);
	}
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	p->rej[p->nrejected++] = (fz_rejection){ a, b, xstrdup(buf) };
}

static void kernels_free(fz_kernel *k, int n)
{
	for (int i = 0; i < n; i++) {
		free(k[i].name);
		free(k[i].members);
		free(k[i].nodes);
	}
	free(k);
}

void tir_fusion_plan_free(tir_fusion_plan *p)
{
	if (!p)
		return;
	kernels_free(p->k, p->nkernels);
	for (int i = 0; i < p->nrejected; i++)
		free(p->rej[i].reason);
	free(p->rej);
	free(p->realize);
	free(p);
}

static int64_t value_bytes(const tir_gvalue *x)
{
	int64_t n = dtype_bytes(x->dtype);
	for (int d = 0; d < x->ndim; d++)
		n *= x->shape[d];
	return n;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "fused_" and the sorted distinct ops of k's nodes. */
static char *kernel_name(const tir_fusion_plan *p, const fz_kernel *k)
{
	const tir_graph *g = p->g;
	const char **ops = xmalloc(sizeof *ops * (size_t)(g->nnodes + 1));
	int n = 0;
	for (int i = 0; i < g->nnodes; i++)
		if (k->nodes[i])
			ops[n++] = tir_graph_node_op(p->w, i);
	qsort(ops, (size_t)n, sizeof *ops, cmp_str);
	size_t len = 8;
	for (int i = 0; i < n; i++)
		len += strlen(ops[i]) + 1;
	char *s = xmalloc(len);
	strcpy(s, "fused");
	for (int i = 0; i < n; i++)
		if (i == 0 || strcmp(ops[i], ops[i - 1])) {
			strcat(s, "_");
			strcat(s, ops[i]);
		}
	free(ops);
	return s;
}

/* The bytes kernel k reads and writes (the top comment). */
static void kernel_bytes(const tir_fusion_plan *p, fz_kernel *k)
{
	const tir_graph *g = p->g;
	unsigned char *read = xcalloc((size_t)(g->ninputs + g->nnodes) + 1, 1);
	k->read_bytes = k->write_bytes = 0;
	for (int i = 0; i < g->nnodes; i++) {
		const tir_gvalue *x = &g->v[g->ninputs + i];
		if (!x->live)
			continue;
		for (int j = 0; j < x->nargs; j++) {
			int a = x->arg[j];
			if (a < 0)
				continue;
			bool inside = a >= g->ninputs && k->nodes[a - g->ninputs];
			if (k->nodes[i] && !inside && !read[a]) {
				read[a] = 1;
				k->read_bytes += value_bytes(&g->v[a]);
			}
			if (!k->nodes[i] && a >= g->ninputs && k->members[a - g->ninputs])
				read[a] = 2;     /* a member read outside k */
		}
	}
	for (int i = 0; i < g->nnodes; i++)
		if (k->members[i] && (g->v[g->ninputs + i].output >= 0 || read[g->ninputs + i] == 2))
			k->write_bytes += value_bytes(&g->v[g->ninputs + i]);
	free(read);
}

int fz_plan_finish(tir_fusion_plan *p, const int *group_of, tir_error *err)
{
	const tir_graph *g = p->g;
	int ngroups = 0;
	for (int i = 0; i < g->nnodes; i++) {
		const tir_gvalue *x = &g->v[g->ninputs + i];
		if (group_of[i] >= 0 && (!x->live || !p->realize[i]))
			return tir_fail(err, "fuse: node \"%s\" is in a kernel but %s", x->name,
					x->live ? "not realized" : "dropped");
		if (group_of[i] < 0 && x->live && p->realize[i])
			return tir_fail(err, "fuse: node \"%s\" is realized by no kernel", x->name);
		if (group_of[i] >= ngroups)
			ngroups = group_of[i] + 1;
	}
	/* groups -> kernels in topological order (Kahn's, by first member) */
	int *first = xmalloc(sizeof *first * (size_t)(ngroups + 1));
	int *indeg = xcalloc((size_t)ngroups + 1, sizeof *indeg);
	unsigned char *dep = xcalloc((size_t)ngroups * (size_t)ngroups + 1, 1);  /* dep[a*n+b]: b reads a */
	fz_kernel *k = xcalloc((size_t)ngroups + 1, sizeof *k);
	for (int c = 0; c < ngroups; c++) {
		first[c] = -1;
		k[c].members = xcalloc((size_t)g->nnodes + 1, 1);
		k[c].nodes = xcalloc((size_t)g->nnodes + 1, 1);
	}
	for (int i = 0; i < g->nnodes; i++)
		if (group_of[i] >= 0) {
			int c = group_of[i];
			if (first[c] < 0)
				first[c] = i;
			k[c].members[i] = 1;
		}
	for (int c = 0; c < ngroups; c++)
		graph_kernel_nodes(g, p->realize, k[c].members, k[c].nodes);
	for (int c = 0; c < ngroups; c++)
		for (int i = 0; i < g->nnodes; i++) {
			if (!k[c].nodes[i])
				continue;
			const tir_gvalue *x = &g->v[g->ninputs + i];
			for (int j = 0; j < x->nargs; j++) {
				int a = x->arg[j] - g->ninputs;
				if (x->arg[j] < g->ninputs || group_of[a] < 0 || group_of[a] == c)
					continue;
				if (!dep[group_of[a] * ngroups + c]) {
					dep[group_of[a] * ngroups + c] = 1;
					indeg[c]++;
				}
			}
		}
	int *order = xmalloc(sizeof *order * (size_t)(ngroups + 1));
	int n = 0, empty = 0;
	unsigned char *done = xcalloc((size_t)ngroups + 1, 1);
	for (int c = 0; c < ngroups; c++)
		if (first[c] < 0) {
			done[c] = 1;      /* an unused group number */
			empty++;
		}
	while (n + empty < ngroups) {
		int best = -1;
		for (int c = 0; c < ngroups; c++)
			if (!done[c] && indeg[c] == 0 && (best < 0 || first[c] < first[best]))
				best = c;
		if (best < 0)
			break;
		done[best] = 1;
		order[n++] = best;
		for (int c = 0; c < ngroups; c++)
			if (dep[best * ngroups + c])
				indeg[c]--;
	}
	int rc = 0;
	if (n + empty < ngroups) {
		rc = tir_fail(err, "fuse: the kernels read each other in a cycle (a planner fault)");
		kernels_free(k, ngroups);
	} else {
		fz_kernel *sorted = xcalloc((size_t)n + 1, sizeof *sorted);
		for (int i = 0; i < n; i++)
			sorted[i] = k[order[i]];
		for (int c = 0; c < ngroups; c++)
			if (first[c] < 0) {
				free(k[c].members);
				free(k[c].nodes);
			}
		free(k);
		kernels_free(p->k, p->nkernels);
		p->k = sorted;
		p->nkernels = n;
		p->read_bytes = p->write_bytes = 0;
		for (int i = 0; i < n; i++) {
			kernel_bytes(p, &sorted[i]);
			p->read_bytes += sorted[i].read_bytes;
			p->write_bytes += sorted[i].write_bytes;
			char *name = kernel_name(p, &sorted[i]);
			int dup = 0;
			for (int j = 0; j < i; j++) {
				size_t l = strlen(name);
				if (!strncmp(sorted[j].name, name, l) &&
				    (sorted[j].name[l] == 0 || sorted[j].name[l] == '_'))
					dup++;
			}
			if (dup) {
				size_t l = strlen(name) + 16;
				sorted[i].name = xmalloc(l);
				snprintf(sorted[i].name, l, "%s_%d", name, dup);
				free(name);
			} else {
				sorted[i].name = name;
			}
		}
	}
	free(first);
	free(indeg);
	free(dep);
	free(order);
	free(done);
	return rc;
}

/* ---- eager: a kernel per node ---------------------------------------------------- */

int fz_eager(tir_fusion_plan *p, tir_error *err)
{
	const tir_graph *g = p->g;
	int *group_of = xmalloc(sizeof *group_of * (size_t)(g->nnodes + 1));
	int n = 0;
	for (int i = 0; i < g->nnodes; i++) {
		const tir_gvalue *x = &g->v[g->ninputs + i];
		bool view = gop_kind(x->op) == GK_VIEW && x->output < 0;
		p->realize[i] = x->live && !view;
		group_of[i] = p->realize[i] ? n++ : -1;
	}
	int rc = fz_plan_finish(p, group_of, err);
	free(group_of);
	return rc;
}

/* ---- the public interface ------------------------------------------------------- */

tir_fusion_plan *tir_fusion_plan_new(const tir_workload *w, tir_fuse_mode mode, tir_error *err)
{
	tir_fusion_plan *p = fz_plan_new(w, mode, err);
	if (!p)
		return NULL;
	int rc;
	switch (mode) {
	case TIR_FUSE_INDUCTOR: rc = fz_inductor(p, err); break;
	case TIR_FUSE_TVM: rc = fz_tvm(p, err); break;
	case TIR_FUSE_EAGER: rc = fz_eager(p, err); break;
	case TIR_FUSE_MEASURED:
		rc = tir_fail(err, "fuse: a measured plan is decided by tuning its kernels "
			      "(tirctl tune --fusion measured), not planned alone");
		break;
	default: rc = tir_fail(err, "fuse: unknown mode %d", (int)mode); break;
	}
	if (rc) {
		tir_fusion_plan_free(p);
		return NULL;
	}
	return p;
}

int tir_fusion_plan_kernels(const tir_fusion_plan *p)
{
	return p ? p->nkernels : 0;
}

int tir_fusion_kernel_members(const tir_fusion_plan *p, int k)
{
	int n = 0;
	for (int i = 0; p && k >= 0 && k < p->nkernels && i < p->g->nnodes; i++)
		n += p->k[k].members[i] != 0;
	return n;
}

tir_fusion_plan *tir_fusion_plan_split(const tir_fusion_plan *p, const unsigned char *split,
				       tir_fuse_mode m, tir_error *err)
{
	tir_fusion_plan *q = fz_plan_new(p->w, m, err);
	if (!q)
		return NULL;
	memcpy(q->realize, p->realize, (size_t)p->g->nnodes);
	int *group_of = xmalloc(sizeof *group_of * (size_t)(p->g->nnodes + 1));
	int n = 0;
	for (int i = 0; i < p->g->nnodes; i++)
		group_of[i] = -1;
	for (int k = 0; k < p->nkernels; k++) {
		for (int i = 0; i < p->g->nnodes; i++)
			if (p->k[k].members[i])
				group_of[i] = split && split[k] ? n++ : n;
		if (!(split && split[k]))
			n++;
	}
	int rc = fz_plan_finish(q, group_of, err);
	free(group_of);
	if (rc) {
		tir_fusion_plan_free(q);
		return NULL;
	}
	return q;
}

bool fz_plan_same(const tir_fusion_plan *p, const tir_fusion_plan *q)
{
	if (p->g != q->g || p->nkernels != q->nkernels)
		return false;
	for (int k = 0; k < p->nkernels; k++)
		if (memcmp(p->k[k].members, q->k[k].members, (size_t)p->g->nnodes))
			return false;
	return true;
}

int tir_fusion_plan_alternatives(const tir_workload *w, tir_fusion_plan **out, int max,
				 tir_error *err)
{
	if (max < 0)
		return tir_fail(err, "fuse: alternatives: a negative count");
	return fz_inductor_alternatives(w, out, max, err);
}

int tir_fusion_kernel_within(const tir_fusion_plan *p, int k, const tir_fusion_plan *p2, int k2)
{
	if (!p || !p2 || k < 0 || k >= p->nkernels || k2 < 0 || k2 >= p2->nkernels ||
	    p->g != p2->g)
		return 0;
	for (int i = 0; i < p->g->nnodes; i++)
		if (p->k[k].members[i] && !p2->k[k2].members[i])
			return 0;
	return 1;
}

const char *tir_fusion_kernel_name(const tir_fusion_plan *p, int k)
{
	return p && k >= 0 && k < p->nkernels ? p->k[k].name : NULL;
}

tir_program *tir_fusion_kernel_program(const tir_fusion_plan *p, int k, tir_error *err)
{
	if (!p || k < 0 || k >= p->nkernels) {
		tir_fail(err, "fuse: no kernel %d", k);
		return NULL;
	}
	return tir_graph_kernel(p->w, p->realize, p->k[k].members, err);
}

char *tir_fusion_kernel_json(const tir_fusion_plan *p, int k)
{
	if (!p || k < 0 || k >= p->nkernels)
		return NULL;
	const tir_graph *g = p->g;
	const fz_kernel *kn = &p->k[k];
	int nv = g->ninputs + g->nnodes;
	cJSON *whole = graph_canonical(g);
	cJSON *wnodes = cJSON_GetObjectItemCaseSensitive(whole, "nodes");
	cJSON *inputs = cJSON_CreateObject(), *nodes = cJSON_CreateArray(),
	      *outputs = cJSON_CreateArray();
	unsigned char *read = xcalloc((size_t)nv + 1, 1);
	for (int i = 0; i < g->nnodes; i++) {
		if (!kn->nodes[i])
			continue;
		const tir_gvalue *x = &g->v[g->ninputs + i];
		for (int j = 0; j < x->nargs; j++)
			if (x->arg[j] >= 0 && (x->arg[j] < g->ninputs || !kn->nodes[x->arg[j] - g->ninputs]))
				read[x->arg[j]] = 1;
	}
	for (int v = 0; v < nv; v++) {
		if (!read[v])
			continue;
		const tir_gvalue *x = &g->v[v];
		cJSON *in = cJSON_CreateObject(), *shape = cJSON_CreateArray();
		for (int d = 0; d < x->ndim; d++)
			cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)x->shape[d]));
		cJSON_AddStringToObject(in, "dtype", dtype_name(x->dtype));
		cJSON_AddItemToObject(in, "shape", shape);
		cJSON_AddItemToObject(inputs, x->name, in);
	}
	for (int i = 0; i < g->nnodes; i++)
		if (kn->nodes[i])
			cJSON_AddItemToArray(nodes, cJSON_Duplicate(cJSON_GetArrayItem(wnodes, i), 1));
	/* outputs: the graph's (in its order) that are members, then members
	 * read outside the kernel */
	for (int o = 0; o < g->noutputs; o++)
		if (kn->members[g->outputs[o] - g->ninputs])
			cJSON_AddItemToArray(outputs, cJSON_CreateString(g->v[g->outputs[o]].name));
	for (int i = 0; i < g->nnodes; i++) {
		const tir_gvalue *x = &g->v[g->ninputs + i];
		if (!kn->members[i] || x->output >= 0)
			continue;
		bool outside = false;
		for (int r = 0; r < g->nnodes && !outside; r++) {
			const tir_gvalue *y = &g->v[g->ninputs + r];
			for (int j = 0; y->live && !kn->nodes[r] && j < y->nargs; j++)
				outside |= y->arg[j] == g->ninputs + i;
		}
		if (outside)
			cJSON_AddItemToArray(outputs, cJSON_CreateString(x->name));
	}
	free(read);
	cJSON *doc = cJSON_CreateObject();
	cJSON_AddItemToObject(doc, "inputs", inputs);
	cJSON_AddItemToObject(doc, "nodes", nodes);
	cJSON_AddStringToObject(doc, "op", "graph");
	cJSON_AddItemToObject(doc, "outputs", outputs);
	char *s = cJSON_PrintUnformatted(doc);
	cJSON_Delete(doc);
	cJSON_Delete(whole);
	return s;
}

static cJSON *node_names(const tir_fusion_plan *p, const unsigned char *set)
{
	cJSON *a = cJSON_CreateArray();
	for (int i = 0; i < p->g->nnodes; i++)
		if (set[i])
			cJSON_AddItemToArray(a, cJSON_CreateString(p->g->v[p->g->ninputs + i].name));
	return a;
}

char *tir_fusion_plan_json(const tir_fusion_plan *p)
{
	const tir_graph *g = p->g;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "mode", tir_fuse_mode_name(p->mode));
	cJSON *ks = cJSON_AddArrayToObject(j, "kernels");
	for (int i = 0; i < p->nkernels; i++) {
		cJSON *k = cJSON_CreateObject();
		cJSON_AddStringToObject(k, "name", p->k[i].name);
		cJSON_AddItemToObject(k, "nodes", node_names(p, p->k[i].nodes));
		cJSON_AddNumberToObject(k, "read_bytes", (double)p->k[i].read_bytes);
		cJSON_AddNumberToObject(k, "write_bytes", (double)p->k[i].write_bytes);
		cJSON_AddItemToArray(ks, k);
	}
	cJSON *rj = cJSON_AddArrayToObject(j, "rejected");
	for (int i = 0; i < p->nrejected; i++) {
		cJSON *r = cJSON_CreateObject();
		cJSON *pair = cJSON_AddArrayToObject(r, "nodes");
		cJSON_AddItemToArray(pair, cJSON_CreateString(g->v[g->ninputs + p->rej[i].a].name));
		cJSON_AddItemToArray(pair, cJSON_CreateString(g->v[g->ninputs + p->rej[i].b].name));
		cJSON_AddStringToObject(r, "reason", p->rej[i].reason);
		cJSON_AddItemToArray(rj, r);
	}
	cJSON *dj = cJSON_AddArrayToObject(j, "dropped");
	for (int i = 0; i < g->nnodes; i++)
		if (!g->v[g->ninputs + i].live)
			cJSON_AddItemToArray(dj, cJSON_CreateString(g->v[g->ninputs + i].name));
	cJSON_AddNumberToObject(j, "read_bytes", (double)p->read_bytes);
	cJSON_AddNumberToObject(j, "write_bytes", (double)p->write_bytes);
	char *s = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return s;
}

/* Appends to a growing string. */
typedef struct sbuf { char *s; size_t n, cap; } sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int need = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (b->n + (size_t)need + 1 > b->cap) {
		b->cap = (b->n + (size_t)need + 1) * 2;
		b->s = xrealloc(b->s, b->cap);
	}
	va_start(ap, fmt);
	vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
	va_end(ap);
	b->n += (size_t)need;
}

char *tir_fusion_plan_text(const tir_fusion_plan *p)
{
	const tir_graph *g = p->g;
	sbuf b = { 0 };
	sb_printf(&b, "%s plan: %d kernel%s, %lld bytes read, %lld written\n",
		  tir_fuse_mode_name(p->mode), p->nkernels, p->nkernels == 1 ? "" : "s",
		  (long long)p->read_bytes, (long long)p->write_bytes);
	sb_printf(&b, "%-4s %-40s %12s %12s  %s\n", "#", "kernel", "read_bytes", "write_bytes",
		  "nodes");
	for (int i = 0; i < p->nkernels; i++) {
		sb_printf(&b, "%-4d %-40s %12lld %12lld ", i, p->k[i].name,
			  (long long)p->k[i].read_bytes, (long long)p->k[i].write_bytes);
		for (int n = 0; n < g->nnodes; n++)
			if (p->k[i].nodes[n])
				sb_printf(&b, " %s%s", g->v[g->ninputs + n].name,
					  p->k[i].members[n] ? "" : "*");
		sb_printf(&b, "\n");
	}
	sb_printf(&b, "(* inlined: recomputed where it is read, not stored)\n");
	for (int i = 0; i < g->nnodes; i++)
		if (!g->v[g->ninputs + i].live)
			sb_printf(&b, "dropped: %s (no output depends on it)\n", g->v[g->ninputs + i].name);
	for (int i = 0; i < p->nrejected; i++)
		sb_printf(&b, "not fused: %s + %s: %s\n", g->v[g->ninputs + p->rej[i].a].name,
			  g->v[g->ninputs + p->rej[i].b].name, p->rej[i].reason);
	if (!b.s)
		sb_printf(&b, "%s", "");
	return b.s;
}
