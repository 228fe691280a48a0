#!/usr/bin/env python3
"""Ravel's speed relative to each peer, from one ravel-bench JSON file (docs/bench.md).

    python3 bench/ratios.py ravel-bench-results/cpu-vs-peers.json [more.json ...]

For every workload and size: Ravel's median time and, per peer, peer median / Ravel median
(> 1: Ravel is faster), both from the same run. With several files (separate runs of the same
config), the ratio of each file is printed and then their median. Prints a Markdown table.
"""
import json
import statistics
import sys


def load(path):
    with open(path) as f:
        rows = json.load(f)["results"]
    ravel, peers = {}, {}
    for r in rows:
        if r["status"] != "ok":
            continue
        key = (r["workload"], r["size"])
        if r["runner"] == "ravel":
            ravel.setdefault(key, r["median_ms"])
        else:
            peers.setdefault(key, {})[r["runner"]] = r["median_ms"]
    return ravel, peers


def main(paths):
    runs = [load(p) for p in paths]
    keys, names = [], []
    for ravel, peers in runs:
        for k in ravel:
            if k not in keys:
                keys.append(k)
        for k, ps in peers.items():
            for n in ps:
                if n not in names:
                    names.append(n)
    print("| workload | size | Ravel ms | " + " | ".join(f"vs {n}" for n in names) + " |")
    print("|---|---|---|" + "---|" * len(names))
    for k in keys:
        ms = [r[k] for r, _ in runs if k in r]
        cells = []
        for n in names:
            ratios = [p[k][n] / r[k] for r, p in runs if k in r and n in p.get(k, {})]
            if not ratios:
                cells.append("-")
            elif len(ratios) == 1:
                cells.append(f"{ratios[0]:.2f}x")
            else:
                cells.append(f"{statistics.median(ratios):.2f}x ({', '.join(f'{x:.2f}' for x in ratios)})")
        print(f"| {k[0]} | {k[1]} | {statistics.median(ms):.3f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
