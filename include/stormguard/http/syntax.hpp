// SPDX-License-Identifier: Apache-2.0
/// \file
/// The HTTP syntax rules that stormguard's client and the
/// `stormguard http` command share (one home, so that they cannot drift apart): tokens
/// (RFC 9110 §5.6.2), field names and values (RFC 9110 §5.1, §5.5), optional whitespace
/// (§5.6.3), field lines "name: value" (RFC 9112 §5.1), and which request fields the client sets
/// itself. Every rule is ASCII-only and independent of the C/C++ locale: a Turkish or any other
/// locale never changes what is a token or which names compare equal.
///
/// \code{.cpp}
///  using namespace stormguard::http;
///  is_token("POST");                                   // true
///  is_token("GET /");                                  // false: SP is not a tchar
///  iequals_ascii("content-length", "Content-Length");  // true
///  auto f = parse_field_line("Accept:  text/plain ");  // {"Accept", "text/plain"}
///  check_request_field("X-Trace", "a\r\nb");           // field_problem::value_has_control
/// \endcode
///
/// Thread-safety: every function is pure (no state, no locale) and safe from any thread.
#ifndef STORMGUARD_HTTP_SYNTAX_HPP
#define STORMGUARD_HTTP_SYNTAX_HPP

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "stormguard/detail/http_syntax.hpp"
#include "stormguard/export.hpp"

namespace stormguard::http {

// The character rules, shared with the core's Retry-After parser
// (stormguard/detail/http_syntax.hpp): is_tchar (RFC 9110 §5.6.2), to_lower_ascii(char), is_ows
// (§5.6.3) and trim_ows (§5.5).
using stormguard::detail::is_ows;
using stormguard::detail::is_tchar;
using stormguard::detail::to_lower_ascii;
using stormguard::detail::trim_ows;

/// Whether `s` is a token (RFC 9110 §5.6.2: 1*tchar): a method (§9.1) or a field name (§5.1).
/// The empty string is not a token.
[[nodiscard]] STORMGUARD_EXPORT bool is_token(std::string_view s) noexcept;

/// `s` with A..Z mapped to a..z (no locale): e.g. a scheme or host for a map key.
[[nodiscard]] STORMGUARD_EXPORT std::string to_lower_ascii(std::string_view s);

/// Whether `a` and `b` are equal ignoring ASCII case, as field names compare (RFC 9110 §5.1) and
/// as "auto" is checked: only A..Z and a..z fold, whatever the locale; bytes >= 0x80 must match
/// exactly.
[[nodiscard]] STORMGUARD_EXPORT bool iequals_ascii(std::string_view a, std::string_view b) noexcept;

/// The position of the first byte that a field value may not contain, or std::string_view::npos
/// when there is none. RFC 9110 §5.5: field-value = *field-content, whose bytes are VCHAR,
/// obs-text (0x80..0xFF), SP and HTAB; so every other control byte (0x00..0x08, 0x0A..0x1F,
/// 0x7F) is invalid, including CR, LF and NUL ("invalid and dangerous": header injection).
[[nodiscard]] STORMGUARD_EXPORT std::size_t invalid_field_value_byte(
    std::string_view value) noexcept;

/// A field line split into its name and value (views into the line).
struct field_line {
  std::string_view name;   ///< a token (RFC 9110 §5.1)
  std::string_view value;  ///< without the surrounding OWS
};

/// Splits a field line "name: value" (RFC 9112 §5.1), given without its line terminator, at the
/// first colon. The name is taken without surrounding OWS (lenient towards typed input; RFC 9112
/// forbids whitespace before the colon) and must be a token; the value is trimmed of OWS.
/// std::nullopt when there is no colon or the name is not a token. The value is not checked
/// (a CR or LF stays in it): see invalid_field_value_byte.
[[nodiscard]] STORMGUARD_EXPORT std::optional<field_line> parse_field_line(
    std::string_view line) noexcept;

/// Why a request field may not be sent as given (see check_request_field).
enum class field_problem {
  name_not_token,     ///< the name is not an RFC 9110 token (§5.1), e.g. empty or with a space
  value_has_control,  ///< the value holds a control byte (invalid_field_value_byte)
  content_length,     ///< Content-Length: the client sets it from the body; a different one
                      ///< makes the server wait for bytes that never come, or read the rest of
                      ///< the body as a second request
  idempotency_key,    ///< Idempotency-Key: set through the request's key option instead, so
                      ///< that the client knows the request carries one (and may retry it)
};

/// Whether a request field (name, value) may be sent as given by stormguard's client: std::nullopt
/// when it may, otherwise the first problem in the order of field_problem. Names compare
/// ASCII case-insensitively. The caller words the message (it knows its own option names).
[[nodiscard]] STORMGUARD_EXPORT std::optional<field_problem> check_request_field(
    std::string_view name, std::string_view value) noexcept;

}  // namespace stormguard::http

#endif  // STORMGUARD_HTTP_SYNTAX_HPP
