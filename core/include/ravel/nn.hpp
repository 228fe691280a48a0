// Neural-network building blocks, without magic: a Module owns named parameters (leaf tensors
// that require grad) and has a forward function; optimizers update parameters in place with
// Tensor::assign under a NoGradGuard. Initialisation draws from the seeded Threefry generator.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ravel/amp.hpp"  // Autocast, GradScaler (mixed precision)
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
  // State that is not trained but belongs to the model (BatchNorm's running statistics), named
  // like parameters: saved and loaded with them (after them), never given to an optimizer.
  virtual std::vector<NamedParameter> named_buffers() { return {}; }
  // The modules inside this one that train()/eval() must reach (a container overrides it).
  virtual std::vector<Module*> children() { return {}; }
  std::vector<Tensor*> parameters();
  std::vector<Tensor*> buffers();
  void zero_grad();
  int64_t parameter_count();
  // torch.nn.Module.train()/eval(): training mode (the default) makes BatchNorm normalise by
  // the batch's statistics and update its running ones, and Dropout drop; eval mode uses the
  // running statistics and makes Dropout the identity. Sets this module and its children.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

 private:
  bool training_ = true;
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

// Batch normalisation over the channel axis 1 (Ioffe & Szegedy 2015), as torch.nn.BatchNorm1d
// (inputs [N, C] or [N, C, L]) and BatchNorm2d ([N, C, H, W]). In training mode it normalises by
// the batch's mean and biased variance and updates the running statistics as torch does:
//   running_mean = (1 - momentum) * running_mean + momentum * mean
//   running_var  = (1 - momentum) * running_var  + momentum * var * n / (n - 1)   (unbiased)
// with n the values per channel; in eval mode it normalises by the running statistics. weight
// (gamma) = 1 and bias (beta) = 0 at the start; without `affine` there are none. The running
// statistics are buffers (saved with the parameters). Note [Lazy running statistics] in
// core/src/nn/batchnorm.cpp: the update stays a lazy expression until realized; pass buffers()
// to Tensor::backward's `also` so it runs in the gradients' pass (or list them as Jit state).
class BatchNorm : public Module {
 public:
  Tensor operator()(const Tensor& x);
  std::vector<NamedParameter> named_parameters() override;
  std::vector<NamedParameter> named_buffers() override;
  Tensor weight, bias, running_mean, running_var;
  double eps, momentum;

 protected:
  BatchNorm(int64_t features, double eps, double momentum, bool affine, DType dtype, std::vector<int64_t> ranks,
            const char* name);

 private:
  std::vector<int64_t> ranks_;  // the input ranks accepted
  const char* name_;
};
class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t features, double epsilon = 1e-5, double momentum_factor = 0.1, bool affine = true,
                       DType dtype = DType::F32)
      : BatchNorm(features, epsilon, momentum_factor, affine, dtype, {2, 3}, "BatchNorm1d") {}
};
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t features, double epsilon = 1e-5, double momentum_factor = 0.1, bool affine = true,
                       DType dtype = DType::F32)
      : BatchNorm(features, epsilon, momentum_factor, affine, dtype, {4}, "BatchNorm2d") {}
};

// torch.nn.Dropout: in training mode each element is zeroed with probability p and the rest are
// scaled by 1 / (1 - p); in eval mode (and for p = 0) the identity. The mask is drawn from the
// Threefry generator (docs/random.md) keyed by (seed, call number): the same seed gives the same
// masks in the same order, every call a new one. Under a Jit capture the mask is data of the
// capture (docs/jit.md), so a replay reuses it: call it outside a Jit, or accept that.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5, uint64_t seed = 0);
  Tensor operator()(const Tensor& x);
  std::vector<NamedParameter> named_parameters() override { return {}; }
  double p;
  uint64_t seed;
  uint64_t calls = 0;  // masks drawn so far: the counter of the next mask's key
};

// torch.nn.Flatten: axes start..end (inclusive; negative counts from the end) made one.
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_axis = 1, int64_t end_axis = -1) : start(start_axis), end(end_axis) {}
  Tensor operator()(const Tensor& x) const { return x.flatten(start, end); }
  std::vector<NamedParameter> named_parameters() override { return {}; }
  int64_t start, end;
};

// torch.nn.Conv1d / Conv2d: weight [out, in / groups, k...] and an optional bias [out], around
// ravel::nn::conv1d / conv2d (ravel/conv.hpp; `options`: stride, padding, dilation, groups, same).
// Initialised as torch: kaiming_uniform(a = sqrt(5)) for the weight, i.e. U(+-1/sqrt(fan_in)),
// and U(+-1/sqrt(fan_in)) for the bias, fan_in = in / groups * prod(kernel). `kernel`: one size
// for every spatial axis or one per axis.
class ConvNd : public Module {
 public:
  std::vector<NamedParameter> named_parameters() override;
  Tensor weight, bias;
  ConvOptions options;

