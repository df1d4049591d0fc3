// SPDX-License-Identifier: Apache-2.0
/// \file
/// The retry decision, a pure function of the attempt state.
///
/// `retry_policy::decide` says "retry after d" or "stop because …" after a failed attempt. It is
/// the one formula that the synchronous executor (retry.hpp), the asynchronous executor and the
/// storm simulator all call; they reach it through the budget protocol (budget_protocol.hpp),
/// which also tells the retry budget about every attempt.
///
/// \code{.cpp}
///  stormguard::retry_policy policy({.max_retries = 2, .backoff = {.base = 50ms}});
///  stormguard::no_budget none;
///  auto next = policy.decide(1, stormguard::classification::retry(), 0ms, rng, none, now);
///  if (next.retry) sleep(next.delay);   // U(0, 50 ms): full jitter under the first ceiling
/// \endcode
#ifndef STORMGUARD_RETRY_POLICY_HPP
#define STORMGUARD_RETRY_POLICY_HPP

#include <algorithm>
#include <chrono>
#include <string_view>

#include "stormguard/backoff.hpp"
#include "stormguard/budget.hpp"
#include "stormguard/classify.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/detail/empty_braces.hpp"
#include "stormguard/detail/saturate.hpp"
#include "stormguard/export.hpp"
#include "stormguard/random.hpp"

namespace stormguard {

/// Why a call ended.
enum class end_reason {
  success,               ///< an attempt succeeded
  not_retryable,         ///< the classifier said stop
  attempts_exhausted,    ///< max_retries retries were made and the last attempt failed too
  budget_exhausted,      ///< the retry budget denied the next retry (fail fast)
  retry_after_too_long,  ///< the server's Retry-After exceeded max_retry_after
  deadline_exceeded,     ///< the next attempt could not start before the deadline
  cancelled,             ///< a stop was requested (std::stop_token)
  throttled,  ///< the budget rejected the first attempt locally (adaptive_throttle); no attempt
  /// the server answered "do not retry" (gRFC A6: grpc-retry-pushback-ms negative or unparsable)
  server_refused,
};

/// "success", "not_retryable", "attempts_exhausted", "budget_exhausted",
/// "retry_after_too_long", "deadline_exceeded", "cancelled", "throttled", "server_refused";
/// "unknown" for a value
/// outside the enum.
[[nodiscard]] STORMGUARD_EXPORT std::string_view to_string(end_reason r) noexcept;

/// The settings of a retry_policy. Defaults: 3 retries with the default backoff, the numbers of
/// the Go engine in docs/design.md, "The essay this project started from"; a Retry-After of at
/// most 60 s.
struct retry_options {
  /// Retries after the first attempt: 3 means at most 4 attempts. In [0, 1,000,000].
  int max_retries = 3;
  /// The backoff between attempts (see backoff.hpp).
  backoff_options backoff{};
  /// The longest Retry-After the policy will wait for; a longer one ends the call at once with
  /// end_reason::retry_after_too_long (never an early retry). Also bounds the sleep: the upward
  /// spread added to a Retry-After never takes it past max_retry_after (see decide). > 0.
  /// Default 60 s.
  duration max_retry_after = std::chrono::seconds(60);

  friend bool operator==(const retry_options&, const retry_options&) = default;
};

/// What to do after a failed attempt: retry after `delay`, or stop for `reason`.
struct retry_decision {
  bool retry = false;                       ///< true: wait `delay`, then attempt again
  duration delay{};                         ///< the wait before the next attempt, when retry
  end_reason reason = end_reason::success;  ///< why the call ends, when !retry

  friend constexpr bool operator==(const retry_decision&, const retry_decision&) = default;
};

/// A validated set of retry rules: how many retries, which backoff, the longest Retry-After.
/// Immutable; share one instance between threads freely.
///
/// Example (tests/reference_examples_test.cpp, run by the tests):
/// \snippet reference_examples_test.cpp retry_policy
class STORMGUARD_EXPORT retry_policy {
 public:
  /// Validates `options`: throws std::invalid_argument naming the field and the value when
  /// max_retries is outside [0, 1,000,000], max_retry_after <= 0, or the backoff is invalid
  /// (see stormguard::backoff).
  /// `retry_policy({})` is the same as `retry_policy()`.
  explicit retry_policy(retry_options options = {});

