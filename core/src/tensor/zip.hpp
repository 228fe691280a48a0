// The part of the ZIP format (PKWARE APPNOTE 6.3) that .npz files use: NumPy's np.savez writes
// one stored (uncompressed) member per array, "name.npy", with ZIP64 extra fields in the local
// headers (force_zip64); np.savez_compressed writes deflated members instead.
//
// Why our own and not a library: Debian ships no small zip library that Ravel already depends
// on, and the subset is small. We write stored members only (what np.savez writes, and what
// np.load opens); we read stored members, ZIP64 sizes and offsets, and deflated members when
// the build found zlib (RAVEL_HAVE_ZLIB), else a ValueError that says so. Every length and
// offset read from a file is checked against the file's size before it is used.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ravel::detail::zip {

uint32_t crc32(const void* data, size_t n, uint32_t crc = 0);

struct Member {
  std::string name;
  std::vector<char> data;
};

// The bytes of a ZIP archive holding `members` stored, in this order.
std::vector<char> write_archive(const std::vector<Member>& members);
// Every member of the archive in `bytes`, in central-directory order, CRC-checked. `what` names
// the archive in error messages. ValueError for anything malformed or unsupported.
std::vector<Member> read_archive(const std::vector<char>& bytes, const std::string& what);

}  // namespace ravel::detail::zip
