// Note [Padding copies]
// A convolution's implicit GEMM reads unmasked views, so the core pads a copy of its input first
// (Note [Implicit im2col]): x.pad(...).contiguous(), one LOAD of a masked view. In the
// Fashion-MNIST CNN those copies write [128, 32, 16, 16] (the input gradient's padded output
// gradient), [128, 16, 16, 16] and [128, 1, 30, 30] per step, rows of 16 or 30 elements; the
// generic evaluator ran them at 0.9, 0.4 and 0.15 ms (RAVEL_DEBUG), several times what the bytes
// take, the per-row cost of blocks that split short rows and test the mask per element.
// Here such a copy is done row by row: a row outside the valid box on an outer axis is zeroed
// whole; otherwise its leading and trailing pads are zeroed and the valid span copied. Rows are
// split over the threads in chunks of ~64 KiB of output. Taken only for exactly a copy: one LOAD
// of the output's dtype, stride 1 along the innermost axis on both sides, at least one axis
// masked, and a different buffer from the output. A LOAD outside its view's box is zero (the
// ABI's padding value), which is all-zero bytes for every dtype. Exact: the result is bitwise
// that of the generic path.
// Note [Padding rows as masked vectors]: a padded row of 16 floats was three library calls
// (memset, memcpy, memset of 4, 56 and 4 bytes) after a division per outer axis to find it: at
// 128x32x14x14, pad 1, 0.5 ms of a 5 ms forward. With AVX-512 a row of 4-byte elements is
// written in 16-lane pieces, each one zero-masked load of the valid lanes (the masked-off lanes
// are never read, so the source may start before its buffer) and one masked store, and the rows
// are walked by a cursor that adds strides instead of dividing. Bitwise the same (a load and a
// store move bits; NaNs are not touched). RAVEL_TBB_PAD_VECTORS=0 keeps the library calls.
// docs/performance.md §8 (convfwd).
#include "evaluator.hpp"
#include "gemm_kernels.hpp"
#include "parallel.hpp"
#include "tuning_env.hpp"

#include <ravel/backend.hpp>

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define RVL_PAD_COPY_X86 1
#endif

namespace tbbcpu {

namespace {

// Walks the rows of a copy in order: each row's source and output offsets (elements) and
// whether it lies inside the source's valid box on every outer axis, by adding strides.
struct RowCursor {
  int64_t idx[RVL_MAX_RANK] = {};
  int64_t so = 0, oo = 0;
  int outer = 0;  // axes [0, outer) are the rows' index
  const int64_t* shape;
  const View* v;
  const View* out;

  RowCursor(const View& src, const View& dst, const int64_t* shp, int outer_axes, int64_t row)
      : so(src.offset), oo(dst.offset), outer(outer_axes), shape(shp), v(&src), out(&dst) {
    for (int d = outer - 1; d >= 0; --d) {
      idx[d] = row % shape[d];
      row /= shape[d];
      so += idx[d] * v->stride[d];
      oo += idx[d] * out->stride[d];
    }
  }
  bool inside() const {
    for (int d = 0; d < outer; ++d)
      if (idx[d] < v->lo[d] || idx[d] >= v->hi[d]) return false;
    return true;
  }
  void next() {
    for (int d = outer - 1; d >= 0; --d) {
      so += v->stride[d], oo += out->stride[d];
      if (++idx[d] < shape[d]) return;
      so -= v->stride[d] * shape[d], oo -= out->stride[d] * shape[d];
      idx[d] = 0;
    }
  }
};

bool pad_vectors_enabled() {
  static const bool on = tuning_choice("RAVEL_TBB_PAD_VECTORS", "1", {"0", "1"}) == "1";
  return on;
}

#ifdef RVL_PAD_COPY_X86
// Rows [r0, r1) of a copy of 4-byte elements, width elements each, valid lanes [lo, hi):
// Note [Padding rows as masked vectors].
__attribute__((target("avx512f"))) void pad_rows_avx512(RowCursor cur, int64_t rows, const float* src, float* dst,
                                                        int64_t width, int64_t lo, int64_t hi) {
  for (int64_t r = 0; r < rows; ++r, cur.next()) {
    const bool inside = cur.inside();
    float* o = dst + cur.oo;
    const float* s = src + cur.so;
    for (int64_t at = 0; at < width; at += 16) {
      const int64_t n = std::min<int64_t>(16, width - at);
      const int64_t a = std::max<int64_t>(lo - at, 0), b = std::min<int64_t>(hi - at, n);
      const __mmask16 store = static_cast<__mmask16>((1u << n) - 1u);
      const __mmask16 load = inside && a < b ? static_cast<__mmask16>(((1u << b) - 1u) & ~((1u << a) - 1u)) : 0;
      _mm512_mask_storeu_ps(o + at, store, _mm512_maskz_loadu_ps(load, s + at));
    }
  }
}
#endif

}  // namespace

bool Evaluator::run_pad_copy() const {
  if (n_ins_ != 1 || ins_[0].op != RVL_OP_LOAD || rank_ < 1) return false;
  const View& v = in_[ins_[0].arg];
  const int in = rank_ - 1;
  if (v.empty || out_.empty || v.dtype != out_.dtype || v.data == out_.data) return false;
  if (v.stride[in] != 1 || out_.stride[in] != 1) return false;
  bool masked = false;
  for (int d = 0; d < rank_; ++d) masked |= v.lo[d] > 0 || v.hi[d] < shape_[d];
  if (!masked) return false;
  const int64_t es = static_cast<int64_t>(rvl::dtype_size(v.dtype)), width = shape_[in];
  const int64_t rows = total_ / std::max<int64_t>(width, 1);
  const int64_t lo = std::clamp<int64_t>(v.lo[in], 0, width), hi = std::clamp<int64_t>(v.hi[in], lo, width);
  const std::byte* src = v.data;
  std::byte* dst = out_.data;
  const int64_t per_chunk = std::max<int64_t>(1, (64 << 10) / std::max<int64_t>(1, width * es));
#ifdef RVL_PAD_COPY_X86
  const bool vectors = es == 4 && pad_vectors_enabled() && gemm::isa_is_avx512();
#else
  const bool vectors = false;
#endif
  auto body = [&](const tbb::blocked_range<int64_t>& r) {
    for (int64_t chunk = r.begin(); chunk != r.end(); ++chunk) {
      const int64_t r0 = chunk * per_chunk, r1 = std::min(rows, r0 + per_chunk);
      RowCursor cur(v, out_, shape_, in, r0);
#ifdef RVL_PAD_COPY_X86
      if (vectors) {
        pad_rows_avx512(cur, r1 - r0, reinterpret_cast<const float*>(src), reinterpret_cast<float*>(dst), width, lo,
                        hi);
        continue;
      }
#endif
      for (int64_t row = r0; row < r1; ++row, cur.next()) {
        std::byte* o = dst + cur.oo * es;
        if (!cur.inside() || lo >= hi) {
          std::memset(o, 0, static_cast<size_t>(width * es));
          continue;
        }
        std::memset(o, 0, static_cast<size_t>(lo * es));
        std::memcpy(o + lo * es, src + (cur.so + lo) * es, static_cast<size_t>((hi - lo) * es));
        std::memset(o + hi * es, 0, static_cast<size_t>((width - hi) * es));
      }
    }
  };
  parallel_for_work(0, (rows + per_chunk - 1) / per_chunk, 1, total_, body);
  return true;
}

}  // namespace tbbcpu
