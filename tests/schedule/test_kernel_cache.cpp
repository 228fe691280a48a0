// The kernel cache (Note [Kernel cache]): repeated steps hit, any structural change misses, and
// results never depend on whether the cache is on (checked against values computed here).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdlib>

#include "ravel/ravel.hpp"

using ravel::Tensor;
namespace tt = boost::test_tools;

namespace {

struct CacheScope {  // fresh, enabled cache for one test; default options afterwards
  explicit CacheScope(bool on = true, int entries = 256) {
    ravel::FusionOptions o;
    o.cache_kernels = on;
    o.kernel_cache_entries = entries;
    ravel::set_fusion_options(o);
    ravel::clear_kernel_cache();
  }
  ~CacheScope() {
    ravel::set_fusion_options(ravel::FusionOptions{});
    ravel::clear_kernel_cache();
  }
};

std::vector<float> data(int n, float scale, float shift) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = std::sin(0.37f * i + shift) * scale;
  return v;
}

// Realizes t and returns whether its realization hit (+1), missed (-1) or neither (0).
int realize_outcome(const Tensor& t) {
  t.realize();
  auto s = ravel::last_realization_stats();
  BOOST_TEST(s.cache_hits + s.cache_misses <= 1);
  return s.cache_hits ? 1 : s.cache_misses ? -1 : 0;
}

}  // namespace

BOOST_AUTO_TEST_CASE(identical_steps_hit_after_the_first) {
  CacheScope scope;
  for (int step = 0; step < 5; ++step) {
    // New buffers every step (like new weights): same structure, different identities.
    auto av = data(60, 1, float(step)), bv = data(60, 2, 1.f + step);
    Tensor a = Tensor::from_vector(av, {6, 10}), b = Tensor::from_vector(bv, {6, 10});
    Tensor d = (a.exp() * b + 2.0f).sum(1);
    BOOST_TEST(realize_outcome(d) == (step == 0 ? -1 : 1));
    auto got = d.to_vector<float>();
    for (int r = 0; r < 6; ++r) {
      double want = 0;
      for (int c = 0; c < 10; ++c) want += std::exp(double(av[r * 10 + c])) * bv[r * 10 + c] + 2.0;
      BOOST_TEST(got[r] == want, tt::tolerance(1e-4));
    }
  }
  auto total = ravel::cumulative_stats();
  BOOST_TEST(ravel::kernel_cache_size() >= 1u);
  BOOST_TEST(total.cache_hits >= 4);
}

BOOST_AUTO_TEST_CASE(structural_changes_miss) {
  CacheScope scope;
  auto v = data(24, 1, 0);
  auto make = [&](ravel::Shape s) { return Tensor::from_vector(v, s); };
  BOOST_TEST(realize_outcome(make({4, 6}) * 3.0f) == -1);
  BOOST_TEST(realize_outcome(make({4, 6}) * 3.0f) == 1);
  // Shape.
  BOOST_TEST(realize_outcome(make({6, 4}) * 3.0f) == -1);
  // Constant: must miss, and the result must use the new constant.
  Tensor c5 = make({4, 6}) * 5.0f;
  BOOST_TEST(realize_outcome(c5) == -1);
  auto got = c5.to_vector<float>();
  for (int i = 0; i < 24; ++i) BOOST_TEST(got[i] == v[i] * 5.0f);
  // Dtype.
  Tensor d64 = Tensor::from_vector(std::vector<double>(v.begin(), v.end()), {4, 6}) * 3.0;
  BOOST_TEST(realize_outcome(d64) == -1);
  // View: a transpose reads the same buffer differently.
  Tensor t = make({4, 6}).transpose() * 3.0f;
  BOOST_TEST(realize_outcome(t) == -1);
  auto tv = t.to_vector<float>();
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 4; ++j) BOOST_TEST(tv[i * 4 + j] == v[j * 6 + i] * 3.0f);
  // Op.
  BOOST_TEST(realize_outcome(make({4, 6}) + 3.0f) == -1);
}

BOOST_AUTO_TEST_CASE(sharing_pattern_is_part_of_the_key) {
  CacheScope scope;
  auto xv = data(8, 1, 0), yv = data(8, 1, 2);
  Tensor x = Tensor::from_vector(xv, {8}), y = Tensor::from_vector(yv, {8});
  Tensor xx = x * x;
  BOOST_TEST(realize_outcome(xx) == -1);
  Tensor xy = x * y;  // same ops and shapes, but two distinct buffers
  BOOST_TEST(realize_outcome(xy) == -1);
  auto a = xx.to_vector<float>(), b = xy.to_vector<float>();
  for (int i = 0; i < 8; ++i) {
    BOOST_TEST(a[i] == xv[i] * xv[i]);
    BOOST_TEST(b[i] == xv[i] * yv[i]);
  }
}

