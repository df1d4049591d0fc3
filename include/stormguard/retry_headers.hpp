// SPDX-License-Identifier: Apache-2.0
/// \file
/// The header fields that carry retry state between a client and a
/// server, defined once for both sides: which attempt a request is, how long its caller still
/// waits, and the server's pushback.
///
/// \code{.unparsed}
///  x-envoy-attempt-count: 2            the attempt number, 1 for the first (Envoy's
///                                      x-envoy-attempt-count)
///  grpc-previous-rpc-attempts: 1       attempts before this one, 0 for the first (gRFC A6)
///  grpc-timeout: 250m                  the caller's remaining time: at most 8 digits and a unit,
///                                      H M S m u n (gRPC over HTTP/2, "Requests")
///  grpc-retry-pushback-ms: 500         the server's word on retrying (gRFC A6): a non-negative
///                                      integer is the minimum delay in milliseconds; a negative
///                                      or unparsable value means "do not retry"
/// \endcode
///
/// A client sends the first three (format_attempt_count, format_grpc_timeout) and reads the last
/// (parse_pushback); a server does the opposite (stormguard/admission/). Every function here is a
/// pure function of its arguments: thread-safe, no allocation, never throws.
///
/// Hostile values are read conservatively, so that a header can never win a request more than its
/// absence would: an attempt count that is not a plain decimal integer in range reads as a retry
/// of unknown number (attempt_info::malformed), and a grpc-timeout that does not follow the grammar
/// reads as absent (no deadline).
#ifndef STORMGUARD_RETRY_HEADERS_HPP
#define STORMGUARD_RETRY_HEADERS_HPP

#include <array>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <system_error>

#include "stormguard/clock.hpp"
#include "stormguard/detail/http_syntax.hpp"  // is_ows, trim_ows
#include "stormguard/export.hpp"

namespace stormguard {

/// The field names (lower case, as HTTP/2 and HTTP/3 send them; HTTP/1.1 field names are
/// case-insensitive). Each views a string literal, so data() is NUL-terminated (for C APIs).
/// Envoy's attempt number, counting the first attempt as 1 (a request header).
inline constexpr std::string_view k_attempt_count_header = "x-envoy-attempt-count";
/// gRPC's count of attempts made before this one (gRFC A6; a request header, absent on the
/// first attempt).
inline constexpr std::string_view k_previous_attempts_header = "grpc-previous-rpc-attempts";
/// gRPC's deadline of the call, as a timeout such as "100m" (gRPC over HTTP/2; a request header).
inline constexpr std::string_view k_grpc_timeout_header = "grpc-timeout";
/// gRPC's server pushback in milliseconds, or a negative value for "do not retry" (gRFC A6; a
/// response trailer).
inline constexpr std::string_view k_pushback_header = "grpc-retry-pushback-ms";

/// Which attempt a request says it is.
struct attempt_info {
  /// The attempt number: 1 for a first attempt (and when no header says otherwise), >= 2 for a
  /// retry. For a malformed header, 2 (a retry of unknown number).
  std::int64_t attempt = 1;
  /// True when a header was present but unreadable (not a plain decimal integer, out of range,
  /// or the two headers disagree).
  bool malformed = false;

  /// True for a retry (attempt >= 2), malformed headers included.
  [[nodiscard]] constexpr bool is_retry() const noexcept { return attempt >= 2; }
  friend constexpr bool operator==(const attempt_info&, const attempt_info&) = default;
};

/// The largest attempt number accepted (gRFC A6 allows 5 attempts; Envoy's counts stay small):
/// anything larger reads as malformed.
inline constexpr std::int64_t k_max_attempt_number = 1'000'000;

/// Reads the attempt from `x-envoy-attempt-count` (1-based) and/or `grpc-previous-rpc-attempts`
/// (0-based); pass an empty optional for a field the request does not carry. Both absent: the
/// first attempt. Each present value must be 1*DIGIT (surrounding SP/HTAB allowed) within
/// [1, k_max_attempt_number] (resp. [0, k_max_attempt_number − 1]); otherwise, or when both are
/// present and disagree, the result is malformed (attempt 2).
[[nodiscard]] attempt_info parse_attempt(
    std::optional<std::string_view> attempt_count,
    std::optional<std::string_view> previous_attempts) noexcept;

/// Reads a request's attempt from its header fields one at a time, for a server that sees each
/// field as it stands (HTTP lets a field appear more than once): call field(name, value) for
/// every field of the request, then result(). The first x-envoy-attempt-count and the first
/// grpc-previous-rpc-attempts are read as parse_attempt reads them; a repeated one whose value
/// reads differently from its first ("1" then "2") makes the request malformed (attempt 2), as
/// when the two fields disagree; the same value twice reads as one. Names compare
/// case-insensitively (ASCII); other fields are ignored. No allocation: it keeps views of the
/// values, which must stay valid until result().
///
/// \code{.cpp}
///  stormguard::attempt_fields reader;
///  for (const auto& [name, value] : request_fields) reader.field(name, value);
///  const stormguard::attempt_info attempt = reader.result();
/// \endcode
class attempt_fields {
 public:
  /// Takes one header field (name without the colon; value as received).
  void field(std::string_view name, std::string_view value) noexcept {
    if (same_name(name, k_attempt_count_header)) {
      take(count_, value, true);
    } else if (same_name(name, k_previous_attempts_header)) {
      take(previous_, value, false);
    }
  }
  /// The attempt the fields taken so far say (the first attempt when none did).
  [[nodiscard]] attempt_info result() const noexcept;

