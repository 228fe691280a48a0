// BatchNorm1d/2d, Dropout, Flatten and the train/eval switch, against naive references in double
// written here (statistics, the running-statistics formula of torch.nn.BatchNorm), counts with
// binomial bounds, and central finite differences for the gradients.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <random>

#include "ravel/ravel.hpp"

#include "test_support.hpp"

using ravel::Tensor;
namespace nn = ravel::nn;
namespace tt = boost::test_tools;

namespace {
// Per-channel mean and biased/unbiased variance of [N, C, S] data (S = the spatial size), in double.
struct ChannelStats {
  std::vector<double> mean, biased, unbiased;
};
ChannelStats channel_stats(const std::vector<double>& x, int64_t n, int64_t c, int64_t s) {
  ChannelStats st{std::vector<double>(c), std::vector<double>(c), std::vector<double>(c)};
  const double count = static_cast<double>(n * s);
  for (int64_t k = 0; k < c; ++k) {
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j) sum += x[(i * c + k) * s + j];
    st.mean[k] = sum / count;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j) sq += std::pow(x[(i * c + k) * s + j] - st.mean[k], 2);
    st.biased[k] = sq / count;
    st.unbiased[k] = sq / (count - 1);
  }
  return st;
}

// A container, to check that train()/eval() reach children.
struct TwoNorms : nn::Module {
  nn::BatchNorm2d bn{3};
  nn::Dropout drop{0.5, 1};
  std::vector<nn::NamedParameter> named_parameters() override { return bn.named_parameters(); }
  std::vector<nn::NamedParameter> named_buffers() override { return bn.named_buffers(); }
  std::vector<nn::Module*> children() override { return {&bn, &drop}; }
};
}  // namespace

BOOST_AUTO_TEST_CASE(batchnorm2d_training_normalises_by_batch_and_updates_running_statistics) {
  const int64_t n = 3, c = 2, h = 4, w = 5, s = h * w;
  nn::BatchNorm2d bn(c, 1e-5, 0.1);
  bn.weight.assign(Tensor::from_vector<float>({1.5f, -0.5f}, {c}));
  bn.bias.assign(Tensor::from_vector<float>({0.25f, 2.0f}, {c}));
  std::vector<double> run_mean(c, 0.0), run_var(c, 1.0);
  for (unsigned step = 0; step < 3; ++step) {  // three batches: the update chains as torch's does
    auto xv = seeded_values(n * c * s, 10 + step);
    Tensor x = Tensor::from_vector(xv, {n, c, h, w}).cast(ravel::DType::F32);
    auto y = bn(x).to_vector<double>();
    // The input as the module saw it (f32), for the reference.
    auto xf = x.to_vector<double>();
    ChannelStats st = channel_stats(xf, n, c, s);
    const double gamma[2] = {1.5, -0.5}, beta[2] = {0.25, 2.0};
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < c; ++k)
        for (int64_t j = 0; j < s; ++j) {
          const size_t at = static_cast<size_t>((i * c + k) * s + j);
          const double want = (xf[at] - st.mean[k]) / std::sqrt(st.biased[k] + 1e-5) * gamma[k] + beta[k];
          BOOST_TEST(y[at] == want, tt::tolerance(1e-4));
        }
    for (int64_t k = 0; k < c; ++k) {
      run_mean[k] = 0.9 * run_mean[k] + 0.1 * st.mean[k];
      run_var[k] = 0.9 * run_var[k] + 0.1 * st.unbiased[k];  // unbiased, as torch
    }
    auto rm = bn.running_mean.to_vector<double>(), rv = bn.running_var.to_vector<double>();
    for (int64_t k = 0; k < c; ++k) {
      BOOST_TEST(rm[k] == run_mean[k], tt::tolerance(1e-5));
      BOOST_TEST(rv[k] == run_var[k], tt::tolerance(1e-5));
    }
  }
  // Eval mode: the running statistics, and no update.
  bn.eval();
  auto xv = seeded_values(2 * c * s, 99);
  auto y = bn(Tensor::from_vector(xv, {2, c, h, w}).cast(ravel::DType::F32)).to_vector<double>();
  const double gamma[2] = {1.5, -0.5}, beta[2] = {0.25, 2.0};
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t j = 0; j < s; ++j) {
        const size_t at = static_cast<size_t>((i * c + k) * s + j);
        const double want = (static_cast<float>(xv[at]) - run_mean[k]) / std::sqrt(run_var[k] + 1e-5) * gamma[k] + beta[k];
        BOOST_TEST(y[at] == want, tt::tolerance(1e-4));
      }
  auto rm = bn.running_mean.to_vector<double>();
  for (int64_t k = 0; k < c; ++k) BOOST_TEST(rm[k] == run_mean[k], tt::tolerance(1e-5));
}

