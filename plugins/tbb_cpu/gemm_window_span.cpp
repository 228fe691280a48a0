// Note [Vectors across runs and images]
// Note [B rows in place] (gemm_window_rows.cpp) reads each run of B's columns (a convolution's
// output row, 14 long at 128x32x14x14) as its own 16-lane vector: 14 of 16 lanes used, and a
// 14x14 image's 196 columns took 14 vectors. Packing B would fill the lanes but copies every
// element. Here a vector is 16 *consecutive* columns of the flattened (batch, n) axis wherever
// they lie: its lanes are at most two pieces, each a stride-1 stretch of B (a run, or the end of
// one image and the start of the next), read at b_lo + bk[k] and b_hi + bk[k] (row k's offset is
// the same for every image: only the image's base moves) and merged by a blend. 128 images of
// 196 columns are 1568 full vectors (one row per vector: 1792). One tile of C then spans images,
// which needs A to be the same for every batch entry (stride 0 along the batch: the weight, Note
// [Leading axes as a broadcast batch] in the core); A's 8-row slivers are packed once per thread
// (Note [Packed A across batches]) and K is one panel (no C round trip for a 32-deep second
// panel). C is written the same way (two masked stores where a vector crosses an image) when the
// epilogue only stores or is a bias and relu the kernel applies itself (Note [Bias and relu in
// registers], gemm_bias_relu.cpp); otherwise into a tile laid out as C, one piece per image, over
// which the epilogue runs once per whole image rather than once per row of 196.
// Note [Whole loads on Zen 4]: both loads are plain 64-byte loads where all 16 lanes lie inside
// B's view for every k (all but the last vectors of B), masked loads at the edges; the lanes
// outside a piece are blended away (or stored nowhere), so what they read does not matter.
// Measured (128x32x14x14 -> 64, Zen 4, contraction alone): 5.5-5.9 ms against the rows path's
// 6.3-6.6 with bias + relu, and the same (5.5) with no epilogue: the FMAs saved are spent on the
// second load per vector, the gain is the epilogue's. Taken by gemm_pack_window.cpp where the
// 8-row rows kernel would run with 64 <= K <= 2048 and every vector has at most two pieces (rows
// of >= 15, or even offsets into rows of 14: checked over all vectors, not assumed);
// RAVEL_TBB_WINDOW_SPAN=0 keeps the rows path (A/B in one binary). Each C element is summed in k
// order from zero with one FMA per step over all of K (the rows path: per panel of 256, panels
// added, so for K > 256 the last bits may differ). docs/performance.md §8 (conv3).
#include "gemm_window_span.hpp"

#include "gemm_bias_relu.hpp"
#include "gemm_blocked.hpp"
#include "gemm_kernels.hpp"
#include "tuning_env.hpp"

#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <memory>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define RVL_WINDOW_SPAN_X86 1
#endif

