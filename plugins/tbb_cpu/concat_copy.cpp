// Note [Concatenations]
// The core lays tensors end to end (its `join`: a data-parallel step's gradient bucket, Note
// [Replica gradient buckets]; gathers of split tensors) as a chain of WHEREs over masked views:
//   where(valid_k, piece_k, ... where(valid_2, piece_2, piece_1))
// where piece_k is a LOAD of part k's buffer valid over its range [lo_k, hi_k) of the result and
// valid_k a LOAD of a broadcast boolean (stride 0) valid over the same range. The generic
// evaluator computes every element of every operand and masks them: 2n - 1 LOADs and n - 1
// WHEREs per element. The 2-device makemore step's bucket of 11,897 floats (5 pieces) took
// 15-16 us per device that way, more than the transfer and the add of the all-reduce after it
// (docs/performance.md §6, 2026-12-07, helper mk2dev).
// Here such a program is read as what it is, a list of ranges of the output, each a copy from
// one input or zeros, and run as memcpy and memset. Taken only for exactly that form: an
// elementwise program over one axis, a dense output; every LOAD either a boolean with stride 0
// (a mask: true over its valid range if its one value is nonzero, false elsewhere) or a value of
// the output's dtype with stride 1 (its buffer over its valid range, zero elsewhere: the ABI's
// padding), no input the output's buffer, at least one WHERE, whose condition is a mask and whose
// branches are values. Anything else (a computed condition, a cast, a strided piece) takes the
// generic path. Exact: WHERE and LOAD copy bits, so the result is bitwise the generic one,
// -0.0 and NaN payloads included (tests/bench/test_tbb_concat.cpp).
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernel.hpp"
#include "parallel.hpp"

#include <ravel/backend.hpp>

namespace tbbcpu {

namespace {

struct Range {  // [begin, end) of the output: input `input`'s elements there, or zeros (-1)
  int64_t begin, end;
  int32_t input;
};

struct Value {  // one instruction, read as ranges (a value) or as one true interval (a mask)
  bool mask = false;
  int64_t lo = 0, hi = 0;  // mask: true over [lo, hi)
  std::vector<Range> ranges;
};

// The ranges of `v` inside [b, e), appended to `out`.
void clip(const std::vector<Range>& v, int64_t b, int64_t e, std::vector<Range>& out) {
  for (const Range& r : v) {
    const int64_t lo = std::max(r.begin, b), hi = std::min(r.end, e);
    if (lo < hi) out.push_back({lo, hi, r.input});
  }
}

// The program as output ranges, or false when it is not a concatenation (nothing read or run).
bool as_ranges(const Program& p, std::vector<Range>& out) {
  if (p.reduce_op != RVL_REDUCE_NONE || p.n_epilogue > 0 || !p.stages.empty() || p.rank != 1 || p.n_ins < 3)
    return false;
  const int64_t n = p.shape[0];
  if (p.out.empty || p.out.stride[0] != 1 || p.out.lo[0] > 0 || p.out.hi[0] < n) return false;
  std::vector<Value> vals(static_cast<size_t>(p.n_ins));
  bool where = false;
  for (int32_t i = 0; i < p.n_ins; ++i) {
    const rvl_instruction& in = p.ins[i];
    Value& v = vals[static_cast<size_t>(i)];
    if (in.op == RVL_OP_LOAD) {
      const View& x = p.inputs[static_cast<size_t>(in.arg)];
      const int64_t lo = std::clamp<int64_t>(x.lo[0], 0, n), hi = std::clamp<int64_t>(x.hi[0], lo, n);
      const bool valid = !x.empty && lo < hi;
      if (in.dtype == RVL_DTYPE_BOOL && x.dtype == RVL_DTYPE_BOOL && x.stride[0] == 0) {
        v.mask = true;
        // The one value is read only where the view is valid (its address is in the buffer).
        if (valid && *reinterpret_cast<const uint8_t*>(x.data + x.offset) != 0) v.lo = lo, v.hi = hi;
        continue;
      }
      if (in.dtype != p.out.dtype || x.dtype != p.out.dtype) return false;
      if (valid && (x.stride[0] != 1 || x.data == p.out.data)) return false;
      if (!valid) {
        v.ranges.push_back({0, n, -1});
        continue;
      }
      if (lo > 0) v.ranges.push_back({0, lo, -1});
      v.ranges.push_back({lo, hi, in.arg});
      if (hi < n) v.ranges.push_back({hi, n, -1});
      continue;
    }
    if (in.op != RVL_OP_WHERE || in.dtype != p.out.dtype) return false;
    const Value& c = vals[static_cast<size_t>(in.src[0])];
    const Value& a = vals[static_cast<size_t>(in.src[1])];
    const Value& b = vals[static_cast<size_t>(in.src[2])];
    if (!c.mask || a.mask || b.mask) return false;
    where = true;
    clip(b.ranges, 0, c.lo < c.hi ? c.lo : n, v.ranges);
    if (c.lo < c.hi) {
      clip(a.ranges, c.lo, c.hi, v.ranges);
      clip(b.ranges, c.hi, n, v.ranges);
    }
  }
  const Value& last = vals.back();
  if (!where || last.mask) return false;
  out = last.ranges;
  return true;
}

}  // namespace

bool run_concat(const Program& p) {
  std::vector<Range> ranges;
  if (!as_ranges(p, ranges)) return false;
  const int64_t es = static_cast<int64_t>(rvl::dtype_size(p.out.dtype));
  std::byte* const out = p.out.data + p.out.offset * es;
  // Output elements [b, e): each range's part of it copied or zeroed.
  auto copy = [&](int64_t b, int64_t e) {
    for (const Range& r : ranges) {
      const int64_t lo = std::max(r.begin, b), hi = std::min(r.end, e);
      if (lo >= hi) continue;
      std::byte* o = out + lo * es;
      if (r.input < 0) {
        std::memset(o, 0, static_cast<size_t>((hi - lo) * es));
      } else {
        const View& x = p.inputs[static_cast<size_t>(r.input)];
        std::memcpy(o, x.data + (x.offset + lo) * es, static_cast<size_t>((hi - lo) * es));
      }
    }
  };
  const int64_t n = p.shape[0], chunk = std::max<int64_t>(1, (64 << 10) / es);  // 64 KiB per task
  parallel_for_work(0, (n + chunk - 1) / chunk, 1, n, [&](const tbb::blocked_range<int64_t>& r) {
    copy(r.begin() * chunk, std::min(n, r.end() * chunk));
  });
  return true;
}

}  // namespace tbbcpu
