#!/bin/sh
# compile_conformance_kernels.sh CONFORMANCE EMU_PLUGIN COMPILE_CHECK PLATFORM:ARCH:WARP OUTDIR [CHECK_ARGS...]
# Generates the kernels of every conformance case for one real target (a dry run of the suite on
# the emulated device: kernels are generated and dumped, never compiled or run, so the cases'
# results are meaningless and ignored), then compiles them all with that target's compiler.
# With SAME_AS_DIR set to the kernel folder of a target compiled before (by this script, with the
# same compiler), a kernel whose source is byte for byte one of that folder's is not compiled
# again: the generated source depends only on the wavefront width, so for a second AMD target most
# kernels are the first target's text (2,135 of 2,323 on 2026-12-07) and compiling them again would
# test the compiler's other back end, not Ravel's code. scripts/check-hip.sh --full compiles all.
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
if [ -n "${SAME_AS_DIR:-}" ] && [ -d "$SAME_AS_DIR" ]; then
  same=0
  for f in "$out"/*; do
    if cmp -s "$f" "$SAME_AS_DIR/${f##*/}"; then rm -f "$f"; same=$((same + 1)); fi
  done
  echo "$same of them identical to kernels compiled for the previous target ($SAME_AS_DIR), not compiled again"
fi
exec "$check" --platform "$platform" --arch "$arch" "$@" "$out"
