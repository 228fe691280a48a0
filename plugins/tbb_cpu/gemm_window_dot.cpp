// Note [Weight gradients as dot products over k runs]
// A convolution's weight gradient is the window contraction dw[o, (c, kh, kw)] = sum over
// k = (n, oh, ow) of dy[n, o, oh, ow] * xp[n, c, oh + kh, ow + kw]: M and N small (16 x 9 and
// 32 x 144 in the Fashion-MNIST CNN), K = N * P long (100,352 and 25,088), and both operands run
// contiguously along k's innermost axis (ow: 28 or 14 elements in A and in B). The packed path
// (gemm_pack_window.cpp) turns each k into an MR-wide A column and an NR-wide B row: a transposing
// gather of A per element, a 16-lane gather of B per k (runs of 3 along (c, kh, kw)), and, for
// N = 9, 16 columns computed for 9. perf put the packing at 2-3.6x the micro-kernel there, and the
// offset tables of K entries (two of 100,352) were built serially on every call.
// Here the sum runs along k itself: each (m, n) pair keeps a 16-lane accumulator and the kernel
// multiplies 16 consecutive k of A's row m by the same 16 k of B's column n, read in place with
// masked loads at the end of each run (14 of 16 lanes for ow = 14; 28 as 16 + 12). A block of MB
// rows x NB columns holds MB * NB accumulators and NB B vectors in registers and streams the A
// vectors: MB + NB loads per MB * NB multiply-adds, nothing packed, no per-k tables (one entry per
// run: K / L of them). Rows and columns past the edge of the last block repeat the last one and
// their sums are dropped. K's runs are cut into parts whose A rows (M x runs x L floats, at most
// 256 KiB) stay in L2 while every block passes over them; each part sums into its own M x N
// partial, and the parts are added in part order (a count that depends on the shape only, so the
// result does not depend on the threads), then the epilogue runs over C.
// Taken for f32 on AVX-512 (gemm::isa_is_avx512), k's innermost axis of stride 1 in both operands
// and at least 12 long, at least 64 runs, M * N <= 8192 (the ResNet 3x3 shape, 64 x 576, keeps
// the packed path: its A rows per part would not stay in L2), and where it issues at most 0.8x
// the packed tiles' vector multiply-adds (padding to whole vectors against padding to the tile).
// The CNN's first conv (16 x 9, rows of 28: 1.0 M against 1.6 M) takes it, 1.7 -> 0.8 ms; its
// second (32 x 144, rows of 14: 8.3 M against 8.0 M) does not: forced, it measured as the packed
// path (2.24 against 2.29 ms) for parts of 256 KiB to 2 MiB, and slower for smaller parts (the
// lane sums per part). RAVEL_TBB_WINDOW_DOT=0 turns it off (A/B in one binary;
// docs/performance.md §8, 2026-12-07).
#include "gemm_window_dot.hpp"

#include "gemm_blocked.hpp"
#include "gemm_kernels.hpp"
#include "gemm_pack_window.hpp"
#include "tuning_env.hpp"

#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define RVL_WINDOW_DOT_X86 1
#endif

