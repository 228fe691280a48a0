// Evaluator: geometry normalisation, per-block instruction evaluation, strided loads/stores.
#include "evaluator.hpp"
#include "short_copy.hpp"
#include "tuning_env.hpp"

#include "array_ops.hpp"
#include "dtype_ops.hpp"
#include "fused_loop.hpp"
#include "half_fused.hpp"
#include "register_chain.hpp"
#include "slot_plan.hpp"

#include <ravel/backend.hpp>
#include <ravel/lowering/space.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>
#include <type_traits>

namespace tbbcpu {
namespace {

// Elements per block: large blocks amortise the per-instruction dispatch; the scratch slots
// (n_slots * block * 8 bytes, Note [Slot plan]) should stay cache-sized, so programs with many
// live values use shorter blocks. RAVEL_TBB_BLOCK_SLOTS overrides the bound on n_slots * block
// (tuning).
// Note [Shorter blocks for elementwise kernels]: a plain elementwise kernel (no reduction, no
// ACC: not an epilogue; not a row chain's part, Order::Linear) starts from 512 elements,
// everything else from 1024. Measured on this session's AVX-512 VM, three interleaved rounds
// each (docs/performance.md, "The evaluator against the limit"): 512 made `exp(a)*b+c` 4-9% and
// its bf16 and f16 forms 12-17% faster (the half prefetch, Note [Prefetching half inputs], is
// one block ahead: a shorter block keeps it nearer), the makemore and MLP steps level; but made
// sums over either axis 6-18% slower, softmax a little slower and layer norm's chain level to
// 4% slower, hence only here.
// RAVEL_TBB_ELEMENTWISE_BLOCK overrides the start (tuning; powers of two from 64 to 4096).
// Such a kernel that runs as a fused loop starts from kFusedBlock instead (Note [Fused loops in
// the evaluator]: measured 10.3-10.5 ms against 11.1-11.5 ms at 512 for `exp(a)*b+c` 16M).
constexpr int64_t kFusedBlock = 4096;
int64_t choose_block(int32_t n_slots, bool plain_elementwise, int64_t first) {
  static const int64_t bound = [] {
    const int64_t x = tuning_int("RAVEL_TBB_BLOCK_SLOTS", 0, 0, int64_t{1} << 30);
    return x > 0 ? x : int64_t{1} << 16;
  }();
  static const int64_t elementwise_start = [] {
    const int64_t x = tuning_int("RAVEL_TBB_ELEMENTWISE_BLOCK", 512, 64, 4096);
    int64_t b = 64;
    while (b * 2 <= x) b *= 2;
    return b;
  }();
  int64_t b = first > 0 ? first : plain_elementwise ? elementwise_start : 1024;
  while (b > 64 && b * n_slots > bound) b /= 2;
  return b;
}

// Address arithmetic is done in uint64 (wrapping, never UB); validation guarantees that the
// final address of every valid element is in [0, elements), so the wrapped result is exact.
inline uint64_t term(int64_t i, int64_t stride) {
  return static_cast<uint64_t>(i) * static_cast<uint64_t>(stride);
}
inline uint64_t magnitude(int64_t x) {
  return x < 0 ? -static_cast<uint64_t>(x) : static_cast<uint64_t>(x);
}

template <class T>
const void* load_typed(const View& v, const std::vector<Segment>& segs, int rank, T* dst) {
  const int in = rank - 1;
  // Zero-copy fast path: one fully valid unit-stride segment is read straight from the buffer.
  if (segs.size() == 1 && !v.empty && v.stride[in] == 1) {
    const Segment& g = segs[0];
    bool ok = g.idx[in] >= v.lo[in] && g.idx[in] + g.len <= v.hi[in];
    uint64_t base = static_cast<uint64_t>(v.offset);
    for (int d = 0; d < in && ok; ++d) {
      ok = g.idx[d] >= v.lo[d] && g.idx[d] < v.hi[d];
      base += term(g.idx[d], v.stride[d]);
    }
    if (ok) return reinterpret_cast<const T*>(v.data) + static_cast<int64_t>(base + g.idx[in]);
  }
  const T* src = reinterpret_cast<const T*>(v.data);
  for (const Segment& g : segs) {
    T* out = dst + g.pos;
    bool ok = !v.empty;
    uint64_t base = static_cast<uint64_t>(v.offset);
    for (int d = 0; d < in && ok; ++d) {
      ok = g.idx[d] >= v.lo[d] && g.idx[d] < v.hi[d];
      base += term(g.idx[d], v.stride[d]);
    }
    const int64_t i0 = g.idx[in];
    const int64_t a = ok ? std::max(i0, v.lo[in]) : i0;
    const int64_t b = ok ? std::min(i0 + g.len, v.hi[in]) : i0;
    if (a >= b) {  // nothing valid in this segment
      std::fill(out, out + g.len, T{});
      continue;
    }
    std::fill(out, out + (a - i0), T{});
    std::fill(out + (b - i0), out + g.len, T{});
    const int64_t s = v.stride[in];
    if (s == 1) {
      copy_run(out + (a - i0), src + static_cast<int64_t>(base + a), b - a);  // Note [Short copies inline]
    } else if (s == 0) {  // broadcast along the row (softmax's max and sum): one value
      std::fill(out + (a - i0), out + (b - i0), src[static_cast<int64_t>(base)]);
    } else {
      for (int64_t i = a; i < b; ++i) out[i - i0] = src[static_cast<int64_t>(base + term(i, s))];
    }
  }
  return dst;
}

// A tile (rows consecutive indices along axis a from first.idx, first.len along the innermost
// axis) of a view that walks a faster than the innermost axis: read along a in the inner loop so
// each cache line is read once, writing the block transposed (it is small and stays in L1).
// Power-of-two strides would otherwise map a segment's reads to one cache set. Returns false
// (caller falls back to load_typed) unless the whole tile is valid.
template <class T>
bool load_tile(const View& v, const Segment& first, int a, int64_t rows, int rank, T* dst) {
  const int in = rank - 1;
  if (v.empty) return false;
  uint64_t base = static_cast<uint64_t>(v.offset);
  for (int d = 0; d <= in; ++d) {
    const int64_t lo = first.idx[d];
    const int64_t hi = lo + (d == a ? rows : d == in ? first.len : 1);
    if (lo < v.lo[d] || hi > v.hi[d]) return false;
    base += term(lo, v.stride[d]);
  }
  const T* src = reinterpret_cast<const T*>(v.data);
  const int64_t sa = v.stride[a], si = v.stride[in], len = first.len;
  for (int64_t j = 0; j < len; ++j) {
    const uint64_t row = base + term(j, si);
    for (int64_t i = 0; i < rows; ++i)
      dst[i * len + j] = src[static_cast<int64_t>(row + term(i, sa))];
  }
  return true;
}

template <class T>
const void* load_any(const View& v, const Scratch& sc, int a, bool gather, int rank, T* dst) {
  if (gather && sc.tile_rows > 0 && load_tile(v, sc.segs()[0], a, sc.tile_rows, rank, dst))
    return dst;
  return load_typed(v, sc.segs(), rank, dst);
}

template <class T>
void store_typed(const View& v, const std::vector<Segment>& segs, int rank, const T* values) {
  const int in = rank - 1;
  T* dst = reinterpret_cast<T*>(v.data);
  for (const Segment& g : segs) {
    uint64_t base = static_cast<uint64_t>(v.offset);
    for (int d = 0; d < in; ++d) base += term(g.idx[d], v.stride[d]);
    const T* src = values + g.pos;
    const int64_t i0 = g.idx[in];
    const int64_t s = v.stride[in];
    if (s == 1) {
      // The values may be a zero-copy view of the very same memory (in-place copy).
      copy_run_maybe_overlapping(dst + static_cast<int64_t>(base + i0), src, g.len);
    } else {
      for (int64_t i = 0; i < g.len; ++i)
        dst[static_cast<int64_t>(base + term(i0 + i, s))] = src[i];
    }
  }
}

// Note [Scratch pool]: this thread's idle ScratchMem. A Scratch destroyed after the pool (at
// thread exit) frees its storage instead; pool_gone is trivially destructible, so it can still be
// read then.
constexpr size_t kPoolMax = 16;
thread_local bool pool_gone = false;
struct Pool {
  std::vector<std::unique_ptr<ScratchMem>> idle;
  ~Pool() { pool_gone = true; }
};
thread_local Pool pool;

}  // namespace

void Scratch::acquire(size_t n_slots, size_t n_result) {
  if (!mem) {
    if (!pool_gone && !pool.idle.empty()) {
      mem = std::move(pool.idle.back());
      pool.idle.pop_back();
    } else {
      mem = std::make_unique<ScratchMem>();
    }
  }
  // Grow only (a resize that shrank and grew again would zero-fill the regrown part each time).
  if (mem->slots.size() < n_slots) mem->slots.resize(n_slots);
  if (mem->result.size() < n_result) mem->result.resize(n_result);
  slots = mem->slots.data();
  result = mem->result.data();
  segs_ = &mem->segs;
}

Scratch::~Scratch() {
  if (!mem) return;
  if (!pool_gone && pool.idle.size() < kPoolMax) {
    mem->segs.clear();
    try {
      pool.idle.push_back(std::move(mem));
    } catch (...) {  // no room in the pool: the storage is simply freed
    }
  }
}

Scratch& Scratch::operator=(Scratch&& o) noexcept {
  if (this != &o) {
    Scratch dead(std::move(*this));  // gives this one's storage back to the pool
    slots = o.slots;
    result = o.result;
    segs_ = o.segs_;
    tile_rows = o.tile_rows;
    mem = std::move(o.mem);
    o.slots = nullptr, o.result = nullptr, o.segs_ = nullptr;
  }
  return *this;
}

Scratch::Scratch(const Scratch& o) : tile_rows(o.tile_rows) {
  if (!o.mem) return;
  acquire(o.mem->slots.size(), o.mem->result.size());
  mem->slots = o.mem->slots;
  mem->result = o.mem->result;
  mem->segs = o.mem->segs;
  mem->aux = o.mem->aux;
  slots = mem->slots.data();
  result = mem->result.data();
}

Evaluator::Evaluator(const Program& p, Order order, int64_t first_block)
    : out_(p.out), ins_(p.ins), n_ins_(p.n_ins), reduce_op_(p.reduce_op) {
  n_in_ = static_cast<int32_t>(p.inputs.size());
  View* views[RVL_MAX_INPUTS + 1];
  int n_views = 0;
  for (int i = 0; i < n_in_; ++i) views[n_views++] = new (&in_[i]) View(p.inputs[i]);
  views[n_views++] = &out_;

  // 0. Reduced axes already outermost (ignoring extent-1 axes)? Then keep the given order.
  //    Zero extents are left to the ordinary path (which writes identities).
  const auto reduced = [&](int d) { return ((p.reduce_axes >> d) & 1u) != 0; };
  if (p.reduce_op != RVL_REDUCE_NONE) {
    bool any_red = false, any_kept = false, ok = true;
    for (int d = 0; d < p.rank; ++d) {
      if (p.shape[d] == 0) ok = false;
      if (p.shape[d] <= 1) continue;
      if (reduced(d)) ok = ok && !any_kept, any_red = true;
      else any_kept = true;
    }
    reduced_outer_ = ok && any_red && any_kept;
  }
  // 1-3. The shared simplification (Ravel::lowering, Note [Space simplification], run in place
  //    without allocating): extent-1 axes dropped, dense neighbours of one kind merged, reduced
  //    axes innermost (kept first) or, when reduced_outer_, left outermost in the given order.
  const rvl::lower::FlatSpace flat = rvl::lower::simplify_in_place(
      p.rank, p.shape, p.reduce_axes, views, static_cast<size_t>(n_views),
      reduced_outer_ ? rvl::lower::Order::Original : rvl::lower::Order::KeptFirst);
  rank_ = flat.rank;
  split_ = 0;
  for (int d = 0; d < rank_; ++d) {
    shape_[d] = flat.extent[d];
    if (split_ == d && flat.reduced[d] == reduced_outer_) ++split_;
  }
  // 4. Rank 0 becomes one axis of extent 1 so every loop can assume rank >= 1.
  if (rank_ == 0) {
    rank_ = 1;
    shape_[0] = 1;
    for (View* v : std::span(views, n_views)) v->stride[0] = 0, v->lo[0] = 0, v->hi[0] = v->empty ? 0 : 1;
  }
  move_short_innermost_axis(p, views, n_views, order);
  outputs_ = 1;
  reduced_ = 1;
  for (int d = 0; d < rank_; ++d)
    ((d < split_) != reduced_outer_ ? outputs_ : reduced_) *= shape_[d];
  total_ = outputs_ * reduced_;
  n_slots_ = plan_slots(ins_, n_ins_, slot_, const_owner_);
  bool reads_acc = false;
  for (int j = 0; j < n_ins_ && !reads_acc; ++j) reads_acc = ins_[j].op == RVL_OP_ACC;
  const bool plain = reduce_op_ == RVL_REDUCE_NONE && !reads_acc && p.n_epilogue == 0 && order == Order::Any;
  block_ = choose_block(n_slots_, plain, first_block);
  if (reduce_op_ == RVL_REDUCE_NONE) choose_tiling(views, n_views);
  // Note [Fused loops in the evaluator]: a plain elementwise kernel that runs as a fused loop
  // writes no slot per instruction, so its blocks are longer (fewer per-block costs).
  // Small kernels keep the passes (fused_loop_min_elements).
  // Half programs (Note [Half programs as one fused loop], half_chunk.hpp): plain elementwise
  // ones and epilogues, not reductions nor a row chain's parts.
  const bool halves = half_fused_loop_enabled() && reduce_op_ == RVL_REDUCE_NONE && order != Order::Linear;
  bool fits = total_ >= fused_loop_min_elements() && fused_loop_enabled() && fused_loop_fits(ins_, n_ins_, halves);
  bool half_program = false, f16 = false, chain_ops = true;
  for (int j = 0; j < n_ins_ && fits; ++j) {
    const rvl_instruction& I = ins_[j];
    fits = I.op != RVL_OP_LOAD || in_[I.arg].dtype == I.dtype;
    half_program = half_program || I.dtype != RVL_DTYPE_F32;
    f16 = f16 || I.dtype == RVL_DTYPE_F16;
    if (I.dtype == RVL_DTYPE_F32 && I.op != RVL_OP_CAST && rvl::op_is_arithmetic(I.op)) chain_ops = chain_ops && chain_op(I.op);
  }
  // A bf16 program of ADD/MUL/NEG/RECIP (`a * b + c`) keeps its folded passes (Note [Casts folded
  // into their readers]): its f32 twin is a register chain, which halves do not have, and the
  // passes measured 5-8% faster than the 6-step chunk loop (docs/performance.md §11, decision 83).
  if (half_program && !f16 && chain_ops) fits = false;
  if (fits && plain && tile_axis_ < 0 && first_block == 0) block_ = choose_block(n_slots_, false, kFusedBlock);
  // A small kernel is one short block: its scratch (and CONST fills) shrink to it. The
  // blocks a reduction folds are the same either way (one block holds every output's range).
  // Dense inputs: linear element i is at offset + i (row-major, unit stride, fully valid).
  for (int i = 0; i < n_in_; ++i) {
    const View& v = in_[i];
    bool ok = !v.empty && v.stride[rank_ - 1] == 1;
    for (int d = 0; d < rank_ && ok; ++d) {
      ok = v.lo[d] == 0 && v.hi[d] == shape_[d];
      if (d + 1 < rank_) ok = ok && v.stride[d] == v.stride[d + 1] * shape_[d + 1];
    }
    dense_[i] = ok;
  }
  single_dense_load_ = n_ins_ == 1 && ins_[0].op == RVL_OP_LOAD && dense_[ins_[0].arg] &&
                      in_[ins_[0].arg].dtype != RVL_DTYPE_BOOL;
  {
    const View& v = out_;
    bool ok = !v.empty && v.data != nullptr && v.stride[rank_ - 1] == 1;
    for (int d = 0; d + 1 < rank_ && ok; ++d) ok = v.stride[d] == v.stride[d + 1] * shape_[d + 1];
    out_dense_ = ok && reduce_op_ == RVL_REDUCE_NONE;  // output views are fully valid
  }
  find_row_invariant_loads();
  // The array loop of each computed instruction, looked up once here rather than per block.
  for (int j = 0; j < std::min<int32_t>(n_ins_, kFnCache); ++j) {
    const rvl_instruction& I = ins_[j];
    const bool computed = rvl::op_is_arithmetic(I.op) && I.op != RVL_OP_CAST;
    fn_[j] = computed ? array_kernel(I.op, ins_[I.src[rvl::op_info(I.op).accepts == rvl::OpAccepts::Select]].dtype)
                      : nullptr;
  }
  plan_half_folds();
  // A half program keeps its folds for the blocks compute_fused leaves to the passes.
  fused_ = fits && (half_program || !half_folds_) && tile_axis_ < 0;
  if (reduce_op_ == RVL_REDUCE_SUM || reduce_op_ == RVL_REDUCE_MAX || reduce_op_ == RVL_REDUCE_PROD) {
    const rvl_instruction& L = ins_[n_ins_ - 1];  // Note [Widening in the fold]
    if (out_.dtype == RVL_DTYPE_F32 && L.op == RVL_OP_CAST && L.dtype == RVL_DTYPE_F32 &&
        rvl::dtype_is_half(ins_[L.src[0]].dtype) && !fused_)
      fold_half_ = ins_[L.src[0]].dtype;
  }
  // Note [Fused loops]: short chunks for kernels streaming from memory, long ones for a row
  // chain's sweeps over rows in cache (RAVEL_TBB_FUSED_CHUNK: tuning, 32, 64 or 128).
  static const int64_t chunk_env = tuning_int("RAVEL_TBB_FUSED_CHUNK", 0, 0, 128);
  // Half programs (Note [Half programs as one fused loop]): 128, measured faster than 32 there.
  fused_chunk_ = chunk_env > 0 ? chunk_env : fused_ && half_program ? 128 : plain ? 32 : order == Order::Linear ? 128 : 64;
  if (tile_axis_ < 0) block_ = std::max<int64_t>(1, std::min(block_, (total_ + 15) / 16 * 16));
  if (reduce_op_ == RVL_REDUCE_NONE) {
    const rvl_instruction& last = ins_[n_ins_ - 1];
    direct_ok_ = last.op != RVL_OP_LOAD && last.op != RVL_OP_ACC && last.op != RVL_OP_CONST &&
                 !out_.empty && out_.data != nullptr;
    for (int i = 0; i < n_in_ && direct_ok_; ++i) direct_ok_ = in_[i].data != out_.data;
  }
}

// Note [Short innermost axes]
// The evaluator runs the innermost axis as rows: one segment, one offset computation and one
// copy per row and input. A row of 2 (a 2x2 pooling window's phase axis, with the values
// broadcast along it) made a kernel 30-50x slower than the same values over long rows
// (docs/performance.md §7), and composites worked around it (max pooling's gradient routed
// through a 0/1 GEMM to interleave its phases). An elementwise program may visit its elements in
// any order, so when the innermost axis is short (<= kShortRow) the nearest outer axis that is
// longer becomes the innermost one: [.., 14, 2, 14, 2] runs as rows of 14, with the output
// written at stride 2 (the nearest, not the longest: an outer axis such as the channels would
// turn every row into a gather across planes). Not for reductions (the reduced axes' order is the plan) nor
// for programs reading ACC (a contraction's or row epilogue: their elements are visited in the
// GEMM's or the row's linear order), nor for a caller that folds eval()'s values itself
// (Order::Linear: a row chain's parts).
void Evaluator::move_short_innermost_axis(const Program& p, View* const* views, int n_views, Order order) {
  constexpr int64_t kShortRow = 4;
  if (order == Order::Linear || p.reduce_op != RVL_REDUCE_NONE || p.n_epilogue > 0 || rank_ < 2 || shape_[rank_ - 1] > kShortRow) return;
  for (int j = 0; j < n_ins_; ++j)
    if (ins_[j].op == RVL_OP_ACC) return;
  int d = rank_ - 2;
  while (d >= 0 && shape_[d] <= kShortRow) --d;
  if (d < 0) return;
  interleaved_ = d == rank_ - 2;  // one short axis moved: Note [Interleaved rows] may run it
  auto rotate = [&](int64_t* a) {
    const int64_t moved = a[d];
    for (int i = d; i + 1 < rank_; ++i) a[i] = a[i + 1];
    a[rank_ - 1] = moved;
  };
  rotate(shape_);
  for (View* v : std::span(views, n_views)) {
    rotate(v->stride);
    rotate(v->lo);
    rotate(v->hi);
  }
}

void Evaluator::find_row_invariant_loads() {
  for (int j = 0; j < n_ins_; ++j) inv_[j] = -1;
  if (reduce_op_ != RVL_REDUCE_NONE || tile_axis_ >= 0 || rank_ < 2 || total_ == 0) return;
  const int in = rank_ - 1;
  for (int j = 0; j < n_ins_; ++j) {
    if (ins_[j].op != RVL_OP_LOAD) continue;
    const View& v = in_[ins_[j].arg];
    bool ok = !v.empty && v.data != nullptr && v.dtype != RVL_DTYPE_BOOL && v.data != out_.data;
    for (int d = 0; d <= in && ok; ++d)
      ok = (d == in || v.stride[d] == 0) && v.lo[d] == 0 && v.hi[d] == shape_[d];
    if (!ok) continue;
    int k = 0;  // the same input loaded twice shares one slot
    for (; k < j; ++k)
      if (inv_[k] >= 0 && ins_[k].arg == ins_[j].arg) break;
    inv_[j] = k < j ? inv_[k] : static_cast<int16_t>(n_inv_++);
  }
  bool any_per_row = false;
  if (rank_ == 2) {
    for (int i = 0; i < n_in_; ++i) {
      const View& v = in_[i];
      per_row_[i] = !v.empty && v.data != nullptr && v.stride[1] == 0 && v.lo[0] == 0 &&
                    v.hi[0] == shape_[0] && v.lo[1] == 0 && v.hi[1] == shape_[1];
      any_per_row = any_per_row || per_row_[i];
    }
  }
  any_per_row_ = any_per_row;
  if ((n_inv_ > 0 || any_per_row) && shape_[in] <= block_) block_ = block_ / shape_[in] * shape_[in];
}

namespace {
// dst[i] = the row's element i % row (a view with stride 0 on every outer axis).
template <class T>
void fill_rows(T* dst, const View& v, int in, int64_t row, int64_t n) {
  const T* src = reinterpret_cast<const T*>(v.data) + v.offset;
  const int64_t s = v.stride[in];
  for (int64_t i = 0, c = 0; i < n; ++i) {
    dst[i] = src[c * s];
    if (++c == row) c = 0;
  }
}
// dst[0, n) for a block starting at row `row` of a two-axis space with rows `len` long: each
// row's value (the input at row * stride) repeated.
template <class T>
__attribute__((always_inline)) inline void fill_per_row_body(T* dst, const View& v, int64_t row, int64_t len, int64_t n) {
  const T* src = reinterpret_cast<const T*>(v.data) + v.offset;
  const int64_t st = v.stride[0];
  for (int64_t i = 0; i < n; i += len, ++row) std::fill(dst + i, dst + std::min(n, i + len), src[row * st]);
}
template <class T>
void fill_per_row_portable(T* dst, const View& v, int64_t row, int64_t len, int64_t n) {
  fill_per_row_body(dst, v, row, len, n);
}
#if defined(__x86_64__) || defined(__i386__)
// 32-byte stores: the chains' per-row values (row_chain.cpp) fill a slot per block with them.
template <class T>
__attribute__((target("avx2"))) void fill_per_row_avx2(T* dst, const View& v, int64_t row, int64_t len, int64_t n) {
  fill_per_row_body(dst, v, row, len, n);
}
#endif
template <class T>
void fill_per_row(T* dst, const View& v, int64_t row, int64_t len, int64_t n) {
#if defined(__x86_64__) || defined(__i386__)
  if (simd_avx2()) return fill_per_row_avx2(dst, v, row, len, n);
#endif
  fill_per_row_portable(dst, v, row, len, n);
}
// dst[0, n) = the one value at `one` (Note [One value per block]: a source that the instruction
// reading it cannot take as a scalar). dst may be `one` itself.
void spread_one(void* dst, const void* one, int32_t dt, int64_t n) {
  auto spread = [&](auto* d) {
    using T = std::remove_pointer_t<decltype(d)>;
    const T x = *static_cast<const T*>(one);
    std::fill(d, d + n, x);
  };
  switch (rvl::dtype_size(dt)) {
    case 1: spread(static_cast<uint8_t*>(dst)); break;
    case 2: spread(static_cast<uint16_t*>(dst)); break;
    case 4: spread(static_cast<uint32_t*>(dst)); break;
    default: spread(static_cast<uint64_t*>(dst)); break;
  }
}
}  // namespace

void Evaluator::choose_tiling(View* const* views, int n_views) {
  const int in = rank_ - 1;
  if (rank_ < 2) return;
  for (const View* v : std::span(views, n_views)) {
    if (v->empty || v->stride[in] == 0) continue;
    int m = in;  // the axis this view walks fastest (smallest non-zero |stride|)
    for (int d = 0; d < in; ++d)
      if (v->stride[d] != 0 && magnitude(v->stride[d]) < magnitude(v->stride[m])) m = d;
    if (m == in) continue;
    // Square-ish tiles of one block: 32x32 for the usual 1024-element block.
    int64_t ta = 1;
    while ((2 * ta) * (2 * ta) <= block_) ta *= 2;
    const int64_t ti = block_ / ta;
    if (shape_[m] < ta || shape_[in] < ti) return;  // too thin to gain from tiling
    tile_axis_ = m, tile_a_ = ta, tile_in_ = ti;
    for (int i = 0; i < n_in_; ++i) {
      const View& u = in_[i];
      tile_gather_[i] = !u.empty && u.stride[m] != 0 && magnitude(u.stride[m]) < magnitude(u.stride[in]);
    }
    return;
  }
}

Scratch Evaluator::make_scratch() const {
  Scratch sc;
  sc.acquire(static_cast<size_t>(n_slots_ + n_inv_) * block_, n_ins_);
  // Note [Row-invariant loads]: the row repeated, block() long.
  for (int j = 0, done = 0; j < n_ins_ && done < n_inv_; ++j) {
    if (inv_[j] != done) continue;  // not invariant, or a repeat of an earlier one
    const View& v = in_[ins_[j].arg];
    void* dst = &sc.slots[static_cast<size_t>(n_slots_ + inv_[j]) * block_];
    const int in = rank_ - 1;
    switch (rvl::dtype_size(v.dtype)) {
      case 1: fill_rows(static_cast<uint8_t*>(dst), v, in, shape_[in], block_); break;
      case 2: fill_rows(static_cast<uint16_t*>(dst), v, in, shape_[in], block_); break;
      case 4: fill_rows(static_cast<uint32_t*>(dst), v, in, shape_[in], block_); break;
      default: fill_rows(static_cast<uint64_t*>(dst), v, in, shape_[in], block_); break;
    }
    ++done;
  }
  // CONST values do not depend on the element: fill their slots once per scratch.
  for (int j = 0; j < n_ins_; ++j)
    if (const_owner_[j])
      fill_const(&sc.slots[static_cast<size_t>(slot_[j]) * block_], ins_[j].dtype, ins_[j].value, block_);
  return sc;
}

// Note [Segments without store-forwarding stalls]
// A block of short rows (a pooling window's 14-element rows, a strided tap view) has one segment
// per row. Built as a local Segment whose index was just updated by 8-byte stores and then
// copied into the vector, the copy's 16-byte loads read values still in the store buffer, which
// cannot forward to a wider load: perf put 59% of this function (12% of the Fashion-MNIST CNN
// step) on that one load. The index is copied one 8-byte word at a time instead (the empty asm
// keeps the compiler from widening the loop back into vector moves).
void Evaluator::segments(int64_t s, int64_t e, std::vector<Segment>& out) const {
  out.clear();
  int64_t idx[RVL_MAX_RANK];
  int64_t rest = s;
  for (int d = rank_ - 1; d >= 0; --d) {
    idx[d] = rest % shape_[d];
    rest /= shape_[d];
  }
  const int in = rank_ - 1;
  int64_t pos = 0;
  while (pos < e - s) {
    Segment& g = out.emplace_back();
    for (int d = 0; d < rank_; ++d) {
      g.idx[d] = idx[d];
      asm volatile("");
    }
    g.len = std::min(shape_[in] - idx[in], e - s - pos);
    g.pos = pos;
    pos += g.len;
    idx[in] += g.len;
    for (int d = in; d > 0 && idx[d] == shape_[d]; --d) idx[d] = 0, ++idx[d - 1];
  }
}

const void* Evaluator::eval(int64_t s, int64_t e, Scratch& sc, const void* acc) const {
  return compute(s, e, sc, acc, false);
}

// Note [Prefetching half inputs]
// A half program (Note [Halves in f32]) makes more passes over a block than its f32 twin (a
// widening CAST per input, a narrowing one at the end) while moving half the bytes, so on large
// arrays it is no longer limited by memory but by the passes, and the hardware prefetcher,
// seeing each input stream touched in bursts of one block, does not keep the next block coming
// while they run. A zero-copy LOAD of a dense half input therefore prefetches the same input's
// next block (the next block a thread evaluates follows this one: blocks are split into
// contiguous ranges). Measured on the 16M-element `exp(a) * b + c` in bf16: 14.6-15.7 ms
// without, 12.6 ms with, and 1.34-1.38 against 1.13-1.24 ms for a 4096² row sum
// (docs/performance.md §11). Prefetches never fault, so the one past the array's end is
// harmless. f32 inputs are left as they were (their programs are memory-bound already).
// In a reduced-outer layout (x.sum(0), program.cpp's run_reduce_outer) a thread walks its chunk
// of columns row by row, so its next block is the same piece of the next row, a row's length
// further on; prefetching the contiguous block instead fetched the neighbouring thread's columns.
// With the fold widening in registers (Note [Widening in the fold]) that took a 4096² bf16
// sum(0) from 1.31-1.39 to 0.81-0.95 ms (docs/performance.md §11, 2026-12-07): its row pieces
// are 4 KiB, one page, and the hardware prefetcher does not cross pages.
//
// Note [One value per block]
// In a block inside one row (a row chain's sweeps, row_chain.cpp; rows of at least a block),
// a one-value-per-row input is one value, and so is everything computed from such values
// alone. Such an instruction is not spread over the block (fill_per_row: 16-27% of a layer norm
// chain's samples) but kept as its one value (one[j], computed with n = 1); a binary op with one
// such source and one full one takes it as a scalar (Note [Array loops with a per-row scalar]),
// and any other reader gets it spread over the source's own slot first (spread_one). Every
// element is the same operation on the same values either way, so the bits do not change. The
// last instruction is never one value (its block is the output).
const void* Evaluator::compute(int64_t s, int64_t e, Scratch& sc, const void* acc,
                               bool segs_ready, bool raw_half) const {
  const int64_t n = e - s;
  uint8_t one[RVL_MAX_INSTRUCTIONS];
  // The instruction whose values are the output block (Note [Casts folded into their readers]).
  const int32_t writer = narrow_src_ >= 0 ? narrow_src_ : n_ins_ - 1;
  const bool one_row = any_per_row_ && !segs_ready && s / shape_[rank_ - 1] == (e - 1) / shape_[rank_ - 1];
  if (single_dense_load_ && !segs_ready) {  // x.sum(0): each row piece as it is
    const View& v = in_[ins_[0].arg];
    return v.data + (v.offset + s) * static_cast<int64_t>(rvl::dtype_size(v.dtype));
  }
  if (fused_ && !segs_ready)
    if (const void* r = compute_fused(s, e, sc, acc)) return r;
  bool have_segs = segs_ready;
  for (int j = 0; j < n_ins_; ++j) {
    const rvl_instruction& I = ins_[j];
    void* slot = &sc.slots[static_cast<size_t>(slot_[j]) * block_];
    if (j == writer && direct_ok_) {  // Note [Per-launch cost]: write the output in place
      if (out_dense_ && !segs_ready) {
        slot = out_address(s);
      } else {
        if (!have_segs) segments(s, e, sc.segs()), have_segs = true;
        if (void* d = direct_output(sc)) slot = d;
      }
    }
    one[j] = 0;
    int64_t len = n;       // elements this instruction computes (1: Note [One value per block])
    int scalar_src = -1;   // the source taken as a scalar, by a ScalarFn
    if (one_row && I.src[0] >= 0) {
      int n_src = 0, n_one = 0;
      for (int k = 0; k < 3; ++k)
        if (I.src[k] >= 0) ++n_src, n_one += one[I.src[k]];
      const bool binary = n_src == 2 && I.op != RVL_OP_CAST;
      if (n_one == n_src && j != n_ins_ - 1) {
        len = 1, one[j] = 1;
      } else if (binary && n_one == 1 && scalar_kernel(I.op, ins_[I.src[0]].dtype, one[I.src[0]] != 0)) {
        scalar_src = one[I.src[0]] ? 0 : 1;
      } else if (n_one > 0) {
        for (int k = 0; k < 3; ++k) {
          const int32_t q = I.src[k];
          if (q < 0 || !one[q]) continue;
          void* spread = &sc.slots[static_cast<size_t>(slot_[q]) * block_];
          spread_one(spread, sc.result[q], ins_[q].dtype, n);
          sc.result[q] = spread, one[q] = 0;
        }
      }
    }
    const void* src[3] = {nullptr, nullptr, nullptr};
    for (int k = 0; k < 3; ++k)
      if (I.src[k] >= 0) src[k] = sc.result[I.src[k]];
    switch (static_cast<rvl_op>(I.op)) {
      case RVL_OP_LOAD: {
        const View& v = in_[I.arg];
        if (inv_[j] >= 0 && !segs_ready && s % shape_[rank_ - 1] == 0) {  // row-invariant
          sc.result[j] = &sc.slots[static_cast<size_t>(n_slots_ + inv_[j]) * block_];
          break;
        }
        // A block inside one row that does not start it (rows longer than a block: a chain's
        // sweeps, row_chain.cpp): a row-invariant input of unit stride is its row itself from
        // the block's column on, and a one-value-per-row input is that one value throughout.
        const bool in_one_row = !segs_ready && s / shape_[rank_ - 1] == (e - 1) / shape_[rank_ - 1];
        if (inv_[j] >= 0 && in_one_row && v.stride[rank_ - 1] == 1 && v.dtype != RVL_DTYPE_BOOL) {
          sc.result[j] = v.data + (v.offset + s % shape_[rank_ - 1]) * static_cast<int64_t>(rvl::dtype_size(v.dtype));
          break;
        }
        if (per_row_[I.arg] && one_row && v.dtype != RVL_DTYPE_BOOL && j != n_ins_ - 1) {
          // Note [One value per block]: the row's value itself
          sc.result[j] = v.data + (v.offset + (s / shape_[1]) * v.stride[0]) * static_cast<int64_t>(rvl::dtype_size(v.dtype));
          one[j] = 1;
          break;
        }
        if (per_row_[I.arg] && !segs_ready && (s % shape_[1] == 0 || in_one_row)) {  // one value per row
          const int64_t row = s / shape_[1];
          switch (rvl::dtype_size(v.dtype)) {
            case 1: fill_per_row(static_cast<uint8_t*>(slot), v, row, shape_[1], n); break;
            case 2: fill_per_row(static_cast<uint16_t*>(slot), v, row, shape_[1], n); break;
            case 4: fill_per_row(static_cast<uint32_t*>(slot), v, row, shape_[1], n); break;
            default: fill_per_row(static_cast<uint64_t*>(slot), v, row, shape_[1], n); break;
          }
          if (v.dtype == RVL_DTYPE_BOOL) {  // stored bytes other than 0/1 read as true
            auto* b = static_cast<uint8_t*>(slot);
            for (int64_t i = 0; i < n; ++i) b[i] = b[i] != 0;
          }
          sc.result[j] = slot;
          break;
        }
        if (dense_[I.arg] && !segs_ready && v.dtype != RVL_DTYPE_BOOL) {  // zero-copy, no segments
          const int64_t size = static_cast<int64_t>(rvl::dtype_size(v.dtype));
          const std::byte* p = v.data + (v.offset + s) * size;
          sc.result[j] = p;
          if (rvl::dtype_is_half(v.dtype)) {  // Note [Prefetching half inputs]
            // x.sum(0): a thread's next block is the next row's piece (the Note)
            const int64_t ahead = (reduced_outer_ ? std::max(outputs_, n) : n) * size;
            for (int64_t b = ahead; b < ahead + n * size; b += 64) __builtin_prefetch(p + b);
          }
          break;
        }
        if (!have_segs) segments(s, e, sc.segs()), have_segs = true;
        const bool g = tile_axis_ >= 0 && tile_gather_[I.arg];
        const int a = tile_axis_;
        const void* r = nullptr;
        switch (rvl::dtype_size(v.dtype)) {
          case 1: r = load_any(v, sc, a, g, rank_, static_cast<uint8_t*>(slot)); break;
          case 2: r = load_any(v, sc, a, g, rank_, static_cast<uint16_t*>(slot)); break;
          case 4: r = load_any(v, sc, a, g, rank_, static_cast<uint32_t*>(slot)); break;
          default: r = load_any(v, sc, a, g, rank_, static_cast<uint64_t*>(slot)); break;
        }
        if (v.dtype == RVL_DTYPE_BOOL) {  // stored bytes other than 0/1 read as true
          auto* b = static_cast<uint8_t*>(slot);
          auto* from = static_cast<const uint8_t*>(r);
          for (int64_t i = 0; i < n; ++i) b[i] = from[i] != 0;
          r = slot;
        }
        sc.result[j] = r;
        break;
      }
      case RVL_OP_CONST: sc.result[j] = slot; break;  // filled by make_scratch
      case RVL_OP_ACC: sc.result[j] = acc; break;
      case RVL_OP_CAST:
        if (raw_half && j == n_ins_ - 1) {  // Note [Widening in the fold]: the fold widens
          sc.result[j] = src[0];
          break;
        }
        if (half_folds_ && (folded_[j] || (j == n_ins_ - 1 && narrow_src_ >= 0))) {  // folded away
          sc.result[j] = folded_[j] ? src[0] : sc.result[narrow_src_];
          break;
        }
        cast_kernel(ins_[I.src[0]].dtype, I.dtype)(slot, src[0], len);
        sc.result[j] = slot;
        break;
      case RVL_OP_COUNT_: rvl::fail(RVL_STATUS_INTERNAL, "invalid op after validation");
      // Every other row of the op table: one typed array loop per (op, source dtype).
      RVL_OP_CASES_COMPUTED {
        ArrayFn fn = j < kFnCache ? fn_[j] : nullptr;  // looked up once per launch
        if (fn == nullptr) {
          const int32_t sdt = ins_[I.src[rvl::op_info(I.op).accepts == rvl::OpAccepts::Select]].dtype;
          fn = array_kernel(I.op, sdt);
        }
        if (half_folds_ && hfn_[j] != nullptr) {  // Note [Casts folded into their readers]
          hfn_[j](slot, src[0], src[1], n);
          sc.result[j] = slot;
          break;
        }
        if (fn == nullptr) rvl::fail(RVL_STATUS_INTERNAL, "no kernel for a validated op");
        if (scalar_src >= 0) scalar_kernel(I.op, ins_[I.src[0]].dtype, scalar_src == 0)(slot, src[0], src[1], n);
        else fn(slot, src[0], src[1], src[2], len);
        sc.result[j] = slot;
        break;
      }
    }
  }
  return sc.result[n_ins_ - 1];
}

// Note [Fused loops in the evaluator]
// An all-f32 program (fused_loop_fits), or a half one (Note [Half programs as one fused loop]),
// runs each block as one fused loop (Note [Fused loops],
// fused_loop.cpp) when every input of the block is readable in place: a dense input at the
// block, a row-invariant input from its slot or its row, a one-value-per-row input in a block
// inside one row as its one value, CONSTs from their slots, ACC as given. Any other block (one
// that needs segments or a per-row fill) takes the instruction-by-instruction path below, which
// computes the same bits. The output goes where the last instruction's values would: the dense
// output in place, else the last instruction's slot (no other slot is used by a fused block).
// RAVEL_TBB_NO_FUSED_LOOP=1 turns it off.
const void* Evaluator::compute_fused(int64_t s, int64_t e, Scratch& sc, const void* acc) const {
  const int64_t row = shape_[rank_ - 1];
  const auto slot_at = [&](int64_t k) { return reinterpret_cast<float*>(&sc.slots[static_cast<size_t>(k) * block_]); };
  // Element i of an input, f32 or (Note [Half programs as one fused loop]) f16/bf16 as 16-bit values.
  const auto at = [](const View& v, int64_t i) {
    return reinterpret_cast<const float*>(v.data + (v.offset + i) * static_cast<int64_t>(rvl::dtype_size(v.dtype)));
  };
  const int64_t out_size = static_cast<int64_t>(rvl::dtype_size(ins_[n_ins_ - 1].dtype));
  std::byte* out = direct_ok_ && out_dense_ ? out_address(s) : reinterpret_cast<std::byte*>(slot_at(slot_[n_ins_ - 1]));
  // A block of several rows with one-value-per-row inputs runs row by row (Note [Several rows
  // per block], row_chain.cpp), each row with its own values.
  bool by_row = any_per_row_ && s / row != (e - 1) / row;
  // Note [Per-row operands in fused loops]: whole rows whose length is a multiple of the chunk
  // run as one call, each row's per-row values read as a per-chunk scalar.
  bool rows_mode = by_row && s % row == 0 && row % fused_chunk_ == 0;
  FusedValue val[kFusedMaxIns];
  for (int64_t a = s; a < e;) {
    const int64_t b = by_row && !rows_mode ? std::min(e, (a / row + 1) * row) : e;
    const bool in_one_row = a / row == (b - 1) / row;
    for (int j = 0; j < n_ins_; ++j) {
      const rvl_instruction& I = ins_[j];
      if (I.op == RVL_OP_CONST) {
        val[j] = {slot_at(slot_[j]), true, false, 0};  // filled by make_scratch
      } else if (I.op == RVL_OP_ACC) {
        val[j] = {static_cast<const float*>(acc) + (a - s), false, false, 0};
      } else if (I.op == RVL_OP_LOAD) {
        const View& v = in_[I.arg];
        if (inv_[j] >= 0 && a % row == 0 && b - a <= block_) val[j] = {slot_at(n_slots_ + inv_[j]), false, false, 0};
        else if (inv_[j] >= 0 && in_one_row && v.stride[rank_ - 1] == 1) val[j] = {at(v, a % row), false, false, 0};
        else if (per_row_[I.arg] && in_one_row) val[j] = {at(v, (a / shape_[1]) * v.stride[0]), true, false, 0};
        else if (per_row_[I.arg] && rows_mode) val[j] = {at(v, (a / shape_[1]) * v.stride[0]), false, true, v.stride[0]};
        else if (dense_[I.arg]) val[j] = {at(v, a), false, false, 0};
        else return nullptr;  // the passes below (any output written so far is written again)
      }
    }
    if (!run_fused_loop(simd_tier(), fused_chunk_, ins_, n_ins_, val, out + (a - s) * out_size, b - a, rows_mode ? row : 0)) {
      by_row = true, rows_mode = false;  // a per-row value computed from per-row ones: row by row
      continue;
    }
    a = b;
  }
  return out;
}

void Evaluator::store(int64_t s, int64_t e, const void* values, Scratch& sc) const {
  if (out_dense_) {  // one run of memory: no segments
    std::byte* d = out_address(s);
    // memmove: the values may be a zero-copy view of the very same memory (in-place copy).
    if (d != values) std::memmove(d, values, (e - s) * rvl::dtype_size(out_.dtype));
    return;
  }
  segments(s, e, sc.segs());
  store_segs(values, sc);
}

std::byte* Evaluator::out_address(int64_t s) const {
  return out_.data + (out_.offset + s) * static_cast<int64_t>(rvl::dtype_size(out_.dtype));
}

void* Evaluator::direct_output(const Scratch& sc) const {
  const std::vector<Segment>& segs = sc.segs();
  const int in = rank_ - 1;
  if (segs.size() != 1 || out_.stride[in] != 1) return nullptr;
  uint64_t addr = static_cast<uint64_t>(out_.offset);
  for (int d = 0; d <= in; ++d) addr += term(segs[0].idx[d], out_.stride[d]);
  return out_.data + static_cast<int64_t>(addr) * static_cast<int64_t>(rvl::dtype_size(out_.dtype));
}

void Evaluator::store_segs(const void* values, Scratch& sc) const {
  if (direct_ok_ && values == direct_output(sc)) return;  // already there
  switch (rvl::dtype_size(out_.dtype)) {
    case 1: store_typed(out_, sc.segs(), rank_, static_cast<const uint8_t*>(values)); break;
    case 2: store_typed(out_, sc.segs(), rank_, static_cast<const uint16_t*>(values)); break;
    case 4: store_typed(out_, sc.segs(), rank_, static_cast<const uint32_t*>(values)); break;
    default: store_typed(out_, sc.segs(), rank_, static_cast<const uint64_t*>(values)); break;
  }
}

std::byte* Evaluator::output_address(int64_t o) const {
  uint64_t addr = static_cast<uint64_t>(out_.offset);
  for (int d = split_ - 1; d >= 0; --d) {
    addr += term(o % shape_[d], out_.stride[d]);
    o /= shape_[d];
  }
  return out_.data + static_cast<int64_t>(addr) * static_cast<int64_t>(rvl::dtype_size(out_.dtype));
}

}  // namespace tbbcpu
