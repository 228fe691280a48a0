// The oneTBB plugin's tuning variables (RAVEL_TBB_GEMM_KC/MC/NC/CHUNK_ROWS, RAVEL_TBB_CACHE_MB,
// RAVEL_TBB_INLINE_WORK, RAVEL_TBB_GEMM_SERIAL_WORK, RAVEL_TBB_GEMM_SMALL_WORK,
// RAVEL_TBB_BLOCK_SLOTS, RAVEL_TBB_ELEMENTWISE_BLOCK, RAVEL_TBB_GEMM, RAVEL_TBB_GEMM_ORDER,
// RAVEL_TBB_FUSED_MIN, RAVEL_TBB_FUSED_CHUNK, RAVEL_TBB_WINDOW_DOT, RAVEL_TBB_WINDOW_ROWS,
// RAVEL_TBB_WINDOW_SPAN, RAVEL_TBB_SPAN_SELECT, RAVEL_TBB_BIAS_RELU, RAVEL_TBB_PAD_VECTORS,
// RAVEL_TBB_NO_ROW_REGISTERS;
// docs/config.md lists them).
//
// Why warnings and not errors: they are read lazily, inside the first kernel that needs them,
// where an error would fail that kernel rather than start-up, and a tuning knob must never change
// a result. So a value is parsed strictly (a decimal integer and nothing else: "64k", " 8", "0x40"
// and "" are not numbers), a value that is not a number or not a choice is ignored with a warning
// naming the variable, its value and what it takes (the default is used), and a number outside
// the range that keeps the kernels correct and bounded is clamped with a warning. Before, a
// strtoll read garbage as 0 (the default, silently), negative values wrapped in round_up, and
// RAVEL_TBB_GEMM_NC=10^18 overflowed the panel arithmetic into wrong products or SIGFPE.
// Each warning is printed once per variable (the values are cached in function-local statics).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string>

namespace tbbcpu {

inline void tuning_warning(const char* name, const std::string& value, const std::string& what) {
  std::fprintf(stderr, "ravel: warning: %s='%s' %s\n", name, value.substr(0, 64).c_str(), what.c_str());
}

// `name`'s value as an integer in [lo, hi]; `fallback` when unset or empty (and, with a warning,
// when it is not a decimal integer); clamped into [lo, hi] with a warning.
inline int64_t tuning_int(const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const char* env = std::getenv(name);
  if (!env || !*env) return fallback;
  const std::string text = env;
  const bool negative = text[0] == '-';
  bool digits = text.size() > (negative ? 1u : 0u);
  for (size_t i = negative ? 1 : 0; i < text.size(); ++i) digits = digits && text[i] >= '0' && text[i] <= '9';
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (!digits) {
    tuning_warning(name, text, "is not a decimal integer in " + range + "; using the default, " +
                                   std::to_string(fallback));
    return fallback;
  }
  // Saturating: beyond int64 is as far outside [lo, hi] as the nearest int64 (strtoll's ERANGE).
  const int64_t v = std::strtoll(text.c_str(), nullptr, 10);
  if (v < lo || v > hi) {
    const int64_t c = v < lo ? lo : hi;
    tuning_warning(name, text, "is outside " + range + "; using " + std::to_string(c));
    return c;
  }
  return v;
}

// `name`'s value if it is one of `choices`; `fallback` when unset or empty, and, with a warning
// listing the choices, when it is anything else.
inline std::string tuning_choice(const char* name, const std::string& fallback,
                                 std::initializer_list<const char*> choices) {
  const char* env = std::getenv(name);
  if (!env || !*env) return fallback;
  std::string list;
  for (const char* c : choices) {
    if (env == std::string(c)) return c;
    list += std::string(list.empty() ? "" : ", ") + c;
  }
  tuning_warning(name, env, "is not one of " + list + "; ignored");
  return fallback;
}

}  // namespace tbbcpu
