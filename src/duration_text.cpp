#include "stormguard/duration_text.hpp"

#include <cstdint>
#include <limits>

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

}  // namespace

std::optional<duration> parse_duration(std::string_view text) noexcept {
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
  if (i == whole_begin) return std::nullopt;  // "", "s", ".5s", "-1s", "+1s"

  // The fraction: '.' then at least one digit.
  std::string_view fraction;
  if (i < text.size() && text[i] == '.') {
    const std::size_t fraction_begin = ++i;
    while (i < text.size() && is_digit(text[i])) ++i;
    fraction = text.substr(fraction_begin, i - fraction_begin);
    if (fraction.empty()) return std::nullopt;  // "1.s", "1..5s"
  }

  // The unit: the whole rest, matched exactly.
  const std::string_view suffix = text.substr(i);
  const unit* u = nullptr;
  for (const unit& candidate : k_units) {
    if (candidate.suffix == suffix) u = &candidate;
  }
  if (u == nullptr) return std::nullopt;  // "1", "1 s", "1S", "1e3ms", "1.2.3s", "0x10s"
  if (too_large) return std::nullopt;

  // fraction = m / 10^k with trailing zeros dropped, so m is not a multiple of 10. m · unit is a
  // multiple of 10^k only if k <= 13 (the unit has at most 2^13 and 5^11 as factors), so more
  // than 13 significant decimals is always a fraction of a nanosecond.
  while (!fraction.empty() && fraction.back() == '0') fraction.remove_suffix(1);
  if (fraction.size() > 13) return std::nullopt;
  u128 m = 0;
  u128 scale = 1;
  for (char c : fraction) {
    m = m * 10 + static_cast<unsigned>(c - '0');
    scale *= 10;
  }
  const u128 fraction_product = m * u->ns;                   // < 10^13 · 3.6·10^12 < 2^86
  if (fraction_product % scale != 0) return std::nullopt;    // "0.5ns", "1.0000000001s"
  const u128 ns = whole * u->ns + fraction_product / scale;  // < 2^63 · 2^42 + 2^86
  if (ns > max_ns) return std::nullopt;
  return duration(static_cast<std::int64_t>(ns));
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
