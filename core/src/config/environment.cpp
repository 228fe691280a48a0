#include "config/environment.hpp"

#include <cstdlib>

namespace ravel::detail {

namespace {
std::string get(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}
}  // namespace

Environment read_environment() {
  Environment e;
  e.config = get("RAVEL_CONFIG");
  e.plugin_path = get("RAVEL_PLUGIN_PATH");
  e.fusion = get("RAVEL_FUSION");
  e.debug = get("RAVEL_DEBUG");
  e.kernel_cache = get("RAVEL_KERNEL_CACHE");
  e.log_plugins = get("RAVEL_LOG_PLUGINS");
  return e;
}

}  // namespace ravel::detail
