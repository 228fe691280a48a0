#include "device.hpp"

#include <ravel/backend.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>

namespace rvl::l0 {

std::string intel_arch(uint32_t vendor, uint32_t id) {
  if (vendor != 0x8086) return "";
  // The ids' upper bits name the family (compute-runtime's device tables); enough to pick the
  // ocloc target or explain a missing feature, not a full list.
  const uint32_t hi = id & 0xff00, hi12 = id & 0xfff0;
  if (hi == 0x5600) return "dg2";
  if (hi12 == 0x0bd0 || hi12 == 0x0b60) return "pvc";
  if (hi == 0x7d00) return "mtl";
  if (hi12 == 0x4900) return "dg1";
  if (hi == 0x9a00) return "tgllp";
  if (hi == 0x4600 || hi == 0xa700) return "adl";
  if (hi == 0x6400 || hi == 0xe200) return "lnl/bmg";
  return "";
}

namespace {

std::string describe(const Device& d, const ze_device_properties_t& p,
                     const ze_device_compute_properties_t& c) {
  std::string sg;
  for (uint32_t i = 0; i < c.numSubGroupSizes && i < ZE_SUBGROUPSIZE_COUNT; ++i)
    sg += (i ? "," : "") + std::to_string(c.subGroupSizes[i]);
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "EUs=%d; threads_per_EU=%u; simd=%u; fp64=%s; subgroup_sizes=%s; "
                "max_group=%u; local_mem=%u; clock_MHz=%u; pci_id=0x%04x",
                d.eu_count, p.numThreadsPerEU, p.physicalEUSimdWidth, d.fp64 ? "yes" : "no",
                sg.c_str(), c.maxTotalGroupSize, c.maxSharedLocalMemory, p.coreClockRate,
                p.deviceId);
  return buf;
}

void enumerate(Discovery& d) {
  const ZeApi& ze = *d.api;
  ze_result_t r = ze.zeInit(ZE_INIT_FLAG_GPU_ONLY);
  if (r != ZE_RESULT_SUCCESS) {
    d.reason = "zeInit failed with " + ze_result_name(r) +
               ": no Level Zero GPU driver is installed or none found a device "
               "(a test driver is selected with ZE_ENABLE_ALT_DRIVERS)";
    return;
  }
  uint32_t n_drivers = 0;
  if (ze.zeDriverGet(&n_drivers, nullptr) != ZE_RESULT_SUCCESS || n_drivers == 0) {
    d.reason = "the Level Zero loader found no driver";
    return;
  }
  std::vector<ze_driver_handle_t> drivers(n_drivers);
  ze.zeDriverGet(&n_drivers, drivers.data());
  for (ze_driver_handle_t drv : drivers) {
    uint32_t n = 0;
    if (ze.zeDeviceGet(drv, &n, nullptr) != ZE_RESULT_SUCCESS || n == 0) continue;
    std::vector<ze_device_handle_t> devs(n);
    ze.zeDeviceGet(drv, &n, devs.data());
    for (ze_device_handle_t h : devs) {
      ze_device_properties_t p{};
      p.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
      if (ze.zeDeviceGetProperties(h, &p) != ZE_RESULT_SUCCESS) continue;
      if (p.type != ZE_DEVICE_TYPE_GPU) continue;
      ze_device_compute_properties_t c{};
      c.stype = ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES;
      ze_device_module_properties_t m{};
      m.stype = ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES;
      if (ze.zeDeviceGetComputeProperties(h, &c) != ZE_RESULT_SUCCESS ||
          ze.zeDeviceGetModuleProperties(h, &m) != ZE_RESULT_SUCCESS)
        continue;
      uint32_t n_mem = 0;
      ze.zeDeviceGetMemoryProperties(h, &n_mem, nullptr);
      std::vector<ze_device_memory_properties_t> mem(n_mem);
      for (auto& x : mem) x.stype = ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES;
      if (n_mem) ze.zeDeviceGetMemoryProperties(h, &n_mem, mem.data());

      uint32_t n_groups = 0;
      ze.zeDeviceGetCommandQueueGroupProperties(h, &n_groups, nullptr);
      std::vector<ze_command_queue_group_properties_t> groups(n_groups);
      for (auto& g : groups) g.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES;
      if (n_groups) ze.zeDeviceGetCommandQueueGroupProperties(h, &n_groups, groups.data());
      uint32_t ordinal = UINT32_MAX;
      for (uint32_t g = 0; g < n_groups && ordinal == UINT32_MAX; ++g)
        if (groups[g].flags & ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE) ordinal = g;
      if (ordinal == UINT32_MAX) continue;  // a copy-only engine cannot run kernels

      Device dev;
      dev.compute_ordinal = ordinal;
      dev.index = int32_t(d.devices.size());
      dev.driver = drv;
      dev.handle = h;
      dev.name = p.name;
      dev.arch = intel_arch(p.vendorId, p.deviceId);
      dev.fp64 = (m.flags & ZE_DEVICE_MODULE_FLAG_FP64) != 0;
      for (const auto& x : mem) dev.memory_bytes += x.totalSize;
      dev.eu_count = int32_t(p.numSlices * p.numSubslicesPerSlice * p.numEUsPerSubslice);
      for (uint32_t i = 0; i < c.numSubGroupSizes && i < ZE_SUBGROUPSIZE_COUNT; ++i)
        dev.subgroup_size = std::max<int32_t>(dev.subgroup_size, int32_t(c.subGroupSizes[i]));
      dev.max_group_size = c.maxTotalGroupSize;
      dev.local_memory = c.maxSharedLocalMemory;
      dev.details = describe(dev, p, c);
      d.devices.push_back(std::move(dev));
    }
  }
  if (d.devices.empty()) d.reason = "Level Zero drivers are installed but report no GPU device";
}

}  // namespace

Discovery& discovery() {
  static std::once_flag once;
  static Discovery d;
  std::call_once(once, [] {
    try {
      d.api = ze_api(&d.reason);
      if (d.api) enumerate(d);
    } catch (const std::exception& e) {  // std::bad_alloc: report, never throw from here
      d.devices.clear();
      d.reason = std::string("Level Zero discovery failed: ") + e.what();
    }
  });
  return d;
}

void create_contexts(Discovery& d) {
  std::map<ze_driver_handle_t, ze_context_handle_t> made;
  for (Device& dev : d.devices) {
    if (dev.context) continue;
    auto it = made.find(dev.driver);
    if (it == made.end()) {
      ze_context_desc_t desc{};
      desc.stype = ZE_STRUCTURE_TYPE_CONTEXT_DESC;
      ze_context_handle_t ctx = nullptr;
      ze_check(d.api->zeContextCreate(dev.driver, &desc, &ctx), "zeContextCreate");
      it = made.emplace(dev.driver, ctx).first;
    }
    dev.context = it->second;
  }
}

void destroy_contexts(Discovery& d) {
  std::map<ze_context_handle_t, bool> done;
  for (Device& dev : d.devices) {
    if (dev.context && !done[dev.context]) d.api->zeContextDestroy(dev.context);
    done[dev.context] = true;
    dev.context = nullptr;
  }
}

}  // namespace rvl::l0
