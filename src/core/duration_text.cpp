// SPDX-License-Identifier: Apache-2.0
#include "stormguard/duration_text.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "stormguard/detail/format.hpp"
#include "stormguard/detail/uint128.hpp"

namespace stormguard {

namespace {

struct unit {
  std::string_view suffix;
  std::uint64_t ns;
};

constexpr unit k_units[] = {{"ns", 1},
                            {"us", 1'000},
                            {"ms", 1'000'000},
                            {"s", 1'000'000'000},
                            {"m", 60'000'000'000},
                            {"min", 60'000'000'000},
                            {"h", 3'600'000'000'000}};

constexpr bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

// The verdict of the one exact parse behind parse_duration and duration_error.
enum class verdict { ok, syntax, too_large, fraction_of_ns };

verdict parse_exact(std::string_view text, duration& out) noexcept;

}  // namespace

std::optional<duration> parse_duration(std::string_view text) noexcept {
  duration d{};
  if (parse_exact(text, d) != verdict::ok) return std::nullopt;
  return d;
}

namespace {

verdict parse_exact(std::string_view text, duration& out) noexcept {
  using u128 = detail::uint128;
  constexpr auto max_ns = static_cast<u128>(std::numeric_limits<std::int64_t>::max());

  std::size_t i = 0;
  // The whole part: at least one digit. Stop accumulating once it exceeds max_ns (any unit is at
  // least 1 ns, so the value is then too large), but keep scanning to validate the syntax.
  u128 whole = 0;
  bool too_large = false;
  const std::size_t whole_begin = i;
  while (i < text.size() && is_digit(text[i])) {
    if (!too_large) {
      whole = whole * 10 + static_cast<unsigned>(text[i] - '0');
      too_large = whole > max_ns;
    }
    ++i;
  }
  if (i == whole_begin) return verdict::syntax;  // "", "s", ".5s", "-1s", "+1s"

  // The fraction: '.' then at least one digit.
  std::string_view fraction;
  if (i < text.size() && text[i] == '.') {
    const std::size_t fraction_begin = ++i;
    while (i < text.size() && is_digit(text[i])) ++i;
    fraction = text.substr(fraction_begin, i - fraction_begin);
    if (fraction.empty()) return verdict::syntax;  // "1.s", "1..5s"
  }

  // The unit: the whole rest, matched exactly.
  const std::string_view suffix = text.substr(i);
  const unit* u = nullptr;
  for (const unit& candidate : k_units) {
    if (candidate.suffix == suffix) u = &candidate;
  }
  if (u == nullptr) return verdict::syntax;  // "1", "1 s", "1S", "1e3ms", "1.2.3s", "0x10s"
  if (too_large) return verdict::too_large;

  // fraction = m / 10^k with trailing zeros dropped, so m is not a multiple of 10. m · unit is a
  // multiple of 10^k only if k <= 13 (the unit has at most 2^13 and 5^11 as factors), so more
  // than 13 significant decimals is always a fraction of a nanosecond.
  while (!fraction.empty() && fraction.back() == '0') fraction.remove_suffix(1);
  if (fraction.size() > 13) return verdict::fraction_of_ns;
  u128 m = 0;
  u128 scale = 1;
  for (char c : fraction) {
    m = m * 10 + static_cast<unsigned>(c - '0');
    scale *= 10;
  }
  const u128 fraction_product = m * u->ns;  // < 10^13 · 3.6·10^12 < 2^86
  if (fraction_product % scale != 0) return verdict::fraction_of_ns;  // "0.5ns", "1.0000000001s"
  const u128 ns = whole * u->ns + fraction_product / scale;           // < 2^63 · 2^42 + 2^86
  if (ns > max_ns) return verdict::too_large;
  out = duration(static_cast<std::int64_t>(ns));
  return verdict::ok;
}

constexpr std::string_view k_too_large =
    "above the largest duration, 9223372036.854775807s (about 292 years)";
constexpr std::string_view k_fraction =
    "not a whole number of nanoseconds (1ns is the smallest step)";
constexpr std::string_view k_units_hint = "use one of ns us ms s m min h, e.g. 250ms";

// "1.5e3ms" -> "1500ms" (the exponent applied to the digits), or "" when `text` is not a number
// with an exponent and a known unit. A huge exponent gives "1" followed by 64 zeros, or a
// fraction with 64 zeros, which parse_exact rejects as too large or as a fraction of a ns.
std::string without_exponent(std::string_view text) {
  std::size_t i = 0;
  std::string digits;
  while (i < text.size() && is_digit(text[i])) digits += text[i++];
  auto point = static_cast<long>(digits.size());
  if (digits.empty()) return {};
  if (i < text.size() && text[i] == '.') {
    const std::size_t from = ++i;
    while (i < text.size() && is_digit(text[i])) digits += text[i++];
    if (i == from) return {};
  }
  if (i >= text.size() || (text[i] != 'e' && text[i] != 'E')) return {};
  ++i;
  const bool minus = i < text.size() && text[i] == '-';
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
  long exponent = 0;
  const std::size_t exponent_begin = i;
  while (i < text.size() && is_digit(text[i])) {
    exponent = std::min<long>(exponent * 10 + (text[i] - '0'), 64);
    ++i;
  }
  if (i == exponent_begin) return {};
  const std::string_view suffix = text.substr(i);
  bool known = false;
  for (const unit& u : k_units) known = known || u.suffix == suffix;
  if (!known) return {};
  point += minus ? -exponent : exponent;
  std::string number;
  if (point <= 0) {
    number = "0." + std::string(static_cast<std::size_t>(-point), '0') + digits;
  } else if (static_cast<std::size_t>(point) >= digits.size()) {
    number = digits + std::string(static_cast<std::size_t>(point) - digits.size(), '0');
  } else {
    number = digits.substr(0, static_cast<std::size_t>(point)) + "." +
             digits.substr(static_cast<std::size_t>(point));
  }
  if (number.find('.') != std::string::npos) {
    while (number.back() == '0') number.pop_back();
    if (number.back() == '.') number.pop_back();
  }
  const std::size_t nonzero = number.find_first_not_of('0');
  if (nonzero == std::string::npos) return "0" + std::string(suffix);
  if (number[nonzero] == '.' || nonzero == 0)
    return number.substr(nonzero == 0 ? 0 : nonzero - 1) + std::string(suffix);
  return number.substr(nonzero) + std::string(suffix);
}

// Why `text`, which parse_exact calls a syntax error, is not a duration.
std::string syntax_error(std::string_view text) {
  if (text.empty()) return "empty: write a number and a unit, e.g. 250ms";
  if (text.front() == '-') return "negative: a duration is 0 or more";
  if (text.front() == '+') return "no sign: write 5s, not +5s";
  if (text.find_first_of(" \t\r\n") != std::string_view::npos) {
    return "no spaces: write the number and the unit together, e.g. 5ms";
  }
  if (const std::string plain = without_exponent(text); !plain.empty()) {
    duration d{};
    switch (parse_exact(plain, d)) {
      case verdict::ok:
        return plain.size() <= 32 ? "no exponents: write " + plain : "no exponents";
      case verdict::too_large:
        return "no exponents, and it would be " + std::string(k_too_large);
      case verdict::fraction_of_ns:
        return "no exponents, and it would be " + std::string(k_fraction);
      case verdict::syntax:
        break;
    }
  }
  std::size_t i = 0;
  while (i < text.size() && is_digit(text[i])) ++i;
  if (i == 0) {
    return text.front() == '.' ? "needs a digit before the '.': write 0.5s, not .5s"
                               : "not a number and a unit: " + std::string(k_units_hint);
  }
  if (i < text.size() && text[i] == '.') {
    if (++i >= text.size() || !is_digit(text[i])) {
      return "needs a digit after the '.': write 1s or 1.5s, not 1.s";
    }
    while (i < text.size() && is_digit(text[i])) ++i;
  }
  const std::string_view suffix = text.substr(i);
  if (suffix.empty()) return "no unit: " + std::string(k_units_hint);
  return "unknown unit " + detail::quote_for_message(suffix, 16) + ": " +
         std::string(k_units_hint) + " (units are lowercase)";
}

}  // namespace

std::string duration_error(std::string_view text) {
  duration d{};
  switch (parse_exact(text, d)) {
    case verdict::ok:
      return {};
    case verdict::too_large:
      return std::string(k_too_large);
    case verdict::fraction_of_ns:
      return std::string(k_fraction);
    case verdict::syntax:
      break;
  }
  return syntax_error(text);
}

std::string format_duration(duration d) {
  struct format_unit {
    std::uint64_t ns;
    std::size_t decimals;
    const char* suffix;
  };
  static constexpr format_unit units[] = {
      {1'000'000'000, 9, "s"}, {1'000'000, 6, "ms"}, {1'000, 3, "us"}, {1, 0, "ns"}};
  const std::int64_t count = d.count();
  if (count == 0) return "0s";
  // The magnitude as unsigned, so that duration::min() works too.
  const std::uint64_t magnitude =
      count < 0 ? 0 - static_cast<std::uint64_t>(count) : static_cast<std::uint64_t>(count);
  for (const format_unit& u : units) {
    if (magnitude < u.ns) continue;
    std::string text = (count < 0 ? "-" : "") + std::to_string(magnitude / u.ns);
    if (u.decimals > 0 && magnitude % u.ns != 0) {
      std::string fraction = std::to_string(magnitude % u.ns);
      fraction.insert(0, u.decimals - fraction.size(), '0');
      while (fraction.back() == '0') fraction.pop_back();
      text += "." + fraction;
    }
    return text + u.suffix;
  }
  return "0s";  // unreachable: magnitude >= 1 ns
}

}  // namespace stormguard
