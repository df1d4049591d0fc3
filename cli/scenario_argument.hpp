// SPDX-License-Identifier: Apache-2.0
// The SCENARIO argument of simulate, serve and lab: a built-in time-series scenario by name, else
// a scenario file; one place for the lookup and its messages.
#ifndef STORMGUARD_CLI_SCENARIO_ARGUMENT_HPP
#define STORMGUARD_CLI_SCENARIO_ARGUMENT_HPP

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "stormguard/sim/scenario.hpp"

namespace stormguard::cli {

/// The time-series scenario `argument` names: a built-in (sim::builtin_scenario) or a scenario
/// file (sim::load_scenario). Otherwise prints why through report_error(`command`, ...) and
/// returns nullopt (a usage error: exit 2): for `brooker-occ` or `layers`, that they are models
/// without a time series (`serve` and `lab` cannot run them; `simulate` never asks); for a file
/// that cannot be read or is invalid, the loader's message (escaped), followed by the list of the
/// built-ins when the argument is not a file at all (a misspelt built-in, "metastabl").
[[nodiscard]] std::optional<sim::scenario> load_scenario_argument(std::string_view command,
                                                                  const std::string& argument);

/// Registers the required SCENARIO positional of `serve` and `lab` on `app`, into `argument`.
CLI::Option* add_scenario_argument(CLI::App& app, std::string& argument);

}  // namespace stormguard::cli

#endif  // STORMGUARD_CLI_SCENARIO_ARGUMENT_HPP
