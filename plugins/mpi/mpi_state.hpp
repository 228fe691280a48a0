// The Open MPI communicator's objects behind the opaque types of collectives.h, and the
// process-wide state they share (one MPI library per process).
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ravel/collectives.h"

struct rvl_coll_error {
  rvl_coll_status code;
  std::string message;
  int32_t rank;  // the peer to blame, -1 if none
};

struct rvl_communicator {
  MPI_Comm comm = MPI_COMM_NULL;
  // Note [Small all-reduces]: a duplicate of `comm` that carries only the point-to-point
  // all-reduce's messages, so no send/recv of the host program (any tag) can match them.
  MPI_Comm small_comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  bool world = false;             // the one comm_create_world made (its destroy finalizes MPI)
  std::vector<int> world_rank_of;  // this communicator's rank -> rank in MPI_COMM_WORLD
  std::atomic<int> pending{0};     // requests started and not yet freed
};

struct rvl_coll_request {
  MPI_Request request = MPI_REQUEST_NULL;
  rvl_communicator* comm = nullptr;
  std::string what;        // "all_reduce of 1024 f32 (sum)": for messages
  int peer = -1;           // send/recv: the partner's rank in comm
  int64_t recv_bytes = -1; // recv: the size the message must have
  bool done = false;
  rvl_coll_status status = RVL_COLL_STATUS_OK;  // of a completed request
  std::string message;                          // ...and its message
  int32_t error_rank = -1;
  // Note [Small all-reduces]: a request made of several point-to-point messages (tested with
  // MPI_Testall; `request` is unused then), the peers' contributions they receive, and the
  // reduction run once when all completed without error.
  std::vector<MPI_Request> parts;
  std::unique_ptr<uint8_t[]> scratch;
  std::function<void()> finish;
};

namespace mpi_plugin {

// A peer as seen at start-up, to tell a dead rank from a late one (Note [Who is late]).
struct PeerId {
  int32_t pid = 0;
  char host[64] = {};
};

struct Process {
  std::mutex mutex;                 // serialises every MPI call (MPI_THREAD_SERIALIZED)
  bool initialized_here = false;    // we called MPI_Init_thread, so we finalize
  bool world_created = false;
  std::atomic<bool> broken{false};  // a peer is lost or a request was abandoned
  std::string broken_message;       // why (under mutex)
  rvl_coll_status broken_code = RVL_COLL_STATUS_OK;
  int32_t broken_rank = -1;
  std::vector<PeerId> peers;        // by world rank
  std::string my_host;
  int64_t finalize_timeout_ms = 60000;
};
Process& process();

rvl_coll_error* make_error(rvl_coll_status code, std::string message, int32_t rank = -1);
// The MPI error string of `rc`, with `what` before it.
std::string mpi_message(int rc, const std::string& what);
// Marks the process's communicators broken (first reason wins). Takes process().mutex.
void mark_broken(rvl_coll_status code, const std::string& message, int32_t rank);
// The error every operation returns once the process is broken, or NULL.
rvl_coll_error* broken_error();

// Requests: test once (under the MPI lock) / wait with a deadline.
rvl_coll_error* request_test(rvl_coll_request* r, int32_t* done);
rvl_coll_error* request_wait(rvl_coll_request* r, int64_t timeout_ms);
void request_free(rvl_coll_request* r);
// A live collective for `comm` that has not started yet (the caller fills request and what).
rvl_coll_request* new_request(rvl_communicator* comm, std::string what);

// Note [Small all-reduces] (mpi_small.cpp): whether all_reduce of `bytes` on `comm` goes point to
// point, and starting it. `op_code` and `dtype` are collectives.h's.
bool small_all_reduce_applies(const rvl_communicator* comm, uint64_t bytes);
rvl_coll_error* start_small_all_reduce(rvl_communicator* comm, const void* send, void* recv, uint64_t count,
                                       rvl_dtype dtype, rvl_coll_op op, std::string what, rvl_coll_request** out);

// World start-up and shut-down (mpi_world.cpp).
rvl_coll_error* create_world(int64_t timeout_ms, rvl_communicator** out);
rvl_coll_error* split(rvl_communicator* comm, int32_t color, int32_t key, int64_t timeout_ms,
                      rvl_communicator** out);
rvl_coll_error* destroy(rvl_communicator* comm);

}  // namespace mpi_plugin
