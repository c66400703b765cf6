/*
 * gpu.c — the GPU sketches (MetaSchedule style), for CUDA targets.
 *
 * Each sketch schedules a fresh schedule through the public primitives and
 * draws every open decision with a sampling instruction, so the trace
 * records it, a mutated decision replays, and nothing here depends on an
 * operator's name: the heavy sketches see each heavy block of the program
 * (rules.c's rule, in post-order), the injective producers it reads (pad)
 * and the consumers of its output (epilogue); what they leave (another
 * consumer, row reductions, pointwise blocks) rows.c schedules with
 * gpu_rows.c, every block bound to threads (sketch_gpu_heavy).  Programs
 * without a heavy block get gpu-rows / gpu-rows-thread (a thread block or a
 * thread per row) or, without any reduction, gpu-pointwise.
 *
 *   gpu-tile-autocopy   multi-level tiling SSSRRSRS of the reduction block:
 *                       every spatial loop split in 5 (S0 blockIdx, S1 vthread,
 *                       S2 threadIdx, S3, S4), every reduction loop in 3
 *                       (R0, R1, R2), ordered S0 S1 S2 R0 R1 S3 R2 S4, the
 *                       levels S0/S1/S2 fused and bound to blockIdx.x /
 *                       vthread.x / threadIdx.x (first, a sampled split-K:
 *                       rfactor of the longest reduction iterator into 1-16
 *                       parts, a spatial loop bound to blocks whole, combined
 *                       by a kernel after with the block's reducer: a sum, a
 *                       max or a min); the accumulator in registers
 *                       (cache_write "local" + reverse_compute_at at the
 *                       threadIdx loop, the reduction's init decomposed out
 *                       of R0, every loop over the tile unrolled so its
 *                       indices are constants) with the epilogue inlined into
 *                       the write-back; AutoCopy stages: a cache_read "shared" of
 *                       each input placed at a sampled reduction-tile loop (last
 *                       R0 or last R1), a padding producer inlined into its
 *                       stage, a cooperative fetch (the stage's loops fused,
 *                       split [outer, threads, vector], the thread part bound to
 *                       threadIdx.x, the vector part vectorized with a sampled
 *                       width of 1, 2 or 4 elements, at most 16 bytes) and a
 *                       sampled storage_align offset against bank conflicts;
 *                       a sampled unroll depth: "auto_unroll_max_step" on the
 *                       blockIdx loop (cuda.c unrolls every loop whose fully
 *                       unrolled body is at most that many copies), the
 *                       annotation taking the sampled RV so a mutated decision
 *                       replays into the code.
 *   gpu-tile            the same tiling without shared stages (pad inlined into
 *                       the compute block): for small or memory-bound cases.
 *   gpu-cross-thread    for reductions whose spatial extent cannot fill the GPU
 *                       (see xthread_applies): the spatial loops fused and bound
 *                       to blockIdx.x (a sampled number of outputs per block),
 *                       the reduction loops fused and split [inner threads,
 *                       outer], the threads bound to threadIdx.x, the block
 *                       annotated "cross_thread_reduction" (codegen/cuda.c emits
 *                       per-thread partial sums and a warp-shuffle / shared-memory
 *                       tree; verify/threading.c accepts exactly that pattern);
 *                       the epilogue, if any, a kernel of its own.
 *
 * Tile sizes are sample_perfect_tile instructions whose decisions are drawn
 * here jointly over all spatial loops (the prims' own draw is per loop): a
 * GPU tiling is good only when the threads of a block (the product of the S2
 * factors) are at most 1024 and preferably a multiple of 32, and the
 * registers a thread accumulates into (S1 S3 S4) stay few.  Draws that
 * break the soft limits are redrawn a bounded number of times; what is left
 * (shared memory over the limit, a shape without such a factorisation) is
 * filtered by validation, the caller resampling with another seed.
 */
#include <string.h>
#include "sketch.h"

#define TRY(call, what) do { if ((call) < 0) { \
	tir_error e_ = *err; \
	return tir_fail(err, "%s: %s", what, e_.msg); } } while (0)

