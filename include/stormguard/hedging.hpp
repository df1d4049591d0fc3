// SPDX-License-Identifier: Apache-2.0
/// \file
/// Hedged requests, decided in one place (gRFC A6 hedging semantics).
///
/// Retries answer failures; hedges answer slowness. A hedged call sends its first copy, and when
/// that has not answered after `delay` sends another, up to `max_attempts` copies in all; the first
/// good answer wins and the executor cancels the rest (Dean and Barroso, "The Tail at Scale",
/// CACM 56(2), 2013; gRFC A6 "gRPC Retry Design", "Hedging Policy"). A policy has retries or
/// hedging, never both (as in A6).
///
/// hedging_policy::plan_next is the decision, a pure function of the call's state, that every
/// executor and the simulator call: when the next copy goes out, or why none will:
///
/// - after `delay` from the previous copy (0: all copies at once);
/// - at once when a copy answered with a non-fatal outcome (A6's nonFatalStatusCodes; which
///   outcomes are non-fatal is the executor's classification);
/// - a server pushback (grpc-retry-pushback-ms, or a Retry-After on a 429/503) of d postpones the
///   next copy to d from now, later copies follow at `delay` after it; "do not retry" stops
///   further copies (copies in flight keep running);
/// - never after max_attempts copies, past the deadline, or for a pushback above
///   max_retry_after.
///
/// Every copy after the first is charged to the retry budget through the budget protocol
/// (budget_protocol.hpp): a refused copy is simply not sent, and the copies in flight keep running
/// (a spent budget never cancels work already sent).
///
/// The delay may adapt: with delay_quantile q in (0, 1), the delay is the q-quantile of recent
/// latencies (latency_tracker), since nobody knows their p95 in advance; until enough latencies are
/// known, `delay` is used.
///
/// \code{.cpp}
///  stormguard::hedging_policy hedging({.max_attempts = 2, .delay = 20ms});
///  auto next = hedging.plan_next(1, sent_at, now, std::nullopt, deadline, hedging.delay());
///  if (next.send) timer.expires_at(next.at);
/// \endcode
#ifndef STORMGUARD_HEDGING_HPP
#define STORMGUARD_HEDGING_HPP

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "stormguard/budget.hpp"
#include "stormguard/budget_protocol.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/detail/mutex.hpp"
#include "stormguard/export.hpp"
#include "stormguard/retry_headers.hpp"

namespace stormguard {

/// The settings of a hedging_policy.
struct hedging_options {
  /// Copies in all, the first included. In [2, 5] (gRFC A6 allows at most 5 attempts).
  int max_attempts = 2;
  /// The delay between two copies; 0 sends every copy at once. In [0, 1 h]. With delay_quantile,
  /// the delay used until latency_tracker knows enough latencies.
  duration delay = std::chrono::milliseconds(20);
  /// 0: the delay is fixed. In (0, 1): the delay is this quantile of recent latencies (0.95 for
  /// "p95").
  double delay_quantile = 0.0;
  /// The longest pushback the call waits for before its next copy; a longer one stops further
  /// copies. > 0; default 60 s, as retry_options::max_retry_after.
  duration max_retry_after = std::chrono::seconds(60);

  friend bool operator==(const hedging_options&, const hedging_options&) = default;
};

/// Why no further copy will be sent.
enum class hedge_stop : unsigned char {
  none,                  ///< a copy will be sent (hedge_plan::send)
  max_attempts,          ///< max_attempts copies were sent
  server_refused,        ///< a server said "do not retry" (negative or unparsable pushback)
  retry_after_too_long,  ///< a server's pushback exceeded max_retry_after
  deadline_exceeded,     ///< the next copy would start at or after the deadline
};

/// "none", "max_attempts", "server_refused", "retry_after_too_long", "deadline_exceeded";
/// "unknown" outside the enum.
[[nodiscard]] STORMGUARD_EXPORT std::string_view to_string(hedge_stop s) noexcept;

/// When the next copy goes out, or why none will.
struct hedge_plan {
  bool send = false;                     ///< true: send the next copy at `at`
  time_point at{};                       ///< when, if send (the caller's clock)
  hedge_stop reason = hedge_stop::none;  ///< why not, if !send
  friend constexpr bool operator==(const hedge_plan&, const hedge_plan&) = default;
};

/// What happened to the copies of one hedged call.
struct hedge_report {
  int winner = 0;     ///< the copy whose answer was returned (1 = the first); 0: no copy succeeded
  int sent = 0;       ///< copies sent, the first included (in [0, max_attempts])
  int refused = 0;    ///< copies the budget refused (0 or 1: no copy is asked for after a refusal)
  int cancelled = 0;  ///< copies in flight when the call was decided, cancelled by the executor
  /// Why no further copy was sent: none when the call was decided before the policy stopped it.
  hedge_stop stop = hedge_stop::none;
  friend constexpr bool operator==(const hedge_report&, const hedge_report&) = default;
};

/// Recent latencies of successful calls, for an adaptive hedging delay: the last k_window of
/// them, with the quantile recomputed every k_recompute records (a query costs a lock and a
/// read). Thread-safe (one short critical section); no allocation.
class STORMGUARD_EXPORT latency_tracker {
 public:
  /// The latencies kept.
  static constexpr std::size_t k_window = 1024;
  /// Records between two recomputations of the quantile.
  static constexpr std::size_t k_recompute = 64;
  /// The fewest latencies from which a quantile is given.
  static constexpr std::size_t k_min_samples = 64;

