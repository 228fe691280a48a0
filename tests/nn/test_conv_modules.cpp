// Conv1d/Conv2d and the pooling modules: torch's initialisation bounds, forward passes against
// naive loops in double written here, and gradients by central finite differences.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>
#include <random>

#include "ravel/ravel.hpp"

using ravel::Tensor;
namespace nn = ravel::nn;
namespace tt = boost::test_tools;

namespace {
std::vector<double> values_for_conv_test(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(n);
  for (double& x : v) x = u(rng);
  return v;
}

// Naive 2-D convolution (cross-correlation, as torch) in double: x [n, c, h, w], weight
// [o, c / groups, kh, kw], zero padding `pad`, stride `st`, dilation `dil`.
std::vector<double> naive_conv2d(const std::vector<double>& x, int64_t n, int64_t c, int64_t h, int64_t w,
                                 const std::vector<double>& wt, int64_t o, int64_t kh, int64_t kw, const std::vector<double>& bias,
                                 int64_t st, int64_t pad, int64_t dil, int64_t groups, int64_t& oh, int64_t& ow) {
  oh = (h + 2 * pad - dil * (kh - 1) - 1) / st + 1;
  ow = (w + 2 * pad - dil * (kw - 1) - 1) / st + 1;
  const int64_t cg = c / groups, og = o / groups;
  std::vector<double> y(static_cast<size_t>(n * o * oh * ow));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = bias.empty() ? 0.0 : bias[oc];
          const int64_t g = oc / og;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t p = 0; p < kh; ++p)
              for (int64_t q = 0; q < kw; ++q) {
                const int64_t r = i * st - pad + p * dil, s = j * st - pad + q * dil;
                if (r < 0 || r >= h || s < 0 || s >= w) continue;
                acc += x[((b * c + g * cg + ci) * h + r) * w + s] * wt[((oc * cg + ci) * kh + p) * kw + q];
              }
          y[((b * o + oc) * oh + i) * ow + j] = acc;
        }
  return y;
}
}  // namespace

BOOST_AUTO_TEST_CASE(conv_init_is_torch_kaiming_uniform_and_seeded) {
  nn::Conv2d a(6, 8, {3, 5}, 11, {}, true), b(6, 8, {3, 5}, 11), c(6, 8, {3, 5}, 12);
  BOOST_TEST(ravel::shape_str(a.weight.shape()) == "[8, 6, 3, 5]");
  BOOST_TEST(ravel::shape_str(a.bias.shape()) == "[8]");
  BOOST_TEST(a.weight.requires_grad());
  BOOST_TEST(a.weight.to_vector<float>() == b.weight.to_vector<float>());
  BOOST_TEST(a.weight.to_vector<float>() != c.weight.to_vector<float>());
  // kaiming_uniform_(a=sqrt(5)): bound = sqrt(6 / ((1 + 5) * fan_in)) = 1 / sqrt(fan_in), fan_in = 6*3*5.
  const double bound = 1.0 / std::sqrt(90.0);
  double lo = 1, hi = -1, mean = 0;
  for (float v : a.weight.to_vector<float>()) lo = std::min<double>(lo, v), hi = std::max<double>(hi, v), mean += v;
  mean /= static_cast<double>(a.weight.numel());
  BOOST_TEST(lo >= -bound);
  BOOST_TEST(hi <= bound);
  BOOST_TEST(lo < -0.9 * bound);  // 720 draws fill the interval
  BOOST_TEST(hi > 0.9 * bound);
  BOOST_TEST(std::fabs(mean) < 0.1 * bound);
  for (float v : a.bias.to_vector<float>()) BOOST_TEST(std::fabs(v) <= bound);
  // Groups divide fan_in; no bias when asked.
  nn::ConvOptions grouped;
  grouped.groups = 3;
  nn::Conv1d g(6, 9, {4}, 1, grouped, false);
  BOOST_TEST(ravel::shape_str(g.weight.shape()) == "[9, 2, 4]");
  BOOST_TEST(!g.bias.defined());
  BOOST_TEST(g.named_parameters().size() == 1u);
  for (float v : g.weight.to_vector<float>()) BOOST_TEST(std::fabs(v) <= 1.0 / std::sqrt(8.0));
  BOOST_CHECK_THROW(nn::Conv2d(5, 6, {3}, 1, grouped), ravel::ValueError);  // 3 does not divide 5
  BOOST_CHECK_THROW(nn::Conv2d(4, 6, {3, 3, 3}, 1), ravel::ValueError);     // three sizes for 2-D
  BOOST_CHECK_THROW(nn::Conv2d(4, 6, {0}, 1), ravel::ValueError);
  BOOST_CHECK_THROW(nn::Conv2d(0, 6, {3}, 1), ravel::ValueError);
}

