// Errors, the broken state and requests waited with a deadline.
//
// Note [Deadlines by polling]
// MPI has no timed wait: MPI_Wait on a collective whose peer died (or never calls it) blocks
// forever, and Open MPI 4 without ULFM never reports the loss on shared memory. So the plugin
// never calls MPI_Wait: request_wait polls MPI_Test under the library lock and reads a steady
// clock between polls. MPI makes progress only inside its calls (a large all-reduce is many
// fragments, each waiting for a poll on both sides), so the first second is polled back to back,
// as MPI_Wait would (Open MPI itself yields inside MPI_Test when the node is oversubscribed); only
// then does the poll sleep, 20 µs doubling up to 200 µs: a hang of minutes costs a few thousand
// wake-ups a second, and a transfer that is merely long still progresses. Measured
// (bench/distributed/run.sh): sleeping from the start (20 µs doubling to 1 ms) made a 1 MiB
// all-reduce ~100x slower than MPI_Allreduce; a sched_yield between polls still ~50x on a loaded
// machine (a yield can hand the core away for a whole time slice); sleeping after 100 ms made a
// 64 MiB all-reduce ~20x slower than the same MPI_Iallreduce polled without pause.
//
// Note [Who is late]
// At start-up every rank gathers the pid and host name of every other rank. When a deadline
// passes, the plugin checks the peers on its own host with kill(pid, 0): a peer whose process no
// longer exists is *lost* (PEER_LOST, error_rank names it, and the communicator is broken); if
// every local peer is alive the status is TIMEOUT and the message says which peers are on other
// hosts (they cannot be checked from here). That is how a survivor names the rank a SIGKILL took.
#include <signal.h>

#include <cerrno>
#include <thread>

#include "mpi_state.hpp"

namespace mpi_plugin {

Process& process() {
  static Process* p = new Process();  // never destroyed: comm_destroy may run from static destructors
  return *p;
}

rvl_coll_error* make_error(rvl_coll_status code, std::string message, int32_t rank) {
  return new (std::nothrow) rvl_coll_error{code, std::move(message), rank};
}

std::string mpi_message(int rc, const std::string& what) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return what + ": MPI error " + std::to_string(rc);
  return what + ": " + std::string(text, static_cast<size_t>(len));
}

void mark_broken(rvl_coll_status code, const std::string& message, int32_t rank) {
  Process& p = process();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (p.broken.load()) return;
  p.broken_code = code;
  p.broken_message = message;
  p.broken_rank = rank;
  p.broken.store(true);
}

rvl_coll_error* broken_error() {
  Process& p = process();
  if (!p.broken.load()) return nullptr;
  std::lock_guard<std::mutex> lock(p.mutex);
  return make_error(p.broken_code,
                    "the communicator is broken by an earlier failure (the process should exit): " + p.broken_message,
                    p.broken_rank);
}

// Note [Reused requests]
// A 4 KiB all-reduce on 2 ranks costs a few microseconds, and each request was three heap
// allocations (the request, its scratch, its list of messages) and their frees. So a
// communicator keeps the last request that completed and was freed, and the next operation
// takes it over, with its scratch and message list as they are (a large enough scratch is used
// again, a smaller one replaced). A request freed before it completed (abandoned: MPI may still
// write its scratch) is never kept; comm_destroy frees the spare.
rvl_coll_request* new_request(rvl_communicator* comm, OpText what) {
  rvl_coll_request* r = comm->spare.exchange(nullptr);
  if (r) {
    r->request = MPI_REQUEST_NULL;
    r->peer = -1;
    r->recv_bytes = -1;
    r->done = false;
    r->status = RVL_COLL_STATUS_OK;
    r->message.clear();
    r->error_rank = -1;
    r->parts.clear();  // keeps its capacity
    r->small = {};
    r->checked = {};
  } else {
    r = new (std::nothrow) rvl_coll_request();
    if (!r) return nullptr;
  }
  r->comm = comm;
  r->what = what;
  comm->pending.fetch_add(1);
  return r;
}

