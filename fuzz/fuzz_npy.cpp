// Fuzzes the .npy and .npz readers (ravel/io.hpp, core/src/tensor/npy.cpp and zip.cpp): any bytes
// as a .npy file or, when they start like a ZIP ("PK"), as a .npz archive read from disk. Each must
// load or throw a ravel::Error, never crash, overflow or allocate without bound; an accepted array
// must have as many elements as its shape says, readable. Runs on the SDK's template backend in
// the fuzz build (fuzz/CMakeLists.txt) and on tbb_cpu in the corpus replay (tests/fuzz).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "ravel/io.hpp"
#include "ravel/ravel.hpp"

namespace {
void check(const ravel::Tensor& t, const std::string& key) {
  int64_t n = 1;
  for (int64_t s : t.shape()) n *= s;
  // The data was uploaded by from_data (every byte copied, so ASan saw it); reading it back would
  // run a kernel per input and cut the rate tenfold, so only the sizes are compared.
  if (n != t.numel() || !t.defined()) {
    std::fprintf(stderr, "npy fuzzer: accepted array %s has a shape that disagrees with its data\n", key.c_str());
    std::abort();
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/ravel_fuzz_npz_" + std::to_string(::getpid()) + ".npz";
  const std::vector<char> bytes(data, data + size);
  try {
    if (size >= 2 && data[0] == 'P' && data[1] == 'K') {
      {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      }
      for (const auto& [key, t] : ravel::load_npz(path)) check(t, key);
    } else {
      check(ravel::from_npy_bytes(bytes, "fuzz.npy"), "fuzz.npy");
    }
  } catch (const ravel::Error&) {
  }
  return 0;
}
