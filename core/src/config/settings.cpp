#include "config/settings.hpp"

#include <cstdio>
#include <mutex>
#include <set>
#include <sstream>

#include <filesystem>

#include "config/json_check.hpp"
#include "config/json_input.hpp"
#include "ravel/error.hpp"

namespace ravel::detail {

namespace {

// A variable that takes one of a few exact spellings. "true", "1x" or " 1" are errors rather than
// a silent 0 or 1 (atoi's reading), so a typo never quietly turns a switch off.
int env_choice(const char* name, const std::string& value, const std::vector<std::string>& allowed) {
  for (size_t i = 0; i < allowed.size(); ++i)
    if (value == allowed[i]) return static_cast<int>(i);
  throw ConfigError(std::string(name) + ": expected one of " + join_names(allowed) + " (or unset), got \"" +
                    cap_text(value) + "\"");
}

// A plugin folder that is missing or not a folder finds nothing; that is almost always a typo, so it
// is worth a warning that names it (not an error: a search path may be for plugins not built here).
void check_search_path(const std::string& dir, const char* from, std::vector<std::string>& warnings) {
  std::error_code ec;
  const auto st = std::filesystem::status(dir, ec);
  if (st.type() == std::filesystem::file_type::directory) return;
  std::string why = std::filesystem::exists(st) ? "is not a folder" : "does not exist";
  if (ec == std::errc::too_many_symbolic_link_levels)  // "does not exist" sent people looking for a typo
    why = "is a loop of symbolic links; point it at the plugin folder itself";
  else if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
    why = "cannot be read (" + ec.message() + ")";
  warnings.push_back("plugin search path " + cap_text(dir) + " (" + from + ") " + why);
}

}  // namespace

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
      throw ConfigError(std::string("RAVEL_FUSION: ") + cap_text(e.what(), 4 * kMaxEchoChars));
    }
  }
  s.kernel_cache = env.kernel_cache.empty() || env_choice("RAVEL_KERNEL_CACHE", env.kernel_cache, {"0", "1"}) == 1;
  s.debug = env.debug.empty() ? 0 : env_choice("RAVEL_DEBUG", env.debug, {"0", "1", "2"});
  try {
    s.masked_ops = parse_masked_ops(env.mask_ops);
  } catch (const ValueError& e) {
    throw ConfigError(std::string("RAVEL_MASK_OPS: ") + cap_text(e.what(), 4 * kMaxEchoChars));
  }
  for (const auto& dir : s.env_plugin_paths) check_search_path(dir, "from RAVEL_PLUGIN_PATH", s.warnings);
  for (const auto& dir : s.config.plugin_paths)
    check_search_path(dir, "from plugins.search_paths in the config", s.warnings);
  const std::string& level = s.config.logging.level;
  const bool verbose = level == "debug" || level == "info";
  s.log_plugins = s.config.logging.plugins || verbose || !env.log_plugins.empty();
  s.log_placement = s.config.logging.placement || verbose;
  if (level != "off" && level != "error") {
    // Once per process: tools such as ravel-info start several runtimes with the same settings.
    static std::mutex mutex;
    static std::set<std::string> printed;
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& w : s.warnings)
      if (printed.insert(w).second) std::fprintf(stderr, "ravel: warning: %s\n", w.c_str());
  }
  return s;
}

}  // namespace ravel::detail
