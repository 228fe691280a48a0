// In-process SPIR-V checks with SPIRV-Tools, shared by l0_codegen and l0-spirv-check.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace l0test {

// Validates a module for the OpenCL 1.2 environment (what Level Zero drivers consume);
// returns "" when valid, else the validator's message.
std::string validate_opencl(const std::vector<uint32_t>& words);

// Links modules into one, renaming each module's kernel entry point to `<prefix><index>` so the
// names do not clash (ocloc then compiles all of them in one run). Throws std::runtime_error.
std::vector<uint32_t> link_kernels(std::vector<std::vector<uint32_t>> modules,
                                   const std::vector<std::string>& names);

}  // namespace l0test
