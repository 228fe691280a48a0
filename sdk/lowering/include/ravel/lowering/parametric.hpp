// Parametric kernels: the lowering of a validated kernel into a structural key and a meta block,
// for backends whose device compiles are slow (SPIR-V through a driver, OpenCL C). plugins/level_zero
// renders these as SPIR-V; link Ravel::lowering.
//
// Note [Generic kernels]: a SPIR-V module is compiled per *structure*, not per launch. The
// structure (the key) is what the code depends on: instructions and constants, dtypes, which
// inputs are padded (need validity checks) or empty, the reduction op and the number of kept and
// reduced axes after normalisation. Extents, strides, offsets and validity ranges are values:
// they travel in an int64 "meta" block the kernel reads through a pointer argument (Level Zero
// limits by-value kernel arguments to ~1-2 KiB, a 32-input rank-8 padded kernel needs 6.6 KiB).
// So the 1000 kernels of the conformance suite compile to a few hundred modules, and a training
// step with new batch shapes reuses its modules. Driver compiles are slow (IGC 50-200 ms, PoCL
// ~0.5 s per module): the cache keyed by structure is what makes a backend usable.
//
// Normalisation (cheap, done per launch) is simplify() with kept axes first (Note [Space
// simplification] in space.hpp), so most kernels run over 1 or 2 axes; the reduction strategy is
// plan_reduction()'s (Note [Reduction strategy] in plan.hpp) for a work-group of kReduceGroup
// items without a column mode.
#pragma once

#include <ravel/lowering/plan.hpp>
#include <ravel/validate.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rvl::lower {

struct InputSig {
  int32_t dtype = 0;
  bool empty = false;   // no valid element: every LOAD reads 0, no pointer is passed
  bool masked = false;  // some axis has a validity range narrower than the extent
};

// ABI 1.11: an earlier reduction of a chain (validate::Program::Stage), reduced over the same
// rows before the program's own; its value is read as ACC k by the later lists.
struct StageSig {
  std::vector<rvl_instruction> ins;
  int32_t reduce_op = 0;
  int32_t acc_dtype = 0;
};

// The structure of a program kernel: what its SPIR-V depends on.
struct ProgramSig {
  int32_t kept = 0, reduced = 0;  // axes after normalisation: kept first, then reduced
  int32_t reduce_op = 0;          // rvl_reduce_op
  // Reductions: one work-item per output looping over the reduced space (ReducePlan::Serial)
  // instead of one work-group per output (Row).
  bool serial_reduce = false;
  int32_t out_dtype = 0;
  std::vector<InputSig> inputs;
  std::vector<rvl_instruction> ins;
  // ABI 1.10 row epilogue (Note [Row epilogues on GPUs] in c_row_epilogue.cpp): when not empty,
  // the reduced value (in acc_dtype) is not stored; the items that made it walk its row again and
  // store the epilogue's value at every element, so the output has the whole space.
  std::vector<rvl_instruction> epilogue;
  int32_t acc_dtype = -1;
  std::vector<StageSig> stages;  // a chain's stages (ABI 1.11), in order
  bool has_epilogue() const { return !epilogue.empty(); }
  // The reduced value's dtype: the output's, or acc_dtype with an epilogue.
  int32_t reduced_dtype() const { return has_epilogue() ? acc_dtype : out_dtype; }

  std::string key() const;  // the structural key (Note [Generic kernels])
};

// Where each value lives in the meta block:
//   [extents of kept axes, extents of reduced axes, n_out, n_red,
//    per non-empty input: offset, strides[kept+reduced], (masked: lo[..], hi[..]),
//    output: offset, strides[kept] (with a row epilogue: strides[kept+reduced])]
struct ProgramMeta {
  explicit ProgramMeta(const ProgramSig& s);
  int rank = 0;
  size_t n_out = 0, n_red = 0;
  std::vector<size_t> input;  // start of each input's record (non-empty inputs only)
  size_t output = 0;
  size_t size = 0;
  size_t extent(int axis) const { return size_t(axis); }  // extents lead the block
  static size_t offset(size_t rec) { return rec; }       // a view record starts with its offset
  static size_t stride(size_t rec, int axis) { return rec + 1 + size_t(axis); }
  size_t lo(size_t rec, int axis) const { return rec + 1 + size_t(rank + axis); }
  size_t hi(size_t rec, int axis) const { return rec + 1 + size_t(2 * rank + axis); }
};

struct ProgramLaunch {
  ProgramSig sig;
  std::vector<int64_t> meta;
  std::byte* out = nullptr;
  std::vector<std::byte*> inputs;  // non-empty inputs, in order
  int64_t n_out = 0, n_red = 0;
};

// Work-group size of a parametric reduction with a group per output (a power of two).
constexpr int kReduceGroup = 64;
ProgramLaunch plan_program(const rvl::validate::Program& p);

// ---- contractions ---------------------------------------------------------------------------
struct ContractionSig {
  int32_t dtype = 0;
  int32_t batch_rank = 0;          // after dropping extent-1 batch axes
  std::vector<InputSig> epilogue;  // epilogue inputs
  std::vector<rvl_instruction> ins;

  std::string key() const;
};

// Meta block of a contraction kernel:
//   [batch extents[batch_rank], M, N, K, tiles_m, tiles_n, n_tiles(total),
//    A: offset, strides[rank]; B: same; C: same;
//    per non-empty epilogue input: offset, strides[rank], (masked: lo[rank], hi[rank])]
// with rank = batch_rank + 2 and axes ordered [batch.., M, N] (A: [batch.., M, K], B: [batch..,
// K, N]).
struct ContractionMeta {
  explicit ContractionMeta(const ContractionSig& s);
  int rank = 0;
  size_t m = 0, n = 0, k = 0, tiles_m = 0, tiles_n = 0, n_tiles = 0;
  size_t a = 0, b = 0, c = 0;
  std::vector<size_t> input;
  size_t size = 0;
  static size_t stride(size_t rec, int axis) { return rec + 1 + size_t(axis); }
  size_t lo(size_t rec, int axis) const { return rec + 1 + size_t(rank + axis); }
  size_t hi(size_t rec, int axis) const { return rec + 1 + size_t(2 * rank + axis); }
};

constexpr int kGemmTile = kPlainTile.bm;  // C tile edge; the work-group is kGemmTile x kGemmTile

struct ContractionLaunch {
  ContractionSig sig;
  std::vector<int64_t> meta;
  std::byte *a = nullptr, *b = nullptr, *c = nullptr;
  std::vector<std::byte*> inputs;
  int64_t n_tiles = 0;
};

ContractionLaunch plan_contraction(const rvl::validate::Contraction& c);

}  // namespace rvl::lower
