#!/usr/bin/env bash
# The main jobs: install what is missing, configure, build, and train.
#   scripts/run.sh [ARGS]                 the character-level language model (examples/makemore)
#   scripts/run.sh fashion-mnist [ARGS]   the CNN on Fashion-MNIST (examples/fashion_mnist);
#                                         installs the dataset-fashion-mnist package when missing
# ARGS go to the program (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
if [ "${1:-}" = "fashion-mnist" ]; then
  shift
  if ! dpkg-query -W -f='${Status}' dataset-fashion-mnist 2>/dev/null | grep -q "install ok installed"; then
    echo "run: installing dataset-fashion-mnist (Fashion-MNIST, 30 MB)"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends dataset-fashion-mnist >/dev/null
  fi
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON >/dev/null
  cmake --build build -j"$(nproc)" --target fashion_mnist
  exec ./build/bin/fashion_mnist --out build "$@"
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON >/dev/null
cmake --build build -j"$(nproc)" --target makemore tour ravel-info
./build/bin/makemore --out build "$@"
