// Movement ops: the values (against NumPy expressions recorded in comments and the reference's
// index mappings) and the views' descriptors: strides(), offset(), is_contiguous() show that
// permute/expand/flip/slice/shrink/contiguous reshape compose a view instead of copying.
#include "common.hpp"

using namespace rtest;
using V = std::vector<int64_t>;

namespace {
Tensor ar(int64_t n) { return Tensor::arange(n); }  // i64 0..n-1
NDArray ref_ar(const Shape& s) {
  NDArray r(s, DType::I64);
  for (size_t k = 0; k < r.v.size(); ++k) r.v[k] = double(k);
  return r;
}
}  // namespace

BOOST_AUTO_TEST_CASE(contiguous_descriptor) {
  auto x = ar(24).reshape({2, 3, 4});
  BOOST_TEST((x.dtype() == DType::I64));
  BOOST_TEST(x.strides() == (V{12, 4, 1}));
  BOOST_TEST(x.offset() == 0);
  BOOST_TEST(x.is_contiguous());
  BOOST_TEST(x.ndim() == 3);
  BOOST_TEST(x.numel() == 24);
  BOOST_TEST(x.size(-1) == 4);
  BOOST_TEST(x.size(0) == 2);
}

BOOST_AUTO_TEST_CASE(permute_and_transpose_are_views) {
  auto x = ar(24).reshape({2, 3, 4});
  auto p = x.permute({2, 0, 1});  // np.transpose(x, (2, 0, 1)).strides / 8 == (1, 12, 4)
  BOOST_TEST(p.shape() == (V{4, 2, 3}));
  BOOST_TEST(p.strides() == (V{1, 12, 4}));
  BOOST_TEST(p.offset() == 0);
  BOOST_TEST(!p.is_contiguous());
  check_tensor(p, ref::permute(ref_ar({2, 3, 4}), {2, 0, 1}));
  auto t = x.transpose();  // swaps the last two axes: np.swapaxes(x, -2, -1)
  BOOST_TEST(t.shape() == (V{2, 4, 3}));
  BOOST_TEST(t.strides() == (V{12, 1, 4}));
  check_tensor(t, ref::permute(ref_ar({2, 3, 4}), {0, 2, 1}));
  BOOST_TEST(x.transpose(0, 2).shape() == (V{4, 3, 2}));
  BOOST_TEST(x.permute({-1, 0, 1}).shape() == (V{4, 2, 3}));  // negative axes count from the end
}

BOOST_AUTO_TEST_CASE(expand_has_stride_zero) {
  auto x = ar(3).reshape({3, 1}).expand({2, 3, 4});  // np.broadcast_to(np.arange(3)[:, None], (2, 3, 4))
  BOOST_TEST(x.shape() == (V{2, 3, 4}));
  BOOST_TEST(x.strides() == (V{0, 1, 0}));
  BOOST_TEST(x.offset() == 0);
  BOOST_TEST(!x.is_contiguous());
  check_tensor(x, ref::expand(ref_ar({3, 1}), {2, 3, 4}));
}

BOOST_AUTO_TEST_CASE(flip_has_negative_strides) {
  auto a = ar(12).reshape({3, 4});
  auto f0 = a.flip(0);  // np.flip(a, 0): [[8..11], [4..7], [0..3]]
  BOOST_TEST(f0.strides() == (V{-4, 1}));
  BOOST_TEST(f0.offset() == 8);
  BOOST_TEST(f0.to_vector<int64_t>() == (V{8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3}), boost::test_tools::per_element());
  auto fa = a.flip();  // np.flip(a): every axis
  BOOST_TEST(fa.strides() == (V{-4, -1}));
  BOOST_TEST(fa.offset() == 11);
  BOOST_TEST(fa.to_vector<int64_t>()[0] == 11);
  BOOST_TEST(!fa.is_contiguous());
  check_tensor(a.flip(-1), ref::flip(ref_ar({3, 4}), {-1}));
  check_tensor(a.flip(0).flip(0), ref_ar({3, 4}));  // flipping twice is the identity
}

