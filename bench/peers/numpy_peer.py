"""NumPy peer for ravel-bench: the workloads of docs/bench.md written the way a NumPy user would.
Protocol: ravel_peer_protocol.py. Reports "unavailable" when NumPy is not installed."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ravel_peer_protocol as proto  # noqa: E402

args = proto.parse_args()
try:
    import numpy as np
except ImportError as e:
    proto.unavailable(args, f"numpy not installed ({e}); scripts/setup-peers.sh installs it")

proto.THREADS = (f"NumPy {np.__version__}: one thread (BLAS for matmul: "
                 f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')})")
rng = np.random.default_rng(0)
W, S = args.workload, args.size


def u(*shape):
    return (rng.random(shape, dtype=np.float32) * 2 - 1).astype(np.float32)


def close(got, want, atol=1e-4, rtol=1e-3):
    return np.allclose(got, want, atol=atol, rtol=rtol)


if W == "matmul":
    a, b = u(S[0], S[1]), u(S[1], S[2])
    proto.run(args, lambda: a @ b, lambda r: close(r[:4], a[:4].astype(np.float64) @ b.astype(np.float64), atol=1e-5 * S[1]))
elif W == "elementwise":
    a, b, c = u(S[0]), u(S[0]), u(S[0])
    proto.run(args, lambda: np.exp(a) * b + c, lambda r: close(r, np.exp(a.astype(np.float64)) * b + c))
elif W == "softmax":
    x = u(S[0], S[1])

    def softmax():
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    x64 = x.astype(np.float64)
    proto.run(args, softmax, lambda r: close(r, np.exp(x64) / np.exp(x64).sum(axis=1, keepdims=True), atol=1e-6))
elif W in ("sum_axis0", "sum_axis1"):
    x, ax = u(S[0], S[1]), 0 if W == "sum_axis0" else 1
    proto.run(args, lambda: x.sum(axis=ax), lambda r: close(r, x.astype(np.float64).sum(axis=ax), atol=1e-3))
elif W == "transpose":
    x = u(S[0], S[1])
    proto.run(args, lambda: np.ascontiguousarray(x.T), lambda r: np.array_equal(r, x.T))
elif W == "mlp":
    B, dims, lr = S[0], (784, 512, 512, 10), 0.05
    x = u(B, 784)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, B)]
    params = [(u(dims[i], dims[i + 1]) * np.float32(np.sqrt(6 / dims[i])), u(dims[i + 1]) * np.float32(0.1)) for i in range(3)]

    def step():
        # Forward, the textbook backward for dense+ReLU and softmax cross-entropy, SGD.
        acts, zs = [x], []
        for i, (w, b) in enumerate(params):
            z = acts[-1] @ w + b
            zs.append(z)
            acts.append(np.maximum(z, 0) if i < 2 else z)
        logits = acts[-1]
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        p = e / e.sum(axis=1, keepdims=True)
        loss = -np.mean(np.sum(y * np.log(p), axis=1))
        d = (p - y) / B
        for i in (2, 1, 0):
            w, b = params[i]
            gw, gb = acts[i].T @ d, d.sum(axis=0)
            if i:
                d = (d @ w.T) * (zs[i - 1] > 0)
            params[i] = (w - lr * gw, b - lr * gb)
        return loss
    proto.run(args, step, lambda loss: np.isfinite(loss) and loss > 0)
else:
    proto.unavailable(args, f"the NumPy peer has no workload {W}")
