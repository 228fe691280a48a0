// The scheduler: kernel counts that matter under each fusion policy, identical results under
// every policy (against a naive reference computed here), statistics, and fusion configs.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "ravel/ravel.hpp"

#include "policy_scope.hpp"

#include "test_support.hpp"

using ravel::FusionPolicy;
using ravel::Tensor;

namespace {

// Kernels launched to realize `t` (its inputs must already be realized).
int64_t kernels(const Tensor& t) {
  t.realize();
  return ravel::last_realization_stats().kernels();
}

std::vector<float> data(int n, float scale, float shift) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = std::sin(0.37f * i + shift) * scale;
  return v;
}
}  // namespace

BOOST_AUTO_TEST_CASE(exp_mul_add_is_one_kernel_and_correct) {
  auto av = data(600, 2, 0), bv = data(600, 1, 1), cv = data(600, 3, 2);
  for (auto p : kPolicies) {
    BOOST_TEST_CONTEXT("policy " << ravel::fusion_policy_name(p)) {
      PolicyScope scope(p);
      Tensor a = Tensor::from_vector(av, {20, 30}), b = Tensor::from_vector(bv, {20, 30}),
             c = Tensor::from_vector(cv, {20, 30});
      Tensor d = a.exp() * b + c;
      int64_t k = kernels(d);
      if (p != FusionPolicy::None) BOOST_TEST(k == 1);
      else BOOST_TEST(k > 1);  // one kernel per primitive
      auto got = d.to_vector<float>();
      for (int i = 0; i < 600; ++i) BOOST_TEST(got[i] == std::exp(av[i]) * bv[i] + cv[i], boost::test_tools::tolerance(1e-5f));
    }
  }
}

