// makemore's training step when mpirun started several ranks (docs/distributed.md): each rank
// computes the gradients of its share of the global batch, the ranks sum them (and the loss)
// with one bucketed all-reduce, and every rank applies the same SGD update.
#pragma once

#include <functional>
#include <vector>

#include "ravel/amp.hpp"
#include "ravel/distributed.hpp"
#include "ravel/jit.hpp"
#include "ravel/nn.hpp"

namespace makemore {

class DataParallelStep {
 public:
  using Loss = std::function<ravel::Tensor(const ravel::Tensor& contexts, const ravel::Tensor& targets)>;
  // `share`: this rank's rows / the global batch, so that the sum of the ranks' scaled
  // gradients is the global batch's mean gradient (what one process computes). Broadcasts the
  // parameters from rank 0 (DataParallel). With `jit`, the whole step (gradients, all-reduce,
  // update) is captured once and replayed. `bucket_bytes`: DataParallel's bucket size (0: its
  // default). `loss_scaling`: f16 training's dynamic loss scaling (nn::GradScaler's defaults),
  // Note [Loss scaling across ranks].
  DataParallelStep(std::vector<ravel::Tensor*> params, Loss loss, double share, bool jit, size_t bucket_bytes = 0,
                   bool loss_scaling = false);
  // One step on this rank's rows; returns the global batch's mean loss.
  double operator()(const ravel::Tensor& contexts, const ravel::Tensor& targets, double lr);
  int64_t replays() const { return step_.replays(); }
  int64_t captures() const { return step_.captures(); }
  double loss_scale() const { return scaler_.get_scale(); }  // 1 without loss scaling
  bool loss_scaling() const { return scaler_.is_enabled(); }

 private:
  std::vector<ravel::Tensor> step(const std::vector<ravel::Tensor>& batch);
  std::vector<ravel::Tensor> scaled_step(const std::vector<ravel::Tensor>& batch);
  static std::vector<ravel::Tensor*> jit_state(std::vector<ravel::Tensor*> params, ravel::nn::GradScaler& scaler);
  std::vector<ravel::Tensor*> params_;
  Loss loss_;
  double share_, lr_ = 0;
  bool jit_;
  ravel::distributed::DataParallel ddp_;
  ravel::nn::GradScaler scaler_;
  ravel::nn::SGD sgd_;  // the update under loss scaling (GradScaler steps an nn optimizer)
  ravel::Jit step_;
};

}  // namespace makemore
