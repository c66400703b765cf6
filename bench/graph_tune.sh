#!/usr/bin/env bash
# bench/graph_tune.sh — graph workloads tuned through tird beside PyTorch, in one run.
#
#   bench/graph_tune.sh BINDIR cpu|cuda TRIALS [--compile] [--threads N] [--fusion M|none] GRAPH.json...
#
# Starts a real tird on a loopback port with a temporary database and one
# tird-worker for the target (no other local workers); plans each graph
# document (tuner/fusion/: --fusion M, inductor by default, or tvm, eager,
# measured — its decisions printed as "# NAME measured: ..." lines) and
# tunes each kernel as a workload of its own, one job at a time, TRIALS
# trials (tirctl tune --fusion: the graph's time is the kernels' sum); with
# --fusion none, the whole graph as one program.  Then runs the same documents
# with PyTorch (bench/graph_peer.py: eager, and torch.compile with
# --compile where PyTorch has it; on the CPU with --threads N, default the
# cores) on the same shapes.  Prints one line per graph:
#   name trials errors tuning_s tird_us tird_GB/s eager_us eager_GB/s compiled_us compiled_GB/s eager/tird compiled/tird
#        tird_k eager_k comp_k
# where the _k columns are the kernels one run launches (tird: the CUDA
# kernels of its best programs' code, or on the CPU the programs; PyTorch:
# the profiler's CUDA kernels, - on the CPU)
# where GB/s is the graph's ideal traffic (every input read once, every
# output written once; graph_peer.py computes it) over the time.  BINDIR
# holds tird, tird-worker and tirctl (a build tree's daemon/ and client/
# binaries, or a folder with all three).  Needs jq and python3 with torch
# (Debian's python3-torch on the CPU: deploy/install-deps.sh --bench).
set -u
bin=$1 target=$2 trials=$3
shift 3
compile= threads= fusion=
while [ $# -gt 0 ]; do
	case $1 in
	--compile) compile=--compile; shift ;;
	--threads) threads="--threads $2"; shift 2 ;;
	--fusion) fusion=$2; shift 2 ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || { sed -n '2,20p' "$0"; exit 2; }
