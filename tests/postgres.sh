#!/bin/sh
# postgres.sh — the store on PostgreSQL, for real (run by `make check` from the
# build directory).
#
# It starts a throwaway PostgreSQL server (initdb and pg_ctl from
# /usr/lib/postgresql/*/bin, the newest, else from PATH) on a free loopback
# port with its data and socket in a temporary folder, and against it runs:
#   tests/check_store, every store test, on a scratch database (TIRD_TEST_PG);
#   a round trip: `tirctl export` of what a tird on SQLite tuned, `tirctl
#   import --trust` into a tird on PostgreSQL and its export (the same
#   workloads and records, field for field, but the provenance an import
#   gives; the same best), then that export into a fresh tird on SQLite (the
#   same again); the server restarted under the tird on PostgreSQL (its next
#   read and import reconnect, with no error);
#   tests/service.sh with TIRD_TEST_PG_SERVER: the whole service test, its
#   databases on the server (TIRD_TEST_PG_SERVICE=0 leaves it out);
# then stops the server and removes the folder.  PostgreSQL refuses to run
# as root: as root the server runs as `nobody` (runuser), the one folder it
# writes made nobody's; otherwise as the user running the test.  It skips
# (exit 77) where PostgreSQL's server programs, psql, curl, jq or python3 are
# missing, or where tird was built without libpq.
set -u
top=$(pwd)
src=${srcdir:-$(dirname "$0")/..}
TIRD=$top/daemon/tird
TIRCTL=$top/client/tirctl
for t in curl jq python3 psql; do
	command -v $t >/dev/null 2>&1 || { echo "SKIP: $t not installed"; exit 77; }
done
. "$src/tests/pg_server.sh"
pg_find || { echo "SKIP: $pg_why"; exit 77; }
[ -x "$TIRD" ] && [ -x "$TIRCTL" ] && [ -x "$top/tests/check_store" ] ||
	{ echo "FAIL: binaries not built"; exit 1; }
[ "${TIRD_HAVE_LIBPQ:-}" = 1 ] ||
	{ echo "SKIP: tird was built without the PostgreSQL store (configure found no libpq)"; exit 77; }
