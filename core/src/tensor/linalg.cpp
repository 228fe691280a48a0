// matmul, dot, one_hot, gather, concatenate, stack — composites over primitives.
#include "graph/engine.hpp"
#include "tensor/internal.hpp"

namespace ravel {

using namespace detail;

// Note [Matmul as mul + sum]
// a @ b is written as (a[..., m, k, 1] * b[..., 1, k, n]).sum(k), exactly as in Tensorken. The
// scheduler recognises a sum over one axis of a product of two views as a contraction and
// runs one batched GEMM kernel, so the [..., m, k, n] product is never materialised
// (schedule/contraction.cpp). Keeping matmul a composite means it needs no derivative rule.
Tensor Tensor::matmul(const Tensor& o) const {
  check_defined(*this, "matmul");
  check_defined(o, "matmul");
  // The product inside is a mul: say matmul when the operands are on two devices.
  RAVEL_CHECK(device() == o.device() || engine().copy_on_mixed_devices(), DeviceError,
              "matmul: operands are on different devices, ", device().str(), " and ", o.device().str(),
              " (move one with to(), or set placement.on_mixed_devices to \"copy\")");
  RAVEL_CHECK(ndim() >= 1 && o.ndim() >= 1, ShapeError, "matmul expects operands with at least 1 axis, got ",
              shape_str(shape()), " @ ", shape_str(o.shape()));
  Tensor a = ndim() == 1 ? unsqueeze(0) : *this;     // [k] -> [1, k]
  Tensor b = o.ndim() == 1 ? o.unsqueeze(1) : o;     // [k] -> [k, 1]
  int64_t k = a.size(-1);
  RAVEL_CHECK(k == b.size(-2), ShapeError, "matmul: shapes ", shape_str(shape()), " and ", shape_str(o.shape()),
              " are not aligned: ", k, " (last axis of the first) != ", b.size(-2),
              " (second-to-last axis of the second)");
  DType t = promote(a.dtype(), b.dtype());
  Shape batch = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2),
                                 Shape(b.shape().begin(), b.shape().end() - 2));
  int64_t m = a.size(-2), n = b.size(-1);
  Shape full = batch;
  full.insert(full.end(), {m, k, n});
  check_rank(full.size(), "matmul");
  // The [..., m, k, n] product is never materialised (a contraction), but it is a view whose
  // size must fit (Note [Checked sizes]); say so in matmul's terms, naming both shapes.
  Shape out_shape = batch;
  out_shape.insert(out_shape.end(), {m, n});
  for (const Shape* s : {&out_shape, &full})
    RAVEL_CHECK(fits_bytes(*s, static_cast<int64_t>(dtype_size(t))), ShapeError, "matmul of ", shape_str(shape()),
                " and ", shape_str(o.shape()), ": the ", s == &full ? "[..., m, k, n] product " : "result ",
                shape_str(*s), " has more elements (or bytes) than fit in int64");
  Tensor prod = a.cast(t).unsqueeze(-1).expand(full).mul(b.cast(t).unsqueeze(-3).expand(full));
  Tensor r = make_reduce(ReduceOp::Sum, prod, 1u << (full.size() - 2));  // [..., m, 1, n]
  Shape out = batch;
  if (ndim() > 1) out.push_back(m);
  if (o.ndim() > 1) out.push_back(n);
  return r.reshape(out);
}

Tensor Tensor::dot(const Tensor& o) const {
  RAVEL_CHECK(ndim() == 1 && o.ndim() == 1, ShapeError, "dot expects two 1-D tensors, got ", shape_str(shape()),
              " and ", shape_str(o.shape()), " (use matmul for higher ranks)");
  return matmul(o);
}

namespace {
// [0, n) as i64 on `device`, for comparing with indices. Made on the host (decision 8) up to
// 2^16 values; above, as hi * B + lo from two ranges of about sqrt(n) values, so a huge n
// (one_hot(1 << 40)) allocates nothing while the graph is built, and realizing a result that
// cannot fit fails as any device allocation does, with an OutOfMemoryError naming the bytes.
Tensor class_range(int64_t n, const Device& device) {
  if (n <= (int64_t{1} << 16)) return Tensor::arange(0, static_cast<double>(n), 1, DType::I64, device);
  int64_t b = 1;
  while (b * b < n) b *= 2;
  const int64_t h = (n + b - 1) / b;
  Tensor hi = Tensor::arange(0, static_cast<double>(h), 1, DType::I64, device).reshape({h, 1});
  Tensor lo = Tensor::arange(0, static_cast<double>(b), 1, DType::I64, device).reshape({1, b});
  Tensor all = hi.mul(Tensor::full({}, static_cast<double>(b), DType::I64, device)).add(lo);  // [h, b]
  return all.reshape({h * b}).shrink({{0, n}});
}
}  // namespace

