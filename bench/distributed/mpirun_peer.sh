#!/usr/bin/env bash
# bench/distributed/mpirun_peer.sh NP PROGRAM [ARGS...]: runs a ravel-bench peer under
# `mpirun -np NP` (configs/bench/distributed.json), forwarding ravel-bench's peer arguments
# (--workload, --size, --warmup, --reps); only the program's rank 0 prints its JSON line. Ranks
# share this machine's cores (--oversubscribe, unbound); root may run mpirun. Without mpirun the
# exit status is 127, which ravel-bench reports as "peer unavailable" (docs/bench.md).
set -u
np="${1:?usage: mpirun_peer.sh NP PROGRAM [ARGS...]}"; shift
command -v mpirun > /dev/null || { echo "mpirun_peer.sh: mpirun not found (apt-get install openmpi-bin)" >&2; exit 127; }
[ -e "$1" ] || command -v "$1" > /dev/null || { echo "mpirun_peer.sh: $1 not found" >&2; exit 127; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# PyTorch's OpenMP threads spin at barriers by default (bench/distributed/dp.sh).
export OMP_WAIT_POLICY=PASSIVE
exec mpirun --oversubscribe --bind-to none -np "$np" "$@"