/* Spatial levels and reduction levels of the multi-level tiling. */
#define NS_LEVELS 5
#define NR_LEVELS 3
/* Soft limits of a spatial tiling (see draw_tiles). */
#define MAX_THREADS 1024
#define MAX_VTHREADS 1        /* see the note at draw_tiles */
#define MAX_REGS 64          /* accumulators per thread: S1 * S3 * S4 */
#define MAX_RTILE 64         /* reduction steps staged per R0 iteration: R1 * R2 */
#define MAX_R2 8             /* unrolled reduction steps: the product of the R2 */
#define DRAWS 256
#define SPLIT_K_MIN_CHUNK 32 /* reduction steps per part of a split-K */

/* Cross-thread reduction: used when the spatial extent is below
 * XTHREAD_OUTPUTS_PER_SM outputs per SM (a GPU of S SMs keeps ~2048 threads
 * per SM resident; with fewer than 256 outputs per SM, one thread per output
 * leaves most of it idle, so threads go to the reduction instead) and the
 * reduction has at least XTHREAD_MIN_REDUCE steps to share. */
#define XTHREAD_OUTPUTS_PER_SM 256
#define XTHREAD_MIN_REDUCE 16

/* ---- the program's structure ------------------------------------------------ */

/* The loops around the reduction block by the kind of iterator each feeds
 * (sketch.h's sketch_nest). */
static int64_t product(const int64_t *x, int n)
{
	int64_t p = 1;
	for (int i = 0; i < n; i++)
		p *= x[i];
	return p;
}

/* ---- sampling ----------------------------------------------------------------- */

/* How far a spatial tiling is from what a GPU wants (0: all soft limits
 * met).  f[i][level]. */
static int64_t spatial_penalty(int ns, int64_t (*f)[NS_LEVELS])
{
	int64_t threads = 1, vthreads = 1, regs = 1;
	for (int i = 0; i < ns; i++) {
		threads *= f[i][2];
		vthreads *= f[i][1];
		regs *= f[i][1] * f[i][3] * f[i][4];
	}
	int64_t pen = 0;
	if (threads > MAX_THREADS)
		pen += 1000000 + threads;
	if (threads % 32)
		pen += 1000 + (threads < 32 ? 32 - threads : 0) * 10;
	if (vthreads > MAX_VTHREADS)
		pen += 100 * vthreads;
	if (regs > MAX_REGS)
		pen += regs;
	return pen;
}

/* Draws the tiling decisions of the spatial loops (5 levels) and reduction
 * loops (3 levels) jointly: the best of up to DRAWS draws by the soft
 * limits above, the first with none broken.  The vthread level is kept at 1
 * where possible (MAX_VTHREADS): CUDA code runs vthread loops as serial
 * loops around the threadIdx level, so each repeats the shared-memory
 * fetches, and lowering compacts the local accumulator over the vthread
 * box; mutation may still explore it. */
static void draw_tiles(tir_sched *s, const sketch_nest *n,
		       int64_t (*sf)[NS_LEVELS], int64_t (*rf)[NR_LEVELS])
{
	int64_t best = -1;
	int64_t cur[TIR_MAX_IO][NS_LEVELS];
	for (int k = 0; k < DRAWS && best != 0; k++) {
		for (int i = 0; i < n->ns; i++) {
			sched_draw_factors(s, n->sext[i], NS_LEVELS, cur[i]);
			/* the innermost level is a short register tile */
			while (cur[i][4] > 4) {
				int64_t d = 2;
				while (cur[i][4] % d)
					d++;
				cur[i][4] /= d;
				cur[i][3] *= d;
			}
		}
		int64_t pen = spatial_penalty(n->ns, cur);
		if (best < 0 || pen < best) {
			best = pen;
			memcpy(sf, cur, sizeof(int64_t) * NS_LEVELS * (size_t)n->ns);
		}
	}
	/* R2 loops are unrolled inside the register tile: their product over
	 * every reduction loop stays at most MAX_R2 (a convolution has three) */
	int64_t r2 = 1;
	for (int i = 0; i < n->nr; i++) {
		int64_t r[NR_LEVELS];
		for (int k = 0; k < DRAWS; k++) {
			sched_draw_factors(s, n->rext[i], NR_LEVELS, r);
			if (r[1] * r[2] <= MAX_RTILE && r2 * r[2] <= MAX_R2)
				break;
		}
		if (r[1] * r[2] > MAX_RTILE || r2 * r[2] > MAX_R2) {   /* keep the tiles small */
			r[0] = n->rext[i];
			r[1] = r[2] = 1;
		}
		r2 *= r[2];
		memcpy(rf[i], r, sizeof r);
	}
}

