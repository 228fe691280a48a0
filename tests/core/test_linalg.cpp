// matmul and dot: the NumPy/PyTorch shape rules (1-D promotion, batch broadcasting), every
// dtype, non-contiguous operands, against a naive triple loop (ref::matmul).
#include "common.hpp"

using namespace rtest;

namespace {

struct MatmulCase {
  Shape a, b, want;
};

// numpy.matmul(np.ones(a), np.ones(b)).shape == want for each row.
const std::vector<MatmulCase> kCases = {
    {{2, 3}, {3, 4}, {2, 4}},
    {{3, 4, 1, 2}, {1, 2, 3}, {3, 4, 1, 3}},
    {{3}, {3, 4}, {4}},           // 1-D @ 2-D
    {{2, 3}, {3}, {2}},           // 2-D @ 1-D
    {{5}, {5}, {}},               // 1-D @ 1-D: a 0-d result
    {{2, 1, 3, 4}, {5, 4, 2}, {2, 5, 3, 2}},
    {{4}, {2, 4, 3}, {2, 3}},     // 1-D @ batched
    {{2, 2, 3}, {3}, {2, 2}},     // batched @ 1-D
    {{1, 1}, {1, 1}, {1, 1}},
    {{3, 0}, {0, 2}, {3, 2}},     // K = 0: zeros
};

}  // namespace

BOOST_AUTO_TEST_CASE(matmul_shapes_and_values_every_dtype) {
  uint64_t seed = 3;
  for (DType dt : kAllDTypes)
    for (const MatmulCase& c : kCases)
      guarded(std::string("matmul dtype=") + ravel::dtype_name(dt) + " " + shape_text(c.a) + " @ " + shape_text(c.b),
              [&] {
                NDArray a = ref::generate(c.a, dt, Domain::Any, ++seed), b = ref::generate(c.b, dt, Domain::Any, ++seed);
                NDArray want = ref::matmul(a, b, dt);
                BOOST_TEST(want.shape == c.want);  // the reference agrees with NumPy's shape rule
                check_tensor(to_tensor(a).matmul(to_tensor(b)), want);
              });
}

BOOST_AUTO_TEST_CASE(matmul_view_operands) {
  // The left operand through every view kind, the right one through another; [3,4] @ [4,5].
  uint64_t seed = 40;
  const size_t nk = kAllKinds.size();
  for (DType dt : {DType::I32, DType::F32, DType::F64})
    for (size_t k = 0; k < nk; ++k)
      guarded(std::string("matmul dtype=") + ravel::dtype_name(dt) + " lhs=" + kind_name(kAllKinds[k]) +
                  " rhs=" + kind_name(kAllKinds[(k + 5) % nk]),
              [&] {
                Built a = build(kAllKinds[k], {3, 4}, dt, Domain::Any, ++seed);
                Built b = build(kAllKinds[(k + 5) % nk], {4, 5}, dt, Domain::Any, ++seed);
                check_tensor(a.t.matmul(b.t), ref::matmul(a.r, b.r, dt));
              });
}

BOOST_AUTO_TEST_CASE(matmul_transposed_operands) {
  // a.T @ b.T with both operands built transposed (strides (1, n)): a classic non-contiguous GEMM.
  for (DType dt : {DType::I64, DType::F32})
    BOOST_TEST_CONTEXT(ravel::dtype_name(dt)) {
      NDArray a = ref::generate({5, 3}, dt, Domain::Any, 11), b = ref::generate({4, 5}, dt, Domain::Any, 12);
      Tensor ta = to_tensor(a).transpose(), tb = to_tensor(b).transpose();
      BOOST_TEST(!ta.is_contiguous());
      check_tensor(ta.matmul(tb), ref::matmul(ref::permute(a, {1, 0}), ref::permute(b, {1, 0}), dt));
      // Batched with transposed inner axes: [2,4,3]^T(-2,-1) @ [2,4,5]... -> [2,3,5]
      NDArray c = ref::generate({2, 4, 3}, dt, Domain::Any, 13), d = ref::generate({2, 4, 5}, dt, Domain::Any, 14);
      check_tensor(to_tensor(c).transpose(-2, -1).matmul(to_tensor(d)),
                   ref::matmul(ref::permute(c, {0, 2, 1}), d, dt));
    }
}

BOOST_AUTO_TEST_CASE(matmul_promotes_dtypes) {
  // np.matmul(i32, f32) -> f32 in Ravel's promotion (i32 < f32)
  auto a = Tensor::from_vector<int32_t>({1, 2, 3, 4}, {2, 2});
  auto b = Tensor::from_vector<float>({0.5f, 1.f, 1.5f, 2.f}, {2, 2});
  auto c = a.matmul(b);
  BOOST_TEST((c.dtype() == DType::F32));
  // [[1,2],[3,4]] @ [[0.5,1],[1.5,2]] = [[3.5, 5], [7.5, 11]]
  BOOST_TEST(c.to_vector<float>() == (std::vector<float>{3.5f, 5.f, 7.5f, 11.f}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(dot_products) {
  uint64_t seed = 70;
  for (DType dt : kNumeric)
    for (ViewKind k : kAllKinds)
      guarded(std::string("dot dtype=") + ravel::dtype_name(dt) + " view=" + kind_name(k), [&] {
        Built a = build(k, {6}, dt, Domain::Any, ++seed), b = build(ViewKind::Contiguous, {6}, dt, Domain::Any, ++seed);
        NDArray want = ref::matmul(a.r, b.r, dt);
        BOOST_TEST(want.shape == Shape{});
        check_tensor(a.t.dot(b.t), want);
      });
  // np.dot([1, 2, 3], [4, 5, 6]) -> 32
  BOOST_TEST(Tensor::from_vector<int64_t>({1, 2, 3}, {3}).dot(Tensor::from_vector<int64_t>({4, 5, 6}, {3})).item<int64_t>() ==
             32);
}