ASAN_OPTIONS=${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0; export ASAN_OPTIONS

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tird-pg.XXXXXX")
fails=0
pids=""
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
pgdata=$tmp/pg
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	pg_stop "$pgdata"
	if [ "$fails" -ne 0 ]; then
		for f in "$tmp"/*.log "$pgdata"/server.log; do [ -f "$f" ] && { echo "---- $f"; tail -30 "$f"; }; done
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
wait_up() {
	for i in $(seq 1 600); do curl -sf "$1/healthz" >/dev/null 2>&1 && return 0; sleep 0.1; done
	return 1
}

# ---- the server -----------------------------------------------------------------------------
pg_start "$pgdata" -F -c shared_buffers=16MB || { fail "$pg_why"; exit 1; }
pass "a throwaway PostgreSQL $pgver on 127.0.0.1:$pgport, run by $pg_who"
mkdb() { psql -qX -d "$pg/postgres" -c "CREATE DATABASE $1" >/dev/null; }

# ---- the store tests ------------------------------------------------------------------------
mkdb store
TIRD_TEST_PG=$pg/store "$top/tests/check_store" >"$tmp/check_store.log" 2>&1 \
	&& pass "check_store on PostgreSQL: $(grep -o 'Checks: [0-9]*, Failures: 0, Errors: 0' "$tmp/check_store.log")" \
	|| fail "check_store on PostgreSQL: $(tail -5 "$tmp/check_store.log")"

# ---- SQLite -> PostgreSQL -> SQLite ---------------------------------------------------------
echo '{"op":"matmul","M":16,"N":16,"K":16}' >"$tmp/mm16.json"
start() {   # NAME DB [flags...]: a tird on a free port, its URL in $u
	name=$1; where=$2; shift 2
	p=$(free_port); u=http://127.0.0.1:$p
	"$TIRD" --listen 127.0.0.1:$p --db "$where" --model-seed none "$@" >>"$tmp/$name.log" 2>&1 &
	pids="$pids $!"; last=$!
	wait_up "$u" || fail "tird $name did not start"
}
start lite "$tmp/a.db" --local-workers cpu
ua=$u; ta=$last
timeout 300 "$TIRCTL" --server "$ua" --json tune "$tmp/mm16.json" --target cpu --trials 8 --batch 4 \
	--wait >"$tmp/job.json" 2>"$tmp/err" || fail "tune on SQLite: $(cat "$tmp/err")"
"$TIRCTL" --server "$ua" export "$tmp/a.json" && n=$(jq '.records|length' "$tmp/a.json") &&
	[ "$n" -ge 8 ] && pass "export from SQLite: $n records" || fail "export from SQLite"

mkdb tird
start pg "$pg/tird" --local-workers none
up=$u; tp=$last
grep -q "db postgresql://tird@127.0.0.1:$pgport/tird, schema 8" "$tmp/pg.log" \
	&& pass "tird on PostgreSQL: schema 8" || fail "tird on PostgreSQL: $(head -3 "$tmp/pg.log")"
imp=$("$TIRCTL" --server "$up" --json import --trust "$tmp/a.json")
printf '%s' "$imp" | jq -e ".imported==$n" >/dev/null && pass "import --trust into PostgreSQL: $n" \
	|| fail "import into PostgreSQL: $imp"
"$TIRCTL" --server "$up" export "$tmp/p.json" || fail "export from PostgreSQL"

# same FILE1 FILE2: the same format and workloads, and the same records in the same order, every
# field but the provenance an import gives (origin, trusted, source, token, host) and
# job_id (the exporting tird's job, which an import does not carry) equal
same() {
	python3 - "$1" "$2" <<'PYEOF'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
prov = ("origin", "trusted", "source", "token", "host", "job_id")
strip = lambda e: [{k: v for k, v in r.items() if k not in prov} for r in e["records"]]
if a.get("format") != b.get("format") or a["workloads"] != b["workloads"]:
    sys.exit("format or workloads differ")
ra, rb = strip(a), strip(b)
if len(ra) != len(rb):
    sys.exit("%d records, then %d" % (len(ra), len(rb)))
for i, (x, y) in enumerate(zip(ra, rb)):
    if x != y:
        sys.exit("records[%d]: %s\n  then %s" % (i, json.dumps(x, sort_keys=True), json.dumps(y, sort_keys=True)))
if not all(r.get("origin") == "imported" and r.get("trusted") is True for r in b["records"]):
    sys.exit("not every record of the second marked imported and trusted")
PYEOF
}
bests() {   # URL: the best rows, as a sorted list
	"$TIRCTL" --server "$1" --json best matmul | jq -cS '[.[] | {workload_key, target, record_id, latency_us, trials}] | sort'
}
why=$(same "$tmp/a.json" "$tmp/p.json" 2>&1) && pass "SQLite -> PostgreSQL: $n records round-trip exactly" \
	|| fail "SQLite -> PostgreSQL: $why"
ba=$(bests "$ua"); bp=$(bests "$up")
[ -n "$ba" ] && [ "$ba" != "[]" ] && [ "$ba" = "$bp" ] && pass "the same best on both: $bp" \
	|| fail "best on SQLite $ba, on PostgreSQL $bp"

start lite2 "$tmp/b.db" --local-workers none
ub=$u
"$TIRCTL" --server "$ub" --json import --trust "$tmp/p.json" >/dev/null &&
	"$TIRCTL" --server "$ub" export "$tmp/b.json" && why=$(same "$tmp/p.json" "$tmp/b.json" 2>&1) &&
	[ "$(bests "$ub")" = "$bp" ] \
	&& pass "PostgreSQL -> SQLite: the same records and best again" || fail "PostgreSQL -> SQLite: $why"

# ---- the server restarted under a running tird: its next calls reconnect ----------------------
# (twice: the first call after a restart is a transaction's BEGIN, then a prepared statement's)
restart() {
	as_server "$pgbin/pg_ctl" -D "$pgdata/data" -m fast -w restart >>"$tmp/pg_ctl.log" 2>&1 ||
		fail "pg_ctl restart: $(tail -3 "$tmp/pg_ctl.log")"
}
restart
r=$("$TIRCTL" --server "$up" --json import --trust "$tmp/a.json" 2>"$tmp/err") &&
	printf '%s' "$r" | jq -e ".imported==0 and .skipped==$n" >/dev/null &&
	restart && "$TIRCTL" --server "$up" --json jobs >/dev/null 2>>"$tmp/err" &&
	! grep -q "store:" "$tmp/pg.log" \
	&& pass "PostgreSQL restarted under tird: the next import, then the next read, reconnect" \
	|| fail "after a restart of PostgreSQL: $(cat "$tmp/err") $r; $(grep 'store:' "$tmp/pg.log" | head -3)"
kill $ta $tp 2>/dev/null

# ---- the service test on PostgreSQL ------------------------------------------------------------
if [ "${TIRD_TEST_PG_SERVICE:-1}" != 0 ]; then
	TIRD_TEST_PG_SERVER=$pg srcdir=$src sh "$src/tests/service.sh" >"$tmp/service.log" 2>&1; rc=$?
	grep '^FAIL' "$tmp/service.log"
	[ $rc -eq 0 ] && pass "service.sh on PostgreSQL: $(grep -c '^PASS' "$tmp/service.log") checks passed" \
		|| fail "service.sh on PostgreSQL: exit $rc, $(grep -c '^FAIL' "$tmp/service.log") failed"
	[ $rc -eq 0 ] || tail -60 "$tmp/service.log"
fi

[ "$fails" -eq 0 ] && echo "all passed" || echo "$fails failed"
[ "$fails" -eq 0 ]
