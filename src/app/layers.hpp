// SPDX-License-Identifier: Apache-2.0
// app/layers.hpp (the application layer: not installed): the `layers` scenario, retries multiplying
// through a chain of services (Google SRE book, chapter 22 "Addressing Cascading Failures": "if the
// database can't service requests … and the backend, frontend, and JavaScript layers all issue 3
// retries (4 attempts), then a single user action may create 64 attempts (4^3) on the database").
//
// A chain of `layers` retrying services sits above a bottom service (the database). Top-level
// requests arrive as a Poisson process; each call at layer k makes attempts on layer k + 1, and
// an attempt fails when the downstream call failed; the bottom fails every attempt during the
// incident and succeeds otherwise. There is no network delay and no service time: only the
// backoffs take time, so the counts are those of the retry logic alone. Each layer is one service
// instance with its own generator and budget (the strategy's), and every retry decision is the
// library's retry_policy::decide. The run lasts until every call has ended.
//
// For each strategy the report has two rows: retries at every layer, and retries at the top
// layer only (the inner layers make one attempt); `bottom_amplification` is the attempts that
// reached the bottom ÷ the top-level requests, counting the top-level requests that started
// during the incident and all their attempts.
//
//   auto report = stormguard::sim::simulate_layers(stormguard::sim::layers_options{},
//                                                  stormguard::sim::builtin_strategies());
//   std::cout << stormguard::sim::format_table(report);
#ifndef STORMGUARD_APP_LAYERS_HPP
#define STORMGUARD_APP_LAYERS_HPP

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "stormguard/clock.hpp"
#include "stormguard/sim/parallel.hpp"
#include "stormguard/sim/strategy.hpp"

namespace stormguard::sim {

/// The settings of the layers scenario. Times are virtual, from the start of the run.
struct layers_options {
  std::uint64_t seed = 42;  ///< seeds the arrivals and every layer's generator
  int layers = 3;           ///< retrying services above the bottom; in [1, 6]
  /// Top-level requests per second (Poisson); > 0 and rate · duration <= 1,000,000.
  double requests_per_second = 1000.0;
  duration length = std::chrono::seconds(10);  ///< arrivals stop after it; in (0, 1 h]
  /// The bottom fails every attempt in [incident_start, incident_end); default: always.
  duration incident_start{};
  duration incident_end = duration::max();  ///< > incident_start

  friend bool operator==(const layers_options&, const layers_options&) = default;
};

/// The first violated range as a sentence naming the field and the value, or nullopt.
[[nodiscard]] std::optional<std::string> validate(const layers_options& o);

/// One row: a strategy, retrying at every layer or only at the top.
struct layers_row {
  std::string name;       ///< the strategy's name
  bool top_only = false;  ///< retries only at the top layer (inner layers: one attempt)
  /// Top-level requests that started during the incident (the denominator).
  std::int64_t top_requests = 0;
  /// The attempts that reached the bottom from those requests.
  std::int64_t bottom_attempts = 0;
  /// bottom_attempts ÷ top_requests; nullopt when no top-level request started in the incident.
  std::optional<double> bottom_amplification;
  /// layer_attempts[k]: attempts that layer k + 1 made on its downstream for those requests
  /// (layer_attempts.back() == bottom_attempts).
  std::vector<std::int64_t> layer_attempts;
  std::int64_t budget_exhausted = 0;  ///< calls (at any layer) that a budget ended
  /// Calls (at any layer) that the layer's budget rejected before their first attempt
  /// (adaptive_throttle); zero for the other budgets.
  std::int64_t throttled = 0;
  std::int64_t events = 0;  ///< events processed (arrivals and retries)

  friend bool operator==(const layers_row&, const layers_row&) = default;
};

/// The rows in order: for each strategy, its every-layer row, then (for a strategy that retries)
/// its top-only row.
struct layers_report {
  /// The options the model ran with.
  layers_options options;
  /// One row per strategy and layer setting, in the order above.
  std::vector<layers_row> rows;
};

/// Runs every strategy (both rows), the rows on `threads` threads (0 = one per hardware thread;
/// see parallel_for), telling `progress` as each row finishes. Memory follows the calls in
/// progress (an ended call's slot is reused), not all the calls of the run. The report does not
/// depend on `threads`. Deterministic; throws std::invalid_argument (validate()'s message) for
/// invalid options. Thread-safe.
[[nodiscard]] layers_report simulate_layers(const layers_options& o,
                                            std::span<const strategy> strategies,
                                            unsigned threads = 0,
                                            const progress_callback& progress = {});

/// {"scenario":"layers","seed":S,"layers":L,"strategies":[{"name":…,"retries_at":"every layer"
/// or "top layer","top_requests":…,"bottom_attempts":…,"bottom_amplification":X|null,
/// "layer_attempts":[…],"budget_exhausted":…,"throttled":…},…]}; ratios with 4 decimals. Ends
/// with a newline.
[[nodiscard]] std::string to_json(const layers_report& report);

/// `strategy,retries_at,top_requests,bottom_attempts,bottom_amplification,layer_1,…,layer_L`.
[[nodiscard]] std::string to_csv(const layers_report& report);

/// A header, one row per (strategy, retries at), and a line comparing with 4^L.
[[nodiscard]] std::string format_table(const layers_report& report);

}  // namespace stormguard::sim

#endif  // STORMGUARD_APP_LAYERS_HPP
