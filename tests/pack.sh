#!/bin/sh
# pack.sh — the test of `tirctl pack` for the CPU (run by `make check` from the
# build directory; needs curl, jq and python3, else it is skipped).
#
# It starts a real tird on a free loopback port with a temporary database and
# a local CPU worker, tunes five small float32 workloads with few trials (a
# batched matmul 64x48x32, a strided and padded NHWC conv2d, a depthwise_conv2d,
# a matmul with a bias + relu epilogue and a graph whose tensor is named "t*/u"),
# then:
#   tirctl pack --target cpu --out DIR: every file there, manifest.json naming
#   each stored best (workload key, workload, record id, latency, function,
#   source, arguments) and tird's version; a second pack into DIR refused (exit
#   1, DIR untouched, no DIR.part-* left); --target cuda with no CUDA best
#   (exit 3, saying so, nothing written); bad command lines (exit 2); --json
#   and --op conv2d (one kernel); an --op given twice packs each kernel once;
#   make -C DIR (the pack's own flags, CC the build's): libtirdpack.a and
#   libtirdpack.so.ABI (soname: the ABI of tird_pack.h) with its .so link;
#   tests/pack_check.c compiled here against tird_pack.h, libtirdpack.a and
#   libtir (flags from Makefile.am, PACK_TEST_*): every kernel against libtir's
#   reference within tird's tolerance, its own function, tird_find, the
#   dispatch functions (its shape runs it unless it has an epilogue; another
#   shape is TIRD_NOT_PACKED naming it) and the API's edges;
#   with pkg-config: make install PREFIX=..., then a plain (non-sanitized)
#   program built by `pkg-config --cflags --libs tirdpack` (shared) and by
#   `--static` (the archive), each running the packed matmul on ones.
# The pack is built without sanitizers and linked into the sanitized
# pack_check: instrumented code calling plain code is fine.
set -u
t0=$(date +%s)
top=$(pwd)
src=${srcdir:-.}
TIRD=$top/daemon/tird
TIRCTL=$top/client/tirctl
for t in curl jq python3; do
	command -v $t >/dev/null 2>&1 || { echo "SKIP: $t not installed"; exit 77; }
done
[ -x "$TIRD" ] && [ -x "$TIRCTL" ] || { echo "FAIL: binaries not built"; exit 1; }
# the build's compiler and flags (Makefile.am's AM_TESTS_ENVIRONMENT)
CC=${PACK_TEST_CC:-${CC:-cc}}
if [ -z "${PACK_TEST_LIBS:-}" ]; then
	echo "FAIL: PACK_TEST_LIBS is not set: run me by make check TESTS=tests/pack.sh"; exit 1
fi
MAKE=${MAKE:-make}

# sanitizer builds: tird's third-party libraries' exit-time allocations are not
# ours; pack_check runs with the options make check gave (leaks detected)
check_asan=${ASAN_OPTIONS:-}
ASAN_OPTIONS=${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0; export ASAN_OPTIONS

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tird-pack.XXXXXX")
fails=0
pids=""
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	if [ "$fails" -ne 0 ]; then
		for f in "$tmp"/*.log; do [ -f "$f" ] && { echo "---- $f"; tail -40 "$f"; }; done
	fi
	[ -n "${TIRD_TEST_KEEP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
wait_up() {   # URL
	for i in $(seq 1 600); do curl -sf "$1/healthz" >/dev/null 2>&1 && return 0; sleep 0.1; done
	return 1
}
# a make of the pack that nothing of this build's make leaks into (MAKEFLAGS
# carries `make check`'s command-line variables, CFLAGS=... among them)
pack_make() { (unset MAKEFLAGS MFLAGS MAKELEVEL CFLAGS; "$MAKE" "$@" CC="$CC"); }
# the files of a folder with their checksums, to see that it stayed as it was
tree_sum() { (cd "$1" && find . -type f -exec cksum {} + | sort); }

port=$(free_port); url=http://127.0.0.1:$port
"$TIRD" --listen 127.0.0.1:$port --db "$tmp/pack.db" --local-workers cpu --model-seed none \
	>"$tmp/tird.log" 2>&1 &
tird_pid=$!; pids="$pids $tird_pid"
wait_up "$url" && pass "tird starts with a local CPU worker" || { fail "tird did not start"; exit 1; }
export TIRD_URL=$url
ctl() { "$TIRCTL" "$@"; }
version=$("$TIRCTL" --version | sed -n 's/^tirctl (tird) //p')

# ---- tune ---------------------------------------------------------------------------------
echo '{"op":"matmul","batch":1,"M":64,"N":48,"K":32}' > "$tmp/mm.json"
echo '{"op":"conv2d","N":1,"C":8,"H":12,"W":12,"K":16,"R":3,"S":3,"stride":2,"pad":1,"layout":"NHWC"}' \
	> "$tmp/c2d.json"
echo '{"op":"depthwise_conv2d","N":1,"C":16,"H":10,"W":10,"R":3,"S":3,"stride":1,"pad":1,"multiplier":1,"layout":"NHWC"}' \
	> "$tmp/dw.json"
echo '{"op":"matmul","M":32,"N":16,"K":24,"epilogue":["bias","relu"]}' > "$tmp/mmr.json"
# a graph as one program; its tensor's name would end a C comment
cat > "$tmp/g.json" <<'EOF'
{"op":"graph","inputs":{"x":{"shape":[8,16]},"b":{"shape":[16]}},
 "nodes":[{"name":"t*/u","op":"add","args":["x","b"]},{"name":"y","op":"relu","args":["t*/u"]}],
 "outputs":["y"]}
