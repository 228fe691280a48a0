#!/usr/bin/env bash
# bench/distributed/run.sh BUILD_DIR [NP...]: Ravel's all-reduce against plain MPI on the same
# bytes, in one run, for each rank count (default 2 4). Columns (median µs, rank 0):
#   mpi      MPI_Allreduce                      mpi-nb   MPI_Iallreduce polled with MPI_Test
#   plugin   the communicator plugin alone      tensor   ravel::distributed::all_reduce on a tensor
#   tensor-nc  the same without the argument header (Options::check_arguments = false)
#   mpi-p2p  (2 ranks, up to 64 KiB) the plugin's small path written in plain C (Note [Small all-reduces])
# and the plugin's and the tensor path's time over MPI_Allreduce's. RAVEL_BENCH_MAX_BYTES=65536
# stops every program after that size. docs/distributed.md.
set -eu
build="${1:?usage: bench/distributed/run.sh BUILD_DIR [NP...]}"; shift
nps=("$@"); [ ${#nps[@]} -gt 0 ] || nps=(2 4)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
plugin="$build/lib/ravel/plugins/libravel_comm_mpi.so"
for np in "${nps[@]}"; do
  run() { mpirun --oversubscribe --bind-to none -np "$np" -x RAVEL_BENCH_MAX_BYTES="${RAVEL_BENCH_MAX_BYTES:-}" "$@"; }
  out="$( { run "$build/bin/bench_mpi_allreduce_peer"; run "$build/bin/bench_comm_plugin" "$plugin";
            run "$build/bin/bench_allreduce"; run "$build/bin/bench_allreduce" --no-check; } 2>/dev/null)"
  echo "== $np ranks: median µs per f32 all-reduce (rank 0; $(uptime | sed 's/.*load/load/'))"
  printf '%10s %11s %11s %11s %11s %11s %11s %8s %8s\n' bytes mpi mpi-nb mpi-p2p plugin tensor tensor-nc plugin/mpi tensor/mpi
  get() { echo "$out" | awk -v k="$1" -v b="$2" '$1==k&&$2==b{print $3}'; }
  for b in $(echo "$out" | awk '$1=="mpi"{print $2}'); do
    m=$(get mpi "$b"); p=$(get plugin "$b"); t=$(get ravel "$b")
    printf '%10s %11s %11s %11s %11s %11s %11s %8.2f %8.2f\n' "$b" "$m" "$(get mpi-nb "$b")" "$(get mpi-p2p "$b")" "$p" "$t" "$(get ravel-nocheck "$b")" \
      "$(echo "$p / $m" | bc -l)" "$(echo "$t / $m" | bc -l)"
  done
done
