// Numerics at the edges: gradients of the saturating composites stay finite in f32
// where the true derivative is finite, log_softmax keeps f32 accuracy for logits of ±1000, prod's
// gradient is exact with zeros (first and second order), and the conventions at points where a
// derivative is not defined follow PyTorch and JAX (docs/autodiff.md, "Conventions").
//
// Expected values are closed forms evaluated here in double (never through Ravel); where a value
// is a convention, the test names the PyTorch/JAX/NumPy source of the expected figure.
#include <boost/test/unit_test.hpp>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdlib>
#include <limits>
#include <vector>

#include "ravel/autodiff.hpp"
#include "ravel/nn.hpp"
#include "ravel/ravel.hpp"

using ravel::DType;
using ravel::Tensor;

namespace {
constexpr float kFMax = FLT_MAX;
// Inputs across the whole f32 range: ±1e3, around the points where e^x and e^2x overflow in f32
// (88.72 and 44.36), where 1 / (1 + e^-x) and 2 sigmoid(2x) - 1 used to give NaN, and FLT_MAX.
const std::vector<float> kEdge = {-kFMax, -1e3f, -104.f, -88.8f, -88.7f, -88.f, -44.4f, -44.3f, -20.f, -1.f, 0.f,
                                  1.f,    20.f,  44.3f,  44.4f,  88.f,  88.7f, 88.8f,  104.f,  1e3f,  kFMax};

std::vector<float> grad_of(Tensor (*f)(const Tensor&), const std::vector<float>& xs) {
  Tensor x = Tensor::from_vector<float>(xs, {static_cast<int64_t>(xs.size())});
  return ravel::gradients(f(x).sum(), {x})[0].to_vector<float>();
}

// |got - want| within f32 rounding of a few operations, absolute floor below the subnormals.
void check_close(const std::vector<float>& got, const std::vector<double>& want, double rel, const char* what) {
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    BOOST_TEST_CONTEXT(what << " element " << i) {
      BOOST_TEST(std::isfinite(got[i]));
      BOOST_TEST(std::abs(double(got[i]) - want[i]) <= rel * std::abs(want[i]) + 1e-38);
    }
  }
}
}  // namespace

BOOST_AUTO_TEST_CASE(sigmoid_gradient_finite_everywhere) {
  std::vector<double> want;
  for (float x : kEdge) {  // sigmoid'(x) = e^-|x| / (1 + e^-|x|)^2 (even in x)
    double e = std::exp(-std::abs(double(x)));
    want.push_back(e / ((1 + e) * (1 + e)));
  }
  check_close(grad_of([](const Tensor& x) { return x.sigmoid(); }, kEdge), want, 1e-5, "sigmoid'");
  // and the values: 0 and 1 at the ends, 1/2 at 0
  Tensor x = Tensor::from_vector<float>(kEdge, {static_cast<int64_t>(kEdge.size())});
  std::vector<float> s = x.sigmoid().to_vector<float>();
  for (size_t i = 0; i < kEdge.size(); ++i) {
    double want_s = 1.0 / (1.0 + std::exp(-double(kEdge[i])));
    // relative 1e-5: exp(x) in f32 rounds x log2(e) first, ~|x| 2^-24 relative in the result
    BOOST_TEST(std::abs(s[i] - want_s) <= 1e-5 * want_s + 1e-38);
  }
}

BOOST_AUTO_TEST_CASE(tanh_gradient_finite_everywhere) {
  std::vector<double> want;
  for (float x : kEdge) {  // tanh'(x) = 4 e^-2|x| / (1 + e^-2|x|)^2
    double e = std::exp(-2 * std::abs(double(x)));
    want.push_back(4 * e / ((1 + e) * (1 + e)));
  }
  check_close(grad_of([](const Tensor& x) { return x.tanh(); }, kEdge), want, 1e-5, "tanh'");
  Tensor x = Tensor::from_vector<float>(kEdge, {static_cast<int64_t>(kEdge.size())});
  std::vector<float> t = x.tanh().to_vector<float>();
  for (size_t i = 0; i < kEdge.size(); ++i) BOOST_TEST(std::abs(t[i] - std::tanh(double(kEdge[i]))) <= 1e-6);
}

