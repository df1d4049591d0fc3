// SPDX-License-Identifier: Apache-2.0
// The built-in scenarios as embedded text (private to stormguard::sim): the files
// scenarios/<name>.json, read by CMake at configure time into a generated source file
// (cmake/builtin_scenarios.cpp.in), in the order of STORMGUARD_BUILTIN_SCENARIOS. They are the
// only definition of the built-ins: builtin_scenario() parses them.
#ifndef STORMGUARD_SRC_SIM_BUILTIN_SCENARIOS_HPP
#define STORMGUARD_SRC_SIM_BUILTIN_SCENARIOS_HPP

#include <span>
#include <string_view>

namespace stormguard::sim::embedded {

struct scenario_file {
  std::string_view name;  // the file name without ".json"
  std::string_view json;  // its contents
};

// Every built-in scenario file, in the documented order.
[[nodiscard]] const std::span<const scenario_file> builtin_scenario_files();

}  // namespace stormguard::sim::embedded

#endif  // STORMGUARD_SRC_SIM_BUILTIN_SCENARIOS_HPP
