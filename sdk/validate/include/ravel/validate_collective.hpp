// Ravel SDK collective validator: checks the arguments of the collective members of the C ABI
// (all_reduce, since 1.9; reduce_scatter and all_gather, since 1.12; backend.h, docs/abi.md
// §17 and §20) before anything runs, and returns them resolved to memory.
//
// Part of Ravel::validate, like <ravel/validate.hpp>: no global state; the plugin-specific steps
// (a handle to memory and device, a stream's device) are the callbacks the plugin passes in.
// Every check throws rvl::Error(RVL_STATUS_INVALID_ARGUMENT) naming the offending argument, except
// a dtype outside `dtypes`, which is UNSUPPORTED ("dtype ..."); call it inside rvl::guard().
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include <ravel/backend.h>

namespace rvl::validate {

enum class CollectiveKind { AllReduce, ReduceScatter, AllGather };

// What a plugin's lookup reports for a live buffer of a collective: its memory too (host or
// device addresses alike; compared, never dereferenced here), so that overlap is checked by bytes.
struct CollectiveMemory {
  std::byte* data = nullptr;
  uint64_t size = 0;  // bytes
  int32_t device = -1;
};

// Must throw (e.g. rvl::invalid, naming `what`) unless `b` is a live buffer of the calling plugin.
using CollectiveMemoryLookup = std::function<CollectiveMemory(const rvl_buffer* b, const char* what)>;
// Must throw unless `s` is NULL or a live stream of `device`.
using StreamCheck = std::function<void(const rvl_stream* s, int32_t device, const char* what)>;

// A collective whose arguments passed every rule: in[k] and out[k] on devices[k].
struct Collective {
  CollectiveKind kind = CollectiveKind::AllReduce;
  int32_t n = 0;
  int32_t dtype = 0;
  int32_t op = 0;            // an rvl_all_reduce_op; 0 for all_gather
  uint64_t count = 0;        // elements: per buffer (all_reduce), per output (reduce_scatter), per input (all_gather)
  uint64_t element_size = 0;
  std::vector<int32_t> devices;
  std::vector<CollectiveMemory> in, out;
};

// The name of the member ("all_reduce", "reduce_scatter", "all_gather").
const char* collective_name(CollectiveKind kind);

// The rules of backend.h for `kind`: 1 <= n <= device_count, arrays and buffers non-NULL and
// live, n distinct devices with outputs[k] on inputs[k]'s device, sizes (count * size(dtype), times
// n for reduce_scatter's inputs and all_gather's outputs) without overflow, op (ignored for
// all_gather) and dtype known, streams NULL or of device k, aliasing (all_reduce: outputs[k] may
// be inputs[k] exactly and nothing else overlaps; the others: no output overlaps an input or
// another output), then every dtype in `dtypes` (else UNSUPPORTED).
Collective validate_collective(CollectiveKind kind, int32_t n, int32_t device_count, rvl_stream* const* streams,
                               const rvl_buffer* const* inputs, rvl_buffer* const* outputs, uint64_t count,
                               int32_t dtype, int32_t op, const CollectiveMemoryLookup& lookup, const StreamCheck& stream_check,
                               uint32_t dtypes = RVL_DTYPES_ALL);

}  // namespace rvl::validate
