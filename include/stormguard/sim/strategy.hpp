// SPDX-License-Identifier: Apache-2.0
/// \file
/// The retry strategies the storm simulator compares, each a named
/// configuration of the library's own objects (a stormguard::retry_policy and a retry budget).
///
/// The simulator never computes a delay or a budget decision itself: every budget call and every
/// retry decision goes through the library's budget protocol (stormguard::request_budget, which
/// calls stormguard::retry_policy::decide) with the strategy's policy and budget, in the order the
/// retrier uses, so what the simulator shows is what the library does.
///
/// \code{.cpp}
///  for (const auto& s : stormguard::sim::builtin_strategies()) std::cout << s.name << '\n';
///  const auto* full = stormguard::sim::find_strategy("full+budget");   // nullptr if unknown
/// \endcode
///
/// A user's policy (stormguard::config::policy, from a policy file, a gRPC service config or an
/// Envoy route) becomes a strategy with `from_policy`: the same code path as the built-ins.
///
/// The built-in strategies are the policies of policies/builtin-strategies.json, embedded at build
/// time (`stormguard policy check builtin:` prints them). Adding one: a policy in that file (its
/// budget of any kind of stormguard/budget_kinds.hpp); a new kind of budget is added to that list
/// and nowhere here.
#ifndef STORMGUARD_SIM_STRATEGY_HPP
#define STORMGUARD_SIM_STRATEGY_HPP

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "stormguard/budget.hpp"
#include "stormguard/budget_kinds.hpp"
#include "stormguard/config/policy.hpp"
#include "stormguard/export.hpp"
#include "stormguard/retry.hpp"
#include "stormguard/sim/fleet_store.hpp"

namespace stormguard::sim {

/// The retry budget of a strategy, as the options of the budget class each client instance gets
/// its own instance of (the core's list of budget kinds, stormguard::budget_options).
using budget_config = stormguard::budget_options;

/// A named retry strategy: a policy (config::policy: name, description, retries and backoff,
/// budget, retryable statuses, attempt time-out), plus what only the simulator needs. The
/// simulated clients' generators are seeded from the name. The policy's deadline plays no part.
struct strategy : stormguard::config::policy {
  /// Whether a 503 is retried: statuses.contains(503), set by from_policy and the built-ins (a
  /// timeout always is). A field of its own so that the engine reads it per attempt without a
  /// lookup; change `statuses` through from_policy to keep the two equal. Time-series model only.
  bool retries_503 = true;
  /// Whether a scenario's `max_retries` replaces this strategy's: true for the built-ins, false
  /// for a user's policy (whose retries are what the user wrote).
  bool scenario_retries = true;
  /// The store a budget of kind "fleet" shares (round trip, timeout, outage): see
  /// stormguard/sim/fleet_store.hpp. Unused by other budgets. Time-series model only.
  fleet_store_model fleet_store{};

  /// The policy it runs.
  [[nodiscard]] const stormguard::config::policy& as_policy() const noexcept { return *this; }

  friend bool operator==(const strategy&, const strategy&) = default;
};

/// The built-in strategies, in report order (all with base 100 ms, cap 3 s, multiplier 2 unless
/// said otherwise):
///
/// - `none`: max_retries 0 (one attempt, no budget).
/// - `naive`: 3 retries, constant 100 ms, no jitter, no budget.
/// - `exponential`: 3 retries, 100 ms · 2^(n-1) capped at 3 s, no jitter, no budget.
/// - `equal`: as exponential, with equal jitter.
/// - `full`: as exponential, with full jitter.
/// - `decorrelated`: 3 retries, decorrelated jitter from base 100 ms, cap 3 s, no budget.
/// - `full+budget`: as full, plus a ratio_budget per client (10 % over 10 s, floor 10/s).
/// - `full+throttle`: as full, plus gRPC's token_bucket_throttle per client (10 tokens, 0.1).
/// - `full+quota`: as full, plus the AWS SDKs' retry_quota per client (500 tokens, 5/10, 1).
/// - `full+adaptive`: as full, plus the SRE book's adaptive_throttle per client (2 min, K = 2),
///   which may reject first attempts locally (counted as `throttled`).
/// - `full+envoy`: as full, plus Envoy's concurrency_budget per client (retries in flight <=
///   max(3, 20 % of the requests in flight)).
/// - `full+fleet`: as full, plus one ratio budget for the whole fleet (fleet_budget: 10 % over
///   10 s, fleet floor 10/s, sync every 100 ms with the store model, round trip 1 ms).
/// - `full+breaker`: as full, plus a retry-only circuit breaker per client (retry_breaker:
///   retries while the failure rate over 10 s is below 10 %; Brooker 2022).
/// - `hedged`: no retries; a second copy after 20 ms if the first has not answered, first answer
///   wins, each copy charged to a ratio_budget per client (10 % over 10 s, floor 10/s).
/// - `hedged+fleet`: as hedged, the copies charged to one ratio budget for the whole fleet (the
///   fleet_budget of full+fleet: 10 % over 10 s, fleet floor 10/s, sync every 100 ms).
/// - `hedged-unbudgeted`: no retries; up to 5 copies 20 ms apart, no budget.
///
/// `naive` is the for-loop anti-pattern (a fixed 100 ms sleep between attempts). Each is the policy
/// of the same name in policies/builtin-strategies.json (embedded at build time), with
/// scenario_retries true. Thread-safe (a static table built once).
[[nodiscard]] STORMGUARD_EXPORT std::span<const strategy> builtin_strategies();

/// The built-in strategies as policies, in report order: policies/builtin-strategies.json as
/// embedded. Thread-safe.
[[nodiscard]] STORMGUARD_EXPORT std::vector<stormguard::config::policy> builtin_policies();

/// The built-in strategy called `name` (exact, case-sensitive match), or nullptr.
[[nodiscard]] STORMGUARD_EXPORT const strategy* find_strategy(std::string_view name) noexcept;

/// The built-in names joined by ", " in report order, for error messages.
[[nodiscard]] STORMGUARD_EXPORT std::string strategy_names();

/// The strategy that runs `p` in the simulator (the simulator's adapter on the one path from a
/// policy to each executor): the policy itself; its attempt_timeout replaces the scenario's
/// timeout; 503 retried only when p.statuses contains 503; a scenario's max_retries does not
/// apply (scenario_retries false). A policy with a built-in's name and values runs exactly as
/// that built-in (same name: same client seeds).
[[nodiscard]] STORMGUARD_EXPORT strategy from_policy(const stormguard::config::policy& p);

}  // namespace stormguard::sim

#endif  // STORMGUARD_SIM_STRATEGY_HPP
