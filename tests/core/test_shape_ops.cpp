// tril/triu, tile, repeat_interleave, split/chunk, roll and meshgrid against index loops written
// here (each output index mapped to its source index by the NumPy/PyTorch definition), on several
// shapes, axes and dtypes; bad arguments raise the typed errors.
#include <boost/test/unit_test.hpp>

#include <functional>
#include <string>
#include <vector>

#include "ravel/ravel.hpp"

using ravel::DType;
using ravel::Shape;
using ravel::Tensor;

namespace {

int64_t count(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}
std::vector<int64_t> unravel(int64_t flat, const Shape& s) {
  std::vector<int64_t> idx(s.size());
  for (size_t a = s.size(); a-- > 0;) idx[a] = flat % s[a], flat /= s[a];
  return idx;
}
int64_t ravel_index(const std::vector<int64_t>& idx, const Shape& s) {
  int64_t f = 0;
  for (size_t a = 0; a < s.size(); ++a) f = f * s[a] + idx[a];
  return f;
}
// Distinct values 0, 1, 2, ... so that any misplaced element shows.
Tensor iota(const Shape& s, DType t = DType::F32) {
  std::vector<double> v(count(s));
  for (size_t k = 0; k < v.size(); ++k) v[k] = double(k) + 1;
  return Tensor::from_vector<double>(v, s).cast(t);
}
// out[o] = x[src(o)] (or 0 where src gives -1), checked against the tensor `got`.
void check_gather(const std::string& what, const Tensor& got, const Shape& want_shape, const Tensor& x,
                  const std::function<int64_t(const std::vector<int64_t>&)>& src) {
  BOOST_TEST_CONTEXT(what) {
    BOOST_REQUIRE_MESSAGE(got.shape() == want_shape, "shape " << ravel::shape_str(got.shape()) << ", want " << ravel::shape_str(want_shape));
    BOOST_CHECK(got.dtype() == x.dtype());
    std::vector<double> g = got.to_vector<double>(), xv = x.to_vector<double>();
    int bad = 0;
    for (int64_t o = 0; o < count(want_shape); ++o) {
      int64_t s = src(unravel(o, want_shape));
      double want = s < 0 ? 0.0 : xv[s];
      if (g[o] != want && bad++ < 5) BOOST_ERROR("at flat " << o << ": got " << g[o] << ", want " << want);
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(tril_triu) {
  for (const Shape& s : {Shape{4, 5}, Shape{2, 3, 4}, Shape{5, 2}}) {
    for (DType t : {DType::F32, DType::I32, DType::Bool}) {
      Tensor x = t == DType::Bool ? iota(s).gt(Tensor::scalar(0.0)) : iota(s, t);
      for (int64_t k : {-2, -1, 0, 1, 3}) {
        const std::string ctx = ravel::shape_str(s) + " " + ravel::dtype_name(t) + " k=" + std::to_string(k);
        check_gather("tril " + ctx, x.tril(k), s, x, [&](const std::vector<int64_t>& i) {
          size_t n = i.size();
          return i[n - 1] - i[n - 2] <= k ? ravel_index(i, s) : -1;
        });
        check_gather("triu " + ctx, x.triu(k), s, x, [&](const std::vector<int64_t>& i) {
          size_t n = i.size();
          return i[n - 1] - i[n - 2] >= k ? ravel_index(i, s) : -1;
        });
      }
    }
  }
  BOOST_CHECK_THROW(iota({3}).tril(), ravel::ShapeError);
}

BOOST_AUTO_TEST_CASE(tile) {
  const Shape s = {2, 3};
  Tensor x = iota(s);
  struct Case { std::vector<int64_t> reps; Shape out; };
  for (const Case& c : {Case{{2}, {2, 6}}, Case{{2, 1}, {4, 3}}, Case{{3, 2, 2}, {3, 4, 6}}, Case{{1, 1}, {2, 3}}, Case{{0, 2}, {0, 6}}}) {
    BOOST_TEST_CONTEXT("reps of size " << c.reps.size()) {
      check_gather("tile", x.tile(c.reps), c.out, x, [&](const std::vector<int64_t>& i) {
        // The trailing axes of the output wrap onto x's axes.
        size_t off = i.size() - s.size();
        return ravel_index({i[off] % s[0], i[off + 1] % s[1]}, s);
      });
    }
  }
  BOOST_CHECK_THROW(x.tile({-1}), ravel::ValueError);
}

BOOST_AUTO_TEST_CASE(repeat_interleave) {
  const Shape s = {2, 3};
  Tensor x = iota(s, DType::I64);
  check_gather("r=2 axis 0", x.repeat_interleave(2, 0), {4, 3}, x,
               [&](const std::vector<int64_t>& i) { return ravel_index({i[0] / 2, i[1]}, s); });
  check_gather("r=3 axis -1", x.repeat_interleave(3, -1), {2, 9}, x,
               [&](const std::vector<int64_t>& i) { return ravel_index({i[0], i[1] / 3}, s); });
  check_gather("r=2 flattened", x.repeat_interleave(2), {12}, x, [&](const std::vector<int64_t>& i) { return i[0] / 2; });
  // A count per index: [1, 0, 3] along axis 1 -> columns 0, 2, 2, 2.
  const std::vector<int64_t> cols = {0, 2, 2, 2};
  check_gather("list axis 1", x.repeat_interleave(std::vector<int64_t>{1, 0, 3}, 1), {2, 4}, x,
               [&](const std::vector<int64_t>& i) { return ravel_index({i[0], cols[i[1]]}, s); });
  check_gather("list of one", x.repeat_interleave(std::vector<int64_t>{2}, 0), {4, 3}, x,
               [&](const std::vector<int64_t>& i) { return ravel_index({i[0] / 2, i[1]}, s); });
  BOOST_CHECK((x.repeat_interleave(0, 1).shape() == Shape{2, 0}));
  BOOST_CHECK_THROW(x.repeat_interleave(std::vector<int64_t>{1, 2}, 1), ravel::ShapeError);
  BOOST_CHECK_THROW(x.repeat_interleave(-1, 0), ravel::ValueError);
  BOOST_CHECK_THROW(x.repeat_interleave(2, 2), ravel::AxisError);
}

BOOST_AUTO_TEST_CASE(split_and_chunk) {
  const Shape s = {3, 7};
  Tensor x = iota(s);
  auto check_parts = [&](const std::string& what, const std::vector<Tensor>& parts, const std::vector<int64_t>& sizes) {
    BOOST_TEST_CONTEXT(what) {
      BOOST_REQUIRE_EQUAL(parts.size(), sizes.size());
      int64_t start = 0;
      for (size_t p = 0; p < parts.size(); ++p) {
        check_gather("part " + std::to_string(p), parts[p], {3, sizes[p]}, x,
                     [&](const std::vector<int64_t>& i) { return ravel_index({i[0], start + i[1]}, s); });
        start += sizes[p];
      }
    }
  };
  check_parts("split(3)", x.split(3, 1), {3, 3, 1});
  check_parts("split(7)", x.split(7, -1), {7});
  check_parts("split(10)", x.split(10, 1), {7});
  check_parts("split({2, 0, 5})", x.split({2, 0, 5}, 1), {2, 0, 5});
  check_parts("chunk(3)", x.chunk(3, 1), {3, 3, 1});
  check_parts("chunk(4)", x.chunk(4, 1), {2, 2, 2, 1});
  check_parts("chunk(6)", x.chunk(6, 1), {2, 2, 2, 1});  // torch.chunk: fewer than asked
  check_parts("chunk(7)", x.chunk(7, 1), {1, 1, 1, 1, 1, 1, 1});
  BOOST_CHECK_EQUAL(x.split(1, 0).size(), 3u);
  BOOST_CHECK_THROW(x.split({2, 2}, 1), ravel::ShapeError);
  BOOST_CHECK_THROW(x.split(0, 1), ravel::ValueError);
  BOOST_CHECK_THROW(x.chunk(0, 1), ravel::ValueError);
}

BOOST_AUTO_TEST_CASE(roll) {
  const Shape s = {3, 4};
  Tensor x = iota(s);
  auto wrap = [](int64_t v, int64_t d) { return ((v % d) + d) % d; };
  for (int64_t shift : {1, -1, 5, -7, 0, 12}) {
    BOOST_TEST_CONTEXT("shift " << shift) {
      check_gather("axis 1", x.roll(shift, 1), s, x,
                   [&](const std::vector<int64_t>& i) { return ravel_index({i[0], wrap(i[1] - shift, 4)}, s); });
      check_gather("axis -2", x.roll(shift, -2), s, x,
                   [&](const std::vector<int64_t>& i) { return ravel_index({wrap(i[0] - shift, 3), i[1]}, s); });
      check_gather("flattened", x.roll(shift), s, x,
                   [&](const std::vector<int64_t>& i) { return wrap(ravel_index(i, s) - shift, 12); });
    }
  }
  check_gather("two axes", x.roll({1, -2}, {0, 1}), s, x,
               [&](const std::vector<int64_t>& i) { return ravel_index({wrap(i[0] - 1, 3), wrap(i[1] + 2, 4)}, s); });
  check_gather("an axis twice", x.roll({1, 2}, {1, 1}), s, x,
               [&](const std::vector<int64_t>& i) { return ravel_index({i[0], wrap(i[1] - 3, 4)}, s); });
  BOOST_CHECK_THROW(x.roll({1, 2}, {0}), ravel::ValueError);
}

BOOST_AUTO_TEST_CASE(meshgrid) {
  Tensor a = Tensor::from_vector<float>({1, 2, 3}, {3}), b = Tensor::from_vector<float>({10, 20}, {2});
  Tensor c = Tensor::from_vector<float>({100, 200, 300, 400}, {4});
  std::vector<Tensor> ij = Tensor::meshgrid({a, b, c});
  BOOST_REQUIRE_EQUAL(ij.size(), 3u);
  const Shape sij = {3, 2, 4};
  check_gather("ij 0", ij[0], sij, a, [](const std::vector<int64_t>& i) { return i[0]; });
  check_gather("ij 1", ij[1], sij, b, [](const std::vector<int64_t>& i) { return i[1]; });
  check_gather("ij 2", ij[2], sij, c, [](const std::vector<int64_t>& i) { return i[2]; });
  // numpy.meshgrid(a, b, c) (indexing="xy"): shape (2, 3, 4), a varies along axis 1.
  std::vector<Tensor> xy = Tensor::meshgrid({a, b, c}, "xy");
  const Shape sxy = {2, 3, 4};
  check_gather("xy 0", xy[0], sxy, a, [](const std::vector<int64_t>& i) { return i[1]; });
  check_gather("xy 1", xy[1], sxy, b, [](const std::vector<int64_t>& i) { return i[0]; });
  check_gather("xy 2", xy[2], sxy, c, [](const std::vector<int64_t>& i) { return i[2]; });
  // A 0-d input is a grid axis of size 1.
  std::vector<Tensor> z = Tensor::meshgrid({Tensor::scalar(5.0), b});
  BOOST_CHECK((z[0].shape() == Shape{1, 2}));
  BOOST_CHECK((z[0].to_vector<float>() == std::vector<float>{5, 5}));
  BOOST_CHECK_THROW(Tensor::meshgrid({a, b}, "ji"), ravel::ValueError);
  BOOST_CHECK_THROW(Tensor::meshgrid({iota({2, 2})}), ravel::ShapeError);
  BOOST_CHECK_THROW(Tensor::meshgrid({a, b.cast(DType::F64)}), ravel::DTypeError);
}
