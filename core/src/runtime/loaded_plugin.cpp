#include "runtime/loaded_plugin.hpp"

#include <ravel/decompose.hpp>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <mutex>

#include "config/settings.hpp"
#include "ravel/error.hpp"
#include "ravel/runtime.hpp"

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
std::shared_ptr<LoadedPlugin> LoadedPlugin::load(const std::string& path, const AdmitFn& admit,
                                                 std::string* name_out) {
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<LoadedPlugin>> live;
  std::lock_guard<std::mutex> lock(mutex);
  // Every call into the plugin happens below; a plugin is C ABI, but one written in C++ may let
  // an exception escape anyway: it becomes a PluginError naming the plugin, not a failure of the
  // whole runtime.
  try {
    std::shared_ptr<LoadedPlugin> p;
    if (auto it = live.find(path); it != live.end()) p = it->second.lock();
    const bool fresh = p == nullptr;
    if (fresh) p = open(path);
    if (name_out) *name_out = p->name_;
    if (admit) {
      if (std::string reason = admit(p->name_); !reason.empty())
        throw PluginNotAdmitted{p->name_, p->version_, std::move(reason), p->api_->abi_major,
                                p->api_->abi_minor};
    }
    if (fresh) {
      p->start();
      live[path] = p;
    }
    return p;
  } catch (const PluginError&) {
    throw;
  } catch (const PluginNotAdmitted&) {
    throw;
  } catch (const std::exception& e) {
    throw PluginError("plugin " + path + ": a C++ exception escaped through the C ABI: " + e.what());
  } catch (...) {
    throw PluginError("plugin " + path + ": an unknown exception escaped through the C ABI");
  }
}

std::shared_ptr<LoadedPlugin> LoadedPlugin::open(const std::string& path) {
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

  rvl_backend_info info{};
  info.struct_size = sizeof info;
  if (rvl_error* e = api->get_info(&info)) throw fail("get_info failed: " + message_of(api, e));
  if (info.name == nullptr || *info.name == '\0') throw fail("get_info returned no name");
  // The name is what device names are spelled with ("tbb_cpu:0", Device::parse): one that no
  // device name can spell (spaces, capitals, a colon) would load but never be reachable.
  const std::string name(info.name, strnlen(info.name, 65));
  bool spelled = name.size() <= 64;
  for (char ch : name) spelled = spelled && ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_');
  if (!spelled)
    throw fail("get_info names the backend \"" + name.substr(0, 64) + (name.size() > 64 ? "...\"" : "\"") +
               ", which no device name can spell: expected 1 to 64 lower-case letters, digits and '_' "
               "(as in \"tbb_cpu:0\")");
  p->name_ = info.name;
  p->version_ = info.version ? info.version : "";
  return p;
}

