"""PyTorch on CUDA, the peer of configs/bench/gpu-vs-torch.json: the workloads of docs/bench.md
in eager PyTorch on the first CUDA device, as a PyTorch user writes them. Each repetition ends
with torch.cuda.synchronize(), so it is timed to completion, like Ravel's repetitions (with
RAVEL_HIP_SYNC=1, see docs/hip.md). matmul is IEEE fp32 (TF32 off): the same arithmetic as
Ravel's GEMM. Protocol: bench/peers/ravel_peer_protocol.py. "unavailable" without CUDA."""
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "..", "bench", "peers"))
import ravel_peer_protocol as proto  # noqa: E402

args = proto.parse_args()
try:
    import torch
except ImportError as e:
    proto.unavailable(args, f"torch not installed ({e})")
if not torch.cuda.is_available():
    proto.unavailable(args, "torch.cuda.is_available() is false")

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.manual_seed(0)
dev = torch.device("cuda")
W, S = args.workload, args.size
proto.THREADS = f"cuda:{torch.cuda.get_device_name(0)}"


def u(*shape):
    return torch.rand(*shape, dtype=torch.float32, device=dev) * 2 - 1


def synced(fn):
    def call():
        r = fn()
        torch.cuda.synchronize()
        return r
    return call


def close(got, want, atol=1e-4, rtol=1e-3):
    return torch.allclose(got.double(), want, atol=atol, rtol=rtol)


with torch.no_grad():
    if W == "matmul":
        a, b = u(S[0], S[1]), u(S[1], S[2])
        proto.run(args, synced(lambda: a @ b), lambda r: close(r[:4], a[:4].double() @ b.double(), atol=1e-5 * S[1]))
    elif W == "elementwise":
        a, b, c = u(S[0]), u(S[0]), u(S[0])
        proto.run(args, synced(lambda: torch.exp(a) * b + c), lambda r: close(r, torch.exp(a.double()) * b + c))
    elif W == "softmax":
        x = u(S[0], S[1])
        proto.run(args, synced(lambda: torch.softmax(x, dim=1)),
                  lambda r: close(r[:64], torch.softmax(x[:64].double(), dim=1), atol=1e-6))
    elif W in ("sum_axis0", "sum_axis1"):
        x, ax = u(S[0], S[1]), 0 if W == "sum_axis0" else 1
        proto.run(args, synced(lambda: x.sum(dim=ax)), lambda r: close(r, x.double().sum(dim=ax), atol=1e-2))
    elif W in ("matmul_bf16", "matmul_f16", "elementwise_bf16", "elementwise_f16"):
        # Half rows: cuBLAS / PyTorch's kernels in the half dtype, checked
        # against f64 within the format's precision.
        dt = torch.bfloat16 if W.endswith("bf16") else torch.float16
        tol = 2 ** -7 if dt == torch.bfloat16 else 2 ** -10
        if W.startswith("matmul"):
            a, b = u(S[0], S[1]).to(dt), u(S[1], S[2]).to(dt)
            proto.run(args, synced(lambda: a @ b),
                      lambda r: close(r[:4], a[:4].double() @ b.double(), atol=4 * tol * S[1] ** 0.5, rtol=4 * tol))
        else:
            a, b, c = u(S[0]).to(dt), u(S[0]).to(dt), u(S[0]).to(dt)
            proto.run(args, synced(lambda: torch.exp(a) * b + c),
                      lambda r: close(r, torch.exp(a.double()) * b.double() + c.double(), atol=8 * tol, rtol=8 * tol))
    elif W == "transpose":
        x = u(S[0], S[1])
        proto.run(args, synced(lambda: x.t().contiguous()), lambda r: torch.equal(r, x.t()))

if W == "mlp":
    B = S[0]
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = u(B, 784), torch.randint(0, 10, (B,), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        return loss
    proto.run(args, step, lambda loss: bool(loss == loss) and float(loss) > 0)
elif W == "makemore":
    B, V, C, E, H = S[0], 27, 3, 10, 200
    g = [torch.randn(V, E, device=dev), u(C * E, H) * 0.18, u(H) * 0.18, u(H, V) * 0.07, u(V) * 0.07]
    for p in g:
        p.requires_grad_()
    ctx, tgt = torch.randint(0, V, (B, C), device=dev), torch.randint(0, V, (B,), device=dev)

    def step():
        emb = g[0][ctx].view(B, C * E)
        h = torch.tanh(emb @ g[1] + g[2])
        loss = torch.nn.functional.cross_entropy(h @ g[3] + g[4], tgt)
        for p in g:
            p.grad = None
        loss.backward()
        with torch.no_grad():
            for p in g:
                p -= 0.1 * p.grad
        torch.cuda.synchronize()
        return loss
    proto.run(args, step, lambda loss: bool(loss == loss) and float(loss) > 0)
elif W not in ("matmul", "elementwise", "softmax", "sum_axis0", "sum_axis1", "transpose", "matmul_bf16",
               "matmul_f16", "elementwise_bf16", "elementwise_f16"):
    proto.unavailable(args, f"the PyTorch CUDA peer has no workload {W}")