EOF
jobs=""
for f in mm c2d dw mmr g; do
	fusion=; [ $f = g ] && fusion="--fusion none"
	j=$(ctl --json tune "$tmp/$f.json" --target cpu --trials 8 --batch 8 $fusion 2>>"$tmp/tune.log" \
		| jq -r .job_id)
	case $j in ''|*[!0-9]*) fail "submit $f.json: $(tail -n 1 "$tmp/tune.log")";; *) jobs="$jobs $j";; esac
done
ndone=0
for j in $jobs; do
	r=$(timeout 300 "$TIRCTL" --json wait "$j" 2>>"$tmp/tune.log")
	if printf '%s' "$r" | jq -e '.state=="done" and .latency_us>0' >/dev/null 2>&1; then
		ndone=$((ndone + 1))
	else
		fail "job $j: $(printf '%s' "$r" | head -c 300)"
	fi
done
[ $ndone = 5 ] && pass "5 workloads tuned on the CPU, 8 trials each ($(( $(date +%s) - t0 )) s so far)" \
	|| fail "tuned $ndone of 5"
curl -sf "$url/v1/best?target=cpu" | jq .best > "$tmp/bests.json"
[ "$(jq length "$tmp/bests.json")" = 5 ] && pass "5 stored bests" \
	|| fail "stored bests: $(jq -c '[.[].workload_key]' "$tmp/bests.json")"
target=$(jq -r '.[0].target' "$tmp/bests.json")

# ---- tirctl pack ----------------------------------------------------------------------------
pk=$tmp/pack
ctl pack --target cpu --out "$pk" >"$tmp/pack.out" 2>"$tmp/pack.err"; rc=$?
[ $rc = 0 ] && grep -q "^packed 5 kernels for $target into $pk\$" "$tmp/pack.out" \
	&& pass "tirctl pack --target cpu: $(cat "$tmp/pack.out")" \
	|| fail "pack: exit $rc $(cat "$tmp/pack.out" "$tmp/pack.err")"
missing=""
for f in tird_pack.h tird_pack.c Makefile tirdpack.pc manifest.json; do
	[ -s "$pk/$f" ] || missing="$missing $f"
done
for fn in $(jq -r '.kernels[].function' "$pk/manifest.json" 2>/dev/null); do
	[ -s "$pk/kernels/$fn.c" ] || missing="$missing kernels/$fn.c"
done
[ -z "$missing" ] && [ "$(ls "$pk/kernels" | wc -l)" = 5 ] \
	&& pass "the pack's files: kernels/NAME.c x5, tird_pack.h, tird_pack.c, Makefile, tirdpack.pc, manifest.json" \
	|| fail "pack files missing:$missing ($(ls -R "$pk" | tr '\n' ' '))"
