/* Ravel backend C ABI, version 1.
 *
 * Plain C99. A backend plugin is a shared object that exports exactly one symbol,
 * `rvl_backend_entry`, returning a pointer to a static, append-only table of function pointers
 * (rvl_backend_api). Everything a device backend does goes through that table.
 *
 * Rules (see docs/abi.md for the full guide):
 *  - Versioning: every struct begins with `struct_size` (set by whoever fills it in). The host
 *    accepts a table whose `abi_major` equals RVL_ABI_MAJOR; `abi_minor` may be older. Members are
 *    only appended; a member that lies beyond the table's struct_size, or is NULL, is
 *    "not supported" and the host never calls it. Members marked (optional) may be NULL.
 *  - Errors: every fallible call returns `rvl_error*`; NULL means success. A non-NULL error is
 *    owned by the plugin that made it: the host reads it with error_code/error_message and hands
 *    it back with error_destroy. No C++ exception ever crosses this boundary.
 *  - Ownership: whoever allocates frees. Buffers, streams and events are created and destroyed by
 *    the plugin; the host never frees plugin memory with its own allocator and vice versa.
 *  - Frozen layouts: rvl_view, rvl_operand and rvl_instruction are embedded by value in arrays
 *    and in other structs, so their layout is frozen for the whole of major version 1; a minor
 *    version extends kernels only through new members appended to rvl_program/rvl_contraction.
 *  - Aliasing: a program's output may alias an input only through the identical view (an
 *    in-place update); any other overlap gives unspecified (but memory-safe) results. A
 *    contraction's C must not overlap A or B.
 *  - Validation: the plugin validates every kernel before running it (live buffers, views inside
 *    their buffers, op codes, dtypes, ranks, SSA order). A malformed kernel returns
 *    RVL_STATUS_INVALID_ARGUMENT; it never crashes or touches memory outside a buffer.
 *  - Threading: all members may be called from any host thread, but the host serialises calls
 *    that use the same stream. Launches may be asynchronous with respect to the host; ordering
 *    is guaranteed within a stream. A NULL stream means the device's default stream.
 */
#ifndef RAVEL_BACKEND_H
#define RAVEL_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RVL_ABI_MAJOR 1
#define RVL_ABI_MINOR 0

/* The name of the single exported symbol, for dlsym-style lookup. */
#define RVL_BACKEND_ENTRY_SYMBOL "rvl_backend_entry"

/* Largest rank of any kernel iteration space or view. */
#define RVL_MAX_RANK 8
/* Largest number of input views of one program. */
#define RVL_MAX_INPUTS 32
/* Largest number of instructions of one program. */
#define RVL_MAX_INSTRUCTIONS 4096

/* ---- status ---------------------------------------------------------------------------- */
typedef enum rvl_status {
  RVL_STATUS_OK = 0,
  RVL_STATUS_INVALID_ARGUMENT = 1, /* malformed kernel, bad pointer, bad index, ... */
  RVL_STATUS_OUT_OF_MEMORY = 2,
  RVL_STATUS_UNSUPPORTED = 3,      /* well-formed but not implemented by this backend */
  RVL_STATUS_DEVICE_ERROR = 4,     /* the device or its driver failed */
  RVL_STATUS_INTERNAL = 5          /* a bug in the plugin */
} rvl_status;

typedef struct rvl_error rvl_error;   /* opaque, plugin-owned */
typedef struct rvl_buffer rvl_buffer; /* opaque, plugin-owned device memory */
typedef struct rvl_stream rvl_stream; /* opaque, plugin-owned ordered queue */
typedef struct rvl_event rvl_event;   /* opaque, plugin-owned marker in a stream */

