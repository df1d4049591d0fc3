// SPDX-License-Identifier: Apache-2.0
#include "stormguard/retry_breaker.hpp"

#include <stdexcept>
#include <string>

#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"

namespace stormguard {

namespace {

const retry_breaker_options& validated(const retry_breaker_options& o) {
  if (!(o.threshold > 0.0 && o.threshold <= 1.0)) {
    throw std::invalid_argument("stormguard::retry_breaker: threshold must be in (0, 1], got " +
                                detail::format_double(o.threshold));
  }
  if (o.window < std::chrono::seconds(1) || o.window > std::chrono::seconds(60)) {
    throw std::invalid_argument("stormguard::retry_breaker: window must be in [1s, 60s], got " +
                                format_duration(o.window));
  }
  return o;
}

}  // namespace

retry_breaker::retry_breaker(retry_breaker_options options)
    : options_(validated(options)), window_((options_.window.count() + 9) / 10) {}

void retry_breaker::record(time_point now, const attempt_report& report) noexcept {
  const bool failed =
      report.status == attempt_status::failure || report.status == attempt_status::timeout;
  const detail::lock hold(mutex_);
  window_.add(now, counts{1, failed ? 1 : 0});
}

bool retry_breaker::closed(time_point now) noexcept {
  const detail::lock hold(mutex_);
  const counts c = window_.total(now);
  // failures / attempts < threshold, without dividing (no attempts: rate 0).
  return static_cast<double>(c.failures) < options_.threshold * static_cast<double>(c.attempts) ||
         c.attempts == 0;
}

double retry_breaker::failure_rate(time_point now) const noexcept {
  const detail::lock hold(mutex_);
  const counts c = window_.total(now);
  return c.attempts == 0 ? 0.0 : static_cast<double>(c.failures) / static_cast<double>(c.attempts);
}

}  // namespace stormguard
