// SPDX-License-Identifier: Apache-2.0
// The one JSON writer of the simulator's and the lab's output (reports, the lab server's /stats
// and /ledger, the payments audit): values built with nlohmann::json or written in order with
// json_writer, every string escaped by the one helper of src/detail/json_writer.hpp.
//
//   json_writer w;
//   w.begin_object().field("name", r.name).fixed("amplification", r.amplification, 4);
//   w.end_object();
//   std::string text = std::move(w).line();  // {"name":"none","amplification":1.0000}\n
//
// Bad UTF-8 (a name read from a file is bytes): every byte that is not part of a well-formed
// UTF-8 sequence is written as U+FFFD (the replacement character), never an error and never the
// raw byte, so the output is always valid JSON and valid UTF-8 (detail::dump_json).
//
// json_writer keeps the reports' documented number formats: a figure with a fixed number of
// decimals (`fixed`: "1.0000"; nlohmann::json would print the shortest form, "1.0"). Not
// thread-safe; each writer is used by one thread.
#ifndef STORMGUARD_ENGINE_JSON_WRITER_HPP
#define STORMGUARD_ENGINE_JSON_WRITER_HPP

#include <fmt/format.h>

#include <concepts>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "detail/json_writer.hpp"
#include "stormguard/detail/format.hpp"

namespace stormguard::sim::engine {

// The one JSON dump and string-escaping helpers (src/detail/json_writer.hpp).
using stormguard::detail::dump_json;
using stormguard::detail::json_string;

class json_writer {
 public:
  json_writer& begin_object() { return open('{'); }
  json_writer& end_object() { return close('}'); }
  json_writer& begin_array() { return open('['); }
  json_writer& end_array() { return close(']'); }

  // A report's object opened with its first members: {"scenario":NAME,"seed":SEED
  json_writer& begin_report(std::string_view scenario, std::uint64_t seed) {
    return begin_object().field("scenario", scenario).field("seed", seed);
  }

  // The next member's key (in an object).
  json_writer& key(std::string_view name) {
    separate();
    out_ += json_string(name);
    out_ += ':';
    after_key_ = true;
    return *this;
  }

  json_writer& value(std::string_view text) { return put(json_string(text)); }
  json_writer& value(const std::string& text) { return value(std::string_view(text)); }
  json_writer& value(const char* text) { return value(std::string_view(text)); }
  json_writer& value(bool b) { return put(b ? "true" : "false"); }
  template <std::integral T>
  json_writer& value(T n) {
    return put(fmt::format("{}", n));
  }
  json_writer& null() { return put("null"); }
  // A double as nlohmann::json writes it (the shortest exact form, "1.0" for a whole number).
  json_writer& value(double v) { return put(dump_json(nlohmann::json(v))); }
  template <class T>
  json_writer& value(const std::optional<T>& v) {
    return v ? value(*v) : null();
  }
  // A value built with nlohmann::json.
  json_writer& value(const nlohmann::ordered_json& j) { return put(dump_json(j)); }
  // Text that is already JSON (another writer's output).
  json_writer& raw(std::string_view json) { return put(std::string(json)); }
  // A number with `decimals` decimals ("1.0000"), or null.
  json_writer& fixed(std::optional<double> v, int decimals) {
    return v ? put(fmt::format("{:.{}f}", *v, decimals)) : null();
  }
  // A number in its shortest exact form ("1000", "2.5").
  json_writer& number(double v) { return put(stormguard::detail::format_double(v)); }

  // key + value in one call.
  template <class T>
  json_writer& field(std::string_view name, const T& v) {
    return key(name).value(v);
  }
  json_writer& fixed(std::string_view name, std::optional<double> v, int decimals) {
    return key(name).fixed(v, decimals);
  }
  json_writer& number(std::string_view name, double v) { return key(name).number(v); }

  // The text written so far.
  [[nodiscard]] const std::string& text() const noexcept { return out_; }
  // The text, ended by a newline.
  [[nodiscard]] std::string line() && {
    out_ += '\n';
    return std::move(out_);
  }

 private:
  void separate() {
    if (!first_.empty() && !first_.back()) out_ += ',';
    if (!first_.empty()) first_.back() = false;
  }
  json_writer& put(std::string_view text) {
    if (!after_key_) separate();
    after_key_ = false;
    out_ += text;
    return *this;
  }
  json_writer& open(char c) {
    if (!after_key_) separate();
    after_key_ = false;
    out_ += c;
    first_.push_back(true);
    return *this;
  }
  json_writer& close(char c) {
    out_ += c;
    first_.pop_back();
    return *this;
  }

  std::string out_;
  std::vector<bool> first_;  // per open object or array: nothing written in it yet
  bool after_key_ = false;
};

}  // namespace stormguard::sim::engine

#endif  // STORMGUARD_ENGINE_JSON_WRITER_HPP
