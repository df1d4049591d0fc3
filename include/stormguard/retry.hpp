// stormguard/retry.hpp: the retry policy (what to do after a failed attempt) and the synchronous
// executor that applies it.
//
// Deciding is separate from acting. `retry_policy::decide` is a pure function of the attempt
// state (plus one budget withdrawal) that says "retry after d" or "stop because …"; the executor
// `stormguard::retrier` calls the operation, sleeps through the injected clock and asks the
// policy again. The storm simulator calls the very same `decide`, on virtual time.
//
//   stormguard::retry_policy policy;                 // 3 retries, 100 ms .. 3 s, full jitter
//   stormguard::real_clock clock;
//   stormguard::random_generator rng;
//   stormguard::ratio_budget budget;                 // shared by every call of this client
//   stormguard::retrier retry(policy, clock, rng, budget);
//
//   auto result = retry([&](const stormguard::attempt_context& ctx)
//                           -> stormguard::outcome<std::string, std::error_code> {
//     return fetch_user(ctx.attempt);                // a value, or stormguard::failure{ec}
//   });
//   if (result) use(*result.value); else log(to_string(result.reason), result.attempts);
#ifndef STORMGUARD_RETRY_HPP
#define STORMGUARD_RETRY_HPP

#include <algorithm>
#include <chrono>
#include <concepts>
#include <optional>
#include <stop_token>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "stormguard/backoff.hpp"
#include "stormguard/budget.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/detail/saturate.hpp"
#include "stormguard/random.hpp"

namespace stormguard {

/// The verdict on one failed attempt: retry (with the policy's backoff), retry no sooner than a
/// delay the server asked for (Retry-After), or stop (the failure is not worth another attempt).
class classification {
 public:
  /// What the verdict says.
  enum class kind { retry, retry_after, stop };

  /// Retry after the policy's backoff.
  [[nodiscard]] static constexpr classification retry() noexcept { return {kind::retry, {}}; }
  /// Retry no sooner than `delay` from now (a Retry-After the server sent; RFC 9110 §10.2.3).
  /// The policy waits max(backoff, delay); a negative delay counts as 0 (a date in the past).
  [[nodiscard]] static constexpr classification retry_after(duration delay) noexcept {
    return {kind::retry_after, std::max(delay, duration::zero())};
  }
  /// Do not retry this failure.
  [[nodiscard]] static constexpr classification stop() noexcept { return {kind::stop, {}}; }

  /// The verdict.
  [[nodiscard]] constexpr kind verdict() const noexcept { return kind_; }
  /// The server's minimum delay for retry_after; zero otherwise.
  [[nodiscard]] constexpr duration delay() const noexcept { return delay_; }

  friend constexpr bool operator==(const classification&, const classification&) = default;

 private:
  constexpr classification(kind k, duration d) noexcept : kind_(k), delay_(d) {}
  kind kind_;
  duration delay_;
};

/// Why a call ended.
enum class end_reason {
  success,               ///< an attempt succeeded
  not_retryable,         ///< the classifier said stop
  attempts_exhausted,    ///< max_retries retries were made and the last attempt failed too
  budget_exhausted,      ///< the retry budget denied the next retry (fail fast)
  retry_after_too_long,  ///< the server's Retry-After exceeded max_retry_after
  deadline_exceeded,     ///< the next attempt could not start before the deadline
  cancelled,             ///< a stop was requested (std::stop_token)
};

/// "success", "not_retryable", "attempts_exhausted", "budget_exhausted",
/// "retry_after_too_long", "deadline_exceeded", "cancelled"; "unknown" for a value outside the
/// enum.
[[nodiscard]] std::string_view to_string(end_reason r) noexcept;

/// The settings of a retry_policy. Defaults from the seed's DefaultRetryConfig.
struct retry_options {
  /// Retries after the first attempt: 3 means at most 4 attempts. In [0, 1,000,000].
  int max_retries = 3;
  /// The backoff between attempts (see backoff.hpp).
  backoff_options backoff{};
  /// The longest Retry-After the policy will wait for; a longer one ends the call at once with
  /// end_reason::retry_after_too_long (never an early retry). > 0. Default 60 s (DESIGN.md).
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
class retry_policy {
 public:
  /// Validates `options`: throws std::invalid_argument naming the field and the value when
  /// max_retries is outside [0, 1,000,000], max_retry_after <= 0, or the backoff is invalid
  /// (see stormguard::backoff).
  explicit retry_policy(retry_options options = {});

