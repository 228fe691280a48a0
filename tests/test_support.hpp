// Helpers shared by the table-driven test suites (tests/core, tests/autodiff).
#pragma once

#include <boost/test/unit_test.hpp>

#include <exception>
#include <string>

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
