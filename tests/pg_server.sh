# pg_server.sh — a throwaway PostgreSQL server on loopback, for the tests
# and benchmarks that need one (sourced by tests/postgres.sh,
# tests/replicas.sh and bench/http_load.sh; POSIX sh).
#
#   pg_find              sets pgbin: the newest /usr/lib/postgresql/*/bin,
#                        else the folder of the initdb on PATH; false, the
#                        reason in pg_why, where initdb or pg_ctl is missing
#                        or (as root) runuser, which the server needs
#   pg_start DIR [OPTS]  initdb and pg_ctl start in DIR (created: data in
#                        DIR/data, log DIR/server.log, socket in DIR) on a
#                        free loopback port; OPTS are more server options
#                        ("-F" turns fsync off).  As root the server runs as
#                        nobody (DIR's parent made traversable).  Sets pgport,
#                        pg (postgresql://tird@127.0.0.1:PORT, trust
#                        authentication, user tird), pg_who and pgver; false,
#                        the reason in pg_why, where it could not start
#   pg_stop DIR [MODE]   pg_ctl stop -m MODE (immediate, the default; fast)
#                        where a server of DIR runs
#   as_server CMD...     CMD as the server's user
as_server() {
	if [ "$(id -u)" = 0 ]; then runuser -u nobody -- "$@"; else "$@"; fi
}

pg_find() {
	pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
	[ -n "$pgbin" ] && [ -x "$pgbin/initdb" ] ||
		pgbin=$(dirname "$(command -v initdb 2>/dev/null || echo /none/initdb)")
	if ! [ -x "$pgbin/initdb" ] || ! [ -x "$pgbin/pg_ctl" ]; then
		pg_why="PostgreSQL's server (initdb, pg_ctl) not installed (Debian: postgresql)"
		return 1
	fi
	if [ "$(id -u)" = 0 ] && ! command -v runuser >/dev/null 2>&1; then
		pg_why="running as root without runuser (the server may not run as root)"
		return 1
	fi
}

pg_start() {
	pg_dir=$1; shift
	if [ "$(id -u)" = 0 ]; then
		chmod 711 "$(dirname "$pg_dir")" && mkdir "$pg_dir" && chown nobody "$pg_dir" ||
			{ pg_why="cannot make $pg_dir for nobody"; return 1; }
		pg_who="nobody (run as root)"
	else
		mkdir "$pg_dir" || { pg_why="cannot make $pg_dir"; return 1; }
		pg_who=$(id -un)
	fi
	pgport=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
	pg=postgresql://tird@127.0.0.1:$pgport
	as_server "$pgbin/initdb" -D "$pg_dir/data" -A trust -U tird -E UTF8 --no-locale --no-sync \
		>"$pg_dir/initdb.log" 2>&1 || { pg_why="initdb: $(tail -3 "$pg_dir/initdb.log")"; return 1; }
	as_server "$pgbin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/server.log" -w -t 60 \
		-o "-c listen_addresses=127.0.0.1 -p $pgport -k $pg_dir $*" start \
		>"$pg_dir/pg_ctl.log" 2>&1 || { pg_why="pg_ctl start: $(tail -3 "$pg_dir/pg_ctl.log")"; return 1; }
	pgver=$("$pgbin/pg_ctl" --version | sed 's/.*(PostgreSQL) \([^ ]*\).*/\1/')
}

pg_stop() {
	[ -f "$1/data/postmaster.pid" ] &&
		as_server "$pgbin/pg_ctl" -D "$1/data" -m "${2:-immediate}" stop >/dev/null 2>&1
	return 0
}
