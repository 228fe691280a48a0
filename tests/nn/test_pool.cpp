// max/avg pooling (1d/2d/3d, ceil_mode, count_include_pad, divisor, dilation) and adaptive pooling
// against naive loops in double (conv_reference.hpp), gradients (PyTorch's arg-max routing) and
// errors.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <sstream>

#include "conv_reference.hpp"
#include "ravel/ravel.hpp"
#include "test_support.hpp"

using ravel::Tensor;
namespace nn = ravel::nn;
using conv_ref::Vec;

namespace {

struct PoolCase {
  Vec lead, in, kernel, stride, pad, dilation;
  bool ceil_mode = false, count_include_pad = true;
  int64_t divisor = 0;
};

std::string describe(const PoolCase& k) {
  std::ostringstream s;
  s << k.in.size() << "d";
  for (size_t i = 0; i < k.in.size(); ++i)
    s << " [in " << k.in[i] << " k " << k.kernel[i] << " s " << k.stride[i] << " p " << k.pad[i] << " d "
      << k.dilation[i] << "]";
  s << (k.ceil_mode ? " ceil" : "") << (k.count_include_pad ? "" : " exclude-pad") << " divisor " << k.divisor;
  return s.str();
}

Vec cat(Vec a, const Vec& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

nn::PoolOptions options_of(const PoolCase& k) {
  nn::PoolOptions o;
  o.kernel = k.kernel;
  o.stride = k.stride;
  o.padding = k.pad;
  o.dilation = k.dilation;
  o.ceil_mode = k.ceil_mode;
  o.count_include_pad = k.count_include_pad;
  if (k.divisor) o.divisor_override = k.divisor;
  return o;
}

Tensor max_pool(size_t r, const Tensor& x, const nn::PoolOptions& o) {
  return r == 1 ? nn::max_pool1d(x, o) : r == 2 ? nn::max_pool2d(x, o) : nn::max_pool3d(x, o);
}
Tensor avg_pool(size_t r, const Tensor& x, const nn::PoolOptions& o) {
  return r == 1 ? nn::avg_pool1d(x, o) : r == 2 ? nn::avg_pool2d(x, o) : nn::avg_pool3d(x, o);
}

const std::vector<PoolCase> kMaxCases = {
    {{2, 3}, {6, 7}, {2, 2}, {2, 2}, {0, 0}, {1, 1}},
    {{2, 3}, {7, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1}},
    {{1, 2}, {7, 8}, {3, 2}, {1, 2}, {1, 1}, {1, 1}, true},
    {{1, 2}, {9, 9}, {3, 3}, {2, 3}, {1, 0}, {2, 1}},
    {{1, 2}, {8, 9}, {2, 3}, {3, 2}, {1, 1}, {1, 2}, true},
    {{2}, {5, 5}, {3, 3}, {3, 3}, {1, 1}, {1, 1}, true},  // no batch axis
    {{2, 2}, {11}, {3}, {2}, {1}, {1}},
    {{1, 3}, {10}, {4}, {3}, {2}, {1}, true},
    {{1, 2}, {4, 5, 6}, {2, 2, 3}, {2, 1, 2}, {1, 0, 1}, {1, 2, 1}},
    {{1, 1}, {5, 5, 5}, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {1, 1, 1}, true},
    // kernel < stride (disjoint windows with gaps), and more than 16 taps (the reduction path,
    // Note [Pooling tap by tap]): 5x5 overlapping, 3x3x3, 2x9 disjoint.
    {{1, 2}, {8, 9}, {2, 2}, {3, 4}, {1, 1}, {1, 1}, true},
    {{2, 2}, {9, 10}, {5, 5}, {2, 3}, {2, 1}, {1, 1}, true},
    {{1, 2}, {5, 6, 6}, {3, 3, 3}, {1, 2, 2}, {1, 1, 0}, {1, 1, 2}},
    {{1, 3}, {4, 18}, {2, 9}, {2, 9}, {0, 0}, {1, 1}},
    {{2, 3}, {11}, {2}, {3}, {1}, {1}, true},  // 1-D disjoint with a gap
};

const std::vector<PoolCase> kAvgCases = {
    {{2, 3}, {6, 7}, {2, 2}, {2, 2}, {0, 0}, {1, 1}},
    {{2, 3}, {7, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1}},
    {{2, 3}, {7, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false, false},
    {{1, 2}, {7, 8}, {3, 2}, {2, 2}, {1, 1}, {1, 1}, true},
    {{1, 2}, {7, 8}, {3, 2}, {2, 2}, {1, 1}, {1, 1}, true, false},
    {{1, 2}, {6, 6}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false, true, 5},
    {{2, 2}, {11}, {3}, {2}, {1}, {1}, true, false},
    {{1, 2}, {4, 5, 6}, {2, 2, 3}, {2, 1, 2}, {1, 0, 1}, {1, 1, 1}, true},
    {{1, 2}, {9, 10}, {5, 5}, {2, 3}, {2, 1}, {1, 1}, true, false},  // > 16 taps: the reduction
    {{2, 2}, {8, 9}, {2, 2}, {3, 4}, {1, 1}, {1, 1}, true},          // kernel < stride
};

}  // namespace

BOOST_AUTO_TEST_CASE(max_pool_matches_naive_loops) {
  uint64_t seed = 10;
  for (const PoolCase& k : kMaxCases)
    guarded(describe(k), [&] {
      conv_ref::Pool p{k.in, k.kernel, k.stride, k.pad, k.dilation, k.ceil_mode};
      Tensor x = Tensor::randn(cat(k.lead, k.in), seed++, ravel::DType::F64);
      auto want = conv_ref::max_pool(p, conv_ref::product(k.lead), x.to_vector<double>(), nullptr);
      Tensor y = max_pool(k.in.size(), x, options_of(k));
      BOOST_TEST(y.shape() == cat(k.lead, p.out()));
      BOOST_TEST(y.to_vector<double>() == want, boost::test_tools::per_element());
    });
}

BOOST_AUTO_TEST_CASE(avg_pool_matches_naive_loops) {
  uint64_t seed = 30;
  for (const PoolCase& k : kAvgCases)
    guarded(describe(k), [&] {
      conv_ref::Pool p{k.in, k.kernel, k.stride, k.pad, k.dilation, k.ceil_mode};
      Tensor x = Tensor::randn(cat(k.lead, k.in), seed++, ravel::DType::F64);
      auto want = conv_ref::avg_pool(p, conv_ref::product(k.lead), x.to_vector<double>(), k.count_include_pad, k.divisor);
      Tensor y = avg_pool(k.in.size(), x, options_of(k));
      BOOST_TEST(y.shape() == cat(k.lead, p.out()));
      auto got = y.to_vector<double>();
      BOOST_REQUIRE_EQUAL(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) BOOST_TEST(std::fabs(got[i] - want[i]) < 1e-12, "at " << i);
    });
}

// Max pooling's gradient goes, whole, to the first maximum of each window in scan order (PyTorch's
// CPU kernels), including on ties and across overlapping windows (a value that is the maximum of
// two windows gets both gradients).
BOOST_AUTO_TEST_CASE(max_pool_gradient_routes_to_first_argmax) {
  uint64_t seed = 50;
  for (const PoolCase& k : kMaxCases)
    guarded(describe(k), [&] {
      conv_ref::Pool p{k.in, k.kernel, k.stride, k.pad, k.dilation, k.ceil_mode};
      // Few distinct values, so that windows hold ties.
      Tensor x = (Tensor::rand(cat(k.lead, k.in), seed++, ravel::DType::F64) * 3.0).trunc();
      std::vector<int64_t> arg;
      conv_ref::max_pool(p, conv_ref::product(k.lead), x.to_vector<double>(), &arg);
      Tensor y = max_pool(k.in.size(), x, options_of(k));
      Tensor cot = Tensor::randn(y.shape(), seed++, ravel::DType::F64);
      auto g = ravel::gradients((y * cot).sum(), {x})[0].to_vector<double>();
      std::vector<double> want(g.size(), 0.0);
      auto cv = cot.to_vector<double>();
      for (size_t i = 0; i < arg.size(); ++i) want[arg[i]] += cv[i];
      for (size_t i = 0; i < g.size(); ++i) BOOST_TEST(std::fabs(g[i] - want[i]) < 1e-12, "at " << i);
    });
}

namespace {

// PyTorch's adaptive windows: [floor(j * in / out), ceil((j + 1) * in / out)).
std::pair<int64_t, int64_t> cell(int64_t j, int64_t in, int64_t out) {
  return {j * in / out, ((j + 1) * in + out - 1) / out};
}

}  // namespace

BOOST_AUTO_TEST_CASE(adaptive_pooling_matches_naive_loops) {
  struct Case {
    Vec shape, out;
  };
  // 2-D: divisible (an ordinary pooling), not divisible (overlapping cells), global, out > in.
  const std::vector<Case> cases = {{{2, 3, 6, 8}, {3, 4}}, {{2, 3, 7, 5}, {3, 2}}, {{1, 2, 5, 5}, {1, 1}},
                                   {{1, 2, 3, 4}, {5, 6}}, {{2, 7, 9}, {4, 2}},      {{2, 3, 10}, {4}},
                                   {{3, 7}, {7}},          {{2, 2, 9}, {1}}};
  uint64_t seed = 70;
  for (const Case& c : cases) {
    std::ostringstream ctx;
    ctx << "adaptive " << ravel::shape_str(c.shape) << " -> " << ravel::shape_str(c.out);
    guarded(ctx.str(), [&] {
      const size_t k = c.out.size();
      // Ties on purpose (small integers), for the gradient's routing.
      Tensor x = (Tensor::rand(c.shape, seed++, ravel::DType::F64) * 4.0).trunc();
      auto xv = x.to_vector<double>();
      Tensor ya = k == 1 ? nn::adaptive_avg_pool1d(x, c.out) : nn::adaptive_avg_pool2d(x, c.out);
      Tensor ym = k == 1 ? nn::adaptive_max_pool1d(x, c.out) : nn::adaptive_max_pool2d(x, c.out);
      Vec lead(c.shape.begin(), c.shape.end() - static_cast<int64_t>(k)), in(c.shape.end() - static_cast<int64_t>(k), c.shape.end());
      BOOST_TEST(ya.shape() == cat(lead, c.out));
      BOOST_TEST(ym.shape() == cat(lead, c.out));
      Tensor cot = Tensor::randn(ym.shape(), seed++, ravel::DType::F64);
      auto gm = ravel::gradients((ym * cot).sum(), {x})[0].to_vector<double>();
      auto ga = ravel::gradients((ya * cot).sum(), {x})[0].to_vector<double>();
      auto av = ya.to_vector<double>(), mv = ym.to_vector<double>(), cv = cot.to_vector<double>();
      std::vector<double> want_gm(xv.size(), 0.0), want_ga(xv.size(), 0.0);
      const int64_t planes = conv_ref::product(lead), pi = conv_ref::product(in), po = conv_ref::product(c.out);
      for (int64_t p = 0; p < planes; ++p)
        for (int64_t q = 0; q < po; ++q) {
          Vec oi = conv_ref::unflatten(q, c.out);
          double sum = 0, best = -INFINITY;
          int64_t count = 0, at = -1;
          std::vector<int64_t> members;
          for (int64_t f = 0; f < pi; ++f) {  // row-major: the scan order
            Vec ii = conv_ref::unflatten(f, in);
            bool inside = true;
            for (size_t d = 0; d < k; ++d) {
              auto [lo, hi] = cell(oi[d], in[d], c.out[d]);
              inside &= ii[d] >= lo && ii[d] < hi;
            }
            if (!inside) continue;
            const double v = xv[p * pi + f];
            sum += v, ++count, members.push_back(p * pi + f);
            if (at < 0 || v > best) best = v, at = p * pi + f;
          }
          BOOST_TEST(std::fabs(av[p * po + q] - sum / double(count)) < 1e-12);
          BOOST_TEST(mv[p * po + q] == best);
          want_gm[at] += cv[p * po + q];
          for (int64_t m : members) want_ga[m] += cv[p * po + q] / double(count);
        }
      for (size_t i = 0; i < xv.size(); ++i) {
        BOOST_TEST(std::fabs(gm[i] - want_gm[i]) < 1e-12, "max grad at " << i);
        BOOST_TEST(std::fabs(ga[i] - want_ga[i]) < 1e-12, "avg grad at " << i);
      }
    });
  }
}

// Average pooling's gradient (through the window view's rule) against finite differences, and
// max pooling's second order (zero through x, the same routing for the cotangent).
BOOST_AUTO_TEST_CASE(pool_gradients_match_finite_differences) {
  uint64_t seed = 90;
  for (const PoolCase& k : kAvgCases)
    guarded(describe(k), [&] {
      Tensor x = Tensor::randn(cat(k.lead, k.in), seed++, ravel::DType::F64);
      Tensor y = avg_pool(k.in.size(), x, options_of(k));
      Tensor cot = Tensor::randn(y.shape(), seed++, ravel::DType::F64);
      auto f = [&](const Tensor& t) { return (avg_pool(k.in.size(), t, options_of(k)) * cot).sum(); };
      auto g = ravel::gradients(f(x), {x})[0].to_vector<double>();
      auto base = x.to_vector<double>();
      for (size_t s = 0; s < 6; ++s) {
        size_t i = (s * 7919 + seed) % base.size();
        auto at = [&](double d) {
          auto v = base;
          v[i] += d;
          return f(Tensor::from_vector(v, x.shape())).item<double>();
        };
        double fd = (at(1e-6) - at(-1e-6)) / 2e-6;
        BOOST_TEST(std::fabs(fd - g[i]) < 1e-7, "at " << i << ": " << g[i] << " vs " << fd);
      }
    });
  nn::PoolOptions o;
  o.kernel = {3};
  o.stride = {2};
  o.padding = {1};
  Tensor x = Tensor::randn({1, 2, 7, 7}, 95, ravel::DType::F64), v = Tensor::randn({1, 2, 7, 7}, 96, ravel::DType::F64);
  Tensor cot = Tensor::randn({1, 2, 4, 4}, 97, ravel::DType::F64);
  Tensor gx = ravel::gradients((nn::max_pool2d(x, o).square() * cot).sum(), {x})[0];
  auto second = ravel::gradients((gx * v).sum(), {x})[0].to_vector<double>();
  // d/dx <d/dx sum(cot * maxpool(x)^2), v> = 2 sum over windows cot v[argmax] at the argmax.
  std::vector<int64_t> arg;
  conv_ref::Pool p{{7, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1}};
  conv_ref::max_pool(p, 2, x.to_vector<double>(), &arg);
  std::vector<double> want(98, 0.0);
  auto cv = cot.to_vector<double>(), vv = v.to_vector<double>();
  for (size_t i = 0; i < arg.size(); ++i) want[arg[i]] += 2 * cv[i] * vv[arg[i]];
  for (size_t i = 0; i < want.size(); ++i) BOOST_TEST(std::fabs(second[i] - want[i]) < 1e-12, "at " << i);
}

// NaN wins a window and takes its gradient (the last NaN, PyTorch's `val > max || isnan(val)`);
// a window of -inf routes to its first element inside the input, never to the padding.
BOOST_AUTO_TEST_CASE(max_pool_nan_and_infinity) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  nn::PoolOptions o;
  o.kernel = {4};
  Tensor x = Tensor::from_vector<double>({1, nan, 5, nan, 2, 3, 1, 0}, {1, 8});
  auto y = nn::max_pool1d(x, o).to_vector<double>();
  BOOST_TEST(std::isnan(y[0]));
  BOOST_TEST(y[1] == 3.0);
  auto g = ravel::gradients(nn::max_pool1d(x, o).sum(), {x})[0].to_vector<double>();
  BOOST_TEST(g == (std::vector<double>{0, 0, 0, 1, 0, 1, 0, 0}), boost::test_tools::per_element());
  nn::PoolOptions padded;
  padded.kernel = {3};
  padded.padding = {1};
  padded.stride = {3};
  Tensor m = Tensor::from_vector<double>({-inf, -inf, -inf, -inf}, {1, 4});
  auto gm = ravel::gradients(nn::max_pool1d(m, padded).sum(), {m})[0].to_vector<double>();
  BOOST_TEST(gm == (std::vector<double>{1, 0, 1, 0}), boost::test_tools::per_element());
}

// The unrolled tap choice (Note [Choosing the tap in two folds]) in f32 and f64, on values with
// many ties (0, 1, 2), NaN sprinkled in (some windows with two or more, so "the last NaN"
// matters) and -inf: disjoint 2x2 windows (the routing in the input's layout), overlapping
// padded 3x3/2 windows, ceil_mode with a cut last window, and a 1-D and a 3-D case, against
// the naive loop with PyTorch's rule; the gradient is cot routed to the chosen element.
BOOST_AUTO_TEST_CASE(max_pool_ties_and_nan_choose_as_pytorch) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<PoolCase> cases = {
      {{2, 3}, {8, 10}, {2, 2}, {2, 2}, {0, 0}, {1, 1}},
      {{1, 2}, {9, 8}, {3, 3}, {2, 2}, {1, 1}, {1, 1}},
      {{1, 2}, {7, 9}, {2, 3}, {2, 2}, {1, 0}, {1, 1}, true},
      {{2, 2}, {13}, {4}, {3}, {2}, {1}, true},
      {{1, 1}, {4, 6, 5}, {2, 2, 2}, {2, 2, 2}, {0, 0, 1}, {1, 1, 1}},
  };
  uint64_t seed = 700;
  for (ravel::DType dt : {ravel::DType::F32, ravel::DType::F64})
    for (const PoolCase& k : cases)
      guarded(describe(k) + (dt == ravel::DType::F32 ? " f32" : " f64"), [&] {
        conv_ref::Pool p{k.in, k.kernel, k.stride, k.pad, k.dilation, k.ceil_mode};
        auto v = (Tensor::rand(cat(k.lead, k.in), seed++, ravel::DType::F64) * 3.0).trunc().to_vector<double>();
        for (size_t i = 0; i < v.size(); ++i) {
          if ((i * 2654435761u) % 7 == 0) v[i] = nan;
          else if ((i * 40503u) % 11 == 0) v[i] = -inf;
        }
        std::vector<int64_t> arg;
        auto want_y = conv_ref::max_pool(p, conv_ref::product(k.lead), v, &arg);
        Tensor x = Tensor::from_vector(v, cat(k.lead, k.in)).cast(dt);
        Tensor y = max_pool(k.in.size(), x, options_of(k));
        auto got_y = y.to_vector<double>();
        BOOST_TEST(got_y.size() == want_y.size());
        for (size_t i = 0; i < got_y.size(); ++i)
          BOOST_TEST((std::isnan(want_y[i]) ? std::isnan(got_y[i]) : got_y[i] == want_y[i]), "y at " << i);
        Tensor cot = (Tensor::rand(y.shape(), seed++, ravel::DType::F64) * 8.0).trunc().cast(dt);
        auto g = ravel::gradients((y * cot).sum(), {x})[0].to_vector<double>();
        std::vector<double> want(g.size(), 0.0);
        auto cv = cot.to_vector<double>();
        for (size_t i = 0; i < arg.size(); ++i) want[arg[i]] += cv[i];
        for (size_t i = 0; i < g.size(); ++i) BOOST_TEST(g[i] == want[i], "grad at " << i);
      });
}

