// SPDX-License-Identifier: Apache-2.0
// The server's side of shed-retries (stormguard/sim/defences/shed_retries.hpp): a recognised
// retry (an attempt label >= 2, or the weak signal) arriving while another defence or the full
// queue refused or dropped a request within the hold is answered retry_shed at the door.
#ifndef STORMGUARD_ENGINE_DEFENCES_SHED_RETRIES_HPP
#define STORMGUARD_ENGINE_DEFENCES_SHED_RETRIES_HPP

#include <cstdint>
#include <optional>

#include "stormguard/admission/reply.hpp"
#include "stormguard/admission/retry_shedder.hpp"
#include "stormguard/sim/defences/shed_retries.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard_engine/attempt.hpp"

namespace stormguard::sim {

struct shed_retries_defence::runtime {
  // Throws std::invalid_argument for bad options (admission::retry_shedder's rule).
  runtime(const options_type& o, const scenario&) : shedder(o) {}

  [[nodiscard]] std::optional<admission::outcome> admit(std::int64_t now,
                                                        const engine::attempt_labels& labels) {
    if (shedder.shed(at(now), labels.recognised_retry())) return admission::outcome::retry_shed;
    return std::nullopt;
  }
  // Another defence (or the full queue) refused or dropped a request now.
  void engaged(std::int64_t now) noexcept { shedder.engaged(at(now)); }

  static time_point at(std::int64_t ns) noexcept { return time_point(duration(ns)); }

  admission::retry_shedder shedder;
};

}  // namespace stormguard::sim

#endif  // STORMGUARD_ENGINE_DEFENCES_SHED_RETRIES_HPP
