# lib.sh — what the shell tests share (POSIX sh; sourced from the build
# directory as `. "$src/tests/lib.sh"`, src the source tree):
#   free_port          a free loopback TCP port (one the kernel gave to a
#                      socket bound to port 0, then released)
#   wait_up URL [S]    true once URL/healthz answers 200, within S seconds
#                      (60), polling every 0.1 s
free_port() {
	python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'
}

wait_up() {
	n=$(( ${2:-60} * 10 ))
	while [ "$n" -gt 0 ]; do
		curl -sf "$1/healthz" >/dev/null 2>&1 && return 0
		sleep 0.1
		n=$((n - 1))
	done
	return 1
}
