// l0-spirv-check: checks every kernel the Level Zero plugin dumped (RAVEL_L0_DUMP_SPIRV=DIR).
//   l0-spirv-check DIR [LINKED.spv]
// Validates each DIR/*.spv for the OpenCL environment (as spirv-val --target-env opencl1.2
// does, in process), prints a line per invalid module and the count, and with LINKED.spv also
// links all of them into one module (entry points renamed k<8 hex digits>, the file's hash) for
// a single ocloc run per GPU generation. Exit status 1 if any module is invalid.
#include <algorithm>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "spirv_check.hpp"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [LINKED.spv]\n", argv[0]);
    return 2;
  }
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(argv[1]))
    if (e.path().extension() == ".spv") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<std::vector<uint32_t>> modules;
  std::vector<std::string> names;
  int bad = 0;
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<uint32_t> w(bytes.size() / 4);
    std::memcpy(w.data(), bytes.data(), w.size() * 4);
    const std::string err = l0test::validate_opencl(w);
    if (!err.empty()) {
      std::printf("INVALID %s: %s", f.filename().c_str(), err.c_str());
      ++bad;
      continue;
    }
    modules.push_back(std::move(w));
    names.push_back("k" + f.stem().string().substr(0, 9));  // same length as "rvl_kernel"
  }
  std::printf("%zu kernels, %d invalid (SPIRV-Tools, OpenCL 1.2 environment)\n", files.size(), bad);
  if (argc > 2 && !modules.empty()) {
    try {
      const std::vector<uint32_t> linked = l0test::link_kernels(std::move(modules), names);
      std::ofstream(argv[2], std::ios::binary)
          .write(reinterpret_cast<const char*>(linked.data()), std::streamsize(linked.size() * 4));
      std::printf("linked into %s (%zu words)\n", argv[2], linked.size());
    } catch (const std::exception& e) {
      std::printf("%s\n", e.what());
      return 1;
    }
  }
  return bad ? 1 : 0;
}
