// SPDX-License-Identifier: Apache-2.0
/// \file
/// The server defence "retry-budget" (one kind of stormguard/sim/defence_kinds.hpp): the
/// server-side retry budget (stormguard::admission::retry_admission) refuses a labelled retry
/// when its ratio budget is spent: 503 + grpc-retry-pushback-ms: -1 (gRFC A6: do not retry).
#ifndef STORMGUARD_SIM_DEFENCES_RETRY_BUDGET_HPP
#define STORMGUARD_SIM_DEFENCES_RETRY_BUDGET_HPP

#include <cmath>
#include <string_view>

#include "stormguard/budget.hpp"

namespace stormguard::sim {

/// retry-budget: see the file comment. Scenario key "retry-budget".
struct retry_budget_defence {
  /// The name in scenario files, `--defence` and reports.
  static constexpr std::string_view name = "retry-budget";
  /// The lab server's counter (/stats key) of the retries it refused.
  static constexpr std::string_view stats_key = "refused_retry_budget";
  /// The `reason` label of stormguard_serve_defence_decisions_total.
  static constexpr std::string_view reason = "retry_refused";

  /// Its parameters: ratio, window and floor per second of this one server.
  using options_type = ratio_budget_options;

  /// The settings of options_type: those of a client's ratio budget.
  template <class Self, class F>
  static void fields(Self& o, F&& f) {
    ratio_budget_options::fields(o, f);
  }

  /// A server scaled by `factor` (scale_scenario) gets `factor` times the floor, rounded: the
  /// floor is per server instance.
  static void scale(options_type& o, double factor) {
    o.min_retries_per_second = std::llround(static_cast<double>(o.min_retries_per_second) * factor);
  }

  /// What the simulator's and the lab's server run (stormguard_engine/defences/, internal).
  struct runtime;
};

}  // namespace stormguard::sim

#endif  // STORMGUARD_SIM_DEFENCES_RETRY_BUDGET_HPP
