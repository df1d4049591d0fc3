// SPDX-License-Identifier: Apache-2.0
// The HTTP syntax rules of stormguard/http/syntax.hpp: ASCII only, no locale.
#include "stormguard/http/syntax.hpp"

#include <algorithm>

#include "stormguard/idempotency.hpp"

namespace stormguard::http {

bool is_token(std::string_view s) noexcept {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return is_tchar(c); });
}

std::string to_lower_ascii(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = to_lower_ascii(c);
  return out;
}

bool iequals_ascii(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return to_lower_ascii(x) == to_lower_ascii(y);
         });
}

std::size_t invalid_field_value_byte(std::string_view value) noexcept {
  for (std::size_t i = 0; i < value.size(); ++i) {
    const auto u = static_cast<unsigned char>(value[i]);
    if ((u < 0x20 && u != '\t') || u == 0x7F) return i;
  }
  return std::string_view::npos;
}

std::optional<field_line> parse_field_line(std::string_view line) noexcept {
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const std::string_view name = trim_ows(line.substr(0, colon));
  if (!is_token(name)) return std::nullopt;
  return field_line{name, trim_ows(line.substr(colon + 1))};
}

std::optional<field_problem> check_request_field(std::string_view name,
                                                 std::string_view value) noexcept {
  if (!is_token(name)) return field_problem::name_not_token;
  if (invalid_field_value_byte(value) != std::string_view::npos) {
    return field_problem::value_has_control;
  }
  if (iequals_ascii(name, "Content-Length")) return field_problem::content_length;
  if (iequals_ascii(name, idempotency_key_header)) return field_problem::idempotency_key;
  return std::nullopt;
}

}  // namespace stormguard::http
