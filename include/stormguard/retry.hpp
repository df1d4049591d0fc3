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
//
// The operation may also return a std::error_code, a std::pair<T, std::error_code>, or a plain
// value and throw on failure; the classifier (classify.hpp) says which errors are worth another
// attempt; hooks observe retries and give-ups; call_options add a stop_token and a deadline:
//
//   auto logged = retry.on_retry([](int attempt, const std::error_code& ec, stormguard::duration d)
//   {
//     log("attempt", attempt, "failed:", ec.message(), "retrying in", d);
//   });
//   std::stop_source stop;
//   auto sent = logged([&](const stormguard::attempt_context& ctx) { return send(ctx.time_left); },
//                      stormguard::retry_only(std::errc::timed_out),
//                      {.stop = stop.get_token(), .deadline = clock.now() + 2s});
#ifndef STORMGUARD_RETRY_HPP
#define STORMGUARD_RETRY_HPP

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <exception>
#include <optional>
#include <stop_token>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "stormguard/backoff.hpp"
#include "stormguard/budget.hpp"
#include "stormguard/classify.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/detail/saturate.hpp"
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
};

/// "success", "not_retryable", "attempts_exhausted", "budget_exhausted",
/// "retry_after_too_long", "deadline_exceeded", "cancelled", "throttled"; "unknown" for a value
/// outside the enum.
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
  /// In this order:
  ///  1. stop ⇒ not_retryable;
  ///  2. attempt > max_retries ⇒ attempts_exhausted;
  ///  3. retry_after(d) with d > max_retry_after ⇒ retry_after_too_long (never an early retry);
  ///  4. delay = backoff().delay(attempt, g, previous_delay); with retry_after(d) it becomes
  ///     max(delay, d) + U(0, d / 2) (one more draw from `g`): never earlier than the server
  ///     asked (RFC 9110 §10.2.3), and spread upward over up to half of d so that clients told
  ///     the same instant do not come back in lockstep (Envoy spreads Retry-After over
  ///     [d, 1.5 d) in the same way; with a backoff below d the range is exactly [d, 1.5 d]);
  ///  5. now + delay at or past `deadline` ⇒ deadline_exceeded (no pointless last sleep; the
  ///     spread counts: a Retry-After that fits but whose spread does not also ends the call);
  ///  6. only then is one retry withdrawn from `budget` at `now`, as
  ///     budget.try_withdraw(now, status, g) with status timeout when verdict.timeout(), failure
  ///     otherwise (denied ⇒ budget_exhausted).
  /// A call that stops before step 4 draws nothing; before step 6 it spends no budget.
  /// `previous_delay` is the delay waited before this attempt (zero before the first retry).
  /// `deadline` is an instant of the caller's clock; time_point::max() = none. All arithmetic
  /// saturates. Thread-safe for distinct `g` (the policy is immutable; `budget` is the budget's).
  template <bit_generator G, retry_budget<G> B>
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
      const duration d = verdict.delay();
      delay = detail::saturating_add(std::max(delay, d), uniform_duration(g, d / 2));
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
    if (verdict.verdict() == classification::kind::stop) return attempt_status::not_retryable;
    return verdict.timeout() ? attempt_status::timeout : attempt_status::failure;
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

/// The value of a successful call whose operation returns no value (a std::error_code, void, or
/// an expected-like type of void): retry_result<done_t, E>::value holds `done`.
struct done_t {
  friend constexpr bool operator==(done_t, done_t) noexcept = default;
};
/// The only done_t value.
inline constexpr done_t done{};

