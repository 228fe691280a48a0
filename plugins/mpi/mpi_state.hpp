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
#include <new>
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
  // Note [Reused requests] (mpi_request.cpp): the last completed request, kept for the next.
  std::atomic<rvl_coll_request*> spare{nullptr};
};

// Note [Described on demand]
// What a request is, for its error messages ("all_reduce of 1024 f32 (sum)", "send of 24 u8 to
// rank 1"), kept as the call's arguments and formatted only when a message needs it: formatting
// it on every call (to_string and concatenations, three times per tensor all-reduce counting the
// argument check's send and receive) was a measurable part of a 4 KiB all-reduce's fixed cost
// (docs/distributed.md, "The tensor path's fixed cost").
struct OpText {
  const char* name = "";
  uint64_t count = 0;
  int dtype = -1;                   // -1: the name alone
  int op = -1;                      // -1: no reduction
  const char* peer_word = nullptr;  // " to rank ", " from rank ", or none
  int peer = -1;
  OpText() = default;
  OpText(const char* n) : name(n) {}  // NOLINT: implicit, for "comm_split"
  OpText(const char* n, uint64_t c, int t, int o = -1, const char* w = nullptr, int p = -1)
      : name(n), count(c), dtype(t), op(o), peer_word(w), peer(p) {}
  std::string str() const;  // plugin.cpp
};

struct rvl_coll_request {
  MPI_Request request = MPI_REQUEST_NULL;
  rvl_communicator* comm = nullptr;
  OpText what;             // "all_reduce of 1024 f32 (sum)": for messages
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
  uint64_t scratch_bytes = 0;  // its size (Note [Reused requests]: kept from call to call)
  // At least `bytes` of scratch (the old contents are not kept), or NULL when out of memory.
  uint8_t* scratch_of(uint64_t bytes) {
    if (bytes > scratch_bytes || !scratch) {
      scratch.reset(new (std::nothrow) uint8_t[bytes ? bytes : 1]);
      scratch_bytes = scratch ? bytes : 0;
    }
    return scratch.get();
  }
  // The reduction's arguments, as plain fields rather than a std::function whose captures were
  // one more heap allocation per all-reduce (Note [Described on demand]).
  struct SmallReduce {
    bool active = false;
    const void* own = nullptr;  // this rank's contribution
    void* recv = nullptr;
    uint64_t bytes = 0, count = 0;
    rvl_dtype dtype = RVL_DTYPE_U8;
    rvl_coll_op op = RVL_COLL_SUM;
    int me = 0, peers = 0;
  } small;
  // Note [Checked all-reduces] (mpi_checked.cpp): the argument check and a small all-reduce in
  // the same messages. Phase 1: the first messages (parts[0, first_recvs) their receives) are in
  // flight; phase 2: the rest (the remainders, a drain after a mismatch, or MPI_Iallreduce).
  struct Checked {
    int phase = 0;  // 0: not a checked request
    int first_recvs = 0;
    const void* send = nullptr;
    void* recv = nullptr;
    void* headers = nullptr;  // the caller's, size * header_bytes
    uint32_t header_bytes = 0;
    uint64_t bytes = 0, count = 0;
    rvl_dtype dtype = RVL_DTYPE_U8;
    rvl_coll_op op = RVL_COLL_SUM;
    uint64_t inline_bytes = 0, rest = 0, piece = 0;  // in the first message / after it, in pieces of
    const void* own_rest = nullptr;                  // this rank's remainder (a copy when in place)
    bool agreed = false;  // every rank's header and count equal (known in phase 2)
    bool counts_differ = false;  // headers equal, counts not
    int unsupported_dtype = -1;  // a dtype MPI cannot reduce: only the headers travel
    bool small = false;   // the data travels point to point (else MPI_Iallreduce in phase 2)
    std::unique_ptr<uint8_t[]> drain;  // a mismatch: the peers' remainders, thrown away
  } checked;
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
rvl_coll_request* new_request(rvl_communicator* comm, OpText what);
// Note [Small all-reduces]: the reduction in rank order once every message of `r` arrived.
void finish_small_all_reduce(const rvl_coll_request& r);

// Note [Small all-reduces] (mpi_small.cpp): whether all_reduce of `bytes` on `comm` goes point to
// point, and starting it. `op_code` and `dtype` are collectives.h's.
bool small_all_reduce_applies(const rvl_communicator* comm, uint64_t bytes);
rvl_coll_error* start_small_all_reduce(rvl_communicator* comm, const void* send, void* recv, uint64_t count,
                                       rvl_dtype dtype, rvl_coll_op op, OpText what, rvl_coll_request** out);

// Shared by the small and the checked all-reduce (mpi_small.cpp): Note [Eager pieces], the
// element size, and acc[i] := acc[i] op x[i] with collectives.h's meaning.
constexpr uint64_t kPieceBytes = 4000;
constexpr uint64_t kPiecedBytes = 16 << 10;
size_t small_dtype_size(rvl_dtype t);
MPI_Datatype datatype_of(rvl_dtype t);      // plugin.cpp
MPI_Op op_of(rvl_coll_op op, rvl_dtype t);  // plugin.cpp
void combine_bytes(void* acc, const void* x, uint64_t n, rvl_dtype t, rvl_coll_op op);

// Note [Checked all-reduces] (mpi_checked.cpp): all_reduce_checked, and its phase change once
// the first messages arrived (called by request_test without the MPI lock).
rvl_coll_error* start_checked_all_reduce(rvl_communicator* comm, const void* header, uint32_t header_bytes,
                                         void* headers, const void* send, void* recv, uint64_t count,
                                         rvl_dtype dtype, rvl_coll_op op, rvl_coll_request** out);
void advance_checked_all_reduce(rvl_coll_request& r);
void finish_checked_all_reduce(rvl_coll_request& r);

// World start-up and shut-down (mpi_world.cpp).
rvl_coll_error* create_world(int64_t timeout_ms, rvl_communicator** out);
rvl_coll_error* split(rvl_communicator* comm, int32_t color, int32_t key, int64_t timeout_ms,
                      rvl_communicator** out);
rvl_coll_error* destroy(rvl_communicator* comm);

}  // namespace mpi_plugin
