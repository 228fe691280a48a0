// DLPack export and import (ravel/dlpack.hpp, docs/interop.md).
//
// Why here, in the runtime: sharing memory needs the device buffer itself (its address, or a
// buffer wrapped around foreign memory), which only the runtime sees (DeviceBuffer is opaque to
// the layers before it, Note [Layering]). The plugin side is two optional ABI 1.2 members,
// buffer_address and buffer_wrap; a plugin without them can neither export nor share on import.
// What kind of memory those addresses are (host, CUDA, ROCm, oneAPI USM) the plugin states in
// device_properties (ABI 1.3 dlpack_device_type/id), so no backend is known here by name.
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "graph/node.hpp"
#include "ravel/dlpack.hpp"
#include "ravel/runtime.hpp"
#include "runtime/device_buffer.hpp"
#include "tensor/internal.hpp"

namespace ravel {

using namespace detail;
namespace dl = dlpack;

namespace {

dl::DLDataType dl_dtype(DType t) {
  switch (t) {
    case DType::Bool: return {dl::kDLBool, 8, 1};
    case DType::U8: return {dl::kDLUInt, 8, 1};
    case DType::I32: return {dl::kDLInt, 32, 1};
    case DType::I64: return {dl::kDLInt, 64, 1};
    case DType::F32: return {dl::kDLFloat, 32, 1};
    case DType::F64: return {dl::kDLFloat, 64, 1};
    case DType::F16: return {dl::kDLFloat, 16, 1};
    case DType::BF16: return {dl::kDLBfloat, 16, 1};
    case DType::I8: return {dl::kDLInt, 8, 1};
    case DType::I16: return {dl::kDLInt, 16, 1};
    case DType::U16: return {dl::kDLUInt, 16, 1};
    case DType::U32: return {dl::kDLUInt, 32, 1};
    case DType::U64: return {dl::kDLUInt, 64, 1};
  }
  return {};
}

DType ravel_dtype(dl::DLDataType t) {
  const auto is = [&](uint8_t code, uint8_t bits) { return t.code == code && t.bits == bits && t.lanes == 1; };
  if (is(dl::kDLBool, 8)) return DType::Bool;
  if (is(dl::kDLUInt, 8)) return DType::U8;
  if (is(dl::kDLInt, 32)) return DType::I32;
  if (is(dl::kDLInt, 64)) return DType::I64;
  if (is(dl::kDLFloat, 32)) return DType::F32;
  if (is(dl::kDLFloat, 64)) return DType::F64;
  if (is(dl::kDLFloat, 16)) return DType::F16;
  if (is(dl::kDLBfloat, 16)) return DType::BF16;
  if (is(dl::kDLInt, 8)) return DType::I8;
  if (is(dl::kDLInt, 16)) return DType::I16;
  if (is(dl::kDLUInt, 16)) return DType::U16;
  if (is(dl::kDLUInt, 32)) return DType::U32;
  if (is(dl::kDLUInt, 64)) return DType::U64;
  throw DTypeError(concat("from_dlpack: DLPack dtype (code ", int{t.code}, ", bits ", int{t.bits}, ", lanes ", t.lanes,
                          ") has no Ravel dtype; Ravel has bool, (u)int8/16/32/64, float16, bfloat16, float32 and "
                          "float64, one lane each"));
}

// Where a device's buffers live in DLPack's terms, from ABI 1.3 dlpack_device_type/id. A plugin
// that does not say (0, as every 1.0-1.2 plugin) has host memory if its device is a CPU, and
// memory nobody else can address otherwise (type 0: cannot be shared).
struct Memory {
  dl::DLDevice where{static_cast<dl::DLDeviceType>(0), 0};
  std::string name;  // the device's, for messages
};

Memory memory_of(const LoadedPlugin& plugin, int32_t index) {
  rvl_device_properties props{};
  props.struct_size = sizeof props;
  plugin.check(plugin.api().device_properties(index, &props), "device_properties");
  props.name[sizeof props.name - 1] = '\0';
  Memory m;
  m.name = props.name;
  if (props.dlpack_device_type != 0)
    m.where = {static_cast<dl::DLDeviceType>(props.dlpack_device_type), props.dlpack_device_id};
  else if (props.kind == RVL_DEVICE_CPU)
    m.where = {dl::kDLCPU, 0};
  return m;
}

bool is_host(dl::DLDeviceType t) { return t == dl::kDLCPU || t == dl::kDLCUDAHost || t == dl::kDLROCMHost; }

std::string where_str(dl::DLDevice d) {
  const char* name = nullptr;
  switch (d.device_type) {
    case dl::kDLCPU: name = "kDLCPU"; break;
    case dl::kDLCUDA: name = "kDLCUDA"; break;
    case dl::kDLCUDAHost: name = "kDLCUDAHost"; break;
    case dl::kDLROCM: name = "kDLROCM"; break;
    case dl::kDLROCMHost: name = "kDLROCMHost"; break;
    case dl::kDLOneAPI: name = "kDLOneAPI"; break;
    default: break;
  }
  return concat(name ? name : "DLPack device type ", name ? "" : std::to_string(d.device_type), " device ",
                d.device_id);
}

// The Ravel device whose buffers are `where`, if there is one.
std::optional<Device> device_holding(dl::DLDevice where) {
  for (const DeviceRecord& r : Runtime::get().devices()) {
    const dl::DLDevice w = memory_of(*Runtime::get().plugin_for(r.device), r.device.index()).where;
    if (w.device_type == where.device_type && w.device_id == where.device_id) return r.device;
  }
  return std::nullopt;
}

// What an exported tensor keeps alive, and the arrays its DLTensor points into: one allocation
// per export, found again through manager_ctx by the deleter.
template <class Managed>
struct Export {
  Managed managed{};
  std::shared_ptr<DeviceBuffer> buffer;
  Shape shape;
  std::vector<int64_t> strides;
  static void deleter(Managed* self) { delete static_cast<Export*>(self->manager_ctx); }
};

// Fills `out` and returns the buffer to keep alive; sets *copied when padding forced a copy.
std::shared_ptr<DeviceBuffer> describe(const Tensor& input, dl::DLTensor& out, Shape& shape,
                                       std::vector<int64_t>& strides, bool* copied) {
  RAVEL_CHECK(input.defined(), ValueError, "to_dlpack: the tensor is undefined");
  // DLPack describes one buffer on one device; a sharded tensor has one per device.
  RAVEL_CHECK(!input.sharding(), DeviceError, "to_dlpack: the tensor is sharded (", input.sharding()->str(),
              "); DLPack shares one device's buffer: gather it with to(device) or export its shards()");
  Tensor t = input;
  *copied = view_of(t).has_mask();
  if (*copied) t = t.contiguous();  // padding has no strided form
  auto plugin = Runtime::get().plugin_for(t.device());
  const rvl_backend_api* api = &plugin->api();
  const Memory mem = memory_of(*plugin, t.device().index());
  RAVEL_CHECK(RAVEL_API_HAS(api, buffer_address) && mem.where.device_type != 0, DeviceError, "to_dlpack: device ",
              t.device().str(), " (", mem.name, ") cannot share its memory: its plugin ",
              RAVEL_API_HAS(api, buffer_address) ? "does not say what kind of memory it has (ABI 1.3 dlpack_device_type)"
                                                 : "has no buffer_address (ABI 1.2)",
              "; move the tensor with .to(...) to a device that can, such as a CPU device, first");
  // Note [Threads]: a node's buffer is realization state, read under the buffer lock.
  std::lock_guard<std::recursive_mutex> lock(buffer_mutex());
  t.realize();
  const Source src = resolve(t.node());
  std::shared_ptr<DeviceBuffer> buffer = src.base->buffer;
  RAVEL_CHECK(buffer != nullptr, InternalError, "to_dlpack: the tensor was realized but has no buffer");
  // The consumer gets no stream to wait on (DLPack's stream argument is Python's), so every kernel
  // writing the buffer must be over before it sees the address.
  synchronize(t.device());
  void* address = nullptr;
  plugin->check(api->buffer_address(buffer->handle(), &address), "buffer_address");
  shape = src.view.shape;
  strides = src.view.strides;
  out.device = mem.where;
  out.ndim = static_cast<int32_t>(shape.size());
  out.dtype = dl_dtype(t.dtype());
  out.shape = shape.empty() ? nullptr : shape.data();
  out.strides = strides.empty() ? nullptr : strides.data();  // a 0-d tensor has none either way
  // The offset goes into `data` (byte_offset 0), as NumPy does: older consumers, PyTorch 1.x
  // among them, ignore byte_offset. An empty tensor's offset may lie outside the buffer: keep
  // the base address then.
  const int64_t offset = t.numel() == 0 ? 0 : src.view.offset;
  out.data = static_cast<char*>(address) + offset * dtype_size(t.dtype());
  out.byte_offset = 0;
  return buffer;
}

// Sizes from another library are checked before any arithmetic on them (Note [Checked sizes] in
// graph/view.hpp): a product or extent that overflowed would be undefined behaviour, and one that
// wrapped to 0 would take the empty-tensor path with a shape the core then refuses.
constexpr int64_t kMaxExtent = int64_t{1} << 40;  // elements on an axis, in all, and of a stride

// The element count of `shape`: every size in [0, 2^40), and the product of the non-zero sizes
// below 2^40 too (an empty tensor of shape {0, 2^62, 2^62} is no more plausible than a full one).
int64_t outside_numel(const Shape& shape) {
  int64_t nonzero = 1;
  bool empty = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t s = shape[d];
    RAVEL_CHECK(s >= 0 && s < kMaxExtent, ShapeError, "from_dlpack: size ", s, " on axis ", d, " of shape ",
                shape_str(shape), " is outside [0, 2^40)");
    if (s == 0) {
      empty = true;
      continue;
    }
    RAVEL_CHECK(!__builtin_mul_overflow(nonzero, s, &nonzero) && nonzero < kMaxExtent, ShapeError,
                "from_dlpack: shape ", shape_str(shape), " has 2^40 or more elements");
  }
  return empty ? 0 : nonzero;
}

// The elements a strided tensor addresses, as [lo, hi] in elements relative to its first one;
// `numel` > 0. Each |stride| and each axis' reach are below 2^40, so (size - 1) * stride is
// below 2^80 only in theory: it is computed with an overflow check and the sums are bounded.
std::pair<int64_t, int64_t> extent(const Shape& shape, const std::vector<int64_t>& strides) {
  int64_t lo = 0, hi = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t step = strides[d];
    RAVEL_CHECK(step > -kMaxExtent && step < kMaxExtent, ValueError, "from_dlpack: stride ", step, " on axis ", d,
                " is outside (-2^40, 2^40) elements");
    int64_t reach = 0;
    RAVEL_CHECK(!__builtin_mul_overflow(shape[d] - 1, step, &reach) && reach > -kMaxExtent && reach < kMaxExtent,
                ValueError, "from_dlpack: axis ", d, " (size ", shape[d], ", stride ", step,
                ") reaches 2^40 or more elements from the first one");
    (reach < 0 ? lo : hi) += reach;  // at most 8 terms below 2^40 each: no overflow
  }
  RAVEL_CHECK(hi - lo < kMaxExtent, ValueError, "from_dlpack: the strides span ", hi - lo + 1,
              " elements, 2^40 or more");
  return {lo, hi};
}

