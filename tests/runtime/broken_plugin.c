/* Deliberately broken backend plugins for the runtime tests. One source, compiled once per case
 * with BROKEN_CASE set to one of the values below (see CMakeLists.txt):
 *   1 BAD_MAJOR     abi_major = RVL_ABI_MAJOR + 1
 *   2 NO_ENTRY      exports rvl_backend_entry_v2 instead of rvl_backend_entry
 *   3 INIT_FAILS    initialize() returns an error
 *   4 NO_DEVICES    probe() and device_count() report 0 devices
 *   5 KERNEL_FAILS  buffers work (malloc), but execute_program returns an error
 *   6 SMALL_TABLE   struct_size is smaller than the members the host needs
 *   7 V1_0          not broken: a plugin built as if against ABI 1.0 (table size and minor of
 *                   1.0; fills only the 1.0 members of the structs the host hands it)
 * Plain C99, no dependencies beyond libc and the SDK header. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ravel/backend.h"

#define BAD_MAJOR 1
#define NO_ENTRY 2
#define INIT_FAILS 3
#define NO_DEVICES 4
#define KERNEL_FAILS 5
#define SMALL_TABLE 6
#define V1_0 7

#ifndef BROKEN_CASE
#error "BROKEN_CASE must be defined"
#endif
#ifndef BROKEN_NAME
#error "BROKEN_NAME must be defined"
#endif

/* ---- errors ------------------------------------------------------------------------------- */
struct rvl_error {
  rvl_status code;
  char message[256];
};

static rvl_error* make_error(rvl_status code, const char* message) {
  rvl_error* e = (rvl_error*)malloc(sizeof(rvl_error));
  if (!e) return NULL; /* cannot report; the host sees success, which is the best we can do */
  e->code = code;
  strncpy(e->message, message, sizeof(e->message) - 1);
  e->message[sizeof(e->message) - 1] = '\0';
  return e;
}
static rvl_status error_code(const rvl_error* e) { return e->code; }
static const char* error_message(const rvl_error* e) { return e->message; }
static void error_destroy(rvl_error* e) { free(e); }

/* ---- lifecycle and info --------------------------------------------------------------------- */
static int32_t n_devices(void) { return BROKEN_CASE == NO_DEVICES ? 0 : 1; }

static rvl_error* probe(rvl_probe_result* out) {
  /* The host sets struct_size; a plugin checks it covers what it writes and writes no further. */
  if (out->struct_size < RVL_PROBE_RESULT_STRUCT_SIZE_1_0)
    return make_error(RVL_STATUS_INVALID_ARGUMENT, "probe result struct_size too small");
  out->device_count = n_devices();
  out->score = 1;
  return NULL;
}
static rvl_error* initialize(void) {
  if (BROKEN_CASE == INIT_FAILS) return make_error(RVL_STATUS_DEVICE_ERROR, "broken plugin: initialize failed on purpose");
  return NULL;
}
static void shutdown(void) {}
static rvl_error* get_info(rvl_backend_info* out) {
  out->name = BROKEN_NAME;
  out->version = "0.0-broken";
  out->description = "a deliberately broken plugin for the runtime tests";
  return NULL;
}
static rvl_error* device_count(int32_t* out) {
  *out = n_devices();
  return NULL;
}
static rvl_error* device_properties(int32_t device, rvl_device_properties* out) {
  if (device < 0 || device >= n_devices()) return make_error(RVL_STATUS_INVALID_ARGUMENT, "no such device");
  if (out->struct_size < RVL_DEVICE_PROPERTIES_STRUCT_SIZE_1_0)
    return make_error(RVL_STATUS_INVALID_ARGUMENT, "device properties struct_size too small");
  memset(out->name, 0, sizeof(out->name));
  snprintf(out->name, sizeof(out->name), "%s test device", BROKEN_NAME);
  out->kind = RVL_DEVICE_CPU;
  out->memory_bytes = 1u << 30;
  out->compute_units = 1;
  out->dtypes = RVL_DTYPES_1_0;
  out->max_rank = RVL_MAX_RANK;
#if BROKEN_CASE != V1_0
  if (RVL_HAS_MEMBER(out, rvl_device_properties, details)) {
    snprintf(out->arch, sizeof(out->arch), "test-arch");
    out->warp_size = 1;
    snprintf(out->details, sizeof(out->details), "case=%d", BROKEN_CASE);
  }
#endif
  return NULL;
}

/* ---- buffers: plain malloc, with a magic number to reject foreign pointers -------------------- */
#define BUFFER_MAGIC 0x5256424cu
struct rvl_buffer {
  uint32_t magic;
  uint64_t size;
  unsigned char* data;
};

