// Derivatives through the collectives across ranks (Note [Derivatives across ranks] in
// core/src/distributed/collective_vjp.cpp): the objective is the sum of every rank's loss. Each
// rank's inputs and loss weights are known functions of its rank, so every expected gradient is
// a closed form computed here on the host from all ranks' values, without communicating. Runs as
// a world of one and under mpirun -np 2 and -np 4 (tests/distributed/CMakeLists.txt).
#include <algorithm>
#include <cmath>
#include <functional>

#include "ravel/autodiff.hpp"
#include "ravel/distributed.hpp"
#include "ravel/jit.hpp"
#include "ravel/ravel.hpp"
#include "test_support.hpp"

namespace dist = ravel::distributed;
using ravel::Shape;
using ravel::Tensor;

namespace {

constexpr int64_t kN = 6;

// Rank r's values: with repeats across ranks (ties for max and min) and zeros (for prod).
std::vector<double> xs(int r, int64_t n = kN) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = double((i * 5 + r * 3) % 4) - 1.0;  // -1, 0, 1, 2
  return v;
}
// Rank r's loss weights: L_r = sum(y * w_r).
std::vector<double> ws(int r, int64_t n = kN) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = 0.25 * double(i + 1) + double(r) * 0.5;
  return v;
}
Tensor t(const std::vector<double>& v) { return Tensor::from_vector(v, {int64_t(v.size())}); }
std::vector<double> sum_of_ws(int size, int64_t n = kN) {
  std::vector<double> s(static_cast<size_t>(n), 0.0);
  for (int r = 0; r < size; ++r)
    for (int64_t i = 0; i < n; ++i) s[i] += ws(r, n)[i];
  return s;
}
void expect_near(const Tensor& got, const std::vector<double>& want) {
  const std::vector<double> g = got.to_vector<double>();
  BOOST_REQUIRE_EQUAL(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) BOOST_TEST(std::abs(g[i] - want[i]) <= 1e-12 * (1 + std::abs(want[i])));
}
// d(sum_r L_r)/dx on this rank for L_r = sum(f(x) * w_r).
Tensor grad_of(const std::function<Tensor(const Tensor&)>& f, const Tensor& x, const Tensor& w) {
  return ravel::gradients((f(x) * w).sum(), {x})[0];
}

}  // namespace

BOOST_AUTO_TEST_SUITE(rank_gradients)

BOOST_AUTO_TEST_CASE(all_reduce_sum_sends_every_ranks_cotangent) {
  const int size = dist::world_size(), me = dist::rank();
  const Tensor g = grad_of([](const Tensor& x) { return dist::all_reduce(x); }, t(xs(me)), t(ws(me)));
  expect_near(g, sum_of_ws(size));
}

BOOST_AUTO_TEST_CASE(all_reduce_max_min_share_ties_and_prod_is_exact_at_zeros) {
  const int size = dist::world_size(), me = dist::rank();
  const std::vector<double> wsum = sum_of_ws(size);
  for (dist::ReduceOp op : {dist::ReduceOp::Max, dist::ReduceOp::Min, dist::ReduceOp::Prod}) {
    BOOST_TEST_CONTEXT("op " << int(op)) {
      const Tensor g = grad_of([op](const Tensor& x) { return dist::all_reduce(x, op); }, t(xs(me)), t(ws(me)));
      std::vector<double> want(kN);
      for (int64_t i = 0; i < kN; ++i) {
        const double mine = xs(me)[i];
        if (op == dist::ReduceOp::Prod) {
          double others = 1;
          for (int r = 0; r < size; ++r)
            if (r != me) others *= xs(r)[i];
          want[i] = wsum[i] * others;
          continue;
        }
        double best = mine;
        for (int r = 0; r < size; ++r) best = op == dist::ReduceOp::Max ? std::max(best, xs(r)[i]) : std::min(best, xs(r)[i]);
        int ties = 0;
        for (int r = 0; r < size; ++r) ties += xs(r)[i] == best;
        want[i] = mine == best ? wsum[i] / ties : 0.0;
      }
      expect_near(g, want);
    }
  }
}

