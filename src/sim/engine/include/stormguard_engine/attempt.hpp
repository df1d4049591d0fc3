// SPDX-License-Identifier: Apache-2.0
// An attempt as the time-series model's server sees it (the internal engine target
// stormguard_sim_engine): what its headers say, and its place in the waiting line. Times are ns
// of the scenario's clock.
#ifndef STORMGUARD_ENGINE_ATTEMPT_HPP
#define STORMGUARD_ENGINE_ATTEMPT_HPP

#include <cstdint>
#include <limits>

#include "stormguard/retry_headers.hpp"

namespace stormguard::sim::engine {

// No deadline.
inline constexpr std::int64_t k_no_deadline = std::numeric_limits<std::int64_t>::max();

// An attempt waiting for a worker: which one, when it reached the server and its caller's
// deadline (k_no_deadline: none).
struct queued_attempt {
  std::uint32_t request;
  std::int32_t attempt;
  std::int64_t arrived = 0;
  std::int64_t deadline = k_no_deadline;
};

// What a request says about itself in its headers: its attempt number (x-envoy-attempt-count,
// 1 = a first attempt, also when the client does not label its attempts; a strong retry signal
// of another ecosystem raises it), its caller's deadline (from grpc-timeout; k_no_deadline:
// none), and whether the weak retry signal alone recognised it (its fingerprint seen again after
// the server's answer to it failed: admission::retry_signal_recognizer).
struct attempt_labels {
  attempt_info attempt{};
  std::int64_t deadline = k_no_deadline;
  bool weak_retry = false;

  // Recognised as a retry by any signal: a well-formed attempt number >= 2, or the weak one. A
  // malformed label is never a recognised retry (docs/admission.md, "Retry signals"): it is shed
  // no sooner than the same request without it.
  [[nodiscard]] bool recognised_retry() const noexcept {
    return (!attempt.malformed && attempt.attempt >= 2) || weak_retry;
  }
};

}  // namespace stormguard::sim::engine

#endif  // STORMGUARD_ENGINE_ATTEMPT_HPP