/* sample_perfect_tile with the decision drawn above; the outputs are the
 * integer RVs of the factors. */
static int sample_tile(tir_sched *s, int loop, int levels, const int64_t *decision,
		       int *out, tir_error *err)
{
	tir_inst in;
	memset(&in, 0, sizeof in);
	in.op = PRIM_SAMPLE_PERFECT_TILE;
	in.in[in.nin++] = TIR_RV(loop);
	in.attr[0] = levels;
	in.attr[1] = 0;
	in.nattr = 2;
	in.ndecision = levels;
	for (int i = 0; i < levels; i++)
		in.decision[i] = decision[i];
	if (sched_apply(s, &in, err))
		return -1;
	for (int i = 0; i < in.nout; i++)
		out[i] = in.out[i];
	return 0;
}

/* sample_categorical over `cands` (uniform); returns the chosen value or -1. */
static int64_t sample_value(tir_sched *s, int n, const int64_t *cands, tir_error *err)
{
	int rv = tir_sample_categorical(s, n, cands, NULL, err);
	if (rv < 0)
		return -1;
	return tir_sched_int(s, rv);
}

/* ---- shared steps --------------------------------------------------------------- */

static int inline_producers(tir_sched *s, const sketch_blocks *g, tir_error *err)
{
	for (int i = 0; i < g->nproducers; i++) {
		int b;
		TRY(b = tir_get_block(s, g->producer[i]->name, err), "get producer");
		TRY(tir_compute_inline(s, b, err), "inline producer");
	}
	return 0;
}


/* The index of the read region of block `b` that reads buffer `name`. */
static int read_index(tir_sched *s, int block, const char *name, tir_error *err)
{
	const tir_block *b = sched_block(s, TIR_RV(block), err);
	if (!b)
		return -1;
	for (int i = 0; i < b->nreads; i++)
		if (!strcmp(b->reads[i].buf->name, name))
			return i;
	return tir_fail(err, "block \"%s\" does not read \"%s\"", b->name, name);
}

/* Number of loops enclosing loop `rv`, itself included. */
static int loop_depth(tir_sched *s, int rv)
{
	int d = 0;
	for (const tir_stmt *q = s->rv[rv].loop; q && q->kind == STMT_FOR; q = q->parent)
		d++;
	return d;
}

/* sample_compute_location of block `copy` with the decision drawn here
 * among the loops `pref` (RVs); the search may mutate it to any legal
 * location.  Returns the chosen loop's RV. */
static int sample_location(tir_sched *s, int copy, int npref, const int *pref,
			   tir_error *err)
{
	const tir_block *b = sched_block(s, TIR_RV(copy), err);
	if (!b)
		return -1;
	tir_stmt *cand[TIR_MAX_IO * 4];
	int n = sched_compute_locations(s->p, b, TIR_LOC_COMPUTE_AT, cand, TIR_MAX_IO * 4, err);
	if (n < 0)
		return -1;
	if (n > TIR_MAX_IO * 4)
		n = TIR_MAX_IO * 4;
	const tir_stmt *want = s->rv[pref[sched_rand(s) % (uint64_t)npref]].loop;
	int k = -1;
	for (int i = 0; i < n; i++)
		if (cand[i] == want)
			k = i;
	if (k < 0)
		return tir_fail(err, "loop \"%s\" is not a place to compute block \"%s\" at",
				want->var->name, b->name);
	tir_inst in;
	memset(&in, 0, sizeof in);
	in.op = PRIM_SAMPLE_COMPUTE_LOCATION;
	in.in[in.nin++] = TIR_RV(copy);
	in.ndecision = 1;
	in.decision[0] = k;
	if (sched_apply(s, &in, err))
		return -1;
	return in.out[0];
}

