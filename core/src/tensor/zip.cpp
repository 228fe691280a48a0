// ZIP reading and writing for .npz (see zip.hpp for the subset and why).
#include "tensor/zip.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <set>

#include "ravel/error.hpp"

#ifdef RAVEL_HAVE_ZLIB
#include <zlib.h>
#endif

namespace ravel::detail::zip {

namespace {

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50, kZip64LocatorSig = 0x07064b50;

const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;  // reflected 0x04C11DB7
      t[i] = c;
    }
    return t;
  }();
  return table;
}

// Little-endian fields, whatever the host (ZIP is little-endian).
void put16(std::vector<char>& out, uint32_t v) {
  for (int i = 0; i < 2; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void put32(std::vector<char>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// Reads fixed-width fields at checked positions of an in-memory archive.
struct Cursor {
  const std::vector<char>& bytes;
  const std::string& what;
  uint64_t need(uint64_t at, uint64_t n, const char* field) const {
    RAVEL_CHECK(at <= bytes.size() && n <= bytes.size() - at, ValueError, what, " is not a valid ZIP archive: ", field,
                " at byte ", at, " needs ", n, " bytes, the file has ", bytes.size());
    return at;
  }
  uint64_t le(uint64_t at, int width, const char* field) const {
    need(at, static_cast<uint64_t>(width), field);
    uint64_t v = 0;
    for (int i = width - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[at + static_cast<uint64_t>(i)]);
    return v;
  }
};

// The ZIP64 extended-information extra field (id 1) replaces, in this order, whichever of
// usize, csize and offset were 0xFFFFFFFF in the fixed header.
void apply_zip64(const Cursor& c, uint64_t extra, uint64_t extra_len, uint64_t& usize, uint64_t& csize,
                 uint64_t* offset) {
  for (uint64_t p = extra; p + 4 <= extra + extra_len;) {
    const uint64_t id = c.le(p, 2, "an extra field id"), len = c.le(p + 2, 2, "an extra field length");
    if (id == 1) {
      uint64_t q = p + 4;
      if (usize == 0xFFFFFFFFu) { usize = c.le(q, 8, "a ZIP64 size"); q += 8; }
      if (csize == 0xFFFFFFFFu) { csize = c.le(q, 8, "a ZIP64 size"); q += 8; }
      if (offset && *offset == 0xFFFFFFFFu) *offset = c.le(q, 8, "a ZIP64 offset");
      return;
    }
    p += 4 + len;
  }
}

// Inflates into memory that grows with what zlib actually produces, so a header claiming a huge
// size costs nothing; `budget` is what the archive may still inflate to (kMaxInflatedBytes).
std::vector<char> inflate_raw(const char* data, uint64_t csize, uint64_t usize, const std::string& where,
                              uint64_t& budget) {
#ifdef RAVEL_HAVE_ZLIB
  RAVEL_CHECK(usize <= budget, ValueError, where, " inflates to ", usize, " bytes, more than the ", budget,
              " bytes left of the ", kMaxInflatedBytes, " an archive may inflate to (a deflate bomb?)");
  RAVEL_CHECK(csize <= 0xFFFFFFFFu, ValueError, where, ": ", csize,
              " deflated bytes in one member are not supported (at most 4 GiB)");
  std::vector<char> out;
  z_stream z{};
  RAVEL_CHECK(inflateInit2(&z, -MAX_WBITS) == Z_OK, ValueError, where, ": zlib failed to start");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
  z.avail_in = static_cast<uInt>(csize);
  int rc = Z_OK;
  constexpr uint64_t kChunk = uint64_t{1} << 20;
  while (rc == Z_OK) {
    // One more byte than claimed may be asked for, so that a stream longer than its header is seen.
    const uint64_t room = std::min<uint64_t>(kChunk, usize + 1 - out.size());
    if (room == 0) break;
    const size_t at = out.size();
    out.resize(at + room);
    z.next_out = reinterpret_cast<Bytef*>(out.data() + at);
    z.avail_out = static_cast<uInt>(room);
    rc = inflate(&z, Z_NO_FLUSH);
    out.resize(at + room - z.avail_out);
    if (rc == Z_BUF_ERROR && z.avail_in == 0) break;  // the input ended before the stream did
  }
  const uint64_t produced = out.size();
  inflateEnd(&z);
  RAVEL_CHECK(rc == Z_STREAM_END && produced == usize, ValueError, where,
              ": the deflated data is corrupt (zlib status ", rc, ", ", produced, " bytes, the header says ", usize, ")");
  budget -= usize;
  return out;
#else
  (void)data, (void)csize, (void)usize, (void)budget;
  throw ValueError(where + " is deflated (np.savez_compressed), and this build of Ravel has no zlib: "
                   "save it with np.savez, or rebuild Ravel with zlib1g-dev installed");
#endif
}

}  // namespace

// A member name for a message: at most 200 bytes, control characters as '?'.
static std::string cap_name(const std::string& name) {
  std::string out = name.substr(0, 200);
  for (char& ch : out)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7F) ch = '?';
  return name.size() > 200 ? out + "..." : out;
}

std::string path_like_name(const std::string& name) {
  if (name.empty()) return "it is empty";
  if (name.front() == '/') return "it is an absolute path";
  for (char ch : name) {
    if (ch == '\\') return "it holds a backslash";
    if (ch == '\0') return "it holds a NUL byte";
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7F) return "it holds a control character";
  }
  for (size_t at = 0; at <= name.size();) {
    const size_t end = std::min(name.find('/', at), name.size());
    const std::string part = name.substr(at, end - at);
    if (part == "." || part == "..") return "it has a '" + part + "' path component";
    if (part.empty() && end < name.size()) return "it has an empty path component ('//')";
    at = end + 1;
  }
  return "";
}

