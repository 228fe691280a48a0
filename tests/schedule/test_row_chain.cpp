// Chains of row reductions built by the planner (ABI 1.11; Note [Row chains in the planner] in
// core/src/schedule/row_chain.cpp): how many kernels layer norm, RMS norm and the variance take
// under each fusion policy, and their values (forward and gradients) against double loops and
// central finite differences of those loops, written here.
//
// ctest runs this three times: as is (tbb_cpu states reduce_chain_ops and reduce_epilogue_ops),
// as test_row_chain_epilogue_only (RAVEL_TBB_NO_ROW_CHAIN=1: only the 1.10 form, one reduction
// per kernel) and as test_row_chain_unfused (both hidden: today's plan of one kernel per
// reduction and per stored row value). The values must not change.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

#include "ravel/ravel.hpp"

#include "policy_scope.hpp"
#include "test_support.hpp"

using ravel::FusionPolicy;
using ravel::Tensor;
namespace nn = ravel::nn;

namespace {

bool hidden(const char* var) {
  const char* e = std::getenv(var);
  return e && *e && *e != '0';
}
bool device_chains() { return !hidden("RAVEL_TBB_NO_ROW_CHAIN"); }
bool device_epilogues() { return !hidden("RAVEL_TBB_NO_ROW_EPILOGUE"); }

// The kernel count expected in the three runs ctest makes (both forms, the 1.10 epilogue only,
// neither); -1 for chains without epilogues, which no run states (a chain with no stage is the
// 1.10 form and needs the epilogue bit, so that device gets plans in between): not checked.
int64_t expected(int64_t both, int64_t epilogue_only, int64_t neither) {
  if (device_chains()) return device_epilogues() ? both : -1;
  return device_epilogues() ? epilogue_only : neither;
}
void check_kernels(int64_t got, int64_t want) {
  if (want >= 0) BOOST_TEST(got == want);
}

int64_t kernels(const Tensor& t) {
  t.realize();
  return ravel::last_realization_stats().kernels();
}

constexpr double kEps = 1e-5;

// Layer norm of each row of x [rows, n] in double, two passes (mean, then centred squares).
std::vector<double> layer_norm_loop(const std::vector<double>& x, const std::vector<double>& w,
                                    const std::vector<double>& b, int64_t rows, int64_t n) {
  std::vector<double> y(x.size());
  for (int64_t i = 0; i < rows; ++i) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n; ++j) mean += x[i * n + j];
    mean /= double(n);
    for (int64_t j = 0; j < n; ++j) var += (x[i * n + j] - mean) * (x[i * n + j] - mean);
    const double rstd = 1 / std::sqrt(var / double(n) + kEps);
    for (int64_t j = 0; j < n; ++j) y[i * n + j] = (x[i * n + j] - mean) * rstd * w[j] + b[j];
  }
  return y;
}

// x * rsqrt(mean(x^2) + eps) * w per row, in double.
std::vector<double> rms_norm_loop(const std::vector<double>& x, const std::vector<double>& w, int64_t rows, int64_t n) {
  std::vector<double> y(x.size());
  for (int64_t i = 0; i < rows; ++i) {
    double q = 0;
    for (int64_t j = 0; j < n; ++j) q += x[i * n + j] * x[i * n + j];
    const double inv = 1 / std::sqrt(q / double(n) + kEps);
    for (int64_t j = 0; j < n; ++j) y[i * n + j] = x[i * n + j] * inv * w[j];
  }
  return y;
}

Tensor rms_norm(const Tensor& x, const Tensor& w) { return x * (x.square().mean(-1, true) + kEps).sqrt().recip() * w; }

void check(const std::vector<double>& got, const std::vector<double>& want, double tol, const char* what) {
  BOOST_TEST_REQUIRE(got.size() == want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i]))) && bad++ < 3)
      BOOST_ERROR(what << "[" << i << "] = " << got[i] << ", expected " << want[i]);
  BOOST_TEST(bad == 0, what);
}

}  // namespace