BOOST_AUTO_TEST_CASE(batchnorm1d_accepts_nc_and_ncl_and_refuses_the_rest) {
  nn::BatchNorm1d bn(4, 1e-3, 0.5, /*affine=*/false);
  BOOST_TEST(bn.named_parameters().empty());
  BOOST_TEST(bn.named_buffers().size() == 2u);
  // [N, C]: statistics over the batch only.
  auto xv = seeded_values(5 * 4, 3);
  auto y = bn(Tensor::from_vector(xv, {5, 4})).to_vector<double>();
  ChannelStats st = channel_stats(xv, 5, 4, 1);
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t k = 0; k < 4; ++k)
      BOOST_TEST(y[i * 4 + k] == (xv[i * 4 + k] - st.mean[k]) / std::sqrt(st.biased[k] + 1e-3), tt::tolerance(1e-9));
  auto rv = bn.running_var.to_vector<double>();
  // The module is f32 (its running statistics too); the input and so the normalisation f64.
  for (int64_t k = 0; k < 4; ++k) BOOST_TEST(rv[k] == 0.5 + 0.5 * st.unbiased[k], tt::tolerance(1e-6));
  // [N, C, L]: over the batch and the length.
  nn::BatchNorm1d bl(4, 1e-5, 0.1, true, ravel::DType::F64);
  auto zv = seeded_values(2 * 4 * 3, 4);
  auto z = bl(Tensor::from_vector(zv, {2, 4, 3})).to_vector<double>();
  ChannelStats sz = channel_stats(zv, 2, 4, 3);
  for (size_t at = 0; at < zv.size(); ++at) {
    const int64_t k = static_cast<int64_t>(at / 3) % 4;
    BOOST_TEST(z[at] == (zv[at] - sz.mean[k]) / std::sqrt(sz.biased[k] + 1e-5), tt::tolerance(1e-9));
  }
  BOOST_CHECK_THROW(bl(Tensor::ones({2, 5}, ravel::DType::F64)), ravel::ShapeError);     // wrong channels
  BOOST_CHECK_THROW(bl(Tensor::ones({2, 4, 3, 3}, ravel::DType::F64)), ravel::ShapeError);  // 2d input
  BOOST_CHECK_THROW(nn::BatchNorm2d(4)(Tensor::ones({2, 4})), ravel::ShapeError);
  // One value per channel cannot be normalised in training mode (torch raises too); eval can.
  BOOST_CHECK_THROW(bl(Tensor::ones({1, 4}, ravel::DType::F64)), ravel::ValueError);
  bl.eval();
  BOOST_TEST(bl(Tensor::ones({1, 4}, ravel::DType::F64)).numel() == 4);
  BOOST_CHECK_THROW(nn::BatchNorm2d(0), ravel::ValueError);
  BOOST_CHECK_THROW(nn::BatchNorm2d(3, 1e-5, 1.5), ravel::ValueError);
}

