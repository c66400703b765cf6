/*
 * wgmma_probe.cu — what Hopper's warpgroup MMA (wgmma, sm_90a) gives a plain
 * float16 matmul on this GPU, against cuBLAS in the same run: a probe for
 * tird's tensor-core path, which issues WMMA (mma.sync) from shared memory
 * and reaches 0.43x cuBLAS on 4096^3 (bench/results/archive/2026-11-30-h200-gpu-suite-s8.txt).
 * Not part of tird: it checks, on the device, the shared-memory layout, the
 * matrix descriptors and the accumulator layout that a wgmma intrinsic in
 * the IR would have to produce, and how fast the simplest such kernel is.
 *
 *   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a bench/wgmma_probe.cu -lcublas -o wgmma_probe
 *   ./wgmma_probe [M N K]      (default 4096 4096 4096)
 *
 * C[M][N] (float32) = A[M][K] * B[N][K]^T (float16, both K-major), float32
 * accumulation.  One thread block: a 128 x BN tile of C (BN = PROBE_BN: 128,
 * or 256 with -DPROBE_BN=256), two warpgroups of 64 rows each, each issuing
 * wgmma.m64nBNk16 from shared memory; K in tiles
 * of 64 (128 bytes a row: the 128-byte swizzle, 8-row atoms of 1 KB),
 * fetched by cp.async into 4 ring slots, 2 tiles ahead; one barrier and one
 * wgmma group (waited for) per K tile.  With PROBE_WS, a third warpgroup
 * fetches instead (TMA or cp.async) and mbarriers hand the ring slots over:
 * what tird's "tma" pipelines generate (bench/results/2026-11-30-h200-wgmma-ws-probe.txt).
 * Prints the kernel's and cuBLAS's median time over 20 runs and the
 * largest difference from cuBLAS's C.
 *
 *   nvcc ... -DPROBE_WS=1 -DPROBE_BN=256 bench/wgmma_probe.cu -L/usr/local/cuda/lib64/stubs -lcublas -lcuda
 */
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
	fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

#ifndef PROBE_BN
#define PROBE_BN 128
#endif
/* PROBE_WAIT: wgmma groups left in flight at the end of a K tile (0: each
 * tile's group waited for; 1: the previous tile's, so a tile's MMAs overlap
 * the next tile's barrier and issue).  A ring slot is refetched AHEAD tiles
 * on, so with 1 in flight it needs AHEAD <= STAGES - 3. */
#ifndef PROBE_WAIT
#define PROBE_WAIT 0
#endif
#ifndef PROBE_STAGES
#define PROBE_STAGES 4
#endif
#ifndef PROBE_AHEAD
#define PROBE_AHEAD (PROBE_STAGES - 2 - PROBE_WAIT)
#endif
/* PROBE_BKN: B given as [K][N] (N contiguous, "MN-major"), staged in 64-column
 * atoms of BK rows x 128 bytes under the same swizzle, read with trans-b; its
 * descriptor's LBO (between 64-column atoms) and SBO (between 8-row groups)
 * as in CUTLASS's canonical MN-major layout, or swapped with PROBE_SWAP. */
#ifndef PROBE_BKN
#define PROBE_BKN 0
#endif
#ifndef PROBE_SWAP
#define PROBE_SWAP 0
#endif
/* PROBE_WS: warp specialization — a third warpgroup (the producer) fills the
 * ring while the two MMA warpgroups only wait and multiply: ring slots handed
 * over by mbarriers (full: the slot's data landed; empty: both MMA warpgroups
 * are done reading it).  1: the producer's one elected thread fetches each
 * operand tile with the tensor memory accelerator (cp.async.bulk.tensor,
 * 128-byte swizzle done by the copy engine, a CUtensorMap per operand made
 * on the host); 2: the producer's 128 threads fetch with cp.async and signal
 * with cp.async.mbarrier.arrive.  PROBE_REG (with PROBE_WS): setmaxnreg moves
 * registers from the producer (40) to the MMA warpgroups (232).  With
 * PROBE_WS the printed "ahead" and "in flight" do not apply: the producer
 * fills every free slot, the MMA warpgroups leave one group in flight. */
