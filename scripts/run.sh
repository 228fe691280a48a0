#!/usr/bin/env bash
# The main job: install what is missing, configure, build, and run the tour.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target tour ravel-info
./build/bin/tour "$@"