# every stored best is one kernel of the manifest, as /v1/best says it
jq -e --slurpfile b "$tmp/bests.json" --arg v "$version" --arg t "$target" '. as $m |
	.tird_version == $v and .target == $t and (.created | type) == "number" and
	(.kernels | length) == ($b[0] | length) and
	all($b[0][]; . as $best |
		[$m.kernels[] | select(.workload_key == $best.workload_key)] as $k |
		($k | length) == 1 and $k[0].record_id == $best.record_id and
		$k[0].latency_us == $best.latency_us and $k[0].op == $best.op and
		$k[0].workload == $best.workload and
		$k[0].function == "tird_\($best.op)_\($best.workload_key[0:12])" and
		$k[0].source == "kernels/\($k[0].function).c" and
		($k[0].args | length) > 0 and all($k[0].args[]; .dtype == "float32" and .elem_bytes == 4 and .elems > 0) and
		([$k[0].args[] | select(.role == "output")] | length) == 1)' \
	"$pk/manifest.json" >/dev/null 2>"$tmp/jq.err" \
	&& pass "manifest.json: tird $version, $target, each best's workload, key, record id, latency, function, source, args" \
	|| fail "manifest.json against /v1/best: $(cat "$tmp/jq.err") $(jq -c '.kernels[] | {function, record_id, latency_us}' "$pk/manifest.json")"
grep -q "^Version: $version\$" "$pk/tirdpack.pc" && grep -q "^Libs: -L\${libdir} -ltirdpack\$" "$pk/tirdpack.pc" \
	&& pass "tirdpack.pc: version $version, -ltirdpack" || fail "tirdpack.pc: $(cat "$pk/tirdpack.pc")"
grep -q 't\*\\/u' "$pk/tird_pack.h" && ! grep -q 't\*/u' "$pk/tird_pack.h" \
	&& pass "tird_pack.h: the graph's \"t*/u\" written t*\\/u in its comment" \
	|| fail "tird_pack.h: the comment of the graph: $(grep -n 't\*' "$pk/tird_pack.h")"

# refusals: DIR exists, no CUDA best, bad command lines
before=$(tree_sum "$pk")
ctl pack --target cpu --out "$pk" >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 1 ] && grep -q "exists" "$tmp/err" && [ "$(tree_sum "$pk")" = "$before" ] &&
	[ -z "$(ls -d "$pk".part-* 2>/dev/null)" ] \
	&& pass "a second pack into the same folder: exit 1 ($(cat "$tmp/err")), the folder untouched" \
	|| fail "second pack: exit $rc $(cat "$tmp/err")"
ctl pack --target cuda --out "$tmp/cu" >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 3 ] && grep -q "no stored best on cuda" "$tmp/err" && [ -z "$(ls -d "$tmp"/cu* 2>/dev/null)" ] \
	&& pass "pack --target cuda with no CUDA best: exit 3, $(cat "$tmp/err"), nothing written" \
	|| fail "pack --target cuda: exit $rc $(cat "$tmp/err")"
usage_case() {   # GREP ARGS...: exit 2 with GREP on stderr, nothing written
	want=$1; shift
	ctl pack "$@" >/dev/null 2>"$tmp/err"; rc=$?
	[ $rc = 2 ] && grep -q -- "$want" "$tmp/err" && [ ! -e "$tmp/x" ] \
		&& pass "pack $*: usage error ($(cat "$tmp/err"))" || fail "pack $*: exit $rc $(cat "$tmp/err")"
}
usage_case "unknown argument --bogus" --target cpu --out "$tmp/x" --bogus
usage_case "unknown argument --bogus" --target cpu --bogus 1 --out "$tmp/x"
usage_case "--op needs a value" --target cpu --out "$tmp/x" --op
usage_case "needs --target T and --out DIR" --target cpu
ctl pack --help | grep -q "^usage: tirctl pack --target T" && pass "pack --help" || fail "pack --help"
ctl --json pack --target cpu --op conv2d --out "$tmp/c2" 2>"$tmp/err" >"$tmp/r"; rc=$?
[ $rc = 0 ] && jq -e --arg o "$tmp/c2" --arg t "$target" '.out == $o and .target == $t and .kernels == 1' \
	"$tmp/r" >/dev/null && [ "$(jq -r '.kernels[0].op' "$tmp/c2/manifest.json")" = conv2d ] \
	&& pass "tirctl --json pack --op conv2d: $(cat "$tmp/r")" || fail "--json pack --op conv2d: exit $rc $(cat "$tmp/r" "$tmp/err")"
