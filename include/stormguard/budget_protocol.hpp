// SPDX-License-Identifier: Apache-2.0
/// \file
/// The one place where a logical request talks to its retry
/// budget, shared by the synchronous executor (retry.hpp), the asynchronous executor and the
/// storm simulator.
///
/// A logical request goes through the budget in a fixed order, and every executor must follow
/// it exactly, or the budgets count differently in production and in the simulator:
///
/// \code{.unparsed}
///  admit          before the first attempt          budget.try_admit
///  after each attempt:
///    succeeded    the attempt succeeded             budget.record(success); a retry ends
///    failed       the attempt failed                budget.record(failure | timeout |
///                                                   not_retryable); a retry ends; then
///                                                   retry_policy::decide (which withdraws one
///                                                   retry when it grants one)
///  end            the request is over, however      a granted retry that never ran ends; the
///                 (success, give-up, cancellation,  admission ends
///                 an exception)
/// \endcode
///
/// `request_budget` holds the per-request state this needs in one byte (how the attempt being
/// retried ended, whether the request was admitted, whether it holds a granted retry), so that
/// the simulator can keep one per logical request at no cost in memory. It holds no reference to
/// the budget: each call takes the budget, so the same object works for a retrier's budget, a
/// simulated client's budget or none (no_budget: every call compiles to nothing).
///
/// The two "end" calls are optional members of a budget (see retry_budget in budget.hpp):
/// `retry_ended(now)` and `request_ended(now)`. Only a budget that bounds what is *in flight*
/// (Envoy's concurrency budget: retries in flight <= a share of active requests) needs them; for
/// the others they are not called at all.
///
/// \code{.cpp}
///  stormguard::request_budget ticket;
///  if (!ticket.admit(budget, clock.now(), rng)) return throttled;
///  for (int attempt = 1;; ++attempt) {
///    auto r = op();
///    if (r) { ticket.succeeded(budget, clock.now(), attempt); break; }
///    auto next = ticket.failed(policy, budget, attempt, classify(r.error()), previous, rng,
///                              clock.now(), deadline);
///    if (!next.retry) break;
///    clock.sleep_for(next.delay, stop);
///  }
///  ticket.end(budget, clock.now());
/// \endcode
#ifndef STORMGUARD_BUDGET_PROTOCOL_HPP
#define STORMGUARD_BUDGET_PROTOCOL_HPP

#include <cstdint>

#include "stormguard/budget.hpp"
#include "stormguard/classify.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry_policy.hpp"

namespace stormguard {

/// A budget that wants to hear when a granted retry's attempt ends (or the retry is abandoned
/// before it starts): it has `retry_ended(time_point)`.
template <class B>
concept hears_retry_end = requires(B& b, time_point now) {
  b.retry_ended(now);
};

/// A budget that wants to hear when an admitted logical request ends: it has
/// `request_ended(time_point)`.
template <class B>
concept hears_request_end = requires(B& b, time_point now) {
  b.request_ended(now);
};

/// One logical request's side of the budget protocol (see the file comment for the order of
/// calls). Guarantees, whatever the executor does between the calls:
///  - every attempt is recorded once, with the status of the attempt it retries;
///  - for a budget with retry_ended: every retry granted by failed() is ended exactly once (when
///    its attempt ends, or at end() when it never ran);
///  - for a budget with request_ended: an admitted request is ended exactly once, at end().
///
/// end() may be called more than once (the later calls do nothing), so an executor can call it
/// from a scope guard as well as on its normal path.
///
/// A plain value (1 byte); not thread-safe: one per logical request, used by one thread at a
/// time. The budget it is given is the budget's own business (every stormguard budget is
/// thread-safe). `B` is the same budget type in every call on one request_budget.
class request_budget {
 public:
  /// Asks `budget` to admit the request's first attempt (budget.try_admit(now, g)). false: the
  /// request is rejected locally, no attempt may be sent (end_reason::throttled), and end() has
  /// nothing to end.
  template <bit_generator G, retry_budget<G> B>
  [[nodiscard]] bool admit(B& budget, time_point now, G& g) {
    if (!budget.try_admit(now, g)) return false;
    bits_ |= k_admitted;
    return true;
  }

