// SPDX-License-Identifier: Apache-2.0
// app/lab_fleet.hpp (the application layer: not installed): the scenario's client fleet on real
// sockets — the second half of `stormguard lab` — and the lab's report: each strategy measured
// against a real server (lab::server) next to the simulator's figures for the same scenario and
// seed.
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
#ifndef STORMGUARD_APP_LAB_FLEET_HPP
#define STORMGUARD_APP_LAB_FLEET_HPP

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "stormguard/clock.hpp"
#include "stormguard/fleet_budget.hpp"
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

/// How the lab's clients reach the server: HTTP/1.1 (the server's URL) or gRPC (`lab --transport
/// grpc`: the server's stormguard.lab.v1.Scenario/Call, app/lab_grpc.hpp, through
/// stormguard::grpc::client; only in a build with gRPC, lab_has_grpc()).
enum class lab_transport_kind { http, grpc };

/// True when this build can run the lab over gRPC (STORMGUARD_WITH_GRPC).
[[nodiscard]] bool lab_has_grpc() noexcept;

/// The gRPC listener beside a run's server (app/lab_grpc.hpp), kept alive by `endpoint`.
struct grpc_listener {
  std::string target;              ///< "127.0.0.1:PORT"; empty over HTTP
  std::shared_ptr<void> endpoint;  ///< the listener (null over HTTP)
  std::function<void()> stop_endpoint{};
  /// Stops the listener: after the server's stop(), which answers every call it held.
  void stop() const {
    if (stop_endpoint) stop_endpoint();
  }
};

/// Over gRPC, starts a listener for `srv`'s endpoint on 127.0.0.1 (port chosen by the system);
/// over HTTP, nothing (an empty grpc_listener). An error naming the address when it cannot
/// listen; std::invalid_argument for grpc in a build without gRPC (lab_has_grpc()).
[[nodiscard]] outcome<grpc_listener, std::string> start_grpc_listener(server& srv,
                                                                      lab_transport_kind kind);

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
  /// When set, a strategy whose budget is a fleet budget keeps it with a real store instead of
  /// the simulator's store model: called once per client before the run with (client index, its
  /// budget, the run's scenario clock — steady time from the run's start, the time the budget is
  /// given), it returns an owner (e.g. the client's stormguard::fleet::redis_sync) that the run
  /// destroys at its end, before the budget. Called on the fleet's thread; `stormguard lab
  /// --fleet-store` attaches Redis syncers. Empty = the store model (sim/fleet_store.hpp).
  std::function<std::shared_ptr<void>(std::size_t client, fleet_budget& budget,
                                      clock& scenario_clock)>
      attach_fleet_budget{};
  /// How the clients reach the server. With grpc, run_lab starts a gRPC listener beside each
  /// server and run_fleet_part's `url` is a gRPC target ("127.0.0.1:PORT"); run_fleet needs
  /// the target in `grpc_target`. A build without gRPC throws std::invalid_argument for grpc.
  lab_transport_kind transport = lab_transport_kind::http;
  /// run_fleet over gRPC: the listener's target (app/lab_grpc.hpp grpc_endpoint::address()).
  std::string grpc_target{};
};

/// What one fleet run measured.
struct fleet_result {
  /// The simulator's figures from real timestamps (series, amplification, success, p99,
  /// recovery, ...). `lost` and `wasted_work` come from the server's counters.
  sim::strategy_result result;
  /// false when the run was stopped (fleet_options::stop) before the scenario's duration.
  bool completed = true;
  /// Attempts that ended without a response other than by their time-out: a connect that
  /// failed (the lab's own socket() or connect(), e.g. out of descriptors: EMFILE, ENFILE) or a
  /// connection lost. The lab's server never refuses or drops a connection as an answer (its
  /// answers are 200, 503 or silence), so each is the lab's own failure, not the scenario's.
  std::int64_t transport_failures = 0;
  /// The first such failure's message (libcurl's), "" when none.
  std::string first_transport_failure;
  /// The server's accept() failures (out of descriptors) and connections it closed at once at
  /// its connection cap (server_stats::accept_errors, connections_refused): the lab's too.
  std::int64_t accept_errors = 0;
  std::int64_t connections_refused = 0;  ///< see accept_errors
};

/// Runs strategy `strat`'s fleet for the scenario's duration against `srv` (serving `s`, started
/// with server_options::start_clock = false: this starts its clock). Blocks for the scenario's
/// duration in real time. The requests still in flight at the end are abandoned (counted as in
/// flight, as the simulator does). An error when the HTTP client cannot be set up. Throws
/// std::invalid_argument for a scenario that sim::validate rejects, std::bad_alloc.
/// Not thread-safe with itself on one server; independent runs on separate servers may go in
/// parallel (but share the machine's cores: the measurement wants them alone).
[[nodiscard]] outcome<fleet_result, std::string> run_fleet(const sim::scenario& s,
                                                           const sim::strategy& strat, server& srv,
                                                           const fleet_options& options = {});

