#define BOOST_TEST_MODULE l0_placement
#include <boost/test/unit_test.hpp>
BOOST_AUTO_TEST_CASE(placeholder) {}
