#!/usr/bin/env bash
# make-seeds.sh BUILD_DIR — writes the seed corpora of tests/fuzz/corpus/
# from the repository's own inputs (run from the source tree; BUILD_DIR has
# client/tirctl, which samples traces).  The corpora are committed: run this
# only to remake them (then keep the regression seeds, corpus/*/regress-*,
# which it does not write).
#
#   workload: examples/*.json, every suite workload (bench/suite.json), the
#             canonical forms of a few seed workloads (costmodel/seed), and
#             a few of every operator's keys (epilogues, dtypes, layouts)
#   graph:    examples/graphs/*.json and bench/graphs/*.json
#   trace:    a byte (fuzz_trace.c: workload * 3 + target) and a trace:
#             hand-written schedules (examples/traces/) and traces sampled
#             by tirctl lower --sample for graphs, tensor cores and wgmma
#   records:  small exports cut from costmodel/seed/*.records.gz, and one
#             of every status
#   config:   deploy/tird.conf.example and token files after a "%%" line
#   http:     raw requests of every route, with the tokens fuzz_http.c
#             starts its tird with
set -euo pipefail
build=$(cd "${1:?usage: make-seeds.sh BUILD_DIR}" && pwd)
cd "$(dirname "$0")/../.."
out=tests/fuzz/corpus
mkdir -p $out/{workload,graph,trace,records,config,http}
find $out -type f ! -name 'regress-*' -delete
TIRCTL=$build/client/tirctl python3 - "$out" <<'PYEOF'
import glob, gzip, json, os, subprocess, sys
out = sys.argv[1]
def put(kind, name, data):
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(out, kind, name), "wb") as f:
        f.write(data)
compact = lambda o: json.dumps(o, separators=(",", ":"))

# ---- workload --------------------------------------------------------------
for p in glob.glob("examples/*.json"):
    put("workload", os.path.basename(p), open(p).read())
suite = json.load(open("bench/suite.json"))
for e in suite:
    put("workload", "suite-%s.json" % e["name"], compact(e["workload"]))
seed = json.load(gzip.open("costmodel/seed/cpu.records.gz"))
seen = set()
for k, w in seed["workloads"].items():
    if w["op"] not in seen:
        seen.add(w["op"])
        put("workload", "canonical-%s.json" % w["op"], compact(w))
extra = [
    {"op": "matmul", "M": 4, "N": 4, "K": 4, "epilogue": ["bias", "relu"]},
    {"op": "matmul", "M": 64, "N": 64, "K": 64, "dtype": "float16", "out_dtype": "float32",
     "epilogue": ["bias", "gelu"]},
    {"op": "matmul", "M": 4, "N": 4, "K": 4, "dtype": "int8"},
    {"op": "matmul", "M": 3, "N": 5, "K": 7, "batch": 4, "layout": "NT"},
    {"op": "conv2d", "N": 1, "C": 8, "H": 9, "W": 9, "K": 4, "R": 3, "S": 3, "stride": [2, 1],
     "pad": [1, 0, 1, 2], "dilation": 2, "groups": 2, "layout": "NCHW"},
    {"op": "conv3d", "N": 2, "C": 4, "D": 5, "H": 6, "W": 7, "K": 8, "T": 3, "R": 3, "S": 3},
    {"op": "depthwise_conv2d", "N": 1, "C": 4, "H": 8, "W": 8, "R": 3, "S": 3,
     "epilogue": ["add"]},
    {"op": "conv2d_transpose", "N": 1, "C": 4, "H": 8, "W": 8, "K": 4, "R": 3, "S": 3,
     "stride": 2, "pad": 1},
]
for i, w in enumerate(extra):
    put("workload", "keys-%d-%s.json" % (i, w["op"]), compact(w))

# ---- graph -----------------------------------------------------------------
for p in glob.glob("examples/graphs/*.json") + glob.glob("bench/graphs/*.json"):
    put("graph", os.path.basename(p), open(p).read())

# ---- trace: byte = workload * 3 + target ----------------------------------
names = [e["name"] for e in suite] + [os.path.basename(p)[:-5]
                                      for p in sorted(glob.glob("examples/graphs/*.json"))]
targets = ["cpu:x86_64+avx2+fma", "cuda:sm_80", "cuda:sm_90"]
def trace_seed(name, target, trace):
    b = names.index(name) * 3 + targets.index(target)
    assert b < 256
    return bytes([b]) + trace.encode()
