// Note [Blocked GEMM]
// BLIS's loop order, per batch entry:
//   for jc in N step NC                      (B panel KC x NC: L3)
//     for pc in K step KC                    (KC: a B sliver KC x NR fills half of L1)
//       pack A[:, pc] and B[pc, jc] into slivers, shared by all threads    (parallel phase 1)
//       for each task (a block of A slivers x a block of B slivers)      (parallel phase 2)
//         for ic in the task's rows step MC  (A block MC x KC: half of L2)
//           for jr over the task's B slivers (B sliver stays in L1)
//             for ir over the A slivers of ic   micro-kernel MR x NR (gemm_kernels.hpp)
// KC and MC come from the L1d/L2 sizes the C library reports (sysconf, i.e. cpuid), per
// micro-kernel shape and element size; RAVEL_TBB_GEMM_KC/MC/NC override them (tuning).
// Each operand is packed once per panel (A once per NC block of columns, normally once), with
// contiguous writes and the source's strides absorbed by the packer (gemm_pack.hpp).
// Phase 2's tasks split the M x N slivers of a panel into equal blocks (rows first), at least
// four per thread, so both cores get the same work and a descheduled one is covered by the other.
//
// Where C goes: with no epilogue (a single ACC) and an output of the contraction's dtype whose
// rows are contiguous, the micro-kernel accumulates straight into the output (edge tiles through
// a small stack tile). Otherwise into an accumulation buffer of M x NC, and the task that
// finishes a block (last k-panel) runs the epilogue over its rows while they are in cache.
//
// Batches: many or small batch entries run one entry per task (serial GEMM inside, its own
// workspace); a few large ones run one after the other, each parallel as above.
// Workspaces (packed panels, accumulation buffer) come from a small pool and are kept across
// calls: a fresh one per call would be mapped and page-faulted every time (Note [Block cache]).
// A pool rather than thread_local: the calling thread holds its panels across parallel_for,
// where oneTBB may run another contraction's task on it.
#include "gemm_blocked.hpp"
#include "tuning_env.hpp"

#include "dtype_ops.hpp"
#include "gemm_bf16_dot.hpp"
#include "gemm_kernels.hpp"
#include "gemm_pack.hpp"
#include "parallel.hpp"

#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <type_traits>
#include <vector>

