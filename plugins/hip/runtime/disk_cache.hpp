// The on-disk cache of compiled kernels: RAVEL_CACHE_DIR (default $XDG_CACHE_HOME/ravel or
// ~/.cache/ravel; "off" disables it), subfolder hip/. An entry is keyed by a hash of the source,
// the arch and the compiler's identity, and taken only when the stored key text equals the
// current one (so neither a hash collision nor a compiler upgrade can load a wrong binary).
// ravel-hip-compile-check --cache fills it ahead of time (scripts/gpu-check.sh does).
#pragma once

#include "../codegen/codegen.hpp"

#include <string>

namespace rvl::hip {

std::string disk_cache_key(const KernelSource& k, const Target& t);
std::string disk_cache_dir();
bool disk_cache_load(const std::string& key_text, std::string* code);
void disk_cache_store(const std::string& key_text, const std::string& code) noexcept;

}  // namespace rvl::hip
