#!/bin/sh
# manpages.sh — the man pages (man/) are true to the programs: run by `make
# check` from the build directory.
#
#   tird(8)        every option of `tird --help`, and no other, under OPTIONS
#   tird.conf(5)   every setting of TIRD_CONFIG (daemon/tird.h, the table
#                  daemon/config.c reads), and no other, under SETTINGS
#   tird-worker(8) every option of `tird-worker --help`, and no other
#   tirctl(1)      the global options of `tirctl --help` under OPTIONS; its
#                  commands, one .SS each under COMMANDS, and each command's
#                  options (the .TP tags under its .SS) those of its row
#   ENVIRONMENT    every variable the sources getenv() is named in some page
#
# Each difference is named ("tirctl(1): tune --batch is in --help, not in
# the page").  Then every page must format without a warning under both
# `groff -man -ww -z` and `man -l --warnings` (where man is installed).
# Needs python3 and groff, else it is skipped.
set -u
top=$(pwd)
src=${srcdir:-.}
for t in python3 groff; do
	command -v $t >/dev/null 2>&1 || { echo "SKIP: $t not installed"; exit 77; }
done
for p in daemon/tird daemon/tird-worker client/tirctl; do
	[ -x "$top/$p" ] || { echo "FAIL: $p not built"; exit 1; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tird-man.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
ASAN_OPTIONS=${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0; export ASAN_OPTIONS
"$top/daemon/tird" --help > "$tmp/tird.help" || { echo "FAIL: tird --help"; exit 1; }
"$top/daemon/tird-worker" --help > "$tmp/worker.help" || { echo "FAIL: tird-worker --help"; exit 1; }
"$top/client/tirctl" --help > "$tmp/tirctl.help" || { echo "FAIL: tirctl --help"; exit 1; }

python3 - "$src" "$tmp" <<'PY' || exit 1
import re, sys
src, tmp = sys.argv[1], sys.argv[2]
fails = 0

def fail(msg):
    global fails
    fails += 1
    print("FAIL " + msg)

def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()

def roff_plain(s):
    """The text of a roff line: \- as -, font escapes and quotes gone."""
    s = s.replace("\\-", "-").replace("\\(aq", "'")
    s = re.sub(r"\\f[BIRP]", "", s)
    s = re.sub(r"\\[&|^]", "", s)
    return s.replace('"', "")

def sections(page):
    """{SECTION: [lines]} of a man(7) page."""
    out, cur = {}, None
    for line in read(page).splitlines():
        m = re.match(r'^\.SH\s+"?([^"]+)"?', line)
        if m:
            cur = m.group(1).strip()
            out[cur] = []
        elif cur:
            out[cur].append(line)
    return out

def tags(lines):
    """The tag line of every .TP (the line after it), as plain text."""
    return [roff_plain(lines[i + 1]) for i, l in enumerate(lines[:-1]) if l.startswith(".TP")]

def long_opts(text):
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text))

def compare(what, helpset, pageset, helpname="--help"):
    for o in sorted(helpset - pageset):
        fail(f"{what}: {o} is in {helpname}, not in the page")
    for o in sorted(pageset - helpset):
        fail(f"{what}: {o} is in the page, not in {helpname}")
    if helpset == pageset:
        print(f"PASS {what}: {len(helpset)} the same in {helpname} and the page")

# ---- tird(8): the usage lines and the settings' flags ----------------------
h = read(f"{tmp}/tird.help").splitlines()
helpset = set()
for line in h:
    if line.startswith("usage:") or line.lstrip().startswith("tird "):
        helpset |= long_opts(line) - {"--NAME"}
    m = re.match(r"^\s+(--[a-z][a-z0-9-]*)\s", line)
    if m:
        helpset.add(m.group(1))
page = sections(f"{src}/man/tird.8")
pageset = set()
for t in tags(page.get("OPTIONS", [])):
    pageset |= long_opts(t)
compare("tird(8)", helpset, pageset)

# ---- tird.conf(5): TIRD_CONFIG's names ---------------------------------------
hdr = read(f"{src}/daemon/tird.h")
table = re.search(r"#define TIRD_CONFIG\(X\)(.*?)\n\n", hdr, re.S)
keys = set(re.findall(r"X\((\w+),\s*(?:STR|INT|BOOL)\s*,", table.group(1))) if table else set()
if len(keys) < 10:
    fail(f"tird.conf(5): found {len(keys)} settings in daemon/tird.h's TIRD_CONFIG")
flags = {"--" + k.replace("_", "-") for k in keys}
if not flags <= helpset:
    fail("tird --help lacks the flags " + " ".join(sorted(flags - helpset)))