namespace tbbcpu {
namespace {

#ifdef RVL_WINDOW_DOT_X86
#pragma GCC push_options
#pragma GCC target("avx512f")
// The sum of the 16 lanes, in lane order (_mm512_reduce_add_ps and the 512-bit shuffles draw
// -Wuninitialized from GCC 12's header); once per accumulator per part, so its cost is nil.
inline float sum_lanes(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float s = 0.0f;
  for (float x : lanes) s += x;
  return s;
}

// out[i * ldo + j] = sum over the runs r and their L elements e of a[i][ra[r] + e] * b[j][rb[r] + e].
template <int MB, int NB>
void dot_block(const float* const* a, const float* const* b, const int64_t* ra, const int64_t* rb, int64_t runs,
               int64_t L, float* out, int64_t ldo) {
  __m512 acc[MB][NB];
#pragma GCC unroll 8
  for (int i = 0; i < MB; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j) acc[i][j] = _mm512_setzero_ps();
  // One loop body for whole and partial vectors (a second, unmasked copy made GCC spill the
  // accumulators); the offsets are kept as indices off two moving bases to spare registers.
  const float* ap = a[0];
  const float* bp = b[0];
  int64_t ai[MB], bi[NB];
  for (int i = 0; i < MB; ++i) ai[i] = a[i] - ap;
  for (int j = 0; j < NB; ++j) bi[j] = b[j] - bp;
  const int64_t vectors = (L + 15) / 16;
  const __mmask16 last = static_cast<__mmask16>(L % 16 == 0 ? 0xFFFFu : (1u << (L % 16)) - 1u);
  for (int64_t r = 0; r < runs; ++r) {
    const float* pa = ap + ra[r];
    const float* pb = bp + rb[r];
    for (int64_t v = 0; v < vectors; ++v, pa += 16, pb += 16) {
      const __mmask16 mask = v + 1 < vectors ? static_cast<__mmask16>(0xFFFF) : last;
      __m512 bv[NB];
#pragma GCC unroll 8
      for (int j = 0; j < NB; ++j) bv[j] = _mm512_maskz_loadu_ps(mask, pb + bi[j]);
#pragma GCC unroll 8
      for (int i = 0; i < MB; ++i) {
        const __m512 av = _mm512_maskz_loadu_ps(mask, pa + ai[i]);
#pragma GCC unroll 8
        for (int j = 0; j < NB; ++j) acc[i][j] = _mm512_fmadd_ps(av, bv[j], acc[i][j]);
      }
    }
  }
  // Every index a constant (unrolled): with a loop here GCC kept acc in memory, storing each
  // accumulator after every multiply-add.
#pragma GCC unroll 8
  for (int i = 0; i < MB; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j) out[i * ldo + j] = sum_lanes(acc[i][j]);
}
#pragma GCC pop_options
#endif

using BlockFn = void (*)(const float* const*, const float* const*, const int64_t*, const int64_t*, int64_t, int64_t,
                         float*, int64_t);

struct Shape {
  int mb, nb;
  BlockFn fn;
};

// The block shape that computes the fewest padded (m, n) pairs: 4 x 6 (24 accumulators, 6 B
// vectors and one A vector: 31 of the 32 registers) or 8 x 3 (28), the latter for N = 9.
Shape block_shape(int64_t m, int64_t n) {
#ifdef RVL_WINDOW_DOT_X86
  auto up = [](int64_t x, int64_t r) { return (x + r - 1) / r * r; };
  if (up(m, 8) * up(n, 3) < up(m, 4) * up(n, 6)) return {8, 3, &dot_block<8, 3>};
  return {4, 6, &dot_block<4, 6>};
#else
  (void)m, (void)n;
  return {0, 0, nullptr};
#endif
}

bool enabled() {
  static const bool on = tuning_choice("RAVEL_TBB_WINDOW_DOT", "1", {"0", "1"}) == "1";
  return on;
}

}  // namespace

bool run_window_dot(const Contraction& c, const Evaluator& ep) {
  const Contraction::Group& g = c.k_group;
  if (c.dtype != RVL_DTYPE_F32 || g.rank < 1 || !gemm::isa_is_avx512() || !enabled()) return false;
  const int d = g.rank - 1;
  const int64_t L = g.shape[d], M = c.m, N = c.n;
  if (g.stride[0][d] != 1 || g.stride[1][d] != 1 || L < 12 || M * N > 8192 || M == 0 || N == 0) return false;
  const int64_t runs = c.k / L;
  if (runs < 64) return false;  // short K: the packed path's tiles parallelise over C instead
  // One entry per run: the group without its innermost axis (rank d; rank 0 is a single run).
  Contraction::Group outer = g;
  outer.rank = d;
  const int br = c.batch_rank;
  const std::vector<int64_t> ra = window_offsets(outer, 0, runs, 0), rb = window_offsets(outer, 1, runs, 0);
  const std::vector<int64_t> am = window_offsets(c.m_group, 0, M, c.a.stride[br]);
  const std::vector<int64_t> bn = window_offsets(c.n_group, 0, N, c.b.stride[br + 1]);
  const Shape bs = block_shape(M, N);
  const int64_t vectors = (L + 15) / 16;
  // Taken where it issues clearly fewer multiply-adds than the packed tiles would (padding to the
  // tile against padding to whole vectors): see the Note for the measured cases.
  const gemm::Kernel<float> packed = gemm::select_kernel_f32_for_shape(M, N);
  auto up = [](int64_t x, int64_t r) { return (x + r - 1) / r * r; };
  const double dot_fmas = static_cast<double>(up(M, bs.mb) * up(N, bs.nb)) * static_cast<double>(runs * vectors);
  const double tile_fmas = static_cast<double>(up(M, packed.mr) * up(N, packed.nr)) * static_cast<double>(c.k) / 16.0;
  if (dot_fmas > 0.8 * tile_fmas) return false;
  const int64_t per_part = std::clamp<int64_t>((256 << 10) / (M * vectors * 64), 8, runs);
  const int64_t parts = (runs + per_part - 1) / per_part;
  int64_t batches = 1;
  for (int i = 0; i < br; ++i) batches *= c.batch_shape[i];
  const float* A = reinterpret_cast<const float*>(c.a.data);
  const float* B = reinterpret_cast<const float*>(c.b.data);
  std::vector<float> partial(static_cast<size_t>(batches * parts * M * N));
  tbb::parallel_for(int64_t{0}, batches * parts, [&](int64_t task) {
    const int64_t batch = task / parts, part = task % parts;
    const int64_t r0 = part * per_part, r1 = std::min(runs, r0 + per_part);
    int64_t oa, ob, oc;
    gemm_batch_offsets(c, batch, oa, ob, oc);
    float* out = partial.data() + task * M * N;
    float tile[8 * 6];
    const float* arow[8];
    const float* bcol[6];
    for (int64_t m0 = 0; m0 < M; m0 += bs.mb)
      for (int64_t n0 = 0; n0 < N; n0 += bs.nb) {
        for (int i = 0; i < bs.mb; ++i) arow[i] = A + oa + am[std::min(M - 1, m0 + i)];
        for (int j = 0; j < bs.nb; ++j) bcol[j] = B + ob + bn[std::min(N - 1, n0 + j)];
        bs.fn(arow, bcol, ra.data() + r0, rb.data() + r0, r1 - r0, L, tile, bs.nb);
        for (int64_t i = 0; i < std::min<int64_t>(bs.mb, M - m0); ++i)
          for (int64_t j = 0; j < std::min<int64_t>(bs.nb, N - n0); ++j) out[(m0 + i) * N + n0 + j] = tile[i * bs.nb + j];
      }
  });
  tbb::enumerable_thread_specific<Scratch> scratch([&] { return ep.make_scratch(); });
  tbb::parallel_for(int64_t{0}, batches * M, [&](int64_t row) {  // parts in order, then the epilogue
    const int64_t batch = row / M, m = row % M;
    float* sum = partial.data() + (batch * parts * M + m) * N;
    for (int64_t p = 1; p < parts; ++p) {
      const float* add = sum + p * M * N;
      for (int64_t j = 0; j < N; ++j) sum[j] += add[j];
    }
    Scratch& sc = scratch.local();
    const int64_t start = row * N;
    for (int64_t s = start; s < start + N; s += ep.block()) {
      const int64_t e = std::min(start + N, s + ep.block());
      ep.store(s, e, ep.eval(s, e, sc, sum + (s - start)), sc);
    }
  });
  return true;
}

}  // namespace tbbcpu
