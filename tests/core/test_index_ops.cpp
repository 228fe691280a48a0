// index_select, index_put (with and without accumulate) and take_along_axis, against naive loops
// written here from the PyTorch / NumPy definitions, and their index errors.
#include "common.hpp"
#include "expect_error.hpp"

#include <limits>

#include "ravel/schedule.hpp"

using namespace rtest;

namespace {

// Values in [lo, hi) from a small LCG, repeats likely.
NDArray int_values(const Shape& s, int64_t lo, int64_t hi, uint64_t seed) {
  NDArray a(s, DType::I64);
  uint64_t st = seed * 2862933555777941757ull + 3037000493ull;
  for (double& v : a.v) {
    st = st * 2862933555777941757ull + 3037000493ull;
    v = static_cast<double>(lo + static_cast<int64_t>((st >> 33) % static_cast<uint64_t>(hi - lo)));
  }
  return a;
}

int64_t wrap(double i, int64_t n) { return i < 0 ? static_cast<int64_t>(i) + n : static_cast<int64_t>(i); }

}  // namespace

BOOST_AUTO_TEST_CASE(index_select_like_torch) {
  uint64_t seed = 10;
  for (DType dt : {DType::Bool, DType::I32, DType::F32, DType::F64})
    for (ViewKind k : kAllKinds)
      for (int64_t axis : {0, 1, 2, -1})
        guarded(std::string("index_select dtype=") + ravel::dtype_name(dt) + " view=" + kind_name(k) + " axis=" +
                    std::to_string(axis),
                [&] {
                  const int64_t ax = axis < 0 ? axis + 3 : axis;
                  Built x = build(k, {2, 3, 4}, dt, Domain::Any, ++seed);
                  NDArray idx = int_values({5}, 0, x.r.shape[ax], ++seed);  // more entries than the axis: repeats
                  Shape os = x.r.shape;
                  os[ax] = 5;
                  NDArray want(os, dt);
                  ref::for_each_index(os, [&](const ref::Index& i) {
                    ref::Index j(i);
                    j[ax] = static_cast<int64_t>(idx.v[i[ax]]);
                    want[i] = x.r[j];
                  });
                  check_tensor(x.t.index_select(axis, to_tensor(idx)), want);
                });
}

BOOST_AUTO_TEST_CASE(take_along_axis_like_numpy) {
  // numpy.take_along_axis(a, i, axis): out[.., j, ..] = a[.., i[.., j, ..], ..], negative
  // indices counting from the end, the other axes broadcast.
  uint64_t seed = 200;
  for (DType dt : {DType::I64, DType::F32})
    for (ViewKind k : kAllKinds)
      for (int64_t axis : {0, 1, -1})
        guarded(std::string("take_along_axis dtype=") + ravel::dtype_name(dt) + " view=" + kind_name(k) + " axis=" +
                    std::to_string(axis),
                [&] {
                  const int64_t ax = axis < 0 ? axis + 2 : axis;
                  Built x = build(k, {3, 4}, dt, Domain::Any, ++seed);
                  const int64_t n = x.r.shape[ax];
                  Shape is = {3, 4};
                  is[ax] = 6;
                  NDArray idx = int_values(is, -n, n, ++seed);
                  NDArray want(is, dt);
                  ref::for_each_index(is, [&](const ref::Index& i) {
                    ref::Index j(i);
                    j[ax] = wrap(idx[i], n);
                    want[i] = x.r[j];
                  });
                  check_tensor(x.t.take_along_axis(to_tensor(idx), axis), want);
                });
  guarded("broadcast of the other axis, both ways", [&] {
    Built x = build(ViewKind::Contiguous, {1, 5}, DType::F64, Domain::Any, 7);
    NDArray idx = int_values({3, 2}, -5, 5, 8);
    NDArray want({3, 2}, DType::F64);
    ref::for_each_index(want.shape, [&](const ref::Index& i) { want[i] = x.r[{0, wrap(idx[i], 5)}]; });
    check_tensor(x.t.take_along_axis(to_tensor(idx), 1), want);
    Built y = build(ViewKind::Contiguous, {3, 5}, DType::F64, Domain::Any, 9);
    NDArray idx1 = int_values({1, 4}, -5, 5, 10);
    NDArray want1({3, 4}, DType::F64);
    ref::for_each_index(want1.shape, [&](const ref::Index& i) { want1[i] = y.r[{i[0], wrap(idx1[{0, i[1]}], 5)}]; });
    check_tensor(y.t.take_along_axis(to_tensor(idx1), -1), want1);
  });
  guarded("no axis: flattened", [&] {
    Built x = build(ViewKind::Permuted, {3, 4}, DType::F32, Domain::Any, 11);
    NDArray idx = int_values({7}, -12, 12, 12);
    NDArray want({7}, DType::F32);
    for (int64_t j = 0; j < 7; ++j) want.v[j] = x.r.v[wrap(idx.v[j], 12)];
    check_tensor(x.t.take_along_axis(to_tensor(idx), std::nullopt), want);
  });
}

