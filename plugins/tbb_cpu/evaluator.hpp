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
  std::byte* output_address(int64_t o) const;  // reductions: address of output o
  template <int DT, int ROP> void run_reduce() const;
  void run_elementwise() const;

  int32_t rank_ = 1;
  int64_t shape_[RVL_MAX_RANK] = {};
  int32_t kept_ = 0;  // axes [0, kept_) are stored axes, [kept_, rank_) reduced ones
  std::vector<View> in_;
  View out_;
  const rvl_instruction* ins_;
  int32_t n_ins_;
  int32_t reduce_op_;
  int64_t total_ = 0, outputs_ = 0, reduced_ = 0, block_ = 0;
};

}  // namespace tbbcpu
