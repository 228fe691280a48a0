// Note [Row-uniform hoisting] (row_uniform.hpp).
#include "row_uniform.hpp"

#include <ravel/op_table.hpp>

namespace tbbcpu {
namespace {

// The instructions `root` needs (itself included), in order, as a new list; LOADs of per-row
// values renumbered from row_lo to 0.
std::vector<rvl_instruction> extract(const std::vector<rvl_instruction>& code, int32_t root, int32_t row_lo) {
  std::vector<char> need(code.size(), 0);
  need[static_cast<size_t>(root)] = 1;
  for (int32_t j = root; j >= 0; --j)
    if (need[static_cast<size_t>(j)])
      for (int32_t s : code[static_cast<size_t>(j)].src)
        if (s >= 0) need[static_cast<size_t>(s)] = 1;
  std::vector<int32_t> at(code.size(), -1);
  std::vector<rvl_instruction> out;
  for (int32_t j = 0; j <= root; ++j) {
    if (!need[static_cast<size_t>(j)]) continue;
    rvl_instruction in = code[static_cast<size_t>(j)];
    for (int32_t& s : in.src)
      if (s >= 0) s = at[static_cast<size_t>(s)];
    if (in.op == RVL_OP_LOAD) in.arg -= row_lo;
    at[static_cast<size_t>(j)] = static_cast<int32_t>(out.size());
    out.push_back(in);
  }
  return out;
}

}  // namespace

RowUniform hoist_row_uniform(const std::vector<rvl_instruction>& code, int32_t row_lo, int32_t row_hi,
                             int32_t first_new) {
  const size_t n = code.size();
  std::vector<char> uniform(n, 0);
  for (size_t j = 0; j < n; ++j) {
    const rvl_instruction& in = code[j];
    if (in.op == RVL_OP_CONST) uniform[j] = 1;
    else if (in.op == RVL_OP_LOAD) uniform[j] = in.arg >= row_lo && in.arg < row_hi;
    else {
      bool u = true;
      for (int32_t s : in.src)
        if (s >= 0) u = u && uniform[static_cast<size_t>(s)];
      uniform[j] = u;
    }
  }
  // The frontier: uniform, computed, and read by a per-element instruction (or the result).
  std::vector<char> frontier(n, 0);
  const auto cheap = [&](size_t j) { return code[j].op == RVL_OP_CONST || code[j].op == RVL_OP_LOAD; };
  for (size_t j = 0; j < n; ++j) {
    if (uniform[j]) continue;
    for (int32_t s : code[j].src)
      if (s >= 0 && uniform[static_cast<size_t>(s)] && !cheap(static_cast<size_t>(s))) frontier[static_cast<size_t>(s)] = 1;
  }
  if (uniform[n - 1] && !cheap(n - 1)) frontier[n - 1] = 1;
  RowUniform r;
  std::vector<rvl_instruction> rewritten = code;
  for (size_t j = 0; j < n; ++j) {
    if (!frontier[j]) continue;
    r.values.push_back(extract(code, static_cast<int32_t>(j), row_lo));
    rvl_instruction load{};
    load.op = RVL_OP_LOAD;
    load.dtype = code[j].dtype;
    load.src[0] = load.src[1] = load.src[2] = -1;
    load.arg = first_new + static_cast<int32_t>(r.values.size()) - 1;
    rewritten[j] = load;
  }
  // Drop what the result no longer needs.
  std::vector<char> live(n, 0);
  live[n - 1] = 1;
  for (size_t j = n; j-- > 0;)
    if (live[j])
      for (int32_t s : rewritten[j].src)
        if (s >= 0) live[static_cast<size_t>(s)] = 1;
  std::vector<int32_t> at(n, -1);
  for (size_t j = 0; j < n; ++j) {
    if (!live[j]) continue;
    rvl_instruction in = rewritten[j];
    for (int32_t& s : in.src)
      if (s >= 0) s = at[static_cast<size_t>(s)];
    at[j] = static_cast<int32_t>(r.code.size());
    r.code.push_back(in);
  }
  return r;
}

}  // namespace tbbcpu
