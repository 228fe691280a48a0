// Run-time compilation of generated kernels: NVRTC (NVIDIA), hiprtc (AMD), or the host C++
// compiler (the CPU emulator). NVRTC and hiprtc are opened with dlopen, so one binary can
// compile for both (the compile tests do: sm_90 with NVRTC, gfx90a/gfx1030 with hiprtc, on a
// machine with no GPU) and the plugin loads even where the compiler library is missing.
#pragma once

#include "../codegen/codegen.hpp"

#include <string>

namespace rvl::hip {

// The code object for `k` on `t` (cubin, hsaco, or an emulator image). A compile error throws
// rvl::Error(DEVICE_ERROR) naming the kernel, the target and the compiler's log.
std::string compile_kernel(const KernelSource& k, const Target& t);

// Identifies the compiler (and its version) for `p`: part of the on-disk cache key.
std::string compiler_id(Platform p);

// Whether the compiler for `p` can be used here; `why` says why not.
bool compiler_available(Platform p, std::string* why);

// ROCm 5.2's comgr crashes on an arch it does not know, so hiprtc is only asked for these.
bool amd_arch_supported(const std::string& arch);

}  // namespace rvl::hip
