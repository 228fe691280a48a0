// nn::cross_entropy's forward as one row chain (Note [Cross-entropy through the target's logit]
// in core/src/nn/modules.cpp): how many kernels the per-row loss takes, and its values, gradients
// and second derivatives against double loops written here (log-sum-exp with the max
// subtracted, softmax - one_hot, and the Hessian diag(p) - p p^T), at odd class counts, one
// class, no rows, logits of +-1000, ignored targets and every reduction.
//
// ctest runs this as is (tbb_cpu chains SUM and LOGSUMEXP: one kernel for the rows), as
// test_cross_entropy_chain_epilogue_only (RAVEL_TBB_NO_ROW_CHAIN=1: the select and the
// log-sum-exp as two reductions) and as test_cross_entropy_chain_unfused (no row epilogues
// either). The values must not change.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "ravel/ravel.hpp"

#include "policy_scope.hpp"
#include "test_support.hpp"

using ravel::DType;
using ravel::FusionPolicy;
using ravel::Tensor;
namespace nn = ravel::nn;

namespace {

bool device_chains() {
  const char* e = std::getenv("RAVEL_TBB_NO_ROW_CHAIN");
  return !(e && *e && *e != '0');
}

// -log softmax(x[r])[t[r]] in double (0 where t[r] == ignore).
std::vector<double> loss_loop(const std::vector<double>& x, const std::vector<int64_t>& t, int64_t rows, int64_t C,
                              int64_t ignore) {
  std::vector<double> out(size_t(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    if (t[size_t(r)] == ignore) continue;
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < C; ++c) m = std::max(m, x[size_t(r * C + c)]);
    for (int64_t c = 0; c < C; ++c) s += std::exp(x[size_t(r * C + c)] - m);
    out[size_t(r)] = std::log(s) + m - x[size_t(r * C + t[size_t(r)])];
  }
  return out;
}

// d(sum_r w[r] loss[r]) / dx = w[r] (softmax(x[r]) - onehot(t[r])), 0 on ignored rows.
std::vector<double> grad_loop(const std::vector<double>& x, const std::vector<int64_t>& t, const std::vector<double>& w,
                              int64_t rows, int64_t C, int64_t ignore) {
  std::vector<double> g(x.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    if (t[size_t(r)] == ignore) continue;
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < C; ++c) m = std::max(m, x[size_t(r * C + c)]);
    for (int64_t c = 0; c < C; ++c) s += std::exp(x[size_t(r * C + c)] - m);
    for (int64_t c = 0; c < C; ++c)
      g[size_t(r * C + c)] = w[size_t(r)] * (std::exp(x[size_t(r * C + c)] - m) / s - (c == t[size_t(r)] ? 1 : 0));
  }
  return g;
}

std::vector<int64_t> targets_for(int64_t rows, int64_t C, int64_t ignore_every, int64_t ignore) {
  std::vector<int64_t> t(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) t[size_t(r)] = (ignore_every && r % ignore_every == 1) ? ignore : (r * 37 + 5) % C;
  return t;
}

}  // namespace

BOOST_AUTO_TEST_CASE(cross_entropy_forward_is_one_kernel_with_chains) {
  // The plan, not a timing: the per-row loss (Reduction::None) of long rows is one chain kernel
  // (stages: the target's logit selected and summed, then LOGSUMEXP of x - x_t) and the ignore
  // mask's where, beside the i64 targets' cast to i32; without chains the select and the
  // log-sum-exp are two reductions.
  const int64_t rows = 16, C = 301;
  const auto xv = seeded_values(size_t(rows * C), 21);
  Tensor x = Tensor::from_vector(xv, {rows, C}).cast(DType::F32);
  Tensor t = Tensor::from_vector(targets_for(rows, C, 0, -100), {rows});
  ravel::realize({x, t});
  Tensor per = nn::cross_entropy(x, t, nn::Reduction::None, -100000);
  per.realize();
  const int64_t k = ravel::last_realization_stats().kernels();
  if (device_chains()) BOOST_TEST(k <= 3);  // the cast, the chain, and the where over [rows]
  else BOOST_TEST(k >= 4);
  check_values(per.to_vector<double>(), loss_loop(xv, targets_for(rows, C, 0, -100), rows, C, -100000), 2e-6, "loss");
}

