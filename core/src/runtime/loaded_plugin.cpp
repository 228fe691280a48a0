#include "runtime/loaded_plugin.hpp"

#include <cstdio>
#include <map>
#include <mutex>

#include "ravel/error.hpp"

namespace ravel::detail {

namespace {
std::string message_of(const rvl_backend_api* api, rvl_error* err) {
  std::string msg = "(no message)";
  if (RAVEL_API_HAS(api, error_message)) {
    const char* m = api->error_message(err);
    if (m) msg = m;
  }
  if (RAVEL_API_HAS(api, error_destroy)) api->error_destroy(err);
  return msg;
}
}  // namespace

// A shared object is loaded once per process (dlopen would hand every Runtime the same
// library, whose global state initialize/shutdown manage), so live Plugins are shared by path
// and the library is shut down only when its last user lets go.
std::shared_ptr<LoadedPlugin> LoadedPlugin::load(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<LoadedPlugin>> live;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = live.find(path); it != live.end())
    if (auto existing = it->second.lock()) return existing;
  auto p = load_new(path);
  live[path] = p;
  return p;
}

std::shared_ptr<LoadedPlugin> LoadedPlugin::load_new(const std::string& path) {
  std::shared_ptr<LoadedPlugin> p(new LoadedPlugin());
  p->path_ = path;
  auto fail = [&](const std::string& why) -> PluginError {
    return PluginError("plugin " + path + ": " + why);
  };
  try {
    p->lib_.load(path, boost::dll::load_mode::rtld_lazy | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    throw fail(std::string("cannot load (not a shared object, or missing dependencies): ") + e.what());
  }
  if (!p->lib_.has(RVL_BACKEND_ENTRY_SYMBOL))
    throw fail("does not export the entry symbol " RVL_BACKEND_ENTRY_SYMBOL);
  auto entry = p->lib_.get<const rvl_backend_api*()>(RVL_BACKEND_ENTRY_SYMBOL);
  const rvl_backend_api* api = entry();
  if (api == nullptr) throw fail("entry symbol returned NULL");
  constexpr size_t kHeader = offsetof(rvl_backend_api, abi_minor) + sizeof(uint32_t);
  if (api->struct_size < kHeader)
    throw fail("function table too small: struct_size " + std::to_string(api->struct_size) +
               ", expected at least " + std::to_string(kHeader) +
               " (struct_size, abi_major, abi_minor) and " +
               std::to_string(RVL_BACKEND_API_STRUCT_SIZE_1_0) + " for a complete v1.0 table");
  if (api->abi_major != RVL_ABI_MAJOR)
    throw fail("ABI major version " + std::to_string(api->abi_major) + " does not match the core's " +
               std::to_string(RVL_ABI_MAJOR) + " (expected " + std::to_string(RVL_ABI_MAJOR) + ".x)");
  // The members every backend must have: backend.h's RVL_REQUIRED_MEMBERS, the same list
  // ravel-conformance checks.
  std::string missing;
#define RAVEL_CHECK_REQUIRED_(member) \
  if (!RAVEL_API_HAS(api, member)) missing += missing.empty() ? #member : ", " #member;
  RVL_REQUIRED_MEMBERS(RAVEL_CHECK_REQUIRED_)
#undef RAVEL_CHECK_REQUIRED_
  if (!missing.empty())
    throw fail("function table lacks the required member(s) " + missing + " (struct_size " +
               std::to_string(api->struct_size) + ", ABI " + std::to_string(api->abi_major) + "." +
               std::to_string(api->abi_minor) + "; backend.h lists the required members)");
  p->api_ = api;

  rvl_probe_result probe{};
  probe.struct_size = sizeof(rvl_probe_result);
  if (rvl_error* e = api->probe(&probe)) throw fail("probe failed: " + message_of(api, e));
  if (probe.device_count <= 0) {
    probe.reason[sizeof probe.reason - 1] = '\0';
    throw fail(std::string("no devices (probe found 0") +
               (probe.reason[0] ? std::string(": ") + probe.reason : std::string()) + "); skipped");
  }
  p->score_ = probe.score;

  if (rvl_error* e = api->initialize()) throw fail("initialize failed: " + message_of(api, e));
  p->initialized_ = true;

  rvl_backend_info info{sizeof(rvl_backend_info), nullptr, nullptr, nullptr};
  if (rvl_error* e = api->get_info(&info)) throw fail("get_info failed: " + message_of(api, e));
  if (info.name == nullptr || *info.name == '\0') throw fail("get_info returned no name");
  p->name_ = info.name;
  p->version_ = info.version ? info.version : "";

  if (rvl_error* e = api->device_count(&p->device_count_))
    throw fail("device_count failed: " + message_of(api, e));
  if (p->device_count_ <= 0) throw fail("no devices after initialize; skipped");
  return p;
}

LoadedPlugin::~LoadedPlugin() {
  // Join the plugin's threads before the library is unloaded (lib_ is destroyed after this).
  if (initialized_ && RAVEL_API_HAS(api_, shutdown)) api_->shutdown();
}

std::string LoadedPlugin::take_message(rvl_error* err) const { return message_of(api_, err); }

void LoadedPlugin::check(rvl_error* err, const std::string& what) const {
  if (err == nullptr) return;
  rvl_status code = RAVEL_API_HAS(api_, error_code) ? api_->error_code(err) : RVL_STATUS_INTERNAL;
  std::string msg = name_ + ": " + what + " failed: " + message_of(api_, err);
  if (code == RVL_STATUS_OUT_OF_MEMORY) throw OutOfMemoryError(msg);
  throw DeviceError(msg);
}

}  // namespace ravel::detail
