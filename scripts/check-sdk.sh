#!/usr/bin/env bash
# Checks the SDK the way a third party uses it, from the install tree:
#   1. cmake --install BUILD_DIR into a temporary prefix;
#   2. builds sdk/template and examples/consumer out of tree with find_package(Ravel) against it;
#   3. runs the installed ravel-conformance on the installed tbb_cpu plugin and on the template;
#   4. runs the consumer with no RAVEL_* variables (the installed core finds its plugins).
# Usage: scripts/check-sdk.sh BUILD_DIR [PREFIX]   (a configured and built Ravel build directory;
# PREFIX: install there, as the README's `cmake --install build --prefix /opt/ravel`, instead of
# a temporary prefix)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:?usage: scripts/check-sdk.sh BUILD_DIR}"
[ -d "$build" ] || { echo "check-sdk: no build directory $build" >&2; exit 1; }
jobs="$(nproc)"
work="$(mktemp -d "${TMPDIR:-/tmp}/ravel-sdk-check.XXXXXX")"
trap 'rm -rf "$work"' EXIT
prefix="${2:-$work/prefix}"
fail() { echo "check-sdk: FAILED: $*" >&2; exit 1; }

# Nothing from the environment may help the installed core find plugins.
for v in $(env | grep -o '^RAVEL_[A-Z_]*' || true); do unset "$v"; done

echo "-- install into $prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null || fail "cmake --install $build --prefix $prefix"
for f in include/ravel/ravel.hpp include/ravel/backend.h include/ravel/backend.hpp \
         lib/libravel_core.so lib/ravel/plugins/libravel_backend_tbb_cpu.so \
         bin/ravel-conformance bin/ravel-info lib/cmake/Ravel/RavelConfig.cmake \
         lib/cmake/Ravel/RavelConfigVersion.cmake; do
  [ -e "$prefix/$f" ] || fail "missing from the install tree: $f"
done

# Sanitizer builds need the same flags out of tree.
extra=()
if grep -q '^RAVEL_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  extra=(-DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer"
         -DCMAKE_MODULE_LINKER_FLAGS="-fsanitize=address,undefined"
         -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined")
fi

echo "-- template plugin, out of tree"
cmake -S sdk/template -B "$work/template" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  "${extra[@]}" >/dev/null || fail "configure sdk/template"
cmake --build "$work/template" -j"$jobs" >/dev/null || fail "build sdk/template"

echo "-- consumer application, out of tree"
cmake -S examples/consumer -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release "${extra[@]}" >/dev/null || fail "configure examples/consumer"
cmake --build "$work/consumer" -j"$jobs" >/dev/null || fail "build examples/consumer"

echo "-- ravel-conformance: installed tbb_cpu plugin"
"$prefix/bin/ravel-conformance" "$prefix/lib/ravel/plugins/libravel_backend_tbb_cpu.so" \
  --json "$work/tbb_cpu.json" | grep -E '^(\[|  FAIL|[0-9]+ passed)' || fail "conformance of tbb_cpu"
echo "-- ravel-conformance: template plugin"
"$prefix/bin/ravel-conformance" "$work/template/libravel_backend_template.so" \
  --json "$work/template.json" | grep -E '^(\[|  FAIL|[0-9]+ passed)' || fail "conformance of the template"

echo "-- consumer (no RAVEL_* environment)"
(cd "$work" && "$work/consumer/ravel_consumer") || fail "consumer application"
echo "check-sdk: OK"
