// SPDX-License-Identifier: Apache-2.0
// app/report.hpp (the application layer: not installed): the simulator's results as JSON, CSV and a
// human-readable table.
//
// Every output is a pure function of the report, with fixed number formatting, so the same
// scenario and seed give byte-identical text on every run and platform.
//
//   auto report = stormguard::sim::simulate(stormguard::sim::friday_night(),
//                                           stormguard::sim::builtin_strategies());
//   std::cout << stormguard::sim::format_table(report);
#ifndef STORMGUARD_APP_REPORT_HPP
#define STORMGUARD_APP_REPORT_HPP

#include <string>

#include "stormguard/sim/simulator.hpp"

namespace stormguard::sim {

/// One JSON object, keys in this order: "scenario" (the name), "seed", "strategies" (an array of
/// objects: name, logical_requests, attempts, amplification, incident_amplification,
/// peak_load_ratio, success_ratio, p99_latency_ms, recovery_s, successes, failures, timeouts,
/// in_flight_attempts, attempts_exhausted, budget_exhausted, throttled, requests_in_flight,
/// wasted_work, incident_logical_requests, incident_attempts, lost). Ratios have 4 decimals,
/// milliseconds and seconds 1 decimal; a metric without a value is null. Ends with a newline.
[[nodiscard]] std::string to_json(const simulation_report& report);

/// One strategy's object of to_json(simulation_report) (the same keys, in the same order, no
/// newline); `stormguard lab --json` nests it as "lab" and "sim".
[[nodiscard]] std::string to_json(const strategy_result& result);

/// The strategy's time series as CSV with a header line:
/// `t,logical_requests,attempts,successes,failures,timeouts,queue_length`, one row per 1-s bin
/// (t = the bin's start in whole seconds).
[[nodiscard]] std::string to_csv(const strategy_result& result);

/// A header line describing the scenario, one table row per strategy, and a few lines of
/// interpretation computed from the numbers (which strategies recovered, the highest and lowest
/// amplification during the incident).
[[nodiscard]] std::string format_table(const simulation_report& report);

/// The header line of format_table: the scenario in one sentence, with its capacity.
[[nodiscard]] std::string describe(const scenario& s);

}  // namespace stormguard::sim

#endif  // STORMGUARD_APP_REPORT_HPP
