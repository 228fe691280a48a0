#include "runtime/options.hpp"

#include <mutex>
#include <optional>

#include "config/settings.hpp"
#include "schedule/kernel_cache.hpp"

namespace ravel {

namespace {
// Process-wide on purpose: set_fusion_options is documented to hold "for this process", so it
// survives Runtime::reset (tests and ravel-bench switch policies around resets).
std::mutex g_options_mutex;
std::optional<FusionOptions> g_override;
}  // namespace

namespace detail {

FusionOptions fusion_in_force(const Runtime& runtime) {
  {
    std::lock_guard<std::mutex> lock(g_options_mutex);
    if (g_override) return *g_override;
  }
  return runtime.settings().fusion;
}

}  // namespace detail

FusionOptions fusion_options() {
  {
    std::lock_guard<std::mutex> lock(g_options_mutex);
    if (g_override) return *g_override;  // no runtime needed (nor started) for an override
  }
  return Runtime::get().settings().fusion;
}

void set_fusion_options(const FusionOptions& options) {
  std::lock_guard<std::mutex> lock(g_options_mutex);
  g_override = options;
}

void clear_kernel_cache() { detail::kernel_cache_clear(); }
size_t kernel_cache_size() { return detail::kernel_cache_entries(); }

}  // namespace ravel
