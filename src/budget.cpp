#include "stormguard/budget.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "stormguard/detail/format.hpp"

namespace stormguard {

namespace {

[[noreturn]] void reject(const std::string& message) {
  throw std::invalid_argument("stormguard::ratio_budget: " + message);
}

// Floor division, so that instants before the epoch (virtual clocks) map to slices correctly.
std::int64_t floor_div(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

std::size_t slot_of(std::int64_t epoch) noexcept {
  return static_cast<std::size_t>((epoch % ratio_budget::k_ring + ratio_budget::k_ring) %
                                  ratio_budget::k_ring);
}

}  // namespace

ratio_budget::ratio_budget(ratio_budget_options options) : options_(options) {
  if (std::isnan(options_.ratio) || options_.ratio < 0.0 || options_.ratio > 1000.0) {
    reject("ratio must be in [0, 1000], got " + detail::format_double(options_.ratio));
  }
  if (options_.ttl < std::chrono::seconds(1) || options_.ttl > std::chrono::seconds(60)) {
    reject("ttl must be in [1s, 60s], got " + detail::format_duration(options_.ttl));
  }
  if (options_.min_retries_per_second < 0 || options_.min_retries_per_second > 1'000'000) {
    reject("min_retries_per_second must be in [0, 1000000], got " +
           std::to_string(options_.min_retries_per_second));
  }
  deposit_amount_ = std::llround(options_.ratio * static_cast<double>(k_scale));
  if (options_.ratio > 0.0 && deposit_amount_ == 0) {
    // Not a silent clamp to 0: a ratio this small cannot be represented at all.
    reject("ratio must be 0 or at least 0.0000005 (it is resolved to 1e-6), got " +
           detail::format_double(options_.ratio));
  }
  // reserve = floor/s · ttl(s) · scale = floor · ttl(ns) / 1000; exact for whole microseconds.
  reserve_ = options_.min_retries_per_second * (options_.ttl.count() / 1000);
  // Rounded up, so that k_slices whole slices span at least ttl (a retry counts for >= ttl).
  slice_ns_ = (options_.ttl.count() + k_slices - 1) / k_slices;
}

std::size_t ratio_budget::advance(time_point now) const noexcept {
  const std::int64_t epoch = floor_div(now.time_since_epoch().count(), slice_ns_);
  if (epoch > newest_epoch_) {
    // Clear every slot that the window left behind, at most all of them.
    const std::int64_t gap = newest_epoch_ == std::numeric_limits<std::int64_t>::min()
                                 ? k_ring
                                 : std::min<std::int64_t>(epoch - newest_epoch_, k_ring);
    for (std::int64_t e = epoch - gap + 1; e <= epoch; ++e) {
      slice_value_[slot_of(e)] = 0;
    }
    newest_epoch_ = epoch;
  }
  // Times older than the newest (threads racing) count in the newest slice.
  return slot_of(newest_epoch_);
}

std::int64_t ratio_budget::sum_locked() const noexcept {
  std::int64_t sum = 0;
  for (std::int64_t v : slice_value_) sum += v;
  return sum;
}

void ratio_budget::deposit(time_point now) noexcept {
  std::lock_guard lock(mutex_);
  slice_value_[advance(now)] += deposit_amount_;
}

bool ratio_budget::try_withdraw(time_point now) noexcept {
  std::lock_guard lock(mutex_);
  const std::size_t slot = advance(now);
  if (sum_locked() + reserve_ < k_scale) return false;
  slice_value_[slot] -= k_scale;
  return true;
}

std::int64_t ratio_budget::balance(time_point now) const noexcept {
  std::lock_guard lock(mutex_);
  (void)advance(now);
  const std::int64_t total = sum_locked() + reserve_;
  return total < k_scale ? 0 : total / k_scale;
}

}  // namespace stormguard
