#!/usr/bin/env bash
# Scaling with cores: runs configs/bench/cpu-scaling.json once per core count under
# `taskset -c 0-(N-1)` (oneTBB and OpenMP both size their pools from the affinity mask, and
# ravel-bench gives peers the cores it may use), then prints Ravel's median per workload and core
# count, its speed relative to the limit hand loop, and marks every row that got slower than with
# the fewest cores. A measurement, not a test: the exit status is 0 unless a run itself failed.
# Meant for the lent 16-core machine, in the same call as scripts/gpu-check.sh (its build):
#   scripts/cpu-scaling.sh BUILD_DIR OUT_DIR [CORES...]      (default cores: 2 4 8 16, up to nproc)
# Extra ravel-bench options (e.g. --reps 3) go in CPU_SCALING_ARGS.
set -uo pipefail
cd "$(dirname "$0")/.."
build="${1:?usage: scripts/cpu-scaling.sh BUILD_DIR OUT_DIR [CORES...]}"
dest="${2:?usage: scripts/cpu-scaling.sh BUILD_DIR OUT_DIR [CORES...]}"
shift 2
cores=("$@")
[ ${#cores[@]} -eq 0 ] && cores=(2 4 8 16)
have=$(nproc --all)
mkdir -p "$dest"
rc=0
runs=()
for n in "${cores[@]}"; do
  if [ "$n" -gt "$have" ]; then echo "cpu-scaling: $n cores requested, the machine has $have: left out"; continue; fi
  echo "== $n cores (taskset -c 0-$((n - 1)))"
  # shellcheck disable=SC2086
  taskset -c "0-$((n - 1))" "$build/bin/ravel-bench" configs/bench/cpu-scaling.json --out "$dest/cores-$n" \
    --quiet ${CPU_SCALING_ARGS:-} || rc=1
  runs+=("$n:$dest/cores-$n/cpu-scaling.json")
done
[ ${#runs[@]} -eq 0 ] && exit "$rc"
python3 - "${runs[@]}" <<'PY' | tee "$dest/scaling.txt"
import json, sys
cols, table = [], {}
for arg in sys.argv[1:]:
    n, path = arg.split(":", 1)
    try:
        res = json.load(open(path))["results"]
    except (OSError, ValueError, KeyError) as e:
        print(f"{n} cores: no results ({e})")
        continue
    cols.append(n)
    for r in res:
        if r.get("status") != "ok":
            continue
        key = f'{r["workload"]} {r["size"]}'
        table.setdefault(key, {}).setdefault(n, {})[r["runner"]] = r["median_ms"]
print("Ravel median ms per core count (speed vs the `loops` peer in brackets); '<' marks a row slower than with the fewest cores")
print("| workload | " + " | ".join(f"{c} cores" for c in cols) + " |")
print("|---|" + "---|" * len(cols))
for key, by in table.items():
    first = by.get(cols[0], {}).get("ravel")
    cells = []
    for c in cols:
        r = by.get(c, {})
        if "ravel" not in r:
            cells.append("-")
            continue
        cell = f'{r["ravel"]:.3f}'
        if "loops" in r:
            cell += f' ({r["loops"] / r["ravel"]:.2f}x)'
        if first is not None and c != cols[0] and r["ravel"] > first:
            cell += " <"
        cells.append(cell)
    print(f"| {key} | " + " | ".join(cells) + " |")
PY
exit "$rc"
