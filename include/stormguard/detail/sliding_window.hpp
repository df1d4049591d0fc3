// SPDX-License-Identifier: Apache-2.0
// stormguard/detail/sliding_window.hpp: the windowed counters under ratio_budget and
// adaptive_throttle. Not part of the public API.
#ifndef STORMGUARD_DETAIL_SLIDING_WINDOW_HPP
#define STORMGUARD_DETAIL_SLIDING_WINDOW_HPP

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "stormguard/clock.hpp"

namespace stormguard::detail {

// A window of `Slices` slices of `slice` nanoseconds each, kept in a ring of Slices + 1 slots:
// the current, partly elapsed slice plus Slices whole ones. A value added at t therefore counts
// for at least Slices · slice and at most (Slices + 1) · slice. With only Slices slots a value
// added late in a slice would expire up to a slice early (found by budget_test's window bound).
//
// The window keeps the running total of its slots, so add and total are O(1) (amortised: moving
// the window clears each expired slot once). Slot is any type with value-initialisation as
// "empty", += and -= (an integer, or a struct of counters). Not thread-safe: the owner holds its
// lock around every call. Times older than the newest seen (two threads racing with slightly
// different clocks) count in the newest slice.
template <class Slot, int Slices>
class sliding_window {
 public:
  static constexpr int k_ring = Slices + 1;

  // `slice_ns` > 0.
  explicit sliding_window(std::int64_t slice_ns) noexcept : slice_ns_(slice_ns) {}

  // Adds `delta` to the slice that holds `now`.
  void add(time_point now, const Slot& delta) noexcept {
    advance(now) += delta;
    total_ += delta;
  }

  // The sum of every slot in the window at `now` (moves the window first).
  Slot total(time_point now) noexcept {
    (void)advance(now);
    return total_;
  }

 private:
  // The slot of the slice that holds `now`, after clearing the slots the window left behind.
  Slot& advance(time_point now) noexcept {
    const std::int64_t epoch = floor_div(now.time_since_epoch().count(), slice_ns_);
    if (epoch > newest_epoch_) {
      const std::int64_t gap = newest_epoch_ == std::numeric_limits<std::int64_t>::min()
                                   ? k_ring
                                   : std::min<std::int64_t>(epoch - newest_epoch_, k_ring);
      for (std::int64_t e = epoch - gap + 1; e <= epoch; ++e) {
        Slot& expired = slots_[slot_of(e)];
        total_ -= expired;
        expired = Slot{};
      }
      newest_epoch_ = epoch;
    }
    return slots_[slot_of(newest_epoch_)];
  }

  // Floor division, so that instants before the epoch (virtual clocks) map to slices correctly.
  static std::int64_t floor_div(std::int64_t a, std::int64_t b) noexcept {
    std::int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  }
  static std::size_t slot_of(std::int64_t epoch) noexcept {
    return static_cast<std::size_t>((epoch % k_ring + k_ring) % k_ring);
  }

  std::int64_t slice_ns_;
  std::int64_t newest_epoch_ = std::numeric_limits<std::int64_t>::min();
  std::array<Slot, k_ring> slots_{};
  Slot total_{};
};

}  // namespace stormguard::detail

#endif  // STORMGUARD_DETAIL_SLIDING_WINDOW_HPP
