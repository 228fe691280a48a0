// Creation: from host data, constants, ranges, eye, and random numbers.
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <new>

#include "graph/engine.hpp"
#include "tensor/host_convert.hpp"
#include "tensor/internal.hpp"
#include "tensor/threefry.hpp"

namespace ravel {

using namespace detail;

namespace {
// An explicit device is checked now, so a typo fails where it is written, not at realization.
Device pick(const std::optional<Device>& dev) {
  if (!dev) return engine().default_device();
  engine().check_device(*dev);
  return *dev;
}

// Negative sizes are a ValueError here (the creation API's contract); an element count or byte
// size that overflows int64 a ShapeError naming the shape (Note [Checked sizes]).
int64_t creation_numel(const Shape& shape, const char* op, DType dtype) {
  check_rank(shape.size(), op);
  for (int64_t s : shape) RAVEL_CHECK(s >= 0, ValueError, op, ": expected sizes >= 0, got shape ", shape_str(shape));
  checked_bytes(shape, static_cast<int64_t>(dtype_size(dtype)), op);
  return checked_numel(shape, op);
}
// Note [Host memory]: ranges and random numbers are made on the host (architecture decision 8)
// and host data is staged before upload, so creation allocates host memory proportional to the
// tensor. A request larger than the machine's physical memory is refused before anything is
// allocated (overcommit would let it "succeed" and the OOM killer end the process later), and a
// std::bad_alloc (e.g. under ulimit -v) becomes an OutOfMemoryError naming the op, the shape,
// the bytes and the device, like a device allocation that fails.
uint64_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : UINT64_MAX;
}

[[noreturn]] void host_oom(const char* op, const Shape& shape, DType dtype, const Device& device, uint64_t bytes,
                           const char* why) {
  throw OutOfMemoryError(concat(op, ": cannot allocate ", bytes, " bytes of host memory to make a tensor of shape ",
                                shape_str(shape), " and dtype ", dtype_name(dtype), " for ", device.str(), " (", why, ")"));
}

// Runs `make` (which allocates about `host_bytes` on the host) under Note [Host memory].
template <class F>
Tensor on_host(const char* op, const Shape& shape, DType dtype, const Device& device, double host_bytes, F&& make) {
  const uint64_t phys = physical_memory();
  if (host_bytes > static_cast<double>(phys))
    host_oom(op, shape, dtype, device, static_cast<uint64_t>(host_bytes),
             concat("more than the ", phys, " bytes of physical memory").c_str());
  try {
    return make();
  } catch (const std::bad_alloc&) {
    host_oom(op, shape, dtype, device, static_cast<uint64_t>(host_bytes), "std::bad_alloc");
  }
}

// Host-made values (ranges, random numbers) are converted to their dtype on the host, so the
// device holds the final dtype and no cast runs each time they are read.
Tensor from_doubles(const std::vector<double>& v, Shape shape, DType dtype, const std::optional<Device>& dev) {
  if (dtype == DType::F64) return Tensor::from_vector(v, std::move(shape), dev);
  const std::vector<unsigned char> bytes = host_convert_doubles(v, dtype);  // the ABI's CAST from f64
  return Tensor::from_data(bytes.data(), dtype, std::move(shape), dev);
}
}  // namespace

