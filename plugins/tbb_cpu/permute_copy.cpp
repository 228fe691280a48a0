// Note [Permuting copies]
// x.transpose(...).contiguous() and every other copy whose source walks some axis `a` with
// stride 1 while the output walks the innermost axis with stride 1 reaches the plugin as a
// program of one LOAD through a permuted view. run_tiled (program.cpp) already keeps both sides
// in cache, but it gathers a tile element by element (one scalar load and store each) and then
// copies it again into the output: at 4096^2 f32 that ran at ~0.7x a hand-written AVX loop.
//
// Here such a copy is done directly, source to output, in square tiles of 16 KiB of source
// (64 x 64 four-byte or 32 x 32 eight-byte elements, so a tile's source and output both stay in
// L1), each tile as 8 x 8 register transposes (AVX: for floats eight 32-byte loads, 24 shuffles,
// eight 32-byte stores; for 8-byte elements four 4 x 4 transposes; chosen at run time with
// __builtin_cpu_supports, as the GEMM kernels are), and a plain 8 x 8 loop elsewhere (or with
// RAVEL_TBB_PERMUTE_PORTABLE=1, which tests use to check that path on AVX machines). Tile edges (sizes that are not multiples of 8) are scalar. Tiles
// are independent, so the copy is parallel over tiles; each tile moves the same bytes, so the
// split is by bytes (Note [Inline small kernels] decides whether it runs inline at all).
//
// Taken only when it is exactly a copy: one LOAD, 4- or 8-byte elements, the input fully valid
// (no padding to fill with zeros) and a different buffer from the output (an in-place permute
// would read what it has overwritten). Everything else keeps run_tiled. Copying is exact, so
// the result is bitwise that of any other path.
#include "evaluator.hpp"
#include "parallel.hpp"
#include "tuning_env.hpp"

#include <ravel/backend.hpp>

#include <algorithm>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define RAVEL_TBB_PERMUTE_X86 1
#endif

namespace tbbcpu {
namespace {

// An 8 x 8 block of T: dst[r * ds + c] = src[c * ss + r] (strides in elements, may be negative).
template <class T>
inline void permute_block8_portable(const T* src, int64_t ss, T* dst, int64_t ds) {
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 8; ++c) dst[r * ds + c] = src[c * ss + r];
}

#ifdef RAVEL_TBB_PERMUTE_X86
__attribute__((target("avx"))) void permute_block8_avx(const float* src, int64_t ss, float* dst, int64_t ds) {
  __m256 r[8], t[8];
  for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(src + k * ss);
  for (int k = 0; k < 8; k += 2) {
    t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
    t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
  }
  for (int k = 0; k < 8; k += 4) {
    r[k] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int k = 0; k < 4; ++k) {
    _mm256_storeu_ps(dst + k * ds, _mm256_permute2f128_ps(r[k], r[k + 4], 0x20));
    _mm256_storeu_ps(dst + (k + 4) * ds, _mm256_permute2f128_ps(r[k], r[k + 4], 0x31));
  }
}

// The same for 8-byte elements: an 8 x 8 block as four 4 x 4 AVX transposes (bits only moved).
__attribute__((target("avx"))) void permute_block8_avx(const double* src, int64_t ss, double* dst, int64_t ds) {
  for (int bi = 0; bi < 8; bi += 4)
    for (int bj = 0; bj < 8; bj += 4) {
      const double* s = src + bi + bj * ss;
      double* d = dst + bi * ds + bj;
      const __m256d r0 = _mm256_loadu_pd(s), r1 = _mm256_loadu_pd(s + ss);
      const __m256d r2 = _mm256_loadu_pd(s + 2 * ss), r3 = _mm256_loadu_pd(s + 3 * ss);
      const __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
      const __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
      _mm256_storeu_pd(d, _mm256_permute2f128_pd(t0, t2, 0x20));
      _mm256_storeu_pd(d + ds, _mm256_permute2f128_pd(t1, t3, 0x20));
      _mm256_storeu_pd(d + 2 * ds, _mm256_permute2f128_pd(t0, t2, 0x31));
      _mm256_storeu_pd(d + 3 * ds, _mm256_permute2f128_pd(t1, t3, 0x31));
    }
}
#endif

bool permute_use_avx() {
  static const bool use = [] {
    if (tuning_choice("RAVEL_TBB_PERMUTE_PORTABLE", "0", {"0", "1"}) == "1") return false;
#ifdef RAVEL_TBB_PERMUTE_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx") != 0;
#else
    return false;
#endif
  }();
  return use;
}

// One tile: na rows of the output along the permuted axis (source stride 1, output stride oa) by
// ni columns along the innermost axis (source stride si, output stride 1).
template <class T>
void permute_tile(const T* src, int64_t si, T* dst, int64_t oa, int64_t na, int64_t ni, bool avx) {
  int64_t i = 0;
  for (; i + 8 <= na; i += 8) {
    int64_t j = 0;
    for (; j + 8 <= ni; j += 8) {
      const T* s = src + i + j * si;
      T* d = dst + i * oa + j;
#ifdef RAVEL_TBB_PERMUTE_X86
      if (avx) {
        using F = std::conditional_t<sizeof(T) == 4, float, double>;
        permute_block8_avx(reinterpret_cast<const F*>(s), si, reinterpret_cast<F*>(d), oa);
        continue;
      }
#endif
      permute_block8_portable(s, si, d, oa);
    }
    for (; j < ni; ++j)
      for (int64_t r = i; r < i + 8; ++r) dst[r * oa + j] = src[r + j * si];
  }
  for (; i < na; ++i)
    for (int64_t j = 0; j < ni; ++j) dst[i * oa + j] = src[i + j * si];
  (void)avx;
}

}  // namespace

