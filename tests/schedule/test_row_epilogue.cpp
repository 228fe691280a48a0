// Reductions with a row epilogue (ABI 1.10; Note [Row epilogue fusion] in
// core/src/schedule/row_epilogue.cpp): which graphs become one kernel under each fusion policy,
// which must not, and the values of every form against naive double loops computed here.
//
// ctest runs this twice: as is (tbb_cpu states reduce_epilogue_ops), and as
// test_row_epilogue_two_kernels with RAVEL_TBB_NO_ROW_EPILOGUE=1, where the device lacks the form
// and every graph must keep the two-kernel plan with the same values (softmax and log_softmax,
// the decomposition since decision 73, stay one chain: ABI 1.11, not hidden by the switch).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

#include "ravel/ravel.hpp"

#include "policy_scope.hpp"

using ravel::FusionPolicy;
using ravel::Tensor;

namespace {

bool device_fuses() {
  const char* e = std::getenv("RAVEL_TBB_NO_ROW_EPILOGUE");
  return !(e && *e && *e != '0');
}

int64_t kernels(const Tensor& t) {
  t.realize();
  return ravel::last_realization_stats().kernels();
}

std::vector<float> data(int64_t n, double scale, double phase) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(scale * std::sin(0.731 * double(i) + phase));
  return v;
}

// softmax (or log_softmax) over the last axis of rows x cols, in double, two passes.
std::vector<double> ref_rows(const std::vector<float>& x, int64_t rows, int64_t cols, bool log) {
  std::vector<double> out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < cols; ++j) m = std::max<double>(m, x[r * cols + j]);
    double s = 0;
    for (int64_t j = 0; j < cols; ++j) s += std::exp(x[r * cols + j] - m);
    for (int64_t j = 0; j < cols; ++j) {
      const double z = x[r * cols + j] - m;
      out[r * cols + j] = log ? z - std::log(s) : std::exp(z) / s;
    }
  }
  return out;
}

// f32 results: softmax w = e^d (d = x - lse, rounded to f32 before the exponential) within
// (8 + 2 |d|) 2^-24 relative, as test_online_logsumexp; log_softmax within 2^-21 of max(1, |d|).
void check(const std::vector<float>& got, const std::vector<double>& want, bool log) {
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = want[i];
    const double tol = log ? std::ldexp(1.0, -21) * std::max(1.0, std::abs(w))
                           : (8 + 2 * std::abs(std::log(w))) * std::ldexp(1.0, -24) * w + 1e-37;
    if (!(std::abs(got[i] - w) <= tol) && bad++ < 5) BOOST_ERROR("element " << i << ": " << got[i] << " vs " << w);
  }
  BOOST_TEST(bad == 0);
}
}  // namespace

BOOST_AUTO_TEST_CASE(softmax_and_log_softmax_rows_are_one_kernel_under_full) {
  // Short rows, rows of a block and more, and a few long rows (split across threads on tbb_cpu:
  // its two-pass form).
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{8, 50}, {300, 257}, {64, 4096}, {3, 70001}})
    for (auto p : kPolicies)
      for (bool log : {false, true}) {
        BOOST_TEST_CONTEXT(rows << "x" << cols << " policy " << ravel::fusion_policy_name(p) << (log ? " log_softmax" : " softmax")) {
          PolicyScope scope(p);
          const std::vector<float> xv = data(rows * cols, 9, 0.3);
          Tensor x = Tensor::from_vector(xv, {rows, cols});
          x.realize();
          Tensor y = log ? x.log_softmax(1) : x.softmax(1);
          const int64_t k = kernels(y);
          // softmax and log_softmax are the max / exp-sum decomposition (decision 73): under
          // `full` one chain of row reductions (ABI 1.11: the max a stage, the sum, the
          // normalisation its epilogue), which the two-kernel run leaves in place (it hides
          // the 1.10 row epilogues only).
          if (p == FusionPolicy::Full) BOOST_TEST(k == 1);
          // The form is `full` only. Under `reduce`, the decomposition (decision 73): the max,
          // the sum of e^(x - m), the division; log_softmax: the max, its guard against ±inf,
          // the sum, its log, the difference.
          if (p == FusionPolicy::Reduce) BOOST_TEST(k == (log ? 5 : 3));
          check(y.to_vector<float>(), ref_rows(xv, rows, cols, log), log);
        }
      }
}

