#!/usr/bin/env bash
# makemore_matches.sh MAKEMORE MPIRUN...: the main job trained data-parallel on 2 ranks reaches
# the same final losses (printed to 4 decimals) as one process with the same global batch, says
# so in its first line, and only rank 0 writes the loss curve; with small gradient buckets
# (--bucket-kb 8: several, each begun while the backward pass runs) as well. In f16 mixed
# precision (dynamic loss scaling on the summed gradients, Note [Loss scaling across ranks]) the
# 2-rank run ends within 0.005 of one process (each rank rounds its share of the half gradients).
set -eu
makemore="$1"; shift
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
args=(--steps 200 --out "$work/one")
env -u OMPI_COMM_WORLD_SIZE -u PMI_SIZE "$makemore" "${args[@]}" >"$work/one.txt" 2>&1
"$@" -np 2 "$makemore" --steps 200 --out "$work/two" >"$work/two.txt" 2>&1
"$@" -np 2 "$makemore" --steps 200 --bucket-kb 8 --out "$work/small" >"$work/small.txt" 2>&1
env -u OMPI_COMM_WORLD_SIZE -u PMI_SIZE "$makemore" --steps 200 --dtype f16 --out "$work/one16" >"$work/one16.txt" 2>&1
"$@" -np 2 "$makemore" --steps 200 --dtype f16 --out "$work/two16" >"$work/two16.txt" 2>&1
one="$(grep '^final loss' "$work/one.txt")"
two="$(grep '^final loss' "$work/two.txt" || true)"
small="$(grep '^final loss' "$work/small.txt" || true)"
fail=0
[ "$one" = "$small" ] || { echo "final losses differ: one process '$one', two ranks with 8 KiB buckets '$small'"; cat "$work/small.txt"; fail=1; }
head -1 "$work/two.txt" | grep -q '^data-parallel: 2 ranks over mpi' || { echo "first line does not name the ranks"; fail=1; }
grep -q '^data-parallel' "$work/one.txt" && { echo "a single process printed a data-parallel line"; fail=1; }
[ "$(grep -c '^final loss' "$work/two.txt")" = 1 ] || { echo "not exactly one rank printed the result"; fail=1; }
[ -f "$work/two/makemore-loss.svg" ] || { echo "rank 0 wrote no loss curve"; fail=1; }
[ "$one" = "$two" ] || { echo "final losses differ: one process '$one', two ranks '$two'"; fail=1; }
losses() { sed -n 's/^final loss: train \([0-9.]*\), validation \([0-9.]*\).*/\1 \2/p' "$1"; }
read -r t1 v1 <<<"$(losses "$work/one16.txt")"
read -r t2 v2 <<<"$(losses "$work/two16.txt" || true)"
if [ -z "${t1:-}" ] || [ -z "${t2:-}" ] ||
   ! awk -v a="$t1" -v b="$t2" -v c="$v1" -v d="$v2" 'BEGIN { exit !((a-b)^2 < 0.005^2 && (c-d)^2 < 0.005^2) }'; then
  echo "f16: one process '${t1:-?} ${v1:-?}', two ranks '${t2:-?} ${v2:-?}' (train, validation) differ by 0.005 or more"
  cat "$work/two16.txt"; fail=1
fi
grep -q '^loss scale at the end' "$work/two16.txt" || { echo "f16 on 2 ranks did not report its loss scale"; cat "$work/two16.txt"; fail=1; }
if [ $fail -ne 0 ]; then cat "$work/two.txt"; exit 1; fi
echo "same result on 1 and 2 ranks: $one; f16: train $t1 / $t2, validation $v1 / $v2"
