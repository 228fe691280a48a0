// nn::interpolate against torch.nn.functional.interpolate's coordinate rules: small cases worked
// out by hand from the formulas in aten/src/ATen/native/UpSample.h (quoted below), and random
// 2-d and 3-d cases against a direct loop over those formulas in double (each output read from
// its two or four source elements, not through a weight matrix); sizes, scale factors, both
// align_corners, integer inputs, and the errors.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "ravel/nn.hpp"
#include "ravel/ravel.hpp"

using ravel::DType;
using ravel::Shape;
using ravel::Tensor;
namespace nn = ravel::nn;
using Mode = nn::InterpolateMode;

namespace {

void check_close(const std::string& what, const Tensor& got, const Shape& shape, const std::vector<double>& want, double tol) {
  BOOST_TEST_CONTEXT(what) {
    BOOST_REQUIRE_MESSAGE(got.shape() == shape, "shape " << ravel::shape_str(got.shape()) << ", want " << ravel::shape_str(shape));
    std::vector<double> g = got.to_vector<double>();
    BOOST_REQUIRE_EQUAL(g.size(), want.size());
    for (size_t k = 0; k < g.size(); ++k)
      BOOST_CHECK_MESSAGE(std::fabs(g[k] - want[k]) <= tol, "[" << k << "] got " << g[k] << ", want " << want[k]);
  }
}

Tensor line(const std::vector<double>& v) { return Tensor::from_vector<double>(v, {1, 1, int64_t(v.size())}); }

// torch's source coordinate of output o on an axis of `in` -> `out` (UpSample.h):
//   scale = align_corners ? (out > 1 ? (in - 1) / (out - 1) : 0) : (scale_factor ? 1 / scale_factor : in / out)
//   linear: src = align_corners ? scale * o : max(scale * (o + 0.5) - 0.5, 0);
//           i0 = min(floor(src), in - 1), i1 = i0 + (i0 < in - 1), l1 = src - i0
//   nearest: i = min(floor(o * scale), in - 1); nearest-exact: min(floor((o + 0.5) * scale), in - 1)
struct Tap { int64_t i0, i1; double l1; };
Tap linear_tap(int64_t in, int64_t out, int64_t o, bool align, double sf) {
  double scale = align ? (out > 1 ? double(in - 1) / double(out - 1) : 0.0) : (sf > 0 ? 1.0 / sf : double(in) / double(out));
  double src = align ? scale * o : std::max(scale * (o + 0.5) - 0.5, 0.0);
  int64_t i0 = std::min(int64_t(std::floor(src)), in - 1);
  return {i0, i0 + (i0 < in - 1 ? 1 : 0), std::min(std::max(src - double(i0), 0.0), 1.0)};
}
int64_t nearest_tap(int64_t in, int64_t out, int64_t o, bool exact) {
  double scale = double(in) / double(out);
  return std::min(int64_t(std::floor(exact ? (o + 0.5) * scale : o * scale)), in - 1);
}

}  // namespace

BOOST_AUTO_TEST_CASE(linear_by_hand) {
  Tensor x = line({1, 2, 3, 4});
  // scale_factor 2, align_corners=False: scale 0.5, src = 0.5 o - 0.25 clamped at 0 -> 0, 0.25,
  // 0.75, ..., 3.25 (the last reads x[3] twice).
  check_close("linear x2", nn::interpolate_scale(x, {2.0}, Mode::Linear), {1, 1, 8}, {1, 1.25, 1.75, 2.25, 2.75, 3.25, 3.75, 4}, 1e-15);
  // align_corners=True: src = 3 o / 7.
  std::vector<double> ac;
  for (int o = 0; o < 8; ++o) ac.push_back(1 + 3.0 * o / 7);
  check_close("linear x2 align_corners", nn::interpolate(x, {8}, Mode::Linear, true), {1, 1, 8}, ac, 1e-15);
  // Down to 2: scale 2, src = 2 (o + 0.5) - 0.5 = 0.5, 2.5.
  check_close("linear 4 -> 2", nn::interpolate(x, {2}, Mode::Linear), {1, 1, 2}, {1.5, 3.5}, 1e-15);
  // To 1 with align_corners: scale 0, the first element.
  check_close("linear 4 -> 1 align_corners", nn::interpolate(x, {1}, Mode::Linear, true), {1, 1, 1}, {1}, 0);
  // A scale factor whose reciprocal is not in / out: 5 * 1.3 -> 6 outputs, scale 1 / 1.3, so
  // src = (o + 0.5) / 1.3 - 0.5 = 0 (clamped), 0.653846, 1.423077, 2.192308, 2.961538, 3.730769.
  check_close("linear scale 1.3", nn::interpolate_scale(line({0, 10, 20, 30, 40}), {1.3}, Mode::Linear), {1, 1, 6},
              {0, 6.5384615384615, 14.230769230769, 21.923076923077, 29.615384615385, 37.307692307692}, 1e-11);
}

