// stormguard/budget.hpp: retry budgets, the ceiling on how much extra load retries may add.
//
// A retry budget is shared by every call a client (or a proxy) makes. Each logical request
// deposits into it; each retry must withdraw from it first, and when it cannot, the call fails
// fast instead of retrying (the seed's rule 1). The retry executor and the storm simulator talk to
// a budget through the `stormguard::retry_budget` concept:
//
//   b.deposit(now)            a logical request started (its first attempt)
//   b.try_withdraw(now)       may one retry be sent now? true spends it; false means fail fast
//
// Time is passed in (read from the caller's stormguard::clock), so a budget never reads a clock.
//
//   stormguard::ratio_budget budget;                 // 10 % of requests over 10 s, floor 10/s
//   stormguard::real_clock clock;
//   budget.deposit(clock.now());
//   if (budget.try_withdraw(clock.now())) { /* retry */ } else { /* fail fast */ }
#ifndef STORMGUARD_BUDGET_HPP
#define STORMGUARD_BUDGET_HPP

#include <array>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <limits>
#include <mutex>

#include "stormguard/clock.hpp"

namespace stormguard {

/// What the executor and the simulator require of a retry budget. Both calls must be
/// thread-safe when the budget is shared between threads.
template <class B>
concept retry_budget = requires(B& b, time_point now) {
  b.deposit(now);
  { b.try_withdraw(now) } -> std::same_as<bool>;
};

/// The absent budget: deposits nothing and grants every retry. Free: both calls inline to nothing.
struct no_budget {
  constexpr void deposit(time_point) noexcept {}
  [[nodiscard]] constexpr bool try_withdraw(time_point) noexcept { return true; }
};

/// The settings of a ratio_budget. Defaults: the seed (10 % over 10 s) and Finagle/Linkerd
/// (a floor of 10 retries per second).
struct ratio_budget_options {
  /// Retries allowed per logical request, over the window: 0.1 = 10 %. In [0, 1000] (Finagle's
  /// range); resolved to 1e-6 (a deposit is round(ratio · 10^6) micro-retries). A non-zero ratio
  /// that rounds to 0 (below 5e-7) is rejected rather than treated as 0.
  double ratio = 0.1;
  /// The sliding window over which deposits and withdrawals count. In [1 s, 60 s] (Finagle's
  /// range); kept as slices of ttl/10, so the window moves in steps of ttl/10 (see ratio_budget).
  duration ttl = std::chrono::seconds(10);
  /// Retries allowed per second even with no deposits (the reserve is min_retries_per_second ·
  /// ttl per window). >= 0 and <= 1,000,000. Per budget instance: a fleet of N clients, each with
  /// its own budget, adds up to N · min_retries_per_second retries per second.
  std::int64_t min_retries_per_second = 10;

  friend bool operator==(const ratio_budget_options&, const ratio_budget_options&) = default;
};

/// The retry budget of Finagle (com.twitter.finagle.service.RetryBudget) and Linkerd.
///
/// Over a sliding window of `ttl`, in integer micro-retries:
///
///   balance = Σ deposits − Σ withdrawals (both within the window) + reserve
///   deposit  = round(ratio · 10^6) per logical request
///   withdraw = 10^6 per retry, allowed only while balance >= 10^6
///   reserve  = min_retries_per_second · ttl(s) · 10^6
///
/// The window is kept as slices of ttl/10 (rounded up to a nanosecond) in a ring of 11: the
/// current slice and the 10 whole slices before it. A deposit or a withdrawal therefore counts
/// for at least ttl and at most ttl + ttl/10. Because a withdrawal counts for at least ttl, the
/// last retry granted in any span of ttl was granted against a balance that included all the
/// others, so with t the instant of that last retry, the retries granted in the span are at most
///
///   ratio · (requests in (t − ttl − ttl/10, t]) + min_retries_per_second · ttl
///
/// With steady traffic: ratio · (requests in the window and the ttl/10 before it) + the reserve.
///
/// Thread-safe: deposit and try_withdraw take one short critical section (a mutex around the
/// 11-slot ring). Times passed in may come from several threads slightly out of order; a time
/// older than the newest seen counts in the newest slice.
class ratio_budget {
 public:
  /// The scale of the integer arithmetic: one retry = 10^6 micro-retries.
  static constexpr std::int64_t k_scale = 1'000'000;
  /// The number of slices the window is kept as (Finagle's WindowedAdder uses 10).
  static constexpr int k_slices = 10;
  /// The slots of the ring: the current, partly elapsed slice plus k_slices whole ones. With only
  /// k_slices slots a retry granted late in a slice expired up to a slice early, so two
  /// reserves' worth of retries fitted in less than one ttl (found by budget_test's window bound).
  static constexpr int k_ring = k_slices + 1;

  /// Validates `options`; throws std::invalid_argument naming the field and the value when
  /// ratio is NaN, outside [0, 1000] or non-zero but below 5e-7, ttl is outside [1 s, 60 s], or
  /// min_retries_per_second is outside [0, 1,000,000].
  explicit ratio_budget(ratio_budget_options options = {});

  ratio_budget(const ratio_budget&) = delete;
  ratio_budget& operator=(const ratio_budget&) = delete;

  /// Records one logical request at `now`: adds the ratio's deposit to the current slice.
  void deposit(time_point now) noexcept;

  /// Asks for one retry at `now`. Returns true and withdraws one retry when the balance holds at
  /// least one; returns false (and changes nothing) otherwise.
  [[nodiscard]] bool try_withdraw(time_point now) noexcept;

  /// The whole retries that try_withdraw would grant at `now`, if nothing else happened
  /// (floor(balance / 10^6), never negative). For observability; thread-safe.
  [[nodiscard]] std::int64_t balance(time_point now) const noexcept;

  /// The validated settings.
  [[nodiscard]] const ratio_budget_options& options() const noexcept { return options_; }

 private:
  // The caller holds mutex_. Moves the ring to `now` and returns the index of its slice.
  std::size_t advance(time_point now) const noexcept;
  std::int64_t sum_locked() const noexcept;

  ratio_budget_options options_;
  std::int64_t deposit_amount_;
  std::int64_t reserve_;
  std::int64_t slice_ns_;

  mutable std::mutex mutex_;
  mutable std::array<std::int64_t, k_ring> slice_value_{};
  mutable std::int64_t newest_epoch_ = std::numeric_limits<std::int64_t>::min();
};

}  // namespace stormguard

#endif  // STORMGUARD_BUDGET_HPP
