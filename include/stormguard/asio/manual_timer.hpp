// SPDX-License-Identifier: Apache-2.0
/// \file
/// A backoff timer on virtual time, for tests of async_retry.
///
/// testing::manual_timer is to asio::steady_timer what testing::manual_clock is to real_clock: a
/// wait never sleeps. It completes through the executor (posted, never inline) and, when it was
/// not cancelled before its handler runs, advances the manual_clock by the wait's duration at that
/// moment (manual_clock::sleep_for, which also records it in sleeps()). So a test runs
/// io_context::run() and checks every delay exactly, in microseconds of real time; a cancellation
/// that reaches the io_context before the posted completion (e.g. posted from on_retry, or
/// emitted from another handler) finds the wait still pending and ends it without advancing time.
///
/// \code{.cpp}
///  stormguard::testing::manual_clock clock;
///  stormguard::retrier retry(policy, clock, rng);
///  asio::io_context io;
///  stormguard::async_retry<stormguard::testing::manual_timer>(retry, io.get_executor(), op,
///                                                               [&](auto r) { result = r; });
///  io.run();                        // returns as soon as the loop is idle: no real waiting
///  EXPECT_EQ(clock.sleeps(), (std::vector<stormguard::duration>{...}));
/// \endcode
#ifndef STORMGUARD_ASIO_MANUAL_TIMER_HPP
#define STORMGUARD_ASIO_MANUAL_TIMER_HPP

#include <asio/any_io_executor.hpp>
#include <asio/error.hpp>
#include <asio/post.hpp>
#include <memory>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "stormguard/clock.hpp"
#include "stormguard/testing/manual_clock.hpp"

namespace stormguard::testing {

/// A timer on a manual_clock (see the file comment): satisfies stormguard::backoff_timer.
/// Not thread-safe: use it from its executor's thread, like an asio timer.
class manual_timer {
 public:
  /// The executor type (Asio's polymorphic I/O executor).
  using executor_type = ::asio::any_io_executor;

  /// A timer on `clk`, which must be a testing::manual_clock (std::invalid_argument otherwise:
  /// waiting on any other clock would block the io_context's thread) and outlive the timer's
  /// pending waits.
  manual_timer(const executor_type& ex, stormguard::clock& clk)
      : ex_(ex), clock_(dynamic_cast<manual_clock*>(&clk)) {
    if (clock_ == nullptr) {
      throw std::invalid_argument(
          "stormguard::testing::manual_timer: the clock must be a testing::manual_clock");
    }
  }

  /// The executor the timer's waits complete on.
  [[nodiscard]] executor_type get_executor() const noexcept { return ex_; }

  /// The next wait lasts `d` of virtual time (a negative `d` counts as zero).
  void expires_after(duration d) noexcept { delay_ = d; }

  /// Posts `handler(std::error_code)` to the executor: operation_aborted if cancel() was called
  /// since, otherwise no error, after advancing the clock by the wait's duration.
  template <class Handler>
  void async_wait(Handler&& handler) {
    auto wait = std::make_shared<pending>();
    wait->delay = delay_;
    pending_ = wait;
    ::asio::post(ex_, [wait, clk = clock_, h = std::forward<Handler>(handler)]() mutable {
      if (wait->cancelled) {
        std::move(h)(std::error_code(::asio::error::operation_aborted));
        return;
      }
      (void)clk->sleep_for(wait->delay, {});
      std::move(h)(std::error_code());
    });
  }

  /// Ends the pending wait, if any, with operation_aborted (its handler still runs, posted).
  void cancel() noexcept {
    if (auto wait = pending_.lock()) wait->cancelled = true;
  }

 private:
  struct pending {
    duration delay{};
    bool cancelled = false;
  };
  executor_type ex_;
  manual_clock* clock_;
  duration delay_{};
  std::weak_ptr<pending> pending_;
};

}  // namespace stormguard::testing

#endif  // STORMGUARD_ASIO_MANUAL_TIMER_HPP
