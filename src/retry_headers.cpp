// SPDX-License-Identifier: Apache-2.0
#include "stormguard/retry_headers.hpp"

#include <charconv>
#include <limits>

namespace stormguard {

namespace {

constexpr bool is_ows(char c) noexcept { return c == ' ' || c == '\t'; }

constexpr std::string_view trim_ows(std::string_view v) noexcept {
  while (!v.empty() && is_ows(v.front())) v.remove_prefix(1);
  while (!v.empty() && is_ows(v.back())) v.remove_suffix(1);
  return v;
}

// 1*DIGIT within [0, max]; nothing else (no sign, no spaces inside).
std::optional<std::int64_t> plain_decimal(std::string_view v, std::int64_t max) noexcept {
  if (v.empty() || v.size() > 19) return std::nullopt;
  std::int64_t value = 0;
  for (const char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');  // 19 digits of 9 overflow only past 9.2e18: checked below
    if (value > max) return std::nullopt;
  }
  return value;
}

}  // namespace

attempt_info parse_attempt(std::optional<std::string_view> attempt_count,
                           std::optional<std::string_view> previous_attempts) noexcept {
  constexpr attempt_info malformed{2, true};
  std::optional<std::int64_t> from_count;
  std::optional<std::int64_t> from_previous;
  if (attempt_count) {
    from_count = plain_decimal(trim_ows(*attempt_count), k_max_attempt_number);
    if (!from_count || *from_count < 1) return malformed;
  }
  if (previous_attempts) {
    const auto previous = plain_decimal(trim_ows(*previous_attempts), k_max_attempt_number - 1);
    if (!previous) return malformed;
    from_previous = *previous + 1;
  }
  if (from_count && from_previous && *from_count != *from_previous) return malformed;
  if (from_count) return attempt_info{*from_count, false};
  if (from_previous) return attempt_info{*from_previous, false};
  return attempt_info{};
}

std::string_view format_attempt_count(std::int64_t attempt, std::array<char, 24>& out) noexcept {
  const auto [end, ec] =
      std::to_chars(out.data(), out.data() + out.size(), attempt < 1 ? 1 : attempt);
  (void)ec;  // 24 characters hold any int64
  return {out.data(), static_cast<std::size_t>(end - out.data())};
}

std::optional<duration> parse_grpc_timeout(std::string_view value) noexcept {
  if (value.size() < 2 || value.size() > 9) return std::nullopt;
  const auto digits = plain_decimal(value.substr(0, value.size() - 1), 99'999'999);
  if (!digits) return std::nullopt;
  std::int64_t unit_ns = 0;
  switch (value.back()) {
    case 'H':
      unit_ns = 3'600'000'000'000;
      break;
    case 'M':
      unit_ns = 60'000'000'000;
      break;
    case 'S':
      unit_ns = 1'000'000'000;
      break;
    case 'm':
      unit_ns = 1'000'000;
      break;
    case 'u':
      unit_ns = 1'000;
      break;
    case 'n':
      unit_ns = 1;
      break;
    default:
      return std::nullopt;
  }
  // 99,999,999 hours do not fit in int64 nanoseconds: saturate at duration::max() (no deadline
  // in practice) instead of wrapping to a negative, already expired, deadline.
  if (*digits > std::numeric_limits<std::int64_t>::max() / unit_ns) return duration::max();
  return std::chrono::duration_cast<duration>(std::chrono::nanoseconds(*digits * unit_ns));
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
