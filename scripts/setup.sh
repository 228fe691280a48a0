#!/usr/bin/env bash
# Installs the Debian 12 packages Ravel needs, only if something is missing (idempotent; quick
# when everything is there). Run as root, or with sudo available.
set -euo pipefail

PACKAGES=(g++ cmake make pkg-config libtbb-dev libboost-dev libboost-test-dev nlohmann-json3-dev zlib1g-dev wamerican)
# Each GPU backend lists its toolchain packages in scripts/packages-<backend>.txt (one per line).
for list in "$(dirname "$0")"/packages-*.txt; do
  [ -f "$list" ] || continue
  while read -r p; do
    case "$p" in ''|'#'*) ;; *) PACKAGES+=("$p") ;; esac
  done <"$list"
done

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
