#!/usr/bin/env bash
# codegen-dump.sh — writes the generated code of the benchmark suite into a
# folder, so that two builds can be compared byte for byte (a refactoring of
# tuner/codegen/ or tuner/sketch/ must leave it unchanged):
#
#   tools/codegen-dump.sh TIRCTL SUITE OUTDIR [SAMPLES]
#   diff -r OUTDIR_BEFORE OUTDIR_AFTER && echo identical
#
# For every suite workload, in float32 and float16: the program and code of
# the unscheduled workload and of its hand-written traces (examples/traces/
# NAME.cpu.json on three CPU targets, NAME.cuda.json on two CUDA targets),
# and SAMPLES (default 4) sampled sketch candidates per target and dtype
# (`tirctl lower --sample`, seed 1), each candidate's trace and source.
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,13p' "$0"; exit 2; }
tirctl=$1 suite=$2 out=$3 samples=${4:-4}
here=$(cd "$(dirname "$0")/.." && pwd)
traces=$here/examples/traces
mkdir -p "$out"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cpus="cpu:x86_64+avx2+fma cpu:x86_64+avx2+fma+avx512f+avx512bw+avx512vnni cpu:aarch64+neon+dotprod"
gpus="cuda:sm_80 cuda:sm_90"
for name in $(jq -r '.[].name' "$suite"); do
	for dt in float32 float16; do
		w=$tmp/$name.$dt.json
		jq --arg n "$name" --arg d "$dt" '.[] | select(.name==$n) | .workload + {dtype: $d}' "$suite" > "$w"
		for t in $cpus $gpus; do
			case $t in cpu*) tr=$traces/$name.cpu.json ;; *) tr=$traces/$name.cuda.json ;; esac
			base=$out/$name.$dt.${t//[:+]/_}
			"$tirctl" --json lower "$w" --target "$t" > "$base.plain" 2>&1 || true
			[ -f "$tr" ] && { "$tirctl" --json lower "$w" --target "$t" --trace "$tr" > "$base.trace" 2>&1 || true; }
			"$tirctl" --json lower "$w" --target "$t" --sample "$samples" --seed 1 2>&1 |
				jq -r '.candidates[]? | .trace, .source' > "$base.sample" 2>&1 || true
		done
	done
	echo "$name" >&2
done
