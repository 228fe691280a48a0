"""PyTorch's all-reduce over Gloo as a ravel-bench peer (docs/bench.md, "Peers"), launched under
mpirun by bench/distributed/mpirun_peer.sh (configs/bench/distributed.json):

  mpirun -np N python3 torch_allreduce_peer.py --workload all_reduce --size N --warmup W --reps R

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


if a.workload != "all_reduce":
    say({"workload": a.workload, "size": [n], "unavailable": "torch_allreduce_peer runs all_reduce [n] only"})
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
x = torch.tensor([float((i + rank) % 7) for i in range(n)], dtype=torch.float32)
y = x.clone()
dist.all_reduce(y)
want = torch.tensor([float(sum((i + r) % 7 for r in range(size))) for i in range(n)], dtype=torch.float32)
if not torch.equal(y, want):
    print("torch_allreduce_peer: wrong sum", file=sys.stderr)
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
