#!/usr/bin/env bash
# codegen-dump.sh — writes the generated code of the benchmark suite into a
# folder, so that two builds can be compared byte for byte (a refactoring of
# tuner/codegen/, tuner/sketch/ or tuner/sched/ must leave it unchanged):
#
#   tools/codegen-dump.sh TIRCTL SUITE OUTDIR [SAMPLES]
#   diff -r OUTDIR_BEFORE OUTDIR_AFTER && echo identical
#
# For every suite workload, in float32, float16 and int8 (the int8 GMMs are
# what AArch64's sdot sketches and x86's and CUDA's int8 paths take), the
# program and code of the unscheduled workload (NAME.DTYPE.TARGET.plain) and
# of its hand-written trace (.trace: examples/traces/NAME.cpu.json on three
# CPU targets, NAME.cuda.json on two CUDA targets), and SAMPLES (default 4)
# sampled sketch candidates per target and dtype (.sample: `tirctl lower
# --sample`, seed 1, each candidate's trace and source, or the error that
# stopped the sampling: AArch64 candidates do not compile on an x86 machine).
# Then float16 and bfloat16 matmuls whose wgmma candidates fetch by TMA
# (sm_90, 3 x 2*SAMPLES samples).  Each output is what tirctl printed, so a
# difference in an error message shows too.  About 8 minutes on 2 cores.
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,19p' "$0"; exit 2; }
tirctl=$1 suite=$2 out=$3 samples=${4:-4}
here=$(cd "$(dirname "$0")/.." && pwd)
traces=$here/examples/traces
mkdir -p "$out"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cpus="cpu:x86_64+avx2+fma cpu:x86_64+avx2+fma+avx512f+avx512bw+avx512vnni cpu:aarch64+neon+dotprod"
gpus="cuda:sm_80 cuda:sm_90"

# NAME.sample from WORKLOAD on TARGET, N candidates of seed S
sample() {   # WORKLOAD TARGET N S OUT
	if "$tirctl" --json lower "$1" --target "$2" --sample "$3" --seed "$4" > "$tmp/s.json" 2> "$tmp/s.err"; then
		jq -r '.candidates[] | .trace, .source' "$tmp/s.json" > "$5"
	else
		cp "$tmp/s.err" "$5"
	fi
}

for name in $(jq -r '.[].name' "$suite"); do
	for dt in float32 float16 int8; do
		w=$tmp/$name.$dt.json
		jq --arg n "$name" --arg d "$dt" '.[] | select(.name==$n) | .workload + {dtype: $d}' "$suite" > "$w"
		for t in $cpus $gpus; do
			case $t in cpu*) tr=$traces/$name.cpu.json ;; *) tr=$traces/$name.cuda.json ;; esac
			base=$out/$name.$dt.${t//[:+]/_}
			"$tirctl" --json lower "$w" --target "$t" > "$base.plain" 2>&1 || true
			[ -f "$tr" ] && { "$tirctl" --json lower "$w" --target "$t" --trace "$tr" > "$base.trace" 2>&1 || true; }
			sample "$w" "$t" "$samples" 1 "$base.sample"
		done
	done
	echo "$name" >&2
done

i=0
for w in '{"op":"matmul","M":256,"N":512,"K":512,"dtype":"float16"}' \
	 '{"op":"matmul","M":512,"N":256,"K":256,"dtype":"bfloat16","layout":"TN"}' \
	 '{"op":"matmul","batch":3,"M":128,"N":128,"K":256,"dtype":"float16"}'; do
	echo "$w" > "$tmp/tma$i.json"
	for s in 1 2 3; do
		sample "$tmp/tma$i.json" cuda:sm_90 $((2 * samples)) "$s" "$out/TMA-$i.seed$s.cuda_sm_90.sample"
	done
	i=$((i + 1))
done
echo "TMA matmuls" >&2
