#!/usr/bin/env bash
# bench/distributed/run.sh BUILD_DIR [NP...]: Ravel's all-reduce against a plain MPI_Allreduce
# on the same bytes, in one run, for each rank count (default 2 4); prints a table with
# ravel/mpi time ratios (issue 22 asks for <= 1.1 from 4 KiB to 64 MiB). docs/distributed.md.
set -eu
build="${1:?usage: bench/distributed/run.sh BUILD_DIR [NP...]}"; shift
nps=("$@"); [ ${#nps[@]} -gt 0 ] || nps=(2 4)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for np in "${nps[@]}"; do
  run() { mpirun --oversubscribe --bind-to none -np "$np" "$@"; }
  out="$( { run "$build/bin/bench_mpi_allreduce_peer"; run "$build/bin/bench_allreduce"; run "$build/bin/bench_allreduce" --no-check; } 2>/dev/null)"
  echo "== $np ranks: median µs per all-reduce of f32 (rank 0)"
  printf '%10s %12s %12s %14s %9s %9s\n' bytes mpi ravel ravel-nocheck ratio ratio-nc
  for b in $(echo "$out" | awk '$1=="mpi"{print $2}'); do
    m=$(echo "$out" | awk -v b="$b" '$1=="mpi"&&$2==b{print $3}')
    r=$(echo "$out" | awk -v b="$b" '$1=="ravel"&&$2==b{print $3}')
    c=$(echo "$out" | awk -v b="$b" '$1=="ravel-nocheck"&&$2==b{print $3}')
    printf '%10s %12s %12s %14s %9.2f %9.2f\n' "$b" "$m" "$r" "$c" "$(echo "$r / $m" | bc -l)" "$(echo "$c / $m" | bc -l)"
  done
done
