#!/bin/sh
# deploy_lb.sh — deploy/haproxy.cfg run for real in front of two tird
# replicas, on loopback (run by `make check` from the build directory).
#
# The compose file's load balancer without compose: haproxy runs
# deploy/haproxy.cfg with only the addresses changed (tird-a and tird-b
# become loopback ports, the bind a free port), in front of two tirds on
# deploy/tird.compose.conf (--listen, --db and --token-file made loopback and
# temporary: both replicas on one database of a throwaway PostgreSQL, as
# compose's share its postgres), and a tird-worker --target cpu that, as
# compose's worker-cpu, talks to the balancer only.  It checks:
#   - haproxy -c accepts the file as it is (the replicas' names unresolved);
#   - the API is balanced over both replicas (GET /healthz through the lb
#     answers both replicas' ids) and both pass the health check;
#   - the worker's requests are balanced too, with no stickiness: the
#     worker registers once, both replicas list it live, a job submitted
#     to one replica runs to its end with its batches leased through both,
#     and the worker registered once;
#   - replicas that do not share a database behind one balancer (a second
#     haproxy sends a worker's registrations to a third tird on an SQLite
#     file of its own and its other requests to the pair): the worker,
#     forgotten at once each time, waits longer each time (3 to 8
#     registrations in 15 s, saying why);
#   - kill -9 of one replica: haproxy marks it down (GET /healthz failing),
#     and the worker goes on through the other without registering again:
#     a job submitted through the lb runs to its end there.
# Skipped (77) without haproxy (Debian: haproxy), PostgreSQL's server
# programs, psql, curl, jq or python3, or where tird was built without
# libpq.
set -u
top=$(pwd)
src=${srcdir:-$(dirname "$0")/..}
. "$src/tests/lib.sh"
TIRD=$top/daemon/tird
TIRCTL=$top/client/tirctl
WORKER=$top/daemon/tird-worker
for t in haproxy curl jq python3 psql; do
	command -v $t >/dev/null 2>&1 || { echo "SKIP: $t not installed"; exit 77; }
done
. "$src/tests/pg_server.sh"
pg_find || { echo "SKIP: $pg_why"; exit 77; }
for p in "$TIRD" "$TIRCTL" "$WORKER"; do
	[ -x "$p" ] || { echo "FAIL: $p not built"; exit 1; }
done
[ "${TIRD_HAVE_LIBPQ:-}" = 1 ] ||
	{ echo "SKIP: tird was built without the PostgreSQL store (configure found no libpq)"; exit 77; }
