// Running programs: element-wise (parallel over blocks, or tiles for transposed loads) and
// reductions (parallel over outputs when there are many, parallel deterministic reduce over the
// reduced extent when there are few; reduced-outer layouts accumulate whole rows).
//
// Determinism: for a given machine and thread count the result is bitwise reproducible: each
// output is accumulated in an order fixed by the shapes alone (floats in vector lanes, Note
// [Vectorised horizontal reductions]), or (few outputs) by parallel_deterministic_reduce whose
// split points depend only on the range and grain size, never on timing. Whether a kernel runs
// inline (Note [Inline small kernels], parallel.hpp) also depends only on its size.
#include "evaluator.hpp"

#include "dtype_ops.hpp"
#include "fold.hpp"
#include "half_fold.hpp"
#include "parallel.hpp"

#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace tbbcpu {
namespace {

// Accumulates (ROP) n values into n consecutive accumulators; vectorises for sum and max.
template <int DT, int ROP>
inline void fold_into(ctype<DT>* acc, const ctype<DT>* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] = reduce_combine<DT>(ROP, acc[i], v[i]);
}

// A block of fold_eval's values folded into acc (fold.hpp), or into n accumulators: halves
// (`half`, the evaluator's fold_half_) widened in registers (Note [Widening in the fold]).
template <int DT, int ROP>
inline ctype<DT> fold_block(int32_t half, ctype<DT> acc, const void* v, int64_t n) {
  if constexpr (DT == RVL_DTYPE_F32)
    if (half != 0) return fold_half(ROP, half, acc, static_cast<const uint16_t*>(v), n);
  return fold<DT, ROP>(acc, static_cast<const ctype<DT>*>(v), n);
}
template <int DT, int ROP>
inline void fold_block_into(int32_t half, ctype<DT>* acc, const void* v, int64_t n) {
  if constexpr (DT == RVL_DTYPE_F32)
    if (half != 0) return fold_half_into(ROP, half, acc, static_cast<const uint16_t*>(v), n);
  fold_into<DT, ROP>(acc, static_cast<const ctype<DT>*>(v), n);
}

// A range body by reference, without allocating: for_range and the oneTBB parallel_for inside it
// are then compiled once, not once for each of the 39 dtype-and-op reductions (this file took
// 34 CPU-s to compile at -O3, 20 with this; docs/testing.md). One indirect call per range.
class RangeBody {
 public:
  template <class F>
  RangeBody(const F& f)  // NOLINT: implicit, so callers pass their lambda as before
      : body_(&f), call_([](const void* b, const tbb::blocked_range<int64_t>& r, Scratch& sc) {
          (*static_cast<const F*>(b))(r, sc);
        }) {}
  void operator()(const tbb::blocked_range<int64_t>& r, Scratch& sc) const { call_(body_, r, sc); }

 private:
  const void* body_;
  void (*call_)(const void*, const tbb::blocked_range<int64_t>&, Scratch&);
};

// body(range, scratch) over [begin, end) with `grain`: on this thread with one pooled scratch
// when the work is small (Note [Inline small kernels]; oneTBB is not entered at all), otherwise
// tbb::parallel_for with one scratch per thread (Note [Per-launch cost]).
void for_range(const Evaluator& ev, int64_t begin, int64_t end, int64_t grain, int64_t work,
               RangeBody body) {
  const tbb::blocked_range<int64_t> range(begin, end, grain > 0 ? grain : 1);
  if (run_inline(work)) {
    if (begin >= end) return;
    Scratch sc = ev.make_scratch();
    body(range, sc);
    return;
  }
  tbb::enumerable_thread_specific<Scratch> scratch([&] { return ev.make_scratch(); });
  tbb::parallel_for(range, [&](const tbb::blocked_range<int64_t>& r) { body(r, scratch.local()); });
}

}  // namespace

