// Header-only C++ helper for writing Ravel backend plugins against the C ABI in backend.h.
//
// What it gives a plugin author (see docs/abi.md, "Writing a plugin with backend.hpp"):
//  - `struct rvl_error`: one concrete error layout, so error_code/error_message/error_destroy can
//    be the ready-made rvl::error_code/error_message/error_destroy below.
//  - `rvl::Error`: an exception carrying an rvl_status and a message; `rvl::fail(...)` throws it.
//  - `rvl::guard(fn)`: runs fn and turns *any* exception into a heap-allocated rvl_error
//    (std::bad_alloc -> RVL_STATUS_OUT_OF_MEMORY, rvl::Error -> its status, anything else ->
//    RVL_STATUS_INTERNAL). Wrap every table member body in it: no exception may cross the ABI.
//  - dtype helpers, and op names/arity from the op table (<ravel/op_table.hpp>).
//  - RVL_DEFINE_BACKEND_ENTRY(table): defines the single exported symbol.
//
// Invariant: an rvl_error returned by guard() is either heap-allocated with `new` (freed by
// error_destroy) or the static out-of-memory sentinel (never freed), so error_destroy is always
// safe on anything guard() produced.
#ifndef RAVEL_BACKEND_HPP
#define RAVEL_BACKEND_HPP

#include <ravel/backend.h>
#include <ravel/op_table.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <utility>

// The concrete error object. Defined here (not in backend.h) because the C ABI keeps it opaque;
// every plugin built with this helper shares the layout, and only that plugin ever looks inside.
struct rvl_error {
  rvl_status code;
  std::string message;
};

