#!/usr/bin/env bash
# makemore_matches.sh MAKEMORE MPIRUN...: the main job trained data-parallel on 2 ranks reaches
# the same final losses (printed to 4 decimals) as one process with the same global batch, says
# so in its first line, and only rank 0 writes the loss curve; with small gradient buckets
# (--bucket-kb 8: several, each begun while the backward pass runs) as well.
set -eu
makemore="$1"; shift
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
args=(--steps 200 --out "$work/one")
env -u OMPI_COMM_WORLD_SIZE -u PMI_SIZE "$makemore" "${args[@]}" >"$work/one.txt" 2>&1
"$@" -np 2 "$makemore" --steps 200 --out "$work/two" >"$work/two.txt" 2>&1
"$@" -np 2 "$makemore" --steps 200 --bucket-kb 8 --out "$work/small" >"$work/small.txt" 2>&1
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
if [ $fail -ne 0 ]; then cat "$work/two.txt"; exit 1; fi
echo "same result on 1 and 2 ranks: $one"
