#!/bin/sh
# arm.sh — tird-worker on AArch64, end to end under emulation (issue #33; run
# by `make check` from the build directory; skipped, saying what is missing,
# without the cross tools: deploy/install-deps.sh --arm installs them).
#
#   1. cross-builds tird-worker for aarch64-linux-gnu in tests/arm64 of the
#      build tree (configure --host=aarch64-linux-gnu --disable-daemon; kept,
#      so a second run only rebuilds what changed);
#   2. starts a real tird on a free loopback port with a temporary database,
#      the aarch64 worker under qemu-aarch64 -cpu max (building candidates
#      with the host's cross gcc, which the emulated worker starts natively)
#      and an x86 worker of this machine's CPU;
#   3. the emulated worker detects its key from the hwcaps qemu gives it
#      (cpu:aarch64+neon+dotprod+...+emulated) and says at registration that
#      it is emulated;
#   4. a float32 matmul tuned on the ARM key and on this CPU's key at the same
#      time, and an int8 conv2d, an int8 matmul (the suite's GMM shrunk to
#      64^3), a uint8 matmul and a float16 matmul summed in float16 on the
#      ARM key, end with
#      verified bests (every best a record whose output matched the
#      reference); among the int8 candidates measured, cpu-sdot's
#      (sdot_4x4x4_i8_i32) match the reference exactly, the source the
#      worker kept (TIRD_KEEP_BUILD) calls vdotq and the cross objdump of its
#      .so has sdot instructions; cpu-udot's (udot_4x4x4_u8_i32) of the
#      uint8 matmul match it exactly, their .so has udot; the float16
#      candidates match it within
#      float16's tolerance, cpu-fmla's (fmla_4x8x4_f16) calling
#      vfmaq_laneq_f16, the others' vector loops NEON float16x8_t
#      (vfmaq_f16), and the .so of each has fmla on .8h; the float32
#      candidates' vector loops are NEON (vfmaq_f32); the two keys keep
#      their own records and bests, the ARM ones marked emulated and none
#      under the real board's key; the emulated key trains no cost model,
#      while two real keys (this CPU's, and cpu:x86_64+avx2+fma measured here
#      too) each train their own, with their own rows only;
#   5. bad input changes nothing: a worker whose key does not parse, one that
#      says it is emulated under a real board's key, results for a batch
#      the worker does not hold, an sdot record imported under an x86 key and
#      an fmla record under cpu:aarch64+neon (no fp16) are refused (4xx, a
#      message naming the fault), and the records and bests are the same
#      after.
# Trials are few and shapes small: the whole test is bounded to a few minutes.
set -u
top=$(pwd)
src=${srcdir:-.}
abs_src=$(cd "$src" && pwd)
TIRD=$top/daemon/tird
WORKER=$top/daemon/tird-worker
TIRCTL=$top/client/tirctl
skip() { echo "SKIP: $*"; exit 77; }
for t in curl jq python3 sqlite3; do
	command -v $t >/dev/null 2>&1 || skip "$t not installed"
done
CROSS_CC=aarch64-linux-gnu-gcc
command -v $CROSS_CC >/dev/null 2>&1 ||
	skip "no $CROSS_CC (deploy/install-deps.sh --arm installs the AArch64 cross tools)"
QEMU=
for q in qemu-aarch64-static qemu-aarch64; do
	command -v $q >/dev/null 2>&1 && { QEMU=$q; break; }
done
[ -n "$QEMU" ] || skip "no qemu-aarch64 (deploy/install-deps.sh --arm installs qemu-user-static)"
aarch64-linux-gnu-pkg-config --exists libcurl libcjson nettle 2>/dev/null ||
	skip "no arm64 libcurl, cJSON or nettle (deploy/install-deps.sh --arm installs them)"
