// one_hot, gather, concatenate and stack, on contiguous and view inputs, against the reference.
#include "common.hpp"

using namespace rtest;

namespace {

// A tensor of indices in [0, n) with the given shape, built through view kind k: the values come
// from Domain::NonNeg (0..20 / 0..9) reduced modulo n on both sides.
Built index_tensor(ViewKind k, const Shape& s, DType dt, int64_t n, uint64_t seed) {
  Built b = build(k, s, dt, Domain::NonNeg, seed);
  for (double& v : b.r.v) v = std::fmod(v, double(n));
  Tensor m = b.t.mod(Tensor::full({}, double(n), dt));
  return {m, b.r};
}

}  // namespace

BOOST_AUTO_TEST_CASE(one_hot_every_int_dtype_and_view) {
  uint64_t seed = 1;
  for (DType dt : kInts)
    for (ViewKind k : kAllKinds)
      guarded(std::string("one_hot dtype=") + ravel::dtype_name(dt) + " view=" + kind_name(k), [&] {
        const int64_t classes = 5;
        Built idx = index_tensor(k, {3, 4}, dt, classes, ++seed);
        NDArray want({3, 4, classes}, DType::F32);
        ref::for_each_index(want.shape, [&](const ref::Index& i) {
          want[i] = idx.r[{i[0], i[1]}] == double(i[2]) ? 1.0 : 0.0;
        });
        check_tensor(idx.t.one_hot(classes), want);
      });
  // torch.nn.functional.one_hot(torch.tensor([0, 2, 1]), 3) -> [[1,0,0],[0,0,1],[0,1,0]]
  auto oh = Tensor::from_vector<int64_t>({0, 2, 1}, {3}).one_hot(3);
  BOOST_TEST(oh.shape() == (Shape{3, 3}));
  BOOST_TEST(oh.to_vector<float>() == (std::vector<float>{1, 0, 0, 0, 0, 1, 0, 1, 0}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(gather_like_torch) {
  // torch.gather: out[i][j] = x[index[i][j]][j] (axis 0), x[i][index[i][j]] (axis 1); out has
  // index's shape, which may be smaller than x's on the other axes.
  uint64_t seed = 20;
  for (DType dt : {DType::I32, DType::F32, DType::F64, DType::Bool})
    for (ViewKind k : kAllKinds)
      for (int64_t axis : {0, 1, -1})
        guarded(std::string("gather dtype=") + ravel::dtype_name(dt) + " view=" + kind_name(k) +
                    " axis=" + std::to_string(axis),
                [&] {
                  Built x = build(k, {3, 4}, dt, Domain::Any, ++seed);
                  int64_t ax = axis < 0 ? axis + 2 : axis;
                  Shape is = ax == 0 ? Shape{2, 4} : Shape{3, 2};
                  ViewKind ik = kAllKinds[(seed + 1) % kAllKinds.size()];
                  Built idx = index_tensor(ik, is, DType::I64, x.r.shape[ax], ++seed);
                  NDArray want(is, dt);
                  ref::for_each_index(is, [&](const ref::Index& i) {
                    ref::Index j(i);
                    j[ax] = static_cast<int64_t>(idx.r[i]);
                    want[i] = x.r[j];
                  });
                  check_tensor(x.t.gather(axis, idx.t), want);
                });
  // torch.gather(torch.tensor([[1, 2], [3, 4]]), 1, torch.tensor([[0, 0], [1, 0]])) -> [[1, 1], [4, 3]]
  auto g = Tensor::from_vector<int64_t>({1, 2, 3, 4}, {2, 2}).gather(1, Tensor::from_vector<int64_t>({0, 0, 1, 0}, {2, 2}));
  BOOST_TEST(g.to_vector<int64_t>() == (std::vector<int64_t>{1, 1, 4, 3}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(concatenate_and_stack) {
  uint64_t seed = 60;
  const size_t nk = kAllKinds.size();
  for (DType dt : kAllDTypes)
    for (size_t k = 0; k < nk; ++k) {
      std::string ctx = std::string("dtype=") + ravel::dtype_name(dt) + " views=" + kind_name(kAllKinds[k]) + "," +
                        kind_name(kAllKinds[(k + 1) % nk]) + "," + kind_name(kAllKinds[(k + 4) % nk]);
      guarded("concatenate axis 0 " + ctx, [&] {
        Built a = build(kAllKinds[k], {2, 3}, dt, Domain::Any, ++seed);
        Built b = build(kAllKinds[(k + 1) % nk], {4, 3}, dt, Domain::Any, ++seed);
        Built c = build(kAllKinds[(k + 4) % nk], {1, 3}, dt, Domain::Any, ++seed);
        NDArray want({7, 3}, dt);  // np.concatenate([a, b, c], axis=0)
        ref::for_each_index(want.shape, [&](const ref::Index& i) {
          want[i] = i[0] < 2 ? a.r[i] : i[0] < 6 ? b.r[{i[0] - 2, i[1]}] : c.r[{i[0] - 6, i[1]}];
        });
        check_tensor(Tensor::concatenate({a.t, b.t, c.t}, 0), want);
      });
      guarded("concatenate axis -1 " + ctx, [&] {
        Built a = build(kAllKinds[k], {3, 2}, dt, Domain::Any, ++seed);
        Built b = build(kAllKinds[(k + 1) % nk], {3, 4}, dt, Domain::Any, ++seed);
        NDArray want({3, 6}, dt);
        ref::for_each_index(want.shape, [&](const ref::Index& i) {
          want[i] = i[1] < 2 ? a.r[i] : b.r[{i[0], i[1] - 2}];
        });
        check_tensor(Tensor::concatenate({a.t, b.t}, -1), want);
      });
      for (int64_t axis : {0, 1, 2, -1})
        guarded("stack axis " + std::to_string(axis) + " " + ctx, [&] {
          std::vector<Built> parts;
          for (size_t p = 0; p < 3; ++p) parts.push_back(build(kAllKinds[(k + p * 3) % nk], {2, 3}, dt, Domain::Any, ++seed));
          int64_t ax = axis < 0 ? axis + 3 : axis;
          Shape s = {2, 3};
          s.insert(s.begin() + ax, 3);
          NDArray want(s, dt);  // np.stack(parts, axis): out[..., p, ...] = parts[p][...]
          ref::for_each_index(s, [&](const ref::Index& i) {
            ref::Index j(i);
            j.erase(j.begin() + ax);
            want[i] = parts[i[ax]].r[j];
          });
          check_tensor(Tensor::stack({parts[0].t, parts[1].t, parts[2].t}, axis), want);
        });
    }
  // np.stack([np.arange(2), np.arange(2) + 10], axis=1) -> [[ 0 10] [ 1 11]]
  auto s = Tensor::stack({Tensor::arange(2), Tensor::arange(2) + 10.0}, 1);
  BOOST_TEST(s.shape() == (Shape{2, 2}));
  BOOST_TEST(s.to_vector<int64_t>() == (std::vector<int64_t>{0, 10, 1, 11}), boost::test_tools::per_element());
}
