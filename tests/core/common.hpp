// Shared helpers of the core tests: moving data between ravel::Tensor and ref::NDArray, building
// the same view on both sides, comparing with dtype-appropriate tolerances, and running table
// rows so that one failing row (or one that throws) names itself and does not stop the others.
#pragma once

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "ravel/ravel.hpp"
#include "test_support.hpp"
#include "reference.hpp"

namespace rtest {

using ravel::DType;
using ravel::Shape;
using ravel::Tensor;
using ref::Domain;
using ref::NDArray;

inline const std::vector<DType> kAllDTypes = {DType::Bool, DType::U8, DType::I32, DType::I64, DType::F32, DType::F64};
inline const std::vector<DType> kNumeric = {DType::U8, DType::I32, DType::I64, DType::F32, DType::F64};
inline const std::vector<DType> kSigned = {DType::I32, DType::I64, DType::F32, DType::F64};
inline const std::vector<DType> kInts = {DType::U8, DType::I32, DType::I64};
inline const std::vector<DType> kFloats = {DType::F32, DType::F64};
inline const std::vector<DType> kBoolInts = {DType::Bool, DType::U8, DType::I32, DType::I64};

inline std::string shape_text(const Shape& s) {
  std::ostringstream o;
  o << "[";
  for (size_t k = 0; k < s.size(); ++k) o << (k ? ", " : "") << s[k];
  o << "]";
  return o.str();
}

// ---- Tensor <-> NDArray ----------------------------------------------------------------------
template <class T>
Tensor typed_tensor(const NDArray& a) {
  std::vector<T> data(a.v.size());
  for (size_t k = 0; k < data.size(); ++k) data[k] = static_cast<T>(a.v[k]);
  return Tensor::from_vector<T>(data, a.shape);
}

inline Tensor to_tensor(const NDArray& a) {
  switch (a.dtype) {
    case DType::Bool: {  // from_data with one byte per element (std::vector<bool> has no data())
      std::vector<uint8_t> data(a.v.size());
      for (size_t k = 0; k < data.size(); ++k) data[k] = a.v[k] != 0;
      return Tensor::from_data(data.data(), DType::Bool, a.shape);
    }
    case DType::U8: return typed_tensor<uint8_t>(a);
    case DType::I32: return typed_tensor<int32_t>(a);
    case DType::I64: return typed_tensor<int64_t>(a);
    case DType::F32: return typed_tensor<float>(a);
    case DType::F64: return typed_tensor<double>(a);
    case DType::I8: return typed_tensor<int8_t>(a);
    case DType::I16: return typed_tensor<int16_t>(a);
    case DType::U16: return typed_tensor<uint16_t>(a);
    case DType::U32: return typed_tensor<uint32_t>(a);
    case DType::U64: return typed_tensor<uint64_t>(a);
    case DType::F16: case DType::BF16: {  // rounded once from the double (<ravel/half.hpp>)
      std::vector<unsigned char> bytes(2 * a.v.size());
      for (size_t k = 0; k < a.v.size(); ++k) {
        const uint16_t b = a.dtype == DType::F16 ? rvl::f16_bits_from(a.v[k]) : rvl::bf16_bits_from(a.v[k]);
        std::memcpy(bytes.data() + 2 * k, &b, 2);
      }
      return Tensor::from_data(bytes.data(), a.dtype, a.shape);
    }
  }
  throw std::logic_error("bad dtype");
}

template <class T>
std::vector<double> as_doubles(const Tensor& t) {
  std::vector<T> v = t.to_vector<T>();
  return std::vector<double>(v.begin(), v.end());
}

// The tensor's values, read in its own dtype (no conversion by the implementation).
inline std::vector<double> values(const Tensor& t) {
  switch (t.dtype()) {
    case DType::Bool: return as_doubles<bool>(t);
    case DType::U8: return as_doubles<uint8_t>(t);
    case DType::I32: return as_doubles<int32_t>(t);
    case DType::I64: return as_doubles<int64_t>(t);
    case DType::F32: return as_doubles<float>(t);
    case DType::F64: return as_doubles<double>(t);
    case DType::I8: return as_doubles<int8_t>(t);
    case DType::I16: return as_doubles<int16_t>(t);
    case DType::U16: return as_doubles<uint16_t>(t);
    case DType::U32: return as_doubles<uint32_t>(t);
    case DType::U64: return as_doubles<uint64_t>(t);
    case DType::F16: case DType::BF16: return as_doubles<float>(t);  // exact: a half widens exactly
  }
  throw std::logic_error("bad dtype");
}

// ---- comparison --------------------------------------------------------------------------------
struct Tol {
  double rtol = 0, atol = 0;
};
// f32: ~1e-5 relative (a few ulps of the composites' intermediate steps), plus a small absolute
// floor for results near 0 that come out of a cancellation (cos near pi/2, tanh near 0);
// f64 likewise at 1e-12. Integers and bools are exact.
inline Tol tol_for(DType t) {
  if (t == DType::F32) return {1e-5, 1e-6};
  if (t == DType::F64) return {1e-12, 1e-12};
  return {0, 0};
}

inline bool close(double got, double want, Tol tol) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return got == want;
  return std::fabs(got - want) <= tol.rtol * std::fabs(want) + tol.atol;
}

