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

torch.manual_seed(0)
W, S = args.workload, args.size


def u(*shape):
    return torch.rand(*shape, dtype=torch.float32) * 2 - 1


def close(got, want, atol=1e-4, rtol=1e-3):
    return torch.allclose(got.double(), want, atol=atol, rtol=rtol)


with torch.no_grad():
    if W == "matmul":
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

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()
    proto.run(args, step, lambda loss: loss == loss and loss > 0)
elif W not in ("matmul", "elementwise", "softmax", "sum_axis0", "sum_axis1", "transpose"):
    proto.unavailable(args, f"the PyTorch peer has no workload {W}")
