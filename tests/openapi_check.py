#!/usr/bin/env python3
"""openapi_check.py URL OPENAPI.json TIRD.H GRAPH.json DB — tests/openapi.sh's checks.

Against the tird at URL (started by openapi.sh with its token file and
protect_reads):
  1. the routes: every row of TIRD_ROUTES in TIRD.H is an operation of the
     document, every operation a row (each difference named);
  2. GET /v1/openapi.json answers the document, byte for byte;
  3. traffic on every route, its success and error answers, each answer's
     status one the document lists for that operation and its body valid
     against that status's schema (jsonschema, Draft 2020-12, the schema's
     $refs resolved in the document); an unknown path (404) and a method a
     path does not take (405) against the Error schema;
     last, tables of the database DB renamed under tird: 500 store;
  4. coverage: every operation answered at least one 2xx and one error.
Each failure prints FAIL and a line naming it; exit 1 if any.
"""
import http.client
import json
import re
import sys
import time
import urllib.parse
import warnings

import jsonschema

URL, DOC_PATH, TIRD_H, GRAPH, DB = sys.argv[1:6]
ADMIN = "oa-admin-token-0123456789"
CI = "oa-ci-token-0123456789"          # read, submit
WORKER = "oa-worker-token-0123456789"  # worker
fails = 0
seen = {}                              # (path, method) -> set of statuses


def fail(msg):
    global fails
    fails += 1
    print("FAIL " + msg, flush=True)


def ok(msg):
    print("PASS " + msg, flush=True)


with open(DOC_PATH, "rb") as f:
    doc_bytes = f.read()
doc = json.loads(doc_bytes)

try:                                   # the document itself, where the validator is installed
    from openapi_spec_validator import validate as validate_spec
except ImportError:
    validate_spec = None
if validate_spec:
    try:
        validate_spec(doc)
        ok("the document is valid OpenAPI %s (openapi-spec-validator)" % doc["openapi"])
    except Exception as e:             # its errors have no common base class across versions
        fail("the document is not valid OpenAPI: %s" % str(e).splitlines()[0])
else:
    print("note: openapi-spec-validator not installed: the document's schemas are checked "
          "by jsonschema alone", flush=True)
jsonschema.Draft202012Validator.check_schema(
    {"$defs": doc["components"]["schemas"]})   # every schema is a valid JSON Schema

# ---- schemas by JSON pointer into the document ----------------------------------
try:
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012
    _registry = Registry().with_resource(
        "urn:tird-openapi", Resource(contents=doc, specification=DRAFT202012))

    def validator(pointer):
        return jsonschema.Draft202012Validator({"$ref": "urn:tird-openapi#" + pointer},
                                               registry=_registry)
except ImportError:                    # jsonschema before 4.18 (Debian 12 has 4.10)
    _resolver = jsonschema.RefResolver.from_schema(doc)

    def validator(pointer):
        return jsonschema.Draft202012Validator({"$ref": "#" + pointer}, resolver=_resolver)


def esc(s):
    return s.replace("~", "~0").replace("/", "~1")


def lookup(pointer):
    node = doc
    for part in pointer.lstrip("/").split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


# ---- 1. routes ----------------------------------------------------------------------
with open(TIRD_H, encoding="utf-8") as f:
    hdr = f.read()
table = re.search(r"#define TIRD_ROUTES\(X\)(.*?)\n\n", hdr, re.S)
rows = re.findall(r'X\((GET|POST|DELETE|PUT|HEAD),\s*"([^"]+)"', table.group(1)) if table else []
if len(rows) < 10:
    fail("found %d routes in TIRD_ROUTES of %s" % (len(rows), TIRD_H))
served = {(m.lower(), p) for m, p in rows}
documented = set()
for path, item in doc["paths"].items():
    for method in item:
        if method in ("get", "post", "delete", "put", "head", "patch", "options"):
            documented.add((method, re.sub(r"\{[^}]+\}", "*", path)))
for m, p in sorted(served - documented):
    fail("route %s %s is served (TIRD_ROUTES) but not in the document" % (m.upper(), p))
for m, p in sorted(documented - served):
    fail("%s %s is in the document but tird serves no such route" % (m.upper(), p))
if served == documented:
    ok("the document's %d operations are TIRD_ROUTES' %d rows" % (len(documented), len(rows)))


