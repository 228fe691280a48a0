// Parameter files (docs/nn.md). A path ending in ".npz" is a NumPy archive (ravel/io.hpp): one
// array per parameter, keyed by its name, so `np.load("model.npz")["layers.0.weight"]` opens it.
// Any other path gets Ravel's own format, kept for files written before .npz existed:
//   "RAVELPAR" (8 bytes), u32 version = 1, u32 count, then per parameter:
//   u32 name length, name bytes, u8 dtype (rvl_dtype), u8 rank, rank x i64 shape, data
//   (row-major, little-endian, numel x dtype size).
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "ravel/io.hpp"
#include "ravel/nn.hpp"

namespace ravel::nn {

namespace {
constexpr char kMagic[8] = {'R', 'A', 'V', 'E', 'L', 'P', 'A', 'R'};

template <class T>
void put(std::ofstream& out, T v) {
  out.write(reinterpret_cast<const char*>(&v), sizeof v);
}
// Reads the file front to back; a short read names the byte it stopped at, what it was reading
// and how many bytes that needed, against the file's size.
struct Reader {
  std::ifstream in;
  std::string path;
  int64_t size = 0;

  explicit Reader(const std::string& p) : path(p) {
    // Checked before opening: a FIFO would block the open itself, /dev/zero would never end, and
    // a directory opens but fails at the first read with std::ios_failure.
    std::error_code ec;
    const auto st = std::filesystem::status(p, ec);
    RAVEL_CHECK(!ec, ValueError, "cannot read parameter file ", path, ": ", ec.message());
    RAVEL_CHECK(std::filesystem::is_regular_file(st), ValueError, "parameter file ", path, " is ",
                std::filesystem::is_directory(st) ? "a directory" : "not a regular file (a FIFO, device or socket)",
                "; expected a file written by save_parameters");
    in.open(p, std::ios::binary);
    RAVEL_CHECK(in.good(), ValueError, "cannot read parameter file ", path);
    in.seekg(0, std::ios::end);
    size = static_cast<int64_t>(in.tellg());
    in.seekg(0);
  }
  void bytes(char* dst, int64_t n, const std::string& what) {
    const int64_t at = static_cast<int64_t>(in.tellg());
    in.read(dst, static_cast<std::streamsize>(n));
    RAVEL_CHECK(in.good(), ValueError, "parameter file ", path, " is truncated at byte ", at, ": expected ", n,
                " bytes of ", what, ", the file has ", size, " bytes (", std::max<int64_t>(0, size - at), " left)");
  }
  template <class T>
  T get(const std::string& what) {
    T v{};
    bytes(reinterpret_cast<char*>(&v), sizeof v, what);
    return v;
  }
};

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  std::vector<char> data;
};
}  // namespace

namespace {
// What a parameter file holds: the parameters, then the buffers (running statistics), which are
// part of the trained model although no optimizer updates them (torch's state_dict has both).
std::vector<NamedParameter> saved_state(Module& module) {
  std::vector<NamedParameter> all = module.named_parameters();
  for (auto& b : module.named_buffers()) all.push_back(b);
  return all;
}

bool ends_with_npz(const std::string& path) {
  return path.size() >= 4 && path.compare(path.size() - 4, 4, ".npz") == 0;
}

// An .npz holds parameters by name: every parameter of the module must be there with its dtype
// and shape, and nothing else (a key the module lacks is a different model, not a file to trust).
void load_npz_parameters(Module& module, const std::string& path) {
  NamedTensors arrays = load_npz(path);
  auto params = saved_state(module);
  for (const auto& [key, t] : arrays) {
    const bool known = std::any_of(params.begin(), params.end(), [&k = key](const auto& p) { return p.first == k; });
    RAVEL_CHECK(known, ValueError, path, " holds an array '", key, "' that is not a parameter of the module");
  }
  std::vector<Tensor> values;
  for (const auto& [name, p] : params) {
    auto it = std::find_if(arrays.begin(), arrays.end(), [&n = name](const auto& a) { return a.first == n; });
    RAVEL_CHECK(it != arrays.end(), ValueError, path, " has no array for parameter ", name);
    RAVEL_CHECK(it->second.dtype() == p->dtype() && it->second.shape() == p->shape(), ValueError, path,
                ": parameter ", name, " is ", dtype_name(it->second.dtype()), " ", shape_str(it->second.shape()),
                ", the module expects ", dtype_name(p->dtype()), " ", shape_str(p->shape()));
    values.push_back(it->second);
  }
  for (size_t i = 0; i < params.size(); ++i) params[i].second->assign(values[i].to(params[i].second->device()));
}
}  // namespace

