// Helpers shared by the table-driven test suites (tests/core, tests/autodiff).
#pragma once

#include <boost/test/unit_test.hpp>

#include <stdlib.h>  // mkdtemp

#include <cmath>
#include <exception>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

// Every got[i] within tol * (1 + |want[i]|) of want[i]; names the first three that are not.
inline void check_values(const std::vector<double>& got, const std::vector<double>& want, double tol, const char* what) {
  BOOST_TEST_REQUIRE(got.size() == want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i]))) && bad++ < 3)
      BOOST_ERROR(what << "[" << i << "] = " << got[i] << ", expected " << want[i]);
  BOOST_TEST(bad == 0, what);
}

// Runs f, turning an exception into a failure of this row (so the other rows still run).
template <class F>
void guarded(const std::string& ctx, F&& f) {
  BOOST_TEST_CONTEXT(ctx) {
    try {
      f();
    } catch (const std::exception& e) {
      BOOST_ERROR("unexpected exception: " << e.what());
    }
  }
}

// A folder of this test process's own, removed (with what the tests wrote there) when the process
// exits normally. Scratch files then never collide between suites run at once (the plain and the
// sanitizer builds) and never outlive the run. Not for processes that fork and exit normally.
inline const std::filesystem::path& scratch_dir() {
  struct Dir {
    std::filesystem::path path;
    Dir() {
      std::string t = (std::filesystem::temp_directory_path() / "ravel-test-XXXXXX").string();
      if (!::mkdtemp(t.data())) throw std::runtime_error("scratch_dir: cannot create " + t);
      path = t;
    }
    ~Dir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Dir dir;
  return dir.path;
}

// n values drawn uniformly from [lo, hi) by a generator seeded with `seed`: test data that is
// the same on every run.
inline std::vector<double> seeded_values(size_t n, unsigned seed, double lo = -2, double hi = 3) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = u(rng);
  return v;
}
