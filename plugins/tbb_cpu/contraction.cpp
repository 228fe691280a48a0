// Batched strided GEMM with an optional epilogue.
//
// Work is split over (batch, block of rows of C). For one row m of C the accumulator row
// acc[0..N) is built in i-k-j order (a contiguous inner loop over j that GCC vectorises); B is
// read in place when its column stride is 1, otherwise its K x N slice is first packed
// contiguously (per task) so the inner loop stays contiguous. The finished row is handed to the
// epilogue evaluator, whose ACC instruction reads acc, and stored through C's view.
//
// Accumulation is in the contraction dtype in k order: sum_k a*b with int wrap-around, bool
// or-of-ands (exact, so integer/bool results never depend on the blocking).
//
// F32/F64 take the small path when the product is small (gemm_small.cpp, Note [Small GEMM]: no
// packing, no oneTBB), otherwise the cache-blocked path (gemm_blocked.cpp, Note [Blocked GEMM]): packed,
// zero-padded A and B slivers (any strides absorbed by the packers), register-blocked
// micro-kernels (gemm_kernels.cpp; AVX-512 or AVX2+FMA when the CPU has it), the epilogue fused
// per finished block. Float summation order differs from the plain loop (k is summed per KC
// panel, with FMA on AVX2), which stays within the docs/abi.md §13 tolerances.
#include "evaluator.hpp"

#include "dtype_ops.hpp"
#include "gemm_blocked.hpp"
#include "gemm_pack_window.hpp"
#include "gemm_small.hpp"
#include "parallel.hpp"

#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <vector>

namespace tbbcpu {
namespace {

// Number of batch entries (product of the batch shape; 1 without batch axes).
inline int64_t batch_count(const Contraction& c) {
  int64_t n = 1;
  for (int d = 0; d < c.batch_rank; ++d) n *= c.batch_shape[d];
  return n;
}

inline uint64_t term(int64_t i, int64_t stride) {
  return static_cast<uint64_t>(i) * static_cast<uint64_t>(stride);
}

template <class T>
struct Local {
  Scratch sc;
  std::vector<T> acc;
  std::vector<T> packed;
};

template <int DT>
void gemm_generic(const Contraction& c, const Evaluator& ep) {
  using T = ctype<DT>;
  const int br = c.batch_rank;
  const int64_t M = c.m, N = c.n, K = c.k;
  const int64_t batches = batch_count(c);
  if (batches == 0 || M == 0 || N == 0) return;

  // Rows per task: enough work (~64k multiply-adds) to amortise the per-task setup.
  const int64_t work_per_row = std::max<int64_t>(1, K * N);
  const int64_t rows = std::clamp<int64_t>((int64_t{1} << 16) / work_per_row, 1, M);
  const int64_t row_blocks = (M + rows - 1) / rows;
  const bool b_contiguous = N == 1 || c.b.stride[br + 1] == 1;
  const bool pack = !b_contiguous && K * N <= (int64_t{1} << 22);

  const T* A = reinterpret_cast<const T*>(c.a.data);
  const T* B = reinterpret_cast<const T*>(c.b.data);
  const int64_t sam = c.a.stride[br], sak = c.a.stride[br + 1];
  const int64_t sbk = c.b.stride[br], sbn = c.b.stride[br + 1];

  tbb::enumerable_thread_specific<Local<T>> locals([&] {
    Local<T> l{ep.make_scratch(), std::vector<T>(N), {}};
    if (pack) l.packed.resize(K * N);
    return l;
  });
  parallel_for_work(0, batches * row_blocks, 1, batches * M * N * std::max<int64_t>(K, 1),
                    [&](const auto& r) {
    Local<T>& L = locals.local();
    for (int64_t t = r.begin(); t != r.end(); ++t) {
      const int64_t batch = t / row_blocks;
      const int64_t m0 = (t % row_blocks) * rows, m1 = std::min(M, m0 + rows);
      uint64_t oa = static_cast<uint64_t>(c.a.offset), ob = static_cast<uint64_t>(c.b.offset);
      for (int64_t d = br - 1, rest = batch; d >= 0; --d) {
        const int64_t i = rest % c.batch_shape[d];
        rest /= c.batch_shape[d];
        oa += term(i, c.a.stride[d]);
        ob += term(i, c.b.stride[d]);
      }
      if (pack) {
        for (int64_t k = 0; k < K; ++k)
          for (int64_t j = 0; j < N; ++j)
            L.packed[k * N + j] = B[static_cast<int64_t>(ob + term(k, sbk) + term(j, sbn))];
      }
      T* __restrict acc = L.acc.data();
      for (int64_t m = m0; m < m1; ++m) {
        std::fill(acc, acc + N, T{});
        const uint64_t arow = oa + term(m, sam);
        for (int64_t k = 0; k < K; ++k) {
          const T a = A[static_cast<int64_t>(arow + term(k, sak))];
          if (pack || b_contiguous) {
            const T* __restrict brow =
                pack ? L.packed.data() + k * N : B + static_cast<int64_t>(ob + term(k, sbk));
            for (int64_t j = 0; j < N; ++j) acc[j] = s_add<DT>(acc[j], s_mul<DT>(a, brow[j]));
          } else {
            for (int64_t j = 0; j < N; ++j)
              acc[j] = s_add<DT>(
                  acc[j], s_mul<DT>(a, B[static_cast<int64_t>(ob + term(k, sbk) + term(j, sbn))]));
          }
        }
        // Epilogue over the row's linear range of the [batch.., M, N] space.
        const int64_t start = (batch * M + m) * N;
        for (int64_t s = start; s < start + N; s += ep.block()) {
          const int64_t e = std::min(start + N, s + ep.block());
          ep.store(s, e, ep.eval(s, e, L.sc, acc + (s - start)), L.sc);
        }
      }
    }
  });
}


}  // namespace

void run_contraction(const Contraction& c) {
  const Evaluator ep(c.epilogue);
  if (c.multi_axis()) return run_window_contraction(c, ep);  // ABI 1.8 groups: gemm_pack_window.cpp
  dispatch_dtype(c.dtype, [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    if constexpr (is_float_v<DT>) {
      if (!gemm_small<DT>(c, ep)) gemm_blocked<DT>(c, ep);
    }
    else gemm_generic<DT>(c, ep);
  });
}

}  // namespace tbbcpu
