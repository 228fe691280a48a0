// The source every generated kernel starts with: platform built-ins the generator relies on,
// and the shared scalar helpers with the ABI's edge-case semantics (docs/abi.md 7.2, 7.3;
// lower::c::helpers). Plain built-ins only (no #include): NVRTC cannot see HIP headers, and
// hiprtc pre-includes what it needs.
#include "codegen.hpp"

#include <ravel/lowering/c_source.hpp>

namespace rvl::hip {

const char* platform_name(Platform p) {
  switch (p) {
    case Platform::Nvidia: return "nvidia";
    case Platform::Amd: return "amd";
    case Platform::Emulated: return "emulated";
  }
  return "?";
}

namespace {

// Warp shuffles. NVIDIA needs the 32-bit participation mask; on AMD the __shfl_*_sync masks are
// 64-bit and the unsynchronised __shfl_down is the portable spelling for 32- and 64-lane waves.
const char* kShuffleNvidia = R"(template <class T> static __device__ __forceinline__ T rvl_shfl_down(T v, int d) {
  return __shfl_down_sync(0xffffffffu, v, d);
}
)";
const char* kShuffleAmd = R"(template <class T> static __device__ __forceinline__ T rvl_shfl_down(T v, int d) {
  return __shfl_down(v, d);
}
)";

// One- and two-byte values travel as int (no shuffle overloads for char and short).
const char* kHipOnly = R"(static __device__ __forceinline__ unsigned char rvl_shfl_down(unsigned char v, int d) {
  return (unsigned char)rvl_shfl_down((int)v, d);
}
static __device__ __forceinline__ signed char rvl_shfl_down(signed char v, int d) {
  return (signed char)rvl_shfl_down((int)v, d);
}
static __device__ __forceinline__ short rvl_shfl_down(short v, int d) {
  return (short)rvl_shfl_down((int)v, d);
}
static __device__ __forceinline__ unsigned short rvl_shfl_down(unsigned short v, int d) {
  return (unsigned short)rvl_shfl_down((int)v, d);
}
// Four consecutive elements, aligned so that one vector load/store moves them.
template <class T> struct alignas(4 * sizeof(T)) rvl_vec4 { T v[4]; };
)";

}  // namespace

std::string prelude(const Target& t) {
  // Only what the prelude depends on: kernels that do not use the warp width share sources (and
  // disk-cache entries) across warp widths.
  std::string s = "// Ravel generated kernel for " + std::string(platform_name(t.platform)) + "\n";
  if (t.platform == Platform::Nvidia) s += kShuffleNvidia;
  else if (t.platform == Platform::Amd) s += kShuffleAmd;
  // Emulated: rvl_shfl_down comes from emu_device.hpp, prepended by the emulator's compiler.
  s += kHipOnly;
  s += lower::c::helpers(lower::c::kHip);  // the ABI's edge cases, shared with OpenCL C
  return s;
}

}  // namespace rvl::hip
