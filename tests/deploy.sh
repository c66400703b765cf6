#!/bin/sh
# deploy.sh — the deployment files are wired right (run by `make check` from
# the build directory): tests/deploy_check.py parses deploy/compose.yaml,
# deploy/haproxy.cfg, deploy/tird.compose.conf and deploy/k8s/*.yaml and
# asserts their field names and cross references against tird's and
# tird-worker's --help (its header lists what), then applies each of its
# mutations (a wrong port, a missing probe, an unknown setting, a Secret key
# typo, ...) to a copy and asserts each one is caught.  Then the real tird
# starts on each config, deploy/tird.compose.conf and the ConfigMap's
# tird.conf, with the Secret's token file (only --listen, --db and
# --token-file changed to loopback and temporary files), and must answer
# /healthz: tird itself accepts every setting and token.  No docker, kubectl
# or haproxy runs.  Skipped (77) without python3, its yaml module (Debian:
# python3-yaml) or curl.
set -u
top=$(pwd)
src=${srcdir:-$(dirname "$0")/..}
for t in python3 curl; do
	command -v $t >/dev/null 2>&1 || { echo "SKIP: $t not installed"; exit 77; }
done
python3 -c 'import yaml' 2>/dev/null || { echo "SKIP: python3-yaml not installed"; exit 77; }
for p in daemon/tird daemon/tird-worker; do
	[ -x "$top/$p" ] || { echo "FAIL: $p not built"; exit 1; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tird-deploy.XXXXXX")
pid=""
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
ASAN_OPTIONS=${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0; export ASAN_OPTIONS
"$top/daemon/tird" --help >"$tmp/tird.help" || { echo "FAIL: tird --help"; exit 1; }
"$top/daemon/tird-worker" --help >"$tmp/worker.help" || { echo "FAIL: tird-worker --help"; exit 1; }
python3 "$src/tests/deploy_check.py" "$src" "$tmp/tird.help" "$tmp/worker.help" --mutate || exit 1

# ---- the real tird on each config ---------------------------------------------------------
python3 - "$src" "$tmp" <<'PY' || { echo "FAIL: deploy/k8s/ unreadable"; exit 1; }
import sys, yaml
src, tmp = sys.argv[1:]
cm = yaml.safe_load(open(f"{src}/deploy/k8s/configmap.yaml"))
sec = yaml.safe_load(open(f"{src}/deploy/k8s/secret.yaml"))
open(f"{tmp}/k8s.conf", "w").write(cm["data"]["tird.conf"])
open(f"{tmp}/tokens", "w").write(sec["stringData"]["tokens"])
PY
fails=0
for conf in "$src/deploy/tird.compose.conf" "$tmp/k8s.conf"; do
	name=$(basename "$conf")
	port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
	"$top/daemon/tird" --config "$conf" --listen 127.0.0.1:$port --db "$tmp/$name.db" \
		--token-file "$tmp/tokens" --model-seed none >"$tmp/$name.log" 2>&1 &
	pid=$!
	up=0
	for i in $(seq 1 200); do
		curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && { up=1; break; }
		kill -0 $pid 2>/dev/null || break
		sleep 0.05
	done
	if [ $up = 1 ]; then
		echo "PASS tird runs on $name with the Secret's tokens"
	else
		echo "FAIL tird on $name: $(tail -3 "$tmp/$name.log")"
		fails=$((fails + 1))
	fi
	kill $pid 2>/dev/null; wait $pid 2>/dev/null; pid=""
done
[ $fails = 0 ]
