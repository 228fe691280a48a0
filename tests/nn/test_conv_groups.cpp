// Grouped convolutions (depthwise included) through the implicit window contraction (Note
// [Grouped implicit im2col], core/src/nn/conv.cpp): the forward against the naive direct
// convolution (conv_ref), the input, weight and bias gradients against loops written from the
// forward's definition, finite differences and a second order at stride 1 (the grouped custom
// gradient), and grouped transposed convolutions (which run as grouped convolutions). Strided
// convolutions' input gradient by phases (Note [Strided input gradient by phases]): strides 2
// and 3, kernel < stride (phases that receive nothing), inputs the last window does not reach,
// asymmetric padding, dilation on the unstrided axis, against the same loops.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "conv_reference.hpp"
#include "ravel/ravel.hpp"
#include "test_support.hpp"

using ravel::Tensor;
namespace nn = ravel::nn;
using conv_ref::Vec;

namespace {

struct Case {
  int64_t n, c, o, groups;
  Vec in, kernel, stride, dilation;
  std::vector<std::pair<int64_t, int64_t>> pad;
};

Vec cat(Vec a, const Vec& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string describe(const Case& k) {
  std::ostringstream s;
  s << "n" << k.n << " c" << k.c << " o" << k.o << " g" << k.groups << " " << k.in.size() << "d in";
  for (int64_t v : k.in) s << " " << v;
  s << " stride " << k.stride[0] << " dilation " << k.dilation[0] << " pad " << k.pad[0].first;
  return s.str();
}

nn::ConvOptions options_of(const Case& k) {
  nn::ConvOptions o;
  o.stride = k.stride;
  o.dilation = k.dilation;
  o.padding_pairs = k.pad;
  o.groups = k.groups;
  return o;
}

Tensor conv(const Case& k, const Tensor& x, const Tensor& w, const std::optional<Tensor>& b) {
  return k.in.size() == 1 ? nn::conv1d(x, w, b, options_of(k)) : nn::conv2d(x, w, b, options_of(k));
}

// dx, dw and db of sum(conv(x, w, b) * r), from the forward's definition: each product
// x[n, c, p * stride - pad + t * dilation] w[o, cc, t] (c = group(o) * Cg + cc) sends r[n, o, p]
// times the other factor to each.
struct Grads {
  std::vector<double> dx, dw, db;
};
Grads naive_gradients(const conv_ref::Conv& p, const std::vector<double>& x, const std::vector<double>& w,
                      const std::vector<double>& r) {
  const Vec out = p.out();
  const int64_t po = conv_ref::product(out), pk = conv_ref::product(p.kernel), pi = conv_ref::product(p.in);
  const int64_t cg = p.c / p.groups, og = p.o / p.groups;
  Grads g{std::vector<double>(x.size()), std::vector<double>(w.size()), std::vector<double>(static_cast<size_t>(p.o))};
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t o = 0; o < p.o; ++o)
      for (int64_t q = 0; q < po; ++q) {
        const double rv = r[(n * p.o + o) * po + q];
        g.db[o] += rv;
        const Vec oi = conv_ref::unflatten(q, out);
        for (int64_t cc = 0; cc < cg; ++cc)
          for (int64_t t = 0; t < pk; ++t) {
            const Vec ti = conv_ref::unflatten(t, p.kernel);
            Vec xi(out.size());
            bool inside = true;
            for (size_t d = 0; d < out.size(); ++d) {
              xi[d] = oi[d] * p.stride[d] - p.pad[d].first + ti[d] * p.dilation[d];
              inside &= xi[d] >= 0 && xi[d] < p.in[d];
            }
            if (!inside) continue;
            const int64_t c = (o / og) * cg + cc, xf = (n * p.c + c) * pi + conv_ref::flatten(xi, p.in);
            const int64_t wf = (o * cg + cc) * pk + t;
            g.dx[xf] += rv * w[wf];
            g.dw[wf] += rv * x[xf];
          }
      }
  return g;
}

void expect_close(const std::string& what, const std::vector<double>& got, const std::vector<double>& want, double tol) {
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= tol * (1 + std::fabs(want[i])))) first = bad++ ? first : i;
  BOOST_TEST(bad == 0u, what << ": " << bad << " of " << got.size() << " differ, first at " << first << ": "
                             << (bad ? got[first] : 0.0) << " vs " << (bad ? want[first] : 0.0));
}