BOOST_AUTO_TEST_CASE(batchnorm_gradient_matches_finite_differences) {
  // Training mode, f64: d/dx and d/dweight of sum(bn(x) * r) through the batch statistics.
  nn::BatchNorm2d bn(2, 1e-5, 0.1, true, ravel::DType::F64);
  bn.weight.assign(Tensor::from_vector<double>({0.7, -1.3}, {2}));
  bn.bias.assign(Tensor::from_vector<double>({0.1, 0.2}, {2}));
  const ravel::Shape shape{3, 2, 2, 3};
  auto xv = seeded_values(36, 5), rv = seeded_values(36, 6);
  Tensor r = Tensor::from_vector(rv, shape);
  auto loss = [&](const std::vector<double>& x, const std::vector<double>& gamma) {
    bn.weight.assign(Tensor::from_vector(gamma, {2}));
    return (bn(Tensor::from_vector(x, shape)) * r).sum().item<double>();
  };
  Tensor x = Tensor::from_vector(xv, shape);
  x.requires_grad_();
  bn.weight.zero_grad();
  (bn(x) * r).sum().backward();
  auto gx = x.grad().to_vector<double>(), gw = bn.weight.grad().to_vector<double>();
  const std::vector<double> gamma{0.7, -1.3};
  const double h = 1e-6;
  for (size_t i = 0; i < xv.size(); ++i) {
    auto up = xv, down = xv;
    up[i] += h, down[i] -= h;
    BOOST_TEST(gx[i] == (loss(up, gamma) - loss(down, gamma)) / (2 * h), tt::tolerance(1e-6));
  }
  for (size_t k = 0; k < 2; ++k) {
    auto up = gamma, down = gamma;
    up[k] += h, down[k] -= h;
    BOOST_TEST(gw[k] == (loss(xv, up) - loss(xv, down)) / (2 * h), tt::tolerance(1e-6));
  }
}

