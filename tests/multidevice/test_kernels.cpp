// Kernels on N tbb_cpu devices give the results a naive host loop gives, whether the devices run
// synchronously or on their queues, and a failure inside queued work surfaces at the next
// synchronising call on that device (Note [Device queues]).
#include "common.hpp"

#include <cmath>

namespace mdtest {
namespace {

std::vector<float> ramp(int64_t n, float scale, float shift) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = scale * static_cast<float>(i % 97) + shift;
  return v;
}

// Every device computes an elementwise kernel and a GEMM at once (all launched before any is
// read), each with its own inputs; all are checked against host loops.
void check_kernels_on_every_device(int32_t n) {
  constexpr int64_t kLen = 70001;  // odd, and above the inline threshold with the GEMM below
  constexpr int64_t M = 37, N = 29, K = 41;
  std::vector<std::unique_ptr<Buf>> bufs;
  std::vector<std::vector<float>> as, bs;
  std::vector<std::vector<double>> gas, gbs;
  for (int32_t d = 0; d < n; ++d) {
    as.push_back(ramp(kLen, 0.5f, static_cast<float>(d)));
    bs.push_back(ramp(kLen, -0.25f, 1.0f + static_cast<float>(d)));
    std::vector<double> ga(M * K), gb(K * N);
    for (int64_t i = 0; i < M * K; ++i) ga[static_cast<size_t>(i)] = std::sin(0.1 * static_cast<double>(i + d));
    for (int64_t i = 0; i < K * N; ++i) gb[static_cast<size_t>(i)] = std::cos(0.07 * static_cast<double>(i * (d + 1)));
    gas.push_back(ga);
    gbs.push_back(gb);
    for (uint64_t bytes : {kLen * 4, kLen * 4, kLen * 4, M * K * 8, K * N * 8, M * N * 8})
      bufs.push_back(std::make_unique<Buf>(d, bytes));
    const size_t o = static_cast<size_t>(d) * 6;
    bufs[o]->write(as[d].data(), kLen * 4);
    bufs[o + 1]->write(bs[d].data(), kLen * 4);
    bufs[o + 3]->write(ga.data(), M * K * 8);
    bufs[o + 4]->write(gb.data(), K * N * 8);
    launch_fma(d, bufs[o]->get(), bufs[o + 1]->get(), 3.0f + static_cast<float>(d), bufs[o + 2]->get(), kLen);
    launch_matmul(d, bufs[o + 3]->get(), bufs[o + 4]->get(), bufs[o + 5]->get(), M, N, K);
  }
  for (int32_t d = 0; d < n; ++d) {
    const size_t o = static_cast<size_t>(d) * 6;
    const std::vector<float> got = bufs[o + 2]->read_as<float>(kLen);
    int bad = 0;
    for (int64_t i = 0; i < kLen && bad < 3; ++i) {
      const float want = as[d][i] * bs[d][i] + (3.0f + static_cast<float>(d));
      if (got[i] != want) {
        ++bad;
        BOOST_ERROR("device " << d << " fma[" << i << "] = " << got[i] << ", expected " << want);
      }
    }
    const std::vector<double> c = bufs[o + 5]->read_as<double>(M * N);
    for (int64_t i = 0; i < M && bad < 3; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double want = 0;
        for (int64_t k = 0; k < K; ++k) want += gas[d][i * K + k] * gbs[d][k * N + j];
        if (std::fabs(c[i * N + j] - want) > 1e-12 * (1 + std::fabs(want))) {
          ++bad;
          BOOST_ERROR("device " << d << " C[" << i << "," << j << "] = " << c[i * N + j] << ", expected " << want);
        }
      }
  }
}

BOOST_AUTO_TEST_CASE(kernels_on_every_device_match_host_loops) {
  for (int32_t n : kCounts) {
    BOOST_TEST_CONTEXT("RAVEL_TBB_DEVICES=" << n) {
      Session s(n);
      check_kernels_on_every_device(n);
    }
  }
}

BOOST_AUTO_TEST_CASE(queues_can_be_forced_on_or_off) {
  {  // one device with a queue: the asynchronous path without a second device
    Session s(1, "1");
    BOOST_TEST(detail(0, "threads") >= 1);
    check_kernels_on_every_device(1);
  }
  {  // several devices without queues: synchronous, the same results
    Session s(3, "0");
    check_kernels_on_every_device(3);
  }
  {  // device 0 on the launching thread, devices 1 and 2 queued: the same results
    Session s(3, "caller");
    check_kernels_on_every_device(3);
  }
}

BOOST_AUTO_TEST_CASE(a_failure_in_queued_work_surfaces_at_the_next_synchronisation) {
  constexpr int64_t n = 1024;
  {
    Session s(2, "", "2");  // the second kernel launched fails while it runs
    Buf a(1, n * 4), b(1, n * 4), c(0, n * 4);
    launch_fill(1, a.get(), n, 1.0f);
    launch_fill(1, b.get(), n, 2.0f);  // launching succeeds: the failure comes later
    launch_fill(0, c.get(), n, 3.0f);
    // Device 0 has nothing to report; device 1 reports the failure once, then is usable again.
    ok(api().synchronize(0), "synchronize 0");
    expect_error(api().synchronize(1), "injected fault (RAVEL_TBB_TEST_FAULT)", RVL_STATUS_DEVICE_ERROR);
    ok(api().synchronize(1), "synchronize 1 again");
    launch_fill(1, b.get(), n, 4.0f);
    BOOST_TEST(b.read_as<float>(n)[n - 1] == 4.0f);
  }
  {  // a read is a synchronising call too
    Session s(2, "", "1");
    Buf a(1, n * 4);
    launch_fill(1, a.get(), n, 1.0f);
    std::vector<float> host(n);
    expect_error(api().buffer_read(nullptr, a.get(), 0, host.data(), n * 4), "injected fault", RVL_STATUS_DEVICE_ERROR);
  }
  {  // and an event's synchronisation
    Session s(3, "", "1");
    Buf a(2, n * 4);
    launch_fill(2, a.get(), n, 1.0f);
    rvl_stream* st = nullptr;
    ok(api().stream_create(2, &st), "stream_create");
    rvl_event* e = nullptr;
    ok(api().event_record(st, &e), "event_record");  // a tbb_cpu device's streams share its queue
    expect_error(api().event_synchronize(e), "injected fault", RVL_STATUS_DEVICE_ERROR);
    ok(api().event_destroy(e), "event_destroy");
    ok(api().stream_destroy(st), "stream_destroy");
  }
  {  // without queues the failing launch itself reports it
    Session s(1, "", "1");
    Buf a(0, n * 4);
    rvl_program p{};
    p.struct_size = sizeof p;
    p.rank = 1;
    p.shape[0] = n;
    rvl_instruction c{};
    c.op = RVL_OP_CONST;
    c.dtype = RVL_DTYPE_F32;
    c.src[0] = c.src[1] = c.src[2] = -1;
    p.n_instructions = 1;
    p.instructions = &c;
    p.output = vector_operand(a.get(), RVL_DTYPE_F32, n);
    expect_error(api().execute_program(0, nullptr, &p), "injected fault", RVL_STATUS_DEVICE_ERROR);
  }
}

}  // namespace
}  // namespace mdtest
