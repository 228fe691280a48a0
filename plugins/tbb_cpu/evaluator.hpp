// Block evaluator for validated programs (also runs contraction epilogues).
//
// The iteration space is processed in linear (row-major) blocks of at most block() elements.
// For one block every instruction is a tight typed loop writing its own scratch slot, so the
// interpretive overhead is paid once per instruction per block, not per element.
//
// Geometry normalisation (constructor) keeps the *linear order* of the iteration space intact
// except for the deliberate reduction permutation: reduced axes are moved innermost so that
// output o owns the contiguous linear range [o * reduced(), (o + 1) * reduced()). Then extent-1
// axes are dropped and neighbouring axes that every view walks contiguously with full validity
// are fused (never across the kept/reduced boundary), so dense tensors become one long axis.
//
// Exception (reduced_outer()): when every reduced axis precedes every kept axis (x.sum(0) of a
// row-major matrix) the permutation is skipped, so output o of reduced index r is linear element
// r * outputs() + o and whole rows can be accumulated into a vector of outputs (program.cpp);
// walking each output's column instead would stride through memory.
//
// Elementwise programs whose input (or output) walks some other axis faster than the innermost
// one (a transpose) are run in tiles over those two axes (run_tiled), so both the strided side
// and the contiguous side stay in cache.
//
// Note [Row-invariant loads]
// A bias added to every row ([200] read as [64, 200], stride 0 on the outer axes) used to be
// copied segment by segment into every block, and its segments forced the slow path on the
// whole block. Such a LOAD (elementwise programs, not tiled: stride 0 on every outer axis, fully
// valid, not bool, not the output's buffer) gives every block that starts on a row boundary the
// same values: the row repeated. make_scratch fills a dedicated slot with it once, block()
// elements long, and blocks are made a whole number of rows (block() rounded down to a multiple
// of the row length when a row fits), so each block reads that slot for free and, with every
// other operand dense, needs no segments at all. A block that does not start a row (a
// contraction epilogue whose rows are longer than a block) takes the ordinary load.
// The transposed case, one value per row (x - max[:, None], one-hot's idx[:, None] == iota),
// is read without segments too when the space is two axes: each row of the block is its value
// repeated (fill_per_row), the rows' values a strided walk of the input.
//
// Note [Per-launch cost]
// The makemore step launches ~30 kernels of a few thousand elements each, so what a launch costs
// besides its arithmetic decides the step. In steady state a launch here allocates nothing on the
// heap (views live in the Evaluator, scratch memory comes from a per-thread pool: Note [Scratch
// pool]), zero-fills nothing, enters oneTBB only when it runs in parallel (no
// enumerable_thread_specific for an inline kernel), and a dense output block is written by the
// last instruction directly (no copy from a scratch slot).
#pragma once

#include "array_ops.hpp"
#include "half_fused.hpp"
#include "kernel.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace tbbcpu {

// A run of consecutive elements along the innermost axis: idx is the multi-index of its first
// element, pos its position inside the block.
struct Segment {
  int64_t idx[RVL_MAX_RANK];
  int64_t len;
  int64_t pos;
};

// Note [Scratch pool]
// A Scratch is one thread's working memory for one Evaluator: n_slots * block() 8-byte slots, the
// per-instruction result pointers, the segments of the current block and an auxiliary buffer
// (reductions' accumulators). Its storage (ScratchMem) comes from a pool per thread and goes back
// to the pool of the thread that destroys it, so a steady-state launch takes no heap allocation
// and zero-fills nothing (a pooled buffer only ever grows). Contents are unspecified on
// acquisition; make_scratch fills what must be filled (the CONST slots).
struct ScratchMem {
  std::vector<uint64_t> slots;
  std::vector<const void*> result;
  std::vector<Segment> segs;
  std::vector<uint64_t> aux;
};

struct Scratch {
  Scratch() = default;
  Scratch(Scratch&&) noexcept = default;
  Scratch& operator=(Scratch&&) noexcept;
  Scratch(const Scratch& o);  // fresh storage with the same contents (containers may copy)
  ~Scratch();

  uint64_t* slots = nullptr;       // n_slots * block() 8-byte slots (aligned for every dtype)
  const void** result = nullptr;   // per instruction: where its values for this block are
  std::vector<Segment>* segs_ = nullptr;
  int64_t tile_rows = 0;  // run_tiled: segs is a tile of this many rows along the tile axis
  std::unique_ptr<ScratchMem> mem;