[ -x "$TIRD" ] && [ -x "$WORKER" ] && [ -x "$TIRCTL" ] || { echo "FAIL: binaries not built"; exit 1; }
ASAN_OPTIONS=${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0; export ASAN_OPTIONS

fails=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
t0=$(date +%s)
elapsed() { echo "$(( $(date +%s) - t0 )) s"; }

# ---- 1. the cross build ----------------------------------------------------------------------
arm=$top/tests/arm64
mkdir -p "$arm"
if [ ! -f "$arm/config.status" ]; then
	(cd "$arm" && env -u CC -u CFLAGS -u CPPFLAGS -u LDFLAGS -u MAKEFLAGS -u MFLAGS "$abs_src/configure" \
		--host=aarch64-linux-gnu --disable-daemon --enable-werror -q) >"$arm/configure.out" 2>&1 ||
		{ echo "FAIL: configure --host=aarch64-linux-gnu:"; tail -20 "$arm/configure.out"; exit 1; }
fi
if ! (cd "$arm" && env -u CC -u CFLAGS -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -j2 daemon/tird-worker) >"$arm/make.out" 2>&1; then
	echo "FAIL: make daemon/tird-worker for aarch64:"; tail -30 "$arm/make.out"; exit 1
fi
AWORKER=$arm/daemon/tird-worker
file "$AWORKER" 2>/dev/null | grep -q 'ARM aarch64' || od -An -tx1 -j18 -N2 "$AWORKER" | grep -q 'b7 00' \
	&& pass "tird-worker cross-built for aarch64 ($(elapsed))" || fail "$AWORKER is not an aarch64 program"
# Without -L: with the arm64 multiarch libraries installed, -L /usr/aarch64-linux-gnu pairs the
# cross toolchain's ld.so with the multiarch libc, and pthread_create never returns.
qrun() { "$QEMU" -cpu max "$@"; }

# ---- 2. tird and the workers -----------------------------------------------------------------
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tird-arm.XXXXXX")
pids=""
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	if [ "$fails" -ne 0 ]; then
		for f in "$tmp"/*.log; do echo "---- $f"; tail -40 "$f"; done
	fi
	[ -n "${TIRD_TEST_KEEP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
url=http://127.0.0.1:$port
"$TIRD" --listen 127.0.0.1:$port --db "$tmp/t.db" --local-workers none --model-seed none \
	--lease-s 30 --tuning-threads 5 >"$tmp/tird.log" 2>&1 &
tird_pid=$!; pids="$pids $tird_pid"
up() { curl -sf "$url/healthz" >/dev/null 2>&1; }
until_ok() {   # TENTHS COMMAND...
	tenths=$1; shift
	for i in $(seq 1 "$tenths"); do "$@" && return 0; sleep 0.1; done
	return 1
}
until_ok 600 up && pass "tird up on $url" || { fail "tird did not start"; exit 1; }
cpukey=$(curl -s "$url/healthz" | jq -r .cpu)
# the second real key, one this CPU runs that is not its own key (a machine
# whose own key is cpu:x86_64+avx2+fma, no AVX-512, gets cpu:x86_64+avx2)
subkey=cpu:x86_64+avx2+fma
[ "$cpukey" = "$subkey" ] && subkey=cpu:x86_64+avx2

# ---- 3. the key from the hardware, and emulation said --------------------------------------------
akey=$(qrun "$AWORKER" --target cpu --print-target 2>"$tmp/print.err")
printf '%s\n' "$akey" | grep -Eq '^cpu:aarch64\+neon\+dotprod(\+[a-z0-9]+)*\+emulated$' &&
	grep -q 'emulated by qemu' "$tmp/print.err" \
	&& pass "the emulated worker's key from its hwcaps: $akey" || fail "detected key: '$akey' $(cat "$tmp/print.err")"
for f in fp16 i8mm bf16 sve sve2; do
	case $akey in *+$f+*) ;; *) fail "qemu -cpu max has $f, the key lacks it: $akey" ;; esac
done
real=${akey%+emulated}
"$QEMU" -cpu cortex-a53 "$AWORKER" --target cpu --print-target 2>/dev/null | grep -qx 'cpu:aarch64+neon+emulated' \
	&& pass "a Cortex-A53 (no dot product) detects cpu:aarch64+neon" || fail "cortex-a53 key"
mkdir -p "$tmp/keep"    # the ARM worker's candidate builds, kept for objdump
TIRD_KEEP_BUILD=1 TMPDIR=$tmp/keep "$QEMU" -cpu max "$AWORKER" --server "$url" --target cpu \
	--cc $CROSS_CC --name arm >"$tmp/arm.log" 2>&1 &
apid=$!; pids="$pids $apid"
"$WORKER" --server "$url" --target cpu --name x86 >"$tmp/x86.log" 2>&1 &
xpid=$!; pids="$pids $xpid"
"$WORKER" --server "$url" --target "$subkey" --name avx2 >"$tmp/avx2.log" 2>&1 &
vpid=$!; pids="$pids $vpid"
three() { [ "$(curl -s "$url/v1/workers" | jq '[.workers[] | select(.state=="live")] | length')" = 3 ]; }
until_ok 300 three || fail "workers did not register: $(curl -s "$url/v1/workers")"
curl -s "$url/v1/workers" >"$tmp/workers.json"
jq -e --arg k "$akey" '[.workers[] | select(.target==$k and .emulated==true and (.emulator|test("qemu")))] | length == 1' \
	"$tmp/workers.json" >/dev/null && grep -q "emulated by qemu" "$tmp/tird.log" \
	&& pass "the ARM worker registered as emulated (by $(jq -r '.workers[] | select(.emulated) | .emulator' "$tmp/workers.json"))" \
	|| fail "registration: $(cat "$tmp/workers.json")"
jq -e --arg k "$cpukey" '[.workers[] | select(.target==$k and .emulated==false)] | length == 1' "$tmp/workers.json" >/dev/null \
	&& pass "the x86 worker registered as real hardware ($cpukey)" || fail "x86 registration: $(cat "$tmp/workers.json")"

# ---- 4. tuning: separate records, bests and models ----------------------------------------------
echo '{"op":"matmul","M":32,"N":32,"K":32}' >"$tmp/mm.json"
echo '{"op":"conv2d","N":1,"C":16,"H":8,"W":8,"K":16,"R":3,"S":3,"pad":1,"dtype":"int8","layout":"NHWC"}' >"$tmp/c2d.json"
echo '{"op":"matmul","M":64,"N":64,"K":64,"dtype":"int8"}' >"$tmp/mm8.json"
echo '{"op":"matmul","M":32,"N":32,"K":32,"dtype":"float16","out_dtype":"float16"}' >"$tmp/hmm.json"
echo '{"op":"matmul","M":32,"N":32,"K":64,"dtype":"uint8"}' >"$tmp/umm.json"
ctl() { "$TIRCTL" --server "$url" "$@"; }
tune() {   # FILE TARGET OUT [TRIALS [SEED]]
	ctl --json tune "$1" --target "$2" --trials "${4:-16}" --batch 8 ${5:+--seed $5} --wait >"$3" 2>"$3.err"
}
# the ARM jobs: one round each (its draws follow from the seed alone, later
# rounds from what was measured); the int8 jobs' seeds draw cpu-sdot candidates
# among the 8 they measure, the float16 job's cpu-fmla ones (the emulated key
# ranks at random)
tune "$tmp/mm.json" "$akey" "$tmp/mm-arm.json" 8 & j1=$!
tune "$tmp/mm.json" "$cpukey" "$tmp/mm-x86.json" & j2=$!
tune "$tmp/mm.json" "$subkey" "$tmp/mm-avx2.json" & j3=$!
tune "$tmp/c2d.json" "$akey" "$tmp/c2d-arm.json" 8 1 & j4=$!
tune "$tmp/mm8.json" "$akey" "$tmp/mm8-arm.json" 8 1 & j5=$!
tune "$tmp/hmm.json" "$akey" "$tmp/hmm-arm.json" 8 1 & j6=$!
tune "$tmp/umm.json" "$akey" "$tmp/umm-arm.json" 8 1 & j7=$!
wait $j1; r1=$?; wait $j2; r2=$?; wait $j3; r3=$?; wait $j4; r4=$?; wait $j5; r5=$?; wait $j6; r6=$?
wait $j7; r7=$?
[ $r1 -eq 0 ] && [ $r2 -eq 0 ] && [ $r3 -eq 0 ] && [ $r4 -eq 0 ] && [ $r5 -eq 0 ] && [ $r6 -eq 0 ] && [ $r7 -eq 0 ] \
	&& pass "float32 matmul on three keys at once, int8 conv2d and matmul, uint8 and float16 matmuls on the ARM key: done ($(elapsed))" \
	|| fail "tune exits $r1 $r2 $r3 $r4 $r5 $r6 $r7: $(cat "$tmp"/*.json.err)"
for f in mm-arm mm-x86 mm-avx2 c2d-arm mm8-arm hmm-arm umm-arm; do
	rid=$(jq -r .record_id "$tmp/$f.json"); key=$(jq -r .target "$tmp/$f.json")
	rec=$(curl -s "$url/v1/records?target=$(printf '%s' "$key" | sed 's/+/%2B/g')" | jq --arg id "$rid" '.records[] | select(.id==$id)')
	printf '%s' "$rec" | jq -e '.status=="ok" and .max_rel_error >= 0 and .latency_us > 0' >/dev/null \
		&& pass "$f: best $(jq -r .latency_us "$tmp/$f.json") us on $key, its record ok (error $(printf '%s' "$rec" | jq -r .max_rel_error) against the reference)" \
		|| fail "$f: best $rid not a verified record: $rec"
done
q() { printf '%s' "$1" | sed 's/+/%2B/g'; }
curl -s "$url/v1/records?target=$(q "$akey")" >"$tmp/rec-arm.json"
curl -s "$url/v1/records?target=$(q "$cpukey")" >"$tmp/rec-x86.json"
na=$(jq '.records|length' "$tmp/rec-arm.json"); nx=$(jq '.records|length' "$tmp/rec-x86.json")
[ "$na" -ge 40 ] && [ "$nx" -ge 16 ] && jq -e 'all(.records[]; .emulated==true)' "$tmp/rec-arm.json" >/dev/null &&
	jq -e 'all(.records[]; .emulated != true)' "$tmp/rec-x86.json" >/dev/null &&
	jq -e -n --slurpfile a "$tmp/rec-arm.json" --slurpfile x "$tmp/rec-x86.json" \
		'([$a[0].records[].id] - [$x[0].records[].id] | length) == ($a[0].records | length)' >/dev/null \
	&& pass "records kept apart: $na on the ARM key, all marked emulated; $nx on $cpukey, none" \
	|| fail "records: $na ARM, $nx x86 $(head -c 400 "$tmp/rec-arm.json")"
ba=$(jq -r .record_id "$tmp/mm-arm.json"); bx=$(jq -r .record_id "$tmp/mm-x86.json")
jq -e '.emulated==true' "$tmp/mm-arm.json" >/dev/null && [ "$ba" != "$bx" ] &&
	wk=$(jq -r .workload_key "$tmp/mm-arm.json") &&
	[ "$(curl -s "$url/v1/best?op=matmul&target=$(q "$cpukey")" | jq -r --arg w "$wk" '.best[] | select(.workload_key==$w) | .record_id')" = "$bx" ] &&
	[ "$(curl -s "$url/v1/best?op=matmul&target=$(q "$akey")" | jq -r --arg w "$wk" '.best[] | select(.workload_key==$w) | .record_id')" = "$ba" ] \
	&& pass "bests kept apart: the ARM key's best is its own, marked emulated" || fail "bests: $ba $bx $(cat "$tmp/mm-arm.json")"
code=$(curl -s -o "$tmp/r" -w '%{http_code}' "$url/v1/best?op=matmul&target=$(q "$real")")
[ "$code" = 200 ] && jq -e '.best|length == 0' "$tmp/r" >/dev/null \
	&& pass "the real board's key $real has no best from the emulator" || fail "best under $real: HTTP $code $(cat "$tmp/r")"
grep -q "job [0-9]*: $akey is emulated: no cost model learns" "$tmp/tird.log" \
	&& pass "the emulated key's jobs rank at random and teach no model" || fail "emulated key's model: $(grep "$akey" "$tmp/tird.log" | tail -3)"

# the int8 jobs' sdot (and smmla) candidates: measured, exactly right
for f in c2d mm8; do
	wk=$(jq -r .workload_key "$tmp/$f-arm.json")
	jq --arg w "$wk" '[.records[] | select(.workload_key==$w)]' "$tmp/rec-arm.json" >"$tmp/$f-recs.json"
	ns=$(jq '[.[] | select(.trace|tostring|test("sdot_4x4x4_i8_i32"))] | length' "$tmp/$f-recs.json")
	nm=$(jq '[.[] | select(.trace|tostring|test("smmla_2x2x8_i8_i32"))] | length' "$tmp/$f-recs.json")
	[ "$ns" -ge 1 ] && jq -e '[.[] | select(.trace|tostring|test("sdot_4x4x4_i8_i32|smmla_2x2x8_i8_i32"))] |
		all(.status=="ok" and .max_rel_error==0)' "$tmp/$f-recs.json" >/dev/null \
		&& pass "$f: $ns sdot and $nm smmla candidates measured on the ARM key, each output the reference's exactly" \
		|| fail "$f: $ns sdot, $nm smmla candidates: $(jq -c '[.[] | {status, max_rel_error, message}]' "$tmp/$f-recs.json" | head -c 600)"
done
kept=$(grep -l 'tir_sdot_4x4x4_i8_i32(&' "$tmp"/keep/tird-cpu-*/k.c 2>/dev/null | head -n 1)
if [ -n "$kept" ] && grep -q vdotq_laneq_s32 "$kept"; then
	nsd=$(aarch64-linux-gnu-objdump -d "${kept%k.c}k.so" | grep -cw sdot)
	[ "$nsd" -ge 1 ] && pass "the kept sdot candidate calls vdotq_laneq_s32; its .so holds $nsd sdot instructions" \
		|| fail "no sdot instruction in ${kept%k.c}k.so"
