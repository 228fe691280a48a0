// The iteration space of a kernel after simplification, and how a view is read in it.
//
// simplify() drops axes of extent 1 and merges neighbouring axes that every view walks densely
// (stride[d] == stride[d+1] * extent[d+1], no padding on either), never merging a reduced axis
// with a kept one. A contiguous tensor of any rank becomes one axis, so an elementwise kernel
// computes one index and, when the views allow it, moves four elements per vector load.
#pragma once

#include <ravel/validate.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace rvl::hip {

struct SpaceView {
  bool empty = false;  // nothing valid: reads as 0, never addressed
  int32_t dtype = 0;
  int64_t offset = 0;
  std::vector<int64_t> stride, lo, hi;  // per simplified axis; lo/hi clamped to [0, extent]
};

struct Space {
  std::vector<int64_t> extent;
  std::vector<bool> reduced;
  std::vector<SpaceView> views;  // the program's inputs in order, then the output
  bool wide = false;             // some index or address needs 64 bits (else `int` arithmetic)
};

// `views`: inputs then output, all of rank `rank` over `shape`; `reduce_axes` as in rvl_program.
Space simplify(int32_t rank, const int64_t* shape, uint32_t reduce_axes,
               const std::vector<const validate::View*>& views);

int64_t product(const std::vector<int64_t>& extents);
// "i3" for axis 3.
std::string index_name(size_t axis);
// "offset + i0 * s0 + ..." over the named axes (axes with stride 0 are left out).
std::string address(const SpaceView& v, const std::vector<std::string>& idx);
// "(i0 >= lo && i0 < hi) && ...", only for axes where the view is padded; "" when always valid.
std::string validity(const SpaceView& v, const std::vector<std::string>& idx,
                     const std::vector<int64_t>& extent);
// The expression reading element idx of `v` through parameter `param`: 0 where invalid, bool
// normalised to 0/1 (a stored byte other than 0 reads as true).
std::string load(const SpaceView& v, const std::string& param, const std::vector<std::string>& idx,
                 const std::vector<int64_t>& extent);
// Normalises a raw element read (`raw`) of dtype dt: bool bytes become 0/1.
std::string normalise(int32_t dtype, const std::string& raw);

}  // namespace rvl::hip
