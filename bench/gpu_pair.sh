#!/usr/bin/env bash
# bench/gpu_pair.sh — bench/gpu.sh for float32 and float16 at once, one dtype
# per GPU of a two-GPU machine (each with its own tird and tird-worker).
#
#   bench/gpu_pair.sh BINDIR SUITE_JSON TRIALS OUTDIR [--big] [--deadline S] [NAME...]
#
# Writes OUTDIR/float32 and OUTDIR/float16 (gpu.sh's output as out.txt, its
# logs and database) and prints both tables.  --big adds matmul 4096^3 to the
# float16 half.  Same environment as gpu.sh (LD_LIBRARY_PATH for carried
# binaries).
set -u
bin=$1 suite=$2 trials=$3 out=$4
shift 4
big= deadline=400
while [ $# -gt 0 ]; do
	case $1 in
	--big) big=--big; shift ;;
	--deadline) deadline=$2; shift 2 ;;
	*) break ;;
	esac
done
here=$(cd "$(dirname "$0")" && pwd)
gpu=0
for d in float32 float16; do
	mkdir -p "$out/$d"
	extra=
	[ $d = float16 ] && extra=$big
	CUDA_VISIBLE_DEVICES=$gpu bash "$here/gpu.sh" "$bin" "$suite" "$trials" --dtypes $d \
		$extra --deadline "$deadline" --logs "$out/$d" "$@" >"$out/$d/out.txt" 2>&1 &
	gpu=$((gpu + 1))
done
wait
for d in float32 float16; do
	grep -v '^tuned' "$out/$d/out.txt" | sed '/^--- tird log/,$d'
done
