#!/bin/sh
# Optional: installs the peers that configs/bench/cpu-vs-peers.json compares Ravel with (NumPy,
# PyTorch CPU, OpenBLAS, oneDNN, Eigen). Not needed to build or test Ravel: ravel-bench reports a missing
# peer as "peer unavailable" and goes on. Re-run CMake afterwards so the OpenBLAS peer is built.
set -e
need=""
for p in python3-numpy python3-torch libopenblas-dev libdnnl-dev libeigen3-dev; do
  dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
if [ -n "$need" ]; then
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $need
fi
echo "peers installed; reconfigure (cmake -S . -B build) to build ravel-peer-openblas and ravel-peer-onednn"
