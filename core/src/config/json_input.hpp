// Reading JSON the user hands us (config files, ravel-bench configs) without trusting it: a
// bounded read of a regular file (RAVEL_CONFIG=/dev/zero or a FIFO must fail fast, not eat memory or hang), a nesting limit checked by
// a flat scan before nlohmann's parser sees the text (so nothing downstream — dump(), the checker —
// can recurse deeply over input), duplicate keys rejected (JSON allows them, nlohmann keeps the last
// one silently, which hides typos in long configs), and echoed values capped (a 50 MB bad value
// must not come back whole in an error message). Header-only, like json_check.hpp, so ravel-bench
// reads its files through exactly the same checks.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "ravel/error.hpp"

namespace ravel::detail {

inline constexpr size_t kMaxJsonBytes = size_t{16} << 20;  // far above any real config
inline constexpr int kMaxJsonDepth = 256;                   // real configs nest 3-4 levels
inline constexpr size_t kMaxEchoChars = 200;                // of a bad value in an error message

// `text` itself when short; else its first kMaxEchoChars characters and "... (N bytes)".
inline std::string cap_text(const std::string& text, size_t max = kMaxEchoChars) {
  if (text.size() <= max) return text;
  return text.substr(0, max) + "... (" + std::to_string(text.size()) + " bytes)";
}

// A JSON value as text for an error message, capped as cap_text does. It serializes into an
// adapter that keeps only the first characters and counts the rest, so a huge value costs no
// memory. (The serializer recurses, but only over parsed input, whose depth parse_json_text bounded.)
inline std::string brief_json(const nlohmann::json& v, size_t max = kMaxEchoChars) {
  struct Capped : nlohmann::detail::output_adapter_protocol<char> {
    std::string head;
    size_t total = 0, max = 0;
    void write_character(char c) override {
      if (head.size() < max) head.push_back(c);
      ++total;
    }
    void write_characters(const char* s, std::size_t n) override {
      if (head.size() < max) head.append(s, std::min(n, max - head.size()));
      total += n;
    }
  };
  auto out = std::make_shared<Capped>();
  out->max = max;
  nlohmann::detail::serializer<nlohmann::json> ser(out, ' ', nlohmann::json::error_handler_t::replace);
  ser.dump(v, false, false, 0);
  if (out->total <= max) return out->head;
  return out->head + "... (" + std::to_string(out->total) + " bytes)";
}

// Reads at most kMaxJsonBytes of `path`, a regular file; more is a ConfigError. Anything else is
// refused before a byte is read: a FIFO as RAVEL_CONFIG blocked start-up (in open, waiting for a
// writer, then in read), /dev/zero never ended. O_NONBLOCK keeps the open itself from waiting.
inline std::string read_json_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    throw ConfigError("cannot read config file " + cap_text(path) + ": " + std::strerror(errno) +
                      " (expected a readable JSON file)");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st{};
  if (::fstat(fd, &st) != 0) throw ConfigError("cannot read config file " + cap_text(path) + ": " + std::strerror(errno));
  if (S_ISDIR(st.st_mode))
    throw ConfigError("cannot read config file " + cap_text(path) + ": it is a folder (expected a JSON file)");
  if (!S_ISREG(st.st_mode))
    throw ConfigError("cannot read config file " + cap_text(path) + ": it is a " +
                      (S_ISFIFO(st.st_mode) ? "FIFO" : S_ISCHR(st.st_mode) ? "character device" :
                       S_ISSOCK(st.st_mode) ? "socket" : "special file") +
                      ", not a regular file (expected a JSON file; write the config to a file first)");
  if (static_cast<uint64_t>(st.st_size) > kMaxJsonBytes)
    throw ConfigError("config file " + cap_text(path) + " is larger than " + std::to_string(kMaxJsonBytes >> 20) +
                      " MiB (expected a JSON config file)");
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw ConfigError("cannot read config file " + cap_text(path) + " (" + std::strerror(errno) + ")");
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxJsonBytes)  // it grew while we read
      throw ConfigError("config file " + cap_text(path) + " is larger than " + std::to_string(kMaxJsonBytes >> 20) +
                        " MiB (expected a JSON config file)");
  }
  return text;
}

// A flat scan for the deepest nesting of [ and { outside strings; throws past kMaxJsonDepth.
inline void check_json_depth(const std::string& text, const std::string& source) {
  int depth = 0;
  size_t line = 1, col = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    ++col;
    if (c == '\n') ++line, col = 0;
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        throw ConfigError(source + ": malformed JSON: nested deeper than " + std::to_string(kMaxJsonDepth) +
                          " levels at line " + std::to_string(line) + ", column " + std::to_string(col));
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

// Parses `text` (already size-checked by the caller, or checked here) into JSON, rejecting deep
// nesting and duplicate keys with a ConfigError naming `source` and the JSON path.
inline nlohmann::json parse_json_text(const std::string& text, const std::string& source) {
  using nlohmann::json;
  if (text.size() > kMaxJsonBytes)
    throw ConfigError(source + ": larger than " + std::to_string(kMaxJsonBytes >> 20) + " MiB (expected a JSON config)");
  check_json_depth(text, source);
  // One frame per open container: an object's keys so far, or an array's element count.
  struct Frame {
    bool object;
    std::set<std::string> keys;
    std::string key;
    size_t elements = 0;
  };
  std::vector<Frame> stack;
  auto path = [&] {  // of the innermost open container
    std::string p = "$";
    for (size_t i = 0; i + 1 < stack.size(); ++i)
      p += stack[i].object ? "." + cap_text(stack[i].key, 64) : "[" + std::to_string(stack[i].elements - 1) + "]";
    return p;
  };
  auto element = [&] {
    if (!stack.empty() && !stack.back().object) ++stack.back().elements;
  };
  json::parser_callback_t cb = [&](int, json::parse_event_t ev, json& parsed) {
    switch (ev) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        element();
        stack.push_back(Frame{ev == json::parse_event_t::object_start, {}, {}, 0});
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!stack.empty()) stack.pop_back();
        break;
      case json::parse_event_t::key: {
        auto key = parsed.get<std::string>();
        Frame& top = stack.back();
        if (!top.keys.insert(key).second)
          throw ConfigError(source + ": " + path() + "." + cap_text(key, 64) +
                            ": duplicate key (JSON objects here must not repeat a key)");
        top.key = key;
        break;
      }
      case json::parse_event_t::value:
        element();
        break;
    }
    return true;
  };
  try {
    return json::parse(text, cb);
  } catch (const json::exception& e) {
    // parse_error, but also out_of_range for a number beyond double ("1e999999"; fuzz_config).
    throw ConfigError(source + ": malformed JSON: " + cap_text(e.what(), 400));
  }
}

}  // namespace ravel::detail