namespace {
// Rows of logits spanning ±1e3 and the f32 extremes; the softmax of each, in double.
const std::vector<std::vector<float>> kRows = {
    {1e3f, -1e3f, 0.f, 999.f}, {-1e3f, -1e3f, -1e3f, -999.5f}, {88.8f, 89.f, -88.8f, 0.f},
    {kFMax, -kFMax, 0.f, kFMax}, {-kFMax, -kFMax, -kFMax, -kFMax}, {1000.f, 1000.25f, 999.75f, -1000.f}};

std::vector<double> softmax_d(const std::vector<float>& r) {
  double m = -INFINITY;
  for (float v : r) m = std::max(m, double(v));
  std::vector<double> e;
  double s = 0;
  for (float v : r) s += e.emplace_back(std::exp(double(v) - m));
  for (double& v : e) v /= s;
  return e;
}
std::vector<double> log_softmax_d(const std::vector<float>& r) {
  double m = -INFINITY, s = 0;
  for (float v : r) m = std::max(m, double(v));
  for (float v : r) s += std::exp(double(v) - m);
  std::vector<double> out;
  for (float v : r) out.push_back((double(v) - m) - std::log(s));
  return out;
}
Tensor row(const std::vector<float>& r) { return Tensor::from_vector<float>(r, {1, static_cast<int64_t>(r.size())}); }
const std::vector<double> kW = {0.5, -1.0, 2.0, 0.25};  // a cotangent that is not all ones
Tensor weights() { return Tensor::from_vector<float>({0.5f, -1.f, 2.f, 0.25f}, {1, 4}); }

// softmax and log_softmax are the max / exp-sum decomposition on every device (Note [Softmax never
// adds the max back] in core/src/tensor/reduce.cpp), exact up to ±FLT_MAX: the rows at ±FLT_MAX
// are checked fully on every path (they were checked for finite values only while the LOGSUMEXP
// reduction's x - lse served them, whose f64 lse swallowed log 2 at FLT_MAX). logsumexp's
// gradient and cross_entropy are exact on both paths.
}  // namespace

BOOST_AUTO_TEST_CASE(logsumexp_gradient_is_softmax) {
  for (const auto& r : kRows) {
    Tensor x = row(r);
    check_close(ravel::gradients(x.logsumexp(1).sum(), {x})[0].to_vector<float>(), softmax_d(r), 1e-5, "logsumexp'");
    check_close(ravel::gradients(x.logsumexp(ravel::Axes{0, 1}), {x})[0].to_vector<float>(), softmax_d(r), 1e-5,
                "logsumexp' over both axes");
  }
}

BOOST_AUTO_TEST_CASE(softmax_and_log_softmax_gradients) {
  for (const auto& r : kRows) {
    Tensor x = row(r);
    std::vector<double> s = softmax_d(r), ws(4), wl(4);
    double sw = 0, w1 = 0;
    for (int i = 0; i < 4; ++i) sw += s[i] * kW[i], w1 += kW[i];
    for (int i = 0; i < 4; ++i) ws[i] = s[i] * (kW[i] - sw);  // d/dx sum(w softmax(x))
    for (int i = 0; i < 4; ++i) wl[i] = kW[i] - s[i] * w1;    // d/dx sum(w log_softmax(x))
    auto gs = ravel::gradients((x.softmax(1) * weights()).sum(), {x})[0].to_vector<float>();
    auto gl = ravel::gradients((x.log_softmax(1) * weights()).sum(), {x})[0].to_vector<float>();
    for (int i = 0; i < 4; ++i) {
      BOOST_TEST(std::isfinite(gs[i]));
      BOOST_TEST(std::abs(gs[i] - ws[i]) <= 1e-5 * (1 + std::abs(ws[i])));
      BOOST_TEST(std::isfinite(gl[i]));
      BOOST_TEST(std::abs(gl[i] - wl[i]) <= 1e-5 * (1 + std::abs(wl[i])));
    }
  }
}

