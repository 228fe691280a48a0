// RAVEL_INVARIANT (core/src/graph/invariant.hpp) stays on where assert() is compiled out: with
// NDEBUG defined (every release build), a broken invariant still throws ravel::InternalError
// naming the condition and the file, instead of running on into undefined behaviour.
#ifndef NDEBUG
#define NDEBUG
#endif
#include <boost/test/unit_test.hpp>

#include <optional>
#include <string>

#include "graph/invariant.hpp"

namespace {
int deref(const std::optional<int>& v) {
  RAVEL_INVARIANT(v.has_value(), "the caller made it");
  return *v;
}
}  // namespace

BOOST_AUTO_TEST_CASE(invariants_hold_in_release_builds) {
  BOOST_TEST(deref(3) == 3);
  try {
    deref(std::nullopt);
    BOOST_FAIL("a broken invariant went unnoticed under NDEBUG");
  } catch (const ravel::InternalError& e) {
    const std::string m = e.what();
    BOOST_TEST(m.find("v.has_value() does not hold (the caller made it)") != std::string::npos, m);
    BOOST_TEST(m.find("test_invariant.cpp") != std::string::npos, m);
    BOOST_TEST(m.find("this is a bug") != std::string::npos, m);
  }
}
