// Prepended (g++ -include) to every generated kernel compiled for the CPU emulator: the GPU
// built-ins the generator uses, on host threads. One emulated thread per GPU thread of a block;
// __syncthreads is a barrier of the block's team; __shared__ memory is a function-static array
// (blocks run one after another); warp shuffles go through an exchange buffer between two
// barriers, so every thread of the block must reach them, as the generator guarantees
// (Note [Reduction kernels]). Out-of-range shuffle lanes return the caller's own value, as on
// NVIDIA and AMD hardware.
#pragma once
#include <math.h>
#include <string.h>

#include "emu_context.hpp"

static thread_local const rvl_emu_ctx* rvl_emu_current;

#define threadIdx (rvl_emu_current->thread)
#define blockIdx (rvl_emu_current->block)
#define gridDim (rvl_emu_current->grid_dim)
#define blockDim (rvl_emu_current->block_dim)
#define __global__
#define __device__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(n)
#define __shared__ static

inline void __syncthreads() { rvl_emu_current->sync(rvl_emu_current->team); }
inline float __int_as_float(int x) { float f; memcpy(&f, &x, 4); return f; }
inline double __longlong_as_double(long long x) { double f; memcpy(&f, &x, 8); return f; }
inline unsigned __float_as_uint(float x) { unsigned u; memcpy(&u, &x, 4); return u; }
inline long long __double_as_longlong(double x) { long long u; memcpy(&u, &x, 8); return u; }

template <class T>
T rvl_shfl_down(T v, int d) {
  T* slots = static_cast<T*>(rvl_emu_current->exchange);
  const unsigned t = rvl_emu_current->thread.x, w = unsigned(rvl_emu_current->warp);
  slots[t] = v;
  __syncthreads();
  const T r = (t % w) + unsigned(d) < w ? slots[t + unsigned(d)] : v;
  __syncthreads();
  return r;
}
