// The ravel::Error hierarchy and the RAVEL_CHECK macro.
//
// Every user-facing failure is a typed ravel::Error whose message says what was expected and
// what was got. RAVEL_CHECK is for conditions a caller can violate (bad shapes, axes, dtypes,
// configs, plugins); internal invariants use RAVEL_INVARIANT (core/src/graph/invariant.hpp),
// which throws InternalError and, unlike assert(), stays on in release builds.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace ravel {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};
// Shapes that do not match, broadcast or fit an op (names both shapes).
class ShapeError : public Error { using Error::Error; };
// An axis outside [-ndim, ndim) or repeated.
class AxisError : public ShapeError { using ShapeError::ShapeError; };
// A dtype an op does not accept.
class DTypeError : public Error { using Error::Error; };
// A bad value in a JSON config (names the JSON path).
class ConfigError : public Error { using Error::Error; };
// A plugin that could not be found, loaded, negotiated with or initialised.
class PluginError : public Error { using Error::Error; };
// A device that does not exist, or that failed while running work.
class DeviceError : public Error { using Error::Error; };
// A device allocation that failed.
class OutOfMemoryError : public DeviceError { using DeviceError::DeviceError; };
// A value outside the domain of an API (e.g. a negative size, an out-of-range index).
class ValueError : public Error { using Error::Error; };
// An index outside its bound (select/at, and the values of an index tensor given to gather,
// one_hot, nn::Embedding or nn::cross_entropy): names the index, where it is and the bound
// (docs/abi.md, "Indices"). A ValueError, so code that caught ValueError for select still does.
class IndexError : public ValueError { using ValueError::ValueError; };
// A broken invariant inside Ravel itself (a bug to report), never the user's input.
class InternalError : public Error { using Error::Error; };

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
}  // namespace detail

}  // namespace ravel

// RAVEL_CHECK(cond, ErrorType, "expected ", x, " got ", y): throws ErrorType with the message.
#define RAVEL_CHECK(cond, ErrorType, ...)                          \
  do {                                                             \
    if (!(cond)) throw ErrorType(::ravel::detail::concat(__VA_ARGS__)); \
  } while (0)