inline std::string index_text(const Shape& s, int64_t flat_pos) {
  Shape i(s.size());
  for (int64_t d = static_cast<int64_t>(s.size()) - 1; d >= 0; --d) {
    i[d] = flat_pos % s[d];
    flat_pos /= s[d];
  }
  return shape_text(i);
}

// Checks shape, dtype and values of `got` against `want`; reports the first few mismatches.
inline void check_tensor(const Tensor& got, const NDArray& want, std::optional<Tol> tol = {}) {
  BOOST_TEST_INFO("want shape " << shape_text(want.shape) << " dtype " << ravel::dtype_name(want.dtype));
  BOOST_CHECK_MESSAGE(got.shape() == want.shape, "shape: got " << shape_text(got.shape()) << ", want "
                                                               << shape_text(want.shape));
  BOOST_CHECK_MESSAGE(got.dtype() == want.dtype, "dtype: got " << ravel::dtype_name(got.dtype()) << ", want "
                                                               << ravel::dtype_name(want.dtype));
  if (got.shape() != want.shape) return;
  std::vector<double> g = values(got);
  BOOST_REQUIRE_EQUAL(g.size(), want.v.size());
  Tol t = tol ? *tol : tol_for(want.dtype);
  int bad = 0;
  std::ostringstream msg;
  for (size_t k = 0; k < g.size(); ++k) {
    if (close(g[k], want.v[k], t)) continue;
    if (bad < 6) msg << " at " << index_text(want.shape, static_cast<int64_t>(k)) << ": got " << g[k] << ", want " << want.v[k] << ";";
    ++bad;
  }
  BOOST_CHECK_MESSAGE(bad == 0, bad << " of " << g.size() << " values differ:" << msg.str());
}

// ---- view kinds --------------------------------------------------------------------------------
enum class ViewKind { Contiguous, Permuted, Expanded, Padded, Flipped, SlicedStep, SlicedNegStep, ReshapedPermuted };
inline const std::vector<ViewKind> kAllKinds = {ViewKind::Contiguous, ViewKind::Permuted,   ViewKind::Expanded,
                                                ViewKind::Padded,     ViewKind::Flipped,    ViewKind::SlicedStep,
                                                ViewKind::SlicedNegStep, ViewKind::ReshapedPermuted};
inline const char* kind_name(ViewKind k) {
  switch (k) {
    case ViewKind::Contiguous: return "contiguous";
    case ViewKind::Permuted: return "permuted";
    case ViewKind::Expanded: return "expanded";
    case ViewKind::Padded: return "padded";
    case ViewKind::Flipped: return "flipped";
    case ViewKind::SlicedStep: return "sliced(step 2)";
    case ViewKind::SlicedNegStep: return "sliced(step -2)";
    case ViewKind::ReshapedPermuted: return "reshape-of-permuted";
  }
  return "?";
}

struct Built {
  Tensor t;
  NDArray r;
};

