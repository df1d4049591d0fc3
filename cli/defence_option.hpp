// SPDX-License-Identifier: Apache-2.0
// `--defence LIST` of simulate, serve and lab: the server-side defences to run
// (stormguard/sim/defence_kinds.hpp). On simulate and lab, a comma separates rows (one run per
// defence, crossed with the strategies); `a+b` combines defences in one server; `all` is every
// kind; `none` is the server without defence. serve runs one server: a comma is an error there.
#ifndef STORMGUARD_CLI_DEFENCE_OPTION_HPP
#define STORMGUARD_CLI_DEFENCE_OPTION_HPP

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stormguard/sim/defence_kinds.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard/sim/simulator.hpp"

namespace stormguard::cli {

/// One row of --defence: the name as given and the defences it names.
struct defence_row {
  std::string name;
  sim::defence_set set;
};

/// Reads a --defence value: rows separated by commas (only when `rows_allowed`), each "none",
/// "all" or names joined by '+'. nullopt after setting `error` to a complete message.
[[nodiscard]] std::optional<std::vector<defence_row>> parse_defence_option(const std::string& text,
                                                                           bool rows_allowed,
                                                                           std::string& error);

/// The help text of --defence: "<lead>: none (default), <every kind's name>, a+b combined, <tail>".
[[nodiscard]] std::string defence_option_help(std::string_view lead, std::string_view tail);

/// `s` with its server running `row`'s defences (the parameters of the scenario's
/// server.defences kept, the defaults otherwise).
[[nodiscard]] sim::scenario with_defences(const sim::scenario& s, const defence_row& row);

/// Simulates every strategy under every defence row (rows outer, strategies inner); each
/// result's `defence` is the row's name as given.
[[nodiscard]] sim::simulation_report simulate_defences(const sim::scenario& s,
                                                       std::span<const sim::strategy> strategies,
                                                       const std::vector<defence_row>& rows,
                                                       unsigned threads,
                                                       const sim::progress_callback& progress);

}  // namespace stormguard::cli

#endif  // STORMGUARD_CLI_DEFENCE_OPTION_HPP
