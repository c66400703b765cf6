/*
 * cuda_stream.c — the CUDA runner's stream (stream_start / put / finish),
 * the tuner's path, and run_batch (the same, every candidate put at once).
 *
 * One child (tir_child_stream) measures the candidates one after another as
 * they are put, paying once for what run() pays per candidate — cuInit and
 * the context, the device buffers of the inputs and the outputs (the parent
 * fills the inputs once before forking; candidates of one workload share
 * them, tir_code_same_args checks it, and one that does not runs alone
 * with run() at finish), the events and the L2-flush buffer.  The child is forked
 * before the candidates are built, so put copies each cubin and its code's
 * tables into a MAP_SHARED area mapped at start (one that does not fit
 * runs alone too).  Per
 * candidate: cuModuleLoadData, its kernels, scratch buffers of its own,
 * the outputs set to all-ones, one run, the outputs compared with the
 * reference in the child (the parent computed it before forking), timing
 * only when it matched (a candidate whose first timed call is over 10x the
 * best this child measured is reported from that call: opts.slow_us),
 * cuModuleUnload.  Sharing buffers gives up some of
 * the isolation a child per candidate had, so: every buffer sits between
 * guard zones that are checked after the run (a write past them is CRASH);
 * a wrong result is re-run once on inputs read back and restored, in case
 * an earlier candidate wrote into them unnoticed; and after a fault, a
 * driver-caught hang or an error that a synchronisation still reports (the
 * context is dead: CUDA's errors are sticky) the candidate ends its child
 * and the guard continues in a fresh one.  Errors that leave the context
 * usable (too much shared memory, too many resources) are RUN_ERROR and the
 * child goes on.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "../ir/ir.h"
#include "cuda_runner.h"

#ifdef HAVE_CUDA

/* ---- run_batch (in the children of tir_child_batch) ------------------------------------------- */

/* Every device buffer a candidate can reach sits between two guards of
 * GUARD_BYTES filled with GUARD_BYTE, read back after the run for the
 * output: an out-of-bounds write that lands there is CRASH and ends the
 * child, so it cannot spoil the inputs the next candidates share. */
#define GUARD_BYTES ((size_t)64 << 10)
#define GUARD_BYTE 0xa5

/* An input or the output, which every candidate of the batch shares. */
typedef struct shared_arg {
	const tir_arg_info *info;  /* the first candidate's */
	size_t bytes;
	const void *host;          /* inputs: filled by the parent before the fork */
	CUdeviceptr base;          /* guard, bytes, guard (in the child) */
} shared_arg;

/* A candidate put in the stream: its cubin and its code's tables, copied
 * to the stream's shared data area at `off` — the arguments, the launches,
 * then the image — for the children forked before it was built. */
typedef struct slot {
	size_t off, image_size;
	int sm, nargs, nlaunches;
} slot;

typedef struct cuda_batch {
	/* the parent's, read by the children */
	const slot *slots;         /* [n], shared */
	const unsigned char *data; /* shared */
	const tir_measure_opts *o;
	const double *ref;
	int64_t ref_n;
	shared_arg *sh;            /* the non-scratch arguments, in order */
	int nshared;
	size_t out_bytes;          /* the outputs among them: bytes, elements */
	int64_t out_elems;
	/* the child's */
	cuda_ctx x;                /* the current candidate, for cuda_launch_all and timing */
	int sm;
	CUmodule mod;              /* the current candidate's cubin, or NULL */
	CUdeviceptr *scratch;      /* per argument of the current candidate, or 0 */
	unsigned char *out_raw;    /* the outputs as stored, in argument order */
	double *out_d;             /* and as doubles */
	unsigned char *guard, *pattern;   /* a guard read back; what it must hold */
	unsigned char *readback;   /* an input read back */
	size_t readback_bytes;
	const char *overwritten;   /* the input restore_inputs found changed */
	double best_us;            /* the best median this child measured, 0: none */
} cuda_batch;

/* bytes on the device between two guards; all of it holds the pattern. */
static int guarded_alloc(const cu_api *cu, CUdeviceptr *base, size_t bytes,
			 const char *name, tir_child_report *rep)
{
	size_t total = bytes + 2 * GUARD_BYTES;
	*base = 0;
	CU_TRY(cu->MemAlloc(base, total), "allocating %zu bytes for \"%s\"", bytes, name);
	CU_TRY(cu->MemsetD8(*base, GUARD_BYTE, total), "clearing \"%s\"", name);
	return 0;
}

