#!/usr/bin/env python3
"""bench/graph_peer.py — the peer of graph workloads: the same graph document
run by PyTorch, eager and (where PyTorch has it) torch.compile, on the same
shapes and dtypes, with the ideal traffic of the graph (every input read once,
every output written once) to turn times into GB/s.

    python3 bench/graph_peer.py [--device cpu|cuda] [--compile] [--threads N]
                                [--repeats R] GRAPH.json...

Prints, per graph: NAME MODE MICROSECONDS IDEAL_BYTES GB/s KERNELS, MODE being
eager or compiled (or "failed: why"; each graph compiled afresh, static shapes,
mode max-autotune-no-cudagraphs on CUDA where the graph has a heavy operator),
KERNELS the CUDA kernels one call launches (- on the CPU).  On
CUDA each figure is the median of R replays
of a CUDA graph of 20 calls (as bench/torch_peer.py times the single-operator
peer); on the CPU the median of R timed runs of enough calls to last 50 ms.
The graph is read the way tird reads it (tuner/graph_parse.c): NumPy
broadcasting, reductions over "dim" with "keepdim", views, float32 or float16
inputs; the arithmetic is in the inputs' dtype as PyTorch does it.
"""
import json
import math
import statistics
import sys
import time

import torch

DT = {"float32": torch.float32, "float16": torch.float16}
POINTWISE = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
    "neg": lambda a: -a, "relu": torch.relu,
    "gelu": torch.nn.functional.gelu, "exp": torch.exp, "tanh": torch.tanh,
    "sigmoid": torch.sigmoid, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
}


HEAVY = ("matmul", "conv1d", "conv2d", "conv3d", "conv2d_transpose", "depthwise_conv2d")


def dims(node, rank):
    d = node.get("dim", list(range(rank)))
    d = d if isinstance(d, list) else [d]
    return [x % rank for x in d]


def build(g):
    """A function of the inputs (in name order) computing the outputs."""
    names = sorted(g["inputs"])

    def run(*xs):
        v = dict(zip(names, xs))

        def arg(a):
            return v[a] if isinstance(a, str) else a
        for n in g["nodes"]:
            op, args = n["op"], [arg(a) for a in n.get("args", [])]
            if op in POINTWISE:
                r = POINTWISE[op](*args)
            elif op == "cast":
                r = args[0].to(DT[n["dtype"]])
            elif op in ("sum", "mean", "amax", "amin"):
                x = args[0]
                d, kd = dims(n, x.dim()), n.get("keepdim", False)
                r = {"sum": lambda: torch.sum(x, d, keepdim=kd),
                     "mean": lambda: torch.mean(x, d, keepdim=kd),
                     "amax": lambda: torch.amax(x, d, keepdim=kd),
                     "amin": lambda: torch.amin(x, d, keepdim=kd)}[op]()
            elif op == "reshape":
                r = args[0].reshape(n["shape"])
            elif op == "permute":
                r = args[0].permute(n["dims"])
            elif op == "expand":
                r = args[0].expand(n["shape"])
            elif op == "slice":
                x = args[0]
                sl = [slice(None)] * x.dim()
                sl[n["dim"] % x.dim()] = slice(n.get("start"), n.get("end"), n.get("step", 1))
                r = x[tuple(sl)]
            elif op == "matmul":
                r = torch.matmul(args[0], args[1])
            else:
                raise ValueError("node %s: op %s has no PyTorch form here" % (n["name"], op))
            v[n["name"]] = r
        outs = tuple(v[o] for o in g["outputs"])
        return outs if len(outs) > 1 else outs[0]
    return names, run


def ideal_bytes(g, outs):
    b = 0
    for spec in g["inputs"].values():
        b += math.prod(spec["shape"]) * (2 if spec.get("dtype") == "float16" else 4)
    for o in outs if isinstance(outs, tuple) else (outs,):
        b += o.numel() * o.element_size()
    return b


def time_cuda(fn, xs, repeats):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(3):
            fn(*xs)
    torch.cuda.synchronize()
    gr = torch.cuda.CUDAGraph()
    with torch.cuda.graph(gr, stream=s):
        for _ in range(20):
            fn(*xs)
    ts = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        gr.replay()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) * 1e3 / 20)
    return statistics.median(ts)


def cuda_kernels(fn, xs):
    """The CUDA kernels one call launches (the profiler's kernel events)."""
    fn(*xs)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
        fn(*xs)
        torch.cuda.synchronize()
    return sum(e.count for e in p.key_averages()
               if e.device_type == torch.autograd.DeviceType.CUDA)


def time_cpu(fn, xs, repeats):
    fn(*xs)
    t0 = time.perf_counter()
    fn(*xs)
    one = max(time.perf_counter() - t0, 1e-6)
    calls = max(1, int(0.05 / one))
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(*xs)
        ts.append((time.perf_counter() - t0) * 1e6 / calls)
    return statistics.median(ts)


def main(argv):
    dev, compiled, threads, repeats, files = "cpu", False, 0, 15, []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--device":
            dev = argv[i + 1]; i += 2
        elif a == "--compile":
            compiled = True; i += 1
        elif a == "--threads":
            threads = int(argv[i + 1]); i += 2
        elif a == "--repeats":
            repeats = int(argv[i + 1]); i += 2
        else:
            files.append(a); i += 1
    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(1)
    for f in files:
        g = json.load(open(f))
        name = f.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        names, run = build(g)
        xs = [torch.randn(g["inputs"][n]["shape"], device=dev,
                          dtype=DT[g["inputs"][n].get("dtype", "float32")]) for n in names]
        with torch.no_grad():
            outs = run(*xs)
            nbytes = ideal_bytes(g, outs)
            modes = [("eager", run)]
            if compiled:
                if not hasattr(torch, "compile"):
                    print("%s compiled failed: torch %s has no torch.compile" % (name, torch.__version__))
                else:
                    # every graph's function has the same code object (build's
                    # closure): without a reset, the second graph would be a
                    # recompilation, which torch.compile makes shape-dynamic
                    # (slower kernels: softmax 57 us against 34 us alone)
                    torch._dynamo.reset()
                    heavy = any(n["op"] in HEAVY for n in g["nodes"])
                    mode = "max-autotune-no-cudagraphs" if heavy and dev == "cuda" else "default"
                    modes.append(("compiled", torch.compile(run, dynamic=False, mode=mode)))
            for mode, fn in modes:
                try:
                    us = (time_cuda if dev == "cuda" else time_cpu)(fn, xs, repeats)
                    k = cuda_kernels(fn, xs) if dev == "cuda" else "-"
                    print("%s %s %.2f %d %.1f %s" % (name, mode, us, nbytes, nbytes / (us * 1e3), k))
                except Exception as e:        # a failed peer is reported, not fatal
                    print("%s %s failed: %s" % (name, mode, str(e).splitlines()[0][:200]))
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
