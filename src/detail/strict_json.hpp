// SPDX-License-Identifier: Apache-2.0
// Internal (private to the libraries that read JSON files: stormguard::sim's scenarios and
// stormguard::config's policies): the one strict reading of a JSON document.
//
//  - parse(text, depth_limit): nesting deeper than the limit is rejected before parsing (so no
//    later step meets a pathologically deep document), bad JSON is reported with its line and
//    column, and a key that appears twice in one object is an error naming its full path
//    ("server.workers"), where nlohmann::json would silently keep the last one.
//  - object_reader: the fields of one object, rejecting unknown ones, with typed getters whose
//    errors name the field path, the valid range and the value as written.
//
// Every error is thrown as `failure` (field path + a complete message starting with it); the
// callers turn it into their own error type.
#ifndef STORMGUARD_SRC_DETAIL_STRICT_JSON_HPP
#define STORMGUARD_SRC_DETAIL_STRICT_JSON_HPP

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stormguard/clock.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"

namespace stormguard::detail::strict_json {

using json = nlohmann::json;

/// A rejected document: `field` is the JSON path ("" for the document), `message` a sentence
/// that starts with it.
struct failure {
  std::string field;
  std::string message;
};

[[noreturn]] inline void fail(std::string field, const std::string& problem) {
  std::string message = field.empty() ? problem : field + ": " + problem;
  throw failure{std::move(field), std::move(message)};
}

/// The value for an error message: scalars as JSON text shortened to one line, arrays and
/// objects by their type only (dumping them whole could be huge, and dump() recurses once per
/// level); strings as the user wrote them, escaped and cut by quote_for_message.
inline std::string quote(const json& value) {
  if (value.is_array()) return value.empty() ? "an empty array" : "an array";
  if (value.is_object()) return value.empty() ? "an empty object" : "an object";
  if (value.is_string()) return quote_for_message(value.get<std::string>());
  // JSON text of a number, true, false or null: cut by the same rule as a quoted value.
  return escape_control(value.dump(-1, ' ', false, json::error_handler_t::replace), k_max_echo);
}

/// A limit for a message: "1h" rather than format_duration's "3600s".
inline std::string limit_text(duration d) {
  if (d % std::chrono::hours(1) == duration::zero() && d > duration::zero()) {
    return std::to_string(d / std::chrono::hours(1)) + "h";
  }
  return format_duration(d);
}

inline std::string join_path(const std::string& prefix, std::string_view key) {
  return prefix.empty() ? std::string(key) : prefix + "." + std::string(key);
}

inline std::string index_path(const std::string& prefix, std::size_t i) {
  return prefix + "[" + std::to_string(i) + "]";
}

/// A field's path for a message: as written when it is plain printable ASCII, else quoted and
/// escaped (a key is the user's text too).
inline std::string field_text(const std::string& path) {
  const bool plain = std::all_of(path.begin(), path.end(), [](char c) {
    return c > ' ' && c < 0x7f && c != '"' && c != '\\';
  });
  return plain && path.size() <= k_max_echo ? path : quote_for_message(path);
}

/// Reads the fields of one JSON object, rejecting unknown ones.
class object_reader {
 public:
  object_reader(const json& object, std::string path, std::vector<std::string_view> known)
      : object_(object), path_(std::move(path)) {
    if (!object_.is_object()) {
      fail(field_text(path_), "must be a JSON object, got " + quote(object_));
    }
    for (const auto& [key, value] : object_.items()) {
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        std::string list;
        for (auto k : known) list += (list.empty() ? "" : ", ") + std::string(k);
        fail(field_text(join_path(path_, key)),
             "unknown field (the known fields here are " + list + ")");
      }
    }
  }

  [[nodiscard]] bool has(std::string_view key) const { return object_.contains(key); }
  [[nodiscard]] const json& object() const noexcept { return object_; }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

  [[nodiscard]] const json& required(std::string_view key, std::string_view expected) const {
    auto it = object_.find(key);
    if (it == object_.end()) {
      fail(field(key), "missing (expected " + std::string(expected) + ")");
    }
    return *it;
  }

  [[nodiscard]] std::string field(std::string_view key) const {
    return field_text(join_path(path_, key));
  }

  [[nodiscard]] std::string string(std::string_view key) const {
    const json& v = required(key, "a string");
    if (!v.is_string()) fail(field(key), "must be a string, got " + quote(v));
    return v.get<std::string>();
  }

  /// A duration string whose value satisfies `in_range`, which `range` describes ("in (0, 1h]").
  /// Every error states the field's real range and quotes the text the user wrote.
  template <class InRange>
  [[nodiscard]] duration time(std::string_view key, const std::string& range,
                              InRange in_range) const {
    const std::string expected =
        "a duration string with a unit (ns, us, ms, s, min, h) " + range + ", such as \"20ms\"";
    const json& v = required(key, expected);
    if (!v.is_string()) fail(field(key), "must be " + expected + ", got " + quote(v));
    const auto& text = v.get_ref<const std::string&>();
    auto d = parse_duration(text);
    if (!d) {
      fail(field(key), "must be a duration string " + range +
                           ", such as \"20ms\" or \"1.5s\"; got " + quote(v) + " (" +
                           duration_error(text) + ")");
    }
    if (!in_range(*d)) fail(field(key), "must be " + range + ", got " + quote(v));
    return *d;
  }