ASAN_OPTIONS=${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0; export ASAN_OPTIONS
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tird-lb.XXXXXX")
fails=0
pids=""
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
pgdata=$tmp/pg
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	pg_stop "$pgdata"
	if [ "$fails" -ne 0 ]; then
		for f in "$tmp"/*.log; do [ -f "$f" ] && { echo "---- $f"; tail -20 "$f"; }; done
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
until_true() {   # SECONDS COMMAND...: polls COMMAND every 0.2 s until it succeeds
	n=$(($1 * 5)); shift
	while [ $n -gt 0 ]; do "$@" && return 0; sleep 0.2; n=$((n - 1)); done
	return 1
}
up() { curl -sf "$1/healthz" >/dev/null 2>&1; }

haproxy -c -f "$src/deploy/haproxy.cfg" >"$tmp/check.log" 2>&1 &&
	pass "haproxy -c accepts deploy/haproxy.cfg" || fail "haproxy -c: $(grep -m3 ALERT "$tmp/check.log")"

# ---- two replicas on one database, and the balancer -----------------------------------------
pg_start "$pgdata" -F -c shared_buffers=16MB || { fail "$pg_why"; exit 1; }
psql -qX -d "$pg/postgres" -c "CREATE DATABASE lb" >/dev/null || { fail "CREATE DATABASE lb"; exit 1; }
admin=admin-token-lb
wtok=worker-token-lb
printf '%s admin admin\n%s worker lb-worker\n' "$admin" "$wtok" >"$tmp/tokens"
pa=$(free_port); pb=$(free_port); plb=$(free_port)
ua=http://127.0.0.1:$pa; ub=http://127.0.0.1:$pb; lb=http://127.0.0.1:$plb
for r in a b; do
	eval p=\$p$r
	"$TIRD" --config "$src/deploy/tird.compose.conf" --listen 127.0.0.1:$p --db "$pg/lb" \
		--token-file "$tmp/tokens" --model-seed none --worker-wait-s 120 >"$tmp/tird-$r.log" 2>&1 &
	eval pid_$r=$!; pids="$pids $!"
done
sed -e "s/ tird-a:8642/ 127.0.0.1:$pa/; s/ tird-b:8642/ 127.0.0.1:$pb/; s/bind :8642/bind 127.0.0.1:$plb/" \
	"$src/deploy/haproxy.cfg" >"$tmp/haproxy.cfg"
grep -q "127.0.0.1:$pa" "$tmp/haproxy.cfg" && ! grep -q "tird-[ab]:8642" "$tmp/haproxy.cfg" ||
	{ fail "the loopback copy of haproxy.cfg still names tird-a / tird-b"; exit 1; }
haproxy -db -f "$tmp/haproxy.cfg" >"$tmp/haproxy.log" 2>&1 &
pids="$pids $!"
until_true 30 up "$ua" && until_true 30 up "$ub" || { fail "the replicas did not start"; exit 1; }
until_true 30 up "$lb" && pass "GET /healthz through haproxy" || { fail "haproxy answers no /healthz"; exit 1; }
ra=$(curl -s "$ua/healthz" | jq -r .replica); rb=$(curl -s "$ub/healthz" | jq -r .replica)
# the API round-robin: through the lb, both replicas answer (tried for up
# to 10 s: a replica a health check has just marked down gets no requests
# until it is marked up again)
both() {
	seen=""
	for i in 1 2 3 4 5 6; do seen="$seen $(curl -sf "$lb/healthz" | jq -r .replica)"; done
	case $seen in *"$ra"*) case $seen in *"$rb"*) return 0 ;; esac ;; esac
	return 1
}
until_true 10 both && pass "GET /healthz through haproxy answered by both replicas" ||
	fail "GET /healthz through haproxy answered by:$seen (replicas $ra, $rb)"

# ---- the worker, through the balancer ---------------------------------------------------------
"$WORKER" --server "$lb" --target cpu --token "$wtok" --name lb-worker >"$tmp/worker.log" 2>&1 &
pids="$pids $!"
live() {
	[ "$(curl -sf "$1/v1/workers" |
		jq '[.workers[] | select(.state == "live" and (.name | test("lb-worker")))] | length')" = 1 ]
}
until_true 30 live "$ua" && live "$ub" &&
	pass "the worker registered through haproxy: live on both replicas (one database)" ||
	fail "the worker is not live on both replicas: a $(curl -s "$ua/v1/workers" | jq -c '[.workers[].state]'), b $(curl -s "$ub/v1/workers" | jq -c '[.workers[].state]')"

echo '{"op":"matmul","M":16,"N":16,"K":16}' >"$tmp/mm16.json"
timeout 300 "$TIRCTL" --server "$ua" --token "$admin" --json tune "$tmp/mm16.json" --target cpu \
	--trials 8 --batch 2 --wait >"$tmp/job.json" 2>"$tmp/tune.log"
if [ "$(jq -r '.state' "$tmp/job.json" 2>/dev/null)" = done ] &&
   [ "$(jq -r '.trials' "$tmp/job.json")" -ge 8 ]; then
	pass "a job submitted to replica a done, its batches leased and measured through haproxy: $(jq -c '{state,trials}' "$tmp/job.json")"
else
	fail "the job through the balanced worker: $(cat "$tmp/job.json" "$tmp/tune.log" | tail -3)"
fi
la=$(grep -c "leased to w-" "$tmp/tird-a.log"); lB=$(grep -c "leased to w-" "$tmp/tird-b.log")
[ "$la" -ge 1 ] && [ "$lB" -ge 1 ] &&
	pass "the worker's leases went through both replicas (a $la, b $lB): round-robin, nothing sticky" ||
	fail "the worker's leases: a $la, b $lB (expected some through each)"
n=$(grep -c "registered with" "$tmp/worker.log")
[ "$n" = 1 ] && pass "the worker registered once (both replicas answer its leases, results and heartbeats)" ||
	fail "the worker registered $n times"

# ---- replicas that do not share a database, behind one balancer --------------------------------
# the mistake docs/deploy.md warns of, at its worst: a balancer that sends
# the worker's registrations to a tird of another database and its other
# requests to the pair, which never knows it.  The worker must notice and
# wait longer each time (1, 2, 4, 8 s), never register in a loop (it did:
# 8,000 times in 15 s)
pc=$(free_port); uc=http://127.0.0.1:$pc
"$TIRD" --config "$src/deploy/tird.compose.conf" --listen 127.0.0.1:$pc --db "$tmp/c.db" \
	--token-file "$tmp/tokens" --model-seed none >"$tmp/tird-c.log" 2>&1 &
pids="$pids $!"
prr=$(free_port); rr=http://127.0.0.1:$prr
cat >"$tmp/haproxy-split.cfg" <<CFG
defaults
    mode http
    timeout connect 5s
    timeout client 90s
    timeout server 90s
frontend api
    bind 127.0.0.1:$prr
    acl register path /v1/workers
    use_backend to_c if register
    default_backend to_b
backend to_c
    server c 127.0.0.1:$pc
backend to_b
    server b 127.0.0.1:$pb
CFG
haproxy -db -f "$tmp/haproxy-split.cfg" >"$tmp/haproxy-split.log" 2>&1 &
rrpid=$!; pids="$pids $rrpid"
until_true 30 up "$uc" && until_true 30 up "$rr" ||
	fail "the splitting haproxy or its third tird answers no /healthz"
"$WORKER" --server "$rr" --target cpu --token "$wtok" --name split-worker >"$tmp/worker-split.log" 2>&1 &
rrw=$!; pids="$pids $rrw"
sleep 15
kill "$rrw" 2>/dev/null; wait "$rrw" 2>/dev/null
nreg=$(grep -c "registered with" "$tmp/worker-split.log")
[ "$nreg" -ge 3 ] && [ "$nreg" -le 8 ] &&
	grep -q "tird forgot this worker .* s after it registered" "$tmp/worker-split.log" &&
	pass "a worker behind a balancer over replicas of two databases: $nreg registrations in 15 s, each wait longer (it says why)" ||
	fail "a worker behind a balancer over replicas of two databases registered $nreg times in 15 s: $(tail -3 "$tmp/worker-split.log")"
kill -9 "$rrpid" 2>/dev/null

# ---- one replica killed ----------------------------------------------------------------------
ndown=$(grep -c "tird-a is DOWN" "$tmp/haproxy.log")   # before the kill (at start-up, say)
kill -9 "$pid_a"
wait "$pid_a" 2>/dev/null  # gone: its port refuses connections
# before any health check has noticed: a refused connection is sent on to b
# (deploy/haproxy.cfg's retries and redispatch), so no client sees the death
byb=0
for i in 1 2 3 4 5 6; do
	[ "$(curl -s -m 10 "$lb/healthz" | jq -r .replica 2>/dev/null)" = "$rb" ] && byb=$((byb + 1))
done
[ "$byb" = 6 ] && pass "replica a killed: the next 6 requests through haproxy answered by b (refused connections sent on)" ||
	fail "replica a killed: $byb of the next 6 requests through haproxy answered by b"
down() { [ "$(grep -c "tird-a is DOWN" "$tmp/haproxy.log")" -gt "$ndown" ]; }
until_true 30 down && pass "replica a killed: haproxy marks it down" ||
	fail "replica a killed: haproxy did not mark it down: $(tail -3 "$tmp/haproxy.log")"
until_true 20 up "$lb" && pass "GET /healthz through haproxy with one replica down" ||
	fail "haproxy answers no /healthz with replica a down"
echo '{"op":"matmul","M":20,"N":20,"K":20}' >"$tmp/mm20.json"
timeout 300 "$TIRCTL" --server "$lb" --token "$admin" --json tune "$tmp/mm20.json" --target cpu \
	--trials 8 --batch 2 --wait >"$tmp/job2.json" 2>"$tmp/tune2.log"
n=$(grep -c "registered with" "$tmp/worker.log")
if [ "$(jq -r '.state' "$tmp/job2.json" 2>/dev/null)" = done ] &&
   [ "$(jq -r '.trials' "$tmp/job2.json")" -ge 8 ] && [ "$n" = 1 ] && live "$ub"; then
	pass "replica a down: a job through haproxy done by b with the same worker, registered once: $(jq -c '{state,trials}' "$tmp/job2.json")"
else
	fail "replica a down: job $(jq -c '{state,trials}' "$tmp/job2.json" 2>/dev/null) $(tail -2 "$tmp/tune2.log"), the worker registered $n times: $(tail -3 "$tmp/worker.log")"
fi

[ $fails -eq 0 ]