BOOST_AUTO_TEST_CASE(results_identical_with_cache_on_and_off) {
  // A small MLP step (contractions with fused epilogues, a softmax with several kernels and
  // freed intermediates), run twice with the cache on (miss, then hit) and once with it off.
  const int B = 5, I = 7, H = 6, O = 3;
  auto xv = data(B * I, 1, 0), w1v = data(I * H, 0.5f, 1), b1v = data(H, 0.1f, 2), w2v = data(H * O, 0.5f, 3);
  // Reference, computed independently in double.
  std::vector<double> want(B * O);
  for (int b = 0; b < B; ++b) {
    std::vector<double> h(H), z(O);
    for (int j = 0; j < H; ++j) {
      double s = b1v[j];
      for (int i = 0; i < I; ++i) s += double(xv[b * I + i]) * w1v[i * H + j];
      h[j] = std::max(s, 0.0);
    }
    double mx = -1e300, den = 0;
    for (int o = 0; o < O; ++o) {
      z[o] = 0;
      for (int j = 0; j < H; ++j) z[o] += h[j] * w2v[j * O + o];
      mx = std::max(mx, z[o]);
    }
    for (int o = 0; o < O; ++o) den += std::exp(z[o] - mx);
    for (int o = 0; o < O; ++o) want[b * O + o] = std::exp(z[o] - mx) / den;
  }
  auto step = [&] {
    Tensor x = Tensor::from_vector(xv, {B, I}), w1 = Tensor::from_vector(w1v, {I, H}),
           b1 = Tensor::from_vector(b1v, {H}), w2 = Tensor::from_vector(w2v, {H, O});
    Tensor p = (x.matmul(w1) + b1).relu().matmul(w2).softmax(-1);
    int outcome = realize_outcome(p);
    return std::make_pair(outcome, p.to_vector<float>());
  };
  for (bool on : {true, false}) {
    BOOST_TEST_CONTEXT("cache " << (on ? "on" : "off")) {
      CacheScope scope(on);
      for (int rep = 0; rep < 3; ++rep) {
        auto [outcome, got] = step();
        BOOST_TEST(outcome == (!on ? 0 : rep == 0 ? -1 : 1));
        for (int i = 0; i < B * O; ++i) BOOST_TEST(got[i] == want[i], tt::tolerance(1e-5));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(padded_constant_is_bound_on_a_hit) {
  // A padded Const is read from a one-element buffer that only binding creates.
  CacheScope scope;
  for (int rep = 0; rep < 2; ++rep) {
    Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5}, {5});
    Tensor y = x + Tensor::full({3}, 2.0).pad({{1, 1}});
    BOOST_TEST(realize_outcome(y) == (rep == 0 ? -1 : 1));
    auto got = y.to_vector<float>();
    const float want[] = {1, 4, 5, 6, 5};
    for (int i = 0; i < 5; ++i) BOOST_TEST(got[i] == want[i]);
  }
}

BOOST_AUTO_TEST_CASE(environment_disables_the_cache) {
  // The environment is read when a runtime starts (Note [Settings]), so start one under it.
  CacheScope scope;
  setenv("RAVEL_KERNEL_CACHE", "0", 1);
  ravel::Runtime::reset({});
  unsetenv("RAVEL_KERNEL_CACHE");  // read already: the running runtime keeps the cache off
  Tensor x = Tensor::from_vector<float>({1, 2}, {2});
  BOOST_TEST(realize_outcome(x * 7.0f) == 0);
  BOOST_TEST(realize_outcome(x * 7.0f + 0.0f) == 0);
  BOOST_TEST(ravel::kernel_cache_size() == 0u);
  ravel::Runtime::reset({});
  Tensor y = Tensor::from_vector<float>({1, 2}, {2});
  BOOST_TEST(realize_outcome(y * 7.0f - 1.0f) == -1);
}

BOOST_AUTO_TEST_CASE(cache_is_bounded_lru) {
  CacheScope scope(true, 2);
  Tensor x = Tensor::from_vector<float>({1, 2, 3}, {3});
  BOOST_TEST(realize_outcome(x * 2.0f) == -1);
  BOOST_TEST(realize_outcome(x * 3.0f) == -1);
  BOOST_TEST(realize_outcome(x * 2.0f) == 1);   // now most recent
  BOOST_TEST(realize_outcome(x * 4.0f) == -1);  // evicts x * 3
  BOOST_TEST(ravel::kernel_cache_size() == 2u);
  BOOST_TEST(realize_outcome(x * 2.0f) == 1);
  BOOST_TEST(realize_outcome(x * 3.0f) == -1);
}