BOOST_AUTO_TEST_CASE(all_gather_and_reduce_scatter_are_each_others_adjoints) {
  const int size = dist::world_size(), me = dist::rank();
  // all_gather: y = [x_0; ...], L_r = sum(y * w_r) with w_r of R * n; dx_r[i] = sum_s w_s[r n + i].
  const int64_t n = 3;
  const Tensor g1 = grad_of([](const Tensor& x) { return dist::all_gather(x); }, t(xs(me, n)), t(ws(me, size * n)));
  std::vector<double> want1(n);
  for (int64_t i = 0; i < n; ++i) want1[i] = sum_of_ws(size, size * n)[me * n + i];
  expect_near(g1, want1);
  // reduce_scatter(sum): y_r = block r of sum_s x_s, L_r = sum(y_r * w_r[n]); dx[b n + j] = w_b[j].
  const Tensor g2 = grad_of([](const Tensor& x) { return dist::reduce_scatter(x); }, t(xs(me, size * n)), t(ws(me, n)));
  std::vector<double> want2(static_cast<size_t>(size * n));
  for (int b = 0; b < size; ++b)
    for (int64_t j = 0; j < n; ++j) want2[b * n + j] = ws(b, n)[j];
  expect_near(g2, want2);
  // reduce_scatter(max): block b's cotangent w_b shared by the ranks holding the maximum.
  const Tensor g3 = grad_of([](const Tensor& x) { return dist::reduce_scatter(x, dist::ReduceOp::Max); },
                            t(xs(me, size * n)), t(ws(me, n)));
  std::vector<double> want3(static_cast<size_t>(size * n));
  for (int64_t k = 0; k < size * n; ++k) {
    double best = -1e300;
    int ties = 0;
    for (int r = 0; r < size; ++r) best = std::max(best, xs(r, size * n)[k]);
    for (int r = 0; r < size; ++r) ties += xs(r, size * n)[k] == best;
    want3[k] = xs(me, size * n)[k] == best ? ws(int(k / n), n)[k % n] / ties : 0.0;
  }
  expect_near(g3, want3);
}

BOOST_AUTO_TEST_CASE(broadcast_sends_the_cotangents_to_the_root_only) {
  const int size = dist::world_size(), me = dist::rank();
  const int root = size - 1;
  const Tensor x = t(xs(me));
  const std::vector<Tensor> g = ravel::gradients((dist::broadcast(x, root) * t(ws(me))).sum(), {x});
  expect_near(g[0], me == root ? sum_of_ws(size) : std::vector<double>(kN, 0.0));
}

// An eager collective on a tensor with its own buffer (an upload, a kernel's realized result)
// sets its derivative on its result's own node; on any other input (a traced argument, a view)
// it takes an alias (Note [A derivative on the result's own node], core/src/tensor/custom_vjp.hpp).
// Every path gives the same closed form, through gradients() and through backward().
BOOST_AUTO_TEST_CASE(every_eager_path_carries_the_all_reduce_derivative) {
  const int size = dist::world_size(), me = dist::rank();
  const Tensor w = t(ws(me));
  const std::function<Tensor(const Tensor&)> ar = [](const Tensor& x) { return dist::all_reduce(x); };
  BOOST_TEST_CONTEXT("an uploaded leaf") { expect_near(grad_of(ar, t(xs(me)), w), sum_of_ws(size)); }
  BOOST_TEST_CONTEXT("a kernel's realized result") {
    const Tensor x = t(xs(me));
    const Tensor computed = (x * 2.0).realize();
    expect_near(ravel::gradients((dist::all_reduce(computed) * w).sum(), {x})[0], [&] {
      std::vector<double> v = sum_of_ws(size);
      for (double& e : v) e *= 2.0;
      return v;
    }());
  }
  BOOST_TEST_CONTEXT("a traced argument") {
    const ravel::UnaryFn loss = [&](const Tensor& x) { return (dist::all_reduce(x) * w).sum(); };
    expect_near(ravel::grad(loss)(t(xs(me))), sum_of_ws(size));
  }
  BOOST_TEST_CONTEXT("a view") {
    const Tensor x = t(xs(me, 2 * kN));
    const Tensor g = ravel::gradients((dist::all_reduce(x.slice(0, 0, kN)) * w).sum(), {x})[0];
    std::vector<double> want = sum_of_ws(size);
    want.resize(2 * kN, 0.0);
    expect_near(g, want);
  }
  BOOST_TEST_CONTEXT("backward() into a leaf that requires grad") {
    Tensor x = t(xs(me));
    x.requires_grad_();
    (dist::all_reduce(x) * w).sum().backward();
    BOOST_REQUIRE(x.grad().defined());
    expect_near(x.grad(), sum_of_ws(size));
  }
}

// Under a NoGradGuard the result carries no derivative on either path, as with_custom_vjp's: the
// loss then does not depend on x through it, and x's gradient is zeros (in a world of one
// all_reduce returns x itself, so the loss is x's).
BOOST_AUTO_TEST_CASE(a_result_made_without_grad_carries_no_derivative) {
  const int size = dist::world_size(), me = dist::rank();
  const Tensor x = t(xs(me));
  Tensor y;
  {
    ravel::NoGradGuard no_grad;
    y = dist::all_reduce(x);
  }
  expect_near(ravel::gradients((y * t(ws(me))).sum(), {x})[0], size == 1 ? ws(me) : std::vector<double>(kN, 0.0));
}