Tensor Tensor::one_hot(int64_t num_classes, DType dtype) const {
  check_defined(*this, "one_hot");
  RAVEL_CHECK(!is_float(this->dtype()), DTypeError, "one_hot expects an integer tensor, got ", dtype_name(this->dtype()));
  RAVEL_CHECK(num_classes > 0, ValueError, "one_hot expects num_classes > 0, got ", num_classes);
  Shape s = shape();
  s.push_back(num_classes);
  checked_bytes(s, static_cast<int64_t>(dtype_size(dtype)), "one_hot");  // names the result's shape
  check_index_bounds(*this, num_classes, "one_hot", concat(num_classes, " classes"));
  Tensor classes = class_range(num_classes, device());
  return unsqueeze(-1).cast(DType::I64).expand(s).eq(classes.expand(s)).cast(dtype);
}

Tensor Tensor::gather(int64_t axis, const Tensor& index) const {
  check_defined(*this, "gather");
  check_defined(index, "gather");
  int64_t d = normalize_axis(axis, ndim(), "gather");
  RAVEL_CHECK(index.ndim() == ndim(), ShapeError, "gather: index of shape ", shape_str(index.shape()),
              " must have as many axes as the input ", shape_str(shape()));
  RAVEL_CHECK(!is_float(index.dtype()), DTypeError, "gather expects an integer index, got ", dtype_name(index.dtype()));
  std::vector<std::pair<int64_t, int64_t>> keep;
  for (int64_t i = 0; i < ndim(); ++i) {
    RAVEL_CHECK(i == d || index.shape()[i] <= shape()[i], ShapeError, "gather: index shape ",
                shape_str(index.shape()), " exceeds input shape ", shape_str(shape()), " on axis ", i);
    keep.emplace_back(0, i == d ? shape()[i] : index.shape()[i]);
  }
  int64_t n = shape()[d];
  check_index_bounds(index, n, "gather", concat("axis ", d, " of the input ", shape_str(shape()), " (size ", n, ")"));
  // out[.., j, ..] = sum_c x[.., c, ..] * (index[.., j, ..] == c): a one-hot selection over a
  // new last axis c, so gather is differentiable with no rule of its own.
  std::vector<int64_t> order;  // move axis d last
  for (int64_t i = 0; i < ndim(); ++i)
    if (i != d) order.push_back(i);
  order.push_back(d);
  Tensor x = shrink(keep).permute(order).unsqueeze(d);  // [.., 1 (at d), .., n]
  Shape s = index.shape();
  s.push_back(n);
  Tensor hot = index.unsqueeze(-1).cast(DType::I64).expand(s).eq(
      arange(0, static_cast<double>(n), 1, DType::I64, device()).expand(s));
  return where(hot, x.expand(s), zeros({}, dtype(), device())).sum(-1).cast(dtype());
}

Tensor Tensor::concatenate(const std::vector<Tensor>& ts, int64_t axis) {
  RAVEL_CHECK(!ts.empty(), ValueError, "concatenate expects at least one tensor");
  for (auto& t : ts) check_defined(t, "concatenate");
  int64_t d = normalize_axis(axis, ts[0].ndim(), "concatenate");
  DType dt = ts[0].dtype();
  int64_t total = 0;
  for (auto& t : ts) {
    RAVEL_CHECK(t.ndim() == ts[0].ndim(), ShapeError, "concatenate: shapes ", shape_str(ts[0].shape()), " and ",
                shape_str(t.shape()), " have different ranks");
    for (int64_t i = 0; i < t.ndim(); ++i)
      RAVEL_CHECK(i == d || t.shape()[i] == ts[0].shape()[i], ShapeError, "concatenate along axis ", d, ": shapes ",
                  shape_str(ts[0].shape()), " and ", shape_str(t.shape()), " differ on axis ", i);
    dt = promote(dt, t.dtype());
    RAVEL_CHECK(!__builtin_add_overflow(total, t.shape()[d], &total), ShapeError, "concatenate along axis ", d,
                ": the sizes of axis ", d, " add up to more than fit in int64 (at ", shape_str(t.shape()), ")");
  }
  // Each piece is zero-padded to the full extent and the pieces are added: pad is free (a
  // validity range), and where pieces do not overlap the sum is exact.
  Tensor out;
  int64_t before = 0;
  for (auto& t : ts) {
    std::vector<std::pair<int64_t, int64_t>> w(t.ndim(), {0, 0});
    w[d] = {before, total - before - t.shape()[d]};
    Tensor p = t.cast(dt).pad(w);
    out = out.defined() ? out.add(p) : p;
    before += t.shape()[d];
  }
  return out;
}

Tensor Tensor::stack(const std::vector<Tensor>& ts, int64_t axis) {
  RAVEL_CHECK(!ts.empty(), ValueError, "stack expects at least one tensor");
  std::vector<Tensor> parts;
  for (auto& t : ts) {
    check_defined(t, "stack");
    RAVEL_CHECK(t.shape() == ts[0].shape(), ShapeError, "stack expects equal shapes, got ", shape_str(ts[0].shape()),
                " and ", shape_str(t.shape()));
    parts.push_back(t.unsqueeze(axis));
  }
  return concatenate(parts, axis);
}

}  // namespace ravel