void LoadedPlugin::start() {
  const rvl_backend_api* api = api_;
  auto fail = [&](const std::string& why) -> PluginError {
    return PluginError("plugin " + path_ + " (" + name_ + "): " + why);
  };
  rvl_probe_result probe{};
  probe.struct_size = sizeof(rvl_probe_result);
  if (rvl_error* e = api->probe(&probe)) throw fail("probe failed: " + message_of(api, e));
  if (probe.device_count <= 0) {
    probe.reason[sizeof probe.reason - 1] = '\0';
    throw fail(std::string("no devices (probe found 0") +
               (probe.reason[0] ? std::string(": ") + probe.reason : std::string()) + "); skipped");
  }
  score_ = probe.score;

  if (rvl_error* e = api->initialize()) throw fail("initialize failed: " + message_of(api, e));
  initialized_ = true;
  if (rvl_error* e = api->device_count(&device_count_))
    throw fail("device_count failed: " + message_of(api, e));
  if (device_count_ <= 0) throw fail("no devices after initialize; skipped");
  // The core keeps per-device records (capabilities here, device lists in the runtime and
  // ravel-info): a count of INT32_MAX allocated without bound. No machine has this many devices
  // of one kind, so a larger count is a broken plugin, refused.
  if (device_count_ > kMaxDevices)
    throw fail("reports " + std::to_string(device_count_) + " devices, more than the " + std::to_string(kMaxDevices) +
               " Ravel accepts from one plugin (a broken plugin?); skipped");
  // Device capabilities, once: the composites ask for them while building graphs (logsumexp
  // picks RVL_REDUCE_LOGSUMEXP or its fallback), too often to call into the plugin each time.
  // reduce_ops (ABI 1.4) is 0 when a plugin does not state it, which every 1.0-1.3 plugin is:
  // those get SUM|MAX|PROD. A device whose properties cannot be read keeps the defaults (the
  // calls that need it will report the plugin's error).
  caps_.resize(static_cast<size_t>(device_count_));
  for (int32_t d = 0; d < device_count_; ++d) {
    rvl_device_properties props{};
    props.struct_size = sizeof props;
    if (rvl_error* e = api->device_properties(d, &props)) {
      message_of(api, e);
      continue;
    }
    if (RVL_HAS_MEMBER(&props, rvl_device_properties, reduce_ops) && props.reduce_ops != 0)
      caps_[d].reduce_ops = props.reduce_ops | RVL_REDUCE_OPS_BASIC;
    // ABI 1.6: likewise 0 (every 1.0-1.5 plugin) is the 1.0 op table.
    caps_[d].ops = rvl::effective_ops(RVL_HAS_MEMBER(&props, rvl_device_properties, ops) ? props.ops : 0);
    caps_[d].dtypes = props.dtypes;
    // ABI 1.8 (im2col block): 0 (every older plugin) reads as 1, the 1.0 form.
    if (RVL_HAS_MEMBER(&props, rvl_device_properties, contraction_axes))
      caps_[d].contraction_axes = std::clamp<int32_t>(props.contraction_axes, 1, RVL_MAX_RANK);
    // ABI 1.10 (row epilogues): 0 (every older plugin) is none; only reductions it has count.
    if (RVL_HAS_MEMBER(&props, rvl_device_properties, reduce_epilogue_ops))
      caps_[d].reduce_epilogue_ops = props.reduce_epilogue_ops & caps_[d].reduce_ops;
    // ABI 1.11 (chains of row reductions): likewise.
    if (RVL_HAS_MEMBER(&props, rvl_device_properties, reduce_chain_ops))
      caps_[d].reduce_chain_ops = props.reduce_chain_ops & caps_[d].reduce_ops;
    const int32_t memory = RVL_HAS_MEMBER(&props, rvl_device_properties, dlpack_device_type) ? props.dlpack_device_type : 0;
    caps_[d].host_addressable = RAVEL_API_HAS(api, buffer_address) &&
                                (memory == 1 /* kDLCPU */ || (memory == 0 && props.kind == RVL_DEVICE_CPU));
  }
}

const LoadedPlugin::DeviceCaps& LoadedPlugin::caps(int32_t device) const {
  static const DeviceCaps kDefault;
  return device >= 0 && static_cast<size_t>(device) < caps_.size() ? caps_[device] : kDefault;
}

LoadedPlugin::~LoadedPlugin() {
  // Join the plugin's threads before the library is unloaded (lib_ is destroyed after this).
  // A destructor cannot throw: an exception escaping a C++ plugin's shutdown is reported.
  try {
    if (initialized_ && RAVEL_API_HAS(api_, shutdown)) api_->shutdown();
  } catch (...) {
    std::fprintf(stderr, "ravel: warning: plugin %s: an exception escaped shutdown()\n", path_.c_str());
  }
}

std::string LoadedPlugin::take_message(rvl_error* err) const { return message_of(api_, err); }

void LoadedPlugin::check(rvl_error* err, const std::string& what) const {
  if (err == nullptr) return;
  rvl_status code = RAVEL_API_HAS(api_, error_code) ? api_->error_code(err) : RVL_STATUS_INTERNAL;
  const std::string plugin_msg = message_of(api_, err);
  std::string msg = name_ + ": " + what + " failed: " + plugin_msg;
  if (code == RVL_STATUS_OUT_OF_MEMORY) throw OutOfMemoryError(msg);
  // A device that lacks a dtype (f64 on many GPUs) answers UNSUPPORTED with a message that
  // starts "dtype " (docs/abi.md §5): to the user that is a dtype problem, not a broken device.
  if (code == RVL_STATUS_UNSUPPORTED && plugin_msg.rfind("dtype ", 0) == 0) throw DTypeError(msg);
  throw DeviceError(msg);
}

OpSet device_op_set(const Runtime& rt, const Device& device) {
  const LoadedPlugin::DeviceCaps& caps = rt.plugin_for(device)->caps(device.index());
  const OpSet& masked = rt.settings().masked_ops;
  return OpSet{caps.ops & ~masked.alu, caps.reduce_ops & ~masked.reduce};
}

}  // namespace ravel::detail
