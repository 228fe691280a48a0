// NumPy broadcasting for binary ops and where: every rule, size-0 axes, views as operands, and
// the ShapeError (naming both shapes) when shapes do not broadcast.
#include "common.hpp"

using namespace rtest;

namespace {

struct Case {
  Shape a, b, want;
  const char* numpy;
};

const std::vector<Case> kCases = {
    {{3, 2}, {2}, {3, 2}, "np.broadcast_shapes((3, 2), (2,)) == (3, 2)"},
    {{3, 1}, {1, 4}, {3, 4}, "(3, 1), (1, 4) -> (3, 4)"},
    {{}, {2, 3}, {2, 3}, "(), (2, 3) -> (2, 3)"},
    {{2, 3}, {}, {2, 3}, "(2, 3), () -> (2, 3)"},
    {{5, 1, 4}, {3, 1}, {5, 3, 4}, "(5, 1, 4), (3, 1) -> (5, 3, 4)"},
    {{1}, {4}, {4}, "(1,), (4,) -> (4,)"},
    {{2, 1, 1}, {1, 3, 1}, {2, 3, 1}, "(2, 1, 1), (1, 3, 1) -> (2, 3, 1)"},
    {{0, 3}, {3}, {0, 3}, "(0, 3), (3,) -> (0, 3)"},
    {{0, 1}, {1, 4}, {0, 4}, "(0, 1), (1, 4) -> (0, 4)"},
    {{2, 0}, {1}, {2, 0}, "(2, 0), (1,) -> (2, 0)"},
    {{1}, {0}, {0}, "(1,), (0,) -> (0,)"},
    {{4, 1, 2}, {4, 3, 2}, {4, 3, 2}, "(4, 1, 2), (4, 3, 2) -> (4, 3, 2)"},
};

const std::vector<std::pair<Shape, Shape>> kBad = {
    {{3, 2}, {4}}, {{2, 3}, {3, 2}}, {{0}, {2}}, {{5, 2, 4}, {3, 4}}, {{3}, {1, 2}},
};

struct Op {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::function<double(double, double)> f;
  bool to_bool;
};
const std::vector<Op> kOps = {
    {"add", [](const Tensor& a, const Tensor& b) { return a.add(b); }, [](double x, double y) { return x + y; }, false},
    {"mul", [](const Tensor& a, const Tensor& b) { return a.mul(b); }, [](double x, double y) { return x * y; }, false},
    {"maximum", [](const Tensor& a, const Tensor& b) { return a.maximum(b); },
     [](double x, double y) { return std::max(x, y); }, false},
    {"sub", [](const Tensor& a, const Tensor& b) { return a.sub(b); }, [](double x, double y) { return x - y; }, false},
    {"lt", [](const Tensor& a, const Tensor& b) { return a.lt(b); }, [](double x, double y) { return double(x < y); }, true},
    {"eq", [](const Tensor& a, const Tensor& b) { return a.eq(b); }, [](double x, double y) { return double(x == y); }, true},
};

}  // namespace

BOOST_AUTO_TEST_CASE(broadcast_shapes_rules) {
  for (const Case& c : kCases)
    BOOST_TEST_CONTEXT(c.numpy) {
      BOOST_TEST(*ref::broadcast_shape(c.a, c.b) == c.want);  // the reference agrees with NumPy
      try {
        BOOST_TEST(ravel::broadcast_shapes(c.a, c.b) == c.want);
      } catch (const std::exception& e) {
        BOOST_ERROR("threw " << e.what());
      }
    }
}

BOOST_AUTO_TEST_CASE(binary_ops_broadcast) {
  uint64_t seed = 1;
  for (const Op& op : kOps)
    for (DType dt : {DType::I32, DType::F32, DType::F64})
      for (const Case& c : kCases)
        guarded(std::string(op.name) + " " + ravel::dtype_name(dt) + " " + c.numpy, [&] {
          NDArray a = ref::generate(c.a, dt, Domain::Any, ++seed), b = ref::generate(c.b, dt, Domain::Any, ++seed);
          NDArray want = ref::map2(a, b, op.to_bool ? DType::Bool : dt, op.f);
          check_tensor(op.op(to_tensor(a), to_tensor(b)), want);
          check_tensor(op.op(to_tensor(b), to_tensor(a)),
                       ref::map2(b, a, op.to_bool ? DType::Bool : dt, op.f));  // both orders
        });
}

// Note [Short innermost axes] (tbb_cpu): an elementwise kernel whose innermost axis is 2 runs
// along the nearest longer axis, writing its output at a stride. Shapes of a 2x2 pooling's
// phase views ([.., 14, 2, 14, 2] and [.., 7, 2, 7, 2]: the nearest longer axis, not the
// channels), all three operands broadcast differently, and a transposed view, against map2.
BOOST_AUTO_TEST_CASE(short_innermost_axes_broadcast) {
  uint64_t seed = 500;
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3, 14, 2, 14, 2}, {2, 3, 14, 1, 14, 1}}, {{2, 5, 7, 2, 7, 2}, {1, 5, 7, 1, 7, 1}},
      {{3, 9, 2}, {3, 9, 1}}, {{3, 2, 3}, {3, 1, 3}}, {{4, 3, 3, 4}, {1, 3, 1, 4}}};
  for (const auto& [full, part] : cases)
    for (DType dt : {DType::F32, DType::I64})
      guarded(std::string(ravel::dtype_name(dt)) + " " + ravel::shape_str(full), [&] {
        NDArray a = ref::generate(full, dt, Domain::Any, ++seed), b = ref::generate(part, dt, Domain::Any, ++seed);
        check_tensor(to_tensor(a).add(to_tensor(b)), ref::map2(a, b, dt, std::plus<double>()));
        check_tensor(to_tensor(b).mul(to_tensor(a)), ref::map2(b, a, dt, std::multiplies<double>()));
      });
  // The transpose of [2, 9] as [9, 2]: its innermost axis is short and strided.
  NDArray m = ref::generate({2, 9}, DType::F32, Domain::Any, ++seed);
  Tensor t = to_tensor(m).transpose(0, 1) + 1.0;
  auto got = t.to_vector<float>();
  auto mv = to_tensor(m).to_vector<float>();
  BOOST_REQUIRE_EQUAL(got.size(), size_t(18));
  for (int i = 0; i < 9; ++i)
    for (int j = 0; j < 2; ++j) BOOST_TEST(got[i * 2 + j] == mv[j * 9 + i] + 1.0f);
}

