#!/bin/sh
# compile_conformance_kernels.sh CONFORMANCE EMU_PLUGIN COMPILE_CHECK PLATFORM:ARCH:WARP OUTDIR [CHECK_ARGS...]
# Generates the kernels of every conformance case for one real target (a dry run of the suite on
# the emulated device: kernels are generated and dumped, never compiled or run, so the cases'
# results are meaningless and ignored), then compiles them all with that target's compiler.
set -u
conformance=$1 plugin=$2 check=$3 target=$4 out=$5
shift 5
platform=${target%%:*}
rest=${target#*:}
arch=${rest%%:*}
rm -rf "$out" && mkdir -p "$out"
RAVEL_HIP_DRY_RUN=1 RAVEL_HIP_EMU_TARGET=$target RAVEL_HIP_DUMP_DIR=$out RAVEL_CACHE_DIR=off \
  "$conformance" "$plugin" > "$out.log" 2>&1
n=$(ls "$out" | wc -l)
echo "$n kernels generated for $platform $arch by the conformance cases"
if [ "$n" -lt 300 ]; then
  echo "expected at least 300 kernels; see $out.log" >&2
  exit 1
fi
exec "$check" --platform "$platform" --arch "$arch" "$@" "$out"