/* ---- dtypes ---------------------------------------------------------------------------- */
/* Element types. `bool` is one byte holding 0 or 1. Values are stable across minor versions. */
typedef enum rvl_dtype {
  RVL_DTYPE_BOOL = 0,
  RVL_DTYPE_U8 = 1,
  RVL_DTYPE_I32 = 2,
  RVL_DTYPE_I64 = 3,
  RVL_DTYPE_F32 = 4,
  RVL_DTYPE_F64 = 5,
  RVL_DTYPE_COUNT_ = 6
} rvl_dtype;

/* ---- instructions ---------------------------------------------------------------------- */
/* X(name, arity). The one list of kernel instructions; enum values follow list order and are
 * stable (new ops are only appended). Semantics, per docs/abi.md:
 *  LOAD    dst = input[arg].view[idx], or 0 outside the view's validity range
 *  CONST   dst = the constant in `value`, of the instruction's dtype (value.i is converted to
 *          U8/I32/BOOL like a CAST from I64; value.f to F32 like a CAST from F64)
 *  ACC     (contraction epilogues only) dst = the contraction's accumulated value
 *  CAST    dst = (dtype) src0; float->int truncates toward zero and saturates at the target's
 *          range (NaN -> 0); int->int wraps (two's complement); ->bool is (x != 0)
 *  NEG RECIP SQRT EXP2 LOG2 SIN TRUNC   float math (NEG and TRUNC for every dtype)
 *  ADD MUL MAX                           every dtype; ints wrap on overflow; bool: or/and/or
 *  MOD IDIV   ints: C semantics (truncating), x/0 == 0 and x%0 == 0; floats: fmod, trunc(a/b)
 *  CMPLT CMPNE                           result bool
 *  AND OR XOR                            bool and integer dtypes only
 *  WHERE   dst = src0 ? src1 : src2 (src0 is bool)
 */
#define RVL_OP_LIST(X) \
  X(LOAD, 0)           \
  X(CONST, 0)          \
  X(ACC, 0)            \
  X(CAST, 1)           \
  X(NEG, 1)            \
  X(RECIP, 1)          \
  X(SQRT, 1)           \
  X(EXP2, 1)           \
  X(LOG2, 1)           \
  X(SIN, 1)            \
  X(TRUNC, 1)          \
  X(ADD, 2)            \
  X(MUL, 2)            \
  X(MAX, 2)            \
  X(MOD, 2)            \
  X(IDIV, 2)           \
  X(CMPLT, 2)          \
  X(CMPNE, 2)          \
  X(AND, 2)            \
  X(OR, 2)             \
  X(XOR, 2)            \
  X(WHERE, 3)

typedef enum rvl_op {
#define RVL_OP_ENUM_(name, arity) RVL_OP_##name,
  RVL_OP_LIST(RVL_OP_ENUM_)
#undef RVL_OP_ENUM_
  RVL_OP_COUNT_
} rvl_op;

typedef enum rvl_reduce_op {
  RVL_REDUCE_NONE = 0,
  RVL_REDUCE_SUM = 1,  /* bool: logical or */
  RVL_REDUCE_MAX = 2,  /* NaN propagates */
  RVL_REDUCE_PROD = 3  /* bool: logical and */
} rvl_reduce_op;

/* A scalar constant; read the member that matches the instruction's dtype class. */
typedef union rvl_scalar {
  double f;  /* F32, F64 */
  int64_t i; /* BOOL, U8, I32, I64 */
} rvl_scalar;

/* One SSA instruction. Instruction j may only name instructions < j as sources. */
typedef struct rvl_instruction {
  int32_t op;     /* rvl_op */
  int32_t dtype;  /* rvl_dtype of the result */
  int32_t src[3]; /* sources (instruction indices); unused entries are -1 */
  int32_t arg;    /* LOAD: input index; otherwise 0 */
  rvl_scalar value; /* CONST only */
} rvl_instruction;

/* ---- views ----------------------------------------------------------------------------- */
/* A strided view of a buffer, indexed by the kernel's iteration index i[0..rank).
 *   element address = offset + sum_d i[d] * strides[d]     (in elements, not bytes)
 * and the element is *valid* iff valid_lo[d] <= i[d] < valid_hi[d] for every d; an invalid
 * element reads as 0 and is never addressed (this is how padding costs no copy). Strides may be
 * 0 (broadcast) or negative (flip). Every valid address must lie inside the buffer. */
