// conv1d/2d/3d and conv_transpose1d/2d/3d (ravel/conv.hpp) over window views (nn/window.hpp).
#include <string>

#include "graph/engine.hpp"
#include "nn/conv_internal.hpp"
#include "nn/window.hpp"
#include "ravel/autodiff.hpp"
#include "ravel/conv.hpp"

namespace ravel::nn {

namespace window = ravel::detail::window;  // nn/window.hpp: internal, not exported

using ravel::detail::concat;
using window::list_str;

namespace {

using detail::conv_internal::ConvSetup;
using detail::conv_internal::nchw_columns;
using detail::conv_internal::phases_apply;
using detail::conv_internal::Widths;
using detail::conv_internal::with_direct_gradients;

ConvSetup conv_setup(const std::string& op, size_t k, const Tensor& x, const Tensor& w, const ConvOptions& o) {
  ConvSetup s;
  s.op = op;
  s.k = k;
  RAVEL_CHECK(x.defined() && w.defined(), ValueError, op, ": the input and the weight must be defined tensors");
  RAVEL_CHECK(x.ndim() == static_cast<int64_t>(k + 2) || x.ndim() == static_cast<int64_t>(k + 1), ShapeError, op,
              ": expected an input of rank ", k + 2, " [N, C, ", k == 1 ? "L" : k == 2 ? "H, W" : "D, H, W",
              "] or ", k + 1, " (no batch axis), got ", shape_str(x.shape()));
  RAVEL_CHECK(w.ndim() == static_cast<int64_t>(k + 2), ShapeError, op, ": expected a weight of rank ", k + 2,
              ", got ", shape_str(w.shape()));
  s.batched = x.ndim() == static_cast<int64_t>(k + 2);
  s.x = s.batched ? x : x.unsqueeze(0);
  RAVEL_CHECK(o.groups >= 1, ValueError, op, ": groups must be >= 1, got ", o.groups);
  s.stride = window::per_axis(o.stride, k, 1, "stride", op);
  s.dilation = window::per_axis(o.dilation, k, 1, "dilation", op);
  s.kernel.assign(w.shape().begin() + 2, w.shape().end());
  for (int64_t kk : s.kernel)
    RAVEL_CHECK(kk >= 1, ShapeError, op, ": the weight ", shape_str(w.shape()), " has an empty kernel axis");
  if (o.same) {
    for (int64_t st : s.stride)
      RAVEL_CHECK(st == 1, ValueError, op, ": padding 'same' needs stride 1 (as PyTorch), got stride ",
                  list_str(o.stride));
    for (size_t i = 0; i < k; ++i) {
      const int64_t total = s.dilation[i] * (s.kernel[i] - 1);
      s.pad.emplace_back(total / 2, total - total / 2);  // the odd element after, as PyTorch
    }
  } else if (!o.padding_pairs.empty()) {
    RAVEL_CHECK(o.padding_pairs.size() == k, ValueError, op, ": padding_pairs must hold ", k,
                " (before, after) pairs, one per spatial axis, got ", o.padding_pairs.size());
    for (auto [b, a] : o.padding_pairs)
      RAVEL_CHECK(b >= 0 && a >= 0, ValueError, op, ": padding must be >= 0, got (", b, ", ", a, ")");
    s.pad = o.padding_pairs;
  } else {
    for (int64_t p : window::per_axis(o.padding, k, 0, "padding", op)) s.pad.emplace_back(p, p);
  }
  return s;
}

// Note [Depthwise convolution as taps]
// A depthwise convolution (one input and one output channel per group) is, per output element,
// taps products of one input element and one weight: y = sum over t of w[:, t] * x's tap-t
// view, the views read straight from the padded input (masked views: padding is a mask, not a
// copy). All taps and the bias are one elementwise kernel (with an activation after it, that
// too), which every device fuses. As a window contraction it was a batch of N * C GEMMs with
// M = 1 and K = taps after a pad copy of the input, then bias and relu kernels: 2.1 ms at
// 32x64x28x28 against PyTorch's direct kernel's 0.9-1.3; as taps on tbb_cpu 1.2 ms
// (docs/performance.md §8, helper cnnepi). Its gradients stay the window
// contraction's (with_direct_gradients: dx the transposed convolution, itself depthwise and so
// taps again, dw the grouped weight gradient). Up to kDirectTaps taps: two inputs per tap and
// the bias, 19 for 3x3, within fusion.max_inputs (20, raised from 16 for this: decision 76) so
// that all taps, the bias and an activation are one kernel; split in two, the partial sum's
// write and read made it slower than the contraction. f32 with unit stride along the rows only:
// that is the form tbb_cpu runs as rows in registers (Note [Tap sums]); other strides and
// dtypes reach its generic evaluator, which the contraction beats.
constexpr int64_t kDirectTaps = 9;

// The GEMM form of a convolution of s.x [N, C, in...] (already checked) with w [O, C/G, k...]:
// Note [Convolution as one GEMM].
Tensor convolve(const ConvSetup& s, const Tensor& w, int64_t groups, const std::optional<Tensor>& bias) {
  const size_t k = s.k;
  const Shape& xs = s.x.shape();
  const int64_t n = xs[0], c = xs[1], o = w.shape()[0], g = groups;
  Tensor xp = window::pad_or_cut(s.x, s.pad);
  window::Geometry geo{s.kernel, s.stride, s.dilation, {}};
  for (size_t i = 0; i < k; ++i) {
    const int64_t in = xp.shape()[2 + i], span = s.dilation[i] * (s.kernel[i] - 1) + 1;
    RAVEL_CHECK(span <= in, ShapeError, s.op, ": the kernel ", list_str(s.kernel), " with dilation ",
                list_str(s.dilation), " spans ", span, " elements on spatial axis ", i,
                ", more than the padded input's ", in, " (input ", shape_str(xs), ", padding (", s.pad[i].first, ", ",
                s.pad[i].second, "))");
    geo.out.push_back((in - span) / s.stride[i] + 1);
  }
  // Note [Wide rows]: at stride 1 the last axis is computed over the whole padded width, so the
  // window's last two output axes merge and the im2col copy moves rows of out * width elements
  // instead of rows of out (tbb_cpu copies short rows slowly: docs/performance.md §7). The
  // windows of the extra columns run past the end of a row into the next one (and past the
  // plane's last row into `slack` zero rows added below it); their outputs are cut away, and
  // since their cotangent is zero the window view's per-axis adjoint may drop what they read.
  // Note [Implicit im2col] (schedule/contraction.cpp): where the device's GEMM takes multi-axis
  // operands, no im2col copy is made, and then no wide rows either: the wide output's cut would
  // pad the output gradient (a masked view), which the weight gradient's GEMM cannot read in
  // place. (Spatial rank 3 would make the product rank 9, over RVL_MAX_RANK: it keeps the copy.)
  const bool implicit = k <= 2 && !is_half(xp.dtype()) &&
                        ravel::detail::engine().device_contraction_axes(xp.device()) > 1;
  const int64_t width = xp.shape().back(), true_width = geo.out[k - 1];
  bool wide = !implicit && k >= 2 && true_width < width;
  for (int64_t st : s.stride) wide &= st == 1;
  if (wide) {
    const int64_t overrun = s.dilation[k - 1] * (s.kernel[k - 1] - 1), slack = (overrun + width - 1) / width;
    Widths rows(k, {0, 0});
    rows[k - 2] = {0, slack};
    xp = window::pad_or_cut(xp, rows);
    geo.out[k - 1] = width;
  }
  int64_t positions = 1, taps = geo.taps();
  for (int64_t v : geo.out) positions *= v;
  const int64_t cg = c / g, og = o / g;
  Tensor win = window::view(xp, geo);  // [N, C, out..., k...]
  // [N, G, Cg, out..., k...] -> [G, Cg, k..., N, out...], then one reshape to [G, Cg * taps, N * P]:
  // the copy that reshape makes is the (transposed) im2col matrix, contracted with the weight
  // [G, Og, Cg * taps] in one GEMM (batched over G when there are groups).
  Shape split{n, g, cg};
  split.insert(split.end(), win.shape().begin() + 2, win.shape().end());
  std::vector<int64_t> order{1, 2};
  for (size_t i = 0; i < k; ++i) order.push_back(static_cast<int64_t>(3 + k + i));
  order.push_back(0);
  for (size_t i = 0; i < k; ++i) order.push_back(static_cast<int64_t>(3 + i));
  Tensor y;
  if (implicit && og == 1 && cg == 1 && taps <= kDirectTaps && s.stride.back() == 1 && xp.dtype() == DType::F32) {
    // Note [Depthwise convolution as taps]
    Tensor acc;
    Shape wshape(k + 2, 1);
    wshape[1] = o;
    const Tensor wt = w.reshape({o, taps});
    const auto all = window::taps_in_order(geo);
    for (size_t t = 0; t < all.size(); ++t) {
      const int64_t ti = static_cast<int64_t>(t);
      Tensor term = window::tap_view(xp, geo, all[t]) * wt.slice(1, ti, ti + 1, 1).reshape(wshape);
      acc = acc.defined() ? acc + term : term;
    }
    if (bias) acc = acc + bias->reshape(wshape);
    bool unit_stride = true;
    for (int64_t st : s.stride) unit_stride &= st == 1;
    if (!(unit_stride || phases_apply(s)) || !grad_enabled() || !is_float(xp.dtype())) return acc;
    return with_direct_gradients(s, geo, w, bias, xp, acc, g);
  }
  if (implicit) {
    // Note [Grouped implicit im2col]
    // The sum over (cg, k...) of the weight [1, G, Og, Cg, k..., 1...] times the grouped window
    // view [N, G, 1, Cg, k..., out...] (rank 8 for 2-D, RVL_MAX_RANK), read in place by the
    // device's packer (Note [Implicit im2col]); the result [N, G, Og, out...] is [N, O, out...]:
    // NCHW itself, with N and G the contraction's batch axes (N a broadcast one: Note [Leading
    // axes as a broadcast batch]), so bias and activation run in its epilogue. Depthwise (Og =
    // Cg = 1) where Note [Depthwise convolution as taps] does not apply is a batch of GEMMs
    // with M = 1 and K = taps. Only a padded input is copied (the
    // packer reads unmasked views): ~1.3x the input at 14x14, pad 1, where an im2col matrix is
    // 9x. Before, groups copied the window into a [G, Cg * taps, N * P] im2col matrix, and the
    // result was [O, N, out...], returned permuted (an activation on it was a kernel of its own).
    xp = xp.contiguous();  // no copy when neither padded nor viewed
    Tensor cols = nchw_columns(xp, geo, g);  // [N, G, 1, Cg, k..., out...]
    Shape nop{n, o};
    nop.insert(nop.end(), geo.out.begin(), geo.out.end());
    std::vector<int64_t> summed;
    for (size_t i = 0; i <= k; ++i) summed.push_back(static_cast<int64_t>(3 + i));
    if (g == 1 || og == 1) {
      // One channel axis (O, or G = O): the sum's own result is [N, O, out...], so the bias and
      // what follows read it with no reshape in between and fuse into one epilogue kernel (an
      // elementwise node read through a reshape gets a buffer of its own: it is not inlined).
      Shape flat{n, g, cg};
      flat.insert(flat.end(), cols.shape().begin() + 4, cols.shape().end());
      cols = cols.reshape(flat);  // [N, G, Cg, k..., out...]
      Shape full{n, o, cg};
      full.insert(full.end(), flat.begin() + 3, flat.end());
      Shape wshape{1, o, cg};
      wshape.insert(wshape.end(), s.kernel.begin(), s.kernel.end());
      wshape.insert(wshape.end(), k, 1);
      for (int64_t& a : summed) --a;
      y = w.reshape(wshape).expand(full).mul(cols.expand(full)).sum(Axes(summed));  // [N, O, out...]
      if (bias) {  // the contraction's epilogue (Note [Epilogue fusion])
        Shape bshape(k + 2, 1);
        bshape[1] = o;
        y = y + bias->reshape(bshape);
      }
    } else {
      Shape full{n, g, og};
      full.insert(full.end(), cols.shape().begin() + 3, cols.shape().end());
      Shape wshape{1, g, og, cg};
      wshape.insert(wshape.end(), s.kernel.begin(), s.kernel.end());
      wshape.insert(wshape.end(), k, 1);
      y = w.reshape(wshape).expand(full).mul(cols.expand(full)).sum(Axes(summed));  // [N, G, Og, out...]
      if (bias) {  // in the contraction's own layout: its epilogue (an activation is not)
        Shape bshape(k + 3, 1);
        bshape[1] = g;
        bshape[2] = og;
        y = y + bias->reshape(bshape);
      }
      y = y.reshape(nop);
    }
    bool unit_stride = true;
    for (int64_t st : s.stride) unit_stride &= st == 1;
    if (!(unit_stride || phases_apply(s)) || !grad_enabled() || !is_float(xp.dtype())) return y;
    return with_direct_gradients(s, geo, w, bias, xp, y, g);
  }
  if (g == 1) {  // no group axis: [N, C, out..., k...] -> [C, k..., N, out...] (rank 8 for 3-D)
    for (int64_t& a : order) a = a == 0 ? 0 : a - 1;
    order.erase(order.begin());
    Tensor cols = win.permute(order).reshape({c * taps, n * positions});
    y = w.reshape({o, c * taps}).matmul(cols);  // [O, N * P]
  } else {
    Tensor cols = win.reshape(split).permute(order).reshape({g, cg * taps, n * positions});
    y = w.reshape({g, og, cg * taps}).matmul(cols);  // [G, Og, N * P]
  }
  // The bias is added in the GEMM's own layout, so the scheduler runs it as the contraction's
  // epilogue (Note [Epilogue fusion]); added to the permuted result it was a kernel of its own.
  if (bias) y = y + (g == 1 ? bias->reshape({o, 1}) : bias->reshape({g, og, 1}));
  Shape onp{o, n};  // [G, Og, N * P] is [O, N, out...] in memory
  onp.insert(onp.end(), geo.out.begin(), geo.out.end());
  std::vector<int64_t> to_nchw{1, 0};
  for (size_t i = 0; i < k; ++i) to_nchw.push_back(static_cast<int64_t>(2 + i));
  Tensor out = y.reshape(onp).permute(to_nchw);
  if (!wide) return out;
  std::vector<std::pair<int64_t, int64_t>> keep;
  for (int64_t d : out.shape()) keep.emplace_back(0, d);
  keep.back() = {0, true_width};
  return out.shrink(keep);
}

// Note [Convolution as one GEMM]
// out[n, o, p] = sum_{c, t} x[n, c, p * stride + t * dilation] w[o, c, t]: with the window view
// (Note [Convolution as a window view]) laid out [C * taps, N * P] this is one matmul of the
// weight [O, C * taps] with it, which the scheduler runs as one GEMM kernel (Note [Matmul as mul
// + sum]). On a device whose contraction takes several axes per M, K and N (ABI 1.8, Note
// [Implicit im2col]) the sum runs over the window view itself: no im2col matrix, only a pad copy
// of the input, and both gradients are such contractions too. Elsewhere (and for groups > 1 or
// 3-D) the 1.0 contraction takes one summed axis, so the window view is copied once into that
// matrix (im2col) by the reshape. Why [C * taps, N * P] and not PyTorch's [N * P,
// C * taps]: its rows are runs of the input's rows (the copy reads and writes ow-contiguous runs,
// not runs of kw = 3), the result [O, N * P] is returned as the permuted view [N, O, P] whose
// spatial axes stay contiguous for the ops that follow, the output gradient [N, O, P] is brought
// to [O, N * P] by a copy of contiguous P-runs, and groups are the GEMM's batch axis with the
// result [G, Og, N * P] already [O, N, P] in memory. Spatial rank 3 with groups > 1 would need a
// rank-9 view: it runs group by group.
Tensor conv_any(const std::string& op, size_t k, const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias,
                const ConvOptions& o) {
  ConvSetup s = conv_setup(op, k, x, w, o);
  const int64_t c = s.x.shape()[1], oc = w.shape()[0], g = o.groups;
  RAVEL_CHECK(c % g == 0, ShapeError, op, ": input channels ", c, " (input ", shape_str(s.x.shape()),
              ") are not divisible by groups ", g);
  RAVEL_CHECK(oc % g == 0, ShapeError, op, ": output channels ", oc, " (weight ", shape_str(w.shape()),
              ") are not divisible by groups ", g);
  RAVEL_CHECK(w.shape()[1] == c / g, ShapeError, op, ": the weight ", shape_str(w.shape()), " expects ",
              w.shape()[1] * g, " input channels (", w.shape()[1], " per group, ", g, " groups), but the input ",
              shape_str(s.x.shape()), " has ", c);
  if (bias)
    RAVEL_CHECK(bias->defined() && bias->ndim() == 1 && bias->shape()[0] == oc, ShapeError, op,
                ": expected a bias of shape [", oc, "], got ", bias->defined() ? shape_str(bias->shape()) : "undefined");
  Tensor y;
  if (k == 3 && g > 1) {
    std::vector<Tensor> parts;
    const int64_t cg = c / g, og = oc / g;
    ConvSetup part = s;
    for (int64_t i = 0; i < g; ++i) {
      part.x = s.x.slice(1, i * cg, (i + 1) * cg);
      std::optional<Tensor> b;
      if (bias) b = bias->slice(0, i * og, (i + 1) * og);
      parts.push_back(convolve(part, w.slice(0, i * og, (i + 1) * og), 1, b));
    }
    y = Tensor::concatenate(parts, 1);
  } else {
    y = convolve(s, w, g, bias);
  }
  return s.batched ? y : y.squeeze(0);
}

// conv_transpose = the input-gradient of a convolution: x spread by the stride (stride - 1 zeros
// between elements), padded by dilation * (k - 1) - padding on each side (plus output_padding
// after; a negative width cuts), then convolved at stride 1 with the kernel flipped and the
// channel axes of each group swapped.
Tensor conv_transpose_impl(const std::string& op, size_t k, const Tensor& x, const Tensor& w,
                           const std::optional<Tensor>& bias, const ConvOptions& o) {
  RAVEL_CHECK(!o.same, ValueError, op, ": padding 'same' is not defined for transposed convolutions (as PyTorch)");
  ConvSetup s = conv_setup(op, k, x, w, o);
  const int64_t c = s.x.shape()[1], g = o.groups;
  RAVEL_CHECK(w.shape()[0] == c, ShapeError, op, ": the weight ", shape_str(w.shape()), " expects ", w.shape()[0],
              " input channels (its axis 0), but the input ", shape_str(s.x.shape()), " has ", c);
  RAVEL_CHECK(c % g == 0, ShapeError, op, ": input channels ", c, " are not divisible by groups ", g);
  const int64_t og = w.shape()[1], oc = og * g;
  std::vector<int64_t> out_pad = window::per_axis(o.output_padding, k, 0, "output_padding", op);
  for (size_t i = 0; i < k; ++i)
    RAVEL_CHECK(out_pad[i] < s.stride[i] || out_pad[i] < s.dilation[i], ValueError, op, ": output_padding ",
                list_str(o.output_padding), " must be smaller than the stride ", list_str(s.stride),
                " or the dilation ", list_str(s.dilation));
  // The output size first, so that too much padding is refused naming it (as PyTorch's "Output
  // size is too small") rather than by the cuts below.
  for (size_t i = 0; i < k; ++i) {
    const int64_t out = (s.x.shape()[2 + i] - 1) * s.stride[i] - s.pad[i].first - s.pad[i].second +
                        s.dilation[i] * (s.kernel[i] - 1) + out_pad[i] + 1;
    RAVEL_CHECK(out >= 1, ShapeError, op, ": the output would have size ", out, " on spatial axis ", i, " (input ",
                shape_str(s.x.shape()), ", weight ", shape_str(w.shape()), ", stride ", s.stride[i], ", padding (",
                s.pad[i].first, ", ", s.pad[i].second, "), dilation ", s.dilation[i], ", output_padding ", out_pad[i],
                "; expected >= 1)");
  }
  // Spread: [N, C, in...] -> [N, C, in_0, 1, in_1, 1, ...] padded to stride, merged, the trailing
  // stride - 1 zeros cut.
  Tensor xs = s.x;
  bool strided = false;
  for (int64_t st : s.stride) strided |= st > 1;
  const Shape& in = s.x.shape();
  if (strided) {
    Shape unit{in[0], in[1]}, spread{in[0], in[1]};
    Widths gaps;
    for (size_t i = 0; i < k; ++i) {
      unit.insert(unit.end(), {in[2 + i], 1});
      spread.push_back(in[2 + i] * s.stride[i]);
      gaps.emplace_back(0, 0);
      gaps.emplace_back(0, s.stride[i] - 1);
    }
    xs = window::pad_or_cut(s.x.reshape(unit), gaps).reshape(spread);
  }
  Widths frame;
  for (size_t i = 0; i < k; ++i) {
    const int64_t full = s.dilation[i] * (s.kernel[i] - 1);
    // (in - 1) * stride + 1 elements are data; the spread left stride - 1 zeros after them.
    frame.emplace_back(full - s.pad[i].first, full - s.pad[i].second + out_pad[i] - (s.stride[i] - 1));
  }
  Tensor framed = window::pad_or_cut(xs, frame);  // out + dilation * (k - 1) long: checked above
  // w [C, Og, k...] -> [G, Cg, Og, k...] -> [G, Og, Cg, k...] -> [O, Cg, k...], kernel flipped.
  Shape grouped{g, c / g, og};
  grouped.insert(grouped.end(), s.kernel.begin(), s.kernel.end());
  std::vector<int64_t> order{0, 2, 1};
  std::vector<int64_t> spatial;
  for (size_t i = 0; i < k; ++i) order.push_back(static_cast<int64_t>(3 + i)), spatial.push_back(static_cast<int64_t>(2 + i));
  Shape flat{oc, c / g};
  flat.insert(flat.end(), s.kernel.begin(), s.kernel.end());
  Tensor wc = w.reshape(grouped).permute(order).reshape(flat).flip(Axes(spatial));
  ConvOptions inner;
  inner.groups = g;
  inner.dilation = s.dilation;
  Tensor y = conv_any(op, k, framed, wc, bias, inner);
  return s.batched ? y : y.squeeze(0);
}

}  // namespace

Tensor conv1d(const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, ConvOptions o) {
  return conv_any("conv1d", 1, x, w, b, o);
}
Tensor conv2d(const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, ConvOptions o) {
  return conv_any("conv2d", 2, x, w, b, o);
}
Tensor conv3d(const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, ConvOptions o) {
  return conv_any("conv3d", 3, x, w, b, o);
}
Tensor conv_transpose1d(const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, ConvOptions o) {
  return conv_transpose_impl("conv_transpose1d", 1, x, w, b, o);
}
Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, ConvOptions o) {
  return conv_transpose_impl("conv_transpose2d", 2, x, w, b, o);
}
Tensor conv_transpose3d(const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, ConvOptions o) {
  return conv_transpose_impl("conv_transpose3d", 3, x, w, b, o);
}

}  // namespace ravel::nn

// conv_gradients.cpp's transposed convolution (conv_internal.hpp).
namespace ravel::detail::conv_internal {
Tensor conv_transpose_any(const std::string& op, size_t k, const Tensor& x, const Tensor& w,
                          const std::optional<Tensor>& bias, const ConvOptions& o) {
  return nn::conv_transpose_impl(op, k, x, w, bias, o);
}
}  // namespace ravel::detail::conv_internal
