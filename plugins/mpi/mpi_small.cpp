// The all-reduce of small buffers over point-to-point messages.
//
// Note [Small all-reduces]
// Everything the plugin starts must be non-blocking (its waits have deadlines), so its
// all-reduce was MPI_Iallreduce. Open MPI 4.1 runs non-blocking collectives through libnbc,
// whose schedule costs ~3x the blocking MPI_Allreduce on small buffers (2 ranks of one host,
// 4 KiB: 9-10 against 3.2-3.7 µs; docs/distributed.md), while one MPI_Isend/MPI_Irecv round
// costs about what MPI_Allreduce does. So up to kSmallRanks ranks and 64 KiB (two ranks: 1 MiB,
// Note [Two ranks up to 1 MiB]), every rank sends its buffer to every other rank, receives
// theirs into scratch memory the request
// owns, and when MPI_Testall says all messages completed, reduces the contributions *in rank
// order* (rank 0's, then rank 1's, ...). Every rank computes the same expression from the same
// bytes, so every rank gets a bit-identical result, as MPI_Allreduce promises; the request is
// waited like any other (Note [Deadlines by polling]), so a missing rank is a TIMEOUT or
// PEER_LOST as before. The messages travel on a duplicate of the communicator (small_comm),
// so no message of the host program's send/recv can match them, whatever its tag; between two
// ranks they are non-overtaking, so successive all-reduces match in call order.
// Above kSmallRanks the n^2 messages lose to libnbc's log n rounds; above the size limit
// MPI_Iallreduce's pipelined algorithms win (measured: bench/distributed/run.sh;
// RAVEL_MPI_SMALL_BYTES moves the threshold to measure it).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "mpi_state.hpp"

