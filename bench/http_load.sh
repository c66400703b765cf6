#!/usr/bin/env bash
# http_load.sh — load figures of tird's HTTP API with wrk on loopback.
#
#   bench/http_load.sh [BUILD_DIR] [SECONDS] [--pg]     (default: . and 10)
#
# Starts a tird (temporary database, no local workers) with NBEST stored
# matmul workloads (records imported with --trust: an untrusted import is
# never a best, so GET /v1/best would answer nothing), checks that
# GET /v1/best answers all NBEST bests, then measures with wrk:
#   1. GET /v1/best?op=matmul            — the team-cache query
#   2. POST /v1/jobs, one workload        — an identical submission (joins)
#   3. POST /v1/jobs, a new workload each — job creation (parse, store)
# and writes requests/s and latency percentiles to
# bench/results/<date>-http-load.txt with the machine and the commands.
#
# --pg: the same, in the same run, against one tird on SQLite and then one
# on PostgreSQL, a throwaway server started as tests/postgres.sh does
# (initdb and pg_ctl of the newest /usr/lib/postgresql/*/bin, else PATH, on
# a free loopback port, data and socket in the temporary folder; as root
# the server runs as nobody), stopped at the end; then the figures side by
# side.  PostgreSQL runs twice: as initdb makes it (a WAL flush per commit)
# and on a database with synchronous_commit = off (commits wait for no
# flush, as SQLite's synchronous=NORMAL does not fsync each one), which tells
# the flush's cost from the round trips'.  Written to
# bench/results/<date>-http-load-pg.txt.
#
# The issue's target: >= 20,000 best-queries/s with p99 < 5 ms on 2 cores.
# Needs wrk (deploy/install-deps.sh --bench), curl, jq, python3; --pg needs
# PostgreSQL's server programs and psql, and a tird built with libpq.
set -euo pipefail
with_pg=0; pos=()
for a in "$@"; do
	case $a in
	--pg) with_pg=1 ;;
	-h|--help) sed -n '2,25p' "$0"; exit 0 ;;
	-*) echo "http_load.sh: unknown option $a (try --help)" >&2; exit 2 ;;
	*) pos+=("$a") ;;
	esac
done
build=$(cd "${pos[0]:-.}" && pwd); secs=${pos[1]:-10}
here=$(cd "$(dirname "$0")" && pwd)
TIRD=$build/daemon/tird; TIRCTL=$build/client/tirctl
for t in wrk curl jq python3; do command -v $t >/dev/null || { echo "http_load.sh: needs $t" >&2; exit 2; }; done
if [ $with_pg = 1 ]; then
	command -v psql >/dev/null || { echo "http_load.sh: --pg needs psql (Debian: postgresql)" >&2; exit 2; }
	# shellcheck source=../tests/pg_server.sh
	. "$here/../tests/pg_server.sh"
	pg_find || { echo "http_load.sh: --pg: $pg_why" >&2; exit 2; }
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tird-load.XXXXXX")
pids=""; pgdata=$tmp/pg
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	for p in $pids; do wait "$p" 2>/dev/null || true; done
	[ $with_pg = 1 ] && pg_stop "$pgdata" fast
	rm -rf "$tmp"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

# ---- the throwaway PostgreSQL (--pg) ---------------------------------------------------------
if [ $with_pg = 1 ]; then
	# fsync stays on (the server's default): the figure is a real server's
	pg_start "$pgdata" || { echo "http_load.sh: $pg_why" >&2; exit 1; }
	psql -qX -d "$pg/postgres" -c "CREATE DATABASE bench" \
		-c "CREATE DATABASE bench_async" -c "ALTER DATABASE bench_async SET synchronous_commit = off" >/dev/null
fi

