#include "graph/engine.hpp"

#include <atomic>

#include "ravel/error.hpp"

namespace ravel::detail {

namespace {
// Constant-initialised, so it is valid before any dynamic initialiser (including the runtime's
// installer) runs.
std::atomic<Engine*> g_engine{nullptr};
}  // namespace

Engine& engine() {
  Engine* e = g_engine.load(std::memory_order_acquire);
  if (e == nullptr) throw InternalError("ravel: no runtime engine is installed (libravel_core was not initialised)");
  return *e;
}

void install_engine(Engine* e) { g_engine.store(e, std::memory_order_release); }

}  // namespace ravel::detail
