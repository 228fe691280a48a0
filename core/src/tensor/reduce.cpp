// Reductions and the composites built on them (mean, var, softmax, argmax, cumsum, ...).
#include <cmath>
#include <limits>

#include "graph/engine.hpp"
#include "tensor/internal.hpp"

namespace ravel {

using namespace detail;

namespace {
// Reduces with the primitive, then drops the reduced axes unless keepdim.
Tensor reduce(const Tensor& t, ReduceOp op, const Axes& axes, bool keepdim, const char* name) {
  check_defined(t, name);
  uint32_t mask = axes_mask(axes, t.ndim(), name);
  if (mask == 0) return t;  // no axes (numpy's axis=()): nothing to reduce
  Tensor r = make_reduce(op, t, mask);
  if (keepdim) return r;
  Shape s;
  for (int64_t d = 0; d < t.ndim(); ++d)
    if (!(mask & (1u << d))) s.push_back(t.shape()[d]);
  return r.reshape(s);
}

int64_t reduced_count(const Tensor& t, const Axes& axes, const char* name) {
  uint32_t mask = axes_mask(axes, t.ndim(), name);
  int64_t n = 1;
  for (int64_t d = 0; d < t.ndim(); ++d)
    if (mask & (1u << d)) n *= t.shape()[d];
  return n;
}

// ~x: an order-reversing bijection on integers that, unlike negation, never overflows.
Tensor bit_not(const Tensor& t) { return t.logical_xor(Tensor::full_like(t, t.dtype() == DType::U8 ? 255 : -1)); }
}  // namespace

// Integer sums and products accumulate in i64 and give i64, as NumPy's and PyTorch's do: an i32
// sum of 2^31 wrapped silently before (and a bool sum counts, as in NumPy). u64 stays u64
// (NumPy's np.sum of uint64 is uint64; i64 would turn large values negative).
static Tensor widen_integers(const Tensor& t, const char* op) {
  check_defined(t, op);
  const DType d = t.dtype();
  const bool narrow = d == DType::Bool || (is_integer(d) && d != DType::I64 && d != DType::U64);
  return narrow ? t.cast(DType::I64) : t;
}
Tensor Tensor::sum(Axes axes, bool keepdim) const {
  Tensor x = widen_integers(*this, "sum");
  return reduce(x, ReduceOp::Sum, axes, keepdim, "sum");
}
Tensor Tensor::prod(Axes axes, bool keepdim) const {
  Tensor x = widen_integers(*this, "prod");
  return reduce(x, ReduceOp::Prod, axes, keepdim, "prod");
}
Tensor Tensor::max(Axes axes, bool keepdim) const {
  check_defined(*this, "max");
  RAVEL_CHECK(reduced_count(*this, axes, "max") > 0, ValueError, "max of an empty selection (shape ",
              shape_str(shape()), "): a maximum needs at least one element");
  return reduce(*this, ReduceOp::Max, axes, keepdim, "max");
}

Tensor Tensor::min(Axes axes, bool keepdim) const {
  check_defined(*this, "min");
  // Checked here so that the errors name min, not the max it is computed with.
  RAVEL_CHECK(reduced_count(*this, axes, "min") > 0, ValueError, "min of an empty selection (shape ",
              shape_str(shape()), "): a minimum needs at least one element");
  if (is_float(dtype())) return neg().max(axes, keepdim).neg();
  if (dtype() == DType::Bool) return reduce(*this, ReduceOp::Prod, axes, keepdim, "min");  // and
  return bit_not(bit_not(*this).max(axes, keepdim));
}

Tensor Tensor::mean(Axes axes, bool keepdim) const {
  check_defined(*this, "mean");
  Tensor x = is_float(dtype()) ? *this : cast(DType::F32);
  int64_t n = reduced_count(x, axes, "mean");
  return x.sum(axes, keepdim).div(scalar_like(x, static_cast<double>(n)));
}

Tensor Tensor::var(Axes axes, bool keepdim, int64_t correction) const {
  check_defined(*this, "var");
  Tensor x = is_float(dtype()) ? *this : cast(DType::F32);
  int64_t n = reduced_count(x, axes, "var");
  Tensor centered = x.sub(x.mean(axes, true));
  double denom = std::max<double>(0.0, static_cast<double>(n - correction));
  return centered.square().sum(axes, keepdim).div(scalar_like(x, denom));
}

// Note [Shift without gradient]: logsumexp, softmax and log_softmax shift by the max under
// stop_gradient (as jax.nn.logsumexp does): the result does not depend on the shift, so its
// gradient through the shift is exactly 0, and leaving it out avoids the tie-splitting max rule
// and any inf - inf. The gradients are then softmax(x) and g - softmax(x) sum(g): finite for
// every finite input, ±1e3 and ±FLT_MAX included.
namespace {
Tensor shift_of(const Tensor& x, const Axes& axes) {
  // An all -inf (or +inf) slice keeps a shift of 0 (giving -inf, not NaN, for all -inf).
  Tensor m = x.max(axes, true).detach();
  return Tensor::where(m.eq(scalar_like(m, -INFINITY)).logical_or(m.eq(scalar_like(m, INFINITY))), Tensor::zeros_like(m), m);
}
}  // namespace

// Note [Online logsumexp]
// A device that implements RVL_REDUCE_LOGSUMEXP (ABI 1.4; its OpSet, Note [Capabilities] in
// graph/ops.hpp) computes log sum e^x in one pass (running max and rescaled sum,
// plugins/tbb_cpu/lse_reduce.cpp), so logsumexp is one kernel. A device without it (a 1.0-1.3
// plugin, or RAVEL_MASK_OPS=LOGSUMEXP) gets the reduction's row of the core's decompositions,
// LseRow below: a max, then a sum of exponentials, lse = m + log s with m under stop_gradient
// (Note [Shift without gradient]). Unlike the elementwise rows (decomposed when a
// kernel is lowered, <ravel/decompose.hpp>) it is applied while the graph is built, because it
// needs two kernels where the reduction is one. logsumexp only rounds its result once, so it
// stays in x's dtype on both paths.
//
// Note [Softmax never adds the max back]
// softmax and log_softmax are the decomposition on every device: e^(x - m) / sum e^(x - m) and
// (x - m) - log sum e^(x - m), m the row's max. They were x - lse with lse = m + log s from the
// reduction (widened to f64 for f32 x), which keeps f32 rounding only while f64's spacing at
// |m| stays below log s's digits, |x| up to ~2^28: at FLT_MAX the spacing is 2^75, lse rounded
// to m, and the row [FLT_MAX, -FLT_MAX, 0, FLT_MAX] gave 1, 0, 0, 1 (sum 2) where the answer is
// 0.5, 0, 0, 0.5. The reduction returns lse alone, so no later kernel can recover log s: m must
// be subtracted before the sum, which takes the max as its own reduction. On a device with
// chains of row reductions (ABI 1.11: tbb_cpu, HIP, OpenCL, Level Zero under `full`) the max is
// a stage of the sum's program and the normalisation its epilogue, one kernel that reads x
// once from memory, as the one-kernel x - lse was; tbb_cpu measured it faster than that
// (4096², docs/performance.md "helper lnorm2"). A device with the LOGSUMEXP reduction but no
// chains pays two or three more kernels (docs/architecture.md decision 73).
namespace {
bool has_lse_reduce(const Tensor& x) { return engine().device_has_reduce(x.device(), ReduceOp::LogSumExp); }
// Both paths refuse an empty selection, as the decomposition's max always did (the reduction
// alone would give -inf): the result must not depend on the device.
void check_nonempty(const Tensor& x, const Axes& axes, const char* op) {
  RAVEL_CHECK(reduced_count(x, axes, op) > 0, ValueError, op, " of an empty selection (shape ", shape_str(x.shape()),
              "): it needs at least one element");
}
// The LOGSUMEXP row: logsumexp of x over `axes` (kept as size 1) through the reduction where the
// device has it, else through the decomposition, chosen once from the device's OpSet; softmax and
// log_softmax through the decomposition everywhere (Note [Softmax never adds the max back]). The
// softmax normalises e^(x - max) by its sum (no inf guard: a row with +inf is NaN either way),
// log_softmax is (x - m) - log sum e^(x - m) (never adds m back, so logits of ±1000 keep f32
// accuracy, and ±FLT_MAX stays exact).
class LseRow {
 public:
  LseRow(const Tensor& x, Axes axes, const char* op)
      : x_(x), axes_(std::move(axes)), mask_(axes_mask(axes_, x.ndim(), op)), reduce_(has_lse_reduce(x)) {}
  Tensor logsumexp() const {
    if (reduce_) return make_reduce(ReduceOp::LogSumExp, x_, mask_);
    Tensor m = shift_of(x_, axes_);
    return x_.sub(m).exp().sum(axes_, true).log().add(m);
  }
  Tensor softmax() const {
    Tensor e = x_.sub(x_.max(axes_, true).detach()).exp();
    return e.div(e.sum(axes_, true));
  }
  Tensor log_softmax() const {
    Tensor z = x_.sub(shift_of(x_, axes_));
    return z.sub(z.exp().sum(axes_, true).log());
  }

