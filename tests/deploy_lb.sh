#!/bin/sh
# deploy_lb.sh — deploy/haproxy.cfg run for real in front of two tird
# replicas, on loopback (run by `make check` from the build directory).
#
# The compose file's load balancer without compose: haproxy runs
# deploy/haproxy.cfg with only the addresses changed (tird-a and tird-b
# become loopback ports, the bind a free port), in front of two tirds on
# deploy/tird.compose.conf (--listen, --db and --token-file made loopback and
# temporary: each replica its own SQLite file, since what is checked here is
# the balancer, not the shared store), and a tird-worker --target cpu that,
# as compose's worker-cpu, talks to the balancer only.  It checks:
#   - haproxy -c accepts the file as it is (the replicas' names unresolved);
#   - the API is balanced over both replicas (GET /v1/jobs through the lb
#     answers both replicas' job lists) and both pass the health check;
#   - the worker routes are sticky: the worker registers with one replica,
#     a job submitted to that replica runs to its end with every lease,
#     result and heartbeat through the lb, and the worker registered once;
#   - a second haproxy that sends a worker's registrations to one replica
#     and its other requests to the other: the worker, forgotten at once
#     each time, waits longer each time (3 to 8 registrations in 15 s,
#     saying why);
#   - kill -9 of that replica: haproxy marks it down (GET /healthz on /healthz
#     failing), the worker's next request reaches the other replica, which
#     answers unknown_worker, and the worker registers there.
# Skipped (77) without haproxy (Debian: haproxy), curl, jq or python3.
set -u
top=$(pwd)
src=${srcdir:-$(dirname "$0")/..}
. "$src/tests/lib.sh"
TIRD=$top/daemon/tird
TIRCTL=$top/client/tirctl
WORKER=$top/daemon/tird-worker
for t in haproxy curl jq python3; do
	command -v $t >/dev/null 2>&1 || { echo "SKIP: $t not installed"; exit 77; }
done
for p in "$TIRD" "$TIRCTL" "$WORKER"; do
	[ -x "$p" ] || { echo "FAIL: $p not built"; exit 1; }
done
ASAN_OPTIONS=${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0; export ASAN_OPTIONS
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tird-lb.XXXXXX")
fails=0
pids=""
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
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

# ---- two replicas and the balancer ----------------------------------------------------------
admin=admin-token-lb
wtok=worker-token-lb
printf '%s admin admin\n%s worker lb-worker\n' "$admin" "$wtok" >"$tmp/tokens"
pa=$(free_port); pb=$(free_port); plb=$(free_port)
ua=http://127.0.0.1:$pa; ub=http://127.0.0.1:$pb; lb=http://127.0.0.1:$plb
for r in a b; do
	eval p=\$p$r
	"$TIRD" --config "$src/deploy/tird.compose.conf" --listen 127.0.0.1:$p --db "$tmp/$r.db" \
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

# ---- the worker, through the balancer ---------------------------------------------------------
"$WORKER" --server "$lb" --target cpu --token "$wtok" --name lb-worker >"$tmp/worker.log" 2>&1 &
pids="$pids $!"
nworkers() { curl -sf "$1/v1/workers" | jq '.workers | length'; }
some() { [ "$(nworkers "$ua")$(nworkers "$ub")" != 00 ]; }
# once it is registered somewhere, a second more: a worker whose requests
# reach the wrong replica registers again and again
until_true 30 some && sleep 1
if [ "$(nworkers "$ua")$(nworkers "$ub")" = 10 ] || [ "$(nworkers "$ua")$(nworkers "$ub")" = 01 ]; then
	if [ "$(nworkers "$ua")" = 1 ]; then home=$ua; other=$ub; homepid=$pid_a; hn=a; on=b
	else home=$ub; other=$ua; homepid=$pid_b; hn=b; on=a; fi
	pass "the worker registered through haproxy with replica $hn alone"
else
	fail "the worker is not registered with exactly one replica: a $(nworkers "$ua"), b $(nworkers "$ub")"
	exit 1
fi

echo '{"op":"matmul","M":16,"N":16,"K":16}' >"$tmp/mm16.json"
timeout 300 "$TIRCTL" --server "$home" --token "$admin" --json tune "$tmp/mm16.json" --target cpu \
	--trials 8 --batch 4 --wait >"$tmp/job.json" 2>"$tmp/tune.log"
if [ "$(jq -r '.state' "$tmp/job.json" 2>/dev/null)" = done ] &&
   [ "$(jq -r '.trials' "$tmp/job.json")" -ge 8 ]; then
	pass "a job on replica $hn done, its batches leased and measured through haproxy: $(jq -c '{state,trials}' "$tmp/job.json")"
else
	fail "the job through the balanced worker: $(cat "$tmp/job.json" "$tmp/tune.log" | tail -3)"
fi
n=$(grep -c "registered with" "$tmp/worker.log")
[ "$n" = 1 ] && pass "the worker registered once (every lease, result and heartbeat reached replica $hn)" ||
	fail "the worker registered $n times: its requests did not stick to one replica"

# the API round-robin: replica $hn has one job, the other none; through the lb both answer
# (tried for up to 10 s: a replica a health check has just marked down
# gets no requests until it is marked up again)
both() {
	seen=""
	for i in 1 2 3 4 5 6; do seen="$seen $(curl -sf "$lb/v1/jobs" | jq '.jobs | length')"; done
	case $seen in *0*) case $seen in *1*) return 0 ;; esac ;; esac
	return 1
}
until_true 10 both
case $seen in
*0*) case $seen in *1*) pass "GET /v1/jobs through haproxy answered by both replicas (jobs:$seen)" ;;
     *) fail "GET /v1/jobs through haproxy only from replica $on (jobs:$seen)" ;; esac ;;
