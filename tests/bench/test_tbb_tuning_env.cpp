// The oneTBB plugin's tuning variables (plugins/tbb_cpu/tuning_env.hpp): strict
// parsing, clamping into a range that keeps the kernels correct, and a warning naming the
// variable for anything ignored or clamped. The kernels' results under hostile values are
// checked by the tbb_gemm_blocked_hostile_tuning run of tbb_gemm_blocked (CMakeLists.txt).
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

#include "tuning_env.hpp"

namespace {
// What `f` printed on stderr.
template <class F>
std::string stderr_of(F&& f) {
  std::fflush(stderr);
  FILE* tmp = std::tmpfile();
  const int saved = dup(2);
  dup2(fileno(tmp), 2);
  f();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::string out;
  std::rewind(tmp);
  for (int c; (c = std::fgetc(tmp)) != EOF;) out += static_cast<char>(c);
  std::fclose(tmp);
  return out;
}
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

BOOST_AUTO_TEST_CASE(integers_are_parsed_strictly_and_clamped_with_a_warning) {
  using tbbcpu::tuning_int;
  const char* kVar = "RAVEL_TEST_TUNING_INT";
  ::unsetenv(kVar);
  BOOST_TEST(tuning_int(kVar, 7, 0, 100) == 7);  // unset: the default, silently
  ::setenv(kVar, "", 1);
  BOOST_TEST(tuning_int(kVar, 7, 0, 100) == 7);
  ::setenv(kVar, "42", 1);
  BOOST_TEST(tuning_int(kVar, 7, 0, 100) == 42);
  for (const char* garbage : {"64k", " 8", "0x40", "abc", "+5", "1e3", "-", "--5"}) {
    ::setenv(kVar, garbage, 1);
    int64_t v = -1;
    const std::string err = stderr_of([&] { v = tuning_int(kVar, 7, 0, 100); });
    BOOST_TEST(v == 7, garbage);
    BOOST_TEST(has(err, std::string("RAVEL_TEST_TUNING_INT='") + garbage + "' is not a decimal integer in [0, 100]"), err);
  }
  ::setenv(kVar, "-5", 1);  // wrapped in round_up before
  std::string err = stderr_of([&] { BOOST_TEST(tuning_int(kVar, 7, 0, 100) == 0); });
  BOOST_TEST(has(err, "RAVEL_TEST_TUNING_INT='-5' is outside [0, 100]; using 0"), err);
  ::setenv(kVar, "1000000000000000000", 1);  // 10^18: overflowed the panel arithmetic before
  err = stderr_of([&] { BOOST_TEST(tuning_int(kVar, 7, 0, 100) == 100); });
  BOOST_TEST(has(err, "is outside [0, 100]; using 100"), err);
  ::setenv(kVar, "-99999999999999999999999", 1);  // beyond int64: saturates, then clamps
  err = stderr_of([&] { BOOST_TEST(tuning_int(kVar, 7, 0, 100) == 0); });
  BOOST_TEST(has(err, "is outside [0, 100]; using 0"), err);
  ::unsetenv(kVar);
}

BOOST_AUTO_TEST_CASE(choices_are_exact_and_others_ignored_with_a_warning) {
  using tbbcpu::tuning_choice;
  const char* kVar = "RAVEL_TEST_TUNING_CHOICE";
  ::setenv(kVar, "avx2", 1);
  BOOST_TEST(tuning_choice(kVar, "", {"portable", "avx2"}) == "avx2");
  ::setenv(kVar, "AVX2", 1);
  std::string got = "x";
  const std::string err = stderr_of([&] { got = tuning_choice(kVar, "", {"portable", "avx2"}); });
  BOOST_TEST(got.empty());
  BOOST_TEST(has(err, "RAVEL_TEST_TUNING_CHOICE='AVX2' is not one of portable, avx2; ignored"), err);
  ::unsetenv(kVar);
  BOOST_TEST(tuning_choice(kVar, "d", {"portable"}) == "d");
}
