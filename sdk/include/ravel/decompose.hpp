// Decompositions: how a kernel program is rewritten for a device that lacks some of its ops.
//
// Since ABI 1.6 a device states the rows of RVL_OP_LIST it implements
// (rvl_device_properties.ops). The host runs nothing a device lacks: before a kernel is sent it
// rewrites every such instruction into instructions the device has, using the table below, or
// refuses the kernel naming the op, its dtype and the device (docs/ops.md, "Decompositions").
// tinygrad does the same for transcendentals (codegen/decomp); ggml asks supports_op.
//
// Header-only C++17 over <ravel/backend.h> and <ravel/op_table.hpp>, so the core (at lowering,
// core/src/schedule/recipe.cpp) and ravel-conformance (its --decompose run, which makes every
// plugin execute every decomposition) share one table without the conformance runner linking
// the core. Each row is checked against the reference interpreter on edge values
// (tests/sdk/test_decompose.cpp).
//
// A decomposition is written over the rewriter's emit(), so its own ops may be missing too: they
// are decomposed in turn (depth-limited: a cycle, XOR -> CMPNE -> ... on a device lacking
// both, ends in a refusal, not a loop).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <ravel/backend.h>
#include <ravel/op_table.hpp>

namespace rvl {

// A device's op mask as the host reads it (backend.h, rvl_device_properties.ops): 0 is the 1.0
// table, the structural rows are always there, rows this header does not know are dropped.
constexpr uint64_t effective_ops(uint64_t declared) noexcept {
  return ((declared == 0 ? RVL_OPS_1_0 : declared) | RVL_OPS_REQUIRED) & RVL_OPS_ALL;
}
constexpr bool ops_have(uint64_t ops, int32_t op) noexcept { return op_valid(op) && ((ops >> op) & 1u); }

namespace decompose_detail {
// (<ravel/backend.hpp> has these too, but the core does not include the plugin helper.)
inline const char* dtype_text(int32_t dtype) noexcept {
  static const char* const names[] = {"bool", "u8", "i32", "i64", "f32", "f64", "f16",
                                      "bf16", "i8",  "i16", "u16", "u32", "u64"};
  static_assert(sizeof names / sizeof names[0] == RVL_DTYPE_COUNT_, "a name per dtype");
  return dtype >= 0 && dtype < RVL_DTYPE_COUNT_ ? names[dtype] : "?";
}
constexpr bool is_float(int32_t dtype) noexcept {
  return dtype == RVL_DTYPE_F32 || dtype == RVL_DTYPE_F64 || dtype == RVL_DTYPE_F16 || dtype == RVL_DTYPE_BF16;
}
}  // namespace decompose_detail

class Rewriter;

// One row: `op` on sources of a dtype `applies` accepts becomes `expand`'s instructions.
struct Decomposition {
  int32_t op;
  bool (*applies)(int32_t source_dtype);
  const char* formula;  // for docs, errors and RAVEL_DEBUG
  // Emits the replacement of `in` (sources already rewritten to `s`) and returns its index.
  int32_t (*expand)(Rewriter& r, const rvl_instruction& in, int32_t source_dtype, const int32_t* s);
};

// Builds the rewritten instruction list; emit() decomposes what `ops` lacks.
class Rewriter {
 public:
  explicit Rewriter(uint64_t ops) : ops_(effective_ops(ops)) {}

  int32_t emit(int32_t op, int32_t dtype, int32_t a = -1, int32_t b = -1, int32_t c = -1);
  int32_t constant(int32_t dtype, double value) {
    rvl_instruction in = blank(RVL_OP_CONST, dtype);
    if (decompose_detail::is_float(dtype)) in.value.f = value;
    else in.value.i = static_cast<int64_t>(value);
    return push(in);
  }
  int32_t dtype_of(int32_t i) const { return out_[static_cast<size_t>(i)].dtype; }
  // A copy of instruction `i` as a new last instruction (a program's result is its last one).
  int32_t copy(int32_t i) {
    const int32_t t = dtype_of(i);
    return ops_have(ops_, RVL_OP_CAST) ? emit(RVL_OP_CAST, t, i) : emit(RVL_OP_MUL, t, i, constant(t, 1));
  }
  // x is not NaN (true for every non-float x): x < inf or -inf < x, one of which holds for
  // every other value.
  int32_t not_nan(int32_t x) {
    const int32_t t = dtype_of(x);
    if (!decompose_detail::is_float(t)) return constant(RVL_DTYPE_BOOL, 1);
    return emit(RVL_OP_ADD, RVL_DTYPE_BOOL, emit(RVL_OP_CMPLT, RVL_DTYPE_BOOL, x, constant(t, INFINITY)),
                emit(RVL_OP_CMPLT, RVL_DTYPE_BOOL, constant(t, -INFINITY), x));
  }

