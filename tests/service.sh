#!/bin/sh
# service.sh — the integration test of the tird service (run by `make check`
# from the build directory; needs curl and jq, else it is skipped).
#
# It starts a real tird on a free loopback port with a temporary database and
# drives it with tirctl, curl and tird-worker:
#   health and metrics; a missing token (401); bad JSON (400); an invalid
#   workload (400, tirctl exit 1); an oversized body (413); the input edges
#   by raw requests (text or a NUL after the body's document, a NUL or a
#   control character in a string, invalid UTF-8 refused and never echoed
#   raw, %00 in a path, two Content-Lengths, 600 and 2000 query parameters,
#   a long URL, large headers: each a JSON error naming it); the worker routes
#   by hand (register, an empty lease, heartbeat, results for a batch not
#   leased or with a bad status, leave) and the job routes' errors (an
#   unknown job, cancel while queued or running, cancel of an ended job);
#   token scopes (a submit token may not register a worker nor import, a worker token may
#   not submit, every token reads, an unknown scope stops tird); worker results only from the
#   lease holder with its own token (an unregistered id 403, another worker 409, another token
#   403) and forged "ok" results stored as errors; submit; dedupe of
#   an identical submission (joined); a tird-worker that takes a batch and is
#   killed mid-batch (its batch is re-queued and finished by another worker);
#   wait; best; show; a cache hit; search options (a job under the random
#   model with seed 7 shows them and finishes; bad options: 400 naming the
#   field); export / import into a second tird: a file with one bad record
#   (exit 1 naming it, nothing stored), then the export untrusted (stored, imported with
#   its source, no best), then with --trust twice (idempotent); records rm of the best
#   (recomputed); nothing forged becomes a best: a clone of the best respaced at 1e-9 us
#   (400) or at a plausible latency (the same record), traces that do not replay and an
#   error of 1e300 (400 naming records[0]), 300 junk records (best and trials unchanged),
#   a forged import measured again by the next job and replaced;
#   imports all or nothing (a bad record midway: nothing stored; a
#   40,000-record import killed with SIGKILL: 0 or all of it, then all);
#   a database error (tables renamed under a third tird): 500 naming the
#   operation, SQLite's words only in the log; a new cost model for this
#   CPU's key (none for CUDA before a CUDA job) seeded from the records of
#   its architecture built beside tird,
#   from an export (--model-seed FILE) or not (none), and a seed file
#   missing, cut short or not records (exit 1 naming the fault); tird killed
#   with SIGKILL mid-job, restarted on the same database: the job resumes
#   counting its stored records and finishes, no stored record lost, the
#   seeded models saved at the first start are loaded; SIGTERM
#   stops it cleanly; a cost model it cannot load (another build's) is rebuilt
#   from the stored records; no stalls and honest bookkeeping (issue #31): bad
#   full target keys refused naming the part, jobs no worker serves waiting
#   queued while another runs on the one tuning thread, starting when a worker
#   of theirs registers and failing after worker_wait_s, a full queue (429),
#   trials_done of a job that found its trials stored (a trusted import of
#   valid schedules), a store error at a
#   job's end (visible, then stored), tirctl wait on a row nothing updates (no
#   spin), cost models written at shutdown and not after each job, the
#   per-address connection limit, the idle timeout with a longer long poll,
#   and RSS around 16 concurrent exports of 100k valid imported schedules
#   (streamed, with each record's provenance).
# Workloads are tiny and trial counts small: the test shares two cores.
#
# The databases are SQLite files in a temporary folder, or, where
# TIRD_TEST_PG_SERVER names a PostgreSQL server (postgresql://USER@HOST:PORT,
# tests/postgres.sh sets it), databases svc_NAME on that server: the same
# checks on the PostgreSQL store (the SQLite WAL probe of the killed import
# becomes a probe of the import's open transaction).
set -u
top=$(pwd)
src=${srcdir:-.}
TIRD=$top/daemon/tird
WORKER=$top/daemon/tird-worker
TIRCTL=$top/client/tirctl
for t in curl jq python3; do
	command -v $t >/dev/null 2>&1 || { echo "SKIP: $t not installed"; exit 77; }
done
[ -x "$TIRD" ] && [ -x "$WORKER" ] && [ -x "$TIRCTL" ] || { echo "FAIL: binaries not built"; exit 1; }

