#include "stormguard/sim/scenario.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sim/builtin_scenarios.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"

namespace stormguard::sim {

namespace {

using json = nlohmann::json;

constexpr std::int64_t k_max_requests = 10'000'000;
constexpr int k_max_clients = 100'000;
constexpr int k_max_workers = 1'000'000;
constexpr std::int64_t k_max_queue_limit = 100'000'000;
constexpr duration k_max_length = std::chrono::hours(1);
constexpr duration k_max_timeout = std::chrono::hours(1);
constexpr duration k_max_service_time = std::chrono::hours(1);
constexpr std::size_t k_max_file_bytes = 1024 * 1024;
constexpr int k_max_depth = 64;
constexpr int k_max_retries = 1000;

// Thrown inside the parser only; parse_scenario turns it into a scenario_error.
struct parse_failure {
  scenario_error error;
};

[[noreturn]] void fail(std::string field, const std::string& problem) {
  std::string message = field.empty() ? problem : field + ": " + problem;
  throw parse_failure{scenario_error{std::move(field), std::move(message)}};
}

// The value for an error message: scalars as JSON text shortened to one line, arrays and objects
// by their type only (dumping them whole could be huge, and dump() recurses once per level).
std::string quote(const json& value) {
  if (value.is_array()) return value.empty() ? "an empty array" : "an array";
  if (value.is_object()) return value.empty() ? "an empty object" : "an object";
  // A string as the user wrote it: escaped and cut by the one helper every message uses.
  if (value.is_string()) return stormguard::detail::quote_for_message(value.get<std::string>());
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

// A string as the user wrote it, in double quotes, shortened to one line.
std::string quote_text(const std::string& text) { return quote(json(text)); }

std::string quote_duration(duration d) { return "\"" + format_duration(d) + "\""; }

// A limit for a message: "1h" rather than format_duration's "3600s".
std::string limit_text(duration d) {
  if (d % std::chrono::hours(1) == duration::zero()) {
    return std::to_string(d / std::chrono::hours(1)) + "h";
  }
  return format_duration(d);
}

std::string join_path(const std::string& prefix, std::string_view key) {
  return prefix.empty() ? std::string(key) : prefix + "." + std::string(key);
}

// A field's path for a message: as written when it is plain printable ASCII, else quoted and
// escaped (a key is the user's text too).
std::string field_text(const std::string& path) {
  const bool plain = std::all_of(path.begin(), path.end(), [](char c) {
    return c > ' ' && c < 0x7f && c != '"' && c != '\\';
  });
  return plain && path.size() <= stormguard::detail::k_max_echo
             ? path
             : stormguard::detail::quote_for_message(path);
}

// Reads the fields of one JSON object, rejecting unknown ones.
class object_reader {
 public:
  object_reader(const json& object, std::string path, std::vector<std::string_view> known)
      : object_(object), path_(std::move(path)) {
    if (!object_.is_object()) {
      fail(path_, "must be a JSON object, got " + quote(object_));
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

  [[nodiscard]] const json& required(std::string_view key, std::string_view expected) const {
    auto it = object_.find(key);
    if (it == object_.end()) {
      fail(field(key), "missing (expected " + std::string(expected) + ")");
    }
    return *it;
  }

  [[nodiscard]] std::string field(std::string_view key) const { return join_path(path_, key); }

  [[nodiscard]] std::string string(std::string_view key) const {
    const json& v = required(key, "a string");
    if (!v.is_string()) fail(field(key), "must be a string, got " + quote(v));
    return v.get<std::string>();
  }

  // A duration string whose value satisfies `in_range`, which `range` describes ("in (0, 1h]").
  // Every error states the field's real range and quotes the text the user wrote.
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
      fail(field(key),
           "must be a duration string: a whole number of nanoseconds with a unit (ns, "
           "us, ms, s, min, h), " +
               range + ", such as \"20ms\" or \"1.5s\"; got " + quote_text(text));
    }
    if (!in_range(*d)) fail(field(key), "must be " + range + ", got " + quote_text(text));
    return *d;
  }

  // A duration in (0, max].
  [[nodiscard]] duration positive_time(std::string_view key, duration max) const {
    return time(key, "in (0, " + limit_text(max) + "]",
                [max](duration d) { return d > duration::zero() && d <= max; });
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

  [[nodiscard]] double number(std::string_view key) const {
    const json& v = required(key, "a number");
    if (!v.is_number()) fail(field(key), "must be a number, got " + quote(v));
    return v.get<double>();
  }

 private:
  const json& object_;
  std::string path_;
};

scenario read_scenario(const json& doc) {
  if (!doc.is_object()) fail("", "a scenario must be a JSON object, got " + quote(doc));
  object_reader top(doc, "",
                    {"name", "description", "seed", "duration", "requests_per_second", "clients",
                     "timeout", "server", "incident", "max_retries"});
  scenario s;
  s.name = top.string("name");
  if (top.has("description")) s.description = top.string("description");
  s.seed = top.seed("seed");
  s.length = top.positive_time("duration", k_max_length);
  s.requests_per_second = top.number("requests_per_second");
  s.clients = static_cast<int>(top.integer("clients", 1, k_max_clients));
  s.timeout = top.positive_time("timeout", k_max_timeout);

  object_reader server(
      top.required("server", "an object"), "server",
      {"workers", "queue_limit", "service_time", "service_distribution", "overload"});
  s.workers = static_cast<int>(server.integer("workers", 1, k_max_workers));
  s.queue_limit = server.integer("queue_limit", 0, k_max_queue_limit);
  s.service_time = server.positive_time("service_time", k_max_service_time);
  if (server.has("service_distribution")) {
    const std::string d = server.string("service_distribution");
    if (d == "fixed") {
      s.distribution = service_distribution::fixed;
    } else if (d == "exponential") {
      s.distribution = service_distribution::exponential;
    } else {
      fail("server.service_distribution",
           "must be \"fixed\" or \"exponential\", got \"" + d + "\"");
    }
  }

  if (server.has("overload") && !doc["server"]["overload"].is_null()) {
    object_reader overload_reader(doc["server"]["overload"], "server.overload",
                                  {"above_rate", "service_time"});
    overload o;
    o.above_rate = overload_reader.number("above_rate");
    if (!std::isfinite(o.above_rate) || o.above_rate <= 0.0) {
      fail("server.overload.above_rate", "must be a number > 0 (attempts per second), got " +
                                             quote(doc["server"]["overload"]["above_rate"]));
    }
    o.service_time = overload_reader.positive_time("service_time", k_max_service_time);
    s.overload = o;
  }

  const json& inc = top.required("incident", "an object or null");
  if (!inc.is_null()) {
    object_reader incident_reader(inc, "incident",
                                  {"start", "end", "service_time", "error_rate", "loss_rate"});
    const duration length = s.length;
    const duration start =
        incident_reader.time("start", "in [0, duration) = [0, " + format_duration(length) + ")",
                             [length](duration d) { return d >= duration::zero() && d < length; });
    const duration end =
        incident_reader.time("end", "after incident.start (" + format_duration(start) + ")",
                             [start](duration d) { return d > start; });
    incident i{start, end, std::nullopt, 0.0, 0.0};
    if (incident_reader.has("service_time")) {
      i.service_time = incident_reader.positive_time("service_time", k_max_service_time);
    }
    const auto fraction = [&](std::string_view key) {
      const double value = incident_reader.number(key);
      if (!(value >= 0.0 && value <= 1.0)) {
        fail(incident_reader.field(key),
             "must be a number in [0, 1], got " + quote(inc[std::string(key)]));
      }
      return value;
    };
    if (incident_reader.has("error_rate")) i.error_rate = fraction("error_rate");
    if (incident_reader.has("loss_rate")) i.loss_rate = fraction("loss_rate");
    s.incident = i;
  }

  if (top.has("max_retries")) {
    s.max_retries = static_cast<int>(top.integer("max_retries", 1, k_max_retries));
  }

  if (auto problem = validate(s)) throw parse_failure{*std::move(problem)};
  return s;
}

// Rejects duplicate keys, which nlohmann::json would otherwise resolve silently to the last one,
// and names the first one by its full path ("server.workers").
struct duplicate_key_check {
  struct level {
    std::string path;  // the path of this object or array ("" at the top)
    std::set<std::string> keys;
    std::string last_key;  // the key whose value is being parsed (objects only)
    bool array = false;
  };
  std::vector<level> levels;
  std::string duplicate;

  // The path of a value that starts now inside the innermost object or array.
  [[nodiscard]] std::string child_path() const {
    if (levels.empty()) return "";
    const level& l = levels.back();
    return l.array ? l.path : join_path(l.path, l.last_key);
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
      default:
        break;
    }
    return true;
  }
};

// The deepest nesting of arrays and objects in `text` (strings skipped), and the line and column
// of the bracket that first exceeds `limit`. Runs before the parser so that no later step (the
// parser, an error message) ever meets a pathologically deep document.
struct depth_violation {
  std::size_t line;
  std::size_t column;
};
std::optional<depth_violation> find_excess_depth(std::string_view text, int limit) {
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

}  // namespace

std::string_view to_string(service_distribution d) noexcept {
  switch (d) {
    case service_distribution::fixed:
      return "fixed";
    case service_distribution::exponential:
      return "exponential";
  }
  return "unknown";
}

// One duration grammar for files and command lines: the core's (stormguard/duration_text.hpp).
std::optional<scenario_error> validate(const scenario& s) {
  auto error = [](std::string field, const std::string& problem) {
    std::string message = field + ": " + problem;
    return scenario_error{std::move(field), std::move(message)};
  };
  if (s.name.empty()) return error("name", "must not be empty");
  if (s.length <= duration::zero() || s.length > k_max_length) {
    return error("duration", "must be in (0, " + limit_text(k_max_length) + "], got " +
                                 quote_duration(s.length));
  }
  if (!std::isfinite(s.requests_per_second) || s.requests_per_second <= 0.0) {
    return error("requests_per_second",
                 "must be a number > 0, got " + detail::format_double(s.requests_per_second));
  }
  const double expected_requests =
      s.requests_per_second * std::chrono::duration<double>(s.length).count();
  if (expected_requests > static_cast<double>(k_max_requests)) {
    // The simulator keeps 30-40 bytes per logical request: at most about 400 MB at the limit.
    return error("requests_per_second",
                 "requests_per_second x duration must be at most " +
                     std::to_string(k_max_requests) +
                     " logical requests (a memory bound: about 400 MB at the limit), got " +
                     detail::format_double(s.requests_per_second) + " x " +
                     format_duration(s.length) + " = " + detail::format_double(expected_requests));
  }
  if (s.clients < 1 || s.clients > k_max_clients) {
    return error("clients", "must be an integer in [1, " + std::to_string(k_max_clients) +
                                "], got " + std::to_string(s.clients));
  }
  if (s.timeout <= duration::zero() || s.timeout > k_max_timeout) {
    return error("timeout", "must be in (0, " + limit_text(k_max_timeout) + "], got " +
                                quote_duration(s.timeout));
  }
  if (s.workers < 1 || s.workers > k_max_workers) {
    return error("server.workers", "must be an integer in [1, " + std::to_string(k_max_workers) +
                                       "], got " + std::to_string(s.workers));
  }
  if (s.queue_limit < 0 || s.queue_limit > k_max_queue_limit) {
    return error("server.queue_limit", "must be an integer in [0, " +
                                           std::to_string(k_max_queue_limit) + "], got " +
                                           std::to_string(s.queue_limit));
  }
  if (s.service_time <= duration::zero() || s.service_time > k_max_service_time) {
    return error("server.service_time", "must be in (0, " + limit_text(k_max_service_time) +
                                            "], got " + quote_duration(s.service_time));
  }
  if (s.distribution != service_distribution::fixed &&
      s.distribution != service_distribution::exponential) {
    return error("server.service_distribution", "must be \"fixed\" or \"exponential\"");
  }
  if (s.incident) {
    const incident& inc = *s.incident;
    if (inc.start < duration::zero() || inc.start >= s.length) {
      return error("incident.start", "must be >= 0 and before duration (" +
                                         format_duration(s.length) + "), got " +
                                         quote_duration(inc.start));
    }
    if (inc.end <= inc.start) {
      return error("incident.end", "must be after incident.start (" + format_duration(inc.start) +
                                       "), got " + quote_duration(inc.end));
    }
    if (inc.service_time &&
        (*inc.service_time <= duration::zero() || *inc.service_time > k_max_service_time)) {
      return error("incident.service_time", "must be in (0, " + limit_text(k_max_service_time) +
                                                "], got " + quote_duration(*inc.service_time));
    }
    if (!(inc.error_rate >= 0.0 && inc.error_rate <= 1.0)) {
      return error("incident.error_rate",
                   "must be a number in [0, 1], got " + detail::format_double(inc.error_rate));
    }
    if (!(inc.loss_rate >= 0.0 && inc.loss_rate <= 1.0)) {
      return error("incident.loss_rate",
                   "must be a number in [0, 1], got " + detail::format_double(inc.loss_rate));
    }
    if (inc.error_rate + inc.loss_rate > 1.0) {
      return error("incident.loss_rate", "error_rate + loss_rate must be at most 1, got " +
                                             detail::format_double(inc.error_rate) + " + " +
                                             detail::format_double(inc.loss_rate));
    }
  }
  if (s.overload) {
    if (!std::isfinite(s.overload->above_rate) || s.overload->above_rate <= 0.0) {
      return error("server.overload.above_rate",
                   "must be a number > 0, got " + detail::format_double(s.overload->above_rate));
    }
    if (s.overload->service_time <= duration::zero() ||
        s.overload->service_time > k_max_service_time) {
      return error("server.overload.service_time", "must be in (0, " +
                                                       limit_text(k_max_service_time) + "], got " +
                                                       quote_duration(s.overload->service_time));
    }
  }
  if (s.max_retries && (*s.max_retries < 1 || *s.max_retries > k_max_retries)) {
    return error("max_retries", "must be an integer in [1, " + std::to_string(k_max_retries) +
                                    "], got " + std::to_string(*s.max_retries));
  }
  return std::nullopt;
}

scenario_result parse_scenario(std::string_view json_text) {
  if (auto deep = find_excess_depth(json_text, k_max_depth)) {
    return failure{scenario_error{"", "invalid scenario: arrays and objects nested more than " +
                                          std::to_string(k_max_depth) + " levels deep at line " +
                                          std::to_string(deep->line) + ", column " +
                                          std::to_string(deep->column) + " (a scenario needs 2)"}};
  }
  duplicate_key_check check;
  json doc;
  try {
    doc = json::parse(json_text.begin(), json_text.end(), std::ref(check),
                      /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const json::exception& e) {
    // what() is "[json.exception.parse_error.101] parse error at line L, column C: ...".
    std::string what = e.what();
    if (auto close = what.find("] "); close != std::string::npos) what.erase(0, close + 2);
    return failure{scenario_error{"", "invalid JSON: " + what}};
  }
  if (!check.duplicate.empty()) {
    return failure{scenario_error{
        check.duplicate, field_text(check.duplicate) + ": the field appears more than once"}};
  }
  try {
    return read_scenario(doc);
  } catch (const parse_failure& f) {
    return failure{f.error};
  } catch (const json::exception& e) {  // not expected: every access is checked first
    return failure{scenario_error{"", std::string("invalid scenario: ") + e.what()}};
  }
}

scenario_result load_scenario(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return failure{scenario_error{"", path.string() + ": is a directory, not a scenario file"}};
  }
  // C stdio rather than iostreams: fopen and fread report why they failed in errno.
  errno = 0;
  std::FILE* file = std::fopen(path.string().c_str(), "rb");
  if (file == nullptr) {
    const int error = errno;
    return failure{scenario_error{
        "", path.string() + ": cannot open the scenario file (" + std::strerror(error) + ")"}};
  }
  // Read at most one byte more than the limit: enough to tell that a file (or /dev/zero) is too
  // large without reading it all.
  std::string text(k_max_file_bytes + 1, '\0');
  std::size_t size = 0;
  while (size < text.size()) {
    const std::size_t n = std::fread(text.data() + size, 1, text.size() - size, file);
    size += n;
    if (n == 0) break;
  }
  const bool read_error = std::ferror(file) != 0;
  const int error = errno;
  std::fclose(file);
  if (read_error) {
    return failure{scenario_error{
        "", path.string() + ": cannot read the scenario file (" + std::strerror(error) + ")"}};
  }
  if (size > k_max_file_bytes) {
    return failure{scenario_error{"", path.string() + ": the scenario file is larger than " +
                                          std::to_string(k_max_file_bytes) +
                                          " bytes (1 MiB), the limit for a scenario"}};
  }
  text.resize(size);
  auto result = parse_scenario(text);
  if (!result) result.error().message = path.string() + ": " + result.error().message;
  return result;
}

namespace {

// The built-in scenario of that name, parsed from its embedded file (builtin_scenarios.hpp).
std::optional<scenario> parse_builtin(std::string_view name) {
  for (const auto& file : embedded::builtin_scenario_files()) {
    if (file.name != name) continue;
    auto parsed = parse_scenario(file.json);
    if (!parsed) {
      throw std::logic_error("stormguard::sim: the built-in scenario " + std::string(name) +
                             " is invalid: " + parsed.error().message);
    }
    return *std::move(parsed);
  }
  return std::nullopt;
}

scenario builtin(std::string_view name) {
  auto s = parse_builtin(name);
  if (!s) throw std::logic_error("stormguard::sim: no built-in scenario " + std::string(name));
  return *std::move(s);
}

}  // namespace

scenario friday_night() { return builtin("friday-night"); }
scenario metastable() { return builtin("metastable"); }
scenario metastable_slowdown() { return builtin("metastable-slowdown"); }
scenario outage_80() { return builtin("outage-80"); }
scenario outage_80_fleet() { return builtin("outage-80-fleet"); }

std::optional<scenario> builtin_scenario(std::string_view name) { return parse_builtin(name); }

std::string builtin_scenario_names() {
  std::string names;
  for (const auto& file : embedded::builtin_scenario_files()) {
    names += (names.empty() ? "" : ", ") + std::string(file.name);
  }
  return names;
}

std::string to_json(const scenario& s) {
  nlohmann::ordered_json doc;
  doc["name"] = s.name;
  doc["description"] = s.description;
  doc["seed"] = s.seed;
  doc["duration"] = format_duration(s.length);
  doc["requests_per_second"] = s.requests_per_second;
  doc["clients"] = s.clients;
  doc["timeout"] = format_duration(s.timeout);
  doc["server"]["workers"] = s.workers;
  doc["server"]["queue_limit"] = s.queue_limit;
  doc["server"]["service_time"] = format_duration(s.service_time);
  doc["server"]["service_distribution"] = std::string(to_string(s.distribution));
  if (s.overload) {
    doc["server"]["overload"]["above_rate"] = s.overload->above_rate;
    doc["server"]["overload"]["service_time"] = format_duration(s.overload->service_time);
  }
  if (s.incident) {
    doc["incident"]["start"] = format_duration(s.incident->start);
    doc["incident"]["end"] = format_duration(s.incident->end);
    if (s.incident->service_time) {
      doc["incident"]["service_time"] = format_duration(*s.incident->service_time);
    }
    if (s.incident->error_rate != 0.0) doc["incident"]["error_rate"] = s.incident->error_rate;
    if (s.incident->loss_rate != 0.0) doc["incident"]["loss_rate"] = s.incident->loss_rate;
  } else {
    doc["incident"] = nullptr;
  }
  if (s.max_retries) doc["max_retries"] = *s.max_retries;
  return doc.dump(2) + "\n";
}

}  // namespace stormguard::sim
