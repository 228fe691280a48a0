// Copies between tbb_cpu devices (buffer_copy_peer, ABI 1.5; Note [Peer copies]): exact for every
// pair of devices, dtype and size (zero and odd sizes, odd offsets), and ordered on both devices
// without any synchronisation by the host.
#include "common.hpp"

#include <ravel/backend.hpp>

#include <random>

namespace mdtest {
namespace {

BOOST_AUTO_TEST_CASE(copies_between_every_pair_are_exact) {
  std::mt19937_64 rng(21);
  for (int32_t n : kCounts) {
    BOOST_TEST_CONTEXT("RAVEL_TBB_DEVICES=" << n) {
      Session s(n);
      for (int32_t from = 0; from < n; ++from)
        for (int32_t to = 0; to < n; ++to)
          for (int32_t dt = 0; dt < RVL_DTYPE_COUNT_; ++dt)
            for (uint64_t elems : {0, 1, 7, 1031}) {
              BOOST_TEST_CONTEXT(from << " -> " << to << ", " << rvl::dtype_name(dt) << " x " << elems) {
                const uint64_t es = rvl::dtype_size(dt), bytes = elems * es, off = es;  // odd element offsets
                std::vector<unsigned char> data(bytes + 2 * es);
                for (auto& c : data) c = static_cast<unsigned char>(rng());
                Buf src(from, bytes + 2 * es), dst(to, bytes + 2 * es);
                src.write(data.data(), data.size());
                const std::vector<unsigned char> fill(data.size(), 0xA5);
                dst.write(fill.data(), fill.size());
                ok(api().buffer_copy_peer(nullptr, src.get(), off, nullptr, dst.get(), off, bytes), "copy");
                const std::vector<unsigned char> got = dst.read(data.size());  // no synchronize first
                std::vector<unsigned char> want = fill;
                std::copy(data.begin() + off, data.begin() + off + bytes, want.begin() + off);
                BOOST_TEST(got == want);
              }
            }
    }
  }
}

// Device A writes (a long kernel, still queued), the bytes go to B, and B's kernel and read see
// them; A then overwrites its source, which must not reach B. No event or synchronize is used.
// Both modes with queues: every device queued, and device 0 on the launching thread with the others
// queued (RAVEL_TBB_ASYNC=caller), where a copy goes from the host's device to a queued one or back.
BOOST_AUTO_TEST_CASE(peer_copies_are_ordered_on_both_devices) {
  constexpr int64_t n = 1 << 16;
  for (const char* mode : {"1", "caller"})
  for (int32_t count : {2, 3, 8})
  for (bool from_last : {false, true}) {
    BOOST_TEST_CONTEXT("RAVEL_TBB_ASYNC=" << mode << ", RAVEL_TBB_DEVICES=" << count << (from_last ? ", from the last" : ", to the last")) {
      Session s(count, mode);
      const int32_t a = from_last ? count - 1 : 0, b = from_last ? 0 : count - 1;
      Buf src(a, n * 4), dst(b, n * 4), ones(b, n * 4), sum(b, n * 4);
      launch_fill(b, ones.get(), n, 1.0f);
      for (int round = 1; round <= 3; ++round) {
        launch_fill(a, src.get(), n, static_cast<float>(round), 200);  // slow: still running when copied
        ok(api().buffer_copy_peer(nullptr, src.get(), 0, nullptr, dst.get(), 0, n * 4), "copy");
        launch_fill(a, src.get(), n, -1.0f);                            // overwrites the source afterwards
        launch_fma(b, dst.get(), ones.get(), 0.5f, sum.get(), n);       // reads the copy on B
        const std::vector<float> got = sum.read_as<float>(n);
        BOOST_TEST(got.front() == round + 0.5f);
        BOOST_TEST(got.back() == round + 0.5f);
        BOOST_TEST(dst.read_as<float>(n)[n / 2] == static_cast<float>(round));
      }
      BOOST_TEST(src.read_as<float>(n)[7] == -1.0f);
    }
  }
}

// buffer_copy between devices follows the same contract; events order work across devices.
// Device x writes, device y reads; in both modes with queues and both directions (see above).
void copy_and_events_between(int32_t x, int32_t y) {
  constexpr int64_t n = 4096;
  Buf src(x, n * 4), dst(y, n * 4), out(y, n * 4), ones(y, n * 4);
  launch_fill(y, ones.get(), n, 1.0f);
  launch_fill(x, src.get(), n, 5.0f, 100);
  ok(api().buffer_copy(nullptr, src.get(), 0, dst.get(), 0, n * 4), "buffer_copy across devices");
  BOOST_TEST(dst.read_as<float>(n)[n - 1] == 5.0f);
  // Device 1 waits for an event of device 0: its kernel reads what device 0 wrote into a buffer
  // that device 0 then copies over (the copy itself is what makes the data reach device 1).
  rvl_stream* s0 = nullptr;
  rvl_stream* s1 = nullptr;
  ok(api().stream_create(x, &s0), "stream x");
  ok(api().stream_create(y, &s1), "stream y");
  launch_fill(x, src.get(), n, 7.0f, 100);
  rvl_event* e = nullptr;
  ok(api().event_record(s0, &e), "event_record");
  ok(api().event_wait(s1, e), "event_wait");
  ok(api().event_destroy(e), "destroying the event while work still waits for it");
  ok(api().buffer_copy_peer(s0, src.get(), 0, s1, dst.get(), 0, n * 4), "copy on streams");
  launch_fma(y, dst.get(), ones.get(), 1.0f, out.get(), n);
  ok(api().stream_synchronize(s1), "stream_synchronize");
  BOOST_TEST(out.read_as<float>(n)[0] == 8.0f);
  ok(api().stream_destroy(s0), "stream_destroy 0");
  ok(api().stream_destroy(s1), "stream_destroy 1");
}

BOOST_AUTO_TEST_CASE(buffer_copy_and_events_across_devices) {
  for (const char* mode : {"1", "caller"})
    for (bool swapped : {false, true})
      BOOST_TEST_CONTEXT("RAVEL_TBB_ASYNC=" << mode << (swapped ? ", device 1 to 0" : ", device 0 to 1")) {
        Session s(2, mode);
        copy_and_events_between(swapped ? 1 : 0, swapped ? 0 : 1);
      }
}

BOOST_AUTO_TEST_CASE(shutdown_with_work_queued_on_every_device) {
  // Shutdown runs what is queued (copies that wait for each other included) and joins the workers.
  constexpr int64_t n = 1 << 14;
  Session s(4);
  std::vector<std::unique_ptr<Buf>> bufs;
  for (int32_t d = 0; d < 4; ++d) bufs.push_back(std::make_unique<Buf>(d, n * 4));
  for (int round = 0; round < 5; ++round)
    for (int32_t d = 0; d < 4; ++d) {
      launch_fill(d, bufs[d]->get(), n, static_cast<float>(d), 20);
      ok(api().buffer_copy_peer(nullptr, bufs[d]->get(), 0, nullptr, bufs[(d + 1) % 4]->get(), 0, n * 4), "ring");
    }
  for (auto& b : bufs) b.reset();  // freed behind the queued work
}

}  // namespace
}  // namespace mdtest
