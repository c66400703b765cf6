#!/usr/bin/env bash
# bench/gpu_l2.sh — one way of measuring against another, on the GPU machine:
# tunes the same workloads, in the same order, with the same search seed, on
# a fresh database, with the CUDA runner's timed calls on a cold L2
# (TIRD_CUDA_L2=cold, the default: the calls rotate through copies of the
# arguments that span twice the L2) or a warm one (TIRD_CUDA_L2=warm: every
# call on one set of buffers, as the runner did before 2026-12-02), then packs
# the bests and builds the pack, for bench/gpu_harness.sh to time each pack
# the same five ways.
#
#   bench/gpu_l2.sh BINDIR OUTDIR MODE TRIALS SEED [NAME...]
#
# MODE is cold or warm.  Writes OUTDIR/MODE/: gpu.txt (bench/gpu.sh's lines:
# name dtype trials errors tuning_s ... tird_us), the logs and tird.db, and
# pack/ (tirctl pack --target cuda, built with make).  The tuning is
# bench/gpu.sh BINDIR bench/suite.json TRIALS --big --jobs 2 --seed SEED
# --no-peer NAME...  Then, per mode:
#   bench/gpu_harness.sh BINDIR OUTDIR/MODE/pack bench/suite.json OUTDIR/MODE/h --big NAME...
set -u
bin=$1 out=$2 mode=$3 trials=$4 seed=$5
shift 5
here=$(cd "$(dirname "$0")" && pwd)
case $mode in cold|warm) ;; *) echo "gpu_l2.sh: MODE must be cold or warm, not \"$mode\"" >&2; exit 2 ;; esac
dir=$out/$mode
rm -rf "$dir" && mkdir -p "$dir" || exit 1
t0=$(date +%s)
TIRD_CUDA_L2=$mode "$here/gpu.sh" "$bin" "$here/suite.json" "$trials" --big --jobs 2 \
	--seed "$seed" --no-peer --logs "$dir" "$@" >"$dir/gpu.txt" 2>"$dir/gpu.err"
rc=$?
echo "# $mode: tuned in $(( $(date +%s) - t0 )) s (rc $rc)"
grep -v '^tuned:' "$dir/gpu.txt"
port=$(( 20000 + RANDOM % 20000 ))
"$bin/tird" --listen 127.0.0.1:$port --db "$dir/tird.db" --local-workers none >"$dir/pack-tird.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
"$bin/tirctl" --server "http://127.0.0.1:$port" pack --target cuda --out "$dir/pack" >"$dir/pack.log" 2>&1
rc=$?
kill $pid 2>/dev/null
wait $pid 2>/dev/null
[ $rc = 0 ] && make -s -C "$dir/pack" >>"$dir/pack.log" 2>&1
rc=$?
echo "# $mode: pack rc $rc, $(jq '.kernels | length' "$dir/pack/manifest.json" 2>/dev/null) kernels"
exit $rc
