// RVL_REDUCE_LOGSUMEXP (ABI 1.4): log(sum exp(x)) in one pass over the input.
//
// Note [Online log-sum-exp]
// Each output keeps a state (m, s): m the largest value seen, s = sum exp(x - m) over the values
// seen. A contiguous slice is folded in two sweeps over the block already in cache (never over
// memory twice): its maximum bm (vectorised, as MAX's lanes), then, with M = max(m, bm), s is
// rescaled once by exp(m - M) and exp(x - M) is summed in independent lanes (exp through the
// vectorisable fast_exp2f / exp2_nonpos below). Two states combine the same way, so the
// parallel split and the reduced-outer layout (one element per output per row, folded one at a
// time) use the same algebra. Invariants: s >= 1 once a finite value was seen (the maximum
// contributes exp(0)), so log(s) is finite and the result m + log(s) never overflows where
// the true value does not. Special values (backend.h): NaN is sticky (m = NaN); +inf is sticky
// unless a NaN follows (m = +inf); -inf contributes nothing (a row of them keeps m = -inf, s = 0
// and ends as -inf, never -inf - -inf). A slice that holds any non-finite value is folded by the
// scalar rule, which is exact about them; finite slices take the vector path.
//
// Determinism: the lane order depends only on the slice lengths, and the parallel splits are
// parallel_deterministic_reduce's, so results are reproducible for a given thread count.
#include "evaluator.hpp"

#include "dtype_ops.hpp"
#include "fast_math.hpp"
#include "parallel.hpp"

#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

