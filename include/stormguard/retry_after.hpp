// SPDX-License-Identifier: Apache-2.0
/// \file
/// The Retry-After field (RFC 9110 §10.2.3) as a delay.
///
/// A server that answers 429 or 503 may say how long to wait: either a number of seconds
/// ("Retry-After: 120") or an HTTP-date ("Retry-After: Fri, 31 Dec 1999 23:59:59 GMT").
/// parse_retry_after turns either into a stormguard::duration, or tells the caller that the value
/// is not a Retry-After at all, in which case the caller uses its own backoff (it never retries at
/// once because of a value it could not read):
///
/// \code{.cpp}
///  const auto now = std::chrono::system_clock::now();
///  stormguard::parse_retry_after("120", now);        // 120 s
///  stormguard::parse_retry_after(" 0 ", now);        // 0 s (surrounding SP/HTAB ignored)
///  stormguard::parse_retry_after("-1", now);         // nullopt: a sign is not delay-seconds
///  stormguard::parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now);  // 0 s: in the past
/// \endcode
///
/// Well-known clients have crashed on negative values, slept for hours after a wrapped number,
/// spun on "0", read dates as local time and ignored dates entirely; this parser is exact, reads
/// every date as UTC, saturates instead of wrapping, and is fuzzed (fuzz/retry_after_fuzz.cpp).
/// Everything here is a pure function of its arguments: thread-safe, no allocation, no locale,
/// never throws.
#ifndef STORMGUARD_RETRY_AFTER_HPP
#define STORMGUARD_RETRY_AFTER_HPP

#include <chrono>
#include <optional>
#include <string_view>

#include "stormguard/clock.hpp"
#include "stormguard/export.hpp"

namespace stormguard {

/// Which grammar of RFC 9110 a Retry-After value matched.
enum class retry_after_form {
  delay_seconds,  ///< 1*DIGIT, e.g. "120" (§10.2.3)
  imf_fixdate,    ///< "Sun, 06 Nov 1994 08:49:37 GMT", the preferred HTTP-date (§5.6.7)
  rfc850_date,    ///< "Sunday, 06-Nov-94 08:49:37 GMT", obsolete, two-digit year (§5.6.7)
  asctime_date,   ///< "Sun Nov  6 08:49:37 1994", obsolete, ANSI C asctime() (§5.6.7)
};

/// A parsed Retry-After: the delay from `now` and the form it was written in.
struct retry_after_value {
  duration delay;         ///< >= 0, at most duration::max()
  retry_after_form form;  ///< the grammar that matched
  friend constexpr bool operator==(const retry_after_value&, const retry_after_value&) = default;
};

/// Parses an HTTP-date (RFC 9110 §5.6.7) in any of its three forms (IMF-fixdate, obsolete
/// RFC 850, asctime) into a UTC instant (whole seconds, std::chrono::system_clock's epoch, which
/// ignores leap seconds like POSIX time). Surrounding SP / HTAB are ignored.
///
/// Strictness (the grammar is case-sensitive and fixed-width, §5.6.7):
/// - names are English and case-sensitive ("Nov", never "nov" or "NOV"); single SP separators
///   exactly where the grammar has them (the asctime day is "dd" or SP + one digit: "Nov  6");
/// - the zone is "GMT" (also "UTC", which means the same instant; RFC 9110 asks recipients to be
///   robust). Any other zone, a numeric offset or no zone is rejected. asctime has no zone: UTC;
/// - the date must exist: day 1..28/29/30/31 by month and leap year (Feb 29 only in leap years),
///   hour 0..23, minute 0..59, second 0..59, or 60 only at 23:59:60 (a leap second; read as the
///   following 00:00:00, since system_clock has no leap seconds). Year 1900 or later (RFC 5322
///   §3.3, whose semantics §5.6.7 adopts);
/// - the day name must be the weekday of the date: §5.6.7 gives day-name the semantics of RFC 5322
///   §3.3, where the day-of-week "MUST be the day implied by the date". A contradicting date cannot
///   be trusted, and the caller has a safe fallback (its own backoff);
/// - RFC 850's two-digit year (§5.6.7): the year with those last two digits that is not more than
///   50 years after `now` (compared as instants, to the second): a date that would be more than 50
///   years in the future is "the most recent year in the past that had the same last two digits".
///   `now` is used for nothing else.
///
/// Returns std::nullopt for anything else. Thread-safe; never throws; no allocation, no locale.
[[nodiscard]] STORMGUARD_EXPORT std::optional<std::chrono::sys_seconds> parse_http_date(
    std::string_view text, std::chrono::system_clock::time_point now) noexcept;

/// Parses a Retry-After field value (RFC 9110 §10.2.3): delay-seconds or an HTTP-date in any of
/// the three forms of §5.6.7 (IMF-fixdate, obsolete RFC 850 with the two-digit-year rule,
/// asctime), surrounding whitespace (SP / HTAB) ignored. `now` is the current instant of
/// std::chrono::system_clock (UTC), used only for dates: a date at or before now gives zero.
/// Returns the delay, saturated at duration::max() (never wraps), or std::nullopt when the
/// value is not a valid Retry-After (sign, fraction, hex, trailing junk, empty, unknown zone,
/// impossible date ...). Never throws.
///
/// delay-seconds is 1*DIGIT: leading zeros are allowed ("007" is 7 s), any number of digits is
/// accepted and a value above duration::max() (about 292 years) is duration::max(). Dates follow
/// parse_http_date (strictness documented there); a date is converted to a delay exactly, to the
/// nanosecond of `now`. Thread-safe; no allocation.
[[nodiscard]] STORMGUARD_EXPORT std::optional<duration> parse_retry_after(
    std::string_view field_value, std::chrono::system_clock::time_point now) noexcept;

/// As parse_retry_after, and also says which form matched (for logs and diagnostics).
[[nodiscard]] STORMGUARD_EXPORT std::optional<retry_after_value> parse_retry_after_detailed(
    std::string_view field_value, std::chrono::system_clock::time_point now) noexcept;

}  // namespace stormguard

#endif  // STORMGUARD_RETRY_AFTER_HPP
