#!/usr/bin/env bash
# ThreadSanitizer run of the threading tests (tests/runtime/test_threads.cpp; the contract is
# Note [Threads] in core/src/graph/node.hpp) and of tbb_cpu's device queues (tests/multidevice).
# Builds only what they need — the core, the oneTBB plugin and the tests — in BUILD_DIR (default
# build-tsan), and runs the threading tests with the kernel cache on and off. Called by
# scripts/test.sh.
#
# Debian's libtbb is not instrumented, so TSan cannot see the synchronisation inside oneTBB's
# scheduler and would report its workers' writes as races. The run is pinned to one CPU
# (taskset), which makes oneTBB run every task on the thread that submitted it; the test's
# 8 threads are still preempted against each other, and TSan checks the core's locking by
# happens-before, not by timing, so nothing it can see is lost.
#
#   scripts/check-tsan.sh [BUILD_DIR] [--build-only | --run-only]
# scripts/test.sh builds in the background while other stages run (--build-only), then runs
# (--run-only, which still builds anything missing: a no-op when the build is complete).
set -euo pipefail
cd "$(dirname "$0")/.."
B="${1:-build-tsan}"
mode="${2:-}"
jobs="$(nproc)"
if [ "$mode" != --run-only ] || [ ! -f "$B/CMakeCache.txt" ]; then
  # -Og, the oneTBB plugin at -O1: as scripts/test.sh's ASan + UBSan build, which says why.
  cmake -S . -B "$B" -DCMAKE_UNITY_BUILD=ON -DCMAKE_BUILD_TYPE=None -DCMAKE_C_FLAGS="-Og -g1" -DCMAKE_CXX_FLAGS="-Og -g1" \
    -DRAVEL_HOT_CODE_FLAGS=-O1 -DRAVEL_TSAN=ON -DRAVEL_BUILD_BENCH=OFF -DRAVEL_HIP_PLATFORM=OFF -DRAVEL_LEVEL_ZERO=OFF >/dev/null
fi
cmake --build "$B" -j"$jobs" --target runtime_threads ravel_backend_tbb_cpu multidevice_abi sharding
[ "$mode" = --build-only ] && exit 0
# tests/tsan.supp: intercepted libc calls made by libtbb itself (uninstrumented; see there).
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp"
for cache in 1 0; do
  echo "tsan: runtime_threads, kernel cache $cache"
  RAVEL_CONFIG= RAVEL_PLUGIN_PATH= RAVEL_KERNEL_CACHE=$cache taskset -c 0 \
    "$B/bin/runtime_threads" --report_level=short
done
# tbb_cpu with several devices: queues, peer copies that wait for each other, events across
# devices, errors of queued work, shutdown with work queued (tests/multidevice, Note [Device queues]).
echo "tsan: multidevice_abi"
taskset -c 0 "$B/bin/multidevice_abi" --report_level=short
# Sharded programs over 8 devices with queues: a data-parallel step eager and replayed by the Jit,
# and tensor-parallel matmuls (every part's kernels on its own device's worker thread).
echo "tsan: sharding (queues on)"
RAVEL_CONFIG= RAVEL_PLUGIN_PATH= RAVEL_TBB_DEVICES=8 RAVEL_TBB_ASYNC=1 taskset -c 0 "$B/bin/sharding" --report_level=short \
  --run_test=data_parallel_sgd_matches_one_device,a_captured_data_parallel_step_replays_like_the_eager_one,matmul_data_and_tensor_parallel
# A Jit replay with a host thread per device (Note [Replay by device]), devices synchronous (each
# kernel runs on its lane's thread) and then queued; and a kernel failing inside such a replay.
echo "tsan: sharding (a replay's lanes)"
RAVEL_CONFIG= RAVEL_PLUGIN_PATH= RAVEL_TBB_DEVICES=8 taskset -c 0 "$B/bin/sharding" --report_level=short \
  --run_test=a_replay_with_a_thread_per_device_gives_the_bits_of_the_replay_in_order
RAVEL_CONFIG= RAVEL_PLUGIN_PATH= RAVEL_TBB_DEVICES=8 RAVEL_TBB_ASYNC=1 taskset -c 0 "$B/bin/sharding" --report_level=short \
  --run_test=a_replay_with_a_thread_per_device_gives_the_bits_of_the_replay_in_order
RAVEL_CONFIG= RAVEL_PLUGIN_PATH= RAVEL_TBB_DEVICES=4 RAVEL_JIT_LANES=1 RAVEL_TBB_TEST_FAULT=150 taskset -c 0 "$B/bin/sharding" \
  --report_level=short --run_test=a_failing_kernel_in_a_replay_by_device_is_a_device_error
echo "tsan: no data races reported"
