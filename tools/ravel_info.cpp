// ravel-info: every plugin found (path, ABI version, status or why it was skipped) and every
// device with its properties; then the effective configuration and where each placement rule
// resolved to (so a config can be checked before a long run).
//   ravel-info [--config FILE]
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "ravel/backend.h"
#include "ravel/ravel.hpp"

int main(int argc, char** argv) {
  ravel::RuntimeOptions opts;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
      opts.config_path = argv[++i];
    } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::puts("usage: ravel-info [--config FILE]\n"
                "Lists the backend plugins Ravel finds and the devices they offer.\n"
                "Environment: RAVEL_CONFIG (a config file), RAVEL_PLUGIN_PATH (':'-separated folders).");
      return 0;
    } else {
      std::fprintf(stderr, "ravel-info: unknown argument '%s' (try --help)\n", argv[i]);
      return 2;
    }
  }
  try {
    ravel::Runtime& rt = ravel::Runtime::reset(opts);
    std::cout << "Ravel " << "core, plugin ABI " << RVL_ABI_MAJOR << "." << RVL_ABI_MINOR << "\n\nsearch paths:\n";
    for (const auto& p : rt.search_paths()) std::cout << "  " << p << "\n";
    std::cout << "\nplugins:\n";
    if (rt.plugins().empty()) std::cout << "  (none found)\n";
    for (const auto& r : rt.plugins()) {
      std::cout << "  " << (r.loaded ? "[ok]     " : "[skipped]") << " " << (r.name.empty() ? "?" : r.name);
      if (r.abi_major) std::cout << "  ABI " << r.abi_major << "." << r.abi_minor << "  version " << r.version;
      std::cout << "\n            path: " << r.path << "\n";
      if (!r.loaded) std::cout << "            reason: " << r.status << "\n";
    }
    std::cout << "\ndevices:\n";
    auto devices = rt.devices();
    if (devices.empty()) std::cout << "  (none)\n";
    for (const auto& d : devices) {
      std::cout << "  " << d.device.str() << "  " << d.name << "\n            kind " << d.kind << ", "
                << d.compute_units << " compute units, " << (d.memory_bytes >> 20) << " MiB, max rank " << d.max_rank
                << "\n            arch " << (d.arch.empty() ? "-" : d.arch) << ", warp size "
                << (d.warp_size ? std::to_string(d.warp_size) : std::string("-"));
      if (!d.details.empty()) std::cout << "\n            " << d.details;
      std::cout << "\n            dtypes:";
      for (const auto& t : d.dtypes) std::cout << " " << t;
      std::cout << "\n";
    }
    std::cout << "\nconfig: " << rt.config_source() << "\neffective configuration:\n";
    std::istringstream cfg(rt.effective_config());
    for (std::string line; std::getline(cfg, line);) std::cout << "  " << line << "\n";
    if (const std::string& env = rt.fusion_from_environment(); !env.empty())
      std::cout << "  (RAVEL_FUSION=" << env << " overrides fusion.policy: " << ravel::fusion_options().policy << ")\n";
    std::cout << "\nplacement:\n";
    bool chosen = false;
    for (const auto& r : rt.placement_rules()) {
      std::cout << "  " << r.rule << "  ->  ";
      if (r.available && !chosen) std::cout << "available: new tensors go here\n";
      else if (r.available) std::cout << "available (an earlier rule wins)\n";
      else std::cout << "not available (" << r.reason << ")\n";
      chosen = chosen || r.available;
    }
    if (rt.on_mixed_devices() == ravel::MixedDevices::Copy)
      std::cout << "  on mixed devices: copy (operands on other devices are moved by Transfer nodes)\n";
    else
      std::cout << "  on mixed devices: error\n";
    if (!devices.empty()) {
      try {
        std::cout << "\ndefault device: " << rt.default_device().str() << "\n";
      } catch (const ravel::DeviceError& e) {
        std::cout << "\ndefault device: none: " << e.what() << "\n";
        return 1;
      }
    }
    return devices.empty() ? 1 : 0;
  } catch (const ravel::Error& e) {
    std::fprintf(stderr, "ravel-info: %s\n", e.what());
    return 1;
  }
}