BOOST_AUTO_TEST_CASE(layer_norm_and_rms_norm_kernels_under_each_policy) {
  // The plan, not a timing: under `full` layer norm is one chain (a stage summing x, the
  // program summing the centred squares, the epilogue writing the row) and RMS norm one
  // reduction with its epilogue; without the chain form layer norm keeps one kernel per
  // reduction and per row value (the var's sum no longer a GEMM: Note [Row reductions are no
  // contractions]); with neither form, today's plan.
  const int64_t rows = 8, n = 64;
  const auto xv = seeded_values(size_t(rows * n), 11), wv = seeded_values(size_t(n), 12, 0.5, 1.5),
             bv = seeded_values(size_t(n), 13, -0.5, 0.5);
  const std::vector<double> want_ln = layer_norm_loop(xv, wv, bv, rows, n), want_rms = rms_norm_loop(xv, wv, rows, n);
  for (FusionPolicy p : kPolicies) {
    BOOST_TEST_CONTEXT("policy " << ravel::fusion_policy_name(p)) {
      PolicyScope scope(p);
      nn::LayerNorm ln(n, kEps);
      ln.weight.assign(Tensor::from_vector(wv, {n}).cast(ravel::DType::F32));
      ln.bias.assign(Tensor::from_vector(bv, {n}).cast(ravel::DType::F32));
      ravel::realize({ln.weight, ln.bias});
      Tensor x = Tensor::from_vector(xv, {rows, n}).cast(ravel::DType::F32);
      x.realize();
      Tensor y = ln(x);
      Tensor r = rms_norm(x, ln.weight);
      const int64_t k_ln = kernels(y), k_rms = kernels(r);
      switch (p) {
        case FusionPolicy::None: BOOST_TEST(k_ln == 14); BOOST_TEST(k_rms == 9); break;
        case FusionPolicy::Elementwise: BOOST_TEST(k_ln == 8); BOOST_TEST(k_rms == 4); break;
        case FusionPolicy::Reduce: BOOST_TEST(k_ln == 6); BOOST_TEST(k_rms == 3); break;
        case FusionPolicy::Full:
          check_kernels(k_ln, expected(1, 5, 6));
          check_kernels(k_rms, expected(1, 1, 3));
          break;
      }
      check(y.to_vector<double>(), want_ln, 2e-5, "layer norm");
      check(r.to_vector<double>(), want_rms, 2e-5, "rms norm");
    }
  }
}