  /// `q` in (0, 1): the quantile tracked. Throws std::invalid_argument naming q otherwise.
  explicit latency_tracker(double q);

  /// Records one latency (negative values count as 0).
  void record(duration latency) noexcept;
  /// The q-quantile of the last k_window latencies as of the last recomputation; empty before
  /// k_min_samples latencies.
  [[nodiscard]] std::optional<duration> quantile() const noexcept;

 private:
  double q_;
  mutable detail::mutex mutex_;
  std::array<duration, k_window> ring_ STORMGUARD_GUARDED_BY(mutex_){};
  std::size_t count_ STORMGUARD_GUARDED_BY(mutex_) = 0;
  std::optional<duration> cached_ STORMGUARD_GUARDED_BY(mutex_);
};

/// A validated hedging policy: see the file comment. Immutable; share between threads freely.
///
/// Example (tests/reference_examples_test.cpp, run by the tests):
/// \snippet reference_examples_test.cpp hedging_policy
class STORMGUARD_EXPORT hedging_policy {
 public:
  /// Validates `options`; throws std::invalid_argument naming the field and the value:
  /// max_attempts outside [2, 5] ("hedging.max_attempts"), delay outside [0, 1 h],
  /// delay_quantile NaN or outside [0, 1), max_retry_after <= 0.
  explicit hedging_policy(hedging_options options = {});

  /// The delay between copies now: the tracker's quantile when the policy adapts and the tracker
  /// has one, else options().delay.
  [[nodiscard]] duration delay(const latency_tracker* tracker = nullptr) const noexcept;

  /// The next copy, when `copies_sent` (>= 1) copies are out, the last sent at `last_sent`, at
  /// `now`: after `delay` from `last_sent`, or at once when `non_fatal` (a copy just answered
  /// with a non-fatal outcome); `pushback`, the latest server pushback if any, stops or postpones
  /// it (see the file comment); `deadline` is time_point::max() when there is none.
  [[nodiscard]] hedge_plan plan_next(int copies_sent, time_point last_sent, time_point now,
                                     const std::optional<pushback>& pushback, time_point deadline,
                                     duration delay, bool non_fatal = false) const noexcept;

  /// The validated settings.
  [[nodiscard]] const hedging_options& options() const noexcept { return options_; }

 private:
  hedging_options options_;
};

/// The budget protocol's call for a copy after the first (budget_protocol.hpp): the copy draws one
/// retry from `budget` (budget.try_withdraw(now, attempt_status::failure, g), as a retry after a
/// failure would: gRFC A6 counts hedges against the retry throttle). false: the copy is not sent;
/// copies already in flight are not touched (a spent budget never cancels work already sent).
/// Thread-safe as the budget is.
template <bit_generator G, retry_budget<G> B>
[[nodiscard]] bool try_charge_hedge(B& budget, time_point now, G& g) {
  return budget.try_withdraw(now, attempt_status::failure, g);
}

/// A copy granted by try_charge_hedge ended at `now` (answered, timed out or cancelled): a budget
/// that bounds the retries in flight (one with retry_ended, such as concurrency_budget) hears of
/// it; for the others this does nothing. Call it once per granted copy.
template <class B>
void hedge_ended(B& budget, time_point now) {
  if constexpr (hears_retry_end<B>) budget.retry_ended(now);
}

}  // namespace stormguard

#endif  // STORMGUARD_HEDGING_HPP
