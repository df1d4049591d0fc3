// SPDX-License-Identifier: Apache-2.0
#include "policy_file.hpp"

#include <CLI/CLI.hpp>
#include <optional>

#include "output.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/sim/strategy.hpp"

namespace stormguard::cli {

namespace {

CLI::ValidationError bad_file(std::string_view flag, const config::policy_error& e) {
  std::string message = printable_message(e.message);
  if (flag.empty()) return CLI::ValidationError(std::move(message));
  return CLI::ValidationError(std::string(flag), std::move(message));
}

config::policy_reference reference_of(const std::string& value, std::string_view flag) {
  auto reference = config::parse_policy_reference(value);
  if (!reference) throw bad_file(flag, reference.error());
  return *std::move(reference);
}

constexpr std::string_view k_builtin = "builtin:";

std::vector<config::policy> load(const config::policy_reference& reference, std::string_view flag) {
  auto policies = config::load_policies(reference);
  if (!policies) throw bad_file(flag, policies.error());
  return *std::move(policies);
}

// `builtin:` (every built-in strategy, as policies) or `builtin:NAME` (one); nullopt for a value
// that does not start with "builtin:".
std::optional<std::vector<config::policy>> load_builtin(const std::string& value,
                                                        std::string_view flag) {
  if (value.substr(0, k_builtin.size()) != k_builtin) return std::nullopt;
  std::vector<config::policy> all = sim::builtin_policies();
  const std::string name = value.substr(k_builtin.size());
  if (name.empty()) return all;
  auto one = config::select_policy(all, name);
  if (!one) throw bad_file(flag, config::policy_error{"", "builtin: " + one.error().message});
  return std::vector<config::policy>{*std::move(one)};
}

void warn(std::string_view command, const config::policy_reference& reference,
          const config::policy& p) {
  for (const std::string& warning : p.warnings) {
    report_warning(command, printable_message(reference.file.string() + ": " + warning));
  }
}

}  // namespace

std::vector<config::policy> load_policy_option(std::string_view command, const std::string& value,
                                               std::string_view flag) {
  if (auto builtin = load_builtin(value, flag)) return std::move(*builtin);
  const config::policy_reference reference = reference_of(value, flag);
  std::vector<config::policy> policies = load(reference, flag);
  for (const config::policy& p : policies) warn(command, reference, p);
  return policies;
}

config::policy load_one_policy(std::string_view command, const std::string& value,
                               std::string_view flag) {
  std::vector<config::policy> policies;
  if (auto builtin = load_builtin(value, flag)) {
    policies = std::move(*builtin);
  } else {
    const config::policy_reference reference = reference_of(value, flag);
    policies = load(reference, flag);
    warn(command, reference, policies.front());
  }
  if (policies.size() > 1) {
    report_log(command, "using the policy " + detail::quote_for_message(policies.front().name) +
                            ", the first of " + std::to_string(policies.size()) +
                            " in the file (write FILE:NAME for another)");
  }
  return std::move(policies.front());
}

}  // namespace stormguard::cli