namespace tbbcpu {
namespace {

inline int64_t round_up(int64_t x, int64_t q) { return (x + q - 1) / q * q; }
inline int64_t ceil_div(int64_t x, int64_t q) { return (x + q - 1) / q; }

// A block-size override, 0 (unset) for the computed default; tuning_env.hpp says why bounded.
int64_t env_int(const char* name, int64_t hi) { return tuning_int(name, 0, 0, hi); }

// ---- block sizes ----------------------------------------------------------------------------
struct Blocking {
  bool a_resident;  // loop order: the A sliver stays in L1 (else the B sliver)
  int64_t kc;       // k-panel
  int64_t mc;       // B resident: A rows per L2 block (MC)
  int64_t ncb;      // A resident: B columns per L2 block
  int64_t nc;       // B panel columns (L3)
};

Blocking blocking(int64_t mr, int64_t nr, int64_t elem) {
  static const int64_t l1 = [] {
    const long v = sysconf(_SC_LEVEL1_DCACHE_SIZE);
    return std::clamp<int64_t>(v > 0 ? v : 32768, 16384, 1 << 20);
  }();
  static const int64_t l2 = [] {
    const long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return std::clamp<int64_t>(v > 0 ? v : 262144, 131072, 8 << 20);
  }();
  // Bounds far above any useful block (KC 512, MC 1024, NC 4096 by default) that keep the packed
  // panels' sizes and the index arithmetic well inside int64.
  static const int64_t kc_env = env_int("RAVEL_TBB_GEMM_KC", 16384), mc_env = env_int("RAVEL_TBB_GEMM_MC", 16384),
                       nc_env = env_int("RAVEL_TBB_GEMM_NC", 65536);
  static const int order_env = [] {
    const std::string v = tuning_choice("RAVEL_TBB_GEMM_ORDER", "", {"a", "b"});
    return v == "a" ? 1 : v == "b" ? 2 : 0;
  }();
  Blocking b;
  // The resident sliver fills half of L1 (the streamed slivers take the rest), so KC is as long
  // as it allows: a long KC amortises the C tile's load and store per micro-kernel call. The
  // AVX-512 tiles (12 x 32 f32, 12 x 16 f64: 24 zmm) are the large ones: there the 12-row A
  // sliver is the one kept (KC ~336 in 32 KiB instead of 128), as BLIS's skx kernels keep their
  // 12-wide side. The AVX2 6 x 16 tile keeps B (measured: either order is as fast here).
  b.a_resident = order_env ? order_env == 1 : mr * nr * elem >= 1536;
  const int64_t resident = (b.a_resident ? mr : nr) * elem;
  b.kc = kc_env > 0 ? kc_env : std::clamp<int64_t>(l1 / 2 / resident / 8 * 8, 64, 512);
  // The streamed side's block (A: MC x KC, or B: KC x NCB) in half of L2.
  b.mc = mc_env > 0 ? round_up(mc_env, mr)
                    : std::clamp<int64_t>(l2 / 2 / (b.kc * elem) / mr * mr, mr, 1024 / mr * mr);
  b.ncb = mc_env > 0 ? round_up(mc_env, nr)
                     : std::clamp<int64_t>(l2 / 2 / (b.kc * elem) / nr * nr, nr, 2048 / nr * nr);
  // The B panel (KC x NC) lives in L3: 4096 columns (4 MiB f32 at KC 256).
  b.nc = nc_env > 0 ? round_up(nc_env, nr) : round_up(4096, nr);
  return b;
}

// ---- workspace pool -------------------------------------------------------------------------
template <class T>
struct Buf {
  T* p = nullptr;
  int64_t n = 0;
  Buf() = default;
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  ~Buf() { std::free(p); }
  // 64-byte aligned (a cache line, an AVX-512 vector): full-width loads never straddle lines.
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

template <class T>
struct Workspace {
  Buf<T> pa, pb, cbuf;
};

template <class T>
class Pool {
 public:
  std::unique_ptr<Workspace<T>> get() {
    std::lock_guard<std::mutex> g(mu_);
    if (free_.empty()) return std::make_unique<Workspace<T>>();
    auto w = std::move(free_.back());
    free_.pop_back();
    return w;
  }
  void put(std::unique_ptr<Workspace<T>> w) {
    std::lock_guard<std::mutex> g(mu_);
    free_.push_back(std::move(w));
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<Workspace<T>>> free_;
};

template <class T>
struct Lease {
  static Pool<T>& pool() {
    static Pool<T>* p = new Pool<T>;  // never destroyed: workers may outlive static teardown
    return *p;
  }
  std::unique_ptr<Workspace<T>> w = pool().get();
  ~Lease() { pool().put(std::move(w)); }
};

// ---- packer dispatch ------------------------------------------------------------------------
// S: the operands' element type, T the packed (computing) one; a half S is widened while
// packing (Note [Half panels] in gemm_pack.hpp).
template <class T, class S>
using PackFn = void (*)(T*, const S*, int64_t, int64_t, int64_t, int64_t);
template <class T, class S>
using PackRowsFn = void (*)(T*, const S*, int64_t, int64_t, int64_t);

template <class T, class S, int R>
constexpr PackFn<T, S> pack_a_of() {
  if constexpr (std::is_same_v<T, S>) return &gemm::pack_a<T, R>;
  else return &gemm::pack_a_widened<R, S>;
}
template <class T, class S, int R>
constexpr PackFn<T, S> pack_b_of() {
  if constexpr (std::is_same_v<T, S>) return &gemm::pack_b<T, R>;
  else return &gemm::pack_b_widened<R, S>;
}
template <class T, class S, int R>
constexpr PackRowsFn<T, S> pack_b_rows_of() {
  if constexpr (std::is_same_v<T, S>) return &gemm::pack_b_rows<T, R>;
  else return &gemm::pack_b_rows_widened<R, S>;
}

template <class T, class S>
PackFn<T, S> packer_a(int mr) {
  switch (mr) {
    case 4: return pack_a_of<T, S, 4>();
    case 6: return pack_a_of<T, S, 6>();
    default: return pack_a_of<T, S, 12>();
  }
}
template <class T, class S>
PackRowsFn<T, S> packer_b_rows(int nr) {
  switch (nr) {
    case 4: return pack_b_rows_of<T, S, 4>();
    case 8: return pack_b_rows_of<T, S, 8>();
    case 16: return pack_b_rows_of<T, S, 16>();
    default: return pack_b_rows_of<T, S, 32>();
  }
}
template <class T, class S>
PackFn<T, S> packer_b(int nr) {
  switch (nr) {
    case 4: return pack_b_of<T, S, 4>();
    case 8: return pack_b_of<T, S, 8>();
    case 16: return pack_b_of<T, S, 16>();
    default: return pack_b_of<T, S, 32>();
  }
}

// Runs body(i) for i in [0, n): on this thread, or as oneTBB tasks of `grain` indices.
template <class Body>
void for_each(bool par, int64_t n, int64_t grain, const Body& body) {
  if (!par || n <= 1) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, std::max<int64_t>(grain, 1)),
                    [&](const tbb::blocked_range<int64_t>& r) {
                      for (int64_t i = r.begin(); i != r.end(); ++i) body(i);
                    },
                    tbb::simple_partitioner());
}

template <int DT, class S = ctype<DT>>
struct Gemm {
  using T = ctype<DT>;
  const Contraction& c;
  const Evaluator& ep;
  int64_t M, N, K, batches;
  gemm::Kernel<T> kern;
  PackFn<T, S> pack_a, pack_b;
  PackRowsFn<T, S> pack_b_rows;
  int64_t MR, NR;
  Blocking blk;
  const S* A;
  const S* B;
  int64_t sam, sak, sbk, sbn;
  bool direct;  // accumulate straight into the output
  T* C = nullptr;
  int64_t ldc = 0;
  tbb::enumerable_thread_specific<Scratch> scratch;

