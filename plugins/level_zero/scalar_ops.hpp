// The scalar semantics of the kernel instructions (docs/abi.md §7), written out in SPIR-V.
//
// Values live in registers with the storage type of their dtype: bool and the 8/16/32/64-bit
// integers are integers of that width (a bool register always holds 0 or 1), f32/f64 IEEE
// floats, and f16/bf16 their bits in a 16-bit integer (Note [Halves in SPIR-V] in
// scalar_ops.cpp): kernels compute halves in f32 (lower::widen_halves), so a half register only
// exists between a LOAD and its widening CAST, and between a rounding CAST and a store. SPIR-V integers are sign-agnostic, so signedness is chosen per instruction
// (SDiv vs UDiv, SLessThan vs ULessThan, SConvert vs UConvert). Every edge case the ABI defines
// is spelled out with compares and selects instead of relying on what a device compiler does with
// an out-of-range conversion or a division by zero: those are undefined in SPIR-V and differ
// between IGC, PoCL and others.
#pragma once

#include <ravel/backend.h>

#include <utility>

#include <ravel/lowering/spirv_builder.hpp>

namespace rvl::l0 {

// The SPIR-V builder is the SDK's (sdk/lowering).
using lower::Id;
using lower::SpirvBuilder;
using lower::Words;

class ScalarOps {
 public:
  explicit ScalarOps(SpirvBuilder& b) : b_(b) {}

  Id type(int32_t dtype);       // register (and storage) type of a dtype
  Id zero(int32_t dtype);       // 0 / false / +0.0
  Id constant(const rvl_instruction& ins);  // CONST: value.f or value.i converted like CAST
  Id constant(int32_t dtype, const rvl_scalar& value);
  Id identity(int32_t reduce_op, int32_t dtype);  // lower::reduce_identity's value
  Id combine(int32_t reduce_op, int32_t dtype, Id a, Id b);  // ADD / MAX / MUL of the reduction
  // LOGSUMEXP (ABI 1.4): a partial result is (m, s), the running maximum and sum exp(x - m), in
  // the values' float dtype; the identity is (-inf, 0) and one element x is (x, 1). lse_merge
  // folds (m2, s2) into (m, s) with selects only: NaN, then +inf, is sticky in m, and a side whose
  // m is -inf contributes nothing (never -inf - -inf). lse_result is m + log(s) in `out_dtype`
  // (f64 for widening f32 values: only that sum is formed in f64), or m itself when it is NaN or
  // infinite.
  std::pair<Id, Id> lse_merge(int32_t dtype, Id m, Id s, Id m2, Id s2);
  Id lse_result(int32_t dtype, int32_t out_dtype, Id m, Id s);

  // One instruction other than LOAD / CONST / ACC; `src_dtype` is the dtype of its sources
  // (for WHERE, of sources 1 and 2).
  Id apply(int32_t op, int32_t dtype, int32_t src_dtype, Id a, Id b, Id c);

  Id cast(int32_t from, int32_t to, Id v);
  Id to_cond(int32_t dtype, Id v);  // OpTypeBool: v != 0 (NaN is true)
  Id from_cond(Id cond);            // bool register (u8 0/1) from an OpTypeBool
  Id normalize_bool(Id stored);     // a stored byte other than 0 reads as true

 private:
  Id add(int32_t dt, Id a, Id b);
  Id mul(int32_t dt, Id a, Id b);
  Id max(int32_t dt, Id a, Id b);
  Id idiv(int32_t dt, Id a, Id b);
  Id mod(int32_t dt, Id a, Id b);
  Id less(int32_t dt, Id a, Id b);  // OpTypeBool
  Id float_to_int(int32_t from, int32_t to, Id v);
  Id half_to_f32(int32_t from, Id bits16);           // exact
  Id narrow_to_half(int32_t from, int32_t to, Id v);  // f32/f64 -> f16/bf16 bits, RNE
  Id select(int32_t dt, Id cond, Id a, Id b);
  Id cond_type();

  SpirvBuilder& b_;
};

}  // namespace rvl::l0