namespace {

// One MPI_Test; completes the request's status on completion. Caller holds no lock.
void test_once(rvl_coll_request* r) {
  if (r->done) return;
  Process& p = process();
  int flag = 0;
  MPI_Status status;
  int rc;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    // Note [Checked all-reduces]: in phase 1 only the first messages' receives count.
    const int n = r->checked.phase == 1 ? r->checked.first_recvs : static_cast<int>(r->parts.size());
    rc = r->parts.empty() ? MPI_Test(&r->request, &flag, &status)
                          : MPI_Testall(n, r->parts.data(), &flag, MPI_STATUSES_IGNORE);
  }
  int error_class = rc;
  if (rc != MPI_SUCCESS) MPI_Error_class(rc, &error_class);
  if (rc != MPI_SUCCESS && error_class == MPI_ERR_TRUNCATE) {  // a longer message than expected
    r->done = true;
    r->status = RVL_COLL_STATUS_INVALID_ARGUMENT;
    r->message = r->what.str() + ": rank " + std::to_string(r->peer) + " sent more than the " +
                 std::to_string(r->recv_bytes) + " bytes expected";
    r->error_rank = r->peer;
    return;
  }
  if (rc != MPI_SUCCESS) {
    r->done = true;
    r->status = RVL_COLL_STATUS_COMM_ERROR;
    r->message = mpi_message(rc, r->what.str() + " on rank " + std::to_string(r->comm->rank));
    r->error_rank = r->peer;
    return;
  }
  if (!flag) return;
  if (r->checked.phase == 1) {  // Note [Checked all-reduces]: post phase 2 (under the lock) and test it at once
    advance_checked_all_reduce(*r);
    return r->done ? void() : test_once(r);
  }
  r->done = true;
  if (r->small.active) finish_small_all_reduce(*r);  // Note [Small all-reduces]: outside the MPI lock
  if (r->checked.phase == 2) finish_checked_all_reduce(*r);
  if (r->recv_bytes >= 0) {
    int bytes = 0;
    MPI_Get_count(&status, MPI_BYTE, &bytes);
    // (status.MPI_ERROR is not set by MPI_Test: a failure is its return code, handled above.)
    if (bytes != r->recv_bytes) {
      r->status = RVL_COLL_STATUS_INVALID_ARGUMENT;
      r->message = r->what.str() + ": rank " + std::to_string(r->peer) + " sent " + std::to_string(bytes) +
                   " bytes, expected " + std::to_string(r->recv_bytes);
      r->error_rank = r->peer;
    }
  }
}

rvl_coll_error* error_of(const rvl_coll_request* r) {
  if (r->status == RVL_COLL_STATUS_OK) return nullptr;
  return make_error(r->status, r->message, r->error_rank);
}

// Note [Who is late]: the error for a deadline that passed.
rvl_coll_error* deadline_error(rvl_coll_request* r, int64_t timeout_ms) {
  Process& p = process();
  const rvl_communicator* c = r->comm;
  std::string lost, remote;
  int32_t first_lost = -1;
  for (int i = 0; i < c->size; ++i) {
    if (i == c->rank || (r->peer >= 0 && i != r->peer)) continue;
    const int w = i < static_cast<int>(c->world_rank_of.size()) ? c->world_rank_of[i] : i;
    if (w < 0 || w >= static_cast<int>(p.peers.size())) continue;
    const PeerId& peer = p.peers[w];
    if (p.my_host != peer.host) {
      remote += (remote.empty() ? "" : ", ") + std::to_string(i) + " (" + peer.host + ")";
    } else if (peer.pid > 0 && kill(peer.pid, 0) != 0 && errno == ESRCH) {
      lost += (lost.empty() ? "" : ", ") + std::to_string(i) + " (pid " + std::to_string(peer.pid) + ")";
      if (first_lost < 0) first_lost = i;
    }
  }
  std::string msg = r->what.str() + " on rank " + std::to_string(c->rank) + " of " + std::to_string(c->size) +
                    " did not complete within " + std::to_string(timeout_ms) + " ms: ";
  if (!lost.empty()) {
    msg += "lost rank " + lost + ": its process no longer exists";
    mark_broken(RVL_COLL_STATUS_PEER_LOST, msg, first_lost);
    return make_error(RVL_COLL_STATUS_PEER_LOST, msg, first_lost);
  }
  msg += r->peer >= 0 ? "rank " + std::to_string(r->peer) + " has not made the matching call"
                      : "every peer process on this host is alive, so a rank has not made the matching call";
  if (!remote.empty()) msg += " (ranks on other hosts, not checked: " + remote + ")";
  return make_error(RVL_COLL_STATUS_TIMEOUT, msg, r->peer);
}

}  // namespace

