// The decisions a GPU code generator makes before it renders anything, made once for every
// backend: the reduction's identity and accumulator, the reduction strategy, the contraction's
// tile, the vector width of elementwise kernels, kernel names. A backend passes what it can do
// (its work-group size, whether it has a column mode or register blocking) and renders the plan
// in its language (HIP C++ text, SPIR-V words, OpenCL C).
#pragma once

#include <ravel/backend.h>
#include <ravel/lowering/space.hpp>

#include <cstdint>
#include <string>

namespace rvl::lower {

// ---- reductions ------------------------------------------------------------------------------
// The identity of SUM / PROD / MAX in `dtype` (docs/abi.md 8): 0, 1, and for MAX -inf, the
// signed integer's lowest value, or false/0 for bool and unsigned types. Floats (halves included)
// in .f, everything else in .i. The one table: the CPU plugin's typed identities read it too.
// Throws rvl::Error(INTERNAL) for any other reduce op.
rvl_scalar reduce_identity(int32_t reduce_op, int32_t dtype);

// What a reduction accumulates: one value of the output dtype folded by the reduce op (SUM, MAX,
// PROD), or for LOGSUMEXP the pair (m, s), running maximum and sum of exp(x - m), in the values'
// dtype (f32 values may have an f64 result: only m + log(s) is formed in the output dtype). One
// element x contributes (x) or (x, 1). Renderers emit every statement once per variable, so
// the loop, the tree and the store are the same code for both.
struct Accumulator {
  int32_t dtype = 0;       // dtype of every variable
  bool lse = false;        // LOGSUMEXP: two variables (m, s)
  rvl_scalar init[2] = {}; // initial values (identities)
  int count() const { return lse ? 2 : 1; }
  bool widening(int32_t out_dtype) const { return lse && out_dtype != dtype; }
};
// `value_dtype`: the dtype of the program's last instruction (what is reduced).
Accumulator accumulator(int32_t reduce_op, int32_t out_dtype, int32_t value_dtype);

// Note [Reduction strategy]
// After simplify(), O outputs each combine R values; a work-group of `group` items is TX outputs
// x TY reducers:
//  - Row (TX = 1, TY = group) when the innermost axis is reduced and R >= 32 (softmax rows,
//    sum(-1)): the group strides over one output's values (coalesced), then folds its partials
//    in a tree;
//  - Column (TX = 32, TY = group / 32) when an outer axis is reduced and R >= 64, for backends
//    with a column mode: neighbouring items own neighbouring outputs (coalesced), and the TY
//    partials meet in a local-memory tree;
//  - Serial (TX = group, TY = 1) otherwise: one item per output walks its values in order. A
//    group per output would waste most of its items on a reduction over 27 logits and pay a
//    barrier tree per output.
// Loops over outputs are group-uniform, so every item reaches every barrier and shuffle.
struct ReducePlan {
  enum class Kind { Serial, Row, Column } kind = Kind::Serial;
  int tx = 1, ty = 1;
};
ReducePlan plan_reduction(const Space& s, int group, bool column_mode);
const char* reduce_kind_name(ReducePlan::Kind k);  // "serial", "row", "column"

// ---- contractions ----------------------------------------------------------------------------
// One work-group computes a BM x BN tile of C, stepping BK along k, each item a TM x TN block
// of registers (BM / TM * BN / TN items).
struct GemmTile {
  int bm, bn, bk, tm, tn;
  int items() const { return (bm / tm) * (bn / tn); }
};
// With register blocking (HIP): f32 problems with at least one 128x128 tile per compute unit
// get 128x128x8 tiles with 8x8 per item, everything else 64x64x8 with 4x4 (256 items). Without
// (a plain local-memory tiling, Level Zero): 16x16x16, one element per item.
constexpr GemmTile kPlainTile{16, 16, 16, 1, 1};
GemmTile gemm_tile(int32_t dtype, int64_t m, int64_t n, int compute_units, bool register_blocking);
// Every address, index and tile overshoot of the contraction below 2^30 (32-bit arithmetic).
bool contraction_fits_32(const validate::Contraction& c, const GemmTile& t);

// ---- elementwise -----------------------------------------------------------------------------
// Elements per item moved with one vector load: 4 when the space is one axis of at least 8,
// every input is dense (stride 1, unpadded, 4-aligned offset), broadcast (stride 0) or empty,
// and the output is dense and 4-aligned; else 1. Programs of more than 64 instructions stay
// scalar: they are compute-bound and would be unrolled four times (compile time).
int vector_width(const Space& s, int32_t n_instructions);

// ---- names -----------------------------------------------------------------------------------
uint64_t fnv1a(const void* data, size_t bytes);
// "rvl_<kind>_<16 hex digits of the body's hash>": a readable, valid symbol; caches compare full
// keys or sources, never names.
std::string hash_name(const std::string& kind, const std::string& body);

}  // namespace rvl::lower
