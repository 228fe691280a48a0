// Note [Small GEMM]
// The makemore step's contractions are tiny (64x30 @ 30x200, 64x200 @ 200x27, their backward
// transposes, a 64-entry batch of 27-long dot products): 0.1-0.4 M multiply-adds, a few
// microseconds of arithmetic. The blocked path (Note [Blocked GEMM]) pays more than that around
// it: packing both operands into slivers, a workspace lease, an enumerable_thread_specific and
// per-panel bookkeeping. Below gemm_small_work() multiply-adds, and only where the blocked path
// would run serially anyway (gemm_blocked_parallel), this path runs instead, on the calling
// thread with no oneTBB at all:
//   * A is never copied: the micro-kernel (gemm_small_body.inc) broadcasts A[m, k] through MR
//     row pointers, whatever A's strides (row-major, transposed, broadcast).
//   * B is read in place when its rows are contiguous (stride 1 along n), NR columns at a time;
//     the last partial NR-wide column panel is copied once per batch entry into a zero-padded
//     K x NR panel. Any other B (x @ W^T: stride 1 along k) is transposed once per batch entry
//     into a zero-padded K x round_up(N, NR) buffer, a cost of K x N against M x K x N.
//   * Each block of MR rows computes every column tile, then goes straight to C (no epilogue,
//     contiguous rows: full tiles written in place, edge tiles through the row buffer) or
//     through the epilogue evaluator while the rows are in L1.
// k is summed in order from zero, one FMA (or multiply-add) per step, as the blocked path's
// first k-panel does: the two paths agree bitwise whenever K fits one k-panel, so which path a
// shape takes never changes a training run's losses.
//
// Note [Batched dot products]
// With N == 1 (a batch of matrix-vector products; the makemore loss picks each row's logit as a
// 64-entry batch of 27-long dot products) a column tile would be 1 useful lane of NR, and each
// batch entry would pay a zero-padded K x NR panel copy and an epilogue call of one element.
// Instead every output (batch, m) is one dot product (SmallKernel::dot: the same FMA chain, or
// multiply-add, as one lane of the micro-kernel, so the results are bitwise those of the tiled
// path), gathered block() at a time into a buffer that the epilogue then runs over in one pass:
// the linear index of output (batch, m) of the [batch.., M, 1] space is batch * M + m.
// Buffers are thread_local and grow only: this path never enters oneTBB, so nothing else runs
// on this thread while they are in use.
//
// Note [Half operands of the small GEMM]
// An f16/bf16 product on this path (Small<F32, S>) widens its operands where the f32 path reads
// them in place: B once per batch entry into the zero-padded k-major buffer (rows of B convert
// as runs), A one block of MR rows at a time into an MR x K buffer that stays in L1, just before
// that block's column tiles. The kernels are the f32 ones on the same values in the same order,
// so the results are bit for bit what widening both operands first gave (decision 45's path);
// what changed is the cost: widening A whole (64 x 200 floats, 51 KiB) stored it through L1
// misses, and B's tail panel was a second copy. A plain product (epilogue ACC -> CAST to the
// half) rounds each finished row into the output with half_convert's loops, bypassing the
// evaluator's per-block passes (the same rounding, so the same bits). Measured in
// docs/performance.md §11, 2026-12-07.
#include "gemm_small.hpp"
#include "tuning_env.hpp"

#include "dtype_ops.hpp"
#include "gemm_blocked.hpp"
#include "gemm_kernels.hpp"
#include "gemm_pack.hpp"
#include "half_convert.hpp"

#include <ravel/backend.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

