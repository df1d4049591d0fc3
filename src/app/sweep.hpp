// SPDX-License-Identifier: Apache-2.0
// app/sweep.hpp (the application layer: not installed): the load sweep, which finds for each
// strategy the demand above which a system no longer recovers from its incident (the metastable
// region of Bronson et al., "Metastable Failures in Distributed Systems", HotOS 2021).
//
// The sweep runs the scenario once per load (requests_per_second = LO, LO + STEP, …, HI) and
// strategy, in parallel (parallel.hpp), and records whether goodput recovered after the incident
// (strategy_result::recovery_s). A strategy's stable region is the loads up to the last one from
// which every lower load of the sweep recovered.
//
//   auto report = stormguard::sim::sweep_load(stormguard::sim::metastable(),
//                                             stormguard::sim::builtin_strategies(),
//                                             {50, 350, 10});
//   std::cout << stormguard::sim::format_table(report);
#ifndef STORMGUARD_APP_SWEEP_HPP
#define STORMGUARD_APP_SWEEP_HPP

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "stormguard/sim/parallel.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard/sim/simulator.hpp"
#include "stormguard/sim/strategy.hpp"

namespace stormguard::sim {

/// The loads of a sweep, in logical requests per second: from, from + step, … up to and including
/// `to` (within a relative 1e-9, so 0.1 steps reach their end despite rounding).
struct load_range {
  double from = 0.0;  ///< > 0
  double to = 0.0;    ///< >= from
  double step = 0.0;  ///< > 0; at most 10,000 loads in all
};

/// The range's problem as a sentence naming the part and the value ("load sweep step must be
/// > 0, got 0"), or nullopt.
[[nodiscard]] std::optional<std::string> validate(const load_range& range);

/// The loads of `range`, ascending: from + k · step rounded to 12 significant digits (so that
/// 0.1:0.3:0.1 gives 0.1, 0.2, 0.3 and not 0.30000000000000004). Precondition: validate(range)
/// is nullopt.
[[nodiscard]] std::vector<double> loads_of(const load_range& range);

/// One run of the sweep.
struct load_point {
  double load = 0.0;                             ///< requests_per_second of the run
  std::string strategy;                          ///< the strategy's name
  std::optional<double> recovery_s;              ///< as strategy_result::recovery_s
  std::optional<double> success_ratio;           ///< as strategy_result::success_ratio
  std::optional<double> incident_amplification;  ///< as strategy_result::incident_amplification
  double after_attempt_rate = 0.0;  ///< mean attempts/s over the whole seconds after the incident

  /// True when the run recovered (recovery_s is set).
  [[nodiscard]] bool recovered() const noexcept { return recovery_s.has_value(); }
  friend bool operator==(const load_point&, const load_point&) = default;
};

/// Where a strategy stops recovering.
struct stability_limit {
  /// The strategy's name.
  std::string strategy;
  /// The highest swept load at and below which every swept load recovered; nullopt when even
  /// the lowest did not.
  std::optional<double> highest_stable;
  /// The lowest swept load that did not recover; nullopt when every load recovered.
  std::optional<double> lowest_unstable;

