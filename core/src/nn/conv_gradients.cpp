// The implicit convolution's own gradients (conv_internal.hpp): the transposed convolution (by
// phases at strides > 1), the weight gradient over the window view (grouped or not), the bias's.
#include "nn/conv_internal.hpp"

#include "ravel/autodiff.hpp"

namespace ravel::detail::conv_internal {

namespace {

// db: dy [N, O, out...] summed over everything but O.
Tensor bias_gradient(size_t k, const Tensor& dy) {
  std::vector<int64_t> rest{0};
  for (size_t i = 0; i < k; ++i) rest.push_back(static_cast<int64_t>(2 + i));
  return dy.sum(Axes(rest));
}

// dw [O, Cg, k...] of a grouped convolution: per group, the sum over (n, out...) of
// dy[n, g * Og + o, out...] * window[g, c, k..., n, out...], one batched contraction over the
// window view [G, Og, Cg, k..., N, out...] (rank 8 for 2-D).
Tensor grouped_weight_gradient(const ConvSetup& s, const window::Geometry& geo, int64_t g, const Tensor& dy,
                               const Tensor& xp) {
  const size_t k = s.k;
  Tensor cols = grouped_columns(xp, geo, g);  // [G, 1, Cg, k..., N, out...]
  std::vector<int64_t> onp{1, 0};
  for (size_t i = 0; i < k; ++i) onp.push_back(static_cast<int64_t>(2 + i));
  Tensor gy = dy.permute(onp);  // [O, N, out...]
  const int64_t o = gy.shape()[0], og = o / g, cg = cols.shape()[2];
  Shape gshape{g, og};
  gshape.insert(gshape.end(), k + 1, 1);
  gshape.insert(gshape.end(), gy.shape().begin() + 1, gy.shape().end());
  Shape full{g, og};
  full.insert(full.end(), cols.shape().begin() + 2, cols.shape().end());
  std::vector<int64_t> summed;
  for (size_t i = 0; i <= k; ++i) summed.push_back(static_cast<int64_t>(3 + k + i));
  Tensor dw = gy.reshape(gshape).expand(full).mul(cols.expand(full)).sum(Axes(summed));  // [G, Og, Cg, k...]
  Shape flat{o, cg};
  flat.insert(flat.end(), s.kernel.begin(), s.kernel.end());
  return dw.reshape(flat);
}

// Note [Strided input gradient by phases]
// At stride s > 1 the input gradient scatters dy[p] * w[t] to the padded input's p * s + t: the
// transposed convolution of dy spread by s (s^k - 1 of every s^k products are zeros), or, as
// autodiff makes it, a column gradient 9x the input and col2im (62 of 82 ms for a ResNet
// downsampling conv's fwd + dx, docs/performance.md §8). With dilation 1 on the strided axes,
// the padded input's positions of one phase f = (i mod s) only receive the taps t = f + s j, at
// i / s = p + j: a stride-1 transposed convolution of dy with the sub-kernel w[.., f::s] ("full":
// no padding), one implicit GEMM each, s^k of them with taps / s^k taps on average. The phases
// are then interleaved into the padded input's layout (stack, permute, reshape: one copy whose
// innermost axis is the phase, tbb_cpu's Note [Interleaved rows]) and the padding cut away.
// A phase past the kernel (f >= kernel: stride > kernel) receives nothing.
Tensor phase_input_gradient(const ConvSetup& s, const Tensor& dy, const Tensor& w, int64_t groups, const Shape& padded) {
  const size_t k = s.k;
  std::vector<int64_t> q;  // phase rows per axis: ceil(padded / stride)
  int64_t phases = 1;
  for (size_t i = 0; i < k; ++i) {
    q.push_back((padded[2 + i] + s.stride[i] - 1) / s.stride[i]);
    phases *= s.stride[i];
  }
  const int64_t n = dy.shape()[0], c = padded[1];
  std::vector<Tensor> parts;
  for (int64_t f = 0; f < phases; ++f) {
    std::vector<int64_t> phase(k);
    for (size_t i = k, r = static_cast<size_t>(f); i-- > 0;) {
      phase[i] = static_cast<int64_t>(r) % s.stride[i];
      r /= static_cast<size_t>(s.stride[i]);
    }
    bool empty = false;
    for (size_t i = 0; i < k; ++i) empty |= phase[i] >= s.kernel[i];
    Shape full{n, c};
    full.insert(full.end(), q.begin(), q.end());
    if (empty) {
      parts.push_back(Tensor::zeros(full, dy.dtype(), dy.device()));
      continue;
    }
    Tensor sub = w;
    for (size_t i = 0; i < k; ++i)
      if (s.stride[i] > 1) sub = sub.slice(static_cast<int64_t>(2 + i), phase[i], s.kernel[i], s.stride[i]);
    ConvOptions o;
    o.groups = groups;
    o.dilation = s.dilation;  // 1 on every strided axis
    Tensor part = conv_transpose_any(s.op + " (input gradient)", k, dy, sub, std::nullopt, o);
    Widths fit;
    for (size_t i = 0; i < k; ++i) fit.emplace_back(0, q[i] - part.shape()[2 + i]);
    parts.push_back(window::pad_or_cut(part, fit));
  }
  // Each phase [N, C, q...] as [N, C, q_0, 1, q_1, 1, ...] padded to its place among the s_i
  // phases, summed (one kernel of masked loads: Note [Interleaved rows] reads them row by row),
  // then [N, C, q_0 * s_0, ...] with the padding cut.
  Shape unit{n, c}, merged{n, c};
  Widths cut;
  for (size_t i = 0; i < k; ++i) {
    unit.insert(unit.end(), {q[i], 1});
    merged.push_back(q[i] * s.stride[i]);
    cut.emplace_back(-s.pad[i].first, padded[2 + i] - q[i] * s.stride[i] - s.pad[i].second);
  }
  Tensor dxp;
  for (int64_t f = 0; f < phases; ++f) {
    Widths place(2, {0, 0});
    for (size_t i = k, r = static_cast<size_t>(f); i-- > 0;) {
      const int64_t ph = static_cast<int64_t>(r) % s.stride[i];
      r /= static_cast<size_t>(s.stride[i]);
      place.insert(place.begin() + 2, {{0, 0}, {ph, s.stride[i] - 1 - ph}});
    }
    Tensor spread = window::pad_or_cut(parts[static_cast<size_t>(f)].reshape(unit), place);
    dxp = dxp.defined() ? dxp + spread : spread;
  }
  return window::pad_or_cut(dxp.reshape(merged), cut);
}

}  // namespace

Tensor grouped_columns(const Tensor& xp, const window::Geometry& geo, int64_t g) {
  const size_t k = geo.rank();
  Tensor win = window::view(xp, geo);  // [N, C, out..., k...]
  Shape split{win.shape()[0], g, win.shape()[1] / g};
  split.insert(split.end(), win.shape().begin() + 2, win.shape().end());
  std::vector<int64_t> order{1, 2};
  for (size_t i = 0; i < k; ++i) order.push_back(static_cast<int64_t>(3 + k + i));
  order.push_back(0);
  for (size_t i = 0; i < k; ++i) order.push_back(static_cast<int64_t>(3 + i));
  return win.reshape(split).permute(order).unsqueeze(1);
}

Tensor nchw_columns(const Tensor& xp, const window::Geometry& geo, int64_t g) {
  const size_t k = geo.rank();
  Tensor win = window::view(xp, geo);  // [N, C, out..., k...]
  Shape split{win.shape()[0], g, win.shape()[1] / g};
  split.insert(split.end(), win.shape().begin() + 2, win.shape().end());
  std::vector<int64_t> order{0, 1, 2};
  for (size_t i = 0; i < k; ++i) order.push_back(static_cast<int64_t>(3 + k + i));
  for (size_t i = 0; i < k; ++i) order.push_back(static_cast<int64_t>(3 + i));
  return win.reshape(split).permute(order).unsqueeze(2);
}

bool phases_apply(const ConvSetup& s) {
  for (size_t i = 0; i < s.k; ++i)
    if (s.stride[i] > 1 && s.dilation[i] != 1) return false;
  return true;
}

// Note [Convolution's input gradient as a convolution]
// Differentiated through its window view, a convolution's input gradient is col2im: the GEMM
// w^T @ dy writes the column gradient [C * taps, N * P] (9x the input for 3x3), and one kernel
// adds its taps' shifted, masked views back into the input (Note [Convolution as a window view]).
// In the Fashion-MNIST CNN's second layer that was 2.7 ms of GEMM and 3.9 ms of col2im
// (docs/performance.md §8). At stride 1 the same gradient is the transposed convolution of dy
// (PyTorch's and cuDNN's backward-data): dy padded by dilation * (k - 1) - padding, convolved with
// the kernel flipped and its channel axes swapped, which on a device with the multi-axis
// contraction is one GEMM reading the padded dy's window view in place (Note [Implicit im2col]):
// no column gradient, no col2im. So the implicit form carries its own derivative (custom_vjp):
// dx that transposed convolution, dw the contraction of dy with the input's window view (what
// autodiff made of the forward sum), db the sum of dy. Every piece is an ordinary differentiable
// op (conv_transpose, window views, mul + sum), so higher orders still work. Strides > 1 split
// the input gradient by phases (Note [Strided input gradient by phases]); dilation > 1 on a
// strided axis keeps the window view's col2im.
// The padded input xp is passed as an input with no gradient of its own (its forward copy is
// reused by dw; gradients reach x through dx only).
Tensor with_direct_gradients(const ConvSetup& s, const window::Geometry& geo, const Tensor& w,
                             const std::optional<Tensor>& bias, const Tensor& xp, const Tensor& y, int64_t groups) {
  std::vector<Tensor> inputs{s.x, w, xp};
  if (bias) inputs.push_back(*bias);
  ConvSetup setup = s;
  setup.x = Tensor();  // the rule takes x from its inputs, never keeps it alive
  auto rule = [setup, geo, groups](const std::vector<Tensor>& in, const Tensor&, const Tensor& dy) {
    const size_t k = setup.k;
    ConvOptions o;
    o.dilation = setup.dilation;
    o.padding_pairs = setup.pad;
    o.groups = groups;
    bool unit_stride = true;
    for (int64_t st : setup.stride) unit_stride &= st == 1;
    Tensor dx = unit_stride ? conv_transpose_any(setup.op + " (input gradient)", k, dy, in[1], std::nullopt, o)
                            : phase_input_gradient(setup, dy, in[1], groups, in[2].shape());
    if (groups > 1) {
      // The depthwise taps read xp as a masked view (Note [Depthwise convolution as taps]); the
      // weight gradient's contraction reads unmasked views only, so it is copied here.
      std::vector<Tensor> grads{dx, grouped_weight_gradient(setup, geo, groups, dy, in[2].contiguous()), Tensor()};
      if (in.size() > 3) grads.push_back(bias_gradient(k, dy));
      return grads;
    }
    // dw[o, c, t...] = sum over (n, p...) of dy[n, o, p...] * window[n, c, p..., t...], as the
    // GEMM [O, (N, P)] x [(N, P), (C, taps)] over the window view [C, k..., N, out...].
    Tensor win = window::view(in[2], geo);
    std::vector<int64_t> order{1};
    for (size_t i = 0; i < k; ++i) order.push_back(static_cast<int64_t>(2 + k + i));
    order.push_back(0);
    for (size_t i = 0; i < k; ++i) order.push_back(static_cast<int64_t>(2 + i));
    Tensor cols = win.permute(order).unsqueeze(0);  // [1, C, k..., N, out...]
    std::vector<int64_t> onp{1, 0};
    for (size_t i = 0; i < k; ++i) onp.push_back(static_cast<int64_t>(2 + i));
    Tensor g = dy.permute(onp);  // [O, N, out...]
    Shape gshape{g.shape()[0]};
    gshape.insert(gshape.end(), k + 1, 1);
    gshape.insert(gshape.end(), g.shape().begin() + 1, g.shape().end());
    Shape full{g.shape()[0]};
    full.insert(full.end(), cols.shape().begin() + 1, cols.shape().end());
    std::vector<int64_t> summed;
    for (size_t i = 0; i <= k; ++i) summed.push_back(static_cast<int64_t>(2 + k + i));
    Tensor dw = g.reshape(gshape).expand(full).mul(cols.expand(full)).sum(Axes(summed));  // [O, C, k...]
    std::vector<Tensor> grads{dx, dw, Tensor()};
    if (in.size() > 3) grads.push_back(bias_gradient(k, dy));
    return grads;
  };
  return custom_vjp(y, inputs, rule, s.op);
}

}  // namespace ravel::detail::conv_internal
