// Note [Interleaved rows]
// Max pooling's gradient for disjoint windows (Note [Max pooling's gradient in the input's
// layout], core/src/nn/pool.cpp) is one elementwise kernel over [.., oh, 2, ow, 2]:
// where(tap id != chosen, 0, g), the output dense, `chosen` and `g` broadcast along the two
// phase axes, the tap ids a [2, 2] table. Its innermost axis has extent 2, so the evaluator
// runs it along ow instead (Note [Short innermost axes]): every block is rows of 14 (or 7)
// elements written at stride 2, one segment per row and input. Those were the two largest
// kernels of the Fashion-MNIST CNN step (2.9 and 2.0 ms of ~23, docs/performance.md §8), several
// times what their bytes take.
//
// Here such a kernel runs in its own order: each output row [ow, phase] (n * e elements,
// contiguous in the output) is one piece; each input's values for the piece are expanded into a
// contiguous buffer by a loop chosen by its two strides (each value repeated e times: the
// broadcast along the phase; the row of e repeated n times: the tap table; a plain run; else
// a two-level gather), and the program's instructions then run as the block evaluator's array
// loops over contiguous pieces of ~1024 elements, the last one writing the output in place.
// The same element functions on the same values in the same dtype: the bits are those of the
// generic path (tests: tests/nn/test_pool_rows.cpp, with and without this path). A LOAD with a
// validity box (zero outside it) is expanded row by row into zeros and the box's part (a strided
// convolution's input gradient sums its phases' padded views: Note [Strided input gradient by
// phases], core/src/nn/conv_gradients.cpp).
//
// Taken when the evaluator moved exactly one short axis (extent <= 4) outward, the program is
// elementwise (no reduction, ACC, epilogue), no LOAD reads the output's buffer, no value is a
// half dtype (those run through the half folds), the output
// rows are contiguous, and there are at most kMaxIns instructions. RAVEL_TBB_NO_INTERLEAVE=1
// keeps the generic path (tests and measurements). Measured (2x2 pooling of [128, 16, 28, 28],
// forward + backward, docs/performance.md §8, 2026-12-07): the routing kernel 2.9 -> 1.1 ms in
// the step's profile.
//
// Note [Short strided rows]
// The forward maximum and the tap choice of the same pooling read the taps' strided slices
// (Note [Pooling tap by tap]): [.., 14, 14] views at stride 2 along the row, one segment per
// row of 14 and input in the evaluator (0.7 and 1.2 ms for the first layer). They take the same
// pieces with e = 1: each input's row gathered at its stride into a contiguous buffer, then the
// array loops. Only for rows of at most kShortStrided elements with some LOAD at a stride other
// than 0 or 1 and no tiling (a longer row amortises the evaluator's per-row cost; dense and
// broadcast rows have their own paths). The forward went 0.70 -> 0.34 ms.
#include "evaluator.hpp"
#include "parallel.hpp"
#include "tuning_env.hpp"

#include <ravel/backend.hpp>
#include <ravel/op_table.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

