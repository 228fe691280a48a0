// Kernel programs and contractions -> HIP C++ source (one translation unit per kernel).
//
// The generator is pure C++ with no GPU headers: it runs, and is unit tested, on any machine.
// Everything structural is baked into the source as constants (shape, strides, offsets, validity
// ranges, dtypes, instructions), so the device compiler folds index arithmetic (divisions by
// constant extents become multiply-shifts) and the kernel is specialised for its exact views.
// Only buffer base addresses are parameters: the same kernel serves every call with the same
// structure, which is what a training loop makes (Note [Kernel keys] in runtime/kernels.cpp).
#pragma once

#include "target.hpp"

#include <ravel/validate.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace rvl::hip {

struct KernelSource {
  std::string name;      // extern "C" symbol, "rvl_<kind>_<hash>"
  std::string source;    // complete translation unit, prelude included
  unsigned block[3] = {256, 1, 1};
  uint64_t grid[3] = {0, 1, 1};  // grid[0] == 0: nothing to launch (empty iteration space)
  std::string summary;   // one line for RAVEL_DEBUG and error messages
  std::vector<std::string> param_types;  // C++ type of each parameter ("const float*")
};

// Parameters, in order: program inputs (one per rvl_program input, even if unused), then the
// output. A contraction: A, B, the epilogue inputs, then C.
KernelSource generate_program(const validate::Program& p, const Target& t);
KernelSource generate_contraction(const validate::Contraction& c, const Target& t);

// The common prelude (type names, scalar helpers with the ABI's edge-case semantics).
std::string prelude(const Target& t);

}  // namespace rvl::hip
