"""PyTorch DDP over Gloo: makemore's data-parallel step, the peer of `mpirun -np N makemore`
(bench/distributed/dp.sh). The same model (embedding 27 x E, a tanh layer of H units, 27
outputs), the same global batch B split into equal rows per rank, plain SGD, and the same data
(the lower-case, letters-only, distinct words of the word list, contexts of 3 characters).
Launched by mpirun: rank and size from OMPI_COMM_WORLD_*, rendezvous over a local TCP port.
Prints rank 0's "trained in X s (Y steps/s)" as makemore does. A benchmark, never a test.

  mpirun -np 2 python3 torch_ddp_peer.py [--steps N] [--batch B] [--hidden H] [--embed E]
"""
import argparse
import os
import random
import sys
import time

try:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
except ImportError as e:
    print(f"torch_ddp_peer: unavailable: PyTorch is not installed ({e}); apt-get install python3-torch", file=sys.stderr)
    sys.exit(3)

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=3000)
p.add_argument("--batch", type=int, default=64)
p.add_argument("--hidden", type=int, default=200)
p.add_argument("--embed", type=int, default=10)
p.add_argument("--block", type=int, default=3)
p.add_argument("--lr", type=float, default=0.1)
p.add_argument("--words", default="/usr/share/dict/american-english")
p.add_argument("--port", default="29517")
p.add_argument("--bucket-kb", type=int, default=0, help="DDP's bucket_cap_mb in KiB (0: its default, 25 MiB)")
a = p.parse_args()

rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", a.port)
# oneTBB gives each Ravel rank all cores; so does this (PyTorch's default is the physical cores).
torch.set_num_threads(os.cpu_count() or 1)
dist.init_process_group("gloo", rank=rank, world_size=size)

words = sorted({w.strip().lower() for w in open(a.words, encoding="utf-8", errors="ignore")
                if w.strip().isalpha() and w.strip().isascii()})
random.Random(42).shuffle(words)
ctx, tgt = [], []
for w in words[: len(words) * 9 // 10]:
    c = [0] * a.block
    for ch in w + ".":
        i = 0 if ch == "." else ord(ch) - 96
        ctx.append(c)
        tgt.append(i)
        c = c[1:] + [i]
X = torch.tensor(ctx, dtype=torch.int64)
Y = torch.tensor(tgt, dtype=torch.int64)


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(27, a.embed)
        self.hidden = torch.nn.Linear(a.block * a.embed, a.hidden)
        self.out = torch.nn.Linear(a.hidden, 27)

    def forward(self, x):
        return self.out(torch.tanh(self.hidden(self.emb(x).view(x.shape[0], -1))))


torch.manual_seed(42)
ddp_args = {"bucket_cap_mb": a.bucket_kb / 1024} if a.bucket_kb > 0 else {}
model = torch.nn.parallel.DistributedDataParallel(Mlp(), **ddp_args) if size > 1 else Mlp()
opt = torch.optim.SGD(model.parameters(), lr=a.lr)
g = torch.Generator().manual_seed(42)  # every rank draws the same global batch
lo, hi = a.batch * rank // size, a.batch * (rank + 1) // size
loss_sum = torch.zeros(())
start = time.perf_counter()
for step in range(a.steps):
    idx = torch.randint(0, X.shape[0], (a.batch,), generator=g)[lo:hi]
    loss = F.cross_entropy(model(X[idx]), Y[idx])
    opt.zero_grad(set_to_none=True)
    loss.backward()  # DDP all-reduces the gradient buckets during backward
    opt.step()
    loss_sum += loss.detach()
secs = time.perf_counter() - start
if rank == 0:
    print(f"torch_ddp_peer: {size} ranks, gloo, PyTorch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"trained in {secs:.1f} s ({a.steps / secs:.0f} steps/s); mean loss {float(loss_sum) / a.steps:.4f}")
dist.destroy_process_group()
