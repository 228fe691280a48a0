// The precompiled header of the test sources (CMake target ravel_test_pch; every ravel_add_test
// target reuses it). Only headers that nearly every test includes and that change rarely belong
// here: a change to any of them rebuilds every test. Nothing here may depend on a macro that a
// test defines before its includes (none does: tests/test_main.cpp holds the one main()).
#pragma once

#include <boost/test/unit_test.hpp>
#include <boost/test/data/test_case.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ravel/ravel.hpp"
