// SPDX-License-Identifier: Apache-2.0
/// \file
/// The server defence "lifo-codel" (one kind of stormguard/sim/defence_kinds.hpp): the waiting
/// line becomes folly's adaptive LIFO with CoDel (stormguard::admission::adaptive_lifo_queue):
/// FIFO while healthy, LIFO and dropping what waited more than 2 · target while overloaded.
#ifndef STORMGUARD_SIM_DEFENCES_LIFO_CODEL_HPP
#define STORMGUARD_SIM_DEFENCES_LIFO_CODEL_HPP

#include <chrono>
#include <string_view>

#include "stormguard/admission/codel.hpp"
#include "stormguard/clock.hpp"

namespace stormguard::sim {

/// lifo-codel: see the file comment. Scenario key "lifo-codel".
struct lifo_codel_defence {
  /// The name in scenario files, `--defence` and reports.
  static constexpr std::string_view name = "lifo-codel";
  /// The lab server's counter (/stats key) of the requests CoDel dropped from the line.
  static constexpr std::string_view stats_key = "dropped_codel";
  /// The `reason` label of stormguard_serve_defence_decisions_total.
  static constexpr std::string_view reason = "waited_too_long";

  /// Its parameters: target and interval (folly's 5 ms and 100 ms).
  using options_type = admission::codel_options;

  /// The settings of options_type with their ranges (admission::codel checks target <= interval).
  template <class Self, class F>
  static void fields(Self& o, F&& f) {
    using namespace std::chrono_literals;
    f("target", o.target, duration(1us), duration(10s));
    f("interval", o.interval, duration(1ms), duration(60s));
  }

  /// What the simulator's and the lab's server run (stormguard_engine/defences/, internal).
  struct runtime;
};

}  // namespace stormguard::sim

#endif  // STORMGUARD_SIM_DEFENCES_LIFO_CODEL_HPP
