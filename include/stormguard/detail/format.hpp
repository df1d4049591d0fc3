// Internal: text for error messages (the core depends on the standard library only, and
// std::format is not available in every C++20 standard library stormguard supports).
#ifndef STORMGUARD_DETAIL_FORMAT_HPP
#define STORMGUARD_DETAIL_FORMAT_HPP

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <system_error>

#include "stormguard/clock.hpp"

namespace stormguard::detail {

/// "100ms", "3s", "1500us", "7ns": the count in the largest unit that divides it exactly.
inline std::string format_duration(duration d) {
  struct unit {
    std::int64_t ns;
    const char* suffix;
  };
  static constexpr unit units[] = {
      {3'600'000'000'000, "h"}, {60'000'000'000, "min"}, {1'000'000'000, "s"},
      {1'000'000, "ms"},        {1'000, "us"},           {1, "ns"}};
  const std::int64_t count = d.count();
  for (const auto& u : units) {
    if (count != 0 && count % u.ns == 0) return std::to_string(count / u.ns) + u.suffix;
  }
  return count == 0 ? std::string("0s") : std::to_string(count) + "ns";
}

/// A double as the shortest text that reads back to the same value ("2000", "1.5", "1e-07",
/// "nan", "inf").
inline std::string format_double(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buffer[64];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, x);
  return ec == std::errc{} ? std::string(buffer, end) : std::string("?");
}

}  // namespace stormguard::detail

#endif  // STORMGUARD_DETAIL_FORMAT_HPP
