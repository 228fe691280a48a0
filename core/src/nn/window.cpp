// Sliding-window views and their adjoint (window.hpp).
#include "nn/window.hpp"

#include <sstream>

#include "ravel/autodiff.hpp"
#include "tensor/internal.hpp"

namespace ravel::detail::window {

// Note [Convolution as a window view]
// Convolution and pooling are written as tinygrad writes them (tensor.py's _pool): pad the input,
// look at it through a view [lead..., out..., kernel...] whose element [.., o, .., t, ..] is the
// input at o * stride + t * dilation, then reduce the kernel axes (pooling) or contract them
// with the weight (conv: one GEMM). tinygrad reaches the overlapping-window view through
// repeat/reshape/shrink, which its multi-view ShapeTracker can hold; a Ravel StridedView is one
// strided map, so the window is made directly as that map: per spatial axis an `out` axis of
// stride stride * s and a `kernel` axis of stride dilation * s over the input's stride s. It is
// still a view (no copy), but it is not a chain of the public movement ops, so autodiff cannot
// walk through it: it is a custom_vjp whose rule is the adjoint (col2im), written with pads,
// reshapes and adds (scatter_windows) - ordinary differentiable ops, so every order works and the
// rule's own derivative is the window view again (through shrink/reshape of the cotangent).
// Two limits of one strided map: a padded (masked) input cannot be windowed through (the valid
// range of o * stride + t * dilation is not a box), so a padded input is copied first (one pass
// over the input, small beside the windows); and windows that do not overlap (dilation 1,
// kernel <= stride) need no custom rule at all: they are pad/reshape/shrink/permute of the
// input, tinygrad's own short path, differentiated by the movement ops' rules.

int64_t Geometry::taps() const {
  int64_t n = 1;
  for (int64_t k : kernel) n *= k;
  return n;
}

std::string list_str(const std::vector<int64_t>& v) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << v[i];
  s << "]";
  return s.str();
}

std::vector<int64_t> per_axis(const std::vector<int64_t>& v, size_t n, int64_t min, const char* what,
                              const std::string& op) {
  RAVEL_CHECK(v.size() == 1 || v.size() == n, ValueError, op, ": ", what, " must hold 1 or ", n,
              " values (one per spatial axis), got ", v.size(), " ", list_str(v));
  std::vector<int64_t> out = v.size() == 1 ? std::vector<int64_t>(n, v[0]) : v;
  for (int64_t x : out)
    RAVEL_CHECK(x >= min, ValueError, op, ": ", what, " must be >= ", min, ", got ", list_str(v));
  return out;
}

Tensor pad_or_cut(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& widths, double value) {
  const size_t lead = static_cast<size_t>(x.ndim()) - widths.size();
  std::vector<std::pair<int64_t, int64_t>> cut, pad;
  bool any_cut = false, any_pad = false;
  for (size_t d = 0; d < static_cast<size_t>(x.ndim()); ++d) {
    const int64_t n = x.shape()[d];
    if (d < lead) {
      cut.emplace_back(0, n);
      pad.emplace_back(0, 0);
      continue;
    }
    auto [b, a] = widths[d - lead];
    cut.emplace_back(b < 0 ? -b : 0, a < 0 ? n + a : n);
    pad.emplace_back(b > 0 ? b : 0, a > 0 ? a : 0);
    any_cut |= b < 0 || a < 0;
    any_pad |= b > 0 || a > 0;
  }
  Tensor t = any_cut ? x.shrink(cut) : x;
  return any_pad ? t.pad(pad, value) : t;
}

