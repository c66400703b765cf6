#!/usr/bin/env bash
# bench/tune_ab.sh — where the seconds of one tuning job go, for two builds
# of tird measured in one run, interleaved (A B, then B A, ...: timings on a
# shared machine drift over minutes).  Each run starts a fresh tird with a
# temporary database and a local worker, tunes one suite workload with a
# fixed seed and `tirctl tune --wait`, and reads the job's per-round log
# lines back: the search, the waits for the measurements, the recording and
# model update on the job's time, the model's training beside it (builds
# that log it), and the wait for the model's last training at the end.
#
#   bench/tune_ab.sh A_BINDIR B_BINDIR SUITE_JSON NAME TARGET TRIALS SEED...
#
# A BINDIR holds tird, tird-worker and tirctl.  One line per run:
#   build seed wall_s best_us rounds search_s measure_s update_s train_s drain_s
# then the mean of each column per build (measure_s sums the batches'
# measuring times, which overlap where a job keeps batches in flight at
# once: a GPU job's; tird's log line "after round R ...: N candidates/s"
# gives the job's own rate).  With TUNE_AB_LOGS=DIR set, each
# run's tird log is kept as DIR/BUILD-SEED.log (the per-round lines: the
# candidates a second and how busy the measurer was).
set -u
a=$1 b=$2 suite=$3 name=$4 target=$5 trials=$6
shift 6
seeds=("$@")
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
jq ".[] | select(.name==\"$name\") | .workload" "$suite" > "$tmp/w.json"
[ -s "$tmp/w.json" ] || { echo "tune_ab.sh: no workload $name in $suite" >&2; exit 2; }

one() {  # one run: label, bindir, seed
	local label=$1 bin=$2 seed=$3 port url t0 t1 out
	port=$(( 20000 + RANDOM % 20000 ))
	url=http://127.0.0.1:$port
	rm -f "$tmp/tird.db"*
	"$bin/tird" --listen 127.0.0.1:$port --db "$tmp/tird.db" --local-workers "$target" \
		>"$tmp/tird.log" 2>&1 &
	pid=$!
	for _ in $(seq 1 300); do curl -sf "$url/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
	t0=$(date +%s.%N)
	out=$("$bin/tirctl" --server "$url" --json tune "$tmp/w.json" --target "$target" \
		--trials "$trials" --seed "$seed" --wait 2>"$tmp/err")
	t1=$(date +%s.%N)
	kill $pid 2>/dev/null
	wait $pid 2>/dev/null
	pid=
	[ -n "${TUNE_AB_LOGS:-}" ] && mkdir -p "$TUNE_AB_LOGS" && cp "$tmp/tird.log" "$TUNE_AB_LOGS/$label-$seed.log"
	printf '%s' "$out" | jq -r '.latency_us // "failed"' > "$tmp/best"
	awk -v label="$label" -v seed="$seed" -v t0="$t0" -v t1="$t1" -v best="$(cat "$tmp/best")" '
		/: round [0-9]+, / {
			n++
			for (i = 1; i <= NF; i++) {
				if ($i == "search") s += $(i + 1)
				if ($i == "measuring") m += $(i + 1)
				if ($i == "update") u += $(i + 1)
				if ($i == "training") tr += $(i + 1)
			}
		}
		/the model learnt the last batches in/ {
			for (i = 1; i <= NF; i++) if ($i == "in") d = $(i + 1)
		}
		END { printf "%-6s %4s %7.2f %10s %3d %7.2f %8.2f %7.2f %7.2f %6.2f\n",
			label, seed, t1 - t0, best, n, s, m, u, tr, d }' "$tmp/tird.log"
}

printf '%-6s %4s %7s %10s %3s %7s %8s %7s %7s %6s\n' build seed wall_s best_us rnd \
	search_s measure_s update_s train_s drain_s
k=0
for seed in "${seeds[@]}"; do
	if [ $((k % 2)) = 0 ]; then
		one A "$a" "$seed"; one B "$b" "$seed"
	else
		one B "$b" "$seed"; one A "$a" "$seed"
	fi
	k=$((k + 1))
done | tee "$tmp/runs"
awk '{ n[$1]++; for (i = 3; i <= 10; i++) if (i != 4) s[$1, i] += $i; if ($4 != "failed") b[$1] += log($4) }
     END { for (l in n) printf "mean %-1s %4s %7.2f %10.1f %3.0f %7.2f %8.2f %7.2f %7.2f %6.2f\n",
	       l, n[l] "x", s[l, 3] / n[l], exp(b[l] / n[l]), s[l, 5] / n[l], s[l, 6] / n[l],
	       s[l, 7] / n[l], s[l, 8] / n[l], s[l, 9] / n[l], s[l, 10] / n[l] }' "$tmp/runs" | sort
