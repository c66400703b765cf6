#!/bin/sh
# http_edges.sh — malformed HTTP requests against a real tird (run by `make
# check` from the build directory; needs python3).
#
# It starts tird on a free loopback port (19300-19399, else any) with a
# temporary database and sends raw requests over python3 sockets, each on
# its own connection.  Those that libmicrohttpd 0.9.75 lets through to tird
# (HTTP/1.1 without one Host, a header name with white space, a transfer
# coding other than chunked, and tird's own limits) must get tird's JSON
# error, {"error": {"code", "message"}}, with the status named; those that
# libmicrohttpd refuses itself before tird sees them (daemon/http.c's top
# comment lists them and why they stay) must get exactly what that comment
# says: its status and an HTML body, or a closed connection with no answer.
# Requests that are odd but valid (HTTP/1.0 without Host, a folded header)
# are answered as usual, and a normal request on the same tird still works
# at the end, twice on one kept-alive connection.
set -u
top=$(pwd)
src=${srcdir:-$(dirname "$0")/..}
TIRD=$top/daemon/tird
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not installed"; exit 77; }
[ -x "$TIRD" ] || { echo "FAIL: daemon/tird not built"; exit 1; }
ASAN_OPTIONS=${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0; export ASAN_OPTIONS
. "$src/tests/lib.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tird-edges.XXXXXX")
tird_pid=
rc=1
cleanup() {
	[ -n "$tird_pid" ] && kill -9 "$tird_pid" 2>/dev/null
	if [ "$rc" -ne 0 ] && [ -f "$tmp/tird.log" ]; then echo "---- tird.log"; tail -30 "$tmp/tird.log"; fi
	[ -n "${TIRD_TEST_KEEP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT
port=$(free_port)
"$TIRD" --listen 127.0.0.1:$port --db "$tmp/t.db" --local-workers none --model-seed none \
	>"$tmp/tird.log" 2>&1 &
tird_pid=$!

python3 - "$port" <<'PY'
import json, socket, sys, time

port = int(sys.argv[1])
fails = 0

def fail(name, why):
    global fails
    fails += 1
    print("FAIL %s: %s" % (name, why))

def connect():
    for _ in range(100):
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=10)
        except OSError:
            time.sleep(0.1)
    raise SystemExit("FAIL: tird did not listen on port %d" % port)

def exchange(raw):
    """Sends raw on a new connection, half-closes it, reads to the end."""
    s = connect()
    try:
        s.sendall(raw)
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    data = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
    except ConnectionResetError:
        pass
    s.close()
    return data

def parse(data):
    """(status, headers as a lowercased dict, body) of the first answer; the
    body is what follows the last blank line (libmicrohttpd 0.9.75 sends some
    heads twice)."""
    head, _, _ = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    hdrs = {}
    for l in lines[1:]:
        k, _, v = l.partition(b":")
        hdrs[k.strip().lower().decode()] = v.strip().decode()
    return status, hdrs, data.rpartition(b"\r\n\r\n")[2]

def tird_json(name, raw, status, words):
    data = exchange(raw)
    if not data:
        return fail(name, "closed with no answer, expected %d with tird's JSON" % status)
    st, hdrs, body = parse(data)
    try:
        j = json.loads(body)
        e = j["error"]
        ok = set(j) == {"error"} and isinstance(e["code"], str) and e["code"] and \
            isinstance(e["message"], str) and e["message"]
    except (ValueError, KeyError, TypeError):
        ok = False
    if st != status or not ok or not hdrs.get("content-type", "").startswith("application/json"):
        return fail(name, "expected %d with tird's JSON error, got %d %r" % (status, st, body[:200]))
    if not all(w in e["message"] for w in words):
        return fail(name, "message %r does not name %r" % (e["message"], words))
    print("PASS %s: %d %s: %s" % (name, st, e["code"], e["message"]))

def mhd_html(name, raw, status):
    data = exchange(raw)
    if not data:
        return fail(name, "closed with no answer, expected libmicrohttpd's %d HTML" % status)
    st, hdrs, body = parse(data)
    if st != status or not body.startswith(b"<html>"):
        return fail(name, "expected libmicrohttpd's %d HTML, got %d %r" % (status, st, body[:200]))
    print("PASS %s: %d, libmicrohttpd's HTML (no hook in 0.9.75)" % (name, st))

def ok_json(name, raw):
    data = exchange(raw)
    st, hdrs, body = parse(data) if data else (0, {}, b"")
    try:
        good = st == 200 and json.loads(body)["status"] == "ok"
    except (ValueError, KeyError, TypeError):
        good = False
    if not good:
        return fail(name, "expected 200 from GET /healthz, got %d %r" % (st, body[:200]))
    print("PASS %s: 200" % name)

H = b"Host: 127.0.0.1\r\n"
# answered by tird, in JSON
tird_json("HTTP/1.1 without Host", b"GET /healthz HTTP/1.1\r\n\r\n", 400, ["Host", "has 0"])
tird_json("two Host headers", b"GET /healthz HTTP/1.1\r\n" + H + b"Host: b\r\n\r\n", 400,
          ["Host", "has 2"])
tird_json("HTTP/1.5 without Host", b"GET /healthz HTTP/1.5\r\n\r\n", 400, ["HTTP/1.5", "Host"])
tird_json("white space in a header name", b"GET /healthz HTTP/1.1\r\n" + H + b"Bad Name: v\r\n\r\n",
          400, ['"Bad Name"', "not a token"])
tird_json("white space before a colon", b"GET /healthz HTTP/1.1\r\n" + H + b"X-A : v\r\n\r\n",
          400, ["not a token"])
tird_json("Transfer-Encoding gzip",
          b"POST /v1/lower HTTP/1.1\r\n" + H + b"Transfer-Encoding: gzip\r\n\r\n{}", 400,
          ['"gzip"', "chunked"])
tird_json("two Content-Lengths",
          b"POST /v1/lower HTTP/1.1\r\n" + H + b"Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
          400, ["2 Content-Length"])
tird_json("Content-Length and chunked",
          b"POST /v1/lower HTTP/1.1\r\n" + H + b"Content-Length: 2\r\nTransfer-Encoding: chunked"
          b"\r\n\r\n{}", 400, ["Transfer-Encoding"])
tird_json("headers over 16384 bytes",
          b"GET /healthz HTTP/1.1\r\n" + H + b"X-A: " + b"a" * 20000 + b"\r\n\r\n", 431, ["16384"])
tird_json("URL over 8192 bytes", b"GET /healthz?a=" + b"a" * 9000 + b" HTTP/1.1\r\n" + H + b"\r\n",
          414, ["8192"])
tird_json("100 query parameters",
          b"GET /healthz?" + b"&".join(b"p%d=1" % i for i in range(100)) + b" HTTP/1.1\r\n" + H +
          b"\r\n", 414, ["100 query parameters"])
tird_json("a body over max_body",
          b"POST /v1/lower HTTP/1.1\r\n" + H + b"Content-Length: 100000\r\n\r\n{}", 413,
          ["100000"])
# answered by libmicrohttpd itself, as daemon/http.c's comment says
mhd_html("a header line without a colon", b"GET /healthz HTTP/1.1\r\n" + H + b"NoColon\r\n\r\n", 400)
mhd_html("Content-Length not a number",
         b"POST /v1/lower HTTP/1.1\r\n" + H + b"Content-Length: abc\r\n\r\n{}", 400)
mhd_html("Content-Length overflowing",
         b"POST /v1/lower HTTP/1.1\r\n" + H + b"Content-Length: 99999999999999999999999\r\n\r\n{}",
         413)
mhd_html("a malformed chunk",
         b"POST /v1/lower HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\nZZ\r\n{}\r\n0\r\n\r\n",
         400)
mhd_html("a version that is not HTTP/x.y", b"GET /healthz HTTX/1.1\r\n" + H + b"\r\n", 400)
mhd_html("no version (HTTP/0.9)", b"GET /healthz\r\n\r\n", 400)
mhd_html("HTTP/2.0", b"GET /healthz HTTP/2.0\r\n" + H + b"\r\n", 505)
mhd_html("HTTP/0.9 named", b"GET /healthz HTTP/0.9\r\n\r\n", 505)
mhd_html("a header over the 256 KiB pool",
         b"GET /healthz HTTP/1.1\r\n" + H + b"X-A: " + b"a" * 270000 + b"\r\n\r\n", 431)
mhd_html("a URL over the 256 KiB pool",
         b"GET /healthz?a=" + b"a" * 270000 + b" HTTP/1.1\r\n" + H + b"\r\n", 414)
data = exchange(b"GARBAGE\r\n" + H + b"\r\n")
if data:
    fail("a request line without a space", "expected a closed connection, got %r" % data[:200])
else:
    print("PASS a request line without a space: closed, no answer (libmicrohttpd's way)")
# odd but valid, and normal requests still answered
ok_json("HTTP/1.0 without Host", b"GET /healthz HTTP/1.0\r\n\r\n")
ok_json("a folded header", b"GET /healthz HTTP/1.1\r\n" + H + b"X-A: a\r\n  b\r\n\r\n")
ok_json("a plain request", b"GET /healthz HTTP/1.1\r\n" + H + b"Connection: close\r\n\r\n")
s = connect()
for i in range(2):
    s.sendall(b"GET /healthz HTTP/1.1\r\n" + H + b"\r\n")
    data = b""
    while b"\r\n\r\n" not in data or len(data.partition(b"\r\n\r\n")[2]) < \
            int(parse(data)[1].get("content-length", "0")):
        d = s.recv(65536)
        if not d:
            break
        data += d
    st, _, body = parse(data)
    if st != 200 or json.loads(body).get("status") != "ok":
        fail("kept-alive request %d" % (i + 1), "got %d %r" % (st, body[:200]))
    else:
        print("PASS kept-alive request %d: 200" % (i + 1))
s.close()
sys.exit(1 if fails else 0)
PY
rc=$?
exit $rc
