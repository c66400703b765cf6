#!/usr/bin/env bash
# http_load.sh — load figures of tird's HTTP API with wrk on loopback.
#
#   bench/http_load.sh [BUILD_DIR] [SECONDS]      (default: . and 10)
#
# Starts a tird (temporary database, no local workers) with NBEST stored
# matmul workloads (imported records), then measures with wrk:
#   1. GET /v1/best?op=matmul            — the team-cache query
#   2. POST /v1/jobs, one workload        — an identical submission (joins)
#   3. POST /v1/jobs, a new workload each — job creation (parse, store)
# and writes requests/s and latency percentiles to
# bench/results/<date>-http-load.txt with the machine and the commands.
# The issue's target: >= 20,000 best-queries/s with p99 < 5 ms on 2 cores.
# Needs wrk (deploy/install-deps.sh --bench), curl, jq.
set -euo pipefail
build=$(cd "${1:-.}" && pwd); secs=${2:-10}
here=$(cd "$(dirname "$0")" && pwd)
TIRD=$build/daemon/tird; TIRCTL=$build/client/tirctl
for t in wrk curl jq; do command -v $t >/dev/null || { echo "http_load.sh: needs $t" >&2; exit 2; }; done
tmp=$(mktemp -d); port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
url=http://127.0.0.1:$port
"$TIRD" --listen 127.0.0.1:$port --db "$tmp/bench.db" --local-workers none --log-level warn \
	--max-trials 100000 --max-queued-jobs 100000000 >"$tmp/tird.log" 2>&1 &
pid=$!; trap 'kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for i in $(seq 1 100); do curl -sf "$url/healthz" >/dev/null && break; sleep 0.1; done
cpu=$(curl -s "$url/healthz" | jq -r .cpu)

# NBEST stored workloads, each with one ok record (a hand-written trace)
NBEST=20
trace=$(jq -c . "$here/../examples/traces/GMM-0.cpu.json")
{
	echo '{"format":"tird-records/1","workloads":{'
	for m in $(seq 1 $NBEST); do
		w="{\"op\":\"matmul\",\"M\":$((m * 16)),\"N\":128,\"K\":128}"
		key=$(echo "$w" | "$TIRCTL" --json lower - --target cpu | jq -r .workload_key)
		[ "$m" -gt 1 ] && echo ,
		echo "\"$key\":$w"
		echo "$key" >>"$tmp/keys"
	done
	echo '},"records":['
	m=0
	while read -r key; do
		m=$((m + 1)); [ "$m" -gt 1 ] && echo ,
		jq -nc --arg k "$key" --arg t "$cpu" --arg tr "$trace" --argjson us "$((100 + m))" \
			'{workload_key:$k,target:$t,trace:$tr,status:"ok",latency_us:$us,max_rel_error:0}'
	done <"$tmp/keys"
	echo ']}'
} >"$tmp/export.json"
"$TIRCTL" --server "$url" import "$tmp/export.json" >/dev/null

cat >"$tmp/same.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"workload":{"op":"matmul","M":16,"N":16,"K":16},"target":"cpu","trials":64}'
LUA
cat >"$tmp/new.lua" <<'LUA'
local n = 0
request = function()
  n = n + 1
  local id = (tonumber(tostring({}):sub(8), 16) or 0) % 100000
  local body = string.format('{"workload":{"op":"matmul","M":%d,"N":%d,"K":8},"target":"cpu","trials":8}',
                             8 + n % 4000, 8 + id % 4000)
  return wrk.format("POST", nil, {["Content-Type"] = "application/json"}, body)
end
LUA

out=$here/results/$(date +%Y-%m-%d)-http-load.txt
run() {   # NAME ARGS...
	name=$1; shift
	echo "== $name: wrk $*" | sed "s|$tmp/||g"
	wrk "$@" | sed -n '/Latency Distribution/,/Transfer/p'
}
{
	echo "# tird HTTP load, $(date -u +%Y-%m-%dT%H:%MZ)"
	echo "# machine: $(uname -srm), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
	echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg) (cores shared with other work)"
	echo "# command: bench/http_load.sh $build $secs   (tird and wrk on the same cores, loopback)"
	echo "# GET /v1/best?op=matmul answers $NBEST workloads ($(curl -s "$url/v1/best?op=matmul" | wc -c) bytes)"
	run "GET /v1/best" -t2 -c32 -d${secs}s --latency "$url/v1/best?op=matmul"
	run "POST /v1/jobs (identical: joins / cache)" -t2 -c16 -d${secs}s --latency -s "$tmp/same.lua" "$url/v1/jobs"
	run "POST /v1/jobs (a new workload each)" -t2 -c16 -d${secs}s --latency -s "$tmp/new.lua" "$url/v1/jobs"
	echo "# jobs created: $(curl -s "$url/v1/jobs?limit=1" | jq '.jobs[0].job_id')"
} | tee "$out"
echo "written: $out" >&2
