#!/usr/bin/env python3
"""bench/gpu_harness.py — tird's kernels and PyTorch's (cuDNN / cuBLAS) in one
process, on the same inputs, timed the same ways.

    python3 bench/gpu_harness.py PACK_DIR < cases          # methods (a) and (b)
    ncu --profile-from-start off --clock-control none --metrics gpu__time_duration.sum \\
        --csv --log-file ncu.csv python3 bench/gpu_harness.py PACK_DIR --ncu < cases
    python3 bench/gpu_harness.py PACK_DIR --ncu-csv ncu.csv < cases   # method (c)

PACK_DIR is a CUDA pack of tird's bests built with make (`tirctl pack --target
cuda --out DIR && make -C DIR`): the harness loads its libtirdpack.so, which
runs the very cubins tird measured, with tird's launch dimensions and tensor
maps, on PyTorch's tensors and stream.  Each input line: NAME DTYPE KEY
WORKLOAD_JSON (KEY: the workload key, `tirctl --json lower` gives it).

For each case the inputs are drawn once (randn) in PyTorch's layout; tird's
arguments are the same tensors in tird's layout (channels-last activations
are the same storage; weights permuted once to tird's [*kernel, C/g, K], as
PyTorch keeps its own weight format: neither side pays a layout change in the
timed call).  tird's output is checked against PyTorch's output
(||out - ref|| / ||ref|| in float64; float32 must be under 1e-4, float16
under 1e-2).  Timing, median of REPEATS:

  (a) back to back: a CUDA graph of 20 calls replayed, device time per call
      (bench/torch_peer.py's method, and tird's own runner's);
  (b) isolated: each call alone on a cold L2 with other work before it: a
      spin kernel (so the host's launch is never what the GPU waits for), the
      L2 flushed by writing twice its size, then events around the one call;
  (w) isolated as (b) with the L2 left warm (no flush): (w) - (a) is what
      back to back hides besides the cache;
  (c) Nsight Compute's gpu__time_duration summed over the call's kernels, the
      call profiled alone (--ncu marks each case and side with a marker
      kernel between cuProfilerStart and Stop; --ncu-csv reads ncu's log);
  (cw) as (c) from a run with --cache-control none (--ncu-csv-warm).
An empty kernel timed the same ways comes first: the floor of each method.
tird's side is also timed the way tird's runner times it: (r) back to back
with the calls rotating through copies of the arguments that span twice the
L2 (the recorded figure less its launch term); (re) the same with an empty
kernel before each call, (ri) with a kernel before each call whose
straight-line code leaves nothing of tird's code in the SMs' instruction
caches, and (rl) with a read of twice the L2 and that kernel before each
call (nothing of tird's code or data left in any cache), each less a graph
of what runs before the calls alone.  Against (c), the summary
counts how many of tird's figures each way (and each plus the launch term
per kernel: an empty kernel back to back) lands within 5%.

Prints one line per case: name dtype error, tird and torch under (a) and (b)
(and (c) with --ncu-csv), the ratios torch/tird, tird's kernels, then the
geometric means per dtype and method.
"""
import argparse
import ctypes
import csv
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

DT = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
B2B_CALLS, REPEATS, NCU_CALLS = 20, 15, 3


def per(x, n):
    return list(x) if isinstance(x, list) else [x] * n


class Pack:
    """libtirdpack.so of a pack, through ctypes."""

    def __init__(self, d):
        self.lib = ctypes.CDLL(os.path.join(d, "libtirdpack.so"))
        L = self.lib
        L.tird_find.restype = ctypes.c_void_p
        L.tird_find.argtypes = [ctypes.c_char_p]
        L.tird_run.restype = ctypes.c_int
        L.tird_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        L.tird_last_error.restype = ctypes.c_char_p
        L.tird_kernel_nargs.argtypes = [ctypes.c_void_p]
        self.manifest = {k["workload_key"]: k for k in
                         json.load(open(os.path.join(d, "manifest.json")))["kernels"]}

    def kernel(self, key):
        k = self.lib.tird_find(key.encode())
        if not k:
            raise KeyError("not in the pack")
        return k, self.manifest[key]

    def caller(self, k, tensors):
        arr = (ctypes.c_void_p * len(tensors))(*[t.data_ptr() for t in tensors])
        run, err = self.lib.tird_run, self.lib.tird_last_error

        def call():
            s = torch.cuda.current_stream().cuda_stream
            if run(k, arr, ctypes.c_void_p(s)) != 0:
                raise RuntimeError(err().decode())
        return call


