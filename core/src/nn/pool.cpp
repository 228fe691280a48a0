// max_pool1d/2d/3d and avg_pool1d/2d/3d (ravel/conv.hpp): a reduction of a window view.
#include <limits>
#include <string>

#include "nn/window.hpp"
#include "ravel/autodiff.hpp"
#include "ravel/conv.hpp"

namespace ravel::nn {

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

PoolSetup setup(const std::string& op, size_t k, const Tensor& x, const PoolOptions& o, bool is_max) {
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
// pooling has its own rule: the chosen tap of each window as a one-hot over the window, times the
// cotangent, scattered back (window::scatter_windows) and cut to the input. The one-hot is
// piecewise constant in x, so the rule is linear in the cotangent and differentiates again
// (second order: zero through x, the same routing through the cotangent).
Tensor max_pool_any(const std::string& op, size_t k, const Tensor& x, const PoolOptions& o) {
  PoolSetup s = setup(op, k, x, o, true);
  const double lowest = -std::numeric_limits<double>::infinity();
  Tensor win = window::view(window::pad_or_cut(x.detach(), s.frame, lowest), s.geo);
  Tensor y = win.max(Axes(kernel_axes(win.ndim(), k)));
  if (!grad_enabled()) return y;
  window::Geometry geo = s.geo;
  Widths frame = s.frame;
  return custom_vjp(
      y, {x},
      [geo, frame, k, lowest](const std::vector<Tensor>& in, const Tensor& out, const Tensor& g) {
        Tensor w = window::view(window::pad_or_cut(in[0].detach(), frame, lowest), geo).detach();
        const int64_t r = w.ndim(), taps = geo.taps();
        Shape tap_shape(w.shape().end() - static_cast<int64_t>(k), w.shape().end());
        Tensor tap = Tensor::arange(0, static_cast<double>(taps), 1, DType::I64, w.device()).reshape(tap_shape);
        Shape kept = out.shape();
        for (size_t i = 0; i < k; ++i) kept.push_back(1);
        Tensor best = out.detach().reshape(kept);
        Tensor none = Tensor::full({}, static_cast<double>(taps), DType::I64, w.device());
        Tensor first = Tensor::where(w.eq(best), tap, none).min(Axes(kernel_axes(r, k)), true);
        Tensor last_nan = Tensor::where(w.ne(w), tap, Tensor::full({}, -1.0, DType::I64, w.device()))
                              .max(Axes(kernel_axes(r, k)), true);
        Tensor chosen = Tensor::where(last_nan.ge(Tensor::zeros({}, DType::I64, w.device())), last_nan, first);
        Tensor gw = Tensor::where(tap.eq(chosen), g.reshape(kept), Tensor::zeros({}, g.dtype(), g.device()));
        std::vector<int64_t> ext;  // the padded input's extent
        for (size_t i = 0; i < k; ++i)
          ext.push_back((geo.out[i] - 1) * geo.stride[i] + geo.dilation[i] * (geo.kernel[i] - 1) + 1);
        Widths back;
        for (auto [b, a] : frame) back.emplace_back(-b, -a);
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
  PoolSetup s = setup(op, k, x, o, false);
  if (o.divisor_override)
    RAVEL_CHECK(*o.divisor_override != 0, ValueError, op, ": divisor_override must not be zero");
  Tensor win = window::view(window::pad_or_cut(x, s.frame), s.geo);
  Tensor sum = win.sum(Axes(kernel_axes(win.ndim(), k)));
  if (o.divisor_override) return sum / static_cast<double>(*o.divisor_override);
  // The divisor is separable: a product of one vector per axis, broadcast.
  Tensor div;
  for (size_t i = 0; i < k; ++i) {
    auto d = divisors(s.geo.out[i], s.in[i], s.geo.kernel[i], s.geo.stride[i], s.padding[i], o.count_include_pad);
    Shape shape(k, 1);
    shape[i] = s.geo.out[i];
    Tensor t = Tensor::from_vector(d, {static_cast<int64_t>(d.size())}, x.device()).reshape(shape).cast(x.dtype());
    div = div.defined() ? div * t : t;
  }
  return sum / div;
}

}  // namespace

Tensor max_pool1d(const Tensor& x, PoolOptions o) { return max_pool_any("max_pool1d", 1, x, o); }
Tensor max_pool2d(const Tensor& x, PoolOptions o) { return max_pool_any("max_pool2d", 2, x, o); }
Tensor max_pool3d(const Tensor& x, PoolOptions o) { return max_pool_any("max_pool3d", 3, x, o); }
Tensor avg_pool1d(const Tensor& x, PoolOptions o) { return avg_pool_any("avg_pool1d", 1, x, o); }
Tensor avg_pool2d(const Tensor& x, PoolOptions o) { return avg_pool_any("avg_pool2d", 2, x, o); }
Tensor avg_pool3d(const Tensor& x, PoolOptions o) { return avg_pool_any("avg_pool3d", 3, x, o); }

}  // namespace ravel::nn