  friend bool operator==(const stability_limit&, const stability_limit&) = default;
};

/// The whole sweep: points ordered by load, then strategy (in the order given), and one limit
/// per strategy.
struct load_sweep_report {
  sim::scenario scenario;  ///< the scenario as given (its own requests_per_second is not used)
  /// The loads swept (requests_per_second).
  load_range range;
  /// The strategies' names, in the order given.
  std::vector<std::string> strategies;
  /// Every run, ordered by load, then strategy.
  std::vector<load_point> points;
  /// One limit per strategy, in the order given.
  std::vector<stability_limit> limits;
};

/// Why `s` cannot be swept over `range` with `strategies`, as a sentence, or nullopt: the range
/// is invalid (validate), or at its largest load the scenario is invalid or above the work bound
/// (check_work) — blamed on the load range ("the load range reaches 1e9 req/s, where the run of
/// \"none\" would make up to ... attempts ...; lower the end of the load range"), since the sweep
/// sets requests_per_second. sweep_load checks this first.
[[nodiscard]] std::optional<std::string> check_sweep(const scenario& s,
                                                     std::span<const strategy> strategies,
                                                     const load_range& range);

/// Runs `s` at every load of `range` with every strategy, on `threads` threads (0 = one per
/// hardware thread); the report does not depend on the thread count (each run is a pure function
/// of the scenario, seed included, and the strategy). Throws std::invalid_argument when the range
/// is invalid, the scenario has no incident that ends within the simulated time (recovery is then
/// undefined), or the scenario is invalid at some load (the message names the load).
[[nodiscard]] load_sweep_report sweep_load(const scenario& s, std::span<const strategy> strategies,
                                           const load_range& range, unsigned threads = 0,
                                           const progress_callback& progress = {});

/// {"scenario":NAME,"seed":S,"sweep":[{"load":L,"strategy":NAME,"recovered":true,
/// "recovery_s":X|null,"success_ratio":X|null,"incident_amplification":X|null,
/// "after_attempt_rate":X},…],"limits":[{"strategy":NAME,"highest_stable_load":X|null,
/// "lowest_unstable_load":X|null},…]}. Ends with a newline.
[[nodiscard]] std::string to_json(const load_sweep_report& report);

/// `load,strategy,recovered,recovery_s,success_ratio,incident_amplification,after_attempt_rate`,
/// one row per point (empty cells for undefined values).
[[nodiscard]] std::string to_csv(const load_sweep_report& report);

/// The scenario, a table of loads × strategies (recovery time or "never"), each strategy's
/// stable region, and how much each "X+…" strategy widens it compared with X.
[[nodiscard]] std::string format_table(const load_sweep_report& report);

/// One strategy at one fleet size of a clients sweep: the strategy's figures with the
/// scenario's load spread over `clients` clients (each rate / clients).
struct clients_point {
  int clients = 0;                               ///< the fleet size
  std::string strategy;                          ///< the strategy's name
  std::optional<double> amplification;           ///< strategy_result::amplification
  std::optional<double> incident_amplification;  ///< strategy_result::incident_amplification
  std::optional<double> success_ratio;           ///< strategy_result::success_ratio
  std::optional<double> recovery_s;              ///< strategy_result::recovery_s
  bool recovery_measurable = false;              ///< strategy_result::recovery_measurable
  /// The fleet budget's modelled store (its busiest shard's, when kept in shards): its busiest
  /// second's syncs ÷ its capacity
  /// (strategy_result::store_busiest_second ÷ fleet_store_model::capacity; above 0.98 it is
  /// saturated and syncs queue). Empty without a fleet budget or with an unlimited store.
  std::optional<double> store_load;
};

/// A clients sweep (`simulate --sweep clients=...`): for each fleet size in the order given, one
/// point per strategy in the order given.
struct clients_sweep_report {
  sim::scenario scenario;               ///< the scenario as given (its clients are replaced)
  std::vector<int> sizes;               ///< the fleet sizes, in the order given
  std::vector<std::string> strategies;  ///< the strategies' names, in the order given
  std::vector<clients_point> points;    ///< size-major: points[k * strategies.size() + a]
};

/// Runs `s` at every fleet size of `sizes` (each in [1, 1000000]) with every strategy, on
/// parallel_runs(s, threads, runs) threads; the report does not depend on the thread count.
/// `progress` is told as each run ends. Throws what simulate throws (an invalid scenario) and
/// std::bad_alloc.
[[nodiscard]] clients_sweep_report sweep_clients(const scenario& s,
                                                 std::span<const strategy> strategies,
                                                 const std::vector<int>& sizes, unsigned threads,
                                                 const progress_callback& progress = {});

/// The clients sweep as JSON: {"scenario", "seed", "sweep": [{"clients", "strategy",
/// "amplification", "incident_amplification", "success_ratio", "recovery_s", "store_load"}...]},
/// ratios with 4 decimals and seconds with 1, as the table rounds them (null: no value). Ends with
/// a newline.
[[nodiscard]] std::string to_json(const clients_sweep_report& report);

/// One CSV row per point (clients,strategy,amplification,incident_amplification,success_ratio,
/// recovery_s,store_load), with the JSON's decimals; an empty cell where the JSON has null.
[[nodiscard]] std::string to_csv(const clients_sweep_report& report);

/// The table: one row per strategy and fleet size, grouped by strategy, with a legend.
[[nodiscard]] std::string format_table(const clients_sweep_report& report);

}  // namespace stormguard::sim

#endif  // STORMGUARD_APP_SWEEP_HPP
