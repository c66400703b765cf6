#!/bin/sh
# completion.sh — tirctl's bash completion (client/completion/tirctl): run by
# `make check` from the build directory; needs bash, else it is skipped.
#
# It sources the completion in a bash with the tirctl just built first on
# PATH, completes lines as bash would (COMP_LINE, COMP_POINT, the default
# COMP_WORDBREAKS) and checks the replies: the commands (those of `tirctl
# --help`, all of them), a command's options (tune's, not fuse's), the
# choices of --fusion, --mode, --cost-model and --state, targets with a ':'
# (cuda:sm_8 -> sm_80 sm_86 sm_89), op names (the list equal to
# tuner/ops.def's), files, a value after '=', the global options before a
# command and a command after them; then a few lines in an interactive bash
# (a pty, python3), completed by its readline on TAB.
top=$(pwd)
src=${srcdir:-.}
command -v bash >/dev/null 2>&1 || { echo "SKIP: bash not installed"; exit 77; }
[ -x "$top/client/tirctl" ] || { echo "FAIL: client/tirctl not built"; exit 1; }
ASAN_OPTIONS=${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0; export ASAN_OPTIONS
PATH=$top/client:$PATH bash --norc --noprofile -s "$src" <<'BASH'
src=$1
fails=0
. "$src/client/completion/tirctl" || { echo "FAIL: sourcing the completion"; exit 1; }
complete -p tirctl >/dev/null || { echo "FAIL: no completion registered for tirctl"; exit 1; }

# The replies to LINE (the cursor at its end), sorted, one line.
replies() {
	COMP_LINE=$1
	COMP_POINT=${#1}
	COMPREPLY=()
	_tirctl tirctl
	printf '%s\n' "${COMPREPLY[@]}" | sed '/^$/d' | sort | tr '\n' ' ' | sed 's/ $//'
}
expect() {   # LINE WANT: the replies are exactly WANT (sorted)
	local got want
	got=$(replies "$1")
	want=$(printf '%s\n' $2 | sort | tr '\n' ' ' | sed 's/ $//')
	if [ "$got" = "$want" ]; then
		echo "PASS '$1' -> $got"
	else
		echo "FAIL '$1' -> '$got', expected '$want'"; fails=$((fails + 1))
	fi
}
has() {      # LINE WORD...: each WORD among the replies
	local got w
	got=" $(replies "$1") "
	for w in "${@:2}"; do
		case $got in *" $w "*) ;; *) echo "FAIL '$1' lacks $w (got:$got)"; fails=$((fails + 1)); return ;; esac
	done
	echo "PASS '$1' has ${*:2}"
}
lacks() {    # LINE WORD...: no WORD among the replies
	local got w
	got=" $(replies "$1") "
	for w in "${@:2}"; do
		case $got in *" $w "*) echo "FAIL '$1' offers $w"; fails=$((fails + 1)); return ;; esac
	done
	echo "PASS '$1' offers none of ${*:2}"
}

