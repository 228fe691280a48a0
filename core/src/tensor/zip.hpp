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
// What an archive may inflate to, all deflated members together: far above what
// np.savez_compressed is used for, far below what a deflate bomb (1032:1) or directory entries
// sharing one bomb would demand. Stored members are bounded by the file's own size.
inline constexpr uint64_t kMaxInflatedBytes = uint64_t{4} << 30;

// Every member of the archive in `bytes`, in central-directory order, CRC-checked. `what` names
// the archive in error messages. ValueError for anything malformed or unsupported, and for what
// a ZIP writer never makes: members whose bytes overlap each other or the directory, two members
// of one name, and names that are paths out of the archive (see path_like_name).
std::vector<Member> read_archive(const std::vector<char>& bytes, const std::string& what,
                                 uint64_t max_inflated = kMaxInflatedBytes);

// Why `name` must not be a member name ("" if it may): empty, absolute, a '.' or '..' component,
// a backslash, a NUL or another control character. Such names escape the folder an unzip tool
// extracts into (zip-slip) or mean different files to different tools.
std::string path_like_name(const std::string& name);

}  // namespace ravel::detail::zip
