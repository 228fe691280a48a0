// The device that the documented built-in placement picks (docs/config.md; configs/default.json:
// "hip:0", then "level_zero:0", then "tbb_cpu:0"), worked out from a runtime's device list by the
// rule as documented, not by the core's code. Tests that used to say "the default device is
// tbb_cpu:0" state the rule instead, so they hold on a CPU-only machine (tbb_cpu:0) and on the
// GPU machine (hip:0; scripts/gpu-check.sh runs the whole suite there) alike.
#pragma once

#include <ravel/runtime.hpp>

#include <string>

inline ravel::Device builtin_default_device(const ravel::Runtime& rt) {
  for (const char* name : {"hip:0", "level_zero:0", "tbb_cpu:0"})
    for (const auto& d : rt.devices())
      if (d.device.str() == name) return d.device;
  return ravel::Device("tbb_cpu", 0);  // none of them: the tests below then fail, naming it
}