namespace tbbcpu {
namespace {

// 2^x for x <= 0, vectorisable (straight-line arithmetic and integer bit operations). Below
// -1022 it returns 2^-1022 instead of a subnormal or 0: here it only ever scales terms that are
// added to a sum >= 1, where that difference is invisible. Accuracy: Taylor series of e^f to
// degree 12 on |f| <= ln2/2 (truncation < 2e-16 relative), a few ulps from rounding.
__attribute__((always_inline)) inline double exp2_nonpos(double x) {
  x = x < -1022.0 ? -1022.0 : x;  // one select (NaN never reaches here: finite slices only)
  const double magic = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
  const double t = x + magic;
  const double kf = t - magic;
  uint64_t tb, mb;
  std::memcpy(&tb, &t, 8);
  std::memcpy(&mb, &magic, 8);
  const uint64_t k = tb - mb;  // round(x) in two's complement, in [-1022, 0]
  const double f = (x - kf) * 0.693147180559945309417;
  double p = 1.0 / 479001600.0;  // 1/12!
  p = p * f + 1.0 / 39916800.0;
  p = p * f + 1.0 / 3628800.0;
  p = p * f + 1.0 / 362880.0;
  p = p * f + 1.0 / 40320.0;
  p = p * f + 1.0 / 5040.0;
  p = p * f + 1.0 / 720.0;
  p = p * f + 1.0 / 120.0;
  p = p * f + 1.0 / 24.0;
  p = p * f + 1.0 / 6.0;
  p = p * f + 0.5;
  p = p * f + 1.0;
  p = p * f + 1.0;
  const uint64_t sb = (k + 1023u) << 52;  // 2^k, a normal double
  double s;
  std::memcpy(&s, &sb, 8);
  return p * s;
}

template <class T> __attribute__((always_inline)) inline T exp_nonpos(T d) {  // e^d for d <= 0
  if constexpr (sizeof(T) == 4) return fast_exp2f(d * 1.44269504088896341f);
  else return exp2_nonpos(d * 1.44269504088896340736);
}

template <class T> struct State {
  T m = -std::numeric_limits<T>::infinity();
  T s = 0;
};

// Adds one value by the scalar rule (exact about NaN and infinities).
template <class T> inline void push(State<T>& st, T x) {
  if (std::isnan(st.m)) return;
  if (std::isnan(x)) { st.m = x; return; }
  if (st.m == std::numeric_limits<T>::infinity()) return;
  if (x == std::numeric_limits<T>::infinity()) { st.m = x; st.s = 1; return; }
  if (x == -std::numeric_limits<T>::infinity()) return;
  if (x <= st.m) {
    st.s += exp_nonpos<T>(x - st.m);
  } else {
    st.s = st.s * exp_nonpos<T>(st.m - x) + T(1);  // exp(-inf) = 0 when nothing was seen yet
    st.m = x;
  }
}

template <class T> inline State<T> merge(State<T> a, State<T> b) {
  if (std::isnan(a.m)) return a;
  if (std::isnan(b.m)) return b;
  const T inf = std::numeric_limits<T>::infinity();
  if (a.m == inf || b.m == -inf) return a;
  if (b.m == inf || a.m == -inf) return b;
  if (a.m < b.m) std::swap(a, b);
  a.s += b.s * exp_nonpos<T>(b.m - a.m);
  return a;
}

// m + log(s), formed in the output's type (a widening LOGSUMEXP: f32 states, f64 result).
template <class Out, class T> inline Out result(const State<T>& st) {
  if (std::isnan(st.m) || std::isinf(st.m)) return Out(st.m);  // NaN, +inf, or empty / all -inf
  return Out(st.m) + std::log(Out(st.s));
}

// 32 bytes of T as one GCC vector (an attribute cannot apply to a dependent type directly).
template <class T> struct Vec32;
template <> struct Vec32<float> { typedef float type __attribute__((vector_size(32))); };
template <> struct Vec32<double> { typedef double type __attribute__((vector_size(32))); };

// Folds a contiguous slice (Note [Online log-sum-exp]). Compiled twice, like the array loops
// (Note [Array loops per ISA] in array_ops.cpp): for baseline x86-64 and for AVX2, chosen at run
// time; RAVEL_TBB_SIMD=portable keeps the baseline. This file is built with -fno-trapping-math
// (CMakeLists.txt): without it GCC does not if-convert the selects of the max sweep and of the
// f64 exponential's clamp, and neither loop vectorises. It changes no result (no code here reads
// the floating-point exception flags), only what may be computed speculatively.
// -ffp-contract=fast lets the AVX2+FMA clone fuse multiply-adds (the portable one has no FMA).
template <class T> __attribute__((always_inline)) inline void fold_body(State<T>& st, const T* v, int64_t n) {
  if (n <= 0 || std::isnan(st.m)) return;
  constexpr int L = 64 / sizeof(T);
  // The max sweep in GCC vector types (two 32-byte vectors, L elements): written as scalar
  // lanes, GCC 12 left it scalar in the AVX2 clone (ucomiss and cmov per element, the hottest
  // loop of softmax in perf). Its result is a maximum and a NaN flag, so the lane layout
  // changes no result.
  using V = typename Vec32<T>::type;
  constexpr int W = 32 / sizeof(T);
  V lane0, lane1, chk0 = V{} , chk1 = V{};
  for (int j = 0; j < W; ++j) lane0[j] = lane1[j] = -std::numeric_limits<T>::infinity();
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    V x0, x1;
    std::memcpy(&x0, v + i, sizeof x0);
    std::memcpy(&x1, v + i + W, sizeof x1);
    lane0 = lane0 < x0 ? x0 : lane0;
    lane1 = lane1 < x1 ? x1 : lane1;
    chk0 += x0 - x0;  // NaN exactly when x is NaN or infinite
    chk1 += x1 - x1;
  }
  T bm = -std::numeric_limits<T>::infinity(), c = 0;
  for (int j = 0; j < W; ++j) {
    bm = bm < lane0[j] ? lane0[j] : bm, c += chk0[j];
    bm = bm < lane1[j] ? lane1[j] : bm, c += chk1[j];
  }
  for (int64_t k = i; k < n; ++k) bm = bm < v[k] ? v[k] : bm, c += v[k] - v[k];
  if (c != c) {  // a NaN or an infinity: the scalar rule
    for (int64_t k = 0; k < n; ++k) push(st, v[k]);
    return;
  }
  if (st.m == std::numeric_limits<T>::infinity()) return;  // finite values add nothing to +inf
  if (bm > st.m) {
    st.s *= exp_nonpos<T>(st.m - bm);
    st.m = bm;
  }
  const T M = st.m;
  T sum[L];
  for (int j = 0; j < L; ++j) sum[j] = 0;
  for (i = 0; i + L <= n; i += L)
    for (int j = 0; j < L; ++j) sum[j] += exp_nonpos<T>(v[i + j] - M);
  for (int w = L / 2; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) sum[j] += sum[j + w];
  T tail = 0;
  for (int64_t k = i; k < n; ++k) tail += exp_nonpos<T>(v[k] - M);
  st.s += sum[0] + tail;
}

// Reduced-outer layouts (softmax along axis 0): value k of a row belongs to state k, so the
// states are updated side by side, one exponential each: with d = x - m, e = e^-|d| is both the
// new term (x <= m: s += e) and the rescale (x > m: s = s e + 1, m = x). Written as selects on
// every state so it vectorises across outputs; exact about a -inf start (d = +inf, e = 0), a +inf
// or NaN state (kept: the comparisons leave m alone, and result() ignores s then). A row piece
// holding a non-finite value takes the scalar rule.
template <class T> __attribute__((always_inline)) inline void fold_across_body(State<T>* st, const T* v, int64_t n) {
  T c = 0;
  for (int64_t k = 0; k < n; ++k) c += v[k] - v[k];
  if (c != c) {
    for (int64_t k = 0; k < n; ++k) push(st[k], v[k]);
    return;
  }
  for (int64_t k = 0; k < n; ++k) {
    const T x = v[k], m = st[k].m, s = st[k].s;
    const T d = x - m;
    const T e = exp_nonpos<T>(-std::fabs(d));
    const bool up = m < x;
    st[k].s = up ? s * e + T(1) : s + e;
    st[k].m = up ? x : m;
  }
}

template <class T> void fold_portable(State<T>& st, const T* v, int64_t n) { fold_body(st, v, n); }
template <class T> void fold_across_portable(State<T>* st, const T* v, int64_t n) { fold_across_body(st, v, n); }
#if defined(__x86_64__) || defined(__i386__)
// With FMA the exponential's Horner steps contract (-ffp-contract=fast for this file): the
// results differ from the portable build's in the last bits, but stay fixed for a machine.
template <class T> __attribute__((target("avx2,fma"))) void fold_avx2(State<T>& st, const T* v, int64_t n) {
  fold_body(st, v, n);
}
template <class T> __attribute__((target("avx2,fma"))) void fold_across_avx2(State<T>* st, const T* v, int64_t n) {
  fold_across_body(st, v, n);
}
bool lse_avx2() {
  static const bool on = [] {
    const char* env = std::getenv("RAVEL_TBB_SIMD");
    if (env && std::strcmp(env, "portable") == 0) return false;
    return __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0;
  }();
  return on;
}
#endif

template <class T> inline void fold(State<T>& st, const T* v, int64_t n) {
#if defined(__x86_64__) || defined(__i386__)
  if (lse_avx2()) return fold_avx2(st, v, n);
#endif
  fold_portable(st, v, n);
}

template <class T> inline void fold_across(State<T>* st, const T* v, int64_t n) {
#if defined(__x86_64__) || defined(__i386__)
  if (lse_avx2()) return fold_across_avx2(st, v, n);
#endif
  fold_across_portable(st, v, n);
}

}  // namespace

