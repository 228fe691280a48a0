// ravel::Jit (ravel/jit.hpp, Note [Jit] in core/src/runtime/jit.cpp): a captured function replayed
// with new inputs must give what running it would, checked against host references computed
// here in double (not against Ravel), and every misuse the capture can see must be refused.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <vector>

#include "ravel/ravel.hpp"

using ravel::Tensor;

namespace {

std::vector<float> values(int n, int seed) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>(std::sin(0.7 * i + seed) * 2.0);
  return v;
}

void check_close(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    BOOST_TEST(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])), "element " << i << ": " << got[i] << " vs " << want[i]);
}

}  // namespace

BOOST_AUTO_TEST_CASE(replay_matches_the_function_on_new_inputs) {
  const Tensor c = Tensor::from_vector(values(6, 9), {2, 3});  // closed over: a constant of the capture
  int ran = 0;
  ravel::Jit f([&](const std::vector<Tensor>& in) {
    ++ran;
    return std::vector<Tensor>{(in[0].exp() * 2.0 + c).sum(1), in[0] * in[1]};
  });
  std::vector<Tensor> first;
  for (int call = 0; call < 5; ++call) {
    std::vector<float> x = values(6, call), y = values(6, 100 + call), cv = values(6, 9);
    Tensor xt = Tensor::from_vector(x, {2, 3}), yt = Tensor::from_vector(y, {2, 3});
    auto out = f({xt, yt});
    if (call > 0) BOOST_TEST(ravel::last_realization_stats().kernels() == f.kernels_per_call());  // a replay
    BOOST_REQUIRE_EQUAL(out.size(), 2u);
    std::vector<double> s(2, 0.0), p(6);
    for (int i = 0; i < 6; ++i) {
      s[i / 3] += std::exp(double(x[i])) * 2.0 + cv[i];
      p[i] = double(x[i]) * y[i];
    }
    check_close(out[0].to_vector<float>(), s, 1e-6);
    check_close(out[1].to_vector<float>(), p, 1e-7);
    BOOST_TEST(out[0].shape() == (ravel::Shape{2}));
    if (call == 0) first = out;
  }
  BOOST_TEST(ran == 1);
  BOOST_TEST(f.captures() == 1);
  BOOST_TEST(f.replays() == 4);
  BOOST_TEST(f.kernels_per_call() >= 2);
  // Results of earlier calls are never overwritten by later replays.
  std::vector<float> x0 = values(6, 0), y0 = values(6, 100);
  std::vector<double> p0(6);
  for (int i = 0; i < 6; ++i) p0[i] = double(x0[i]) * y0[i];
  check_close(first[1].to_vector<float>(), p0, 1e-7);
}

BOOST_AUTO_TEST_CASE(a_new_signature_is_captured_again) {
  int ran = 0;
  ravel::Jit f([&](const std::vector<Tensor>& in) {
    ++ran;
    return std::vector<Tensor>{in[0].sum() + 1.0};
  });
  auto total = [](const std::vector<float>& v) { double s = 1; for (float x : v) s += x; return s; };
  for (int n : {4, 4, 7, 7, 4}) {
    std::vector<float> x = values(n, n);
    auto out = f({Tensor::from_vector(x, {n})});
    check_close(out[0].to_vector<float>(), {total(x)}, 1e-6);
  }
  BOOST_TEST(ran == 2);
  BOOST_TEST(f.captures() == 2);
  BOOST_TEST(f.replays() == 3);
  f.clear();
  f({Tensor::from_vector(values(4, 1), {4})});
  BOOST_TEST(ran == 3);
}

// Linear regression y = w x + b trained by SGD inside the jitted step; the same steps in double.
BOOST_AUTO_TEST_CASE(state_is_bound_and_rebound_every_call) {
  ravel::nn::Linear lin(3, 1, 7);
  ravel::nn::SGD sgd(lin.parameters(), 0.1);
  std::vector<double> w(3), b(1);
  {
    auto wv = lin.weight.to_vector<float>(), bv = lin.bias.to_vector<float>();
    for (int i = 0; i < 3; ++i) w[i] = wv[i];
    b[0] = bv[0];
  }
  ravel::Jit step([&](const std::vector<Tensor>& in) {
    Tensor loss = ravel::nn::mse_loss(lin(in[0]), in[1]);
    sgd.zero_grad();
    loss.backward();
    sgd.step();
    sgd.zero_grad();
    return std::vector<Tensor>{loss};
  }, lin.parameters());
  const int n = 8;
  for (int it = 0; it < 6; ++it) {
    std::vector<float> x = values(n * 3, it), y = values(n, 50 + it);
    Tensor loss = step({Tensor::from_vector(x, {n, 3}), Tensor::from_vector(y, {n, 1})})[0];
    double l = 0, gw[3] = {0, 0, 0}, gb = 0;
    for (int r = 0; r < n; ++r) {
      double pred = b[0];
      for (int k = 0; k < 3; ++k) pred += double(x[r * 3 + k]) * w[k];
      const double e = pred - y[r];
      l += e * e / n;
      for (int k = 0; k < 3; ++k) gw[k] += 2 * e * x[r * 3 + k] / n;
      gb += 2 * e / n;
    }
    for (int k = 0; k < 3; ++k) w[k] -= 0.1 * gw[k];
    b[0] -= 0.1 * gb;
    check_close(loss.to_vector<float>(), {l}, 1e-5);
    check_close(lin.weight.to_vector<float>(), w, 1e-5);
    check_close(lin.bias.to_vector<float>(), b, 1e-5);
  }
  BOOST_TEST(step.captures() == 1);
  BOOST_TEST(step.replays() == 5);
  BOOST_TEST(lin.weight.requires_grad());  // rebinding keeps the parameters' autodiff state
}