  /// A duration in (0, max].
  [[nodiscard]] duration positive_time(std::string_view key, duration max) const {
    return time(key, "in (0, " + limit_text(max) + "]",
                [max](duration d) { return d > duration::zero() && d <= max; });
  }

  /// A duration in [lo, hi].
  [[nodiscard]] duration time_between(std::string_view key, duration lo, duration hi) const {
    return time(key, "in [" + limit_text(lo) + ", " + limit_text(hi) + "]",
                [lo, hi](duration d) { return d >= lo && d <= hi; });
  }

  [[nodiscard]] std::int64_t integer(std::string_view key, std::int64_t lo, std::int64_t hi) const {
    const std::string expected =
        "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    const json& v = required(key, expected);
    if (v.is_number_unsigned()) {
      const auto u = v.get<std::uint64_t>();
      if (u <= static_cast<std::uint64_t>(hi) && static_cast<std::int64_t>(u) >= lo) {
        return static_cast<std::int64_t>(u);
      }
    } else if (v.is_number_integer()) {
      const auto i = v.get<std::int64_t>();
      if (i >= lo && i <= hi) return i;
    }
    fail(field(key), "must be " + expected + ", got " + quote(v));
  }

  [[nodiscard]] std::uint64_t seed(std::string_view key) const {
    const json& v = required(key, "an integer in [0, 18446744073709551615]");
    if (!v.is_number_unsigned()) {
      fail(field(key), "must be an integer in [0, 18446744073709551615], got " + quote(v));
    }
    return v.get<std::uint64_t>();
  }

  [[nodiscard]] bool flag(std::string_view key) const {
    const json& v = required(key, "true or false");
    if (!v.is_boolean()) fail(field(key), "must be true or false, got " + quote(v));
    return v.get<bool>();
  }

  /// One of `names` (a JSON string), as the index of the name in `names`.
  template <std::size_t N>
  [[nodiscard]] std::size_t choice(std::string_view key,
                                   const std::array<std::string_view, N>& names) const {
    std::string list;
    for (std::size_t i = 0; i < N; ++i) {
      list += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + ("\"" + std::string(names[i]) + "\"");
    }
    const json& v = required(key, list);
    if (v.is_string()) {
      for (std::size_t i = 0; i < N; ++i) {
        if (v.get_ref<const std::string&>() == names[i]) return i;
      }
    }
    fail(field(key), "must be " + list + ", got " + quote(v));
  }

  [[nodiscard]] double number(std::string_view key) const {
    const json& v = required(key, "a number");
    if (!v.is_number()) fail(field(key), "must be a number, got " + quote(v));
    return v.get<double>();
  }

  /// A number in [lo, hi] (NaN is impossible in JSON; the range is written in `range`).
  [[nodiscard]] double number_between(std::string_view key, double lo, double hi) const {
    const std::string range = "a number in [" + format_double(lo) + ", " + format_double(hi) + "]";
    const json& v = required(key, range);
    if (!v.is_number()) fail(field(key), "must be " + range + ", got " + quote(v));
    const double x = v.get<double>();
    if (!(x >= lo && x <= hi)) fail(field(key), "must be " + range + ", got " + quote(v));
    return x;
  }

 private:
  const json& object_;
  std::string path_;
};

/// The message of a library class's own validation (std::invalid_argument and the like) without
/// its "stormguard::type: " prefix: a reader's error names the field, the message the setting.
inline std::string library_message(const std::exception& e) {
  std::string_view message = e.what();
  if (message.starts_with("stormguard::")) {
    if (const auto colon = message.find(": "); colon != std::string_view::npos) {
      message.remove_prefix(colon + 2);
    }
  }
  return std::string(message);
}

/// Rejects duplicate keys and names the first one by its full path ("server.workers").
struct duplicate_key_check {
  struct level {
    std::string path;  // the path of this object or array ("" at the top)
    std::set<std::string> keys;
    std::string last_key;  // the key whose value is being parsed (objects only)
    bool array = false;
    std::size_t index = 0;  // arrays: the index of the next element
  };
  std::vector<level> levels;
  std::string duplicate;

  // The path of a value that starts now inside the innermost object or array.
  [[nodiscard]] std::string child_path() {
    if (levels.empty()) return "";
    level& l = levels.back();
    return l.array ? index_path(l.path, l.index) : join_path(l.path, l.last_key);
  }

