#!/bin/sh
# replicas.sh — several tird replicas on one PostgreSQL, for real (run by
# `make check` from the build directory).
#
# It starts a throwaway PostgreSQL server as tests/postgres.sh does (initdb
# and pg_ctl, a free loopback port, a temporary folder), then two tird
# replicas on one database, each with a local CPU worker and short leases
# (--job-lease-s 3 --job-lease-renew-s 1), and checks:
#   (b) the same workload submitted to both while it runs: one job id, one
#       set of records (12 for 12 trials), all distinct;
#   (c) a cache hit on the replica that did not tune it, and the same best
#       on both; GET /v1/best answered from memory, and the best record
#       removed on one replica: the other's next answer the new best;
#   (d) a cancel on the replica that does not run a job: the owner stops it;
#   (a) kill -9 of the replica running a 24-trial job after 4 records: the
#       other takes it over within seconds and finishes it, 24 records, all
#       distinct, the best the fastest of them;
#   (e) SIGSTOP of the replica running a job past its lease: the other takes
#       it over; after SIGCONT the stopped one writes nothing over its work
#       (no state, no record: exactly the job's trials stored);
#   (f) a worker registered at replica D that leases at E and posts at D
#       (an haproxy splits its routes): the job done, every record stored
#       once; a post for a batch it does not hold: 409, nothing stored;
# and that the CPU cost model is written by one replica, the holder of its
# writer lease (--model-save-s 1: written a second after it learnt), and
# read by the other: within seconds of each write its copy (GET /v1/models)
# is the stored version, with the writer's rows; taken over by the
# survivor of (a) once the killed writer's lease passed, which then writes
# it (new versions, its own).
# A job may be claimed by either replica: the test finds its owner in the
# job's "owner" (HOST:PID:START) and acts on that replica.  It skips (exit
# 77) where PostgreSQL's server programs, psql, curl, jq or python3 are
# missing, or where tird was built without libpq.
set -u
top=$(pwd)
TIRD=$top/daemon/tird
for t in curl jq python3 psql; do
	command -v $t >/dev/null 2>&1 || { echo "SKIP: $t not installed"; exit 77; }
done
src=${srcdir:-$(dirname "$0")/..}
. "$src/tests/lib.sh"
. "$src/tests/pg_server.sh"
pg_find || { echo "SKIP: $pg_why"; exit 77; }
[ -x "$TIRD" ] || { echo "FAIL: tird not built"; exit 1; }
[ "${TIRD_HAVE_LIBPQ:-}" = 1 ] ||
	{ echo "SKIP: tird was built without the PostgreSQL store (configure found no libpq)"; exit 77; }
