// SPDX-License-Identifier: Apache-2.0
/// \file
/// The one path from a policy to an executor. A policy file
/// (config::policy) says what to retry, how long to wait and what budget to spend; these adapters
/// turn it into what each executor takes, so that no command or program translates fields by
/// hand:
///
/// \code{.unparsed}
///  retrier, asio::async_retry   config::retrier_settings_for(p)     (this header)
///  http::client, async_client   http::client_options_for(p)         (stormguard/http/policy.hpp)
///  lab::run_payments            lab::payments_options_for(p)        (lab/payments_policy.hpp)
///  the simulator                sim::from_policy(p)                 (stormguard/sim/strategy.hpp)
///  hedger, asio::async_hedge    config::hedging_settings_for(p)     (this header)
///  http::async_hedge            http::hedge_http_options_for(s) (stormguard/http/hedge_policy.hpp)
///  grpc::client                 grpc::client_options_for(p)         (stormguard/grpc/policy.hpp)
/// \endcode
///
/// \code{.cpp}
///  const auto s = stormguard::config::retrier_settings_for(p);
///  stormguard::any_budget budget(s.budget);                  // the policy's budget, any kind
///  stormguard::retrier retry(s.policy(), clock, rng, budget);
///  auto result = retry(op, classify, s.call(clock.now()));   // the policy's deadline
/// \endcode
///
/// Header-only (no link dependency beyond the core); plain values, thread-safe to read.
#ifndef STORMGUARD_CONFIG_EXECUTORS_HPP
#define STORMGUARD_CONFIG_EXECUTORS_HPP

#include <optional>
#include <span>

#include "stormguard/budget_kinds.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/config/policy.hpp"
#include "stormguard/detail/saturate.hpp"
#include "stormguard/hedging.hpp"
#include "stormguard/http_classify.hpp"
#include "stormguard/retry.hpp"
#include "stormguard/retry_policy.hpp"

namespace stormguard::config {

/// What a retrying executor (stormguard::retrier, asio::async_retry, a program's own loop)
/// takes from a policy: every field of the policy that acts on a call ("none" is
/// duration::max(), as in the policy).
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

/// The settings of `p` for a retrier: retry, budget, statuses, attempt_timeout and deadline as
/// they are (duration::max() = none in both).
[[nodiscard]] inline retrier_settings retrier_settings_for(const policy& p) {
  retrier_settings s;
  s.retry = p.retry;
  s.budget = p.budget;
  s.attempt_timeout = p.attempt_timeout;
  s.deadline = p.deadline;
  s.statuses = p.statuses;
  return s;
}

/// What a hedging executor (stormguard::hedger with asio::async_hedge, http::async_hedge) takes
/// from a policy with a `hedging` object (gRFC A6 hedging): the hedging policy's options, the
/// non-fatal statuses, the budget every copy after the first draws from (any kind, through the
/// budget protocol), and the policy's time limits.
struct hedging_settings {
  /// max_attempts, delay (or delay_quantile with its fallback delay); max_retry_after is the
  /// policy's retry.max_retry_after (the longest pushback waited for).
  hedging_options options{};
  /// The HTTP statuses after which the next copy goes at once (gRFC A6's nonFatalStatusCodes).
  retryable_statuses non_fatal_statuses{std::span<const int>{}};
  /// The budget of the client's copies (build it once per client: any_budget(budget)).
  budget_options budget{};
  /// The time limit of one copy, steady time; duration::max() = none.
  duration attempt_timeout = duration::max();
  /// The time limit of a whole hedged call, steady time; duration::max() = none.
  duration deadline = duration::max();

  /// The hedging policy (validated: throws std::invalid_argument as hedging_policy does; a policy
  /// read by config is already valid).
  [[nodiscard]] hedging_policy policy() const { return hedging_policy(options); }
  /// The call's options for a call starting at `now`: its deadline is now + deadline,
  /// saturating (time_point::max() when there is none).
  [[nodiscard]] call_options call(time_point now) const {
    call_options c;
    if (deadline != duration::max()) c.deadline = detail::saturating_add(now, deadline);
    return c;
  }

  friend bool operator==(const hedging_settings&, const hedging_settings&) = default;
};

/// The hedging of `p`, or std::nullopt when `p` retries instead (no `hedging` object). The
/// options' max_retry_after is p.retry.max_retry_after (so a command's --max-retry-after applies
/// to both); the budget is p.budget; the time limits as retrier_settings_for gives them.
[[nodiscard]] inline std::optional<hedging_settings> hedging_settings_for(const policy& p) {
  if (!p.hedging) return std::nullopt;
  hedging_settings s;
  s.options = p.hedging->options;
  s.options.max_retry_after = p.retry.max_retry_after;
  s.non_fatal_statuses = p.hedging->non_fatal_statuses;
  s.budget = p.budget;
  s.attempt_timeout = p.attempt_timeout;
  s.deadline = p.deadline;
  return s;
}

}  // namespace stormguard::config

#endif  // STORMGUARD_CONFIG_EXECUTORS_HPP