  /// \cond
  // `retry_policy({})`: the defaults, as retry_policy() (without this overload, `{}` could mean
  // either retry_options{} or a default retry_policy to copy, and the call did not compile).
  retry_policy(detail::empty_braces) : retry_policy(retry_options{}) {}
  /// \endcond

  /// The validated settings.
  [[nodiscard]] const retry_options& options() const noexcept { return options_; }
  /// The backoff built from options().backoff.
  [[nodiscard]] const stormguard::backoff& backoff() const noexcept { return backoff_; }
  /// Retries allowed after the first attempt.
  [[nodiscard]] int max_retries() const noexcept { return options_.max_retries; }

  /// Decides what follows failed attempt number `attempt` (from 1), classified as `verdict`.
  /// In this order:
  ///  1. stop ⇒ not_retryable;
  ///  2. attempt > max_retries ⇒ attempts_exhausted;
  ///  3. retry_after(d) with d > max_retry_after ⇒ retry_after_too_long (never an early retry);
  ///  4. delay = backoff().delay(attempt, g, previous_delay) = b; with retry_after(d) it becomes
  ///     max(b, d) + U(0, s) with s = min(d / 2, max_retry_after − max(b, d)) (floored at 0;
  ///     one more draw from `g`): never earlier than the server asked (RFC 9110 §10.2.3), spread
  ///     upward over up to half of d so that clients told the same instant do not come back in
  ///     lockstep (Envoy spreads Retry-After over [d, 1.5 d) in the same way), and never longer
  ///     than max_retry_after because of the spread: the sleep after a Retry-After is at most
  ///     max(max_retry_after, b) (b exceeds it only when the backoff's own cap does);
  ///  5. now + delay at or past `deadline` ⇒ deadline_exceeded (no pointless last sleep; the
  ///     spread counts: a Retry-After that fits but whose spread does not also ends the call);
  ///  6. only then is one retry withdrawn from `budget` at `now`, as
  ///     budget.try_withdraw(now, status, g) with status timeout when verdict.timeout(), failure
  ///     otherwise (denied ⇒ budget_exhausted).
  ///
  /// A call that stops before step 4 draws nothing; before step 6 it spends no budget.
  /// `previous_delay` is the delay waited before this attempt (zero before the first retry).
  /// `deadline` is an instant of the caller's clock; time_point::max() = none. All arithmetic
  /// saturates. Thread-safe for distinct `g` (the policy is immutable; `budget` is the budget's).
  template <bit_generator G, retry_budget<G> B>
  [[nodiscard]] retry_decision decide(int attempt, classification verdict, duration previous_delay,
                                      G& g, B& budget, time_point now,
                                      time_point deadline = time_point::max()) const {
    if (verdict.action() == classification::kind::stop) return stop(end_reason::not_retryable);
    if (attempt > options_.max_retries) return stop(end_reason::attempts_exhausted);
    if (verdict.action() == classification::kind::retry_after &&
        verdict.delay() > options_.max_retry_after) {
      return stop(end_reason::retry_after_too_long);
    }
    duration delay = backoff_.delay(attempt, g, previous_delay);
    if (verdict.action() == classification::kind::retry_after) {
      const duration at_least = std::max(delay, verdict.delay());
      const duration room = options_.max_retry_after > at_least
                                ? options_.max_retry_after - at_least
                                : duration::zero();
      delay = detail::saturating_add(at_least,
                                     uniform_duration(g, std::min(verdict.delay() / 2, room)));
    }
    if (deadline != time_point::max() && detail::saturating_add(now, delay) >= deadline) {
      return stop(end_reason::deadline_exceeded);
    }
    if (!budget.try_withdraw(now, status_of(verdict), g)) {
      return stop(end_reason::budget_exhausted);
    }
    return retry_decision{true, delay, end_reason::success};
  }

  /// How a failed attempt with this verdict ended, as a budget sees it: not_retryable for stop,
  /// timeout when verdict.timeout(), failure otherwise.
  [[nodiscard]] static constexpr attempt_status status_of(classification verdict) noexcept {
    if (verdict.action() == classification::kind::stop) return attempt_status::not_retryable;
    return verdict.timeout() ? attempt_status::timeout : attempt_status::failure;
  }

 private:
  static constexpr retry_decision stop(end_reason r) noexcept {
    return retry_decision{false, duration::zero(), r};
  }
  retry_options options_;
  stormguard::backoff backoff_;
};

}  // namespace stormguard

#endif  // STORMGUARD_RETRY_POLICY_HPP