rvl_coll_error* request_test(rvl_coll_request* r, int32_t* done) {
  if (!r || !done) return make_error(RVL_COLL_STATUS_INVALID_ARGUMENT, "request_test: NULL request or output");
  test_once(r);
  *done = r->done ? 1 : 0;
  return r->done ? error_of(r) : nullptr;
}

// Note [Clock reads]
// A poll (MPI_Test under the lock) costs ~0.1 µs; reading the steady clock on this machine's
// virtualised clock source costs as much or more (perf of a 4 KiB all-reduce on 2 ranks: 18% of
// rank 0's time in clock_gettime, 19% in the lock, 5% in MPI's test), and every poll that reads
// it delays noticing a completed transfer. So while polling back to back the clock is read once
// every kClockEvery polls: a deadline is still noticed within microseconds of passing. Once
// the nap phase starts (after a second, Note [Deadlines by polling]) every iteration reads it.
constexpr uint32_t kClockEvery = 32;

rvl_coll_error* request_wait(rvl_coll_request* r, int64_t timeout_ms) {
  if (!r) return make_error(RVL_COLL_STATUS_INVALID_ARGUMENT, "request_wait: NULL request");
  if (timeout_ms < 0)
    return make_error(RVL_COLL_STATUS_INVALID_ARGUMENT, "request_wait: negative timeout " + std::to_string(timeout_ms));
  // Note [Clock reads]: a request that completes at its first test (a small all-reduce whose
  // peers' messages are already here) never reads the clock.
  test_once(r);
  if (r->done) return error_of(r);
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto deadline = start + std::chrono::milliseconds(timeout_ms);
  auto nap = std::chrono::microseconds(20);
  bool napping = false;
  for (uint32_t polls = 1;; ++polls) {
    test_once(r);
    if (r->done) return error_of(r);
    // A peer found lost by another wait: stop waiting for this one too.
    if (process().broken.load()) return broken_error();
    // Note [Clock reads]: the clock is read every kClockEvery polls while polling back to back.
    if (!napping && polls % kClockEvery != 0) continue;
    const auto now = clock::now();
    if (now >= deadline) return deadline_error(r, timeout_ms);
    if (now - start < std::chrono::seconds(1)) continue;  // Note [Deadlines by polling]
    napping = true;
    std::this_thread::sleep_for(std::min<clock::duration>(nap, deadline - now));
    nap = std::min(nap * 2, std::chrono::microseconds(200));
  }
}

void request_free(rvl_coll_request* r) {
  if (!r) return;
  if (!r->done) {
    // Abandoned: MPI may still write its buffers, and the ranks' sequences of collectives no
    // longer match. Nothing on this communicator can be trusted again (collectives.h).
    mark_broken(RVL_COLL_STATUS_TIMEOUT, "a pending " + r->what.str() + " was abandoned (after a timeout)", r->error_rank);
  }
  rvl_communicator* comm = r->comm;
  if (comm) comm->pending.fetch_sub(1);
  rvl_coll_request* none = nullptr;
  if (r->done && comm && comm->spare.compare_exchange_strong(none, r)) return;  // Note [Reused requests]
  delete r;
}

}  // namespace mpi_plugin
