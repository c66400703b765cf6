#!/usr/bin/env bash
# bench/cpu_tune.sh — tuned vs naive vs OpenBLAS / oneDNN on this CPU
# (bench/cpu_tune.c), with the date, the machine and the command, into
# bench/results/<date>-cpu-tune.txt (and on the terminal).
#
#   bench/cpu_tune.sh BUILD_DIR [cpu_tune options: --trials N --only sgemm-1024,C2D-0 ...]
#
# BUILD_DIR is a configured build tree; `make bench` is run there first.
set -eu
build=$(cd "${1:?usage: $0 BUILD_DIR [options]}" && pwd)
shift
here=$(cd "$(dirname "$0")" && pwd)
make -C "$build" -s bench >&2
out="$here/results/$(date +%F)-cpu-tune.txt"
mkdir -p "$here/results"
{
	echo "date:    $(date -Iseconds)"
	echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores," \
		"$(lscpu | grep -o 'avx512f\|avx2' | sort -u | tr '\n' ' ')"
	echo "command: bench/cpu_tune $*"
	echo "commit:  $(git -C "$here/.." rev-parse --short HEAD 2>/dev/null || echo '?')" \
		"$(git -C "$here/.." status --porcelain 2>/dev/null | grep -q . && echo '(with uncommitted changes)')"
	"$build/bench/cpu_tune" "$@"
} | tee "$out"
echo "written to $out" >&2