/* AutoCopy stage of one input: cache_read "shared" at a sampled location
 * among the loops `at`, producers of the buffer inlined into the stage,
 * cooperative fetch over `threads` threads with a sampled vector width,
 * sampled storage_align. */
static int autocopy(tir_sched *s, int block, const char *buf, const sketch_blocks *g,
		    int nat, const int *at, int64_t threads, tir_error *err)
{
	int ri, copy, loc;
	TRY(ri = read_index(s, block, buf, err), "autocopy");
	TRY(copy = tir_cache_read(s, block, ri, "shared", err), "cache_read");
	TRY(loc = sample_location(s, copy, nat, at, err), "stage location");
	TRY(tir_compute_at(s, copy, loc, err), "compute_at");
	for (int i = 0; i < g->nproducers; i++)
		if (!strcmp(g->producer[i]->store->name, buf)) {
			int pb;
			TRY(pb = tir_get_block(s, g->producer[i]->name, err), "get producer");
			TRY(tir_compute_inline(s, pb, err), "inline producer into its stage");
		}
	const tir_block *cb = sched_block(s, TIR_RV(copy), err);
	if (!cb)
		return -1;
	int ebytes = dtype_bytes(cb->store->dtype), ndim = cb->store->ndim;

	int l[TIR_MAX_IO], nl, depth = loop_depth(s, loc);
	TRY(nl = tir_get_loops(s, copy, l, TIR_MAX_IO, err), "copy loops");
	int64_t vcands[3] = { 1, 2, 4 }, vec;
	int nv = 0, vrv;
	while (nv < 3 && vcands[nv] * ebytes <= 16)
		nv++;
	TRY(vrv = tir_sample_categorical(s, nv, vcands, NULL, err), "vector width");
	vec = tir_sched_int(s, vrv);
	if (nl > depth) {
		int f, o[3];
		TRY(f = tir_fuse(s, nl - depth, l + depth, err), "fuse copy loops");
		tir_int fac[3] = { TIR_LIT(0), TIR_LIT(threads), TIR_RV(vrv) };
		TRY(tir_split(s, f, 3, fac, o, err), "split copy");
		TRY(tir_bind(s, o[1], "threadIdx.x", err), "bind copy");
		TRY(tir_vectorize(s, o[2], err), "vectorize copy");
	}
	/* padding of the second-innermost axis, in multiples of the vector width
	 * so vector accesses stay aligned; 128 bytes is one row of the 32 banks */
	int64_t acands[4] = { 0, 1, 2, 4 };
	int64_t k;
	TRY(k = sample_value(s, 4, acands, err), "storage_align offset");
	int64_t factor = 128 / ebytes;
	if (k > 0 && ndim >= 2 && k * vec < factor)
		TRY(tir_storage_align(s, copy, 0, ndim - 2, (int)factor, (int)(k * vec), err),
		    "storage_align");
	return 0;
}

/* ---- multi-level tiling ------------------------------------------------------------ */

/* Unrolls every serial loop of `block` strictly under loop `at`. */
static int unroll_under(tir_sched *s, int block, int at, tir_error *err)
{
	int l[TIR_MAX_IO], n;
	TRY(n = sketch_loops_under(s, block, at, l, err), "loops");
	for (int i = 0; i < n; i++)
		if (s->rv[l[i]].loop->loop_kind == LOOP_SERIAL)
			TRY(tir_unroll(s, l[i], err), "unroll");
	return 0;
}