namespace mpi_plugin {

namespace {

constexpr int kSmallRanks = 8;

// Note [Two ranks up to 1 MiB]
// Between two ranks the exchange is one message each way (a rendezvous above 16 KiB: one
// single-copy read through CMA) and one reduction, where libnbc's MPI_Iallreduce pipelines
// segments through a schedule. Measured (2026-12-07, bench_allreduce and bench_comm_plugin
// --checked under chrt -f 10, load average 12-15, docs/distributed.md "The small path's fixed
// cost"): at 1 MiB the point-to-point path took 205-241 µs against libnbc's 252-269 (plain
// MPI_Allreduce 211-236); at 16 MiB it lost (5.6-6.3 against 4.9-5.6 ms), and on 4 ranks it lost
// at every size above 64 KiB (1 MiB: 1.8 against 0.6 ms: n^2 messages on 2 cores). So two ranks
// go point to point up to 1 MiB, more ranks up to 64 KiB.
uint64_t small_bytes_limit(int ranks) {
  static const int64_t forced = [] {  // RAVEL_MPI_SMALL_BYTES, for measuring; -1 when unset
    const char* v = std::getenv("RAVEL_MPI_SMALL_BYTES");
    if (v && *v) {
      char* end = nullptr;
      const unsigned long long x = std::strtoull(v, &end, 10);
      if (end && *end == '\0') return static_cast<int64_t>(x);
    }
    return int64_t{-1};
  }();
  if (forced >= 0) return static_cast<uint64_t>(forced);
  return ranks == 2 ? uint64_t{1} << 20 : uint64_t{64} << 10;
}


template <class T, bool = std::is_integral_v<T>>
struct small_wide {
  using type = std::make_unsigned_t<T>;
};
template <class T>
struct small_wide<T, false> {
  using type = T;
};

// acc[i] := acc[i] op x[i] for T, with collectives.h's meaning: integers wrap, bool is 0/1 whose
// sum is or and whose product is and.
template <class T>
void combine_into(T* acc, const T* x, uint64_t n, rvl_coll_op op, bool boolean) {
  using W = typename small_wide<T>::type;  // wrapping arithmetic for integers
  if (boolean) op = op == RVL_COLL_SUM ? RVL_COLL_MAX : op == RVL_COLL_PROD ? RVL_COLL_MIN : op;
  switch (op) {
    case RVL_COLL_SUM:
      for (uint64_t i = 0; i < n; ++i) acc[i] = static_cast<T>(static_cast<W>(acc[i]) + static_cast<W>(x[i]));
      break;
    case RVL_COLL_PROD:
      for (uint64_t i = 0; i < n; ++i) acc[i] = static_cast<T>(static_cast<W>(acc[i]) * static_cast<W>(x[i]));
      break;
    case RVL_COLL_MAX:
      for (uint64_t i = 0; i < n; ++i) acc[i] = x[i] > acc[i] ? x[i] : acc[i];
      break;
    default:
      for (uint64_t i = 0; i < n; ++i) acc[i] = x[i] < acc[i] ? x[i] : acc[i];
      break;
  }
}

}  // namespace

size_t small_dtype_size(rvl_dtype t) {
  return t == RVL_DTYPE_I32 || t == RVL_DTYPE_F32 ? 4 : t == RVL_DTYPE_I64 || t == RVL_DTYPE_F64 ? 8 : 1;
}

void combine_bytes(void* acc, const void* x, uint64_t n, rvl_dtype t, rvl_coll_op op) {
  switch (t) {
    case RVL_DTYPE_BOOL: return combine_into(static_cast<uint8_t*>(acc), static_cast<const uint8_t*>(x), n, op, true);
    case RVL_DTYPE_U8: return combine_into(static_cast<uint8_t*>(acc), static_cast<const uint8_t*>(x), n, op, false);
    case RVL_DTYPE_I32: return combine_into(static_cast<int32_t*>(acc), static_cast<const int32_t*>(x), n, op, false);
    case RVL_DTYPE_I64: return combine_into(static_cast<int64_t*>(acc), static_cast<const int64_t*>(x), n, op, false);
    case RVL_DTYPE_F32: return combine_into(static_cast<float*>(acc), static_cast<const float*>(x), n, op, false);
    default: return combine_into(static_cast<double*>(acc), static_cast<const double*>(x), n, op, false);
  }
}

namespace {

constexpr int kSmallTag = 1;  // small_comm carries only these and the checked all-reduces' (tags 2, 3)

// Note [Eager pieces]
// Open MPI's shared-memory transport (btl/vader) sends a message of up to its eager limit, 4096
// bytes *including its headers*, in one copy-in/copy-out fragment; anything larger waits for a
// rendezvous (the receiver's acknowledgement, then a single-copy read through CMA). Measured on 2
// ranks (bench_mpi_allreduce_peer's p2p row, 2026-11-26): a 4 KiB exchange as one message 5.5-6.9
// µs, as pieces of 4000 bytes 1.6-1.7 µs (MPI_Allreduce: 2.5-3.0), pieces of 2048 bytes 2.2-2.6;
// at 64 KiB, one message 11-12 µs, pieces of 4000 bytes 15-17 (MPI_Allreduce: 22-26). So up to
// kPiecedBytes the buffer travels as pieces under the eager limit; above, as one message
// (kPieceBytes, kPiecedBytes: mpi_state.hpp).

}  // namespace

bool small_all_reduce_applies(const rvl_communicator* comm, uint64_t bytes) {
  return comm->small_comm != MPI_COMM_NULL && comm->size > 1 && comm->size <= kSmallRanks &&
         bytes <= small_bytes_limit(comm->size);
}

rvl_coll_error* start_small_all_reduce(rvl_communicator* comm, const void* send, void* recv, uint64_t count,
                                       rvl_dtype dtype, rvl_coll_op op, OpText what, rvl_coll_request** out) {
  rvl_coll_request* r = new_request(comm, what);
  if (!r) return make_error(RVL_COLL_STATUS_OUT_OF_MEMORY, "out of memory for a request");
  const uint64_t bytes = count * small_dtype_size(dtype);
  const int peers = comm->size - 1;
  // In place, this rank's own contribution is kept in one more slot: rank 0's is written into
  // `recv` first.
  const bool in_place = send == recv && bytes > 0;
  r->scratch_of(bytes * static_cast<uint64_t>(peers + (in_place ? 1 : 0)));
  const uint64_t piece = bytes <= kPiecedBytes ? kPieceBytes : bytes;  // Note [Eager pieces]
  const uint64_t pieces = bytes == 0 ? 1 : (bytes + piece - 1) / piece;
  r->parts.assign(static_cast<size_t>(2 * peers * pieces), MPI_REQUEST_NULL);
  if (!r->scratch) {
    r->done = true;
    request_free(r);
    return make_error(RVL_COLL_STATUS_OUT_OF_MEMORY, "out of memory for a small all-reduce's scratch");
  }
  // Slot of rank p in scratch: p for p < rank, p - 1 after; this rank's own is `send`, or the
  // last slot in place.
  uint8_t* scratch = r->scratch.get();
  const int me = comm->rank;
  const void* own = send;
  if (in_place) {
    own = scratch + bytes * static_cast<uint64_t>(peers);
    std::memcpy(const_cast<void*>(own), send, bytes);
  }
  int rc = MPI_SUCCESS;
  {
    std::lock_guard<std::mutex> lock(process().mutex);
    size_t k = 0;
    // Receives first: a message that finds its receive posted is not copied twice.
    for (int p = 0; p < comm->size && rc == MPI_SUCCESS; ++p) {
      if (p == me) continue;
      uint8_t* slot = scratch + bytes * static_cast<uint64_t>(p < me ? p : p - 1);
      for (uint64_t at = 0; at < bytes || (at == 0 && bytes == 0); at += piece) {
        rc = MPI_Irecv(slot + at, static_cast<int>(std::min(piece, bytes - at)), MPI_BYTE, p, kSmallTag,
                       comm->small_comm, &r->parts[k++]);
        if (rc != MPI_SUCCESS || bytes == 0) break;
      }
    }
    for (int p = 0; p < comm->size && rc == MPI_SUCCESS; ++p) {
      if (p == me) continue;
      for (uint64_t at = 0; at < bytes || (at == 0 && bytes == 0); at += piece) {
        rc = MPI_Isend(static_cast<const uint8_t*>(own) + at, static_cast<int>(std::min(piece, bytes - at)), MPI_BYTE,
                       p, kSmallTag, comm->small_comm, &r->parts[k++]);
        if (rc != MPI_SUCCESS || bytes == 0) break;
      }
    }
  }
  if (rc != MPI_SUCCESS) {
    // Some messages may be posted: nothing on this communicator matches any more (request_free
    // of an unfinished request marks the process broken, as after an abandoned collective).
    std::string msg = mpi_message(rc, r->what.str() + " on rank " + std::to_string(me));
    request_free(r);
    return make_error(RVL_COLL_STATUS_COMM_ERROR, msg);
  }
  // The reduction in rank order (bit-identical on every rank), run by finish_small_all_reduce.
  r->small = {true, own, recv, bytes, count, dtype, op, me, peers};
  *out = r;
  return nullptr;
}

// Rank 0's contribution copied into `recv`, then each next rank's combined into it.
void finish_small_all_reduce(const rvl_coll_request& r) {
  const auto& a = r.small;
  if (a.bytes == 0) return;
  const uint8_t* scratch = r.scratch.get();
  // Slot of rank p in scratch: p for p < me, p - 1 after; this rank's own is `own`.
  const auto contribution = [&](int p) -> const void* {
    return p == a.me ? a.own : scratch + a.bytes * static_cast<uint64_t>(p < a.me ? p : p - 1);
  };
  std::memcpy(a.recv, contribution(0), a.bytes);
  for (int p = 1; p <= a.peers; ++p) combine_bytes(a.recv, contribution(p), a.count, a.dtype, a.op);
}

}  // namespace mpi_plugin