BOOST_AUTO_TEST_CASE(broadcast_with_view_operands) {
  // [4,3] through each view kind + [3] and + [4,1] through another.
  uint64_t seed = 300;
  const size_t nk = kAllKinds.size();
  for (size_t k = 0; k < nk; ++k)
    guarded(std::string("view=") + kind_name(kAllKinds[k]), [&] {
      Built a = build(kAllKinds[k], {4, 3}, DType::F32, Domain::Any, ++seed);
      Built b = build(kAllKinds[(k + 2) % nk], {3}, DType::F32, Domain::Any, ++seed);
      Built c = build(kAllKinds[(k + 5) % nk], {4, 1}, DType::F32, Domain::Any, ++seed);
      check_tensor(a.t.add(b.t), ref::map2(a.r, b.r, DType::F32, std::plus<double>()));
      check_tensor(c.t.mul(b.t), ref::map2(c.r, b.r, DType::F32, std::multiplies<double>()));
      check_tensor(a.t.add(b.t).mul(c.t),
                   ref::map2(ref::map2(a.r, b.r, DType::F32, std::plus<double>()), c.r, DType::F32, std::multiplies<double>()));
    });
}

BOOST_AUTO_TEST_CASE(where_broadcasts_all_three) {
  struct W { Shape c, a, b, want; };
  const std::vector<W> cases = {
      {{3, 1}, {1, 4}, {}, {3, 4}},       // np.where(c[3,1], a[1,4], 0-d) -> (3, 4)
      {{4}, {3, 1}, {1, 4}, {3, 4}},
      {{}, {2, 3}, {3}, {2, 3}},
      {{2, 1, 3}, {1}, {4, 1}, {2, 4, 3}},
      {{0, 3}, {3}, {1, 3}, {0, 3}},
  };
  uint64_t seed = 400;
  for (const W& w : cases)
    guarded("where " + shape_text(w.c) + " " + shape_text(w.a) + " " + shape_text(w.b), [&] {
      NDArray c = ref::generate(w.c, DType::Bool, Domain::Any, ++seed);
      NDArray a = ref::generate(w.a, DType::I64, Domain::Any, ++seed), b = ref::generate(w.b, DType::I64, Domain::Any, ++seed);
      NDArray want = ref::where(c, a, b, DType::I64);
      BOOST_TEST(want.shape == w.want);
      check_tensor(Tensor::where(to_tensor(c), to_tensor(a), to_tensor(b)), want);
    });
  // where promotes its two value operands: np.where([True, False], np.int32([1, 2]), np.float32(0.5))
  std::vector<uint8_t> cv = {1, 0};
  auto r = Tensor::where(Tensor::from_data(cv.data(), DType::Bool, {2}), Tensor::from_vector<int32_t>({1, 2}, {2}),
                         Tensor::scalar(0.5, DType::F32));
  BOOST_TEST((r.dtype() == DType::F32));
  BOOST_TEST(r.to_vector<float>() == (std::vector<float>{1.f, 0.5f}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(seed_example_3x2_plus_2) {
  // Tensorken: [[2,1],[4,2],[8,4]] + [10,100] = [[12,101],[14,102],[18,104]]
  auto a = Tensor::from_vector<float>({2, 1, 4, 2, 8, 4}, {3, 2});
  auto b = Tensor::from_vector<float>({10, 100}, {2});
  auto c = a + b;
  BOOST_TEST(c.shape() == (Shape{3, 2}));
  BOOST_TEST(c.to_vector<float>() == (std::vector<float>{12, 101, 14, 102, 18, 104}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(mismatch_throws_shape_error_naming_both_shapes) {
  for (const auto& [sa, sb] : kBad)
    BOOST_TEST_CONTEXT(ravel::shape_str(sa) << " with " << ravel::shape_str(sb)) {
      BOOST_TEST(ravel::shape_str(sa) == shape_text(sa));  // shape_str formats like "[3, 2]"
      auto a = Tensor::zeros(sa), b = Tensor::zeros(sb);
      auto expect = [&](const char* what, auto&& f) {
        BOOST_TEST_CONTEXT(what) {
          try {
            f();
            BOOST_ERROR("no exception");
          } catch (const ravel::ShapeError& e) {
            std::string m = e.what();
            BOOST_TEST(m.find(shape_text(sa)) != std::string::npos, "message '" << m << "' names " << shape_text(sa));
            BOOST_TEST(m.find(shape_text(sb)) != std::string::npos, "message '" << m << "' names " << shape_text(sb));
          } catch (const std::exception& e) {
            BOOST_ERROR("wrong exception type: " << e.what());
          }
        }
      };
      expect("broadcast_shapes", [&] { ravel::broadcast_shapes(sa, sb); });
      expect("add", [&] { a.add(b); });
      expect("mul", [&] { a.mul(b); });
      expect("lt", [&] { a.lt(b); });
      expect("operator-", [&] { (void)(a - b); });
      expect("where", [&] { Tensor::where((a < 1.0), a, b); });
    }
}
