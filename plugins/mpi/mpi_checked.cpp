// The all-reduce whose argument check travels in its own messages (collectives.h 1.1,
// all_reduce_checked).
//
// Note [Checked all-reduces]
// The core checks every collective's arguments across the ranks (Note [Argument headers] in
// core/src/distributed/staging.cpp): on 2 ranks that was one point-to-point round of 96 bytes
// before the data's, ~0.8-1 µs of a 4 KiB all-reduce's ~4.5 µs (docs/distributed.md). Here the
// header rides in the data's first message instead. The trap (docs/distributed.md, "The tensor
// path's fixed cost"): with different counts on different ranks, the receives of one rank would
// not match the sends of another, and a message left unmatched poisons the next call. So:
//  - Every rank's *first message* has at most kFirstBytes (under btl/vader's 4,096-byte eager
//    limit, Note [Eager pieces]) and is received into kFirstBytes whatever its size: a prefix
//    (what follows: this rank's byte count, its remainder's pieces), the header, and the first up
//    to ~3.8 KiB of the data. Every checked call sends one, the header-only exchange (count 0) of
//    the other collectives included, so two ranks in different kinds of call still read each
//    other's header (a ValueError, not a truncation or a time-out).
//  - The *remainder* (the rest of the data, in eager pieces up to kPiecedBytes, else one message)
//    is sent at once, with a tag of its own; its receives are posted only when every first message
//    has arrived (phase 2): if every header and count agree, into the scratch slots; if not, each
//    peer's remainder as its prefix declares it, into a drain buffer that is thrown away. Either
//    way every message sent is received, so a mismatch leaves the world usable, and every rank
//    saw every header: the core throws the same typed error on every rank.
//  - The reduction is the small path's (Note [Small all-reduces]): in rank order, bit-identical
//    on every rank. Above the small path's limits the first messages carry the header alone and
//    phase 2 starts MPI_Iallreduce once the headers agree.
// Phase 1 costs one eager round, as the header exchange did, but the data travels in it; the
// remainder of a 4 KiB all-reduce is 224 bytes, an unexpected eager message copied once.
#include <algorithm>
#include <cstring>

#include "mpi_state.hpp"