typedef struct rvl_view {
  size_t struct_size;
  int64_t offset;
  int64_t strides[RVL_MAX_RANK];
  int64_t valid_lo[RVL_MAX_RANK];
  int64_t valid_hi[RVL_MAX_RANK];
} rvl_view;

typedef struct rvl_operand {
  size_t struct_size;
  rvl_buffer* buffer;
  int32_t dtype; /* rvl_dtype of the buffer's elements as read through this view */
  rvl_view view;
} rvl_operand;

/* ---- kernel programs --------------------------------------------------------------------- */
/* For every index i of the iteration space `shape`, evaluate the instruction list; the value of
 * instruction `n_instructions - 1` is the result. Without a reduction it is stored at
 * output.view[i]. With one, the results of all i that differ only on the reduced axes are
 * combined with `reduce_op` (starting from its identity) and stored once; the output view must
 * have stride 0 and full validity on the reduced axes. Outputs have no validity mask (valid_lo
 * must be 0 and valid_hi the extent) and distinct stored indices may not alias. */
typedef struct rvl_program {
  size_t struct_size;
  int32_t rank;
  int64_t shape[RVL_MAX_RANK];
  int32_t n_inputs;
  const rvl_operand* inputs;
  int32_t n_instructions;
  const rvl_instruction* instructions;
  int32_t reduce_op;        /* rvl_reduce_op */
  uint32_t reduce_axes;     /* bit d set: axis d is reduced */
  rvl_operand output;
} rvl_program;

/* ---- contractions -------------------------------------------------------------------------- */
/* Batched strided GEMM: for every batch index b (shape batch_shape, rank batch_rank) and
 *   C[b, m, n] = epilogue( sum_k A[b, m, k] * B[b, k, n] )
 * Operand views have rank batch_rank + 2, ordered [batch..., row, col]: A is [.., M, K],
 * B is [.., K, N], C is [.., M, N]. Batch strides may be 0 (batch broadcasting). A, B and C share
 * `dtype`; accumulation happens in that dtype (bool: or of ands). Operand views of A and B must
 * have full validity. The optional epilogue is a program over the iteration space
 * [batch..., M, N] whose ACC instruction yields the accumulated value; its LOADs refer to
 * `epilogue_inputs`. Without an epilogue (n_epilogue == 0) C receives the accumulator. k == 0
 * is valid: the accumulator is then 0 (false for bool). */
typedef struct rvl_contraction {
  size_t struct_size;
  int32_t dtype;
  int32_t batch_rank; /* 0 .. RVL_MAX_RANK - 2 */
  int64_t batch_shape[RVL_MAX_RANK];
  int64_t m, n, k;
  rvl_operand a, b, c;
  int32_t n_epilogue_inputs;
  const rvl_operand* epilogue_inputs;
  int32_t n_epilogue;
  const rvl_instruction* epilogue;
} rvl_contraction;

/* ---- info ---------------------------------------------------------------------------------- */
typedef struct rvl_backend_info {
  size_t struct_size;
  const char* name;    /* short, unique, lower case: "tbb_cpu", "hip", "level_zero" */
  const char* version; /* the plugin's own version string */
  const char* description;
} rvl_backend_info;

typedef enum rvl_device_kind {
  RVL_DEVICE_CPU = 0,
  RVL_DEVICE_GPU = 1,
  RVL_DEVICE_OTHER = 2
} rvl_device_kind;

typedef struct rvl_device_properties {
  size_t struct_size;
  char name[128];
  int32_t kind;             /* rvl_device_kind */
  uint64_t memory_bytes;    /* total memory usable for buffers */
  int32_t compute_units;    /* cores, SMs, CUs, EUs */
  uint32_t dtypes;          /* bit (1u << rvl_dtype) set: supported */
  int32_t max_rank;         /* <= RVL_MAX_RANK */
} rvl_device_properties;

