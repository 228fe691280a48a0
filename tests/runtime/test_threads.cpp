// The threading contract (Note [Threads] in core/src/graph/node.hpp, docs/architecture.md):
// independent tensors on different threads are safe; realizing or reading one shared tensor from
// several threads is safe and computes it once; backward() from several threads into shared
// leaves accumulates. Each test runs 8 threads; CTest runs this file with the kernel cache on and
// off, and CI runs it again under ThreadSanitizer (scripts/check-tsan.sh).
//
// Boost.Test's assertions are not thread-safe, so worker threads only record what they saw
// (values, exception messages) and the main thread checks it against host-computed references.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "ravel/ravel.hpp"

using ravel::Tensor;

namespace {

constexpr int kThreads = 8;

// Runs body(t) on kThreads threads at once; returns each thread's exception message ("" if none).
std::vector<std::string> on_threads(const std::function<void(int)>& body) {
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        body(t);
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  return errors;
}

void check_no_errors(const std::vector<std::string>& errors) {
  for (int t = 0; t < kThreads; ++t) BOOST_TEST(errors[t].empty(), "thread " << t << ": " << errors[t]);
}

std::vector<double> iota(int n, double scale, double shift) {
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) v[i] = scale * i + shift;
  return v;
}

bool close(double a, double b, double rtol) { return std::abs(a - b) <= rtol * (1 + std::abs(b)); }

// The expression every test builds: sum over rows of exp(e - max(e)) with e = 2 sin(x/100 + c),
// a lazy graph of several kernels (elementwise, two reductions, a broadcast second pass).
Tensor expression(const Tensor& x, double c) {
  Tensor e = (x * 0.01 + c).sin() * 2.0;
  return (e - e.max({1}, true)).exp().sum({1});
}
std::vector<double> expression_reference(const std::vector<double>& x, int rows, int cols, double c) {
  std::vector<double> out(rows, 0.0);
  for (int r = 0; r < rows; ++r) {
    std::vector<double> e(cols);
    double max = -INFINITY;
    for (int j = 0; j < cols; ++j) max = std::max(max, e[j] = 2 * std::sin(x[r * cols + j] * 0.01 + c));
    for (int j = 0; j < cols; ++j) out[r] += std::exp(e[j] - max);
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_shared_lazy_tensor_read_by_8_threads_is_computed_once) {
  const int rows = 64, cols = 33;
  auto reference_graph = expression(Tensor::from_vector<double>(iota(rows * cols, 0.5, 0), {rows, cols}), 0.25);
  ravel::reset_stats();
  reference_graph.realize();
  const int64_t kernels_once = ravel::cumulative_stats().programs + ravel::cumulative_stats().contractions;
  BOOST_TEST_REQUIRE(kernels_once > 0);

  for (int round = 0; round < 5; ++round) {
    std::vector<double> x = iota(rows * cols, 0.25, round);
    Tensor shared = expression(Tensor::from_vector<double>(x, {rows, cols}), 0.5);
    ravel::reset_stats();
    std::vector<std::vector<double>> seen(kThreads);
    check_no_errors(on_threads([&](int t) { seen[t] = shared.to_vector<double>(); }));
    const auto stats = ravel::cumulative_stats();
    BOOST_TEST(stats.programs + stats.contractions == kernels_once);  // computed once, not 8 times
    const auto want = expression_reference(x, rows, cols, 0.5);
    for (int t = 0; t < kThreads; ++t)
      for (int r = 0; r < rows; ++r)
        BOOST_TEST(close(seen[t][r], want[r], 1e-12), "round " << round << " thread " << t << " row " << r << ": "
                                                               << seen[t][r] << " vs " << want[r]);
  }
}

BOOST_AUTO_TEST_CASE(identical_graphs_over_different_data_on_8_threads) {
  // Same structure on every thread: hash-consing shares the constants and the kernel cache
  // shares the recipes, while each thread's data and results are its own.
  const int rows = 16, cols = 40, iterations = 25;
  std::vector<std::vector<double>> results(kThreads * iterations);
  check_no_errors(on_threads([&](int t) {
    for (int i = 0; i < iterations; ++i) {
      Tensor x = Tensor::from_vector<double>(iota(rows * cols, 0.1 * (t + 1), i), {rows, cols});
      results[t * iterations + i] = expression(x, 0.125).to_vector<double>();
    }
  }));
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < iterations; ++i) {
      const auto want = expression_reference(iota(rows * cols, 0.1 * (t + 1), i), rows, cols, 0.125);
      const auto& got = results[t * iterations + i];
      BOOST_TEST_REQUIRE(got.size() == want.size());
      for (int r = 0; r < rows; ++r)
        BOOST_TEST(close(got[r], want[r], 1e-12), "thread " << t << " iteration " << i << " row " << r);
    }
}