namespace rvl {

// An exception that carries an ABI status. Throw it (or call fail()) anywhere inside guard().
class Error : public std::exception {
 public:
  Error(rvl_status code, std::string message) : code_(code), message_(std::move(message)) {}
  rvl_status code() const noexcept { return code_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  rvl_status code_;
  std::string message_;
};

[[noreturn]] inline void fail(rvl_status code, std::string message) {
  throw Error(code, std::move(message));
}
[[noreturn]] inline void invalid(std::string message) {
  throw Error(RVL_STATUS_INVALID_ARGUMENT, std::move(message));
}

namespace detail {
// Returned when even the error object cannot be allocated. Never deleted (see error_destroy).
inline rvl_error* oom_sentinel() noexcept {
  static rvl_error sentinel{RVL_STATUS_OUT_OF_MEMORY, "out of memory"};
  return &sentinel;
}
}  // namespace detail

// Makes a heap error; never throws (falls back to the static out-of-memory sentinel).
inline rvl_error* make_error(rvl_status code, const char* message) noexcept {
  try {
    return new rvl_error{code, message ? message : ""};
  } catch (...) {
    return detail::oom_sentinel();
  }
}

// Runs fn() (returning void) and converts every exception into an rvl_error*. NULL = success.
template <class Fn>
rvl_error* guard(Fn&& fn) noexcept {
  try {
    std::forward<Fn>(fn)();
    return nullptr;
  } catch (const Error& e) {
    return make_error(e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return make_error(RVL_STATUS_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return make_error(RVL_STATUS_INTERNAL, e.what());
  } catch (...) {
    return make_error(RVL_STATUS_INTERNAL, "unknown exception");
  }
}

// For members that return void (shutdown): exceptions are swallowed, there is no way to report.
template <class Fn>
void guard_void(Fn&& fn) noexcept {
  try {
    std::forward<Fn>(fn)();
  } catch (...) {
  }
}

// Ready-made error_* table members for the layout above.
inline rvl_status error_code(const rvl_error* e) noexcept {
  return e ? e->code : RVL_STATUS_OK;
}
inline const char* error_message(const rvl_error* e) noexcept {
  return e ? e->message.c_str() : "";
}
inline void error_destroy(rvl_error* e) noexcept {
  if (e != nullptr && e != detail::oom_sentinel()) delete e;
}

// ---- dtypes -------------------------------------------------------------------------------
constexpr bool dtype_valid(int32_t dt) noexcept { return dt >= 0 && dt < RVL_DTYPE_COUNT_; }
constexpr bool dtype_is_float(int32_t dt) noexcept {
  return dt == RVL_DTYPE_F32 || dt == RVL_DTYPE_F64 || dt == RVL_DTYPE_F16 || dt == RVL_DTYPE_BF16;
}
// f16 and bf16: stored in two bytes, computed in f32 (<ravel/half.hpp>).
constexpr bool dtype_is_half(int32_t dt) noexcept { return dt == RVL_DTYPE_F16 || dt == RVL_DTYPE_BF16; }
constexpr bool dtype_is_int(int32_t dt) noexcept {  // integer dtypes, bool excluded
  return dtype_valid(dt) && dt != RVL_DTYPE_BOOL && !dtype_is_float(dt);
}
constexpr bool dtype_is_unsigned(int32_t dt) noexcept {
  return dt == RVL_DTYPE_U8 || dt == RVL_DTYPE_U16 || dt == RVL_DTYPE_U32 || dt == RVL_DTYPE_U64;
}
constexpr bool dtype_is_signed_int(int32_t dt) noexcept {  // two's complement: i8, i16, i32, i64
  return dtype_is_int(dt) && !dtype_is_unsigned(dt);
}
// Size of one element in bytes; 0 for an invalid dtype.
constexpr size_t dtype_size(int32_t dt) noexcept {
  switch (dt) {
    case RVL_DTYPE_BOOL: return 1;
    case RVL_DTYPE_U8: return 1;
    case RVL_DTYPE_I32: return 4;
    case RVL_DTYPE_I64: return 8;
    case RVL_DTYPE_F32: return 4;
    case RVL_DTYPE_F64: return 8;
    case RVL_DTYPE_F16: case RVL_DTYPE_BF16: case RVL_DTYPE_I16: case RVL_DTYPE_U16: return 2;
    case RVL_DTYPE_I8: return 1;
    case RVL_DTYPE_U32: return 4;
    case RVL_DTYPE_U64: return 8;
    default: return 0;
  }
}
constexpr const char* dtype_name(int32_t dt) noexcept {
  switch (dt) {
    case RVL_DTYPE_BOOL: return "bool";
    case RVL_DTYPE_U8: return "u8";
    case RVL_DTYPE_I32: return "i32";
    case RVL_DTYPE_I64: return "i64";
    case RVL_DTYPE_F32: return "f32";
    case RVL_DTYPE_F64: return "f64";
    case RVL_DTYPE_F16: return "f16";
    case RVL_DTYPE_BF16: return "bf16";
    case RVL_DTYPE_I8: return "i8";
    case RVL_DTYPE_I16: return "i16";
    case RVL_DTYPE_U16: return "u16";
    case RVL_DTYPE_U32: return "u32";
    case RVL_DTYPE_U64: return "u64";
    default: return "<invalid dtype>";
  }
}

// ---- ops ----------------------------------------------------------------------------------
// Everything about an op comes from the op table (<ravel/op_table.hpp>, rows in backend.h).
// Number of sources an op reads; -1 for an invalid op.
constexpr int op_arity(int32_t op) noexcept { return op_valid(op) ? op_info(op).arity : -1; }
constexpr const char* op_name(int32_t op) noexcept {
  return op_valid(op) ? op_info(op).name : "<invalid op>";
}

// True if a caller-filled struct announces at least `needed` bytes (the fields this plugin reads).
template <class T>
inline void require_struct(const T* p, const char* what, size_t needed = sizeof(T)) {
  if (p == nullptr) invalid(std::string(what) + ": NULL pointer");
  if (p->struct_size < needed)
    invalid(std::string(what) + ": struct_size " + std::to_string(p->struct_size) +
            " is too small, expected at least " + std::to_string(needed));
}

// An address as error messages print it ("0x7f..."): foreign memory a plugin refuses to wrap.
inline std::string address_str(const void* p) {
  char s[32];
  std::snprintf(s, sizeof s, "%p", p);
  return s;
}

}  // namespace rvl

// Defines the one exported symbol. Use once, at namespace scope, in exactly one source file:
//   static const rvl_backend_api kTable = {...};
//   RVL_DEFINE_BACKEND_ENTRY(kTable)
#define RVL_DEFINE_BACKEND_ENTRY(table)                                     \
  extern "C" RVL_EXPORT const rvl_backend_api* rvl_backend_entry(void) {    \
    return &(table);                                                        \
  }

#endif  // RAVEL_BACKEND_HPP