// DT: the values' dtype (the last instruction's); Out: the output's C type (ctype<DT>, or
// double for a widening f32 -> f64 reduction).
// `epi` (ABI 1.10, Note [Row epilogue] in row_epilogue.cpp): the rows' results are not stored
// but fed as ACC to the epilogue evaluator, rows a block at a time while they are in cache.
// Returns false (having done nothing) for a layout without that path: the caller then runs the
// reduction and the epilogue as two passes.
template <int DT, class Out>
bool Evaluator::run_logsumexp(const Evaluator* epi) const {
  if constexpr (!is_float_v<DT>) {
    return true;  // unreachable: the validator accepts LOGSUMEXP only for float outputs
  } else {
    using T = ctype<DT>;
    using S = State<T>;
    const int64_t O = outputs_, R = reduced_;
    if (epi && (reduced_outer_ || R == 0)) return false;
    if (O == 0) return true;
    const int64_t work = total_ * n_ins_;
    auto make = [this] { return make_scratch(); };
    if (epi && !(O >= 256 || R <= 4 * block_ || run_inline(work))) return false;  // rows split across threads
    if (reduced_outer_) {
      // Linear element r * O + o belongs to output o: rows are evaluated a block at a time and
      // folded into the outputs' states side by side (fold_across); with few outputs the rows
      // are split.
      auto accumulate = [&](Scratch& sc, int64_t s, int64_t e, S* st, int64_t o_base) {
        for (int64_t b = s; b < e; b += block_) {
          const int64_t be = std::min(e, b + block_);
          const T* v = static_cast<const T*>(eval(b, be, sc, nullptr));
          for (int64_t p = 0; p < be - b;) {
            const int64_t o = (b + p) % O, take = std::min(be - b - p, O - o);
            fold_across(st + (o - o_base), v + p, take);
            p += take;
          }
        }
      };
      auto finish = [&](Scratch& sc, const S* st, int64_t o0, int64_t o1) {
        Out* out = sc.aux<Out>(o1 - o0);
        for (int64_t o = o0; o < o1; ++o) out[o - o0] = result<Out>(st[o - o0]);
        store(o0, o1, out, sc);  // linear [o0, o1) is row 0: output stride 0 on reduced axes
      };
      if (O >= 64 || run_inline(work)) {
        // Chunks of outputs as run_reduce_outer's (program.cpp): two per thread, at least 256
        // outputs (or all), at most 4 blocks.
        const int64_t conc = std::max(1, tbb::this_task_arena::max_concurrency());
        const int64_t C = std::clamp<int64_t>((O / (2 * conc) + 15) / 16 * 16, std::min<int64_t>(256, O), 4 * block_);
        parallel_for_work(0, (O + C - 1) / C, 1, work, [&](const tbb::blocked_range<int64_t>& r) {
          Scratch sc = make();
          std::vector<S> st(static_cast<size_t>(C));
          for (int64_t c = r.begin(); c != r.end(); ++c) {
            const int64_t o0 = c * C, o1 = std::min(O, o0 + C);
            std::fill(st.begin(), st.end(), S{});
            for (int64_t row = 0; row < R; ++row) accumulate(sc, row * O + o0, row * O + o1, st.data(), o0);
            finish(sc, st.data(), o0, o1);
          }
        });
        return true;
      }
      tbb::enumerable_thread_specific<Scratch> scratch(make);
      const std::vector<S> res = tbb::parallel_deterministic_reduce(
          tbb::blocked_range<int64_t>(0, R, std::max<int64_t>(1, 16 * block_ / O)), std::vector<S>(O),
          [&](const tbb::blocked_range<int64_t>& r, std::vector<S> st) {
            accumulate(scratch.local(), r.begin() * O, r.end() * O, st.data(), 0);
            return st;
          },
          [](std::vector<S> a, const std::vector<S>& b) {
            for (size_t k = 0; k < a.size(); ++k) a[k] = merge(a[k], b[k]);
            return a;
          });
      Scratch sc = make();
      finish(sc, res.data(), 0, O);
      return true;
    }
    auto put = [&](int64_t o, const S& st) { *reinterpret_cast<Out*>(output_address(o)) = result<Out>(st); };
    if (R == 0) {
      for (int64_t o = 0; o < O; ++o) put(o, S{});
      return true;
    }
    // Output o owns linear elements [o * R, (o + 1) * R).
    if (O >= 256 || R <= 4 * block_ || run_inline(work)) {
      parallel_for_work(0, O, std::max<int64_t>(1, block_ / R), work, [&](const tbb::blocked_range<int64_t>& r) {
        Scratch sc = make();
        // With an epilogue: the results of the rows finished since the last flush, and the
        // epilogue's scratch and ACC block (Note [Row epilogue]).
        Scratch esc = epi ? epi->make_scratch() : Scratch{};
        thread_local std::vector<Out> done, acc;
        done.clear();
        int64_t first = r.begin();  // the first row whose epilogue has not run
        auto flush = [&] {
          const int64_t eb = epi->block();
          if (static_cast<int64_t>(acc.size()) < eb) acc.resize(static_cast<size_t>(eb));
          const int64_t end = (first + static_cast<int64_t>(done.size())) * R;
          for (int64_t s = first * R; s < end; s += eb) {
            const int64_t e = std::min(end, s + eb);
            for (int64_t k = s; k < e;) {  // ACC: each element's row result, a run per row
              const int64_t row = k / R, stop = std::min(e, (row + 1) * R);
              std::fill(acc.data() + (k - s), acc.data() + (stop - s), done[static_cast<size_t>(row - first)]);
              k = stop;
            }
            epi->store(s, e, epi->eval(s, e, esc, acc.data()), esc);
          }
          first += static_cast<int64_t>(done.size());
          done.clear();
        };
        int64_t o = r.begin(), left = R;
        S st;
        const int64_t end = r.end() * R;
        for (int64_t s = r.begin() * R; s < end; s += block_) {
          const int64_t e = std::min(end, s + block_);
          const T* v = static_cast<const T*>(eval(s, e, sc, nullptr));
          for (int64_t p = 0; p < e - s;) {
            const int64_t take = std::min(left, e - s - p);
            fold(st, v + p, take);
            p += take;
            left -= take;
            if (left == 0) {
              if (epi) done.push_back(result<Out>(st)), ++o;
              else put(o++, st);
              st = S{}, left = R;
            }
          }
          if (epi && !done.empty()) flush();  // the finished rows are still in cache
        }
      });
      return true;
    }
    // Few outputs with long rows: each row split across threads, states merged in a fixed tree.
    tbb::enumerable_thread_specific<Scratch> scratch(make);
    for (int64_t o = 0; o < O; ++o) {
      const S st = tbb::parallel_deterministic_reduce(
          tbb::blocked_range<int64_t>(o * R, (o + 1) * R, 16 * block_), S{},
          [&](const tbb::blocked_range<int64_t>& r, S acc) {
            Scratch& sc = scratch.local();
            for (int64_t s = r.begin(); s < r.end(); s += block_) {
              const int64_t e = std::min(r.end(), s + block_);
              fold(acc, static_cast<const T*>(eval(s, e, sc, nullptr)), e - s);
            }
            return acc;
          },
          [](S a, const S& b) { return merge(a, b); });
      put(o, st);
    }
    return true;
  }
}

