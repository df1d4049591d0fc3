// SPDX-License-Identifier: Apache-2.0
// Internal: saturating arithmetic on durations and time points. stormguard's delay arithmetic
// never overflows: a sum past duration::max() is duration::max() (and likewise for min()).
#ifndef STORMGUARD_DETAIL_SATURATE_HPP
#define STORMGUARD_DETAIL_SATURATE_HPP

#include <limits>

#include "stormguard/clock.hpp"

namespace stormguard::detail {

/// a + b, clamped to [duration::min(), duration::max()] instead of overflowing.
[[nodiscard]] constexpr duration saturating_add(duration a, duration b) noexcept {
  using rep = duration::rep;
  rep sum{};
  if (__builtin_add_overflow(a.count(), b.count(), &sum)) {
    return b.count() > 0 ? duration::max() : duration::min();
  }
  return duration(sum);
}

/// a - b, clamped to [duration::min(), duration::max()] instead of overflowing.
[[nodiscard]] constexpr duration saturating_sub(duration a, duration b) noexcept {
  using rep = duration::rep;
  rep diff{};
  if (__builtin_sub_overflow(a.count(), b.count(), &diff)) {
    return b.count() < 0 ? duration::max() : duration::min();
  }
  return duration(diff);
}

/// t + d, clamped to the representable time points instead of overflowing.
[[nodiscard]] constexpr time_point saturating_add(time_point t, duration d) noexcept {
  return time_point(saturating_add(t.time_since_epoch(), d));
}

}  // namespace stormguard::detail

#endif  // STORMGUARD_DETAIL_SATURATE_HPP