else
	fail "no kept candidate source with sdot under $tmp/keep ($(ls "$tmp/keep" | wc -l) kept)"
fi
# the uint8 job's udot candidates: measured, exactly right (its inputs span
# 0..255, so a signed reading of them would show)
wk=$(jq -r .workload_key "$tmp/umm-arm.json")
jq --arg w "$wk" '[.records[] | select(.workload_key==$w)]' "$tmp/rec-arm.json" >"$tmp/umm-recs.json"
nu=$(jq '[.[] | select(.trace|tostring|test("udot_4x4x4_u8_i32"))] | length' "$tmp/umm-recs.json")
[ "$nu" -ge 1 ] && jq -e 'length >= 8 and all(.status=="ok" and .max_rel_error==0)' "$tmp/umm-recs.json" >/dev/null \
	&& pass "umm: $(jq length "$tmp/umm-recs.json") uint8 candidates ($nu udot) measured on the ARM key, each output the reference's exactly" \
	|| fail "umm: $nu udot candidates: $(jq -c '[.[] | {status, max_rel_error, message}]' "$tmp/umm-recs.json" | head -c 600)"
kept=$(grep -l 'tir_udot_4x4x4_u8_i32(&' "$tmp"/keep/tird-cpu-*/k.c 2>/dev/null | head -n 1)
if [ -n "$kept" ] && grep -q vdotq_laneq_u32 "$kept"; then
	nud=$(aarch64-linux-gnu-objdump -d "${kept%k.c}k.so" | grep -cw udot)
	[ "$nud" -ge 1 ] && pass "the kept udot candidate calls vdotq_laneq_u32; its .so holds $nud udot instructions" \
		|| fail "no udot instruction in ${kept%k.c}k.so"
