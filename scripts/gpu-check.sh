#!/usr/bin/env bash
# The HIP backend on the lent NVIDIA machine (../shared/gpu/README.md), in one call of at most
# 8 minutes: build, ravel-conformance on hip:0 (must pass 100%), ravel-bench
# configs/bench/gpu-vs-torch.json with PyTorch as the peer, a short makemore run on the GPU, the
# 16-core CPU rows (configs/bench/cpu-16core.json), compute-sanitizer memcheck over part of the
# conformance suite, and the test suite with whatever time is left.
#   scripts/gpu-check.sh [OUT_DIR]        (default: $OUT when set, else ./gpu-results)
# Prepare here first: scripts/gpu-prepare.sh (the Debian packages the build needs there), then
# call the device tool with carry [".gpu-carry"] and command "scripts/gpu-check.sh".
# Every step has its own time limit, and all of them share one deadline (GPU_CHECK_BUDGET_S,
# default 420 s), so a slow or hanging step cannot take the others with it and the call ends
# before the device tool's limit; the most wanted results come first. The device tool brings
# back at most 8 files, so the logs are written to a scratch folder and packed into OUT_DIR as
# results.tar.gz beside summary.txt and gpu-check.log. Exit 0 only if everything passed.
# A second, shorter call can leave steps out and run part of the test suite:
#   GPU_CHECK_SKIP="precompile conformance memcheck cpu" GPU_CHECK_TESTS='^(sharding|core_)' ...
# Step keys for GPU_CHECK_SKIP, in the order they run: precompile conformance opencl bench makemore
# cpu scaling mesh dp-devices dp memcheck (the test suite runs last, with the time left). All of them
# together do not fit one 8-minute call: the deadline skips the last ones, so leave out what an
# earlier call already measured (docs/performance.md, "GPU backends", says what that was).
set -uo pipefail
cd "$(dirname "$0")/.."
dest="${1:-${OUT:-gpu-results}}"
mkdir -p "$dest"
dest="$(cd "$dest" && pwd)"
out="$(mktemp -d /tmp/gpu-check.XXXXXX)"
exec > >(tee "$dest/gpu-check.log") 2>&1
t0=$(date +%s)
budget="${GPU_CHECK_BUDGET_S:-420}"
pack() {
  printf '%s\n' "${summary[@]}" > "$dest/summary.txt"
  tar -czf "$dest/results.tar.gz" -C "$out" . 2>/dev/null
}
trap pack EXIT
trap 'exit 143' TERM INT
jobs="$(nproc)"
declare -a summary
step() { echo; echo "== [$(( $(date +%s) - t0 )) s] $*"; }
record() {  # record NAME STATUS
  summary+=("$(printf '%-28s %s' "$1" "$2")")
}
skipped() {  # skipped KEY NAME: true (and recorded) when GPU_CHECK_SKIP names KEY
  case " ${GPU_CHECK_SKIP:-} " in *" $1 "*) record "$2" "left out (GPU_CHECK_SKIP)"; return 0;; esac
  return 1
}
run_step() {  # run_step NAME TIMEOUT LOG CMD...: runs with a limit, records ok/FAILED(rc)
  local name=$1 limit=$2 log=$3; shift 3
  local left=$(( budget - ($(date +%s) - t0) - 10 ))
  if [ "$left" -lt 15 ]; then record "$name" "FAILED (skipped: the ${budget} s budget is spent)"; return 1; fi
  [ "$left" -lt "$limit" ] && limit=$left
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
run_step configure 90 "$out/configure.log" cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$deps/usr" -DCUDAToolkit_ROOT=/usr/local/cuda -DRAVEL_HIP_PLATFORM=NVIDIA \
  -DRAVEL_LEVEL_ZERO=OFF || exit 1
# What the GPU steps need first; the rest of the tree (the test suite) is built at the end.
run_step build 180 "$out/build.log" cmake --build "$build" -j"$jobs" --target ravel-info ravel-conformance \
  ravel_backend_hip ravel_backend_hip_emu ravel-hip-compile-check ravel_backend_tbb_cpu ravel-bench \
  makemore ravel-peer-loops $(grep -q 'OpenCL backend: built' "$out/configure.log" && echo ravel_backend_opencl) || exit 1

"$build/bin/ravel-info" > "$out/ravel-info.txt" 2>&1
sed -n '/^devices:/,/^config/p' "$out/ravel-info.txt"
units=$(grep -A1 '^  hip:0' "$out/ravel-info.txt" | grep -o '[0-9]* compute units' | grep -o '^[0-9]*')
arch=$(grep -A2 '^  hip:0' "$out/ravel-info.txt" | grep -o 'arch sm_[0-9]*' | cut -d' ' -f2)
if [ -z "$units" ] || [ -z "$arch" ]; then
  record "hip:0 present" "FAILED (see ravel-info.txt)"
  units=132 arch=sm_90
fi

# Every conformance kernel, generated for this device and compiled by NVRTC on all cores into the
# on-disk cache, so the conformance run below loads instead of compiling one at a time.
skipped precompile "precompile kernels" || run_step "precompile kernels" 100 "$out/precompile.log" ./tests/hip/compile_conformance_kernels.sh \
  "$build/bin/ravel-conformance" "$build/lib/hip-emu/libravel_backend_hip_emu.so" \
  "$build/bin/ravel-hip-compile-check" "nvidia:$arch:32:$units" "$build/precompile" --jobs "$jobs" --cache

skipped conformance conformance || run_step conformance 90 "$out/conformance.txt" "$build/bin/ravel-conformance" \
  "$build/lib/ravel/plugins/libravel_backend_hip.so" --json "$out/conformance.json"

# The OpenCL backend on the driver's own OpenCL (NVIDIA's ICD on this machine; no PoCL there):
# the platform it found, then the whole conformance suite (the OpenCL backend is the proof that the shared lowering
# makes a backend cheap; docs/architecture.md decision 36).
if [ -f "$build/lib/opencl/libravel_backend_opencl.so" ] && ! skipped opencl "opencl conformance"; then
  RAVEL_PLUGIN_PATH="$build/lib/opencl" "$build/bin/ravel-info" 2>&1 | grep -A2 '^  opencl:' > "$out/opencl-info.txt"
  cat "$out/opencl-info.txt"
  run_step "opencl conformance" 90 "$out/opencl-conformance.txt" "$build/bin/ravel-conformance" \
    "$build/lib/opencl/libravel_backend_opencl.so" --jobs 4 --json "$out/opencl-conformance.json"
fi

skipped bench "bench vs torch" || run_step "bench vs torch" 200 "$out/bench.txt" env RAVEL_HIP_SYNC=1 "$build/bin/ravel-bench" \
  configs/bench/gpu-vs-torch.json --out "$out/bench"

skipped makemore "makemore on hip:0" || run_step "makemore on hip:0" 40 "$out/makemore.txt" \
  "$build/bin/makemore" --config configs/gpu.json --steps 3000 --out "$out/makemore" \
  --words "$deps/usr/share/dict/american-english"

skipped cpu "cpu rows (16 cores)" || run_step "cpu rows (16 cores)" 70 "$out/bench-cpu.txt" "$build/bin/ravel-bench" \
  configs/bench/cpu-16core.json --out "$out/bench-cpu"

# Scaling with cores: the cpu-vs-peers workloads on 2, 4, 8 and 16 of this machine's cores
# (scripts/cpu-scaling.sh; every row that gets slower with more cores is marked).
if ! skipped scaling "cpu scaling (2-16 cores)"; then
  cmake --build "$build" -j"$jobs" --target ravel-peer-loops >/dev/null 2>&1
  run_step "cpu scaling (2-16 cores)" 120 "$out/cpu-scaling.txt" env CPU_SCALING_ARGS="--reps 3" \
    scripts/cpu-scaling.sh "$build" "$out/cpu-scaling"
fi

# Several devices: a mixed mesh of hip:0 and tbb_cpu:0 (transfers through host memory, and a sharded
# tensor over both), then data parallelism over 1, 2 and 4 tbb_cpu devices on 16 cores with the
# all_reduce row against memcpy (configs/bench/data-parallel.json).
if ! skipped mesh "mixed mesh hip:0+tbb_cpu:0"; then
  cmake --build "$build" -j"$jobs" --target hip_multidevice >/dev/null 2>&1
  run_step "mixed mesh hip:0+tbb_cpu:0" 60 "$out/mixed-mesh.txt" env RAVEL_CONFIG= RAVEL_PLUGIN_PATH= \
    RAVEL_TEST_BACKEND=hip RAVEL_TEST_DEVICES=1 RAVEL_TEST_PLUGIN_DIR="$build/lib/ravel/plugins" \
    "$build/bin/hip_multidevice" --report_level=short \
    --run_test=transfers_to_and_from_another_plugin,sharded_tensors_on_the_backend_and_a_mixed_mesh
fi
if ! skipped dp-devices "data parallel (tbb devices)"; then
  cmake --build "$build" -j"$jobs" --target bench_data_parallel >/dev/null 2>&1
  run_step "data parallel (tbb devices)" 90 "$out/data-parallel-devices.txt" "$build/bin/ravel-bench" \
    configs/bench/data-parallel.json --out "$out/data-parallel-devices"
fi

# Several processes: the data-parallel makemore step on 1 to 8 ranks of this machine's 16 cores, against
# PyTorch DDP over Gloo (bench/distributed/dp.sh; one round each), where Open MPI is installed.
if command -v mpirun >/dev/null && ! skipped dp "data parallel (1-8 ranks)"; then
  cmake --build "$build" -j"$jobs" --target ravel_comm_mpi >/dev/null 2>&1
  run_step "data parallel (1-8 ranks)" 100 "$out/data-parallel.txt" env PYTHON=python3 MODELS=makemore \
    WORDS="$deps/usr/share/dict/american-english" bench/distributed/dp.sh "$build" 1 1 2 4 8
fi

if command -v compute-sanitizer >/dev/null && ! skipped memcheck "memcheck (conformance)"; then
  run_step "memcheck (conformance)" 60 "$out/memcheck.txt" compute-sanitizer --tool memcheck \
    --error-exitcode 3 "$build/bin/ravel-conformance" "$build/lib/ravel/plugins/libravel_backend_hip.so" \
    --filter '^(abi|views|reductions/(SUM|MAX)/f32|contractions/f32|fused/chain/f32)'
fi

# The test suite with the time left: its default placement puts every tensor on hip:0 here.
run_step "build the tests" 120 "$out/build-tests.log" cmake --build "$build" -j"$jobs" \
  && run_step "test suite" 180 "$out/ctest.log" ctest --test-dir "$build" -j"$jobs" --output-on-failure --timeout 100 \
       ${GPU_CHECK_TESTS:+-R "$GPU_CHECK_TESTS"}

step "summary ($(( $(date +%s) - t0 )) s)"
printf '%s\n' "${summary[@]}"
! printf '%s\n' "${summary[@]}" | grep -q FAILED
