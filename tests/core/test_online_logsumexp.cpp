// logsumexp / softmax / log_softmax through the online log-sum-exp reduction (ABI 1.4
// RVL_REDUCE_LOGSUMEXP; Note [Online logsumexp] in core/src/tensor/reduce.cpp): values along
// every axis against a two-pass reference evaluated here in double (never through Ravel), the
// kernel counts (logsumexp 1, softmax and log_softmax 2 on tbb_cpu), special values, gradients
// against central finite differences, and second derivatives against the closed form. softmax and
// log_softmax are the decomposition on every device since decision 73 (Note [Softmax never adds
// the max back]); the reduction serves logsumexp.
//
// The same executable runs a second time as core_online_logsumexp_fallback with
// RAVEL_MASK_OPS=LOGSUMEXP, which makes every device (tbb_cpu here, hip:0 on the GPU machine) count
// as lacking LOGSUMEXP: the core must then use the max / exp-sum decomposition (the kernel counts
// say which path ran) and give the same values. RAVEL_TBB_NO_LOGSUMEXP=1 (tbb_cpu's own switch)
// counts too. Under `full` (the default), a device that runs row epilogues (ABI 1.10; tbb_cpu
// unless RAVEL_TBB_NO_ROW_EPILOGUE=1) gets softmax and log_softmax as ONE kernel: the
// reduction with the normalisation as its epilogue (Note [Row epilogue fusion]); the
// core_online_logsumexp_two_kernels run checks the same values with the switch set.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "ravel/autodiff.hpp"
#include "ravel/ravel.hpp"

using ravel::DType;
using ravel::Tensor;

namespace {

bool fallback() {
  const char* e = std::getenv("RAVEL_TBB_NO_LOGSUMEXP");
  const char* m = std::getenv("RAVEL_MASK_OPS");
  return (e && *e && *e != '0') || (m && std::strstr(m, "LOGSUMEXP"));
}

// The reduction and its elementwise reader are one kernel (ABI 1.10 row epilogue).
bool row_epilogue() {
  const char* e = std::getenv("RAVEL_TBB_NO_ROW_EPILOGUE");
  return ravel::fusion_options().policy == ravel::FusionPolicy::Full && !(e && *e && *e != '0');
}
// Under `full` with tbb_cpu's chains of row reductions (ABI 1.11, Note [Row chains in the
// planner]): the decomposition's max becomes a stage of the sum's program.
bool row_chain() {
  const char* e = std::getenv("RAVEL_TBB_NO_ROW_CHAIN");
  return ravel::fusion_options().policy == ravel::FusionPolicy::Full && !(e && *e && *e != '0');
}

const std::vector<int64_t> kShape = {3, 5, 7};

// Deterministic values spread over [-scale, scale].
std::vector<double> values(int64_t n, double scale, double phase) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.731 * double(i) + phase);
  return v;
}

// Two-pass reference over one line: the maximum, then m + log sum e^(x - m).
double lse_ref(const std::vector<double>& line) {
  double m = -INFINITY;
  for (double x : line) {
    if (std::isnan(x)) return x;
    m = std::max(m, x);
  }
  if (std::isinf(m)) return m;
  double s = 0;
  for (double x : line) s += std::exp(x - m);
  return m + std::log(s);
}

// The line through flat index i along `axis` of kShape (row-major), and i's position on it.
std::vector<double> line_of(const std::vector<double>& v, int64_t i, int axis) {
  int64_t stride = 1;
  for (int d = 2; d > axis; --d) stride *= kShape[d];
  const int64_t pos = (i / stride) % kShape[axis];
  std::vector<double> line;
  for (int64_t k = 0; k < kShape[axis]; ++k) line.push_back(v[i + (k - pos) * stride]);
  return line;
}

Tensor make(const std::vector<double>& v, DType t) {
  Tensor x = Tensor::from_vector<double>(v, kShape).cast(t);
  x.realize();
  return x;
}

std::vector<double> get(const Tensor& t) { return t.cast(DType::F64).to_vector<double>(); }

// |got - want| <= rel * max(1, |want|): log-domain values are compared absolutely near 0.
void check(const std::vector<double>& got, const std::vector<double>& want, double rel, const char* what) {
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    BOOST_TEST_CONTEXT(what << " element " << i << " want " << want[i] << " got " << got[i]) {
      BOOST_TEST(std::abs(got[i] - want[i]) <= rel * std::max(1.0, std::abs(want[i])));
    }
}

int64_t kernels(const Tensor& t) {
  t.realize();
  return ravel::last_realization_stats().kernels();
}

}  // namespace