// What buffer_wrap releases: the producer's deleter, once the import has succeeded (`built`).
struct ReleaseGuard {
  void (*release)(void*);
  void* ctx;
  bool built;
  static void run(void* self) {
    std::unique_ptr<ReleaseGuard> g(static_cast<ReleaseGuard*>(self));
    if (g->built) g->release(g->ctx);
  }
};

// Shares or copies `t`; `release` gives the managed tensor back to its owner (exactly once).
// Host memory is shared with a CPU device that can wrap it, else copied on the host. Device
// memory (CUDA, ROCm, oneAPI...) is shared only with the Ravel device that owns exactly that
// memory; anything else is a DeviceError, because the host cannot read it to copy it and a
// silent device-to-device copy is what .to(...) is for (docs/interop.md).
Tensor import(const dl::DLTensor& t, std::optional<Device> device, void (*release)(void*), void* ctx) {
  RAVEL_CHECK(t.ndim >= 0 && t.ndim <= RVL_MAX_RANK, ShapeError, "from_dlpack: rank ", t.ndim,
              " is outside what Ravel supports (0..", RVL_MAX_RANK, ")");
  RAVEL_CHECK(t.ndim == 0 || t.shape != nullptr, ValueError, "from_dlpack: shape is NULL for rank ", t.ndim);
  const bool host = is_host(t.device.device_type);
  const DType dtype = ravel_dtype(t.dtype);
  Shape shape(t.shape, t.shape + t.ndim);
  std::vector<int64_t> strides = t.strides ? std::vector<int64_t>(t.strides, t.strides + t.ndim)
                                           : StridedView::contiguous_strides(shape);
  const int64_t numel = outside_numel(shape);
  // Without a target, device memory stays on the device that owns it (as torch.from_dlpack
  // keeps a CUDA tensor on its GPU); host memory goes to the default device.
  const std::optional<Device> owner = host ? std::nullopt : device_holding(t.device);
  const Device target = device ? *device : owner ? *owner : Runtime::get().default_device();
  auto plugin = Runtime::get().plugin_for(target);
  const rvl_backend_api* api = &plugin->api();
  const Memory mem = memory_of(*plugin, target.index());
  const bool same = host ? mem.where.device_type == dl::kDLCPU
                         : mem.where.device_type == t.device.device_type && mem.where.device_id == t.device.device_id;
  if (!host && !same) {
    throw DeviceError(concat("from_dlpack: the tensor is in ", where_str(t.device), " memory and the target ",
                             target.str(), " (", mem.name, ") has ",
                             mem.where.device_type ? where_str(mem.where) + " memory" : "memory no one else addresses",
                             "; Ravel shares device memory only with the device that owns it and never copies it "
                             "on import: ",
                             owner ? concat("import it with device ", owner->str(), ", then .to(", target.str(), ")")
                                   : std::string("no Ravel device here owns that memory")));
  }
  const int64_t es = dtype_size(dtype);
  RAVEL_CHECK(numel == 0 || t.data != nullptr, ValueError, "from_dlpack: data is NULL for shape ", shape_str(shape));
  if (numel == 0) {  // built first: the deleter is called only once nothing can fail any more
    Tensor empty = Tensor::zeros(shape, dtype, target);
    release(ctx);
    return empty;
  }
  const auto [lo, hi] = extent(shape, strides);
  // byte_offset and the extent are added to a pointer we cannot bound (the producer's buffer has
  // no size in DLPack): refuse what would wrap the address space or start before address 0, and
  // an offset beyond any tensor Ravel could read (2^40 elements of 8 bytes).
  RAVEL_CHECK(t.byte_offset < (uint64_t{1} << 43), ValueError, "from_dlpack: byte_offset ", t.byte_offset,
              " is implausible (expected fewer than 2^43 bytes past data)");
  const uintptr_t base = reinterpret_cast<uintptr_t>(t.data);
  uintptr_t first_at = 0, lo_at = 0, hi_at = 0;
  RAVEL_CHECK(!__builtin_add_overflow(base, static_cast<uintptr_t>(t.byte_offset), &first_at) &&
                  static_cast<uintptr_t>(-lo * es) <= first_at &&
                  !__builtin_sub_overflow(first_at, static_cast<uintptr_t>(-lo * es), &lo_at) &&
                  !__builtin_add_overflow(first_at, static_cast<uintptr_t>((hi + 1) * es), &hi_at),
              ValueError, "from_dlpack: data ", t.data, " + byte_offset ", t.byte_offset, " with strides reaching ",
              lo, "..", hi, " elements wraps around the address space");
  const char* first = static_cast<const char*>(t.data) + t.byte_offset;
  const bool aligned = first_at % static_cast<uintptr_t>(es) == 0;
  // Host bools are copied: Ravel's kernels rely on a bool being the byte 0 or 1 (from_data
  // normalises), and a producer's byte may be any non-zero value for true (fuzz_dlpack found a
  // shared 0x40 read as 64 by a cast). Device memory cannot be normalised here and stays shared.
  const bool normalise = host && dtype == DType::Bool;
  if (same && RAVEL_API_HAS(api, buffer_wrap) && aligned && !normalise) {
    const uint64_t bytes = static_cast<uint64_t>(hi - lo + 1) * static_cast<uint64_t>(es);
    // The plugin calls the release when the buffer is freed, which may happen before the tensor is
    // built (an allocation fails): the producer's deleter may run only once the import succeeded,
    // because on an error the caller still owns the managed tensor and calls it itself.
    auto guard = std::make_unique<ReleaseGuard>(ReleaseGuard{release, ctx, false});
    rvl_buffer* handle = nullptr;
    plugin->check(api->buffer_wrap(target.index(), const_cast<char*>(first) + lo * es, bytes,
                                   &ReleaseGuard::run, guard.get(), &handle),
                  "buffer_wrap");
    ReleaseGuard* armed = guard.release();  // the plugin calls run() exactly once, which deletes it
    // From here the plugin owns the release: the DeviceBuffer frees the handle, whatever happens.
    auto buffer = std::make_shared<DeviceBuffer>(plugin, target.index(), bytes, handle);
    Tensor base_tensor(make_buffer_node(dtype, {hi - lo + 1}, target, std::move(buffer)));
    StridedView view{shape, strides, -lo, std::nullopt};
    Tensor out = view.is_contiguous() && lo == 0 && hi + 1 == numel
                     ? base_tensor.reshape(shape)
                     : make_view(base_tensor, MoveOp::Identity, {}, std::move(view));
    armed->built = true;
    return out;
  }
  RAVEL_CHECK(host, DeviceError, "from_dlpack: ", target.str(), " cannot share this ", where_str(t.device),
              " memory (", RAVEL_API_HAS(api, buffer_wrap) ? "its first element is not aligned to its size" :
              "its plugin has no buffer_wrap (ABI 1.2)", ") and the host cannot copy device memory");
  // A copy: gather the strided elements on the host, in row-major order, then upload.
  std::vector<char> data(static_cast<size_t>(numel * es));
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t n = 0; n < numel; ++n) {
    int64_t at = 0;
    for (size_t d = 0; d < shape.size(); ++d) at += index[d] * strides[d];
    std::memcpy(data.data() + n * es, first + at * es, static_cast<size_t>(es));
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  Tensor out = Tensor::from_data(data.data(), dtype, shape, target);
  release(ctx);
  return out;
}

