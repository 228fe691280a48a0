#include "module_cache.hpp"

#include <ravel/backend.hpp>
#include <ravel/lowering/plan.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernel_emitter.hpp"

namespace rvl::l0 {

namespace {

// Named by the FNV-1a hash of the module: a stable file name for dumps.
void dump(const std::vector<uint32_t>& spirv) {
  const char* dir = std::getenv("RAVEL_L0_DUMP_SPIRV");
  if (!dir || !*dir) return;
  char name[64];
  std::snprintf(name, sizeof name, "/%016llx.spv", static_cast<unsigned long long>(
                    lower::fnv1a(spirv.data(), spirv.size() * 4)));
  if (FILE* f = std::fopen((std::string(dir) + name).c_str(), "wb")) {
    std::fwrite(spirv.data(), 4, spirv.size(), f);
    std::fclose(f);
  }
}

}  // namespace

std::unique_ptr<CompiledKernel> ModuleCache::build(const std::vector<uint32_t>& spirv,
                                                   uint32_t group_size) {
  dump(spirv);
  ze_module_desc_t desc{};
  desc.stype = ZE_STRUCTURE_TYPE_MODULE_DESC;
  desc.format = ZE_MODULE_FORMAT_IL_SPIRV;
  desc.inputSize = spirv.size() * 4;
  desc.pInputModule = reinterpret_cast<const uint8_t*>(spirv.data());
  desc.pBuildFlags = "";
  auto k = std::make_unique<CompiledKernel>();
  ze_module_build_log_handle_t log = nullptr;
  const ze_result_t r = ze_.zeModuleCreate(dev_.context, dev_.handle, &desc, &k->module, &log);
  if (r != ZE_RESULT_SUCCESS) {
    std::string text;
    size_t n = 0;
    if (log && ze_.zeModuleBuildLogGetString(log, &n, nullptr) == ZE_RESULT_SUCCESS && n > 1) {
      text.resize(n);
      ze_.zeModuleBuildLogGetString(log, &n, text.data());
      text.resize(n - 1);
    }
    if (log) ze_.zeModuleBuildLogDestroy(log);
    fail(RVL_STATUS_DEVICE_ERROR, "level_zero: the driver rejected a generated kernel (" +
                                      ze_result_name(r) + ")" +
                                      (text.empty() ? std::string() : ": " + text));
  }
  if (log) ze_.zeModuleBuildLogDestroy(log);
  ze_kernel_desc_t kd{};
  kd.stype = ZE_STRUCTURE_TYPE_KERNEL_DESC;
  kd.pKernelName = kKernelName;
  ze_result_t kr = ze_.zeKernelCreate(k->module, &kd, &k->kernel);
  if (kr == ZE_RESULT_SUCCESS) kr = ze_.zeKernelSetGroupSize(k->kernel, group_size, 1, 1);
  if (kr != ZE_RESULT_SUCCESS) {
    destroy(*k);
    ze_check(kr, "zeKernelCreate");
  }
  k->group_size = group_size;
  return k;
}

CompiledKernel& ModuleCache::insert(const std::string& key, std::unique_ptr<CompiledKernel> k) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, fresh] = cache_.try_emplace(key, std::move(k));  // k survives a clash
  if (!fresh) destroy(*k);  // another thread built it meanwhile: keep theirs
  return *it->second;
}

void ModuleCache::destroy(CompiledKernel& k) {
  if (k.kernel) ze_.zeKernelDestroy(k.kernel);
  if (k.module) ze_.zeModuleDestroy(k.module);
  k.kernel = nullptr;
  k.module = nullptr;
}

void ModuleCache::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, k] : cache_) destroy(*k);
  cache_.clear();
}

size_t ModuleCache::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.size();
}

}  // namespace rvl::l0
