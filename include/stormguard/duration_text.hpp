// SPDX-License-Identifier: Apache-2.0
/// \file
/// Durations as text, the one grammar shared by the command line
/// ("--base 250ms"), scenario files ("service_time": "1.5s") and messages.
///
/// A duration is a non-negative decimal number immediately followed by one unit:
///
/// \code{.unparsed}
///  ns us ms s m min h        ("m" and "min" are both minutes)
/// \endcode
///
/// \code{.cpp}
///  stormguard::parse_duration("250ms");   // 250 ms
///  stormguard::parse_duration("1.5s");    // 1500 ms
///  stormguard::parse_duration("0.25h");   // 15 min
///  stormguard::parse_duration("5 ms");    // nullopt: no spaces
///  stormguard::duration_error("5 ms");    // "no spaces: write the number and the unit
///  together..." stormguard::format_duration(std::chrono::milliseconds(1500));  // "1.5s"
/// \endcode
///
/// The parse is exact: integer arithmetic only (no double), so "0.1s" is exactly 100,000,000 ns.
#ifndef STORMGUARD_DURATION_TEXT_HPP
#define STORMGUARD_DURATION_TEXT_HPP

#include <optional>
#include <string>
#include <string_view>

#include "stormguard/clock.hpp"
#include "stormguard/export.hpp"

namespace stormguard {

/// Parses a duration: one or more decimal digits, optionally a '.' and one or more digits, then
/// one unit of ns, us, ms, s, m (minutes), min (minutes) or h, with nothing before, between or
/// after (no sign, no spaces, no exponent, no hex, no ".5s" or "1.s"). Leading zeros and trailing
/// zeros in the fraction are allowed ("007ms", "1.50s").
///
/// Returns nullopt for anything else, for a value above duration::max() (never wraps), and for a
/// value that is not a whole number of nanoseconds ("0.5ns", "1.0000000001s"): such a value is
/// rejected rather than rounded, because a rounded value silently differs from what was written
/// and no real delay needs sub-nanosecond precision.
///
/// Exact: the value is computed in 128-bit integers. Thread-safe (no state); never throws.
[[nodiscard]] STORMGUARD_EXPORT std::optional<duration> parse_duration(
    std::string_view text) noexcept;

/// Why `text` is not a duration, in words for an error message, or "" when parse_duration(text)
/// has a value. The one place that explains a rejection, with the same exact parse:
///
/// \code{.cpp}
///  duration_error("-1s")    // "negative: a duration is 0 or more"
///  duration_error("1e9h")   // "no exponents, and it would be above the largest duration,
///                           //  9223372036.854775807s (about 292 years)"
///  duration_error("1.5e3ms")  // "no exponents: write 1500ms"
///  duration_error("0.5ns")  // "not a whole number of nanoseconds (1ns is the smallest step)"
///  duration_error("5 ms")   // "no spaces: write the number and the unit together, e.g. 5ms"
///  duration_error("5S")     // "unknown unit \"S\": use one of ns us ms s m min h, ..."
/// \endcode
///
/// Other reasons: empty, a sign, no unit, no digit before or after the '.'. The reason never
/// echoes the text itself (the caller quotes it); it may
/// quote at most 16 bytes of an unknown unit, escaped. Thread-safe (no state). Throws
/// std::bad_alloc only.
[[nodiscard]] STORMGUARD_EXPORT std::string duration_error(std::string_view text);

/// Formats a duration exactly, in the largest of s, ms, us, ns that keeps the number >= 1, with
/// only the decimals needed: "1.5s", "60s", "20ms", "0s". A negative duration gets a leading '-'
/// (which parse_duration rejects). parse_duration(format_duration(d)) == d for every d >= 0.
/// Thread-safe. Throws std::bad_alloc only.
[[nodiscard]] STORMGUARD_EXPORT std::string format_duration(duration d);

}  // namespace stormguard

#endif  // STORMGUARD_DURATION_TEXT_HPP
