#!/usr/bin/env bash
# install-deps.sh — installs what a fresh Debian 12 needs to build and test tird.
#
#   deploy/install-deps.sh          build and test dependencies
#   deploy/install-deps.sh --bench  also the baselines for benchmarks (OpenBLAS,
#                                   oneDNN), wrk and PyTorch (python3-torch)
#   deploy/install-deps.sh --arm    also what cross-building tird-worker for
#                                   AArch64 and running it under qemu takes:
#                                   the cross gcc, qemu-user-static and the
#                                   arm64 multiarch libraries the worker links
#                                   (adds the arm64 architecture to dpkg); run
#                                   it with qemu-aarch64-static -cpu max, no -L:
#                                   -L /usr/aarch64-linux-gnu pairs the cross
#                                   ld.so with the multiarch libc, and then
#                                   pthread_create never returns
#
# Idempotent: when every package is installed already it does nothing (no
# apt-get at all).  Runs as root, or through sudo.  The CUDA toolkit is
# optional and not installed here (configure finds /usr/local/cuda).
set -euo pipefail

arm=0
pkgs=(build-essential autoconf automake libtool pkg-config
      libmicrohttpd-dev libsqlite3-dev libcjson-dev libxgboost-dev check
      libcurl4-openssl-dev nettle-dev jq curl python3 sqlite3
      libpq-dev postgresql        # the PostgreSQL store backend and tests/postgres.sh
      clang libclang-rt-dev       # the libFuzzer build of tests/fuzz/ (.ci/run)
      chromium                    # tests/dashboard.sh loads the dashboard in it, headless
      python3-jsonschema          # tests/openapi.sh (Debian 12 has no openapi-spec-validator)
      python3-yaml                # tests/deploy.sh parses deploy/compose.yaml and deploy/k8s/
      haproxy                     # tests/deploy_lb.sh runs deploy/haproxy.cfg (not started as a service)
      groff-base man-db           # tests/manpages.sh formats the man pages
      bash-completion             # configure: where tirctl's completion is installed
      libtsan2)                   # gcc's ThreadSanitizer, --enable-tsan (.ci/run; gcc pulls it too)
for arg in "$@"; do
	case $arg in
	--bench) pkgs+=(libopenblas-dev libdnnl-dev wrk python3-torch) ;;
	--arm) arm=1
	       pkgs+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross binutils-aarch64-linux-gnu
	              qemu-user-static libcurl4-openssl-dev:arm64 libcjson-dev:arm64
	              nettle-dev:arm64 pkgconf:arm64 libgomp1:arm64) ;;
	-h|--help) sed -n '2,15p' "$0"; exit 0 ;;
	*) echo "install-deps.sh: unknown option $arg (try --help)" >&2; exit 2 ;;
	esac
done

# NAME is this machine's architecture's package (or an arch: all one), NAME:ARCH
# that architecture's: once arm64 packages are installed beside the native
# ones, `dpkg -s NAME` is ambiguous and fails.
native=$(dpkg --print-architecture)
installed() {
	local name=${1%%:*} want=${1#*:}
	[ "$want" = "$1" ] && want=$native
	dpkg-query -W -f='${Architecture} ${db:Status-Abbrev}\n' "$name" 2>/dev/null |
		grep -Eq "^($want|all) ii"
}
missing=()
for p in "${pkgs[@]}"; do
	installed "$p" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps.sh: all ${#pkgs[@]} packages present"
	exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
	sudo=()
elif command -v sudo >/dev/null 2>&1; then
	sudo=(sudo)
else
	echo "install-deps.sh: missing ${missing[*]}; run as root or install sudo" >&2
	exit 1
fi
echo "install-deps.sh: installing ${missing[*]}"
# the :arm64 packages need the architecture known to dpkg before apt-get update
if [ $arm -eq 1 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
	"${sudo[@]}" dpkg --add-architecture arm64
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
	apt-get install -y -q --no-install-recommends "${missing[@]}"