/* Once per child: the context, the shared buffers with the inputs the
 * parent filled, the host buffers for the checks, the timing's events and
 * flush buffer. */
static int batch_setup(void *ctx, tir_child_report *rep)
{
	cuda_batch *b = ctx;
	cuda_ctx *x = &b->x;
	cu_api *cu = &x->cu;
	int l2 = 0;
	x->o = b->o;
	if (cuda_api_open(cu, b->o->device, &b->sm, &l2, rep))
		return -1;
	b->guard = malloc(GUARD_BYTES);
	b->pattern = malloc(GUARD_BYTES);
	b->out_raw = malloc(b->out_bytes + 1);
	b->out_d = malloc((size_t)b->out_elems * sizeof(double) + 1);
	if (!b->guard || !b->pattern || !b->out_raw || !b->out_d)
		return cuda_out_of_memory(rep, "the outputs");
	memset(b->pattern, GUARD_BYTE, GUARD_BYTES);
	for (int k = 0; k < b->nshared; k++) {
		shared_arg *s = &b->sh[k];
		if (guarded_alloc(cu, &s->base, s->bytes, s->info->name, rep))
			return -1;
		if (s->host)
			CU_TRY(cu->MemcpyHtoD(s->base + GUARD_BYTES, s->host, s->bytes),
			       "copying \"%s\" to the device", s->info->name);
	}
	if (b->o->no_timing)
		return 0;
	cuda_device_turn(cu, true);   /* the launch term is timed */
	int rc = cuda_timing_init(x, l2, rep);
	cuda_device_turn(cu, false);
	return rc;
}

/* Points c's arguments at the shared buffers and at guarded scratch
 * buffers of its own. */
static int bind_args(cuda_batch *b, const tir_code *c, tir_child_report *rep)
{
	cuda_ctx *x = &b->x;
	for (int i = 0, k = 0; i < c->nargs; i++) {
		const tir_arg_info *a = &c->args[i];
		if (a->is_scratch) {
			if (guarded_alloc(&x->cu, &b->scratch[i], cuda_arg_bytes(a), a->name, rep))
				return -1;
			x->dptr[i] = b->scratch[i] + GUARD_BYTES;
		} else {
			x->dptr[i] = b->sh[k++].base + GUARD_BYTES;
		}
		x->params[i] = &x->dptr[i];
	}
	return 0;
}

/* Before a run for the outputs: the outputs all-ones bytes (unwritten
 * elements show as NaN), scratch zeroed. */
static int clear_outputs(cuda_batch *b, const tir_code *c, tir_child_report *rep)
{
	const cu_api *cu = &b->x.cu;
	for (int k = 0; k < b->nshared; k++)
		if (b->sh[k].info->is_output)
			CU_TRY(cu->MemsetD8(b->sh[k].base + GUARD_BYTES, 0xff, b->sh[k].bytes),
			       "clearing the output \"%s\"", b->sh[k].info->name);
	for (int i = 0; i < c->nargs; i++)
		if (b->scratch[i])
			CU_TRY(cu->MemsetD8(b->scratch[i] + GUARD_BYTES, 0,
					    cuda_arg_bytes(&c->args[i])),
			       "clearing \"%s\"", c->args[i].name);
	return 0;
}

/* Both guards of the buffer at base (bytes between them) still hold the
 * pattern, or CRASH naming the buffer. */
static int check_guard(cuda_batch *b, CUdeviceptr base, size_t bytes, const char *name,
		       tir_child_report *rep)
{
	const cu_api *cu = &b->x.cu;
	const CUdeviceptr at[2] = { base, base + GUARD_BYTES + bytes };
	for (int side = 0; side < 2; side++) {
		CU_TRY(cu->MemcpyDtoH(b->guard, at[side], GUARD_BYTES),
		       "reading the guard of \"%s\"", name);
		if (memcmp(b->guard, b->pattern, GUARD_BYTES)) {
			rep->status = TIR_MEASURE_CRASH;
			snprintf(rep->msg, sizeof rep->msg, "cuda: the candidate wrote out "
				 "of bounds, %s \"%s\"", side ? "past the end of" :
				 "before the start of", name);
			return -1;
		}
	}
	return 0;
}