BOOST_AUTO_TEST_CASE(index_put_like_torch) {
  // torch.Tensor.index_put(indices, values, accumulate): x[i0, i1] = v (or +=), the index
  // tensors broadcast together, negative indices from the end; without accumulate a repeated
  // position takes the last value in row-major order (Ravel's documented choice).
  uint64_t seed = 300;
  for (DType dt : {DType::I32, DType::F32, DType::F64})
    for (ViewKind k : {ViewKind::Contiguous, ViewKind::Permuted, ViewKind::Padded, ViewKind::ReshapedPermuted})
      for (size_t nidx : {size_t{1}, size_t{2}, size_t{3}})
        for (bool acc : {false, true})
          guarded(std::string("index_put dtype=") + ravel::dtype_name(dt) + " view=" + kind_name(k) + " k=" +
                      std::to_string(nidx) + " accumulate=" + (acc ? "1" : "0"),
                  [&] {
                    const Shape s = {3, 4, 2};
                    Built x = build(k, s, dt, Domain::Any, ++seed);
                    // Index tensors of shapes [4, 1], [1, 3], [4, 3]: they broadcast to B = [4, 3].
                    const std::vector<Shape> ishapes = {{4, 1}, {1, 3}, {4, 3}};
                    std::vector<NDArray> idx;
                    std::vector<Tensor> it;
                    for (size_t t = 0; t < nidx; ++t) {
                      idx.push_back(int_values(ishapes[t], -s[t], s[t], ++seed));
                      it.push_back(to_tensor(idx.back()));
                    }
                    const Shape b = nidx == 1 ? Shape{4, 1} : Shape{4, 3};
                    Shape vs = b;
                    for (size_t a = nidx; a < s.size(); ++a) vs.push_back(s[a]);
                    Built v = build(ViewKind::Flipped, vs, dt, Domain::Any, ++seed);
                    NDArray want = x.r;
                    ref::for_each_index(vs, [&](const ref::Index& i) {  // row-major: later writes win
                      ref::Index o(s.size());
                      for (size_t t = 0; t < nidx; ++t) {
                        ref::Index bi(2);
                        for (size_t a = 0; a < 2; ++a) bi[a] = idx[t].shape[a] == 1 ? 0 : i[a];
                        o[t] = wrap(idx[t][bi], s[t]);
                      }
                      for (size_t a = nidx; a < s.size(); ++a) o[a] = i[b.size() + a - nidx];
                      want[o] = acc ? ref::convert(want[o] + v.r[i], dt) : v.r[i];
                    });
                    check_tensor(x.t.index_put(it, v.t, acc), want);
                  });
  guarded("values broadcast; torch.zeros(5).index_put_((tensor([0, 2, 0]),), tensor(1.), accumulate=True)", [&] {
    Tensor got = Tensor::zeros({5}).index_put({Tensor::from_vector<int64_t>({0, 2, 0}, {3})}, Tensor::scalar(1.0), true);
    BOOST_TEST(got.to_vector<float>() == (std::vector<float>{2, 0, 1, 0, 0}), boost::test_tools::per_element());
  });
}