namespace tbbcpu {
namespace {

// One vector of 16 consecutive columns: lanes [0, split) read b_lo + lane, lanes [split, 16)
// b_hi + lane (b_hi already moved back by split), both + bk[k]; the masks select them. C the
// same with its own split (C breaks only between images).
struct SpanVec {
  const float* b_lo;
  const float* b_hi;
  float* c_lo;
  float* c_hi;
  int64_t ld_lo, ld_hi;  // C's row strides at c_lo and c_hi
  const float* r_lo;     // the select's r at C's (b, n) (Note [Bias and relu in registers]), or null
  const float* r_hi;
  uint32_t bm_lo, bm_hi, cm_lo, cm_hi;
  bool whole;  // 16 floats from b_lo + bk[k] and from b_hi + bk[k] lie inside B's view for every k
};

constexpr int64_t kMaxVectors = 1024 / 16;  // a tile's columns at most
constexpr int kGroup = 2;  // vectors per kernel call (3 measured the same)

#ifdef RVL_WINDOW_SPAN_X86
#pragma GCC push_options
#pragma GCC target("avx512f")
// C rows [0, 8) of NV vectors = a packed 8-row A sliver (a[k * 8 + i]) times their B rows,
// over all of kc; row i of C at c + i * ld. 8 NV accumulators, 2 NV masked loads and 8
// broadcasts per 8 NV multiply-adds.
// Whole: every lane of both loads lies inside B's view (Note [Whole loads on Zen 4]): plain loads
// and a blend; else masked loads.
// Select (Note [Selects instead of blends]): the whole loads' lanes merged by a bitwise select
// with a vector mask instead of a blend with a mask register.
// What the kernel applies before the store: Note [Bias and relu in registers] (gemm_bias_relu.cpp).
struct InKernel {
  const float* bias = nullptr;  // 8 values (the sliver's rows), or null
  bool bias_first = false, relu = false;
  bool select = false;  // store r where relu keeps v, else +0.0 (r's rows rld apart)
  int64_t rld = 0;
};

template <int NV, bool Whole, bool Select>
void span_kernel_avx512(int64_t kc, const float* a, const SpanVec* v, const int64_t* bk, const InKernel& ek) {
  __mmask16 lo[NV], hi[NV];
  __m512i sel[NV];  // lane all ones where the lane comes from q (hi's lanes)
  const float *p[NV], *q[NV];
#pragma GCC unroll 4
  for (int j = 0; j < NV; ++j) {
    lo[j] = static_cast<__mmask16>(v[j].bm_lo), hi[j] = static_cast<__mmask16>(v[j].bm_hi);
    sel[j] = _mm512_maskz_set1_epi32(hi[j], -1);
    p[j] = v[j].b_lo, q[j] = v[j].b_hi;
  }
  __m512 acc[8][NV];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; ++k, a += 8) {
    const int64_t o = bk[k];
    __m512 x[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      if constexpr (Whole) {
        // The empty asm keeps GCC from folding the blend back into a masked load.
        __m512 xp = _mm512_loadu_ps(p[j] + o), xq = _mm512_loadu_ps(q[j] + o);
        asm("" : "+v"(xp), "+v"(xq));
        if constexpr (Select)  // sel ? xq : xp bit by bit, written over xp (0xB8: B ? C : A; no copy of sel)
          x[j] = _mm512_castsi512_ps(
              _mm512_ternarylogic_epi32(_mm512_castps_si512(xp), sel[j], _mm512_castps_si512(xq), 0xB8));
        else
          x[j] = _mm512_mask_blend_ps(hi[j], xp, xq);
      } else {
        x[j] = _mm512_mask_loadu_ps(_mm512_maskz_loadu_ps(lo[j], p[j] + o), hi[j], q[j] + o);
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i]);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_fmadd_ps(ai, x[j], acc[i][j]);
    }
  }
  if (ek.select) {  // relu's derivative times r: r's bits where relu keeps v, +0.0 elsewhere
    for (int i = 0; i < 8; ++i) {
      const __m512 b = ek.bias ? _mm512_set1_ps(ek.bias[i]) : _mm512_setzero_ps();
      for (int j = 0; j < NV; ++j) {
        __m512 y = acc[i][j];
        if (ek.bias) y = ek.bias_first ? _mm512_add_ps(b, y) : _mm512_add_ps(y, b);
        const __mmask16 keep = _mm512_cmp_ps_mask(y, _mm512_setzero_ps(), _CMP_NLE_UQ);
        const __mmask16 cl = static_cast<__mmask16>(v[j].cm_lo), ch = static_cast<__mmask16>(v[j].cm_hi);
        _mm512_mask_storeu_ps(v[j].c_lo + i * v[j].ld_lo, cl, _mm512_maskz_loadu_ps(keep & cl, v[j].r_lo + i * ek.rld));
        _mm512_mask_storeu_ps(v[j].c_hi + i * v[j].ld_hi, ch, _mm512_maskz_loadu_ps(keep & ch, v[j].r_hi + i * ek.rld));
      }
    }
    return;
  }
  if (ek.bias || ek.relu) {
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const __m512 b = ek.bias ? _mm512_set1_ps(ek.bias[i]) : _mm512_setzero_ps();
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) {
        __m512 y = acc[i][j];
        if (ek.bias) y = ek.bias_first ? _mm512_add_ps(b, y) : _mm512_add_ps(y, b);
        if (ek.relu) y = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(y, _mm512_setzero_ps(), _CMP_NLE_UQ), y);
        acc[i][j] = y;
      }
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < NV; ++j) {
    const __mmask16 cl = static_cast<__mmask16>(v[j].cm_lo), ch = static_cast<__mmask16>(v[j].cm_hi);
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      _mm512_mask_storeu_ps(v[j].c_lo + i * v[j].ld_lo, cl, acc[i][j]);
      _mm512_mask_storeu_ps(v[j].c_hi + i * v[j].ld_hi, ch, acc[i][j]);
    }
  }
}
#pragma GCC pop_options
#endif

