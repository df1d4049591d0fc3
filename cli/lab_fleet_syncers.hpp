// SPDX-License-Identifier: Apache-2.0
// `stormguard lab --fleet-store`, a worker's side: the Redis syncers of its clients' fleet
// budgets (one stormguard::fleet::redis_sync per client, all driven by one thread of the worker,
// off the fleet's Asio thread), and what they did during the run for the worker's report
// (lab::part_report): round trips answered and failed, rejoins, syncers that never synced, and
// the time the budgets spent in their fallback (local ratio budgets) from the run's start.
//
// The store's password: the one in the store's URL when it has one (the URL wins); otherwise,
// for a store of the user's, the value of the environment variable the policy's
// `budget.fleet.password_env` names (the worker inherits its parent's environment); none for
// `auto` (its redis-server has no password). The password is never printed.
//
// In a build without the fleet component (STORMGUARD_WITH_FLEET=OFF) nothing is attached: one
// warning says the fleet budgets use the simulator's store model.
#ifndef STORMGUARD_CLI_LAB_FLEET_SYNCERS_HPP
#define STORMGUARD_CLI_LAB_FLEET_SYNCERS_HPP

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "app/lab_fleet.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/fleet_budget.hpp"

namespace stormguard::cli {

/// Where a worker's syncers connect.
struct worker_store {
  std::string url;          ///< redis://... (may hold a password: never printed)
  bool auto_store = false;  ///< started by the lab (`--fleet-store auto`): no password
  std::string key;          ///< the run's fleet key
  std::string label;        ///< "lab worker K/P", for the lines on stderr
  std::size_t part = 0;     ///< K: the syncers' client ids are "pK-cN"
  /// The run's start on the steady clock: fallback time counts from here.
  std::chrono::steady_clock::time_point start{};
};

/// The syncers of one worker. Not copyable; the hook may be called from the fleet's thread.
class worker_syncers {
 public:
  /// Starts the syncing thread (with the fleet component).
  explicit worker_syncers(worker_store store);
  /// Stops the thread (as finish()).
  ~worker_syncers();
  worker_syncers(const worker_syncers&) = delete;
  worker_syncers& operator=(const worker_syncers&) = delete;

  /// lab::fleet_options::attach_fleet_budget: a syncer for the client's budget; nullptr without
  /// the fleet component.
  [[nodiscard]] std::function<std::shared_ptr<void>(std::size_t, fleet_budget&, clock&)> hook();
  /// Stops the thread and adds the syncers' counts (those destroyed by the run and any left) to
  /// `out`: fleet_syncs, fleet_sync_errors, fleet_rejoins, fleet_syncers, fleet_never_synced,
  /// fleet_fallback_s, fleet_forgotten (and the earliest fleet_forgotten_at_s).
  void finish(lab::part_report& out);

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace stormguard::cli

#endif  // STORMGUARD_CLI_LAB_FLEET_SYNCERS_HPP