void Evaluator::run_elementwise() const {
  const int64_t nblocks = (total_ + block_ - 1) / block_;
  if (nblocks > 1 && run_pad_copy()) return;  // Note [Padding copies]
  if (nblocks > 1 && run_tap_sum()) return;  // Note [Tap sums]
  if (nblocks > 1 && run_interleaved()) return;  // Note [Interleaved rows]
  if (tile_axis_ >= 0 && nblocks > 1) {
    if (run_permute_copy()) return;  // Note [Permuting copies]
    return run_tiled();
  }
  if (nblocks <= 1 || run_inline(total_ * n_ins_)) {  // Note [Inline small kernels]
    Scratch sc = make_scratch();
    for (int64_t s = 0; s < total_; s += block_) {
      const int64_t e = std::min(total_, s + block_);
      store(s, e, eval(s, e, sc, nullptr), sc);
    }
    return;
  }
  for_range(*this, 0, nblocks, 1, total_ * n_ins_, [&](const auto& r, Scratch& sc) {
    for (int64_t b = r.begin(); b != r.end(); ++b) {
      const int64_t s = b * block_, e = std::min(total_, s + block_);
      store(s, e, eval(s, e, sc, nullptr), sc);
    }
  });
}

// One tile: rows [a0, a0 + tile_a_) of tile_axis_ by columns [j0, j0 + tile_in_) of the innermost
// axis, as one segment per row; the block holds the tile row after row.
void Evaluator::run_tiled() const {
  const int a = tile_axis_, in = rank_ - 1;
  const int64_t na = (shape_[a] + tile_a_ - 1) / tile_a_;
  const int64_t ni = (shape_[in] + tile_in_ - 1) / tile_in_;
  int64_t rest_ext = 1;  // every other axis
  for (int d = 0; d < in; ++d)
    if (d != a) rest_ext *= shape_[d];
  for_range(*this, 0, rest_ext * na * ni, 1, total_ * n_ins_, [&](const auto& r, Scratch& sc) {
    std::vector<Segment>& segs = sc.segs();
    for (int64_t t = r.begin(); t != r.end(); ++t) {
      Segment g;
      int64_t rest = t;
      g.idx[in] = (rest % ni) * tile_in_;
      rest /= ni;
      const int64_t a0 = (rest % na) * tile_a_, a1 = std::min(shape_[a], a0 + tile_a_);
      rest /= na;
      for (int d = in - 1; d >= 0; --d) {
        if (d == a) continue;
        g.idx[d] = rest % shape_[d];
        rest /= shape_[d];
      }
      g.len = std::min(tile_in_, shape_[in] - g.idx[in]);
      segs.clear();
      g.pos = 0;
      for (int64_t i = a0; i < a1; ++i, g.pos += g.len) g.idx[a] = i, segs.push_back(g);
      sc.tile_rows = a1 - a0;
      const void* values = compute(0, g.pos, sc, nullptr, true);
      sc.tile_rows = 0;
      store_segs(values, sc);
    }
  });
}

