// SPDX-License-Identifier: Apache-2.0
#include "stormguard/hedging.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "stormguard/detail/enum_names.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/detail/saturate.hpp"
#include "stormguard/duration_text.hpp"

namespace stormguard {

namespace {

constexpr std::array<std::string_view, 5> k_stop_names{"none", "max_attempts", "server_refused",
                                                       "retry_after_too_long", "deadline_exceeded"};

[[noreturn]] void reject(const std::string& message) {
  throw std::invalid_argument("stormguard::hedging_policy: " + message);
}

const hedging_options& validated(const hedging_options& o) {
  if (o.max_attempts < 2 || o.max_attempts > 5) {
    reject("hedging.max_attempts must be in [2, 5] (gRFC A6), got " +
           std::to_string(o.max_attempts));
  }
  if (o.delay < duration::zero() || o.delay > std::chrono::hours(1)) {
    reject("hedging.delay must be in [0s, 1h], got " + format_duration(o.delay));
  }
  if (std::isnan(o.delay_quantile) || o.delay_quantile < 0.0 || o.delay_quantile >= 1.0) {
    reject("hedging.delay_quantile must be 0 (a fixed delay) or in (0, 1), got " +
           detail::format_double(o.delay_quantile));
  }
  if (o.max_retry_after <= duration::zero()) {
    reject("hedging.max_retry_after must be > 0, got " + format_duration(o.max_retry_after));
  }
  return o;
}

}  // namespace

std::string_view to_string(hedge_stop s) noexcept { return detail::enum_name(s, k_stop_names); }

latency_tracker::latency_tracker(double q) : q_(q) {
  if (std::isnan(q) || q <= 0.0 || q >= 1.0) {
    throw std::invalid_argument("stormguard::latency_tracker: q must be in (0, 1), got " +
                                detail::format_double(q));
  }
}

void latency_tracker::record(duration latency) noexcept {
  const detail::lock hold(mutex_);
  ring_[count_ % k_window] = std::max(latency, duration::zero());
  ++count_;
  if (count_ < k_min_samples || count_ % k_recompute != 0) return;
  // Recompute over a copy (the ring keeps its order of arrival); 1,024 durations on the stack.
  std::array<duration, k_window> sorted = ring_;
  const std::size_t n = std::min(count_, k_window);
  const auto rank = static_cast<std::size_t>(std::ceil(q_ * static_cast<double>(n)));
  const std::size_t index = std::clamp<std::size_t>(rank, 1, n) - 1;
  const auto begin = sorted.begin();
  std::nth_element(begin, begin + static_cast<std::ptrdiff_t>(index),
                   begin + static_cast<std::ptrdiff_t>(n));
  cached_ = sorted[index];
}

std::optional<duration> latency_tracker::quantile() const noexcept {
  const detail::lock hold(mutex_);
  return cached_;
}

hedging_policy::hedging_policy(hedging_options options) : options_(validated(options)) {}

duration hedging_policy::delay(const latency_tracker* tracker) const noexcept {
  if (options_.delay_quantile > 0.0 && tracker != nullptr) {
    if (const auto q = tracker->quantile()) return *q;
  }
  return options_.delay;
}

hedge_plan hedging_policy::plan_next(int copies_sent, time_point last_sent, time_point now,
                                     const std::optional<pushback>& pb, time_point deadline,
                                     duration delay, bool non_fatal) const noexcept {
  if (copies_sent >= options_.max_attempts) return {false, {}, hedge_stop::max_attempts};
  time_point at = non_fatal ? now : detail::saturating_add(last_sent, std::max(delay, duration{}));
  if (pb) {
    if (pb->do_not_retry) return {false, {}, hedge_stop::server_refused};
    if (pb->delay > options_.max_retry_after) return {false, {}, hedge_stop::retry_after_too_long};
    at = std::max(at, detail::saturating_add(now, pb->delay));
  }
  if (at >= deadline) return {false, {}, hedge_stop::deadline_exceeded};
  return {true, at, hedge_stop::none};
}

}  // namespace stormguard