int sketch_gpu_tile_block(tir_sched *s, const tir_target *t, bool stages,
			  const tir_block *heavy, tir_error *err)
{
	sketch_blocks g;
	sketch_find_blocks(s->p, heavy, &g);
	const tir_block *red = heavy;
	if (!stages)
		TRY(inline_producers(s, &g, err), "gpu-tile");
	/* the names of the buffers to stage: the reduction block's inputs */
	int nin = 0;
	const char *inputs[8];
	for (int i = 0; i < red->nreads && nin < 8; i++)
		if (red->reads[i].buf != red->store)
			inputs[nin++] = red->reads[i].buf->name;
	const char *rname = red->name;
	int b;
	TRY(b = tir_get_block(s, rname, err), "get reduction block");
	/* split-K along the longest reduction iterator: the parts become a
	 * spatial loop tiled like the others, their sum a kernel after */
	const char *sum = NULL;
	int longest = -1;
	for (int i = 0; i < red->niters; i++)
		if (red->iters[i].kind == ITER_REDUCE &&
		    (longest < 0 || red->iters[i].extent > red->iters[longest].extent))
			longest = i;
	if (longest >= 0 && red->init) {
		int parts;
		TRY(parts = sketch_split_k(s, b, longest, SPLIT_K_MIN_CHUNK,
						   SKETCH_SPLIT_K_OUTPUTS, err), "split-K");
		for (int i = 0; parts > 1 && i < s->p->nblocks; i++) {
			const tir_block *q = s->p->blocks[i];
			if (q->stmt && q != red && block_is_reduction(q) && block_reads(q, red->store))
				sum = q->name;
		}
	}
	sketch_nest n;
	TRY(sketch_nest_of(s, b, &n, err), "loops");
	if (n.ns == 0)
		return tir_fail(err, "gpu sketch: block \"%s\" has no spatial loop", rname);

	int64_t sf[TIR_MAX_IO][NS_LEVELS], rf[TIR_MAX_IO][NR_LEVELS];
	draw_tiles(s, &n, sf, rf);
	if (sum) {
		/* the parts (the outermost loop) go to blocks whole: a part
		 * inside a thread's tile would stage every part's inputs */
		sf[0][0] = n.sext[0];
		for (int k = 1; k < NS_LEVELS; k++)
			sf[0][k] = 1;
	}
	int sl[NS_LEVELS][TIR_MAX_IO], rl[NR_LEVELS][TIR_MAX_IO];
	for (int i = 0; i < n.ns; i++) {
		int v[NS_LEVELS], o[NS_LEVELS];
		TRY(sample_tile(s, n.spatial[i], NS_LEVELS, sf[i], v, err), "sample spatial tile");
		tir_int fac[NS_LEVELS];
		for (int k = 0; k < NS_LEVELS; k++)
			fac[k] = TIR_RV(v[k]);
		TRY(tir_split(s, n.spatial[i], NS_LEVELS, fac, o, err), "split spatial");
		for (int k = 0; k < NS_LEVELS; k++)
			sl[k][i] = o[k];
	}
	for (int i = 0; i < n.nr; i++) {
		int v[NR_LEVELS], o[NR_LEVELS];
		TRY(sample_tile(s, n.reduce[i], NR_LEVELS, rf[i], v, err), "sample reduction tile");
		tir_int fac[NR_LEVELS];
		for (int k = 0; k < NR_LEVELS; k++)
			fac[k] = TIR_RV(v[k]);
		TRY(tir_split(s, n.reduce[i], NR_LEVELS, fac, o, err), "split reduction");
		for (int k = 0; k < NR_LEVELS; k++)
			rl[k][i] = o[k];
	}
	/* S0 S1 S2 R0 R1 S3 R2 S4.  The initial nest holds the spatial loops
	 * first; when the whole order is more loops than one instruction takes
	 * (conv3d: 37), the spatial loops go level-major first, then the loops
	 * from S3 on are ordered (both sets contiguous in the nest). */
	int order[8 * TIR_MAX_IO], k = 0;
	static const char lv[] = "SSSRRSRS";
	static const int level[] = { 0, 1, 2, 0, 1, 3, 2, 4 };
	int from = 0;
	if ((NS_LEVELS * n.ns + NR_LEVELS * n.nr) > TIR_MAX_IO) {
		for (int j = 0; j < NS_LEVELS; j++)
			for (int i = 0; i < n.ns; i++)
				order[k++] = sl[j][i];
		TRY(tir_reorder(s, k, order, err), "reorder spatial");
		k = 0;
		from = 3;
	}
	for (int j = from; j < 8; j++) {
		if (lv[j] == 'S')
			for (int i = 0; i < n.ns; i++)
				order[k++] = sl[level[j]][i];
		else
			for (int i = 0; i < n.nr; i++)
				order[k++] = rl[level[j]][i];
	}
	TRY(tir_reorder(s, k, order, err), "reorder");
	int bx, vt, tx;
	TRY(bx = tir_fuse(s, n.ns, sl[0], err), "fuse S0");
	TRY(vt = tir_fuse(s, n.ns, sl[1], err), "fuse S1");
	TRY(tx = tir_fuse(s, n.ns, sl[2], err), "fuse S2");
	TRY(tir_bind(s, bx, "blockIdx.x", err), "bind blockIdx.x");
	TRY(tir_bind(s, vt, "vthread.x", err), "bind vthread.x");
	TRY(tir_bind(s, tx, "threadIdx.x", err), "bind threadIdx.x");
	int64_t threads = 1;
	for (int i = 0; i < n.ns; i++)
		threads *= sf[i][2];

	/* the accumulator in registers, written back per thread; registers need
	 * indices known at compile time, so every loop over the accumulator
	 * tile is unrolled: the write-back's, the init's (decomposed out of the
	 * reduction) and the update's S3 R2 S4 (at most MAX_REGS * MAX_R2
	 * copies as drawn; validation refuses mutants that unroll too much).  A rolled one would put the whole tile in local memory. */
	int wb;
	TRY(wb = tir_cache_write(s, b, 0, "local", err), "cache_write");
	TRY(tir_reverse_compute_at(s, wb, tx, err), "reverse_compute_at");
	TRY(unroll_under(s, wb, tx, err), "unroll the write-back");
	if (n.nr > 0) {
		int init;
		TRY(init = tir_decompose_reduction(s, b, rl[0][0], err), "decompose_reduction");
		TRY(unroll_under(s, init, tx, err), "unroll the init");
		for (int i = 0; i < n.ns; i++) {
			TRY(tir_unroll(s, sl[3][i], err), "unroll S3");
			TRY(tir_unroll(s, sl[4][i], err), "unroll S4");
		}
		for (int i = 0; i < n.nr; i++)
			TRY(tir_unroll(s, rl[2][i], err), "unroll R2");
	}

	if (stages && n.nr > 0) {
		/* the stages go at the last R0 loop or the last R1 loop */
		int at[2] = { rl[0][n.nr - 1], rl[1][n.nr - 1] };
		for (int i = 0; i < nin; i++)
			TRY(autocopy(s, b, inputs[i], &g, 2, at, threads, err), "autocopy");
		TRY(sketch_pipeline(s, t, 2, at, err), "software pipeline");
	}
	if (sum)
		TRY(sketch_kernelize(s, sum, err), "the parts' sum");
	for (int i = 0; i < g.nconsumers; i++) {
		int e;
		tir_error ignored;
		if (sum) {      /* after the sum: kernels of their own */
			TRY(sketch_kernelize(s, g.consumer[i]->name, err), "consumer");
			continue;
		}
		/* an epilogue into the write-back; a consumer that reads more
		 * (another computed value: a residual, a row's statistics) is
		 * left to sketch_schedule_rest */
		TRY(e = tir_get_block(s, g.consumer[i]->name, err), "get consumer");
		tir_reverse_compute_inline(s, e, &ignored);
	}
	int unroll;
	TRY(unroll = tir_sample_categorical(s, SKETCH_GPU_NUNROLL, sketch_gpu_unroll_steps, NULL,
					    err), "unroll");
	TRY(sketch_annotate_rv(s, bx, "auto_unroll_max_step", unroll, err), "annotate unroll");
	return 0;
}

