// SPDX-License-Identifier: Apache-2.0
#include "stormguard/admission/concurrency_limit.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"

namespace stormguard::admission {

namespace {

[[noreturn]] void reject(const std::string& message) {
  throw std::invalid_argument("stormguard::admission::concurrency_limit: " + message);
}

void check_duration(const char* field, duration value, duration lo, duration hi) {
  if (value < lo || value > hi) {
    reject(std::string(field) + " must be in [" + format_duration(lo) + ", " + format_duration(hi) +
           "], got " + format_duration(value));
  }
}

void check_count(const char* field, std::int64_t value, std::int64_t lo, std::int64_t hi) {
  if (value < lo || value > hi) {
    reject(std::string(field) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
           "], got " + std::to_string(value));
  }
}

void check_fraction(const char* field, double value, double lo, double hi, bool open_low) {
  if (std::isnan(value) || value > hi || (open_low ? value <= lo : value < lo)) {
    reject(std::string(field) + " must be in " + (open_low ? "(" : "[") +
           detail::format_double(lo) + ", " + detail::format_double(hi) + "], got " +
           detail::format_double(value));
  }
}

const concurrency_limit_options& validated(const concurrency_limit_options& o) {
  using namespace std::chrono_literals;
  check_duration("update_interval", o.update_interval, 1ms, 60s);
  check_duration("min_rtt_interval", o.min_rtt_interval, 1s, 1h);
  check_fraction("jitter", o.jitter, 0.0, 1.0, false);
  check_count("request_count", o.request_count, 1, 100'000);
  check_count("max_limit", o.max_limit, 1, 1'000'000);
  check_count("min_concurrency", o.min_concurrency, 1, o.max_limit);
  check_fraction("buffer", o.buffer, 0.0, 10.0, false);
  check_fraction("sample_percentile", o.sample_percentile, 0.0, 1.0, true);
  if (o.initial_limit != 0)
    check_count("initial_limit", o.initial_limit, o.min_concurrency, o.max_limit);
  check_duration("retry_after_min", o.retry_after_min, 1s, 1h);
  check_duration("retry_after_max", o.retry_after_max, o.retry_after_min, 1h);
  return o;
}

}  // namespace

concurrency_limit::concurrency_limit(concurrency_limit_options options, time_point start)
    : options_(validated(options)) {
  const detail::lock hold(mutex_);
  samples_.resize(k_max_samples);
  window_epoch_ = start;
  measuring_ = true;
  next_update_ = start + options_.update_interval;
  if (options_.initial_limit == 0) {
    limit_ = options_.min_concurrency;  // Envoy: the first minRTT window at min_concurrency
    deferred_limit_ = options_.min_concurrency;
  } else {
    limit_ = options_.initial_limit;  // the first minRTT measured at the initial limit
    deferred_limit_ = options_.initial_limit;
  }
}

void concurrency_limit::add_sample(duration latency) noexcept {
  samples_[sample_count_ % k_max_samples] = latency;
  ++sample_count_;
}

duration concurrency_limit::percentile_and_clear() noexcept {
  const std::size_t n = std::min(sample_count_, k_max_samples);
  sample_count_ = 0;
  if (n == 0) return duration::zero();
  const auto rank =
      static_cast<std::size_t>(std::ceil(options_.sample_percentile * static_cast<double>(n)));
  const std::size_t index = std::clamp<std::size_t>(rank, 1, n) - 1;
  const auto begin = samples_.begin();
  std::nth_element(begin, begin + static_cast<std::ptrdiff_t>(index),
                   begin + static_cast<std::ptrdiff_t>(n));
  return samples_[index];
}

void concurrency_limit::update(time_point now) noexcept {
  if (measuring_) return;  // a minRTT window ends with its request_count-th sample
  if (now >= next_min_rtt_) {
    // Enter a minRTT window: the limit drops to min_concurrency until it has its samples.
    deferred_limit_ = limit_;
    limit_ = options_.min_concurrency;
    sample_count_ = 0;
    window_epoch_ = now;
    measuring_ = true;
    return;
  }
  if (now < next_update_) return;
  next_update_ = now + options_.update_interval;
  if (sample_count_ == 0) return;
  const duration sample_rtt = std::max(percentile_and_clear(), duration(1));
  const double buffered = static_cast<double>(min_rtt_.count()) * (1.0 + options_.buffer);
  const double gradient = std::clamp(buffered / static_cast<double>(sample_rtt.count()), 0.5, 2.0);
  const double scaled = static_cast<double>(limit_) * gradient;
  const auto next = static_cast<std::int64_t>(scaled + std::sqrt(scaled));
  const std::int64_t old = limit_;
  limit_ = std::clamp(next, options_.min_concurrency, options_.max_limit);
  // Five windows in a row at the minimum suggest a wrong minRTT: measure it again now (Envoy).
  consecutive_min_ = (old == options_.min_concurrency && limit_ == options_.min_concurrency)
                         ? consecutive_min_ + 1
                         : 0;
  if (consecutive_min_ >= 5) {
    consecutive_min_ = 0;
    next_min_rtt_ = now;
  }
}

bool concurrency_limit::try_acquire(time_point now) noexcept {
  const detail::lock hold(mutex_);
  update(now);
  if (outstanding_ < limit_) {
    ++outstanding_;
    return true;
  }
  ++refused_;
  return false;
}

void concurrency_limit::release_impl(time_point now, time_point started,
                                     double jitter_draw) noexcept {
  const detail::lock hold(mutex_);
  if (outstanding_ > 0) --outstanding_;
  // A request started before the current minRTT window does not speak for its ideal latency.
  if (started >= window_epoch_) add_sample(now - started);
  if (measuring_ && static_cast<std::int64_t>(sample_count_) >= options_.request_count) {
    min_rtt_ = std::max(percentile_and_clear(), duration(1));
    measuring_ = false;
    limit_ = deferred_limit_;
    const auto jitter = std::chrono::duration_cast<duration>(options_.min_rtt_interval *
                                                             (options_.jitter * jitter_draw));
    next_min_rtt_ = now + options_.min_rtt_interval + jitter;
    next_update_ = now + options_.update_interval;
  }
  update(now);
}

void concurrency_limit::cancel() noexcept {
  const detail::lock hold(mutex_);
  if (outstanding_ > 0) --outstanding_;
}

std::int64_t concurrency_limit::limit() const noexcept {
  const detail::lock hold(mutex_);
  return limit_;
}

std::int64_t concurrency_limit::outstanding() const noexcept {
  const detail::lock hold(mutex_);
  return outstanding_;
}

duration concurrency_limit::min_rtt() const noexcept {
  const detail::lock hold(mutex_);
  return min_rtt_;
}

bool concurrency_limit::measuring_min_rtt() const noexcept {
  const detail::lock hold(mutex_);
  return measuring_;
}

std::int64_t concurrency_limit::refused() const noexcept {
  const detail::lock hold(mutex_);
  return refused_;
}

}  // namespace stormguard::admission
