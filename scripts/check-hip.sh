#!/usr/bin/env bash
# The HIP backend's CI checks, on a machine with no GPU (scripts/test.sh runs it after the main
# build as `scripts/check-hip.sh build`; about 3-4 minutes on 2 cores):
#   1. every conformance case's kernels, generated for gfx90a (64-wide wavefronts) and gfx1030
#      (32-wide), compiled by hiprtc (sm_90 through NVRTC on request: RAVEL_HIP_CHECK_TARGETS);
#      gfx1030 compiles the kernels whose text differs from gfx90a's (all of them with --full);
#   2. a slice of every conformance group run end to end on the CPU emulator (generated kernels
#      compiled by the host compiler and executed), with 32- and 64-wide warps;
#   3. two emulated devices (RAVEL_HIP_EMU_DEVICES=2): the peer-copy group (buffer_copy_peer,
#      ABI 1.5), the collectives (all_reduce, reduce_scatter, all_gather) and a slice of cases on
#      device 1, four devices for the collectives, and the core's transfers and collectives
#      between hip:0, hip:1 and tbb_cpu:0 (hip_multidevice);
#   4. DLPack through the core on the emulator (hip_dlpack): round trips as kDLROCM, and the
#      emulator standing in for an NVIDIA device exports kDLCUDA.
# `--full` runs the whole conformance suite on the emulator instead of the slice (~10 minutes).
# Without hiprtc and NVRTC the compile checks say so and are skipped; exit 0 then.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:?usage: scripts/check-hip.sh BUILD_DIR [--full]}"
full="${2:-}"
[ -d "$build" ] || { echo "check-hip: no build directory $build" >&2; exit 1; }
jobs="$(nproc)"
start=$(date +%s)

if ! command -v hipcc >/dev/null && ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "check-hip: skipped: no HIP (hipcc, libamdhip64-dev) or CUDA toolchain on this machine"
  exit 0
fi
cmake --build "$build" --target ravel-conformance ravel_backend_hip_emu ravel-hip-compile-check hip_dlpack hip_multidevice \
  -j"$jobs" >/dev/null
conformance="$build/bin/ravel-conformance"
emu="$build/lib/hip-emu/libravel_backend_hip_emu.so"
check="$build/bin/ravel-hip-compile-check"
work="$build/hip-check"
mkdir -p "$work"
export RAVEL_CACHE_DIR="$work/cache"   # host-compiled emulator kernels: reruns are fast

echo "-- conformance kernels compiled for real targets (no GPU needed)"
status=0
# RAVEL_HIP_CHECK_TARGETS overrides the list. The default is the two AMD targets (one per
# wavefront width, the only thing the generated source depends on). NVRTC for sm_90 is opt-in
# (add nvidia:sm_90:32): it takes ~6 minutes on 2 cores (the 4096-instruction integer chains sit
# in cicc), and the NVIDIA build is exercised for real by scripts/gpu-check.sh on a GPU machine.
# A later AMD target compiles only the kernels whose text differs from the previous AMD target's
# (the wave width's reductions and tiles); --full compiles every kernel for every target.
previous=""
for target in ${RAVEL_HIP_CHECK_TARGETS:-amd:gfx90a:64 amd:gfx1030:32}; do
  same_as=""
  [ "$full" != "--full" ] && [ "${target%%:*}" = amd ] && [ "${previous%%:*}" = amd ] && \
    same_as="$work/kernels-${previous//:/-}"
  SAME_AS_DIR="$same_as" ./tests/hip/compile_conformance_kernels.sh "$conformance" "$emu" "$check" "$target" \
    "$work/kernels-${target//:/-}" --jobs "$jobs" || { rc=$?; [ $rc -eq 77 ] || status=1; }
  previous="$target"
done

echo "-- conformance on the CPU emulator"
filter='^(abi/|layouts/|edges/(IDIV|MOD)/i32|edges/CAST/f32->u8|exact_reductions/(SUM|MAX)/(i32|f32)/16x128x128|views/(input_(contiguous|padding|flip_both|gapped|all_padding)|output_(gapped|reversed)|rank_(0|3|8)|empty|long)|elementwise/(ADD|MAX|IDIV|MOD|CAST)/(i32|u8|f32)|nan_inf/(MAX|CAST)/f32|integer_edges/(IDIV|MOD)/i32|reductions/(SUM|MAX|PROD)/(f32|i64|bool)/axes\{(0|3|013)\}|reductions/.*(long|empty)|contractions/(f32/(1x3x3|17x17x3|129x3x3|transposed)|(i32|bool)/transposed)|fused/chain/f32/(2|64)|malformed/|logsumexp/LOGSUMEXP/(f32/(axes\{03\}|long_12288_axes1|special_columns)|f64/specials_data$|f32_to_f64/special_rows$)|half_rounding/|elementwise/((ADD|MUL)/(f16|bf16|i8|u16|u64)|CAST/(f32->f16|f64->bf16|bf16->i8|u64->f16|i16->u32))$|exact_reductions/(SUM|MAX)/(f16|bf16)/|contractions/(f16|bf16|i8|u64)/(17x3x129|transposed_AtBtCt)|row_epilogue/(softmax/f32/185_axes2|max_subtract/bf16/185_axes1|sum_divide/f16/185_axes2|log_softmax/f32_acc_f64/185_axes2)$|row_chain/(layer_norm/f32/185_axes[12]|ce_loss/f32/5x37|three_stages/f32/185_axes2)$)'
[ "$full" = "--full" ] && filter=''
for warp in 32 64; do
  echo "   warp $warp"
  RAVEL_HIP_EMU_WARP=$warp "$conformance" "$emu" ${filter:+--filter "$filter"} --jobs "$jobs" \
    --json "$work/emulated-warp$warp.json" | tail -1 || status=1