/* Every heavy block (post-order) by `heavy` where `fits` accepts it (NULL:
 * all), else by gpu-tile; then the rest (rows.c).  The heavy rules run
 * first: a heavy block's epilogues go into its write-back, and what they
 * leave is free for the rest. */
int sketch_gpu_heavy(tir_sched *s, const tir_target *t,
		     int (*heavy)(tir_sched *, const tir_target *, const tir_block *, tir_error *),
		     bool (*fits)(const tir_program *, const tir_target *, const tir_block *),
		     tir_error *err)
{
	tir_block *hv[SKETCH_MAX_BLOCKS];
	int n = sketch_heavy_blocks(s->p, hv, SKETCH_MAX_BLOCKS);
	if (n == 0)
		return tir_fail(err, "gpu sketch: no reduction block with data reuse");
	for (int i = 0; i < n; i++) {
		if (!hv[i]->stmt)
			continue;
		if (!fits || fits(s->p, t, hv[i]))
			TRY(heavy(s, t, hv[i], err), hv[i]->name);
		else
			TRY(sketch_gpu_tile_block(s, t, false, hv[i], err), hv[i]->name);
	}
	return sketch_schedule_rest(s, t, &sketch_gpu_rest_auto, err);
}

static int tile_autocopy_block(tir_sched *s, const tir_target *t, const tir_block *b,
			       tir_error *err)
{
	return sketch_gpu_tile_block(s, t, true, b, err);
}

