// Gradient checks of the reductions (sum, max, min, prod, mean, var, logsumexp) over several
// axis sets with keepdim both ways, and of softmax, log_softmax and cumsum along every axis, in
// f64, against central finite differences (gradcheck.hpp explains eps and the tolerance).
#include <algorithm>
#include <numeric>

#include "gradcheck.hpp"

using namespace adtest;

namespace {

using Reduction = std::function<Tensor(const Tensor&, const Axes&, bool)>;

// Pairwise distinct values at least 0.2 apart (a shuffled lattice plus small noise), so a max
// or min never changes its winner within eps: away from the ties of Note [Gradient of max].
Tensor distinct(const Shape& s, uint64_t seed) {
  std::vector<double> u = uniform_values(s, seed), noise = uniform_values(s, seed + 7);
  std::vector<size_t> order(u.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return u[a] < u[b]; });
  std::vector<double> v(u.size());
  const double mid = static_cast<double>(u.size()) / 2;
  for (size_t rank = 0; rank < order.size(); ++rank)
    v[order[rank]] = 0.25 * (static_cast<double>(rank) - mid) + 0.05 * noise[order[rank]];
  return host(v, s);
}

struct ReduceRow {
  std::string name;
  std::function<Tensor(const Shape&, uint64_t)> gen;
  Reduction op;
};

const std::vector<ReduceRow>& rows() {
  static const std::vector<ReduceRow> r = {
      {"sum", [](const Shape& s, uint64_t seed) { return normal(s, seed); },
       [](const Tensor& x, const Axes& a, bool k) { return x.sum(a, k); }},
      {"max", distinct, [](const Tensor& x, const Axes& a, bool k) { return x.max(a, k); }},
      {"min", distinct, [](const Tensor& x, const Axes& a, bool k) { return x.min(a, k); }},
      // |x| in [0.6, 1.4]: no zeros (the rule divides by x) and a product of O(1).
      {"prod", [](const Shape& s, uint64_t seed) { return signed_away(s, seed, 0.6, 1.4); },
       [](const Tensor& x, const Axes& a, bool k) { return x.prod(a, k); }},
      {"mean", [](const Shape& s, uint64_t seed) { return normal(s, seed); },
       [](const Tensor& x, const Axes& a, bool k) { return x.mean(a, k); }},
      {"var", [](const Shape& s, uint64_t seed) { return normal(s, seed); },
       [](const Tensor& x, const Axes& a, bool k) { return x.var(a, k); }},
      {"var (correction 0)", [](const Shape& s, uint64_t seed) { return normal(s, seed); },
       [](const Tensor& x, const Axes& a, bool k) { return x.var(a, k, 0); }},
      {"logsumexp", [](const Shape& s, uint64_t seed) { return normal(s, seed); },
       [](const Tensor& x, const Axes& a, bool k) { return x.logsumexp(a, k); }},
      {"sin(x).sum", [](const Shape& s, uint64_t seed) { return normal(s, seed); },
       [](const Tensor& x, const Axes& a, bool k) { return x.sin().sum(a, k); }},
      {"max(x * x) (max of a computed tensor)", [](const Shape& s, uint64_t seed) { return distinct(s, seed) + 7.0; },
       [](const Tensor& x, const Axes& a, bool k) { return (x * x).max(a, k); }},
  };
  return r;
}

struct AxisSet {
  std::string name;
  Axes axes;
};
const std::vector<AxisSet> kAxisSets = {{"all", Axes::every()},       {"0", Axes(0)},           {"1", Axes(1)},
                                        {"-1", Axes(-1)},      {"{0,2}", Axes({0, 2})}, {"{1,2}", Axes({1, 2})},
                                        {"{0,1,2}", Axes({0, 1, 2})}, {"{-1,0}", Axes({-1, 0})}};

BOOST_AUTO_TEST_CASE(reductions_over_axis_sets) {
  uint64_t seed = 10;
  const Shape s = {2, 3, 4};
  for (const auto& row : rows())
    for (const auto& ax : kAxisSets)
      for (bool keepdim : {false, true}) {
        ++seed;
        Tensor x = row.gen(s, seed);
        Axes axes = ax.axes;
        auto op = row.op;
        gradcheck1(row.name + " axes=" + ax.name + " keepdim=" + (keepdim ? "true" : "false"),
                   [op, axes, keepdim](const Tensor& t) { return op(t, axes, keepdim); }, x, seed);
      }
}

