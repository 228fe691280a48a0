/* Ravel backend C ABI, version 1.12 (1.1 added rvl_device_properties.arch/warp_size/details and
 * rvl_probe_result.reason; 1.2 the optional members buffer_address/buffer_wrap; 1.3
 * rvl_device_properties.dlpack_device_type/dlpack_device_id; 1.4 the reduction
 * RVL_REDUCE_LOGSUMEXP and rvl_device_properties.reduce_ops; 1.5 the optional member
 * buffer_copy_peer, copies between two devices of one plugin; 1.6 rvl_device_properties.ops,
 * the instructions a device implements; 1.7 the dtypes F16, BF16, I8, I16, U16, U32, U64, which a
 * device runs only if its rvl_device_properties.dtypes says so; 1.8 the multi-axis members of
 * rvl_contraction and rvl_device_properties.contraction_axes; 1.9 the optional member all_reduce,
 * a collective over buffers on several devices of one plugin; 1.10 the row epilogue of a
 * reduction, rvl_program.n_epilogue/epilogue/acc_dtype and rvl_device_properties.reduce_epilogue_ops;
 * 1.11 chains of row reductions, rvl_reduce_stage, rvl_program.n_stages/stages and
 * rvl_device_properties.reduce_chain_ops; 1.12 the optional members reduce_scatter and all_gather,
 * the other two collectives of NCCL over devices of one plugin; nothing else changed).
 *
 * Plain C99. A backend plugin is a shared object that exports exactly one symbol,
 * `rvl_backend_entry`, returning a pointer to a static, append-only table of function pointers
 * (rvl_backend_api). Everything a device backend does goes through that table.
 *
 * Rules (see docs/abi.md for the full guide):
 *  - Versioning: every struct begins with `struct_size` (set by whoever fills it in). The host
 *    accepts a table whose `abi_major` equals RVL_ABI_MAJOR; `abi_minor` may be older. Members are
 *    only appended; a member that lies beyond the table's struct_size, or is NULL, is
 *    "not supported" and the host never calls it. Members marked (optional) may be NULL; RVL_REQUIRED_MEMBERS lists the
 *    others.
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
#define RVL_ABI_MINOR 12

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
/* Element types. `bool` is one byte holding 0 or 1. Values are stable across minor versions:
 * dtypes are only appended. F16 is IEEE binary16, BF16 bfloat16 (the top half of an f32); both
 * convert with <ravel/half.hpp> (round to nearest even, NaN and infinity kept). A device runs a
 * dtype only if its bit is set in rvl_device_properties.dtypes: a plugin built against 1.0-1.6
 * never sets the 1.7 bits, and the host then refuses kernels in those dtypes before anything
 * runs, with an error naming the op, the dtype and the device. */
typedef enum rvl_dtype {
  RVL_DTYPE_BOOL = 0,
  RVL_DTYPE_U8 = 1,
  RVL_DTYPE_I32 = 2,
  RVL_DTYPE_I64 = 3,
  RVL_DTYPE_F32 = 4,
  RVL_DTYPE_F64 = 5,
  /* since 1.7 */
  RVL_DTYPE_F16 = 6,
  RVL_DTYPE_BF16 = 7,
  RVL_DTYPE_I8 = 8,
  RVL_DTYPE_I16 = 9,
  RVL_DTYPE_U16 = 10,
  RVL_DTYPE_U32 = 11,
  RVL_DTYPE_U64 = 12,
  RVL_DTYPE_COUNT_ = 13
} rvl_dtype;
/* The dtypes of the 1.0-1.6 ABI (BOOL .. F64), and every dtype of this header, as masks for
 * rvl_device_properties.dtypes. */
#define RVL_DTYPES_1_0 0x3Fu
#define RVL_DTYPES_ALL ((1u << RVL_DTYPE_COUNT_) - 1u)

