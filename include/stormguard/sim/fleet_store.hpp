// SPDX-License-Identifier: Apache-2.0
/// \file
/// The simulator's model of the store a fleet budget shares (the
/// Redis of stormguard::fleet), for strategies whose budget is of kind "fleet"
/// (stormguard::fleet_budget_options).
///
/// Each simulated client owns one stormguard::fleet_budget (the library's class) and runs its sync
/// step on virtual time, as stormguard::fleet::redis_sync runs it on a real clock: when the budget
/// says a sync is due, its deltas go to the store and the fleet's window totals come back one
/// round trip later. The store keeps the window in slots of its own time (the reference model,
/// stormguard::fleet_window_store, with integer client ids) and counts the clients that have
/// synced (simulated clients never die). A sync started inside the outage window fails after
/// `timeout` and the budget falls back to its local counts until the store answers again.
///
/// \code{.cpp}
///  stormguard::sim::strategy s = *stormguard::sim::find_strategy("full+fleet");
///  s.fleet_store.round_trip = std::chrono::milliseconds(10);
///  s.fleet_store.outage = stormguard::sim::fleet_store_outage{10s, 20s};
/// \endcode
///
/// The store serves `capacity` syncs per second, one at a time in the order they arrive (one Redis
/// runs one script at a time): beyond it syncs queue, their answers come later by their wait, and
/// one that waits past `timeout` fails there although the store still applies it (Redis runs a
/// script whose client has given up; the budget keeps its deltas, and its next sync counts them
/// again). So the model shows where one store saturates: `strategy_result::store_syncs`,
/// `store_sync_timeouts` and `store_busiest_second` report its load.
///
/// A client acts (and so syncs) only when one of its requests does; a background syncer also
/// syncs an idle process every max_sync_interval: the model replays the latest such sync when the
/// client next acts (see src/sim/engine/include/stormguard_engine/fleet_sync.hpp). For a budget
/// whose claims follow need (fleet_budget_options::ask_for_credit) the model runs each client's
/// background syncer on time instead (a sync sync_interval after a request, an idle one every
/// max_sync_interval), and its asks go to the store with their round trip, which delays the retry
/// (docs/budgets.md, "Claims that follow need"). Plain values.
#ifndef STORMGUARD_SIM_FLEET_STORE_HPP
#define STORMGUARD_SIM_FLEET_STORE_HPP

#include <chrono>
#include <optional>

#include "stormguard/clock.hpp"
#include "stormguard/fleet_budget.hpp"

namespace stormguard::sim {

/// A window of the scenario's clock in which the store does not answer: [start, end).
struct fleet_store_outage {
  duration start{};  ///< from the scenario's start
  duration end{};    ///< > start
  friend bool operator==(const fleet_store_outage&, const fleet_store_outage&) = default;
};

/// The store of a fleet budget, as the simulator models it.
struct fleet_store_model {
  /// One sync's round trip: its answer reaches the client this long after it was sent. In
  /// [0, 10 s]; default 1 ms (Redis on the same network).
  duration round_trip = std::chrono::milliseconds(1);
  /// How long a sync that the store does not answer takes to fail (the syncer's command
  /// timeout, redis_sync_options::timeout). In [1 ms, 10 s]; default 100 ms.
  duration timeout = std::chrono::milliseconds(100);
  /// The syncs per second the store serves, in [1, 10^9], or +infinity: no limit (syncs never
  /// wait for each other). Default 29,000: one Redis 7 on the 2 shared cores the figures of
  /// docs/budgets.md ("Store load") were measured on saturated at 29,300–32,400 syncs/s of
  /// fleet protocol 3 (`build/bench/fleet_store_benchmark`), the lowest rounded down. The
  /// simulator throws std::invalid_argument naming `fleet_store.capacity` and the value for one
  /// outside that range (NaN included).
  double capacity = fleet_budget::k_measured_store_capacity;
  /// When the store is away, if ever.
  std::optional<fleet_store_outage> outage;
  /// true: the store is real, not modelled (`stormguard lab --fleet-store`): the engine runs no
  /// sync step, and the caller keeps each client's budget in step with the store itself (the
  /// lab's fleet_options::attach_fleet_budget). Default false (the model above).
  bool external = false;
  friend bool operator==(const fleet_store_model&, const fleet_store_model&) = default;
};

}  // namespace stormguard::sim

#endif  // STORMGUARD_SIM_FLEET_STORE_HPP
