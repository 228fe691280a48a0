// Gradient checks of scatter, scatter_add, scatter_reduce (every reduce, with and without self),
// index_select, index_put, take_along_axis, sort and topk, in f64 against central finite
// differences (gradcheck.hpp), and the two adjoint identities: the gradient of gather is a
// scatter-add of the cotangent and the gradient of scatter_add's src is a gather, each compared
// with a naive loop written here.
#include "gradcheck.hpp"

using namespace adtest;

namespace {

Tensor i64(const std::vector<int64_t>& v, const Shape& s) { return Tensor::from_vector<int64_t>(v, s); }

BOOST_AUTO_TEST_CASE(scatter_and_scatter_add) {
  // [3, 4] along axis 0 with index [2, 4]: column 1 receives twice at row 2 (repeats), row 1
  // of columns 0 and 3 receives nothing.
  Tensor idx0 = i64({0, 2, 1, 0, 2, 2, 0, 2}, {2, 4});
  Tensor idx1 = i64({3, 3, 1, 0, 2, 0}, {3, 2});  // along axis 1, index [3, 2]
  gradcheck2("scatter axis 0 (self, src)", [idx0](const Tensor& x, const Tensor& s) { return x.scatter(0, idx0, s); },
             normal({3, 4}, 1), normal({2, 5}, 2), 1);
  gradcheck2("scatter axis 1 (self, src)", [idx1](const Tensor& x, const Tensor& s) { return x.scatter(1, idx1, s).sin(); },
             normal({3, 4}, 3), normal({3, 3}, 4), 3);
  gradcheck1("scatter of a value", [idx0](const Tensor& x) { return x.scatter(0, idx0, 2.5).square(); }, normal({3, 4}, 5), 5);
  gradcheck2("scatter_add axis 0", [idx0](const Tensor& x, const Tensor& s) { return x.scatter_add(0, idx0, s); },
             normal({3, 4}, 6), normal({2, 4}, 7), 6);
  gradcheck2("scatter_add axis -1 of exp(src)", [idx1](const Tensor& x, const Tensor& s) {
    return x.scatter_add(-1, idx1, s.exp()).tanh();
  }, normal({3, 4}, 8), normal({3, 2}, 9), 8);
}

BOOST_AUTO_TEST_CASE(scatter_reduce_every_reduce) {
  Tensor idx = i64({0, 2, 1, 0, 2, 2, 0, 2, 1, 1, 0, 0}, {3, 4});  // into [4, 4] along axis 0; row 3 untouched
  for (const std::string reduce : {"sum", "prod", "mean", "amax", "amin"})
    for (bool include_self : {true, false}) {
      // Random normal values: no ties, so amax and amin are differentiable at the point.
      gradcheck2("scatter_reduce " + reduce + (include_self ? " include_self" : " without self"),
                 [idx, reduce, include_self](const Tensor& x, const Tensor& s) {
                   return x.scatter_reduce(0, idx, s, reduce, include_self);
                 },
                 normal({4, 4}, 20), normal({3, 4}, 21), 20);
    }
}

BOOST_AUTO_TEST_CASE(index_select_take_along_axis_index_put) {
  Tensor sel = i64({2, 0, 2, 1}, {4});
  gradcheck1("index_select axis 1 (repeats)", [sel](const Tensor& x) { return x.index_select(1, sel); }, normal({2, 3, 2}, 30), 30);
  gradcheck1("index_select axis 0", [sel](const Tensor& x) { return x.index_select(0, sel).exp(); }, normal({3, 2}, 31), 31);
  Tensor tk = i64({-1, 0, 2, -3, 1, 1}, {2, 3});
  gradcheck1("take_along_axis with negative indices", [tk](const Tensor& x) { return x.take_along_axis(tk, 1); },
             normal({2, 4}, 32), 32);
  gradcheck1("take_along_axis flattened", [](const Tensor& x) {
    return x.take_along_axis(Tensor::from_vector<int64_t>({5, -1, 0, 5}, {4}), std::nullopt);
  }, normal({2, 3}, 33), 33);
  const std::vector<Tensor> ij = {i64({0, 2, 0, -1}, {4}), i64({1, 1, 1, 0}, {4})};  // (0, 1) three times
  for (bool acc : {false, true})
    gradcheck2(std::string("index_put (self, values)") + (acc ? " accumulate" : ""),
               [ij, acc](const Tensor& x, const Tensor& v) { return x.index_put(ij, v, acc); }, normal({3, 2, 2}, 34),
               normal({4, 2}, 35), 34);
}

BOOST_AUTO_TEST_CASE(sort_and_topk_values) {
  for (bool desc : {false, true}) {
    gradcheck1(std::string("sort values along the last axis") + (desc ? " descending" : ""),
               [desc](const Tensor& x) { return x.sort(-1, desc).first; }, normal({3, 7}, 40), 40);
    gradcheck1(std::string("sort values along axis 0, squared") + (desc ? " descending" : ""),
               [desc](const Tensor& x) { return x.sort(0, desc).first.square(); }, normal({5, 2}, 41), 41);
  }
  gradcheck1("topk 3 largest", [](const Tensor& x) { return x.topk(3).first; }, normal({2, 6}, 42), 42);
  gradcheck1("topk 2 smallest along axis 0", [](const Tensor& x) { return x.topk(2, 0, false).first.exp(); },
             normal({5, 3}, 43), 43);
}

BOOST_AUTO_TEST_CASE(gather_and_scatter_add_are_adjoint) {
  // d/dx <u, gather(x, 1, idx)> = scatter_add(zeros, 1, idx, u), and d/ds <u, scatter_add(x, 1, idx, s)>
  // = gather(u, 1, idx), each written as a loop here.
  const Shape xs = {3, 4}, is = {3, 5};
  const std::vector<int64_t> iv = {3, 3, 0, 1, 3, 2, 2, 2, 0, 1, 1, 0, 3, 0, 0};
  Tensor idx = i64(iv, is), x = normal(xs, 50), s = normal(is, 51);
  const std::vector<double> u = normal_values(is, 52);
  std::vector<double> want_dx(12, 0.0);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t j = 0; j < 5; ++j) want_dx[r * 4 + iv[r * 5 + j]] += u[r * 5 + j];
  check_values("gradient of gather", ravel::gradients(x.gather(1, idx), {x}, host(u, is))[0], xs, want_dx, 1e-12, 1e-12);
  const std::vector<double> w = normal_values(xs, 53);
  std::vector<double> want_ds(15);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t j = 0; j < 5; ++j) want_ds[r * 5 + j] = w[r * 4 + iv[r * 5 + j]];
  check_values("gradient of scatter_add's src", ravel::gradients(x.scatter_add(1, idx, s), {s}, host(w, xs))[0], is, want_ds,
               1e-12, 1e-12);
}

