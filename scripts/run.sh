#!/usr/bin/env bash
# The main job: install what is missing, configure, build, and train the character-level
# language model (examples/makemore). Arguments go to makemore (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON >/dev/null
cmake --build build -j"$(nproc)" --target makemore tour ravel-info
./build/bin/makemore --out build "$@"