 private:
  static constexpr bool same_name(std::string_view a, std::string_view lower) noexcept {
    if (a.size() != lower.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (detail::to_lower_ascii(a[i]) != lower[i]) return false;
    }
    return true;
  }
  void take(std::optional<std::string_view>& first, std::string_view value, bool is_count) noexcept;

  std::optional<std::string_view> count_{};
  std::optional<std::string_view> previous_{};
  bool disagree_ = false;
};

/// Writes `attempt` (>= 1; smaller values are written as 1) as the value of
/// x-envoy-attempt-count into `out` and returns the part written (at most 20 characters).
[[nodiscard]] STORMGUARD_EXPORT std::string_view format_attempt_count(
    std::int64_t attempt, std::array<char, 24>& out) noexcept;

/// Parses a grpc-timeout value: 1 to 8 ASCII digits and one unit letter, H (hours), M (minutes),
/// S (seconds), m (milliseconds), u (microseconds) or n (nanoseconds), nothing else (no spaces,
/// no sign). Returns the duration (0 allowed: already expired), or an empty optional for any
/// other text, which callers treat as "no deadline" (gRPC over HTTP/2, "Timeout").
[[nodiscard]] std::optional<duration> parse_grpc_timeout(std::string_view value) noexcept;

/// Writes `remaining` as a grpc-timeout value into `out` and returns the part written: the finest
/// unit whose count fits in 8 digits, rounded down, so that the server never believes the
/// caller waits longer than it does. A negative `remaining` is written as "0n"; a remaining time
/// above 99,999,999 hours is written as "99999999H".
[[nodiscard]] STORMGUARD_EXPORT std::string_view format_grpc_timeout(
    duration remaining, std::array<char, 16>& out) noexcept;

/// The server's pushback (gRFC A6, grpc-retry-pushback-ms).
struct pushback {
  /// True: the server asks the client not to retry at all (a negative or unparsable value).
  bool do_not_retry = false;
  /// The minimum delay before the next attempt when do_not_retry is false (>= 0).
  duration delay{};
  friend constexpr bool operator==(const pushback&, const pushback&) = default;
};

/// Reads a grpc-retry-pushback-ms value: an optional '-' and 1*DIGIT (surrounding SP/HTAB
/// allowed). A non-negative value is the delay in milliseconds (saturating at duration::max());
/// a negative value, or any text that is not an integer, means "do not retry", as gRFC A6 says.
[[nodiscard]] STORMGUARD_EXPORT pushback parse_pushback(std::string_view value) noexcept;

// Definitions of the two parsers a server runs on every request: inline, so that admission
// costs no call, and cheap (bench/admission_benchmark.cpp): no allocation, no locale, no
// exception, no copy of the value.

namespace detail {

// 1*DIGIT within [0, max] (max < 10^19), at most 19 characters; nothing else (no sign, no
// spaces inside). One digit, the common case (an attempt number), is read directly; longer values
// through std::from_chars on an unsigned type (no sign, no white space, no locale; out-of-range
// values are reported, not wrapped).
inline std::optional<std::int64_t> plain_decimal(std::string_view v, std::int64_t max) noexcept {
  if (v.size() == 1) {
    const auto digit = static_cast<std::int64_t>(static_cast<unsigned char>(v[0])) - '0';
    if (digit >= 0 && digit <= 9 && digit <= max) return digit;
    return std::nullopt;
  }
  if (v.empty() || v.size() > 19) return std::nullopt;
  std::uint64_t value = 0;
  const char* const end = v.data() + v.size();
  const auto [stop, error] = std::from_chars(v.data(), end, value);
  if (error != std::errc{} || stop != end || value > static_cast<std::uint64_t>(max)) {
    return std::nullopt;
  }
  return static_cast<std::int64_t>(value);
}

// The field value without surrounding SP/HTAB; the common case (none) costs two compares.
constexpr std::string_view trim_ows_fast(std::string_view v) noexcept {
  if (!v.empty() && (is_ows(v.front()) || is_ows(v.back()))) return trim_ows(v);
  return v;
}

// grpc-timeout units in nanoseconds, indexed by (letter - 'H'); 0 for a letter that is no unit.
inline constexpr std::int64_t k_grpc_hour_ns = 3'600'000'000'000;
inline constexpr std::array<std::int64_t, 'u' - 'H' + 1> k_grpc_timeout_unit_ns = [] {
  std::array<std::int64_t, 'u' - 'H' + 1> t{};
  t['H' - 'H'] = k_grpc_hour_ns;
  t['M' - 'H'] = 60'000'000'000;
  t['S' - 'H'] = 1'000'000'000;
  t['m' - 'H'] = 1'000'000;
  t['u' - 'H'] = 1'000;
  t['n' - 'H'] = 1;
  return t;
}();

}  // namespace detail

inline attempt_info parse_attempt(std::optional<std::string_view> attempt_count,
                                  std::optional<std::string_view> previous_attempts) noexcept {
  constexpr attempt_info malformed{2, true};
  std::optional<std::int64_t> from_count;
  std::optional<std::int64_t> from_previous;
  if (attempt_count) {
    from_count = detail::plain_decimal(detail::trim_ows_fast(*attempt_count), k_max_attempt_number);
    if (!from_count || *from_count < 1) return malformed;
  }
  if (previous_attempts) {
    const auto previous =
        detail::plain_decimal(detail::trim_ows_fast(*previous_attempts), k_max_attempt_number - 1);
    if (!previous) return malformed;
    from_previous = *previous + 1;
  }
  if (from_count && from_previous && *from_count != *from_previous) return malformed;
  if (from_count) return attempt_info{*from_count, false};
  if (from_previous) return attempt_info{*from_previous, false};
  return attempt_info{};
}

inline void attempt_fields::take(std::optional<std::string_view>& first, std::string_view value,
                                 bool is_count) noexcept {
  if (!first) {
    first = value;
    return;
  }
  const auto read = [is_count](std::string_view v) {
    return is_count ? parse_attempt(v, std::nullopt) : parse_attempt(std::nullopt, v);
  };
  if (read(*first) != read(value)) disagree_ = true;
}

inline attempt_info attempt_fields::result() const noexcept {
  if (disagree_) return attempt_info{2, true};
  return parse_attempt(count_, previous_);
}

inline std::optional<duration> parse_grpc_timeout(std::string_view value) noexcept {
  if (value.size() < 2 || value.size() > 9) return std::nullopt;
  const auto letter = static_cast<std::size_t>(static_cast<unsigned char>(value.back())) -
                      std::size_t{'H'};  // wraps to a large index below 'H'
  if (letter >= detail::k_grpc_timeout_unit_ns.size()) return std::nullopt;
  const std::int64_t unit_ns = detail::k_grpc_timeout_unit_ns[letter];
  if (unit_ns == 0) return std::nullopt;
  // 1 to 8 digits: at most 99,999,999, so no overflow while reading.
  std::int64_t count = 0;
  for (std::size_t i = 0; i + 1 < value.size(); ++i) {
    const auto digit = static_cast<std::int64_t>(static_cast<unsigned char>(value[i])) - '0';
    if (digit < 0 || digit > 9) return std::nullopt;
    count = count * 10 + digit;
  }
  // Only hours can overflow int64 nanoseconds (99,999,999 H; minutes stop at 6e18): saturate at
  // duration::max() (no deadline in practice) instead of wrapping to a negative, already
  // expired, deadline.
  if (unit_ns == detail::k_grpc_hour_ns &&
      count > std::numeric_limits<std::int64_t>::max() / detail::k_grpc_hour_ns) {
    return duration::max();
  }
  return std::chrono::duration_cast<duration>(std::chrono::nanoseconds(count * unit_ns));
}

}  // namespace stormguard

#endif  // STORMGUARD_RETRY_HEADERS_HPP
