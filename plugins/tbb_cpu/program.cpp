// Running programs: element-wise (parallel over blocks) and reductions (parallel over outputs
// when there are many, parallel deterministic reduce over the reduced extent when there are few).
//
// Determinism: for a given machine and thread count the result is bitwise reproducible: each
// output is accumulated in linear order, or (few outputs) by parallel_deterministic_reduce whose
// split points depend only on the range and grain size, never on timing.
#include "evaluator.hpp"

#include "dtype_ops.hpp"

#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>

#include <algorithm>

namespace tbbcpu {
namespace {

template <int DT, int ROP>
inline ctype<DT> fold(ctype<DT> acc, const ctype<DT>* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc = reduce_combine<DT>(ROP, acc, v[i]);
  return acc;
}

}  // namespace

void Evaluator::run_elementwise() const {
  const int64_t nblocks = (total_ + block_ - 1) / block_;
  if (nblocks <= 1) {  // small kernels: no scheduler round trip
    Scratch sc = make_scratch();
    if (total_ > 0) store(0, total_, eval(0, total_, sc, nullptr), sc);
    return;
  }
  tbb::enumerable_thread_specific<Scratch> scratch([this] { return make_scratch(); });
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, nblocks), [&](const auto& r) {
    Scratch& sc = scratch.local();
    for (int64_t b = r.begin(); b != r.end(); ++b) {
      const int64_t s = b * block_, e = std::min(total_, s + block_);
      store(s, e, eval(s, e, sc, nullptr), sc);
    }
  });
}

template <int DT, int ROP>
void Evaluator::run_reduce() const {
  using T = ctype<DT>;
  const T identity = reduce_identity<DT>(ROP);
  auto put = [&](int64_t o, T v) { *reinterpret_cast<T*>(output_address(o)) = v; };
  if (outputs_ == 0) return;
  if (reduced_ == 0) {  // empty reduced extent: every output is the identity
    for (int64_t o = 0; o < outputs_; ++o) put(o, identity);
    return;
  }
  tbb::enumerable_thread_specific<Scratch> scratch([this] { return make_scratch(); });
  const int64_t R = reduced_;
  if (outputs_ >= 256 || R <= 4 * block_) {
    // Many outputs (or short reductions): each task owns whole outputs, so no combining.
    const int64_t grain = std::max<int64_t>(1, block_ / R);
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, outputs_, grain), [&](const auto& r) {
      Scratch& sc = scratch.local();
      int64_t o = r.begin(), left = R;
      T acc = identity;
      const int64_t end = r.end() * R;
      for (int64_t s = r.begin() * R; s < end; s += block_) {
        const int64_t e = std::min(end, s + block_);
        const T* v = static_cast<const T*>(eval(s, e, sc, nullptr));
        for (int64_t p = 0; p < e - s;) {
          const int64_t take = std::min(left, e - s - p);
          acc = fold<DT, ROP>(acc, v + p, take);
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
  for (int64_t o = 0; o < outputs_; ++o) {
    const T v = tbb::parallel_deterministic_reduce(
        tbb::blocked_range<int64_t>(o * R, (o + 1) * R, grain), identity,
        [&](const tbb::blocked_range<int64_t>& r, T acc) {
          Scratch& sc = scratch.local();
          for (int64_t s = r.begin(); s < r.end(); s += block_) {
            const int64_t e = std::min(r.end(), s + block_);
            acc = fold<DT, ROP>(acc, static_cast<const T*>(eval(s, e, sc, nullptr)), e - s);
          }
          return acc;
        },
        [](T a, T b) { return reduce_combine<DT>(ROP, a, b); });
    put(o, v);
  }
}

void Evaluator::run() const {
  if (reduce_op_ == RVL_REDUCE_NONE) return run_elementwise();
  dispatch_dtype(out_.dtype, [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    switch (reduce_op_) {
      case RVL_REDUCE_SUM: return run_reduce<DT, RVL_REDUCE_SUM>();
      case RVL_REDUCE_MAX: return run_reduce<DT, RVL_REDUCE_MAX>();
      default: return run_reduce<DT, RVL_REDUCE_PROD>();
    }
  });
}

void run_program(const Program& p) { Evaluator(p).run(); }

}  // namespace tbbcpu
