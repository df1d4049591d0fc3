// SPDX-License-Identifier: Apache-2.0
// Internal: the ASCII character rules of HTTP (RFC 9110) that the core's Retry-After parser and
// the HTTP library (stormguard/http/syntax.hpp, which re-exports them) share: one home for the
// rules, in the core because the core (std-only) cannot depend on the HTTP library. ASCII-only,
// independent of the C/C++ locale.
#ifndef STORMGUARD_DETAIL_HTTP_SYNTAX_HPP
#define STORMGUARD_DETAIL_HTTP_SYNTAX_HPP

#include <cstddef>
#include <string_view>

namespace stormguard::detail {

/// Whether `c` is a tchar (RFC 9110 §5.6.2): an ASCII letter or digit, or one of
/// ``!#$%&'*+-.^_`|~``. Bytes >= 0x80 are never tchars.
[[nodiscard]] constexpr bool is_tchar(char c) noexcept {
  const auto u = static_cast<unsigned char>(c);
  if ((u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z')) return true;
  for (const char s : std::string_view("!#$%&'*+-.^_`|~")) {
    if (c == s) return true;
  }
  return false;
}

/// `c` with A..Z mapped to a..z; every other byte unchanged (no locale).
[[nodiscard]] constexpr char to_lower_ascii(char c) noexcept {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

/// Whether `a` and `b` are equal with A..Z taken as a..z (field names, RFC 9110 §5.1; no locale).
[[nodiscard]] constexpr bool equals_ignoring_case(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (to_lower_ascii(a[i]) != to_lower_ascii(b[i])) return false;
  }
  return true;
}

/// Whether `c` is optional whitespace, OWS (RFC 9110 §5.6.3): SP or HTAB.
[[nodiscard]] constexpr bool is_ows(char c) noexcept { return c == ' ' || c == '\t'; }

/// RFC 6750 §2.1: b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=", the
/// form of a bearer token.
[[nodiscard]] constexpr bool is_b64token(std::string_view t) noexcept {
  const auto token_char = [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~' || c == '+' || c == '/';
  };
  std::size_t i = 0;
  while (i < t.size() && token_char(t[i])) ++i;
  if (i == 0) return false;
  while (i < t.size() && t[i] == '=') ++i;
  return i == t.size();
}

/// `s` without leading and trailing SP and HTAB (RFC 9110 §5.5: a field value excludes the
/// whitespace around it). CR and LF are not whitespace here.
[[nodiscard]] constexpr std::string_view trim_ows(std::string_view s) noexcept {
  while (!s.empty() && is_ows(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ows(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace stormguard::detail

#endif  // STORMGUARD_DETAIL_HTTP_SYNTAX_HPP
