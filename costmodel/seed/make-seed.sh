#!/usr/bin/env bash
# costmodel/seed/make-seed.sh — measures the records the CPU cost model is
# seeded with (costmodel/seed/cpu.records; see costmodel/seed/README.md).
#
#   costmodel/seed/make-seed.sh BUILD SUITE TRIALS OUT [NAME...]
#
# Starts the tird of build tree BUILD on a loopback port with a temporary
# database and this machine's CPU as its only worker, tunes every workload of
# SUITE (../shared/workloads/suite.json) but the three 3-D convolutions of
# 4-11 GFLOP (C3D-0, C3D-2, C3D-3: on a 2-core VM the first did not finish
# its first batch in two minutes), or the NAMEs, for TRIALS trials
# under the random cost model (an unbiased sample of each workload's search
# space, not the picks of a model), seeds 1, 2, ..., and writes every record
# to OUT with `tirctl export`.  Prints one line per workload.
set -eu
[ $# -ge 4 ] || { sed -n 4,14p "$0" >&2; exit 2; }
build=$1 suite=$2 trials=$3 out=$4; shift 4
tird=$build/daemon/tird ctl=$build/client/tirctl
[ -x "$tird" ] && [ -x "$ctl" ] || { echo "make-seed: no tird or tirctl under $build" >&2; exit 1; }
names=("$@")
[ ${#names[@]} -gt 0 ] || mapfile -t names < <(jq -r \
	'.[].name | select(. != "C3D-0" and . != "C3D-2" and . != "C3D-3")' "$suite")
tmp=$(mktemp -d)
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
url=http://127.0.0.1:$port
"$tird" --listen 127.0.0.1:$port --db "$tmp/tird.db" --local-workers cpu >"$tmp/tird.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for i in $(seq 1 100); do curl -sf "$url/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
seed=0
for n in "${names[@]}"; do
	seed=$((seed + 1))
	jq ".[] | select(.name==\"$n\") | .workload" "$suite" >"$tmp/w.json"
	[ -s "$tmp/w.json" ] || { echo "make-seed: $n is not in $suite" >&2; exit 1; }
	t0=$(date +%s)
	r=$("$ctl" --server "$url" --json tune "$tmp/w.json" --target cpu --trials "$trials" \
		--cost-model random --seed $seed --wait 2>&1 | jq -r '.latency_us // .error // .' 2>&1 || true)
	echo "$n: $r us ($(( $(date +%s) - t0 )) s)"
done
"$ctl" --server "$url" export "$out"
