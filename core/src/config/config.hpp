// Reading a Ravel JSON config (docs/config.md). Every bad value is a ConfigError naming its JSON
// path, the bad value and what was expected; unknown keys are errors too ("did you mean").
#pragma once

#include <string>
#include <vector>

#include "ravel/schedule.hpp"

namespace ravel::detail {

struct Config {
  std::string source = "<built-in default>";   // the file it came from
  std::vector<std::string> plugin_paths;       // absolute (relative ones resolved against the file)
  std::vector<std::string> plugin_skip;        // backend names not to load
  std::vector<std::string> placement;          // device preference, e.g. {"hip:0", "tbb_cpu"}
  FusionOptions fusion;                        // "fusion" section
};

// Parses the file at `path`; throws ConfigError on I/O errors, malformed JSON or bad values.
Config load_config(const std::string& path);
// Parses JSON text; `base_dir` resolves relative plugin paths.
Config parse_config(const std::string& text, const std::string& source, const std::string& base_dir);

}  // namespace ravel::detail