BOOST_AUTO_TEST_CASE(bilinear_by_hand) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2});
  // The classic 2x2 -> 4x4 example: rows and columns at src 0, 0.25, 0.75, 1.
  check_close("bilinear", nn::interpolate(x, {4, 4}, Mode::Bilinear), {1, 1, 4, 4},
              {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4}, 1e-6);
  // align_corners: src = o / 3.
  std::vector<double> want;
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) want.push_back(1 + 2 * (r / 3.0) + (c / 3.0));
  check_close("bilinear align_corners", nn::interpolate(x, {4, 4}, Mode::Bilinear, true), {1, 1, 4, 4}, want, 1e-6);
  BOOST_CHECK(nn::interpolate(x, {4, 4}, Mode::Bilinear).dtype() == DType::F32);
}

BOOST_AUTO_TEST_CASE(nearest_by_hand) {
  Tensor x = line({1, 2, 3});
  // 3 -> 5: scale 0.6; nearest floor(0.6 o) = 0 0 1 1 2; nearest-exact floor(0.6 (o + 0.5)) = 0 0 1 2 2.
  check_close("nearest 3 -> 5", nn::interpolate(x, {5}), {1, 1, 5}, {1, 1, 2, 2, 3}, 0);
  check_close("nearest-exact 3 -> 5", nn::interpolate(x, {5}, Mode::NearestExact), {1, 1, 5}, {1, 1, 2, 3, 3}, 0);
  Tensor y = line({1, 2, 3, 4, 5});
  // 5 -> 2: scale 2.5; nearest 0, 2; nearest-exact floor(1.25), floor(3.75) = 1, 3.
  check_close("nearest 5 -> 2", nn::interpolate(y, {2}), {1, 1, 2}, {1, 3}, 0);
  check_close("nearest-exact 5 -> 2", nn::interpolate(y, {2}, Mode::NearestExact), {1, 1, 2}, {2, 4}, 0);
  // Whole factors are views (repeat, stride): infinities and NaN stay where they are.
  Tensor z = line({1, INFINITY, 3, NAN});
  std::vector<double> up = nn::interpolate_scale(z, {2.0}).to_vector<double>();
  BOOST_CHECK(up[0] == 1 && up[1] == 1 && std::isinf(up[2]) && std::isinf(up[3]) && up[4] == 3 && std::isnan(up[7]));
  std::vector<double> down = nn::interpolate(z, {2}).to_vector<double>();
  BOOST_CHECK(down[0] == 1 && down[1] == 3);
  // Integers: nearest only, exact, the dtype kept.
  Tensor i = Tensor::from_vector<int64_t>({7, -3, 1000000007}, {1, 1, 3});
  Tensor ri = nn::interpolate(i, {5});
  BOOST_CHECK(ri.dtype() == DType::I64);
  BOOST_CHECK((ri.to_vector<int64_t>() == std::vector<int64_t>{7, 7, -3, -3, 1000000007}));
}

