// f16 and bf16 kernels: rewritten to compute in f32 (Note [Halves in f32]).
#include "kernel.hpp"

#include "gemm_blocked.hpp"
#include "gemm_small.hpp"
#include "half_convert.hpp"

#include <ravel/backend.hpp>
#include <ravel/half.hpp>

#include <cstring>
#include <memory>
#include <vector>

namespace tbbcpu {

// Note [Halves in f32]
// The typed array loops have no f16/bf16 rows; the ABI says a half kernel computes in f32 and
// rounds once where a value is stored or explicitly cast (backend.h, docs/dtypes.md). So a
// kernel that touches a half dtype is rewritten into an f32 kernel around the only half
// operations the tables have, the casts (dtype_ops.hpp s_cast, rounding with <ravel/half.hpp>):
//  - LOAD of a half view stays (2-byte loads), followed by CAST to f32;
//  - CONST of a half becomes an f32 CONST of the value rounded to the half (exact in f32);
//  - CAST to a half becomes CAST to the half then back to f32: it rounds, and the value goes on
//    in f32; every other instruction of a half dtype becomes f32 (ACC included);
//  - an elementwise program whose output is a half ends with CAST to it, stored as 2 bytes;
//  - a reduction (accumulating in f32) writes an f32 copy of its (reduced, so small) output,
//    rounded into the output view with the vector conversions (WideOutput);
//  - a contraction's epilogue ends with the CAST to the output's half, stored as 2 bytes, like
//    an elementwise program. Its A and B are read as halves and widened to f32 while packing
//    (Note [Half panels] in gemm_pack.hpp), f32 micro-kernels accumulating; a product small
//    enough for the unpacked path (Note [Small GEMM]) widens A and B into per-thread f32
//    buffers first (vector conversions over the addressed range: a few KiB at those sizes).
// The conversions are vector loops chosen at run time (half_convert.cpp: F16C for f16, integer
// rounding for bf16), the scalar <ravel/half.hpp> ones with RAVEL_TBB_SIMD=portable.
namespace half_detail {

bool is_half(int32_t dt) { return rvl::dtype_is_half(dt); }

bool program_has_half(const Program& p) {
  if (is_half(p.out.dtype)) return true;
  for (const View& v : p.inputs)
    if (is_half(v.dtype)) return true;
  for (int32_t j = 0; j < p.n_ins; ++j)
    if (is_half(p.ins[j].dtype)) return true;
  return false;
}

double round_to_half(int32_t dt, double x) {
  return dt == RVL_DTYPE_F16 ? rvl::f32_from_f16_bits(rvl::f16_bits_from(x))
                             : rvl::f32_from_bf16_bits(rvl::bf16_bits_from(x));
}

rvl_instruction make(int32_t op, int32_t dt, int32_t s0 = -1) {
  rvl_instruction i{};
  i.op = op;
  i.dtype = dt;
  i.src[0] = s0;
  i.src[1] = i.src[2] = -1;
  return i;
}

// The f32 rewrite of `p`'s instructions (the Note); `half_out`: end with a CAST to the output's
// half dtype.
std::vector<rvl_instruction> widen(const Program& p, bool half_out) {
  std::vector<rvl_instruction> code;
  std::vector<int32_t> at(static_cast<size_t>(p.n_ins));  // old index -> new index of its value
  auto f32_of = [](int32_t dt) { return is_half(dt) ? int32_t{RVL_DTYPE_F32} : dt; };
  for (int32_t j = 0; j < p.n_ins; ++j) {
    rvl_instruction I = p.ins[j];
    for (int k = 0; k < 3; ++k)
      if (I.src[k] >= 0) I.src[k] = at[static_cast<size_t>(I.src[k])];
    const int32_t dt = I.dtype;
    if (I.op == RVL_OP_LOAD && is_half(dt)) {
      code.push_back(I);
      code.push_back(make(RVL_OP_CAST, RVL_DTYPE_F32, static_cast<int32_t>(code.size()) - 1));
    } else if (I.op == RVL_OP_CONST && is_half(dt)) {
      I.dtype = RVL_DTYPE_F32;
      I.value.f = round_to_half(dt, I.value.f);
      code.push_back(I);
    } else if (I.op == RVL_OP_CAST) {
      const int32_t from = code[static_cast<size_t>(I.src[0])].dtype;
      if (is_half(dt)) {
        code.push_back(make(RVL_OP_CAST, dt, I.src[0]));
        code.push_back(make(RVL_OP_CAST, RVL_DTYPE_F32, static_cast<int32_t>(code.size()) - 1));
      } else if (from == dt) {
        at[static_cast<size_t>(j)] = I.src[0];  // a half widened to f32 is already f32
        continue;
      } else {
        code.push_back(I);
      }
    } else {
      I.dtype = f32_of(dt);
      code.push_back(I);
    }
    at[static_cast<size_t>(j)] = static_cast<int32_t>(code.size()) - 1;
  }
  // The last instruction is the program's value.
  if (at.back() != static_cast<int32_t>(code.size()) - 1)
    code.push_back(make(RVL_OP_CAST, code[static_cast<size_t>(at.back())].dtype, at.back()));
  if (half_out) code.push_back(make(RVL_OP_CAST, p.out.dtype, static_cast<int32_t>(code.size()) - 1));
  return code;
}

// The lowest and highest element addresses `v` reaches over `shape` (no validity mask).
void address_range(const View& v, int32_t rank, const int64_t* shape, int64_t& lo, int64_t& hi) {
  lo = hi = v.offset;
  for (int32_t d = 0; d < rank; ++d) {
    const int64_t span = (shape[d] - 1) * v.stride[d];
    (span < 0 ? lo : hi) += span;
  }
}

// Widens the elements the half view `v` (rank/shape, none empty) addresses into `buf` (an f32
// copy of the address range, one vector conversion) and re-aims `v` at it; false, with nothing
// done, when that range is much larger than the elements (a sliver of a big buffer).
bool widen_into(std::vector<float>& buf, View& v, int32_t rank, const int64_t* shape) {
  int64_t lo = 0, hi = 0, count = 1;
  for (int32_t d = 0; d < rank; ++d) count *= shape[d];
  address_range(v, rank, shape, lo, hi);
  const int64_t n = hi - lo + 1;
  if (n > 4 * count + 4096) return false;
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(static_cast<size_t>(n));
  const auto* src = reinterpret_cast<const uint16_t*>(v.data) + lo;
  v.dtype == RVL_DTYPE_F16 ? f16_to_f32(buf.data(), src, n) : bf16_to_f32(buf.data(), src, n);
  v.data = reinterpret_cast<std::byte*>(buf.data());
  v.offset -= lo;
  v.dtype = RVL_DTYPE_F32;
  return true;
}

// An f32 scratch output for the half view `out` (kept axes only: `skip` marks reduced axes) and
// the rounding of what was written there back into `out`.
struct WideOutput {
  View half, wide;
  int64_t lo = 0;
  std::unique_ptr<float[]> mem;
  int32_t rank = 0;
  int64_t shape[RVL_MAX_RANK] = {};

