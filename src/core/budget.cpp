// SPDX-License-Identifier: Apache-2.0
#include "stormguard/budget.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>

#include "stormguard/detail/enum_names.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"

namespace stormguard {

namespace {
constexpr std::array<std::string_view, 4> k_attempt_status_names{"success", "failure", "timeout",
                                                                 "not_retryable"};
}  // namespace

std::string_view to_string(attempt_status value) noexcept {
  return detail::enum_name(value, k_attempt_status_names);
}

namespace {

[[noreturn]] void reject(std::string_view type, const std::string& message) {
  throw std::invalid_argument("stormguard::" + std::string(type) + ": " + message);
}

// Adds `delta` to `value` with compare-and-swap, keeping the result in [0, max].
void add_clamped(std::atomic<std::int64_t>& value, std::int64_t delta, std::int64_t max) noexcept {
  std::int64_t current = value.load(std::memory_order_relaxed);
  std::int64_t next = 0;
  do {
    next = std::clamp<std::int64_t>(current + delta, 0, max);
  } while (next != current &&
           !value.compare_exchange_weak(current, next, std::memory_order_relaxed));
}

// A value with at most three decimal places, in milli-units; rejects more decimals (gRFC A6).
std::int64_t to_milli(std::string_view field, double value) {
  const double scaled = value * 1000.0;
  const double rounded = std::round(scaled);
  // Doubles such as 0.1 are not exact; accept what is within a billionth of a milli-unit.
  if (std::abs(scaled - rounded) > 1e-6 * std::max(1.0, std::abs(scaled))) {
    reject("token_bucket_throttle", std::string(field) +
                                        " must have at most 3 decimal places (gRFC A6), got " +
                                        detail::format_double(value));
  }
  return static_cast<std::int64_t>(rounded);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// ratio_budget
// ---------------------------------------------------------------------------------------------

namespace {

const ratio_budget_options& validated(const ratio_budget_options& o) {
  if (std::isnan(o.ratio) || o.ratio < 0.0 || o.ratio > 1000.0) {
    reject("ratio_budget", "ratio must be in [0, 1000], got " + detail::format_double(o.ratio));
  }
  if (o.window < std::chrono::seconds(1) || o.window > std::chrono::seconds(60)) {
    reject("ratio_budget", "window must be in [1s, 60s], got " + format_duration(o.window));
  }
  if (o.min_retries_per_second < 0 || o.min_retries_per_second > 1'000'000) {
    reject("ratio_budget", "min_retries_per_second must be in [0, 1000000], got " +
                               std::to_string(o.min_retries_per_second));
  }
  if (o.ratio > 0.0 && std::llround(o.ratio * static_cast<double>(ratio_budget::k_scale)) == 0) {
    // Not a silent clamp to 0: a ratio this small cannot be represented at all.
    reject("ratio_budget", "ratio must be 0 or at least 0.0000005 (it is resolved to 1e-6), got " +
                               detail::format_double(o.ratio));
  }
  return o;
}

}  // namespace

ratio_budget::ratio_budget(ratio_budget_options options)
    : options_(validated(options)),
      deposit_amount_(std::llround(options_.ratio * static_cast<double>(k_scale))),
      // reserve = floor/s · window(s) · scale = floor · window(ns) / 1000; exact for whole
      // microseconds.
      reserve_(options_.min_retries_per_second * (options_.window.count() / 1000)),
      // Rounded up, so that k_slices whole slices span at least window (a retry counts for >=
      // window).
      window_((options_.window.count() + k_slices - 1) / k_slices) {}

void ratio_budget::deposit(time_point now) noexcept {
  const detail::lock hold(mutex_);
  window_.add(now, deposit_amount_);
}

void ratio_budget::deposit(time_point now, std::int64_t count) noexcept {
  if (count <= 0) return;
  count = std::min<std::int64_t>(count, 1'000'000'000);
  const detail::lock hold(mutex_);
  window_.add(now, deposit_amount_ * count);
}

bool ratio_budget::try_withdraw(time_point now) noexcept {
  const detail::lock hold(mutex_);
  return withdraw_locked(now);
}

bool ratio_budget::deposit_and_try_withdraw(time_point deposit_at, std::int64_t count,
                                            time_point now) noexcept {
  count = std::min<std::int64_t>(count, 1'000'000'000);
  const detail::lock hold(mutex_);
  if (count > 0) window_.add(deposit_at, deposit_amount_ * count);
  return withdraw_locked(now);
}

bool ratio_budget::withdraw_locked(time_point now) noexcept {
  if (window_.total(now) + reserve_ < k_scale) return false;
  window_.add(now, -k_scale);
  return true;
}

std::int64_t ratio_budget::balance(time_point now) const noexcept {
  const detail::lock hold(mutex_);
  const std::int64_t total = window_.total(now) + reserve_;
  return total < k_scale ? 0 : total / k_scale;
}

// ---------------------------------------------------------------------------------------------
// token_bucket_throttle
// ---------------------------------------------------------------------------------------------

namespace {

const token_bucket_throttle_options& validated(const token_bucket_throttle_options& o) {
  if (std::isnan(o.max_tokens) || o.max_tokens <= 0.0 || o.max_tokens > 1000.0) {
    reject("token_bucket_throttle",
           "max_tokens must be in (0, 1000], got " + detail::format_double(o.max_tokens));
  }
  if (std::isnan(o.token_ratio) || o.token_ratio <= 0.0 || o.token_ratio > 1000.0) {
    reject("token_bucket_throttle",
           "token_ratio must be in (0, 1000], got " + detail::format_double(o.token_ratio));
  }
  (void)to_milli("max_tokens", o.max_tokens);
  (void)to_milli("token_ratio", o.token_ratio);
  return o;
}

}  // namespace

token_bucket_throttle::token_bucket_throttle(token_bucket_throttle_options options)
    : options_(validated(options)),
      max_milli_(to_milli("max_tokens", options_.max_tokens)),
      ratio_milli_(to_milli("token_ratio", options_.token_ratio)),
      milli_tokens_(max_milli_) {}

void token_bucket_throttle::record(time_point, const attempt_report& report) noexcept {
  switch (report.status) {
    case attempt_status::success:
      add_clamped(milli_tokens_, ratio_milli_, max_milli_);
      break;
    case attempt_status::failure:
    case attempt_status::timeout:
      add_clamped(milli_tokens_, -1000, max_milli_);
      break;
    case attempt_status::not_retryable:
      break;
  }
}

bool token_bucket_throttle::retry_allowed() const noexcept {
  // tokens > max / 2, exactly, in integers.
  return 2 * milli_tokens_.load(std::memory_order_relaxed) > max_milli_;
}

std::int64_t token_bucket_throttle::milli_tokens() const noexcept {
  return milli_tokens_.load(std::memory_order_relaxed);
}

double token_bucket_throttle::tokens() const noexcept {
  return static_cast<double>(milli_tokens()) / 1000.0;
}

// ---------------------------------------------------------------------------------------------
// retry_quota
// ---------------------------------------------------------------------------------------------

namespace {

const retry_quota_options& validated(const retry_quota_options& o) {
  if (o.max_tokens < 1 || o.max_tokens > 1'000'000'000) {
    reject("retry_quota",
           "max_tokens must be in [1, 1000000000], got " + std::to_string(o.max_tokens));
  }
  const auto check = [&](std::string_view field, std::int64_t v) {
    if (v < 0 || v > o.max_tokens) {
      reject("retry_quota", std::string(field) + " must be in [0, max_tokens = " +
                                std::to_string(o.max_tokens) + "], got " + std::to_string(v));
    }
  };
  check("retry_cost", o.retry_cost);
  check("timeout_cost", o.timeout_cost);
  check("no_retry_increment", o.no_retry_increment);
  return o;
}

}  // namespace

retry_quota::retry_quota(retry_quota_options options)
    : options_(validated(options)), tokens_(options_.max_tokens) {}

bool retry_quota::try_acquire(std::int64_t cost) noexcept {
  std::int64_t current = tokens_.load(std::memory_order_relaxed);
  do {
    if (current < cost) return false;
  } while (!tokens_.compare_exchange_weak(current, current - cost, std::memory_order_relaxed));
  return true;
}

void retry_quota::record(time_point, const attempt_report& report) noexcept {
  if (report.status != attempt_status::success) return;
  const std::int64_t refund =
      report.attempt <= 1 ? options_.no_retry_increment : cost_of(report.previous_status);
  add_clamped(tokens_, refund, options_.max_tokens);
}

std::int64_t retry_quota::available() const noexcept {
  return tokens_.load(std::memory_order_relaxed);
}

// ---------------------------------------------------------------------------------------------
// adaptive_throttle
// ---------------------------------------------------------------------------------------------

namespace {

const adaptive_throttle_options& validated(const adaptive_throttle_options& o) {
  if (o.window < std::chrono::seconds(1) || o.window > std::chrono::hours(1)) {
    reject("adaptive_throttle", "window must be in [1s, 1h], got " + format_duration(o.window));
  }
  if (std::isnan(o.k) || o.k < 1.0 || o.k > 1000.0) {
    reject("adaptive_throttle", "k must be in [1, 1000], got " + detail::format_double(o.k));
  }
  if (std::isnan(o.requests_padding) || o.requests_padding < 1.0 ||
      o.requests_padding > 1'000'000.0) {
    reject("adaptive_throttle", "requests_padding must be in [1, 1000000], got " +
                                    detail::format_double(o.requests_padding));
  }
  return o;
}

}  // namespace

adaptive_throttle::adaptive_throttle(adaptive_throttle_options options)
    : options_(validated(options)), window_((options_.window.count() + k_slices - 1) / k_slices) {}

double adaptive_throttle::probability(std::int64_t requests, std::int64_t accepts, double k,
                                      double padding) noexcept {
  const double p = (static_cast<double>(requests) - k * static_cast<double>(accepts)) /
                   (static_cast<double>(requests) + padding);
  return std::max(0.0, p);
}

double adaptive_throttle::count_request(time_point now) noexcept {
  const detail::lock hold(mutex_);
  const counts before = window_.total(now);
  window_.add(now, counts{1, 0});
  return probability(before.requests, before.accepts, options_.k, options_.requests_padding);
}

void adaptive_throttle::record(time_point now, const attempt_report& report) noexcept {
  if (report.status != attempt_status::success && report.status != attempt_status::not_retryable) {
    return;
  }
  const detail::lock hold(mutex_);
  window_.add(now, counts{0, 1});
}

double adaptive_throttle::rejection_probability(time_point now) const noexcept {
  const detail::lock hold(mutex_);
  const counts c = window_.total(now);
  return probability(c.requests, c.accepts, options_.k, options_.requests_padding);
}

std::int64_t adaptive_throttle::requests(time_point now) const noexcept {
  const detail::lock hold(mutex_);
  return window_.total(now).requests;
}

std::int64_t adaptive_throttle::accepts(time_point now) const noexcept {
  const detail::lock hold(mutex_);
  return window_.total(now).accepts;
}

// ---------------------------------------------------------------------------------------------
// concurrency_budget
// ---------------------------------------------------------------------------------------------

namespace {

const concurrency_budget_options& validated(const concurrency_budget_options& o) {
  if (std::isnan(o.budget_percent) || o.budget_percent < 0.0 || o.budget_percent > 100.0) {
    reject("concurrency_budget",
           "budget_percent must be in [0, 100], got " + detail::format_double(o.budget_percent));
  }
  if (o.min_retry_concurrency < 0 || o.min_retry_concurrency > 1'000'000) {
    reject("concurrency_budget", "min_retry_concurrency must be in [0, 1000000], got " +
                                     std::to_string(o.min_retry_concurrency));
  }
  return o;
}

}  // namespace

concurrency_budget::concurrency_budget(concurrency_budget_options options)
    : options_(validated(options)) {}

std::int64_t concurrency_budget::limit_for(std::int64_t active) const noexcept {
  // As Envoy: the share truncated to an integer, never below the floor.
  const double share =
      options_.budget_percent / 100.0 * static_cast<double>(std::max<std::int64_t>(active, 0));
  return std::max(options_.min_retry_concurrency, static_cast<std::int64_t>(share));
}

bool concurrency_budget::try_acquire() noexcept {
  const std::int64_t limit = limit_for(active_.load(std::memory_order_relaxed));
  std::int64_t current = retries_.load(std::memory_order_relaxed);
  do {
    if (current >= limit) return false;
  } while (!retries_.compare_exchange_weak(current, current + 1, std::memory_order_relaxed));
  return true;
}

}  // namespace stormguard