// requires_grad_() on a collective's result makes a new leaf on its data, as on any computed
// tensor: backward() stops there and x gets nothing. (In a world of one all_reduce returns x
// itself, which is then that leaf.)
BOOST_AUTO_TEST_CASE(a_result_made_a_leaf_stops_the_gradient) {
  const int size = dist::world_size(), me = dist::rank();
  Tensor x = t(xs(me));
  x.requires_grad_();
  Tensor y = dist::all_reduce(x);
  y.requires_grad_();
  (y * t(ws(me))).sum().backward();
  BOOST_REQUIRE(y.grad().defined());
  expect_near(y.grad(), ws(me));
  BOOST_TEST(x.grad().defined() == (size == 1));
}

// Second order: L_r = c_r sum(y^2), y = all_reduce(x). The gradient is 2 C y on every rank
// (C = sum_s c_s); differentiating sum_r <grad_r, v_r> again gives 2 C sum_s v_s.
BOOST_AUTO_TEST_CASE(gradients_of_gradients_cross_ranks_again) {
  const int size = dist::world_size(), me = dist::rank();
  const Tensor x = t(xs(me));
  const double c = 1.0 + me;
  const Tensor y = dist::all_reduce(x);
  const Tensor g = ravel::gradients((y * y).sum() * c, {x})[0];
  double csum = 0;
  std::vector<double> ysum(kN, 0.0);
  for (int r = 0; r < size; ++r) {
    csum += 1.0 + r;
    for (int64_t i = 0; i < kN; ++i) ysum[i] += xs(r)[i];
  }
  std::vector<double> want_g(kN);
  for (int64_t i = 0; i < kN; ++i) want_g[i] = 2 * csum * ysum[i];
  expect_near(g, want_g);
  const Tensor gg = ravel::gradients((g * t(ws(me))).sum(), {x})[0];
  std::vector<double> want_gg = sum_of_ws(size);
  for (double& v : want_gg) v *= 2 * csum;
  expect_near(gg, want_gg);
}

// Megatron-style tensor parallelism across ranks: W1 split by columns and W2 by rows over the
// ranks, y = all_reduce(tanh(x W1_r) W2_r), every rank's loss scaled by 1/R. The gradients of each
// rank's slices equal the slices of the whole model's gradients computed in one process (here,
// with no collective), and a Jit replays the step with new inputs.
BOOST_AUTO_TEST_CASE(tensor_parallel_mlp_matches_one_process) {
  const int size = dist::world_size(), me = dist::rank();
  const int64_t B = 5, D = 3, H = 8, O = 2, h = H / size;
  const Tensor w1 = Tensor::randn({D, H}, 11, ravel::DType::F64), w2 = Tensor::randn({H, O}, 12, ravel::DType::F64);
  const Tensor w1_mine = w1.slice(1, me * h, (me + 1) * h).contiguous();
  const Tensor w2_mine = w2.slice(0, me * h, (me + 1) * h).contiguous();
  auto loss = [](const Tensor& x, const Tensor& target, const Tensor& a, const Tensor& b, bool split, int ranks) {
    Tensor y = (x.matmul(a).tanh()).matmul(b);
    if (split) y = dist::all_reduce(y);
    const Tensor d = y - target;
    return (d * d).mean() * (split ? 1.0 / ranks : 1.0);
  };
  ravel::Jit step([&](const std::vector<Tensor>& in) {
    return ravel::gradients(loss(in[0], in[1], in[2], in[3], true, size), {in[2], in[3]});
  });
  for (uint64_t round = 0; round < 3; ++round) {
    const Tensor x = Tensor::randn({B, D}, 20 + round, ravel::DType::F64);
    const Tensor target = Tensor::randn({B, O}, 40 + round, ravel::DType::F64);
    const std::vector<Tensor> whole = ravel::gradients(loss(x, target, w1, w2, false, 1), {w1, w2});
    const std::vector<Tensor> mine = step({x, target, w1_mine, w2_mine});
    const std::vector<double> want1 = whole[0].slice(1, me * h, (me + 1) * h).contiguous().to_vector<double>();
    const std::vector<double> want2 = whole[1].slice(0, me * h, (me + 1) * h).contiguous().to_vector<double>();
    expect_near(mine[0], want1);
    expect_near(mine[1], want2);
  }
  BOOST_TEST(step.captures() == 1);
  BOOST_TEST(step.replays() == 2);
}

BOOST_AUTO_TEST_SUITE_END()
