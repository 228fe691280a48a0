// The on-disk cache of compiled kernels (see disk_cache.hpp).
#include "disk_cache.hpp"

#include "rtc.hpp"

#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <ravel/lowering/plan.hpp>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace rvl::hip {

std::string disk_cache_key(const KernelSource& k, const Target& t) {
  return k.source + "\n// arch " + t.arch + "\n// compiler " + compiler_id(t.platform);
}

std::string disk_cache_dir() {
  const char* dir = std::getenv("RAVEL_CACHE_DIR");
  if (dir && *dir) return std::strcmp(dir, "off") == 0 ? "" : std::string(dir) + "/hip";
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg) return std::string(xdg) + "/ravel/hip";
  const char* home = std::getenv("HOME");
  return home && *home ? std::string(home) + "/.cache/ravel/hip" : "";
}

namespace {
std::string cache_path(const std::string& key_text) {
  char h[32];
  std::snprintf(h, sizeof h, "%016llx", static_cast<unsigned long long>(lower::fnv1a(key_text.data(), key_text.size())));
  return disk_cache_dir() + "/" + h;
}
void make_dirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i)
    if (i == path.size() || path[i] == '/') mkdir(path.substr(0, i).c_str(), 0755);
}
}  // namespace

bool disk_cache_load(const std::string& key_text, std::string* code) {
  if (disk_cache_dir().empty()) return false;
  const std::string base = cache_path(key_text);
  std::ifstream key(base + ".key", std::ios::binary), bin(base + ".bin", std::ios::binary);
  if (!key || !bin) return false;
  std::stringstream ks, bs;
  ks << key.rdbuf();
  if (ks.str() != key_text) return false;  // a hash collision, or a stale entry
  bs << bin.rdbuf();
  *code = bs.str();
  return !code->empty();
}

void disk_cache_store(const std::string& key_text, const std::string& code) noexcept {
  try {
    if (disk_cache_dir().empty()) return;
    make_dirs(disk_cache_dir());
    const std::string base = cache_path(key_text);
    const std::string tmp = base + ".tmp" + std::to_string(reinterpret_cast<uintptr_t>(&code));
    // .bin first, .key last: a reader that finds the key finds a complete binary.
    std::ofstream(tmp + "b", std::ios::binary) << code;
    std::rename((tmp + "b").c_str(), (base + ".bin").c_str());
    std::ofstream(tmp + "k", std::ios::binary) << key_text;
    std::rename((tmp + "k").c_str(), (base + ".key").c_str());
  } catch (...) {  // the cache is an optimisation: never fail a kernel because of it
  }
}

}  // namespace rvl::hip
