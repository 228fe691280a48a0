// An empty axis list is no axes (numpy axis=()) for every function taking
// Axes, with Axes::every() / ravel::all_axes spelling every axis; pad with a constant value
// (numpy.pad constant_values); eye(n, m, k) (numpy.eye). Expected values are NumPy's, written
// out by hand from its documented semantics.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <vector>

#include "ravel/autodiff.hpp"
#include "ravel/ravel.hpp"

using ravel::DType;
using ravel::Shape;
using ravel::Tensor;

BOOST_AUTO_TEST_CASE(empty_axes_reduce_nothing) {
  Tensor x = Tensor::from_vector<double>({1, -2, 3, 4, 5, -6}, {2, 3});
  const std::vector<double> xv = x.to_vector<double>();
  // np.sum(x, axis=()) is x itself (same shape, same values); likewise max, min, prod, mean.
  for (auto f : {+[](const Tensor& t) { return t.sum({}); }, +[](const Tensor& t) { return t.max({}); },
                 +[](const Tensor& t) { return t.min({}); }, +[](const Tensor& t) { return t.prod({}); },
                 +[](const Tensor& t) { return t.mean({}); }, +[](const Tensor& t) { return t.sum({}, true); },
                 +[](const Tensor& t) { return t.flip({}); }, +[](const Tensor& t) { return t.squeeze({}); }}) {
    Tensor r = f(x);
    BOOST_TEST(r.shape() == x.shape());
    BOOST_TEST(r.to_vector<double>() == xv, boost::test_tools::per_element());
  }
  // np.var(x, axis=()) with ddof=0 is all zeros; logsumexp over no axes is x
  BOOST_TEST(x.var({}, false, 0).to_vector<double>() == std::vector<double>(6, 0.0), boost::test_tools::per_element());
  BOOST_TEST(x.logsumexp({}).to_vector<double>() == xv, boost::test_tools::tolerance(1e-12) << boost::test_tools::per_element());
  // bool sums over no axes still count as i64 (dtype as numpy: np.sum(b, axis=()).dtype == int64)
  std::vector<uint8_t> b = {1, 0, 1};
  BOOST_TEST((Tensor::from_data(b.data(), DType::Bool, {3}).sum({}).dtype() == DType::I64));
  // every axis, spelled out; and the default is still every axis
  BOOST_TEST(x.sum(ravel::all_axes).item<double>() == 5.0);
  BOOST_TEST(x.sum(ravel::Axes::every(), true).shape() == (Shape{1, 1}));
  BOOST_TEST(x.sum().item<double>() == 5.0);
  BOOST_TEST(x.flip().to_vector<double>() == (std::vector<double>{-6, 5, 4, 3, -2, 1}), boost::test_tools::per_element());
  BOOST_TEST(Tensor::zeros({1, 3, 1}).squeeze().shape() == (Shape{3}));
  // the gradient of a reduction over no axes is the cotangent itself
  auto g = ravel::gradients(x.sum({}).square().sum(), {x})[0].to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i) BOOST_TEST(g[i] == 2 * xv[i]);
}

BOOST_AUTO_TEST_CASE(pad_with_a_constant) {
  // np.pad([[1, 2], [3, 4]], ((1, 0), (0, 2)), constant_values=7)
  //   -> [[7 7 7 7] [1 2 7 7] [3 4 7 7]]
  Tensor x = Tensor::from_vector<int32_t>({1, 2, 3, 4}, {2, 2});
  Tensor p = x.pad({{1, 0}, {0, 2}}, 7);
  BOOST_TEST(p.shape() == (Shape{3, 4}));
  BOOST_TEST((p.dtype() == DType::I32));
  BOOST_TEST(p.to_vector<int32_t>() == (std::vector<int32_t>{7, 7, 7, 7, 1, 2, 7, 7, 3, 4, 7, 7}),
             boost::test_tools::per_element());
  // -inf pads as itself (a where, not value * mask)
  auto q = Tensor::from_vector<float>({1.f}, {1}).pad({{1, 1}}, -INFINITY).to_vector<float>();
  BOOST_TEST((q[0] == -INFINITY && q[1] == 1.f && q[2] == -INFINITY));
  // the gradient flows to the data only
  Tensor f = Tensor::from_vector<double>({1, 2}, {2});
  auto g = ravel::gradients((f.pad({{2, 1}}, 3.5) * Tensor::from_vector<double>({1, 2, 3, 4, 5}, {5})).sum(), {f})[0];
  BOOST_TEST(g.to_vector<double>() == (std::vector<double>{3, 4}), boost::test_tools::per_element());
}