BOOST_AUTO_TEST_CASE(random_2d_and_3d_against_the_formulas) {
  struct Case { Shape in; Shape out; bool align; };
  for (const Case& c : {Case{{2, 3, 5, 7}, {8, 4}, false}, Case{{2, 3, 5, 7}, {8, 4}, true}, Case{{1, 2, 4, 3}, {3, 9}, false},
                        Case{{1, 2, 6, 6}, {6, 6}, true}}) {
    BOOST_TEST_CONTEXT(ravel::shape_str(c.in) << " -> " << ravel::shape_str(c.out) << " align_corners " << c.align) {
      Tensor x = Tensor::randn(c.in, 41, DType::F64);
      std::vector<double> xv = x.to_vector<double>();
      const int64_t N = c.in[0] * c.in[1], H = c.in[2], W = c.in[3], OH = c.out[0], OW = c.out[1];
      std::vector<double> lin, near, exact;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            Tap th = linear_tap(H, OH, oh, c.align, 0), tw = linear_tap(W, OW, ow, c.align, 0);
            auto at = [&](int64_t h, int64_t w) { return xv[size_t((n * H + h) * W + w)]; };
            lin.push_back((1 - th.l1) * ((1 - tw.l1) * at(th.i0, tw.i0) + tw.l1 * at(th.i0, tw.i1)) +
                          th.l1 * ((1 - tw.l1) * at(th.i1, tw.i0) + tw.l1 * at(th.i1, tw.i1)));
            near.push_back(at(nearest_tap(H, OH, oh, false), nearest_tap(W, OW, ow, false)));
            exact.push_back(at(nearest_tap(H, OH, oh, true), nearest_tap(W, OW, ow, true)));
          }
      Shape os = {c.in[0], c.in[1], OH, OW};
      check_close("bilinear", nn::interpolate(x, c.out, Mode::Bilinear, c.align), os, lin, 1e-13);
      if (!c.align) {
        check_close("nearest", nn::interpolate(x, c.out), os, near, 0);
        check_close("nearest-exact", nn::interpolate(x, c.out, Mode::NearestExact), os, exact, 0);
      }
    }
  }
  // Trilinear is the same rule on three axes: a tensor constant along two axes reduces to linear.
  Tensor l = Tensor::from_vector<double>({0, 1, 4, 9}, {1, 1, 4, 1, 1}).expand({1, 1, 4, 2, 3});
  Tensor t = nn::interpolate(l, {7, 3, 5}, Mode::Trilinear);
  BOOST_REQUIRE((t.shape() == Shape{1, 1, 7, 3, 5}));
  std::vector<double> tv = t.to_vector<double>(), xs = {0, 1, 4, 9};
  for (int64_t d = 0; d < 7; ++d) {
    Tap tp = linear_tap(4, 7, d, false, 0);
    double want = (1 - tp.l1) * xs[size_t(tp.i0)] + tp.l1 * xs[size_t(tp.i1)];
    for (int64_t k = 0; k < 15; ++k) BOOST_CHECK_CLOSE(tv[size_t(d * 15 + k)] + 1, want + 1, 1e-12);
  }
}

BOOST_AUTO_TEST_CASE(derivative_is_the_transposed_resampling) {
  // d/dx sum(w * interpolate(x)) for linear 4 -> 8 (align_corners=False): x[i] collects the
  // weights of the outputs that read it: x0: 1 + 0.75 (o=0, 1), x1: 0.25 + 0.75 + 0.25 + 0.75 ...
  Tensor x = line({1, 2, 3, 4});
  std::vector<double> g = ravel::grad([](const Tensor& v) { return nn::interpolate_scale(v, {2.0}, Mode::Linear).sum(); })(x)
                              .to_vector<double>();
  // Taps: o0 x0 (1); o1 x0 .75 x1 .25; o2 x0 .25 x1 .75; o3 x1 .75 x2 .25; o4 x1 .25 x2 .75;
  // o5 x2 .75 x3 .25; o6 x2 .25 x3 .75; o7 x3 (1).
  BOOST_CHECK((g == std::vector<double>{2, 2, 2, 2}));
  std::vector<double> gn = ravel::grad([](const Tensor& v) { return nn::interpolate(v, {5}).sum(); })(line({1, 2, 3}))
                               .to_vector<double>();
  BOOST_CHECK((gn == std::vector<double>{2, 2, 1}));  // sources 0 0 1 1 2
}

BOOST_AUTO_TEST_CASE(errors) {
  Tensor x = Tensor::zeros({1, 1, 4, 4});
  BOOST_CHECK_THROW(nn::interpolate(x, {8}, Mode::Linear), ravel::ShapeError);          // linear needs 3-d
  BOOST_CHECK_THROW(nn::interpolate(x, {8, 8}, Mode::Nearest, true), ravel::ValueError);  // align_corners with nearest
  BOOST_CHECK_THROW(nn::interpolate(x, {8}), ravel::ValueError);                          // one size for two axes
  BOOST_CHECK_THROW(nn::interpolate(x, {0, 8}), ravel::ValueError);
  BOOST_CHECK_THROW(nn::interpolate(Tensor::zeros({4, 4}), {8, 8}), ravel::ShapeError);
  BOOST_CHECK_THROW(nn::interpolate_scale(x, {2.0, -1.0}), ravel::ValueError);
  BOOST_CHECK_THROW(nn::interpolate_scale(x, {2.0}), ravel::ValueError);
  BOOST_CHECK_THROW(nn::interpolate_scale(x, {2.0, 1e30}), ravel::ValueError);  // beyond int64: refused before converting
  BOOST_CHECK_THROW(nn::interpolate(Tensor::zeros({1, 1, 4, 4}, DType::I32), {8, 8}, Mode::Bilinear), ravel::DTypeError);
}