static int check_guards(cuda_batch *b, const tir_code *c, tir_child_report *rep)
{
	for (int k = 0; k < b->nshared; k++)
		if (check_guard(b, b->sh[k].base, b->sh[k].bytes, b->sh[k].info->name, rep))
			return -1;
	for (int i = 0; i < c->nargs; i++)
		if (b->scratch[i] && check_guard(b, b->scratch[i], cuda_arg_bytes(&c->args[i]),
						 c->args[i].name, rep))
			return -1;
	return 0;
}

/* Reads every input back and copies the parent's values over any that
 * changed, naming the first in b->overwritten.  Returns 1 when one had
 * changed, 0 when none had, -1 on a driver error (rep set). */
static int restore_inputs(cuda_batch *b, tir_child_report *rep)
{
	const cu_api *cu = &b->x.cu;
	int changed = 0;
	for (int k = 0; k < b->nshared; k++) {
		const shared_arg *s = &b->sh[k];
		if (!s->host)
			continue;
		if (s->bytes > b->readback_bytes) {
			free(b->readback);
			b->readback_bytes = 0;
			if (!(b->readback = malloc(s->bytes)))
				return cuda_out_of_memory(rep, "reading the inputs back");
			b->readback_bytes = s->bytes;
		}
		CU_TRY(cu->MemcpyDtoH(b->readback, s->base + GUARD_BYTES, s->bytes),
		       "reading \"%s\" back", s->info->name);
		if (!memcmp(b->readback, s->host, s->bytes))
			continue;
		CU_TRY(cu->MemcpyHtoD(s->base + GUARD_BYTES, s->host, s->bytes),
		       "restoring \"%s\"", s->info->name);
		if (!changed)
			b->overwritten = s->info->name;
		changed = 1;
	}
	return changed;
}

/* Runs the current candidate once on the shared inputs and judges its
 * outputs against the reference.  Returns the verdict (rep->msg says why
 * when not OK), or -1 with rep set when the driver failed or the candidate
 * wrote out of bounds. */
static int check_once(cuda_batch *b, const tir_code *c, tir_child_report *rep,
		      double *max_rel_error)
{
	cuda_ctx *x = &b->x;
	const cu_api *cu = &x->cu;
	if (clear_outputs(b, c, rep) || cuda_launch_all(x, rep))
		return -1;
	CU_TRY(cu->CtxSynchronize(), "running the kernels");
	if (check_guards(b, c, rep))
		return -1;
	unsigned char *at = b->out_raw;
	for (int k = 0; k < b->nshared; k++) {
		const shared_arg *s = &b->sh[k];
		if (!s->info->is_output)
			continue;
		CU_TRY(cu->MemcpyDtoH(at, s->base + GUARD_BYTES, s->bytes),
		       "copying the output \"%s\" back", s->info->name);
		at += s->bytes;
	}
	tir_code_outputs_unpack(c, b->out_raw, b->out_d);
	return (int)tir_measure_judge(c, b->ref, b->ref_n, b->out_d, b->out_elems,
				      max_rel_error, rep->msg, sizeof rep->msg);
}

/* check_once, and for a wrong result a second look: the inputs are shared,
 * and an earlier candidate may have written into them beyond the guards
 * without faulting.  Restored, the candidate runs again; if it changes
 * them once more it is the culprit (CRASH, and the child ends). */
static int check_output(cuda_batch *b, const tir_code *c, tir_child_report *rep,
			double *max_rel_error)
{
	int s = check_once(b, c, rep, max_rel_error);
	if (s == TIR_MEASURE_WRONG_RESULT) {
		int changed = restore_inputs(b, rep);
		if (changed < 0)
			return -1;
		if (changed)
			s = check_once(b, c, rep, max_rel_error);
		if (changed && s == TIR_MEASURE_WRONG_RESULT &&
		    (changed = restore_inputs(b, rep)) != 0) {
			if (changed < 0)
				return -1;
			rep->status = TIR_MEASURE_CRASH;
			snprintf(rep->msg, sizeof rep->msg, "cuda: the candidate wrote into "
				 "its input \"%s\"", b->overwritten);
			return -1;
		}
	}
	if (s < 0)
		return -1;
	rep->status = s;
	return s == TIR_MEASURE_OK ? 0 : -1;
}

