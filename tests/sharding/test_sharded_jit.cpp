// ravel::Jit on sharded programs (Note [Sharded Jit]): a data-parallel training step captured
// once and replayed gives the losses and parameters of the same step run eagerly on one device;
// a new layout of the inputs is a new capture.
#include <chrono>
#include <cstdlib>
#include <thread>

#include "../core/expect_error.hpp"
#include "runtime/jit_capture.hpp"
#include "sharding_common.hpp"

using namespace stest;

namespace {

struct Trained {
  std::vector<double> losses;
  std::vector<std::vector<double>> params;
};

// Sets RAVEL_JIT_LANES (Note [Replay by device], read at every replay) for the scope.
struct LanesEnv {
  explicit LanesEnv(const char* v) { setenv("RAVEL_JIT_LANES", v, 1); }
  ~LanesEnv() { unsetenv("RAVEL_JIT_LANES"); }
};

// One SGD step on the MLP's cross-entropy, returning the loss: the function every test here
// hands to the Jit.
auto sgd_step(ravel::nn::MLP& mlp, ravel::nn::SGD& opt) {
  return [&mlp, &opt](const std::vector<Tensor>& in) {
    Tensor loss = ravel::nn::cross_entropy(mlp(in[0]), in[1]);
    opt.zero_grad();
    loss.backward();
    opt.step({loss});
    opt.zero_grad();
    return std::vector<Tensor>{loss};
  };
}

Trained train(const std::vector<Device>& devices, bool jit, int steps) {
  ravel::nn::MLP mlp({6, 16, 3}, ravel::nn::Activation::Tanh, 5);
  std::vector<Tensor*> params = mlp.parameters();
  if (devices.size() > 1)
    for (Tensor* p : params) p->assign(p->replicate(devices));
  ravel::nn::SGD opt(params, 0.2);
  auto step = sgd_step(mlp, opt);
  ravel::Jit jitted(step, params);
  Trained out;
  for (int s = 0; s < steps; ++s) {
    Tensor x = data({24, 6}, s);
    std::vector<int64_t> t;
    for (int i = 0; i < 24; ++i) t.push_back((i * 7 + s) % 3);
    Tensor y = Tensor::from_vector<int64_t>(t, {24});
    if (devices.size() > 1) x = x.shard(devices, 0), y = y.shard(devices, 0);
    Tensor loss = jit ? jitted({x, y})[0] : step({x, y})[0];
    out.losses.push_back(loss.item<double>());
  }
  if (jit) {
    BOOST_TEST(jitted.captures() == 1);
    BOOST_TEST(jitted.replays() == steps - 1);
  }
  for (Tensor* p : params) {
    if (devices.size() > 1) {
      BOOST_TEST_REQUIRE(p->sharding().has_value());
      BOOST_TEST(p->sharding().value().replicated());
    }
    out.params.push_back(p->to_vector<double>());
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_captured_data_parallel_step_replays_like_the_eager_one) {
  const Trained eager = train(mesh(1), false, 5);
  for (size_t n : {2u, 4u}) {
    BOOST_TEST_CONTEXT(n << " devices") {
      const Trained replayed = train(mesh(n), true, 5);
      for (size_t s = 0; s < eager.losses.size(); ++s)
        BOOST_TEST(std::fabs(replayed.losses[s] - eager.losses[s]) <= 1e-5, "step " << s);
      for (size_t p = 0; p < eager.params.size(); ++p)
        for (size_t i = 0; i < eager.params[p].size(); ++i)
          BOOST_TEST(std::fabs(replayed.params[p][i] - eager.params[p][i]) <= 1e-5);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_new_layout_is_a_new_capture) {
  ravel::Jit f([](const std::vector<Tensor>& in) { return std::vector<Tensor>{(in[0] * 2.0).sum(0)}; });
  Tensor x = data({4, 4}, 1);
  const Tensor want = (x * 2.0).sum(0);
  check_close(f({x.shard(mesh(2), 0)})[0], want);
  check_close(f({x.shard(mesh(2), 0)})[0], want);
  BOOST_TEST(f.replays() == 1);
  Tensor by_columns = f({x.shard(mesh(2), 1)})[0];  // parts of the same shapes, split otherwise
  BOOST_TEST(f.captures() == 2);
  check_close(by_columns, want);
  BOOST_TEST(by_columns.sharding().value().axis.value() == 0);
}

// Note [Replay by device]: with a host thread per device, every device launches the same kernels
// in the same order as in a replay on one thread, so the results are the same bits; the
// comparison is exact. 8 devices on this machine's cores: the lanes wait for each other at every
// transfer and all-reduce.
BOOST_AUTO_TEST_CASE(a_replay_with_a_thread_per_device_gives_the_bits_of_the_replay_in_order) {
  for (size_t n : {2u, 4u, 8u}) {
    BOOST_TEST_CONTEXT(n << " devices") {
      Trained in_order, by_device;
      {
        LanesEnv off("0");
        in_order = train(mesh(n), true, 6);
      }
      {
        LanesEnv on("1");
        by_device = train(mesh(n), true, 6);
      }
      BOOST_TEST(by_device.losses == in_order.losses, boost::test_tools::per_element());
      for (size_t p = 0; p < in_order.params.size(); ++p)
        BOOST_TEST(by_device.params[p] == in_order.params[p], boost::test_tools::per_element());
    }
  }
}

// Note [Waking only sleepers]: between replays a lane's worker spins a while, then sleeps. A
// replay that finds it asleep (a pause longer than the spin), or still spinning (no pause), gives
// the bits of the replay in order either way.
BOOST_AUTO_TEST_CASE(a_replay_by_device_finds_its_workers_asleep_or_spinning) {
  ravel::Jit f([](const std::vector<Tensor>& in) { return std::vector<Tensor>{(in[0] * 2.0 + 1.0).sum(0)}; });
  Tensor x = data({8, 4}, 3);
  const Tensor want = (x * 2.0 + 1.0).sum(0);
  for (size_t n : {2u, 4u}) {
    BOOST_TEST_CONTEXT(n << " devices") {
      Tensor xs = x.shard(mesh(n), 0);
      std::vector<float> in_order;
      const int64_t replays_before = f.replays();
      {
        LanesEnv off("0");
        f.clear();
        in_order = f({xs})[0].to_vector<float>();  // the capture
        in_order = f({xs})[0].to_vector<float>();  // a replay on one thread
      }
      LanesEnv on("1");
      for (int call = 0; call < 6; ++call) {
        if (call % 2 == 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the spin is 0.2 ms
        const Tensor got = f({xs})[0];
        check_close(got, want);
        BOOST_TEST(got.to_vector<float>() == in_order, boost::test_tools::per_element());
      }
      BOOST_TEST(f.replays() - replays_before == 7);
    }
  }
}

// Note [Unread kernels]: a kernel whose result only the host read during the capture (a check of
// values) is not replayed; the replay's results are those of the function. The indices' bounds
// check of cross_entropy reads a sharded target with to_vector (a gather onto one device): its
// kernels go too.
BOOST_AUTO_TEST_CASE(kernels_only_the_host_read_at_the_capture_are_not_replayed) {
  ravel::Jit f([](const std::vector<Tensor>& in) {
    Tensor checked = (in[0] * 3.0).realize();
    BOOST_TEST(checked.to_vector<float>().size() == 4u);  // read on the host only
    return std::vector<Tensor>{in[0] + 1.0};
  });
  Tensor x = data({4}, 1);
  check_close(f({x})[0], x + 1.0);
  BOOST_TEST(f.kernels_per_call() == 1);  // the capture's: x * 3 was dropped
  Tensor x2 = data({4}, 2);
  check_close(f({x2})[0], x2 + 1.0);
  BOOST_TEST(f.replays() == 1);
  BOOST_TEST(f.kernels_per_call() == 1);

  // On a sharded input, to_vector gathers the parts onto one device (a transfer and a join), as
  // the bounds checks of nn::Embedding and cross_entropy do every step: none of it is replayed.
  const auto m = mesh(2);
  Tensor xs = data({8, 3}, 3).shard(m, 0);
  ravel::Jit plain([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * 2.0}; });
  ravel::Jit read([](const std::vector<Tensor>& in) {
    BOOST_TEST(in[0].to_vector<float>().size() == 24u);
    return std::vector<Tensor>{in[0] * 2.0};
  });
  for (int call = 0; call < 3; ++call) {
    check_close(read({xs})[0], plain({xs})[0]);
    BOOST_TEST(read.kernels_per_call() == plain.kernels_per_call());
  }
  BOOST_TEST(read.replays() == 2);
}

// Run by its own CTest entry with RAVEL_TBB_TEST_FAULT (a kernel fails on whichever device's
// thread launches it) and RAVEL_JIT_LANES=1: the replay's DeviceError reaches the caller, the
// other devices' threads stop instead of waiting for a kernel that never ran, the parameters keep
// the values of the last step that completed, and the next call runs.
BOOST_AUTO_TEST_CASE(a_failing_kernel_in_a_replay_by_device_is_a_device_error, *boost::unit_test::disabled()) {
  BOOST_TEST_REQUIRE(std::getenv("RAVEL_TBB_TEST_FAULT") != nullptr);
  const std::vector<Device> devices = mesh(4);
  ravel::nn::MLP mlp({6, 16, 3}, ravel::nn::Activation::Tanh, 5);
  std::vector<Tensor*> params = mlp.parameters();
  for (Tensor* p : params) p->assign(p->replicate(devices));
  ravel::nn::SGD opt(params, 0.2);
  ravel::Jit jitted(
      [&](const std::vector<Tensor>& in) {
        Tensor loss = ravel::nn::cross_entropy(mlp(in[0]), in[1]);
        opt.zero_grad();
        loss.backward();
        opt.step({loss});
        opt.zero_grad();
        return std::vector<Tensor>{loss};
      },
      params);
  Tensor x = data({24, 6}, 1).shard(devices, 0);
  std::vector<int64_t> t;
  for (int i = 0; i < 24; ++i) t.push_back(i % 3);
  Tensor y = Tensor::from_vector<int64_t>(t, {24}).shard(devices, 0);
  int failures = 0;
  std::vector<std::vector<double>> before;
  for (int call = 0; call < 40 && failures == 0; ++call) {
    before.clear();
    for (Tensor* p : params) before.push_back(p->to_vector<double>());
    try {
      jitted({x, y})[0].item<double>();
    } catch (const ravel::DeviceError& e) {
      ++failures;
      BOOST_TEST(std::string(e.what()).find("injected fault") != std::string::npos, e.what());
      // The fault must come in a replay, not the capture (about 110 kernels; each replay about 100):
      // if the capture grows past RAVEL_TBB_TEST_FAULT, raise it in tests/sharding/CMakeLists.txt.
      BOOST_TEST(call >= 1);
      for (size_t j = 0; j < params.size(); ++j)
        BOOST_TEST(params[j]->to_vector<double>() == before[j], boost::test_tools::per_element());
    }
  }
  BOOST_TEST_REQUIRE(failures == 1);
  // The replays after the failure (Note [Lane scratch]: the same flags, counts and slots, reset)
  // give the step's values: two steps from the parameters the failed call left, against the same
  // steps run eagerly on one device from those values.
  ravel::nn::MLP ref({6, 16, 3}, ravel::nn::Activation::Tanh, 5);
  std::vector<Tensor*> ref_params = ref.parameters();
  for (size_t j = 0; j < ref_params.size(); ++j)
    ref_params[j]->assign(Tensor::from_vector(before[j], ref_params[j]->shape()).cast(ref_params[j]->dtype()));
  ravel::nn::SGD ref_opt(ref_params, 0.2);
  const Tensor x1 = data({24, 6}, 1), y1 = Tensor::from_vector<int64_t>(t, {24});
  for (int call = 0; call < 2; ++call) {
    const double got = jitted({x, y})[0].item<double>();
    Tensor loss = ravel::nn::cross_entropy(ref(x1), y1);
    ref_opt.zero_grad();
    loss.backward();
    ref_opt.step({loss});
    ref_opt.zero_grad();
    BOOST_TEST(std::isfinite(got));
    BOOST_TEST(std::fabs(got - loss.item<double>()) <= 1e-5, "call " << call << " after the failure");
  }
  for (size_t j = 0; j < params.size(); ++j) {
    const std::vector<double> got = params[j]->to_vector<double>(), want = ref_params[j]->to_vector<double>();
    for (size_t i = 0; i < want.size(); ++i) BOOST_TEST(std::fabs(got[i] - want[i]) <= 1e-5);
  }
}

// Note [Constant kernels]: a closed-over tensor on the first device, used with a batch split over
// two devices, is transferred to the second device at the capture only; the replays launch the
// two devices' products and give the function's values.
BOOST_AUTO_TEST_CASE(a_closed_over_tensor_moves_to_the_other_device_once) {
  const auto m = mesh(2);
  const Tensor w = data({3}, 4);  // on tbb_cpu:0
  ravel::Jit f([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * w.exp()}; });
  for (int call = 0; call < 3; ++call) {
    const Tensor x = data({8, 3}, 5 + call);
    Tensor xs = x.shard(m, 0);
    xs.realize();  // bound part by part (Note [Inputs split inside the step]: not cut in the step)
    check_close(f({xs})[0], x * w.exp());
  }
  BOOST_TEST(f.replays() == 2);
  BOOST_TEST(f.kernels_per_call() == 2);  // one product per device: exp(w) and its transfer folded
}

// Note [Summed in pieces]: the replicated parameters' gradients are laid end to end on each
// device, moved once to the other device and summed there parameter by parameter, each sum fused
// into that parameter's update: per device, the gradients, their concatenation, one transfer and
// one update per parameter; no kernel for the whole bucket's sum. The parameters after the
// replays are the same step's on one device. (The tanh keeps x out of the weight's gradient's
// kernels, so that none of them folds into a constant.)
BOOST_AUTO_TEST_CASE(a_gradient_bucket_is_summed_inside_the_updates) {
  const auto m = mesh(2);
  Tensor w0 = data({3}, 2), b0 = data({3}, 3);
  auto run = [&](const std::vector<Device>& devices, int64_t& kernels) {
    Tensor w = devices.size() > 1 ? w0.replicate(devices) : w0.detach(), b = devices.size() > 1 ? b0.replicate(devices) : b0.detach();
    w.requires_grad_();
    b.requires_grad_();
    ravel::nn::SGD opt({&w, &b}, 0.5);
    ravel::Jit step(
        [&](const std::vector<Tensor>& in) {
          Tensor loss = ((in[0] * w).tanh() * b).sum();
          opt.zero_grad();
          loss.backward();
          opt.step({loss});
          opt.zero_grad();
          return std::vector<Tensor>{loss};
        },
        {&w, &b});
    for (int s = 0; s < 3; ++s) {
      Tensor x = data({4, 3}, 7 + s);
      if (devices.size() > 1) x = x.shard(devices, 0);
      x.realize();  // its parts bound as they are: the step's kernels alone are counted
      step({x});
    }
    kernels = step.kernels_per_call();
    return std::vector<Tensor>{w.to(m[0]), b.to(m[0])};
  };
  // The composition's kernels (the plugin's all-reduce is a host operation, not a kernel); the
  // suite's other variants set it (read at every collective).
  const char* had = std::getenv("RAVEL_PLUGIN_COLLECTIVES");
  const std::string saved = had ? had : "";
  setenv("RAVEL_PLUGIN_COLLECTIVES", "0", 1);
  int64_t one = 0, two = 0;
  const std::vector<Tensor> want = run({m[0]}, one), got = run(m, two);
  if (had) setenv("RAVEL_PLUGIN_COLLECTIVES", saved.c_str(), 1);
  else unsetenv("RAVEL_PLUGIN_COLLECTIVES");
  check_close(got[0], want[0], 1e-6);
  check_close(got[1], want[1], 1e-6);
  // Each device: one device's kernels, the bucket's concatenation and transfer, and the loss's
  // combine (a transfer and an add). The whole bucket's sum was one more per device.
  // (Under RAVEL_FUSION=none every primitive is a kernel of its own: the count is the policy's.)
  if (std::getenv("RAVEL_FUSION") == nullptr)
    BOOST_TEST(two == 2 * (one + 4), "kernels per call: " << one << " on one device, " << two << " on two");
}

// Note [Inputs split inside the step]: a batch split as the step is called (its parts unrealized
// cuts of one tensor) is passed to the capture whole and cut there: the cuts become kernels of
// the step (for two devices, the second part's copy and transfer; the first part is read in
// place), nothing is realized outside the replay, and the values are those of the parts bound
// one by one. A batch whose parts were realized before the call is bound part by part (another
// signature: a capture of its own), and so is a bundle that Tensor::shard did not make (here an
// op's result on a split tensor).
BOOST_AUTO_TEST_CASE(a_batch_split_at_the_call_is_cut_inside_the_step) {
  const auto m = mesh(2);
  const Tensor w = data({3}, 4).replicate(m);
  ravel::Jit f([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{(in[0] * w).tanh().sum(1)}; });
  ravel::Jit g([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{(in[0] * w).tanh().sum(1)}; });
  const Tensor w1 = data({3}, 4);
  for (int call = 0; call < 4; ++call) {
    const Tensor x = data({8, 3}, 5 + call);
    const Tensor want = (x * w1).tanh().sum(1);
    const Tensor got = f({x.shard(m, 0)})[0];  // split as it is passed
    BOOST_TEST(got.sharding().value() == x.shard(m, 0).sharding().value());
    check_close(got, want, 1e-6);
    Tensor xs = x.shard(m, 0);
    xs.realize();
    check_close(g({xs})[0], want, 1e-6);
  }
  BOOST_TEST(f.captures() == 1);
  BOOST_TEST(f.replays() == 3);
  BOOST_TEST(f.kernels_per_call() == g.kernels_per_call() + 2);  // the second part's copy and transfer
  // The same Jit called with realized parts: another signature, a capture of its own, same values.
  const Tensor x = data({8, 3}, 11);
  Tensor xs = x.shard(m, 0);
  xs.realize();
  check_close(f({xs})[0], (x * w1).tanh().sum(1), 1e-6);
  BOOST_TEST(f.captures() == 2);
  // (x's parts are hash-consed nodes, realized now: x.shard(m, 0) is bound part by part too.)
  check_close(f({x.shard(m, 0)})[0], (x * w1).tanh().sum(1), 1e-6);
  BOOST_TEST(f.captures() == 2);
  const Tensor x2 = data({8, 3}, 12);
  check_close(f({x2.shard(m, 0)})[0], (x2 * w1).tanh().sum(1), 1e-6);  // and back: a third capture
  BOOST_TEST(f.captures() == 3);
  // A bundle an op made (its parts are not cuts of one tensor): bound part by part.
  const Tensor x3 = data({8, 3}, 13);
  check_close(f({x3.shard(m, 0) * 2.0})[0], (x3 * 2.0 * w1).tanh().sum(1), 1e-6);
  BOOST_TEST(f.captures() == 4);
  // The split of an expression: split inside the step too (the expression realized once).
  check_close(f({(x3 * 3.0).shard(m, 0)})[0], (x3 * 3.0 * w1).tanh().sum(1), 1e-6);
  BOOST_TEST(f.captures() == 5);  // x2's signature again, but a new layout or kind clears the inner Jit
}

// Note [Bundles refilled in place]: after a replay a sharded state tensor that nothing else
// holds takes its new parts in place; one the caller kept a copy of is rebuilt, so the copy keeps
// the value it had. Both against the same updates computed on the host.
BOOST_AUTO_TEST_CASE(a_state_tensor_kept_from_an_earlier_step_keeps_its_value) {
  const auto m = mesh(2);
  Tensor w = data({3}, 4).replicate(m);
  std::vector<double> want = data({3}, 4).to_vector<double>();
  ravel::Jit step(
      [&](const std::vector<Tensor>& in) {
        w.assign(w * 0.5 + in[0].sum(0));
        return std::vector<Tensor>{w.sum()};
      },
      {&w});
  for (int call = 0; call < 5; ++call) {
    const Tensor x = data({4, 3}, 7 + call);
    const std::vector<double> xv = x.to_vector<double>();
    const std::vector<double> before = want;
    for (size_t j = 0; j < 3; ++j) want[j] = want[j] * 0.5 + xv[j] + xv[3 + j] + xv[6 + j] + xv[9 + j];
    const Tensor kept = call == 3 ? w : Tensor();  // a copy held across the call
    step({x.shard(m, 0)});
    BOOST_TEST_REQUIRE(w.sharding().value().replicated());
    for (const Tensor& part : w.shards()) check_close(part, Tensor::from_vector(want, {3}), 1e-5);
    if (kept.defined())
      for (const Tensor& part : kept.shards()) check_close(part, Tensor::from_vector(before, {3}), 1e-5);
  }
  BOOST_TEST(step.replays() == 4);
}

// Note [Choosing lanes]: the first replays measure in order, then by device, in blocks; the
// faster (by device only if 10% faster) holds for LaneChoice::kReplaysPerChoice replays and is
// then measured again, so a choice made while the machine was busy does not last the whole run.
// The measurement's logic alone, with the replays' times given.
BOOST_AUTO_TEST_CASE(the_lane_choice_is_measured_again_after_a_while) {
  using ravel::detail::jit_capture::LaneChoice;
  LaneChoice c;
  // Replays `n` times as the choice says, each taking `in_order` or `by_device` seconds; returns
  // how many went by device.
  auto replay = [&](LaneChoice& t, int n, double in_order, double by_device) {
    int lanes = 0;
    for (int i = 0; i < n; ++i) {
      const bool d = t.next_by_device();
      lanes += d ? 1 : 0;
      t.record(d, d ? by_device : in_order);
    }
    return lanes;
  };
  constexpr int k = LaneChoice::kTrialsEach, every = LaneChoice::kReplaysPerChoice;
  BOOST_TEST(replay(c, k, 2.0, 1.0) == 0);  // in order first
  BOOST_TEST(replay(c, k, 2.0, 1.0) == k);  // then by device
  BOOST_TEST(replay(c, every, 2.0, 1.0) == every);  // by device won: it holds
  // Measured again, now while the lanes are slow (another process holds a core): in order wins.
  BOOST_TEST(replay(c, 2 * k, 1.0, 3.0) == k);
  BOOST_TEST(replay(c, every, 1.0, 3.0) == 0);
  // And once the machine is quiet again, the next measurement goes back to the lanes.
  BOOST_TEST(replay(c, 2 * k, 2.0, 1.0) == k);
  BOOST_TEST(replay(c, 100, 2.0, 1.0) == 100);
  // By device must win by 10%: 5% is noise, in order stays.
  LaneChoice close;
  replay(close, 2 * k, 1.0, 0.95);
  BOOST_TEST(replay(close, 100, 1.0, 0.95) == 0);
}

namespace {

// A step over an MLP whose replays go through the same lane scratch and signature (Note [Lane
// scratch], Note [Signature of the last call]) while the calls change around them: steps 0-2 on
// 24 rows, step 3 after the user assigned new values to a parameter (the capture's state is
// rebound, not re-captured), steps 4-5 on 16 rows (another capture), steps 6-8 on 24 rows again
// (captured again: a new layout clears the captures, Note [Sharded Jit], and replayed). On one
// device without a Jit it is the reference.
Trained changing_calls(const std::vector<Device>& devices, bool jit) {
  ravel::nn::MLP mlp({6, 16, 3}, ravel::nn::Activation::Tanh, 5);
  std::vector<Tensor*> params = mlp.parameters();
  auto place = [&](const Tensor& t) { return devices.size() > 1 ? t.replicate(devices) : t; };
  for (Tensor* p : params) p->assign(place(*p));
  ravel::nn::SGD opt(params, 0.2);
  auto step = sgd_step(mlp, opt);
  ravel::Jit jitted(step, params);
  Trained out;
  for (int s = 0; s < 9; ++s) {
    const int64_t rows = s == 4 || s == 5 ? 16 : 24;
    if (s == 3) params[1]->assign(place(data(params[1]->shape(), 9)));  // the user rebinds a parameter
    Tensor x = data({rows, 6}, s);
    std::vector<int64_t> t;
    for (int64_t i = 0; i < rows; ++i) t.push_back((i * 5 + s) % 3);
    Tensor y = Tensor::from_vector<int64_t>(t, {rows});
    if (devices.size() > 1) x = x.shard(devices, 0), y = y.shard(devices, 0);
    out.losses.push_back((jit ? jitted({x, y})[0] : step({x, y})[0]).item<double>());
  }
  if (jit) {  // step 3 is a replay; 16 rows split otherwise (other bounds) clear the captures: 4 and 6 capture
    BOOST_TEST(jitted.captures() == 3);
    BOOST_TEST(jitted.replays() == 6);
  }
  for (Tensor* p : params) out.params.push_back(p->to_vector<double>());
  return out;
}

}  // namespace

// Note [Lane scratch] and Note [Signature of the last call]: what a replay by device keeps for
// the next (its flags, counts of reads and buffer slots; the last call's signature) gives the
// eager one-device values after a parameter the user rebound and across captures for another
// batch size and back; and the same bits as the replay in order.
BOOST_AUTO_TEST_CASE(replays_by_device_stay_right_across_rebinding_and_recapture) {
  const Trained eager = changing_calls(mesh(1), false);
  for (size_t n : {2u, 4u}) {
    BOOST_TEST_CONTEXT(n << " devices") {
      Trained in_order, by_device;
      {
        LanesEnv off("0");
        in_order = changing_calls(mesh(n), true);
      }
      {
        LanesEnv on("1");
        by_device = changing_calls(mesh(n), true);
      }
      for (size_t s = 0; s < eager.losses.size(); ++s)
        BOOST_TEST(std::fabs(by_device.losses[s] - eager.losses[s]) <= 1e-5, "step " << s);
      for (size_t p = 0; p < eager.params.size(); ++p)
        for (size_t i = 0; i < eager.params[p].size(); ++i)
          BOOST_TEST(std::fabs(by_device.params[p][i] - eager.params[p][i]) <= 1e-5);
      BOOST_TEST(by_device.losses == in_order.losses, boost::test_tools::per_element());
      for (size_t p = 0; p < in_order.params.size(); ++p)
        BOOST_TEST(by_device.params[p] == in_order.params[p], boost::test_tools::per_element());
    }
  }
}