BOOST_AUTO_TEST_CASE(slice_with_steps_is_a_view) {
  auto s = ar(10).slice(0, 1, 8, 3);  // np.arange(10)[1:8:3] -> [1 4 7]
  BOOST_TEST(s.to_vector<int64_t>() == (V{1, 4, 7}), boost::test_tools::per_element());
  BOOST_TEST(s.strides() == (V{3}));
  BOOST_TEST(s.offset() == 1);
  auto r = ar(10).slice(0, std::nullopt, std::nullopt, -3);  // np.arange(10)[::-3] -> [9 6 3 0]
  BOOST_TEST(r.to_vector<int64_t>() == (V{9, 6, 3, 0}), boost::test_tools::per_element());
  BOOST_TEST(r.strides() == (V{-3}));
  BOOST_TEST(r.offset() == 9);
  auto m = ar(20).reshape({4, 5}).slice({ravel::Slice{std::nullopt, std::nullopt, 2}, ravel::Slice{std::nullopt, std::nullopt, -2}});
  // np.arange(20).reshape(4, 5)[::2, ::-2] -> [[ 4  2  0] [14 12 10]]
  BOOST_TEST(m.shape() == (V{2, 3}));
  BOOST_TEST(m.to_vector<int64_t>() == (V{4, 2, 0, 14, 12, 10}), boost::test_tools::per_element());
  BOOST_TEST(m.strides() == (V{10, -2}));
  BOOST_TEST(m.offset() == 4);
}