/* One candidate: its cubin, its kernels and scratch, one checked run, the
 * timing.  Fills rep; 0 when it is OK. */
static int item_run(cuda_batch *b, const tir_artifact *a, const tir_code *c,
		    tir_child_report *rep, double *max_rel_error)
{
	cuda_ctx *x = &b->x;
	const cu_api *cu = &x->cu;
	x->a = a;
	x->c = c;
	x->fn = calloc((size_t)c->nlaunches + 1, sizeof *x->fn);
	x->dptr = calloc((size_t)c->nargs + 1, sizeof *x->dptr);
	x->params = calloc((size_t)c->nargs + 1, sizeof *x->params);
	b->scratch = calloc((size_t)c->nargs + 1, sizeof *b->scratch);
	if (!x->fn || !x->dptr || !x->params || !b->scratch)
		return cuda_out_of_memory(rep, "the arguments");
	CU_TRY(cu->ModuleLoadData(&b->mod, a->image),
	       "loading the cubin for sm_%d on a device of sm_%d", a->sm, b->sm);
	if (cuda_get_kernels(x, b->mod, rep) || bind_args(b, c, rep) || cuda_launch_params(x, rep) ||
	    check_output(b, c, rep, max_rel_error))
		return -1;
	if (b->o->no_timing)
		return 0;
	tir_measure_opts o = *b->o;
	if (b->best_us > 0)
		o.slow_us = 10 * b->best_us;
	if (tir_time_repeats(&o, x, cuda_flush, cuda_timed, rep))
		return -1;
	cuda_add_launch_term(x, rep);
	if (b->best_us <= 0 || rep->median_us < b->best_us)
		b->best_us = rep->median_us;
	return 0;
}

/* What item_run took: the cubin, the scratch buffers, the tables.  Errors
 * are ignored: a context they would report is probed next. */
static void item_release(cuda_batch *b)
{
	cuda_graph_release(&b->x);
	cuda_ctx *x = &b->x;
	const cu_api *cu = &x->cu;
	for (int i = 0; b->scratch && i < x->c->nargs; i++)
		if (b->scratch[i])
			cu->MemFree(b->scratch[i]);
	if (b->mod)
		cu->ModuleUnload(b->mod);
	b->mod = NULL;
	free(b->scratch);
	free(x->fn);
	free(x->dptr);
	free(x->params);
	free(x->lparams);
	free(x->tparams);
	free(x->tmaps);
	x->lparams = NULL;
	x->tparams = NULL;
	x->tmaps = NULL;
	b->scratch = NULL;
	x->fn = NULL;
	x->dptr = NULL;
	x->params = NULL;
}

/* Whether the child must end after this candidate: after a fault or a hang
 * the driver caught, every later call fails (CUDA's sticky errors), and a
 * CRASH may have spoilt the shared buffers; after another error, whether a
 * synchronisation still fails. */
static bool item_must_end(cuda_batch *b, const tir_child_report *rep)
{
	if (rep->status == TIR_MEASURE_CRASH || rep->status == TIR_MEASURE_TIMEOUT)
		return true;
	return rep->status == TIR_MEASURE_RUN_ERROR &&
	       b->x.cu.CtxSynchronize() != CUDA_SUCCESS;
}

static int batch_item(void *ctx, int i, tir_child_report *rep, double *max_rel_error)
{
	cuda_batch *b = ctx;
	const slot *sl = &b->slots[i];
	const unsigned char *at = b->data + sl->off;
	tir_code c = { .nargs = sl->nargs, .args = (tir_arg_info *)(uintptr_t)at,
		       .nlaunches = sl->nlaunches };
	at += (size_t)sl->nargs * sizeof(tir_arg_info);
	c.launches = (tir_launch *)(uintptr_t)at;
	at += (size_t)sl->nlaunches * sizeof(tir_launch);
	tir_artifact a = { .runner = &tir_runner_cuda, .image = (char *)(uintptr_t)at,
			   .image_size = sl->image_size, .sm = sl->sm };
	cuda_device_turn(&b->x.cu, true);
	if (item_run(b, &a, &c, rep, max_rel_error) == 0) {
		rep->status = TIR_MEASURE_OK;
		rep->msg[0] = '\0';
	}
	item_release(b);
	cuda_device_turn(&b->x.cu, false);
	return item_must_end(b, rep) ? TIR_BATCH_END : 0;
}

