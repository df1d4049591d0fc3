// SPDX-License-Identifier: Apache-2.0
// TEST ONLY (tests/recipes/): the server's side of attempt-cap
// (stormguard/sim/defences/attempt_cap.hpp): an attempt numbered above max_attempt is refused
// at the door, as the server-side retry budget refuses a retry.
#ifndef STORMGUARD_ENGINE_DEFENCES_ATTEMPT_CAP_HPP
#define STORMGUARD_ENGINE_DEFENCES_ATTEMPT_CAP_HPP

#include <cstdint>
#include <optional>

#include "stormguard/admission/reply.hpp"
#include "stormguard/sim/defences/attempt_cap.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard_engine/attempt.hpp"

namespace stormguard::sim {

struct attempt_cap_defence::runtime {
  runtime(const options_type& o, const scenario&) : max_attempt(o.max_attempt) {}

  [[nodiscard]] std::optional<admission::outcome> admit(
      std::int64_t, const engine::attempt_labels& labels) const {
    if (labels.attempt.attempt > max_attempt) return admission::outcome::retry_refused;
    return std::nullopt;
  }

  std::int64_t max_attempt;
};

}  // namespace stormguard::sim

#endif  // STORMGUARD_ENGINE_DEFENCES_ATTEMPT_CAP_HPP
