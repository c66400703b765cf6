#!/bin/bash
# chaos.sh — tird and its workers killed with SIGKILL at random moments over
# many small tuning jobs, the database's disk filled once, and what is left
# checked (run by `make check` from the build directory in its short mode;
# needs curl, jq, python3 and sqlite3, else it is skipped).
#
# A real tird on a loopback port (CHAOS_PORT, else a free one) with a
# temporary database and CHAOS_WORKERS (2) real tird-worker processes of this
# CPU.  CHAOS_JOBS small matmul jobs (distinct workloads, 4 trials in
# batches of 2, ranked by the random model: XGBoost's training of its seeded
# model would take most of the time; and no seed: replaying it makes each
# first start slow, under ThreadSanitizer minutes) are submitted while CHAOS_KILLS kill
# points go by, each after
# a random pause of 0.2 to CHAOS_MAX_GAP_S seconds: tird (3 in 5) or one
# worker gets SIGKILL and is started again at once, so kills land during
# start-up, leases, measurements, results and stores alike.  Once, halfway,
# the filesystem of the database is filled (as root: the database lives on a
# tmpfs of CHAOS_TMPFS_MB, filled by a file until ENOSPC, so SQLite answers
# SQLITE_FULL; elsewhere this step is skipped, and says so), tird is killed
# while it is full and started on the full disk, then the file is removed.
# After the last kill every job must end; then tird is stopped and the
# database is checked:
#   - PRAGMA integrity_check is ok;
#   - no duplicated record: ids distinct, and no trace stored twice for one
#     workload and target;
#   - no lost record: every result a worker was told was taken (its log's
#     "batch B: N results taken", counted per worker id) is a stored record
#     measured by that worker id, and no record is stored that no worker
#     reported;
#   - every best is the minimum of its checked (ok, trusted) records, and its
#     trials their count;
#   - every job is done, its trials_done the records counted for its
#     workload and target.
# The short mode (6 kills, 6 jobs) takes about a minute on two loaded
# cores; the long run is CHAOS_KILLS=100 CHAOS_JOBS=40 (bench/results/).
# A summary line gives the figures.  TIRD_TEST_KEEP=1 keeps the folder.
set -u
top=$(pwd)
TIRD=$top/daemon/tird
WORKER=$top/daemon/tird-worker
TIRCTL=$top/client/tirctl
kills=${CHAOS_KILLS:-6}
njobs=${CHAOS_JOBS:-6}
nworkers=${CHAOS_WORKERS:-2}
max_gap=${CHAOS_MAX_GAP_S:-2}   # whole seconds
tmpfs_mb=${CHAOS_TMPFS_MB:-256}
finish_s=${CHAOS_FINISH_S:-600}
for t in curl jq python3 sqlite3; do
	command -v $t >/dev/null 2>&1 || { echo "SKIP: $t not installed"; exit 77; }
