// SPDX-License-Identifier: Apache-2.0
/// \file
/// A circuit breaker for retries only, for comparison with the
/// budgets of budget.hpp (budget kind "breaker").
///
/// Marc Brooker, "Fixing retries with token buckets and circuit breakers" (2022): first attempts
/// are always sent; a retry is sent only while the client's recent failure rate is below a
/// threshold. The post compares it with a retry token bucket and finds that with many small
/// clients a per-client breaker (like a per-client bucket) misjudges the failure rate from too few
/// calls of its own. `stormguard simulate --sweep clients=...` shows that next to the other kinds.
///
/// \code{.cpp}
///  stormguard::retry_breaker breaker({.threshold = 0.1, .window = std::chrono::seconds(10)});
///  stormguard::retrier retry(policy, clock, rng, breaker);
/// \endcode
///
/// Failure rate = (failed + timed-out attempts) ÷ attempts recorded over the sliding window (kept
/// as 10 slices of window/10, as ratio_budget's). With no attempt in the window the rate is 0.
/// Thread-safe: one short critical section per call; no call allocates.
#ifndef STORMGUARD_RETRY_BREAKER_HPP
#define STORMGUARD_RETRY_BREAKER_HPP

#include <chrono>
#include <cstdint>
#include <string_view>

#include "stormguard/budget.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/detail/mutex.hpp"
#include "stormguard/detail/sliding_window.hpp"
#include "stormguard/export.hpp"

namespace stormguard {

class retry_breaker;

/// The settings of a retry_breaker. Defaults: threshold 10 % — the failure rate above which the
/// post's token bucket (0.1 token per success, 1 per retry) also stops retrying, its point of
/// comparison — and a window of 10 s (ratio_budget's; the post leaves the window open).
struct retry_breaker_options {
  /// Retries are sent while failures ÷ attempts over the window is below this. In (0, 1].
  double threshold = 0.1;
  /// The sliding window the rate is measured over. In [1 s, 60 s].
  duration window = std::chrono::seconds(10);

  /// Its kind in policy files and metric labels (budget_kinds.hpp).
  static constexpr std::string_view kind = "breaker";
  /// The class these options build.
  using budget_type = retry_breaker;
  /// Its settings and their ranges (see ratio_budget_options::fields).
  template <class Self, class F>
  static void fields(Self& o, F&& f) {
    f("threshold", o.threshold, 0.0, 1.0);
    f("window", o.window, duration(std::chrono::seconds(1)), duration(std::chrono::seconds(60)));
  }

  friend bool operator==(const retry_breaker_options&, const retry_breaker_options&) = default;
};

/// The retry-only circuit breaker (see the file comment). Thread-safe.
///
/// Example (tests/reference_examples_test.cpp, run by the tests):
/// \snippet reference_examples_test.cpp retry_breaker
class STORMGUARD_EXPORT retry_breaker {
 public:
  /// The options type that builds it.
  using options_type = retry_breaker_options;

  /// Throws std::invalid_argument naming the field: threshold outside (0, 1] (or NaN), window
  /// outside [1 s, 60 s].
  explicit retry_breaker(retry_breaker_options options = {});
  retry_breaker(const retry_breaker&) = delete;
  retry_breaker& operator=(const retry_breaker&) = delete;

  /// retry_budget: first attempts are always sent.
  template <class G>
  [[nodiscard]] bool try_admit(time_point, G&) noexcept {
    return true;
  }
  /// retry_budget: a retry is sent while the failure rate over the window is below threshold.
  template <class G>
  [[nodiscard]] bool try_withdraw(time_point now, attempt_status, G&) noexcept {
    return closed(now);
  }
  /// retry_budget: counts the attempt (failure and timeout as failures).
  void record(time_point now, const attempt_report& report) noexcept;

  /// The failure rate over the window at `now`, in [0, 1].
  [[nodiscard]] double failure_rate(time_point now) const noexcept;
  /// The validated settings.
  [[nodiscard]] const retry_breaker_options& options() const noexcept { return options_; }

 private:
  struct counts {
    std::int64_t attempts = 0;
    std::int64_t failures = 0;
    counts& operator+=(const counts& o) noexcept {
      attempts += o.attempts;
      failures += o.failures;
      return *this;
    }
    counts& operator-=(const counts& o) noexcept {
      attempts -= o.attempts;
      failures -= o.failures;
      return *this;
    }
  };
  bool closed(time_point now) noexcept;

  retry_breaker_options options_;
  mutable detail::mutex mutex_;
  mutable detail::sliding_window<counts, 10> window_ STORMGUARD_GUARDED_BY(mutex_);
};

}  // namespace stormguard

#endif  // STORMGUARD_RETRY_BREAKER_HPP
