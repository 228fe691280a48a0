// conv1d/2d/3d and conv_transpose*d against naive loops in double (conv_reference.hpp), their
// gradients against central finite differences in f64, and their errors.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <sstream>

#include "conv_reference.hpp"
#include "ravel/ravel.hpp"
#include "test_support.hpp"

using ravel::Tensor;
namespace nn = ravel::nn;

namespace {

using Pairs = std::vector<std::pair<int64_t, int64_t>>;

struct ConvCase {
  int64_t n, c, o, groups;
  conv_ref::Vec in, kernel, stride, dilation;
  Pairs pad;
  bool same = false, bias = true;
};

std::string describe(const ConvCase& k) {
  std::ostringstream s;
  s << "n" << k.n << " c" << k.c << " o" << k.o << " g" << k.groups << " in" << k.in.size() << "d";
  for (size_t i = 0; i < k.in.size(); ++i)
    s << " [in " << k.in[i] << " k " << k.kernel[i] << " s " << k.stride[i] << " d " << k.dilation[i] << " p "
      << k.pad[i].first << "," << k.pad[i].second << "]";
  if (k.same) s << " same";
  return s.str();
}

conv_ref::Vec cat(conv_ref::Vec a, const conv_ref::Vec& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Tensor call_conv(size_t rank, const Tensor& x, const Tensor& w, const std::optional<Tensor>& b,
                 const nn::ConvOptions& o) {
  if (rank == 1) return nn::conv1d(x, w, b, o);
  if (rank == 2) return nn::conv2d(x, w, b, o);
  return nn::conv3d(x, w, b, o);
}

nn::ConvOptions options_of(const ConvCase& k) {
  nn::ConvOptions o;
  o.stride = k.stride;
  o.dilation = k.dilation;
  o.groups = k.groups;
  o.same = k.same;
  bool symmetric = true;
  for (auto [b, a] : k.pad) symmetric &= a == b;
  if (k.same) {
  } else if (symmetric) {
    o.padding.clear();
    for (auto [b, a] : k.pad) o.padding.push_back(b);
  } else {
    o.padding_pairs = k.pad;
  }
  return o;
}

std::vector<ConvCase> forward_cases() {
  std::vector<ConvCase> cs = {
      // 2-D: plain, stride, padding, dilation, groups, depthwise, asymmetric, same
      {2, 3, 4, 1, {6, 7}, {3, 3}, {1, 1}, {1, 1}, {{0, 0}, {0, 0}}},
      {2, 3, 4, 1, {7, 8}, {3, 2}, {2, 3}, {1, 1}, {{1, 1}, {0, 0}}},
      {1, 2, 3, 1, {9, 9}, {3, 3}, {1, 2}, {2, 1}, {{2, 2}, {1, 1}}},
      {2, 4, 6, 2, {5, 6}, {3, 3}, {1, 1}, {1, 1}, {{1, 1}, {1, 1}}},
      {2, 4, 4, 4, {6, 6}, {3, 3}, {2, 2}, {1, 1}, {{1, 1}, {1, 1}}},         // depthwise
      {1, 3, 6, 3, {6, 5}, {2, 3}, {1, 1}, {1, 2}, {{0, 0}, {2, 2}}},         // channel multiplier 2
      {2, 2, 3, 1, {5, 6}, {3, 2}, {1, 2}, {1, 1}, {{2, 0}, {1, 3}}},         // asymmetric
      {1, 2, 2, 1, {6, 6}, {4, 4}, {2, 2}, {1, 1}, {{0, 0}, {0, 0}}},         // kernel = stride: disjoint
      {1, 1, 2, 1, {28, 28}, {5, 5}, {1, 1}, {1, 1}, {{2, 2}, {2, 2}}},
      {2, 3, 2, 1, {5, 7}, {3, 4}, {1, 1}, {1, 1}, {{1, 1}, {1, 2}}, true},   // same, even kernel
      {1, 2, 2, 1, {7, 7}, {3, 3}, {1, 1}, {2, 3}, {{2, 2}, {3, 3}}, true},   // same with dilation
      {1, 2, 3, 1, {4, 4}, {1, 1}, {1, 1}, {1, 1}, {{0, 0}, {0, 0}}, false, false},  // 1x1, no bias
      // 1-D
      {2, 3, 2, 1, {10}, {3}, {2}, {1}, {{1, 1}}},
      {1, 4, 4, 2, {9}, {2}, {1}, {3}, {{0, 2}}},
      {1, 2, 2, 1, {8}, {4}, {1}, {1}, {{1, 2}}, true},
      // 3-D
      {1, 2, 3, 1, {4, 5, 4}, {2, 3, 2}, {1, 2, 1}, {1, 1, 2}, {{1, 1}, {0, 0}, {1, 1}}},
      {2, 4, 2, 2, {3, 4, 4}, {2, 2, 3}, {1, 1, 1}, {1, 1, 1}, {{0, 1}, {1, 0}, {1, 1}}},
  };
  for (auto& k : cs)
    if (k.same)  // the reference reads the pads: PyTorch's 'same' (the odd element after)
      for (size_t i = 0; i < k.in.size(); ++i) {
        const int64_t total = k.dilation[i] * (k.kernel[i] - 1);
        k.pad[i] = {total / 2, total - total / 2};
      }
  return cs;
}

}  // namespace

BOOST_AUTO_TEST_CASE(conv_matches_naive_loops) {
  uint64_t seed = 1;
  for (const ConvCase& k : forward_cases()) {
    guarded(describe(k), [&] {
      conv_ref::Conv p{k.n, k.c, k.o, k.groups, k.in, k.kernel, k.stride, k.dilation, k.pad};
      Tensor x = Tensor::randn(cat({k.n, k.c}, k.in), seed++, ravel::DType::F64);
      Tensor w = Tensor::randn(cat({k.o, k.c / k.groups}, k.kernel), seed++, ravel::DType::F64);
      Tensor b = Tensor::randn({k.o}, seed++, ravel::DType::F64);
      auto bv = b.to_vector<double>();
      auto want = conv_ref::conv(p, x.to_vector<double>(), w.to_vector<double>(), k.bias ? &bv : nullptr);
      Tensor y = call_conv(k.in.size(), x, w, k.bias ? std::optional<Tensor>(b) : std::nullopt, options_of(k));
      BOOST_TEST(y.shape() == cat({k.n, k.o}, p.out()));
      auto got = y.to_vector<double>();
      BOOST_REQUIRE_EQUAL(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) BOOST_TEST(std::fabs(got[i] - want[i]) < 1e-9, "at " << i << ": " << got[i] << " vs " << want[i]);
      // f32 gives the same within rounding.
      auto got32 = call_conv(k.in.size(), x.cast(ravel::DType::F32), w.cast(ravel::DType::F32),
                             k.bias ? std::optional<Tensor>(b.cast(ravel::DType::F32)) : std::nullopt, options_of(k))
                       .to_vector<double>();
      for (size_t i = 0; i < got.size(); ++i) BOOST_TEST(std::fabs(got32[i] - want[i]) < 1e-4 * (1 + std::fabs(want[i])));
    });
  }
}

BOOST_AUTO_TEST_CASE(conv2d_without_batch_axis) {
  Tensor x = Tensor::randn({2, 5, 5}, 3, ravel::DType::F64), w = Tensor::randn({3, 2, 3, 3}, 4, ravel::DType::F64);
  nn::ConvOptions o;
  o.padding = {1};
  auto a = nn::conv2d(x, w, std::nullopt, o);
  BOOST_TEST(a.shape() == (ravel::Shape{3, 5, 5}));
  auto b = nn::conv2d(x.unsqueeze(0), w, std::nullopt, o).squeeze(0);
  BOOST_TEST(a.to_vector<double>() == b.to_vector<double>());
}
