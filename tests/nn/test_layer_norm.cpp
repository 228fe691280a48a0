// nn::LayerNorm forward and backward against closed forms in double written here, under every
// fusion policy (whatever plan the scheduler picks for the mean, the variance and the
// normalising write, one kernel per reduction or a chain of them, the values must not change).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <random>

#include "ravel/ravel.hpp"

#include "../schedule/policy_scope.hpp"
#include "test_support.hpp"

using ravel::Tensor;
namespace nn = ravel::nn;
namespace tt = boost::test_tools;

namespace {

// y = xhat * w + b and the gradients of sum(y * r): db = sum_rows r, dw = sum_rows r * xhat,
// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = r * w (per row).
struct Expected {
  std::vector<double> y, dx, dw, db;
};
Expected closed_form(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                     const std::vector<double>& r, int64_t rows, int64_t n, double eps) {
  Expected e{std::vector<double>(x.size()), std::vector<double>(x.size()), std::vector<double>(n, 0.0),
             std::vector<double>(n, 0.0)};
  for (int64_t i = 0; i < rows; ++i) {
    const double* xr = &x[i * n];
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n; ++j) mean += xr[j];
    mean /= double(n);
    for (int64_t j = 0; j < n; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    var /= double(n);
    const double rstd = 1 / std::sqrt(var + eps);
    double mg = 0, mgx = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double xh = (xr[j] - mean) * rstd, g = r[i * n + j] * w[j];
      e.y[i * n + j] = xh * w[j] + b[j];
      e.db[j] += r[i * n + j];
      e.dw[j] += r[i * n + j] * xh;
      mg += g, mgx += g * xh;
    }
    mg /= double(n), mgx /= double(n);
    for (int64_t j = 0; j < n; ++j) {
      const double xh = (xr[j] - mean) * rstd, g = r[i * n + j] * w[j];
      e.dx[i * n + j] = rstd * (g - mg - xh * mgx);
    }
  }
  return e;
}

void run(const ravel::Shape& shape, ravel::DType dt, double tol) {
  const int64_t n = shape.back();
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < shape.size(); ++d) rows *= shape[d];
  const auto xv = seeded_values(size_t(rows * n), 3, -2, 3), rv = seeded_values(size_t(rows * n), 4, -1, 1);
  const auto wv = seeded_values(size_t(n), 5, 0.5, 1.5), bv = seeded_values(size_t(n), 6, -0.5, 0.5);
  const Expected e = closed_form(xv, wv, bv, rv, rows, n, 1e-5);
  for (ravel::FusionPolicy policy : kPolicies) {
    BOOST_TEST_CONTEXT("policy " << int(policy)) {
      PolicyScope scope(policy);
      nn::LayerNorm ln(n, 1e-5, dt);
      ln.weight.assign(Tensor::from_vector(wv, {n}).cast(dt));
      ln.bias.assign(Tensor::from_vector(bv, {n}).cast(dt));
      Tensor x = Tensor::from_vector(xv, shape).cast(dt);
      x.requires_grad_();
      Tensor y = ln(x);
      check_values(y.to_vector<double>(), e.y, tol, "y");
      (y * Tensor::from_vector(rv, shape).cast(dt)).sum().backward();
      check_values(x.grad().to_vector<double>(), e.dx, tol, "dx");
      check_values(ln.weight.grad().to_vector<double>(), e.dw, tol, "dweight");
      check_values(ln.bias.grad().to_vector<double>(), e.db, tol, "dbias");
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(layer_norm_forward_and_backward_under_every_policy) {
  for (const ravel::Shape& shape : {ravel::Shape{7, 37}, ravel::Shape{3, 4, 130}, ravel::Shape{64, 1024}}) {
    BOOST_TEST_CONTEXT("shape " << shape.size() << "-d, last " << shape.back()) {
      run(shape, ravel::DType::F64, 1e-10);
      run(shape, ravel::DType::F32, 2e-4);
    }
  }
}
