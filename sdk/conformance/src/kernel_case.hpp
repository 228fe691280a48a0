// Kernels with host-side data: run on the plugin (in guarded buffers) and on the reference
// interpreter, then compare the whole output buffer (untouched elements included).
#pragma once

#include "harness.hpp"

#include <vector>

namespace rvl::conformance {

// ---- building blocks ---------------------------------------------------------------------------
rvl_view view_of(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                 int64_t offset = 0);
rvl_view contiguous(const std::vector<int64_t>& shape, int64_t offset = 0);
// A reduction's output view: contiguous over the kept axes, stride 0 on the reduced ones (bit d
// of `axes`); *elems receives the number of outputs.
rvl_view reduced_output(const std::vector<int64_t>& shape, uint32_t axes, int64_t* elems);
rvl_instruction ins(int32_t op, int32_t dtype, int32_t s0 = -1, int32_t s1 = -1, int32_t s2 = -1);
rvl_instruction load(int32_t dtype, int32_t input);
rvl_instruction const_i(int32_t dtype, int64_t v);
rvl_instruction const_f(int32_t dtype, double v);
int64_t count(const std::vector<int64_t>& shape);

// Deterministic data. `kind` picks the value set:
enum class Data {
  Mixed,     // floats in [-4, 4); ints spread over the whole range incl. MIN/MAX/0/+-1
  Small,     // floats in [-1, 1); ints in [-8, 8) (u8 [0, 16)), bool random
  Positive,  // floats in [0.25, 4); ints in [1, 16)
  Specials   // floats cycle NaN, +-Inf, +-0, +-1.5, tiny, huge; ints MIN, MAX, -1, 0, 1, 2, -7
};
ref::HostBuffer make_data(int32_t dtype, int64_t n, uint64_t seed, Data kind = Data::Mixed);
ref::HostBuffer make_values(int32_t dtype, const std::vector<ref::Value>& values);

// ---- program cases --------------------------------------------------------------------------
struct Input {
  ref::HostBuffer data;
  rvl_view view;
};

struct ProgramCase {
  std::vector<int64_t> shape;
  std::vector<Input> inputs;
  std::vector<rvl_instruction> code;
  int32_t reduce_op = RVL_REDUCE_NONE;
  uint32_t reduce_axes = 0;
  ref::HostBuffer out;  // initial contents (its dtype is the output dtype)
  rvl_view out_view{};
  double threshold = 0;
  // ABI 1.10: a row epilogue (non-empty: the output has the full shape; ACC has acc_dtype).
  // The case is a skip on a device whose reduce_epilogue_ops lacks reduce_op.
  std::vector<rvl_instruction> epilogue;
  int32_t acc_dtype = -1;
  // ABI 1.11: the earlier reductions of a chain (ACC k >= 1 reads stages[k - 1]). The case is
  // a skip on a device whose reduce_chain_ops lacks one of the chain's reductions.
  struct Stage {
    int32_t reduce_op = RVL_REDUCE_SUM;
    int32_t acc_dtype = RVL_DTYPE_F32;
    std::vector<rvl_instruction> code;
  };
  std::vector<Stage> stages;

  // Runs it; records the error measure; throws Failure / Skip.
  void run(Measure& m) const;
};

// A program over `shape` whose output is a fresh contiguous buffer filled with a marker.
ProgramCase simple_program(const std::vector<int64_t>& shape, std::vector<Input> inputs,
                           std::vector<rvl_instruction> code, double threshold);

// ---- contraction cases ------------------------------------------------------------------------
struct ContractionCase {
  int32_t dtype = RVL_DTYPE_F32;
  std::vector<int64_t> batch;
  int64_t m = 1, n = 1, k = 1;
  Input a, b;
  ref::HostBuffer c;  // initial contents
  rvl_view c_view{};
  std::vector<Input> epilogue_inputs;
  std::vector<rvl_instruction> epilogue;
  double threshold = 0;
  // ABI 1.8 (im2col block): M, K and N groups ({} = the 1.0 form); strides per operand.
  std::vector<int64_t> m_shape, k_shape, n_shape, a_m, a_k, b_k, b_n;

  void run(Measure& m) const;
};

}  // namespace rvl::conformance