namespace detail {

template <class R>
struct is_error_code_pair : std::false_type {};
template <class T>
struct is_error_code_pair<std::pair<T, std::error_code>> : std::true_type {};

// Makes one attempt and returns its outcome as an expected-like value, whatever the shape of the
// operation (see retrier::operator()).
template <class Op>
auto invoke_attempt(Op& op, const attempt_context& ctx) {
  using R = std::invoke_result_t<Op&, const attempt_context&>;
  using plain = std::remove_cvref_t<R>;
  if constexpr (expected_like<R>) {
    if constexpr (std::is_void_v<decltype(*std::declval<R>())>) {
      using E = std::remove_cvref_t<decltype(std::declval<R>().error())>;
      R r = op(ctx);
      if (r.has_value()) return outcome<done_t, E>(done);
      return outcome<done_t, E>(failure<E>{std::move(r).error()});
    } else {
      return plain(op(ctx));
    }
  } else if constexpr (std::same_as<plain, std::error_code>) {
    const std::error_code ec = op(ctx);
    if (!ec) return outcome<done_t, std::error_code>(done);
    return outcome<done_t, std::error_code>(failure<std::error_code>{ec});
  } else if constexpr (is_error_code_pair<plain>::value) {
    plain p = op(ctx);
    using T = typename plain::first_type;
    if (!p.second) return outcome<T, std::error_code>(std::move(p.first));
    return outcome<T, std::error_code>(failure<std::error_code>{p.second});
  } else if constexpr (std::is_void_v<R>) {
    try {
      op(ctx);
      return outcome<done_t, std::exception_ptr>(done);
    } catch (...) {
      return outcome<done_t, std::exception_ptr>(
          failure<std::exception_ptr>{std::current_exception()});
    }
  } else {
    try {
      return outcome<plain, std::exception_ptr>(op(ctx));
    } catch (...) {
      return outcome<plain, std::exception_ptr>(
          failure<std::exception_ptr>{std::current_exception()});
    }
  }
}

}  // namespace detail

/// The value and error types of a call through a retrier with operation type Op.
template <class Op>
using attempt_outcome_t =
    decltype(detail::invoke_attempt(std::declval<Op&>(), std::declval<const attempt_context&>()));

/// A hook that does nothing: the retrier's default for on_retry and on_give_up. A retrier whose
/// hook is no_hook does not even form the call. Stateless; thread-safe.
struct no_hook {
  template <class... A>
  constexpr void operator()(A&&...) const noexcept {}
};

/// The result of a call through a retrier: the value on success, otherwise the last attempt's
/// error, and in every case why the call ended, the attempts made, every failed attempt's error
/// and the time slept.
///
/// Every failed attempt's error, in attempt order, is previous_errors followed by last_error (as
/// Go's errors.Join in the seed; for_each_error visits them in that order). last_error is held
/// inline: a call whose only failure is its last attempt never allocates; previous_errors
/// allocates from the second failed attempt on (and on success after failures, which moves the
/// last failure there). A plain value type, not thread-safe.
template <class T, class E>
struct [[nodiscard]] retry_result {
  std::optional<T> value;          ///< set when reason == success
  std::optional<E> last_error;     ///< the last attempt's error, when it failed and the call failed
  std::vector<E> previous_errors;  ///< the errors of the other failed attempts, oldest first
  end_reason reason = end_reason::success;
  int attempts = 0;  ///< attempts made (0 only if cancelled or past the deadline at the start)
  duration slept{};  ///< the total of the backoff delays waited (saturates at duration::max())

  [[nodiscard]] bool ok() const noexcept { return reason == end_reason::success; }
  explicit operator bool() const noexcept { return ok(); }

  /// How many attempts failed: previous_errors.size() plus one if last_error is set.
  [[nodiscard]] std::size_t error_count() const noexcept {
    return previous_errors.size() + (last_error ? 1U : 0U);
  }
  /// Calls f(const E&) on every failed attempt's error, oldest first.
  template <class F>
  void for_each_error(F&& f) const {
    for (const E& e : previous_errors) f(e);
    if (last_error) f(*last_error);
  }
};