find_bin() { for p in "$bin/$1" "$bin/daemon/$1" "$bin/client/$1"; do [ -x "$p" ] && { echo "$p"; return; }; done; echo "graph_tune.sh: no $1 in $bin" >&2; exit 2; }
TIRD=$(find_bin tird) WORKER=$(find_bin tird-worker) TIRCTL=$(find_bin tirctl)
here=$(cd "$(dirname "$0")" && pwd)
py=python3; [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import torch' 2>/dev/null && py=/usr/bin/python3
tmp=$(mktemp -d)
port=$(( 20000 + RANDOM % 20000 ))
url=http://127.0.0.1:$port
"$TIRD" --listen 127.0.0.1:$port --db "$tmp/tird.db" --local-workers none \
	--tuning-threads 1 >"$tmp/tird.log" 2>&1 &
tpid=$!
for i in $(seq 1 300); do curl -sf "$url/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
"$WORKER" --server "$url" --target "$target" --name bench >"$tmp/worker.log" 2>&1 &
wpid=$!
trap 'kill $wpid $tpid 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT

: >"$tmp/tird.txt"
for g in "$@"; do
	n=$(basename "$g" .json)
	t0=$(date +%s.%N)
	out=$("$TIRCTL" --server "$url" --json tune "$g" --target "$target" --trials "$trials" \
		${fusion:+--fusion "$fusion"} --wait 2>"$tmp/err")
	t1=$(date +%s.%N)
	us=$(printf '%s' "$out" | jq -r '.latency_us // empty' 2>/dev/null)
	if [ "${fusion:-inductor}" != none ]; then
		ids=$(printf '%s' "$out" | jq -r '.kernels[].job_id' 2>/dev/null)
		keys=$(printf '%s' "$out" | jq -r '.kernels[].workload_key' 2>/dev/null)
	else
		ids=$("$TIRCTL" --server "$url" --json jobs | jq -r '.jobs[0].job_id')
		keys=$(printf '%s' "$out" | jq -r '.workload_key // empty' 2>/dev/null)
	fi
	tr=0 er=0 k=0
	for id in $ids; do
		st=$("$TIRCTL" --server "$url" --json status "$id")
		tr=$(( tr + $(printf '%s' "$st" | jq -r '.trials_done // 0') ))
		er=$(( er + $(printf '%s' "$st" | jq -r '.errors // 0') ))
	done
	for key in $keys; do
		if [ "$target" = cuda ]; then
			k=$(( k + $("$TIRCTL" --server "$url" show "$key" --target cuda --source | grep -c '__global__') ))
		else
			k=$(( k + 1 ))
		fi
	done
	s=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')
	[ "$fusion" = measured ] && printf '%s' "$out" | jq -r --arg n "$n" '.decisions[]? |
		"# \($n) measured: \(.kernel) fused \(.fused_us) us, parts \(.parts_us) us: \(if .kept then "kept" else "undone" end)"'
	echo "$n ${tr:--} ${er:--} $s ${us:-failed} $k" >>"$tmp/tird.txt"
	echo "tuned: $n ${tr:--} ${er:--} $s ${us:-failed} $k"
	[ -n "$us" ] || echo "# $n: $(head -c 400 "$tmp/err")" >&2
done
kill $wpid 2>/dev/null; wait $wpid 2>/dev/null   # the hardware to the peer alone

# shellcheck disable=SC2086
$py "$here/graph_peer.py" --device "$target" $compile $threads "$@" >"$tmp/peer.txt" 2>"$tmp/peer.err"
printf '%-12s %6s %6s %8s %11s %9s %11s %9s %11s %9s %9s %9s %6s %7s %6s\n' name trials errors \
	tuning_s tird_us tird_GB/s eager_us eager_GB/s compiled_us comp_GB/s eager/tird comp/tird \
	tird_k eager_k comp_k
awk 'FILENAME == ARGV[1] { if ($3 ~ /^[0-9.]+$/) { us[$1 " " $2] = $3; by[$1] = $4; kk[$1 " " $2] = $6 } next }
     { n = $1; tu = $5; e = us[n " eager"]; c = us[n " compiled"]; b = by[n];
       tg = (tu ~ /^[0-9.]+$/ && b) ? sprintf("%.1f", b / (tu * 1e3)) : "-";
       eg = (e && b) ? sprintf("%.1f", b / (e * 1e3)) : "-";
       cg = (c && b) ? sprintf("%.1f", b / (c * 1e3)) : "-";
       re = (e && tu ~ /^[0-9.]+$/) ? sprintf("%.3f", e / tu) : "-";
       rc = (c && tu ~ /^[0-9.]+$/) ? sprintf("%.3f", c / tu) : "-";
       ek = kk[n " eager"]; ck = kk[n " compiled"];
       printf "%-12s %6s %6s %8s %11s %9s %11s %9s %11s %9s %9s %9s %6s %7s %6s\n", n, $2, $3, $4,
              tu ~ /^[0-9.]+$/ ? sprintf("%.2f", tu) : tu, tg, e ? e : "-", eg, c ? c : "-", cg, re, rc,
              $6, ek ? ek : "-", ck ? ck : "-" }' "$tmp/peer.txt" "$tmp/tird.txt"
grep -h failed "$tmp/peer.txt" 2>/dev/null | sed 's/^/# peer: /'
[ -s "$tmp/peer.err" ] && { echo "--- graph_peer.py stderr"; tail -5 "$tmp/peer.err"; }
echo "--- tird log (last lines)"; tail -3 "$tmp/tird.log"
echo "--- worker log (last lines)"; tail -2 "$tmp/worker.log"