bool Evaluator::run_logsumexp_any(const Evaluator* epi) const {
  if (ins_[n_ins_ - 1].dtype == RVL_DTYPE_F32 && out_.dtype == RVL_DTYPE_F64)
    return run_logsumexp<RVL_DTYPE_F32, double>(epi);  // widening (the validator admits only this)
  bool done = true;
  dispatch_dtype(out_.dtype, [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    done = run_logsumexp<DT, ctype<DT>>(epi);
  });
  return done;
}

}  // namespace tbbcpu

namespace tbbcpu {

// ABI 1.11 (row_chain.cpp): one row's state kept between slices, in double (a float state
// converts both ways exactly), folded and finished by the same rules as above.
template <class T> void lse_row_fold(LseRow& row, const T* v, int64_t n) {
  State<T> st{static_cast<T>(row.m), static_cast<T>(row.s)};
  fold(st, v, n);
  row.m = st.m;
  row.s = st.s;
}
template <class T> T lse_row_result(const LseRow& row) {
  return result<T>(State<T>{static_cast<T>(row.m), static_cast<T>(row.s)});
}
template void lse_row_fold<float>(LseRow&, const float*, int64_t);
template void lse_row_fold<double>(LseRow&, const double*, int64_t);
template float lse_row_result<float>(const LseRow&);
template double lse_row_result<double>(const LseRow&);

}  // namespace tbbcpu
