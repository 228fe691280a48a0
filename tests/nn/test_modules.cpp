// nn building blocks against independent computations written here (plain C++ doubles).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "ravel/ravel.hpp"

#include "test_support.hpp"

using ravel::Tensor;
namespace nn = ravel::nn;
namespace tt = boost::test_tools;

BOOST_AUTO_TEST_CASE(linear_matches_naive_and_is_seeded) {
  nn::Linear a(5, 3, 7), b(5, 3, 7), c(5, 3, 8);
  BOOST_TEST(a.weight.to_vector<float>() == b.weight.to_vector<float>());  // same seed, same init
  BOOST_TEST(a.weight.to_vector<float>() != c.weight.to_vector<float>());
  auto w = a.weight.to_vector<float>(), bias = a.bias.to_vector<float>();
  for (float v : w) BOOST_TEST(std::fabs(v) <= 1.0 / std::sqrt(5.0));  // U(-1/sqrt(in), 1/sqrt(in))
  std::vector<float> xv{1, -2, 0.5f, 3, 0, 2, 1, 1, -1, 0.25f};
  auto y = a(Tensor::from_vector(xv, {2, 5})).to_vector<float>();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      double acc = bias[j];
      for (int k = 0; k < 5; ++k) acc += double(xv[i * 5 + k]) * w[k * 3 + j];
      BOOST_TEST(y[i * 3 + j] == acc, tt::tolerance(1e-5));
    }
  BOOST_CHECK_THROW(a(Tensor::ones({2, 4})), ravel::ShapeError);
}

BOOST_AUTO_TEST_CASE(embedding_looks_up_rows) {
  nn::Embedding e(6, 4, 3);
  auto table = e.weight.to_vector<float>();
  Tensor idx = Tensor::from_vector<int64_t>({5, 0, 2, 2, 1, 4}, {2, 3});
  Tensor out = e(idx);
  BOOST_TEST(ravel::shape_str(out.shape()) == "[2, 3, 4]");
  auto got = out.to_vector<float>();
  std::vector<int64_t> ids{5, 0, 2, 2, 1, 4};
  for (int r = 0; r < 6; ++r)
    for (int d = 0; d < 4; ++d) BOOST_TEST(got[r * 4 + d] == table[ids[r] * 4 + d]);
  // The gradient of a sum of looked-up rows counts how often each row was read.
  Tensor w = e.weight;
  auto g = ravel::gradients(e(idx).sum(), {w})[0].to_vector<float>();
  std::vector<int> count{1, 1, 2, 0, 1, 1};
  for (int r = 0; r < 6; ++r)
    for (int d = 0; d < 4; ++d) BOOST_TEST(g[r * 4 + d] == float(count[r]));
}

BOOST_AUTO_TEST_CASE(layernorm_matches_naive) {
  nn::LayerNorm ln(4);
  std::vector<float> xv{1, 2, 3, 4, -1, 0, 10, 2};
  auto y = ln(Tensor::from_vector(xv, {2, 4})).to_vector<float>();
  for (int r = 0; r < 2; ++r) {
    double mean = 0, var = 0;
    for (int i = 0; i < 4; ++i) mean += xv[r * 4 + i] / 4.0;
    for (int i = 0; i < 4; ++i) var += (xv[r * 4 + i] - mean) * (xv[r * 4 + i] - mean) / 4.0;
    for (int i = 0; i < 4; ++i) BOOST_TEST(y[r * 4 + i] == (xv[r * 4 + i] - mean) / std::sqrt(var + 1e-5), tt::tolerance(1e-4));
  }
}

BOOST_AUTO_TEST_CASE(activations_match_reference_values) {
  // torch.nn.functional.gelu(torch.tensor([-1., 0., 1., 2.]), approximate="tanh") =
  // [-0.1588, 0.0000, 0.8412, 1.9546] (formula 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3)))).
  auto g = nn::gelu(Tensor::from_vector<double>({-1, 0, 1, 2}, {4})).to_vector<double>();
  for (int i = 0; i < 4; ++i) {
    double x = i - 1.0;
    double ref = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    BOOST_TEST(g[i] == ref, tt::tolerance(1e-12));
  }
  BOOST_TEST(g[2] == 0.8411920, tt::tolerance(1e-6));
  auto r = nn::activate(Tensor::from_vector<float>({-2, 3}, {2}), nn::Activation::ReLU).to_vector<float>();
  BOOST_TEST(r[0] == 0.0f);
  BOOST_TEST(r[1] == 3.0f);
}

