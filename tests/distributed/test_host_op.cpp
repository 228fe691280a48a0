// Host operations inside a Jit without any communicator (Note [Host operations] in
// core/src/runtime/host_op.hpp), so that the capture and replay of their steps run in every
// build, sanitizers included (the collectives use them only under mpirun). The operation here
// adds 1 on the host between begin and end, and can be told to fail.
#include <vector>

#include "ravel/jit.hpp"
#include "ravel/ravel.hpp"
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
  std::vector<float> staged;
  bool in_flight = false, fail_next_end = false;
  int begins = 0, cancels = 0;
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

BOOST_AUTO_TEST_SUITE_END()
