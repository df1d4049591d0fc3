// SPDX-License-Identifier: Apache-2.0
// Plain decimal numbers on the command line (see numbers.hpp).
#include "numbers.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

#include "stormguard/detail/format.hpp"

namespace stormguard::cli {

namespace {

bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

// The length of the run of digits at `i`.
std::size_t digits_at(std::string_view text, std::size_t i) noexcept {
  std::size_t n = 0;
  while (i + n < text.size() && is_digit(text[i + n])) ++n;
  return n;
}

// "010" -> "10", "00" -> "0", "007.5" -> "7.5": the value CLI11 converts is then read as
// decimal whatever its own rules for a leading 0.
void strip_leading_zeros(std::string& text) {
  std::size_t zeros = 0;
  while (zeros + 1 < text.size() && text[zeros] == '0' && is_digit(text[zeros + 1])) ++zeros;
  text.erase(0, zeros);
}

}  // namespace

std::optional<std::uint64_t> parse_whole_number(std::string_view text) noexcept {
  if (text.empty() || text.size() > 40) return std::nullopt;
  std::uint64_t value = 0;
  for (const char c : text) {
    if (!is_digit(c)) return std::nullopt;
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

std::optional<double> parse_decimal_number(std::string_view text, bool allow_negative) noexcept {
  std::size_t i = 0;
  if (allow_negative && i < text.size() && text[i] == '-') ++i;
  const std::size_t whole = digits_at(text, i);
  if (whole == 0) return std::nullopt;
  i += whole;
  if (i < text.size() && text[i] == '.') {
    const std::size_t fraction = digits_at(text, i + 1);
    if (fraction == 0) return std::nullopt;
    i += 1 + fraction;
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
    const std::size_t exponent = digits_at(text, i);
    if (exponent == 0) return std::nullopt;
    i += exponent;
  }
  if (i != text.size() || text.size() > 400) return std::nullopt;
  // The grammar above is a subset of strtod's: no hex, inf, nan, spaces or '+' get this far.
  const std::string copy(text);
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size() || errno == ERANGE || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

CLI::Validator whole_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        // Digits only; a value too large for the option is CLI11's conversion error after this,
        // except above 2^64 - 1, which CLI11 2.1 would saturate silently for an unsigned option.
        if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) {
          if (!parse_whole_number(text)) {
            return "too large: at most 18446744073709551615, got " +
                   detail::quote_for_message(text);
          }
          strip_leading_zeros(text);  // CLI11 would read "010" as octal 8
          return {};
        }
        return "not a whole number in plain decimal (digits only, e.g. 3): " +
               detail::quote_for_message(text);
      },
      "");
}

CLI::Validator whole_number_in(std::uint64_t lo, std::uint64_t hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) {
          return "not a whole number in plain decimal (digits only, e.g. 3): " +
                 detail::quote_for_message(text);
        }
        const std::optional<std::uint64_t> value = parse_whole_number(text);
        if (!value || *value < lo || *value > hi) {
          return "must be a whole number in " + range + ", got " + detail::quote_for_message(text);
        }
        strip_leading_zeros(text);  // CLI11 would read "010" as octal 8
        return {};
      },
      "in " + range);
}

CLI::Validator decimal_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (parse_decimal_number(text)) {
          strip_leading_zeros(text);
          return {};
        }
        if (!text.empty() && text.front() == '-' && parse_decimal_number(text, true)) {
          return "must be >= 0, got " + detail::quote_for_message(text);
        }
        return "not a number in plain decimal (e.g. 1.5), or out of a double's range: " +
               detail::quote_for_message(text);
      },
      "");
}

}  // namespace stormguard::cli

namespace stormguard::cli {

CLI::Validator probability() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const auto p = parse_decimal_number(text, true);
        if (!p) {
          return "not a number in plain decimal (e.g. 0.2), or out of a double's range: " +
                 detail::quote_for_message(text);
        }
        if (!(*p >= 0.0 && *p <= 1.0)) {
          return "must be a probability in [0, 1], got " + detail::quote_for_message(text);
        }
        strip_leading_zeros(text);
        return {};
      },
      "");
}

}  // namespace stormguard::cli
