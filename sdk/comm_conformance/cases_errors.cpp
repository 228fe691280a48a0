// Failures a plugin must report as statuses: bad arguments (before anything starts, so the
// ranks' sequences of operations stay matched), a late peer (TIMEOUT within the deadline, the
// request still usable afterwards), messages of the wrong size, and split.
#include <chrono>
#include <vector>

#include "cases.hpp"

namespace ravel::comm_conformance {

namespace {

void expect(Runner& run, const std::string& what, const Status& s, rvl_coll_status want) {
  if (s.code == want) return run.pass();
  run.fail(what, std::string("expected ") + status_name(want) + ", got " + status_name(s.code) + ": " + s.message);
}

void barrier(Runner& run, const std::string& what) {
  Status s = run.plugin.run([&](rvl_coll_request** r) { return run.plugin.api()->barrier(run.comm, r); }, kTimeoutMs);
  expect(run, what, s, RVL_COLL_STATUS_OK);
}

}  // namespace

void run_error_cases(Runner& run) {
  const rvl_collectives_api* api = run.plugin.api();
  float x[4] = {1, 2, 3, 4}, y[4];
  rvl_coll_request* r = nullptr;
  expect(run, "all_reduce with dtype 99", run.plugin.take(api->all_reduce(run.comm, x, y, 4, static_cast<rvl_dtype>(99), RVL_COLL_SUM, &r)),
         RVL_COLL_STATUS_INVALID_ARGUMENT);
  expect(run, "all_reduce with op 99", run.plugin.take(api->all_reduce(run.comm, x, y, 4, RVL_DTYPE_F32, static_cast<rvl_coll_op>(99), &r)),
         RVL_COLL_STATUS_INVALID_ARGUMENT);
  expect(run, "all_reduce with NULL buffers", run.plugin.take(api->all_reduce(run.comm, nullptr, nullptr, 4, RVL_DTYPE_F32, RVL_COLL_SUM, &r)),
         RVL_COLL_STATUS_INVALID_ARGUMENT);
  expect(run, "broadcast from rank -1", run.plugin.take(api->broadcast(run.comm, x, 4, RVL_DTYPE_F32, -1, &r)),
         RVL_COLL_STATUS_INVALID_ARGUMENT);
  expect(run, "broadcast from rank size", run.plugin.take(api->broadcast(run.comm, x, 4, RVL_DTYPE_F32, run.size, &r)),
         RVL_COLL_STATUS_INVALID_ARGUMENT);
  expect(run, "send to itself", run.plugin.take(api->send(run.comm, x, 4, RVL_DTYPE_F32, run.rank, 0, &r)),
         RVL_COLL_STATUS_INVALID_ARGUMENT);
  expect(run, "request_wait with a negative timeout", run.plugin.take(api->request_wait(nullptr, -1)),
         RVL_COLL_STATUS_INVALID_ARGUMENT);
  barrier(run, "barrier after the argument errors");
  if (run.size < 2) return;

  // A late sender: rank 0 waits 300 ms for a message rank 1 sends only after a barrier.
  float got[4] = {0, 0, 0, 0};
  if (run.rank == 0) {
    rvl_coll_request* left = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    Status s = run.plugin.run([&](rvl_coll_request** q) { return api->recv(run.comm, got, 4, RVL_DTYPE_F32, 1, 11, q); },
                              300, &left);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    expect(run, "recv from a late rank 1 (300 ms deadline)", s, RVL_COLL_STATUS_TIMEOUT);
    if (s.code == RVL_COLL_STATUS_TIMEOUT && (ms < 290 || ms > 5000))
      run.fail("recv deadline", "TIMEOUT after " + std::to_string(ms) + " ms, expected about 300");
    if (s.code == RVL_COLL_STATUS_TIMEOUT && s.rank != -1 && s.rank != 1)
      run.fail("recv deadline", "error_rank " + std::to_string(s.rank) + ", expected 1 (or -1)");
    barrier(run, "barrier after the deadline");
    if (left) {  // the request stays valid after TIMEOUT: it completes once rank 1 sends
      Status again = run.plugin.take(api->request_wait(left, kTimeoutMs));
      api->request_free(left);
      expect(run, "waiting again on the timed-out recv", again, RVL_COLL_STATUS_OK);
      if (again.ok() && (got[0] != 1 || got[3] != 4)) run.fail("late recv", "wrong data");
    }
  } else {
    barrier(run, "barrier after the deadline");
    if (run.rank == 1) {
      Status s = run.plugin.run([&](rvl_coll_request** q) { return api->send(run.comm, x, 4, RVL_DTYPE_F32, 0, 11, q); },
                                kTimeoutMs);
      expect(run, "the late send", s, RVL_COLL_STATUS_OK);
    }
  }

  // Wrong sizes: rank 1 sends 3 elements where rank 0 expects 4, then 4 where it expects 2.
  if (run.rank == 0) {
    Status s = run.plugin.run([&](rvl_coll_request** q) { return api->recv(run.comm, got, 4, RVL_DTYPE_F32, 1, 12, q); },
                              kTimeoutMs);
    expect(run, "recv of 4 elements, 3 sent", s, RVL_COLL_STATUS_INVALID_ARGUMENT);
    s = run.plugin.run([&](rvl_coll_request** q) { return api->recv(run.comm, got, 2, RVL_DTYPE_F32, 1, 13, q); },
                       kTimeoutMs);
    expect(run, "recv of 2 elements, 4 sent", s, RVL_COLL_STATUS_INVALID_ARGUMENT);
  } else if (run.rank == 1) {
    expect(run, "send of 3", run.plugin.run([&](rvl_coll_request** q) { return api->send(run.comm, x, 3, RVL_DTYPE_F32, 0, 12, q); }, kTimeoutMs),
           RVL_COLL_STATUS_OK);
    expect(run, "send of 4", run.plugin.run([&](rvl_coll_request** q) { return api->send(run.comm, x, 4, RVL_DTYPE_F32, 0, 13, q); }, kTimeoutMs),
           RVL_COLL_STATUS_OK);
  }
  barrier(run, "barrier after the size errors");

  // split: even and odd ranks, each ordered by descending rank (key = -rank).
  if (api->comm_split == nullptr) return;
  rvl_communicator* half = nullptr;
  Status s = run.plugin.take(api->comm_split(run.comm, run.rank % 2, -run.rank, kTimeoutMs, &half));
  expect(run, "comm_split", s, RVL_COLL_STATUS_OK);
  if (!s.ok() || !half) return;
  int32_t hr = -1, hs = -1;
  run.plugin.take(api->comm_rank(half, &hr));
  run.plugin.take(api->comm_size(half, &hs));
  const int want_size = (run.size - run.rank % 2 + 1) / 2;
  const int want_rank = (run.size - 1 - run.rank) / 2;  // descending order of key -rank
  if (hs != want_size || hr != want_rank)
    run.fail("comm_split", "rank/size " + std::to_string(hr) + "/" + std::to_string(hs) + ", expected " +
                               std::to_string(want_rank) + "/" + std::to_string(want_size));
  int64_t mine = run.rank, sum = 0, want = 0;
  for (int i = run.rank % 2; i < run.size; i += 2) want += i;
  s = run.plugin.run([&](rvl_coll_request** q) { return api->all_reduce(half, &mine, &sum, 1, RVL_DTYPE_I64, RVL_COLL_SUM, q); },
                     kTimeoutMs);
  expect(run, "all_reduce on a split communicator", s, RVL_COLL_STATUS_OK);
  if (s.ok() && sum != want) run.fail("split all_reduce", std::to_string(sum) + " != " + std::to_string(want));
  expect(run, "comm_destroy of the split communicator", run.plugin.take(api->comm_destroy(half)), RVL_COLL_STATUS_OK);
}

}  // namespace ravel::comm_conformance