// reduced_outer_: linear element r * O + o belongs to output o. Rows are evaluated a block at a
// time and folded into a vector of accumulators, so the input streams contiguously. Each output
// is still combined in increasing r (one accumulator per output: no lanes); with few outputs
// the reduced range is split instead, partial vectors combined in a fixed tree (deterministic).
template <int DT, int ROP>
void Evaluator::run_reduce_outer() const {
  using T = ctype<DT>;
  const T identity = reduce_identity<DT>(ROP);
  const int64_t O = outputs_, R = reduced_;
  const int64_t vsize = fold_half_ != 0 ? 2 : static_cast<int64_t>(sizeof(T));  // fold_eval's element size
  // Folds linear elements [s, e) into acc, where acc[0] is output o_base.
  auto accumulate = [&](Scratch& sc, int64_t s, int64_t e, T* acc, int64_t o_base) {
    for (int64_t b = s; b < e; b += block_) {
      const int64_t be = std::min(e, b + block_);
      const auto* v = static_cast<const std::byte*>(fold_eval(b, be, sc));
      for (int64_t p = 0; p < be - b;) {
        const int64_t o = (b + p) % O, take = std::min(be - b - p, O - o);
        fold_block_into<DT, ROP>(fold_half_, acc + (o - o_base), v + p * vsize, take);
        p += take;
      }
    }
  };
  if (O >= 256 || total_ <= 4 * block_) {
    // Each task owns a chunk of outputs and walks all rows of it. Wide chunks (one per thread,
    // up to 4 blocks): each row piece is then several KiB (two pages for sum(0) of 4096^2 f32),
    // and the per-row costs (eval's dispatch, a TLB miss and a prefetcher restart at each piece
    // of the strided walk) are paid over more elements. Two chunks per thread (4 KiB pieces
    // there) took 5.7-5.9 ms against 3.8-5.0 ms for one (docs/performance.md, 2026-11-23).
    const int64_t conc = std::max(1, tbb::this_task_arena::max_concurrency());
    const int64_t C = std::clamp<int64_t>((O / conc + 15) / 16 * 16, std::min<int64_t>(256, O), 4 * block_);
    for_range(*this, 0, (O + C - 1) / C, 1, total_ * n_ins_, [&](const auto& r, Scratch& sc) {
      T* acc = sc.aux<T>(C);
      for (int64_t c = r.begin(); c != r.end(); ++c) {
        const int64_t o0 = c * C, o1 = std::min(O, o0 + C);
        std::fill(acc, acc + (o1 - o0), identity);
        for (int64_t row = 0; row < R; ++row) accumulate(sc, row * O + o0, row * O + o1, acc, o0);
        store(o0, o1, acc, sc);  // linear [o0, o1) is row 0: output stride 0 on reduced axes
      }
    });
    return;
  }
  using Vec = std::vector<T>;
  if (run_inline(total_ * n_ins_)) {
    Scratch sc = make_scratch();
    T* acc = sc.aux<T>(O);
    std::fill(acc, acc + O, identity);
    accumulate(sc, 0, total_, acc, 0);
    store(0, O, acc, sc);
    return;
  }
  tbb::enumerable_thread_specific<Scratch> scratch([this] { return make_scratch(); });
  const int64_t grain = std::max<int64_t>(1, 16 * block_ / O);
  const Vec res = tbb::parallel_deterministic_reduce(
      tbb::blocked_range<int64_t>(0, R, grain), Vec(O, identity),
      [&](const tbb::blocked_range<int64_t>& r, Vec acc) {
        accumulate(scratch.local(), r.begin() * O, r.end() * O, acc.data(), 0);
        return acc;
      },
      [](Vec x, const Vec& y) {
        fold_into<DT, ROP>(x.data(), y.data(), static_cast<int64_t>(x.size()));
        return x;
      });
  Scratch sc = make_scratch();
  store(0, O, res.data(), sc);
}

