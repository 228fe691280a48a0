// all_reduce_checked (optional, collectives.h 1.1), when the plugin has it: agreeing headers give
// the all-reduce and every rank's header in rank order; headers that differ across ranks, with
// counts that differ too, leave the output untouched and complete OK with every header delivered,
// and a later call still works (no message of the mismatch was left unmatched, none of a later
// call taken by the mismatched one, even with a rank late); equal headers
// with different counts are INVALID_ARGUMENT. f32 sums of small integers: exact in any order.
#include <algorithm>
#include <cstring>

#include "cases.hpp"

namespace ravel::comm_conformance {

namespace {

constexpr uint32_t kHeaderBytes = 96;  // the Ravel core's header size

// Rank r's element i; its header for a call with `count` elements and `tag` (what the call is).
float value(int r, int64_t i) { return static_cast<float>((i * 3 + r * 5) % 17); }
std::vector<uint8_t> header_of(int64_t tag, int64_t count) {
  std::vector<uint8_t> h(kHeaderBytes, 0x5A);
  std::memcpy(h.data(), &tag, sizeof tag);
  std::memcpy(h.data() + 8, &count, sizeof count);
  return h;
}

// One checked call: this rank all-reduces `count` elements under `header`; every rank's count
// and header are given (counts[r], headers[r]). Checks the status, the headers delivered and the
// output (the sum when `agree`, untouched otherwise).
void checked_call(Runner& run, const std::string& what, const std::vector<int64_t>& counts,
                  const std::vector<std::vector<uint8_t>>& headers, bool agree, rvl_coll_status want_status) {
  const int64_t n = counts[run.rank];
  std::vector<float> send(n), recv(n + 1, -7.0f);
  for (int64_t i = 0; i < n; ++i) send[i] = value(run.rank, i);
  std::vector<uint8_t> got(kHeaderBytes * static_cast<size_t>(run.size), 0);
  const rvl_collectives_api* api = run.plugin.api();
  const Status s = run.plugin.run([&](rvl_coll_request** q) {
    return api->all_reduce_checked(run.comm, headers[run.rank].data(), kHeaderBytes, got.data(), n ? send.data() : nullptr,
                                   n ? recv.data() : nullptr, n, RVL_DTYPE_F32, RVL_COLL_SUM, q);
  }, kTimeoutMs);
  const std::string c = "all_reduce_checked " + what + ", " + std::to_string(n) + " elements";
  if (s.code != want_status)
    return run.fail(c, std::string("status ") + status_name(s.code) + " (" + s.message + "), expected " +
                           status_name(want_status));
  if (want_status != RVL_COLL_STATUS_OK) return run.pass();
  for (int r = 0; r < run.size; ++r)
    if (std::memcmp(got.data() + kHeaderBytes * static_cast<size_t>(r), headers[r].data(), kHeaderBytes) != 0)
      return run.fail(c, "the header delivered for rank " + std::to_string(r) + " is not the one it passed");
  for (int64_t i = 0; i < n; ++i) {
    float want = -7.0f;
    if (agree) {
      want = 0.0f;
      for (int r = 0; r < run.size; ++r) want += value(r, i);
    }
    if (recv[i] != want)
      return run.fail(c, "element " + std::to_string(i) + (agree ? " is not the sum" : " was written on a mismatch"));
  }
  if (recv[n] != -7.0f) return run.fail(c, "the element after the output was written (overrun)");
  run.pass();
}

// The last rank starts a mismatched call (1,100 elements against its 1,200: remainders of 528
// and 928 bytes after the first message) and, before waiting for it, receives a message from
// every other rank, sent once that rank finished the mismatch and started an agreeing call of
// `next` elements: so the agreeing call's messages reach the last rank while its mismatched call
// is still unfinished. They must complete the agreeing call, not the mismatched one's receives
// (a plugin that posts a later call's receives early must keep the calls apart).
void late_mismatch(Runner& run, int64_t next) {
  const rvl_collectives_api* api = run.plugin.api();
  const bool last = run.rank == run.size - 1;
  const std::string c =
      "all_reduce_checked agreeing on " + std::to_string(next) + " elements after a mismatch the last rank waited late";
  const int64_t n = last ? 1200 : 1100;
  std::vector<float> send(static_cast<size_t>(std::max(n, next))), recv(send.size() + 1, -7.0f);
  for (size_t i = 0; i < send.size(); ++i) send[i] = value(run.rank, static_cast<int64_t>(i));
  std::vector<uint8_t> got(kHeaderBytes * static_cast<size_t>(run.size), 0);
  const std::vector<uint8_t> mismatched = header_of(6, n), agreeing = header_of(7, next);
  auto start = [&](const std::vector<uint8_t>& h, int64_t count, rvl_coll_request** q) {
    return run.plugin.take(api->all_reduce_checked(run.comm, h.data(), kHeaderBytes, got.data(), send.data(),
                                                   recv.data(), count, RVL_DTYPE_F32, RVL_COLL_SUM, q));
  };
  auto wait = [&](rvl_coll_request* q) {
    Status s = run.plugin.take(api->request_wait(q, kTimeoutMs));
    if (s.code != RVL_COLL_STATUS_TIMEOUT) api->request_free(q);  // a timed-out one is left (not reused)
    return s;
  };
  uint8_t go = 1;
  rvl_coll_request* a = nullptr;
  rvl_coll_request* b = nullptr;
  Status s = start(mismatched, n, &a);
  if (!last) {
    rvl_coll_request* g = nullptr;
    if (s.ok()) s = wait(a);
    if (s.ok()) s = start(agreeing, next, &b);
    if (s.ok()) s = run.plugin.take(api->send(run.comm, &go, 1, RVL_DTYPE_U8, run.size - 1, 9, &g));
    if (s.ok()) s = wait(g);
  } else {
    for (int p = 0; p < run.size - 1 && s.ok(); ++p) {
      rvl_coll_request* g = nullptr;
      s = run.plugin.take(api->recv(run.comm, &go, 1, RVL_DTYPE_U8, p, 9, &g));
      if (s.ok()) s = wait(g);
    }
    if (s.ok()) s = wait(a);
    if (s.ok()) s = start(agreeing, next, &b);
  }
  if (s.ok()) s = wait(b);
  if (!s.ok()) return run.fail(c, std::string("status ") + status_name(s.code) + " (" + s.message + ")");
  for (int64_t i = 0; i < next; ++i) {
    float want = 0.0f;
    for (int r = 0; r < run.size; ++r) want += value(r, i);
    if (recv[static_cast<size_t>(i)] != want) return run.fail(c, "element " + std::to_string(i) + " is not the sum");
  }
  run.pass();
}

}  // namespace

void run_checked_cases(Runner& run) {
  const rvl_collectives_api* api = run.plugin.api();
  if (!RVL_HAS_MEMBER(api, rvl_collectives_api, all_reduce_checked) || !api->all_reduce_checked) return;  // optional
  const int size = run.size;
  auto same = [&](int64_t n, int64_t tag) {
    return std::pair{std::vector<int64_t>(size, n), std::vector<std::vector<uint8_t>>(size, header_of(tag, n))};
  };
  // Agreeing calls, around a first message's worth of data and above the small sizes.
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{968}, int64_t{969}, int64_t{1024}, int64_t{5000}, int64_t{65537}}) {
    auto [counts, headers] = same(n, 1);
    checked_call(run, "agreeing", counts, headers, true, RVL_COLL_STATUS_OK);
  }
  if (size == 1) return;
  // Different counts and headers on the last rank (its remainder, or the others', is drained),
  // each followed by an agreeing call.
  for (int64_t other : {int64_t{0}, int64_t{2048}, int64_t{300000}}) {
    std::vector<int64_t> counts(size, 1024);
    counts[size - 1] = other;
    std::vector<std::vector<uint8_t>> headers;
    for (int r = 0; r < size; ++r) headers.push_back(header_of(2, counts[r]));
    checked_call(run, "with the last rank's count " + std::to_string(other), counts, headers, false, RVL_COLL_STATUS_OK);
    auto [c, h] = same(1024, 3);
    checked_call(run, "agreeing after a mismatch", c, h, true, RVL_COLL_STATUS_OK);
  }
  // A mismatch the last rank waits for late, then an agreeing call of its count, and of the others'.
  late_mismatch(run, 1200);
  late_mismatch(run, 1100);
  // Equal headers, different counts: INVALID_ARGUMENT on every rank; then the world still works.
  std::vector<int64_t> counts(size, 1024);
  counts[size - 1] = 1000;
  checked_call(run, "equal headers, different counts", counts, std::vector<std::vector<uint8_t>>(size, header_of(4, 0)),
               false, RVL_COLL_STATUS_INVALID_ARGUMENT);
  auto [c, h] = same(1024, 5);
  checked_call(run, "agreeing after different counts", c, h, true, RVL_COLL_STATUS_OK);
}

}  // namespace ravel::comm_conformance
