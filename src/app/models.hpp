// SPDX-License-Identifier: Apache-2.0
// app/models.hpp (the application layer: not installed): the registry of the simulator's models:
// which model a scenario argument names, and which options each model takes. The command line (and
// any other front end) looks a model up here instead of branching on names.
//
//   const auto& m = stormguard::sim::model_for("layers");     // model_kind::layers
//   m.takes(stormguard::sim::model_option::strategies);       // true
//   stormguard::sim::model_for("friday-night").kind;          // model_kind::time_series
//
// Three models:
//   time_series  a scenario (built-in name or JSON file): clients, a server and an incident,
//                per-second series (simulator.hpp); sweeps its load with load=LO:HI:STEP.
//   brooker-occ  Brooker 2015's optimistic-concurrency experiment (occ.hpp); sweeps its number
//                of clients with clients=LO:HI:STEP; always compares its five algorithms.
//   layers       retries at every layer of a call stack (layers.hpp).
#ifndef STORMGUARD_APP_MODELS_HPP
#define STORMGUARD_APP_MODELS_HPP

#include <span>
#include <string>
#include <string_view>

namespace stormguard::sim {

/// The models of the simulator.
enum class model_kind { time_series, brooker_occ, layers };

/// The options a model may take, beyond the ones every model takes (seed, threads, json, csv,
/// plot).
enum class model_option : unsigned {
  strategies = 1U << 0,  ///< a choice of retry strategies (--strategy)
  trials = 1U << 1,      ///< trials per point (--trials)
  layers = 1U << 2,      ///< the depth of the call stack (--layers)
  sweep = 1U << 3,       ///< a sweep (--sweep KEY=LO:HI:STEP, KEY = sweep_key)
};

/// One model: its name as a scenario argument, what it is, the options it takes.
struct model_info {
  /// Which model it is.
  model_kind kind;
  /// The scenario argument that selects it ("brooker-occ", "layers"); for time_series, which
  /// any other argument selects, "a scenario".
  std::string_view name;
  std::string_view description;  ///< one line
  unsigned options;              ///< a set of model_option bits
  std::string_view sweep_key;    ///< the KEY of its --sweep ("load", "clients"); empty if none

  /// Whether it takes option `o`.
  [[nodiscard]] constexpr bool takes(model_option o) const noexcept {
    return (options & static_cast<unsigned>(o)) != 0;
  }
};

/// Every model, time_series first. Thread-safe (static storage).
[[nodiscard]] std::span<const model_info> models() noexcept;

/// The model a scenario argument selects: brooker-occ or layers by name, time_series for
/// anything else (a built-in scenario name, a file, or empty: the default scenario).
[[nodiscard]] const model_info& model_for(std::string_view scenario_argument) noexcept;

/// The names of the models that take option `o`, for a message: e.g. "brooker-occ" or
/// "time-series scenarios and layers".
[[nodiscard]] std::string models_taking(model_option o);

}  // namespace stormguard::sim

#endif  // STORMGUARD_APP_MODELS_HPP