/// One part of a fleet spread over several processes (`stormguard lab --processes P`): the clients
/// and arrivals of `part` (a fleet_part of the scenario) against a server that another process
/// runs at `url`, from the steady time `start` (the server's scenario clock starts then; steady
/// time is one clock for every process of the machine). Blocks until start + the scenario's
/// duration. The result holds what the clients measured, with the part's own transport failures
/// (fleet_result::transport_failures; accept_errors and connections_refused stay 0: the server is
/// another process's); merge_parts adds the server's counters and the other parts. Errors and
/// exceptions as run_fleet.
[[nodiscard]] outcome<fleet_result, std::string> run_fleet_part(
    const sim::scenario& part, const sim::strategy& strat, const std::string& url,
    std::chrono::steady_clock::time_point start, const fleet_options& options = {});

/// Part `k` (from 0) of `parts` of scenario `s`'s client fleet: the clients split as evenly as
/// whole clients allow (the first clients % parts parts get one more; the parts add up to
/// `s.clients`) and requests_per_second in proportion (every client sends requests_per_second ÷
/// clients, as in the simulator), its arrivals seeded from (seed, k) so that parts do not arrive
/// in step. The server's settings are unchanged (one server serves every part). `parts` in
/// [1, min(64, s.clients)], k < parts; throws std::invalid_argument otherwise.
[[nodiscard]] sim::scenario fleet_part(const sim::scenario& s, std::size_t k, std::size_t parts);

/// The parts' results as one fleet's (per-attempt and per-request counters and the 1-s series
/// summed; amplification, incident amplification, success, peak load and recovery recomputed as
/// the simulator computes them, for the whole scenario `s`), with the server's counters `st`
/// (lost, wasted work, served, rejected, dropped). The p99 and p99.9 latencies are the largest
/// of the parts' (an upper bound of the fleet's), and so is store_busiest_second.
[[nodiscard]] sim::strategy_result merge_parts(const sim::scenario& s,
                                               std::span<const sim::strategy_result> parts,
                                               const server_stats& st);

/// The version of the lab's multi-process wire (the lines of part_to_json and
/// part_report_to_json, key "wire"): 1 was stormguard 0.1 (no "wire" key), 2 is stormguard 0.2 and
/// later. A change of the keys or of their meaning is a new version (docs/releases.md).
inline constexpr int k_lab_wire_version = 2;

/// A part's result for the process that merges it: one line of JSON with the wire version
/// ("wire": k_lab_wire_version), every counter and the 1-s series. part_from_json reads it back;
/// throws std::invalid_argument for text that is not such a line.
[[nodiscard]] std::string part_to_json(const sim::strategy_result& r);
/// Reads back one line of part_to_json; throws std::invalid_argument (naming what is wrong) for
/// text that is not such a line, and for a line of another wire version (one without "wire" is
/// stormguard 0.1's): the message names both versions.
[[nodiscard]] sim::strategy_result part_from_json(std::string_view text);

/// What a worker process of a fleet spread over processes reports to the one that merges the
/// parts: its clients' figures, its own sockets' failures (which make the merged run invalid, as
/// in a one-process lab) and, when its budgets were kept on a real store, its syncers' counts.
struct part_report {
  /// The clients' figures (as part_to_json writes them).
  sim::strategy_result result;
  /// fleet_result::transport_failures of the part's run.
  std::int64_t transport_failures = 0;
  /// fleet_result::first_transport_failure of the part's run ("" when none).
  std::string first_transport_failure;
  /// Summed over the part's fleet budget syncers (stormguard::fleet::redis_sync_stats): successful
  /// round trips, failed ones, and rejoins after a failure. 0 without a real store.
  std::int64_t fleet_syncs = 0;
  std::int64_t fleet_sync_errors = 0;  ///< see fleet_syncs
  std::int64_t fleet_rejoins = 0;      ///< see fleet_syncs
  /// The part's syncers (one per client whose budget is a fleet budget); 0 without a real store.
  std::int64_t fleet_syncers = 0;
  /// Of them, those whose round trips never succeeded: their budgets never joined the fleet.
  std::int64_t fleet_never_synced = 0;
  /// Seconds the part's fleet budgets spent in their fallback (local ratio budgets) from the
  /// run's start, summed over the syncers (at most fleet_syncers × the run's length).
  double fleet_fallback_s = 0;
  /// Syncs that found the store had forgotten the fleet (another epoch: restarted empty,
  /// flushed, evicted, failed over; stormguard::fleet::redis_sync_stats::forgotten), summed over
  /// the part's syncers: each started a learning window.
  std::int64_t fleet_forgotten = 0;
  /// The earliest of those syncs, in seconds from the run's start (each syncer's last one);
  /// -1 when none.
  double fleet_forgotten_at_s = -1;
};

/// One line of JSON: part_to_json(r.result)'s keys, then "transport_failures",
/// "first_transport_failure", "fleet_syncs", "fleet_sync_errors", "fleet_rejoins",
/// "fleet_syncers", "fleet_never_synced", "fleet_fallback_s", "fleet_forgotten" and
/// "fleet_forgotten_at_s".
[[nodiscard]] std::string part_report_to_json(const part_report& r);
/// Reads back one line of part_report_to_json (a line of part_to_json reads with the added
/// counts 0); throws std::invalid_argument (naming what is wrong) for text that is neither.
[[nodiscard]] part_report part_report_from_json(std::string_view text);

