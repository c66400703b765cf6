#!/usr/bin/env bash
# bench/gpu.sh — tird against PyTorch on this machine's GPU, in one run.
#
#   bench/gpu.sh BINDIR SUITE_JSON TRIALS [--dtypes "float32 float16"] [--big]
#                [--deadline SECONDS] [--logs DIR] [--jobs N] [--seed N] [--no-peer] [NAME...]
#
# Starts a real tird (no local workers) on a loopback port with a temporary
# database and one tird-worker for target cuda; tunes each suite workload
# (every one without NAMEs) in each dtype with TRIALS trials, and with --big
# also matmul 4096^3 in float16; then measures the same workloads with PyTorch
# (bench/torch_peer.py: cuDNN / cuBLAS, channels-last, TF32 off, CUDA-graph
# replay, as bench/suite.md).  BINDIR holds tird, tird-worker
# and tirctl.  Prints one line per task:
#   name dtype trials errors tuning_s cand_per_s tird_us torch_us torch/tird
# and the geometric mean of torch/tird per dtype.  On a GPU machine without
# the build's libraries, carry the binaries with the Debian libraries ldd
# lists (never libc, libstdc++, libjq: a carried libjq breaks the machine's
# jq) and run with LD_LIBRARY_PATH=CARRIED_LIB:/usr/local/nvidia/lib64.  With --deadline, no task
# starts tuning after SECONDS (the peer still measures those done); each
# tuned task is also printed as it ends ("tuned: ...").  With --logs, the
# logs of tird and the worker and tird's database are copied to DIR at the end.  Without
# --jobs, tird runs one job at a time (--tuning-threads 1) and each task is
# submitted when the one before has ended, so tuning_s is the task's own time;
# with --jobs N (tird's default is 2) every task is submitted at once, as a CI
# posting the suite would, tird tunes N jobs at a time (one job's search and
# model update overlap another's measuring), tuning_s is each job's own
# started-to-finished time (overlapping others), and a last line gives the
# candidates per second of the whole run, wall clock; --deadline then cancels
# the jobs not started by SECONDS.  --no-peer skips PyTorch (tuning only, e.g.
# for bench/gpu_harness.sh, which times both sides itself).  --seed N gives
# every job the search seed N (repeatable searches, e.g. to compare two ways
# of measuring: bench/gpu_l2.sh).  Needs jq and python3 with torch.
set -u
bin=$1 suite=$2 trials=$3
shift 3
dtypes="float32 float16" big=0 deadline=0 logs= njobs=0 peer=1 seed=()
while [ $# -gt 0 ]; do
	case $1 in
	--dtypes) dtypes=$2; shift 2 ;;
	--big) big=1; shift ;;
	--deadline) deadline=$2; shift 2 ;;
	--logs) logs=$2; shift 2 ;;
	--jobs) njobs=$2; shift 2 ;;
	--no-peer) peer=0; shift ;;
	--seed) seed=(--seed "$2"); shift 2 ;;
	*) break ;;
	esac