  Gemm(const Contraction& c_, const Evaluator& ep_)
      : c(c_), ep(ep_), scratch([this] { return ep.make_scratch(); }) {
    const int br = c.batch_rank;
    M = c.m, N = c.n, K = c.k;
    batches = 1;
    for (int d = 0; d < br; ++d) batches *= c.batch_shape[d];
    if constexpr (DT == RVL_DTYPE_F32) kern = gemm::select_kernel_f32();
    else kern = gemm::select_kernel_f64();
    MR = kern.mr, NR = kern.nr;
    pack_a = packer_a<T, S>(kern.mr);
    pack_b = packer_b<T, S>(kern.nr);
    pack_b_rows = packer_b_rows<T, S>(kern.nr);
    blk = blocking(MR, NR, sizeof(T));
    if constexpr (std::is_same_v<S, rvl::BFloat16>) {
      if (gemm::bf16_dot_chosen()) {  // Note [BF16 dot-product family]: bf16 pairs, not widened
        kern = gemm::select_kernel_bf16_dot();
        MR = kern.mr, NR = kern.nr;
        pack_a = &gemm::pack_a_pairs12;
        pack_b = &gemm::pack_b_pairs32;
        pack_b_rows = &gemm::pack_b_rows_pairs32;
        blk = blocking(MR, NR, 2);
      }
    }
    A = reinterpret_cast<const S*>(c.a.data);
    B = reinterpret_cast<const S*>(c.b.data);
    sam = c.a.stride[br], sak = c.a.stride[br + 1];
    sbk = c.b.stride[br], sbn = c.b.stride[br + 1];
    const Program& e = c.epilogue;
    const View& o = e.out;
    direct = e.n_ins == 1 && e.ins[0].op == RVL_OP_ACC && o.dtype == DT && o.stride[br + 1] == 1 &&
             (M == 1 || o.stride[br] >= N) && o.data != c.a.data && o.data != c.b.data;
    if (direct) {
      C = reinterpret_cast<T*>(o.data);
      ldc = o.stride[br];
    }
  }

