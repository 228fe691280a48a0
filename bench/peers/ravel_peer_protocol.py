"""The ravel-bench peer protocol (docs/bench.md, "Peers"), shared by numpy_peer.py and torch_peer.py.

A peer is run once per workload and size as
    PEER --workload NAME --size AxBxC --warmup W --reps R
and prints one JSON object per line: either a result
    {"workload": "matmul", "size": [256, 256, 256], "median_ms": 1.2, "min_ms": 1.1, "max_ms": 1.5,
     "reps": 10, "checked": true}
or {"workload": ..., "size": ..., "unavailable": "why"} (for example when its library is missing).
Lines that do not start with "{" are ignored. A non-zero exit status means the peer failed.
A result may carry "threads": the runner's thread settings as it used them (set THREADS).
"""
import argparse
import json
import statistics
import sys
import time

THREADS = ""  # the peer's thread settings, reported with its result


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--workload", required=True)
    p.add_argument("--size", required=True, help="sizes joined by 'x', e.g. 256x256x256")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--reps", type=int, default=5)
    a = p.parse_args()
    a.size = [int(v) for v in a.size.split("x")]
    return a


def unavailable(args, why):
    print(json.dumps({"workload": args.workload, "size": args.size, "unavailable": why}))
    sys.exit(0)


def run(args, fn, check):
    """Times fn() args.reps times after args.warmup untimed calls; check(result) must be true
    (the result of the first call is checked against a naive computation before any timing)."""
    if not check(fn()):
        print(f"{args.workload} {args.size}: result differs from the naive computation", file=sys.stderr)
        sys.exit(1)
    for _ in range(args.warmup):
        fn()
    ms = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({"workload": args.workload, "size": args.size, "median_ms": statistics.median(ms),
                      "min_ms": min(ms), "max_ms": max(ms), "mean_ms": statistics.fmean(ms),
                      "reps": len(ms), "checked": True, "threads": THREADS}))
