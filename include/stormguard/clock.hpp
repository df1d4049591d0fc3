// SPDX-License-Identifier: Apache-2.0
/// \file
/// The time source and sleeper that every stormguard component is given.
///
/// Nothing in stormguard reads the clock or sleeps by itself: the retry executor and the HTTP
/// client ask a `stormguard::clock` for the current time (now(); wall_now() only to resolve an
/// HTTP-date) and ask it to sleep. Production code passes `stormguard::real_clock`
/// (std::chrono::steady_clock, real sleeps that a std::stop_token can interrupt); tests pass
/// `stormguard::testing::manual_clock`, whose sleeps advance virtual time instantly (the design
/// of absl/time/simulated_clock.h and Envoy's SimulatedTimeSystem). The storm simulator needs no
/// clock object: it never sleeps, and passes the instants of its own event loop (time_point) to
/// retry_policy::decide and the budgets, which take time as an argument.
///
/// \code{.cpp}
///  stormguard::real_clock clock;
///  auto t0 = clock.now();
///  clock.sleep_for(std::chrono::milliseconds(5), {});   // sleeps 5 ms of steady time
///  auto waited = clock.now() - t0;                      // >= 5 ms
/// \endcode
#ifndef STORMGUARD_CLOCK_HPP
#define STORMGUARD_CLOCK_HPP

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stop_token>

#include "stormguard/detail/mutex.hpp"
#include "stormguard/export.hpp"

namespace stormguard {

/// A span of time in nanoseconds. Every duration in stormguard's API is (convertible to) this
/// type; arithmetic inside stormguard saturates instead of overflowing.
using duration = std::chrono::nanoseconds;

/// An instant on the monotonic clock (std::chrono::steady_clock's epoch, nanosecond ticks).
/// Virtual clocks (testing::manual_clock, the simulator) use the same type, starting at the epoch.
using time_point = std::chrono::time_point<std::chrono::steady_clock, duration>;

/// An instant of the wall clock (std::chrono::system_clock, nanosecond ticks): what an HTTP-date
/// (Retry-After: Fri, 31 Dec 1999 23:59:59 GMT) is compared with. Not monotonic.
using wall_time_point = std::chrono::time_point<std::chrono::system_clock, duration>;

/// The interface through which stormguard reads time and waits.
///
/// Two time sources: now() (monotonic, for every delay, deadline and budget window) and
/// wall_now() (calendar time, only to turn an absolute HTTP-date into a delay). Implementations
/// must keep now() monotonic. Thread-safety is the implementation's to document; both
/// implementations shipped by stormguard are thread-safe.
class STORMGUARD_EXPORT clock {
 public:
  virtual ~clock() = default;

  /// The current instant. Monotonic, never throws.
  [[nodiscard]] virtual time_point now() const noexcept = 0;

  /// Waits for `d` (a non-positive `d` returns at once) or until `stop` is requested, whichever
  /// comes first. Returns true when the whole duration elapsed, false when the wait ended early
  /// because a stop was requested (including a stop requested before the call).
  virtual bool sleep_for(duration d, const std::stop_token& stop) = 0;

  /// The current calendar time (system_clock's epoch, 1970-01-01 UTC), used only to resolve an
  /// HTTP-date Retry-After into a delay (RFC 9110 §10.2.3). May jump (NTP, a user setting the
  /// clock); never used for delays or deadlines. Never throws.
  [[nodiscard]] virtual wall_time_point wall_now() const noexcept = 0;

 protected:
  clock() = default;
  /// Copyable by derived classes only (no slicing through the interface).
  clock(const clock&) = default;
  /// Assignable by derived classes only.
  clock& operator=(const clock&) = default;
};

/// The production clock: std::chrono::steady_clock and real sleeps.
///
/// A sleep waits on a condition variable with the stop token attached, so a stop request wakes
/// it at once (no polling). Thread-safe: any number of threads may sleep on one instance.
class STORMGUARD_EXPORT real_clock final : public clock {
 public:
  /// The steady clock's current instant.
  [[nodiscard]] time_point now() const noexcept override {
    return std::chrono::time_point_cast<duration>(std::chrono::steady_clock::now());
  }

  /// std::chrono::system_clock::now().
  [[nodiscard]] wall_time_point wall_now() const noexcept override {
    return std::chrono::time_point_cast<duration>(std::chrono::system_clock::now());
  }

  /// Sleeps `d` of steady time, or less if `stop` is requested (then returns false).
  bool sleep_for(duration d, const std::stop_token& stop) override {
    if (stop.stop_requested()) return false;
    if (d <= duration::zero()) return true;
    // std::unique_lock: the condition variable releases and re-takes the mutex while it waits.
    std::unique_lock lock(mutex_);
    // The predicate is never true: the wait ends on timeout or on a stop request. Nothing
    // notifies cv_ except the stop token's callback, so spurious wake-ups just wait again.
    const auto never = [] { return false; };
    // Not cv_.wait_for(lock, stop, d, ...): it computes steady_clock::now() + d, which overflows
    // for d near duration::max() (stormguard's "no limit") and then returned true at once.
    // The deadline saturates instead; a sleep past the end of steady time waits until stopped.
    const auto start = std::chrono::steady_clock::now();
    if (d >= std::chrono::steady_clock::time_point::max() - start) {
      (void)cv_.wait(lock, stop, never);
    } else {
      (void)cv_.wait_until(lock, stop, start + d, never);
    }
    return !stop.stop_requested();
  }

 private:
  // Guards no data: it is only what cv_ waits with (std::condition_variable_any waits on any
  // lockable, detail::mutex included).
  detail::mutex mutex_;
  std::condition_variable_any cv_;
};

}  // namespace stormguard

#endif  // STORMGUARD_CLOCK_HPP
