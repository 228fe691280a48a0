// Neural-network building blocks, without magic: a Module owns named parameters (leaf tensors
// that require grad) and has a forward function; optimizers update parameters in place with
// Tensor::assign under a NoGradGuard. Initialisation draws from the seeded Threefry generator.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ravel/autodiff.hpp"
#include "ravel/conv.hpp"  // conv2d, max_pool2d, ... (functional)
#include "ravel/tensor.hpp"

namespace ravel::nn {

// A named parameter: a pointer into the module that owns the tensor (so assign() updates it).
using NamedParameter = std::pair<std::string, Tensor*>;

class Module {
 public:
  virtual ~Module() = default;
  // Every parameter, named "layer.weight" etc.; stable order (saving and optimizers rely on it).
  virtual std::vector<NamedParameter> named_parameters() = 0;
  std::vector<Tensor*> parameters();
  void zero_grad();
  int64_t parameter_count();
};

// y = x @ weight + bias; weight [in, out] and bias [out] ~ U(-1/sqrt(in), 1/sqrt(in)), as
// torch.nn.Linear initialises them.
class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, uint64_t seed, bool bias = true, DType dtype = DType::F32);
  Tensor operator()(const Tensor& x) const;
  std::vector<NamedParameter> named_parameters() override;
  Tensor weight, bias;
};

// Rows of a [num, dim] table ~ N(0, 1) looked up by integer indices: [...] -> [..., dim].
class Embedding : public Module {
 public:
  Embedding(int64_t num, int64_t dim, uint64_t seed, DType dtype = DType::F32);
  Tensor operator()(const Tensor& indices) const;
  std::vector<NamedParameter> named_parameters() override;
  Tensor weight;
};

// (x - mean) / sqrt(var + eps) * weight + bias over the last axis (weight = 1, bias = 0).
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5, DType dtype = DType::F32);
  Tensor operator()(const Tensor& x) const;
  std::vector<NamedParameter> named_parameters() override;
  Tensor weight, bias;
  double eps;
};

enum class Activation { ReLU, Tanh, Sigmoid, GELU };
Tensor activate(const Tensor& x, Activation a);
Tensor gelu(const Tensor& x);  // tanh approximation (as torch.nn.GELU(approximate="tanh"))
// torch.nn.functional's activations (derivatives at the kinks as torch: elu and leaky_relu take
// the negative side's at 0, hardsigmoid 0 at +-3, hardswish -0.5 at -3 and 1.5 at 3).
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);  // log(1 + e^(beta x)) / beta; x where beta x > threshold
Tensor silu(const Tensor& x);                                                    // x sigmoid(x)
Tensor elu(const Tensor& x, double alpha = 1.0);                                 // x > 0 ? x : alpha (e^x - 1)
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);                // x > 0 ? x : slope x
Tensor hardsigmoid(const Tensor& x);                                             // clamp(x / 6 + 1/2, 0, 1)
Tensor hardswish(const Tensor& x);                                               // x hardsigmoid(x)

// torch.nn.functional.interpolate over the spatial axes of [N, C, *spatial] (1 to 3 of them):
// Nearest and NearestExact ("nearest", "nearest-exact") on any rank; Linear, Bilinear and
// Trilinear need 1, 2 and 3 spatial axes. align_corners as torch (only for the linear modes;
// ValueError with a nearest mode). By output size, or by scale factors (one per spatial axis;
// the output size is floor(in * scale) and the coordinates use 1 / scale, as torch with
// recompute_scale_factor unset). Float inputs; the resampling is a contraction with a weight
// matrix per axis built on the host (docs/ops.md), so it is differentiable to any order.
enum class InterpolateMode { Nearest, NearestExact, Linear, Bilinear, Trilinear };
Tensor interpolate(const Tensor& x, const Shape& size, InterpolateMode mode = InterpolateMode::Nearest,
                   bool align_corners = false);
Tensor interpolate_scale(const Tensor& x, const std::vector<double>& scale_factor,
                         InterpolateMode mode = InterpolateMode::Nearest, bool align_corners = false);

// Linear layers of the given sizes with `activation` between them (none after the last).
class MLP : public Module {
 public:
  MLP(const std::vector<int64_t>& sizes, Activation activation, uint64_t seed, DType dtype = DType::F32);
  Tensor operator()(const Tensor& x) const;
  std::vector<NamedParameter> named_parameters() override;
  std::vector<Linear> layers;
  Activation activation;
};

// Mean cross-entropy of logits [N, C] against integer targets [N]; stable for huge logits
// (log-sum-exp with the max subtracted), like torch.nn.functional.cross_entropy.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets);
// torch.nn.functional.cross_entropy(logits, targets, reduction=..., ignore_index=...): targets
// equal to ignore_index contribute 0 (None) and are left out of the sum and of the mean's count
// (a mean over no counted target is NaN, 0/0, as in PyTorch).
enum class Reduction { None, Sum, Mean };
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, Reduction reduction, int64_t ignore_index = -100);
Tensor mse_loss(const Tensor& prediction, const Tensor& target);

class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor*> params) : params_(std::move(params)) {}
  virtual ~Optimizer() = default;
  // Updates every parameter from its grad() (parameters without one are skipped), realizing the
  // new values in one pass together with `also` (e.g. the loss: the forward pass the loss and
  // the gradients share then runs once, instead of again when the loss is read).
  void step(const std::vector<Tensor>& also = {}) { update(also); }
  void zero_grad();
  double lr = 0;

 protected:
  virtual void update(const std::vector<Tensor>& also) = 0;
  std::vector<Tensor*> params_;
};

// p -= lr * (momentum buffer v = momentum * v + grad), as torch.optim.SGD.
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor*> params, double lr, double momentum = 0.0);
  double momentum;

 private:
  void update(const std::vector<Tensor>& also) override;
  std::vector<Tensor> velocity_;
};

// Adam (Kingma & Ba 2015) with bias correction, as torch.optim.Adam.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor*> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8);
  double beta1, beta2, eps;

 private:
  void update(const std::vector<Tensor>& also) override;
  std::vector<Tensor> m_, v_;
  int64_t t_ = 0;
};

// Parameters to and from a file (docs/nn.md): a path ending in ".npz" is written as a NumPy
// archive, one array per parameter keyed by its name (np.load opens it); any other path in
// Ravel's own format. load() recognises either by its contents, and checks every name, dtype
// and shape (ValueError naming the first mismatch) before assigning anything.
void save_parameters(Module& module, const std::string& path);
void load_parameters(Module& module, const std::string& path);

}  // namespace ravel::nn
