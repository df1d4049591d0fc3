// SPDX-License-Identifier: Apache-2.0
#include "scenario_argument.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <system_error>
#include <utility>

#include "app/models.hpp"
#include "output.hpp"

namespace stormguard::cli {

std::optional<sim::scenario> load_scenario_argument(std::string_view command,
                                                    const std::string& argument) {
  if (auto builtin = sim::builtin_scenario(argument)) return builtin;
  if (const auto& model = sim::model_for(argument); model.kind != sim::model_kind::time_series) {
    report_error(command, fmt::format("{} is a model of the simulator without a server (this "
                                      "command takes a time-series scenario: {}, or a scenario "
                                      "file)",
                                      model.name, sim::builtin_scenario_names()));
    return std::nullopt;
  }
  auto loaded = sim::load_scenario(argument);
  if (!loaded) {
    std::error_code ec;
    const std::string hint = std::filesystem::exists(argument, ec)
                                 ? ""
                                 : " (not a file, nor a built-in scenario: the built-ins are " +
                                       sim::builtin_scenario_names() + ")";
    report_error(command, printable_message(loaded.error().message) + hint);
    return std::nullopt;
  }
  return *std::move(loaded);
}

CLI::Option* add_scenario_argument(CLI::App& app, std::string& argument) {
  return app
      .add_option("scenario", argument,
                  "A built-in scenario (" + sim::builtin_scenario_names() + ") or a scenario file")
      ->type_name("SCENARIO")
      ->required();
}

}  // namespace stormguard::cli
