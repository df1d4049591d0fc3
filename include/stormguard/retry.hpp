// SPDX-License-Identifier: Apache-2.0
/// \file
/// The retry policy (what to do after a failed attempt) and the synchronous
/// executor that applies it.
///
/// Deciding is separate from acting. `retry_policy::decide` is a pure function of the attempt
/// state (plus one budget withdrawal) that says "retry after d" or "stop because …"; the executor
/// `stormguard::retrier` calls the operation, sleeps through the injected clock and asks the
/// policy again. The storm simulator calls the very same `decide`, on virtual time.
///
/// \code{.cpp}
///  stormguard::retry_policy policy;                 // 3 retries, 100 ms .. 3 s, full jitter
///  stormguard::real_clock clock;
///  stormguard::random_generator rng;
///  stormguard::ratio_budget budget;                 // shared by every call of this client
///  stormguard::retrier retry(policy, clock, rng, budget);
/// \endcode
///
/// \code{.cpp}
///  auto result = retry([&](const stormguard::attempt_context& ctx)
///                          -> stormguard::outcome<std::string, std::error_code> {
///    return fetch_user(ctx.attempt);                // a value, or stormguard::failure{ec}
///  });
///  if (result) use(*result.value); else log(to_string(result.reason), result.attempts);
/// \endcode
///
/// The operation may also return a std::error_code, a std::pair<T, std::error_code>, or a plain
/// value and throw on failure; the classifier (classify.hpp) says which errors are worth another
/// attempt; hooks observe attempts, retries, give-ups and ends; call_options add a stop_token
/// and a deadline:
///
/// \code{.cpp}
///  auto logged = retry.on_retry([](int attempt, const std::error_code& ec, stormguard::duration d)
///  {
///    log("attempt", attempt, "failed:", ec.message(), "retrying in", d);
///  });
///  std::stop_source stop;
///  auto sent = logged([&](const stormguard::attempt_context& ctx) { return send(ctx.time_left); },
///                     stormguard::retry_only(std::errc::timed_out),
///                     {.stop = stop.get_token(), .deadline = clock.now() + 2s});
/// \endcode
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
#include "stormguard/budget_protocol.hpp"
#include "stormguard/classify.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/detail/saturate.hpp"
#include "stormguard/outcome.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry_policy.hpp"