Tensor Tensor::from_data(const void* data, DType dtype, Shape shape, std::optional<Device> dev) {
  // Checked here, at the API: a bad dtype or a null pointer failed later inside the plugin, in
  // the plugin's words (or read address 0).
  const auto code = static_cast<int>(dtype);
  RAVEL_CHECK(code >= 0 && code < kDTypeCount, DTypeError, "from_data: dtype code ", code,
              " is not a Ravel dtype (expected one of bool, uint8, int32, int64, float32, float64)");
  int64_t n = creation_numel(shape, "from_data", dtype);
  RAVEL_CHECK(data != nullptr || n == 0, ValueError, "from_data: data is a null pointer for shape ", shape_str(shape),
              " (", n, " elements of ", dtype_name(dtype), "); pass the address of the values");
  Device device = pick(dev);
  uint64_t bytes = static_cast<uint64_t>(n) * dtype_size(dtype);  // fits: checked above
  std::shared_ptr<DeviceBuffer> buffer;
  if (dtype == DType::Bool) {
    // A bool is stored as the byte 0 or 1, whatever else the caller's bytes held.
    on_host("from_data", shape, dtype, device, static_cast<double>(bytes), [&] {
      std::vector<uint8_t> norm(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) norm[i] = static_cast<const uint8_t*>(data)[i] != 0;
      buffer = engine().upload(device, norm.data(), bytes);
      return Tensor();
    });
  } else {
    buffer = engine().upload(device, data, bytes);  // a device that cannot hold it: OutOfMemoryError
  }
  return Tensor(make_buffer_node(dtype, std::move(shape), device, std::move(buffer)));
}

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& data, Shape shape, std::optional<Device> dev) {
  int64_t n = creation_numel(shape, "from_vector", dtype_v<T>);
  RAVEL_CHECK(static_cast<int64_t>(data.size()) == n, ShapeError, "from_vector: shape ", shape_str(shape),
              " needs ", n, " elements, got ", data.size());
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(data.begin(), data.end());  // vector<bool> is packed
    return from_data(bytes.data(), DType::Bool, std::move(shape), dev);
  } else {
    return from_data(data.data(), dtype_v<T>, std::move(shape), dev);
  }
}
template Tensor Tensor::from_vector(const std::vector<bool>&, Shape, std::optional<Device>);
template Tensor Tensor::from_vector(const std::vector<uint8_t>&, Shape, std::optional<Device>);
template Tensor Tensor::from_vector(const std::vector<int32_t>&, Shape, std::optional<Device>);
template Tensor Tensor::from_vector(const std::vector<int64_t>&, Shape, std::optional<Device>);
template Tensor Tensor::from_vector(const std::vector<float>&, Shape, std::optional<Device>);
template Tensor Tensor::from_vector(const std::vector<double>&, Shape, std::optional<Device>);
template Tensor Tensor::from_vector(const std::vector<int8_t>&, Shape, std::optional<Device>);
template Tensor Tensor::from_vector(const std::vector<int16_t>&, Shape, std::optional<Device>);
template Tensor Tensor::from_vector(const std::vector<uint16_t>&, Shape, std::optional<Device>);
template Tensor Tensor::from_vector(const std::vector<uint32_t>&, Shape, std::optional<Device>);
template Tensor Tensor::from_vector(const std::vector<uint64_t>&, Shape, std::optional<Device>);
template Tensor Tensor::from_vector(const std::vector<Float16>&, Shape, std::optional<Device>);
template Tensor Tensor::from_vector(const std::vector<BFloat16>&, Shape, std::optional<Device>);

Tensor Tensor::scalar(double value, DType dtype, std::optional<Device> dev) {
  return make_scalar(value, dtype, pick(dev));
}

Tensor Tensor::full(Shape shape, double value, DType dtype, std::optional<Device> dev) {
  creation_numel(shape, "full", dtype);
  Tensor s = scalar(value, dtype, dev);
  return s.reshape(Shape(shape.size(), 1)).expand(shape);
}
Tensor Tensor::zeros(Shape shape, DType dtype, std::optional<Device> dev) { return full(std::move(shape), 0, dtype, dev); }
Tensor Tensor::ones(Shape shape, DType dtype, std::optional<Device> dev) { return full(std::move(shape), 1, dtype, dev); }
Tensor Tensor::full_like(const Tensor& t, double value) { return full(t.shape(), value, t.dtype(), t.device()); }
Tensor Tensor::zeros_like(const Tensor& t) { return full_like(t, 0); }
Tensor Tensor::ones_like(const Tensor& t) { return full_like(t, 1); }

Tensor Tensor::arange(double start, double stop, double step, std::optional<DType> dtype, std::optional<Device> dev) {
  RAVEL_CHECK(step != 0 && std::isfinite(step) && std::isfinite(start) && std::isfinite(stop), ValueError,
              "arange: expected finite start/stop and a finite nonzero step, got (", start, ", ", stop, ", ", step, ")");
  auto integral = [](double v) { return v == std::trunc(v); };
  DType t = dtype ? *dtype : (integral(start) && integral(stop) && integral(step) ? DType::I64 : DType::F32);
  const double count = std::max(0.0, std::ceil((stop - start) / step));
  RAVEL_CHECK(count < 9.2e18, ShapeError, "arange(", start, ", ", stop, ", ", step, "): ", count,
              " elements do not fit in int64 (Note [Checked sizes])");
  const int64_t n = static_cast<int64_t>(count);
  const Shape shape{n};
  creation_numel(shape, "arange", t);
  // Computed on the host in f64 (exact for integers below 2^53) and uploaded once.
  return on_host("arange", shape, t, pick(dev), count * (8.0 + dtype_size(t)), [&] {
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = start + static_cast<double>(i) * step;
    return from_doubles(v, shape, t, dev);
  });
}
Tensor Tensor::arange(int64_t stop) { return arange(0, static_cast<double>(stop)); }