static int tile_block(tir_sched *s, const tir_target *t, const tir_block *b, tir_error *err)
{
	return sketch_gpu_tile_block(s, t, false, b, err);
}

static int apply_tile_autocopy(tir_sched *s, const tir_target *t, tir_error *err)
{
	return sketch_gpu_heavy(s, t, tile_autocopy_block, NULL, err);
}

static int apply_tile(tir_sched *s, const tir_target *t, tir_error *err)
{
	return sketch_gpu_heavy(s, t, tile_block, NULL, err);
}

static bool cuda_reduction(const tir_program *p, const tir_target *t)
{
	return t->kind == TIR_TARGET_CUDA && sketch_program_has(p, SKETCH_HEAVY);
}

/* ---- cross-thread reduction ---------------------------------------------------------- */

static void extents(const tir_block *b, int64_t *spatial, int64_t *reduce)
{
	*spatial = *reduce = 1;
	for (int i = 0; i < b->niters; i++) {
		if (b->iters[i].kind == ITER_REDUCE)
			*reduce *= b->iters[i].extent;
		else
			*spatial *= b->iters[i].extent;
	}
}

static bool xthread_fits(const tir_program *p, const tir_target *t, const tir_block *b)
{
	(void)p;
	int64_t sp, red;
	extents(b, &sp, &red);
	int sms = t->sm_count > 0 ? t->sm_count : 132;
	return sp < (int64_t)sms * XTHREAD_OUTPUTS_PER_SM && red >= XTHREAD_MIN_REDUCE;
}

static bool xthread_applies(const tir_program *p, const tir_target *t)
{
	if (t->kind != TIR_TARGET_CUDA)
		return false;
	tir_block *hv[SKETCH_MAX_BLOCKS];
	int n = sketch_heavy_blocks(p, hv, SKETCH_MAX_BLOCKS);
	for (int i = 0; i < n; i++)
		if (xthread_fits(p, t, hv[i]))
			return true;
	return false;
}

