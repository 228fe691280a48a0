// Compiled kernels: generated, compiled and loaded once per structure (Note [Kernel keys]).
#pragma once

#include "../codegen/codegen.hpp"
#include "disk_cache.hpp"
#include "hip_port.hpp"

#include <ravel/validate.hpp>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace rvl::hip {

struct Kernel {
  hipModule_t module = nullptr;
  hipFunction_t function = nullptr;
  std::string name, summary;
  unsigned block[3] = {256, 1, 1};
  uint64_t grid[3] = {0, 1, 1};  // grid[0] == 0: nothing to launch
};

class KernelCache {
 public:
  // The kernel for a validated program / contraction on `device` (current on this thread).
  const Kernel& program(int32_t device, const validate::Program& p);
  const Kernel& contraction(int32_t device, const validate::Contraction& c);
  void clear() noexcept;  // unloads every module (shutdown)
  size_t size();

 private:
  const Kernel& get(int32_t device, const std::string& key, KernelSource (*gen)(const void*, const Target&),
                    const void* arg);
  std::mutex mu_;
  std::unordered_map<std::string, std::unique_ptr<Kernel>> kernels_;
};

KernelCache& kernel_cache();

// Emulator only: generate (and dump) kernels but never compile or launch them.
bool dry_run();

// Structural keys (everything the generated source depends on, nothing it does not).
std::string program_key(const validate::Program& p);
std::string contraction_key(const validate::Contraction& c);

}  // namespace rvl::hip
