/* Ravel communicator C ABI, version 1.1.
 *
 * Plain C99. A communicator plugin is a shared object that exports exactly one symbol,
 * `rvl_collectives_entry`, returning a pointer to a static, append-only table of function
 * pointers (rvl_collectives_api). It moves data between the processes ("ranks") of one job:
 * all-reduce, all-gather, reduce-scatter, broadcast, send/recv and barrier. Plugins for MPI,
 * NCCL, RCCL, oneCCL or Gloo implement the same table (docs/distributed.md is the guide).
 *
 * The rules are those of the device ABI (backend.h, docs/abi.md), restated where they differ:
 *  - Versioning: every struct begins with `struct_size` (set by whoever fills it in). The host
 *    accepts a table whose `abi_major` equals RVL_COLL_ABI_MAJOR; `abi_minor` may be older.
 *    Members are only appended; a member beyond the table's struct_size, or NULL, is "not
 *    supported" and the host never calls it. RVL_COLL_REQUIRED_MEMBERS lists the required ones.
 *  - Errors: every fallible call returns `rvl_coll_error*`; NULL means success. A non-NULL error
 *    is owned by the plugin: the host reads it (error_code, error_message, error_rank) and hands
 *    it back exactly once with error_destroy. No member may abort, exit, longjmp or let a C++
 *    exception out: a failure of the library underneath (MPI_ERR_*, ncclResult_t, ...) is an
 *    error object, never the library's default "abort the job" handler.
 *  - Deadlines: every wait on another rank has one. Operations are non-blocking: each returns a
 *    request at once, and request_wait takes a deadline in milliseconds; when it passes, the
 *    wait returns RVL_COLL_STATUS_TIMEOUT (the request stays valid: the host may wait again or
 *    abandon it). So a rank that died, or one that never calls the matching operation, ends in
 *    a typed error on every rank that waits for it, within the deadline, never in a hang.
 *  - Matching: like MPI, collectives on one communicator must be called in the same order by
 *    every rank with matching arguments (count, dtype, op, root). The plugin need not detect a
 *    mismatch (MPI cannot); the Ravel core exchanges a small header first (docs/distributed.md).
 *  - Buffers are host memory unless `device_kinds` says otherwise. They must stay valid and
 *    untouched until the request completes (test or wait reported done). send and receive
 *    buffers of one operation must not overlap, except where a member says "in place".
 *  - Threading: a plugin must accept calls from any host thread; it may serialise them
 *    internally. Calls on one communicator are issued by the host in the same order on every rank.
 *  - Broken communicators: after a request was abandoned (request_free before completion) or a
 *    peer was found lost, the communicator is *broken*: every later operation on it fails at
 *    once with RVL_COLL_STATUS_PEER_LOST or RVL_COLL_STATUS_TIMEOUT and the original message,
 *    and comm_destroy must not wait for peers (an MPI plugin skips MPI_Finalize: docs/distributed.md,
 *    "Exit after a failure"). The process should then exit with a non-zero status.
 */
#ifndef RAVEL_COLLECTIVES_H
#define RAVEL_COLLECTIVES_H

#include <stddef.h>
#include <stdint.h>

#include "ravel/backend.h" /* rvl_dtype, RVL_STRUCT_SIZE, RVL_HAS_MEMBER, RVL_EXPORT */

