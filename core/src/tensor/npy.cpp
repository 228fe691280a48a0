// .npy and .npz files (ravel/io.hpp; the format is NumPy's NEP 1, "A simple file format for
// NumPy arrays"): magic "\x93NUMPY", a version byte pair, a header length (u16 for 1.0, u32 for
// 2.0 and 3.0), then a Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...)}
// padded with spaces to a multiple of 64 bytes and ended by '\n', then the raw data.
#include <algorithm>
#include <bit>
#include <cctype>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>

#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ravel/io.hpp"
#include "tensor/zip.hpp"

namespace ravel {

namespace {

constexpr char kMagic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

// Our dtype's descr as NumPy writes it (little-endian, '|' where byte order does not apply).
const char* descr_of(DType t) {
  switch (t) {
    case DType::Bool: return "|b1";
    case DType::U8: return "|u1";
    case DType::I32: return "<i4";
    case DType::I64: return "<i8";
    case DType::F32: return "<f4";
    case DType::F64: return "<f8";
    case DType::F16: return "<f2";
    case DType::I8: return "|i1";
    case DType::I16: return "<i2";
    case DType::U16: return "<u2";
    case DType::U32: return "<u4";
    case DType::U64: return "<u8";
    case DType::BF16: return "";  // NumPy has no bfloat16 (Note [bf16 in .npy])
  }
  return "";
}

// The whole of a regular file. Anything else is refused before a byte is read: a directory (a
// std::ios_failure before), a FIFO (blocks forever, or until a writer comes), /dev/zero or another
// device (never ends). O_NONBLOCK keeps even the open of a FIFO from waiting for a writer.
std::vector<char> read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  RAVEL_CHECK(fd >= 0, ValueError, "cannot open ", path, " for reading: ", std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st{};
  RAVEL_CHECK(::fstat(fd, &st) == 0, ValueError, "cannot read ", path, ": ", std::strerror(errno));
  RAVEL_CHECK(!S_ISDIR(st.st_mode), ValueError, path, " is a directory (expected a .npy or .npz file)");
  RAVEL_CHECK(S_ISREG(st.st_mode), ValueError, path, " is not a regular file but a ",
              S_ISFIFO(st.st_mode) ? "FIFO" : S_ISCHR(st.st_mode) ? "character device" : S_ISBLK(st.st_mode) ?
              "block device" : S_ISSOCK(st.st_mode) ? "socket" : "special file",
              " (expected a .npy or .npz file; its size must be known before reading)");
  // The size fstat gave bounds the read: a file that grows meanwhile is read up to that size.
  std::vector<char> bytes(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    RAVEL_CHECK(n >= 0, ValueError, "reading ", path, " failed: ", std::strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  bytes.resize(got);  // a file truncated meanwhile: the readers report what is missing
  return bytes;
}

void write_file(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  RAVEL_CHECK(out.good(), ValueError, "cannot open ", path, " for writing");
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  RAVEL_CHECK(out.good(), ValueError, "writing ", path, " failed");
}

// A parser for the header dict: the only Python syntax NumPy writes there (strings, True/False,
// tuples of integers). Unknown keys are ignored, as np.load does not ignore them but future
// versions may add some; missing required keys are errors.
struct Header {
  std::string descr;
  bool fortran = false;
  Shape shape;
};

struct HeaderParser {
  const std::string& text;
  const std::string& what;
  size_t i = 0;

  [[noreturn]] void fail(const std::string& why) const {
    throw ValueError(what + ": malformed .npy header (" + why + " at character " + std::to_string(i) + "): " + text);
  }
  void skip_space() {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  }
  bool accept(char ch) {
    skip_space();
    if (i < text.size() && text[i] == ch) return ++i, true;
    return false;
  }
  void expect(char ch) {
    if (!accept(ch)) fail(std::string("expected '") + ch + "'");
  }
  std::string string_literal() {
    skip_space();
    if (i >= text.size() || (text[i] != '\'' && text[i] != '"')) fail("expected a string");
    const char q = text[i++];
    const size_t start = i;
    while (i < text.size() && text[i] != q) ++i;
    if (i >= text.size()) fail("unterminated string");
    return text.substr(start, i++ - start);
  }
  int64_t integer() {
    skip_space();
    const size_t start = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    if (i == start || i - start > 15) fail("expected a non-negative integer below 10^15");
    int64_t v = std::stoll(text.substr(start, i - start));
    if (accept('L')) {}  // Python 2 long suffix, written by very old NumPy
    return v;
  }
  Header parse() {
    Header h;
    bool has_descr = false, has_order = false, has_shape = false;
    expect('{');
    while (!accept('}')) {
      const std::string key = string_literal();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (i < text.size() && text[i] == '[')
          throw DTypeError(what + ": structured dtypes (a descr list) are not supported: " + text);
        h.descr = string_literal(), has_descr = true;
      } else if (key == "fortran_order") {
        if (text.compare(i, 4, "True") == 0) h.fortran = true, i += 4;
        else if (text.compare(i, 5, "False") == 0) h.fortran = false, i += 5;
        else fail("fortran_order must be True or False");
        has_order = true;
      } else if (key == "shape") {
        expect('(');
        while (!accept(')')) {
          h.shape.push_back(integer());
          if (!accept(',')) { expect(')'); break; }
        }
        has_shape = true;
      } else {
        fail("unknown key '" + key + "'");
      }
      if (!accept(',')) { expect('}'); break; }
    }
    if (!has_descr || !has_order || !has_shape) fail("'descr', 'fortran_order' and 'shape' are all required");
    return h;
  }
};

// The descr's dtype and whether its bytes need swapping. DTypeError for what Ravel has no dtype for.
std::pair<DType, bool> dtype_of_descr(const std::string& descr, const std::string& what) {
  auto unsupported = [&]() -> DTypeError {
    return DTypeError(what + ": dtype '" + descr +
                      "' is not supported; Ravel reads bool (|b1), int8/uint8 (|i1, |u1), int16/uint16 (<i2, "
                      "<u2), int32/uint32 (<i4, <u4), int64/uint64 (<i8, <u8), float16 (<f2), float32 (<f4) and "
                      "float64 (<f8), in either byte order");
  };
  if (descr.size() < 3) throw unsupported();
  const char order = descr[0];
  const std::string code = descr.substr(1);
  if (order != '<' && order != '>' && order != '|' && order != '=') throw unsupported();
  DType t;
  if (code == "b1") t = DType::Bool;
  else if (code == "u1") t = DType::U8;
  else if (code == "i4") t = DType::I32;
  else if (code == "i8") t = DType::I64;
  else if (code == "f4") t = DType::F32;
  else if (code == "f8") t = DType::F64;
  else if (code == "f2") t = DType::F16;
  else if (code == "i1") t = DType::I8;
  else if (code == "i2") t = DType::I16;
  else if (code == "u2") t = DType::U16;
  else if (code == "u4") t = DType::U32;
  else if (code == "u8") t = DType::U64;
  else throw unsupported();
  return {t, order == '>' && dtype_size(t) > 1};  // '=' is native: this build is little-endian only
}

static_assert(std::endian::native == std::endian::little, "the .npy writer assumes a little-endian host");

}  // namespace

// Note [bf16 in .npy]
// NumPy has no bfloat16. ml_dtypes (JAX's) registers one whose arrays np.save writes with the
// descr '<V2' (two opaque bytes), which any other 2-byte void array also has, so a reader cannot
// know those bytes are bf16; torch.Tensor.numpy() refuses bf16 for the same reason. Ravel
// refuses too, in both directions, with a DTypeError that says what to do: cast to f32 (exact)
// before saving. The same holds for .npz, which is a zip of .npy members.
std::vector<char> to_npy_bytes(const Tensor& t) {
  RAVEL_CHECK(t.defined(), ValueError, "to_npy_bytes: the tensor is undefined");
  RAVEL_CHECK(t.dtype() != DType::BF16, DTypeError,
              "to_npy_bytes: a bf16 tensor has no .npy dtype (NumPy has no bfloat16; ml_dtypes' '<V2' cannot be "
              "told from other 2-byte data); cast it to f32 first, which is exact: t.cast(DType::F32)");
  std::string header = std::string("{'descr': '") + descr_of(t.dtype()) + "', 'fortran_order': False, 'shape': (";
  for (size_t d = 0; d < t.shape().size(); ++d)
    header += std::to_string(t.shape()[d]) + (t.shape().size() == 1 ? "," : d + 1 < t.shape().size() ? ", " : "");
  header += "), }";
  // Pad with spaces so that the data starts at a multiple of 64 bytes (NumPy >= 1.23 does the same).
  const size_t fixed = sizeof kMagic + 2 + 2;
  header.append((64 - (fixed + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::vector<char> out(kMagic, kMagic + sizeof kMagic);
  const bool v2 = header.size() > 0xFFFF;  // version 2.0 only when the header needs it
  out.push_back(v2 ? 2 : 1);
  out.push_back(0);
  const size_t hl = header.size();
  for (int b = 0; b < (v2 ? 4 : 2); ++b) out.push_back(static_cast<char>((hl >> (8 * b)) & 0xFF));
  out.insert(out.end(), header.begin(), header.end());
  const size_t at = out.size(), n = static_cast<size_t>(t.numel()) * static_cast<size_t>(dtype_size(t.dtype()));
  out.resize(at + n);
  auto copy = [&](const auto& v) { if (n && !v.empty()) std::memcpy(out.data() + at, v.data(), v.size() * sizeof v[0]); };
  switch (t.dtype()) {  // to_vector in the tensor's own dtype: its bytes, in row-major order
    case DType::Bool: case DType::U8: copy(t.to_vector<uint8_t>()); break;
    case DType::I8: copy(t.to_vector<int8_t>()); break;
    case DType::I16: copy(t.to_vector<int16_t>()); break;
    case DType::U16: copy(t.to_vector<uint16_t>()); break;
    case DType::I32: copy(t.to_vector<int32_t>()); break;
    case DType::U32: copy(t.to_vector<uint32_t>()); break;
    case DType::I64: copy(t.to_vector<int64_t>()); break;
    case DType::U64: copy(t.to_vector<uint64_t>()); break;
    case DType::F16: copy(t.to_vector<Float16>()); break;
    case DType::BF16: copy(t.to_vector<BFloat16>()); break;
    case DType::F32: copy(t.to_vector<float>()); break;
    case DType::F64: copy(t.to_vector<double>()); break;
  }
  return out;
}

Tensor from_npy_bytes(const std::vector<char>& bytes, const std::string& what, std::optional<Device> device) {
  RAVEL_CHECK(bytes.size() >= 10 && std::memcmp(bytes.data(), kMagic, sizeof kMagic) == 0, ValueError, what,
              " is not a .npy file (expected the magic \\x93NUMPY, got ", bytes.size(), " bytes)");
  const int major = static_cast<unsigned char>(bytes[6]);
  RAVEL_CHECK(major >= 1 && major <= 3, ValueError, what, ": .npy format version ", major, ".",
              static_cast<int>(static_cast<unsigned char>(bytes[7])), " is not supported (expected 1.x, 2.x or 3.x)");
  const size_t len_bytes = major == 1 ? 2 : 4;
  RAVEL_CHECK(bytes.size() >= 8 + len_bytes, ValueError, what, " is truncated in its header length");
  uint64_t hl = 0;
  for (size_t b = 0; b < len_bytes; ++b) hl |= uint64_t(static_cast<unsigned char>(bytes[8 + b])) << (8 * b);
  const size_t start = 8 + len_bytes;
  RAVEL_CHECK(hl <= bytes.size() - start, ValueError, what, " is truncated: its header says ", hl,
              " bytes, the file has ", bytes.size() - start, " after the header length");
  const std::string text(bytes.data() + start, hl);  // latin-1 or UTF-8 (3.0): ASCII in practice
  const Header h = HeaderParser{text, what}.parse();
  const auto [dtype, swap] = dtype_of_descr(h.descr, what);
  // Sizes come from the file: each below 2^40 and so is the product of the non-zero ones, checked
  // before multiplying (a product that overflowed was undefined behaviour, one that wrapped to 0
  // an empty array).
  int64_t numel = 1;
  bool empty = false;
  for (int64_t s : h.shape) {
    RAVEL_CHECK(s < (int64_t{1} << 40), ValueError, what, ": implausible shape ", shape_str(h.shape), " (a size of ",
                s, ", expected sizes below 2^40)");
    if (s == 0) { empty = true; continue; }
    RAVEL_CHECK(!__builtin_mul_overflow(numel, s, &numel) && numel < (int64_t{1} << 40), ValueError, what,
                ": implausible shape ", shape_str(h.shape), " (2^40 or more elements)");
  }
  if (empty) numel = 0;
  const uint64_t data_at = start + hl, need = static_cast<uint64_t>(numel) * static_cast<uint64_t>(dtype_size(dtype));
  RAVEL_CHECK(bytes.size() - data_at >= need, ValueError, what, " is truncated: ", shape_str(h.shape), " ",
              dtype_name(dtype), " needs ", need, " bytes of data, the file has ", bytes.size() - data_at);
  std::vector<char> data(bytes.begin() + static_cast<std::ptrdiff_t>(data_at),
                         bytes.begin() + static_cast<std::ptrdiff_t>(data_at + need));
  const size_t es = static_cast<size_t>(dtype_size(dtype));
  if (swap)
    for (size_t e = 0; e + es <= data.size(); e += es) std::reverse(data.begin() + e, data.begin() + e + es);
  if (dtype == DType::Bool)  // NumPy writes 0/1; anything else would be an invalid bool in C++
    for (char& b : data) b = b != 0;
  if (!h.fortran) return Tensor::from_data(data.data(), dtype, h.shape, device);
  // Fortran order: the data is the row-major layout of the reversed shape; a transposing view
  // gives back the array's own axes (no copy until something reads it).
  Shape reversed(h.shape.rbegin(), h.shape.rend());
  std::vector<int64_t> order(h.shape.size());
  for (size_t d = 0; d < order.size(); ++d) order[d] = static_cast<int64_t>(order.size() - 1 - d);
  return Tensor::from_data(data.data(), dtype, reversed, device).permute(order);
}

void save_npy(const std::string& path, const Tensor& t) { write_file(path, to_npy_bytes(t)); }

Tensor load_npy(const std::string& path, std::optional<Device> device) {
  return from_npy_bytes(read_file(path), path, device);
}

void save_npz(const std::string& path, const NamedTensors& arrays) {
  std::vector<detail::zip::Member> members;
  std::set<std::string> seen;
  for (const auto& [name, t] : arrays) {
    // np.load would read a name with '/' or '..' back, but unzip would write it outside its folder.
    const std::string bad = detail::zip::path_like_name(name);
    RAVEL_CHECK(bad.empty(), ValueError, "save_npz(", path, "): array name '", name, "' is refused: ", bad,
                " (expected a plain name such as 'layers.0.weight')");
    RAVEL_CHECK(seen.insert(name).second, ValueError, "save_npz(", path, "): the name '", name,
                "' is given twice (expected unique names)");
    members.push_back({name + ".npy", to_npy_bytes(t)});
  }
  write_file(path, detail::zip::write_archive(members));
}

NamedTensors load_npz(const std::string& path, std::optional<Device> device) {
  NamedTensors out;
  std::set<std::string> keys;
  for (auto& m : detail::zip::read_archive(read_file(path), path)) {
    std::string key = m.name;
    if (key.size() > 4 && key.compare(key.size() - 4, 4, ".npy") == 0) key.resize(key.size() - 4);
    // "w" and "w.npy" are two members but one key for np.load, which keeps the later one.
    RAVEL_CHECK(keys.insert(key).second, ValueError, path, " holds two arrays named '", key,
                "' (members '", key, "' and '", key, ".npy'; NumPy would silently take the last)");
    out.emplace_back(key, from_npy_bytes(m.data, path + ", member " + m.name, device));
  }
  return out;
}

}  // namespace ravel
