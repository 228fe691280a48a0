// Ravel SDK kernel validator: checks an rvl_program / rvl_contraction against every rule of the
// C ABI (sdk/include/ravel/backend.h, docs/abi.md) and returns it normalised, ready to run.
//
// Link Ravel::validate (a static, position-independent library; find_package(Ravel COMPONENTS
// validate)). It has no global state: the only plugin-specific step, turning an opaque
// `const rvl_buffer*` into memory, is done by the BufferLookup the plugin passes in.
//
// Every check throws rvl::Error(RVL_STATUS_INVALID_ARGUMENT) (see <ravel/backend.hpp>) with a
// message naming the offending part and what was expected; call it inside rvl::guard(). Address
// arithmetic uses checked int64 operations: a view whose extreme address cannot even be computed
// is rejected as absurd rather than overflowing.
//
// Invariants once a Program/Contraction exists:
//  - every View addresses only elements inside its buffer for every index of its valid box;
//  - lo/hi are clamped to [0, extent], so "valid" is simply lo[d] <= i[d] < hi[d];
//  - `empty` views have an empty valid box: every element reads as 0, nothing is addressed;
//  - instructions are in SSA order with op/dtype combinations checked, the last one's dtype is the
//    output dtype; output views have full validity, stride 0 on reduced axes, and no aliasing.
#pragma once

#include <ravel/backend.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace rvl::validate {

// What a plugin's buffer lookup reports for a live buffer: its memory and size in bytes.
struct BufferRef {
  std::byte* data = nullptr;  // may be NULL only when size == 0
  uint64_t size = 0;          // bytes
};

// Maps a buffer handle from the host to its memory. Must throw (e.g. rvl::invalid, naming
// `what`) unless `b` is a live buffer of the calling plugin; never returns for a bad handle.
using BufferLookup = std::function<BufferRef(const rvl_buffer* b, const char* what)>;

struct View {
  std::byte* data = nullptr;  // buffer base address
  int32_t dtype = 0;
  bool empty = false;
  int64_t offset = 0;
  int64_t stride[RVL_MAX_RANK] = {};
  int64_t lo[RVL_MAX_RANK] = {};
  int64_t hi[RVL_MAX_RANK] = {};
};

struct Program {
  int32_t rank = 0;
  int64_t shape[RVL_MAX_RANK] = {};
  std::vector<View> inputs;
  const rvl_instruction* ins = nullptr;  // borrowed from the caller for the duration of the call
  int32_t n_ins = 0;
  int32_t reduce_op = RVL_REDUCE_NONE;
  uint32_t reduce_axes = 0;
  View out;
  // ABI 1.10: a reduction's row epilogue (n_epilogue > 0): `out` then has the full iteration
  // space and receives the epilogue's values; ACC in it has dtype acc_dtype.
  const rvl_instruction* epilogue = nullptr;  // borrowed, like ins
  int32_t n_epilogue = 0;
  int32_t acc_dtype = -1;
  // ABI 1.11: the earlier reductions of a chain (rvl_program.stages), in order. ACC with arg
  // k >= 1 (in a stage's list, in ins, in the epilogue) reads stages[k - 1]'s value; ACC 0 (the
  // epilogue only) the reduction of ins. Empty: a 1.10 program, whose ACC args are ignored.
  struct Stage {
    const rvl_instruction* ins = nullptr;  // borrowed, like ins
    int32_t n_ins = 0;
    int32_t reduce_op = RVL_REDUCE_NONE;
    int32_t acc_dtype = -1;
  };
  std::vector<Stage> stages;
};

struct Contraction {
  int32_t dtype = 0;
  int32_t batch_rank = 0;
  int64_t batch_shape[RVL_MAX_RANK] = {};
  int64_t m = 0, n = 0, k = 0;
  View a, b;             // rank batch_rank + 2, [batch.., M, K] and [batch.., K, N]
  Program epilogue;      // iteration space [batch.., M, N]; output is C. Without a host epilogue
                         // this is a single ACC instruction (static storage), so n_ins >= 1.
  // ABI 1.8 (im2col block): a group of rank > 0 replaces A's row / A's column and B's row / B's
  // column axis (whose view stride is then 0); ranks are 0 for the 1.0 form and for a host that
  // does not fill the members. Every element of every group lies inside its buffer.
  struct Group {
    int32_t rank = 0;
    int64_t shape[RVL_MAX_RANK] = {};
    int64_t stride[2][RVL_MAX_RANK] = {};  // m: {A}; k: {A, B}; n: {B}
  } m_group, k_group, n_group;
  bool multi_axis() const { return m_group.rank > 0 || k_group.rank > 0 || n_group.rank > 0; }
};

// Validate and normalise a kernel; throw rvl::Error(INVALID_ARGUMENT) on any violation. Then,
// if a well-formed kernel has a view, instruction or contraction dtype outside `dtypes` (the
// device's rvl_device_properties.dtypes), throw rvl::Error(UNSUPPORTED) with a message that
// starts "dtype " and names it (the host reads that as a DTypeError). The default is the 1.0-1.6
// dtypes, so a plugin that does not pass its mask never runs the 1.7 dtypes it was not written for.
// ABI 1.10: a well-formed program with a row epilogue whose reduction's bit is not in
// `epilogue_ops` (the device's rvl_device_properties.reduce_epilogue_ops) is UNSUPPORTED, so a
// plugin that does not pass its mask never silently ignores an epilogue it does not run.
// ABI 1.11: likewise a well-formed chain (n_stages > 0) whose stages' or final reduce_op is not
// in `chain_ops` (rvl_device_properties.reduce_chain_ops) is UNSUPPORTED.
Program validate_program(const rvl_program* p, const BufferLookup& lookup, uint32_t dtypes = RVL_DTYPES_1_0,
                         uint32_t epilogue_ops = 0, uint32_t chain_ops = 0);
Contraction validate_contraction(const rvl_contraction* c, const BufferLookup& lookup,
                                 uint32_t dtypes = RVL_DTYPES_1_0);

// ---- all_reduce (ABI 1.9) ---------------------------------------------------------------------
// What a plugin tells the validator about one of its buffers: its device and size in bytes.
// Throws (INVALID_ARGUMENT naming `what`) for a handle the plugin does not know or NULL.
struct CollectiveBuffer {
  int32_t device = 0;
  uint64_t size = 0;
};
using CollectiveLookup = std::function<CollectiveBuffer(const rvl_buffer* b, const char* what)>;
// The checks of backend.h's all_reduce contract that do not depend on the plugin: n in
// [1, device_count], the arrays, op, dtype, count * size without overflow, every buffer known
// (lookup), outputs[k] on inputs[k]'s device, n distinct devices, every buffer large enough,
// no output aliasing another output or another part's input. Throws rvl::Error
// (INVALID_ARGUMENT) before anything runs; returns the bytes of one part. Streams are the
// plugin's to check.
uint64_t validate_all_reduce(int32_t n, int32_t device_count, const rvl_buffer* const* inputs,
                             rvl_buffer* const* outputs, uint64_t count, int32_t dtype, int32_t op,
                             const CollectiveLookup& lookup);

}  // namespace rvl::validate
