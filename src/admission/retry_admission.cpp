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

void retry_admission::flush(time_point now) const noexcept {
  constexpr auto relaxed = std::memory_order_relaxed;
  const std::int64_t end = slice_end_.load(relaxed);
  const std::int64_t count = pending_.exchange(0, relaxed);
  if (count > 0) {
    // In the slice they arrived in: the deposit lands where deposit(now) would have put it.
    budget_.deposit(time_point(duration(end - slice_ns_)), count);
    first_attempts_.fetch_add(count, relaxed);
  }
  const std::int64_t t = now.time_since_epoch().count();
  if (t >= end) {
    const std::int64_t slice = floor_div(t, slice_ns_);
    const std::int64_t next_end = slice >= std::numeric_limits<std::int64_t>::max() / slice_ns_ - 1
                                      ? std::numeric_limits<std::int64_t>::max()
                                      : (slice + 1) * slice_ns_;
    slice_end_.store(next_end, std::memory_order_release);
  }
}

bool retry_admission::admit_slow(time_point now, bool retry) noexcept {
  constexpr auto relaxed = std::memory_order_relaxed;
  const detail::lock hold(mutex_);
  flush(now);
  if (!retry) {
    budget_.deposit(now);
    first_attempts_.fetch_add(1, relaxed);
    return true;
  }
  if (budget_.try_withdraw(now)) {
    retries_admitted_.fetch_add(1, relaxed);
    return true;
  }
  retries_refused_.fetch_add(1, relaxed);
  return false;
}

std::int64_t retry_admission::balance(time_point now) const noexcept {
  const detail::lock hold(mutex_);
  flush(now);
  return budget_.balance(now);
}

retry_admission_counts retry_admission::counts() const noexcept {
  constexpr auto relaxed = std::memory_order_relaxed;
  return retry_admission_counts{first_attempts_.load(relaxed) + pending_.load(relaxed),
                                retries_admitted_.load(relaxed), retries_refused_.load(relaxed),
                                malformed_.load(relaxed)};
}

}  // namespace stormguard::admission
