// Gradient checks of the composite operators (clamp, remainder, the special functions, the nn
// activations, the shape ops and interpolate) against central finite differences: reverse mode,
// forward mode (gradcheck in gradcheck.hpp), and the second derivative (gradcheck of the
// gradient), in f64 away from the kinks and jumps, where the finite differences are exact to
// the tolerance gradcheck.hpp explains.
#include "gradcheck.hpp"
#include "ravel/nn.hpp"

using namespace adtest;
using ravel::UnaryFn;

namespace {

// f and its gradient (of sum f), so that second derivatives are checked against differences of
// the first.
void gradcheck_twice(const std::string& name, const UnaryFn& f, const Tensor& x) {
  gradcheck1(name, f, x);
  UnaryFn df = ravel::grad(UnaryFn([f](const Tensor& v) { return f(v).sum(); }));
  gradcheck1(name + "'", df, x);
}

}  // namespace

BOOST_AUTO_TEST_CASE(special_functions) {
  const Shape s = {2, 3};
  gradcheck_twice("expm1", [](const Tensor& x) { return x.expm1(); }, uniform(s, 1, -2, 2));
  gradcheck_twice("log1p", [](const Tensor& x) { return x.log1p(); }, uniform(s, 2, -0.8, 3));
  gradcheck_twice("erf", [](const Tensor& x) { return x.erf(); }, uniform(s, 3, -2.5, 2.5));
  gradcheck_twice("atan", [](const Tensor& x) { return x.atan(); }, uniform(s, 4, -4, 4));
  gradcheck_twice("asin", [](const Tensor& x) { return x.asin(); }, uniform(s, 5, -0.9, 0.9));
  gradcheck_twice("acos", [](const Tensor& x) { return x.acos(); }, uniform(s, 6, -0.9, 0.9));
  gradcheck_twice("sinh", [](const Tensor& x) { return x.sinh(); }, uniform(s, 7, -3, 3));
  gradcheck_twice("cosh", [](const Tensor& x) { return x.cosh(); }, uniform(s, 8, -3, 3));
  gradcheck_twice("asinh", [](const Tensor& x) { return x.asinh(); }, uniform(s, 9, -5, 5));
  gradcheck_twice("acosh", [](const Tensor& x) { return x.acosh(); }, uniform(s, 10, 1.2, 5));
  gradcheck_twice("atanh", [](const Tensor& x) { return x.atanh(); }, uniform(s, 11, -0.9, 0.9));
  gradcheck2("atan2", [](const Tensor& y, const Tensor& x) { return y.atan2(x); }, normal(s, 12), signed_away({3}, 13));
  // Second derivatives of atan2 through its rule.
  gradcheck2(
      "atan2 grad",
      [](const Tensor& y, const Tensor& x) {
        std::vector<Tensor> g = ravel::gradients(y.atan2(x).sum(), {y, x});
        return g[0].add(g[1].mul(Tensor::scalar(2.0, DType::F64)));
      },
      normal(s, 14), signed_away(s, 15));
}

BOOST_AUTO_TEST_CASE(clamp_and_remainder) {
  const Shape s = {3, 4};
  // Away from the bounds by construction: values in (-3, 3), bounds +-1 +- 0.3 apart from them.
  Tensor x = host({-2.5, -1.6, -0.7, 0.2, 0.9, 1.8, 2.6, -0.2, 0.5, -1.4, 1.3, 2.1}, s);
  gradcheck_twice("clamp(scalars)", [](const Tensor& v) { return v.clamp(-1.0, 1.0); }, x);
  gradcheck_twice("clamp(min only)", [](const Tensor& v) { return v.clamp(-1.0, std::nullopt); }, x);
  gradcheck("clamp(tensors)",
            [](const std::vector<Tensor>& a) { return a[0].clamp(a[1], a[2]); },
            {x, host({-1.1, 0.0, -0.45, 0.65}, {4}), host({1.1, 0.35, 2.3}, {3, 1})});
  gradcheck2("remainder", [](const Tensor& a, const Tensor& b) { return a.remainder(b); },
             off_integers(s, 21), host({1.0, -1.0, 1.0, -1.0}, {4}));
  gradcheck2("remainder(b / 3)", [](const Tensor& a, const Tensor& b) { return a.remainder(b); },
             uniform(s, 22, -5, 5).mul(Tensor::scalar(0.999, DType::F64)), host({2.7, -1.9, 3.3, -4.1}, {4}));
}