def template_of(method, path):
    """The document's path template that a concrete path matches, or None."""
    for tpl, item in doc["paths"].items():
        rx = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(tpl)) + "/?$"
        if re.match(rx, path) and method.lower() in item:
            return tpl
    return None


# ---- requests -------------------------------------------------------------------------
u = urllib.parse.urlparse(URL)


def request(method, path, body=None, token=None, headers=None, timeout=90):
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    h = dict(headers or {})
    if token:
        h["Authorization"] = "Bearer " + token
    if body is not None and not isinstance(body, (bytes, str)):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode()
    if body is not None:
        h.setdefault("Content-Type", "application/json")
    conn.request(method, path, body=body, headers=h)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, r.getheader("Content-Type") or "", data


def check(method, path, expect, body=None, token=None, headers=None, what=None, timeout=90):
    """Sends the request, checks the status is `expect` (an int or a set)
    and the answer against the document; returns the parsed JSON or None."""
    t0 = time.time()
    status, ctype, data = request(method, path, body, token, headers, timeout)
    label = "%s %s" % (method, (what or path)[:90])
    if time.time() - t0 > 1:           # long polls, and a loaded machine
        print("  %.1f s: %s" % (time.time() - t0, label), flush=True)
    expected = expect if isinstance(expect, set) else {expect}
    if status not in expected:
        fail("%s: HTTP %d, expected %s: %s" % (label, status, sorted(expected), data[:300]))
    bare = path.split("?")[0]
    tpl = template_of(method, bare)
    parsed = None
    if tpl is None:
        # no operation: an unknown path or a method the path does not take
        pointer = "/components/schemas/Error"
        if status not in (404, 405):
            fail("%s: HTTP %d for a request the document has no operation for" % (label, status))
            return None
    else:
        seen.setdefault((tpl, method.lower()), set()).add(status)
        responses = doc["paths"][tpl][method.lower()]["responses"]
        if str(status) not in responses:
            fail("%s: HTTP %d is not a status the document lists for %s %s (%s)" %
                 (label, status, method, tpl, ", ".join(responses)))
            return None
        pointer = "/paths/%s/%s/responses/%d" % (esc(tpl), method.lower(), status)
        resp = lookup(pointer)
        if "$ref" in resp:
            pointer = resp["$ref"][1:]
            resp = lookup(pointer)
        content = resp.get("content")
        if not content:
            if data:
                fail("%s: HTTP %d has a body, the document says none: %s" % (label, status, data[:100]))
            return None
        mtype = ctype.split(";")[0].strip()
        if mtype not in content:
            fail("%s: Content-Type %s, the document says %s" % (label, ctype, ", ".join(content)))
            return None
        pointer += "/content/%s/schema" % esc(mtype)
        if mtype != "application/json":
            validator(pointer).validate(data.decode("utf-8"))
            return data.decode("utf-8")
    try:
        parsed = json.loads(data)
    except ValueError as e:
        fail("%s: HTTP %d, the body is not JSON (%s): %s" % (label, status, e, data[:100]))
        return None
    errors = sorted(validator(pointer).iter_errors(parsed), key=lambda e: list(e.absolute_path))
    for e in errors[:5]:
        if e.context:                  # oneOf / anyOf: the branch that came closest
            e = jsonschema.exceptions.best_match(e.context)
        fail("%s: HTTP %d body against %s: at %s: %s" %
             (label, status, pointer, "/".join(map(str, e.absolute_path)) or "(top)",
              e.message[:300]))
    return parsed


# ---- 2. the document served -------------------------------------------------------------
t0 = time.time()
for _ in range(600):                   # tird makes its cost models first (seconds under ASan)
    try:
        status, ctype, data = request("GET", "/healthz")
        if status == 200:
            break
    except OSError:
        pass
    time.sleep(0.1)
print("  tird answered /healthz after %.1f s" % (time.time() - t0), flush=True)
t0 = time.time()
status, ctype, data = request("GET", "/v1/openapi.json")
if status == 200 and data == doc_bytes:
    ok("GET /v1/openapi.json answers daemon/openapi.json byte for byte")
else:
    fail("GET /v1/openapi.json: HTTP %d, %d bytes, not the file's %d" % (status, len(data), len(doc_bytes)))

