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