done
names=("$@")
[ ${#names[@]} -gt 0 ] || mapfile -t names < <(jq -r '.[].name' "$suite")
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
port=$(( 20000 + RANDOM % 20000 ))
url=http://127.0.0.1:$port
"$bin/tird" --listen 127.0.0.1:$port --db "$tmp/tird.db" --local-workers none \
	--default-batch 64 --tuning-threads $(( njobs > 0 ? njobs : 1 )) >"$tmp/tird.log" 2>&1 &
tpid=$!
for i in $(seq 1 100); do curl -sf "$url/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
"$bin/tird-worker" --server "$url" --target cuda --name gpu0 >"$tmp/worker.log" 2>&1 &
wpid=$!
trap 'kill $wpid $tpid 2>/dev/null; wait 2>/dev/null
      [ -n "$logs" ] && cp "$tmp"/tird.log "$tmp"/worker.log "$tmp"/tird.db* "$logs/" 2>/dev/null
      rm -rf "$tmp"' EXIT

tasks=()
for d in $dtypes; do
	for n in "${names[@]}"; do
		w=$(jq -c ".[] | select(.name==\"$n\") | .workload + {dtype: \"$d\"}" "$suite")
		[ -n "$w" ] && tasks+=("$n $d $w")
	done
	[ $big = 1 ] && [ "$d" = float16 ] &&
		tasks+=("GMM-4096 $d {\"op\":\"matmul\",\"M\":4096,\"N\":4096,\"K\":4096,\"dtype\":\"$d\"}")
done

: >"$tmp/tird.txt"
start=$(date +%s)
done_tasks=()
# --jobs: submit everything, then wait for each job in turn
ids=()
for t in "${tasks[@]}"; do
	[ "$njobs" -gt 0 ] || break
	read -r n d w <<<"$t"
	id=$(printf '%s\n' "$w" | "$bin/tirctl" --server "$url" --json tune - --target cuda \
		--trials "$trials" "${seed[@]}" 2>"$tmp/err" | jq -r '.job_id // empty')
	[ -n "$id" ] || echo "# $n $d: $(head -c 300 "$tmp/err")" >&2
	ids+=("${id:-0}")
done
for i in "${!ids[@]}"; do
	t=${tasks[$i]} id=${ids[$i]}
	read -r n d w <<<"$t"
	if [ "$deadline" -gt 0 ] && [ $(( $(date +%s) - start )) -ge "$deadline" ] &&
	   [ "$("$bin/tirctl" --server "$url" --json status "$id" | jq -r .state)" = queued ]; then
		"$bin/tirctl" --server "$url" cancel "$id" >/dev/null 2>&1
		continue
	fi
	out=$("$bin/tirctl" --server "$url" --json wait "$id" 2>"$tmp/err")
	st=$("$bin/tirctl" --server "$url" --json status "$id" 2>/dev/null)
	state=$(printf '%s' "$st" | jq -r '.state // empty' 2>/dev/null)
	[ "$state" = cancelled ] && continue
	done_tasks+=("$t")
	us=$(printf '%s' "$out" | jq -r '.latency_us // empty' 2>/dev/null)
	tr=$(printf '%s' "$st" | jq -r '.trials_done // empty' 2>/dev/null)
	er=$(printf '%s' "$st" | jq -r '.errors // 0' 2>/dev/null)
	s=$(printf '%s' "$st" | jq -r 'if .started and .finished then (.finished - .started) * 10 | round / 10 else "-" end' 2>/dev/null)
	echo "$n $d ${tr:--} ${er:--} $s ${us:-failed}" >>"$tmp/tird.txt"
	echo "tuned: $n $d ${tr:--} ${er:--} $s ${us:-failed}"
	[ -n "$us" ] || { echo "# $n $d: $state $(printf '%s' "$st" | jq -r '.message // empty' 2>/dev/null) $(head -c 300 "$tmp/err")" >&2; }
done
if [ "$njobs" -gt 0 ]; then
	wall=$(( $(date +%s) - start ))
	awk -v w="$wall" -v j="$njobs" '{ if ($3 ~ /^[0-9]+$/) n += $3 }
	     END { printf "# %d jobs at a time: %d candidates in %d s wall = %.1f candidates/s\n", j, n, w, (w > 0 ? n / w : 0) }' \
		"$tmp/tird.txt" >"$tmp/wall.txt"
	cat "$tmp/wall.txt"
fi
for t in "${tasks[@]}"; do
	[ "$njobs" -eq 0 ] || break
	if [ "$deadline" -gt 0 ] && [ $(( $(date +%s) - start )) -ge "$deadline" ]; then
		echo "# deadline: ${#done_tasks[@]} of ${#tasks[@]} tasks tuned" >&2
		break
	fi
	done_tasks+=("$t")
	read -r n d w <<<"$t"
	printf '%s\n' "$w" >"$tmp/w.json"
	t0=$(date +%s.%N)
	out=$("$bin/tirctl" --server "$url" --json tune "$tmp/w.json" --target cuda \
		--trials "$trials" "${seed[@]}" --wait 2>"$tmp/err")
	t1=$(date +%s.%N)
	us=$(printf '%s' "$out" | jq -r '.latency_us // empty' 2>/dev/null)
	tr=$(printf '%s' "$out" | jq -r '.trials // empty' 2>/dev/null)
	er=$(printf '%s' "$out" | jq -r '.errors // 0' 2>/dev/null)
	s=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')
	echo "$n $d ${tr:--} ${er:--} $s ${us:-failed}" >>"$tmp/tird.txt"
	echo "tuned: $n $d ${tr:--} ${er:--} $s ${us:-failed}"
	[ -n "$us" ] || { echo "# $n $d: $(head -c 300 "$tmp/err")" >&2; }
done
kill $wpid 2>/dev/null; wait $wpid 2>/dev/null   # the GPU to the peer alone

if [ $peer = 1 ]; then
	printf '%s\n' "${done_tasks[@]}" | python3 "$here/torch_peer.py" >"$tmp/torch.txt" 2>"$tmp/torch.err"
else
	: >"$tmp/torch.txt"
fi

printf '%-9s %-8s %6s %6s %8s %7s %11s %10s %8s\n' name dtype trials errors tuning_s cand/s \
	tird_us torch_us ratio
awk 'FILENAME == ARGV[1] { t[$1 " " $2] = $3; next }
     { key = $1 " " $2; tu = $6; pu = (key in t) ? t[key] : "-";
       cps = ($5 > 0 && $3 ~ /^[0-9]+$/) ? $3 / $5 : 0;
       r = "-";
       if (tu ~ /^[0-9.]+$/ && pu ~ /^[0-9.]+$/) {
         r = sprintf("%.3f", pu / tu); lg[$2] += log(pu / tu); cnt[$2]++
       }
       tus = (tu ~ /^[0-9.]+$/) ? sprintf("%.2f", tu) : tu;
       printf "%-9s %-8s %6s %6s %8s %7.1f %11s %10s %8s\n", $1, $2, $3, $4, $5, cps, tus, pu, r }
     END { for (d in cnt) printf "geomean torch/tird %s: %.3f over %d workloads\n", d, exp(lg[d] / cnt[d]), cnt[d] }' \
	"$tmp/torch.txt" "$tmp/tird.txt"
[ -s "$tmp/torch.err" ] && { echo "--- torch_peer.py stderr"; tail -5 "$tmp/torch.err"; }
echo "--- tird log (last lines)"; tail -3 "$tmp/tird.log"
echo "--- worker log (last lines)"; tail -3 "$tmp/worker.log"