BOOST_AUTO_TEST_CASE(index_errors_name_op_value_position_axis_and_size) {
  Tensor x = Tensor::zeros({3, 4});
  expect_error<ravel::IndexError>("index_select", [&] { x.index_select(1, Tensor::from_vector<int64_t>({0, 4}, {2})); },
                                  {"index_select: index 4 at position [1]", "axis 1", "(size 4)"});
  expect_error<ravel::IndexError>("index_select negative", [&] { x.index_select(0, Tensor::from_vector<int64_t>({-1}, {1})); },
                                  {"index_select: index -1 at position [0]", "(size 3)"});
  expect_error<ravel::IndexError>("take_along_axis", [&] {
    x.take_along_axis(Tensor::from_vector<int64_t>({0, -5, 1}, {1, 3}), 1);
  }, {"take_along_axis: index -5 at position [0, 1]", "axis 1", "(size 4)", "-4 <= index < 4"});
  expect_error<ravel::IndexError>("index_put", [&] {
    x.index_put({Tensor::from_vector<int64_t>({1, 2}, {2}), Tensor::from_vector<int64_t>({0, 9}, {2})}, Tensor::scalar(1.0));
  }, {"index_put: index 9 at position [1]", "axis 1", "(size 4)"});
  expect_error<ravel::IndexError>("index_put too many", [&] {
    x.index_put({Tensor::zeros({1}, DType::I64), Tensor::zeros({1}, DType::I64), Tensor::zeros({1}, DType::I64)},
                Tensor::scalar(1.0));
  }, {"index_put", "3 index tensors"});
  expect_error<ravel::ShapeError>("index_put values", [&] {
    x.index_put({Tensor::zeros({2}, DType::I64)}, Tensor::ones({2, 3}));
  }, {"index_put", "do not broadcast", "[2, 4]"});
  expect_error<ravel::DTypeError>("bool mask", [&] { x.index_put({Tensor::zeros({3}, DType::Bool)}, Tensor::scalar(1.0)); },
                                  {"index_put", "boolean masks"});
  expect_error<ravel::ShapeError>("index_select 2-D", [&] { x.index_select(0, Tensor::zeros({1, 1}, DType::I64)); },
                                  {"index_select", "1-D"});
  expect_error<ravel::ShapeError>("take_along_axis broadcast", [&] { x.take_along_axis(Tensor::zeros({2, 1}, DType::I64), 1); },
                                  {"take_along_axis", "do not broadcast", "axis 0"});
}

BOOST_AUTO_TEST_CASE(row_selections_are_exact_for_non_finite_values) {
  // Float index_select and index_put run as one GEMM (Note [One-hot selections as a GEMM]);
  // a plain hot @ x would turn 0 * inf into NaN in every row that shares a column with an inf.
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  auto same = [](const std::vector<double>& got, const std::vector<double>& want) {
    BOOST_REQUIRE_EQUAL(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k)
      BOOST_TEST((std::isnan(want[k]) ? std::isnan(got[k]) : got[k] == want[k] && std::signbit(got[k]) == std::signbit(want[k])),
                 "element " << k << ": got " << got[k] << ", want " << want[k]);
  };
  for (DType dt : {DType::F32, DType::F64})
    guarded(std::string("dtype=") + ravel::dtype_name(dt), [&] {
      Tensor x = Tensor::from_vector<double>({1, inf, -inf, 2, nan, 3, 4, 5}, {4, 2}).cast(dt);
      Tensor sel = x.index_select(0, Tensor::from_vector<int64_t>({3, 0, 3, 1}, {4}));
      same(sel.cast(DType::F64).to_vector<double>(), {4, 5, 1, inf, 4, 5, -inf, 2});
      Tensor self = Tensor::from_vector<double>({7, 8, -0.0, 9, 1, 1}, {3, 2}).cast(dt);
      Tensor idx = Tensor::from_vector<int64_t>({0, 0, -1}, {3});
      Tensor vals = Tensor::from_vector<double>({inf, 1, -inf, 2, nan, -0.5}, {3, 2}).cast(dt);
      Tensor acc = self.index_put({idx}, vals, true);
      acc.realize();
      // The GEMM path ran (the "none" and "elementwise" fusion policies form no contractions).
      if (ravel::fusion_options().policy >= ravel::FusionPolicy::Reduce)
        BOOST_TEST(ravel::last_realization_stats().contractions >= 1);
      same(acc.cast(DType::F64).to_vector<double>(), {nan, 11, -0.0, 9, nan, 0.5});
      same(self.index_put({idx}, vals, false).cast(DType::F64).to_vector<double>(), {-inf, 2, -0.0, 9, nan, -0.5});
    });
}
