// SPDX-License-Identifier: Apache-2.0
// The server's side of drop-expired (stormguard/sim/defences/drop_expired.hpp): an attempt whose
// caller's deadline has passed, or is nearer than the server's estimate of its service time
// (admission::expired), is answered at once on arrival and never started from the line.
#ifndef STORMGUARD_ENGINE_DEFENCES_DROP_EXPIRED_HPP
#define STORMGUARD_ENGINE_DEFENCES_DROP_EXPIRED_HPP

#include <cstdint>
#include <optional>

#include "stormguard/admission/deadline.hpp"
#include "stormguard/admission/reply.hpp"
#include "stormguard/sim/defences/drop_expired.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard_engine/attempt.hpp"

namespace stormguard::sim {

struct drop_expired_defence::runtime {
  // The estimate defaults to the scenario's normal service time.
  runtime(const options_type& o, const scenario& s)
      : service_estimate(o.service_estimate.value_or(s.service_time)) {}

  // On arrival: expired already (only when the timeout is below the service estimate).
  [[nodiscard]] std::optional<admission::outcome> admit(
      std::int64_t now, const engine::attempt_labels& labels) const {
    return leave_line(now, labels.deadline);
  }
  // Leaving the line for a worker.
  [[nodiscard]] std::optional<admission::outcome> leave_line(std::int64_t now,
                                                             std::int64_t deadline) const {
    if (admission::expired(time_point(duration(now)), time_point(duration(deadline)),
                           service_estimate)) {
      return admission::outcome::expired;
    }
    return std::nullopt;
  }

  duration service_estimate;
};

}  // namespace stormguard::sim

#endif  // STORMGUARD_ENGINE_DEFENCES_DROP_EXPIRED_HPP