  bool operator()(int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        levels.push_back(level{child_path(), {}, {}, event == json::parse_event_t::array_start});
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!levels.empty()) levels.pop_back();
        [[fallthrough]];
      case json::parse_event_t::value:
        if (!levels.empty() && levels.back().array) ++levels.back().index;
        break;
      case json::parse_event_t::key:
        if (!levels.empty()) {
          level& l = levels.back();
          l.last_key = parsed.get<std::string>();
          if (!l.keys.insert(l.last_key).second && duplicate.empty()) {
            duplicate = join_path(l.path, l.last_key);
          }
        }
        break;
    }
    return true;
  }
};

/// The line and column of the bracket that first nests arrays and objects deeper than `limit`
/// in `text` (strings skipped), or nullopt.
struct depth_violation {
  std::size_t line;
  std::size_t column;
};
inline std::optional<depth_violation> find_excess_depth(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  std::size_t line = 1;
  std::size_t column = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    ++column;
    if (c == '\n') {
      ++line;
      column = 0;
    }
    if (in_string) {
      if (c == '\\') {
        ++i;  // skip the escaped character (never a newline in valid JSON)
        ++column;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return depth_violation{line, column};
    } else if (c == ']' || c == '}') {
      depth = std::max(0, depth - 1);
    }
  }
  return std::nullopt;
}

/// Parses `text` strictly (see the file comment); `what` names the document in the depth
/// message ("scenario"), `note` ends it (" (a scenario needs 2)"). Throws failure.
inline json parse(std::string_view text, int depth_limit, std::string_view what,
                  std::string_view note = "") {
  if (auto deep = find_excess_depth(text, depth_limit)) {
    fail("", "invalid " + std::string(what) + ": arrays and objects nested more than " +
                 std::to_string(depth_limit) + " levels deep at line " +
                 std::to_string(deep->line) + ", column " + std::to_string(deep->column) +
                 std::string(note));
  }
  duplicate_key_check check;
  json doc;
  try {
    doc = json::parse(text.begin(), text.end(), std::ref(check),
                      /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const json::exception& e) {
    // what() is "[json.exception.parse_error.101] parse error at line L, column C: ...".
    std::string message = e.what();
    if (auto close = message.find("] "); close != std::string::npos) message.erase(0, close + 2);
    fail("", "invalid JSON: " + message);
  }
  if (!check.duplicate.empty()) {
    fail(field_text(check.duplicate), "the field appears more than once");
  }
  return doc;
}

/// Reads the file at `path`, at most `limit` bytes: a directory, an unreadable file (with the
/// system's reason) and a larger one are failures whose message starts with the path and calls
/// the file "the <noun> file" ("scenario", "policy"). Reads at most limit + 1 bytes, so
/// /dev/zero is safe. A FIFO is opened without waiting for a writer (O_NONBLOCK): one with a
/// writer connected (a shell's <(...)) is read to its end; one with none is a failure that says
/// so, never a wait.
inline std::string read_file(const std::filesystem::path& path, std::size_t limit,
                             std::string_view noun) {
  const std::string file = std::string(noun) + " file";
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    fail("", path.string() + ": is a directory, not a " + file);
  }
  // open(2) with O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer, forever
  // when none comes. Then blocking reads again: a FIFO read ends at once (0 bytes) when no writer
  // is connected, and waits for the data of one that is. C stdio for the reads: fread reports
  // why it failed in errno.
  errno = 0;
  const int fd = ::open(path.string().c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    fail("", path.string() + ": cannot open the " + file + " (" + std::strerror(error) + ")");
  }
  struct stat st {};
  const bool fifo = ::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
  if (const int flags = ::fcntl(fd, F_GETFL); flags >= 0) {
    (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  }
  std::FILE* handle = ::fdopen(fd, "rb");
  if (handle == nullptr) {
    const int error = errno;
    ::close(fd);
    fail("", path.string() + ": cannot open the " + file + " (" + std::strerror(error) + ")");
  }
  std::string text(limit + 1, '\0');
  std::size_t size = 0;
  while (size < text.size()) {
    const std::size_t n = std::fread(text.data() + size, 1, text.size() - size, handle);
    size += n;
    if (n == 0) break;
  }
  const bool read_error = std::ferror(handle) != 0;
  const int error = errno;
  std::fclose(handle);
  if (read_error) {
    fail("", path.string() + ": cannot read the " + file + " (" + std::strerror(error) + ")");
  }
  if (size > limit) {
    fail("", path.string() + ": the " + file + " is larger than " + std::to_string(limit) +
                 " bytes (" + std::to_string(limit / (1024 * 1024)) + " MiB), the limit for a " +
                 std::string(noun));
  }
  if (fifo && size == 0) {
    fail("", path.string() + ": a FIFO with no writer connected (or an empty one): the " + file +
                 " is read once, not waited for");
  }
  text.resize(size);
  return text;
}

}  // namespace stormguard::detail::strict_json

#endif  // STORMGUARD_SRC_DETAIL_STRICT_JSON_HPP
