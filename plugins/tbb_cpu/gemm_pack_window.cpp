// Note [Packing from offset tables]
// A multi-axis operand has no single row or column stride, so the packers read it through
// offset tables built once per call: A's element (m, k) is at am[m] + ak[k], B's (k, n) at
// bk[k] + bn[n] (each table the sum of its group's index * stride terms, or i * stride for a
// 1.0-form axis). The tables are small (M + K + K + N entries: 64 + 288 + 288 + 25088 for the
// ResNet 3x3 forward) and turn any group into one gather per element. Where a sliver's columns
// are a stride-1 run of B (a convolution's output positions along ow, or whole rows of them
// at stride 1, Note [Wide rows]), the B sliver is copied row by row as from a row-major matrix;
// `run` holds each column's run length for that test. The blocks are then the micro-kernels of
// the float path (gemm_kernels.hpp), on tiles of C that each task accumulates privately over
// all of K before the epilogue runs over them, so no im2col matrix is ever written. Tiles:
// MC rows x NC columns of C, as many as the two cores need; K in panels of KC (the packed A and
// B panels stay in L2). Integer and bool dtypes take a plain triple loop over the same tables.
#include "gemm_pack_window.hpp"
#include "gemm_window_dot.hpp"
#include "gemm_window_rows.hpp"
#include "gemm_window_span.hpp"
#include "gemm_window_wgrad.hpp"
#include "tuning_env.hpp"
#include "short_copy.hpp"

#include "dtype_ops.hpp"
#include "gemm_blocked.hpp"
#include "gemm_kernels.hpp"

#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <memory>
#include <vector>

