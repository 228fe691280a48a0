// conv1d/2d/3d and conv_transpose1d/2d/3d (ravel/conv.hpp) over window views (nn/window.hpp).
#include <string>

#include "nn/window.hpp"
#include "ravel/conv.hpp"

namespace ravel::nn {

using ravel::detail::concat;
using window::list_str;

namespace {

using Widths = std::vector<std::pair<int64_t, int64_t>>;

// The per-axis options of one convolution, checked, and the input with a batch axis.
struct ConvSetup {
  std::string op;
  size_t k = 0;       // spatial rank
  bool batched = true;
  Tensor x;           // [N, C, in...]
  std::vector<int64_t> stride, dilation, kernel;
  Widths pad;         // (before, after) per spatial axis, both >= 0
};

ConvSetup setup(const std::string& op, size_t k, const Tensor& x, const Tensor& w, const ConvOptions& o) {
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

// The GEMM form of a convolution of s.x [N, C, in...] (already checked) with w [O, C/G, k...]:
// Note [Convolution as one GEMM].
Tensor convolve(const ConvSetup& s, const Tensor& w, int64_t groups) {
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
  int64_t positions = 1, taps = geo.taps();
  for (int64_t v : geo.out) positions *= v;
  const int64_t cg = c / g, og = o / g;
  Tensor win = window::view(xp, geo);  // [N, C, out..., k...]
  Tensor wm = w.reshape({g, og, cg * taps}).transpose(1, 2);  // [G, K, Og]
  Shape out_shape{n, o};
  out_shape.insert(out_shape.end(), geo.out.begin(), geo.out.end());
  // Order [G, N, out..., Cg, k...], then one reshape to [G, N * P, Cg * taps]: the copy that reshape
  // makes is the im2col matrix, contracted with the weight in one (batched over G) GEMM.
  Shape split{n, g, cg};
  split.insert(split.end(), win.shape().begin() + 2, win.shape().end());
  std::vector<int64_t> order{1, 0};
  for (size_t i = 0; i < k; ++i) order.push_back(static_cast<int64_t>(3 + i));
  order.push_back(2);
  for (size_t i = 0; i < k; ++i) order.push_back(static_cast<int64_t>(3 + k + i));
  if (g == 1) {
    order = {0};  // [N, C, out..., k...] -> [N, out..., C, k...]
    for (size_t i = 0; i < k; ++i) order.push_back(static_cast<int64_t>(2 + i));
    order.push_back(1);
    for (size_t i = 0; i < k; ++i) order.push_back(static_cast<int64_t>(2 + k + i));
    Tensor cols = win.permute(order).reshape({n * positions, c * taps});
    Tensor y = cols.matmul(wm.reshape({c * taps, o}));  // [N * P, O]
    Shape nhwc{n};
    nhwc.insert(nhwc.end(), geo.out.begin(), geo.out.end());
    nhwc.push_back(o);
    std::vector<int64_t> to_nchw{0, static_cast<int64_t>(k + 1)};
    for (size_t i = 0; i < k; ++i) to_nchw.push_back(static_cast<int64_t>(1 + i));
    return y.reshape(nhwc).permute(to_nchw);
  }
  Tensor cols = win.reshape(split).permute(order).reshape({g, n * positions, cg * taps});
  Tensor y = cols.matmul(wm);  // [G, N * P, Og]
  Shape gnhwc{g, n};
  gnhwc.insert(gnhwc.end(), geo.out.begin(), geo.out.end());
  gnhwc.push_back(og);
  std::vector<int64_t> to_nchw{1, 0, static_cast<int64_t>(k + 2)};
  for (size_t i = 0; i < k; ++i) to_nchw.push_back(static_cast<int64_t>(2 + i));
  return y.reshape(gnhwc).permute(to_nchw).reshape(out_shape);
}

// Note [Convolution as one GEMM]
// out[n, o, p] = sum_{c, t} x[n, c, p * stride + t * dilation] w[o, c, t]: with the window view
// (Note [Convolution as a window view]) laid out [N * P, C * taps] this is one matmul with the
// weight [C * taps, O], which the scheduler runs as one GEMM kernel (Note [Matmul as mul + sum]).
// The contraction kernel takes one summed axis and unpadded operands, so the window view is
// copied once into that matrix (im2col) by the reshape; feeding the GEMM packer straight from the
// strided window, with no copy, needs a contraction that sums several axes of a strided operand
// (docs/performance.md, "Convolution"). The result is [N, P, O] in memory, returned as the
// permuted view [N, O, P]: the next op reads through the view, nothing is transposed. Groups are
// the batch axis of the GEMM. Spatial rank 3 with groups > 1 would need a rank-9 view: it runs
// group by group.
Tensor conv_any(const std::string& op, size_t k, const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias,
                const ConvOptions& o) {
  ConvSetup s = setup(op, k, x, w, o);
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
      parts.push_back(convolve(part, w.slice(0, i * og, (i + 1) * og), 1));
    }
    y = Tensor::concatenate(parts, 1);
  } else {
    y = convolve(s, w, g);
  }
  if (bias) {
    Shape bs(k + 2, 1);
    bs[1] = oc;
    y = y + bias->reshape(bs);
  }
  return s.batched ? y : y.squeeze(0);
}

// conv_transpose = the input-gradient of a convolution: x spread by the stride (stride - 1 zeros
// between elements), padded by dilation * (k - 1) - padding on each side (plus output_padding
// after; a negative width cuts), then convolved at stride 1 with the kernel flipped and the
// channel axes of each group swapped.
Tensor conv_transpose_any(const std::string& op, size_t k, const Tensor& x, const Tensor& w,
                          const std::optional<Tensor>& bias, const ConvOptions& o) {
  RAVEL_CHECK(!o.same, ValueError, op, ": padding 'same' is not defined for transposed convolutions (as PyTorch)");
  ConvSetup s = setup(op, k, x, w, o);
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
  ConvSetup t = s;
  t.stride.assign(k, 1);
  t.pad.clear();
  Widths frame;
  for (size_t i = 0; i < k; ++i) {
    const int64_t full = s.dilation[i] * (s.kernel[i] - 1);
    // (in - 1) * stride + 1 elements are data; the spread left stride - 1 zeros after them.
    frame.emplace_back(full - s.pad[i].first, full - s.pad[i].second + out_pad[i] - (s.stride[i] - 1));
  }
  t.x = window::pad_or_cut(xs, frame);
  for (size_t i = 0; i < k; ++i) {
    const int64_t size = t.x.shape()[2 + i];
    RAVEL_CHECK(size >= s.dilation[i] * (s.kernel[i] - 1) + 1, ShapeError, op, ": the output would be empty on spatial axis ",
                i, " (input ", shape_str(in), ", weight ", shape_str(w.shape()), ", padding (", s.pad[i].first, ", ",
                s.pad[i].second, "))");
  }
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
  Tensor y = conv_any(op, k, t.x, wc, bias, inner);
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
  return conv_transpose_any("conv_transpose1d", 1, x, w, b, o);
}
Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, ConvOptions o) {
  return conv_transpose_any("conv_transpose2d", 2, x, w, b, o);
}
Tensor conv_transpose3d(const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, ConvOptions o) {
  return conv_transpose_any("conv_transpose3d", 3, x, w, b, o);
}

}  // namespace ravel::nn