bool Evaluator::run_permute_copy() const {
  const int a = tile_axis_, in = rank_ - 1;
  if (a < 0 || n_ins_ != 1 || ins_[0].op != RVL_OP_LOAD) return false;
  const View& v = in_[ins_[0].arg];
  const size_t es = rvl::dtype_size(v.dtype);
  if (v.empty || out_.empty || (es != 4 && es != 8) || rvl::dtype_size(out_.dtype) != es) return false;
  if (v.stride[a] != 1 || out_.stride[in] != 1 || v.data == out_.data) return false;
  for (int d = 0; d < rank_; ++d)
    if (v.lo[d] > 0 || v.hi[d] < shape_[d]) return false;  // padding: zeros to fill, not a copy

  const int64_t T = es == 4 ? 64 : 32;  // 16 KiB of source per tile (Note [Permuting copies])
  const int64_t na = (shape_[a] + T - 1) / T, ni = (shape_[in] + T - 1) / T;
  int64_t rest_ext = 1;  // every other axis
  for (int d = 0; d < in; ++d)
    if (d != a) rest_ext *= shape_[d];
  const bool avx = permute_use_avx();
  auto body = [&](const tbb::blocked_range<int64_t>& r) {
    for (int64_t t = r.begin(); t != r.end(); ++t) {
      int64_t rest = t;
      const int64_t j0 = (rest % ni) * T;
      rest /= ni;
      const int64_t i0 = (rest % na) * T;
      rest /= na;
      int64_t src_off = v.offset + i0 + j0 * v.stride[in];  // stride[a] == 1
      int64_t dst_off = out_.offset + i0 * out_.stride[a] + j0;
      for (int d = in - 1; d >= 0; --d) {
        if (d == a) continue;
        const int64_t idx = rest % shape_[d];
        rest /= shape_[d];
        src_off += idx * v.stride[d];
        dst_off += idx * out_.stride[d];
      }
      const int64_t ta = std::min(T, shape_[a] - i0), ti = std::min(T, shape_[in] - j0);
      if (es == 4)
        permute_tile(reinterpret_cast<const uint32_t*>(v.data) + src_off, v.stride[in],
                     reinterpret_cast<uint32_t*>(out_.data) + dst_off, out_.stride[a], ta, ti, avx);
      else
        permute_tile(reinterpret_cast<const uint64_t*>(v.data) + src_off, v.stride[in],
                     reinterpret_cast<uint64_t*>(out_.data) + dst_off, out_.stride[a], ta, ti, avx);
    }
  };
  parallel_for_work(0, rest_ext * na * ni, 1, total_, body);
  return true;
}

}  // namespace tbbcpu
