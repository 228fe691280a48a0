// to_string(): NumPy's str() layout (the expected strings are what NumPy 1.2x prints).
#include "common.hpp"

using namespace rtest;

namespace {
void check_text(const Tensor& t, const std::string& want, const char* numpy) {
  BOOST_TEST_CONTEXT(numpy) {
    try {
      std::string got = t.to_string();
      BOOST_TEST(got == want, "got:\n" << got << "\nwant:\n" << want);
      std::ostringstream o;
      o << t;
      BOOST_TEST(o.str() == got);  // operator<< prints the same text
    } catch (const std::exception& e) {
      BOOST_ERROR("threw " << e.what());
    }
  }
}
}  // namespace

BOOST_AUTO_TEST_CASE(float_matrix) {
  check_text(Tensor::arange(0, 4, 1, DType::F32).reshape({2, 2}), "[[0. 1.]\n [2. 3.]]",
             "print(np.arange(4, dtype=np.float32).reshape(2, 2))");
}

BOOST_AUTO_TEST_CASE(int_3d) {
  check_text(Tensor::arange(8).reshape({2, 2, 2}), "[[[0 1]\n  [2 3]]\n\n [[4 5]\n  [6 7]]]",
             "print(np.arange(8).reshape(2, 2, 2))");
  check_text(Tensor::from_vector<int32_t>({-1, 10, 3, 4}, {2, 2}), "[[-1 10]\n [ 3  4]]",
             "print(np.array([[-1, 10], [3, 4]]))");
}

BOOST_AUTO_TEST_CASE(scalars) {
  check_text(Tensor::scalar(3.5), "3.5", "print(np.array(3.5, dtype=np.float32))");
  check_text(Tensor::scalar(7, DType::I64), "7", "print(np.array(7))");
}

BOOST_AUTO_TEST_CASE(bools) {
  std::vector<uint8_t> b = {1, 0};
  check_text(Tensor::from_data(b.data(), DType::Bool, {2}), "[ True False]", "print(np.array([True, False]))");
}

BOOST_AUTO_TEST_CASE(fractional_floats_and_views) {
  check_text(Tensor::from_vector<float>({0.5f, 1.25f}, {2}), "[0.5  1.25]", "print(np.array([0.5, 1.25], np.float32))");
  // A view prints its logical values: np.arange(4.).reshape(2, 2).T
  check_text(Tensor::arange(0, 4, 1, DType::F64).reshape({2, 2}).transpose(), "[[0. 2.]\n [1. 3.]]",
             "print(np.arange(4.).reshape(2, 2).T)");
}

BOOST_AUTO_TEST_CASE(meta) {
  ravel::PrintOptions opts;
  opts.show_meta = true;
  std::string s = Tensor::zeros({2, 2}).to_string(opts);
  BOOST_TEST(s.find("shape=[2, 2]") != std::string::npos, s);
  BOOST_TEST(s.find("dtype=f32") != std::string::npos, s);
  BOOST_TEST(s.find("device=" + ravel::Runtime::get().default_device().str()) != std::string::npos, s);
}

// Halves and f32 print the fewest digits that read back as the same value in their own dtype
// (NumPy's unique repr: an f16 0.1, stored as 0.0999755859375, prints 0.1; Note [Shortest digits
// in the tensor's dtype] in core/src/tensor/print.cpp). Expected strings from NumPy 1.24.
BOOST_AUTO_TEST_CASE(halves_and_f32_print_their_shortest_digits) {
  const std::vector<double> v = {0.1, 1.5, 3.14159, -2.0 / 3};
  check_text(Tensor::from_vector<double>(v, {4}).cast(DType::F16), "[ 0.1     1.5     3.14   -0.6665]",
             "print(np.array([0.1, 1.5, 3.14159, -2/3], np.float16))");
  check_text(Tensor::from_vector<double>({0.3, 2.0, -1.25, 10.1}, {2, 2}).cast(DType::F16), "[[ 0.3   2.  ]\n [-1.25 10.1 ]]",
             "print(np.array([[0.3, 2.0], [-1.25, 10.1]], np.float16))");
  check_text(Tensor::scalar(0.3, DType::F16), "0.3", "print(np.array(0.3, np.float16))");
  check_text(Tensor::from_vector<double>({NAN, INFINITY, 0.2}, {3}).cast(DType::F16), "[nan inf 0.2]",
             "print(np.array([nan, inf, 0.2], np.float16))");
  check_text(Tensor::from_vector<double>(v, {4}).cast(DType::F32), "[ 0.1        1.5        3.14159   -0.6666667]",
             "print(np.array([0.1, 1.5, 3.14159, -2/3], np.float32))");
  // NumPy has no bf16: the same rule (bf16(-2/3) = -0.66796875; -0.67 would round to -0.671875).
  check_text(Tensor::from_vector<double>({0.1, 1.5, 3.14159, -2.0 / 3, 100.0}, {5}).cast(DType::BF16),
             "[  0.1     1.5     3.14   -0.668 100.   ]", "the bf16 values' shortest digits");
  // Every cell reads back to its element's bits, over many values of each half type.
  for (DType dt : {DType::F16, DType::BF16}) {
    Tensor t = (Tensor::randn({997}, 5) * 300.0).cast(dt);
    std::vector<double> want = t.to_vector<double>();
    std::string text = t.to_string();
    for (char& c : text)
      if (c == '[' || c == ']' || c == '\n') c = ' ';
    std::istringstream cells(text);
    size_t k = 0, bad = 0;
    for (std::string cell; cells >> cell; ++k) {
      const double r = std::strtod(cell.c_str(), nullptr);
      const double back = Tensor::scalar(r, DType::F64).cast(dt).item<double>();
      bad += k < want.size() && back != want[k];
    }
    BOOST_TEST(k == want.size());
    BOOST_TEST(bad == 0u, bad << " " << ravel::dtype_name(dt) << " cells do not read back");
  }
}

BOOST_AUTO_TEST_CASE(narrow_integers) {
  check_text(Tensor::from_vector<int64_t>({-1, 2, 127}, {3}).cast(DType::I8), "[ -1   2 127]", "print(np.array([-1, 2, 127], np.int8))");
  check_text(Tensor::from_vector<int64_t>({65535, 0, 7}, {3}).cast(DType::U16), "[65535     0     7]",
             "print(np.array([65535, 0, 7], np.uint16))");
  std::vector<uint64_t> big = {10000000000000000000ull, 2, 3};
  check_text(Tensor::from_data(big.data(), DType::U64, {3}), "[10000000000000000000                    2                    3]",
             "print(np.array([10**19, 2, 3], np.uint64))");
}
