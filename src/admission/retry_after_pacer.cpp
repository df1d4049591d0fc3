// SPDX-License-Identifier: Apache-2.0
#include "stormguard/admission/retry_after_pacer.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"

namespace stormguard::admission {

namespace {

using namespace std::chrono_literals;

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("stormguard::admission::retry_after_pacer: " + what);
}

const retry_after_pacer_options& validated(const retry_after_pacer_options& o) {
  if (o.min < 1s || o.min > 1h) bad("min must be in [1s, 1h], got " + format_duration(o.min));
  if (o.max < 1s || o.max > 1h) bad("max must be in [1s, 1h], got " + format_duration(o.max));
  if (o.min > o.max) {
    bad("min (" + format_duration(o.min) + ") must be at most max (" + format_duration(o.max) +
        (o.max == retry_after_pacer_options{}.max ? ", the default" : "") + ")");
  }
  if (!(o.factor >= 0.1 && o.factor <= 100.0)) {
    bad("factor must be in [0.1, 100], got " + detail::format_double(o.factor));
  }
  if (!(o.spread >= 0.0 && o.spread <= 1.0)) {
    bad("spread must be in [0, 1], got " + detail::format_double(o.spread));
  }
  if (o.calm <= duration::zero() || o.calm > 1h) {
    bad("calm must be in (0, 1h], got " + format_duration(o.calm));
  }
  return o;
}

}  // namespace

retry_after_pacer::retry_after_pacer(retry_after_pacer_options options)
    : options_(validated(options)) {}

std::optional<time_point> retry_after_pacer::overload_began(time_point now) const noexcept {
  if (!began_ || now - last_ >= options_.calm) return std::nullopt;
  return began_;
}

duration retry_after_pacer::refusal(time_point now, random_generator& rng) noexcept {
  now = std::max(now, last_);
  if (!overload_began(now)) began_ = now;
  last_ = now;
  const double age_s = std::chrono::duration<double>(now - *began_).count();
  const double min_s = std::chrono::duration<double>(options_.min).count();
  const double max_s = std::chrono::duration<double>(options_.max).count();
  const double base = std::clamp(options_.factor * age_s, min_s, max_s);
  // Whole seconds, rounded up (never sooner than the draw), within [min, max] rounded inward.
  const double drawn = std::ceil(base * (1.0 + options_.spread * uniform_unit(rng)));
  const double lowest = std::ceil(min_s);
  const double highest = std::max(lowest, std::floor(max_s));
  return std::chrono::seconds(static_cast<std::int64_t>(std::clamp(drawn, lowest, highest)));
}

}  // namespace stormguard::admission