namespace tbbcpu {
namespace {

inline int64_t round_up(int64_t x, int64_t q) { return (x + q - 1) / q * q; }

// Multiply-adds below which the small path is taken (default 2^20: the blocked path's own
// serial floor, so every contraction the blocked path ran serially comes here). Measured on the
// makemore shapes: the small path is 2-4x faster there. RAVEL_TBB_GEMM_SMALL_WORK overrides it
// (tests: 0 disables the path, a huge value forces it for every serial shape).
int64_t gemm_small_work() {
  static const int64_t w = tuning_int("RAVEL_TBB_GEMM_SMALL_WORK", int64_t{1} << 20, 0, int64_t{1} << 62);
  return w;
}

template <class T>
struct Buffers {
  std::vector<T> b;     // B transposed, K x round_up(N, NR), zero-padded columns
  std::vector<T> tail;  // B's last partial column panel, K x NR, zero-padded
  std::vector<T> rows;  // one block of rows: MR x round_up(N, NR)
  std::vector<T> packed;  // the same rows MR x N, contiguous, for the epilogue
  std::vector<T> a;       // half A: one block of MR rows widened, MR x K
};

template <class T>
T* grow(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

// S: the operands' element type; a half S (f16/bf16, Note [Half operands of the small GEMM]) is
// widened into f32 buffers as the loops below reach it.
template <int DT, class S = ctype<DT>>
struct Small {
  using T = ctype<DT>;
  static constexpr bool kHalf = !std::is_same_v<S, T>;
  static constexpr bool kF16 = std::is_same_v<S, rvl::Float16>;
  const Contraction& c;
  const Evaluator& ep;
  int64_t M, N, K;
  gemm::SmallKernel<T> kern;
  bool direct = false;
  bool narrow = false;  // half output: rows rounded straight into it (the Note)

  Small(const Contraction& c_, const Evaluator& ep_) : c(c_), ep(ep_), M(c.m), N(c.n), K(c.k) {
    if constexpr (DT == RVL_DTYPE_F32) kern = gemm::select_small_f32();
    else kern = gemm::select_small_f64();
    const int br = c.batch_rank;
    const View& o = c.epilogue.out;
    direct = c.epilogue.n_ins == 1 && c.epilogue.ins[0].op == RVL_OP_ACC && o.dtype == DT &&
             o.stride[br + 1] == 1 && (M == 1 || o.stride[br] >= N) && o.data != c.a.data &&
             o.data != c.b.data;
    // A plain half product's epilogue is ACC then the CAST to the output's half (Note [Halves in
    // f32]): with contiguous output rows, each row is rounded into place with the vector
    // conversions instead of going through the evaluator.
    const rvl_instruction* I = c.epilogue.ins;
    narrow = kHalf && c.epilogue.n_ins == 2 && I[0].op == RVL_OP_ACC && I[1].op == RVL_OP_CAST && I[1].src[0] == 0 &&
             I[1].dtype == o.dtype && rvl::dtype_is_half(o.dtype) && o.stride[br + 1] == 1 &&
             (M == 1 || o.stride[br] >= N) && o.data != c.a.data && o.data != c.b.data;
  }

  void offsets(int64_t batch, int64_t& oa, int64_t& ob, int64_t& oc) const {
    gemm_batch_offsets(c, batch, oa, ob, oc);
  }

  void run(int64_t batches) {
    const int br = c.batch_rank;
    const int64_t MR = kern.mr, NR = kern.nr;
    const int64_t sam = c.a.stride[br], sak = c.a.stride[br + 1];
    const int64_t sbk = c.b.stride[br], sbn = c.b.stride[br + 1];
    const int64_t ldc = direct ? c.epilogue.out.stride[br] : 0;
    const int64_t npad = round_up(N, NR);
    // In place: full column tiles read from B itself; the rest from the padded panels.
    const bool in_place = !kHalf && (sbn == 1 || N < NR);
    const int64_t nfull = in_place ? N / NR * NR : npad;
    thread_local Buffers<T> W;
    T* const rows = grow(W.rows, MR * npad);
    T* const tail = nfull < npad ? grow(W.tail, K * NR) : nullptr;
    T* const bt = in_place ? nullptr : grow(W.b, K * npad);
    T* const packed = direct || npad == N ? nullptr : grow(W.packed, MR * N);
    T* const awide = kHalf ? grow(W.a, MR * K) : nullptr;  // MR rows of A, widened
    Scratch sc;
    if (!direct && !narrow) sc = ep.make_scratch();
    const S* A = reinterpret_cast<const S*>(c.a.data);
    const S* B = reinterpret_cast<const S*>(c.b.data);
    T* C = direct ? reinterpret_cast<T*>(c.epilogue.out.data) : nullptr;

    for (int64_t batch = 0; batch < batches; ++batch) {
      int64_t oa, ob, oc;
      offsets(batch, oa, ob, oc);
      const S* Ab = A + oa;
      const S* Bb = B + ob;
      const T* bfull = nullptr;
      int64_t ldb = sbk;
      if constexpr (!kHalf) bfull = Bb;
      if constexpr (kHalf) {
        // Widened into bt (k-major rows of npad, zero-padded): contiguous rows convert as runs.
        if (sbn == 1) {
          widen_rows(kF16, bt, npad, reinterpret_cast<const uint16_t*>(Bb), sbk, K, N, npad);
        } else {
          for (int64_t k = 0; k < K; ++k) {
            T* dst = bt + k * npad;
            for (int64_t n = 0; n < N; ++n) dst[n] = gemm::widen1(Bb[k * sbk + n * sbn]);
            std::fill(dst + N, dst + npad, T{});
          }
        }
        bfull = bt, ldb = npad;
      } else if (!in_place) {
        // Transpose into bt (k-major rows of npad); a stride-1 k is then read contiguously.
        for (int64_t n = 0; n < N; ++n) {
          const T* src = Bb + n * sbn;
          for (int64_t k = 0; k < K; ++k) bt[k * npad + n] = src[k * sbk];
        }
        for (int64_t k = 0; k < K; ++k) std::fill(bt + k * npad + N, bt + (k + 1) * npad, T{});
        bfull = bt, ldb = npad;
      } else if (tail) {
        const int64_t w = N - nfull;
        for (int64_t k = 0; k < K; ++k) {
          T* dst = tail + k * NR;
          for (int64_t j = 0; j < w; ++j) dst[j] = Bb[k * sbk + (nfull + j) * sbn];
          std::fill(dst + w, dst + NR, T{});
        }
      }
      for (int64_t m0 = 0; m0 < M; m0 += MR) {
        const int64_t h = std::min(MR, M - m0);
        const T* arow[16];
        int64_t ak = sak;
        if constexpr (kHalf) {
          // This block's MR rows widened into awide (MR x K, in L1), read with stride 1.
          // Rows past the edge repeat the last one (the kernel's rows there are dropped).
          if (sak == 1) widen_rows(kF16, awide, K, reinterpret_cast<const uint16_t*>(Ab + m0 * sam), sam, h, K, K);
          else
            for (int64_t i = 0; i < h; ++i)
              for (int64_t k = 0; k < K; ++k) awide[i * K + k] = gemm::widen1(Ab[(m0 + i) * sam + k * sak]);
          for (int64_t i = 0; i < MR; ++i) arow[i] = awide + std::min(i, h - 1) * K;
          ak = 1;
        } else {
          for (int64_t i = 0; i < MR; ++i) arow[i] = Ab + std::min(m0 + i, M - 1) * sam;
        }
        T* cdst = direct ? C + oc + m0 * ldc : nullptr;
        for (int64_t n0 = 0; n0 < npad; n0 += NR) {
          const bool full_cols = n0 < nfull;
          const T* bp = full_cols ? bfull + n0 : tail;
          const int64_t lb = full_cols ? ldb : NR;
          if (direct && h == MR && n0 + NR <= N) kern.fn(K, arow, ak, bp, lb, cdst + n0, ldc);
          else kern.fn(K, arow, ak, bp, lb, rows + n0, npad);
        }
        if (direct) {
          // What did not go straight to C: every column of a partial row block, else the
          // columns past the last full tile.
          const int64_t j0 = h == MR ? N / NR * NR : 0;
          if (j0 < N)
            for (int64_t i = 0; i < h; ++i)
              std::memcpy(cdst + i * ldc + j0, rows + i * npad + j0, (N - j0) * sizeof(T));
        } else if (narrow) {
          if constexpr (kHalf) {
            const View& o = c.epilogue.out;
            auto* out = reinterpret_cast<uint16_t*>(o.data) + oc + m0 * o.stride[br];
            for (int64_t i = 0; i < h; ++i, out += o.stride[br])
              o.dtype == RVL_DTYPE_F16 ? f32_to_f16(out, rows + i * npad, N) : f32_to_bf16(out, rows + i * npad, N);
          }
        } else {
          epilogue(batch, m0, m0 + h, rows, npad, packed, sc);
        }
      }
    }
  }

  // Note [Batched dot products]: N == 1.
  void run_dots(int64_t batches) {
    const int br = c.batch_rank;
    const int64_t sam = c.a.stride[br], sak = c.a.stride[br + 1], sbk = c.b.stride[br];
    const T* A = reinterpret_cast<const T*>(c.a.data);
    const T* B = reinterpret_cast<const T*>(c.b.data);
    thread_local std::vector<T> vals;
    const int64_t total = batches * M, chunk = ep.block();
    T* const v = grow(vals, std::min(total, chunk));
    Scratch sc = ep.make_scratch();
    int64_t batch = 0, m = 0, oa = 0, ob = 0, oc = 0;
    offsets(0, oa, ob, oc);
    for (int64_t s = 0; s < total; s += chunk) {
      const int64_t e = std::min(total, s + chunk);
      for (int64_t l = s; l < e; ++l) {
        v[l - s] = kern.dot(K, A + oa + m * sam, sak, B + ob, sbk);
        if (++m == M && l + 1 < total) m = 0, offsets(++batch, oa, ob, oc);
      }
      ep.store(s, e, ep.eval(s, e, sc, v), sc);
    }
  }

  // Epilogue over rows [m0, m1) of batch entry `batch`; acc holds row m0's N values, rows lda
  // apart. The rows are one linear range of the output space, evaluated block() elements at a
  // time (several rows per instruction loop, not one: 20-instruction epilogues such as tanh's
  // derivative cost 3x more per element row by row), so padded rows (lda > N) are first packed
  // into `packed` (MR x N).
  void epilogue(int64_t batch, int64_t m0, int64_t m1, const T* acc, int64_t lda, T* packed, Scratch& sc) const {
    const int64_t start = (batch * M + m0) * N, end = (batch * M + m1) * N;
    if (lda != N) {
      for (int64_t i = 0; i < m1 - m0; ++i) std::memcpy(packed + i * N, acc + i * lda, N * sizeof(T));
      acc = packed;
    }
    for (int64_t s = start; s < end; s += ep.block()) {
      const int64_t e = std::min(end, s + ep.block());
      ep.store(s, e, ep.eval(s, e, sc, acc + (s - start)), sc);
    }
  }
};

}  // namespace

bool gemm_small_fits(const Contraction& c) {
  int64_t batches = 1;
  for (int d = 0; d < c.batch_rank; ++d) batches *= c.batch_shape[d];
  if (batches == 0 || c.m == 0 || c.n == 0) return false;  // nothing to compute
  if (c.k == 0) return false;                               // zeros through the epilogue: blocked
  int64_t work = 0;  // batches x M x N x K, saturated (huge products are not small)
  if (__builtin_mul_overflow(batches, c.m, &work) || __builtin_mul_overflow(work, c.n, &work) ||
      __builtin_mul_overflow(work, c.k, &work))
    return false;
  if (work >= gemm_small_work() || gemm_blocked_parallel(work)) return false;
  // A buffered epilogue stores rows while later rows of A or B are still to be read: only when
  // the output is neither operand (the blocked path reads all of both first).
  const void* out = c.epilogue.out.data;
  return out != c.a.data && out != c.b.data;
}

template <int DT>
bool gemm_small(const Contraction& c, const Evaluator& ep) {
  int64_t batches = 1;
  for (int d = 0; d < c.batch_rank; ++d) batches *= c.batch_shape[d];
  if (batches == 0 || c.m == 0 || c.n == 0) return true;  // nothing to compute
  if (!gemm_small_fits(c)) return false;
  Small<DT> s(c, ep);
  if (c.n == 1) s.run_dots(batches);  // Note [Batched dot products]
  else s.run(batches);
  return true;
}

bool gemm_small_half(const Contraction& c, const Evaluator& ep) {
  int64_t batches = 1;
  for (int d = 0; d < c.batch_rank; ++d) batches *= c.batch_shape[d];
  if (batches == 0 || c.m == 0 || c.n == 0) return true;  // nothing to compute
  if (c.n == 1 || !gemm_small_fits(c)) return false;     // dots: the caller widens A and B first
  if (c.dtype == RVL_DTYPE_F16) Small<RVL_DTYPE_F32, rvl::Float16>(c, ep).run(batches);
  else Small<RVL_DTYPE_F32, rvl::BFloat16>(c, ep).run(batches);
  return true;
}

template bool gemm_small<RVL_DTYPE_F32>(const Contraction&, const Evaluator&);
template bool gemm_small<RVL_DTYPE_F64>(const Contraction&, const Evaluator&);

}  // namespace tbbcpu