  void offsets(int64_t batch, int64_t& oa, int64_t& ob, int64_t& oc) const {
    gemm_batch_offsets(c, batch, oa, ob, oc);
  }

  // Epilogue over rows [m0, m1) and columns [n0, n1) of batch entry `batch`; `acc` holds row m0's
  // values from column n0 on, rows `lda` apart.
  void epilogue(int64_t batch, int64_t m0, int64_t m1, int64_t n0, int64_t n1, const T* acc, int64_t lda) {
    Scratch& sc = scratch.local();
    for (int64_t m = m0; m < m1; ++m, acc += lda) {
      const int64_t start = (batch * M + m) * N + n0, end = start + (n1 - n0);
      for (int64_t s = start; s < end; s += ep.block()) {
        const int64_t e = std::min(end, s + ep.block());
        ep.store(s, e, ep.eval(s, e, sc, acc + (s - start)), sc);
      }
    }
  }

  // One batch entry, its phases parallel when `par`.
  void run_batch(int64_t batch, Workspace<T>& W, bool par) {
    int64_t oa, ob, oc;
    offsets(batch, oa, ob, oc);
    const S* Ab = A + oa;
    const S* Bb = B + ob;
    T* Cb = direct ? C + oc : nullptr;
    if (K == 0) {
      std::vector<T> zero(static_cast<size_t>(N), T{});
      for (int64_t m = 0; m < M; ++m) {
        if (direct) std::fill(Cb + m * ldc, Cb + m * ldc + N, T{});
        else epilogue(batch, m, m + 1, 0, N, zero.data(), 0);
      }
      return;
    }
    const int64_t NC = std::min(blk.nc, round_up(N, NR));
    const int64_t panels = ceil_div(K, blk.kc), KC = round_up(ceil_div(K, panels), 8);
    // Rows in chunks, so that the packed A panel and the accumulation buffer stay bounded
    // (~16 MiB) whatever M is; B is packed again per chunk, a small cost at that size.
    static const int64_t rows_env = env_int("RAVEL_TBB_GEMM_CHUNK_ROWS", int64_t{1} << 24);
    const int64_t per_row = static_cast<int64_t>(sizeof(T)) * (KC + (direct ? 0 : NC));
    const int64_t rows = rows_env > 0 ? round_up(rows_env, MR)
                                      : std::max<int64_t>(8 * blk.mc, ((int64_t{16} << 20) / per_row) / MR * MR);
    for (int64_t r0 = 0; r0 < M; r0 += rows)
      run_rows(batch, r0, std::min(rows, M - r0), Ab + r0 * sam, Bb, direct ? Cb + r0 * ldc : nullptr, NC, KC, W, par);
  }

