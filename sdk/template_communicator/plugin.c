/* The smallest communicator plugin that passes ravel-comm-conformance: a world of one rank, in
 * plain C99 against <ravel/collectives.h>. Every operation completes at once (a copy, or
 * nothing), so every request is already done. Copy this folder to start a real communicator
 * (NCCL, RCCL, oneCCL, Gloo): keep the error objects and the argument checks, replace the copies
 * with your library's non-blocking calls, and make request_wait poll them against the deadline
 * (docs/distributed.md, "Writing a communicator plugin"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ravel/collectives.h"

struct rvl_coll_error {
  rvl_coll_status code;
  int32_t rank;
  char message[256];
};
struct rvl_communicator {
  int live;
};
struct rvl_coll_request {
  int done;
};

static const size_t kSize[RVL_DTYPE_COUNT_] = {1, 1, 4, 8, 4, 8, 2, 2, 1, 2, 2, 4, 8};

static rvl_coll_error* fail(rvl_coll_status code, const char* what) {
  rvl_coll_error* e = (rvl_coll_error*)malloc(sizeof *e);
  if (!e) return NULL; /* cannot report: the host sees success; acceptable only in a template */
  e->code = code;
  e->rank = -1;
  snprintf(e->message, sizeof e->message, "template: %s", what);
  return e;
}

static rvl_coll_status error_code(const rvl_coll_error* e) { return e ? e->code : RVL_COLL_STATUS_OK; }
static const char* error_message(const rvl_coll_error* e) { return e ? e->message : ""; }
static int32_t error_rank(const rvl_coll_error* e) { return e ? e->rank : -1; }
static void error_destroy(rvl_coll_error* e) { free(e); }

static rvl_coll_error* get_info(rvl_collectives_info* out) {
  if (!out) return fail(RVL_COLL_STATUS_INVALID_ARGUMENT, "get_info: NULL output");
  out->name = "template";
  out->version = "1.0";
  out->description = "a world of one rank (the SDK's template communicator)";
  return NULL;
}

static rvl_coll_error* probe(rvl_coll_probe_result* out) {
  if (!out) return fail(RVL_COLL_STATUS_INVALID_ARGUMENT, "probe: NULL output");
  out->available = 1; /* always: a world of one needs no launcher */
  out->world_size = 1;
  out->rank = 0;
  out->score = 0; /* the lowest: any real communicator wins */
  return NULL;
}

static uint32_t device_kinds(void) { return RVL_COLL_DEVICE_HOST; }

static rvl_coll_error* comm_create_world(const char* config, int64_t timeout_ms, rvl_communicator** out) {
  (void)config;
  if (!out || timeout_ms < 0) return fail(RVL_COLL_STATUS_INVALID_ARGUMENT, "comm_create_world: bad argument");
  *out = (rvl_communicator*)calloc(1, sizeof **out);
  if (!*out) return fail(RVL_COLL_STATUS_OUT_OF_MEMORY, "comm_create_world: out of memory");
  (*out)->live = 1;
  return NULL;
}
static rvl_coll_error* comm_rank(const rvl_communicator* c, int32_t* out) {
  if (!c || !out) return fail(RVL_COLL_STATUS_INVALID_ARGUMENT, "comm_rank: NULL argument");
  *out = 0;
  return NULL;
}
static rvl_coll_error* comm_size(const rvl_communicator* c, int32_t* out) {
  if (!c || !out) return fail(RVL_COLL_STATUS_INVALID_ARGUMENT, "comm_size: NULL argument");
  *out = 1;
  return NULL;
}
static rvl_coll_error* comm_destroy(rvl_communicator* c) {
  free(c);
  return NULL;
}

/* Checks what every operation shares and hands out an already completed request. */
static rvl_coll_error* start(const char* what, rvl_communicator* c, const void* a, const void* b, uint64_t count,
                             rvl_dtype t, rvl_coll_request** out) {
  char msg[128];
  if (!c || !out) {
    snprintf(msg, sizeof msg, "%s: NULL communicator or output", what);
    return fail(RVL_COLL_STATUS_INVALID_ARGUMENT, msg);
  }
  if ((int)t < 0 || t >= RVL_DTYPE_COUNT_) {
    snprintf(msg, sizeof msg, "%s: bad dtype %d", what, (int)t);
    return fail(RVL_COLL_STATUS_INVALID_ARGUMENT, msg);
  }
  if (count > 0 && (!a || !b)) {
    snprintf(msg, sizeof msg, "%s: NULL buffer", what);
    return fail(RVL_COLL_STATUS_INVALID_ARGUMENT, msg);
  }
  *out = (rvl_coll_request*)malloc(sizeof **out);
  if (!*out) return fail(RVL_COLL_STATUS_OUT_OF_MEMORY, "out of memory for a request");
  (*out)->done = 1;
  return NULL;
}