  /// The validated settings.
  [[nodiscard]] const retry_options& options() const noexcept { return options_; }
  /// The backoff built from options().backoff.
  [[nodiscard]] const stormguard::backoff& backoff() const noexcept { return backoff_; }
  /// Retries allowed after the first attempt.
  [[nodiscard]] int max_retries() const noexcept { return options_.max_retries; }

  /// Decides what follows failed attempt number `attempt` (from 1), classified as `verdict`.
  /// In this order: stop ⇒ not_retryable; attempt > max_retries ⇒ attempts_exhausted; a
  /// Retry-After above max_retry_after ⇒ retry_after_too_long; otherwise the delay is
  /// backoff().delay(attempt, g, previous_delay), raised to the Retry-After when there is one;
  /// if now + delay would pass `deadline` ⇒ deadline_exceeded (no pointless last sleep, never an
  /// early retry); and only then is one retry withdrawn from `budget` at `now` (denied ⇒
  /// budget_exhausted). `previous_delay` is the delay waited before this attempt (zero before the
  /// first retry). `deadline` is an instant of the caller's clock; time_point::max() = none.
  template <bit_generator G, retry_budget B>
  [[nodiscard]] retry_decision decide(int attempt, classification verdict, duration previous_delay,
                                      G& g, B& budget, time_point now,
                                      time_point deadline = time_point::max()) const {
    if (verdict.verdict() == classification::kind::stop) return stop(end_reason::not_retryable);
    if (attempt > options_.max_retries) return stop(end_reason::attempts_exhausted);
    if (verdict.verdict() == classification::kind::retry_after &&
        verdict.delay() > options_.max_retry_after) {
      return stop(end_reason::retry_after_too_long);
    }
    duration delay = backoff_.delay(attempt, g, previous_delay);
    if (verdict.verdict() == classification::kind::retry_after) {
      delay = std::max(delay, verdict.delay());
    }
    if (deadline != time_point::max() && detail::saturating_add(now, delay) >= deadline) {
      return stop(end_reason::deadline_exceeded);
    }
    if (!budget.try_withdraw(now)) return stop(end_reason::budget_exhausted);
    return retry_decision{true, delay, end_reason::success};
  }

 private:
  static constexpr retry_decision stop(end_reason r) noexcept {
    return retry_decision{false, duration::zero(), r};
  }
  retry_options options_;
  stormguard::backoff backoff_;
};

/// What an operation is told about the attempt it is making.
struct attempt_context {
  int attempt = 1;       ///< 1 for the first attempt, 2 for the first retry, …
  std::stop_token stop;  ///< the call's stop token: abandon the attempt when it is stopped
  duration time_left = duration::max();  ///< until the call's deadline; max() = no deadline
};

/// Per-call settings of a retrier: cancellation and an overall deadline.
struct call_options {
  /// A stop request interrupts a backoff sleep at once and no attempt starts after it (the call
  /// ends with end_reason::cancelled).
  std::stop_token stop{};
  /// An instant of the retrier's clock after which no attempt starts and no sleep ends;
  /// time_point::max() = none. A retry whose delay would end at or past it is not made
  /// (end_reason::deadline_exceeded).
  time_point deadline = time_point::max();
};

/// Wraps an error so that it converts to an outcome<T, E> holding the error.
template <class E>
struct failure {
  E error;
};
template <class E>
failure(E) -> failure<E>;

/// The result of one attempt: a value of type T, or an error of type E. The minimal
/// expected-like type for C++20 code; an operation may return any type with has_value(),
/// operator* and error() (std::expected in C++23) instead.
template <class T, class E>
class outcome {
 public:
  /// A successful outcome holding `value`.
  constexpr outcome(T value) : state_(std::in_place_index<0>, std::move(value)) {}
  /// A failed outcome holding `f.error`.
  template <class F>
  requires std::constructible_from<E, F>
  constexpr outcome(failure<F> f) : state_(std::in_place_index<1>, std::move(f.error)) {}