#ifdef __cplusplus
extern "C" {
#endif

#define RVL_COLL_ABI_MAJOR 1
#define RVL_COLL_ABI_MINOR 1

/* The name of the single exported symbol, for dlsym-style lookup. */
#define RVL_COLLECTIVES_ENTRY_SYMBOL "rvl_collectives_entry"

/* ---- status ---------------------------------------------------------------------------- */
typedef enum rvl_coll_status {
  RVL_COLL_STATUS_OK = 0,
  RVL_COLL_STATUS_INVALID_ARGUMENT = 1, /* bad pointer, rank, count, dtype, op, request */
  RVL_COLL_STATUS_OUT_OF_MEMORY = 2,
  RVL_COLL_STATUS_UNSUPPORTED = 3,      /* well-formed but not implemented (e.g. a device kind) */
  RVL_COLL_STATUS_TIMEOUT = 4,          /* a deadline passed before the operation completed */
  RVL_COLL_STATUS_PEER_LOST = 5,        /* a rank is known to be gone (error_rank names it) */
  RVL_COLL_STATUS_COMM_ERROR = 6,       /* the transport or library failed otherwise */
  RVL_COLL_STATUS_INTERNAL = 7          /* a bug in the plugin */
} rvl_coll_status;

/* Reductions. bool is one byte holding 0 or 1: SUM and MAX are logical or, PROD and MIN logical
 * and. Integers wrap on overflow (two's complement). Float MAX/MIN of a NaN are unspecified in
 * 1.0 (MPI's own operators do not propagate NaN). */
typedef enum rvl_coll_op {
  RVL_COLL_SUM = 0,
  RVL_COLL_PROD = 1,
  RVL_COLL_MAX = 2,
  RVL_COLL_MIN = 3,
  RVL_COLL_OP_COUNT_ = 4
} rvl_coll_op;

typedef struct rvl_coll_error rvl_coll_error;     /* opaque, plugin-owned */
typedef struct rvl_communicator rvl_communicator; /* opaque, plugin-owned group of ranks */
typedef struct rvl_coll_request rvl_coll_request; /* opaque, plugin-owned pending operation */

/* ---- info and probe -------------------------------------------------------------------- */
typedef struct rvl_collectives_info {
  size_t struct_size;
  const char* name;        /* short, unique, lower case: "mpi", "nccl", "gloo" */
  const char* version;     /* the plugin's own version, with its library's: "1.0 (Open MPI 4.1.4)" */
  const char* description;
} rvl_collectives_info;

/* Filled by the plugin; the host sets struct_size to what it allocated and zero-initialises it. */
typedef struct rvl_coll_probe_result {
  size_t struct_size;
  /* 1: a launcher environment this plugin can join was found (mpirun's OMPI_COMM_WORLD_*, a
     PMI/PMIx server, ...); 0: none, which is not an error: the program is a world of one. */
  int32_t available;
  int32_t world_size; /* the launcher's world size when available, else 1 */
  int32_t rank;       /* this process's rank in it when available, else 0 */
  int32_t score;      /* preference among communicators that are available; higher is better */
  char reason[256];   /* with available == 0: why ("no launcher environment: OMPI_COMM_WORLD_SIZE unset") */
} rvl_coll_probe_result;

/* Device kinds a communicator reads and writes directly (bit (1u << rvl_device_kind) of
 * backend.h). The core stages buffers of any other device through host memory. */
#define RVL_COLL_DEVICE_HOST (1u << RVL_DEVICE_CPU)

/* ---- the function table ------------------------------------------------------------------ */
/* (required) members are listed in RVL_COLL_REQUIRED_MEMBERS, which the core's loader and the
 * communicator conformance runner both check; (optional, since 1.N) members may be NULL or lie
 * beyond the plugin's struct_size. Counts are in elements of `dtype`; a count of 0 is valid
 * (the operation still synchronises as its kind does) and its buffers may then be NULL. */
typedef struct rvl_collectives_api {
  size_t struct_size; /* sizeof the table the plugin was built with */
  uint32_t abi_major; /* must equal the host's RVL_COLL_ABI_MAJOR */
  uint32_t abi_minor; /* the minor version the plugin was built against */

  /* ---- errors (none of these may fail or block) */
  /* (required) The status of `error`; RVL_COLL_STATUS_OK for NULL. */
  rvl_coll_status (*error_code)(const rvl_coll_error* error);
  /* (required) Its message, owned by the error; valid until error_destroy. "" for NULL. The
   * message names the operation, the ranks involved and, for TIMEOUT, the deadline. */
  const char* (*error_message)(const rvl_coll_error* error);
  /* (required) The rank (in the communicator the failing call used) the error is about: the
   * lost or late peer, or -1 when no single rank is to blame or it is unknown. */
  int32_t (*error_rank)(const rvl_coll_error* error);
  /* (required) Frees an error (NULL is a no-op). */
  void (*error_destroy)(rvl_coll_error* error);

  /* ---- plugin */
  /* (required) Static strings owned by the plugin, valid until unload. Never blocks; may be
   * called before anything else. */
  rvl_coll_error* (*get_info)(rvl_collectives_info* out);
  /* (required) Cheap and side-effect free: reads the environment only, starts no library. "No
   * launcher" is available == 0 with a reason, not an error. */
  rvl_coll_error* (*probe)(rvl_coll_probe_result* out);
  /* (required) The device kinds whose memory the plugin's operations may read and write
   * directly, as RVL_COLL_DEVICE_* bits; at least RVL_COLL_DEVICE_HOST. Never blocks. */
  uint32_t (*device_kinds)(void);

  /* ---- communicators */
  /* (required) Joins the world the launcher set up (for MPI: MPI_Init_thread, once per
   * process, with the thread level checked) and returns a communicator over all its ranks. May
   * block for start-up, at most `timeout_ms` where the library allows it. `config` is a
   * NUL-terminated JSON object of plugin options, or NULL ("{}"). Called at most once per
   * process before comm_destroy of the result. */
  rvl_coll_error* (*comm_create_world)(const char* config, int64_t timeout_ms, rvl_communicator** out);
  /* (required) This process's rank in `comm`, 0 .. size-1. Never blocks. */
  rvl_coll_error* (*comm_rank)(const rvl_communicator* comm, int32_t* out);
  /* (required) The number of ranks of `comm`. Never blocks. */
  rvl_coll_error* (*comm_size)(const rvl_communicator* comm, int32_t* out);
  /* (optional, since 1.0) Collective over `comm`: a new communicator of the ranks that passed
   * the same `color` (>= 0), ordered by `key` then by rank in `comm`; color < 0 gives *out ==
   * NULL. Blocks, at most `timeout_ms` for the ranks to arrive (TIMEOUT otherwise). */
  rvl_coll_error* (*comm_split)(rvl_communicator* comm, int32_t color, int32_t key, int64_t timeout_ms,
                                rvl_communicator** out);
  /* (required) Frees a communicator. Requests on it must have completed or been freed. The
   * world communicator shuts the library down (MPI_Finalize) unless the communicator is broken,
   * in which case it must return without waiting for any peer. */
  rvl_coll_error* (*comm_destroy)(rvl_communicator* comm);

  /* ---- operations: each starts the operation and returns a request at once (it never waits
   * for a peer). Arguments are validated before anything starts (INVALID_ARGUMENT). */
  /* (required) Elementwise `op` over the ranks' `send` (count elements each); every rank gets
   * the result in `recv`. In place when send == recv. */
  rvl_coll_error* (*all_reduce)(rvl_communicator* comm, const void* send, void* recv, uint64_t count,
                                rvl_dtype dtype, rvl_coll_op op, rvl_coll_request** out);
  /* (required) Every rank's `send` (count elements) concatenated in rank order into `recv`
   * (count * size elements). */
  rvl_coll_error* (*all_gather)(rvl_communicator* comm, const void* send, void* recv, uint64_t count,
                                rvl_dtype dtype, rvl_coll_request** out);
  /* (required) `send` holds size blocks of `count` elements; rank r receives in `recv` (count
   * elements) the `op` over all ranks of block r. */
  rvl_coll_error* (*reduce_scatter)(rvl_communicator* comm, const void* send, void* recv, uint64_t count,
                                    rvl_dtype dtype, rvl_coll_op op, rvl_coll_request** out);
  /* (required) `buffer` (count elements) of rank `root` is copied to every rank's `buffer`. */
  rvl_coll_error* (*broadcast)(rvl_communicator* comm, void* buffer, uint64_t count, rvl_dtype dtype,
                               int32_t root, rvl_coll_request** out);
  /* (required) Point to point: `count` elements to rank `peer`, matched by a recv with the same
   * `tag` (>= 0) on that rank. */
  rvl_coll_error* (*send)(rvl_communicator* comm, const void* buffer, uint64_t count, rvl_dtype dtype,
                          int32_t peer, int32_t tag, rvl_coll_request** out);
  /* (required) Receives exactly `count` elements from `peer` with `tag`. A message of another
   * size completes the request with INVALID_ARGUMENT naming both sizes. */
  rvl_coll_error* (*recv)(rvl_communicator* comm, void* buffer, uint64_t count, rvl_dtype dtype,
                          int32_t peer, int32_t tag, rvl_coll_request** out);
  /* (required) Completes once every rank has started it. */
  rvl_coll_error* (*barrier)(rvl_communicator* comm, rvl_coll_request** out);

  /* ---- requests */
  /* (required) *done = 1 if the request completed (its buffers may be reused), else 0. Never
   * blocks. A request that failed returns its error (and *done = 1). */
  rvl_coll_error* (*request_test)(rvl_coll_request* request, int32_t* done);
  /* (required) Waits until the request completes or `timeout_ms` (>= 0) milliseconds have
   * passed, whichever is first: RVL_COLL_STATUS_TIMEOUT then, naming the operation, the
   * communicator's ranks and, where the plugin knows it, the rank(s) that are late or lost
   * (error_rank). The request stays valid after a TIMEOUT. */
  rvl_coll_error* (*request_wait)(rvl_coll_request* request, int64_t timeout_ms);
  /* (required) Frees a request. Freeing one that has not completed abandons it: its buffers may
   * still be written until the process exits, and its communicator becomes broken (see above). */
  void (*request_free)(rvl_coll_request* request);

  /* ---- since 1.1 */
  /* (optional, since 1.1) all_reduce with the ranks' argument check in the same messages: every
   * rank's `header` (header_bytes <= RVL_COLL_HEADER_MAX, opaque to the plugin) reaches every
   * rank's `headers` (size * header_bytes, in rank order). If every rank's header and count are
   * equal byte for byte, the all-reduce is done as all_reduce does; if not, `recv` is left
   * unwritten and the request still completes OK (the host compares `headers`, which are the same
   * on every rank, and reports the mismatch), except that equal headers with different counts
   * complete with INVALID_ARGUMENT. count 0 (send, recv NULL) is the header exchange alone. The
   * plugin must not leave a message unmatched on a mismatch: the world stays usable. A checked
   * call on one rank is matched only by a checked call on the others (whatever their counts);
   * a host uses it for every argument check of a communicator or for none. */
  rvl_coll_error* (*all_reduce_checked)(rvl_communicator* comm, const void* header, uint32_t header_bytes,
                                        void* headers, const void* send, void* recv, uint64_t count,
                                        rvl_dtype dtype, rvl_coll_op op, rvl_coll_request** out);
} rvl_collectives_api;

/* all_reduce_checked's largest header. */
#define RVL_COLL_HEADER_MAX 256

/* The members every communicator plugin must provide (non-NULL, within struct_size). */
#define RVL_COLL_REQUIRED_MEMBERS(X)                                                             \
  X(error_code) X(error_message) X(error_rank) X(error_destroy) X(get_info) X(probe)             \
  X(device_kinds) X(comm_create_world) X(comm_rank) X(comm_size) X(comm_destroy) X(all_reduce)   \
  X(all_gather) X(reduce_scatter) X(broadcast) X(send) X(recv) X(barrier) X(request_test)        \
  X(request_wait) X(request_free)

#define RVL_COLLECTIVES_API_STRUCT_SIZE_1_0 RVL_STRUCT_SIZE(rvl_collectives_api, request_free)
#define RVL_COLLECTIVES_API_STRUCT_SIZE_1_1 RVL_STRUCT_SIZE(rvl_collectives_api, all_reduce_checked)
#define RVL_COLL_PROBE_RESULT_STRUCT_SIZE_1_0 RVL_STRUCT_SIZE(rvl_coll_probe_result, reason)
#define RVL_COLLECTIVES_INFO_STRUCT_SIZE_1_0 RVL_STRUCT_SIZE(rvl_collectives_info, description)

/* The exported entry point. Returns a pointer to a static table; never NULL. Must be cheap and
 * must not initialise anything. */
typedef const rvl_collectives_api* (*rvl_collectives_entry_fn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* RAVEL_COLLECTIVES_H */
