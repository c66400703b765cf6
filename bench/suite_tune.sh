#!/usr/bin/env bash
# bench/suite_tune.sh — tunes suite workloads on this machine's CPU or GPU
# through a real tird with a local worker, and prints each tuned latency (a
# verified best: only a candidate that matched the reference counts) beside
# the PyTorch (cuDNN / cuBLAS, H200) figure of bench/suite.md.
#
#   bench/suite_tune.sh BINDIR SUITE_JSON SUITE_MD TARGET TRIALS [NAME...]
#
# TARGET is cpu or cuda; no NAME: every suite workload.  BINDIR holds tird
# and tirctl.  Output, one line per workload:
#   name  trials  tuning_s  tird_us  torch_us  torch/tird
set -u
bin=$1 suite=$2 readme=$3 target=$4 trials=$5
shift 5
names=("$@")
[ ${#names[@]} -gt 0 ] || mapfile -t names < <(jq -r '.[].name' "$suite")
tmp=$(mktemp -d)
port=$(( 20000 + RANDOM % 20000 ))
url=http://127.0.0.1:$port
"$bin/tird" --listen 127.0.0.1:$port --db "$tmp/tird.db" --local-workers "$target" >"$tmp/tird.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for i in $(seq 1 100); do curl -sf "$url/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
printf '%-8s %6s %9s %10s %10s %8s\n' name trials tuning_s tird_us torch_us ratio
for n in "${names[@]}"; do
	jq ".[] | select(.name==\"$n\") | .workload" "$suite" > "$tmp/w.json"
	t0=$(date +%s.%N)
	out=$("$bin/tirctl" --server "$url" --json tune "$tmp/w.json" --target "$target" --trials "$trials" --wait 2>"$tmp/err")
	t1=$(date +%s.%N)
	us=$(printf '%s' "$out" | jq -r '.latency_us // empty' 2>/dev/null)
	done_trials=$(printf '%s' "$out" | jq -r '.trials // empty' 2>/dev/null)
	ref=
	[ "$target" = cuda ] &&   # the README's figures are the H200's
		ref=$(awk -F'|' -v n="$n" '{gsub(/ /,"",$2); sub(/\(.*/,"",$2)} $2==n {gsub(/ /,"",$3); print $3}' "$readme")
	ratio=-
	[ -n "$ref" ] && [ -n "$us" ] && ratio=$(awk -v a="$ref" -v b="$us" 'BEGIN{printf "%.3f", a/b}')
	printf '%-8s %6s %9.1f %10s %10s %8s\n' "$n" "${done_trials:--}" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')" "${us:-failed}" "${ref:--}" "$ratio"
	[ -n "$us" ] || head -c 400 "$tmp/err"
done
echo "--- tird log (last lines)"; tail -5 "$tmp/tird.log"