BOOST_AUTO_TEST_CASE(misuse_is_refused_with_a_clear_error) {
  auto has = [](const std::string& what) {
    return [what](const ravel::ValueError& e) { return std::string(e.what()).find(what) != std::string::npos; };
  };
  Tensor x = Tensor::from_vector(values(4, 1), {4});
  Tensor kept;
  ravel::Jit leaks([&](const std::vector<Tensor>& in) {
    kept = (in[0] * 3.0).realize();  // computed, kept outside, not returned: a replay would not update it
    return std::vector<Tensor>{in[0] + 1.0};
  });
  BOOST_CHECK_EXCEPTION(leaks({x}), ravel::ValueError, has("keeps 1 tensor"));

  ravel::Jit twice([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] + in[1]}; });
  BOOST_CHECK_EXCEPTION(twice({x, x}), ravel::ValueError, has("same buffer"));
  BOOST_CHECK_EXCEPTION(twice({x, Tensor()}), ravel::ValueError, has("input 1 is an undefined"));

  Tensor unset;
  ravel::Jit stateful([](const std::vector<Tensor>& in) { return in; }, {&unset});
  BOOST_CHECK_EXCEPTION(stateful({x}), ravel::ValueError, has("state tensor 0 is undefined"));
  BOOST_CHECK_THROW(ravel::Jit(ravel::Jit::Function{}), ravel::ValueError);
}

BOOST_AUTO_TEST_CASE(inputs_that_are_views_or_lazy_are_realized_first) {
  ravel::Jit f([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * 2.0}; });
  for (int call = 0; call < 3; ++call) {
    std::vector<float> v = values(6, call);
    Tensor t = Tensor::from_vector(v, {2, 3}).transpose() + 1.0;  // lazy and permuted
    std::vector<double> want(6);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 2; ++j) want[i * 2 + j] = (double(v[j * 3 + i]) + 1.0) * 2.0;
    check_close(f({t})[0].to_vector<float>(), want, 1e-7);
  }
  BOOST_TEST(f.replays() == 2);
}

// Hash-consing would hand the function an already realized node for in[0] * 2 if the capture
// used the caller's node: the capture must still record the kernel, not keep its value.
BOOST_AUTO_TEST_CASE(expressions_realized_outside_are_recomputed) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3}, {3});
  Tensor y = (x * 2.0).realize();  // alive during the capture
  ravel::Jit f([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * 2.0}; });
  check_close(f({x})[0].to_vector<float>(), {2, 4, 6}, 0);
  check_close(f({Tensor::from_vector<float>({5, 6, 7}, {3})})[0].to_vector<float>(), {10, 12, 14}, 0);
  BOOST_TEST(f.kernels_per_call() == 1);
  check_close(y.to_vector<float>(), {2, 4, 6}, 0);
}

// Misuse that segfaulted or replayed a wrong capture silently.
BOOST_AUTO_TEST_CASE(a_moved_from_jit_is_a_typed_error) {
  ravel::Jit f([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * 2.0}; });
  ravel::Jit g = std::move(f);
  const Tensor x = Tensor::from_vector<float>({1, 2}, {2});
  BOOST_TEST(g({x})[0].to_vector<float>() == (std::vector<float>{2, 4}));
  auto moved = [](const ravel::ValueError& e) {
    BOOST_TEST_MESSAGE(e.what());
    return std::string(e.what()).find("this Jit was moved from") != std::string::npos;
  };
  BOOST_CHECK_EXCEPTION(f({x}), ravel::ValueError, moved);  // NOLINT(bugprone-use-after-move): the point
  BOOST_CHECK_EXCEPTION(f.captures(), ravel::ValueError, moved);
  BOOST_CHECK_EXCEPTION(f.replays(), ravel::ValueError, moved);
  BOOST_CHECK_EXCEPTION(f.kernels_per_call(), ravel::ValueError, moved);
  BOOST_CHECK_EXCEPTION(f.clear(), ravel::ValueError, moved);
  f = std::move(g);  // a moved-from Jit can be assigned again
  BOOST_TEST(f({x})[0].to_vector<float>() == (std::vector<float>{2, 4}));
}