Tensor Tensor::linspace(double start, double stop, int64_t n, DType dtype, std::optional<Device> dev) {
  RAVEL_CHECK(n >= 0, ValueError, "linspace: expected n >= 0, got ", n);
  creation_numel({n}, "linspace", dtype);
  // numpy.linspace: start + i * (stop - start) / (n - 1), and the last value is exactly stop.
  return on_host("linspace", {n}, dtype, pick(dev), static_cast<double>(n) * (8.0 + dtype_size(dtype)), [&] {
    std::vector<double> v(static_cast<size_t>(n));
    double step = n > 1 ? (stop - start) / static_cast<double>(n - 1) : 0.0;
    for (int64_t i = 0; i < n; ++i) v[i] = start + static_cast<double>(i) * step;
    if (n > 1) v[n - 1] = stop;
    return from_doubles(v, {n}, dtype, dev);
  });
}

Tensor Tensor::eye(int64_t n, int64_t m, int64_t k, DType dtype, std::optional<Device> dev) {
  RAVEL_CHECK(n >= 0 && m >= 0, ValueError, "eye: expected n, m >= 0, got ", n, ", ", m);
  creation_numel({n, m}, "eye", dtype);  // before the ranges are made on the host
  // numpy.eye(N, M, k): ones where column == row + k (k > 0 above the diagonal, k < 0 below).
  Tensor rows = arange(0, static_cast<double>(n), 1, DType::I64, dev).reshape({n, 1});
  Tensor cols = arange(0, static_cast<double>(m), 1, DType::I64, dev).reshape({1, m});
  return rows.add(full({}, static_cast<double>(k), DType::I64, dev)).eq(cols).cast(dtype);
}

Tensor Tensor::eye(int64_t n, DType dtype, std::optional<Device> dev) {
  RAVEL_CHECK(n >= 0, ValueError, "eye: expected n >= 0, got ", n);
  if (n == 0) return zeros({0, 0}, dtype, dev);
  int64_t cells = 0;  // the construction below views n * (n + 1) elements
  RAVEL_CHECK(n < INT64_MAX && !__builtin_mul_overflow(n, n + 1, &cells), ShapeError, "eye(", n,
              "): shape [", n, ", ", n, "] has more elements than fit in int64 (at most 2^63 - 1)");
  // Tensorken's construction: [1] padded to [1, 0, ..., 0] (n+1 long), repeated n times and
  // flattened, then cut to n*n: the 1s land every n+1 elements, i.e. on the diagonal.
  return scalar(1, dtype, dev)
      .reshape({1})
      .pad({{0, n}})
      .expand({n, n + 1})
      .reshape({cells})
      .shrink({{0, n * n}})
      .reshape({n, n});
}

Tensor Tensor::rand(Shape shape, uint64_t seed, DType dtype, std::optional<Device> dev) {
  RAVEL_CHECK(is_float(dtype), DTypeError, "rand: expected a float dtype, got ", dtype_name(dtype));
  int64_t n = creation_numel(shape, "rand", dtype);
  return on_host("rand", shape, dtype, pick(dev), static_cast<double>(n) * (8.0 + dtype_size(dtype)), [&] {
    std::vector<double> v = uniform_threefry(seed, n, dtype == DType::F64);
    return from_doubles(v, shape, dtype, dev);
  });
}

Tensor Tensor::randn(Shape shape, uint64_t seed, DType dtype, std::optional<Device> dev) {
  RAVEL_CHECK(is_float(dtype), DTypeError, "randn: expected a float dtype, got ", dtype_name(dtype));
  int64_t n = creation_numel(shape, "randn", dtype);
  return on_host("randn", shape, dtype, pick(dev), static_cast<double>(n) * (24.0 + dtype_size(dtype)), [&] {
    // Box-Muller over pairs of uniforms; 1 - u keeps the log's argument in (0, 1].
    std::vector<double> u = uniform_threefry(seed, 2 * n, true);
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      v[i] = std::sqrt(-2.0 * std::log(1.0 - u[2 * i])) * std::cos(2.0 * M_PI * u[2 * i + 1]);
    return from_doubles(v, shape, dtype, dev);
  });
}

}  // namespace ravel
