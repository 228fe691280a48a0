// Regression tests for crashes the fuzzers found (docs/fuzzing.md, "Crashes found"). Each case is
// the fuzzer's input, verbatim, fed to the code the fuzz target drives; it must now be a clean
// ravel::Error. Under the sanitizer run (scripts/test.sh) the original bug is reported again if it
// comes back, even where a plain build would not notice.
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ravel/nn.hpp"
#include "ravel/ravel.hpp"

#include "test_support.hpp"

namespace {

std::string write_temp(const std::string& name, const std::vector<unsigned char>& bytes) {
  auto path = (scratch_dir() / name).string();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                               static_cast<std::streamsize>(bytes.size()));
  return path;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

// fuzz_params, crash-c67c0061: a parameter file whose "weight" has rank 8 with every size 2^39
// (each below the 2^40 bound). The loader multiplied the sizes before comparing the shape with the
// module's: a signed overflow (UBSan: serialize.cpp "549755813888 * 549755813888"). It now checks
// the shape first and takes the size from the module.
BOOST_AUTO_TEST_CASE(parameter_file_with_overflowing_shape_product) {
  std::vector<unsigned char> bytes = {'R', 'A', 'V', 'E', 'L', 'P', 'A', 'R', 1, 0, 0, 0, 2, 0, 0, 0,
                                      6, 0, 0, 0, 'w', 'e', 'i', 'g', 'h', 't', 4, 8};
  for (int d = 0; d < 8; ++d)
    for (unsigned char b : {0, 0, 0, 0, 0x80, 0, 0, 0}) bytes.push_back(b);  // int64 2^39, little-endian
  const std::string path = write_temp("ravel_fuzz_params_overflow", bytes);
  ravel::nn::Linear lin(3, 2, 1);
  try {
    ravel::nn::load_parameters(lin, path);
    BOOST_ERROR("the file was accepted");
  } catch (const ravel::ValueError& e) {
    BOOST_TEST(contains(e.what(), "weight"), e.what());
    BOOST_TEST(contains(e.what(), "the module expects weight f32 [3, 2]"), e.what());
  }
  std::filesystem::remove(path);
}

// fuzz_config, crash-5a64193e: a number too large for a double ("1e999999999") made nlohmann's
// parser throw json::out_of_range, which the config reader did not catch (only parse_error): the
// exception escaped as a non-ravel error (std::terminate in a program that catches ravel::Error).
BOOST_AUTO_TEST_CASE(config_with_a_number_beyond_double) {
  const std::string text = R"({"comment": 999999999999999999999999999e999999999})";
  const std::string path = write_temp("ravel_fuzz_config_number.json", {text.begin(), text.end()});
  ravel::RuntimeOptions o;
  o.config_path = path;
  o.use_environment = false;
  try {
    ravel::Runtime::reset(o);
    BOOST_ERROR("the config was accepted");
  } catch (const ravel::ConfigError& e) {
    BOOST_TEST(contains(e.what(), "malformed JSON"), e.what());
    BOOST_TEST(contains(e.what(), "number overflow"), e.what());
  }
  std::filesystem::remove(path);
  ravel::Runtime::reset(ravel::RuntimeOptions{});
}
