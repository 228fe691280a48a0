// The plugin-independent checks of all_reduce's arguments (<ravel/validate.hpp>).
#include <ravel/backend.hpp>
#include <ravel/validate.hpp>

#include <set>
#include <string>

namespace rvl::validate {

uint64_t validate_all_reduce(int32_t n, int32_t device_count, const rvl_buffer* const* inputs,
                             rvl_buffer* const* outputs, uint64_t count, int32_t dtype, int32_t op,
                             const CollectiveLookup& lookup) {
  if (n < 1 || n > device_count)
    invalid("all_reduce: n = " + std::to_string(n) + "; expected 1 to " + std::to_string(device_count) +
            " (one buffer per device of this plugin)");
  if (inputs == nullptr || outputs == nullptr) invalid("all_reduce: the inputs or outputs array is NULL");
  if (op < RVL_ALL_REDUCE_SUM || op > RVL_ALL_REDUCE_MIN)
    invalid("all_reduce: op " + std::to_string(op) + " is not an rvl_all_reduce_op (SUM 1, MAX 2, PROD 3, MIN 4)");
  if (!dtype_valid(dtype)) invalid("all_reduce: dtype " + std::to_string(dtype) + " is not an rvl_dtype");
  const uint64_t size = dtype_size(dtype);
  if (count > UINT64_MAX / size / 2) invalid("all_reduce: count " + std::to_string(count) + " overflows");
  const uint64_t bytes = count * size;
  std::set<int32_t> devices;
  std::set<const rvl_buffer*> outs;
  for (int32_t k = 0; k < n; ++k) {
    const std::string which = std::to_string(k);
    const CollectiveBuffer in = lookup(inputs[k], ("all_reduce input " + which).c_str());
    const CollectiveBuffer out = lookup(outputs[k], ("all_reduce output " + which).c_str());
    if (out.device != in.device)
      invalid("all_reduce: output " + which + " lives on device " + std::to_string(out.device) + ", input " + which +
              " on device " + std::to_string(in.device) + "; expected both on one device");
    if (!devices.insert(in.device).second)
      invalid("all_reduce: device " + std::to_string(in.device) + " appears twice (input " + which +
              "); expected n distinct devices");
    if (in.size < bytes || out.size < bytes)
      invalid("all_reduce: " + std::to_string(count) + " elements of " + std::to_string(size) + " bytes need " +
              std::to_string(bytes) + " bytes; input " + which + " has " + std::to_string(in.size) + ", output " +
              which + " " + std::to_string(out.size));
    if (!outs.insert(outputs[k]).second) invalid("all_reduce: output " + which + " is also another output");
  }
  for (int32_t k = 0; k < n; ++k)
    for (int32_t j = 0; j < n; ++j)
      if (j != k && outputs[j] == inputs[k])
        invalid("all_reduce: output " + std::to_string(j) + " is input " + std::to_string(k) +
                " (only outputs[k] == inputs[k] may alias)");
  return bytes;
}

}  // namespace rvl::validate
