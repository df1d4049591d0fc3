// SPDX-License-Identifier: Apache-2.0
/// \file
/// The server defence "retry-after" (one kind of stormguard/sim/defence_kinds.hpp): every
/// refusal and every drop of the server carries a Retry-After that the server chooses from how
/// long it has been overloaded (stormguard::admission::retry_after_pacer: about twice the
/// overload's age, 1 s to 60 s, spread upward by up to half), instead of none or the concurrency
/// limit's fixed [1 s, 5 s]. It refuses nothing itself: it paces the clients the other defences
/// refuse, and is what a server can do for clients that ignore every other header but obey
/// Retry-After (go-retryablehttp, curl; docs/admission.md, "Client profiles"). A client that
/// honours pushback still stops at a "do not retry" (the pushback wins).
#ifndef STORMGUARD_SIM_DEFENCES_RETRY_AFTER_HPP
#define STORMGUARD_SIM_DEFENCES_RETRY_AFTER_HPP

#include <chrono>
#include <string_view>

#include "stormguard/admission/retry_after_pacer.hpp"
#include "stormguard/clock.hpp"

namespace stormguard::sim {

/// retry-after: see the file comment. Scenario key "retry-after".
struct retry_after_defence {
  /// The name in scenario files, `--defence` and reports.
  static constexpr std::string_view name = "retry-after";
  /// The lab server's counter (/stats key) of the refusals it chose the Retry-After of.
  static constexpr std::string_view stats_key = "paced_retry_after";
  /// The `reason` label of stormguard_serve_defence_decisions_total.
  static constexpr std::string_view reason = "paced";

  /// Its parameters: the pacer's (admission::retry_after_pacer_options).
  using options_type = admission::retry_after_pacer_options;

  /// The settings of options_type kept in scenario files, with their ranges (the pacer checks
  /// the rules between them, and that min and max are whole seconds).
  template <class Self, class F>
  static void fields(Self& o, F&& f) {
    using namespace std::chrono_literals;
    f("min", o.min, duration(1s), duration(1h));
    f("max", o.max, duration(1s), duration(1h));
    f("factor", o.factor, 0.1, 100.0);
    f("spread", o.spread, 0.0, 1.0);
    f("calm", o.calm, duration(1ms), duration(1h));
  }

  /// What the simulator's and the lab's server run (stormguard_engine/defences/, internal).
  struct runtime;
};

}  // namespace stormguard::sim

#endif  // STORMGUARD_SIM_DEFENCES_RETRY_AFTER_HPP
