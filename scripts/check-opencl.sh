#!/usr/bin/env bash
# The OpenCL backend's CI check (docs/opencl.md): the whole conformance suite on the plugin,
# kernels compiled at run time by the OpenCL driver (PoCL's CPU device here, pocl-opencl-icd).
# PoCL's kernel cache lives in BUILD_DIR/pocl-cache (shared with scripts/check-level-zero.sh), so
# a warm run compiles only new kernels. Exits 0 with a message when the plugin was not built
# (no OpenCL headers) or no OpenCL driver is registered.
#   scripts/check-opencl.sh BUILD_DIR [--filter REGEX]
set -euo pipefail
cd "$(dirname "$0")/.."
B="${1:?usage: scripts/check-opencl.sh BUILD_DIR [--filter REGEX]}"
shift
case "$B" in /*) ;; *) B="$PWD/$B" ;; esac
start=$SECONDS
jobs="$(nproc)"
if ! grep -q '^OpenCL_LIBRARY:FILEPATH=/' "$B/CMakeCache.txt" 2>/dev/null; then
  echo "opencl: checks skipped: OpenCL headers and ICD loader not found at configure time (opencl-c-headers, ocl-icd-opencl-dev)"
  exit 0
fi
if ! ls /etc/OpenCL/vendors/*.icd >/dev/null 2>&1; then
  echo "opencl: checks skipped: no OpenCL driver registered in /etc/OpenCL/vendors (pocl-opencl-icd)"
  exit 0
fi
cmake --build "$B" -j"$jobs" --target ravel_backend_opencl ravel-conformance conv_on_device >/dev/null
plugin="$B/lib/opencl/libravel_backend_opencl.so"
mkdir -p "$B/pocl-cache" "$B/opencl"
export POCL_CACHE_DIR="$B/pocl-cache" RAVEL_CONFIG= RAVEL_PLUGIN_PATH=
log="$B/opencl/conformance.log"
if ! "$B/bin/ravel-conformance" "$plugin" --jobs "$jobs" --json "$B/opencl/conformance.json" "$@" >"$log" 2>&1; then
  grep -E "FAIL|passed" "$log" | head -40
  echo "opencl: conformance FAILED ($((SECONDS - start)) s; log: $log)"
  exit 1
fi
head -1 "$log"
tail -1 "$log"
# The convolution and pooling composites, values and gradients, against tbb_cpu:0 (about 19 s
# cold on PoCL; tests/nn/conv_on_device.cpp). The HIP emulator renders the same C lowering.
RAVEL_PLUGIN_PATH="$B/lib/ravel/plugins:$B/lib/opencl" "$B/bin/conv_on_device" opencl:0
echo "opencl: passed in $((SECONDS - start)) s"