  /// Attempt number `attempt` (from 1) succeeded at `now`: records it, and ends the retry it
  /// was, if any.
  template <class B>
  void succeeded(B& budget, time_point now, int attempt) {
    finish_attempt(budget, now, attempt, attempt_status::success);
  }

  /// Attempt number `attempt` failed at `now` with `verdict`: records it (status
  /// retry_policy::status_of(verdict)), ends the retry it was, if any, then asks
  /// policy.decide(attempt, verdict, previous_delay, g, budget, now, deadline). When the
  /// decision is to retry, the request now holds that granted retry until its attempt ends (or
  /// end()). `previous_delay` is the delay waited before this attempt (zero for the first);
  /// `deadline` an instant of the caller's clock (time_point::max() = none).
  template <bit_generator G, retry_budget<G> B>
  [[nodiscard]] retry_decision failed(const retry_policy& policy, B& budget, int attempt,
                                      classification verdict, duration previous_delay, G& g,
                                      time_point now, time_point deadline = time_point::max()) {
    const attempt_status status = retry_policy::status_of(verdict);
    finish_attempt(budget, now, attempt, status);
    const retry_decision next =
        policy.decide(attempt, verdict, previous_delay, g, budget, now, deadline);
    if (next.retry) {
      bits_ = static_cast<std::uint8_t>((bits_ & k_admitted) | k_holds_retry |
                                        static_cast<std::uint8_t>(status));
    }
    return next;
  }

  /// The request is over at `now` (whatever the reason; also after a stop during an attempt,
  /// which is not recorded): ends a granted retry that never ran and the admission. Idempotent.
  template <class B>
  void end(B& budget, time_point now) {
    release_retry(budget, now);
    if (has(k_admitted)) {
      bits_ &= static_cast<std::uint8_t>(~k_admitted);
      if constexpr (hears_request_end<B>) budget.request_ended(now);
    }
  }

  /// Whether end() still has something to tell `B` (an admission or a granted retry to end).
  /// An executor's scope guard reads the clock for end() only when this is true.
  template <class B>
  [[nodiscard]] bool has_pending_end() const noexcept {
    return (hears_request_end<B> && has(k_admitted)) || (hears_retry_end<B> && has(k_holds_retry));
  }

  /// How the attempt being retried ended (failure or timeout); success before the first retry.
  [[nodiscard]] attempt_status retrying() const noexcept {
    return static_cast<attempt_status>(bits_ & k_status_mask);
  }

 private:
  static constexpr std::uint8_t k_status_mask = 0x3;  // bits 0-1: retrying()
  static constexpr std::uint8_t k_admitted = 0x4;
  static constexpr std::uint8_t k_holds_retry = 0x8;
  static_assert(static_cast<int>(attempt_status::not_retryable) <= k_status_mask);

  template <class B>
  void finish_attempt(B& budget, time_point now, int attempt, attempt_status status) {
    budget.record(
        now, attempt_report{status, attempt, attempt > 1 ? retrying() : attempt_status::success});
    release_retry(budget, now);
  }

  template <class B>
  void release_retry(B& budget, time_point now) {
    if (!has(k_holds_retry)) return;
    bits_ &= static_cast<std::uint8_t>(~k_holds_retry);
    if constexpr (hears_retry_end<B>) budget.retry_ended(now);
  }

  [[nodiscard]] bool has(std::uint8_t flag) const noexcept { return (bits_ & flag) != 0; }

  std::uint8_t bits_ = 0;  // retrying() = success, not admitted, no retry held
};
static_assert(sizeof(request_budget) == 1);

}  // namespace stormguard

#endif  // STORMGUARD_BUDGET_PROTOCOL_HPP