// Note [BatchNorm's own gradient]: the closed-form rule against central differences for every
// input (x, weight and bias) of BatchNorm1d on [N, C] and [N, C, L], and without affine
// parameters; then the second order (d/dx of <dL/dx, v>) against differences of the first.
BOOST_AUTO_TEST_CASE(batchnorm_closed_form_gradient_matches_finite_differences) {
  const double h = 1e-6;
  for (const ravel::Shape& shape : {ravel::Shape{5, 3}, ravel::Shape{4, 3, 2}}) {
    for (bool affine : {true, false}) {
      BOOST_TEST_CONTEXT("shape rank " << shape.size() << (affine ? " affine" : " plain")) {
        nn::BatchNorm1d bn(3, 1e-5, 0.1, affine, ravel::DType::F64);
        const size_t n = static_cast<size_t>(shape[0] * 3 * (shape.size() > 2 ? shape[2] : 1));
        auto xv = seeded_values(n, 11), rv = seeded_values(n, 12);
        std::vector<double> gamma{0.7, -1.3, 2.0}, beta{0.1, 0.2, -0.4};
        Tensor r = Tensor::from_vector(rv, shape);
        auto loss = [&](const std::vector<double>& x, const std::vector<double>& g, const std::vector<double>& b) {
          if (affine) bn.weight.assign(Tensor::from_vector(g, {3})), bn.bias.assign(Tensor::from_vector(b, {3}));
          return (bn(Tensor::from_vector(x, shape)).tanh() * r).sum().item<double>();
        };
        if (affine) bn.weight.assign(Tensor::from_vector(gamma, {3})), bn.bias.assign(Tensor::from_vector(beta, {3}));
        Tensor x = Tensor::from_vector(xv, shape);
        std::vector<Tensor> wrt{x};
        if (affine) wrt.push_back(bn.weight), wrt.push_back(bn.bias);
        auto g = ravel::gradients((bn(x).tanh() * r).sum(), wrt);
        auto gx = g[0].to_vector<double>();
        for (size_t i = 0; i < n; ++i) {
          auto up = xv, down = xv;
          up[i] += h, down[i] -= h;
          BOOST_TEST(gx[i] == (loss(up, gamma, beta) - loss(down, gamma, beta)) / (2 * h), tt::tolerance(1e-6));
        }
        if (affine) {
          auto gw = g[1].to_vector<double>(), gb = g[2].to_vector<double>();
          for (size_t k = 0; k < 3; ++k) {
            auto up = gamma, down = gamma;
            up[k] += h, down[k] -= h;
            BOOST_TEST(gw[k] == (loss(xv, up, beta) - loss(xv, down, beta)) / (2 * h), tt::tolerance(1e-6));
            up = beta, down = beta;
            up[k] += h, down[k] -= h;
            BOOST_TEST(gb[k] == (loss(xv, gamma, up) - loss(xv, gamma, down)) / (2 * h), tt::tolerance(1e-6));
          }
          bn.weight.assign(Tensor::from_vector(gamma, {3})), bn.bias.assign(Tensor::from_vector(beta, {3}));
        }
        // Second order: s(x) = <dL/dx, v>, its gradient against differences of s.
        Tensor v = Tensor::from_vector(seeded_values(n, 13), shape);
        auto s_of = [&](const Tensor& xx) {
          return (ravel::gradients((bn(xx).tanh() * r).sum(), {xx})[0] * v).sum();
        };
        auto g2 = ravel::gradients(s_of(x), {x})[0].to_vector<double>();
        for (size_t i = 0; i < n; i += 3) {
          auto up = xv, down = xv;
          up[i] += h, down[i] -= h;
          const double fd = (s_of(Tensor::from_vector(up, shape)).item<double>() -
                             s_of(Tensor::from_vector(down, shape)).item<double>()) / (2 * h);
          BOOST_TEST(g2[i] == fd, tt::tolerance(1e-5));
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(train_and_eval_reach_children_and_buffers_are_saved) {
  TwoNorms m;
  BOOST_TEST(m.is_training());
  m.eval();
  BOOST_TEST(!m.bn.is_training());
  BOOST_TEST(!m.drop.is_training());
  m.train();
  BOOST_TEST(m.drop.is_training());
  // A training step moves the running statistics away from (0, 1); a file keeps them.
  m.bn(Tensor::from_vector(seeded_values(2 * 3 * 9, 7), {2, 3, 3, 3}).cast(ravel::DType::F32));
  for (const char* name : {"ravel_bn.bin", "ravel_bn.npz"}) {
    const auto path = (scratch_dir() / name).string();
    nn::save_parameters(m, path);
    TwoNorms fresh;
    nn::load_parameters(fresh, path);
    BOOST_TEST(fresh.bn.running_mean.to_vector<float>() == m.bn.running_mean.to_vector<float>());
    BOOST_TEST(fresh.bn.running_var.to_vector<float>() == m.bn.running_var.to_vector<float>());
    BOOST_TEST(fresh.bn.running_mean.to_vector<float>() != std::vector<float>(3, 0.0f));
    BOOST_TEST(fresh.bn.weight.requires_grad());
  }
  BOOST_TEST(m.buffers().size() == 2u);
  BOOST_TEST(m.parameters().size() == 2u);  // buffers are not parameters (optimizers skip them)
}

BOOST_AUTO_TEST_CASE(dropout_keeps_one_minus_p_scaled_and_is_seeded) {
  const int64_t n = 200000;
  const double p = 0.3;
  nn::Dropout d(p, 42);
  Tensor x = Tensor::full({n}, 2.0);
  auto y = d(x).to_vector<float>();
  int64_t kept = 0;
  for (float v : y) {
    BOOST_TEST((v == 0.0f || std::fabs(v - 2.0 / (1 - p)) < 1e-5));
    kept += v != 0.0f;
  }
  // Binomial(n, 0.7): mean 140000, sd ~205; 5 sd either side.
  const double sd = std::sqrt(n * p * (1 - p));
  BOOST_TEST(std::fabs(static_cast<double>(kept) - n * (1 - p)) < 5 * sd);
  // Deterministic by seed and call number; every call a new mask.
  nn::Dropout same(p, 42), other(p, 43);
  auto first = same(x).to_vector<float>();
  BOOST_TEST(first == y);
  BOOST_TEST(same(x).to_vector<float>() != first);
  BOOST_TEST(other(x).to_vector<float>() != first);
  // The gradient is the mask, scaled.
  nn::Dropout g(0.5, 9);
  Tensor xs = Tensor::full({1000}, 1.0);
  xs.requires_grad_();
  Tensor out = g(xs);
  out.sum().backward();
  BOOST_TEST(xs.grad().to_vector<float>() == out.to_vector<float>());
  // Eval mode and p = 0 are the identity; p = 1 drops everything; p outside [0, 1] is refused.
  d.eval();
  BOOST_TEST(d(x).to_vector<float>() == x.to_vector<float>());
  BOOST_TEST(nn::Dropout(0.0, 1)(x).to_vector<float>() == x.to_vector<float>());
  BOOST_TEST(nn::Dropout(1.0, 1)(x).to_vector<float>() == std::vector<float>(n, 0.0f));
  BOOST_CHECK_THROW(nn::Dropout(1.5), ravel::ValueError);
  BOOST_CHECK_THROW(nn::Dropout(-0.1), ravel::ValueError);
  BOOST_CHECK_THROW(nn::Dropout(0.5)(Tensor::ones({3}, ravel::DType::I32)), ravel::DTypeError);
}

BOOST_AUTO_TEST_CASE(flatten_joins_axes_as_torch) {
  Tensor x = Tensor::arange(0, 120).reshape({2, 3, 4, 5});
  BOOST_TEST(ravel::shape_str(nn::Flatten()(x).shape()) == "[2, 60]");
  BOOST_TEST(ravel::shape_str(nn::Flatten(0, 1)(x).shape()) == "[6, 4, 5]");
  BOOST_TEST(ravel::shape_str(nn::Flatten(2, -1)(x).shape()) == "[2, 3, 20]");
  BOOST_TEST(nn::Flatten()(x).to_vector<float>() == x.to_vector<float>());  // row-major order kept
}

BOOST_AUTO_TEST_CASE(running_statistics_realize_in_the_gradients_pass) {
  // Note [Lazy running statistics]: passed to backward's `also`, the update runs in the pass that
  // computes the gradients, and reading it afterwards launches nothing.
  nn::BatchNorm2d bn(3);
  Tensor x = Tensor::from_vector(seeded_values(4 * 3 * 2 * 2, 8), {4, 3, 2, 2}).cast(ravel::DType::F32);
  x.realize();
  Tensor loss = bn(x).square().sum();
  BOOST_TEST(!bn.running_mean.is_realized());
  loss.backward({}, {bn.running_mean, bn.running_var});
  BOOST_TEST(bn.running_mean.is_realized());
  BOOST_TEST(bn.running_var.is_realized());
  const int64_t kernels = ravel::cumulative_stats().kernels();
  auto rm = bn.running_mean.to_vector<float>();  // in its own dtype: a read, no cast kernel
  BOOST_TEST(ravel::cumulative_stats().kernels() == kernels);
  ChannelStats st = channel_stats(x.to_vector<double>(), 4, 3, 4);
  for (int64_t k = 0; k < 3; ++k) BOOST_TEST(rm[k] == 0.1 * st.mean[k], tt::tolerance(1e-5));
  // Not realized by anyone: the next training call realizes it before chaining another update.
  bn(x);
  bn(x);
  BOOST_TEST(bn.running_mean.to_vector<double>()[0] == (0.1 * 0.9 * 0.9 + 0.1 * 0.9 + 0.1) * st.mean[0], tt::tolerance(1e-5));
}
