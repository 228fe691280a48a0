#!/usr/bin/env bash
# The whole test suite: install what is missing, build and run every test (CTest), the SDK and GPU
# backend checks, the threading tests under ThreadSanitizer (build-tsan/), then the tests again
# under AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/. The sanitizer builds compile
# in the background while the release tests and the backend checks run (see below).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
jobs="$(nproc)"

start=$(date +%s)
# Each stage's start with the wall time and the CPU time of every finished command so far (user +
# system, from `times`): a stage whose CPU time grows by less than twice its wall time on CI's two
# cores left one idle (docs/testing.md). The background builds' CPU time is counted only once they
# have been waited for. (`times` runs in this shell and writes to a file: in a pipe or $(...) it
# would run in a subshell, which has no children.)
times_file="$(mktemp)"
background=""
kill_tree() {  # a process and everything it started
  local child
  for child in $(pgrep -P "$1" 2>/dev/null); do kill_tree "$child"; done
  kill "$1" 2>/dev/null || true
}
trap 'rm -f "$times_file"; [ -z "$background" ] || kill_tree "$background"' EXIT
stage() {
  times >"$times_file"
  local cpu
  cpu="$(awk 'NR == 2 { t = 0; for (i = 1; i <= 2; ++i) { split($i, p, /[ms]/); t += p[1] * 60 + p[2] } printf "%.0f", t }' "$times_file")"
  echo "== [$(( $(date +%s) - start )) s, $cpu CPU-s] $*"
}

# -Og -g1: sanitizer reports with line numbers at a fraction of the compile time of -O2 -g (-Og
# compiles the instrumented code in about two thirds of -O1's time), and -O1 for the oneTBB
# plugin (RAVEL_HOT_CODE_FLAGS): the tests run so many elements through its kernels that at -Og
# the ASan + UBSan tests took twice as long (docs/testing.md, "Build time"). Benchmarks are not
# tests and are not built here. The GPU backends are checked by their own
# scripts (generated kernels, emulator, test driver); rebuilding them here would add ~5 minutes
# to CI for code whose host side those scripts already run, so this build leaves them out. The
# test sources are compiled without instrumentation (the code under test is instrumented; see
# tests/CMakeLists.txt): that cut this build's compile time by about 40%.
asan_build() {
  cmake -S . -B build-asan -DCMAKE_UNITY_BUILD=ON -DCMAKE_BUILD_TYPE=None -DCMAKE_C_FLAGS="-Og -g1" -DCMAKE_CXX_FLAGS="-Og -g1" \
    -DRAVEL_HOT_CODE_FLAGS=-O1 -DRAVEL_SANITIZE=ON -DRAVEL_BUILD_BENCH=OFF -DRAVEL_HIP_PLATFORM=OFF -DRAVEL_LEVEL_ZERO=OFF -DRAVEL_OPENCL=OFF >/dev/null
  cmake --build build-asan -j"$jobs"
}

# The configuration scripts/gpu-check.sh builds on the lent NVIDIA machine (the HIP backend's
# NVIDIA flavour, plain), configured here wherever a CUDA toolkit is installed, and its HIP
# plugins built: a GPU run must never be the first to find that it does not build. Only the HIP
# plugins: every other target is the same code with the same compiler and flags as the release
# build, and building all of it again cost 5 of CI's minutes (2026-11-26).
have_cuda() { command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; }
nvidia_build() {
  cmake -S . -B build-nvidia -DCMAKE_BUILD_TYPE=Release -DCUDAToolkit_ROOT=/usr/local/cuda \
    -DRAVEL_HIP_PLATFORM=NVIDIA -DRAVEL_LEVEL_ZERO=OFF >/dev/null
  cmake --build build-nvidia -j"$jobs" --target ravel_backend_hip ravel_backend_hip_emu
}

stage "Release build (build/): the README's build command, exactly as written there"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j"$(nproc)"

# The sanitizer builds and the NVIDIA flavour's compile in the background, at the lowest priority,
# while the stages up to the backend checks run. Those stages leave a core idle much of the time
# (a test, a driver's compiler or a makemore run alone; waits on deadlines), and at nice 19 the
# builds take next to nothing from a stage that keeps both cores busy. Their output goes to a log,
# printed if they fail. RAVEL_CI_SERIAL=1 runs everything in order instead (to time each stage).
background_log="$PWD/build/background-builds.log"
background_builds() {
  set -e
  echo "== ThreadSanitizer build (build-tsan/)"
  ./scripts/check-tsan.sh build-tsan --build-only
  echo "== ASan + UBSan build (build-asan/)"
  asan_build
  if have_cuda; then
    echo "== NVIDIA flavour (build-nvidia/), as scripts/gpu-check.sh configures it: its HIP plugins"
    nvidia_build
  fi
  echo "== background builds done"
}
wait_background() {
  [ -n "$background" ] || return 0
  if ! wait "$background"; then
    background=""
    tail -60 "$background_log"
    echo "background builds FAILED (whole log: $background_log)"
    exit 1
  fi
  background=""
  grep '^== ' "$background_log"
}
if [ "${RAVEL_CI_SERIAL:-0}" != 1 ]; then
  (renice -n 19 -p "$BASHPID" >/dev/null || true; background_builds) >"$background_log" 2>&1 &
  background=$!
  echo "-- sanitizer and NVIDIA builds started in the background (nice 19; log: $background_log)"
fi

stage "Release tests (CTest)"
ctest --test-dir build --output-on-failure -j"$jobs"

if [ -x scripts/check-sdk.sh ]; then
  # The README's install command as written (root: /opt/ravel), then the SDK's out-of-tree users
  # against that very prefix; without root, a scratch prefix.
  prefix=/opt/ravel
  [ "$(id -u)" -eq 0 ] || prefix=""
  stage "SDK: the README's install (${prefix:-a scratch prefix}), out-of-tree template plugin and consumer, conformance"
  ./scripts/check-sdk.sh build $prefix
fi

# Backend-specific checks that need their own toolchains (scripts/check-<backend>.sh build).
for check in scripts/check-hip.sh scripts/check-level-zero.sh scripts/check-opencl.sh; do
  if [ -x "$check" ]; then
    stage "$check"
    "$check" build
  fi
done

if [ -n "$background" ]; then
  stage "waiting for the background builds"
  wait_background
else
  stage "sanitizer and NVIDIA builds (RAVEL_CI_SERIAL=1: in order, in the foreground)"
  background_builds
fi
have_cuda || echo "-- NVIDIA flavour (scripts/gpu-check.sh's build): skipped, no CUDA toolkit (nvcc) on this machine"

# The ThreadSanitizer run is pinned to one CPU (scripts/check-tsan.sh says why), so it runs beside
# the ASan + UBSan tests, which fill both cores; its output is printed when both have finished.
stage "ThreadSanitizer threading tests (build-tsan/, one CPU) beside the ASan + UBSan tests (build-asan/, CTest)"
tsan_log="$PWD/build-tsan/check-tsan.log"
./scripts/check-tsan.sh build-tsan --run-only >"$tsan_log" 2>&1 &
tsan=$!
# Leaks are checked too; tests/lsan.supp lists the plugins' deliberate never-freed singletons.
asan_status=0
ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" || asan_status=$?
tsan_status=0
wait "$tsan" || tsan_status=$?
cat "$tsan_log"
[ "$tsan_status" -eq 0 ] || { echo "ThreadSanitizer run FAILED"; exit 1; }
[ "$asan_status" -eq 0 ] || { echo "ASan + UBSan tests FAILED"; exit 1; }
stage "all checks passed"
