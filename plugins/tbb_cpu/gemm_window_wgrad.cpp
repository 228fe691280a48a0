// Note [Weight gradients with B broadcast in place]
// A convolution's weight gradient dw[o, (c, kh, kw)] = sum over k = (n, oh, ow) of
// dy[n, o, oh, ow] * xp[n, c, oh*s + kh*d, ow*s + kw*d] is a GEMM with a small C (M x N = 64 x 288
// at 128x32x14x14 -> 64) and a huge K (N * OH * OW = 25,088) whose operands both run along k:
// neither has a stride-1 axis along m or n. The packed path (gemm_pack_window.cpp, Note [Split K
// for weight gradients]) therefore transposed A by a scalar gather per element and gathered each
// B row of the packed panel (K x N: 7.2 M elements here, 4.5x A's) 16 lanes at a time, before
// its micro-kernel ran; the dot form (gemm_window_dot.cpp) streams both operands from L2 and
// pays a lane sum per (m, n) and part.
// Here C is computed transposed, C^T[n][m], with the vectors along m: per k, MV vectors of A
// (16 * MV consecutive m, from A packed [k][m] per panel: the small operand, 1/4.5 of B's
// elements) times one B element per column n, read in place and broadcast into the multiply-add
// ({1to16}), so B is never packed: per k, NB broadcasts of b[j] + bk[k] (the columns' offsets in
// registers, one k offset shared by all of them; any stride, dilation or group layout is only
// another offset table). A block holds NB x MV accumulators (6 x 4, 12 x 2, 8 x 3, 12 x 1:
// <= 24) and issues MV + NB loads per NB * MV multiply-adds (6 x 4: 10 per 24). A panel of
// kPanel k's packs A once (Note [A packed by transposes]; 64 x 128 floats, in L1) and runs every
// block over it, adding into the block's C^T tile in memory (one load and store per accumulator
// per panel); B's part for a panel is a few rows of every input channel of one image.
// K is cut into parts (>= kMinPart k's, at most 32) whose count depends on K only, never on the
// threads; each part sums into its own C^T, the parts are added in part order, and the epilogue
// runs over C's rows: the result does not depend on the threads. Each element is summed in k
// order within a part. perf (dw of 128x32x14x14 -> 64): the kernel's samples sit on A's loads
// (a 64 KiB panel in L2 at 256 k's; 128 measured 4% faster), packing ~8% of the kernel's time.
// Taken for f32 on AVX-512 with M >= 8, C^T <= 4 MiB, K >= 2048 and K >= 8 * max(M, N) (a weight
// gradient: the forwards and input gradients have K = C x taps), after the dot form declines.
// RAVEL_TBB_WINDOW_WGRAD=0 gives back the packed path (A/B in one binary; docs/performance.md §8,
// helper "convwg").
#include "gemm_window_wgrad.hpp"

#include "gemm_blocked.hpp"
#include "gemm_kernels.hpp"
#include "gemm_pack_window.hpp"
#include "tuning_env.hpp"

#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <memory>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define RVL_WINDOW_WGRAD_X86 1
#endif