  [[nodiscard]] constexpr bool has_value() const noexcept { return state_.index() == 0; }
  constexpr explicit operator bool() const noexcept { return has_value(); }
  /// The value. Precondition: has_value().
  [[nodiscard]] constexpr T& operator*() & noexcept { return *std::get_if<0>(&state_); }
  [[nodiscard]] constexpr const T& operator*() const& noexcept { return *std::get_if<0>(&state_); }
  [[nodiscard]] constexpr T&& operator*() && noexcept {
    return std::move(*std::get_if<0>(&state_));
  }
  /// The error. Precondition: !has_value().
  [[nodiscard]] constexpr E& error() & noexcept { return *std::get_if<1>(&state_); }
  [[nodiscard]] constexpr const E& error() const& noexcept { return *std::get_if<1>(&state_); }
  [[nodiscard]] constexpr E&& error() && noexcept { return std::move(*std::get_if<1>(&state_)); }

 private:
  std::variant<T, E> state_;
};

/// An expected-like type: has_value(), operator* and error().
template <class R>
concept expected_like = requires(R r) {
  { r.has_value() } -> std::convertible_to<bool>;
  *std::move(r);
  std::move(r).error();
};

/// The default classifier: every error is worth a retry (the caller's max_retries, backoff and
/// budget still bound the retries). Pass your own to say which errors are transient.
struct retry_any_error {
  template <class E>
  constexpr classification operator()(const E&) const noexcept {
    return classification::retry();
  }
};

/// The result of a call through a retrier: the value on success, otherwise the last attempt's
/// error, and in every case why the call ended, the attempts made and the time slept.
template <class T, class E>
struct [[nodiscard]] retry_result {
  std::optional<T> value;       ///< set when reason == success
  std::optional<E> last_error;  ///< the last attempt's error, when one failed and the call failed
  end_reason reason = end_reason::success;
  int attempts = 0;  ///< attempts made (0 only if cancelled or past the deadline at the start)
  duration slept{};  ///< the total of the backoff delays waited (saturates at duration::max())

  [[nodiscard]] bool ok() const noexcept { return reason == end_reason::success; }
  explicit operator bool() const noexcept { return ok(); }
};

/// The synchronous retry executor: calls an operation until it succeeds or the policy says
/// stop, sleeping between attempts through the injected clock, drawing jitter from the injected
/// generator and spending retries from the budget (one deposit per call, one withdrawal per
/// retry).
///
/// Holds references: the clock, generator and budget must outlive it. Not thread-safe, because
/// the generator is not: give each thread its own retrier and generator; the budget (and the
/// clock) may be shared between them.
template <bit_generator G = random_generator, retry_budget B = no_budget>
class retrier {
 public:
  /// A retrier without a retry budget.
  retrier(retry_policy policy, clock& clk, G& random) requires std::same_as<B, no_budget>
      : policy_(std::move(policy)), clock_(&clk), random_(&random), budget_(nullptr) {}

  /// A retrier that spends retries from `budget`.
  retrier(retry_policy policy, clock& clk, G& random, B& budget)
      : policy_(std::move(policy)), clock_(&clk), random_(&random), budget_(&budget) {}

  /// The policy applied.
  [[nodiscard]] const retry_policy& policy() const noexcept { return policy_; }