# sanitizer builds: third-party libraries' exit-time allocations are not ours
ASAN_OPTIONS=${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0; export ASAN_OPTIONS

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tird-test.XXXXXX")
fails=0
pids=""
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	if [ "$fails" -ne 0 ]; then
		for f in "$tmp"/*.log; do echo "---- $f"; tail -40 "$f"; done
	fi
	[ -n "${TIRD_TEST_KEEP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT
pgsrv=${TIRD_TEST_PG_SERVER:-}
if [ -n "$pgsrv" ]; then
	command -v psql >/dev/null 2>&1 || { echo "SKIP: psql not installed"; exit 77; }
	for d in $(psql -qtAX -d "$pgsrv/postgres" -c "SELECT datname FROM pg_database WHERE datname LIKE 'svc\_%'"); do
		psql -qX -d "$pgsrv/postgres" -c "DROP DATABASE $d WITH (FORCE)" >/dev/null
	done
	echo "# the store: PostgreSQL at $pgsrv"
fi
db() {   # NAME: the --db of the test's database NAME (a PostgreSQL one made when first named)
	if [ -z "$pgsrv" ]; then echo "$tmp/$1.db"; return; fi
	[ "$(psql -qtAX -d "$pgsrv/postgres" -c "SELECT count(*) FROM pg_database WHERE datname = 'svc_$1'")" = 1 ] ||
		psql -qX -d "$pgsrv/postgres" -c "CREATE DATABASE svc_$1" >/dev/null
	echo "$pgsrv/svc_$1"
}
sq() {   # NAME SQL: runs SQL on database NAME, printing rows as sqlite3 does
	if [ -z "$pgsrv" ]; then sqlite3 "$tmp/$1.db" "$2"; else psql -qtAX -d "$(db "$1")" -c "$2"; fi
}
db_rm() {   # NAME: removes database NAME
	if [ -z "$pgsrv" ]; then rm -f "$tmp/$1.db"*
	else psql -qX -d "$pgsrv/postgres" -c "DROP DATABASE IF EXISTS svc_$1 WITH (FORCE)" >/dev/null; fi
}
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
wait_up() {   # URL
	# a new tird makes its cost models from the seeds first (seconds under ASan)
	for i in $(seq 1 600); do curl -sf "$1/healthz" >/dev/null 2>&1 && return 0; sleep 0.1; done
	return 1
}
# until COMMAND succeeds, at most N tenths of a second
until_ok() {
	tenths=$1; shift
	for i in $(seq 1 "$tenths"); do "$@" && return 0; sleep 0.1; done
	return 1
}

# the first line is a token alone (the token file of before scopes: it may do everything)
cat > "$tmp/token" <<'EOF3'
test-token-0123456789
ci-token-0123456789 read,submit ci      # CI submits jobs and reads
worker-token-0123456789 worker w1
worker2-token-0123456789 worker w2
EOF3
port=$(free_port); url=http://127.0.0.1:$port
start_tird() {   # DB LOG [flags...]
	db=$1; log=$2; shift 2
	"$TIRD" --listen 127.0.0.1:$port --db "$db" --local-workers none --lease-s 2 \
		--token-file "$tmp/token" --max-body 4096 "$@" >>"$log" 2>&1 &
	tird_pid=$!
	pids="$pids $tird_pid"
}
start_tird "$(db a)" "$tmp/tird.log"
wait_up "$url" && pass "tird starts and answers /healthz" || { fail "tird did not start"; exit 1; }
export TIRD_URL=$url TIRD_TOKEN=test-token-0123456789
ctl() { "$TIRCTL" "$@"; }

# a second tird on the port in use fails, naming it, instead of sharing it
timeout 10 "$TIRD" --listen 127.0.0.1:$port --db "$(db dup)" --local-workers none \
	>"$tmp/dup.log" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "cannot listen on 127.0.0.1:$port" "$tmp/dup.log" \
	&& pass "a second tird on a port in use exits 1 and says so" \
	|| fail "second tird on the same port: exit $rc, $(tail -n 1 "$tmp/dup.log")"

curl -sf "$url/metrics" | grep -q '^tird_jobs{state="queued"}' && pass "metrics in Prometheus text" \
	|| fail "metrics"

# ---- errors ------------------------------------------------------------------
echo '{"op":"matmul","M":16,"N":16,"K":16}' > "$tmp/mm16.json"
echo '{"op":"matmul","M":24,"N":24,"K":24}' > "$tmp/mm24.json"
body="{\"workload\":$(cat "$tmp/mm16.json"),\"target\":\"cpu\",\"trials\":4}"
code=$(curl -s -o "$tmp/r" -w '%{http_code}' -X POST --data-binary "$body" "$url/v1/jobs")
[ "$code" = 401 ] && jq -e '.error.code=="unauthorized" and (.error.message|length>0)' "$tmp/r" >/dev/null \
	&& pass "a write without the token: 401" || fail "missing token: HTTP $code"
code=$(curl -s -o /dev/null -w '%{http_code}' "$url/v1/best?op=matmul")
[ "$code" = 200 ] && pass "reads stay open" || fail "read without token: HTTP $code"
auth="Authorization: Bearer $TIRD_TOKEN"
code=$(curl -s -o "$tmp/r" -w '%{http_code}' -H "$auth" -X POST --data-binary '{"workload":' "$url/v1/jobs")
[ "$code" = 400 ] && jq -e '.error.code and .error.message' "$tmp/r" >/dev/null \
	&& pass "bad JSON: 400 with error.code, error.message" || fail "bad JSON: HTTP $code"
echo '{"op":"conv2d","N":1,"C":3}' > "$tmp/bad.json"
ctl tune "$tmp/bad.json" --target cpu 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && [ -s "$tmp/err" ] && pass "invalid workload: tirctl exit 1, $(head -c 80 "$tmp/err")" \
	|| fail "invalid workload: exit $rc $(cat "$tmp/err")"
python3 -c 'print("{\"pad\":\"" + "x"*5000 + "\"}")' > "$tmp/big.json"
code=$(curl -s -o "$tmp/r" -w '%{http_code}' -H "$auth" -X POST --data-binary @"$tmp/big.json" "$url/v1/jobs")
[ "$code" = 413 ] && jq -e '.error.message' "$tmp/r" >/dev/null && pass "oversized body: 413" \
	|| fail "oversized body: HTTP $code"
code=$(curl -s -o /dev/null -w '%{http_code}' "$url/v1/nothing")
[ "$code" = 404 ] && pass "unknown route: 404" || fail "unknown route: HTTP $code"

# ---- input edges: one JSON document, NULs, UTF-8, the HTTP layer's own errors -----------------
# raw PORT PYEXPR: sends the bytes PYEXPR evaluates to and prints "STATUS KIND" of the answer,
# KIND json (an {"error": {"code", "message"}} document in valid UTF-8), other, or none
# (the connection closed without an answer); the body goes to $tmp/r
cat > "$tmp/raw.py" <<'PYEOF'
import json, socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
s.sendall(eval(sys.argv[2]))
data = b""
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
        head, sep, body = data.partition(b"\r\n\r\n")
        if sep and b"content-length:" in head.lower():
            n = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            if len(body) >= n:
                break
except (socket.timeout, ConnectionResetError):
    pass
head, sep, body = data.partition(b"\r\n\r\n")
open(sys.argv[3], "wb").write(body)
if not data:
    print("0 none"); sys.exit()
status = head.split(b" ")[1].decode()
try:
    e = json.loads(body.decode("utf-8"))["error"]
    kind = "json" if e["code"] and e["message"] else "other"
except Exception:
    kind = "other"
print(status, kind)
PYEOF
raw() { python3 "$tmp/raw.py" "$port" "$1" "$tmp/r"; }
hdr="b'POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer $TIRD_TOKEN\r\nConnection: close\r\n"
job8='b"{\"workload\":{\"op\":\"matmul\",\"M\":8,\"N\":8,\"K\":8},\"target\":\"cpu\",\"trials\":4}"'
edge() {   # NAME EXPECTED-STATUS GREP-IN-MESSAGE PYEXPR
	got=$(raw "$4")
	[ "$got" = "$2 json" ] && jq -r .error.message "$tmp/r" | grep -q -- "$3" \
		&& pass "$1: $2 naming the fault" || fail "$1: got '$got' $(head -c 300 "$tmp/r")"
}
post_body() {   # PYEXPR of the body: a POST /v1/jobs request with it
	printf '%s' "$hdr'+b'Content-Length: '+str(len($1)).encode()+b'\r\n\r\n'+$1"
}
edge "a body with text after its JSON document" 400 "after the JSON document" "$(post_body "$job8+b'xyz'")"
edge "a body with a NUL after its JSON document" 400 "NUL" "$(post_body "$job8+b'\\x00'")"
edge "a NUL escaped inside a string (\\u0000)" 400 'NUL' \
	"$(post_body "b'{\"workload\":{\"op\":\"matmul\",\"M\":8,\"N\":8,\"K\":8},\"target\":\"cpu\\\\u0000:evil\"}'")"
edge "a raw control character inside a string" 400 'control character' \
	"$(post_body "b'{\"workload\":{\"op\":\"matmul\",\"M\":8,\"N\":8,\"K\":8},\"target\":\"cpu\\x01\"}'")"
edge "invalid UTF-8 in a body" 400 'not valid UTF-8' \
	"$(post_body "b'{\"workload\":{\"op\":\"matmul\",\"M\":8,\"N\":8,\"K\":8},\"target\":\"cpu\\xff\\xfe\"}'")"
edge "invalid UTF-8 in a query, echoed escaped" 400 'state: "\\xff' \
	"b'GET /v1/jobs?state=%FF%C0 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'"
edge "invalid UTF-8 in a path, echoed escaped" 404 'no route GET /v1/\\xfe' \
	"b'GET /v1/%FE HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'"
edge "a NUL in a path segment (%00)" 404 'no job' \
	"b'GET /v1/jobs/1%00x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'"
edge "two Content-Length headers" 400 'Content-Length' \
	"$hdr'+b'Content-Length: 4\r\nContent-Length: 40\r\n\r\n{}{}'"
edge "Content-Length and Transfer-Encoding both" 400 'Transfer-Encoding' \
	"$hdr'+b'Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n'"
edge "600 query parameters" 414 'query parameters' \
	"b'GET /v1/best?'+b'&'.join(b'where=M%%3D%d' % i for i in range(600))+b' HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'"
edge "2000 query parameters" 414 'query parameters' \
	"b'GET /v1/best?'+b'&'.join(b'a%d' % i for i in range(2000))+b' HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'"
edge "a 40 kB URL" 414 'URL' \
	"b'GET /v1/jobs/'+b'9'*40000+b' HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'"
edge "40 kB of headers" 431 'headers' \
	"b'GET /v1/best HTTP/1.1\r\nHost: x\r\n'+b''.join(b'X-Pad-%d: %s\r\n' % (i, b'p'*1000) for i in range(40))+b'Connection: close\r\n\r\n'"
edge "a body over the limit" 413 'limit' "$(post_body "b'{\"pad\":\"'+b'x'*5000+b'\"}'")"

# ---- fusion plans -----------------------------------------------------------------------------
fpost() { curl -s -o "$tmp/r" -w '%{http_code}' -X POST --data-binary "$1" "$url/v1/fuse"; }
seed10=$(cat "$src/examples/graphs/seed10.json")
code=$(fpost "{\"workload\":$seed10,\"mode\":\"tvm\"}")
[ "$code" = 200 ] && jq -e '(.kernels|length)==3 and .read_bytes==12599296 and .write_bytes==8392704' \
	"$tmp/r" >/dev/null && pass "POST /v1/fuse tvm: the seed's 3 kernels" || fail "fuse tvm: HTTP $code $(head -c 300 "$tmp/r")"
code=$(fpost "{\"workload\":$seed10}")
[ "$code" = 200 ] && jq -e '.mode=="inductor" and (.kernels|length)==1 and .kernels[0].name=="fused_add_mean_mul_relu_sub"' \
	"$tmp/r" >/dev/null && pass "POST /v1/fuse: Inductor's one kernel by default" || fail "fuse: HTTP $code $(head -c 300 "$tmp/r")"
code=$(fpost '{"workload":{"op":"graph","inputs":{"x":{"shape":[4]}},"nodes":[{"name":"a","op":"add","args":["x","zz"]}],"outputs":["a"]}}')
[ "$code" = 400 ] && jq -e '.error.message|test("zz")' "$tmp/r" >/dev/null \
	&& pass "POST /v1/fuse, a bad graph: 400 naming the fault" || fail "fuse bad graph: HTTP $code $(cat "$tmp/r")"
code=$(fpost '{"workload":{"op":"matmul","M":8,"N":8,"K":8}}')
[ "$code" = 400 ] && pass "POST /v1/fuse, not a graph: 400" || fail "fuse matmul: HTTP $code"
ctl fuse "$src/examples/graphs/seed10.json" --mode eager --json >"$tmp/f" 2>&1 \
	&& jq -e '(.kernels|length)==10 and .read_bytes==46153728 and .write_bytes==37752832' "$tmp/f" >/dev/null \
	&& pass "tirctl fuse --mode eager --json: 10 kernels, offline" || fail "tirctl fuse eager: $(head -c 300 "$tmp/f")"
printf '{"op":"graph"' >"$tmp/bad.json"
ctl fuse "$tmp/bad.json" >/dev/null 2>"$tmp/e"; rc=$?
[ $rc = 1 ] && grep -q "fuse" "$tmp/e" && pass "tirctl fuse, a broken document: exit 1 with a message" \
	|| fail "tirctl fuse broken: rc $rc $(cat "$tmp/e")"

# ---- the worker protocol and the job routes by hand ---------------------------------------
# (a target no job here uses, so the probe worker leases nothing of the tests below)
arm=cpu:aarch64+neon
post() { curl -s -o "$tmp/r" -w '%{http_code}' -H "$auth" -X "$1" ${3:+--data-binary "$3"} "$url$2"; }
code=$(post POST /v1/workers "{\"target\":\"$arm\",\"name\":\"probe\"}")
wid=$(jq -r .worker_id "$tmp/r")
[ "$code" = 201 ] && jq -e ".target==\"$arm\" and .lease_s==2 and .heartbeat_s>0" "$tmp/r" >/dev/null \
	&& pass "worker registers: 201 with its id and periods" || fail "register: HTTP $code $(cat "$tmp/r")"
code=$(post POST /v1/workers '{"target":"cuda:sm_12"}')
[ "$code" = 400 ] && jq -e '.error.code=="invalid_target"' "$tmp/r" >/dev/null \
	&& pass "worker with a bad target: 400 invalid_target" || fail "bad worker target: HTTP $code"
# two parts of one GPU architecture are two keys (an H100 never measures
# for an H200); a part not as a worker writes it is refused
h100=cuda:sm_90+h100-80gb-hbm3 h200=cuda:sm_90+h200
c1=$(post POST /v1/workers "{\"target\":\"$h100\",\"name\":\"probe-h100\"}"); w100=$(jq -r .worker_id "$tmp/r")
c2=$(post POST /v1/workers "{\"target\":\"$h200\",\"name\":\"probe-h200\"}"); w200=$(jq -r .worker_id "$tmp/r")
keys=$(curl -s -H "$auth" "$url/v1/workers" | jq -r --arg a "$w100" --arg b "$w200" \
	'[.workers[]|select(.worker_id==$a or .worker_id==$b)|.target]|sort|join(" ")')
[ "$c1 $c2" = "201 201" ] && [ "$keys" = "$h100 $h200" ] &&
	pass "an H100 and an H200 register as two keys: $keys" || fail "GPU parts: $c1 $c2 '$keys'"
for w in "$w100" "$w200"; do post DELETE "/v1/workers/$w" >/dev/null; done
for bad in 'cpu:sparc|unknown architecture "sparc"' 'cpu:x86_64+avx512f|"avx512f" without "avx2"' \
	'cpu:x86_64+neon|unknown feature "neon" for x86_64' 'cuda:sm_90+H200|the part "H200" must be' \
	'cuda:sm_90+h100--pcie|must be lower-case'; do
	t=${bad%%|*}; why=${bad#*|}
	code=$(post POST /v1/jobs "{\"workload\":$(cat "$tmp/mm24.json"),\"target\":\"$t\",\"trials\":4}")
	[ "$code" = 400 ] && jq -e --arg w "$why" '.error.code=="invalid_target" and (.error.message|contains($w))' "$tmp/r" >/dev/null \
		&& pass "a job for $t: 400 naming $why" || fail "job for $t: HTTP $code $(cat "$tmp/r")"
done
code=$(post POST "/v1/workers/$wid/lease?wait=0")
[ "$code" = 204 ] && pass "lease with nothing pending: 204" || fail "empty lease: HTTP $code"
code=$(post POST "/v1/workers/$wid/heartbeat")
[ "$code" = 200 ] && jq -e '.ok==true' "$tmp/r" >/dev/null && pass "heartbeat: 200" \
	|| fail "heartbeat: HTTP $code"
code=$(post POST "/v1/workers/$wid/results" '{"batch_id":999999,"results":[]}')
[ "$code" = 409 ] && jq -e '.error.code=="lease_lost"' "$tmp/r" >/dev/null \
	&& pass "results for a batch not leased: 409 lease_lost" || fail "stray results: HTTP $code"
code=$(post POST "/v1/workers/$wid/results" '{"batch_id":1,"results":[{"status":"fine"}]}')
[ "$code" = 400 ] && jq -e '.error.message|test("results\\[0\\].status")' "$tmp/r" >/dev/null \
	&& pass "a result with an unknown status: 400 naming results[0].status" \
	|| fail "bad result status: HTTP $code $(cat "$tmp/r")"
code=$(post POST "/v1/workers/$wid/results" '{"batch_id":1,"results":[{"status":"ok"}],"compile_cache_hits":2}')
[ "$code" = 400 ] && jq -e '.error.message|test("compile_cache_hits")' "$tmp/r" >/dev/null \
	&& pass "compile_cache_hits past the result count: 400 naming it" \
	|| fail "bad compile_cache_hits: HTTP $code $(cat "$tmp/r")"
curl -s "$url/metrics" | grep -Eq '^tird_compile_cache_hits_total 0$' \
	&& pass "metrics: tird_compile_cache_hits_total, nothing counted from a refused post" \
	|| fail "metrics: no tird_compile_cache_hits_total 0"
code=$(post DELETE "/v1/workers/$wid")
[ "$code" = 200 ] && pass "worker leaves: 200" || fail "leave: HTTP $code"
code=$(post POST "/v1/workers/$wid/heartbeat")
[ "$code" = 404 ] && jq -e '.error.code=="unknown_worker"' "$tmp/r" >/dev/null \
	&& pass "heartbeat after leaving: 404 unknown_worker" || fail "heartbeat of a gone worker: HTTP $code"
code=$(curl -s -o "$tmp/r" -w '%{http_code}' "$url/v1/jobs/999999")
[ "$code" = 404 ] && jq -e '.error.code=="not_found"' "$tmp/r" >/dev/null \
	&& pass "an unknown job: 404 not_found" || fail "unknown job: HTTP $code"
code=$(post DELETE /v1/jobs/abc)
[ "$code" = 404 ] && pass "cancel of a job id that is not one: 404" || fail "cancel abc: HTTP $code"
# a job no worker serves: cancelled while queued (200) or running (202), then ended
code=$(post POST /v1/jobs "{\"workload\":$(cat "$tmp/mm24.json"),\"target\":\"$arm\",\"trials\":4}")
cid=$(jq -r .job_id "$tmp/r")
[ "$code" = 201 ] && pass "a job for a target no worker serves: 201" || fail "submit $arm: HTTP $code"
code=$(post DELETE "/v1/jobs/$cid")
{ [ "$code" = 200 ] && jq -e '.state=="cancelled"' "$tmp/r" >/dev/null; } ||
	{ [ "$code" = 202 ] && jq -e '.cancel_requested==true' "$tmp/r" >/dev/null; } \
	&& pass "cancel: HTTP $code, $(jq -r .state "$tmp/r")" || fail "cancel: HTTP $code $(cat "$tmp/r")"
cancelled() { curl -s "$url/v1/jobs/$cid" | jq -e '.state=="cancelled"' >/dev/null; }
until_ok 100 cancelled && pass "job $cid ends cancelled" || fail "job $cid: $(curl -s "$url/v1/jobs/$cid")"
code=$(post DELETE "/v1/jobs/$cid")
[ "$code" = 409 ] && jq -e '.error.code=="conflict"' "$tmp/r" >/dev/null \
	&& pass "cancel of an ended job: 409 conflict" || fail "cancel twice: HTTP $code"

# ---- token scopes: only worker tokens register workers, only admin imports --------------------
cpost() {   # TOKEN METHOD PATH [BODY]
	curl -s -o "$tmp/r" -w '%{http_code}' -H "Authorization: Bearer $1" -X "$2" ${4:+--data-binary "$4"} "$url$3"
}
code=$(cpost ci-token-0123456789 POST /v1/workers "{\"target\":\"$arm\"}")
[ "$code" = 403 ] && jq -e '.error.code=="forbidden" and (.error.message|test("token ci .*worker scope"))' "$tmp/r" >/dev/null \
	&& pass "a submit token registering a worker: 403 naming the scope" || fail "ci registers a worker: HTTP $code $(cat "$tmp/r")"
code=$(cpost ci-token-0123456789 POST /v1/records '{"format":"tird-records/1","workloads":{},"records":[]}')
[ "$code" = 403 ] && jq -e '.error.message|test("admin scope")' "$tmp/r" >/dev/null \
	&& pass "a submit token importing: 403 (admin only)" || fail "ci imports: HTTP $code $(cat "$tmp/r")"
code=$(cpost worker-token-0123456789 POST /v1/jobs "{\"workload\":$(cat "$tmp/mm16.json"),\"target\":\"$arm\",\"trials\":4}")
[ "$code" = 403 ] && jq -e '.error.message|test("submit scope")' "$tmp/r" >/dev/null \
	&& pass "a worker token submitting a job: 403" || fail "worker submits: HTTP $code $(cat "$tmp/r")"
code=$(curl -s -o "$tmp/r" -w '%{http_code}' -H "Authorization: Bearer worker-token-0123456789" "$url/v1/jobs")
[ "$code" = 200 ] && pass "every token may read" || fail "worker token reads: HTTP $code"
printf 'good-token-0123456789 read,sudo x\n' > "$tmp/badtoken"
timeout 20 "$TIRD" --listen 127.0.0.1:$(free_port) --db "$(db tok)" --local-workers none \
	--token-file "$tmp/badtoken" >"$tmp/tok.log" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q 'badtoken:1: "sudo" is not a scope' "$tmp/tok.log" \
	&& pass "a token file with an unknown scope: exit 1 naming line and word" || fail "bad scope: exit $rc $(cat "$tmp/tok.log")"

# ---- worker results: only the lease holder's, and re-checked ------------------------------------
# a hand-driven worker w1 leases a batch of a job no real worker serves; an unregistered id, another
# registered worker, and w1 with another worker's token are refused; w1's forged "ok" results
# (error 1e300, latency -5, infinite, 1e-9 us) are stored as the errors they are, no best
w1tok="Authorization: Bearer worker-token-0123456789"; w2tok="Authorization: Bearer worker2-token-0123456789"
wpost() {   # AUTH PATH [BODY]
	curl -s -o "$tmp/r" -w '%{http_code}' -H "$1" -X POST ${3:+--data-binary "$3"} "$url$2"
}
wpost "$w1tok" /v1/workers "{\"target\":\"$arm\",\"name\":\"hand1\"}" >/dev/null; h1=$(jq -r .worker_id "$tmp/r")
echo '{"op":"matmul","M":8,"N":8,"K":16}' > "$tmp/mm8k.json"
code=$(post POST /v1/jobs "{\"workload\":$(cat "$tmp/mm8k.json"),\"target\":\"$arm\",\"trials\":4,\"batch\":4}")
fj=$(jq -r .job_id "$tmp/r")
code=$(wpost "$w1tok" "/v1/workers/$h1/lease?wait=20")
bid=$(jq -r .batch_id "$tmp/r"); nb=$(jq '.traces|length' "$tmp/r")
[ "$code" = 200 ] && [ "$nb" = 4 ] && pass "hand worker $h1 leased batch $bid of job $fj" || fail "hand lease: HTTP $code $(head -c 200 "$tmp/r")"
# h1 heartbeats while it holds the batch, as tird-worker does (lease_s is 2 here)
( while :; do curl -s -o /dev/null -H "$w1tok" -X POST "$url/v1/workers/$h1/heartbeat"; sleep 0.3; done ) &
hb=$!; pids="$pids $hb"
# the second worker registers now: one registered before the lease could go
# silent past lease_s while the batch was made on busy cores, and be dropped
wpost "$w2tok" /v1/workers "{\"target\":\"$arm\",\"name\":\"hand2\"}" >/dev/null; h2=$(jq -r .worker_id "$tmp/r")
forged='{"status":"ok","latency_us":1e-9,"max_rel_error":0}'
fres="{\"batch_id\":$bid,\"results\":[$forged,$forged,$forged,$forged]}"
code=$(wpost "$w1tok" "/v1/workers/w-000000000000/results" "$fres")
[ "$code" = 403 ] && jq -e '.error.code=="forbidden" and (.error.message|test("not registered"))' "$tmp/r" >/dev/null \
	&& pass "results from an unregistered worker id: 403" || fail "unregistered results: HTTP $code $(cat "$tmp/r")"
code=$(wpost "$w2tok" "/v1/workers/$h2/results" "$fres")
[ "$code" = 409 ] && jq -e '.error.code=="lease_lost"' "$tmp/r" >/dev/null \
	&& pass "results from a registered worker without the lease: 409" || fail "other worker's results: HTTP $code $(cat "$tmp/r")"
code=$(wpost "$w2tok" "/v1/workers/$h1/results" "$fres")
[ "$code" = 403 ] && jq -e '.error.message|test("registered with token w1")' "$tmp/r" >/dev/null \
	&& pass "results for $h1 with another worker's token: 403" || fail "token of w2 for h1: HTTP $code $(cat "$tmp/r")"
code=$(wpost "$w1tok" "/v1/workers/$h1/results" "{\"batch_id\":$bid,\"results\":[
	{\"status\":\"ok\",\"latency_us\":3.5,\"max_rel_error\":1e300},{\"status\":\"ok\",\"latency_us\":-5,\"max_rel_error\":0},
	{\"status\":\"ok\",\"latency_us\":1e999,\"max_rel_error\":0},$forged]}")
[ "$code" = 200 ] && pass "the lease holder's results: 200" || fail "h1 results: HTTP $code $(cat "$tmp/r")"
kill $hb 2>/dev/null; wait $hb 2>/dev/null
armq=cpu:aarch64%2Bneon
stored4() { [ "$(curl -s "$url/v1/records?target=$armq" | jq '.records|length')" -ge 4 ]; }
until_ok 100 stored4
post DELETE "/v1/jobs/$fj" >/dev/null
ended() { curl -s "$url/v1/jobs/$fj" | jq -e '.state=="cancelled" or .state=="failed"' >/dev/null; }
until_ok 100 ended
curl -s "$url/v1/records?target=$armq" > "$tmp/armrec.json"
jq -e '[.records[] | select(.status=="ok")] | length == 0' "$tmp/armrec.json" >/dev/null &&
	jq -e '[.records[].status] | sort == ["run_error","run_error","run_error","wrong_result"]' "$tmp/armrec.json" >/dev/null &&
	jq -e 'all(.records[]; .worker=="'"$h1"'" and .token=="w1" and (.host|test("hand1")))' "$tmp/armrec.json" >/dev/null &&
	[ "$(curl -s "$url/v1/best?target=$armq" | jq '.best|length')" = 0 ] \
	&& pass "forged ok results stored as wrong_result / run_error with who sent them, no best" \
	|| fail "forged results: $(jq -c '[.records[] | {status, latency_us, message, worker, token}]' "$tmp/armrec.json")"
for h in "$h1|$w1tok" "$h2|$w2tok"; do curl -s -o /dev/null -H "${h#*|}" -X DELETE "$url/v1/workers/${h%%|*}"; done

# ---- submit, dedupe, a worker lost mid-batch -------------------------------------------
job=$(ctl --json tune "$tmp/mm16.json" --target cpu --trials 4 --batch 4)
id=$(printf '%s' "$job" | jq -r .job_id)
printf '%s' "$job" | jq -e '.job_id and .state=="queued"' >/dev/null && pass "tune: job $id queued" \
	|| fail "tune: $job"
printf '%s' "$job" | jq -e '.search == {"cost_model": "xgboost", "seed": null, "patience": null}' >/dev/null \
	&& pass "default search options: xgboost, a derived seed, tird's patience" || fail "default search: $job"
again=$(ctl --json tune "$tmp/mm16.json" --target cpu --trials 4)
printf '%s' "$again" | jq -e ".job_id==$id and .joined==true" >/dev/null \
	&& pass "identical submission joins job $id" || fail "dedupe: $again"

"$WORKER" --server "$url" --target cpu --name doomed >"$tmp/worker-a.log" 2>&1 &
wa=$!; pids="$pids $wa"
leased() { curl -s "$url/v1/workers" | jq -e '.workers[] | select(.name|endswith("doomed")) | .batch_id != null' >/dev/null 2>&1; }
if until_ok 600 leased; then
	kill -9 $wa
	pass "worker A took the batch and was killed mid-batch"
else
	fail "worker A never took a lease"
fi
"$WORKER" --server "$url" --target cpu --name rescuer >"$tmp/worker-b.log" 2>&1 &
wb=$!; pids="$pids $wb"
res=$(timeout 300 "$TIRCTL" --json wait "$id"); rc=$?
[ $rc -eq 0 ] && printf '%s' "$res" | jq -e '.workload_key and .workload and .target and (.latency_us|type=="number") and (.gflops|type=="number") and .trials and .record_id' >/dev/null \
	&& pass "wait: job $id done with the result fields" || fail "wait: exit $rc $res"
curl -s "$url/metrics" | grep -Eq '^tird_batches_requeued_total [1-9]' \
	&& pass "the lost batch was re-queued" || fail "no re-queued batch in metrics"
ctl --json workers | jq -e '[.workers[] | select(.name|endswith("doomed")) | .state] == ["gone"]' >/dev/null \
	&& pass "worker A is gone, B finished the batch" || fail "workers: $(ctl --json workers)"
key=$(printf '%s' "$res" | jq -r .workload_key)
rec=$(printf '%s' "$res" | jq -r .record_id)

# ---- best, show, cache ---------------------------------------------------------------------
ctl --json best matmul | jq -e "type==\"array\" and any(.[]; .workload_key==\"$key\" and .record_id==\"$rec\")" >/dev/null \
	&& pass "best matmul lists it" || fail "best matmul"
ctl --json best matmul --where M=16 --target cpu | jq -e 'length==1' >/dev/null \
	&& pass "best --where M=16 --target cpu" || fail "best --where"
ctl show "$key" --source | grep -q 'tir_entry\|void' && pass "show --source" || fail "show --source"
ctl show "$key" --tir | grep -q 'for\|block' && pass "show --tir" || fail "show --tir"
ctl --json show "$key" --trace | jq -e '.best[0].trace.insts|length>0' >/dev/null \
	&& pass "show --trace" || fail "show --trace"
hit=$(timeout 20 "$TIRCTL" --json tune "$tmp/mm16.json" --target cpu --trials 4 --wait)
printf '%s' "$hit" | jq -e ".cached==true and .record_id==\"$rec\"" >/dev/null \
	&& pass "same workload and trials: answered from the cache" || fail "cache hit: $hit"

# ---- a graph tuned by its fusion plan: a job per kernel, their sum ----------------------------
cat > "$tmp/sm.json" <<'EOF2'
{"op":"graph","inputs":{"x":{"shape":[16,32]}},"nodes":[
 {"name":"mx","op":"amax","args":["x"],"dim":-1,"keepdim":true},{"name":"sh","op":"sub","args":["x","mx"]},
 {"name":"ex","op":"exp","args":["sh"]},{"name":"sm","op":"sum","args":["ex"],"dim":-1,"keepdim":true},
 {"name":"y","op":"div","args":["ex","sm"]}],"outputs":["y"]}
EOF2
plan=$(timeout 300 "$TIRCTL" --json tune "$tmp/sm.json" --target cpu --trials 4 --fusion tvm --wait 2>/dev/null)
printf '%s' "$plan" | jq -e '.fusion=="tvm" and (.kernels|length)==4 and (([.kernels[].latency_us]|add) - .latency_us | fabs) < 1e-6
	and all(.kernels[]; .latency_us > 0 and (.workload_key|length)==64)' >/dev/null \
	&& pass "tune --fusion tvm --wait: 4 kernels tuned, the graph's latency their sum" || fail "tune --fusion: $plan"
plan2=$(timeout 300 "$TIRCTL" --json tune "$tmp/sm.json" --target cpu --trials 4 --fusion eager --wait 2>/dev/null)
k1=$(printf '%s' "$plan" | jq -r '.kernels[0].workload_key'); k2=$(printf '%s' "$plan2" | jq -r '.kernels[0].workload_key')
[ -n "$k1" ] && [ "$k1" = "$k2" ] && pass "the same kernel in two plans is one workload (key $k1)" \
	|| fail "kernel keys: $k1 vs $k2"

sed 's/1024/16/g' "$src/examples/graphs/seed10.json" > "$tmp/s16.json"
meas=$(timeout 300 "$TIRCTL" --json tune "$tmp/s16.json" --target cpu --trials 4 --fusion measured --wait 2>/dev/null)
printf '%s' "$meas" | jq -e '.fusion=="measured" and (.decisions|length)==1 and (.decisions[0].kept|type)=="boolean"
	and .decisions[0].fused_us > 0 and .decisions[0].parts_us > 0
	and (.kernels|length) == (if .decisions[0].kept then 1 else 2 end)
	and (([.kernels[].latency_us]|add) - .latency_us | fabs) < 1e-6' >/dev/null \
	&& pass "tune --fusion measured: the seed's fusion kept or undone by its measured times" || fail "measured: $meas"
body=$(jq -c '{workload: ., target: "cpu", trials: 4, fusion: "tvm"}' "$tmp/sm.json")
code=$(curl -s -o "$tmp/r" -w '%{http_code}' -H "$auth" -X POST --data-binary "$body" "$url/v1/jobs")
{ [ "$code" = 200 ] || [ "$code" = 201 ]; } && jq -e '.fusion=="tvm" and (.kernels|length)==4 and all(.kernels[]; .job.job_id > 0 and (.nodes|length) >= 1)' \
	"$tmp/r" >/dev/null && pass "POST /v1/jobs with fusion: a job per kernel" \
	|| fail "jobs fusion: HTTP $code $(head -c 300 "$tmp/r")"
body=$(jq -c '{workload: ., target: "cpu", trials: 4}' "$tmp/sm.json")
code=$(curl -s -o "$tmp/r" -w '%{http_code}' -H "$auth" -X POST --data-binary "$body" "$url/v1/jobs")
{ [ "$code" = 200 ] || [ "$code" = 201 ]; } && jq -e '.fusion=="inductor" and (.kernels|length)==1' "$tmp/r" >/dev/null \
	&& pass "POST /v1/jobs of a graph: Inductor's plan by default" || fail "graph job default: HTTP $code $(head -c 200 "$tmp/r")"
body=$(jq -c '{workload: ., target: "cpu", trials: 4, fusion: "none"}' "$tmp/sm.json")
code=$(curl -s -o "$tmp/r" -w '%{http_code}' -H "$auth" -X POST --data-binary "$body" "$url/v1/jobs")
{ [ "$code" = 200 ] || [ "$code" = 201 ]; } && jq -e '.job_id > 0 and (.kernels == null)' "$tmp/r" >/dev/null \
	&& pass "POST /v1/jobs of a graph, fusion none: one job" || fail "graph job none: HTTP $code $(head -c 200 "$tmp/r")"
body=$(jq -c '{workload: ., target: "cpu", fusion: "measured"}' "$tmp/sm.json")
code=$(curl -s -o "$tmp/r" -w '%{http_code}' -H "$auth" -X POST --data-binary "$body" "$url/v1/jobs")
[ "$code" = 400 ] && jq -e '.error.code=="bad_request"' "$tmp/r" >/dev/null \
	&& pass "POST /v1/jobs with fusion measured: 400" || fail "jobs fusion measured: HTTP $code"
code=$(curl -s -o "$tmp/r" -w '%{http_code}' -H "$auth" -X POST \
	--data-binary '{"workload":{"op":"matmul","M":8,"N":8,"K":8},"target":"cpu","fusion":"tvm"}' "$url/v1/jobs")
[ "$code" = 400 ] && jq -e '.error.code=="invalid_workload"' "$tmp/r" >/dev/null \
	&& pass "POST /v1/jobs with fusion, not a graph: 400 invalid_workload" || fail "jobs fusion matmul: HTTP $code"
fm=$(timeout 300 "$TIRCTL" --json fuse "$tmp/s16.json" --mode measured --target cpu --trials 4 2>/dev/null)
printf '%s' "$fm" | jq -e '.mode=="measured" and (.decisions|length)==1 and .latency_us > 0' >/dev/null \
	&& pass "tirctl fuse --mode measured --target cpu: the measured plan through tird" || fail "fuse measured: $fm"
ctl tune "$tmp/s16.json" --target cpu --fusion measured >/dev/null 2>&1; rc=$?
[ $rc = 2 ] && pass "tune --fusion measured without --wait: usage error" || fail "measured without wait: rc $rc"

# ---- search options: cost model, seed and patience (worker B still serves) ---------------------
echo '{"op":"matmul","M":8,"N":8,"K":8}' > "$tmp/mm8.json"
job3=$(ctl --json tune "$tmp/mm8.json" --target cpu --trials 4 --batch 4 --cost-model random --seed 7)
id3=$(printf '%s' "$job3" | jq -r .job_id)
printf '%s' "$job3" | jq -e '.search == {"cost_model": "random", "seed": 7, "patience": null}' >/dev/null \
	&& pass "tune --cost-model random --seed 7: job $id3 carries them" || fail "search options: $job3"
timeout 300 "$TIRCTL" --json wait "$id3" >/dev/null; rc=$?
st3=$(ctl --json status "$id3")
[ $rc -eq 0 ] && printf '%s' "$st3" | jq -e '.state=="done" and .search.cost_model=="random" and .search.seed==7' >/dev/null \
	&& pass "job $id3 finished under the random model, seed 7" || fail "random job: exit $rc $st3"
grep -q "job $id3: tuning .* random model, seed 7, no early stop$" "$tmp/tird.log" \
	&& pass "the run used the random model, seed 7 and no early stop (the default)" \
	|| fail "no random run of job $id3 in the log"
# a patience of the job's own (a workload of its own: mm8's records are stored)
echo '{"op":"matmul","M":8,"N":8,"K":16}' > "$tmp/mm816.json"
job4=$(ctl --json tune "$tmp/mm816.json" --target cpu --trials 4 --batch 4 --patience 3)
id4=$(printf '%s' "$job4" | jq -r .job_id)
timeout 300 "$TIRCTL" --json wait "$id4" >/dev/null
printf '%s' "$(ctl --json status "$id4")" | jq -e '.state=="done" and .search.patience==3' >/dev/null &&
	grep -q "job $id4: tuning .*, patience 3 rounds$" "$tmp/tird.log" \
	&& pass "tune --patience 3: job $id4 ran with it" || fail "patience 3: $job4"
for bad in '"search":"random"|search:' '"search":{"cost_model":"gbm"}|search.cost_model' \
	'"search":{"cost_model":null}|search.cost_model' '"search":{"seed":-1}|search.seed' \
	'"search":{"seed":1.5}|search.seed' '"search":{"seed":"7"}|search.seed' \
	'"search":{"seeds":7}|"seeds"' '"search":{"patience":-1}|search.patience' \
	'"search":{"patience":2.5}|search.patience' '"search":{"patience":"6"}|search.patience' \
	'"search":{"patience":10001}|search.patience'; do
	b=${bad%|*}; field=${bad##*|}
	code=$(curl -s -o "$tmp/r" -w '%{http_code}' -H "$auth" -X POST \
		--data-binary "{\"workload\":$(cat "$tmp/mm8.json"),\"target\":\"cpu\",$b}" "$url/v1/jobs")
	[ "$code" = 400 ] && jq -e --arg f "$field" '.error.message|contains($f)' "$tmp/r" >/dev/null \
		&& pass "$b: 400 naming $field" || fail "$b: HTTP $code $(cat "$tmp/r")"
done
ctl tune "$tmp/mm8.json" --target cpu --cost-model gbm 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -q 'search.cost_model' "$tmp/err" && pass "tirctl --cost-model gbm: exit 1" \
	|| fail "tirctl --cost-model gbm: exit $rc $(cat "$tmp/err")"
ctl tune "$tmp/mm8.json" --target cpu --seed -3 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && pass "tirctl --seed -3: usage error" || fail "tirctl --seed -3: exit $rc"
ctl tune "$tmp/mm8.json" --target cpu --patience x 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q -- '--patience takes a non-negative integer' "$tmp/err" && pass "tirctl --patience x: usage error" \
	|| fail "tirctl --patience x: exit $rc"
"$TIRD" --listen 127.0.0.1:1 --db "$tmp/never.db" --default-patience -1 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -ne 0 ] && grep -q 'default_patience' "$tmp/err" && [ ! -e "$tmp/never.db" ] \
	&& pass "tird --default-patience -1: refused, naming it, no database made" \
	|| fail "default_patience -1: exit $rc $(cat "$tmp/err")"

# ---- export / import round trip into a second tird --------------------------------------------
n=0
ctl export "$tmp/export.json" && n=$(jq '.records|length' "$tmp/export.json") && [ "$n" -ge 4 ] \
	&& pass "export: $n records" || fail "export"
port2=$(free_port); url2=http://127.0.0.1:$port2
"$TIRD" --listen 127.0.0.1:$port2 --db "$(db b)" --local-workers none >"$tmp/tird2.log" 2>&1 &
t2=$!; pids="$pids $t2"
wait_up "$url2" || fail "second tird did not start"
jq '.records[-1].target = "cpu"' "$tmp/export.json" >"$tmp/badimport.json"
"$TIRCTL" --server "$url2" import "$tmp/badimport.json" 2>"$tmp/err"; rc=$?
"$TIRCTL" --server "$url2" export "$tmp/empty.json" 2>/dev/null
[ $rc -eq 1 ] && grep -q "records\[$((n - 1))\]: target \"cpu\" is not a full target key" "$tmp/err" &&
	[ "$(jq '.records|length' "$tmp/empty.json")" = 0 ] \
	&& pass "import with a bad last record: exit 1, the record named, nothing stored" \
	|| fail "bad import: exit $rc $(cat "$tmp/err"), stored $(jq '.records|length' "$tmp/empty.json")"
# untrusted (no --trust): stored, marked imported with its source, never a best nor a trial
i0=$("$TIRCTL" --server "$url2" --json import "$tmp/export.json")
printf '%s' "$i0" | jq -e ".imported==$n and .trusted==false" >/dev/null &&
	[ "$("$TIRCTL" --server "$url2" --json best matmul | jq length)" = 0 ] &&
	"$TIRCTL" --server "$url2" export 2>/dev/null | jq -e 'all(.records[]; .origin=="imported" and .trusted==false
		and (.source|test("import by an open tird from 127.0.0.1")))' >/dev/null \
	&& pass "an untrusted import: $n records stored, marked imported with their source, no best" \
	|| fail "untrusted import: $i0, best $("$TIRCTL" --server "$url2" --json best matmul)"
"$TIRCTL" --server "$url2" --json import "$tmp/export.json" | jq -e ".imported==0 and .skipped==$n" >/dev/null \
	|| fail "the untrusted import again: not all skipped"
kill $t2; wait $t2 2>/dev/null; db_rm b
"$TIRD" --listen 127.0.0.1:$port2 --db "$(db b)" --local-workers none >>"$tmp/tird2.log" 2>&1 &
t2=$!; pids="$pids $t2"
wait_up "$url2" || fail "second tird did not start again"
i1=$("$TIRCTL" --server "$url2" --json import --trust "$tmp/export.json")
i2=$("$TIRCTL" --server "$url2" --json import --trust "$tmp/export.json")
[ -n "$i1" ] && [ -n "$i2" ] && printf '%s' "$i1" | jq -e ".imported==$n" >/dev/null &&
	printf '%s' "$i2" | jq -e ".imported==0 and .skipped==$n" >/dev/null \
	&& pass "import --trust twice: $n records, then none (idempotent)" || fail "import: $i1 / $i2"
"$TIRCTL" --server "$url2" --json best matmul | jq -e "any(.[]; .record_id==\"$rec\")" >/dev/null \
	&& pass "the trusted imported cache has the same best" || fail "best after import"
# removing the best recomputes it: another record of the workload, or none
b0=$("$TIRCTL" --server "$url2" --json best matmul --where M=16 --target cpu | jq -r '.[0].latency_us')
"$TIRCTL" --server "$url2" --json records rm "$rec" | jq -e ".removed==\"$rec\" and .best_changed==true" >/dev/null &&
	b1=$("$TIRCTL" --server "$url2" --json best matmul --where M=16 --target cpu | jq -r "if length==0 then \"none\" elif .[0].record_id==\"$rec\" then \"same\" else .[0].latency_us end") &&
	[ "$b1" != same ] && { [ "$b1" = none ] || python3 -c "import sys; sys.exit(not float('$b1') >= float('$b0'))"; } \
	&& pass "records rm of the best: best recomputed ($b0 us -> $b1)" || fail "records rm: best $b1"
"$TIRCTL" --server "$url2" records rm "$rec" 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -q "no record $rec" "$tmp/err" && pass "records rm of a record not stored: exit 1" \
	|| fail "records rm twice: exit $rc $(cat "$tmp/err")"
kill $t2

# ---- nothing forged becomes a best (imports into the first tird, the admin token) -------------
ipost() {   # QUERY BODY-FILE
	curl -s -o "$tmp/r" -w '%{http_code}' -H "$auth" -X POST --data-binary @"$2" "$url/v1/records$1"
}
best16() { curl -s "$url/v1/best?op=matmul&target=cpu&where=M=16" | jq -c '.best[0] | {record_id, latency_us, trials}'; }
bb=$(best16); brec=$(printf '%s' "$bb" | jq -r .record_id)
key16=$(curl -s "$url/v1/best?op=matmul&target=cpu&where=M=16" | jq -r '.best[0].workload_key')
cpukey=$(curl -s "$url/healthz" | jq -r .cpu)
btrace=$(jq -r --arg id "$brec" '.records[] | select(.id==$id) | .trace' "$tmp/export.json")
clone() {   # LATENCY TRACE-JQ > file: the best's record with another latency and trace
	jq --arg id "$brec" --argjson us "$1" '.records = [.records[] | select(.id==$id) | .latency_us = $us | .trace = ('"$2"') | del(.id)]' "$tmp/export.json"
}
clone 1e-9 '.trace | sub("\\[";"[ ")' > "$tmp/clone.json"
code=$(ipost "?trust=1" "$tmp/clone.json")
[ "$code" = 400 ] && jq -e '.error.code=="invalid_record" and (.error.message|test("records\\[0\\]: .*latency_us 1e-09.*floor"))' "$tmp/r" >/dev/null &&
	[ "$(best16)" = "$bb" ] \
	&& pass "a clone of the best (a space added) at 1e-9 us, even trusted: 400 naming records[0], best unchanged" \
	|| fail "clone at 1e-9 us: HTTP $code $(cat "$tmp/r"), best $(best16) was $bb"
clone 0.5 '.trace | sub("\\[";"[ ")' > "$tmp/clone2.json"
code=$(ipost "?trust=1" "$tmp/clone2.json")
[ "$code" = 200 ] && jq -e '.imported==0 and .skipped==1' "$tmp/r" >/dev/null && [ "$(best16)" = "$bb" ] \
	&& pass "a clone of the best at a plausible 0.5 us, trusted: the same schedule, the stored record kept" \
	|| fail "plausible clone: HTTP $code $(cat "$tmp/r"), best $(best16) was $bb"
clone 50 '"{\"insts\": not json"' > "$tmp/notjson.json"
clone 50 '"{\"insts\":[{\"op\":\"split\",\"in\":[\"l9\",null,4],\"out\":[\"a\",\"b\"]}]}"' > "$tmp/noreplay.json"
for f in notjson noreplay; do
	code=$(ipost "" "$tmp/$f.json")
	[ "$code" = 400 ] && jq -e '.error.code=="invalid_record" and (.error.message|test("records\\[0\\]: the trace does not replay"))' "$tmp/r" >/dev/null \
		&& pass "import of a trace that does not replay ($f): 400 naming records[0]" || fail "$f: HTTP $code $(cat "$tmp/r")"
done
jq --arg id "$brec" '.records = [.records[] | select(.id==$id) | .max_rel_error = 1e300]' "$tmp/export.json" > "$tmp/bigerr.json"
code=$(ipost "?trust=1" "$tmp/bigerr.json")
[ "$code" = 400 ] && jq -e '.error.message|test("records\\[0\\]: .*max_rel_error 1e\\+300.*tolerance")' "$tmp/r" >/dev/null \
	&& pass "import of an ok record with max_rel_error 1e300: 400" || fail "import 1e300: HTTP $code $(cat "$tmp/r")"
# junk: 300 valid schedules of the workload claimed fast; untrusted, they count in no trials
python3 - "$tmp/export.json" "$tmp/junk.json" "$key16" 300 0.7 "$cpukey" <<'PYEOF'
import json, sys, itertools
e = json.load(open(sys.argv[1])); k = sys.argv[3]; n = int(sys.argv[4]); us = float(sys.argv[5])
t0 = sys.argv[6]
f = [c for c in itertools.product([1, 2, 4, 8, 16], repeat=3) if 16 % (c[0] * c[1] * c[2]) == 0]
def tr(a, b, c):
    sp = lambda l, x, o: {"op": "split", "in": [l, x[0], x[1], x[2], None], "out": o}
    return json.dumps({"insts": [{"op": "get_block", "str": "compute", "out": ["b0"]},
        {"op": "get_loops", "in": ["b0"], "out": ["l1", "l2", "l3"]},
        sp("l1", a, ["l4", "l5", "l6", "l7"]), sp("l2", b, ["l8", "l9", "l10", "l11"]),
        sp("l3", c, ["l12", "l13", "l14", "l15"])]})
recs = [{"workload_key": k, "target": t0, "trace": tr(*x), "status": "ok", "latency_us": us + i * 1e-3,
         "max_rel_error": 0} for i, x in enumerate(itertools.islice(itertools.product(f, repeat=3), n))]
json.dump({"format": "tird-records/1", "workloads": {k: e["workloads"][k]}, "records": recs}, open(sys.argv[2], "w"))
PYEOF
code=$(ipost "" "$tmp/junk.json")
[ "$code" = 200 ] && jq -e '.imported==300' "$tmp/r" >/dev/null && [ "$(best16)" = "$bb" ] \
	&& pass "300 junk records claimed fast, untrusted: stored, best and trials unchanged ($bb)" \
	|| fail "junk import: HTTP $code $(cat "$tmp/r"), best $(best16) was $bb"
# a forged import of a schedule never measured, then a job of the workload: measured here first,
# and the measurement replaces the forged claim (import would have ignored the id it holds)
echo '{"op":"matmul","M":16,"N":16,"K":16,"epilogue":["relu"]}' > "$tmp/mm16r.json"
kr=$(curl -s -H "$auth" -X POST --data-binary "{\"workload\":$(cat "$tmp/mm16r.json"),\"target\":\"cpu\"}" "$url/v1/lower" | jq -r .workload_key)
jq --arg k "$kr" --slurpfile w "$tmp/mm16r.json" '.workloads = {($k): $w[0]} | .records = [.records[0] | .workload_key = $k | .latency_us = 0.9]' "$tmp/junk.json" > "$tmp/forged.json"
ftrace=$(jq -r '.records[0].trace' "$tmp/forged.json")
code=$(ipost "" "$tmp/forged.json")
fid=$(curl -s "$url/v1/records?workload=$kr" | jq -r '.records[0].id')
fr=$(timeout 300 "$TIRCTL" --json tune "$tmp/mm16r.json" --target cpu --trials 2 --batch 2 --wait); rc=$?
got=$(curl -s "$url/v1/records?workload=$kr" | jq -c --arg id "$fid" '.records[] | select(.id==$id) | {origin, trusted, latency_us, worker, status}')
[ "$code" = 200 ] && [ $rc -eq 0 ] && printf '%s' "$got" | jq -e '.origin=="measured" and .trusted and .latency_us != 0.9 and (.worker|length>0)' >/dev/null &&
	grep -q "measuring 1 imported records again before the search" "$tmp/tird.log" \
	&& pass "a forged import measured here first and replaced: $got" || fail "forged then measured: HTTP $code rc $rc $got $fr"


# ---- imports are all or nothing ---------------------------------------------------------------
# a bad record midway: a 400 naming it, nothing stored; a large import killed with SIGKILL while
# its transaction writes: after the restart 0 or all of it, then the import again stores all
jq '.records[1].status = "fine"' "$tmp/export.json" >"$tmp/badmid.json"
port5=$(free_port); url5=http://127.0.0.1:$port5
start5() {
	"$TIRD" --listen 127.0.0.1:$port5 --db "$(db d)" --local-workers none --model-seed none \
		>>"$tmp/tird5.log" 2>&1 &
	t5=$!; pids="$pids $t5"
	wait_up "$url5" || fail "the tird of the import tests did not start"
}
start5
"$TIRCTL" --server "$url5" import "$tmp/badmid.json" 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -q 'records\[1\]: status "fine" is not a measurement status' "$tmp/err" &&
	[ "$(sq d 'SELECT count(*) FROM records')" = 0 ] \
	&& pass "import with a bad record midway: exit 1, records[1] named, nothing stored" \
	|| fail "bad record midway: exit $rc $(cat "$tmp/err"), $(sq d 'SELECT count(*) FROM records') stored"
nbig=40000
# (40,000 distinct schedules of the 16x16x16 matmul: each loop split into four factors; an import
# replays and validates every trace, and a trace made canonical is one record)
k16=$(jq -r '.workloads | to_entries[] | select(.value.op=="matmul" and .value.M==16 and .value.N==16 and .value.K==16 and ((.value.epilogue // [])|length)==0 and .value.batch==null) | .key' "$tmp/export.json" | head -n 1)
python3 - "$tmp/export.json" "$tmp/big.json" $nbig "$k16" <<'PYEOF'
import json, sys, itertools
e = json.load(open(sys.argv[1])); n = int(sys.argv[3]); k = sys.argv[4]
r0 = next(r for r in e["records"] if r["workload_key"] == k)
f = [c for c in itertools.product([1, 2, 4, 8, 16], repeat=3) if 16 % (c[0] * c[1] * c[2]) == 0]
def tr(a, b, c):
    sp = lambda l, x, o: {"op": "split", "in": [l, x[0], x[1], x[2], None], "out": o}
    return json.dumps({"insts": [{"op": "get_block", "str": "compute", "out": ["b0"]},
        {"op": "get_loops", "in": ["b0"], "out": ["l1", "l2", "l3"]},
        sp("l1", a, ["l4", "l5", "l6", "l7"]), sp("l2", b, ["l8", "l9", "l10", "l11"]),
        sp("l3", c, ["l12", "l13", "l14", "l15"])]})
recs = [{"workload_key": k, "target": r0["target"], "trace": tr(*x), "status": "ok",
         "latency_us": 1000.0 + i, "max_rel_error": 0}
        for i, x in enumerate(itertools.islice(itertools.product(f, repeat=3), n))]
assert len(recs) == n
json.dump({"format": "tird-records/1", "workloads": {k: e["workloads"][k]}, "records": recs},
          open(sys.argv[2], "w"))
PYEOF
wal0=$(stat -c %s "$tmp/d.db-wal" 2>/dev/null || echo 0)
curl -s -o "$tmp/bigr" -H "$auth" -X POST --data-binary @"$tmp/big.json" "$url5/v1/records?trust=1" &
cpid=$!
writing() {   # the import's transaction has written: 1 MB to SQLite's WAL, or a PostgreSQL xid
	if [ -z "$pgsrv" ]; then
		[ "$(stat -c %s "$tmp/d.db-wal" 2>/dev/null || echo 0)" -gt $((wal0 + 1000000)) ]
	else
		[ "$(sq d "SELECT count(*) FROM pg_stat_activity WHERE datname = 'svc_d' AND
			backend_xid IS NOT NULL")" != 0 ] && sleep 0.3
	fi
}
for i in $(seq 1 1000); do   # until the import is writing, or has answered
	writing && break
	kill -0 $cpid 2>/dev/null || break
	sleep 0.01
done
kill -9 $t5; wait $t5 2>/dev/null; wait $cpid 2>/dev/null
when=$([ -s "$tmp/bigr" ] && echo "after it answered" || echo "mid-import")
kept=$(sq d 'SELECT count(*) FROM records')
{ [ "$kept" = 0 ] || [ "$kept" = $nbig ]; } \
	&& pass "SIGKILL $when of a $nbig-record import: $kept stored (0 or all)" \
	|| fail "SIGKILL $when of a $nbig-record import: $kept of $nbig stored"
start5
again=$("$TIRCTL" --server "$url5" --json import --trust "$tmp/big.json")
printf '%s' "$again" | jq -e ".imported + .skipped == $nbig and .imported == $nbig - $kept" >/dev/null &&
	[ "$(sq d 'SELECT count(*) FROM records')" = $nbig ] &&
	[ "$(sq d "SELECT trials FROM best WHERE workload_key = '$k16'")" = $nbig ] \
	&& pass "the import again: all $nbig stored, the best counts them" || fail "import after the kill: $again"
kill $t5

# ---- a database error: a generic message naming the operation, the SQL only in the log -------
port4=$(free_port); url4=http://127.0.0.1:$port4
"$TIRD" --listen 127.0.0.1:$port4 --db "$(db c)" --local-workers none --model-seed none \
	>"$tmp/tird4.log" 2>&1 &
t4=$!; pids="$pids $t4"
wait_up "$url4" || fail "the tird of the database error test did not start"
sq c "ALTER TABLE best RENAME TO best_gone; ALTER TABLE jobs RENAME TO jobs_gone"
for route in "/v1/best?op=matmul|reading the best" "/v1/jobs|listing jobs"; do
	path=${route%|*}; what=${route#*|}
	code=$(curl -s -o "$tmp/r" -w '%{http_code}' "$url4$path")
	[ "$code" = 500 ] && jq -e --arg w "$what" '.error.code=="store" and (.error.message|contains($w))
		and (.error.message|test("gone|no such|SELECT|sqlite|table"; "i")|not)' "$tmp/r" >/dev/null \
		&& pass "GET $path, a database error: 500 \"$(jq -r .error.message "$tmp/r")\"" \
		|| fail "GET $path, a database error: HTTP $code $(cat "$tmp/r")"
done
grep -Eq 'no such table|relation "[a-z_]+" does not exist' "$tmp/tird4.log" \
	&& pass "the database's own message is in tird's log" \
	|| fail "no message of the database in the log: $(tail -3 "$tmp/tird4.log")"
kill $t4

# ---- the seed a new CPU cost model starts from ------------------------------------------------
# one model per full key (issue #33): this CPU's at start-up, from the seed's records of its
# architecture; a CUDA key's only when a job of it runs
arch=${cpukey%%+*}
grep -q "cost model for $cpukey: new, from 0 stored records (0 skipped), and [1-9][0-9]* rows of [1-9][0-9]* workloads of $arch from the seed $top/costmodel/seed/cpu.records" "$tmp/tird.log" \
	&& pass "a new CPU cost model starts from the seed built beside tird" \
	|| fail "built seed: $(grep 'cost model for cpu' "$tmp/tird.log")"
! grep -q "cost model for cuda" "$tmp/tird.log" \
	&& pass "no CUDA cost model before a CUDA job" \
	|| fail "a CUDA model without a CUDA job: $(grep 'cost model for cuda' "$tmp/tird.log")"
seeded() {   # NAME [flags...]: starts a tird on a new database, then stops it
	name=$1; shift
	port3=$(free_port)
	"$TIRD" --listen 127.0.0.1:$port3 --db "$(db "$name")" --local-workers none "$@" \
		>"$tmp/$name.log" 2>&1 &
	t3=$!; pids="$pids $t3"
	wait_up "http://127.0.0.1:$port3" || fail "tird with $* did not start"
	kill $t3; wait $t3 2>/dev/null
}
seeded seed1 --model-seed "$tmp/export.json"
n=$(jq --arg a "$arch" '[.records[] | select(.target == $a or (.target|startswith($a + "+")))] | length' "$tmp/export.json")
grep -q "cost model for $cpukey: new, from 0 stored records (0 skipped), and $n rows of [1-9][0-9]* workloads of $arch from the seed $tmp/export.json" "$tmp/seed1.log" \
	&& pass "--model-seed FILE: $n rows from an export" || fail "--model-seed: $(grep 'cost model for cpu' "$tmp/seed1.log")"
seeded seed2 --model-seed none
grep 'cost model for cpu' "$tmp/seed2.log" | grep -q "new, from 0 stored records (0 skipped) in" \
	&& ! grep -q "from the seed" "$tmp/seed2.log" && pass "--model-seed none: no seed" \
	|| fail "--model-seed none: $(grep 'cost model for cpu' "$tmp/seed2.log")"
echo '{"format":"tird-records/1","workloads":' > "$tmp/cut.json"
for bad in "$tmp/missing.json|No such file" "$tmp/cut.json|not JSON" "$tmp/mm8.json|not records"; do
	f=${bad%%|*}; why=${bad#*|}
	timeout 20 "$TIRD" --listen 127.0.0.1:$(free_port) --db "$(db seed3)" --local-workers none \
		--model-seed "$f" >"$tmp/seed3.log" 2>&1
	rc=$?
	[ $rc -eq 1 ] && grep -q "cost model seed: $f: $why" "$tmp/seed3.log" \
		&& pass "--model-seed $(basename "$f"): exit 1, $why" || fail "--model-seed $f: exit $rc $(cat "$tmp/seed3.log")"
done

# ---- SIGKILL mid-job, restart, resume ------------------------------------------------------------
job2=$(ctl --json tune "$tmp/mm24.json" --target cpu --trials 6 --batch 2)
id2=$(printf '%s' "$job2" | jq -r .job_id)
stored() { [ "$(curl -s "$url/v1/jobs/$id2" | jq -r .trials_done)" -ge 2 ] 2>/dev/null; }
until_ok 1800 stored || fail "job $id2 stored nothing"
ctl export "$tmp/before.json" 2>/dev/null
kill -9 $tird_pid
wait $tird_pid 2>/dev/null
start_tird "$(db a)" "$tmp/tird.log"
wait_up "$url" || fail "tird did not restart"
if [ -n "$pgsrv" ]; then
	# on PostgreSQL the restarted tird is a new replica: it leaves the job to
	# the killed one's claim until that lease (job_lease_s, 15 s) passes,
	# then adopts it (docs/architecture.md, "Replicas")
	adopted() { grep -q "job $id2: adopted: its owner .* let its lease pass .* ([2-6]/6 trials stored)" "$tmp/tird.log"; }
	until_ok 300 adopted \
		&& pass "restarted tird (a new replica) adopted job $id2 once the killed one's lease passed, counting its stored records" \
		|| fail "no adoption in the log: $(grep "job $id2" "$tmp/tird.log")"
else
	grep -q "job $id2: running -> queued: resumed after a restart" "$tmp/tird.log" \
		&& pass "restarted tird resumed job $id2" || fail "no resume in the log"
	grep -q "job $id2: resumed ([2-6]/6 trials stored)" "$tmp/tird.log" \
		&& pass "the resumed job counts its stored records" || fail "resume count: $(grep "job $id2: resumed" "$tmp/tird.log")"
fi
[ "$(grep -c "cost model for $cpukey: new" "$tmp/tird.log")" = 1 ] && grep -q "cost model for $cpukey: [0-9]* rows\$" "$tmp/tird.log" \
	&& pass "the restart loads the seeded CPU model saved at the first start" \
	|| fail "CPU model at restart: $(grep 'cost model for cpu' "$tmp/tird.log")"
res2=$(timeout 300 "$TIRCTL" --json wait "$id2"); rc=$?
[ $rc -eq 0 ] && pass "resumed job $id2 finished" || fail "resumed job: exit $rc $res2"
ctl export "$tmp/after.json" 2>/dev/null
lost=$(jq -n --slurpfile a "$tmp/before.json" --slurpfile b "$tmp/after.json" \
	'([$a[0].records[].id] - [$b[0].records[].id]) | length')
[ "$lost" = 0 ] && pass "no stored record lost across SIGKILL" || fail "$lost records lost"
[ "$(ctl --json status "$id2" | jq -r .trials_done)" -ge 6 ] && pass "job $id2 has its 6 trials" \
	|| fail "trials after resume: $(ctl --json status "$id2")"

# ---- graceful stop -------------------------------------------------------------------------
kill -TERM $tird_pid
for i in $(seq 1 100); do kill -0 $tird_pid 2>/dev/null || break; sleep 0.1; done
if kill -0 $tird_pid 2>/dev/null; then fail "SIGTERM: tird still running"; else
	wait $tird_pid; rc=$?
	[ $rc -eq 0 ] && grep -q 'stopped' "$tmp/tird.log" && pass "SIGTERM: clean stop" || fail "SIGTERM: exit $rc"
fi

# ---- a cost model saved by another build: rebuilt from the stored records ---------------------
nrec=$(sq a "SELECT count(*) FROM records WHERE target = '$cpukey'")
junk=$([ -n "$pgsrv" ] && echo "decode('0001020304', 'hex')" || echo "x'0001020304'")
sq a "UPDATE cost_models SET model = $junk WHERE target_kind = '$cpukey'"
start_tird "$(db a)" "$tmp/tird2.log"
wait_up "$url" || fail "tird did not restart"
rebuilt=$(grep -F "cost model for $cpukey not loaded" "$tmp/tird2.log" | sed -n 's/.*: rebuilt from \([0-9]*\) stored records.*/\1/p')
[ -n "$rebuilt" ] && [ "$rebuilt" -gt 0 ] && [ "$rebuilt" -le "$nrec" ] \
	&& pass "unloadable cost model rebuilt from $rebuilt of $nrec records" \
	|| fail "cost model not rebuilt: $(grep 'cost model' "$tmp/tird2.log")"
[ "$(sq a "SELECT count(*) FROM cost_models WHERE target_kind = '$cpukey' AND length(model) > 5")" = 1 ] \
	&& pass "rebuilt model saved" || fail "rebuilt model not saved"
kill -TERM $tird_pid; wait $tird_pid 2>/dev/null

# ---- no stalls and honest bookkeeping (issue #31 items 3 and 4) ----------------------------
# One tuning thread, a queue of 3: jobs for targets no worker serves wait queued while a CPU
# job runs, start when a worker of theirs registers, and fail after worker_wait_s; a full
# queue is a 429; a job that finds its trials stored counts them; a store error at a job's end
# leaves it visible and it ends once the store works; tirctl wait on a row nothing updates
# does not spin; cost models are written when they learnt enough or at shutdown, not after
# each job; connections are limited per address and idle ones closed, long polls kept; an
# export is streamed: 16 at once of 100k records leave tird's memory about as it was.
neon=cpu:aarch64+neon; dot=cpu:aarch64+neon+dotprod
for n in 8 16 24 32; do echo "{\"op\":\"matmul\",\"M\":$n,\"N\":$n,\"K\":$n}" > "$tmp/q$n.json"; done
port6=$(free_port); url6=http://127.0.0.1:$port6
NEWFLAGS6=${NEWFLAGS6---max-queued-jobs 3 --model-save-rows 100000 --model-save-s 3600}
start6() {
	"$TIRD" --listen 127.0.0.1:$port6 --db "$(db e)" --local-workers none --lease-s 2 \
		--token-file "$tmp/token" --model-seed none --tuning-threads 1 --worker-wait-s 600 \
		$NEWFLAGS6 >>"$tmp/tird6.log" 2>&1 &
	t6=$!; pids="$pids $t6"
	wait_up "$url6" || fail "the tird of the stall tests did not start"
}
start6
post6() { curl -s -o "$tmp/r" -w '%{http_code}' -H "$auth" -X "$1" ${3:+--data-binary "$3"} "$url6$2"; }
jget6() { curl -s "$url6/v1/jobs/$1"; }
jstate6() { jget6 "$1" | jq -r .state; }
jbody() { echo "{\"workload\":$(cat "$tmp/q$1.json"),\"target\":\"$2\",\"trials\":4,\"batch\":4}"; }
c1=$(post6 POST /v1/jobs "$(jbody 24 $neon)"); j1=$(jq -r .job_id "$tmp/r")
c2=$(post6 POST /v1/jobs "$(jbody 16 $dot)"); j2=$(jq -r .job_id "$tmp/r")
c3=$(post6 POST /v1/jobs "$(jbody 8 cpu)"); j3=$(jq -r .job_id "$tmp/r")
[ "$c1 $c2 $c3" = "201 201 201" ] && pass "three jobs queued: $j1 ($neon), $j2 ($dot), $j3 (cpu)" \
	|| fail "three jobs: $c1 $c2 $c3"
code=$(curl -s -D "$tmp/h" -o "$tmp/r" -w '%{http_code}' -H "$auth" -X POST --data-binary "$(jbody 32 $neon)" "$url6/v1/jobs")
[ "$code" = 429 ] && jq -e '.error.code=="queue_full" and (.error.message|test("3 jobs are queued.*max_queued_jobs"))' "$tmp/r" >/dev/null &&
	grep -qi '^Retry-After: 30' "$tmp/h" \
	&& pass "a fourth job past max_queued_jobs 3: 429 queue_full, Retry-After" || fail "queue cap: HTTP $code $(cat "$tmp/r")"
code=$(post6 POST /v1/jobs "$(jbody 24 $neon)")
[ "$code" = 200 ] && jq -e ".joined==true and .job_id==$j1" "$tmp/r" >/dev/null \
	&& pass "a full queue still joins a job" || fail "join at a full queue: HTTP $code $(cat "$tmp/r")"
"$WORKER" --server "$url6" --target cpu --name stall-cpu >"$tmp/worker6.log" 2>&1 &
w6=$!; pids="$pids $w6"
done3() { [ "$(jstate6 "$j3")" = done ]; }
until_ok 1800 done3; s3=$(jstate6 "$j3"); s1=$(jstate6 "$j1"); s2=$(jstate6 "$j2")
[ "$s3 $s1 $s2" = "done queued queued" ] && ! grep -q "job $j1: queued -> running" "$tmp/tird6.log" \
	&& pass "one tuning thread: job $j3 ran while $j1 and $j2, queued before it for targets no worker serves, waited queued" \
	|| fail "jobs no worker serves held the tuning thread: $j3 $s3, $j1 $s1, $j2 $s2"
jget6 "$j1" | jq -e '.message|test("waiting in the queue for a worker of cpu:aarch64\\+neon")' >/dev/null \
	&& pass "the waiting job says what it waits for" || fail "waiting message: $(jget6 "$j1")"
kill $w6 2>/dev/null
saves=$(curl -s "$url6/metrics" | sed -n 's/^tird_model_saves_total{kind="cpu"} //p')
[ "$(sq e 'SELECT count(*) FROM cost_models')" = 0 ] && [ "$saves" = 0 ] \
	&& pass "a job that taught the CPU model 4 rows did not write its blob" \
	|| fail "cost model written after a job: $saves saves, $(sq e 'SELECT target_kind, length(model) FROM cost_models')"
# records of a matmul's distinct valid schedules (an import replays and validates every trace,
# and a trace made canonical is one record): each loop split into four power-of-two factors
cat > "$tmp/splits.py" <<'PYEOF'
import json, sys, itertools
wl, k, t, n, us = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
def facs(d):
    return [c for c in itertools.product([2 ** i for i in range(d.bit_length())], repeat=3)
            if d % (c[0] * c[1] * c[2]) == 0]
def tr(a, b, c):
    sp = lambda l, x, o: {"op": "split", "in": [l, x[0], x[1], x[2], None], "out": o}
    return json.dumps({"insts": [{"op": "get_block", "str": "compute", "out": ["b0"]},
        {"op": "get_loops", "in": ["b0"], "out": ["l1", "l2", "l3"]},
        sp("l1", a, ["l4", "l5", "l6", "l7"]), sp("l2", b, ["l8", "l9", "l10", "l11"]),
        sp("l3", c, ["l12", "l13", "l14", "l15"])]})
sched = itertools.product(facs(wl["M"]), facs(wl["N"]), facs(wl["K"]))
recs = [{"workload_key": k, "target": t, "trace": tr(*x), "status": "ok", "latency_us": us + i,
         "max_rel_error": 0} for i, x in enumerate(itertools.islice(sched, n))]
assert len(recs) == n
json.dump({"format": "tird-records/1", "workloads": {k: wl}, "records": recs}, open(sys.argv[6], "w"))
PYEOF
# job 2 finds its trials stored (an import while it waited, trusted: an untrusted one would be
# measured again first), then a worker of its target comes
jget6 "$j2" | jq .workload > "$tmp/w2.json"
python3 "$tmp/splits.py" "$tmp/w2.json" "$(jget6 "$j2" | jq -r .workload_key)" "$dot" 4 100 "$tmp/imp2.json"
"$TIRCTL" --server "$url6" import --trust "$tmp/imp2.json" >/dev/null || fail "import for job $j2"
post6 POST /v1/workers "{\"target\":\"$dot\",\"name\":\"probe-dot\"}" >/dev/null
done2() { [ "$(jstate6 "$j2")" = done ]; }
until_ok 100 done2
k2=$(jget6 "$j2" | jq -r .workload_key)
nrec2=$(sq e "SELECT count(*) FROM records WHERE workload_key='$k2' AND target='$dot'")
td2=$(jget6 "$j2" | jq -r .trials_done)
[ "$(jstate6 "$j2")" = done ] && [ "$td2" = "$nrec2" ] && [ "$nrec2" = 4 ] \
	&& pass "job $j2 starts when a worker of $dot registers, finds its 4 trials stored: trials_done $td2" \
	|| fail "job $j2: $(jstate6 "$j2"), trials_done $td2, $nrec2 records"
# job 1: a worker of its target registers; the store fails as the job ends, then works again
code=$(post6 POST /v1/workers "{\"target\":\"$neon\",\"name\":\"probe-neon\"}"); wn=$(jq -r .worker_id "$tmp/r")
code=$(post6 POST "/v1/workers/$wn/lease?wait=20")
if [ "$code" = 200 ] && [ "$(jq -r .job_id "$tmp/r")" = "$j1" ]; then
	pass "job $j1 starts when a worker of $neon registers: its batch leased"
	sq e "ALTER TABLE jobs RENAME TO jobs_gone"
	while [ "$code" = 200 ]; do
		b=$(jq -c '{batch_id, results: [.traces[] | {status: "ok", latency_us: 50, max_rel_error: 0}]}' "$tmp/r")
		post6 POST "/v1/workers/$wn/results" "$b" >/dev/null
		code=$(post6 POST "/v1/workers/$wn/lease?wait=3")
	done
	sleep 2
	m1=$(jget6 "$j1")
	printf '%s' "$m1" | jq -e '.state=="running" and (.message|test("ended done.*the database failed storing it"))' >/dev/null \
		&& pass "a store error at job $j1's end: still in memory, its message says so" || fail "store error at the end: $m1"
	sq e "ALTER TABLE jobs_gone RENAME TO jobs"
	done1() { [ "$(jstate6 "$j1")" = done ]; }
	until_ok 100 done1 && [ "$(sq e "SELECT state FROM jobs WHERE id=$j1")" = done ] \
		&& pass "once the store works again job $j1 ends done, in memory and in its row" \
		|| fail "job $j1 after the store came back: $(jget6 "$j1") row $(sq e "SELECT state FROM jobs WHERE id=$j1")"
else
	fail "job $j1: no batch for the worker of $neon: HTTP $code $(cat "$tmp/r")"
fi
# a row that says running with no job behind it: tirctl wait polls it slowly
orph=$(sq e "INSERT INTO jobs (workload_key, target, trials, batch, state, created)
	SELECT workload_key, target, trials, batch, 'running', created FROM jobs WHERE id=$j3 RETURNING id")
nreq() { curl -s "$url6/metrics" | sed -n 's|^tird_http_requests_total{route="GET /v1/jobs/\*",code="2xx"} ||p'; }
r0=$(nreq); timeout 4 "$TIRCTL" --server "$url6" wait "$orph" >/dev/null 2>&1; r1=$(nreq)
[ $((r1 - r0)) -le 5 ] && pass "tirctl wait on a job row nothing updates: $((r1 - r0)) requests in 4 s" \
	|| fail "tirctl wait spins: $((r1 - r0)) requests in 4 s"
# cost models: written at shutdown, what the jobs taught kept, each key's in its own model (one
# CPU model learnt both jobs' 8 rows before issue #33: x86 and AArch64 timings in one ranking)
kill -TERM $t6; wait $t6 2>/dev/null
saved() { grep -F "cost model for $1 saved: " "$tmp/tird6.log"; }
[ "$(saved "$cpukey" | wc -l)" = 1 ] && saved "$cpukey" | grep -q ": 4 rows, .* 4 learnt since the last write" &&
	[ "$(saved "$neon" | wc -l)" = 1 ] && saved "$neon" | grep -q ": 4 rows, .* 4 learnt since the last write" &&
	[ "$(sq e "SELECT count(*) FROM cost_models WHERE target_kind IN ('$cpukey', '$neon')")" = 2 ] \
	&& pass "each key's model is written once, at shutdown, with the 4 rows its job taught" \
	|| fail "model at shutdown: $(grep 'cost model' "$tmp/tird6.log")"

# the wait limit, connections, exports: a tird with a short wait and a small per-address limit
port7=$(free_port); url7=http://127.0.0.1:$port7
NEWFLAGS7=${NEWFLAGS7---max-connections-per-ip 4 --idle-timeout-s 2}
"$TIRD" --listen 127.0.0.1:$port7 --db "$(db f)" --local-workers none --lease-s 2 \
	--token-file "$tmp/token" --model-seed none --worker-wait-s 3 $NEWFLAGS7 >"$tmp/tird7.log" 2>&1 &
t7=$!; pids="$pids $t7"
wait_up "$url7" || fail "the tird of the connection tests did not start"
code=$(curl -s -o "$tmp/r" -w '%{http_code}' -H "$auth" -X POST --data-binary "$(jbody 32 $neon)" "$url7/v1/jobs")
j7=$(jq -r .job_id "$tmp/r")
failed7() { curl -s "$url7/v1/jobs/$j7" | jq -e '.state=="failed"' >/dev/null; }
until_ok 200 failed7 && curl -s "$url7/v1/jobs/$j7" | jq -e '.message|test("no worker for target cpu:aarch64\\+neon came within 3 s \\(start one: tird-worker")' >/dev/null &&
	! grep -q "job $j7: queued -> running" "$tmp/tird7.log" \
	&& pass "a job no worker serves fails after worker_wait_s, queued all along, saying how to start one" \
	|| fail "wait limit: $(curl -s "$url7/v1/jobs/$j7")"
cat > "$tmp/conns.py" <<'PYEOF'
import socket, sys, time
port = int(sys.argv[1])
idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
time.sleep(0.3)
extra = socket.create_connection(("127.0.0.1", port)); extra.settimeout(3)
extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
try:
    got = extra.recv(100)
except (socket.timeout, ConnectionResetError):
    got = b""
print("fifth", "answered" if got else "closed")
t0 = time.time()
for s in idle:
    s.settimeout(10)
    try:
        s.recv(100)
    except (socket.timeout, ConnectionResetError):
        pass
print("idle closed after %.0f s" % (time.time() - t0))
PYEOF
out=$(python3 "$tmp/conns.py" "$port7")
printf '%s' "$out" | grep -q "fifth closed" && pass "max_connections_per_ip 4: a fifth connection is closed" \
	|| fail "per-address limit: $out"
idle_s=$(printf '%s' "$out" | sed -n 's/idle closed after \([0-9]*\) s/\1/p')
[ -n "$idle_s" ] && [ "$idle_s" -le 4 ] && pass "idle_timeout_s 2: idle connections closed after ${idle_s} s" \
	|| fail "idle timeout: $out"
code=$(curl -s -o "$tmp/r" -w '%{http_code}' -H "$auth" -X POST --data-binary "{\"target\":\"$dot\"}" "$url7/v1/workers")
w7=$(jq -r .worker_id "$tmp/r")
lp=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' -H "$auth" -X POST "$url7/v1/workers/$w7/lease?wait=5")
[ "${lp% *}" = 204 ] && awk "BEGIN{exit !(${lp#* } >= 4.5)}" \
	&& pass "a 5 s long poll outlives the 2 s idle timeout: $lp" || fail "long poll cut: $lp"
kill $t7

# exports streamed: memory before, at the peak of 16 exports at once, after
# (100k valid schedules of the 32x32x32 matmul: 56 splits of each loop; imported untrusted)
nexp=100000
ASAN_OPTIONS=$ASAN_OPTIONS:quarantine_size_mb=8 start6
k32=$(curl -s -H "$auth" -X POST --data-binary "{\"workload\":$(cat "$tmp/q32.json"),\"target\":\"cpu\"}" "$url6/v1/lower" | jq -r .workload_key)
python3 "$tmp/splits.py" "$tmp/q32.json" "$k32" "$dot" $nexp 1000 "$tmp/big6.json"
"$TIRCTL" --server "$url6" import "$tmp/big6.json" >/dev/null || fail "the 100k import"
sleep 1
cat > "$tmp/rss.py" <<'PYEOF'
import subprocess, sys, time
pid, url, out = sys.argv[1], sys.argv[2], sys.argv[3]
def rss():
    for l in open("/proc/%s/status" % pid):
        if l.startswith("VmRSS:"):
            return int(l.split()[1]) // 1024
before = rss(); peak = before
ps = [subprocess.Popen(["curl", "-sf", "-o", "%s.%d" % (out, i), url + "/v1/records"]) for i in range(16)]
while any(p.poll() is None for p in ps):
    peak = max(peak, rss()); time.sleep(0.02)
time.sleep(0.5)
print(before, peak, rss(), sum(p.returncode != 0 for p in ps))
PYEOF
set -- $(python3 "$tmp/rss.py" "$t6" "$url6" "$tmp/exp6")
nexported=$(jq '.records|length' "$tmp/exp6.0")
same=$(for i in $(seq 0 15); do cmp -s "$tmp/exp6.0" "$tmp/exp6.$i" && echo same; done | grep -c same)
jq -e --arg k "$k32" --argjson n $nexp '([.records[] | select(.workload_key==$k)] | length) == $n and
	all(.records[] | select(.workload_key==$k); .origin=="imported" and .trusted==false and .token=="token-1"
		and (.source|test("^import by token-1 from 127\\.0\\.0\\.1")) and (.host|test("127\\.0\\.0\\.1"))) and
	any(.records[]; .origin=="measured" and .trusted and (.worker|length>0))' "$tmp/exp6.0" >/dev/null \
	&& pass "the streamed export carries each record's provenance (origin, trusted, source, token, host)" \
	|| fail "streamed export provenance: $(jq -c --arg k "$k32" '[.records[] | select(.workload_key==$k)][0], [.records[] | select(.origin=="measured")][0]' "$tmp/exp6.0")"
echo "RSS of tird around 16 concurrent exports of $nexported records: before $1 MB, peak $2 MB, after $3 MB"
[ "$4" = 0 ] && [ "$nexported" -ge $nexp ] && [ "$same" = 16 ] && [ $(($2 - $1)) -lt 100 ] \
	&& pass "16 exports of $nexported records at once: RSS $1 MB, at most $2 MB, then $3 MB (streamed)" \
	|| fail "16 exports: $4 failed, $nexported records, $same alike, RSS $1 -> $2 -> $3 MB"
rm -f "$tmp"/exp6.* "$tmp/big6.json"
kill $t6; wait $t6 2>/dev/null

# batches in flight (issue #32): a tird that keeps two batches of a job out while it
# searches the next (--pipeline 2, as it does on a GPU) and a worker that measures two at
# once (--slots 2): every trial stored once, each batch's results its own, both slots used
# (the random model: the job may end at a plateau before its 40 trials)
port7=$(free_port); url7=http://127.0.0.1:$port7
"$TIRD" --listen 127.0.0.1:$port7 --db "$(db p)" --local-workers none --pipeline 2 \
	--model-seed none >"$tmp/tird7.log" 2>&1 &
t7=$!; pids="$pids $t7"
wait_up "$url7" || fail "the tird of the pipeline test did not start"
"$WORKER" --server "$url7" --target cpu --slots 2 --name slots >"$tmp/worker7.log" 2>&1 &
w7=$!; pids="$pids $w7"
echo '{"op":"matmul","M":24,"N":20,"K":16}' > "$tmp/q7.json"
j7=$(curl -s -X POST --data-binary "{\"workload\":$(cat "$tmp/q7.json"),\"target\":\"cpu\",\"trials\":40,\"batch\":4,\"search\":{\"cost_model\":\"random\"}}" \
	"$url7/v1/jobs" | jq -r .job_id)
done7() { curl -s "$url7/v1/jobs/$j7" | jq -e '.state=="done" or .state=="failed"' >/dev/null; }
until_ok 1800 done7
r7=$(curl -s "$url7/v1/jobs/$j7")
n7=$(sq p "SELECT count(*), count(DISTINCT trace) FROM records")
t7n=$(echo "$r7" | jq -r .trials_done)
echo "$r7" | jq -e '.state=="done" and .trials_done >= 24' >/dev/null && [ "$n7" = "$t7n|$t7n" ] &&
	grep -q '(slot 0)' "$tmp/worker7.log" && grep -q '(slot 1)' "$tmp/worker7.log" \
	&& pass "two batches in flight, two worker slots: $t7n trials, as many distinct records, both slots measured" \
	|| fail "pipeline 2 / slots 2: $(echo "$r7" | jq -c '{state,trials_done,message}'), records $n7, slots used: $(grep -o '(slot [0-9])' "$tmp/worker7.log" | sort | uniq -c | tr '\n' ' ')"
"$TIRD" --listen 127.0.0.1:$(free_port) --db "$tmp/bad7.db" --pipeline 5 >"$tmp/bad7.log" 2>&1
[ $? = 2 ] && grep -q 'pipeline: "5" is not auto or a number from 0 to 4' "$tmp/bad7.log" \
	&& pass "--pipeline 5 refused, naming the range" || fail "--pipeline 5: $(cat "$tmp/bad7.log")"
"$WORKER" --server "$url7" --target cpu --slots 0 >"$tmp/bad7w.log" 2>&1
[ $? = 2 ] && grep -q "slots: '0' is not a number from 1 to 8" "$tmp/bad7w.log" \
	&& pass "tird-worker --slots 0 refused" || fail "--slots 0: $(cat "$tmp/bad7w.log")"
kill $w7; wait $w7 2>/dev/null
kill $t7; wait $t7 2>/dev/null

echo "$fails failed"
[ "$fails" -eq 0 ]
