// SPDX-License-Identifier: Apache-2.0
// The server's side of retry-budget (stormguard/sim/defences/retry_budget.hpp): a labelled retry
// that the server's ratio budget cannot pay for is refused at the door (retry_refused: 503 +
// grpc-retry-pushback-ms: -1).
#ifndef STORMGUARD_ENGINE_DEFENCES_RETRY_BUDGET_HPP
#define STORMGUARD_ENGINE_DEFENCES_RETRY_BUDGET_HPP

#include <cstdint>
#include <optional>

#include "stormguard/admission/reply.hpp"
#include "stormguard/admission/retry_admission.hpp"
#include "stormguard/sim/defences/retry_budget.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard_engine/attempt.hpp"

namespace stormguard::sim {

struct retry_budget_defence::runtime {
  // Throws std::invalid_argument for bad options (ratio_budget's rule).
  runtime(const options_type& o, const scenario&) : budget(o) {}
  // validate()'s rule for the options: ratio_budget's (std::invalid_argument).
  static void check(const options_type& o, const scenario&) { const ratio_budget b(o); }

  [[nodiscard]] std::optional<admission::outcome> admit(std::int64_t now,
                                                        const engine::attempt_labels& labels) {
    if (budget.admit(time_point(duration(now)), labels.attempt)) return std::nullopt;
    return admission::outcome::retry_refused;
  }

  admission::retry_admission budget;
};

}  // namespace stormguard::sim

#endif  // STORMGUARD_ENGINE_DEFENCES_RETRY_BUDGET_HPP
