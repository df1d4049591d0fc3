// SPDX-License-Identifier: Apache-2.0
/// \file
/// A retry budget kept by the server, for every client.
///
/// Client-side budgets bound only the clients that run them, and only per process. A server sees
/// every retry of every client (browsers, scripts and other teams' services included) when the
/// requests say which attempt they are (stormguard/retry_headers.hpp: x-envoy-attempt-count or
/// grpc-previous-rpc-attempts). retry_admission admits first attempts always and retries only while
/// they stay within a ratio of the first attempts over a window: Finagle's RetryBudget algorithm,
/// the very stormguard::ratio_budget the clients use (deposit on a first attempt, withdraw on a
/// retry), kept by the server.
///
/// \code{.cpp}
///  stormguard::admission::retry_admission admission;  // 10 % over 10 s, floor 10 retries/s
///  const auto attempt = stormguard::parse_attempt(header("x-envoy-attempt-count"),
///                                                 header("grpc-previous-rpc-attempts"));
///  if (!admission.admit(clock.now(), attempt)) {
///    // 503 with `grpc-retry-pushback-ms: -1` (k_refusal_pushback) and no Retry-After: the
///    // client must not retry; refusing costs the server almost nothing.
///  }
/// \endcode
///
/// The floor (min_retries_per_second) is per server instance: K replicas, each with its own
/// retry_admission, admit up to K floors of retries per second between them; a server scaled down
/// by X (the lab's --scale) should be given floor · X to behave like the full-size one.
///
/// A request whose attempt header is malformed (attempt_info::malformed) is treated as a retry:
/// it never deposits, so a hostile header can never win more than the header's absence would.
///
/// Cost: a first attempt (most requests) is one relaxed atomic add on a counter of the current
/// window slice, lock-free; the slice's count is handed to the ratio budget (ratio_budget::deposit
/// with a count) when the slice ends or a retry asks. The budget thus sees every first attempt in
/// the slice it arrived in, except one that races with the end of its slice: that one is counted
/// in the next slice (window/10 later), never lost. A retry takes one short critical section (the
/// ratio budget's: the slice's first attempts in and the withdrawal, together). Thread-safe; no
/// allocation.
#ifndef STORMGUARD_ADMISSION_RETRY_ADMISSION_HPP
#define STORMGUARD_ADMISSION_RETRY_ADMISSION_HPP

#include <atomic>
#include <cstdint>
#include <limits>
#include <string_view>

#include "stormguard/budget.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/retry_headers.hpp"

namespace stormguard::admission {

/// The pushback a refused retry is answered with: gRFC A6's "do not retry".
inline constexpr std::string_view k_refusal_pushback = "-1";
/// The status a refused retry is answered with (HTTP 503 Service Unavailable).
inline constexpr int k_refusal_status = 503;

/// Counts of what retry_admission decided since construction.
struct retry_admission_counts {
  std::int64_t first_attempts = 0;    ///< first attempts (always admitted)
  std::int64_t retries_admitted = 0;  ///< retries admitted by the budget
  std::int64_t retries_refused = 0;   ///< retries refused (answered 503 + pushback -1)
  std::int64_t malformed = 0;         ///< requests whose attempt header was unreadable
  friend constexpr bool operator==(const retry_admission_counts&,
                                   const retry_admission_counts&) = default;
};

/// A server-side retry budget: see the file comment. Thread-safe; no allocation.
///
/// Example (tests/reference_admission_examples_test.cpp, run by the tests):
/// \snippet reference_admission_examples_test.cpp retry_admission
class STORMGUARD_EXPORT retry_admission {
 public:
  /// `options`: the ratio budget (ratio, window, floor per second of this server). Throws
  /// std::invalid_argument naming the field and the value, as ratio_budget does.
  explicit retry_admission(ratio_budget_options options = {})
      : budget_(options), slice_ns_((budget_.options().window.count() + 9) / 10) {}
  retry_admission(const retry_admission&) = delete;
  retry_admission& operator=(const retry_admission&) = delete;

  /// Decides on one request arriving at `now` (the server's steady clock): a first attempt
  /// deposits and is admitted; a retry (malformed headers included) is admitted only when the
  /// budget grants it.
  [[nodiscard]] bool admit(time_point now, const attempt_info& attempt) noexcept {
    if (attempt.malformed) malformed_.fetch_add(1, std::memory_order_relaxed);
    if (!attempt.is_retry() &&
        now.time_since_epoch().count() < slice_end_.load(std::memory_order_acquire)) {
      pending_.fetch_add(1, std::memory_order_relaxed);  // the fast path: lock-free
      return true;
    }
    return admit_slow(now, attempt.is_retry());
  }

  /// What has been decided so far (each count read atomically; the set is not a snapshot).
  [[nodiscard]] retry_admission_counts counts() const noexcept;
  /// The retries the budget would grant now (ratio_budget::balance).
  [[nodiscard]] std::int64_t balance(time_point now) const noexcept;
  /// The validated settings.
  [[nodiscard]] const ratio_budget_options& options() const noexcept { return budget_.options(); }

 private:
  bool admit_slow(time_point now, bool retry) noexcept;
  // Takes the pending first attempts (returned; their slice's start in deposit_at) and moves
  // slice_end_ forward to the slice of `now`. Lock-free.
  std::int64_t take_pending(time_point now, time_point& deposit_at) const noexcept;

  mutable ratio_budget budget_;  // its own mutex is the only lock a retry takes
  std::int64_t slice_ns_;        // the ratio budget's slice: ceil(window / 10)
  // First attempts of the slice that ends at slice_end_ (ns since the clock's epoch), not yet
  // deposited; take_pending() hands them to budget_.
  mutable std::atomic<std::int64_t> slice_end_{std::numeric_limits<std::int64_t>::min()};
  mutable std::atomic<std::int64_t> pending_{0};
  mutable std::atomic<std::int64_t> first_attempts_{0};  // deposited so far (+ pending_)
  std::atomic<std::int64_t> retries_admitted_{0};
  std::atomic<std::int64_t> retries_refused_{0};
  std::atomic<std::int64_t> malformed_{0};
};

}  // namespace stormguard::admission

#endif  // STORMGUARD_ADMISSION_RETRY_ADMISSION_HPP
