#!/usr/bin/env bash
# costmodel/seed/make-seed.sh — measures the records a new cost model is
# seeded with (costmodel/seed/KIND.records; see costmodel/seed/README.md).
#
#   costmodel/seed/make-seed.sh [--target cpu|cuda] [--dtypes "D..."]
#                               [--deadline S] [--cost-model M]
#                               BUILD SUITE TRIALS OUT [NAME...]
#
# Starts the tird of BUILD (a build tree, or a folder holding tird and
# tirctl) on a loopback port with a temporary database and this machine's
# CPU (or, --target cuda, its GPU) as its only worker, tunes every workload
# of SUITE (bench/suite.json), or the NAMEs, in each of the
# dtypes (default: the suite's own), for TRIALS trials under the random cost
# model (an unbiased sample of each workload's search space, not the picks
# of a model), seeds 1, 2, ..., and writes every record to OUT with
# `tirctl export`.  With --cost-model xgboost the workloads are tuned under
# the model instead, one after the other, by a tird started without a seed
# (--model-seed none): its shared model learns from the workloads tuned
# before, and the records are a search's picks, crowded near each
# workload's best (see costmodel/seed/README.md for why the seed holds
# both).  For the CPU the three 3-D convolutions of 4-11 GFLOP (C3D-0,
# C3D-2, C3D-3) are left out unless named: on a 2-core VM the first did not
# finish its first batch in two minutes.  With --deadline, no task
# starts after S seconds (the records of those done are written).  Prints
# one line per task.
set -eu
target=cpu dtypes= deadline=0 model=random
while [ $# -gt 0 ]; do
	case $1 in
	--deadline) deadline=$2; shift 2 ;;
	--cost-model) model=$2; shift 2 ;;
	--target) target=$2; shift 2 ;;
	--dtypes) dtypes=$2; shift 2 ;;
	*) break ;;
	esac
done
[ "$model" = random ] || [ "$model" = xgboost ] ||
	{ echo "make-seed: --cost-model $model: not random or xgboost" >&2; exit 2; }
[ $# -ge 4 ] && { [ "$target" = cpu ] || [ "$target" = cuda ]; } || { sed -n 4,25p "$0" >&2; exit 2; }
build=$1 suite=$2 trials=$3 out=$4; shift 4
tird=$build/daemon/tird ctl=$build/client/tirctl worker=$build/daemon/tird-worker
[ -x "$tird" ] || tird=$build/tird
[ -x "$ctl" ] || ctl=$build/tirctl
[ -x "$worker" ] || worker=$build/tird-worker
[ -x "$tird" ] && [ -x "$ctl" ] || { echo "make-seed: no tird or tirctl under $build" >&2; exit 1; }
names=("$@")
skip='select(true)'
[ "$target" = cpu ] && skip='select(. != "C3D-0" and . != "C3D-2" and . != "C3D-3")'
[ ${#names[@]} -gt 0 ] || mapfile -t names < <(jq -r ".[].name | $skip" "$suite")
tmp=$(mktemp -d)
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
url=http://127.0.0.1:$port
# the GPU through a tird-worker, as bench/gpu.sh measures it
local=$target
[ "$target" = cuda ] && local=none
seedopt=
[ "$model" = random ] || seedopt="--model-seed none"
"$tird" --listen 127.0.0.1:$port --db "$tmp/tird.db" --local-workers $local $seedopt >"$tmp/tird.log" 2>&1 &
pids=$!
trap 'kill $pids 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
for i in $(seq 1 100); do curl -sf "$url/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
if [ "$target" = cuda ]; then
	"$worker" --server "$url" --target cuda --name gpu0 >"$tmp/worker.log" 2>&1 &
	pids="$pids $!"
fi
seed=0 start=$(date +%s)
for n in "${names[@]}"; do
	for d in ${dtypes:-own}; do
		seed=$((seed + 1))
		if [ "$deadline" -gt 0 ] && [ $(( $(date +%s) - start )) -ge "$deadline" ]; then
			echo "$n $d: not started (--deadline $deadline)"
			continue
		fi
		set_dtype=
		[ "$d" = own ] || set_dtype="+ {dtype: \"$d\"}"
		jq ".[] | select(.name==\"$n\") | .workload $set_dtype" "$suite" >"$tmp/w.json"
		[ -s "$tmp/w.json" ] || { echo "make-seed: $n is not in $suite" >&2; exit 1; }
		t0=$(date +%s)
		r=$("$ctl" --server "$url" --json tune "$tmp/w.json" --target "$target" \
			--trials "$trials" --cost-model $model --seed $seed --wait 2>&1 |
			jq -r '.latency_us // .error // .' 2>&1 || true)
		echo "$n $d: $r us ($(( $(date +%s) - t0 )) s)"
	done
done
"$ctl" --server "$url" export "$out"
