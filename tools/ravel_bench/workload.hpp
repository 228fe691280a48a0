// What every ravel-bench workload is made of (docs/bench.md): its nominal work and a runnable
// instance. The catalog of built-in workloads (workloads.hpp) and the convolutional ones
// (cnn_workloads.hpp) both build on this, and the catalog dispatches to the convolutional ones,
// so these shared pieces live apart from either.
#pragma once

#include <stdexcept>
#include <string>

#include "bench_config.hpp"

namespace ravel::bench {

std::string size_str(const Size& s);  // "256x256x256"

// Nominal work of one repetition: the flops the math needs and the bytes it must move at least
// (inputs read once, outputs written once), whatever the schedule actually does.
struct Work {
  double flops = 0;
  double bytes = 0;
};

// One workload at one size with its inputs made and realized on one device.
class Instance {
 public:
  virtual ~Instance() = default;
  // One timed repetition: builds the graph and realizes it.
  virtual void run() = 0;
  // Runs once and compares with the naive host computation: "" when correct, else what differs.
  virtual std::string check() = 0;
};
// make_instance throws this where the workload cannot run on what this process has (an
// all_reduce over a plugin with one device): the row is reported unavailable, not failed.
struct Unavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace ravel::bench
