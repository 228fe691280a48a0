// expect_error<E>(what, f, needles): f() must throw exactly a ravel::Error of type E (or derived)
// whose message contains every needle. Shared by the size, index and memory-limit tests.
#pragma once

#include <boost/test/unit_test.hpp>

#include <string>
#include <typeinfo>
#include <vector>

#include "ravel/error.hpp"

namespace rtest {

template <class E, class F>
void expect_error(const std::string& what, F&& f, const std::vector<std::string>& needles) {
  BOOST_TEST_CONTEXT(what) {
    try {
      f();
      BOOST_ERROR("no exception thrown");
    } catch (const E& e) {
      const std::string msg = e.what();
      for (const auto& n : needles)
        BOOST_TEST(msg.find(n) != std::string::npos, "message \"" << msg << "\" should contain '" << n << "'");
    } catch (const std::exception& e) {
      BOOST_ERROR("wrong exception type (" << typeid(e).name() << "): " << e.what());
    }
  }
}

}  // namespace rtest
