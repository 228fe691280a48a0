// Host operations inside a Jit without any communicator (Note [Host operations] in
// core/src/runtime/host_op.hpp), so that the capture and replay of their steps run in every
// build, sanitizers included (the collectives use them only under mpirun). The operation here
// adds 1 on the host between begin and end, and can be told to fail.
#include <cstdlib>
#include <vector>

#include "ravel/jit.hpp"
#include "ravel/ravel.hpp"
#include "runtime/execute.hpp"
#include "runtime/host_op.hpp"
#include "test_support.hpp"

using namespace ravel;
using namespace ravel::detail;

namespace {

class PlusOne final : public HostOp {
 public:
  std::string label() const override { return "plus_one"; }
  void begin(const std::vector<const DeviceBuffer*>& in) override {
    BOOST_REQUIRE(!in_flight);  // begin/end never nest for one object
    staged.resize(in[0]->bytes() / sizeof(float));
    in[0]->read(staged.data(), in[0]->bytes());
    in_flight = true;
    ++begins;
    begun_after = kernels_launched_on_this_thread();
  }
  void end(const std::vector<DeviceBuffer*>& out) override {
    BOOST_REQUIRE(in_flight);
    in_flight = false;
    if (fail_next_end) {
      fail_next_end = false;
      throw ValueError("plus_one: told to fail");
    }
    for (float& v : staged) v += 1;
    out[0]->write(staged.data(), staged.size() * sizeof(float));
  }
  void cancel() noexcept override { in_flight = false, ++cancels; }
  bool progress() noexcept override {
    progressed += in_flight ? 1 : 1000;  // 1000: called when not begun
    return in_flight;
  }
  std::vector<float> staged;
  bool in_flight = false, fail_next_end = false;
  int begins = 0, cancels = 0, progressed = 0;
  int64_t begun_after = -1;  // kernels this thread had launched when the last begin ran
};

// Runs `op` on t as the collectives do: begin, then end into one output of t's shape.
Tensor plus_one(const std::shared_ptr<PlusOne>& op, const Tensor& t) {
  begin_host_op(op, {t});
  return end_host_op(op, {HostOutput{t.dtype(), t.shape(), t.device()}})[0];
}

}  // namespace

BOOST_AUTO_TEST_SUITE(host_operations)

BOOST_AUTO_TEST_CASE(a_jit_replays_host_operations_between_kernels) {
  auto first = std::make_shared<PlusOne>(), second = std::make_shared<PlusOne>();
  Tensor w = Tensor::from_vector<float>({1, 2, 3}, {3});
  Jit f([&](const std::vector<Tensor>& in) {
    Tensor a = plus_one(first, in[0] * 2.0);  // a kernel before, two operations in flight at once:
    begin_host_op(second, {a + w});           // `second` begins before `first`'s result is read
    Tensor b = end_host_op(second, {HostOutput{DType::F32, {3}, a.device()}})[0];
    w.assign(b * 0.5);                        // state, replaced every call
    return std::vector<Tensor>{b * 3.0, a};
  }, {&w});
  std::vector<float> wv{1, 2, 3};
  for (int c = 0; c < 4; ++c) {
    const std::vector<float> x{float(c), float(-c), 0.5f};
    const std::vector<Tensor> out = f({Tensor::from_vector(x, {3})});
    std::vector<float> a(3), b(3);
    for (int i = 0; i < 3; ++i) a[i] = x[i] * 2 + 1, b[i] = a[i] + wv[i] + 1, b[i] *= 3;
    BOOST_TEST(out[1].to_vector<float>() == a, boost::test_tools::per_element());
    BOOST_TEST(out[0].to_vector<float>() == b, boost::test_tools::per_element());
    for (int i = 0; i < 3; ++i) wv[i] = b[i] / 3 * 0.5f;
    BOOST_TEST(w.to_vector<float>() == wv, boost::test_tools::per_element());
  }
  BOOST_TEST(f.captures() == 1);
  BOOST_TEST(f.replays() == 3);
  BOOST_TEST(first->begins == 4);
  BOOST_TEST(second->begins == 4);
  BOOST_TEST(f.kernels_per_call() >= 3);  // host operations are not counted as kernels
}

