#!/usr/bin/env bash
# bench/cpu_tune.sh — tuned vs naive vs OpenBLAS / oneDNN on this CPU
# (bench/cpu_tune.c), with the date, the machine and the command, into
# bench/results/<date>-cpu-tune.txt (and on the terminal).
#
#   bench/cpu_tune.sh BUILD_DIR [--out FILE] [cpu_tune options: --trials N --only sgemm-1024,C2D-0 ...]
#   bench/cpu_tune.sh BUILD_DIR --before BEFORE_DIR [--out FILE] [cpu_tune options]
#
# BUILD_DIR (and BEFORE_DIR) are configured build trees; `make bench` is run
# in each first.  With --before, two builds in one run, interleaved: for each
# workload (those of --only, or sgemm-1024 and the suite's NHWC conv2d), the
# BEFORE build tunes it, then BUILD_DIR's tunes it and times the peers, so a
# change in the machine's load falls on both alike.  The table gives each
# one's tuned time beside oneDNN's (and OpenBLAS's for sgemm) and the
# throughput ratios, a geomean over the convolutions, and each row as it is
# done (a run cut short keeps its rows).  Written to FILE (default
# bench/results/<date>-cpu-tune-ab.txt).
set -eu
build=$(cd "${1:?usage: $0 BUILD_DIR [--before BEFORE_DIR [--out FILE]] [options]}" && pwd)
shift
here=$(cd "$(dirname "$0")" && pwd)
before="" out=""
while [ $# -gt 0 ]; do
	case $1 in
	--before) before=$(cd "${2:?--before needs a build directory}" && pwd); shift 2 ;;
	--out) out=${2:?--out needs a file}; shift 2 ;;
	*) break ;;
	esac
done
make -C "$build" -s bench >&2
mkdir -p "$here/results"

header() {
	echo "date:    $(date -Iseconds)"
	echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores," \
		"$(lscpu | grep -o 'avx512f\|avx2' | sort -u | tr '\n' ' ')"
	echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) at the start"
	echo "command: bench/cpu_tune.sh $*"
	echo "commit:  $(git -C "$here/.." rev-parse --short HEAD 2>/dev/null || echo '?')" \
		"$(git -C "$here/.." status --porcelain --untracked-files=no 2>/dev/null | grep -q . &&
		   echo '(with uncommitted changes)')"
}

if [ -z "$before" ]; then
	[ -n "$out" ] || out="$here/results/$(date +%F)-cpu-tune.txt"
	{
		header "$build" "$@"
		"$build/bench/cpu_tune" "$@"
	} | tee "$out"
	echo "written to $out" >&2
	exit 0
fi

make -C "$before" -s bench >&2
[ -n "$out" ] || out="$here/results/$(date +%F)-cpu-tune-ab.txt"
# the workloads: --only's, or sgemm and the suite's NHWC conv2d
names="" opts=()
while [ $# -gt 0 ]; do
	case $1 in
	--only) names=$(echo "${2:?--only needs names}" | tr ',' ' '); shift 2 ;;
	*) opts+=("$1"); shift ;;
	esac
done
if [ -z "$names" ]; then
	names="sgemm-1024 $(jq -r '.[] | select(.workload.op == "conv2d" and .workload.layout == "NHWC") | .name' \
		"$here/suite.json" | tr '\n' ' ')"
fi
# the row of NAME in cpu_tune's table: tuned_us openblas_us onednn_us
row() { awk -v n="$2" '$1 == n { print $4, $5, $6; exit }' "$1"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
	header "$build" --before "$before" "${opts[@]}" --only "$(echo $names | tr ' ' ',')"
	echo "before:  $before"
	echo "after:   $build"
	echo "each row: BEFORE tuned, then AFTER tuned and the peers (oneDNN; OpenBLAS for sgemm), $(printf '%s ' "${opts[@]}")"
	echo "ratios: peer time / tuned time (> 1: tuned is faster); after/before: before time / after time"
	echo
	printf '%-10s %11s %11s %11s %11s | %9s %9s %9s %9s\n' workload before_us after_us openblas_us \
		onednn_us bef/dnnl aft/dnnl aft/oblas aft/bef
} | tee "$out"
for n in $names; do
	"$before/bench/cpu_tune" "${opts[@]}" --only "$n" --no-naive --no-peers > "$tmp/b" 2> "$tmp/b.err" || true
	"$build/bench/cpu_tune" "${opts[@]}" --only "$n" --no-naive > "$tmp/a" 2> "$tmp/a.err" || true
	read -r b _ _ <<< "$(row "$tmp/b" "$n")" || b=-
	read -r a o d <<< "$(row "$tmp/a" "$n")" || a=- o=- d=-
	awk -v n="$n" -v b="${b:--}" -v a="${a:--}" -v o="${o:--}" -v d="${d:--}" 'function r(p, t) {
		return (p + 0 > 0 && t + 0 > 0) ? sprintf("%9.3f", p / t) : sprintf("%9s", "-") }
		BEGIN { printf "%-10s %11s %11s %11s %11s | %s %s %s %s\n", n, b, a, o, d,
			r(d, b), r(d, a), r(o, a), r(b, a) }' | tee -a "$out"
done
# geomeans over the convolutions (every row but sgemm's)
awk '/^workload /{t=1; next} t && NF >= 10 && $1 != "sgemm-1024" {
	if ($7 + 0 > 0) { lb += log($7); nb++ } if ($8 + 0 > 0) { la += log($8); na++
		if (min == "" || $8 < min) { min = $8; mn = $1 } } }
	END { if (nb) printf "\ngeomean over %d convolutions: before/oneDNN %.3f", nb, exp(lb / nb)
	      if (na) printf ", after/oneDNN %.3f (over %d; lowest %s %.3f)", exp(la / na), na, mn, min
	      print "" }' "$out" | tee -a "$out"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) at the end" | tee -a "$out"
echo "written to $out" >&2