typedef struct rvl_probe_result {
  size_t struct_size;
  int32_t device_count; /* 0 means "cannot run here", which is not an error */
  int32_t score;        /* preference among backends; higher is better */
} rvl_probe_result;

/* ---- the function table ------------------------------------------------------------------ */
typedef struct rvl_backend_api {
  size_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;

  /* Errors. */
  rvl_status (*error_code)(const rvl_error* error);
  const char* (*error_message)(const rvl_error* error); /* valid until error_destroy */
  void (*error_destroy)(rvl_error* error);

  /* Cheap and side-effect free: may be called before initialize; touches no device state and
   * runs no ISA-specific code. */
  rvl_error* (*probe)(rvl_probe_result* out);
  /* Brings the backend up. get_info, device_count and device_properties may be called before
   * it; buffers, streams, events and kernels need it. */
  rvl_error* (*initialize)(void);
  /* Joins every thread the plugin started and releases every resource; called before unload.
   * Buffers, streams and events still alive are freed. */
  void (*shutdown)(void);
  rvl_error* (*get_info)(rvl_backend_info* out);

  /* Devices. */
  rvl_error* (*device_count)(int32_t* out);
  rvl_error* (*device_properties)(int32_t device, rvl_device_properties* out);

  /* Buffers. Offsets and sizes in bytes. Freeing a buffer that is not live (twice, or a pointer
   * this plugin never returned) is an RVL_STATUS_INVALID_ARGUMENT error. */
  rvl_error* (*buffer_allocate)(int32_t device, uint64_t bytes, rvl_buffer** out);
  rvl_error* (*buffer_free)(rvl_buffer* buffer);
  rvl_error* (*buffer_size)(const rvl_buffer* buffer, uint64_t* out);
  rvl_error* (*buffer_write)(rvl_stream* stream, rvl_buffer* dst, uint64_t dst_offset,
                             const void* src, uint64_t bytes);
  rvl_error* (*buffer_read)(rvl_stream* stream, const rvl_buffer* src, uint64_t src_offset,
                            void* dst, uint64_t bytes);
  rvl_error* (*buffer_copy)(rvl_stream* stream, const rvl_buffer* src, uint64_t src_offset,
                            rvl_buffer* dst, uint64_t dst_offset, uint64_t bytes);

  /* Streams and events. A NULL stream is the default stream of the device the buffers or the
   * kernel belong to. buffer_read completes before it returns. */
  rvl_error* (*stream_create)(int32_t device, rvl_stream** out);
  rvl_error* (*stream_destroy)(rvl_stream* stream);
  rvl_error* (*stream_synchronize)(rvl_stream* stream);
  rvl_error* (*event_record)(rvl_stream* stream, rvl_event** out);
  rvl_error* (*event_wait)(rvl_stream* stream, rvl_event* event); /* stream waits for event */
  rvl_error* (*event_synchronize)(rvl_event* event);              /* host waits for event */
  rvl_error* (*event_destroy)(rvl_event* event);

  /* Kernels. Validated before anything runs; may complete asynchronously on `stream`. */
  rvl_error* (*execute_program)(int32_t device, rvl_stream* stream, const rvl_program* program);
  rvl_error* (*execute_contraction)(int32_t device, rvl_stream* stream,
                                    const rvl_contraction* contraction); /* (optional) */
  rvl_error* (*synchronize)(int32_t device); /* host waits for all work on the device */
} rvl_backend_api;

/* The exported entry point. Returns a pointer to a static table; never NULL. Must be cheap and
 * must not initialise anything. */
typedef const rvl_backend_api* (*rvl_backend_entry_fn)(void);

#if defined(_WIN32)
#define RVL_EXPORT __declspec(dllexport)
#else
#define RVL_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* RAVEL_BACKEND_H */
