// The scalar semantics of kernel programs rendered as C-family source, for every backend whose
// device compiler takes C: HIP/CUDA C++ (plugins/hip, through hiprtc/NVRTC) and OpenCL C. One
// exhaustive switch over rvl_op (no default: under -Werror=switch a new op breaks the build until
// it is given code here, Note [One op table]), one table of edge-case helpers (the prelude), and
// exact literals. A Dialect says how the language spells what differs: 64-bit integer types,
// bit casts, float math names, function qualifiers. Kernel structure (loops, trees, tiles) is
// the backend's; this renders instructions.
#pragma once

#include <ravel/backend.h>
#include <ravel/lowering/space.hpp>

#include <functional>
#include <string>
#include <vector>

namespace rvl::lower::c {

struct Dialect {
  const char* i64;          // 64-bit signed type
  const char* u64;          // 64-bit unsigned type
  const char* i64_suffix;   // literal suffix of 64-bit integer constants
  const char* bits_f32;     // int bits -> float
  const char* bits_f64;     // 64-bit integer bits -> double
  const char* f32_math;     // suffix of f32 math functions ("f": sqrtf; OpenCL C overloads sqrt)
  const char* fn;           // qualifiers of an inlined helper
  const char* fn_noinline;  // qualifiers of a helper called out of line
  const char* f32_bits;     // float -> its bits as a 32-bit unsigned int (the half conversions)
  const char* f64_bits;     // double -> its bits as a 64-bit integer
};
// HIP and CUDA C++ (hiprtc, NVRTC, and the CPU emulator's host compiler).
inline constexpr Dialect kHip{"long long", "unsigned long long", "LL", "__int_as_float",
                              "__longlong_as_double", "f", "static __device__ __forceinline__",
                              "static __device__ __noinline__", "__float_as_uint",
                              "__double_as_longlong"};
// OpenCL C 1.2 (long is 64 bits; math functions are overloaded).
inline constexpr Dialect kOpenCL{"long", "ulong", "L", "as_float", "as_double", "",
                                 "static inline", "static __attribute__((noinline))", "as_uint",
                                 "as_ulong"};

// Spelling of a dtype (bool is one byte holding 0 or 1; f16 and bf16 are their bits in an
// unsigned short, Note [Half storage] in c_source.cpp).
const char* ctype(const Dialect& d, int32_t dtype);
// The unsigned type integer arithmetic wraps in (signed overflow is undefined in C).
const char* utype(const Dialect& d, int32_t dtype);
// An exact literal of `dtype` (floats by bit pattern: NaN, inf and -0 survive).
std::string literal(const Dialect& d, int32_t dtype, const rvl_scalar& value);
std::string float_bits_literal(const Dialect& d, int32_t dtype, double v);

struct SsaInput {
  SsaInput() = default;
  // Lists of more than 128 instructions call transcendentals out of line (compile time).
  SsaInput(const rvl_instruction* list, int32_t count, std::function<std::string(int32_t)> loads, std::string acc_expr = {})
      : ins(list), n(count), load(std::move(loads)), acc(std::move(acc_expr)), outline(count > 128) {}
  const rvl_instruction* ins = nullptr;
  int32_t n = 0;
  // Expression reading input `arg` (already 0 outside its validity range, bool as 0/1).
  std::function<std::string(int32_t arg)> load;
  std::string acc;  // expression for ACC (contraction and row epilogues)
  // A chain (ABI 1.11): ACC with arg k reads accs[k] (0: the program's own reduced value, k >= 1:
  // stage k - 1's), each already in its compute dtype (a half's value widened to f32). Empty:
  // every ACC is `acc`.
  std::vector<std::string> accs;
  // Long programs call transcendentals out of line (rvl_ol_*): same results, bounded code size.
  bool outline = false;
};
// The expression converting x from dtype `from` to `to` with the CAST rules (docs/abi.md 7):
// halves round to nearest even from the source value itself (rvl_f32_to_f16, rvl_f64_to_bf16,
// ...), widen exactly; float -> integer truncates and saturates. Renderers store a kernel's f32
// value into a half output with it (Note [Halves in kernels]).
std::string convert(const Dialect& d, int32_t to, int32_t from, const std::string& x);

// Appends "const T v<j> = ...;" for every instruction; returns the last value's name.
std::string emit_ssa(const Dialect& d, std::string& out, const SsaInput& in, const std::string& indent);

// The reduction's combine of two values of `dtype`, and its identity (lower::reduce_identity).
std::string combine(const Dialect& d, int32_t reduce_op, int32_t dtype, const std::string& a,
                    const std::string& b);
std::string identity(const Dialect& d, int32_t reduce_op, int32_t dtype);
// acc + a * b in the contraction's dtype (FMA for floats).
std::string multiply_add(const Dialect& d, int32_t dtype, const std::string& acc,
                         const std::string& a, const std::string& b);

// ---- views of a simplified space (lower::simplify), every constant baked in ------------------
// "i3" for axis 3, and the names of axes 0..rank-1.
std::string index_name(size_t axis);
std::vector<std::string> index_names(size_t rank);
// Declarations "const IDX i2 = ...;" decomposing `linear` over the listed axes (last fastest).
std::string decompose(const std::string& idx_t, const std::string& linear,
                      const std::vector<size_t>& axes, const std::vector<int64_t>& extent,
                      const std::string& indent);
// "(offset + i0 * s0 + ...)" over the named axes (axes with stride 0 or no name are left out).
std::string address(const SpaceView& v, const std::vector<std::string>& idx);
// "(i0 >= lo && i0 < hi) && ...", only for axes where the view is padded; "" when always valid.
std::string validity(const SpaceView& v, const std::vector<std::string>& idx,
                     const std::vector<int64_t>& extent);
// Normalises a raw element read of dtype dt: bool bytes become 0/1.
std::string normalise(int32_t dtype, const std::string& raw);
// Element idx of `v` through pointer `param`: 0 where invalid (never addressed), bool as 0/1.
std::string load(const Dialect& d, const SpaceView& v, const std::string& param,
                 const std::vector<std::string>& idx, const std::vector<int64_t>& extent);

// ---- row epilogues (ABI 1.10, Note [Row epilogues on GPUs] in c_row_epilogue.cpp) -----------
// Statements running program `p`'s row epilogue for the output whose kept indices are declared
// (index names of lower::c::index_names): a loop over its reduced sub-space from `first`, every
// `step`-th, evaluating p.epilogue with ACC = `acc` (the reduction's value in p.acc_dtype; a
// half's bits are widened here) and storing it through the whole-space output view `out`.
// Inputs are in0, in1, ...; `idx_t` is the index type.
// A chain's epilogue reads its stages' values too: `stage_accs[k]` is stage k's value in its
// acc_dtype (a half's bits, widened here like `acc`).
std::string row_epilogue(const Dialect& d, const validate::Program& p, const Space& s, const std::string& idx_t,
                         const std::string& first, const std::string& step, const std::string& acc,
                         const std::string& indent, const std::vector<std::string>& stage_accs = {});

// ---- chains of row reductions (ABI 1.11, Note [Row chains on GPUs] in c_row_chain.cpp) ------
// One reduction of a chain as a renderer needs it: the stage's (or the program's own) list,
// widened (Note [Halves in kernels]), its reduce op, the dtype of its value (acc_dtype, or the
// output's for a program without epilogue) and the dtype its list yields.
struct ChainReduction {
  std::vector<rvl_instruction> ins;  // widened
  int32_t reduce_op = 0;
  int32_t value_dtype = 0;  // the reduced value's dtype (a half: rounded to it once)
  int32_t list_dtype = 0;   // the widened list's last dtype: what is accumulated
};
// The reductions of `p` in the order a kernel runs them: its stages, then its own (p.ins must
// be the unwidened list, or widened: widening is idempotent).
std::vector<ChainReduction> chain_reductions(const validate::Program& p);
// The expression of ACC's value k for a list of the chain, given the names holding each value in
// its value dtype (`names[k]`: k = 0 the program's own, k >= 1 stage k - 1's): halves widened.
std::vector<std::string> chain_accs(const Dialect& d, const validate::Program& p, const std::vector<std::string>& names);

// The helpers every kernel's source starts with: the ABI's edge cases (NaN-propagating max,
// saturating float->int casts, integer division by 0 and MIN/-1), out-of-line transcendentals,
// and LOGSUMEXP's merge (rvl_lse_merge, rvl_lse_result, rvl_lse_result_wide). Plain C: no
// includes, no templates.
std::string helpers(const Dialect& d);

}  // namespace rvl::lower::c
