// Autodiff in the 16-bit float dtypes: the gradients of a program run in f16 or
// bf16 against the f64 gradients of the same program at the same (rounded) inputs, and the
// dtypes that get no gradient.
//
// Note [Half gradient tolerances]
// The program is written once and run twice: on inputs rounded to the half dtype, and on those
// very values widened to f64 (exactly), with the same rounded cotangent. The two differ only by
// the roundings of the half run: every kernel computes in f32 and rounds its outputs once, to a
// relative error of at most u (the unit roundoff: 2^-11 for f16, 2^-8 for bf16); contractions and
// reductions accumulate in f32 (docs/dtypes.md). A gradient element is a product/sum of at most d
// rounded values along its path (d <= 8 primitives for these programs, counting the forward
// values the rules reuse), each derivative here has a condition number below 2, so its error is
// below 2 d u times the gradient's scale: the bound checked is 16 u * max|g_f64| (normwise, per
// argument: a small element of a sum can lose all its relative accuracy to cancellation, as in
// any float format). With RAVEL_FUSION=none every primitive rounds (the most roundings): the
// fusion variants of this test run that too. The check is sharp: a wrong rule (a missing factor,
// a sign, a transposition) is off by O(1) * max|g|, and 16 u is 1/128 (f16) and 1/16 (bf16).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "gradcheck.hpp"
#include "ravel/ravel.hpp"

using namespace adtest;

namespace {

double unit_roundoff(DType d) { return d == DType::F16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8); }

// Runs f on `xs` (f64 host values) rounded to `d` and on the same values in f64; compares the
// gradients (one rounded random cotangent) within 16 u of the f64 gradient's largest element.
void check_half_gradients(const std::string& name, const TensorFn& f, const std::vector<Tensor>& xs, DType d,
                          uint64_t seed = 5) {
  guarded(name + " in " + ravel::dtype_name(d), [&] {
    std::vector<Tensor> xd, x64;
    for (const auto& x : xs) {
      xd.push_back(x.cast(d).realize());
      x64.push_back(xd.back().cast(DType::F64).realize());  // exact: every half is an f64
    }
    Tensor yd = f(xd), y64 = f(x64);
    BOOST_REQUIRE_MESSAGE(yd.dtype() == d, "the program's output is " << ravel::dtype_name(yd.dtype()));
    Tensor ud = host(normal_values(yd.shape(), seed), yd.shape()).cast(d);
    std::vector<Tensor> gd = ravel::gradients(yd, xd, ud);
    std::vector<Tensor> g64 = ravel::gradients(y64, x64, ud.cast(DType::F64));
    // All in one pass, as backward() does. (Realizing an MLP's gradients one by one under the
    // default fusion trips "kernel input has no buffer" in f64 as well: a scheduler bug of its
    // own, reported separately, not a half one.)
    std::vector<Tensor> all = gd;
    all.insert(all.end(), g64.begin(), g64.end());
    ravel::realize(all);
    const double tol = 16 * unit_roundoff(d);
    for (size_t i = 0; i < xs.size(); ++i) {
      BOOST_TEST_CONTEXT("argument " << i) {
        BOOST_CHECK_MESSAGE(gd[i].dtype() == d, "gradient dtype " << ravel::dtype_name(gd[i].dtype()));
        BOOST_REQUIRE(gd[i].shape() == xs[i].shape());
        std::vector<double> got = gd[i].to_vector<double>(), want = g64[i].to_vector<double>();
        double scale = 0, worst = 0;
        for (double w : want) scale = std::max(scale, std::fabs(w));
        BOOST_REQUIRE_MESSAGE(scale > 0 && std::isfinite(scale), "f64 gradient scale " << scale);
        for (size_t k = 0; k < got.size(); ++k) worst = std::max(worst, std::fabs(got[k] - want[k]));
        BOOST_TEST_MESSAGE(name << " " << ravel::dtype_name(d) << " arg " << i << ": error / (u scale) = " << worst / (tol / 16 * scale));
        BOOST_CHECK_MESSAGE(worst <= tol * scale, "max |g_half - g_f64| = " << worst << " > " << tol << " * " << scale);
      }
    }
  });
}

const DType kHalves[] = {DType::F16, DType::BF16};

}  // namespace

