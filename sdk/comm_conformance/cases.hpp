#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "comm_plugin.hpp"

namespace ravel::comm_conformance {

// The deadline of every wait that should succeed.
constexpr int64_t kTimeoutMs = 60000;

// What every case needs: the plugin, the world communicator, this rank, and the tallies.
struct Runner {
  CommPlugin& plugin;
  rvl_communicator* comm;
  int rank, size;
  int64_t passed = 0, failed = 0;
  void pass() { ++passed; }
  void fail(const std::string& what, const std::string& why) {
    ++failed;
    std::printf("[rank %d] FAIL %s: %s\n", rank, what.c_str(), why.c_str());
    std::fflush(stdout);
  }
};

// Every operation x dtype x size against locally computed references (cases.cpp); `big` adds
// one 64 MiB all-reduce.
void run_data_cases(Runner& run, bool big);
// Argument validation, a deadline on a receive that is late (and the request still valid
// afterwards), wrong-size messages, and split (cases_errors.cpp).
void run_error_cases(Runner& run);
// all_reduce_checked (optional, since 1.1), when the plugin has it (cases_checked.cpp).
void run_checked_cases(Runner& run);

}  // namespace ravel::comm_conformance
