#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, docs/fuzzing.md) in build-fuzz/ with clang, ASan and UBSan,
# and runs each one.
#
#   scripts/fuzz.sh                 every target for 1,000,000 executions (the long run)
#   scripts/fuzz.sh --runs N        every target for N executions
#   scripts/fuzz.sh --brief         every target over its checked-in corpus, then 10,000 executions
#                                   (the quick check CI can afford)
#   scripts/fuzz.sh --brief fuzz_config    only the named targets
#
# New inputs libFuzzer finds go to build-fuzz/corpus/<target>/ (the checked-in seeds in
# fuzz/corpus/<target without fuzz_>/ are only read). A crash stops that target, leaves its input as
# build-fuzz/crash-* and makes the script exit 1 after the other targets have run; every crash
# found so far is a regression test in the normal suite (docs/fuzzing.md lists them).
set -euo pipefail
cd "$(dirname "$0")/.."

runs=1000000
brief=0
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --brief) brief=1; runs=10000 ;;
    --runs) runs="$2"; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    fuzz_*) targets+=("$1") ;;
    *) echo "fuzz.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ ${#targets[@]} -gt 0 ]] || targets=(fuzz_config fuzz_view fuzz_validate fuzz_params fuzz_npy fuzz_dlpack)

# clang-15 brings libFuzzer (libclang-common-15-dev); Debian's hipcc already depends on it.
cxx=$(command -v clang++-15 || command -v clang++ || true)
cc=$(command -v clang-15 || command -v clang || true)
if [[ -z "$cxx" || -z "$cc" ]]; then
  echo "fuzz.sh: clang is needed (apt-get install clang-15)" >&2
  exit 2
fi

jobs=${FUZZ_BUILD_JOBS:-$(nproc)}
if [[ ! -f build-fuzz/CMakeCache.txt ]]; then
  cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
    -DRAVEL_FUZZ=ON -DRAVEL_BUILD_TESTS=OFF -DRAVEL_BUILD_BENCH=OFF -DRAVEL_HIP_PLATFORM=OFF -DRAVEL_LEVEL_ZERO=OFF >/dev/null
fi
cmake --build build-fuzz -j"$jobs" --target "${targets[@]}" >/dev/null

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export RAVEL_CONFIG= RAVEL_PLUGIN_PATH=  # the developer's settings must not steer the runs
failed=0
printf '%-14s %10s %8s %7s %8s  %s\n' target executions seconds exec/s corpus result
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t"
  log="build-fuzz/$t.log"
  start=$(date +%s%N)
  rc=0
  # -rss_limit_mb: far above what one input needs; -timeout: a hang is a finding too.
  (cd build-fuzz && "./fuzz/$t" -runs="$runs" -rss_limit_mb=2048 -timeout=10 -max_len=4096 \
     -print_final_stats=1 "corpus/$t" "../fuzz/corpus/${t#fuzz_}") >"$log" 2>&1 || rc=$?
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  corpus=$(ls "build-fuzz/corpus/$t" | wc -l)
  result=ok
  if [[ $rc -ne 0 ]]; then result="FAILED (rc $rc, see $log)"; failed=1; fi
  printf '%-14s %10s %8s %7s %8s  %s\n' "$t" "$execs" "$((ms / 1000)).$((ms % 1000 / 100))" "$rate" "$corpus" "$result"
done
exit $failed