/// The synchronous retry executor: calls an operation until it succeeds or the policy says
/// stop, sleeping between attempts through the injected clock, drawing jitter from the injected
/// generator and spending retries from the budget: budget.try_admit before the first attempt (a
/// rejection ends the call with end_reason::throttled and no attempt), budget.record after every
/// attempt (success, failure, timeout or not_retryable, from the classifier's verdict; an attempt
/// during which a stop was requested is not recorded), and one withdrawal per retry in
/// retry_policy::decide.
///
/// Hooks (see on_retry and on_give_up) are template parameters defaulting to no_hook, so a
/// retrier without them pays nothing. The success path of a call (the first attempt succeeds,
/// no deadline, no budget) performs no heap allocation and no virtual call
/// (tests/retry_alloc_test.cpp, bench/retry_benchmark.cpp).
///
/// Holds references: the clock, generator and budget must outlive it. Not thread-safe, because
/// the generator is not: give each thread its own retrier and generator; the budget (and the
/// clock) may be shared between them.
template <bit_generator G = random_generator, retry_budget<G> B = no_budget,
          class OnRetry = no_hook, class OnGiveUp = no_hook>
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

  /// A copy of this retrier that calls `hook(attempt, error, delay)` after each failed attempt
  /// that will be retried, before the sleep: `attempt` (int) is the failed attempt's number,
  /// `error` (const E&) its error, `delay` (duration) the sleep about to start. Replaces any
  /// previous on_retry hook. An exception from the hook propagates out of the call.
  ///
  ///   auto logged = retry.on_retry([](int n, const std::error_code& ec, duration d) { … });
  template <class F>
  [[nodiscard]] auto on_retry(F&& hook) const {
    return retrier<G, B, std::decay_t<F>, OnGiveUp>(policy_, clock_, random_, budget_,
                                                    std::forward<F>(hook), on_give_up_);
  }

  /// A copy of this retrier that calls `hook(result)` (a const retry_result<T, E>&) once when a
  /// call ends without success, whatever the reason, just before returning it. Replaces any
  /// previous on_give_up hook. An exception from the hook propagates out of the call.
  template <class F>
  [[nodiscard]] auto on_give_up(F&& hook) const {
    return retrier<G, B, OnRetry, std::decay_t<F>>(policy_, clock_, random_, budget_, on_retry_,
                                                   std::forward<F>(hook));
  }

  /// Calls `op(const attempt_context&)` until an attempt succeeds or the policy stops, and says
  /// why it ended. `op` may have any of these shapes (checked in this order):
  ///  - returns an expected_like type R (outcome, std::expected, …): success = has_value();
  ///    the value type is *r's (done_t for void), the error type is r.error()'s; an exception
  ///    thrown by `op` propagates (the call is abandoned);
  ///  - returns std::error_code: success = !ec; value done_t, error std::error_code;
  ///  - returns std::pair<T, std::error_code>: success = !second; value T (first), error
  ///    std::error_code;
  ///  - returns anything else, or void (done_t): success = no exception; an exception thrown
  ///    by `op` is the attempt's error, as std::exception_ptr (classified like any error).
  /// `classify(const E&)` returns a classification or a bool (true = retry); the default,
  /// default_classifier, retries transient std::error_codes and system_errors (classify.hpp).
  /// An exception thrown by `classify` or a hook propagates.
  ///
  /// `call` adds cancellation and a deadline: a stop request (or a deadline already passed)
  /// before an attempt ends the call without that attempt (attempts may then be 0 and
  /// last_error empty); a stop request during a backoff sleep wakes it at once (real_clock: a
  /// condition variable, no polling) and ends the call with end_reason::cancelled; a retry whose
  /// delay would end at or past the deadline is not made (deadline_exceeded, without sleeping).
  /// The operation sees the attempt number, the stop token and the time left in attempt_context.
  template <class Op, class Classifier = default_classifier>
  requires std::invocable<Op&, const attempt_context&>
  auto operator()(Op&& op, Classifier&& classify = {}, const call_options& call = {}) {
    using attempt_result = attempt_outcome_t<Op>;
    using value_type = std::remove_cvref_t<decltype(*std::declval<attempt_result>())>;
    using error_type = std::remove_cvref_t<decltype(std::declval<attempt_result>().error())>;
    using result_type = retry_result<value_type, error_type>;
    result_type result;
    const auto give_up = [&](end_reason reason) {
      result.reason = reason;
      if constexpr (!std::same_as<OnGiveUp, no_hook>) on_give_up_(std::as_const(result));
    };

    const bool has_deadline = call.deadline != time_point::max();
    duration previous{};
    attempt_status retried = attempt_status::success;  // how the attempt being retried ended
    for (int attempt = 1;; ++attempt) {
      if (call.stop.stop_requested()) {
        give_up(end_reason::cancelled);
        return result;
      }
      attempt_context context{attempt, call.stop, duration::max()};
      if (has_deadline) {
        const time_point now = clock_->now();
        if (now >= call.deadline) {
          give_up(end_reason::deadline_exceeded);
          return result;
        }
        context.time_left = call.deadline - now;
      }
      if constexpr (!std::same_as<B, no_budget>) {
        if (attempt == 1 && !budget_->try_admit(clock_->now(), *random_)) {
          give_up(end_reason::throttled);
          return result;
        }
      }
      attempt_result r = detail::invoke_attempt(op, std::as_const(context));
      result.attempts = attempt;
      if (r.has_value()) {
        record(attempt_status::success, attempt, retried);
        if (result.last_error) {
          result.previous_errors.push_back(std::move(*result.last_error));
          result.last_error.reset();
        }
        result.value.emplace(*std::move(r));
        result.reason = end_reason::success;
        return result;
      }
      if (result.last_error) result.previous_errors.push_back(std::move(*result.last_error));
      result.last_error.emplace(std::move(r).error());
      if (call.stop.stop_requested()) {
        // Stopped during the attempt: no verdict, no budget withdrawal, no on_retry.
        give_up(end_reason::cancelled);
        return result;
      }
      const classification verdict = to_classification(classify, std::as_const(*result.last_error));
      const attempt_status status = retry_policy::status_of(verdict);
      record(status, attempt, retried);
      const time_point before = clock_->now();
      const retry_decision next = policy_decide(attempt, verdict, previous, before, call.deadline);
      if (!next.retry) {
        give_up(next.reason);
        return result;
      }
      if constexpr (!std::same_as<OnRetry, no_hook>) {
        on_retry_(attempt, std::as_const(*result.last_error), next.delay);
      }
      if (!clock_->sleep_for(next.delay, call.stop)) {
        // Interrupted: count the time actually slept, then end without another attempt.
        result.slept = detail::saturating_add(result.slept, clock_->now() - before);
        give_up(end_reason::cancelled);
        return result;
      }
      result.slept = detail::saturating_add(result.slept, next.delay);
      previous = next.delay;
      retried = status;
    }
  }

 private:
  template <bit_generator G2, retry_budget<G2>, class, class>
  friend class retrier;

  template <class R, class U>
  retrier(const retry_policy& policy, clock* clk, G* random, B* budget, R&& on_retry_hook,
          U&& on_give_up_hook)
      : policy_(policy),
        clock_(clk),
        random_(random),
        budget_(budget),
        on_retry_(std::forward<R>(on_retry_hook)),
        on_give_up_(std::forward<U>(on_give_up_hook)) {}

  template <class Classifier, class E>
  static classification to_classification(Classifier& classify, const E& error) {
    using verdict_type = std::invoke_result_t<Classifier&, const E&>;
    if constexpr (std::same_as<std::remove_cvref_t<verdict_type>, bool>) {
      return classify(error) ? classification::retry() : classification::stop();
    } else {
      return classify(error);
    }
  }

  void record(attempt_status status, int attempt, attempt_status retried) {
    if constexpr (!std::same_as<B, no_budget>) {
      budget_->record(clock_->now(), attempt_report{status, attempt, retried});
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
  [[no_unique_address]] OnRetry on_retry_{};
  [[no_unique_address]] OnGiveUp on_give_up_{};
};

template <class G>
retrier(retry_policy, clock&, G&) -> retrier<G, no_budget>;
template <class G, class B>
retrier(retry_policy, clock&, G&, B&) -> retrier<G, B>;

}  // namespace stormguard

#endif  // STORMGUARD_RETRY_HPP