/* ---- instructions ---------------------------------------------------------------------- */
/* THE op table: one row per kernel instruction, the single source of every op's ABI semantics.
 * The validator, the reference interpreter, the conformance harness, every plugin's dispatch and
 * the tests derive what they need from it (in C++ through <ravel/op_table.hpp>). Enum values
 * follow row order and are stable: rows are only appended, and only with a minor version.
 *
 * X(NAME, arity, ACCEPTS, RESULT, ACCURACY)
 *  ACCEPTS  the dtypes the sources may have (all sources share one dtype unless said otherwise):
 *           NONE (no sources), ANY, NONBOOL (not bool), FLOAT (f16, bf16, f32, f64), INTBOOL (bool and the
 *           integer dtypes), SELECT (source 0 is bool; sources 1 and 2 any, equal to the result)
 *  RESULT   the instruction's own dtype: SAME (the sources'), BOOL, FREE (any; see LOAD, CONST,
 *           ACC and CAST below)
 *  ACCURACY what conformance demands of float results: EXACT (bit-exact up to the reordering of
 *           exact operations), ROUNDING (a few ulps: division and square root, which some device
 *           compilers do not round correctly by default), TRANSCENDENTAL (library accuracy)
 *
 * Semantics (docs/abi.md sections 5-7 say more):
 *  LOAD    dst = input[arg].view[idx], or 0 outside the view's validity range; dtype = the input's
 *  CONST   dst = the constant in `value`, of the instruction's dtype (value.i is converted to
 *          the integer dtypes and BOOL like a CAST from I64, and holds a U64's bits; value.f to F32,
 *          F16, BF16 like a CAST from F64)
 *  ACC     (contraction epilogues and, since 1.10, reduction epilogues only) dst = the
 *          contraction's accumulated value / the reduced value of the current row. Since 1.11,
 *          in a program with reduction stages (n_stages > 0), `arg` picks the value: 0 the
 *          program's own reduction, k >= 1 the result of stages[k - 1]; stages and the
 *          program's own instruction list may then read earlier stages too (§19). Without
 *          stages `arg` is ignored, as in 1.10.
 *  CAST    dst = (dtype) src0; float->int truncates toward zero and saturates at the target's
 *          range (NaN -> 0); int->int wraps (two's complement); ->bool is (x != 0); to F16/BF16
 *          rounds to nearest even in one step (<ravel/half.hpp>), overflowing to infinity.
 *          Half dtypes compute every other op in f32 (or wider) and round the result once.
 *  NEG TRUNC                             every dtype but bool (NEG) / every dtype (TRUNC)
 *  RECIP SQRT EXP2 LOG2 SIN              float math
 *  ADD MUL MAX                           every dtype; ints wrap on overflow; bool: or/and/or;
 *                                        float MAX propagates NaN
 *  MOD IDIV   ints: C semantics (truncating), x/0 == 0 and x%0 == 0, MIN/-1 == MIN, MIN%-1 == 0;
 *             floats: fmod, trunc(a/b)
 *  CMPLT CMPNE                           result bool
 *  AND OR XOR                            bool and integer dtypes only
 *  WHERE   dst = src0 ? src1 : src2 (src0 is bool)
 */
#define RVL_OP_LIST(X)                            \
  X(LOAD, 0, NONE, FREE, EXACT)                   \
  X(CONST, 0, NONE, FREE, EXACT)                  \
  X(ACC, 0, NONE, FREE, EXACT)                    \
  X(CAST, 1, ANY, FREE, EXACT)                    \
  X(NEG, 1, NONBOOL, SAME, EXACT)                 \
  X(RECIP, 1, FLOAT, SAME, ROUNDING)              \
  X(SQRT, 1, FLOAT, SAME, ROUNDING)               \
  X(EXP2, 1, FLOAT, SAME, TRANSCENDENTAL)         \
  X(LOG2, 1, FLOAT, SAME, TRANSCENDENTAL)         \
  X(SIN, 1, FLOAT, SAME, TRANSCENDENTAL)          \
  X(TRUNC, 1, ANY, SAME, EXACT)                   \
  X(ADD, 2, ANY, SAME, EXACT)                     \
  X(MUL, 2, ANY, SAME, EXACT)                     \
  X(MAX, 2, ANY, SAME, EXACT)                     \
  X(MOD, 2, NONBOOL, SAME, EXACT)                 \
  X(IDIV, 2, NONBOOL, SAME, EXACT)                \
  X(CMPLT, 2, ANY, BOOL, EXACT)                   \
  X(CMPNE, 2, ANY, BOOL, EXACT)                   \
  X(AND, 2, INTBOOL, SAME, EXACT)                 \
  X(OR, 2, INTBOOL, SAME, EXACT)                  \
  X(XOR, 2, INTBOOL, SAME, EXACT)                 \
  X(WHERE, 3, SELECT, SAME, EXACT)

typedef enum rvl_op {
#define RVL_OP_ENUM_(name, arity, accepts, result, accuracy) RVL_OP_##name,
  RVL_OP_LIST(RVL_OP_ENUM_)
#undef RVL_OP_ENUM_
  RVL_OP_COUNT_
} rvl_op;

/* Op masks (rvl_device_properties.ops, since 1.6): bit (1ull << rvl_op) stands for a row of
 * RVL_OP_LIST. How the mask grows: a row appended in minor version 1.N takes the next enum value
 * and so the next bit; RVL_OPS_1_0 stays the 1.0 table forever, and a plugin sets a bit only for
 * rows it knows and implements. So a plugin built against an older minor never claims a newer
 * op, and the host rewrites that op into ones the plugin has (docs/ops.md, "Decompositions").
 * 64 bits hold 64 rows; the minor version that appends row 65 appends a second mask word. */
#define RVL_OP_BIT(op) (1ull << (unsigned)(op))
/* The 22 rows of the 1.0 table (LOAD .. WHERE): what a device that does not state its ops has. */
#define RVL_OPS_1_0 ((1ull << (RVL_OP_WHERE + 1)) - 1ull)
/* Every row of the table this code is compiled against: what a plugin whose evaluators switch
 * exhaustively over rvl_op (so that a new row does not compile until it is implemented) states. */
#define RVL_OPS_ALL ((1ull << (unsigned)RVL_OP_COUNT_) - 1ull)
/* The rows no program can do without; the host reads their bits as set in every mask. */
#define RVL_OPS_REQUIRED (RVL_OP_BIT(RVL_OP_LOAD) | RVL_OP_BIT(RVL_OP_CONST) | RVL_OP_BIT(RVL_OP_ACC))