#ifndef PROBE_WS
#define PROBE_WS 0
#endif
#ifndef PROBE_REG
#define PROBE_REG 0
#endif
#define STR_(x) #x
#define STR(x) STR_(x)
enum { BM = 128, BN = PROBE_BN, BK = 64, STAGES = PROBE_STAGES, AHEAD = PROBE_AHEAD,
       THREADS = PROBE_WS ? 384 : 256 };
static_assert(AHEAD >= 1 && AHEAD <= STAGES - 2 - PROBE_WAIT, "a slot refetched while a wgmma may read it");
enum { TILE_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2, STAGE_BYTES = TILE_BYTES + B_BYTES,
       ACC = BN / 2 };     /* accumulator registers per thread: 64 x BN over 128 threads */

/* The byte offset of element (r, k) of a 128-byte-row tile under the
 * 128-byte swizzle: the 16-byte chunk index XOR the row within its 8-row atom. */
__device__ __forceinline__ uint32_t swz(int r, int k)
{
	uint32_t off = r * 128 + k * 2;
	return off ^ (((off >> 7) & 7) << 4);
}

/* A shared-memory matrix descriptor: start address, leading byte offset
 * (unused for swizzled K-major), stride byte offset 1 KB (8 rows of 128 B),
 * 128-byte swizzle (mode 1, bits 62-63). */
__device__ __forceinline__ uint64_t desc_of(uint32_t saddr, uint32_t lbo = 16, uint32_t sbo = 1024)
{
	return (uint64_t)((saddr & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) |
	       ((uint64_t)(sbo >> 4) << 32) | ((uint64_t)1 << 62);
}

/* B's descriptor: K-major as A's, or MN-major: 64-column atoms BK * 128
 * bytes apart, 8-row groups 1 KB apart. */
__device__ __forceinline__ uint64_t desc_b(uint32_t saddr)
{
	if (!PROBE_BKN)
		return desc_of(saddr);
	return PROBE_SWAP ? desc_of(saddr, 1024, BK * 128) : desc_of(saddr, BK * 128, 1024);
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst), "l"(src) : "memory");
}

__device__ __forceinline__ void wgmma_128(float *d, uint64_t a, uint64_t b)
{
	/* d = A * B + d (scale-d, a predicate, true); A and B scaled by 1,
	 * neither transposed (both K-major) */
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
		     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, %67;\n}\n"
		     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
		     : "l"(a), "l"(b), "r"(1), "n"(PROBE_BKN));
}

__device__ __forceinline__ void wgmma_256(float *d, uint64_t a, uint64_t b)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
		     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, %131;\n}\n"
		     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
		     : "l"(a), "l"(b), "r"(1), "n"(PROBE_BKN));
}

/* One K tile's MMAs of a warpgroup, fenced and committed: its A rows at
 * shared address a, B at b; four k16 steps of 32 bytes along a K-major row
 * (16 rows of an MN-major atom). */
