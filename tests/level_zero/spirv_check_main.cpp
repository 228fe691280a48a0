// l0-spirv-check: checks every kernel the Level Zero plugin dumped (RAVEL_L0_DUMP_SPIRV=DIR).
//   l0-spirv-check DIR [--link OUT.spv] [--no-fp64]
// Validates each DIR/*.spv for the OpenCL environment (as spirv-val --target-env opencl1.2
// does, in process), prints a line per invalid module and the count, and with --link also
// links them into one module (entry points renamed k<9 hex digits of the file's hash>) for a
// single ocloc run per GPU generation; --no-fp64 leaves out modules that declare Float64 (for
// GPUs without fp64, such as DG2, on which the plugin refuses f64 kernels). Exit status 1 if
// any module is invalid.
#include <algorithm>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <spirv/unified1/spirv.hpp11>

#include "spirv_check.hpp"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  std::string link_to;
  bool no_fp64 = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--link" && i + 1 < argc) link_to = argv[++i];
    else if (a == "--no-fp64") no_fp64 = true;
    else argc = 0;
  }
  if (argc < 2) {
    std::fprintf(stderr, "usage: l0-spirv-check DIR [--link OUT.spv] [--no-fp64]\n");
    return 2;
  }
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(argv[1]))
    if (e.path().extension() == ".spv") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<std::vector<uint32_t>> modules;
  std::vector<std::string> names;
  int bad = 0, skipped = 0;
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
    bool fp64 = false;
    for (size_t i = 5; i < w.size() && (w[i] >> 16);) {  // OpCapability Float64
      fp64 |= (w[i] & 0xffff) == uint32_t(spv::Op::OpCapability) &&
              w[i + 1] == uint32_t(spv::Capability::Float64);
      i += w[i] >> 16;
    }
    if (fp64 && no_fp64) {
      ++skipped;
      continue;
    }
    modules.push_back(std::move(w));
    names.push_back("k" + f.stem().string().substr(0, 9));  // same length as "rvl_kernel"
  }
  std::printf("%zu kernels, %d invalid (SPIRV-Tools, OpenCL 1.2 environment)%s\n", files.size(),
              bad, no_fp64 ? (", " + std::to_string(skipped) + " with fp64 left out").c_str() : "");
  if (!link_to.empty() && !modules.empty()) {
    const size_t n_linked = modules.size();
    try {
      const std::vector<uint32_t> linked = l0test::link_kernels(std::move(modules), names);
      std::ofstream(link_to, std::ios::binary)
          .write(reinterpret_cast<const char*>(linked.data()), std::streamsize(linked.size() * 4));
      std::printf("%zu kernels linked into %s (%zu words)\n", n_linked, link_to.c_str(),
                  linked.size());
    } catch (const std::exception& e) {
      std::printf("%s\n", e.what());
      return 1;
    }
  }
  return bad ? 1 : 0;
}