else
	fail "no kept candidate source with udot under $tmp/keep"
fi
# the float16 job's candidates, cpu-fmla's and the others: measured, right
# within float16's tolerance (1e-2; they round as the reference does, once
# per step)
wk=$(jq -r .workload_key "$tmp/hmm-arm.json")
jq --arg w "$wk" '[.records[] | select(.workload_key==$w)]' "$tmp/rec-arm.json" >"$tmp/hmm-recs.json"
nh=$(jq '[.[] | select(.trace|tostring|test("fmla_4x8x4_f16"))] | length' "$tmp/hmm-recs.json")
eh=$(jq '[.[] | .max_rel_error] | max' "$tmp/hmm-recs.json")
[ "$nh" -ge 1 ] && jq -e 'length >= 8 and all(.status=="ok" and .max_rel_error <= 0.01)' "$tmp/hmm-recs.json" >/dev/null \
	&& pass "hmm: $(jq length "$tmp/hmm-recs.json") float16 candidates ($nh fmla) measured on the ARM key, right against the reference (largest error $eh)" \
	|| fail "hmm: $nh fmla candidates: $(jq -c '[.[] | {status, max_rel_error, message}]' "$tmp/hmm-recs.json" | head -c 600)"
fmla8h() { aarch64-linux-gnu-objdump -d "${1%k.c}k.so" | grep -cE 'fmla[[:space:]]+v[0-9]+\.8h'; }
kept=$(grep -l 'tir_fmla_4x8x4_f16(&' "$tmp"/keep/tird-cpu-*/k.c 2>/dev/null | head -n 1)
if [ -n "$kept" ] && grep -q vfmaq_laneq_f16 "$kept"; then
	nfh=$(fmla8h "$kept")
	[ "$nfh" -ge 1 ] && pass "the kept fmla candidate calls vfmaq_laneq_f16; its .so holds $nfh fmla instructions on .8h" \
		|| fail "no fmla on .8h in ${kept%k.c}k.so"
