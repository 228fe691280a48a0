// The CNN operators (ravel/conv.hpp, interpolate, scatters, sorting, BatchNorm, activations)
// against PyTorch's own numbers (torch_values.hpp, written by torch_values.py from Debian's
// PyTorch 1.13 in float64 on the CPU): the cases where a test's reference loop could share a
// misreading of PyTorch with the code it checks. Pooling with ceil_mode, count_include_pad and
// dilation, max pooling's routing of ties, NaN and -inf; adaptive pooling; interpolate with
// align_corners both ways and scale factors; transposed, 'same' and 3-D convolutions;
// scatter_reduce's gradients where values tie; sort and topk with NaN and ties; BatchNorm2d's
// training step and running statistics; the activations at their kinks. Each case compares the
// value and the gradients of <result, cot> (cot = 1 + 0.25 i) with respect to every input. Where
// Ravel differs from PyTorch on purpose, the case says why.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <functional>
#include <map>
#include <sstream>

#include "ravel/nn.hpp"
#include "ravel/ravel.hpp"
#include "test_support.hpp"
#include "torch_values.hpp"

using ravel::DType;
using ravel::Shape;
using ravel::Tensor;
namespace nn = ravel::nn;

namespace {

const torch_values::Row& row(const std::string& name) {
  for (const auto& r : torch_values::rows())
    if (r.name == name) return r;
  throw std::runtime_error("torch_values.hpp has no row " + name);
}

Tensor input(const std::string& name) {
  const auto& r = row(name);
  return Tensor::from_vector<double>(r.values, Shape(r.shape.begin(), r.shape.end()));
}

Tensor index_input(const std::string& name) { return input(name).cast(DType::I64); }

// Equal within a relative 1e-12 (f64 sums in another order), NaN where PyTorch has NaN,
// infinities exactly. `instead` replaces PyTorch's value at some positions, where Ravel
// deliberately differs (each use says why).
void check(const std::string& name, const Tensor& got, double tol = 1e-12, const std::map<size_t, double>& instead = {}) {
  const auto& want = row(name);
  BOOST_TEST_CONTEXT(name) {
    BOOST_TEST(ravel::shape_str(got.shape()) == ravel::shape_str(Shape(want.shape.begin(), want.shape.end())));
    std::vector<double> g = got.cast(DType::F64).to_vector<double>();
    BOOST_REQUIRE_EQUAL(g.size(), want.values.size());
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      const double w = instead.count(i) ? instead.at(i) : want.values[i];
      const bool ok = std::isnan(w) ? std::isnan(g[i]) : std::isinf(w) ? g[i] == w : std::fabs(g[i] - w) <= tol * (1 + std::fabs(w));
      if (!ok && bad++ == 0) first = i;
    }
    BOOST_TEST(bad == 0u, bad << " of " << g.size() << " differ; first at " << first << ": " << g[first] << " vs PyTorch "
                                << want.values[first]);
  }
}

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// The value of f at the named inputs (rows "<case>.y") and the gradients of <f, cot> with respect
// to each input ("<case>.g0", ".g1", ...), as torch_values.py's with_grad records them.
void check_with_grad(const std::string& name, const Fn& f, const std::vector<std::string>& inputs) {
  guarded(name, [&] {
    std::vector<Tensor> xs;
    for (const auto& n : inputs) xs.push_back(input(n));
    Tensor y = f(xs);
    check(name + ".y", y);
    Tensor cot = (Tensor::arange(0, double(y.numel()), 1, DType::F64) * 0.25 + 1.0).reshape(y.shape());
    std::vector<Tensor> g = ravel::gradients(y, xs, cot);
    for (size_t k = 0; k < xs.size(); ++k) check(name + ".g" + std::to_string(k), g[k]);
  });
}

nn::PoolOptions pool(std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p, bool ceil = false,
                     bool cip = true, std::vector<int64_t> d = {1}) {
  nn::PoolOptions o;
  o.kernel = k, o.stride = s, o.padding = p, o.dilation = d, o.ceil_mode = ceil, o.count_include_pad = cip;
  return o;
}

}  // namespace

