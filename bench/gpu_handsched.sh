#!/usr/bin/env bash
# bench/gpu_handsched.sh — runs the hand-written GPU schedules of
# examples/traces/ (tests/schedules.c: sched_gpu_tiled) for suite workloads on
# a CUDA GPU through `tirctl lower --trace --run`, and prints each one's
# status, error against the reference and median time beside the PyTorch
# (cuDNN / cuBLAS) figure of bench/suite.md.
#
#   bench/gpu_handsched.sh TIRCTL SUITE_JSON SUITE_MD [NAME ...]
#
# With no names it runs every suite workload.  Output: one line per workload,
#   name  status  max_rel_error  tird_us  pytorch_us  pytorch/tird
set -u
tirctl=$1 suite=$2 readme=$3
shift 3
here=$(cd "$(dirname "$0")/.." && pwd)
names=("$@")
[ ${#names[@]} -gt 0 ] || mapfile -t names < <(jq -r '.[].name' "$suite")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-8s %-12s %-10s %10s %10s %8s\n' name status rel_err tird_us torch_us ratio
for n in "${names[@]}"; do
	jq ".[] | select(.name==\"$n\") | .workload" "$suite" > "$tmp/w.json"
	out=$("$tirctl" --json lower "$tmp/w.json" --target cuda --trace "$here/examples/traces/$n.cuda.json" --run 2>"$tmp/err")
	status=$(printf '%s' "$out" | jq -r '.status // "error"' 2>/dev/null)
	[ -n "$status" ] || status=error
	err=$(printf '%s' "$out" | jq -r '.max_rel_error // -1' 2>/dev/null)
	us=$(printf '%s' "$out" | jq -r '.median_us // 0' 2>/dev/null)
	# the float32 column of the README table: | name | f32 | f16 |
	ref=$(awk -F'|' -v n="$n" '{gsub(/ /,"",$2); sub(/\(.*/,"",$2)} $2==n {gsub(/ /,"",$3); print $3}' "$readme")
	ratio=-
	if [ -n "$ref" ] && [ "$status" = ok ]; then
		ratio=$(awk -v a="$ref" -v b="$us" 'BEGIN{printf "%.3f", a/b}')
	fi
	printf '%-8s %-12s %-10s %10s %10s %8s\n' "$n" "$status" "$err" "$us" "${ref:--}" "$ratio"
	[ "$status" = ok ] || head -c 300 "$tmp/err"
done