namespace stormguard {

namespace detail {
// The asynchronous executor (stormguard/asio/retry.hpp) reads a retrier's policy, clock,
// generator, budget and hooks through this, so that both executors take the same retrier
// (defined after retrier).
struct retrier_access;
}  // namespace detail

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

/// The value and error types of a call through a retrier with operation type Op: one attempt's
/// result as an expected-like type — the type `op` returns when it returns one (outcome,
/// std::expected, ...), else outcome<T, E> with T and E as retrier::operator() describes for the
/// other shapes (an error_code, a pair with an error_code, a plain value or void).
template <class Op>
#ifdef STORMGUARD_DOXYGEN  // the reference shows the type without the internal helper
using attempt_outcome_t = outcome<T, E>;
#else
using attempt_outcome_t =
    decltype(detail::invoke_attempt(std::declval<Op&>(), std::declval<const attempt_context&>()));
#endif

/// A hook that does nothing: the retrier's default for on_retry, on_give_up, on_attempt and
/// on_end. A retrier whose hook is no_hook does not even form the call. Stateless; thread-safe.
struct no_hook {
  template <class... A>
  /// Does nothing, whatever the arguments.
  constexpr void operator()(A&&...) const noexcept {}
};

/// What an on_attempt hook is told about one attempt that has ended, once the decision about it
/// was made (so that the delay chosen, or the reason the call ends, is known). A plain value
/// (no allocation); not thread-safe.
struct attempt_event {
  int attempt = 1;  ///< the attempt's number, from 1
  /// How it ended: success, or the classifier's verdict as the budget records it (failure,
  /// timeout, not_retryable; retry_policy::status_of). An attempt during which a stop was
  /// requested is not classified and reports failure (with reason cancelled).
  attempt_status status = attempt_status::success;
  /// The server's minimum delay when the classifier said classification::retry_after (e.g. an
  /// HTTP Retry-After), whether or not it was honoured; empty otherwise.
  std::optional<duration> retry_after{};
  /// The wait before the next attempt, when one follows (the delay on_retry is given).
  std::optional<duration> delay{};
  /// Why the call ends after this attempt, when no attempt follows (success included).
  std::optional<end_reason> reason{};
};

namespace detail {
/// The attempt_event of a failed attempt, after the policy's decision `next` about it.
[[nodiscard]] inline attempt_event make_attempt_event(int attempt, const classification& verdict,
                                                      const retry_decision& next) noexcept {
  attempt_event e{attempt, retry_policy::status_of(verdict), std::nullopt, std::nullopt,
                  std::nullopt};
  if (verdict.action() == classification::kind::retry_after) e.retry_after = verdict.delay();
  if (next.retry) {
    e.delay = next.delay;
  } else {
    e.reason = next.reason;
  }
  return e;
}

}  // namespace detail

/// The result of a call through a retrier: the value on success, otherwise the last attempt's
/// error, and in every case why the call ended, the attempts made, every failed attempt's error
/// and the time slept.
///
/// Every failed attempt's error, in attempt order, is previous_errors followed by last_error (as
/// Go's errors.Join; for_each_error visits them in that order). last_error is held
/// inline: a call whose only failure is its last attempt never allocates; previous_errors
/// allocates from the second failed attempt on (and on success after failures, which moves the
/// last failure there). A plain value type, not thread-safe.
template <class T, class E>
struct [[nodiscard]] retry_result {
  std::optional<T> value;          ///< set when reason == success
  std::optional<E> last_error;     ///< the last attempt's error, when it failed and the call failed
  std::vector<E> previous_errors;  ///< the errors of the other failed attempts, oldest first
  /// Why the call ended: success, or why it stopped (see end_reason).
  end_reason reason = end_reason::success;
  int attempts = 0;  ///< attempts made (0 only if cancelled or past the deadline at the start)
  duration slept{};  ///< the total of the backoff delays waited (saturates at duration::max())

  /// True when the call succeeded (reason is end_reason::success; value is set).
  [[nodiscard]] bool ok() const noexcept { return reason == end_reason::success; }
  /// ok().
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
/// generator and spending retries from the budget through the one budget protocol
/// (request_budget, budget_protocol.hpp): budget.try_admit before the first attempt (a
/// rejection ends the call with end_reason::throttled and no attempt), budget.record after every
/// attempt (success, failure, timeout or not_retryable, from the classifier's verdict; an attempt
/// during which a stop was requested is not recorded), one withdrawal per retry in
/// retry_policy::decide, and, for a budget that hears them, the end of each granted retry and of
/// the request (also when the operation, the classifier or a hook throws).
///
/// Hooks (see on_attempt, on_retry, on_give_up and on_end) are template parameters defaulting to
/// no_hook, so a retrier without them pays nothing. For one call, in order: on_attempt after
/// every attempt (then on_retry before each backoff sleep), on_give_up when the call fails, and
/// on_end last, for every call. The success path of a call (the first attempt succeeds,
/// no deadline, no budget) performs no heap allocation and no virtual call
/// (tests/retry_alloc_test.cpp, bench/retry_benchmark.cpp).
///
/// Holds references: the clock, generator and budget must outlive it. Not thread-safe, because
/// the generator is not: give each thread its own retrier and generator; the budget (and the
/// clock) may be shared between them.
///
/// Example (tests/reference_examples_test.cpp, run by the tests):
/// \snippet reference_examples_test.cpp retrier
template <bit_generator G = random_generator, retry_budget<G> B = no_budget,
          class OnRetry = no_hook, class OnGiveUp = no_hook, class OnAttempt = no_hook,
          class OnEnd = no_hook>
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
  /// \code{.cpp}
  ///  auto logged = retry.on_retry([](int n, const std::error_code& ec, duration d) { … });
  /// \endcode
  template <class F>
  [[nodiscard]] auto on_retry(F&& hook) const {
    return retrier<G, B, std::decay_t<F>, OnGiveUp, OnAttempt, OnEnd>(
        policy_, clock_, random_, budget_, std::forward<F>(hook), on_give_up_, on_attempt_,
        on_end_);
  }