ASAN_OPTIONS=${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0; export ASAN_OPTIONS

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tird-rep.XXXXXX")
fails=0
pids=""
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
pgdata=$tmp/pg
cleanup() {
	for p in $pids; do kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done
	pg_stop "$pgdata"
	if [ "$fails" -ne 0 ]; then
		for f in "$tmp"/*.log "$pgdata"/server.log; do [ -f "$f" ] && { echo "---- $f"; tail -40 "$f"; }; done
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
until_ok() {   # TENTHS COMMAND...: true once COMMAND succeeds within TENTHS/10 s
	n=$1; shift
	for i in $(seq 1 "$n"); do "$@" && return 0; sleep 0.1; done
	return 1
}

# ---- the server -----------------------------------------------------------------------------
pg_start "$pgdata" -F -c shared_buffers=16MB || { fail "$pg_why"; exit 1; }
psql -qX -d "$pg/postgres" -c "CREATE DATABASE rep" >/dev/null || { fail "CREATE DATABASE"; exit 1; }
pass "a throwaway PostgreSQL on 127.0.0.1:$pgport"

# ---- two replicas -----------------------------------------------------------------------------
start() {   # NAME: a replica on a free port; its URL in url_NAME, its pid in pid_NAME
	p=$(free_port)
	"$TIRD" --listen 127.0.0.1:$p --db "$pg/rep" --model-seed none --local-workers cpu \
		--job-lease-s 3 --job-lease-renew-s 1 --model-save-s 1 >>"$tmp/$1.log" 2>&1 &
	pids="$pids $!"
	eval "url_$1=http://127.0.0.1:$p pid_$1=$!"
	wait_up "http://127.0.0.1:$p" || fail "replica $1 did not start"
}
start A
start B
rA=$(curl -s "$url_A/healthz" | jq -r .replica)
rB=$(curl -s "$url_B/healthz" | jq -r .replica)
[ -n "$rA" ] && [ "$rA" != "$rB" ] && [ "$(curl -s "$url_A/healthz" | jq -r .db_backend)" = postgresql ] &&
	pass "replicas A ($rA) and B ($rB) on one database" || fail "replica ids: '$rA' '$rB'"
# both local workers registered (each replica runs only jobs its workers serve)
live() { [ "$(curl -s "$1/v1/workers" | jq '[.workers[]|select(.state=="live")]|length')" -ge 1 ]; }
until_ok 300 live "$url_A" && until_ok 300 live "$url_B" || fail "local workers did not register"

submit() {   # URL WORKLOAD TRIALS BATCH: the answer in $tmp/r, the status in $code
	code=$(curl -s -o "$tmp/r" -w '%{http_code}' -X POST "$1/v1/jobs" \
		--data-binary "{\"workload\":$2,\"target\":\"cpu\",\"trials\":$3,\"batch\":$4}")
}
job() { curl -s "$1/v1/jobs/$2"; }
state_is() { job "$1" "$2" | jq -e --arg s "$3" '.state==$s' >/dev/null; }
rd=$url_A                  # the replica the checks read through (a live one)
owner_of() { job "$rd" "$1" | jq -r '.owner // ""'; }
# the replica whose id is $1: its name (A, B or C)
name_of() {
	for n in A B C; do eval "r=\${r$n:-}"; [ "$r" = "$1" ] && { echo $n; return; }; done
	echo ?
}
records() { curl -s "$rd/v1/records?workload=$1"; }
nrec() { records "$1" | jq '.records|length'; }
ndistinct() { records "$1" | jq '[.records[].id]|unique|length'; }
at_least() { [ "$(nrec "$1")" -ge "$2" ]; }
running_owned() { job "$rd" "$1" | jq -e '.state=="running" and (.owner//"")!=""' >/dev/null; }

# ---- (b) one job for one workload submitted to both -------------------------------------------
W2='{"op":"matmul","M":24,"N":24,"K":24}'
submit "$url_A" "$W2" 12 4; jb=$(jq -r .job_id "$tmp/r"); cb=$code
submit "$url_B" "$W2" 12 4; jb2=$(jq -r .job_id "$tmp/r")
[ "$cb" = 201 ] && [ "$jb" = "$jb2" ] && jq -e '.joined==true' "$tmp/r" >/dev/null &&
	pass "(b) the same workload on A and on B: one job ($jb), joined on B" ||
	fail "(b) jobs $jb ($cb) and $jb2: $(cat "$tmp/r")"
until_ok 600 state_is "$url_B" "$jb" done || fail "(b) job $jb did not end: $(job "$url_B" "$jb")"
kb=$(job "$url_A" "$jb" | jq -r .workload_key)
[ "$(nrec "$kb")" = 12 ] && [ "$(ndistinct "$kb")" = 12 ] &&
	pass "(b) one set of records: 12 for 12 trials, all distinct" ||
	fail "(b) $(nrec "$kb") records, $(ndistinct "$kb") distinct"

writer() { psql -qtAX -d "$pg/rep" -c "SELECT writer FROM cost_models WHERE length(model) > 0"; }
wrote() { [ "$(writer)" = "$1" ]; }
ob=$(name_of "$(owner_of "$jb")")
until_ok 100 wrote "$(eval echo \$r$ob)" &&
	pass "(b) the cost model is written by $ob, which learnt it, under its writer lease" ||
	fail "(b) cost model writer '$(writer)', expected $ob"
# the model as a replica holds it: "VERSION ROWS WRITER" of its CPU key's
model_of() { curl -s "$1/v1/models" | jq -r '.models[]|select(.target|startswith("cpu:"))|
	"\(.version) \(.rows) \(.writer)"' | head -1; }
dbversion() { psql -qtAX -d "$pg/rep" -c "SELECT version FROM cost_models WHERE target_kind LIKE 'cpu:%'"; }
# the reader's copy is the stored version, with the writer's rows
read_back() {   # WRITER_URL READER_URL
	w=$(model_of "$1"); r=$(model_of "$2"); v=$(dbversion)
	[ -n "$v" ] && [ "$w" = "$v ${w#* }" ] && [ "${w##* }" = true ] &&
		[ "$r" = "${w% *} false" ]
}
other=A; [ "$ob" = A ] && other=B
eval "obu=\$url_$ob ou=\$url_$other"
until_ok 100 read_back "$obu" "$ou" &&
	pass "(b) $other reads the model $ob wrote: version $(dbversion), $(model_of "$ou" | cut -d' ' -f2) rows on both" ||
	fail "(b) the model on $ob '$(model_of "$obu")', on $other '$(model_of "$ou")' (version, rows, writer), stored version '$(dbversion)'"
grep -q "cost model for cpu:.*: version [0-9]* read, written by another replica" "$tmp/$other.log" &&
	pass "(b) $other's log says it read the newer version" ||
	fail "(b) no read of a newer version in $other's log"

# ---- (c) a cache hit on the replica that did not tune it ---------------------------------------
other=A; [ "$ob" = A ] && other=B
eval "ou=\$url_$other"
submit "$ou" "$W2" 12 4
[ "$code" = 200 ] && jq -e '.cached==true and .state=="done"' "$tmp/r" >/dev/null &&
	pass "(c) a cache hit on $other for what $ob tuned" || fail "(c) $code $(cat "$tmp/r")"
bA=$(curl -s "$url_A/v1/best?op=matmul" | jq -r --arg k "$kb" '.best[]|select(.workload_key==$k)|.record_id')
bB=$(curl -s "$url_B/v1/best?op=matmul" | jq -r --arg k "$kb" '.best[]|select(.workload_key==$k)|.record_id')
[ -n "$bA" ] && [ "$bA" = "$bB" ] && pass "(c) the same best on both replicas" ||
	fail "(c) best '$bA' on A, '$bB' on B"
# each replica answers GET /v1/best from memory, and a best changed by the
# other reaches it at once (the NOTIFY of 005_best_notify.sql): the best
# record removed on the tuner, the next answer of the other is the new best
hits() { curl -s "$1/metrics" | sed -n 's/^tird_best_cache_hits_total //p'; }
h0=$(hits "$ou")
curl -s "$ou/v1/best?op=matmul" >/dev/null; curl -s "$ou/v1/best?op=matmul" >/dev/null
h1=$(hits "$ou")
[ -n "$h0" ] && [ -n "$h1" ] && [ "$h1" -gt "$h0" ] &&
	pass "(c) $other answers GET /v1/best from memory ($((h1 - h0)) hits)" ||
	fail "(c) $other's best cache hits: '$h0' then '$h1'"
eval "obu=\$url_$ob"
code=$(curl -s -o "$tmp/r" -w '%{http_code}' -X DELETE "$obu/v1/records/$bA")
bestof() { curl -s "$1/v1/best?op=matmul" | jq -r --arg k "$kb" '.best[]|select(.workload_key==$k)|.record_id'; }
moved_on() { b=$(bestof "$ou"); [ -n "$b" ] && [ "$b" != "$bA" ]; }
if [ "$code" = 200 ] && until_ok 20 moved_on; then
	[ "$(bestof "$ou")" = "$(bestof "$obu")" ] &&
		pass "(c) the best record removed on $ob: $other answers the new best within 2 s, the same as $ob's" ||
		fail "(c) after the removal: $other's best $(bestof "$ou"), $ob's $(bestof "$obu")"
else
	fail "(c) DELETE /v1/records/$bA on $ob: $code $(cat "$tmp/r"); $other still answers $(bestof "$ou")"
fi

# ---- (d) cancel on the replica that does not run the job ---------------------------------------
W3='{"op":"matmul","M":40,"N":40,"K":40}'
submit "$url_A" "$W3" 400 2; jd=$(jq -r .job_id "$tmp/r")
until_ok 300 running_owned "$jd" || fail "(d) job $jd did not start"
od=$(name_of "$(owner_of "$jd")"); other=A; [ "$od" = A ] && other=B
eval "ou=\$url_$other"
code=$(curl -s -o "$tmp/r" -w '%{http_code}' -X DELETE "$ou/v1/jobs/$jd")
[ "$code" = 202 ] && jq -e '.cancel_requested==true' "$tmp/r" >/dev/null &&
	pass "(d) cancel of job $jd (run by $od) asked on $other: 202" || fail "(d) $code $(cat "$tmp/r")"
until_ok 100 state_is "$ou" "$jd" cancelled && pass "(d) $od stopped it: cancelled" ||
	fail "(d) job $jd: $(job "$ou" "$jd")"

# ---- (a) kill -9 of the replica running a job ------------------------------------------------------
W1='{"op":"matmul","M":48,"N":48,"K":48}'
submit "$url_A" "$W1" 24 4; ja=$(jq -r .job_id "$tmp/r")
ka=$(jq -r .workload_key "$tmp/r")
until_ok 600 at_least "$ka" 4 || fail "(a) job $ja stored no 4 records"
oa=$(name_of "$(owner_of "$ja")"); other=A; [ "$oa" = A ] && other=B
eval "opid=\$pid_$oa ou=\$url_$other"
na=$(nrec "$ka")
v0=$(dbversion)
kill -9 "$opid"
t0=$(date +%s)
took_over() { job "$ou" "$ja" | jq -e --arg r "$(eval echo \$r$other)" '.owner==$r' >/dev/null; }
until_ok 150 took_over && pass "(a) $oa killed after $na records: $other took job $ja over in $(( $(date +%s) - t0 )) s" ||
	fail "(a) no takeover: $(job "$ou" "$ja")"
until_ok 600 state_is "$ou" "$ja" done || fail "(a) job $ja did not end: $(job "$ou" "$ja")"
n=$(curl -s "$ou/v1/records?workload=$ka" | jq '.records|length')
d=$(curl -s "$ou/v1/records?workload=$ka" | jq '[.records[].id]|unique|length')
mn=$(curl -s "$ou/v1/records?workload=$ka" | jq '[.records[]|select(.status=="ok")|.latency_us]|min')
best=$(curl -s "$ou/v1/best?op=matmul" | jq --arg k "$ka" '.best[]|select(.workload_key==$k)|.latency_us')
[ "$n" = 24 ] && [ "$d" = 24 ] && pass "(a) job $ja done: 24 records, all distinct" ||
	fail "(a) $n records, $d distinct"
[ -n "$best" ] && [ "$best" = "$mn" ] && pass "(a) the best ($best us) is the fastest record" ||
	fail "(a) best '$best', fastest record '$mn'"
until_ok 100 wrote "$(eval echo \$r$other)" &&
	pass "(a) the cost model's writer is now $other, the survivor" ||
	fail "(a) cost model writer '$(writer)', expected $other"
# the survivor writes the model now: its copy is the newest stored version
# (newer than the killed writer's last), and GET /v1/models says it writes
writes_now() {
	sv=$(model_of "$ou")
	[ "${sv##* }" = true ] && [ "${sv%% *}" = "$(dbversion)" ] && [ "${sv%% *}" -gt "${v0:-0}" ]
}
until_ok 50 writes_now &&
	pass "(a) $other writes the model: version ${sv%% *} (was ${v0:-none} before the kill), writer true" ||
	fail "(a) $other's model '$sv' (version, rows, writer), stored version '$(dbversion)', before the kill '${v0:-}'"

# ---- (e) SIGSTOP past the lease -----------------------------------------------------------------
sur=$other                 # the survivor of (a) and C, a new replica in the killed one's place
rd=$ou
start C
rC=$(curl -s "$url_C/healthz" | jq -r .replica)
until_ok 300 live "$url_C" || fail "(e) C's worker did not register"
W4='{"op":"matmul","M":56,"N":56,"K":56}'
submit "$url_C" "$W4" 32 4; je=$(jq -r .job_id "$tmp/r")
ke=$(jq -r .workload_key "$tmp/r")
until_ok 300 running_owned "$je" && until_ok 600 at_least "$ke" 4 || fail "(e) job $je did not start"
oe=$(name_of "$(owner_of "$je")"); other=C; [ "$oe" = C ] && other=$sur
eval "spid=\$pid_$oe ou=\$url_$other ro=\$r$other"
kill -STOP "$spid"
t0=$(date +%s)
taken() { job "$ou" "$je" | jq -e --arg r "$ro" '.owner==$r' >/dev/null; }
until_ok 150 taken && pass "(e) $oe stopped: the other took job $je over in $(( $(date +%s) - t0 )) s" ||
	fail "(e) no takeover: $(job "$ou" "$je")"
sleep 1
kill -CONT "$spid"
until_ok 600 state_is "$ou" "$je" done || fail "(e) job $je did not end: $(job "$ou" "$je")"
rd=$ou
sleep 2                    # time for the woken one to write, if it were to
n=$(curl -s "$ou/v1/records?workload=$ke" | jq '.records|length')
d=$(curl -s "$ou/v1/records?workload=$ke" | jq '[.records[].id]|unique|length')
fin=$(job "$ou" "$je" | jq -r '.state + " " + .owner')
# the job's count: 32, or fewer where the taker's search ended at a plateau
# (its message says so); either way every record is the job's, stored once
want=$(job "$ou" "$je" | jq -r 'if .trials_done < .trials and
	((.message // "") | test("stopped early")) then .trials_done else .trials end')
[ "$n" = "$want" ] && [ "$d" = "$want" ] && [ "$fin" = "done $ro" ] &&
	pass "(e) after SIGCONT: done by the other, $n records for 32 trials ($want the job's), all distinct" ||
	fail "(e) $n records ($d distinct), the job's $want, job: $fin $(job "$ou" "$je" | jq -c '{trials,trials_done,message}')"
grep -q "job $je: lease lost\|job $je: stopped here" "$tmp/$oe.log" &&
	pass "(e) the woken replica saw its claim lost and stopped the job" ||
	fail "(e) no 'lease lost' in $oe's log"

# ---- (f) one worker whose requests go to different replicas ------------------------------------
# Two more replicas on a database of their own, without local workers, and
# one tird-worker behind an haproxy that sends its lease polls to E and
# every other request (registration, heartbeats, results) to D: the worker
# registered at D pulls at E and posts at D.  Skipped without haproxy.
if command -v haproxy >/dev/null 2>&1; then
	psql -qX -d "$pg/postgres" -c "CREATE DATABASE rr" >/dev/null || fail "(f) CREATE DATABASE rr"
	for n in D E; do
		p=$(free_port)
		"$TIRD" --listen 127.0.0.1:$p --db "$pg/rr" --model-seed none --local-workers none \
			--job-lease-s 3 --job-lease-renew-s 1 >>"$tmp/$n.log" 2>&1 &
		pids="$pids $!"
		eval "url_$n=http://127.0.0.1:$p port_$n=$p"
		wait_up "http://127.0.0.1:$p" || fail "(f) replica $n did not start"
	done
	pl=$(free_port)
	cat >"$tmp/split.cfg" <<CFG
defaults
	mode http
	timeout connect 2s
	timeout client 60s
	timeout server 60s
frontend worker
	bind 127.0.0.1:$pl
	acl lease path_end /lease
	use_backend e if lease
	default_backend d
backend d
	server d 127.0.0.1:$port_D
backend e
	server e 127.0.0.1:$port_E
CFG
	haproxy -db -f "$tmp/split.cfg" >"$tmp/haproxy.log" 2>&1 &
	pids="$pids $!"
	wait_up "http://127.0.0.1:$pl" || fail "(f) haproxy did not start"
	"$top/daemon/tird-worker" --server "http://127.0.0.1:$pl" --target cpu --name split \
		>>"$tmp/split-worker.log" 2>&1 &
	wpid=$!; pids="$pids $wpid"
	until_ok 300 live "$url_E" || fail "(f) the worker is not live on E"
	W5='{"op":"matmul","M":40,"N":40,"K":40}'
	submit "$url_D" "$W5" 12 4; jf=$(jq -r .job_id "$tmp/r"); kf=$(jq -r .workload_key "$tmp/r")
	until_ok 1200 state_is "$url_E" "$jf" done || fail "(f) job $jf did not end: $(job "$url_E" "$jf")"
	rd=$url_E
	n=$(nrec "$kf"); d=$(ndistinct "$kf")
	reg=$(grep -c "worker w-.* registered" "$tmp/D.log"); regE=$(grep -c "worker w-.* registered" "$tmp/E.log")
	lE=$(grep -c "leased to w-" "$tmp/E.log"); lD=$(grep -c "leased to w-" "$tmp/D.log")
	[ "$n" = 12 ] && [ "$d" = 12 ] && [ "$reg" -ge 1 ] && [ "$regE" = 0 ] && [ "$lE" -ge 3 ] && [ "$lD" = 0 ] &&
		pass "(f) registered at D, $lE batches leased at E, results posted at D: job $jf done, 12 records, all distinct" ||
		fail "(f) $n records ($d distinct); registrations D $reg E $regE; leases D $lD E $lE"
	wid=$(curl -s "$url_E/v1/workers" | jq -r '[.workers[]|select((.name|endswith(" split")) and .state=="live")][0].worker_id')
	c=$(curl -s -o "$tmp/r" -w '%{http_code}' -X POST "$url_E/v1/workers/$wid/results" \
		--data-binary '{"batch_id":999999,"results":[]}')
	[ "$c" = 409 ] && [ "$(nrec "$kf")" = 12 ] &&
		pass "(f) results for a batch the worker does not hold, at E: 409 $(jq -r .error.code "$tmp/r"), nothing stored" ||
		fail "(f) a post for a batch not held: $c $(cat "$tmp/r")"
	kill "$wpid" 2>/dev/null
else
	echo "SKIP (f): haproxy not installed (Debian: haproxy)"
fi

[ "$fails" -eq 0 ] || exit 1
exit 0
