// The Open MPI communicator plugin: the rvl_collectives_api table (collectives.h) over MPI's
// non-blocking operations (MPI_Iallreduce and friends), with MPI_ERRORS_RETURN and deadlines
// enforced by polling (Note [Deadlines by polling] in mpi_request.cpp). docs/distributed.md.
#include <climits>
#include <cstdlib>
#include <cstring>
#include <new>

#include "mpi_state.hpp"

using namespace mpi_plugin;

namespace {

const char* const kDTypeNames[] = {"bool", "u8", "i32", "i64", "f32", "f64"};
const char* const kOpNames[] = {"sum", "prod", "max", "min"};
constexpr size_t kDTypeSize[] = {1, 1, 4, 8, 4, 8};

bool valid_dtype(rvl_dtype t) { return t >= 0 && t < RVL_DTYPE_COUNT_; }

MPI_Datatype mpi_type(rvl_dtype t) {
  switch (t) {
    case RVL_DTYPE_BOOL: return MPI_UINT8_T;
    case RVL_DTYPE_U8: return MPI_UINT8_T;
    case RVL_DTYPE_I32: return MPI_INT32_T;
    case RVL_DTYPE_I64: return MPI_INT64_T;
    case RVL_DTYPE_F32: return MPI_FLOAT;
    case RVL_DTYPE_F64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;
  }
}

// Note [8-bit sums]
// Open MPI 4.1's op/avx component adds 8- and 16-bit integers with *saturating* instructions
// (open-mpi/ompi#8045, closed as wontfix) from 16 elements up: 252 + 9 gave 255, not 5, in the
// conformance runner. collectives.h promises wrapping, so u8 sums use an operator of our own.
void wrapping_u8_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint8_t*>(in);
  auto* b = static_cast<uint8_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = static_cast<uint8_t>(a[i] + b[i]);
}

MPI_Op u8_sum() {
  static MPI_Op op = [] {  // first used after MPI_Init (operations need the world), under the MPI lock
    MPI_Op o = MPI_OP_NULL;
    MPI_Op_create(wrapping_u8_sum, 1, &o);
    return o;
  }();
  return op;
}

// bool is a byte 0/1: or is MAX, and is MIN (collectives.h).
MPI_Op mpi_op(rvl_coll_op op, rvl_dtype t) {
  const bool b = t == RVL_DTYPE_BOOL;
  switch (op) {
    case RVL_COLL_SUM: return b ? MPI_MAX : t == RVL_DTYPE_U8 ? u8_sum() : MPI_SUM;
    case RVL_COLL_PROD: return b ? MPI_MIN : MPI_PROD;
    case RVL_COLL_MAX: return MPI_MAX;
    case RVL_COLL_MIN: return MPI_MIN;
    default: return MPI_OP_NULL;
  }
}

OpText describe(const char* what, uint64_t count, rvl_dtype t, int op = -1) { return OpText(what, count, t, op); }

// Validates what every operation shares; on success *n is the count as MPI's int.
rvl_coll_error* check(const char* what, rvl_communicator* comm, const void* a, const void* b, uint64_t count,
                      rvl_dtype t, rvl_coll_request** out, int* n, uint64_t scale = 1) {
  if (!comm || !out) return make_error(RVL_COLL_STATUS_INVALID_ARGUMENT, std::string(what) + ": NULL communicator or output");
  if (!valid_dtype(t))
    return make_error(RVL_COLL_STATUS_INVALID_ARGUMENT, std::string(what) + ": bad dtype " + std::to_string(t));
  // The 1.7 dtypes (f16, bf16, i8, ...) have no MPI reduction here yet: refused, never sent as
  // MPI_DATATYPE_NULL.
  if (mpi_type(t) == MPI_DATATYPE_NULL)
    return make_error(RVL_COLL_STATUS_UNSUPPORTED, std::string(what) + ": dtype " + std::to_string(t) +
                                                       " is not supported by the MPI communicator (bool .. f64 are)");
  // MPI-3 counts are ints; 1.0 of this plugin does not split larger operations.
  if (count > static_cast<uint64_t>(INT_MAX) / (scale ? scale : 1))
    return make_error(RVL_COLL_STATUS_UNSUPPORTED, std::string(what) + ": " + std::to_string(count) +
                                                       " elements exceed MPI's int count (2^31 - 1)");
  if (count > 0 && (!a || !b)) return make_error(RVL_COLL_STATUS_INVALID_ARGUMENT, std::string(what) + ": NULL buffer");
  *n = static_cast<int>(count);
  return broken_error();
}

