#!/usr/bin/env bash
# Checks that need an idle machine (not part of ./scripts/test.sh): ravel-bench's joint-versus-
# separate ratio agreement (tests/bench/test_interleave.cpp). Usage: scripts/check-bench.sh [BUILD]
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
cmake -S . -B "$build" -DRAVEL_TIMING_TESTS=ON >/dev/null
cmake --build "$build" --target bench_interleave ravel-bench -j"$(nproc)"
ctest --test-dir "$build" -R '^bench_interleave$' --output-on-failure
