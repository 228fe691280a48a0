// The collective members' argument rules (<ravel/validate_collective.hpp>).
#include <ravel/validate_collective.hpp>

#include <ravel/backend.hpp>

#include <set>
#include <string>

namespace rvl::validate {

const char* collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::AllReduce: return "all_reduce";
    case CollectiveKind::ReduceScatter: return "reduce_scatter";
    case CollectiveKind::AllGather: return "all_gather";
  }
  return "?";
}

namespace {

// [a, a + an) and [b, b + bn) share a byte.
bool overlap(const CollectiveMemory& a, uint64_t an, const CollectiveMemory& b, uint64_t bn) {
  if (an == 0 || bn == 0) return false;
  return a.data < b.data + bn && b.data < a.data + an;
}

}  // namespace

Collective validate_collective(CollectiveKind kind, int32_t n, int32_t device_count, rvl_stream* const* streams,
                               const rvl_buffer* const* inputs, rvl_buffer* const* outputs, uint64_t count,
                               int32_t dtype, int32_t op, const CollectiveMemoryLookup& lookup, const StreamCheck& stream_check,
                               uint32_t dtypes) {
  const std::string name = collective_name(kind);
  if (n < 1 || n > device_count)
    invalid(name + ": n = " + std::to_string(n) + "; expected 1 to " + std::to_string(device_count) +
            " (one buffer per device of this plugin)");
  if (inputs == nullptr || outputs == nullptr) invalid(name + ": the inputs or outputs array is NULL");
  if (kind != CollectiveKind::AllGather && (op < RVL_ALL_REDUCE_SUM || op > RVL_ALL_REDUCE_MIN))
    invalid(name + ": op " + std::to_string(op) + " is not an rvl_all_reduce_op (SUM 1, MAX 2, PROD 3, MIN 4)");
  if (dtype < 0 || dtype >= RVL_DTYPE_COUNT_) invalid(name + ": dtype " + std::to_string(dtype) + " is not an rvl_dtype");
  const uint64_t size = dtype_size(dtype);
  // Halved once more than needed, so that n * bytes below cannot overflow either.
  if (count > UINT64_MAX / size / 2 / static_cast<uint64_t>(n))
    invalid(name + ": count " + std::to_string(count) + " overflows");
  const uint64_t bytes = count * size;
  const uint64_t in_bytes = kind == CollectiveKind::ReduceScatter ? bytes * static_cast<uint64_t>(n) : bytes;
  const uint64_t out_bytes = kind == CollectiveKind::AllGather ? bytes * static_cast<uint64_t>(n) : bytes;
  Collective c;
  c.kind = kind, c.n = n, c.dtype = dtype, c.op = kind == CollectiveKind::AllGather ? 0 : op, c.count = count;
  c.element_size = size;
  std::set<int32_t> seen;
  for (int32_t k = 0; k < n; ++k) {
    const std::string ks = std::to_string(k);
    const CollectiveMemory in = lookup(inputs[k], (name + " input " + ks).c_str());
    const CollectiveMemory out = lookup(outputs[k], (name + " output " + ks).c_str());
    if (out.device != in.device)
      invalid(name + ": output " + ks + " is on device " + std::to_string(out.device) + ", input " + ks + " on device " +
              std::to_string(in.device) + "; expected both on one device");
    if (!seen.insert(in.device).second)
      invalid(name + ": device " + std::to_string(in.device) + " appears twice (input " + ks +
              "); expected n distinct devices");
    if (in.size < in_bytes || out.size < out_bytes)
      invalid(name + ": " + std::to_string(count) + " elements of " + std::to_string(size) + " bytes over " +
              std::to_string(n) + " devices need " + std::to_string(in_bytes) + " bytes per input and " +
              std::to_string(out_bytes) + " per output; input " + ks + " has " + std::to_string(in.size) + ", output " +
              ks + " " + std::to_string(out.size));
    if (streams != nullptr) stream_check(streams[k], in.device, (name + " stream " + ks).c_str());
    c.devices.push_back(in.device);
    c.in.push_back(in);
    c.out.push_back(out);
  }
  // Aliasing: all_reduce allows exactly outputs[k] == inputs[k]; nothing else may share a byte.
  for (int32_t k = 0; k < n; ++k) {
    for (int32_t j = 0; j < n; ++j) {
      const bool in_place = kind == CollectiveKind::AllReduce && j == k && c.out[k].data == c.in[k].data;
      if (!in_place && overlap(c.out[k], out_bytes, c.in[j], in_bytes))
        invalid(name + ": output " + std::to_string(k) + " overlaps input " + std::to_string(j) +
                (kind == CollectiveKind::AllReduce ? " (only outputs[k] == inputs[k] is allowed)"
                                                   : " (this collective has no in-place form)"));
      if (j > k && overlap(c.out[k], out_bytes, c.out[j], out_bytes))
        invalid(name + ": outputs " + std::to_string(k) + " and " + std::to_string(j) + " overlap");
    }
  }
  if (!((dtypes >> dtype) & 1u))
    fail(RVL_STATUS_UNSUPPORTED, "dtype " + std::string(dtype_name(dtype)) + ": not run by every device of this " + name);
  return c;
}

}  // namespace rvl::validate
