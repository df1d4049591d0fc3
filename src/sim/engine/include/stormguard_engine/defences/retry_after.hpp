// SPDX-License-Identifier: Apache-2.0
// The server's side of retry-after (stormguard/sim/defences/retry_after.hpp): the Retry-After of
// every refusal, from the pacer (admission::retry_after_pacer).
#ifndef STORMGUARD_ENGINE_DEFENCES_RETRY_AFTER_HPP
#define STORMGUARD_ENGINE_DEFENCES_RETRY_AFTER_HPP

#include <cstdint>

#include "stormguard/admission/retry_after_pacer.hpp"
#include "stormguard/random.hpp"
#include "stormguard/sim/defences/retry_after.hpp"
#include "stormguard/sim/scenario.hpp"

namespace stormguard::sim {

struct retry_after_defence::runtime {
  // Throws std::invalid_argument for bad options (admission::retry_after_pacer's rule).
  runtime(const options_type& o, const scenario&) : pacer(o) {}

  // A refusal now: its Retry-After.
  [[nodiscard]] duration pace(std::int64_t now, random_generator& rng) noexcept {
    return pacer.refusal(time_point(duration(now)), rng);
  }

  admission::retry_after_pacer pacer;
};

}  // namespace stormguard::sim

#endif  // STORMGUARD_ENGINE_DEFENCES_RETRY_AFTER_HPP
