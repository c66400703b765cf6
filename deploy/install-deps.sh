#!/usr/bin/env bash
# install-deps.sh — installs what a fresh Debian 12 needs to build and test tird.
#
#   deploy/install-deps.sh          build and test dependencies
#   deploy/install-deps.sh --bench  also the baselines for benchmarks (OpenBLAS,
#                                   oneDNN), wrk and PyTorch (python3-torch)
#
# Idempotent: when every package is installed already it does nothing (no
# apt-get at all).  Runs as root, or through sudo.  The CUDA toolkit is
# optional and not installed here (configure finds /usr/local/cuda).
set -euo pipefail

pkgs=(build-essential autoconf automake libtool pkg-config
      libmicrohttpd-dev libsqlite3-dev libcjson-dev libxgboost-dev check
      libcurl4-openssl-dev nettle-dev jq curl python3 sqlite3
      clang libclang-rt-dev)      # the libFuzzer build of tests/fuzz/ (.ci/run)
for arg in "$@"; do
	case $arg in
	--bench) pkgs+=(libopenblas-dev libdnnl-dev wrk python3-torch) ;;
	-h|--help) sed -n '2,10p' "$0"; exit 0 ;;
	*) echo "install-deps.sh: unknown option $arg (try --help)" >&2; exit 2 ;;
	esac
done

missing=()
for p in "${pkgs[@]}"; do
	dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed' || missing+=("$p")
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
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
	apt-get install -y -q --no-install-recommends "${missing[@]}"
