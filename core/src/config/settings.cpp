#include "config/settings.hpp"

#include <cstdlib>
#include <sstream>

#include "ravel/error.hpp"

namespace ravel::detail {

Settings load_settings(const std::string& config_path, bool use_environment, const Environment& env) {
  Settings s;
  s.environment = env;
  std::string path = config_path;
  if (path.empty() && use_environment) path = env.config;
  if (!path.empty()) s.config = load_config(path);
  // The built-in default (configs/default.json writes it out): GPUs first, then the CPU.
  if (s.config.placement.empty() && s.config.placement_default.empty())
    s.config.placement = {"hip:0", "level_zero:0", "tbb_cpu:0"};
  if (use_environment) {
    std::stringstream ss(env.plugin_path);
    for (std::string dir; std::getline(ss, dir, ':');)
      if (!dir.empty()) s.env_plugin_paths.push_back(dir);
  }
  s.fusion = s.config.fusion;
  if (!env.fusion.empty()) {
    try {
      s.fusion.policy = parse_fusion_policy(env.fusion);
    } catch (const ConfigError& e) {
      throw ConfigError(std::string("RAVEL_FUSION: ") + e.what());
    }
  }
  s.kernel_cache = env.kernel_cache != "0";
  s.debug = env.debug.empty() ? 0 : std::atoi(env.debug.c_str());
  const std::string& level = s.config.logging.level;
  const bool verbose = level == "debug" || level == "info";
  s.log_plugins = s.config.logging.plugins || verbose || !env.log_plugins.empty();
  s.log_placement = s.config.logging.placement || verbose;
  return s;
}

}  // namespace ravel::detail
