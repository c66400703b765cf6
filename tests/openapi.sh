#!/bin/sh
# openapi.sh — tird's answers against its OpenAPI document (run by `make
# check` from the build directory; needs python3 with jsonschema, Debian's
# python3-jsonschema, else it is skipped).
#
# It starts a real tird on a free loopback port with
# a temporary database, a token file and protect_reads, and runs
# tests/openapi_check.py against it: every route of TIRD_ROUTES
# (daemon/tird.h) is in daemon/openapi.json and every path and method there
# is a route; GET /v1/openapi.json answers that file; then traffic as
# tests/service.sh drives it (a worker by hand: register, lease, heartbeat,
# results, leave; jobs submitted, joined, cancelled queued and running, a
# full queue; bests, a workload, export, import, record removal, lower,
# fuse, a graph submitted; last a database error, tables renamed under
# tird), each route with its success and error answers,
# and every answer's status and body checked against the document's schema
# for that route and status.  With openapi-spec-validator installed the
# document itself is validated as OpenAPI 3.1 too.
set -u
top=$(pwd)
src=${srcdir:-.}
TIRD=$top/daemon/tird
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not installed"; exit 77; }
python3 -c 'import jsonschema' 2>/dev/null ||
	{ echo "SKIP: python3's jsonschema not installed (Debian: python3-jsonschema)"; exit 77; }
[ -x "$TIRD" ] || { echo "FAIL: daemon/tird not built"; exit 1; }
ASAN_OPTIONS=${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0; export ASAN_OPTIONS
. "$src/tests/lib.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tird-openapi.XXXXXX")
tird_pid=
rc=1
cleanup() {
	[ -n "$tird_pid" ] && kill -9 "$tird_pid" 2>/dev/null
	if [ "$rc" -ne 0 ] && [ -f "$tmp/tird.log" ]; then echo "---- tird.log"; tail -30 "$tmp/tird.log"; fi
	[ -n "${TIRD_TEST_KEEP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT
port=$(free_port)
cat > "$tmp/token" <<'EOF2'
oa-admin-token-0123456789
oa-ci-token-0123456789 read,submit ci
oa-worker-token-0123456789 worker w1
EOF2
"$TIRD" --listen 127.0.0.1:$port --db "$tmp/t.db" --local-workers none --token-file "$tmp/token" \
	--protect-reads true --max-body 4096 --max-queued-jobs 1 --lease-s 60 --model-seed none >"$tmp/tird.log" 2>&1 &
tird_pid=$!
python3 "$src/tests/openapi_check.py" "http://127.0.0.1:$port" "$src/daemon/openapi.json" \
	"$src/daemon/tird.h" "$src/examples/graphs/seed10.json" "$tmp/t.db"
rc=$?
exit $rc
