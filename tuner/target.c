/*
 * target.c — what code is generated for: target strings → struct tir_target.
 *
 * A full key names the hardware and ISA ("cpu:x86_64+avx2+fma", "cuda:sm_90",
 * "cuda:sm_90+h200": an architecture and the part detected) and is what
 * records are stored under; "cpu" and "cuda" mean this machine's
 * CPU and first GPU, detected.  A full key is taken at its word: its features
 * come from the key, never from the machine that parses it, so a server can
 * generate code for a remote board.  Features are kept in the order of the
 * tables below, so one machine always has one key.
 *
 * A full key must name hardware that exists, or no worker could ever serve
 * it: the architecture is one of the tables below (or this machine's own,
 * as `uname` names it, with no features), each feature is one of that
 * architecture's, named once, with the features it implies on every real
 * part (avx512bw needs avx512f, avx512f needs avx2, dotprod needs neon).
 * The error names the part at fault.
 *
 * "+emulated" at the end of a CPU key names the same hardware as an
 * emulator (qemu-user) runs it: a worker under emulation detects it
 * (tir_cpu_emulated) and registers such a key, so that its timings, which say
 * nothing of the hardware's, are records, bests and a cost model of their
 * own, never the real board's.  Code is generated for it as for the key
 * without it.
 *
 * GPU limits for a named architecture come from a built-in table; a bare
 * "cuda" asks the driver (measure/cuda_props.c loads it with dlopen, in a
 * child process, so libtir never links libcuda and runs without one).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/utsname.h>
#include "ir/ir.h"
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#include <asm/hwcap.h>
#endif

/* ---- CPUs ---------------------------------------------------------------------- */

/* The features that change generated code, per architecture, in key order.
 * vector_bytes: the widest register the feature brings. */
typedef struct cpu_feature {
	const char *name;
	int vector_bytes;
	const char *needs;        /* a feature every part with this one has, or NULL */
} cpu_feature;

static const cpu_feature x86_features[] = {
	{ "avx2", 32, NULL }, { "fma", 0, NULL }, { "avx512f", 64, "avx2" },
	{ "avx512bw", 0, "avx512f" }, { "avx512vnni", 0, "avx512f" }, { 0, 0, 0 },
};
/* AArch64, as Linux's hwcaps name them: asimd (neon), asimddp (dotprod:
 * sdot/udot), fphp + asimdhp (fp16 arithmetic), i8mm (smmla/ummla), bf16,
 * sve, sve2.  Generated code uses 128-bit NEON registers, SVE or not. */
static const cpu_feature arm_features[] = {
	{ "neon", 16, NULL }, { "dotprod", 0, "neon" }, { "fp16", 0, "neon" },
	{ "i8mm", 0, "neon" }, { "bf16", 0, "neon" }, { "sve", 0, "neon" },
	{ "sve2", 0, "sve" }, { 0, 0, 0 },
};
#define EMULATED_FEATURE "emulated"
#define MAX_FEATURES 8

static const cpu_feature *features_of(const char *arch)
{
	if (!strcmp(arch, "x86_64"))
		return x86_features;
	if (!strcmp(arch, "aarch64"))
		return arm_features;
	return NULL;
}