template <class Managed>
void release_managed(void* m) {
  auto* managed = static_cast<Managed*>(m);
  if (managed->deleter) managed->deleter(managed);
}

}  // namespace

dl::DLManagedTensorVersioned* to_dlpack_versioned(const Tensor& t) {
  auto e = std::make_unique<Export<dl::DLManagedTensorVersioned>>();
  bool copied = false;
  e->buffer = describe(t, e->managed.dl_tensor, e->shape, e->strides, &copied);
  e->managed.version = {dl::kMajorVersion, dl::kMinorVersion};
  e->managed.flags = dl::kFlagReadOnly | (copied ? dl::kFlagIsCopied : 0);
  e->managed.manager_ctx = e.get();
  e->managed.deleter = &Export<dl::DLManagedTensorVersioned>::deleter;
  return &e.release()->managed;
}

dl::DLManagedTensor* to_dlpack(const Tensor& t) {
  auto e = std::make_unique<Export<dl::DLManagedTensor>>();
  bool copied = false;
  e->buffer = describe(t, e->managed.dl_tensor, e->shape, e->strides, &copied);
  e->managed.manager_ctx = e.get();
  e->managed.deleter = &Export<dl::DLManagedTensor>::deleter;
  return &e.release()->managed;
}

Tensor from_dlpack(dl::DLManagedTensorVersioned* managed, std::optional<Device> device) {
  RAVEL_CHECK(managed != nullptr, ValueError, "from_dlpack: the managed tensor is NULL");
  // The spec: of a tensor with another major version the consumer reads nothing but version and
  // deleter, and must call the deleter (the one error after which Ravel no longer owes it back).
  if (managed->version.major != dl::kMajorVersion) {
    const uint32_t major = managed->version.major;
    if (managed->deleter) managed->deleter(managed);
    throw ValueError(concat("from_dlpack: DLPack major version ", major, ", Ravel reads ", dl::kMajorVersion,
                            " (the tensor was given back through its deleter)"));
  }
  return import(managed->dl_tensor, device, &release_managed<dl::DLManagedTensorVersioned>, managed);
}

Tensor from_dlpack(dl::DLManagedTensor* managed, std::optional<Device> device) {
  RAVEL_CHECK(managed != nullptr, ValueError, "from_dlpack: the managed tensor is NULL");
  return import(managed->dl_tensor, device, &release_managed<dl::DLManagedTensor>, managed);
}

}  // namespace ravel