  std::vector<Segment>& segs() const { return *segs_; }
  // At least n elements of T (8-byte aligned), kept with this scratch; contents unspecified.
  template <class T>
  T* aux(int64_t n) {
    const size_t words = (static_cast<size_t>(n) * sizeof(T) + 7) / 8;
    if (mem->aux.size() < words) mem->aux.resize(words);
    return reinterpret_cast<T*>(mem->aux.data());
  }
  // Storage for n_slots slots and n_result result pointers (from this thread's pool).
  void acquire(size_t n_slots, size_t n_result);
};

class Evaluator {
 public:
  // The order eval() produces an elementwise program's values in. Any: the evaluator may move a
  // short innermost axis outward (Note [Short innermost axes]), which is all run() needs. Linear:
  // eval(s, e) is elements [s, e) in row-major order, for callers that fold the values
  // themselves (row_chain.cpp sums them per row).
  enum class Order { Any, Linear };
  // first_block > 0: the block to start from instead of choose_block's (still bounded by the
  // scratch budget; row_chain.cpp asks for several short rows per block: Note [Several rows per
  // block]).
  explicit Evaluator(const Program& p, Order order = Order::Any, int64_t first_block = 0);

  int64_t total() const { return total_; }
  int64_t block() const { return block_; }
  // Elementwise programs run in tiles (run_tiled): eval's linear blocks are then not the path
  // it was tuned for (row_chain.cpp takes its passes instead).
  bool tiled() const { return tile_axis_ >= 0; }
  Scratch make_scratch() const;

  // Evaluates linear elements [s, e) (e - s <= block()); returns the last instruction's values
  // (typed array of the output dtype, e - s elements). `acc` feeds ACC: values for element s..e.
  const void* eval(int64_t s, int64_t e, Scratch& sc, const void* acc) const;
  // Non-reducing programs: stores the values for linear elements [s, e) through the output view.
  // Nothing is copied when `values` already is the output's memory for [s, e) (eval wrote
  // there directly: Note [Per-launch cost]).
  void store(int64_t s, int64_t e, const void* values, Scratch& sc) const;
  // Runs the whole program (parallel), including reductions.
  void run() const;
  // ABI 1.10 (Note [Row epilogue], row_epilogue.cpp): this LOGSUMEXP program's rows, each
  // handed to `epilogue` (an elementwise evaluator over the same space, whose ACC is the row's
  // result) while it is in cache; nothing is stored through this program's output. False, with
  // nothing done, when the layout has no such path (reduced axes outermost, rows split).
  bool run_logsumexp_fused(const Evaluator& epilogue) const { return run_logsumexp_any(&epilogue); }

 private:
  void segments(int64_t s, int64_t e, std::vector<Segment>& out) const;
  // eval() on sc.segs as already filled (segs_ready) or on the segments of [s, e).
  // raw_half: with fold_half_, stop before the last CAST and return its half source (Note
  // [Widening in the fold]).
  const void* compute(int64_t s, int64_t e, Scratch& sc, const void* acc, bool segs_ready,
                      bool raw_half = false) const;
  // A reduction's block of values to fold: eval()'s, or with fold_half_ the halves before the
  // widening CAST (program.cpp folds either).
  const void* fold_eval(int64_t s, int64_t e, Scratch& sc) const { return compute(s, e, sc, nullptr, false, fold_half_ != 0); }
  // Note [Fused loops in the evaluator]: compute() as one fused loop, or NULL (nothing done)
  // when some input of this block is not readable in place.
  const void* compute_fused(int64_t s, int64_t e, Scratch& sc, const void* acc) const;
  void store_segs(const void* values, Scratch& sc) const;  // store() on sc.segs
  // Where the output's values of the block on sc.segs go when they are one dense run, or NULL.
  void* direct_output(const Scratch& sc) const;
  std::byte* out_address(int64_t s) const;  // out_dense_: where linear element s is stored
  std::byte* output_address(int64_t o) const;  // reductions (not reduced_outer): output o
  template <int DT, int ROP> void run_reduce() const;
  template <int DT, int ROP> void run_reduce_outer() const;
  template <int DT, class Out> bool run_logsumexp(const Evaluator* epi) const;  // lse_reduce.cpp (ABI 1.4)
  bool run_logsumexp_any(const Evaluator* epi = nullptr) const;
  void run_elementwise() const;
  void run_tiled() const;
  bool run_permute_copy() const;  // permute_copy.cpp: false when the program is not a plain copy
  bool run_pad_copy() const;  // pad_copy.cpp: false when the program is not a copy of a masked view
  bool run_tap_sum() const;   // tap_rows.cpp: false (nothing done) unless a sum of taps (Note [Tap sums])
  bool run_interleaved() const;  // interleave_rows.cpp: false (nothing done) when it does not apply
  void choose_tiling(View* const* views, int n_views);
  void move_short_innermost_axis(const Program& p, View* const* views, int n_views, Order order);  // Note [Short innermost axes]
  void find_row_invariant_loads();
  void plan_half_folds();