BOOST_AUTO_TEST_CASE(conv2d_module_matches_naive_loops) {
  nn::ConvOptions o;
  o.stride = {2};
  o.padding = {1};
  o.dilation = {2};
  o.groups = 2;
  nn::Conv2d conv(4, 6, {3}, 5, o, true, ravel::DType::F64);
  const int64_t n = 2, c = 4, h = 7, w = 6;
  auto xv = values_for_conv_test(n * c * h * w, 1);
  int64_t oh = 0, ow = 0;
  auto want = naive_conv2d(xv, n, c, h, w, conv.weight.to_vector<double>(), 6, 3, 3, conv.bias.to_vector<double>(), 2, 1, 2, 2,
                           oh, ow);
  Tensor y = conv(Tensor::from_vector(xv, {n, c, h, w}));
  BOOST_TEST(y.shape() == (ravel::Shape{n, 6, oh, ow}));
  auto got = y.to_vector<double>();
  for (size_t i = 0; i < want.size(); ++i) BOOST_TEST(got[i] == want[i], tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(conv1d_module_matches_naive_loops) {
  nn::ConvOptions o;
  o.padding = {2};
  nn::Conv1d conv(3, 2, {5}, 9, o, true, ravel::DType::F64);
  const int64_t n = 2, c = 3, len = 9;
  auto xv = values_for_conv_test(n * c * len, 2);
  int64_t oh = 0, ow = 0;  // a 1-D convolution is a 2-D one of height 1
  auto want = naive_conv2d(xv, n, c, 1, len, conv.weight.to_vector<double>(), 2, 1, 5, conv.bias.to_vector<double>(), 1, 0, 1,
                           1, oh, ow);
  BOOST_REQUIRE(oh == 1);
  // The naive loop had no padding along the length: pad the input by hand instead.
  std::vector<double> padded;
  for (int64_t b = 0; b < n * c; ++b) {
    padded.insert(padded.end(), 2, 0.0);
    padded.insert(padded.end(), xv.begin() + b * len, xv.begin() + (b + 1) * len);
    padded.insert(padded.end(), 2, 0.0);
  }
  want = naive_conv2d(padded, n, c, 1, len + 4, conv.weight.to_vector<double>(), 2, 1, 5, conv.bias.to_vector<double>(), 1, 0,
                      1, 1, oh, ow);
  Tensor y = conv(Tensor::from_vector(xv, {n, c, len}));
  BOOST_TEST(y.shape() == (ravel::Shape{n, 2, len}));
  auto got = y.to_vector<double>();
  for (size_t i = 0; i < want.size(); ++i) BOOST_TEST(got[i] == want[i], tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(conv2d_module_gradient_matches_finite_differences) {
  nn::ConvOptions o;
  o.padding = {1};
  o.stride = {2};
  nn::Conv2d conv(2, 3, {3}, 21, o, true, ravel::DType::F64);
  const ravel::Shape xs{2, 2, 5, 4};
  auto xv = values_for_conv_test(80, 3);
  Tensor x = Tensor::from_vector(xv, xs);
  Tensor r = Tensor::from_vector(values_for_conv_test(2 * 3 * 3 * 2, 4), {2, 3, 3, 2});
  // loss = sum(conv(x) * r): its gradient with respect to the weight, the bias and the input.
  Tensor xg = x;
  xg.requires_grad_();
  (conv(xg) * r).sum().backward();
  auto gw = conv.weight.grad().to_vector<double>(), gb = conv.bias.grad().to_vector<double>(),
       gx = xg.grad().to_vector<double>();
  auto loss = [&] { return (conv(x) * r).sum().item<double>(); };
  const double h = 1e-6;
  auto check = [&](Tensor& t, const std::vector<double>& grad, const char* what) {
    auto base = t.to_vector<double>();
    for (size_t i = 0; i < base.size(); ++i) {
      auto up = base, down = base;
      up[i] += h, down[i] -= h;
      t.assign(Tensor::from_vector(up, t.shape()));
      const double lu = loss();
      t.assign(Tensor::from_vector(down, t.shape()));
      const double ld = loss();
      BOOST_TEST_CONTEXT(what << " " << i) { BOOST_TEST(grad[i] == (lu - ld) / (2 * h), tt::tolerance(1e-6)); }
    }
    t.assign(Tensor::from_vector(base, t.shape()));
  };
  check(conv.weight, gw, "weight");
  check(conv.bias, gb, "bias");
  check(x, gx, "input");
}

BOOST_AUTO_TEST_CASE(pooling_modules_match_naive_loops) {
  const int64_t n = 2, c = 3, h = 6, w = 7;
  auto xv = values_for_conv_test(n * c * h * w, 5);
  Tensor x = Tensor::from_vector(xv, {n, c, h, w});
  nn::MaxPool2d maxpool(2);
  nn::PoolOptions po;
  po.kernel = {3};
  po.stride = {2};
  po.padding = {1};
  nn::AvgPool2d avgpool(po);  // count_include_pad: the divisor is 9 even at the border
  auto mx = maxpool(x).to_vector<double>(), av = avgpool(x).to_vector<double>();
  BOOST_TEST(maxpool(x).shape() == (ravel::Shape{n, c, 3, 3}));
  BOOST_TEST(avgpool(x).shape() == (ravel::Shape{n, c, 3, 4}));
  for (int64_t p = 0; p < n * c; ++p) {
    const double* plane = xv.data() + p * h * w;
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 3; ++j) {
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t a = 0; a < 2; ++a)
          for (int64_t b = 0; b < 2; ++b) m = std::max(m, plane[(2 * i + a) * w + 2 * j + b]);
        BOOST_TEST(mx[(p * 3 + i) * 3 + j] == m);
      }
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 4; ++j) {
        double s = 0;
        for (int64_t a = 0; a < 3; ++a)
          for (int64_t b = 0; b < 3; ++b) {
            const int64_t r = 2 * i - 1 + a, q = 2 * j - 1 + b;
            if (r >= 0 && r < h && q >= 0 && q < w) s += plane[r * w + q];
          }
        BOOST_TEST(av[(p * 3 + i) * 4 + j] == s / 9, tt::tolerance(1e-12));
      }
  }
  BOOST_TEST(maxpool.named_parameters().empty());
}