static int online_cores(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

/* Builds the key and vector width from an architecture and a set of features
 * (has[i] for the i-th entry of its table). */
static void cpu_finish(tir_target *t, const char *arch, const cpu_feature *tab,
		       const bool *has)
{
	t->kind = TIR_TARGET_CPU;
	t->vector_bytes = 16;
	t->cores = online_cores();
	int n = snprintf(t->key, sizeof t->key, "cpu:%s", arch);
	for (int i = 0; tab && tab[i].name; i++) {
		if (!has[i])
			continue;
		n += snprintf(t->key + n, sizeof t->key - (size_t)n, "+%s", tab[i].name);
		if (tab[i].vector_bytes > t->vector_bytes)
			t->vector_bytes = tab[i].vector_bytes;
	}
	if (t->emulated)
		snprintf(t->key + n, sizeof t->key - (size_t)n, "+" EMULATED_FEATURE);
}

/* Whether this process runs under a user-mode emulator, and which (into
 * emu): qemu-user started by hand leaves its own name in /proc/self/comm
 * ("qemu-aarch64", "qemu-aarch64-st" for -static, cut at 15 bytes); started
 * through binfmt_misc it passes the host's /proc/cpuinfo through, which then
 * describes another architecture (an x86 host's "vendor_id" and "flags"
 * lines where an AArch64 kernel writes "CPU implementer" and "Features").
 * Only the first processor's lines are read. */
bool tir_cpu_emulated(char *emu, size_t n)
{
#if defined(__x86_64__)
	static const char *const foreign[] = { "CPU implementer", "Features\t" };
#else
	static const char *const foreign[] = { "vendor_id", "flags\t" };
#endif
	char comm[64] = "";
	FILE *f = fopen("/proc/self/comm", "r");
	if (f) {
		if (!fgets(comm, sizeof comm, f))
			comm[0] = '\0';
		fclose(f);
		comm[strcspn(comm, "\n")] = '\0';
	}
	if (!strncmp(comm, "qemu-", 5)) {
		snprintf(emu, n, "%s", comm);
		return true;
	}
	f = fopen("/proc/cpuinfo", "r");
	if (!f)
		return false;
	char line[256];
	bool other = false;
	while (!other && fgets(line, sizeof line, f) && line[0] != '\n')
		for (int i = 0; i < 2; i++)
			other = other || !strncmp(line, foreign[i], strlen(foreign[i]));
	fclose(f);
	if (other)
		snprintf(emu, n, "an emulator (/proc/cpuinfo is another architecture's)");
	return other;
}

static int cpu_detect(tir_target *t, tir_error *err)
{
	bool has[MAX_FEATURES] = { false };
#if defined(__x86_64__)
	__builtin_cpu_init();
	has[0] = __builtin_cpu_supports("avx2");
	has[1] = __builtin_cpu_supports("fma");
	has[2] = __builtin_cpu_supports("avx512f");
	has[3] = __builtin_cpu_supports("avx512bw");
	has[4] = __builtin_cpu_supports("avx512vnni");
	cpu_finish(t, "x86_64", x86_features, has);
#elif defined(__aarch64__) && defined(__linux__)
	/* the kernel's hwcaps, in arm_features' order; a bit the headers do not
	 * know is a feature this build cannot name anyway */
	unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
	(void)hw2;
	has[0] = (hw & HWCAP_ASIMD) != 0;
#ifdef HWCAP_ASIMDDP
	has[1] = has[0] && (hw & HWCAP_ASIMDDP) != 0;
#endif
#if defined(HWCAP_FPHP) && defined(HWCAP_ASIMDHP)
	has[2] = has[0] && (hw & HWCAP_FPHP) && (hw & HWCAP_ASIMDHP);
#endif
#ifdef HWCAP2_I8MM
	has[3] = has[0] && (hw2 & HWCAP2_I8MM) != 0;
#endif
#ifdef HWCAP2_BF16
	has[4] = has[0] && (hw2 & HWCAP2_BF16) != 0;
#endif
#ifdef HWCAP_SVE
	has[5] = has[0] && (hw & HWCAP_SVE) != 0;
#endif
#ifdef HWCAP2_SVE2
	has[6] = has[5] && (hw2 & HWCAP2_SVE2) != 0;
#endif
	t->emulated = tir_cpu_emulated(t->emulator, sizeof t->emulator);
	cpu_finish(t, "aarch64", arm_features, has);
#else
	struct utsname u;
	if (uname(&u) != 0)
		return tir_fail(err, "cpu: cannot tell this machine's architecture");
	t->emulated = tir_cpu_emulated(t->emulator, sizeof t->emulator);
	cpu_finish(t, u.machine, features_of(u.machine), has);
#endif
	(void)err;
	return 0;
}

/* Whether arch is this machine's own architecture (uname), which a machine
 * of an architecture without a table detects as "cpu:ARCH". */
static bool own_arch(const char *arch)
{
	struct utsname u;
	return uname(&u) == 0 && !strcmp(u.machine, arch);
}

/* "cpu:ARCH+FEATURE+..." */
static int cpu_parse_key(const char *s, tir_target *t, tir_error *err)
{
	const char *p = s + 4;
	size_t alen = strcspn(p, "+");
	char arch[32];
	if (alen == 0 || alen >= sizeof arch)
		return tir_fail(err, "target \"%s\": expected cpu:ARCH+FEATURE..., e.g. "
				"cpu:x86_64+avx2+fma", s);
	memcpy(arch, p, alen);
	arch[alen] = '\0';
	for (size_t i = 0; i < alen; i++)
		if (!((arch[i] >= 'a' && arch[i] <= 'z') ||
		      (arch[i] >= '0' && arch[i] <= '9') || arch[i] == '_'))
			return tir_fail(err, "target \"%s\": bad architecture name \"%s\"",
					s, arch);
	const cpu_feature *tab = features_of(arch);
	if (!tab && !own_arch(arch))
		return tir_fail(err, "target \"%s\": unknown architecture \"%s\" (known: "
				"x86_64, aarch64)", s, arch);
	bool has[MAX_FEATURES] = { false };
	p += alen;
	while (*p == '+') {
		p++;
		size_t flen = strcspn(p, "+");
		if (flen == strlen(EMULATED_FEATURE) && !strncmp(p, EMULATED_FEATURE, flen)) {
			if (p[flen] != '\0')
				return tir_fail(err, "target \"%s\": \"" EMULATED_FEATURE "\" must "
						"come last", s);
			t->emulated = true;
			p += flen;
			break;
		}
		int hit = -1;
		for (int i = 0; tab && tab[i].name; i++)
			if (strlen(tab[i].name) == flen && !strncmp(tab[i].name, p, flen))
				hit = i;
		if (hit < 0) {
			char known[128] = "";
			for (int i = 0; tab && tab[i].name; i++)
				snprintf(known + strlen(known), sizeof known - strlen(known),
					 "%s%s", i ? ", " : "", tab[i].name);
			return tir_fail(err, "target \"%s\": unknown feature \"%.*s\" for %s "
					"(known: %s; and " EMULATED_FEATURE " last)", s,
					(int)flen, p, arch, tab ? known : "none");
		}
		if (has[hit])
			return tir_fail(err, "target \"%s\": feature \"%s\" is named twice", s,
					tab[hit].name);
		has[hit] = true;
		p += flen;
	}
	for (int i = 0; tab && tab[i].name; i++) {
		if (!has[i] || !tab[i].needs)
			continue;
		for (int k = 0; tab[k].name; k++)
			if (!strcmp(tab[k].name, tab[i].needs) && !has[k])
				return tir_fail(err, "target \"%s\": feature \"%s\" without \"%s\": "
						"no %s part has one without the other", s,
						tab[i].name, tab[k].name, arch);
	}
	cpu_finish(t, arch, tab, has);
	return 0;
}

bool tir_target_has(const tir_target *t, const char *f)
{
	if (!t || t->kind != TIR_TARGET_CPU || !f || !*f)
		return false;
	size_t n = strlen(f);
	for (const char *p = strchr(t->key, '+'); p; p = strchr(p + 1, '+'))
		if (!strncmp(p + 1, f, n) && (p[1 + n] == '+' || p[1 + n] == '\0'))
			return true;
	return false;
}

/* ---- GPUs ------------------------------------------------------------------------ */

typedef struct cuda_arch {
	int sm;
	int sm_count;
	int max_threads;
	int max_shared;           /* opt-in bytes per block */
	int64_t l2_bytes;
} cuda_arch;

/* Limits of the usual part of each architecture (CUDA programming guide,
 * "Compute capabilities", and the product data sheets). */
static const cuda_arch cuda_archs[] = {
	{ 80, 108, 1024, 166912, 40LL << 20 },  /* A100: 163 KB opt-in, 40 MB L2 */
	{ 86, 82, 1024, 101376, 6LL << 20 },    /* RTX 3090: 99 KB, 6 MB */
	{ 89, 128, 1024, 101376, 72LL << 20 },  /* RTX 4090: 99 KB, 72 MB */
	{ 90, 132, 1024, 232448, 60LL << 20 },  /* H100/H200 SXM: 227 KB, 60 MB (H200) */
};

/* Nominal roofline figures of the part each architecture's row above
 * stands for (data sheets: float32 without tensor cores, DRAM bandwidth). */
typedef struct cuda_peak {
	int sm;
	double gflops, gbps;
	const char *part;
} cuda_peak;

static const cuda_peak cuda_peaks[] = {
	{ 80, 19500, 1555, "A100 SXM 40 GB" },
	{ 86, 35600, 936, "RTX 3090" },
	{ 89, 82600, 1008, "RTX 4090" },
	{ 90, 67000, 4800, "H200 SXM" },
};

/* The nominal CPU figures: an assumed clock and memory, since neither is
 * in a key. */
#define NOMINAL_CPU_GHZ 3.0
#define NOMINAL_CPU_GBPS 51.2      /* two channels of DDR4-3200 */

void tir_target_peak(const tir_target *t, tir_peak *out)
{
	*out = (tir_peak){ 0 };
	if (t->kind == TIR_TARGET_CUDA) {
		for (size_t i = 0; i < sizeof cuda_peaks / sizeof cuda_peaks[0]; i++)
			if (cuda_peaks[i].sm == t->sm) {
				out->gflops = cuda_peaks[i].gflops;
				out->gbps = cuda_peaks[i].gbps;
				snprintf(out->basis, sizeof out->basis, "nominal: the %s data sheet's "
					 "float32 peak (no tensor cores) and DRAM bandwidth",
					 cuda_peaks[i].part);
				return;
			}
		/* a GPU detected with another sm: scale sm_90's per-SM figure */
		out->gflops = 67000.0 / 132 * (t->sm_count > 0 ? t->sm_count : 132);
		out->gbps = 4800;
		snprintf(out->basis, sizeof out->basis, "nominal: sm_%d is not in tird's table; "
			 "an H200's float32 peak per SM x %d SMs and its bandwidth", t->sm,
			 t->sm_count);
		return;
	}
	int lanes = t->vector_bytes / 4 > 0 ? t->vector_bytes / 4 : 4;
	bool aarch64 = !strncmp(t->key, "cpu:aarch64", 11);
	int pipes = tir_target_has(t, "fma") || aarch64 ? 2 : 1;
	int cores = t->cores > 0 ? t->cores : 1;
	out->gflops = cores * lanes * 2.0 * pipes * NOMINAL_CPU_GHZ;
	out->gbps = NOMINAL_CPU_GBPS;
	snprintf(out->basis, sizeof out->basis, "nominal: %d cores x %d float32 lanes x 2 "
		 "flops x %d FMA pipe%s at an assumed %.1f GHz; two channels of DDR4-3200%s",
		 cores, lanes, pipes, pipes > 1 ? "s" : "", NOMINAL_CPU_GHZ,
		 t->emulated ? " (emulated: the timings are the emulator's)" : "");
}

/* ---- ceilings: throughput no measurement on a key's hardware beats ------------------- */

/* The highest dense throughput of any part of each CUDA architecture, per
 * input dtype, tensor cores included (data sheets; float32 as TF32 on tensor
 * cores, which tird's code may not use but a ceiling must not assume; the
 * GeForce parts' figures with float16 accumulation, their fastest).  The
 * ceiling is CUDA_MARGIN times the figure: boost clocks above the data
 * sheet's, structured sparsity (2:4), which doubles a data-sheet peak and
 * which no tird kernel uses, and a narrower type than the workload's (FP8
 * for float16 on sm_89 and sm_90, INT4 for int8 on sm_80 to sm_89: twice
 * the rate, and no tird kernel's) all stay under it. */
typedef struct cuda_ceiling {
	int sm;
	tir_dtype dtype;
	double tflops;            /* TOP/s for int8 */
	const char *part;
} cuda_ceiling;

static const cuda_ceiling cuda_ceilings[] = {
	{ 80, TIR_F32, 156, "A100 SXM's dense TF32 tensor-core peak" },
	{ 80, TIR_F16, 312, "A100 SXM's dense tensor-core peak" },
	{ 80, TIR_BF16, 312, "A100 SXM's dense tensor-core peak" },
	{ 80, TIR_I8, 624, "A100 SXM's dense int8 tensor-core peak" },
	{ 86, TIR_F32, 77.4, "RTX A6000's dense TF32 tensor-core peak" },
	{ 86, TIR_F16, 160, "RTX 3090 Ti's dense tensor-core peak (float16 accumulation)" },
	{ 86, TIR_BF16, 160, "RTX 3090 Ti's dense tensor-core peak (float16 accumulation)" },
	{ 86, TIR_I8, 320, "RTX 3090 Ti's dense int8 tensor-core peak" },
	{ 89, TIR_F32, 183, "L40S's dense TF32 tensor-core peak" },
	{ 89, TIR_F16, 362, "L40S's dense tensor-core peak" },
	{ 89, TIR_BF16, 362, "L40S's dense tensor-core peak" },
	{ 89, TIR_I8, 733, "L40S's dense int8 tensor-core peak" },
	{ 90, TIR_F32, 495, "H200 SXM's dense TF32 tensor-core peak" },
	{ 90, TIR_F16, 989, "H200 SXM's dense tensor-core peak" },
	{ 90, TIR_BF16, 989, "H200 SXM's dense tensor-core peak" },
	{ 90, TIR_I8, 1979, "H200 SXM's dense int8 tensor-core peak" },
};
#define CUDA_MARGIN 2.0
/* An architecture without rows (a GPU detected with another sm): a
 * throughput above any GPU made (B200's dense int8: 4.5 POP/s). */
#define CUDA_UNKNOWN_TFLOPS 1e5

/* CPUs: no key says the clock, the core count or the pipes, so each is taken
 * above what parts have (no product of the three reaches the bound: the
 * largest machines, 2 x 192-core EPYC 9965 or 8 x 60-core Xeon 8490H, run
 * under 1,500 core-GHz all-core, against 512 x 6 = 3,072 here). */
#define CEILING_CPU_GHZ 6.0
#define CEILING_CPU_CORES 512
/* Vector pipes per core: on x86 two FMA pipes plus Zen's two FADD pipes
 * count as three FMA pipes' flops; AArch64 cores have up to four 128-bit
 * FMA pipes (Neoverse V2, Apple's). */
#define CEILING_X86_PIPES 3
#define CEILING_ARM_PIPES 4
/* The widest SVE registers made (A64FX's 512 bits): a key with "sve" does
 * not say its vector length.  An architecture without a feature table (this
 * machine's own "cpu:ARCH") is taken as wide, at CEILING_ARM_PIPES pipes. */
#define CEILING_SVE_BYTES 64

/* Multiply-adds per byte of a vector register, per input dtype, the widest
 * instruction of any ISA: float32 a 4-byte lane; 16-bit types one per byte
 * (bfmmla: 16 per 128 bits; avx512fp16 and fp16 FMAs half that); int8 two
 * per byte (smmla: 32 per 128 bits; vpdpbusd and sdot one). */
static double macs_per_byte(tir_dtype dt)
{
	switch (dt) {
	case TIR_F32: return 0.25;
	case TIR_F16: case TIR_BF16: return 1;
	default: return 2;
	}
}

/* AMX (Sapphire Rapids and later, whose keys name avx512vnni): a core's
 * tile unit does 512 bf16/f16 or 1,024 int8 multiply-adds a cycle. */
static double amx_macs(const tir_target *t, tir_dtype dt)
{
	if (strncmp(t->key, "cpu:x86_64", 10) || !tir_target_has(t, "avx512vnni") ||
	    dt == TIR_F32)
		return 0;
	return dt == TIR_I8 ? 1024 : 512;
}

static void one_ceiling(const tir_target *t, tir_dtype dt, tir_ceiling *out)
{
	if (dt == TIR_U8)          /* the int8 units (udot, AMX, IMMA) do uint8 as fast */
		dt = TIR_I8;
	*out = (tir_ceiling){ .unit = dt == TIR_I8 ? "OP/s" : "FLOP/s" };
	if (t->kind == TIR_TARGET_CUDA) {
		for (size_t i = 0; i < sizeof cuda_ceilings / sizeof cuda_ceilings[0]; i++)
			if (cuda_ceilings[i].sm == t->sm && cuda_ceilings[i].dtype == dt) {
				out->gflops = CUDA_MARGIN * cuda_ceilings[i].tflops * 1e3;
				snprintf(out->basis, sizeof out->basis, "%g x %s of %g %s",
					 CUDA_MARGIN, cuda_ceilings[i].part, cuda_ceilings[i].tflops,
					 dt == TIR_I8 ? "TOP/s" : "TFLOP/s");
				return;
			}
		out->gflops = CUDA_UNKNOWN_TFLOPS * 1e3;
		snprintf(out->basis, sizeof out->basis, "sm_%d has no row in tird's table: a "
			 "throughput above any GPU made", t->sm);
		return;
	}
	bool arm = !strncmp(t->key, "cpu:aarch64", 11), x86 = !strncmp(t->key, "cpu:x86_64", 10);
	int bytes = t->vector_bytes > 16 ? t->vector_bytes : 16;
	if ((arm && tir_target_has(t, "sve")) || (!arm && !x86))
		bytes = CEILING_SVE_BYTES;
	int pipes = x86 ? CEILING_X86_PIPES : CEILING_ARM_PIPES;
	double vec = pipes * bytes * macs_per_byte(dt), amx = amx_macs(t, dt);
	double macs = vec > amx ? vec : amx;
	out->gflops = 2 * macs * CEILING_CPU_GHZ * CEILING_CPU_CORES;
	if (amx > vec)
		snprintf(out->basis, sizeof out->basis, "%d cores x %.0f GHz x AMX's %.0f "
			 "multiply-adds a cycle", CEILING_CPU_CORES, CEILING_CPU_GHZ, amx);
	else
		snprintf(out->basis, sizeof out->basis, "%d cores x %.0f GHz x %d pipes x "
			 "%d-byte vectors x %g multiply-adds a byte", CEILING_CPU_CORES,
			 CEILING_CPU_GHZ, pipes, bytes, macs_per_byte(dt));
}

void tir_target_ceiling(const tir_target *t, int dtype, tir_ceiling *out)
{
	static const tir_dtype any[] = { TIR_F32, TIR_F16, TIR_BF16, TIR_I8 };
	if (dtype >= 0) {
		one_ceiling(t, (tir_dtype)dtype, out);
		return;
	}
	*out = (tir_ceiling){ 0 };
	for (size_t i = 0; i < sizeof any / sizeof any[0]; i++) {
		tir_ceiling c;
		one_ceiling(t, any[i], &c);
		if (c.gflops > out->gflops)
			*out = c;
	}
}

static void cuda_fill(tir_target *t, const cuda_arch *a)
{
	t->kind = TIR_TARGET_CUDA;
	snprintf(t->key, sizeof t->key, "cuda:sm_%d", a->sm);
	t->sm = a->sm;
	t->sm_count = a->sm_count;
	t->max_threads_per_block = a->max_threads;
	t->max_shared_per_block = a->max_shared;
	t->warp_size = 32;
	t->l2_bytes = a->l2_bytes;
}

bool tir_cuda_part_of_name(const char *name, char *out, size_t n)
{
	size_t k = 0;
	if (!strncasecmp(name, "nvidia ", 7))
		name += 7;
	for (; *name && k + 1 < n; name++) {
		char c = *name;
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
			out[k++] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
		else if (k > 0 && out[k - 1] != '-')
			out[k++] = '-';
	}
	while (k > 0 && out[k - 1] == '-')
		k--;
	out[k] = '\0';
	return k > 0;
}

/* "cuda:sm_XY" or "cuda:sm_XY+PART": PART as tir_cuda_part_of_name makes
 * one (letters, digits and single '-' inside), any part, since no table
 * could list every board; the limits are the architecture's. */
static int cuda_parse_key(const char *s, tir_target *t, tir_error *err)
{
	const char *p = s + 5;
	int sm = 0, n = 0;
	if (strncmp(p, "sm_", 3) != 0 || sscanf(p + 3, "%d%n", &sm, &n) != 1 ||
	    (p[3 + n] != '\0' && p[3 + n] != '+') || n < 2 || n > 3 || p[3] < '0' ||
	    p[3] > '9')
		return tir_fail(err, "target \"%s\": expected cuda:sm_XY or cuda:sm_XY+PART, "
				"e.g. cuda:sm_90 or cuda:sm_90+h200", s);
	const char *part = p[3 + n] == '+' ? p + 4 + n : NULL;
	if (part) {
		size_t len = strlen(part);
		bool ok = len > 0 && len < TIR_CUDA_PART_MAX && part[0] != '-' &&
			  part[len - 1] != '-';
		for (size_t i = 0; ok && i < len; i++) {
			char c = part[i];
			ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
			     (c == '-' && part[i + 1] != '-');
		}
		if (!ok)
			return tir_fail(err, "target \"%s\": the part \"%s\" must be lower-case "
					"letters and digits, words joined by single '-', at most "
					"%d characters (as a worker detects it: cuda:sm_90+h200, "
					"cuda:sm_90+h100-80gb-hbm3)", s, part, TIR_CUDA_PART_MAX - 1);
	}
	for (size_t i = 0; i < sizeof cuda_archs / sizeof cuda_archs[0]; i++)
		if (cuda_archs[i].sm == sm) {
			cuda_fill(t, &cuda_archs[i]);
			if (part)
				snprintf(t->key, sizeof t->key, "cuda:sm_%d+%s", sm, part);
			return 0;
		}
	return tir_fail(err, "target \"%s\": unknown architecture sm_%d (known: sm_80, "
			"sm_86, sm_89, sm_90)", s, sm);
}

/* A bare "cuda": the first GPU, asked of the driver in a child process
 * (tir_cuda_device_props), so this process never initialises CUDA and its forked
 * measurement children still can. */
static int cuda_detect(tir_target *t, tir_error *err)
{
	return tir_cuda_device_props(0, t, err);
}

/* ---- entry point ------------------------------------------------------------------- */

int tir_target_parse(const char *s, tir_target *t, tir_error *err)
{
	memset(t, 0, sizeof *t);
	if (!s)
		return tir_fail(err, "target: none given");
	if (!strcmp(s, "cpu"))
		return cpu_detect(t, err);
	if (!strcmp(s, "cuda"))
		return cuda_detect(t, err);
	if (!strncmp(s, "cpu:", 4))
		return cpu_parse_key(s, t, err);
	if (!strncmp(s, "cuda:", 5))
		return cuda_parse_key(s, t, err);
	return tir_fail(err, "target: unknown target \"%s\" (expected cpu, cuda, "
			"cpu:ARCH+FEATURES, cuda:sm_XY or cuda:sm_XY+PART)", s);
}
