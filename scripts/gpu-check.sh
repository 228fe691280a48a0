#!/usr/bin/env bash
# The HIP backend on the lent NVIDIA machine (../shared/gpu/README.md), in one call of at most
# 8 minutes: build, test suite, ravel-conformance on hip:0 (must pass 100%), compute-sanitizer
# memcheck over the conformance suite, ravel-bench configs/bench/gpu-vs-torch.json with PyTorch
# as the peer, and a short makemore run on the GPU. Everything lands in one folder:
#   scripts/gpu-check.sh [OUT_DIR]        (default: $OUT when set, else ./gpu-results)
# Prepare here first: scripts/gpu-prepare.sh (the Debian packages the build needs there), then
# call the device tool with carry [".gpu-carry"] and command "scripts/gpu-check.sh".
# Every step has its own time limit, so a slow or hanging step cannot take the others with it;
# the summary at the end (and summary.txt) says what passed. Exit 0 only if everything passed.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-gpu-results}}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
exec > >(tee "$out/gpu-check.log") 2>&1
t0=$(date +%s)
jobs="$(nproc)"
declare -a summary
step() { echo; echo "== [$(( $(date +%s) - t0 )) s] $*"; }
record() {  # record NAME STATUS
  summary+=("$(printf '%-28s %s' "$1" "$2")")
}
run_step() {  # run_step NAME TIMEOUT LOG CMD...: runs with a limit, records ok/FAILED(rc)
  local name=$1 limit=$2 log=$3; shift 3
  step "$name (limit ${limit} s, log $(basename "$log"))"
  timeout --kill-after=10 "$limit" "$@" > "$log" 2>&1
  local rc=$?
  tail -n 5 "$log"
  if [ $rc -eq 0 ]; then record "$name" ok; else record "$name" "FAILED (exit $rc$([ $rc -eq 124 ] && echo ', timed out'))"; fi
  return $rc
}

deps=/tmp/ravel-deps
export PATH="/usr/local/cuda/bin:$PATH"
export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
export RAVEL_CACHE_DIR="$PWD/build-gpu/kernel-cache"
build=build-gpu

step "machine"
{ nvidia-smi; nvcc --version; python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))'; } \
  > "$out/machine.txt" 2>&1
head -n 15 "$out/machine.txt"

step "unpack the carried packages"
if ls .gpu-carry/debs/*.deb >/dev/null 2>&1; then
  for f in .gpu-carry/debs/*.deb; do dpkg -x "$f" "$deps"; done
else
  echo "no .gpu-carry/debs: run scripts/gpu-prepare.sh here and carry .gpu-carry"
fi

gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
run_step configure 120 "$out/configure.log" cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$deps/usr" -DCUDAToolkit_ROOT=/usr/local/cuda -DRAVEL_HIP_PLATFORM=NVIDIA \
  -DRAVEL_LEVEL_ZERO=OFF || { printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"; exit 1; }
run_step build 240 "$out/build.log" cmake --build "$build" -j"$jobs" \
  || { printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"; exit 1; }

"$build/bin/ravel-info" > "$out/ravel-info.txt" 2>&1
cat "$out/ravel-info.txt" | sed -n '/^devices:/,/^config/p'
units=$(grep -A1 '^  hip:0' "$out/ravel-info.txt" | grep -o '[0-9]* compute units' | grep -o '^[0-9]*')
arch=$(grep -A2 '^  hip:0' "$out/ravel-info.txt" | grep -o 'arch sm_[0-9]*' | cut -d' ' -f2)
if [ -z "$units" ] || [ -z "$arch" ]; then
  record "hip:0 present" "FAILED (see ravel-info.txt)"
  units=132 arch=sm_90
fi

# Every conformance kernel, generated for this device and compiled by NVRTC on all cores into the
# on-disk cache, so the conformance run below loads instead of compiling one at a time.
run_step "precompile kernels" 120 "$out/precompile.log" ./tests/hip/compile_conformance_kernels.sh \
  "$build/bin/ravel-conformance" "$build/lib/hip-emu/libravel_backend_hip_emu.so" \
  "$build/bin/ravel-hip-compile-check" "nvidia:$arch:32:$units" "$build/precompile" --jobs "$jobs" --cache

run_step conformance 120 "$out/conformance.txt" "$build/bin/ravel-conformance" \
  "$build/lib/ravel/plugins/libravel_backend_hip.so" --json "$out/conformance.json"

# The test suite: its default placement puts every tensor on hip:0 here.
run_step "test suite" 180 "$out/ctest.log" ctest --test-dir "$build" -j"$jobs" --output-on-failure --timeout 150

if command -v compute-sanitizer >/dev/null; then
  run_step "memcheck (conformance)" 120 "$out/memcheck.txt" compute-sanitizer --tool memcheck \
    --error-exitcode 3 "$build/bin/ravel-conformance" "$build/lib/ravel/plugins/libravel_backend_hip.so" \
    --filter '^(abi|views|reductions/(SUM|MAX)/f32|contractions/f32|fused/chain/f32)'
fi

run_step "bench vs torch" 200 "$out/bench.txt" env RAVEL_HIP_SYNC=1 "$build/bin/ravel-bench" \
  configs/bench/gpu-vs-torch.json --out "$out/bench"

run_step "makemore on hip:0" 60 "$out/makemore.txt" "$build/bin/makemore" --config configs/gpu.json \
  --steps 3000 --out "$out/makemore"

step "summary ($(( $(date +%s) - t0 )) s)"
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
! printf '%s\n' "${summary[@]}" | grep -q FAILED
