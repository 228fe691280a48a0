// Tensor::realize and reading results back to the host.
#include <cstdio>
#include <cstring>
#include <new>

#include "graph/engine.hpp"
#include "tensor/host_convert.hpp"
#include "tensor/internal.hpp"
#include "tensor/sharded.hpp"

namespace ravel {

using namespace detail;

const Tensor& Tensor::realize() const {
  check_defined(*this, "realize");
  // One device: the node itself, without the argument list and parts_of's list of parts (two
  // allocations that were a tenth of an eager 4 KiB all-reduce's core time: docs/distributed.md,
  // "The core's per-call cost").
  if (!is_multi(*this)) engine().realize_one(node_);
  else ravel::realize({*this});
  return *this;
}

void realize(const std::vector<Tensor>& tensors) {
  std::vector<NodePtr> nodes;
  for (const auto& t : tensors) {
    check_defined(t, "realize");
    if (is_multi(t) && engine().debug_level() >= 1)  // docs/sharding.md, "Debugging"
      std::fprintf(stderr, "ravel: realize %s %s %s\n", shape_str(t.shape()).c_str(), dtype_name(t.dtype()),
                   t.sharding()->str().c_str());
    for (const auto& p : parts_of(t)) nodes.push_back(p.node());  // a sharded tensor: every part
  }
  engine().realize(nodes);
}

bool Tensor::is_realized() const {
  check_defined(*this, "is_realized");
  std::lock_guard<std::recursive_mutex> lock(buffer_mutex());  // Note [Threads]
  for (const auto& p : parts_of(*this))
    if (!resolve(p.node()).base->buffer) return false;
  return true;
}

void Tensor::read_into(void* dst, DType as) const {
  check_defined(*this, "read");
  if (is_multi(*this)) return multi_to(*this, device()).read_into(dst, as);  // gathered on the first device
  if (as != dtype() && (!engine().device_has_dtype(device(), dtype()) || !engine().device_has_dtype(device(), as))) {
    // Note [Dtypes a device lacks] (runtime/realize.cpp): the device cannot cast between the two,
    // so the values come back in their own dtype and are converted here, as the CAST would.
    std::vector<unsigned char> own(static_cast<size_t>(numel()) * static_cast<size_t>(dtype_size(dtype())));
    read_into(own.data(), dtype());
    detail::host_convert(own.data(), dtype(), dst, as, numel());
    return;
  }
  Tensor t = cast(as);
  if (t.numel() == 0) return;
  if (!view_of(t).is_contiguous()) t = t.contiguous();  // a copy kernel gathers the view
  // One critical section for both, so the buffer read is the one this realization left (a
  // target's buffer is never released, but reading the field races with other realizations).
  std::lock_guard<std::recursive_mutex> lock(buffer_mutex());  // Note [Threads]
  engine().realize({t.node()});
  engine().download(*resolve(t.node()).base->buffer, dst, static_cast<uint64_t>(t.numel()) * dtype_size(as));
}

namespace {
// The host vector a read fills: a std::bad_alloc is an OutOfMemoryError naming the bytes, as for
// every allocation of tensor data (Note [Host memory] in creation.cpp).
template <class T>
std::vector<T> host_vector(const Tensor& t) {
  try {
    return std::vector<T>(static_cast<size_t>(t.numel()));
  } catch (const std::bad_alloc&) {
    throw OutOfMemoryError(concat("to_vector: cannot allocate ", static_cast<uint64_t>(t.numel()) * sizeof(T),
                                  " bytes of host memory to read a tensor of shape ", shape_str(t.shape()), " from ",
                                  t.device().str()));
  }
}
}  // namespace

template <class T>
std::vector<T> Tensor::to_vector() const {
  check_defined(*this, "to_vector");
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes = host_vector<uint8_t>(*this);
    read_into(bytes.data(), DType::Bool);
    return std::vector<bool>(bytes.begin(), bytes.end());
  } else {
    std::vector<T> out = host_vector<T>(*this);
    read_into(out.data(), dtype_v<T>);
    return out;
  }
}

template <class T>
T Tensor::item() const {
  check_defined(*this, "item");
  RAVEL_CHECK(numel() == 1, ValueError, "item() expects a tensor with one element, got shape ", shape_str(shape()),
              " (", numel(), " elements)");
  return to_vector<T>()[0];
}

#define RAVEL_INSTANTIATE_READ(T)                     \
  template std::vector<T> Tensor::to_vector<T>() const; \
  template T Tensor::item<T>() const;
RAVEL_INSTANTIATE_READ(bool)
RAVEL_INSTANTIATE_READ(uint8_t)
RAVEL_INSTANTIATE_READ(int32_t)
RAVEL_INSTANTIATE_READ(int64_t)
RAVEL_INSTANTIATE_READ(float)
RAVEL_INSTANTIATE_READ(double)
RAVEL_INSTANTIATE_READ(int8_t)
RAVEL_INSTANTIATE_READ(int16_t)
RAVEL_INSTANTIATE_READ(uint16_t)
RAVEL_INSTANTIATE_READ(uint32_t)
RAVEL_INSTANTIATE_READ(uint64_t)
RAVEL_INSTANTIATE_READ(Float16)
RAVEL_INSTANTIATE_READ(BFloat16)
#undef RAVEL_INSTANTIATE_READ

}  // namespace ravel
