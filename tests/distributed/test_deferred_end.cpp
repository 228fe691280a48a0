// A host operation's end deferred to the first reader of its results (Note [Results ended at
// their first reader] in core/src/runtime/host_op_deferred.cpp), without any communicator, so it
// runs in every build (sanitizers included). The operation adds 1 on the host between begin and
// end, counts its ends and progress calls, and can be told to fail.
#include <string>
#include <vector>

#include "ravel/jit.hpp"
#include "ravel/ravel.hpp"
#include "runtime/capture.hpp"
#include "runtime/host_op.hpp"
#include "test_support.hpp"

using namespace ravel;
using namespace ravel::detail;

namespace {

class AddOne final : public HostOp {
 public:
  std::string label() const override { return "add_one"; }
  void begin(const std::vector<const DeviceBuffer*>& in) override {
    staged.resize(in[0]->bytes() / sizeof(float));
    in[0]->read(staged.data(), in[0]->bytes());
    in_flight = true;
  }
  void end(const std::vector<DeviceBuffer*>& out) override {
    in_flight = false;
    ++ends;
    if (fail_next_end) {
      fail_next_end = false;
      throw ValueError("add_one: told to fail");
    }
    for (float& v : staged) v += 1;
    out[0]->write(staged.data(), staged.size() * sizeof(float));
  }
  void cancel() noexcept override { in_flight = false, ++cancels; }
  bool progress() noexcept override {
    progressed += in_flight ? 1 : 1000;  // 1000: called when not in flight
    return true;
  }
  std::vector<float> staged;
  bool in_flight = false, fail_next_end = false;
  int ends = 0, cancels = 0, progressed = 0;
};

// Begins `op` on t and defers its end: the result is a realized leaf whose buffer is pending.
Tensor add_one_later(const std::shared_ptr<AddOne>& op, const Tensor& t) {
  begin_host_op(op, {t});
  return end_host_op_at_first_read(op, {HostOutput{t.dtype(), t.shape(), t.device()}})[0];
}

// 'K' a kernel, 'B' a begin, 'E' an end, in the order they ran.
class EndOrder final : public KernelRecorder {
 public:
  void kernel_ran(const std::shared_ptr<const Recipe>&, const CachedKernel&, const BufferOf&, const Node&) override {
    order += 'K';
  }
  void host_op_begun(const std::shared_ptr<HostOp>&, const std::vector<std::shared_ptr<DeviceBuffer>>&) override {
    order += 'B';
  }
  void host_op_ended(const std::shared_ptr<HostOp>&, const std::vector<std::shared_ptr<DeviceBuffer>>&,
                     const std::vector<Device>&) override {
    order += 'E';
  }
  std::string order;
};

std::vector<float> plus_k(std::vector<float> v, float k) {
  for (float& x : v) x += k;
  return v;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(deferred_ends)

// Two operations in flight; a realization that reads only the second one's result ends only the
// second, right before the kernel that reads it; the first ends at its own read-back.
BOOST_AUTO_TEST_CASE(the_end_runs_right_before_the_first_kernel_that_reads_the_result) {
  auto first = std::make_shared<AddOne>(), second = std::make_shared<AddOne>();
  const std::vector<float> x{1, 2, 3}, y{10, 20, 30};
  EndOrder rec;
  Tensor a, b, c;
  {
    RecordingScope scope(&rec);
    a = add_one_later(first, Tensor::from_vector(x, {3}));
    b = add_one_later(second, Tensor::from_vector(y, {3}));
    BOOST_TEST(rec.order == "BB");
    BOOST_TEST(first->ends + second->ends == 0);  // nothing waited for yet
    Tensor w = Tensor::from_vector<float>({5, 5, 5}, {3}) * 2.0;
    c = (w + b * 3.0).realize();  // w's kernel may run first; b's end comes before b's reader
  }
  BOOST_TEST(second->ends == 1);
  BOOST_TEST(first->ends == 0);
  BOOST_TEST(rec.order.find('E') != std::string::npos);
  BOOST_TEST(rec.order.find('E') < rec.order.rfind('K'));  // the wait, then the kernel that reads it
  BOOST_TEST(std::count(rec.order.begin(), rec.order.end(), 'E') == 1);
  std::vector<float> want(3);
  for (int i = 0; i < 3; ++i) want[i] = 10 + (y[i] + 1) * 3;
  BOOST_TEST(c.to_vector<float>() == want, boost::test_tools::per_element());
  BOOST_TEST(a.to_vector<float>() == plus_k(x, 1), boost::test_tools::per_element());  // a read-back ends it
  BOOST_TEST(first->ends == 1);
  BOOST_TEST(b.to_vector<float>() == plus_k(y, 1), boost::test_tools::per_element());
  BOOST_TEST(second->ends == 1);  // once
}

// While an end is pending, each kernel of a realization gives it a progress call (MPI advances a
// non-blocking collective only inside its calls).
BOOST_AUTO_TEST_CASE(pending_operations_are_progressed_between_kernels) {
  end_deferred_host_ops();  // only this one pending (the oldest gets the call)
  auto op = std::make_shared<AddOne>();
  Tensor r = add_one_later(op, Tensor::from_vector<float>({1, 2}, {2}));
  Tensor u = Tensor::from_vector<float>({3, 4}, {2});
  ((u * 2.0).sum() + u.max()).realize();  // kernels that do not read r
  BOOST_TEST(op->ends == 0);
  BOOST_TEST(op->progressed >= 1);
  BOOST_TEST(op->progressed < 1000);  // only while in flight
  BOOST_TEST(r.to_vector<float>() == (std::vector<float>{2, 3}), boost::test_tools::per_element());
}

// A failed end is thrown where the first reader needed it, and again at every later access:
// the bytes that were never written are never read.
BOOST_AUTO_TEST_CASE(a_failed_end_is_thrown_at_every_access_to_its_results) {
  auto op = std::make_shared<AddOne>();
  Tensor r = add_one_later(op, Tensor::from_vector<float>({1, 2}, {2}));
  op->fail_next_end = true;
  BOOST_CHECK_THROW((r * 2.0).realize(), ValueError);
  BOOST_CHECK_THROW(r.to_vector<float>(), ValueError);
  BOOST_CHECK_THROW((r + 1.0).realize(), ValueError);
  BOOST_TEST(op->ends == 1);     // tried once
  BOOST_TEST(op->cancels == 0);  // its end threw: it gave up by itself
  end_deferred_host_ops();       // nothing left pending
  Tensor ok = add_one_later(op, Tensor::from_vector<float>({5}, {1}));  // the mechanism still works
  BOOST_TEST(ok.to_vector<float>() == (std::vector<float>{6}), boost::test_tools::per_element());
}

// In a Jit the end is recorded where its first reader was, and a result returned unread is
// ended before the capture closes; every replay gives what the eager call gives. An operation
// deferred before a call is ended before the call (a capture cannot hold an end it did not begin).
BOOST_AUTO_TEST_CASE(a_jit_captures_the_end_at_its_first_reader_and_replays_it) {
  auto read = std::make_shared<AddOne>(), unread = std::make_shared<AddOne>();
  Jit f([&](const std::vector<Tensor>& in) {
    Tensor r = add_one_later(read, in[0] * 2.0);
    Tensor s = add_one_later(unread, in[0]);
    return std::vector<Tensor>{r * 3.0, s};
  });
  for (int c = 0; c < 4; ++c) {
    auto before = std::make_shared<AddOne>();
    Tensor x = add_one_later(before, Tensor::from_vector<float>({float(c), 1}, {2}));  // pending at the call
    const std::vector<Tensor> out = f({x});
    BOOST_TEST(before->ends == 1);
    const std::vector<float> xv = plus_k({float(c), 1}, 1);
    BOOST_TEST(out[0].to_vector<float>() == (std::vector<float>{(xv[0] * 2 + 1) * 3, (xv[1] * 2 + 1) * 3}),
               boost::test_tools::per_element());
    BOOST_TEST(out[1].to_vector<float>() == plus_k(xv, 1), boost::test_tools::per_element());
  }
  BOOST_TEST(f.captures() == 1);
  BOOST_TEST(f.replays() == 3);
  BOOST_TEST(read->ends == 4);
  BOOST_TEST(unread->ends == 4);
}

BOOST_AUTO_TEST_SUITE_END()
