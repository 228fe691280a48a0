#include "idx.hpp"

#include <zlib.h>

#include <filesystem>
#include <memory>

namespace fashion_mnist {

namespace {
// Sizes above this are a corrupt header, not an image set (Fashion-MNIST's largest is 60000).
constexpr uint32_t kMaxAxis = 1u << 24;
constexpr int64_t kMaxElements = int64_t{1} << 32;

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using Gz = std::unique_ptr<std::remove_pointer_t<gzFile>, GzCloser>;

// A reader over a plain or gzip file (zlib reads both), counting the bytes it delivered so a
// short read can say where the file ended.
struct IdxReader {
  std::string path;
  Gz file;
  int64_t offset = 0;

  explicit IdxReader(const std::string& p) : path(p) {
    std::error_code ec;
    const auto st = std::filesystem::status(p, ec);
    if (ec || !std::filesystem::exists(st))
      throw IdxError(path + ": no such file (install the dataset: apt-get install dataset-fashion-mnist, or pass --data DIR)");
    if (!std::filesystem::is_regular_file(st)) throw IdxError(path + ": not a regular file");
    file.reset(gzopen(p.c_str(), "rb"));
    if (!file) throw IdxError(path + ": cannot open");
  }
  // Reads up to n bytes; returns how many (fewer only at the end of the data).
  int64_t read_some(uint8_t* dst, int64_t n) {
    int64_t got = 0;
    while (got < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<int64_t>(n - got, 1 << 30));
      const int r = gzread(file.get(), dst + got, chunk);
      if (r < 0) {
        int code = 0;
        const char* msg = gzerror(file.get(), &code);
        throw IdxError(path + ": corrupt gzip data after " + std::to_string(offset + got) + " bytes (" + msg + ")");
      }
      if (r == 0) break;
      got += r;
    }
    offset += got;
    return got;
  }
  void read(uint8_t* dst, int64_t n, const std::string& what) {
    const int64_t at = offset;
    const int64_t got = read_some(dst, n);
    if (got != n)
      throw IdxError(path + " is truncated: expected " + std::to_string(n) + " bytes of " + what + " at byte " +
                     std::to_string(at) + ", the data ends after " + std::to_string(at + got) + " bytes");
  }
  // The header: magic with element type 0x08 and the expected rank, then the sizes.
  std::vector<int64_t> header(int rank, const char* kind) {
    uint8_t magic[4];
    read(magic, 4, "the magic number");
    const uint32_t m = (uint32_t{magic[0]} << 24) | (uint32_t{magic[1]} << 16) | (uint32_t{magic[2]} << 8) | magic[3];
    const uint32_t want = 0x0800u | static_cast<uint32_t>(rank);
    if (m != want) {
      char buf[160];
      std::snprintf(buf, sizeof buf, ": magic number 0x%08x, expected 0x%08x (IDX unsigned bytes of rank %d: %s)", m, want,
                    rank, kind);
      throw IdxError(path + buf);
    }
    std::vector<int64_t> sizes;
    int64_t total = 1;
    for (int a = 0; a < rank; ++a) {
      uint8_t b[4];
      read(b, 4, "the size of axis " + std::to_string(a));
      const uint32_t s = (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
      if (s == 0 || s > kMaxAxis)
        throw IdxError(path + ": axis " + std::to_string(a) + " has size " + std::to_string(s) + ", expected 1 to " +
                       std::to_string(kMaxAxis));
      sizes.push_back(s);
      total *= s;
      if (total > kMaxElements) throw IdxError(path + ": the header declares more than 2^32 elements (corrupt file?)");
    }
    return sizes;
  }
  std::vector<uint8_t> body(int64_t n) {
    std::vector<uint8_t> data(static_cast<size_t>(n));
    read(data.data(), n, "data (" + std::to_string(n) + " elements as the header declares)");
    uint8_t extra;
    if (read_some(&extra, 1) != 0)
      throw IdxError(path + " has data after its " + std::to_string(n) +
                     " declared elements; expected the file to end there (corrupt or wrong header?)");
    return data;
  }
};

void write_gz(const std::string& path, const std::vector<uint8_t>& bytes) {
  Gz f(gzopen(path.c_str(), "wb"));
  if (!f) throw IdxError("cannot write " + path);
  if (gzwrite(f.get(), bytes.data(), static_cast<unsigned>(bytes.size())) != static_cast<int>(bytes.size()))
    throw IdxError("writing " + path + " failed");
}

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(v >> s));
}
}  // namespace

Images read_idx_images(const std::string& path) {
  IdxReader r(path);
  const std::vector<int64_t> s = r.header(3, "images [count, rows, cols]");
  Images im;
  im.count = s[0], im.rows = s[1], im.cols = s[2];
  im.pixels = r.body(s[0] * s[1] * s[2]);
  return im;
}

std::vector<uint8_t> read_idx_labels(const std::string& path, int classes) {
  IdxReader r(path);
  const std::vector<int64_t> s = r.header(1, "labels [count]");
  std::vector<uint8_t> labels = r.body(s[0]);
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] >= classes)
      throw IdxError(path + ": label " + std::to_string(i) + " is " + std::to_string(labels[i]) + ", expected 0 to " +
                     std::to_string(classes - 1));
  return labels;
}

Split load_split(const std::string& dir, const std::string& prefix, int classes) {
  const auto base = std::filesystem::path(dir);
  const std::string images = (base / (prefix + "-images-idx3-ubyte.gz")).string();
  const std::string labels = (base / (prefix + "-labels-idx1-ubyte.gz")).string();
  Split s{read_idx_images(images), read_idx_labels(labels, classes)};
  if (static_cast<int64_t>(s.labels.size()) != s.images.count)
    throw IdxError(images + " holds " + std::to_string(s.images.count) + " images but " + labels + " holds " +
                   std::to_string(s.labels.size()) + " labels; expected one label per image");
  return s;
}

void write_idx_images(const std::string& path, const Images& images) {
  std::vector<uint8_t> out{0, 0, 0x08, 3};
  put_u32(out, static_cast<uint32_t>(images.count));
  put_u32(out, static_cast<uint32_t>(images.rows));
  put_u32(out, static_cast<uint32_t>(images.cols));
  out.insert(out.end(), images.pixels.begin(), images.pixels.end());
  write_gz(path, out);
}

void write_idx_labels(const std::string& path, const std::vector<uint8_t>& labels) {
  std::vector<uint8_t> out{0, 0, 0x08, 1};
  put_u32(out, static_cast<uint32_t>(labels.size()));
  out.insert(out.end(), labels.begin(), labels.end());
  write_gz(path, out);
}

}  // namespace fashion_mnist
