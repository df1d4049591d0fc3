// SPDX-License-Identifier: Apache-2.0
// `stormguard lab --fleet-store URL|auto --processes P`: the lab fleet spread over P OS processes
// whose fleet budgets share a real Redis (stormguard::fleet), the server in this process. Each
// strategy gets a fresh server and a fresh fleet key; the P workers are this executable again
// (`lab ... --fleet-worker K/P`, hidden options), each running lab::fleet_part K of the scenario
// from one agreed steady-clock instant, its clients' budgets synced by one thread per worker off
// the fleet's thread (no attempt waits on Redis). This process merges the parts with the server's
// counters (lab::merge_parts) and sets each next to the simulator's figures. `auto` starts a
// redis-server in a temporary directory on a loopback port for the run; `--fleet-store-kill-at T`
// (with auto) kills it T into each run, `--fleet-store-restart-at T2` starts it again on the same
// port T2 into the run (its data lost), and the simulator's column then models the same outage;
// `--fleet-store-flush-at T` (with auto) sends it FLUSHALL T into each run: a store that answers
// but has forgotten the fleet (learning mode; the simulator's store never forgets).
// Each worker reports its own sockets' failures and its syncers' counts (lab::part_report): a
// run in which any worker's sockets failed is invalid, as in the one-process lab.
#ifndef STORMGUARD_CLI_LAB_FLEET_STORE_HPP
#define STORMGUARD_CLI_LAB_FLEET_STORE_HPP

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "app/lab_fleet.hpp"
#include "stormguard/outcome.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard/sim/strategy.hpp"

namespace stormguard::cli {

/// The options of a lab run on a real fleet store.
struct lab_fleet_store_options {
  std::string store;           ///< --fleet-store: redis://... or "auto"
  int processes = 1;           ///< --processes, in [1, 64]
  std::string kill_at;         ///< --fleet-store-kill-at (a duration), or empty
  std::string restart_at;      ///< --fleet-store-restart-at (a duration after kill_at), or empty
  std::string flush_at;        ///< --fleet-store-flush-at (a duration): FLUSHALL, or empty
  std::string worker_kill_at;  ///< --fleet-worker-kill-at (a duration): SIGKILL worker 0, or empty
  std::string worker;          ///< hidden --fleet-worker K/P: this process is a worker
  std::string server_url;      ///< hidden --fleet-server
  std::int64_t start_ns = 0;   ///< hidden --fleet-start (steady clock, ns since its epoch)
  std::string key;             ///< hidden --fleet-key
  /// --transport: the workers' clients reach the server over HTTP or gRPC (the server's
  /// listener; --fleet-server is then its gRPC target).
  lab::lab_transport_kind transport = lab::lab_transport_kind::http;
  /// The worker's command line before its own options: the executable, "lab", the scenario,
  /// --scale, and each --policy (set by lab.cpp).
  std::vector<std::string> worker_base;
};

/// Whether the options ask for a run on a real store (or for a worker).
[[nodiscard]] bool wants_fleet_store(const lab_fleet_store_options& o) noexcept;

/// The run: every strategy over `o.processes` worker processes (see the file comment). An error
/// when redis-server, a server or a worker cannot be started, or a worker ends on its own with a
/// non-zero status (the error names it, its pid and its status). A worker killed by a signal, or
/// stopped alone by SIGINT/SIGTERM (exit status 128 + S while `stop` is not set), makes that
/// strategy's run invalid instead: the others' parts are reported, the reason names the worker,
/// its pid and the signal ("worker 0/4 (pid 4242) was killed by signal 9 (SIGKILL)").
[[nodiscard]] outcome<lab::lab_report, std::string> run_lab_fleet_store(
    const lab_fleet_store_options& o, const sim::scenario& s,
    std::span<const sim::strategy> strategies, const std::atomic<bool>* stop);

/// A worker: part K of P of `s` with the one strategy; prints lab::part_report_to_json on stdout
/// (of the part it ran, when `stop` ended it early: its caller then exits 128 + the signal).
/// The exit status.
int run_lab_fleet_worker(const lab_fleet_store_options& o, const sim::scenario& s,
                         const sim::strategy& strategy, const std::atomic<bool>* stop);

}  // namespace stormguard::cli

#endif  // STORMGUARD_CLI_LAB_FLEET_STORE_HPP