const std::vector<Case> kCases = {
    {2, 6, 4, 2, {9, 10}, {3, 3}, {1, 1}, {1, 1}, {{1, 1}, {1, 1}}},     // two groups, stride 1
    {2, 8, 8, 8, {12, 13}, {3, 3}, {1, 1}, {1, 1}, {{1, 1}, {1, 1}}},    // depthwise
    {1, 4, 8, 4, {11, 12}, {3, 3}, {1, 1}, {2, 1}, {{2, 2}, {1, 0}}},    // depthwise x2, dilation, asymmetric
    {2, 16, 32, 4, {14, 14}, {3, 3}, {1, 1}, {1, 1}, {{1, 1}, {1, 1}}},  // the CNN's size, 4 groups
    {3, 6, 6, 3, {40}, {3}, {1}, {1}, {{1, 1}}},                         // 1-D
    {2, 4, 6, 2, {9, 9}, {3, 3}, {2, 2}, {1, 1}, {{1, 1}, {1, 1}}},      // stride 2 (autodiff's gradient)
    {2, 6, 6, 6, {10}, {5}, {2}, {1}, {{2, 2}}},                         // 1-D depthwise, stride 2
};

}  // namespace

BOOST_AUTO_TEST_CASE(grouped_conv_and_gradients_match_naive_loops) {
  uint64_t seed = 1000;
  for (ravel::DType dt : {ravel::DType::F64, ravel::DType::F32})
    for (const Case& k : kCases)
      guarded(describe(k) + (dt == ravel::DType::F32 ? " f32" : " f64"), [&] {
        conv_ref::Conv p{k.n, k.c, k.o, k.groups, k.in, k.kernel, k.stride, k.dilation, k.pad};
        Tensor x = Tensor::randn(cat({k.n, k.c}, k.in), seed++, dt);
        Tensor w = Tensor::randn(cat({k.o, k.c / k.groups}, k.kernel), seed++, dt);
        Tensor b = Tensor::randn({k.o}, seed++, dt);
        Tensor r = Tensor::randn(cat({k.n, k.o}, p.out()), seed++, dt);
        ravel::realize({x, w, b, r});
        auto xv = x.to_vector<double>(), wv = w.to_vector<double>(), bv = b.to_vector<double>(), rv = r.to_vector<double>();
        const double tol = dt == ravel::DType::F64 ? 1e-10 : 1e-4;
        Tensor y = conv(k, x, w, b);
        BOOST_TEST(y.shape() == cat({k.n, k.o}, p.out()));
        expect_close("y", y.to_vector<double>(), conv_ref::conv(p, xv, wv, &bv), tol);
        auto g = ravel::gradients((conv(k, x, w, b) * r).sum(), {x, w, b});
        Grads want = naive_gradients(p, xv, wv, rv);
        expect_close("dx", g[0].to_vector<double>(), want.dx, tol);
        expect_close("dw", g[1].to_vector<double>(), want.dw, tol);
        expect_close("db", g[2].to_vector<double>(), want.db, tol);
      });
}