def make_case(w, dt):
    """(peer call, its output, tird's inputs, tird-layout view of an output)."""
    op = w["op"]
    dev = "cuda"
    if op == "matmul":
        b, m, n, k = w.get("batch", 0), w["M"], w["N"], w["K"]
        lay = w.get("layout", "NN")
        sa = (k, m) if lay == "TN" else (m, k)
        sb = (n, k) if lay == "NT" else (k, n)
        if b:
            sa, sb = (b,) + sa, (b,) + sb
        a = torch.randn(sa, device=dev, dtype=dt)
        bb = torch.randn(sb, device=dev, dtype=dt)
        ta = (lambda x: x.transpose(-1, -2)) if lay == "TN" else (lambda x: x)
        tb = (lambda x: x.transpose(-1, -2)) if lay == "NT" else (lambda x: x)
        return (lambda: torch.matmul(ta(a), tb(bb))), [a, bb], lambda y: y.contiguous()
    nd = {"conv1d": 1, "conv2d": 2, "conv3d": 3, "depthwise_conv2d": 2,
          "conv2d_transpose": 2}[op]
    if not w.get("layout", "N" + "DHW"[3 - nd:] + "C").endswith("C"):
        raise ValueError("channels-first workloads: not in this harness")
    spatial = ["W"] if nd == 1 else ["H", "W"] if nd == 2 else ["D", "H", "W"]
    kern = ["S"] if nd == 1 else ["R", "S"] if nd == 2 else ["T", "R", "S"]
    n_, c = w["N"], w["C"]
    stride, dil = per(w.get("stride", 1), nd), per(w.get("dilation", 1), nd)
    pad = w.get("pad", 0)
    if isinstance(pad, list) and len(pad) == 2 * nd:
        if pad[:nd] != pad[nd:]:
            raise ValueError("asymmetric padding: no single PyTorch call")
        pad = pad[:nd]
    pad = per(pad, nd)
    ks = [w[s] for s in kern]
    x = torch.randn([n_, c] + [w[s] for s in spatial], device=dev, dtype=dt)
    last = [0] + list(range(2, 2 + nd)) + [1]       # NC... -> N...C
    xt = x.permute(*last).contiguous()               # tird's X
    if nd >= 2:
        x = x.contiguous(memory_format=torch.channels_last if nd == 2
                         else torch.channels_last_3d)
    sp = list(range(2, 2 + nd))
    if op == "depthwise_conv2d":
        mult = w.get("multiplier", 1)
        wt = torch.randn([c * mult, 1] + ks, device=dev, dtype=dt)
        wtt = wt.view(c, mult, *ks).permute(*sp, 0, 1).contiguous()   # [*k, C, mult]
        k_, groups = c * mult, c
    elif op == "conv2d_transpose":
        k_, groups = w["K"], w.get("groups", 1)
        wt = torch.randn([c, k_ // groups] + ks, device=dev, dtype=dt)
        wtt = wt.permute(*sp, 0, 1).contiguous()                      # [*k, C, K/g]
    else:
        k_, groups = w["K"], w.get("groups", 1)
        wt = torch.randn([k_, c // groups] + ks, device=dev, dtype=dt)
        wtt = wt.permute(*sp, 1, 0).contiguous()                      # [*k, C/g, K]
    if nd >= 2:
        wt = wt.contiguous(memory_format=torch.channels_last if nd == 2
                           else torch.channels_last_3d)
    view = lambda y: y.permute(*last).contiguous()
    if op == "conv2d_transpose":
        op_ = per(w.get("output_padding", 0), nd)
        fn = lambda: F.conv_transpose2d(x, wt, stride=stride, padding=pad, output_padding=op_,
                                        groups=groups, dilation=dil)
    else:
        f = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]
        fn = lambda: f(x, wt, stride=stride, padding=pad, dilation=dil, groups=groups)
    return fn, [xt, wtt], view


class Timer:
    def __init__(self):
        props = torch.cuda.get_device_properties(0)
        l2 = getattr(props, "L2_cache_size", 64 << 20) or (64 << 20)
        self.flush = torch.empty(2 * l2 // 4, device="cuda", dtype=torch.float32)

    def b2b(self, fn):
        """Back to back: a graph of B2B_CALLS calls, device time per call (us)."""
        return self.graph([fn] * B2B_CALLS) / B2B_CALLS

    def graph(self, fns):
        """Median device time (us) of one replay of a CUDA graph of the calls
        fns, in order."""
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for f in fns[:3]:
                f()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for f in fns:
                f()
        g.replay()
        torch.cuda.synchronize()
        t = []
        for _ in range(REPEATS):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            g.replay()
            b.record()
            b.synchronize()
            t.append(a.elapsed_time(b) * 1000)
        return sorted(t)[len(t) // 2]

    def between(self, calls, other, n=B2B_CALLS):
        """n calls back to back with `other` before each, less n of `other`
        alone: per call (us).  calls: the calls in rotation (one per copy)."""
        seq = [calls[i % len(calls)] for i in range(n)]
        both = self.graph([f for c in seq for f in (other, c)])
        return (both - self.graph([other] * n)) / n

    def read_l2(self):
        """Reads twice the L2: it holds nothing of the call's, and no dirty line."""
        torch.sum(self.flush)

    def isolated(self, fn, cold=True):
        fn()
        torch.cuda.synchronize()
        pairs = []
        for _ in range(REPEATS * 2):
            torch.cuda._sleep(200000)          # ~100 us of other work: the host runs ahead
            if cold:
                self.flush.fill_(1.0)          # the L2 cold
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            pairs.append((a, b))
        torch.cuda.synchronize()
        t = sorted(a.elapsed_time(b) * 1000 for a, b in pairs)
        return t[len(t) // 2]


MARK_PTX = b"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry tird_harness_mark() { ret; }
"""


def evict_ptx(n):
    """A kernel of n multiply-adds (8 independent chains) in straight-line
    code, 16 bytes of machine code each: run on every SM, it leaves no other
    kernel's code in the SMs' instruction caches."""
    body = "".join("    mad.lo.u32 %%r%d, %%r%d, %%r8, %d;\n" % (i % 8, i % 8, 2 * i + 1)
                   for i in range(n))
    sums = "".join("    add.u32 %%r0, %%r0, %%r%d;\n" % k for k in range(1, 8))
    return ("""
.version 8.0
.target sm_90
.address_size 64
.visible .entry tird_harness_evict(.param .u64 out, .param .u32 a) {
    .reg .u32 %r<9>;
    .reg .u64 %p;
    .reg .pred %q;
    ld.param.u32 %r8, [a];
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, %r0; mov.u32 %r2, %r0; mov.u32 %r3, %r0; mov.u32 %r4, %r0;
    mov.u32 %r5, %r0; mov.u32 %r6, %r0; mov.u32 %r7, %r0;
""" + body + sums + """    setp.ne.u32 %q, %r0, 0;
    @%q ret;
    ld.param.u64 %p, [out];
    st.global.u32 [%p], %r0;
    ret;
}
""").encode()


EVICT_MADS = 16384      # 256 KiB of code: more than an SM's instruction caches


class Marker:
    """A kernel of its own name, launched between cases for ncu's log."""

    def __init__(self):
        torch.cuda.init()
        torch.empty(1, device="cuda")
        self.cu = ctypes.CDLL("libcuda.so.1")
        mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
        if self.cu.cuModuleLoadData(ctypes.byref(mod), MARK_PTX) or \
           self.cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"tird_harness_mark"):
            raise RuntimeError("cannot load the marker kernel")
        self.fn = fn
        emod, efn = ctypes.c_void_p(), ctypes.c_void_p()
        if self.cu.cuModuleLoadData(ctypes.byref(emod), evict_ptx(EVICT_MADS)) or \
           self.cu.cuModuleGetFunction(ctypes.byref(efn), emod, b"tird_harness_evict"):
            raise RuntimeError("cannot load the instruction-cache evicting kernel")
        self.efn = efn
        self.sink = torch.zeros(1, device="cuda", dtype=torch.int32)
        self.sms = torch.cuda.get_device_properties(0).multi_processor_count

    def evict(self):
        """The evicting kernel: 2 blocks of 4 warps per SM."""
        s = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        out, a = ctypes.c_uint64(self.sink.data_ptr()), ctypes.c_uint32(3)
        args = (ctypes.c_void_p * 2)(ctypes.cast(ctypes.byref(out), ctypes.c_void_p),
                                     ctypes.cast(ctypes.byref(a), ctypes.c_void_p))
        self.cu.cuLaunchKernel(self.efn, ctypes.c_uint(2 * self.sms), 1, 1, ctypes.c_uint(128), 1, 1,
                               0, s, args, None)

    def __call__(self, idx, threads=1):
        """Launches the marker of segment idx: a grid of idx + 1 blocks."""
        s = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        self.cu.cuLaunchKernel(self.fn, ctypes.c_uint(idx + 1), 1, 1, ctypes.c_uint(threads), 1, 1,
                               0, s, None, None)


def rel_error(out, ref):
    o, r = out.double().flatten(), ref.double().flatten()
    if not torch.isfinite(o).all():
        return float("inf")
    return (torch.linalg.vector_norm(o - r) / max(torch.linalg.vector_norm(r).item(), 1e-30)).item()


def ncu_durations(path):
    """{segment: the durations (us) of its kernels}, segments named by the
    grid of the marker kernel before them."""
    segs, cur, marks = {}, None, []
    scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
             "second": 1e6}
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = row.get("Kernel Name", "")
        v = float(row["Metric Value"].replace(",", "")) * scale.get(row.get("Metric Unit", "ns"), 1e-3)
        if name.startswith("tird_harness_mark"):
            grid = row.get("Grid Size", "(1").strip("( )").split(",")[0]
            cur = segs.setdefault(int(grid) - 1, [])
            marks.append(v)
        elif cur is not None:
            cur.append(v)
    return segs, marks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pack")
    ap.add_argument("--ncu", action="store_true", help="run under ncu: mark and profile")
    ap.add_argument("--ncu-csv", help="ncu's log of a --ncu run (caches flushed): method (c)")
    ap.add_argument("--ncu-csv-warm", help="the same with --cache-control none: method (cw)")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    pack = Pack(args.pack)
    timer = Timer()
    marker = Marker()
    segs, marks = {}, {}
    for m, f in (("c", args.ncu_csv), ("cw", args.ncu_csv_warm)):
        if f:
            segs[m], marks[m] = ncu_durations(f)
    methods = ["a", "w", "b"] + [m for m in ("c", "cw") if m in segs]
    logs = {}
    launch = 0.0    # an empty kernel back to back: the launch cost a stream hides per kernel
    if not args.ncu:
        empty = lambda: marker(0)
        launch = timer.b2b(empty)
        print("# an empty kernel: (a) %.2f us, (w) %.2f us, (b) %.2f us" % (
            launch, timer.isolated(empty, cold=False), timer.isolated(empty)))
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        wave = lambda: marker(sms - 1, 128)
        print("# an empty kernel of %d blocks of 128 threads (one per SM): (a) %.2f us, (b) %.2f us" % (
            sms, timer.b2b(wave), timer.isolated(wave)))
        for m, v in sorted(marks.items()):
            if v:
                v = sorted(v)
                print("# ncu (%s) of the marker, an empty kernel of 1-%d blocks: median %.2f us, "
                      "quartiles %.2f-%.2f, over %d" % (m, len(v), v[len(v) // 2], v[len(v) // 4],
                                                       v[3 * len(v) // 4], len(v)))
    print("%-9s %-8s %9s " % ("name", "dtype", "error") + " ".join(
        "%9s %9s %7s" % ("tird_" + m, "torch_" + m, m) for m in methods) +
        " kernels  tird_rec " + " ".join("%8s" % ("rec/%s-1" % m) for m in ("c", "cw") if m in segs) +
        "    tird_r   tird_re   tird_ri   tird_rl",
        flush=True)
    devs, gaps = {}, {}     # per ncu method: |recorded/ncu - 1|, (ncu - recorded) per kernel
    versus = {}             # per way of timing tird: (|x/c - 1|, (c - x) per kernel)
    for case, line in enumerate(l for l in sys.stdin if l.strip()):
        name, dtype, key, js = line.split(" ", 3)
        try:
            w = json.loads(js)
            k, man = pack.kernel(key)
            fn, ins, view = make_case(w, DT[dtype])
            outs = [torch.empty(a["elems"], device="cuda", dtype=DT.get(a["dtype"], torch.float32))
                    for a in man["args"] if a["role"] == "output"]
            tird = pack.caller(k, ins + outs)
            ref = fn()
            tird()
            torch.cuda.synchronize()
            err = rel_error(outs[0], view(ref).flatten())
            tol = 1e-4 if dtype == "float32" else 1e-2
            if not err <= tol:
                print("%-9s %-8s %9.2e wrong: tird's output differs from PyTorch's" % (
                    name, dtype, err), flush=True)
                continue
            nk = len(man.get("launches", []))
            if args.ncu:
                for side, f in enumerate((tird, fn)):
                    f()
                    torch.cuda.synchronize()
                    torch.cuda.cudart().cudaProfilerStart()
                    marker(2 * case + side)
                    for _ in range(NCU_CALLS):
                        f()
                    torch.cuda.synchronize()
                    torch.cuda.cudart().cudaProfilerStop()
                print("%-9s %-8s %9.2e profiled" % (name, dtype, err), flush=True)
                continue
            # tird's runner's way (calls rotating through copies spanning
            # twice the L2), alone (r) and with an empty kernel (re) or the
            # instruction-cache evicting kernel (ri) before each call
            span = sum(t.numel() * t.element_size() for t in ins + outs)
            ncp = max(1, min(B2B_CALLS, -(-timer.flush.numel() * 4 // max(span, 1))))
            keep = [ins + outs] + [[t.clone() for t in ins] + [torch.empty_like(o) for o in outs]
                                   for _ in range(ncp - 1)]
            rot = [pack.caller(k, ts) for ts in keep]
            seq = [rot[i % ncp] for i in range(B2B_CALLS)]
            rx = (timer.graph(seq) / B2B_CALLS, timer.between(rot, lambda: marker(0)),
                  timer.between(rot, marker.evict),
                  timer.between(rot, lambda: (timer.read_l2(), marker.evict()), n=5))
            del seq, rot, keep
            r = {"a": (timer.b2b(tird), timer.b2b(fn)),
                 "w": (timer.isolated(tird, cold=False), timer.isolated(fn, cold=False)),
                 "b": (timer.isolated(tird), timer.isolated(fn))}
            for m, sg in segs.items():
                if 2 * case in sg and 2 * case + 1 in sg:
                    r[m] = (sum(sg[2 * case]) / NCU_CALLS, sum(sg[2 * case + 1]) / NCU_CALLS)
            cells = []
            for m in methods:
                if m in r:
                    t_, p_ = r[m]
                    cells.append("%9.2f %9.2f %7.3f" % (t_, p_, p_ / t_))
                    logs.setdefault((dtype, m), []).append(math.log(p_ / t_))
                else:
                    cells.append("%9s %9s %7s" % ("-", "-", "-"))
            # tird's own figure (the search's, from the manifest) against ncu (c)
            rec = man.get("latency_us", 0)
            dev = []
            for m in ("c", "cw"):
                if rec > 0 and m in r:
                    d = rec / r[m][0] - 1
                    devs.setdefault(m, []).append(abs(d))
                    gaps.setdefault(m, []).append((r[m][0] - rec) / max(nk, 1))
                    dev.append("%+7.1f%%" % (100 * d))
            print("%-9s %-8s %9.2e %s %d %9.2f %s %9.2f %9.2f %9.2f %9.2f" % (
                name, dtype, err, " ".join(cells), nk, rec, " ".join(dev) or "-", *rx), flush=True)
            if "c" in r:
                c_ = r["c"][0]
                for lab, v in (("recorded", rec), ("r", rx[0]), ("r+term", rx[0] + nk * launch),
                               ("re", rx[1]), ("re+term", rx[1] + nk * launch), ("ri", rx[2]),
                               ("ri+term", rx[2] + nk * launch), ("rl", rx[3]),
                               ("rl+term", rx[3] + nk * launch)):
                    if v > 0:
                        versus.setdefault(lab, []).append((abs(v / c_ - 1), (c_ - v) / max(nk, 1)))
        except Exception as e:
            print("%-9s %-8s failed: %s" % (name, dtype, str(e).splitlines()[0][:150]), flush=True)
    for m in sorted(devs):
        dv, gp = sorted(devs[m]), sorted(gaps[m])
        print("tird's recorded figure against ncu (%s): median |rec/%s-1| %.1f%%, within 5%%: %d of %d" % (
            m, m, 100 * dv[len(dv) // 2], sum(d <= 0.05 for d in dv), len(dv)))
        print("ncu (%s) less the recorded figure, per kernel: median %.2f us, quartiles %.2f-%.2f" % (
            m, gp[len(gp) // 2], gp[len(gp) // 4], gp[3 * len(gp) // 4]))
    for lab, v in versus.items():
        dv, gp = sorted(x[0] for x in v), sorted(x[1] for x in v)
        print("tird by %-8s against ncu (c): median |x/c-1| %.1f%%, within 5%%: %d of %d; "
              "(c) less it per kernel: median %.2f us, quartiles %.2f-%.2f" % (
                  lab, 100 * dv[len(dv) // 2], sum(d <= 0.05 for d in dv), len(dv),
                  gp[len(gp) // 2], gp[len(gp) // 4], gp[3 * len(gp) // 4]))
    for (dtype, m), v in sorted(logs.items()):
        print("geomean torch/tird %s method (%s): %.3f over %d workloads" % (
            dtype, m, math.exp(sum(v) / len(v)), len(v)))


if __name__ == "__main__":
    main()
