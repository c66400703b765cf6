#!/usr/bin/env python3
"""costmodel/seed/extra-workloads.py — writes extra-workloads.json, the
workloads the CPU seed holds beside the suite's: shapes drawn at
random (seeded, so the file is remade byte for byte) from each operator
family of the suite, never chosen to resemble the suite's own shapes.

    /usr/bin/python3 costmodel/seed/extra-workloads.py bench/suite.json \
        > costmodel/seed/extra-workloads.json

Why: a model of the other workloads ranks a held-out CPU workload better
the more workloads it has seen (bench/costmodel_sweep.py --workloads on the
suite's records: 0.62 with 3, 0.68 with 7, 0.72 with 13, 0.74 with 28);
the suite alone has 29.  Each shape's work is kept between 4 and 250
MFLOP so that 64 candidates of it measure in seconds on a 2-core VM.
Two rounds of 10 per family (160 draws); one draw of the second round
equalled a suite workload (DEP-0) and is dropped, so 159.
"""
import json
import random
import sys

rng = random.Random(20261201)
PER_FAMILY = 10


def pick(xs):
    return rng.choice(xs)


def flops(w):
    op = w["op"]
    if op == "matmul":
        return 2 * w["batch"] * w["M"] * w["N"] * w["K"]
    out = {"conv1d": ("W",), "conv2d": ("H", "W"), "depthwise_conv2d": ("H", "W"),
           "conv3d": ("D", "H", "W"), "conv2d_transpose": ("H", "W")}[op]
    taps = {"conv1d": ("S",), "conv3d": ("T", "R", "S")}.get(op, ("R", "S"))
    n = 2 * w["N"]
    for d in out:
        n *= w[d]
    for t in taps:
        n *= w[t]
    if op == "depthwise_conv2d":
        return n * w["C"] // (w["stride"] ** 2)
    if op == "conv2d_transpose":
        return n * w["C"] * w["K"]      # per input pixel, every tap
    stride = w["stride"] ** len(out)
    return n * w["C"] // w.get("groups", 1) * w["K"] // stride


CH = [16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512]
SP = [7, 14, 17, 28, 35, 56, 112]


def matmul():
    d = [32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024]
    return {"op": "matmul", "batch": pick([1, 1, 1, 2, 4]), "M": pick(d), "N": pick(d), "K": pick(d)}


def conv1d():
    s = pick([1, 3, 5, 7])
    return {"op": "conv1d", "N": 1, "C": pick(CH), "W": pick([32, 64, 100, 128, 256, 512]),
            "K": pick(CH), "S": s, "stride": pick([1, 1, 2]), "pad": s // 2, "layout": "NWC"}


def conv2d(groups=1, dilation=1):
    r = pick([1, 3, 3, 5, 7]) if dilation == 1 else pick([3, 3, 5])
    w = {"op": "conv2d", "N": 1, "C": pick(CH), "H": 0, "W": 0, "K": pick(CH), "R": r, "S": r,
         "stride": pick([1, 1, 2]), "pad": dilation * (r // 2), "layout": "NHWC"}
    w["H"] = w["W"] = pick(SP)
    if groups > 1:
        w["groups"] = groups
    if dilation > 1:
        w["dilation"] = dilation
    return w


def grouped():
    g = pick([2, 4, 8, 16, 32])
    while True:
        w = conv2d(groups=g)
        if w["C"] % g == 0 and w["K"] % g == 0 and w["C"] // g >= 2:
            return w


def dilated():
    return conv2d(dilation=pick([2, 3]))


def conv3d():
    r = pick([1, 3])
    return {"op": "conv3d", "N": 1, "C": pick(CH[:8]), "D": pick([4, 8]), "H": pick([7, 14, 28]),
            "W": 0, "K": pick(CH[:8]), "T": r, "R": r, "S": r, "stride": 1, "pad": r // 2,
            "layout": "NDHWC"}


def depthwise():
    r = pick([3, 3, 5])
    return {"op": "depthwise_conv2d", "N": 1, "C": pick(CH + [768, 1024]), "H": 0, "W": 0,
            "R": r, "S": r, "stride": pick([1, 2]), "pad": r // 2, "layout": "NHWC"}


def transposed():
    r = pick([2, 3, 4])
    return {"op": "conv2d_transpose", "N": 1, "C": pick(CH), "H": 0, "W": 0, "K": pick(CH),
            "R": r, "S": r, "stride": pick([1, 2, 2]), "pad": pick([0, 1]) if r > 2 else 0,
            "layout": "NHWC"}


FAMILIES = [("MM", matmul), ("C1", conv1d), ("C2", conv2d), ("C3", conv3d), ("GR", grouped),
            ("DI", dilated), ("DW", depthwise), ("TR", transposed)]


def square(w):
    if "H" in w and w["H"] == 0:
        w["H"] = pick([4, 8, 16, 32] if w["op"] == "conv2d_transpose" else SP)
    if "W" in w and w["W"] == 0:
        w["W"] = w["H"]
    return w


# In rounds of PER_FAMILY per family, each round from its own seed, so that
# a round added later leaves the earlier ones as they were.
ROUNDS = 2
out, seen = [], set()
for r in range(ROUNDS):
    rng.seed(20261201 + r)
    for tag, make in FAMILIES:
        have = len([o for o in out if o["name"].startswith("X" + tag + "-")])
        while len([o for o in out if o["name"].startswith("X" + tag + "-")]) < have + PER_FAMILY:
            w = square(make())
            key = json.dumps(w, sort_keys=True)
            if key in seen or not 4e6 <= flops(w) <= 250e6:
                continue
            seen.add(key)
            n = len([o for o in out if o["name"].startswith("X" + tag + "-")])
            out.append({"name": "X%s-%d" % (tag, n), "workload": w})
# A draw equal to a workload of the suite, if the suite is given, is dropped
# afterwards (not replaced, so that the draws after it stay as they were):
# the seed's extra workloads are other shapes.
if len(sys.argv) > 1:
    defaults = {"groups": 1, "dilation": 1, "batch": 1}

    def norm(w):
        return json.dumps({**defaults, **w}, sort_keys=True)
    with open(sys.argv[1]) as f:
        suite = {norm(s["workload"]) for s in json.load(f)}
    out = [o for o in out if norm(o["workload"]) not in suite]
print(json.dumps(out, indent=1))
