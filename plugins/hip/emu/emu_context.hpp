// The context an emulated kernel runs in: the launch geometry of one emulated GPU thread and the
// block's barrier. Shared by the emulator's runtime (emu_runtime.cpp, which fills it) and the
// device header prepended to generated kernels (emu_device.hpp, which reads it).
//
// Why a header of its own: emu_device.hpp defines GPU keywords as macros (__noinline__,
// __shared__, threadIdx...). Those must never be seen by the standard library headers, which
// spell __attribute__((__noinline__)) (GCC 12's libstdc++) and break under such a macro. The
// runtime therefore includes only this file, never the device header.
#pragma once

struct rvl_emu_dim3 {
  unsigned x, y, z;
};
struct rvl_emu_ctx {
  rvl_emu_dim3 thread, block, grid_dim, block_dim;
  int warp;
  void (*sync)(void* team);
  void* team;
  void* exchange;  // 8 bytes per thread of the block
};