namespace tbbcpu {

std::vector<int64_t> window_offsets(const Contraction::Group& g, int set, int64_t extent, int64_t stride) {
  std::vector<int64_t> t(static_cast<size_t>(extent));
  if (g.rank == 0) {
    for (int64_t i = 0; i < extent; ++i) t[i] = static_cast<int64_t>(static_cast<uint64_t>(i) * static_cast<uint64_t>(stride));
    return t;
  }
  int64_t idx[RVL_MAX_RANK] = {};
  int64_t off = 0;
  for (int64_t i = 0; i < extent; ++i) {
    t[i] = off;
    for (int d = g.rank - 1; d >= 0; --d) {  // odometer step
      off += g.stride[set][d];
      if (++idx[d] < g.shape[d]) break;
      off -= g.stride[set][d] * g.shape[d];
      idx[d] = 0;
    }
  }
  return t;
}

namespace {

// run[i]: how many entries from i on step by exactly 1 (t[i + j] == t[i] + j).
std::vector<int64_t> window_runs(const std::vector<int64_t>& t) {
  std::vector<int64_t> run(t.size());
  for (size_t i = t.size(); i-- > 0;)
    run[i] = (i + 1 < t.size() && t[i + 1] == t[i] + 1) ? run[i + 1] + 1 : 1;
  return run;
}

struct WindowTables {
  std::vector<int64_t> am, ak, bk, bn, bn_run;
  WindowTables(const Contraction& c) {
    const int br = c.batch_rank;
    am = window_offsets(c.m_group, 0, c.m, c.a.stride[br]);
    ak = window_offsets(c.k_group, 0, c.k, c.a.stride[br + 1]);
    bk = window_offsets(c.k_group, 1, c.k, c.b.stride[br]);
    bn = window_offsets(c.n_group, 0, c.n, c.b.stride[br + 1]);
    bn_run = window_runs(bn);
  }
};

int64_t window_batches(const Contraction& c) {
  int64_t n = 1;
  for (int d = 0; d < c.batch_rank; ++d) n *= c.batch_shape[d];
  return n;
}

// RAVEL_TBB_WINDOW_ROWS=0 packs B as before (A/B of Note [B rows in place] in one binary).
bool rows_in_place() {
  static const bool on = tuning_choice("RAVEL_TBB_WINDOW_ROWS", "1", {"0", "1"}) == "1";
  return on;
}

constexpr int64_t kMaxRuns = 64;  // Note [Packing runs]: at most one run per column of a sliver

// A per-thread work buffer left uninitialised: each call packs every element of a sliver it
// reads (zero padding included) and the first k panel overwrites the C tile, so zero-filling
// them (2 MiB of B panel per thread and call as std::vector) was only a memset per call.
template <class T>
struct Uninitialised {
  std::unique_ptr<T[]> p;
  explicit Uninitialised(int64_t n) : p(n > 0 ? new T[static_cast<size_t>(n)] : nullptr) {}
  T* data() const { return p.get(); }
};

template <class T>
struct WindowLocal {
  Scratch sc;
  Uninitialised<T> pa, pb, ct;
  // Note [Packed A across batches]: which A block pa holds (A's batch offset, first row, rows).
  int64_t a_oa = -1, a_m0 = -1, a_mc = -1;
};

// Note [Split K for weight gradients]: a convolution's weight gradient is M x N = O x C*taps
// (64 x 288) summed over K = N*P (25088): one or two tiles of C, far fewer than the threads.
// There K is split into parts that the tasks sum into private tiles, added afterwards in part
// order (a fixed order: the result does not depend on the threads).
template <int DT>
void window_gemm_float(const Contraction& c, const Evaluator& ep, const WindowTables& t) {
  using T = ctype<DT>;
  gemm::Kernel<T> kern;
  if constexpr (DT == RVL_DTYPE_F32) kern = gemm::select_kernel_f32_for_shape(c.m, c.n);
  else kern = gemm::select_kernel_f64();
  // Note [B rows in place] (gemm_window_rows.cpp): B's runs, >= 12 columns on average, read by a
  // kernel over 8-row A slivers (so packed as the 8 x 32 tile's) where those waste <= 1/4 of M.
  gemm::RowsKernelFn rows = nullptr;
  if constexpr (DT == RVL_DTYPE_F32) {
    int64_t runs = 0;
    for (int64_t j = 0; j < c.n; j += t.bn_run[j]) ++runs;
    if (c.n >= 12 * runs && rows_in_place() && (c.m == 1 || 3 * ((c.m + 7) / 8 * 8) <= 4 * c.m)) {
      rows = c.m == 1 ? gemm::select_rows1_kernel_f32() : gemm::select_rows_kernel_f32();  // Note [One row in place]
      if (rows) kern = {8, 32, gemm::select_kernel_f32_for_shape(8, 32).fn};
      // Note [Vectors across runs and images] (gemm_window_span.cpp): full 16-lane vectors.
      if (rows && c.m != 1 && run_window_span(c, ep, {t.am, t.ak, t.bk, t.bn, t.bn_run})) return;
    }
  }
  const int64_t MR = kern.mr, NR = kern.nr, M = c.m, N = c.n, K = c.k;
  const int64_t batches = window_batches(c);
  auto round_up = [](int64_t x, int64_t r) { return (x + r - 1) / r * r; };
  const int64_t KC = std::min<int64_t>(256, round_up(std::max<int64_t>(K, 1), 8));
  const int64_t MC = std::min(round_up(M, MR), MR * 16);
  const int threads = std::max(1, tbb::this_task_arena::max_concurrency());
  const int64_t m_tiles = (M + MC - 1) / MC;
  const int64_t panels = (K + KC - 1) / KC;
  // Long K against a small C: whole rows of C per tile, K split (Note [Split K for weight gradients]).
  const bool long_k = panels >= 8 && batches * m_tiles * ((N + 64 * NR - 1) / (64 * NR)) < 2 * threads;
  int64_t NC;
  if (long_k) {
    NC = std::min(round_up(N, NR), 64 * NR);
  } else {  // enough tiles for every thread (x4) without making them thinner than 4 slivers
    NC = round_up(std::max<int64_t>(1, (N * m_tiles * batches + 4 * threads - 1) / (4 * threads)), NR);
    NC = std::clamp<int64_t>(NC, 4 * NR, 64 * NR);
  }
  const int64_t n_tiles = (N + NC - 1) / NC, tiles = batches * m_tiles * n_tiles;
  // Note [Packed A across batches]
  // A convolution's result is NCHW (Note [Leading axes as a broadcast batch] in the core): its
  // images are the contraction's batch, along which the weight A does not vary (stride 0). Each
  // image's tile of C then packed the same A again: 64 x 288 gathered per 14x14 image, 0.5 ms of
  // a 6 ms forward at 128x32x14x14 -> 64. Where A's packed rows for all of K fit in 256 KiB,
  // they are packed once per thread and block of rows and kept while the tiles that thread runs
  // read the same A block (same batch offset and rows); only a different block packs again.
  // (Not with K split into parts: each part packs its own panels.)
  const bool keep_a = !long_k && round_up(MC, MR) * round_up(std::max<int64_t>(K, 1), KC) * static_cast<int64_t>(sizeof(T)) <= (256 << 10);
  const int64_t a_elems = keep_a ? round_up(MC, MR) * round_up(std::max<int64_t>(K, 1), KC) : MC * KC;
  const int64_t parts = long_k ? std::clamp<int64_t>((4 * threads + tiles - 1) / tiles, 1, panels / 4) : 1;
  const int64_t ldc = round_up(NC, NR), tile_elems = round_up(MC, MR) * ldc;
  const T* A = reinterpret_cast<const T*>(c.a.data);
  const T* B = reinterpret_cast<const T*>(c.b.data);
  // Where the rows kernel runs, the epilogue only stores and C's rows are dense along N, the
  // kernel writes C itself (as gemm_blocked.cpp's `direct`): the tile and its copy into C (~1 ms
  // of memcpy in the CNN step, the forwards' and the input gradient's outputs) are skipped. Whole
  // 8-row slivers only (M % 8 == 0), since the kernel writes every row of one.
  T* direct = nullptr;
  int64_t direct_ld = 0;
  {
    const Program& e = c.epilogue;
    const View& o = e.out;
    const int br = c.batch_rank;
    if (rows && parts == 1 && K > 0 && (M % MR == 0 || M == 1) && e.n_ins == 1 && e.ins[0].op == RVL_OP_ACC && o.dtype == DT &&
        o.stride[br + 1] == 1 && (M == 1 || o.stride[br] >= N) && o.data != c.a.data && o.data != c.b.data) {
      direct = reinterpret_cast<T*>(o.data);
      direct_ld = o.stride[br];
    }
  }
  tbb::enumerable_thread_specific<WindowLocal<T>> locals([&] {
    return WindowLocal<T>{ep.make_scratch(), Uninitialised<T>(a_elems), Uninitialised<T>(rows ? 0 : NC * KC),
                          Uninitialised<T>(parts > 1 || direct ? 0 : tile_elems)};
  });
  std::vector<T> partial(parts > 1 ? static_cast<size_t>(tiles * parts * tile_elems) : 0);
  struct TileAt {
    int64_t batch, m0, n0, mc, nc;
  };
  auto tile_at = [&](int64_t tile) {
    const int64_t batch = tile / (m_tiles * n_tiles), rest = tile % (m_tiles * n_tiles);
    const int64_t m0 = (rest / n_tiles) * MC, n0 = (rest % n_tiles) * NC;
    return TileAt{batch, m0, n0, std::min(MC, M - m0), std::min(NC, N - n0)};
  };
  // C tile += A[m0.., k0..k1) @ B[k0..k1), n0..) into ct (row stride ldc), overwritten at k0.
  auto compute = [&](const TileAt& at, int64_t k0, int64_t k1, T* ct, WindowLocal<T>& L, int64_t ld_rows) {
    const int64_t mt = (at.mc + MR - 1) / MR, nt = (at.nc + NR - 1) / NR;
    int64_t oa, ob, oc;
    gemm_batch_offsets(c, at.batch, oa, ob, oc);
    const T* Ab = A + oa;
    const T* Bb = B + ob;
    if (k0 >= k1) std::fill(ct, ct + mt * MR * ldc, T{});
    const bool a_kept = keep_a && L.a_oa == oa && L.a_m0 == at.m0 && L.a_mc == at.mc;
    if (keep_a) L.a_oa = oa, L.a_m0 = at.m0, L.a_mc = at.mc;
    for (int64_t pc = k0; pc < k1; pc += KC) {
      const int64_t kc = std::min(KC, k1 - pc);
      // This panel's packed A: its own place in pa when A is kept, else pa's start.
      T* const pa = L.pa.data() + (keep_a ? pc * round_up(MC, MR) : 0);
      for (int64_t s = 0; s < mt && !a_kept; ++s) {  // A slivers: dst[k*MR + i]
        T* dst = pa + s * MR * kc;
        const int64_t h = std::min(MR, at.mc - s * MR);
        const int64_t* am = t.am.data() + at.m0 + s * MR;
        for (int64_t k = 0; k < kc; ++k, dst += MR) {
          const T* col = Ab + t.ak[pc + k];
          int64_t i = 0;
          for (; i < h; ++i) dst[i] = col[am[i]];
          for (; i < MR; ++i) dst[i] = T{};
        }
      }
      if constexpr (DT == RVL_DTYPE_F32) {
        if (rows) {  // Note [B rows in place]: runs of <= 16 columns straight from B, two at a time
          auto piece = [&](int64_t j) { return std::min<int64_t>({t.bn_run[at.n0 + j], at.nc - j, 16}); };
          for (int64_t j = 0; j < at.nc;) {
            const int64_t w0 = piece(j), j1 = j + w0, w1 = j1 < at.nc ? piece(j1) : 0;
            const T* b0 = Bb + t.bn[at.n0 + j];
            const T* b1 = w1 ? Bb + t.bn[at.n0 + j1] : b0;
            for (int64_t s = 0; s < mt; ++s) {
              T* cs = ct + s * MR * ld_rows;
              rows(kc, pa + s * MR * kc, b0, b1, t.bk.data() + pc, w0, w1, cs + j, cs + j1, ld_rows, pc > k0);
            }
            j = j1 + w1;
          }
          continue;
        }
      }
      for (int64_t q = 0; q < nt; ++q) {  // B slivers: dst[k*NR + j]
        T* const dst0 = L.pb.data() + q * NR * kc;
        T* dst = dst0;
        const int64_t j0 = at.n0 + q * NR, w = std::min(NR, at.nc - q * NR);
        const int64_t* bn = t.bn.data() + j0;
        if (t.bn_run[j0] >= w) {  // a stride-1 run: copy rows
          for (int64_t k = 0; k < kc; ++k, dst += NR) {
            const T* row = Bb + t.bk[pc + k] + bn[0];
            std::copy(row, row + w, dst);
            std::fill(dst + w, dst + NR, T{});
          }
        } else if (t.bn_run[j0] >= 4 && NR <= kMaxRuns) {
          // Note [Packing runs]: a sliver made of a few stride-1 runs (a convolution's output
          // rows, 14 or 28 long, against NR = 32) is copied run by run, the runs found once per
          // sliver rather than an offset looked up per element: per element, the gather below
          // cost about as much as the micro-kernel (the Fashion-MNIST CNN's input-gradient GEMM,
          // K = 288, M = 16: 5.7 ms, twice its forward's with as many multiply-adds).
          int64_t seg_at[kMaxRuns], seg_len[kMaxRuns], n_seg = 0;
          for (int64_t j = 0; j < w; j += seg_len[n_seg++]) {
            seg_at[n_seg] = j;
            seg_len[n_seg] = std::min(t.bn_run[j0 + j], w - j);
          }
          for (int64_t k = 0; k < kc; ++k, dst += NR) {
            const T* row = Bb + t.bk[pc + k];
            for (int64_t g = 0; g < n_seg; ++g) copy_run(dst + seg_at[g], row + bn[seg_at[g]], seg_len[g]);
            std::fill(dst + w, dst + NR, T{});
          }
        } else if (!(DT == RVL_DTYPE_F32 &&
                     gemm::gather_sliver_f32(reinterpret_cast<float*>(dst), reinterpret_cast<const float*>(Bb),
                                             t.bk.data() + pc, kc, bn, w, NR))) {
          // Note [Gathering B slivers] (gemm_kernels.cpp): a weight gradient's B (the input's
          // window, columns (c, kh, kw): runs of 3) is gathered a vector at a time on AVX-512.
          for (int64_t k = 0; k < kc; ++k, dst += NR) {
            const T* row = Bb + t.bk[pc + k];
            int64_t j = 0;
            for (; j < w; ++j) dst[j] = row[bn[j]];
            for (; j < NR; ++j) dst[j] = T{};
          }
        }
        // Note [Each B sliver while it is hot]: the sliver just packed (NR x kc, 32 KiB at most)
        // is multiplied by every A sliver now, from L1, rather than after the whole panel (NC x
        // kc: up to 2 MiB, this machine's L2) is packed and then streamed once per A sliver. Each
        // C element sees the same calls in the same k order: the result is unchanged, bit for bit.
        for (int64_t s = 0; s < mt; ++s)
          kern.fn(kc, pa + s * MR * kc, dst0, ct + s * MR * ldc + q * NR, ldc, pc > k0);
      }
    }
  };
  auto finish = [&](const TileAt& at, const T* ct, Scratch& sc) {  // epilogue, [batch.., M, N] linear
    for (int64_t m = 0; m < at.mc; ++m) {
      const int64_t start = (at.batch * M + at.m0 + m) * N + at.n0, end = start + at.nc;
      const T* acc = ct + m * ldc;
      for (int64_t s = start; s < end; s += ep.block()) {
        const int64_t e = std::min(end, s + ep.block());
        ep.store(s, e, ep.eval(s, e, sc, acc + (s - start)), sc);
      }
    }
  };
  const bool serial = tiles * parts == 1 || batches * M * N * std::max<int64_t>(K, 1) < (int64_t{1} << 20);
  auto for_tasks = [&](int64_t n, const auto& f) {
    if (serial) for (int64_t i = 0; i < n; ++i) f(i);
    else tbb::parallel_for(int64_t{0}, n, f);
  };
  if (parts == 1) {
    for_tasks(tiles, [&](int64_t tile) {
      WindowLocal<T>& L = locals.local();
      const TileAt at = tile_at(tile);
      if (direct) {  // straight into C: the tile's rows are C's (Note [B rows in place])
        int64_t oa, ob, oc;
        gemm_batch_offsets(c, at.batch, oa, ob, oc);
        compute(at, 0, K, direct + oc + at.m0 * direct_ld + at.n0, L, direct_ld);
        return;
      }
      compute(at, 0, K, L.ct.data(), L, ldc);
      finish(at, L.ct.data(), L.sc);
    });
    return;
  }
  const int64_t per_part = (panels + parts - 1) / parts * KC;
  for_tasks(tiles * parts, [&](int64_t task) {
    const int64_t tile = task / parts, part = task % parts;
    const int64_t k0 = std::min(K, part * per_part), k1 = std::min(K, k0 + per_part);
    compute(tile_at(tile), k0, k1, partial.data() + task * tile_elems, locals.local(), ldc);
  });
  for_tasks(tiles, [&](int64_t tile) {
    T* sum = partial.data() + tile * parts * tile_elems;
    for (int64_t p = 1; p < parts; ++p) {
      const T* add = sum + p * tile_elems;
      for (int64_t i = 0; i < tile_elems; ++i) sum[i] += add[i];
    }
    finish(tile_at(tile), sum, locals.local().sc);
  });
}

template <int DT>
void window_gemm_plain(const Contraction& c, const Evaluator& ep, const WindowTables& t) {
  using T = ctype<DT>;
  const int64_t M = c.m, N = c.n, K = c.k, batches = window_batches(c);
  const T* A = reinterpret_cast<const T*>(c.a.data);
  const T* B = reinterpret_cast<const T*>(c.b.data);
  Scratch sc = ep.make_scratch();
  std::vector<T> acc(static_cast<size_t>(N));
  for (int64_t b = 0; b < batches; ++b) {
    int64_t oa, ob, oc;
    gemm_batch_offsets(c, b, oa, ob, oc);
    for (int64_t m = 0; m < M; ++m) {
      std::fill(acc.begin(), acc.end(), T{});
      for (int64_t k = 0; k < K; ++k) {
        const T a = A[oa + t.am[m] + t.ak[k]];
        const T* row = B + ob + t.bk[k];
        for (int64_t n = 0; n < N; ++n) acc[n] = s_add<DT>(acc[n], s_mul<DT>(a, row[t.bn[n]]));
      }
      const int64_t start = (b * M + m) * N;
      for (int64_t s = start; s < start + N; s += ep.block()) {
        const int64_t e = std::min(start + N, s + ep.block());
        ep.store(s, e, ep.eval(s, e, sc, acc.data() + (s - start)), sc);
      }
    }
  }
}

}  // namespace

void run_window_contraction(const Contraction& c, const Evaluator& ep) {
  if (window_batches(c) == 0 || c.m == 0 || c.n == 0) return;
  if (run_window_dot(c, ep)) return;  // Note [Weight gradients as dot products over k runs]
  if (run_window_wgrad(c, ep)) return;  // Note [Weight gradients with B broadcast in place]
  const WindowTables t(c);
  dispatch_dtype(c.dtype, [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    if constexpr (is_float_v<DT>) window_gemm_float<DT>(c, ep, t);
    else window_gemm_plain<DT>(c, ep, t);
  });
}

}  // namespace tbbcpu