namespace {

// Windows that do not overlap (dilation 1, kernel <= stride): [.., in] padded or cut to out *
// stride, split into [.., out, stride], cut to [.., out, kernel], kernel axes moved last.
Tensor disjoint_windows(const Tensor& x, const Geometry& g) {
  const size_t k = g.rank(), lead = static_cast<size_t>(x.ndim()) - k;
  std::vector<std::pair<int64_t, int64_t>> fit(k);
  for (size_t i = 0; i < k; ++i) fit[i] = {0, g.out[i] * g.stride[i] - x.shape()[lead + i]};
  Tensor t = pad_or_cut(x, fit);
  Shape split(x.shape().begin(), x.shape().begin() + static_cast<int64_t>(lead));
  std::vector<std::pair<int64_t, int64_t>> keep;
  for (size_t d = 0; d < lead; ++d) keep.emplace_back(0, x.shape()[d]);
  for (size_t i = 0; i < k; ++i) {
    split.insert(split.end(), {g.out[i], g.stride[i]});
    keep.emplace_back(0, g.out[i]);
    keep.emplace_back(0, g.kernel[i]);
  }
  t = t.reshape(split).shrink(keep);
  std::vector<int64_t> order;
  for (size_t d = 0; d < lead; ++d) order.push_back(static_cast<int64_t>(d));
  for (size_t i = 0; i < k; ++i) order.push_back(static_cast<int64_t>(lead + 2 * i));
  for (size_t i = 0; i < k; ++i) order.push_back(static_cast<int64_t>(lead + 2 * i + 1));
  return t.permute(order);
}

}  // namespace

Tensor view(const Tensor& x, const Geometry& g) {
  const size_t k = g.rank(), lead = static_cast<size_t>(x.ndim()) - k;
  if (disjoint(g)) return disjoint_windows(x, g);

  // One strided map over one buffer: a sharded tensor has several (its parts would each need
  // their own window view; not built yet).
  RAVEL_CHECK(!x.sharding(), ValueError, "convolution and pooling windows of a sharded tensor (",
              x.sharding()->str(), ") are not supported yet; gather it to one device with to() first");
  Tensor base = x;
  detail::StridedView v = detail::view_of(base);
  if (v.has_mask()) {  // Note [Convolution as a window view]: a padded input is copied first
    base = x.contiguous();
    v = detail::view_of(base);
  }
  detail::StridedView w;
  w.offset = v.offset;
  for (size_t d = 0; d < lead; ++d) w.shape.push_back(v.shape[d]), w.strides.push_back(v.strides[d]);
  for (size_t i = 0; i < k; ++i) w.shape.push_back(g.out[i]), w.strides.push_back(g.stride[i] * v.strides[lead + i]);
  for (size_t i = 0; i < k; ++i)
    w.shape.push_back(g.kernel[i]), w.strides.push_back(g.dilation[i] * v.strides[lead + i]);
  detail::check_rank(w.shape.size(), "window view");
  Tensor win;
  {
    NoGradGuard no_grad;  // the view's derivative is the custom rule below, never Identity's
    win = detail::make_view(base, detail::MoveOp::Identity, {}, std::move(w));
  }
  if (!grad_enabled() || !is_float(x.dtype())) return win;
  std::vector<int64_t> in(base.shape().begin() + static_cast<int64_t>(lead), base.shape().end());
  return custom_vjp(
      win, {base},
      [g, in](const std::vector<Tensor>&, const Tensor&, const Tensor& cot) {
        return std::vector<Tensor>{scatter_windows(cot, g, in)};
      },
      "window view");
}

namespace {

// The adjoint of disjoint_windows: [lead..., out..., kernel...] -> [lead..., out_0, kernel_0, ...],
// each kernel axis padded to its stride, merged, padded or cut to the input. One copy (the
// merge), where the tap-by-tap sum would make one per tap.
Tensor gather_disjoint(const Tensor& grad, const Geometry& geo, const std::vector<int64_t>& in) {
  const size_t k = geo.rank(), lead = static_cast<size_t>(grad.ndim()) - 2 * k;
  std::vector<int64_t> order;
  for (size_t d = 0; d < lead; ++d) order.push_back(static_cast<int64_t>(d));
  std::vector<std::pair<int64_t, int64_t>> fill, fit;
  Shape merged(grad.shape().begin(), grad.shape().begin() + static_cast<int64_t>(lead));
  for (size_t i = 0; i < k; ++i) {
    order.push_back(static_cast<int64_t>(lead + i));
    order.push_back(static_cast<int64_t>(lead + k + i));
    fill.emplace_back(0, 0);
    fill.emplace_back(0, geo.stride[i] - geo.kernel[i]);
    merged.push_back(geo.out[i] * geo.stride[i]);
    fit.emplace_back(0, in[i] - geo.out[i] * geo.stride[i]);
  }
  return pad_or_cut(pad_or_cut(grad.permute(order), fill).reshape(merged), fit);
}

}  // namespace