typedef enum rvl_reduce_op {
  RVL_REDUCE_NONE = 0,
  RVL_REDUCE_SUM = 1,  /* bool: logical or */
  RVL_REDUCE_MAX = 2,  /* NaN propagates */
  RVL_REDUCE_PROD = 3, /* bool: logical and */
  /* since 1.4, optional (a device implements it only when bit (1u << RVL_REDUCE_LOGSUMEXP) of
   * rvl_device_properties.reduce_ops is set; the host never sends it otherwise). F32 and F64
   * only. result = log(sum exp(x)), computed so that no exp overflows: keep a running maximum m
   * and s = sum exp(x - m), rescaling s by exp(m_old - m_new) when m grows; the result is
   * m + log(s). Any order of combination is allowed (partial (m, s) pairs combine the same
   * way). Special values, in this order: any NaN -> NaN; else any +inf -> +inf; else an empty
   * reduction, or one whose elements are all -inf, -> -inf (never the NaN of -inf - -inf);
   * -inf elements contribute nothing. Accuracy: that of an accumulation (docs/abi.md §13).
   * Widening: LOGSUMEXP alone may have F32 values (the last instruction) with an F64 output;
   * m and s are then kept in F32 and only m + log(s) is formed in F64 (m is exact, so x - result
   * keeps F32 accuracy where an F32 result would lose |x| 2^-24). */
  RVL_REDUCE_LOGSUMEXP = 4
} rvl_reduce_op;
/* The reductions every device implements (what a 1.0-1.3 device, which never writes
 * rvl_device_properties.reduce_ops, supports). */
#define RVL_REDUCE_OPS_BASIC ((1u << RVL_REDUCE_SUM) | (1u << RVL_REDUCE_MAX) | (1u << RVL_REDUCE_PROD))