template <int DT, int ROP>
void Evaluator::run_reduce() const {
  if (reduced_outer_) return run_reduce_outer<DT, ROP>();
  using T = ctype<DT>;
  const T identity = reduce_identity<DT>(ROP);
  auto put = [&](int64_t o, T v) { *reinterpret_cast<T*>(output_address(o)) = v; };
  if (outputs_ == 0) return;
  if (reduced_ == 0) {  // empty reduced extent: every output is the identity
    for (int64_t o = 0; o < outputs_; ++o) put(o, identity);
    return;
  }
  const int64_t R = reduced_;
  const int64_t vsize = fold_half_ != 0 ? 2 : static_cast<int64_t>(sizeof(T));  // fold_eval's element size
  if (outputs_ >= 256 || R <= 4 * block_) {
    // Many outputs (or short reductions): each task owns whole outputs, so no combining.
    const int64_t grain = std::max<int64_t>(1, block_ / R);
    // Note [Two rows per fold] (half_fold.cpp): a half input read as stored (LOAD of a dense
    // input, then the CAST the fold widens), rows a whole number of blocks long: two rows at a
    // time, each folded block by block as below (the same blocks, so the same bits).
    const int32_t arg = ins_[0].arg;
    const bool two_rows = DT == RVL_DTYPE_F32 && fold_half_ != 0 && n_ins_ == 2 && ins_[0].op == RVL_OP_LOAD &&
                          dense_[arg] && inv_[0] < 0 && !per_row_[arg] && tile_axis_ < 0 && R % block_ == 0 &&
                          two_row_folds();
    for_range(*this, 0, outputs_, grain, total_ * n_ins_, [&](const auto& r, Scratch& sc) {
      int64_t o = r.begin(), left = R;
      if constexpr (DT == RVL_DTYPE_F32) {
        if (two_rows) {
          const View& v = in_[arg];
          const auto* x = reinterpret_cast<const uint16_t*>(v.data) + v.offset;
          for (; o + 2 <= r.end(); o += 2) {
            float a0 = identity, a1 = identity;
            for (int64_t s = o * R; s < (o + 1) * R; s += block_)
              fold_half2(ROP, fold_half_, &a0, x + s, &a1, x + s + R, block_);
            put(o, a0), put(o + 1, a1);
          }
        }
      }
      T acc = identity;
      const int64_t end = r.end() * R;
      for (int64_t s = o * R; s < end; s += block_) {
        const int64_t e = std::min(end, s + block_);
        const auto* v = static_cast<const std::byte*>(fold_eval(s, e, sc));
        for (int64_t p = 0; p < e - s;) {
          const int64_t take = std::min(left, e - s - p);
          acc = fold_block<DT, ROP>(fold_half_, acc, v + p * vsize, take);
          p += take;
          left -= take;
          if (left == 0) put(o++, acc), acc = identity, left = R;
        }
      }
    });
    return;
  }
  // Few outputs with a long reduced extent: split each output's range across threads.
  const int64_t grain = 16 * block_;
  if (run_inline(total_ * n_ins_)) {
    Scratch sc = make_scratch();
    for (int64_t o = 0; o < outputs_; ++o) {
      T acc = identity;
      for (int64_t s = o * R; s < (o + 1) * R; s += block_) {
        const int64_t e = std::min((o + 1) * R, s + block_);
        acc = fold_block<DT, ROP>(fold_half_, acc, fold_eval(s, e, sc), e - s);
      }
      put(o, acc);
    }
    return;
  }
  tbb::enumerable_thread_specific<Scratch> scratch([this] { return make_scratch(); });
  for (int64_t o = 0; o < outputs_; ++o) {
    const T v = tbb::parallel_deterministic_reduce(
        tbb::blocked_range<int64_t>(o * R, (o + 1) * R, grain), identity,
        [&](const tbb::blocked_range<int64_t>& r, T acc) {
          Scratch& sc = scratch.local();
          for (int64_t s = r.begin(); s < r.end(); s += block_) {
            const int64_t e = std::min(r.end(), s + block_);
            acc = fold_block<DT, ROP>(fold_half_, acc, fold_eval(s, e, sc), e - s);
          }
          return acc;
        },
        [](T a, T b) { return reduce_combine<DT>(ROP, a, b); });
    put(o, v);
  }
}

void Evaluator::run() const {
  if (reduce_op_ == RVL_REDUCE_NONE) return run_elementwise();
  if (reduce_op_ == RVL_REDUCE_LOGSUMEXP) {  // lse_reduce.cpp
    run_logsumexp_any();
    return;
  }
  dispatch_dtype(out_.dtype, [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    switch (reduce_op_) {
      case RVL_REDUCE_SUM: return run_reduce<DT, RVL_REDUCE_SUM>();
      case RVL_REDUCE_MAX: return run_reduce<DT, RVL_REDUCE_MAX>();
      default: return run_reduce<DT, RVL_REDUCE_PROD>();
    }
  });
}

void run_program(const Program& p) {
  if (run_concat(p)) return;  // Note [Concatenations] (concat_copy.cpp)
  Evaluator(p).run();
}

}  // namespace tbbcpu