bool disjoint(const Geometry& geo) {
  bool d = true;
  for (size_t i = 0; i < geo.rank(); ++i) d &= geo.dilation[i] == 1 && geo.kernel[i] <= geo.stride[i];
  return d;
}

std::vector<std::vector<int64_t>> taps_in_order(const Geometry& geo) {
  std::vector<std::vector<int64_t>> all;
  std::vector<int64_t> t(geo.rank(), 0);
  for (int64_t n = 0; n < geo.taps(); ++n) {
    all.push_back(t);
    for (size_t i = geo.rank(); i-- > 0;) {  // next tap, row-major
      if (++t[i] < geo.kernel[i]) break;
      t[i] = 0;
    }
  }
  return all;
}

Tensor tap_view(const Tensor& x, const Geometry& geo, const std::vector<int64_t>& t) {
  const size_t k = geo.rank(), lead = static_cast<size_t>(x.ndim()) - k;
  Tensor v = x;
  for (size_t i = 0; i < k; ++i) {
    const int64_t start = t[i] * geo.dilation[i];
    v = v.slice(static_cast<int64_t>(lead + i), start, start + (geo.out[i] - 1) * geo.stride[i] + 1, geo.stride[i]);
  }
  return v;
}

Tensor scatter_tap(const Tensor& part, const Geometry& geo, const std::vector<int64_t>& t,
                   const std::vector<int64_t>& in) {
  const size_t k = geo.rank(), lead = static_cast<size_t>(part.ndim()) - k;
  Tensor p = part;
  std::vector<int64_t> len(geo.out);
  bool strided = false;
  for (size_t i = 0; i < k; ++i) strided |= geo.stride[i] > 1 && geo.out[i] > 1;
  if (strided) {  // element j goes to j * stride: a zero-spread [.., out, 1] -> [.., out * stride]
    Shape unit(part.shape().begin(), part.shape().begin() + static_cast<int64_t>(lead)), spread = unit;
    std::vector<std::pair<int64_t, int64_t>> gaps;
    for (size_t i = 0; i < k; ++i) {
      unit.insert(unit.end(), {geo.out[i], 1});
      spread.push_back(geo.out[i] * geo.stride[i]);
      gaps.emplace_back(0, 0);
      gaps.emplace_back(0, geo.stride[i] - 1);
      len[i] = geo.out[i] * geo.stride[i];
    }
    p = pad_or_cut(p.reshape(unit), gaps).reshape(spread);
  }
  std::vector<std::pair<int64_t, int64_t>> place(k);
  for (size_t i = 0; i < k; ++i) {
    const int64_t before = t[i] * geo.dilation[i];
    place[i] = {before, in[i] - before - len[i]};
  }
  return pad_or_cut(p, place);
}

Tensor scatter_windows(const Tensor& grad, const Geometry& geo, const std::vector<int64_t>& in) {
  if (disjoint(geo)) return gather_disjoint(grad, geo, in);
  const size_t k = geo.rank(), lead = static_cast<size_t>(grad.ndim()) - 2 * k;
  const Shape& gs = grad.shape();
  Shape tap_shape(gs.begin(), gs.begin() + static_cast<int64_t>(lead + k));
  Tensor acc;
  for (const auto& t : taps_in_order(geo)) {
    std::vector<std::pair<int64_t, int64_t>> sel;
    for (size_t d = 0; d < lead + k; ++d) sel.emplace_back(0, gs[d]);
    for (size_t i = 0; i < k; ++i) sel.emplace_back(t[i], t[i] + 1);
    Tensor part = scatter_tap(grad.shrink(sel).reshape(tap_shape), geo, t, in);  // [lead..., out...] placed
    acc = acc.defined() ? acc + part : part;
  }
  return acc;
}

}  // namespace ravel::detail::window
