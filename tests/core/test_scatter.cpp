// scatter, scatter(value), scatter_add and scatter_reduce on contiguous and view inputs, against
// a naive loop in double written here (PyTorch's definition: for every index position, in
// row-major order, combine src into out[.., index[..], ..]), plus PyTorch's documented examples.
#include "common.hpp"
#include "expect_error.hpp"

#include <algorithm>
#include <limits>

using namespace rtest;

namespace {

// PyTorch's scatter_reduce, written as its documentation defines it. mode: "scatter" (last
// write wins), "sum", "prod", "mean", "amax", "amin".
NDArray naive_scatter(const NDArray& self, int64_t axis, const NDArray& index, const NDArray& src,
                      const std::string& mode, bool include_self) {
  NDArray out = self;
  NDArray count(self.shape, DType::I64, include_self ? 1.0 : 0.0);
  std::vector<bool> touched(self.v.size(), false);
  ref::for_each_index(index.shape, [&](const ref::Index& i) {
    ref::Index o(i);
    o[axis] = static_cast<int64_t>(index[i]);
    const int64_t f = ref::flat(self.shape, o);
    const double s = src[i];
    double& y = out.v[f];
    if (mode == "scatter") {
      y = s;
      return;
    }
    if (!touched[f] && !include_self) {
      y = s;
    } else if (mode == "sum" || mode == "mean") {
      y += s;
    } else if (mode == "prod") {
      y *= s;
    } else if (mode == "amax") {
      y = std::max(y, s);
    } else if (mode == "amin") {
      y = std::min(y, s);
    }
    touched[f] = true;
    count.v[f] += 1;
  });
  if (mode == "mean")
    for (size_t f = 0; f < out.v.size(); ++f)
      if (touched[f]) {
        const double q = out.v[f] / count.v[f];
        out.v[f] = ravel::is_float(self.dtype) ? q : std::floor(q);  // PyTorch: integer mean rounds down
      }
  for (double& x : out.v) x = ref::convert(x, self.dtype);  // integer wrap-around as the dtype does
  return out;
}

// An index tensor of shape s with values in [0, n), repeats likely (a small LCG).
NDArray index_values(const Shape& s, int64_t n, uint64_t seed) {
  NDArray a(s, DType::I64);
  uint64_t st = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (double& v : a.v) {
    st = st * 6364136223846793005ull + 1442695040888963407ull;
    v = static_cast<double>((st >> 33) % static_cast<uint64_t>(n));
  }
  return a;
}

}  // namespace

BOOST_AUTO_TEST_CASE(scatter_family_against_naive_loop) {
  // self [3, 4]; index smaller than self on the other axis and than src everywhere; repeats.
  const std::vector<std::string> modes = {"scatter", "sum", "prod", "mean", "amax", "amin"};
  uint64_t seed = 100;
  for (DType dt : {DType::I32, DType::F32, DType::F64})
    for (ViewKind k : {ViewKind::Contiguous, ViewKind::Permuted, ViewKind::Padded, ViewKind::SlicedNegStep})
      for (int64_t axis : {0, 1, -1})
        for (const std::string& mode : modes)
          for (bool include_self : {true, false}) {
            if (mode == "scatter" && !include_self) continue;
            guarded(mode + " dtype=" + ravel::dtype_name(dt) + " view=" + kind_name(k) + " axis=" + std::to_string(axis) +
                        " include_self=" + (include_self ? "1" : "0"),
                    [&] {
                      const int64_t ax = axis < 0 ? axis + 2 : axis;
                      const Domain dom = mode == "prod" ? Domain::Prod : Domain::Any;
                      Built self = build(k, {3, 4}, dt, dom, ++seed);
                      const ViewKind src_kind = kAllKinds[seed % kAllKinds.size()];
                      Built src = build(src_kind, {5, 5}, dt, dom, ++seed);
                      Shape is = ax == 0 ? Shape{5, 3} : Shape{2, 5};  // larger than self along the axis
                      NDArray idx = index_values(is, self.r.shape[ax], ++seed);
                      Tensor it = to_tensor(idx);
                      Tensor got = mode == "scatter" ? self.t.scatter(axis, it, src.t)
                                                     : self.t.scatter_reduce(axis, it, src.t, mode, include_self);
                      check_tensor(got, naive_scatter(self.r, ax, idx, src.r, mode, include_self));
                      if (mode == "sum" && include_self)
                        check_tensor(self.t.scatter_add(axis, it, src.t), naive_scatter(self.r, ax, idx, src.r, "sum", true));
                    });
          }
}