static int cross_thread_block(tir_sched *s, const tir_target *t, const tir_block *heavy,
			      tir_error *err)
{
	(void)t;
	sketch_blocks g;
	sketch_find_blocks(s->p, heavy, &g);
	const char *rname = heavy->name;
	const char *cons[SKETCH_MAX_STAGES];
	int ncons = g.nconsumers;
	for (int i = 0; i < ncons; i++)
		cons[i] = g.consumer[i]->name;
	TRY(inline_producers(s, &g, err), "gpu-cross-thread");
	int b;
	TRY(b = tir_get_block(s, rname, err), "get reduction block");
	sketch_nest n;
	TRY(sketch_nest_of(s, b, &n, err), "loops");
	if (n.nr == 0 || n.ns == 0)
		return tir_fail(err, "gpu-cross-thread: block \"%s\" needs spatial and reduction loops",
				rname);
	int order[2 * TIR_MAX_IO], k = 0;
	for (int i = 0; i < n.ns; i++)
		order[k++] = n.spatial[i];
	for (int i = 0; i < n.nr; i++)
		order[k++] = n.reduce[i];
	TRY(tir_reorder(s, k, order, err), "reorder");
	int sfu, rfu;
	TRY(sfu = tir_fuse(s, n.ns, n.spatial, err), "fuse spatial");
	TRY(rfu = tir_fuse(s, n.nr, n.reduce, err), "fuse reduction");
	int64_t red = product(n.rext, n.nr), sp = product(n.sext, n.ns);
	/* threads: powers of two from 32 up to the reduction's extent */
	int64_t tc[5], nt = 0;
	for (int64_t x = 32; x <= 512 && nt < 5; x *= 2)
		if (nt == 0 || x <= red)
			tc[nt++] = x;
	int64_t threads;
	TRY(threads = sample_value(s, (int)nt, tc, err), "threads");
	int r[2];
	tir_int rfac[2] = { TIR_LIT(0), TIR_LIT(threads) };
	TRY(tir_split(s, rfu, 2, rfac, r, err), "split reduction");
	/* outputs per thread block, serial */
	int64_t oc[3] = { 1, 2, 4 }, per;
	TRY(per = sample_value(s, sp >= 4 ? 3 : 1, oc, err), "outputs per block");
	int bx = sfu, si = -1;
	if (per > 1) {
		int o[2];
		tir_int sfac[2] = { TIR_LIT(0), TIR_LIT(per) };
		TRY(tir_split(s, sfu, 2, sfac, o, err), "split spatial");
		bx = o[0];
		si = o[1];
	}
	int ord[4], m = 0;
	ord[m++] = bx;
	if (si >= 0)
		ord[m++] = si;
	ord[m++] = r[1];
	ord[m++] = r[0];
	TRY(tir_reorder(s, m, ord, err), "reorder threads outside");
	TRY(tir_bind(s, bx, "blockIdx.x", err), "bind blockIdx.x");
	TRY(tir_bind(s, r[1], "threadIdx.x", err), "bind threadIdx.x");
	TRY(tir_annotate(s, b, "cross_thread_reduction", 1, err), "annotate");
	int unroll;
	TRY(unroll = tir_sample_categorical(s, SKETCH_GPU_NUNROLL, sketch_gpu_unroll_steps, NULL,
					    err), "unroll");
	TRY(sketch_annotate_rv(s, bx, "auto_unroll_max_step", unroll, err), "annotate unroll");
	for (int i = 0; i < ncons; i++)
		TRY(sketch_kernelize(s, cons[i], err), "epilogue kernel");
	return 0;
}

static int apply_cross_thread(tir_sched *s, const tir_target *t, tir_error *err)
{
	return sketch_gpu_heavy(s, t, cross_thread_block, xthread_fits, err);
}

/* ---- programs without heavy blocks (rows.c, gpu_rows.c) ------------------------------- */

static bool rows_apply(const tir_program *p, const tir_target *t)
{
	return t->kind == TIR_TARGET_CUDA && !sketch_program_has(p, SKETCH_HEAVY) &&
	       sketch_program_has(p, SKETCH_ROW);
}

static bool pointwise_applies(const tir_program *p, const tir_target *t)
{
	return t->kind == TIR_TARGET_CUDA && !sketch_program_has(p, SKETCH_HEAVY) &&
	       !sketch_program_has(p, SKETCH_ROW);
}

static int apply_rows_block(tir_sched *s, const tir_target *t, tir_error *err)
{
	return sketch_schedule_rest(s, t, &sketch_gpu_rest_block, err);
}

static int apply_rows_thread(tir_sched *s, const tir_target *t, tir_error *err)
{
	return sketch_schedule_rest(s, t, &sketch_gpu_rest_thread, err);
}

const sketch_def sketch_gpu_defs[] = {
	{ "gpu-tensorcore", sketch_tensorcore_applies, sketch_tensorcore_apply },
	{ "gpu-wgmma", sketch_wgmma_applies, sketch_wgmma_apply },
	{ "gpu-tile-autocopy", cuda_reduction, apply_tile_autocopy },
	{ "gpu-tile", cuda_reduction, apply_tile },
	{ "gpu-cross-thread", xthread_applies, apply_cross_thread },
	{ "gpu-rows", rows_apply, apply_rows_block },
	{ "gpu-rows-thread", rows_apply, apply_rows_thread },
	{ "gpu-pointwise", pointwise_applies, apply_rows_block },
};
const int sketch_gpu_ndefs = (int)(sizeof sketch_gpu_defs / sizeof *sketch_gpu_defs);
