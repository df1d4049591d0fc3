// SPDX-License-Identifier: Apache-2.0
// stormguard/config/executors.hpp: the one path from a policy to an executor. A policy file
// (config::policy) says what to retry, how long to wait and what budget to spend; these adapters
// turn it into what each executor takes, so that no command or program translates fields by
// hand:
//
//   retrier, asio::async_retry   config::retrier_settings_for(p)     (this header)
//   http::client, async_client   http::client_options_for(p)         (stormguard/http/policy.hpp)
//   lab::run_payments            lab::payments_options_for(p)        (lab/payments_policy.hpp)
//   the simulator                sim::from_policy(p)                 (stormguard/sim/strategy.hpp)
//
//   const auto s = stormguard::config::retrier_settings_for(p);
//   stormguard::any_budget budget(s.budget);                  // the policy's budget, any kind
//   stormguard::retrier retry(s.policy(), clock, rng, budget);
//   auto result = retry(op, classify, s.call(clock.now()));   // the policy's deadline
//
// Header-only (no link dependency beyond the core); plain values, thread-safe to read.
#ifndef STORMGUARD_CONFIG_EXECUTORS_HPP
#define STORMGUARD_CONFIG_EXECUTORS_HPP

#include "stormguard/budget_kinds.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/config/policy.hpp"
#include "stormguard/detail/saturate.hpp"
#include "stormguard/http_classify.hpp"
#include "stormguard/retry.hpp"
#include "stormguard/retry_policy.hpp"

namespace stormguard::config {

/// What a retrying executor (stormguard::retrier, asio::async_retry, a program's own loop)
/// takes from a policy: every field of the policy that acts on a call, with "none" spelled as
/// duration::max() rather than an empty optional.
struct retrier_settings {
  /// Retries, backoff and the longest Retry-After honoured (retry_policy's options).
  retry_options retry{};
  /// The budget of the client (build it once per client: any_budget(budget) or make_budget).
  budget_options budget{};
  /// The time limit of one attempt, steady time; duration::max() = none.
  duration attempt_timeout = duration::max();
  /// The time limit of a whole call, steady time; duration::max() = none.
  duration deadline = duration::max();
  /// The HTTP statuses retried (for a classifier: classify_http_status).
  retryable_statuses statuses{};

  /// The retry policy (validated: throws std::invalid_argument as retry_policy does; a policy
  /// read by config is already valid).
  [[nodiscard]] retry_policy policy() const { return retry_policy(retry); }
  /// The call's options for a call starting at `now` (the retrier's clock): its deadline is
  /// now + deadline, saturating (time_point::max() when there is none).
  [[nodiscard]] call_options call(time_point now) const {
    call_options c;
    if (deadline != duration::max()) c.deadline = detail::saturating_add(now, deadline);
    return c;
  }

  friend bool operator==(const retrier_settings&, const retrier_settings&) = default;
};

/// The settings of `p` for a retrier: retry, budget and statuses as they are; attempt_timeout
/// and deadline from the policy's, or duration::max() when it has none.
[[nodiscard]] inline retrier_settings retrier_settings_for(const policy& p) {
  retrier_settings s;
  s.retry = p.retry;
  s.budget = p.budget;
  s.attempt_timeout = p.attempt_timeout.value_or(duration::max());
  s.deadline = p.deadline.value_or(duration::max());
  s.statuses = p.statuses;
  return s;
}

}  // namespace stormguard::config

#endif  // STORMGUARD_CONFIG_EXECUTORS_HPP