BOOST_AUTO_TEST_CASE(pooling_like_torch) {
  auto one = [](std::function<Tensor(const Tensor&)> f) { return Fn([f](const std::vector<Tensor>& v) { return f(v[0]); }); };
  check_with_grad("max_pool2d_k3s2p1_ceil", one([](const Tensor& x) { return nn::max_pool2d(x, pool({3}, {2}, {1}, true)); }),
                  {"pool2d.x"});
  check_with_grad("max_pool2d_k2s2p1d2",
                  one([](const Tensor& x) { return nn::max_pool2d(x, pool({2}, {2}, {1}, false, true, {2})); }), {"pool2d.x"});
  check_with_grad("max_pool2d_k3s1p1", one([](const Tensor& x) { return nn::max_pool2d(x, pool({3}, {1}, {1})); }), {"pool2d.x"});
  for (bool cip : {true, false}) {
    check_with_grad("avg_pool2d_k3s2p1_ceil_cip" + std::to_string(int(cip)),
                    one([cip](const Tensor& x) { return nn::avg_pool2d(x, pool({3}, {2}, {1}, true, cip)); }), {"avg2d.x"});
    check_with_grad("avg_pool1d_k4s3p2_ceil_cip" + std::to_string(int(cip)),
                    one([cip](const Tensor& x) { return nn::avg_pool1d(x, pool({4}, {3}, {2}, true, cip)); }), {"avg1d.x"});
  }
  check_with_grad("max_pool1d_k4s3p2_ceil", one([](const Tensor& x) { return nn::max_pool1d(x, pool({4}, {3}, {2}, true)); }),
                  {"pool1d.x"});
  check_with_grad("max_pool3d_k2s2p1_ceil", one([](const Tensor& x) { return nn::max_pool3d(x, pool({2}, {2}, {1}, true)); }),
                  {"pool3d.x"});
  check_with_grad("avg_pool3d_k3s2p1_cip0", one([](const Tensor& x) { return nn::avg_pool3d(x, pool({3}, {2}, {1}, false, false)); }),
                  {"pool3d.x"});
  check_with_grad("adaptive_avg_pool2d_3x2", one([](const Tensor& x) { return nn::adaptive_avg_pool2d(x, {3, 2}); }), {"adaptive.x"});
  check_with_grad("adaptive_max_pool2d_3x2", one([](const Tensor& x) { return nn::adaptive_max_pool2d(x, {3, 2}); }), {"adaptive.x"});
  check_with_grad("adaptive_max_pool2d_4x4", one([](const Tensor& x) { return nn::adaptive_max_pool2d(x, {4, 4}); }), {"adaptive.x"});
  // 3-D: not divisible (the membership matrix), global, and divisible (an ordinary pooling).
  check_with_grad("adaptive_avg_pool3d_3x2x4", one([](const Tensor& x) { return nn::adaptive_avg_pool3d(x, {3, 2, 4}); }),
                  {"adaptive3d.x"});
  check_with_grad("adaptive_max_pool3d_3x2x4", one([](const Tensor& x) { return nn::adaptive_max_pool3d(x, {3, 2, 4}); }),
                  {"adaptive3d.x"});
  check_with_grad("adaptive_avg_pool3d_1", one([](const Tensor& x) { return nn::adaptive_avg_pool3d(x, {1}); }), {"adaptive3d.x"});
  check_with_grad("adaptive_max_pool3d_5x2x3", one([](const Tensor& x) { return nn::adaptive_max_pool3d(x, {5, 2, 3}); }),
                  {"adaptive3d.x"});
}

BOOST_AUTO_TEST_CASE(interpolate_like_torch) {
  using Mode = nn::InterpolateMode;
  auto one = [](std::function<Tensor(const Tensor&)> f) { return Fn([f](const std::vector<Tensor>& v) { return f(v[0]); }); };
  for (bool ac : {false, true}) {
    const std::string a = std::to_string(int(ac));
    check_with_grad("bilinear_5x7_ac" + a, one([ac](const Tensor& x) { return nn::interpolate(x, {5, 7}, Mode::Bilinear, ac); }),
                    {"interp.x"});
    check_with_grad("bilinear_2x3_ac" + a, one([ac](const Tensor& x) { return nn::interpolate(x, {2, 3}, Mode::Bilinear, ac); }),
                    {"interp.x"});
  }
  check_with_grad("bilinear_scale_1.7x2.3",
                  one([](const Tensor& x) { return nn::interpolate_scale(x, {1.7, 2.3}, Mode::Bilinear); }), {"interp.x"});
  check_with_grad("nearest_5x7", one([](const Tensor& x) { return nn::interpolate(x, {5, 7}); }), {"interp.x"});
  check_with_grad("nearest_exact_5x3", one([](const Tensor& x) { return nn::interpolate(x, {5, 3}, Mode::NearestExact); }),
                  {"interp.x"});
  check_with_grad("linear_scale_1.3", one([](const Tensor& x) { return nn::interpolate_scale(x, {1.3}, Mode::Linear); }),
                  {"interp1d.x"});
  check_with_grad("linear_9_ac1", one([](const Tensor& x) { return nn::interpolate(x, {9}, Mode::Linear, true); }), {"interp1d.x"});
  check_with_grad("trilinear_3x4x5_ac0", one([](const Tensor& x) { return nn::interpolate(x, {3, 4, 5}, Mode::Trilinear); }),
                  {"interp3d.x"});
}

