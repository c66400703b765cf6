#!/usr/bin/env python3
"""bench/torch_peer.py — the peer of bench/gpu.sh: PyTorch (cuDNN / cuBLAS)
device time per call of tird workloads, measured the way the reference table
of bench/suite.md was: channels-last tensors, TF32 off,
cudnn.benchmark on, CUDA-graph replay, median of 15 replays of 20 calls.

    python3 bench/torch_peer.py < lines

Each input line: NAME DTYPE WORKLOAD_JSON (one line of JSON).  Each output
line: NAME DTYPE MICROSECONDS (or "failed: why").
"""
import json
import sys

import torch
import torch.nn.functional as F

DT = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def per(x, n):
    return list(x) if isinstance(x, list) else [x] * n


def make(w, dt):
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
        return lambda: torch.matmul(ta(a), tb(bb))
    nd = {"conv1d": 1, "conv2d": 2, "conv3d": 3, "depthwise_conv2d": 2,
          "conv2d_transpose": 2}[op]
    spatial = ["W"] if nd == 1 else ["H", "W"] if nd == 2 else ["D", "H", "W"]
    kern = ["S"] if nd == 1 else ["R", "S"] if nd == 2 else ["T", "R", "S"]
    n_, c = w["N"], w["C"]
    ins = [w[s] for s in spatial]
    ks = [w[s] for s in kern]
    stride = per(w.get("stride", 1), nd)
    dil = per(w.get("dilation", 1), nd)
    pad = w.get("pad", 0)
    if isinstance(pad, list) and len(pad) == 2 * nd:
        if pad[:nd] != pad[nd:]:
            raise ValueError("asymmetric padding: no single PyTorch call")
        pad = pad[:nd]
    pad = per(pad, nd)
    x = torch.randn([n_, c] + ins, device=dev, dtype=dt)
    if op == "depthwise_conv2d":
        mult = w.get("multiplier", 1)
        k, groups = c * mult, c
    else:
        k, groups = w["K"], w.get("groups", 1)
    if op == "conv2d_transpose":
        wt = torch.randn([c, k // groups] + ks, device=dev, dtype=dt)
    else:
        wt = torch.randn([k, c // groups] + ks, device=dev, dtype=dt)
    if nd >= 2:
        mf = torch.channels_last if nd == 2 else torch.channels_last_3d
        x = x.contiguous(memory_format=mf)
        wt = wt.contiguous(memory_format=mf)
    if op == "conv2d_transpose":
        op_ = per(w.get("output_padding", 0), nd)
        return lambda: F.conv_transpose2d(x, wt, stride=stride, padding=pad,
                                          output_padding=op_, groups=groups, dilation=dil)
    f = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]
    return lambda: f(x, wt, stride=stride, padding=pad, dilation=dil, groups=groups)


def time_us(fn):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(20):
            fn()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(15):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000 / 20)
    times.sort()
    return times[len(times) // 2]


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    for line in sys.stdin:
        if not line.strip():
            continue
        name, dtype, js = line.split(" ", 2)
        try:
            w = json.loads(js)
            print(name, dtype, "%.2f" % time_us(make(w, DT[dtype])), flush=True)
        except Exception as e:  # a peer that cannot run this shape says so
            print(name, dtype, "failed:", str(e).splitlines()[0][:120], flush=True)


if __name__ == "__main__":
    main()
