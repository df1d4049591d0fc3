// SPDX-License-Identifier: Apache-2.0
/// \file
/// A clock whose time moves only when told to, for tests.
///
/// Sleeping on a manual_clock advances its time by the requested duration at once and records the
/// sleep, so a test of the retry executor runs in microseconds and can check every delay exactly
/// (after absl/time/simulated_clock.h).
///
/// \code{.cpp}
///  stormguard::testing::manual_clock clock;          // starts at the epoch (time_point{})
///  clock.sleep_for(std::chrono::milliseconds(250), {});
///  assert(clock.now() == stormguard::time_point{} + std::chrono::milliseconds(250));
///  assert(clock.sleeps().size() == 1);
/// \endcode
#ifndef STORMGUARD_TESTING_MANUAL_CLOCK_HPP
#define STORMGUARD_TESTING_MANUAL_CLOCK_HPP

#include <stdexcept>
#include <stop_token>
#include <vector>

#include "stormguard/clock.hpp"
#include "stormguard/detail/mutex.hpp"
#include "stormguard/detail/saturate.hpp"

namespace stormguard::testing {

/// A virtual clock for tests. Thread-safe (one mutex), though tests usually use it from one thread.
///
/// Its wall time (wall_now) starts at `wall_start` and moves with now(): sleeps and advance()
/// move both by the same amount; set_wall_time() moves the wall clock alone (an NTP step).
class manual_clock final : public stormguard::clock {
 public:
  /// 2001-09-09 01:46:40 UTC (10^9 s after the Unix epoch): the default wall time of a
  /// manual_clock, far from both ends of every HTTP-date format.
  static constexpr wall_time_point default_wall_start{std::chrono::seconds(1'000'000'000)};

  /// Starts at `start` (the epoch by default) with the wall clock at `wall_start`.
  explicit manual_clock(time_point start = time_point{},
                        wall_time_point wall_start = default_wall_start)
      : now_(start), wall_offset_(wall_start.time_since_epoch() - start.time_since_epoch()) {}

  /// The virtual wall time: wall_start + (now() - start), plus any set_wall_time() step
  /// (saturating at both ends of wall_time_point).
  [[nodiscard]] wall_time_point wall_now() const noexcept override {
    const stormguard::detail::lock hold(mutex_);
    return wall_time_point(detail::saturating_add(now_.time_since_epoch(), wall_offset_));
  }

  /// Sets the wall clock to `t` without moving now() (as an NTP step or a user setting the date
  /// would); later sleeps move both clocks together again.
  void set_wall_time(wall_time_point t) noexcept {
    const stormguard::detail::lock hold(mutex_);
    wall_offset_ = detail::saturating_sub(t.time_since_epoch(), now_.time_since_epoch());
  }

  /// The virtual now.
  [[nodiscard]] time_point now() const noexcept override {
    const stormguard::detail::lock hold(mutex_);
    return now_;
  }

  /// Records the request, then advances time by `d` (when positive; saturating at
  /// time_point::max()) unless a stop was already
  /// requested, in which case it returns false without advancing. Never blocks.
  bool sleep_for(duration d, const std::stop_token& stop) override {
    const stormguard::detail::lock hold(mutex_);
    sleeps_.push_back(d);
    if (stop.stop_requested()) return false;
    if (d > duration::zero()) now_ = detail::saturating_add(now_, d);
    return true;
  }

  /// Moves time forward by `d` (saturating at time_point::max()). Throws std::invalid_argument for
  /// a negative `d` (time is monotonic).
  void advance(duration d) {
    if (d < duration::zero()) {
      throw std::invalid_argument("manual_clock::advance: d must be >= 0");
    }
    const stormguard::detail::lock hold(mutex_);
    now_ = detail::saturating_add(now_, d);
  }

  /// Every duration passed to sleep_for, in call order.
  [[nodiscard]] std::vector<duration> sleeps() const {
    const stormguard::detail::lock hold(mutex_);
    return sleeps_;
  }

 private:
  mutable stormguard::detail::mutex mutex_;
  time_point now_ STORMGUARD_GUARDED_BY(mutex_);
  // wall_now() - now(), as durations since each clock's epoch
  duration wall_offset_ STORMGUARD_GUARDED_BY(mutex_);
  std::vector<duration> sleeps_ STORMGUARD_GUARDED_BY(mutex_);
};

}  // namespace stormguard::testing

#endif  // STORMGUARD_TESTING_MANUAL_CLOCK_HPP
