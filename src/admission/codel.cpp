// SPDX-License-Identifier: Apache-2.0
#include "stormguard/admission/codel.hpp"

#include <stdexcept>
#include <string>

#include "stormguard/duration_text.hpp"

namespace stormguard::admission {

namespace {

const codel_options& validated(const codel_options& o) {
  using namespace std::chrono_literals;
  if (o.target < 1us || o.target > 10s) {
    throw std::invalid_argument("stormguard::admission::codel: target must be in [1us, 10s], got " +
                                format_duration(o.target));
  }
  if (o.interval < 1ms || o.interval > 60s || o.interval < o.target) {
    throw std::invalid_argument(
        "stormguard::admission::codel: interval must be in [1ms, 60s] and >= target, got " +
        format_duration(o.interval));
  }
  return o;
}

}  // namespace

codel::codel(codel_options options) : options_(validated(options)) {}

void codel::advance(time_point now) noexcept {
  // At the end of each interval, judge it by its smallest delay, then start a new minimum with
  // the next request (folly::Codel::overloaded).
  if (now > interval_end_) {
    interval_end_ = now + options_.interval;
    overloaded_ = min_delay_ != duration::max() && min_delay_ > options_.target;
    reset_ = true;
  }
}

bool codel::should_drop(time_point now, duration delay) noexcept {
  advance(now);
  if (reset_) {
    reset_ = false;
    min_delay_ = delay;
    return false;  // more than one request must arrive in an interval before any drop
  }
  if (delay < min_delay_) min_delay_ = delay;
  return overloaded_ && delay > slough_timeout();
}

}  // namespace stormguard::admission
