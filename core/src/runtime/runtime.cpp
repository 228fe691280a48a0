#include "ravel/runtime.hpp"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>

#include <boost/dll/runtime_symbol_info.hpp>

#include "config/settings.hpp"
#include "graph/node.hpp"
#include "ravel/error.hpp"
#include "runtime/loaded_plugin.hpp"
#include "runtime/mesh.hpp"

namespace ravel {

using detail::LoadedPlugin;

namespace {
// Note [The current runtime without a lock]
// Runtime::get is called several times per eager operation (each realization, each collective's
// plugin lookup); its lock was a few percent of a 4 KiB all-reduce's core time (docs/distributed.md,
// "The core's per-call cost"). The runtime is made once and replaced only by reset, so get reads
// an atomic copy of the pointer and takes the lock only to make the first one. A reference
// returned before a reset was already left dangling by the reset, with or without the lock. At
// exit the runtime stays current while it is destroyed (as the unique_ptr alone had it), then
// none is, and a later get makes a new one, as before.
std::mutex g_runtime_mutex;
std::atomic<Runtime*> g_current{nullptr};
struct RuntimeSlot {
  std::unique_ptr<Runtime> runtime;
  ~RuntimeSlot() {
    delete runtime.release();  // g_current still names it while it is destroyed
    g_current.store(nullptr, std::memory_order_release);
  }
} g_runtime;

bool is_plugin_file(const std::filesystem::path& p) {
  std::string f = p.filename().string();
  return f.rfind("libravel_backend_", 0) == 0 && p.extension() == ".so";
}

// Loading is silent unless RAVEL_LOG_PLUGINS or the config's logging asks; ravel-info shows the
// same records.
void log_skip(const PluginRecord& r, bool log) {
  if (log) std::fprintf(stderr, "ravel: skipped plugin %s: %s\n", r.path.c_str(), r.status.c_str());
}
}  // namespace

Runtime& Runtime::get() {
  if (Runtime* r = g_current.load(std::memory_order_acquire)) return *r;
  std::lock_guard<std::mutex> lock(g_runtime_mutex);
  if (!g_runtime.runtime) g_runtime.runtime = std::make_unique<Runtime>(RuntimeOptions{});
  g_current.store(g_runtime.runtime.get(), std::memory_order_release);
  return *g_runtime.runtime;
}

Runtime& Runtime::reset(const RuntimeOptions& options) {
  auto fresh = std::make_unique<Runtime>(options);
  std::lock_guard<std::mutex> lock(g_runtime_mutex);
  g_current.store(fresh.get(), std::memory_order_release);
  g_runtime.runtime = std::move(fresh);
  return *g_runtime.runtime;
}

Runtime::Runtime(const RuntimeOptions& options)
    : settings_(std::make_unique<const detail::Settings>(
          detail::load_settings(options.config_path, options.use_environment, detail::read_environment()))) {
  const detail::Config& config = settings_->config;
  mixed_ = config.on_mixed_devices == "copy" ? MixedDevices::Copy : MixedDevices::Error;
  config_source_ = config.source;
  effective_config_ = detail::config_to_json(config);

  load_plugins_ = options.load_plugins;
  excluded_ = options.excluded_plugins;
  search_paths_ = options.extra_paths;
  search_paths_.insert(search_paths_.end(), settings_->env_plugin_paths.begin(), settings_->env_plugin_paths.end());
  search_paths_.insert(search_paths_.end(), config.plugin_paths.begin(), config.plugin_paths.end());
  if (options.use_default_paths) {
    // Next to libravel_core: its folder and ravel/plugins below it (build and install trees).
    auto lib_dir = boost::dll::this_line_location().parent_path();
    search_paths_.push_back((lib_dir / "ravel" / "plugins").string());
    search_paths_.push_back(lib_dir.string());
  }
  request_mesh_devices(*settings_);  // before the oneTBB plugin starts (runtime/mesh.cpp)
  for (const auto& dir : search_paths_) discover(dir);
  if (settings_->log_placement) {
    for (const auto& r : placement_rules())
      std::fprintf(stderr, "ravel: placement %s: %s\n", r.rule.c_str(), r.available ? "available" : r.reason.c_str());
    try {
      std::fprintf(stderr, "ravel: new tensors go to %s\n", default_device().str().c_str());
    } catch (const Error& e) {
      std::fprintf(stderr, "ravel: no default device: %s\n", e.what());
    }
  }
}

Runtime::~Runtime() = default;

const FusionOptions& Runtime::configured_fusion() const { return settings_->config.fusion; }
const std::string& Runtime::fusion_from_environment() const { return settings_->environment.fusion; }

void Runtime::discover(const std::string& folder) {
  std::error_code ec;
  if (!std::filesystem::is_directory(folder, ec)) return;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(folder, ec))
    if (is_plugin_file(entry.path())) files.push_back(entry.path());
  std::sort(files.begin(), files.end());  // deterministic order
  for (const auto& f : files) {
    auto canonical = std::filesystem::weakly_canonical(f, ec).string();
    if (ec) {  // a symlink loop or a dangling link: canonical is "", and dlopen("") is the program
      PluginRecord rec;
      rec.path = f.string();
      rec.status = ec == std::errc::too_many_symbolic_link_levels
                       ? "skipped: the file is a loop of symbolic links; point the link at the plugin library itself"
                       : "skipped: cannot resolve the path (" + ec.message() + ")";
      records_.push_back(rec);
      log_skip(records_.back(), settings_->log_plugins);
      ec.clear();
      continue;
    }
    bool seen = false;
    for (const auto& r : records_) seen = seen || r.path == canonical;
    if (seen) continue;
    if (auto ex = excluded_.find(canonical); ex != excluded_.end() || !load_plugins_) {
      PluginRecord rec;
      rec.path = canonical;
      rec.status = ex != excluded_.end() ? ex->second : "found (not loaded: plugin loading is off)";
      records_.push_back(rec);
      continue;
    }
    try {
      load_plugin(canonical);
    } catch (const PluginError&) {
      log_skip(records_.back(), settings_->log_plugins);  // recorded; the other plugins go on
    }
  }
}

