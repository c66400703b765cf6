#!/bin/sh
# dashboard.sh — the dashboard (GET /, /ui/...) in a real browser: headless
# Chromium (Debian's chromium package) against a real tird on a loopback
# port with a temporary database (run by `make check` from the build
# directory; skipped when chromium, curl, jq or python3 is missing).
#
# A tird-worker tunes three tiny CPU workloads: a matmul under the XGBoost
# model, another under the random model, and a small softmax graph as one
# program; then a worker whose compiler is `false` measures two trials
# more of the first matmul (a fourth job), both build_errors.  The jobs page is loaded while they run and left open until they
# end (it long-polls the active job), so it must have drawn each job again
# as it changed: queued or running, then done, without a reload.  Then
# every page is loaded again and compared with the JSON API it draws from:
#   jobs      a row per job, its state, trials, best latency as stored;
#   job       the tuning curve of each job: one dot per record of its
#             workload and target, for both models, the job's own blue and
#             the others' grey, and a cross per failed one (the fourth job's);
#   cache     a row per stored best with its latency, GFLOP/s, GB/s and
#             intensity as /v1/best and /v1/roofline give them, and a roofline
#             per target with one dot per best;
#   workload  the best kernel's source, the program and the trace, verbatim;
#   workers   a row per worker and per cost model, their figures;
#   graph     the fusion plan (TVM's rules) of the stored graph: one box per
#             kernel of POST /v1/fuse's answer;
# and with protect_reads on (a second tird on the same database), the page
# asks for the token while the data routes answer 401 without it, and shows
# the cache with it.  The pages are loaded in one Chromium driven by its
# DevTools protocol (tests/dashboard_browser.py), which waits for each to
# say it has drawn.  A screenshot of each page is saved in
# $DASHBOARD_SHOTS (default tests/dashboard-shots in the build directory).
set -u
top=$(pwd)
here=$(cd "$(dirname "$0")" && pwd)
TIRD=$top/daemon/tird
WORKER=$top/daemon/tird-worker
TIRCTL=$top/client/tirctl
for t in curl jq python3; do
	command -v $t >/dev/null 2>&1 || { echo "SKIP: $t not installed"; exit 77; }