BOOST_AUTO_TEST_CASE(values_along_every_axis) {
  // scale 1000: e^x overflows f32 (and 1e4 overflows f64); the results must not.
  for (double scale : {3.0, 1000.0, 1e4})
    for (DType t : {DType::F32, DType::F64}) {
      std::vector<double> v = values(3 * 5 * 7, scale, 0.3);
      if (t == DType::F32)
        for (double& x : v) x = double(float(x));  // the reference sees exactly the f32 inputs
      Tensor x = make(v, t);
      // f32: softmax and log_softmax keep f32 rounding at |x| <= 1e4 (x - m is exact near the max);
      // logsumexp rounds its f32 result once (2 ulps, and the accumulation's few).
      // f64: x - lse has the absolute error of lse's last bit, ~|x| 2^-53.
      const double tol = t == DType::F32 ? 4 * std::ldexp(1.0, -24) : 1e-13 + 4 * scale * std::ldexp(1.0, -53);
      for (int axis = 0; axis < 3; ++axis)
        BOOST_TEST_CONTEXT("scale " << scale << " dtype " << ravel::dtype_name(t) << " axis " << axis) {
          std::vector<double> w_lse, w_sm, w_lsm;
          for (int64_t i = 0; i < int64_t(v.size()); ++i) {
            // e^(x - m) / s and (x - m) - log s: never round m + log s (at 1e4 its spacing in
            // f64, 2e-12, is larger than some log s)
            const auto line = line_of(v, i, axis);
            double m = -INFINITY, s = 0;
            for (double a : line) m = std::max(m, a);
            for (double a : line) s += std::exp(a - m);
            w_sm.push_back(std::exp(v[i] - m) / s);
            w_lsm.push_back((v[i] - m) - std::log(s));
          }
          for (int64_t i = 0; i < int64_t(v.size()); ++i) {
            // logsumexp keeps the other two axes: take the line's first element's index order
            const auto line = line_of(v, i, axis);
            w_lse.push_back(lse_ref(line));
          }
          check(get(x.logsumexp({axis}, true).expand(kShape)), w_lse, tol, "logsumexp");
          check(get(x.softmax(axis)), w_sm, tol, "softmax");
          check(get(x.log_softmax(axis)), w_lsm, tol, "log_softmax");
        }
      // every axis at once
      BOOST_TEST_CONTEXT("all axes, scale " << scale) {
        check({x.logsumexp().cast(DType::F64).item<double>()}, {lse_ref(v)}, t == DType::F32 ? 4e-7 : 1e-13,
              "logsumexp over all axes");
      }
    }
}

BOOST_AUTO_TEST_CASE(special_values) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<std::vector<double>> rows = {
      {-inf, -inf, -inf, -inf}, {-inf, 1, -inf, 2}, {1, inf, 2, 3}, {inf, -inf, 0, 0}, {1, nan, inf, -inf}, {1e4, -1e4, 9999, 0}};
  for (DType t : {DType::F32, DType::F64}) {
    std::vector<double> flat;
    for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
    Tensor x = Tensor::from_vector<double>(flat, {int64_t(rows.size()), 4}).cast(t);
    std::vector<double> got = get(x.logsumexp({1}));
    for (size_t i = 0; i < rows.size(); ++i) {
      const double want = lse_ref(rows[i]);
      BOOST_TEST_CONTEXT(ravel::dtype_name(t) << " row " << i) {
        if (std::isnan(want)) BOOST_TEST(std::isnan(got[i]));
        else if (std::isinf(want)) BOOST_TEST(got[i] == want);
        else BOOST_TEST(std::abs(got[i] - want) <= 1e-6 * std::abs(want));
      }
    }
    // an empty reduced axis: a ValueError on every device (the decomposition's max needs an
    // element; the reduction alone would give -inf, which conformance checks at the ABI)
    Tensor e = Tensor::zeros({3, 0}, t);
    BOOST_CHECK_THROW(e.logsumexp({1}), ravel::ValueError);
    BOOST_CHECK_THROW(e.softmax(1), ravel::ValueError);
    BOOST_CHECK_THROW(e.log_softmax(1), ravel::ValueError);
  }
}