BOOST_AUTO_TEST_CASE(a_failed_replay_cancels_what_it_began_and_keeps_the_state) {
  auto first = std::make_shared<PlusOne>(), second = std::make_shared<PlusOne>();
  Tensor w = Tensor::from_vector<float>({0, 0}, {2});
  Jit f([&](const std::vector<Tensor>& in) {
    begin_host_op(first, {in[0]});
    begin_host_op(second, {in[0] * 2.0});  // both in flight; `first` ends first
    Tensor a = end_host_op(first, {HostOutput{DType::F32, {2}, in[0].device()}})[0];
    Tensor b = end_host_op(second, {HostOutput{DType::F32, {2}, in[0].device()}})[0];
    w.assign(w + a + b);
    return std::vector<Tensor>{w};
  }, {&w});
  f({Tensor::from_vector<float>({1, 2}, {2})});  // capture: w = (1+1) + (2+1), (2+1) + (4+1)
  BOOST_TEST(w.to_vector<float>() == (std::vector<float>{5, 8}), boost::test_tools::per_element());
  first->fail_next_end = true;
  BOOST_CHECK_THROW(f({Tensor::from_vector<float>({1, 1}, {2})}), ValueError);
  BOOST_TEST(second->cancels == 1);  // begun, never ended: cancelled by the replay
  BOOST_TEST(first->cancels == 0);   // its end threw: it gave up by itself
  BOOST_TEST(!second->in_flight);
  BOOST_TEST(w.to_vector<float>() == (std::vector<float>{5, 8}), boost::test_tools::per_element());
  f({Tensor::from_vector<float>({1, 1}, {2})});  // the capture still works: + (1+1) + (2+1)
  BOOST_TEST(w.to_vector<float>() == (std::vector<float>{10, 13}), boost::test_tools::per_element());
  BOOST_TEST(f.captures() == 1);
}

// Note [Host operations begun as their inputs are made]: `early`'s input is made by the first
// kernels of the pass, `late`'s by kernels that read it; `early` must begin between them, in the
// eager capture and in every replay, in order and with RAVEL_JIT_LANES=1 (a capture with host
// steps replays in order), and the replays' results must be bit-identical to the capture's.
BOOST_AUTO_TEST_CASE(begin_host_ops_begins_each_operation_between_the_kernels_that_make_the_inputs) {
  auto early = std::make_shared<PlusOne>(), late = std::make_shared<PlusOne>();
  int64_t start = 0;
  Jit f([&](const std::vector<Tensor>& in) {
    Tensor a = (in[0] * 2.0).exp();                             // made first
    Tensor b = ((a - a.max().reshape({1})).exp() / (a + 1.0).sum().reshape({1})).tanh();  // reads a: later kernels
    begin_host_ops({early, late}, {{a}, {b}});
    Tensor ea = end_host_op(early, {HostOutput{DType::F32, {4}, a.device()}})[0];
    Tensor eb = end_host_op(late, {HostOutput{DType::F32, {4}, b.device()}})[0];
    return std::vector<Tensor>{ea, eb};
  });
  const std::vector<float> x{0.1f, -0.3f, 0.7f, 0.2f};
  std::vector<float> want_a(4), want_b(4);
  {  // the reference: the same expression realized plainly, + 1 on the host
    Tensor t = Tensor::from_vector(x, {4}), a = (t * 2.0).exp();
    Tensor b = ((a - a.max().reshape({1})).exp() / (a + 1.0).sum().reshape({1})).tanh();
    want_a = a.to_vector<float>(), want_b = b.to_vector<float>();
    for (int i = 0; i < 4; ++i) want_a[i] += 1, want_b[i] += 1;
  }
  std::vector<float> first_a, first_b;
  for (int call = 0; call < 6; ++call) {
    if (call == 3) setenv("RAVEL_JIT_LANES", "1", 1);
    Tensor in = Tensor::from_vector(x, {4});
    start = kernels_launched_on_this_thread();
    const std::vector<Tensor> out = f({in});
    const int64_t end = kernels_launched_on_this_thread();
    BOOST_TEST_MESSAGE("call " << call << ": kernels " << start << ".." << end << ", early began after "
                       << early->begun_after << ", late after " << late->begun_after);
    BOOST_TEST(early->begun_after > start);             // after the kernel that made a
    BOOST_TEST(late->begun_after > early->begun_after);  // b's kernels ran after early began
    BOOST_TEST(late->begun_after <= end);
    // Note [Progress between kernels]: `early` is polled after each of b's kernels, in the eager
    // call and in the replays; `late`, begun after the last kernel, never.
    BOOST_TEST(early->progressed == late->begun_after - early->begun_after);
    BOOST_TEST(late->progressed == 0);
    early->progressed = late->progressed = 0;
    const std::vector<float> a = out[0].to_vector<float>(), b = out[1].to_vector<float>();
    BOOST_TEST(a == want_a, boost::test_tools::per_element());
    BOOST_TEST(b == want_b, boost::test_tools::per_element());
    if (call == 0) first_a = a, first_b = b;
    BOOST_TEST(a == first_a, boost::test_tools::per_element());  // bit-identical replays
    BOOST_TEST(b == first_b, boost::test_tools::per_element());
  }
  unsetenv("RAVEL_JIT_LANES");
  BOOST_TEST(f.captures() == 1);
  BOOST_TEST(f.replays() == 5);
  BOOST_TEST(early->begins == 6);
  BOOST_TEST(late->begins == 6);
}