BOOST_AUTO_TEST_CASE(elementwise_programs) {
  Tensor a = uniform({3, 5}, 1, -1.5, 1.5), b = signed_away({3, 5}, 2), c = uniform({3, 5}, 3, 0.5, 2.0);
  for (DType d : kHalves) {
    check_half_gradients("mul add sin", [](const std::vector<Tensor>& x) { return x[0] * x[1] + x[0].sin(); }, {a, b}, d);
    check_half_gradients("div sqrt exp", [](const std::vector<Tensor>& x) { return x[0] / x[1] + x[2].sqrt() * x[0].exp(); },
                         {a, b, c}, d);
    check_half_gradients("tanh sigmoid log", [](const std::vector<Tensor>& x) { return x[0].tanh() * x[1].sigmoid() + x[2].log(); },
                         {a, b, c}, d);
    check_half_gradients("relu max where", [](const std::vector<Tensor>& x) {
      return x[0].relu() * x[1] + Tensor::where(x[1].gt(x[0]), x[1], x[0] * 2.0).maximum(x[2]);
    }, {b, a, c}, d);
  }
}

BOOST_AUTO_TEST_CASE(fan_out_accumulates) {
  // x feeds six terms: its gradient is the sum of six contributions, each in the half dtype.
  Tensor x = uniform({4, 6}, 7, 0.5, 1.5), w = normal({4, 6}, 8);
  for (DType d : kHalves)
    check_half_gradients("six uses", [](const std::vector<Tensor>& v) {
      const Tensor& u = v[0];
      return u * v[1] + u.square() + u.exp() * 0.25 + u.sin() - u.log() + (u * v[1]).tanh();
    }, {x, w}, d);
}

BOOST_AUTO_TEST_CASE(reductions_matmul_and_softmax) {
  Tensor a = normal({6, 8}, 11), b = normal({8, 5}, 12), big = normal({2, 4096}, 13);
  for (DType d : kHalves) {
    check_half_gradients("sum mean max", [](const std::vector<Tensor>& x) {
      return x[0].sum(1) + x[0].mean(1) * 3.0 + x[0].max(1);
    }, {a}, d);
    check_half_gradients("4096-long sum of squares", [](const std::vector<Tensor>& x) { return x[0].square().sum(1); }, {big}, d);
    check_half_gradients("matmul tanh matmul", [](const std::vector<Tensor>& x) {
      return x[0].matmul(x[1]).tanh().matmul(x[1].transpose(0, 1));
    }, {a, b}, d);
    check_half_gradients("log_softmax", [](const std::vector<Tensor>& x) { return x[0].log_softmax(-1); }, {a}, d);
  }
}

BOOST_AUTO_TEST_CASE(an_mlp_loss) {
  // Linear -> tanh -> Linear -> cross-entropy against integer targets (which get no gradient).
  Tensor x = normal({16, 6}, 21), w1 = normal({6, 10}, 22) * 0.4, b1 = normal({10}, 23) * 0.1,
         w2 = normal({10, 5}, 24) * 0.3;
  Tensor targets = Tensor::from_vector<int64_t>({0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0}, {16});
  for (DType d : kHalves)
    check_half_gradients("cross_entropy(mlp)", [&](const std::vector<Tensor>& p) {
      return ravel::nn::cross_entropy((p[0].matmul(p[1]) + p[2]).tanh().matmul(p[3]), targets);
    }, {x, w1, b1, w2}, d);
}

