// SPDX-License-Identifier: Apache-2.0
/// \file
/// TEST ONLY (tests/recipes/): the server defence "attempt-cap", added by CONTRIBUTING.md's
/// recipe to show that a defence takes only its own files and one list line. It refuses every
/// attempt whose number (x-envoy-attempt-count) is above `max_attempt`.
#ifndef STORMGUARD_SIM_DEFENCES_ATTEMPT_CAP_HPP
#define STORMGUARD_SIM_DEFENCES_ATTEMPT_CAP_HPP

#include <cstdint>
#include <string_view>

namespace stormguard::sim {

/// attempt-cap: see the file comment. Scenario key "attempt-cap".
struct attempt_cap_defence {
  /// The name in scenario files, `--defence` and reports.
  static constexpr std::string_view name = "attempt-cap";
  /// The lab server's counter (/stats key) of the attempts it refused.
  static constexpr std::string_view stats_key = "refused_attempt_cap";
  /// The `reason` label of stormguard_serve_defence_decisions_total.
  static constexpr std::string_view reason = "attempt_cap";

  /// Its parameters.
  struct options_type {
    /// The highest attempt number served (file key max_attempt, in [1, 100]); default 1.
    std::int64_t max_attempt = 1;
    friend bool operator==(const options_type&, const options_type&) = default;
  };

  /// The settings of options_type with their ranges.
  template <class Self, class F>
  static void fields(Self& o, F&& f) {
    f("max_attempt", o.max_attempt, std::int64_t{1}, std::int64_t{100});
  }

  /// What the simulator's and the lab's server run.
  struct runtime;
};

}  // namespace stormguard::sim

#endif  // STORMGUARD_SIM_DEFENCES_ATTEMPT_CAP_HPP