  int32_t rank_ = 1;
  int64_t shape_[RVL_MAX_RANK] = {};
  // Axes [0, split_) are the outer group, [split_, rank_) the inner one: kept then reduced, or
  // reduced then kept when reduced_outer_.
  int32_t split_ = 0;
  bool reduced_outer_ = false;
  // The last instruction may write a dense output block in place (computed, not a LOAD or ACC,
  // and the output buffer is none of the inputs').
  bool direct_ok_ = false;
  bool out_dense_ = false;          // elementwise, and linear element i is stored at offset + i
  bool single_dense_load_ = false;  // the program is one LOAD of a dense input: eval is a pointer
  int32_t tile_axis_ = -1;            // run_tiled: the axis tiled together with the innermost
  int64_t tile_a_ = 0, tile_in_ = 0;  // tile extents along tile_axis_ and the innermost axis
  bool tile_gather_[RVL_MAX_INPUTS] = {};
  bool dense_[RVL_MAX_INPUTS] = {};  // input i's linear element k is at its offset + k  // per input: walks tile_axis_ fastest (transposing load)
  int32_t n_in_ = 0;
  // The inputs' views, normalised; only [0, n_in_) are constructed (a default-constructed array
  // of RVL_MAX_INPUTS views would zero 7 KiB per launch).
  struct Views {
    union {
      View v[RVL_MAX_INPUTS];
    };
    Views() {}
    View& operator[](int i) { return v[i]; }
    const View& operator[](int i) const { return v[i]; }
  } in_;
  View out_;
  const rvl_instruction* ins_;
  int32_t n_ins_;
  // Note [Row-invariant loads]: LOAD j reads slot n_slots_ + inv_[j] (filled once per scratch)
  // when inv_[j] >= 0 and the block starts a row (s % shape_[rank_ - 1] == 0).
  int32_t n_inv_ = 0;
  int16_t inv_[RVL_MAX_INSTRUCTIONS];
  // Note [Row-invariant loads]: input i is one value per row (rank 2, stride 0 along the row).
  bool per_row_[RVL_MAX_INPUTS] = {};
  bool any_per_row_ = false;  // some per_row_[i] (Note [One value per block])
  // The array loop of computed instruction j < kFnCache (NULL: look it up in compute).
  static constexpr int32_t kFnCache = 64;
  ArrayFn fn_[kFnCache];
  // Note [Casts folded into their readers] (set by plan_half_folds; read only when half_folds_):
  // CAST j hands its bf16 source through (folded_), computed j runs hfn_[j], and narrow_src_
  // (-1: none) writes the final CAST's values.
  bool half_folds_ = false;
  bool folded_[kFnCache];
  HalfFusedFn hfn_[kFnCache];
  int32_t narrow_src_ = -1;
  // Note [Widening in the fold] (half_fold.cpp): 0, or the half dtype (F16/BF16) whose values a
  // SUM/MAX/PROD reduction's last instruction widens to f32; the fold then widens them itself.
  int32_t fold_half_ = 0;
  bool fused_ = false;  // Note [Fused loops in the evaluator]
  bool interleaved_ = false;  // one short innermost axis was moved outward (Note [Interleaved rows])
  int64_t fused_chunk_ = 64;
  // Note [Slot plan]: instruction j writes slot slot_[j] (of n_slots_); only [0, n_ins_) is set.
  int32_t n_slots_ = 0;
  uint16_t slot_[RVL_MAX_INSTRUCTIONS];
  bool const_owner_[RVL_MAX_INSTRUCTIONS];
  int32_t reduce_op_;
  int64_t total_ = 0, outputs_ = 0, reduced_ = 0, block_ = 0;
};

}  // namespace tbbcpu