// The CNN operators (ravel/conv.hpp, interpolate) in f16 and bf16: values within 4u of the f64
// result's scale (a kernel output is one rounding of an f32 computation; with RAVEL_FUSION=none
// every primitive rounds, at most 4 along these programs: measured 2.0u there, below 1u fused),
// gradients by Note [Half gradient tolerances].
BOOST_AUTO_TEST_CASE(convolution_and_pooling) {
  namespace nn = ravel::nn;
  Tensor x = normal({2, 3, 9, 8}, 41), w = normal({4, 3, 3, 3}, 42) * 0.3, b = normal({4}, 43) * 0.1;
  Tensor wt = normal({3, 2, 3, 2}, 44) * 0.3;  // conv_transpose: [C, O / groups, k...], groups 1
  nn::ConvOptions strided, transposed;
  strided.stride = {2, 1}, strided.padding = {1};
  transposed.stride = {2}, transposed.padding = {1}, transposed.output_padding = {1};
  nn::PoolOptions maxp, avgp;
  maxp.kernel = avgp.kernel = {3}, maxp.stride = avgp.stride = {2}, maxp.padding = avgp.padding = {1};
  maxp.ceil_mode = avgp.ceil_mode = true, avgp.count_include_pad = false;
  struct Program {
    std::string name;
    TensorFn f;
    std::vector<Tensor> args;
  };
  const std::vector<Program> programs = {
      {"conv2d stride (2, 1) padding 1 + bias", [&](const std::vector<Tensor>& v) { return nn::conv2d(v[0], v[1], v[2], strided); },
       {x, w, b}},
      {"conv_transpose2d stride 2", [&](const std::vector<Tensor>& v) { return nn::conv_transpose2d(v[0], v[1], std::nullopt, transposed); },
       {x, wt}},
      {"avg_pool2d ceil, padding excluded", [&](const std::vector<Tensor>& v) { return nn::avg_pool2d(v[0].tanh(), avgp); }, {x}},
      {"adaptive_avg_pool2d 4x3", [&](const std::vector<Tensor>& v) { return nn::adaptive_avg_pool2d(v[0], {4, 3}); }, {x}},
      {"bilinear 13x5 align_corners",
       [&](const std::vector<Tensor>& v) { return nn::interpolate(v[0], {13, 5}, nn::InterpolateMode::Bilinear, true); }, {x}},
      // Max pooling of the leaves, where both runs compare the same values. Pooling a computed
      // value instead (conv, then pooling) is discontinuous in it: a window whose two largest
      // values round to one bf16 routes its gradient to the first of them, the f64 run to the
      // larger (measured 56-106 u), which no tolerance of the gradient's size can absorb.
      {"max_pool2d, conv2d, relu",
       [&](const std::vector<Tensor>& v) { return nn::conv2d(nn::max_pool2d(v[0], maxp), v[1], v[2]).relu(); }, {x, w, b}},
  };
  for (DType d : kHalves)
    for (const Program& p : programs) {
      guarded(p.name + " values in " + ravel::dtype_name(d), [&] {
        std::vector<Tensor> xd, x64;
        for (const Tensor& t : p.args) {
          xd.push_back(t.cast(d).realize());
          x64.push_back(xd.back().cast(DType::F64));
        }
        Tensor yd = p.f(xd);
        BOOST_CHECK(yd.dtype() == d);
        std::vector<double> got = yd.to_vector<double>(), want = p.f(x64).to_vector<double>();
        BOOST_REQUIRE_EQUAL(got.size(), want.size());
        double scale = 0, worst = 0;
        for (size_t k = 0; k < got.size(); ++k) {
          scale = std::max(scale, std::fabs(want[k]));
          worst = std::max(worst, std::fabs(got[k] - want[k]));
        }
        BOOST_TEST_MESSAGE(p.name << " " << ravel::dtype_name(d) << " values: error / (u scale) = " << worst / (unit_roundoff(d) * scale));
        BOOST_CHECK_MESSAGE(worst <= 4 * unit_roundoff(d) * scale, "max |y_half - y_f64| = " << worst << ", scale " << scale);
      });
      check_half_gradients(p.name, p.f, p.args, d);
    }
}

BOOST_AUTO_TEST_CASE(f32_weights_through_a_half_cast_get_f32_gradients) {
  // The mixed-precision pattern: an f32 leaf cast to the half dtype for the compute. Its gradient
  // is the half gradient widened (the CAST rule), so it is f32 and within the half tolerance.
  Tensor xv = normal({5, 4}, 31), wv = normal({4, 3}, 32);
  for (DType d : kHalves) {
    guarded(ravel::dtype_name(d), [&] {
      Tensor x = xv.cast(d), w = wv.cast(d).cast(DType::F32).realize();  // representable in d
      Tensor y = x.matmul(w.cast(d)).square().sum();
      BOOST_CHECK(y.dtype() == d);
      Tensor g = ravel::gradients(y, {w})[0];
      BOOST_CHECK(g.dtype() == DType::F32);
      Tensor x64 = x.cast(DType::F64), w64 = w.cast(DType::F64);
      Tensor g64 = ravel::gradients(x64.matmul(w64).square().sum(), {w64})[0];
      std::vector<double> got = g.to_vector<double>(), want = g64.to_vector<double>();
      double scale = 0, worst = 0;
      for (size_t k = 0; k < got.size(); ++k) {
        scale = std::max(scale, std::fabs(want[k]));
        worst = std::max(worst, std::fabs(got[k] - want[k]));
      }
      BOOST_CHECK_LE(worst, 16 * unit_roundoff(d) * scale);
    });
  }
}

