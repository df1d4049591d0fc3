// SPDX-License-Identifier: Apache-2.0
/// \file
/// The names of the server-side defences, and deadlines.
///
/// The simulator, `serve` and `lab` select the defences a server runs by name, one list for all:
///
/// \code{.unparsed}
///  none               no defence: a FIFO queue that serves whatever it holds
///  drop-expired       never start a request whose caller's deadline (grpc-timeout) has passed,
///                     or will pass before the server's estimate of its service time (expired())
///  lifo-codel         adaptive LIFO + CoDel queue (codel.hpp)
///  retry-budget       server-side retry budget (retry_admission.hpp)
///  concurrency-limit  adaptive concurrency limit (concurrency_limit.hpp)
/// \endcode
///
/// `a+b` combines defences in one server; `all` is all four. parse_defences reads such a name;
/// to_string writes the canonical form (in the order above).
#ifndef STORMGUARD_ADMISSION_DEFENCES_HPP
#define STORMGUARD_ADMISSION_DEFENCES_HPP

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "stormguard/clock.hpp"
#include "stormguard/export.hpp"

namespace stormguard::admission {

/// One server-side defence.
enum class defence : std::uint8_t { drop_expired, lifo_codel, retry_budget, concurrency_limit };

/// Every defence, in canonical order.
inline constexpr std::array<defence, 4> k_all_defences{
    defence::drop_expired, defence::lifo_codel, defence::retry_budget, defence::concurrency_limit};

/// "drop-expired", "lifo-codel", "retry-budget", "concurrency-limit".
[[nodiscard]] STORMGUARD_EXPORT std::string_view to_string(defence d) noexcept;

/// A set of defences (the empty set is "none").
class STORMGUARD_EXPORT defence_set {
 public:
  constexpr defence_set() noexcept = default;
  /// The set holding every defence ("all").
  [[nodiscard]] static constexpr defence_set all() noexcept {
    defence_set s;
    for (const defence d : k_all_defences) s = s.with(d);
    return s;
  }
  /// This set with `d` added.
  [[nodiscard]] constexpr defence_set with(defence d) const noexcept {
    defence_set s = *this;
    s.bits_ = static_cast<std::uint8_t>(s.bits_ | bit(d));
    return s;
  }
  /// True when `d` is in the set.
  [[nodiscard]] constexpr bool has(defence d) const noexcept { return (bits_ & bit(d)) != 0; }
  /// True for "none".
  [[nodiscard]] constexpr bool empty() const noexcept { return bits_ == 0; }
  friend constexpr bool operator==(defence_set, defence_set) noexcept = default;

 private:
  static constexpr std::uint8_t bit(defence d) noexcept {
    return static_cast<std::uint8_t>(1U << static_cast<unsigned>(d));
  }
  std::uint8_t bits_ = 0;
};

/// Reads "none", "all", one defence name, or names joined by '+' (each at most once, "none" and
/// "all" only alone). Throws std::invalid_argument naming the value and the accepted names for
/// anything else (an empty part, an unknown name, a repeated name, a comma).
[[nodiscard]] STORMGUARD_EXPORT defence_set parse_defences(std::string_view text);

/// "none", or the names in canonical order joined by '+' (four names: still written out, not
/// "all", so that reports say what ran).
[[nodiscard]] STORMGUARD_EXPORT std::string to_string(defence_set set);

/// The deadline of a request that arrived at `arrival` carrying `grpc_timeout` (parsed with
/// parse_grpc_timeout; empty = no deadline): arrival + timeout, saturating; time_point::max()
/// when there is none.
[[nodiscard]] constexpr time_point deadline_of(time_point arrival,
                                               std::optional<duration> grpc_timeout) noexcept {
  if (!grpc_timeout) return time_point::max();
  const duration left = time_point::max() - arrival;
  return *grpc_timeout >= left ? time_point::max() : arrival + *grpc_timeout;
}

/// True when a request with `deadline` must not start at `now`, because its caller will have
/// given up before an answer that takes `service_estimate` to compute could reach it:
/// now + service_estimate >= deadline (an answer exactly at the deadline is late), computed
/// without overflow. With `service_estimate` zero (the default, and for any negative value) this
/// is "the deadline has passed": now >= deadline. A deadline of time_point::max() (none) never
/// expires.
///
/// `service_estimate` is the server's own estimate of one request's service time, e.g. its
/// normal (median) latency. It matters under a FIFO queue: once every request older than the
/// callers' timeout is dropped, the head of the line is always one just short of its deadline,
/// and serving it would overrun the deadline by its service time; with the estimate, the server
/// starts only what it can finish in time. Pure, thread-safe (Finagle's DeadlineFilter drops what
/// has expired; gRPC servers check the deadline before running a handler).
[[nodiscard]] constexpr bool expired(time_point now, time_point deadline,
                                     duration service_estimate = duration::zero()) noexcept {
  if (now >= deadline) return true;
  if (deadline == time_point::max()) return false;
  if (service_estimate <= duration::zero()) return false;
  // deadline > now: the difference fits in an unsigned 64-bit count.
  const auto left = static_cast<std::uint64_t>(deadline.time_since_epoch().count()) -
                    static_cast<std::uint64_t>(now.time_since_epoch().count());
  return left <= static_cast<std::uint64_t>(service_estimate.count());
}

}  // namespace stormguard::admission

#endif  // STORMGUARD_ADMISSION_DEFENCES_HPP