// An operation whose input is ready late holds back the ones after it: they begin in index
// order (every rank must start its collectives in the same order), however the inputs are made.
BOOST_AUTO_TEST_CASE(begin_host_ops_begins_in_index_order) {
  auto first = std::make_shared<PlusOne>(), second = std::make_shared<PlusOne>();
  Tensor x = Tensor::from_vector<float>({1, 2, 3}, {3});
  Tensor a = (x * 3.0).exp(), b = (a / a.sum().reshape({1})).sin();  // a is made before b
  const int64_t start = kernels_launched_on_this_thread();
  begin_host_ops({first, second}, {{b}, {a}});  // `second`'s input is made first
  BOOST_TEST(first->begun_after > start);
  BOOST_TEST(second->begun_after >= first->begun_after);  // not before `first`
  const Tensor eb = end_host_op(first, {HostOutput{DType::F32, {3}, x.device()}})[0];
  const Tensor ea = end_host_op(second, {HostOutput{DType::F32, {3}, x.device()}})[0];
  std::vector<float> wa = a.to_vector<float>(), wb = b.to_vector<float>();
  for (float& v : wa) v += 1;
  for (float& v : wb) v += 1;
  BOOST_TEST(ea.to_vector<float>() == wa, boost::test_tools::per_element());
  BOOST_TEST(eb.to_vector<float>() == wb, boost::test_tools::per_element());
}

// A failure while beginning (here: an undefined input of the second operation) is a typed error;
// the operations begun so far are the caller's to cancel, and nothing stays in flight after that.
BOOST_AUTO_TEST_CASE(begin_host_ops_fails_cleanly) {
  auto first = std::make_shared<PlusOne>(), second = std::make_shared<PlusOne>();
  Tensor x = Tensor::from_vector<float>({1, 2}, {2});
  BOOST_CHECK_THROW(begin_host_ops({first, second}, {{x * 2.0}, {Tensor()}}), ValueError);
  BOOST_TEST(first->begins == 0);  // inputs are checked before anything runs
  BOOST_CHECK_THROW(begin_host_ops({first}, {{x}, {x}}), InternalError);
}

BOOST_AUTO_TEST_SUITE_END()