BOOST_AUTO_TEST_CASE(cross_entropy_is_stable_and_correct) {
  // Logits of +-1000: naive softmax would overflow; the loss is exact in closed form.
  Tensor logits = Tensor::from_vector<float>({1000, -1000, 0, -1000, 1000, 0, 0, 0, 0}, {3, 3});
  Tensor targets = Tensor::from_vector<int64_t>({0, 0, 2}, {3});
  // row 0: target logit is the max -> loss ~0; row 1: loss = 2000; row 2: uniform -> ln 3.
  double expected = (0.0 + 2000.0 + std::log(3.0)) / 3.0;
  BOOST_TEST(nn::cross_entropy(logits, targets).item<float>() == expected, tt::tolerance(1e-5));
  // Gradient w.r.t. logits = (softmax - onehot) / N, finite everywhere.
  Tensor l = logits;
  auto g = ravel::gradients(nn::cross_entropy(l, targets), {l})[0].to_vector<float>();
  std::vector<double> want{0, 0, 0, -1.0 / 3, 1.0 / 3, 0, 1.0 / 9, 1.0 / 9, -2.0 / 9};
  for (int i = 0; i < 9; ++i) BOOST_TEST(std::fabs(g[i] - want[i]) < 1e-6);
  BOOST_CHECK_THROW(nn::cross_entropy(logits, Tensor::from_vector<float>({0, 0, 0}, {3})), ravel::DTypeError);
  BOOST_CHECK_THROW(nn::cross_entropy(logits, Tensor::from_vector<int64_t>({0, 0}, {2})), ravel::ShapeError);
  BOOST_TEST(nn::mse_loss(Tensor::from_vector<float>({1, 2}, {2}), Tensor::from_vector<float>({3, 2}, {2})).item<float>() == 2.0f);
}

BOOST_AUTO_TEST_CASE(parameters_round_trip_through_a_file) {
  auto path = (scratch_dir() / "ravel_nn_params.bin").string();
  nn::MLP a({4, 8, 3}, nn::Activation::Tanh, 1), b({4, 8, 3}, nn::Activation::Tanh, 2);
  BOOST_TEST(a.parameter_count() == 4 * 8 + 8 + 8 * 3 + 3);
  nn::save_parameters(a, path);
  nn::load_parameters(b, path);
  auto pa = a.named_parameters(), pb = b.named_parameters();
  for (size_t i = 0; i < pa.size(); ++i) BOOST_TEST(pa[i].second->to_vector<float>() == pb[i].second->to_vector<float>());
  BOOST_TEST(b.layers[0].weight.requires_grad());  // still a trainable leaf
  nn::MLP wrong({4, 9, 3}, nn::Activation::Tanh, 1);
  BOOST_CHECK_EXCEPTION(nn::load_parameters(wrong, path), ravel::ValueError, [](const ravel::ValueError& e) {
    return std::string(e.what()).find("layers.0.weight") != std::string::npos &&
           std::string(e.what()).find("[4, 9]") != std::string::npos;
  });
  // A truncated file names the byte it stopped at and what it needed there.
  const auto full = static_cast<int64_t>(std::filesystem::file_size(path));
  nn::save_parameters(a, path);
  std::filesystem::resize_file(path, static_cast<uintmax_t>(full - 4));
  const std::string want = "truncated at byte " + std::to_string(full - 12) + ": expected 12 bytes of the data of parameter " +
                           pa.back().first + ", the file has " + std::to_string(full - 4) + " bytes";
  BOOST_CHECK_EXCEPTION(nn::load_parameters(b, path), ravel::ValueError, [&](const ravel::ValueError& e) {
    BOOST_TEST_MESSAGE(e.what());
    return std::string(e.what()).find(want) != std::string::npos;
  });
  std::ofstream(path) << "not a parameter file";
  BOOST_CHECK_EXCEPTION(nn::load_parameters(b, path), ravel::ValueError,
                        [](const ravel::ValueError& e) { return std::string(e.what()).find("RAVELPAR") != std::string::npos; });
}
