// Mixed-precision training (ravel/amp.hpp): nn::Autocast against the explicit casts it stands
// for, and nn::GradScaler's scale sequence, skips and unscaled steps against hand computations.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "ravel/ravel.hpp"

using ravel::DType;
using ravel::Tensor;
namespace nn = ravel::nn;

namespace {
std::vector<float> floats(const Tensor& t) { return t.to_vector<float>(); }
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(autocast)

BOOST_AUTO_TEST_CASE(linear_computes_in_the_half_dtype_from_f32_parameters) {
  nn::Linear lin(5, 3, 7);
  Tensor x = Tensor::randn({4, 5}, 8);
  for (DType d : {DType::F16, DType::BF16}) {
    BOOST_TEST_CONTEXT(ravel::dtype_name(d)) {
      Tensor y;
      {
        nn::Autocast guard(d);
        BOOST_CHECK(nn::autocast_dtype() == d);
        y = lin(x);
      }
      BOOST_CHECK(!nn::autocast_dtype().has_value());
      BOOST_CHECK(y.dtype() == d);
      BOOST_CHECK(lin.weight.dtype() == DType::F32);
      // The same as the explicit casts, bit for bit.
      Tensor want = x.cast(d).matmul(lin.weight.cast(d)) + lin.bias.cast(d);
      BOOST_CHECK(same_bits(floats(y), floats(want)));
      // Gradients reach the f32 parameters in f32.
      lin.zero_grad();
      y.cast(DType::F32).square().sum().backward();
      BOOST_CHECK(lin.weight.grad().dtype() == DType::F32);
      BOOST_CHECK(lin.bias.grad().dtype() == DType::F32);
    }
  }
  // Outside a guard nothing changes.
  BOOST_CHECK(lin(x).dtype() == DType::F32);
}

BOOST_AUTO_TEST_CASE(losses_and_norms_widen_to_f32_embedding_narrows) {
  nn::Autocast guard(DType::BF16);
  Tensor logits = Tensor::randn({6, 4}, 3).cast(DType::BF16);
  Tensor targets = Tensor::from_vector<int64_t>({0, 1, 2, 3, 0, 1}, {6});
  Tensor loss = nn::cross_entropy(logits, targets);
  BOOST_CHECK(loss.dtype() == DType::F32);
  BOOST_CHECK_CLOSE(loss.item<double>(), nn::cross_entropy(logits.cast(DType::F32), targets).item<double>(), 1e-4);
  BOOST_CHECK(nn::mse_loss(logits, logits * 2.0).dtype() == DType::F32);
  nn::LayerNorm ln(4);
  BOOST_CHECK(ln(logits).dtype() == DType::F32);
  nn::BatchNorm1d bn(4);
  BOOST_CHECK(bn(logits).dtype() == DType::F32);
  nn::Embedding emb(10, 3, 1);
  Tensor e = emb(Tensor::from_vector<int64_t>({1, 9, 1}, {3}));
  BOOST_CHECK(e.dtype() == DType::BF16);
  // Rows of the f32 table rounded once to bf16.
  std::vector<float> rows = floats(e), table = floats(emb.weight.cast(DType::BF16));
  for (int k = 0; k < 3; ++k) {
    BOOST_CHECK_EQUAL(rows[k], table[1 * 3 + k]);
    BOOST_CHECK_EQUAL(rows[3 + k], table[9 * 3 + k]);
  }
}

BOOST_AUTO_TEST_CASE(guards_nest_disable_and_stay_on_their_thread) {
  nn::Autocast outer(DType::F16);
  {
    nn::Autocast inner(DType::BF16);
    BOOST_CHECK(nn::autocast_dtype() == DType::BF16);
    {
      nn::Autocast off(DType::BF16, false);
      BOOST_CHECK(!nn::autocast_dtype().has_value());
    }
    BOOST_CHECK(nn::autocast_dtype() == DType::BF16);
  }
  BOOST_CHECK(nn::autocast_dtype() == DType::F16);
  bool other_thread_sees_one = true;
  std::thread([&] { other_thread_sees_one = nn::autocast_dtype().has_value(); }).join();
  BOOST_CHECK(!other_thread_sees_one);
  BOOST_CHECK_THROW(nn::Autocast(DType::F32), ravel::DTypeError);
  BOOST_CHECK_THROW(nn::Autocast(DType::I8), ravel::DTypeError);
  // Integer tensors are never cast.
  BOOST_CHECK(nn::autocast_operand(Tensor::from_vector<int64_t>({1}, {1})).dtype() == DType::I64);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(grad_scaler)

// loss = sum(p * c): gradient c. With c = 1e38 the scaled gradient (c * S >= 8e38) is inf in
// f32, so that step must be skipped. Steps marked 'O' overflow, 'G' are good.
const char kPattern[] = "GGOGGGOOGGG";

Tensor coefficients(char kind) {
  return kind == 'O' ? Tensor::from_vector<float>({1e38f, 1e38f}, {2}) : Tensor::from_vector<float>({0.5f, -1.25f}, {2});
}

BOOST_AUTO_TEST_CASE(scale_sequence_skips_and_sgd_momentum_by_hand) {
  nn::GradScaler::Options o;
  o.init_scale = 8, o.growth_factor = 2, o.backoff_factor = 0.5, o.growth_interval = 3;
  nn::GradScaler scaler(o);
  Tensor p = Tensor::from_vector<float>({1, 2}, {2}).requires_grad_();
  nn::SGD sgd({&p}, 0.1, 0.9);
  // By hand (PyTorch's _amp_update_scale_ with interval 3): G G | O: 8 -> 4 | G G G: 4 -> 8 |
  // O: 4 | O: 2 | G G G: 2 -> 4. Trackers count the good steps since the last change.
  const double scales[] = {8, 8, 4, 4, 4, 8, 4, 2, 2, 2, 4};
  const int64_t trackers[] = {1, 2, 0, 1, 2, 0, 0, 0, 1, 2, 0};
  double x[2] = {1, 2}, v[2] = {0, 0};
  bool have_v = false;
  for (int s = 0; s < 11; ++s) {
    BOOST_TEST_CONTEXT("step " << s + 1 << " (" << kPattern[s] << ")") {
      Tensor c = coefficients(kPattern[s]);
      sgd.zero_grad();
      Tensor loss = (p * c).sum();
      scaler.scale(loss).backward();
      scaler.step(sgd, {loss});
      scaler.update();
      BOOST_CHECK_EQUAL(scaler.get_scale(), scales[s]);
      BOOST_CHECK_EQUAL(scaler.growth_tracker(), trackers[s]);
      if (kPattern[s] == 'G') {  // torch.optim.SGD: the first buffer is the gradient
        const double g[2] = {0.5, -1.25};
        for (int i = 0; i < 2; ++i) v[i] = have_v ? 0.9 * v[i] + g[i] : g[i], x[i] -= 0.1 * v[i];
        have_v = true;
      }
      std::vector<float> got = floats(p);
      for (int i = 0; i < 2; ++i) BOOST_CHECK_CLOSE(got[i], x[i], 1e-4);
    }
  }
}

BOOST_AUTO_TEST_CASE(adam_does_not_count_skipped_steps) {
  nn::GradScaler::Options o;
  o.init_scale = 4, o.growth_interval = 2;
  nn::GradScaler scaler(o);
  Tensor p = Tensor::from_vector<float>({1, 2}, {2}).requires_grad_();
  nn::Adam adam({&p}, 0.05);
  double x[2] = {1, 2}, m[2] = {0, 0}, v[2] = {0, 0};
  int t = 0;
  for (int s = 0; s < 11; ++s) {
    BOOST_TEST_CONTEXT("step " << s + 1 << " (" << kPattern[s] << ")") {
      adam.zero_grad();
      scaler.scale((p * coefficients(kPattern[s])).sum()).backward();
      scaler.step(adam);
      scaler.update();
      if (kPattern[s] == 'G') {
        ++t;
        const double g[2] = {0.5, -1.25};
        for (int i = 0; i < 2; ++i) {
          m[i] = 0.9 * m[i] + 0.1 * g[i];
          v[i] = 0.999 * v[i] + 0.001 * g[i] * g[i];
          x[i] -= 0.05 * (m[i] / (1 - std::pow(0.9, t))) / (std::sqrt(v[i] / (1 - std::pow(0.999, t))) + 1e-8);
        }
      }
      std::vector<float> got = floats(p);
      for (int i = 0; i < 2; ++i) BOOST_CHECK_CLOSE(got[i], x[i], 1e-3);
    }
  }
}

BOOST_AUTO_TEST_CASE(an_overflowing_f16_loss_is_skipped_not_applied) {
  // A Linear(3 -> 4) with zero parameters computes y = 0 in f16; against targets -10 the mean
  // squared error (in f32 under autocast) has dL/dy = 2 * 10 / 4 = 5 per element. Scaled by S it
  // reaches the f16 part of the graph as 5 S: inf for S = 65536, 32768, 16384 (f16's largest
  // finite value is 65504), finite (40960) for S = 8192. So three steps are skipped, leaving the
  // parameters bit for bit as they were, and the fourth applies the unscaled gradient,
  // dL/dW[i][j] = 5 x[i] and dL/db[j] = 5.
  nn::Linear lin(3, 4, 1);
  {
    ravel::NoGradGuard no_grad;
    lin.weight.assign(Tensor::zeros({3, 4}));
    lin.bias.assign(Tensor::zeros({4}));
  }
  Tensor x = Tensor::from_vector<float>({0.5f, -1.0f, 0.25f}, {1, 3});
  Tensor target = Tensor::full({1, 4}, -10.0);
  nn::SGD sgd(lin.parameters(), 0.01);
  nn::GradScaler scaler;  // PyTorch's defaults: 2^16, x2, x0.5, 2000
  BOOST_CHECK_EQUAL(scaler.get_scale(), 65536.0);
  const std::vector<float> w0 = floats(lin.weight), b0 = floats(lin.bias);
  const double expected_scales[] = {32768, 16384, 8192, 8192};
  for (int s = 0; s < 4; ++s) {
    BOOST_TEST_CONTEXT("step " << s + 1) {
      Tensor loss;
      {
        nn::Autocast guard(DType::F16);
        Tensor y = lin(x);
        BOOST_CHECK(y.dtype() == DType::F16);
        loss = nn::mse_loss(y, target);
      }
      BOOST_CHECK(loss.dtype() == DType::F32);
      sgd.zero_grad();
      scaler.scale(loss).backward();
      BOOST_CHECK_EQUAL(std::isinf(lin.bias.grad().to_vector<float>()[0]), s < 3);  // the scaled gradient
      scaler.step(sgd, {loss});
      scaler.update();
      BOOST_CHECK_EQUAL(scaler.get_scale(), expected_scales[s]);
      if (s < 3) {
        BOOST_CHECK(same_bits(floats(lin.weight), w0));
        BOOST_CHECK(same_bits(floats(lin.bias), b0));
      }
    }
  }
  // The applied step: W -= 0.01 * 5 x, b -= 0.01 * 5 (5 S = 40960 is exact in f16).
  const float xs[3] = {0.5f, -1.0f, 0.25f};
  std::vector<float> w = floats(lin.weight), b = floats(lin.bias);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) BOOST_CHECK_CLOSE(w[i * 4 + j], -0.01 * 5 * xs[i], 1e-4);
  for (int j = 0; j < 4; ++j) BOOST_CHECK_CLOSE(b[j], -0.01 * 5, 1e-4);
}

BOOST_AUTO_TEST_CASE(a_jit_replays_the_scaled_step) {
  // The skip is decided on the device, so a captured step replays it: the same parameters and
  // scales as running the step eagerly.
  auto run = [](bool jit) {
    nn::GradScaler::Options o;
    o.init_scale = 8, o.growth_interval = 3;
    nn::GradScaler scaler(o);
    Tensor p = Tensor::from_vector<float>({1, 2}, {2}).requires_grad_();
    nn::SGD sgd({&p}, 0.1);
    ravel::Jit::Function fn = [&](const std::vector<Tensor>& in) {
      Tensor loss = (p * in[0]).sum();
      sgd.zero_grad();
      scaler.scale(loss).backward();
      scaler.step(sgd, {loss});
      scaler.update();
      sgd.zero_grad();
      return std::vector<Tensor>{loss};
    };
    std::vector<Tensor*> state{&p};
    for (Tensor* t : scaler.state()) state.push_back(t);
    ravel::Jit step(fn, state);
    std::vector<double> trace;
    for (int s = 0; s < 11; ++s) {
      std::vector<Tensor> in{coefficients(kPattern[s])};
      if (jit) step(in); else fn(in);
      trace.push_back(scaler.get_scale());
      for (float f : floats(p)) trace.push_back(f);
    }
    if (jit) BOOST_CHECK_GE(step.replays(), 9);
    return trace;
  };
  std::vector<double> eager = run(false), captured = run(true);
  BOOST_CHECK_EQUAL_COLLECTIONS(eager.begin(), eager.end(), captured.begin(), captured.end());
}

BOOST_AUTO_TEST_CASE(misuse_and_disabled) {
  nn::GradScaler scaler;
  BOOST_CHECK_THROW(scaler.update(), ravel::ValueError);  // no step() before it
  nn::GradScaler::Options bad;
  bad.backoff_factor = 1.5;
  BOOST_CHECK_THROW(nn::GradScaler{bad}, ravel::ValueError);
  bad = {};
  bad.init_scale = 0;
  BOOST_CHECK_THROW(nn::GradScaler{bad}, ravel::ValueError);
  BOOST_CHECK_THROW(scaler.scale(Tensor::from_vector<int64_t>({1}, {1})), ravel::DTypeError);
  // f16 master weights are refused, as PyTorch refuses to unscale f16 gradients.
  Tensor h = Tensor::from_vector<float>({1, 2}, {2}).cast(DType::F16).realize();
  h.requires_grad_();
  nn::SGD sgd_h({&h}, 0.1);
  scaler.scale((h * 2.0).sum()).backward();
  BOOST_CHECK_THROW(scaler.step(sgd_h), ravel::DTypeError);
  // One step() per optimizer between update()s; two optimizers share the scale and its backoff.
  Tensor a = Tensor::from_vector<float>({1}, {1}).requires_grad_(), b = Tensor::from_vector<float>({1}, {1}).requires_grad_();
  nn::SGD sa({&a}, 0.5), sb({&b}, 0.5);
  nn::GradScaler shared;
  shared.scale((a * 2.0).sum() + (b * 1e38).sum()).backward();  // b's scaled gradient is inf
  shared.step(sa);
  BOOST_CHECK_THROW(shared.step(sa), ravel::ValueError);
  shared.step(sb);
  shared.update();
  BOOST_CHECK_EQUAL(a.to_vector<float>()[0], 0.0f);  // a's step applied (1 - 0.5 * 2)
  BOOST_CHECK_EQUAL(b.to_vector<float>()[0], 1.0f);  // b's skipped
  BOOST_CHECK_EQUAL(shared.get_scale(), 32768.0);     // and the scale backed off
  // Disabled: scale() is the loss itself and step() the optimizer's.
  nn::GradScaler::Options off;
  off.enabled = false;
  nn::GradScaler none(off);
  Tensor p = Tensor::from_vector<float>({1, 2}, {2}).requires_grad_();
  nn::SGD sgd({&p}, 0.5);
  Tensor loss = (p * 3.0).sum();
  BOOST_CHECK(none.scale(loss).node() == loss.node());
  none.scale(loss).backward();
  none.step(sgd);
  none.update();
  BOOST_CHECK_EQUAL(none.get_scale(), 1.0);
  std::vector<float> got = floats(p);
  BOOST_CHECK_EQUAL(got[0], -0.5f);
  BOOST_CHECK_EQUAL(got[1], 0.5f);
}

BOOST_AUTO_TEST_SUITE_END()
