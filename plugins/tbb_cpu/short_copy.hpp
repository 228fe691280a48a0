// Copies of short runs without a library call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tbbcpu {

// Note [Short copies inline]
// Kernels over views with short rows (a pooling window's 14-element rows, a convolution's
// output rows in the window packer) copy one run per row. memcpy/memmove of a length known only
// at run time is a library call, whose dispatch cost as much as the copy itself at 56 bytes:
// 12% of the Fashion-MNIST CNN step was __memmove_avx512_unaligned_erms. Runs up to 128 bytes
// are copied inline in 16-byte pieces (constant-size memcpy, which compiles to one load and one
// store) and a 4-byte or byte tail; longer ones still call memmove. The empty asm keeps the
// compiler from turning the tail loop back into a call. Overlap: callers that may pass the same
// memory as source and destination (an in-place copy) pass src == dst or disjoint runs only;
// `copy_run_maybe_overlapping` checks and falls back to memmove otherwise.
inline void copy_run_bytes(void* dst, const void* src, size_t bytes) {
  if (bytes > 128) {
    std::memcpy(dst, src, bytes);
    return;
  }
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  size_t i = 0;
  for (; i + 16 <= bytes; i += 16) std::memcpy(d + i, s + i, 16);
  for (; i + 4 <= bytes; i += 4) std::memcpy(d + i, s + i, 4);
  for (; i < bytes; ++i) {
    d[i] = s[i];
    asm volatile("");
  }
}

template <class T>
inline void copy_run(T* dst, const T* src, int64_t n) {
  copy_run_bytes(dst, src, static_cast<size_t>(n) * sizeof(T));
}

template <class T>
inline void copy_run_maybe_overlapping(T* dst, const T* src, int64_t n) {
  const size_t bytes = static_cast<size_t>(n) * sizeof(T);
  const auto d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
  if (bytes > 128 || (d != s && d < s + bytes && s < d + bytes)) {
    std::memmove(dst, src, bytes);
    return;
  }
  if (d != s) copy_run_bytes(dst, src, bytes);
}

}  // namespace tbbcpu
