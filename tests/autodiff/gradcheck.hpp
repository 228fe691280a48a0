// Shared helpers of the autodiff tests: random f64 inputs shifted into an op's domain, the view
// kinds expressed as differentiable functions of a base tensor, and gradcheck(), which compares
// Ravel's reverse mode (gradients() and vjp's pullback) and forward mode (jvp) against central
// finite differences computed here, on the host, from plain forward evaluations.
//
// Why eps = 1e-6 and a tolerance of 1e-6 (relative + absolute), in f64:
//  * the truncation error of a central difference is eps^2/6 * |f'''| ~ 1e-13 for the O(1)
//    derivatives of these small, smooth inputs;
//  * the rounding error is ~ ulp(f) / eps ~ 1e-16 * |f| / 1e-6 ~ 1e-10 * |f| per evaluation, and
//    the products with cotangents sum a few dozen such terms, so the finite differences are good
//    to ~1e-9;
//  * a wrong derivative rule is off by O(1) (a missing factor, a sign, a transposition), six
//    orders of magnitude above the tolerance, so 1e-6 is both safe and sharp.
#pragma once

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "ravel/autodiff.hpp"
#include "ravel/ravel.hpp"
#include "test_support.hpp"

namespace adtest {

using ravel::Axes;
using ravel::DType;
using ravel::Shape;
using ravel::Slice;
using ravel::Tensor;
using ravel::TensorFn;

constexpr double kEps = 1e-6;
constexpr double kTol = 1e-6;

inline std::string shape_text(const Shape& s) {
  std::ostringstream o;
  o << "[";
  for (size_t k = 0; k < s.size(); ++k) o << (k ? ", " : "") << s[k];
  o << "]";
  return o.str();
}

inline int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// ---- inputs ------------------------------------------------------------------------------------
// Every input is a realized f64 buffer (a leaf) built from host values, so finite differences
// can rebuild the very same graph around perturbed copies.
inline Tensor host(const std::vector<double>& v, const Shape& s) { return Tensor::from_vector<double>(v, s); }

inline std::vector<double> uniform_values(const Shape& s, uint64_t seed) {
  return Tensor::rand(s, seed, DType::F64).to_vector<double>();
}
inline std::vector<double> normal_values(const Shape& s, uint64_t seed) {
  return Tensor::randn(s, seed, DType::F64).to_vector<double>();
}

// Uniform in [lo, hi).
inline Tensor uniform(const Shape& s, uint64_t seed, double lo, double hi) {
  std::vector<double> v = uniform_values(s, seed);
  for (auto& x : v) x = lo + (hi - lo) * x;
  return host(v, s);
}
// Standard normal.
inline Tensor normal(const Shape& s, uint64_t seed) { return host(normal_values(s, seed), s); }
// Magnitude in [lo, hi) with a random sign: away from 0 (recip, div, kinks of relu and abs).
inline Tensor signed_away(const Shape& s, uint64_t seed, double lo = 0.5, double hi = 2.0) {
  std::vector<double> m = uniform_values(s, seed), sg = uniform_values(s, seed + 1000003);
  for (size_t k = 0; k < m.size(); ++k) m[k] = (sg[k] < 0.5 ? -1.0 : 1.0) * (lo + (hi - lo) * m[k]);
  return host(m, s);
}
// Away from integers (the jumps of trunc): k + [0.2, 0.8) for a random integer k in [-3, 3).
inline Tensor off_integers(const Shape& s, uint64_t seed) {
  std::vector<double> f = uniform_values(s, seed), k = uniform_values(s, seed + 1000003);
  for (size_t i = 0; i < f.size(); ++i) f[i] = std::floor(-3.0 + 6.0 * k[i]) + 0.2 + 0.6 * f[i];
  return host(f, s);
}

inline std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

// ---- comparison ----------------------------------------------------------------------------------
inline bool close(double got, double want, double rtol, double atol) {
  if (std::isnan(got) || std::isnan(want)) return false;
  return std::fabs(got - want) <= rtol * std::fabs(want) + atol;
}

// Checks shape and values; reports the first few mismatches.
inline void check_values(const std::string& what, const Tensor& got, const Shape& shape, const std::vector<double>& want,
                         double rtol = kTol, double atol = kTol) {
  BOOST_TEST_CONTEXT(what) {
    BOOST_REQUIRE_MESSAGE(got.defined(), "undefined tensor");
    BOOST_CHECK_MESSAGE(got.shape() == shape, "shape: got " << shape_text(got.shape()) << ", want " << shape_text(shape));
    BOOST_CHECK_MESSAGE(got.dtype() == DType::F64, "dtype: got " << ravel::dtype_name(got.dtype()) << ", want f64");
    if (got.shape() != shape) return;
    std::vector<double> g = values(got);
    BOOST_REQUIRE_EQUAL(g.size(), want.size());
    int bad = 0;
    std::ostringstream msg;
    for (size_t k = 0; k < g.size(); ++k) {
      if (close(g[k], want[k], rtol, atol)) continue;
      if (bad < 6) msg << " [" << k << "] got " << g[k] << ", want " << want[k] << ";";
      ++bad;
    }
    BOOST_CHECK_MESSAGE(bad == 0, bad << " of " << g.size() << " values differ:" << msg.str());
  }
}

// ---- gradcheck -------------------------------------------------------------------------------------
// f's value at host values `vals` (one vector per argument).
inline std::vector<double> evaluate(const TensorFn& f, const std::vector<std::vector<double>>& vals,
                                    const std::vector<Shape>& shapes) {
  std::vector<Tensor> in;
  for (size_t i = 0; i < vals.size(); ++i) in.push_back(host(vals[i], shapes[i]));
  return values(f(in));
}

// Compares, for f at xs (f64 leaves):
//  (a) gradients(f(xs), xs, u) and vjp(f, xs).pullback(u) for two random cotangents u (the
//      pullback is called twice) against J^T u, with J from central differences;
//  (b) jvp(f, xs, t) for random tangents t against (f(x + eps t) - f(x - eps t)) / (2 eps);
//  and the primal outputs of vjp and jvp against f(xs).
inline void gradcheck(const std::string& name, const TensorFn& f, const std::vector<Tensor>& xs, uint64_t seed = 17) {
  guarded(name, [&] {
    std::vector<Shape> shapes;
    std::vector<std::vector<double>> hx;
    for (const auto& x : xs) {
      BOOST_REQUIRE(x.dtype() == DType::F64);
      shapes.push_back(x.shape());
      hx.push_back(values(x));
    }
    Tensor y = f(xs);
    BOOST_REQUIRE_MESSAGE(y.dtype() == DType::F64, "f must return f64, got " << ravel::dtype_name(y.dtype()));
    const Shape ys = y.shape();
    const std::vector<double> y0 = values(y);
    const size_t m = y0.size();
    for (double v : y0) BOOST_REQUIRE_MESSAGE(std::isfinite(v), "f(x) is not finite: test inputs outside the domain");

    // Finite-difference Jacobian, one column per input element.
    std::vector<std::vector<std::vector<double>>> jac(xs.size());  // [input][element] -> column of m
    for (size_t i = 0; i < xs.size(); ++i)
      for (size_t k = 0; k < hx[i].size(); ++k) {
        auto plus = hx, minus = hx;
        plus[i][k] += kEps;
        minus[i][k] -= kEps;
        std::vector<double> fp = evaluate(f, plus, shapes), fm = evaluate(f, minus, shapes);
        std::vector<double> col(m);
        for (size_t r = 0; r < m; ++r) col[r] = (fp[r] - fm[r]) / (2 * kEps);
        jac[i].push_back(std::move(col));
      }
    auto jtu = [&](const std::vector<double>& u, size_t i) {
      std::vector<double> out(hx[i].size(), 0.0);
      for (size_t k = 0; k < out.size(); ++k)
        for (size_t r = 0; r < m; ++r) out[k] += jac[i][k][r] * u[r];
      return out;
    };

    // (a) reverse mode.
    const std::vector<double> u1 = normal_values(ys, seed), u2 = normal_values(ys, seed + 1);
    std::vector<Tensor> g = ravel::gradients(y, xs, host(u1, ys));
    BOOST_REQUIRE_EQUAL(g.size(), xs.size());
    ravel::VjpResult pb = ravel::vjp(f, xs);
    check_values("vjp output", pb.output, ys, y0, 1e-12, 1e-12);
    std::vector<Tensor> p1 = pb.pullback(host(u1, ys));
    std::vector<Tensor> p2 = pb.pullback(host(u2, ys));
    BOOST_REQUIRE_EQUAL(p1.size(), xs.size());
    BOOST_REQUIRE_EQUAL(p2.size(), xs.size());
    for (size_t i = 0; i < xs.size(); ++i) {
      std::string arg = " of argument " + std::to_string(i);
      std::vector<double> w1 = jtu(u1, i), w2 = jtu(u2, i);
      check_values("gradients()" + arg, g[i], shapes[i], w1);
      check_values("vjp pullback #1" + arg, p1[i], shapes[i], w1);
      check_values("vjp pullback #2" + arg, p2[i], shapes[i], w2);
    }

    // (b) forward mode.
    std::vector<Tensor> ts;
    auto plus = hx, minus = hx;
    for (size_t i = 0; i < xs.size(); ++i) {
      std::vector<double> t = normal_values(shapes[i], seed + 10 + i);
      for (size_t k = 0; k < t.size(); ++k) plus[i][k] += kEps * t[k], minus[i][k] -= kEps * t[k];
      ts.push_back(host(t, shapes[i]));
    }
    std::vector<double> fp = evaluate(f, plus, shapes), fm = evaluate(f, minus, shapes);
    std::vector<double> want(m);
    for (size_t r = 0; r < m; ++r) want[r] = (fp[r] - fm[r]) / (2 * kEps);
    auto [jy, jt] = ravel::jvp(f, xs, ts);
    check_values("jvp output", jy, ys, y0, 1e-12, 1e-12);
    check_values("jvp tangent", jt, ys, want);
  });
}

// One-argument and two-argument shorthands.
inline void gradcheck1(const std::string& name, std::function<Tensor(const Tensor&)> f, const Tensor& x,
                       uint64_t seed = 17) {
  gradcheck(name, [f](const std::vector<Tensor>& a) { return f(a[0]); }, {x}, seed);
}
inline void gradcheck2(const std::string& name, std::function<Tensor(const Tensor&, const Tensor&)> f, const Tensor& a,
                       const Tensor& b, uint64_t seed = 17) {
  gradcheck(name, [f](const std::vector<Tensor>& v) { return f(v[0], v[1]); }, {a, b}, seed);
}

// ---- view kinds as functions of a base tensor -------------------------------------------------------
// Each kind reaches a tensor of logical shape s from a base of base_shape(s) through movement
// ops, so the gradient with respect to the base flows back through them (zero padding and the
// elements a slice skips get no gradient; an expanded axis sums its gradient).
enum class ViewKind { Contiguous, Permuted, Expanded, Padded, Shrunk, Flipped, SlicedStep, SlicedNegStep, ReshapedPermuted };
inline const std::vector<ViewKind> kAllKinds = {ViewKind::Contiguous, ViewKind::Permuted,      ViewKind::Expanded,
                                                ViewKind::Padded,     ViewKind::Shrunk,        ViewKind::Flipped,
                                                ViewKind::SlicedStep, ViewKind::SlicedNegStep, ViewKind::ReshapedPermuted};

inline const char* kind_name(ViewKind k) {
  switch (k) {
    case ViewKind::Contiguous: return "contiguous";
    case ViewKind::Permuted: return "permuted";
    case ViewKind::Expanded: return "expanded";
    case ViewKind::Padded: return "padded";
    case ViewKind::Shrunk: return "shrunk";
    case ViewKind::Flipped: return "flipped";
    case ViewKind::SlicedStep: return "sliced(step 2)";
    case ViewKind::SlicedNegStep: return "sliced(step -2)";
    case ViewKind::ReshapedPermuted: return "reshape-of-permuted (copy)";
  }
  return "?";
}

inline Shape base_shape(ViewKind k, const Shape& s) {
  const size_t n = s.size();
  Shape b = s;
  switch (k) {
    case ViewKind::Contiguous: case ViewKind::Flipped: return b;
    case ViewKind::Permuted:
      for (size_t d = 0; d < n; ++d) b[d] = s[n - 1 - d];
      return b;
    case ViewKind::Expanded:  // axis 0 (and the last, for rank >= 3) broadcast from size 1
      b[0] = 1;
      if (n >= 3) b[n - 1] = 1;
      return b;
    case ViewKind::Padded:  // one zero row before (even axes) or after (odd axes)
      for (auto& d : b)
        if (d >= 2) d -= 1;
      return b;
    case ViewKind::Shrunk:
      for (auto& d : b) d += 3;
      return b;
    case ViewKind::SlicedStep:
      for (auto& d : b) d = 2 * d + 1;
      return b;
    case ViewKind::SlicedNegStep:
      for (auto& d : b) d = 2 * d;
      return b;
    case ViewKind::ReshapedPermuted: {
      int64_t total = numel(s), a = total % 2 == 0 ? 2 : 1;
      return {a, total / a};
    }
  }
  return b;
}

inline Tensor apply_view(ViewKind k, const Tensor& base, const Shape& s) {
  const int64_t n = static_cast<int64_t>(s.size());
  switch (k) {
    case ViewKind::Contiguous: return base;
    case ViewKind::Permuted: {
      std::vector<int64_t> order(n);
      for (int64_t d = 0; d < n; ++d) order[d] = n - 1 - d;
      return base.permute(order);
    }
    case ViewKind::Expanded: return base.expand(s);
    case ViewKind::Padded: {
      std::vector<std::pair<int64_t, int64_t>> w(n, {0, 0});
      for (int64_t d = 0; d < n; ++d)
        if (s[d] >= 2) w[d] = d % 2 == 0 ? std::pair<int64_t, int64_t>{1, 0} : std::pair<int64_t, int64_t>{0, 1};
      return base.pad(w);
    }
    case ViewKind::Shrunk: {
      std::vector<std::pair<int64_t, int64_t>> r;
      for (int64_t d = 0; d < n; ++d) r.emplace_back(1, 1 + s[d]);
      return base.shrink(r);
    }
    case ViewKind::Flipped:
      return base.flip(n >= 2 ? Axes(std::vector<int64_t>{0, -1}) : Axes(std::vector<int64_t>{0}));
    case ViewKind::SlicedStep: return base.slice(std::vector<Slice>(n, Slice{1, std::nullopt, 2}));
    case ViewKind::SlicedNegStep: return base.slice(std::vector<Slice>(n, Slice{std::nullopt, std::nullopt, -2}));
    case ViewKind::ReshapedPermuted: return base.permute({1, 0}).reshape(s);
  }
  return base;
}

}  // namespace adtest