// Finite differences of sum(tanh(conv) * r) in f64 at stride 1 (the grouped custom gradient),
// first order in x, w and b, and the second order d/dw <d/dx, v> (the rule's own derivative).
BOOST_AUTO_TEST_CASE(grouped_conv_gradients_match_finite_differences) {
  uint64_t seed = 1100;
  for (const Case& k : {kCases[0], kCases[2], kCases[4]})
    guarded(describe(k), [&] {
      conv_ref::Conv p{k.n, k.c, k.o, k.groups, k.in, k.kernel, k.stride, k.dilation, k.pad};
      Tensor x = Tensor::randn(cat({k.n, k.c}, k.in), seed++, ravel::DType::F64);
      Tensor w = Tensor::randn(cat({k.o, k.c / k.groups}, k.kernel), seed++, ravel::DType::F64);
      Tensor b = Tensor::randn({k.o}, seed++, ravel::DType::F64);
      Tensor r = Tensor::randn(cat({k.n, k.o}, p.out()), seed++, ravel::DType::F64);
      Tensor v = Tensor::randn(x.shape(), seed++, ravel::DType::F64);
      auto loss = [&](const Tensor& xx, const Tensor& ww, const Tensor& bb) { return (conv(k, xx, ww, bb).tanh() * r).sum(); };
      auto inner = [&](const Tensor& xx, const Tensor& ww) {
        return (ravel::gradients(loss(xx, ww, b), {xx})[0] * v).sum();
      };
      auto g = ravel::gradients(loss(x, w, b), {x, w, b});
      auto second = ravel::gradients(inner(x, w), {w})[0].to_vector<double>();
      auto fd = [&](const Tensor& t, size_t i, const std::function<double(const Tensor&)>& f) {
        auto base = t.to_vector<double>();
        auto at = [&](double d) {
          auto u = base;
          u[i] += d;
          return f(Tensor::from_vector(u, t.shape()));
        };
        return (at(1e-6) - at(-1e-6)) / 2e-6;
      };
      const std::vector<std::pair<std::string, size_t>> probes = {{"x", 0}, {"x", 17}, {"w", 1}, {"w", 5}, {"b", 1}};
      for (auto [name, i] : probes) {
        const Tensor& t = name == "x" ? x : name == "w" ? w : b;
        const auto gv = g[name == "x" ? 0 : name == "w" ? 1 : 2].to_vector<double>();
        const double d = fd(t, i, [&](const Tensor& u) {
          return (name == "x" ? loss(u, w, b) : name == "w" ? loss(x, u, b) : loss(x, w, u)).item<double>();
        });
        BOOST_TEST(std::fabs(d - gv[i]) < 1e-6 * (1 + std::fabs(d)), "d/d" << name << "[" << i << "]: " << gv[i] << " vs " << d);
      }
      for (size_t i : {size_t{0}, size_t{3}}) {
        const double d = fd(w, i, [&](const Tensor& u) { return inner(x, u).item<double>(); });
        BOOST_TEST(std::fabs(d - second[i]) < 1e-6 * (1 + std::fabs(d)), "d2/dx dw[" << i << "]: " << second[i] << " vs " << d);
      }
    });
}

// Grouped transposed convolutions at stride 1 (a grouped convolution of the padded input with
// the flipped kernel) against the scatter definition.
BOOST_AUTO_TEST_CASE(grouped_conv_transpose_matches_naive_loops) {
  uint64_t seed = 1200;
  for (const Case& k : {Case{2, 6, 4, 2, {7, 8}, {3, 3}, {1, 1}, {1, 1}, {{1, 1}, {0, 0}}},
                        Case{2, 8, 8, 8, {9, 6}, {3, 2}, {1, 1}, {2, 1}, {{0, 0}, {1, 1}}}})
    guarded("transposed " + describe(k), [&] {
      conv_ref::Conv p{k.n, k.c, k.o, k.groups, k.in, k.kernel, k.stride, k.dilation, k.pad};
      Tensor x = Tensor::randn(cat({k.n, k.c}, k.in), seed++, ravel::DType::F64);
      Tensor w = Tensor::randn(cat({k.c, k.o / k.groups}, k.kernel), seed++, ravel::DType::F64);
      Tensor y = nn::conv_transpose2d(x, w, std::nullopt, options_of(k));
      Vec out;
      for (size_t i = 0; i < k.in.size(); ++i)
        out.push_back(k.in[i] - 1 - k.pad[i].first - k.pad[i].second + k.dilation[i] * (k.kernel[i] - 1) + 1);
      BOOST_TEST(y.shape() == cat({k.n, k.o}, out));
      expect_close("y", y.to_vector<double>(), conv_ref::conv_transpose(p, out, x.to_vector<double>(), w.to_vector<double>(), nullptr),
                   1e-10);
    });
}

