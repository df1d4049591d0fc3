// SPDX-License-Identifier: Apache-2.0
#include "stormguard/admission/retry_admission.hpp"

namespace stormguard::admission {

namespace {

// Floor division (instants before the clock's epoch map to slices as ratio_budget's do).
std::int64_t floor_div(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

std::int64_t retry_admission::take_pending(time_point now, time_point& deposit_at) const noexcept {
  constexpr auto relaxed = std::memory_order_relaxed;
  // The count first, then the slice: every first attempt in the count saw a slice end no later
  // than the one read here, so it is deposited in its own slice or a later one, never an earlier.
  const std::int64_t count = pending_.exchange(0, relaxed);
  std::int64_t end = slice_end_.load(std::memory_order_acquire);
  deposit_at = count > 0 ? time_point(duration(end - slice_ns_)) : now;
  if (count > 0) first_attempts_.fetch_add(count, relaxed);
  const std::int64_t t = now.time_since_epoch().count();
  if (t >= end) {
    const std::int64_t slice = floor_div(t, slice_ns_);
    const std::int64_t next_end = slice >= std::numeric_limits<std::int64_t>::max() / slice_ns_ - 1
                                      ? std::numeric_limits<std::int64_t>::max()
                                      : (slice + 1) * slice_ns_;
    // Only ever forward: a thread with an older `now` cannot move the end back.
    while (end < next_end &&
           !slice_end_.compare_exchange_weak(end, next_end, std::memory_order_release, relaxed)) {
    }
  }
  return count;
}

bool retry_admission::admit_slow(time_point now, bool retry) noexcept {
  constexpr auto relaxed = std::memory_order_relaxed;
  time_point deposit_at;
  const std::int64_t count = take_pending(now, deposit_at);
  if (!retry) {
    budget_.deposit(deposit_at, count);
    budget_.deposit(now);
    first_attempts_.fetch_add(1, relaxed);
    return true;
  }
  // One critical section per retry: the slice's first attempts in, then the withdrawal.
  if (budget_.deposit_and_try_withdraw(deposit_at, count, now)) {
    retries_admitted_.fetch_add(1, relaxed);
    return true;
  }
  retries_refused_.fetch_add(1, relaxed);
  return false;
}

std::int64_t retry_admission::balance(time_point now) const noexcept {
  time_point deposit_at;
  const std::int64_t count = take_pending(now, deposit_at);
  budget_.deposit(deposit_at, count);
  return budget_.balance(now);
}

retry_admission_counts retry_admission::counts() const noexcept {
  constexpr auto relaxed = std::memory_order_relaxed;
  return retry_admission_counts{first_attempts_.load(relaxed) + pending_.load(relaxed),
                                retries_admitted_.load(relaxed), retries_refused_.load(relaxed),
                                malformed_.load(relaxed)};
}

}  // namespace stormguard::admission