/* ---- the measuring stream ------------------------------------------------------------------ */

struct tir_run_stream {
	int n;
	tir_measure_opts o;
	const tir_code *first;     /* the argument list every streamed candidate shares */
	const double *ref;
	int64_t ref_n;
	cuda_batch b;              /* what the children inherit */
	tir_child_stream *cs;      /* NULL: no child (nothing to measure, or setup failed) */
	/* the shared mapping: n slots, then the data area */
	void *map;
	size_t map_bytes, data_bytes;
	slot *slots;
	unsigned char *data;
	pthread_mutex_t lock;      /* used, alone_a / alone_c */
	size_t used;
	/* put but run on their own at finish: other arguments, or no room */
	const tir_artifact **alone_a;
	const tir_code **alone_c;
	char fail[256];            /* start failed: every candidate's message */
};

/* The shared data area: room for the tables and cubins of a batch (most
 * cubins are tens to hundreds of KiB); pages are used only when written. */
static size_t stream_data_bytes(int n)
{
	return ((size_t)64 << 20) + (size_t)n * ((size_t)2 << 20);
}

static size_t round16(size_t x)
{
	return (x + 15) & ~(size_t)15;
}

tir_run_stream *cuda_stream_start(int n, const tir_code *first,
				  const tir_measure_opts *opts, const double *ref,
				  int64_t ref_n)
{
	tir_run_stream *s = xcalloc(1, sizeof *s);
	s->n = n > 0 ? n : 0;
	s->o = tir_measure_opts_default(opts);
	s->first = first;
	s->ref = ref;
	s->ref_n = ref_n;
	pthread_mutex_init(&s->lock, NULL);
	s->alone_a = xcalloc((size_t)s->n + 1, sizeof *s->alone_a);
	s->alone_c = xcalloc((size_t)s->n + 1, sizeof *s->alone_c);
	if (s->n == 0 || !first)
		return s;
	s->data_bytes = stream_data_bytes(s->n);
	size_t table = round16((size_t)s->n * sizeof(slot));
	s->map_bytes = table + s->data_bytes;
	s->map = mmap(NULL, s->map_bytes, PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (s->map == MAP_FAILED) {
		s->map = NULL;
		snprintf(s->fail, sizeof s->fail, "cuda: cannot map %zu bytes for the "
			 "candidates: %s", s->map_bytes, strerror(errno));
		return s;
	}
	s->slots = s->map;
	s->data = (unsigned char *)s->map + table;

	cuda_batch *b = &s->b;
	*b = (cuda_batch){ .slots = s->slots, .data = s->data, .o = &s->o, .ref = ref,
			   .ref_n = ref_n };
	b->sh = xcalloc((size_t)first->nargs + 1, sizeof *b->sh);
	for (int i = 0; i < first->nargs; i++) {
		const tir_arg_info *ai = &first->args[i];
		if (ai->is_scratch)
			continue;
		shared_arg *sa = &b->sh[b->nshared];
		sa->info = ai;
		sa->bytes = cuda_arg_bytes(ai);
		if (ai->is_output) {
			b->out_bytes += sa->bytes;
			b->out_elems += ai->elems;
		} else {
			void *host = xmalloc(sa->bytes + 1);
			tir_measure_fill(first, i, s->o.seed, host);
			sa->host = host;
		}
		b->nshared++;
	}
	s->cs = tir_child_stream_start(s->n, s->o.timeout_s, batch_setup, batch_item, b);
	return s;
}

/* Copies a's cubin and c's tables into the data area; false when there is
 * no room left. */
static bool stream_copy(tir_run_stream *s, int i, const tir_artifact *a, const tir_code *c)
{
	size_t tables = (size_t)c->nargs * sizeof(tir_arg_info) +
			(size_t)c->nlaunches * sizeof(tir_launch);
	size_t need = round16(tables + a->image_size);
	pthread_mutex_lock(&s->lock);
	size_t off = s->used;
	bool room = s->data && need <= s->data_bytes - off;
	if (room)
		s->used += need;
	pthread_mutex_unlock(&s->lock);
	if (!room)
		return false;
	unsigned char *at = s->data + off;
	memcpy(at, c->args, (size_t)c->nargs * sizeof(tir_arg_info));
	at += (size_t)c->nargs * sizeof(tir_arg_info);
	memcpy(at, c->launches, (size_t)c->nlaunches * sizeof(tir_launch));
	at += (size_t)c->nlaunches * sizeof(tir_launch);
	memcpy(at, a->image, a->image_size);
	s->slots[i] = (slot){ .off = off, .image_size = a->image_size, .sm = a->sm,
			      .nargs = c->nargs, .nlaunches = c->nlaunches };
	return true;
}

void cuda_stream_put(tir_run_stream *s, int i, const tir_artifact *a,
		     const tir_code *c)
{
	if (i < 0 || i >= s->n || !a || !a->image)
		return;
	if (s->cs && tir_code_same_args(s->first, c) && stream_copy(s, i, a, c)) {
		tir_child_stream_put(s->cs, i);
		return;
	}
	pthread_mutex_lock(&s->lock);
	s->alone_a[i] = a;
	s->alone_c[i] = c;
	pthread_mutex_unlock(&s->lock);
}

/* A candidate that could not be streamed: a child of its own (run), then
 * the check. */
static void run_alone(const tir_artifact *a, const tir_code *c, const tir_measure_opts *o,
		      const double *ref, int64_t ref_n, tir_measure_result *r)
{
	if (cuda_run(a, c, o, r) == 0)
		r->status = tir_measure_judge(c, ref, ref_n, r->output, r->out_elems,
					      &r->max_rel_error, r->msg, sizeof r->msg);
	free(r->output);
	r->output = NULL;
	r->out_elems = 0;
}

int cuda_stream_finish(tir_run_stream *s, tir_measure_result *r)
{
	int children = 0;
	if (s->cs) {
		children = tir_child_stream_finish(s->cs, r);
	} else {
		for (int i = 0; i < s->n; i++) {
			memset(&r[i], 0, sizeof r[i]);
			r[i].max_rel_error = -1;
			r[i].status = TIR_MEASURE_RUN_ERROR;
			snprintf(r[i].msg, sizeof r[i].msg, "%s",
				 s->fail[0] ? s->fail : "cuda: nothing built");
		}
	}
	for (int i = 0; i < s->n; i++)
		if (s->alone_a[i]) {
			run_alone(s->alone_a[i], s->alone_c[i], &s->o, s->ref, s->ref_n, &r[i]);
			children++;
		}
	for (int k = 0; k < s->b.nshared; k++)
		free((void *)s->b.sh[k].host);
	free(s->b.sh);
	if (s->map)
		munmap(s->map, s->map_bytes);
	free(s->alone_a);
	free(s->alone_c);
	pthread_mutex_destroy(&s->lock);
	free(s);
	return children;
}

#else /* !HAVE_CUDA */

struct tir_run_stream {
	int n;
};

tir_run_stream *cuda_stream_start(int n, const tir_code *first,
				  const tir_measure_opts *opts, const double *ref,
				  int64_t ref_n)
{
	tir_run_stream *s = xcalloc(1, sizeof *s);
	s->n = n;
	return s;
}

void cuda_stream_put(tir_run_stream *s, int i, const tir_artifact *a,
		     const tir_code *c)
{
}

int cuda_stream_finish(tir_run_stream *s, tir_measure_result *r)
{
	for (int i = 0; i < s->n; i++) {
		memset(&r[i], 0, sizeof r[i]);
		r[i].max_rel_error = -1;
		r[i].status = TIR_MEASURE_RUN_ERROR;
		snprintf(r[i].msg, sizeof r[i].msg, "cuda: libtir was built without CUDA");
	}
	free(s);
	return 0;
}

#endif

/* run_batch: the stream with every candidate put at once. */
int cuda_run_batch(int n, const tir_artifact *const *a, const tir_code *const *c,
		   const tir_measure_opts *opts, const double *ref, int64_t ref_n,
		   tir_measure_result *r)
{
	const tir_code *first = NULL;
	for (int i = 0; i < n && !first; i++)
		if (a[i] && a[i]->image)
			first = c[i];
	tir_run_stream *s = cuda_stream_start(n, first, opts, ref, ref_n);
	for (int i = 0; i < n; i++)
		cuda_stream_put(s, i, a[i], c[i]);
	return cuda_stream_finish(s, r);
}