BOOST_AUTO_TEST_CASE(cross_entropy_gradient_finite) {
  // d/dlogits mean_n(-log softmax(logits_n)[t_n]) = (softmax - one_hot(t)) / N
  std::vector<float> flat;
  for (const auto& r : kRows) flat.insert(flat.end(), r.begin(), r.end());
  const int64_t n = static_cast<int64_t>(kRows.size());
  std::vector<int64_t> t = {1, 3, 2, 0, 1, 3};
  Tensor logits = Tensor::from_vector<float>(flat, {n, 4});
  Tensor loss = ravel::nn::cross_entropy(logits, Tensor::from_vector<int64_t>(t, {n}));
  std::vector<float> g = ravel::gradients(loss, {logits})[0].to_vector<float>();
  double want_loss = 0;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<double> s = softmax_d(kRows[i]);
    want_loss -= log_softmax_d(kRows[i])[t[i]] / double(n);
    for (int j = 0; j < 4; ++j) {
      double w = (s[j] - (j == t[i] ? 1.0 : 0.0)) / double(n);
      BOOST_TEST(std::isfinite(g[i * 4 + j]));
      BOOST_TEST(std::abs(g[i * 4 + j] - w) <= 1e-6);
    }
  }
  BOOST_TEST(std::abs(loss.item<float>() - want_loss) <= 1e-5 * std::abs(want_loss));
}

BOOST_AUTO_TEST_CASE(log_softmax_accurate_at_large_logits) {
  // Each entry within 2 f32 ulps of the double result (adding the max back, as before, lost ~6e-5
  // absolute at |logits| = 1000).
  for (const auto& r : kRows) {
    std::vector<float> got = row(r).log_softmax(1).to_vector<float>();
    std::vector<double> want = log_softmax_d(r);
    for (size_t i = 0; i < r.size(); ++i) {
      if (want[i] < -kFMax) {  // -FLT_MAX - FLT_MAX is -inf in f32
        BOOST_TEST(got[i] == -std::numeric_limits<float>::infinity());
        continue;
      }
      BOOST_TEST_CONTEXT("logits " << r[0] << ".. entry " << i) {
        BOOST_TEST(std::abs(got[i] - want[i]) <= 2 * std::ldexp(1.0, -23) * std::max(1.0, std::abs(want[i])));
      }
    }
  }
}

namespace {
// prod_{j != i} x_j and prod_{k != i, j} x_k, by plain loops.
double prod_except(const std::vector<double>& x, size_t i, size_t j = SIZE_MAX) {
  double p = 1;
  for (size_t k = 0; k < x.size(); ++k)
    if (k != i && k != j) p *= x[k];
  return p;
}
}  // namespace

BOOST_AUTO_TEST_CASE(prod_gradient_exact_with_zeros) {
  // PyTorch (torch.prod's backward, prod_backward in FunctionsManual.cpp) and JAX (jnp.prod
  // through cumprod/reduce_prod's JVP) both give prod_{j != i} x_j: exact with zeros.
  for (const std::vector<double>& xs : {std::vector<double>{2, 0, 3, 4}, {0, 2, 0, 3}, {0, 0, 0, 5}, {1.5, -2, 3, 0.5}}) {
    Tensor x = Tensor::from_vector<double>(xs, {4});
    auto g = ravel::gradients(x.prod(), {x})[0].to_vector<double>();
    for (size_t i = 0; i < 4; ++i) BOOST_TEST(g[i] == prod_except(xs, i));
    // second order: H_ij = prod_{k != i, j} x_k off the diagonal, 0 on it
    auto h = ravel::hessian([](const Tensor& t) { return t.prod(); })(x).to_vector<double>();
    for (size_t i = 0; i < 4; ++i)
      for (size_t j = 0; j < 4; ++j) BOOST_TEST(h[i * 4 + j] == (i == j ? 0.0 : prod_except(xs, i, j)));
  }
  // along chosen axes of a 3-D tensor, keepdim and not
  std::vector<double> v(24);
  for (size_t i = 0; i < v.size(); ++i) v[i] = (i % 5 == 0) ? 0.0 : 0.5 + double(i % 7);
  Tensor x = Tensor::from_vector<double>(v, {2, 3, 4});
  auto g = ravel::gradients(x.prod(ravel::Axes{0, 2}).sum(), {x})[0].to_vector<double>();
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c) {
        double p = 1;
        for (int a2 = 0; a2 < 2; ++a2)
          for (int c2 = 0; c2 < 4; ++c2)
            if (a2 != a || c2 != c) p *= v[a2 * 12 + b * 4 + c2];
        BOOST_TEST(g[a * 12 + b * 4 + c] == p);
      }
}

// ---- conventions (docs/autodiff.md, "Conventions") --------------------------------------------