# an --op twice: each kernel once, and the pack builds
ctl pack --target cpu --op matmul --op matmul --out "$tmp/mm2" >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 0 ] && [ "$(jq '[.kernels[].function] | unique | length' "$tmp/mm2/manifest.json")" = 2 ] &&
	[ "$(jq '.kernels | length' "$tmp/mm2/manifest.json")" = 2 ] &&
	[ "$(jq -r '[.kernels[].op] | unique | join(",")' "$tmp/mm2/manifest.json")" = matmul ] &&
	pack_make -s -C "$tmp/mm2" tird_pack.o >"$tmp/mm2.log" 2>&1 \
	&& pass "pack --op matmul --op matmul: the 2 matmuls once each, tird_pack.c compiles" \
	|| fail "pack --op twice: exit $rc $(cat "$tmp/err") $(tail -5 "$tmp/mm2.log")"

# ---- build the pack, check every kernel ------------------------------------------------------
pack_make -C "$pk" -j2 >"$tmp/make.log" 2>&1; rc=$?
abi=$(sed -n 's/^#define TIRD_PACK_ABI \([0-9][0-9]*\)$/\1/p' "$pk/tird_pack.h")
[ $rc = 0 ] && [ -s "$pk/libtirdpack.a" ] && [ -n "$abi" ] && [ -s "$pk/libtirdpack.so.$abi" ] &&
	[ "$(readlink "$pk/libtirdpack.so")" = "libtirdpack.so.$abi" ] &&
	LC_ALL=C readelf -d "$pk/libtirdpack.so.$abi" | grep -q "SONAME.*\[libtirdpack.so.$abi\]" \
	&& pass "make -C pack (CC=$CC, the pack's flags): libtirdpack.a, libtirdpack.so.$abi (its soname, the header's ABI) and the libtirdpack.so link" \
	|| fail "make -C pack: exit $rc, ABI '$abi' $(ls -l "$pk" | grep libtirdpack) $(tail -20 "$tmp/make.log")"
# each kernel's own function, by the names manifest.json gives (declared by tird_pack.h)
jq -r '"/* from manifest.json: the function of each kernel (tests/pack.sh) */",
	"#include <stddef.h>", "#include \"tird_pack.h\"",
	"extern const char *const pack_named_names[];",
	"extern int (*const pack_named_fns[])(void *const *, void *);",
	"const char *const pack_named_names[] = {", (.kernels[] | "\t\"\(.function)\","), "\tNULL", "};",
	"int (*const pack_named_fns[])(void *const *, void *) = {", (.kernels[] | "\t\(.function),"),
	"\tNULL", "};"' "$pk/manifest.json" > "$tmp/pack_named.c"
# shellcheck disable=SC2086  # the flags are words
$CC ${PACK_TEST_CPPFLAGS:-} -I"$pk" ${PACK_TEST_CFLAGS:-} -o "$tmp/pack_check" \
	"$src/tests/pack_check.c" "$tmp/pack_named.c" "$pk/libtirdpack.a" \
	${PACK_TEST_LDFLAGS:-} $PACK_TEST_LIBS >"$tmp/cc.log" 2>&1; rc=$?
[ $rc = 0 ] && pass "tests/pack_check.c built against tird_pack.h, libtirdpack.a and libtir" \
	|| fail "building pack_check: $(tail -20 "$tmp/cc.log")"
if [ $rc = 0 ]; then
	ASAN_OPTIONS=$check_asan "$tmp/pack_check" >"$tmp/check.log" 2>&1; rc=$?
	cat "$tmp/check.log"
	nok=0
	for fn in $(jq -r '.kernels[].function' "$pk/manifest.json"); do
		grep -q "^ok   $fn " "$tmp/check.log" && nok=$((nok + 1))
	done
	[ $rc = 0 ] && [ $nok = 5 ] && grep -q "^pack_check: 5 kernels, 0 failures" "$tmp/check.log" \
		&& pass "pack_check: the 5 kernels match libtir's reference; dispatch, lookup and errors as documented" \
		|| fail "pack_check: exit $rc, $nok of 5 kernels ok"
