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
// F32/F64 take a blocked path instead (gemm_blocked): A and B panels are packed into contiguous,
// zero-padded slivers (this absorbs any strides, 0 and negative included, once per panel), k is
// blocked by KC, C tiles of MC x NC are accumulated in a per-thread buffer by a register-blocked
// micro-kernel (gemm_kernels.cpp; AVX-512 or AVX2+FMA when the CPU has it), and each finished tile row goes
// through the epilogue. Tasks are (batch, group of m-blocks, n-block) so small-m products (training
// batches) still split across cores. Float summation order differs from the plain loop (k is
// summed per KC panel, with FMA on AVX2), which stays within the docs/abi.md §13 tolerances.
#include "evaluator.hpp"

#include "dtype_ops.hpp"
#include "gemm_kernels.hpp"
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


// ---- blocked float path ---------------------------------------------------------------------
// Packing buffers and the C tile, per thread and kept across calls: they are a few hundred KiB,
// and fresh ones per call would be mapped and page-faulted every time (Note [Block cache]).
// A task never blocks or nests inside the body that uses them, so one set per thread suffices.
template <class T>
struct Workspace {
  // 64-byte aligned (a cache line, an AVX-512 vector): the micro-kernels' full-width loads of
  // packed B and of the C tile then never straddle two cache lines.
  struct Buf {
    T* p = nullptr;
    int64_t n = 0;
    ~Buf() { std::free(p); }
    T* reserve(int64_t want) {
      if (want > n) {
        std::free(p);
        p = static_cast<T*>(std::aligned_alloc(64, (want * sizeof(T) + 63) / 64 * 64));
        if (!p) throw std::bad_alloc();
        n = want;
      }
      return p;
    }
  };
  Buf pa, pb, tile;
};
template <class T>
Workspace<T>& workspace() {
  thread_local Workspace<T> w;
  return w;
}