bool span_enabled() {
  static const bool on = tuning_choice("RAVEL_TBB_WINDOW_SPAN", "1", {"0", "1"}) == "1";
  return on;
}

// Note [Selects instead of blends]
// GCC kept the two vectors' blend masks in general registers and moved them into mask registers
// (kmovw) on every k: on Intel the kmovw and the merge-masked move both issue on port 5, beside
// the 512-bit FMAs on ports 0 and 5, so a k of 16 FMAs took 20 of those slots (perf annotate of
// 128x32x14x14 -> 64, Intel Xeon). A bitwise select (vpternlogd) with the mask as a vector
// register, made once per call, is one slot and needs no kmovw: 18 slots. Exact (a select moves
// bits). RAVEL_TBB_SPAN_SELECT=0 gives back the blend. docs/performance.md §8 (convfwd).
bool select_enabled() {
  static const bool on = tuning_choice("RAVEL_TBB_SPAN_SELECT", "1", {"0", "1"}) == "1";
  return on;
}

uint32_t lanes(int64_t from, int64_t to) {  // mask of lanes [from, to)
  return ((1u << to) - 1u) & ~((1u << from) - 1u);
}

}  // namespace

bool run_window_span(const Contraction& c, const Evaluator& ep, const WindowSpanTables& t) {
#ifndef RVL_WINDOW_SPAN_X86
  (void)c, (void)ep, (void)t;
  return false;
#else
  if (!span_enabled() || c.dtype != RVL_DTYPE_F32 || !gemm::isa_is_avx512()) return false;
  const int64_t M = c.m, N = c.n, K = c.k, br = c.batch_rank;
  // K >= 64: with few k per column (the CNN's first conv, K = 9) the kernel is bound by writing C,
  // and the rows path's per-image tiles (C tile in L1) measured faster (1.7 against 2.3 ms).
  if (M % 8 != 0 || K < 64 || K > 2048 || M * K * 4 > (256 << 10)) return false;
  for (int d = 0; d < br; ++d)
    if (c.a.stride[d] != 0 && c.batch_shape[d] > 1) return false;  // A differs between batch entries
  int64_t batches = 1;
  for (int d = 0; d < br; ++d) batches *= c.batch_shape[d];
  const int64_t cols = batches * N;  // the flattened (batch, n) axis
  std::vector<int64_t> ob(static_cast<size_t>(batches)), oc(static_cast<size_t>(batches));
  int64_t oa = 0;
  for (int64_t b = 0; b < batches; ++b) gemm_batch_offsets(c, b, oa, ob[b], oc[b]);
  // Each vector's lanes in at most two pieces of B (checked for all of them up front).
  auto piece = [&](int64_t j, int64_t end) {  // columns from j on that are one stride-1 stretch
    const int64_t n = j % N;
    return std::min({t.bn_run[n], N - n, end - j});
  };
  for (int64_t j = 0; j < cols; j += 16) {
    const int64_t end = std::min(cols, j + 16);
    int64_t at = j, pieces = 0;
    while (at < end && pieces <= 2) at += piece(at, end), ++pieces;
    if (pieces > 2) return false;
  }
  // The epilogue only stores, or adds a bias and applies relu in registers (Note [Bias and relu
  // in registers]), with C's columns contiguous within an image: C written in place.
  const Program& e = c.epilogue;
  const View& o = e.out;
  const BiasRelu er = match_bias_relu(c);
  const bool direct = ((e.n_ins == 1 && e.ins[0].op == RVL_OP_ACC) || er.on) && o.dtype == RVL_DTYPE_F32 &&
                      o.stride[br + 1] == 1 && o.stride[br] >= N && o.data != c.a.data && o.data != c.b.data;
  InKernel ek0;  // what the kernel applies (direct only)
  std::vector<int64_t> orr;  // the select's r: each image's offset
  if (direct && er.on) {
    ek0.bias = er.bias.empty() ? nullptr : er.bias.data();
    ek0.bias_first = er.bias_first, ek0.relu = er.relu, ek0.select = er.select, ek0.rld = er.r.stride[br];
    if (er.select) {
      orr.resize(static_cast<size_t>(batches));
      for (int64_t b = 0; b < batches; ++b) {
        int64_t off = er.r.offset;
        for (int64_t d = br - 1, q = b; d >= 0; --d) off += (q % c.batch_shape[d]) * er.r.stride[d], q /= c.batch_shape[d];
        orr[static_cast<size_t>(b)] = off;
      }
    }
  }
  const float* R = ek0.select ? reinterpret_cast<const float*>(er.r.data) : nullptr;
  const bool select = select_enabled();
  const int threads = std::max(1, tbb::this_task_arena::max_concurrency());
  // Tiles of NC columns (whole vector pairs): >= 4 per thread, at most 1024 columns (M x NC of C
  // in L2; 128x32x14x14 -> 64: 1024 columns measured 2-5% faster than 384, 10-25% than 96-256).
  const int64_t NC = std::clamp<int64_t>(((cols + 4 * threads - 1) / (4 * threads) + 31) / 32 * 32, 32, kMaxVectors * 16);
  const int64_t tiles = (cols + NC - 1) / NC;
  int64_t oa0, ob0, oc0;
  gemm_batch_offsets(c, 0, oa0, ob0, oc0);
  const float* Ab = reinterpret_cast<const float*>(c.a.data) + oa0;  // the same A for every batch entry
  const float* B = reinterpret_cast<const float*>(c.b.data);
  // The elements of B's view lie in [view_lo, view_hi] (each axis's offsets independent: the
  // extremes are the sums of the batch's, k's and n's extremes). A whole load whose lane 0 is at
  // x + bk[k] reads [x + bk_min, x + bk_max + 15] over all k: inside the view, so inside B's buffer.
  auto lowest = [](const std::vector<int64_t>& v) { return *std::min_element(v.begin(), v.end()); };
  auto highest = [](const std::vector<int64_t>& v) { return *std::max_element(v.begin(), v.end()); };
  const int64_t bk_min = lowest(t.bk), bk_max = highest(t.bk);
  const int64_t view_lo = lowest(ob) + bk_min + lowest(t.bn), view_hi = highest(ob) + bk_max + highest(t.bn);
  auto whole_at = [&](const float* x) { return x - B + bk_min >= view_lo && x - B + bk_max + 15 <= view_hi; };
  float* C = reinterpret_cast<float*>(o.data);
  struct Local {
    Scratch sc;
    std::unique_ptr<float[]> pa, ct;
    bool packed = false;
    std::vector<int64_t> n_at, w, ct_at;
  };
  tbb::enumerable_thread_specific<Local> locals([&] {
    return Local{ep.make_scratch(), std::unique_ptr<float[]>(new float[static_cast<size_t>(M * K)]),
                 std::unique_ptr<float[]>(direct ? nullptr : new float[static_cast<size_t>(M * NC)]), false, {}, {}, {}};
  });
  auto run_tile = [&](int64_t tile) {
    Local& L = locals.local();
    if (!L.packed) {  // A's 8-row slivers over all of K: dst[s][k * 8 + i] (Note [Packed A across batches])
      for (int64_t s = 0; s < M / 8; ++s)
        for (int64_t k = 0; k < K; ++k)
          for (int64_t i = 0; i < 8; ++i) L.pa[(s * K + k) * 8 + i] = Ab[t.am[s * 8 + i] + t.ak[k]];
      L.packed = true;
    }
    const int64_t j0 = tile * NC, j1 = std::min(cols, j0 + NC), nv = (j1 - j0 + 15) / 16;
    // The tile's pieces of images: piece p is image bfirst + p, columns [n_at[p], n_at[p] + w[p]),
    // kept in ct as C lays it out (rows of w[p], from ct_at[p]) so that a whole image's piece is
    // one range of the epilogue's linear order.
    const int64_t bfirst = j0 / N, blast = (j1 - 1) / N, npieces = blast - bfirst + 1;
    std::vector<int64_t>& n_at = L.n_at;
    std::vector<int64_t>& w = L.w;
    std::vector<int64_t>& ct_at = L.ct_at;
    n_at.resize(npieces), w.resize(npieces), ct_at.resize(npieces);
    for (int64_t p = 0, off = 0; p < npieces; ++p) {
      const int64_t a = std::max(j0, (bfirst + p) * N), z = std::min(j1, (bfirst + p + 1) * N);
      n_at[p] = a % N, w[p] = z - a, ct_at[p] = off;
      off += M * w[p];
    }
    auto c_at = [&](int64_t b, int64_t n, float*& ptr, int64_t& ld) {  // C's (or ct's) row 0 at (b, n)
      if (direct) {
        ptr = C + oc[b] + n, ld = o.stride[br];
      } else {
        const int64_t p = b - bfirst;
        ptr = L.ct.get() + ct_at[p] + (n - n_at[p]), ld = w[p];
      }
    };
    SpanVec v[kMaxVectors + 4];
    for (int64_t q = 0; q < nv; ++q) {
      const int64_t j = j0 + 16 * q, end = std::min(j1, j + 16);
      SpanVec& s = v[q];
      const int64_t w0 = piece(j, end), b0 = j / N, n0 = j % N;
      s.b_lo = B + ob[b0] + t.bn[n0];
      s.bm_lo = lanes(0, w0);
      s.b_hi = s.b_lo, s.bm_hi = 0;
      if (j + w0 < end) {
        const int64_t j2 = j + w0, b2 = j2 / N, n2 = j2 % N;
        s.b_hi = B + ob[b2] + t.bn[n2] - w0;
        s.bm_hi = lanes(w0, end - j);
      }
      s.whole = whole_at(s.b_lo) && whole_at(s.b_hi);
      // C breaks only between images.
      const int64_t wc = std::min(end - j, N - n0);
      c_at(b0, n0, s.c_lo, s.ld_lo);
      s.cm_lo = lanes(0, wc);
      s.c_hi = s.c_lo, s.ld_hi = s.ld_lo, s.cm_hi = 0;
      s.r_lo = s.r_hi = R ? R + orr[b0] + n0 : nullptr;
      if (j + wc < end) {
        c_at(b0 + 1, 0, s.c_hi, s.ld_hi);
        s.c_hi -= wc, s.cm_hi = lanes(wc, end - j);
        if (R) s.r_hi = R + orr[b0 + 1] - wc;
      }
    }
    for (int64_t q = nv; q % kGroup; ++q)  // null partners: nothing read or written
      v[q] = v[nv - 1], v[q].bm_lo = v[q].bm_hi = v[q].cm_lo = v[q].cm_hi = 0;
    auto block = [&](int64_t q, int64_t s) {
      SpanVec g[kGroup];
      bool whole = true;
      for (int j = 0; j < kGroup; ++j) {
        g[j] = v[q + j];
        g[j].c_lo += s * 8 * g[j].ld_lo, g[j].c_hi += s * 8 * g[j].ld_hi;
        whole = whole && g[j].whole;
      }
      const float* a = L.pa.get() + s * K * 8;
      InKernel ek = ek0;
      if (ek.bias) ek.bias += s * 8;
      for (int j = 0; j < kGroup && ek.select; ++j)
        g[j].r_lo += s * 8 * ek.rld, g[j].r_hi += s * 8 * ek.rld;
      if (whole && select) span_kernel_avx512<kGroup, true, true>(K, a, g, t.bk.data(), ek);
      else if (whole) span_kernel_avx512<kGroup, true, false>(K, a, g, t.bk.data(), ek);
      else span_kernel_avx512<kGroup, false, false>(K, a, g, t.bk.data(), ek);
    };
    // Vector groups outside, slivers inside: the group's B rows stay in L1 while A's slivers (M x K,
    // <= 256 KiB, in L2) pass over them (slivers outside measured 2-10% slower).
    for (int64_t q = 0; q < nv; q += kGroup)
      for (int64_t s = 0; s < M / 8; ++s) block(q, s);
    if (direct) return;
    // The epilogue over each piece, [batch.., M, N] linear: one range for a whole image, else
    // one per row.
    auto finish = [&](int64_t start, int64_t len, const float* acc) {
      for (int64_t s = start; s < start + len; s += ep.block()) {
        const int64_t en = std::min(start + len, s + ep.block());
        ep.store(s, en, ep.eval(s, en, L.sc, acc + (s - start)), L.sc);
      }
    };
    for (int64_t p = 0; p < npieces; ++p) {
      const int64_t b = bfirst + p;
      if (w[p] == N) {
        finish(b * M * N, M * N, L.ct.get() + ct_at[p]);
        continue;
      }
      for (int64_t m = 0; m < M; ++m) finish((b * M + m) * N + n_at[p], w[p], L.ct.get() + ct_at[p] + m * w[p]);
    }
  };
  if (tiles == 1) run_tile(0);
  else tbb::parallel_for(int64_t{0}, tiles, run_tile);
  return true;
#endif
}

}  // namespace tbbcpu
