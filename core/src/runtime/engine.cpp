// The runtime's implementation of the Engine the graph and tensor layers call (Note [Layering] in
// graph/engine.hpp), installed while libravel_core is loaded. Every call goes to the process-wide
// Runtime in force at that moment, so Runtime::reset takes effect for the next call.
#include "config/settings.hpp"  // Settings::debug (was reached only through a unity neighbour)
#include "graph/engine.hpp"
#include "ravel/runtime.hpp"
#include "runtime/device_buffer.hpp"
#include "runtime/loaded_plugin.hpp"
#include "runtime/plugin_collective.hpp"
#include "runtime/realize.hpp"
#include "runtime/stats.hpp"

namespace ravel::detail {

namespace {

class RuntimeEngine final : public Engine {
 public:
  Device default_device() override { return Runtime::get().default_device(); }
  void check_device(const Device& device) override { Runtime::get().plugin_for(device); }
  OpSet device_ops(const Device& device) override { return device_op_set(Runtime::get(), device); }
  bool device_has_dtype(const Device& device, DType t) override {
    const auto& caps = Runtime::get().plugin_for(device)->caps(device.index());
    return (caps.dtypes >> static_cast<uint32_t>(t)) & 1u;
  }
  int device_contraction_axes(const Device& device) override {
    const auto plugin = Runtime::get().plugin_for(device);
    if (!RAVEL_API_HAS(&plugin->api(), execute_contraction)) return 1;
    return plugin->caps(device.index()).contraction_axes;
  }
  bool copy_on_mixed_devices() override { return Runtime::get().on_mixed_devices() == MixedDevices::Copy; }
  // Copies and realizations hold the buffer lock (Note [Threads] in graph/node.hpp); allocation
  // does not need it (the ABI makes buffer_allocate/free callable from any thread).
  std::shared_ptr<DeviceBuffer> upload(const Device& device, const void* data, uint64_t bytes) override {
    auto buffer = std::make_shared<DeviceBuffer>(Runtime::get().plugin_for(device), device.index(), bytes);
    std::lock_guard<std::recursive_mutex> lock(buffer_mutex());
    buffer->write(data, bytes);
    return buffer;
  }
  void download(const DeviceBuffer& buffer, void* dst, uint64_t bytes) override {
    std::lock_guard<std::recursive_mutex> lock(buffer_mutex());
    buffer.read(dst, bytes);
  }
  int debug_level() override { return Runtime::get().settings().debug; }
  std::vector<NodePtr> plugin_all_reduce(const std::vector<NodePtr>& parts, ReduceOp op, bool min) override {
    return run_plugin_all_reduce(parts, op, min);
  }
  std::vector<NodePtr> plugin_reduce_scatter(const std::vector<NodePtr>& parts, ReduceOp op, bool min,
                                             const Shape& out_shape) override {
    return run_plugin_reduce_scatter(parts, op, min, out_shape);
  }
  std::vector<NodePtr> plugin_all_gather(const std::vector<NodePtr>& parts, const Shape& out_shape) override {
    return run_plugin_all_gather(parts, out_shape);
  }
  void realize(const std::vector<NodePtr>& targets) override {
    std::lock_guard<std::recursive_mutex> lock(buffer_mutex());
    // Note [Realize starts, the reader waits] (host_op_deferred.cpp): a target that is a pending
    // result of a host operation is started here; its end still waits for the first reader.
    for (const auto& t : targets) {
      const Node& base = t->kind == NodeKind::View ? *t->srcs[0] : *t;
      if (base.buffer && base.buffer->pending()) base.buffer->start_pending();
    }
    realize_nodes(Runtime::get(), targets);
  }
  void realize_one(const NodePtr& target) override {
    std::lock_guard<std::recursive_mutex> lock(buffer_mutex());
    const Node& base = target->kind == NodeKind::View ? *target->srcs[0] : *target;
    if (!base.buffer) return realize_nodes(Runtime::get(), {target});
    if (base.buffer->pending()) base.buffer->start_pending();  // as realize above
    KernelStats stats;  // what realize_nodes records for targets that all have their buffers
    stats.realizations = 1;
    record_realization(stats);
  }
};

// Never destroyed: tensors may be realized or freed during static destruction.
RuntimeEngine* const g_engine = [] {
  auto* e = new RuntimeEngine;
  install_engine(e);
  return e;
}();

}  // namespace

}  // namespace ravel::detail
