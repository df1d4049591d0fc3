// SPDX-License-Identifier: Apache-2.0
// The invariants of stormguard::parse_retry_after, checked on any input: by the libFuzzer target
// (fuzz/retry_after_fuzz.cpp) and, for every file of fuzz/corpus/retry_after/, by the unit test
// tests/retry_after_test.cpp. Header-only, test code: it may use what the core may not (__int128).
//
// The checks compute the expected values independently of src/retry_after.cpp where they can:
// delay-seconds by comparing decimal strings, date delays in 128-bit arithmetic.
#ifndef STORMGUARD_FUZZ_RETRY_AFTER_INVARIANTS_HPP
#define STORMGUARD_FUZZ_RETRY_AFTER_INVARIANTS_HPP

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "stormguard/retry_after.hpp"

namespace stormguard::fuzz {

__extension__ typedef __int128 int128;  // GCC and Clang; __extension__ quiets -Wpedantic

/// The instants the invariants are checked at: an ordinary one with a sub-second part, the epoch,
/// and both ends of system_clock (where naive date - now arithmetic overflows).
inline std::array<std::chrono::system_clock::time_point, 4> invariant_nows() {
  using namespace std::chrono;
  return {sys_days{year{2025} / June / 15} + hours(12) + milliseconds(250),
          system_clock::time_point{}, system_clock::time_point::min(),
          system_clock::time_point::max()};
}

/// The input without surrounding SP / HTAB.
inline std::string_view trim_sp_htab(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

/// The exact delay of a delay-seconds value `digits` (1*DIGIT), or duration::max() when it does
/// not fit: computed by comparing decimal strings, not by the parser's arithmetic.
inline duration expected_delay_seconds(std::string_view digits) {
  while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
  // duration::max() is 9223372036.854775807 s: the largest whole second is 9223372036.
  constexpr std::string_view max_seconds = "9223372036";
  if (digits.size() > max_seconds.size() ||
      (digits.size() == max_seconds.size() && digits > max_seconds)) {
    return duration::max();
  }
  std::int64_t seconds = 0;
  for (const char c : digits) seconds = seconds * 10 + (c - '0');
  return std::chrono::seconds(seconds);
}

/// max(0, date - now) saturated at duration::max(), in 128-bit arithmetic.
inline duration expected_delay_until(std::chrono::sys_seconds date,
                                     std::chrono::system_clock::time_point now) {
  const int128 date_ns = static_cast<int128>(date.time_since_epoch().count()) * 1'000'000'000;
  const int128 now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  const int128 diff = date_ns - now_ns;
  if (diff <= 0) return duration::zero();
  if (diff >= static_cast<int128>(duration::max().count())) return duration::max();
  return duration(static_cast<std::int64_t>(diff));
}

/// Checks every invariant on `input`; returns "" when all hold, else what failed.
inline std::string check_retry_after_invariants(std::string_view input) {
  const std::string_view trimmed = trim_sp_htab(input);
  const bool all_digits =
      !trimmed.empty() && trimmed.find_first_not_of("0123456789") == std::string_view::npos;
  const bool digit_first = !trimmed.empty() && trimmed.front() >= '0' && trimmed.front() <= '9';
  const auto nows = invariant_nows();
  for (const auto now : nows) {
    const auto result = parse_retry_after(input, now);
    const auto detailed = parse_retry_after_detailed(input, now);
    // Deterministic, and the two entry points agree.
    if (parse_retry_after(input, now) != result) return "not deterministic";
    if (detailed.has_value() != result.has_value() || (detailed && detailed->delay != *result)) {
      return "parse_retry_after and parse_retry_after_detailed disagree";
    }
    if (result && *result < duration::zero()) return "negative delay";
    if (all_digits) {
      // delay-seconds: exactly its value or saturated, whatever `now` is.
      if (!result) return "digits-only input rejected";
      if (*result != expected_delay_seconds(trimmed)) return "delay-seconds value is not exact";
      if (detailed->form != retry_after_form::delay_seconds) return "digits not delay-seconds";
    } else if (digit_first) {
      if (result) return "digits followed by something else accepted";
    } else {
      // A date (or nothing): consistent with parse_http_date and exact.
      const auto date = parse_http_date(input, now);
      if (date.has_value() != result.has_value()) {
        return "parse_http_date and parse_retry_after disagree";
      }
      if (result && *result != expected_delay_until(*date, now)) {
        return "date delay is not max(0, date - now) saturated";
      }
      if (result && detailed->form == retry_after_form::delay_seconds) {
        return "a date reported as delay-seconds";
      }
      if (detailed && detailed->form != retry_after_form::rfc850_date &&
          date != parse_http_date(input, std::chrono::system_clock::time_point{})) {
        return "a date with a four-digit year depends on now";
      }
      if (detailed && detailed->form == retry_after_form::rfc850_date && now == nows[0]) {
        // The two-digit-year rule: not more than 50 years after now, and the latest such year,
        // so more than 50 years before now. Calendar years vs average years: 2 days of slack.
        const auto slack = std::chrono::days(2);
        const auto fifty = std::chrono::years(50);
        if (*date > now + fifty + slack || *date <= now - fifty - slack) {
          return "two-digit year outside (now - 50 years, now + 50 years]";
        }
      }
    }
  }
  return {};
}

}  // namespace stormguard::fuzz

#endif  // STORMGUARD_FUZZ_RETRY_AFTER_INVARIANTS_HPP
