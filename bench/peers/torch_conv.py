"""PyTorch side of bench/conv.cpp: the same rows (f32, medians of `reps` after one warm-up), with
torch.set_num_threads(nproc) as docs/performance.md's other peers.
    python3 bench/peers/torch_conv.py [reps] [--no-resnet] [--activation] [--dw] [--row14]"""
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

torch.set_num_threads(os.cpu_count())
args = [a for a in sys.argv[1:] if not a.startswith("--")]
REPS = int(args[0]) if args else 10
RESNET = "--no-resnet" not in sys.argv
torch.manual_seed(0)


def median_ms(reps, f):
    f()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        t.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(t)


def row(name, ms, gflop=0.0):
    extra = f"  {gflop / (ms * 1e-3):7.1f} GFLOP/s" if gflop else ""
    print(f"{name:<44} {ms:10.3f} ms{extra}", flush=True)


def conv_rows(reps, n, c, o, hw, input_grad):
    x = torch.randn(n, c, hw, hw, requires_grad=input_grad)
    w = (torch.randn(o, c, 3, 3) * 0.1).requires_grad_()
    b = torch.zeros(o, requires_grad=True)
    flop = 2.0 * n * o * hw * hw * c * 9 * 1e-9
    with torch.no_grad():
        row(f"conv2d {n}x{c}x{hw}x{hw} -> {o}, 3x3 fwd", median_ms(reps, lambda: F.conv2d(x, w, b, padding=1)), flop)
    cot = torch.randn(n, o, hw, hw)
    wrt = [x, w, b] if input_grad else [w, b]
    row(f"conv2d {n}x{c}x{hw}x{hw} -> {o}, 3x3 fwd+bwd",
        median_ms(reps, lambda: torch.autograd.grad((F.conv2d(x, w, b, padding=1) * cot).sum(), wrt)),
        flop * (3 if input_grad else 2))


def activation_rows(reps, n, c, o, hw, g):
    x = torch.randn(n, c, hw, hw, requires_grad=True)
    w = (torch.randn(o, c // g, 3, 3) * 0.1).requires_grad_()
    b = (torch.randn(o) * 0.1).requires_grad_()
    cot = torch.randn(n, o, hw, hw)
    flop = 2.0 * n * o * hw * hw * (c // g) * 9 * 1e-9
    f = lambda: F.relu(F.conv2d(x, w, b, padding=1, groups=g))
    with torch.no_grad():
        row(f"relu(conv2d) {n}x{c}x{hw}x{hw} -> {o} g{g} fwd", median_ms(reps, f), flop)
    row(f"relu(conv2d) {n}x{c}x{hw}x{hw} -> {o} g{g} fwd+bwd",
        median_ms(reps, lambda: torch.autograd.grad((f() * cot).sum(), [x, w, b])), flop * 3)


def weight_gradient_row(reps, n, c, o, hw):
    # dw alone, as Ravel's row computes it (no forward): aten's convolution_backward, dw only.
    x = torch.randn(n, c, hw, hw)
    w = torch.randn(o, c, 3, 3) * 0.1
    cot = torch.randn(n, o, hw, hw)
    f = lambda: torch.ops.aten.convolution_backward(cot, x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1,
                                                    [False, True, False])
    row(f"conv2d {n}x{c}x{hw}x{hw} -> {o}, 3x3 dw only", median_ms(reps, f), 2.0 * n * o * hw * hw * c * 9 * 1e-9)


if "--row14" in sys.argv:
    conv_rows(REPS, 128, 32, 64, 14, True)
    activation_rows(REPS, 128, 32, 64, 14, 1)
    weight_gradient_row(REPS, 128, 32, 64, 14)
    sys.exit(0)
if "--dw" in sys.argv:
    weight_gradient_row(REPS, 128, 32, 64, 14)
    weight_gradient_row(REPS, 32, 64, 64, 28)
    sys.exit(0)
if "--activation" in sys.argv:
    activation_rows(REPS, 32, 64, 64, 28, 1)
    activation_rows(REPS, 32, 64, 64, 28, 64)
    activation_rows(REPS, 128, 1, 32, 28, 1)
    activation_rows(REPS, 128, 32, 64, 14, 1)
    weight_gradient_row(REPS, 128, 32, 64, 14)
    sys.exit(0)
conv_rows(REPS, 128, 1, 32, 28, False)
conv_rows(REPS, 128, 32, 64, 14, True)
x = torch.randn(128, 32, 28, 28, requires_grad=True)
with torch.no_grad():
    row("max_pool2d 128x32x28x28 k2 fwd", median_ms(REPS, lambda: F.max_pool2d(x, 2)))
cot = torch.randn(128, 32, 14, 14)
row("max_pool2d 128x32x28x28 k2 fwd+bwd", median_ms(REPS, lambda: torch.autograd.grad((F.max_pool2d(x, 2) * cot).sum(), [x])))
B = 128
xb = torch.randn(B, 1, 28, 28)
y = (torch.rand(B) * 10).long()
ps = [(torch.randn(32, 1, 3, 3) * 0.3).requires_grad_(), torch.zeros(32, requires_grad=True),
      (torch.randn(64, 32, 3, 3) * 0.06).requires_grad_(), torch.zeros(64, requires_grad=True),
      (torch.randn(3136, 10) * 0.02).requires_grad_(), torch.zeros(10, requires_grad=True)]


def step():
    h = F.max_pool2d(F.relu(F.conv2d(xb, ps[0], ps[1], padding=1)), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, ps[2], ps[3], padding=1)), 2)
    loss = F.cross_entropy(h.reshape(B, 3136) @ ps[4] + ps[5], y)
    torch.autograd.grad(loss, ps)


row("cnn step (b128: conv32, pool, conv64, pool, fc)", median_ms(REPS, step))
if RESNET:
    conv_rows(max(3, REPS // 3), 32, 64, 64, 56, True)
