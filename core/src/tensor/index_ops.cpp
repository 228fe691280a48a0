// index_select, index_put and take_along_axis: the indexing forms of gather and scatter.
#include <cstdint>

#include "tensor/internal.hpp"
#include "tensor/scatter.hpp"

namespace ravel {

using namespace detail;

namespace detail::index_ops_impl {  // internal: not exported (core/exports.map)

constexpr int64_t kSignedHostCheck = int64_t{1} << 16;

std::string signed_position_str(int64_t flat, const Shape& shape) {
  Shape pos(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    pos[d] = flat % shape[d];
    flat /= shape[d];
  }
  return shape_str(pos);
}

void check_integer_index(const Tensor& index, const char* op) {
  check_defined(index, op);
  RAVEL_CHECK(!is_float(index.dtype()) && index.dtype() != DType::Bool, DTypeError, op,
              " expects an integer index tensor, got ", dtype_name(index.dtype()),
              index.dtype() == DType::Bool ? " (boolean masks are not supported here)" : "");
}

}  // namespace detail::index_ops_impl

namespace detail {

// The same costs as check_index_bounds (Note [Checked indices]): a host scan up to 2^16 entries,
// else a min and a max on the device and a scan only when they fall outside.
void check_signed_index_bounds(const Tensor& index, int64_t bound, const std::string& op, const std::string& what) {
  using namespace index_ops_impl;
  check_integer_index(index, op.c_str());
  if (index.numel() == 0) return;
  const Tensor i64 = index.cast(DType::I64);
  if (index.numel() > kSignedHostCheck) {
    Tensor lo = i64.min(), hi = i64.max();
    realize({lo, hi});
    if (lo.item<int64_t>() >= -bound && hi.item<int64_t>() < bound) return;
  }
  const std::vector<int64_t> values = i64.to_vector<int64_t>();
  for (size_t k = 0; k < values.size(); ++k) {
    const int64_t v = values[k];
    if (v >= -bound && v < bound) continue;
    throw IndexError(concat(op, ": index ", v, " at position ", signed_position_str(static_cast<int64_t>(k), index.shape()),
                            " is out of bounds for ", what, " (expected ", -bound, " <= index < ", bound, ")"));
  }
}

Tensor wrap_negative_index(const Tensor& index, int64_t n) {
  Tensor i = index.cast(DType::I64);
  Tensor zero = make_scalar(0, DType::I64, i.device());
  return Tensor::where(i.lt(zero), i.add(make_scalar(static_cast<double>(n), DType::I64, i.device())), i);
}

}  // namespace detail

Tensor Tensor::index_select(int64_t axis, const Tensor& index) const {
  check_defined(*this, "index_select");
  index_ops_impl::check_integer_index(index, "index_select");
  const int64_t d = normalize_axis(axis, ndim(), "index_select");
  RAVEL_CHECK(index.ndim() <= 1, ShapeError, "index_select expects a 1-D index, got shape ", shape_str(index.shape()));
  const int64_t n = shape()[d], m = index.numel();
  check_index_bounds(index, n, "index_select", concat("axis ", d, " of the input ", shape_str(shape()), " (size ", n, ")"));
  int64_t one_hot_elements = 0;
  if (is_float(dtype()) && numel() > 0 && m > 0 && !__builtin_mul_overflow(m, n, &one_hot_elements) &&
      one_hot_elements <= kOneHotGemmMaxElements) {
    // Rows of the axis: out = hot @ x2 with hot[i, c] = (index[i] == c), one GEMM (Note
    // [One-hot selections as a GEMM]).
    std::vector<int64_t> order = {d}, inverse(static_cast<size_t>(ndim()));
    for (int64_t k = 0; k < ndim(); ++k)
      if (k != d) order.push_back(k);
    for (int64_t k = 0; k < ndim(); ++k) inverse[static_cast<size_t>(order[static_cast<size_t>(k)])] = k;
    Tensor x2 = permute(order);
    Shape moved = x2.shape();
    moved[0] = m;
    Tensor hot = index.reshape({m, 1}).cast(DType::I64).expand({m, n}).eq(
        arange(0, static_cast<double>(n), 1, DType::I64, device()).reshape({1, n}).expand({m, n}));
    return onehot_matmul(hot, x2.reshape({n, numel() / n})).reshape(moved).permute(inverse);
  }
  // out[.., i, ..] = x[.., index[i], ..]: gather with the index broadcast over the other axes.
  Shape along(static_cast<size_t>(ndim()), 1), out = shape();
  along[d] = m;
  out[d] = m;
  return gather(d, index.reshape(along).expand(out));
}

Tensor Tensor::take_along_axis(const Tensor& indices, std::optional<int64_t> axis) const {
  check_defined(*this, "take_along_axis");
  index_ops_impl::check_integer_index(indices, "take_along_axis");
  if (!axis) {  // numpy: axis=None works on the flattened array, with 1-D indices
    RAVEL_CHECK(indices.ndim() == 1, ShapeError, "take_along_axis without an axis expects 1-D indices, got shape ",
                shape_str(indices.shape()));
    return reshape({numel()}).take_along_axis(indices, 0);
  }
  const int64_t d = normalize_axis(*axis, ndim(), "take_along_axis");
  RAVEL_CHECK(indices.ndim() == ndim(), ShapeError, "take_along_axis: indices of shape ", shape_str(indices.shape()),
              " must have as many axes as the input ", shape_str(shape()));
  // The other axes broadcast against each other (NumPy's fancy indexing underneath).
  Shape xs = shape(), is = indices.shape();
  for (int64_t k = 0; k < ndim(); ++k) {
    if (k == d || xs[k] == is[k]) continue;
    RAVEL_CHECK(xs[k] == 1 || is[k] == 1, ShapeError, "take_along_axis: indices of shape ", shape_str(indices.shape()),
                " do not broadcast with the input ", shape_str(shape()), " on axis ", k);
    xs[k] = is[k] = xs[k] == 1 ? is[k] : xs[k];
  }
  const int64_t n = shape()[d];
  check_signed_index_bounds(indices, n, "take_along_axis",
                            concat("axis ", d, " of the input ", shape_str(shape()), " (size ", n, ")"));
  return expand(xs).gather(d, wrap_negative_index(indices, n).expand(is));
}

// Note [index_put as a scatter along one flattened axis]
// The k index tensors name positions of the first k axes; their row-major flat number
// f = sum_t i_t * stride_t turns x[i_0, .., i_{k-1}] = v into a scatter along axis 0 of x viewed
// as [prod(shape[:k]), shape[k:]...], with f broadcast over the remaining axes. Accumulate is a
// scatter-add (repeats add up); otherwise the last repeat in B's row-major order wins. The
// index is broadcast over the remaining axes, so a float scatter_along takes its GEMM path
// (Note [One-hot selections as a GEMM]).
Tensor Tensor::index_put(const std::vector<Tensor>& indices, const Tensor& values, bool accumulate) const {
  check_defined(*this, "index_put");
  check_defined(values, "index_put");
  const int64_t k = static_cast<int64_t>(indices.size());
  RAVEL_CHECK(k >= 1 && k <= ndim(), IndexError, "index_put: ", k, " index tensors for an input of shape ",
              shape_str(shape()), " (expected 1 to ", ndim(), ")");
  for (const Tensor& i : indices) index_ops_impl::check_integer_index(i, "index_put");
  Shape b = indices[0].shape();  // the index tensors' common (broadcast) shape
  for (int64_t t = 1; t < k; ++t) b = broadcast_shapes(b, indices[t].shape());
  const Device dev = device();
  Tensor flat = make_scalar(0, DType::I64, dev).expand(b);
  int64_t p = 1;
  for (int64_t t = 0; t < k; ++t) {
    const int64_t n = shape()[t];
    check_signed_index_bounds(indices[t], n, "index_put",
                              concat("axis ", t, " of the input ", shape_str(shape()), " (size ", n, ")"));
    flat = flat.mul(make_scalar(static_cast<double>(n), DType::I64, dev)).add(wrap_negative_index(indices[t], n).expand(b));
    p *= n;
  }
  const Shape rest(shape().begin() + k, shape().end());
  Shape target = b;
  target.insert(target.end(), rest.begin(), rest.end());
  bool fits = values.ndim() <= static_cast<int64_t>(target.size());
  for (int64_t a = 1; fits && a <= values.ndim(); ++a) {
    const int64_t have = values.shape()[values.shape().size() - a], want = target[target.size() - a];
    fits = have == want || have == 1;
  }
  RAVEL_CHECK(fits, ShapeError, "index_put: values of shape ", shape_str(values.shape()),
              " do not broadcast to the indexed shape ", shape_str(target));
  int64_t m = 1;
  for (int64_t s : b) m *= s;
  Shape x2 = {p}, v2 = {m}, i2 = {m};
  x2.insert(x2.end(), rest.begin(), rest.end());
  v2.insert(v2.end(), rest.begin(), rest.end());
  i2.insert(i2.end(), rest.size(), 1);
  if (m == 0 || numel() == 0) return *this;
  Tensor v = values.cast(dtype()).expand(target).reshape(v2);
  Tensor idx = flat.reshape(i2).expand(v2);
  return scatter_along(reshape(x2), 0, idx, v, accumulate ? ScatterMode::Sum : ScatterMode::Replace, true, "index_put")
      .reshape(shape());
}

}  // namespace ravel