BOOST_AUTO_TEST_CASE(convolutions_like_torch) {
  check_with_grad("conv_transpose2d_g2", [](const std::vector<Tensor>& v) {
    nn::ConvOptions o;
    o.stride = {2, 1}, o.padding = {1, 0}, o.output_padding = {1, 0}, o.groups = 2, o.dilation = {1, 2};
    return nn::conv_transpose2d(v[0], v[1], v[2], o);
  }, {"convT.x", "convT.w", "convT.b"});
  check_with_grad("conv2d_same_g2_d21", [](const std::vector<Tensor>& v) {
    nn::ConvOptions o;
    o.same = true, o.dilation = {2, 1}, o.groups = 2;
    return nn::conv2d(v[0], v[1], v[2], o);
  }, {"same.x", "same.w", "same.b"});
  check_with_grad("conv3d_s2p1", [](const std::vector<Tensor>& v) {
    nn::ConvOptions o;
    o.stride = {2}, o.padding = {1};
    return nn::conv3d(v[0], v[1], std::nullopt, o);
  }, {"conv3d.x", "conv3d.w"});
  check_with_grad("conv_transpose3d_s2_op1", [](const std::vector<Tensor>& v) {
    nn::ConvOptions o;
    o.stride = {2}, o.padding = {1}, o.output_padding = {1};
    return nn::conv_transpose3d(v[0], v[1], std::nullopt, o);
  }, {"convT3d.x", "convT3d.w"});
}

// Values tie on purpose: amax/amin share the gradient equally among the tied sources and self
// (PyTorch's rule), prod's gradient at a zero.
BOOST_AUTO_TEST_CASE(scatter_reduce_like_torch) {
  const Tensor index = index_input("scatter.index");
  for (const std::string red : {"sum", "prod", "mean", "amax", "amin"})
    for (bool inc : {true, false}) {
      if ((red == "amax" || red == "amin") && !inc) continue;  // below
      check_with_grad("scatter_reduce_" + red + "_self" + std::to_string(int(inc)),
                      [&](const std::vector<Tensor>& v) { return v[0].scatter_reduce(0, index, v[1], red, inc); },
                      {"scatter.self", "scatter.src"});
    }
}

// amax/amin without include_self, where the excluded self value equals the result: PyTorch 1.13
// still counts self among the ties (scatter_reduce_backward's N_to_distribute is
// `(self == result).scatter_add(dim, index, src == value)` before include_self is applied) and then
// zeroes self's share, so the sources' shares add up to less than the cotangent (two tied sources
// get 1/3 each). Ravel shares it among the elements that took part, the sources only (docs/ops.md,
// "Gradients"). The value and self's gradient are PyTorch's; the sources' gradient is PyTorch's
// wherever self does not tie, and cot / (tied sources) where it does.
BOOST_AUTO_TEST_CASE(scatter_reduce_amax_amin_without_self) {
  const Tensor index = index_input("scatter.index");
  const std::vector<double> self = row("scatter.self").values, src = row("scatter.src").values;
  const std::vector<int64_t> idx = index.to_vector<int64_t>();
  const int64_t cols = row("scatter.self").shape[1];
  for (const std::string red : {"amax", "amin"})
    guarded(red, [&] {
      const std::string name = "scatter_reduce_" + red + "_self0";
      Tensor s = input("scatter.self"), c = input("scatter.src");
      Tensor y = s.scatter_reduce(0, index, c, red, false);
      check(name + ".y", y);
      Tensor cot = (Tensor::arange(0, double(y.numel()), 1, DType::F64) * 0.25 + 1.0).reshape(y.shape());
      std::vector<Tensor> g = ravel::gradients(y, {s, c}, cot);
      check(name + ".g0", g[0]);
      const std::vector<double> yv = y.to_vector<double>(), cv = cot.to_vector<double>();
      auto target = [&](size_t j) { return size_t(idx[j]) * cols + j % cols; };
      std::map<size_t, double> instead;
      for (size_t j = 0; j < src.size(); ++j) {
        const size_t t = target(j);
        if (self[t] != yv[t] || src[j] != yv[t]) continue;  // PyTorch's share is right here
        int tied = 0;
        for (size_t k = 0; k < src.size(); ++k) tied += target(k) == t && src[k] == yv[t];
        instead[j] = cv[t] / tied;
      }
      BOOST_TEST(!instead.empty());  // the data has such ties
      check(name + ".g1", g[1], 1e-12, instead);
    });
}

