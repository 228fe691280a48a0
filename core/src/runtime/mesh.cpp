// The config's mesh (Runtime::mesh) and the data-parallel helpers over it (ravel/sharding.hpp).
#include <algorithm>
#include <cstdlib>
#include <string>

#include "config/settings.hpp"
#include "ravel/runtime.hpp"
#include "ravel/tensor.hpp"
#include "runtime/loaded_plugin.hpp"
#include "runtime/mesh.hpp"

namespace ravel {

namespace detail {

// Note [Mesh devices]
// The oneTBB plugin exposes as many devices as RAVEL_TBB_DEVICES asks (docs/multidevice.md). A
// config whose mesh names tbb_cpu:k for k >= 1 needs k + 1 of them, so the runtime asks for that
// many before the plugin starts, unless the variable is set (the environment wins, as for every
// RAVEL_* setting): one config file then runs the same program on one or several CPU devices.
void request_mesh_devices(const Settings& settings) {
  if (!settings.environment.tbb_devices.empty()) return;
  int32_t highest = 0;
  for (const auto& name : settings.config.parallel.mesh) {
    const Device d = Device::parse(name);
    if (d.backend() == "tbb_cpu") highest = std::max(highest, d.index());
  }
  if (highest > 0) setenv("RAVEL_TBB_DEVICES", std::to_string(highest + 1).c_str(), 0);
}

}  // namespace detail

std::vector<Device> Runtime::mesh() const {
  const auto& names = settings_->config.parallel.mesh;
  std::vector<Device> out;
  for (size_t i = 0; i < names.size(); ++i) {
    const Device d = Device::parse(names[i]);
    std::string why;
    try {
      plugin_for(d);  // DeviceError naming the device and the available ones
    } catch (const DeviceError& e) {
      why = e.what();
      for (const auto& r : records_)  // a plugin of that name that failed to load says why
        if (r.name == d.backend() && !r.loaded) why = "plugin " + r.name + " (" + r.path + ") was not loaded: " + r.status;
    }
    if (!why.empty())
      throw ConfigError(config_source_ + ": $.parallel.mesh[" + std::to_string(i) + "]: " + d.str() +
                        " cannot be used: " + why);
    out.push_back(d);
  }
  return out;
}

int64_t Runtime::mesh_batch_axis() const { return settings_->config.parallel.batch_axis; }

Tensor shard_batch(const Tensor& batch) {
  const Runtime& rt = Runtime::get();
  const std::vector<Device> mesh = rt.mesh();
  if (mesh.empty()) return batch;
  if (mesh.size() == 1) return batch.to(mesh[0]);
  const int64_t axis = rt.mesh_batch_axis();
  if (axis >= batch.ndim() || batch.shape()[axis] % static_cast<int64_t>(mesh.size()) != 0)
    throw ConfigError(rt.config_source() + ": $.parallel.mesh: a mesh of " + std::to_string(mesh.size()) +
                      " devices does not divide the batch: axis " + std::to_string(axis) + " (parallel.batch_axis) of " +
                      shape_str(batch.shape()) + " (expected a batch size that is a multiple of " +
                      std::to_string(mesh.size()) + ")");
  return batch.shard(mesh, axis);
}

Tensor replicate_on_mesh(const Tensor& t) {
  const std::vector<Device> mesh = Runtime::get().mesh();
  if (mesh.empty()) return t;
  return t.replicate(mesh);
}

}  // namespace ravel