  // Copies `in[0..n)` with every instruction the ops lack rewritten. False (and error()) when
  // some instruction has no decomposition into the ops.
  bool rewrite(const rvl_instruction* in, int32_t n);
  const std::vector<rvl_instruction>& result() const { return out_; }
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  uint64_t ops() const { return ops_; }

 private:
  static rvl_instruction blank(int32_t op, int32_t dtype) {
    rvl_instruction in{};
    in.op = op;
    in.dtype = dtype;
    in.src[0] = in.src[1] = in.src[2] = -1;
    return in;
  }
  int32_t push(const rvl_instruction& in) {
    out_.push_back(in);
    return static_cast<int32_t>(out_.size() - 1);
  }
  uint64_t ops_;
  int depth_ = 0;
  std::vector<rvl_instruction> out_;
  std::string error_;
};

namespace decompose_detail {
inline bool any(int32_t) { return true; }
inline bool non_bool(int32_t t) { return t != RVL_DTYPE_BOOL; }
inline bool floats(int32_t t) { return decompose_detail::is_float(t); }
inline bool only_bool(int32_t t) { return t == RVL_DTYPE_BOOL; }
inline bool not_float(int32_t t) { return !decompose_detail::is_float(t); }

// NEG x = x * -1: exact for floats (signed zeros and NaN included) and wraps like NEG for ints
// (-1 is 255 in u8).
inline int32_t neg(Rewriter& r, const rvl_instruction& in, int32_t, const int32_t* s) {
  return r.emit(RVL_OP_MUL, in.dtype, s[0], r.constant(in.dtype, -1));
}
// SQRT x: y = 2^(log2(x) / 2), then one Newton step (y + x / y) / 2, which squares y's
// relative error (a transcendental's few ulps times |log2 x| become far below one ulp) and
// leaves the rounding of four operations. 0, +inf, NaN and negatives keep y itself, which is
// already right there (0, inf, NaN, NaN) and where the Newton step would give NaN.
inline int32_t sqrt(Rewriter& r, const rvl_instruction& in, int32_t, const int32_t* s) {
  const int32_t t = in.dtype, x = s[0];
  const int32_t y = r.emit(RVL_OP_EXP2, t, r.emit(RVL_OP_MUL, t, r.emit(RVL_OP_LOG2, t, x), r.constant(t, 0.5)));
  const int32_t q = r.emit(RVL_OP_MUL, t, x, r.emit(RVL_OP_RECIP, t, y));
  const int32_t newton = r.emit(RVL_OP_MUL, t, r.emit(RVL_OP_ADD, t, y, q), r.constant(t, 0.5));
  const int32_t finite_positive = r.emit(RVL_OP_MUL, RVL_DTYPE_BOOL, r.emit(RVL_OP_CMPLT, RVL_DTYPE_BOOL, r.constant(t, 0), x),
                                         r.emit(RVL_OP_CMPLT, RVL_DTYPE_BOOL, x, r.constant(t, INFINITY)));
  return r.emit(RVL_OP_WHERE, t, finite_positive, newton, y);
}
// MAX a b = a < b ? b : a, and b where b is NaN (a NaN a already wins: a < NaN is false).
inline int32_t max(Rewriter& r, const rvl_instruction& in, int32_t t, const int32_t* s) {
  const int32_t pick = r.emit(RVL_OP_WHERE, in.dtype, r.emit(RVL_OP_CMPLT, RVL_DTYPE_BOOL, s[0], s[1]), s[1], s[0]);
  if (!decompose_detail::is_float(t)) return pick;
  return r.emit(RVL_OP_WHERE, in.dtype, r.not_nan(s[1]), pick, s[1]);
}
// CMPNE a b = a < b or b < a, or either is NaN (NaN != anything). Bool "or" is ADD, "and" MUL.
inline int32_t cmpne(Rewriter& r, const rvl_instruction&, int32_t t, const int32_t* s) {
  const int32_t ordered = r.emit(RVL_OP_ADD, RVL_DTYPE_BOOL, r.emit(RVL_OP_CMPLT, RVL_DTYPE_BOOL, s[0], s[1]),
                                 r.emit(RVL_OP_CMPLT, RVL_DTYPE_BOOL, s[1], s[0]));
  if (!decompose_detail::is_float(t)) return ordered;
  const int32_t both = r.emit(RVL_OP_MUL, RVL_DTYPE_BOOL, r.not_nan(s[0]), r.not_nan(s[1]));
  return r.emit(RVL_OP_WHERE, RVL_DTYPE_BOOL, both, ordered, r.constant(RVL_DTYPE_BOOL, 1));
}
// On bool, AND is MUL, OR is ADD and XOR is CMPNE (the ABI defines bool ADD/MUL as or/and).
inline int32_t bool_and(Rewriter& r, const rvl_instruction&, int32_t, const int32_t* s) {
  return r.emit(RVL_OP_MUL, RVL_DTYPE_BOOL, s[0], s[1]);
}
inline int32_t bool_or(Rewriter& r, const rvl_instruction&, int32_t, const int32_t* s) {
  return r.emit(RVL_OP_ADD, RVL_DTYPE_BOOL, s[0], s[1]);
}
inline int32_t bool_xor(Rewriter& r, const rvl_instruction&, int32_t, const int32_t* s) {
  return r.emit(RVL_OP_CMPNE, RVL_DTYPE_BOOL, s[0], s[1]);
}
// TRUNC of an integer or bool is the value itself.
inline int32_t trunc_int(Rewriter&, const rvl_instruction&, int32_t, const int32_t* s) { return s[0]; }
// TRUNC x for floats: a round trip through an integer (CAST truncates toward zero) where
// |x| < 2^(mantissa bits), where that integer is exact; beyond it (and for inf, NaN) every float
// is already integral, so x itself. The one difference from trunc: a negative x above -1 gives
// +0, not -0 (equal as values; the ABI's EXACT class compares values).
inline int32_t trunc_float(Rewriter& r, const rvl_instruction& in, int32_t, const int32_t* s) {
  const int32_t t = in.dtype, x = s[0];
  const bool f32 = t == RVL_DTYPE_F32;
  const double big = f32 ? 8388608.0 : 4503599627370496.0;  // 2^23, 2^52
  const int32_t it = f32 ? RVL_DTYPE_I32 : RVL_DTYPE_I64;
  const int32_t small = r.emit(RVL_OP_MUL, RVL_DTYPE_BOOL, r.emit(RVL_OP_CMPLT, RVL_DTYPE_BOOL, x, r.constant(t, big)),
                               r.emit(RVL_OP_CMPLT, RVL_DTYPE_BOOL, r.constant(t, -big), x));
  return r.emit(RVL_OP_WHERE, t, small, r.emit(RVL_OP_CAST, t, r.emit(RVL_OP_CAST, it, x)), x);
}
}  // namespace decompose_detail

// THE table. An (op, dtype) without a row cannot be lacked: a kernel using it on a device
// without it is refused (docs/ops.md lists which). Polynomial transcendentals (tinygrad's
// xexp2/xlog2/xsin, over ADD/MUL/CAST) are the obvious next rows.
inline const std::vector<Decomposition>& decompositions() {
  namespace d = decompose_detail;
  static const std::vector<Decomposition> table = {
      {RVL_OP_NEG, d::non_bool, "x * -1", d::neg},
      {RVL_OP_SQRT, d::floats, "y = 2^(log2(x) * 0.5); 0 < x < inf ? (y + x * recip(y)) * 0.5 : y", d::sqrt},
      {RVL_OP_TRUNC, d::not_float, "x", d::trunc_int},
      {RVL_OP_TRUNC, d::floats, "|x| < 2^mantissa ? cast(cast(x, int)) : x", d::trunc_float},
      {RVL_OP_MAX, d::any, "not_nan(b) ? (a < b ? b : a) : b", d::max},
      {RVL_OP_CMPNE, d::any, "(a < b) + (b < a), or true where a or b is NaN", d::cmpne},
      {RVL_OP_AND, d::only_bool, "a * b (bool)", d::bool_and},
      {RVL_OP_OR, d::only_bool, "a + b (bool)", d::bool_or},
      {RVL_OP_XOR, d::only_bool, "a != b", d::bool_xor},
  };
  return table;
}

// The row for `op` on sources of `dtype`, or nullptr.
inline const Decomposition* find_decomposition(int32_t op, int32_t dtype) {
  for (const Decomposition& d : decompositions())
    if (d.op == op && d.applies(dtype)) return &d;
  return nullptr;
}

inline int32_t Rewriter::emit(int32_t op, int32_t dtype, int32_t a, int32_t b, int32_t c) {
  rvl_instruction in = blank(op, dtype);
  in.src[0] = a;
  in.src[1] = b;
  in.src[2] = c;
  if (ops_have(ops_, op) || failed()) return push(in);
  // The dtype a row is chosen by: the sources' (WHERE: the values'), CAST: its source's.
  const int32_t src = op == RVL_OP_WHERE ? b : a;
  const int32_t t = src >= 0 ? dtype_of(src) : dtype;
  const Decomposition* d = find_decomposition(op, t);
  constexpr int kMaxDepth = 6;
  if (d == nullptr || depth_ >= kMaxDepth) {
    error_ = std::string("op ") + op_info(op).name + " on " + decompose_detail::dtype_text(t) +
             (d == nullptr ? " is not implemented and has no decomposition"
                           : " is not implemented and its decompositions need each other") +
             " (rvl::decompositions() lists the rows; docs/ops.md, \"Decompositions\")";
    return push(in);  // keeps indices valid; the caller discards the result
  }
  ++depth_;
  const int32_t s[3] = {a, b, c};
  const int32_t r = d->expand(*this, in, t, s);
  --depth_;
  return r;
}

inline bool Rewriter::rewrite(const rvl_instruction* in, int32_t n) {
  out_.clear();
  error_.clear();
  std::vector<int32_t> map(static_cast<size_t>(n > 0 ? n : 0), -1);
  for (int32_t i = 0; i < n && !failed(); ++i) {
    const rvl_instruction& x = in[i];
    if (!op_valid(x.op) || op_info(x.op).arity == 0 || ops_have(ops_, x.op)) {
      rvl_instruction y = x;  // LOAD, CONST, ACC, what the device has, and invalid ops (for the validator)
      for (int k = 0; k < 3; ++k)
        if (y.src[k] >= 0 && y.src[k] < i) y.src[k] = map[static_cast<size_t>(y.src[k])];
      map[static_cast<size_t>(i)] = push(y);
      continue;
    }
    int32_t s[3] = {-1, -1, -1};
    for (int k = 0; k < op_info(x.op).arity; ++k) {
      if (x.src[k] < 0 || x.src[k] >= i) {  // malformed: leave it for the validator to name
        error_ = std::string("instruction ") + std::to_string(i) + " (" + op_info(x.op).name +
                 ") names source " + std::to_string(x.src[k]) + ", not an earlier instruction";
        return false;
      }
      s[k] = map[static_cast<size_t>(x.src[k])];
    }
    map[static_cast<size_t>(i)] = emit(x.op, x.dtype, s[0], s[1], s[2]);
  }
  if (failed()) return false;
  // The program's result is its last instruction: it must stay last.
  if (n > 0 && map[static_cast<size_t>(n - 1)] != static_cast<int32_t>(out_.size()) - 1)
    copy(map[static_cast<size_t>(n - 1)]);
  if (out_.size() > static_cast<size_t>(RVL_MAX_INSTRUCTIONS)) {
    error_ = "the rewritten program has " + std::to_string(out_.size()) + " instructions, more than RVL_MAX_INSTRUCTIONS (" +
             std::to_string(RVL_MAX_INSTRUCTIONS) + ")";
    return false;
  }
  return !failed();
}

}  // namespace rvl
