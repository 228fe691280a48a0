// How ops propagate over global-view MeshTensors (ravel/mesh_tensor.hpp; Note [Global view over
// ranks] in mesh_tensor.cpp): the local rules of docs/sharding.md on each rank's part, and one of
// the rank steps (mesh_rank_steps.hpp) where those would need another rank's data.
#include <numeric>

#include "distributed/mesh_rank_steps.hpp"
#include "distributed/mesh_tensor_access.hpp"
#include "ravel/error.hpp"

namespace ravel::distributed {

using namespace mesh_detail;
using Access = MeshTensorAccess;

namespace {

using Binary = Tensor (*)(const Tensor&, const Tensor&);

Shape broadcast_shape(const MeshTensor& a, const MeshTensor& b, const char* what) {
  const size_t n = std::max(a.shape().size(), b.shape().size());
  Shape out(n, 1);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i + a.shape().size() >= n ? a.shape()[i + a.shape().size() - n] : 1;
    const int64_t db = i + b.shape().size() >= n ? b.shape()[i + b.shape().size() - n] : 1;
    RAVEL_CHECK(da == db || da == 1 || db == 1, ShapeError, "MeshTensor::", what, ": shapes ", shape_str(a.shape()),
                " and ", shape_str(b.shape()), " do not broadcast (", a.sharding().str(), "; ", b.sharding().str(),
                ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// The local part of `other` to combine with a part split along output axis `out_axis` of a
// result of rank `out_ndim`, at the ranks' `bounds`: its own part where it is split there too,
// else this rank's block of the replicated value (entered: Note [Global-view derivatives]), or
// the whole value where it broadcasts along that axis.
Tensor operand_for_split(const MeshTensor& other, int64_t out_axis, int64_t out_ndim,
                         const std::vector<int64_t>& bounds) {
  const int64_t k = out_axis - (out_ndim - other.ndim());  // other's own axis, < 0 when broadcast
  MeshTensor o = other;
  if (o.axis() && *o.axis() == k && o.rank_bounds() == bounds) return o.local();
  if (o.axis()) o = o.gathered();  // split along another axis or elsewhere: reshard through the whole value
  if (k < 0 || o.shape()[static_cast<size_t>(k)] == 1) return distributed::detail::rank_enter(local_on_one(o));
  return entered_block(o, k, bounds);
}

MeshTensor binary(const MeshTensor& a, const MeshTensor& b, Binary op, const char* what) {
  RAVEL_CHECK(a.defined() && b.defined(), ValueError, "MeshTensor::", what, ": an operand is undefined");
  check_same_mesh(a, b, what);
  const Shape out = broadcast_shape(a, b, what);
  const int64_t n = static_cast<int64_t>(out.size());
  if (a.replicated() && b.replicated()) return Access::replicated(a, op(a.local(), b.local()), out);
  // The result is split like the first split operand, as the local rules do.
  const bool a_leads = !a.replicated();
  const MeshTensor& lead = a_leads ? a : b;
  const MeshTensor& other = a_leads ? b : a;
  const int64_t axis = *lead.axis() + (n - lead.ndim());
  RAVEL_CHECK(lead.shape()[static_cast<size_t>(*lead.axis())] == out[static_cast<size_t>(axis)], ShapeError,
              "MeshTensor::", what, ": the split axis of ", lead.sharding().str(), " is broadcast by ",
              other.sharding().str(), "; gather it first");
  const Tensor o = operand_for_split(other, axis, n, lead.rank_bounds());
  return Access::make(a, a_leads ? op(lead.local(), o) : op(o, lead.local()), axis, lead.rank_bounds(), out);
}

MeshTensor unary(const MeshTensor& a, const Tensor& local) {
  return Access::make(a, local, a.axis(), a.rank_bounds(), a.shape());
}

Tensor add(const Tensor& x, const Tensor& y) { return x + y; }
Tensor sub(const Tensor& x, const Tensor& y) { return x - y; }
Tensor mul(const Tensor& x, const Tensor& y) { return x * y; }
Tensor div(const Tensor& x, const Tensor& y) { return x / y; }

int64_t checked_axis(int64_t axis, int64_t ndim, const char* what) {
  RAVEL_CHECK(axis >= -ndim && axis < ndim, IndexError, "MeshTensor::", what, ": axis ", axis,
              " is out of range for a tensor of rank ", ndim);
  return axis < 0 ? axis + ndim : axis;
}

Shape reduced_shape(const Shape& s, std::optional<int64_t> axis, bool keepdim) {
  Shape out;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool gone = !axis || static_cast<int64_t>(i) == *axis;
    if (!gone) out.push_back(s[i]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

MeshTensor reduction(const MeshTensor& m, std::optional<int64_t> axis, bool keepdim, ReduceOp op, const char* what) {
  RAVEL_CHECK(m.defined(), ValueError, "MeshTensor::", what, ": the tensor is undefined");
  if (axis) axis = checked_axis(*axis, m.ndim(), what);
  const Axes axes = axis ? Axes(*axis) : Axes::every();
  auto local_reduce = [&](const Tensor& t) {
    switch (op) {
      case ReduceOp::Max: return t.max(axes, keepdim);
      case ReduceOp::Min: return t.min(axes, keepdim);
      default: return t.sum(axes, keepdim);
    }
  };
  const Shape out = reduced_shape(m.shape(), axis, keepdim);
  if (m.replicated()) return Access::replicated(m, local_reduce(m.local()), out);
  const int64_t k = *m.axis();
  if (axis && *axis != k)
    return Access::make(m, local_reduce(m.local()), k - (*axis < k && !keepdim), m.rank_bounds(), out);
  // A rank whose block is empty has no extreme to contribute: the same error on every rank (all
  // of them know the bounds), where the local max would fail on that rank alone.
  const auto& b = m.rank_bounds();
  for (size_t r = 0; op != ReduceOp::Sum && r + 1 < b.size(); ++r)
    RAVEL_CHECK(b[r + 1] > b[r], ShapeError, "MeshTensor::", what, ": rank ", r, "'s block of ", m.sharding().str(),
                " is empty; a max or min over the split axis needs an element on every rank");
  // Over the split axis: this rank's partial result (its devices' partials folded on one), then
  // the combine across ranks.
  const Tensor partial = local_reduce(m.local()).to(Access::devices(m)[0]);
  Tensor ties;  // max and min: how many of this rank's elements hold its extreme (the derivative's shares)
  if (op != ReduceOp::Sum && is_float(m.dtype()) && Access::ranks(m) > 1) {
    const Tensor v = m.local().detach();
    const Tensor extreme = op == ReduceOp::Max ? v.max(axes, true) : v.min(axes, true);
    ties = v.eq(extreme).cast(m.dtype()).sum(axes, keepdim).to(Access::devices(m)[0]);
  }
  const Tensor whole = distributed::detail::rank_combine(partial, op, ties);
  return Access::replicated(m, replicated_locally(whole, Access::devices(m)), out);
}

}  // namespace

MeshTensor operator+(const MeshTensor& a, const MeshTensor& b) { return binary(a, b, add, "operator+"); }
MeshTensor operator-(const MeshTensor& a, const MeshTensor& b) { return binary(a, b, sub, "operator-"); }
MeshTensor operator*(const MeshTensor& a, const MeshTensor& b) { return binary(a, b, mul, "operator*"); }
MeshTensor operator/(const MeshTensor& a, const MeshTensor& b) { return binary(a, b, div, "operator/"); }
MeshTensor operator*(const MeshTensor& a, double s) { return unary(a, a.local() * s); }
MeshTensor operator+(const MeshTensor& a, double s) { return unary(a, a.local() + s); }
MeshTensor MeshTensor::tanh() const { return unary(*this, local_.tanh()); }
MeshTensor MeshTensor::exp() const { return unary(*this, local_.exp()); }
MeshTensor MeshTensor::relu() const { return unary(*this, local_.relu()); }
MeshTensor MeshTensor::operator-() const { return unary(*this, -local_); }
MeshTensor MeshTensor::map_elementwise(const std::function<Tensor(const Tensor&)>& fn) const {
  const Tensor out = fn(local_);
  RAVEL_CHECK(out.defined() && out.shape() == local_.shape(), ShapeError, "MeshTensor::map_elementwise: the function ",
              "changed the part's shape ", shape_str(local_.shape()), " to ",
              out.defined() ? shape_str(out.shape()) : "(undefined)", "; it must be elementwise");
  return unary(*this, out);
}

MeshTensor MeshTensor::permute(std::vector<int64_t> order) const {
  RAVEL_CHECK(static_cast<int64_t>(order.size()) == ndim(), ShapeError, "MeshTensor::permute: ", order.size(),
              " axes for a tensor of rank ", ndim());
  Shape out;
  std::optional<int64_t> axis;
  for (size_t i = 0; i < order.size(); ++i) {
    order[i] = checked_axis(order[i], ndim(), "permute");
    out.push_back(shape_[static_cast<size_t>(order[i])]);
    if (axis_ && order[i] == *axis_) axis = static_cast<int64_t>(i);
  }
  return Access::make(*this, local_.permute(order), axis, bounds_, out);  // the local permute checks the order
}

MeshTensor MeshTensor::reshape(Shape shape) const {
  // Resolve one -1 against the global element count.
  const int64_t total = std::accumulate(shape_.begin(), shape_.end(), int64_t{1}, std::multiplies<>());
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && infer < 0) infer = static_cast<int64_t>(i);
    else known *= shape[i];
  }
  if (infer >= 0 && known != 0 && total % known == 0) shape[static_cast<size_t>(infer)] = total / known;
  const int64_t got = std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
  RAVEL_CHECK(got == total, ShapeError, "MeshTensor::reshape: ", sharding().str(), " cannot take shape ",
              shape_str(shape));
  if (!axis_) return Access::replicated(*this, local_.reshape(shape), shape);
  // The rank boundaries survive when the blocks are even, the axes before the split have the
  // same extent and the new axis there is a multiple of the ranks: each rank's block is then one
  // contiguous run of it.
  const int64_t k = *axis_;
  if (shape_[static_cast<size_t>(k)] % ranks_ != 0) return gathered().reshape(shape);
  const int64_t outer = std::accumulate(shape_.begin(), shape_.begin() + k, int64_t{1}, std::multiplies<>());
  int64_t prefix = 1;
  for (size_t j = 0; j < shape.size(); ++j) {
    if (prefix == outer && shape[j] % ranks_ == 0 && shape[j] != 1) {
      Shape part = shape;
      part[j] /= ranks_;
      return Access::make(*this, local_.reshape(part), static_cast<int64_t>(j), even_rank_bounds(shape[j], ranks_),
                          shape);
    }
    prefix *= shape[j];
    if (prefix > outer) break;
  }
  return gathered().reshape(shape);  // the boundary moves: through the whole value, replicated
}

MeshTensor MeshTensor::sum(std::optional<int64_t> axis, bool keepdim) const {
  return reduction(*this, axis, keepdim, ReduceOp::Sum, "sum");
}
MeshTensor MeshTensor::max(std::optional<int64_t> axis, bool keepdim) const {
  return reduction(*this, axis, keepdim, ReduceOp::Max, "max");
}
MeshTensor MeshTensor::min(std::optional<int64_t> axis, bool keepdim) const {
  return reduction(*this, axis, keepdim, ReduceOp::Min, "min");
}
MeshTensor MeshTensor::mean(std::optional<int64_t> axis, bool keepdim) const {
  const MeshTensor s = sum(axis, keepdim);
  const int64_t count = axis ? shape_[static_cast<size_t>(checked_axis(*axis, ndim(), "mean"))]
                             : std::accumulate(shape_.begin(), shape_.end(), int64_t{1}, std::multiplies<>());
  return s * (1.0 / static_cast<double>(count));
}

MeshTensor MeshTensor::matmul(const MeshTensor& b) const {
  const MeshTensor& a = *this;
  RAVEL_CHECK(a.defined() && b.defined(), ValueError, "MeshTensor::matmul: an operand is undefined");
  check_same_mesh(a, b, "matmul");
  RAVEL_CHECK(a.ndim() >= 2 && b.ndim() == 2 && a.shape().back() == b.shape()[0], ShapeError,
              "MeshTensor::matmul: ", shape_str(a.shape()), " x ", shape_str(b.shape()),
              " (a of rank >= 2 times a matrix whose rows match a's last axis)");
  Shape out = a.shape();
  out.back() = b.shape()[1];
  const int64_t ka = a.ndim() - 1;
  const auto a_axis = a.axis(), b_axis = b.axis();
  if (!a_axis && !b_axis) return Access::replicated(a, a.local().matmul(b.local()), out);
  const bool a_on_k = a_axis == ka, b_on_k = b_axis == int64_t{0};
  if (a_on_k || b_on_k) {
    const std::vector<int64_t>& kb = a_on_k ? a.rank_bounds() : b.rank_bounds();
    if ((a_on_k || !a_axis) && (b_on_k ? b.rank_bounds() == kb : !b_axis)) {
      // Row-parallel: each rank's K block of both, a partial product, combined across the ranks.
      const Tensor x = a_on_k ? a.local() : entered_block(a, ka, kb);
      const Tensor w = b_on_k ? b.local() : entered_block(b, 0, kb);
      const Tensor partial = x.matmul(w).to(devices_[0]);
      const Tensor whole = distributed::detail::rank_combine(partial, ReduceOp::Sum);
      return Access::replicated(a, replicated_locally(whole, devices_), out);
    }
  } else if (a_axis && !b_axis) {  // a split on a batch or M axis: b whole on every rank
    return Access::make(a, a.local().matmul(distributed::detail::rank_enter(local_on_one(b))), a_axis,
                        a.rank_bounds(), out);
  } else if (!a_axis && b_axis == int64_t{1}) {  // column-parallel
    return Access::make(a, distributed::detail::rank_enter(local_on_one(a)).matmul(b.local()), ka, b.rank_bounds(),
                        out);
  }
  // Split differently: reshard through the whole value of b (else a), then the rules above.
  return b_axis ? a.matmul(b.gathered()) : a.gathered().matmul(b);
}

}  // namespace ravel::distributed