BOOST_AUTO_TEST_CASE(cross_entropy_values_and_gradients_against_loops) {
  struct Case {
    int64_t rows, C;
    double lo, hi;
    int64_t ignore_every;
  };
  const Case cases[] = {{37, 1001, -3, 4, 0}, {5, 1, -2, 2, 0},      {0, 7, -1, 1, 0},
                        {9, 33, -1000, 1000, 0}, {23, 257, -5, 5, 3}, {300, 64, -2, 3, 4}};
  const int64_t ignore = -100;
  for (const Case& cs : cases)
    for (FusionPolicy p : {FusionPolicy::Full, FusionPolicy::Reduce}) {
      BOOST_TEST_CONTEXT(cs.rows << "x" << cs.C << " [" << cs.lo << ", " << cs.hi << ") ignore every "
                                 << cs.ignore_every << " policy " << ravel::fusion_policy_name(p)) {
        PolicyScope scope(p);
        const auto xv = seeded_values(size_t(cs.rows * cs.C), 31 + unsigned(cs.C), cs.lo, cs.hi);
        const auto tv = targets_for(cs.rows, cs.C, cs.ignore_every, ignore);
        const std::vector<double> want = loss_loop(xv, tv, cs.rows, cs.C, ignore);
        int64_t kept = 0;
        double total = 0;
        for (int64_t r = 0; r < cs.rows; ++r)
          if (tv[size_t(r)] != ignore) ++kept, total += want[size_t(r)];
        Tensor t = Tensor::from_vector(tv, {cs.rows});
        // f32 logits: the loss is rounded where it is formed (tolerance relative to the logits'
        // size, as the f32 max-shift rounds x - m).
        const double tol = 4e-6 * std::max(1.0, std::abs(cs.lo) + std::abs(cs.hi));
        Tensor x = Tensor::from_vector(xv, {cs.rows, cs.C}).cast(DType::F32);
        x.requires_grad_();
        check_values(nn::cross_entropy(x, t, nn::Reduction::None, ignore).to_vector<double>(), want, tol, "none");
        check_values(nn::cross_entropy(x, t, nn::Reduction::Sum, ignore).to_vector<double>(), {total}, tol * cs.rows, "sum");
        if (kept > 0) {
          check_values(nn::cross_entropy(x, t, nn::Reduction::Mean, ignore).to_vector<double>(), {total / double(kept)}, tol,
                "mean");
          // The gradient of the mean, against softmax - one_hot over the kept rows.
          nn::cross_entropy(x, t, nn::Reduction::Mean, ignore).backward();
          check_values(x.grad().to_vector<double>(),
                grad_loop(xv, tv, std::vector<double>(size_t(cs.rows), 1.0 / double(kept)), cs.rows, cs.C, ignore),
                2e-6, "d mean / dx");
        }
        if (cs.ignore_every == 0 && cs.rows > 0) {
          // The two-argument form (mean over every row), its value and gradient, in f64 logits too.
          Tensor x64 = Tensor::from_vector(xv, {cs.rows, cs.C});
          x64.requires_grad_();
          Tensor l = nn::cross_entropy(x64, t);
          check_values(l.to_vector<double>(), {total / double(cs.rows)}, 1e-12, "f64 mean");
          l.backward();
          check_values(x64.grad().to_vector<double>(),
                grad_loop(xv, tv, std::vector<double>(size_t(cs.rows), 1.0 / double(cs.rows)), cs.rows, cs.C, ignore),
                1e-12, "f64 d mean / dx");
        }
      }
    }
}

BOOST_AUTO_TEST_CASE(cross_entropy_rejects_bad_targets) {
  // Out-of-range targets stay a typed error on the chain path.
  Tensor x = Tensor::from_vector(seeded_values(12, 5), {3, 4}).cast(DType::F32);
  BOOST_CHECK_THROW(nn::cross_entropy(x, Tensor::from_vector(std::vector<int64_t>{0, 4, 1}, {3})).realize(),
                    ravel::Error);
  BOOST_CHECK_THROW(nn::cross_entropy(x, Tensor::from_vector(std::vector<int64_t>{0, -1, 1}, {3})).realize(),
                    ravel::Error);
}

BOOST_AUTO_TEST_CASE(cross_entropy_second_derivative_against_the_closed_form) {
  // The custom rule is built from tensor ops, so it differentiates again: the Hessian of the mean
  // loss times v is, row by row, (p * v - p (p . v)) / N with p = softmax(x) (the one-hot is
  // constant). f64 logits, one row at +-1000 (the rule's softmax shifts by the row max).
  for (const int64_t C : {7, 300}) {  // the short rows' graph and the long rows' custom rule
  BOOST_TEST_CONTEXT("C = " << C) {
  const int64_t rows = 5;
  auto xv = seeded_values(size_t(rows * C), 41, -3, 3);
  for (int64_t c = 0; c < C; ++c) xv[size_t(2 * C + c)] = (c % 2 ? 1000.0 : -1000.0) + 0.25 * double(c);
  const auto vv = seeded_values(size_t(rows * C), 42, -1, 1);
  const std::vector<int64_t> tv = {0, C - 1, 3, 1, 5};
  Tensor x = Tensor::from_vector(xv, {rows, C});
  Tensor v = Tensor::from_vector(vv, {rows, C});
  Tensor t = Tensor::from_vector(tv, {rows});
  Tensor g = ravel::gradients(nn::cross_entropy(x, t), {x})[0];
  const std::vector<double> hv = ravel::gradients((g * v).sum(), {x})[0].to_vector<double>();
  std::vector<double> want(size_t(rows * C));
  for (int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0, pv = 0;
    for (int64_t c = 0; c < C; ++c) m = std::max(m, xv[size_t(r * C + c)]);
    for (int64_t c = 0; c < C; ++c) s += std::exp(xv[size_t(r * C + c)] - m);
    for (int64_t c = 0; c < C; ++c) pv += std::exp(xv[size_t(r * C + c)] - m) / s * vv[size_t(r * C + c)];
    for (int64_t c = 0; c < C; ++c) {
      const double p = std::exp(xv[size_t(r * C + c)] - m) / s;
      want[size_t(r * C + c)] = (p * vv[size_t(r * C + c)] - p * pv) / double(rows);
    }
  }
  check_values(hv, want, 1e-12, "H v");
  }
  }
}
