// RAVEL_INVARIANT — internal invariants that stay checked in release builds.
//
// assert() vanishes under NDEBUG, which every release build defines, and the code after an
// invariant usually relies on it (dereferences an optional, indexes with a value it computed):
// then a broken invariant is undefined behaviour in exactly the builds users run. RAVEL_INVARIANT
// costs one predictable branch and turns the same bug into a ravel::InternalError naming the
// file, line and condition. For conditions a caller can violate, use RAVEL_CHECK with the error
// type that names what the caller got wrong (ravel/error.hpp).
#pragma once

#include <string>

#include "ravel/error.hpp"

namespace ravel::detail {
[[noreturn]] inline void invariant_failed(const char* cond, const char* file, int line, const std::string& what) {
  throw InternalError(concat("ravel: internal error at ", file, ":", line, ": ", cond, " does not hold",
                             what.empty() ? "" : " (", what, what.empty() ? "" : ")",
                             "; this is a bug, please report it"));
}
}  // namespace ravel::detail

// RAVEL_INVARIANT(cond) or RAVEL_INVARIANT(cond, "why it must hold", values...).
#define RAVEL_INVARIANT(cond, ...)                                                                       \
  do {                                                                                                   \
    if (!(cond)) ::ravel::detail::invariant_failed(#cond, __FILE__, __LINE__, ::ravel::detail::concat(__VA_ARGS__)); \
  } while (0)