BOOST_AUTO_TEST_CASE(relu_abs_sqrt_at_zero) {
  Tensor x = Tensor::from_vector<float>({0.f, -0.f, 2.f, -2.f}, {4});
  // relu'(0) = 0: torch.relu (threshold_backward: grad where x > 0) and jax.nn.relu (custom JVP,
  // where(x > 0, g, 0)) both give 0.
  auto gr = ravel::gradients(x.relu().sum(), {x})[0].to_vector<float>();
  BOOST_TEST(gr == (std::vector<float>{0.f, 0.f, 1.f, 0.f}), boost::test_tools::per_element());
  // relu(NaN) = NaN as torch.relu
  BOOST_TEST(std::isnan(Tensor::from_vector<float>({NAN}, {1}).relu().item<float>()));
  // abs'(0) = 0: torch.abs (sgn(x) * g) and jax.numpy.abs (sign(x) * g) both give 0.
  auto ga = ravel::gradients(x.abs().sum(), {x})[0].to_vector<float>();
  BOOST_TEST(ga == (std::vector<float>{0.f, 0.f, 1.f, -1.f}), boost::test_tools::per_element());
  // sqrt'(0) = +inf: torch.sqrt (g / (2 sqrt x)) and jax.numpy.sqrt (g * 0.5 / sqrt x).
  Tensor z = Tensor::from_vector<float>({0.f, 4.f}, {2});
  auto gs = ravel::gradients(z.sqrt().sum(), {z})[0].to_vector<float>();
  BOOST_TEST(gs[0] == std::numeric_limits<float>::infinity());
  BOOST_TEST(gs[1] == 0.25f);
}

