// SPDX-License-Identifier: Apache-2.0
// The CLI's executors (`exec`, `http`) and a policy's fleet budget: when the policy's budget is
// of kind fleet and names a store ({"kind": "ratio", ..., "fleet": {"store": URL, "key": KEY}}),
// its Redis syncer (stormguard::fleet) is attached; in a build without stormguard::fleet
// (STORMGUARD_WITH_FLEET=OFF) one warning says the budget runs in its fallback.
//
// When the commands wait on the store: a one-shot command cannot wait for the background
// thread's first round trip, so it syncs once before its first attempt and once after its last,
// each bounded by the round trip's timeout (100 ms; a store that is down answers a refused
// connection at once); between them the syncer's thread syncs every sync_interval, off the
// attempts' path. A store that is down, slow or garbled never fails a call: the budget falls back
// to local counts and the syncer says so once on stderr (the URL redacted, never the password).
#ifndef STORMGUARD_CLI_FLEET_STORE_HPP
#define STORMGUARD_CLI_FLEET_STORE_HPP

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "stormguard/budget_kinds.hpp"
#include "stormguard/http/client.hpp"

namespace stormguard::cli {

/// The syncers of one command's budgets (none when the policy has no store). Not thread-safe
/// beyond what the hooks need (attaching may happen on the HTTP client's thread).
class fleet_syncers {
 public:
  /// `command` names the lines on stderr ("stormguard exec: ..."); `quiet` silences the log
  /// lines (not the warning that the build has no fleet component).
  fleet_syncers(std::string_view command, bool quiet);
  ~fleet_syncers();
  fleet_syncers(const fleet_syncers&) = delete;
  fleet_syncers& operator=(const fleet_syncers&) = delete;

  /// Attaches the syncer of `budget` (a fleet budget naming a store; else nothing) and syncs once
  /// (bounded by the round trip's timeout). Must be destroyed before the budget: call clear().
  void attach(any_budget& budget);
  /// The hook for http::client_options::attach_budget: attach() per host, on the key
  /// "KEY:scheme://host:port".
  http::host_budgets::attach_hook host_hook();
  /// One last sync of every syncer (bounded by the timeout each), so that this process's spend
  /// reaches the store before it exits.
  void flush();
  /// Stops and destroys the syncers attached by attach().
  void clear();

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace stormguard::cli

#endif  // STORMGUARD_CLI_FLEET_STORE_HPP