BOOST_AUTO_TEST_CASE(sort_and_topk_like_torch) {
  for (bool desc : {false, true})
    guarded("sort descending " + std::to_string(int(desc)), [&] {
      auto [v, i] = input("sort.x").sort(1, desc);
      check("sort_desc" + std::to_string(int(desc)) + ".values", v, 0);
      check("sort_desc" + std::to_string(int(desc)) + ".indices", i, 0);
    });
  for (bool largest : {true, false})
    guarded("topk largest " + std::to_string(int(largest)), [&] {
      auto [v, i] = input("topk.x").topk(4, 1, largest);
      check("topk_largest" + std::to_string(int(largest)) + ".values", v, 0);
      check("topk_largest" + std::to_string(int(largest)) + ".indices", i, 0);
    });
}

BOOST_AUTO_TEST_CASE(batchnorm2d_step_like_torch) {
  nn::BatchNorm2d bn(2, 1e-5, 0.1, true, DType::F64);
  bn.weight = Tensor::from_vector<double>({1.5, -0.5}, {2}).requires_grad_();
  bn.bias = Tensor::from_vector<double>({0.25, 1.0}, {2}).requires_grad_();
  Tensor x = input("bn.x");
  Tensor y = bn(x);
  check("bn_train.y", y);
  Tensor cot = (Tensor::arange(0, double(y.numel()), 1, DType::F64) * 0.25 + 1.0).reshape(y.shape());
  std::vector<Tensor> g = ravel::gradients(y, {x, bn.weight, bn.bias}, cot);
  check("bn_train.gx", g[0]);
  check("bn_train.gw", g[1]);
  check("bn_train.gb", g[2]);
  check("bn.running_mean", bn.running_mean);
  check("bn.running_var", bn.running_var);
  bn.eval();
  check("bn_eval.y", bn(x));
}

BOOST_AUTO_TEST_CASE(activations_at_their_kinks_like_torch) {
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> acts = {
      {"hardswish", [](const Tensor& x) { return nn::hardswish(x); }},
      {"hardsigmoid", [](const Tensor& x) { return nn::hardsigmoid(x); }},
      {"silu", [](const Tensor& x) { return nn::silu(x); }},
      {"elu", [](const Tensor& x) { return nn::elu(x, 0.7); }},
      {"leaky_relu", [](const Tensor& x) { return nn::leaky_relu(x, 0.1); }},
      {"softplus", [](const Tensor& x) { return nn::softplus(x); }},
      {"relu", [](const Tensor& x) { return x.relu(); }},
  };
  for (const auto& [name, f] : acts)
    guarded(name, [&] {
      Tensor x = input("act.x");
      check("act_" + name + ".y", f(x));
      // Two of PyTorch 1.13's CPU backward kernels are not exact in f64: hardsigmoid's vector
      // path multiplies by 1.0f / 6 (0.1666666716..., so 3e-8 off), and hardswish's gradient at
      // exactly 3 is 1 on the vector path (`x >= 3`) but 1.5 on the scalar path (`x <= 3`:
      // x / 3 + 1/2), so PyTorch's answer depends on the tensor's length. Ravel gives 1/6 and 1.5,
      // the scalar kernel's (tests/nn/test_activations.cpp).
      const double tol = name == "hardsigmoid" ? 1e-7 : 1e-12;
      std::map<size_t, double> instead;
      if (name == "hardswish") instead[5] = 1.5;  // act.x[5] = 3
      check("act_" + name + ".g", ravel::gradients(f(x).sum(), {x})[0], tol, instead);
    });
}
