// SPDX-License-Identifier: Apache-2.0
#include "stormguard/retry_headers.hpp"

#include <charconv>
#include <limits>

namespace stormguard {

using detail::is_ows;
using detail::plain_decimal;
using detail::trim_ows;

std::string_view format_attempt_count(std::int64_t attempt, std::array<char, 24>& out) noexcept {
  const auto [end, ec] =
      std::to_chars(out.data(), out.data() + out.size(), attempt < 1 ? 1 : attempt);
  (void)ec;  // 24 characters hold any int64
  return {out.data(), static_cast<std::size_t>(end - out.data())};
}

std::string_view format_grpc_timeout(duration remaining, std::array<char, 16>& out) noexcept {
  struct unit {
    std::int64_t ns;
    char letter;
  };
  // Finest first: the first unit whose count fits in 8 digits.
  constexpr std::array<unit, 6> units{{{1, 'n'},
                                       {1'000, 'u'},
                                       {1'000'000, 'm'},
                                       {1'000'000'000, 'S'},
                                       {60'000'000'000, 'M'},
                                       {3'600'000'000'000, 'H'}}};
  const std::int64_t ns =
      remaining < duration::zero()
          ? 0
          : std::chrono::duration_cast<std::chrono::nanoseconds>(remaining).count();
  std::int64_t count = 99'999'999;
  char letter = 'H';
  for (const unit& u : units) {
    if (ns / u.ns <= 99'999'999) {
      count = ns / u.ns;  // rounded down: never more time than the caller has
      letter = u.letter;
      break;
    }
  }
  auto [end, ec] = std::to_chars(out.data(), out.data() + out.size() - 1, count);
  (void)ec;  // at most 8 digits
  *end++ = letter;
  return {out.data(), static_cast<std::size_t>(end - out.data())};
}

pushback parse_pushback(std::string_view value) noexcept {
  std::string_view v = trim_ows(value);
  constexpr pushback refuse{true, duration::zero()};
  if (v.empty()) return refuse;
  if (v.front() == '-') {
    // A negative integer: do not retry. Any other text after '-' is unparsable: do not retry too.
    return refuse;
  }
  for (const char c : v) {
    if (c < '0' || c > '9') return refuse;
  }
  // Saturate instead of wrapping: more than ~292 years of milliseconds is duration::max().
  constexpr std::int64_t max_ms = std::numeric_limits<duration::rep>::max() / 1'000'000;
  std::int64_t ms = 0;
  for (const char c : v) {
    if (ms > (max_ms - (c - '0')) / 10) return pushback{false, duration::max()};
    ms = ms * 10 + (c - '0');
  }
  return pushback{false, std::chrono::duration_cast<duration>(std::chrono::milliseconds(ms))};
}

}  // namespace stormguard