 protected:
  ConvNd(int64_t in, int64_t out, const std::vector<int64_t>& kernel, uint64_t seed, ConvOptions options,
         bool bias, DType dtype, size_t spatial, const char* name);
  std::optional<Tensor> optional_bias() const;
};
class Conv1d : public ConvNd {
 public:
  Conv1d(int64_t in, int64_t out, std::vector<int64_t> kernel, uint64_t seed, ConvOptions conv_options = {},
         bool with_bias = true, DType dtype = DType::F32)
      : ConvNd(in, out, kernel, seed, std::move(conv_options), with_bias, dtype, 1, "Conv1d") {}
  Tensor operator()(const Tensor& x) const;  // [N, in, L] -> [N, out, L']
};
class Conv2d : public ConvNd {
 public:
  Conv2d(int64_t in, int64_t out, std::vector<int64_t> kernel, uint64_t seed, ConvOptions conv_options = {},
         bool with_bias = true, DType dtype = DType::F32)
      : ConvNd(in, out, kernel, seed, std::move(conv_options), with_bias, dtype, 2, "Conv2d") {}
  Tensor operator()(const Tensor& x) const;  // [N, in, H, W] -> [N, out, H', W']
};

// torch.nn.MaxPool2d / AvgPool2d around max_pool2d / avg_pool2d (ravel/conv.hpp's PoolOptions:
// kernel, stride (default: the kernel), padding, dilation, ceil_mode, count_include_pad, ...).
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(PoolOptions pool_options) : options(std::move(pool_options)) {}
  explicit MaxPool2d(int64_t kernel) { options.kernel = {kernel}; }
  Tensor operator()(const Tensor& x) const;
  std::vector<NamedParameter> named_parameters() override { return {}; }
  PoolOptions options;
};
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(PoolOptions pool_options) : options(std::move(pool_options)) {}
  explicit AvgPool2d(int64_t kernel) { options.kernel = {kernel}; }
  Tensor operator()(const Tensor& x) const;
  std::vector<NamedParameter> named_parameters() override { return {}; }
  PoolOptions options;
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
  void step(const std::vector<Tensor>& also = {}) { update(also, {}); }
  void zero_grad();
  double lr = 0;

 protected:
  // How GradScaler::step reaches an update (Note [Device-side loss scaling] in grad_scaler.cpp):
  // the gradients multiplied by `inv_scale` (0-dim f32), and where `skip` (0-dim bool) is true,
  // every value the update writes keeps its old one. Both undefined for a plain step().
  struct Scaling {
    Tensor inv_scale, skip;
  };
  virtual void update(const std::vector<Tensor>& also, const Scaling& scaling) = 0;
  // Every parameter's stored gradient (undefined where it has none), times scaling.inv_scale.
  std::vector<Tensor> gradients(const Scaling& scaling) const;
  // Realizes every new value with `also` in one pass and assigns it (under scaling.skip, the old
  // value where it is true; an undefined old value counts as zeros).
  struct Update {
    Tensor* target;
    Tensor value;
  };
  static void commit(std::vector<Update>& updates, const std::vector<Tensor>& also, const Scaling& scaling);
  std::vector<Tensor*> params_;
  friend class GradScaler;
};

// p -= lr * (momentum buffer v = momentum * v + grad), as torch.optim.SGD.
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor*> params, double lr, double momentum = 0.0);
  double momentum;

 private:
  void update(const std::vector<Tensor>& also, const Scaling& scaling) override;
  std::vector<Tensor> velocity_;
};

// Adam (Kingma & Ba 2015) with bias correction, as torch.optim.Adam.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor*> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8);
  double beta1, beta2, eps;

 private:
  void update(const std::vector<Tensor>& also, const Scaling& scaling) override;
  std::vector<Tensor> m_, v_;
  int64_t t_ = 0;
  Tensor steps_;  // the step count on the device, from the first GradScaler step on (optim.cpp)
};

// Parameters to and from a file (docs/nn.md): a path ending in ".npz" is written as a NumPy
// archive, one array per parameter keyed by its name (np.load opens it); any other path in
// Ravel's own format. load() recognises either by its contents, and checks every name, dtype
// and shape (ValueError naming the first mismatch) before assigning anything.
void save_parameters(Module& module, const std::string& path);
void load_parameters(Module& module, const std::string& path);

}  // namespace ravel::nn