*) fail "GET /v1/jobs through haproxy only from replica $hn (jobs:$seen)" ;;
esac

# ---- a balancer that does not keep the worker on one replica -------------------------------------
# the mistake docs/deploy.md warns of, at its worst: a balancer that sends
# the worker's registrations to one replica and its other requests to the
# other, which never knows it.  The worker must notice and wait longer each
# time (1, 2, 4, 8 s), never register in a loop (it did: 8,000 times in 15 s)
prr=$(free_port); rr=http://127.0.0.1:$prr
cat >"$tmp/haproxy-split.cfg" <<EOF
defaults
    mode http
    timeout connect 5s
    timeout client 90s
    timeout server 90s
frontend api
    bind 127.0.0.1:$prr
    acl register path /v1/workers
    use_backend to_a if register
    default_backend to_b
backend to_a
    server a 127.0.0.1:$pa
backend to_b
    server b 127.0.0.1:$pb
EOF
haproxy -db -f "$tmp/haproxy-split.cfg" >"$tmp/haproxy-split.log" 2>&1 &
rrpid=$!; pids="$pids $rrpid"
until_true 30 up "$rr" || fail "the splitting haproxy answers no /healthz"
"$WORKER" --server "$rr" --target cpu --token "$wtok" --name split-worker >"$tmp/worker-split.log" 2>&1 &
rrw=$!; pids="$pids $rrw"
sleep 15
kill "$rrw" 2>/dev/null; wait "$rrw" 2>/dev/null
nreg=$(grep -c "registered with" "$tmp/worker-split.log")
[ "$nreg" -ge 3 ] && [ "$nreg" -le 8 ] &&
	grep -q "tird forgot this worker .* s after it registered" "$tmp/worker-split.log" \
	&& pass "a worker behind a balancer that splits its requests: $nreg registrations in 15 s, each wait longer (it says why)" \
	|| fail "a worker behind a balancer that splits its requests registered $nreg times in 15 s: $(tail -3 "$tmp/worker-split.log")"
kill -9 "$rrpid" 2>/dev/null

# ---- the worker's replica killed -------------------------------------------------------------
kill -9 "$homepid"
# (the other replica may still list the splitting test's worker, silent)
moved() { [ "$(curl -sf "$other/v1/workers" | jq '[.workers[] | select(.state == "live" and (.name | test("lb-worker")))] | length')" = 1 ]; }
if until_true 60 moved; then
	pass "replica $hn killed: the worker registered with replica $on through haproxy"
else
	fail "replica $hn killed: the worker is not registered with replica $on: $(tail -3 "$tmp/worker.log")"
fi
until_true 20 up "$lb" && pass "GET /healthz through haproxy with one replica down" ||
	fail "haproxy answers no /healthz with replica $hn down"

[ $fails -eq 0 ]
