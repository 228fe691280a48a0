// The iteration space of a kernel after simplification, shared by every code generator
// (plugins/hip, plugins/level_zero, plugins/opencl) and the CPU evaluator (plugins/tbb_cpu): C++
// for plugin authors, no core headers (link Ravel::lowering).
//
// Note [Space simplification]
// simplify() drops axes of extent 1 (the index is always 0 there), turns a reduced space with an
// axis of extent 0 into one reduced axis of extent 0 (nothing to combine: the identity is
// stored), and merges neighbouring axes of the same kind (kept or reduced, never one of each)
// that every non-empty view walks densely without padding: stride[d] == stride[d+1] *
// extent[d+1]. A contiguous tensor of any rank becomes one axis, so a kernel computes one index
// and, when the views allow it, moves several elements per vector load (plan.hpp). The output
// view has stride 0 on reduced axes (the validator's invariant), so it never blocks merging two
// reduced axes. Axes keep their order (Order::Original: the innermost axis stays innermost, which
// decides coalesced reductions) or are sorted kept-first (Order::KeptFirst: parametric kernels
// read the kept extents as the first entries of their meta block).
#pragma once

#include <ravel/validate.hpp>

#include <cstdint>
#include <vector>

namespace rvl::lower {

struct SpaceView {
  bool empty = false;  // nothing valid: reads as 0, never addressed
  int32_t dtype = 0;
  int64_t offset = 0;
  std::vector<int64_t> stride, lo, hi;  // per simplified axis; lo/hi clamped to [0, extent]

  // A validated view's first `rank` axes as they are, unsimplified (a contraction's epilogue and
  // operands, whose axes are fixed by the contraction: batch axes, then M, N or K).
  static SpaceView of(const validate::View& v, size_t rank);

  bool full(size_t axis, int64_t extent) const { return lo[axis] == 0 && hi[axis] == extent; }
  // Some axis has a validity range narrower than the extent: loads need a validity test.
  bool masked(const std::vector<int64_t>& extent) const;
};

struct Space {
  std::vector<int64_t> extent;
  std::vector<bool> reduced;
  std::vector<SpaceView> views;  // the program's inputs in order, then the output
  int64_t n_out = 1, n_red = 1;  // outputs, and values combined per output (0: store identities)
  bool wide = false;             // some index or address needs 64 bits (else 32-bit arithmetic)

  std::vector<size_t> axes(bool reduced_axes) const;  // the kept (false) or reduced (true) axes
  std::vector<int64_t> extents(const std::vector<size_t>& axes) const;
  const SpaceView& out() const { return views.back(); }
};

enum class Order { Original, KeptFirst };

// Note [Simplification in place]
// The algorithm itself works on validated views in place, on fixed-capacity arrays, and allocates
// nothing: the CPU evaluator (plugins/tbb_cpu) simplifies at every launch, where a heap allocation
// is a measurable share of a small kernel's cost (its Note [Per-launch cost]). simplify() below
// runs it on copies and returns vectors, which is what the code generators want. Two axes merge
// only when the product stride * extent is representable (a view with a narrow validity range may
// have a stride whose product with the extent overflows int64; such axes are left apart).
struct FlatSpace {
  int32_t rank = 0;  // simplified axes; 0 when every extent is 1
  int64_t extent[RVL_MAX_RANK] = {};
  bool reduced[RVL_MAX_RANK] = {};
  int64_t n_out = 1, n_red = 1;  // as in Space
};
// `views[0, n_views)`: the inputs then the output, of rank `rank` over `shape`. On return axis
// d < rank of every view describes simplified axis d (the output's stride is 0 on reduced axes,
// unless `full_output`: a row epilogue's output has the whole space, ABI 1.10; its validity range
// is full); offset, dtype and empty are unchanged.
FlatSpace simplify_in_place(int32_t rank, const int64_t* shape, uint32_t reduce_axes,
                            validate::View* const* views, size_t n_views,
                            Order order = Order::Original, bool full_output = false);

// `views`: inputs then output, all of rank `rank` over `shape`; `reduce_axes` as in rvl_program.
Space simplify(int32_t rank, const int64_t* shape, uint32_t reduce_axes,
               const std::vector<const validate::View*>& views, Order order = Order::Original,
               bool full_output = false);
// The program's inputs and output (the whole space with a row epilogue).
Space simplify(const validate::Program& p, Order order = Order::Original);

// |offset| + sum |stride| * (extent - 1): bounds every partial sum of an address computation,
// valid or not, whatever order the terms are added in.
long double reach(int64_t offset, const int64_t* stride, const std::vector<int64_t>& extent);
// Every index, address and partial sum stays below 2^30, so 32-bit arithmetic is safe (with room
// for grid-stride increments and tile overshoot).
constexpr int64_t kNarrowLimit = int64_t(1) << 30;
bool fits_32(const Space& s);

}  // namespace rvl::lower
