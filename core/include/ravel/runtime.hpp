// ravel::Runtime — finds, loads and version-negotiates backend plugins and lists their devices.
//
// Plugins are looked up (in this order) in the folders named by RAVEL_PLUGIN_PATH (':'-separated),
// the config's "plugins.search_paths", and next to libravel_core (its folder and
// ravel/plugins below it), so that an installed or built core finds its plugins with no
// configuration. A plugin that cannot be used is recorded with the reason and skipped; the
// others keep working (docs/architecture.md, "Plugin loading").
#pragma once

#include <cstdint>
#include <memory>
#include <map>
#include <string>
#include <vector>

#include "ravel/device.hpp"
#include "ravel/schedule.hpp"

namespace ravel {

struct PluginRecord {
  std::string path;       // the shared object's path
  std::string name;       // the backend's name (empty if it never got that far)
  bool loaded = false;    // usable: loaded, negotiated, initialised, with >= 1 device
  std::string status;     // "ok", or why it was skipped
  uint32_t abi_major = 0, abi_minor = 0;
  std::string version;    // the plugin's own version string
  int32_t device_count = 0;
};

struct DeviceRecord {
  Device device;
  std::string name;
  std::string kind;  // "cpu", "gpu", "other"
  uint64_t memory_bytes = 0;
  int32_t compute_units = 0;
  std::vector<std::string> dtypes;
  int32_t max_rank = 0;
  std::string arch;       // "sm_90", "gfx90a", "dg2", "x86-64"; empty if the plugin says nothing
  int32_t warp_size = 0;  // warp / wavefront / subgroup width; 0 if unknown
  std::string details;    // further properties, "key=value; ..."
};

// How one entry of the config's placement preference resolved (ravel-info --config shows these).
struct PlacementRule {
  std::string rule;        // as written in the config, e.g. "hip:0"
  bool available = false;  // a loaded backend of that name has that device
  std::string reason;      // why not, when not available
};

// What an op does with operands on different devices (config "placement.on_mixed_devices").
enum class MixedDevices : uint8_t { Error, Copy };

struct RuntimeOptions {
  std::string config_path;                // empty: RAVEL_CONFIG, else the built-in default
  std::vector<std::string> extra_paths;   // searched before everything else
  bool use_environment = true;            // honour RAVEL_PLUGIN_PATH and RAVEL_CONFIG
  bool use_default_paths = true;          // search next to libravel_core
  // false: only find plugin files (recorded as "found, not loaded"), run none of them; ravel-info
  // uses it to examine each plugin in a child process before loading the survivors.
  bool load_plugins = true;
  // Plugin files (canonical paths) never to load, each with the reason recorded for it.
  std::map<std::string, std::string> excluded_plugins;
};

namespace detail {
class LoadedPlugin;
struct Settings;
}  // namespace detail

class Runtime {
 public:
  // The process-wide runtime, created on first use with default options.
  static Runtime& get();
  // Replaces the process-wide runtime (tests, tools). Tensors made before keep their devices'
  // plugins alive until they are destroyed.
  static Runtime& reset(const RuntimeOptions& options);

  explicit Runtime(const RuntimeOptions& options);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const std::vector<PluginRecord>& plugins() const { return records_; }
  std::vector<DeviceRecord> devices() const;
  // Where new tensors go: the first device of the placement preference that exists.
  Device default_device() const;
  // Loads one plugin file now (even if a plugin of that name is already loaded elsewhere, the
  // first one stays). Throws PluginError naming the path and the reason; the record is kept.
  void load_plugin(const std::string& path);
  // The loaded plugin that serves `device`; DeviceError naming the device and the ones available.
  std::shared_ptr<detail::LoadedPlugin> plugin_for(const Device& device) const;
  const std::vector<std::string>& search_paths() const { return search_paths_; }
  // The config's fusion options (before RAVEL_FUSION; see ravel::fusion_options()).
  const FusionOptions& configured_fusion() const;
  // The config file and environment as read when this runtime started (Note [Settings] in
  // core/src/config/settings.hpp): what the runtime passes down to the scheduler and executor.
  const detail::Settings& settings() const { return *settings_; }
  // RAVEL_FUSION as read when this runtime started ("" when unset): it overrides the config's
  // fusion.policy unless set_fusion_options was called (ravel-info shows it).
  const std::string& fusion_from_environment() const;

  // ---- placement and configuration ------------------------------------------------------------
  // The config file in force ("<built-in default>" when none), and the effective configuration
  // written back as JSON with every default filled in.
  const std::string& config_source() const { return config_source_; }
  const std::string& effective_config() const { return effective_config_; }
  // Each placement preference entry and whether it exists here. An explicit "placement.default"
  // is the only rule when set.
  std::vector<PlacementRule> placement_rules() const;
  // An explicitly named device ("hip:0"): DeviceError naming it and the available devices when
  // it does not exist (no fallback, unlike the preference list).
  Device resolve_device(const std::string& name) const;
  // "tbb_cpu:0, hip:0" (or "none ...").
  std::string available_devices() const;
  // "placement.on_mixed_devices": Copy moves operands with a Transfer node (docs/config.md).
  MixedDevices on_mixed_devices() const { return mixed_; }
  // The config's "parallel.mesh" (docs/sharding.md), each device checked to exist: ConfigError
  // naming the JSON path and the reason (unknown device, its plugin failed to load) otherwise.
  // Empty when the config names no mesh.
  std::vector<Device> mesh() const;
  int64_t mesh_batch_axis() const;

 private:
  void discover(const std::string& folder);

  std::unique_ptr<const detail::Settings> settings_;  // read once, in the constructor
  std::string config_source_, effective_config_;
  MixedDevices mixed_ = MixedDevices::Error;
  std::vector<std::string> search_paths_;
  bool load_plugins_ = true;
  std::map<std::string, std::string> excluded_;
  std::vector<PluginRecord> records_;
  std::vector<std::shared_ptr<detail::LoadedPlugin>> plugins_;
};

// Waits until all work queued on `device` has finished. Asynchronous backends (hip,
// level_zero) queue kernels and return: realize() means "scheduled", reading a result waits
// for it. Timing code calls this after the timed work (ravel-bench does, per repetition).
// DeviceError for a device no plugin serves.
void synchronize(const Device& device);

}  // namespace ravel