BOOST_AUTO_TEST_CASE(second_order_through_scatter_and_sort) {
  // The derivatives are themselves composites, so they differentiate again: check the gradient
  // of x -> d/dx sum(sort(x)^3 * c) and of x -> d/dx sum(scatter_add(x, idx, x^2)^2).
  Tensor c = Tensor::from_vector<double>({0.5, -1.0, 2.0, 0.25, 1.5}, {5});
  gradcheck1("grad of sort", [c](const Tensor& x) {
    Tensor y = (x.sort().first.pow(3.0) * c).sum();
    return ravel::gradients(y, {x})[0];
  }, normal({5}, 60), 60);
  Tensor idx = i64({1, 1, 0, 3, 1}, {5});
  gradcheck1("grad of scatter_add", [idx](const Tensor& x) {
    Tensor y = x.scatter_add(0, idx, x.square()).square().sum();
    return ravel::gradients(y, {x})[0];
  }, normal({5}, 61), 61);
}

}  // namespace

namespace {
BOOST_AUTO_TEST_CASE(scatter_of_whole_rows) {
  // A broadcast index: the GEMM path and its custom derivative (Note [One-hot selections as a GEMM]).
  Tensor rows = i64({2, 0, 2, 3, 2}, {5, 1});
  gradcheck2("scatter_add of rows", [rows](const Tensor& x, const Tensor& s) {
    return x.scatter_add(0, rows.expand({5, 3}), s).square();
  }, normal({4, 3}, 70), normal({5, 3}, 71), 70);
  for (const std::string reduce : {"sum", "mean"})
    for (bool include_self : {true, false})
      gradcheck2("scatter_reduce " + reduce + " of rows" + (include_self ? " include_self" : ""),
                 [rows, reduce, include_self](const Tensor& x, const Tensor& s) {
                   return x.scatter_reduce(0, rows.expand({5, 3}), s, reduce, include_self);
                 },
                 normal({4, 3}, 72), normal({5, 3}, 73), 72);
  gradcheck2("scatter of columns", [](const Tensor& x, const Tensor& s) {
    return x.scatter(1, i64({1, 1, 0}, {1, 3}).expand({4, 3}), s).sin();
  }, normal({4, 2}, 74), normal({4, 3}, 75), 74);
  gradcheck1("second order through the GEMM path", [rows](const Tensor& x) {
    Tensor y = x.scatter_add(0, rows.expand({5, 3}), x.exp().shrink({{0, 4}, {0, 3}}).pad({{0, 1}, {0, 0}})).square().sum();
    return ravel::gradients(y, {x})[0];
  }, normal({4, 3}, 76), 76);
}
}  // namespace