# ---- 3. traffic ---------------------------------------------------------------------------
many = "/?" + "&".join("p%d=1" % i for i in range(65))     # 65 query parameters: 414
big = {"X-Filler": "x" * 17000}                             # headers over 16384 bytes: 431
health = check("GET", "/healthz", 200)
cpu = health["cpu"] if health else "cpu:x86_64"
check("GET", "/healthz" + many, 414, what="/healthz?65 parameters")
check("GET", "/healthz", 431, headers=big, what="/healthz with 17 kB of headers")
check("GET", "/v1/openapi.json", 200)
check("GET", "/v1/openapi.json" + many, 414, what="/v1/openapi.json?65 parameters")
check("GET", "/metrics", 200, token=CI)
check("GET", "/metrics", 401)
check("GET", "/v1/nowhere", 404, token=ADMIN)
check("DELETE", "/healthz", 405)

# a worker by hand
check("POST", "/v1/workers", 401, {"target": cpu})
check("POST", "/v1/workers", 403, {"target": cpu}, token=CI)
check("POST", "/v1/workers", 400, {"target": "cpu:sparc"}, token=WORKER)
check("POST", "/v1/workers", 413, {"target": cpu, "name": "x" * 5000}, token=WORKER,
      what="/v1/workers with a 5 kB body")
reg = check("POST", "/v1/workers", 201, {"target": cpu, "name": "openapi"}, token=WORKER)
wid = reg["worker_id"] if reg else "w-none"
W = "/v1/workers/" + wid

# jobs
mm16 = {"op": "matmul", "M": 16, "N": 16, "K": 16}
job = {"workload": mm16, "target": "cpu", "trials": 4, "batch": 4,
       "search": {"cost_model": "random", "seed": 1}}
check("POST", "/v1/jobs", 401, job)
check("POST", "/v1/jobs", 403, job, token=WORKER)
check("POST", "/v1/jobs", 400, '{"workload":', token=CI, what="/v1/jobs with bad JSON")
check("POST", "/v1/jobs", 400, {"workload": {"op": "conv2d", "N": 1}, "target": "cpu"}, token=CI)
check("POST", "/v1/jobs", 400, dict(job, search={"cost_model": "best"}), token=CI)
check("POST", "/v1/jobs", 413, dict(job, pad="x" * 5000), token=CI, what="/v1/jobs with a 5 kB body")
a = check("POST", "/v1/jobs", 201, job, token=CI)
aid = a["job_id"] if a else 0
j = check("POST", "/v1/jobs", 200, job, token=CI, what="/v1/jobs again (joined)")
if j and not j.get("joined"):
    fail("a second identical submission did not join: %s" % j)

batch = check("POST", W + "/lease?wait=30", 200, token=WORKER, timeout=60)
bid = batch["batch_id"] if batch else 0
n = len(batch["traces"]) if batch else 0
check("POST", W + "/heartbeat", 200, token=WORKER)
check("POST", W + "/heartbeat", 403, token=CI)
check("POST", "/v1/workers/w-nobody/heartbeat", 404, token=WORKER)
check("POST", "/v1/workers/w-nobody/lease?wait=1", 404, token=WORKER)
good = [{"status": "ok", "latency_us": 40.0 + i, "max_rel_error": 0.0} for i in range(n)]
check("POST", W + "/results", 400, {"batch_id": bid, "results": good[:-1]}, token=WORKER,
      what="results one short")
check("POST", W + "/results", 400, {"batch_id": bid, "results": [{"status": "fine"}] * n},
      token=WORKER, what="results with a bad status")
check("POST", "/v1/workers/w-nobody/results", 403, {"batch_id": bid, "results": good},
      token=WORKER, what="results from a worker not registered")
check("POST", W + "/results", 200, {"batch_id": bid, "results": good}, token=WORKER)
check("POST", W + "/results", 409, {"batch_id": bid, "results": good}, token=WORKER,
      what="results of a batch again (lease lost)")

# the job ends: follow it by long polls
state, version, deadline = None, 0, time.time() + 120
while time.time() < deadline:
    jd = check("GET", "/v1/jobs/%d?wait=10&version=%d" % (aid, version), 200, token=CI)
    if not jd:
        break
    state, version = jd["state"], jd["version"]
    if state in ("done", "failed", "cancelled"):
        break
if state != "done":
    fail("job %d ended %s, expected done" % (aid, state))