// Starts one MPI operation through `start` (under the library lock) and returns its request.
template <class Start>
rvl_coll_error* launch(rvl_communicator* comm, OpText what, rvl_coll_request** out, Start start,
                       int peer = -1, int64_t recv_bytes = -1) {
  rvl_coll_request* r = new_request(comm, what);
  if (!r) return make_error(RVL_COLL_STATUS_OUT_OF_MEMORY, "out of memory for a request");
  r->peer = peer;
  r->recv_bytes = recv_bytes;
  int rc;
  {
    std::lock_guard<std::mutex> lock(process().mutex);
    rc = start(&r->request);
  }
  if (rc != MPI_SUCCESS) {
    std::string msg = mpi_message(rc, r->what.str() + " on rank " + std::to_string(comm->rank));
    r->done = true;
    request_free(r);
    return make_error(RVL_COLL_STATUS_COMM_ERROR, msg, peer);
  }
  *out = r;
  return nullptr;
}

// ---- the table's members ---------------------------------------------------------------------

rvl_coll_status error_code(const rvl_coll_error* e) { return e ? e->code : RVL_COLL_STATUS_OK; }
const char* error_message(const rvl_coll_error* e) { return e ? e->message.c_str() : ""; }
int32_t error_rank(const rvl_coll_error* e) { return e ? e->rank : -1; }
void error_destroy(rvl_coll_error* e) { delete e; }

