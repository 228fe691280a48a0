// Comparisons of half values computed inside a kernel (Note [Comparisons see stored halves] in
// core/src/schedule/kernel_builder.cpp): argmax, argmin and max pooling's gradient compare a
// node with its own maximum, and the two may be computed by different kernels, one storing
// (rounding) and one recomputing. The references here are naive loops over the values the
// node holds when it is stored on its own: what a user sees, and what every kernel must compare.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <vector>

#include "ravel/ravel.hpp"

#include "policy_scope.hpp"
#include "test_support.hpp"

using ravel::DType;
using ravel::Tensor;

namespace {

constexpr DType kHalves[] = {DType::BF16, DType::F16};

// h = a @ w in `dt` (casts and the product lazy), then a few elementwise ops: a node whose
// value a fused kernel recomputes in f32 while another kernel stores it rounded.
Tensor computed_logits(DType dt, int64_t rows, int64_t cols, unsigned seed) {
  const int64_t k = 24;
  Tensor a = Tensor::from_vector(seeded_values(rows * k, seed, -1, 1), {rows, k}).cast(dt);
  Tensor w = Tensor::from_vector(seeded_values(cols * k, seed + 1, -1, 1), {cols, k}).cast(dt);
  return (a.matmul(w.transpose(0, 1)) * 0.7).exp();
}

// The first index of the maximum (or minimum) of each row of the stored values.
std::vector<int64_t> naive_arg(const std::vector<double>& v, int64_t rows, int64_t cols, bool largest) {
  std::vector<int64_t> r(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) {
    int64_t best = 0;
    for (int64_t j = 1; j < cols; ++j) {
      const double x = v[i * cols + j], b = v[i * cols + best];
      if (largest ? x > b : x < b) best = j;
    }
    r[i] = best;
  }
  return r;
}

}  // namespace

BOOST_AUTO_TEST_CASE(argmax_and_argmin_of_computed_halves_match_the_stored_values_under_every_policy) {
  const int64_t rows = 64, cols = 10;
  for (DType dt : kHalves)
    for (ravel::FusionPolicy p : kPolicies) {
      PolicyScope scope(p);
      BOOST_TEST_CONTEXT(ravel::dtype_name(dt) << ", policy " << static_cast<int>(p)) {
        const std::vector<double> stored =
            computed_logits(dt, rows, cols, 7).realize().cast(DType::F64).to_vector<double>();
        const std::vector<int64_t> amax = computed_logits(dt, rows, cols, 7).argmax(1).to_vector<int64_t>();
        const std::vector<int64_t> amin = computed_logits(dt, rows, cols, 7).argmin(1).to_vector<int64_t>();
        BOOST_TEST(amax == naive_arg(stored, rows, cols, true), boost::test_tools::per_element());
        BOOST_TEST(amin == naive_arg(stored, rows, cols, false), boost::test_tools::per_element());
      }
    }
}

BOOST_AUTO_TEST_CASE(max_pooling_routes_each_window_to_exactly_one_computed_half) {
  // y = max_pool2d(exp(0.7 * (a @ w)), 2) over [1, 1, 8, 8]; d sum(y) / d(logits) is exp' at one
  // element per window: the first maximum of the stored values in scan order.
  const int64_t side = 8;
  for (DType dt : kHalves)
    for (ravel::FusionPolicy p : kPolicies) {
      PolicyScope scope(p);
      BOOST_TEST_CONTEXT(ravel::dtype_name(dt) << ", policy " << static_cast<int>(p)) {
        Tensor a = Tensor::from_vector(seeded_values(side * 24, 11, -1, 1), {side, 24}).cast(dt);
        Tensor w = Tensor::from_vector(seeded_values(side * 24, 12, -1, 1), {side, 24}).cast(dt);
        Tensor h = a.matmul(w.transpose(0, 1));
        Tensor x = (h * 0.7).exp().reshape({1, 1, side, side});
        const std::vector<double> stored = x.realize().cast(DType::F64).to_vector<double>();
        Tensor h2 = a.matmul(w.transpose(0, 1));  // the same graph again, nothing realized
        Tensor y = ravel::nn::max_pool2d((h2 * 0.7).exp().reshape({1, 1, side, side}), {.kernel = {2}, .stride = {2}});
        const std::vector<double> g =
            ravel::gradients(y.cast(DType::F32).sum(), {h2})[0].cast(DType::F64).to_vector<double>();
        for (int64_t wi = 0; wi < side / 2; ++wi)
          for (int64_t wj = 0; wj < side / 2; ++wj) {
            int64_t best = -1, nonzero = 0, hit = -1;
            for (int64_t di = 0; di < 2; ++di)
              for (int64_t dj = 0; dj < 2; ++dj) {
                const int64_t at = (2 * wi + di) * side + 2 * wj + dj;
                if (best < 0 || stored[at] > stored[best]) best = at;
                if (g[at] != 0) ++nonzero, hit = at;
              }
            BOOST_TEST_CONTEXT("window " << wi << "," << wj) {
              BOOST_TEST(nonzero == 1);
              BOOST_TEST(hit == best);
            }
          }
      }
    }
}
