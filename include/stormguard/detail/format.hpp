// SPDX-License-Identifier: Apache-2.0
// Internal: text for error messages (the core depends on the standard library only, and
// std::format is not available in every C++20 standard library stormguard supports).
#ifndef STORMGUARD_DETAIL_FORMAT_HPP
#define STORMGUARD_DETAIL_FORMAT_HPP

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

#include "stormguard/clock.hpp"

namespace stormguard::detail {

/// A double as the shortest text that reads back to the same value ("1.5", "1e-07", "nan",
/// "inf"); a whole number below 2^53 in magnitude as an integer ("2000", "100000", never
/// "1e+05").
inline std::string format_double(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buffer[64];
  if (x == std::trunc(x) && std::fabs(x) < 9007199254740992.0) {
    const auto [end, ec] =
        std::to_chars(buffer, buffer + sizeof buffer, static_cast<std::int64_t>(x));
    return ec == std::errc{} ? std::string(buffer, end) : std::string("?");
  }
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, x);
  return ec == std::errc{} ? std::string(buffer, end) : std::string("?");
}

/// A whole number with thousands separators: 40000000 -> "40,000,000", -1234 -> "-1,234".
inline std::string format_grouped(std::int64_t n) {
  const std::string digits = std::to_string(n);
  const std::size_t first = n < 0 ? 1 : 0;
  std::string out = digits.substr(0, first);
  for (std::size_t i = first; i < digits.size(); ++i) {
    if (i != first && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

/// The longest part of a user's value that an error message echoes (see quote_for_message).
inline constexpr std::size_t k_max_echo = 80;

/// How many bytes of `text` a message shows when it keeps at most `max_bytes`: `max_bytes`, or
/// fewer so as never to cut a UTF-8 sequence in two (it backs off over continuation bytes).
inline std::size_t shown_bytes(std::string_view text, std::size_t max_bytes) noexcept {
  std::size_t shown = text.size() <= max_bytes ? text.size() : max_bytes;
  while (shown < text.size() && shown > 0 &&
         (static_cast<unsigned char>(text[shown]) & 0xc0) == 0x80) {
    --shown;
  }
  return shown;
}

/// The length of the well-formed UTF-8 sequence (RFC 3629, table 3-7 of Unicode) that starts at
/// text[i], a byte >= 0x80; 0 when none does (a stray continuation byte, a cut or overlong
/// sequence, a surrogate, a code point above U+10FFFF).
inline std::size_t utf8_sequence_length(std::string_view text, std::size_t i) noexcept {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = byte(i);
  std::size_t n = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xbf;  // the valid range of the second byte (RFC 3629's table)
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;  // no overlong
    if (c == 0xed) hi = 0x9f;  // no surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;  // no overlong
    if (c == 0xf4) hi = 0x8f;  // at most U+10FFFF
  } else {
    return 0;
  }
  if (i + n > text.size() || byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return 0;
  }
  return n;
}

/// Appends `text` to `out` with every byte that a terminal would interpret or hide escaped:
/// control characters and DEL as \xNN (an ANSI escape prints as "\x1b[31m", NUL as "\x00"); with
/// `escape_quotes`, '"' and '\\' as \" and \\ too. A well-formed UTF-8 sequence (RFC 3629:
/// 2–4 bytes, no overlong form, no surrogate, at most U+10FFFF) passes through, so UTF-8 text stays
/// readable; every byte >= 0x80 that is not part of one is escaped as \xNN (a terminal must never
/// receive broken UTF-8 from a file or a server).
inline void append_escaped(std::string& out, std::string_view text, bool escape_quotes) {
  static constexpr char hex[] = "0123456789abcdef";
  for (std::size_t i = 0; i < text.size();) {
    const char ch = text[i];
    const auto c = static_cast<unsigned char>(ch);
    if (escape_quotes && (c == '"' || c == '\\')) {
      out += '\\';
      out += ch;
    } else if (c >= 0x80) {
      if (const std::size_t n = utf8_sequence_length(text, i); n > 0) {
        out.append(text.substr(i, n));
        i += n;
        continue;
      }
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xf];
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xf];
    } else {
      out += ch;
    }
    ++i;
  }
}

/// `text` made safe to print on a terminal, without quotes: control bytes and DEL escaped as
/// append_escaped does, and cut after `max_bytes` bytes of input with "... (N bytes)" giving the
/// full length (never inside a UTF-8 sequence). The default keeps all of it: for a name in a
/// report (a scenario's, a strategy's) whose length is already bounded. Every line of text that
/// stormguard prints from a value it did not write itself (a scenario or policy name, a server's
/// header, a library's message) goes through this or quote_for_message.
inline std::string escape_control(std::string_view text,
                                  std::size_t max_bytes = std::string_view::npos) {
  const std::size_t shown = shown_bytes(text, max_bytes);
  std::string out;
  out.reserve(shown + 8);
  append_escaped(out, text.substr(0, shown), false);
  if (shown < text.size()) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

/// `text` as it should appear inside an error message: between double quotes, with every byte
/// that a terminal would interpret or hide escaped (as escape_control does, and '"' and '\\' as
/// \" and \\), and cut after `max_bytes` bytes of input with "... (N bytes)" giving the full
/// length, so that a 900 KB token does not flood the terminal (never inside a UTF-8 sequence).
inline std::string quote_for_message(std::string_view text, std::size_t max_bytes = k_max_echo) {
  const std::size_t shown = shown_bytes(text, max_bytes);
  std::string out = "\"";
  out.reserve(shown + 8);
  append_escaped(out, text.substr(0, shown), true);
  out += '"';
  if (shown < text.size()) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

}  // namespace stormguard::detail

#endif  // STORMGUARD_DETAIL_FORMAT_HPP