BOOST_AUTO_TEST_CASE(other_axes_and_reductions) {
  PolicyScope scope(FusionPolicy::Full);
  const int64_t A = 6, B = 37, C = 5;
  const std::vector<float> xv = data(A * B * C, 4, 1.1);
  Tensor x = Tensor::from_vector(xv, {A, B, C});
  x.realize();
  // softmax over the middle axis: one chain (tbb_cpu runs it as passes inside), with or without
  // the row epilogues (decision 73).
  Tensor y = x.softmax(1);
  BOOST_TEST(kernels(y) == 1);
  std::vector<float> got = y.to_vector<float>();
  int bad = 0;
  for (int64_t a = 0; a < A; ++a)
    for (int64_t c = 0; c < C; ++c) {
      double m = -1e300, s = 0;
      for (int64_t b = 0; b < B; ++b) m = std::max<double>(m, xv[(a * B + b) * C + c]);
      for (int64_t b = 0; b < B; ++b) s += std::exp(xv[(a * B + b) * C + c] - m);
      for (int64_t b = 0; b < B; ++b) {
        const double w = std::exp(xv[(a * B + b) * C + c] - m) / s;
        bad += !(std::abs(got[(a * B + b) * C + c] - w) <= (8 + 2 * std::abs(std::log(w))) * std::ldexp(1.0, -24) * w);
      }
    }
  BOOST_TEST(bad == 0);
  // x / sum(x) over rows (a SUM with its epilogue) and x - max(x) (a MAX with its epilogue).
  const std::vector<float> pv = data(40 * 33, 1, 0.2);
  std::vector<float> pos(pv.size());
  for (size_t i = 0; i < pv.size(); ++i) pos[i] = 1.5f + pv[i];
  Tensor q = Tensor::from_vector(pos, {40, 33});
  q.realize();
  Tensor n = q / q.sum({1}, true), d = q - q.max({1}, true);
  BOOST_TEST(kernels(n) == (device_fuses() ? 1 : 2));
  BOOST_TEST(kernels(d) == (device_fuses() ? 1 : 2));
  const std::vector<float> gn = n.to_vector<float>(), gd = d.to_vector<float>();
  for (int64_t r = 0; r < 40; ++r) {
    double s = 0, m = -1e300;
    for (int64_t j = 0; j < 33; ++j) s += pos[r * 33 + j], m = std::max<double>(m, pos[r * 33 + j]);
    for (int64_t j = 0; j < 33; ++j) {
      BOOST_TEST(gn[r * 33 + j] == pos[r * 33 + j] / s, boost::test_tools::tolerance(1e-6));
      BOOST_TEST(gd[r * 33 + j] == float(pos[r * 33 + j] - m));  // exact: max is one of the values
    }
  }
}

BOOST_AUTO_TEST_CASE(special_rows) {
  // A row of -inf, one with +inf, one with NaN, one with ±1e4 (e^x overflows): the same values
  // with the row epilogue as without (the two-kernel run of this test), and the closed forms
  // (±FLT_MAX and more: test_online_logsumexp.cpp, closed_forms_at_the_ends_of_the_range).
  PolicyScope scope(FusionPolicy::Full);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> xv = {-inf, -inf, -inf, -inf, 1, inf, -3, 2, 1, 2, nan, 3, 1e4f, -1e4f, 9999.5f, 0};
  Tensor x = Tensor::from_vector(xv, {4, 4});
  x.realize();
  const std::vector<float> s = x.softmax(1).to_vector<float>();
  for (int j = 0; j < 4; ++j) BOOST_TEST(std::isnan(s[j]));  // all -inf: 0/0 (as torch)
  // +inf - +inf in the shift, so the sum and every entry are NaN (as torch; the x - lse form,
  // before decision 73, gave 0 beside the NaN)
  for (int j = 4; j < 8; ++j) BOOST_TEST(std::isnan(s[j]));
  for (int j = 8; j < 12; ++j) BOOST_TEST(std::isnan(s[j]));
  const double z = 1 + std::exp(-0.5);
  BOOST_TEST(s[12] == 1 / z, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(s[14] == std::exp(-0.5) / z, boost::test_tools::tolerance(1e-6));
  BOOST_TEST((s[13] == 0 && s[15] == 0));
}

BOOST_AUTO_TEST_CASE(not_fused_when_the_reduction_is_needed_elsewhere) {
  PolicyScope scope(FusionPolicy::Full);
  const std::vector<float> xv = data(16 * 24, 3, 0.7);
  Tensor x = Tensor::from_vector(xv, {16, 24});
  x.realize();
  {  // the reduction is a target too: it must exist in memory, so two kernels
    Tensor l = x.logsumexp({1}, true);
    Tensor y = (x - l).exp();
    ravel::realize({l, y});
    BOOST_TEST(ravel::last_realization_stats().kernels() == 2);
    const std::vector<float> gl = l.to_vector<float>(), gy = y.to_vector<float>();
    const std::vector<double> want = ref_rows(xv, 16, 24, false);
    for (size_t i = 0; i < gy.size(); ++i) BOOST_TEST(gy[i] == want[i], boost::test_tools::tolerance(1e-5));
  }
  {  // two kernels read the max broadcast: neither absorbs it
    Tensor m = x.max({1}, true);
    Tensor a = x - m, b = (x * m).exp();
    ravel::realize({a, b});
    BOOST_TEST(ravel::last_realization_stats().kernels() == 3);
  }
  {  // read along the wrong axis (a [16, 1] max read as [1, 16] across a 16x16 space): no ACC
    Tensor sq = Tensor::from_vector(data(16 * 16, 2, 0.1), {16, 16});
    sq.realize();
    Tensor m = sq.max({1}, true);
    Tensor t = sq - m.reshape({1, 16});
    BOOST_TEST(kernels(t) == 2);
    const std::vector<float> sv = sq.to_vector<float>(), tv = t.to_vector<float>();
    for (int64_t i = 0; i < 16; ++i)
      for (int64_t j = 0; j < 16; ++j) {
        float mj = -1e30f;
        for (int64_t k = 0; k < 16; ++k) mj = std::max(mj, sv[j * 16 + k]);
        BOOST_TEST(tv[i * 16 + j] == sv[i * 16 + j] - mj);
      }
  }
}