  // Rows [r0, r0 + rows) of batch entry `batch` (A and C pointing at row r0).
  void run_rows(int64_t batch, int64_t r0, int64_t rows, const S* Ab, const S* Bb, T* Cb, int64_t NC, int64_t KC,
                Workspace<T>& W, bool par) {
    const int64_t mt = ceil_div(rows, MR);
    T* const pa = W.pa.reserve(mt * MR * KC);
    T* const pb = W.pb.reserve(NC * KC);
    const int64_t ldb = NC;  // accumulation buffer: mt*MR x NC
    T* const cbuf = direct ? nullptr : W.cbuf.reserve(mt * MR * ldb);
    const int threads = par ? std::max(1, tbb::this_task_arena::max_concurrency()) : 1;
    const int64_t mc_slivers = std::max<int64_t>(1, blk.mc / MR), nb_slivers = std::max<int64_t>(1, blk.ncb / NR);

    for (int64_t jc = 0; jc < N; jc += NC) {
      const int64_t nc = std::min(NC, N - jc), nt = ceil_div(nc, NR);
      // Tasks: mparts x nparts equal blocks of slivers, >= 4 per thread where the panel allows,
      // and ~16M multiply-adds each on large panels (up to 16 per thread): each panel ends with a
      // join, where one thread idles while the other finishes its last task.
      const int64_t want = threads == 1 ? 1
                                        : std::clamp<int64_t>(rows * nc * std::min(K, KC) >> 24, 4 * threads,
                                                              16 * threads);
      const int64_t mparts = std::min(mt, want), nparts = std::min(nt, ceil_div(want, mparts));
      for (int64_t pc = 0; pc < K; pc += KC) {
        const int64_t kc = std::min(KC, K - pc);
        const bool first = pc == 0, last = pc + kc >= K;
        auto pack_a_sliver = [&](int64_t s) {
          const int64_t m0 = s * MR;
          pack_a(pa + s * MR * kc, Ab + m0 * sam + pc * sak, sam, sak, std::min(MR, rows - m0), kc);
        };
        // Phase 1: pack B[pc.., jc..] (nt slivers), and A[:, pc..] (mt slivers) when several
        // tasks share rows; otherwise each task packs its own A rows just before using them
        // (BLIS's order: the packed block is then still in L2).
        const bool shared_a = nparts > 1;
        const int64_t a_slivers = shared_a ? mt : 0;
        // B in groups of up to 4 slivers (full ones of a row-major B go through pack_b_rows).
        const int64_t groups = ceil_div(nt, 4);
        // ~16K elements per task, and every thread gets a share (a B panel alone is few groups).
        const int64_t items = a_slivers + groups;
        const int64_t grain = std::clamp<int64_t>(16384 / (kc * std::max(MR, NR)), 1, ceil_div(items, threads));
        for_each(par, items, grain, [&](int64_t s) {
          if (s < a_slivers) {
            pack_a_sliver(s);
            return;
          }
          const int64_t s0 = (s - a_slivers) * 4, s1 = std::min(nt, s0 + 4);
          const int64_t full = sbn == 1 ? std::min(s1, nc / NR) : s0;
          if (full > s0)
            pack_b_rows(pb + s0 * NR * kc, Bb + pc * sbk + jc + s0 * NR, sbk, full - s0, kc);
          for (int64_t q = std::max(s0, full); q < s1; ++q) {
            const int64_t j0 = q * NR;
            pack_b(pb + q * NR * kc, Bb + pc * sbk + (jc + j0) * sbn, sbk, sbn, std::min(NR, nc - j0), kc);
          }
        });
        // Phase 2: the micro-kernels, then (last panel, buffered C) the epilogue.
        for_each(par, mparts * nparts, 1, [&](int64_t t) {
          const int64_t ip = t / nparts, jp = t % nparts;
          const int64_t ms0 = ip * mt / mparts, ms1 = (ip + 1) * mt / mparts;
          const int64_t ns0 = jp * nt / nparts, ns1 = (jp + 1) * nt / nparts;
          if (!shared_a)
            for (int64_t is = ms0; is < ms1; ++is) pack_a_sliver(is);
          // One micro-kernel call for sliver pair (is, js).
          auto tile = [&](int64_t is, int64_t js) {
            const T* a = pa + is * MR * kc;
            const T* b = pb + js * NR * kc;
            if (!direct) {
              kern.fn(kc, a, b, cbuf + is * MR * ldb + js * NR, ldb, !first);
              return;
            }
            const int64_t m0 = is * MR, n0 = jc + js * NR;
            T* dst = Cb + m0 * ldc + n0;
            const int64_t h = std::min(MR, rows - m0), w = std::min(NR, N - n0);
            if (h == MR && w == NR) {
              kern.fn(kc, a, b, dst, ldc, !first);
              return;
            }
            alignas(64) T tmp[12 * 32];  // edge tile: MR x NR <= 12 x 32
            kern.fn(kc, a, b, tmp, NR, false);
            for (int64_t i = 0; i < h; ++i)
              for (int64_t j = 0; j < w; ++j)
                dst[i * ldc + j] = first ? tmp[i * NR + j] : dst[i * ldc + j] + tmp[i * NR + j];
          };
          // The task's streamed side in equal L2-sized blocks (no short last block); inside one,
          // the resident sliver is the outer loop.
          if (!blk.a_resident) {
            const int64_t blocks = ceil_div(ms1 - ms0, mc_slivers);
            for (int64_t q = 0; q < blocks; ++q) {
              const int64_t is0 = ms0 + q * (ms1 - ms0) / blocks, is1 = ms0 + (q + 1) * (ms1 - ms0) / blocks;
              for (int64_t js = ns0; js < ns1; ++js)
                for (int64_t is = is0; is < is1; ++is) tile(is, js);
            }
          } else {
            const int64_t blocks = ceil_div(ns1 - ns0, nb_slivers);
            for (int64_t q = 0; q < blocks; ++q) {
              const int64_t js0 = ns0 + q * (ns1 - ns0) / blocks, js1 = ns0 + (q + 1) * (ns1 - ns0) / blocks;
              for (int64_t is = ms0; is < ms1; ++is)
                for (int64_t js = js0; js < js1; ++js) tile(is, js);
            }
          }
          if (!direct && last) {
            const int64_t m0 = ms0 * MR, m1 = std::min(rows, ms1 * MR);
            const int64_t n0 = ns0 * NR, n1 = std::min(nc, ns1 * NR);
            if (m0 < m1 && n0 < n1)
              epilogue(batch, r0 + m0, r0 + m1, jc + n0, jc + n1, cbuf + m0 * ldb + n0, ldb);
          }
        });
      }
    }
  }