void save_parameters(Module& module, const std::string& path) {
  if (ends_with_npz(path)) {
    NamedTensors arrays;
    for (auto& [name, p] : saved_state(module)) arrays.emplace_back(name, *p);
    save_npz(path, arrays);
    return;
  }
  std::ofstream out(path, std::ios::binary);
  RAVEL_CHECK(out.good(), ValueError, "cannot write parameter file ", path);
  auto params = saved_state(module);
  out.write(kMagic, sizeof kMagic);
  put<uint32_t>(out, 1);
  put<uint32_t>(out, static_cast<uint32_t>(params.size()));
  for (auto& [name, p] : params) {
    put<uint32_t>(out, static_cast<uint32_t>(name.size()));
    out.write(name.data(), static_cast<std::streamsize>(name.size()));
    put<uint8_t>(out, static_cast<uint8_t>(p->dtype()));
    put<uint8_t>(out, static_cast<uint8_t>(p->ndim()));
    for (int64_t s : p->shape()) put<int64_t>(out, s);
    std::vector<char> bytes(static_cast<size_t>(p->numel() * dtype_size(p->dtype())));
    auto copy = [&](const auto& v) { if (true && !v.empty()) std::memcpy(bytes.data(), v.data(), v.size() * sizeof v[0]); };
    switch (p->dtype()) {  // to_vector in the tensor's own dtype: its bytes, in row-major order
      case DType::Bool: case DType::U8: copy(p->to_vector<uint8_t>()); break;
      case DType::I8: copy(p->to_vector<int8_t>()); break;
      case DType::I16: copy(p->to_vector<int16_t>()); break;
      case DType::U16: copy(p->to_vector<uint16_t>()); break;
      case DType::I32: copy(p->to_vector<int32_t>()); break;
      case DType::U32: copy(p->to_vector<uint32_t>()); break;
      case DType::I64: copy(p->to_vector<int64_t>()); break;
      case DType::U64: copy(p->to_vector<uint64_t>()); break;
      case DType::F16: copy(p->to_vector<Float16>()); break;
      case DType::BF16: copy(p->to_vector<BFloat16>()); break;
      case DType::F32: copy(p->to_vector<float>()); break;
      case DType::F64: copy(p->to_vector<double>()); break;
    }
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  RAVEL_CHECK(out.good(), ValueError, "writing parameter file ", path, " failed");
}

void load_parameters(Module& module, const std::string& path) {
  Reader r(path);
  char magic[8] = {};
  r.in.read(magic, sizeof magic);
  if (r.in.gcount() >= 4 && magic[0] == 'P' && magic[1] == 'K') return load_npz_parameters(module, path);  // a ZIP
  RAVEL_CHECK(r.in.good() && std::memcmp(magic, kMagic, sizeof kMagic) == 0, ValueError, path,
              " is not a parameter file (expected a .npz archive or the magic RAVELPAR)");
  uint32_t version = r.get<uint32_t>("the format version");
  RAVEL_CHECK(version == 1, ValueError, path, ": parameter format version ", version, ", expected 1");
  uint32_t count = r.get<uint32_t>("the parameter count");
  auto params = saved_state(module);
  RAVEL_CHECK(count == params.size(), ValueError, path, " holds ", count, " parameters, the module has ", params.size());
  std::vector<Entry> entries;
  for (uint32_t i = 0; i < count; ++i) {
    Entry e;
    const std::string which = "parameter " + std::to_string(i);
    uint32_t len = r.get<uint32_t>(which + "'s name length");
    RAVEL_CHECK(len < 4096, ValueError, path, ": ", which, " has a name of ", len,
                " bytes, expected fewer than 4096 (corrupt file?)");
    e.name.resize(len);
    r.bytes(e.name.data(), len, which + "'s name");
    uint8_t dt = r.get<uint8_t>(which + "'s dtype"), rank = r.get<uint8_t>(which + "'s rank");
    RAVEL_CHECK(dt < kDTypeCount && rank <= 8, ValueError, path, ": parameter ", e.name, " has dtype code ",
                int{dt}, " and rank ", int{rank}, ", expected a dtype code below ", kDTypeCount, " and rank <= 8");
    e.dtype = static_cast<DType>(dt);
    for (uint8_t d = 0; d < rank; ++d) {
      e.shape.push_back(r.get<int64_t>("the shape of parameter " + e.name));
      RAVEL_CHECK(e.shape.back() >= 0 && e.shape.back() < (int64_t{1} << 40), ValueError, path, ": parameter ",
                  e.name, " has size ", e.shape.back(), " on axis ", int{d}, ", expected 0 <= size < 2^40");
    }
    const auto& [name, p] = params[i];
    RAVEL_CHECK(e.name == name && e.dtype == p->dtype() && e.shape == p->shape(), ValueError, path, ": parameter ", i,
                " is ", e.name, " ", dtype_name(e.dtype), " ", shape_str(e.shape), ", the module expects ", name, " ",
                dtype_name(p->dtype()), " ", shape_str(p->shape()));
    // The size comes from the module's own (checked) shape: the file's is only known equal now,
    // and a product over up to 8 file sizes below 2^40 would overflow (fuzz_params found it).
    e.data.resize(static_cast<size_t>(p->numel() * static_cast<int64_t>(dtype_size(e.dtype))));
    r.bytes(e.data.data(), static_cast<int64_t>(e.data.size()), "the data of parameter " + e.name);
    entries.push_back(std::move(e));
  }
  // Bytes after the last parameter are a different or damaged file (a concatenation, a failed
  // rewrite), not padding: refused as a truncation is.
  const int64_t end = static_cast<int64_t>(r.in.tellg());
  RAVEL_CHECK(end == r.size, ValueError, "parameter file ", path, " has ", r.size - end,
              " trailing bytes after its last parameter (byte ", end, " of ", r.size,
              "); expected the file to end there (corrupt or concatenated file?)");
  for (size_t i = 0; i < entries.size(); ++i)
    params[i].second->assign(Tensor::from_data(entries[i].data.data(), entries[i].dtype, entries[i].shape, params[i].second->device()));
}

}  // namespace ravel::nn