done
# The all-reduce's own steps (copies, barriers, in place, streams, refusals); its fold in every
# dtype and op is the shared program (Note [Fold programs]) that check-level-zero.sh runs in
# every dtype on zecl, and --full here (each dtype's fold compiled by the emulator: ~30 s).
# reduce_scatter and all_gather (ABI 1.12, the same plan: Note [HIP collectives]): their steps,
# and one dtype per family (f32, bf16, i32, u8, bool) of every op and size; every dtype with --full.
echo "-- two emulated devices (RAVEL_HIP_EMU_DEVICES=2): peer copies both ways, the collectives, and a slice on device 1"
all_reduce='all_reduce/(in_place|ordered_without_host_synchronisation|streams_of_each_device|bad_arguments)'
scatter_gather='(reduce_scatter|all_gather)/(every_(op_and_)?size/(f32|bf16|i32|u8|bool)$|ordered|streams|bad_arguments)'
[ "$full" = "--full" ] && all_reduce='all_reduce/' scatter_gather='(reduce_scatter|all_gather)/'
RAVEL_HIP_EMU_DEVICES=2 "$conformance" "$emu" --device 1 \
  --filter "^(peer/|abi/|$all_reduce|$scatter_gather|elementwise/ADD/f32|contractions/f32/17x17x3)" \
  --jobs "$jobs" --json "$work/emulated-two-devices.json" | tail -1 || status=1
# Every dtype and op ran over two devices above; here the folds of four parts, in place and
# ordered between kernels (the n-sided barriers), and all_gather's copies over 1..4 devices,
# without compiling every dtype's fold again. --full adds reduce_scatter's folds of 1..4 chunks
# in f32 for every op and size (12 more kernels: ~55 s cold on the loaded 2-core machine).
echo "-- four emulated devices: the collectives of four parts (Note [HIP collectives])"
four='all_reduce/(in_place|ordered_without_host_synchronisation)|reduce_scatter/ordered|all_gather/(every_size/f32$|ordered)'
[ "$full" = "--full" ] && four="$four|reduce_scatter/every_op_and_size/f32\$"
RAVEL_HIP_EMU_DEVICES=4 "$conformance" "$emu" --filter "^($four)" \
  --jobs "$jobs" --json "$work/emulated-four-devices.json" | tail -1 || status=1
multi_log="$work/multidevice.log"
# Twice: the collectives composed of peer copies and kernels, and through the plugin's
# all_reduce, reduce_scatter and all_gather at every size (RAVEL_PLUGIN_COLLECTIVES=1; the test's parts are below the default
# threshold).
for collectives in 0 1; do
  if RAVEL_PLUGIN_COLLECTIVES=$collectives RAVEL_CONFIG= RAVEL_PLUGIN_PATH= RAVEL_HIP_EMU_DEVICES=2 \
       RAVEL_TEST_BACKEND=hip RAVEL_TEST_DEVICES=2 RAVEL_TEST_PLUGIN_DIR="$(dirname "$emu")" \
       "$build/bin/hip_multidevice" --report_level=short >"$multi_log" 2>&1; then
    echo "   hip_multidevice (transfers between hip:0, hip:1 and tbb_cpu:0 through the core;" \
         "RAVEL_PLUGIN_COLLECTIVES=$collectives): passed"
  else
    cat "$multi_log"; status=1
  fi
done
echo "-- DLPack on the CPU emulator (kDLROCM; as an NVIDIA device, kDLCUDA)"
dlpack_log="$work/dlpack.log"
for target in "" "nvidia:sm_90:32"; do
  args=(--report_level=short)
  [ -n "$target" ] && args+=(--run_test=device_type_follows_the_platform)
  if RAVEL_CONFIG= RAVEL_PLUGIN_PATH= RAVEL_HIP_EMU_TARGET="$target" "$build/bin/hip_dlpack" "${args[@]}" \
       >"$dlpack_log" 2>&1; then
    echo "   hip_dlpack ${target:-(emulated AMD)}: passed"
  else
    cat "$dlpack_log"; status=1
  fi
done
echo "check-hip: $([ $status -eq 0 ] && echo passed || echo FAILED) in $(( $(date +%s) - start )) s"
exit $status
