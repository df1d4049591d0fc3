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

bool whole_seconds(duration d) { return d % std::chrono::seconds(1) == duration::zero(); }

const retry_after_pacer_options& validated(const retry_after_pacer_options& o) {
  if (o.min < 1s || o.min > 1h || !whole_seconds(o.min)) {
    bad("min must be whole seconds in [1s, 1h], got " + format_duration(o.min));
  }
  if (o.max < o.min || o.max > 1h || !whole_seconds(o.max)) {
    bad("max must be whole seconds in [min (" + format_duration(o.min) + "), 1h], got " +
        format_duration(o.max));
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
  const double drawn = std::ceil(base * (1.0 + options_.spread * uniform_unit(rng)));
  return std::chrono::seconds(static_cast<std::int64_t>(std::min(drawn, max_s)));
}

}  // namespace stormguard::admission