BOOST_AUTO_TEST_CASE(slice_python_defaults_and_negative_indices) {
  struct Row {
    std::optional<int64_t> start, stop;
    int64_t step;
    V want;
    const char* python;
  };
  const std::optional<int64_t> none;
  const std::vector<Row> rows = {
      {-2, 2, -3, {8, 5}, "np.arange(10)[-2:2:-3] -> [8 5]"},
      {-100, 100, 1, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, "np.arange(10)[-100:100] -> all ten"},
      {5, -100, -1, {5, 4, 3, 2, 1, 0}, "np.arange(10)[5:-100:-1] -> [5 4 3 2 1 0]"},
      {2, 8, -1, {}, "np.arange(10)[2:8:-1] -> []"},
      {8, 2, 1, {}, "np.arange(10)[8:2] -> []"},
      {-3, none, 1, {7, 8, 9}, "np.arange(10)[-3:] -> [7 8 9]"},
      {none, -7, -2, {9, 7, 5}, "np.arange(10)[:-7:-2] -> [9 7 5]"},
      {none, none, -1, {9, 8, 7, 6, 5, 4, 3, 2, 1, 0}, "np.arange(10)[::-1]"},
      {none, 3, 1, {0, 1, 2}, "np.arange(10)[:3] -> [0 1 2]"},
      {3, none, -1, {3, 2, 1, 0}, "np.arange(10)[3::-1] -> [3 2 1 0]"},
      {20, none, -4, {9, 5, 1}, "np.arange(10)[20::-4] -> [9 5 1]"},
      {none, none, 4, {0, 4, 8}, "np.arange(10)[::4] -> [0 4 8]"},
  };
  for (const Row& r : rows)
    BOOST_TEST_CONTEXT(r.python) {
      // The reference's own Python slice rule agrees with the recorded NumPy value...
      BOOST_TEST(ref::py_slice(10, r.start, r.stop, r.step) == r.want);
      try {  // ...and so does Ravel, through both overloads.
        auto a = ar(10).slice(0, r.start, r.stop, r.step);
        BOOST_TEST(a.shape() == (V{int64_t(r.want.size())}));
        BOOST_TEST(a.to_vector<int64_t>() == r.want, boost::test_tools::per_element());
        auto b = ar(10).slice({ravel::Slice{r.start, r.stop, r.step}});
        BOOST_TEST(b.to_vector<int64_t>() == r.want, boost::test_tools::per_element());
      } catch (const std::exception& e) {
        BOOST_ERROR("threw " << e.what());
      }
    }
  // A negative axis: np.arange(12).reshape(3, 4)[:, 1::2] -> [[1 3] [5 7] [9 11]]
  BOOST_TEST(ar(12).reshape({3, 4}).slice(-1, 1, std::nullopt, 2).to_vector<int64_t>() == (V{1, 3, 5, 7, 9, 11}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(shrink_and_pad) {
  auto a = ar(12).reshape({3, 4});
  auto s = a.shrink({{1, 3}, {0, 2}});  // a[1:3, 0:2] -> [[4 5] [8 9]]
  BOOST_TEST(s.to_vector<int64_t>() == (V{4, 5, 8, 9}), boost::test_tools::per_element());
  BOOST_TEST(s.strides() == (V{4, 1}));
  BOOST_TEST(s.offset() == 4);
  BOOST_TEST(!s.is_contiguous());
  auto p = ar(3).pad({{1, 2}});  // np.pad(np.arange(3), (1, 2)) -> [0 0 1 2 0 0]
  BOOST_TEST(p.to_vector<int64_t>() == (V{0, 0, 1, 2, 0, 0}), boost::test_tools::per_element());
  BOOST_TEST(!p.is_contiguous());  // padding is never contiguous
  check_tensor(a.pad({{0, 1}, {2, 0}}), ref::pad(ref_ar({3, 4}), {{0, 1}, {2, 0}}));
  // Shrinking the padding away again gives the original values.
  check_tensor(a.pad({{1, 1}, {1, 1}}).shrink({{1, 4}, {1, 5}}), ref_ar({3, 4}));
}

BOOST_AUTO_TEST_CASE(reshape_views_and_copies) {
  auto x = ar(24).reshape({2, 3, 4});
  auto r = x.reshape({6, 4});  // contiguous -> stays a view
  BOOST_TEST(r.strides() == (V{4, 1}));
  BOOST_TEST(r.offset() == 0);
  BOOST_TEST(r.is_contiguous());
  BOOST_TEST(x.reshape({4, -1}).shape() == (V{4, 6}));  // np.reshape(x, (4, -1)).shape == (4, 6)
  BOOST_TEST(x.reshape({-1}).shape() == (V{24}));
  // np.arange(24).reshape(4, 6)[1:3].reshape(12) is a view (np.shares_memory -> True): offset 6.
  auto rows = ar(24).reshape({4, 6}).slice(0, 1, 3);
  BOOST_TEST(rows.offset() == 6);
  auto flat = rows.reshape({12});
  BOOST_TEST(flat.strides() == (V{1}));
  BOOST_TEST(flat.offset() == 6);
  BOOST_TEST(flat.to_vector<int64_t>()[0] == 6);
  // np.arange(6).reshape(2, 3).T.reshape(2, 3) -> [[0 3 1] [4 2 5]]: no strides fit, so a copy
  // (Tensorken: "reshape first copies the original tensor to a contiguous tensor").
  auto c = ar(6).reshape({2, 3}).transpose().reshape({2, 3});
  BOOST_TEST(c.to_vector<int64_t>() == (V{0, 3, 1, 4, 2, 5}), boost::test_tools::per_element());
  BOOST_TEST(c.is_contiguous());
  BOOST_TEST(c.strides() == (V{3, 1}));
  // .T.reshape(3, 2) keeps the shape, so NumPy (and Ravel) return the transposed view itself.
  auto same = ar(6).reshape({2, 3}).transpose().reshape({3, 2});
  BOOST_TEST(same.strides() == (V{1, 3}));
  auto c2 = ar(6).reshape({2, 3}).transpose().reshape({6});  // .T.reshape(6) -> [0 3 1 4 2 5]
  BOOST_TEST(c2.to_vector<int64_t>() == (V{0, 3, 1, 4, 2, 5}), boost::test_tools::per_element());
  auto cc = ar(6).reshape({2, 3}).transpose().contiguous();
  BOOST_TEST(cc.is_contiguous());
  BOOST_TEST(cc.strides() == (V{2, 1}));
  BOOST_TEST(cc.to_vector<int64_t>() == (V{0, 3, 1, 4, 2, 5}), boost::test_tools::per_element());
  BOOST_TEST(x.contiguous().strides() == (V{12, 4, 1}));
}

BOOST_AUTO_TEST_CASE(at_select_squeeze_unsqueeze_flatten) {
  auto x = ar(24).reshape({2, 3, 4});
  auto a1 = x.at(1);  // x[1]: shape (3, 4), starts at element 12
  BOOST_TEST(a1.shape() == (V{3, 4}));
  BOOST_TEST(a1.offset() == 12);
  BOOST_TEST(a1.strides() == (V{4, 1}));
  BOOST_TEST(x.at(-1).to_vector<int64_t>() == a1.to_vector<int64_t>(), boost::test_tools::per_element());  // x[-1]
  auto s = x.select(1, 2);  // x[:, 2, :] -> [[ 8  9 10 11] [20 21 22 23]]
  BOOST_TEST(s.shape() == (V{2, 4}));
  BOOST_TEST(s.offset() == 8);
  BOOST_TEST(s.strides() == (V{12, 1}));
  BOOST_TEST(s.to_vector<int64_t>() == (V{8, 9, 10, 11, 20, 21, 22, 23}), boost::test_tools::per_element());
  auto s2 = x.select(-1, 3);  // x[..., 3] -> [[ 3  7 11] [15 19 23]]
  BOOST_TEST(s2.to_vector<int64_t>() == (V{3, 7, 11, 15, 19, 23}), boost::test_tools::per_element());
  BOOST_TEST(s2.strides() == (V{12, 4}));
  BOOST_TEST(x.at(0).at(2).at(3).item<int64_t>() == 11);  // x[0][2][3]

  auto y = ar(6).reshape({1, 3, 1, 2});
  BOOST_TEST(y.squeeze().shape() == (V{3, 2}));          // np.squeeze(y).shape
  BOOST_TEST(y.squeeze().strides() == (V{2, 1}));
  BOOST_TEST(y.squeeze(0).shape() == (V{3, 1, 2}));      // np.squeeze(y, 0)
  BOOST_TEST(y.squeeze({0, 2}).shape() == (V{3, 2}));
  BOOST_TEST(y.squeeze(-2).shape() == (V{1, 3, 2}));
  BOOST_TEST(y.squeeze().to_vector<int64_t>() == (V{0, 1, 2, 3, 4, 5}), boost::test_tools::per_element());

  auto z = ar(6).reshape({3, 2});
  BOOST_TEST(z.unsqueeze(0).shape() == (V{1, 3, 2}));   // np.expand_dims(z, 0)
  BOOST_TEST(z.unsqueeze(1).shape() == (V{3, 1, 2}));
  BOOST_TEST(z.unsqueeze(-1).shape() == (V{3, 2, 1}));  // np.expand_dims(z, -1)
  BOOST_TEST(z.unsqueeze(2).shape() == (V{3, 2, 1}));
  BOOST_TEST(z.unsqueeze(-1).to_vector<int64_t>() == (V{0, 1, 2, 3, 4, 5}), boost::test_tools::per_element());

  BOOST_TEST(x.flatten().shape() == (V{24}));
  BOOST_TEST(x.flatten().strides() == (V{1}));
  BOOST_TEST(x.flatten(1).shape() == (V{2, 12}));      // torch.flatten(x, 1)
  BOOST_TEST(x.flatten(0, 1).shape() == (V{6, 4}));
  BOOST_TEST(x.flatten(-2, -1).shape() == (V{2, 12}));
  // Flattening a permuted tensor copies, in the permuted order.
  check_tensor(x.permute({2, 1, 0}).flatten(), ref::reshape(ref::permute(ref_ar({2, 3, 4}), {2, 1, 0}), {24}));
}

BOOST_AUTO_TEST_CASE(random_chains_of_movement_ops) {
  // 300 random chains of 1-6 movement ops, applied to Ravel and to the reference side by side.
  ref::Gen g(2024);
  for (int trial = 0; trial < 300; ++trial) {
    NDArray r = ref_ar({2, 3, 4});
    Tensor t = ar(24).reshape({2, 3, 4});
    std::ostringstream chain;
    chain << "trial " << trial << ": arange(24).reshape(2,3,4)";
    int n_ops = 1 + int(g.next() % 6);
    try {
    for (int o = 0; o < n_ops && ref::numel(r.shape) > 0; ++o) {
      int64_t nd = r.ndim();
      switch (g.next() % 7) {
        case 0: {  // permute: rotate axes by a random amount
          std::vector<int64_t> order(nd);
          int64_t rot = int64_t(g.next() % nd);
          for (int64_t k = 0; k < nd; ++k) order[k] = (k + rot) % nd;
          chain << ".permute(rot " << rot << ")";
          t = t.permute(order), r = ref::permute(r, order);
          break;
        }
        case 1: {
          int64_t ax = int64_t(g.next() % nd);
          chain << ".flip(" << ax << ")";
          t = t.flip(ax), r = ref::flip(r, {ax});
          break;
        }
        case 2: {  // a slice with a random step in {-3..-1, 1..3} and random (maybe missing) bounds
          int64_t ax = int64_t(g.next() % nd), n = r.shape[ax];
          int64_t step = int64_t(g.next() % 3) + 1;
          if (g.next() % 2) step = -step;
          std::optional<int64_t> b, e;
          if (g.next() % 2) b = int64_t(g.next() % (2 * n + 1)) - n;
          if (g.next() % 2) e = int64_t(g.next() % (2 * n + 1)) - n;
          chain << ".slice(" << ax << ", " << (b ? std::to_string(*b) : "None") << ", "
                << (e ? std::to_string(*e) : "None") << ", " << step << ")";
          t = t.slice(ax, b, e, step), r = ref::slice(r, ax, b, e, step);
          break;
        }
        case 3: {  // pad one axis
          int64_t ax = int64_t(g.next() % nd);
          std::vector<std::pair<int64_t, int64_t>> w(nd, {0, 0});
          w[ax] = {int64_t(g.next() % 2), int64_t(g.next() % 3)};
          chain << ".pad(axis " << ax << ": " << w[ax].first << "," << w[ax].second << ")";
          t = t.pad(w), r = ref::pad(r, w);
          break;
        }
        case 4: {  // reshape: merge the first two axes, or split a leading even axis
          Shape s = r.shape;
          if (nd >= 2 && g.next() % 2) {
            s[1] *= s[0];
            s.erase(s.begin());
          } else if (s[0] % 2 == 0 && nd < 5) {
            s[0] /= 2;
            s.insert(s.begin(), 2);
          } else {
            s = {ref::numel(s)};
          }
          chain << ".reshape(" << shape_text(s) << ")";
          t = t.reshape(s), r = ref::reshape(r, s);
          break;
        }
        case 5: {  // unsqueeze + expand of the new axis
          int64_t ax = int64_t(g.next() % (nd + 1));
          Shape s = r.shape;
          s.insert(s.begin() + ax, 3);
          Shape s1 = r.shape;
          s1.insert(s1.begin() + ax, 1);
          chain << ".unsqueeze(" << ax << ").expand(" << shape_text(s) << ")";
          t = t.unsqueeze(ax).expand(s), r = ref::expand(ref::reshape(r, s1), s);
          break;
        }
        case 6: {  // shrink one axis to a random non-empty range
          int64_t ax = int64_t(g.next() % nd), n = r.shape[ax];
          int64_t lo = int64_t(g.next() % n), hi = lo + 1 + int64_t(g.next() % (n - lo));
          std::vector<std::pair<int64_t, int64_t>> rg;
          for (int64_t d = 0; d < nd; ++d) rg.push_back(d == ax ? std::pair<int64_t, int64_t>{lo, hi} : std::pair<int64_t, int64_t>{0, r.shape[d]});
          chain << ".shrink(axis " << ax << ": " << lo << "," << hi << ")";
          t = t.shrink(rg), r = ref::shrink(r, rg);
          break;
        }
      }
      if (ref::numel(r.shape) > 2000) break;
    }
    } catch (const std::exception& e) {
      BOOST_ERROR(chain.str() << ": threw " << e.what());
      continue;
    }
    guarded(chain.str(), [&] { check_tensor(t, r); });
  }
}