BOOST_AUTO_TEST_CASE(threads_sharing_intermediates_of_one_input) {
  // Every thread starts from the same tensor x, so the nodes of exp(x * 0.01 + 0.5) * x are the
  // same nodes on every thread; one thread's realization makes and releases them as temporaries
  // while the others schedule graphs that contain them.
  const int rows = 32, cols = 50;
  const std::vector<double> xv = iota(rows * cols, 0.3, -7);
  Tensor x = Tensor::from_vector<double>(xv, {rows, cols});
  std::vector<std::vector<double>> results(kThreads * 10);
  check_no_errors(on_threads([&](int t) {
    for (int i = 0; i < 10; ++i) results[t * 10 + i] = (expression(x, 0.5) * double(t + i)).to_vector<double>();
  }));
  const auto base = expression_reference(xv, rows, cols, 0.5);
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < 10; ++i)
      for (int r = 0; r < rows; ++r)
        BOOST_TEST(close(results[t * 10 + i][r], base[r] * (t + i), 1e-12), "thread " << t << " i " << i);
}

namespace {
// A small regression trained for `steps` SGD steps from seed `seed`; returns the losses.
std::vector<float> train(uint64_t seed, int steps) {
  ravel::nn::Linear layer(6, 1, seed);
  ravel::nn::SGD opt(layer.parameters(), 0.2);
  Tensor x = Tensor::rand({32, 6}, seed + 100);
  Tensor y = (x * Tensor::from_vector<float>({1, -2, 3, -4, 5, -6}, {6})).sum({1}, true) + 0.5;
  std::vector<float> losses;
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    Tensor loss = ravel::nn::mse_loss(layer(x), y);
    loss.backward();
    opt.step();
    losses.push_back(loss.item<float>());
  }
  return losses;
}
}  // namespace

BOOST_AUTO_TEST_CASE(eight_threads_each_train_their_own_model) {
  const int steps = 30;
  std::vector<std::vector<float>> want(kThreads), got(kThreads);
  for (int t = 0; t < kThreads; ++t) want[t] = train(1000 + t, steps);  // one thread at a time
  check_no_errors(on_threads([&](int t) { got[t] = train(1000 + t, steps); }));
  for (int t = 0; t < kThreads; ++t) {
    BOOST_TEST_REQUIRE(got[t].size() == size_t(steps));
    BOOST_TEST(want[t].back() < 0.5 * want[t].front(),
               "thread " << t << " did not train: " << want[t].front() << " -> " << want[t].back());
    for (int s = 0; s < steps; ++s)
      BOOST_TEST(close(got[t][s], want[t][s], 1e-5), "thread " << t << " step " << s << ": " << got[t][s]
                                                                << " vs " << want[t][s]);
  }
}

BOOST_AUTO_TEST_CASE(backward_from_8_threads_into_a_shared_leaf_accumulates) {
  const int n = 10, repeats = 12;
  Tensor w = Tensor::from_vector<double>(iota(n, 1, 0), {n});
  w.requires_grad_();
  check_no_errors(on_threads([&](int t) {
    Tensor c = Tensor::from_vector<double>(iota(n, 0, t + 1), {n});  // all t + 1
    for (int r = 0; r < repeats; ++r) (w * w * c).sum().backward();
  }));
  // d/dw sum(w^2 (t+1)) = 2 w (t+1), summed over threads and repeats.
  const double factor = 2.0 * repeats * (kThreads * (kThreads + 1) / 2);
  const auto g = w.grad().to_vector<double>();
  for (int i = 0; i < n; ++i) BOOST_TEST(g[i] == factor * i, "element " << i);
}

BOOST_AUTO_TEST_CASE(graphs_built_and_dropped_while_others_realize) {
  // Node creation, hash-consing and node destruction (which may free buffers) race with
  // realizations on other threads; every value must still be right.
  std::vector<int> wrong(kThreads, 0);
  check_no_errors(on_threads([&](int t) {
    for (int i = 0; i < 200; ++i) {
      Tensor a = Tensor::full({17}, double(i % 7)).cast(ravel::DType::F64);
      Tensor b = (a + double(t)) * 2.0;
      if (i % 3 == 0) {
        const auto v = b.sum().item<double>();
        if (v != 17 * 2.0 * (i % 7 + t)) ++wrong[t];
      }
    }
  }));
  for (int t = 0; t < kThreads; ++t) BOOST_TEST(wrong[t] == 0, "thread " << t);
}
