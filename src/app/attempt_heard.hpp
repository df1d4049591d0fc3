// SPDX-License-Identifier: Apache-2.0
// What one of the lab's attempts came back with, in words common to its transports: the HTTP
// client's result and a gRPC call's status both become an attempt_heard, which app/lab_fleet.cpp
// classifies once. Internal to the application layer; plain data.
#ifndef STORMGUARD_APP_ATTEMPT_HEARD_HPP
#define STORMGUARD_APP_ATTEMPT_HEARD_HPP

#include <optional>
#include <string>

#include "stormguard/admission/reply.hpp"
#include "stormguard/clock.hpp"

namespace stormguard::lab {

/// What one attempt came back with, whatever the transport.
struct attempt_heard {
  /// The server's answer, when there was one: its status (HTTP's, or 200 / 503 for gRPC's OK
  /// and refusals), whether its pushback said do not retry, and whether it asked for a delay.
  std::optional<admission::reply> reply{};
  /// The delay it asked for (Retry-After, or a positive grpc-retry-pushback-ms), when it did.
  std::optional<duration> retry_after{};
  /// No answer before the attempt's time-out (the scenario's silence).
  bool timed_out = false;
  /// Cancelled by the transport (a hedged copy that lost, or the end of the run).
  bool cancelled = false;
  /// No answer for another reason: the lab's own failure, and its message.
  std::optional<std::string> failure{};
};

}  // namespace stormguard::lab

#endif  // STORMGUARD_APP_ATTEMPT_HEARD_HPP