else
	fail "no kept candidate source with fmla_4x8x4_f16 under $tmp/keep"
fi
kept=$(grep -l 'vreinterpretq_u16_f16(vfmaq_f16(' "$tmp"/keep/tird-cpu-*/k.c 2>/dev/null | head -n 1)
if [ -n "$kept" ] && grep -q 'NEON float16x8_t' "$kept"; then
	nfh=$(fmla8h "$kept")
	[ "$nfh" -ge 1 ] && pass "a kept float16 candidate's vector loops are NEON float16x8_t (vfmaq_f16); its .so holds $nfh fmla on .8h" \
		|| fail "no fmla on .8h in ${kept%k.c}k.so"
else
	fail "no kept candidate with a NEON float16 loop under $tmp/keep"
fi
nf=$(grep -l 'vst1q_f32(tir_dst, vfmaq_f32(' "$tmp"/keep/tird-cpu-*/k.c 2>/dev/null | wc -l)
[ "$nf" -ge 1 ] && pass "$nf kept float32 candidates vectorized as NEON float32x4_t (vfmaq_f32)" \
	|| fail "no kept candidate with a NEON float32 loop"

# ---- 5. bad input changes nothing ------------------------------------------------------------------
snap() { curl -s "$url/v1/records" | jq -S '[.records[] | {id, status, latency_us}] | sort_by(.id)'; curl -s "$url/v1/best?op=matmul" | jq -S .; }
snap >"$tmp/before"
post() { curl -s -o "$tmp/r" -w '%{http_code}' -X POST --data-binary "$2" "$url$1"; }
code=$(post /v1/workers '{"target":"cpu:aarch64+neon+sdot","name":"bad"}')
[ "$code" = 400 ] && jq -e '.error.code=="invalid_target" and (.error.message|test("unknown feature \"sdot\" for aarch64"))' "$tmp/r" >/dev/null \
	&& pass "a worker whose key does not parse: 400 $(jq -r .error.message "$tmp/r")" || fail "bad key: HTTP $code $(cat "$tmp/r")"