BOOST_AUTO_TEST_CASE(strided_conv_gradients_match_naive_loops) {
  const std::vector<Case> cases = {
      {2, 3, 4, 1, {9, 10}, {3, 3}, {2, 2}, {1, 1}, {{1, 1}, {1, 1}}},     // ResNet's downsampling
      {2, 3, 4, 1, {10, 11}, {3, 3}, {2, 2}, {1, 1}, {{0, 0}, {0, 0}}},    // last rows unreached
      {1, 2, 3, 1, {11, 9}, {2, 3}, {3, 2}, {1, 1}, {{1, 0}, {0, 2}}},     // kernel < stride, asymmetric
      {2, 4, 4, 2, {9, 12}, {3, 2}, {2, 1}, {1, 3}, {{1, 1}, {1, 1}}},     // groups, dilation where stride 1
      {2, 3, 5, 1, {17}, {4}, {3}, {1}, {{2, 1}}},                         // 1-D, stride 3
      {2, 16, 32, 1, {28, 28}, {3, 3}, {2, 2}, {1, 1}, {{1, 1}, {1, 1}}},  // larger, f32 blocks
  };
  uint64_t seed = 1300;
  for (ravel::DType dt : {ravel::DType::F64, ravel::DType::F32})
    for (const Case& k : cases)
      guarded(describe(k) + (dt == ravel::DType::F32 ? " f32" : " f64"), [&] {
        conv_ref::Conv p{k.n, k.c, k.o, k.groups, k.in, k.kernel, k.stride, k.dilation, k.pad};
        Tensor x = Tensor::randn(cat({k.n, k.c}, k.in), seed++, dt);
        Tensor w = Tensor::randn(cat({k.o, k.c / k.groups}, k.kernel), seed++, dt);
        Tensor r = Tensor::randn(cat({k.n, k.o}, p.out()), seed++, dt);
        ravel::realize({x, w, r});
        auto xv = x.to_vector<double>(), wv = w.to_vector<double>(), rv = r.to_vector<double>();
        const double tol = dt == ravel::DType::F64 ? 1e-10 : 1e-4;
        auto g = ravel::gradients((conv(k, x, w, std::nullopt) * r).sum(), {x, w});
        Grads want = naive_gradients(p, xv, wv, rv);
        expect_close("dx", g[0].to_vector<double>(), want.dx, tol);
        expect_close("dw", g[1].to_vector<double>(), want.dw, tol);
      });
}

// Note [Depthwise convolution as taps] (core) and Note [Tap sums] (tbb_cpu): relu(depthwise conv
// + bias) in f32 is one elementwise kernel over masked views, run as rows in registers; its
// gradient's relu' kernel recomputes the taps and reads the cotangent (the tap sums' tail with a
// LOAD of its own). Sizes over one evaluator block (tbb_cpu takes its tap sums only then).
// Against the naive loops: borders on every side, odd sizes, rows longer than
// one and two 16-lane vectors, stride 2 along the rows (the taps path) and along both axes (the
// contraction), dilation 2, asymmetric padding, 2x2 and 1x1 kernels, a channel multiplier of 1
// with padding 0 (no mask: the generic evaluator).
BOOST_AUTO_TEST_CASE(depthwise_taps_with_relu_match_naive_loops) {
  const std::vector<Case> cases = {
      {2, 16, 16, 16, {7, 9}, {3, 3}, {1, 1}, {1, 1}, {{1, 1}, {1, 1}}},     // odd sizes
      {1, 8, 8, 8, {6, 37}, {3, 3}, {1, 1}, {1, 1}, {{1, 1}, {1, 1}}},        // rows of 37: three vectors
      {1, 16, 16, 16, {4, 18}, {3, 3}, {1, 1}, {1, 1}, {{1, 1}, {1, 1}}},     // a tap across the vector edge
      {2, 8, 8, 8, {9, 11}, {3, 3}, {2, 1}, {1, 1}, {{1, 1}, {1, 1}}},        // stride 2 along the rows only
      {2, 8, 8, 8, {9, 11}, {3, 3}, {2, 2}, {1, 1}, {{1, 1}, {1, 1}}},        // stride 2: the contraction
      {1, 8, 8, 8, {10, 12}, {3, 3}, {1, 1}, {2, 2}, {{2, 2}, {2, 2}}},       // dilation 2
      {1, 16, 16, 16, {5, 6}, {3, 3}, {1, 1}, {1, 1}, {{2, 0}, {0, 2}}},      // asymmetric padding
      {2, 8, 8, 8, {8, 8}, {2, 2}, {1, 1}, {1, 1}, {{1, 0}, {0, 1}}},         // 2x2: four taps
      {1, 16, 16, 16, {4, 5}, {1, 1}, {1, 1}, {1, 1}, {{1, 1}, {1, 1}}},      // 1x1 with padding
      {2, 8, 8, 8, {6, 7}, {3, 3}, {1, 1}, {1, 1}, {{0, 0}, {0, 0}}},         // no padding, no mask
      {8, 96, 96, 96, {1, 1}, {3, 3}, {1, 1}, {1, 1}, {{1, 1}, {1, 1}}},      // a 1x1 image: all border
  };
  uint64_t seed = 1400;
  for (const Case& k : cases)
    guarded(describe(k), [&] {
      conv_ref::Conv p{k.n, k.c, k.o, k.groups, k.in, k.kernel, k.stride, k.dilation, k.pad};
      Tensor x = Tensor::randn(cat({k.n, k.c}, k.in), seed++);
      Tensor w = Tensor::randn(cat({k.o, 1}, k.kernel), seed++);
      Tensor b = Tensor::randn({k.o}, seed++) * 0.5f;
      Tensor r = Tensor::randn(cat({k.n, k.o}, p.out()), seed++);
      ravel::realize({x, w, b, r});
      auto xv = x.to_vector<double>(), wv = w.to_vector<double>(), bv = b.to_vector<double>(), rv = r.to_vector<double>();
      std::vector<double> z = conv_ref::conv(p, xv, wv, &bv), y = z, masked = rv;
      for (size_t i = 0; i < z.size(); ++i) {
        y[i] = z[i] > 0 ? z[i] : 0.0;
        masked[i] = z[i] > 0 ? rv[i] : 0.0;
      }
      expect_close("relu(y)", conv(k, x, w, b).relu().to_vector<double>(), y, 1e-4);
      auto g = ravel::gradients((conv(k, x, w, b).relu() * r).sum(), {x, w, b});
      Grads want = naive_gradients(p, xv, wv, masked);
      expect_close("dx", g[0].to_vector<double>(), want.dx, 1e-4);
      expect_close("dw", g[1].to_vector<double>(), want.dw, 1e-4);
      expect_close("db", g[2].to_vector<double>(), want.db, 1e-4);
    });
}