for p in sorted(glob.glob("examples/traces/*.json")):
    name, kind = os.path.basename(p)[:-5].rsplit(".", 1)
    if name[-1] not in "02":           # a few of each operator
        continue
    put("trace", "%s.%s" % (name, kind),
        trace_seed(name, targets[0] if kind == "cpu" else targets[2], open(p).read().strip()))
tirctl = os.environ["TIRCTL"]
sampled = [("GMM-1", "cuda:sm_90"), ("GMM-1", "cuda:sm_80"), ("C2D-2", "cuda:sm_90"),
           ("C2D-1", "cpu:x86_64+avx2+fma"), ("softmax", "cuda:sm_90"),
           ("softmax", "cpu:x86_64+avx2+fma"), ("layernorm", "cuda:sm_80"),
           ("seed10", "cpu:x86_64+avx2+fma"), ("seed10", "cuda:sm_90")]
for name, target in sampled:
    if name in [e["name"] for e in suite]:
        doc = compact([e for e in suite if e["name"] == name][0]["workload"])
    else:
        doc = open("examples/graphs/%s.json" % name).read()
    r = subprocess.run([tirctl, "--json", "lower", "-", "--target", target, "--sample", "2",
                        "--seed", "5"], input=doc.encode(), capture_output=True)
    cands = json.loads(r.stdout)["candidates"]
    for i, c in enumerate(cands):
        put("trace", "sampled-%s.%s.%d" % (name, target.replace(":", "-"), i),
            trace_seed(name, target, compact(c["trace"])))

# ---- records ---------------------------------------------------------------
for kind in ("cpu", "cuda"):
    doc = json.load(gzip.open("costmodel/seed/%s.records.gz" % kind))
    by_w = {}
    for r in doc["records"]:
        by_w.setdefault(r["workload_key"], []).append(r)
    for i, (k, recs) in enumerate(list(by_w.items())[:4]):
        pick = recs[:3] + [r for r in recs if r["status"] != "ok"][:1]
        small = {"format": "tird-records/1", "workloads": {k: doc["workloads"][k]},
                 "records": pick}
        put("records", "%s-%d.json" % (kind, i), json.dumps(small, indent=1) + "\n")
mm = {"op": "matmul", "M": 8, "N": 8, "K": 8}
r = subprocess.run([tirctl, "--json", "lower", "-", "--target", "cpu:x86_64+avx2+fma",
                    "--sample", "1", "--seed", "1"], input=compact(mm).encode(),
                   capture_output=True)
trace = compact(json.loads(r.stdout)["candidates"][0]["trace"])
r = subprocess.run([tirctl, "--json", "lower", "-", "--target", "cpu"],
                   input=compact(mm).encode(), capture_output=True)
key = json.loads(r.stdout)["workload_key"]
statuses = ["ok", "build_error", "run_error", "wrong_result", "timeout"]
recs = [{"workload_key": key, "target": "cpu:x86_64+avx2+fma", "trace": trace, "status": s,
         "latency_us": 3.5, "max_rel_error": 1e-7, "message": "", "worker": "w-1",
         "created": 1764000000} if s == "ok" else
        {"workload_key": key, "target": "cpu:x86_64+avx2+fma", "trace": trace, "status": s,
         "message": "why"} for s in statuses]
recs.append({"workload_key": key, "target": "cpu:x86_64+avx2+fma", "trace": "{\"insts\":[]}",
             "status": "ok", "latency_us": 9.0, "max_rel_error": 0})
put("records", "statuses.json",
    compact({"format": "tird-records/1", "workloads": {key: mm}, "records": recs}) + "\n")
put("records", "empty.json", '{"format":"tird-records/1","workloads":{},"records":[]}')

# ---- config ----------------------------------------------------------------
put("config", "tird.conf.example", open("deploy/tird.conf.example").read())
put("config", "tokens",
    "listen = 127.0.0.1:0\nlocal_workers = none\ntoken_file = /x\n%%\n"
    "admin-token-0123456789\nci-token-0123456789 read,submit ci   # CI\n"
    "worker-token-0123456789 worker w1\nread-token-0123456789 read\n")
put("config", "quoted", 'db = "/tmp/t d.db"\nprotect_reads = yes\nmax_gflop = 10\n'
    'log_level = debug\nmax_extent = 4096\n%%\n# only comments\nabcdefgh1234\n')
put("config", "flags-style", "listen = :8642\ntuning_threads = 64\nmax_body = 256\n"
    "max_connections_per_ip = 0\nmodel_seed = none\n")

