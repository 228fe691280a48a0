// Settings — what the runtime decided from the config file and the environment.
//
// Note [Settings]
// The config file and the environment are read once, when a Runtime is made (Runtime::get's
// first use, or Runtime::reset), into one Settings object that the Runtime owns; the layers
// below receive what they need from it as arguments (the scheduler its FusionOptions, the
// executor its debug level). Nothing re-reads a file, a global or an environment variable per
// realization. The one process-wide knob that stays is ravel::set_fusion_options, an explicit
// override a program sets (runtime/options.cpp).
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/environment.hpp"
#include "graph/ops.hpp"
#include "ravel/fusion.hpp"

namespace ravel::detail {

struct Settings {
  Environment environment;                // as read at start-up (docs/config.md lists them)
  Config config;                          // the file (or built-in defaults), placement defaulted
  std::vector<std::string> env_plugin_paths;  // RAVEL_PLUGIN_PATH, split (when use_environment)
  FusionOptions fusion;                   // config.fusion with RAVEL_FUSION's policy applied
  bool kernel_cache = true;               // false under RAVEL_KERNEL_CACHE=0
  int debug = 0;                          // RAVEL_DEBUG
  OpSet masked_ops{0, 0};                 // RAVEL_MASK_OPS (Note [Capabilities] in graph/ops.hpp)
  bool log_plugins = false;               // print skipped plugins (config logging or RAVEL_LOG_PLUGINS)
  bool log_placement = false;             // print how placement resolved when the runtime starts
  std::vector<std::string> warnings;      // e.g. a missing plugin folder; printed unless logging is off/error
};

// `config_path`: the file to read ("" = RAVEL_CONFIG when `use_environment`, else the built-in
// default). `use_environment` governs RAVEL_CONFIG and RAVEL_PLUGIN_PATH only; the other
// variables always apply. Throws ConfigError for a bad file or a bad RAVEL_FUSION.
Settings load_settings(const std::string& config_path, bool use_environment, const Environment& env);

}  // namespace ravel::detail