page = sections(f"{src}/man/tird.conf.5")
pagekeys = {t.split()[1] for t in tags(page.get("SETTINGS", [])) if len(t.split()) > 1}
compare("tird.conf(5)", keys, pagekeys, "TIRD_CONFIG")

# ---- tird-worker(8) ----------------------------------------------------------
helpset = set()
for line in read(f"{tmp}/worker.help").splitlines():
    if line.startswith("usage:") or line.lstrip().startswith("tird-worker "):
        helpset |= long_opts(line)
    m = re.match(r"^\s+(--[a-z][a-z0-9-]*)\s", line)
    if m:
        helpset.add(m.group(1))
page = sections(f"{src}/man/tird-worker.8")
pageset = set()
for t in tags(page.get("OPTIONS", [])):
    pageset |= long_opts(t)
compare("tird-worker(8)", helpset, pageset)

# ---- tirctl(1) ----------------------------------------------------------------
h = read(f"{tmp}/tirctl.help").splitlines()
glob, cmds, part = set(), {}, None
for line in h:
    if line.startswith("usage:") or line.lstrip().startswith("tirctl "):
        glob |= long_opts(line)
        if re.search(r"\btirctl help\b", line):
            cmds["help"] = set()
    elif line == "global options:":
        part = "global"
    elif line == "commands:":
        part = "commands"
    elif line and not line.startswith(" "):
        part = None
    elif part == "global":
        m = re.match(r"^  (--[a-z][a-z0-9-]*)", line)
        if m:
            glob.add(m.group(1))
    elif part == "commands":
        m = re.match(r"^  ([a-z]+)(?: (.*)|$)", line)
        if m:
            cmds[m.group(1)] = long_opts(m.group(2) or "")
if len(cmds) < 10:
    fail(f"tirctl --help: found {len(cmds)} commands")
page = sections(f"{src}/man/tirctl.1")
pageglob = set()
for t in tags(page.get("OPTIONS", [])):
    pageglob |= long_opts(t)
compare("tirctl(1) global options", glob, pageglob)
pagecmds, cur, lines = {}, None, page.get("COMMANDS", [])
for i, line in enumerate(lines):
    if line.startswith(".SS"):
        cur = roff_plain(line[3:]).split()[0]
        pagecmds[cur] = set()
    elif cur and i > 0 and lines[i - 1].startswith(".TP"):
        pagecmds[cur] |= long_opts(roff_plain(line))
compare("tirctl(1) commands", set(cmds), set(pagecmds))
for c in sorted(set(cmds) & set(pagecmds)):
    compare(f"tirctl(1) {c}", cmds[c], pagecmds[c])

# ---- the environment: every getenv() of the programs' sources is in the
# ENVIRONMENT section of some page
import glob
used = set()
for d in ("client", "daemon", "tuner", "costmodel", "schema"):
    for f in glob.glob(f"{src}/{d}/**/*.c", recursive=True):
        used |= set(re.findall(r'getenv\("([A-Z_][A-Z0-9_]*)"\)', read(f)))
described = set()
for pg in ("tirctl.1", "tird.8", "tird-worker.8", "tird.conf.5"):
    env = sections(f"{src}/man/{pg}").get("ENVIRONMENT", [])
    described |= set(re.findall(r"\b[A-Z_][A-Z0-9_]+\b", " ".join(roff_plain(l) for l in env)))
if len(used) < 3:
    fail(f"found {len(used)} getenv() calls in the sources")
for v in sorted(used - described):
    fail(f"${v} is read by the programs (getenv) but no page's ENVIRONMENT names it")
if used <= described:
    print(f"PASS the {len(used)} environment variables the programs read are in the pages")
sys.exit(1 if fails else 0)
PY
rc=0

# ---- every page formats without a warning -------------------------------------
for p in tirctl.1 tird.conf.5 tird.8 tird-worker.8; do
	page=$src/man/$p
	groff -man -ww -z "$page" > "$tmp/groff.out" 2>&1
	if [ -s "$tmp/groff.out" ]; then
		echo "FAIL $p: groff -man -ww warns:"; cat "$tmp/groff.out"; rc=1
	else
		echo "PASS $p: groff -man -ww -z, no warning"
	fi
	if command -v man >/dev/null 2>&1; then
		LC_ALL=C MANWIDTH=80 man -l --warnings "$page" 2>"$tmp/man.err" >"$tmp/man.out"
		if [ -s "$tmp/man.err" ] || ! grep -q . "$tmp/man.out"; then
			echo "FAIL $p: man -l --warnings:"; cat "$tmp/man.err"; rc=1
		else
			echo "PASS $p: man -l --warnings renders $(wc -l < "$tmp/man.out") lines, no warning"
		fi
	fi
done
exit $rc
