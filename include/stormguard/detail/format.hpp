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

/// A double as the shortest text that reads back to the same value ("2000", "1.5", "1e-07",
/// "nan", "inf").
inline std::string format_double(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buffer[64];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, x);
  return ec == std::errc{} ? std::string(buffer, end) : std::string("?");
}

/// The longest part of a user's value that an error message echoes (see quote_for_message).
inline constexpr std::size_t k_max_echo = 80;

/// `text` as it should appear inside an error message: between double quotes, with every byte
/// that a terminal would interpret or hide escaped (control characters, DEL, '"' and '\\' as
/// \xNN / \" / \\; an ANSI escape sequence prints as "\x1b[31m", NUL as "\x00"), and cut after
/// `max_bytes` bytes of input with "... (N bytes)" giving the full length, so that a 900 KB token
/// does not flood the terminal (never inside a UTF-8 sequence). Bytes >= 0x80 pass through
/// (UTF-8 text stays readable).
inline std::string quote_for_message(std::string_view text, std::size_t max_bytes = k_max_echo) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out = "\"";
  std::size_t shown = text.size() <= max_bytes ? text.size() : max_bytes;
  // Never cut a UTF-8 sequence in two: back off over continuation bytes (10xxxxxx).
  while (shown < text.size() && shown > 0 &&
         (static_cast<unsigned char>(text[shown]) & 0xc0) == 0x80) {
    --shown;
  }
  for (std::size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  if (shown < text.size()) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

}  // namespace stormguard::detail

#endif  // STORMGUARD_DETAIL_FORMAT_HPP