namespace tbbcpu {
namespace {

#ifdef RVL_WINDOW_WGRAD_X86
#pragma GCC push_options
#pragma GCC target("avx512f")
// ct[j * ldc + v * 16 + l] (+)= sum over k < kc of ap[k * 16 * MV + v * 16 + l] * b[j][bk[k]].
template <int MV, int NB>
void bcast_block(int64_t kc, const float* ap, const float* const* b, const int64_t* bk, float* ct, int64_t ldc,
                 bool accumulate) {
  __m512 acc[NB][MV];
#pragma GCC unroll 16
  for (int j = 0; j < NB; ++j)
#pragma GCC unroll 4
    for (int v = 0; v < MV; ++v)
      acc[j][v] = accumulate ? _mm512_loadu_ps(ct + j * ldc + v * 16) : _mm512_setzero_ps();
  const float* bj[NB];
#pragma GCC unroll 16
  for (int j = 0; j < NB; ++j) bj[j] = b[j];
  for (int64_t k = 0; k < kc; ++k, ap += 16 * MV) {
    const int64_t o = bk[k];
    __m512 av[MV];
#pragma GCC unroll 4
    for (int v = 0; v < MV; ++v) av[v] = _mm512_loadu_ps(ap + v * 16);
#pragma GCC unroll 16
    for (int j = 0; j < NB; ++j) {
      const __m512 bv = _mm512_set1_ps(bj[j][o]);
#pragma GCC unroll 4
      for (int v = 0; v < MV; ++v) acc[j][v] = _mm512_fmadd_ps(av[v], bv, acc[j][v]);
    }
  }
#pragma GCC unroll 16
  for (int j = 0; j < NB; ++j)
#pragma GCC unroll 4
    for (int v = 0; v < MV; ++v) _mm512_storeu_ps(ct + j * ldc + v * 16, acc[j][v]);
}

// dst[e * W + i] = rows[i][ak[e]] for 16 rows and 16 k's that are consecutive in A (ak[e] =
// ak[0] + e): 16 loads, a 16 x 16 transpose in registers, 16 stores, instead of 256 scalar reads
// through the offset table (Note [A packed by transposes]).
// The unmasked unpack and shuffle intrinsics pass _mm512_undefined_ps() (-Wuninitialized from
// GCC 12's header): the masked forms with every lane selected are the same instructions.
inline __m512 lo_ps(__m512 a, __m512 b) { return _mm512_mask_unpacklo_ps(a, 0xFFFF, a, b); }
inline __m512 hi_ps(__m512 a, __m512 b) { return _mm512_mask_unpackhi_ps(a, 0xFFFF, a, b); }
inline __m512 lo_pd(__m512 a, __m512 b) {
  const __m512d x = _mm512_castps_pd(a);
  return _mm512_castpd_ps(_mm512_mask_unpacklo_pd(x, 0xFF, x, _mm512_castps_pd(b)));
}
inline __m512 hi_pd(__m512 a, __m512 b) {
  const __m512d x = _mm512_castps_pd(a);
  return _mm512_castpd_ps(_mm512_mask_unpackhi_pd(x, 0xFF, x, _mm512_castps_pd(b)));
}
template <int IMM>
inline __m512 lanes(__m512 a, __m512 b) { return _mm512_mask_shuffle_f32x4(a, 0xFFFF, a, b, IMM); }

void transpose_rows16(const float* const* rows, int64_t a0, float* dst, int64_t W) {
  __m512 r[16], t[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(rows[i] + a0);
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) {  // per 128-bit lane L: [r_i[4L], r_i+1[4L], r_i[4L+1], r_i+1[4L+1]], ...
    t[i] = lo_ps(r[i], r[i + 1]);
    t[i + 1] = hi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {  // u[g][c], lane L: column 4L + c of rows 4g .. 4g + 3
    r[4 * g + 0] = lo_pd(t[4 * g], t[4 * g + 2]);
    r[4 * g + 1] = hi_pd(t[4 * g], t[4 * g + 2]);
    r[4 * g + 2] = lo_pd(t[4 * g + 1], t[4 * g + 3]);
    r[4 * g + 3] = hi_pd(t[4 * g + 1], t[4 * g + 3]);
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {  // column 4L + c = lane L of u[0][c], u[1][c], u[2][c], u[3][c]
    constexpr int even = _MM_SHUFFLE(2, 0, 2, 0), odd = _MM_SHUFFLE(3, 1, 3, 1);
    const __m512 v01 = lanes<even>(r[c], r[4 + c]), w01 = lanes<odd>(r[c], r[4 + c]);
    const __m512 v23 = lanes<even>(r[8 + c], r[12 + c]), w23 = lanes<odd>(r[8 + c], r[12 + c]);
    _mm512_storeu_ps(dst + (0 + c) * W, lanes<even>(v01, v23));
    _mm512_storeu_ps(dst + (8 + c) * W, lanes<odd>(v01, v23));
    _mm512_storeu_ps(dst + (4 + c) * W, lanes<even>(w01, w23));
    _mm512_storeu_ps(dst + (12 + c) * W, lanes<odd>(w01, w23));
  }
}
#pragma GCC pop_options
#endif

using BlockFn = void (*)(int64_t, const float*, const float* const*, const int64_t*, float*, int64_t, bool);

struct Shape {
  int mv, nb;
  BlockFn fn;
};

// MV vectors along m (as many as M fills, at most 4) and NB columns: <= 24 accumulators, so that
// with the MV A vectors they stay in the 32 registers.
Shape block_shape(int64_t m) {
#ifdef RVL_WINDOW_WGRAD_X86
  if (m > 48) return {4, 6, &bcast_block<4, 6>};
  if (m > 32) return {3, 8, &bcast_block<3, 8>};
  if (m > 16) return {2, 12, &bcast_block<2, 12>};
  return {1, 12, &bcast_block<1, 12>};
#else
  (void)m;
  return {0, 0, nullptr};
#endif
}

bool enabled() {
  static const bool on = tuning_choice("RAVEL_TBB_WINDOW_WGRAD", "1", {"0", "1"}) == "1";
  return on;
}

// k's per packed A panel: 64 x 128 floats (32 KiB) stay in L1 beside B's rows; 256 measured 4%
// slower, 64 and 32 slower still (the C^T tile's load and store per panel).
constexpr int64_t kPanel = 128;
constexpr int64_t kMinPart = 1024;  // k's per part at least; at most 32 parts
constexpr int64_t kMaxCt = int64_t{1} << 20;        // floats in one C^T (4 MiB)
constexpr int64_t kMaxPartials = int64_t{16} << 20;  // floats in all parts' C^T together (64 MiB)

// Per-thread buffers of one part: its packed A panel and the panel's k offsets in A and B.
struct WgradLocal {
  std::vector<float> ap;
  std::vector<int64_t> ak, bk;
  Scratch sc;
};

// Note [A packed by transposes]
// A panel of A packed [sliver][k][W] (rows past M zero: their sums are dropped). A's rows run
// along k (a cotangent dy[n, o, oh, ow] is contiguous over a whole image's positions), so where
// 16 rows are whole and 16 k's consecutive in A they are moved by transpose_rows16; the rest (the
// panel's tail, a run that breaks, the last sliver's partial group) element by element.
void pack_a(const float* A, const int64_t* am, int64_t M, int64_t W, int64_t slivers, const int64_t* ak, int64_t kc,
            float* ap) {
  for (int64_t s = 0; s < slivers; ++s) {
    float* dst = ap + s * kc * W;
    for (int64_t g = 0; g < W; g += 16) {
      const int64_t m0 = s * W + g, h = std::clamp<int64_t>(M - m0, 0, 16);
      const float* rows[16];
      for (int64_t i = 0; i < h; ++i) rows[i] = A + am[m0 + i];
      auto scalar = [&](int64_t k0, int64_t k1) {
        for (int64_t i = 0; i < 16; ++i)
          for (int64_t k = k0; k < k1; ++k) dst[k * W + g + i] = i < h ? rows[i][ak[k]] : 0.0f;
      };
      int64_t k = 0;
#ifdef RVL_WINDOW_WGRAD_X86
      while (h == 16 && k + 16 <= kc) {  // up to a break in A's k's element by element, then again by 16
        int64_t e = 1;
        while (e < 16 && ak[k + e] == ak[k] + e) ++e;
        if (e == 16) transpose_rows16(rows, ak[k], dst + k * W + g, W);
        else scalar(k, k + e);
        k += e;
      }
#endif
      scalar(k, kc);
    }
  }
}

}  // namespace

bool run_window_wgrad(const Contraction& c, const Evaluator& ep) {
  const Contraction::Group& g = c.k_group;
  const int64_t M = c.m, N = c.n, K = c.k;
  if (c.dtype != RVL_DTYPE_F32 || g.rank < 1 || !gemm::isa_is_avx512() || !enabled()) return false;
  // M < 8 would leave most of a vector's lanes idle (a depthwise gradient: M = 1).
  if (M < 8 || N == 0 || K < 2048 || K < 8 * std::max(M, N)) return false;
  const Shape bs = block_shape(M);
  if (!bs.fn) return false;
  const int64_t W = 16 * bs.mv;                        // an m sliver: MV vectors
  const int64_t slivers = (M + W - 1) / W, Mp = slivers * W;
  const int64_t Np = (N + bs.nb - 1) / bs.nb * bs.nb;  // columns past N repeat column N - 1, dropped
  // A C^T over 4 MiB (M x N = 512 x 4608 at 512 channels) would not stay in L2 between panels:
  // the packed path keeps those.
  if (Np * Mp > kMaxCt) return false;
  // k = (run, e): the group's innermost axis is a run of L elements at strides sa (A) and sb (B).
  const int d = g.rank - 1;
  const int64_t L = g.shape[d], sa = g.stride[0][d], sb = g.stride[1][d];
  if (L == 0) return false;
  Contraction::Group outer = g;
  outer.rank = d;
  const int64_t runs = K / L;
  const int br = c.batch_rank;
  const std::vector<int64_t> ra = window_offsets(outer, 0, runs, 0), rb = window_offsets(outer, 1, runs, 0);
  const std::vector<int64_t> am = window_offsets(c.m_group, 0, M, c.a.stride[br]);
  const std::vector<int64_t> bn = window_offsets(c.n_group, 0, N, c.b.stride[br + 1]);
  // Parts of K: a count from the shape alone (the result must not depend on the threads), each
  // a whole number of panels.
  const int64_t panels = (K + kPanel - 1) / kPanel;
  int64_t batches = 1;
  for (int i = 0; i < br; ++i) batches *= c.batch_shape[i];
  // The parts' C^T together stay under 64 MiB (fewer, longer parts where C is large).
  const int64_t max_parts = std::clamp<int64_t>(kMaxPartials / (batches * Np * Mp), 1, 32);
  const int64_t part_panels =
      std::min(panels, std::max({kMinPart / kPanel, (panels + max_parts - 1) / max_parts, int64_t{1}}));
  const int64_t parts = (panels + part_panels - 1) / part_panels, per_part = part_panels * kPanel;
  const float* A = reinterpret_cast<const float*>(c.a.data);
  const float* B = reinterpret_cast<const float*>(c.b.data);
  // Left uninitialised: a part's first panel writes all of its C^T (an empty part is zeroed).
  const std::unique_ptr<float[]> partial_buffer(new float[static_cast<size_t>(batches * parts * Np * Mp)]);
  float* const partial = partial_buffer.get();
  tbb::enumerable_thread_specific<WgradLocal> locals([&] {
    return WgradLocal{std::vector<float>(static_cast<size_t>(slivers * kPanel * W)),
                      std::vector<int64_t>(kPanel), std::vector<int64_t>(kPanel), ep.make_scratch()};
  });
  tbb::parallel_for(int64_t{0}, batches * parts, [&](int64_t task) {
    const int64_t batch = task / parts, part = task % parts;
    const int64_t k0 = std::min(K, part * per_part), k1 = std::min(K, k0 + per_part);
    int64_t oa, ob, oc;
    gemm_batch_offsets(c, batch, oa, ob, oc);
    WgradLocal& lo = locals.local();
    float* ct = partial + task * Np * Mp;
    const float* bcol[16];
    for (int64_t p0 = k0; p0 < k1; p0 += kPanel) {
      const int64_t kc = std::min(kPanel, k1 - p0);
      for (int64_t k = 0, r = p0 / L, e = p0 % L; k < kc; ++k) {  // the panel's offsets
        lo.ak[k] = ra[r] + e * sa;
        lo.bk[k] = rb[r] + e * sb;
        if (++e == L) e = 0, ++r;
      }
      pack_a(A + oa, am.data(), M, W, slivers, lo.ak.data(), kc, lo.ap.data());
      for (int64_t n0 = 0; n0 < Np; n0 += bs.nb) {
        for (int j = 0; j < bs.nb; ++j) bcol[j] = B + ob + bn[std::min(N - 1, n0 + j)];
        for (int64_t s = 0; s < slivers; ++s)
          bs.fn(kc, lo.ap.data() + s * kc * W, bcol, lo.bk.data(), ct + n0 * Mp + s * W, Mp, p0 > k0);
      }
    }
    if (k0 == k1) std::fill(ct, ct + Np * Mp, 0.0f);
  });
  // The parts added in part order (each element's own order, whatever the threads), in place in
  // part 0's C^T; then C's rows gathered from its columns and the epilogue run over them.
  const int64_t per_batch = Np * Mp, chunk = 4096;
  const int64_t chunks = (per_batch + chunk - 1) / chunk;
  tbb::parallel_for(int64_t{0}, batches * chunks, [&](int64_t task) {
    const int64_t batch = task / chunks, i0 = (task % chunks) * chunk, i1 = std::min(per_batch, i0 + chunk);
    float* sum = partial + batch * parts * per_batch;
    for (int64_t p = 1; p < parts; ++p) {
      const float* add = sum + p * per_batch;
      for (int64_t i = i0; i < i1; ++i) sum[i] += add[i];
    }
  });
  tbb::parallel_for(int64_t{0}, batches * M, [&](int64_t row) {
    const int64_t batch = row / M, m = row % M;
    const float* sum = partial + batch * parts * per_batch + m;
    WgradLocal& lo = locals.local();
    std::vector<float>& out = lo.ap;  // C's row m, gathered from the columns of C^T
    if (static_cast<int64_t>(out.size()) < N) out.resize(static_cast<size_t>(N));
    for (int64_t j = 0; j < N; ++j) out[j] = sum[j * Mp];
    const int64_t start = row * N;
    for (int64_t s = start; s < start + N; s += ep.block()) {
      const int64_t e = std::min(start + N, s + ep.block());
      ep.store(s, e, ep.eval(s, e, lo.sc, out.data() + (s - start)), lo.sc);
    }
  });
  return true;
}

}  // namespace tbbcpu
