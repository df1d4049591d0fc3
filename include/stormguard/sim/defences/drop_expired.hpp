// SPDX-License-Identifier: Apache-2.0
/// \file
/// The server defence "drop-expired" (one kind of stormguard/sim/defence_kinds.hpp): never start
/// a request whose caller's deadline (grpc-timeout) has passed, or will pass before the server's
/// estimate of its service time (stormguard::admission::expired). Finagle's DeadlineFilter drops
/// what has expired; gRPC servers check the deadline before running a handler.
#ifndef STORMGUARD_SIM_DEFENCES_DROP_EXPIRED_HPP
#define STORMGUARD_SIM_DEFENCES_DROP_EXPIRED_HPP

#include <chrono>
#include <optional>
#include <string_view>

#include "stormguard/clock.hpp"

namespace stormguard::sim {

/// drop-expired: see the file comment. Scenario key "drop-expired".
struct drop_expired_defence {
  /// The name in scenario files, `--defence` and reports.
  static constexpr std::string_view name = "drop-expired";
  /// The lab server's counter (/stats key) of the requests it took out.
  static constexpr std::string_view stats_key = "dropped_expired";
  /// The `reason` label of stormguard_serve_defence_decisions_total.
  static constexpr std::string_view reason = "deadline_passed";

  /// Its parameters.
  struct options_type {
    /// The server's estimate of one attempt's service time (file key service_estimate, in
    /// [0, 1 h]): an attempt is not started when its caller's deadline is nearer than this.
    /// nullopt (absent): the server's normal service time (server.service_time); "0s": only
    /// attempts whose deadline has passed are dropped.
    std::optional<duration> service_estimate;
    friend bool operator==(const options_type&, const options_type&) = default;
  };

  /// The settings of options_type with their ranges (the pattern of
  /// stormguard::ratio_budget_options::fields).
  template <class Self, class F>
  static void fields(Self& o, F&& f) {
    f("service_estimate", o.service_estimate, duration::zero(), duration(std::chrono::hours(1)));
  }

  /// What the simulator's and the lab's server run (stormguard_engine/defences/, internal).
  struct runtime;
};

}  // namespace stormguard::sim

#endif  // STORMGUARD_SIM_DEFENCES_DROP_EXPIRED_HPP