static rvl_error* buffer_allocate(int32_t device, uint64_t bytes, rvl_buffer** out) {
  if (device < 0 || device >= n_devices()) return make_error(RVL_STATUS_INVALID_ARGUMENT, "no such device");
  rvl_buffer* b = (rvl_buffer*)malloc(sizeof(rvl_buffer));
  if (!b) return make_error(RVL_STATUS_OUT_OF_MEMORY, "out of memory");
  b->data = (unsigned char*)calloc(bytes ? bytes : 1, 1);
  if (!b->data) {
    free(b);
    return make_error(RVL_STATUS_OUT_OF_MEMORY, "out of memory");
  }
  b->magic = BUFFER_MAGIC;
  b->size = bytes;
  *out = b;
  return NULL;
}
static int live(const rvl_buffer* b) { return b && b->magic == BUFFER_MAGIC; }
static rvl_error* buffer_free(rvl_buffer* b) {
  if (!live(b)) return make_error(RVL_STATUS_INVALID_ARGUMENT, "not a live buffer");
  b->magic = 0;
  free(b->data);
  free(b);
  return NULL;
}
static rvl_error* buffer_size(const rvl_buffer* b, uint64_t* out) {
  if (!live(b)) return make_error(RVL_STATUS_INVALID_ARGUMENT, "not a live buffer");
  *out = b->size;
  return NULL;
}
static int in_range(const rvl_buffer* b, uint64_t off, uint64_t bytes) {
  return live(b) && off <= b->size && bytes <= b->size - off;
}
static rvl_error* buffer_write(rvl_stream* s, rvl_buffer* dst, uint64_t off, const void* src, uint64_t bytes) {
  (void)s;
  if (!in_range(dst, off, bytes)) return make_error(RVL_STATUS_INVALID_ARGUMENT, "write out of range");
  if (bytes) memcpy(dst->data + off, src, bytes);
  return NULL;
}
static rvl_error* buffer_read(rvl_stream* s, const rvl_buffer* src, uint64_t off, void* dst, uint64_t bytes) {
  (void)s;
  if (!in_range(src, off, bytes)) return make_error(RVL_STATUS_INVALID_ARGUMENT, "read out of range");
  if (bytes) memcpy(dst, src->data + off, bytes);
  return NULL;
}
static rvl_error* buffer_copy(rvl_stream* s, const rvl_buffer* src, uint64_t so, rvl_buffer* dst, uint64_t d0,
                              uint64_t bytes) {
  (void)s;
  if (!in_range(src, so, bytes) || !in_range(dst, d0, bytes))
    return make_error(RVL_STATUS_INVALID_ARGUMENT, "copy out of range");
  if (bytes) memmove(dst->data + d0, src->data + so, bytes);
  return NULL;
}

/* ---- streams and events: everything is synchronous, so these are tokens ------------------------ */
struct rvl_stream {
  int unused;
};
struct rvl_event {
  int unused;
};
static rvl_error* stream_create(int32_t device, rvl_stream** out) {
  (void)device;
  *out = (rvl_stream*)malloc(sizeof(rvl_stream));
  return *out ? NULL : make_error(RVL_STATUS_OUT_OF_MEMORY, "out of memory");
}
static rvl_error* stream_destroy(rvl_stream* s) {
  free(s);
  return NULL;
}
static rvl_error* stream_synchronize(rvl_stream* s) {
  (void)s;
  return NULL;
}
static rvl_error* event_record(rvl_stream* s, rvl_event** out) {
  (void)s;
  *out = (rvl_event*)malloc(sizeof(rvl_event));
  return *out ? NULL : make_error(RVL_STATUS_OUT_OF_MEMORY, "out of memory");
}
static rvl_error* event_wait(rvl_stream* s, rvl_event* e) {
  (void)s;
  (void)e;
  return NULL;
}
static rvl_error* event_synchronize(rvl_event* e) {
  (void)e;
  return NULL;
}
static rvl_error* event_destroy(rvl_event* e) {
  free(e);
  return NULL;
}

/* ---- kernels: always fail ---------------------------------------------------------------------- */
static rvl_error* execute_program(int32_t device, rvl_stream* s, const rvl_program* p) {
  (void)device;
  (void)s;
  (void)p;
  return make_error(RVL_STATUS_DEVICE_ERROR, "broken plugin: kernel exploded on purpose");
}
static rvl_error* synchronize(int32_t device) {
  (void)device;
  return NULL;
}

static const rvl_backend_api kApi = {
#if BROKEN_CASE == SMALL_TABLE
    /* Claims to end right after abi_minor: no error or lifecycle members at all. */
    offsetof(rvl_backend_api, error_code),
#elif BROKEN_CASE == V1_0
    RVL_BACKEND_API_STRUCT_SIZE_1_0,
#else
    sizeof(rvl_backend_api),
#endif
#if BROKEN_CASE == BAD_MAJOR
    RVL_ABI_MAJOR + 1,
#else
    RVL_ABI_MAJOR,
#endif
#if BROKEN_CASE == V1_0
    0,
#else
    RVL_ABI_MINOR,
#endif
    error_code,
    error_message,
    error_destroy,
    probe,
    initialize,
    shutdown,
    get_info,
    device_count,
    device_properties,
    buffer_allocate,
    buffer_free,
    buffer_size,
    buffer_write,
    buffer_read,
    buffer_copy,
    stream_create,
    stream_destroy,
    stream_synchronize,
    event_record,
    event_wait,
    event_synchronize,
    event_destroy,
    execute_program,
    NULL, /* execute_contraction (optional) */
    synchronize,
    NULL, /* buffer_address (optional, ABI 1.2) */
    NULL, /* buffer_wrap (optional, ABI 1.2) */
    NULL, /* buffer_copy_peer (optional, ABI 1.5) */
};

#if BROKEN_CASE == NO_ENTRY
RVL_EXPORT const rvl_backend_api* rvl_backend_entry_v2(void) { return &kApi; }
#else
RVL_EXPORT const rvl_backend_api* rvl_backend_entry(void) { return &kApi; }
#endif
