#include "space.hpp"

#include "ssa.hpp"

#include <cstdlib>

namespace rvl::hip {
namespace {

bool full(const SpaceView& v, size_t d, int64_t extent) {
  return v.lo[d] == 0 && v.hi[d] == extent;
}

// |offset| + sum |stride| * (extent - 1): bounds every partial sum of an address computation,
// valid or not, so 32-bit arithmetic is safe below 2^30 (grid-stride increments fit as well).
bool fits_32(const Space& s) {
  const int64_t kLimit = int64_t(1) << 30;
  int64_t n = 1;
  for (int64_t e : s.extent) {
    if (e > 0 && n > kLimit / e) return false;
    n *= e;
  }
  if (n >= kLimit) return false;
  for (const SpaceView& v : s.views) {
    if (v.empty) continue;
    long double bound = std::llabs(v.offset);
    for (size_t d = 0; d < s.extent.size(); ++d)
      bound += (long double)std::llabs(v.stride[d]) * (long double)(s.extent[d] > 0 ? s.extent[d] - 1 : 0);
    if (bound >= (long double)kLimit) return false;
  }
  return true;
}

}  // namespace

Space simplify(int32_t rank, const int64_t* shape, uint32_t reduce_axes,
               const std::vector<const validate::View*>& views) {
  Space s;
  s.views.resize(views.size());
  for (size_t k = 0; k < views.size(); ++k) {
    s.views[k].empty = views[k]->empty;
    s.views[k].dtype = views[k]->dtype;
    s.views[k].offset = views[k]->offset;
  }
  bool zero_reduced = false;
  for (int32_t d = 0; d < rank; ++d) {
    const bool red = (reduce_axes >> d) & 1u;
    if (shape[d] == 1) continue;  // index always 0; non-empty views are valid there
    if (shape[d] == 0 && red) {   // nothing to combine: one reduced axis of extent 0 stands for all
      zero_reduced = true;
      continue;
    }
    s.extent.push_back(shape[d]);
    s.reduced.push_back(red);
    for (size_t k = 0; k < views.size(); ++k) {
      s.views[k].stride.push_back(views[k]->stride[d]);
      s.views[k].lo.push_back(views[k]->lo[d]);
      s.views[k].hi.push_back(views[k]->hi[d]);
    }
  }
  if (zero_reduced) {
    s.extent.push_back(0);
    s.reduced.push_back(true);
    for (SpaceView& v : s.views) v.stride.push_back(0), v.lo.push_back(0), v.hi.push_back(0);
  }
  // Merge axis d into d-1 where every view walks the pair densely.
  for (size_t d = s.extent.size(); d-- > 1;) {
    if (s.reduced[d] != s.reduced[d - 1] || s.extent[d] == 0 || s.extent[d - 1] == 0) continue;
    bool ok = true;
    for (const SpaceView& v : s.views)
      if (!v.empty && (v.stride[d - 1] != v.stride[d] * s.extent[d] || !full(v, d, s.extent[d]) ||
                       !full(v, d - 1, s.extent[d - 1])))
        ok = false;
    if (!ok) continue;
    const int64_t merged = s.extent[d - 1] * s.extent[d];
    s.extent[d - 1] = merged;
    s.extent.erase(s.extent.begin() + d);
    s.reduced.erase(s.reduced.begin() + d);
    for (SpaceView& v : s.views) {
      v.stride[d - 1] = v.stride[d];
      v.stride.erase(v.stride.begin() + d);
      v.lo[d - 1] = 0;
      v.hi[d - 1] = merged;
      v.lo.erase(v.lo.begin() + d);
      v.hi.erase(v.hi.begin() + d);
    }
  }
  s.wide = !fits_32(s);
  return s;
}

int64_t product(const std::vector<int64_t>& e) {
  int64_t n = 1;
  for (int64_t x : e) n *= x;
  return n;
}

std::string index_name(size_t axis) { return "i" + std::to_string(axis); }

std::string address(const SpaceView& v, const std::vector<std::string>& idx) {
  std::string a = "(" + std::to_string(v.offset);  // int or long long, as the value needs
  for (size_t d = 0; d < idx.size(); ++d) {
    if (v.stride[d] == 0 || idx[d].empty()) continue;
    a += v.stride[d] == 1 ? " + " + idx[d] : " + " + idx[d] + " * (" + std::to_string(v.stride[d]) + ")";
  }
  return a + ")";
}

std::string validity(const SpaceView& v, const std::vector<std::string>& idx,
                     const std::vector<int64_t>& extent) {
  std::string c;
  for (size_t d = 0; d < idx.size(); ++d) {
    if (full(v, d, extent[d])) continue;
    if (!c.empty()) c += " && ";
    c += "(" + idx[d] + " >= " + std::to_string(v.lo[d]) + " && " + idx[d] + " < " +
         std::to_string(v.hi[d]) + ")";
  }
  return c;
}

std::string normalise(int32_t dt, const std::string& raw) {
  return dt == RVL_DTYPE_BOOL ? "(unsigned char)(" + raw + " != 0)" : raw;
}

std::string load(const SpaceView& v, const std::string& param, const std::vector<std::string>& idx,
                 const std::vector<int64_t>& extent) {
  const std::string zero = std::string("(") + ctype(v.dtype) + ")0";
  if (v.empty) return zero;
  const std::string read = normalise(v.dtype, param + "[" + address(v, idx) + "]");
  const std::string c = validity(v, idx, extent);
  return c.empty() ? read : "((" + c + ") ? " + read + " : " + zero + ")";
}

}  // namespace rvl::hip
