#!/usr/bin/env python3
"""PyTorch (CPU) peer for bench_fused_elementwise: d = torch.exp(a) * b + c over N f32.

Same inputs as the C++ benchmark (a = sin(0.001 i), b = 0.5 + 0.25 cos(0.002 i),
c = 1 / (1 + i % 7)) and torch.set_num_threads(os.cpu_count()) so both use every core.

Standalone:   torch_fused.py [N] [repetitions]
  prints one line: "torch_fused n=N reps=R threads=T min_ms=X median_ms=Y torch=VERSION"
Server mode:  torch_fused.py --serve [N]   (used by bench_fused_elementwise to interleave runs)
  prints "ready threads=T torch=VERSION", then for every "run" line on stdin times one
  evaluation and prints "ms X"; exits on "quit" or end of input.
"""
import os
import sys
import time


def setup(n):
    import torch
    torch.set_num_threads(os.cpu_count() or 1)
    i = torch.arange(n, dtype=torch.float32)
    a = torch.sin(0.001 * i)
    b = 0.5 + 0.25 * torch.cos(0.002 * i)
    c = 1.0 / (1 + torch.remainder(torch.arange(n), 7)).to(torch.float32)
    return torch, a, b, c


def once(torch, a, b, c):
    t0 = time.perf_counter()
    d = torch.exp(a) * b + c
    dt = time.perf_counter() - t0
    del d
    return dt


def main():
    args = sys.argv[1:]
    if args and args[0] == "--serve":
        n = int(args[1]) if len(args) > 1 else 1 << 24
        torch, a, b, c = setup(n)
        print(f"ready threads={torch.get_num_threads()} torch={torch.__version__}", flush=True)
        for line in sys.stdin:
            if line.strip() != "run":
                break
            print(f"ms {once(torch, a, b, c) * 1e3:.4f}", flush=True)
        return
    n = int(args[0]) if args else 1 << 24
    reps = int(args[1]) if len(args) > 1 else 20
    torch, a, b, c = setup(n)
    times = [once(torch, a, b, c) for _ in range(reps + 2)][2:]  # two warm-up rounds, like the C++ side
    times.sort()
    print(f"torch_fused n={n} reps={reps} threads={torch.get_num_threads()} "
          f"min_ms={times[0] * 1e3:.3f} median_ms={times[len(times) // 2] * 1e3:.3f} torch={torch.__version__}")


if __name__ == "__main__":
    main()