  /// A copy of this retrier that calls `hook(result)` (a const retry_result<T, E>&) once when a
  /// call ends without success, whatever the reason, just before returning it. Replaces any
  /// previous on_give_up hook. An exception from the hook propagates out of the call.
  template <class F>
  [[nodiscard]] auto on_give_up(F&& hook) const {
    return retrier<G, B, OnRetry, std::decay_t<F>, OnAttempt, OnEnd>(
        policy_, clock_, random_, budget_, on_retry_, std::forward<F>(hook), on_attempt_, on_end_);
  }

  /// A copy of this retrier that calls `hook(event)` (a const attempt_event&) after every
  /// attempt, success or failure, once the decision about it is made: after a success, before
  /// on_end; after a failure, after the classifier and the policy, before on_retry and the
  /// sleep. Not called for a call that ends before its first attempt (throttled, cancelled or
  /// past the deadline at the start). Replaces any previous on_attempt hook. An exception from
  /// the hook propagates out of the call (the budget protocol still ends).
  ///
  /// \code{.cpp}
  ///  auto counted = retry.on_attempt([&](const stormguard::attempt_event& e) { ++sent; });
  /// \endcode
  template <class F>
  [[nodiscard]] auto on_attempt(F&& hook) const {
    return retrier<G, B, OnRetry, OnGiveUp, std::decay_t<F>, OnEnd>(
        policy_, clock_, random_, budget_, on_retry_, on_give_up_, std::forward<F>(hook), on_end_);
  }

  /// A copy of this retrier that calls `hook(result)` (a const retry_result<T, E>&) exactly once
  /// per call, whatever the reason (success included), after on_give_up, just before the
  /// result is returned (its reason, attempts and slept are final). Replaces any previous on_end
  /// hook. An exception from the hook propagates out of the call.
  template <class F>
  [[nodiscard]] auto on_end(F&& hook) const {
    return retrier<G, B, OnRetry, OnGiveUp, OnAttempt, std::decay_t<F>>(
        policy_, clock_, random_, budget_, on_retry_, on_give_up_, on_attempt_,
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
  ///
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
      if constexpr (!std::same_as<OnEnd, no_hook>) on_end_(std::as_const(result));
    };

    request_budget ticket;
    const end_guard<B> ends{ticket, budget(), *clock_};
    const bool has_deadline = call.deadline != time_point::max();
    duration previous{};
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
        if (attempt == 1 && !ticket.admit(budget(), clock_->now(), *random_)) {
          give_up(end_reason::throttled);
          return result;
        }
      }
      attempt_result r = detail::invoke_attempt(op, std::as_const(context));
      result.attempts = attempt;
      if (r.has_value()) {
        if constexpr (!std::same_as<B, no_budget>)
          ticket.succeeded(budget(), clock_->now(), attempt);
        if (result.last_error) {
          result.previous_errors.push_back(std::move(*result.last_error));
          result.last_error.reset();
        }
        result.value.emplace(*std::move(r));
        result.reason = end_reason::success;
        if constexpr (!std::same_as<OnAttempt, no_hook>) {
          const attempt_event event{attempt, attempt_status::success, std::nullopt, std::nullopt,
                                    end_reason::success};
          on_attempt_(event);
        }
        if constexpr (!std::same_as<OnEnd, no_hook>) on_end_(std::as_const(result));
        return result;
      }
      if (result.last_error) result.previous_errors.push_back(std::move(*result.last_error));
      result.last_error.emplace(std::move(r).error());
      if (call.stop.stop_requested()) {
        // Stopped during the attempt: no verdict, no record, no budget withdrawal, no on_retry.
        if constexpr (!std::same_as<OnAttempt, no_hook>) {
          const attempt_event event{attempt, attempt_status::failure, std::nullopt, std::nullopt,
                                    end_reason::cancelled};
          on_attempt_(event);
        }
        give_up(end_reason::cancelled);
        return result;
      }
      const classification verdict = to_classification(classify, std::as_const(*result.last_error));
      const time_point before = clock_->now();
      const retry_decision next = ticket.failed(policy_, budget(), attempt, verdict, previous,
                                                *random_, before, call.deadline);
      if constexpr (!std::same_as<OnAttempt, no_hook>) {
        const attempt_event event = detail::make_attempt_event(attempt, verdict, next);
        on_attempt_(event);
      }
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
    }
  }

 private:
  template <bit_generator G2, retry_budget<G2>, class, class, class, class>
  friend class retrier;
  friend struct detail::retrier_access;

  template <class R, class U, class A, class N>
  retrier(const retry_policy& policy, clock* clk, G* random, B* budget, R&& on_retry_hook,
          U&& on_give_up_hook, A&& on_attempt_hook, N&& on_end_hook)
      : policy_(policy),
        clock_(clk),
        random_(random),
        budget_(budget),
        on_retry_(std::forward<R>(on_retry_hook)),
        on_give_up_(std::forward<U>(on_give_up_hook)),
        on_attempt_(std::forward<A>(on_attempt_hook)),
        on_end_(std::forward<N>(on_end_hook)) {}

  template <class Classifier, class E>
  static classification to_classification(Classifier& classify, const E& error) {
    using verdict_type = std::invoke_result_t<Classifier&, const E&>;
    if constexpr (std::same_as<std::remove_cvref_t<verdict_type>, bool>) {
      return classify(error) ? classification::retry() : classification::stop();
    } else {
      return classify(error);
    }
  }

  // Ends the request's budget protocol (request_budget::end) however the call ends, an
  // exception from the operation, the classifier or a hook included. Reads the clock only when
  // the budget hears ends (Envoy's concurrency budget): free for every other budget.
  template <class Budget>
  struct end_guard {
    request_budget& ticket;
    Budget& budget;
    clock& clk;
    end_guard(request_budget& t, Budget& b, clock& c) noexcept : ticket(t), budget(b), clk(c) {}
    end_guard(const end_guard&) = delete;
    end_guard& operator=(const end_guard&) = delete;
    ~end_guard() {
      if (ticket.has_pending_end<Budget>()) ticket.end(budget, clk.now());
    }
  };

  // The budget the protocol talks to: the one given, or an empty no_budget.
  B& budget() noexcept {
    if constexpr (std::same_as<B, no_budget>) {
      return none_;
    } else {
      return *budget_;
    }
  }

  retry_policy policy_;
  clock* clock_;
  G* random_;
  B* budget_;
  [[no_unique_address]] OnRetry on_retry_{};
  [[no_unique_address]] OnGiveUp on_give_up_{};
  [[no_unique_address]] OnAttempt on_attempt_{};
  [[no_unique_address]] OnEnd on_end_{};
  [[no_unique_address]] no_budget none_{};
};

