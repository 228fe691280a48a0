// The op table of backend.h (RVL_OP_LIST) as compile-time C++ data.
//
// backend.h's RVL_OP_LIST is the one place an instruction's ABI semantics are written: name,
// arity, which source dtypes it accepts, what dtype it returns, and how accurate a float result
// must be. Everything that needs one of those facts reads it here: the validator, the reference
// interpreter, the conformance harness (case lists and thresholds), the plugins' dispatch and
// code generators, the core's lowering and the tests. What an op *computes* is written once per
// backend kind, always as an exhaustive `switch` over rvl_op with no `default:`, so that
// -Werror=switch turns a forgotten op into a build error everywhere (docs/architecture.md,
// "Adding an op").
//
// Header-only, C++17, no exceptions, no allocation: device code generators (nvcc, hipcc) and
// third-party plugins include it as they are.
#ifndef RAVEL_OP_TABLE_HPP
#define RAVEL_OP_TABLE_HPP

#include <ravel/backend.h>

#include <array>
#include <cstdint>

namespace rvl {

// Which dtypes an op's sources may have. Unless SELECT, all sources share one dtype.
enum class OpAccepts : uint8_t {
  None,       // no sources (LOAD, CONST, ACC)
  Any,        // every dtype
  NonBool,    // every dtype but bool
  Float,      // f16, bf16, f32, f64
  IntOrBool,  // bool and the integer dtypes (u8, i8, i16, u16, i32, u32, i64, u64)
  Select,     // source 0 bool; sources 1 and 2 any dtype, equal to the result
};

// The instruction's own dtype, given its sources'.
enum class OpResult : uint8_t {
  Free,  // any dtype (LOAD: the input's; CONST: any; ACC: the contraction's; CAST: the target)
  Same,  // the sources' dtype (WHERE: the values')
  Bool,  // bool
};

// What conformance demands of a float result (integer and bool results are always exact).
enum class OpAccuracy : uint8_t {
  Exact,           // IEEE-exact operations (reordering of exact ops allowed)
  Rounding,        // division and square root: a few ulps (device compilers may not round them
                   // correctly by default, OpenCL allows 2.5-3 ulps)
  Transcendental,  // exp2, log2, sin: math-library accuracy
};

struct OpInfo {
  const char* name;  // as in backend.h: "ADD"
  int arity;         // sources read (0..3)
  OpAccepts accepts;
  OpResult result;
  OpAccuracy accuracy;
};

namespace op_table_detail {
// Maps the table's bare column tokens onto the enums above.
constexpr OpAccepts NONE = OpAccepts::None, ANY = OpAccepts::Any, NONBOOL = OpAccepts::NonBool,
                    FLOAT = OpAccepts::Float, INTBOOL = OpAccepts::IntOrBool,
                    SELECT = OpAccepts::Select;
constexpr OpResult FREE = OpResult::Free, SAME = OpResult::Same, BOOL = OpResult::Bool;
constexpr OpAccuracy EXACT = OpAccuracy::Exact, ROUNDING = OpAccuracy::Rounding,
                     TRANSCENDENTAL = OpAccuracy::Transcendental;

constexpr std::array<OpInfo, RVL_OP_COUNT_> kOps = {{
#define RVL_OP_TABLE_ROW_(name, arity, accepts, result, accuracy) \
  {#name, arity, accepts, result, accuracy},
    RVL_OP_LIST(RVL_OP_TABLE_ROW_)
#undef RVL_OP_TABLE_ROW_
}};
}  // namespace op_table_detail

// The whole table, indexed by rvl_op (for loops over every op: case lists, tests).
constexpr const std::array<OpInfo, RVL_OP_COUNT_>& op_table() { return op_table_detail::kOps; }

constexpr bool op_valid(int32_t op) noexcept { return op >= 0 && op < RVL_OP_COUNT_; }

// The row of a valid op (check op_valid first; an invalid op yields the LOAD row).
constexpr const OpInfo& op_info(int32_t op) noexcept {
  return op_table_detail::kOps[op_valid(op) ? op : 0];
}

// An op that reads sources and computes a value (not LOAD, CONST or ACC).
constexpr bool op_is_arithmetic(int32_t op) noexcept {
  return op_valid(op) && op_info(op).accepts != OpAccepts::None;
}

// Whether `dtype` may be the dtype of the op's sources (for SELECT: of the values). False for
// ops without sources.
constexpr bool op_accepts(int32_t op, int32_t dtype) noexcept {
  if (!op_valid(op) || dtype < 0 || dtype >= RVL_DTYPE_COUNT_) return false;
  const bool fp = dtype == RVL_DTYPE_F32 || dtype == RVL_DTYPE_F64 || dtype == RVL_DTYPE_F16 ||
                  dtype == RVL_DTYPE_BF16;
  switch (op_info(op).accepts) {
    case OpAccepts::None: return false;
    case OpAccepts::Any: return true;
    case OpAccepts::Select: return true;
    case OpAccepts::NonBool: return dtype != RVL_DTYPE_BOOL;
    case OpAccepts::Float: return fp;
    case OpAccepts::IntOrBool: return !fp;
  }
  return false;
}

// What op_accepts allows, in words, for error messages.
constexpr const char* op_accepts_text(int32_t op) noexcept {
  switch (op_info(op).accepts) {
    case OpAccepts::None: return "no sources";
    case OpAccepts::Any: return "any dtype";
    case OpAccepts::NonBool: return "a numeric dtype (not bool)";
    case OpAccepts::Float: return "a float dtype (f16, bf16, f32, f64)";
    case OpAccepts::IntOrBool: return "bool or an integer dtype";
    case OpAccepts::Select: return "a bool condition and values of any dtype";
  }
  return "";
}

// The result dtype for sources of `source_dtype` (the values' dtype for SELECT); -1 when the
// result is free (LOAD, CONST, ACC, CAST: the instruction names it).
constexpr int32_t op_result_dtype(int32_t op, int32_t source_dtype) noexcept {
  switch (op_info(op).result) {
    case OpResult::Free: return -1;
    case OpResult::Same: return source_dtype;
    case OpResult::Bool: return RVL_DTYPE_BOOL;
  }
  return -1;
}

// Conformance threshold on the normalised mean squared error of a float result of this
// accuracy class (0, i.e. exact, for other dtypes). Roughly: rms relative error of a couple of
// ulps for Exact, ~5 ulps for Rounding, ~15 ulps for Transcendental.
// Half dtypes (docs/dtypes.md, "Tolerances"): an rms relative error of one unit of the format's
// precision, 2^-10 for f16 and 2^-7 for bf16 (a result rounded once carries at most half of
// that), 4x that squared for Rounding and 16x for Transcendental: the f32 math under a half
// result is far more accurate than the final rounding.
constexpr double accuracy_threshold(OpAccuracy a, int32_t dtype) noexcept {
  if (dtype == RVL_DTYPE_F16 || dtype == RVL_DTYPE_BF16) {
    const double unit = dtype == RVL_DTYPE_F16 ? 1.0 / 1024 : 1.0 / 128;
    const double exact = unit * unit;
    switch (a) {
      case OpAccuracy::Exact: return exact;
      case OpAccuracy::Rounding: return 4 * exact;
      case OpAccuracy::Transcendental: return 16 * exact;
    }
    return 0;
  }
  const bool f32 = dtype == RVL_DTYPE_F32, f64 = dtype == RVL_DTYPE_F64;
  if (!f32 && !f64) return 0;
  switch (a) {
    case OpAccuracy::Exact: return f32 ? 1e-12 : 1e-26;
    case OpAccuracy::Rounding: return f32 ? 1e-11 : 1e-24;
    case OpAccuracy::Transcendental: return f32 ? 1e-10 : 1e-22;
  }
  return 0;
}

}  // namespace rvl

// `case RVL_OP_<NAME>:` for every row whose result rule is SAME or BOOL: the ops computed from
// sources of one declared dtype, which a table-driven evaluator handles generically (the tbb_cpu
// plugin's typed loops). Rows with a FREE result (LOAD, CONST, ACC, CAST) expand to nothing and
// still need cases of their own, so -Wswitch keeps the switch exhaustive:
//   switch (static_cast<rvl_op>(op)) {
//     case RVL_OP_LOAD: ...  case RVL_OP_CONST: ...  case RVL_OP_ACC: ...  case RVL_OP_CAST: ...
//     case RVL_OP_COUNT_: ...
//     RVL_OP_CASES_COMPUTED { ...generic... }
//   }
#define RVL_OP_CASE_IF_FREE_(name)
#define RVL_OP_CASE_IF_SAME_(name) case RVL_OP_##name:
#define RVL_OP_CASE_IF_BOOL_(name) case RVL_OP_##name:
#define RVL_OP_CASE_COMPUTED_(name, arity, accepts, result, accuracy) RVL_OP_CASE_IF_##result##_(name)
#define RVL_OP_CASES_COMPUTED RVL_OP_LIST(RVL_OP_CASE_COMPUTED_)

#endif  // RAVEL_OP_TABLE_HPP