// Reductions of 1-D and 0-d tensors, and of a size-1 axis.
BOOST_AUTO_TEST_CASE(reductions_small_ranks) {
  uint64_t seed = 500;
  for (const auto& row : rows())
    for (const Shape& s : {Shape{5}, Shape{}, Shape{3, 1}}) {
      ++seed;
      auto op = row.op;
      // var with correction 1 over one element is 0/0 (NaN), as in NumPy: not a gradient question.
      const bool unbiased_var = row.name == "var";
      if (!(unbiased_var && numel(s) == 1))
        gradcheck1(row.name + " shape " + shape_text(s) + " axes=all",
                   [op](const Tensor& t) { return op(t, Axes::every(), false); }, row.gen(s, seed), seed);
      if (!s.empty() && !(unbiased_var && s.back() == 1))
        gradcheck1(row.name + " shape " + shape_text(s) + " axes=-1 keepdim",
                   [op](const Tensor& t) { return op(t, Axes(-1), true); }, row.gen(s, seed), seed);
    }
}

BOOST_AUTO_TEST_CASE(softmax_log_softmax_cumsum_every_axis) {
  uint64_t seed = 1000;
  const Shape s = {2, 3, 4};
  for (int64_t axis : {0, 1, 2, -1, -3}) {
    seed += 3;
    std::string a = " axis=" + std::to_string(axis);
    gradcheck1("softmax" + a, [axis](const Tensor& t) { return t.softmax(axis); }, normal(s, seed), seed);
    gradcheck1("log_softmax" + a, [axis](const Tensor& t) { return t.log_softmax(axis); }, normal(s, seed + 1), seed);
    gradcheck1("cumsum" + a, [axis](const Tensor& t) { return t.cumsum(axis); }, normal(s, seed + 2), seed);
  }
  gradcheck1("softmax 1-D", [](const Tensor& t) { return t.softmax(); }, normal({6}, 7), 7);
  gradcheck1("log_softmax 1-D", [](const Tensor& t) { return t.log_softmax(0); }, normal({6}, 8), 8);
  gradcheck1("cumsum 1-D", [](const Tensor& t) { return t.cumsum(); }, normal({6}, 9), 9);
  // Large logits: the max shift must keep the gradient exact.
  gradcheck1("softmax of logits around 50", [](const Tensor& t) { return t.softmax(-1); }, uniform({3, 4}, 10, 48, 52), 10);
  gradcheck1("cross entropy: -sum(one_hot * log_softmax)", [](const Tensor& t) {
    Tensor labels = Tensor::from_vector<int64_t>({2, 0, 3}, {3});
    return -(labels.one_hot(4).cast(DType::F64) * t.log_softmax(-1)).sum();
  }, normal({3, 4}, 11), 11);
}

// Reductions composed with each other and with broadcasting (normalisation layers).
BOOST_AUTO_TEST_CASE(composed_reductions) {
  Tensor x = normal({3, 5}, 2000);
  gradcheck1("standardize: (x - mean) / sqrt(var + 1e-5)", [](const Tensor& t) {
    return (t - t.mean(-1, true)) / (t.var(-1, true, 0) + 1e-5).sqrt();
  }, x, 2000);
  gradcheck1("sum of squares / prod of exp", [](const Tensor& t) {
    return t.square().sum(0) / t.exp().prod(0);
  }, x, 2001);
  gradcheck1("max - min over rows", [](const Tensor& t) { return t.max(1) - t.min(1); }, distinct({3, 5}, 2002), 2002);
  gradcheck1("logsumexp of cumsum", [](const Tensor& t) { return t.cumsum(1).logsumexp(0); }, x, 2003);
  gradcheck1("mean(softmax * x)", [](const Tensor& t) { return (t.softmax(0) * t).mean(); }, x, 2004);
}

}  // namespace
