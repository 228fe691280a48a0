// Checking JSON values against what a config expects, with errors that name the JSON path, the bad
// value and what was expected. Header-only so that ravel-bench (tools/ravel_bench), which reads its
// own "bench" section, reports errors in exactly the same words as the core's config reader.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/json_input.hpp"
#include "ravel/error.hpp"

namespace ravel::detail {

inline size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// The closest of `known` to `word` when it is close enough to be a plausible typo (within half
// the longer name's length, at least 2 edits); empty otherwise.
inline std::string closest_name(const std::string& word, const std::vector<std::string>& known) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& k : known)
    if (size_t d = edit_distance(word, k); d <= std::max<size_t>(2, std::max(word.size(), k.size()) / 2) && d < best_d)
      best_d = d, best = k;
  return best;
}

inline std::string join_names(const std::vector<std::string>& names) {
  std::string list;
  for (const auto& k : names) list += (list.empty() ? "" : ", ") + k;
  return list;
}

// Throws ConfigError("<source>: <path>: <msg>") for the values of one config file.
class JsonChecker {
 public:
  explicit JsonChecker(std::string source) : source_(std::move(source)) {}
  const std::string& source() const { return source_; }

  // `msg` is capped too: messages from elsewhere (Device::parse, fusion policies) echo the value.
  [[noreturn]] void fail(const std::string& path, const std::string& msg) const {
    throw ConfigError(source_ + ": " + cap_text(path) + ": " + cap_text(msg, 4 * kMaxEchoChars));
  }
  // `obj` must be an object whose keys are all in `known` (else "unknown key (did you mean ...)").
  void keys(const nlohmann::json& obj, const std::string& path, const std::vector<std::string>& known) const {
    if (!obj.is_object()) fail(path, "expected an object, got " + brief_json(obj));
    for (const auto& [key, value] : obj.items()) {
      if (std::find(known.begin(), known.end(), key) != known.end()) continue;
      std::string best = closest_name(key, known);
      fail(path + "." + cap_text(key, 64), "unknown key" + (best.empty() ? "" : " (did you mean \"" + best + "\"?)") +
                                 "; expected one of: " + join_names(known));
    }
  }
  std::vector<std::string> strings(const nlohmann::json& v, const std::string& path) const {
    if (!v.is_array()) fail(path, "expected an array of strings, got " + brief_json(v));
    std::vector<std::string> out;
    for (size_t i = 0; i < v.size(); ++i) out.push_back(string(v[i], path + "[" + std::to_string(i) + "]"));
    return out;
  }
  std::string string(const nlohmann::json& v, const std::string& path) const {
    if (!v.is_string()) fail(path, "expected a string, got " + brief_json(v));
    std::string s = v.get<std::string>();
    // JSON allows "\u0000"; a name or path holding it would be cut there by every C API it reaches.
    if (const size_t nul = s.find('\0'); nul != std::string::npos)
      fail(path, "the string holds a NUL character (\\u0000) at position " + std::to_string(nul) +
                     "; remove it (names and paths cannot contain NUL)");
    return s;
  }
  // A string that must be one of `choices` (with a "did you mean" for near misses).
  std::string choice(const nlohmann::json& v, const std::string& path, const std::vector<std::string>& choices) const {
    std::string s = string(v, path);
    if (std::find(choices.begin(), choices.end(), s) != choices.end()) return s;
    std::string best = closest_name(s, choices);
    fail(path, "got \"" + cap_text(s) + "\"" + (best.empty() ? "" : " (did you mean \"" + best + "\"?)") +
                   "; expected one of: " + join_names(choices));
  }
  bool boolean(const nlohmann::json& v, const std::string& path) const {
    if (!v.is_boolean()) fail(path, "expected true or false, got " + brief_json(v));
    return v.get<bool>();
  }
  int64_t integer(const nlohmann::json& v, const std::string& path, int64_t lo, int64_t hi) const {
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
      fail(path, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + brief_json(v));
    return v.get<int64_t>();
  }

 private:
  std::string source_;
};

}  // namespace ravel::detail
