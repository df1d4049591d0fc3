// SPDX-License-Identifier: Apache-2.0
/// \file
/// The `hedging` object of a policy file — hedged requests instead
/// of retries (gRFC A6: a policy has retries or hedging, never both).
///
/// \code{.unparsed}
///  {"policies": [{"name": "hedged",
///                 "hedging": {"max_attempts": 3, "delay": "50ms",
///                             "non_fatal_statuses": [503],
///                             "budget": {"kind": "ratio", "ratio": 0.1}}}]}
/// \endcode
///
/// - `max_attempts`: copies in all, the first included, in [2, 5] (gRFC A6's limit; 6 or more is an
///   error naming hedging.max_attempts). Default 2.
/// - `delay`: between two copies, a duration in [0, 1h] ("0s" sends every copy at once), or
///   "pNN" ("p95", "p99.9"): the NN-th percentile of recent latencies (latency_tracker), with
///   `fallback_delay` (default 20ms) until enough latencies are known. Default "20ms".
/// - `non_fatal_statuses`: the HTTP statuses after which the next copy goes at once (A6's
///   nonFatalStatusCodes); any other answer is final. Default none.
/// - `non_fatal_grpc_codes`: the same over gRPC (A6's nonFatalStatusCodes): gRPC status code
///   names ("UNAVAILABLE") or numbers 1..16. Default: none named.
/// - `budget`: the budget every copy after the first draws from (any kind, as a policy's
///   `budget`; the policy's one budget, so it may be written at either place, not both).
///
/// With hedging, `retries` (or `attempts`) must be 0 or absent. The policy's `max_retry_after`
/// bounds the pushback a hedged call waits for. Plain values: thread-safe to read.
#ifndef STORMGUARD_CONFIG_HEDGING_HPP
#define STORMGUARD_CONFIG_HEDGING_HPP

#include <optional>
#include <span>

#include "stormguard/config/grpc_codes.hpp"
#include "stormguard/hedging.hpp"
#include "stormguard/http_classify.hpp"

namespace stormguard::config {

/// A policy's hedging: the options of stormguard::hedging_policy and the non-fatal statuses.
struct hedging_config {
  /// [hedging.max_attempts], [hedging.delay] (delay or delay_quantile), [hedging.fallback_delay]
  /// (the delay while a "pNN" delay has too few latencies); max_retry_after is the policy's.
  hedging_options options{};
  /// [hedging.non_fatal_statuses] HTTP statuses (100..599) that send the next copy at once; empty
  /// by default (every answer is final, as in gRFC A6).
  retryable_statuses non_fatal_statuses{std::span<const int>{}};
  /// [hedging.non_fatal_grpc_codes] optional: the gRPC status codes that send the next copy at
  /// once over gRPC (A6's hedgingPolicy.nonFatalStatusCodes), written as retryable_grpc_codes
  /// (stormguard/config/grpc_codes.hpp); may be empty. nullopt (absent): none named.
  std::optional<grpc_codes> non_fatal_grpc_codes;

  friend bool operator==(const hedging_config&, const hedging_config&) = default;
};

}  // namespace stormguard::config

#endif  // STORMGUARD_CONFIG_HEDGING_HPP