 private:
  const Tensor& x_;
  Axes axes_;
  uint32_t mask_;
  bool reduce_;
};
}  // namespace

Tensor Tensor::logsumexp(Axes axes, bool keepdim) const {
  check_defined(*this, "logsumexp");
  axes_mask(axes, ndim(), "logsumexp");  // axis errors name logsumexp
  Tensor x = is_float(dtype()) ? *this : cast(DType::F32);
  check_nonempty(x, axes, "logsumexp");
  Tensor r = LseRow(x, axes, "logsumexp").logsumexp();
  return keepdim ? r : r.squeeze(axes);
}

Tensor Tensor::softmax(int64_t axis) const {
  check_defined(*this, "softmax");
  normalize_axis(axis, ndim(), "softmax");  // axis errors name softmax, not the max inside it
  Tensor x = is_float(dtype()) ? *this : cast(DType::F32);
  check_nonempty(x, Axes{axis}, "softmax");
  return LseRow(x, Axes{axis}, "softmax").softmax();
}

Tensor Tensor::log_softmax(int64_t axis) const {
  check_defined(*this, "log_softmax");
  normalize_axis(axis, ndim(), "log_softmax");
  Tensor x = is_float(dtype()) ? *this : cast(DType::F32);
  check_nonempty(x, Axes{axis}, "log_softmax");
  return LseRow(x, Axes{axis}, "log_softmax").log_softmax();
}

namespace {
// argmax/argmin's index dtype: an integer one that holds every index of the reduced extent.
void check_index_dtype(DType dtype, int64_t extent, const char* op) {
  RAVEL_CHECK(dtype == DType::I64 || dtype == DType::I32 || dtype == DType::U8, DTypeError, op,
              ": expected an integer index dtype (i64, i32 or u8), got ", dtype_name(dtype));
  const int64_t max = dtype == DType::U8 ? 255 : dtype == DType::I32 ? INT32_MAX : INT64_MAX;
  RAVEL_CHECK(extent - 1 <= max, DTypeError, op, ": indices up to ", extent - 1, " do not fit in ",
              dtype_name(dtype), " (at most ", max, ")");
}
}  // namespace

namespace {
// argmax of x, errors worded as `op` (argmin calls it on an order-reversed x).
Tensor arg_best(const Tensor& x, std::optional<int64_t> axis, bool keepdim, DType dtype, const char* op) {
  check_defined(x, op);
  if (!axis) {
    Tensor r = arg_best(x.flatten(), 0, false, dtype, op);
    return keepdim ? r.reshape(Shape(x.ndim(), 1)) : r;
  }
  int64_t d = normalize_axis(*axis, x.ndim(), op);
  int64_t n = x.shape()[d];
  RAVEL_CHECK(n > 0, ValueError, op, " of an empty axis (shape ", shape_str(x.shape()), ", axis ", d, ")");
  check_index_dtype(dtype, n, op);
  // The first maximum wins: weight position i by n - i, keep the largest weight among maxima.
  Shape s(x.ndim(), 1);
  s[d] = n;
  Tensor weight = Tensor::arange(static_cast<double>(n), 0.0, -1.0, DType::I64, x.device()).reshape(s);
  // NaN counts as the maximum, and the first NaN wins (numpy.argmax, torch.argmax).
  Tensor is_max = x.eq(x.max(d, true));
  if (is_float(x.dtype())) is_max = is_max.logical_or(x.ne(x));
  Tensor best = Tensor::where(is_max, weight.expand(x.shape()), Tensor::zeros({}, DType::I64, x.device())).max(d, keepdim);
  return scalar_like(best, static_cast<double>(n)).sub(best).cast(dtype);
}
}  // namespace

Tensor Tensor::argmax(std::optional<int64_t> axis, bool keepdim, DType dtype) const {
  return arg_best(*this, axis, keepdim, dtype, "argmax");
}

Tensor Tensor::argmin(std::optional<int64_t> axis, bool keepdim, DType dtype) const {
  check_defined(*this, "argmin");
  // The argmax of an order-reversing map: -x for floats (NaN stays NaN, so it still wins, as in
  // numpy.argmin), ~x for integers (never overflows, unlike -x at the minimum), not for bools.
  Tensor r = is_float(this->dtype()) ? neg() : this->dtype() == DType::Bool ? logical_not() : bit_not(*this);
  return arg_best(r, axis, keepdim, dtype, "argmin");
}

Tensor Tensor::cumsum(int64_t axis) const {
  check_defined(*this, "cumsum");
  int64_t d = normalize_axis(axis, ndim(), "cumsum");
  int64_t n = shape()[d];
  Tensor x = (dtype() == DType::Bool ? cast(DType::I64) : *this).transpose(d, -1);  // [..., n]
  // out[..., i] = sum_j x[..., j] * (j <= i): a masked sum over an [..., n(i), n(j)] view.
  Shape sq = x.shape();
  sq.insert(sq.end() - 1, n);
  Tensor r0 = arange(0, static_cast<double>(n), 1, DType::I64, device());
  Tensor j = r0.reshape({1, n}), i = r0.reshape({n, 1});
  Tensor tri = j.le(i);  // [n, n]
  Tensor r = where(tri, x.unsqueeze(-2).expand(sq), zeros({}, x.dtype(), device())).sum(-1);
  return r.transpose(d, -1);
}

}  // namespace ravel