namespace mpi_plugin {

namespace {

constexpr uint64_t kFirstBytes = 4000;  // Note [Eager pieces]
constexpr int kFirstTag = 2, kRestTag = 3;  // on small_comm (mpi_small.cpp uses 1)
constexpr uint32_t kMagic = 0x52766c43;     // "RvlC": a checked call's first message

// What a first message begins with.
struct Prefix {
  uint32_t magic = kMagic;
  uint32_t header_bytes = 0;
  uint64_t bytes = 0;  // the data's bytes on this rank (its count)
  uint64_t rest = 0;   // sent as the remainder, in `pieces` messages of `piece` bytes (the last shorter)
  uint32_t piece = 0, pieces = 0;
};
static_assert(sizeof(Prefix) == 32);

uint64_t round8(uint64_t x) { return (x + 7) & ~uint64_t{7}; }

// Where the data starts in a first message.
uint64_t data_offset(uint32_t header_bytes) { return sizeof(Prefix) + round8(header_bytes); }

// Slot of peer p's remainder (p != me).
uint8_t* rest_slot(const rvl_coll_request& r, int p) {
  const int q = p < r.comm->rank ? p : p - 1;
  return r.scratch.get() + static_cast<uint64_t>(r.comm->size) * kFirstBytes + static_cast<uint64_t>(q) * r.checked.rest;
}

rvl_coll_error* fail_started(rvl_coll_request* r, int rc, const char* when) {
  // Some messages may be posted: nothing on small_comm matches any more (request_free of an
  // unfinished request marks the process broken).
  std::string msg = mpi_message(rc, r->what.str() + " (" + when + ") on rank " + std::to_string(r->comm->rank));
  request_free(r);
  return make_error(RVL_COLL_STATUS_COMM_ERROR, msg);
}

void fail_request(rvl_coll_request& r, rvl_coll_status code, std::string msg) {
  r.done = true;
  r.status = code;
  r.message = std::move(msg);
  mark_broken(code, r.message, -1);
}

}  // namespace

rvl_coll_error* start_checked_all_reduce(rvl_communicator* comm, const void* header, uint32_t header_bytes,
                                         void* headers, const void* send, void* recv, uint64_t count,
                                         rvl_dtype dtype, rvl_coll_op op, rvl_coll_request** out) {
  rvl_coll_request* r = new_request(comm, OpText("all_reduce (checked)", count, dtype, op));
  if (!r) return make_error(RVL_COLL_STATUS_OUT_OF_MEMORY, "out of memory for a request");
  auto& c = r->checked;
  const uint64_t bytes = count * small_dtype_size(dtype);
  const int me = comm->rank, size = comm->size, peers = size - 1;
  c.send = send, c.recv = recv, c.headers = headers, c.header_bytes = header_bytes;
  c.bytes = bytes, c.count = count, c.dtype = dtype, c.op = op;
  c.small = small_all_reduce_applies(comm, bytes);
  const uint64_t cap = (kFirstBytes - data_offset(header_bytes)) & ~uint64_t{7};  // whole elements of any dtype
  // Above kPiecedBytes the data is one rendezvous message anyway: the first message carries the
  // header alone (inlining 3.8 KiB there measured ~0.7 µs slower at 64 KiB: two messages to wait
  // for instead of one).
  c.inline_bytes = c.small && bytes <= kPiecedBytes ? std::min(bytes, cap) : 0;
  c.rest = c.small ? bytes - c.inline_bytes : 0;
  c.piece = bytes <= kPiecedBytes ? kPieceBytes : std::max<uint64_t>(c.rest, 1);  // Note [Eager pieces]
  const uint64_t pieces = (c.rest + c.piece - 1) / c.piece;
  const bool in_place = send == recv && bytes > 0;
  if (!r->scratch_of(static_cast<uint64_t>(size) * kFirstBytes + static_cast<uint64_t>(peers) * c.rest +
                     (in_place ? c.rest : 0))) {
    r->done = true;
    request_free(r);
    return make_error(RVL_COLL_STATUS_OUT_OF_MEMORY, "out of memory for a checked all-reduce's scratch");
  }
  // This rank's first message, in its own slot (so every rank's header and first data bytes sit
  // at the same place of the slot of its rank).
  uint8_t* mine = r->scratch.get() + static_cast<uint64_t>(me) * kFirstBytes;
  Prefix pre;
  pre.header_bytes = header_bytes, pre.bytes = bytes, pre.rest = c.rest;
  pre.piece = static_cast<uint32_t>(std::min<uint64_t>(c.piece, UINT32_MAX)), pre.pieces = static_cast<uint32_t>(pieces);
  std::memcpy(mine, &pre, sizeof pre);
  if (header_bytes) std::memcpy(mine + sizeof pre, header, header_bytes);
  if (c.inline_bytes) std::memcpy(mine + data_offset(header_bytes), send, c.inline_bytes);
  const uint8_t* own_rest = static_cast<const uint8_t*>(send) + c.inline_bytes;
  if (in_place && c.rest) {  // the result overwrites it: kept after the peers' slots
    uint8_t* copy = r->scratch.get() + static_cast<uint64_t>(size) * kFirstBytes + static_cast<uint64_t>(peers) * c.rest;
    std::memcpy(copy, own_rest, c.rest);
    own_rest = copy;
  }
  c.own_rest = own_rest;
  c.phase = 1;
  if (size == 1) {  // nothing to exchange
    std::memcpy(headers, mine + sizeof pre, header_bytes);
    if (bytes && recv != send) std::memcpy(recv, send, bytes);
    c.agreed = true, c.phase = 2;
    r->done = true;
    finish_checked_all_reduce(*r);
    *out = r;
    return nullptr;
  }
  r->parts.reserve(static_cast<size_t>(peers) * (2 + 2 * pieces) + 1);
  r->parts.assign(static_cast<size_t>(peers) * (2 + pieces), MPI_REQUEST_NULL);
  const int first_len = static_cast<int>(data_offset(header_bytes) + c.inline_bytes);
  int rc = MPI_SUCCESS;
  {
    std::lock_guard<std::mutex> lock(process().mutex);
    size_t k = 0;
    for (int p = 0; p < size && rc == MPI_SUCCESS; ++p) {  // receives first (Note [Small all-reduces])
      if (p == me) continue;
      rc = MPI_Irecv(r->scratch.get() + static_cast<uint64_t>(p) * kFirstBytes, static_cast<int>(kFirstBytes), MPI_BYTE,
                     p, kFirstTag, comm->small_comm, &r->parts[k++]);
    }
    c.first_recvs = static_cast<int>(k);
    for (int p = 0; p < size && rc == MPI_SUCCESS; ++p) {
      if (p == me) continue;
      rc = MPI_Isend(mine, first_len, MPI_BYTE, p, kFirstTag, comm->small_comm, &r->parts[k++]);
      for (uint64_t at = 0; at < c.rest && rc == MPI_SUCCESS; at += c.piece)
        rc = MPI_Isend(own_rest + at, static_cast<int>(std::min(c.piece, c.rest - at)), MPI_BYTE, p, kRestTag,
                       comm->small_comm, &r->parts[k++]);
    }
  }
  if (rc != MPI_SUCCESS) return fail_started(r, rc, "first messages");
  *out = r;
  return nullptr;
}

// Phase 1 -> 2: every first message arrived. Compare, then receive the remainders (or drain them).
void advance_checked_all_reduce(rvl_coll_request& r) {
  auto& c = r.checked;
  const rvl_communicator* comm = r.comm;
  const int me = comm->rank, size = comm->size;
  const uint8_t* scratch = r.scratch.get();
  const uint8_t* mine = scratch + static_cast<uint64_t>(me) * kFirstBytes;
  const uint64_t at = sizeof(Prefix);
  bool headers_equal = true, counts_equal = true;
  uint64_t drain_bytes = 0;
  for (int p = 0; p < size; ++p) {
    const uint8_t* m = scratch + static_cast<uint64_t>(p) * kFirstBytes;
    Prefix pre;
    std::memcpy(&pre, m, sizeof pre);
    if (pre.magic != kMagic || pre.header_bytes != c.header_bytes)
      return fail_request(r, RVL_COLL_STATUS_COMM_ERROR,
                          r.what.str() + " on rank " + std::to_string(me) + ": rank " + std::to_string(p) +
                              "'s message is not a checked call's with a " + std::to_string(c.header_bytes) +
                              "-byte header (do the ranks' check_arguments options differ?)");
    std::memcpy(static_cast<uint8_t*>(c.headers) + static_cast<uint64_t>(p) * c.header_bytes, m + at, c.header_bytes);
    if (p == me) continue;
    headers_equal = headers_equal && std::memcmp(m + at, mine + at, c.header_bytes) == 0;
    counts_equal = counts_equal && pre.bytes == c.bytes;
    drain_bytes += pre.rest;
  }
  c.agreed = headers_equal && counts_equal;
  c.counts_differ = headers_equal && !counts_equal;
  if (!c.agreed && drain_bytes) {
    c.drain.reset(new (std::nothrow) uint8_t[drain_bytes]);
    if (!c.drain) return fail_request(r, RVL_COLL_STATUS_OUT_OF_MEMORY, "out of memory draining " + r.what.str());
  }
  int rc = MPI_SUCCESS;
  {
    std::lock_guard<std::mutex> lock(process().mutex);
    uint64_t drained = 0;
    for (int p = 0; p < size && rc == MPI_SUCCESS; ++p) {
      if (p == me) continue;
      Prefix pre;
      std::memcpy(&pre, scratch + static_cast<uint64_t>(p) * kFirstBytes, sizeof pre);
      if (c.agreed && !c.small) break;
      uint8_t* into = c.agreed ? rest_slot(r, p) : c.drain.get() + drained;
      drained += c.agreed ? 0 : pre.rest;
      for (uint64_t off = 0; off < pre.rest && rc == MPI_SUCCESS; off += pre.piece) {
        r.parts.push_back(MPI_REQUEST_NULL);
        rc = MPI_Irecv(into + off, static_cast<int>(std::min<uint64_t>(pre.piece, pre.rest - off)), MPI_BYTE, p, kRestTag,
                       comm->small_comm, &r.parts.back());
      }
    }
    if (rc == MPI_SUCCESS && c.agreed && !c.small) {  // above the small path: libnbc
      r.parts.push_back(MPI_REQUEST_NULL);
      const void* s = c.send == c.recv && c.count > 0 ? MPI_IN_PLACE : c.send;
      rc = MPI_Iallreduce(s, c.recv, static_cast<int>(c.count), datatype_of(c.dtype), op_of(c.op, c.dtype), comm->comm,
                          &r.parts.back());
    }
  }
  if (rc != MPI_SUCCESS) return fail_request(r, RVL_COLL_STATUS_COMM_ERROR, mpi_message(rc, r.what.str() + " (phase 2)"));
  c.phase = 2;
}

// Every message completed: the reduction in rank order (Note [Small all-reduces]), or the verdict.
void finish_checked_all_reduce(rvl_coll_request& r) {
  auto& c = r.checked;
  if (c.counts_differ) {
    r.status = RVL_COLL_STATUS_INVALID_ARGUMENT;
    r.message = r.what.str() + ": the ranks' headers agree but their counts differ";
    return;
  }
  if (c.agreed && c.unsupported_dtype >= 0) {
    r.status = RVL_COLL_STATUS_UNSUPPORTED;
    r.message = "all_reduce_checked: dtype " + std::to_string(c.unsupported_dtype) +
                " is not supported by the MPI communicator (bool .. f64 are)";
    return;
  }
  if (!c.agreed || !c.small || c.bytes == 0 || r.comm->size == 1) return;
  const uint8_t* scratch = r.scratch.get();
  const uint64_t off = data_offset(c.header_bytes), esize = small_dtype_size(c.dtype);
  auto* out = static_cast<uint8_t*>(c.recv);
  for (int p = 0; p < r.comm->size; ++p) {
    const uint8_t* head = scratch + static_cast<uint64_t>(p) * kFirstBytes + off;
    const uint8_t* rest = p == r.comm->rank ? static_cast<const uint8_t*>(c.own_rest) : rest_slot(r, p);
    if (p == 0) {
      std::memcpy(out, head, c.inline_bytes);
      if (c.rest) std::memcpy(out + c.inline_bytes, rest, c.rest);
      continue;
    }
    combine_bytes(out, head, c.inline_bytes / esize, c.dtype, c.op);
    if (c.rest) combine_bytes(out + c.inline_bytes, rest, c.rest / esize, c.dtype, c.op);
  }
}

}  // namespace mpi_plugin