/* A scalar constant; read the member that matches the instruction's dtype class. */
typedef union rvl_scalar {
  double f;  /* F16, BF16, F32, F64 */
  int64_t i; /* BOOL and the integer dtypes (a U64 stored as its two's complement bits) */
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
/* Since 1.11 (optional): one earlier reduction of a chain (rvl_program.stages, §19). Embedded
 * by value in an array, so its layout is frozen for the whole of major version 1, like
 * rvl_instruction's. acc_dtype: the stage's result dtype, i.e. its last instruction's dtype, or
 * F64 for a widening LOGSUMEXP of F32 values (as rvl_program.acc_dtype). */
typedef struct rvl_reduce_stage {
  size_t struct_size;
  int32_t reduce_op;      /* rvl_reduce_op, not NONE */
  int32_t acc_dtype;      /* rvl_dtype of the stage's value (ACC k = this stage's index + 1) */
  int32_t n_instructions; /* 1..RVL_MAX_INSTRUCTIONS; may read ACC of earlier stages */
  const rvl_instruction* instructions;
} rvl_reduce_stage;
/* The most stages one program may carry (since 1.11). */
#define RVL_MAX_REDUCE_STAGES 8

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
  /* ---- since 1.10 (optional, a "reduction with a row epilogue"; docs/abi.md §18) ----
   * With n_epilogue > 0 (only with a reduce_op, and only to a device whose
   * rvl_device_properties.reduce_epilogue_ops has bit (1u << reduce_op)): the reduced values
   * are not stored. Instead, for every index i of the iteration space, the `epilogue`
   * instruction list is evaluated (LOADs read the same `inputs`, ACC is the reduced value of
   * the output i belongs to, of dtype acc_dtype) and the value of its last instruction is
   * stored at output.view[i]: the output then has the full iteration space (no stride-0
   * requirement on the reduced axes; full validity and no aliasing as always). This is
   * softmax's e^(x - logsumexp(x)) or layer norm's (x - mean) * rstd in one kernel, which a
   * device may run one block of rows at a time, reading each row from memory once.
   * acc_dtype: the reduction's result dtype, i.e. the last instruction's dtype, or F64 for a
   * widening LOGSUMEXP of F32 values. n_epilogue == 0 (or a host built against <= 1.8, whose
   * struct_size ends before these members) is the plain reduction above. */
  int32_t n_epilogue;
  const rvl_instruction* epilogue;
  int32_t acc_dtype;        /* rvl_dtype of ACC in the epilogue */
  /* ---- since 1.11 (optional, a "chain of row reductions"; docs/abi.md §19) ----
   * With n_stages > 0 (only with a reduce_op, 1..RVL_MAX_REDUCE_STAGES, and only to a device
   * whose rvl_device_properties.reduce_chain_ops has the bit of every stage's reduce_op and of
   * this program's): before this program's own reduction, stages[0], stages[1], ... are reduced
   * in order over the same iteration space and reduce_axes, each giving one value per kept
   * index (as a reduction's output would hold it, of the stage's acc_dtype). ACC with arg k >= 1
   * reads stages[k - 1]'s value for the current index: in stages[s] only k <= s (earlier
   * stages), in `instructions` any 1 <= k <= n_stages, in the epilogue any 0 <= k <= n_stages
   * (0: this program's reduced value). The stages' values are stored nowhere; the output is
   * the epilogue's (full space) or, without one, this program's reduction (reduced form). Layer
   * norm is one program: stage 0 sums x, the reduction sums (x - ACC1/n)^2, the epilogue
   * writes (x - ACC1/n) * rsqrt(ACC0/n + eps) * g + b, so a device may read each block of rows
   * from memory once. n_stages == 0 (or a host built against <= 1.10) is the 1.10 program. */
  int32_t n_stages;
  const struct rvl_reduce_stage* stages;
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
  /* ---- since 1.8 (implicit im2col) ----
   * Several axes per M, K and N (docs/abi.md "Multi-axis contractions"). A group whose rank is
   * 0 is the 1.0 form: one axis, with the operand views' own stride. A group of rank r > 0
   * (1..RVL_MAX_RANK) replaces that axis: its extents (row-major, product equal to m, k or n)
   * and each operand's stride per extent. Row m of A is then at
   *   sum_i m_i * a_m_strides[i]  (m unravelled over m_shape),
   * column k of A / row k of B at sum_j k_j * a_k_strides[j] / b_k_strides[j], column n of B at
   * sum_j n_j * b_n_strides[j], each added to the view's offset and batch terms; the view's own
   * stride on a replaced axis must then be 0. C keeps the 1.0 form. So a convolution's window
   * (c, kh, kw taps of x at n, oh, ow) feeds the GEMM without an im2col copy. The host sends
   * ranks > 0 only to a device whose rvl_device_properties.contraction_axes allows them. */
  int32_t m_rank, k_rank, n_rank;
  int64_t m_shape[RVL_MAX_RANK], k_shape[RVL_MAX_RANK], n_shape[RVL_MAX_RANK];
  int64_t a_m_strides[RVL_MAX_RANK], a_k_strides[RVL_MAX_RANK];
  int64_t b_k_strides[RVL_MAX_RANK], b_n_strides[RVL_MAX_RANK];
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

/* Filled by the plugin; the host sets struct_size to what it allocated. A plugin writes only the
 * members that lie within the host's struct_size (a v1.0 host passes
 * RVL_DEVICE_PROPERTIES_STRUCT_SIZE_1_0 and never sees the 1.1 members). */
typedef struct rvl_device_properties {
  size_t struct_size;
  char name[128];
  int32_t kind;             /* rvl_device_kind */
  uint64_t memory_bytes;    /* total memory usable for buffers */
  int32_t compute_units;    /* cores, SMs, CUs, EUs */
  uint32_t dtypes;          /* bit (1u << rvl_dtype) set: supported */
  int32_t max_rank;         /* <= RVL_MAX_RANK */
  /* since 1.1 */
  char arch[64];            /* ISA or generation: "x86-64-v3", "sm_90", "gfx90a", "dg2"; "" if n/a */
  int32_t warp_size;        /* SIMD width kernels are scheduled in (warp, wavefront, subgroup);
                               1 for a scalar CPU, 0 if unknown */
  char details[256];        /* further properties as "key=value; key=value" (free form) */
  /* since 1.3: what buffer_address points into, in DLPack's terms, so the host can hand buffers
     to other libraries (docs/interop.md) without knowing any plugin by name */
  int32_t dlpack_device_type; /* a DLPack DLDeviceType value: 1 kDLCPU (host memory), 2 kDLCUDA,
                                 10 kDLROCM, 14 kDLOneAPI (USM), ...; 0: not stated, which the
                                 host reads as kDLCPU for an RVL_DEVICE_CPU device and as "cannot
                                 share" for any other kind (what a 1.0-1.2 plugin gets) */
  int32_t dlpack_device_id;   /* DLDevice.device_id of that memory (the CUDA/HIP ordinal, the
                                 oneAPI device index); 0 for host memory */
  /* since 1.4: the reductions the device implements, bit (1u << rvl_reduce_op) set. 0 means "not
     stated", which the host reads as RVL_REDUCE_OPS_BASIC (SUM, MAX, PROD): what every 1.0-1.3
     plugin gets, since the host zero-initialises the struct. A device that sets it must include
     the basic three; RVL_REDUCE_NONE's bit is ignored. */
  uint32_t reduce_ops;
  /* since 1.6: the instructions the device implements, bit RVL_OP_BIT(rvl_op) set for each row of
     RVL_OP_LIST it runs on every dtype the row accepts and the device has. 0 means "not stated",
     which the host reads as RVL_OPS_1_0: what every 1.0-1.5 plugin gets (the host
     zero-initialises the struct). RVL_OPS_REQUIRED bits are read as set; bits of rows the host
     does not know are ignored. The host never sends an instruction whose bit is clear: before
     anything runs it rewrites it into instructions the device has (the decompositions of
     <ravel/decompose.hpp>, e.g. MAX(a, b) = WHERE(CMPLT(a, b), b, a) with a NaN guard) or
     refuses the kernel with an error naming the op, its dtype and the device. A plugin still
     rejects (RVL_STATUS_UNSUPPORTED) an op it lacks if one arrives (an older host). */
  uint64_t ops;
  /* ---- since 1.8 (implicit im2col) ----
   * The largest group rank (m_rank, k_rank, n_rank of rvl_contraction) execute_contraction
   * accepts. 0 or 1: only the 1.0 form, what every older plugin gets (the host zero-initialises
   * the struct); the host then lowers a multi-axis contraction to the 1.0 form itself. */
  int32_t contraction_axes;
  /* ---- since 1.10 (row epilogues) ----
   * The reductions (bit (1u << rvl_reduce_op)) for which execute_program accepts an epilogue
   * (rvl_program.n_epilogue > 0). 0, what every older plugin gets (the host zero-initialises
   * the struct): none; the host then runs the reduction and the elementwise kernel that reads
   * its result as two kernels, as before. */
  uint32_t reduce_epilogue_ops;
  /* ---- since 1.11 (chains of row reductions, optional) ----
   * The reductions (bit (1u << rvl_reduce_op)) that execute_program accepts as stages and as
   * the final reduction of a program with n_stages > 0 (§19). 0, what every older plugin gets:
   * none; the host then sends each reduction of a chain as its own kernel, as before. */
  uint32_t reduce_chain_ops;
} rvl_device_properties;

typedef struct rvl_probe_result {
  size_t struct_size;
  int32_t device_count; /* 0 means "cannot run here", which is not an error */
  int32_t score;        /* preference among backends; higher is better */
  /* since 1.1 */
  char reason[256];     /* with device_count == 0: why, for the user ("no HIP runtime: ...") */
} rvl_probe_result;

/* ---- the function table ------------------------------------------------------------------ */
/* Each member says what it does, who owns what, whether it may block, and whether a plugin must
 * provide it: (required) members are listed in RVL_REQUIRED_MEMBERS below, which the core's
 * loader and the conformance runner both check; (optional, since 1.N) members may be NULL or lie
 * beyond the plugin's struct_size, and the host then never calls them. No member may throw,
 * abort or longjmp: failures are rvl_error objects. */
typedef struct rvl_backend_api {
  size_t struct_size; /* sizeof the table the plugin was built with */
  uint32_t abi_major; /* must equal the host's RVL_ABI_MAJOR */
  uint32_t abi_minor; /* the minor version the plugin was built against; may differ from the host's */

  /* ---- errors: an rvl_error is created by the plugin and handed to the host, which reads it
   * and gives it back exactly once with error_destroy. None of the three may fail or block. */
  /* (required) The status of `error`; RVL_STATUS_OK for NULL. */
  rvl_status (*error_code)(const rvl_error* error);
  /* (required) Its message, owned by the error; valid until error_destroy. "" for NULL. */
  const char* (*error_message)(const rvl_error* error);
  /* (required) Frees an error (NULL is a no-op). */
  void (*error_destroy)(rvl_error* error);

  /* ---- lifetime */
  /* (required) Cheap and side-effect free: may be called before initialize; touches no device
   * state and runs no ISA-specific code. The host fills out->struct_size. device_count == 0
   * (with a reason, since 1.1) means the plugin cannot run here: not an error. */
  rvl_error* (*probe)(rvl_probe_result* out);
  /* (required) Brings the backend up (may block: driver start-up). Called once, after probe
   * reported devices. get_info, device_count and device_properties may be called before it;
   * buffers, streams, events and kernels need it. */
  rvl_error* (*initialize)(void);
  /* (required) Joins every thread the plugin started and releases every resource; called once,
   * before unload. Buffers, streams and events still alive are freed. May block. */
  void (*shutdown)(void);
  /* (required) Static strings owned by the plugin, valid until unload. Never blocks. */
  rvl_error* (*get_info)(rvl_backend_info* out);

  /* ---- devices (device indices are 0 .. count-1; a bad index is INVALID_ARGUMENT) */
  /* (required) Number of devices; never blocks after initialize. */
  rvl_error* (*device_count)(int32_t* out);
  /* (required) Properties of one device; writes only what lies within out->struct_size. */
  rvl_error* (*device_properties)(int32_t device, rvl_device_properties* out);

  /* ---- buffers: device memory owned by the plugin; offsets and sizes in bytes. Freeing a
   * buffer that is not live (twice, or a pointer this plugin never returned) is an
   * INVALID_ARGUMENT error, never a crash. */
  /* (required) Allocates `bytes` (> 0) on `device`; contents undefined. OUT_OF_MEMORY when the
   * device is full (after the plugin emptied its own caches), naming requested and free bytes. */
  rvl_error* (*buffer_allocate)(int32_t device, uint64_t bytes, rvl_buffer** out);
  /* (required) Frees a buffer once all work queued on it has finished (it may wait for that). */
  rvl_error* (*buffer_free)(rvl_buffer* buffer);
  /* (required) The size given at allocation. Never blocks. */
  rvl_error* (*buffer_size)(const rvl_buffer* buffer, uint64_t* out);
  /* (required) Host -> device. `src` may be reused by the host as soon as the call returns (the
   * plugin copies or stages it), so this may block until the bytes are staged. */
  rvl_error* (*buffer_write)(rvl_stream* stream, rvl_buffer* dst, uint64_t dst_offset,
                             const void* src, uint64_t bytes);
  /* (required) Device -> host. Blocks until the bytes are in `dst`, after all work queued on
   * `stream` before it. */
  rvl_error* (*buffer_read)(rvl_stream* stream, const rvl_buffer* src, uint64_t src_offset,
                            void* dst, uint64_t bytes);
  /* (required) Device -> device within this plugin; queued on `stream`, may return before it
   * completes. Overlapping ranges of one buffer are INVALID_ARGUMENT. */
  rvl_error* (*buffer_copy)(rvl_stream* stream, const rvl_buffer* src, uint64_t src_offset,
                            rvl_buffer* dst, uint64_t dst_offset, uint64_t bytes);

  /* ---- streams and events. A NULL stream is the default stream of the device the buffers or
   * the kernel belong to. Streams and events are owned by the plugin; the host destroys what it
   * created. */
  /* (required) A new in-order queue on `device`. */
  rvl_error* (*stream_create)(int32_t device, rvl_stream** out);
  /* (required) Waits for the stream's work, then destroys it. Blocks. */
  rvl_error* (*stream_destroy)(rvl_stream* stream);
  /* (required) The host waits for all work queued on the stream. Blocks. */
  rvl_error* (*stream_synchronize)(rvl_stream* stream);
  /* (required) A new event marking everything queued on `stream` so far. Never blocks. */
  rvl_error* (*event_record)(rvl_stream* stream, rvl_event** out);
  /* (required) Work queued on `stream` after this call waits for `event`. Never blocks the host. */
  rvl_error* (*event_wait)(rvl_stream* stream, rvl_event* event);
  /* (required) The host waits for `event`. Blocks. */
  rvl_error* (*event_synchronize)(rvl_event* event);
  /* (required) Destroys an event (pending work it marks still completes). */
  rvl_error* (*event_destroy)(rvl_event* event);

  /* ---- kernels: validated before anything runs (a malformed kernel is INVALID_ARGUMENT and
   * touches nothing); may complete asynchronously on `stream`. The host keeps the program and
   * its arrays alive only for the duration of the call: a plugin that queues work copies what
   * it needs. */
  /* (required) Runs one kernel program (see rvl_program). */
  rvl_error* (*execute_program)(int32_t device, rvl_stream* stream, const rvl_program* program);
  /* (optional, since 1.0) Runs one contraction (see rvl_contraction). When NULL the core lowers
   * contractions to kernel programs instead. */
  rvl_error* (*execute_contraction)(int32_t device, rvl_stream* stream,
                                    const rvl_contraction* contraction);
  /* (required) The host waits for all work on the device, on every stream. Blocks. */
  rvl_error* (*synchronize)(int32_t device);

  /* ---- since 1.2: memory shared with other libraries (DLPack; docs/interop.md) */
  /* (optional, since 1.2) The address of the buffer's first byte in its device's address space:
   * host memory for an RVL_DEVICE_CPU device, a device pointer for a GPU. Valid until the buffer
   * is freed; the host synchronises the device before others read through it. Never blocks. */
  rvl_error* (*buffer_address)(const rvl_buffer* buffer, void** out);
  /* (optional, since 1.2) A buffer over `bytes` (> 0) bytes at `address`, memory the plugin did
   * not allocate (host memory for a CPU device, a device pointer for a GPU; aligned to at least
   * the largest dtype it will be read as). The plugin never frees that memory: when the buffer is
   * freed (buffer_free, or shutdown) it calls release(context) exactly once, from the freeing
   * thread; release must not call into the plugin. On error, release is not called. The host
   * never writes into a wrapped buffer (its memory may be read-only to it). */
  rvl_error* (*buffer_wrap)(int32_t device, void* address, uint64_t bytes, void (*release)(void* context),
                            void* context, rvl_buffer** out);

  /* ---- since 1.5: copies between devices of this plugin (docs/abi.md §16) */
  /* (optional, since 1.5) Copies `bytes` bytes from `src` at `src_offset` to `dst` at
   * `dst_offset`, where src and dst are live buffers of this plugin on any two of its devices
   * (the same device is allowed: then it is a buffer_copy). The device-to-device path of
   * hipMemcpyPeerAsync and of Level Zero copy lists: no staging through host memory.
   * `src_stream` must be NULL or a stream of src's device, `dst_stream` NULL or a stream of
   * dst's device (NULL: that device's default stream); another device's stream is
   * INVALID_ARGUMENT, as are ranges outside a buffer and overlapping ranges of one buffer.
   * bytes == 0 is valid and copies nothing.
   * Ordering, the whole contract (a two-sided barrier):
   *  - the copy reads src and writes dst only after all work queued before this call on
   *    src_stream and on dst_stream completed (the source's pending writes are visible);
   *  - work queued after this call on src_stream or on dst_stream starts only after the copy
   *    completed (so a later kernel may overwrite src, and a later read or kernel on dst's
   *    device sees the copied bytes, without any event or synchronize by the host);
   *  - work on other streams is not ordered with it (use events, as for any other work).
   * May return before the copy completes (it is queued on both streams). Errors found when the
   * call is made (bad handles, ranges, streams) are returned by it; a failure while copying is
   * returned by the next synchronising call on either device (buffer_read, stream_synchronize,
   * event_synchronize, synchronize). */
  rvl_error* (*buffer_copy_peer)(rvl_stream* src_stream, const rvl_buffer* src, uint64_t src_offset,
                                 rvl_stream* dst_stream, rvl_buffer* dst, uint64_t dst_offset,
                                 uint64_t bytes);

  /* ---- since 1.9: collectives across devices of this plugin (docs/abi.md §17) */
  /* (optional, since 1.9) All-reduce over n buffers on n distinct devices of this plugin, NCCL's
   * grouped ncclAllReduce in one call: for every element i < count and every k < n,
   *   outputs[k][i] = inputs[0][i] op inputs[1][i] op ... op inputs[n-1][i]
   * combined left to right in that order (so every output holds the same bytes, and a float sum
   * equals the fold a host would compute in that order; halves round after each step, as two
   * ADDs would). Elements are `dtype` (a dtype every device of the call runs), from byte 0 of each
   * buffer, which must hold count * size(dtype) bytes. `op` is an rvl_all_reduce_op: SUM, MAX,
   * PROD mean what the reductions mean (bool: or, or, and; ints wrap; MAX and MIN propagate NaN),
   * MIN is the minimum (bool: and). inputs[k] and outputs[k] are buffers of one device, and the n
   * devices are distinct; outputs[k] may be inputs[k] (in place), and no other output may be an
   * input or another output. `streams` is NULL (every device's default stream) or n entries,
   * each NULL or a stream of device k. n == 1 is a copy (or nothing, in place); count == 0 is
   * valid and touches nothing. NULL arrays or buffers, n < 1, a repeated device, a buffer of
   * another plugin or too small, a stream of another device, an unknown op or dtype are
   * INVALID_ARGUMENT; a dtype a device does not run is UNSUPPORTED.
   * Ordering: the peer copy's barrier (buffer_copy_peer), n-sided: the call reads and writes only
   * after all work queued before it on every streams[k] completed, and work queued after it on
   * any streams[k] starts only after it completed. May return before it completes; a failure
   * while it runs is returned by the next synchronising call on any of its devices. */
  rvl_error* (*all_reduce)(int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs,
                           rvl_buffer* const* outputs, uint64_t count, int32_t dtype, int32_t op);

  /* ---- since 1.12: the other collectives of NCCL (docs/abi.md §20) */
  /* (optional, since 1.12) Reduce-scatter over n buffers on n distinct devices of this plugin,
   * NCCL's grouped ncclReduceScatter in one call: every input holds n * count elements, seen as
   * n chunks of `count`, and output k receives the fold of chunk k: for every i < count, k < n,
   *   outputs[k][i] = inputs[0][k*count + i] op inputs[1][k*count + i] op ... op inputs[n-1][k*count + i]
   * combined left to right in that order, with all_reduce's meaning of `op` and `dtype` (halves
   * round after each step), so output k equals chunk k of all_reduce's result bit for bit.
   * Elements from byte 0 of each buffer: inputs[k] must hold n * count * size(dtype) bytes,
   * outputs[k] count * size(dtype); bytes beyond are untouched. inputs[k] and outputs[k] are
   * buffers of one device, the n devices distinct. No output may be an input or another output
   * (NCCL's in-place form puts the output at the rank's offset inside the input, which a buffer
   * handle from byte 0 cannot say): INVALID_ARGUMENT. `streams`, n == 1 (a copy of the input's
   * first count elements), count == 0, the errors and the ordering are all_reduce's. */
  rvl_error* (*reduce_scatter)(int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs,
                               rvl_buffer* const* outputs, uint64_t count, int32_t dtype, int32_t op);
  /* (optional, since 1.12) All-gather over n buffers on n distinct devices of this plugin, NCCL's
   * grouped ncclAllGather in one call: every input holds `count` elements, and every output
   * receives the n inputs one after another in device order: for every i < count, j < n, k < n,
   *   outputs[k][j*count + i] = inputs[j][i]
   * (a copy: every dtype, bit for bit, NaN payloads included). inputs[k] must hold
   * count * size(dtype) bytes, outputs[k] n * count * size(dtype); bytes beyond are untouched.
   * inputs[k] and outputs[k] are buffers of one device, the n devices distinct; no output may be
   * an input or another output (INVALID_ARGUMENT, as for reduce_scatter). `dtype` only sizes the
   * elements, but must still be a dtype every device runs (else UNSUPPORTED). `streams`,
   * n == 1 (a copy), count == 0, the other errors and the ordering are all_reduce's. */
  rvl_error* (*all_gather)(int32_t n, rvl_stream* const* streams, const rvl_buffer* const* inputs,
                           rvl_buffer* const* outputs, uint64_t count, int32_t dtype);
} rvl_backend_api;

/* The combining op of all_reduce (since 1.9). SUM, MAX and PROD have rvl_reduce_op's values. */
typedef enum rvl_all_reduce_op {
  RVL_ALL_REDUCE_SUM = 1,
  RVL_ALL_REDUCE_MAX = 2,
  RVL_ALL_REDUCE_PROD = 3,
  RVL_ALL_REDUCE_MIN = 4
} rvl_all_reduce_op;

/* The members every plugin must provide (non-NULL, within struct_size). The core's loader and
 * ravel-conformance both check exactly this list. */
#define RVL_REQUIRED_MEMBERS(X)                                                               \
  X(error_code) X(error_message) X(error_destroy) X(probe) X(initialize) X(shutdown)          \
  X(get_info) X(device_count) X(device_properties) X(buffer_allocate) X(buffer_free)          \
  X(buffer_size) X(buffer_write) X(buffer_read) X(buffer_copy) X(stream_create)               \
  X(stream_destroy) X(stream_synchronize) X(event_record) X(event_wait) X(event_synchronize)  \
  X(event_destroy) X(execute_program) X(synchronize)

/* ---- struct sizes per version (as PJRT's *_STRUCT_SIZE) ------------------------------------
 * The size a struct had in a given minor version: the offset of its last member of that version
 * plus that member's size. Whoever fills a struct sets struct_size to the size of the version it
 * was built against (usually sizeof); whoever reads one reads a member only if the member lies
 * within struct_size, so a plugin built against 1.1 works with a 1.0 host and the other way
 * round. RVL_HAS_MEMBER is the test. */
#define RVL_STRUCT_SIZE(type, last_member) \
  (offsetof(type, last_member) + sizeof(((type*)0)->last_member))
#define RVL_HAS_MEMBER(ptr, type, member) \
  ((ptr)->struct_size >= RVL_STRUCT_SIZE(type, member))

#define RVL_BACKEND_API_STRUCT_SIZE_1_0 RVL_STRUCT_SIZE(rvl_backend_api, synchronize)
#define RVL_BACKEND_API_STRUCT_SIZE_1_2 RVL_STRUCT_SIZE(rvl_backend_api, buffer_wrap)
#define RVL_BACKEND_API_STRUCT_SIZE_1_5 RVL_STRUCT_SIZE(rvl_backend_api, buffer_copy_peer)
#define RVL_BACKEND_API_STRUCT_SIZE_1_9 RVL_STRUCT_SIZE(rvl_backend_api, all_reduce)
#define RVL_BACKEND_API_STRUCT_SIZE_1_12 RVL_STRUCT_SIZE(rvl_backend_api, all_gather)
#define RVL_DEVICE_PROPERTIES_STRUCT_SIZE_1_0 RVL_STRUCT_SIZE(rvl_device_properties, max_rank)
#define RVL_DEVICE_PROPERTIES_STRUCT_SIZE_1_1 RVL_STRUCT_SIZE(rvl_device_properties, details)
#define RVL_DEVICE_PROPERTIES_STRUCT_SIZE_1_3 RVL_STRUCT_SIZE(rvl_device_properties, dlpack_device_id)
#define RVL_DEVICE_PROPERTIES_STRUCT_SIZE_1_4 RVL_STRUCT_SIZE(rvl_device_properties, reduce_ops)
#define RVL_DEVICE_PROPERTIES_STRUCT_SIZE_1_6 RVL_STRUCT_SIZE(rvl_device_properties, ops)
#define RVL_PROBE_RESULT_STRUCT_SIZE_1_0 RVL_STRUCT_SIZE(rvl_probe_result, score)
#define RVL_PROBE_RESULT_STRUCT_SIZE_1_1 RVL_STRUCT_SIZE(rvl_probe_result, reason)
#define RVL_BACKEND_INFO_STRUCT_SIZE_1_0 RVL_STRUCT_SIZE(rvl_backend_info, description)
#define RVL_PROGRAM_STRUCT_SIZE_1_0 RVL_STRUCT_SIZE(rvl_program, output)
#define RVL_CONTRACTION_STRUCT_SIZE_1_0 RVL_STRUCT_SIZE(rvl_contraction, epilogue)
#define RVL_CONTRACTION_STRUCT_SIZE_1_8 RVL_STRUCT_SIZE(rvl_contraction, b_n_strides)
#define RVL_DEVICE_PROPERTIES_STRUCT_SIZE_1_8 RVL_STRUCT_SIZE(rvl_device_properties, contraction_axes)
#define RVL_PROGRAM_STRUCT_SIZE_1_10 RVL_STRUCT_SIZE(rvl_program, acc_dtype)
#define RVL_DEVICE_PROPERTIES_STRUCT_SIZE_1_10 RVL_STRUCT_SIZE(rvl_device_properties, reduce_epilogue_ops)
#define RVL_PROGRAM_STRUCT_SIZE_1_11 RVL_STRUCT_SIZE(rvl_program, stages)
#define RVL_DEVICE_PROPERTIES_STRUCT_SIZE_1_11 RVL_STRUCT_SIZE(rvl_device_properties, reduce_chain_ops)
#define RVL_REDUCE_STAGE_STRUCT_SIZE_1_11 RVL_STRUCT_SIZE(rvl_reduce_stage, instructions)
#define RVL_OPERAND_STRUCT_SIZE_1_0 RVL_STRUCT_SIZE(rvl_operand, view)
#define RVL_VIEW_STRUCT_SIZE_1_0 RVL_STRUCT_SIZE(rvl_view, valid_hi)

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
