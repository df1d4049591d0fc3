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
    bump(first_attempts_, count);
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

// Counters written only under mutex_ (read by counts() without it): a plain relaxed load and
// store, no read-modify-write.
void retry_admission::bump(std::atomic<std::int64_t>& counter, std::int64_t n) noexcept {
  counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

bool retry_admission::admit_slow(time_point now, bool retry) noexcept {
  const detail::lock hold(mutex_);
  flush(now);
  if (!retry) {
    budget_.deposit(now);
    bump(first_attempts_);
    return true;
  }
  if (budget_.try_withdraw(now)) {
    bump(retries_admitted_);
    return true;
  }
  bump(retries_refused_);
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
