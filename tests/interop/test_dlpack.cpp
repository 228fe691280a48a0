// DLPack export and import on the oneTBB CPU backend: fields, strides of every kind of view,
// zero copies (shared addresses, and writes by the owner seen through Ravel), ownership and
// lifetimes (deleters called exactly once, at the right time), and typed errors. The peer test
// with PyTorch and NumPy is torch_peer.py.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <vector>

#include "ravel/dlpack.hpp"
#include "ravel/ravel.hpp"

using ravel::DType;
using ravel::Tensor;
namespace dl = ravel::dlpack;

namespace {

// Reads element `index` (row-major over the shape) through a DLTensor's strides.
template <class T>
std::vector<T> read_strided(const dl::DLTensor& t) {
  int64_t n = 1;
  for (int d = 0; d < t.ndim; ++d) n *= t.shape[d];
  std::vector<T> out;
  std::vector<int64_t> idx(static_cast<size_t>(t.ndim), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t at = 0;
    for (int d = 0; d < t.ndim; ++d) at += idx[static_cast<size_t>(d)] * t.strides[d];
    T v;
    std::memcpy(&v, static_cast<const char*>(t.data) + t.byte_offset + at * static_cast<int64_t>(sizeof(T)), sizeof v);
    out.push_back(v);
    for (int d = t.ndim; d-- > 0;)
      if (++idx[static_cast<size_t>(d)] < t.shape[d]) break;
      else idx[static_cast<size_t>(d)] = 0;
  }
  return out;
}

// A producer of our own: memory we own and mutate, with a deleter that counts its calls.
struct Producer {
  std::vector<double> memory;
  std::vector<int64_t> shape, strides;
  int deleted = 0;
  dl::DLManagedTensorVersioned managed{};