namespace {
// plugins.load as a message lists it: a typo there ("tbbcpu") skips every plugin, and each
// skipped record then shows what was asked for.
std::string join_load_names(const std::vector<std::string>& names) {
  std::string out = "it lists";
  for (size_t i = 0; i < names.size() && i < 8; ++i) out += (i ? ", \"" : " \"") + names[i] + "\"";
  return names.size() > 8 ? out + ", ..." : out;
}
}  // namespace

void Runtime::load_plugin(const std::string& path) {
  PluginRecord rec;
  rec.path = path;
  // plugins.skip and plugins.load are decided from the name alone, before the plugin is probed
  // or initialised: a skipped plugin runs nothing but its entry point and get_info.
  const auto& skip = settings_->config.plugin_skip;
  const auto& load_only = settings_->config.plugin_load;
  auto admit = [&](const std::string& name) -> std::string {
    if (std::find(skip.begin(), skip.end(), name) != skip.end())
      return "skipped: listed in the config's plugins.skip";
    if (!load_only.empty() && std::find(load_only.begin(), load_only.end(), name) == load_only.end())
      return "skipped: not listed in the config's plugins.load (" + join_load_names(load_only) +
             "); add \"" + name + "\" there to load it";
    return "";
  };
  try {
    auto plugin = LoadedPlugin::load(path, admit, &rec.name);
    rec.name = plugin->name();
    rec.abi_major = plugin->api().abi_major;
    rec.abi_minor = plugin->api().abi_minor;
    rec.version = plugin->version();
    rec.device_count = plugin->device_count();
    for (const auto& p : plugins_)
      if (p->name() == rec.name) {
        rec.status = "skipped: a plugin named " + rec.name + " is already loaded from " + p->path();
        records_.push_back(rec);
        return;
      }
    rec.loaded = true;
    rec.status = "ok";
    records_.push_back(rec);
    plugins_.push_back(std::move(plugin));
  } catch (const detail::PluginNotAdmitted& n) {
    rec.name = n.name;
    rec.version = n.version;
    rec.abi_major = n.abi_major;
    rec.abi_minor = n.abi_minor;
    rec.status = n.reason;
    records_.push_back(rec);
    log_skip(rec, settings_->log_plugins);
  } catch (const PluginError& e) {
    rec.status = e.what();
    records_.push_back(rec);
    throw;
  }
}

