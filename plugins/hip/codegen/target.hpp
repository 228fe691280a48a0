// What the code generator needs to know about the machine it generates for.
#pragma once

#include <string>

namespace rvl::hip {

// Which compiler and built-ins the generated source is written for.
//  - Nvidia:   NVRTC; `__shfl_down_sync` with a 32-bit mask; warps of 32.
//  - Amd:      hiprtc; `__shfl_down` (64-lane wavefronts need no 32-bit mask); warps of 32 or 64.
//  - Emulated: the host C++ compiler with plugins/hip/emu/emu_device.hpp (a CPU emulation of the
//              built-ins, used to run the whole conformance suite without a GPU).
enum class Platform { Nvidia, Amd, Emulated };

struct Target {
  Platform platform = Platform::Nvidia;
  std::string arch = "sm_90";  // "sm_90", "gfx90a", "gfx1030", "host"
  int warp_size = 32;          // 32 on NVIDIA and RDNA, 64 on CDNA (gfx90a, gfx908)
  int compute_units = 132;     // SMs / CUs: sizes grids
};

const char* platform_name(Platform p);

}  // namespace rvl::hip