// Note [Softmax never adds the max back] (core/src/tensor/reduce.cpp): closed forms at the ends of
// each dtype's range, where x - (m + log s) used to lose log s (the row [FLT_MAX, -FLT_MAX, 0,
// FLT_MAX] gave 1, 0, 0, 1), on every path this executable runs (the reduction, the
// decomposition, every fusion policy, with and without row epilogues).
BOOST_AUTO_TEST_CASE(closed_forms_at_the_ends_of_the_range) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const double l2 = std::log(2.0), l3 = std::log(3.0), l4 = std::log(4.0);
  for (DType t : {DType::F32, DType::F64}) {
    const double M = t == DType::F32 ? double(std::numeric_limits<float>::max()) : std::numeric_limits<double>::max();
    const double H = t == DType::F32 ? 1e30 : 1e300;  // huge, with -H - H still finite
    struct Row {
      std::vector<double> x, softmax, log_softmax;
      double logsumexp;
    };
    const std::vector<Row> rows = {
        {{M, -M, 0, M}, {0.5, 0, 0, 0.5}, {-l2, -inf, -M, -l2}, M},     // -M - M overflows: -inf
        {{M, M, M, M}, {0.25, 0.25, 0.25, 0.25}, {-l4, -l4, -l4, -l4}, M},
        {{-M, -M, -M, -M}, {0.25, 0.25, 0.25, 0.25}, {-l4, -l4, -l4, -l4}, -M},
        {{H, H, H, -H}, {1 / 3.0, 1 / 3.0, 1 / 3.0, 0}, {-l3, -l3, -l3, -2 * H}, H},
        {{-inf, 0, -inf, 0}, {0, 0.5, 0, 0.5}, {-inf, -l2, -inf, -l2}, l2},
        {{inf, 0, 1, 2}, {nan, nan, nan, nan}, {nan, -inf, -inf, -inf}, inf},  // inf - inf; the shift is 0
        {{nan, 0, 1, 2}, {nan, nan, nan, nan}, {nan, nan, nan, nan}, nan}};
    std::vector<double> flat;
    for (const Row& r : rows) flat.insert(flat.end(), r.x.begin(), r.x.end());
    Tensor x = Tensor::from_vector<double>(flat, {int64_t(rows.size()), 4}).cast(t);
    const std::vector<double> sm = get(x.softmax(1)), lsm = get(x.log_softmax(1)), lse = get(x.logsumexp({1}));
    const double ulp = t == DType::F32 ? std::ldexp(1.0, -23) : std::ldexp(1.0, -52);
    auto close = [&](double got, double want) {
      if (std::isnan(want)) return std::isnan(got);
      if (std::isinf(want) || want == 0) return got == want;
      return std::abs(got - want) <= 2 * ulp * std::abs(want);
    };
    for (size_t i = 0; i < rows.size(); ++i)
      BOOST_TEST_CONTEXT(ravel::dtype_name(t) << " row " << i) {
        BOOST_TEST(close(lse[i], rows[i].logsumexp), "logsumexp " << lse[i] << ", expected " << rows[i].logsumexp);
        for (size_t j = 0; j < 4; ++j) {
          BOOST_TEST(close(sm[i * 4 + j], rows[i].softmax[j]),
                     "softmax[" << j << "] " << sm[i * 4 + j] << ", expected " << rows[i].softmax[j]);
          BOOST_TEST(close(lsm[i * 4 + j], rows[i].log_softmax[j]),
                     "log_softmax[" << j << "] " << lsm[i * 4 + j] << ", expected " << rows[i].log_softmax[j]);
        }
      }
  }
}

BOOST_AUTO_TEST_CASE(kernel_counts) {
  // RAVEL_DEBUG=1 prints the same kernels; counted here through the realization statistics.
  Tensor x = (Tensor::rand({4096, 4096}, 7) * 20.0 - 10.0);
  x.realize();
  const int64_t lse = kernels(x.logsumexp({1})), sm = kernels(x.softmax(1)), lsm = kernels(x.log_softmax(1));
  const int64_t sm0 = kernels(x.softmax(0));
  // The counts hold where producers fuse into reductions (reduce, full: the default); the
  // fusion-variant runs of this test check only the values under none and elementwise.
  if (ravel::fusion_options().policy < ravel::FusionPolicy::Reduce) {
  } else {
    // logsumexp: the reduction, or the decomposition (max, then exp-sum, log, guards)
    BOOST_TEST(lse == (fallback() ? 4 : 1));
    // softmax and log_softmax are the decomposition on every device (Note [Softmax never adds
    // the max back]): one chain (the max a stage, the sum, e / sum its epilogue); without
    // chains: max, then the sum with e / sum as its epilogue; without either form, three kernels
    BOOST_TEST(sm == (row_chain() ? 1 : row_epilogue() ? 2 : 3));
    BOOST_TEST(lsm == (row_chain() ? 1 : 5));
    BOOST_TEST(sm0 == (row_chain() ? 1 : row_epilogue() ? 2 : 3));  // columns: tbb_cpu's passes inside
  }
  // and the values of one row, against the reference
  std::vector<float> row = x.shrink({{5, 6}, {0, 4096}}).to_vector<float>();
  std::vector<double> line(row.begin(), row.end());
  const double l = lse_ref(line);
  std::vector<float> s = x.softmax(1).shrink({{5, 6}, {0, 4096}}).to_vector<float>();
  // e^d in f32 has relative error ~|d| 2^-24 (d is rounded before the exponential)
  for (size_t j = 0; j < line.size(); j += 97) {
    const double want = std::exp(line[j] - l);
    BOOST_TEST(std::abs(s[j] - want) <= (8 + 2 * std::abs(line[j] - l)) * std::ldexp(1.0, -24) * want);
  }
  BOOST_TEST(std::abs(x.logsumexp({1}).shrink({{5, 6}}).item<float>() - l) <= 1e-6 * std::abs(l));
}