namespace detail {
// The asynchronous executor and stormguard::metrics read a retrier's parts through this.
struct retrier_access {
  template <class R>
  static const retry_policy& policy(const R& r) noexcept {
    return r.policy_;
  }
  template <class R>
  static clock& clk(const R& r) noexcept {
    return *r.clock_;
  }
  template <class R>
  static auto& random(const R& r) noexcept {
    return *r.random_;
  }
  template <class R>
  static auto& budget(R& r) noexcept {
    return r.budget();
  }
  // The budget given at construction; null for a retrier without one.
  template <class R>
  static auto* budget_pointer(const R& r) noexcept {
    return r.budget_;
  }
  template <class R>
  static auto& on_retry(R& r) noexcept {
    return r.on_retry_;
  }
  template <class R>
  static auto& on_give_up(R& r) noexcept {
    return r.on_give_up_;
  }
  template <class R>
  static auto& on_attempt(R& r) noexcept {
    return r.on_attempt_;
  }
  template <class R>
  static auto& on_end(R& r) noexcept {
    return r.on_end_;
  }
  template <class R, class Classifier, class E>
  static classification to_classification(Classifier& classify, const E& error) {
    return R::to_classification(classify, error);
  }
};
}  // namespace detail

/// Deduces a retrier without a budget: `retrier r(policy, clock, rng);`.
template <class G>
retrier(retry_policy, clock&, G&) -> retrier<G, no_budget>;
/// Deduces a retrier with the budget `B`: `retrier r(policy, clock, rng, budget);`.
template <class G, class B>
retrier(retry_policy, clock&, G&, B&) -> retrier<G, B>;

}  // namespace stormguard

#endif  // STORMGUARD_RETRY_HPP
