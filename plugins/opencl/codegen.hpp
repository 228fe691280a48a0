// Kernel programs and contractions -> OpenCL C 1.2, rendered from the shared lowering
// (sdk/lowering): the simplified space, the reduction strategy, the accumulator and the C-family
// instructions and helpers in their OpenCL dialect. Pure C++, no OpenCL headers.
#pragma once

#include <ravel/validate.hpp>

#include <cstdint>
#include <string>

namespace rvl::ocl {

constexpr int kGroup = 64;  // work-items per work-group of every kernel

struct KernelSource {
  std::string name;    // kernel function name, "rvl_<kind>_<hash>"
  std::string source;  // the whole program: helpers, then the kernel
  uint64_t groups = 0; // work-groups to launch (0: nothing to run)
  std::string summary; // one line for errors
};

// Kernel arguments: the program's inputs in order (one per input, even if empty), then the
// output. A contraction: A, B, the epilogue inputs, then C.
KernelSource generate_program(const validate::Program& p);
KernelSource generate_contraction(const validate::Contraction& c);

}  // namespace rvl::ocl
