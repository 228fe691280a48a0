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
  e.tbb_devices = get("RAVEL_TBB_DEVICES");
  e.debug = get("RAVEL_DEBUG");
  e.kernel_cache = get("RAVEL_KERNEL_CACHE");
  e.log_plugins = get("RAVEL_LOG_PLUGINS");
  e.mask_ops = get("RAVEL_MASK_OPS");
  e.dist_timeout = get("RAVEL_DIST_TIMEOUT_S");
  e.communicator = get("RAVEL_COMMUNICATOR");
  e.ompi_size = get("OMPI_COMM_WORLD_SIZE");
  e.ompi_rank = get("OMPI_COMM_WORLD_RANK");
  e.pmi_size = get("PMI_SIZE");
  e.pmi_rank = get("PMI_RANK");
  return e;
}

}  // namespace ravel::detail