done
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROMIUM" ] || { echo "SKIP: chromium not installed (apt-get install chromium)"; exit 77; }
[ -x "$TIRD" ] && [ -x "$WORKER" ] && [ -x "$TIRCTL" ] || { echo "FAIL: binaries not built"; exit 1; }
ASAN_OPTIONS=${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0; export ASAN_OPTIONS
shots=${DASHBOARD_SHOTS:-$top/tests/dashboard-shots}
mkdir -p "$shots"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tird-dash.XXXXXX")
fails=0
pids=""
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	if [ "$fails" -ne 0 ]; then
		for f in "$tmp"/*.log; do echo "---- $f"; tail -30 "$f"; done
	fi
	[ -n "${TIRD_TEST_KEEP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
wait_up() {
	for i in $(seq 1 600); do curl -sf "$1/healthz" >/dev/null 2>&1 && return 0; sleep 0.1; done
	return 1
}
# chromium's own profile, crash dumps and caches stay in $tmp
export HOME=$tmp XDG_CONFIG_HOME=$tmp/.config XDG_CACHE_HOME=$tmp/.cache
# Pages are queued (page) and then loaded in one browser (load_pages,
# tests/dashboard_browser.py: a start of Chromium takes seconds here).
page() {      # URL WAIT DOM_FILE SHOT_NAME|- [TIMEOUT_S]: WAIT a JavaScript condition
	png=-
	[ "$4" = - ] || png="$shots/2026-12-02-dashboard-$4.png"
	printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$png" "${5:-60}" >> "$tmp/pages"
}
load_pages() {
	timeout 900 python3 "$here/dashboard_browser.py" "$CHROMIUM" "$tmp/profile" < "$tmp/pages" \
		2>>"$tmp/chromium.log" || fail "the browser: $(tail -3 "$tmp/chromium.log" | tr '\n' ';')"
	for png in $(cut -f4 "$tmp/pages" | grep -v '^-$'); do
		[ "$(head -c 4 "$png" | tail -c 3)" = PNG ] && pass "screenshot $(basename "$png")" ||
			fail "screenshot $png: none"
	done
	rm -f "$tmp/pages"
}
READY='document.body.dataset.ready == "1"'

port=$(free_port); url=http://127.0.0.1:$port
"$TIRD" --listen 127.0.0.1:$port --db "$tmp/d.db" --local-workers none >"$tmp/tird.log" 2>&1 &
tird_pid=$!; pids="$pids $tird_pid"
wait_up "$url" || { fail "tird did not start"; exit 1; }
"$WORKER" --server "$url" --target cpu --name dash-worker >"$tmp/worker.log" 2>&1 &
worker_pid=$!; pids="$pids $worker_pid"

cat > "$tmp/mm1.json" <<'EOF'
{"op": "matmul", "M": 16, "N": 16, "K": 16}
EOF
cat > "$tmp/mm2.json" <<'EOF'
{"op": "matmul", "M": 8, "N": 24, "K": 16}
EOF
cat > "$tmp/softmax.json" <<'EOF'
{"op": "graph", "inputs": {"x": {"shape": [16, 64]}},
 "nodes": [
   {"name": "mx", "op": "amax", "args": ["x"], "dim": -1, "keepdim": true},
   {"name": "sh", "op": "sub",  "args": ["x", "mx"]},
   {"name": "ex", "op": "exp",  "args": ["sh"]},
   {"name": "sm", "op": "sum",  "args": ["ex"], "dim": -1, "keepdim": true},
   {"name": "y",  "op": "div",  "args": ["ex", "sm"]}],
 "outputs": ["y"]}
EOF
C="$TIRCTL --server $url"
j1=$($C --json tune "$tmp/mm1.json" --target cpu --trials 6 --batch 3 | jq -r .job_id)
j2=$($C --json tune "$tmp/mm2.json" --target cpu --trials 4 --batch 2 --cost-model random --seed 7 |
	jq -r .job_id)
j3=$($C --json tune "$tmp/softmax.json" --target cpu --trials 2 --batch 2 --fusion none | jq -r .job_id)
[ -n "$j1" ] && [ -n "$j2" ] && [ -n "$j3" ] && pass "three jobs submitted ($j1 $j2 $j3)" ||
	{ fail "submitting the jobs: $j1 $j2 $j3"; exit 1; }

# ---- the checks: the DOM a page drew against the JSON it drew from -------------------
cat > "$tmp/check.py" <<'EOF'
import json, sys
from html.parser import HTMLParser

class Node:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent, self.kids, self.text = tag, dict(attrs), parent, [], []
    def cls(self):
        return self.attrs.get("class", "").split()
    def all_text(self):
        return "".join(self.text)
    def find(self, tag=None, cls=None, **attrs):
        out = []
        for k in self.kids:
            if ((tag is None or k.tag == tag) and (cls is None or cls in k.cls()) and
                    all(k.attrs.get(a.replace("_", "-")) == v for a, v in attrs.items())):
                out.append(k)
            out += k.find(tag, cls, **attrs)
        return out

VOID = {"meta", "link", "br", "img", "input", "hr"}
class Tree(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("root", {}, None)
        self.cur = self.root
    def handle_starttag(self, tag, attrs):
        n = Node(tag, attrs, self.cur)
        self.cur.kids.append(n)
        if tag not in VOID:
            self.cur = n
    def handle_startendtag(self, tag, attrs):
        self.cur.kids.append(Node(tag, attrs, self.cur))
    def handle_endtag(self, tag):
        n = self.cur
        while n is not self.root and n.tag != tag:
            n = n.parent
        if n is not self.root:
            self.cur = n.parent
    def handle_data(self, data):
        n = self.cur
        while n is not None:
            n.text.append(data)
            n = n.parent

def dom(path):
    t = Tree()
    t.feed(open(path, encoding="utf-8").read())
    return t.root

def load(path):
    return json.load(open(path))

problems = []
def expect(cond, what):
    if not cond:
        problems.append(what)

def same(a, b):
    """a cell's data-v against a stored figure: equal as numbers, or both absent"""
    if b is None:
        return a in ("", None)
    try:
        return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(b)))
    except (TypeError, ValueError):
        return str(a) == str(b)

def cell(row, key):
    c = row.find(data_k=key)
    return c[0].attrs.get("data-v") if c else None

def shown(row, key, value):
    """the text shown is the figure, rounded to 4 significant digits"""
    c = row.find(data_k=key)
    if not c or value is None:
        return True
    t = c[0].all_text().replace(",", "")
    return abs(float(t) - float("%.4g" % value)) <= 1e-6 * max(1.0, abs(value))

def ready(root, want="1"):
    body = root.find("body")
    expect(body and body[0].attrs.get("data-ready") == want,
           "the page did not finish drawing (data-ready %r)" % (body[0].attrs.get("data-ready") if body else None))

page, args = sys.argv[1], sys.argv[2:]
if page == "jobs":
    root, jobs = dom(args[0]), load(args[1])["jobs"]
    ready(root)
    rows = [r for r in root.find("tr") if "data-job" in r.attrs]
    expect(len(rows) == len(jobs), "jobs: %d rows for %d jobs" % (len(rows), len(jobs)))
    for j in jobs:
        r = [x for x in rows if x.attrs["data-job"] == str(j["job_id"])]
        if not r:
            problems.append("jobs: no row for job %d" % j["job_id"]); continue
        r = r[0]
        for k in ("state", "trials_done", "trials", "best_us"):
            expect(same(cell(r, k), j[k]), "jobs: job %d %s shows %r, stored %r" % (j["job_id"], k, cell(r, k), j[k]))
        expect(shown(r, "best_us", j["best_us"]), "jobs: job %d best_us text" % j["job_id"])
    if len(args) > 2:    # the live check: every job seen changing, drawn again each time
        upd = root.find(id="updates")
        n = int(upd[0].attrs["data-updates"]) if upd else 0
        expect(n >= 3, "jobs: drawn %d times while the jobs ran" % n)
        worker, by = args[3], []
        for r in rows:
            states = r.attrs.get("data-seen", "").split()
            expect(states[-1:] == ["done"] and len(states) >= 2,
                   "jobs: job %s seen as %s, not active then done" % (r.attrs["data-job"], states))
            by += r.attrs.get("data-measured-by", "").split()
        # a batch takes seconds here and the page looks every second, but a
        # job of one short batch may be missed: the worker of some job is seen
        expect(by and set(by) == {worker}, "jobs: seen measured by %s, the worker is %s" % (by, worker))
        print("measured by %s seen on %d jobs" % (worker, len(by)))
elif page == "job":
    root, recs, job = dom(args[0]), load(args[1])["records"], int(args[2])
    ready(root)
    svg = root.find("svg", cls="curve")
    expect(len(svg) == 1, "job: %d curves" % len(svg))
    if svg:
        pts = svg[0].find(cls="pt")
        bad = [r for r in recs if r["status"] != "ok"]
        expect(len(pts) == len(recs) == int(svg[0].attrs["data-points"]),
               "job: %d dots (data-points %s) for %d records" % (len(pts), svg[0].attrs["data-points"], len(recs)))
        expect(len(svg[0].find(cls="fail")) == len(bad), "job: %d crosses for %d failed records" %
               (len(svg[0].find(cls="fail")), len(bad)))
        mine = [r for r in recs if r["status"] == "ok" and r.get("job_id") == job]
        expect(len(svg[0].find(cls="ok")) == len(mine) and
               len(svg[0].find(cls="other")) == len(recs) - len(bad) - len(mine),
               "job: %d own dots, %d others' for %d own ok records of %d" %
               (len(svg[0].find(cls="ok")), len(svg[0].find(cls="other")), len(mine), len(recs)))
        expect(len(svg[0].find(cls="best")) == (1 if len(bad) < len(recs) else 0),
               "job: a best-so-far line where there is no best, or none where there is")
    print("records %d, failed %d, this job's %d" % (len(recs), len([r for r in recs if r["status"] != "ok"]),
                                                    len([r for r in recs if r.get("job_id") == job])))
elif page == "cache":
    root, best, roof = dom(args[0]), load(args[1])["best"], load(args[2])["targets"]
    ready(root)
    rows = [r for t in root.find("table", cls="cache") for r in t.find("tr") if "data-key" in r.attrs]
    expect(len(rows) == len(best), "cache: %d rows for %d bests" % (len(rows), len(best)))
    pts = {(p["workload_key"], t["target"]): p for t in roof for p in t["points"]}
    for b in best:
        r = [x for x in rows if x.attrs["data-key"] == b["workload_key"] and x.attrs["data-target"] == b["target"]]
        if not r:
            problems.append("cache: no row for %s" % b["workload_key"]); continue
        p = pts.get((b["workload_key"], b["target"]), {})
        expect(p.get("bytes", 0) > 0, "cache: no roofline point for %s" % b["workload_key"][:12])
        for k, v in (("latency_us", b["latency_us"]), ("gflops", b["gflops"]), ("trials", b["trials"]),
                     ("gbps", p.get("gbps")), ("intensity", p.get("intensity"))):
            expect(same(cell(r[0], k), v), "cache: %s %s shows %r, stored %r" % (b["workload_key"][:12], k, cell(r[0], k), v))
            expect(shown(r[0], k, v), "cache: %s %s text" % (b["workload_key"][:12], k))
    for t in roof:
        svg = root.find("svg", cls="roofline", data_target=t["target"])
        n_best = len([b for b in best if b["target"] == t["target"]])
        expect(len(svg) == 1 and len(svg[0].find("circle", cls="pt")) == len(t["points"]) == n_best,
               "cache: roofline of %s: %s dots, %d points, %d bests" %
               (t["target"], len(svg[0].find("circle", cls="pt")) if svg else "no plot", len(t["points"]), n_best))
        expect(t["nominal"] and t["basis"].startswith("nominal"), "roofline: %s not named nominal" % t["target"])
elif page == "workload":
    root, w = dom(args[0]), load(args[1])
    ready(root)
    for b in w["best"]:
        for cls, want in (("source", b["source"]), ("tir", b["tir"])):
            pre = root.find("pre", cls=cls, data_target=b["target"])
            expect(pre and pre[0].all_text() == want, "workload: the %s on %s is not tird's" % (cls, b["target"]))
        pre = root.find("pre", cls="trace", data_target=b["target"])
        expect(pre and json.loads(pre[0].all_text()) == b["trace"], "workload: the trace differs")
    expect(w["best"] and w["best"][0].get("source", "").strip(), "workload: no kernel source")
elif page == "workers":
    root, ws, ms = dom(args[0]), load(args[1])["workers"], load(args[2])["models"]
    ready(root)
    rows = [r for r in root.find("tr") if "data-worker" in r.attrs]
    expect(len(rows) == len(ws), "workers: %d rows for %d workers" % (len(rows), len(ws)))
    for w in ws:
        r = [x for x in rows if x.attrs["data-worker"] == w["worker_id"]]
        expect(r and cell(r[0], "state") == w["state"], "workers: %s state" % w["worker_id"])
    rows = [r for t in root.find("table", cls="models") for r in t.find("tr") if "data-target" in r.attrs]
    expect(len(rows) == len(ms) >= 1, "models: %d rows for %d models" % (len(rows), len(ms)))
    for m in ms:
        r = [x for x in rows if x.attrs["data-target"] == m["target"]]
        for k in ("rows", "trained_rows", "pairwise_accuracy", "recent_pairwise_accuracy"):
            expect(r and same(cell(r[0], k), m.get(k)), "models: %s %s shows %r, given %r" %
                   (m["target"], k, cell(r[0], k) if r else None, m.get(k)))
elif page == "graph":
    root, plan = dom(args[0]), load(args[1])
    ready(root)
    svg = root.find("svg", cls="plan")
    boxes = svg[0].find("g", cls="kernel") if svg else []
    expect(len(boxes) == len(plan["kernels"]) >= 2, "graph: %d boxes for %d kernels" % (len(boxes), len(plan["kernels"])))
    for b, k in zip(boxes, plan["kernels"]):
        texts = [t.all_text() for t in b.find("text")]
        expect(b.attrs.get("data-name") == k["name"] and all(n in texts for n in k["nodes"]),
               "graph: box %s does not list %s" % (b.attrs.get("data-name"), k["nodes"]))
elif page == "login":
    root = dom(args[0])
    ready(root, "login")
    form = root.find("form", id="login")
    expect(form and "hidden" not in form[0].attrs and root.find("input", id="token"),
           "login: no token form shown")
    expect(not root.find("table"), "login: data shown without a token")
else:
    problems.append("no check for page " + page)
for p in problems:
    print(p)
sys.exit(1 if problems else 0)
EOF
check() {     # NAME PAGE FILES...: runs the check, PASS or FAIL with its findings
	name=$1; shift
	if out=$(python3 "$tmp/check.py" "$@" 2>&1); then
		pass "$name${out:+ ($out)}"
	else
		fail "$name: $(echo "$out" | head -5 | tr '\n' ';')"
	fi
}

# ---- live: the jobs page open while the jobs run, drawn again as each changes --------
all_done='(() => { const r = [...document.querySelectorAll("tr[data-job]")]; return r.length == 3 && r.every(x => x.querySelector("[data-k=state]").dataset.v == "done"); })()'
# a screenshot once a row shows the worker measuring it (or all are done),
# then the same page left open until every job is done
measuring='!!document.querySelector("tr[data-job] [data-k=worker][data-v^=w-]") || '"$all_done"
page "$url/" "$measuring" "$tmp/live0.html" jobs-live 600
page = "$all_done" "$tmp/live.html" - 600
load_pages
for j in $j1 $j2 $j3; do timeout 300 $C wait "$j" >/dev/null 2>&1 || fail "job $j did not end done"; done
curl -s "$url/v1/jobs" > "$tmp/jobs.json"
wid=$(curl -s "$url/v1/workers" | jq -r '.workers[] | select(.state == "live") | .worker_id')
check "the jobs page, open while the jobs ran, drew each as it changed until done, and its worker" \
	jobs "$tmp/live.html" "$tmp/jobs.json" live "$wid"

# ---- failed candidates: a worker whose C compiler is `false` builds none --------------
kill -TERM $worker_pid; wait $worker_pid 2>/dev/null      # it leaves: gone at once
"$WORKER" --server "$url" --target cpu --name no-compiler --cc false >"$tmp/worker2.log" 2>&1 &
worker_pid=$!; pids="$pids $worker_pid"
# two trials more of the first matmul: its curve holds job 1's records too
j4=$($C --json tune "$tmp/mm1.json" --target cpu --trials 8 --batch 2 | jq -r .job_id)
timeout 120 $C wait "$j4" >/dev/null 2>&1
n4=$(curl -s "$url/v1/records" | jq --argjson j "$j4" '[.records[] | select(.job_id == $j and .status == "build_error")] | length')
[ "$n4" = 2 ] && pass "job $j4: 2 candidates, both build_error" || fail "job $j4: $n4 build errors"

# ---- every page, against the JSON API ------------------------------------------------
curl -s "$url/v1/jobs" > "$tmp/jobs.json"
page "$url/ui/jobs" "$READY" "$tmp/jobs.html" jobs
for j in $j1 $j2 $j4; do
	doc=$(curl -s "$url/v1/jobs/$j")
	key=$(echo "$doc" | jq -r .workload_key); tg=$(echo "$doc" | jq -r .target)
	tgq=$(jq -rn --arg t "$tg" '$t|@uri')      # '+' in a query is a space
	curl -s "$url/v1/records?workload=$key&target=$tgq" > "$tmp/rec$j.json"
	echo "$doc" | jq -r .search.cost_model > "$tmp/model$j"
	shot=-; [ "$j" = "$j4" ] && shot=job
	page "$url/ui/job?id=$j" "$READY" "$tmp/job$j.html" $shot
done
curl -s "$url/v1/best" > "$tmp/best.json"
curl -s "$url/v1/roofline" > "$tmp/roof.json"
[ "$(jq '.best | length' "$tmp/best.json")" = 3 ] && pass "three bests stored" || fail "bests: $(cat "$tmp/best.json")"
rc=$(curl -s "$url/v1/roofline?target=cpu" | jq '[.targets[].points | length] | add')
rg=$(curl -s "$url/v1/roofline?target=cuda" | jq '.targets | length')
[ "$rc $rg" = "3 0" ] && pass "GET /v1/roofline?target=cpu: 3 points; cuda: no target" ||
	fail "GET /v1/roofline by target: cpu $rc points, cuda $rg targets"
page "$url/ui/cache" "$READY" "$tmp/cache.html" cache
key1=$(curl -s "$url/v1/jobs/$j1" | jq -r .workload_key)
curl -s "$url/v1/workloads/$key1?include=tir,source" > "$tmp/wl.json"
page "$url/ui/workload?key=$key1" "$READY" "$tmp/wl.html" workload
curl -s "$url/v1/workers" > "$tmp/workers.json"
curl -s "$url/v1/models" > "$tmp/models.json"
jq -e '.models[0].rows > 0 and .models[0].last_trained > 0 and
	.models[0].pairwise_accuracy >= 0 and .models[0].pairwise_accuracy <= 1' "$tmp/models.json" >/dev/null &&
	pass "GET /v1/models: rows, last trained, ranking accuracy" || fail "GET /v1/models: $(cat "$tmp/models.json")"
page "$url/ui/workers" "$READY" "$tmp/workers.html" workers
key3=$(curl -s "$url/v1/jobs/$j3" | jq -r .workload_key)
curl -s "$url/v1/workloads/$key3" | jq '{workload: .workload, mode: "tvm"}' > "$tmp/fuse-req.json"
curl -s -X POST -H 'Content-Type: application/json' --data @"$tmp/fuse-req.json" "$url/v1/fuse" > "$tmp/plan.json"
page "$url/ui/graph?key=$key3&mode=tvm" "$READY" "$tmp/graph.html" graph
load_pages

check "jobs page: a row per job with its stored state, trials and best" jobs "$tmp/jobs.html" "$tmp/jobs.json"
for j in $j1 $j2 $j4; do
	check "job $j's curve ($(cat "$tmp/model$j")): a dot per record" job "$tmp/job$j.html" "$tmp/rec$j.json" "$j"
done
check "cache page: the stored figures, a roofline dot per best" cache "$tmp/cache.html" "$tmp/best.json" "$tmp/roof.json"
check "workload page: tird's source, program and trace" workload "$tmp/wl.html" "$tmp/wl.json"
check "workers page: each worker and cost model" workers "$tmp/workers.html" "$tmp/workers.json" "$tmp/models.json"
check "graph page: a box per kernel of the plan" graph "$tmp/graph.html" "$tmp/plan.json"

code=$(curl -s -o /dev/null -w '%{http_code}' "$url/ui/nothing")
[ "$code" = 404 ] && pass "an unknown page: 404" || fail "an unknown page: $code"

# ---- protect_reads: the page asks for the token; the data stays protected ------------
kill -TERM $tird_pid; wait $tird_pid 2>/dev/null
echo "dash-token-0123456789" > "$tmp/token"
"$TIRD" --listen 127.0.0.1:$port --db "$tmp/d.db" --local-workers none \
	--token-file "$tmp/token" --protect-reads true >>"$tmp/tird.log" 2>&1 &
tird_pid=$!; pids="$pids $tird_pid"
wait_up "$url" || fail "tird with protect_reads did not start"
a=$(curl -s -o /dev/null -w '%{http_code}' "$url/")
b=$(curl -s -o /dev/null -w '%{http_code}' "$url/v1/roofline")
c=$(curl -s -o /dev/null -w '%{http_code}' "$url/v1/models")
[ "$a $b $c" = "200 401 401" ] && pass "protect_reads: the page is served, its data routes 401" ||
	fail "protect_reads: / $a, /v1/roofline $b, /v1/models $c"
curl -s -H "Authorization: Bearer dash-token-0123456789" "$url/v1/best" > "$tmp/best2.json"
curl -s -H "Authorization: Bearer dash-token-0123456789" "$url/v1/roofline" > "$tmp/roof2.json"
# first without a token, then with one (the page keeps it in the tab)
page "$url/ui/cache" 'document.body.dataset.ready == "login"' "$tmp/login.html" login
page "$url/ui/cache#token=dash-token-0123456789" "$READY" "$tmp/cache2.html" -
load_pages
check "protect_reads: the page asks for the token" login "$tmp/login.html"
check "protect_reads: with the token of a #token= link, the cache page" \
	cache "$tmp/cache2.html" "$tmp/best2.json" "$tmp/roof2.json"
# a new browser (nothing kept): the token typed into the form
curl -s -H "Authorization: Bearer dash-token-0123456789" "$url/v1/jobs" > "$tmp/jobs2.json"
type_token='(() => { const f = document.getElementById("login"); if (f && !f.hidden && document.body.dataset.ready == "login" && !window.typed) { window.typed = 1; document.getElementById("token").value = "dash-token-0123456789"; f.requestSubmit(); } return document.body.dataset.ready == "1"; })()'
page "$url/ui/jobs" 'document.body.dataset.ready == "login"' "$tmp/login2.html" -
page = "$type_token" "$tmp/jobs2.html" -
load_pages
check "protect_reads: with the token typed into the form, the jobs page" jobs "$tmp/jobs2.html" "$tmp/jobs2.json"

echo "$fails failed"
[ "$fails" -eq 0 ]