  Producer(std::vector<double> m, std::vector<int64_t> sh, std::vector<int64_t> st)
      : memory(std::move(m)), shape(std::move(sh)), strides(std::move(st)) {
    managed.version = {1, 0};
    managed.manager_ctx = this;
    managed.deleter = [](dl::DLManagedTensorVersioned* self) { ++static_cast<Producer*>(self->manager_ctx)->deleted; };
    managed.dl_tensor = {memory.data(), {dl::kDLCPU, 0}, static_cast<int32_t>(shape.size()), {dl::kDLFloat, 64, 1},
                         shape.data(), strides.empty() ? nullptr : strides.data(), 0};
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(export_contiguous_without_copying) {
  Tensor t = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  dl::DLManagedTensorVersioned* m = ravel::to_dlpack_versioned(t);
  BOOST_TEST((m->version.major == 1u && m->version.minor == dl::kMinorVersion));
  BOOST_TEST(m->flags == dl::kFlagReadOnly);  // Ravel's buffers are immutable; nothing was copied
  const dl::DLTensor& d = m->dl_tensor;
  BOOST_TEST((d.device.device_type == dl::kDLCPU && d.device.device_id == 0));
  BOOST_TEST((d.dtype.code == dl::kDLFloat && d.dtype.bits == 32 && d.dtype.lanes == 1));
  BOOST_TEST_REQUIRE(d.ndim == 2);
  BOOST_TEST((d.shape[0] == 2 && d.shape[1] == 3 && d.strides[0] == 3 && d.strides[1] == 1));
  BOOST_TEST(read_strided<float>(d) == (std::vector<float>{1, 2, 3, 4, 5, 6}));
  // The same buffer again: one address, so no copy was made for either export.
  dl::DLManagedTensor* u = ravel::to_dlpack(t);
  BOOST_TEST(u->dl_tensor.data == d.data);
  u->deleter(u);
  m->deleter(m);
}

BOOST_AUTO_TEST_CASE(export_views_keeps_their_strides) {
  Tensor base = Tensor::arange(12).cast(DType::I32).reshape({3, 4});  // 0..11
  dl::DLManagedTensorVersioned* whole = ravel::to_dlpack_versioned(base);
  struct Case { Tensor view; std::vector<int64_t> strides; std::vector<int32_t> values; };
  const Case cases[] = {
      {base.transpose(), {1, 4}, {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}},
      {base.flip(1), {4, -1}, {3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8}},
      {base.slice(1, 1, 4, 2), {4, 2}, {1, 3, 5, 7, 9, 11}},
      {base.at(1).unsqueeze(0).expand({2, 4}), {0, 1}, {4, 5, 6, 7, 4, 5, 6, 7}},
  };
  for (const auto& c : cases) {
    dl::DLManagedTensorVersioned* m = ravel::to_dlpack_versioned(c.view);
    const dl::DLTensor& d = m->dl_tensor;
    BOOST_TEST(std::vector<int64_t>(d.strides, d.strides + d.ndim) == c.strides);
    BOOST_TEST(read_strided<int32_t>(d) == c.values);
    BOOST_TEST(m->flags == dl::kFlagReadOnly);
    // Inside the base's memory: a view, not a copy.
    const auto* lo = static_cast<const char*>(whole->dl_tensor.data);
    BOOST_TEST((static_cast<const char*>(d.data) >= lo && static_cast<const char*>(d.data) < lo + 48));
    m->deleter(m);
  }
  whole->deleter(whole);
  // A constant is one element seen through a broadcast: exported as such, with zero strides.
  dl::DLManagedTensorVersioned* k = ravel::to_dlpack_versioned(Tensor::full({2, 3}, 1.5, DType::F64));
  BOOST_TEST(std::vector<int64_t>(k->dl_tensor.strides, k->dl_tensor.strides + 2) == (std::vector<int64_t>{0, 0}));
  BOOST_TEST(read_strided<double>(k->dl_tensor) == std::vector<double>(6, 1.5));
  k->deleter(k);
  // Padding has no strided form: the values are copied, and the flag says so.
  dl::DLManagedTensorVersioned* p = ravel::to_dlpack_versioned(Tensor::from_vector<float>({1, 2}, {2}).pad({{1, 0}}));
  BOOST_TEST(p->flags == (dl::kFlagReadOnly | dl::kFlagIsCopied));
  BOOST_TEST(read_strided<float>(p->dl_tensor) == (std::vector<float>{0, 1, 2}));
  p->deleter(p);
}

BOOST_AUTO_TEST_CASE(export_outlives_every_tensor) {
  dl::DLManagedTensorVersioned* m;
  {
    Tensor t = (Tensor::from_vector<double>({1, 2, 3}, {3}) * 2.0);  // realized by the export
    m = ravel::to_dlpack_versioned(t);
  }
  ravel::Runtime::reset({});  // even the runtime that made it is gone
  BOOST_TEST(read_strided<double>(m->dl_tensor) == (std::vector<double>{2, 4, 6}));  // ASan: no use after free
  m->deleter(m);
  dl::DLManagedTensor* s = ravel::to_dlpack(Tensor::scalar(7, DType::I64));  // 0-d
  BOOST_TEST((s->dl_tensor.ndim == 0 && *static_cast<const int64_t*>(s->dl_tensor.data) == 7));
  s->deleter(s);
}

BOOST_AUTO_TEST_CASE(import_shares_memory_and_releases_once) {
  // A 3x2 view with strides (1, 3) over 6 doubles: the transpose of [[0,1,2],[3,4,5]].
  Producer p({0, 1, 2, 3, 4, 5}, {3, 2}, {1, 3});
  {
    Tensor t = ravel::from_dlpack(&p.managed);
    BOOST_TEST((t.shape() == ravel::Shape{3, 2} && t.dtype() == DType::F64));
    BOOST_TEST(t.strides() == (std::vector<int64_t>{1, 3}));  // kept as a view
    Tensor twice = t * 2.0;
    p.memory[5] = 50;  // the owner writes before Ravel reads: Ravel sees it, so nothing was copied
    BOOST_TEST(t.to_vector<double>() == (std::vector<double>{0, 3, 1, 4, 2, 50}));
    BOOST_TEST(twice.to_vector<double>() == (std::vector<double>{0, 6, 2, 8, 4, 100}));
    Tensor row = t.at(2);  // a view keeps the memory alive after t goes
    t = Tensor();
    BOOST_TEST(p.deleted == 0);
    BOOST_TEST(row.to_vector<double>() == (std::vector<double>{2, 50}));
  }
  BOOST_TEST(p.deleted == 1);  // exactly once, when the last tensor on it went
}

BOOST_AUTO_TEST_CASE(import_negative_and_zero_strides) {
  Producer p({0, 1, 2, 3}, {2, 3}, {0, -1});  // every row reads memory[2], [1], [0]
  p.managed.dl_tensor.data = p.memory.data() + 2;
  {
    Tensor t = ravel::from_dlpack(&p.managed);
    BOOST_TEST(t.to_vector<double>() == (std::vector<double>{2, 1, 0, 2, 1, 0}));
    BOOST_TEST(t.sum().item<double>() == 6.0);
  }
  BOOST_TEST(p.deleted == 1);
  Producer q({9, 8, 7, 6}, {4}, {});  // NULL strides: compact row-major
  q.managed.dl_tensor.byte_offset = 8;
  q.shape[0] = 3;
  BOOST_TEST(ravel::from_dlpack(&q.managed).to_vector<double>() == (std::vector<double>{8, 7, 6}));
  BOOST_TEST(q.deleted == 1);
  // Memory aligned only to its element (not to a cache line, as the plugin's own buffers are)
  // feeds every kind of kernel, the GEMM contraction included.
  Producer m({0, 1, 2, 3, 4, 5, 6}, {2, 3}, {});
  m.managed.dl_tensor.data = m.memory.data() + 1;  // [[1, 2, 3], [4, 5, 6]]
  {
    Tensor a = ravel::from_dlpack(&m.managed);
    BOOST_TEST(a.matmul(a.transpose()).to_vector<double>() == (std::vector<double>{14, 32, 32, 77}));
    BOOST_TEST(a.cast(DType::F32).sum(1).to_vector<float>() == (std::vector<float>{6, 15}));
  }
  BOOST_TEST(m.deleted == 1);
}

BOOST_AUTO_TEST_CASE(import_copies_what_it_cannot_share) {
  // Misaligned doubles cannot be wrapped: copied, and released at once.
  std::vector<char> raw(3 * sizeof(double) + 1);
  const double v[3] = {1.5, -2.5, 3.5};
  std::memcpy(raw.data() + 1, v, sizeof v);
  Producer p({}, {3}, {1});
  p.managed.dl_tensor.data = raw.data() + 1;
  Tensor t = ravel::from_dlpack(&p.managed);
  BOOST_TEST(p.deleted == 1);
  BOOST_TEST(t.to_vector<double>() == (std::vector<double>{1.5, -2.5, 3.5}));
  Producer e({}, {0, 4}, {});  // empty
  BOOST_TEST((ravel::from_dlpack(&e.managed).shape() == ravel::Shape{0, 4} && e.deleted == 1));
}

BOOST_AUTO_TEST_CASE(round_trips) {
  for (DType dt : {DType::Bool, DType::U8, DType::I32, DType::I64, DType::F32, DType::F64}) {
    Tensor t = Tensor::arange(0, 6, 1, DType::F64).reshape({2, 3}).cast(dt).transpose();
    Tensor back = ravel::from_dlpack(ravel::to_dlpack_versioned(t));
    BOOST_TEST((back.dtype() == dt && back.shape() == t.shape()));
    BOOST_TEST(back.to_vector<double>() == t.to_vector<double>());
    Tensor legacy = ravel::from_dlpack(ravel::to_dlpack(t));
    BOOST_TEST(legacy.to_vector<double>() == t.to_vector<double>());
  }
}

// The 1.7 dtypes in DLPack's terms (dlpack.h: kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4,
// with the width in bits), exported without a copy and imported back bit for bit. Contiguous
// tensors.
BOOST_AUTO_TEST_CASE(half_and_narrow_integer_dtypes) {
  const struct {
    Tensor t;
    uint8_t code, bits;
  } rows[] = {
      {Tensor::from_vector(std::vector<ravel::Float16>{ravel::Float16(1.5f), ravel::Float16(-2.0f)}, {2}), 2, 16},
      {Tensor::from_vector(std::vector<ravel::BFloat16>{ravel::BFloat16(1.5f), ravel::BFloat16(-2.0f)}, {2}), 4, 16},
      {Tensor::from_vector(std::vector<int8_t>{-128, 7}, {2}), 0, 8},
      {Tensor::from_vector(std::vector<int16_t>{-300, 7}, {2}), 0, 16},
      {Tensor::from_vector(std::vector<uint16_t>{65535, 7}, {2}), 1, 16},
      {Tensor::from_vector(std::vector<uint32_t>{4000000000u, 7}, {2}), 1, 32},
      {Tensor::from_vector(std::vector<uint64_t>{~uint64_t{0}, 7}, {2}), 1, 64},
  };
  for (const auto& r : rows) {
    BOOST_TEST_CONTEXT(ravel::dtype_name(r.t.dtype())) {
      dl::DLManagedTensorVersioned* m = ravel::to_dlpack_versioned(r.t);
      BOOST_TEST((m->dl_tensor.dtype.code == r.code && m->dl_tensor.dtype.bits == r.bits && m->dl_tensor.dtype.lanes == 1));
      Tensor back = ravel::from_dlpack(m);
      BOOST_TEST((back.dtype() == r.t.dtype()));
      BOOST_TEST(back.to_vector<double>() == r.t.to_vector<double>());
    }
  }
  BOOST_TEST(rows[0].t.to_vector<double>() == (std::vector<double>{1.5, -2.0}));
  BOOST_TEST(rows[6].t.to_vector<double>()[0] == 18446744073709551616.0);
}

BOOST_AUTO_TEST_CASE(bad_imports_are_typed_errors_and_keep_ownership) {
  Producer p({1, 2}, {2}, {1});
  p.managed.dl_tensor.dtype = {dl::kDLFloat, 8, 1};  // fp8: no Ravel dtype (f16 has one since ABI 1.7)
  BOOST_CHECK_THROW(ravel::from_dlpack(&p.managed), ravel::DTypeError);
  p.managed.dl_tensor.dtype = {dl::kDLFloat, 64, 2};  // vector lanes
  BOOST_CHECK_THROW(ravel::from_dlpack(&p.managed), ravel::DTypeError);
  p.managed.dl_tensor.dtype = {dl::kDLFloat, 64, 1};
  p.managed.dl_tensor.device = {dl::kDLCUDA, 0};
  BOOST_CHECK_THROW(ravel::from_dlpack(&p.managed), ravel::DeviceError);
  p.managed.dl_tensor.device = {dl::kDLCPU, 0};
  p.managed.dl_tensor.ndim = 9;
  BOOST_CHECK_THROW(ravel::from_dlpack(&p.managed), ravel::ShapeError);
  BOOST_TEST(p.deleted == 0);  // every failure left the tensor with its owner...
  p.managed.dl_tensor.ndim = 1;
  p.managed.version = {2, 0};
  BOOST_CHECK_THROW(ravel::from_dlpack(&p.managed), ravel::ValueError);
  BOOST_TEST(p.deleted == 1);  // ...but an unknown major version, which the spec says to delete
  BOOST_CHECK_THROW(ravel::from_dlpack(static_cast<dl::DLManagedTensorVersioned*>(nullptr)), ravel::ValueError);
  BOOST_CHECK_THROW(ravel::to_dlpack(Tensor()), ravel::ValueError);
}

// Hostile producers: sizes, strides and byte_offset from the producer are checked before any
// arithmetic on them, and every refusal leaves the managed tensor with its owner (no deleter call:
// a caller following the ownership rule calls it itself, so a call here would be a double free).
BOOST_AUTO_TEST_CASE(hostile_sizes_strides_and_offsets_keep_ownership) {
  constexpr int64_t k39 = int64_t{1} << 39, k32 = int64_t{1} << 32;
  struct Case { std::vector<int64_t> shape, strides; uint64_t byte_offset; const char* says; };
  const uint64_t near_top = ~uint64_t{0} - 7;  // data + this wraps to 8 bytes before data
  const Case cases[] = {
      {{k32, k32}, {}, 0, "2^40 or more elements"},        // the product wraps to exactly 0 in int64
      {{k32, k32, 4}, {}, 0, "2^40 or more elements"},
      {{k39, k39, 0}, {}, 0, "2^40 or more elements"},     // empty, but no more plausible
      {{int64_t{1} << 40}, {1}, 0, "outside [0, 2^40)"},
      {{-2}, {1}, 0, "outside [0, 2^40)"},
      {{3, 1 << 20}, {k39, 1}, 0, "reaches 2^40"},         // (3-1) * 2^39 reaches 2^40
      {{1 << 30}, {k39}, 0, "reaches 2^40"},               // (size-1)*stride overflows the bound
      {{2}, {int64_t{1} << 62}, 0, "outside (-2^40, 2^40)"},
      {{2}, {1}, uint64_t{1} << 50, "byte_offset"},
      {{2}, {1}, near_top, "byte_offset"},
  };
  for (const Case& c : cases) {
    Producer p({1, 2}, c.shape, c.strides);
    p.managed.dl_tensor.byte_offset = c.byte_offset;
    try {
      Tensor t = ravel::from_dlpack(&p.managed);
      BOOST_ERROR("accepted shape of rank " << c.shape.size() << ", byte_offset " << c.byte_offset);
    } catch (const ravel::Error& e) {
      BOOST_TEST_MESSAGE(e.what());
      BOOST_TEST(std::string(e.what()).find(c.says) != std::string::npos, e.what() << " lacks " << c.says);
    }
    BOOST_TEST(p.deleted == 0);
  }
  // A data pointer near the top of the address space with a negative stride reaching below 0.
  Producer low({1, 2}, {4}, {-4});
  low.managed.dl_tensor.data = reinterpret_cast<void*>(uintptr_t{8});
  BOOST_CHECK_THROW(ravel::from_dlpack(&low.managed), ravel::ValueError);
  BOOST_TEST(low.deleted == 0);
}

// An empty tensor is built before the deleter runs, and a valid byte_offset is still honoured.
BOOST_AUTO_TEST_CASE(empty_and_offset_imports_release_once) {
  {
    Producer p({}, {0, 3}, {});
    Tensor t = ravel::from_dlpack(&p.managed);
    BOOST_TEST((t.shape() == ravel::Shape{0, 3}));
    BOOST_TEST(p.deleted == 1);
  }
  Producer p({1, 2, 3, 4}, {2}, {1});
  p.managed.dl_tensor.byte_offset = 2 * sizeof(double);
  {
    Tensor t = ravel::from_dlpack(&p.managed);
    BOOST_TEST(t.to_vector<double>() == (std::vector<double>{3, 4}));
  }
  BOOST_TEST(p.deleted == 1);
}

// A producer's bool may hold any non-zero byte for true; Ravel's kernels rely on 0 or 1, so host
// bools are copied and normalised (fuzz_dlpack found 0x40 shared and read as 64 by a cast).
BOOST_AUTO_TEST_CASE(host_bools_are_normalised_on_import) {
  uint8_t bytes[3] = {0, 0x40, 2};
  int64_t shape[1] = {3};
  int deleted = 0;
  dl::DLManagedTensorVersioned m{};
  m.version = {1, 0};
  m.manager_ctx = &deleted;
  m.deleter = [](dl::DLManagedTensorVersioned* self) { ++*static_cast<int*>(self->manager_ctx); };
  m.dl_tensor = {bytes, {dl::kDLCPU, 0}, 1, {dl::kDLBool, 8, 1}, shape, nullptr, 0};
  {
    Tensor t = ravel::from_dlpack(&m);
    BOOST_TEST(t.cast(DType::I64).to_vector<int64_t>() == (std::vector<int64_t>{0, 1, 1}));
    BOOST_TEST(t.sum().item<int64_t>() == 2);
  }
  BOOST_TEST(deleted == 1);
}