# ---- the records every tird imports ----------------------------------------------------------
# NBEST stored workloads, each with one ok record: the hand-written trace of
# GMM-0 (a batched matmul, batch 1: its loops are b, i, j, k), which tird
# replays on import; the workload keys come from tirctl lower, which needs no tird
NBEST=20
cpu=$("$build/daemon/tird-worker" --target cpu --print-target)
trace=$(jq -c . "$here/../examples/traces/GMM-0.cpu.json")
{
	echo '{"format":"tird-records/1","workloads":{'
	for m in $(seq 1 $NBEST); do
		w="{\"op\":\"matmul\",\"batch\":1,\"M\":$((m * 16)),\"N\":128,\"K\":128}"
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

# ---- one tird, its three loads ---------------------------------------------------------------
TESTS=("GET /v1/best" "POST /v1/jobs (identical: joins / cache)" "POST /v1/jobs (a new workload each)")
# bench NAME DB: a tird on DB, the records imported, the three loads; each
# wrk output in $tmp/NAME.N.wrk, the report on stdout
bench() {
	local name=$1 db=$2 port url pid n bytes
	port=$(free_port); url=http://127.0.0.1:$port
	"$TIRD" --listen 127.0.0.1:$port --db "$db" --local-workers none --log-level warn \
		--max-trials 100000 --max-queued-jobs 100000000 >"$tmp/$name.log" 2>&1 &
	pid=$!; pids="$pids $pid"
	for i in $(seq 1 300); do curl -sf "$url/healthz" >/dev/null && break; sleep 0.1; done
	curl -sf "$url/healthz" >/dev/null || { echo "http_load.sh: tird on $name did not start: $(tail -3 "$tmp/$name.log")" >&2; exit 1; }
	"$TIRCTL" --server "$url" import --trust "$tmp/export.json" >/dev/null
	# the figure is only worth something if the answer is the NBEST bests
	n=$(curl -sf "$url/v1/best?op=matmul" | jq '[.best[] | select(.latency_us > 0)] | length')
	bytes=$(curl -sf "$url/v1/best?op=matmul" | wc -c)
	[ "$n" = $NBEST ] || { echo "http_load.sh: GET /v1/best on $name answers $n bests, expected $NBEST" >&2; exit 1; }
	echo "## $name: tird --db $db" | sed "s|$tmp/||g"
	echo "# GET /v1/best?op=matmul answers $n bests ($bytes bytes)"
	run "$name.1" "${TESTS[0]}" -t2 -c32 -d${secs}s --latency "$url/v1/best?op=matmul"
	run "$name.2" "${TESTS[1]}" -t2 -c16 -d${secs}s --latency -s "$tmp/same.lua" "$url/v1/jobs"
	run "$name.3" "${TESTS[2]}" -t2 -c16 -d${secs}s --latency -s "$tmp/new.lua" "$url/v1/jobs"
	echo "# jobs created: $(curl -s "$url/v1/jobs?limit=1" | jq '.jobs[0].job_id')"
	kill $pid; wait $pid 2>/dev/null || true
}
run() {   # FILE NAME WRK-ARGS...
	local f=$1 name=$2; shift 2
	echo "== $name: wrk $*" | sed "s|$tmp/||g"
	echo "http_load.sh: $f: $name, ${secs} s" >&2
	wrk "$@" >"$tmp/$f.wrk"
	sed -n '/Latency Distribution/,/Transfer/p' "$tmp/$f.wrk"
}
# field FILE WHAT: requests/s, or a latency percentile (50%, 99%), of a wrk output
field() {
	case $2 in
	rps) awk '/^Requests\/sec:/ {printf "%.0f", $2}' "$1" ;;
	errors) awk '/Non-2xx|Socket errors/ {e = e $0 "; "} END {print e == "" ? "0" : e}' "$1" ;;
	*) awk -v p="$2" '$1 == p {print $2}' "$1" ;;
	esac
}

# the code measured: the source tree the build was configured from
codedir=$(sed -n 's/^abs_top_srcdir = //p' "$build/Makefile" 2>/dev/null); codedir=${codedir:-$here/..}
suffix=; [ $with_pg = 1 ] && suffix=-pg
out=$here/results/$(date +%Y-%m-%d)-http-load$suffix.txt
{
	echo "# tird HTTP load, $(date -u +%Y-%m-%dT%H:%MZ)"
	echo "# machine: $(uname -srm), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
	echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg) (cores shared with other work)"
	echo "# command: bench/http_load.sh $build $secs${suffix:+ --pg}   (tird and wrk on the same cores, loopback)"
	echo "# code: $(git -C "$codedir" log -1 --format='%h %s' 2>/dev/null || echo unknown)$(git -C "$codedir" diff --quiet HEAD 2>/dev/null || echo ' (+ uncommitted changes)')"
	if [ $with_pg = 1 ]; then
		echo "# PostgreSQL $pgver on 127.0.0.1 (throwaway, initdb's defaults: fsync and synchronous_commit on,"
		echo "#   a WAL flush per commit; \"async\": a database with synchronous_commit = off), tird through"
		echo "#   libpq, one connection; SQLite: WAL, synchronous=NORMAL (no fsync per commit).  Loopback: a"
		echo "#   real server adds a network round trip per statement."
	fi
	bench sqlite "$tmp/bench.db"
	if [ $with_pg = 1 ]; then
		bench postgresql "postgresql://tird@127.0.0.1:$pgport/bench"
		bench postgresql-async "postgresql://tird@127.0.0.1:$pgport/bench_async"
		echo
		echo "## side by side (requests/s  latency p50 / p99)"
		cell() { echo "$(field "$1" rps)/s $(field "$1" 50%) / $(field "$1" 99%)"; }
		printf '%-41s %-28s %-28s %s\n' "" "SQLite" "PostgreSQL $pgver" "PostgreSQL, async commit"
		for i in 1 2 3; do
			printf '%-41s %-28s %-28s %s\n' "${TESTS[$((i - 1))]}" "$(cell "$tmp/sqlite.$i.wrk")" \
				"$(cell "$tmp/postgresql.$i.wrk")" "$(cell "$tmp/postgresql-async.$i.wrk")"
			for b in sqlite postgresql postgresql-async; do
				e=$(field "$tmp/$b.$i.wrk" errors)
				[ "$e" = 0 ] || echo "#   $b: $e"
			done
		done
	fi
} >"$tmp/report"   # a brace group, not a pipeline: bench's tirds stay this shell's (cleanup)
cp "$tmp/report" "$out"
cat "$out"
echo "written: $out" >&2