BOOST_AUTO_TEST_CASE(scatter_3d_value_bool_and_int_index_dtypes) {
  uint64_t seed = 500;
  for (DType idt : {DType::U8, DType::I32, DType::I64})
    for (int64_t axis : {0, 1, 2})
      guarded(std::string("3-D scatter index dtype=") + ravel::dtype_name(idt) + " axis=" + std::to_string(axis), [&] {
        Built self = build(ViewKind::Contiguous, {2, 3, 4}, DType::F64, Domain::Any, ++seed);
        Built src = build(ViewKind::Flipped, {2, 3, 4}, DType::F64, Domain::Any, ++seed);
        Shape is = {2, 3, 4};
        is[axis] = 2;
        NDArray idx = index_values(is, self.r.shape[axis], ++seed);
        NDArray idx_typed(idx.shape, idt, idx.v);
        check_tensor(self.t.scatter(axis, to_tensor(idx_typed), src.t), naive_scatter(self.r, axis, idx, src.r, "scatter", true));
        check_tensor(self.t.scatter_add(axis, to_tensor(idx_typed), src.t), naive_scatter(self.r, axis, idx, src.r, "sum", true));
        NDArray value(is, DType::F64, -2.5);
        check_tensor(self.t.scatter(axis, to_tensor(idx_typed), -2.5), naive_scatter(self.r, axis, idx, value, "scatter", true));
      });
  guarded("bool scatter", [&] {
    Built self = build(ViewKind::Contiguous, {3, 4}, DType::Bool, Domain::Any, 7);
    Built src = build(ViewKind::Contiguous, {3, 4}, DType::Bool, Domain::Any, 8);
    NDArray idx = index_values({3, 4}, 3, 9);
    check_tensor(self.t.scatter(0, to_tensor(idx), src.t), naive_scatter(self.r, 0, idx, src.r, "scatter", true));
  });
}

