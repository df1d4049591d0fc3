// SPDX-License-Identifier: Apache-2.0
/// \file
/// The server defence "shed-retries" (one kind of stormguard/sim/defence_kinds.hpp): while the
/// server is overloaded, meaning another defence or the full queue refused or dropped a request
/// within `hold` (stormguard::admission::retry_shedder), a request recognised as a retry is
/// refused at the door (retry_shed: 503, with the retry-after defence's Retry-After when that
/// one runs too), so that first attempts get the room. A retry is recognised by a strong signal
/// (an attempt label of any ecosystem, a repeated Idempotency-Key) or by the weak one alone (its
/// fingerprint seen again after the server's answer to it failed); docs/admission.md, "Retry
/// signals". It never refuses while the server is calm, and it refuses no first attempt.
#ifndef STORMGUARD_SIM_DEFENCES_SHED_RETRIES_HPP
#define STORMGUARD_SIM_DEFENCES_SHED_RETRIES_HPP

#include <chrono>
#include <string_view>

#include "stormguard/admission/retry_shedder.hpp"
#include "stormguard/clock.hpp"

namespace stormguard::sim {

/// shed-retries: see the file comment. Scenario key "shed-retries".
struct shed_retries_defence {
  /// The name in scenario files, `--defence` and reports.
  static constexpr std::string_view name = "shed-retries";
  /// The lab server's counter (/stats key) of the retries it shed.
  static constexpr std::string_view stats_key = "shed_retries";
  /// The `reason` label of stormguard_serve_defence_decisions_total.
  static constexpr std::string_view reason = "retry_shed";

  /// Not in `all`: opt-in, by name. Against clients that retry on their own schedule
  /// (go-retryablehttp, curl) a shed retry is an attempt answered sooner, so it comes back sooner;
  /// docs/admission.md, "Shedding recognised retries", has the figures.
  static constexpr bool in_all = false;

  /// Its parameters: the shedder's (admission::retry_shedder_options).
  using options_type = admission::retry_shedder_options;

  /// The settings of options_type kept in scenario files, with their ranges.
  template <class Self, class F>
  static void fields(Self& o, F&& f) {
    using namespace std::chrono_literals;
    f("hold", o.hold, duration(1ms), duration(1h));
  }

  /// What the simulator's and the lab's server run (stormguard_engine/defences/, internal).
  struct runtime;
};

}  // namespace stormguard::sim

#endif  // STORMGUARD_SIM_DEFENCES_SHED_RETRIES_HPP