BOOST_AUTO_TEST_CASE(a_function_calling_its_own_jit_is_refused) {
  ravel::Jit* self = nullptr;
  int depth = 0;
  ravel::Jit f([&](const std::vector<Tensor>& in) {
    ++depth;
    if (depth == 1) return (*self)({in[0] + 1.0});  // the recursion
    return std::vector<Tensor>{in[0] * 3.0};
  });
  self = &f;
  const Tensor x = Tensor::from_vector<float>({1, 2}, {2});
  BOOST_CHECK_EXCEPTION(f({x}), ravel::ValueError, [](const ravel::ValueError& e) {
    BOOST_TEST_MESSAGE(e.what());
    return std::string(e.what()).find("its function calls the Jit itself") != std::string::npos;
  });
  BOOST_TEST(f.captures() == 0);  // nothing half-captured was kept...
  depth = 5;                      // ...and the Jit works after the refusal
  BOOST_TEST(f({x})[0].to_vector<float>() == (std::vector<float>{3, 6}));
  BOOST_TEST(f({x})[0].to_vector<float>() == (std::vector<float>{3, 6}));
  BOOST_TEST(f.replays() == 1);
}

// A tensor the function closed over (not state) and then assigned: the capture's constant is the
// old buffer; replaying it would give the old value. The Jit notices and runs the function again.
BOOST_AUTO_TEST_CASE(assigning_a_closed_over_tensor_recaptures) {
  Tensor w = Tensor::from_vector<float>({1, 2}, {2});
  int ran = 0;
  ravel::Jit f([&](const std::vector<Tensor>& in) {
    ++ran;
    return std::vector<Tensor>{in[0] * w};
  });
  const Tensor x = Tensor::from_vector<float>({10, 10}, {2});
  BOOST_TEST(f({x})[0].to_vector<float>() == (std::vector<float>{10, 20}));
  BOOST_TEST(f({x})[0].to_vector<float>() == (std::vector<float>{10, 20}));
  BOOST_TEST(ran == 1);  // replayed while w is unchanged
  w.assign(Tensor::from_vector<float>({3, 4}, {2}));
  BOOST_TEST(f({x})[0].to_vector<float>() == (std::vector<float>{30, 40}));
  BOOST_TEST(ran == 2);
  BOOST_TEST(f({x})[0].to_vector<float>() == (std::vector<float>{30, 40}));
  BOOST_TEST(ran == 2);  // and the new capture replays
  BOOST_TEST(f.captures() == 2);
}

// A closed-over tensor assigned a constant and then another: its leaf has a buffer of its own,
// not the interned constant's (which a capture never counts as held outside it), so the second
// assign is seen and the function runs again.
BOOST_AUTO_TEST_CASE(assigning_constants_to_a_closed_over_tensor_recaptures) {
  Tensor s = Tensor::from_vector<float>({1}, {});
  s.assign(Tensor::full({}, 2.0));
  int ran = 0;
  ravel::Jit f([&](const std::vector<Tensor>& in) {
    ++ran;
    return std::vector<Tensor>{in[0] * s};
  });
  const Tensor x = Tensor::from_vector<float>({10, 20}, {2});
  BOOST_TEST(f({x})[0].to_vector<float>() == (std::vector<float>{20, 40}), boost::test_tools::per_element());
  BOOST_TEST(f({x})[0].to_vector<float>() == (std::vector<float>{20, 40}), boost::test_tools::per_element());
  BOOST_TEST(ran == 1);
  s.assign(Tensor::full({}, 3.0));
  BOOST_TEST(f({x})[0].to_vector<float>() == (std::vector<float>{30, 60}), boost::test_tools::per_element());
  BOOST_TEST(ran == 2);
}