// Max pooling's gradient against central finite differences where the maximum is unique (the
// choice is then locally constant), disjoint and overlapping padded windows, f64.
BOOST_AUTO_TEST_CASE(max_pool_gradient_matches_finite_differences) {
  uint64_t seed = 800;
  for (const PoolCase& k : {PoolCase{{1, 2}, {6, 8}, {2, 2}, {2, 2}, {0, 0}, {1, 1}},
                            PoolCase{{1, 2}, {7, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true}})
    guarded(describe(k), [&] {
      Tensor x = Tensor::randn(cat(k.lead, k.in), seed++, ravel::DType::F64);
      Tensor cot = Tensor::randn(max_pool(k.in.size(), x, options_of(k)).shape(), seed++, ravel::DType::F64);
      auto f = [&](const Tensor& t) { return (max_pool(k.in.size(), t, options_of(k)) * cot).sum(); };
      auto g = ravel::gradients(f(x), {x})[0].to_vector<double>();
      auto base = x.to_vector<double>();
      for (size_t i = 0; i < base.size(); i += 3) {
        auto at = [&](double d) {
          auto v = base;
          v[i] += d;
          return f(Tensor::from_vector(v, x.shape())).item<double>();
        };
        const double fd = (at(1e-6) - at(-1e-6)) / 2e-6;
        BOOST_TEST(std::fabs(fd - g[i]) < 1e-6, "at " << i << ": " << g[i] << " vs " << fd);
      }
    });
}

BOOST_AUTO_TEST_CASE(pool_errors_name_the_values) {
  Tensor x = Tensor::zeros({2, 3, 5, 5});
  auto msg = [](auto f) {
    try {
      f();
    } catch (const ravel::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  nn::PoolOptions none;
  BOOST_CHECK_THROW(nn::max_pool2d(x, none), ravel::ValueError);  // no kernel
  nn::PoolOptions big;
  big.kernel = {6};
  BOOST_CHECK_THROW(nn::max_pool2d(x, big), ravel::ShapeError);  // kernel > input
  BOOST_TEST(msg([&] { nn::max_pool2d(x, big); }).find("[2, 3, 5, 5]") != std::string::npos);
  nn::PoolOptions pad;
  pad.kernel = {2};
  pad.padding = {2};
  BOOST_CHECK_THROW(nn::avg_pool2d(x, pad), ravel::ValueError);  // padding > kernel / 2
  BOOST_TEST(msg([&] { nn::avg_pool2d(x, pad); }).find("at most half") != std::string::npos);
  nn::PoolOptions neg;
  neg.kernel = {2};
  neg.padding = {-1};
  BOOST_CHECK_THROW(nn::max_pool2d(x, neg), ravel::ValueError);
  nn::PoolOptions dil;
  dil.kernel = {2};
  dil.dilation = {2};
  BOOST_CHECK_THROW(nn::avg_pool2d(x, dil), ravel::ValueError);  // avg has no dilation
  nn::PoolOptions ok;
  ok.kernel = {2};
  BOOST_CHECK_THROW(nn::max_pool2d(Tensor::zeros({5}), ok), ravel::ShapeError);  // rank 1
  BOOST_CHECK_THROW(nn::max_pool1d(x, ok), ravel::ShapeError);                   // rank 4 for 1-D
  BOOST_CHECK_THROW(nn::max_pool2d(Tensor::zeros({1, 2, 4, 4}, ravel::DType::I32), ok), ravel::DTypeError);
  nn::PoolOptions zero;
  zero.kernel = {2};
  zero.divisor_override = 0;
  BOOST_CHECK_THROW(nn::avg_pool2d(x, zero), ravel::ValueError);
  BOOST_CHECK_THROW(nn::adaptive_avg_pool2d(x, {0, 2}), ravel::ValueError);
  BOOST_CHECK_THROW(nn::adaptive_max_pool2d(x, {1, 2, 3}), ravel::ValueError);
}
