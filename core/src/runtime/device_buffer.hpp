// DeviceBuffer — device memory owned by a plugin; freed by the same plugin when the last
// reference goes (whoever allocates, frees). The layers before the runtime see it only as an
// opaque handle on a node (graph/node.hpp) and reach its contents through the Engine.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "ravel/backend.h"
#include "runtime/loaded_plugin.hpp"

namespace ravel::detail {

// A host operation's end deferred to the first reader of its outputs (Note [Results ended at
// their first reader] in runtime/host_op.cpp); ends it, or rethrows the error its end gave.
struct DeferredEnd;
void end_deferred(std::shared_ptr<DeferredEnd> pending);  // by value: it clears the pointer it was read from
// Starts it without ending it (HostOp::start), or rethrows the error its end gave.
void start_deferred(const std::shared_ptr<DeferredEnd>& pending);

class DeviceBuffer {
 public:
  DeviceBuffer(std::shared_ptr<LoadedPlugin> plugin, int32_t device, uint64_t bytes);
  // Adopts `handle`, a buffer the plugin made over memory it does not own (buffer_wrap, used by
  // DLPack import); it is freed like any other, and the plugin then releases that memory.
  DeviceBuffer(std::shared_ptr<LoadedPlugin> plugin, int32_t device, uint64_t bytes, rvl_buffer* handle)
      : plugin_(std::move(plugin)), device_(device), bytes_(bytes), buffer_(handle) {}
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Every way to the contents (handle, read, write) first ends a deferred host operation that is
  // still to write this buffer (Note [Results ended at their first reader]); one branch when none.
  rvl_buffer* handle() const {
    if (pending_) [[unlikely]] end_deferred(pending_);
    return buffer_;
  }
  uint64_t bytes() const { return bytes_; }
  int32_t device() const { return device_; }
  LoadedPlugin& plugin() const { return *plugin_; }
  void write(const void* src, uint64_t bytes, uint64_t offset = 0);
  void read(void* dst, uint64_t bytes, uint64_t offset = 0) const;
  // Set by the deferred end that will write this buffer, cleared by it when it has (kept when it
  // failed: every later access rethrows its error instead of reading what was never written).
  void set_pending(std::shared_ptr<DeferredEnd> pending) { pending_ = std::move(pending); }
  bool pending() const { return pending_ != nullptr; }
  // Tensor::realize of this buffer's tensor: the deferred end's operation is started, not ended.
  void start_pending() const {
    if (pending_) start_deferred(pending_);
  }
  // A Const node's one-element buffer (realize_const): its value is the node's, fixed for its
  // lifetime, and every graph that interns the same constant shares it (Note [Constants shared
  // by interning] in runtime/jit.cpp).
  void mark_const_value() { const_value_ = true; }
  bool const_value() const { return const_value_; }

 private:
  std::shared_ptr<LoadedPlugin> plugin_;
  int32_t device_;
  uint64_t bytes_;
  rvl_buffer* buffer_ = nullptr;
  std::shared_ptr<DeferredEnd> pending_;
  bool const_value_ = false;
};

}  // namespace ravel::detail
