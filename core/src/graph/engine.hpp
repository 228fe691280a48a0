// Engine — what the layers before the runtime need from it, as an interface they own.
//
// Note [Layering]
// core/src's folders are the pipeline, and a folder includes only folders before it:
//   graph -> tensor -> autodiff -> nn -> schedule -> config -> runtime
// (docs/architecture.md draws it; tests/architecture checks it). The tensor layer still has to
// make things happen on devices — upload host data, read results back, realize a graph, pick the
// default device — and those belong to the runtime, which comes last. So the graph layer declares
// this interface and the runtime implements it and installs it while libravel_core is loaded
// (runtime/engine.cpp); nothing before the runtime names a runtime type. Device buffers stay
// opaque (DeviceBuffer is only declared here).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "graph/node.hpp"
#include "ravel/device.hpp"

namespace ravel::detail {

class Engine {
 public:
  virtual ~Engine() = default;
  // Where new tensors go (the config's placement); DeviceError when there is none.
  virtual Device default_device() = 0;
  // Throws DeviceError naming `device` and the available devices unless it exists.
  virtual void check_device(const Device& device) = 0;
  // The config's placement.on_mixed_devices: true for "copy", false for "error".
  virtual bool copy_on_mixed_devices() = 0;
  // What `device` runs (Note [Capabilities] in graph/ops.hpp): the op table rows (ABI 1.6) and
  // reductions (1.4) it states, minus RAVEL_MASK_OPS. DeviceError unless the device exists.
  virtual OpSet device_ops(const Device& device) = 0;
  // Whether `device` implements the reduction `op` (device_ops; SUM, MAX and PROD always) and the
  // dtype `t`. DeviceError unless the device exists.
  bool device_has_reduce(const Device& device, ReduceOp op) { return device_ops(device).has(op); }
  virtual bool device_has_dtype(const Device& device, DType t) = 0;
  // The largest axis group a contraction on `device` may carry (ABI 1.8 im2col block,
  // rvl_device_properties.contraction_axes; 1 for the 1.0 form and for devices that lower
  // contractions to programs). conv uses it to skip the im2col copy (Note [Implicit im2col]).
  virtual int device_contraction_axes(const Device& device) = 0;
  // A new buffer of `bytes` bytes on `device` holding a copy of `data`.
  virtual std::shared_ptr<DeviceBuffer> upload(const Device& device, const void* data, uint64_t bytes) = 0;
  // Copies the first `bytes` bytes of `buffer` to `dst`.
  virtual void download(const DeviceBuffer& buffer, void* dst, uint64_t bytes) = 0;
  // Ensures every target (or, for a View, its base) has a buffer: schedules and runs kernels.
  virtual void realize(const std::vector<NodePtr>& targets) = 0;
  // realize({target}) without making the list (Tensor::realize of a one-device tensor, once per
  // eager collective in a loop: docs/distributed.md, "The core's per-call cost").
  virtual void realize_one(const NodePtr& target) { realize(std::vector<NodePtr>{target}); }
  // RAVEL_DEBUG as the runtime read it (0 when unset): the tensor layer prints shardings.
  virtual int debug_level() = 0;
  // The parts (single-device tensors of one shape and dtype, on distinct devices) all-reduced by
  // their plugin's own collective (ABI 1.9 all_reduce; Note [Plugin all-reduce] in
  // runtime/plugin_collective.hpp): one realized node per part, on its part's device, all equal.
  // Empty when that path does not apply (devices of several plugins, a plugin without the
  // member, an op or dtype it lacks, RAVEL_PLUGIN_COLLECTIVES); the caller then composes the
  // collective from transfers and ops. `min` turns Max into the minimum.
  virtual std::vector<NodePtr> plugin_all_reduce(const std::vector<NodePtr>& parts, ReduceOp op, bool min) = 0;
  // Likewise by the plugin's reduce_scatter (ABI 1.12): every part holds n equal chunks in
  // order (flat), result k, of `out_shape`, is chunk k of every part folded in mesh order.
  virtual std::vector<NodePtr> plugin_reduce_scatter(const std::vector<NodePtr>& parts, ReduceOp op, bool min,
                                                     const Shape& out_shape) = 0;
  // Likewise by the plugin's all_gather (ABI 1.12): every result, of `out_shape`, is the parts
  // one after another (flat) in mesh order.
  virtual std::vector<NodePtr> plugin_all_gather(const std::vector<NodePtr>& parts, const Shape& out_shape) = 0;
};

// The installed engine; InternalError if none is (libravel_core's runtime installs one at load).
Engine& engine();
// Installs `e` (not owned; it must outlive every use). The runtime calls this once.
void install_engine(Engine* e);

}  // namespace ravel::detail