# ---- http --------------------------------------------------------------------
ADMIN, SUBMIT = "fuzz-admin-0123456789", "fuzz-submit-0123456789"
WORKER, READ = "fuzz-worker-0123456789", "fuzz-read-0123456789"
WID = "w-000000000000"
def req(method, path, body=None, token=None, extra=""):
    h = "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n" % (method, path)
    if token:
        h += "Authorization: Bearer %s\r\n" % token
    h += extra
    b = b""
    if body is not None:
        b = body.encode() if isinstance(body, str) else body
        h += "Content-Type: application/json\r\nContent-Length: %d\r\n" % len(b)
    return h.encode() + b"\r\n" + b
mm8 = compact(mm)
job = compact({"workload": mm, "target": "cpu", "trials": 4})
reqs = {
    "healthz": req("GET", "/healthz"),
    "metrics": req("GET", "/metrics", token=READ),
    "jobs-submit": req("POST", "/v1/jobs", job, SUBMIT),
    "jobs-submit-search": req("POST", "/v1/jobs", compact(
        {"workload": mm, "target": "cpu:x86_64+avx2+fma", "trials": 8, "batch": 4,
         "search": {"cost_model": "random", "seed": 7}}), ADMIN),
    "jobs-submit-graph": req("POST", "/v1/jobs", compact(
        {"workload": json.load(open("examples/graphs/softmax.json")), "target": "cuda:sm_90",
         "trials": 4, "fusion": "inductor"}), SUBMIT),
    "jobs-list": req("GET", "/v1/jobs?state=queued&limit=5"),
    "job-get": req("GET", "/v1/jobs/1"),
    "job-wait": req("GET", "/v1/jobs/1?wait=0.5&version=1"),
    "job-cancel": req("DELETE", "/v1/jobs/1", token=SUBMIT),
    "best": req("GET", "/v1/best?op=matmul&target=cpu&where=M%3D8&where=N%3D8"),
    "workload": req("GET", "/v1/workloads/0123?target=cpu&tir=1&source=1"),
    "records-export": req("GET", "/v1/records?op=matmul&target=cpu:"),
    "records-import": req("POST", "/v1/records?trust=1",
                          open(os.path.join(out, "records", "statuses.json")).read(), ADMIN),
    "record-remove": req("DELETE", "/v1/records/" + "ab" * 32, token=ADMIN),
    "lower": req("POST", "/v1/lower", compact({"workload": mm, "target": "cuda:sm_90"}), READ),
    "lower-trace": req("POST", "/v1/lower", compact(
        {"workload": mm, "target": "cpu:x86_64+avx2+fma", "trace": json.loads(trace)})),
    "fuse": req("POST", "/v1/fuse", compact(
        {"workload": json.load(open("examples/graphs/seed10.json")), "mode": "tvm"})),
    "workers-list": req("GET", "/v1/workers"),
    "worker-register": req("POST", "/v1/workers",
                           compact({"target": "cpu:x86_64+avx2", "name": "n"}), WORKER),
    "worker-lease": req("POST", "/v1/workers/%s/lease?wait=0.2" % WID, "", WORKER),
    "worker-results": req("POST", "/v1/workers/%s/results" % WID, compact(
        {"batch_id": 1, "results": [{"status": "ok", "latency_us": 2.5, "max_rel_error": 1e-7,
                                     "message": ""}]}), WORKER),
    "worker-heartbeat": req("POST", "/v1/workers/%s/heartbeat" % WID, "", WORKER),
    "worker-leave": req("DELETE", "/v1/workers/%s" % WID, token=WORKER),
    "keepalive-two": req("GET", "/healthz") + req("GET", "/v1/jobs/2"),
    "chunked": b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + SUBMIT.encode() +
               b"\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n" % len(job) + job.encode() +
               b"\r\n0\r\n\r\n",
    "two-lengths": b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                   b"Content-Length: 2\r\n\r\n{}",
    "nul-body": req("POST", "/v1/jobs", b'{"workload":{"op":"matmul"},"target":"cpu\\u0000"}\x00',
                    SUBMIT),
    "http10": b"GET /v1/best HTTP/1.0\r\n\r\n",
    "query-percent": req("GET", "/v1/jobs/1%00x?wait=%41&x=%zz"),
    "no-token": req("POST", "/v1/records", "{}"),
    "wrong-scope": req("POST", "/v1/workers", compact({"target": "cpu"}), READ),
}
for name, data in reqs.items():
    put("http", name, data)
PYEOF
echo "seeds: $(for d in $out/*/; do printf '%s %s, ' "$(basename "$d")" "$(ls "$d" | wc -l)"; done)"
