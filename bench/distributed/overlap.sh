#!/usr/bin/env bash
# bench/distributed/overlap.sh BUILD_DIR [ROUNDS] [NP...]: makemore's data-parallel step with its
# gradient buckets begun during the backward pass (Note [Gradient buckets]) against the same
# binary with RAVEL_DDP_OVERLAP=0 (every gradient realized before the first bucket begins: the
# behaviour before decision 47), and PyTorch DDP over Gloo (torch_ddp_peer.py, bucket_cap_mb the same size), interleaved run by
# run. Both models of dp.sh (makemore: embed 10, hidden 200; mlp: embed 32, hidden 1024), global
# batch 64, BUCKET_KB (default 16: five buckets for either model). Prints each run's steps/s on
# rank 0 and the medians. A benchmark, never a test. Not under `chrt -f` with several ranks on a
# shared machine: a real-time rank that waits for a peer sharing its core polls for a second
# before it naps (Note [Deadlines by polling], plugins/mpi/mpi_request.cpp), and SCHED_FIFO never
# time-slices it away, so each all-reduce can cost a second (seen: 3000 MLP steps not done in 6
# minutes when another real-time benchmark held the other core).
set -eu
build="${1:?usage: bench/distributed/overlap.sh BUILD_DIR [ROUNDS] [NP...]}"; shift
rounds="${1:-3}"; [ $# -gt 0 ] && shift
nps=("$@"); [ ${#nps[@]} -gt 0 ] || nps=(1 2)
here="$(cd "$(dirname "$0")" && pwd)"
py="${PYTHON:-/usr/bin/python3}"
bucket="${BUCKET_KB:-16}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=PASSIVE
run() { local np="$1"; shift; timeout 600 mpirun --oversubscribe --bind-to none -np "$np" "$@" 2>&1; }
rate() { sed -n 's/.*trained in .* s (\([0-9.]*\) steps\/s).*/\1/p' | head -1; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo "# $(date -u +%FT%TZ), $(nproc) cores, $(uptime | sed 's/.*load/load/'), buckets of $bucket KiB"
printf '%-8s %3s %-30s %-30s %-30s %8s %8s %8s\n' model np "overlap steps/s (runs)" "no overlap (runs)" "torch DDP (runs)" overlap no-ovl torch
for model in makemore mlp; do
  if [ "$model" = makemore ]; then m=(--hidden 200 --embed 10); else m=(--hidden 1024 --embed 32); fi
  for np in "${nps[@]}"; do
    on=""; off=""; t=""
    for ((i = 0; i < rounds; i++)); do
      on+=" $(run "$np" "$build/bin/makemore" --steps 3000 "${m[@]}" --bucket-kb "$bucket" --out /tmp | rate)"
      off+=" $(RAVEL_DDP_OVERLAP=0 run "$np" "$build/bin/makemore" --steps 3000 "${m[@]}" --bucket-kb "$bucket" --out /tmp | rate)"
      t+=" $(run "$np" "$py" "$here/torch_ddp_peer.py" --steps 600 "${m[@]}" --bucket-kb "$bucket" | rate)"
    done
    rm -f /tmp/makemore-loss.svg
    printf '%-8s %3s %-30s %-30s %-30s %8s %8s %8s\n' "$model" "$np" "$on" "$off" "$t" \
      "$(echo "$on" | median)" "$(echo "$off" | median)" "$(echo "$t" | median)"
  done
done
echo "# end $(date -u +%FT%TZ), $(uptime | sed 's/.*load/load/')"