template <int DT>
void gemm_blocked(const Contraction& c, const Evaluator& ep) {
  using T = ctype<DT>;
  const int br = c.batch_rank;
  const int64_t M = c.m, N = c.n, K = c.k;
  const int64_t batches = batch_count(c);
  if (batches == 0 || M == 0 || N == 0) return;

  gemm::Kernel<T> kern;
  if constexpr (DT == RVL_DTYPE_F32) kern = gemm::select_kernel_f32();
  else kern = gemm::select_kernel_f64();
  const int64_t MR = kern.mr, NR = kern.nr;
  auto round_up = [](int64_t x, int64_t q) { return (x + q - 1) / q * q; };

  // KC x NC of packed B stays in L2 (256 KiB f32), MC x KC of packed A in L1/L2; 96 is a
  // multiple of both MR choices (6 and 4). Blocks shrink to the problem, and NC/MC are halved
  // while there are too few tasks to keep every core busy (e.g. m = 64, or 256^3 on 2 cores).
  const int64_t KC = std::min<int64_t>(256, std::max<int64_t>(K, 1));
  int64_t MC = std::min<int64_t>(96, round_up(M, MR));
  int64_t NC = std::min<int64_t>(256, round_up(N, NR));
  const int64_t work = batches * M * N * std::max<int64_t>(K, 1);
  const bool serial = run_inline(work);  // Note [Inline small kernels]: whole blocks then
  const int64_t want = serial ? 1 : 4 * std::max(1, tbb::this_task_arena::max_concurrency());
  auto tasks = [&] { return batches * ((M + MC - 1) / MC) * ((N + NC - 1) / NC); };
  while (tasks() < want && (NC > 4 * NR || MC > 4 * MR)) {
    if (NC > 4 * NR && NC >= MC) NC = round_up(NC / 2, NR);
    else MC = round_up(MC / 2, MR);
  }
  const int64_t mblocks = (M + MC - 1) / MC, nblocks = (N + NC - 1) / NC;
  // A task takes G consecutive m-blocks of one n-block and packs each k-panel of B once for all
  // of them (the micro-kernel runs at ~75 GFLOP/s in cache on the CI machine's AVX2 but the
  // whole GEMM at ~40: repacking B for every m-block was a large part of the rest). G keeps at
  // least `want` tasks; its C tiles (G x MC x NC) live in the per-thread workspace.
  const int64_t G = std::clamp<int64_t>(batches * mblocks * nblocks / want, 1, std::min<int64_t>(mblocks, 8));
  const int64_t mgroups = (mblocks + G - 1) / G;

  const T* A = reinterpret_cast<const T*>(c.a.data);
  const T* B = reinterpret_cast<const T*>(c.b.data);
  const int64_t sam = c.a.stride[br], sak = c.a.stride[br + 1];
  const int64_t sbk = c.b.stride[br], sbn = c.b.stride[br + 1];

  tbb::enumerable_thread_specific<Scratch> scratch([&] { return ep.make_scratch(); });
  parallel_for_work(0, batches * mgroups * nblocks, 1, work, [&](const auto& r) {
        Workspace<T>& W = workspace<T>();
        T* const pa_buf = W.pa.reserve(MC * KC);
        T* const pb_buf = W.pb.reserve(NC * KC);
        T* const tile_buf = W.tile.reserve(G * MC * NC);
        Scratch& sc = scratch.local();
        for (int64_t t = r.begin(); t != r.end(); ++t) {
          const int64_t batch = t / (mgroups * nblocks);
          const int64_t mg = (t / nblocks) % mgroups, nb = t % nblocks;
          const int64_t mb0 = mg * G, mb1 = std::min(mblocks, mb0 + G);
          const int64_t n0 = nb * NC, nc = std::min(NC, N - n0);
          const int64_t ncp = round_up(nc, NR);
          uint64_t oa = static_cast<uint64_t>(c.a.offset), ob = static_cast<uint64_t>(c.b.offset);
          for (int64_t d = br - 1, rest = batch; d >= 0; --d) {
            const int64_t i = rest % c.batch_shape[d];
            rest /= c.batch_shape[d];
            oa += term(i, c.a.stride[d]);
            ob += term(i, c.b.stride[d]);
          }
          // m-block mb's tile: tile_buf + (mb - mb0) * MC * NC, mcp x ncp, row stride ncp.
          if (K == 0) std::fill(tile_buf, tile_buf + (mb1 - mb0) * MC * NC, T{});
          for (int64_t k0 = 0; k0 < K; k0 += KC) {
            const int64_t kc = std::min(KC, K - k0);
            // Pack B[k0.., n0..] as NR-wide slivers: pb[s][k][j], zero padded past nc.
            T* pb = pb_buf;
            for (int64_t s0 = 0; s0 < ncp; s0 += NR) {
              T* dst = pb + s0 * kc;
              const int64_t w = std::min(NR, nc - s0);
              for (int64_t k = 0; k < kc; ++k) {
                const T* src = B + static_cast<int64_t>(ob + term(k0 + k, sbk) + term(n0 + s0, sbn));
                T* d = dst + k * NR;
                if (sbn == 1)
                  for (int64_t j = 0; j < w; ++j) d[j] = src[j];
                else
                  for (int64_t j = 0; j < w; ++j) d[j] = src[j * sbn];
                for (int64_t j = w; j < NR; ++j) d[j] = T{};
              }
            }
            for (int64_t mb = mb0; mb < mb1; ++mb) {
              const int64_t m0 = mb * MC, mc = std::min(MC, M - m0), mcp = round_up(mc, MR);
              T* tile = tile_buf + (mb - mb0) * MC * NC;
              // Pack A[m0.., k0..] as MR-tall slivers: pa[s][k][i], zero padded past mc.
              T* pa = pa_buf;
              for (int64_t s0 = 0; s0 < mcp; s0 += MR) {
                T* dst = pa + s0 * kc;
                const int64_t h = std::min(MR, mc - s0);
                for (int64_t i = 0; i < h; ++i) {
                  const T* src = A + static_cast<int64_t>(oa + term(m0 + s0 + i, sam) + term(k0, sak));
                  for (int64_t k = 0; k < kc; ++k) dst[k * MR + i] = src[k * sak];
                }
                for (int64_t i = h; i < MR; ++i)
                  for (int64_t k = 0; k < kc; ++k) dst[k * MR + i] = T{};
              }
              const bool add = k0 > 0;
              for (int64_t js = 0; js < ncp; js += NR)
                for (int64_t is = 0; is < mcp; is += MR)
                  kern.fn(kc, pa + is * kc, pb + js * kc, tile + is * ncp + js, ncp, add);
            }
          }
          // Epilogue per tile row over its linear range of the [batch.., M, N] space.
          for (int64_t mb = mb0; mb < mb1; ++mb) {
            const int64_t m0 = mb * MC, mc = std::min(MC, M - m0);
            const T* tile = tile_buf + (mb - mb0) * MC * NC;
            for (int64_t i = 0; i < mc; ++i) {
              const int64_t start = (batch * M + m0 + i) * N + n0;
              const T* acc = tile + i * ncp;
              for (int64_t s = start; s < start + nc; s += ep.block()) {
                const int64_t e = std::min(start + nc, s + ep.block());
                ep.store(s, e, ep.eval(s, e, sc, acc + (s - start)), sc);
              }
            }
          }
        }
      });
}

}  // namespace

void run_contraction(const Contraction& c) {
  const Evaluator ep(c.epilogue);
  dispatch_dtype(c.dtype, [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    if constexpr (is_float_v<DT>) gemm_blocked<DT>(c, ep);
    else gemm_generic<DT>(c, ep);
  });
}

}  // namespace tbbcpu