namespace tbbcpu {
namespace {

constexpr int32_t kMaxIns = 64;
constexpr int kMaxLoads = 16;     // LOADs (and the output) whose row offsets a piece keeps
constexpr int64_t kPiece = 1024;  // elements per piece (whole rows of n * e)
constexpr int64_t kMaxRows = kPiece / 5 + 1;  // n > 4 (a longer axis than the short one)
constexpr int64_t kShortStrided = 32;  // Note [Short strided rows]: rows at most this long

bool interleave_enabled() {
  static const bool off = tuning_int("RAVEL_TBB_NO_INTERLEAVE", 0, 0, 1) != 0;
  return !off;
}

// dst[j * e + p] = src[j * sn + p * se] for j < n, p < e, for `rows` rows at src + off[q]
// (dst rows n * e apart). Inlined into one clone per instruction-set tier so the repeats
// vectorise with that tier's permutes.
template <class T>
[[gnu::always_inline]] inline void expand_body(T* __restrict dst, const T* __restrict src, const int64_t* off,
                                               int64_t rows, int64_t n, int64_t e, int64_t sn, int64_t se) {
  const int64_t row = n * e;
  for (int64_t q = 0; q < rows; ++q, dst += row) {
    const T* s = src + off[q];
    if (e == 1) {  // a short row of its own (Note [Short strided rows])
      if (sn == 1) {
        for (int64_t j = 0; j < n; ++j) dst[j] = s[j];
      } else if (sn == 2) {
        for (int64_t j = 0; j < n; ++j) dst[j] = s[2 * j];
      } else {
        for (int64_t j = 0; j < n; ++j) dst[j] = s[j * sn];
      }
    } else if (se == 0 && sn == 1 && e == 2) {  // broadcast along the phase: each value twice
      for (int64_t j = 0; j < n; ++j) dst[2 * j] = s[j], dst[2 * j + 1] = s[j];
    } else if (sn == 0 && e == 2) {  // a two-phase table, repeated along the row
      const T a = s[0], b = s[se];
      for (int64_t j = 0; j < n; ++j) dst[2 * j] = a, dst[2 * j + 1] = b;
    } else if (se == 1 && sn == e) {  // already contiguous
      for (int64_t i = 0; i < row; ++i) dst[i] = s[i];
    } else {
      for (int64_t j = 0; j < n; ++j)
        for (int64_t p = 0; p < e; ++p) dst[j * e + p] = s[j * sn + p * se];
    }
  }
}

template <class T>
void expand_portable(T* dst, const T* src, const int64_t* off, int64_t rows, int64_t n, int64_t e, int64_t sn, int64_t se) {
  expand_body(dst, src, off, rows, n, e, sn, se);
}
#if defined(__x86_64__) || defined(__i386__)
template <class T>
__attribute__((target("avx2"))) void expand_avx2(T* dst, const T* src, const int64_t* off, int64_t rows, int64_t n,
                                                 int64_t e, int64_t sn, int64_t se) {
  expand_body(dst, src, off, rows, n, e, sn, se);
}
template <class T>
__attribute__((target(RVL_TBB_AVX512_TARGET))) void expand_avx512(T* dst, const T* src, const int64_t* off, int64_t rows,
                                                                   int64_t n, int64_t e, int64_t sn, int64_t se) {
  expand_body(dst, src, off, rows, n, e, sn, se);
}
#endif

template <class T>
void expand(int tier, void* dst, const View& v, const int64_t* off, int64_t rows, int64_t n, int64_t e, int64_t sn,
            int64_t se) {
  T* d = static_cast<T*>(dst);
  const T* s = reinterpret_cast<const T*>(v.data);
#if defined(__x86_64__) || defined(__i386__)
  if (tier >= kSimdAvx512) return expand_avx512(d, s, off, rows, n, e, sn, se);
  if (tier >= kSimdAvx2) return expand_avx2(d, s, off, rows, n, e, sn, se);
#endif
  (void)tier;
  expand_portable(d, s, off, rows, n, e, sn, se);
}

// A masked view (a LOAD is zero outside its box): per row, zeros, then the box's part of the
// row [lo_n, hi_n) x [lo_e, hi_e) copied at its strides; rows outside the outer box stay zero.
template <class T>
void expand_masked(T* __restrict dst, const T* __restrict src, const int64_t* off, const uint8_t* valid, int64_t rows,
                   int64_t n, int64_t e, int64_t sn, int64_t se, const int64_t box[4]) {
  const int64_t row = n * e;
  for (int64_t q = 0; q < rows; ++q, dst += row) {
    std::fill(dst, dst + row, T{});
    if (!valid[q]) continue;
    const T* s = src + off[q];
    for (int64_t p = box[2]; p < box[3]; ++p)
      for (int64_t j = box[0]; j < box[1]; ++j) dst[j * e + p] = s[j * sn + p * se];
  }
}

void expand_masked_any(void* dst, const View& v, const int64_t* off, const uint8_t* valid, int64_t rows, int64_t n,
                       int64_t e, int64_t sn, int64_t se, const int64_t box[4]) {
  switch (rvl::dtype_size(v.dtype)) {
#define RVL_EXPAND_MASKED_(bytes, T)                                                                                   \
  case bytes:                                                                                                         \
    expand_masked(static_cast<T*>(dst), reinterpret_cast<const T*>(v.data), off, valid, rows, n, e, sn, se, box); \
    break;
    RVL_EXPAND_MASKED_(1, uint8_t)
    RVL_EXPAND_MASKED_(2, uint16_t)
    RVL_EXPAND_MASKED_(4, uint32_t)
    default: expand_masked(static_cast<uint64_t*>(dst), reinterpret_cast<const uint64_t*>(v.data), off, valid, rows, n, e, sn, se, box); break;
#undef RVL_EXPAND_MASKED_
  }
}

void expand_any(int tier, void* dst, const View& v, const int64_t* off, int64_t rows, int64_t n, int64_t e, int64_t sn,
                int64_t se) {
  switch (rvl::dtype_size(v.dtype)) {
    case 1: expand<uint8_t>(tier, dst, v, off, rows, n, e, sn, se); break;
    case 2: expand<uint16_t>(tier, dst, v, off, rows, n, e, sn, se); break;
    case 4: expand<uint32_t>(tier, dst, v, off, rows, n, e, sn, se); break;
    default: expand<uint64_t>(tier, dst, v, off, rows, n, e, sn, se); break;
  }
}

}  // namespace

bool Evaluator::run_interleaved() const {
  if (!interleave_enabled() || rank_ < 2 || n_ins_ > kMaxIns || reduce_op_ != RVL_REDUCE_NONE) return false;
  // Interleaved: [outer..., e, n] after the move; else short rows [outer..., n] (e = 1).
  const bool il = interleaved_;
  const int ax_n = rank_ - 1, ax_e = il ? rank_ - 2 : rank_ - 1;  // ax_e: also the outer axes' end
  const int64_t e = il ? shape_[ax_e] : 1, n = shape_[ax_n], row = n * e;
  if (n <= 4 || total_ % row != 0 || (!il && (n > kShortStrided || tile_axis_ >= 0))) return false;
  if (out_.empty || out_.data == nullptr || out_.stride[ax_n] != e || (il && out_.stride[ax_e] != 1)) return false;
  if (rvl::dtype_is_half(out_.dtype)) return false;
  bool strided = false;  // some LOAD walks its row at a stride of 2 or more
  // views[0] is the output, views[1 + k] the k-th LOAD (load_of[j] = k + 1 for LOAD j).
  const View* views[kMaxLoads + 1] = {&out_};
  bool masked[kMaxLoads + 1] = {};  // a view with a validity box smaller than the space
  int n_views = 1;
  int load_of[kMaxIns] = {};
  for (int j = 0; j < n_ins_; ++j) {
    const rvl_instruction& I = ins_[j];
    if (I.op == RVL_OP_ACC || rvl::dtype_is_half(I.dtype)) return false;
    if (I.op != RVL_OP_LOAD) continue;
    const View& v = in_[I.arg];
    if (v.empty || v.data == nullptr || v.data == out_.data || rvl::dtype_is_half(v.dtype)) return false;
    if (n_views > kMaxLoads) return false;
    for (int d = 0; d < rank_; ++d) masked[n_views] |= v.lo[d] > 0 || v.hi[d] < shape_[d];
    strided = strided || v.stride[ax_n] > 1 || v.stride[ax_n] < 0;
    load_of[j] = n_views;
    views[n_views++] = &v;
  }
  if (!il && !strided) return false;  // dense or broadcast rows: the evaluator's own paths
  // The array loop of each computed instruction (CAST: its cast loop), looked up once.
  ArrayFn fn[kMaxIns] = {};
  CastFn cast[kMaxIns] = {};
  for (int j = 0; j < n_ins_; ++j) {
    const rvl_instruction& I = ins_[j];
    if (I.op == RVL_OP_LOAD || I.op == RVL_OP_CONST) continue;
    if (I.op == RVL_OP_CAST) {
      cast[j] = cast_kernel(ins_[I.src[0]].dtype, I.dtype);
      if (cast[j] == nullptr) return false;
      continue;
    }
    if (!rvl::op_is_arithmetic(I.op)) return false;
    fn[j] = array_kernel(I.op, ins_[I.src[rvl::op_info(I.op).accepts == rvl::OpAccepts::Select]].dtype);
    if (fn[j] == nullptr) return false;
  }
  const int tier = simd_tier();
  const int64_t rows = total_ / row, per_piece = std::clamp<int64_t>(kPiece / row, 1, kMaxRows), piece = per_piece * row;
  const int64_t pieces = (rows + per_piece - 1) / per_piece;
  const int64_t out_size = static_cast<int64_t>(rvl::dtype_size(out_.dtype));
  auto body = [&](const tbb::blocked_range<int64_t>& r) {
    // One 8-byte slot of `piece` elements per instruction (per thread, reused across launches).
    thread_local std::vector<uint64_t> mem;
    if (mem.size() < static_cast<size_t>(n_ins_ * piece)) mem.resize(static_cast<size_t>(n_ins_ * piece));
    auto slot = [&](int j) { return static_cast<void*>(mem.data() + static_cast<size_t>(j) * piece); };
    for (int j = 0; j < n_ins_; ++j)
      if (ins_[j].op == RVL_OP_CONST) fill_const(slot(j), ins_[j].dtype, ins_[j].value, piece);
    const void* res[kMaxIns];
    int64_t off[kMaxLoads + 1][kMaxRows];  // each view's offset of each row of the piece
    uint8_t valid[kMaxLoads + 1][kMaxRows];  // masked views: the row inside the outer box
    for (int64_t pc = r.begin(); pc != r.end(); ++pc) {
      const int64_t r0 = pc * per_piece, r1 = std::min(rows, r0 + per_piece), nr = r1 - r0, len = nr * row;
      // The rows' offsets: the outer multi-index of row r0 (axes [0, ax_e)), then an odometer.
      int64_t idx[RVL_MAX_RANK] = {}, cur[kMaxLoads + 1];
      int64_t rest = r0;
      for (int d = ax_e - 1; d >= 0; --d) idx[d] = rest % shape_[d], rest /= shape_[d];
      for (int k = 0; k < n_views; ++k) {
        int64_t o = views[k]->offset;
        for (int d = 0; d < ax_e; ++d) o += idx[d] * views[k]->stride[d];
        cur[k] = o;
      }
      bool out_run = true;  // the piece's rows follow each other in the output
      for (int64_t q = 0; q < nr; ++q) {
        for (int k = 0; k < n_views; ++k) {
          off[k][q] = cur[k];
          if (!masked[k]) continue;
          bool in = true;
          for (int d = 0; d < ax_e; ++d) in = in && idx[d] >= views[k]->lo[d] && idx[d] < views[k]->hi[d];
          valid[k][q] = in;
        }
        if (q > 0) out_run = out_run && off[0][q] == off[0][q - 1] + row;
        for (int d = ax_e - 1; d >= 0; --d) {
          const bool wrap = ++idx[d] == shape_[d];
          if (wrap) idx[d] = 0;
          for (int k = 0; k < n_views; ++k) cur[k] += wrap ? -(shape_[d] - 1) * views[k]->stride[d] : views[k]->stride[d];
          if (!wrap) break;
        }
      }
      std::byte* target = out_.data + off[0][0] * out_size;
      for (int j = 0; j < n_ins_; ++j) {
        const rvl_instruction& I = ins_[j];
        if (I.op == RVL_OP_CONST) {
          res[j] = slot(j);
          continue;
        }
        if (I.op == RVL_OP_LOAD) {
          const int k = load_of[j];
          const View& v = *views[k];
          const int64_t se = il ? v.stride[ax_e] : 0;
          if (masked[k]) {
            const int64_t box[4] = {std::clamp<int64_t>(v.lo[ax_n], 0, n), std::clamp<int64_t>(v.hi[ax_n], 0, n),
                                    il ? std::clamp<int64_t>(v.lo[ax_e], 0, e) : 0, il ? std::clamp<int64_t>(v.hi[ax_e], 0, e) : 1};
            expand_masked_any(slot(j), v, off[k], valid[k], nr, n, e, v.stride[ax_n], se, box);
          } else {
            expand_any(tier, slot(j), v, off[k], nr, n, e, v.stride[ax_n], se);
          }
          if (v.dtype == RVL_DTYPE_BOOL) {  // stored bytes other than 0/1 read as true
            auto* b = static_cast<uint8_t*>(slot(j));
            for (int64_t i = 0; i < len; ++i) b[i] = b[i] != 0;
          }
          res[j] = slot(j);
          continue;
        }
        void* dst = j == n_ins_ - 1 && out_run ? static_cast<void*>(target) : slot(j);
        const void* src[3] = {nullptr, nullptr, nullptr};
        for (int k = 0; k < 3; ++k)
          if (I.src[k] >= 0) src[k] = res[I.src[k]];
        if (I.op == RVL_OP_CAST) cast[j](dst, src[0], len);
        else fn[j](dst, src[0], src[1], src[2], len);
        res[j] = dst;
      }
      const void* values = res[n_ins_ - 1];
      if (values == target) continue;
      // A LOAD or CONST as the last instruction, or rows apart in the output: row by row.
      for (int64_t q = 0; q < nr; ++q)
        std::memcpy(out_.data + off[0][q] * out_size, static_cast<const std::byte*>(values) + q * row * out_size,
                    static_cast<size_t>(row * out_size));
    }
  };
  parallel_for_work(0, pieces, 1, total_ * n_ins_, body);
  return true;
}

}  // namespace tbbcpu
