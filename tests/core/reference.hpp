// An independent, naive reference for the core tests.
//
// A host-side NDArray (values held as double, plus a shape and a dtype) with its own index math,
// written from the definitions (NumPy / PyTorch docs), not from Ravel's implementation: every
// view op here is "out[i] = in[f(i)]" with f the multi-index mapping, and every op loops over
// multi-indices directly. Only DType is shared with Ravel (it is just an enum). All test data
// is chosen so that double holds every value exactly (ints far below 2^53, floats multiples of
// 1/8), so sums and products here are exact.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ravel/dtype.hpp"

namespace ref {

using ravel::DType;
using Shape = std::vector<int64_t>;
using Index = std::vector<int64_t>;

inline int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Row-major position of a multi-index: the last axis varies fastest.
inline int64_t flat(const Shape& s, const Index& i) {
  int64_t p = 0;
  for (size_t d = 0; d < s.size(); ++d) p = p * s[d] + i[d];
  return p;
}

// Calls f(index) for every multi-index of `s`, in row-major order (once for a 0-d shape).
template <class F>
void for_each_index(const Shape& s, F&& f) {
  if (numel(s) == 0) return;
  Index i(s.size(), 0);
  for (;;) {
    f(static_cast<const Index&>(i));
    int d = static_cast<int>(s.size()) - 1;
    for (; d >= 0; --d) {
      if (++i[d] < s[d]) break;
      i[d] = 0;
    }
    if (d < 0) return;
  }
}

inline bool float_type(DType t) { return t == DType::F32 || t == DType::F64; }
inline bool int_type(DType t) { return t == DType::U8 || t == DType::I32 || t == DType::I64; }
inline bool signed_type(DType t) { return t == DType::I32 || t == DType::I64 || float_type(t); }

// The value x (already integral for integer targets) as stored in dtype t: floats round to the
// target precision, integers wrap modulo 2^bits (two's complement), bool is x != 0.
inline double wrap(double x, DType t) {
  switch (t) {
    case DType::Bool: return x != 0 ? 1.0 : 0.0;
    case DType::U8: return static_cast<double>(static_cast<uint8_t>(static_cast<uint64_t>(static_cast<int64_t>(x))));
    case DType::I32: return static_cast<double>(static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(static_cast<int64_t>(x)))));
    case DType::I64: return x;
    case DType::F32: return static_cast<double>(static_cast<float>(x));
    case DType::F64: return x;
    case DType::F16: case DType::BF16: case DType::I8: case DType::I16: case DType::U16: case DType::U32:
    case DType::U64:
      // tests/core/test_half.cpp covers the 1.7 dtypes; this reference models the 1.0-1.6 ones
      throw std::logic_error(std::string("ref::wrap: no model of ") + ravel::dtype_name(t));
  }
  return x;
}
// C-style conversion: float -> int truncates toward zero, anything -> bool is x != 0.
inline double convert(double x, DType to) { return int_type(to) ? wrap(std::trunc(x), to) : wrap(x, to); }

// CAST as docs/abi.md 7.3 defines it: to bool is x != 0 (NaN is true); integer -> integer is
// modular; float -> integer truncates toward zero and saturates (NaN -> 0, U8 negatives -> 0).
inline double cast_value(double x, DType from, DType to) {
  if (to == DType::Bool) return x != 0 || std::isnan(x) ? 1.0 : 0.0;
  if (!int_type(to) || !float_type(from)) return convert(x, to);
  if (std::isnan(x)) return 0.0;
  double lo = to == DType::U8 ? 0.0 : to == DType::I32 ? -2147483648.0 : -9223372036854775808.0;
  double hi = to == DType::U8 ? 255.0 : to == DType::I32 ? 2147483647.0 : 9223372036854775807.0;
  return std::clamp(std::trunc(x), lo, hi);
}

struct NDArray {
  Shape shape;
  DType dtype = DType::F32;
  std::vector<double> v;

  NDArray() = default;
  NDArray(Shape s, DType t, double fill = 0.0) : shape(std::move(s)), dtype(t), v(numel(shape), fill) {}
  NDArray(Shape s, DType t, std::vector<double> values) : shape(std::move(s)), dtype(t), v(std::move(values)) {
    if (static_cast<int64_t>(v.size()) != numel(shape)) throw std::logic_error("ref::NDArray: size mismatch");
    for (double& x : v) x = convert(x, dtype);
  }
  int64_t ndim() const { return static_cast<int64_t>(shape.size()); }
  double& operator[](const Index& i) { return v[flat(shape, i)]; }
  double operator[](const Index& i) const { return v[flat(shape, i)]; }
};

