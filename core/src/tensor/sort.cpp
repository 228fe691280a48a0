// sort, argsort, topk: a bitonic network of compare-selects on views.
#include <cstdint>

#include "tensor/internal.hpp"

namespace ravel {

using namespace detail;

// Note [Bitonic sort on views]
// The data-independent network (Batcher's bitonic sort, in the form tinygrad's Tensor.sort uses)
// needs only movement ops, comparisons and where, so it runs on every backend and is
// differentiable with no rule of its own. The sorted axis is moved last, the rows are padded to
// N = 2^p, and each of the p(p+1)/2 stages views the rows as [R, N / 2h, 2, h] and sets every
// element e against its partner q in the other half: in the first stage of each merge (blocks of
// size 2h = 2, 4, .., N) the partner is the mirrored position (a flip of the whole block), later
// the position h away (a flip of the size-2 axis). The lower half keeps the element that comes
// first, the upper half the other:  keep e  <=>  before(e, q) == (e is in the lower half).
// Stability and ties: elements are (value, original index) pairs and before() compares values
// then indices, a strict total order, so the result is the stable sort, -0.0 and 0.0 included
// (equal, as in NumPy). NaN comes after +inf (NumPy's order), so last ascending and first
// descending (PyTorch's NaN-is-largest). The padding is recognised by its index (>= n) and comes
// after everything, in either direction, so no sentinel value is needed.
// The gradient of the values flows back through the selections: the cotangent of each output is
// routed to the input it came from (a scatter by the permutation), in the same O(N log^2 N).
// Cost: p(p+1)/2 stages, each 3 kernels (predicate, values, indices) over the padded [R, N],
// i.e. O(N log^2 N) work and a graph that grows as log^2 N; a device sort primitive (radix or
// merge) is the fast path this leaves for later.
namespace detail::sort_impl {  // internal: not exported (core/exports.map)

// Whether element (ve, ie) comes before (vq, iq) in the requested order.
Tensor comes_before(const Tensor& ve, const Tensor& ie, const Tensor& vq, const Tensor& iq, int64_t n, bool descending) {
  const Device dev = ie.device();
  Tensor bound = make_scalar(static_cast<double>(n), DType::I64, dev);
  Tensor pad_e = ie.ge(bound), pad_q = iq.ge(bound);
  Tensor index_first = ie.lt(iq);
  Tensor value_first, value_tie;
  if (is_float(ve.dtype())) {
    Tensor nan_e = ve.ne(ve), nan_q = vq.ne(vq);
    value_first = descending ? nan_q.logical_not().logical_and(nan_e.logical_or(vq.lt(ve)))
                             : nan_e.logical_not().logical_and(nan_q.logical_or(ve.lt(vq)));
    value_tie = ve.eq(vq).logical_or(nan_e.logical_and(nan_q));
  } else {
    value_first = descending ? vq.lt(ve) : ve.lt(vq);
    value_tie = ve.eq(vq);
  }
  Tensor real_first = pad_q.logical_or(value_first).logical_or(value_tie.logical_and(index_first));
  return Tensor::where(pad_e, pad_q.logical_and(index_first), real_first);
}

// One compare-select stage on rows of length big_n: partners h apart (mirrored when `mirror`)
// within blocks of 2h.
void bitonic_stage(Tensor& v, Tensor& i, int64_t rows, int64_t big_n, int64_t h, bool mirror, int64_t n,
                   bool descending) {
  const Shape blocks = {rows, big_n / (2 * h), 2, h};
  Tensor ve = v.reshape(blocks), ie = i.reshape(blocks);
  const Axes partner_axes = mirror ? Axes({2, 3}) : Axes(2);
  Tensor vq = ve.flip(partner_axes), iq = ie.flip(partner_axes);
  // Broadcast before comparing, so the comparison runs inside the stage's kernel (Note [Fusion]).
  Tensor lower = Tensor::arange(0, 2, 1, DType::I64, v.device())
                     .reshape({1, 1, 2, 1})
                     .expand(blocks)
                     .eq(make_scalar(0, DType::I64, v.device()));
  Tensor keep = comes_before(ve, ie, vq, iq, n, descending).eq(lower);
  v = Tensor::where(keep, ve, vq).reshape({rows, big_n});
  i = Tensor::where(keep, ie, iq).reshape({rows, big_n});
}

}  // namespace detail::sort_impl

std::pair<Tensor, Tensor> Tensor::sort(int64_t axis, bool descending) const {
  check_defined(*this, "sort");
  const int64_t r = ndim();
  const int64_t d = normalize_axis(axis, r == 0 ? 1 : r, "sort");
  if (r == 0) return {*this, zeros({}, DType::I64, device())};
  const int64_t n = shape()[d];
  // Move the axis last; rows of n values.
  std::vector<int64_t> order, inverse(static_cast<size_t>(r));
  for (int64_t k = 0; k < r; ++k)
    if (k != d) order.push_back(k);
  order.push_back(d);
  for (int64_t k = 0; k < r; ++k) inverse[static_cast<size_t>(order[static_cast<size_t>(k)])] = k;
  const Tensor moved = permute(order);
  const Shape moved_shape = moved.shape();
  if (numel() == 0 || n == 1) {
    Tensor idx = zeros(moved_shape, DType::I64, device());
    return {*this, idx.permute(inverse)};
  }
  const int64_t rows = numel() / n;
  int64_t big_n = 1;
  while (big_n < n) big_n *= 2;
  Tensor v = moved.reshape({rows, n}).pad({{0, 0}, {0, big_n - n}});
  Tensor i = arange(0, static_cast<double>(big_n), 1, DType::I64, device()).reshape({1, big_n}).expand({rows, big_n});
  for (int64_t block = 2; block <= big_n; block *= 2) {
    sort_impl::bitonic_stage(v, i, rows, big_n, block / 2, true, n, descending);
    for (int64_t h = block / 4; h >= 1; h /= 2) sort_impl::bitonic_stage(v, i, rows, big_n, h, false, n, descending);
  }
  auto back = [&](const Tensor& t) { return t.shrink({{0, rows}, {0, n}}).reshape(moved_shape).permute(inverse); };
  return {back(v), back(i)};
}

Tensor Tensor::argsort(int64_t axis, bool descending) const { return sort(axis, descending).second; }

std::pair<Tensor, Tensor> Tensor::topk(int64_t k, int64_t axis, bool largest, bool sorted) const {
  (void)sorted;  // always sorted (Note [Bitonic sort on views] sorts the whole axis anyway)
  check_defined(*this, "topk");
  const int64_t r = ndim();
  const int64_t d = normalize_axis(axis, r == 0 ? 1 : r, "topk");
  const int64_t n = r == 0 ? 1 : shape()[d];
  RAVEL_CHECK(k >= 0 && k <= n, ValueError, "topk: k = ", k, " is out of range for axis ", d, " of the input ",
              shape_str(shape()), " (expected 0 <= k <= ", n, ")");
  auto [values, indices] = sort(axis, largest);
  if (r == 0) return {values, indices};
  std::vector<std::pair<int64_t, int64_t>> keep;
  for (int64_t a = 0; a < r; ++a) keep.emplace_back(0, a == d ? k : shape()[a]);
  return {values.shrink(keep), indices.shrink(keep)};
}

}  // namespace ravel
