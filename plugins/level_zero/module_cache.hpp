// Compiled kernels, cached by structural key (Note [Generic kernels] in
// <ravel/lowering/parametric.hpp>).
//
// A miss emits SPIR-V, hands it to the driver (zeModuleCreate, which runs the device compiler)
// and creates the kernel. Kernel arguments are per-kernel state in Level Zero, so each cached
// kernel has a mutex held from setting its arguments until the launch is appended (arguments are
// captured at append time). RAVEL_L0_DUMP_SPIRV=DIR writes every new module to DIR/<hash>.spv,
// which is how CI validates and cross-compiles every kernel the test suites generate.
#pragma once

#include <level_zero/ze_api.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "device.hpp"

namespace rvl::l0 {

struct CompiledKernel {
  ze_module_handle_t module = nullptr;
  ze_kernel_handle_t kernel = nullptr;
  uint32_t group_size = 1;
  std::mutex launch_mu;  // arguments are set and the launch appended under it
};

class ModuleCache {
 public:
  ModuleCache(const ZeApi& ze, const Device& dev) : ze_(ze), dev_(dev) {}
  ~ModuleCache() { clear(); }

  // The kernel for `key`, built from `make_spirv()` on a miss.
  template <class MakeSpirv>
  CompiledKernel& get(const std::string& key, uint32_t group_size, MakeSpirv&& make_spirv) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = cache_.find(key);
      if (it != cache_.end()) return *it->second;
    }
    return insert(key, build(make_spirv(), group_size));
  }
  void clear();
  size_t size();

 private:
  std::unique_ptr<CompiledKernel> build(const std::vector<uint32_t>& spirv, uint32_t group_size);
  CompiledKernel& insert(const std::string& key, std::unique_ptr<CompiledKernel> k);
  void destroy(CompiledKernel& k);

  const ZeApi& ze_;
  const Device& dev_;
  std::mutex mu_;
  std::unordered_map<std::string, std::unique_ptr<CompiledKernel>> cache_;
};

}  // namespace rvl::l0