code=$(post /v1/workers "{\"target\":\"$real\",\"emulated\":true,\"emulator\":\"qemu-aarch64\"}")
[ "$code" = 400 ] && jq -e '.error.message|test("must end in \\+emulated")' "$tmp/r" >/dev/null \
	&& pass "an emulated worker claiming the real board's key: 400" || fail "emulated real key: HTTP $code $(cat "$tmp/r")"
post /v1/workers "{\"target\":\"$akey\",\"name\":\"stray\"}" >/dev/null; sid=$(jq -r .worker_id "$tmp/r")
code=$(post "/v1/workers/$sid/results" '{"batch_id":1,"results":[{"status":"ok","latency_us":0.001,"max_rel_error":0}]}')
[ "$code" = 409 ] && jq -e '.error.code=="lease_lost" and (.error.message|test("not leased to"))' "$tmp/r" >/dev/null \
	&& pass "results for a batch the worker does not hold: 409 $(jq -r .error.message "$tmp/r")" || fail "stray results: HTTP $code $(cat "$tmp/r")"
curl -s -X DELETE "$url/v1/workers/$sid" >/dev/null
ctl export "$tmp/arm-export.json" --target "$akey" >/dev/null 2>&1
jq --arg k "$cpukey" '.records = [.records[] | select(.trace|tostring|test("sdot_4x4x4_i8_i32"))][0:1] |
	.records[0].target = $k | .records[0].emulated = false' "$tmp/arm-export.json" >"$tmp/sdot-x86.json"