std::shared_ptr<LoadedPlugin> Runtime::plugin_for(const Device& device) const {
  for (const auto& p : plugins_)
    if (p->name() == device.backend()) {
      RAVEL_CHECK(device.index() < p->device_count(), DeviceError, "unknown device ", device.str(), ": backend ",
                  p->name(), " has ", p->device_count(), " device(s); available devices: ", available_devices());
      return p;
    }
  throw DeviceError("unknown device " + device.str() + ": no loaded backend is named \"" + device.backend() +
                    "\"; available devices: " + available_devices());
}

std::string Runtime::available_devices() const {
  std::string avail;
  for (const auto& p : plugins_)
    for (int32_t i = 0; i < p->device_count(); ++i) avail += (avail.empty() ? "" : ", ") + Device(p->name(), i).str();
  return avail.empty() ? "none (no plugin loaded; see ravel-info)" : avail;
}

Device Runtime::resolve_device(const std::string& name) const {
  Device d = Device::parse(name);
  plugin_for(d);  // DeviceError naming the device and the available ones
  return d;
}

std::vector<PlacementRule> Runtime::placement_rules() const {
  std::vector<PlacementRule> out;
  const detail::Config& c = settings_->config;
  auto rules = c.placement_default.empty() ? c.placement : std::vector<std::string>{c.placement_default};
  for (const auto& want : rules) {
    PlacementRule r;
    r.rule = want;
    try {
      resolve_device(want);
      r.available = true;
    } catch (const DeviceError& e) {
      r.reason = e.what();
    }
    out.push_back(r);
  }
  return out;
}

Device Runtime::default_device() const {
  // An explicit device has no fallback: a config that names one wants exactly that one.
  const detail::Config& c = settings_->config;
  if (!c.placement_default.empty()) {
    try {
      return resolve_device(c.placement_default);
    } catch (const DeviceError& e) {
      throw DeviceError(std::string("placement.default of ") + config_source_ + ": " + e.what());
    }
  }
  for (const auto& want : c.placement) {
    Device d = Device::parse(want);
    for (const auto& p : plugins_)
      if (p->name() == d.backend() && d.index() < p->device_count()) return d;
  }
  RAVEL_CHECK(!plugins_.empty(), DeviceError,
              "no device available: no backend plugin could be loaded (searched: ",
              [&] { std::string s; for (auto& p : search_paths_) s += (s.empty() ? "" : ", ") + p; return s; }(),
              "); run ravel-info to see why");
  // Nothing in the preference list exists: the backend whose probe scored highest (the first
  // found among equals).
  const LoadedPlugin* best = plugins_.front().get();
  for (const auto& p : plugins_)
    if (p->score() > best->score()) best = p.get();
  return Device(best->name(), 0);
}

std::vector<DeviceRecord> Runtime::devices() const {
  std::vector<DeviceRecord> out;
  for (const auto& p : plugins_) {
    for (int32_t i = 0; i < p->device_count(); ++i) {
      DeviceRecord r;
      r.device = Device(p->name(), i);
      if (RAVEL_API_HAS(&p->api(), device_properties)) {
        rvl_device_properties props{};
        props.struct_size = sizeof props;
        p->check(p->api().device_properties(i, &props), "device_properties");
        props.name[sizeof props.name - 1] = '\0';
        r.name = props.name;
        r.kind = props.kind == RVL_DEVICE_CPU ? "cpu" : props.kind == RVL_DEVICE_GPU ? "gpu" : "other";
        r.memory_bytes = props.memory_bytes;
        r.compute_units = props.compute_units;
        r.max_rank = props.max_rank;
        if (RVL_HAS_MEMBER(&props, rvl_device_properties, details)) {
          props.arch[sizeof props.arch - 1] = '\0';
          props.details[sizeof props.details - 1] = '\0';
          r.arch = props.arch;
          r.warp_size = props.warp_size;
          r.details = props.details;
        }
        for (int t = 0; t < RVL_DTYPE_COUNT_; ++t)
          if (props.dtypes & (1u << t)) r.dtypes.push_back(dtype_name(static_cast<DType>(t)));
      }
      out.push_back(r);
    }
  }
  return out;
}

void synchronize(const Device& device) {
  auto plugin = Runtime::get().plugin_for(device);
  // Serialised with realizations and copies (Note [Threads] in graph/node.hpp).
  std::lock_guard<std::recursive_mutex> lock(detail::buffer_mutex());
  plugin->check(plugin->api().synchronize(device.index()), "synchronize " + device.str());
}

}  // namespace ravel
