"""PyTorch over Gloo as a ravel-bench peer (docs/bench.md, "Peers"), launched under mpirun by
bench/distributed/mpirun_peer.sh (configs/bench/distributed.json):

  mpirun -np N python3 torch_dist_peer.py --workload all_reduce --size N --warmup W --reps R
  mpirun -np N python3 torch_dist_peer.py --workload makemore --size B --warmup W --reps R
  mpirun -np N python3 torch_dist_peer.py --workload makemore_mlp --size B --warmup W --reps R

makemore: ravel-bench's makemore step (3-character context, embedding 27x10, tanh hidden 200,
cross-entropy over 27, SGD lr 0.1) under DistributedDataParallel: the global batch B of random
contexts (the same on every rank) split into equal rows, each repetition one step after a
barrier, rank 0's time; checked once: the first step's loss averaged over the ranks against the
model's loss on the whole batch in one process. As bench_dist_peer does for Ravel. makemore_mlp:
the same step widened as bench/distributed/dp.sh's MLP (embedding 27x32, hidden 1024), DDP
buckets of 64 KiB (bucket_cap_mb=1/16), as bench_dist_peer's DataParallel buckets.

Every rank all-reduces (sum) n f32 elements with torch.distributed.all_reduce over Gloo; each
repetition starts after a barrier, and rank 0's time of the call is reported, as bench_dist_peer
(Ravel) and bench_mpi_allreduce_peer (MPI_Allreduce) report theirs. Checked once against the sum
computed locally. Rank and size from mpirun's OMPI_COMM_WORLD_*, rendezvous over a local TCP port.
Only rank 0 prints, one JSON line. A benchmark, never a test.
"""
import argparse
import json
import os
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("--workload", default="")
p.add_argument("--size", default="0")
p.add_argument("--warmup", type=int, default=1)
p.add_argument("--reps", type=int, default=5)
p.add_argument("--port", default="29533")
a = p.parse_args()
n = int(a.size.split("x")[0])
rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))


def say(obj):
    if rank == 0:
        print(json.dumps(obj), flush=True)


if a.workload not in ("all_reduce", "makemore", "makemore_mlp"):
    say({"workload": a.workload, "size": [n], "unavailable": "torch_dist_peer runs all_reduce [n], makemore [batch] and makemore_mlp [batch] only"})
    sys.exit(0)
try:
    import torch
    import torch.distributed as dist
except ImportError as e:
    say({"workload": a.workload, "size": [n], "unavailable": f"PyTorch is not installed ({e})"})
    sys.exit(0)

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", a.port)
dist.init_process_group("gloo", rank=rank, world_size=size)


def makemore(name):
    # makemore_mlp: embedding 32, hidden 1024, DDP buckets of 64 KiB (as bench_dist_peer's).
    import torch.nn.functional as F
    wide = name == "makemore_mlp"
    embed, hid = (32, 1024) if wide else (10, 200)
    if n % size:
        say({"workload": name, "size": [n], "unavailable": f"the batch is not divisible by {size} ranks"})
        return
    torch.set_num_threads(os.cpu_count() or 1)  # as oneTBB gives each Ravel rank
    g = torch.Generator().manual_seed(41)
    ctx = torch.randint(0, 27, (n, 3), generator=g)
    tgt = torch.randint(0, 27, (n,), generator=g)
    lo, hi = n * rank // size, n * (rank + 1) // size

    class Mlp(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(27, embed)
            self.hidden = torch.nn.Linear(3 * embed, hid)
            self.out = torch.nn.Linear(hid, 27)

        def forward(self, x):
            return self.out(torch.tanh(self.hidden(self.emb(x).view(x.shape[0], -1))))

    torch.manual_seed(42)
    net = Mlp()
    with torch.no_grad():
        whole = float(F.cross_entropy(net(ctx), tgt))  # before any step: the check's reference
    ddp_args = {"bucket_cap_mb": 1 / 16} if wide else {}
    model = torch.nn.parallel.DistributedDataParallel(net, **ddp_args) if size > 1 else net
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step():
        loss = F.cross_entropy(model(ctx[lo:hi]), tgt[lo:hi])
        opt.zero_grad(set_to_none=True)
        loss.backward()  # DDP all-reduces the gradient buckets during backward
        opt.step()
        return loss.detach()

    first = step().clone()
    dist.all_reduce(first)
    if abs(float(first) / size - whole) > 1e-4 * max(1.0, abs(whole)):
        print(f"torch_dist_peer: {name} loss {float(first) / size} against {whole}", file=sys.stderr)
        sys.exit(1)
    ms = []
    for r in range(a.warmup + a.reps):
        dist.barrier()
        t0 = time.perf_counter()
        step()
        t = (time.perf_counter() - t0) * 1e3
        if r >= a.warmup:
            ms.append(t)
    ms.sort()
    say({"workload": name, "size": [n], "median_ms": ms[len(ms) // 2], "min_ms": ms[0], "max_ms": ms[-1],
         "reps": a.reps, "checked": True,
         "threads": f"{size} ranks, DDP over gloo, torch {torch.__version__}, {torch.get_num_threads()} threads"})


if a.workload in ("makemore", "makemore_mlp"):
    makemore(a.workload)
    dist.destroy_process_group()
    sys.exit(0)
x = torch.tensor([float((i + rank) % 7) for i in range(n)], dtype=torch.float32)
y = x.clone()
dist.all_reduce(y)
want = torch.tensor([float(sum((i + r) % 7 for r in range(size))) for i in range(n)], dtype=torch.float32)
if not torch.equal(y, want):
    print("torch_dist_peer: wrong sum", file=sys.stderr)
    sys.exit(1)
ms = []
for r in range(a.warmup + a.reps):
    y.copy_(x)  # all_reduce is in place: every repetition reduces the same values
    dist.barrier()
    t0 = time.perf_counter()
    dist.all_reduce(y)
    t = (time.perf_counter() - t0) * 1e3
    if r >= a.warmup:
        ms.append(t)
ms.sort()
say({"workload": "all_reduce", "size": [n], "median_ms": ms[len(ms) // 2], "min_ms": ms[0], "max_ms": ms[-1],
     "reps": a.reps, "checked": True, "threads": f"{size} ranks, gloo, torch {torch.__version__}"})
dist.destroy_process_group()