std::string library_version() {
  char v[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(v, &len);  // callable before MPI_Init
  std::string s(v, static_cast<size_t>(len));
  if (auto cut = s.find(','); cut != std::string::npos) s.resize(cut);
  return s;
}

rvl_coll_error* get_info(rvl_collectives_info* out) {
  if (!out) return make_error(RVL_COLL_STATUS_INVALID_ARGUMENT, "get_info: NULL output");
  static const std::string version = "1.0 (" + library_version() + ")";
  out->name = "mpi";
  out->version = version.c_str();
  out->description = "Open MPI non-blocking collectives, host memory (MPI_ERRORS_RETURN, deadlines by polling)";
  return nullptr;
}

// Launchers whose environment Open MPI joins: its own mpirun/prterun, and PMI (srun, hydra).
rvl_coll_error* probe(rvl_coll_probe_result* out) {
  if (!out) return make_error(RVL_COLL_STATUS_INVALID_ARGUMENT, "probe: NULL output");
  const char* pairs[][2] = {{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"}, {"PMI_SIZE", "PMI_RANK"}};
  out->available = 0;
  out->world_size = 1;
  out->rank = 0;
  out->score = 10;
  for (auto& pr : pairs) {
    const char* size = std::getenv(pr[0]);
    const char* rank = std::getenv(pr[1]);
    if (size && rank && *size && *rank) {
      out->available = 1;
      out->world_size = std::atoi(size);
      out->rank = std::atoi(rank);
      return nullptr;
    }
  }
  if (RVL_HAS_MEMBER(out, rvl_coll_probe_result, reason))
    std::snprintf(out->reason, sizeof out->reason,
                  "no launcher environment (OMPI_COMM_WORLD_SIZE/RANK and PMI_SIZE/RANK unset): not started by mpirun");
  return nullptr;
}

uint32_t device_kinds() { return RVL_COLL_DEVICE_HOST; }

rvl_coll_error* comm_create_world(const char* /*config: no options in 1.0*/, int64_t timeout_ms, rvl_communicator** out) {
  if (!out) return make_error(RVL_COLL_STATUS_INVALID_ARGUMENT, "comm_create_world: NULL output");
  if (timeout_ms < 0) return make_error(RVL_COLL_STATUS_INVALID_ARGUMENT, "comm_create_world: negative timeout");
  return create_world(timeout_ms, out);
}

rvl_coll_error* comm_rank(const rvl_communicator* c, int32_t* out) {
  if (!c || !out) return make_error(RVL_COLL_STATUS_INVALID_ARGUMENT, "comm_rank: NULL argument");
  *out = c->rank;
  return nullptr;
}

rvl_coll_error* comm_size(const rvl_communicator* c, int32_t* out) {
  if (!c || !out) return make_error(RVL_COLL_STATUS_INVALID_ARGUMENT, "comm_size: NULL argument");
  *out = c->size;
  return nullptr;
}

rvl_coll_error* comm_split(rvl_communicator* c, int32_t color, int32_t key, int64_t timeout_ms, rvl_communicator** out) {
  if (!c || !out || timeout_ms < 0) return make_error(RVL_COLL_STATUS_INVALID_ARGUMENT, "comm_split: bad argument");
  return split(c, color, key, timeout_ms, out);
}

rvl_coll_error* comm_destroy(rvl_communicator* c) { return destroy(c); }

rvl_coll_error* all_reduce(rvl_communicator* c, const void* send, void* recv, uint64_t count, rvl_dtype t,
                           rvl_coll_op op, rvl_coll_request** out) {
  int n = 0;
  if (rvl_coll_error* e = check("all_reduce", c, send, recv, count, t, out, &n)) return e;
  if (op < 0 || op >= RVL_COLL_OP_COUNT_)
    return make_error(RVL_COLL_STATUS_INVALID_ARGUMENT, "all_reduce: bad op " + std::to_string(op));
  if (small_all_reduce_applies(c, count * kDTypeSize[t]))  // Note [Small all-reduces]
    return start_small_all_reduce(c, send, recv, count, t, op, describe("all_reduce", count, t, op), out);
  const void* s = send == recv && count > 0 ? MPI_IN_PLACE : send;
  return launch(c, describe("all_reduce", count, t, op), out, [&](MPI_Request* r) {
    return MPI_Iallreduce(s, recv, n, mpi_type(t), mpi_op(op, t), c->comm, r);
  });
}

// Note [Checked all-reduces] (mpi_checked.cpp).
rvl_coll_error* all_reduce_checked(rvl_communicator* c, const void* header, uint32_t header_bytes, void* headers,
                                   const void* send, void* recv, uint64_t count, rvl_dtype t, rvl_coll_op op,
                                   rvl_coll_request** out) {
  int n = 0;
  // A dtype MPI cannot reduce here: the headers are still exchanged (a rank with another dtype
  // must see this one's), and the request then completes UNSUPPORTED if they agree.
  const bool unsupported = valid_dtype(t) && mpi_type(t) == MPI_DATATYPE_NULL;
  if (unsupported) {
    if (rvl_coll_error* e = check("all_reduce_checked", c, nullptr, nullptr, 0, RVL_DTYPE_U8, out, &n)) return e;
  } else if (rvl_coll_error* e = check("all_reduce_checked", c, send, recv, count, t, out, &n)) {
    return e;
  }
  if (op < 0 || op >= RVL_COLL_OP_COUNT_)
    return make_error(RVL_COLL_STATUS_INVALID_ARGUMENT, "all_reduce_checked: bad op " + std::to_string(op));
  if (header_bytes > RVL_COLL_HEADER_MAX || (header_bytes > 0 && (!header || !headers)))
    return make_error(RVL_COLL_STATUS_INVALID_ARGUMENT, "all_reduce_checked: a header of " + std::to_string(header_bytes) +
                                                            " bytes (at most " + std::to_string(RVL_COLL_HEADER_MAX) +
                                                            ", with header and headers not NULL)");
  if (!unsupported) return start_checked_all_reduce(c, header, header_bytes, headers, send, recv, count, t, op, out);
  rvl_coll_error* e = start_checked_all_reduce(c, header, header_bytes, headers, nullptr, nullptr, 0, RVL_DTYPE_U8, op, out);
  if (!e) (*out)->checked.unsupported_dtype = t;
  return e;
}

rvl_coll_error* all_gather(rvl_communicator* c, const void* send, void* recv, uint64_t count, rvl_dtype t,
                           rvl_coll_request** out) {
  int n = 0;
  if (rvl_coll_error* e = check("all_gather", c, send, recv, count, t, out, &n, c ? c->size : 1)) return e;
  return launch(c, describe("all_gather", count, t), out, [&](MPI_Request* r) {
    return MPI_Iallgather(send, n, mpi_type(t), recv, n, mpi_type(t), c->comm, r);
  });
}

rvl_coll_error* reduce_scatter(rvl_communicator* c, const void* send, void* recv, uint64_t count, rvl_dtype t,
                               rvl_coll_op op, rvl_coll_request** out) {
  int n = 0;
  if (rvl_coll_error* e = check("reduce_scatter", c, send, recv, count, t, out, &n, c ? c->size : 1)) return e;
  if (op < 0 || op >= RVL_COLL_OP_COUNT_)
    return make_error(RVL_COLL_STATUS_INVALID_ARGUMENT, "reduce_scatter: bad op " + std::to_string(op));
  return launch(c, describe("reduce_scatter", count, t, op), out, [&](MPI_Request* r) {
    return MPI_Ireduce_scatter_block(send, recv, n, mpi_type(t), mpi_op(op, t), c->comm, r);
  });
}

rvl_coll_error* broadcast(rvl_communicator* c, void* buffer, uint64_t count, rvl_dtype t, int32_t root,
                          rvl_coll_request** out) {
  int n = 0;
  if (rvl_coll_error* e = check("broadcast", c, buffer, buffer, count, t, out, &n)) return e;
  if (root < 0 || root >= c->size)
    return make_error(RVL_COLL_STATUS_INVALID_ARGUMENT, "broadcast: root " + std::to_string(root) +
                                                            " outside [0, " + std::to_string(c->size) + ")");
  return launch(c, OpText("broadcast", count, t, -1, " from rank ", root), out,
                [&](MPI_Request* r) { return MPI_Ibcast(buffer, n, mpi_type(t), root, c->comm, r); });
}

rvl_coll_error* check_peer(const char* what, rvl_communicator* c, int32_t peer, int32_t tag) {
  if (peer < 0 || peer >= c->size || peer == c->rank)
    return make_error(RVL_COLL_STATUS_INVALID_ARGUMENT, std::string(what) + ": peer " + std::to_string(peer) +
                                                            " is not another rank of [0, " + std::to_string(c->size) + ")");
  int* ub = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(c->comm, MPI_TAG_UB, &ub, &flag);
  if (tag < 0 || (flag && ub && tag > *ub))
    return make_error(RVL_COLL_STATUS_INVALID_ARGUMENT, std::string(what) + ": tag " + std::to_string(tag) +
                                                            " outside [0, MPI_TAG_UB]");
  return nullptr;
}

rvl_coll_error* send(rvl_communicator* c, const void* buffer, uint64_t count, rvl_dtype t, int32_t peer, int32_t tag,
                     rvl_coll_request** out) {
  int n = 0;
  if (rvl_coll_error* e = check("send", c, buffer, buffer, count, t, out, &n)) return e;
  if (rvl_coll_error* e = check_peer("send", c, peer, tag)) return e;
  return launch(c, OpText("send", count, t, -1, " to rank ", peer), out,
                [&](MPI_Request* r) { return MPI_Isend(buffer, n, mpi_type(t), peer, tag, c->comm, r); }, peer);
}

rvl_coll_error* recv(rvl_communicator* c, void* buffer, uint64_t count, rvl_dtype t, int32_t peer, int32_t tag,
                     rvl_coll_request** out) {
  int n = 0;
  if (rvl_coll_error* e = check("recv", c, buffer, buffer, count, t, out, &n)) return e;
  if (rvl_coll_error* e = check_peer("recv", c, peer, tag)) return e;
  // Received as bytes, so a message of another size is reported with both sizes (a longer one
  // as MPI's truncation, a shorter one by the byte count; mpi_request.cpp).
  const int64_t bytes = static_cast<int64_t>(count * kDTypeSize[t]);
  return launch(c, OpText("recv", count, t, -1, " from rank ", peer), out,
                [&](MPI_Request* r) { return MPI_Irecv(buffer, static_cast<int>(bytes), MPI_BYTE, peer, tag, c->comm, r); },
                peer, bytes);
}

rvl_coll_error* barrier(rvl_communicator* c, rvl_coll_request** out) {
  if (!c || !out) return make_error(RVL_COLL_STATUS_INVALID_ARGUMENT, "barrier: NULL argument");
  if (rvl_coll_error* e = broken_error()) return e;
  return launch(c, "barrier", out, [&](MPI_Request* r) { return MPI_Ibarrier(c->comm, r); });
}

const rvl_collectives_api kApi = {
    sizeof(rvl_collectives_api), RVL_COLL_ABI_MAJOR, RVL_COLL_ABI_MINOR,
    error_code, error_message, error_rank, error_destroy,
    get_info, probe, device_kinds,
    comm_create_world, comm_rank, comm_size, comm_split, comm_destroy,
    all_reduce, all_gather, reduce_scatter, broadcast, send, recv, barrier,
    mpi_plugin::request_test, mpi_plugin::request_wait, mpi_plugin::request_free,
    all_reduce_checked,  // 1.1
};

}  // namespace

extern "C" RVL_EXPORT const rvl_collectives_api* rvl_collectives_entry(void) { return &kApi; }

MPI_Datatype mpi_plugin::datatype_of(rvl_dtype t) { return mpi_type(t); }
MPI_Op mpi_plugin::op_of(rvl_coll_op op, rvl_dtype t) { return mpi_op(op, t); }

std::string OpText::str() const {  // Note [Described on demand]
  std::string s = name;
  if (dtype < 0) return s;
  s += std::string(" of ") + std::to_string(count) + " " + (valid_dtype(static_cast<rvl_dtype>(dtype)) ? kDTypeNames[dtype] : "?");
  if (op >= 0 && op < 4) s += std::string(" (") + kOpNames[op] + ")";
  if (peer_word) s += peer_word + std::to_string(peer);
  return s;
}
