// max_pool1d/2d/3d and avg_pool1d/2d/3d (ravel/conv.hpp): a reduction of a window view.
#include <limits>
#include <string>

#include "nn/window.hpp"
#include "ravel/autodiff.hpp"
#include "ravel/conv.hpp"

namespace ravel::nn {

namespace window = ravel::detail::window;  // nn/window.hpp: internal, not exported

using ravel::detail::concat;
using window::list_str;

namespace {

using Widths = std::vector<std::pair<int64_t, int64_t>>;

// A checked pooling: the geometry and the (before, after) widths that bring the input to exactly
// the extent the windows read (after may be negative: the rows no window reaches are cut).
struct PoolSetup {
  window::Geometry geo;
  std::vector<int64_t> padding, in;
  Widths frame;
};

PoolSetup pool_setup(const std::string& op, size_t k, const Tensor& x, const PoolOptions& o, bool is_max) {
  RAVEL_CHECK(x.defined(), ValueError, op, ": the input must be a defined tensor");
  RAVEL_CHECK(x.ndim() == static_cast<int64_t>(k + 1) || x.ndim() == static_cast<int64_t>(k + 2), ShapeError, op,
              ": expected an input of rank ", k + 1, " or ", k + 2, " ([N,] C, ", k, " spatial axes), got ",
              shape_str(x.shape()));
  RAVEL_CHECK(is_float(x.dtype()), DTypeError, op, ": expected a float tensor, got ", dtype_name(x.dtype()));
  RAVEL_CHECK(!o.kernel.empty(), ValueError, op, ": the kernel size must be given (PoolOptions::kernel)");
  bool undilated = true;
  for (int64_t d : o.dilation) undilated &= d == 1;
  RAVEL_CHECK(is_max || undilated, ValueError, op,
              ": average pooling has no dilation (as PyTorch), got ", list_str(o.dilation));
  PoolSetup s;
  auto& g = s.geo;
  g.kernel = window::per_axis(o.kernel, k, 1, "kernel", op);
  g.stride = o.stride.empty() ? g.kernel : window::per_axis(o.stride, k, 1, "stride", op);
  g.dilation = window::per_axis(o.dilation, k, 1, "dilation", op);
  s.padding = window::per_axis(o.padding, k, 0, "padding", op);
  for (size_t i = 0; i < k; ++i) {
    const int64_t in = x.shape()[x.ndim() - static_cast<int64_t>(k) + static_cast<int64_t>(i)];
    const int64_t p = s.padding[i], st = g.stride[i], span = g.dilation[i] * (g.kernel[i] - 1) + 1;
    // PyTorch's bound: padding at most half the (effective, for max) kernel.
    const int64_t half = is_max ? span / 2 : g.kernel[i] / 2;
    RAVEL_CHECK(p <= half, ValueError, op, ": padding ", list_str(o.padding), " must be at most half the ",
                is_max ? "effective " : "", "kernel size (", half, " on spatial axis ", i, ", kernel ",
                list_str(g.kernel), is_max ? concat(", dilation ", list_str(g.dilation)) : "", ")");
    // PyTorch's pooling_output_shape: floor or ceil, and a last window must start inside the
    // input or the left padding.
    const int64_t reach = in + 2 * p - span + (o.ceil_mode ? st - 1 : 0);
    int64_t out = reach < 0 ? 0 : reach / st + 1;
    if (o.ceil_mode && out > 0 && (out - 1) * st >= in + p) --out;
    RAVEL_CHECK(out >= 1, ShapeError, op, ": the output would be empty on spatial axis ", i, " (input ",
                shape_str(x.shape()), ", kernel ", list_str(g.kernel), ", stride ", list_str(g.stride), ", padding ",
                list_str(s.padding), ", dilation ", list_str(g.dilation), ")");
    g.out.push_back(out);
    s.in.push_back(in);
    s.frame.emplace_back(p, (out - 1) * st + span - in - p);
  }
  return s;
}

// Window axes of a [lead..., out..., kernel...] view: the last k.
std::vector<int64_t> kernel_axes(int64_t ndim, size_t k) {
  std::vector<int64_t> a;
  for (size_t i = 0; i < k; ++i) a.push_back(ndim - static_cast<int64_t>(k) + static_cast<int64_t>(i));
  return a;
}

// Note [Gradient of max pooling]
// PyTorch's CPU max pooling gives a window's whole gradient to one element: the first maximum in
// scan order (row-major over the window: its loop replaces the running max only when a value is
// strictly greater), or, when the window holds NaN, the last NaN (its test is `val > max ||
// isnan(val)`). Ravel's max reduction shares ties equally (Note [Gradient of max]), so max
// pooling has its own rule: the chosen tap of each window, times the cotangent, scattered back
// and cut to the input. The choice is piecewise constant in x, so the rule is linear in the
// cotangent and differentiates again (second order: zero through x, the same routing through the
// cotangent).
//
// Note [Pooling tap by tap]
// With few taps (a 2x2 or 3x3 window: at most kMaxUnrolledTaps) the max and the choice are
// written tap by tap over the [lead..., out...] output, as elementwise ops on the taps' strided
// slices (window::tap_view): one fused elementwise kernel each, where a reduction over the
// window view's short [.., k, k] axes ran 10-20x slower on tbb_cpu (docs/performance.md,
// "Convolution"). The chosen tap is folded in scan order: a NaN always takes it (the last one
// wins), a maximum only while none is chosen (the first one wins). Disjoint windows (kernel <=
// stride, PyTorch's usual 2x2/2) route the gradient in the input's own layout (Note [Max
// pooling's gradient in the input's layout]), with no scatter.
constexpr int64_t kMaxUnrolledTaps = 16;

// Note [Max pooling's gradient in the input's layout]
// For disjoint windows each input element lies in at most one window, at a known tap: viewed as
// [lead..., out_0, stride_0, ..., out_last, stride_last] the input holds window (o...) at
// position (phase...), tap = phase where every phase < kernel. The gradient is then
// where(tap(phase) == chosen(o), g(o), 0) over that view, reshaped to the input's
// [lead..., out_0 * stride_0, ...] for free. Its innermost axis is stride_last (2), with chosen
// and g broadcast along it; tbb_cpu runs such a kernel along the next longer axis instead (Note
// [Short innermost axes], plugins/tbb_cpu/evaluator.cpp). Before it did, the phases were laid out
// [.., stride_last, out_last] and interleaved by a GEMM with a 0/1 matrix (1.4 ms and 0.7 ms of
// the Fashion-MNIST CNN step's two poolings). With `chosen` undefined every tap takes g (average
// pooling's gradient).
Tensor route_disjoint(const Tensor& chosen, const Tensor& g, const window::Geometry& geo, size_t lead,
                      const Shape& lead_shape) {
  const size_t k = geo.rank();
  const Device dev = g.device();
  Shape unit = lead_shape, full = lead_shape, grid_shape(lead, 1), merged = lead_shape;
  for (size_t i = 0; i < k; ++i) {
    unit.insert(unit.end(), {geo.out[i], 1});
    full.insert(full.end(), {geo.out[i], geo.stride[i]});
    grid_shape.insert(grid_shape.end(), {1, geo.stride[i]});
    merged.push_back(geo.out[i] * geo.stride[i]);
  }
  // Tap ids over the phases (-1 past the kernel), row-major over (phase_0, ..., phase_last).
  std::vector<int64_t> ids;
  int64_t cells = 1;
  for (size_t i = 0; i < k; ++i) cells *= geo.stride[i];
  for (int64_t f = 0; f < cells; ++f) {
    int64_t r = f, id = 0, scale = 1;
    bool inside = true;
    for (size_t i = k; i-- > 0;) {
      const int64_t phase = r % geo.stride[i];
      r /= geo.stride[i];
      inside &= phase < geo.kernel[i];
      id += phase * scale;
      scale *= geo.kernel[i];
    }
    ids.push_back(inside ? id : -1);
  }
  Tensor grid = Tensor::from_vector(ids, {cells}, dev).reshape(grid_shape);
  Tensor zero = Tensor::zeros({}, g.dtype(), dev), ge = g.reshape(unit).expand(full);
  if (!chosen.defined())
    return Tensor::where(grid.ge(Tensor::zeros({}, DType::I64, dev)).expand(full), ge, zero).reshape(merged);
  // where(id != chosen, 0, g): the comparison the kernel runs, with no negation after it.
  const DType t = chosen.dtype();
  std::vector<float> fids(ids.begin(), ids.end());  // small integers: exact in every float dtype
  Tensor typed = t == DType::F32 ? Tensor::from_vector(fids, {cells}, dev).reshape(grid_shape) : grid.cast(t);
  Tensor skip = typed.ne(chosen.reshape(unit).expand(full));
  return Tensor::where(skip, zero, ge).reshape(merged);
}

// Note [Choosing the tap in two folds]
// The chosen tap of each window (Note [Gradient of max pooling]) as two folds over the taps'
// strided slices, two instructions per tap each: taps from last to first, where(v != best,
// chosen, t) leaves the first maximum in scan order; then taps from first to last, where(v != v,
// t, chosen) lets the last NaN win (a window holding NaN has best = NaN, which no value equals, so
// the first fold chose nothing there and the second overrides only those windows). The single
// forward fold this replaced tested "nothing chosen yet" per tap (eleven instructions a tap, 1.7 +
// 1.0 ms of the Fashion-MNIST CNN step). Padding (-inf) never takes a window: a window whose
// values are all -inf keeps its first tap inside the input. The ids are in x's dtype (twice
// i64's lanes in the plugin's array loops; i64 measured slower): at most kMaxUnrolledTaps (16)
// of them, exact even in bf16, whose integers are exact to 256.
Tensor choose_taps(const Tensor& xpad, const Tensor& best, const Tensor& outside, const window::Geometry& geo) {
  const auto taps = window::taps_in_order(geo);
  const DType t = xpad.dtype();
  const Device dev = xpad.device();
  auto id = [&](size_t i) { return Tensor::full({}, static_cast<double>(i), t, dev); };
  // One view per tap, read by both folds: the kernel loads each once.
  std::vector<Tensor> v;
  for (const auto& tap : taps) v.push_back(window::tap_view(xpad, geo, tap));
  Tensor chosen = Tensor::full({}, -1.0, t, dev);
  for (size_t i = taps.size(); i-- > 0;) {
    Tensor skip = v[i].ne(best);
    if (outside.defined()) skip = skip.logical_or(window::tap_view(outside, geo, taps[i]));
    chosen = Tensor::where(skip, chosen, id(i));
  }
  for (size_t i = 0; i < taps.size(); ++i) chosen = Tensor::where(v[i].ne(v[i]), id(i), chosen);
  return chosen;
}

Tensor max_pool_any(const std::string& op, size_t k, const Tensor& x, const PoolOptions& o) {
  PoolSetup s = pool_setup(op, k, x, o, true);
  const double lowest = -std::numeric_limits<double>::infinity();
  const window::Geometry geo = s.geo;
  const bool unrolled = geo.taps() <= kMaxUnrolledTaps;
  Tensor xp = window::pad_or_cut(x.detach(), s.frame, lowest);
  Tensor y;
  if (unrolled) {
    for (const auto& t : window::taps_in_order(geo)) {
      Tensor v = window::tap_view(xp, geo, t);
      y = y.defined() ? y.maximum(v) : v;
    }
  } else {
    Tensor win = window::view(xp, geo);
    y = win.max(Axes(kernel_axes(win.ndim(), k)));
  }
  if (!grad_enabled()) return y;
  Widths frame = s.frame;
  return custom_vjp(
      y, {x},
      [geo, frame, k, lowest, unrolled](const std::vector<Tensor>& in, const Tensor& out, const Tensor& g) {
        const Tensor& x0 = in[0];
        const Device dev = x0.device();
        const size_t lead = static_cast<size_t>(x0.ndim()) - k;
        Tensor xpad = window::pad_or_cut(x0.detach(), frame, lowest);
        std::vector<int64_t> ext(xpad.shape().end() - static_cast<int64_t>(k), xpad.shape().end());
        bool padded = false;
        for (auto [b, a] : frame) padded |= b > 0 || a > 0;
        std::vector<int64_t> in_shape(x0.shape().end() - static_cast<int64_t>(k), x0.shape().end());
        Tensor inside = padded ? window::pad_or_cut(Tensor::ones(in_shape, DType::Bool, dev), frame) : Tensor();
        auto c = [&](double v) { return Tensor::full({}, v, DType::I64, dev); };
        Tensor best = out.detach();
        Tensor zero = Tensor::zeros({}, g.dtype(), dev);
        Widths back;
        for (auto [b, a] : frame) back.emplace_back(-b, -a);
        Tensor chosen;  // [lead..., out...] (unrolled) or [lead..., out..., 1...]
        if (unrolled) {
          // The padding's mask negated once, not per tap (each negation would add an input).
          chosen = choose_taps(xpad, best, padded ? inside.logical_not() : Tensor(), geo);
          if (window::disjoint(geo)) {  // Note [Max pooling's gradient in the input's layout]
            Shape lead_shape(x0.shape().begin(), x0.shape().begin() + static_cast<int64_t>(lead));
            Tensor gl = route_disjoint(chosen, g, geo, lead, lead_shape);  // [lead..., out * stride...]
            Widths fit;
            for (size_t i = 0; i < k; ++i) fit.emplace_back(0, ext[i] - geo.out[i] * geo.stride[i]);
            return std::vector<Tensor>{window::pad_or_cut(window::pad_or_cut(gl, fit), back)};
          }
          Tensor acc;
          int64_t id = 0;
          for (const auto& t : window::taps_in_order(geo)) {
            Tensor tap_id = Tensor::full({}, static_cast<double>(id++), chosen.dtype(), dev);
            Tensor part = window::scatter_tap(Tensor::where(chosen.ne(tap_id), zero, g), geo, t, ext);
            acc = acc.defined() ? acc + part : part;
          }
          return std::vector<Tensor>{window::pad_or_cut(acc, back)};
        }
        // Many taps: one max-reduction over the window view picks the tap. Score: taps + t for a
        // NaN at tap t (the last NaN wins), taps - 1 - t for a maximum inside the input (the first
        // wins), -1 elsewhere.
        Tensor w = window::view(xpad, geo).detach();
        const int64_t r = w.ndim(), taps = geo.taps();
        Shape tap_shape(w.shape().end() - static_cast<int64_t>(k), w.shape().end());
        Tensor tap = Tensor::arange(0, static_cast<double>(taps), 1, DType::I64, dev).reshape(tap_shape);
        Shape kept = out.shape();
        for (size_t i = 0; i < k; ++i) kept.push_back(1);
        Tensor hit = w.eq(best.reshape(kept));
        if (padded) hit = hit.logical_and(window::view(inside, geo));
        Tensor score = Tensor::where(w.ne(w), tap + c(double(taps)), Tensor::where(hit, c(double(taps - 1)) - tap, c(-1)));
        Tensor top = score.max(Axes(kernel_axes(r, k)), true);
        chosen = Tensor::where(top.ge(c(double(taps))), top - c(double(taps)), c(double(taps - 1)) - top);
        Tensor gw = Tensor::where(tap.eq(chosen), g.reshape(kept), zero);
        return std::vector<Tensor>{window::pad_or_cut(window::scatter_windows(gw, geo, ext), back)};
      },
      op);
}

// The divisor of each output along one axis, PyTorch's avg_pool rule: the window clipped to the
// padded input counts (count_include_pad), or clipped to the input itself.
std::vector<double> divisors(int64_t out, int64_t in, int64_t k, int64_t st, int64_t p, bool include_pad) {
  std::vector<double> d;
  for (int64_t j = 0; j < out; ++j) {
    int64_t start = j * st - p, end = std::min(start + k, in + p);
    const int64_t size = end - start;
    start = std::max<int64_t>(start, 0);
    end = std::min(end, in);
    d.push_back(static_cast<double>(include_pad ? size : end - start));
  }
  return d;
}

Tensor avg_pool_any(const std::string& op, size_t k, const Tensor& x, const PoolOptions& o) {
  PoolSetup s = pool_setup(op, k, x, o, false);
  if (o.divisor_override)
    RAVEL_CHECK(*o.divisor_override != 0, ValueError, op, ": divisor_override must not be zero");
  // The divisor is separable: a product of one vector per axis, broadcast.
  Tensor div;
  if (o.divisor_override) div = Tensor::full({}, static_cast<double>(*o.divisor_override), x.dtype(), x.device());
  for (size_t i = 0; i < k && !o.divisor_override; ++i) {
    auto d = divisors(s.geo.out[i], s.in[i], s.geo.kernel[i], s.geo.stride[i], s.padding[i], o.count_include_pad);
    Shape shape(k, 1);
    shape[i] = s.geo.out[i];
    Tensor t = Tensor::from_vector(d, {static_cast<int64_t>(d.size())}, x.device()).reshape(shape).cast(x.dtype());
    div = div.defined() ? div * t : t;
  }
  if (s.geo.taps() > kMaxUnrolledTaps) {
    Tensor win = window::view(window::pad_or_cut(x, s.frame), s.geo);
    return win.sum(Axes(kernel_axes(win.ndim(), k))) / div;
  }
  // Note [Pooling tap by tap]: the sum over the taps' slices; the gradient g / div goes to every
  // tap, in the input's layout for disjoint windows, else tap by tap.
  const window::Geometry geo = s.geo;
  const Widths frame = s.frame;
  Tensor xp = window::pad_or_cut(x.detach(), frame), sum;
  for (const auto& t : window::taps_in_order(geo)) {
    Tensor v = window::tap_view(xp, geo, t);
    sum = sum.defined() ? sum + v : v;
  }
  Tensor y = sum / div;
  if (!grad_enabled()) return y;
  return custom_vjp(
      y, {x},
      [geo, frame, k, div](const std::vector<Tensor>& in, const Tensor&, const Tensor& g) {
        const Tensor& x0 = in[0];
        const size_t lead = static_cast<size_t>(x0.ndim()) - k;
        Tensor gs = g / div;
        std::vector<int64_t> ext;  // the padded input's extent
        Widths back, fit;
        for (size_t i = 0; i < k; ++i) {
          ext.push_back((geo.out[i] - 1) * geo.stride[i] + geo.dilation[i] * (geo.kernel[i] - 1) + 1);
          fit.emplace_back(0, ext[i] - geo.out[i] * geo.stride[i]);
          back.emplace_back(-frame[i].first, -frame[i].second);
        }
        if (window::disjoint(geo)) {
          Shape lead_shape(x0.shape().begin(), x0.shape().begin() + static_cast<int64_t>(lead));
          Tensor gl = route_disjoint(Tensor(), gs, geo, lead, lead_shape);
          return std::vector<Tensor>{window::pad_or_cut(window::pad_or_cut(gl, fit), back)};
        }
        Tensor acc;
        for (const auto& t : window::taps_in_order(geo)) {
          Tensor part = window::scatter_tap(gs, geo, t, ext);
          acc = acc.defined() ? acc + part : part;
        }
        return std::vector<Tensor>{window::pad_or_cut(acc, back)};
      },
      op);
}

}  // namespace

Tensor max_pool1d(const Tensor& x, PoolOptions o) { return max_pool_any("max_pool1d", 1, x, o); }
Tensor max_pool2d(const Tensor& x, PoolOptions o) { return max_pool_any("max_pool2d", 2, x, o); }
Tensor max_pool3d(const Tensor& x, PoolOptions o) { return max_pool_any("max_pool3d", 3, x, o); }
Tensor avg_pool1d(const Tensor& x, PoolOptions o) { return avg_pool_any("avg_pool1d", 1, x, o); }
Tensor avg_pool2d(const Tensor& x, PoolOptions o) { return avg_pool_any("avg_pool2d", 2, x, o); }
Tensor avg_pool3d(const Tensor& x, PoolOptions o) { return avg_pool_any("avg_pool3d", 3, x, o); }

}  // namespace ravel::nn
