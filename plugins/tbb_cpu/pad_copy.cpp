// Note [Padding copies]
// A convolution's implicit GEMM reads unmasked views, so the core pads a copy of its input first
// (Note [Implicit im2col]): x.pad(...).contiguous(), one LOAD of a masked view. In the
// Fashion-MNIST CNN those copies write [128, 32, 16, 16] (the input gradient's padded output
// gradient), [128, 16, 16, 16] and [128, 1, 30, 30] per step, rows of 16 or 30 elements; the
// generic evaluator ran them at 0.9, 0.4 and 0.15 ms (RAVEL_DEBUG), several times what the bytes
// take, the per-row cost of blocks that split short rows and test the mask per element.
// Here such a copy is done row by row: a row outside the valid box on an outer axis is zeroed
// whole; otherwise its leading and trailing pads are zeroed and the valid span copied with
// memcpy. Rows are split over the threads in chunks of ~64 KiB of output. Taken only for exactly
// a copy: one LOAD of the output's dtype, stride 1 along the innermost axis on both sides, at
// least one axis masked, and a different buffer from the output. A LOAD outside its view's box
// is zero (the ABI's padding value), which is all-zero bytes for every dtype. Exact: the result
// is bitwise that of the generic path.
#include "evaluator.hpp"
#include "parallel.hpp"

#include <ravel/backend.hpp>

#include <algorithm>
#include <cstring>

namespace tbbcpu {

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
  auto body = [&](const tbb::blocked_range<int64_t>& r) {
    for (int64_t chunk = r.begin(); chunk != r.end(); ++chunk) {
      const int64_t r0 = chunk * per_chunk, r1 = std::min(rows, r0 + per_chunk);
      for (int64_t row = r0; row < r1; ++row) {
        int64_t rest = row, so = v.offset, oo = out_.offset;
        bool inside = true;
        for (int d = in - 1; d >= 0; --d) {
          const int64_t i = rest % shape_[d];
          rest /= shape_[d];
          inside &= i >= v.lo[d] && i < v.hi[d];
          so += i * v.stride[d];
          oo += i * out_.stride[d];
        }
        std::byte* o = dst + oo * es;
        if (!inside || lo >= hi) {
          std::memset(o, 0, static_cast<size_t>(width * es));
          continue;
        }
        std::memset(o, 0, static_cast<size_t>(lo * es));
        std::memcpy(o + lo * es, src + (so + lo) * es, static_cast<size_t>((hi - lo) * es));
        std::memset(o + hi * es, 0, static_cast<size_t>((width - hi) * es));
      }
    }
  };
  parallel_for_work(0, (rows + per_chunk - 1) / per_chunk, 1, total_, body);
  return true;
}

}  // namespace tbbcpu