uint32_t crc32(const void* data, size_t n, uint32_t crc) {
  const auto& t = crc_table();
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = t[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

std::vector<char> write_archive(const std::vector<Member>& members) {
  std::vector<char> out, central;
  // 1980-01-01 00:00, the earliest DOS date: files are reproducible byte for byte.
  constexpr uint32_t kTime = 0, kDate = (0 << 9) | (1 << 5) | 1;
  for (const auto& m : members) {
    RAVEL_CHECK(m.data.size() < 0xFFFFFFFFull && out.size() < 0xFFFFFFFFull && m.name.size() < 0xFFFF, ValueError,
                "cannot write ", m.name, ": members and archives over 4 GiB (ZIP64) are not supported when writing");
    const uint32_t crc = crc32(m.data.data(), m.data.size());
    const auto offset = static_cast<uint32_t>(out.size());
    auto header = [&](std::vector<char>& h, bool central_entry) {
      put32(h, central_entry ? kCentralSig : kLocalSig);
      if (central_entry) put16(h, 20);  // made by: version 2.0
      put16(h, 20);                     // needed to extract: 2.0
      put16(h, 0);                      // flags
      put16(h, 0);                      // method: stored
      put16(h, kTime);
      put16(h, kDate);
      put32(h, crc);
      put32(h, static_cast<uint32_t>(m.data.size()));
      put32(h, static_cast<uint32_t>(m.data.size()));
      put16(h, static_cast<uint32_t>(m.name.size()));
      put16(h, 0);  // extra length
      if (central_entry) {
        put16(h, 0);  // comment length
        put16(h, 0);  // disk number
        put16(h, 0);  // internal attributes
        put32(h, 0600u << 16);  // external attributes: a regular file, rw-------
        put32(h, offset);
      }
      h.insert(h.end(), m.name.begin(), m.name.end());
    };
    header(out, false);
    out.insert(out.end(), m.data.begin(), m.data.end());
    header(central, true);
  }
  RAVEL_CHECK(members.size() < 0xFFFF && out.size() < 0xFFFFFFFFull, ValueError,
              "cannot write an archive of ", members.size(), " members and ", out.size(), " bytes without ZIP64");
  const auto cd_offset = static_cast<uint32_t>(out.size());
  out.insert(out.end(), central.begin(), central.end());
  put32(out, kEndSig);
  put16(out, 0);
  put16(out, 0);
  put16(out, static_cast<uint32_t>(members.size()));
  put16(out, static_cast<uint32_t>(members.size()));
  put32(out, static_cast<uint32_t>(central.size()));
  put32(out, cd_offset);
  put16(out, 0);  // comment length
  return out;
}

std::vector<Member> read_archive(const std::vector<char>& bytes, const std::string& what, uint64_t max_inflated) {
  Cursor c{bytes, what};
  // The end record is the last 22 bytes plus a comment of up to 65535: search backwards.
  RAVEL_CHECK(bytes.size() >= 22, ValueError, what, " is not a ZIP archive (", bytes.size(), " bytes)");
  uint64_t end = bytes.size() - 22;
  const uint64_t lowest = bytes.size() > 22 + 0xFFFF ? bytes.size() - 22 - 0xFFFF : 0;
  while (c.le(end, 4, "the end record") != kEndSig) {
    RAVEL_CHECK(end > lowest, ValueError, what, " is not a ZIP archive: no end-of-central-directory record");
    --end;
  }
  uint64_t count = c.le(end + 10, 2, "the member count"), cd_offset = c.le(end + 16, 4, "the directory offset");
  if ((count == 0xFFFF || cd_offset == 0xFFFFFFFFu) && end >= 20 && c.le(end - 20, 4, "a locator") == kZip64LocatorSig) {
    const uint64_t z64 = c.le(end - 20 + 8, 8, "the ZIP64 end record offset");
    RAVEL_CHECK(c.le(z64, 4, "the ZIP64 end record") == kZip64EndSig, ValueError, what,
                " is not a valid ZIP archive: bad ZIP64 end record");
    count = c.le(z64 + 32, 8, "the ZIP64 member count");
    cd_offset = c.le(z64 + 48, 8, "the ZIP64 directory offset");
  }
  // Every directory entry takes at least 46 bytes of the file: a count beyond that is a lie, refused
  // before it drives the loop.
  RAVEL_CHECK(cd_offset <= bytes.size() && count <= (bytes.size() - cd_offset) / 46, ValueError, what,
              " is not a valid ZIP archive: its directory at byte ", cd_offset, " claims ", count,
              " members, more than the file's ", bytes.size(), " bytes can hold");
  struct Entry {
    std::string name;
    uint64_t method, csize, usize, data;
    uint32_t crc;
  };
  std::vector<Entry> entries;
  std::set<std::string> names;
  // [first, last) byte ranges of each member (local header and data) and of the directory: a ZIP
  // writer never overlaps them; an archive that does makes one deflate bomb count many times.
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  uint64_t p = cd_offset;
  for (uint64_t i = 0; i < count; ++i) {
    RAVEL_CHECK(c.le(p, 4, "a directory entry") == kCentralSig, ValueError, what,
                " is not a valid ZIP archive: directory entry ", i, " at byte ", p, " has a bad signature");
    const uint64_t flags = c.le(p + 8, 2, "flags"), method = c.le(p + 10, 2, "the method");
    const auto crc = static_cast<uint32_t>(c.le(p + 16, 4, "the CRC"));
    uint64_t csize = c.le(p + 20, 4, "a size"), usize = c.le(p + 24, 4, "a size");
    const uint64_t name_len = c.le(p + 28, 2, "the name length"), extra_len = c.le(p + 30, 2, "the extra length");
    const uint64_t comment_len = c.le(p + 32, 2, "the comment length");
    uint64_t local = c.le(p + 42, 4, "the member offset");
    c.need(p + 46, name_len + extra_len + comment_len, "a directory entry's name");
    std::string name(bytes.data() + p + 46, name_len);
    apply_zip64(c, p + 46 + name_len, extra_len, usize, csize, &local);
    const std::string where = what + ", member " + name;
    const std::string bad_name = path_like_name(name);
    RAVEL_CHECK(bad_name.empty(), ValueError, what, ": member name '", cap_name(name), "' is refused: ", bad_name,
                " (expected a plain name such as 'weight.npy')");
    RAVEL_CHECK(names.insert(name).second, ValueError, what, " holds two members named '", cap_name(name),
                "' (NumPy would silently take the last; Ravel refuses the archive, which np.savez never writes)");
    RAVEL_CHECK((flags & 1) == 0, ValueError, where, " is encrypted, which is not supported");
    RAVEL_CHECK(method == 0 || method == 8, ValueError, where, " uses compression method ", method,
                ", expected 0 (stored) or 8 (deflated)");
    RAVEL_CHECK(c.le(local, 4, "a local header") == kLocalSig, ValueError, where, ": bad local header at byte ", local);
    const uint64_t data = local + 30 + c.le(local + 26, 2, "a name length") + c.le(local + 28, 2, "an extra length");
    c.need(data, csize, "member data");
    if (method == 0)
      RAVEL_CHECK(csize == usize, ValueError, where, ": stored with ", csize, " bytes but says it holds ", usize);
    else  // deflate expands at most 1032:1: a larger claimed size is a corrupt header
      RAVEL_CHECK(usize <= csize * 1032 + 64, ValueError, where, ": implausible size ", usize, " for ", csize,
                  " deflated bytes");
    ranges.emplace_back(local, data + csize);
    entries.push_back(Entry{std::move(name), method, csize, usize, data, crc});
    p += 46 + name_len + extra_len + comment_len;
  }
  ranges.emplace_back(cd_offset, p);
  std::sort(ranges.begin(), ranges.end());
  for (size_t k = 1; k < ranges.size(); ++k)
    RAVEL_CHECK(ranges[k].first >= ranges[k - 1].second, ValueError, what, " is not a valid ZIP archive: bytes ",
                ranges[k].first, " to ", ranges[k - 1].second - 1,
                " belong to two members (or a member and the directory); a ZIP writer never overlaps them");
  // Only now, with every entry checked, is anything copied or inflated.
  std::vector<Member> members;
  uint64_t budget = max_inflated;
  for (Entry& e : entries) {
    const std::string where = what + ", member " + e.name;
    Member m{std::move(e.name), {}};
    if (e.method == 0) m.data.assign(bytes.data() + e.data, bytes.data() + e.data + e.csize);
    else m.data = inflate_raw(bytes.data() + e.data, e.csize, e.usize, where, budget);
    const uint32_t got = crc32(m.data.data(), m.data.size());
    RAVEL_CHECK(got == e.crc, ValueError, where, " is corrupt: CRC-32 ", got, ", the archive says ", e.crc);
    members.push_back(std::move(m));
  }
  return members;
}

}  // namespace ravel::detail::zip
