// A contraction epilogue of a per-row bias and relu, recognised so that a GEMM kernel can apply
// it to its accumulators before the store (Note [Bias and relu in registers], gemm_bias_relu.cpp).
#pragma once

#include "kernel.hpp"

#include <vector>

namespace tbbcpu {

struct BiasRelu {
  bool on = false;          // the epilogue is one of the forms of the Note
  bool bias_first = false;  // ADD(bias, ACC) rather than ADD(ACC, bias): the add's operand order
  bool relu = false;
  std::vector<float> bias;  // per row m of C; empty: no bias
  // relu's derivative times a cotangent: C = (relu(v) != 0) ? r : 0, r read through `r` (f32,
  // unmasked, stride 1 along N). Only after relu.
  bool select = false;
  View r;
};

// The epilogue of `c` (an f32 contraction) as a BiasRelu; on = false for any other epilogue,
// including the plain ACC (which needs no help).
BiasRelu match_bias_relu(const Contraction& c);

}  // namespace tbbcpu