check("POST", W + "/lease?wait=1", 204, token=WORKER, what="lease with nothing queued")
check("GET", "/v1/jobs/%d" % aid, 401)
check("GET", "/v1/jobs/999999", 404, token=CI)
check("GET", "/v1/jobs/abc", 404, token=CI)
check("GET", "/v1/jobs?state=done&limit=5", 200, token=CI)
check("GET", "/v1/jobs?state=finished", 400, token=CI)
check("GET", "/v1/jobs", 401)
check("DELETE", "/v1/jobs/%d" % aid, 409, token=CI, what="cancel of an ended job")
check("DELETE", "/v1/jobs/999999", 404, token=CI)
check("DELETE", "/v1/jobs/%d" % aid, 403, token=WORKER)

# cancel while running (202): a job whose batch this worker holds
c = check("POST", "/v1/jobs", 201, dict(job, workload={"op": "matmul", "M": 24, "N": 24, "K": 24}),
          token=CI)
cb = check("POST", W + "/lease?wait=30", 200, token=WORKER, timeout=60)
if c:
    check("DELETE", "/v1/jobs/%d" % c["job_id"], 202, token=CI, what="cancel of a running job")
if cb:
    check("POST", W + "/results", {200, 409},
          {"batch_id": cb["batch_id"],
           "results": [{"status": "build_error", "message": "not built"}] * len(cb["traces"])},
          token=WORKER, what="results of a cancelled job's batch")
# cancel while queued (200) and a full queue (429): targets no worker serves
q1 = check("POST", "/v1/jobs", 201, dict(job, target="cuda:sm_90"), token=CI)
check("POST", "/v1/jobs", 429, dict(job, target="cuda:sm_86"), token=CI,
      what="/v1/jobs past max_queued_jobs")
if q1:
    check("DELETE", "/v1/jobs/%d" % q1["job_id"], 200, token=CI, what="cancel of a queued job")

# bests, the workload
best = check("GET", "/v1/best?op=matmul&target=cpu", 200, token=CI)
check("GET", "/v1/best?op=matmul&where=M=16&where=N=16", 200, token=CI)
check("GET", "/v1/best?where=M", 400, token=CI)
check("GET", "/v1/best", 401)
key = best["best"][0]["workload_key"] if best and best["best"] else "0" * 64
check("GET", "/v1/workloads/%s?include=tir,source" % key, 200, token=CI)
check("GET", "/v1/workloads/%s?target=%s" % (key, urllib.parse.quote(cpu)), 200, token=CI)
check("GET", "/v1/workloads/" + "0" * 64, 404, token=CI)
check("GET", "/v1/workloads/" + key, 401)

# records: export, import, removal
export = check("GET", "/v1/records", 200, token=CI)
check("GET", "/v1/records?workload=%s&target=%s" % (key, urllib.parse.quote(cpu)), 200, token=CI)
check("GET", "/v1/records", 401)
if export and export["records"]:
    rid = export["records"][0]["id"]
    small = {"format": export["format"], "records": export["records"][:2],
             "workloads": export["workloads"]}
    check("POST", "/v1/records", 200, small, token=ADMIN)
    check("POST", "/v1/records?trust=1", 200, small, token=ADMIN)
    check("POST", "/v1/records?trust=2", 400, small, token=ADMIN)
    check("POST", "/v1/records", 403, small, token=CI)
    check("POST", "/v1/records", 401, small)
    bad = json.loads(json.dumps(small))
    bad["records"][0]["trace"] = '{"insts": [{"op": "nonsense"}]}'
    check("POST", "/v1/records", 400, bad, token=ADMIN, what="/v1/records with a bad trace")
    check("POST", "/v1/records", 400, {"records": "none"}, token=ADMIN)
    check("DELETE", "/v1/records/" + rid, 403, token=CI)
    check("DELETE", "/v1/records/" + rid, 401)
    check("DELETE", "/v1/records/" + rid, 200, token=ADMIN)
    check("DELETE", "/v1/records/" + rid, 404, token=ADMIN, what="/v1/records/ID again")
    check("DELETE", "/v1/records/nothex", 404, token=ADMIN)
else:
    fail("the export holds no records")

# lower, fuse
trace = None
if best and best["best"]:
    wl = check("GET", "/v1/workloads/%s" % key, 200, token=CI)
    trace = wl["best"][0]["trace"] if wl and wl["best"] else None
