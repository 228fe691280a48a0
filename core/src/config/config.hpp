// Reading a Ravel JSON config (docs/config.md). Every bad value is a ConfigError naming its JSON
// path, the bad value and what was expected; unknown keys are errors too ("did you mean").
#pragma once

#include <string>
#include <vector>

#include "ravel/fusion.hpp"

namespace ravel::detail {

struct LoggingConfig {
  std::string level = "warn";  // "off", "error", "warn", "info", "debug"
  bool plugins = false;        // print every skipped plugin and why (like RAVEL_LOG_PLUGINS=1)
  bool placement = false;      // print which device each placement rule resolved to
};

// "parallel": the mesh a program's data-parallel parts use (docs/sharding.md).
struct ParallelConfig {
  std::vector<std::string> mesh;  // device names, distinct; empty: no mesh (one device)
  int64_t batch_axis = 0;         // the axis of inputs that shard_batch splits
};

// "distributed": ravel::distributed (docs/distributed.md).
struct DistributedConfig {
  double timeout_s = 0;  // the deadline of every wait on another rank; 0: not set (default 60)
};

struct Config {
  std::string source = "<built-in default>";   // the file it came from
  std::vector<std::string> plugin_paths;       // absolute (relative ones resolved against the file)
  std::vector<std::string> plugin_skip;        // backend names not to load
  std::vector<std::string> plugin_load;        // if non-empty: only these backend names are used
  std::vector<std::string> placement;          // device preference, e.g. {"hip:0", "tbb_cpu"}
  std::string placement_default;               // an explicit device for new tensors (no fallback)
  std::string on_mixed_devices = "error";      // "error" or "copy" (a Transfer node moves the operand)
  FusionOptions fusion;                        // "fusion" section
  LoggingConfig logging;                       // "logging" section
  ParallelConfig parallel;                     // "parallel" section
  DistributedConfig distributed;               // "distributed" section
};

// Parses the file at `path`; throws ConfigError on I/O errors, malformed JSON or bad values.
Config load_config(const std::string& path);
// Parses JSON text; `base_dir` resolves relative plugin paths.
Config parse_config(const std::string& text, const std::string& source, const std::string& base_dir);
// The config written back as JSON (every key, defaults included): what ravel-info --config shows.
std::string config_to_json(const Config& c);

}  // namespace ravel::detail