BOOST_AUTO_TEST_CASE(backward_on_half_leaves) {
  // The PyTorch-style API: a half leaf's .grad is in its dtype, and backward() accumulates.
  for (DType d : kHalves) {
    Tensor x = Tensor::from_vector<double>({0.5, -1.0, 2.0}, {3}).cast(d).realize();
    x.requires_grad_();
    (x * x).sum().backward();
    (x * 3.0).sum().backward();
    Tensor g = x.grad();
    BOOST_REQUIRE(g.defined());
    BOOST_CHECK(g.dtype() == d);
    // 2x + 3: exact in both formats.
    std::vector<double> got = g.to_vector<double>();
    BOOST_CHECK_EQUAL(got[0], 4.0);
    BOOST_CHECK_EQUAL(got[1], 1.0);
    BOOST_CHECK_EQUAL(got[2], 7.0);
    // A half output without a cotangent starts from a half 1.
    std::vector<Tensor> gs = ravel::gradients((x * 2.0).sum(), {x});
    BOOST_CHECK(gs[0].dtype() == d);
    for (double v : gs[0].to_vector<double>()) BOOST_CHECK_EQUAL(v, 2.0);
  }
}

BOOST_AUTO_TEST_CASE(integer_dtypes_get_no_gradient) {
  // As PyTorch: only floats can require grad (a DTypeError here, "only Tensors of floating point
  // dtype can require gradients" there), and an integer input of gradients() is a constant: its
  // gradient is zeros of its shape (JAX's float0 zeros), whatever the integer width.
  const DType ints[] = {DType::Bool, DType::U8, DType::I8, DType::I16, DType::U16, DType::I32, DType::U32, DType::I64,
                        DType::U64};
  Tensor x = Tensor::from_vector<double>({1.5, -2.0, 0.25}, {3}).cast(DType::F16);
  for (DType t : ints) {
    BOOST_TEST_CONTEXT(ravel::dtype_name(t)) {
      Tensor i = Tensor::from_vector<int64_t>({1, 0, 3}, {3}).cast(t);
      BOOST_CHECK_THROW(i.requires_grad_(), ravel::DTypeError);
      std::vector<Tensor> g = ravel::gradients((x * i.cast(DType::F16)).sum(), {x, i});
      BOOST_CHECK(g[0].dtype() == DType::F16);
      std::vector<double> gx = g[0].to_vector<double>(), iv = i.to_vector<double>();  // bool: 3 -> 1
      for (size_t k = 0; k < 3; ++k) BOOST_CHECK_EQUAL(gx[k], iv[k]);
      BOOST_CHECK(g[1].shape() == (Shape{3}));
      for (double v : g[1].to_vector<double>()) BOOST_CHECK_EQUAL(v, 0.0);
      // An integer output has no gradient at all.
      BOOST_CHECK_THROW(ravel::gradients(i.sum(), {x}), ravel::DTypeError);
    }
  }
}

BOOST_AUTO_TEST_CASE(forward_mode_and_second_order) {
  // jvp (a transposed vjp) and grad of grad run in the half dtype too, within the same bound.
  Tensor xv = uniform({7}, 41, 0.5, 1.5), tv = normal({7}, 42);
  const TensorFn f = [](const std::vector<Tensor>& x) { return (x[0].sin() * x[0]).exp(); };
  for (DType d : kHalves) {
    guarded(ravel::dtype_name(d), [&] {
      Tensor x = xv.cast(d), t = tv.cast(d);
      auto [y, jt] = ravel::jvp(f, {x}, {t});
      auto [y64, jt64] = ravel::jvp(f, {x.cast(DType::F64)}, {t.cast(DType::F64)});
      BOOST_CHECK(jt.dtype() == d);
      // f''(x) elementwise (f acts elementwise): the gradient of sum(grad(sum f)).
      const ravel::UnaryFn first = ravel::grad(ravel::UnaryFn([&](const Tensor& v) { return f({v}).sum(); }));
      const ravel::UnaryFn second = ravel::grad(ravel::UnaryFn([&](const Tensor& v) { return first(v).sum(); }));
      Tensor h = second(x), h64 = second(x.cast(DType::F64));
      BOOST_CHECK(h.dtype() == d);
      for (auto [got, want] : {std::pair{jt, jt64}, std::pair{h, h64}}) {
        std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
        double scale = 0, worst = 0;
        for (size_t k = 0; k < g.size(); ++k) scale = std::max(scale, std::fabs(w[k])), worst = std::max(worst, std::fabs(g[k] - w[k]));
        BOOST_CHECK_LE(worst, 16 * unit_roundoff(d) * scale);
      }
    });
  }
}
