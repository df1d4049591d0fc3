// SPDX-License-Identifier: Apache-2.0
/// \file
/// A request's deadline, and whether it has expired.
///
/// A server reads its caller's deadline from grpc-timeout (parse_grpc_timeout,
/// stormguard/retry_headers.hpp), turns it into a time point at arrival (deadline_of) and does not
/// start a request whose caller will have given up before the answer could reach it (expired).
/// The simulator's and `serve`'s "drop-expired" defence is exactly this check.
#ifndef STORMGUARD_ADMISSION_DEADLINE_HPP
#define STORMGUARD_ADMISSION_DEADLINE_HPP

#include <cstdint>
#include <optional>

#include "stormguard/clock.hpp"

namespace stormguard::admission {

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

#endif  // STORMGUARD_ADMISSION_DEADLINE_HPP
