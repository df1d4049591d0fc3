// SPDX-License-Identifier: Apache-2.0
// stormguard/lab/fleet.hpp: the scenario's client fleet on real sockets — the second half of
// `stormguard lab` — and the lab's report: each strategy measured against a real server
// (lab::server) next to the simulator's figures for the same scenario and seed.
//
//   const auto scaled = *stormguard::sim::scale_scenario(stormguard::sim::friday_night(), 0.05);
//   const std::vector<stormguard::sim::strategy> strategies{
//       *stormguard::sim::find_strategy("none"), *stormguard::sim::find_strategy("naive")};
//   auto report = stormguard::lab::run_lab(scaled, strategies, {});
//   if (!report) { std::cerr << report.error() << '\n'; return 1; }
//   std::cout << stormguard::lab::format_table(*report);
//
// The fleet (docs/lab.md "stormguard lab"): `clients` client instances, each with its own
// generator and budget, seeded as the simulator's clients are (from the scenario's seed, the
// client's index and the strategy's name); logical requests arrive as one open-loop Poisson process
// at `requests_per_second` (the simulator's arrival stream: the same arrival times) and go
// round-robin to the clients. Each attempt is one GET through http::async_client (libcurl multi on
// Asio, one thread) with the scenario's per-attempt timeout (or the strategy's); a 200 is a
// success, a 503 a failure (retried when the strategy retries 503s), a time-out or a transport
// error a timeout. The retry decision and the budget are the simulator's own code (the library's
// retry_policy and request_budget protocol) and so are the driver of arrivals, attempts and
// retries and the metrics (the simulator's engine, written once): only the clock differs — real
// steady time from the moment the server's scenario clock starts.
#ifndef STORMGUARD_LAB_FLEET_HPP
#define STORMGUARD_LAB_FLEET_HPP

#include <atomic>
#include <span>
#include <string>
#include <vector>

#include "stormguard/export.hpp"
#include "stormguard/lab/server.hpp"
#include "stormguard/outcome.hpp"
#include "stormguard/sim/parallel.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard/sim/simulator.hpp"
#include "stormguard/sim/strategy.hpp"

namespace stormguard::metrics {
class retry_metrics;
}  // namespace stormguard::metrics

namespace stormguard::lab {

/// How a fleet run reports progress, is stopped and is measured.
struct fleet_options {
  /// Called on the fleet's thread about every 100 ms with (ticks done, ticks in the run); a tick
  /// is 100 ms of the scenario. Empty = no calls.
  sim::progress_callback progress{};
  /// When set and it becomes true, the run ends within about 100 ms with the figures measured so
  /// far (e.g. set from a SIGINT handler). Must outlive the run.
  const std::atomic<bool>* stop = nullptr;
  /// When set, the fleet records its client-side Prometheus metrics there during the run
  /// (stormguard/metrics/retry_metrics.hpp; the label value is the strategy's name, the budget
  /// label its budget kind): each ended attempt by outcome (200 success, a 503 failure or
  /// not_retryable when the strategy does not retry 503s, a time-out or transport error
  /// timeout), each retry granted with its delay, each logical request's end by end_reason
  /// (throttled for one the budget did not admit) and the budget denials. Attempts still in
  /// flight at the end are not recorded. Thread-safe to scrape during the run. nullptr = none
  /// (nothing is recorded, nothing is paid). Must outlive the run.
  metrics::retry_metrics* metrics = nullptr;
};

/// What one fleet run measured.
struct fleet_result {
  /// The simulator's figures from real timestamps (series, amplification, success, p99,
  /// recovery, ...). `lost` and `wasted_work` come from the server's counters.
  sim::strategy_result result;
  /// false when the run was stopped (fleet_options::stop) before the scenario's duration.
  bool completed = true;
};

/// Runs strategy `strat`'s fleet for the scenario's duration against `srv` (serving `s`, started
/// with server_options::start_clock = false: this starts its clock). Blocks for the scenario's
/// duration in real time. The requests still in flight at the end are abandoned (counted as in
/// flight, as the simulator does). An error when the HTTP client cannot be set up. Throws
/// std::invalid_argument for a scenario that sim::validate rejects, std::bad_alloc.
/// Not thread-safe with itself on one server; independent runs on separate servers may go in
/// parallel (but share the machine's cores: the measurement wants them alone).
[[nodiscard]] STORMGUARD_EXPORT outcome<fleet_result, std::string> run_fleet(
    const sim::scenario& s, const sim::strategy& strat, server& srv,
    const fleet_options& options = {});

/// One strategy of a lab run: the lab's figures and the simulator's for the same scenario and
/// seed.
struct lab_comparison {
  /// The strategy's name.
  std::string name;
  /// The figures measured on real sockets.
  sim::strategy_result lab;
  /// The simulator's figures for the same scenario, strategy and seed.
  sim::strategy_result sim;
  bool completed = true;  ///< false for a run stopped early (its lab figures are partial)
};

/// A lab run: the scenario (as run: scaled) and one comparison per strategy run.
struct lab_report {
  /// The scenario as run (scaled).
  sim::scenario scenario;
  /// One comparison per strategy, in the order given.
  std::vector<lab_comparison> strategies;
  bool interrupted = false;  ///< stopped before every strategy ran to its end
};

/// Runs each strategy in turn, each against a fresh lab::server on 127.0.0.1 port 0, and
/// simulates it (sim::simulate) for comparison. Progress counts 100-ms ticks over all the
/// strategies. When `options.stop` becomes true the current run ends early and no further one
/// starts (lab_report::interrupted). An error (naming the address and the system's reason) when
/// a server cannot be started or the HTTP client set up. Throws std::invalid_argument for an
/// invalid scenario or one above the simulator's work bound (sim::check_work).
[[nodiscard]] STORMGUARD_EXPORT outcome<lab_report, std::string> run_lab(
    const sim::scenario& s, std::span<const sim::strategy> strategies,
    const fleet_options& options = {});

/// One JSON object: "scenario", "seed", "interrupted", "strategies" (an array, each with "name",
/// "completed", and objects "lab" and "sim", each holding the fields of `stormguard simulate
/// --json`'s strategies: sim::to_json(strategy_result)).
[[nodiscard]] STORMGUARD_EXPORT std::string to_json(const lab_report& report);

/// The table: one row per strategy, each figure as "lab / sim" (amplification, incident
/// amplification, peak load, success, p99 of successes, recovery).
[[nodiscard]] STORMGUARD_EXPORT std::string format_table(const lab_report& report);

}  // namespace stormguard::lab

#endif  // STORMGUARD_LAB_FLEET_HPP