// relu(conv2d + bias): the activation in the kernel that computes the convolution.
// Ungrouped: the pad copy and the contraction, whose epilogue adds the bias and applies relu
// (the result is NCHW in the contraction's own layout: Note [Leading axes as a broadcast batch]);
// depthwise: one kernel (Note [Depthwise convolution as taps]). Values against the same
// convolution realized before its relu (the unfused path), bit for bit, and the depthwise one
// against every op in a kernel of its own.
BOOST_AUTO_TEST_CASE(relu_rides_in_the_convolution_kernel) {
  struct Shape4 {
    int64_t c, o, groups, kernels;
  };
  for (const Shape4 s : {Shape4{8, 16, 1, 2}, Shape4{8, 8, 8, 1}})
    guarded("groups " + std::to_string(s.groups), [&] {
      Tensor x = Tensor::randn({4, s.c, 12, 20}, 1500), w = Tensor::randn({s.o, s.c / s.groups, 3, 3}, 1501);
      Tensor b = Tensor::randn({s.o}, 1502);
      ravel::realize({x, w, b});
      nn::ConvOptions o;
      o.padding = {1};
      o.groups = s.groups;
      ravel::NoGradGuard no_grad;
      Tensor fused = nn::conv2d(x, w, b, o).relu();
      fused.realize();
      const ravel::KernelStats st = ravel::last_realization_stats();
      // nn_conv_groups_im2col: tbb_cpu states only the 1.0 contraction, so conv copies im2col
      // matrices and returns the GEMM's result permuted (its relu is a kernel of its own).
      const bool window = std::getenv("RAVEL_TBB_NO_WINDOW_GEMM") == nullptr;
      if (window) {
        BOOST_TEST(st.kernels() == s.kernels);
        BOOST_TEST(st.contractions == (s.groups == 1 ? 1 : 0));
      }
      Tensor pre = nn::conv2d(x, w, b, o);
      pre.realize();
      BOOST_TEST(fused.to_vector<float>() == pre.relu().to_vector<float>(), boost::test_tools::per_element());
      if (s.groups == 1 || !window) return;
      // Every product and add a kernel of its own (the block evaluator's loops): the tap sums
      // add in the program's order without contracting into FMA, so the bits are the same.
      ravel::FusionOptions none;
      none.policy = ravel::FusionPolicy::None;
      ravel::set_fusion_options(none);
      // Fresh inputs with the same values: the same expression would be the same (realized) node.
      auto copy = [](const Tensor& t) { return Tensor::from_vector(t.to_vector<float>(), t.shape()); };
      Tensor apart = nn::conv2d(copy(x), copy(w), copy(b), o).relu();
      apart.realize();
      const int64_t kernels = ravel::last_realization_stats().kernels();
      ravel::set_fusion_options(ravel::FusionOptions{});
      BOOST_TEST(kernels > 9);
      BOOST_TEST(fused.to_vector<float>() == apart.to_vector<float>(), boost::test_tools::per_element());
    });
}