// Note [Constants shared by interning] (core/src/runtime/jit.cpp): a padded Const (the mask of a
// pad with a value) is read from a one-element buffer that every graph interning the same
// constant shares. A graph of the caller's that used the same constant, alive while the step was
// captured and gone by the next call, is not a closed-over tensor that was assigned: the step
// replays (it was captured again at every call before).
BOOST_AUTO_TEST_CASE(a_constant_shared_with_a_graph_that_died_does_not_recapture) {
  int ran = 0;
  ravel::Jit f([&](const std::vector<Tensor>& in) {
    ++ran;
    return std::vector<Tensor>{in[0].pad({{1, 1}}, 7.0) * 2.0};
  });
  for (int call = 0; call < 4; ++call) {
    // The same interned constants (the mask's `true`, 7), in a graph that dies with this iteration.
    const Tensor unrelated = Tensor::from_vector<float>({5}, {1}).pad({{1, 0}}, 7.0) + 1.0;
    const Tensor x = Tensor::from_vector<float>({float(call), 1}, {2});
    BOOST_TEST(f({x})[0].to_vector<float>() == (std::vector<float>{14, 2.0f * call, 2, 14}),
               boost::test_tools::per_element());
    BOOST_TEST(unrelated.to_vector<float>() == (std::vector<float>{8, 6}), boost::test_tools::per_element());
  }
  BOOST_TEST(ran == 1);
  BOOST_TEST(f.captures() == 1);
  BOOST_TEST(f.replays() == 3);
}

// Note [Constant kernels]: a kernel that reads only constants of the capture (a closed-over
// tensor, a value made inside the function from nothing) runs once, at the capture; its result
// is kept, so replays launch only what depends on the inputs. The values stay those of the
// function, also after the closed-over tensor is assigned (a new capture), and an output that is
// itself such a constant is still computed by every replay (outputs are fresh buffers).
BOOST_AUTO_TEST_CASE(kernels_of_constants_alone_run_once_at_the_capture) {
  Tensor w = Tensor::from_vector<float>({1, 2, 3}, {3});
  ravel::Jit f([&](const std::vector<Tensor>& in) {
    Tensor scale = (w * 2.0).exp().realize();                      // reads w only: folded
    Tensor ramp = Tensor::arange(0.0, 3.0, 1.0, ravel::DType::F32).realize() + 1.0;  // from nothing
    return std::vector<Tensor>{in[0] * scale + ramp, w * 3.0};
  });
  auto want = [&](const std::vector<float>& x, const std::vector<float>& wv) {
    std::vector<double> r;
    for (size_t i = 0; i < x.size(); ++i) r.push_back(x[i] * std::exp(2.0 * wv[i]) + double(i) + 1.0);
    return r;
  };
  for (int call = 0; call < 3; ++call) {
    const std::vector<float> xv = values(3, call);
    const std::vector<Tensor> out = f({Tensor::from_vector(xv, {3})});
    check_close(out[0].to_vector<float>(), want(xv, {1, 2, 3}), 1e-6);
    BOOST_TEST(out[1].to_vector<float>() == (std::vector<float>{3, 6, 9}));
  }
  BOOST_TEST(f.replays() == 2);
  // Left: the output kernel of in[0] (scale and ramp fused into it or folded) and w * 3, an
  // output: never folded. Before folding, exp(w * 2) and the ramp were kernels of every replay.
  BOOST_TEST(f.kernels_per_call() == 2);
  w.assign(Tensor::from_vector<float>({-1, 0, 0.5f}, {3}));
  for (int call = 0; call < 2; ++call) {
    const std::vector<float> xv = values(3, 10 + call);
    const std::vector<Tensor> out = f({Tensor::from_vector(xv, {3})});
    check_close(out[0].to_vector<float>(), want(xv, {-1, 0, 0.5f}), 1e-6);
    BOOST_TEST(out[1].to_vector<float>() == (std::vector<float>{-3, 0, 1.5f}));
  }
  BOOST_TEST(f.captures() == 2);
}

// Inputs that are kernels' realized results (not leaves: a sum, a cast, a transposed copy) are
// bound by their buffers; a realized constant and a realized view of one still go through a
// realization of their own (a constant's buffer has one element). Values against host doubles.
BOOST_AUTO_TEST_CASE(realized_results_and_constants_as_inputs) {
  ravel::Jit f([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * 2.0 + in[1]}; });
  for (int call = 0; call < 4; ++call) {
    const std::vector<float> v = values(6, call);
    const Tensor x = Tensor::from_vector(v, {2, 3});
    Tensor a = (x + 1.0).realize();                                     // Alu, realized
    Tensor b = (call % 2 ? x.transpose().contiguous().transpose() : x.cast(ravel::DType::F64).cast(ravel::DType::F32)).realize();
    if (call == 3) b = Tensor::full({2, 3}, 0.5).realize();             // a constant, expanded
    std::vector<double> want(6);
    for (size_t i = 0; i < 6; ++i) want[i] = (double(v[i]) + 1.0) * 2.0 + (call == 3 ? 0.5 : double(v[i]));
    check_close(f({a, b})[0].to_vector<float>(), want, 1e-6);
  }
}