BOOST_AUTO_TEST_CASE(gradients_match_finite_differences) {
  // f64, central differences with step 1e-6: agreement to ~1e-8.
  std::vector<double> v = values(3 * 5 * 7, 2.0, 1.1);
  const std::vector<double> w = values(3 * 5 * 7, 1.0, 2.7);  // a cotangent that is not all ones
  Tensor wt = Tensor::from_vector<double>(w, kShape);
  using Fn = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<const char*, Fn>> fns = {
      {"logsumexp axis 1", [&](const Tensor& x) { return (x.logsumexp({1}, true) * wt.shrink({{0, 3}, {0, 1}, {0, 7}})).sum(); }},
      {"logsumexp axes 0,2", [&](const Tensor& x) { return x.logsumexp({0, 2}).square().sum(); }},
      {"softmax axis 2", [&](const Tensor& x) { return (x.softmax(2) * wt).sum(); }},
      {"log_softmax axis 0", [&](const Tensor& x) { return (x.log_softmax(0) * wt).sum(); }}};
  for (const auto& [name, f] : fns)
    BOOST_TEST_CONTEXT(name) {
      Tensor x = Tensor::from_vector<double>(v, kShape);
      std::vector<double> g = ravel::gradients(f(x), {x})[0].to_vector<double>();
      for (size_t i = 0; i < v.size(); i += 7) {
        std::vector<double> up = v, dn = v;
        up[i] += 1e-6;
        dn[i] -= 1e-6;
        const double fd = (f(Tensor::from_vector<double>(up, kShape)).item<double>() -
                           f(Tensor::from_vector<double>(dn, kShape)).item<double>()) / 2e-6;
        BOOST_TEST(std::abs(g[i] - fd) <= 1e-7 * (1 + std::abs(fd)));
      }
    }
}

BOOST_AUTO_TEST_CASE(second_derivatives) {
  // Hessian of logsumexp: diag(p) - p p^T with p = softmax(x); finite at ±1e3 in f32.
  for (double scale : {1.0, 1000.0}) {
    std::vector<double> v = {0.5 * scale, -0.25 * scale, 0.125 * scale, 0.5 * scale - 1};
    for (DType t : {DType::F64, DType::F32}) {
      Tensor x = Tensor::from_vector<double>(v, {4}).cast(t);
      std::vector<double> h = get(ravel::hessian([](const Tensor& a) { return a.logsumexp(); })(x));
      std::vector<double> vt = v;
      if (t == DType::F32)
        for (double& a : vt) a = double(float(a));
      const double l = lse_ref(vt);
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
          const double pi = std::exp(vt[i] - l), pj = std::exp(vt[j] - l);
          const double want = (i == j ? pi : 0.0) - pi * pj;
          BOOST_TEST_CONTEXT("scale " << scale << " " << ravel::dtype_name(t) << " H" << i << j) {
            BOOST_TEST(std::isfinite(h[i * 4 + j]));
            BOOST_TEST(std::abs(h[i * 4 + j] - want) <= (t == DType::F32 ? 1e-5 : 1e-12));
          }
        }
    }
  }
  // grad of grad of sum(w * log_softmax(x)) along x: d/dx_i of sum_j g_j where g is the gradient
  Tensor x = Tensor::from_vector<double>({0.3, -1.2, 2.0, 0.7, -0.1, 1.5}, {2, 3});
  Tensor w = Tensor::from_vector<double>({1.0, -2.0, 0.5, 0.25, 3.0, -1.0}, {2, 3});
  auto f = [&](const Tensor& a) { return (a.log_softmax(1) * w).sum(); };
  auto gsum = [&](const Tensor& a) { return (ravel::gradients(f(a), {a})[0] * w).sum(); };
  std::vector<double> gg = ravel::gradients(gsum(x), {x})[0].to_vector<double>();
  std::vector<double> xv = x.to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i) {
    std::vector<double> up = xv, dn = xv;
    up[i] += 1e-6;
    dn[i] -= 1e-6;
    const double fd = (gsum(Tensor::from_vector<double>(up, {2, 3})).item<double>() -
                       gsum(Tensor::from_vector<double>(dn, {2, 3})).item<double>()) / 2e-6;
    BOOST_TEST(std::abs(gg[i] - fd) <= 1e-6 * (1 + std::abs(fd)));
  }
}