done
[ -x "$TIRD" ] && [ -x "$WORKER" ] && [ -x "$TIRCTL" ] || { echo "FAIL: binaries not built"; exit 1; }
ASAN_OPTIONS=${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0; export ASAN_OPTIONS

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tird-chaos.XXXXXX")
dbdir=$tmp/db
mkdir -p "$dbdir"
mounted=0
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=${tmpfs_mb}m tird-chaos "$dbdir" 2>/dev/null; then
	mounted=1
fi
fails=0
tird_pid=
wpid=()
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
cleanup() {
	[ -n "$tird_pid" ] && kill -9 "$tird_pid" 2>/dev/null
	for p in "${wpid[@]}"; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	if [ "$fails" -ne 0 ]; then
		for f in "$tmp"/*.log; do echo "---- $f"; tail -30 "$f"; done
	fi
	if [ -n "${TIRD_TEST_KEEP:-}" ]; then
		[ $mounted = 1 ] && cp -a "$dbdir" "$tmp/db-copy" 2>/dev/null
		[ $mounted = 1 ] && umount "$dbdir"
		echo "kept $tmp"
	else
		[ $mounted = 1 ] && umount "$dbdir"
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
port=${CHAOS_PORT:-$(free_port)}
url=http://127.0.0.1:$port
export TIRD_URL=$url TIRD_TOKEN=chaos-token-0123456789
echo "$TIRD_TOKEN" > "$tmp/token"
db=$dbdir/chaos.db
starts=0
start_tird() {
	"$TIRD" --listen 127.0.0.1:$port --db "$db" --local-workers none --lease-s 2 \
		--worker-wait-s 3600 --tuning-threads 2 --model-seed none --token-file "$tmp/token" \
		>>"$tmp/tird.log" 2>&1 &
	tird_pid=$!
	starts=$((starts + 1))
}
up() { curl -sf -m 2 "$url/healthz" >/dev/null 2>&1; }
wait_up() {   # at most N tenths of a second
	for i in $(seq 1 "$1"); do up && return 0; kill -0 "$tird_pid" 2>/dev/null || return 1; sleep 0.1; done
	return 1
}
start_worker() {   # SLOT
	"$WORKER" --server "$url" --target cpu --name "chaos$1" >>"$tmp/worker$1.log" 2>&1 &
	wpid[$1]=$!
}
submitted=0
submit() {   # the next job, when tird answers
	[ $submitted -lt $njobs ] || return 0
	n=$((8 + submitted))
	body="{\"workload\":{\"op\":\"matmul\",\"M\":8,\"N\":$n,\"K\":8},\"target\":\"cpu\",\"trials\":4,\"batch\":2,\"search\":{\"cost_model\":\"random\"}}"
	code=$(curl -s -m 2 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TIRD_TOKEN" \
		-X POST --data-binary "$body" "$url/v1/jobs")
	case $code in 200|201|202) submitted=$((submitted + 1)) ;; esac
}
# a pause of 0.2 to max_gap seconds; a number in 1..N
pause() { ms=$((200 + RANDOM % (max_gap * 1000 - 199))); sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"; }
pick() { echo $((1 + RANDOM % $1)); }

start_tird
wait_up 1200 || { fail "tird did not start"; exit 1; }
pass "tird up on $url (database on $([ $mounted = 1 ] && echo "a ${tmpfs_mb} MB tmpfs" || echo "$tmp"))"
for s in $(seq 1 "$nworkers"); do start_worker "$s"; done
submit; submit

# ---- the kill points -------------------------------------------------------------------------
tird_kills=0 worker_kills=0 full_at=$(( (kills + 1) / 2 )) full_done=0 full_hit=0 full_start=
t0=$(date +%s)
for k in $(seq 1 "$kills"); do
	pause
	submit
	if [ $mounted = 1 ] && [ $k = $full_at ]; then
		# fill the disk, let tird meet SQLITE_FULL, kill it while full and
		# start it on the full disk; then free the space
		# (the WAL checkpointed and truncated first: else its old frames,
		# rewritten in place, are room that tird's next writes take)
		sqlite3 -batch "$db" '.timeout 10000' 'PRAGMA wal_checkpoint(TRUNCATE)' >/dev/null 2>&1
		dd if=/dev/zero of="$dbdir/filler" bs=64k >/dev/null 2>&1
		before=$(grep -c 'disk is full' "$tmp/tird.log")
		for i in $(seq 1 300); do
			[ "$(grep -c 'disk is full' "$tmp/tird.log")" -gt "$before" ] && { full_hit=1; break; }
			sleep 0.1
		done
		sleep 1
		kill -9 "$tird_pid"; wait "$tird_pid" 2>/dev/null
		tird_kills=$((tird_kills + 1))
		start_tird
		if wait_up 300; then full_start="started on the full disk"
		else full_start="did not start on the full disk: $(tail -n 1 "$tmp/tird.log")"; fi
		rm -f "$dbdir/filler"
		full_done=1
		kill -0 "$tird_pid" 2>/dev/null || start_tird
		continue
	fi
	if [ "$(pick 5)" -le 3 ] || [ "$nworkers" = 0 ]; then
		kill -9 "$tird_pid"; wait "$tird_pid" 2>/dev/null
		tird_kills=$((tird_kills + 1))
		start_tird
	else
		s=$(pick "$nworkers")
		kill -9 "${wpid[$s]}"; wait "${wpid[$s]}" 2>/dev/null
		worker_kills=$((worker_kills + 1))
		start_worker "$s"
	fi
done
kill_s=$(( $(date +%s) - t0 ))
pass "$kills kill points in $kill_s s: tird $tird_kills, workers $worker_kills"
if [ $mounted = 1 ]; then
	[ $full_hit = 1 ] && pass "disk filled: tird met SQLITE_FULL ($(grep -c 'disk is full' "$tmp/tird.log") log lines), was killed and $full_start" \
		|| fail "disk filled: no 'disk is full' in tird's log within 30 s"
else
	echo "SKIP disk full: not root, or tmpfs cannot be mounted here"
fi

# ---- every job ends ----------------------------------------------------------------------------
wait_up 1200 || { start_tird; wait_up 1200; } || fail "tird does not come up after the kills"
for i in $(seq 1 600); do [ $submitted -lt $njobs ] || break; submit; sleep 0.1; done
[ $submitted = $njobs ] || fail "only $submitted of $njobs jobs could be submitted"
pending() {
	n=$(curl -sf -m 5 "$url/v1/jobs?limit=1000" | jq '[.jobs[] | select(.state=="queued" or .state=="running")] | length' 2>/dev/null)
	[ "$n" = 0 ]
}
t1=$(date +%s)
for i in $(seq 1 "$finish_s"); do pending && break; sleep 1; done
pending && pass "every job ended, $(( $(date +%s) - t1 )) s after the last kill" \
	|| fail "jobs still queued or running $finish_s s after the last kill: $(curl -s "$url/v1/jobs?limit=1000" | jq -c '[.jobs[] | select(.state=="queued" or .state=="running") | .job_id]')"
kill -TERM "$tird_pid"
for i in $(seq 1 300); do kill -0 "$tird_pid" 2>/dev/null || break; sleep 0.1; done
kill -9 "$tird_pid" 2>/dev/null; wait "$tird_pid" 2>/dev/null
for p in "${wpid[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done

# ---- the database ------------------------------------------------------------------------------
q() { sqlite3 -batch -noheader "$db" "$1"; }
ic=$(q 'PRAGMA integrity_check')
[ "$ic" = ok ] && pass "integrity_check: ok" || fail "integrity_check: $ic"
nrec=$(q 'SELECT count(*) FROM records')
dup=$(q 'SELECT count(*) - count(DISTINCT id) FROM records')
dtrace=$(q 'SELECT count(*) FROM (SELECT 1 FROM records GROUP BY workload_key, target, trace HAVING count(*) > 1)')
[ "$dup" = 0 ] && [ "$dtrace" = 0 ] && pass "$nrec records, ids distinct, no trace stored twice" \
	|| fail "duplicates: $dup ids, $dtrace traces stored twice"

# taken per worker id, from the workers' logs
cat "$tmp"/worker*.log | awk '
	/registered with .* as / { for (i = 1; i <= NF; i++) if ($i == "as") id = $(i + 1) }
	/ results taken$/ { for (i = 1; i <= NF; i++) if ($i == "results") n[id] += $(i - 1) }
	END { for (w in n) print w, n[w] }' | sort > "$tmp/taken.txt"
q "SELECT worker, count(*) FROM records WHERE origin = 'measured' GROUP BY worker" | tr '|' ' ' | sort > "$tmp/stored.txt"
taken=$(awk '{ s += $2 } END { print s + 0 }' "$tmp/taken.txt")
lost=$(join -a 1 -e 0 -o 1.1,1.2,2.2 "$tmp/taken.txt" "$tmp/stored.txt" | awk '$2 > $3 { s += $2 - $3 } END { print s + 0 }')
extra=$(join -a 2 -e 0 -o 2.1,1.2,2.2 "$tmp/taken.txt" "$tmp/stored.txt" | awk '$3 > $2 { s += $3 - $2 } END { print s + 0 }')
[ "$lost" = 0 ] && [ "$extra" = 0 ] && [ "$taken" -gt 0 ] \
	&& pass "every one of the $taken results the workers were told were taken is stored, none other" \
	|| fail "results taken $taken: $lost not stored, $extra stored that no worker reported (per worker: taken / stored: $(join -a 1 -a 2 -e 0 -o 0,1.2,2.2 "$tmp/taken.txt" "$tmp/stored.txt" | tr '\n' ';'))"

# a best: the ok trusted record of the least latency (none: no record), and
# its trials the trusted records counted
badbest=$(q "CREATE TEMP VIEW ok AS SELECT * FROM records WHERE status = 'ok' AND trusted = 1;
	SELECT b.workload_key || ': best ' || coalesce(b.latency_us, 'none') || ' us (' || coalesce(b.record_id, 'no record')
		|| '), least ok ' || coalesce((SELECT min(latency_us) FROM ok WHERE ok.workload_key = b.workload_key
		AND ok.target = b.target), 'none') || ', ' || b.trials || ' trials'
	FROM best b WHERE
		b.latency_us IS NOT (SELECT min(latency_us) FROM ok WHERE ok.workload_key = b.workload_key AND ok.target = b.target)
		OR (b.record_id IS NULL) != (b.latency_us IS NULL)
		OR (b.record_id IS NOT NULL AND b.latency_us IS NOT (SELECT latency_us FROM ok WHERE ok.id = b.record_id
			AND ok.workload_key = b.workload_key AND ok.target = b.target))
		OR b.trials != (SELECT count(*) FROM records r WHERE r.workload_key = b.workload_key
			AND r.target = b.target AND r.trusted = 1)")
nbest=$(q 'SELECT count(*) FROM best')
[ -z "$badbest" ] && [ "$nbest" -gt 0 ] && pass "each of the $nbest bests is the minimum of its checked records, its trials their count" \
	|| fail "bests ($nbest): $badbest"

njob=$(q 'SELECT count(*) FROM jobs')
notdone=$(q "SELECT id || ' ' || state || ' ' || coalesce(message, '') FROM jobs WHERE state != 'done'")
# (a submission whose answer a kill cut off is sent again: it joins its job,
# or, had that job ended meanwhile, makes a cached one: njob may exceed njobs)
[ -z "$notdone" ] && [ "$njob" -ge "$njobs" ] && pass "all $njob jobs done" \
	|| fail "jobs: $njob of $njobs, not done: $notdone"
badtd=$(q "SELECT id || ': trials_done ' || trials_done || ', records ' || (SELECT count(*) FROM records r
		WHERE r.workload_key = j.workload_key AND r.target = j.target AND r.trusted = 1) FROM jobs j
	WHERE trials_done != (SELECT count(*) FROM records r WHERE r.workload_key = j.workload_key
		AND r.target = j.target AND r.trusted = 1) OR trials_done < trials")
[ -z "$badtd" ] && pass "every job's trials_done is its records counted, at least its trials" \
	|| fail "trials_done: $badtd"

errs=$(q "SELECT count(*) FROM records WHERE status != 'ok'")
echo "chaos: $kills kill points (tird $tird_kills, workers $worker_kills) in $kill_s s, tird started $starts times," \
	"disk full $([ $mounted = 1 ] && echo "once ($full_start)" || echo skipped); $njob jobs, $nrec records" \
	"($errs not ok), $taken results taken, $lost lost, $extra unreported, $dup duplicate ids; integrity $ic"
[ $fails -eq 0 ]