// Zero padding made contiguous: tbb_cpu copies such a masked view row by row (Note [Padding
// copies]: whole rows outside the box zeroed, the valid span of the others copied between zeroed
// pads). Large enough for several blocks, pads on outer and inner axes, a source that is itself
// a strided window (shrunk), a row entirely padding on the innermost axis side only, and 1-, 4-
// and 8-byte dtypes; against a loop.
BOOST_AUTO_TEST_CASE(zero_padding_copies_match_a_loop) {
  const Shape in{3, 5, 20, 30};
  const std::vector<std::pair<int64_t, int64_t>> widths{{0, 1}, {1, 2}, {2, 1}, {3, 4}};
  std::vector<double> values(3 * 5 * 20 * 30);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>((i * 37) % 101 + 1);  // 1..101: exact in u8
  for (DType dt : {DType::F32, DType::F64, DType::I32, DType::I64, DType::U8}) {
    Tensor x = Tensor::from_vector<double>(values, in).cast(dt).realize();
    for (bool shrunk : {false, true}) {
      // shrunk: a [3, 5, 18, 25] window of x (rows 1..19, columns 2..27), then padded
      Tensor src = shrunk ? x.shrink({{0, 3}, {0, 5}, {1, 19}, {2, 27}}) : x;
      Tensor p = src.pad(widths).contiguous();
      const Shape& ss = src.shape();
      Shape ps;
      for (size_t d = 0; d < 4; ++d) ps.push_back(ss[d] + widths[d].first + widths[d].second);
      BOOST_TEST(p.shape() == ps);
      auto got = p.cast(DType::F64).to_vector<double>();
      std::vector<double> want(got.size(), 0.0);
      const int64_t r0 = shrunk ? 1 : 0, c0 = shrunk ? 2 : 0;
      for (int64_t a = 0; a < ss[0]; ++a)
        for (int64_t b = 0; b < ss[1]; ++b)
          for (int64_t h = 0; h < ss[2]; ++h)
            for (int64_t w = 0; w < ss[3]; ++w) {
              const int64_t o = ((a + widths[0].first) * ps[1] + b + widths[1].first) * ps[2] + h + widths[2].first;
              const double v = values[((a * 5 + b) * 20 + h + r0) * 30 + w + c0];
              want[o * ps[3] + w + widths[3].first] = v;
            }
      BOOST_TEST(got == want, boost::test_tools::per_element());
    }
  }
}

BOOST_AUTO_TEST_CASE(eye_n_m_k) {
  // np.eye(3, 4, 1) -> [[0 1 0 0] [0 0 1 0] [0 0 0 1]]; np.eye(3, 2, -1) -> [[0 0] [1 0] [0 1]]
  BOOST_TEST(Tensor::eye(3, 4, 1).to_vector<float>() == (std::vector<float>{0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}),
             boost::test_tools::per_element());
  Tensor e = Tensor::eye(3, 2, -1, DType::I64);
  BOOST_TEST(e.shape() == (Shape{3, 2}));
  BOOST_TEST(e.to_vector<int64_t>() == (std::vector<int64_t>{0, 0, 1, 0, 0, 1}), boost::test_tools::per_element());
  BOOST_TEST(Tensor::eye(2, 3, 5).to_vector<float>() == std::vector<float>(6, 0.f), boost::test_tools::per_element());
  BOOST_TEST(Tensor::eye(0, 3).shape() == (Shape{0, 3}));
  BOOST_TEST(Tensor::eye(3, 3, 0).to_vector<float>() == Tensor::eye(3).to_vector<float>(), boost::test_tools::per_element());
}