BOOST_AUTO_TEST_CASE(max_ties_split_evenly) {
  // JAX's choice (jax.numpy.max / lax.reduce_max JVP: the gradient shared equally among the
  // tied maxima; jnp.maximum(x, x) splits 1/2 + 1/2). PyTorch's amax also shares equally.
  Tensor x = Tensor::from_vector<float>({1.f, 3.f, 3.f, 2.f}, {4});
  auto g = ravel::gradients(x.max(), {x})[0].to_vector<float>();
  BOOST_TEST(g == (std::vector<float>{0.f, 0.5f, 0.5f, 0.f}), boost::test_tools::per_element());
  Tensor a = Tensor::from_vector<float>({1.f, 2.f}, {2}), b = Tensor::from_vector<float>({1.f, 3.f}, {2});
  auto gab = ravel::gradients(a.maximum(b).sum(), {a, b});
  BOOST_TEST(gab[0].to_vector<float>() == (std::vector<float>{0.5f, 0.f}), boost::test_tools::per_element());
  BOOST_TEST(gab[1].to_vector<float>() == (std::vector<float>{0.5f, 1.f}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(argmax_nan_is_the_maximum) {
  // numpy.argmax([1, nan, 3, nan]) == 1 and torch.argmax gives 1 too: NaN is the maximum and the
  // first NaN wins.
  Tensor x = Tensor::from_vector<float>({1.f, NAN, 3.f, NAN}, {4});
  BOOST_TEST(x.argmax().item<int64_t>() == 1);
  Tensor y = Tensor::from_vector<double>({5, 1, 2, 3, NAN, 0}, {2, 3});
  BOOST_TEST(y.argmax(1).to_vector<int64_t>() == (std::vector<int64_t>{0, 1}), boost::test_tools::per_element());
  Tensor z = Tensor::from_vector<float>({2.f, 7.f, 7.f}, {3});
  BOOST_TEST(z.argmax().item<int64_t>() == 1);  // the first of tied maxima, as before
}

BOOST_AUTO_TEST_CASE(cross_entropy_reduction_and_ignore_index) {
  // torch.nn.functional.cross_entropy(reduction=..., ignore_index=...): per-sample losses
  // -log softmax(logits)[t] (closed form here), 0 for an ignored target; sum; mean over the
  // targets not ignored.
  const std::vector<std::vector<float>> rows = {{1.f, 2.f, 0.5f}, {-1.f, 0.f, 3.f}, {0.f, 0.f, 0.f}, {2.f, -2.f, 1.f}};
  std::vector<float> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  Tensor logits = Tensor::from_vector<float>(flat, {4, 3});
  Tensor t = Tensor::from_vector<int64_t>({2, -100, 1, 0}, {4});
  std::vector<double> want = {-log_softmax_d(rows[0])[2], 0.0, -log_softmax_d(rows[2])[1], -log_softmax_d(rows[3])[0]};
  using ravel::nn::Reduction;
  auto none = ravel::nn::cross_entropy(logits, t, Reduction::None).to_vector<float>();
  for (int i = 0; i < 4; ++i) BOOST_TEST(std::abs(none[i] - want[i]) <= 1e-6);
  double sum = want[0] + want[2] + want[3];
  BOOST_TEST(std::abs(ravel::nn::cross_entropy(logits, t, Reduction::Sum).item<float>() - sum) <= 1e-5);
  Tensor mean = ravel::nn::cross_entropy(logits, t, Reduction::Mean);
  BOOST_TEST(std::abs(mean.item<float>() - sum / 3) <= 1e-6);
  // gradient: (softmax - one_hot) / 3 on kept rows, 0 on the ignored one
  auto g = ravel::gradients(mean, {logits})[0].to_vector<float>();
  const int tt[4] = {2, -1, 1, 0};
  for (int i = 0; i < 4; ++i) {
    std::vector<double> s = softmax_d(rows[i]);
    for (int j = 0; j < 3; ++j) {
      double w = tt[i] < 0 ? 0.0 : (s[j] - (j == tt[i] ? 1.0 : 0.0)) / 3.0;
      BOOST_TEST(std::abs(g[i * 3 + j] - w) <= 1e-6);
    }
  }
  // the two-argument form is the mean with nothing ignored
  Tensor t2 = Tensor::from_vector<int64_t>({2, 0, 1, 0}, {4});
  BOOST_TEST(std::abs(ravel::nn::cross_entropy(logits, t2).item<float>() -
                      ravel::nn::cross_entropy(logits, t2, Reduction::Mean).item<float>()) <= 1e-6);
}

// Note [Cotangents of exactly one] (core/src/autodiff/rules.cpp): the gradient of sum(x * r) with
// respect to x is r itself, bit for bit and with no kernel (1 * r was an elementwise kernel of its
// own). The bits are the test: a signalling NaN stays signalling (the multiply quiets it: 0x7f800001
// becomes 0x7fc00001 on x86), a negative quiet NaN keeps sign and payload, and -0.0, a subnormal
// and infinity stay as they are. A cotangent that is not exactly one (2, below) still multiplies.
BOOST_AUTO_TEST_CASE(gradient_of_a_sum_of_products_is_the_other_factor) {
  const std::vector<uint32_t> bits = {0x7f800001u, 0xffc12345u, 0x80000000u, 0x00000001u,
                                      0x7f800000u, 0x3fc00000u, 0xc0500000u};
  std::vector<float> rv(bits.size());
  std::memcpy(rv.data(), bits.data(), bits.size() * sizeof(float));
  const int64_t n = static_cast<int64_t>(rv.size());
  Tensor r = Tensor::from_vector<float>(rv, {n}).realize();
  Tensor x = Tensor::from_vector<float>(std::vector<float>(rv.size(), 0.5f), {n}).realize();
  auto bits_of = [](const Tensor& t) {
    std::vector<float> v = t.to_vector<float>();
    std::vector<uint32_t> b(v.size());
    std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
    return b;
  };
  for (bool r_first : {false, true}) {
    BOOST_TEST_CONTEXT("r is the product's " << (r_first ? "first" : "second") << " factor") {
      Tensor g = ravel::gradients((r_first ? r * x : x * r).sum(), {x})[0];
      g.realize();
      BOOST_TEST(ravel::last_realization_stats().kernels() == 0);
      std::vector<uint32_t> got = bits_of(g);
      for (size_t i = 0; i < bits.size(); ++i)
        BOOST_TEST(got[i] == bits[i], "element " << i << ": " << std::hex << got[i] << " want " << bits[i]);
    }
  }
  // A cotangent of 2: 2 * r, the closed form, on the finite elements (x86's multiply quiets the NaNs).
  std::vector<float> twice = ravel::gradients((x * r).sum() * 2.0, {x})[0].to_vector<float>();
  for (size_t i = 2; i < bits.size(); ++i) {
    BOOST_TEST_CONTEXT("element " << i) {
      const double want = 2.0 * static_cast<double>(rv[i]);
      BOOST_TEST((static_cast<double>(twice[i]) == want || (std::isinf(want) && std::isinf(twice[i]))));
    }
  }
}