cmds=$(tirctl --help | awk '/^commands:/ { on = 1; next } /^[^ ]/ { on = 0 } on && /^  [a-z]/ { print $1 }')
[ "$(echo $cmds | wc -w)" -ge 10 ] || { echo "FAIL: tirctl --help lists $(echo $cmds | wc -w) commands"; fails=$((fails + 1)); }
expect "tirctl " "$cmds help"
expect "tirctl tu" "tune"
expect "tirctl w" "wait workers"
expect "tirctl --ser" "--server"
expect "tirctl --server http://127.0.0.1:9 --json st" "status"
expect "tirctl tune x.json --" "--target --trials --batch --cost-model --seed --patience --fusion --wait --timeout --json"
lacks "tirctl tune x.json --" --mode --out --trust
expect "tirctl tune x.json --fusion " "inductor tvm eager measured none"
expect "tirctl tune x.json --cost-model=r" "random"
expect "tirctl fuse g.json --mode " "inductor tvm eager measured"
expect "tirctl jobs --state " "queued running done failed cancelled"
expect "tirctl cancel --" "--json"
expect "tirctl records " "rm"
has "tirctl tune x.json --target " cpu cuda cuda:sm_90
expect "tirctl best conv2d --target cuda:sm_8" "sm_80 sm_86 sm_89"
expect "tirctl tune x.json --target=cuda:sm_9" "sm_90"
ops=$(sed -n 's/^TIR_OP([A-Z0-9_]*, *"\([a-z0-9_]*\)".*/\1/p' "$src/tuner/ops.def")
[ "$(echo $ops | wc -w)" -ge 6 ] || { echo "FAIL: found $(echo $ops | wc -w) ops in tuner/ops.def"; fails=$((fails + 1)); }
expect "tirctl best " "$ops"
expect "tirctl best conv" "conv1d conv2d conv3d conv2d_transpose"
expect "tirctl pack --target cpu --op " "$ops"
expect "tirctl lower $src/examples/gm" "$src/examples/gmm.json"
expect "tirctl --json tune $src/examples/graphs/so" "$src/examples/graphs/softmax.json"
expect "tirctl tune $src/examples/gmm.json --target cpu " ""
expect "tirctl help " "lower"
expect "tirctl lower --trace $src/examples/gm" "$src/examples/gmm.json"
expect "tirctl lower --trace t.json $src/examples/gm" "$src/examples/gmm.json"
expect "tirctl show KEY --trace --s" "--source"
expect "tirctl show KEY --" "--target --tir --trace --source --json"
[ $fails -eq 0 ]
BASH
[ $? -eq 0 ] || exit 1

# The same in an interactive bash, its readline completing on TAB: ':' and
# '=' split words there (COMP_WORDBREAKS), and the line must still come out
# whole.
command -v python3 >/dev/null 2>&1 || { echo "SKIP the interactive bash: no python3"; exit 0; }
PATH=$top/client:$PATH python3 - "$src/client/completion/tirctl" <<'PY'
import os, pty, select, signal, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.environ.update(PS1="$ ", TERM="dumb", INPUTRC="/dev/null")
    os.execvp("bash", ["bash", "--norc", "--noprofile", "-i"])

def give_up(sig, frame):           # never hang make check: 60 s in all
    print("FAIL the interactive bash did not answer in 60 s")
    os.kill(pid, signal.SIGKILL)
    os._exit(1)
signal.signal(signal.SIGALRM, give_up)
signal.alarm(60)

def settle(limit=10.0, until=None):
    """What bash writes until `until` is in it (at most `limit` seconds: a
    loaded machine), or without `until` until it has been quiet a moment."""
    out, end, quiet = b"", time.time() + limit, time.time()
    while time.time() < end:
        if until is not None and until.encode() in out:
            break
        if until is None and out and time.time() - quiet > 0.3:
            break
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try:
                out += os.read(fd, 4096)
            except OSError:
                break
            quiet = time.time()
    return out.decode(errors="replace")

settle(until="$ ")
os.write(fd, b". '%s'; echo sour''ced\n" % sys.argv[1].encode())   # the echo, not the line typed
settle(until="sourced")
fails = 0
for typed, want in [("tirctl best conv2d --target cuda:sm_9", "tirctl best conv2d --target cuda:sm_90 "),
                    ("tirctl tune x.json --cost-model=ra", "tirctl tune x.json --cost-model=random "),
                    ("tirctl tune x.json --fusion me", "tirctl tune x.json --fusion measured "),
                    ("tirctl wo", "tirctl workers ")]:
    os.write(fd, typed.encode() + b"\t")
    line = settle(until=want).replace("\r", "\n").split("\n")[-1]
    # ^U kills the line (a ^C would flush what is typed next), and an echo
    # tells when bash is back at its prompt
    os.write(fd, b"\x15echo do''ne-%d\n" % len(typed))
    settle(until="done-%d" % len(typed))
    if want in line:
        print("PASS interactive '%s<TAB>' -> '%s'" % (typed, want))
    else:
        print("FAIL interactive '%s<TAB>' -> '%s', expected '%s'" % (typed, line, want))
        fails += 1
os.write(fd, b"exit\n")
for _ in range(50):                # 5 s for bash to leave, then it is killed
    settle(0.1)
    if os.waitpid(pid, os.WNOHANG)[0] == pid:
        break
else:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
sys.exit(1 if fails else 0)
PY