  void run() {
    if (batches == 0 || M == 0 || N == 0) return;
    const int64_t per_batch = M * N * std::max<int64_t>(K, 1);
    const int64_t work = batches * per_batch;
    const bool par = gemm_blocked_parallel(work);
    const int threads = par ? std::max(1, tbb::this_task_arena::max_concurrency()) : 1;
    // Batch entries as tasks when there are enough of them, or each is too small to split well
    // (two parallel phases per k-panel cost a few microseconds each).
    if (par && batches > 1 && (batches >= 2 * threads || per_batch < (int64_t{1} << 21))) {
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, batches, 1), [&](const tbb::blocked_range<int64_t>& r) {
        Lease<T> lease;
        for (int64_t b = r.begin(); b != r.end(); ++b) run_batch(b, *lease.w, false);
      });
      return;
    }
    Lease<T> lease;
    for (int64_t b = 0; b < batches; ++b) run_batch(b, *lease.w, par);
  }
};

}  // namespace

bool gemm_blocked_parallel(int64_t work) {
  // Note [Inline small kernels], with a floor of its own: below ~1M multiply-adds (~13 us on
  // one core) the two parallel phases per k-panel cost more than the second core saves
  // (measured on the makemore shapes, 64x30 @ 30x200 and 64x200 @ 200x27, and their transposes).
  // RAVEL_TBB_GEMM_SERIAL_WORK overrides the floor (tests set 0 to run small shapes in parallel).
  static const int64_t floor = tuning_int("RAVEL_TBB_GEMM_SERIAL_WORK", int64_t{1} << 20, 0, int64_t{1} << 62);
  return !run_inline(work) && work >= floor;
}

template <int DT>
void gemm_blocked(const Contraction& c, const Evaluator& ep) {
  Gemm<DT> g(c, ep);
  g.run();
}

void gemm_blocked_half(const Contraction& c, const Evaluator& ep) {
  if (c.dtype == RVL_DTYPE_F16) {
    Gemm<RVL_DTYPE_F32, rvl::Float16> g(c, ep);
    g.run();
  } else {
    Gemm<RVL_DTYPE_F32, rvl::BFloat16> g(c, ep);
    g.run();
  }
}

template void gemm_blocked<RVL_DTYPE_F32>(const Contraction&, const Evaluator&);
template void gemm_blocked<RVL_DTYPE_F64>(const Contraction&, const Evaluator&);

}  // namespace tbbcpu
