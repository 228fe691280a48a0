// Kernel capture: watching the kernels a piece of code launches, so that they can be launched
// again without the code (ravel::Jit, runtime/jit.cpp).
//
// While a KernelRecorder is active on a thread, every kernel that thread's realizations launch
// is reported to it after it ran, with the recipe it belongs to and the buffers it was bound to.
// Recording is per thread, so realizations on other threads are never mixed into a capture.
#pragma once

#include <memory>
#include <vector>

#include "graph/node.hpp"
#include "runtime/execute.hpp"
#include "schedule/recipe.hpp"

namespace ravel::detail {

class HostOp;

class KernelRecorder {
 public:
  virtual ~KernelRecorder() = default;
  // `kernel` (part of `recipe`) has just run with its operands bound through `buffer_of` and its
  // result in `out.buffer`. May throw; the realization then fails like a failing kernel.
  virtual void kernel_ran(const std::shared_ptr<const Recipe>& recipe, const CachedKernel& kernel,
                          const BufferOf& buffer_of, const Node& out) = 0;
  // A host operation (runtime/host_op.hpp) began on `inputs` / ended writing `outputs` (fresh
  // buffers). May throw, as kernel_ran.
  virtual void host_op_begun(const std::shared_ptr<HostOp>& op, const std::vector<std::shared_ptr<DeviceBuffer>>& inputs) = 0;
  virtual void host_op_ended(const std::shared_ptr<HostOp>& op, const std::vector<std::shared_ptr<DeviceBuffer>>& outputs,
                             const std::vector<Device>& devices) = 0;
};

// This thread's active recorder, or null.
KernelRecorder* active_recorder();

// Makes `recorder` this thread's active recorder for the scope's lifetime (scopes nest).
class RecordingScope {
 public:
  explicit RecordingScope(KernelRecorder* recorder);
  ~RecordingScope();
  RecordingScope(const RecordingScope&) = delete;
  RecordingScope& operator=(const RecordingScope&) = delete;

 private:
  KernelRecorder* previous_;
};

}  // namespace ravel::detail
