#!/usr/bin/env bash
# The whole test suite: install what is missing, build and run every test (CTest), then build
# and run them again under AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
jobs="$(nproc)"

echo "== Release build and tests (build/)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"

if [ -x scripts/check-sdk.sh ]; then
  echo "== SDK: install, out-of-tree template plugin and consumer, conformance"
  ./scripts/check-sdk.sh build
fi

echo "== ASan + UBSan build and tests (build-asan/)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRAVEL_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
# detect_leaks=0: dlclose'd plugins make LeakSanitizer report the loader's own allocations.
ASAN_OPTIONS="detect_leaks=0:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  ctest --test-dir build-asan --output-on-failure -j"$jobs"
