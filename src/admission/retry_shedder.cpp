// SPDX-License-Identifier: Apache-2.0
#include "stormguard/admission/retry_shedder.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "stormguard/duration_text.hpp"

namespace stormguard::admission {

namespace {

using namespace std::chrono_literals;

const retry_shedder_options& validated(const retry_shedder_options& o) {
  if (o.hold < 1ms || o.hold > 1h) {
    throw std::invalid_argument(
        "stormguard::admission::retry_shedder: hold must be in [1ms, 1h], got " +
        format_duration(o.hold));
  }
  return o;
}

}  // namespace

retry_shedder::retry_shedder(retry_shedder_options options) : options_(validated(options)) {}

void retry_shedder::engaged(time_point now) noexcept {
  last_ = last_ ? std::max(*last_, now) : now;
}

}  // namespace stormguard::admission
