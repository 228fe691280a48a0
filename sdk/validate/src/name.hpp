// The name of the part being validated ("input 3", "contraction operand A", "... view"), built
// on the stack. The validator runs on every kernel launch and almost every launch passes, so
// names must cost nothing there: building a std::string per operand and per instruction (and
// its malloc/free) was most of the validator's time in launch-bound steps such as makemore's. Operands still need
// their name up front, because the plugin's BufferLookup and rvl::require_struct take a
// `const char*` to report; error messages themselves are only formatted once a check fails.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstring>

namespace rvl::validate {

class Name {
 public:
  // `kind`, then " <index>" when index >= 0. Truncated (never overflowing) if it would not fit;
  // every name the validator builds is far shorter than kCapacity.
  explicit Name(const char* kind, int index = -1) {
    append(kind);
    if (index >= 0) {
      append(" ");
      auto [end, ec] = std::to_chars(buf_ + len_, buf_ + kCapacity, index);
      if (ec == std::errc{}) len_ = static_cast<size_t>(end - buf_);
      buf_[len_] = '\0';
    }
  }
  // This name followed by `suffix` (e.g. " view").
  Name plus(const char* suffix) const {
    Name n(*this);
    n.append(suffix);
    return n;
  }
  const char* c_str() const noexcept { return buf_; }

 private:
  static constexpr size_t kCapacity = 63;  // characters, plus the terminating NUL
  void append(const char* s) {
    const size_t n = std::min(std::strlen(s), kCapacity - len_);
    std::memcpy(buf_ + len_, s, n);
    len_ += n;
    buf_[len_] = '\0';
  }
  char buf_[kCapacity + 1] = {};
  size_t len_ = 0;
};

}  // namespace rvl::validate
