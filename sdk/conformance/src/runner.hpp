// Running cases and reporting them: shared by the in-process runner (runner.cpp) and the
// isolated one, which runs each case group in a child process (isolation.cpp).
#pragma once

#include "harness.hpp"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace rvl::conformance {

// What a report says about the plugin (the JSON report's header).
struct PluginIdentity {
  std::string name, version, device_name;
  uint32_t abi_major = 0, abi_minor = 0;
};

// Loads the plugin, initialises it and fills session() for `device`. Throws SetupError with the
// exit status main() should use: 2 when the file cannot be loaded at all, 1 otherwise.
struct SetupError : std::runtime_error {
  SetupError(int code, const std::string& what) : std::runtime_error(what), status(code) {}
  int status;
};
PluginIdentity set_up_session(const std::string& path, int32_t device,
                              std::unique_ptr<Plugin>& holder);

// The cases the options select, in registration order (grouped). Throws on a bad regex.
std::vector<const Case*> select_cases(const RunOptions& opt);

struct Outcome {
  const Case* c = nullptr;
  std::string status;  // "passed", "failed", "skipped"
  std::string message;
  Measure m;
};
// Runs one case in this process; never throws.
Outcome run_case(const Case& c);

// Prints a line per failure/skip (per case with -v) and a summary per group; writes the JSON
// report at the end.
class Report {
 public:
  explicit Report(const RunOptions& opt);
  void add(Outcome o);
  // Prints the totals, writes the JSON report; returns the number of failed cases.
  int finish(const PluginIdentity& id);

 private:
  struct Tally {
    int passed = 0, failed = 0, skipped = 0;
  };
  void close_group();
  const RunOptions& opt_;
  std::vector<Outcome> outcomes_;
  std::map<std::string, Tally> groups_;
  Tally total_;
  std::string current_;
  double start_;
};

int run_in_process(const RunOptions& opt);  // main()'s --no-isolate path
int run_isolated(const RunOptions& opt);    // the default on POSIX

}  // namespace rvl::conformance