code=$(curl -s -o "$tmp/r" -w '%{http_code}' -X POST --data-binary @"$tmp/sdot-x86.json" "$url/v1/records")
[ "$code" = 400 ] && jq -e '.error.code=="invalid_record" and (.error.message|test("sdot_4x4x4_i8_i32 needs \\+dotprod; target cpu:x86_64"))' "$tmp/r" >/dev/null \
	&& pass "an sdot record imported under $cpukey: 400 $(jq -r .error.message "$tmp/r")" || fail "sdot import under x86: HTTP $code $(cat "$tmp/r")"
jq '.records = [.records[] | select(.trace|tostring|test("fmla_4x8x4_f16"))][0:1] |
	.records[0].target = "cpu:aarch64+neon" | .records[0].emulated = false' "$tmp/arm-export.json" >"$tmp/fmla-neon.json"
code=$(curl -s -o "$tmp/r" -w '%{http_code}' -X POST --data-binary @"$tmp/fmla-neon.json" "$url/v1/records")
[ "$code" = 400 ] && jq -e '.error.code=="invalid_record" and (.error.message|test("fmla_4x8x4_f16 needs \\+fp16; target cpu:aarch64\\+neon has not"))' "$tmp/r" >/dev/null \
	&& pass "an fmla record imported under cpu:aarch64+neon: 400 $(jq -r .error.message "$tmp/r")" || fail "fmla import under cpu:aarch64+neon: HTTP $code $(cat "$tmp/r")"
snap >"$tmp/after"
cmp -s "$tmp/before" "$tmp/after" && pass "records and bests unchanged by the bad requests" \
	|| fail "bad input changed something: $(diff "$tmp/before" "$tmp/after" | head -5)"

# ---- the models, written at shutdown ------------------------------------------------------------------
kill -TERM $apid $xpid $vpid; wait $apid $xpid $vpid 2>/dev/null
kill -TERM $tird_pid; wait $tird_pid 2>/dev/null
rows() { grep -F "cost model for $1 saved: " "$tmp/tird.log" | sed -n 's/.* saved: \([0-9]*\) rows.*/\1/p' | tail -n 1; }
mx=$(rows "$cpukey"); mv=$(rows "$subkey")
models=$(sqlite3 "$tmp/t.db" "SELECT target_kind FROM cost_models ORDER BY 1" | tr '\n' ' ')
[ "$mx" = 16 ] && [ "$mv" = 16 ] && ! sqlite3 "$tmp/t.db" "SELECT target_kind FROM cost_models" | grep -q aarch64 \
	&& pass "one model per real key, each with its own 16 rows ($models); none for the emulated key" \
	|| fail "models: $cpukey $mx rows, avx2 $mv rows, stored: $models"
echo "arm.sh: $(elapsed)"
[ "$fails" -eq 0 ]
