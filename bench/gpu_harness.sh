#!/usr/bin/env bash
# bench/gpu_harness.sh — tird's bests and PyTorch timed the same three ways in
# one process (bench/gpu_harness.py), on the GPU machine.
#
#   bench/gpu_harness.sh BINDIR PACK_DIR SUITE_JSON OUTDIR [--big] [--dtypes "float32 float16"]
#                        [--ncu-cold-only] [NAME...]
#
# PACK_DIR is a CUDA pack of the bests, built (`tirctl pack --target cuda
# --out DIR && make -C DIR`; the bests tuned by `bench/gpu.sh BINDIR SUITE
# TRIALS --no-peer --logs DIR`, whose tird.db a local tird serves to pack).
# BINDIR holds tirctl (for the workload keys, offline).  Runs the harness
# under ncu (method (c): --profile-from-start off, --clock-control none,
# caches flushed before each kernel, gpu__time_duration.sum) and then the timing pass
# (methods (a) back to back, (w) isolated on a warm L2, (b) isolated on a
# cold one, with (c) and (cw) from the ncu logs, caches flushed and not);
# writes OUTDIR/harness.txt (the table), OUTDIR/ncu-all.csv, ncu-none.csv
# and the cases file.  --ncu-cold-only skips the second ncu pass (no (cw)).
set -u
bin=$1 pack=$2 suite=$3 out=$4
shift 4
dtypes="float32 float16" big=0 ccs="all none"
while [ $# -gt 0 ]; do
	case $1 in
	--dtypes) dtypes=$2; shift 2 ;;
	--big) big=1; shift ;;
	--ncu-cold-only) ccs=all; shift ;;
	*) break ;;
	esac
done
names=("$@")
[ ${#names[@]} -gt 0 ] || mapfile -t names < <(jq -r '.[].name' "$suite")
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
target=$(jq -r .target "$pack/manifest.json")
cases=$out/cases.txt
: >"$cases"
add() {    # NAME DTYPE WORKLOAD_JSON
	key=$(printf '%s\n' "$3" | "$bin/tirctl" --json lower - --target "$target" 2>/dev/null |
	      jq -r '.workload_key // empty')
	[ -n "$key" ] && echo "$1 $2 $key $3" >>"$cases"
}
for d in $dtypes; do
	for n in "${names[@]}"; do
		w=$(jq -c ".[] | select(.name==\"$n\") | .workload + {dtype: \"$d\"}" "$suite")
		[ -n "$w" ] && add "$n" "$d" "$w"
	done
	[ $big = 1 ] && [ "$d" = float16 ] &&
		add GMM-4096 "$d" "{\"op\":\"matmul\",\"M\":4096,\"N\":4096,\"K\":4096,\"dtype\":\"$d\"}"
done
echo "# $(wc -l <"$cases") cases; pack $pack ($target)"
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
if [ -x "$ncu" ]; then
	for cc in $ccs; do
		"$ncu" --profile-from-start off --clock-control none --cache-control $cc \
			--metrics gpu__time_duration.sum --csv --log-file "$out/ncu-$cc.csv" \
			python3 "$here/gpu_harness.py" "$pack" --ncu <"$cases" >"$out/ncu-pass.txt" 2>&1
		echo "# ncu pass (cache-control $cc): rc $?, $(grep -c profiled "$out/ncu-pass.txt") cases profiled"
	done
	warm=()
	[ -f "$out/ncu-none.csv" ] && warm=(--ncu-csv-warm "$out/ncu-none.csv")
	python3 "$here/gpu_harness.py" "$pack" --ncu-csv "$out/ncu-all.csv" "${warm[@]}" \
		<"$cases" | tee "$out/harness.txt"
else
	echo "# no ncu: methods (a) and (b) only"
	python3 "$here/gpu_harness.py" "$pack" <"$cases" | tee "$out/harness.txt"
fi
