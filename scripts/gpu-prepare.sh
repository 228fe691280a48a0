#!/usr/bin/env bash
# Run here (a Debian 12 machine with a package registry), before scripts/gpu-check.sh on the lent
# NVIDIA machine, which has no registry: downloads the Debian packages the build needs there
# (oneTBB and Boost.Test are missing on it; ../shared/gpu/README.md) into .gpu-carry/debs/
# (ignored by git; about 11 MB). Pass `.gpu-carry` in the device call's `carry`.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.gpu-carry/debs
mkdir -p "$dest"
packages=(libboost1.74-dev libboost-test1.74-dev libboost-test1.74.0 nlohmann-json3-dev
          libtbb-dev libtbb12 libtbbmalloc2 libtbbbind-2-5 libhwloc15
          wamerican)  # the word list of makemore's run on hip:0
missing=()
for p in "${packages[@]}"; do
  ls "$dest/${p}_"*.deb >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  (cd "$dest" && apt-get download "${missing[@]}")
fi
echo "gpu-prepare: $(ls "$dest"/*.deb | wc -l) packages in $dest ($(du -sh "$dest" | cut -f1))"
