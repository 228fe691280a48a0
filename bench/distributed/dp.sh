#!/usr/bin/env bash
# bench/distributed/dp.sh BUILD_DIR [ROUNDS] [NP...]: makemore's data-parallel step (Ravel,
# `mpirun -np N build/bin/makemore`) against PyTorch DDP over Gloo (torch_ddp_peer.py) with the
# same ranks, model and global batch (64), interleaved round by round. Two models: makemore's
# (embed 10, hidden 200) and a wider MLP (embed 32, hidden 1024). Prints each run's steps/s on
# rank 0, the medians, and Ravel's step time over PyTorch's (the issue's target: <= 0.8).
# MODELS="makemore" runs one of them; PYTHON (default Debian's /usr/bin/python3) and WORDS (default
# makemore's word list) for another machine (scripts/gpu-check.sh). A benchmark, never a test.
# docs/distributed.md has the numbers.
set -eu
build="${1:?usage: bench/distributed/dp.sh BUILD_DIR [ROUNDS] [NP...]}"; shift
rounds="${1:-3}"; [ $# -gt 0 ] && shift
nps=("$@"); [ ${#nps[@]} -gt 0 ] || nps=(1 2 4)
here="$(cd "$(dirname "$0")" && pwd)"
py="${PYTHON:-/usr/bin/python3}"  # Debian's python3-torch lives there, whatever python3 is first on PATH
words=(); [ -n "${WORDS:-}" ] && words=(--words "$WORDS")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# PyTorch's OpenMP threads spin at barriers by default: on a shared 2-core machine that made the
# single-process peer 14x slower (39 against 550 steps/s); ravel-bench's peers wait passively too.
export OMP_WAIT_POLICY=PASSIVE
models="${MODELS:-makemore mlp}"
run() { local np="$1"; shift; timeout 600 mpirun --oversubscribe --bind-to none -np "$np" "$@" 2>&1; }
rate() { sed -n 's/.*trained in .* s (\([0-9.]*\) steps\/s).*/\1/p' | head -1; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo "# $(date -u +%FT%TZ), $(nproc) cores, $(uptime | sed 's/.*load/load/')"
printf '%-8s %3s %-28s %-28s %8s %8s %10s\n' model np "ravel steps/s (runs)" "torch steps/s (runs)" ravel torch ravel/torch
for model in $models; do
  if [ "$model" = makemore ]; then m=(--hidden 200 --embed 10); else m=(--hidden 1024 --embed 32); fi
  for np in "${nps[@]}"; do
    r=""; t=""
    for ((i = 0; i < rounds; i++)); do
      r+=" $(run "$np" "$build/bin/makemore" --steps 3000 "${m[@]}" "${words[@]}" --out /tmp | rate)"
      t+=" $(run "$np" "$py" "$here/torch_ddp_peer.py" --steps 600 "${m[@]}" "${words[@]}" | rate)"
    done
    rm -f /tmp/makemore-loss.svg
    rm_=$(echo "$r" | median); tm=$(echo "$t" | median)
    printf '%-8s %3s %-28s %-28s %8s %8s %10.2f\n' "$model" "$np" "$r" "$t" "$rm_" "$tm" "$(echo "$tm / $rm_" | bc -l)"
  done
done
