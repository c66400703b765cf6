#!/bin/sh
# fuzz.sh — a bounded run of every libFuzzer target of tests/fuzz/ from its
# seed corpus (run by `make check` and `make fuzz-check` from the build
# directory of a `configure CC=clang --enable-fuzz` build; skipped in other
# builds).  Each target runs FUZZ_SECONDS (20) seconds; FUZZ_TARGETS picks
# some ("workload graph trace records config http", the default);
# FUZZ_JOBS (1) processes run each target at once on one shared corpus
# folder (the long runs on many cores: libFuzzer's processes read each
# other's new inputs from it), their executions summed.  New inputs go to
# a temporary folder; the seeds in the source tree are not touched.
# A crash, leak, timeout or failed check fails the test, and its input is
# kept as tests/fuzz-artifacts/NAME-J-crash-* in the build directory (J:
# the process that found it; replay it: tests/fuzz/fuzz_NAME FILE).
# Prints per target the executions, the coverage reached and the crashes.
set -u
src=${srcdir:-.}
seconds=${FUZZ_SECONDS:-20}
jobs=${FUZZ_JOBS:-1}
case $jobs in ''|*[!0-9]*|0) echo "FAIL: FUZZ_JOBS=$jobs is not a count of processes"; exit 1 ;; esac
targets=${FUZZ_TARGETS:-workload graph trace records config http}
if [ ! -x tests/fuzz/fuzz_workload ]; then
	echo "SKIP: the fuzz targets are not built (they need clang with libFuzzer: configure CC=clang --enable-fuzz; Debian: clang libclang-rt-dev)"
	exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tird-fuzz.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p tests/fuzz-artifacts
# sanitizer reports end the run; a leak is a crash too
ASAN_OPTIONS=${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=1:allocator_may_return_null=1
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export ASAN_OPTIONS UBSAN_OPTIONS
fails=0
for t in $targets; do
	bin=tests/fuzz/fuzz_$t
	seeds=$src/tests/fuzz/corpus/$t
	[ -x "$bin" ] && [ -d "$seeds" ] || { echo "FAIL $t: $bin or $seeds missing"; fails=$((fails + 1)); continue; }
	mkdir -p "$tmp/$t"
	dict=
	[ -f "$src/tests/fuzz/$t.dict" ] && dict=-dict=$src/tests/fuzz/$t.dict
	# fuzz_http: no leak check per input (tird's threads allocate between
	# inputs: each would be a full LeakSanitizer scan); one at exit, after
	# tird stopped as main.c stops it
	leaks=1 maxlen=8192
	case $t in
	records) maxlen=65536 ;;
	http) maxlen=65536 leaks=0 ;;
	esac
	# FUZZ_JOBS processes on one corpus; each its own log, its own
	# artifact prefix (a crash names the process that found it)
	pids=
	for j in $(seq 1 "$jobs"); do
		"$bin" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 -max_len=$maxlen \
			-detect_leaks=$leaks $dict -print_final_stats=1 \
			-artifact_prefix="tests/fuzz-artifacts/$t-$j-" \
			"$tmp/$t" "$seeds" >"$tmp/$t.$j.log" 2>&1 &
		pids="$pids $!"
	done
	rc=0
	for p in $pids; do wait "$p" || rc=$?; done
	runs=0
	for j in $(seq 1 "$jobs"); do
		n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$tmp/$t.$j.log" | tail -n 1)
		runs=$((runs + ${n:-0}))
	done
	cat "$tmp"/$t.*.log >"$tmp/$t.log"
	cov=$(grep -o 'cov: [0-9]*' "$tmp/$t.log" | sort -t' ' -k2 -n | tail -n 1)
	procs=
	[ "$jobs" -gt 1 ] && procs=" by $jobs processes"
	if [ $rc -eq 0 ]; then
		echo "PASS $t: $runs executions in ${seconds} s$procs, $cov, 0 crashes"
	else
		fails=$((fails + 1))
		echo "FAIL $t: exit $rc after $runs executions; input kept: $(ls tests/fuzz-artifacts/$t-* 2>/dev/null | tr '\n' ' ')"
		grep -v '^#[0-9]' "$tmp/$t.log" | tail -n 60
	fi
done
[ $fails -eq 0 ]