static void copy(void* dst, const void* src, uint64_t count, rvl_dtype t) {
  if (count > 0 && dst != src) memmove(dst, src, (size_t)(count * kSize[t]));
}

static rvl_coll_error* all_reduce(rvl_communicator* c, const void* s, void* r, uint64_t n, rvl_dtype t, rvl_coll_op op,
                                  rvl_coll_request** out) {
  if ((int)op < 0 || op >= RVL_COLL_OP_COUNT_) return fail(RVL_COLL_STATUS_INVALID_ARGUMENT, "all_reduce: bad op");
  rvl_coll_error* e = start("all_reduce", c, s, r, n, t, out);
  if (!e) copy(r, s, n, t); /* the reduction over one rank is its data */
  return e;
}
static rvl_coll_error* all_gather(rvl_communicator* c, const void* s, void* r, uint64_t n, rvl_dtype t,
                                  rvl_coll_request** out) {
  rvl_coll_error* e = start("all_gather", c, s, r, n, t, out);
  if (!e) copy(r, s, n, t);
  return e;
}
static rvl_coll_error* reduce_scatter(rvl_communicator* c, const void* s, void* r, uint64_t n, rvl_dtype t,
                                      rvl_coll_op op, rvl_coll_request** out) {
  if ((int)op < 0 || op >= RVL_COLL_OP_COUNT_) return fail(RVL_COLL_STATUS_INVALID_ARGUMENT, "reduce_scatter: bad op");
  rvl_coll_error* e = start("reduce_scatter", c, s, r, n, t, out);
  if (!e) copy(r, s, n, t);
  return e;
}
static rvl_coll_error* broadcast(rvl_communicator* c, void* b, uint64_t n, rvl_dtype t, int32_t root,
                                 rvl_coll_request** out) {
  if (root != 0) return fail(RVL_COLL_STATUS_INVALID_ARGUMENT, "broadcast: the only rank is 0");
  return start("broadcast", c, b, b, n, t, out);
}
static rvl_coll_error* send(rvl_communicator* c, const void* b, uint64_t n, rvl_dtype t, int32_t peer, int32_t tag,
                            rvl_coll_request** out) {
  (void)c, (void)b, (void)n, (void)t, (void)peer, (void)tag, (void)out;
  return fail(RVL_COLL_STATUS_INVALID_ARGUMENT, "send: a world of one has no other rank");
}
static rvl_coll_error* recv(rvl_communicator* c, void* b, uint64_t n, rvl_dtype t, int32_t peer, int32_t tag,
                            rvl_coll_request** out) {
  (void)c, (void)b, (void)n, (void)t, (void)peer, (void)tag, (void)out;
  return fail(RVL_COLL_STATUS_INVALID_ARGUMENT, "recv: a world of one has no other rank");
}
static rvl_coll_error* barrier(rvl_communicator* c, rvl_coll_request** out) {
  return start("barrier", c, c, c, 0, RVL_DTYPE_U8, out);
}

static rvl_coll_error* request_test(rvl_coll_request* r, int32_t* done) {
  if (!r || !done) return fail(RVL_COLL_STATUS_INVALID_ARGUMENT, "request_test: NULL argument");
  *done = 1;
  return NULL;
}
static rvl_coll_error* request_wait(rvl_coll_request* r, int64_t timeout_ms) {
  if (!r || timeout_ms < 0) return fail(RVL_COLL_STATUS_INVALID_ARGUMENT, "request_wait: bad argument");
  return NULL; /* already complete */
}
static void request_free(rvl_coll_request* r) { free(r); }

static const rvl_collectives_api kApi = {
    sizeof(rvl_collectives_api), RVL_COLL_ABI_MAJOR, RVL_COLL_ABI_MINOR,
    error_code, error_message, error_rank, error_destroy,
    get_info, probe, device_kinds,
    comm_create_world, comm_rank, comm_size, NULL /* comm_split: optional */, comm_destroy,
    all_reduce, all_gather, reduce_scatter, broadcast, send, recv, barrier,
    request_test, request_wait, request_free,
    NULL /* all_reduce_checked: optional, since 1.1 */,
};

RVL_EXPORT const rvl_collectives_api* rvl_collectives_entry(void) { return &kApi; }