  WideOutput(const View& out, int32_t r, const int64_t* s, uint32_t skip) : half(out), wide(out), rank(r) {
    wide.dtype = RVL_DTYPE_F32;  // even with no outputs: no f16 reduction or GEMM is ever run
    for (int32_t d = 0; d < r; ++d) shape[d] = (skip >> d) & 1u ? 1 : s[d];
    for (int32_t d = 0; d < r; ++d)
      if (shape[d] == 0) return;
    int64_t hi = 0;
    address_range(out, r, shape, lo, hi);
    // Not zero-filled: the reduction writes every element `store` reads back.
    mem.reset(new float[static_cast<size_t>(hi - lo + 1)]);
    wide.data = reinterpret_cast<std::byte*>(mem.get());
    wide.offset -= lo;
  }
  // Rounds the f32 results into the half view: runs along a contiguous last axis with the
  // vector conversions, single elements otherwise.
  void store() const {
    if (!mem) return;
    const bool f16 = half.dtype == RVL_DTYPE_F16;
    const int32_t last = rank - 1;
    const bool runs = rank > 0 && half.stride[last] == 1;
    const int64_t len = runs ? shape[last] : 1;
    int64_t idx[RVL_MAX_RANK] = {};
    while (true) {
      int64_t a = half.offset;
      for (int32_t d = 0; d < rank; ++d) a += idx[d] * half.stride[d];
      const float* x = mem.get() + (a - lo);
      auto* dst = reinterpret_cast<uint16_t*>(half.data) + a;
      f16 ? f32_to_f16(dst, x, len) : f32_to_bf16(dst, x, len);
      int32_t d = runs ? last - 1 : last;
      for (; d >= 0; --d) {
        if (++idx[d] < shape[d]) break;
        idx[d] = 0;
      }
      if (d < 0) return;
    }
  }
};

}  // namespace half_detail

void run_kernel(const Program& p) {
  using namespace half_detail;
  if (!p.stages.empty()) return run_chain(p);          // ABI 1.11; its parts come back here
  if (p.n_epilogue > 0) return run_with_epilogue(p);  // its parts come back here
  if (!program_has_half(p)) return run_program(p);
  const bool half_out = is_half(p.out.dtype);
  Program w = p;
  if (p.reduce_op == RVL_REDUCE_NONE) {
    const std::vector<rvl_instruction> code = widen(p, half_out);
    w.ins = code.data();
    w.n_ins = static_cast<int32_t>(code.size());
    return run_program(w);
  }
  const std::vector<rvl_instruction> code = widen(p, false);
  w.ins = code.data();
  w.n_ins = static_cast<int32_t>(code.size());
  if (!half_out) return run_program(w);
  WideOutput o(p.out, p.rank, p.shape, p.reduce_axes);
  w.out = o.wide;
  run_program(w);
  o.store();
}

void run_kernel(const Contraction& c) {
  using namespace half_detail;
  if (!is_half(c.dtype) && !program_has_half(c.epilogue)) return run_contraction(c);
  // Halves are packed through their 1.0 views; the host never sends a half contraction with
  // multi-axis groups (schedule/contraction.cpp), and one that arrives is refused.
  if (is_half(c.dtype) && c.multi_axis())
    throw rvl::Error(RVL_STATUS_UNSUPPORTED, "contraction: multi-axis groups (ABI 1.8) are not supported for f16/bf16");
  Contraction w = c;
  const std::vector<rvl_instruction> code = widen(c.epilogue, is_half(c.epilogue.out.dtype));
  w.epilogue.ins = code.data();
  w.epilogue.n_ins = static_cast<int32_t>(code.size());
  if (!is_half(c.dtype)) return run_contraction(w);
  const Evaluator ep(w.epilogue);
  if (gemm_small_half(w, ep)) return;  // Note [Half operands of the small GEMM]
  if (gemm_small_fits(c)) {
    // N == 1 (Note [Batched dot products]). Per-thread, grow-only: gemm_small never enters oneTBB, so nothing else runs on this
    // thread while they are in use.
    thread_local std::vector<float> a_buf, b_buf;
    const int32_t r = c.batch_rank + 2;
    int64_t sa[RVL_MAX_RANK] = {}, sb[RVL_MAX_RANK] = {};
    for (int32_t d = 0; d < c.batch_rank; ++d) sa[d] = sb[d] = c.batch_shape[d];
    sa[c.batch_rank] = c.m, sa[c.batch_rank + 1] = c.k;
    sb[c.batch_rank] = c.k, sb[c.batch_rank + 1] = c.n;
    Contraction s32 = w;
    if (widen_into(a_buf, s32.a, r, sa) && widen_into(b_buf, s32.b, r, sb)) {
      s32.dtype = RVL_DTYPE_F32;
      if (gemm_small<RVL_DTYPE_F32>(s32, ep)) return;  // it takes what gemm_small_fits said
      // (and if it ever declined, the blocked path below still computes c)
    }
  }
  gemm_blocked_half(w, ep);
}

}  // namespace tbbcpu