__device__ __forceinline__ void mma_tile(float *d, uint32_t a, uint32_t b)
{
	asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
	for (int j = 0; j < BK / 16; j++) {
		uint32_t bj = b + (PROBE_BKN ? 16 * 128 * j : 32 * j);
		if (BN == 256)
			wgmma_256(d, desc_of(a + 32 * j), desc_b(bj));
		else
			wgmma_128(d, desc_of(a + 32 * j), desc_b(bj));
	}
	asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

/* A warpgroup's 64 x BN accumulator tile into C at (r0, n0): warp w of the
 * warpgroup holds rows 16w..16w+15; lane l's d[4i..4i+3] are (l/4,
 * 8i + 2(l%4) + {0,1}) and 8 rows below. */
__device__ __forceinline__ void store_acc(float *C, const float *d, int r0, int n0, int N)
{
	const int w = (threadIdx.x % 128) / 32, l = threadIdx.x % 32;
	const int row = r0 + w * 16 + l / 4;
	for (int i = 0; i < BN / 8; i++) {
		int col = n0 + 8 * i + 2 * (l % 4);
		*(float2 *)&C[(size_t)row * N + col] = make_float2(d[4 * i], d[4 * i + 1]);
		*(float2 *)&C[(size_t)(row + 8) * N + col] = make_float2(d[4 * i + 2], d[4 * i + 3]);
	}
}

__global__ void __launch_bounds__(THREADS, 1)
probe(const __half *__restrict__ A, const __half *__restrict__ B, float *__restrict__ C,
      int M, int N, int K)
{
	extern __shared__ __align__(1024) unsigned char smem_raw[];
	/* 1 KB alignment for the swizzle atoms */
	unsigned char *smem = (unsigned char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
	const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(smem);
	const int tid = threadIdx.x, wg = tid / 128;
	const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN, KT = K / BK;

	auto load = [&](int kt) {
		uint32_t s = sbase + (kt % STAGES) * STAGE_BYTES;
		int k0 = kt * BK;
		for (int q = tid; q < BM * BK / 8; q += THREADS) {
			int r = q / 8, c = q % 8;
			cp_async16(s + swz(r, c * 8), A + (size_t)(m0 + r) * K + k0 + c * 8);
		}
		if (PROBE_BKN)     /* B[k][n]: atom n / 64, row k, chunk (n % 64) / 8 */
			for (int q = tid; q < BN * BK / 8; q += THREADS) {
				int k = q / (BN / 8), n = (q % (BN / 8)) * 8;
				cp_async16(s + TILE_BYTES + (n / 64) * (BK * 128) + swz(k, n % 64),
					   B + (size_t)(k0 + k) * N + n0 + n);
			}
		else
			for (int q = tid; q < BN * BK / 8; q += THREADS) {
				int r = q / 8, c = q % 8;
				cp_async16(s + TILE_BYTES + swz(r, c * 8), B + (size_t)(n0 + r) * K + k0 + c * 8);
			}
	};

	float d[ACC];
	for (int i = 0; i < ACC; i++)
		d[i] = 0.f;
	for (int kt = 0; kt < AHEAD; kt++) {
		if (kt < KT)
			load(kt);
		asm volatile("cp.async.commit_group;\n" ::: "memory");
	}
	for (int kt = 0; kt < KT; kt++) {
		/* slot (kt + AHEAD) % STAGES was last read by wgmma(kt + AHEAD -
		 * STAGES) <= kt - 2 - PROBE_WAIT, which every warpgroup waited for
		 * before the barrier of iteration kt - 1 */
		if (kt + AHEAD < KT)
			load(kt + AHEAD);
		asm volatile("cp.async.commit_group;\n" ::: "memory");
		asm volatile("cp.async.wait_group " STR(PROBE_AHEAD) ";\n" ::: "memory");
		asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
		__syncthreads();
		uint32_t s = sbase + (kt % STAGES) * STAGE_BYTES;
		uint32_t a = s + wg * 64 * 128, b = s + TILE_BYTES;
		mma_tile(d, a, b);
		asm volatile("wgmma.wait_group.sync.aligned " STR(PROBE_WAIT) ";\n" ::: "memory");
	}
	asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
	store_acc(C, d, m0 + wg * 64, n0, N);
}

/* mbarrier primitives (shared-memory addresses) */
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count)
{
	asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity)
{
	asm volatile("{\n.reg .pred P1;\nWAIT:\n"
		     "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
		     "@P1 bra DONE;\nbra WAIT;\nDONE:\n}\n" :: "r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar)
{
	asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_expect(uint32_t bar, uint32_t bytes)
{
	asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void tma_2d(uint32_t dst, const CUtensorMap *map, int c0, int c1, uint32_t bar)
{
	asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
		     " [%0], [%1, {%2, %3}], [%4];\n"
		     :: "r"(dst), "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(bar) : "memory");
}

__global__ void __launch_bounds__(THREADS, 1)
probe_ws(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
	 const __half *__restrict__ A, const __half *__restrict__ B, float *__restrict__ C,
	 int M, int N, int K)
{
	extern __shared__ __align__(1024) unsigned char smem_raw[];
	unsigned char *smem = (unsigned char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
	const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(smem);
	const uint32_t full = sbase + STAGES * STAGE_BYTES, empty = full + 8 * STAGES;
	const int tid = threadIdx.x, wg = tid / 128;
	const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN, KT = K / BK;

	if (tid == 0) {
		for (int s = 0; s < STAGES; s++) {
			mbar_init(full + 8 * s, PROBE_WS == 1 ? 1 : 128);
			mbar_init(empty + 8 * s, 256);
		}
		asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
	}
	__syncthreads();
	if (wg == 0) {
#if PROBE_REG
		asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
#endif
		for (int kt = 0; kt < KT; kt++) {
			int s = kt % STAGES;
			uint32_t sa = sbase + s * STAGE_BYTES, sb = sa + TILE_BYTES, k0 = kt * BK;
			if (kt >= STAGES)
				mbar_wait(empty + 8 * s, ((kt / STAGES) - 1) & 1);
#if PROBE_WS == 1
			if (tid == 0) {
				mbar_expect(full + 8 * s, STAGE_BYTES);
				tma_2d(sa, &tmA, k0, m0, full + 8 * s);
				if (PROBE_BKN)
					for (int j = 0; j < BN / 64; j++)
						tma_2d(sb + j * BK * 128, &tmB, n0 + 64 * j, k0, full + 8 * s);
				else
					tma_2d(sb, &tmB, k0, n0, full + 8 * s);
			}
#else
			for (int q = tid; q < BM * BK / 8; q += 128) {
				int r = q / 8, c = q % 8;
				cp_async16(sa + swz(r, c * 8), A + (size_t)(m0 + r) * K + k0 + c * 8);
			}
			if (PROBE_BKN)
				for (int q = tid; q < BN * BK / 8; q += 128) {
					int k = q / (BN / 8), n = (q % (BN / 8)) * 8;
					cp_async16(sb + (n / 64) * (BK * 128) + swz(k, n % 64),
						   B + (size_t)(k0 + k) * N + n0 + n);
				}
			else
				for (int q = tid; q < BN * BK / 8; q += 128) {
					int r = q / 8, c = q % 8;
					cp_async16(sb + swz(r, c * 8), B + (size_t)(n0 + r) * K + k0 + c * 8);
				}
			asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" :: "r"(full + 8 * s) : "memory");
#endif
		}
		return;
	}
#if PROBE_REG
	asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
#endif
	const int cw = wg - 1;     /* MMA warpgroup 0 or 1: rows 64 cw .. */
	float d[ACC];
	for (int i = 0; i < ACC; i++)
		d[i] = 0.f;
	for (int kt = 0; kt < KT; kt++) {
		int s = kt % STAGES;
		mbar_wait(full + 8 * s, (kt / STAGES) & 1);
		if (PROBE_WS == 2)
			asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
		uint32_t a = sbase + s * STAGE_BYTES + cw * 64 * 128, b = sbase + s * STAGE_BYTES + TILE_BYTES;
		mma_tile(d, a, b);
		asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
		if (kt > 0)     /* the previous tile's MMAs are done: its slot is free */
			mbar_arrive(empty + 8 * ((kt - 1) % STAGES));
	}
	asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
	store_acc(C, d, m0 + cw * 64, n0, N);
}

/* A 2-D tensor map of a row-major float16 matrix rows x cols, boxes of
 * box_rows x 64 columns (128 bytes: the swizzle's span). */
static CUtensorMap tensor_map(const __half *p, int rows, int cols, int box_rows)
{
	CUtensorMap m;
	cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)cols * 2};
	cuuint32_t box[2] = {64, (cuuint32_t)box_rows}, estr[2] = {1, 1};
	CUresult r = cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, (void *)p, dims, strides,
					    box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
					    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
	if (r != CUDA_SUCCESS) {
		fprintf(stderr, "cuTensorMapEncodeTiled: error %d\n", (int)r);
		exit(1);
	}
	return m;
}

static float median(std::vector<float> v)
{
	std::sort(v.begin(), v.end());
	return v[v.size() / 2];
}

int main(int argc, char **argv)
{
	int M = argc > 3 ? atoi(argv[1]) : 4096, N = argc > 3 ? atoi(argv[2]) : 4096,
	    K = argc > 3 ? atoi(argv[3]) : 4096;
	if (M % BM || N % BN || K % BK) {
		fprintf(stderr, "M must be a multiple of %d, N of %d and K of %d\n", BM, BN, BK);
		return 2;
	}
	std::vector<__half> hA((size_t)M * K), hB((size_t)N * K);
	unsigned x = 12345;
	auto rnd = [&]() { x = x * 1664525u + 1013904223u; return (float)((x >> 9) & 0xFFFF) / 65536.f - 0.5f; };
	for (auto &v : hA) v = __float2half(rnd());
	for (auto &v : hB) v = __float2half(rnd());
	__half *A, *B;
	float *C, *R;
	CHECK(cudaMalloc(&A, hA.size() * 2));
	CHECK(cudaMalloc(&B, hB.size() * 2));
	CHECK(cudaMalloc(&C, (size_t)M * N * 4));
	CHECK(cudaMalloc(&R, (size_t)M * N * 4));
	CHECK(cudaMemcpy(A, hA.data(), hA.size() * 2, cudaMemcpyHostToDevice));
	CHECK(cudaMemcpy(B, hB.data(), hB.size() * 2, cudaMemcpyHostToDevice));
	int smem = STAGES * STAGE_BYTES + 1024 + 16 * STAGES;
	CHECK(cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
	CHECK(cudaFuncSetAttribute(probe_ws, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
	CUtensorMap tmA = tensor_map(A, M, K, BM),
		    tmB = PROBE_BKN ? tensor_map(B, K, N, BK) : tensor_map(B, N, K, BN);
	dim3 grid(N / BN, M / BM);
	cublasHandle_t h;
	cublasCreate(&h);
	float one = 1.f, zero = 0.f;
	/* cuBLAS is column-major: R^T[N][M] = B[N][K] * A^T, i.e. op(B) = B^T
	 * of the column-major K x N view, op(A) = A as a K x M view */
	/* with B[K][N]: its column-major view is N x K with ld N, op(B) = none */
	auto ref = [&]() {
		cublasGemmEx(h, PROBE_BKN ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, B,
			     CUDA_R_16F, PROBE_BKN ? N : K, A, CUDA_R_16F, K, &zero, R, CUDA_R_32F, N,
			     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
	};
	cudaEvent_t e0, e1;
	cudaEventCreate(&e0);
	cudaEventCreate(&e1);
	std::vector<float> tp, tc;
	for (int it = 0; it < 23; it++) {
		float ms;
		cudaEventRecord(e0);
		if (PROBE_WS)
			probe_ws<<<grid, THREADS, smem>>>(tmA, tmB, A, B, C, M, N, K);
		else
			probe<<<grid, THREADS, smem>>>(A, B, C, M, N, K);
		cudaEventRecord(e1);
		CHECK(cudaEventSynchronize(e1));
		cudaEventElapsedTime(&ms, e0, e1);
		if (it >= 3) tp.push_back(ms * 1000);
		cudaEventRecord(e0);
		ref();
		cudaEventRecord(e1);
		CHECK(cudaEventSynchronize(e1));
		cudaEventElapsedTime(&ms, e0, e1);
		if (it >= 3) tc.push_back(ms * 1000);
	}
	CHECK(cudaGetLastError());
	std::vector<float> hC((size_t)M * N), hR((size_t)M * N);
	CHECK(cudaMemcpy(hC.data(), C, hC.size() * 4, cudaMemcpyDeviceToHost));
	CHECK(cudaMemcpy(hR.data(), R, hR.size() * 4, cudaMemcpyDeviceToHost));
	double err = 0, scale = 0;
	for (size_t i = 0; i < hC.size(); i++) {
		err = std::max(err, (double)fabsf(hC[i] - hR[i]));
		scale = std::max(scale, (double)fabsf(hR[i]));
	}
	double flops = 2.0 * M * N * K;
	float p = median(tp), c = median(tc);
	printf("wgmma_probe (128x%d tiles, %d stages %d ahead, %d group in flight, B %s%s%s) %dx%dx%d float16 -> float32: probe %.1f us (%.0f TFLOP/s), cuBLAS %.1f us "
	       "(%.0f TFLOP/s), probe/cuBLAS speed %.3f, max |C - cuBLAS| %.3g (max |C| %.3g)\n",
	       BN, STAGES, AHEAD, PROBE_WAIT, PROBE_BKN ? "[K][N]" : "[N][K]", PROBE_SWAP ? " swapped" : "",
	       PROBE_WS == 1 ? ", producer warpgroup: TMA" : PROBE_WS == 2 ? ", producer warpgroup: cp.async" : "", M, N, K, p, flops / p * 1e-6, c, flops / c * 1e-6, c / p, err, scale);
	return err <= 1e-3 * scale ? 0 : 1;
}
