// hot @ x for a 0/1 matrix `hot`, on the device's GEMM, exact when x holds infinities or NaN.
#include <limits>

#include "tensor/custom_vjp.hpp"
#include "tensor/internal.hpp"
#include "tensor/scatter.hpp"

namespace ravel {

using namespace detail;

// Note [One-hot selections as a GEMM]
// When an index names whole rows (index_select, index_put: the index is the same for every
// element of a row), the one-hot selection is a matrix product, out = hot @ x with hot[i, c] =
// (index[i] == c), and the scheduler runs it as one contraction at GEMM speed instead of
// index x rows x columns compare-selects (index_put of 512 rows into [10000, 64]: 43 ms against
// 2.9 s). Two things a plain matmul gets wrong are handled here:
//  - 0 * inf = NaN, so one non-finite value in x would poison every output column it shares.
//    The product is taken of x with its non-finite entries zeroed, and of three indicator
//    matrices (x == +inf, x == -inf, x is NaN) in the same GEMM (columns side by side); an
//    output that received any NaN, or both infinities, is NaN, else +inf or -inf if it received
//    one, else the finite sum: IEEE addition's result for the selected terms.
//  - its derivative would be the chain rule through those selections (zero for the non-finite
//    entries); the rule is the adjoint selection itself, d x = hot^T @ g (again through this
//    function, so it is exact and differentiable again).
// The cost is hot materialised as a [rows, cols] matrix of x's dtype (the GEMM's operand):
// kOneHotGemmMaxElements bounds it; larger selections take the compare-select composites.
namespace detail::onehot_gemm_impl {  // internal: not exported (core/exports.map)

Tensor product(const Tensor& hot, const Tensor& x) {
  const Device dev = x.device();
  const DType dt = x.dtype();
  const int64_t r = x.shape()[1];
  Tensor zero = make_scalar(0, dt, dev);
  Tensor inf = make_scalar(std::numeric_limits<double>::infinity(), dt, dev);
  Tensor finite = x.sub(x).eq(zero);  // false for +-inf and NaN
  Tensor pos = x.eq(inf), neg = x.eq(inf.neg()), nan = x.ne(x);
  Tensor cols = Tensor::concatenate({Tensor::where(finite, x, zero), pos.cast(dt), neg.cast(dt), nan.cast(dt)}, 1);
  Tensor all = hot.cast(dt).matmul(cols);  // [rows, 4r]
  auto part = [&](int64_t k) { return all.shrink({{0, all.shape()[0]}, {k * r, (k + 1) * r}}); };
  Tensor sum = part(0), got_pos = part(1).gt(zero), got_neg = part(2).gt(zero), got_nan = part(3).gt(zero);
  Tensor is_nan = got_nan.logical_or(got_pos.logical_and(got_neg));
  return Tensor::where(is_nan, make_scalar(std::numeric_limits<double>::quiet_NaN(), dt, dev),
                       Tensor::where(got_pos, inf, Tensor::where(got_neg, inf.neg(), sum)));
}

}  // namespace detail::onehot_gemm_impl

namespace detail {

Tensor onehot_matmul(const Tensor& hot, const Tensor& x) {
  Tensor y = onehot_gemm_impl::product(hot, x);
  auto rule = std::make_shared<const CustomRule>(CustomRule{
      "one-hot selection",
      [hot](const std::vector<Tensor>&, const Tensor&, const Tensor& g) {
        return std::vector<Tensor>{onehot_matmul(hot.transpose(), g)};
      },
      false});
  return with_custom_vjp(y, {x}, rule);
}

}  // namespace detail

}  // namespace ravel
