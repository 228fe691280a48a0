// Fuzzes the parameter-file loader (nn::load_parameters, docs/nn.md): any bytes as a file, read
// as Ravel's own format or, when they start like a ZIP, as a .npz archive (ravel/io.hpp). It must
// either load them into the module or throw a ravel::Error, never crash or overflow; a file it
// accepts must have given every parameter its own shape and dtype. Runs on the SDK's template
// backend, which fuzz/CMakeLists.txt builds next to libravel_core.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "ravel/nn.hpp"
#include "ravel/ravel.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A module with parameters of ranks 2 and 1: weight f32 [3, 2], bias f32 [2].
  static ravel::nn::Linear lin(3, 2, 1);
  static const std::string path = "/tmp/ravel_fuzz_params_" + std::to_string(::getpid());
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    ravel::nn::load_parameters(lin, path);
    if (lin.weight.shape() != ravel::Shape{3, 2} || lin.bias.shape() != ravel::Shape{2} ||
        lin.weight.dtype() != ravel::DType::F32 || lin.bias.dtype() != ravel::DType::F32) {
      std::fprintf(stderr, "params fuzzer: an accepted file changed a parameter's shape or dtype\n");
      std::abort();
    }
    (void)lin.weight.sum().item<float>();  // the values are readable
  } catch (const ravel::Error&) {
  }
  return 0;
}
