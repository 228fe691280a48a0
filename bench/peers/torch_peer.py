"""PyTorch (CPU) peer for ravel-bench: the workloads of docs/bench.md in eager PyTorch; the MLP
step uses autograd and torch.optim.SGD, as a PyTorch user would write it.
Protocol: ravel_peer_protocol.py. Reports "unavailable" when PyTorch is not installed."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ravel_peer_protocol as proto  # noqa: E402

args = proto.parse_args()
try:
    import torch
except ImportError as e:
    proto.unavailable(args, f"torch not installed ({e}); scripts/setup-peers.sh installs it")

# ravel-bench gives every peer all cores (RAVEL_BENCH_THREADS; PyTorch's own default here is 1)
# and passive OpenMP waiting (OMP_WAIT_POLICY=PASSIVE, read when torch loads its OpenMP runtime).
threads = int(os.environ.get("RAVEL_BENCH_THREADS", "0") or 0) or os.cpu_count() or 1
torch.set_num_threads(threads)
proto.THREADS = (f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads, "
                 f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}")
torch.manual_seed(0)
W, S = args.workload, args.size


def u(*shape):
    return torch.rand(*shape, dtype=torch.float32) * 2 - 1


def close(got, want, atol=1e-4, rtol=1e-3):
    return torch.allclose(got.double(), want, atol=atol, rtol=rtol)


def run_classifier_step(model, opt, x, y):
    """Times one training step of a classifier (cross-entropy, backward, optimizer step)."""
    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()
    proto.run(args, step, lambda loss: loss == loss and loss > 0)


# Half rows (configs/bench/half-vs-f32.json): "matmul_bf16" is matmul with bf16 inputs and result,
# as ravel-bench's own half rows; PyTorch 1.13's CPU has no f16 matmul ("addmm_impl_cpu_ not
# implemented for 'Half'"), so an f16 row that PyTorch refuses is reported unavailable below.
HALF = {"_bf16": torch.bfloat16, "_f16": torch.float16}
DT = torch.float32
for _suffix, _dt in HALF.items():
    if W.endswith(_suffix):
        W, DT = W[: -len(_suffix)], _dt
        if W not in ("matmul", "elementwise", "muladd", "sum_axis0", "sum_axis1"):
            proto.unavailable(args, f"the PyTorch peer has no {_suffix[1:]} workload {W}")
# Half results are checked as ravel-bench checks its own: against double, with one rounding.
HALF_RTOL = {torch.float32: 0.0, torch.bfloat16: 1 / 256, torch.float16: 1 / 2048}[DT]


def h(t):
    """t in the row's dtype; a matmul's inputs as multiples of 1/8 (ravel-bench's, exact in halves)."""
    if DT is torch.float32:
        return t
    if W == "matmul":
        t = (t * 8).round() / 8
    return t.to(DT)


def run_half(fn, want_fn, atol):
    try:
        fn()
    except RuntimeError as e:  # an op PyTorch's CPU backend does not implement in this dtype
        proto.unavailable(args, f"PyTorch {torch.__version__} CPU: {e}")
    rows = 4 if W == "matmul" else None  # a matmul is checked on its first rows (want_fn's)
    proto.run(args, fn, lambda r: close(r[:rows].float(), want_fn(), atol=atol + 4 * HALF_RTOL, rtol=1e-3 + HALF_RTOL))


with torch.no_grad():
    if DT is not torch.float32 or W == "muladd":
        if W == "matmul":
            a, b = h(u(S[0], S[1])), h(u(S[1], S[2]))
            run_half(lambda: a @ b, lambda: a[:4].double() @ b.double(), 1e-5 * S[1])
        elif W == "elementwise":
            a, b, c = h(u(S[0])), h(u(S[0])), h(u(S[0]))
            run_half(lambda: torch.exp(a) * b + c, lambda: torch.exp(a.double()) * b.double() + c.double(), 1e-4)
        elif W == "muladd":
            a, b, c = h(u(S[0])), h(u(S[0])), h(u(S[0]))
            run_half(lambda: a * b + c, lambda: a.double() * b.double() + c.double(), 1e-6)
        else:
            x, ax = h(u(S[0], S[1])), 0 if W == "sum_axis0" else 1
            run_half(lambda: x.sum(dim=ax), lambda: x.double().sum(dim=ax), 1e-3)
    elif W == "matmul":
        a, b = u(S[0], S[1]), u(S[1], S[2])
        proto.run(args, lambda: a @ b, lambda r: close(r[:4], a[:4].double() @ b.double(), atol=1e-5 * S[1]))
    elif W == "elementwise":
        a, b, c = u(S[0]), u(S[0]), u(S[0])
        proto.run(args, lambda: torch.exp(a) * b + c, lambda r: close(r, torch.exp(a.double()) * b + c))
    elif W == "softmax":
        x = u(S[0], S[1])
        proto.run(args, lambda: torch.softmax(x, dim=1), lambda r: close(r, torch.softmax(x.double(), dim=1), atol=1e-6))
    elif W in ("sum_axis0", "sum_axis1"):
        x, ax = u(S[0], S[1]), 0 if W == "sum_axis0" else 1
        proto.run(args, lambda: x.sum(dim=ax), lambda r: close(r, x.double().sum(dim=ax), atol=1e-3))
    elif W == "transpose":
        x = u(S[0], S[1])
        proto.run(args, lambda: x.t().contiguous(), lambda r: torch.equal(r, x.t()))

if W == "mlp":
    B = S[0]
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = u(B, 784), torch.randint(0, 10, (B,))
    run_classifier_step(model, opt, x, y)
elif W in ("makemore", "makemore_eager"):
    # The main job's step (examples/makemore, ravel-bench's makemore workloads): 3-character
    # context, 27x10 embedding, tanh hidden 200, cross-entropy over 27, SGD lr 0.1, eager PyTorch.
    B = S[0]
    ctx, tgt = torch.randint(0, 27, (B, 3)), torch.randint(0, 27, (B,))
    C = torch.randn(27, 10).requires_grad_()
    W1 = ((torch.rand(30, 200) * 2 - 1) * 0.18).requires_grad_()
    b1 = ((torch.rand(200) * 2 - 1) * 0.18).requires_grad_()
    W2 = ((torch.rand(200, 27) * 2 - 1) * 0.07).requires_grad_()
    b2 = ((torch.rand(27) * 2 - 1) * 0.07).requires_grad_()
    params = [C, W1, b1, W2, b2]

    def step():
        emb = C[ctx].view(B, 30)
        h = torch.tanh(emb @ W1 + b1)
        loss = torch.nn.functional.cross_entropy(h @ W2 + b2, tgt)
        for p in params:
            p.grad = None
        loss.backward()
        with torch.no_grad():
            for p in params:
                p -= 0.1 * p.grad
        return loss.item()
    proto.run(args, step, lambda loss: loss == loss and loss > 0)
elif W == "conv2d":
    # One convolution forward and both gradients (ravel-bench's conv2d): size n, c, o, hw, k.
    n, c, o, hw, k = S
    x, w = u(n, c, hw, hw).requires_grad_(), u(o, c, k, k).requires_grad_()
    r = u(n, o, hw, hw)

    def step():
        y = torch.nn.functional.conv2d(x, w, padding=k // 2)
        gx, gw = torch.autograd.grad((y * r).sum(), [x, w])
        return y, gx, gw

    def ok(out):
        y = out[0]
        want = torch.nn.functional.conv2d(x.detach()[:1].double(), w.detach().double(), padding=k // 2)
        return close(y.detach()[:1], want, atol=1e-5 * c * k * k + 1e-4)
    proto.run(args, step, ok)
elif W == "max_pool2d":
    # 2x2 max pooling of a ReLU's output and its input gradient (ravel-bench's max_pool2d): size n, c, hw.
    n, c, hw = S
    x = torch.relu(u(n, c, hw, hw)).requires_grad_()
    r = u(n, c, hw // 2, hw // 2)

    def step():
        y = torch.nn.functional.max_pool2d(x, 2)
        (gx,) = torch.autograd.grad((y * r).sum(), [x])
        return y, gx

    def ok(out):
        want = x.detach().reshape(n, c, hw // 2, 2, hw // 2, 2).amax(dim=(3, 5))
        return torch.equal(out[0].detach(), want)
    proto.run(args, step, ok)
elif W == "cnn_step":
    # One Adam step of examples/fashion_mnist's CNN (ravel-bench's cnn_step), eager PyTorch.
    B = S[0]
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1, bias=False), torch.nn.BatchNorm2d(16), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1, bias=False), torch.nn.BatchNorm2d(32), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 7 * 7, 10))
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    x, y = torch.randn(B, 1, 28, 28), torch.randint(0, 10, (B,))
    run_classifier_step(model, opt, x, y)
elif W not in ("matmul", "elementwise", "muladd", "softmax", "sum_axis0", "sum_axis1", "transpose"):
    proto.unavailable(args, f"the PyTorch peer has no workload {W}")