BOOST_AUTO_TEST_CASE(layer_norm_values_and_gradients_against_loops_and_finite_differences) {
  // f64, so the finite differences of the double loop are accurate to ~1e-9; odd row lengths, a
  // row of one element (y = b, no gradient reaches x or w), one row, rows longer than a block.
  for (auto [rows, n] : std::vector<std::pair<int64_t, int64_t>>{{5, 1}, {1, 37}, {7, 37}, {3, 1023}, {2, 4097}}) {
    const auto xv = seeded_values(size_t(rows * n), 21, -2, 3), rv = seeded_values(size_t(rows * n), 22, -1, 1);
    const auto wv = seeded_values(size_t(n), 23, 0.5, 1.5), bv = seeded_values(size_t(n), 24, -0.5, 0.5);
    const std::vector<double> want = layer_norm_loop(xv, wv, bv, rows, n);
    // L = sum(y * r); central differences, only the perturbed element's row recomputed for x.
    auto loss_rows = [&](const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b) {
      const std::vector<double> y = layer_norm_loop(x, w, b, rows, n);
      double l = 0;
      for (size_t i = 0; i < y.size(); ++i) l += y[i] * rv[i];
      return l;
    };
    const double h = 1e-5;
    const int64_t stride = rows * n > 600 ? 97 : 1;  // a sample of the long rows' elements
    std::vector<std::pair<int64_t, double>> fd_x;
    for (int64_t i = 0; i < rows * n; i += stride) {
      const int64_t row = i / n;
      std::vector<double> xr(xv.begin() + row * n, xv.begin() + (row + 1) * n), rr(rv.begin() + row * n, rv.begin() + (row + 1) * n);
      auto row_loss = [&](double d) {
        std::vector<double> xp = xr;
        xp[i % n] += d;
        const std::vector<double> y = layer_norm_loop(xp, wv, bv, 1, n);
        double l = 0;
        for (int64_t j = 0; j < n; ++j) l += y[j] * rr[j];
        return l;
      };
      fd_x.emplace_back(i, (row_loss(h) - row_loss(-h)) / (2 * h));
    }
    std::vector<std::pair<int64_t, double>> fd_w, fd_b;
    for (int64_t j = 0; j < n; j += (n > 600 ? 89 : 1)) {
      std::vector<double> wp = wv, wm = wv, bp = bv, bm = bv;
      wp[j] += h, wm[j] -= h, bp[j] += h, bm[j] -= h;
      fd_w.emplace_back(j, (loss_rows(xv, wp, bv) - loss_rows(xv, wm, bv)) / (2 * h));
      fd_b.emplace_back(j, (loss_rows(xv, wv, bp) - loss_rows(xv, wv, bm)) / (2 * h));
    }
    for (FusionPolicy p : kPolicies) {
      BOOST_TEST_CONTEXT(rows << "x" << n << " policy " << ravel::fusion_policy_name(p)) {
        PolicyScope scope(p);
        nn::LayerNorm ln(n, kEps, ravel::DType::F64);
        ln.weight.assign(Tensor::from_vector(wv, {n}));
        ln.bias.assign(Tensor::from_vector(bv, {n}));
        Tensor x = Tensor::from_vector(xv, {rows, n});
        x.requires_grad_();
        Tensor y = ln(x);
        check(y.to_vector<double>(), want, 1e-11, "y");
        (y * Tensor::from_vector(rv, {rows, n})).sum().backward();
        const std::vector<double> gx = x.grad().to_vector<double>(), gw = ln.weight.grad().to_vector<double>(),
                                  gb = ln.bias.grad().to_vector<double>();
        int bad = 0;
        for (const auto* fd : {&fd_x, &fd_w, &fd_b})
          for (const auto& [i, d] : *fd) {
            const double got = (fd == &fd_x ? gx : fd == &fd_w ? gw : gb)[static_cast<size_t>(i)];
            if (!(std::abs(got - d) <= 1e-6 * (1 + std::abs(d))) && bad++ < 3)
              BOOST_ERROR((fd == &fd_x ? "dx" : fd == &fd_w ? "dw" : "db") << "[" << i << "] = " << got
                                                                           << ", finite difference " << d);
          }
        BOOST_TEST(bad == 0);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(special_rows) {
  // A NaN in a row makes that row NaN and leaves the others alone; a constant row is b (the
  // centred values are exactly 0); a row at +-1e4 with a spread of 1 (the mean must be
  // subtracted before squaring, as the two-pass reference does).
  PolicyScope scope(FusionPolicy::Full);
  const int64_t rows = 4, n = 33;
  std::vector<double> xv = seeded_values(size_t(rows * n), 31, -1, 1);
  xv[5] = std::numeric_limits<double>::quiet_NaN();
  for (int64_t j = 0; j < n; ++j) xv[n + j] = 2.5, xv[2 * n + j] += 1e4, xv[3 * n + j] -= 1e4;
  for (double& v : xv) v = double(float(v));  // the reference sees the f32 data
  const auto wv = seeded_values(size_t(n), 32, 0.5, 1.5), bv = seeded_values(size_t(n), 33, -0.5, 0.5);
  const std::vector<double> want = layer_norm_loop(xv, wv, bv, rows, n);
  nn::LayerNorm ln(n, kEps);
  ln.weight.assign(Tensor::from_vector(wv, {n}).cast(ravel::DType::F32));
  ln.bias.assign(Tensor::from_vector(bv, {n}).cast(ravel::DType::F32));
  Tensor x = Tensor::from_vector(xv, {rows, n}).cast(ravel::DType::F32);
  const std::vector<double> y = ln(x).to_vector<double>();
  for (int64_t j = 0; j < n; ++j) {
    BOOST_TEST(std::isnan(y[j]));
    BOOST_TEST(y[n + j] == float(bv[j]));
    // f32 sums of 33 values near 1e4 err by up to ~33 * 2^-24 * 1e4 = 2e-2 before dividing by the
    // row's spread (0.6): 1e-2 of the normalised value. E[x^2] - E[x]^2 would be off by ~10.
    BOOST_TEST(std::abs(y[2 * n + j] - want[2 * n + j]) <= 1e-2);
    BOOST_TEST(std::abs(y[3 * n + j] - want[3 * n + j]) <= 1e-2);
  }
}

BOOST_AUTO_TEST_CASE(rms_norm_and_variance_values_under_each_policy) {
  // RMS norm (one reduction, its row value folded into the epilogue) and x.var(-1) (a chain
  // with no epilogue: a stage summing x, the program summing the centred squares; the division
  // by n - 1 is its own small kernel) over odd row lengths.
  for (auto [rows, n] : std::vector<std::pair<int64_t, int64_t>>{{3, 1}, {9, 31}, {4, 1000}, {2, 5001}}) {
    const auto xv = seeded_values(size_t(rows * n), 41, -2, 3), wv = seeded_values(size_t(n), 42, 0.5, 1.5);
    const std::vector<double> want = rms_norm_loop(xv, wv, rows, n);
    std::vector<double> want_var(static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i) {
      double mean = 0, q = 0;
      for (int64_t j = 0; j < n; ++j) mean += xv[i * n + j];
      mean /= double(n);
      for (int64_t j = 0; j < n; ++j) q += (xv[i * n + j] - mean) * (xv[i * n + j] - mean);
      want_var[i] = n > 1 ? q / double(n - 1) : std::numeric_limits<double>::quiet_NaN();
    }
    for (FusionPolicy p : kPolicies) {
      BOOST_TEST_CONTEXT(rows << "x" << n << " policy " << ravel::fusion_policy_name(p)) {
        PolicyScope scope(p);
        Tensor x = Tensor::from_vector(xv, {rows, n}), w = Tensor::from_vector(wv, {n});
        ravel::realize({x, w});
        check(rms_norm(x, w).to_vector<double>(), want, 1e-12, "rms norm");
        Tensor v = x.var(-1);
        const int64_t k = kernels(v);
        if (p == FusionPolicy::Full && n > 1) check_kernels(k, expected(2, -1, -1));
        const std::vector<double> got = v.to_vector<double>();
        for (int64_t i = 0; i < rows; ++i) {
          if (n == 1) BOOST_TEST(!std::isfinite(got[i]));  // 0 / 0 (torch: nan)
          else BOOST_TEST(got[i] == want_var[i], boost::test_tools::tolerance(1e-12));
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(the_mean_needed_elsewhere_is_stored_and_loaded) {
  // Layer norm written out, with its mean also a target, or also read by another kernel: the
  // mean is stored by its own kernel (Note [Row chains in the planner]) and the chain that
  // remains (the variance's sum with the normalising write as its epilogue, 1/sqrt folded in)
  // loads it through its broadcast.
  PolicyScope scope(FusionPolicy::Full);
  const int64_t rows = 6, n = 45;
  const auto xv = seeded_values(size_t(rows * n), 51), wv = seeded_values(size_t(n), 52, 0.5, 1.5),
             bv = seeded_values(size_t(n), 53, -0.5, 0.5);
  const std::vector<double> want = layer_norm_loop(xv, wv, bv, rows, n);
  std::vector<double> want_mean(static_cast<size_t>(rows), 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < n; ++j) want_mean[i] += xv[i * n + j];
    want_mean[i] /= double(n);
  }
  Tensor x = Tensor::from_vector(xv, {rows, n}), w = Tensor::from_vector(wv, {n}), b = Tensor::from_vector(bv, {n});
  ravel::realize({x, w, b});
  auto norm = [&](const Tensor& mean) {
    Tensor c = x - mean;
    return c * (c.square().mean(-1, true) + kEps).sqrt().recip() * w + b;
  };
  {  // the mean is a target: sum, mean, and the variance's chain with the epilogue
    Tensor mean = x.mean(-1, true);
    Tensor y = norm(mean);
    ravel::realize({y, mean});
    check_kernels(ravel::last_realization_stats().kernels(), expected(3, 3, -1));
    check(y.to_vector<double>(), want, 1e-12, "y");
    check(mean.to_vector<double>(), want_mean, 1e-12, "mean");
  }
  {  // another kernel reads the mean broadcast: it stays stored, read by both
    Tensor mean = x.mean(-1, true);
    Tensor y = norm(mean), z = x * mean;
    ravel::realize({y, z});
    check_kernels(ravel::last_realization_stats().kernels(), expected(4, 4, -1));
    check(y.to_vector<double>(), want, 1e-12, "y");
    const std::vector<double> gz = z.to_vector<double>();
    std::vector<double> want_z(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) want_z[i] = xv[i] * want_mean[i / size_t(n)];
    check(gz, want_z, 1e-12, "x * mean");
  }
  {  // the whole layer norm alone: one kernel with the chain form
    Tensor y = norm(x.mean(-1, true));
    check_kernels(kernels(y), expected(1, 5, 6));
    check(y.to_vector<double>(), want, 1e-12, "y alone");
  }
}

BOOST_AUTO_TEST_CASE(a_row_value_read_across_the_rows_is_no_chain) {
  // The mean of each row read as a row vector ([rows, 1] viewed as [1, rows] over a square):
  // not the broadcast over its own rows, so it is loaded, never an ACC.
  PolicyScope scope(FusionPolicy::Full);
  const int64_t n = 16;
  const auto xv = seeded_values(size_t(n * n), 61);
  Tensor x = Tensor::from_vector(xv, {n, n});
  x.realize();
  Tensor mean = x.mean(-1, true);
  Tensor t = (x - mean.reshape({1, n})).square().sum({1}, true) / 2.0 + mean;
  const std::vector<double> got = t.to_vector<double>();
  for (int64_t i = 0; i < n; ++i) {
    double m_i = 0;
    for (int64_t j = 0; j < n; ++j) m_i += xv[i * n + j];
    m_i /= double(n);
    double s = 0;
    for (int64_t j = 0; j < n; ++j) {
      double m_j = 0;
      for (int64_t k = 0; k < n; ++k) m_j += xv[j * n + k];
      m_j /= double(n);
      s += (xv[i * n + j] - m_j) * (xv[i * n + j] - m_j);
    }
    BOOST_TEST(got[i] == s / 2 + m_i, boost::test_tools::tolerance(1e-12));
  }
}

BOOST_AUTO_TEST_CASE(layer_norm_backward_kernels) {
  // The forward and backward of nn::LayerNorm realized together (as a training step does): the
  // row values the weight's gradient needs too (the mean, 1/sqrt(var + eps), x - mean scaled)
  // are stored, and what reads only rows chains: x's gradient is one kernel.
  PolicyScope scope(FusionPolicy::Full);
  const int64_t rows = 8, n = 64;
  nn::LayerNorm ln(n, kEps);
  ravel::realize({ln.weight, ln.bias});
  Tensor r = Tensor::from_vector(seeded_values(size_t(rows * n), 71), {rows, n}).cast(ravel::DType::F32);
  Tensor x = Tensor::from_vector(seeded_values(size_t(rows * n), 72), {rows, n}).cast(ravel::DType::F32);
  ravel::realize({r, x});
  x.requires_grad_();
  ravel::reset_stats();
  (ln(x) * r).sum().backward();
  const int64_t k = ravel::cumulative_stats().kernels();
  // 16 before (sum, mean, the centred squares as a GEMM and x - mean stored for it, ...); 11
  // with row epilogues (g stored, then its row sum with g + sum / n as the epilogue); 10 with
  // chains, g inlined into that kernel, whose stage is g's own row sum (Note [Values only a
  // chain reads]). One fewer in each since the cotangent of sum(y * r) is r itself, not a
  // stored 1 * r that the weight's and the bias's gradients read (Note [Cotangents of exactly
  // one], autodiff/rules.cpp).
  check_kernels(k, expected(9, 10, 15));
  const std::vector<double> xv = seeded_values(size_t(rows * n), 72), rv = seeded_values(size_t(rows * n), 71);
  // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = r * w (w = 1 here), per row in double.
  std::vector<double> want(xv.size());
  for (int64_t i = 0; i < rows; ++i) {
    double mean = 0, var = 0, mg = 0, mgx = 0;
    for (int64_t j = 0; j < n; ++j) mean += double(float(xv[i * n + j]));
    mean /= double(n);
    for (int64_t j = 0; j < n; ++j) var += std::pow(double(float(xv[i * n + j])) - mean, 2);
    const double rstd = 1 / std::sqrt(var / double(n) + kEps);
    for (int64_t j = 0; j < n; ++j) {
      const double xh = (double(float(xv[i * n + j])) - mean) * rstd, g = double(float(rv[i * n + j]));
      mg += g / double(n), mgx += g * xh / double(n);
    }
    for (int64_t j = 0; j < n; ++j) {
      const double xh = (double(float(xv[i * n + j])) - mean) * rstd, g = double(float(rv[i * n + j]));
      want[i * n + j] = rstd * (g - mg - xh * mgx);
    }
  }
  check(x.grad().to_vector<double>(), want, 2e-5, "dx");
}

BOOST_AUTO_TEST_CASE(a_chain_captured_and_replayed) {
  // ravel::Jit records the chain's kernel (its stages' instruction lists re-aimed at every
  // launch) and replays it on new inputs: the values follow the new x.
  PolicyScope scope(FusionPolicy::Full);
  const int64_t rows = 5, n = 77;
  const auto wv = seeded_values(size_t(n), 81, 0.5, 1.5), bv = seeded_values(size_t(n), 82, -0.5, 0.5);
  nn::LayerNorm ln(n, kEps, ravel::DType::F64);
  ln.weight.assign(Tensor::from_vector(wv, {n}));
  ln.bias.assign(Tensor::from_vector(bv, {n}));
  ravel::realize({ln.weight, ln.bias});
  ravel::Jit step([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{ln(in[0])}; });
  for (unsigned seed : {83u, 84u, 85u}) {
    const auto xv = seeded_values(size_t(rows * n), seed);
    Tensor y = step({Tensor::from_vector(xv, {rows, n})})[0];
    check(y.to_vector<double>(), layer_norm_loop(xv, wv, bv, rows, n), 1e-11, "replayed layer norm");
  }
}

BOOST_AUTO_TEST_CASE(a_chain_over_every_axis_of_a_permuted_tensor) {
  // x.var() of a permuted (or flipped) 3-d tensor: one row, every axis reduced, a space that does
  // not collapse to one axis. tbb_cpu's fused chain read the stage's value (the mean) as 0 there
  // (plugins/tbb_cpu/row_chain.cpp, run_fused); the reference is the two-pass loop.
  PolicyScope scope(FusionPolicy::Full);
  const auto xv = seeded_values(60, 91, -2, 9);
  Tensor b = Tensor::from_vector(xv, {3, 4, 5});
  b.realize();
  double mean = 0, q = 0;
  for (double v : xv) mean += v / 60;
  for (double v : xv) q += (v - mean) * (v - mean);
  for (const Tensor& x : {b.permute({2, 0, 1}), b.flip({2}), b})
    BOOST_TEST(x.var().item<double>() == q / 59, boost::test_tools::tolerance(1e-12));
}