inline int64_t norm_axis(int64_t a, int64_t ndim) { return a < 0 ? a + ndim : a; }

// ---- movement (each written as out[i] = in[f(i)]) -------------------------------------------
// numpy.transpose(a, order): out.shape[k] = a.shape[order[k]], out[i] = a[j] with j[order[k]] = i[k].
inline NDArray permute(const NDArray& a, const std::vector<int64_t>& order) {
  Shape s(order.size());
  for (size_t k = 0; k < order.size(); ++k) s[k] = a.shape[order[k]];
  NDArray out(s, a.dtype);
  for_each_index(s, [&](const Index& i) {
    Index j(order.size());
    for (size_t k = 0; k < order.size(); ++k) j[order[k]] = i[k];
    out[i] = a[j];
  });
  return out;
}

// NumPy broadcasting: align on the right; sizes must be equal or one of them 1.
inline std::optional<Shape> broadcast_shape(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape s(n);
  for (size_t k = 0; k < n; ++k) {
    int64_t da = k < n - a.size() ? 1 : a[k - (n - a.size())];
    int64_t db = k < n - b.size() ? 1 : b[k - (n - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    s[k] = da == 1 ? db : da;
  }
  return s;
}

// numpy.broadcast_to(a, s): index a with the trailing axes of i, 0 on the size-1 axes.
inline NDArray expand(const NDArray& a, const Shape& s) {
  NDArray out(s, a.dtype);
  size_t lead = s.size() - a.shape.size();
  for_each_index(s, [&](const Index& i) {
    Index j(a.shape.size());
    for (size_t d = 0; d < a.shape.size(); ++d) j[d] = a.shape[d] == 1 ? 0 : i[d + lead];
    out[i] = a[j];
  });
  return out;
}

inline NDArray pad(const NDArray& a, const std::vector<std::pair<int64_t, int64_t>>& w) {
  Shape s = a.shape;
  for (size_t d = 0; d < s.size(); ++d) s[d] += w[d].first + w[d].second;
  NDArray out(s, a.dtype);
  for_each_index(s, [&](const Index& i) {
    Index j(s.size());
    for (size_t d = 0; d < s.size(); ++d) {
      j[d] = i[d] - w[d].first;
      if (j[d] < 0 || j[d] >= a.shape[d]) return;  // padding stays 0
    }
    out[i] = a[j];
  });
  return out;
}

inline NDArray shrink(const NDArray& a, const std::vector<std::pair<int64_t, int64_t>>& r) {
  Shape s(a.shape.size());
  for (size_t d = 0; d < s.size(); ++d) s[d] = r[d].second - r[d].first;
  NDArray out(s, a.dtype);
  for_each_index(s, [&](const Index& i) {
    Index j(i);
    for (size_t d = 0; d < s.size(); ++d) j[d] += r[d].first;
    out[i] = a[j];
  });
  return out;
}

inline NDArray flip(const NDArray& a, const std::vector<int64_t>& axes) {
  NDArray out(a.shape, a.dtype);
  for_each_index(a.shape, [&](const Index& i) {
    Index j(i);
    for (int64_t ax : axes) {
      int64_t d = norm_axis(ax, a.ndim());
      j[d] = a.shape[d] - 1 - i[d];
    }
    out[i] = a[j];
  });
  return out;
}

// The positions Python's range(n)[start:stop:step] selects (from the language reference:
// negative bounds add n, then clamp; defaults depend on the sign of step).
inline std::vector<int64_t> py_slice(int64_t n, std::optional<int64_t> start, std::optional<int64_t> stop,
                                     int64_t step) {
  auto fix = [&](int64_t x, int64_t lo, int64_t hi) {
    if (x < 0) x += n;
    return std::clamp(x, lo, hi);
  };
  int64_t b, e;
  if (step > 0) {
    b = start ? fix(*start, 0, n) : 0;
    e = stop ? fix(*stop, 0, n) : n;
  } else {
    b = start ? fix(*start, -1, n - 1) : n - 1;
    e = stop ? fix(*stop, -1, n - 1) : -1;
  }
  std::vector<int64_t> out;
  for (int64_t k = b; step > 0 ? k < e : k > e; k += step) out.push_back(k);
  return out;
}

inline NDArray slice(const NDArray& a, int64_t axis, std::optional<int64_t> start, std::optional<int64_t> stop,
                     int64_t step) {
  int64_t d = norm_axis(axis, a.ndim());
  std::vector<int64_t> pos = py_slice(a.shape[d], start, stop, step);
  Shape s = a.shape;
  s[d] = static_cast<int64_t>(pos.size());
  NDArray out(s, a.dtype);
  for_each_index(s, [&](const Index& i) {
    Index j(i);
    j[d] = pos[i[d]];
    out[i] = a[j];
  });
  return out;
}

// Reshape keeps the row-major order of the elements.
inline NDArray reshape(const NDArray& a, const Shape& s) {
  if (numel(s) != numel(a.shape)) throw std::logic_error("ref::reshape: bad size");
  NDArray out = a;
  out.shape = s;
  return out;
}

// ---- elementwise -----------------------------------------------------------------------------
inline NDArray cast(const NDArray& a, DType t) {
  NDArray out(a.shape, t);
  for (size_t k = 0; k < a.v.size(); ++k) out.v[k] = convert(a.v[k], t);
  return out;
}

// out = f(a) stored as dtype t (f's exact result is rounded / wrapped into t).
template <class F>
NDArray map1(const NDArray& a, DType t, F f) {
  NDArray out(a.shape, t);
  for (size_t k = 0; k < a.v.size(); ++k) out.v[k] = wrap(f(a.v[k]), t);
  return out;
}

template <class F>
NDArray map2(const NDArray& a, const NDArray& b, DType t, F f) {
  auto s = broadcast_shape(a.shape, b.shape);
  if (!s) throw std::logic_error("ref::map2: shapes do not broadcast");
  NDArray ea = expand(a, *s), eb = expand(b, *s), out(*s, t);
  for (size_t k = 0; k < out.v.size(); ++k) out.v[k] = wrap(f(ea.v[k], eb.v[k]), t);
  return out;
}

inline NDArray where(const NDArray& c, const NDArray& a, const NDArray& b, DType t) {
  auto s1 = broadcast_shape(c.shape, a.shape);
  auto s = s1 ? broadcast_shape(*s1, b.shape) : std::nullopt;
  if (!s) throw std::logic_error("ref::where: shapes do not broadcast");
  NDArray ec = expand(c, *s), ea = expand(a, *s), eb = expand(b, *s), out(*s, t);
  for (size_t k = 0; k < out.v.size(); ++k) out.v[k] = convert(ec.v[k] != 0 ? ea.v[k] : eb.v[k], t);
  return out;
}

// ---- reductions ----------------------------------------------------------------------------
// The axes an Axes-like list names ({} in `all` means every axis), normalised and sorted.
inline std::vector<bool> reduced_mask(int64_t ndim, const std::optional<std::vector<int64_t>>& axes) {
  std::vector<bool> m(ndim, !axes.has_value());
  if (axes)
    for (int64_t a : *axes) m[norm_axis(a, ndim)] = true;
  return m;
}

inline Shape reduced_shape(const Shape& s, const std::vector<bool>& m, bool keepdim) {
  Shape out;
  for (size_t d = 0; d < s.size(); ++d) {
    if (!m[d]) out.push_back(s[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

// For each output element, the list of input values that reduce into it (in row-major order).
inline std::vector<std::vector<double>> groups(const NDArray& a, const std::vector<bool>& m, bool keepdim,
                                               Shape* out_shape) {
  *out_shape = reduced_shape(a.shape, m, keepdim);
  std::vector<std::vector<double>> g(numel(*out_shape));
  for_each_index(a.shape, [&](const Index& i) {
    Index o;
    for (size_t d = 0; d < i.size(); ++d) {
      if (!m[d]) o.push_back(i[d]);
      else if (keepdim) o.push_back(0);
    }
    g[flat(*out_shape, o)].push_back(a[i]);
  });
  return g;
}

// out[o] = f(values reducing into o), stored as dtype t.
template <class F>
NDArray reduce(const NDArray& a, const std::optional<std::vector<int64_t>>& axes, bool keepdim, DType t, F f) {
  Shape s;
  auto g = groups(a, reduced_mask(a.ndim(), axes), keepdim, &s);
  NDArray out(s, t);
  for (size_t k = 0; k < g.size(); ++k) out.v[k] = wrap(f(g[k]), t);
  return out;
}

// ---- linear algebra ------------------------------------------------------------------------
// numpy.matmul, from its documentation: 1-D operands get a 1 prepended (left) / appended
// (right) which is removed from the result; the batch axes broadcast; C[..., i, j] =
// sum_k A[..., i, k] * B[..., k, j] with a naive triple loop.
inline NDArray matmul(const NDArray& a0, const NDArray& b0, DType t) {
  NDArray a = a0, b = b0;
  bool va = a.ndim() == 1, vb = b.ndim() == 1;
  if (va) a = reshape(a, {1, a.shape[0]});
  if (vb) b = reshape(b, {b.shape[0], 1});
  int64_t m = a.shape[a.ndim() - 2], k = a.shape[a.ndim() - 1], n = b.shape[b.ndim() - 1];
  if (b.shape[b.ndim() - 2] != k) throw std::logic_error("ref::matmul: inner dims");
  Shape ba(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
  Shape batch = *broadcast_shape(ba, bb);
  Shape sa = batch, sb = batch, sc = batch;
  sa.insert(sa.end(), {m, k});
  sb.insert(sb.end(), {k, n});
  sc.insert(sc.end(), {m, n});
  NDArray ea = expand(a, sa), eb = expand(b, sb), c(sc, t);
  for_each_index(sc, [&](const Index& i) {
    double acc = 0;
    Index ia(i), ib(i);
    for (int64_t p = 0; p < k; ++p) {
      ia[ia.size() - 1] = p;               // A[..., i, p]
      ib[ib.size() - 2] = p;               // B[..., p, j]
      double x = ea[ia], y = eb[ib];
      acc += t == DType::Bool ? (x != 0 && y != 0) : x * y;
    }
    c[i] = wrap(t == DType::Bool ? (acc != 0) : acc, t);
  });
  Shape out = batch;
  if (!va) out.push_back(m);
  if (!vb) out.push_back(n);
  return reshape(c, out);
}

// ---- test data -------------------------------------------------------------------------------
enum class Domain {
  Any,       // mixed signs, some zeros
  Positive,  // > 0 (log, sqrt, divisors)
  NonZero,   // != 0
  NonNeg,    // >= 0
  Prod,      // mostly 1, some 2 (and -1 for signed types): products stay small
};

// A deterministic generator (an LCG), so a failing row reproduces.
struct Gen {
  uint64_t state;
  explicit Gen(uint64_t seed) : state(seed * 2654435761u + 12345) {}
  uint64_t next() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  }
  double value(DType t, Domain d) {
    uint64_t r = next();
    bool sgn = signed_type(t);
    if (t == DType::Bool) return d == Domain::Positive || d == Domain::NonZero ? 1 : (d == Domain::Prod ? (r % 4 != 0) : (r % 2));
    if (d == Domain::Prod) return r % 5 == 0 ? 2 : (sgn && r % 7 == 3 ? -1 : 1);
    if (float_type(t)) {  // multiples of 1/8 in [-4, 4]: exact in f32, sums of them too
      switch (d) {
        case Domain::Any: return (static_cast<int64_t>(r % 65) - 32) / 8.0;
        case Domain::Positive: return static_cast<double>(1 + r % 32) / 8.0;
        case Domain::NonNeg: return static_cast<double>(r % 33) / 8.0;
        case Domain::NonZero: { int64_t k = static_cast<int64_t>(r % 64) - 32; return (k >= 0 ? k + 1 : k) / 8.0; }
        default: break;
      }
    }
    if (t == DType::U8) {  // small, so that sums of 24 of them stay below 256
      return d == Domain::Positive || d == Domain::NonZero ? static_cast<double>(1 + r % 9) : static_cast<double>(r % 10);
    }
    switch (d) {  // i32, i64
      case Domain::Any: return static_cast<double>(static_cast<int64_t>(r % 41) - 20);
      case Domain::Positive: return static_cast<double>(1 + r % 20);
      case Domain::NonNeg: return static_cast<double>(r % 21);
      case Domain::NonZero: { int64_t k = static_cast<int64_t>(r % 40) - 20; return static_cast<double>(k >= 0 ? k + 1 : k); }
      default: break;
    }
    return 0;
  }
};

inline NDArray generate(const Shape& s, DType t, Domain d, uint64_t seed) {
  Gen g(seed);
  NDArray out(s, t);
  for (double& x : out.v) x = wrap(g.value(t, d), t);
  return out;
}

}  // namespace ref