check("POST", "/v1/lower", 200, {"workload": mm16, "target": "cpu"}, token=CI)
if trace:
    check("POST", "/v1/lower", 200, {"workload": mm16, "target": "cpu", "trace": trace}, token=CI,
          what="/v1/lower with the best's trace")
check("POST", "/v1/lower", 400, {"workload": mm16, "target": "cpu",
                                 "trace": {"insts": [{"op": "nonsense"}]}}, token=CI,
      what="/v1/lower with a bad trace")
check("POST", "/v1/lower", 400, {"workload": mm16, "target": "cpu:sparc"}, token=CI)
check("POST", "/v1/lower", 401, {"workload": mm16, "target": "cpu"})
check("POST", "/v1/lower", 413, {"workload": mm16, "target": "cpu", "pad": "x" * 5000}, token=CI,
      what="/v1/lower with a 5 kB body")
with open(GRAPH, encoding="utf-8") as f:
    graph = json.load(f)
check("POST", "/v1/fuse", 200, {"workload": graph}, token=CI)
check("POST", "/v1/fuse", 200, {"workload": graph, "mode": "tvm"}, token=CI)
check("POST", "/v1/fuse", 400, {"workload": graph, "mode": "measured"}, token=CI)
check("POST", "/v1/fuse", 400, {"workload": mm16}, token=CI, what="/v1/fuse of a matmul")
check("POST", "/v1/fuse", 401, {"workload": graph})

# the dashboard and its data routes
roof = check("GET", "/v1/roofline", 200, token=CI)
if roof is not None and not any(t["points"] for t in roof["targets"]):
    fail("GET /v1/roofline: no best on any roofline, after a tuned job")
check("GET", "/v1/roofline?target=cpu", 200, token=CI)
check("GET", "/v1/roofline", 401)
check("GET", "/v1/models", 200, token=CI)
check("GET", "/v1/models", 401)
check("GET", "/", 200)
check("GET", "/" + many, 414, what="/?65 parameters")
for page in ("jobs", "cache", "dash.js", "dash.css"):
    check("GET", "/ui/" + page, 200)
check("GET", "/ui/nonexistent", 404)

# workers
check("GET", "/v1/workers", 200, token=CI)
check("GET", "/v1/workers", 401)
# a graph submitted: one job per kernel of its plan
check("POST", "/v1/jobs", 201, {"workload": graph, "target": "cpu", "trials": 4}, token=CI,
      what="/v1/jobs of a graph")
check("DELETE", W, 403, token=CI)
check("DELETE", W, 200, token=WORKER)
check("DELETE", W, 404, token=WORKER, what=W + " again")
check("POST", W + "/lease?wait=1", 404, token=WORKER, what="lease after leaving")

# a database error (tables renamed under tird, as tests/service.sh does): 500 store
import sqlite3
db = sqlite3.connect(DB, timeout=30)
db.executescript("ALTER TABLE best RENAME TO best_gone; ALTER TABLE jobs RENAME TO jobs_gone; "
                 "ALTER TABLE records RENAME TO records_gone; "
                 "ALTER TABLE workloads RENAME TO workloads_gone;")
db.close()
for path in ("/v1/best?op=conv2d", "/v1/jobs", "/v1/workloads/" + key, "/v1/records",
             "/v1/roofline"):
    e = check("GET", path, 500, token=CI, what=path + " (tables gone)")
    if e and e["error"]["code"] != "store":
        fail("GET %s with the tables gone: %s, expected the code store" % (path, e["error"]))

# ---- 4. coverage ----------------------------------------------------------------------------
for tpl, item in doc["paths"].items():
    for method in item:
        got = seen.get((tpl, method), set())
        if not any(200 <= s < 300 for s in got):
            fail("%s %s: no success answer exercised" % (method.upper(), tpl))
        if not any(s >= 400 for s in got):
            fail("%s %s: no error answer exercised" % (method.upper(), tpl))
        never = sorted(set(item[method]["responses"]) - {str(s) for s in got})
        print("  %-6s %-28s answered %s; not exercised: %s" %
              (method.upper(), tpl, ",".join(map(str, sorted(got))), ",".join(never) or "-"))
total = sum(len(s) for s in seen.values())
print("  traffic took %.1f s" % (time.time() - t0), flush=True)
if not fails:
    ok("%d (route, status) pairs answered as the document says, on all %d operations" %
       (total, len(documented)))
sys.exit(1 if fails else 0)