BOOST_AUTO_TEST_CASE(scatter_reduce_pytorch_documentation_examples) {
  // The examples of torch.Tensor.scatter_reduce's documentation (PyTorch 2.x).
  Tensor src = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {6});
  Tensor index = Tensor::from_vector<int64_t>({0, 1, 0, 1, 2, 1}, {6});
  Tensor input = Tensor::from_vector<float>({1, 2, 3, 4}, {4});
  auto v = [](const Tensor& t) { return t.to_vector<float>(); };
  BOOST_TEST(v(input.scatter_reduce(0, index, src, "sum")) == (std::vector<float>{5, 14, 8, 4}), boost::test_tools::per_element());
  BOOST_TEST(v(input.scatter_reduce(0, index, src, "sum", false)) == (std::vector<float>{4, 12, 5, 4}),
             boost::test_tools::per_element());
  Tensor input2 = Tensor::from_vector<float>({5, 4, 3, 2}, {4});
  BOOST_TEST(v(input2.scatter_reduce(0, index, src, "amax")) == (std::vector<float>{5, 6, 5, 2}), boost::test_tools::per_element());
  BOOST_TEST(v(input2.scatter_reduce(0, index, src, "amax", false)) == (std::vector<float>{3, 6, 5, 2}),
             boost::test_tools::per_element());
  // torch.zeros(3, 5).scatter_(0, torch.tensor([[0, 1, 2, 0]]), torch.arange(1, 11.).view(2, 5)):
  // [[1, 0, 0, 4, 0], [0, 2, 0, 0, 0], [0, 0, 3, 0, 0]] (torch.Tensor.scatter_'s documentation).
  Tensor s2 = Tensor::arange(1, 11, 1, DType::F32).reshape({2, 5});
  Tensor got = Tensor::zeros({3, 5}).scatter(0, Tensor::from_vector<int64_t>({0, 1, 2, 0}, {1, 4}), s2);
  BOOST_TEST(v(got) == (std::vector<float>{1, 0, 0, 4, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(scatter_keeps_untouched_values_and_special_floats) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  Tensor self = Tensor::from_vector<double>({-0.0, 1, 2, 3}, {4});
  Tensor src = Tensor::from_vector<double>({inf, nan}, {2});
  Tensor index = Tensor::from_vector<int64_t>({3, 1}, {2});
  std::vector<double> r = self.scatter(0, index, src).to_vector<double>();
  BOOST_TEST(std::signbit(r[0]));  // untouched, bit for bit (-0.0 stays -0.0)
  BOOST_TEST(std::isnan(r[1]));
  BOOST_TEST(r[2] == 2.0);
  BOOST_TEST(r[3] == inf);  // inf elsewhere in src does not leak into other positions
  std::vector<double> a = self.scatter_add(0, index, src).to_vector<double>();
  BOOST_TEST(std::signbit(a[0]));
  BOOST_TEST(std::isnan(a[1]));
  BOOST_TEST(a[2] == 2.0);
  BOOST_TEST(a[3] == inf);
  // Integers: sums wrap as the dtype does; amax/amin identities are the dtype's extremes.
  Tensor big = Tensor::from_vector<int64_t>({std::numeric_limits<int64_t>::min(), 0}, {2});
  Tensor one = Tensor::from_vector<int64_t>({std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}, {2});
  std::vector<int64_t> m = big.scatter_reduce(0, Tensor::from_vector<int64_t>({0, 1}, {2}), one, "amin", false).to_vector<int64_t>();
  BOOST_TEST(m[0] == std::numeric_limits<int64_t>::max());
  BOOST_TEST(m[1] == std::numeric_limits<int64_t>::min());
}

BOOST_AUTO_TEST_CASE(scatter_errors) {
  Tensor x = Tensor::zeros({3, 4});
  Tensor src = Tensor::ones({3, 4});
  expect_error<ravel::IndexError>("index too large", [&] { x.scatter(1, Tensor::from_vector<int64_t>({0, 4, 1}, {3, 1}), src); },
                                  {"scatter: index 4 at position [1, 0]", "axis 1", "(size 4)"});
  expect_error<ravel::IndexError>("negative index", [&] { x.scatter_add(0, Tensor::from_vector<int64_t>({0, -1}, {1, 2}), src); },
                                  {"scatter_add: index -1 at position [0, 1]", "axis 0", "(size 3)"});
  expect_error<ravel::IndexError>("scatter_reduce", [&] {
    x.scatter_reduce(0, Tensor::from_vector<int64_t>({3}, {1, 1}), src, "amax");
  }, {"scatter_reduce: index 3 at position [0, 0]"});
  expect_error<ravel::ValueError>("unknown reduce", [&] { x.scatter_reduce(0, Tensor::zeros({1, 1}, DType::I64), src, "max"); },
                                  {"scatter_reduce", "\"amax\"", "got \"max\""});
  expect_error<ravel::DTypeError>("float index", [&] { x.scatter(0, Tensor::zeros({1, 1}), src); }, {"scatter", "integer index", "f32"});
  expect_error<ravel::ShapeError>("rank", [&] { x.scatter(0, Tensor::zeros({3}, DType::I64), src); }, {"scatter", "as many axes"});
  expect_error<ravel::ShapeError>("index larger than src", [&] {
    x.scatter(0, Tensor::zeros({2, 2}, DType::I64), Tensor::ones({1, 4}));
  }, {"exceeds src shape"});
  expect_error<ravel::ShapeError>("index larger than self off the axis", [&] {
    x.scatter(0, Tensor::zeros({2, 5}, DType::I64), Tensor::ones({2, 5}));
  }, {"exceeds input shape", "axis 1"});
  expect_error<ravel::AxisError>("axis", [&] { x.scatter(2, Tensor::zeros({1, 1}, DType::I64), src); }, {"scatter"});
  // The composite's size limit: 2^16 entries x 2^16 positions = 2^32 comparisons.
  const int64_t n = int64_t{1} << 16;
  expect_error<ravel::ValueError>("too large", [&] {
    Tensor::zeros({n}).scatter_add(0, Tensor::zeros({n}, DType::I64), Tensor::ones({n}));
  }, {"scatter_add", "65536 index entries", "65536 positions", "2^31"});
}

BOOST_AUTO_TEST_CASE(scatter_of_whole_rows) {
  // An index broadcast over the other axes (torch's x.scatter_add(0, i.unsqueeze(1).expand(-1, k),
  // src), the segment-sum idiom) names whole rows: float tensors take one GEMM of the one-hot rows
  // (Note [One-hot selections as a GEMM]), the others the compare-select composite. Same results.
  uint64_t seed = 900;
  for (DType dt : {DType::I32, DType::F32, DType::F64})
    for (int64_t axis : {0, 1})
      for (const std::string mode : {"scatter", "sum", "mean", "amax"})
        for (bool include_self : {true, false}) {
          if (mode == "scatter" && !include_self) continue;
          guarded(mode + " rows dtype=" + ravel::dtype_name(dt) + " axis=" + std::to_string(axis) +
                      " include_self=" + (include_self ? "1" : "0"),
                  [&] {
                    Built self = build(ViewKind::Permuted, {4, 3}, dt, Domain::Any, ++seed);
                    Shape ss = axis == 0 ? Shape{6, 3} : Shape{4, 6};
                    Built src = build(ViewKind::Contiguous, ss, dt, Domain::Any, ++seed);
                    const int64_t n = self.r.shape[axis];
                    NDArray idx1 = index_values({6}, n, ++seed);
                    Tensor it = to_tensor(idx1).reshape(axis == 0 ? Shape{6, 1} : Shape{1, 6}).expand(ss);
                    NDArray idx(ss, DType::I64);
                    ref::for_each_index(ss, [&](const ref::Index& i) { idx[i] = idx1.v[i[axis]]; });
                    Tensor got = mode == "scatter" ? self.t.scatter(axis, it, src.t)
                                                   : self.t.scatter_reduce(axis, it, src.t, mode, include_self);
                    check_tensor(got, naive_scatter(self.r, axis, idx, src.r, mode, include_self));
                  });
        }
  guarded("rows with infinities and NaN", [&] {
    const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
    Tensor self = Tensor::from_vector<double>({1, 2, -0.0, 3, 4, 5}, {3, 2});
    Tensor src = Tensor::from_vector<double>({inf, 1, -inf, 2, nan, 3}, {3, 2});
    Tensor idx = Tensor::from_vector<int64_t>({2, 2, 0}, {3, 1}).expand({3, 2});
    // row 0: 1+nan, 2+3; row 2: 4+inf-inf, 5+1+2
    std::vector<double> a = self.scatter_add(0, idx, src).to_vector<double>();
    BOOST_TEST(std::isnan(a[0]));
    BOOST_TEST(a[1] == 5.0);
    BOOST_TEST((std::signbit(a[2]) && a[2] == 0.0 && a[3] == 3.0));  // untouched, -0.0 kept
    BOOST_TEST(std::isnan(a[4]));
    BOOST_TEST(a[5] == 8.0);
    // row 0 <- src row 2; row 2 <- src row 1 (the last of rows 0 and 1)
    std::vector<double> r = self.scatter(0, idx, src).to_vector<double>();
    BOOST_TEST((std::isnan(r[0]) && r[1] == 3.0 && r[4] == -inf && r[5] == 2.0));
  });
}