// A tensor of logical shape `s` reached through the given kind of view, built with Ravel's
// movement ops on one side and the reference's index mappings on the other, from the same data.
inline Built build(ViewKind kind, const Shape& s, DType dt, Domain dom, uint64_t seed) {
  const int64_t n = static_cast<int64_t>(s.size());
  Built out;
  switch (kind) {
    case ViewKind::Contiguous: {
      NDArray b = ref::generate(s, dt, dom, seed);
      out = {to_tensor(b), b};
      break;
    }
    case ViewKind::Permuted: {  // base has the axes reversed; permute(reverse) brings it back
      std::vector<int64_t> order(n);
      Shape bs(n);
      for (int64_t k = 0; k < n; ++k) order[k] = n - 1 - k, bs[k] = s[n - 1 - k];
      NDArray b = ref::generate(bs, dt, dom, seed);
      out = {to_tensor(b).permute(order), ref::permute(b, order)};
      break;
    }
    case ViewKind::Expanded: {  // axis 0 (and the last axis, if rank >= 3) broadcast from size 1
      Shape bs = s;
      bs[0] = 1;
      if (n >= 3) bs[n - 1] = 1;
      NDArray b = ref::generate(bs, dt, dom, seed);
      out = {to_tensor(b).expand(s), ref::expand(b, s)};
      break;
    }
    case ViewKind::Padded: {  // one zero row/column before (even axes) or after (odd axes)
      Shape bs = s;
      std::vector<std::pair<int64_t, int64_t>> w(n, {0, 0});
      for (int64_t d = 0; d < n; ++d)
        if (s[d] >= 2) bs[d] -= 1, w[d] = d % 2 == 0 ? std::pair<int64_t, int64_t>{1, 0} : std::pair<int64_t, int64_t>{0, 1};
      NDArray b = ref::generate(bs, dt, dom, seed);
      out = {to_tensor(b).pad(w), ref::pad(b, w)};
      break;
    }
    case ViewKind::Flipped: {
      NDArray b = ref::generate(s, dt, dom, seed);
      std::vector<int64_t> axes = n >= 2 ? std::vector<int64_t>{0, -1} : std::vector<int64_t>{0};
      out = {to_tensor(b).flip(ravel::Axes(axes)), ref::flip(b, axes)};
      break;
    }
    case ViewKind::SlicedStep: {  // x[1::2, 1::2, ...] of a base with 2n+1 per axis
      Shape bs = s;
      for (auto& d : bs) d = 2 * d + 1;
      NDArray b = ref::generate(bs, dt, dom, seed);
      std::vector<ravel::Slice> sl(n, ravel::Slice{1, std::nullopt, 2});
      NDArray r = b;
      for (int64_t d = 0; d < n; ++d) r = ref::slice(r, d, 1, std::nullopt, 2);
      out = {to_tensor(b).slice(sl), r};
      break;
    }
    case ViewKind::SlicedNegStep: {  // x[::-2, ::-2, ...] of a base with 2n per axis
      Shape bs = s;
      for (auto& d : bs) d = 2 * d;
      NDArray b = ref::generate(bs, dt, dom, seed);
      std::vector<ravel::Slice> sl(n, ravel::Slice{std::nullopt, std::nullopt, -2});
      NDArray r = b;
      for (int64_t d = 0; d < n; ++d) r = ref::slice(r, d, std::nullopt, std::nullopt, -2);
      out = {to_tensor(b).slice(sl), r};
      break;
    }
    case ViewKind::ReshapedPermuted: {  // [2, N/2] transposed to [N/2, 2], then reshaped: a copy
      int64_t total = ref::numel(s);
      int64_t a = total % 2 == 0 ? 2 : 1;
      NDArray b = ref::generate({a, total / a}, dt, dom, seed);
      out = {to_tensor(b).permute({1, 0}).reshape(s), ref::reshape(ref::permute(b, {1, 0}), s)};
      break;
    }
  }
  if (out.r.shape != s) throw std::logic_error("test bug: reference view has the wrong shape");
  return out;
}

// ---- table rows ----------------------------------------------------------------------------------
// A unary op: the Ravel call, the exact math on one value of input dtype `t`, the result dtype.
struct UnaryRow {
  std::string name;
  std::vector<DType> dtypes;
  Domain domain;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double, DType)> f;
  std::function<DType(DType)> out = [](DType t) { return t; };
};
inline std::ostream& operator<<(std::ostream& o, const UnaryRow& r) { return o << r.name; }

struct BinaryRow {
  std::string name;
  std::vector<DType> dtypes;
  Domain da, db;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::function<double(double, double, DType)> f;
  std::function<DType(DType)> out = [](DType t) { return t; };
};
inline std::ostream& operator<<(std::ostream& o, const BinaryRow& r) { return o << r.name; }

inline DType to_bool(DType) { return DType::Bool; }

// Every dtype of the row x every view kind of the input.
inline void run_unary(const UnaryRow& row, const Shape& s) {
  uint64_t seed = 1;
  for (DType dt : row.dtypes)
    for (ViewKind k : kAllKinds)
      guarded(row.name + " dtype=" + ravel::dtype_name(dt) + " view=" + kind_name(k), [&] {
        Built x = build(k, s, dt, row.domain, ++seed);
        NDArray want = ref::map1(x.r, row.out(dt), [&](double v) { return row.f(v, dt); });
        check_tensor(row.op(x.t), want);
      });
}

// Every dtype x every view kind of the left operand; the right operand takes another kind, so
// all kinds are also seen on the right.
inline void run_binary(const BinaryRow& row, const Shape& s) {
  uint64_t seed = 100;
  const size_t nk = kAllKinds.size();
  for (DType dt : row.dtypes)
    for (size_t ki = 0; ki < nk; ++ki) {
      ViewKind ka = kAllKinds[ki], kb = kAllKinds[(ki + 3) % nk];
      guarded(row.name + " dtype=" + ravel::dtype_name(dt) + " lhs view=" + kind_name(ka) + " rhs view=" + kind_name(kb),
              [&] {
                Built a = build(ka, s, dt, row.da, ++seed), b = build(kb, s, dt, row.db, ++seed);
                NDArray want = ref::map2(a.r, b.r, row.out(dt), [&](double x, double y) { return row.f(x, y, dt); });
                check_tensor(row.op(a.t, b.t), want);
              });
    }
}

// The value of x computed in the precision of dtype t (float math for f32).
template <class F>
double in_precision(DType t, double x, F f) {
  if (t == DType::F32) return static_cast<double>(static_cast<float>(f(static_cast<float>(x))));
  return f(x);
}

}  // namespace rtest
