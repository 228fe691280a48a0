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
#pragma once

#include "kernel.hpp"

#include <cstdint>
#include <vector>

namespace tbbcpu {

// A run of consecutive elements along the innermost axis: idx is the multi-index of its first
// element, pos its position inside the block.
struct Segment {
  int64_t idx[RVL_MAX_RANK];
  int64_t len;
  int64_t pos;
};

// Per-thread working memory for one Evaluator (see Evaluator::make_scratch).
struct Scratch {
  std::vector<uint64_t> slots;       // n_ins * block() 8-byte slots (aligned for every dtype)
  std::vector<const void*> result;   // per instruction: where its values for this block are
  std::vector<Segment> segs;
  int64_t tile_rows = 0;  // run_tiled: segs is a tile of this many rows along the tile axis
};

class Evaluator {
 public:
  explicit Evaluator(const Program& p);

  int64_t total() const { return total_; }
  int64_t block() const { return block_; }
  Scratch make_scratch() const;

  // Evaluates linear elements [s, e) (e - s <= block()); returns the last instruction's values
  // (typed array of the output dtype, e - s elements). `acc` feeds ACC: values for element s..e.
  const void* eval(int64_t s, int64_t e, Scratch& sc, const void* acc) const;
  // Non-reducing programs: stores the values for linear elements [s, e) through the output view.
  void store(int64_t s, int64_t e, const void* values, Scratch& sc) const;
  // Runs the whole program (parallel), including reductions.
  void run() const;

 private:
  void segments(int64_t s, int64_t e, std::vector<Segment>& out) const;
  // eval() on sc.segs as already filled (segs_ready) or on the segments of [s, e).
  const void* compute(int64_t s, int64_t e, Scratch& sc, const void* acc, bool segs_ready) const;
  void store_segs(const void* values, Scratch& sc) const;  // store() on sc.segs
  std::byte* output_address(int64_t o) const;  // reductions (not reduced_outer): output o
  template <int DT, int ROP> void run_reduce() const;
  template <int DT, int ROP> void run_reduce_outer() const;
  void run_elementwise() const;
  void run_tiled() const;
  void choose_tiling(const std::vector<View*>& views);

  int32_t rank_ = 1;
  int64_t shape_[RVL_MAX_RANK] = {};
  // Axes [0, split_) are the outer group, [split_, rank_) the inner one: kept then reduced, or
  // reduced then kept when reduced_outer_.
  int32_t split_ = 0;
  bool reduced_outer_ = false;
  int32_t tile_axis_ = -1;            // run_tiled: the axis tiled together with the innermost
  int64_t tile_a_ = 0, tile_in_ = 0;  // tile extents along tile_axis_ and the innermost axis
  std::vector<char> tile_gather_;     // per input: walks tile_axis_ fastest (transposing load)
  std::vector<View> in_;
  View out_;
  const rvl_instruction* ins_;
  int32_t n_ins_;
  int32_t reduce_op_;
  int64_t total_ = 0, outputs_ = 0, reduced_ = 0, block_ = 0;
};

}  // namespace tbbcpu