BOOST_AUTO_TEST_CASE(activations) {
  namespace nn = ravel::nn;
  const Shape s = {2, 5};
  // Away from the kinks at 0 and +-3.
  Tensor x = host({-4.5, -3.4, -2.6, -1.2, -0.4, 0.3, 1.1, 2.2, 2.7, 3.6}, s);
  gradcheck_twice("softplus", [](const Tensor& v) { return nn::softplus(v); }, x);
  gradcheck_twice("softplus(beta=3, threshold=4)", [](const Tensor& v) { return nn::softplus(v, 3.0, 4.0); }, x);
  gradcheck_twice("silu", [](const Tensor& v) { return nn::silu(v); }, x);
  gradcheck_twice("elu", [](const Tensor& v) { return nn::elu(v, 0.7); }, x);
  gradcheck_twice("leaky_relu", [](const Tensor& v) { return nn::leaky_relu(v, 0.1); }, x);
  gradcheck_twice("hardsigmoid", [](const Tensor& v) { return nn::hardsigmoid(v); }, x);
  gradcheck_twice("hardswish", [](const Tensor& v) { return nn::hardswish(v); }, x);
}

BOOST_AUTO_TEST_CASE(shape_ops) {
  Tensor x = normal({3, 4}, 31);
  gradcheck1("tril(1)", [](const Tensor& v) { return v.tril(1); }, x);
  gradcheck1("triu(-1)", [](const Tensor& v) { return v.triu(-1); }, x);
  gradcheck1("tile", [](const Tensor& v) { return v.tile({2, 1, 2}); }, x);
  gradcheck1("repeat_interleave", [](const Tensor& v) { return v.repeat_interleave(2, 1); }, x);
  gradcheck1("repeat_interleave(list)", [](const Tensor& v) { return v.repeat_interleave(std::vector<int64_t>{2, 0, 1}, 0); }, x);
  gradcheck1("split", [](const Tensor& v) {
    std::vector<Tensor> p = v.split({1, 3}, 1);
    return p[1].sum(1).add(p[0].squeeze(1).mul(p[0].squeeze(1)));
  }, x);
  gradcheck1("chunk", [](const Tensor& v) {
    std::vector<Tensor> p = v.chunk(2, 1);
    return p[0].mul(p[1]);
  }, x);
  gradcheck1("roll", [](const Tensor& v) { return v.roll({1, -3}, {0, 1}).mul(v); }, x);
  gradcheck1("roll(flat)", [](const Tensor& v) { return v.roll(5).mul(v); }, x);
  gradcheck2("meshgrid", [](const Tensor& a, const Tensor& b) {
    std::vector<Tensor> g = Tensor::meshgrid({a, b}, "xy");
    return g[0].mul(g[1]).sin();
  }, normal({3}, 32), normal({2}, 33));
}

BOOST_AUTO_TEST_CASE(interpolate) {
  namespace nn = ravel::nn;
  using Mode = nn::InterpolateMode;
  Tensor x = normal({1, 2, 3, 4}, 51);
  gradcheck1("bilinear", [](const Tensor& v) { return nn::interpolate(v, {5, 3}, Mode::Bilinear); }, x);
  gradcheck1("bilinear align_corners", [](const Tensor& v) { return nn::interpolate(v, {5, 7}, Mode::Bilinear, true); }, x);
  gradcheck1("nearest", [](const Tensor& v) { return nn::interpolate(v, {5, 3}); }, x);
  gradcheck1("nearest x2 (view)", [](const Tensor& v) { return nn::interpolate_scale(v, {2.0, 2.0}); }, x);
  gradcheck1("linear, squared", [](const Tensor& v) { return nn::interpolate_scale(v, {1.7}, Mode::Linear).square(); },
             normal({2, 1, 5}, 52));
}
