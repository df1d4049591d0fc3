// SPDX-License-Identifier: Apache-2.0
// The one writer of JSON text for every library's output (the simulator's reports, the lab
// server's wire formats, the idempotency guard's error bodies): values built with
// nlohmann::json, dumped by dump_json, every string escaped by json_string. An internal header of
// the stormguard_json_reader target (src/detail/), never installed.
//
//   std::string body = stormguard::detail::dump_json(nlohmann::ordered_json{{"code", code}});
//   std::string literal = stormguard::detail::json_string(name);  // "\"name\"", quotes included
//
// Bad UTF-8 (a name read from a file or a header is bytes): every byte that is not part of a
// well-formed UTF-8 sequence is written as U+FFFD (the replacement character, nlohmann::json's
// error_handler_t::replace), never an error and never the raw byte, so the output is always
// valid JSON and valid UTF-8. Pure functions; thread-safe.
#ifndef STORMGUARD_DETAIL_JSON_WRITER_HPP
#define STORMGUARD_DETAIL_JSON_WRITER_HPP

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace stormguard::detail {

/// `j` as compact JSON text (no newline), bad UTF-8 replaced as said above.
inline std::string dump_json(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}
/// `j` as compact JSON text (no newline), bad UTF-8 replaced as said above.
inline std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}
/// `j` indented by `indent` spaces per level (a document meant to be read and edited).
inline std::string dump_json(const nlohmann::ordered_json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// `text` as a JSON string literal, quotes included: the one escaping helper.
inline std::string json_string(std::string_view text) {
  return dump_json(nlohmann::json(std::string(text)));
}

}  // namespace stormguard::detail

#endif  // STORMGUARD_DETAIL_JSON_WRITER_HPP
