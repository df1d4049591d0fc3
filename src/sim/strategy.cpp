// SPDX-License-Identifier: Apache-2.0
#include "stormguard/sim/strategy.hpp"

#include <stdexcept>
#include <string_view>
#include <vector>

namespace stormguard::sim {

namespace embedded {
// policies/builtin-strategies.json, embedded by CMake (generated/builtin_strategies.cpp).
std::string_view builtin_strategies_json();
}  // namespace embedded

namespace {

std::vector<strategy> make_table() {
  std::vector<strategy> table;
  for (const config::policy& p : builtin_policies()) {
    strategy s = from_policy(p);
    s.scenario_retries = true;  // a scenario's max_retries replaces a built-in's
    table.push_back(std::move(s));
  }
  return table;
}

}  // namespace

std::vector<config::policy> builtin_policies() {
  // Checked at build time by the tests (PolicyFiles); a failure here is a build defect.
  auto policies = config::parse_policies(embedded::builtin_strategies_json());
  if (!policies) {
    throw std::logic_error("stormguard::sim: the built-in strategies are invalid: " +
                           policies.error().message);
  }
  return *std::move(policies);
}

std::span<const strategy> builtin_strategies() {
  static const std::vector<strategy> table = make_table();
  return table;
}

const strategy* find_strategy(std::string_view name) noexcept {
  for (const auto& s : builtin_strategies()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

strategy from_policy(const config::policy& p) {
  strategy s;
  static_cast<config::policy&>(s) = p;
  s.retries_503 = p.statuses.contains(503);
  s.scenario_retries = false;
  return s;
}

std::string strategy_names() {
  std::string names;
  for (const auto& s : builtin_strategies()) {
    if (!names.empty()) names += ", ";
    names += s.name;
  }
  return names;
}

}  // namespace stormguard::sim