  /// Calls `op(const attempt_context&)` until it returns a value or the policy stops. `op`
  /// returns an expected_like type; `classify(error)` returns a classification (or a bool: true
  /// = retry). Exceptions thrown by `op` or `classify` propagate (the retry is abandoned).
  /// `call` adds cancellation and a deadline: a stop request (or a deadline already passed)
  /// before an attempt ends the call without that attempt (attempts may then be 0 and
  /// last_error empty); a stop request during a backoff sleep wakes it at once and ends the
  /// call with end_reason::cancelled.
  template <class Op, class Classifier = retry_any_error>
  requires std::invocable<Op&, const attempt_context&> &&
      expected_like<std::invoke_result_t<Op&, const attempt_context&>>
  auto operator()(Op&& op, Classifier&& classify = {}, const call_options& call = {}) {
    using attempt_result = std::invoke_result_t<Op&, const attempt_context&>;
    using value_type = std::remove_cvref_t<decltype(*std::declval<attempt_result>())>;
    using error_type = std::remove_cvref_t<decltype(std::declval<attempt_result>().error())>;
    retry_result<value_type, error_type> result;

    const bool has_deadline = call.deadline != time_point::max();
    if constexpr (!std::same_as<B, no_budget>) budget_->deposit(clock_->now());
    duration previous{};
    for (int attempt = 1;; ++attempt) {
      if (call.stop.stop_requested()) {
        result.reason = end_reason::cancelled;
        return result;
      }
      attempt_context context{attempt, call.stop, duration::max()};
      if (has_deadline) {
        const time_point now = clock_->now();
        if (now >= call.deadline) {
          result.reason = end_reason::deadline_exceeded;
          return result;
        }
        context.time_left = call.deadline - now;
      }
      attempt_result r = op(std::as_const(context));
      result.attempts = attempt;
      if (r.has_value()) {
        result.value.emplace(*std::move(r));
        result.reason = end_reason::success;
        return result;
      }
      const classification verdict = to_classification(classify, std::as_const(r).error());
      const time_point before = clock_->now();
      const retry_decision next = policy_decide(attempt, verdict, previous, before, call.deadline);
      if (!next.retry) {
        result.last_error.emplace(std::move(r).error());
        result.reason = next.reason;
        return result;
      }
      if (!clock_->sleep_for(next.delay, call.stop)) {
        // Interrupted: count the time actually slept, then end without another attempt.
        result.slept = detail::saturating_add(result.slept, clock_->now() - before);
        result.last_error.emplace(std::move(r).error());
        result.reason = end_reason::cancelled;
        return result;
      }
      result.slept = detail::saturating_add(result.slept, next.delay);
      previous = next.delay;
    }
  }

 private:
  template <class Classifier, class E>
  static classification to_classification(Classifier& classify, const E& error) {
    using verdict_type = std::invoke_result_t<Classifier&, const E&>;
    if constexpr (std::same_as<std::remove_cvref_t<verdict_type>, bool>) {
      return classify(error) ? classification::retry() : classification::stop();
    } else {
      return classify(error);
    }
  }

  retry_decision policy_decide(int attempt, classification verdict, duration previous,
                               time_point now, time_point deadline) {
    if constexpr (std::same_as<B, no_budget>) {
      no_budget none;
      return policy_.decide(attempt, verdict, previous, *random_, none, now, deadline);
    } else {
      return policy_.decide(attempt, verdict, previous, *random_, *budget_, now, deadline);
    }
  }

  retry_policy policy_;
  clock* clock_;
  G* random_;
  B* budget_;
};

template <class G>
retrier(retry_policy, clock&, G&) -> retrier<G, no_budget>;
template <class G, class B>
retrier(retry_policy, clock&, G&, B&) -> retrier<G, B>;

}  // namespace stormguard

#endif  // STORMGUARD_RETRY_HPP