BOOST_AUTO_TEST_CASE(row_softmax_is_at_most_three_kernels) {
  auto xv = data(8 * 50, 4, 0.5f);
  for (auto p : kPolicies) {
    BOOST_TEST_CONTEXT("policy " << ravel::fusion_policy_name(p)) {
      PolicyScope scope(p);
      Tensor x = Tensor::from_vector(xv, {8, 50});
      Tensor s = x.softmax(-1);
      int64_t k = kernels(s);
      if (p >= FusionPolicy::Reduce) BOOST_TEST(k <= 3);
      auto got = s.to_vector<float>();
      for (int r = 0; r < 8; ++r) {
        double m = -1e30, z = 0;
        for (int j = 0; j < 50; ++j) m = std::max<double>(m, xv[r * 50 + j]);
        for (int j = 0; j < 50; ++j) z += std::exp(xv[r * 50 + j] - m);
        for (int j = 0; j < 50; ++j)
          BOOST_TEST(got[r * 50 + j] == std::exp(xv[r * 50 + j] - m) / z, boost::test_tools::tolerance(1e-5));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(linear_relu_is_one_contraction_under_full) {
  const int n = 9, k = 13, m = 6;
  auto xv = data(n * k, 1, 0), wv = data(k * m, 1, 3), bv = data(m, 1, 5);
  for (auto p : kPolicies) {
    BOOST_TEST_CONTEXT("policy " << ravel::fusion_policy_name(p)) {
      PolicyScope scope(p);
      Tensor x = Tensor::from_vector(xv, {n, k}), w = Tensor::from_vector(wv, {k, m}), b = Tensor::from_vector(bv, {m});
      Tensor y = (x.matmul(w) + b).relu();
      y.realize();
      auto st = ravel::last_realization_stats();
      if (p == FusionPolicy::Full) {
        BOOST_TEST(st.kernels() == 1);
        BOOST_TEST(st.contractions == 1);
      } else if (p == FusionPolicy::Reduce) {
        BOOST_TEST(st.contractions == 1);  // the epilogue is a separate elementwise kernel
        BOOST_TEST(st.programs == 1);
      } else {
        BOOST_TEST(st.contractions == 0);  // product and sum are kernels of their own
      }
      auto got = y.to_vector<float>();
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < m; ++j) {
          double acc = bv[j];
          for (int t = 0; t < k; ++t) acc += double(xv[i * k + t]) * wv[t * m + j];
          BOOST_TEST(got[i * m + j] == std::max(acc, 0.0), boost::test_tools::tolerance(1e-5));
        }
    }
  }
}

// Note [Dot products are reductions]: sum(x * y) over every axis but one both operands share
// (BatchNorm's per-channel sums over [N, H, W]) has neither an M nor an N axis, so it is a fused
// reduction, not a contraction, under every policy; a product with an M axis stays a
// contraction, and so does a batch of dot products over one summed axis (the 1.0 form).
BOOST_AUTO_TEST_CASE(batched_dot_products_are_reductions) {
  const int n = 3, c = 5, h = 4, w = 6;
  auto xv = data(n * c * h * w, 1, 0), yv = data(n * c * h * w, 1, 2);
  for (auto p : kPolicies) {
    BOOST_TEST_CONTEXT("policy " << ravel::fusion_policy_name(p)) {
      PolicyScope scope(p);
      Tensor x = Tensor::from_vector(xv, {n, c, h, w}), y = Tensor::from_vector(yv, {n, c, h, w});
      Tensor s = (x * y).sum({0, 2, 3}, true);  // [1, C, 1, 1]
      s.realize();
      BOOST_TEST(ravel::last_realization_stats().contractions == 0);
      auto got = s.to_vector<float>();
      BOOST_TEST_REQUIRE(got.size() == size_t(c));
      for (int ci = 0; ci < c; ++ci) {
        double acc = 0;
        for (int b = 0; b < n; ++b)
          for (int e = 0; e < h * w; ++e) acc += double(xv[(b * c + ci) * h * w + e]) * yv[(b * c + ci) * h * w + e];
        BOOST_TEST(got[ci] == acc, boost::test_tools::tolerance(1e-5));
      }
      // The same product with x broadcast along a kept axis of y's is a GEMM (M = that axis).
      Tensor g = (x.reshape({n, c, h * w}).unsqueeze(1) * y.reshape({n, c, h * w}).unsqueeze(0)).sum({2, 3});
      g.realize();
      if (p >= FusionPolicy::Reduce) BOOST_TEST(ravel::last_realization_stats().contractions == 1);
      Tensor d = (x.reshape({n * c, h * w}) * y.reshape({n * c, h * w})).sum(1);  // one summed axis
      d.realize();
      if (p >= FusionPolicy::Reduce) BOOST_TEST(ravel::last_realization_stats().contractions == 1);
      auto dv = d.to_vector<float>();
      for (int r = 0; r < n * c; ++r) {
        double acc = 0;
        for (int e = 0; e < h * w; ++e) acc += double(xv[r * h * w + e]) * yv[r * h * w + e];
        BOOST_TEST(dv[r] == acc, boost::test_tools::tolerance(1e-5));
      }
    }
  }
}

// A training step's relu layer: relu's derivative reads the output y (Note [relu at 0]), so the
// pre-activation x @ w + b has one reader and lives only inside the contraction's epilogue:
// forward 1 kernel (contraction, bias, relu; stores y), backward 2 (the masked cotangent, then
// x^T @ it). With a derivative reading the pre-activation it was 4: the contraction's result
// stored for the backward, and relu a kernel of its own.
BOOST_AUTO_TEST_CASE(relu_layer_step_does_not_store_the_pre_activation) {
  const int n = 9, k = 13, m = 6;
  auto xv = data(n * k, 1, 0), wv = data(k * m, 1, 3), bv = data(m, 1, 5), uv = data(n * m, 1, 7);
  PolicyScope scope(FusionPolicy::Full);
  Tensor x = Tensor::from_vector(xv, {n, k}), w = Tensor::from_vector(wv, {k, m}), b = Tensor::from_vector(bv, {m});
  Tensor u = Tensor::from_vector(uv, {n, m});
  Tensor y = (x.matmul(w) + b).relu();
  Tensor dw = ravel::gradients((y * u).sum(), {w})[0];
  ravel::realize({y, dw});
  auto st = ravel::last_realization_stats();
  BOOST_TEST(st.kernels() == 3);
  BOOST_TEST(st.contractions == 2);
  // dw[t][j] = sum_i x[i][t] * u[i][j] * (z[i][j] > 0), z = x @ w + b, in double.
  std::vector<double> z(n * m);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < m; ++j) {
      z[i * m + j] = bv[j];
      for (int t = 0; t < k; ++t) z[i * m + j] += double(xv[i * k + t]) * wv[t * m + j];
    }
  auto got = dw.to_vector<float>();
  for (int t = 0; t < k; ++t)
    for (int j = 0; j < m; ++j) {
      double want = 0;
      for (int i = 0; i < n; ++i) want += z[i * m + j] > 0 ? double(xv[i * k + t]) * uv[i * m + j] : 0.0;
      BOOST_TEST(got[t * m + j] == want, boost::test_tools::tolerance(1e-4));
    }
}

BOOST_AUTO_TEST_CASE(ten_movement_ops_then_add_is_one_kernel) {
  auto av = data(24, 1, 0), bv = data(24, 1, 1);
  for (auto p : kPolicies) {
    BOOST_TEST_CONTEXT("policy " << ravel::fusion_policy_name(p)) {
      PolicyScope scope(p);
      Tensor a = Tensor::from_vector(av, {4, 6}), b = Tensor::from_vector(bv, {6, 4});
      // 10 movement ops: each only changes the view.
      Tensor v = a.reshape({2, 2, 6}).permute({2, 0, 1}).flip(0).reshape({6, 4}).pad({{1, 1}, {0, 0}})
                     .shrink({{1, 7}, {0, 4}}).flip(1).unsqueeze(0).expand({1, 6, 4}).squeeze(0);
      Tensor r = v + b;
      BOOST_TEST(kernels(r) == 1);
      // Reference: index maps written out directly.
      auto got = r.to_vector<float>();
      for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 4; ++j) {
          // v[i][j] = flipped-column of P[i][3-j], P = permute(a as [2,2,6] -> [6,2,2]) flipped on axis 0
          int jj = 3 - j, c = 5 - i, i0 = jj / 2, i1 = jj % 2;  // P[c][i0][i1] = a3[i0][i1][c]
          float av_ = av[(i0 * 2 + i1) * 6 + c];
          BOOST_TEST(got[i * 4 + j] == av_ + bv[i * 4 + j]);
        }
    }
  }
}

BOOST_AUTO_TEST_CASE(statistics_count_bytes) {
  PolicyScope scope(FusionPolicy::Full);
  Tensor a = Tensor::ones({1000}), b = Tensor::from_vector(data(1000, 1, 0), {1000});
  b.realize();
  ravel::reset_stats();
  Tensor c = b + b.exp();  // one kernel: reads b once (deduplicated load), writes c
  c.realize();
  auto st = ravel::last_realization_stats();
  BOOST_TEST(st.programs == 1);
  BOOST_TEST(st.bytes_written == 4000);
  BOOST_TEST(st.bytes_allocated == 4000);
  BOOST_TEST(st.bytes_read == 4000);
  BOOST_TEST(st.execute_seconds >= 0.0);
  BOOST_TEST(ravel::cumulative_stats().realizations == 1);
}

BOOST_AUTO_TEST_CASE(policy_names_and_env_override) {
  BOOST_TEST(ravel::parse_fusion_policy("reduce") == FusionPolicy::Reduce);
  BOOST_CHECK_EXCEPTION(ravel::parse_fusion_policy("fastest"), ravel::ConfigError, [](const ravel::ConfigError& e) {
    return std::string(e.what()).find("fastest") != std::string::npos &&
           std::string(e.what()).find("none, elementwise, reduce, full") != std::string::npos;
  });
  ravel::set_fusion_options(ravel::FusionOptions{});
  // Without an explicit override, RAVEL_FUSION picks the policy.
  ::setenv("RAVEL_FUSION", "none", 1);
  BOOST_TEST(ravel::fusion_options().policy == FusionPolicy::Full);  // override still set
  ::unsetenv("RAVEL_FUSION");
}

BOOST_AUTO_TEST_CASE(fusion_config_errors_name_the_json_path) {
  auto write = [](const std::string& text) {
    std::string path = (scratch_dir() / "ravel_fusion_test_config.json").string();
    std::ofstream(path) << text;
    return path;
  };
  auto expect = [&](const std::string& text, const std::string& needle) {
    ravel::RuntimeOptions o;
    o.config_path = write(text);
    o.use_environment = false;
    BOOST_CHECK_EXCEPTION(ravel::Runtime tmp(o), ravel::ConfigError, [&](const ravel::ConfigError& e) {
      bool ok = std::string(e.what()).find(needle) != std::string::npos;
      if (!ok) BOOST_TEST_MESSAGE("message was: " << e.what());
      return ok;
    });
  };
  expect(R"({"fusion": {"policy": "fastest"}})", "$.fusion.policy");
  expect(R"({"fusion": {"policy": 3}})", "$.fusion.policy");
  expect(R"({"fusion": {"max_instructions": 1}})", "$.fusion.max_instructions");
  expect(R"({"fusion": {"max_instruction": 10}})", "did you mean \"max_instructions\"");
  expect(R"({"fusion": )", "malformed JSON");
  ravel::RuntimeOptions o;
  o.config_path = write(R"({"fusion": {"policy": "elementwise", "max_inputs": 4}})");
  o.use_environment = false;
  ravel::Runtime rt(o);
  BOOST_TEST(rt.configured_fusion().policy == FusionPolicy::Elementwise);
  BOOST_TEST(rt.configured_fusion().max_inputs == 4);
}

BOOST_AUTO_TEST_CASE(limits_split_long_programs) {
  ravel::FusionOptions o;
  o.max_instructions = 4;
  ravel::set_fusion_options(o);
  Tensor x = Tensor::from_vector(data(100, 1, 0), {100});
  x.realize();
  Tensor y = x;
  for (int i = 0; i < 20; ++i) y = y * 1.01 + 0.5;  // 40 elementwise ops
  int64_t k = kernels(y);
  BOOST_TEST(k >= 10);  // at most 4 instructions' worth of ops per kernel
  auto got = y.to_vector<float>();
  auto xv = data(100, 1, 0);
  for (int i = 0; i < 100; ++i) {
    double v = xv[i];
    for (int r = 0; r < 20; ++r) v = v * 1.01 + 0.5;
    BOOST_TEST(got[i] == v, boost::test_tools::tolerance(1e-4));
  }
  ravel::set_fusion_options(ravel::FusionOptions{});
}

// The makemore training step (examples/makemore), forward + autodiff gradients + SGD update
// realized together: docs/performance.md ("Kernels per makemore step") lists the kernels it
// takes under `full` today (28) and why; the bound leaves room for 1 more before this fails.
BOOST_AUTO_TEST_CASE(makemore_step_kernel_budget) {
  PolicyScope scope(FusionPolicy::Full);
  const int64_t batch = 64, vocab = 27, block = 3, embed = 10, hidden = 200;
  Tensor ctx = (Tensor::rand({batch, block}, 1) * double(vocab)).cast(ravel::DType::I64);
  Tensor tgt = (Tensor::rand({batch}, 2) * double(vocab)).cast(ravel::DType::I64);
  std::vector<Tensor> p = {Tensor::randn({vocab, embed}, 3), Tensor::randn({block * embed, hidden}, 4) * 0.1,
                           Tensor::zeros({hidden}), Tensor::randn({hidden, vocab}, 5) * 0.1, Tensor::zeros({vocab})};
  for (auto& t : p) t = Tensor().assign(t);
  ravel::realize({ctx, tgt});
  Tensor emb = ctx.flatten().one_hot(vocab).matmul(p[0]).reshape({batch, block * embed});
  Tensor h = (emb.matmul(p[1]) + p[2]).tanh();
  Tensor loss = ravel::nn::cross_entropy(h.matmul(p[3]) + p[4], tgt);
  std::vector<Tensor> grads = ravel::gradients(loss, p);
  std::vector<Tensor> out{loss};
  for (int i = 0; i < 5; ++i) out.push_back(p[i] - grads[i] * 0.1);
  ravel::realize(out);
  auto st = ravel::last_realization_stats();
  BOOST_TEST(st.kernels() <= 29);
  // 3 forward products and their gradients (the picked logit is a contraction only where the
  // device does not chain MAX and SUM: Note [Cross-entropy as one row chain])
  BOOST_TEST(st.contractions >= 8);
  BOOST_TEST(std::isfinite(loss.item<float>()));
}

// Note [Fusion]'s recomputation bound counts every extra copy: a value of a few instructions read
// by two reductions is recomputed in both (2 kernels), the same value read by four is stored
// once and read back (5 kernels: at 8 instructions per value, three extra copies would add more
// work than the limit allows). The values agree with a host loop either way.
BOOST_AUTO_TEST_CASE(recomputation_counts_every_extra_copy) {
  PolicyScope scope(FusionPolicy::Full);
  Tensor x = Tensor::linspace(-1, 1, 1000);
  x.realize();
  Tensor v = (x * 2.0 + 1.0) * 0.5 - 0.25;  // a few instructions, one input
  auto count = [&](int readers) {
    std::vector<Tensor> outs;
    for (int r = 1; r <= readers; ++r) outs.push_back((v + double(r)).max());  // not a product: no GEMM
    ravel::realize(outs);
    const int64_t k = ravel::last_realization_stats().kernels();
    auto xv = x.to_vector<float>();
    for (int r = 1; r <= readers; ++r) {
      double want = -1e30;
      for (float e : xv) want = std::max(want, (e * 2.0 + 1.0) * 0.5 - 0.25 + r);
      BOOST_TEST(outs[r - 1].item<float>() == want, boost::test_tools::tolerance(1e-4));
    }
    return k;
  };
  BOOST_TEST(count(2) == 2);
  BOOST_TEST(count(4) == 5);
}

// Note [Uses inside one kernel]: a value whose readers all end up in one kernel is evaluated
// there, however many ops read it. `e` (more than max_recompute_instructions) is read by two ops
// of one elementwise kernel; before this, it was stored by a kernel of its own (2 kernels).
BOOST_AUTO_TEST_CASE(value_read_twice_inside_one_kernel_is_not_stored) {
  Tensor x = Tensor::linspace(-2, 2, 1000);
  x.realize();
  auto xv = x.to_vector<float>();
  for (FusionPolicy p : {FusionPolicy::Elementwise, FusionPolicy::Reduce, FusionPolicy::Full}) {
    PolicyScope scope(p);
    Tensor e = (x * 3.0 + 1.0).exp() * 0.5 + x.sin() * x.cos() - x * 0.25;
    Tensor y = (1.0 - e) / (e + 1.0);
    BOOST_TEST(kernels(y) == 1, "policy " << ravel::fusion_policy_name(p));
    auto got = y.to_vector<float>();
    for (size_t i = 0; i < xv.size(); ++i) {
      double v = xv[i], ev = std::exp(v * 3 + 1) * 0.5 + std::sin(v) * std::cos(v) - v * 0.25;
      // Absolute near y = 0 (e = 1), where f32 rounding of e's terms (~1e-7) is all that is left:
      // a relative bound there fails on any device whose exp/sin differ by an ulp (hip:0 did).
      const double want = (1 - ev) / (ev + 1);
      BOOST_TEST(std::abs(got[i] - want) <= 1e-5 * (1 + std::abs(want)), "x = " << v << ": " << got[i] << " vs " << want);
    }
  }
}

// The recomputation bound counts kernels, not reading ops: v (2 instructions) read by four ops
// of one reduction and three of another is recomputed once more (2 kernels); counted by reads it
// was six extra copies, over the bound, and stored (3 kernels).
BOOST_AUTO_TEST_CASE(recomputation_counts_kernels_not_reads) {
  PolicyScope scope(FusionPolicy::Full);
  Tensor x = Tensor::linspace(-1, 1, 1000);
  x.realize();
  Tensor v = x * 2.0 + 1.0;
  Tensor a = (v * v + v - v.sin() * v).max();
  Tensor b = (v + v * v * 2.0).sum();
  ravel::realize({a, b});
  BOOST_TEST(ravel::last_realization_stats().kernels() == 2);
  double wa = -1e30, wb = 0;
  for (float e : x.to_vector<float>()) {
    double w = e * 2.0 + 1.0;
    wa = std::max(wa, w * w + w - std::sin(w) * w);
    wb += w + w * w * 2;
  }
  BOOST_TEST(a.item<float>() == wa, boost::test_tools::tolerance(1e-4));
  BOOST_TEST(b.item<float>() == wb, boost::test_tools::tolerance(1e-4));
}

// Realizing the gradients of one graph one at a time. b1's gradient alone is a batch sum of
// tanh'(h) * (dy @ W2^T): the product is absorbed into the sum's contraction, and the planner
// also made it the epilogue of dy @ W2^T, which then ran in no kernel; under `full` the second
// realization threw InternalError "kernel input has no buffer" (Note [Absorbed products are no
// epilogue] in fusion.cpp). Each gradient is compared with the same gradient realized alone in
// a fresh graph under FusionPolicy::None (the sum of squares: a log_softmax gradient sums to
// zero), in order and in reverse order.
BOOST_AUTO_TEST_CASE(gradients_realized_one_at_a_time_under_every_policy) {
  const auto build = [] {
    Tensor x = Tensor::randn({16, 6}, 1, ravel::DType::F64);
    Tensor w1 = Tensor::randn({6, 10}, 2, ravel::DType::F64);
    Tensor b1 = Tensor::randn({10}, 3, ravel::DType::F64);
    Tensor w2 = Tensor::randn({10, 5}, 4, ravel::DType::F64);
    for (Tensor* t : {&w1, &b1, &w2}) t->realize();
    Tensor loss = ((x.matmul(w1) + b1).tanh().matmul(w2)).log_softmax(-1).sum();
    return ravel::gradients(loss, {w1, b1, w2});
  };
  std::vector<double> want;
  {
    PolicyScope scope(FusionPolicy::None);
    for (const Tensor& g : build()) want.push_back(g.square().sum().item<double>());
  }
  for (FusionPolicy p : kPolicies) {
    PolicyScope scope(p);
    std::vector<Tensor> g = build();
    for (size_t i = 0; i < g.size(); ++i)  // one realization per gradient, in order
      BOOST_CHECK_CLOSE(g[i].square().sum().item<double>(), want[i], 1e-9);
  }
  for (FusionPolicy p : kPolicies) {  // and in reverse order
    PolicyScope scope(p);
    std::vector<Tensor> g = build();
    for (size_t i = g.size(); i-- > 0;) BOOST_CHECK_CLOSE(g[i].square().sum().item<double>(), want[i], 1e-9);
  }
}
