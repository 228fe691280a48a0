// makemore's training step when mpirun started several ranks (docs/distributed.md): each rank
// computes the gradients of its share of the global batch, the ranks sum them (and the loss)
// with one bucketed all-reduce, and every rank applies the same SGD update.
#pragma once

#include <functional>
#include <vector>

#include "ravel/distributed.hpp"
#include "ravel/jit.hpp"

namespace makemore {

class DataParallelStep {
 public:
  using Loss = std::function<ravel::Tensor(const ravel::Tensor& contexts, const ravel::Tensor& targets)>;
  // `share`: this rank's rows / the global batch, so that the sum of the ranks' scaled
  // gradients is the global batch's mean gradient (what one process computes). Broadcasts the
  // parameters from rank 0 (DataParallel). With `jit`, both halves of the step are captured
  // once and replayed (the all-reduce between them runs eagerly: it is not a graph node).
  DataParallelStep(std::vector<ravel::Tensor*> params, Loss loss, double share, bool jit);
  // One step on this rank's rows; returns the global batch's mean loss.
  double operator()(const ravel::Tensor& contexts, const ravel::Tensor& targets, double lr);
  int64_t replays() const { return gradients_.replays() + update_.replays(); }
  int64_t captures() const { return gradients_.captures() + update_.captures(); }

 private:
  std::vector<ravel::Tensor> gradients(const std::vector<ravel::Tensor>& batch);
  std::vector<ravel::Tensor> update(const std::vector<ravel::Tensor>& grads);
  std::vector<ravel::Tensor*> params_;
  Loss loss_;
  double share_, lr_ = 0;
  bool jit_;
  ravel::distributed::DataParallel ddp_;
  ravel::Jit gradients_, update_;
};

}  // namespace makemore
