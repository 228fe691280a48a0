// ravel::Jit over sharded tensors: the capture and replay of the parts.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ravel/jit.hpp"
#include "tensor/sharded.hpp"

namespace ravel::detail {

// Note [Sharded Jit]
// A Jit records kernels and the buffers they touch; a sharded tensor is a bundle of per-device
// parts, each with its own buffer. So a call whose inputs or state are sharded runs an inner Jit
// over the *parts*: its inputs are every part of every input, its state every part of every state
// tensor (held here, at stable addresses), and the function it captures rebuilds the bundles from
// the parts before calling the user's function and takes them apart after. A replay then launches
// the recorded per-device kernels and transfers, and the bundles are put together again from the
// replayed parts. The layouts are part of the signature: a call whose inputs are split otherwise
// (even into parts of the same shapes) is captured afresh. Outputs that are partial results
// (Note [Partial results] in tensor/sharded.hpp) are combined inside the capture: a step's
// outputs are realized values a caller reads (a loss), and a partial one would need a combine
// realized outside the replay on every read (~55 us of the 2-device makemore step,
// docs/performance.md §6, 2026-12-07).
// Note [Inputs split inside the step]
// A training loop splits each new batch as it calls the step (`shard_batch(from_vector(...))`):
// its parts are then unrealized cuts of one tensor, a view on the first device and a copy and a
// transfer for every other. Bound as parts, each was realized on its own before the replay, four
// schedulings and five kernels per 2-device makemore step on the calling thread, 11 us of the
// main job's step (docs/performance.md §6, 2026-12-07, helper mk2dev2). Such an input is passed
// to the inner Jit as the one tensor it was cut from, and the capture cuts it again (the same
// rule, Tensor::shard's), so the cuts are kernels of the step: replayed in each device's lane,
// the first device's view read in place by its consumers. Recognised exactly: Tensor::shard
// marks the bundle it makes with the tensor it split (Node::shard_source), and the input's parts
// are still unrealized; anything else (realized parts, a bundle made otherwise) is bound part by
// part. (Checking instead that splitting the base of the first part again gives the same
// hash-consed nodes cost ~3 us a main-job step in hash-consing.) Whether an input came this way
// is part of the signature, like its layout.
class ShardedJit {
 public:
  ShardedJit(Jit::Function fn, std::vector<Tensor*> state);
  std::vector<Tensor> call(const std::vector<Tensor>& inputs);
  Jit& inner() { return *inner_; }

 private:
  std::vector<Tensor> traced(const std::vector<Tensor>& flat_args);
  // The user's state tensors rebuilt from the part storage, and back.
  void state_from_parts();
  void state_to_parts(const char* when);

  Jit::Function fn_;
  std::vector<Tensor*> state_;             // the user's state tensors
  std::vector<Layout> state_layouts_;      // empty devices: not sharded
  std::vector<Tensor> state_parts_;        // the inner Jit's state (addresses never change)
  std::vector<Layout> in_layouts_;
  std::vector<uint8_t> in_sourced_;        // Note [Inputs split inside the step]: 1 where bound as the source
  // The outputs' layouts of each capture, by the signature of its parts and layouts.
  std::map<std::string, std::vector<Layout>> out_layouts_;
  std::string signature_;
  // Note [Signature of the last call]: each part's dtype, shape and device at the last call, and
  // the outputs' layouts of its signature (null until a call with it has returned).
  struct PartMeta {
    DType dtype;
    Shape shape;
    Device device;
  };
  std::vector<PartMeta> flat_metas_;
  const std::vector<Layout>* last_out_layouts_ = nullptr;
  std::unique_ptr<Jit> inner_;
};

}  // namespace ravel::detail