/// Why a fleet run spread over processes measures the lab rather than the scenario, as run_lab
/// decides for one process: any part's transport failures (summed; the first part's first
/// message that is not empty), or the server's accept() failures or connections refused at its
/// cap (`st`). "" when the run is valid.
[[nodiscard]] std::string parts_invalid_reason(std::span<const part_report> parts,
                                               const server_stats& st);

/// The share of a run's syncer-time above which a fleet run on a real store that was not stopped
/// on purpose is invalid (parts_store_reason): its budgets ran mostly on local counts, while the
/// simulator's column models a working store.
inline constexpr double k_max_fallback_share = 0.1;

/// Why a fleet run on a real store (`store`: the URL, printed redacted, or "auto ...") measured
/// budgets that did not share the store, while nothing stopped the store on purpose: a syncer
/// that never synced, or the budgets in their fallback for more than k_max_fallback_share of
/// the syncers' time over `length` (the counts, the share and the store named). "" when the
/// store served the run, or when the parts used no store (fleet_syncers 0).
[[nodiscard]] std::string parts_store_reason(std::span<const part_report> parts,
                                             std::string_view store, duration length);

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
  /// false when the lab's own sockets failed during the run (fleet_result::transport_failures,
  /// accept_errors, connections_refused): descriptors ran out, or connects were dropped; or, for
  /// a fleet on a real store, when the store did not serve the run (parts_store_reason). Its
  /// figures measure the lab, not the scenario, and must not be compared with the simulator's.
  bool valid = true;
  /// Why the run is invalid (counts and the first failure's message); "" when valid.
  std::string invalid_reason;
  /// For a fleet on a real store: the syncs that found the store had forgotten the fleet
  /// (part_report::fleet_forgotten, summed), and the earliest, in seconds from the run's start
  /// (-1 when none). Each starts a learning window: for one window no process is handed more
  /// than it held (stormguard/fleet/redis_sync.hpp).
  std::int64_t store_forgot = 0;
  double store_forgot_at_s = -1;  ///< see store_forgot
  /// The forgetting fell where it changes the incident's figures: before the incident's end and
  /// less than one window before its start.
  bool store_forgot_in_incident = false;
};

/// Whether a store that forgot the fleet at `at` (from the run's start) changes the incident's
/// figures of `s`: at < incident end and at + the fleet budget's window (`window`) > incident
/// start.
[[nodiscard]] bool forgetting_touches_incident(const sim::scenario& s, duration at,
                                               duration window) noexcept;

/// A lab run: the scenario (as run: scaled) and one comparison per strategy run.
struct lab_report {
  /// The scenario as run (scaled).
  sim::scenario scenario;
  /// One comparison per strategy, in the order given.
  std::vector<lab_comparison> strategies;
  bool interrupted = false;  ///< stopped before every strategy ran to its end
  /// The transport the clients' attempts took (`lab --transport`).
  lab_transport_kind transport = lab_transport_kind::http;

  /// Every strategy's run is valid (lab_comparison::valid).
  [[nodiscard]] bool valid() const noexcept {
    for (const lab_comparison& c : strategies) {
      if (!c.valid) return false;
    }
    return true;
  }
};

/// Runs each strategy in turn, each against a fresh lab::server on 127.0.0.1 port 0, and
/// simulates it (sim::simulate) for comparison. Progress counts 100-ms ticks over all the
/// strategies. When `options.stop` becomes true the current run ends early and no further one
/// starts (lab_report::interrupted). An error (naming the address and the system's reason) when
/// a server cannot be started or the HTTP client set up. Throws std::invalid_argument for an
/// invalid scenario or one above the simulator's work bound (sim::check_work).
[[nodiscard]] outcome<lab_report, std::string> run_lab(const sim::scenario& s,
                                                       std::span<const sim::strategy> strategies,
                                                       const fleet_options& options = {});

/// One JSON object: "scenario", "seed", "interrupted", "transport" ("http" or "grpc"),
/// "strategies" (an array, each with "name",
/// "completed", and objects "lab" and "sim", each holding the fields of `stormguard simulate
/// --json`'s strategies: sim::to_json(strategy_result); then "valid", "invalid_reason" (null when
/// valid) and "comparable": false for a run stopped early, whose lab figures cover only the time
/// it ran while the simulator's cover the whole scenario), then "valid" (every strategy valid).
[[nodiscard]] std::string to_json(const lab_report& report);

/// The table (its first line names the transport when it is gRPC): one row per strategy, each
/// figure as "lab / sim" (amplification, incident
/// amplification, peak load, success, p99 of successes, recovery); a row stopped early says its
/// figures are not comparable, an invalid one says why after the table.
[[nodiscard]] std::string format_table(const lab_report& report);

}  // namespace stormguard::lab

#endif  // STORMGUARD_APP_LAB_FLEET_HPP