fi

# ---- install, pkg-config ------------------------------------------------------------------------
if command -v pkg-config >/dev/null 2>&1; then
	prefix=$tmp/prefix
	pack_make -C "$pk" install PREFIX="$prefix" >"$tmp/install.log" 2>&1; rc=$?
	[ $rc = 0 ] && [ -s "$prefix/include/tird_pack.h" ] && [ -s "$prefix/lib/libtirdpack.a" ] &&
		[ -s "$prefix/lib/libtirdpack.so" ] && grep -q "^prefix=$prefix\$" "$prefix/lib/pkgconfig/tirdpack.pc" \
		&& pass "make install PREFIX=...: header, both libraries, tirdpack.pc with its prefix" \
		|| fail "make install: exit $rc $(tail -10 "$tmp/install.log")"
	export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
	mkey=$(jq -r '.[] | select(.op == "matmul" and (.workload.epilogue | length) == 0) | .workload_key' "$tmp/bests.json")
	cat > "$tmp/tiny.c" <<EOF
/* the packed 64x48x32 matmul on ones: every element is K, exactly */
#include <stdio.h>
#include <string.h>
#include "tird_pack.h"
int main(void)
{
	static float a[64 * 32], b[32 * 48], c[64 * 48];
	for (int i = 0; i < 64 * 32; i++)
		a[i] = 1;
	for (int i = 0; i < 32 * 48; i++)
		b[i] = 1;
	memset(c, 0xff, sizeof c);
	void *args[] = { a, b, c };
	tird_matmul_shape s = { .batch = 1, .M = 64, .N = 48, .K = 32, .dtype = "float32" };
	int rc = tird_matmul(&s, args, NULL);
	int bad = 0;
	for (int i = 0; i < 64 * 48; i++)
		bad += c[i] != 32.0f;
	printf("%d kernels, %s: rc %d, %d wrong\n", tird_kernel_count(),
	       tird_find("$mkey") ? "found" : "not found", rc, bad);
	return rc || bad || !tird_find("$mkey");
}
EOF
	pc="$(pkg-config --cflags --libs tirdpack 2>&1)"
	case " $pc " in
	*" -I$prefix/include "*"-L$prefix/lib -ltirdpack "*) pass "pkg-config --cflags --libs tirdpack: $pc";;
	*) fail "pkg-config: $pc";;
	esac
	# shellcheck disable=SC2046
	$CC -o "$tmp/tiny" "$tmp/tiny.c" $(pkg-config --cflags --libs tirdpack) >"$tmp/tiny.log" 2>&1 &&
		out=$(LD_LIBRARY_PATH=$prefix/lib "$tmp/tiny" 2>&1) &&
		LD_LIBRARY_PATH=$prefix/lib ldd "$tmp/tiny" | grep -q "libtirdpack.so.$abi => $prefix/lib/libtirdpack.so.$abi" \
		&& pass "a plain program by pkg-config, the installed libtirdpack.so: $out" \
		|| fail "pkg-config, shared: $(cat "$tmp/tiny.log") ${out:-}"
	static_libs=$(pkg-config --static --libs tirdpack | sed 's/-ltirdpack/-l:libtirdpack.a/')
	# shellcheck disable=SC2046,SC2086
	$CC -o "$tmp/tiny_static" "$tmp/tiny.c" $(pkg-config --cflags tirdpack) $static_libs \
		>"$tmp/tiny.log" 2>&1 && out=$("$tmp/tiny_static" 2>&1) &&
		! ldd "$tmp/tiny_static" | grep -q libtirdpack \
		&& pass "the same by pkg-config --static, libtirdpack.a and Libs.private: $out" \
		|| fail "pkg-config --static: $(cat "$tmp/tiny.log") ${out:-}"
else
	echo "SKIP: pkg-config not installed: make install and tirdpack.pc not checked"
fi

kill -TERM $tird_pid; wait $tird_pid 2>/dev/null
echo "pack.sh: $(( $(date +%s) - t0 )) s"
echo "$fails failed"
[ "$fails" -eq 0 ]
