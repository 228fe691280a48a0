// torch.nn.functional.interpolate (nearest, nearest-exact, linear, bilinear, trilinear) as one
// resampling per spatial axis.
#include <algorithm>
#include <cmath>

#include "ravel/nn.hpp"

namespace ravel::nn {

// Note [Interpolation as a contraction]
// Every mode here is separable: resizing [N, C, H, W] is resizing W, then H, each output element
// of an axis being a fixed combination of at most two input elements of that axis. The
// combination is a matrix [in, out] known on the host (it depends only on the sizes), so an axis
// is resampled by one matmul with it: differentiable to any order (the derivative is the
// transposed matrix), fused and run by every backend, and exactly torch's arithmetic where the
// matrix holds torch's weights, computed with torch's formulas in the input's precision
// (aten/src/ATen/native/UpSample.h: area_pixel_compute_scale / _source_index for the linear
// modes, nearest_neighbor(_exact)_compute_source_index). Nearest resampling by a whole factor
// (each input element repeated k times, or every k-th kept) is a view instead: repeat_interleave
// or a strided slice, exact for every value. Elsewhere an infinity or NaN in the input spreads
// along its line (0 * inf in the contraction), where torch keeps it local.
namespace {

const char* interp_mode_name(InterpolateMode m) {
  switch (m) {
    case InterpolateMode::Nearest: return "nearest";
    case InterpolateMode::NearestExact: return "nearest-exact";
    case InterpolateMode::Linear: return "linear";
    case InterpolateMode::Bilinear: return "bilinear";
    case InterpolateMode::Trilinear: return "trilinear";
  }
  return "?";
}

bool interp_is_nearest(InterpolateMode m) { return m == InterpolateMode::Nearest || m == InterpolateMode::NearestExact; }

// Source weights of one axis: w[i * out + o] is the weight of input i in output o.
template <class F>
std::vector<double> interp_weights(int64_t in, int64_t out, InterpolateMode mode, bool align_corners,
                                   double scale_factor) {
  std::vector<double> w(size_t(in * out), 0.0);
  // compute_scales_value: 1 / scale_factor when one is given, else in / out.
  const F scale = scale_factor > 0 ? F(1.0 / scale_factor) : F(in) / F(out);
  if (interp_is_nearest(mode)) {
    const bool exact = mode == InterpolateMode::NearestExact;
    for (int64_t o = 0; o < out; ++o) {
      F src = exact ? (F(o) + F(0.5)) * scale : F(o) * scale;
      int64_t i = std::min(int64_t(std::floor(src)), in - 1);
      w[size_t(i * out + o)] = 1;
    }
    return w;
  }
  const F s = align_corners ? (out > 1 ? F(in - 1) / F(out - 1) : F(0)) : scale;
  for (int64_t o = 0; o < out; ++o) {
    F src = align_corners ? s * F(o) : std::max(s * (F(o) + F(0.5)) - F(0.5), F(0));
    int64_t i0 = std::min(int64_t(std::floor(src)), in - 1);
    F l1 = std::min(std::max(src - F(i0), F(0)), F(1));
    F l0 = F(1) - l1;
    int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
    w[size_t(i0 * out + o)] += double(l0);
    w[size_t(i1 * out + o)] += double(l1);
  }
  return w;
}

// The nearest source of each output, if the weights are one-hot.
std::vector<int64_t> interp_sources(const std::vector<double>& w, int64_t in, int64_t out) {
  std::vector<int64_t> src(size_t(out), -1);
  for (int64_t i = 0; i < in; ++i)
    for (int64_t o = 0; o < out; ++o)
      if (w[size_t(i * out + o)] != 0) src[size_t(o)] = i;
  return src;
}

Tensor interp_resample_axis(const Tensor& x, int64_t axis, int64_t out, InterpolateMode mode, bool align_corners,
                     double scale_factor) {
  const int64_t in = x.size(axis);
  std::vector<double> w = x.dtype() == DType::F32 ? interp_weights<float>(in, out, mode, align_corners, scale_factor)
                                                  : interp_weights<double>(in, out, mode, align_corners, scale_factor);
  if (interp_is_nearest(mode)) {
    std::vector<int64_t> src = interp_sources(w, in, out);
    bool identity = in == out, repeat = out % in == 0, strided = in % out == 0;
    for (int64_t o = 0; o < out; ++o) {
      identity = identity && src[size_t(o)] == o;
      repeat = repeat && src[size_t(o)] == o / (out / in);
      strided = strided && src[size_t(o)] == o * (in / out);
    }
    if (identity) return x;
    if (repeat) return x.repeat_interleave(out / in, axis);
    if (strided) return x.slice(axis, 0, std::nullopt, in / out);
  }
  Tensor weights = Tensor::from_vector<double>(w, {in, out}, x.device()).cast(x.dtype());
  return x.transpose(axis, -1).matmul(weights).transpose(axis, -1);
}

Tensor interp_impl(const Tensor& x, const Shape& size, InterpolateMode mode, bool align_corners,
                        const std::vector<double>& scale_factor) {
  const char* name = interp_mode_name(mode);
  RAVEL_CHECK(x.defined(), ValueError, "interpolate: the input is an undefined tensor");
  RAVEL_CHECK(x.ndim() >= 3 && x.ndim() <= 5, ShapeError, "interpolate: expected an input [N, C, *spatial] with 1 to 3 spatial axes, got shape ",
              shape_str(x.shape()));
  const int64_t spatial = x.ndim() - 2;
  const int64_t needed = mode == InterpolateMode::Linear ? 1 : mode == InterpolateMode::Bilinear ? 2 : mode == InterpolateMode::Trilinear ? 3 : spatial;
  RAVEL_CHECK(needed == spatial, ShapeError, "interpolate: mode ", name, " needs ", needed + 2, "-d input (", needed,
              " spatial axes), got shape ", shape_str(x.shape()));
  RAVEL_CHECK(!(align_corners && interp_is_nearest(mode)), ValueError, "interpolate: align_corners can only be set with the linear modes, not ", name,
              " (as torch)");
  RAVEL_CHECK(int64_t(size.size()) == spatial, ValueError, "interpolate: ", size.size(), " output sizes for ", spatial,
              " spatial axes of shape ", shape_str(x.shape()));
  for (int64_t s : size) RAVEL_CHECK(s > 0, ValueError, "interpolate: output sizes must be > 0, got ", shape_str(size));
  const bool fp = is_float(x.dtype());
  RAVEL_CHECK(fp || interp_is_nearest(mode), DTypeError, "interpolate: mode ", name, " expects a float input, got ",
              dtype_name(x.dtype()));
  // Nearest on integers: the one-hot contraction in f64 is exact for every |value| < 2^53.
  Tensor y = fp ? x : x.cast(DType::F64);
  for (int64_t a = 0; a < spatial; ++a) {
    // A factor of 0 stands for none given (user factors are checked positive above). A plain
    // double, not std::optional: GCC 12 warned that the optional's value may be uninitialised.
    const double sf = scale_factor.empty() ? 0.0 : scale_factor[size_t(a)];
    y = interp_resample_axis(y, a + 2, size[size_t(a)], mode, align_corners, sf);
  }
  return fp ? y : y.cast(x.dtype());
}

}  // namespace

Tensor interpolate(const Tensor& x, const Shape& size, InterpolateMode mode, bool align_corners) {
  return interp_impl(x, size, mode, align_corners, {});
}

// Output size floor(in * scale) (computed in double, as torch), coordinates from 1 / scale.
Tensor interpolate_scale(const Tensor& x, const std::vector<double>& scale_factor, InterpolateMode mode, bool align_corners) {
  RAVEL_CHECK(x.defined(), ValueError, "interpolate: the input is an undefined tensor");
  RAVEL_CHECK(int64_t(scale_factor.size()) == x.ndim() - 2, ValueError, "interpolate: ", scale_factor.size(),
              " scale factors for input shape ", shape_str(x.shape()), " (expected one per spatial axis)");
  Shape size;
  for (size_t a = 0; a < scale_factor.size(); ++a) {
    RAVEL_CHECK(scale_factor[a] > 0 && std::isfinite(scale_factor[a]), ValueError, "interpolate: scale factors must be positive and finite, got ",
                scale_factor[a]);
    // Checked before the conversion: a double beyond int64's range converts to an undefined value.
    const double out = std::floor(double(x.size(int64_t(a) + 2)) * scale_factor[a]);
    RAVEL_CHECK(out < 0x1p62, ValueError, "interpolate: scale factor ", scale_factor[a], " on spatial axis ", a,
                " of shape ", shape_str(x.shape()), " gives an output size of ", out, " (expected below 2^62)");
    size.push_back(int64_t(out));
  }
  return interp_impl(x, size, mode, align_corners, scale_factor);
}

}  // namespace ravel::nn
