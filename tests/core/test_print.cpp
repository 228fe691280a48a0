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
